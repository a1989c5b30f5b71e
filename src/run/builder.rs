//! What the round and the race share about running one builder: the
//! environment it gets, the slot it holds, and one pipeline for an attempt
//! ([`Host::run_attempt`]): build → commit what the builder left → gates →
//! critics, ending in a typed [`BuildOutcome`].

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::run::conductor::Conductor;
use crate::run::exec::{self, Exit};
use crate::run::progress::{Check, Event, Phase, Progress};
use crate::run::slots;
use crate::state::context::Context;
use crate::state::cost::{Report, REPORT_MAX_BYTES};
use crate::state::orders::WorkOrder;
use crate::state::Verdict;
use crate::sys::error::{Error, InputError};

/// What build threads need of the repository (a `gix::Repository` is not `Sync`).
pub struct Host {
    pub repo_label: String,
    pub cwd: PathBuf,
    /// `$ARBITER_REPO`: see [`crate::run::worktree::main_top`].
    pub repo_top: PathBuf,
    missing_name: bool,
    missing_email: bool,
    /// `arbiter.allowEmpty`: a build that changes nothing is done, not a
    /// `no_change` failure.
    allow_empty: bool,
    /// The conductor's repository, whose worktrees the builds run in.
    repo: gix::ThreadSafeRepository,
    caches: crate::sys::caches::Caches,
}

impl Host {
    /// The conductor's caches, which its builds share.
    pub fn caches(&self) -> &crate::sys::caches::Caches {
        &self.caches
    }

    pub fn new(ctx: &Context) -> Result<Host, Error> {
        Ok(Host {
            repo_label: ctx
                .workdir
                .as_deref()
                .unwrap_or(ctx.repo.git_dir())
                .display()
                .to_string(),
            cwd: ctx.cwd.clone(),
            repo_top: crate::run::worktree::main_top(ctx)?,
            missing_name: ctx.config_string("user.name").is_none(),
            missing_email: ctx.config_string("user.email").is_none(),
            allow_empty: ctx.config_bool("arbiter.allowEmpty")?.unwrap_or(false),
            repo: ctx.repo.clone().into_sync(),
            caches: ctx.caches.clone(),
        })
    }

    /// The environment a builder gets on top of the conductor's own.
    pub fn env(
        &self,
        wo: &WorkOrder,
        attempt: u32,
        base: gix::ObjectId,
        worktree: &Path,
    ) -> Vec<(String, String)> {
        vec![
            ("ARBITER_WO".into(), wo.id.clone()),
            (
                "ARBITER_WO_FILE".into(),
                self.cwd.join(&wo.path).display().to_string(),
            ),
            ("ARBITER_TITLE".into(), wo.title.clone()),
            ("ARBITER_ATTEMPT".into(), attempt.to_string()),
            // The commit this attempt starts from; `ARBITER_ROUND_BASE` is
            // the same, its name from when every attempt of a round shared one.
            ("ARBITER_BASE".into(), base.to_string()),
            ("ARBITER_ROUND_BASE".into(), base.to_string()),
            ("ARBITER_WORKTREE".into(), worktree.display().to_string()),
            ("ARBITER_REPO".into(), self.repo_top.display().to_string()),
        ]
    }

    /// Take one machine-wide slot for `label`, reporting while waiting.
    /// `Ok(None)`: interrupted while waiting.
    pub fn take_slot(
        &self,
        slot_dir: &Path,
        cap: u32,
        label: &str,
        me: &Conductor,
        progress: &dyn Progress,
    ) -> Result<Option<slots::Slot>, String> {
        let info = slots::HolderInfo::now(self.repo_label.clone(), label.to_owned());
        let mut on_wait = |state: &slots::WaitState| {
            progress.event(&Event::SlotWait {
                wo: label.to_owned(),
                cap: state.cap,
                held: state.held,
                ahead: state.ahead,
            });
        };
        match slots::acquire(
            slot_dir,
            cap,
            &info,
            slots::Wait::Block,
            me.interrupt_flag(),
            &mut on_wait,
        ) {
            Ok(Some(slot)) => Ok(Some(slot)),
            Ok(None) | Err(Error::Interrupted) => Ok(None),
            Err(e) => Err(format!("could not take a slot: {e}")),
        }
    }

    /// Commit whatever the builder left uncommitted in `worktree`, with the
    /// work order's trailers (plus `extra_trailers`, e.g. `Arbiter-Instance: 2`).
    pub fn commit_leftovers(
        &self,
        worktree: &Path,
        wo: &WorkOrder,
        attempt: u32,
        extra_trailers: &str,
    ) -> Result<(), CommitError> {
        // git stages what `stage` leaves to it, and makes the commits it
        // cannot make plainly.
        let git = |args: &[&str]| -> Result<std::process::Output, CommitError> {
            let mut cmd = std::process::Command::new("git");
            for var in crate::git::config_env::GIT_ENV {
                cmd.env_remove(var);
            }
            if self.missing_name {
                cmd.args(["-c", "user.name=git-arbiter"]);
            }
            if self.missing_email {
                cmd.args(["-c", "user.email=git-arbiter@localhost"]);
            }
            cmd.arg("-C")
                .arg(worktree)
                .args(args)
                .stdin(std::process::Stdio::null());
            cmd.output().map_err(|e| CommitError {
                command: format!("git {}", args.first().unwrap_or(&"")),
                detail: format!("cannot run git: {e}"),
            })
        };
        let wt = self.open_worktree(worktree)?;
        let head = wt.head_commit().ok();
        let head_tree = head.as_ref().and_then(|c| c.tree_id().ok());
        // The plain case without git (see `stage`: git would read every
        // file of a worktree written this second again). Anything else, an
        // error included, is git's to do, and to report.
        let staged = head_tree
            .and_then(|t| {
                crate::git::odb::retry_transient(|| {
                    crate::git::stage::stage_all(&self.caches, &wt, t.detach())
                })
                .ok()
            })
            .flatten();
        let tree = match staged {
            Some(tree) => tree,
            None => retry_vanished_folder(|| git_add_all(&git))?,
        };
        if head_tree.is_some_and(|t| t == tree) {
            record_settled(&self.caches, &wt, worktree);
            return Ok(());
        }
        let message = format!(
            "{id}: {title}\n\nUncommitted work left by the builder, committed by git-arbiter.\n\nArbiter-WO: {id}\nArbiter-Attempt: {attempt}\n{extra_trailers}",
            id = wo.id,
            title = wo.title,
        );
        match head {
            Some(head) if commits_plainly(&wt) => {
                commit_tree(&wt, head.id, tree, &stripspace(&message))?;
                record_settled(&self.caches, &wt, worktree);
            }
            // A hook to run, a signature to make, a message to clean or
            // encode otherwise: `git commit` does what it does there. Its
            // hooks run in the worktree, so nothing is proved about it.
            _ => retry_vanished_folder(|| {
                let commit = git(&["commit", "-q", "--no-verify", "-m", &message])?;
                match commit.status.success() {
                    true => Ok(()),
                    false => Err(CommitError::from_output("git commit", &commit)),
                }
            })?,
        }
        Ok(())
    }

    /// The worktree as `git -C <worktree>` sees it, with the stand-in
    /// identity the commit needs when none is configured.
    fn open_worktree(&self, worktree: &Path) -> Result<gix::Repository, CommitError> {
        let failed = |detail: String| CommitError {
            command: "opening the worktree".into(),
            detail,
        };
        let mut wt =
            crate::run::worktree::open_linked(&self.caches, &self.repo.to_thread_local(), worktree)
                .map_err(|e| failed(e.to_string()))?;
        let mut stand_in = Vec::new();
        if self.missing_name {
            stand_in.push(("user.name", "git-arbiter"));
        }
        if self.missing_email {
            stand_in.push(("user.email", "git-arbiter@localhost"));
        }
        if !stand_in.is_empty() {
            let mut config = wt.config_snapshot_mut();
            for (key, value) in stand_in {
                config
                    .set_raw_value(key, value)
                    .map_err(|e| failed(e.to_string()))?;
            }
            config.commit().map_err(|e| failed(e.to_string()))?;
        }
        Ok(wt)
    }
}

/// Run `git_step` again when git failed as a concurrent `git gc` makes it
/// fail for a moment (`git prune` removed the object folder git had just
/// made for a new object; git tries that only once): objects are named by
/// their content, so doing it again is harmless.
fn retry_vanished_folder<T>(
    mut git_step: impl FnMut() -> Result<T, CommitError>,
) -> Result<T, CommitError> {
    const RETRIES: u32 = 5;
    let mut tries = 0;
    loop {
        match git_step() {
            Err(e) if tries < RETRIES && e.detail.contains("unable to create temporary file") => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(u64::from(tries) * 5));
            }
            done => return done,
        }
    }
}

/// `git add -A && git write-tree` through `git`: the index's tree.
fn git_add_all(
    git: &dyn Fn(&[&str]) -> Result<std::process::Output, CommitError>,
) -> Result<gix::ObjectId, CommitError> {
    // gix 0.90 has no porcelain to stage a whole worktree (`add -A`: new,
    // modified, deleted, mode changes, respecting .gitignore) beyond the
    // plain case `stage` handles.
    let add = git(&["add", "-A"])?;
    if !add.status.success() {
        return Err(CommitError::from_output("git add -A", &add));
    }
    // The index's tree, through git's cache of its subtrees (`git add`
    // kept it valid but for the folders it touched): `git commit` would
    // stat every file again and hash the whole index twice.
    let written = git(&["write-tree"])?;
    if !written.status.success() {
        return Err(CommitError::from_output("git write-tree", &written));
    }
    std::str::from_utf8(&written.stdout)
        .ok()
        .and_then(|hex| gix::ObjectId::from_hex(hex.trim().as_bytes()).ok())
        .ok_or_else(|| CommitError {
            command: "git write-tree".into(),
            detail: "it printed no object id".into(),
        })
}

/// The index of `wt` (at `dir`) was just made to hold every file but the
/// ignored ones, and HEAD now holds that index's tree: record it,
/// so giving the worktree back need not check every file again.
fn record_settled(caches: &crate::sys::caches::Caches, wt: &gix::Repository, dir: &Path) {
    let Ok(head) = wt.head_id() else { return };
    // A null checksum (`index.skipHash`) would not tell two indexes apart.
    if let Some(checksum) = crate::git::index_memo::index_file_checksum(wt).filter(|c| !c.is_null())
    {
        exec::mark_settled(caches, dir, head.detach(), checksum);
    }
}

/// Would `git commit --no-verify -m` make exactly the commit
/// [`commit_tree`] makes? Not when it runs a hook (`prepare-commit-msg`,
/// `post-commit`), signs, cleans the message by a configured mode or
/// re-encodes it.
fn commits_plainly(wt: &gix::Repository) -> bool {
    let config = wt.config_snapshot();
    let utf8 = config
        .string("i18n.commitEncoding")
        .is_none_or(|e| e.eq_ignore_ascii_case(b"utf-8") || e.eq_ignore_ascii_case(b"utf8"));
    utf8 && config.string("commit.cleanup").is_none()
        && config.boolean("commit.gpgsign") != Some(true)
        && !crate::git::hooks::present(wt, "prepare-commit-msg")
        && !crate::git::hooks::present(wt, "post-commit")
}

/// Commit `tree` onto `head` and move HEAD (its branch, when on one) there
/// by compare-and-swap, logged as `git commit` logs it.
fn commit_tree(
    wt: &gix::Repository,
    head: gix::ObjectId,
    tree: gix::ObjectId,
    message: &str,
) -> Result<(), CommitError> {
    use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
    use gix::refs::Target;
    let failed = |detail: String| CommitError {
        command: "commit".into(),
        detail,
    };
    let commit = crate::git::odb::write_signed_commit(wt, message, tree, [head])
        .map_err(|e| failed(e.to_string()))?;
    let subject = message.lines().next().unwrap_or_default();
    let locked = match wt.head_name() {
        Ok(Some(branch)) => branch.as_bstr().to_string(),
        _ => "HEAD".to_owned(),
    };
    crate::git::refguard::edit(wt, &locked, || {
        wt.edit_reference(RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: format!("commit: {subject}").into(),
                },
                expected: PreviousValue::MustExistAndMatch(Target::Object(head)),
                new: Target::Object(commit),
            },
            name: "HEAD".try_into().expect("HEAD is a valid ref name"),
            deref: true,
        })
    })
    .map_err(|e| failed(format!("moving HEAD to {commit}: {e}")))?;
    Ok(())
}

/// `message` cleaned as `git commit -m` cleans it (git's `stripspace`):
/// no trailing whitespace on a line, no blank lines at either end, runs of
/// blank lines as one, and one newline at the end.
fn stripspace(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut blank_run = false;
    for line in message
        .lines()
        .map(|l| l.trim_end_matches(|c: char| c.is_ascii_whitespace()))
    {
        if line.is_empty() {
            blank_run = !out.is_empty();
            continue;
        }
        if blank_run {
            out.push('\n');
            blank_run = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Committing what a builder left failed. Committing is git-arbiter's own
/// step, never the builder's: the cause is the machine (a full disk) or git's
/// configuration (`commit.gpgsign` without a usable key, a failing
/// `prepare-commit-msg` hook, which `--no-verify` does not skip). So no
/// attempt is spent on it: a round or race stops with exit 2 and keeps the
/// worktree holding the work (see [`kept_work_error`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("committing the builder's work: '{command}' failed: {detail}")]
pub struct CommitError {
    /// The git command that failed, e.g. `git commit`.
    pub command: String,
    /// What git said (its stderr on one line), or its exit status when it said nothing.
    pub detail: String,
}

impl CommitError {
    fn from_output(command: &str, out: &std::process::Output) -> CommitError {
        let said: Vec<&str> = std::str::from_utf8(&out.stderr)
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let detail = if said.is_empty() {
            // A failing `prepare-commit-msg` hook that prints nothing makes git silent too.
            format!("{} without a message", out.status)
        } else {
            said.join(" ")
        };
        CommitError {
            command: command.to_owned(),
            detail,
        }
    }

    pub fn is_disk_full(&self) -> bool {
        crate::sys::error::says_disk_full(&self.detail)
    }

    /// Did `git add` refuse a file the builder wrote for what it holds (a
    /// UTF-16 file without the byte order mark its `working-tree-encoding`
    /// requires, text the encoding cannot hold)? The builder's failure,
    /// not the configuration's.
    pub fn refused_the_builders_files(&self) -> bool {
        self.command == "git add -A"
            && ["BOM is required", "BOM is prohibited", "failed to encode"]
                .iter()
                .any(|said| self.detail.contains(said))
    }
}

/// Where a builder's work stayed because committing it failed.
pub struct KeptWork {
    /// The work order, or a race instance (`wo-01#2`).
    pub label: String,
    pub error: String,
    pub worktree: PathBuf,
    pub branch: String,
}

impl KeptWork {
    /// What the record keeps of it: the cause and where the work is, with
    /// the branch's commit, because the next run removes both.
    pub fn describe(&self, repo: &gix::Repository) -> String {
        let at = repo
            .try_find_reference(format!("refs/heads/{}", self.branch).as_str())
            .ok()
            .flatten()
            .and_then(|mut r| r.peel_to_id().ok())
            .map_or("an unreadable commit".into(), |id| id.to_string());
        format!(
            "{}: {}; the work is kept uncommitted in {} on branch {} at {at}",
            self.label,
            self.error,
            self.worktree.display(),
            self.branch
        )
    }
}

/// The error a round or race stops with after [`CommitError`]s (none of
/// them a full disk): the configuration is the user's to fix, exit 2.
pub fn kept_work_error(kept: &[KeptWork]) -> InputError {
    let first = kept
        .first()
        .map_or(String::new(), |k| format!("{}: {}", k.label, k.error));
    let places: Vec<String> = kept
        .iter()
        .map(|k| format!("{} (branch {})", k.worktree.display(), k.branch))
        .collect();
    InputError::new(first).hint(format!(
        "fix what made git refuse (e.g. commit.gpgsign without a usable key, a failing prepare-commit-msg hook), then run it again: no attempt was spent. Until then the builder's uncommitted work stays in {}; the next run removes it and builds afresh",
        places.join(", ")
    ))
}

/// The commit `refs/heads/<branch>` points at.
fn branch_tip(repo: &gix::Repository, branch: &str) -> Result<gix::ObjectId, String> {
    Ok(repo
        .find_reference(format!("refs/heads/{branch}").as_str())
        .map_err(|e| format!("reading {branch}: {e}"))?
        .peel_to_id()
        .map_err(|e| format!("resolving {branch}: {e}"))?
        .detach())
}

/// Why an attempt whose build exited 0 but changed nothing failed (unless
/// `arbiter.allowEmpty` or the order's `## Allow empty` says that is done).
pub const NO_CHANGE_WHY: &str =
    "no_change: the build exited 0 and changed nothing (set arbiter.allowEmpty=true, or add '## Allow empty' to the order, if that is a success)";

/// The record event of an attempt given back because a command could not run.
pub const NOT_RUNNABLE: &str = "command_not_runnable";

/// The record events of an attempt given back because its setup command
/// wrote what it may not: tracked files, or untracked ones not ignored.
pub const SETUP_MODIFIED_TRACKED: &str = "setup_modified_tracked";
pub const SETUP_LEFT_UNTRACKED: &str = "setup_left_untracked";

/// A build, gate, critic or score command the shell could not run (see
/// [`Exit::not_runnable`]), or a setup command that wrote where the order's
/// work goes: the configuration is wrong, not the builder's work. So no
/// attempt is spent on it and nothing more is started with it: builds
/// already running finish, then the round or race stops with exit 2
/// ([`not_runnable_error`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRunnable {
    /// The work order, or a race instance (`wo-01#2`).
    pub label: String,
    /// `setup`, `build`, `gate`, `critic` or `score`.
    pub kind: &'static str,
    pub command: String,
    pub worktree: PathBuf,
    pub log: PathBuf,
    pub cause: Cause,
}

/// Why a command counts as [`NotRunnable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The shell could not run it (exit 126 or 127), and the last line it
    /// logged (`sh: 1: x: not found`).
    Shell { code: i32, said: Option<String> },
    /// The setup changed tracked files, or left untracked files outside
    /// the ignored ones: they would land in the order's merge.
    SetupWrote(crate::run::pool::Dirt),
}

impl NotRunnable {
    /// `Some` when `exit` says the shell could not run `command`, which
    /// logged to `log`.
    pub fn of(
        exit: &Exit,
        label: &str,
        kind: &'static str,
        command: &str,
        worktree: &Path,
        log: &Path,
    ) -> Option<NotRunnable> {
        if !exit.not_runnable() {
            return None;
        }
        Some(NotRunnable {
            label: label.to_owned(),
            kind,
            command: command.to_owned(),
            worktree: worktree.to_owned(),
            log: log.to_owned(),
            cause: Cause::Shell {
                code: exit.code()?,
                said: last_line(log),
            },
        })
    }

    /// `Some` when the setup `command`, which just ran in the worktree
    /// `wt` (at `worktree`) and succeeded, left it other than clean:
    /// found as `git status` finds it, nothing trusted.
    pub fn of_setup(
        caches: &crate::sys::caches::Caches,
        wt: &gix::Repository,
        label: &str,
        command: &str,
        worktree: &Path,
        log: &Path,
    ) -> crate::Result<Option<NotRunnable>> {
        let dirt = crate::run::pool::dirt(caches, wt)?;
        Ok((!dirt.is_empty()).then(|| NotRunnable {
            label: label.to_owned(),
            kind: "setup",
            command: command.to_owned(),
            worktree: worktree.to_owned(),
            log: log.to_owned(),
            cause: Cause::SetupWrote(dirt),
        }))
    }

    /// The record event of the attempt it gave back.
    pub fn event(&self) -> &'static str {
        match &self.cause {
            Cause::Shell { .. } => NOT_RUNNABLE,
            Cause::SetupWrote(dirt) if !dirt.modified.is_empty() => SETUP_MODIFIED_TRACKED,
            Cause::SetupWrote(_) => SETUP_LEFT_UNTRACKED,
        }
    }

    /// One line: which command of which order, and why.
    pub fn describe(&self) -> String {
        match &self.cause {
            Cause::Shell { code, said } => {
                let meaning = if *code == 127 {
                    "command not found"
                } else {
                    "not executable"
                };
                let said = said.as_deref().map_or(String::new(), |s| format!(": {s}"));
                format!(
                    "{}: the {} command '{}' exited {code} ({meaning}){said}",
                    self.label, self.kind, self.command
                )
            }
            Cause::SetupWrote(dirt) => {
                let mut wrote = Vec::new();
                if !dirt.modified.is_empty() {
                    wrote.push(format!(
                        "changed tracked files {}",
                        crate::git::paths::list(&dirt.modified)
                    ));
                }
                if !dirt.untracked.is_empty() {
                    wrote.push(format!(
                        "left untracked files no .gitignore ignores: {}",
                        crate::git::paths::list(&dirt.untracked)
                    ));
                }
                format!(
                    "{}: the setup command '{}' {} ({})",
                    self.label,
                    self.command,
                    wrote.join(" and "),
                    self.event()
                )
            }
        }
    }
}

/// The last non-empty line of a log, from its last KiB.
fn last_line(log: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(log).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(1024))).ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    let text = String::from_utf8_lossy(&tail);
    // git-arbiter's own marker lines (see `exec::MARKER`) are not what the shell said.
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with(exec::MARKER))?;
    Some(line.chars().take(200).collect())
}

/// The error a round or race stops with after a [`NotRunnable`]: the
/// command is the user's to fix, exit 2.
pub fn not_runnable_error(failed: &NotRunnable, repo_top: &Path) -> InputError {
    if let Cause::SetupWrote(_) = failed.cause {
        return InputError::new(failed.describe()).hint(format!(
            "a setup command prepares the worktree (dependencies, build caches) and may write only files .gitignore ignores: anything else would land in the order's merge. Make it leave tracked files as they are (e.g. 'npm ci', not 'npm install', which rewrites package-lock.json) and ignore what it makes, then run it again: no attempt was spent (log: {})",
            failed.log.display()
        ));
    }
    InputError::new(failed.describe()).hint(format!(
        "commands run in the order's worktree ({}), so a relative path such as '../agent.sh' resolves there, not in the repository; \"$ARBITER_REPO\" ({}) reaches a script in the repository, e.g. '\"$ARBITER_REPO\"/scripts/agent.sh'. Fix the command and run it again: no attempt was spent (log: {}; a command that itself exits 126 or 127 is taken for this too)",
        failed.worktree.display(),
        repo_top.display(),
        failed.log.display()
    ))
}

impl Host {
    /// Does the tree of `branch`'s tip differ from that of `base`?
    fn changed_anything(
        &self,
        worktree: &Path,
        branch: &str,
        base: gix::ObjectId,
    ) -> Result<bool, String> {
        let repo = self.open_worktree(worktree).map_err(|e| e.to_string())?;
        let tree_of = |id: gix::ObjectId| {
            repo.find_commit(id)
                .and_then(|c| c.tree_id())
                .map(|t| t.detach())
                .map_err(|e| format!("reading commit {id}: {e}"))
        };
        Ok(tree_of(branch_tip(&repo, branch)?)? != tree_of(base)?)
    }

    /// Make the branch `branch` (short name, e.g. `arbiter/<id>`) hold what
    /// the builder's worktree has checked out. A builder that ran `git
    /// checkout --detach` or `git checkout -b mine` committed its work (and
    /// [`Host::commit_leftovers`] its leftovers) onto that HEAD, not onto the
    /// branch that gets merged: the branch is moved there when that HEAD
    /// contains the branch (which starts at `base`), and the worktree is put
    /// back on the branch. Anything else fails the attempt with the reason:
    /// never a `done` without the work.
    pub fn adopt_head(
        &self,
        worktree: &Path,
        branch: &str,
        base: gix::ObjectId,
    ) -> Result<(), String> {
        use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
        use gix::refs::Target;
        let repo = self.open_worktree(worktree).map_err(|e| e.to_string())?;
        let full = format!("refs/heads/{branch}");
        let head = repo.head().map_err(|e| format!("reading HEAD: {e}"))?;
        if head
            .referent_name()
            .is_some_and(|n| n.as_bstr() == full.as_str())
        {
            return self.check_descends(&repo, branch, base);
        }
        let where_ = head
            .referent_name()
            .map_or("a detached HEAD".to_owned(), |n| {
                format!("branch {}", n.shorten())
            });
        let Some(head_id) = head.id().map(|id| id.detach()) else {
            return Err(format!(
                "the builder left the worktree on {where_}, which has no commit"
            ));
        };
        let tip = branch_tip(&repo, branch)?;
        if !crate::state::context::is_ancestor(&repo, tip, head_id).map_err(|e| e.to_string())? {
            return Err(format!(
                "the builder left the worktree on {where_}, which does not contain {branch}: its work cannot be told apart"
            ));
        }
        crate::git::refguard::edit(&repo, &full, || {
            repo.reference(
                full.as_str(),
                head_id,
                PreviousValue::MustExistAndMatch(Target::Object(tip)),
                format!("arbiter: take the work the builder left on {where_}"),
            )
        })
        .map_err(|e| format!("moving {branch} to the builder's HEAD: {e}"))?;
        let name: gix::refs::FullName = full
            .as_str()
            .try_into()
            .map_err(|e| format!("branch name {full}: {e}"))?;
        // The branch now holds exactly the checked-out commit: re-attaching
        // HEAD changes no file and no index entry.
        let head: gix::refs::FullName = "HEAD".try_into().map_err(|e| format!("HEAD: {e}"))?;
        crate::git::refguard::edit(&repo, "HEAD", || {
            repo.edit_reference(RefEdit {
                change: Change::Update {
                    log: LogChange {
                        mode: RefLog::AndReference,
                        force_create_reflog: false,
                        message: format!("arbiter: back to {branch}").into(),
                    },
                    expected: PreviousValue::Any,
                    new: Target::Symbolic(name.clone()),
                },
                name: head.clone(),
                deref: false,
            })
        })
        .map_err(|e| format!("putting the worktree back on {branch}: {e}"))?;
        self.check_descends(&repo, branch, base)
    }

    /// The branch must still contain the base it was cut from (a builder may have reset it).
    fn check_descends(
        &self,
        repo: &gix::Repository,
        branch: &str,
        base: gix::ObjectId,
    ) -> Result<(), String> {
        let tip = branch_tip(repo, branch)?;
        if crate::state::context::is_ancestor(repo, base, tip).map_err(|e| e.to_string())? {
            Ok(())
        } else {
            Err(format!(
                "the builder moved {branch} off its base {}: its work cannot be told apart",
                base.to_hex_with_len(12)
            ))
        }
    }
}

/// Report a finished build of `label` (a work order, or a race instance).
pub fn report_build(
    progress: &dyn Progress,
    label: &str,
    exit: &Exit,
    started: std::time::Instant,
) {
    progress.event(&Event::BuildFinished {
        wo: label.to_owned(),
        result: exit.clone(),
        elapsed: started.elapsed(),
    });
}

/// The recorded verdict of one command that ran for `wall`.
pub fn verdict(kind: &str, command: &str, exit: &Exit, wall: Duration) -> Verdict {
    Verdict {
        kind: kind.into(),
        command: command.into(),
        passed: exit.success(),
        exit_code: exit.code(),
        detail: (!exit.success()).then(|| exit.describe()),
        wall_ms: Some(wall.as_millis().try_into().unwrap_or(u64::MAX)),
        log: None,
        report: None,
    }
}

/// Where the attempt's `seq`th command, of `kind`, may write its cost
/// report (`$ARBITER_REPORT`): beside the attempt's `log`, one per command.
pub fn report_path(log: &Path, seq: usize, kind: &str) -> PathBuf {
    let stem = log
        .file_stem()
        .map_or_else(|| "attempt".into(), |s| s.to_string_lossy());
    log.with_file_name(format!("{stem}.{seq}-{kind}.report.json"))
}

/// The cost report a command wrote at `path`: `None` when it wrote none,
/// `Err` (why) when what it wrote is no report.
pub fn read_report(path: &Path) -> Result<Option<Report>, String> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let mut bytes = Vec::new();
    file.take(REPORT_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > REPORT_MAX_BYTES {
        return Err(format!("larger than {} KiB", REPORT_MAX_BYTES >> 10));
    }
    Report::parse(&bytes).map(Some)
}

/// The orders a conductor is building, each with the flag that stops its
/// build when it is halted (`git arbiter halt`) while in flight.
#[derive(Default)]
pub struct HaltWatch {
    watched: Mutex<Vec<(String, Arc<AtomicBool>)>>,
    /// Set by [`HaltWatch::stop`]; `wake` ends the watcher's wait at once,
    /// so a run never waits out a poll interval before it can end.
    stopped: Mutex<bool>,
    wake: std::sync::Condvar,
    /// The remote claims are leased through: a claim lost also stops its
    /// build, and what other machines did is fetched now and then.
    remote: Option<std::sync::Arc<crate::state::remote::Remote>>,
}

impl HaltWatch {
    /// A watch that also stops the builds whose leased claim was lost,
    /// when the run coordinates through `remote`.
    pub fn new(remote: Option<std::sync::Arc<crate::state::remote::Remote>>) -> Self {
        HaltWatch {
            remote,
            ..HaltWatch::default()
        }
    }

    /// Watch `id` from now on; its flag is set once a halt of it is seen.
    pub fn watch(&self, id: &str) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        self.lock().push((id.to_owned(), flag.clone()));
        flag
    }

    /// Stop watching `id` (its build ended).
    pub fn forget(&self, id: &str) {
        self.lock().retain(|(watched, _)| watched != id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Arc<AtomicBool>)>> {
        // A panic elsewhere leaves the list as it was: still usable.
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// End [`HaltWatch::run`] now.
    fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_all();
    }

    /// End [`HaltWatch::run`] when the guard goes, by a panic too: a scope
    /// that joins the watcher must never wait on it forever.
    pub fn stop_on_drop(&self) -> StopWatch<'_> {
        StopWatch(self)
    }

    /// Watch the state for halts of the watched orders that this conductor
    /// (`owner`) holds, so that only those builds stop. Polls the notes
    /// ref's tip; returns once the guard of [`HaltWatch::stop_on_drop`] goes.
    pub fn run(&self, repo: &gix::ThreadSafeRepository, owner: &str) {
        self.run_polling(repo, owner, Duration::from_millis(200));
    }

    fn run_polling(&self, repo: &gix::ThreadSafeRepository, owner: &str, poll: Duration) {
        let repo = repo.to_thread_local();
        let mut seen = None;
        let mut seen_count = 0;
        loop {
            let stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
            let (stopped, _) = self
                .wake
                .wait_timeout_while(stopped, poll, |stopped| !*stopped)
                .unwrap_or_else(|e| e.into_inner());
            if *stopped {
                return;
            }
            drop(stopped);
            if let Some(remote) = &self.remote {
                // A halt made on another machine, a takeover: seen within a
                // second or so. Out of reach, the builds go on.
                let _ = remote.refresh(&repo, Duration::from_secs(1));
            }
            let tip = repo
                .try_find_reference(crate::state::NOTES_REF)
                .ok()
                .flatten()
                .map(|r| r.target().into_owned());
            let watched = self.lock().clone();
            // A newly watched order may have been halted before it was watched.
            if tip == seen && watched.len() == seen_count {
                continue;
            }
            seen = tip;
            seen_count = watched.len();
            let ids: Vec<&str> = watched.iter().map(|(id, _)| id.as_str()).collect();
            // Unreadable state is the run's to report; here it only means no halt is seen.
            let Ok(records) = crate::state::Snapshot::read(&repo).and_then(|mut s| s.records(&ids))
            else {
                continue;
            };
            for (record, (_, flag)) in records.iter().zip(&watched) {
                // Halted by hand; or, with a remote, the claim lost (its
                // lease lapsed while the remote was out of reach, or
                // another machine took the order since).
                if record.as_ref().is_some_and(|r| {
                    let mine = r.owner.as_deref() == Some(owner);
                    (r.halted && mine)
                        || (self.remote.is_some() && !r.halted && !r.held_by(owner, r.attempts))
                }) {
                    flag.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// See [`HaltWatch::stop_on_drop`].
pub struct StopWatch<'a>(&'a HaltWatch);

impl Drop for StopWatch<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Which command of an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The setup command (`--setup`) that prepares a worktree before its builds.
    Setup,
    Build,
    Gate,
    Critic,
}

/// How an attempt's pipeline ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildOutcome {
    /// Built, its work committed, every gate and critic passed.
    Passed,
    /// A command failed (or could not be started): the builder's work or
    /// the checks said no. A critic's no blocks; the others are retried.
    Failed { step: Step, why: String },
    /// A stop or a halt of this order ended it.
    Interrupted,
    /// The shell could not run a command: the configuration is wrong.
    NotRunnable(NotRunnable),
    /// The disk filled up: the machine's fault, no attempt is spent.
    DiskFull(String),
    /// git refused to commit what the builder left: configuration again.
    CommitFailed(String),
}

/// One attempt of a work order (or of a race instance) in its worktree.
pub struct Attempt<'a> {
    /// The work order, or a race instance (`wo-01#2`), for reports.
    pub label: &'a str,
    pub wo: &'a WorkOrder,
    pub attempt: u32,
    pub base: gix::ObjectId,
    pub worktree: &'a Path,
    /// Its branch (`arbiter/<id>`, `arbiter-race/<id>/<k>`).
    pub branch: &'a str,
    pub log: &'a Path,
    /// Trailers for the commit of what the builder left, beyond the order's.
    pub trailers: &'a str,
    pub env: &'a [(String, String)],
    /// Counts the attempts between the end of their build and their
    /// leftovers committed, for a caller that lands several at once. An
    /// attempt with no check to run after that has passed once committed:
    /// it is still counted when [`Host::run_attempt`] returns `Passed`, and
    /// the caller takes it off once it has the outcome where it lands
    /// work, so that a landing never finds it neither committing nor passed.
    pub committing: Option<&'a AtomicUsize>,
}

/// One attempt counted in [`Attempt::committing`] while this lives.
struct Committing<'a>(Option<&'a AtomicUsize>);

impl<'a> Committing<'a> {
    fn start(counter: Option<&'a AtomicUsize>) -> Self {
        if let Some(counter) = counter {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        Committing(counter)
    }

    /// The attempt stays counted: its caller takes it off.
    fn hand_over(mut self) {
        self.0 = None;
    }
}

impl Drop for Committing<'_> {
    fn drop(&mut self) {
        if let Some(counter) = self.0 {
            counter.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The commands of an attempt.
pub struct Steps<'a> {
    /// Runs before the build when [`crate::run::pool::setup_needed`] says so.
    pub setup: Option<&'a str>,
    /// `arbiter.setupInputs`: globs of the paths whose change reruns the setup.
    pub setup_inputs: &'a [String],
    pub build: &'a str,
    pub gates: &'a [String],
    pub critics: &'a [String],
    pub timeout: Option<Duration>,
}

impl Steps<'_> {
    /// No gate or critic runs after the commit: an attempt that commits has
    /// passed (and stays counted as committing, see [`Attempt::committing`]).
    pub fn checks_nothing(&self) -> bool {
        self.gates.is_empty() && self.critics.is_empty()
    }
}

impl Host {
    /// Run an attempt's pipeline; the caller holds its slot. Every command's
    /// verdict goes into `verdicts`, in order. A command the shell cannot
    /// run sets `misconfigured`, so nothing more is started with it.
    #[allow(clippy::too_many_arguments)]
    pub fn run_attempt(
        &self,
        at: &Attempt<'_>,
        steps: &Steps<'_>,
        me: &Conductor,
        stop: &dyn Fn() -> bool,
        misconfigured: &AtomicBool,
        verdicts: &mut Vec<Verdict>,
        progress: &dyn Progress,
    ) -> BuildOutcome {
        let run = AttemptRun {
            host: self,
            at,
            steps,
            me,
            stop,
            misconfigured,
            progress,
        };
        if let Some(cmd) = steps.setup {
            if let Some(end) = run.setup(cmd, verdicts) {
                return end;
            }
        }
        let committing = match run.build(verdicts) {
            ControlFlow::Continue(committing) => committing,
            ControlFlow::Break(end) => return end,
        };
        let committing = match run.commit(committing) {
            ControlFlow::Continue(committing) => committing,
            ControlFlow::Break(end) => return end,
        };
        if steps.checks_nothing() {
            committing.hand_over();
            return BuildOutcome::Passed;
        }
        drop(committing);
        run.checks(verdicts).unwrap_or(BuildOutcome::Passed)
    }
}

/// One attempt's pipeline, step by step: each step returns how the attempt
/// ended when it ends there, `None` to go on.
struct AttemptRun<'a> {
    host: &'a Host,
    at: &'a Attempt<'a>,
    steps: &'a Steps<'a>,
    me: &'a Conductor,
    stop: &'a dyn Fn() -> bool,
    misconfigured: &'a AtomicBool,
    progress: &'a dyn Progress,
}

impl AttemptRun<'_> {
    /// Run the `kind` command `command` in the worktree, the attempt's
    /// `seq`th: its verdict, with the cost it reported at `$ARBITER_REPORT`.
    fn command(&self, kind: &str, command: &str, seq: usize) -> std::io::Result<(Exit, Verdict)> {
        self.command_telling_exit(kind, command, seq, &mut || {})
    }

    /// [`Self::command`], calling `exited` once the command exited, before
    /// its log says so ([`exec::run_telling_exit`]).
    fn command_telling_exit(
        &self,
        kind: &str,
        command: &str,
        seq: usize,
        exited: &mut dyn FnMut(),
    ) -> std::io::Result<(Exit, Verdict)> {
        let report = report_path(self.at.log, seq, kind);
        // An attempt number given back is used again: its report is not this one's.
        if let Err(e) = std::fs::remove_file(&report) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(e);
            }
        }
        let mut env = self.at.env.to_vec();
        env.push(("ARBITER_REPORT".into(), report.display().to_string()));
        let started = Instant::now();
        let exit = exec::run_telling_exit(
            &exec::Spec {
                command,
                cwd: self.at.worktree,
                env: &env,
                log: self.at.log,
                kind: Some(kind),
                stdout_to: None,
                timeout: self.steps.timeout,
                groups: Some(&self.me.groups_dir()),
                caches: &self.host.caches,
            },
            self.stop,
            exited,
        )?;
        let mut v = verdict(kind, command, &exit, started.elapsed());
        v.report = match read_report(&report) {
            Ok(report) => report,
            Err(why) => {
                let warning = format!(
                    "warning: the {kind} command's report {} is ignored: {why}",
                    report.display()
                );
                exec::note(self.at.log, &warning);
                self.progress.event(&Event::Warning {
                    wo: self.at.label.to_owned(),
                    detail: warning,
                });
                None
            }
        };
        Ok((exit, v))
    }

    /// The end of an attempt whose command could not run as a command
    /// (not found, not executable): the run's configuration is at fault.
    fn not_runnable(&self, exit: &Exit, kind: &'static str, command: &str) -> Option<BuildOutcome> {
        let at = self.at;
        let failed = NotRunnable::of(exit, at.label, kind, command, at.worktree, at.log)?;
        self.misconfigured.store(true, Ordering::SeqCst);
        Some(BuildOutcome::NotRunnable(failed))
    }

    /// The end an exit means for the `step` run as `kind` `command`, if it
    /// is one: interrupted, not runnable, failed.
    fn ended(
        &self,
        step: Step,
        kind: &'static str,
        command: &str,
        exit: &Exit,
    ) -> Option<BuildOutcome> {
        if *exit == Exit::Interrupted {
            return Some(BuildOutcome::Interrupted);
        }
        if let Some(outcome) = self.not_runnable(exit, kind, command) {
            return Some(outcome);
        }
        (!exit.success()).then(|| BuildOutcome::Failed {
            step,
            why: match step {
                Step::Build => format!("build {}", exit.describe()),
                _ => format!("{kind} '{command}' {}", exit.describe()),
            },
        })
    }

    /// The setup, only when its inputs changed since it last ran in this
    /// worktree; a setup that wrote tracked files ends the attempt.
    fn setup(&self, cmd: &str, verdicts: &mut Vec<Verdict>) -> Option<BuildOutcome> {
        let (at, progress, caches) = (self.at, self.progress, &self.host.caches);
        // An unreadable record of the last setup only costs a setup run.
        if !crate::run::pool::setup_needed(caches, at.worktree, at.base, self.steps.setup_inputs)
            .unwrap_or(true)
        {
            exec::note(
                at.log,
                "setup: skipped, the worktree ran it on the same setup inputs",
            );
            return None;
        }
        progress.phase(at.label, Phase::Setup);
        let (exit, v) = match self.command("setup", cmd, verdicts.len() + 1) {
            Ok(ran) => ran,
            Err(e) => {
                return Some(BuildOutcome::Failed {
                    step: Step::Setup,
                    why: format!("cannot run the setup command: {e}"),
                })
            }
        };
        verdicts.push(v);
        progress.event(&Event::Setup {
            wo: at.label.to_owned(),
            result: exit.clone(),
        });
        if let Some(end) = self.ended(Step::Setup, "setup", cmd, &exit) {
            return Some(end);
        }
        let wrote = self
            .host
            .open_worktree(at.worktree)
            .map_err(|e| e.to_string())
            .and_then(|wt| {
                NotRunnable::of_setup(caches, &wt, at.label, cmd, at.worktree, at.log)
                    .map_err(|e| e.to_string())
            });
        match wrote {
            Ok(None) => {}
            Ok(Some(failed)) => {
                exec::note(at.log, &failed.describe());
                self.misconfigured.store(true, Ordering::SeqCst);
                return Some(BuildOutcome::NotRunnable(failed));
            }
            Err(why) => {
                return Some(BuildOutcome::Failed {
                    step: Step::Setup,
                    why: format!("checking what the setup '{cmd}' changed: {why}"),
                })
            }
        }
        if let Err(e) = crate::run::pool::setup_done(caches, at.worktree, at.base) {
            // Only costs a setup run next time.
            progress.event(&Event::Warning {
                wo: at.label.to_owned(),
                detail: format!("recording the setup: {e}"),
            });
        }
        None
    }

    /// The build; once its builder exited, the attempt counts as committing
    /// until its work is committed (the returned guard).
    fn build(&self, verdicts: &mut Vec<Verdict>) -> ControlFlow<BuildOutcome, Committing<'_>> {
        let (at, steps) = (self.at, self.steps);
        self.progress.phase(at.label, Phase::Build);
        crate::sys::crash::point("build.started");
        let started = Instant::now();
        // The attempt counts as committing from the moment its builder
        // exited: a landing that looks for builds that ended must not miss
        // one whose log already says it ended.
        let mut committing = None;
        let ran = self.command_telling_exit("build", steps.build, verdicts.len() + 1, &mut || {
            committing.get_or_insert_with(|| Committing::start(at.committing));
        });
        let committing = committing.unwrap_or_else(|| Committing::start(at.committing));
        let (exit, v) = match ran {
            Ok(ran) => ran,
            Err(e) => {
                return ControlFlow::Break(BuildOutcome::Failed {
                    step: Step::Build,
                    why: format!("cannot run the build command: {e}"),
                })
            }
        };
        verdicts.push(v);
        report_build(self.progress, at.label, &exit, started);
        match self.ended(Step::Build, "build", steps.build, &exit) {
            Some(end) => ControlFlow::Break(end),
            None => ControlFlow::Continue(committing),
        }
    }

    /// Commit what the builder left and move its branch there; a build that
    /// changed nothing ends the attempt unless empty results are allowed.
    /// Once committed, the attempt is still counted as committing.
    fn commit<'c>(&self, committing: Committing<'c>) -> ControlFlow<BuildOutcome, Committing<'c>> {
        let (host, at) = (self.host, self.at);
        crate::sys::crash::point("leftovers.before");
        if let Err(e) = host.commit_leftovers(at.worktree, at.wo, at.attempt, at.trailers) {
            return ControlFlow::Break(if e.is_disk_full() {
                BuildOutcome::DiskFull(e.to_string())
            } else if e.refused_the_builders_files() {
                BuildOutcome::Failed {
                    step: Step::Build,
                    why: format!("git add refused what the build wrote: {}", e.detail),
                }
            } else {
                BuildOutcome::CommitFailed(e.to_string())
            });
        }
        if let Err(why) = host.adopt_head(at.worktree, at.branch, at.base) {
            return ControlFlow::Break(if crate::sys::error::says_disk_full(&why) {
                BuildOutcome::DiskFull(why)
            } else {
                BuildOutcome::Failed {
                    step: Step::Build,
                    why: format!("committing the builder's work: {why}"),
                }
            });
        }
        crate::sys::crash::point("leftovers.after");
        if host.allow_empty || at.wo.allow_empty {
            return ControlFlow::Continue(committing);
        }
        // Still committing while it is told whether the build changed
        // anything (a diff of everything the builder wrote).
        let why = match host.changed_anything(at.worktree, at.branch, at.base) {
            Ok(true) => return ControlFlow::Continue(committing),
            Ok(false) => NO_CHANGE_WHY.into(),
            Err(why) => format!("reading the builder's work: {why}"),
        };
        ControlFlow::Break(BuildOutcome::Failed {
            step: Step::Build,
            why,
        })
    }

    /// The gates, then the critics, each until one fails.
    fn checks(&self, verdicts: &mut Vec<Verdict>) -> Option<BuildOutcome> {
        let at = self.at;
        for (check, step, commands) in [
            (Check::Gate, Step::Gate, self.steps.gates),
            (Check::Critic, Step::Critic, self.steps.critics),
        ] {
            let kind = check.name();
            for cmd in commands {
                self.progress.phase(at.label, Phase::Check(check));
                let (exit, v) = match self.command(kind, cmd, verdicts.len() + 1) {
                    Ok(ran) => ran,
                    Err(e) => {
                        return Some(BuildOutcome::Failed {
                            step,
                            why: format!("cannot run {kind} '{cmd}': {e}"),
                        })
                    }
                };
                verdicts.push(v);
                self.progress.event(&Event::Checked {
                    check,
                    wo: at.label.to_owned(),
                    command: cmd.clone(),
                    result: exit.clone(),
                });
                if let Some(end) = self.ended(step, kind, cmd, &exit) {
                    return Some(end);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{stripspace, HaltWatch};

    /// A run ended while its watcher waited the whole poll interval before
    /// it could end (200 ms at the end of every round); stopping wakes it.
    #[test]
    fn a_halt_watch_ends_when_stopped_not_at_its_next_poll() {
        let (_tmp, root) = crate::testutil::scratch();
        let dir = crate::testutil::new_repo(&root, "repo");
        let repo = gix::open_opts(&dir, gix::open::Options::isolated())
            .expect("open")
            .into_sync();
        let watch = HaltWatch::default();
        let (ended, ended_rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let (watch, repo) = (&watch, &repo);
            scope.spawn(move || {
                watch.run_polling(repo, "me", std::time::Duration::from_secs(3600));
                let _ = ended.send(());
            });
            drop(watch.stop_on_drop());
            assert!(
                ended_rx
                    .recv_timeout(std::time::Duration::from_secs(60))
                    .is_ok(),
                "the watcher still waits for its next poll"
            );
        });
    }

    /// A report is read when there is one; what is no report (or too large
    /// to be one) says why, for the attempt's log.
    #[test]
    fn a_report_is_read_beside_the_log_and_a_bad_one_says_why() {
        let (_tmp, root) = crate::testutil::scratch();
        let log = root.join("attempt-2.log");
        let path = super::report_path(&log, 3, "gate");
        assert_eq!(path, root.join("attempt-2.3-gate.report.json"));
        assert_eq!(super::read_report(&path), Ok(None));
        std::fs::write(&path, r#"{"cost_usd":1.5,"tokens":{"output":3}}"#).expect("write");
        let report = super::read_report(&path).expect("read").expect("a report");
        assert_eq!(report.cost_usd, Some(1.5));
        std::fs::write(&path, "{").expect("write");
        assert!(super::read_report(&path).is_err());
        let huge = format!(r#"{{"cost_usd":1,"pad":"{}"}}"#, "x".repeat(70 << 10));
        std::fs::write(&path, huge).expect("write");
        assert_eq!(
            super::read_report(&path),
            Err("larger than 64 KiB".to_owned())
        );
    }

    /// Cleaned as `git stripspace` cleans it, which is what `git commit -m` does.
    #[test]
    fn messages_are_cleaned_as_git_cleans_them() {
        for message in [
            "wo-01: Title\n\nBody.\n\nArbiter-WO: wo-01\nArbiter-Attempt: 1\n",
            "wo-01: Title  \n\n\n\nBody\t\n\nArbiter-WO: wo-01\n\n\n",
            "\n\n  \nwo-01: Title\r\nmore\n",
            "no newline at the end",
            "wo-01: a\u{a0}title\u{a0}\n",
        ] {
            let (_tmp, root) = crate::testutil::scratch();
            let out =
                crate::testutil::git_with_input(&root, &root, &["stripspace"], message.as_bytes());
            assert_eq!(
                stripspace(message),
                String::from_utf8(out.stdout).expect("utf-8"),
                "{message:?}"
            );
        }
    }
}

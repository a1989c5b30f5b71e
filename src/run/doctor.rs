//! `git arbiter doctor`: find what crashes and killed processes leave behind
//! (lock files, worktrees, branches, records the integration branch
//! contradicts) and what keeps the state from being shared, and repair what
//! is provably git-arbiter's and held by no live process (nothing unmerged
//! is silently lost).
//!
//! A check never changes anything; [`run`] with `fix` applies the repairs and
//! then checks again, so a finding counts as fixed only when it is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use gix::bstr::ByteSlice;
use gix::refs::FullName;
use serde::Serialize;

use crate::run::conductor;
use crate::run::worktree::{self, BRANCH_PREFIX, INITIALIZING, RACE_BRANCH_PREFIX, STALE_LOCK_AGE};
use crate::state::context::Context;
use crate::state::orders::Orders;
use crate::state::{Record, Status, Store, NOTES_REF};
use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading HEAD: {source}")]
    ReadHead {
        #[source]
        source: gix::Error,
    },
    #[error("removing {}: {source}", path.display())]
    RemoveLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the main repository: {source}")]
    OpenMain {
        #[source]
        source: gix::Error,
    },
    #[error("listing linked worktrees: {source}")]
    ListWorktrees {
        #[source]
        source: gix::Error,
    },
    #[error("listing references: {source}")]
    ListRefs {
        #[source]
        source: gix::Error,
    },
    #[error("listing arbiter branches: {source}")]
    ListBranches {
        #[source]
        source: gix::Error,
    },
    #[error("reading a reference: {source}")]
    ReadAReference {
        #[source]
        source: gix::Error,
    },
    #[error("reading {NOTES_REF}: {source}")]
    ReadNotes {
        #[source]
        source: gix::Error,
    },
    #[error("resolving {NOTES_REF}: {source}")]
    ResolveNotes {
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}
use crate::{run::merge, run::reconcile};

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A ref's lock file (`refs/**.lock`, `packed-refs.lock`, `HEAD.lock`).
    RefLock,
    /// A worktree's `index.lock`.
    IndexLock,
    /// A worktree's `locked` file left by a killed `worktree add`.
    WorktreeLock,
    /// An arbiter worktree no record explains.
    LeftoverWorktree,
    /// An `arbiter/*` or `arbiter-race/*` branch no record explains.
    LeftoverBranch,
    /// The integration branch holds an order's merge; its record is not `done`.
    LandedNotDone,
    /// A ref of ours (the integration branch, the notes ref, a kept branch)
    /// points at an object the repository no longer has.
    MissingObject,
    /// A builder's process group a killed conductor left running.
    OrphanedBuilder,
    /// An order with no record that may have landed before a shallow
    /// clone's history begins.
    ShallowHistory,
    /// The work orders could not be read, so orders were not checked.
    Orders,
    /// A remote's fetch refspecs do not cover `refs/notes/arbiter`.
    NotesNotFetched,
    /// Local state the remote does not have (as of the last fetch).
    NotesNotPushed,
    /// A fetch refspec force-updates the local `refs/notes/arbiter`.
    NotesFetchOverwrites,
    /// The slot directory is not a private directory of this user.
    SlotDir,
    /// `git` cannot be run.
    Git,
}

impl Kind {
    /// Advice rather than a problem: said, never a reason to exit 1.
    pub fn is_advice(self) -> bool {
        matches!(self, Kind::NotesNotFetched)
    }

    /// The heading a finding is listed under.
    pub fn group(self) -> &'static str {
        match self {
            Kind::RefLock | Kind::IndexLock | Kind::WorktreeLock => "locks",
            Kind::LeftoverWorktree | Kind::LeftoverBranch => "worktrees and branches",
            Kind::LandedNotDone | Kind::ShallowHistory | Kind::Orders => "records",
            Kind::MissingObject => "refs",
            Kind::OrphanedBuilder => "processes",
            Kind::NotesNotFetched | Kind::NotesNotPushed | Kind::NotesFetchOverwrites => "notes",
            Kind::SlotDir => "slot directory",
            Kind::Git => "git",
        }
    }
}

/// One problem found.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: Kind,
    /// The file, directory, ref or config key it is about.
    pub path: String,
    pub detail: String,
    /// What a human can do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// `--fix` repairs it.
    pub fixable: bool,
    /// `--fix` ran and it is gone.
    pub fixed: bool,
    /// Advice, not a problem (see [`Kind::is_advice`]).
    pub advice: bool,
}

impl Finding {
    fn new(kind: Kind, path: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding {
            kind,
            path: path.into(),
            detail: detail.into(),
            hint: None,
            fixable: false,
            fixed: false,
            advice: kind.is_advice(),
        }
    }

    fn hint(mut self, hint: impl Into<String>) -> Finding {
        self.hint = Some(hint.into());
        self
    }

    fn fixable(mut self, fixable: bool) -> Finding {
        self.fixable = fixable;
        self
    }
}

#[derive(Serialize, Debug)]
pub struct Report {
    /// `git --version`, without the `git version ` prefix.
    pub git_version: Option<String>,
    pub integration_branch: Option<String>,
    pub slot_dir: Option<String>,
    pub findings: Vec<Finding>,
    /// What `--fix` did, one line per repair.
    pub actions: Vec<String>,
}

impl Report {
    /// Findings not fixed: the doctor's exit status is 1 while any remain.
    pub fn remaining(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| !f.fixed && !f.advice)
            .count()
    }
}

pub struct Options<'a> {
    pub fix: bool,
    /// The integration branch (`--into`); else the current branch, if any.
    pub into: Option<&'a str>,
    /// The orders directory flag (`--orders`).
    pub orders: Option<&'a Path>,
}

/// What every check needs, read once.
struct Setup {
    branch: Option<FullName>,
    orders: Option<Orders>,
    /// Why `orders` is `None`.
    orders_error: Option<Finding>,
    slot_dir: std::result::Result<PathBuf, Finding>,
    git_version: Option<String>,
}

/// Check the repository; with `fix`, repair and check again.
pub fn run(ctx: &Context, opts: &Options<'_>) -> Result<Report> {
    let branch = match opts.into {
        Some(into) => Some(ctx.integration_branch(Some(into))?),
        None => ctx
            .repo
            .head_name()
            .map_err(|source| Error::ReadHead { source })?,
    };
    let missing = ctx.orders_dir(opts.orders).is_ok_and(|dir| !dir.exists());
    let (orders, orders_error) = match ctx.load_orders(opts.orders) {
        Ok(orders) => (Some(orders), None),
        // No orders yet: every arbiter branch then belongs to an unknown order.
        Err(_) if missing => (Some(Orders::default()), None),
        Err(e) => {
            let mut finding = Finding::new(
                Kind::Orders,
                ctx.orders_dir(opts.orders)
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
                format!("work orders not checked: {e}"),
            );
            finding.hint = e.hint();
            (None, Some(finding))
        }
    };
    let config = ctx.config_string("arbiter.slotDir");
    let slot_dir =
        crate::run::slots::resolve_slot_dir(&|key| std::env::var_os(key), config.as_deref())
            .map_err(|e| {
                let mut finding = Finding::new(Kind::SlotDir, "", e.to_string());
                finding.hint = e.hint();
                finding
            });
    let setup = Setup {
        branch,
        orders,
        orders_error,
        slot_dir,
        git_version: git_version(),
    };
    let mut findings = check(ctx, &setup)?;
    let mut actions = Vec::new();
    if opts.fix && findings.iter().any(|f| f.fixable) {
        actions = fix(ctx, &setup, &findings)?;
        let after = check(ctx, &setup)?;
        let key = |f: &Finding| (f.kind, f.path.clone());
        let still: BTreeSet<_> = after.iter().map(key).collect();
        for finding in &mut findings {
            finding.fixed = !still.contains(&key(finding));
        }
        let before: BTreeSet<_> = findings.iter().map(key).collect();
        findings.extend(after.into_iter().filter(|f| !before.contains(&key(f))));
    }
    Ok(Report {
        git_version: setup.git_version,
        integration_branch: setup.branch.map(|b| b.shorten().to_string()),
        slot_dir: setup.slot_dir.ok().map(|d| d.display().to_string()),
        findings,
        actions,
    })
}

/// Builders of killed conductors that still run.
fn orphaned_builders(ctx: &Context) -> Result<Vec<Finding>> {
    Ok(conductor::orphans(ctx)?
        .into_iter()
        .map(|orphan| {
            Finding::new(
                Kind::OrphanedBuilder,
                format!("process group {}", orphan.group),
                format!(
                    "a builder of conductor {}, which was killed, still runs (its worktree is not removed while it does)",
                    orphan.conductor
                ),
            )
            .fixable(true)
        })
        .collect())
}

fn check(ctx: &Context, setup: &Setup) -> Result<Vec<Finding>> {
    let mut findings = missing_objects(ctx, setup)?;
    // Without its notes the state cannot be read: nothing else is judged.
    if findings.iter().any(|f| f.path == NOTES_REF) {
        return Ok(findings);
    }
    findings.extend(orphaned_builders(ctx)?);
    let live = live_conductors(ctx);
    let worktrees = arbiter_worktrees(ctx)?;
    let store = ctx.store()?;
    let records = records(&store, setup.orders.as_ref())?;
    // The live conductor working on order `id`, if any.
    let live_owner = |id: &str| {
        records
            .get(id)
            .filter(|r| owned_live(ctx, r))
            .and_then(|r| r.owner.clone())
    };
    findings.extend(ref_locks(ctx, setup, &live, &live_owner));
    findings.extend(index_locks(ctx)?);
    let leftovers = match &setup.orders {
        Some(orders) => {
            let tip = setup.branch.as_ref().and_then(|b| ctx.branch_tip(b).ok());
            leftovers(ctx, orders, &records, &worktrees, tip)?
        }
        None => Vec::new(),
    };
    for lock in worktree_locks(ctx, &worktrees)? {
        // cleanup_stale unlocks and removes a leftover worktree.
        let removable = leftovers.iter().any(|f| {
            f.kind == Kind::LeftoverWorktree
                && f.fixable
                && lock
                    .base
                    .as_ref()
                    .is_some_and(|b| f.path == b.display().to_string())
        });
        let live = match (&setup.orders, &lock.name) {
            (Some(orders), Some(name)) => {
                worktree::owner_of(orders, name).is_some_and(|id| live_owner(id).is_some())
            }
            _ => false,
        };
        findings.push(lock.finding(removable, live));
    }
    if let Some(e) = &setup.orders_error {
        findings.push(e.clone());
    }
    findings.extend(leftovers);
    if let (Some(orders), Some(branch)) = (&setup.orders, &setup.branch) {
        findings.extend(landed_not_done(ctx, orders, &records, branch)?);
    }
    findings.extend(notes_sharing(ctx)?);
    match &setup.slot_dir {
        Ok(dir) => findings.extend(slot_dir(dir)),
        Err(finding) => findings.push(finding.clone()),
    }
    if setup.git_version.is_none() {
        findings.push(
            Finding::new(
                Kind::Git,
                "git",
                "'git --version' failed: git is not on PATH",
            )
            .hint("install git or put it on PATH"),
        );
    }
    Ok(findings)
}

fn fix(ctx: &Context, setup: &Setup, findings: &[Finding]) -> Result<Vec<String>> {
    let wants = |kind: Kind| findings.iter().any(|f| f.kind == kind && f.fixable);
    let mut actions = Vec::new();
    let store = ctx.store()?;
    // First: a builder still running writes into the worktree it would
    // otherwise lose from under it.
    if wants(Kind::OrphanedBuilder) {
        actions.extend(conductor::end_orphans(ctx)?);
    }
    if wants(Kind::RefLock) {
        if let Some(lock) = crate::git::refguard::clear_left_by_killed_edit(&ctx.repo) {
            actions.push(format!("removed {}", lock.display()));
        }
        // As ref_locks decides: without the orders, only while no conductor runs.
        let idle = live_conductors(ctx).is_empty();
        if setup.orders.is_some() || idle {
            let unknown = Orders::default();
            let orders = setup.orders.as_ref().unwrap_or(&unknown);
            let mut snapshot = store.snapshot()?;
            let live = |r: &Record| owned_live(ctx, r);
            actions.extend(worktree::clear_stale_branch_locks(
                ctx,
                orders,
                &mut snapshot,
                &live,
                false,
            )?);
        }
        if idle {
            actions.extend(clear_stale_notes_locks(ctx)?);
        }
    }
    if let Some(orders) = &setup.orders {
        // A removable worktree locked `initializing` is a removable leftover too.
        if wants(Kind::LeftoverWorktree) || wants(Kind::LeftoverBranch) {
            // cleanup_stale stops at the first worktree it cannot remove
            // (say, one a human locked); that one stays reported.
            let tip = setup.branch.as_ref().and_then(|b| ctx.branch_tip(b).ok());
            match worktree::cleanup_stale(ctx, &store, orders, tip, &|r| owned_live(ctx, r), false)
            {
                Ok(lines) => actions.extend(lines.into_iter().filter(|l| l.starts_with("removed"))),
                Err(e) => actions.push(format!("stopped removing leftovers: {e}")),
            }
        }
        if let (true, Some(branch)) = (wants(Kind::LandedNotDone), &setup.branch) {
            actions.extend(record_landed(ctx, orders, &store, branch)?);
        }
    }
    if let (true, Ok(dir)) = (wants(Kind::SlotDir), &setup.slot_dir) {
        match crate::run::slots::prepare_dir(dir) {
            Ok(()) => actions.push(format!("made the slot directory {} private", dir.display())),
            Err(e) => actions.push(format!("left the slot directory alone: {e}")),
        }
    }
    Ok(actions)
}

/// The stored records of `orders`, by id.
fn records(store: &Store<'_>, orders: Option<&Orders>) -> Result<BTreeMap<String, Record>> {
    let ids: Vec<&str> = orders
        .into_iter()
        .flat_map(|o| o.iter().map(|wo| wo.id.as_str()))
        .collect();
    let stored = store.snapshot()?.records(&ids)?;
    Ok(ids
        .into_iter()
        .zip(stored)
        .filter_map(|(id, r)| Some((id.to_owned(), r?)))
        .collect())
}

fn owned_live(ctx: &Context, record: &Record) -> bool {
    record.status == Status::InProgress && !record.halted && conductor::owns_live(ctx, record)
}

// ---- locks ----------------------------------------------------------------

/// A lock file and the ref (or file) it locks.
struct LockFile {
    path: PathBuf,
    /// `refs/heads/main`, `packed-refs`, …
    locks: String,
    age: Duration,
}

impl LockFile {
    fn at(path: PathBuf, locks: String) -> LockFile {
        let age = age_of(&path);
        LockFile { path, locks, age }
    }
}

fn age_of(path: &Path) -> Duration {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default()
}

/// Is `name` one of git-arbiter's own refs?
fn is_arbiter_ref(name: &str) -> bool {
    name.starts_with(BRANCH_PREFIX)
        || name.starts_with(RACE_BRANCH_PREFIX)
        || name == NOTES_REF
        || name.starts_with(&format!("{NOTES_REF}-"))
}

/// Every `*.lock` file below `dir`, which holds the refs named `<prefix>/…`.
fn lock_files(dir: &Path, prefix: &str, out: &mut Vec<LockFile>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let (Ok(kind), Some(file)) = (
            entry.file_type(),
            entry.file_name().to_str().map(str::to_owned),
        ) else {
            continue;
        };
        let name = format!("{prefix}/{file}");
        if kind.is_dir() {
            lock_files(&entry.path(), &name, out);
        } else if let Some(locked) = name.strip_suffix(".lock") {
            out.push(LockFile::at(entry.path(), locked.to_owned()));
        }
    }
}

fn common_dir(ctx: &Context) -> PathBuf {
    let dir = ctx.repo.common_dir();
    if dir.is_absolute() {
        dir.to_owned()
    } else {
        ctx.repo.current_dir().join(dir)
    }
}

/// Names of the conductors running now.
fn live_conductors(ctx: &Context) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(conductor::dir(ctx)) else {
        return Vec::new();
    };
    let mut live: Vec<String> = entries
        .flatten()
        .filter_map(|e| Some(e.file_name().to_str()?.strip_suffix(".lock")?.to_owned()))
        .filter(|name| conductor::is_live(ctx, name))
        .collect();
    live.sort();
    live
}

/// Remove lock files older than [`STALE_LOCK_AGE`] on git-arbiter's notes
/// refs (`refs/notes/arbiter*`); the caller makes sure no conductor runs.
/// Locks on its branches are [`worktree::clear_stale_branch_locks`]'.
fn clear_stale_notes_locks(ctx: &Context) -> Result<Vec<String>> {
    // Notes refs sit directly in refs/notes/; other notes refs are not ours.
    let notes = Path::new(NOTES_REF).parent().expect("refs/notes");
    let mut locks = Vec::new();
    lock_files(
        &common_dir(ctx).join(notes),
        &notes.to_string_lossy(),
        &mut locks,
    );
    let mut report = Vec::new();
    for lock in locks {
        if !is_arbiter_ref(&lock.locks) || lock.age < STALE_LOCK_AGE {
            continue;
        }
        match std::fs::remove_file(&lock.path) {
            Ok(()) => report.push(format!(
                "removed stale lock {} on {} ({} old)",
                lock.path.display(),
                lock.locks,
                human_age(lock.age)
            )),
            // Another cleaner was first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(Error::RemoveLock {
                    path: lock.path.clone(),
                    source,
                }
                .into())
            }
        }
    }
    Ok(report)
}

/// Ref locks. Those on git-arbiter's branches are fixable as
/// [`worktree::clear_stale_branch_locks`] decides (unless the orders could not
/// be read), those on its notes while no conductor runs.
fn ref_locks(
    ctx: &Context,
    setup: &Setup,
    live: &[String],
    live_owner: &dyn Fn(&str) -> Option<String>,
) -> Vec<Finding> {
    let common = common_dir(ctx);
    let mut locks = Vec::new();
    lock_files(&common.join("refs"), "refs", &mut locks);
    for name in ["packed-refs", "HEAD"] {
        let path = common.join(format!("{name}.lock"));
        if path.exists() {
            locks.push(LockFile::at(path, name.to_owned()));
        }
    }
    locks.sort_by(|a, b| a.path.cmp(&b.path));
    let branch = setup.branch.as_ref().map(|b| b.as_bstr().to_str_lossy());
    locks
        .into_iter()
        .map(|lock| {
            let path = lock.path.display().to_string();
            let age = human_age(lock.age);
            let remove = format!("if no git process is running, remove {path}");
            if is_arbiter_ref(&lock.locks) {
                let detail = format!("lock on git-arbiter's ref {}, {age} old", lock.locks);
                let finding = Finding::new(Kind::RefLock, path, detail);
                // `arbiter/<id>` or `arbiter-race/<id>/<k>`: the order is the first component.
                let order = [BRANCH_PREFIX, RACE_BRANCH_PREFIX]
                    .into_iter()
                    .find_map(|p| lock.locks.strip_prefix(p))
                    .filter(|_| setup.orders.is_some())
                    .map(|rest| rest.split('/').next().unwrap_or(rest));
                let busy = match order {
                    Some(id) => live_owner(id).map(|owner| {
                        format!("a conductor is running ({owner}) with work order {id} in progress")
                    }),
                    None => (!live.is_empty())
                        .then(|| format!("a conductor is running ({})", live.join(", "))),
                };
                if let Some(busy) = busy {
                    finding.hint(format!("{busy}: run doctor again after it ends"))
                } else if lock.age < STALE_LOCK_AGE {
                    finding.hint("it may be in use right now: run doctor again in a few seconds")
                } else {
                    finding.fixable(true)
                }
            } else if lock.locks == "packed-refs"
                && crate::git::refguard::left_by_killed_edit(&ctx.repo).is_some()
            {
                Finding::new(
                    Kind::RefLock,
                    path,
                    format!(
                        "lock on packed-refs, {age} old, left by a killed git-arbiter ref edit"
                    ),
                )
                .fixable(true)
            } else if Some(lock.locks.as_str()) == branch.as_deref() {
                Finding::new(
                    Kind::RefLock,
                    path,
                    format!("lock on the integration branch {}, {age} old", lock.locks),
                )
                .hint(remove)
            } else {
                Finding::new(
                    Kind::RefLock,
                    path,
                    format!("lock on {}, {age} old", lock.locks),
                )
                .hint(remove)
            }
        })
        .collect()
}

/// `index.lock` of every worktree, and `HEAD.lock` of the linked ones (the
/// main worktree's is in [`ref_locks`]): never removed, only reported.
fn index_locks(ctx: &Context) -> Result<Vec<Finding>> {
    let common = common_dir(ctx);
    let main = ctx
        .repo
        .main_repo()
        .map_err(|source| Error::OpenMain { source })?;
    let mut places = Vec::new();
    if let Some(top) = main.workdir() {
        places.push((common.clone(), top.to_owned()));
    }
    for proxy in ctx
        .repo
        .worktrees()
        .map_err(|source| Error::ListWorktrees { source })?
    {
        let base = proxy.base().unwrap_or_else(|_| proxy.git_dir().to_owned());
        places.push((proxy.git_dir().to_owned(), base));
    }
    let mut findings = Vec::new();
    for (git_dir, top) in places {
        let index = git_dir.join("index.lock");
        if index.exists() {
            let path = index.display().to_string();
            findings.push(
                Finding::new(
                    Kind::IndexLock,
                    &path,
                    format!(
                        "index lock of the worktree {}, {} old",
                        top.display(),
                        human_age(age_of(&index))
                    ),
                )
                .hint(format!(
                    "if no git process is running in {}, remove {path}",
                    top.display()
                )),
            );
        }
        let head = git_dir.join("HEAD.lock");
        if git_dir != common && head.exists() {
            let path = head.display().to_string();
            findings.push(
                Finding::new(
                    Kind::RefLock,
                    &path,
                    format!(
                        "lock on HEAD of the worktree {}, {} old",
                        top.display(),
                        human_age(age_of(&head))
                    ),
                )
                .hint(format!("if no git process is running, remove {path}")),
            );
        }
    }
    Ok(findings)
}

/// A linked worktree's `locked` file.
struct WorktreeLock {
    file: PathBuf,
    reason: String,
    /// The worktree's folder, when its `gitdir` file can be read.
    base: Option<PathBuf>,
    /// Its name under the worktree dir, when it is one of arbiter's.
    name: Option<String>,
    age: Duration,
}

impl WorktreeLock {
    /// `removable`: it is a leftover `--fix` removes; `order_is_live`: its
    /// work order is in progress under a live conductor.
    fn finding(&self, removable: bool, order_is_live: bool) -> Finding {
        let path = self.file.display().to_string();
        let age = human_age(self.age);
        let Some(base) = &self.base else {
            let admin = self
                .file
                .parent()
                .unwrap_or(&self.file)
                .display()
                .to_string();
            return Finding::new(
                Kind::WorktreeLock,
                path,
                format!("worktree {admin} is locked ('{}', {age} old) and has no gitdir file: an add killed early", self.reason),
            )
            .hint(format!("if no 'git worktree add' is running, remove {admin} and run 'git worktree prune'"));
        };
        let unlock = format!(
            "if no 'git worktree add' is running, unlock it with 'git worktree unlock {}'",
            base.display()
        );
        let detail = format!(
            "worktree {} is locked '{}' ({age} old), as by a 'worktree add' that never finished",
            base.display(),
            self.reason
        );
        let finding = Finding::new(Kind::WorktreeLock, path, detail);
        if removable {
            finding.fixable(true)
        } else if order_is_live {
            finding.hint("its work order is in progress under a live conductor: run doctor again after it ends")
        } else {
            finding.hint(unlock)
        }
    }
}

/// Arbiter's worktrees by path (see [`worktree::list`]).
fn arbiter_worktrees(ctx: &Context) -> Result<BTreeMap<PathBuf, worktree::Info>> {
    Ok(worktree::list(ctx)?
        .into_iter()
        .map(|info| (info.path.clone(), info))
        .collect())
}

/// Worktrees locked `initializing` (what a killed `add` leaves).
fn worktree_locks(
    ctx: &Context,
    arbiter: &BTreeMap<PathBuf, worktree::Info>,
) -> Result<Vec<WorktreeLock>> {
    let mut out = Vec::new();
    for proxy in ctx
        .repo
        .worktrees()
        .map_err(|source| Error::ListWorktrees { source })?
    {
        let reason = match proxy.lock_reason() {
            Some(r) if r == INITIALIZING => r.to_string(),
            _ => continue,
        };
        let base = proxy.base().ok();
        let name = base
            .as_ref()
            .and_then(|b| arbiter.get(b))
            .map(|info| info.name.clone());
        let file = proxy.git_dir().join("locked");
        out.push(WorktreeLock {
            age: age_of(&file),
            file,
            reason,
            base,
            name,
        });
    }
    Ok(out)
}

// ---- worktrees and branches -----------------------------------------------

/// Why a record does not explain its order's worktree or branch, or `None` when it does.
fn unexplained(ctx: &Context, record: Option<&Record>) -> Option<String> {
    match record {
        None => Some("has no record".into()),
        Some(r) if r.halted => None,
        Some(r) if owned_live(ctx, r) || r.merge_back_pending() => None,
        Some(r) if r.status == Status::InProgress => {
            Some("is in_progress under a conductor that no longer runs".into())
        }
        Some(r) => Some(format!("is {}", r.status)),
    }
}

fn leftovers(
    ctx: &Context,
    orders: &Orders,
    records: &BTreeMap<String, Record>,
    worktrees: &BTreeMap<PathBuf, worktree::Info>,
    tip: Option<gix::ObjectId>,
) -> Result<Vec<Finding>> {
    // name -> (worktree, branch ref), as worktree::cleanup_stale pairs them:
    // race branch `arbiter-race/<id>/<k>` goes with worktree `race-<id>-<k>`.
    let mut names: BTreeMap<String, (Option<&worktree::Info>, Option<String>)> = BTreeMap::new();
    for info in worktrees.values() {
        names.entry(info.name.clone()).or_default().0 = Some(info);
    }
    for prefix in [BRANCH_PREFIX, RACE_BRANCH_PREFIX] {
        for full in branches(ctx, prefix)? {
            let suffix = &full[prefix.len()..];
            let name = match suffix.rsplit_once('/') {
                Some((id, k)) if prefix == RACE_BRANCH_PREFIX => format!("race-{id}-{k}"),
                _ => suffix.to_owned(),
            };
            names.entry(name).or_default().1 = Some(full);
        }
    }
    let locked: BTreeMap<PathBuf, String> = ctx
        .repo
        .worktrees()
        .map_err(|source| Error::ListWorktrees { source })?
        .into_iter()
        .filter_map(|p| Some((p.base().ok()?, p.lock_reason()?.to_string())))
        .collect();
    let mut findings = Vec::new();
    let tips = worktree::branch_tips(ctx)?;
    for (name, (info, branch)) in names {
        let owner = worktree::owner_of(orders, &name);
        let why = match owner {
            // Work made by hand is the user's, not a leftover (as cleanup_stale keeps it).
            Some(id)
                if id == name
                    && worktree::hand_made_work(ctx, id, records.get(id), tip, &tips)?
                        .is_some() =>
            {
                continue
            }
            // Passed work waiting to land lives on the order's branch (as
            // cleanup_stale keeps it).
            Some(id)
                if id == name
                    && records.get(id).is_some_and(|r| {
                        !r.halted && !worktree::landed_work(ctx, r, tip).unwrap_or(true)
                    }) =>
            {
                continue
            }
            Some(id) => match unexplained(ctx, records.get(id)) {
                Some(why) => format!("work order {id} {why}"),
                None => continue,
            },
            None => format!("no work order '{name}' is known"),
        };
        let (kind, path, what) = match (info, &branch) {
            (Some(i), Some(b)) => (
                Kind::LeftoverWorktree,
                i.path.display().to_string(),
                format!("worktree and branch {}", short(b)),
            ),
            (Some(i), None) => (
                Kind::LeftoverWorktree,
                i.path.display().to_string(),
                "worktree".into(),
            ),
            (None, Some(b)) => (Kind::LeftoverBranch, b.clone(), "branch".into()),
            (None, None) => continue,
        };
        let lock = info.and_then(|i| locked.get(&i.path));
        let mut finding = Finding::new(kind, &path, format!("{what}: {why}"));
        if owner.is_none() || worktree::check_name(&name).is_err() {
            finding = finding.hint(match info {
                Some(i) => format!("if you do not need it: 'git worktree remove --force {}' and 'git branch -D {}'", i.path.display(), branch.as_deref().map_or("…".into(), short)),
                None => format!("if you do not need it: 'git branch -D {}'", short(&path)),
            });
        } else if let Some(reason) = lock.filter(|r| r.as_str() != INITIALIZING) {
            finding = finding.hint(format!(
                "it is locked ('{reason}'): unlock it with 'git worktree unlock {path}', then run doctor --fix"
            ));
        } else {
            finding = finding.fixable(true);
        }
        findings.push(finding);
    }
    Ok(findings)
}

fn short(full: &str) -> String {
    full.strip_prefix("refs/heads/").unwrap_or(full).to_owned()
}

/// Full names of the local branches under `prefix`.
fn branches(ctx: &Context, prefix: &str) -> Result<Vec<String>> {
    let refs = ctx
        .repo
        .references()
        .map_err(|source| Error::ListRefs { source })?;
    let mut out = Vec::new();
    for r in refs
        .prefixed(prefix)
        .map_err(|source| Error::ListBranches { source })?
    {
        let Some(r) = crate::git::refguard::listed(&ctx.repo, r)
            .map_err(|source| Error::ReadAReference { source })?
        else {
            continue;
        };
        out.push(r.name().as_bstr().to_string());
    }
    Ok(out)
}

// ---- records --------------------------------------------------------------

/// Known orders whose record is not `done` while `tip` holds their merge.
fn landed(
    ctx: &Context,
    orders: &Orders,
    records: &BTreeMap<String, Record>,
    tip: gix::ObjectId,
) -> Result<BTreeMap<String, gix::ObjectId>> {
    let open: BTreeSet<&str> = orders
        .iter()
        .map(|wo| wo.id.as_str())
        .filter(|id| records.get(*id).is_none_or(|r| r.status != Status::Done))
        .collect();
    reconcile::landed(ctx, tip, &open)
}

/// Does `record` (`None`: no record) need to become `done` for a landed
/// merge? Whatever it says, unless a live conductor holds it and records
/// the landing itself.
fn needs_done(ctx: &Context, record: Option<&Record>) -> bool {
    record.is_none_or(|r| r.status != Status::Done && !owned_live(ctx, r))
}

fn landed_not_done(
    ctx: &Context,
    orders: &Orders,
    records: &BTreeMap<String, Record>,
    branch: &FullName,
) -> Result<Vec<Finding>> {
    let Ok(tip) = ctx.branch_tip(branch) else {
        return Ok(Vec::new());
    };
    let mut findings = Vec::new();
    let on = branch.shorten();
    for (id, merge) in landed(ctx, orders, records, tip)? {
        let path = orders
            .get(&id)
            .map(|wo| wo.path.display().to_string())
            .unwrap_or_default();
        match records.get(&id) {
            None => findings.push(
                Finding::new(
                    Kind::LandedNotDone,
                    path,
                    format!("work order {id} landed on {on} in {merge} but has no record in {NOTES_REF} (a fresh clone? git clone does not fetch refs/notes/*)"),
                )
                .fixable(true),
            ),
            Some(r) if r.halted && needs_done(ctx, Some(r)) => findings.push(
                Finding::new(
                    Kind::LandedNotDone,
                    path,
                    format!("work order {id} landed on {on} in {merge} but is halted ({}) with status {}", r.halt_reason.as_deref().unwrap_or("no reason"), r.status),
                )
                .fixable(true),
            ),
            Some(r) if needs_done(ctx, Some(r)) => findings.push(
                Finding::new(
                    Kind::LandedNotDone,
                    path,
                    format!("work order {id} landed on {on} in {merge} but its record says {}", r.status),
                )
                .fixable(true),
            ),
            Some(_) => {}
        }
    }
    let mut unknown = Vec::new();
    let mut start = None;
    for wo in orders.iter().filter(|wo| !records.contains_key(&wo.id)) {
        if let Some(commit) = reconcile::may_have_landed_before(ctx, wo, tip)? {
            unknown.push(wo.id.as_str());
            start = Some(commit);
        }
    }
    if let Some(start) = start {
        // One finding for all: they share the cause and the cure.
        const LISTED: usize = 10;
        let mut list = unknown[..unknown.len().min(LISTED)].join(", ");
        if unknown.len() > LISTED {
            list.push_str(&format!(" and {} more", unknown.len() - LISTED));
        }
        findings.push(
            Finding::new(
                Kind::ShallowHistory,
                orders.dir.display().to_string(),
                format!("{} work order(s) have no record and may have landed before this shallow clone's history begins at {start} ({list}): no round builds them until that is known", unknown.len()),
            )
            .hint(crate::run::batch::SHALLOW_HINT),
        );
    }
    Ok(findings)
}

/// Record landed orders as `done`, in one transition, under the merge-back
/// turn: no merge-back is between its branch move and its record meanwhile.
fn record_landed(
    ctx: &Context,
    orders: &Orders,
    store: &Store<'_>,
    branch: &FullName,
) -> Result<Vec<String>> {
    let _turn = merge::take_turn(ctx)?;
    let Ok(tip) = ctx.branch_tip(branch) else {
        return Ok(Vec::new());
    };
    let records = records(store, Some(orders))?;
    let todo: Vec<(String, gix::ObjectId)> = landed(ctx, orders, &records, tip)?
        .into_iter()
        .filter(|(id, _)| needs_done(ctx, records.get(id)))
        .collect();
    if todo.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = todo.iter().map(|(id, _)| id.as_str()).collect();
    let message = format!("doctor: record landed {} as done", ids.join(", "));
    store.transact(&message, |txn| -> Result<Vec<String>> {
        let mut report = Vec::new();
        for (id, merge) in &todo {
            let stored = txn.stored(id)?;
            // Re-checked on the tip this transition applies to.
            if !needs_done(ctx, stored.as_ref()) {
                continue;
            }
            let has_deps = orders.get(id).is_some_and(|wo| !wo.deps.is_empty());
            let mut record = txn.record(id, has_deps)?;
            let was = if stored.is_some() {
                record.status.to_string()
            } else {
                "no record".into()
            };
            if record.halted {
                record.lift_halt();
            }
            let event = if stored.is_some() {
                "recovered_done"
            } else {
                "reconstructed_done"
            };
            record.mark_done(event, merge.to_string());
            txn.put(record);
            report.push(format!(
                "recorded work order {id} as done (was {was}; merged in {merge})"
            ));
        }
        Ok(report)
    })
}

// ---- refs -----------------------------------------------------------------

/// Refs of ours that point at objects the repository lacks (a `git gc
/// --prune=now` beside a run, a broken copy), each with how to recover.
fn missing_objects(ctx: &Context, setup: &Setup) -> Result<Vec<Finding>> {
    let mut names: Vec<String> = setup
        .branch
        .iter()
        .map(|b| b.as_bstr().to_string())
        .collect();
    names.push(NOTES_REF.to_owned());
    for prefix in [BRANCH_PREFIX, RACE_BRANCH_PREFIX] {
        names.extend(branches(ctx, prefix)?);
    }
    let mut findings = Vec::new();
    for name in names {
        let Ok(Some(reference)) = ctx.repo.try_find_reference(name.as_str()) else {
            continue;
        };
        // A symbolic ref's target is checked under its own name.
        let Some(id) = reference.target().try_id().map(ToOwned::to_owned) else {
            continue;
        };
        let missing = match ctx.repo.try_find_object(id).ok().flatten() {
            None => Some(id),
            Some(object) => match object.try_into_commit() {
                Ok(commit) => commit
                    .tree_id()
                    .ok()
                    .map(|t| t.detach())
                    .filter(|t| !ctx.repo.has_object(t)),
                Err(_) => None,
            },
        };
        let Some(missing) = missing else {
            continue;
        };
        let hint = if name == NOTES_REF {
            format!("point it back at an earlier state from 'git reflog {name}' with 'git update-ref {name} <commit>' (the integration branch's history says what landed, so nothing lands twice), or delete it with 'git update-ref -d {name}' to start without state")
        } else if name.starts_with(BRANCH_PREFIX) || name.starts_with(RACE_BRANCH_PREFIX) {
            format!("its work is gone: delete it with 'git update-ref -d {name}', then 'git arbiter retry --rebuild <id>' builds the order again")
        } else {
            format!("'git reflog {}' shows where it pointed before; restore it with 'git update-ref {name} <commit>', then run git arbiter again (merges missing from it are found again)", short(&name))
        };
        findings.push(
            Finding::new(
                Kind::MissingObject,
                name.clone(),
                format!("{name} points at {id}, which needs {missing}: the repository lacks it (was 'git gc --prune=now' run beside git arbiter?)"),
            )
            .hint(hint),
        );
    }
    Ok(findings)
}

// ---- notes ----------------------------------------------------------------

/// Where a fetch refspec stores `name`, and whether it forces: `None` when
/// it does not fetch it into a ref (`^` excludes; one `*` matches any part).
fn fetch_destination(spec: &str, name: &str) -> Option<(bool, String)> {
    let (force, spec) = match spec.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let (src, dst) = spec.split_once(':')?;
    let dst = match src.split_once('*') {
        Some((pre, post)) => {
            let part = name.strip_prefix(pre)?.strip_suffix(post)?;
            dst.replacen('*', part, 1)
        }
        None if src == name => dst.to_owned(),
        None => return None,
    };
    (!dst.is_empty()).then_some((force, dst))
}

/// Is `name` excluded by a negative refspec (`^refs/…`)?
fn excluded(specs: &[String], name: &str) -> bool {
    specs.iter().any(|s| {
        s.strip_prefix('^')
            .is_some_and(|src| match src.split_once('*') {
                Some((pre, post)) => name.starts_with(pre) && name[pre.len()..].ends_with(post),
                None => src == name,
            })
    })
}

fn notes_sharing(ctx: &Context) -> Result<Vec<Finding>> {
    let local = match ctx
        .repo
        .try_find_reference(NOTES_REF)
        .map_err(|source| Error::ReadNotes { source })?
    {
        Some(mut r) => Some(
            r.peel_to_id()
                .map_err(|source| Error::ResolveNotes { source })?
                .detach(),
        ),
        None => None,
    };
    let mut findings = Vec::new();
    for remote in ctx.repo.remote_names() {
        let remote = remote.to_string();
        let key = format!("remote.{remote}.fetch");
        let specs = ctx.config_strings(&key);
        let tracking = format!("+{NOTES_REF}:refs/notes/remotes/{remote}/arbiter");
        let keep_copy = format!("git config --add {key} '{tracking}'");
        let covered = if excluded(&specs, NOTES_REF) {
            None
        } else {
            specs
                .iter()
                .find_map(|s| Some((s, fetch_destination(s, NOTES_REF)?)))
        };
        match covered {
            None => {
                let hint = if local.is_some() {
                    format!("share it with 'git arbiter sync --remote {remote}' (fast-forward only, either way); keep a copy of {remote}'s with \"{keep_copy}\"")
                } else {
                    format!("if {remote} has git-arbiter state, fetch it with 'git arbiter sync --remote {remote}' (fast-forward only); keep a copy of {remote}'s with \"{keep_copy}\"")
                };
                findings.push(
                    Finding::new(
                        Kind::NotesNotFetched,
                        &key,
                        format!("fetching from {remote} does not fetch {NOTES_REF} (no fetch refspec covers it; git clone never does)"),
                    )
                    .hint(hint),
                );
            }
            Some((spec, (true, dst))) if dst == NOTES_REF => findings.push(
                Finding::new(
                    Kind::NotesFetchOverwrites,
                    &key,
                    format!("'{spec}' force-updates the local {NOTES_REF} on every fetch from {remote}: state recorded here and not yet pushed is lost"),
                )
                .hint(format!("replace it with '{tracking}' ('git config --edit'), and push with 'git push {remote} {NOTES_REF}'")),
            ),
            Some((_, (_, dst))) => {
                let copy = ctx
                    .repo
                    .try_find_reference(dst.as_str())
                    .ok()
                    .flatten()
                    .and_then(|mut r| r.peel_to_id().ok().map(|id| id.detach()));
                if let (Some(local), Some(copy)) = (local, copy) {
                    if dst != NOTES_REF && !ctx.is_ancestor(local, copy)? {
                        findings.push(
                            Finding::new(
                                Kind::NotesNotPushed,
                                NOTES_REF,
                                format!("{NOTES_REF} has state {remote} did not have at the last fetch ({dst})"),
                            )
                            .hint(format!("share it with 'git arbiter sync --remote {remote}'")),
                        );
                    }
                }
            }
        }
    }
    Ok(findings)
}

// ---- slot directory and git ------------------------------------------------

fn slot_dir(dir: &Path) -> Option<Finding> {
    use std::os::unix::fs::MetadataExt;
    let path = dir.display().to_string();
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        // Created on first use, private.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            return Some(Finding::new(
                Kind::SlotDir,
                path,
                format!("cannot read it: {e}"),
            ))
        }
    };
    let own = "point ARBITER_SLOT_DIR or arbiter.slotDir at a directory of your own";
    if !meta.is_dir() {
        return Some(Finding::new(Kind::SlotDir, path, "is not a directory").hint(own));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Some(
            Finding::new(
                Kind::SlotDir,
                path,
                format!("belongs to uid {}, not to you (uid {me})", meta.uid()),
            )
            .hint(own),
        );
    }
    let mode = meta.mode() & 0o777;
    // As slots::prepare_dir: a directory others can write into is never "repaired".
    if mode & 0o022 != 0 {
        return Some(
            Finding::new(
                Kind::SlotDir,
                &path,
                format!("mode {mode:o}: other users can write into it, and may have planted files in it"),
            )
            .hint(format!("check its contents, then 'chmod 700 {path}'; or {own}")),
        );
    }
    (mode & 0o077 != 0).then(|| {
        Finding::new(
            Kind::SlotDir,
            &path,
            format!("mode {mode:o}: other users can read its slot files"),
        )
        .hint(format!("make it private with 'chmod 700 {path}'"))
        .fixable(true)
    })
}

/// The version of the git on PATH. gix has no notion of it; running
/// `git --version` is the only way to know which git users and hooks run.
fn git_version() -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let text = text.trim();
    Some(text.strip_prefix("git version ").unwrap_or(text).to_owned())
}

/// `12s`, `5m`, `3h`, `2d`.
pub fn human_age(age: Duration) -> String {
    let s = age.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_refspecs_map_the_notes_ref() {
        let n = NOTES_REF;
        assert_eq!(
            fetch_destination("+refs/heads/*:refs/remotes/origin/*", n),
            None
        );
        assert_eq!(
            fetch_destination("+refs/notes/*:refs/notes/*", n),
            Some((true, n.to_owned()))
        );
        assert_eq!(
            fetch_destination("refs/notes/arbiter:refs/notes/remotes/o/arbiter", n),
            Some((false, "refs/notes/remotes/o/arbiter".to_owned()))
        );
        assert_eq!(fetch_destination("refs/notes/arbiter", n), None);
        assert_eq!(fetch_destination("refs/notes/arbiter-picks:x", n), None);
        assert!(excluded(&["^refs/notes/*".into()], n));
        assert!(!excluded(&["^refs/notes/other".into()], n));
    }

    #[test]
    fn arbiter_refs_are_recognised() {
        for ours in [
            "refs/heads/arbiter/wo-1",
            "refs/heads/arbiter-race/wo-1/2",
            "refs/notes/arbiter",
            "refs/notes/arbiter-picks",
        ] {
            assert!(is_arbiter_ref(ours), "{ours}");
        }
        for theirs in [
            "refs/heads/main",
            "refs/heads/arbiter",
            "refs/notes/commits",
            "refs/notes/arbitrary",
        ] {
            assert!(!is_arbiter_ref(theirs), "{theirs}");
        }
    }
}

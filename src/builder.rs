//! What the round and the race share about running one builder: the
//! environment it gets, the slot it holds, committing what it left, and
//! turning an exit into a verdict.

use std::path::{Path, PathBuf};

use crate::conductor::Conductor;
use crate::context::Context;
use crate::error::Error;
use crate::exec::{self, Exit};
use crate::orders::WorkOrder;
use crate::round::Progress;
use crate::slots;
use crate::state::Verdict;

/// What build threads need of the repository (a `gix::Repository` is not `Sync`).
pub struct Host {
    pub repo_label: String,
    pub cwd: PathBuf,
    missing_name: bool,
    missing_email: bool,
}

impl Host {
    pub fn new(ctx: &Context) -> Host {
        Host {
            repo_label: ctx
                .workdir
                .as_deref()
                .unwrap_or(ctx.repo.git_dir())
                .display()
                .to_string(),
            cwd: ctx.cwd.clone(),
            missing_name: ctx.config_string("user.name").is_none(),
            missing_email: ctx.config_string("user.email").is_none(),
        }
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
            ("ARBITER_ROUND_BASE".into(), base.to_string()),
            ("ARBITER_WORKTREE".into(), worktree.display().to_string()),
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
            progress.event(
                "slot",
                &[
                    ("wo", label.to_owned()),
                    ("waiting", "true".into()),
                    ("cap", state.cap.to_string()),
                    ("held", state.held.to_string()),
                    ("ahead", state.ahead.to_string()),
                ],
            );
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
    ) -> Result<(), String> {
        // gix 0.90 has no porcelain to stage a whole worktree (`add -A`: new,
        // modified, deleted, mode changes, respecting .gitignore), so git does it.
        let git = |args: &[&str]| -> Result<std::process::Output, String> {
            let mut cmd = std::process::Command::new("git");
            for var in exec::GIT_ENV {
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
            cmd.output().map_err(|e| format!("running git: {e}"))
        };
        let add = git(&["add", "-A"])?;
        if !add.status.success() {
            return Err(String::from_utf8_lossy(&add.stderr).trim().to_owned());
        }
        if git(&["diff", "--cached", "--quiet"])?.status.success() {
            return Ok(());
        }
        let message = format!(
            "{id}: {title}\n\nUncommitted work left by the builder, committed by git-arbiter.\n\nArbiter-WO: {id}\nArbiter-Attempt: {attempt}\n{extra_trailers}",
            id = wo.id,
            title = wo.title,
        );
        let commit = git(&["commit", "-q", "--no-verify", "-m", &message])?;
        if !commit.status.success() {
            return Err(String::from_utf8_lossy(&commit.stderr).trim().to_owned());
        }
        Ok(())
    }
}

/// Report a finished build of `label` (a work order, or a race instance).
pub fn report_build(
    progress: &dyn Progress,
    label: &str,
    exit: &Exit,
    started: std::time::Instant,
) {
    progress.event(
        "build",
        &[
            ("wo", label.to_owned()),
            ("result", exit.describe()),
            (
                "elapsed",
                format!("{:.1}s", started.elapsed().as_secs_f64()),
            ),
        ],
    );
}

/// The recorded verdict of one command.
pub fn verdict(kind: &str, command: &str, exit: &Exit) -> Verdict {
    Verdict {
        kind: kind.into(),
        command: command.into(),
        passed: exit.success(),
        exit_code: exit.code(),
        detail: (!exit.success()).then(|| exit.describe()),
    }
}

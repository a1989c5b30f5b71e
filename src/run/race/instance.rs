//! One instance of a race: built through the one pipeline
//! ([`Host::run_attempt`]) in its own worktree, then scored.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::run::builder::{Attempt, BuildOutcome, Host, NotRunnable, Step, Steps};
use crate::run::conductor::Conductor;
use crate::run::exec::{self, Exit};
use crate::run::progress::{Phase, Progress};
use crate::state::orders::WorkOrder;
use crate::state::select::{Candidate, InstanceVerdict};
use crate::state::Verdict;

use super::{parse_score, Options};

/// What an instance's thread needs (a `gix::Repository` is not `Sync`).
pub(super) struct Job {
    pub k: u32,
    pub worktree: PathBuf,
    pub branch: String,
    pub log: PathBuf,
    score_out: PathBuf,
    pub verdicts: Vec<Verdict>,
    pub cand: Candidate,
    pub interrupted: bool,
    /// Committing what the builder left failed for git's configuration
    /// ([`crate::run::builder::CommitError`]): the work stays in the worktree.
    pub commit_failed: Option<String>,
    /// One of its commands could not run: the race stops with exit 2.
    pub not_runnable: Option<NotRunnable>,
}

impl Job {
    pub fn new(k: u32, worktree: PathBuf, branch: String, log: PathBuf) -> Job {
        Job {
            k,
            score_out: log.with_extension("score"),
            worktree,
            branch,
            log,
            verdicts: Vec::new(),
            cand: Candidate {
                instance: k,
                passed: false,
                score: None,
                finished_at: 0,
                verdict: InstanceVerdict::Pending,
                reason: None,
            },
            interrupted: false,
            commit_failed: None,
            not_runnable: None,
        }
    }
}

/// An instance's verdict, why (when it did not pass), and the command
/// that could not run (if one could not).
type Judged = (InstanceVerdict, Option<String>, Option<NotRunnable>);

/// What every instance's thread shares.
pub(super) struct Builds<'a> {
    pub host: &'a Host,
    pub wo: &'a WorkOrder,
    pub opts: &'a Options,
    pub attempt: u32,
    pub base: gix::ObjectId,
    pub slot_dir: &'a Path,
    pub cap: u32,
    pub me: &'a Conductor,
    /// The work order was halted by hand: every instance stops.
    pub halted: &'a AtomicBool,
    /// One instance's command could not run: nothing more is started.
    pub misconfigured: &'a AtomicBool,
    pub progress: &'a dyn Progress,
}

impl Builds<'_> {
    /// Build, gate and score instance `job` within the machine-wide slots.
    pub fn build(&self, job: &mut Job) {
        let label = format!("{}#{}", self.wo.id, job.k);
        let Some((slot, queue_wait)) = self.slot_for(job, &label) else {
            return;
        };
        // Another instance's command could not run: nothing more is started
        // with this configuration.
        if self.misconfigured.load(Ordering::SeqCst) {
            job.cand.verdict = InstanceVerdict::NotStarted;
            return;
        }
        let mut env = self
            .host
            .env(self.wo, self.attempt, self.base, &job.worktree);
        env.push(("ARBITER_INSTANCE".into(), job.k.to_string()));
        let stop = || self.me.should_stop() || self.halted.load(Ordering::Relaxed);
        let started = Instant::now();
        exec::note(
            &job.log,
            &crate::run::conduct::attempt_header(&label, self.attempt, self.base, Some(queue_wait)),
        );
        let trailers = format!("Arbiter-Instance: {}\n", job.k);
        let built = self.host.run_attempt(
            &Attempt {
                label: &label,
                wo: self.wo,
                attempt: self.attempt,
                base: self.base,
                worktree: &job.worktree,
                branch: &job.branch,
                log: &job.log,
                trailers: &trailers,
                env: &env,
                committing: None,
            },
            &Steps {
                setup: self.opts.pool.setup.as_deref(),
                setup_inputs: &self.opts.pool.setup_inputs,
                build: &self.opts.build,
                gates: &self.opts.gates,
                critics: &[],
                timeout: self.opts.timeout,
            },
            self.me,
            &stop,
            self.misconfigured,
            &mut job.verdicts,
            self.progress,
        );
        let mut judged = judge(built, job);
        job.cand.finished_at = crate::sys::clock::now_nanos();
        if judged.0 == InstanceVerdict::Passed {
            self.progress.phase(&label, Phase::Score);
            judged = self.score(job, &label, &env, &stop);
        }
        let (verdict, reason, not_runnable) = judged;
        let ended = match &reason {
            Some(why) => format!("{verdict}: {why}"),
            None => verdict.to_string(),
        };
        exec::note(
            &job.log,
            &crate::run::conduct::attempt_footer(self.attempt, &ended, started.elapsed()),
        );
        job.cand.verdict = verdict;
        job.cand.reason = reason;
        job.not_runnable = not_runnable;
        drop(slot);
    }

    /// A build slot for instance `job`, and how long it waited for one;
    /// `None` (the job's verdict says why) when it got none.
    fn slot_for(
        &self,
        job: &mut Job,
        label: &str,
    ) -> Option<(crate::run::slots::Slot, std::time::Duration)> {
        self.progress.phase(label, Phase::Slot);
        let waiting = Instant::now();
        let slot = self
            .host
            .take_slot(self.slot_dir, self.cap, label, self.me, self.progress);
        let queue_wait = waiting.elapsed();
        match slot {
            Ok(Some(slot)) => Some((slot, queue_wait)),
            Ok(None) => {
                job.interrupted = true;
                job.cand.verdict = InstanceVerdict::Interrupted;
                None
            }
            Err(why) => {
                job.cand.verdict = InstanceVerdict::Error;
                job.cand.reason = Some(why);
                None
            }
        }
    }

    /// Run the score command of a passed instance; it writes its number to
    /// a file of its own.
    fn score(
        &self,
        job: &mut Job,
        label: &str,
        env: &[(String, String)],
        stop: &dyn Fn() -> bool,
    ) -> Judged {
        let command = &self.opts.score;
        let ran = exec::run(
            &exec::Spec {
                command,
                cwd: &job.worktree,
                env,
                log: &job.log,
                kind: Some("score"),
                stdout_to: Some(&job.score_out),
                timeout: self.opts.timeout,
                groups: Some(&self.me.groups_dir()),
                caches: self.host.caches(),
            },
            stop,
        );
        match ran {
            Ok(Exit::Interrupted) => {
                job.interrupted = true;
                (InstanceVerdict::Interrupted, None, None)
            }
            Ok(exit) if exit.not_runnable() => {
                let failed =
                    NotRunnable::of(&exit, label, "score", command, &job.worktree, &job.log);
                self.misconfigured.store(true, Ordering::SeqCst);
                let why = failed.as_ref().map(NotRunnable::describe);
                (InstanceVerdict::NotRunnable, why, failed)
            }
            Ok(exit) if !exit.success() => (
                InstanceVerdict::InvalidScore,
                Some(format!("score command {}", exit.describe())),
                None,
            ),
            Ok(_) => {
                let out = std::fs::read(&job.score_out)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                match parse_score(&out) {
                    Ok(score) => {
                        job.cand.score = Some(score);
                        job.cand.passed = true;
                        (InstanceVerdict::Passed, None, None)
                    }
                    Err(e) => (InstanceVerdict::InvalidScore, Some(e), None),
                }
            }
            Err(e) => (
                InstanceVerdict::InvalidScore,
                Some(format!("cannot run the score command: {e}")),
                None,
            ),
        }
    }
}

/// The instance's verdict from its build's outcome.
fn judge(built: BuildOutcome, job: &mut Job) -> Judged {
    match built {
        BuildOutcome::Passed => (InstanceVerdict::Passed, None, None),
        BuildOutcome::Failed {
            step: Step::Build,
            why,
        } => (InstanceVerdict::BuildFailed, Some(why), None),
        BuildOutcome::Failed { why, .. } => (InstanceVerdict::GateFailed, Some(why), None),
        BuildOutcome::Interrupted => {
            job.interrupted = true;
            (InstanceVerdict::Interrupted, None, None)
        }
        BuildOutcome::NotRunnable(failed) => {
            let why = failed.describe();
            (InstanceVerdict::NotRunnable, Some(why), Some(failed))
        }
        // Given back by the race when it sees the disk full (`says_disk_full`).
        BuildOutcome::DiskFull(why) => (InstanceVerdict::Error, Some(why), None),
        // Not the builder's fault: see `Job::commit_failed`.
        BuildOutcome::CommitFailed(why) => {
            job.commit_failed = Some(why.clone());
            (InstanceVerdict::CommitFailed, Some(why), None)
        }
    }
}

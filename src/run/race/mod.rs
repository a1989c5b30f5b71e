//! The race (`git arbiter race`): best-of-N. N instances
//! of one work order are built off the same base (the integration tip), each
//! in its own worktree `race-<id>-<k>` on branch `arbiter-race/<id>/<k>`,
//! concurrently within the machine-wide slots. Each instance's leftovers are
//! committed, its gates run, and — if it passed — its `--score` command. The
//! selection kernel picks the winner (`select`), which lands through the
//! merge queue as a round's orders do (no-ff, drift checked against the work
//! order's own declared set, conflicts never resolved, and with `--verify
//! merged` the gates run on the merged result before the branch moves); on
//! conflict, drift or gates failing on the merged result the next-best
//! passing instance is tried. A write-once pick record is stored as
//! a note on the merge commit in `refs/notes/arbiter-picks`.
//!
//! The whole race is one attempt of the work order: it is recorded in the
//! work order's state before any build starts, as the round's dispatch does.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::run::builder::{kept_work_error, not_runnable_error, HaltWatch, Host, KeptWork};
use crate::run::conductor::Conductor;
use crate::run::drift::DriftScope;
use crate::run::merge;
use crate::run::progress::{Event, Phase, Progress};
use crate::run::queue::{self, Entry, Fate, Queue, Verify};
use crate::state::context::Context;
use crate::state::cost::Spent;
use crate::state::orders::{Orders, WorkOrder};
use crate::state::select::{self, Candidate, InstanceVerdict};
use crate::state::{self, Status, Store};
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};
use crate::{run::slots, run::worktree};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A builder ran out of disk space: the machine's fault, not the builders'.
    #[error("{reason}: {source}")]
    DiskFull {
        reason: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {branch}: {source}")]
    ReadBranch {
        branch: String,
        #[source]
        source: gix::Error,
    },
    #[error("resolving {branch}: {source}")]
    ResolveBranch {
        branch: String,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

mod instance;
mod pick;

use instance::{Builds, Job};
pub use pick::{store_pick, PickInstance, PickRecord, MERGE_POLICY, PICKS_REF};

/// The most instances one race may start.
pub const MAX_INSTANCES: u32 = 64;

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub into: Option<String>,
    pub n: u32,
    pub build: String,
    pub gates: Vec<String>,
    pub score: String,
    pub min_score: Option<i64>,
    pub keep_losers: bool,
    pub max_total: u32,
    pub timeout: Option<Duration>,
    pub verify: Verify,
    /// Warm worktrees and the setup hook.
    pub pool: crate::run::pool::Options,
}

/// One instance as reported.
#[derive(Debug, Clone, Serialize)]
pub struct Instance {
    pub instance: u32,
    pub verdict: InstanceVerdict,
    pub score: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub finished_at: u64,
    pub worktree: String,
    pub branch: String,
    pub log: String,
    /// The worktree and branch are still there.
    pub kept: bool,
    /// What its commands reported they cost, when they reported anything.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
}

/// One merge-back tried for an instance.
#[derive(Debug, Clone, Serialize)]
pub struct MergeTry {
    pub instance: u32,
    /// `merged`, `up_to_date`, `merge_conflict`, `undeclared_file_drift`,
    /// `merged_gate_failed` or `waiting`.
    pub outcome: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub version: u32,
    /// Success: merged; Escalation: no winner, or no instance could merge; Interrupted.
    pub exit: crate::ExitCode,
    #[serde(rename = "id")]
    pub wo_id: String,
    pub run_id: String,
    pub base: String,
    pub min_score: Option<i64>,
    pub instances: Vec<Instance>,
    pub merges: Vec<MergeTry>,
    pub winner: Option<u32>,
    pub merge_commit: Option<String>,
    pub pick: Option<PickRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<String>,
    /// The winner passed but could not land now (what is in the way, and
    /// what to do): it is `verified`, waiting to land on `arbiter/<id>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::run::conduct::Stopped>,
    /// Gate runs spent verifying merged results.
    pub gate_runs: usize,
    /// What its instances and the checks on merged results reported they
    /// cost, in all, when any reported.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
    /// Of that, what the setup and gates run on merged results reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<Spent>,
}

impl Summary {
    /// The summary of race `run_id` of order `id` off `base`, before
    /// anything is known of its instances.
    fn new(id: &str, run_id: &str, base: gix::ObjectId, opts: &Options) -> Summary {
        Summary {
            version: crate::JSON_VERSION,
            wo_id: id.to_owned(),
            run_id: run_id.to_owned(),
            base: base.to_string(),
            min_score: opts.min_score,
            ..Summary::default()
        }
    }
}

fn log_path(ctx: &Context, id: &str, run_id: &str, k: u32) -> PathBuf {
    crate::git::layout::logs(&ctx.repo, id).join(format!("{run_id}-{k}.log"))
}

/// Run one race of work order `id`.
pub fn run(
    ctx: &Context,
    orders: &Orders,
    id: &str,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Summary> {
    let wo = check_input(orders, id, opts)?;
    let branch = ctx.integration_branch(opts.into.as_deref())?;
    if opts.verify == Verify::Merged && opts.gates.is_empty() {
        progress.event(&Event::Warning {
            wo: String::new(),
            detail: crate::run::conduct::NO_GATE_TO_VERIFY.into(),
        });
    }
    let store = ctx.store()?.remembering(&ctx.caches);
    let me = Conductor::register(ctx)?;
    for line in crate::run::conductor::end_orphans(ctx)? {
        progress.event(&Event::Recovered { detail: line });
    }
    let slot_dir = slots::slot_dir(Some(ctx))?;
    let cap = slots::cap(Some(ctx), Some(opts.max_total))?;
    let host = Host::new(ctx)?;
    recover(ctx, &store, orders, &branch, &me, progress)?;
    let base = ctx.branch_tip(&branch)?;
    let run_id = format!("race-{}", me.name);
    let Some(attempt) = dispatch(ctx, &store, orders, wo, base, &me, &run_id, opts.n)? else {
        progress.event(&Event::Halt {
            wo: id.to_owned(),
            reason: state::RETRY_CAP_EXHAUSTED.into(),
        });
        return Ok(Summary {
            exit: crate::ExitCode::Escalation,
            escalation: Some(format!(
                "work order '{id}' has used all its attempts: halted {}, nothing built; 'git arbiter clear {id}' starts it afresh, or raise arbiter.retryCap",
                state::RETRY_CAP_EXHAUSTED
            )),
            ..Summary::new(id, &run_id, base, opts)
        });
    };
    progress.event(&Event::Race {
        wo: id.to_owned(),
        n: opts.n,
        base,
        attempt,
    });
    let mut race = Race {
        ctx,
        store: &store,
        wo,
        opts,
        me: &me,
        attempt,
        base,
        progress,
        jobs: Vec::new(),
        keep: Vec::new(),
        summary: Summary::new(id, &run_id, base, opts),
        run_id,
    };
    race.make_worktrees()?;
    let halted = race.build_all(&host, &slot_dir, cap);
    if let Some(summary) = race.settle_unfinished(halted, &host)? {
        return Ok(summary);
    }
    let cands: Vec<Candidate> = race.jobs.iter().map(|j| j.cand.clone()).collect();
    let order = select::order(&cands, opts.min_score);
    if order.is_empty() {
        return race.no_winner(&cands);
    }
    match race.land_best(&order, &branch)? {
        Some((winner, sha)) => race.pick(winner, sha, &cands),
        None => Ok(race.summary),
    }
}

/// Refuse what cannot race, before anything changes.
fn check_input<'o>(orders: &'o Orders, id: &str, opts: &Options) -> Result<&'o WorkOrder> {
    let wo = orders.get(id).ok_or_else(|| {
        InputError::new(format!("no work order '{id}'"))
            .hint("'git arbiter status' lists the work orders")
    })?;
    if opts.n == 0 || opts.n > MAX_INSTANCES {
        return Err(InputError::new(format!(
            "-n {} is out of range (1..={MAX_INSTANCES})",
            opts.n
        ))
        .hint("e.g. -n 3")
        .into());
    }
    if opts.build.trim().is_empty() {
        return Err(InputError::new("no build command")
            .hint("pass --build CMD or set 'git config arbiter.build CMD'")
            .into());
    }
    if opts.score.trim().is_empty() {
        return Err(InputError::new("no score command")
            .hint("pass --score CMD: its last non-empty stdout line must be an integer")
            .into());
    }
    Ok(wo)
}

/// What a killed round or race left: its worktrees and branches, and
/// merges that landed without their record (never merged twice).
fn recover(
    ctx: &Context,
    store: &Store<'_>,
    orders: &Orders,
    branch: &gix::refs::FullName,
    me: &Conductor,
    progress: &dyn Progress,
) -> Result<()> {
    crate::run::merge::settle_checkouts(ctx, branch, progress)?;
    let live = |r: &state::Record| crate::run::conductor::owns_live(ctx, r);
    let tip = ctx.branch_tip(branch).ok();
    for line in worktree::cleanup_stale(ctx, store, orders, tip, &live, true)? {
        progress.event(&Event::Recovered { detail: line });
    }
    crate::run::conduct::recover(ctx, orders, store, branch, me, progress)?;
    Ok(())
}

/// How one instance's try at landing went.
enum Tried<'r> {
    /// It landed, or its work was in already: the branch's commit now.
    Landed(gix::ObjectId),
    /// Its merge was refused (conflict, drift, or, with its request, gates
    /// failing on the merged result): the next-best is tried.
    Refused(Option<merge::Request<'r>>),
    /// The race ended here (waiting to land, stopped, withdrawn): its
    /// summary is final.
    Over,
}

/// One race in progress: the attempt it holds and its instances.
struct Race<'r> {
    ctx: &'r Context,
    store: &'r Store<'r>,
    wo: &'r WorkOrder,
    opts: &'r Options,
    me: &'r Conductor,
    run_id: String,
    attempt: u32,
    base: gix::ObjectId,
    progress: &'r dyn Progress,
    jobs: Vec<Job>,
    /// Per instance: its worktree and branch stay when the race ends.
    keep: Vec<bool>,
    summary: Summary,
}

impl<'r> Race<'r> {
    /// What the merge queue spent, into the summary: its gate runs, and
    /// what its checks on merged results reported they cost.
    fn count_queue(&mut self, queue: &Queue<'_>) {
        self.summary.gate_runs = queue.gate_runs;
        let spent = queue.take_spent();
        if spent.reported() {
            self.summary
                .verification
                .get_or_insert_with(Spent::default)
                .add(&spent);
        }
    }

    /// A worktree (pooled when it can be) per instance; on failure the
    /// attempt is given back and what was made goes.
    fn make_worktrees(&mut self) -> Result<()> {
        let (ctx, id) = (self.ctx, &self.wo.id);
        for k in 0..self.opts.n {
            let (name, branch) = (worktree::race_name(id, k), worktree::race_branch(id, k));
            match crate::run::pool::take(ctx, &self.opts.pool, &name, &branch, self.base) {
                Ok(taken) => {
                    let log = log_path(ctx, id, &self.run_id, k);
                    if let Some(cleaned) = taken.cleaned.cleaned_report() {
                        crate::run::exec::note(&log, &cleaned);
                    }
                    self.jobs.push(Job::new(k, taken.path, branch, log));
                }
                Err(e) => {
                    for job in &self.jobs {
                        let name = worktree::race_name(id, job.k);
                        let _ = crate::run::pool::give_back(ctx, &name, &job.branch, false);
                    }
                    self.give_back("race_interrupted", &format!("creating worktrees: {e}"))?;
                    return Err(e);
                }
            }
        }
        self.keep = vec![false; self.jobs.len()];
        Ok(())
    }

    /// Build every instance at once, within the machine-wide slots, while a
    /// watcher looks for a halt by hand. True when the order was halted.
    fn build_all(&mut self, host: &Host, slot_dir: &Path, cap: u32) -> bool {
        let id = &self.wo.id;
        let watch = HaltWatch::default();
        let halted = watch.watch(id);
        let misconfigured = AtomicBool::new(false);
        let shared_repo = self.ctx.repo.clone().into_sync();
        let builds = Builds {
            host,
            wo: self.wo,
            opts: self.opts,
            attempt: self.attempt,
            base: self.base,
            slot_dir,
            cap,
            me: self.me,
            halted: &halted,
            misconfigured: &misconfigured,
            progress: self.progress,
        };
        std::thread::scope(|scope| {
            let (watch, shared_repo, me) = (&watch, &shared_repo, self.me);
            scope.spawn(move || watch.run(shared_repo, &me.name));
            let _stop = watch.stop_on_drop();
            let threads: Vec<_> = self
                .jobs
                .iter_mut()
                .map(|job| {
                    let builds = &builds;
                    scope.spawn(move || builds.build(job))
                })
                .collect();
            for thread in threads {
                let _ = thread.join();
            }
        });
        for job in &self.jobs {
            self.progress.event(&Event::Instance {
                wo: id.clone(),
                instance: job.k,
                verdict: job.cand.verdict,
                score: job.cand.score,
            });
        }
        halted.load(Ordering::Relaxed)
    }

    /// A race that cannot pick: halted by hand, the disk full, work a
    /// commit could not save, a command that cannot run, or a stop. `Some`
    /// when the race ends here.
    fn settle_unfinished(&mut self, halted: bool, host: &Host) -> Result<Option<Summary>> {
        if halted {
            self.summary.escalation =
                Some("the work order was halted during the race; nothing was merged".into());
            self.summary.exit = crate::ExitCode::Escalation;
            let summary = self.end(true)?;
            self.release()?;
            return Ok(Some(summary));
        }
        // The machine's fault, not the builders': the attempt is given back.
        if let Some(why) = self
            .jobs
            .iter()
            .filter_map(|j| j.cand.reason.clone())
            .find(|why| crate::sys::error::says_disk_full(why))
        {
            self.me.release_reserve();
            self.give_back("disk_full", &why)?;
            self.end(false)?;
            return Err(Error::DiskFull {
                reason: why,
                source: std::io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error()),
            }
            .into());
        }
        // Before the stop: an interrupted race removes its worktrees, and these
        // hold work that exists nowhere else.
        let kept: Vec<KeptWork> = self
            .jobs
            .iter()
            .filter_map(|j| {
                Some(KeptWork {
                    label: format!("{}#{}", self.wo.id, j.k),
                    error: j.commit_failed.clone()?,
                    worktree: j.worktree.clone(),
                    branch: j.branch.clone(),
                })
            })
            .collect();
        if !kept.is_empty() {
            let detail: Vec<String> = kept.iter().map(|k| k.describe(&self.ctx.repo)).collect();
            self.give_back(worktree::KEPT_UNCOMMITTED, &detail.join("; "))?;
            self.keep = self
                .jobs
                .iter()
                .map(|j| j.commit_failed.is_some())
                .collect();
            self.end(false)?;
            return Err(kept_work_error(&kept).into());
        }
        if let Some(failed) = self.jobs.iter().find_map(|j| j.not_runnable.clone()) {
            self.give_back(failed.event(), &failed.describe())?;
            self.end(false)?;
            return Err(not_runnable_error(&failed, &host.repo_top).into());
        }
        if self.me.should_stop() || self.jobs.iter().any(|j| j.interrupted) {
            return self.stopped("interrupted").map(Some);
        }
        Ok(None)
    }

    /// No instance passed with a valid score (above `--min-score`): the
    /// order halts `race_no_winner`, every instance kept for inspection
    /// unless a halt by hand came first.
    fn no_winner(mut self, cands: &[Candidate]) -> Result<Summary> {
        let (id, me, attempt) = (&self.wo.id, self.me, self.attempt);
        let detail = format!("{}: {}", self.run_id, describe_all(cands));
        let has_deps = !self.wo.deps.is_empty();
        self.store
            .transact(&format!("race {id}: no winner"), |txn| -> Result<()> {
                let mut r = txn.record(id, has_deps)?;
                if !r.held_by(&me.name, attempt) {
                    // Halted by hand meanwhile: that halt stands.
                    return Ok(());
                }
                r.release();
                r.log("race_no_winner", Some(detail.clone()));
                r.halt("race_no_winner", Vec::new());
                txn.put(r);
                Ok(())
            })?;
        self.summary.escalation = Some(match self.opts.min_score {
            Some(floor) => format!("no instance passed with a valid score of at least {floor}"),
            None => "no instance passed with a valid score".into(),
        });
        self.summary.exit = crate::ExitCode::Escalation;
        self.end(false)
    }

    /// Land the best instance through the merge queue; on conflict, drift
    /// or failing merged gates fall back to the next-best passing one.
    /// `Some((instance index, merge))` when one landed; otherwise the race
    /// is over and its summary final.
    fn land_best(
        &mut self,
        order: &[usize],
        branch: &'r gix::refs::FullName,
    ) -> Result<Option<(usize, gix::ObjectId)>> {
        let checks = queue::Checks {
            verify: self.opts.verify,
            gates: &self.opts.gates,
            timeout: self.opts.timeout,
            pool: &self.opts.pool,
        };
        let mut queue =
            Queue::new(self.ctx, self.store, branch, checks, self.me)?.keeping_culprits();
        // The last request tried, while the record still holds the attempt.
        let mut unlanded: Option<merge::Request> = None;
        for (n, &idx) in order.iter().enumerate() {
            if n > 0 && !self.fall_back(idx)? {
                break;
            }
            match self.try_land(&mut queue, idx, branch)? {
                Tried::Landed(sha) => {
                    self.count_queue(&queue);
                    return Ok(Some((idx, sha)));
                }
                Tried::Refused(request) => {
                    unlanded = request.or(unlanded);
                    // Kept for inspection unless a later instance lands.
                    self.keep[idx] = true;
                }
                Tried::Over => return Ok(None),
            }
        }
        self.count_queue(&queue);
        self.none_landed(&queue, unlanded)?;
        Ok(None)
    }

    /// Try to land instance `idx` through `queue`, and record the try.
    fn try_land(
        &mut self,
        queue: &mut Queue<'_>,
        idx: usize,
        branch: &'r gix::refs::FullName,
    ) -> Result<Tried<'r>> {
        let request = self.request(idx, branch)?;
        self.progress.phase(&self.wo.id, Phase::Merge);
        let entry = Entry {
            req: request.clone(),
            entered: Instant::now(),
            verified: None,
        };
        let fate = queue.land(vec![entry], self.progress)?.pop();
        let (outcome, paths, tried) = match fate.map(|(_, fate)| fate) {
            Some(Fate::Landed { sha, .. }) => ("merged".to_owned(), Vec::new(), Tried::Landed(sha)),
            Some(Fate::UpToDate) => (
                "up_to_date".to_owned(),
                Vec::new(),
                Tried::Landed(self.ctx.branch_tip(branch)?),
            ),
            Some(Fate::Halted { reason, paths }) => (reason, paths, Tried::Refused(None)),
            Some(Fate::GateFailed { .. }) => (
                queue::MERGED_GATE_FAILED.to_owned(),
                Vec::new(),
                Tried::Refused(Some(request)),
            ),
            Some(Fate::Waiting { why, hint }) => {
                self.wait_to_land(idx, request.source, &format!("{why}; {hint}"), queue)?;
                return Ok(Tried::Over);
            }
            Some(Fate::Interrupted) | None => {
                // Stopped while verifying: nothing landed.
                self.count_queue(queue);
                self.stopped("interrupted while verifying the merged result")?;
                return Ok(Tried::Over);
            }
            Some(Fate::Withdrawn { reason }) => {
                // Halted (or taken over) during the race: nothing lands,
                // every instance is kept for inspection.
                self.summary.escalation = Some(format!(
                    "the race no longer holds the work order ({reason}); nothing was merged"
                ));
                self.summary.exit = crate::ExitCode::Escalation;
                self.count_queue(queue);
                self.end(true)?;
                self.release()?;
                return Ok(Tried::Over);
            }
        };
        let instance = self.jobs[idx].k;
        self.progress.event(&Event::RaceMerge {
            wo: self.wo.id.clone(),
            instance,
            outcome: outcome.clone(),
            paths: paths.clone(),
        });
        self.summary.merges.push(MergeTry {
            instance,
            outcome,
            paths,
        });
        Ok(tried)
    }

    /// Instance `idx` passed, but the checkout cannot follow now (`why`):
    /// its work `source` waits to land on the order's branch, and a round
    /// lands it from there.
    fn wait_to_land(
        &mut self,
        idx: usize,
        source: gix::ObjectId,
        why: &str,
        queue: &Queue<'_>,
    ) -> Result<()> {
        worktree::keep_on_branch(self.ctx, &self.wo.id, source)?;
        self.summary.merges.push(MergeTry {
            instance: self.jobs[idx].k,
            outcome: "waiting".into(),
            paths: Vec::new(),
        });
        self.summary.waiting = Some(why.to_owned());
        self.count_queue(queue);
        self.keep = vec![self.opts.keep_losers; self.jobs.len()];
        self.end_with(false)?;
        Ok(())
    }

    /// No passing instance landed: when the last try failed the gates as
    /// merged (`unlanded`, its request), the attempt is spent; the race
    /// escalates.
    fn none_landed(&mut self, queue: &Queue<'_>, unlanded: Option<merge::Request>) -> Result<()> {
        let last_failed_merged = self
            .summary
            .merges
            .last()
            .is_some_and(|m| m.outcome == queue::MERGED_GATE_FAILED);
        if let Some(request) = unlanded.filter(|_| last_failed_merged) {
            queue.reject(
                &request,
                "no passing instance passed the gates once merged".into(),
                self.progress,
            )?;
        }
        self.summary.escalation = Some(
            "no passing instance could be merged back (conflict, undeclared drift, untracked files in the checkout, or gates failing on the merged result); the work order is halted or back for rework"
                .into(),
        );
        self.summary.exit = crate::ExitCode::Escalation;
        self.end(false)?;
        Ok(())
    }

    /// Before trying instance `idx` after another: when the previous try's
    /// merge halted the order (conflict, drift), lift that halt for this
    /// one. False when the order is no longer ours to land (a halt by hand
    /// since stands).
    fn fall_back(&self, idx: usize) -> Result<bool> {
        let prev = self.summary.merges.last();
        let prev_halted = prev
            .is_some_and(|p| p.outcome == merge::HALT_CONFLICT || p.outcome == merge::HALT_DRIFT);
        if !prev_halted {
            return Ok(true);
        }
        let (id, me, attempt) = (&self.wo.id, self.me, self.attempt);
        let detail = format!(
            "instance {} after instance {} {}",
            self.jobs[idx].k,
            prev.map_or(0, |p| p.instance),
            prev.map_or("", |p| p.outcome.as_str())
        );
        let has_deps = !self.wo.deps.is_empty();
        self.store
            .transact(&format!("race {id}: fall back"), |txn| -> Result<bool> {
                let mut r = txn.record(id, has_deps)?;
                // Only our own merge halt is lifted, never one set by hand since.
                let our_halt = r.attempts == attempt
                    && r.halted
                    && matches!(
                        r.halt_reason.as_deref(),
                        Some(merge::HALT_CONFLICT | merge::HALT_DRIFT)
                    );
                if !our_halt {
                    return Ok(false);
                }
                r.resume(&me.name);
                r.log("race_fallback", Some(detail.clone()));
                txn.put(r);
                Ok(true)
            })
    }

    /// The merge-back of instance `idx`, its race recorded in the note.
    fn request(&self, idx: usize, branch: &'r gix::refs::FullName) -> Result<merge::Request<'r>> {
        let job = &self.jobs[idx];
        let source = self
            .ctx
            .repo
            .find_reference(format!("refs/heads/{}", job.branch).as_str())
            .map_err(|source| Error::ReadBranch {
                branch: job.branch.clone(),
                source,
            })?
            .peel_to_id()
            .map_err(|source| Error::ResolveBranch {
                branch: job.branch.clone(),
                source,
            })?
            .detach();
        Ok(merge::Request {
            wo: self.wo,
            into: branch,
            source,
            attempt: self.attempt,
            round_base: Some(self.base),
            scope: DriftScope::Own,
            extra_note: Some(serde_json::json!({
                "race": self.run_id,
                "instance": job.k,
                "score": job.cand.score,
                "verdicts": job.verdicts,
            })),
            owner: self.me.name.as_str(),
        })
    }

    /// Instance `widx` landed as `sha`: store the write-once pick record,
    /// log it, and let the other instances go (unless `--keep-losers`).
    fn pick(mut self, widx: usize, sha: gix::ObjectId, cands: &[Candidate]) -> Result<Summary> {
        let (id, run_id) = (&self.wo.id, &self.run_id);
        let winner = &self.jobs[widx];
        let record = PickRecord {
            version: 1,
            wo_id: id.clone(),
            winner_instance: winner.k,
            worktree_path: winner.worktree.display().to_string(),
            verdict: winner.cand.verdict,
            score: winner.cand.score.unwrap_or_default(),
            finished_at: winner.cand.finished_at,
            merge_policy: MERGE_POLICY.into(),
            timestamp: crate::sys::clock::now(),
            run_id: run_id.clone(),
            commit: sha.to_string(),
            loser_instances: self
                .jobs
                .iter()
                .map(|j| j.k)
                .filter(|&k| k != winner.k)
                .collect(),
            instances: cands
                .iter()
                .map(|c| PickInstance {
                    instance: c.instance,
                    verdict: c.verdict,
                    score: c.score,
                    reason: c.reason.clone(),
                })
                .collect(),
        };
        crate::sys::crash::point("pick.before");
        store_pick(self.ctx, sha, &record)?;
        crate::sys::crash::point("pick.after");
        let detail = format!(
            "{run_id} instance={} score={} commit={sha}",
            record.winner_instance, record.score
        );
        let has_deps = !self.wo.deps.is_empty();
        self.store
            .transact(&format!("race {id}: pick"), |txn| -> Result<()> {
                let mut r = txn.record(id, has_deps)?;
                r.log("pick", Some(detail.clone()));
                txn.put(r);
                Ok(())
            })?;
        self.progress.event(&Event::Pick {
            wo: id.clone(),
            instance: winner.k,
            score: record.score,
            sha,
        });
        self.summary.winner = Some(winner.k);
        self.summary.merge_commit = Some(sha.to_string());
        self.summary.pick = Some(record);
        self.summary.exit = crate::ExitCode::Success;
        // The winner is merged: its worktree goes like a round's; the
        // others stay with `--keep-losers`.
        self.keep = vec![self.opts.keep_losers; self.jobs.len()];
        self.keep[widx] = false;
        self.end_with(false)
    }

    /// Stopped: nothing landed, the attempt is given back (`why`).
    fn stopped(&mut self, why: &str) -> Result<Summary> {
        self.give_back("race_interrupted", why)?;
        self.summary.stopped = Some(crate::run::conduct::Stopped::Requested);
        self.summary.exit = crate::ExitCode::Interrupted;
        self.end(false)
    }

    /// The race is over: report each instance; remove the worktrees and
    /// branches not kept (every one is kept with `keep_all`, the losers
    /// with `--keep-losers`).
    fn end(&mut self, keep_all: bool) -> Result<Summary> {
        if keep_all {
            self.keep = vec![true; self.jobs.len()];
        }
        self.end_with(self.opts.keep_losers)
    }

    /// Stopped or failed before any verdict: the attempt is given back, and
    /// `event` logged with `why`.
    fn give_back(&self, event: &str, why: &str) -> Result<()> {
        let (id, me, attempt) = (&self.wo.id, self.me, self.attempt);
        let detail = format!("{}: {why}", self.run_id);
        let has_deps = !self.wo.deps.is_empty();
        self.store
            .transact(&format!("race {id}: give back"), |txn| -> Result<()> {
                let mut r = txn.record(id, has_deps)?;
                if !r.held_by(&me.name, attempt) {
                    return Ok(());
                }
                r.give_back();
                r.log(event, Some(detail.clone()));
                txn.put(r);
                Ok(())
            })
    }

    /// Halted by hand (or taken over) during the race: let the record go,
    /// still halted, if it is ours; the instances stay for inspection.
    fn release(&self) -> Result<()> {
        let (id, me, attempt) = (&self.wo.id, self.me, self.attempt);
        let has_deps = !self.wo.deps.is_empty();
        self.store
            .transact(&format!("race {id}: let go"), |txn| -> Result<()> {
                let mut r = txn.record(id, has_deps)?;
                if r.owner.as_deref() != Some(me.name.as_str())
                    || r.attempts != attempt
                    || r.status != Status::InProgress
                {
                    return Ok(());
                }
                r.release();
                r.log("halted_in_flight", Some(self.run_id.clone()));
                txn.put(r);
                Ok(())
            })
    }

    fn end_with(&mut self, keep_losers: bool) -> Result<Summary> {
        let id = &self.wo.id;
        let mut total = Spent::default();
        for (job, &kept) in self.jobs.iter().zip(&self.keep) {
            // An instance that never ran a command cost nothing.
            let spent = (!job.verdicts.is_empty()).then(|| Spent::of_attempt(&job.verdicts));
            if let Some(spent) = &spent {
                total.add(spent);
            }
            let kept = kept || keep_losers;
            crate::run::pool::give_back(
                self.ctx,
                &worktree::race_name(id, job.k),
                &job.branch,
                kept,
            )?;
            self.summary.instances.push(Instance {
                instance: job.k,
                verdict: job.cand.verdict,
                score: job.cand.score,
                reason: job.cand.reason.clone(),
                finished_at: job.cand.finished_at,
                worktree: job.worktree.display().to_string(),
                branch: job.branch.clone(),
                log: job.log.display().to_string(),
                kept,
                spent: spent.and_then(Spent::shown),
            });
        }
        if let Some(verification) = &self.summary.verification {
            total.add(verification);
        }
        self.summary.spent = total.shown();
        Ok(self.summary.clone())
    }
}

/// The attempt, recorded before anything is built (as the round's
/// dispatch); `None` when every attempt is spent (the order halts).
#[allow(clippy::too_many_arguments)]
fn dispatch(
    ctx: &Context,
    store: &Store<'_>,
    orders: &crate::state::orders::Orders,
    wo: &WorkOrder,
    base: gix::ObjectId,
    me: &Conductor,
    run_id: &str,
    n: u32,
) -> Result<Option<u32>> {
    let cap = ctx.retry_cap()?;
    crate::sys::crash::point("dispatch.before");
    let attempt = store.transact(&format!("race {}: dispatch", wo.id), |txn| -> Result<Option<u32>> {
        if txn.stored(&wo.id)?.is_none() {
            if let Some(start) = crate::run::reconcile::may_have_landed_before(ctx, wo, base)? {
                return Err(InputError::new(format!(
                    "work order '{}' may have landed before this shallow clone's history begins (at {start}): it has no record to say",
                    wo.id
                ))
                .hint(crate::run::batch::SHALLOW_HINT)
                .into());
            }
        }
        let mut r = txn.record(&wo.id, !wo.deps.is_empty())?;
        refuse_by_record(ctx, wo, &r, base)?;
        refuse_by_others(ctx, txn, orders, wo, me)?;
        r.cap = cap;
        // One rule with a round's dispatch: every attempt spent, it halts.
        if r.attempts >= r.cap {
            r.halt(state::RETRY_CAP_EXHAUSTED, Vec::new());
            txn.put(r);
            return Ok(None);
        }
        r.dispatch(
            &me.name,
            base.to_string(),
            "race_dispatch",
            format!("{run_id} n={n} round_base={base}"),
        );
        let attempts = r.attempts;
        txn.put(r);
        Ok(Some(attempts))
    })?;
    crate::sys::crash::point("dispatch.after");
    Ok(attempt)
}

/// Refuse to race `wo` for what its record `r` says: halted, done (or a
/// merge of it on `base`), passed and waiting to land, or being built by
/// another live conductor.
fn refuse_by_record(
    ctx: &Context,
    wo: &WorkOrder,
    r: &state::Record,
    base: gix::ObjectId,
) -> Result<()> {
    if r.halted {
        return Err(InputError::new(format!(
            "work order '{}' is halted ({})",
            wo.id,
            r.halt_reason.as_deref().unwrap_or("no reason recorded")
        ))
        .hint(format!("'git arbiter clear {}' lifts the halt", wo.id))
        .into());
    }
    if r.status == Status::Done || ctx.landed(base)?.merge_of(&wo.id).is_some() {
        return Err(
            InputError::new(format!("work order '{}' is already done", wo.id))
                .hint(r.done_hint())
                .into(),
        );
    }
    if r.waits_to_land() {
        return Err(InputError::new(format!(
            "work order '{}' passed and waits to land: {}",
            wo.id,
            r.landing
                .as_ref()
                .and_then(|l| l.blocked.as_deref())
                .unwrap_or("it has not landed yet")
        ))
        .hint(format!(
            "'git arbiter round' (or 'git arbiter retry {}') lands it without a rebuild",
            wo.id
        ))
        .into());
    }
    if r.status == Status::InProgress
        && r.owner
            .as_deref()
            .is_some_and(|o| crate::run::conductor::is_live(ctx, o))
    {
        return Err(InputError::new(format!(
            "work order '{}' is being built by another conductor",
            wo.id
        ))
        .hint("wait for it, or 'git arbiter stop' it")
        .into());
    }
    Ok(())
}

/// Refuse to race `wo` for what other orders' records say: one another
/// conductor builds could touch its files, or a dependency is not done.
fn refuse_by_others(
    ctx: &Context,
    txn: &mut state::Txn<'_, '_>,
    orders: &Orders,
    wo: &WorkOrder,
    me: &Conductor,
) -> Result<()> {
    if let Some(holder) = crate::run::batch::claim_holder(ctx, txn, orders, wo, &me.name)? {
        return Err(InputError::new(format!(
            "work order '{}' could touch files of '{holder}', which another conductor is building now",
            wo.id
        ))
        .hint(format!("race it once '{holder}' has settled ('git arbiter status' shows it)"))
        .into());
    }
    for dep in &wo.deps {
        let done = txn
            .stored(dep)?
            .is_some_and(|d| d.status == Status::Done && !d.halted);
        if !done {
            return Err(InputError::new(format!(
                "work order '{}' depends on '{dep}', which is not done",
                wo.id
            ))
            .hint(format!("race or round '{dep}' first"))
            .into());
        }
    }
    Ok(())
}

fn describe_all(cands: &[Candidate]) -> String {
    cands
        .iter()
        .map(|c| {
            format!(
                "#{}={}{}",
                c.instance,
                c.verdict,
                c.score.map_or(String::new(), |s| format!(":{s}"))
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The last non-empty line of a score command's stdout, as an integer.
pub fn parse_score(stdout: &str) -> std::result::Result<i64, String> {
    let Some(line) = stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) else {
        return Err("the score command printed nothing".into());
    };
    line.parse::<i64>().map_err(|_| {
        let shown: String = line.chars().take(60).collect();
        format!("the score command's last line '{shown}' is not an integer")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_is_the_last_non_empty_line() {
        assert_eq!(parse_score("noise\n 42 \n\n"), Ok(42));
        assert_eq!(parse_score("-3"), Ok(-3));
        assert!(parse_score("").is_err());
        assert!(parse_score("7\nnot a number\n").is_err());
    }
}

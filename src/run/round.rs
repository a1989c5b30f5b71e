//! The conductor's run (`git arbiter round`), on one of two schedules:
//! - continuous (the default): reconcile and recover → kill switch → budget
//!   → the next eligible orders, as many as slots are free (id order,
//!   dependencies done, disjoint from every claim) → claim and record the
//!   attempt before the build starts → build within the machine-wide slots
//!   → commit what the builder left → gates and critics → a passed order
//!   enters the merge queue at once ([`crate::run::queue`]), which lands whatever
//!   is waiting, verified as merged → the freed slot takes the next order,
//!   off the new tip.
//! - rounds (lockstep): the same steps, but a whole batch is built, then
//!   landed as one chain, then the next round starts off the new tip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use std::sync::Arc;

use crate::run::builder::{
    kept_work_error, not_runnable_error, verdict, Attempt, BuildOutcome, HaltWatch, Host, KeptWork,
    NotRunnable, Step, Steps,
};
use crate::run::conduct::{attempt_footer, attempt_header, recover, Stopped, NO_GATE_TO_VERIFY};
use crate::run::conductor::{self, Conductor};
use crate::run::drift::DriftScope;
use crate::run::exec;
use crate::run::merge;
use crate::run::progress::{Event, Phase, Progress};
use crate::run::queue::{self, Entry, Fate, Queue, Verify};
use crate::run::reconcile::{self, Recovery};
use crate::run::worktree::{self, branch_of};
use crate::state::context::{Context, SharedContext};
use crate::state::cost::{Spent, Usd, COST_CAP_EXCEEDED};
use crate::state::orders::{Orders, WorkOrder};
use crate::state::remote::{Expect, Update};
use crate::state::{Record, SlotHeld, Status, Store, Verdict};
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

type Error = crate::sys::error::Error;
use crate::{run::batch, run::slots};

/// What a round failed at, besides what the kernels it drives report.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("running --budget-cmd '{cmd}': {source}")]
    BudgetCmd {
        cmd: String,
        #[source]
        source: std::io::Error,
    },
    #[error("running --final-gate '{cmd}': {source}")]
    FinalGate {
        cmd: String,
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
    #[error("handing work to the merge queue: its thread is gone")]
    LanderGone,
    /// An attempt's work could not be written for want of disk space.
    #[error("{why}: {source}")]
    DiskFull {
        why: String,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnosis for Failure {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Everything `git arbiter round` can be told.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub into: Option<String>,
    pub build: String,
    pub gates: Vec<String>,
    pub critics: Vec<String>,
    pub final_gate: Option<String>,
    pub budget_cmd: Option<String>,
    pub max: usize,
    pub max_total: u32,
    pub once: bool,
    pub dry_run: bool,
    pub timeout: Option<Duration>,
    /// How long an order whose last attempt failed waits before it is built
    /// again (`arbiter.retryDelay`); zero builds it in the next round.
    pub retry_delay: Duration,
    pub drift_batch_scope: bool,
    /// `--max-cost`: nothing new is dispatched once the cost the run's
    /// attempts reported reaches it (USD).
    pub max_cost: Option<f64>,
    /// `arbiter.maxCostPerOrder`: an order whose attempts together reported
    /// more halts (USD).
    pub max_cost_per_order: Option<f64>,
    /// Warm worktrees and the setup hook.
    pub pool: crate::run::pool::Options,
    pub schedule: Schedule,
    pub verify: Verify,
}

/// When orders start and land (`--schedule`, `arbiter.schedule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Whenever a slot frees, the next eligible order starts; a passed
    /// order enters the merge queue at once.
    #[default]
    Continuous,
    /// Lockstep rounds: a batch is built, then landed, then the next.
    Rounds,
}

impl Schedule {
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Continuous => "continuous",
            Schedule::Rounds => "rounds",
        }
    }

    pub fn parse(value: &str) -> std::result::Result<Schedule, String> {
        match value {
            "continuous" => Ok(Schedule::Continuous),
            "rounds" => Ok(Schedule::Rounds),
            other => Err(format!("'{other}' is not 'continuous' or 'rounds'")),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Escalated {
    #[serde(rename = "id")]
    pub wo_id: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The kept branch holding the halted attempt's work, if any.
    pub branch: Option<String>,
    pub log: Option<String>,
    /// Why its last attempt failed (the cause behind `retry_cap_exhausted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<crate::run::reconcile::LastFailure>,
}

/// A pending order another conductor holds.
#[derive(Debug, Clone, Serialize)]
pub struct HeldElsewhere {
    #[serde(rename = "id")]
    pub wo_id: String,
    /// Its name (`<pid>-<nonce>`).
    pub conductor: String,
    /// Its process id, when it runs on this machine.
    pub pid: Option<u32>,
    /// The machine it runs on, with a remote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub version: u32,
    /// Success: all done; Escalation; Interrupted.
    pub exit: ExitCode,
    pub rounds: usize,
    pub done: Vec<String>,
    pub halted: Vec<Escalated>,
    /// Not done and not halted (e.g. `--once`, or waiting on a halted dependency).
    pub pending: Vec<String>,
    /// The pending orders another live conductor is building: they land
    /// through that conductor, not this one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_elsewhere: Vec<HeldElsewhere>,
    /// Passed and verified, waiting to land: a checkout of the branch could
    /// not follow (a local change in the way, a lock); each lands, without a
    /// rebuild, at the next run once that is resolved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<WaitingToLand>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub planned: Vec<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_gate: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    pub integration_tip: Option<String>,
    /// One row per work order dispatched by this run, in id order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub orders: Vec<OrderRow>,
    /// `continuous` or `rounds` (not for `--dry-run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<&'static str>,
    /// `merged` or `none`: whether gates ran on the merged result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<&'static str>,
    /// Batches the merge queue landed.
    pub landed_batches: usize,
    /// Gate runs spent verifying merged results (each runs every gate once).
    pub gate_runs: usize,
    /// Busy slot-seconds / (slots × wall time), when anything was built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot_utilisation: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<u64>,
    /// What this run's attempts and checks on merged results reported they
    /// cost (`cost_usd`, `tokens`, `attempts_without_cost`), when any reported.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
    /// Of that, what the setup and gates run on merged results reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<Spent>,
    /// With `--remote`: the pushes this run made, and how many lost a race.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemotePushes>,
}

/// What a run coordinating through a remote pushed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RemotePushes {
    pub name: String,
    pub pushes: u64,
    /// Pushes another machine's came before: fetched, then tried again.
    pub lost_races: u64,
}

/// A work order whose passed work waits to land, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct WaitingToLand {
    #[serde(rename = "id")]
    pub wo_id: String,
    /// What kept it from landing, as last seen.
    pub why: Option<String>,
    /// The branch holding its work.
    pub branch: String,
}

/// How one work order of this run went: its last attempt's wall times.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OrderRow {
    #[serde(rename = "id")]
    pub wo_id: String,
    /// `done`, `halted: <reason>`, or its status.
    pub outcome: String,
    /// Its state word (see `status --json`): its status, or `halted`.
    pub state: &'static str,
    pub attempts: u32,
    pub build_ms: Option<u64>,
    pub gate_ms: Option<u64>,
    pub critic_ms: Option<u64>,
    /// How long it waited for a machine-wide slot.
    pub queue_wait_ms: Option<u64>,
    /// How long it waited in the merge queue before it landed.
    pub merge_wait_ms: Option<u64>,
    /// Files its merge changed (done orders).
    pub changed: Option<usize>,
    /// What its attempts in this run reported they cost, when any reported.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
}

/// One work order being built.
struct Job<'a> {
    wo: &'a WorkOrder,
    attempt: u32,
    /// The commit its attempt starts from.
    base: gix::ObjectId,
    worktree: PathBuf,
    log: PathBuf,
    verdicts: Vec<Verdict>,
    /// How long it waited for a machine-wide slot.
    queue_wait: Option<Duration>,
    /// How long it held its slot.
    busy: Duration,
    /// Which slot it held, and when: recorded for `report`.
    slot: Option<SlotHeld>,
    /// Set when the order is halted while in flight: stops this build only.
    halted: Arc<AtomicBool>,
    outcome: JobOutcome,
    /// Why its worktree could not be made ([`JobOutcome::NoWorktree`]): the
    /// error the run ends with.
    error: Option<Error>,
    /// Passed work that waited to land, taken up to land it (no build).
    adopted: Option<Adopted>,
    /// What taking its pooled worktree found there and undid, for its log.
    cleaned: Option<String>,
    /// It passed with no check to run after its commit: it still counts as
    /// committing ([`Shared::committing`]) until the loop that lands has
    /// it, so that a landing cannot miss it in between.
    reporting: Option<Reporting>,
}

/// One passed attempt counted in [`Shared::committing`] while this lives.
struct Reporting(Arc<AtomicUsize>);

impl Drop for Reporting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a `verified` order brings to the merge queue when it is taken up.
struct Adopted {
    /// The commit to merge.
    source: gix::ObjectId,
    /// The merged tree its gates passed on, if they ran.
    verified: Option<gix::ObjectId>,
}

#[derive(Debug, Clone, PartialEq)]
enum JobOutcome {
    Pending,
    /// Build or gate failed: discard and retry (until the cap).
    Retry(String),
    /// A critic blocked it: terminal.
    Blocked(String),
    Interrupted,
    /// Writing the attempt's work failed for want of disk space: given back.
    DiskFull(String),
    /// Committing what the builder left failed for git's configuration
    /// ([`CommitError`](crate::run::builder::CommitError)): given back, its
    /// worktree and branch kept, and the run stops with exit 2. The next
    /// round or race removes them as leftovers (the record names the
    /// branch's commit) and builds afresh.
    CommitFailed(String),
    /// A command could not run ([`NotRunnable`]): given back, and the run
    /// stops with exit 2 once the builds already running have settled.
    NotRunnable(NotRunnable),
    /// Not built because another order's command could not run: given back.
    NotStarted,
    /// Its worktree could not be made (the disk, a lock): given back, and
    /// the run stops with that error once the builds running have settled.
    NoWorktree(String),
    /// Its branch is checked out in a worktree another live git-arbiter
    /// holds (that conductor's claim, which the state forgot): given back,
    /// and left to that conductor a while ([`Flow::elsewhere`]).
    HeldElsewhere(String),
    Clean,
}

/// The history event of an attempt that failed its build or gates: the
/// clock of `arbiter.retryDelay` starts there.
const FAILED_EVENT: &str = "needs_rework";
/// Why an order was given back unbuilt: see [`JobOutcome::NotStarted`].
const NOT_STARTED: &str = "not started: a command of another order could not run";

pub fn log_path(ctx: &Context, id: &str, attempt: u32) -> PathBuf {
    crate::git::layout::logs(&ctx.repo, id).join(format!("attempt-{attempt}.log"))
}

/// What every build thread of a run shares.
struct Shared<'a> {
    /// Each build makes its worktree from its own handle on the repository.
    ctx: SharedContext,
    host: &'a Host,
    opts: &'a Options,
    slot_dir: &'a Path,
    cap: u32,
    me: &'a Conductor,
    /// A command could not run: nothing more is started.
    misconfigured: AtomicBool,
    /// Builds holding a slot now.
    running: AtomicUsize,
    /// Attempts whose build ended, committing what their builder left, or
    /// passed on that and not yet taken in ([`Job::reporting`]).
    committing: Arc<AtomicUsize>,
    /// The run failed: builds still running stop.
    abort: AtomicBool,
    progress: &'a dyn Progress,
}

/// One run of `git arbiter round`: what its loops share.
struct Run<'a> {
    ctx: &'a Context,
    orders: &'a Orders,
    opts: &'a Options,
    store: &'a Store<'a>,
    branch: &'a gix::refs::FullName,
    me: &'a Conductor,
    host: &'a Host,
    queue: Queue<'a>,
    progress: &'a dyn Progress,
    /// Orders this run dispatched.
    ran: BTreeSet<String>,
    /// Passed work whose claim the state forgot waits to land
    /// ([`settle_forgotten`]): the next dispatch takes it up.
    forgotten_waits: std::cell::Cell<bool>,
    /// How long each landed order waited in the merge queue.
    merge_waits: BTreeMap<String, u64>,
    /// Slot-seconds spent building.
    busy: Duration,
    /// Recovery lines already reported.
    reported: BTreeSet<String>,
    /// When passed work last could not land (a checkout of the branch could
    /// not follow): what waits is taken up again only a while later.
    last_waiting: Option<Instant>,
    /// With a remote: other machines held work when the state was last
    /// read (building it, or waiting to land it), so more may come.
    others_busy: bool,
    /// Passed attempts whose verdicts a dispatch recorded with its own
    /// transition, for the merge queue to take up.
    recorded_early: BTreeMap<String, (gix::ObjectId, bool)>,
    /// What a continuous run's lander counted (the lockstep queue counts its own).
    landed_batches: usize,
    gate_runs: usize,
    /// What the attempts of this run reported they cost, in all and by order.
    spent: Spent,
    spent_by_order: BTreeMap<String, Spent>,
    /// What the checks on merged results reported they cost: the run's,
    /// not any one order's.
    verification: Spent,
    summary: Summary,
}

/// Run work orders until nothing is eligible (or once, or until stopped).
pub fn run(
    ctx: &Context,
    orders: &Orders,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Summary> {
    if opts.build.trim().is_empty() && !opts.dry_run {
        return Err(InputError::new("no build command")
            .hint("pass --build CMD or set 'git config arbiter.build CMD'")
            .into());
    }
    // With a remote, the branch merged onto is the remote's, as last fetched.
    let branch = ctx.landing_branch(opts.into.as_deref())?;
    let store = ctx.store()?.remembering(&ctx.caches);
    let mut summary = Summary {
        version: crate::JSON_VERSION,
        ..Summary::default()
    };
    if opts.dry_run {
        dry_run(ctx, orders, &store, &branch, opts, progress, &mut summary)?;
        return Ok(summary);
    }
    merge::settle_checkouts(ctx, &branch, progress)?;
    let me = Conductor::register(ctx)?;
    if let Some(remote) = store.remote() {
        remote.set_owner(&me.name);
    }
    end_the_dead(ctx, progress)?;
    let slot_dir = slots::slot_dir(Some(ctx))?;
    let host = Host::new(ctx)?;
    let cap = slots::cap(Some(ctx), Some(opts.max_total))?;
    let queue = Queue::new(ctx, &store, &branch, checks(opts), &me)?;
    summary.schedule = Some(opts.schedule.name());
    summary.verify = Some(queue.verify().name());
    let mut run = Run {
        ctx,
        orders,
        opts,
        store: &store,
        branch: &branch,
        me: &me,
        host: &host,
        queue,
        progress,
        ran: BTreeSet::new(),
        forgotten_waits: std::cell::Cell::new(false),
        merge_waits: BTreeMap::new(),
        busy: Duration::ZERO,
        reported: BTreeSet::new(),
        last_waiting: None,
        others_busy: false,
        recorded_early: BTreeMap::new(),
        landed_batches: 0,
        gate_runs: 0,
        spent: Spent::default(),
        spent_by_order: BTreeMap::new(),
        verification: Spent::default(),
        summary,
    };
    let shared = Shared {
        ctx: ctx.share(),
        host: &host,
        opts,
        slot_dir: &slot_dir,
        cap,
        me: &me,
        misconfigured: AtomicBool::new(false),
        running: AtomicUsize::new(0),
        committing: Arc::default(),
        abort: AtomicBool::new(false),
        progress,
    };
    if opts.verify == Verify::Merged && opts.gates.is_empty() {
        // Asked for, but there is nothing to run: said once, not silently skipped.
        progress.event(&Event::Warning {
            wo: String::new(),
            detail: NO_GATE_TO_VERIFY.into(),
        });
    }
    let started = Instant::now();
    let renewing = LeaseRenewal::default();
    std::thread::scope(|scope| -> Result<()> {
        if let Some(remote) = ctx.remote() {
            let (renewing, repo) = (&renewing, ctx.repo.clone().into_sync());
            scope.spawn(move || renewing.run(remote, &repo));
        }
        let _stop = renewing.stop_on_drop();
        match opts.schedule {
            Schedule::Rounds => run.rounds(&shared),
            Schedule::Continuous => run.continuous(&shared),
        }
    })?;
    run.count(started.elapsed(), (cap as usize).min(opts.max.max(1)));
    run.conclude()
}

/// `--dry-run`: the rounds a run would start (each reported as planned),
/// and the orders' state as it is; nothing is built.
fn dry_run(
    ctx: &Context,
    orders: &Orders,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    opts: &Options,
    progress: &dyn Progress,
    summary: &mut Summary,
) -> Result<()> {
    summary.planned = plan(ctx, orders, store, branch, opts.max)?;
    for (i, batch) in summary.planned.iter().enumerate() {
        progress.event(&Event::Plan {
            round: i + 1,
            batch: batch.clone(),
        });
    }
    finish(ctx, orders, store, branch, &BTreeSet::new(), "", summary)?;
    summary.exit = ExitCode::Success;
    Ok(())
}

/// What dead conductors left running ends before this run starts: their
/// orphaned builders and their merge queue's verifiers.
fn end_the_dead(ctx: &Context, progress: &dyn Progress) -> Result<()> {
    for line in crate::run::conductor::end_orphans(ctx)? {
        progress.event(&Event::Recovered { detail: line });
    }
    for line in queue::remove_dead_verifiers(ctx)? {
        progress.event(&Event::Recovered { detail: line });
    }
    Ok(())
}

impl<'a> Run<'a> {
    /// What the run spent, into its summary: gate runs, landed batches, its
    /// `wall` time, and how busy its `slots` were.
    fn count(&mut self, wall: Duration, slots: usize) {
        self.summary.gate_runs = self.queue.gate_runs + self.gate_runs;
        self.summary.landed_batches = self.queue.batches + self.landed_batches;
        if !self.busy.is_zero() && !wall.is_zero() {
            let utilisation = self.busy.as_secs_f64() / (slots as f64 * wall.as_secs_f64());
            self.summary.slot_utilisation = Some((utilisation * 1000.0).round() / 1000.0);
        }
        self.summary.wall_ms = Some(wall.as_millis() as u64);
    }

    /// Leftovers, crash recovery, the stop request: before each dispatch.
    /// `None` when the run is to stop. Not `full`: only the table, for a
    /// continuous run's dispatches between its recoveries.
    fn prepare(&mut self, full: bool) -> Result<Option<Vec<reconcile::Row>>> {
        let (ctx, progress) = (self.ctx, self.progress);
        if self.me.should_stop() {
            self.summary.stopped = Some(Stopped::Requested);
            return Ok(None);
        }
        self.follow_remote(REMOTE_REFRESH)?;
        if !full {
            let tip = ctx.branch_tip(self.branch).ok();
            let mut snapshot = self.store.snapshot()?;
            let live = |r: &Record| owned_by_live(ctx, r);
            let rows = reconcile::rows(
                ctx,
                self.orders,
                &mut snapshot,
                tip,
                self.store.default_cap,
                &live,
                reconcile::Reads::Open,
            )?;
            self.others_busy = held_elsewhere(&rows);
            return Ok(Some(rows));
        }
        // Leftover worktrees go first: that frees disk space for the state writes.
        for line in worktree::cleanup_stale(
            ctx,
            self.store,
            self.orders,
            ctx.branch_tip(self.branch).ok(),
            &|r: &Record| owned_by_live(ctx, r),
            true,
        )? {
            // A kept worktree is reported once, not at every dispatch.
            if self.reported.insert(line.clone()) {
                progress.event(&Event::Recovered { detail: line });
            }
        }
        let rows = recover(ctx, self.orders, self.store, self.branch, self.me, progress)?;
        if let Some((start, ids)) = batch::shallow_unknown(&rows) {
            // Said once per run, not at every dispatch.
            if self.reported.insert(format!("shallow {start} {ids:?}")) {
                progress.event(&Event::Shallow {
                    start: start.to_owned(),
                    orders: ids.iter().map(|id| (*id).to_owned()).collect(),
                    detail: format!(
                        "no record, may have landed before this shallow clone's history begins: not built; {}",
                        batch::SHALLOW_HINT
                    ),
                });
            }
        }
        if self.me.should_stop() {
            self.summary.stopped = Some(Stopped::Requested);
            return Ok(None);
        }
        self.others_busy = held_elsewhere(&rows);
        Ok(Some(rows))
    }

    /// With a remote: what the other machines did (their claims, landings,
    /// results), fetched now and then. Out of reach, the run goes on with
    /// what it saw last; its transitions wait for the remote.
    fn follow_remote(&mut self, every: Duration) -> Result<()> {
        let Some(remote) = self.store.remote() else {
            return Ok(());
        };
        match remote.refresh(&self.ctx.repo, every) {
            Ok(()) => Ok(()),
            Err(e @ crate::state::remote::Error::Unreachable { .. }) => {
                if self.reported.insert("remote unreachable".into()) {
                    self.progress.event(&Event::Warning {
                        wo: String::new(),
                        detail: e.to_string(),
                    });
                }
                Ok(())
            }
            Err(e) => Err(crate::state::Error::Remote(e).into()),
        }
    }

    /// Does `--budget-cmd` refuse more work? Then the run stops.
    fn budget_refused(&mut self) -> Result<bool> {
        let Some(cmd) = &self.opts.budget_cmd else {
            return Ok(false);
        };
        let ctx = self.ctx;
        let status = exec::shell(
            cmd,
            ctx.workdir.as_deref().unwrap_or(ctx.repo.git_dir()),
            &[],
        )
        .status()
        .map_err(|source| Failure::BudgetCmd {
            cmd: cmd.to_owned(),
            source,
        })?;
        if status.success() {
            return Ok(false);
        }
        self.progress.event(&Event::BudgetExhausted { status });
        self.summary.stopped = Some(Stopped::BudgetExhausted(status.to_string()));
        Ok(true)
    }

    /// Has the cost this run's attempts reported reached `--max-cost`? Then
    /// nothing new is dispatched; what runs finishes.
    fn cost_budget_reached(&mut self) -> bool {
        let Some(max) = self.opts.max_cost else {
            return false;
        };
        let spent = self.total_spent().cost_usd.unwrap_or(0.0);
        if spent < max {
            return false;
        }
        let (spent, max) = (Usd(spent), Usd(max));
        self.progress.event(&Event::CostBudget { spent, max });
        self.summary.stopped = Some(Stopped::CostBudget { spent, max });
        true
    }

    /// What this run's attempts and checks on merged results reported they cost.
    fn total_spent(&self) -> Spent {
        let mut total = self.spent.clone();
        total.add(&self.verification);
        total
    }

    /// Count what a finished build's commands reported they cost, toward
    /// this run's total and its budget. Work taken up to land was built
    /// (and counted) before; a build that never started cost nothing.
    fn account(&mut self, job: &Job<'_>) {
        if job.adopted.is_some() || job.verdicts.is_empty() {
            return;
        }
        let spent = Spent::of_attempt(&job.verdicts);
        self.spent.add(&spent);
        self.spent_by_order
            .entry(job.wo.id.clone())
            .or_default()
            .add(&spent);
        if spent.reported() {
            self.progress.event(&Event::Cost {
                wo: job.wo.id.clone(),
                attempt: job.attempt,
                spent,
                total: self.total_spent(),
            });
        }
    }

    /// Lockstep rounds: a batch is built, then landed, then the next batch
    /// starts off the new tip.
    fn rounds(&mut self, shared: &Shared<'_>) -> Result<()> {
        let (ctx, opts, progress) = (self.ctx, self.opts, self.progress);
        loop {
            let Some(rows) = self.prepare(true)? else {
                break;
            };
            let adopted = self.adopt_waiting(&rows)?;
            if !adopted.is_empty() {
                self.settle_all(&adopted, &[])?;
                continue;
            }
            if self.budget_refused()? {
                break;
            }
            let cooling = cooling(self.store, &rows, opts.retry_delay)?;
            let rows: Vec<reconcile::Row> = rows
                .into_iter()
                .filter(|r| !cooling.iter().any(|(id, _)| *id == r.id))
                .collect();
            let selected = batch::select(self.orders, &rows, opts.max);
            if !selected.batch.is_empty() && self.cost_budget_reached() {
                break;
            }
            report_batch(progress, &selected, opts.max);
            if selected.batch.is_empty() {
                // Nothing else to do: wait for the first order to cool down
                // rather than leave it for another run.
                if !self.wait_for_cooling(&cooling) {
                    break;
                }
                continue;
            }
            self.summary.rounds += 1;
            let base = ctx.branch_tip(self.branch)?;
            progress.event(&Event::Round {
                n: self.summary.rounds,
                base,
                batch: batch_ids(&selected),
            });
            let picked: Vec<&WorkOrder> = selected
                .batch
                .iter()
                .filter_map(|p| self.orders.get(&p.wo_id))
                .collect();
            let mut jobs = Vec::new();
            if let Err(e) = self.start(&picked, base, &[], &mut |job| jobs.push(job)) {
                // None of them was built: they get their attempts back too.
                let made: Vec<Unsettled> = jobs.iter().map(|j| (j.wo, j.attempt, false)).collect();
                abandon(ctx, self.store, self.branch, &made, self.me, &e)?;
                return Err(e);
            }
            self.build_round(&mut jobs, shared);
            for job in &jobs {
                self.account(job);
            }
            let union: Vec<crate::state::scope::Entry> = picked
                .iter()
                .flat_map(|wo| wo.files.iter().cloned())
                .collect();
            self.settle_all(&jobs, &union)?;
            stop_error(&mut jobs, self.me, self.host)?;
            if self.me.should_stop() {
                self.summary.stopped = Some(Stopped::Requested);
                break;
            }
            if opts.once {
                break;
            }
        }
        Ok(())
    }

    /// Build a lockstep round's `jobs` at once, within the machine-wide
    /// slots, while a watcher looks for a halt by hand (which stops that
    /// order's build only).
    fn build_round(&self, jobs: &mut [Job<'a>], shared: &Shared<'_>) {
        let watch = HaltWatch::new(self.ctx.remote());
        for job in jobs.iter_mut() {
            job.halted = watch.watch(&job.wo.id);
        }
        let shared_repo = self.ctx.repo.clone().into_sync();
        std::thread::scope(|scope| {
            let (watch, owner) = (&watch, &self.me.name);
            let shared_repo = &shared_repo;
            scope.spawn(move || watch.run(shared_repo, owner));
            let _stop = watch.stop_on_drop();
            let builds: Vec<_> = jobs
                .iter_mut()
                .map(|job| scope.spawn(move || build_one(shared, job)))
                .collect();
            for build in builds {
                let _ = build.join();
            }
        });
        for job in jobs.iter_mut() {
            job.reporting = None;
        }
    }

    /// Continuous dispatch: whenever a slot frees, the next eligible order
    /// starts off the current tip; an order that passed enters the merge
    /// queue at once, and the queue lands whatever is waiting.
    fn continuous(&mut self, shared: &Shared<'_>) -> Result<()> {
        let watch = HaltWatch::new(self.ctx.remote());
        let shared_repo = self.ctx.repo.clone().into_sync();
        let me = self.me;
        std::thread::scope(|scope| {
            let (watch_ref, shared_repo) = (&watch, &shared_repo);
            scope.spawn(move || watch_ref.run(shared_repo, &me.name));
            let _stop = watch_ref.stop_on_drop();
            let (tx, rx) = std::sync::mpsc::channel::<Msg<'_>>();
            // The merge queue lands in a thread of its own, so that a slot
            // freed while it verifies is filled at once.
            let (to_lander, lander_rx) = std::sync::mpsc::channel::<Vec<Entry<'a>>>();
            {
                let (tx, opts, branch) = (tx.clone(), self.opts, self.branch);
                let cap = self.store.default_cap;
                scope.spawn(move || lander(shared, opts, branch, cap, &lander_rx, &tx));
            }
            let mut flow = Flow::default();
            let result = loop {
                if flow.should_dispatch(self.opts.max) {
                    if std::mem::take(&mut flow.freed) {
                        self.fetch_before_dispatch(&mut flow, &rx, &watch, shared);
                    }
                    let mut launched = Vec::new();
                    let mut launch = |mut job: Job<'a>| {
                        job.halted = watch.watch(&job.wo.id);
                        launched.push(job.wo.id.clone());
                        let tx = tx.clone();
                        scope.spawn(move || {
                            build_one(shared, &mut job);
                            let _ = tx.send(Msg::Built(Box::new(job)));
                        });
                    };
                    let dispatched = self.dispatch_more(&mut flow, shared, &mut launch);
                    flow.in_flight += launched.len();
                    flow.building.extend(launched);
                    if let Err(e) = dispatched {
                        flow.fail(e, shared);
                    }
                }
                self.hand_to_lander(&mut flow, &to_lander, shared);
                // Work waiting to land after a forgotten claim: the next
                // dispatch takes it up, before the run may end.
                if self.forgotten_waits.take() {
                    flow.last_recovery = None;
                    flow.last_pass_full = false;
                    flow.changed = true;
                }
                if flow.in_flight == 0
                    && flow.passed.is_empty()
                    && flow.landing.is_empty()
                    && !flow.again
                {
                    match self.idle(&mut flow, shared) {
                        Idle::Again => continue,
                        Idle::Done => break Ok(()),
                    }
                }
                self.take_in(&mut flow, &rx, &watch, shared);
                flow.poll(self.me);
            };
            drop(to_lander);
            if self.me.should_stop() {
                self.summary.stopped = Some(Stopped::Requested);
            }
            if let Some(e) = flow.failed.take() {
                let unsettled: Vec<Unsettled> = flow.unsettled.iter().map(Job::unsettled).collect();
                abandon(self.ctx, self.store, self.branch, &unsettled, self.me, &e)?;
                return Err(e);
            }
            stop_error(&mut flow.stopped_by, self.me, self.host)?;
            result
        })
    }

    /// With a remote, a dispatch into slots that builds freed starts with
    /// what the other machines did (a fetch, a tenth of a second under
    /// load): builds that ended meanwhile are taken in then, so their
    /// verdicts and slots go in the dispatch's one push, not in a push each.
    fn fetch_before_dispatch(
        &mut self,
        flow: &mut Flow<'a>,
        rx: &std::sync::mpsc::Receiver<Msg<'a>>,
        watch: &HaltWatch,
        shared: &Shared<'_>,
    ) {
        if self.store.remote().is_none() {
            return;
        }
        if let Err(e) = self.follow_remote(FRESH_ENOUGH) {
            flow.fail(e, shared);
            return;
        }
        let ended: Vec<Msg<'a>> = rx.try_iter().collect();
        self.take(flow, ended, watch, shared);
    }

    /// Wait for what the builds and the lander report, and take it in.
    fn take_in(
        &mut self,
        flow: &mut Flow<'a>,
        rx: &std::sync::mpsc::Receiver<Msg<'a>>,
        watch: &HaltWatch,
        shared: &Shared<'_>,
    ) {
        let mut messages = Vec::new();
        // What waits for commits in progress is looked at again soon:
        // an attempt may end its commit and go on to its checks.
        let wait = if std::mem::take(&mut flow.again) {
            Duration::ZERO
        } else if self.landing_waits(flow, shared) {
            COMMIT_POLL
        } else {
            Duration::from_millis(250)
        };
        match rx.recv_timeout(wait) {
            Ok(msg) => messages.push(msg),
            Err(_) => flow.poll(self.me),
        }
        messages.extend(rx.try_iter());
        self.take(flow, messages, watch, shared);
    }

    /// Take in what the builds and the lander reported.
    fn take(
        &mut self,
        flow: &mut Flow<'a>,
        messages: Vec<Msg<'a>>,
        watch: &HaltWatch,
        shared: &Shared<'_>,
    ) {
        for msg in messages {
            flow.changed = true;
            match msg {
                Msg::Built(mut job) => {
                    job.reporting = None;
                    flow.freed = true;
                    flow.in_flight -= 1;
                    flow.building.remove(&job.wo.id);
                    watch.forget(&job.wo.id);
                    if let Err(e) = self.built(*job, flow) {
                        flow.fail(e, shared);
                    }
                }
                Msg::Landed {
                    result,
                    batches,
                    gate_runs,
                    spent,
                    given_back,
                } => {
                    (self.landed_batches, self.gate_runs) = (batches, gate_runs);
                    self.verification.add(&spent);
                    if let Err(e) = self.lander_landed(flow, result, given_back) {
                        flow.fail(e, shared);
                    }
                }
            }
        }
    }

    /// Enter what passed into the merge queue and hand it to the lander;
    /// after a failure, what passed is given back with the rest instead.
    fn hand_to_lander(
        &mut self,
        flow: &mut Flow<'a>,
        to_lander: &std::sync::mpsc::Sender<Vec<Entry<'a>>>,
        shared: &Shared<'_>,
    ) {
        if flow.failed.is_none() && self.landing_waits(flow, shared) {
            return;
        }
        let passed = std::mem::take(&mut flow.passed);
        if flow.failed.is_some() {
            flow.unsettled.extend(passed);
            return;
        }
        if passed.is_empty() {
            return;
        }
        let union: Vec<crate::state::scope::Entry> = passed
            .iter()
            .flat_map(|j| j.wo.files.iter().cloned())
            .collect();
        // On an error the orders were given back already.
        match self.enqueue_all(&passed, &union) {
            Ok(waiting) => {
                let entries: Vec<Entry<'a>> = waiting.into_iter().map(|(_, entry)| entry).collect();
                flow.entered.extend(entered_at(&entries));
                let queued: BTreeSet<String> =
                    entries.iter().map(|e| e.req.wo.id.clone()).collect();
                if !entries.is_empty() && to_lander.send(entries).is_err() {
                    flow.fail(lander_gone(), shared);
                }
                flow.landing
                    .extend(passed.into_iter().filter(|j| queued.contains(&j.wo.id)));
            }
            Err(e) => flow.fail(e, shared),
        }
    }

    /// Does what passed wait for the attempts committing their leftovers?
    /// Each landing costs a run of the gates on the merged result, a
    /// compare-and-swap and an update of the checkout: orders whose builds
    /// ended are moments from passing (or not), and join this landing
    /// rather than make the next. Never for a running build or check, nor
    /// once stopping.
    fn landing_waits(&self, flow: &Flow<'a>, shared: &Shared<'_>) -> bool {
        !flow.passed.is_empty()
            && !flow.stopping
            && !self.me.should_stop()
            && shared.committing.load(Ordering::SeqCst) > 0
    }

    /// Nothing is in flight or in the queue. As far as a light pass can
    /// tell nothing more is to do; a full one (recovery, leftovers) has the
    /// last word, then orders cooling down after a failure are waited for.
    fn idle(&mut self, flow: &mut Flow<'a>, shared: &Shared<'_>) -> Idle {
        if !flow.last_pass_full && flow.failed.is_none() {
            if flow.stopping || flow.dispatched_once {
                if let Err(e) = self.prepare(true) {
                    flow.fail(e, shared);
                }
            } else {
                flow.last_recovery = None;
                flow.changed = true;
            }
            flow.last_pass_full = true;
            return Idle::Again;
        }
        if self.store.remote().is_some()
            && self.others_busy
            && !self.opts.once
            && flow.failed.is_none()
            && !flow.stopping
        {
            // Another machine's work may fail, lapse or unblock orders here:
            // every machine runs until nothing is held anywhere.
            std::thread::sleep(REMOTE_REFRESH);
            flow.last_pass_full = false;
            flow.changed = true;
            return Idle::Again;
        }
        if flow.failed.is_some() || flow.stopping || flow.dispatched_once || flow.cooling.is_empty()
        {
            return Idle::Done;
        }
        let cooling = std::mem::take(&mut flow.cooling);
        if !self.wait_for_cooling(&cooling) {
            return Idle::Done;
        }
        flow.changed = true;
        Idle::Again
    }

    /// The lander reports a batch: settle each of its orders by its fate.
    fn lander_landed(
        &mut self,
        flow: &mut Flow<'a>,
        result: Result<Vec<(String, Fate)>>,
        given_back: Result<()>,
    ) -> Result<()> {
        let landing = std::mem::take(&mut flow.landing);
        let ids: BTreeSet<String> = match &result {
            Ok(fates) => fates.iter().map(|(id, _)| id.clone()).collect(),
            Err(_) => landing.iter().map(|j| j.wo.id.clone()).collect(),
        };
        let (done, still): (Vec<Job<'a>>, Vec<Job<'a>>) =
            landing.into_iter().partition(|j| ids.contains(&j.wo.id));
        flow.landing = still;
        let refs: Vec<&Job> = done.iter().collect();
        let landed = self.landed(&refs, &flow.entered, result, GivenBack::Already);
        landed.and(given_back)
    }

    /// Dispatch what is eligible now, as many as this conductor may still
    /// have in flight (`--max`).
    fn dispatch_more(
        &mut self,
        flow: &mut Flow<'a>,
        shared: &Shared<'_>,
        launch: &mut dyn FnMut(Job<'a>),
    ) -> Result<()> {
        flow.changed = false;
        flow.last_dispatch = Some(Instant::now());
        // Recovery (leftovers, dead conductors' claims) now and then; the
        // dispatches between only read the state.
        let full = flow
            .last_recovery
            .is_none_or(|at| at.elapsed() >= RECOVERY_EVERY);
        if full {
            flow.last_recovery = Some(Instant::now());
        }
        flow.last_pass_full = full;
        let opts = self.opts;
        let Some(mut rows) = self.prepare(full)? else {
            flow.stopping = true;
            return Ok(());
        };
        flow.hold_in(&mut rows, &self.me.name);
        if full {
            let adopted = self.adopt_waiting(&rows)?;
            if !adopted.is_empty() {
                flow.changed = true;
                flow.passed.extend(adopted);
            }
        }
        flow.cooling = cooling(self.store, &rows, opts.retry_delay)?;
        let rows: Vec<reconcile::Row> = rows
            .into_iter()
            .filter(|r| !flow.cooling.iter().any(|(id, _)| *id == r.id))
            .collect();
        let free = opts.max.saturating_sub(flow.in_flight);
        let selected = batch::select(self.orders, &rows, free);
        if selected.batch.is_empty() {
            return Ok(());
        }
        if shared.misconfigured.load(Ordering::SeqCst) {
            return Ok(());
        }
        if self.cost_budget_reached() || self.budget_refused()? {
            flow.stopping = true;
            return Ok(());
        }
        report_batch(self.progress, &selected, opts.max);
        // `--once`: only what is eligible at the start is dispatched.
        flow.dispatched_once = opts.once;
        let base = self.ctx.branch_tip(self.branch)?;
        let picked: Vec<&'a WorkOrder> = selected
            .batch
            .iter()
            .filter_map(|p| self.orders.get(&p.wo_id))
            .collect();
        self.summary.rounds += 1;
        // With a remote, what passed since rides on this dispatch's push.
        let passed = match self.store.remote() {
            Some(_) => {
                let waiting: Vec<&Job<'a>> = flow
                    .passed
                    .iter()
                    .filter(|j| !self.recorded_early.contains_key(&j.wo.id))
                    .collect();
                passed_attempts(self.ctx, &waiting)?
            }
            None => Vec::new(),
        };
        let short = self.start(&picked, base, &passed, launch)?;
        // A few times in a row at most: a selection that keeps picking what
        // the claim refuses waits like any other.
        flow.again_in_a_row = if short { flow.again_in_a_row + 1 } else { 0 };
        if short && flow.again_in_a_row <= AGAIN_IN_A_ROW {
            flow.changed = true;
            flow.again = true;
        }
        Ok(())
    }

    /// Take up the orders whose passed work waits to land (`verified`, held
    /// by nobody) to land them through the merge queue: no rebuild, no
    /// attempt spent. Not again soon after a landing could not happen.
    fn adopt_waiting(&mut self, rows: &[reconcile::Row]) -> Result<Vec<Job<'a>>> {
        if self
            .last_waiting
            .is_some_and(|at| at.elapsed() < WAITING_RETRY)
        {
            return Ok(Vec::new());
        }
        let waiting: Vec<&'a WorkOrder> = rows
            .iter()
            .filter(|r| r.status == Status::Verified && !r.terminal)
            .filter_map(|r| self.orders.get(&r.id))
            .collect();
        if waiting.is_empty() {
            return Ok(Vec::new());
        }
        let (ctx, me) = (self.ctx, self.me.name.as_str());
        let hex = |h: &Option<String>| {
            h.as_deref()
                .and_then(|h| gix::ObjectId::from_hex(h.as_bytes()).ok())
        };
        if let Some(remote) = self.store.remote() {
            // Another machine's passed work: its commit comes from the remote.
            let mut snapshot = self.store.snapshot()?;
            let mut missing = Vec::new();
            for wo in &waiting {
                if let Some(r) = snapshot.record(&wo.id)? {
                    let source = r.landing.as_ref().map(|l| l.source.clone());
                    if hex(&source).is_some_and(|s| !ctx.repo.has_object(s)) {
                        missing.push((wo.id.clone(), r.attempts));
                    }
                }
            }
            if let Err(e) = remote.fetch_results(&ctx.repo, &missing) {
                self.progress.event(&Event::Warning {
                    wo: String::new(),
                    detail: format!("fetching results to land: {e}"),
                });
            }
        }
        let taken = self
            .store
            .transact("land verified work", |txn| -> Result<_> {
                let mut taken = Vec::new();
                for &wo in &waiting {
                    let Some(mut r) = txn.stored(&wo.id)? else {
                        continue;
                    };
                    let Some(landing) = r.landing.clone().filter(|_| r.waits_to_land()) else {
                        continue;
                    };
                    let source = hex(&Some(landing.source.clone()));
                    match source.filter(|s| ctx.repo.has_object(s)) {
                        Some(source) => {
                            r.adopt_to_land(me);
                            let verified = hex(&landing.verified_tree);
                            taken.push((wo, r.attempts, source, verified, r.clone()));
                        }
                        // Its work is gone (`git gc --prune=now` after its branch
                        // was deleted by hand): nothing to land, built again.
                        None => {
                            r.give_back();
                            r.log("kept_work_missing", Some(landing.source));
                        }
                    }
                    txn.put(r);
                }
                Ok(taken)
            })?;
        let root = worktree::root_dir(ctx)?;
        let mut jobs = Vec::with_capacity(taken.len());
        for (wo, attempt, source, verified, record) in taken {
            self.ran.insert(wo.id.clone());
            jobs.push(Job {
                wo,
                attempt,
                base: hex(&record.checkpoint_before).unwrap_or(source),
                worktree: root.join(&wo.id),
                log: log_path(ctx, &wo.id, attempt),
                verdicts: record.verdicts,
                queue_wait: None,
                busy: Duration::ZERO,
                slot: None,
                halted: Arc::default(),
                outcome: JobOutcome::Clean,
                error: None,
                adopted: Some(Adopted { source, verified }),
                cleaned: None,
                reporting: None,
            });
        }
        Ok(jobs)
    }

    /// Dispatch `picked` off `base`, handing each job to `launch` (its build
    /// thread makes its worktree). `true`: some of `picked` were taken by
    /// another conductor first.
    fn start(
        &mut self,
        picked: &[&'a WorkOrder],
        base: gix::ObjectId,
        passed: &[Passed],
        launch: &mut dyn FnMut(Job<'a>),
    ) -> Result<bool> {
        let (ctx, progress) = (self.ctx, self.progress);
        let (dispatched, held) = dispatch(
            ctx,
            self.store,
            self.orders,
            (picked, base),
            passed,
            self.me,
            progress,
        )?;
        self.recorded_early.extend(
            passed
                .iter()
                .zip(held)
                .map(|(p, held)| (p.id.clone(), (p.source, held))),
        );
        // Taken by another conductor meanwhile (what selection read was
        // stale): selected again at once, from the state the claim read.
        let short = dispatched.len() < picked.len();
        self.others_busy |= short;
        self.ran
            .extend(dispatched.iter().map(|(wo, _)| wo.id.clone()));
        let root = worktree::root_dir(ctx)?;
        for &(wo, attempt) in &dispatched {
            progress.event(&Event::Claim {
                wo: wo.id.clone(),
                conductor: self.me.name.clone(),
                base,
                files: wo.file_strings(),
            });
            launch(Job {
                wo,
                attempt,
                base,
                // Made by its build thread, so that orders' checkouts overlap.
                worktree: root.join(&wo.id),
                log: log_path(ctx, &wo.id, attempt),
                verdicts: Vec::new(),
                queue_wait: None,
                busy: Duration::ZERO,
                slot: None,
                halted: Arc::default(),
                outcome: JobOutcome::Pending,
                error: None,
                adopted: None,
                cleaned: None,
                reporting: None,
            });
        }
        Ok(short)
    }

    /// A build of the continuous schedule ended: a passed one waits to land
    /// (after the freed slot is filled), any other settles now.
    fn built(&mut self, job: Job<'a>, flow: &mut Flow<'a>) -> Result<()> {
        self.account(&job);
        if matches!(job.outcome, JobOutcome::HeldElsewhere(_)) {
            flow.elsewhere.insert(job.wo.id.clone(), Instant::now());
        }
        if job.outcome == JobOutcome::Clean {
            flow.passed.push(job);
            return Ok(());
        }
        self.busy += job.busy;
        if matches!(job.outcome, JobOutcome::DiskFull(_)) {
            self.me.release_reserve();
        }
        if let Err(e) = self.settle_failed(&job, &job.outcome) {
            flow.unsettled.push(job);
            return Err(e);
        }
        self.progress.finished(&job.wo.id);
        if stops_the_run(&job.outcome) {
            flow.stopping = true;
            flow.stopped_by.push(job);
        }
        Ok(())
    }

    /// Settle builds: failed ones now, passed ones through the merge queue
    /// as one batch (a lockstep round's, or what waits in a continuous run).
    fn settle_all(&mut self, jobs: &[Job<'a>], union: &[crate::state::scope::Entry]) -> Result<()> {
        let waiting = self.enqueue_all(jobs, union)?;
        self.land_here(waiting)
    }

    /// Settle the failed of `jobs` now and enter the passed into the merge
    /// queue. On an error every order not settled gets its attempt back.
    fn enqueue_all<'j>(
        &mut self,
        jobs: &'j [Job<'a>],
        union: &[crate::state::scope::Entry],
    ) -> Result<Vec<(&'j Job<'a>, Entry<'a>)>> {
        self.busy += jobs.iter().map(|j| j.busy).sum::<Duration>();
        if jobs
            .iter()
            .any(|j| matches!(j.outcome, JobOutcome::DiskFull(_)))
        {
            self.me.release_reserve();
        }
        let scope = if self.opts.drift_batch_scope {
            DriftScope::Union(union.to_vec())
        } else {
            DriftScope::Own
        };
        let mut waiting = Vec::new();
        let early: BTreeMap<String, (gix::ObjectId, bool)> = jobs
            .iter()
            .filter_map(|j| {
                let recorded = self.recorded_early.remove(&j.wo.id)?;
                Some((j.wo.id.clone(), recorded))
            })
            .collect();
        let recorded = match self.record_passed(jobs, &early) {
            Ok(recorded) => recorded,
            Err(e) => {
                let unsettled: Vec<Unsettled> = jobs.iter().map(Job::unsettled).collect();
                abandon(self.ctx, self.store, self.branch, &unsettled, self.me, &e)?;
                return Err(e);
            }
        };
        for (i, job) in jobs.iter().enumerate() {
            let settled = if job.outcome == JobOutcome::Clean {
                let passed = recorded.get(&job.wo.id).copied();
                self.enqueue(job, passed, scope.clone(), waiting.len() + 1)
                    .map(|entry| waiting.extend(entry.map(|e| (job, e))))
            } else {
                self.settle_failed(job, &job.outcome)
                    .map(|()| self.progress.finished(&job.wo.id))
            };
            if let Err(e) = settled {
                // E.g. the state cannot be written: the builders were not at
                // fault, so the unsettled orders get their attempts back, or
                // wait to land when they passed.
                let unsettled: Vec<Unsettled> = waiting
                    .iter()
                    .map(|(j, _): &(&Job, Entry)| j.unsettled())
                    .chain(jobs[i..].iter().map(Job::unsettled))
                    .collect();
                abandon(self.ctx, self.store, self.branch, &unsettled, self.me, &e)?;
                return Err(e);
            }
        }
        Ok(waiting)
    }

    /// Land the waiting orders as one batch here and settle each by its fate.
    fn land_here(&mut self, waiting: Vec<(&Job<'_>, Entry<'_>)>) -> Result<()> {
        if waiting.is_empty() {
            return Ok(());
        }
        let (jobs, entries): (Vec<&Job>, Vec<Entry>) = waiting.into_iter().unzip();
        let entered = entered_at(&entries);
        let result = self.queue.land(entries, self.progress);
        self.verification.add(&self.queue.take_spent());
        self.landed(&jobs, &entered, result, GivenBack::Here)
    }

    /// Settle each of `jobs` by its fate in `result` (what landing them
    /// gave). On an error the unlanded orders get their attempts back.
    fn landed(
        &mut self,
        jobs: &[&Job<'_>],
        entered: &BTreeMap<String, Instant>,
        result: Result<Vec<(String, Fate)>>,
        worktrees: GivenBack,
    ) -> Result<()> {
        let fates = match result {
            Ok(fates) => fates,
            Err(e) => {
                // E.g. the disk is full: nothing more can merge now. The
                // orders passed: they wait to land, their work kept.
                let unsettled: Vec<Unsettled> = jobs.iter().map(|j| j.unsettled()).collect();
                abandon(self.ctx, self.store, self.branch, &unsettled, self.me, &e)?;
                return Err(e);
            }
        };
        for (id, fate) in fates {
            let Some(job) = jobs.iter().find(|j| j.wo.id == id) else {
                continue;
            };
            if let (Fate::Landed { .. }, Some(at)) = (&fate, entered.get(&id)) {
                self.merge_waits
                    .insert(id.clone(), at.elapsed().as_millis() as u64);
            }
            self.after_landing(job, fate, worktrees)?;
            self.progress.finished(&id);
        }
        Ok(())
    }

    /// Record the verdicts of every attempt of `jobs` that passed here (not
    /// work taken up to land, nor what `recorded` has already) in one
    /// transition: attempts that ended together cost one write (with a
    /// remote, one push, which publishes their results too). Each one's
    /// source commit, and whether this conductor still held it.
    fn record_passed(
        &self,
        jobs: &[Job<'a>],
        recorded: &BTreeMap<String, (gix::ObjectId, bool)>,
    ) -> Result<BTreeMap<String, (gix::ObjectId, bool)>> {
        let refs: Vec<&Job<'a>> = jobs
            .iter()
            .filter(|j| !recorded.contains_key(&j.wo.id))
            .collect();
        let passed = passed_attempts(self.ctx, &refs)?;
        let mut out = recorded.clone();
        if passed.is_empty() {
            return Ok(out);
        }
        let ids: Vec<&str> = passed.iter().map(|p| p.id.as_str()).collect();
        let (owner, publish) = (self.me.name.as_str(), self.store.remote().is_some());
        crate::sys::crash::point("verdict.before");
        let held = self
            .store
            .transact(&format!("verdicts {}", ids.join(" ")), |txn| {
                record_in(txn, &passed, owner, publish)
            })?;
        crate::sys::crash::point("verdict.after");
        out.extend(
            passed
                .iter()
                .zip(held)
                .map(|(p, held)| (p.id.clone(), (p.source, held))),
        );
        Ok(out)
    }

    /// Enter `job` into the merge queue: work taken up to land as it was
    /// recorded, a passed build as [`Run::record_passed`] recorded it
    /// (`passed`: its source, and whether it was still held).
    fn enqueue(
        &mut self,
        job: &Job<'a>,
        passed: Option<(gix::ObjectId, bool)>,
        scope: DriftScope,
        position: usize,
    ) -> Result<Option<Entry<'a>>> {
        let (ctx, id) = (self.ctx, &job.wo.id);
        let (source, verified) = match (&job.adopted, passed) {
            // Taken up from `verified`: its verdicts are recorded already.
            (Some(adopted), _) => (adopted.source, adopted.verified),
            (None, Some((source, true))) => (source, None),
            (None, _) => {
                let passed = passed.is_some();
                if let_go(self, job, passed)? {
                    crate::run::pool::give_back(ctx, id, &branch_of(id), false)?;
                }
                return Ok(None);
            }
        };
        self.progress.phase(id, Phase::Queued);
        self.progress.event(&Event::Queued {
            wo: id.clone(),
            position,
        });
        Ok(Some(Entry {
            req: merge::Request {
                wo: job.wo,
                into: self.branch,
                source,
                attempt: job.attempt,
                round_base: Some(job.base),
                scope,
                extra_note: Some(serde_json::json!({ "verdicts": job.verdicts })),
                owner: &self.me.name,
            },
            entered: Instant::now(),
            verified,
        }))
    }

    /// Report how a queued order left the queue and tidy up after it.
    fn after_landing(&mut self, job: &Job<'_>, fate: Fate, worktrees: GivenBack) -> Result<()> {
        let (id, progress) = (&job.wo.id, self.progress);
        if worktrees == GivenBack::Here {
            give_back_landed(self.ctx, id, &fate)?;
        }
        match fate {
            Fate::Landed { sha, changed, .. } => progress.event(&Event::Merged {
                wo: id.clone(),
                sha,
                changed,
            }),
            Fate::UpToDate => progress.event(&Event::UpToDate { wo: id.clone() }),
            Fate::Halted { reason, paths } => {
                progress.event(&Event::MergeHalted {
                    wo: id.clone(),
                    reason,
                    paths,
                });
            }
            Fate::Withdrawn { .. } => return let_go(self, job, true).map(|_| ()),
            // Back for rework: the queue recorded it; its work goes like a failed gate's.
            Fate::GateFailed { .. } => {}
            // The queue recorded it `verified`; its branch stays.
            Fate::Waiting { .. } => self.last_waiting = Some(Instant::now()),
            // Stopped before it landed: its work waits to land.
            Fate::Interrupted => {
                return abandon(
                    self.ctx,
                    self.store,
                    self.branch,
                    &[(job.wo, job.attempt, true)],
                    self.me,
                    &Error::Interrupted,
                )
            }
        }
        Ok(())
    }

    /// Wait until the first of `cooling` may be built again. `false` when
    /// nothing is cooling (nothing to wait for).
    fn wait_for_cooling(&self, cooling: &[(String, i64)]) -> bool {
        let Some((id, at)) = cooling.iter().min_by_key(|(_, at)| *at) else {
            return false;
        };
        self.progress.event(&Event::Wait {
            wo: id.clone(),
            remaining: Duration::from_secs((at - crate::sys::clock::now()).max(0).unsigned_abs()),
        });
        while crate::sys::clock::now() < *at && !self.me.should_stop() {
            std::thread::sleep(Duration::from_millis(200));
        }
        true
    }

    /// Fill the summary from the final state, run the final gate, pick the exit code.
    fn conclude(mut self) -> Result<Summary> {
        let (ctx, opts) = (self.ctx, self.opts);
        let mut summary = std::mem::take(&mut self.summary);
        summary.remote = self.store.remote().map(|r| RemotePushes {
            name: r.name.clone(),
            pushes: r.pushes.load(std::sync::atomic::Ordering::Relaxed),
            lost_races: r.lost.load(std::sync::atomic::Ordering::Relaxed),
        });
        finish(
            ctx,
            self.orders,
            self.store,
            self.branch,
            &self.ran,
            &self.me.name,
            &mut summary,
        )?;
        // Once anything reported, an order that built without a report
        // says so (`attempts_without_cost`) rather than look free.
        let reported = self.total_spent().reported();
        for row in &mut summary.orders {
            row.merge_wait_ms = self.merge_waits.get(&row.wo_id).copied();
            row.spent = self
                .spent_by_order
                .get(&row.wo_id)
                .cloned()
                .and_then(|s| s.shown_under(reported));
        }
        let budget = opts.max_cost.is_some() || opts.max_cost_per_order.is_some();
        summary.spent = self.total_spent().shown_under(budget);
        summary.verification = std::mem::take(&mut self.verification).shown();
        if summary.stopped == Some(Stopped::Requested) {
            summary.exit = ExitCode::Interrupted;
            return Ok(summary);
        }
        if summary.stopped.is_some() || !summary.halted.is_empty() {
            summary.exit = ExitCode::Escalation;
            return Ok(summary);
        }
        if self.ran.is_empty()
            && !summary.held_elsewhere.is_empty()
            && summary.held_elsewhere.len() == summary.pending.len()
        {
            // Everything left is another conductor's: this run did nothing.
            summary.exit = ExitCode::NoSlot;
            return Ok(summary);
        }
        if summary.pending.is_empty() {
            if let Some(cmd) = &opts.final_gate {
                let verdict =
                    final_gate(ctx, self.branch, cmd, opts.timeout, self.me, self.progress)?;
                let passed = verdict.passed;
                summary.final_gate = Some(verdict);
                if !passed {
                    summary.exit = ExitCode::Escalation;
                    return Ok(summary);
                }
            }
        }
        summary.exit = ExitCode::Success;
        Ok(summary)
    }
}

/// The continuous run's merge queue: lands what waits, as one batch, from
/// its own handle on the repository, and reports the fates, until the run
/// stops sending.
fn lander<'a>(
    shared: &Shared<'_>,
    opts: &Options,
    branch: &gix::refs::FullName,
    retry_cap: u32,
    batches: &std::sync::mpsc::Receiver<Vec<Entry<'a>>>,
    report: &std::sync::mpsc::Sender<Msg<'a>>,
) {
    let ctx = shared.ctx.local();
    let store = Store::new(&ctx.repo, retry_cap).with_remote(ctx.remote());
    let queue = Queue::new(&ctx, &store, branch, checks(opts), shared.me);
    let mut queue = match queue {
        Ok(queue) => queue,
        Err(e) => {
            let _ = report.send(Msg::Landed {
                result: Err(e),
                batches: 0,
                gate_runs: 0,
                spent: Spent::default(),
                given_back: Ok(()),
            });
            return;
        }
    };
    // The landed orders' worktrees go back to the pool on a thread of their
    // own, which reports each batch once its worktrees are back: the next
    // batch lands meanwhile, not after them (on the serial path of a run).
    let (to_returner, landed) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(move || returner(shared, &landed, report));
        while let Ok(mut entries) = batches.recv() {
            // Whatever else waits lands in the same batch.
            entries.extend(batches.try_iter().flatten());
            let result = queue.land(entries, shared.progress);
            // The returner is gone only when the run stopped listening.
            let counts = (queue.batches, queue.gate_runs, queue.take_spent());
            if to_returner.send((result, counts)).is_err() {
                return;
            }
        }
        // No more batches: the returner ends once it has reported the last.
        drop(to_returner);
    });
}

/// The lander's fates of one batch, with its counts of batches and gate
/// runs so far, and what its checks reported they cost since the last.
type LandedBatch = (Result<Vec<(String, Fate)>>, (usize, usize, Spent));

/// Give back the worktrees of each batch the lander sends, then report it.
fn returner<'a>(
    shared: &Shared<'_>,
    landed: &std::sync::mpsc::Receiver<LandedBatch>,
    report: &std::sync::mpsc::Sender<Msg<'a>>,
) {
    let ctx = shared.ctx.local();
    for (result, (batches, gate_runs, spent)) in landed {
        let given_back = match &result {
            Ok(fates) => fates
                .iter()
                .try_for_each(|(id, fate)| give_back_landed(&ctx, id, fate)),
            Err(_) => Ok(()),
        };
        let sent = report.send(Msg::Landed {
            result,
            batches,
            gate_runs,
            spent,
            given_back,
        });
        if sent.is_err() {
            return;
        }
    }
}

/// Where the worktrees of orders that left the merge queue go back to the
/// pool: on the lander's returner thread for a continuous run, so the
/// conductor's loop meanwhile fills freed slots; in the loop itself for rounds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GivenBack {
    Already,
    Here,
}

/// Hand the worktree of an order that left the merge queue back to the
/// pool. A halted attempt's worktree and branch stay for inspection until
/// `clear`; a withdrawn or interrupted one is settled by its conductor.
fn give_back_landed(ctx: &Context, id: &str, fate: &Fate) -> Result<()> {
    let branch = branch_of(id);
    match fate {
        Fate::Landed { .. } | Fate::UpToDate | Fate::GateFailed { .. } => {
            crate::run::pool::give_back(ctx, id, &branch, false)
        }
        // Its worktree stays; if the pool took it back while the order
        // waited to land, the branch is checked out again for the user.
        Fate::Halted { .. } => {
            crate::run::pool::give_back(ctx, id, &branch, true)?;
            crate::run::worktree::check_out_kept(ctx, id, &branch).map(drop)
        }
        Fate::Waiting { .. } => crate::run::pool::give_back_keeping_branch(ctx, id, &branch),
        Fate::Withdrawn { .. } | Fate::Interrupted => Ok(()),
    }
}

fn lander_gone() -> Error {
    Failure::LanderGone.into()
}

fn checks(opts: &Options) -> queue::Checks<'_> {
    queue::Checks {
        verify: opts.verify,
        gates: &opts.gates,
        timeout: opts.timeout,
        pool: &opts.pool,
    }
}

/// When each of `entries` entered the queue.
fn entered_at(entries: &[Entry<'_>]) -> BTreeMap<String, Instant> {
    entries
        .iter()
        .map(|e| (e.req.wo.id.clone(), e.entered))
        .collect()
}

/// What the continuous loop does when nothing is in flight or queued.
enum Idle {
    /// Look again (a full pass, or cooled-down orders, may dispatch more).
    Again,
    Done,
}

/// What a continuous run's threads report to it.
enum Msg<'a> {
    /// A build ended (boxed: a job is large, a landing report small).
    Built(Box<Job<'a>>),
    /// The lander landed a batch: each order's fate, and its counts so far.
    Landed {
        result: Result<Vec<(String, Fate)>>,
        batches: usize,
        gate_runs: usize,
        /// What the checks on merged results reported they cost, since the last.
        spent: Spent,
        /// Handing their worktrees back to the pool ([`give_back_landed`]).
        given_back: Result<()>,
    },
}

/// The state of the continuous schedule's loop.
#[derive(Default)]
struct Flow<'a> {
    in_flight: usize,
    /// The orders whose builds run now.
    building: BTreeSet<String>,
    /// Orders whose branch another live conductor held when this run took
    /// them up, and when: left to it for [`ELSEWHERE_WAIT`].
    elsewhere: BTreeMap<String, Instant>,
    /// Passed, waiting to enter the merge queue.
    passed: Vec<Job<'a>>,
    /// In the merge queue: handed to the lander, fates not back yet.
    landing: Vec<Job<'a>>,
    /// When each order entered the merge queue.
    entered: BTreeMap<String, Instant>,
    /// Something changed since the last dispatch (a build ended, an order landed).
    changed: bool,
    /// The last dispatch lost orders to another conductor: select again
    /// without waiting.
    again: bool,
    /// A build ended since the last dispatch: its slot is free.
    freed: bool,
    again_in_a_row: u32,
    last_dispatch: Option<Instant>,
    last_recovery: Option<Instant>,
    /// The last dispatch pass ran recovery too.
    last_pass_full: bool,
    /// No more dispatches: stop requested, budget refused.
    stopping: bool,
    /// `--once` and its one dispatch happened: no more.
    dispatched_once: bool,
    /// Orders that failed recently, with when they may be built again.
    cooling: Vec<(String, i64)>,
    /// The run failed: nothing more is dispatched or landed.
    failed: Option<Error>,
    /// Builds that ended with something that stops the run once the others settle.
    stopped_by: Vec<Job<'a>>,
    /// Orders to give back when the run failed.
    unsettled: Vec<Job<'a>>,
}

/// How often the continuous schedule looks for orders other conductors let
/// go of while it has slots free.
const RECHECK: Duration = Duration::from_secs(1);
/// How long an order whose branch another live conductor holds is left to
/// it before this run takes it up again.
const ELSEWHERE_WAIT: Duration = Duration::from_secs(2);
/// How often the continuous schedule runs crash recovery before a dispatch.
const RECOVERY_EVERY: Duration = Duration::from_secs(2);
/// How many dispatches in a row that lost orders to other conductors are
/// followed at once by another.
const AGAIN_IN_A_ROW: u32 = 3;
/// With a remote: how often a dispatch pass fetches what other machines did.
const REMOTE_REFRESH: Duration = Duration::from_millis(250);
/// With a remote: a dispatch fetches first unless a fetch this recent
/// (a lost race's) already brought the state: a claim pushed on an older
/// view mostly loses its race under load.
const FRESH_ENOUGH: Duration = Duration::from_millis(50);

/// With a remote: renews the leases of the orders this conductor holds, a
/// third of the lease before they lapse, in one push; runs until stopped.
#[derive(Default)]
struct LeaseRenewal {
    stopped: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl LeaseRenewal {
    fn run(
        &self,
        remote: std::sync::Arc<crate::state::remote::Remote>,
        repo: &gix::ThreadSafeRepository,
    ) {
        let repo = repo.to_thread_local();
        let store = Store::new(&repo, 1).with_remote(Some(remote.clone()));
        let every = remote.lease / 3;
        loop {
            let stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
            let (stopped, _) = self
                .wake
                .wait_timeout_while(stopped, every, |stopped| !*stopped)
                .unwrap_or_else(|e| e.into_inner());
            if *stopped {
                return;
            }
            drop(stopped);
            let held = remote.held();
            if held.is_empty() {
                continue;
            }
            // What other machines did meanwhile (a takeover after a
            // partition): the halt watch stops the builds that lost their claim.
            let _ = remote.catch_up(&repo);
            // A failure here is a lease that may lapse: the work it held is
            // then recorded and discarded when it ends, never landed.
            let _ = store.transact("renew leases", |txn| -> Result<()> {
                for id in &held {
                    let owner = remote.owner().unwrap_or_default();
                    match txn.stored(id)? {
                        Some(record) if record.held_by(owner, record.attempts) => txn.put(record),
                        _ => remote.let_go(id),
                    }
                }
                Ok(())
            });
        }
    }

    fn stop_on_drop(&self) -> StopRenewal<'_> {
        StopRenewal(self)
    }
}

/// Ends [`LeaseRenewal::run`] when it goes, by a panic too.
struct StopRenewal<'a>(&'a LeaseRenewal);

impl Drop for StopRenewal<'_> {
    fn drop(&mut self) {
        *self.0.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.0.wake.notify_all();
    }
}
/// How long after passed work could not land it is taken up again.
const WAITING_RETRY: Duration = Duration::from_secs(10);

/// How often a landing that waits for commits in progress looks again.
const COMMIT_POLL: Duration = Duration::from_millis(2);

/// How many passed orders per `--max` may wait to land before no more
/// builds start: the merge queue lands one batch at a time, and builds far
/// ahead of it only grow the queue (by 750 orders in a 10,000-order
/// round), each waiting order held in memory on a base ever older.
const LANDING_AHEAD_PER_BUILD: usize = 4;

impl Flow<'_> {
    /// Show the orders this run holds (building, passed, landing) as held by
    /// it in `rows`, whatever the state says: a notes ref moved back under
    /// the run forgets their claims, and they must be neither dispatched nor
    /// taken up again, nor their files given to another order.
    fn hold_in(&mut self, rows: &mut [reconcile::Row], me: &str) {
        self.elsewhere
            .retain(|_, since| since.elapsed() < ELSEWHERE_WAIT);
        let held: BTreeSet<&str> = self
            .building
            .iter()
            .chain(self.elsewhere.keys())
            .map(String::as_str)
            .chain(
                self.passed
                    .iter()
                    .chain(&self.landing)
                    .map(|j| j.wo.id.as_str()),
            )
            .collect();
        for row in rows.iter_mut().filter(|r| held.contains(r.id.as_str())) {
            if row.status != Status::InProgress {
                row.status = Status::InProgress;
                row.claimed_by = Some(me.to_owned());
            }
        }
    }

    fn should_dispatch(&self, max: usize) -> bool {
        if self.stopping || self.dispatched_once || self.failed.is_some() || self.in_flight >= max {
            return false;
        }
        if self.passed.len() + self.landing.len() >= max.max(1) * LANDING_AHEAD_PER_BUILD {
            return false;
        }
        let now = crate::sys::clock::now();
        match self.last_dispatch {
            None => true,
            Some(at) => {
                self.changed
                    || at.elapsed() >= RECHECK
                    || self.cooling.iter().any(|(_, until)| *until <= now)
            }
        }
    }

    /// The run failed: nothing more starts, and running builds stop.
    fn fail(&mut self, e: Error, shared: &Shared<'_>) {
        self.failed.get_or_insert(e);
        self.stopping = true;
        shared.abort.store(true, Ordering::SeqCst);
    }

    fn poll(&mut self, me: &Conductor) {
        if me.should_stop() {
            self.stopping = true;
        }
    }
}

/// Outcomes after which nothing more starts and the run ends in an error
/// once the other builds have settled (see [`stop_error`]).
fn stops_the_run(outcome: &JobOutcome) -> bool {
    matches!(
        outcome,
        JobOutcome::DiskFull(_)
            | JobOutcome::CommitFailed(_)
            | JobOutcome::NotRunnable(_)
            | JobOutcome::NoWorktree(_)
    )
}

/// The error a run ends with after builds that stop it: a worktree that
/// could not be made, a full disk, work git refused to commit, a command
/// that cannot run.
fn stop_error(jobs: &mut [Job<'_>], me: &Conductor, host: &Host) -> Result<()> {
    if let Some(e) = jobs.iter_mut().find_map(|j| j.error.take()) {
        return Err(e);
    }
    if let Some(JobOutcome::DiskFull(why)) = jobs
        .iter()
        .map(|j| &j.outcome)
        .find(|o| matches!(o, JobOutcome::DiskFull(_)))
    {
        me.release_reserve();
        return Err(Failure::DiskFull {
            why: why.clone(),
            source: std::io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error()),
        }
        .into());
    }
    let kept: Vec<KeptWork> = jobs.iter().filter_map(kept_work).collect();
    if !kept.is_empty() {
        return Err(kept_work_error(&kept).into());
    }
    if let Some(failed) = jobs.iter().find_map(|j| match &j.outcome {
        JobOutcome::NotRunnable(failed) => Some(failed),
        _ => None,
    }) {
        return Err(not_runnable_error(failed, &host.repo_top).into());
    }
    Ok(())
}

fn report_batch(progress: &dyn Progress, selected: &batch::Batch, max: usize) {
    progress.event(&Event::Batch {
        ready: selected.ready,
        batch: selected.batch.len(),
        deferred: selected.deferred.len(),
        max,
    });
}

fn batch_ids(selected: &batch::Batch) -> Vec<String> {
    selected.batch.iter().map(|p| p.wo_id.clone()).collect()
}

/// The orders whose last attempt failed less than `delay` ago, each with the
/// time (seconds since the epoch) it may be built again.
fn cooling(
    store: &Store<'_>,
    rows: &[reconcile::Row],
    delay: Duration,
) -> Result<Vec<(String, i64)>> {
    if delay.is_zero() {
        return Ok(Vec::new());
    }
    let delay = i64::try_from(delay.as_secs()).unwrap_or(i64::MAX);
    let now = crate::sys::clock::now();
    let mut snapshot = store.snapshot()?;
    let mut out = Vec::new();
    for row in rows
        .iter()
        .filter(|r| r.status == Status::NeedsRework && !r.terminal)
    {
        let Some(record) = snapshot.record(&row.id)? else {
            continue;
        };
        let failed = record
            .history
            .iter()
            .rev()
            .find(|e| e.event == FAILED_EVENT);
        if let Some(at) = failed.map(|e| e.at.saturating_add(delay)) {
            if at > now {
                out.push((row.id.clone(), at));
            }
        }
    }
    Ok(out)
}

/// A passed attempt built here, as its verdicts transition needs it.
struct Passed {
    id: String,
    attempt: u32,
    source: gix::ObjectId,
    verdicts: Vec<Verdict>,
    queue_wait_ms: Option<u64>,
    log: String,
    slot: Option<SlotHeld>,
}

/// The attempts of `jobs` that passed here (not work taken up to land),
/// each with its branch's tip.
fn passed_attempts(ctx: &Context, jobs: &[&Job<'_>]) -> Result<Vec<Passed>> {
    let mut passed = Vec::new();
    for job in jobs {
        if job.outcome != JobOutcome::Clean || job.adopted.is_some() {
            continue;
        }
        let wo_branch = branch_of(&job.wo.id);
        let source = ctx
            .repo
            .find_reference(format!("refs/heads/{wo_branch}").as_str())
            .map_err(|source| Failure::ReadBranch {
                branch: wo_branch.clone(),
                source,
            })?
            .peel_to_id()
            .map_err(|source| Failure::ResolveBranch {
                branch: wo_branch.clone(),
                source,
            })?
            .detach();
        passed.push(Passed {
            id: job.wo.id.clone(),
            attempt: job.attempt,
            source,
            verdicts: job.verdicts.clone(),
            queue_wait_ms: job.queue_wait.map(|w| w.as_millis() as u64),
            log: job.log.display().to_string(),
            slot: job.slot,
        });
    }
    Ok(passed)
}

/// In `txn`: the verdicts of each of `passed` that `owner` still holds,
/// its work queued to land (with `publish`, its result pushed with the
/// transition, for any machine to land should this one go away). Whether
/// each was still held.
fn record_in(
    txn: &mut crate::state::Txn<'_, '_>,
    passed: &[Passed],
    owner: &str,
    publish: bool,
) -> Result<Vec<bool>> {
    let mut held = Vec::with_capacity(passed.len());
    for p in passed {
        let mut record = match txn.stored(&p.id)? {
            Some(r) if r.held_by(owner, p.attempt) => r,
            _ => {
                held.push(false);
                continue;
            }
        };
        record.verdicts = p.verdicts.clone();
        record.queue_wait_ms = p.queue_wait_ms;
        record.log("built", Some(p.log.clone()));
        record.held_slot(p.slot);
        // From here its work waits to land rather than be rebuilt.
        record.queue_to_land(p.source.to_string());
        txn.put(record);
        if publish {
            txn.push_ref(Update {
                name: crate::state::remote::result_ref(&p.id, p.attempt),
                expect: Expect::Any,
                to: p.source,
                local: None,
            });
        }
        held.push(true);
    }
    Ok(held)
}

/// Is any order of `rows` in another conductor's hands (this one's are
/// all settled when it asks): built, or waiting to land?
fn held_elsewhere(rows: &[reconcile::Row]) -> bool {
    rows.iter()
        .any(|r| !r.terminal && matches!(r.status, Status::InProgress | Status::Verified))
}

fn owned_by_live(ctx: &Context, record: &Record) -> bool {
    conductor::owns_live(ctx, record)
}

/// Promote, check the cap and record the attempt — before any build starts, so
/// a crash can never grant an extra attempt. Returns the WOs to build.
/// `passed` attempts' verdicts go in the same transition ([`record_in`]):
/// whether each was still held comes back beside the orders to build.
#[allow(clippy::type_complexity)]
fn dispatch<'a>(
    ctx: &Context,
    store: &Store<'_>,
    orders: &Orders,
    (picked, round_base): (&[&'a WorkOrder], gix::ObjectId),
    passed: &[Passed],
    me: &Conductor,
    progress: &dyn Progress,
) -> Result<(Vec<(&'a WorkOrder, u32)>, Vec<bool>)> {
    let cap = ctx.retry_cap()?;
    let publish = store.remote().is_some();
    crate::sys::crash::point("dispatch.before");
    if !passed.is_empty() {
        crate::sys::crash::point("verdict.before");
    }
    let (go, capped, claimed, held) = store.transact("dispatch", |txn| -> Result<_> {
        let held = record_in(txn, passed, &me.name, publish)?;
        let mut go = Vec::new();
        let mut capped = Vec::new();
        let mut claimed = Vec::new();
        for wo in picked {
            let mut record = txn.record(&wo.id, !wo.deps.is_empty())?;
            // Done, or passed and waiting to land: never built again. Nor
            // what the branch holds a merge of, whatever its record says.
            if record.halted
                || matches!(record.status, Status::Done | Status::Verified)
                || ctx.landed(round_base)?.merge_of(&wo.id).is_some()
            {
                continue;
            }
            if record.status == Status::InProgress
                && record.owner.as_deref() != Some(me.name.as_str())
            {
                // Another live conductor got it first.
                continue;
            }
            // Selection saw the claims of a moment ago; this transaction
            // sees them as they are, so two conductors never both win.
            if let Some(holder) = batch::claim_holder(ctx, txn, orders, wo, &me.name)? {
                claimed.push((wo.id.clone(), holder));
                continue;
            }
            record.cap = cap;
            if record.attempts >= record.cap {
                record.halt(crate::state::RETRY_CAP_EXHAUSTED, Vec::new());
                capped.push(wo.id.clone());
                txn.put(record);
                continue;
            }
            record.dispatch(
                &me.name,
                round_base.to_string(),
                "dispatch",
                format!("round_base={round_base}"),
            );
            go.push((*wo, record.attempts));
            txn.put(record);
        }
        Ok((go, capped, claimed, held))
    })?;
    if !passed.is_empty() {
        crate::sys::crash::point("verdict.after");
    }
    crate::sys::crash::point("dispatch.after");
    for id in capped {
        progress.event(&Event::Halt {
            wo: id,
            reason: crate::state::RETRY_CAP_EXHAUSTED.into(),
        });
    }
    for (id, holder) in claimed {
        progress.event(&Event::Defer {
            wo: id,
            reason: batch::CLAIMED.into(),
            conflicts_with: holder,
        });
    }
    Ok((go, held))
}

/// Make the job's worktree and branch, off its base, from this thread's
/// own handle on the repository. On failure nothing more starts.
fn make_worktree(shared: &Shared<'_>, job: &mut Job<'_>) -> bool {
    let ctx = shared.ctx.local();
    let (id, branch) = (&job.wo.id, branch_of(&job.wo.id));
    let made = crate::run::pool::take_for_build(&ctx, &shared.opts.pool, id, &branch, job.base);
    match made {
        Ok(taken) => {
            job.worktree = taken.path;
            job.cleaned = taken.cleaned.cleaned_report();
            true
        }
        // Another conductor's own order, its claim forgotten by the state.
        Err(e) if worktree::is_in_use(&e) => {
            job.outcome = JobOutcome::HeldElsewhere(format!("{e}: left to it"));
            false
        }
        Err(e) => {
            if e.is_disk_full() {
                shared.me.release_reserve();
            }
            shared.abort.store(true, Ordering::SeqCst);
            job.outcome = JobOutcome::NoWorktree(e.to_string());
            job.error = Some(e);
            false
        }
    }
}

/// Build one job within the machine-wide slots, through the one pipeline
/// ([`Host::run_attempt`]).
fn build_one(shared: &Shared<'_>, job: &mut Job<'_>) {
    let (progress, cap) = (shared.progress, shared.cap);
    let id = job.wo.id.clone();
    if !make_worktree(shared, job) {
        return;
    }
    let Some(slot) = wait_for_slot(shared, job) else {
        return;
    };
    // Another order's command could not run: nothing more is started with
    // this configuration.
    if shared.misconfigured.load(Ordering::SeqCst) {
        job.outcome = JobOutcome::NotStarted;
        return;
    }
    let holding = Instant::now();
    let from_ms = crate::sys::clock::now_millis();
    let in_use = shared.running.fetch_add(1, Ordering::SeqCst) + 1;
    progress.slots(in_use, cap);
    progress.event(&Event::BuildStarted {
        wo: id.clone(),
        attempt: job.attempt,
        in_use,
        cap,
    });
    let started = Instant::now();
    exec::note(
        &job.log,
        &attempt_header(&id, job.attempt, job.base, job.queue_wait),
    );
    if let Some(cleaned) = &job.cleaned {
        exec::note(&job.log, cleaned);
    }
    let outcome = run_attempt(shared, job);
    crate::sys::crash::point("attempt.ended");
    job.outcome = JobOutcome::from(outcome);
    if job.outcome == JobOutcome::Clean {
        // Its work is committed on its branch, all the merge queue needs: a
        // take that finds the pool full may have this worktree back.
        crate::run::pool::waits_to_land(shared.ctx.caches(), &branch_of(&id));
    }
    exec::note(
        &job.log,
        &attempt_footer(job.attempt, &job.outcome.describe(), started.elapsed()),
    );
    let index = slot.index().try_into().unwrap_or(u32::MAX);
    drop(slot);
    job.busy = holding.elapsed();
    job.slot = Some(SlotHeld {
        index,
        from_ms,
        to_ms: crate::sys::clock::now_millis(),
    });
    progress.slots(shared.running.fetch_sub(1, Ordering::SeqCst) - 1, cap);
}

/// Wait for a machine-wide slot for the job; `None` (its outcome set) when
/// the run stopped meanwhile or no slot can be had.
fn wait_for_slot(shared: &Shared<'_>, job: &mut Job<'_>) -> Option<slots::Slot> {
    let id = &job.wo.id;
    shared.progress.phase(id, Phase::Slot);
    let waiting = Instant::now();
    let slot = shared
        .host
        .take_slot(shared.slot_dir, shared.cap, id, shared.me, shared.progress);
    job.queue_wait = Some(waiting.elapsed());
    match slot {
        Ok(Some(slot)) => Some(slot),
        Ok(None) => {
            job.outcome = JobOutcome::Interrupted;
            None
        }
        Err(why) => {
            job.outcome = JobOutcome::Retry(why);
            None
        }
    }
}

/// The job's attempt through the pipeline, in its worktree: stopped by a
/// stop request, the run failing, or a `halt` of this order (which stops
/// this build only).
fn run_attempt(shared: &Shared<'_>, job: &mut Job<'_>) -> BuildOutcome {
    let (host, me, opts) = (shared.host, shared.me, shared.opts);
    let env = host.env(job.wo, job.attempt, job.base, &job.worktree);
    let halted = job.halted.clone();
    let stop = || {
        me.should_stop() || halted.load(Ordering::Relaxed) || shared.abort.load(Ordering::Relaxed)
    };
    let branch = branch_of(&job.wo.id);
    let steps = Steps {
        setup: opts.pool.setup.as_deref(),
        setup_inputs: &opts.pool.setup_inputs,
        build: &opts.build,
        gates: &opts.gates,
        critics: &opts.critics,
        timeout: opts.timeout,
    };
    let outcome = host.run_attempt(
        &Attempt {
            label: &job.wo.id,
            wo: job.wo,
            attempt: job.attempt,
            base: job.base,
            worktree: &job.worktree,
            branch: &branch,
            log: &job.log,
            trailers: "",
            env: &env,
            committing: Some(&*shared.committing),
        },
        &steps,
        me,
        &stop,
        &shared.misconfigured,
        &mut job.verdicts,
        shared.progress,
    );
    if outcome == BuildOutcome::Passed && steps.checks_nothing() {
        // Still counted as committing (see `Attempt::committing`).
        job.reporting = Some(Reporting(shared.committing.clone()));
    }
    outcome
}

impl From<BuildOutcome> for JobOutcome {
    /// A blocking critic is terminal; any other failing step is retried.
    fn from(built: BuildOutcome) -> JobOutcome {
        match built {
            BuildOutcome::Passed => JobOutcome::Clean,
            BuildOutcome::Failed {
                step: Step::Critic,
                why,
            } => JobOutcome::Blocked(why),
            BuildOutcome::Failed { why, .. } => JobOutcome::Retry(why),
            BuildOutcome::Interrupted => JobOutcome::Interrupted,
            BuildOutcome::NotRunnable(failed) => JobOutcome::NotRunnable(failed),
            BuildOutcome::DiskFull(why) => JobOutcome::DiskFull(why),
            BuildOutcome::CommitFailed(why) => JobOutcome::CommitFailed(why),
        }
    }
}

impl JobOutcome {
    /// How the attempt ended, for its log's footer.
    fn describe(&self) -> String {
        match self {
            JobOutcome::Pending => "not finished".into(),
            JobOutcome::Clean => "passed".into(),
            JobOutcome::Retry(why)
            | JobOutcome::Blocked(why)
            | JobOutcome::DiskFull(why)
            | JobOutcome::CommitFailed(why) => why.clone(),
            JobOutcome::Interrupted => "interrupted".into(),
            JobOutcome::NotRunnable(failed) => failed.describe(),
            JobOutcome::NotStarted => NOT_STARTED.into(),
            JobOutcome::NoWorktree(why) | JobOutcome::HeldElsewhere(why) => why.clone(),
        }
    }

    /// Why an attempt that did not pass failed, for its record and
    /// progress, and the halt reason when that is terminal (a critic).
    fn failure(&self) -> (String, Option<&'static str>) {
        match self {
            JobOutcome::Retry(why) => (why.clone(), None),
            JobOutcome::Blocked(why) => (why.clone(), Some("blocking_critique")),
            JobOutcome::CommitFailed(why) => (why.clone(), None),
            JobOutcome::NotRunnable(failed) => (failed.describe(), None),
            JobOutcome::NotStarted => (NOT_STARTED.to_string(), None),
            JobOutcome::NoWorktree(why) | JobOutcome::HeldElsewhere(why) => (why.clone(), None),
            _ => ("interrupted".to_string(), None),
        }
    }

    /// Stopped by the user, the disk, git's configuration or a command that
    /// cannot run, not failed by the builder: the attempt is given back.
    fn gives_back(&self) -> bool {
        matches!(
            self,
            JobOutcome::Interrupted
                | JobOutcome::Pending
                | JobOutcome::Clean
                | JobOutcome::DiskFull(_)
                | JobOutcome::CommitFailed(_)
                | JobOutcome::NotRunnable(_)
                | JobOutcome::NotStarted
                | JobOutcome::NoWorktree(_)
                | JobOutcome::HeldElsewhere(_)
        )
    }

    /// The history event (its name and detail) of an attempt given back:
    /// `failure` is why it did not pass, `kept` where its uncommitted work
    /// stays, `log` its log.
    fn given_back(
        &self,
        failure: &str,
        kept: Option<&String>,
        log: &str,
    ) -> (&'static str, String) {
        match (self, kept) {
            (JobOutcome::DiskFull(why), _) => ("disk_full", why.clone()),
            (JobOutcome::NotRunnable(failed), _) => (failed.event(), failure.to_owned()),
            (JobOutcome::NotStarted, _) => ("not_started", failure.to_owned()),
            (JobOutcome::NoWorktree(_), _) => ("abandoned", failure.to_owned()),
            (JobOutcome::HeldElsewhere(_), _) => ("held_elsewhere", failure.to_owned()),
            (_, Some(kept)) => (worktree::KEPT_UNCOMMITTED, kept.clone()),
            _ => ("interrupted", log.to_owned()),
        }
    }
}

/// Where a job's work stays when committing it failed.
fn kept_work(job: &Job<'_>) -> Option<KeptWork> {
    match &job.outcome {
        JobOutcome::CommitFailed(why) => Some(KeptWork {
            label: job.wo.id.clone(),
            error: why.clone(),
            worktree: job.worktree.clone(),
            branch: branch_of(&job.wo.id),
        }),
        _ => None,
    }
}

impl Run<'_> {
    /// Turn an attempt that did not pass into its transition: back for a
    /// retry, halted (a critic), or given back (stopped, the disk, git's
    /// configuration). Conditional on this conductor still holding the
    /// attempt: a `halt` while it was in flight (or a takeover) wins, see
    /// [`let_go`].
    fn settle_failed(&mut self, job: &Job<'_>, outcome: &JobOutcome) -> Result<()> {
        self.settle_failed_as(job, outcome, false)
    }

    /// [`Run::settle_failed`]; `restored`: its claim was restored once already.
    fn settle_failed_as(
        &mut self,
        job: &Job<'_>,
        outcome: &JobOutcome,
        restored: bool,
    ) -> Result<()> {
        let (ctx, id, owner) = (self.ctx, &job.wo.id, self.me.name.as_str());
        let verdicts = job.verdicts.clone();
        let queue_wait_ms = job.queue_wait.map(|w| w.as_millis() as u64);
        let log = job.log.display().to_string();
        let (event, halt) = outcome.failure();
        // The builder's work exists only in its worktree: kept, and
        // recorded, because the next run removes it.
        let kept = kept_work(job).map(|k| k.describe(&ctx.repo));
        let gives_back = outcome.gives_back();
        let cost_cap = self.opts.max_cost_per_order;
        // Why the attempt's order is past its cost cap, as the transaction found.
        let mut capped = None;
        crate::sys::crash::point("verdict.before");
        let held = self
            .store
            .transact(&format!("verdict {id}"), |txn| -> Result<bool> {
                capped = None;
                let Some(mut record) = txn.stored(id)? else {
                    return Ok(false);
                };
                if !record.held_by(owner, job.attempt) {
                    return Ok(false);
                }
                record.verdicts = verdicts.clone();
                record.queue_wait_ms = queue_wait_ms;
                // A failed attempt that took the order's reported cost past
                // its cap is its last: it halts, its work kept.
                capped = match (halt, cost_cap) {
                    (None, Some(cap)) if !gives_back => over_cost_cap(&record, cap),
                    _ => None,
                };
                match (halt, &capped) {
                    (Some(reason), _) => {
                        record.release();
                        record.halt(reason, vec![event.clone()]);
                    }
                    (None, Some(over)) => {
                        record.release();
                        record.log(FAILED_EVENT, Some(event.clone()));
                        record.halt(COST_CAP_EXCEEDED, vec![over.clone()]);
                    }
                    (None, None) if gives_back => {
                        record.give_back();
                        let (name, detail) = outcome.given_back(&event, kept.as_ref(), &log);
                        record.log(name, Some(detail));
                    }
                    (None, None) => {
                        record.release();
                        record.log(FAILED_EVENT, Some(event.clone()));
                    }
                }
                record.held_slot(job.slot);
                txn.put(record);
                Ok(true)
            })?;
        crate::sys::crash::point("verdict.after");
        // Another conductor's order: its worktree and branch are not this
        // run's to touch, nor its claim this run's to restore.
        let elsewhere = matches!(outcome, JobOutcome::HeldElsewhere(_));
        if !held && !elsewhere && !restored && restore_claim(self, job)? {
            return self.settle_failed_as(job, outcome, true);
        }
        if !held && !elsewhere {
            if let_go(self, job, false)? {
                crate::run::pool::give_back(ctx, id, &branch_of(id), false)?;
            }
            return Ok(());
        }
        let halt = halt.or(capped.map(|_| COST_CAP_EXCEEDED));
        let keep_branch = halt.is_some() || kept.is_some();
        self.progress
            .event(&settled_event(job, halt, kept.is_some(), event));
        if elsewhere {
            return Ok(());
        }
        // A halted attempt's worktree and branch stay for inspection until `clear`.
        crate::run::pool::give_back(ctx, id, &branch_of(id), keep_branch)
    }
}

/// Why `record` is past the cost cap `cap` (USD), if its attempts together
/// reported more.
fn over_cost_cap(record: &Record, cap: f64) -> Option<String> {
    let spent = Spent::of_record(record).cost_usd?;
    (spent > cap).then(|| {
        format!(
            "its attempts reported {} in all, more than arbiter.maxCostPerOrder {}",
            Usd(spent),
            Usd(cap)
        )
    })
}

/// What progress says of a settled attempt that did not pass: halted
/// (`halt`), its work `kept` in its worktree, or back for rework.
fn settled_event(job: &Job<'_>, halt: Option<&str>, kept: bool, failure: String) -> Event {
    let (wo, log) = (job.wo.id.clone(), job.log.clone());
    match (halt, kept) {
        (Some(reason), _) => Event::Blocked {
            wo,
            reason: reason.to_owned(),
            log,
        },
        (None, true) => Event::Kept {
            wo,
            reason: failure,
            worktree: job.worktree.clone(),
            branch: branch_of(&job.wo.id),
            log,
        },
        (None, false) => Event::Rework {
            wo,
            reason: failure,
            log,
        },
    }
}

/// The attempt is no longer ours to settle. Halted while in flight (`git
/// arbiter halt`): whatever the builder left is committed on its branch, the
/// worktree and branch are kept for inspection, and the record is let go (not
/// in progress, no owner; still halted). Taken over by someone else: nothing
/// of it is touched, the worktree may be theirs now. With a remote, a claim
/// lost to a lapsed lease is recorded on the order, and `Ok(true)`: the
/// worktree is this clone's alone, free to go back to the pool. Held by
/// nobody ([`forgot_claim`]), work that `passed` waits to land
/// ([`settle_forgotten`]).
fn let_go(run: &Run<'_>, job: &Job<'_>, passed: bool) -> Result<bool> {
    let (host, store) = (run.host, run.store);
    let (owner, progress) = (run.me.name.as_str(), run.progress);
    let id = &job.wo.id;
    if passed && settle_forgotten(run, job)? {
        run.forgotten_waits.set(true);
        return Ok(false);
    }
    let ours = |r: &Record| r.owner.as_deref() == Some(owner) && r.attempts == job.attempt;
    let halted = store
        .snapshot()?
        .record(id)?
        .is_some_and(|r| ours(&r) && r.halted);
    if halted && job.worktree.is_dir() {
        if let Err(e) = host.commit_leftovers(&job.worktree, job.wo, job.attempt, "") {
            progress.event(&Event::Warning {
                wo: id.clone(),
                detail: format!("committing what the builder left: {e}"),
            });
        }
    }
    let log = job.log.display().to_string();
    let late = format!(
        "attempt {} of {owner} ended after its lease lapsed: its result is discarded, never landed ({log})",
        job.attempt
    );
    let released = store.transact(&format!("let go {id}"), |txn| -> Result<LetGo> {
        let Some(mut record) = txn.stored(id)? else {
            return Ok(LetGo::TakenOver);
        };
        if !ours(&record) || record.status != Status::InProgress {
            // Taken over after the lease lapsed (a remote): said on the
            // record, whose new holder is left alone.
            if store.remote().is_some() {
                record.log(LATE_RESULT_EVENT, Some(late.clone()));
                txn.put(record);
            }
            return Ok(LetGo::TakenOver);
        }
        if !record.halted && record.lease.as_ref().is_some_and(|l| l.expired()) {
            record.release();
            record.log(LATE_RESULT_EVENT, Some(late.clone()));
            txn.put(record);
            return Ok(LetGo::Lapsed);
        }
        let reason = record.halt_reason.clone().unwrap_or_default();
        record.release();
        record.log("halted_in_flight", Some(log.clone()));
        txn.put(record);
        Ok(LetGo::Halted(reason))
    })?;
    if let Some(remote) = store.remote() {
        remote.let_go(id);
    }
    let detail = match released {
        LetGo::Halted(reason) => {
            progress.event(&Event::HaltedInFlight {
                wo: id.clone(),
                reason,
                kept: branch_of(id),
            });
            return Ok(false);
        }
        LetGo::Lapsed => late,
        LetGo::TakenOver if store.remote().is_some() => {
            format!("{late}; another conductor holds it now")
        }
        LetGo::TakenOver => {
            progress.event(&Event::Warning {
                wo: id.clone(),
                detail: "taken over by another conductor; left alone".into(),
            });
            return Ok(false);
        }
    };
    progress.event(&Event::Warning {
        wo: id.clone(),
        detail,
    });
    Ok(true)
}

/// Does `record` no longer know of attempt `attempt` of `owner`, which
/// still runs, with nobody else holding the order: no record, or one held
/// by nobody and not settled, or `owner`'s own earlier attempt? That is a
/// notes ref moved back or edited under the run.
fn forgot_claim(record: Option<&Record>, owner: &str, attempt: u32) -> bool {
    let Some(record) = record else {
        return true;
    };
    !record.halted
        && match record.status {
            Status::Ready | Status::Blocked | Status::NeedsRework => record.owner.is_none(),
            Status::InProgress => {
                record.owner.as_deref() == Some(owner) && record.attempts < attempt
            }
            Status::Verified | Status::Done => false,
        }
}

/// Why a forgotten claim is settled as it is, for the order's history.
fn forgotten_why(job: &Job<'_>, owner: &str) -> String {
    format!(
        "refs/notes/arbiter no longer held attempt {} of {owner} (moved back or edited under the run)",
        job.attempt
    )
}

/// Change the record of `job`'s order by `change` if it forgot the claim
/// ([`forgot_claim`]) and no merge of the order is on `into` (recovery
/// settles that); `Ok(false)`, nothing written, otherwise.
fn on_forgotten_claim(
    run: &Run<'_>,
    job: &Job<'_>,
    mut change: impl FnMut(&mut Record),
) -> Result<bool> {
    let (ctx, store, owner) = (run.ctx, run.store, run.me.name.as_str());
    let id = &job.wo.id;
    if store.remote().is_some() {
        return Ok(false);
    }
    wait_out_other_claim(ctx, store, id, owner)?;
    let tip = ctx.branch_tip(run.branch)?;
    store.transact(
        &format!("settle the forgotten claim on {id}"),
        |txn| -> Result<bool> {
            let stored = txn.stored(id)?;
            if !forgot_claim(stored.as_ref(), owner, job.attempt) {
                return Ok(false);
            }
            let mut record = txn.record(id, !job.wo.deps.is_empty())?;
            if matches!(
                reconcile::recover(ctx, &record, Some(tip)),
                Recovery::Done { .. } | Recovery::Error { .. }
            ) {
                return Ok(false);
            }
            change(&mut record);
            txn.put(record);
            Ok(true)
        },
    )
}

/// Another live conductor that claimed the order after the state forgot
/// this run's claim cannot build it while this run holds the order's
/// worktree (its take finds it in use and gives the claim back): wait a
/// moment for that, up to [`OTHER_CLAIM_WAIT`].
fn wait_out_other_claim(ctx: &Context, store: &Store<'_>, id: &str, owner: &str) -> Result<()> {
    let deadline = Instant::now() + OTHER_CLAIM_WAIT;
    while Instant::now() < deadline {
        let held_by_another = store.snapshot()?.record(id)?.is_some_and(|r| {
            r.status == Status::InProgress
                && !r.halted
                && r.owner.as_deref().is_some_and(|o| o != owner)
                && conductor::owns_live(ctx, &r)
        });
        if !held_by_another {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// How long [`wait_out_other_claim`] waits.
const OTHER_CLAIM_WAIT: Duration = Duration::from_secs(5);

/// [`let_go`] for passed work whose record forgot its claim: it waits to
/// land, its worktree given back and its branch kept, and the run takes it
/// up to land it like any work waiting (no rebuild, no attempt spent).
fn settle_forgotten(run: &Run<'_>, job: &Job<'_>) -> Result<bool> {
    let (ctx, owner) = (run.ctx, run.me.name.as_str());
    let id = &job.wo.id;
    let Some(source) = ctx
        .repo
        .try_find_reference(worktree::branch_ref(id).as_str())
        .ok()
        .flatten()
        .and_then(|mut branch| branch.peel_to_id().ok())
        .map(|source| source.detach())
    else {
        return Ok(false);
    };
    let why = forgotten_why(job, owner);
    let waits = on_forgotten_claim(run, job, |record| {
        record.attempts = record.attempts.max(job.attempt);
        record.queue_to_land(source.to_string());
        record.wait_to_land(None, format!("{why}: its passed work waits to land"));
    })?;
    if waits {
        warn_forgotten(run, id, "its passed work waits to land");
        crate::run::pool::give_back_keeping_branch(ctx, id, &branch_of(id))?;
    }
    Ok(waits)
}

/// Hold `job`'s order again for its attempt when its record forgot the
/// claim, so that its verdict is recorded as if nothing happened.
fn restore_claim(run: &Run<'_>, job: &Job<'_>) -> Result<bool> {
    let owner = run.me.name.as_str();
    let why = forgotten_why(job, owner);
    let restored = on_forgotten_claim(run, job, |record| {
        record.status = Status::InProgress;
        record.owner = Some(owner.to_owned());
        record.lease = None;
        record.landing = None;
        record.attempts = job.attempt;
        record.log(FORGOTTEN_EVENT, Some(format!("{why}: held again")));
    })?;
    if restored {
        warn_forgotten(run, &job.wo.id, "held again");
    }
    Ok(restored)
}

/// Say once that the state forgot this run's claim on `id`, and `then` what
/// became of the attempt.
fn warn_forgotten(run: &Run<'_>, id: &str, then: &str) {
    run.progress.event(&Event::Warning {
        wo: id.to_owned(),
        detail: format!(
            "the state forgot this run's claim (refs/notes/arbiter moved back or edited); {then}"
        ),
    });
}

/// The event on a record whose claim the state forgot while its attempt ran.
pub const FORGOTTEN_EVENT: &str = "claim_forgotten";

/// How [`let_go`] found the order it no longer holds.
enum LetGo {
    /// Halted by hand while in flight (the reason).
    Halted(String),
    /// Its lease lapsed (a remote out of reach) and nobody took it yet.
    Lapsed,
    TakenOver,
}

/// The event on a record whose attempt ended after its lease lapsed.
pub const LATE_RESULT_EVENT: &str = "late_result_discarded";

/// An order whose settling could not happen: its attempt, and whether its
/// build passed (its work is committed on its branch).
type Unsettled<'a> = (&'a WorkOrder, u32, bool);

impl Job<'_> {
    fn unsettled(&self) -> Unsettled<'_> {
        (self.wo, self.attempt, self.outcome == JobOutcome::Clean)
    }
}

/// Settle `jobs` whose settling could not happen (the run failed or
/// stopped): work that passed waits to land (`verified`), kept on its
/// branch; the rest is requeued, its attempt given back (`why` logged).
fn abandon(
    ctx: &Context,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    jobs: &[Unsettled<'_>],
    me: &Conductor,
    why: &Error,
) -> Result<()> {
    // A full disk: the space kept for these very transitions goes now.
    if why.is_disk_full() {
        me.release_reserve();
    }
    let why = match why {
        Error::Interrupted => "stopped before it landed".to_owned(),
        e => e.to_string(),
    };
    let why = why.as_str();
    let owner = me.name.as_str();
    let tip = ctx.branch_tip(branch)?;
    // What each passed order's branch holds: the work that waits.
    let sources: BTreeMap<&str, gix::ObjectId> = jobs
        .iter()
        .filter(|(_, _, passed)| *passed)
        .filter_map(|(wo, _, _)| {
            let mut branch = ctx
                .repo
                .try_find_reference(worktree::branch_ref(&wo.id).as_str())
                .ok()??;
            Some((wo.id.as_str(), branch.peel_to_id().ok()?.detach()))
        })
        .collect();
    let settled = store.transact(
        "abandon unsettled work orders",
        |txn| -> Result<Vec<(String, bool)>> {
            let mut settled = Vec::new();
            for &(wo, attempt, _) in jobs {
                let mut record = txn.record(&wo.id, !wo.deps.is_empty())?;
                // Only what is still ours and unmerged: a merge that landed before
                // settling failed is left to the recovery rule at the next start,
                // so it can never be merged twice.
                if !record.held_by(owner, attempt) {
                    continue;
                }
                if matches!(
                    reconcile::recover(ctx, &record, Some(tip)),
                    Recovery::Done { .. } | Recovery::Error { .. }
                ) {
                    continue;
                }
                if record.landing.is_none() {
                    if let Some(source) = sources.get(wo.id.as_str()) {
                        record.queue_to_land(source.to_string());
                    }
                }
                let waits = record.landing.is_some();
                if waits {
                    record.wait_to_land(None, why.to_owned());
                } else {
                    record.give_back();
                    record.log("abandoned", Some(why.to_owned()));
                }
                txn.put(record);
                settled.push((wo.id.clone(), waits));
            }
            Ok(settled)
        },
    )?;
    for (id, waits) in settled {
        if waits {
            crate::run::pool::give_back_keeping_branch(ctx, &id, &branch_of(&id))?;
        } else {
            crate::run::pool::give_back(ctx, &id, &branch_of(&id), false)?;
        }
    }
    Ok(())
}

/// The rounds a real run would start with, assuming every batched WO lands.
fn plan(
    ctx: &Context,
    orders: &Orders,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    max: usize,
) -> Result<Vec<Vec<String>>> {
    let tip = ctx.branch_tip(branch).ok();
    let mut snapshot = store.snapshot()?;
    let mut rows = reconcile::table(ctx, orders, &mut snapshot, tip, store.default_cap, &|r| {
        owned_by_live(ctx, r)
    })?
    .rows;
    let mut planned = Vec::new();
    loop {
        let selected = batch::select(orders, &rows, max);
        if selected.batch.is_empty() {
            break;
        }
        let ids: Vec<String> = selected.batch.iter().map(|p| p.wo_id.clone()).collect();
        for row in rows.iter_mut() {
            if ids.contains(&row.id) {
                row.status = Status::Done;
            }
        }
        planned.push(ids);
    }
    Ok(planned)
}

/// Fill the summary's done / halted / pending lists from the final state;
/// `me` names this conductor, whose own orders are not held elsewhere.
fn finish(
    ctx: &Context,
    orders: &Orders,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    ran: &BTreeSet<String>,
    me: &str,
    summary: &mut Summary,
) -> Result<()> {
    let tip = ctx.branch_tip(branch).ok();
    summary.integration_tip = tip.map(|t| t.to_string());
    let mut snapshot = store.snapshot()?;
    let table = reconcile::table(ctx, orders, &mut snapshot, tip, store.default_cap, &|r| {
        owned_by_live(ctx, r)
    })?;
    let halted: BTreeMap<&str, &Record> = table
        .records
        .iter()
        .filter(|r| r.halted)
        .map(|r| (r.wo.as_str(), r))
        .collect();
    for row in &table.rows {
        if let Some(record) = halted.get(row.id.as_str()) {
            summary.halted.push(escalated(ctx, &row.id, record));
        } else if row.status == Status::Done {
            summary.done.push(row.id.clone());
        } else if row.status == Status::Verified {
            let record = table.records.iter().find(|r| r.wo == row.id);
            summary.waiting.push(WaitingToLand {
                wo_id: row.id.clone(),
                why: record.and_then(|r| r.landing.as_ref()?.blocked.clone()),
                branch: branch_of(&row.id),
            });
        } else {
            summary.pending.push(row.id.clone());
            if let Some(conductor) = row.claimed_by.as_ref().filter(|c| **c != me) {
                summary.held_elsewhere.push(HeldElsewhere {
                    wo_id: row.id.clone(),
                    conductor: conductor.clone(),
                    pid: crate::run::conductor::pid_of(conductor)
                        .filter(|_| row.claimed_on.is_none()),
                    machine: row.claimed_on.clone(),
                });
            }
        }
    }
    for record in table.records.iter().filter(|r| ran.contains(&r.wo)) {
        summary.orders.push(order_row(&mut snapshot, record)?);
    }
    summary.orders.sort_by(|a, b| a.wo_id.cmp(&b.wo_id));
    Ok(())
}

/// A halted order in the summary: why, its kept branch and its last
/// attempt's log where they are still there, and its last failure.
fn escalated(ctx: &Context, id: &str, record: &Record) -> Escalated {
    let branch = branch_of(id);
    let kept = ctx
        .repo
        .try_find_reference(format!("refs/heads/{branch}").as_str())
        .ok()
        .flatten()
        .is_some();
    let log = (record.attempts > 0).then(|| log_path(ctx, id, record.attempts));
    Escalated {
        wo_id: id.to_owned(),
        reason: record.halt_reason.clone().unwrap_or_default(),
        paths: record.halt_paths.clone(),
        branch: kept.then_some(branch),
        log: log.filter(|p| p.exists()).map(|p| p.display().to_string()),
        last_failure: crate::run::reconcile::LastFailure::of(ctx, record),
    }
}

/// The summary's row of an order this run took up: its outcome, the time
/// its steps took, and for a done order the files its merge changed (from
/// the merge's note).
fn order_row(snapshot: &mut crate::state::Snapshot<'_>, record: &Record) -> Result<OrderRow> {
    let wall = |kind: &str| {
        let times: Vec<u64> = record
            .verdicts
            .iter()
            .filter(|v| v.kind == kind)
            .filter_map(|v| v.wall_ms)
            .collect();
        (!times.is_empty()).then(|| times.iter().sum())
    };
    let changed = match (&record.status, &record.checkpoint_after) {
        (Status::Done, Some(sha)) => match gix::ObjectId::from_hex(sha.as_bytes()) {
            Ok(merge) => snapshot
                .note(&merge)?
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|note| Some(note.get("changed")?.as_array()?.len())),
            Err(_) => None,
        },
        _ => None,
    };
    Ok(OrderRow {
        wo_id: record.wo.clone(),
        outcome: match &record.halt_reason {
            Some(reason) if record.halted => format!("halted: {reason}"),
            _ => record.status.to_string(),
        },
        state: record.status.state(record.halted),
        attempts: record.attempts,
        build_ms: wall("build"),
        gate_ms: wall("gate"),
        critic_ms: wall("critic"),
        queue_wait_ms: record.queue_wait_ms,
        merge_wait_ms: None,
        changed,
        spent: None,
    })
}

/// Run the final gate once on the integration tip, in a throwaway worktree.
fn final_gate(
    ctx: &Context,
    branch: &gix::refs::FullName,
    cmd: &str,
    timeout: Option<Duration>,
    me: &Conductor,
    progress: &dyn Progress,
) -> Result<Verdict> {
    let tip = ctx.branch_tip(branch)?;
    let repo_top = worktree::main_top(ctx)?;
    let name = format!("final-gate-{}", me.name);
    let wt_branch = format!("arbiter-final/{}", me.name);
    let path = worktree::add(ctx, &name, &wt_branch, tip)?;
    let log = crate::git::layout::run_log(&ctx.repo, &format!("final-gate-{}.log", me.name));
    let env = vec![
        ("ARBITER_ROUND_BASE".to_string(), tip.to_string()),
        ("ARBITER_REPO".to_string(), repo_top.display().to_string()),
    ];
    let stop = || me.should_stop();
    let started = Instant::now();
    let exit = exec::run(
        &exec::Spec {
            command: cmd,
            cwd: &path,
            env: &env,
            log: &log,
            kind: Some("final gate"),
            stdout_to: None,
            timeout,
            groups: Some(&me.groups_dir()),
            caches: &ctx.caches,
        },
        &stop,
    );
    worktree::remove(ctx, &name, &wt_branch)?;
    let exit = exit.map_err(|source| Failure::FinalGate {
        cmd: cmd.to_owned(),
        source,
    })?;
    progress.event(&Event::FinalGate {
        result: exit.clone(),
        log: log.clone(),
    });
    let mut v = verdict("final_gate", cmd, &exit, started.elapsed());
    v.detail = Some(log.display().to_string());
    Ok(v)
}

//! The round (DESIGN "Porcelain"): reconcile and recover → kill switch →
//! budget → batch → ROUND_BASE → worktrees → promote and cap (the attempt is
//! recorded before the build starts) → build all concurrently within the
//! machine-wide slots → commit what the builder left → gates and critics →
//! verdict → merge back one at a time → prune → next round off the new tip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::builder::{
    kept_work_error, not_runnable_error, verdict, watch_halts, Attempt, BuildOutcome, Host,
    KeptWork, NotRunnable, Step, Steps, NOT_RUNNABLE,
};
use crate::conductor::{self, Conductor};
use crate::context::Context;
use crate::drift::DriftScope;
use crate::error::{Error, ExitCode, GitContext, InputError, Result};
use crate::exec;
use crate::merge::{self, Outcome};
use crate::orders::{Orders, WorkOrder};
use crate::progress::Progress;
use crate::reconcile::{self, Recovery};
use crate::state::{Record, Status, Store, Verdict};
use crate::worktree::{self, branch_of};
use crate::{batch, slots};

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
    /// Warm worktrees and the setup hook.
    pub pool: crate::pool::Options,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Escalated {
    pub wo_id: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The kept branch holding the halted attempt's work, if any.
    pub branch: Option<String>,
    pub log: Option<String>,
}

/// Why a run stopped before its work was done; in JSON, the sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// `git arbiter stop`, Ctrl-C, SIGTERM or SIGHUP.
    Requested,
    /// `--budget-cmd` exited non-zero (its status).
    BudgetExhausted(String),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Requested => f.write_str("stop requested"),
            Stopped::BudgetExhausted(status) => write!(f, "--budget-cmd exited with {status}"),
        }
    }
}

impl Serialize for Stopped {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
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
}

/// How one work order of this run went: its last attempt's wall times.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OrderRow {
    pub wo_id: String,
    /// `done`, `halted: <reason>`, or its status.
    pub outcome: String,
    pub attempts: u32,
    pub build_ms: Option<u64>,
    pub gate_ms: Option<u64>,
    pub critic_ms: Option<u64>,
    pub queue_wait_ms: Option<u64>,
    /// Files its merge changed (done orders).
    pub changed: Option<usize>,
}

/// One work order being built this round.
struct Job<'a> {
    wo: &'a WorkOrder,
    attempt: u32,
    worktree: PathBuf,
    log: PathBuf,
    verdicts: Vec<Verdict>,
    /// How long it waited for a machine-wide slot.
    queue_wait: Option<Duration>,
    outcome: JobOutcome,
}

#[derive(Debug, Clone, PartialEq)]
enum JobOutcome {
    Pending,
    /// Build or gate failed: discard and retry next round (until the cap).
    Retry(String),
    /// A critic blocked it: terminal.
    Blocked(String),
    Interrupted,
    /// Writing the attempt's work failed for want of disk space: given back.
    DiskFull(String),
    /// Committing what the builder left failed for git's configuration
    /// ([`CommitError`](crate::builder::CommitError)): given back, its
    /// worktree and branch kept, and the run stops with exit 2. The next
    /// round or race removes them as leftovers (the record names the
    /// branch's commit) and builds afresh.
    CommitFailed(String),
    /// A command could not run ([`NotRunnable`]): given back, and the run
    /// stops with exit 2 once the builds already running have settled.
    NotRunnable(NotRunnable),
    /// Not built because another order's command could not run: given back.
    NotStarted,
    Clean,
}

/// Why an order was given back unbuilt: see [`JobOutcome::NotStarted`].
/// The history event of an attempt that failed its build or gates: the
/// clock of `arbiter.retryDelay` starts there.
const FAILED_EVENT: &str = "needs_rework";
const NOT_STARTED: &str = "not started: a command of another order could not run";

pub fn log_path(ctx: &Context, id: &str, attempt: u32) -> PathBuf {
    ctx.repo
        .common_dir()
        .join("arbiter")
        .join("logs")
        .join(id)
        .join(format!("attempt-{attempt}.log"))
}

/// Run rounds until nothing is eligible (or once, or until stopped).
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
    let branch = ctx.integration_branch(opts.into.as_deref())?;
    let store = Store::new(&ctx.repo, ctx.retry_cap()?);
    let mut summary = Summary {
        version: 1,
        ..Summary::default()
    };
    if opts.dry_run {
        summary.planned = plan(ctx, orders, &store, &branch, opts.max)?;
        for (i, batch) in summary.planned.iter().enumerate() {
            progress.event(
                "plan",
                &[("round", (i + 1).to_string()), ("batch", batch.join(","))],
            );
        }
        finish(ctx, orders, &store, &branch, &BTreeSet::new(), &mut summary)?;
        summary.exit = ExitCode::Success;
        return Ok(summary);
    }
    crate::checkout::sync_checked_out(ctx, &branch)?;
    refuse_dirty_checkout(ctx, &branch)?;
    let me = Conductor::register(ctx)?;
    for line in crate::conductor::end_orphans(ctx)? {
        progress.event("recover", &[("detail", line)]);
    }
    let slot_dir = slots::slot_dir(Some(ctx))?;
    let host = Host::new(ctx)?;
    let mut merges = merge::Session::default();
    let mut ran = BTreeSet::new();
    loop {
        // Reconcile and recover, as one transition.
        // Leftover worktrees go first: that frees disk space for the state writes.
        for line in worktree::cleanup_stale(
            ctx,
            &store,
            orders,
            ctx.branch_tip(&branch).ok(),
            &|r: &Record| owned_by_live(ctx, r),
        )? {
            progress.event("recover", &[("detail", line)]);
        }
        let rows = recover(ctx, orders, &store, &branch, &me, progress)?;
        if me.should_stop() {
            summary.stopped = Some(Stopped::Requested);
            break;
        }
        if let Some(cmd) = &opts.budget_cmd {
            let status = exec::shell(
                cmd,
                ctx.workdir.as_deref().unwrap_or(ctx.repo.git_dir()),
                &[],
            )
            .status()
            .map_err(Error::io(format!("running --budget-cmd '{cmd}'")))?;
            if !status.success() {
                progress.event(
                    "budget",
                    &[("exhausted", "true".into()), ("status", status.to_string())],
                );
                summary.stopped = Some(Stopped::BudgetExhausted(status.to_string()));
                break;
            }
        }
        let cooling = cooling(&store, &rows, opts.retry_delay)?;
        let rows: Vec<reconcile::Row> = rows
            .into_iter()
            .filter(|r| !cooling.iter().any(|(id, _)| *id == r.id))
            .collect();
        let selected = batch::select(orders, &rows, opts.max);
        progress.event(
            "batch",
            &[
                ("ready", selected.ready.to_string()),
                ("batch", selected.batch.len().to_string()),
                ("deferred", selected.deferred.len().to_string()),
                ("max", opts.max.to_string()),
            ],
        );
        if selected.batch.is_empty() {
            // Nothing else to do: wait for the first order to cool down
            // rather than leave it for another run.
            let Some((id, at)) = cooling.iter().min_by_key(|(_, at)| *at) else {
                break;
            };
            progress.event(
                "wait",
                &[
                    ("wo", id.clone()),
                    ("seconds", (at - crate::state::now()).max(0).to_string()),
                ],
            );
            while crate::state::now() < *at && !me.should_stop() {
                std::thread::sleep(Duration::from_millis(200));
            }
            continue;
        }
        summary.rounds += 1;
        let round_base = ctx.branch_tip(&branch)?;
        progress.event(
            "round",
            &[
                ("n", summary.rounds.to_string()),
                ("base", round_base.to_hex_with_len(12).to_string()),
                (
                    "batch",
                    selected
                        .batch
                        .iter()
                        .map(|p| p.wo_id.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                ),
            ],
        );
        let picked: Vec<&WorkOrder> = selected
            .batch
            .iter()
            .filter_map(|p| orders.get(&p.wo_id))
            .collect();
        let dispatched = dispatch(ctx, &store, orders, &picked, round_base, &me, progress)?;
        ran.extend(dispatched.iter().map(|(wo, _)| wo.id.clone()));
        let mut jobs = Vec::new();
        for &(wo, attempt) in &dispatched {
            let made = crate::pool::take(ctx, &opts.pool, &wo.id, &branch_of(&wo.id), round_base);
            let path = match made {
                Ok(path) => path,
                Err(e) => {
                    // Nothing was built: every dispatched order gets its attempt back.
                    if e.is_disk_full() {
                        me.release_reserve();
                    }
                    abandon(ctx, &store, &branch, &dispatched, &me.name, &e.to_string())?;
                    return Err(e);
                }
            };
            jobs.push(Job {
                wo,
                attempt,
                worktree: path,
                log: log_path(ctx, &wo.id, attempt),
                verdicts: Vec::new(),
                queue_wait: None,
                outcome: JobOutcome::Pending,
            });
        }
        let cap = slots::cap(Some(ctx), Some(opts.max_total))?;
        let running = AtomicUsize::new(0);
        let misconfigured = AtomicBool::new(false);
        let halted: Vec<AtomicBool> = jobs.iter().map(|_| AtomicBool::new(false)).collect();
        let built = AtomicBool::new(false);
        let ids: Vec<&str> = jobs.iter().map(|j| j.wo.id.as_str()).collect();
        let shared_repo = ctx.repo.clone().into_sync();
        std::thread::scope(|scope| {
            let (ids, halted_flags, built, owner) = (&ids, &halted, &built, &me.name);
            let shared_repo = &shared_repo;
            scope.spawn(move || watch_halts(shared_repo, ids, owner, halted_flags, built));
            let builds: Vec<_> = jobs
                .iter_mut()
                .zip(&halted)
                .map(|(job, halted)| {
                    let (slot_dir, me, running, host) = (&slot_dir, &me, &running, &host);
                    let misconfigured = &misconfigured;
                    scope.spawn(move || {
                        build_one(
                            host,
                            job,
                            opts,
                            round_base,
                            slot_dir,
                            cap,
                            me,
                            halted,
                            misconfigured,
                            running,
                            progress,
                        )
                    })
                })
                .collect();
            for build in builds {
                let _ = build.join();
            }
            built.store(true, Ordering::Relaxed);
        });
        let union: Vec<crate::scope::Entry> = picked
            .iter()
            .flat_map(|wo| wo.files.iter().cloned())
            .collect();
        if jobs
            .iter()
            .any(|j| matches!(j.outcome, JobOutcome::DiskFull(_)))
        {
            me.release_reserve();
        }
        for (i, job) in jobs.iter().enumerate() {
            if let Err(e) = settle(
                ctx,
                &host,
                &store,
                &branch,
                job,
                round_base,
                opts,
                &union,
                &me.name,
                &mut merges,
                progress,
            ) {
                // E.g. the checked-out integration branch has local changes:
                // nothing more can merge. The builders were not at fault, so
                // the unsettled orders get their attempts back.
                let unsettled: Vec<(&WorkOrder, u32)> =
                    jobs[i..].iter().map(|j| (j.wo, j.attempt)).collect();
                abandon(ctx, &store, &branch, &unsettled, &me.name, &e.to_string())?;
                return Err(e);
            }
            progress.finished(&job.wo.id);
        }
        if let Some(JobOutcome::DiskFull(why)) = jobs
            .iter()
            .map(|j| &j.outcome)
            .find(|o| matches!(o, JobOutcome::DiskFull(_)))
        {
            return Err(Error::Io {
                context: why.clone(),
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            });
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
        if me.should_stop() {
            summary.stopped = Some(Stopped::Requested);
            break;
        }
        if opts.once {
            break;
        }
    }
    finish(ctx, orders, &store, &branch, &ran, &mut summary)?;
    if summary.stopped == Some(Stopped::Requested) {
        summary.exit = ExitCode::Interrupted;
        return Ok(summary);
    }
    if summary.stopped.is_some() || !summary.halted.is_empty() {
        summary.exit = ExitCode::Escalation;
        return Ok(summary);
    }
    if summary.pending.is_empty() {
        if let Some(cmd) = &opts.final_gate {
            let verdict = final_gate(ctx, &branch, cmd, opts.timeout, &me, progress)?;
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
    let now = crate::state::now();
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

/// Local edits in a checked-out copy of the integration branch would stop
/// every merge-back: say so before any builder spends its time.
pub(crate) fn refuse_dirty_checkout(ctx: &Context, branch: &gix::refs::FullName) -> Result<()> {
    for wt in crate::checkout::worktrees_with_branch(ctx, branch)? {
        let changes = crate::checkout::local_changes(&wt)?;
        if !changes.is_empty() {
            let place = wt
                .workdir()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            return Err(InputError::new(format!(
                "{} is checked out in {place} with local changes: {}",
                branch.shorten(),
                changes.join(", ")
            ))
            .hint("commit or stash them first: git-arbiter never overwrites your edits")
            .into());
        }
    }
    Ok(())
}

fn owned_by_live(ctx: &Context, record: &Record) -> bool {
    conductor::owns_live(ctx, record)
}

/// Crash recovery ([`reconcile::recover_and_record`]) under the merge-back
/// turn, so no merge-back is between its branch move and its record; then
/// the standalone merge-backs a kill interrupted are finished. Reports what
/// it concluded. Returns the table rows after recovery.
pub(crate) fn recover(
    ctx: &Context,
    orders: &Orders,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    me: &Conductor,
    progress: &dyn Progress,
) -> Result<Vec<reconcile::Row>> {
    let rows = recover_once(ctx, orders, store, branch, me, progress)?;
    let pending: Vec<(&WorkOrder, gix::ObjectId)> = rows
        .iter()
        .filter_map(|row| match &row.recovery {
            Some(Recovery::MergeBackPending { source }) => Some((
                orders.get(&row.id)?,
                gix::ObjectId::from_hex(source.as_bytes()).ok()?,
            )),
            _ => None,
        })
        .collect();
    if pending.is_empty() {
        return Ok(rows);
    }
    // A killed standalone merge-back: its branch is someone's finished work,
    // so it is merged as that merge-back would have (own scope), not rebuilt.
    for (wo, source) in pending {
        let record = store.snapshot()?.record(&wo.id)?;
        let (attempt, round_base) = merge::standalone(record.as_ref());
        let outcome = merge::merge_back(
            ctx,
            store,
            &merge::Request {
                wo,
                into: branch,
                source,
                attempt,
                round_base,
                scope: DriftScope::Own,
                extra_note: None,
                owner: None,
                retry: false,
            },
        )?;
        progress.event(
            "recover",
            &[("wo", wo.id.clone()), ("merge_back", outcome.name().into())],
        );
    }
    recover_once(ctx, orders, store, branch, me, progress)
}

fn recover_once(
    ctx: &Context,
    orders: &Orders,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    me: &Conductor,
    progress: &dyn Progress,
) -> Result<Vec<reconcile::Row>> {
    let turn = merge::take_turn(ctx)?;
    let tip = ctx.branch_tip(branch)?;
    let (rows, recovered) = reconcile::recover_and_record(ctx, orders, store, tip, &me.name)?;
    drop(turn);
    for (id, outcome) in recovered {
        progress.event("recover", &[("wo", id), ("outcome", outcome.into())]);
    }
    Ok(rows)
}

/// Promote, check the cap and record the attempt — before any build starts, so
/// a crash can never grant an extra attempt. Returns the WOs to build.
fn dispatch<'a>(
    ctx: &Context,
    store: &Store<'_>,
    orders: &Orders,
    picked: &[&'a WorkOrder],
    round_base: gix::ObjectId,
    me: &Conductor,
    progress: &dyn Progress,
) -> Result<Vec<(&'a WorkOrder, u32)>> {
    let cap = ctx.retry_cap()?;
    crate::crash::point("dispatch.before");
    let (go, capped, claimed) = store.transact("dispatch", |txn| -> Result<_> {
        let mut go = Vec::new();
        let mut capped = Vec::new();
        let mut claimed = Vec::new();
        for wo in picked {
            let mut record = txn.record(&wo.id, !wo.deps.is_empty())?;
            if record.halted || record.status == Status::Done {
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
                record.halt("retry_cap_exhausted", Vec::new());
                capped.push(wo.id.clone());
                txn.put(record);
                continue;
            }
            record.start_attempt();
            record.attempts += 1;
            record.status = Status::InProgress;
            record.owner = Some(me.name.clone());
            record.checkpoint_before = Some(round_base.to_string());
            record.checkpoint_after = None;
            record.log("dispatch", Some(format!("round_base={round_base}")));
            go.push((*wo, record.attempts));
            txn.put(record);
        }
        Ok((go, capped, claimed))
    })?;
    crate::crash::point("dispatch.after");
    for id in capped {
        progress.event(
            "halt",
            &[("wo", id), ("reason", "retry_cap_exhausted".into())],
        );
    }
    for (id, holder) in claimed {
        progress.event(
            "defer",
            &[
                ("wo", id),
                ("reason", batch::CLAIMED.into()),
                ("conflicts_with", holder),
            ],
        );
    }
    Ok(go)
}

#[allow(clippy::too_many_arguments)]
fn build_one(
    host: &Host,
    job: &mut Job<'_>,
    opts: &Options,
    round_base: gix::ObjectId,
    slot_dir: &Path,
    cap: u32,
    me: &Conductor,
    halted: &AtomicBool,
    misconfigured: &AtomicBool,
    running: &AtomicUsize,
    progress: &dyn Progress,
) {
    let id = job.wo.id.clone();
    progress.phase(&id, "slot");
    let waiting = Instant::now();
    let slot = host.take_slot(slot_dir, cap, &id, me, progress);
    job.queue_wait = Some(waiting.elapsed());
    let slot = match slot {
        Ok(Some(slot)) => slot,
        Ok(None) => {
            job.outcome = JobOutcome::Interrupted;
            return;
        }
        Err(why) => {
            job.outcome = JobOutcome::Retry(why);
            return;
        }
    };
    // Another order's command could not run: nothing more is started with
    // this configuration.
    if misconfigured.load(Ordering::SeqCst) {
        job.outcome = JobOutcome::NotStarted;
        return;
    }
    let in_use = running.fetch_add(1, Ordering::SeqCst) + 1;
    progress.slots(in_use, cap);
    progress.event(
        "build",
        &[
            ("wo", id.clone()),
            ("attempt", job.attempt.to_string()),
            ("slots", format!("{in_use}/{cap}")),
        ],
    );
    let env = host.env(job.wo, job.attempt, round_base, &job.worktree);
    // A `halt` of this order stops this build only.
    let stop = || me.should_stop() || halted.load(Ordering::Relaxed);
    let log = job.log.clone();
    let started = Instant::now();
    exec::note(
        &log,
        &attempt_header(&id, job.attempt, round_base, job.queue_wait),
    );
    let branch = branch_of(&job.wo.id);
    let built = host.run_attempt(
        &Attempt {
            label: &id,
            wo: job.wo,
            attempt: job.attempt,
            base: round_base,
            worktree: &job.worktree,
            branch: &branch,
            log: &log,
            trailers: "",
            env: &env,
        },
        &Steps {
            setup: opts.pool.setup.as_deref(),
            setup_inputs: &opts.pool.setup_inputs,
            build: &opts.build,
            gates: &opts.gates,
            critics: &opts.critics,
            timeout: opts.timeout,
        },
        me,
        &stop,
        misconfigured,
        &mut job.verdicts,
        progress,
    );
    job.outcome = match built {
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
    };
    exec::note(
        &log,
        &attempt_footer(job.attempt, &job.outcome.describe(), started.elapsed()),
    );
    drop(slot);
    if matches!(job.outcome, JobOutcome::Clean) {
        // Merges come after the whole batch is built: say so meanwhile.
        progress.phase(&job.wo.id, "waiting to merge");
    }
    progress.slots(running.fetch_sub(1, Ordering::SeqCst) - 1, cap);
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
        }
    }
}

/// The first line of an attempt's log: which order, attempt and base, when.
pub(crate) fn attempt_header(
    label: &str,
    attempt: u32,
    base: gix::ObjectId,
    queue_wait: Option<Duration>,
) -> String {
    let waited = queue_wait.map_or(String::new(), |w| {
        format!(
            " after waiting {} for a slot",
            crate::state::format_ms(w.as_millis() as u64)
        )
    });
    format!(
        "order {label} attempt {attempt} base {base} started {} UTC{waited}",
        crate::state::format_time(crate::state::now())
    )
}

/// The last line of an attempt's log: how it ended and its wall time.
pub(crate) fn attempt_footer(attempt: u32, outcome: &str, wall: Duration) -> String {
    format!(
        "end of attempt {attempt}: {outcome}, wall time {}",
        crate::state::format_ms(wall.as_millis() as u64)
    )
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

/// Turn a built job's verdicts into a transition, merging it back if clean.
/// Every transition is conditional on `owner` still holding the attempt: a
/// `halt` while it was in flight (or a takeover) wins, see [`let_go`].
#[allow(clippy::too_many_arguments)]
fn settle(
    ctx: &Context,
    host: &Host,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    job: &Job<'_>,
    round_base: gix::ObjectId,
    opts: &Options,
    union: &[crate::scope::Entry],
    owner: &str,
    merges: &mut merge::Session,
    progress: &dyn Progress,
) -> Result<()> {
    let id = &job.wo.id;
    let wo_branch = branch_of(id);
    let verdicts = job.verdicts.clone();
    let queue_wait_ms = job.queue_wait.map(|w| w.as_millis() as u64);
    let log = job.log.display().to_string();
    let mut keep_branch = false;
    match &job.outcome {
        JobOutcome::Clean => {
            progress.phase(id, "merge");
            crate::crash::point("verdict.before");
            let held = store.transact(&format!("verdicts {id}"), |txn| -> Result<bool> {
                let Some(mut record) = txn.stored(id)? else {
                    return Ok(false);
                };
                if !record.held_by(owner, job.attempt) {
                    return Ok(false);
                }
                record.verdicts = verdicts.clone();
                record.queue_wait_ms = queue_wait_ms;
                record.log("built", Some(log.clone()));
                txn.put(record);
                Ok(true)
            })?;
            crate::crash::point("verdict.after");
            if !held {
                return let_go(host, store, job, owner, progress);
            }
            let source = ctx
                .repo
                .find_reference(format!("refs/heads/{wo_branch}").as_str())
                .git_context(format!("reading {wo_branch}"))?
                .peel_to_id()
                .git_context(format!("resolving {wo_branch}"))?
                .detach();
            let request = merge::Request {
                wo: job.wo,
                into: branch,
                source,
                attempt: job.attempt,
                round_base: Some(round_base),
                scope: if opts.drift_batch_scope {
                    DriftScope::Union(union.to_vec())
                } else {
                    DriftScope::Own
                },
                extra_note: Some(serde_json::json!({ "verdicts": verdicts })),
                owner: Some(owner),
                retry: false,
            };
            let outcome = merges.merge_back(ctx, store, &request)?;
            match &outcome {
                Outcome::Merged { sha, changed, .. } => progress.event(
                    "merge",
                    &[
                        ("wo", id.clone()),
                        ("sha", sha.to_hex_with_len(12).to_string()),
                        ("changed", changed.len().to_string()),
                    ],
                ),
                Outcome::UpToDate { .. } => progress.event(
                    "merge",
                    &[("wo", id.clone()), ("up_to_date", "true".into())],
                ),
                Outcome::Conflict { paths }
                | Outcome::Drift { paths }
                | Outcome::CheckoutBlocked { paths } => {
                    keep_branch = true;
                    progress.event(
                        "halt",
                        &[
                            ("wo", id.clone()),
                            ("reason", outcome.name().into()),
                            ("paths", paths.join(",")),
                        ],
                    );
                }
                Outcome::Withdrawn { .. } => return let_go(host, store, job, owner, progress),
            }
        }
        outcome => {
            let (event, halt) = match outcome {
                JobOutcome::Retry(why) => (why.clone(), None),
                JobOutcome::Blocked(why) => (why.clone(), Some("blocking_critique")),
                JobOutcome::CommitFailed(why) => (why.clone(), None),
                JobOutcome::NotRunnable(failed) => (failed.describe(), None),
                JobOutcome::NotStarted => (NOT_STARTED.to_string(), None),
                _ => ("interrupted".to_string(), None),
            };
            // The builder's work exists only in its worktree: kept, and
            // recorded, because the next run removes it.
            let kept = kept_work(job).map(|k| k.describe(&ctx.repo));
            keep_branch = halt.is_some() || kept.is_some();
            let interrupted = matches!(
                outcome,
                JobOutcome::Interrupted
                    | JobOutcome::Pending
                    | JobOutcome::DiskFull(_)
                    | JobOutcome::CommitFailed(_)
                    | JobOutcome::NotRunnable(_)
                    | JobOutcome::NotStarted
            );
            crate::crash::point("verdict.before");
            let held = store.transact(&format!("verdict {id}"), |txn| -> Result<bool> {
                let Some(mut record) = txn.stored(id)? else {
                    return Ok(false);
                };
                if !record.held_by(owner, job.attempt) {
                    return Ok(false);
                }
                record.verdicts = verdicts.clone();
                record.queue_wait_ms = queue_wait_ms;
                record.owner = None;
                match halt {
                    Some(reason) => {
                        record.status = Status::NeedsRework;
                        record.halt(reason, vec![event.clone()]);
                    }
                    None if interrupted => {
                        // Stopped by the user, the disk, git's configuration or
                        // a command that cannot run, not failed by the builder:
                        // the attempt is given back.
                        record.status = Status::NeedsRework;
                        record.attempts = record.attempts.saturating_sub(1);
                        match (outcome, &kept) {
                            (JobOutcome::DiskFull(why), _) => {
                                record.log("disk_full", Some(why.clone()))
                            }
                            (JobOutcome::NotRunnable(_), _) => {
                                record.log(NOT_RUNNABLE, Some(event.clone()))
                            }
                            (JobOutcome::NotStarted, _) => {
                                record.log("not_started", Some(event.clone()))
                            }
                            (_, Some(kept)) => {
                                record.log(worktree::KEPT_UNCOMMITTED, Some(kept.clone()))
                            }
                            _ => record.log("interrupted", Some(log.clone())),
                        }
                    }
                    None => {
                        record.status = Status::NeedsRework;
                        record.log(FAILED_EVENT, Some(event.clone()));
                    }
                }
                txn.put(record);
                Ok(true)
            })?;
            crate::crash::point("verdict.after");
            if !held {
                return let_go(host, store, job, owner, progress);
            }
            let name = match (halt, &kept) {
                (Some(_), _) => "halt",
                (None, Some(_)) => "kept",
                (None, None) => "rework",
            };
            let mut fields = vec![
                ("wo", id.clone()),
                ("reason", halt.map(str::to_owned).unwrap_or(event)),
            ];
            if kept.is_some() {
                fields.push(("worktree", job.worktree.display().to_string()));
                fields.push(("branch", wo_branch.clone()));
            }
            fields.push(("log", log.clone()));
            progress.event(name, &fields);
        }
    }
    // A halted attempt's worktree and branch stay for inspection until `clear`.
    crate::pool::give_back(ctx, id, &wo_branch, keep_branch)?;
    Ok(())
}

/// The attempt is no longer ours to settle. Halted while in flight (`git
/// arbiter halt`): whatever the builder left is committed on its branch, the
/// worktree and branch are kept for inspection, and the record is let go (not
/// in progress, no owner; still halted). Taken over by someone else: nothing
/// of it is touched, the worktree may be theirs now.
fn let_go(
    host: &Host,
    store: &Store<'_>,
    job: &Job<'_>,
    owner: &str,
    progress: &dyn Progress,
) -> Result<()> {
    let id = &job.wo.id;
    let ours = |r: &Record| r.owner.as_deref() == Some(owner) && r.attempts == job.attempt;
    let halted = store
        .snapshot()?
        .record(id)?
        .is_some_and(|r| ours(&r) && r.halted);
    if halted && job.worktree.is_dir() {
        if let Err(e) = host.commit_leftovers(&job.worktree, job.wo, job.attempt, "") {
            progress.event(
                "warning",
                &[
                    ("wo", id.clone()),
                    ("detail", format!("committing what the builder left: {e}")),
                ],
            );
        }
    }
    let log = job.log.display().to_string();
    let released = store.transact(&format!("let go {id}"), |txn| -> Result<Option<String>> {
        let Some(mut record) = txn.stored(id)? else {
            return Ok(None);
        };
        if !ours(&record) || record.status != Status::InProgress {
            return Ok(None);
        }
        let reason = record.halt_reason.clone().unwrap_or_default();
        record.owner = None;
        record.status = Status::NeedsRework;
        record.log("halted_in_flight", Some(log.clone()));
        txn.put(record);
        Ok(Some(reason))
    })?;
    match released {
        Some(reason) => progress.event(
            "halt",
            &[
                ("wo", id.clone()),
                ("reason", reason),
                ("kept", branch_of(id)),
            ],
        ),
        None => progress.event(
            "warning",
            &[
                ("wo", id.clone()),
                (
                    "detail",
                    "taken over by another conductor; left alone".into(),
                ),
            ],
        ),
    }
    Ok(())
}

/// Requeue `jobs` whose settling could not happen, giving their attempts back.
fn abandon(
    ctx: &Context,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    jobs: &[(&WorkOrder, u32)],
    owner: &str,
    why: &str,
) -> Result<()> {
    let tip = ctx.branch_tip(branch)?;
    let requeued = store.transact(
        "abandon unsettled work orders",
        |txn| -> Result<Vec<String>> {
            let mut requeued = Vec::new();
            for &(wo, attempt) in jobs {
                let mut record = txn.record(&wo.id, !wo.deps.is_empty())?;
                // Only what is still ours and unmerged: a merge that landed before
                // settling failed is left to the recovery rule at the next start,
                // so it can never be merged twice.
                if !record.held_by(owner, attempt) {
                    continue;
                }
                if !matches!(
                    reconcile::recover(ctx, &record, Some(tip)),
                    Recovery::NeedsRework
                ) {
                    continue;
                }
                record.status = Status::NeedsRework;
                record.attempts = record.attempts.saturating_sub(1);
                record.owner = None;
                record.log("abandoned", Some(why.to_owned()));
                txn.put(record);
                requeued.push(wo.id.clone());
            }
            Ok(requeued)
        },
    )?;
    for id in requeued {
        crate::pool::give_back(ctx, &id, &branch_of(&id), false)?;
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

/// Fill the summary's done / halted / pending lists from the final state.
fn finish(
    ctx: &Context,
    orders: &Orders,
    store: &Store<'_>,
    branch: &gix::refs::FullName,
    ran: &BTreeSet<String>,
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
            let branch = branch_of(&row.id);
            let kept = ctx
                .repo
                .try_find_reference(format!("refs/heads/{branch}").as_str())
                .ok()
                .flatten()
                .is_some();
            let log = (record.attempts > 0).then(|| log_path(ctx, &row.id, record.attempts));
            summary.halted.push(Escalated {
                wo_id: row.id.clone(),
                reason: record.halt_reason.clone().unwrap_or_default(),
                paths: record.halt_paths.clone(),
                branch: kept.then_some(branch),
                log: log.filter(|p| p.exists()).map(|p| p.display().to_string()),
            });
        } else if row.status == Status::Done {
            summary.done.push(row.id.clone());
        } else {
            summary.pending.push(row.id.clone());
        }
    }
    for record in table.records.iter().filter(|r| ran.contains(&r.wo)) {
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
        summary.orders.push(OrderRow {
            wo_id: record.wo.clone(),
            outcome: match &record.halt_reason {
                Some(reason) if record.halted => format!("halted: {reason}"),
                _ => record.status.to_string(),
            },
            attempts: record.attempts,
            build_ms: wall("build"),
            gate_ms: wall("gate"),
            critic_ms: wall("critic"),
            queue_wait_ms: record.queue_wait_ms,
            changed,
        });
    }
    summary.orders.sort_by(|a, b| a.wo_id.cmp(&b.wo_id));
    Ok(())
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
    let log = ctx
        .repo
        .common_dir()
        .join("arbiter")
        .join("logs")
        .join(format!("final-gate-{}.log", me.name));
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
        },
        &stop,
    );
    worktree::remove(ctx, &name, &wt_branch)?;
    let exit = exit.map_err(Error::io(format!("running --final-gate '{cmd}'")))?;
    progress.event(
        "final-gate",
        &[
            ("result", exit.describe()),
            ("log", log.display().to_string()),
        ],
    );
    let mut v = verdict("final_gate", cmd, &exit, started.elapsed());
    v.detail = Some(log.display().to_string());
    Ok(v)
}

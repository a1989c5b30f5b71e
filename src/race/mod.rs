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

use crate::builder::{
    kept_work_error, not_runnable_error, Attempt, BuildOutcome, HaltWatch, Host, KeptWork,
    NotRunnable, Step, Steps, NOT_RUNNABLE,
};
use crate::conductor::Conductor;
use crate::context::Context;
use crate::drift::DriftScope;
use crate::error::{GitContext, InputError, Result};
use crate::exec::{self, Exit};
use crate::merge;
use crate::orders::{Orders, WorkOrder};
use crate::progress::{Event, Progress};
use crate::queue::{self, Entry, Fate, Queue, Verify};
use crate::select::{self, Candidate, InstanceVerdict};
use crate::state::{self, Status, Store, Verdict};
use crate::{slots, worktree};

mod pick;
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
    pub pool: crate::pool::Options,
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
}

/// One merge-back tried for an instance.
#[derive(Debug, Clone, Serialize)]
pub struct MergeTry {
    pub instance: u32,
    /// `merged`, `up_to_date`, `merge_conflict` or `undeclared_file_drift`.
    pub outcome: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub version: u32,
    /// Success: merged; Escalation: no winner, or no instance could merge; Interrupted.
    pub exit: crate::ExitCode,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::round::Stopped>,
    /// Gate runs spent verifying merged results.
    pub gate_runs: usize,
}

pub fn branch_of(id: &str, k: u32) -> String {
    format!("arbiter-race/{id}/{k}")
}

pub fn worktree_name(id: &str, k: u32) -> String {
    format!("race-{id}-{k}")
}

fn log_path(ctx: &Context, id: &str, run_id: &str, k: u32) -> PathBuf {
    crate::layout::logs(&ctx.repo, id).join(format!("{run_id}-{k}.log"))
}

/// What an instance's thread needs (a `gix::Repository` is not `Sync`).
struct Job {
    k: u32,
    worktree: PathBuf,
    branch: String,
    log: PathBuf,
    score_out: PathBuf,
    verdicts: Vec<Verdict>,
    cand: Candidate,
    interrupted: bool,
    /// Committing what the builder left failed for git's configuration
    /// ([`crate::builder::CommitError`]): the work stays in the worktree.
    commit_failed: Option<String>,
    /// One of its commands could not run: the race stops with exit 2.
    not_runnable: Option<NotRunnable>,
}

/// Run one race of work order `id`.
pub fn run(
    ctx: &Context,
    orders: &Orders,
    id: &str,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Summary> {
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
    let branch = ctx.integration_branch(opts.into.as_deref())?;
    let store = Store::new(&ctx.repo, ctx.retry_cap()?);
    let me = Conductor::register(ctx)?;
    for line in crate::conductor::end_orphans(ctx)? {
        progress.event(&Event::Recovered { detail: line });
    }
    let slot_dir = slots::slot_dir(Some(ctx))?;
    let cap = slots::cap(Some(ctx), Some(opts.max_total))?;
    let host = Host::new(ctx)?;
    crate::checkout::sync_checked_out(ctx, &branch)?;
    crate::checkout::refuse_dirty_checkout(ctx, &branch)?;
    // What a killed round or race left: its worktrees and branches, and
    // merges that landed without their record (never merged twice).
    let live = |r: &state::Record| crate::conductor::owns_live(ctx, r);
    let tip = ctx.branch_tip(&branch).ok();
    for line in worktree::cleanup_stale(ctx, &store, orders, tip, &live, true)? {
        progress.event(&Event::Recovered { detail: line });
    }
    crate::round::recover(ctx, orders, &store, &branch, &me, progress)?;
    let base = ctx.branch_tip(&branch)?;
    let run_id = format!("race-{}", me.name);
    let attempt = dispatch(ctx, &store, orders, wo, base, &me, &run_id, opts.n)?;
    progress.event(&Event::Race {
        wo: id.to_owned(),
        n: opts.n,
        base,
        attempt,
    });
    let mut summary = Summary {
        version: 1,
        wo_id: id.to_owned(),
        run_id: run_id.clone(),
        base: base.to_string(),
        min_score: opts.min_score,
        ..Summary::default()
    };
    let mut jobs = Vec::new();
    for k in 0..opts.n {
        let (name, br) = (worktree_name(id, k), branch_of(id, k));
        let made = crate::pool::take(ctx, &opts.pool, &name, &br, base);
        let path = match made {
            Ok(p) => p,
            Err(e) => {
                for job in &jobs {
                    let job: &Job = job;
                    let _ =
                        crate::pool::give_back(ctx, &worktree_name(id, job.k), &job.branch, false);
                }
                give_back(
                    &store,
                    wo,
                    &me.name,
                    attempt,
                    &run_id,
                    "race_interrupted",
                    &format!("creating worktrees: {e}"),
                )?;
                return Err(e);
            }
        };
        let log = log_path(ctx, id, &run_id, k);
        jobs.push(Job {
            k,
            score_out: log.with_extension("score"),
            worktree: path,
            branch: br,
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
        });
    }
    let watch = HaltWatch::default();
    let halted = watch.watch(id);
    let misconfigured = AtomicBool::new(false);
    let built = AtomicBool::new(false);
    let shared_repo = ctx.repo.clone().into_sync();
    std::thread::scope(|scope| {
        let (watch, built, shared_repo, me) = (&watch, &built, &shared_repo, &me);
        scope.spawn(move || watch.run(shared_repo, &me.name, built));
        let builds: Vec<_> = jobs
            .iter_mut()
            .map(|job| {
                let (host, slot_dir, misconfigured) = (&host, &slot_dir, &misconfigured);
                let halted = &*halted;
                scope.spawn(move || {
                    build_one(
                        host,
                        wo,
                        job,
                        opts,
                        attempt,
                        base,
                        slot_dir,
                        cap,
                        me,
                        halted,
                        misconfigured,
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
    for job in &jobs {
        progress.event(&Event::Instance {
            wo: id.to_owned(),
            instance: job.k,
            verdict: job.cand.verdict,
            score: job.cand.score,
        });
    }
    let cands: Vec<Candidate> = jobs.iter().map(|j| j.cand.clone()).collect();
    let mut keep = vec![false; jobs.len()];

    if halted.load(Ordering::Relaxed) {
        summary.escalation =
            Some("the work order was halted during the race; nothing was merged".into());
        summary.exit = crate::ExitCode::Escalation;
        let keep_all = vec![true; jobs.len()];
        finish(ctx, id, &jobs, &keep_all, opts.keep_losers, &mut summary)?;
        release(&store, wo, &me.name, attempt, &run_id)?;
        return Ok(summary);
    }

    // The machine's fault, not the builders': the attempt is given back.
    if let Some(why) = jobs
        .iter()
        .filter_map(|j| j.cand.reason.as_deref())
        .find(|why| crate::error::says_disk_full(why))
    {
        me.release_reserve();
        give_back(&store, wo, &me.name, attempt, &run_id, "disk_full", why)?;
        finish(ctx, id, &jobs, &keep, opts.keep_losers, &mut summary)?;
        return Err(crate::Error::Io {
            context: why.to_owned(),
            source: std::io::Error::from_raw_os_error(rustix::io::Errno::NOSPC.raw_os_error()),
        });
    }

    // Before the stop: an interrupted race removes its worktrees, and these
    // hold work that exists nowhere else.
    let kept: Vec<KeptWork> = jobs
        .iter()
        .filter_map(|j| {
            Some(KeptWork {
                label: format!("{id}#{}", j.k),
                error: j.commit_failed.clone()?,
                worktree: j.worktree.clone(),
                branch: j.branch.clone(),
            })
        })
        .collect();
    if !kept.is_empty() {
        let detail: Vec<String> = kept.iter().map(|k| k.describe(&ctx.repo)).collect();
        give_back(
            &store,
            wo,
            &me.name,
            attempt,
            &run_id,
            worktree::KEPT_UNCOMMITTED,
            &detail.join("; "),
        )?;
        let keep: Vec<bool> = jobs.iter().map(|j| j.commit_failed.is_some()).collect();
        finish(ctx, id, &jobs, &keep, opts.keep_losers, &mut summary)?;
        return Err(kept_work_error(&kept).into());
    }

    if let Some(failed) = jobs.iter().find_map(|j| j.not_runnable.as_ref()) {
        give_back(
            &store,
            wo,
            &me.name,
            attempt,
            &run_id,
            NOT_RUNNABLE,
            &failed.describe(),
        )?;
        finish(ctx, id, &jobs, &keep, opts.keep_losers, &mut summary)?;
        return Err(not_runnable_error(failed, &host.repo_top).into());
    }

    if me.should_stop() || jobs.iter().any(|j| j.interrupted) {
        give_back(
            &store,
            wo,
            &me.name,
            attempt,
            &run_id,
            "race_interrupted",
            "interrupted",
        )?;
        summary.stopped = Some(crate::round::Stopped::Requested);
        summary.exit = crate::ExitCode::Interrupted;
        finish(ctx, id, &jobs, &keep, opts.keep_losers, &mut summary)?;
        return Ok(summary);
    }

    let order = select::order(&cands, opts.min_score);
    if order.is_empty() {
        let detail = describe_all(&cands);
        store.transact(&format!("race {id}: no winner"), |txn| -> Result<()> {
            let mut r = txn.record(id, !wo.deps.is_empty())?;
            if !r.held_by(&me.name, attempt) {
                // Halted by hand meanwhile: that halt stands.
                return Ok(());
            }
            r.owner = None;
            r.status = Status::NeedsRework;
            r.log("race_no_winner", Some(format!("{run_id}: {detail}")));
            r.halt("race_no_winner", Vec::new());
            txn.put(r);
            Ok(())
        })?;
        summary.escalation = Some(match opts.min_score {
            Some(floor) => format!("no instance passed with a valid score of at least {floor}"),
            None => "no instance passed with a valid score".into(),
        });
        summary.exit = crate::ExitCode::Escalation;
        finish(ctx, id, &jobs, &keep, opts.keep_losers, &mut summary)?;
        return Ok(summary);
    }

    // Land the best; on conflict, drift or failing merged gates fall back
    // to the next-best passing one.
    let checks = queue::Checks {
        verify: opts.verify,
        gates: &opts.gates,
        timeout: opts.timeout,
    };
    let mut queue = Queue::new(ctx, &store, &branch, checks, &me)?.keeping_culprits();
    let mut merged: Option<(usize, gix::ObjectId)> = None;
    // The last request tried, while the record still holds the attempt.
    let mut unlanded: Option<merge::Request> = None;
    for (n, &idx) in order.iter().enumerate() {
        let job = &jobs[idx];
        let prev = summary.merges.last().cloned();
        let prev_halted = prev
            .as_ref()
            .is_some_and(|p| p.outcome == merge::HALT_CONFLICT || p.outcome == merge::HALT_DRIFT);
        if n > 0 && prev_halted {
            // The merge halted the work order for the previous instance; a
            // later instance may still land, so lift that halt for this try.
            let ours = store.transact(&format!("race {id}: fall back"), |txn| -> Result<bool> {
                let mut r = txn.record(id, !wo.deps.is_empty())?;
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
                r.lift_halt();
                r.status = Status::InProgress;
                r.owner = Some(me.name.clone());
                r.log(
                    "race_fallback",
                    Some(format!(
                        "instance {} after instance {} {}",
                        job.k,
                        prev.as_ref().map_or(0, |p| p.instance),
                        prev.as_ref().map_or("", |p| p.outcome.as_str())
                    )),
                );
                txn.put(r);
                Ok(true)
            })?;
            if !ours {
                break;
            }
        }
        progress.phase(id, "merge");
        let source = ctx
            .repo
            .find_reference(format!("refs/heads/{}", job.branch).as_str())
            .git_context(format!("reading {}", job.branch))?
            .peel_to_id()
            .git_context(format!("resolving {}", job.branch))?
            .detach();
        let request = merge::Request {
            wo,
            into: &branch,
            source,
            attempt,
            round_base: Some(base),
            scope: DriftScope::Own,
            extra_note: Some(serde_json::json!({
                "race": run_id,
                "instance": job.k,
                "score": job.cand.score,
                "verdicts": job.verdicts,
            })),
            owner: Some(&me.name),
            retry: false,
        };
        let fate = queue
            .land(
                vec![Entry {
                    req: request.clone(),
                    entered: Instant::now(),
                }],
                progress,
            )?
            .pop()
            .map(|(_, fate)| fate);
        let (outcome, paths, sha) = match fate {
            Some(Fate::Landed { sha, .. }) => ("merged".to_owned(), Vec::new(), Some(sha)),
            Some(Fate::UpToDate) => (
                "up_to_date".to_owned(),
                Vec::new(),
                Some(ctx.branch_tip(&branch)?),
            ),
            Some(Fate::Halted { reason, paths }) => (reason, paths, None),
            Some(Fate::GateFailed { .. }) => {
                unlanded = Some(request);
                (queue::MERGED_GATE_FAILED.to_owned(), Vec::new(), None)
            }
            Some(Fate::Interrupted) | None => {
                // Stopped while verifying: nothing landed, the attempt is given back.
                give_back(
                    &store,
                    wo,
                    &me.name,
                    attempt,
                    &run_id,
                    "race_interrupted",
                    "interrupted while verifying the merged result",
                )?;
                summary.stopped = Some(crate::round::Stopped::Requested);
                summary.exit = crate::ExitCode::Interrupted;
                finish(ctx, id, &jobs, &keep, opts.keep_losers, &mut summary)?;
                return Ok(summary);
            }
            Some(Fate::Withdrawn { reason }) => {
                // Halted (or taken over) during the race: nothing lands, every
                // instance is kept for inspection.
                summary.escalation =
                    Some(format!("the work order was {reason}; nothing was merged"));
                summary.exit = crate::ExitCode::Escalation;
                let keep_all = vec![true; jobs.len()];
                finish(ctx, id, &jobs, &keep_all, opts.keep_losers, &mut summary)?;
                release(&store, wo, &me.name, attempt, &run_id)?;
                return Ok(summary);
            }
        };
        progress.event(&Event::RaceMerge {
            wo: id.to_owned(),
            instance: job.k,
            outcome: outcome.clone(),
            paths: paths.clone(),
        });
        summary.merges.push(MergeTry {
            instance: job.k,
            outcome,
            paths,
        });
        if let Some(sha) = sha {
            merged = Some((idx, sha));
            break;
        }
        // Kept for inspection unless a later instance lands.
        keep[idx] = true;
    }
    summary.gate_runs = queue.gate_runs;
    if merged.is_none() {
        // The last try failed the gates as merged: the attempt is spent.
        if let Some(request) = unlanded.filter(|_| {
            summary
                .merges
                .last()
                .is_some_and(|m| m.outcome == queue::MERGED_GATE_FAILED)
        }) {
            queue.reject(
                &request,
                "no passing instance passed the gates once merged".into(),
                progress,
            )?;
        }
    }

    let Some((widx, sha)) = merged else {
        summary.escalation = Some(
            "no passing instance could be merged back (conflict, undeclared drift, untracked files in the checkout, or gates failing on the merged result); the work order is halted or back for rework"
                .into(),
        );
        summary.exit = crate::ExitCode::Escalation;
        finish(ctx, id, &jobs, &keep, opts.keep_losers, &mut summary)?;
        return Ok(summary);
    };
    keep.iter_mut().for_each(|k| *k = false);
    let winner = &jobs[widx];
    let record = PickRecord {
        version: 1,
        wo_id: id.to_owned(),
        winner_instance: winner.k,
        worktree_path: winner.worktree.display().to_string(),
        verdict: winner.cand.verdict,
        score: winner.cand.score.unwrap_or_default(),
        finished_at: winner.cand.finished_at,
        merge_policy: MERGE_POLICY.into(),
        timestamp: state::now(),
        run_id: run_id.clone(),
        commit: sha.to_string(),
        loser_instances: jobs
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
    crate::crash::point("pick.before");
    store_pick(ctx, sha, &record)?;
    crate::crash::point("pick.after");
    store.transact(&format!("race {id}: pick"), |txn| -> Result<()> {
        let mut r = txn.record(id, !wo.deps.is_empty())?;
        r.log(
            "pick",
            Some(format!(
                "{run_id} instance={} score={} commit={sha}",
                record.winner_instance, record.score
            )),
        );
        txn.put(r);
        Ok(())
    })?;
    progress.event(&Event::Pick {
        wo: id.to_owned(),
        instance: winner.k,
        score: record.score,
        sha,
    });
    summary.winner = Some(winner.k);
    summary.merge_commit = Some(sha.to_string());
    summary.pick = Some(record);
    summary.exit = crate::ExitCode::Success;
    // The winner is merged: its worktree goes like a round's.
    let mut keep_all = vec![opts.keep_losers; jobs.len()];
    keep_all[widx] = false;
    finish(ctx, id, &jobs, &keep_all, false, &mut summary)?;
    Ok(summary)
}

/// The attempt, recorded before anything is built (as the round's dispatch).
#[allow(clippy::too_many_arguments)]
fn dispatch(
    ctx: &Context,
    store: &Store<'_>,
    orders: &crate::orders::Orders,
    wo: &WorkOrder,
    base: gix::ObjectId,
    me: &Conductor,
    run_id: &str,
    n: u32,
) -> Result<u32> {
    let cap = ctx.retry_cap()?;
    crate::crash::point("dispatch.before");
    let attempt = store.transact(&format!("race {}: dispatch", wo.id), |txn| -> Result<u32> {
        let mut r = txn.record(&wo.id, !wo.deps.is_empty())?;
        if r.halted {
            return Err(InputError::new(format!(
                "work order '{}' is halted ({})",
                wo.id,
                r.halt_reason.as_deref().unwrap_or("no reason recorded")
            ))
            .hint(format!("'git arbiter clear {}' lifts the halt", wo.id))
            .into());
        }
        if r.status == Status::Done {
            return Err(
                InputError::new(format!("work order '{}' is already done", wo.id))
                    .hint(r.done_hint())
                    .into(),
            );
        }
        if r.status == Status::InProgress
            && r.owner
                .as_deref()
                .is_some_and(|o| crate::conductor::is_live(ctx, o))
        {
            return Err(InputError::new(format!(
                "work order '{}' is being built by another conductor",
                wo.id
            ))
            .hint("wait for it, or 'git arbiter stop' it")
            .into());
        }
        if let Some(holder) = crate::batch::claim_holder(ctx, txn, orders, wo, &me.name)? {
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
        r.cap = cap;
        if r.attempts >= r.cap {
            return Err(InputError::new(format!(
                "work order '{}' has used all {} attempts",
                wo.id, r.cap
            ))
            .hint("raise 'git config arbiter.retryCap', or 'git arbiter clear' it")
            .into());
        }
        r.start_attempt();
        r.attempts += 1;
        r.status = Status::InProgress;
        r.owner = Some(me.name.clone());
        r.checkpoint_before = Some(base.to_string());
        r.checkpoint_after = None;
        r.log(
            "race_dispatch",
            Some(format!("{run_id} n={n} round_base={base}")),
        );
        let attempts = r.attempts;
        txn.put(r);
        Ok(attempts)
    })?;
    crate::crash::point("dispatch.after");
    Ok(attempt)
}

/// Stopped or failed before any verdict: the attempt is given back, and
/// `event` logged with `why`.
fn give_back(
    store: &Store<'_>,
    wo: &WorkOrder,
    owner: &str,
    attempt: u32,
    run_id: &str,
    event: &str,
    why: &str,
) -> Result<()> {
    store.transact(&format!("race {}: give back", wo.id), |txn| -> Result<()> {
        let mut r = txn.record(&wo.id, !wo.deps.is_empty())?;
        if !r.held_by(owner, attempt) {
            return Ok(());
        }
        r.owner = None;
        r.status = Status::NeedsRework;
        r.attempts = r.attempts.saturating_sub(1);
        r.log(event, Some(format!("{run_id}: {why}")));
        txn.put(r);
        Ok(())
    })
}

/// Halted by hand (or taken over) during the race: let the record go, still
/// halted, if it is ours; the instances stay for inspection.
fn release(
    store: &Store<'_>,
    wo: &WorkOrder,
    owner: &str,
    attempt: u32,
    run_id: &str,
) -> Result<()> {
    store.transact(&format!("race {}: let go", wo.id), |txn| -> Result<()> {
        let mut r = txn.record(&wo.id, !wo.deps.is_empty())?;
        if r.owner.as_deref() != Some(owner)
            || r.attempts != attempt
            || r.status != Status::InProgress
        {
            return Ok(());
        }
        r.owner = None;
        r.status = Status::NeedsRework;
        r.log("halted_in_flight", Some(run_id.to_owned()));
        txn.put(r);
        Ok(())
    })
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

/// Fill the instance reports; remove worktrees and branches not kept.
fn finish(
    ctx: &Context,
    id: &str,
    jobs: &[Job],
    keep: &[bool],
    keep_losers: bool,
    summary: &mut Summary,
) -> Result<()> {
    for (job, &kept) in jobs.iter().zip(keep) {
        let kept = kept || keep_losers;
        crate::pool::give_back(ctx, &worktree_name(id, job.k), &job.branch, kept)?;
        summary.instances.push(Instance {
            instance: job.k,
            verdict: job.cand.verdict,
            score: job.cand.score,
            reason: job.cand.reason.clone(),
            finished_at: job.cand.finished_at,
            worktree: job.worktree.display().to_string(),
            branch: job.branch.clone(),
            log: job.log.display().to_string(),
            kept,
        });
    }
    Ok(())
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

#[allow(clippy::too_many_arguments)]
fn build_one(
    host: &Host,
    wo: &WorkOrder,
    job: &mut Job,
    opts: &Options,
    attempt: u32,
    base: gix::ObjectId,
    slot_dir: &Path,
    cap: u32,
    me: &Conductor,
    halted: &AtomicBool,
    misconfigured: &AtomicBool,
    progress: &dyn Progress,
) {
    let label = format!("{}#{}", wo.id, job.k);
    progress.phase(&label, "slot");
    let waiting = Instant::now();
    let slot = host.take_slot(slot_dir, cap, &label, me, progress);
    let queue_wait = waiting.elapsed();
    let slot = match slot {
        Ok(Some(slot)) => slot,
        Ok(None) => {
            job.interrupted = true;
            job.cand.verdict = InstanceVerdict::Interrupted;
            return;
        }
        Err(why) => {
            job.cand.verdict = InstanceVerdict::Error;
            job.cand.reason = Some(why);
            return;
        }
    };
    // Another instance's command could not run: nothing more is started
    // with this configuration.
    if misconfigured.load(Ordering::SeqCst) {
        job.cand.verdict = InstanceVerdict::NotStarted;
        return;
    }
    let mut env = host.env(wo, attempt, base, &job.worktree);
    env.push(("ARBITER_INSTANCE".into(), job.k.to_string()));
    let stop = || me.should_stop() || halted.load(Ordering::Relaxed);
    let started = Instant::now();
    exec::note(
        &job.log,
        &crate::round::attempt_header(&label, attempt, base, Some(queue_wait)),
    );
    // The score command writes its number to a file of its own.
    let run_score = || {
        exec::run(
            &exec::Spec {
                command: &opts.score,
                cwd: &job.worktree,
                env: &env,
                log: &job.log,
                kind: Some("score"),
                stdout_to: Some(&job.score_out),
                timeout: opts.timeout,
                groups: Some(&me.groups_dir()),
            },
            &stop,
        )
    };
    let trailers = format!("Arbiter-Instance: {}\n", job.k);
    let built = host.run_attempt(
        &Attempt {
            label: &label,
            wo,
            attempt,
            base,
            worktree: &job.worktree,
            branch: &job.branch,
            log: &job.log,
            trailers: &trailers,
            env: &env,
        },
        &Steps {
            setup: opts.pool.setup.as_deref(),
            setup_inputs: &opts.pool.setup_inputs,
            build: &opts.build,
            gates: &opts.gates,
            critics: &[],
            timeout: opts.timeout,
        },
        me,
        &stop,
        misconfigured,
        &mut job.verdicts,
        progress,
    );
    let mut not_runnable = None;
    let (mut verdict_s, mut reason): (InstanceVerdict, Option<String>) = match built {
        BuildOutcome::Passed => (InstanceVerdict::Passed, None),
        BuildOutcome::Failed {
            step: Step::Build,
            why,
        } => (InstanceVerdict::BuildFailed, Some(why)),
        BuildOutcome::Failed { why, .. } => (InstanceVerdict::GateFailed, Some(why)),
        BuildOutcome::Interrupted => {
            job.interrupted = true;
            (InstanceVerdict::Interrupted, None)
        }
        BuildOutcome::NotRunnable(failed) => {
            let why = failed.describe();
            not_runnable = Some(failed);
            (InstanceVerdict::NotRunnable, Some(why))
        }
        // Given back by the race when it sees the disk full (`says_disk_full`).
        BuildOutcome::DiskFull(why) => (InstanceVerdict::Error, Some(why)),
        // Not the builder's fault: see `Job::commit_failed`.
        BuildOutcome::CommitFailed(why) => {
            job.commit_failed = Some(why.clone());
            (InstanceVerdict::CommitFailed, Some(why))
        }
    };
    job.cand.finished_at = crate::state::now_nanos();
    if verdict_s == InstanceVerdict::Passed {
        progress.phase(&label, "score");
        match run_score() {
            Ok(Exit::Interrupted) => {
                job.interrupted = true;
                verdict_s = InstanceVerdict::Interrupted;
            }
            Ok(exit) if exit.not_runnable() => {
                verdict_s = InstanceVerdict::NotRunnable;
                let failed =
                    NotRunnable::of(&exit, &label, "score", &opts.score, &job.worktree, &job.log);
                misconfigured.store(true, Ordering::SeqCst);
                reason = failed.as_ref().map(NotRunnable::describe);
                not_runnable = failed;
            }
            Ok(exit) if !exit.success() => {
                verdict_s = InstanceVerdict::InvalidScore;
                reason = Some(format!("score command {}", exit.describe()));
            }
            Ok(_) => {
                let out = std::fs::read(&job.score_out)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                match parse_score(&out) {
                    Ok(s) => {
                        job.cand.score = Some(s);
                        job.cand.passed = true;
                    }
                    Err(e) => {
                        verdict_s = InstanceVerdict::InvalidScore;
                        reason = Some(e);
                    }
                }
            }
            Err(e) => {
                verdict_s = InstanceVerdict::InvalidScore;
                reason = Some(format!("cannot run the score command: {e}"));
            }
        }
    }
    let ended = match &reason {
        Some(why) => format!("{verdict_s}: {why}"),
        None => verdict_s.to_string(),
    };
    exec::note(
        &job.log,
        &crate::round::attempt_footer(attempt, &ended, started.elapsed()),
    );
    job.cand.verdict = verdict_s;
    job.cand.reason = reason;
    job.not_runnable = not_runnable;
    drop(slot);
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

//! Landing kept work on its own: `git arbiter merge-back` (a branch made by
//! hand, or left by an interrupted run) and `git arbiter retry` (the kept
//! branch of an order its merge halted, or passed work waiting to land).
//!
//! Each runs as a conductor of its own and lands through the same merge
//! queue as a round: drift-checked, gated on the merged result when gates
//! are configured (`--verify merged`, bisection rules unchanged), moved by
//! compare-and-swap. Nothing lands that the gates did not pass as merged,
//! whichever command landed it. A process killed on the way leaves the
//! order `verified` (recovery), and the next round lands it.

use gix::ObjectId;

use crate::run::conductor::{self, Conductor};
use crate::run::drift::DriftScope;
use crate::run::merge::{self, Request};
use crate::run::progress::Progress;
use crate::run::queue::{Checks, Entry, Fate, Queue, MERGED_GATE_FAILED};
use crate::run::worktree::{self, branch_of};
use crate::state::context::Context;
use crate::state::orders::{Orders, WorkOrder};
use crate::state::{Record, Status, Store, Verdict};
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
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
    #[error("reading {commit}: {source}")]
    ReadMerge {
        commit: ObjectId,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Which command lands the kept work: what it may take up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `merge-back`: any order not halted (a `checkout_blocked` halt of an
    /// earlier version excepted) and not being built.
    MergeBack,
    /// `retry`: an order halted by its merge ([`merge::RETRYABLE`]) or
    /// waiting to land.
    Retry,
}

impl Command {
    fn event(self) -> &'static str {
        match self {
            Command::MergeBack => "merge_back",
            Command::Retry => "retry",
        }
    }

    /// What restoring a missing work-order file allows, for its hint.
    fn restore(self) -> &'static str {
        match self {
            Command::MergeBack => "merge its branch back",
            Command::Retry => "retry it",
        }
    }
}

/// What a command asks to land: its orders (ids as resolved), onto which
/// branch, and against which declared files the drift is checked.
pub struct Ask<'a> {
    pub command: Command,
    pub ids: &'a [String],
    /// The integration branch; `None`: the current branch.
    pub into: Option<&'a str>,
    pub scope: Scope,
}

/// The declared files a landing's drift is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The order's own.
    Own,
    /// The union of the declared files of the batch `git arbiter batch`
    /// would select now.
    Batch,
}

/// Where kept work landed, and how each order's landing went.
pub struct Landing {
    pub into: gix::refs::FullName,
    pub landed: Vec<Landed>,
}

/// One order's kept work to land: the commit and the drift scope.
struct Item<'a> {
    wo: &'a WorkOrder,
    source: ObjectId,
    scope: DriftScope,
}

/// How one order's landing went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Landed {
    pub id: String,
    pub fate: Fate,
    /// For a landed order: the tip its merge went onto and the paths it changed.
    pub pre_merge_head: Option<ObjectId>,
    pub changed: Vec<String>,
}

/// Land the kept work `ask` names, the flow `merge-back` and `retry`
/// share. Every order is checked (its file, its kept work) before any is
/// merged: a typo merges nothing. Then [`land`].
pub fn land_kept(
    ctx: &Context,
    orders: &Orders,
    store: &Store<'_>,
    ask: &Ask<'_>,
    checks: Checks<'_>,
    progress: &dyn Progress,
) -> Result<Landing> {
    let into = ctx.landing_branch(ask.into)?;
    let mut kept = Vec::with_capacity(ask.ids.len());
    for id in ask.ids {
        let wo = order_to_land(orders, id, ask.command.restore())?;
        kept.push((wo, kept_work(ctx, store, id, ask.command)?));
    }
    let scope = match ask.scope {
        Scope::Own => DriftScope::Own,
        Scope::Batch => {
            let max = ctx.max_batch(None)?;
            let tip = ctx.branch_tip(&into).ok();
            DriftScope::Union(crate::run::drift::batch_union(
                ctx, orders, store, tip, max,
            )?)
        }
    };
    let items: Vec<Item<'_>> = kept
        .into_iter()
        .map(|(wo, source)| Item {
            wo,
            source,
            scope: scope.clone(),
        })
        .collect();
    let landed = land(ctx, store, &into, &items, ask.command, checks, progress)?;
    Ok(Landing { into, landed })
}

/// The work order `id` whose kept work is to land, from its file; an order
/// whose record outlived its file is an input error (`restore` says what
/// restoring the file allows).
fn order_to_land<'o>(orders: &'o Orders, id: &str, restore: &str) -> Result<&'o WorkOrder> {
    orders.get(id).ok_or_else(|| {
        InputError::new(format!(
            "work order '{id}' has a record but no file in the orders directory"
        ))
        .hint(format!("restore its file to {restore}"))
        .into()
    })
}

/// The commit of `id`'s kept work `command` lands: for `merge-back`, what
/// its branch holds; for `retry`, what passed work waiting to land waits
/// with, else its kept branch.
fn kept_work(ctx: &Context, store: &Store<'_>, id: &str, command: Command) -> Result<ObjectId> {
    if command == Command::MergeBack {
        return branch_commit(ctx, id)?.ok_or_else(|| {
            InputError::new(format!("branch '{}' does not exist", branch_of(id)))
                .hint("create it with 'git arbiter worktree add <id>' and commit the work there")
                .into()
        });
    }
    let record = check_retryable(id, store.snapshot()?.record(id)?)?;
    if let Some(source) = record
        .landing
        .as_ref()
        .filter(|_| record.waits_to_land())
        .and_then(|l| ObjectId::from_hex(l.source.as_bytes()).ok())
    {
        return Ok(source);
    }
    branch_commit(ctx, id)?.ok_or_else(|| {
        InputError::new(format!(
            "work order '{id}' has no kept branch {} to retry",
            branch_of(id)
        ))
        .hint(format!(
            "'git arbiter retry --rebuild {id}' builds it again"
        ))
        .into()
    })
}

/// A retry lands kept work: an order its merge halted has some, and an
/// order whose passed work waits to land.
fn check_retryable(id: &str, record: Option<Record>) -> Result<Record> {
    let Some(record) = record.filter(|r| r.halted || r.waits_to_land()) else {
        return Err(InputError::new(format!(
            "work order '{id}' is not halted and not waiting to land"
        ))
        .hint("only a halted work order, or one waiting to land, is retried; 'git arbiter status' shows which are")
        .into());
    };
    if record.waits_to_land() {
        return Ok(record);
    }
    let reason = record
        .halt_reason
        .as_deref()
        .unwrap_or("no reason recorded");
    if !merge::RETRYABLE.contains(&reason) {
        return Err(InputError::new(format!(
            "work order '{id}' is halted for {reason}, not by its merge: its kept work is not merged as it is"
        ))
        .hint(format!("'git arbiter retry --rebuild {id}' builds it again"))
        .into());
    }
    Ok(record)
}

/// The commit `id`'s branch `arbiter/<id>` holds; `None` without the branch.
fn branch_commit(ctx: &Context, id: &str) -> Result<Option<ObjectId>> {
    let branch = worktree::branch_ref(id);
    let Some(mut found) = ctx
        .repo
        .try_find_reference(branch.as_str())
        .map_err(|source| Error::ReadBranch {
            branch: branch.clone(),
            source,
        })?
    else {
        return Ok(None);
    };
    Ok(Some(
        found
            .peel_to_id()
            .map_err(|source| Error::ResolveBranch { branch, source })?
            .detach(),
    ))
}

/// Land `items` on `into` through the merge queue (see the module docs).
/// Refused before anything changes (exit 2) when an order may not be taken
/// up, or a checkout of the branch could not follow one of the merges now.
fn land(
    ctx: &Context,
    store: &Store<'_>,
    into: &gix::refs::FullName,
    items: &[Item<'_>],
    command: Command,
    checks: Checks<'_>,
    progress: &dyn Progress,
) -> Result<Vec<Landed>> {
    let me = Conductor::register(ctx)?;
    merge::settle_checkouts(ctx, into, progress)?;
    let tip = ctx.branch_tip(into)?;
    check_checkouts(ctx, into, tip, items)?;
    let taken = take_up(ctx, store, tip, items, command, &me.name)?;
    let mut queue = Queue::new(ctx, store, into, checks, &me)?.keeping_culprits();
    let entries: Vec<Entry<'_>> = items
        .iter()
        .zip(&taken)
        .map(|(item, record)| Entry {
            req: request(item, into, record, &me.name),
            entered: std::time::Instant::now(),
            verified: record
                .landing
                .as_ref()
                .and_then(|l| l.verified_tree.as_deref())
                .and_then(|t| ObjectId::from_hex(t.as_bytes()).ok()),
        })
        .collect();
    let requests: Vec<Request<'_>> = entries.iter().map(|e| e.req.clone()).collect();
    let fates = match queue.land(entries, progress) {
        Ok(fates) => fates,
        Err(e) => {
            // Its work passed before and stays: it waits to land.
            if e.is_disk_full() {
                me.release_reserve();
            }
            wait(store, &requests, &me.name, &e.to_string())?;
            return Err(e);
        }
    };
    let mut out = Vec::with_capacity(fates.len());
    for (id, fate) in fates {
        let Some(req) = requests.iter().find(|r| r.wo.id == id) else {
            continue;
        };
        let (mut pre_merge_head, mut changed) = (None, Vec::new());
        match &fate {
            Fate::Landed { sha, .. } => {
                (pre_merge_head, changed) = what_the_merge_changed(ctx, *sha)?;
                drop_kept(ctx, &id, command)?;
            }
            Fate::UpToDate => drop_kept(ctx, &id, command)?,
            // Kept for the user, halted: it failed the gates once merged.
            Fate::GateFailed { detail } => halt_gate_failed(store, req, &me.name, detail)?,
            Fate::Interrupted => wait(
                store,
                std::slice::from_ref(req),
                &me.name,
                "stopped before it landed",
            )?,
            Fate::Halted { .. } | Fate::Waiting { .. } | Fate::Withdrawn { .. } => {}
        }
        out.push(Landed {
            id,
            fate,
            pre_merge_head,
            changed,
        });
    }
    Ok(out)
}

/// The first parent of the merge `sha` (the branch's tip before it) and the
/// paths the merge changed against it.
fn what_the_merge_changed(ctx: &Context, sha: ObjectId) -> Result<(Option<ObjectId>, Vec<String>)> {
    let merge = ctx
        .repo
        .find_commit(sha)
        .map_err(|source| Error::ReadMerge {
            commit: sha,
            source,
        })?;
    let Some(parent) = merge.parent_ids().next().map(|p| p.detach()) else {
        return Ok((None, Vec::new()));
    };
    let (from, to) = (ctx.tree_of(parent)?, ctx.tree_of(sha)?);
    let changed = crate::git::diff::changed_paths(&ctx.repo, from, to)?
        .iter()
        .map(crate::git::diff::Changed::display)
        .collect();
    Ok((Some(parent), changed))
}

/// A retried order's kept worktree and branch go once its work landed: it
/// is in the merge now. A merged-back branch is the user's to keep.
fn drop_kept(ctx: &Context, id: &str, command: Command) -> Result<()> {
    match command {
        Command::Retry => worktree::remove(ctx, id, &branch_of(id)),
        Command::MergeBack => Ok(()),
    }
}

/// Refuse, before anything changes, a landing a checkout of `into` could
/// not follow now (a local change or an untracked file in the way, a merge
/// in progress there, its index locked).
fn check_checkouts(
    ctx: &Context,
    into: &gix::refs::FullName,
    tip: ObjectId,
    items: &[Item<'_>],
) -> Result<()> {
    let worktrees = crate::run::user_checkout::worktrees_with_branch(ctx, into)?;
    if worktrees.is_empty() {
        return Ok(());
    }
    let wait = crate::run::user_checkout::lock_wait(ctx)?;
    let tip_tree = ctx.tree_of(tip)?;
    let mut session = merge::Session::default();
    for item in items {
        let req = request(item, into, &Record::new(&item.wo.id, false, 1), "");
        let Some(tree) = session.preview(ctx, tip, &req)? else {
            continue;
        };
        let changed = crate::git::diff::changed_paths(&ctx.repo, tip_tree, tree)?;
        // Only the trees matter to the check: no commit is made for it.
        let step = crate::run::user_checkout::Move {
            from: tip,
            from_tree: tip_tree,
            to: tip,
            to_tree: tree,
        };
        for wt in &worktrees {
            if let Err(blocked) = crate::run::user_checkout::prepare(wt, step, &changed, wait)? {
                return Err(InputError::new(format!(
                    "{} was not merged: {}",
                    item.wo.id,
                    blocked.describe()
                ))
                .hint(blocked.hint())
                .into());
            }
        }
    }
    Ok(())
}

/// Take up every item's order for this conductor (`me`), in one
/// transition, or refuse (nothing changed) when one may not be taken up.
fn take_up(
    ctx: &Context,
    store: &Store<'_>,
    tip: ObjectId,
    items: &[Item<'_>],
    command: Command,
    me: &str,
) -> Result<Vec<Record>> {
    store.transact(command.event(), |txn| -> Result<Vec<Record>> {
        let mut taken = Vec::with_capacity(items.len());
        for item in items {
            let id = item.wo.id.as_str();
            let mut r = txn.record(id, !item.wo.deps.is_empty())?;
            may_take_up(ctx, &r, command)?;
            if r.halted {
                r.lift_halt();
            }
            if !matches!(r.status, Status::InProgress | Status::Verified)
                || r.checkpoint_before.is_none()
            {
                // Recovery searches the branch for its merge back to here.
                r.checkpoint_before = Some(tip.to_string());
            }
            let keeps_landing = r
                .landing
                .as_ref()
                .is_some_and(|l| ObjectId::from_hex(l.source.as_bytes()).ok() == Some(item.source));
            if !keeps_landing {
                r.queue_to_land(item.source.to_string());
            }
            r.attempts = r.attempts.max(1);
            r.checkpoint_after = None;
            r.status = Status::InProgress;
            r.owner = Some(me.to_owned());
            r.log(command.event(), Some(item.source.to_string()));
            txn.put(r.clone());
            taken.push(r);
        }
        Ok(taken)
    })
}

/// May `command` take up the order of `record`?
fn may_take_up(ctx: &Context, r: &Record, command: Command) -> Result<()> {
    let id = r.wo.as_str();
    if r.status == Status::InProgress && conductor::owns_live(ctx, r) {
        return Err(InputError::new(format!(
            "work order '{id}' is being built by a running round (conductor {})",
            r.owner.as_deref().unwrap_or_default()
        ))
        .hint("the round merges it when its checks pass; 'git arbiter stop' ends the round first")
        .into());
    }
    let reason = r.halt_reason.as_deref();
    let allowed = match command {
        Command::Retry => {
            r.waits_to_land() || (r.halted && reason.is_some_and(|h| merge::RETRYABLE.contains(&h)))
        }
        Command::MergeBack => !r.halted || reason == Some(merge::HALT_CHECKOUT_BLOCKED),
    };
    if allowed {
        return Ok(());
    }
    Err(InputError::new(format!(
        "work order '{id}' is halted ({}): it is never merged",
        reason.unwrap_or("no reason recorded")
    ))
    .hint(format!(
        "inspect its branch arbiter/{id}; 'git arbiter clear {id}' lifts the halt"
    ))
    .into())
}

/// The merge request of `item`, for the attempt `record` holds.
fn request<'a>(
    item: &Item<'a>,
    into: &'a gix::refs::FullName,
    record: &Record,
    me: &'a str,
) -> Request<'a> {
    let (attempt, round_base) = merge::standalone(Some(record));
    Request {
        wo: item.wo,
        into,
        source: item.source,
        attempt,
        round_base,
        scope: item.scope.clone(),
        extra_note: None,
        owner: me,
    }
}

/// The kept work of `requests` failed the gates once merged: halted
/// `merged_gate_failed`, its branch kept for the user to look at.
fn halt_gate_failed(store: &Store<'_>, req: &Request<'_>, me: &str, detail: &str) -> Result<()> {
    let id = req.wo.id.as_str();
    store.update_held(
        &format!("{MERGED_GATE_FAILED} {id}"),
        id,
        me,
        req.attempt,
        |r| {
            r.verdicts.push(Verdict {
                kind: "verify".into(),
                command: "gates on the merged result".into(),
                passed: false,
                exit_code: None,
                wall_ms: None,
                log: None,
                report: None,
                detail: Some(detail.to_owned()),
            });
            r.landing = None;
            r.halt_unowned(MERGED_GATE_FAILED, vec![detail.to_owned()]);
        },
    )?;
    Ok(())
}

/// The orders of `requests` still held by `me` wait to land (`why`).
fn wait(store: &Store<'_>, requests: &[Request<'_>], me: &str, why: &str) -> Result<()> {
    store.transact("kept work waits to land", |txn| -> Result<()> {
        for req in requests {
            let Some(mut r) = txn.stored(&req.wo.id)? else {
                continue;
            };
            if r.held_by(me, req.attempt) && r.landing.is_some() {
                r.wait_to_land(None, why.to_owned());
                txn.put(r);
            }
        }
        Ok(())
    })
}

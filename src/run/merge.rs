//! Merge-back: merge an order's work into the integration branch as a
//! two-parent commit computed in the object database, deciding conflicts and
//! drift BEFORE the branch moves (never merged first and rolled back after),
//! and land chains of such merges ([`land`]) for the merge queue.
//!
//! Crash-safety protocol, which recovery (`reconcile`) relies on:
//! 1. the order is `in_progress`, held by the conductor landing it (a
//!    round's dispatch, or `retry`/`merge-back` taking it up), with its work
//!    recorded as waiting to land once it passed ([`Record::queue_to_land`]);
//! 2. write the merge commits, with the `Arbiter-WO` and `Arbiter-Attempt`
//!    trailers (kept reachable by the queue until they land);
//! 3. take the checkouts of the branch (their `index.lock`) and check that
//!    they can follow; write each one's journal;
//! 4. move the branch by compare-and-swap from the pre-merge tip; a lost race
//!    is redone on the new tip (merge and drift recomputed), never forced;
//! 5. bring the checkouts to the new tip (see [`crate::run::user_checkout`]);
//! 6. one state transition: each order `done` with `checkpoint_after =
//!    <merge>`, verdict and history, and a note on its merge commit (`git
//!    log --notes=arbiter` shows it).
//!
//! A kill before 4 leaves the branch without the merge (recovery: the work
//! waits to land, `verified`); after 4 the branch's first-parent chain holds
//! a merge with the order's trailer (recovery: `done`, see
//! [`crate::git::history`]); after 4 but before 5 a checkout behind the branch,
//! whose journal lets [`user_checkout::finish_interrupted`] finish it. No
//! transition is written between 2 and 4: the branch itself is the
//! checkpoint.
//!
//! [`Record::queue_to_land`]: crate::state::Record::queue_to_land

use gix::bstr::ByteSlice;
use gix::refs::transaction::PreviousValue;
use gix::refs::{FullName, Target};
use gix::ObjectId;
use serde_json::json;

use crate::git::diff::Changed;
use crate::run::drift;
pub use crate::run::drift::DriftScope;
use crate::run::user_checkout;
use crate::state::context::Context;
use crate::state::orders::WorkOrder;
use crate::state::{Store, Verdict};
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading merge options: {source}")]
    Options {
        #[source]
        source: gix::Error,
    },
    #[error("merging {commit} into {into}: {source}")]
    Merge {
        commit: ObjectId,
        into: gix::bstr::BString,
        #[source]
        source: gix::Error,
    },
    #[error("writing the merged tree: {source}")]
    WriteTree {
        #[source]
        source: gix::Error,
    },
    #[error("moving {branch}: {source}")]
    MoveBranch {
        branch: gix::bstr::BString,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// How often in a row the branch's lock may be found taken before it is
/// reported as stale.
const MAX_LOCKED: u32 = 5;

pub const HALT_CONFLICT: &str = "merge_conflict";
/// The halt of an order whose merge untracked files in a checked-out copy
/// of the integration branch were in the way of, in records written before
/// such work waited to land (`verified`) instead: `retry` lands it.
pub const HALT_CHECKOUT_BLOCKED: &str = "checkout_blocked";
pub const HALT_DRIFT: &str = "undeclared_file_drift";
/// The history event (and reason) of an order whose merge broke the gates
/// once merged with the others: it goes back for rework, its attempt spent
/// (or, landed by `retry` or `merge-back`, it halts with its work kept).
pub const MERGED_GATE_FAILED: &str = crate::state::MERGED_GATE_FAILED_EVENT;

#[derive(Clone)]
pub struct Request<'a> {
    pub wo: &'a WorkOrder,
    /// The integration branch (full name, e.g. `refs/heads/main`).
    pub into: &'a FullName,
    /// The commit to merge (the tip of `arbiter/<id>`).
    pub source: ObjectId,
    /// The attempt number for the trailer and note (1 for the first).
    pub attempt: u32,
    /// The round's base; `None` uses the merge base of source and tip.
    pub round_base: Option<ObjectId>,
    pub scope: DriftScope,
    /// Extra fields for the merge commit's note (e.g. the round's gate verdicts).
    pub extra_note: Option<serde_json::Value>,
    /// The conductor whose attempt `attempt` this merge settles (a round,
    /// a race, or a `retry` or `merge-back` of kept work). The branch moves
    /// only while the record still says that conductor holds that attempt.
    pub owner: &'a str,
}

/// The halts `git arbiter retry` re-checks without a rebuild: the work was
/// built and passed its checks; only its merge onto the tip was refused
/// (or, for a retry, failed the gates as merged).
pub const RETRYABLE: [&str; 4] = [
    HALT_DRIFT,
    HALT_CONFLICT,
    HALT_CHECKOUT_BLOCKED,
    MERGED_GATE_FAILED,
];

/// The merge commit's message: subject plus trailers.
pub fn message(wo: &WorkOrder, attempt: u32, round_base: ObjectId) -> String {
    format!(
        "Merge {id}: {title}\n\nArbiter-WO: {id}\nArbiter-Attempt: {attempt}\nArbiter-Round-Base: {round_base}\n",
        id = wo.id,
        title = wo.title.trim(),
    )
}

/// Merge-backs of one repository take turns. The compare-and-swap alone keeps
/// the branch right, but a checked-out worktree is updated after the branch
/// moves: another process's preflight must not see it half-written and take
/// it for a user's edit. The turn lasts from the ownership check to the
/// `done` record, so `halt`, `clear` and recovery, which take it too, see an
/// order either before its merge or after it is recorded.
const MERGE_BACK_TURN: &str = "merge-back";

/// Wait for the merge-back turn (see [`MERGE_BACK_TURN`]); it lasts until the
/// returned guard is dropped. Never call it while holding it: the lock is per
/// open file, so a second take in one process waits forever.
pub fn take_turn(ctx: &Context) -> Result<crate::sys::flock::Held> {
    ctx.take_turn(MERGE_BACK_TURN)
}

/// The attempt and round base a standalone `merge-back` of an order names:
/// the attempt its record counts (at least 1: the merge commit's trailer and
/// the record must agree, see [`crate::run::reconcile::find_merge`]) and the tip
/// an earlier, interrupted start recorded.
pub fn standalone(record: Option<&crate::state::Record>) -> (u32, Option<ObjectId>) {
    let attempt = record.map_or(1, |r| r.attempts.max(1));
    let round_base = record
        .and_then(|r| r.checkpoint_before.as_deref())
        .and_then(|s| ObjectId::from_hex(s.as_bytes()).ok());
    (attempt, round_base)
}

/// Why `owner` no longer holds `attempt` of `record`, or `None` if it does.
fn not_held(record: Option<&crate::state::Record>, owner: &str, attempt: u32) -> Option<String> {
    match record {
        Some(r) if r.held_by(owner, attempt) => None,
        Some(r) if r.halted => Some(format!(
            "halted while in flight ({})",
            r.halt_reason.as_deref().unwrap_or("no reason recorded")
        )),
        Some(r) => Some(format!(
            "no longer held by this conductor (status {}, owner {}, attempt {})",
            r.status,
            r.owner.as_deref().unwrap_or("none"),
            r.attempts
        )),
        None => Some("its record is gone".into()),
    }
}

/// The merge-backs of one conductor or command. gix builds its blob diff and
/// blob merge caches on every merge, each time walking every index entry to
/// map attributes; a session keeps them between merges while the index (or,
/// bare, `HEAD`) they came from is unchanged.
#[derive(Default)]
pub struct Session {
    caches: Option<MergeCaches>,
}

impl Session {
    /// [`compute`], again when git's maintenance beside us made an object
    /// write or read fail for a moment.
    fn compute(&mut self, ctx: &Context, onto: ObjectId, req: &Request) -> Result<Computed> {
        crate::git::odb::retry_transient(|| compute(ctx, &mut self.caches, onto, req))
    }

    /// Merge `req.source` onto `onto` as the next link of a merge chain: the
    /// merge commit is written, but no branch moves. A conflict or drift
    /// halts the order, as a merge-back would.
    pub fn link(
        &mut self,
        ctx: &Context,
        store: &Store,
        onto: ObjectId,
        req: &Request,
    ) -> Result<Linked> {
        check_source(ctx, req)?;
        let halted = |reason: &str, kind: &str, paths: Vec<String>| -> Result<Linked> {
            Ok(match halt(store, req, reason, &paths, kind)? {
                None if reason == HALT_CONFLICT => Linked::Conflict { paths },
                None => Linked::Drift { paths },
                Some(reason) => Linked::Withdrawn { reason },
            })
        };
        match self.compute(ctx, onto, req)? {
            Computed::UpToDate => Ok(Linked::UpToDate),
            Computed::Conflict { paths } => halted(HALT_CONFLICT, "merge", paths),
            Computed::Drift { paths } => halted(HALT_DRIFT, "drift", paths),
            Computed::Clean(clean) => {
                let link = write_link(ctx, onto, req, clean)?;
                crate::sys::crash::point("merge-commit.after");
                Ok(Linked::Merge(link))
            }
        }
    }

    /// The tree `req.source` merged cleanly onto `onto` would have, or
    /// `None` (already merged, a conflict, drift): nothing is recorded,
    /// no commit written. For a command that checks before it starts.
    pub fn preview(
        &mut self,
        ctx: &Context,
        onto: ObjectId,
        req: &Request,
    ) -> Result<Option<ObjectId>> {
        check_source(ctx, req)?;
        Ok(match self.compute(ctx, onto, req)? {
            Computed::Clean(clean) => Some(clean.tree),
            Computed::UpToDate | Computed::Conflict { .. } | Computed::Drift { .. } => None,
        })
    }

    /// As [`Session::link`], for trying a chain without one of its links:
    /// an order that would not merge cleanly onto `onto` is not halted
    /// (it merged cleanly in the chain it came from), and nothing is
    /// written (`None`).
    pub fn relink(&mut self, ctx: &Context, onto: ObjectId, req: &Request) -> Result<Option<Link>> {
        match self.compute(ctx, onto, req)? {
            Computed::Clean(clean) => Ok(Some(write_link(ctx, onto, req, clean)?)),
            Computed::UpToDate | Computed::Conflict { .. } | Computed::Drift { .. } => Ok(None),
        }
    }
}

/// The branch moved to the last of `chain`: (4) bring the checkouts of it
/// in step, and finish (5) even if that fails (the journal lets the next
/// landing finish the checkout): each merge done, plus its commit's note,
/// in one transaction (`message`). Then the turn goes, and post-merge hooks
/// run outside it, as `git merge` runs them once its checkout is updated,
/// so a slow hook holds up no other merge.
fn after_cas(
    store: &Store,
    message: &str,
    chain: &[(&Request, &Link)],
    prepared: Vec<user_checkout::Prepared>,
    turn: crate::sys::flock::Held,
) -> Result<()> {
    let mut updated = Vec::new();
    let mut sync_error = None;
    for ready in prepared {
        match ready.apply() {
            Ok(dir) => updated.push(dir),
            Err(e) => {
                sync_error.get_or_insert(e);
            }
        }
    }
    crate::sys::crash::point("merge-recorded.before");
    store.transact(message, |txn| -> Result<()> {
        for (req, link) in chain {
            record_merged(txn, req, link)?;
        }
        Ok(())
    })?;
    crate::sys::crash::point("merge-recorded.after");
    drop(turn);
    for dir in &updated {
        crate::run::user_checkout::run_post_merge(dir);
    }
    sync_error.map_or(Ok(()), Err)
}

fn check_source(ctx: &Context, req: &Request) -> Result<()> {
    ctx.repo.find_commit(req.source).map_err(|_| {
        InputError::new(format!("{} is not a commit", req.source)).hint(format!(
            "the branch arbiter/{} must point at a commit",
            req.wo.id
        ))
    })?;
    Ok(())
}

/// An order's merge computed onto a commit, before anything is written
/// beyond its tree.
enum Computed {
    /// The source is already contained in the commit merged onto.
    UpToDate,
    Conflict {
        paths: Vec<String>,
    },
    Drift {
        paths: Vec<String>,
    },
    Clean(CleanMerge),
}

struct CleanMerge {
    onto: ObjectId,
    onto_tree: ObjectId,
    tree: ObjectId,
    changed: Vec<Changed>,
    merge_base: Option<ObjectId>,
}

/// Merge `req.source` onto `onto` in the object database and check it for
/// conflicts and drift: nothing moves, nothing is recorded.
fn compute(
    ctx: &Context,
    caches: &mut Option<MergeCaches>,
    onto: ObjectId,
    req: &Request,
) -> Result<Computed> {
    let repo = &ctx.repo;
    let options = repo
        .tree_merge_options()
        .map_err(|source| Error::Options { source })?;
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: None,
        current: Some(req.into.shorten()),
        other: Some("arbiter".into()),
    };
    // One merge-base search answers all three questions: already merged?
    // what to merge against? which round base to name?
    // Merged blobs and trees are written fresh: see `odb::write_fresh`.
    let objects = crate::git::odb::Fresh(repo);
    let mut outcome = merge_commits(ctx, caches, onto, req.source, labels, options, &objects)
        .map_err(|source| Error::Merge {
            commit: req.source,
            into: req.into.shorten().to_owned(),
            source,
        })?;
    let merge_base = outcome.merge_bases.as_ref().map(|b| *b.first());
    if req.source == onto
        || outcome
            .merge_bases
            .as_ref()
            .is_some_and(|b| b.iter().any(|c| *c == req.source))
    {
        return Ok(Computed::UpToDate);
    }
    let how = gix::merge::tree::TreatAsUnresolved::git();
    if outcome.tree_merge.has_unresolved_conflicts(how) {
        let mut paths: Vec<String> = outcome
            .tree_merge
            .conflicts
            .iter()
            .filter(|c| c.is_unresolved(how))
            .flat_map(|c| {
                [
                    c.ours.location(),
                    c.ours.source_location(),
                    c.theirs.location(),
                    c.theirs.source_location(),
                ]
            })
            .map(|p| p.to_str_lossy().into_owned())
            .collect();
        paths.sort();
        paths.dedup();
        return Ok(Computed::Conflict { paths });
    }
    // The plain tree editor: gix's checks every entry of each written
    // tree exists (a lookup per entry, ~150 here), but a clean merge only
    // names objects from its input trees or blobs it just wrote.
    let tree = outcome
        .tree_merge
        .tree
        .write(|tree| crate::git::odb::write_fresh(repo, tree))
        .map_err(|source| Error::WriteTree { source })?;
    let onto_tree = ctx.tree_of(onto)?;
    let changed = crate::git::diff::changed_paths(repo, onto_tree, tree)?;
    let uncovered = drift::uncovered(req.wo, &req.scope, &changed);
    if !uncovered.is_empty() {
        return Ok(Computed::Drift { paths: uncovered });
    }
    Ok(Computed::Clean(CleanMerge {
        onto,
        onto_tree,
        tree,
        changed,
        merge_base,
    }))
}

/// One order's merge commit, written onto `onto` (its first parent) but not
/// on any branch yet: a link of a merge chain, or a single merge-back.
#[derive(Debug, Clone)]
pub struct Link {
    pub sha: ObjectId,
    pub tree: ObjectId,
    pub onto: ObjectId,
    pub onto_tree: ObjectId,
    pub round_base: ObjectId,
    pub source: ObjectId,
    /// What the merge changed relative to `onto`.
    pub changed: Vec<Changed>,
    /// The merge queue's run of the gates on the merged result that let it
    /// land, when they ran.
    pub verified: Option<Verified>,
}

/// A run of the gates on a chain's merged result that passed: recorded as
/// the `verify` verdict of each order it lets land.
#[derive(Clone, Debug)]
pub struct Verified {
    pub command: String,
    /// How long the chain's verification took, bisection included.
    pub wall_ms: u64,
    pub log: String,
}

impl Link {
    pub fn changed_text(&self) -> Vec<String> {
        self.changed.iter().map(Changed::display).collect()
    }
}

fn write_link(ctx: &Context, onto: ObjectId, req: &Request, clean: CleanMerge) -> Result<Link> {
    let round_base = req.round_base.or(clean.merge_base).unwrap_or(onto);
    let sha = crate::git::odb::write_signed_commit(
        &ctx.repo,
        &message(req.wo, req.attempt, round_base),
        clean.tree,
        [onto, req.source],
    )?;
    Ok(Link {
        sha,
        tree: clean.tree,
        onto: clean.onto,
        onto_tree: clean.onto_tree,
        round_base,
        source: req.source,
        changed: clean.changed,
        verified: None,
    })
}

/// How a link of a chain came out.
#[derive(Debug, Clone)]
pub enum Linked {
    Merge(Link),
    /// The source is already in the commit it would be merged onto.
    UpToDate,
    /// Halted [`HALT_CONFLICT`].
    Conflict {
        paths: Vec<String>,
    },
    /// Halted [`HALT_DRIFT`].
    Drift {
        paths: Vec<String>,
    },
    /// Its owner no longer holds the attempt: nothing was written.
    Withdrawn {
        reason: String,
    },
}

/// How landing a chain went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landed {
    /// The branch moved to the chain's last merge; every order is `done`.
    Landed { sha: ObjectId },
    /// The branch is no longer where the chain starts: nothing moved.
    Moved,
    /// The owner no longer holds the attempt of the order at `index`: nothing moved.
    Withdrawn { index: usize, reason: String },
    /// A checkout of the branch cannot follow now (`why`): the orders at
    /// `indexes` wait (see [`crate::state::Record::wait_to_land`]), nothing moved.
    Blocked {
        indexes: Vec<usize>,
        why: user_checkout::Blocked,
    },
}

/// Land a chain of merges ([`Session::link`], each onto the one before,
/// the first onto `tip`) by one compare-and-swap of the branch from `tip`
/// to the last, then one `done` transition for all of them. The protocol of
/// a single merge-back (see the module docs) holds for each link: every
/// merge is on the first-parent chain of the new tip, with its trailers, so
/// recovery finds each one after a kill between the move and the record.
/// A checkout of the branch follows as `git merge` updates one (see
/// [`user_checkout`]); when it cannot now (a change of the user's in the
/// way, a lock held past `lock_wait`), nothing moves: [`Landed::Blocked`].
pub fn land(
    ctx: &Context,
    store: &Store,
    into: &FullName,
    tip: ObjectId,
    chain: &[(&Request, &Link)],
    lock_wait: std::time::Duration,
) -> Result<Landed> {
    let Some(&(_, last)) = chain.last() else {
        return Ok(Landed::Landed { sha: tip });
    };
    if let Some(remote) = ctx.remote().filter(|r| &r.tracking == into) {
        return land_on_remote(ctx, store, &remote, tip, chain, last);
    }
    let mut tries = Tries::default();
    loop {
        let turn = take_turn(ctx)?;
        let worktrees = crate::run::user_checkout::worktrees_with_branch(ctx, into)?;
        user_checkout::finish_interrupted(ctx, into, &worktrees)?;
        if ctx.branch_tip(into)? != tip {
            return Ok(Landed::Moved);
        }
        if let Some(withdrawn) = withdrawn(store, chain)? {
            return Ok(withdrawn);
        }
        let prepared = match prepare_checkouts(ctx, &worktrees, tip, last, lock_wait)? {
            Ok(prepared) => prepared,
            Err(why) => {
                drop(turn);
                return Ok(blocked(chain, why));
            }
        };
        for ready in &prepared {
            ready.begin()?;
        }
        crate::sys::crash::point("branch-cas.before");
        let ids: Vec<&str> = chain.iter().map(|(req, _)| req.wo.id.as_str()).collect();
        let what = format!("merge-back {}", ids.join(" "));
        let moved = move_branch(ctx, into, tip, last.sha, &what);
        if !matches!(moved, Ok(Cas::Moved)) {
            prepared.iter().for_each(user_checkout::Prepared::cancel);
        }
        match moved? {
            Cas::Moved => {}
            Cas::Lost => return Ok(Landed::Moved),
            again => {
                tries.again(again, into)?;
                continue;
            }
        }
        crate::sys::crash::point("branch-cas.after");
        after_cas(
            store,
            &format!("{what}: merged {}", last.sha),
            chain,
            prepared,
            turn,
        )?;
        return Ok(Landed::Landed { sha: last.sha });
    }
}

/// [`land`] onto the remote's branch (`--remote`): the branch's move and
/// the chain's `done` transitions are one atomic push, so neither happens
/// without the other, and a takeover of any order of the chain (its lease
/// lapsed, another machine's transition came first) withdraws the landing
/// rather than race it. No checkout follows: the remote's branch is not
/// checked out here (`git pull` brings it in).
fn land_on_remote(
    ctx: &Context,
    store: &Store,
    remote: &crate::state::remote::Remote,
    tip: ObjectId,
    chain: &[(&Request, &Link)],
    last: &Link,
) -> Result<Landed> {
    use crate::state::remote::{Expect, Update};
    let _turn = take_turn(ctx)?;
    let ids: Vec<&str> = chain.iter().map(|(req, _)| req.wo.id.as_str()).collect();
    let message = format!("merge-back {}: merged {}", ids.join(" "), last.sha);
    crate::sys::crash::point("branch-cas.before");
    let landed = store.transact(&message, |txn| -> Result<Option<Landed>> {
        // Re-read after a lost race: another machine landed first.
        if ctx.branch_tip(&remote.tracking)? != tip {
            return Ok(Some(Landed::Moved));
        }
        for (index, (req, _)) in chain.iter().enumerate() {
            let record = txn.stored(&req.wo.id)?;
            if let Some(reason) = not_held(record.as_ref(), req.owner, req.attempt) {
                return Ok(Some(Landed::Withdrawn { index, reason }));
            }
        }
        for (req, link) in chain {
            record_merged(txn, req, link)?;
        }
        txn.push_ref(Update {
            name: remote.branch.as_bstr().to_string(),
            expect: Expect::Is(tip),
            to: last.sha,
            local: Some(remote.tracking.as_bstr().to_string()),
        });
        Ok(None)
    })?;
    crate::sys::crash::point("branch-cas.after");
    Ok(landed.unwrap_or(Landed::Landed { sha: last.sha }))
}

/// The first order of `chain` whose owner no longer holds its attempt, as
/// the landing's outcome: checked under the merge turn, right before the
/// branch moves, since a `halt` or a takeover may have come since the merge
/// was computed, and none of the chain may land then.
fn withdrawn(store: &Store, chain: &[(&Request, &Link)]) -> Result<Option<Landed>> {
    let mut snapshot = store.snapshot()?;
    for (index, (req, _)) in chain.iter().enumerate() {
        let record = snapshot.record(&req.wo.id)?;
        if let Some(reason) = not_held(record.as_ref(), req.owner, req.attempt) {
            return Ok(Some(Landed::Withdrawn { index, reason }));
        }
    }
    Ok(None)
}

/// Make every checkout of the branch (`worktrees`) ready to follow it from
/// `tip` to the merge `last`, before the branch moves: each one's
/// `index.lock` taken and its files checked. The first that cannot follow
/// now says why, and the ones already prepared are let go.
fn prepare_checkouts(
    ctx: &Context,
    worktrees: &[gix::Repository],
    tip: ObjectId,
    last: &Link,
    lock_wait: std::time::Duration,
) -> Result<std::result::Result<Vec<user_checkout::Prepared>, user_checkout::Blocked>> {
    let step = user_checkout::Move {
        from: tip,
        from_tree: ctx.tree_of(tip)?,
        to: last.sha,
        to_tree: last.tree,
    };
    let changed = crate::git::diff::changed_paths(&ctx.repo, step.from_tree, step.to_tree)?;
    let mut prepared = Vec::with_capacity(worktrees.len());
    for wt in worktrees {
        match user_checkout::prepare(wt, step, &changed, lock_wait)? {
            Ok(ready) => prepared.push(ready),
            Err(why) => return Ok(Err(why)),
        }
    }
    Ok(Ok(prepared))
}

/// How often in a row a landing's compare-and-swap found the branch's lock
/// taken, or failed otherwise: each is tried again a few times (a lock
/// another writer holds for a moment, a race with `git pack-refs`), then
/// reported.
#[derive(Default)]
struct Tries {
    locked_in_a_row: u32,
    failed_in_a_row: u32,
}

impl Tries {
    /// The swap went `cas` (locked or failed): count it, and wait a little
    /// after a failure, or give up once it happened too often in a row.
    fn again(&mut self, cas: Cas, into: &FullName) -> Result<()> {
        match cas {
            Cas::Locked(lock) => {
                self.locked_in_a_row += 1;
                if self.locked_in_a_row >= MAX_LOCKED {
                    return Err(branch_locked(into, &lock));
                }
            }
            Cas::Failed(e) => {
                self.failed_in_a_row += 1;
                if self.failed_in_a_row >= MAX_LOCKED {
                    return Err(e);
                }
                std::thread::sleep(std::time::Duration::from_millis(
                    10 * u64::from(self.failed_in_a_row),
                ));
            }
            Cas::Moved | Cas::Lost => {}
        }
        Ok(())
    }
}

/// Before a run: finish what a killed landing left in the checkouts of
/// `branch` (under the merge turn), and say when one has a merge in
/// progress: nothing lands there until it is finished or aborted.
pub fn settle_checkouts(
    ctx: &Context,
    branch: &gix::refs::FullName,
    progress: &dyn crate::run::progress::Progress,
) -> Result<()> {
    let worktrees = crate::run::user_checkout::worktrees_with_branch(ctx, branch)?;
    // A sparse index cannot follow a landing: said before anything is built.
    for wt in &worktrees {
        if let Ok(index) = crate::git::index_lock::read_index(wt) {
            crate::git::checkout::refuse_sparse_index(wt, &index)?;
        }
    }
    let finished = {
        let _turn = take_turn(ctx)?;
        crate::run::user_checkout::finish_interrupted(ctx, branch, &worktrees)?
    };
    for line in finished.iter().filter_map(|f| f.report()) {
        progress.event(&crate::run::progress::Event::Recovered { detail: line });
    }
    for (dir, paths) in crate::run::user_checkout::unmerged_checkouts(ctx, branch)? {
        progress.event(&crate::run::progress::Event::Warning {
            wo: String::new(),
            detail: format!(
                "the checkout {} has unmerged files ({}): work that passes waits to land until the merge there is finished or aborted",
                dir.display(),
                paths.join(", ")
            ),
        });
    }
    Ok(())
}

/// Which orders of `chain` a checkout that cannot follow (`why`) holds
/// back: those whose merge changes a path in the way, or all of them when
/// nothing can land there (a lock, a merge in progress) or no path says.
fn blocked(chain: &[(&Request, &Link)], why: user_checkout::Blocked) -> Landed {
    let paths = why.paths();
    let mut indexes: Vec<usize> = Vec::new();
    if !why.blocks_everything() {
        for (index, (_, link)) in chain.iter().enumerate() {
            let writes = link.changed_text();
            // In the way of a path the merge writes: that path itself, a file
            // below a folder it turns into a file, or a file where it needs a folder.
            if paths.iter().any(|p| {
                writes
                    .iter()
                    .any(|w| crate::state::scope::literal_overlap(p, w))
            }) {
                indexes.push(index);
            }
        }
    }
    if indexes.is_empty() {
        indexes = (0..chain.len()).collect();
    }
    Landed::Blocked { indexes, why }
}

/// How a compare-and-swap of the integration branch went.
enum Cas {
    Moved,
    /// The branch is not where the merge was computed on: redo it.
    Lost,
    /// Its lock file stays (the path): perhaps left by a killed writer.
    Locked(std::path::PathBuf),
    /// The edit failed otherwise: tried again a few times, then reported.
    Failed(crate::sys::error::Error),
}

fn move_branch(
    ctx: &Context,
    into: &FullName,
    from: ObjectId,
    to: ObjectId,
    what: &str,
) -> Result<Cas> {
    let repo = &ctx.repo;
    let moved = crate::git::refguard::guarded(repo, &into.as_bstr().to_string(), || {
        repo.reference(
            into.as_ref(),
            to,
            PreviousValue::MustExistAndMatch(Target::Object(from)),
            format!("arbiter: {what}"),
        )
    });
    let lock = crate::git::refguard::blocking_lock(repo, &into.as_bstr().to_string());
    match moved {
        Ok(_) => Ok(Cas::Moved),
        // gix waited `core.filesRefLockTimeout` already (and reports some
        // lock timeouts as conflicts); a lock that stays is most likely
        // left by a killed writer.
        Err(e) if e.is_retryable() || lock.exists() => Ok(Cas::Locked(lock)),
        Err(e) if e.is_conflict() => Ok(Cas::Lost),
        // Most likely a race with `git pack-refs` moving the ref into
        // `packed-refs` as we read it: tried again a few times.
        Err(source) => Ok(Cas::Failed(
            Error::MoveBranch {
                branch: into.as_bstr().to_owned(),
                source,
            }
            .into(),
        )),
    }
}

/// The `done` transition of a merged order, plus its merge commit's note.
fn record_merged(txn: &mut crate::state::Txn<'_, '_>, req: &Request, link: &Link) -> Result<()> {
    let id = req.wo.id.as_str();
    let changed_text = link.changed_text();
    let note = json!({
        "version": 1,
        "kind": "merge",
        "wo": id,
        "into": req.into.shorten().to_string(),
        "title": req.wo.title,
        "attempt": req.attempt,
        "round_base": link.round_base.to_string(),
        "pre_merge_head": link.onto.to_string(),
        "source": req.source.to_string(),
        "declared": req.wo.file_strings(),
        "drift": {
            "scope": req.scope.name(),
            "passed": true,
            "uncovered": [],
        },
        "changed": changed_text,
        "extra": req.extra_note,
    });
    let note_bytes = serde_json::to_vec_pretty(&note).expect("json values serialize");
    let mut r = txn.record(id, !req.wo.deps.is_empty())?;
    r.checkpoint_after = Some(link.sha.to_string());
    r.verdicts.push(Verdict {
        kind: "drift".into(),
        command: format!("merge-back --drift-scope {}", req.scope.name()),
        passed: true,
        exit_code: None,
        wall_ms: None,
        log: None,
        report: None,
        detail: Some(format!(
            "{} changed paths, all declared",
            changed_text.len()
        )),
    });
    if let Some(verified) = &link.verified {
        r.verdicts.push(Verdict {
            kind: "verify".into(),
            command: verified.command.clone(),
            passed: true,
            exit_code: Some(0),
            wall_ms: Some(verified.wall_ms),
            log: Some(verified.log.clone()),
            report: None,
            detail: None,
        });
    }
    r.mark_merged(req.into.shorten().to_string(), link.sha.to_string());
    txn.put(r);
    txn.put_note(link.sha, note_bytes);
    Ok(())
}

/// The order's work is already on the branch (at `tip`): done, while its
/// conductor still holds the attempt; otherwise nothing is written and the
/// reason it is no longer held is returned.
pub fn record_up_to_date(store: &Store, req: &Request, tip: ObjectId) -> Result<Option<String>> {
    let id = req.wo.id.as_str();
    store.transact(
        &format!("merge-back {id}: up to date"),
        |txn| -> Result<Option<String>> {
            let stored = txn.stored(id)?;
            if let Some(why) = not_held(stored.as_ref(), req.owner, req.attempt) {
                return Ok(Some(why));
            }
            let mut r = txn.record(id, !req.wo.deps.is_empty())?;
            r.mark_merged(
                req.into.shorten().to_string(),
                format!("up to date at {tip}"),
            );
            txn.put(r);
            Ok(None)
        },
    )
}

/// The integration branch's lock file is held for longer than gix waits: name
/// it, since a writer killed between locking and renaming leaves it behind.
fn branch_locked(branch: &FullName, lock: &std::path::Path) -> crate::sys::error::Error {
    InputError::new(format!(
        "{} is locked by another process: {} exists",
        branch.shorten(),
        lock.display()
    ))
    .hint(format!(
        "if no git or git-arbiter process is running, remove the stale lock file {}",
        lock.display()
    ))
    .into()
}

/// What attributes a merge sees come from: the index of the main worktree,
/// else (bare) the tree at `HEAD`.
enum AttributeSource {
    Index(gix::worktree::Index),
    Head(Option<ObjectId>),
}

impl AttributeSource {
    fn current(repo: &gix::Repository) -> std::result::Result<Self, gix::Error> {
        Ok(match repo.try_index()? {
            Some(index) => AttributeSource::Index(index),
            None => AttributeSource::Head(repo.head_id().ok().map(|id| id.detach())),
        })
    }

    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (AttributeSource::Index(a), AttributeSource::Index(b)) => std::sync::Arc::ptr_eq(a, b),
            (AttributeSource::Head(a), AttributeSource::Head(b)) => a == b,
            _ => false,
        }
    }
}

/// The blob diff and blob merge caches of [`merge_commits`], with the
/// attributes they were set up from.
struct MergeCaches {
    source: AttributeSource,
    diff: gix::diff::blob::Platform,
    blob: gix::merge::blob::Platform,
}

/// `Repository::merge_commits`, minus per-call setup: the caches come from
/// the [`Session`] while the attributes they were set up from are unchanged.
#[allow(clippy::too_many_arguments)]
fn merge_commits<'o>(
    ctx: &Context,
    slot: &mut Option<MergeCaches>,
    ours: ObjectId,
    theirs: ObjectId,
    labels: gix::merge::blob::builtin_driver::text::Labels<'_>,
    options: gix::merge::tree::Options,
    objects: &'o crate::git::odb::Fresh<'o>,
) -> std::result::Result<gix::merge::plumbing::commit::Outcome<'o>, gix::Error> {
    let repo = &ctx.repo;
    let source = AttributeSource::current(repo)?;
    let caches = match slot.take() {
        Some(caches) if caches.source.same(&source) => slot.insert(caches),
        _ => slot.insert(MergeCaches {
            source,
            diff: repo.diff_resource_cache_for_tree_diff()?,
            blob: repo.merge_resource_cache(Default::default())?,
        }),
    };
    // The diff cache keeps every blob it loaded for rename tracking.
    caches.diff.clear_resource_cache_keep_allocation();
    let commit_graph = repo.commit_graph_if_enabled()?;
    let mut graph = repo.revision_graph(commit_graph.as_ref());
    let options: gix::merge::commit::Options = options.into();
    gix::merge::plumbing::commit(
        ours,
        theirs,
        labels,
        &mut graph,
        &mut caches.diff,
        &mut caches.blob,
        objects,
        // Labels the merge base in conflict markers only; a conflicted merge
        // is halted, never written.
        &mut |id| id.to_hex_with_len(7).to_string(),
        options.into(),
    )
}

/// Terminal HALT with the paths behind it, plus a failed verdict, while the
/// conductor still holds the attempt: otherwise nothing is written and the
/// reason it is no longer held is returned.
fn halt(
    store: &Store,
    req: &Request,
    reason: &str,
    paths: &[String],
    kind: &str,
) -> Result<Option<String>> {
    let id = req.wo.id.as_str();
    let has_deps = !req.wo.deps.is_empty();
    store.transact(
        &format!("merge-back {id}: halt {reason}"),
        |txn| -> Result<Option<String>> {
            let stored = txn.stored(id)?;
            if let Some(why) = not_held(stored.as_ref(), req.owner, req.attempt) {
                return Ok(Some(why));
            }
            let mut r = txn.record(id, has_deps)?;
            r.verdicts.push(Verdict {
                kind: kind.into(),
                command: "merge-back".into(),
                passed: false,
                exit_code: None,
                detail: Some(paths.join("\n")),
                wall_ms: None,
                log: None,
                report: None,
            });
            r.halt_unowned(reason, paths.to_vec());
            txn.put(r);
            Ok(None)
        },
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use gix::refs::FullName;
    use gix::ObjectId;

    use super::*;
    use crate::state::orders::WorkOrder;
    use crate::state::{Record, Status};
    use crate::testutil::{git, rev, work_order, TestRepo};

    const OWNER: &str = "c1";

    /// The merge request of `wo` for `source` into `main`, attempt 1 of [`OWNER`].
    fn request<'a>(repo: &'a TestRepo, wo: &'a WorkOrder, source: ObjectId) -> Request<'a> {
        Request {
            wo,
            into: &repo.main,
            source,
            attempt: 1,
            round_base: None,
            scope: DriftScope::Own,
            extra_note: None,
            owner: OWNER,
        }
    }

    fn link(repo: &TestRepo, onto: ObjectId, req: &Request) -> Linked {
        Session::default()
            .link(&repo.ctx, &repo.store(), onto, req)
            .expect("link")
    }

    fn land_one(repo: &TestRepo, tip: ObjectId, req: &Request, link: &Link) -> Landed {
        land(
            &repo.ctx,
            &repo.store(),
            &repo.main,
            tip,
            &[(req, link)],
            Duration::from_secs(1),
        )
        .expect("land")
    }

    fn record(repo: &TestRepo, id: &str) -> Record {
        repo.record(id).expect("a record")
    }

    fn merge_of(linked: Linked) -> Link {
        match linked {
            Linked::Merge(link) => link,
            other => panic!("not a clean merge: {other:?}"),
        }
    }

    fn read(dir: &Path, path: &str) -> String {
        std::fs::read_to_string(dir.join(path)).expect("read")
    }

    /// A clean merge is the merge git makes (`git merge-tree`), written as
    /// a two-parent commit with the order's trailers and nothing moved;
    /// landing it moves the branch and its checkout and records it done.
    #[test]
    fn a_clean_merge_is_gits_merge_and_lands_done() {
        let repo = TestRepo::new();
        let tip = repo.on_main(&[("a.txt", "one, on main\n")]);
        let source = repo.work("wo-1", &[("b.txt", "two, of the work\n")]);
        let wo = work_order("wo-1", &["b.txt"]);
        repo.dispatch("wo-1", OWNER);
        let req = request(&repo, &wo, source);
        let link = merge_of(link(&repo, tip, &req));
        let merge_tree = git(
            &repo.root,
            &repo.dir,
            &["merge-tree", "--write-tree", "main", "arbiter/wo-1"],
        );
        assert_eq!(link.tree.to_string(), merge_tree.trim());
        assert_eq!(rev(&repo.root, &repo.dir, &format!("{}^1", link.sha)), tip);
        assert_eq!(
            rev(&repo.root, &repo.dir, &format!("{}^2", link.sha)),
            source
        );
        assert_eq!((link.onto, link.round_base), (tip, repo.base));
        assert_eq!(link.changed_text(), ["b.txt"]);
        let text = git(
            &repo.root,
            &repo.dir,
            &["log", "-1", "--format=%B", &link.sha.to_string()],
        );
        assert!(
            text.contains("Arbiter-WO: wo-1\nArbiter-Attempt: 1\n"),
            "{text}"
        );
        assert_eq!(repo.tip(), tip, "a link moves no branch");
        assert_eq!(record(&repo, "wo-1").status, Status::InProgress);

        let landed = land_one(&repo, tip, &req, &link);
        assert_eq!(landed, Landed::Landed { sha: link.sha });
        assert_eq!(repo.tip(), link.sha);
        let record = record(&repo, "wo-1");
        assert_eq!(record.status, Status::Done);
        assert_eq!(record.checkpoint_after, Some(link.sha.to_string()));
        assert_eq!(record.merged_into.as_deref(), Some("main"));
        let note = repo.store().snapshot().expect("snapshot").note(&link.sha);
        assert!(note.expect("read").is_some(), "the merge has its note");
        assert_eq!(read(&repo.dir, "b.txt"), "two, of the work\n");
        assert_eq!(git(&repo.root, &repo.dir, &["status", "--porcelain"]), "");
    }

    /// Both sides change one line: a conflict, halted with its path,
    /// no merge offered and the branch where it was.
    #[test]
    fn a_conflict_halts_the_order_and_moves_nothing() {
        let repo = TestRepo::new();
        let tip = repo.on_main(&[("a.txt", "main's line\n")]);
        let source = repo.work("wo-1", &[("a.txt", "the work's line\n")]);
        let wo = work_order("wo-1", &["a.txt"]);
        repo.dispatch("wo-1", OWNER);
        let req = request(&repo, &wo, source);
        match link(&repo, tip, &req) {
            Linked::Conflict { paths } => assert_eq!(paths, ["a.txt"]),
            other => panic!("not a conflict: {other:?}"),
        }
        assert_eq!(repo.tip(), tip);
        let record = record(&repo, "wo-1");
        assert!(record.halted);
        assert_eq!(record.halt_reason.as_deref(), Some(HALT_CONFLICT));
        assert_eq!(record.halt_paths, ["a.txt"]);
        assert_eq!(record.owner, None);
    }

    /// A path outside the declared set is drift: the order halts before
    /// anything could move; under a scope that covers the path it merges.
    #[test]
    fn drift_is_refused_before_the_branch_moves() {
        let repo = TestRepo::new();
        let tip = repo.tip();
        let source = repo.work("wo-1", &[("a.txt", "edited\n"), ("c.txt", "undeclared\n")]);
        let wo = work_order("wo-1", &["a.txt"]);
        repo.dispatch("wo-1", OWNER);
        let req = request(&repo, &wo, source);
        match link(&repo, tip, &req) {
            Linked::Drift { paths } => assert_eq!(paths, ["c.txt"]),
            other => panic!("not drift: {other:?}"),
        }
        assert_eq!(repo.tip(), tip);
        let record = record(&repo, "wo-1");
        assert_eq!(record.halt_reason.as_deref(), Some(HALT_DRIFT));
        assert_eq!(record.halt_paths, ["c.txt"]);

        repo.dispatch("wo-2", OWNER);
        let wo = work_order("wo-2", &["a.txt"]);
        let covered = crate::state::scope::Entry::parse("c.txt").expect("entry");
        let req = Request {
            scope: DriftScope::Union(vec![covered]),
            ..request(&repo, &wo, source)
        };
        let link = merge_of(link(&repo, tip, &req));
        assert_eq!(link.changed_text(), ["a.txt", "c.txt"]);
    }

    /// Work the branch already holds merges as up to date: no commit.
    #[test]
    fn work_already_on_the_branch_is_up_to_date() {
        let repo = TestRepo::new();
        let source = repo.work("wo-1", &[("b.txt", "work\n")]);
        git(
            &repo.root,
            &repo.dir,
            &["merge", "-q", "--ff-only", "arbiter/wo-1"],
        );
        let tip = repo.on_main(&[("a.txt", "later\n")]);
        let wo = work_order("wo-1", &[]);
        repo.dispatch("wo-1", OWNER);
        let req = request(&repo, &wo, source);
        assert!(matches!(link(&repo, tip, &req), Linked::UpToDate));
        let why = record_up_to_date(&repo.store(), &req, tip).expect("record");
        assert_eq!(why, None);
        assert_eq!(record(&repo, "wo-1").status, Status::Done);
    }

    /// The branch moved after the merge was computed: the landing says so
    /// and moves nothing, the order still held; the compare-and-swap itself
    /// refuses a branch that is not where it was told.
    #[test]
    fn a_branch_moved_meanwhile_is_not_overwritten() {
        let repo = TestRepo::new();
        let tip = repo.tip();
        let source = repo.work("wo-1", &[("b.txt", "work\n")]);
        let wo = work_order("wo-1", &["b.txt"]);
        repo.dispatch("wo-1", OWNER);
        let req = request(&repo, &wo, source);
        let link = merge_of(link(&repo, tip, &req));
        let moved = repo.on_main(&[("a.txt", "someone else's\n")]);
        let landed = land_one(&repo, tip, &req, &link);
        assert_eq!(landed, Landed::Moved);
        assert_eq!(repo.tip(), moved);
        assert!(record(&repo, "wo-1").held_by(OWNER, 1));

        let cas = move_branch(&repo.ctx, &repo.main, tip, link.sha, "test").expect("cas");
        assert!(
            matches!(cas, Cas::Lost),
            "the swap from a stale tip is lost"
        );
        assert_eq!(repo.tip(), moved);
        let cas = move_branch(&repo.ctx, &repo.main, moved, link.sha, "test").expect("cas");
        assert!(matches!(cas, Cas::Moved));
        assert_eq!(repo.tip(), link.sha);
    }

    /// An order halted (by hand) after its merge was computed is withdrawn
    /// from the landing: nothing moves.
    #[test]
    fn an_order_no_longer_held_is_withdrawn_and_nothing_lands() {
        let repo = TestRepo::new();
        let tip = repo.tip();
        let source = repo.work("wo-1", &[("b.txt", "work\n")]);
        let wo = work_order("wo-1", &["b.txt"]);
        repo.dispatch("wo-1", OWNER);
        let req = request(&repo, &wo, source);
        let link = merge_of(link(&repo, tip, &req));
        repo.change("wo-1", |r| r.halt("by_hand", Vec::new()));
        let landed = land_one(&repo, tip, &req, &link);
        match landed {
            Landed::Withdrawn { index, reason } => {
                assert_eq!(index, 0);
                assert_eq!(reason, "halted while in flight (by_hand)");
            }
            other => panic!("not withdrawn: {other:?}"),
        }
        assert_eq!(repo.tip(), tip);
    }

    /// A change of the user's in the checkout, on a path the merge writes:
    /// the landing is blocked for that order, nothing moves, the edit stays.
    #[test]
    fn a_checkout_that_cannot_follow_blocks_the_landing() {
        let repo = TestRepo::new();
        let tip = repo.tip();
        let source = repo.work("wo-1", &[("b.txt", "work\n")]);
        let wo = work_order("wo-1", &["b.txt"]);
        repo.dispatch("wo-1", OWNER);
        let req = request(&repo, &wo, source);
        let link = merge_of(link(&repo, tip, &req));
        std::fs::write(repo.dir.join("b.txt"), "the user's edit\n").expect("edit");
        let landed = land_one(&repo, tip, &req, &link);
        match landed {
            Landed::Blocked { indexes, why } => {
                assert_eq!(indexes, [0]);
                assert_eq!(why.paths(), ["b.txt"]);
            }
            other => panic!("not blocked: {other:?}"),
        }
        assert_eq!(repo.tip(), tip);
        assert_eq!(read(&repo.dir, "b.txt"), "the user's edit\n");
        assert!(record(&repo, "wo-1").held_by(OWNER, 1));
    }

    /// What a blocked checkout holds back: the orders whose merge writes a
    /// path in the way, or every order when none does or nothing can land.
    #[test]
    fn a_blocked_checkout_holds_back_the_orders_in_its_way() {
        let repo = TestRepo::new();
        let wo = work_order("wo-1", &[]);
        let req = request(&repo, &wo, repo.base);
        let changed = |paths: &[&str]| Link {
            sha: repo.base,
            tree: repo.base,
            onto: repo.base,
            onto_tree: repo.base,
            round_base: repo.base,
            source: repo.base,
            changed: paths
                .iter()
                .map(|p| Changed {
                    path: p.as_bytes().to_vec(),
                    kind: crate::git::diff::Kind::Modified,
                })
                .collect(),
            verified: None,
        };
        let (first, second) = (changed(&["a.txt"]), changed(&["dir/b.txt"]));
        let chain = [(&req, &first), (&req, &second)];
        let dir = repo.dir.clone();
        let held = |why: user_checkout::Blocked| match blocked(&chain, why) {
            Landed::Blocked { indexes, .. } => indexes,
            other => panic!("not blocked: {other:?}"),
        };
        let edited = |paths: &[&str]| user_checkout::Blocked::Edited {
            dir: dir.clone(),
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        };
        assert_eq!(held(edited(&["dir/b.txt"])), [1]);
        assert_eq!(held(edited(&["dir"])), [1], "a file where a folder goes");
        assert_eq!(held(edited(&["a.txt", "dir/b.txt"])), [0, 1]);
        assert_eq!(held(edited(&["elsewhere.txt"])), [0, 1]);
        let locked = user_checkout::Blocked::Locked {
            dir: dir.clone(),
            lock: dir.join(".git/index.lock"),
        };
        assert_eq!(held(locked), [0, 1]);
    }

    /// A branch lock that stays, or an edit that keeps failing, is tried
    /// again a few times in a row, then reported (the lock by its path).
    #[test]
    fn a_swap_that_keeps_failing_is_reported_after_a_few_tries() {
        let into: FullName = "refs/heads/main".try_into().expect("name");
        let lock = std::path::PathBuf::from("/repo/.git/refs/heads/main.lock");
        let mut tries = Tries::default();
        for _ in 1..MAX_LOCKED {
            tries
                .again(Cas::Locked(lock.clone()), &into)
                .expect("again");
        }
        let e = tries
            .again(Cas::Locked(lock.clone()), &into)
            .expect_err("stale");
        assert!(e.to_string().contains("main.lock"), "{e}");
        let failed = || Cas::Failed(InputError::new("no luck").into());
        for _ in 1..MAX_LOCKED {
            tries.again(failed(), &into).expect("again");
        }
        let e = tries.again(failed(), &into).expect_err("given up");
        assert!(e.to_string().contains("no luck"), "{e}");
    }

    #[test]
    fn a_standalone_merge_back_names_the_recorded_attempt_and_base() {
        assert_eq!(standalone(None), (1, None));
        let mut record = Record::new("wo-1", false, 3);
        assert_eq!(standalone(Some(&record)), (1, None));
        let base = ObjectId::null(gix::hash::Kind::Sha1);
        record.dispatch(OWNER, base.to_string(), "dispatch", String::new());
        record.dispatch(OWNER, base.to_string(), "dispatch", String::new());
        assert_eq!(standalone(Some(&record)), (2, Some(base)));
        record.checkpoint_before = Some("not hex".into());
        assert_eq!(standalone(Some(&record)), (2, None));
    }

    #[test]
    fn only_the_holder_of_the_attempt_may_land_it() {
        let mut record = Record::new("wo-1", false, 3);
        record.dispatch(OWNER, "base".into(), "dispatch", String::new());
        assert_eq!(not_held(Some(&record), OWNER, 1), None);
        let why = not_held(Some(&record), "c2", 1).expect("not c2's");
        assert_eq!(
            why,
            "no longer held by this conductor (status in_progress, owner c1, attempt 1)"
        );
        assert!(
            not_held(Some(&record), OWNER, 2).is_some(),
            "another attempt"
        );
        record.halt("by_hand", Vec::new());
        assert_eq!(
            not_held(Some(&record), OWNER, 1).as_deref(),
            Some("halted while in flight (by_hand)")
        );
        assert_eq!(
            not_held(None, OWNER, 1).as_deref(),
            Some("its record is gone")
        );
    }
}

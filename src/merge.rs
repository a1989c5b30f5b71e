//! Merge-back (DESIGN kernel 4): merge `arbiter/<id>` into the integration
//! branch as a two-parent commit computed in the object database, deciding
//! conflicts and drift BEFORE the branch moves (reference defect 6 merged
//! first and rolled back after).
//!
//! Crash-safety protocol, which recovery (`reconcile`) relies on:
//! 1. the WO is `in_progress` with a `checkpoint_before` on the branch (a
//!    round's dispatch records both; a standalone merge-back records them just
//!    before step 3, once the merge is known to be clean);
//! 2. write the merge commit object, with the `Arbiter-WO` and
//!    `Arbiter-Attempt` trailers (unreachable until step 3);
//! 3. move the branch by compare-and-swap from the pre-merge tip; a lost race
//!    is redone on the new tip (merge and drift recomputed), never forced;
//! 4. bring every worktree that has the branch checked out to the new tip;
//! 5. one state transition: WO `done` with `checkpoint_after = <merge>`,
//!    verdict and history, and a note on the merge commit (`git log
//!    --notes=arbiter` shows it).
//!
//! A kill before 3 leaves the branch without the merge (recovery:
//! `needs_rework`); after 3 the first-parent chain from the tip back to
//! `checkpoint_before` holds a merge with the attempt's trailers (recovery:
//! `done`, see [`crate::reconcile::find_merge`]); after 3 but before 4 a
//! worktree whose index matches the old tip, which
//! [`crate::checkout::sync_checked_out`] finishes on the next start. No
//! transition is written between 2 and 3: the branch itself is the checkpoint.

use gix::bstr::ByteSlice;
use gix::refs::transaction::PreviousValue;
use gix::refs::{FullName, Target};
use gix::ObjectId;
use serde_json::json;

use crate::checkout;
use crate::conductor;
use crate::context::Context;
pub use crate::drift::DriftScope;
use crate::drift::{self, Changed};
use crate::error::{Error, GitContext, InputError, Result};
use crate::orders::WorkOrder;
use crate::state::{Status, Store, Verdict};

/// How often a lost compare-and-swap on the integration branch is redone.
const MAX_CAS_RETRIES: u32 = 100;
/// How often in a row the branch's lock may be found taken before it is
/// reported as stale.
const MAX_LOCKED: u32 = 5;

pub const HALT_CONFLICT: &str = "merge_conflict";
/// Untracked files in a checked-out copy of the integration branch are where
/// the merge puts files. The work passed; once they are moved, a standalone
/// `merge-back` lands it (the only halt it lifts by itself).
pub const HALT_CHECKOUT_BLOCKED: &str = "checkout_blocked";
pub const HALT_DRIFT: &str = "undeclared_file_drift";

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
    /// The conductor whose attempt `attempt` this merge settles (a round or
    /// race); `None` for the standalone command. The branch moves only while
    /// the record still says that conductor holds that attempt.
    pub owner: Option<&'a str>,
    /// A standalone `retry` of kept work (`owner` is `None`): an order halted
    /// for one of [`RETRYABLE`] is merged after all, its halt lifted once the
    /// merge is known clean, or halted again with the new reason and paths.
    pub retry: bool,
}

/// The halts `git arbiter retry` re-checks without a rebuild: the work was
/// built and passed its checks; only its merge onto the tip was refused.
pub const RETRYABLE: [&str; 3] = [HALT_DRIFT, HALT_CONFLICT, HALT_CHECKOUT_BLOCKED];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The branch moved to `sha`, a merge of `pre_merge_head` and the source.
    Merged {
        sha: ObjectId,
        pre_merge_head: ObjectId,
        changed: Vec<String>,
    },
    /// The source is already contained in the integration branch: nothing to merge.
    UpToDate { tip: ObjectId },
    /// Unresolved conflicts; the WO is halted, the branch untouched.
    Conflict { paths: Vec<String> },
    /// Changes outside the declared set; the WO is halted, the branch untouched.
    Drift { paths: Vec<String> },
    /// A conductor's merge that untracked files in a checked-out copy of the
    /// integration branch block; the WO is halted [`HALT_CHECKOUT_BLOCKED`],
    /// nothing moved. (A standalone merge-back refuses instead, exit 2.)
    CheckoutBlocked { paths: Vec<String> },
    /// The owner no longer holds the attempt (a `halt` came first, or the
    /// order was taken over): nothing was merged or recorded.
    Withdrawn { reason: String },
}

fn halted_error(id: &str, reason: Option<&str>) -> Error {
    InputError::new(format!(
        "work order '{id}' is halted ({}): it is never merged",
        reason.unwrap_or("no reason recorded")
    ))
    .hint(format!(
        "inspect its branch arbiter/{id}; 'git arbiter clear {id}' lifts the halt"
    ))
    .into()
}

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
/// returned file is dropped. Never call it while holding it: the lock is per
/// open file, so a second take in one process waits forever.
pub fn take_turn(ctx: &Context) -> Result<std::fs::File> {
    ctx.take_turn(MERGE_BACK_TURN)
}

/// The attempt and round base a standalone `merge-back` of an order names:
/// the attempt its record counts (at least 1: the merge commit's trailer and
/// the record must agree, see [`crate::reconcile::find_merge`]) and the tip
/// an earlier, interrupted start recorded.
pub fn standalone(record: Option<&crate::state::Record>) -> (u32, Option<ObjectId>) {
    let attempt = record.map_or(1, |r| r.attempts.max(1));
    let round_base = record
        .and_then(|r| r.checkpoint_before.as_deref())
        .and_then(|s| ObjectId::from_hex(s.as_bytes()).ok());
    (attempt, round_base)
}

impl Outcome {
    /// The word progress lines and JSON use for it.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Merged { .. } => "merged",
            Outcome::UpToDate { .. } => "up_to_date",
            Outcome::Conflict { .. } => HALT_CONFLICT,
            Outcome::Drift { .. } => HALT_DRIFT,
            Outcome::CheckoutBlocked { .. } => HALT_CHECKOUT_BLOCKED,
            Outcome::Withdrawn { .. } => "withdrawn",
        }
    }
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
    /// Merge `req.source` into `req.into` (see the module docs for the protocol).
    pub fn merge_back(&mut self, ctx: &Context, store: &Store, req: &Request) -> Result<Outcome> {
        merge_back_in(ctx, store, req, &mut self.caches)
    }
}

/// One merge-back in a session of its own.
pub fn merge_back(ctx: &Context, store: &Store, req: &Request) -> Result<Outcome> {
    Session::default().merge_back(ctx, store, req)
}

fn merge_back_in(
    ctx: &Context,
    store: &Store,
    req: &Request,
    caches: &mut Option<MergeCaches>,
) -> Result<Outcome> {
    let repo = &ctx.repo;
    let id = req.wo.id.as_str();
    let has_deps = !req.wo.deps.is_empty();
    repo.find_commit(req.source).map_err(|_| {
        InputError::new(format!("{} is not a commit", req.source))
            .hint(format!("the branch arbiter/{id} must point at a commit"))
    })?;
    let options = repo
        .tree_merge_options()
        .git_context("reading merge options")?;
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: None,
        current: Some(req.into.shorten()),
        other: Some("arbiter".into()),
    };
    let mut locked_in_a_row = 0;
    for _ in 0..MAX_CAS_RETRIES {
        let turn = take_turn(ctx)?;
        // A previous merge-back killed between moving the branch and updating
        // a checked-out worktree left it behind: finish that first.
        let worktrees = checkout::worktrees_with_branch(ctx, req.into)?;
        checkout::sync_worktrees(ctx, req.into, &worktrees)?;

        // Whose merge is this? Decided under the turn, so no `halt` or
        // `clear` can come between this check and the record of the outcome.
        let record = store.snapshot()?.record(id)?;
        let needs_start = match req.owner {
            Some(owner) => {
                if let Some(reason) = not_held(record.as_ref(), owner, req.attempt) {
                    return Ok(Outcome::Withdrawn { reason });
                }
                false
            }
            None => {
                let liftable = |reason: Option<&str>| {
                    reason == Some(HALT_CHECKOUT_BLOCKED)
                        || (req.retry && reason.is_some_and(|r| RETRYABLE.contains(&r)))
                };
                if let Some(r) = record
                    .as_ref()
                    .filter(|r| r.halted && !liftable(r.halt_reason.as_deref()))
                {
                    return Err(halted_error(id, r.halt_reason.as_deref()));
                }
                if let Some(r) = record
                    .as_ref()
                    .filter(|r| r.status == Status::InProgress && conductor::owns_live(ctx, r))
                {
                    return Err(being_built(id, r.owner.as_deref().unwrap_or_default()));
                }
                // Recovery needs the WO in progress with a first-parent bound
                // to search back to (see the module docs).
                // A retry lifts the halt in that start, so recovery can finish it.
                record.as_ref().is_none_or(|r| {
                    r.status != Status::InProgress
                        || r.checkpoint_before.is_none()
                        || (req.retry && r.halted)
                })
            }
        };

        let tip = ctx.branch_tip(req.into)?;
        // One merge-base search answers all three questions: already merged?
        // what to merge against? which round base to name?
        let mut outcome =
            merge_commits(ctx, caches, tip, req.source, labels, options.clone()).git_context(
                format!("merging {} into {}", req.source, req.into.shorten()),
            )?;
        let merge_base = outcome.merge_bases.as_ref().map(|b| *b.first());
        if req.source == tip
            || outcome
                .merge_bases
                .as_ref()
                .is_some_and(|b| b.iter().any(|c| *c == req.source))
        {
            store.transact(
                &format!("merge-back {id}: up to date"),
                |txn| -> Result<()> {
                    let mut r = txn.record(id, has_deps)?;
                    if req.retry && r.halted {
                        r.lift_halt();
                    }
                    r.status = Status::Done;
                    r.owner = None;
                    r.merged_into = Some(req.into.shorten().to_string());
                    r.log("merged", Some(format!("up to date at {tip}")));
                    txn.put(r);
                    Ok(())
                },
            )?;
            return Ok(Outcome::UpToDate { tip });
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
            halt(store, req, HALT_CONFLICT, &paths, "merge")?;
            return Ok(Outcome::Conflict { paths });
        }
        // The plain tree editor: gix's checks every entry of each written
        // tree exists (a lookup per entry, ~150 here), but a clean merge only
        // names objects from its input trees or blobs it just wrote.
        let tree = outcome
            .tree_merge
            .tree
            .write(|tree| repo.write_object(tree).map(|id| id.detach()))
            .git_context("writing the merged tree")?;
        let tip_tree = ctx.tree_of(tip)?;
        let changed = drift::changed_paths(repo, tip_tree, tree)?;
        let uncovered = drift::uncovered(req.wo, &req.scope, &changed);
        if !uncovered.is_empty() {
            halt(store, req, HALT_DRIFT, &uncovered, "drift")?;
            return Ok(Outcome::Drift { paths: uncovered });
        }
        // Refuse before anything moves if a checked-out copy has local work
        // or its index cannot be written.
        let mut prepared = Vec::with_capacity(worktrees.len());
        for wt in &worktrees {
            match checkout::preflight(wt, tip_tree, tree, &changed)? {
                Ok(ready) => prepared.push(ready),
                // Specific to this merge: a round goes on with the others.
                Err(blocked) if req.owner.is_some() => {
                    halt(
                        store,
                        req,
                        HALT_CHECKOUT_BLOCKED,
                        &blocked.paths,
                        "checkout",
                    )?;
                    return Ok(Outcome::CheckoutBlocked {
                        paths: blocked.paths,
                    });
                }
                Err(blocked) => return Err(blocked.error),
            }
        }

        // (2) the merge commit, unreachable so far.
        let round_base = req.round_base.or(merge_base).unwrap_or(tip);
        let sha = crate::odb::write_signed_commit(
            repo,
            &message(req.wo, req.attempt, round_base),
            tree,
            [tip, req.source],
        )?;
        crate::crash::point("merge-commit.after");
        // (1) for a standalone merge-back, now that the merge is clean.
        if needs_start {
            store.transact(&format!("merge-back {id}: start"), |txn| -> Result<()> {
                let mut r = txn.record(id, has_deps)?;
                if req.retry && r.halted {
                    r.lift_halt();
                }
                // A fresh start searches back to here only, never into an earlier merge of it.
                if r.status != Status::InProgress || r.checkpoint_before.is_none() {
                    r.checkpoint_before = Some(tip.to_string());
                }
                r.status = Status::InProgress;
                r.owner = None;
                // The record names the attempt the merge commit's trailer names.
                r.attempts = r.attempts.max(req.attempt);
                r.checkpoint_after = None;
                r.log(crate::state::MERGE_START_EVENT, Some(tip.to_string()));
                txn.put(r);
                Ok(())
            })?;
            crate::crash::point("merge-start.after");
        }
        // (3) compare-and-swap from the tip everything above was computed on.
        crate::crash::point("branch-cas.before");
        let moved = crate::refguard::guarded(repo, || {
            repo.reference(
                req.into.as_ref(),
                sha,
                PreviousValue::MustExistAndMatch(Target::Object(tip)),
                format!("arbiter: merge-back {id}"),
            )
        });
        let lock = crate::refguard::blocking_lock(repo, &req.into.as_bstr().to_string());
        match moved {
            Ok(_) => {}
            // gix waited `core.filesRefLockTimeout` already (and reports some
            // lock timeouts as conflicts); a lock that stays is most likely
            // left by a killed writer.
            Err(e) if e.is_retryable() || lock.exists() => {
                locked_in_a_row += 1;
                if locked_in_a_row >= MAX_LOCKED {
                    return Err(branch_locked(req.into, &lock));
                }
                continue;
            }
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e).git_context(format!("moving {}", req.into.as_bstr())),
        }
        crate::crash::point("branch-cas.after");
        // (4) keep checked-out copies in step; finish (5) even if this fails.
        let mut sync_error = None;
        let mut updated = Vec::new();
        for (wt, prepared) in worktrees.iter().zip(prepared) {
            match checkout::apply(wt, tip_tree, tree, &changed, prepared) {
                Ok(()) => updated.extend(wt.workdir().map(std::path::Path::to_owned)),
                Err(e) => {
                    sync_error.get_or_insert(e);
                }
            }
        }
        // (5) done, plus the merge commit's note.
        let changed_text: Vec<String> = changed.iter().map(Changed::display).collect();
        let note = json!({
            "version": 1,
            "kind": "merge",
            "wo": id,
            "into": req.into.shorten().to_string(),
            "title": req.wo.title,
            "attempt": req.attempt,
            "round_base": round_base.to_string(),
            "pre_merge_head": tip.to_string(),
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
        crate::crash::point("merge-recorded.before");
        store.transact(
            &format!("merge-back {id}: merged {sha}"),
            |txn| -> Result<()> {
                let mut r = txn.record(id, has_deps)?;
                if r.halted && r.halt_reason.as_deref() == Some(HALT_CHECKOUT_BLOCKED) {
                    r.lift_halt();
                }
                r.status = Status::Done;
                r.owner = None;
                r.merged_into = Some(req.into.shorten().to_string());
                r.checkpoint_after = Some(sha.to_string());
                r.verdicts.push(Verdict {
                    kind: "drift".into(),
                    command: format!("merge-back --drift-scope {}", req.scope.name()),
                    passed: true,
                    exit_code: None,
                    wall_ms: None,
                    detail: Some(format!(
                        "{} changed paths, all declared",
                        changed_text.len()
                    )),
                });
                r.log("merged", Some(sha.to_string()));
                txn.put(r);
                txn.put_note(sha, note_bytes.clone());
                Ok(())
            },
        )?;
        crate::crash::point("merge-recorded.after");
        drop(turn);
        // As `git merge` does once its checkout is updated; outside the turn,
        // so a slow hook holds up no other merge.
        for dir in &updated {
            checkout::run_post_merge(dir);
        }
        if let Some(e) = sync_error {
            return Err(e);
        }
        return Ok(Outcome::Merged {
            sha,
            pre_merge_head: tip,
            changed: changed_text,
        });
    }
    Err(Error::Git {
        context: format!("merging {id} into {}", req.into.shorten()),
        source: format!(
            "the branch moved under us {MAX_CAS_RETRIES} times in a row; nothing was forced"
        )
        .into(),
    })
}

fn being_built(id: &str, owner: &str) -> Error {
    InputError::new(format!(
        "work order '{id}' is being built by a running round (conductor {owner})"
    ))
    .hint("the round merges it when its checks pass; 'git arbiter stop' ends the round first")
    .into()
}

/// The integration branch's lock file is held for longer than gix waits: name
/// it, since a writer killed between locking and renaming leaves it behind.
fn branch_locked(branch: &FullName, lock: &std::path::Path) -> Error {
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
fn merge_commits<'repo>(
    ctx: &'repo Context,
    slot: &mut Option<MergeCaches>,
    ours: ObjectId,
    theirs: ObjectId,
    labels: gix::merge::blob::builtin_driver::text::Labels<'_>,
    options: gix::merge::tree::Options,
) -> std::result::Result<gix::merge::plumbing::commit::Outcome<'repo>, gix::Error> {
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
        repo,
        // Labels the merge base in conflict markers only; a conflicted merge
        // is halted, never written.
        &mut |id| id.to_hex_with_len(7).to_string(),
        options.into(),
    )
}

/// Terminal HALT with the paths behind it, plus a failed verdict. A retry
/// replaces the halt it re-checked with what it found now.
fn halt(store: &Store, req: &Request, reason: &str, paths: &[String], kind: &str) -> Result<()> {
    let id = req.wo.id.as_str();
    let has_deps = !req.wo.deps.is_empty();
    store.transact(
        &format!("merge-back {id}: halt {reason}"),
        |txn| -> Result<()> {
            let mut r = txn.record(id, has_deps)?;
            if r.halted && !req.retry {
                return Err(halted_error(id, r.halt_reason.as_deref()));
            }
            r.verdicts.push(Verdict {
                kind: kind.into(),
                command: "merge-back".into(),
                passed: false,
                exit_code: None,
                detail: Some(paths.join("\n")),
                wall_ms: None,
            });
            r.owner = None;
            r.halt(reason, paths.to_vec());
            txn.put(r);
            Ok(())
        },
    )
}

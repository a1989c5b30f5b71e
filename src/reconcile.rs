//! Reconcile: one row per work order from the orders on disk and the state in
//! notes, with the crash-recovery rule applied (DESIGN kernel 1).
//!
//! Read-only. A round runs the same computation and then writes the recovered
//! statuses back as one transition.

use gix::bstr::ByteSlice;
use serde::Serialize;

use crate::context::Context;
use crate::error::GitContext;
use crate::orders::Orders;
use crate::state::{Record, Snapshot, Status, Verdict};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub title: String,
    pub status: Status,
    pub terminal: bool,
    pub halt_reason: Option<String>,
    pub attempts: u32,
    pub cap: u32,
    pub deps: Vec<String>,
    pub checkpoint_before: Option<String>,
    pub checkpoint_after: Option<String>,
    pub last_verdicts: Vec<Verdict>,
    /// What recovery concluded for a WO found `in_progress`, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Recovery {
    /// The merge landed: checkpoint_after is an ancestor of the integration
    /// tip, or the tip's first-parent chain holds the attempt's merge commit.
    Done { merge: String },
    /// The build never merged: requeue it.
    NeedsRework,
    /// The ancestry check itself failed: reported, never guessed.
    Error { message: String },
}

/// A row per WO plus the stored records (fresh ones for WOs without a note).
pub struct Table {
    pub rows: Vec<Row>,
    pub records: Vec<Record>,
}

impl Table {
    pub fn row(&self, id: &str) -> Option<&Row> {
        self.rows
            .binary_search_by(|r| r.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.rows[i])
    }
}

/// How many first-parent commits [`find_merge`] reads when nothing bounds it.
const MAX_SCAN: usize = 10_000;

/// Apply the recovery rule to one in-progress record: done if its merge
/// landed on `tip`, otherwise needs_rework; an ancestry check that fails is
/// reported, never guessed.
pub fn recover(ctx: &Context, record: &Record, tip: Option<gix::ObjectId>) -> Recovery {
    let Some(tip) = tip else {
        return Recovery::NeedsRework;
    };
    let parse = |what: &str, hex: &Option<String>| -> Result<Option<gix::ObjectId>, Recovery> {
        hex.as_deref()
            .map(|h| {
                gix::ObjectId::from_hex(h.as_bytes()).map_err(|e| Recovery::Error {
                    message: format!("{what} '{h}' is not an object id: {e}"),
                })
            })
            .transpose()
    };
    let (after, before) = match (
        parse("checkpoint_after", &record.checkpoint_after),
        parse("checkpoint_before", &record.checkpoint_before),
    ) {
        (Ok(after), Ok(before)) => (after, before),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    if let Some(after) = after {
        match ctx.is_ancestor(after, tip) {
            Ok(true) => {
                return Recovery::Done {
                    merge: after.to_string(),
                }
            }
            Ok(false) => {}
            Err(e) => {
                return Recovery::Error {
                    message: e.to_string(),
                }
            }
        }
    }
    match find_merge(ctx, &record.wo, record.attempts, tip, before) {
        Ok(Some(merge)) => Recovery::Done {
            merge: merge.to_string(),
        },
        Ok(None) => Recovery::NeedsRework,
        Err(e) => Recovery::Error {
            message: e.to_string(),
        },
    }
}

/// The merge commit of work order `id`, attempt `attempt`, on the
/// first-parent chain from `tip` back to `since` (exclusive), recognised by
/// the trailers merge-back writes. Only merge-back puts commits with those
/// trailers on an integration branch's first-parent chain (builders' commits
/// arrive as second parents), so this is how a merge whose branch move landed
/// but whose state transition did not (a killed process) is found.
pub fn find_merge(
    ctx: &Context,
    id: &str,
    attempt: u32,
    tip: gix::ObjectId,
    since: Option<gix::ObjectId>,
) -> crate::Result<Option<gix::ObjectId>> {
    let wo_line = format!("Arbiter-WO: {id}");
    let attempt_line = format!("Arbiter-Attempt: {attempt}");
    let mut next = Some(tip);
    for _ in 0..MAX_SCAN {
        let Some(commit_id) = next.filter(|c| Some(*c) != since) else {
            break;
        };
        let commit = ctx
            .repo
            .find_commit(commit_id)
            .git_context(format!("reading commit {commit_id}"))?;
        let mut parents = commit.parent_ids();
        next = parents.next().map(|p| p.detach());
        if parents.next().is_none() {
            continue;
        }
        let message = commit.message_raw_sloppy();
        let has = |line: &str| message.lines().any(|l| l == line.as_bytes());
        if has(&wo_line) && has(&attempt_line) {
            return Ok(Some(commit_id));
        }
    }
    Ok(None)
}

/// Build the table. `tip` is the integration branch's commit (None: no commits yet).
/// `in_flight` says whether a WO is being worked on by a live conductor right
/// now; such a WO is shown as it is, not recovered.
pub fn table(
    ctx: &Context,
    orders: &Orders,
    snapshot: &mut Snapshot<'_>,
    tip: Option<gix::ObjectId>,
    default_cap: u32,
    in_flight: &dyn Fn(&Record) -> bool,
) -> Result<Table, crate::state::Error> {
    let mut rows = Vec::with_capacity(orders.len());
    let mut records = Vec::with_capacity(orders.len());
    let ids: Vec<&str> = orders.iter().map(|wo| wo.id.as_str()).collect();
    let stored = snapshot.records(&ids)?;
    for (wo, record) in orders.iter().zip(stored) {
        let record =
            record.unwrap_or_else(|| Record::new(&wo.id, !wo.deps.is_empty(), default_cap));
        let mut status = record.status;
        let mut recovery = None;
        if status == Status::InProgress && !record.halted && !in_flight(&record) {
            let outcome = recover(ctx, &record, tip);
            match outcome {
                Recovery::Done { .. } => status = Status::Done,
                Recovery::NeedsRework => status = Status::NeedsRework,
                Recovery::Error { .. } => {}
            }
            recovery = Some(outcome);
        }
        rows.push(Row {
            id: wo.id.clone(),
            title: wo.title.clone(),
            status,
            terminal: record.halted,
            halt_reason: record.halt_reason.clone(),
            attempts: record.attempts,
            cap: record.cap,
            deps: wo.deps.clone(),
            checkpoint_before: record.checkpoint_before.clone(),
            checkpoint_after: record.checkpoint_after.clone(),
            last_verdicts: record.verdicts.clone(),
            recovery,
        });
        records.push(record);
    }
    Ok(Table { rows, records })
}

/// The table as `status` and `batch` show it: against the tip of the
/// integration branch (`into`, else the current branch), with a live
/// conductor's in-progress work shown as it is, never "recovered".
pub fn current(ctx: &Context, orders: &Orders, into: Option<&str>) -> crate::Result<Table> {
    let branch = ctx.integration_branch(into)?;
    let tip = ctx.branch_tip(&branch).ok();
    let store = crate::state::Store::new(&ctx.repo, ctx.retry_cap()?);
    let mut snapshot = store.snapshot()?;
    let table = table(
        ctx,
        orders,
        &mut snapshot,
        tip,
        store.default_cap,
        &|record| crate::conductor::owns_live(ctx, record),
    )?;
    // The process usually ends right after: freeing the notes tree piece by piece would only delay it.
    std::mem::forget(snapshot);
    Ok(table)
}

//! The drift check of merge-back: every path a merge
//! changes on the integration branch must be covered by the work order's
//! declared set ([`WorkOrder::covers`]: an order without declared files
//! covers every path, a glob only the files it matches).
//!
//! Paths are taken from a tree-to-tree diff of the pre-merge tip and the
//! merge result with rename detection OFF, so a rename counts as a deletion of
//! its source plus an addition of its destination and both must be declared.
//! Every non-tree entry counts: blobs (content or mode changes, including the
//! executable bit), symlinks and gitlinks (submodules). Directories themselves
//! never count; the files in them do.

use gix::bstr::ByteSlice;
use gix::ObjectId;

use crate::git::diff::Changed;
use crate::state::context::Context;
use crate::state::orders::{Orders, WorkOrder};
use crate::state::scope::Entry;
use crate::state::{Status, Store};
use crate::sys::error::Result;

/// Which declared set the changed paths are checked against.
#[derive(Debug, Clone)]
pub enum DriftScope {
    /// The work order's own declared set (the default): a path another order
    /// of the batch declares is still drift for this one.
    Own,
    /// A union of declared sets, e.g. the whole batch's (`--drift-scope batch`).
    Union(Vec<Entry>),
}

impl DriftScope {
    pub fn name(&self) -> &'static str {
        match self {
            DriftScope::Own => "own",
            DriftScope::Union(_) => "batch",
        }
    }

    /// Is `path` covered? A path that is not valid UTF-8 can match no declared
    /// entry (declared entries are text), so it is never covered.
    pub fn covers(&self, wo: &WorkOrder, path: &[u8]) -> bool {
        let Ok(path) = path.to_str() else {
            return false;
        };
        match self {
            DriftScope::Own => wo.covers(path),
            DriftScope::Union(entries) => wo.covers(path) || entries.iter().any(|e| e.covers(path)),
        }
    }
}

/// A changed path as people read it next to the declared set: quoted as git
/// quotes paths (`core.quotePath`, its default), so names that differ only
/// invisibly (NFC `é` vs NFD `e` + U+0301, control characters) differ on
/// screen, while plain ASCII stays as it is. When the path matches an entry
/// of `wo` only in the other Unicode normalisation, that entry is named too.
pub fn describe(path: &str, wo: Option<&WorkOrder>) -> String {
    let mut text = quote(path);
    if let Some(declared) = wo.and_then(|wo| declared_twin(wo, path)) {
        text.push_str(&format!(
            " (declared as {}, the same name in another Unicode normalisation)",
            quote(declared)
        ));
    }
    text
}

fn quote(path: &str) -> String {
    gix::quote::ansi_c::quote(path.as_bytes().as_bstr())
        .to_str_lossy()
        .into_owned()
}

/// The entry of `wo` that covers `path` in its other normalisation only.
fn declared_twin<'a>(wo: &'a WorkOrder, path: &str) -> Option<&'a str> {
    use gix::utils::str::{decompose, precompose};
    [precompose(path.into()), decompose(path.into())]
        .into_iter()
        .filter(|other| other != path)
        .find_map(|other| wo.files.iter().find(|e| e.covers(&other)))
        .map(Entry::as_str)
}

/// The changed paths `scope` does not cover, as text, sorted.
pub fn uncovered(wo: &WorkOrder, scope: &DriftScope, changed: &[Changed]) -> Vec<String> {
    changed
        .iter()
        .filter(|c| !scope.covers(wo, &c.path))
        .map(Changed::display)
        .collect()
}

/// The `batch` drift scope for a merge-back outside a round: the declared
/// sets of the batch `git arbiter batch` would select right now (with work
/// orders `in_progress` counted as eligible, since a round's batch is in
/// progress while it merges). The work order's own set is always part of the
/// union.
pub fn batch_union(
    ctx: &Context,
    orders: &Orders,
    store: &Store,
    tip: Option<ObjectId>,
    max: usize,
) -> Result<Vec<Entry>> {
    let mut snapshot = store.snapshot()?;
    let table =
        crate::run::reconcile::table(ctx, orders, &mut snapshot, tip, store.default_cap, &|_| {
            true
        })?;
    let rows: Vec<_> = table
        .rows
        .into_iter()
        .map(|mut r| {
            if r.status == Status::InProgress {
                r.status = Status::Ready;
            }
            r
        })
        .collect();
    let batch = crate::run::batch::select(orders, &rows, max);
    let mut entries = Vec::new();
    for picked in &batch.batch {
        if let Some(wo) = orders.get(&picked.wo_id) {
            entries.extend(wo.files.iter().cloned());
        }
    }
    Ok(entries)
}

//! Reconcile: one row per work order from the orders on disk and the state in
//! notes, with the crash-recovery rule applied.
//!
//! Read-only. A round runs the same computation and then writes the recovered
//! statuses back as one transition.

use serde::Serialize;

use crate::state::context::Context;
use crate::state::orders::Orders;
use crate::state::{Record, Snapshot, Status, Verdict};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    pub title: String,
    /// `status`, or `halted`: the state word every command's JSON uses.
    pub state: &'static str,
    pub status: Status,
    #[serde(rename = "halted")]
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
    /// The tip of `arbiter/<id>` when it holds work made by hand for an order
    /// never dispatched ([`crate::run::worktree::hand_made_work`]): no round builds
    /// the order (that would replace the branch) until it is merged or removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hand_made_branch: Option<String>,
    /// The conductor building it, while it is in progress: its declared
    /// files are claimed until it settles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
    /// With a remote (`round --remote`): the machine that conductor runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed_on: Option<String>,
    /// The branch a `done` order was merged into, when its record says
    /// (records written before this was kept do not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_into: Option<String>,
    /// What keeps a `verified` order's passed work from landing, as last seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// In a shallow clone: the commit its history begins at, when the order
    /// has no record and its file is older than that commit, so it may have
    /// landed before it, which this clone cannot tell. No round builds it
    /// (that could land it twice) until a deeper history or the notes say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub may_have_landed_before: Option<String>,
    /// Why its last attempt failed, while it is to be built again or
    /// halted: the cause behind `retry_cap_exhausted`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<LastFailure>,
    /// What its attempts reported they cost (`cost_usd`, `tokens`,
    /// `attempts_without_cost`), when any reported.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub spent: Option<crate::state::cost::Spent>,
}

/// An order's last failed attempt, the reason recorded for it and its log.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LastFailure {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// "build exit 1", "setup 'npm ci' exit 1", "timeout after 10s", …
    pub reason: String,
    /// The attempt's log, when it is still there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

impl LastFailure {
    /// The last failure of `record`, if it has one.
    pub fn of(ctx: &Context, record: &Record) -> Option<LastFailure> {
        let event = record.last_failure()?;
        let attempt = event.attempt;
        // A gate on the merged result wrote to the conductor's verify log.
        let log = match event.event.as_str() {
            crate::state::MERGED_GATE_FAILED_EVENT => {
                record.last_verify_log().map(std::path::PathBuf::from)
            }
            _ => attempt.map(|n| {
                crate::git::layout::logs(&ctx.repo, &record.wo).join(format!("attempt-{n}.log"))
            }),
        };
        Some(LastFailure {
            attempt,
            reason: event.detail.clone().unwrap_or_default(),
            log: log.filter(|p| p.exists()).map(|p| p.display().to_string()),
        })
    }
}

impl std::fmt::Display for LastFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.attempt {
            Some(n) => write!(f, "attempt {n} failed: {}", self.reason),
            None => write!(f, "failed: {}", self.reason),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Recovery {
    /// The merge landed: checkpoint_after is an ancestor of the integration
    /// tip, or the tip's first-parent chain holds the attempt's merge commit.
    Done { merge: String },
    /// The build never merged: requeue it.
    NeedsRework,
    /// The build passed and entered the merge queue, but never landed: its
    /// work waits to land (`verified`), never rebuilt.
    Waiting,
    /// No record (a fresh clone: `git clone` does not fetch `refs/notes/*`),
    /// but the integration branch holds its merge: it landed, so it is
    /// recorded `done` instead of being built and merged a second time.
    Reconstructed { merge: String },
    /// A standalone `merge-back` of an earlier version started and never
    /// finished (see [`Record::merge_back_pending`]) and its branch still
    /// holds the work: it waits to land, not rebuilt, its branch kept.
    MergeBackPending { source: String },
    /// The ancestry check itself failed: reported, never guessed.
    Error { message: String },
}

/// A row per WO plus the stored records (fresh ones for WOs without a note).
pub struct Table {
    pub rows: Vec<Row>,
    pub records: Vec<Record>,
}

/// The rows of settled orders (done, after at least one attempt), by
/// order, with the note blob they were made from: such a row depends on
/// the record and the order alone, so a process that decides a dispatch
/// at a time (a [`crate::sys::caches::Caches`] entry) reads and makes it
/// once per version of the record, not once per dispatch for every order
/// ever done ([`Reads::Open`]).
#[derive(Default)]
pub struct SettledRows(std::sync::Mutex<std::collections::HashMap<String, Settled>>);

/// A settled order's row, and the note blob it was made from (the row
/// boxed: a map of 10,000 rows inline held 17 MB at its growth).
type Settled = (gix::ObjectId, Box<Row>);

/// A row, once made (boxed: a table of thousands of orders holds one slot
/// per order, most of them empty).
type Made = Box<Row>;

impl SettledRows {
    /// Is `record` settled: its row the same whatever the branches and
    /// conductors do?
    fn settles(record: &Record, row: &Row) -> bool {
        record.status == Status::Done
            && row.status == Status::Done
            && record.attempts > 0
            && !record.halted
            && row.recovery.is_none()
    }
}

/// Why recovered work waits to land.
const STOPPED_BEFORE_LANDING: &str = "its conductor stopped before it landed";

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
    let after = match parse("checkpoint_after", &record.checkpoint_after) {
        Ok(after) => after,
        Err(e) => return e,
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
    match find_merge(ctx, &record.wo, tip) {
        Ok(Some(merge)) => Recovery::Done {
            merge: merge.to_string(),
        },
        Ok(None) if record.landing.is_some() => Recovery::Waiting,
        Ok(None) if record.merge_back_pending() => {
            match ctx
                .repo
                .try_find_reference(crate::run::worktree::branch_ref(&record.wo).as_str())
                .ok()
                .flatten()
                .and_then(|mut r| r.peel_to_id().ok())
            {
                Some(source) => Recovery::MergeBackPending {
                    source: source.to_string(),
                },
                None => Recovery::NeedsRework,
            }
        }
        Ok(None) => Recovery::NeedsRework,
        Err(e) => Recovery::Error {
            message: e.to_string(),
        },
    }
}

/// The merge commit of work order `id` on the first-parent chain from `tip`
/// (see [`crate::git::history`]): how a merge whose branch move landed but whose
/// state transition did not (a killed process) is found, and how a record
/// rolled back or edited is told it landed. Any merge of the order counts,
/// whatever attempt number it carries: it landed, so merging again would
/// land it twice.
pub fn find_merge(
    ctx: &Context,
    id: &str,
    tip: gix::ObjectId,
) -> crate::Result<Option<gix::ObjectId>> {
    Ok(ctx.landed(tip)?.merge_of(id))
}

/// The newest merge of each work order in `wanted` on the first-parent
/// chain from `tip`: what the integration branch itself says landed.
pub fn landed(
    ctx: &Context,
    tip: gix::ObjectId,
    wanted: &std::collections::BTreeSet<&str>,
) -> crate::Result<std::collections::BTreeMap<String, gix::ObjectId>> {
    let history = ctx.landed(tip)?;
    Ok(wanted
        .iter()
        .filter_map(|id| Some(((*id).to_owned(), history.merge_of(id)?)))
        .collect())
}

/// The commit a shallow clone's history of `tip` begins at, when order `wo`
/// (with no record) may have landed before it: see
/// [`Row::may_have_landed_before`].
pub fn may_have_landed_before(
    ctx: &Context,
    wo: &crate::state::orders::WorkOrder,
    tip: gix::ObjectId,
) -> crate::Result<Option<gix::ObjectId>> {
    if ctx.landed(tip)?.merge_of(&wo.id).is_some() {
        return Ok(None);
    }
    Ok(ShallowStart::of(ctx, tip)?
        .filter(|start| start.may_predate(ctx, wo))
        .map(|start| start.commit))
}

/// Where a shallow clone's history of the integration branch begins.
struct ShallowStart {
    commit: gix::ObjectId,
    tree: gix::ObjectId,
}

impl ShallowStart {
    /// `None` unless the first-parent chain from `tip` ends at a commit
    /// whose parent the repository does not have.
    fn of(ctx: &Context, tip: gix::ObjectId) -> crate::Result<Option<ShallowStart>> {
        let Some(commit) = ctx.landed(tip)?.shallow_boundary() else {
            return Ok(None);
        };
        let tree = ctx.tree_of(commit)?;
        Ok(Some(ShallowStart { commit, tree }))
    }

    /// Could `wo` have landed before the history begins? Only if its file
    /// was there already: an order first written later was run later.
    /// Unknown (so yes) for an order file outside the worktree.
    fn may_predate(&self, ctx: &Context, wo: &crate::state::orders::WorkOrder) -> bool {
        let Some(rel) = ctx.workdir.as_deref().and_then(|top| {
            let path = std::fs::canonicalize(&wo.path).ok()?;
            let top = std::fs::canonicalize(top).ok()?;
            path.strip_prefix(top).ok().map(std::path::Path::to_owned)
        }) else {
            return true;
        };
        let found = ctx
            .repo
            .find_tree(self.tree)
            .ok()
            .map(|tree| tree.lookup_entry_by_path(&rel));
        !matches!(found, Some(Ok(None)))
    }
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
    table_of(
        ctx,
        orders,
        snapshot,
        tip,
        default_cap,
        in_flight,
        Reads::Every,
    )
}

/// The rows of [`table`], without the records; `reads` says which are read.
pub fn rows(
    ctx: &Context,
    orders: &Orders,
    snapshot: &mut Snapshot<'_>,
    tip: Option<gix::ObjectId>,
    default_cap: u32,
    in_flight: &dyn Fn(&Record) -> bool,
    reads: Reads,
) -> Result<Vec<Row>, crate::state::Error> {
    Ok(table_of(ctx, orders, snapshot, tip, default_cap, in_flight, reads)?.rows)
}

/// Which records a table reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Every order's: the whole table, records beside the rows.
    Every,
    /// Not those of orders settled earlier in this process
    /// ([`SettledRows`]): their rows come from memory, their records are
    /// left out. Recovery decides on rows alone; reading every record for
    /// it (every few seconds in a run) held a copy of each at once (30 MB
    /// at 10,000 orders).
    Unsettled,
    /// As `Unsettled`, and settled orders no order depends on have no row:
    /// the rows a dispatch decides on. Such a row changes nothing a
    /// dispatch decides (it is not eligible, claims nothing, waits for
    /// nothing), and leaving it out makes a dispatch cost the open orders,
    /// not every order ever done. Rows stay sorted by id.
    Open,
}

fn table_of(
    ctx: &Context,
    orders: &Orders,
    snapshot: &mut Snapshot<'_>,
    tip: Option<gix::ObjectId>,
    default_cap: u32,
    in_flight: &dyn Fn(&Record) -> bool,
    reads: Reads,
) -> Result<Table, crate::state::Error> {
    let mut rows = Vec::with_capacity(orders.len());
    let mut records = Vec::with_capacity(orders.len());
    let ids: Vec<&str> = orders.iter().map(|wo| wo.id.as_str()).collect();
    // A process that reads again and again takes the rows of settled
    // orders whose note did not change from memory; only the others are read.
    let settled = snapshot
        .remembers()
        .then(|| ctx.caches.get::<SettledRows>());
    // A whole table (at the end of a run) reads every record.
    let reuse = settled.as_ref().filter(|_| reads != Reads::Every);
    let blobs = match &settled {
        Some(_) => snapshot.blobs(&ids)?,
        None => Vec::new(),
    };
    // Orders some order depends on: their rows say whether it may run.
    let depended_on: std::collections::HashSet<&str> = if reads != Reads::Open {
        Default::default()
    } else {
        orders
            .iter()
            .flat_map(|wo| wo.deps.iter().map(String::as_str))
            .collect()
    };
    let mut kept: Vec<Option<Option<Made>>> = vec![None; ids.len()];
    if let Some(settled) = reuse {
        let known = settled
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for ((slot, wo), blob) in kept.iter_mut().zip(orders.iter()).zip(&blobs) {
            *slot = known
                .get(&wo.id)
                .filter(|(at, row)| {
                    Some(*at) == *blob && row.title == wo.title && row.deps == wo.deps
                })
                .map(|(_, row)| {
                    (reads == Reads::Unsettled || depended_on.contains(wo.id.as_str()))
                        .then(|| row.clone())
                });
        }
    }
    let unread: Vec<&str> = ids
        .iter()
        .zip(&kept)
        .filter(|(_, kept)| kept.is_none())
        .map(|(id, _)| *id)
        .collect();
    let mut stored = snapshot.records(&unread)?.into_iter();
    // Every order not done by its record is looked up in the branch's
    // history: what landed is done, whatever the notes say.
    let stored: Vec<Option<Record>> = kept
        .iter()
        .map(|kept| match kept {
            Some(_) => None,
            None => stored.next().flatten(),
        })
        .collect();
    let open: std::collections::BTreeSet<&str> = ids
        .iter()
        .zip(&stored)
        .zip(&kept)
        .filter(|((_, r), kept)| {
            kept.is_none() && r.as_ref().is_none_or(|r| r.status != Status::Done)
        })
        .map(|((id, _), _)| *id)
        .collect();
    let branch = BranchView::read(ctx, tip, &open)?;
    for (i, ((wo, record), kept)) in orders.iter().zip(stored).zip(kept).enumerate() {
        // Rows from memory: no record goes with them.
        if let Some(kept) = kept {
            rows.extend(kept.map(|row| *row));
            continue;
        }
        let marks = branch.marks(ctx, wo, record.as_ref())?;
        let (record, standing) = branch.standing(ctx, wo, record, default_cap, in_flight);
        let made = row(ctx, wo, &record, standing, marks);
        if let (Some(settled), Some(blob), true) = (
            &settled,
            blobs.get(i).copied().flatten(),
            SettledRows::settles(&record, &made),
        ) {
            settled
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(wo.id.clone(), (blob, Box::new(made.clone())));
        }
        rows.push(made);
        records.push(record);
    }
    Ok(Table { rows, records })
}

/// What the integration branch (at `tip`) and the `arbiter/*` branches say
/// about the orders, read once for the whole table.
struct BranchView {
    tip: Option<gix::ObjectId>,
    /// The newest merge on the branch of each order not done by its record.
    landed: std::collections::BTreeMap<String, gix::ObjectId>,
    /// Where a shallow clone's history begins, when an order is open.
    history_start: Option<ShallowStart>,
    tips: crate::run::worktree::BranchTips,
}

/// How an order stands once the recovery rule applied to its record.
struct Standing {
    status: Status,
    terminal: bool,
    recovery: Option<Recovery>,
}

/// What a row says beside the record: work made by hand on the order's
/// branch, and whether it may have landed before a shallow history begins.
struct Marks {
    hand_made_branch: Option<String>,
    may_have_landed_before: Option<String>,
}

impl BranchView {
    /// Read what the branches say about the orders `open` (not done by
    /// their records).
    fn read(
        ctx: &Context,
        tip: Option<gix::ObjectId>,
        open: &std::collections::BTreeSet<&str>,
    ) -> Result<BranchView, crate::state::Error> {
        // With every order done by its record, nothing is looked up: the
        // history is not walked.
        let landed = match tip {
            Some(tip) if !open.is_empty() => landed(ctx, tip, open).map_err(|e| {
                crate::state::Error::Git(format!("looking for landed work orders: {e}").into())
            })?,
            _ => Default::default(),
        };
        let history_start = match tip {
            Some(tip) if !open.is_empty() => ShallowStart::of(ctx, tip).map_err(|e| {
                crate::state::Error::Git(format!("reading where the history begins: {e}").into())
            })?,
            _ => None,
        };
        let tips = crate::run::worktree::branch_tips(ctx).map_err(|e| {
            crate::state::Error::Git(format!("listing the arbiter branches: {e}").into())
        })?;
        Ok(BranchView {
            tip,
            landed,
            history_start,
            tips,
        })
    }

    /// The marks of order `wo`, whose stored record is `record`.
    fn marks(
        &self,
        ctx: &Context,
        wo: &crate::state::orders::WorkOrder,
        record: Option<&Record>,
    ) -> Result<Marks, crate::state::Error> {
        let hand_made_branch =
            crate::run::worktree::hand_made_work(ctx, &wo.id, record, self.tip, &self.tips)
                .map_err(|e| {
                    crate::state::Error::Git(format!("reading the branch of {}: {e}", wo.id).into())
                })?
                .map(|sha| sha.to_string());
        let may_have_landed_before = self
            .history_start
            .as_ref()
            .filter(|start| {
                record.is_none() && !self.landed.contains_key(&wo.id) && start.may_predate(ctx, wo)
            })
            .map(|start| start.commit.to_string());
        Ok(Marks {
            hand_made_branch,
            may_have_landed_before,
        })
    }

    /// The recovery rule for order `wo` and its stored `record` (a fresh
    /// one, with `default_cap` attempts, when it has none): its merge on the
    /// branch makes it done, unless a live conductor holds it (`in_flight`)
    /// and records its own landing; an attempt in progress that nobody
    /// holds is recovered ([`recover`]). The record, and how it stands.
    fn standing(
        &self,
        ctx: &Context,
        wo: &crate::state::orders::WorkOrder,
        record: Option<Record>,
        default_cap: u32,
        in_flight: &dyn Fn(&Record) -> bool,
    ) -> (Record, Standing) {
        let mut recovery = None;
        let record = record.unwrap_or_else(|| {
            let mut fresh = Record::new(&wo.id, !wo.deps.is_empty(), default_cap);
            if let Some(merge) = self.landed.get(&wo.id) {
                fresh.status = Status::Done;
                fresh.checkpoint_after = Some(merge.to_string());
                recovery = Some(Recovery::Reconstructed {
                    merge: merge.to_string(),
                });
            }
            fresh
        });
        let mut status = record.status;
        let mut terminal = record.halted;
        let held = status == Status::InProgress && in_flight(&record);
        if let Some(merge) = self.landed.get(&wo.id).filter(|_| recovery.is_none()) {
            // A live conductor records its own landing; any other record
            // that is not done is behind the branch.
            if status != Status::Done && !held {
                status = Status::Done;
                terminal = false;
                recovery = Some(Recovery::Done {
                    merge: merge.to_string(),
                });
            }
        } else if status == Status::InProgress && !record.halted && !held {
            let outcome = recover(ctx, &record, self.tip);
            match outcome {
                Recovery::Done { .. } => status = Status::Done,
                Recovery::NeedsRework => status = Status::NeedsRework,
                Recovery::Waiting | Recovery::MergeBackPending { .. } => status = Status::Verified,
                Recovery::Error { .. } | Recovery::Reconstructed { .. } => {}
            }
            recovery = Some(outcome);
        }
        let standing = Standing {
            status,
            terminal,
            recovery,
        };
        (record, standing)
    }
}

/// The row of order `wo`: its `record` as it stands after recovery, and
/// the marks beside it.
fn row(
    ctx: &Context,
    wo: &crate::state::orders::WorkOrder,
    record: &Record,
    standing: Standing,
    marks: Marks,
) -> Row {
    let Standing {
        status,
        terminal,
        recovery,
    } = standing;
    Row {
        id: wo.id.clone(),
        title: wo.title.clone(),
        state: status.state(terminal),
        status,
        terminal,
        halt_reason: record.halt_reason.clone().filter(|_| terminal),
        attempts: record.attempts,
        cap: record.cap,
        deps: wo.deps.clone(),
        checkpoint_before: record.checkpoint_before.clone(),
        checkpoint_after: record.checkpoint_after.clone(),
        last_verdicts: record.verdicts.clone(),
        recovery,
        hand_made_branch: marks.hand_made_branch,
        claimed_by: record
            .owner
            .clone()
            .filter(|_| status == Status::InProgress && !record.halted),
        claimed_on: record
            .lease
            .as_ref()
            .map(|lease| lease.machine.clone())
            .filter(|_| status == Status::InProgress && !record.halted),
        merged_into: record
            .merged_into
            .clone()
            .filter(|_| status == Status::Done),
        waiting: record
            .landing
            .as_ref()
            .filter(|_| status == Status::Verified)
            .map(|l| {
                l.blocked
                    .clone()
                    .unwrap_or_else(|| STOPPED_BEFORE_LANDING.to_owned())
            }),
        may_have_landed_before: marks.may_have_landed_before,
        last_failure: (terminal || status == Status::NeedsRework)
            .then(|| LastFailure::of(ctx, record))
            .flatten(),
        spent: crate::state::cost::Spent::of_record(record).shown(),
    }
}

/// The table as `status` and `batch` show it: against the tip of the
/// integration branch (`into`, else the current branch, else a detached
/// HEAD's commit, see [`Context::view_tip`]), with a live conductor's
/// in-progress work shown as it is, never "recovered".
pub fn current(ctx: &Context, orders: &Orders, into: Option<&str>) -> crate::Result<Table> {
    let tip = ctx.view_tip(into)?;
    let store = ctx.store()?;
    let mut snapshot = store.snapshot()?;
    let table = table(
        ctx,
        orders,
        &mut snapshot,
        tip,
        store.default_cap,
        &|record| crate::run::conductor::owns_live(ctx, record),
    )?;
    Ok(table)
}

/// What recovery writes for an order whose row concluded `recovery`, given
/// its record as stored now (`stored`; `fresh` makes one for an order with
/// none): the record to put and what it became, or `None` to leave it. The
/// record is read again in the transition because it may have moved on
/// since the rows were read: anyone's record wins over a reconstruction,
/// and what a live conductor holds (`live`) is its own to record.
fn conclude(
    recovery: &Recovery,
    stored: Option<Record>,
    fresh: impl FnOnce() -> Record,
    live: &dyn Fn(&Record) -> bool,
) -> Option<(Record, &'static str)> {
    if let Recovery::Reconstructed { merge } = recovery {
        // Only while there is still no record: anyone's record wins.
        if stored.is_some() {
            return None;
        }
        let mut record = fresh();
        record.mark_done("reconstructed_done", merge.clone());
        return Some((record, "reconstructed_done"));
    }
    let mut record = stored?;
    // Its merge is on the branch: done, whatever the record said (rolled
    // back, edited, halted), unless a live conductor holds it and records
    // it itself.
    if let Recovery::Done { merge } = recovery {
        let held = record.status == Status::InProgress && live(&record);
        if record.status == Status::Done || held {
            return None;
        }
        if record.halted {
            record.lift_halt();
        }
        record.mark_done("recovered_done", merge.clone());
        return Some((record, "done"));
    }
    // Another conductor may have moved it on since we looked.
    if record.status != Status::InProgress || record.halted || live(&record) {
        return None;
    }
    let outcome = match recovery {
        Recovery::Done { .. } | Recovery::Reconstructed { .. } => return None,
        Recovery::NeedsRework => {
            record.requeue_for_rework();
            "needs_rework"
        }
        Recovery::Waiting => {
            record.wait_to_land(None, STOPPED_BEFORE_LANDING.into());
            "verified"
        }
        // A killed standalone merge-back: its branch is someone's
        // finished work, which lands through the merge queue.
        Recovery::MergeBackPending { source } => {
            record.queue_to_land(source.clone());
            record.wait_to_land(None, STOPPED_BEFORE_LANDING.into());
            "verified"
        }
        Recovery::Error { message } => {
            record.halt_unowned("recovery_failed", vec![message.clone()]);
            "halted"
        }
    };
    Some((record, outcome))
}

/// A work order recovery changed, and to what (`done`, `needs_rework`, …).
pub type Recovered = (String, &'static str);

/// Apply the recovery rule to every work order not held by a live conductor
/// (other than `me`) and write what it concluded back as one transition:
/// `done` for a merge found on the branch (also for orders without a record,
/// e.g. in a fresh clone), `needs_rework` for a build that never merged. The
/// caller holds the merge-back turn. Returns the rows after recovery and one
/// `(id, outcome)` per order changed.
pub fn recover_and_record(
    ctx: &Context,
    orders: &Orders,
    store: &crate::state::Store<'_>,
    tip: gix::ObjectId,
    me: &str,
) -> crate::Result<(Vec<Row>, Vec<Recovered>)> {
    let live = |r: &Record| crate::run::conductor::owns_live(ctx, r);
    let mut snapshot = store.snapshot()?;
    let found = rows(
        ctx,
        orders,
        &mut snapshot,
        Some(tip),
        store.default_cap,
        &|r| r.owner.as_deref() != Some(me) && live(r),
        Reads::Unsettled,
    )?;
    let changes: Vec<(String, Recovery)> = found
        .iter()
        .filter_map(|r| r.recovery.clone().map(|rec| (r.id.clone(), rec)))
        .collect();
    if changes.is_empty() {
        return Ok((found, Vec::new()));
    }
    let written = store.transact("recover", |txn| -> crate::Result<Vec<Recovered>> {
        let mut written = Vec::new();
        for (id, recovery) in &changes {
            let stored = txn.stored(id)?;
            let has_deps = || orders.get(id).is_some_and(|wo| !wo.deps.is_empty());
            let fresh = || Record::new(id, has_deps(), store.default_cap);
            if let Some((record, outcome)) = conclude(recovery, stored, fresh, &live) {
                txn.put(record);
                written.push((id.clone(), outcome));
            }
        }
        Ok(written)
    })?;
    let mut snapshot = store.snapshot()?;
    let after = rows(
        ctx,
        orders,
        &mut snapshot,
        Some(tip),
        store.default_cap,
        &live,
        Reads::Unsettled,
    )?;
    Ok((after, written))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use gix::ObjectId;

    use super::*;
    use crate::state::orders::WorkOrder;
    use crate::testutil::{commit_files, git, rev, work_order, TestRepo};

    /// A conductor no process holds.
    const DEAD: &str = "1-1";

    /// Orders `ids`, none declaring files.
    fn orders(ids: &[&str]) -> Orders {
        let list = ids.iter().map(|id| work_order(id, &[])).collect();
        Orders::from_list("orders".into(), list).expect("orders")
    }

    /// Order `id`'s work merged into `main` by hand as git-arbiter merges
    /// it: a merge with its trailer on the first-parent chain. The merge.
    fn land_by_hand(repo: &TestRepo, id: &str) -> ObjectId {
        repo.work(id, &[(&format!("{id}.txt"), "work\n")]);
        let message = format!("Merge {id}: t\n\nArbiter-WO: {id}\nArbiter-Attempt: 1\n");
        let branch = format!("arbiter/{id}");
        git(
            &repo.root,
            &repo.dir,
            &["merge", "-q", "--no-ff", "-m", &message, &branch],
        );
        rev(&repo.root, &repo.dir, "HEAD")
    }

    /// The rows of `orders` against `main`'s tip, `in_flight` saying which
    /// records a live conductor holds, by id.
    fn rows(
        repo: &TestRepo,
        orders: &Orders,
        in_flight: &dyn Fn(&Record) -> bool,
    ) -> BTreeMap<String, Row> {
        rows_in(&repo.ctx, orders, in_flight)
    }

    /// [`rows`] in the repository of `ctx`.
    fn rows_in(
        ctx: &Context,
        orders: &Orders,
        in_flight: &dyn Fn(&Record) -> bool,
    ) -> BTreeMap<String, Row> {
        let store = crate::state::Store::new(&ctx.repo, 3);
        let mut snapshot = store.snapshot().expect("snapshot");
        let tip = ctx.view_tip(Some("main")).expect("tip");
        let found = table(ctx, orders, &mut snapshot, tip, 3, in_flight).expect("table");
        assert_eq!(found.rows.len(), found.records.len());
        found.rows.into_iter().map(|r| (r.id.clone(), r)).collect()
    }

    fn done(merge: ObjectId) -> Option<Recovery> {
        Some(Recovery::Done {
            merge: merge.to_string(),
        })
    }

    /// An attempt in progress under a conductor that is gone: done when its
    /// merge is on the branch (by its trailer, or its recorded merge an
    /// ancestor of the tip), waiting to land when it passed and entered the
    /// queue, waiting too for a killed standalone merge-back, to be built
    /// again otherwise; an unreadable record is reported, never guessed.
    #[test]
    fn an_attempt_whose_conductor_is_gone_is_recovered_from_the_branch() {
        let repo = TestRepo::new();
        let ids = ["wo-1", "wo-2", "wo-3", "wo-4", "wo-5", "wo-6"];
        for id in ids {
            repo.dispatch(id, DEAD);
        }
        let merge = land_by_hand(&repo, "wo-2");
        repo.change("wo-3", |r| r.queue_to_land(repo.base.to_string()));
        repo.change("wo-4", |r| r.checkpoint_after = Some(repo.base.to_string()));
        repo.change("wo-5", |r| r.checkpoint_after = Some("not hex".into()));
        let source = repo.work("wo-6", &[("f.txt", "work\n")]);
        repo.change("wo-6", |r| {
            r.owner = None;
            r.log(crate::state::MERGE_START_EVENT, None);
        });
        let rows = rows(&repo, &orders(&ids), &|_| false);
        let got = |id: &str| (rows[id].status, rows[id].recovery.clone());
        assert_eq!(
            got("wo-1"),
            (Status::NeedsRework, Some(Recovery::NeedsRework))
        );
        assert_eq!(got("wo-2"), (Status::Done, done(merge)));
        assert_eq!(got("wo-3"), (Status::Verified, Some(Recovery::Waiting)));
        assert_eq!(
            rows["wo-3"].waiting.as_deref(),
            Some(STOPPED_BEFORE_LANDING)
        );
        assert_eq!(got("wo-4"), (Status::Done, done(repo.base)));
        match got("wo-5") {
            (Status::InProgress, Some(Recovery::Error { message })) => {
                assert!(message.contains("checkpoint_after 'not hex'"), "{message}")
            }
            other => panic!("wo-5: {other:?}"),
        }
        let pending = Recovery::MergeBackPending {
            source: source.to_string(),
        };
        assert_eq!(got("wo-6"), (Status::Verified, Some(pending)));
        assert_eq!(rows["wo-1"].claimed_by, None);
    }

    /// The rule for one record on its own: its merge by trailer, its
    /// recorded merge only while the tip contains it, the queue, no tip.
    #[test]
    fn recovery_of_one_record_follows_the_branch() {
        let repo = TestRepo::new();
        repo.dispatch("wo-1", DEAD);
        let record = repo.record("wo-1").expect("record");
        let side = repo.work("wo-2", &[("side.txt", "never merged\n")]);
        let merge = land_by_hand(&repo, "wo-1");
        let tip = repo.tip();
        let recover = |r: &Record, tip| recover(&repo.ctx, r, tip);
        assert_eq!(recover(&record, None), Recovery::NeedsRework);
        assert_eq!(Some(recover(&record, Some(tip))), done(merge));
        assert_eq!(
            find_merge(&repo.ctx, "wo-1", tip).expect("find"),
            Some(merge)
        );
        assert_eq!(
            find_merge(&repo.ctx, "wo-1", repo.base).expect("find"),
            None
        );
        let mut other = Record {
            wo: "wo-3".into(),
            ..record.clone()
        };
        assert_eq!(recover(&other, Some(tip)), Recovery::NeedsRework);
        other.checkpoint_after = Some(side.to_string());
        assert_eq!(recover(&other, Some(tip)), Recovery::NeedsRework);
        other.checkpoint_after = Some(repo.base.to_string());
        assert_eq!(Some(recover(&other, Some(tip))), done(repo.base));
        other.checkpoint_after = None;
        other.queue_to_land(side.to_string());
        assert_eq!(recover(&other, Some(tip)), Recovery::Waiting);
    }

    /// What a live conductor holds is shown as it is, even when its merge
    /// is on the branch (it records its own landing); a halted order too.
    #[test]
    fn a_live_conductors_work_and_a_halt_are_shown_as_they_are() {
        let repo = TestRepo::new();
        let ids = ["wo-1", "wo-2", "wo-3"];
        repo.dispatch("wo-1", "live");
        repo.dispatch("wo-2", "live");
        land_by_hand(&repo, "wo-2");
        repo.dispatch("wo-3", DEAD);
        repo.change("wo-3", |r| r.halt("by_hand", Vec::new()));
        let live = |r: &Record| r.owner.as_deref() == Some("live");
        let rows = rows(&repo, &orders(&ids), &live);
        for id in ["wo-1", "wo-2"] {
            assert_eq!(rows[id].status, Status::InProgress, "{id}");
            assert_eq!(rows[id].recovery, None, "{id}");
            assert_eq!(rows[id].claimed_by.as_deref(), Some("live"), "{id}");
        }
        assert_eq!(
            (rows["wo-3"].state, rows["wo-3"].recovery.clone()),
            ("halted", None)
        );
        assert_eq!(rows["wo-3"].halt_reason.as_deref(), Some("by_hand"));
    }

    /// The branch holds an order's merge: it is done whatever its record
    /// says (rolled back to `needs_rework`, halted), and an order with no
    /// record at all (a fresh clone) is reconstructed as done.
    #[test]
    fn a_merge_on_the_branch_is_done_whatever_the_record_says() {
        let repo = TestRepo::new();
        let ids = ["wo-1", "wo-2", "wo-3"];
        let merges: Vec<ObjectId> = ids.iter().map(|id| land_by_hand(&repo, id)).collect();
        repo.change("wo-1", |r| r.status = Status::NeedsRework);
        repo.change("wo-2", |r| r.halt("by_hand", Vec::new()));
        let rows = rows(&repo, &orders(&ids), &|_| false);
        for (id, merge) in ids.iter().zip(&merges).take(2) {
            assert_eq!(rows[*id].status, Status::Done, "{id}");
            assert!(!rows[*id].terminal, "{id}");
            assert_eq!(rows[*id].recovery, done(*merge), "{id}");
        }
        let reconstructed = Recovery::Reconstructed {
            merge: merges[2].to_string(),
        };
        assert_eq!(rows["wo-3"].status, Status::Done);
        assert_eq!(rows["wo-3"].recovery, Some(reconstructed));
        assert_eq!(rows["wo-3"].checkpoint_after, Some(merges[2].to_string()));
    }

    /// A process that makes the table again and again, the rows of settled
    /// orders remembered (a dispatch's, recovery's), sees what a fresh read sees after every change:
    /// orders settling, a settled record changed by hand, an order's title
    /// and dependencies edited.
    #[test]
    fn remembered_settled_rows_follow_every_change() {
        let repo = TestRepo::new();
        let ids = ["wo-1", "wo-2", "wo-3"];
        let merge = repo.base.to_string();
        for id in ids {
            repo.dispatch(id, DEAD);
            repo.change(id, |r| r.mark_done("merged", merge.clone()));
        }
        let remembering = crate::state::Store::new(&repo.ctx.repo, 3).remembering(&repo.ctx.caches);
        let both = |orders: &Orders| {
            let tip = repo.ctx.view_tip(Some("main")).expect("tip");
            let mut snapshot = remembering.snapshot().expect("snapshot");
            let kept = table(&repo.ctx, orders, &mut snapshot, tip, 3, &|_| false).expect("table");
            let mut snapshot = crate::state::Store::new(&repo.ctx.repo, 3)
                .snapshot()
                .expect("snapshot");
            let read = table(&repo.ctx, orders, &mut snapshot, tip, 3, &|_| false).expect("table");
            assert_eq!(kept.rows, read.rows);
            assert_eq!(kept.records, read.records);
            // Recovery's rows, settled ones from memory, are the same.
            let mut snapshot = remembering.snapshot().expect("snapshot");
            let no_one = |_: &Record| false;
            let rows = super::rows(
                &repo.ctx,
                orders,
                &mut snapshot,
                tip,
                3,
                &no_one,
                Reads::Unsettled,
            );
            assert_eq!(rows.expect("rows"), read.rows);
            kept.rows
        };
        let settled = || {
            repo.ctx
                .caches
                .get::<SettledRows>()
                .0
                .lock()
                .expect("lock")
                .len()
        };
        both(&orders(&ids));
        assert_eq!(settled(), 3);
        // A dispatch sees only what it decides on: a settled order that
        // another depends on, not the others.
        let open = |orders: &Orders| {
            let tip = repo.ctx.view_tip(Some("main")).expect("tip");
            let mut snapshot = remembering.snapshot().expect("snapshot");
            let rows = super::rows(
                &repo.ctx,
                orders,
                &mut snapshot,
                tip,
                3,
                &|_| false,
                Reads::Open,
            );
            let ids: Vec<String> = rows.expect("rows").into_iter().map(|r| r.id).collect();
            ids
        };
        assert!(open(&orders(&ids)).is_empty());
        let mut list: Vec<_> = ids.iter().map(|id| work_order(id, &[])).collect();
        list[1].deps = vec!["wo-1".into()];
        let depending = Orders::from_list("orders".into(), list.clone()).expect("orders");
        assert_eq!(open(&depending), ["wo-1", "wo-2"]);
        // A row kept for a dispatch follows its order's title.
        list[0].title = "retitled".into();
        let retitled = Orders::from_list("orders".into(), list).expect("orders");
        let tip = repo.ctx.view_tip(Some("main")).expect("tip");
        let mut snapshot = remembering.snapshot().expect("snapshot");
        let rows = super::rows(
            &repo.ctx,
            &retitled,
            &mut snapshot,
            tip,
            3,
            &|_| false,
            Reads::Open,
        );
        assert_eq!(rows.expect("rows")[0].title, "retitled");
        repo.change("wo-1", |r| r.status = Status::NeedsRework);
        repo.change("wo-2", |r| r.halt("by_hand", Vec::new()));
        repo.change("wo-3", |r| r.status = Status::NeedsRework);
        // A settled record changed is read again, for a dispatch too.
        assert_eq!(open(&orders(&ids)), ids);
        let rows = both(&orders(&ids));
        assert_eq!(rows[0].status, Status::NeedsRework);
        assert_eq!(rows[1].state, "halted");
        let mut list: Vec<_> = ids.iter().map(|id| work_order(id, &[])).collect();
        list[2].title = "a new title".into();
        list[2].deps = vec!["wo-1".into()];
        let edited = Orders::from_list("orders".into(), list).expect("orders");
        let rows = both(&edited);
        assert_eq!(rows[2].title, "a new title");
        assert_eq!(rows[2].deps, ["wo-1"]);
    }

    /// With every order done by its record, the table does not walk the
    /// branch's history: here a history whose first commit is garbled
    /// (read, it is an error) does not stop it.
    #[test]
    fn orders_all_done_by_their_records_leave_the_history_unread() {
        let repo = TestRepo::new();
        let ids = ["wo-1", "wo-2"];
        for id in ids {
            land_by_hand(&repo, id);
            repo.change(id, |r| {
                r.attempts = 1;
                r.mark_done("merged", "0".repeat(40));
            });
        }
        let hex = repo.base.to_string();
        let loose = repo
            .dir
            .join(".git/objects")
            .join(&hex[..2])
            .join(&hex[2..]);
        std::fs::remove_file(&loose).expect("the first commit is a loose object");
        std::fs::write(&loose, b"not zlib").expect("write");
        let ctx = TestRepo::open(&repo.dir);
        let rows = rows_in(&ctx, &orders(&ids), &|_| false);
        assert!(rows.values().all(|r| r.status == Status::Done), "{rows:?}");
        // An open order makes the table look for its merge: it cannot.
        let store = crate::state::Store::new(&ctx.repo, 3);
        let tip = ctx.view_tip(Some("main")).expect("tip");
        let open = orders(&["wo-1", "wo-2", "wo-3"]);
        let read = table(
            &ctx,
            &open,
            &mut store.snapshot().expect("snapshot"),
            tip,
            3,
            &|_| false,
        );
        assert!(read.is_err());
    }

    /// `arbiter/<id>` with commits the branch lacks, for an order never
    /// dispatched, is work made by hand; not once merged, nor for an order
    /// a round dispatched.
    #[test]
    fn a_branch_made_by_hand_is_named() {
        let repo = TestRepo::new();
        let ids = ["wo-1", "wo-2", "wo-3"];
        let by_hand = repo.work("wo-1", &[("x.txt", "mine\n")]);
        land_by_hand(&repo, "wo-2");
        repo.work("wo-3", &[("y.txt", "a round's\n")]);
        repo.dispatch("wo-3", DEAD);
        let rows = rows(&repo, &orders(&ids), &|_| false);
        assert_eq!(rows["wo-1"].hand_made_branch, Some(by_hand.to_string()));
        assert_eq!(rows["wo-1"].status, Status::Ready);
        assert_eq!(rows["wo-2"].hand_made_branch, None);
        assert_eq!(rows["wo-3"].hand_made_branch, None);
    }

    /// In a shallow clone an order with no record whose file is older than
    /// where the history begins may have landed before it: said, with that
    /// commit; not so an order written since, one with a record, one whose
    /// merge is in the history, nor anything in a full clone.
    #[test]
    fn a_shallow_history_is_answered_conservatively() {
        let repo = TestRepo::new();
        commit_files(
            &repo.root,
            &repo.dir,
            &[("orders/wo-old.md", "old\n"), ("orders/wo-rec.md", "rec\n")],
            "orders",
        );
        land_by_hand(&repo, "wo-landed");
        let url = format!("file://{}", repo.dir.display());
        let clone = repo.root.join("clone");
        git(
            &repo.root,
            &repo.root,
            &[
                "clone",
                "-q",
                "--depth",
                "1",
                &url,
                &clone.display().to_string(),
            ],
        );
        std::fs::write(clone.join("orders/wo-new.md"), "new\n").expect("write");
        let ids = ["wo-landed", "wo-new", "wo-old", "wo-rec"];
        let in_clone = |top: &std::path::Path| {
            let list = ids
                .iter()
                .map(|id| WorkOrder {
                    path: top.join(format!("orders/{id}.md")),
                    ..work_order(id, &[])
                })
                .collect();
            Orders::from_list(top.join("orders"), list).expect("orders")
        };
        let shallow = TestRepo::open(&clone);
        crate::state::Store::new(&shallow.repo, 3)
            .transact("a record", |txn| -> Result<(), crate::state::Error> {
                let record = txn.record("wo-rec", false)?;
                txn.put(record);
                Ok(())
            })
            .expect("a record");
        let start = rev(&repo.root, &clone, "HEAD");
        let found = rows_in(&shallow, &in_clone(&clone), &|_| false);
        let said = |id: &str| found[id].may_have_landed_before.clone();
        assert_eq!(said("wo-old"), Some(start.to_string()));
        assert_eq!(
            (said("wo-new"), said("wo-rec"), said("wo-landed")),
            (None, None, None)
        );
        let old = in_clone(&clone);
        let old = old.get("wo-old").expect("wo-old");
        let alone = may_have_landed_before(&shallow, old, start).expect("look");
        assert_eq!(alone, Some(start));

        let full = rows(&repo, &in_clone(&repo.dir), &|_| false);
        assert!(full.values().all(|r| r.may_have_landed_before.is_none()));
    }

    /// The transition reads each record again and leaves what moved on
    /// since the rows were read: a reconstruction once anyone wrote a
    /// record, a merge a live conductor holds or a record already done,
    /// and an attempt no longer in progress, halted, or taken by a live
    /// conductor.
    #[test]
    fn recovery_leaves_a_record_that_moved_on_since_the_rows_were_read() {
        let nobody = |_: &Record| false;
        let anybody = |_: &Record| true;
        let fresh = || Record::new("wo-1", false, 3);
        let mut taken = fresh();
        taken.dispatch(DEAD, "base".into(), "dispatch", String::new());
        let merge = "m".to_string();

        let rebuilt = Recovery::Reconstructed {
            merge: merge.clone(),
        };
        assert!(conclude(&rebuilt, Some(taken.clone()), fresh, &nobody).is_none());
        let (r, what) = conclude(&rebuilt, None, fresh, &nobody).expect("written");
        assert_eq!((r.status, what), (Status::Done, "reconstructed_done"));
        assert_eq!(r.checkpoint_after.as_deref(), Some("m"));

        let done = Recovery::Done { merge };
        assert!(conclude(&done, Some(taken.clone()), fresh, &anybody).is_none());
        let mut finished = taken.clone();
        finished.mark_merged("main".into(), "m".into());
        assert!(conclude(&done, Some(finished), fresh, &nobody).is_none());
        let mut halted = taken.clone();
        halted.halt("by_hand", Vec::new());
        let (r, what) = conclude(&done, Some(halted.clone()), fresh, &nobody).expect("done");
        assert_eq!((r.status, r.halted, what), (Status::Done, false, "done"));
        assert!(conclude(&done, None, fresh, &nobody).is_none());

        let rework = Recovery::NeedsRework;
        let mut released = taken.clone();
        released.release();
        for moved_on in [released, halted] {
            assert!(conclude(&rework, Some(moved_on), fresh, &nobody).is_none());
        }
        assert!(conclude(&rework, Some(taken.clone()), fresh, &anybody).is_none());
        assert!(conclude(&rework, None, fresh, &nobody).is_none());
        let (r, what) = conclude(&rework, Some(taken.clone()), fresh, &nobody).expect("rework");
        assert_eq!(
            (r.status, r.owner, what),
            (Status::NeedsRework, None, "needs_rework")
        );

        let pending = Recovery::MergeBackPending {
            source: "src".into(),
        };
        let (r, what) = conclude(&pending, Some(taken), fresh, &nobody).expect("pending");
        assert_eq!((r.status, what), (Status::Verified, "verified"));
        assert_eq!(r.landing.map(|l| l.source).as_deref(), Some("src"));
    }

    /// Recovery writes what it concluded in one transition and says what
    /// it changed; an order a live conductor holds is left to it.
    #[test]
    fn recovery_writes_what_it_concluded() {
        let repo = TestRepo::new();
        let other = crate::run::conductor::Conductor::register(&repo.ctx).expect("register");
        let ids = ["wo-1", "wo-2", "wo-3", "wo-4", "wo-5", "wo-6", "wo-7"];
        repo.dispatch("wo-1", DEAD);
        repo.dispatch("wo-2", DEAD);
        let merge_2 = land_by_hand(&repo, "wo-2");
        let merge_3 = land_by_hand(&repo, "wo-3");
        repo.dispatch("wo-4", DEAD);
        repo.change("wo-4", |r| r.queue_to_land(repo.base.to_string()));
        repo.dispatch("wo-5", DEAD);
        repo.change("wo-5", |r| r.checkpoint_after = Some("not hex".into()));
        repo.dispatch("wo-6", &other.name);
        repo.dispatch("wo-7", &other.name);
        land_by_hand(&repo, "wo-7");
        let orders = orders(&ids);
        let store = repo.store();
        let (rows, written) =
            recover_and_record(&repo.ctx, &orders, &store, repo.tip(), "me").expect("recover");
        let written: BTreeMap<String, &str> = written.into_iter().collect();
        let want: BTreeMap<String, &str> = [
            ("wo-1", "needs_rework"),
            ("wo-2", "done"),
            ("wo-3", "reconstructed_done"),
            ("wo-4", "verified"),
            ("wo-5", "halted"),
        ]
        .into_iter()
        .map(|(id, what)| (id.to_owned(), what))
        .collect();
        assert_eq!(written, want);
        let stored = |id: &str| repo.record(id).expect("a record");
        assert_eq!(stored("wo-1").status, Status::NeedsRework);
        assert_eq!(stored("wo-2").checkpoint_after, Some(merge_2.to_string()));
        assert_eq!(stored("wo-3").checkpoint_after, Some(merge_3.to_string()));
        assert!(stored("wo-4").waits_to_land());
        assert_eq!(
            stored("wo-5").halt_reason.as_deref(),
            Some("recovery_failed")
        );
        for id in ["wo-6", "wo-7"] {
            assert!(stored(id).held_by(&other.name, 1), "{id}");
        }
        // The rows are read again after the transition: nothing left to recover.
        assert!(rows.iter().all(|r| r.recovery.is_none()), "{rows:?}");
        let (_, again) =
            recover_and_record(&repo.ctx, &orders, &store, repo.tip(), "me").expect("again");
        assert_eq!(again, []);
    }
}

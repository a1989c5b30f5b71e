//! What the round and the race share about conducting a run, below both:
//! why a run stopped, crash recovery before a run starts, the first and
//! last lines of an attempt's log, and the warning for `--verify merged`
//! without a gate.

use std::time::Duration;

use serde::Serialize;

use crate::run::conductor::Conductor;
use crate::run::merge;
use crate::run::progress::{Event, Progress};
use crate::run::reconcile;
use crate::state::context::Context;
use crate::state::cost::{Usd, COST_BUDGET};
use crate::state::orders::Orders;
use crate::state::Store;
use crate::sys::error::Result;

/// Why a run stopped before its work was done; in JSON, the sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// `git arbiter stop`, Ctrl-C, SIGTERM or SIGHUP.
    Requested,
    /// `--budget-cmd` exited non-zero (its status).
    BudgetExhausted(String),
    /// The cost the run's attempts reported reached `--max-cost`.
    CostBudget { spent: Usd, max: Usd },
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Requested => f.write_str(
                "interrupted (Ctrl-C, a signal or `git arbiter stop`): nothing started is lost; the next `git arbiter round` resumes",
            ),
            Stopped::BudgetExhausted(status) => write!(f, "--budget-cmd exited with {status}"),
            Stopped::CostBudget { spent, max } => write!(
                f,
                "{COST_BUDGET}: the reported cost {spent} reached --max-cost {max}; builds already running finished"
            ),
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

/// The warning of a run asked to verify merged results with no gate.
pub const NO_GATE_TO_VERIFY: &str = "--verify merged (or arbiter.verify=merged) with no gate configured: merged results land unverified; give --gate or set arbiter.gate";

/// Crash recovery ([`crate::run::reconcile::recover_and_record`]) under the merge-back
/// turn, so no landing is between its branch move and its record: what
/// the branch holds is done, work that passed and never landed waits to
/// land (`verified`), the rest goes back for rework. Reports what it
/// concluded. Returns the table rows after recovery.
pub(crate) fn recover(
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
        progress.event(&Event::RecoveredRecord { wo: id, outcome });
    }
    Ok(rows)
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
            crate::sys::clock::format_ms(w.as_millis() as u64)
        )
    });
    format!(
        "order {label} attempt {attempt} base {base} started {} UTC{waited}",
        crate::sys::clock::format_time(crate::sys::clock::now())
    )
}

/// The last line of an attempt's log: how it ended and its wall time.
pub(crate) fn attempt_footer(attempt: u32, outcome: &str, wall: Duration) -> String {
    format!(
        "end of attempt {attempt}: {outcome}, wall time {}",
        crate::sys::clock::format_ms(wall.as_millis() as u64)
    )
}

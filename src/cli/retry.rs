use clap::Args;
use git_arbiter::run::kept::{self, Command, Item};
use git_arbiter::run::merge::{self, DriftScope};
use git_arbiter::run::queue::Fate;
use git_arbiter::state::orders::WorkOrder;
use git_arbiter::state::{Record, Store};
use git_arbiter::sys::error::InputError;
use git_arbiter::{run::review, Error, ExitCode};

use super::{clear, out, progress, Env};

/// Land kept work again after fixing its order: a halted merge, or work waiting to land.
///
/// For an order halted by its merge (`undeclared_file_drift`,
/// `merge_conflict`, `merged_gate_failed`), e.g. once a missing file is
/// declared in its work order, and for passed work waiting to land
/// (`verified`, e.g. once local changes in the checkout are committed or
/// stashed), the kept work (branch `arbiter/<id>`) lands without a rebuild
/// through the same merge queue a round uses: merged onto the current tip of
/// the integration branch, drift-checked against the order's current
/// declared files, and, with `--verify merged` (the default when a gate is
/// configured), gated on the merged result before the branch moves. Landed:
/// the halt is lifted, the order is `done` and its kept worktree and branch
/// are removed. Refused again: it stays halted with the new reason and paths
/// (exit 3 conflict, 4 drift, 1 when the gates fail on the merged result).
/// A checkout of the branch that cannot follow (a local change in the way)
/// refuses it before anything changes (exit 2).
///
/// `--rebuild` instead lifts the halt of any halted order and builds it again
/// in the next round, as `git arbiter clear` does (attempts back to 0; the kept
/// branch is dropped and the command that restores it printed).
#[derive(Args, Debug)]
pub struct RetryArgs {
    /// The work orders' ids (their file stems)
    #[arg(value_name = "ID", required = true)]
    ids: Vec<String>,
    /// Lift the halt and build the order afresh in the next round
    #[arg(long)]
    rebuild: bool,
    /// The integration branch [default: the current branch]
    #[arg(long, value_name = "BRANCH", conflicts_with = "rebuild")]
    into: Option<String>,
    #[command(flatten)]
    gates: super::GateArgs,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub fn cmd_retry(env: &Env, args: RetryArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    let store = Store::new(&ctx.repo, ctx.retry_cap()?);
    let mut ids = args
        .ids
        .iter()
        .map(|id| review::resolve_order(&ctx, Some(&orders), id))
        .collect::<Result<Vec<_>, _>>()?;
    ids.dedup();
    if args.rebuild {
        for id in &ids {
            let record = store.snapshot()?.record(id)?;
            clear::check_clearable(&ctx, &orders, id, record.as_ref())?;
        }
        for id in &ids {
            clear::clear_one(&ctx, &orders, &store, id)?;
        }
        return Ok(ExitCode::Success);
    }
    let into = ctx.integration_branch(args.into.as_deref())?;
    let gates = args.gates.resolve(&ctx)?;
    // Every order is checked before any is merged: a typo merges nothing.
    let mut items = Vec::with_capacity(ids.len());
    for id in &ids {
        let wo = kept::order_to_land(&orders, id, "retry it")?;
        let record = check_retryable(id, store.snapshot()?.record(id)?)?;
        items.push(Item {
            wo,
            source: kept_work(&ctx, id, &record)?,
            scope: DriftScope::Own,
        });
    }
    let progress = progress::for_stderr();
    let landed = kept::land(
        &ctx,
        &store,
        &into,
        &items,
        Command::Retry,
        gates.checks(),
        progress.as_ref(),
    )?;
    drop(progress);
    let target = into.shorten().to_string();
    let mut code = ExitCode::Success;
    for landed in landed {
        let this = report(&landed, orders.get(&landed.id), &target);
        // The first failure decides the exit code.
        if code == ExitCode::Success {
            code = this;
        }
    }
    Ok(code)
}

/// Print what became of one retried order; its exit code.
fn report(landed: &kept::Landed, wo: Option<&WorkOrder>, target: &str) -> ExitCode {
    let id = landed.id.as_str();
    match &landed.fate {
        Fate::Landed { sha, .. } => {
            out(&format!(
                "Merged {id} into {target} as {sha}; {id} is done\n"
            ));
            ExitCode::Success
        }
        Fate::UpToDate => {
            out(&format!(
                "{id}: {target} already contains {}; {id} is done\n",
                git_arbiter::run::worktree::branch_of(id)
            ));
            ExitCode::Success
        }
        Fate::Halted { reason, paths } => {
            out(&format!(
                "{id} is still halted ({reason}):\n{}",
                paths
                    .iter()
                    .map(|p| format!("  {}\n", git_arbiter::run::drift::describe(p, wo)))
                    .collect::<String>()
            ));
            if reason == merge::HALT_CONFLICT {
                ExitCode::MergeConflict
            } else {
                ExitCode::DriftRejected
            }
        }
        Fate::GateFailed { detail } => {
            out(&format!(
                "{id} is halted ({}): {detail}; {target} is unchanged\n",
                git_arbiter::run::queue::MERGED_GATE_FAILED
            ));
            ExitCode::Escalation
        }
        Fate::Waiting { why, hint } => {
            out(&format!(
                "{id} passed but did not land: {why}\n{id} is verified and waits to land: {hint}, then 'git arbiter retry {id}' (or 'git arbiter round')\n"
            ));
            ExitCode::Usage
        }
        Fate::Withdrawn { reason } => {
            out(&format!("{id} was not merged: it was {reason}\n"));
            ExitCode::Usage
        }
        Fate::Interrupted => {
            out(&format!("{id} was not merged: stopped; it waits to land\n"));
            ExitCode::Interrupted
        }
    }
}

/// The commit of `id`'s kept work: its kept branch, or for work waiting to
/// land, what it waits with.
fn kept_work(
    ctx: &git_arbiter::state::context::Context,
    id: &str,
    record: &Record,
) -> Result<gix::ObjectId, Error> {
    if let Some(source) = record
        .landing
        .as_ref()
        .filter(|_| record.waits_to_land())
        .and_then(|l| gix::ObjectId::from_hex(l.source.as_bytes()).ok())
    {
        return Ok(source);
    }
    kept::branch_commit(ctx, id)?.ok_or_else(|| {
        InputError::new(format!(
            "work order '{id}' has no kept branch {} to retry",
            git_arbiter::run::worktree::branch_of(id)
        ))
        .hint(format!(
            "'git arbiter retry --rebuild {id}' builds it again"
        ))
        .into()
    })
}

/// A retry lands kept work: an order its merge halted has some, and an
/// order whose passed work waits to land.
fn check_retryable(id: &str, record: Option<Record>) -> Result<Record, Error> {
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

use clap::Args;
use git_arbiter::run::kept::{self, Ask, Command, Scope};
use git_arbiter::run::merge;
use git_arbiter::run::queue::Fate;
use git_arbiter::state::orders::WorkOrder;
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
    ctx.follow_configured_remote(args.into.as_deref())?;
    let store = ctx.store()?;
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
    let gates = args.gates.resolve(&ctx)?;
    let ask = Ask {
        command: Command::Retry,
        ids: &ids,
        into: args.into.as_deref(),
        scope: Scope::Own,
    };
    let progress = progress::for_stderr();
    let landing = kept::land_kept(
        &ctx,
        &orders,
        &store,
        &ask,
        gates.checks(),
        progress.as_ref(),
    )?;
    drop(progress);
    let target = landing.into.shorten().to_string();
    let mut code = ExitCode::Success;
    for landed in landing.landed {
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

use clap::Args;
use git_arbiter::{batch, lint, reconcile, Error, ExitCode};

use super::{json, out, Env};

/// Select the next batch: eligible work orders whose declared files are pairwise disjoint.
///
/// Prints `{"version":2,"batch":[{"id","files"}],"deferred":[{"id","reason","conflicts_with"}],"warnings":[]}`
/// on stdout and one line `arbiter batch ready=<n> batch=<n> deferred=<n> max=<n>`
/// on stderr. Deterministic: work orders are taken in id order. `warnings`
/// holds what `git arbiter lint` warns about, as `path:line: message`, then
/// the orders left out for work made by hand. Read-only.
#[derive(Args, Debug)]
pub struct BatchArgs {
    /// At most this many work orders in the batch [default: `arbiter.maxBatch`, else 8]
    #[arg(long, value_name = "N")]
    max: Option<u32>,
    /// Print JSON (the default; kept for symmetry with the other plumbing commands)
    #[arg(long)]
    json: bool,
    /// The integration branch [default: the current branch; on a detached HEAD, the checked-out commit]
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub fn cmd_batch(env: &Env, args: BatchArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let max = ctx.max_batch(args.max)?;
    let orders = ctx.load_orders(env.orders_flag())?;
    let table = reconcile::current(&ctx, &orders, args.into.as_deref())?;

    let mut selected = batch::select(&orders, &table.rows, max);
    let tip = ctx.view_tip(args.into.as_deref())?;
    let warnings = lint::warnings(&ctx, &orders, &table.rows, tip)?;
    selected
        .warnings
        .splice(0..0, warnings.iter().map(lint::Finding::located));
    let _ = args.json;
    out(&json(&selected));
    say!("{}", selected.summary_line());
    Ok(ExitCode::Success)
}

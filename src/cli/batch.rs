use clap::Args;
use git_arbiter::{batch, reconcile, Error, ExitCode};

use super::{json, out, Env};

/// Select the next batch: eligible work orders whose declared files are pairwise disjoint.
///
/// Prints `{"version":1,"batch":[{"wo_id","files"}],"deferred":[{"wo_id","reason","conflicts_with"}],"warnings":[]}`
/// on stdout and one line `arbiter batch ready=<n> batch=<n> deferred=<n> max=<n>`
/// on stderr. Deterministic: work orders are taken in id order. Read-only.
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
}

pub fn cmd_batch(env: &Env, args: BatchArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let max = ctx.max_batch(args.max)?;
    let orders = ctx.load_orders(env.orders_flag())?;
    let table = reconcile::current(&ctx, &orders, args.into.as_deref())?;

    let selected = batch::select(&orders, &table.rows, max);
    let _ = args.json;
    out(&json(&selected));
    eprintln!("{}", selected.summary_line());
    // The process ends right after this: freeing hundreds of thousands of
    // small allocations one by one would only delay the exit.
    std::mem::forget((orders, table, selected));
    Ok(ExitCode::Success)
}

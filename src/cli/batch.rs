use clap::Args;
use git_arbiter::{run::batch, run::lint, run::reconcile, Error, ExitCode};

use super::{json, out, Env};

/// Select the next batch: eligible work orders whose declared files are pairwise disjoint.
///
/// Prints the batch (each order with its files), the deferred orders with
/// their reason and any warnings as text on stdout (`--json`:
/// `{"version":2,"batch":[{"id","files"}],"deferred":[{"id","reason","conflicts_with"}],"warnings":[]}`),
/// and one line `arbiter batch ready=<n> batch=<n> deferred=<n> max=<n>` on
/// stderr. Deterministic: work orders are taken in id order. `warnings`
/// holds what `git arbiter lint` warns about, as `path:line: message`, then
/// the orders left out for work made by hand. Read-only.
#[derive(Args, Debug)]
pub struct BatchArgs {
    /// At most this many work orders in the batch [default: `arbiter.maxBatch`, else 8]
    #[arg(long, value_name = "N")]
    max: Option<u32>,
    /// Print JSON instead of text
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
    if args.json {
        out(&json(&selected));
    } else {
        out(&render(&selected));
    }
    say!("{}", selected.summary_line());
    Ok(ExitCode::Success)
}

fn render(selected: &batch::Batch) -> String {
    let mut text = String::new();
    if selected.batch.is_empty() {
        text.push_str("batch: nothing eligible\n");
    } else {
        text.push_str("batch:\n");
        let rows: Vec<Vec<String>> = selected
            .batch
            .iter()
            .map(|p| {
                let files = match p.files.is_empty() {
                    true => "(anything: declares no files)".to_owned(),
                    false => p.files.join(" "),
                };
                vec![format!("  {}", p.wo_id), files]
            })
            .collect();
        text.push_str(&super::table(&["  ID", "FILES"], &rows));
    }
    if !selected.deferred.is_empty() {
        text.push_str("deferred:\n");
        let rows: Vec<Vec<String>> = selected
            .deferred
            .iter()
            .map(|d| {
                let with = match d.conflicts_with.is_empty() {
                    true => String::new(),
                    false => format!(" (with {})", d.conflicts_with.join(", ")),
                };
                vec![format!("  {}", d.wo_id), format!("{}{with}", d.reason)]
            })
            .collect();
        text.push_str(&super::table(&["  ID", "REASON"], &rows));
    }
    for warning in &selected.warnings {
        text.push_str(&format!("warning: {warning}\n"));
    }
    text
}

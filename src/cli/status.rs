use clap::Args;
use git_arbiter::run::reconcile::{self, Recovery};
use git_arbiter::{Error, ExitCode};
use serde::Serialize;

use super::{json, out, Env};

/// Show every work order's state: the reconcile table.
///
/// One row per work order with its status, HALT flag and reason, attempts and
/// retry cap, dependencies and checkpoints. The crash-recovery rule is
/// applied to what is shown: an `in_progress` order whose checkpoint_after is
/// an ancestor of the integration tip shows as `done`, otherwise as
/// `needs_rework`. A `verified` order passed and waits to land (a local
/// change in the checkout was in the way, or its run stopped): what keeps
/// it is said below the table. In a shallow clone, an order with no record
/// whose file is older than the history may have landed before it: it shows
/// `(landed?)` and is not built until its record or the history is fetched.
/// Read-only.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Print `{"version":2,"orders":[…]}` instead of a table
    #[arg(long)]
    json: bool,
    /// The integration branch [default: the current branch; on a detached HEAD, the checked-out commit]
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
    /// Fetch the state and the integration branch from this git remote first (`round --remote`); nothing is pushed
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

#[derive(Serialize)]
struct Output<'a> {
    version: u32,
    orders: &'a [reconcile::Row],
}

pub fn cmd_status(env: &Env, args: StatusArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    let mut into = args.into;
    if let Some(remote) = &args.remote {
        ctx.connect_remote(remote, into.as_deref(), true)?;
        into = ctx.remote().map(|r| r.tracking.as_bstr().to_string());
    }
    let table = reconcile::current(&ctx, &orders, into.as_deref())?;

    if args.json {
        out(&json(&Output {
            version: git_arbiter::JSON_VERSION,
            orders: &table.rows,
        }));
    } else {
        out(&render(&table.rows));
    }
    Ok(ExitCode::Success)
}

fn render(rows: &[reconcile::Row]) -> String {
    if rows.is_empty() {
        return "no work orders\n".into();
    }
    // A cost column only when some builder reported one.
    let costs = rows.iter().any(|r| r.spent.is_some());
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut status = if r.terminal {
                format!("HALT {}", r.halt_reason.as_deref().unwrap_or("?"))
            } else {
                r.status.to_string()
            };
            if let Some(into) = &r.merged_into {
                status.push_str(&format!(" → {into}"));
            }
            match (&r.claimed_by, &r.claimed_on) {
                (Some(conductor), Some(machine)) => {
                    status.push_str(&format!(" ({conductor} on {machine})"));
                }
                (Some(conductor), None) => status.push_str(&format!(" ({conductor})")),
                _ => {}
            }
            if let Some(Recovery::Error { .. }) = r.recovery {
                status.push_str(" (recovery failed)");
            }
            if r.may_have_landed_before.is_some() {
                status.push_str(" (landed?)");
            }
            let mut row = vec![
                r.id.clone(),
                status,
                format!("{}/{}", r.attempts, r.cap),
                if r.deps.is_empty() {
                    "-".into()
                } else {
                    r.deps.join(",")
                },
                r.checkpoint_after
                    .as_deref()
                    .map_or("-".into(), |s| s[..s.len().min(12)].to_owned()),
            ];
            if costs {
                row.push(super::cost_cell(r.spent.as_ref(), r.attempts > 0));
            }
            row.push(r.title.clone());
            row
        })
        .collect();
    let mut header = vec!["ID", "STATUS", "ATTEMPTS", "DEPS", "MERGED"];
    if costs {
        header.push("COST");
    }
    header.push("TITLE");
    let mut text = super::table(&header, &cells);
    if let Some(warning) = git_arbiter::run::batch::shallow_warning(rows) {
        text.push_str(&format!("warning: {warning}\n"));
    }
    for r in rows {
        if let Some(why) = &r.waiting {
            text.push_str(&format!(
                "{} passed and waits to land: {why}\n  once that is resolved, 'git arbiter round' (or 'git arbiter retry {}') lands it without a rebuild\n",
                r.id, r.id
            ));
        }
        if let Some(failure) = &r.last_failure {
            text.push_str(&format!("{}: {failure}\n", r.id));
            if let Some(log) = &failure.log {
                text.push_str(&format!("  log: {log}\n"));
            }
        }
        if let Some(Recovery::Error { message }) = &r.recovery {
            text.push_str(&format!(
                "warning: {}: cannot tell whether its merge landed: {message}\n",
                r.id
            ));
        }
    }
    text
}

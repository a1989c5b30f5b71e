use clap::Args;
use git_arbiter::run::conductor;
use git_arbiter::state::Status;
use git_arbiter::sys::error::InputError;
use git_arbiter::{run::review, Error, ExitCode};

use super::Env;

/// Halt a work order by hand: it is never selected, built or merged until `git arbiter clear`.
#[derive(Args, Debug)]
pub struct HaltArgs {
    /// The work order's id (its file stem)
    id: String,
    /// Why it is halted (one line; shown by status and in the escalation)
    #[arg(long, value_name = "R")]
    reason: String,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub fn cmd_halt(env: &Env, mut args: HaltArgs) -> Result<ExitCode, Error> {
    let reason = args.reason.trim().to_owned();
    let reason = reason.as_str();
    if reason.is_empty() || reason.contains('\n') {
        return Err(InputError::new("--reason must be one non-empty line")
            .hint("e.g. --reason \"waiting for API review\"")
            .into());
    }
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    args.id = review::resolve_order(&ctx, Some(&orders), &args.id)?;
    let Some(wo) = orders.get(&args.id) else {
        return Err(InputError::new(format!(
            "work order '{}' has a record but no file in the orders directory",
            args.id
        ))
        .hint("restore its file to halt it")
        .into());
    };
    ctx.follow_configured_remote(None)?;
    let store = ctx.store()?;
    // Not between a conductor's last ownership check and its merge's record.
    let _turn = git_arbiter::run::merge::take_turn(&ctx)?;
    let owner = store.transact(
        &format!("halt {}", args.id),
        |txn| -> Result<Option<String>, Error> {
            let mut record = txn.record(&wo.id, !wo.deps.is_empty())?;
            if record.status == Status::Done && !record.halted {
                return Err(InputError::new(format!(
                    "work order '{}' is done: its merge is on the branch, a halt would not undo it",
                    wo.id
                ))
                .hint(record.done_hint())
                .into());
            }
            let owner = record.owner.clone().filter(|_| {
                record.status == Status::InProgress && conductor::owns_live(&ctx, &record)
            });
            record.halt(reason, Vec::new());
            txn.put(record);
            Ok(owner)
        },
    )?;
    match owner {
        // The conductor sees the halt, ends that build only, and keeps its worktree and branch.
        Some(owner) => say!(
            "arbiter halt wo={} reason={reason} building_in={owner}",
            args.id
        ),
        None => say!("arbiter halt wo={} reason={reason}", args.id),
    }
    Ok(ExitCode::Success)
}

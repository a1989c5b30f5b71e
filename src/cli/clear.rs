use clap::Args;
use git_arbiter::error::InputError;
use git_arbiter::state::{Status, Store};
use git_arbiter::{Error, ExitCode};

use super::Env;

/// Lift a work order's HALT: the only way a halted order runs again.
///
/// The order starts afresh: attempts go back to 0 and its status to `ready`
/// (or `blocked` while it has dependencies not yet done). The worktree and
/// branch `arbiter/<id>` kept from the halted attempt are removed; the
/// branch's commit is recorded in the order's history (and printed), so that
/// work can still be recovered with `git branch <name> <sha>`.
#[derive(Args, Debug)]
pub struct ClearArgs {
    /// The work order's id (its file stem)
    id: String,
}

pub fn cmd_clear(env: &Env, args: ClearArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    let has_deps = orders.get(&args.id).is_some_and(|wo| !wo.deps.is_empty());
    let store = Store::new(&ctx.repo, ctx.retry_cap()?);
    let cap = store.default_cap;
    let branch = git_arbiter::round::branch_of(&args.id);
    let kept = ctx
        .repo
        .try_find_reference(format!("refs/heads/{branch}").as_str())
        .ok()
        .flatten()
        .and_then(|mut r| r.peel_to_id().ok().map(|id| id.detach()));
    let dropped = kept.map(|sha| format!("dropped {branch} at {sha}"));
    store.transact(&format!("clear {}", args.id), |txn| -> Result<(), Error> {
        let Some(mut record) = txn.stored(&args.id)? else {
            return Err(not_halted(&args.id, orders.get(&args.id).is_some()));
        };
        if !record.halted {
            return Err(not_halted(&args.id, true));
        }
        record.halted = false;
        record.halt_reason = None;
        record.halt_paths.clear();
        record.attempts = 0;
        record.cap = cap;
        record.owner = None;
        record.status = if has_deps {
            Status::Blocked
        } else {
            Status::Ready
        };
        record.log("clear", dropped.clone());
        txn.put(record);
        Ok(())
    })?;
    git_arbiter::crash::point("clear.recorded");
    match kept {
        Some(sha) => {
            git_arbiter::worktree::remove(&ctx, &args.id, &branch)?;
            eprintln!("arbiter clear wo={} dropped={branch}@{sha}", args.id);
        }
        None => eprintln!("arbiter clear wo={}", args.id),
    }
    Ok(ExitCode::Success)
}

fn not_halted(id: &str, known: bool) -> Error {
    if known {
        InputError::new(format!("work order '{id}' is not halted"))
            .hint("'git arbiter status' shows which work orders are halted")
            .into()
    } else {
        InputError::new(format!("unknown work order '{id}'"))
            .hint("'git arbiter status' lists the work orders")
            .into()
    }
}

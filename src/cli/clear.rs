use clap::Args;
use git_arbiter::conductor;
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
    let branch = git_arbiter::worktree::branch_of(&args.id);
    let kept = ctx
        .repo
        .try_find_reference(format!("refs/heads/{branch}").as_str())
        .ok()
        .flatten()
        .and_then(|mut r| r.peel_to_id().ok().map(|id| id.detach()));
    let dropped = kept.map(|sha| format!("dropped {branch} at {sha}"));
    // 1. Record what is dropped while the order is still halted (nobody
    //    dispatches it), so a kill from here on loses no commit id.
    store.transact(
        &format!("clear {}: start", args.id),
        |txn| -> Result<(), Error> {
            let Some(mut record) = txn.stored(&args.id)? else {
                return Err(not_halted(&args.id, orders.get(&args.id).is_some()));
            };
            if record.status == Status::Done && !record.halted {
                return Err(InputError::new(format!(
                    "work order '{}' is done, not halted",
                    args.id
                ))
                .hint(record.done_hint())
                .into());
            }
            if !record.halted {
                return Err(not_halted(&args.id, true));
            }
            refuse_live_owner(&ctx, &record)?;
            record.log("clearing", dropped.clone());
            txn.put(record);
            Ok(())
        },
    )?;
    git_arbiter::crash::point("clear.recorded");
    // 2. Its kept worktree and branch.
    git_arbiter::worktree::remove(&ctx, &args.id, &branch)?;
    // 3. Lift the halt.
    store.transact(&format!("clear {}", args.id), |txn| -> Result<(), Error> {
        let Some(mut record) = txn.stored(&args.id)? else {
            return Err(not_halted(&args.id, orders.get(&args.id).is_some()));
        };
        if !record.halted {
            return Err(not_halted(&args.id, true));
        }
        refuse_live_owner(&ctx, &record)?;
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
    match kept {
        Some(sha) => eprintln!("arbiter clear wo={} dropped={branch}@{sha}", args.id),
        None => eprintln!("arbiter clear wo={}", args.id),
    }
    Ok(ExitCode::Success)
}

/// A halted order that a running conductor still holds (halted while it was
/// being built) is that conductor's until it lets go: its builder may still be
/// writing into the worktree `clear` would remove.
fn refuse_live_owner(
    ctx: &git_arbiter::context::Context,
    record: &git_arbiter::state::Record,
) -> Result<(), Error> {
    match record.owner.as_deref() {
        Some(owner) if record.status == Status::InProgress && conductor::owns_live(ctx, record) => {
            Err(InputError::new(format!(
                "work order '{}' is still held by running conductor {owner}",
                record.wo
            ))
            .hint("it lets go of a halted order when its build ends; run clear again then, or 'git arbiter stop' first")
            .into())
        }
        _ => Ok(()),
    }
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

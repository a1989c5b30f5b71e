use clap::Args;
use git_arbiter::run::conductor;
use git_arbiter::state::context::Context;
use git_arbiter::state::orders::Orders;
use git_arbiter::state::{Record, Status, Store};
use git_arbiter::sys::error::InputError;
use git_arbiter::{run::review, Error, ExitCode};

use super::{out, Env};

/// Lift the HALT of work orders: the only way a halted order runs again.
///
/// Each order starts afresh: attempts go back to 0 and its status to `ready`
/// (or `blocked` while it has dependencies not yet done). The worktree and
/// branch `arbiter/<id>` kept from the halted attempt are removed; the
/// branch's commit is recorded in the order's history, and the command that
/// restores it (`git branch arbiter/<id> <sha>`) is printed. To merge the kept
/// work instead of rebuilding it, see `git arbiter retry`.
#[derive(Args, Debug)]
pub struct ClearArgs {
    /// The work orders' ids (their file stems)
    #[arg(value_name = "ID", conflicts_with = "all")]
    ids: Vec<String>,
    /// Clear every halted work order
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub fn cmd_clear(env: &Env, args: ClearArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    ctx.follow_configured_remote(None)?;
    let store = ctx.store()?;
    let ids = if args.all {
        let halted = halted_ids(&store, &orders)?;
        if halted.is_empty() {
            out("No work order is halted\n");
            return Ok(ExitCode::Success);
        }
        halted
    } else if args.ids.is_empty() {
        return Err(InputError::new("no work order to clear")
            .hint("name the halted orders ('git arbiter clear wo-01 wo-02'), or clear every halted one with --all")
            .into());
    } else {
        let mut ids = args
            .ids
            .iter()
            .map(|id| review::resolve_order(&ctx, Some(&orders), id))
            .collect::<Result<Vec<_>, _>>()?;
        ids.dedup();
        ids
    };
    // Every order is checked before any is touched: a typo clears nothing.
    for id in &ids {
        let record = store.snapshot()?.record(id)?;
        check_clearable(&ctx, &orders, id, record.as_ref())?;
    }
    for id in &ids {
        clear_one(&ctx, &orders, &store, id)?;
    }
    Ok(ExitCode::Success)
}

/// The halted orders among `orders`, by id.
fn halted_ids(store: &Store, orders: &Orders) -> Result<Vec<String>, Error> {
    let ids: Vec<&str> = orders.iter().map(|wo| wo.id.as_str()).collect();
    let records = store.snapshot()?.records(&ids)?;
    Ok(records
        .into_iter()
        .flatten()
        .filter(|r| r.halted)
        .map(|r| r.wo)
        .collect())
}

/// Why `clear` (or `retry --rebuild`) refuses `id`, if it does.
pub(super) fn check_clearable(
    ctx: &Context,
    orders: &Orders,
    id: &str,
    record: Option<&Record>,
) -> Result<(), Error> {
    let Some(record) = record else {
        return Err(not_halted(id, orders.get(id).is_some()));
    };
    if record.status == Status::Done && !record.halted {
        return Err(
            InputError::new(format!("work order '{id}' is done, not halted"))
                .hint(record.done_hint())
                .into(),
        );
    }
    if !record.halted {
        return Err(not_halted(id, true));
    }
    refuse_live_owner(ctx, record)
}

/// Clear one halted order: record and drop its kept branch, then lift the
/// halt; prints what was dropped and how to restore it.
pub(super) fn clear_one(
    ctx: &Context,
    orders: &Orders,
    store: &Store,
    id: &str,
) -> Result<(), Error> {
    let has_deps = orders.get(id).is_some_and(|wo| !wo.deps.is_empty());
    let cap = store.default_cap;
    let branch = git_arbiter::run::worktree::branch_of(id);
    let kept = ctx
        .repo
        .try_find_reference(git_arbiter::run::worktree::branch_ref(id).as_str())
        .ok()
        .flatten()
        .and_then(|mut r| r.peel_to_id().ok().map(|id| id.detach()));
    let dropped = kept.map(|sha| format!("dropped {branch} at {sha}"));
    // 1. Record what is dropped while the order is still halted (nobody
    //    dispatches it), so a kill from here on loses no commit id.
    store.transact(&format!("clear {id}: start"), |txn| -> Result<(), Error> {
        let record = txn.stored(id)?;
        check_clearable(ctx, orders, id, record.as_ref())?;
        let Some(mut record) = record else {
            return Err(not_halted(id, orders.get(id).is_some()));
        };
        record.log("clearing", dropped.clone());
        txn.put(record);
        Ok(())
    })?;
    git_arbiter::sys::crash::point("clear.recorded");
    // 2. Its kept worktree and branch.
    git_arbiter::run::worktree::remove(ctx, id, &branch)?;
    // 3. Lift the halt.
    store.transact(&format!("clear {id}"), |txn| -> Result<(), Error> {
        let Some(mut record) = txn.stored(id)? else {
            return Err(not_halted(id, orders.get(id).is_some()));
        };
        if !record.halted {
            return Err(not_halted(id, true));
        }
        refuse_live_owner(ctx, &record)?;
        record.clear(has_deps, cap, dropped.clone());
        txn.put(record);
        Ok(())
    })?;
    match kept {
        Some(sha) => {
            say!("arbiter clear wo={id} dropped={branch}@{sha}");
            out(&format!(
                "Cleared {id}; its kept branch is dropped, restore it with: git branch {branch} {sha}\n"
            ));
        }
        None => {
            say!("arbiter clear wo={id}");
            out(&format!("Cleared {id}\n"));
        }
    }
    Ok(())
}

/// A halted order that a running conductor still holds (halted while it was
/// being built) is that conductor's until it lets go: its builder may still be
/// writing into the worktree `clear` would remove.
fn refuse_live_owner(ctx: &Context, record: &Record) -> Result<(), Error> {
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

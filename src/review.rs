//! Reviewing work after the fact: which work orders the state knows, and the
//! evidence `show` presents for one of them.

use crate::context::Context;
use crate::error::{InputError, Result};
use crate::orders::Orders;
use crate::state::Snapshot;

/// Every work order id the state or the orders directory knows, sorted.
/// The state alone suffices: records written by git-arbiter keep a key
/// under `wo-keys/`, so history stays readable after the orders are gone.
pub fn known_ids(snapshot: &Snapshot<'_>, orders: Option<&Orders>) -> Result<Vec<String>> {
    let mut ids = snapshot.ids()?;
    ids.extend(
        orders
            .into_iter()
            .flat_map(|o| o.iter().map(|w| w.id.clone())),
    );
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// The orders, when they load. Reviewing reads the state, so a missing or
/// broken orders directory must not hide it (`lint` reports those).
pub fn orders_if_any(ctx: &Context, flag: Option<&std::path::Path>) -> Option<Orders> {
    ctx.load_orders(flag).ok()
}

/// `id` names no work order: exit 2, saying where the ids are listed.
pub fn unknown_order(id: &str) -> InputError {
    InputError::new(format!(
        "unknown work order '{id}': it has no file in the orders directory and no record in {}",
        crate::state::NOTES_REF
    ))
    .hint(
        "'git arbiter status' lists the work orders; 'git arbiter log' shows every order's events",
    )
}

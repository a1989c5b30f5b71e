use clap::Args;
use git_arbiter::{Error, ExitCode};

use super::{out, Env, OrdersArgs};

/// Print the work-order ids, one a line, for the shell completions.
#[derive(Args, Debug)]
pub struct CompleteIdsArgs {
    #[command(flatten)]
    pub orders: OrdersArgs,
}

pub fn cmd_complete_ids(env: &Env) -> Result<ExitCode, Error> {
    let orders = env.context()?.load_orders(env.orders_flag())?;
    let ids: String = orders.iter().map(|wo| format!("{}\n", wo.id)).collect();
    out(&ids);
    Ok(ExitCode::Success)
}

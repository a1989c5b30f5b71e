use clap::Args;
use git_arbiter::error::{GitContext, InputError};
use git_arbiter::merge::{self, DriftScope, Outcome, Request};
use git_arbiter::state::{Record, Store};
use git_arbiter::{Error, ExitCode};

use super::{clear, out, Env};

/// Re-check the kept work of halted work orders after fixing them.
///
/// For an order halted by its merge (`undeclared_file_drift`,
/// `merge_conflict`, `checkout_blocked`), e.g. once a missing file is declared
/// in its work order, the kept branch `arbiter/<id>` is merged onto the
/// current tip of the integration branch without rebuilding it, drift-checked
/// against the order's current declared files. Merged: the halt is lifted, the
/// order is `done` and its kept worktree and branch are removed. Refused
/// again: it stays halted with the new reason and paths (exit 3 conflict,
/// 4 drift, as `merge-back`).
///
/// `--rebuild` instead lifts the halt of any halted order and builds it again
/// in the next round, as `git arbiter clear` does (attempts back to 0; the kept
/// branch is dropped and the command that restores it printed).
#[derive(Args, Debug)]
pub struct RetryArgs {
    /// The work orders' ids (their file stems)
    #[arg(value_name = "ID", required = true)]
    ids: Vec<String>,
    /// Lift the halt and build the order afresh in the next round
    #[arg(long)]
    rebuild: bool,
    /// The integration branch [default: the current branch]
    #[arg(long, value_name = "BRANCH", conflicts_with = "rebuild")]
    into: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub fn cmd_retry(env: &Env, args: RetryArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    let store = Store::new(&ctx.repo, ctx.retry_cap()?);
    let mut ids = args.ids;
    ids.dedup();
    if args.rebuild {
        for id in &ids {
            let record = store.snapshot()?.record(id)?;
            clear::check_clearable(&ctx, &orders, id, record.as_ref())?;
        }
        for id in &ids {
            clear::clear_one(&ctx, &orders, &store, id)?;
        }
        return Ok(ExitCode::Success);
    }
    let into = ctx.integration_branch(args.into.as_deref())?;
    // Every order is checked before any is merged: a typo merges nothing.
    let mut kept = Vec::with_capacity(ids.len());
    for id in &ids {
        let Some(wo) = orders.get(id) else {
            return Err(InputError::new(format!("unknown work order '{id}'"))
                .hint("'git arbiter status' lists the work orders")
                .into());
        };
        let record = store.snapshot()?.record(id)?;
        check_retryable(id, record.as_ref())?;
        let branch = git_arbiter::worktree::branch_ref(id);
        let source = ctx
            .repo
            .try_find_reference(branch.as_str())
            .git_context(format!("reading {branch}"))?
            .ok_or_else(|| -> Error {
                InputError::new(format!(
                    "work order '{id}' has no kept branch {} to retry",
                    git_arbiter::worktree::branch_of(id)
                ))
                .hint(format!(
                    "'git arbiter retry --rebuild {id}' builds it again"
                ))
                .into()
            })?
            .peel_to_id()
            .git_context(format!("resolving {branch}"))?
            .detach();
        kept.push((wo, record, source));
    }
    let target = into.shorten();
    let mut code = ExitCode::Success;
    let mut session = merge::Session::default();
    for (wo, record, source) in kept {
        let id = wo.id.as_str();
        let (attempt, round_base) = merge::standalone(record.as_ref());
        let outcome = session.merge_back(
            &ctx,
            &store,
            &Request {
                wo,
                into: &into,
                source,
                attempt,
                round_base,
                scope: DriftScope::Own,
                extra_note: None,
                owner: None,
                retry: true,
            },
        )?;
        say!("arbiter retry wo={id} outcome={}", outcome.name());
        match &outcome {
            Outcome::Merged { sha, .. } => {
                // The kept work is in the merge now.
                git_arbiter::worktree::remove(&ctx, id, &git_arbiter::worktree::branch_of(id))?;
                out(&format!(
                    "Merged {id} into {target} as {sha}; {id} is done\n"
                ));
            }
            Outcome::UpToDate { .. } => {
                git_arbiter::worktree::remove(&ctx, id, &git_arbiter::worktree::branch_of(id))?;
                out(&format!(
                    "{id}: {target} already contains {}; {id} is done\n",
                    git_arbiter::worktree::branch_of(id)
                ));
            }
            Outcome::Conflict { paths } | Outcome::Drift { paths } => {
                out(&format!(
                    "{id} is still halted ({}):\n{}",
                    outcome.name(),
                    paths
                        .iter()
                        .map(|p| format!("  {}\n", git_arbiter::drift::describe(p, Some(wo))))
                        .collect::<String>()
                ));
                if code == ExitCode::Success {
                    code = if matches!(outcome, Outcome::Conflict { .. }) {
                        ExitCode::MergeConflict
                    } else {
                        ExitCode::DriftRejected
                    };
                }
            }
            // A standalone merge refuses (an error) rather than returning these.
            Outcome::CheckoutBlocked { .. } | Outcome::Withdrawn { .. } => {
                unreachable!(
                    "a merge without an owner neither halts for the checkout nor is withdrawn"
                )
            }
        }
    }
    Ok(code)
}

/// A retry merges kept work: only an order its merge halted has some.
fn check_retryable(id: &str, record: Option<&Record>) -> Result<(), Error> {
    let Some(record) = record.filter(|r| r.halted) else {
        return Err(InputError::new(format!("work order '{id}' is not halted"))
            .hint("only a halted work order is retried; 'git arbiter status' shows which are")
            .into());
    };
    let reason = record
        .halt_reason
        .as_deref()
        .unwrap_or("no reason recorded");
    if !merge::RETRYABLE.contains(&reason) {
        return Err(InputError::new(format!(
            "work order '{id}' is halted for {reason}, not by its merge: its kept work is not merged as it is"
        ))
        .hint(format!("'git arbiter retry --rebuild {id}' builds it again"))
        .into());
    }
    Ok(())
}

use clap::{Args, ValueEnum};
use git_arbiter::error::{GitContext, InputError};
use git_arbiter::merge::{self, DriftScope, Outcome, Request};
use git_arbiter::orders::WorkOrder;
use git_arbiter::state::Store;
use git_arbiter::{drift, Error, ExitCode};
use serde_json::json;

use super::{out, Env};

/// Merge a work order's branch `arbiter/<id>` into the integration branch.
///
/// The merge is computed in the object database (no checkout) as a two-parent
/// merge commit `Merge <id>: <title>` with trailers `Arbiter-WO`,
/// `Arbiter-Attempt` and `Arbiter-Round-Base`. Before the branch moves, every
/// path the merge changes (renames count as delete + add; mode changes,
/// symlinks and submodules count) must be covered by the work order's declared
/// files. A conflict (exit 3) or undeclared drift (exit 4) halts the work order
/// and leaves the branch untouched. If the integration branch is checked out,
/// that worktree follows the merge; local changes there are never overwritten
/// (exit 2, nothing moves). The merge commit gets a note in
/// `refs/notes/arbiter` (`git log --notes=arbiter`).
#[derive(Args, Debug)]
pub struct MergeBackArgs {
    /// The work order's id
    id: String,
    /// The integration branch [default: the current branch]
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
    /// Check drift against the order's own declared files, or, more loosely,
    /// against the union of the declared files of the batch `git arbiter batch`
    /// would select now
    #[arg(long, value_enum, default_value_t = ScopeArg::Own, value_name = "SCOPE")]
    drift_scope: ScopeArg,
    /// Print `{"version":1,"merged":…}` on stdout
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ScopeArg {
    Own,
    Batch,
}

pub fn cmd_merge_back(env: &Env, args: MergeBackArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    let wo = orders.get(&args.id).ok_or_else(|| -> Error {
        InputError::new(format!("unknown work order '{}'", args.id))
            .hint("'git arbiter status' lists the work orders")
            .into()
    })?;
    let into = ctx.integration_branch(args.into.as_deref())?;
    let branch = git_arbiter::worktree::branch_ref(&args.id);
    let source = ctx
        .repo
        .try_find_reference(branch.as_str())
        .git_context(format!("reading {branch}"))?
        .ok_or_else(|| -> Error {
            InputError::new(format!(
                "branch '{}' does not exist",
                git_arbiter::worktree::branch_of(&args.id)
            ))
            .hint("create it with 'git arbiter worktree add <id>' and commit the work there")
            .into()
        })?
        .peel_to_id()
        .git_context(format!("resolving {branch}"))?
        .detach();
    let store = Store::new(&ctx.repo, ctx.retry_cap()?);
    let record = store.snapshot()?.record(&args.id)?;
    let (attempt, round_base) = merge::standalone(record.as_ref());
    let scope = match args.drift_scope {
        ScopeArg::Own => DriftScope::Own,
        ScopeArg::Batch => {
            let max = ctx.max_batch(None)?;
            let tip = ctx.branch_tip(&into).ok();
            DriftScope::Union(drift::batch_union(&ctx, &orders, &store, tip, max)?)
        }
    };
    let outcome = merge::merge_back(
        &ctx,
        &store,
        &Request {
            wo,
            into: &into,
            source,
            attempt,
            round_base,
            scope,
            extra_note: None,
            owner: None,
            retry: false,
        },
    )?;
    let id = &args.id;
    let target = into.shorten();
    let (value, human, code) = match &outcome {
        Outcome::Merged {
            sha,
            pre_merge_head,
            changed,
        } => {
            say!(
                "arbiter merge-back wo={id} outcome=merged sha={sha} changed={}",
                changed.len()
            );
            (
                json!({"version": 1, "merged": true, "sha": sha.to_string(),
                       "pre_merge_head": pre_merge_head.to_string(), "changed": changed}),
                format!(
                    "Merged {id} into {target} as {sha} ({} path{} changed)\n",
                    changed.len(),
                    if changed.len() == 1 { "" } else { "s" }
                ),
                ExitCode::Success,
            )
        }
        Outcome::UpToDate { tip } => {
            say!("arbiter merge-back wo={id} outcome=up_to_date tip={tip}");
            (
                json!({"version": 1, "merged": false, "up_to_date": true, "tip": tip.to_string()}),
                format!(
                    "{id}: {target} already contains {}; nothing to merge\n",
                    git_arbiter::worktree::branch_of(id)
                ),
                ExitCode::Success,
            )
        }
        Outcome::Conflict { paths } => {
            say!(
                "arbiter merge-back wo={id} outcome=conflict paths={}",
                paths.len()
            );
            (
                json!({"version": 1, "merged": false, "halted": true,
                       "halt_reason": merge::HALT_CONFLICT, "paths": paths}),
                format!(
                    "CONFLICT: {} does not merge cleanly into {target}; {id} is halted ({}):\n{}",
                    git_arbiter::worktree::branch_of(id),
                    merge::HALT_CONFLICT,
                    lines(paths, wo)
                ),
                ExitCode::MergeConflict,
            )
        }
        // Only a conductor's merge halts for this; a standalone one refuses.
        Outcome::CheckoutBlocked { paths } => {
            return Err(InputError::new(format!(
                "{id} was not merged: untracked files in the checkout are in the way: {}",
                paths.join(", ")
            ))
            .hint("move or remove them there first")
            .into())
        }
        Outcome::Withdrawn { reason } => {
            return Err(
                InputError::new(format!("{id} was not merged: it was {reason}"))
                    .hint("'git arbiter status' shows its state")
                    .into(),
            )
        }
        Outcome::Drift { paths } => {
            say!(
                "arbiter merge-back wo={id} outcome=drift paths={}",
                paths.len()
            );
            (
                json!({"version": 1, "merged": false, "halted": true,
                       "halt_reason": merge::HALT_DRIFT, "paths": paths}),
                format!(
                    "DRIFT: {} changes files its work order does not declare; {id} is halted ({}), {target} is unchanged:\n{}",
                    git_arbiter::worktree::branch_of(id),
                    merge::HALT_DRIFT,
                    lines(paths, wo)
                ),
                ExitCode::DriftRejected,
            )
        }
    };
    if args.json {
        out(&super::json(&value));
    } else {
        out(&human);
    }
    Ok(code)
}

fn lines(paths: &[String], wo: &WorkOrder) -> String {
    paths
        .iter()
        .map(|p| format!("  {}\n", drift::describe(p, Some(wo))))
        .collect()
}

use clap::{Args, ValueEnum};
use git_arbiter::run::kept::{self, Ask, Command, Scope};
use git_arbiter::run::merge;
use git_arbiter::run::queue::Fate;
use git_arbiter::state::orders::WorkOrder;
use git_arbiter::sys::error::InputError;
use git_arbiter::{run::drift, run::review, Error, ExitCode};
use serde_json::json;

use super::{out, progress, Env};

/// Merge a work order's branch `arbiter/<id>` into the integration branch.
///
/// The merge goes through the merge queue a round uses. It is computed in
/// the object database (no checkout) as a two-parent merge commit
/// `Merge <id>: <title>` with trailers `Arbiter-WO`, `Arbiter-Attempt` and
/// `Arbiter-Round-Base`. Before the branch moves, every path the merge
/// changes (renames count as delete + add; mode changes, symlinks and
/// submodules count) must be covered by the work order's declared files, and
/// with `--verify merged` (the default when a gate is configured) the gates
/// must pass on the merged result. A conflict (exit 3) or undeclared drift
/// (exit 4) halts the work order and leaves the branch untouched; failing
/// gates halt it `merged_gate_failed` (exit 1). If the integration branch is
/// checked out, that worktree follows the merge as with `git merge`: local
/// changes in files the merge does not touch stay as they are; a local
/// change or an untracked file where the merge writes refuses it before
/// anything changes (exit 2). The merge commit gets a note in
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
    /// Print `{"version":2,"merged":…}` on stdout
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    gates: super::GateArgs,
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
    ctx.follow_configured_remote(args.into.as_deref())?;
    let store = ctx.store()?;
    let id = review::resolve_order(&ctx, Some(&orders), &args.id)?;
    let gates = args.gates.resolve(&ctx)?;
    let ask = Ask {
        command: Command::MergeBack,
        ids: std::slice::from_ref(&id),
        into: args.into.as_deref(),
        scope: match args.drift_scope {
            ScopeArg::Own => Scope::Own,
            ScopeArg::Batch => Scope::Batch,
        },
    };
    let progress = progress::for_stderr();
    let landing = kept::land_kept(
        &ctx,
        &orders,
        &store,
        &ask,
        gates.checks(),
        progress.as_ref(),
    )?;
    drop(progress);
    let Some(landed) = landing.landed.into_iter().next() else {
        return Err(InputError::new(format!("{id} was not merged")).into());
    };
    let (value, human, code) = outcome(&ctx, &landing.into, orders.get(&id), &landed)?;
    if args.json {
        out(&super::json(&value));
    } else {
        out(&human);
    }
    Ok(code)
}

/// What a merge-back's landing ended in, as JSON, as text, and its exit
/// code; an error for an order that did not land and is not halted.
fn outcome(
    ctx: &git_arbiter::state::context::Context,
    into: &gix::refs::FullName,
    wo: Option<&WorkOrder>,
    landed: &kept::Landed,
) -> Result<Rendered, Error> {
    let id = landed.id.as_str();
    let target = into.shorten().to_string();
    Ok(match &landed.fate {
        Fate::Landed { sha, .. } => merged(id, &target, *sha, landed),
        Fate::UpToDate => up_to_date(id, &target, ctx.branch_tip(into)?),
        Fate::Halted { reason, paths } => halted(id, &target, reason, paths, wo),
        Fate::GateFailed { detail } => gate_failed(id, &target, detail),
        Fate::Waiting { why, hint } => {
            return Err(InputError::new(format!(
                "{id} was not merged: {why}; it is verified and waits to land"
            ))
            .hint(format!(
                "{hint}, then 'git arbiter retry {id}' (or 'git arbiter round')"
            ))
            .into())
        }
        Fate::Withdrawn { reason } => {
            return Err(
                InputError::new(format!("{id} was not merged: it was {reason}"))
                    .hint("'git arbiter status' shows its state")
                    .into(),
            )
        }
        Fate::Interrupted => return Err(Error::Interrupted),
    })
}

/// A merge-back's outcome as JSON, as text, and its exit code.
type Rendered = (serde_json::Value, String, ExitCode);

/// Merged as `sha`.
fn merged(id: &str, target: &str, sha: gix::ObjectId, landed: &kept::Landed) -> Rendered {
    let changed = &landed.changed;
    say!(
        "arbiter merge-back wo={id} outcome=merged sha={sha} changed={}",
        changed.len()
    );
    let pre = landed.pre_merge_head.map(|p| p.to_string());
    (
        json!({"version": git_arbiter::JSON_VERSION, "merged": true, "sha": sha.to_string(),
               "pre_merge_head": pre, "changed": changed}),
        format!(
            "Merged {id} into {target} as {sha} ({} path{} changed)\n",
            changed.len(),
            if changed.len() == 1 { "" } else { "s" }
        ),
        ExitCode::Success,
    )
}

/// The integration branch (at `tip`) already contains the order's branch.
fn up_to_date(id: &str, target: &str, tip: gix::ObjectId) -> Rendered {
    let branch = git_arbiter::run::worktree::branch_of(id);
    say!("arbiter merge-back wo={id} outcome=up_to_date tip={tip}");
    (
        json!({"version": git_arbiter::JSON_VERSION, "merged": false, "up_to_date": true, "tip": tip.to_string()}),
        format!("{id}: {target} already contains {branch}; nothing to merge\n"),
        ExitCode::Success,
    )
}

/// Halted by its merge: a conflict, or else undeclared drift.
fn halted(
    id: &str,
    target: &str,
    reason: &str,
    paths: &[String],
    wo: Option<&WorkOrder>,
) -> Rendered {
    let branch = git_arbiter::run::worktree::branch_of(id);
    let (outcome, halt_reason, text, code) = if reason == merge::HALT_CONFLICT {
        (
            "conflict",
            merge::HALT_CONFLICT,
            format!(
                "CONFLICT: {branch} does not merge cleanly into {target}; {id} is halted ({})",
                merge::HALT_CONFLICT
            ),
            ExitCode::MergeConflict,
        )
    } else {
        (
            "drift",
            merge::HALT_DRIFT,
            format!(
                "DRIFT: {branch} changes files its work order does not declare; {id} is halted ({}), {target} is unchanged",
                merge::HALT_DRIFT
            ),
            ExitCode::DriftRejected,
        )
    };
    say!(
        "arbiter merge-back wo={id} outcome={outcome} paths={}",
        paths.len()
    );
    (
        json!({"version": git_arbiter::JSON_VERSION, "merged": false, "halted": true,
               "halt_reason": halt_reason, "paths": paths}),
        format!("{text}:\n{}", lines(paths, wo)),
        code,
    )
}

/// The gates failed on the merged result: halted, the branch unchanged.
fn gate_failed(id: &str, target: &str, detail: &str) -> Rendered {
    let reason = git_arbiter::run::queue::MERGED_GATE_FAILED;
    say!("arbiter merge-back wo={id} outcome={reason}");
    (
        json!({"version": git_arbiter::JSON_VERSION, "merged": false, "halted": true,
               "halt_reason": reason, "detail": detail}),
        format!(
            "GATES FAILED on the merged result: {detail}; {id} is halted ({reason}), {target} is unchanged\n"
        ),
        ExitCode::Escalation,
    )
}

fn lines(paths: &[String], wo: Option<&WorkOrder>) -> String {
    paths
        .iter()
        .map(|p| format!("  {}\n", drift::describe(p, wo)))
        .collect()
}

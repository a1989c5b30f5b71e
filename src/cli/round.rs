use std::time::Duration;

use clap::Args;
use git_arbiter::run::queue::{self, Verify};
use git_arbiter::run::round::{self, Options, Schedule, Summary};
use git_arbiter::state::cost::COST_CAP_EXCEEDED;
use git_arbiter::state::orders::Orders;
use git_arbiter::sys::clock::format_ms;
use git_arbiter::sys::error::InputError;
use git_arbiter::{run::drift, run::merge, Error, ExitCode};

use super::{json, out, progress, Env};

/// Run work orders: built concurrently in their own worktrees, landed through a verified merge queue.
///
/// Continuous schedule (the default): whenever a slot frees, the next eligible
/// work order (id order, dependencies done, declared files disjoint from
/// every order in progress on any conductor: its claim) is dispatched off
/// the current integration tip: its attempt is recorded, a worktree and
/// branch `arbiter/<id>` made, the builder run within the machine-wide
/// slots, what it left uncommitted committed, gates and critics run. An
/// order that passed enters the merge queue at once; the queue lands
/// whatever is waiting as one batch: the merges are chained in the object
/// database on top of the tip (each drift-checked against its own declared
/// files), and with `--verify merged` the gates run once on the chain's tip
/// in a scratch worktree before the branch moves to it by one
/// compare-and-swap. If they fail, the chain is bisected (gates on
/// prefixes, then the chain without either of the last two suspects): what
/// passed lands, the first failing merge goes back for rework
/// (`merged_gate_failed`, its attempt spent), the rest are chained again and
/// verified again.
///
/// `--schedule rounds` runs lockstep rounds instead: a batch of pairwise
/// disjoint orders is built, then its clean orders land as one chain, then
/// the next round starts off the new tip.
///
/// Builders run via `sh -c` in their worktree with ARBITER_WO, ARBITER_WO_FILE,
/// ARBITER_TITLE, ARBITER_ATTEMPT, ARBITER_BASE (and its older name
/// ARBITER_ROUND_BASE), ARBITER_WORKTREE and
/// ARBITER_REPO (the main worktree's top, or a bare repository's git dir) set
/// and git's own variables (GIT_DIR, GIT_INDEX_FILE, …) removed; output goes
/// to `.git/arbiter/logs/<id>/attempt-<n>.log`. Gates and critics run the
/// same way. Every command also gets ARBITER_REPORT, a file beside that log
/// where it may write what it cost as JSON (`{"cost_usd": 0.42, "tokens":
/// {"input": 1200, "output": 800}, "model": "…"}`): summed per order and
/// run, and read by `--max-cost` and `arbiter.maxCostPerOrder` (an order
/// whose attempts together reported more halts, `cost_cap_exceeded`, once
/// one fails). A build, gate or critic command that exits 126 or 127 (not
/// executable, not found; a relative path resolves in the worktree, use
/// "$ARBITER_REPO/…" for a script in the repository) is a configuration
/// error: its attempt is given back, nothing more is started, exit 2.
///
/// Exit: 0 all done, 1 escalation (a halted work order remains, the budget
/// command refused, the cost budget was reached, or the final gate
/// failed), 2 bad input or a command that cannot run, 130 stopped.
#[derive(Args, Debug)]
pub struct RoundArgs {
    /// Builder command, run via `sh -c` in each work order's worktree [default: `arbiter.build`]
    #[arg(long, value_name = "CMD")]
    build: Option<String>,
    /// Gate command (repeatable): exit ≠ 0 discards the attempt for a retry [default: `arbiter.gate`]
    #[arg(long = "gate", value_name = "CMD")]
    gates: Vec<String>,
    /// Critic command (repeatable): exit ≠ 0 halts the work order (`blocking_critique`) [default: `arbiter.critic`]
    #[arg(long = "critic", value_name = "CMD")]
    critics: Vec<String>,
    /// Run once on the integration tip when every work order is done; failure escalates [default: `arbiter.finalGate`]
    #[arg(long, value_name = "CMD")]
    final_gate: Option<String>,
    /// Checked once per round; exit ≠ 0 stops with an escalation [default: `arbiter.budgetCmd`]
    #[arg(long, value_name = "CMD")]
    budget_cmd: Option<String>,
    /// Dispatch nothing new once the cost the run's builders reported (`$ARBITER_REPORT`) reaches USD; running builds finish, the run stops with `cost_budget` [default: `arbiter.maxCost`]
    #[arg(long, value_name = "USD", value_parser = parse_usd, allow_negative_numbers = true)]
    max_cost: Option<f64>,
    /// The integration branch [default: the current branch]
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
    /// At most N work orders in flight for this conductor (per round with `--schedule rounds`) [default: `arbiter.maxBatch`, else 8]
    #[arg(long, value_name = "N")]
    max: Option<u32>,
    /// Machine-wide cap on concurrent builds [default: `arbiter.maxTotal`, else 6]
    #[arg(long, value_name = "N")]
    max_total: Option<u32>,
    /// Dispatch only what is eligible at the start (one round with `--schedule rounds`)
    #[arg(long)]
    once: bool,
    /// `continuous` (a freed slot takes the next order, passed orders land at once) or `rounds` (lockstep) [default: `arbiter.schedule`, else continuous]
    #[arg(long, value_name = "SCHEDULE", value_parser = ["continuous", "rounds"])]
    schedule: Option<String>,
    /// `merged` (gates run on the merged result before the branch moves) or `none` [default: `arbiter.verify`, else merged when a gate is configured]
    #[arg(long, value_name = "WHAT", value_parser = ["merged", "none"])]
    verify: Option<String>,
    /// Coordinate with other machines through this git remote: its notes ref and integration branch are the state, every transition a compare-and-swap push [default: `arbiter.remote`]
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
    /// Print the planned batches; build nothing, change nothing
    #[arg(long)]
    dry_run: bool,
    /// Print the final summary as versioned JSON on stdout
    #[arg(long)]
    json: bool,
    /// Per-build time limit, e.g. `90s`, `10m`, `1h30m` [default: `arbiter.timeout`, else none]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Drift scope: `own` (the work order's declared files) or `batch` (the union of the round's batch)
    #[arg(long, value_name = "SCOPE", default_value = "own", value_parser = ["own", "batch"])]
    drift_scope: String,
    /// Fresh worktrees: one created and removed per attempt instead of reused pooled ones [default: `arbiter.pool`, on]
    #[arg(long)]
    no_pool: bool,
    /// Run in a worktree before its first build, and again when a path matching `arbiter.setupInputs` changed; exit ≠ 0 fails the attempt (retryable, step `setup`) [default: `arbiter.setup`]
    #[arg(long, value_name = "CMD")]
    setup: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub use git_arbiter::sys::duration::parse as parse_duration;

fn parse_usd(text: &str) -> Result<f64, String> {
    git_arbiter::state::cost::parse_usd(text)
}

/// `--timeout` if given, else `arbiter.timeout`, else none.
pub fn timeout_or_config(
    ctx: &git_arbiter::state::context::Context,
    flag: Option<Duration>,
) -> Result<Option<Duration>, Error> {
    if flag.is_some() {
        return Ok(flag);
    }
    ctx.config_string("arbiter.timeout")
        .map(|v| {
            parse_duration(&v).map_err(|e| {
                InputError::new(format!("config arbiter.timeout: {e}"))
                    .hint("e.g. 'git config arbiter.timeout 30m'")
                    .into()
            })
        })
        .transpose()
}

/// `--verify` if given, else `arbiter.verify`, else `merged` when a gate is configured.
pub fn verify_or_config(
    ctx: &git_arbiter::state::context::Context,
    flag: Option<&str>,
    has_gates: bool,
) -> Result<Verify, Error> {
    match flag {
        Some(flag) => {
            Verify::parse(Some(flag), has_gates).map_err(|e| queue::bad_verify("--verify", e))
        }
        None => Verify::parse(ctx.config_string("arbiter.verify").as_deref(), has_gates)
            .map_err(|e| queue::bad_verify("config arbiter.verify", e)),
    }
}

/// `arbiter.retryDelay`: how long an order whose last attempt failed waits
/// before it is built again (none by default).
fn retry_delay(ctx: &git_arbiter::state::context::Context) -> Result<Duration, Error> {
    ctx.config_string("arbiter.retryDelay")
        .map(|v| {
            parse_duration(&v).map_err(|e| {
                InputError::new(format!("config arbiter.retryDelay: {e}"))
                    .hint("e.g. 'git config arbiter.retryDelay 5m'")
                    .into()
            })
        })
        .transpose()
        .map(Option::unwrap_or_default)
}

pub fn cmd_round(env: &Env, args: RoundArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    say_what_is_not_an_order(&orders);
    if let Some(remote) = args
        .remote
        .as_deref()
        .map(str::to_owned)
        .or_else(|| ctx.configured_remote())
    {
        ctx.connect_remote(&remote, args.into.as_deref(), false)?;
    }
    let or_config = |flag: Vec<String>, key: &str| {
        if flag.is_empty() {
            ctx.config_strings(key)
        } else {
            flag
        }
    };
    let timeout = timeout_or_config(&ctx, args.timeout)?;
    let max_total = git_arbiter::run::slots::cap(Some(&ctx), args.max_total)?;
    let gates = or_config(args.gates, "arbiter.gate");
    let schedule = match args.schedule {
        Some(flag) => {
            Schedule::parse(&flag).map_err(|e| InputError::new(format!("--schedule: {e}")))?
        }
        None => match ctx.config_string("arbiter.schedule") {
            Some(value) => Schedule::parse(&value).map_err(|e| {
                InputError::new(format!("config arbiter.schedule: {e}"))
                    .hint("e.g. 'git config arbiter.schedule rounds'")
            })?,
            None => Schedule::default(),
        },
    };
    let verify = verify_or_config(&ctx, args.verify.as_deref(), !gates.is_empty())?;
    let opts = Options {
        into: args.into,
        build: args
            .build
            .or_else(|| ctx.config_string("arbiter.build"))
            .unwrap_or_default(),
        gates,
        critics: or_config(args.critics, "arbiter.critic"),
        final_gate: args
            .final_gate
            .or_else(|| ctx.config_string("arbiter.finalGate")),
        budget_cmd: args
            .budget_cmd
            .or_else(|| ctx.config_string("arbiter.budgetCmd")),
        max: ctx.max_batch(args.max)?,
        max_total,
        once: args.once,
        dry_run: args.dry_run,
        timeout,
        retry_delay: retry_delay(&ctx)?,
        drift_batch_scope: args.drift_scope == "batch",
        max_cost: match args.max_cost {
            Some(flag) => Some(flag),
            None => ctx.config_usd("arbiter.maxCost")?,
        },
        max_cost_per_order: ctx.config_usd("arbiter.maxCostPerOrder")?,
        schedule,
        verify,
        pool: git_arbiter::run::pool::Options::resolve(&ctx, args.no_pool, args.setup, max_total)?,
    };
    let progress = progress::for_stderr();
    let summary = round::run(&ctx, &orders, &opts, progress.as_ref())?;
    drop(progress);
    if args.json {
        out(&json(&summary));
    } else {
        let kept = kept_worktrees(&ctx, &summary);
        out(&render(&summary, opts.dry_run, &orders, &kept));
    }
    Ok(summary.exit)
}

/// Said once, before a run: an orders directory with no order in it, and
/// files there that are not read as orders (`notes.txt`, `a.MD`): either
/// way nothing would say why nothing ran.
pub fn say_what_is_not_an_order(orders: &Orders) {
    let stray = git_arbiter::state::orders::stray_files(&orders.dir);
    if !stray.is_empty() {
        let names: Vec<String> = stray
            .iter()
            .map(|p| {
                p.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect();
        say!(
            "warning: not read as work orders (only '.md' files are): {} in {}",
            names.join(", "),
            orders.dir.display()
        );
    }
    if orders.is_empty() {
        say!(
            "warning: no work orders in {}: a work order is a file '<id>.md' there ('git arbiter demo' shows some)",
            orders.dir.display()
        );
    }
}

/// Where each halted order's kept branch is checked out (a worktree that
/// left the pool, or a fresh one), for the escalation to name it. Display
/// only: an unreadable worktree list names none.
pub fn kept_worktrees(
    ctx: &git_arbiter::state::context::Context,
    summary: &Summary,
) -> std::collections::BTreeMap<String, std::path::PathBuf> {
    let mut out = std::collections::BTreeMap::new();
    for h in &summary.halted {
        let Some(full) = h
            .branch
            .as_deref()
            .and_then(|b| gix::refs::FullName::try_from(format!("refs/heads/{b}").as_str()).ok())
        else {
            continue;
        };
        let found =
            git_arbiter::run::user_checkout::worktrees_with_branch(ctx, &full).unwrap_or_default();
        if let Some(dir) = found.iter().find_map(|wt| wt.workdir()) {
            out.insert(h.wo_id.clone(), dir.to_owned());
        }
    }
    out
}

pub fn render(
    summary: &Summary,
    dry_run: bool,
    orders: &Orders,
    kept: &std::collections::BTreeMap<String, std::path::PathBuf>,
) -> String {
    let mut s = String::new();
    if dry_run {
        if summary.planned.is_empty() {
            s.push_str("nothing to run\n");
        }
        for (i, batch) in summary.planned.iter().enumerate() {
            s.push_str(&format!("round {}: {}\n", i + 1, batch.join(" ")));
        }
        return s;
    }
    let counted = match summary.schedule {
        Some("continuous") => format!("{} landed batch(es)", summary.landed_batches),
        _ => format!("{} round(s)", summary.rounds),
    };
    let waiting = match summary.waiting.len() {
        0 => String::new(),
        n => format!(", {n} waiting to land"),
    };
    s.push_str(&format!(
        "{counted}: {} done, {} halted, {} pending{waiting}\n",
        summary.done.len(),
        summary.halted.len(),
        summary.pending.len()
    ));
    if summary.verify == Some("merged") {
        s.push_str(&format!(
            "verified as merged: {} gate run(s)\n",
            summary.gate_runs
        ));
    }
    if let Some(busy) = summary.slot_utilisation {
        s.push_str(&format!("slots busy: {:.0}%\n", busy * 100.0));
    }
    if let Some(remote) = &summary.remote {
        s.push_str(&format!(
            "remote {}: {} push(es), {} lost a race and were retried\n",
            remote.name, remote.pushes, remote.lost_races
        ));
    }
    if let Some(spent) = &summary.spent {
        s.push_str(&format!("cost: {}\n", spent.describe()));
        if let Some(verification) = &summary.verification {
            s.push_str(&format!(
                "      of it, gates on merged results: {}\n",
                verification.describe()
            ));
        }
    }
    s.push_str(&orders_table(summary));
    if let Some(why) = &summary.stopped {
        s.push_str(&format!("stopped: {why}\n"));
    }
    if let Some(gate) = &summary.final_gate {
        s.push_str(&format!(
            "final gate: {} ({})\n",
            if gate.passed { "passed" } else { "FAILED" },
            gate.detail.as_deref().unwrap_or("")
        ));
    }
    s.push_str(&escalation(summary, orders, kept));
    if !summary.waiting.is_empty() {
        s.push_str("\nVERIFIED, WAITING TO LAND: these passed, but the checkout of the branch could not follow:\n");
        for w in &summary.waiting {
            s.push_str(&format!(
                "  {}  {}\n",
                w.wo_id,
                w.why.as_deref().unwrap_or("")
            ));
            s.push_str(&format!("      branch: {}\n", w.branch));
        }
        s.push_str("      next:   resolve that (commit or stash the changes in the way), then `git arbiter round` lands them without a rebuild\n");
    }
    if !summary.pending.is_empty() {
        s.push_str(&format!("pending: {}\n", summary.pending.join(" ")));
    }
    s.push_str(&held_elsewhere(summary));
    s
}

/// The per-order table of a run: outcome, attempts and where the time went.
fn orders_table(summary: &Summary) -> String {
    if summary.orders.is_empty() {
        return String::new();
    }
    let ms = |v: Option<u64>| v.map_or("-".to_owned(), format_ms);
    // A cost column only when some builder reported one.
    let costs = summary.orders.iter().any(|o| o.spent.is_some());
    let rows: Vec<Vec<String>> = summary
        .orders
        .iter()
        .map(|o| {
            let mut row = vec![
                o.wo_id.clone(),
                o.outcome.clone(),
                o.attempts.to_string(),
                ms(o.queue_wait_ms),
                ms(o.build_ms),
                ms(o.gate_ms),
                ms(o.critic_ms),
                ms(o.merge_wait_ms),
                o.changed.map_or("-".to_owned(), |c| c.to_string()),
            ];
            if costs {
                row.push(super::cost_cell(o.spent.as_ref(), false));
            }
            row
        })
        .collect();
    let mut header = vec![
        "order", "outcome", "attempts", "wait", "build", "gates", "critics", "queued", "changed",
    ];
    if costs {
        header.push("cost");
    }
    let table = super::table(&header, &rows);
    format!("\n{table}\n")
}

/// The halted orders, each with why, its last failure, where its work is
/// kept and what to do next.
fn escalation(
    summary: &Summary,
    orders: &Orders,
    kept: &std::collections::BTreeMap<String, std::path::PathBuf>,
) -> String {
    let mut s = String::new();
    if !summary.halted.is_empty() {
        s.push_str("\nESCALATION: these work orders are halted and need a human:\n");
        for h in &summary.halted {
            s.push_str(&format!("  {}  {}", h.wo_id, h.reason));
            if !h.paths.is_empty() {
                // Drift and conflict name paths; other halts keep a detail line as it is.
                let paths: Vec<String> =
                    if [merge::HALT_DRIFT, merge::HALT_CONFLICT].contains(&h.reason.as_str()) {
                        let wo = orders.get(&h.wo_id);
                        h.paths.iter().map(|p| drift::describe(p, wo)).collect()
                    } else {
                        h.paths.clone()
                    };
                s.push_str(&format!(" [{}]", paths.join(", ")));
            }
            s.push('\n');
            if let Some(failure) = &h.last_failure {
                s.push_str(&format!("      last:   {failure}\n"));
            }
            if let Some(b) = &h.branch {
                s.push_str(&format!("      branch: {b}\n"));
            }
            if let Some(w) = kept.get(&h.wo_id) {
                s.push_str(&format!("      worktree: {}\n", w.display()));
            }
            s.push_str(&format!(
                "      next:   {}\n",
                next_step(&h.reason, &h.wo_id)
            ));
            if let Some(l) = &h.log {
                s.push_str(&format!("      log:    {l}\n"));
            }
        }
    }
    s
}

/// The orders another conductor holds, by conductor.
fn held_elsewhere(summary: &Summary) -> String {
    let mut s = String::new();
    let mut by_conductor: std::collections::BTreeMap<&str, (String, Vec<&str>)> =
        Default::default();
    for held in &summary.held_elsewhere {
        let at = match (&held.machine, held.pid) {
            (Some(machine), _) => format!(" on {machine}"),
            (None, Some(pid)) => format!(", pid {pid}"),
            (None, None) => String::new(),
        };
        let entry = by_conductor
            .entry(held.conductor.as_str())
            .or_insert((at, Vec::new()));
        entry.1.push(&held.wo_id);
    }
    for (conductor, (pid, ids)) in by_conductor {
        s.push_str(&format!(
            "  {} held by another conductor ({conductor}{pid}): it builds and lands them; `git arbiter status` follows them\n",
            ids.join(" ")
        ));
    }
    s
}

/// What a human does about a halt of this reason.
fn next_step(reason: &str, id: &str) -> String {
    match reason {
        merge::HALT_DRIFT => format!(
            "declare those paths in the order (or take them out of its branch), then `git arbiter retry {id}`"
        ),
        merge::HALT_CONFLICT => format!(
            "resolve the conflict on its branch, then `git arbiter retry {id}`; or `git arbiter retry --rebuild {id}`"
        ),
        merge::HALT_CHECKOUT_BLOCKED => format!(
            "move those untracked files out of the checkout, then `git arbiter retry {id}`"
        ),
        COST_CAP_EXCEEDED => format!(
            "its attempts cost more than arbiter.maxCostPerOrder allows (every attempt on record counts): look at its kept work and log; to spend more, raise the cap, then `git arbiter retry --rebuild {id}`"
        ),
        queue::MERGED_GATE_FAILED => format!(
            "its kept work fails the gates once merged: fix it on its branch (or fix the integration branch), then `git arbiter retry {id}`; or `git arbiter retry --rebuild {id}`"
        ),
        _ => format!("when fixed, `git arbiter retry --rebuild {id}` builds it afresh"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_halt_says_what_to_do_next() {
        use git_arbiter::run::merge;
        for reason in merge::RETRYABLE {
            assert!(
                super::next_step(reason, "wo-1").ends_with("`git arbiter retry wo-1`")
                    || super::next_step(reason, "wo-1").contains("`git arbiter retry wo-1`;"),
                "{reason}"
            );
        }
        assert!(super::next_step("blocking_critique", "wo-1").contains("retry --rebuild wo-1"));
    }
}

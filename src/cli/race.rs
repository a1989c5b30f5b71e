use std::time::Duration;

use clap::Args;
use git_arbiter::run::race::{self, Options, Summary};
use git_arbiter::state::orders::Orders;
use git_arbiter::sys::error::InputError;
use git_arbiter::{run::drift, Error, ExitCode};

use super::round::{parse_duration, timeout_or_config};
use super::{json, out, progress, Env};

/// Best-of-N: build N instances of one work order, merge the best one back.
///
/// Each instance k (0-based) gets its own worktree on branch
/// `arbiter-race/<id>/<k>`, all cut from the integration tip (a pooled one, see
/// `git arbiter pool`; `race-<id>-<k>` with `--no-pool`), and is built
/// concurrently within the machine-wide slots with the round's environment
/// plus ARBITER_INSTANCE=<k>. What the builder leaves is committed, the gates
/// run, and for each passing instance `--score` runs in its worktree: its last
/// non-empty stdout line must be an integer. The highest score wins, the
/// earliest finish (gates completed) breaks ties, nothing below `--min-score`
/// wins. The winner is merged back like a round's (no-ff, drift checked
/// against the order's declared files, conflicts never auto-resolved); on
/// conflict or drift the next-best passing instance is tried. A write-once
/// pick record is attached to the merge commit in `refs/notes/arbiter-picks`
/// (`git notes --ref=arbiter-picks show <merge>`). Losers' worktrees and
/// branches are removed unless `--keep-losers`. A build, gate or score
/// command that exits 126 or 127 (not executable, not found) gives the
/// attempt back and starts no further instance, exit 2.
///
/// Exit: 0 merged, 1 escalation (no winner, or none could merge), 2 bad input
/// or a command that cannot run, 130 stopped.
#[derive(Args, Debug)]
pub struct RaceArgs {
    /// The work order to race
    #[arg(value_name = "ID")]
    id: String,
    /// Number of instances
    #[arg(short = 'n', value_name = "N")]
    n: u32,
    /// Builder command, run via `sh -c` in each instance's worktree [default: `arbiter.build`]
    #[arg(long, value_name = "CMD")]
    build: Option<String>,
    /// Gate command (repeatable): exit ≠ 0 rules the instance out [default: `arbiter.gate`]
    #[arg(long = "gate", value_name = "CMD")]
    gates: Vec<String>,
    /// Score command: its last non-empty stdout line is the instance's integer score
    #[arg(long, value_name = "CMD")]
    score: String,
    /// Nothing below this score wins [default: `arbiter.minScore`, else no floor]
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    min_score: Option<i64>,
    /// Keep the losers' worktrees and branches
    #[arg(long)]
    keep_losers: bool,
    /// The integration branch [default: the current branch]
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
    /// Machine-wide cap on concurrent builds [default: `arbiter.maxTotal`, else 6]
    #[arg(long, value_name = "N")]
    max_total: Option<u32>,
    /// Per-command time limit, e.g. `90s`, `10m`, `1h30m` [default: `arbiter.timeout`, else none]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Print the summary (with the pick record) as versioned JSON on stdout
    #[arg(long)]
    json: bool,
    /// `merged` (gates run on the winner merged onto the tip before the branch moves; failing, the next-best is tried) or `none` [default: `arbiter.verify`, else merged when a gate is configured]
    #[arg(long, value_name = "WHAT", value_parser = ["merged", "none"])]
    verify: Option<String>,
    /// Fresh worktrees: one created and removed per attempt instead of reused pooled ones [default: `arbiter.pool`, on]
    #[arg(long)]
    no_pool: bool,
    /// Run in a worktree before its first build, and again when a path matching `arbiter.setupInputs` changed; exit ≠ 0 fails the attempt (retryable, step `setup`) [default: `arbiter.setup`]
    #[arg(long, value_name = "CMD")]
    setup: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub fn cmd_race(env: &Env, args: RaceArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    if let Some(remote) = ctx.configured_remote() {
        // Its state would be this clone's alone, and the next `round
        // --remote` would refuse it: said now, before anything is built.
        return Err(InputError::new(format!(
            "race does not run through a remote yet, and arbiter.remote is '{remote}'"
        ))
        .hint("run it without the remote: 'git -c arbiter.remote= arbiter race …'")
        .into());
    }
    let orders = ctx.load_orders(env.orders_flag())?;
    let timeout = timeout_or_config(&ctx, args.timeout)?;
    let min_score = match args.min_score {
        Some(s) => Some(s),
        None => match ctx.config_string("arbiter.minScore") {
            Some(v) => Some(v.trim().parse::<i64>().map_err(|_| {
                InputError::new(format!("config arbiter.minScore: '{v}' is not an integer"))
                    .hint("e.g. 'git config arbiter.minScore 7'")
            })?),
            None => None,
        },
    };
    let gates = if args.gates.is_empty() {
        ctx.config_strings("arbiter.gate")
    } else {
        args.gates
    };
    let max_total = git_arbiter::run::slots::cap(Some(&ctx), args.max_total)?;
    let verify = super::round::verify_or_config(&ctx, args.verify.as_deref(), !gates.is_empty())?;
    let opts = Options {
        into: args.into,
        n: args.n,
        build: args
            .build
            .or_else(|| ctx.config_string("arbiter.build"))
            .unwrap_or_default(),
        gates,
        score: args.score,
        min_score,
        keep_losers: args.keep_losers,
        max_total,
        timeout,
        verify,
        pool: git_arbiter::run::pool::Options::resolve(&ctx, args.no_pool, args.setup, max_total)?,
    };
    let progress = progress::for_stderr();
    let summary = race::run(&ctx, &orders, &args.id, &opts, progress.as_ref())?;
    drop(progress);
    if args.json {
        out(&json(&summary));
    } else {
        out(&render(&summary, &orders));
    }
    Ok(summary.exit)
}

pub fn render(summary: &Summary, orders: &Orders) -> String {
    let wo = orders.get(&summary.wo_id);
    let mut s = String::new();
    let instances = |s: &mut String| {
        for i in &summary.instances {
            s.push_str(&format!(
                "  #{}  {:<14} score={}",
                i.instance,
                i.verdict,
                i.score.map_or("-".into(), |v| v.to_string())
            ));
            if let Some(r) = &i.reason {
                s.push_str(&format!("  ({r})"));
            }
            if let Some(spent) = &i.spent {
                s.push_str(&format!("  cost: {}", spent.describe()));
            }
            if i.kept {
                s.push_str(&format!("  kept: {}", i.branch));
            }
            s.push_str(&format!("\n      log: {}\n", i.log));
        }
        if let Some(spent) = &summary.spent {
            s.push_str(&format!("cost of the race: {}\n", spent.describe()));
        }
    };
    if let Some(why) = &summary.stopped {
        s.push_str(&format!("race {}: stopped: {why}\n", summary.wo_id));
        instances(&mut s);
        return s;
    }
    match (&summary.winner, &summary.merge_commit) {
        (Some(w), Some(sha)) => {
            s.push_str(&format!(
                "race {}: instance {w} won (score {}), merged as {sha}\n",
                summary.wo_id,
                summary.pick.as_ref().map_or(0, |p| p.score)
            ));
            s.push_str(&format!(
                "pick record: git notes --ref=arbiter-picks show {sha}\n"
            ));
            instances(&mut s);
        }
        _ => {
            s.push_str(&format!(
                "ESCALATION: race {}: {}\n",
                summary.wo_id,
                summary.escalation.as_deref().unwrap_or("no winner")
            ));
            for m in &summary.merges {
                s.push_str(&format!("  merge of #{}: {}", m.instance, m.outcome));
                if !m.paths.is_empty() {
                    let paths: Vec<String> =
                        m.paths.iter().map(|p| drift::describe(p, wo)).collect();
                    s.push_str(&format!(" [{}]", paths.join(", ")));
                }
                s.push('\n');
            }
            instances(&mut s);
        }
    }
    s
}

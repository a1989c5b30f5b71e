use clap::{Args, Subcommand};
use git_arbiter::run::pool::{self, Row};
use git_arbiter::{Error, ExitCode};
use serde::Serialize;

use super::{json, out, table, Env};

/// Show and prune the pool of warm worktrees.
///
/// With `arbiter.pool` on (the default; `round --no-pool` and `race
/// --no-pool` turn it off for one run), attempts run in worktrees under
/// `<worktreeDir>/pool/<n>` that are reused: a free one is switched to the
/// next order's branch and base by writing only the files that differ,
/// untracked files are removed and ignored ones (build caches such as
/// `target/`) kept unless `arbiter.poolKeepIgnored` is false. At most
/// `arbiter.poolSize` free worktrees stay (default: the slot cap plus one);
/// `arbiter.poolMaxBytes` bounds their ignored content (least recently used
/// lose theirs first). A halted order's worktree leaves the pool and stays as
/// it is until `git arbiter clear` removes it. They are ordinary linked
/// worktrees: `git worktree list`, `git status` and `git worktree remove`
/// work on them.
#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    Status(StatusArgs),
    Prune(PruneArgs),
}

/// List the pooled worktrees: state, branch, holder, base, ignored bytes, last setup.
///
/// States: `free` (ready for the next order), `held` (an attempt runs in it),
/// `left` (its order halted: kept until `clear`), `broken` (a run was killed
/// while it made, switched or reset it: the next run removes it). Read-only.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Print `{"version":2,"worktrees":[{name, path, state, branch, held_by, base, ignored_bytes, last_setup_tree, last_setup_at, last_use}]}`
    #[arg(long)]
    json: bool,
}

/// Remove free pooled worktrees beyond `arbiter.poolSize` (least recently used first) and broken or half-made ones.
///
/// Worktrees in use and those of halted orders are never removed. Prints the
/// removed paths.
#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Remove every free pooled worktree, not only those beyond the pool size
    #[arg(long)]
    all: bool,
}

#[derive(Serialize)]
struct StatusOutput<'a> {
    version: u32,
    worktrees: &'a [Row],
}

pub fn cmd_pool(env: &Env, cmd: PoolCommand) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    match cmd {
        PoolCommand::Status(args) => {
            let rows = pool::status(&ctx)?;
            if args.json {
                out(&json(&StatusOutput {
                    version: git_arbiter::JSON_VERSION,
                    worktrees: &rows,
                }));
            } else {
                out(&render(&rows));
            }
        }
        PoolCommand::Prune(args) => {
            let cap = git_arbiter::run::slots::cap(Some(&ctx), None)?;
            let opts = pool::Options::resolve(&ctx, false, None, cap)?;
            let removed = pool::prune(&ctx, opts.size, args.all)?;
            let mut text = String::new();
            for path in &removed {
                text.push_str(&format!("removed {}\n", path.display()));
            }
            out(&text);
            eprintln!("arbiter pool prune removed={}", removed.len());
        }
    }
    Ok(ExitCode::Success)
}

fn render(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                r.state.to_owned(),
                r.branch.clone().unwrap_or_else(|| "-".into()),
                r.held_by.map_or("-".into(), |pid| format!("pid {pid}")),
                r.base
                    .as_deref()
                    .map_or("-".into(), |b| b[..b.len().min(12)].to_owned()),
                r.ignored_bytes.map_or("-".into(), human_bytes),
                r.last_setup_tree
                    .as_deref()
                    .map_or("-".into(), |t| format!("tree {}", &t[..t.len().min(12)])),
                r.path.display().to_string(),
            ]
        })
        .collect();
    table(
        &[
            "n",
            "state",
            "branch",
            "held by",
            "base",
            "ignored",
            "last setup",
            "path",
        ],
        &cells,
    )
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = b as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

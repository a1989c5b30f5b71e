use clap::Args;
use git_arbiter::run::doctor::{self, Finding, Report};
use git_arbiter::{Error, ExitCode};
use serde::Serialize;

use super::{json, out, Env};

/// Find, and with --fix repair, what crashes and killed processes leave behind.
///
/// Reports, with paths: stale lock files on refs (`refs/**.lock`,
/// `packed-refs.lock`, `HEAD.lock`; git-arbiter's own refs and the
/// integration branch named), each worktree's `index.lock`, worktrees locked
/// `initializing` by an add that never finished; builders a killed
/// conductor left running; arbiter worktrees and
/// `arbiter/*`, `arbiter-race/*` branches no record explains; work orders
/// whose merge is on the integration branch while their record is not
/// `done` (or missing, as in a fresh clone); remotes whose fetch refspecs do
/// not cover `refs/notes/arbiter`; a slot directory that is not a private
/// directory of yours; and the git version.
///
/// `--fix` repairs only what is provably git-arbiter's and held by no live
/// process: it first ends builders a killed conductor left running; then
/// lock files older than 5 s on its branches whose order no live
/// conductor has in progress, and on its notes while no conductor runs;
/// worktrees (also ones left locked `initializing`) and branches of orders
/// neither halted nor owned by a live conductor; records of landed orders
/// (set to `done`, event `reconstructed_done`); and the mode of a slot
/// directory others can read but not write into. Anything else (the
/// integration branch's lock, `index.lock`, halted orders' branches, a slot
/// directory others can write into) is reported with what to do, never
/// touched. Then it checks again.
///
/// Exit status: 0 nothing wrong (or all of it fixed), 1 problems remain,
/// 2 usage error. `--json` prints `{"version":2, "git_version",
/// "integration_branch", "slot_dir", "findings":[{"kind", "path", "detail",
/// "hint", "fixable", "fixed"}], "actions":[…], "remaining"}`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Repair what is provably git-arbiter's and not held by a live process
    #[arg(long)]
    fix: bool,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
    /// The integration branch [default: the current branch]
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

#[derive(Serialize)]
struct Output<'a> {
    version: u32,
    #[serde(flatten)]
    report: &'a Report,
    remaining: usize,
}

pub fn cmd_doctor(env: &Env, args: DoctorArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let report = doctor::run(
        &ctx,
        &doctor::Options {
            fix: args.fix,
            into: args.into.as_deref(),
            orders: env.orders_flag(),
        },
    )?;
    let remaining = report.remaining();
    if args.json {
        out(&json(&Output {
            version: git_arbiter::JSON_VERSION,
            report: &report,
            remaining,
        }));
    } else {
        for action in &report.actions {
            say!("arbiter doctor: {action}");
        }
        out(&render(&report, args.fix));
    }
    // Problems that remain are the doctor's "escalation".
    Ok(if remaining == 0 {
        ExitCode::Success
    } else {
        ExitCode::Escalation
    })
}

fn render(report: &Report, fix: bool) -> String {
    let mut text = format!(
        "git version: {}\nintegration branch: {}\nslot directory: {}\n",
        report.git_version.as_deref().unwrap_or("unknown"),
        report
            .integration_branch
            .as_deref()
            .unwrap_or("none (HEAD is detached; pass --into)"),
        report.slot_dir.as_deref().unwrap_or("unknown"),
    );
    let mut findings: Vec<&Finding> = report.findings.iter().collect();
    // Grouped; within a group, in the order the checks ran (a stable sort).
    findings.sort_by_key(|f| group_rank(f.kind.group()));
    let mut group = "";
    for f in &findings {
        if f.kind.group() != group {
            group = f.kind.group();
            text.push_str(&format!("\n{group}:\n"));
        }
        let state = if f.advice {
            "note"
        } else if f.fixed {
            "fixed"
        } else if f.fixable && !fix {
            "fixable"
        } else {
            "not fixed"
        };
        text.push_str(&format!("  {}: {} [{state}]\n", f.path, f.detail));
        if let (false, Some(hint)) = (f.fixed || f.fixable && !fix, &f.hint) {
            text.push_str(&format!("    hint: {hint}\n"));
        }
    }
    let notes = findings.iter().filter(|f| f.advice).count();
    findings.retain(|f| !f.advice);
    let total = findings.len();
    let fixed = findings.iter().filter(|f| f.fixed).count();
    let fixable = findings.iter().filter(|f| f.fixable && !f.fixed).count();
    text.push('\n');
    if notes > 0 {
        text.push_str(&format!(
            "{notes} note{} (advice, not a problem)\n",
            plural(notes)
        ));
    }
    text.push_str(&match (total, fix) {
        (0, _) => "no problems found\n".to_owned(),
        (_, true) => format!(
            "{total} problem{} found, {fixed} fixed, {} remain{}\n",
            plural(total),
            total - fixed,
            if total - fixed == 1 { "s" } else { "" }
        ),
        (_, false) if fixable > 0 => format!(
            "{total} problem{} found, {fixable} fixable with 'git arbiter doctor --fix'\n",
            plural(total)
        ),
        (_, false) => format!(
            "{total} problem{} found, none fixable by doctor\n",
            plural(total)
        ),
    });
    text
}

fn group_rank(group: &str) -> usize {
    [
        "locks",
        "worktrees and branches",
        "records",
        "notes",
        "slot directory",
        "git",
    ]
    .iter()
    .position(|g| *g == group)
    .unwrap_or(usize::MAX)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

use clap::Args;
use git_arbiter::run::review::{self, AttemptEvidence, Evidence};
use git_arbiter::sys::clock::format_ms;
use git_arbiter::{Error, ExitCode};

use super::{json, out, Env};

/// Show the evidence for reviewing one work order.
///
/// Its status and halt reason, each attempt's build, gate and critic
/// verdicts with exit codes and wall times, the files it changed (the merge
/// against its first parent when done, the kept branch against its base
/// when halted) with added and deleted lines, the drift verdict with any
/// undeclared paths, and its logs with their last lines. Read-only.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The work order
    #[arg(value_name = "ID")]
    id: String,
    /// Print `{"version":2,…}` instead of text
    #[arg(long)]
    json: bool,
    /// Add the full patch of the changes
    #[arg(short = 'p', long = "patch")]
    patch: bool,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub fn cmd_show(env: &Env, args: ShowArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = review::orders_if_any(&ctx, env.orders_flag());
    let ev = review::evidence(&ctx, orders.as_ref(), &args.id, args.patch)?;
    if args.json {
        out(&json(&ev));
    } else {
        out(&render(&ev));
    }
    Ok(ExitCode::Success)
}

fn render(ev: &Evidence) -> String {
    let mut s = match &ev.title {
        Some(title) => format!("{}  {title}\n", ev.wo_id),
        None => format!("{}\n", ev.wo_id),
    };
    let status = match (&ev.status, ev.halted) {
        (None, _) => "not started".to_owned(),
        (Some(_), true) => format!(
            "HALT {}",
            ev.halt_reason.as_deref().unwrap_or("(no reason recorded)")
        ),
        (Some(status), false) => status.to_string(),
    };
    s.push_str(&format!("status:   {status}\n"));
    if let Some(why) = &ev.waiting {
        s.push_str(&format!(
            "          passed, waits to land: {why}\n          once that is resolved, 'git arbiter round' (or 'git arbiter retry {id}') lands it without a rebuild\n",
            id = ev.wo_id
        ));
    }
    if !ev.halt_paths.is_empty() {
        s.push_str(&format!("          {}\n", ev.halt_paths.join(", ")));
    }
    if let Some(cap) = ev.cap {
        s.push_str(&format!("attempts: {} of {cap}\n", ev.attempts));
    }
    if let Some(spent) = &ev.spent {
        s.push_str(&format!("cost:     {}\n", spent.describe()));
    }
    if let Some(failure) = &ev.last_failure {
        s.push_str(&format!("last:     {failure}\n"));
        if let Some(log) = &failure.log {
            s.push_str(&format!("          log: {log}\n"));
        }
    }
    s.push_str(&attempts(ev));
    s.push_str(&changes_text(ev));
    if let Some(missing) = &ev.missing_commit {
        s.push_str(&format!(
            "\nchanges: not shown, commit {missing} is not in this repository (a shallow clone's history begins after it)\n  'git fetch --deepen=<n>' or 'git fetch --unshallow' brings it\n"
        ));
    }
    if let Some(drift) = &ev.drift {
        if drift.passed {
            s.push_str("drift:   passed, every changed path is declared\n");
        } else {
            s.push_str(&format!(
                "drift:   FAILED, undeclared: {}\n",
                drift.uncovered.join(", ")
            ));
        }
    }
    for log in &ev.logs {
        s.push_str(&format!("\nlog: {}\n", log.path));
        for line in &log.last_lines {
            s.push_str(&format!("  | {line}\n"));
        }
    }
    if let Some(patch) = ev.changes.as_ref().and_then(|c| c.patch.as_deref()) {
        s.push('\n');
        s.push_str(patch);
    }
    s
}

/// Each attempt's steps: verdict, exit, wall time, command, and their logs.
fn attempts(ev: &Evidence) -> String {
    let mut s = String::new();
    for AttemptEvidence {
        attempt: run,
        spent,
    } in &ev.runs
    {
        let waited = run.queue_wait_ms.map_or(String::new(), |w| {
            format!(" (waited {} for a slot)", format_ms(w))
        });
        let cost = spent
            .as_ref()
            .map_or(String::new(), |c| format!(", cost {}", c.describe()));
        s.push_str(&format!("\nattempt {}{waited}{cost}\n", run.attempt));
        let rows: Vec<Vec<String>> = run
            .verdicts
            .iter()
            .map(|v| {
                vec![
                    format!("  {}", v.kind),
                    if v.passed { "passed" } else { "FAILED" }.to_owned(),
                    v.exit_code.map_or("-".into(), |c| format!("exit {c}")),
                    v.wall_ms.map_or("-".into(), format_ms),
                    v.detail
                        .as_deref()
                        .filter(|_| v.exit_code.is_none())
                        .map_or(v.command.clone(), |d| format!("{} ({d})", v.command)),
                ]
            })
            .collect();
        s.push_str(&super::table(
            &["  step", "verdict", "exit", "wall", "command"],
            &rows,
        ));
        for (v, model) in run
            .verdicts
            .iter()
            .filter_map(|v| Some((v, v.report.as_ref()?.model.as_deref()?)))
        {
            s.push_str(&format!("  {} model: {model}\n", v.kind));
        }
        for v in run.verdicts.iter().filter(|v| v.log.is_some()) {
            s.push_str(&format!(
                "  {} log: {}\n",
                v.kind,
                v.log.as_deref().unwrap_or_default()
            ));
        }
    }
    s
}

/// The files the order's work changed, with their line counts.
fn changes_text(ev: &Evidence) -> String {
    let mut s = String::new();
    if let Some(changes) = &ev.changes {
        let what = match changes.source {
            "merge" => format!(
                "merge {} against its first parent {}",
                changes.to, changes.from
            ),
            _ => format!(
                "kept branch at {} against its base {}",
                changes.to, changes.from
            ),
        };
        s.push_str(&format!(
            "\nchanges: {} file(s), {what}\n",
            changes.files.len()
        ));
        for f in &changes.files {
            let counts = match (f.added, f.deleted) {
                (Some(a), Some(d)) => format!("+{a} -{d}"),
                _ => "binary".to_owned(),
            };
            s.push_str(&format!("  {}  {counts}  ({})\n", f.path, f.kind));
        }
    }
    s
}

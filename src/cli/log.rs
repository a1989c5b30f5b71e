use clap::Args;
use git_arbiter::state::cost::Spent;
use git_arbiter::state::{read_note, Record};
use git_arbiter::sys::clock::format_time;
use git_arbiter::{run::review, Error, ExitCode};
use serde::Serialize;

use super::{json, out, Env};

/// Show the disposition history of every work order, oldest first, from `refs/notes/arbiter`.
#[derive(Args, Debug)]
pub struct LogArgs {
    /// Print `{"version":2,"events":[…]}`
    #[arg(long)]
    json: bool,
    /// Only this work order
    #[arg(value_name = "ID")]
    id: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

#[derive(Serialize)]
struct Line<'a> {
    wo: &'a str,
    at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ms: Option<u32>,
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    /// For a `pick` event (a race's winner): its record from `refs/notes/arbiter-picks`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pick: Option<serde_json::Value>,
    /// On the event that gave an attempt its verdict: how long it waited for
    /// a slot and ran each kind of command.
    #[serde(skip_serializing_if = "Option::is_none")]
    times: Option<Times>,
    /// On the same event: what the attempt's commands reported they cost
    /// (`cost_usd`, `tokens`), when they reported anything.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    spent: Option<Spent>,
}

/// Wall times of one attempt, in milliseconds.
#[derive(Serialize, Default, Clone, Copy)]
struct Times {
    #[serde(skip_serializing_if = "Option::is_none")]
    wait_ms: Option<u64>,
    build_ms: u64,
    gate_ms: u64,
    critic_ms: u64,
}

impl Times {
    fn of(queue_wait_ms: Option<u64>, verdicts: &[git_arbiter::state::Verdict]) -> Option<Times> {
        let mut times = Times {
            wait_ms: queue_wait_ms,
            ..Times::default()
        };
        let mut timed = false;
        for v in verdicts {
            let Some(ms) = v.wall_ms else { continue };
            let slot = match v.kind.as_str() {
                "build" => &mut times.build_ms,
                "gate" => &mut times.gate_ms,
                "critic" => &mut times.critic_ms,
                _ => continue,
            };
            *slot += ms;
            timed = true;
        }
        timed.then_some(times)
    }

    fn human(&self) -> String {
        let secs = |ms: u64| format!("{:.1}s", ms as f64 / 1000.0);
        let mut parts = Vec::new();
        if let Some(wait) = self.wait_ms {
            parts.push(format!("wait {}", secs(wait)));
        }
        parts.push(format!("build {}", secs(self.build_ms)));
        if self.gate_ms > 0 {
            parts.push(format!("gates {}", secs(self.gate_ms)));
        }
        if self.critic_ms > 0 {
            parts.push(format!("critics {}", secs(self.critic_ms)));
        }
        format!("({})", parts.join(", "))
    }
}

/// The events that record an attempt's verdict (see `round::settle`).
const VERDICT_EVENTS: &[&str] = &["built", "needs_rework", "halt"];

pub fn cmd_log(env: &Env, args: LogArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = review::orders_if_any(&ctx, env.orders_flag());
    let store = ctx.store()?;
    let mut snapshot = store.snapshot()?;
    let mut ids = review::known_ids(&snapshot, orders.as_ref())?;
    if let Some(arg) = &args.id {
        let known = ids.iter().map(String::as_str);
        match git_arbiter::state::orders::resolve_id(arg, known.clone()) {
            Some(id) => ids = vec![id],
            None => return Err(review::unknown_order(arg, known).into()),
        }
    }
    let mut records = Vec::new();
    for id in &ids {
        if let Some(record) = snapshot.record(id)? {
            records.push(record);
        }
    }
    let mut lines: Vec<Line<'_>> = records
        .iter()
        .flat_map(|r| {
            r.history.iter().map(|e| Line {
                wo: &r.wo,
                at: e.at,
                ms: e.ms,
                event: &e.event,
                attempt: e.attempt,
                detail: e.detail.as_deref(),
                pick: None,
                times: None,
                spent: None,
            })
        })
        .collect();
    attach_times(&records, &mut lines);
    for l in lines.iter_mut().filter(|l| l.event == "pick") {
        l.pick = pick_record(&ctx.repo, l.detail);
    }
    // In the order they happened, to the millisecond (older notes: to the
    // second); a stable sort keeps each order's own sequence, then id order.
    lines.sort_by_key(|l| (l.at, l.ms.unwrap_or(0)));
    if args.json {
        #[derive(Serialize)]
        struct Output<'a> {
            version: u32,
            events: &'a [Line<'a>],
        }
        out(&json(&Output {
            version: git_arbiter::JSON_VERSION,
            events: &lines,
        }));
        return Ok(ExitCode::Success);
    }
    out(&as_text(&lines));
    Ok(ExitCode::Success)
}

/// Each verdict event gets the times of its attempt (wait, build, gates)
/// and what it reported it cost.
fn attach_times<'a>(records: &'a [Record], lines: &mut [Line<'a>]) {
    type Attempt<'a> = (&'a str, u32);
    let mut times: std::collections::BTreeMap<Attempt<'a>, Times> = Default::default();
    let mut spent: std::collections::BTreeMap<Attempt<'a>, Spent> = Default::default();
    for r in records {
        let current = (r.attempts > 0 && !r.verdicts.is_empty()).then_some((
            r.attempts,
            r.queue_wait_ms,
            &r.verdicts,
        ));
        let attempts = r
            .earlier
            .iter()
            .map(|p| (p.attempt, p.queue_wait_ms, &p.verdicts))
            .chain(current);
        for (attempt, wait, verdicts) in attempts {
            if let Some(t) = Times::of(wait, verdicts) {
                times.insert((r.wo.as_str(), attempt), t);
            }
            if let Some(s) = Spent::of_attempt(verdicts).shown() {
                spent.insert((r.wo.as_str(), attempt), s);
            }
        }
    }
    for l in lines
        .iter_mut()
        .filter(|l| VERDICT_EVENTS.contains(&l.event))
    {
        if let Some(attempt) = l.attempt {
            l.times = times.remove(&(l.wo, attempt));
            l.spent = spent.remove(&(l.wo, attempt));
        }
    }
}

/// The events as text, one line each, columns aligned.
fn as_text(lines: &[Line<'_>]) -> String {
    let wo_width = lines.iter().map(|l| l.wo.len()).max().unwrap_or(0);
    let event_width = lines.iter().map(|l| l.event.len()).max().unwrap_or(0);
    let mut text = String::new();
    for l in lines {
        let mut line = format!(
            "{}  {:<wo_width$}  {:<event_width$}",
            format_time(l.at),
            l.wo,
            l.event
        );
        if let Some(a) = l.attempt {
            line.push_str(&format!("  attempt={a}"));
        }
        if let Some(d) = l.detail {
            line.push_str(&format!("  {d}"));
        }
        if let Some(t) = &l.times {
            line.push_str(&format!("  {}", t.human()));
        }
        if let Some(s) = &l.spent {
            line.push_str(&format!("  [cost {}]", s.describe()));
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// The pick record named by a `pick` event's `commit=<sha>`, if readable.
fn pick_record(repo: &gix::Repository, detail: Option<&str>) -> Option<serde_json::Value> {
    let sha = detail?
        .split_whitespace()
        .find_map(|w| w.strip_prefix("commit="))?;
    let id = gix::ObjectId::from_hex(sha.as_bytes()).ok()?;
    let bytes = read_note(repo, git_arbiter::run::race::PICKS_REF, &id).ok()??;
    serde_json::from_slice(&bytes).ok()
}

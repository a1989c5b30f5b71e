use clap::Args;
use git_arbiter::state::{read_note, Store};
use git_arbiter::{Error, ExitCode};
use serde::Serialize;

use super::{json, out, Env};

/// Show the disposition history of every work order, oldest first, from `refs/notes/arbiter`.
#[derive(Args, Debug)]
pub struct LogArgs {
    /// Print `{"version":1,"events":[…]}`
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
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    /// For a `pick` event (a race's winner): its record from `refs/notes/arbiter-picks`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pick: Option<serde_json::Value>,
}

pub fn cmd_log(env: &Env, args: LogArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let orders = ctx.load_orders(env.orders_flag())?;
    let store = Store::new(&ctx.repo, ctx.retry_cap()?);
    let mut snapshot = store.snapshot()?;
    let mut records = Vec::new();
    for wo in orders.iter() {
        if args.id.as_deref().is_some_and(|id| id != wo.id) {
            continue;
        }
        if let Some(record) = snapshot.record(&wo.id)? {
            records.push(record);
        }
    }
    let mut lines: Vec<Line<'_>> = records
        .iter()
        .flat_map(|r| {
            r.history.iter().map(|e| Line {
                wo: &r.wo,
                at: e.at,
                event: &e.event,
                attempt: e.attempt,
                detail: e.detail.as_deref(),
                pick: None,
            })
        })
        .collect();
    for l in lines.iter_mut().filter(|l| l.event == "pick") {
        l.pick = pick_record(&ctx.repo, l.detail);
    }
    // Stable: by time, then work order, then the order events were recorded in.
    lines.sort_by(|a, b| a.at.cmp(&b.at).then(a.wo.cmp(b.wo)));
    if args.json {
        #[derive(Serialize)]
        struct Output<'a> {
            version: u32,
            events: &'a [Line<'a>],
        }
        out(&json(&Output {
            version: 1,
            events: &lines,
        }));
        return Ok(ExitCode::Success);
    }
    let mut text = String::new();
    for l in &lines {
        text.push_str(&format!(
            "{}  {:<12} {:<20}",
            format_time(l.at),
            l.wo,
            l.event
        ));
        if let Some(a) = l.attempt {
            text.push_str(&format!(" attempt={a}"));
        }
        if let Some(d) = l.detail {
            text.push_str(&format!(" {d}"));
        }
        text.push('\n');
    }
    out(&text);
    Ok(ExitCode::Success)
}

/// The pick record named by a `pick` event's `commit=<sha>`, if readable.
fn pick_record(repo: &gix::Repository, detail: Option<&str>) -> Option<serde_json::Value> {
    let sha = detail?
        .split_whitespace()
        .find_map(|w| w.strip_prefix("commit="))?;
    let id = gix::ObjectId::from_hex(sha.as_bytes()).ok()?;
    let bytes = read_note(repo, git_arbiter::race::PICKS_REF, &id).ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// `YYYY-MM-DD HH:MM:SS` UTC, without pulling in a date crate for one format.
fn format_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc() {
        assert_eq!(super::format_time(0), "1970-01-01 00:00:00");
        assert_eq!(super::format_time(1_767_225_600), "2026-01-01 00:00:00");
        assert_eq!(
            super::format_time(951_782_400 + 3661),
            "2000-02-29 01:01:01"
        );
    }
}

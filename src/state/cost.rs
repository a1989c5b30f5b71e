//! What builders report they cost: the JSON a command may write to
//! `$ARBITER_REPORT`, kept with its verdict, and the sums of an attempt, an
//! order and a run.
//!
//! A report is the builder's word, never checked and never used to decide
//! a verdict; only the budgets (`--max-cost`, `arbiter.maxCostPerOrder`)
//! read it. An attempt that reported no cost is counted as unknown, never
//! as free.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::{Record, Verdict};

/// Why a run stopped dispatching: its reported cost reached `--max-cost`.
pub const COST_BUDGET: &str = "cost_budget";
/// The halt of an order whose attempts together reported more than
/// `arbiter.maxCostPerOrder`.
pub const COST_CAP_EXCEEDED: &str = "cost_cap_exceeded";

/// The most of a report file that is read: a report is a few fields.
pub const REPORT_MAX_BYTES: u64 = 64 << 10;

/// What one command reported it cost. Every field is optional; fields this
/// version does not know are kept as written.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Report {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Token counts by kind (`input`, `output`, `cache_read`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tokens: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

// `cost_usd` is never NaN: JSON cannot write one, and `parse` refuses
// anything but a finite amount, so equality is total.
impl Eq for Report {}

impl Report {
    /// The report in `bytes`, or why it is not one (for the attempt's log).
    pub fn parse(bytes: &[u8]) -> Result<Report, String> {
        let report: Report = serde_json::from_slice(bytes)
            .map_err(|e| format!("not a JSON object of cost_usd, tokens and model: {e}"))?;
        if let Some(cost) = report.cost_usd {
            usd(cost).map_err(|why| format!("cost_usd: {why}"))?;
        }
        Ok(report)
    }
}

/// `value` as an amount in USD: finite and not negative.
fn usd(value: f64) -> Result<f64, String> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(format!("{value} is not an amount in USD (a number ≥ 0)"))
    }
}

/// A budget in USD as given on the command line or in the config (`2.50`).
pub fn parse_usd(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not an amount in USD (a number ≥ 0, e.g. 2.50)"))?;
    usd(value).map_err(|_| format!("'{text}' is not an amount in USD (a number ≥ 0, e.g. 2.50)"))
}

/// `a + b`, to the billionth of a dollar: sums of reported amounts read as
/// they were written (0.1 + 0.2 is 0.3, not 0.30000000000000004).
fn add_usd(a: f64, b: f64) -> f64 {
    ((a + b) * 1e9).round() / 1e9
}

/// What attempts reported they cost, summed (an attempt, an order, a run).
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Spent {
    /// The sum of the costs reported; absent when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tokens: BTreeMap<String, u64>,
    /// Attempts that reported no cost: what they cost is unknown, not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub attempts_without_cost: u32,
}

// Sums of finite reports are finite: equality is total (see `Report`).
impl Eq for Spent {}

/// An amount in USD in a report of what happened (a stop, a progress line).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usd(pub f64);

// Made from reports and budgets, which are finite (see `Report`).
impl Eq for Usd {}

impl std::fmt::Display for Usd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_usd(self.0))
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Spent {
    /// What one attempt's commands (`verdicts`) reported.
    pub fn of_attempt(verdicts: &[Verdict]) -> Spent {
        let mut spent = Spent::default();
        for report in verdicts.iter().filter_map(|v| v.report.as_ref()) {
            spent.add_report(report);
        }
        if spent.cost_usd.is_none() {
            spent.attempts_without_cost = 1;
        }
        spent
    }

    /// Add what one command reported; no attempt is counted (a command
    /// outside any attempt, such as a gate run on a merged result).
    pub fn add_report(&mut self, report: &Report) {
        self.add_amounts(report.cost_usd, &report.tokens);
    }

    fn add_amounts(&mut self, cost_usd: Option<f64>, tokens: &BTreeMap<String, u64>) {
        if let Some(cost) = cost_usd {
            self.cost_usd = Some(add_usd(self.cost_usd.unwrap_or(0.0), cost));
        }
        for (kind, n) in tokens {
            let sum = self.tokens.entry(kind.clone()).or_default();
            *sum = sum.saturating_add(*n);
        }
    }

    /// What every attempt of `record` that ran a command reported.
    pub fn of_record(record: &Record) -> Spent {
        let mut spent = Spent::default();
        for past in &record.earlier {
            spent.add(&Spent::of_attempt(&past.verdicts));
        }
        if record.attempts > 0 && !record.verdicts.is_empty() {
            spent.add(&Spent::of_attempt(&record.verdicts));
        }
        spent
    }

    pub fn add(&mut self, other: &Spent) {
        self.add_amounts(other.cost_usd, &other.tokens);
        self.attempts_without_cost += other.attempts_without_cost;
    }

    /// Did anything report a cost or tokens? Without a report nothing of
    /// cost is shown at all.
    pub fn reported(&self) -> bool {
        self.cost_usd.is_some() || !self.tokens.is_empty()
    }

    /// `Some` when anything was reported: what JSON output carries.
    pub fn shown(self) -> Option<Spent> {
        self.reported().then_some(self)
    }

    /// [`Spent::shown`], or, under a budget, also when attempts reported
    /// nothing: a budget that cannot see their cost says so.
    pub fn shown_under(self, budget: bool) -> Option<Spent> {
        (self.reported() || (budget && self.attempts_without_cost > 0)).then_some(self)
    }

    /// One line for people: `$0.42, tokens input=1200 output=800` (or
    /// `unknown, tokens …`), and the attempts whose cost is unknown.
    pub fn describe(&self) -> String {
        let mut parts = vec![self.cost_usd.map_or("unknown".to_owned(), format_usd)];
        if !self.tokens.is_empty() {
            let tokens: Vec<String> = self
                .tokens
                .iter()
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            parts.push(format!("tokens {}", tokens.join(" ")));
        }
        let mut line = parts.join(", ");
        match (self.cost_usd, self.attempts_without_cost) {
            (_, 0) => {}
            (Some(_), n) => line.push_str(&format!(
                " (+ {n} attempt(s) that reported no cost: unknown)"
            )),
            (None, n) => line.push_str(&format!(" ({n} attempt(s) reported no cost)")),
        }
        line
    }
}

/// An amount for people, to the millionth of a dollar and cents at
/// least: `$0.42`, `$1.30`, `$0.0042`.
pub fn format_usd(value: f64) -> String {
    let six = format!("{value:.6}");
    let (whole, frac) = six.split_once('.').unwrap_or((&six, ""));
    let frac = frac.trim_end_matches('0');
    format!("${whole}.{frac:0<2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(report: Option<&str>) -> Verdict {
        Verdict {
            kind: "build".into(),
            command: "agent".into(),
            passed: true,
            exit_code: Some(0),
            detail: None,
            wall_ms: None,
            log: None,
            report: report.map(|r| Report::parse(r.as_bytes()).expect("a report")),
        }
    }

    #[test]
    fn a_report_keeps_what_it_does_not_know_and_refuses_what_is_no_cost() {
        let r = Report::parse(
            br#"{"cost_usd":0.42,"tokens":{"input":1200,"output":800},"model":"m","session":"s-1"}"#,
        )
        .expect("parses");
        assert_eq!(r.cost_usd, Some(0.42));
        assert_eq!(r.tokens["input"], 1200);
        assert_eq!(r.model.as_deref(), Some("m"));
        let back = serde_json::to_string(&r).expect("json");
        assert!(back.contains(r#""session":"s-1""#), "{back}");
        assert_eq!(
            Report::parse(b"{}").expect("all optional"),
            Report::default()
        );
        for bad in [
            &b"not json"[..],
            b"[1]",
            br#"{"cost_usd":-1}"#,
            br#"{"cost_usd":"0.4"}"#,
            br#"{"tokens":{"input":-5}}"#,
            br#"{"tokens":{"input":1.5}}"#,
        ] {
            assert!(
                Report::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn sums_are_exact_and_no_report_is_unknown_not_zero() {
        let a = Spent::of_attempt(&[
            verdict(Some(r#"{"cost_usd":0.1,"tokens":{"input":10}}"#)),
            verdict(Some(r#"{"cost_usd":0.2,"tokens":{"input":5,"output":1}}"#)),
        ]);
        assert_eq!(a.cost_usd, Some(0.3));
        assert_eq!(a.attempts_without_cost, 0);
        let fine = Spent::of_attempt(&[
            verdict(Some(r#"{"cost_usd":0.0079825}"#)),
            verdict(Some(r#"{"cost_usd":0.0000001}"#)),
        ]);
        assert_eq!(fine.cost_usd, Some(0.0079826));
        let none = Spent::of_attempt(&[verdict(None)]);
        assert_eq!((none.cost_usd, none.attempts_without_cost), (None, 1));
        assert!(!none.reported());
        let tokens_only = Spent::of_attempt(&[verdict(Some(r#"{"tokens":{"output":7}}"#))]);
        assert_eq!(tokens_only.attempts_without_cost, 1);
        assert!(tokens_only.reported());
        let mut total = Spent::default();
        for s in [&a, &none, &tokens_only] {
            total.add(s);
        }
        assert_eq!(total.cost_usd, Some(0.3));
        assert_eq!(
            total.tokens,
            BTreeMap::from([("input".into(), 15), ("output".into(), 8)])
        );
        assert_eq!(total.attempts_without_cost, 2);
        assert_eq!(
            total.describe(),
            "$0.30, tokens input=15 output=8 (+ 2 attempt(s) that reported no cost: unknown)"
        );
        assert_eq!(none.describe(), "unknown (1 attempt(s) reported no cost)");
        assert_eq!(none.clone().shown_under(false), None);
        assert!(none.shown_under(true).is_some());
    }

    #[test]
    fn a_records_attempts_are_summed_the_current_one_too() {
        let mut r = Record::new("wo-01", false, 3);
        assert_eq!(Spent::of_record(&r), Spent::default());
        r.attempts = 1;
        r.verdicts = vec![verdict(Some(r#"{"cost_usd":0.25}"#))];
        r.start_attempt();
        r.attempts = 2;
        r.verdicts = vec![verdict(Some(r#"{"cost_usd":0.5}"#))];
        assert_eq!(Spent::of_record(&r).cost_usd, Some(0.75));
    }

    #[test]
    fn budgets_are_amounts_and_amounts_read_as_written() {
        assert_eq!(parse_usd("2.50"), Ok(2.5));
        assert_eq!(parse_usd(" 0 "), Ok(0.0));
        for bad in ["-1", "abc", "", "NaN", "inf", "1e400"] {
            assert!(parse_usd(bad).is_err(), "{bad}");
        }
        assert_eq!(format_usd(0.42), "$0.42");
        assert_eq!(format_usd(1.3), "$1.30");
        assert_eq!(format_usd(0.0042), "$0.0042");
        assert_eq!(format_usd(12.0), "$12.00");
    }
}

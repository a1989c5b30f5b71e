//! A timeline as one self-contained picture: SVG with its CSS inline, no
//! script, nothing fetched; HTML is that SVG in a page. Every text that
//! comes from the records (ids, reasons, run names) is XML-escaped with
//! control characters dropped: a record may have been written by anyone.

use std::fmt::Write as _;

use super::{Attempt, MarkKind, Outcome, Span, Timeline};
use crate::sys::clock::{format_ms, format_time};

const WIDTH: f64 = 1200.0;
/// Room for the lane names.
const LEFT: f64 = 110.0;
const RIGHT: f64 = 20.0;
/// Where the time axis sits, below the header.
const AXIS_Y: f64 = 110.0;
const LANE: f64 = 26.0;
const BAR: f64 = 18.0;
const QUEUE_LANE: f64 = 14.0;
const QUEUE_BAR: f64 = 10.0;

const STYLE: &str = "\
text{font-family:sans-serif;font-size:11px;fill:#222}\
.title{font-size:16px;font-weight:bold}\
.stats{font-size:12px}\
.note{fill:#666}\
.lane-bg{fill:#f4f5f7}\
.tick{stroke:#ccc;stroke-width:.5}\
.bar{fill:#e3e6ea;stroke:#666;stroke-width:.6}\
.setup{fill:#b9a3d6}.build{fill:#7fa7d9}.gates{fill:#8cc38c}\
.retry .bar{stroke:#d27b00;stroke-width:1.5;stroke-dasharray:3 2}\
.outcome-halted .bar{stroke:#c0392b;stroke-width:1.5}\
.queue{fill:#f2d49b}.verifying{fill:#d9a441}\
.outcome-rework .bar{stroke:#d27b00;stroke-width:1.5}\
.landed{fill:#2e8b57}\
.halt,.verify-failed{stroke:#c0392b;stroke-width:2}\
";

/// `text` as XML character data or an attribute value: escaped, with
/// control characters but a newline (a hover's line break) and the two
/// non-characters XML forbids dropped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c.is_control() && c != '\n') || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => out.push(c),
        }
    }
    out
}

/// The header's figures, in words.
pub fn stats(t: &Timeline) -> String {
    let utilisation = t
        .utilisation()
        .map_or("-".into(), |u| format!("{:.1}%", u * 100.0));
    let (usd, unknown) = t.cost();
    let cost = match (unknown, t.attempts.len()) {
        (_, 0) => "cost -".to_owned(),
        (u, n) if u == n => "cost unknown".to_owned(),
        (0, _) => format!("cost ${usd:.2}"),
        (u, _) => format!("cost ${usd:.2} (+ {u} attempt(s) of unknown cost)"),
    };
    format!(
        "makespan {} · slot utilisation {utilisation} over {} lane(s) · {} attempt(s) · orders landed {} · halted {} · {cost}",
        format_ms(t.makespan_ms()),
        t.lane_names.len(),
        t.attempts.len(),
        t.landed(),
        t.halted(),
    )
}

struct Scale {
    from_ms: u64,
    px_per_ms: f64,
}

impl Scale {
    fn of(span: Span) -> Scale {
        let width = WIDTH - LEFT - RIGHT;
        Scale {
            from_ms: span.from_ms,
            px_per_ms: if span.ms() == 0 {
                0.0
            } else {
                width / span.ms() as f64
            },
        }
    }

    fn x(&self, ms: u64) -> f64 {
        LEFT + ms.saturating_sub(self.from_ms) as f64 * self.px_per_ms
    }

    /// Left edge and width of `span`; at least a pixel wide, to be seen.
    fn bar(&self, span: Span) -> (f64, f64) {
        (
            self.x(span.from_ms),
            (span.ms() as f64 * self.px_per_ms).max(1.0),
        )
    }
}

/// The step between the axis's ticks: a round one giving at most ten.
fn tick_step(makespan_ms: u64) -> u64 {
    const STEPS: &[u64] = &[
        100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
        600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000,
    ];
    STEPS
        .iter()
        .copied()
        .find(|step| makespan_ms / step <= 10)
        .unwrap_or(makespan_ms.div_ceil(10).max(1))
}

fn tick_label(ms: u64) -> String {
    if !ms.is_multiple_of(1000) {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    let secs = ms / 1000;
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// What a bar's hover says: the attempt, its outcome, how long it held
/// its slot and each part took, and its cost.
fn describe(a: &Attempt) -> String {
    let mut text = format!("{} attempt {}", a.wo, a.attempt);
    if a.is_retry() {
        text.push_str(" (retry)");
    }
    let _ = write!(text, ": {}", a.outcome.describe());
    let _ = write!(text, "\nheld a slot {}", format_ms(a.held.ms()));
    if !a.segments.is_empty() {
        let parts: Vec<String> = a
            .segments
            .iter()
            .map(|s| format!("{} {}", s.phase.name(), format_ms(s.span.ms())))
            .collect();
        let _ = write!(text, " ({})", parts.join(", "));
    }
    match a.cost_usd {
        Some(usd) => {
            let _ = write!(text, "\ncost ${usd:.2}");
        }
        None => text.push_str("\ncost unknown"),
    }
    if let Some(run) = &a.run {
        let _ = write!(text, "\nrun {run}");
    }
    text
}

fn outcome_class(o: &Outcome) -> &'static str {
    match o {
        Outcome::Landed => "landed",
        Outcome::Queued => "queued",
        Outcome::Waiting => "waiting",
        Outcome::Rework(_) => "rework",
        Outcome::Halted(_) => "halted",
        Outcome::GivenBack(_) => "given-back",
        Outcome::Running => "running",
    }
}

/// The mark of `kind` for attempt `a`, centred on (`x`, `y`): a diamond
/// for a landing, a cross for a halt or gates failed on the merged result.
fn mark(out: &mut String, kind: MarkKind, x: f64, y: f64, a: &Attempt) {
    let (class, d, title) = match kind {
        MarkKind::Landed => (
            "landed",
            format!(
                "M{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}Z",
                x - 5.0,
                y - 5.0,
                x + 5.0,
                y + 5.0
            ),
            format!("{} landed", a.wo),
        ),
        MarkKind::Halted | MarkKind::VerifyFailed => (
            if kind == MarkKind::Halted {
                "halt"
            } else {
                "verify-failed"
            },
            format!(
                "M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}",
                x - 4.0,
                y - 4.0,
                x + 4.0,
                y + 4.0,
                x + 4.0,
                y - 4.0,
                x - 4.0,
                y + 4.0
            ),
            match kind {
                MarkKind::Halted => format!("{}: {}", a.wo, a.outcome.describe()),
                _ => format!("{}: the gates failed on the merged result", a.wo),
            },
        ),
    };
    let _ = write!(
        out,
        "<path class=\"{class}\" d=\"{d}\"><title>{}</title></path>",
        escape(&title)
    );
}

/// The legend's swatches: their class and what they stand for.
const LEGEND: &[(&str, &str)] = &[
    ("setup", "setup"),
    ("build", "build"),
    ("gates", "gates and critics"),
    ("queue", "in the merge queue"),
    ("verifying", "verifying the merged result"),
];

/// The timeline as a standalone SVG document, one element a line.
pub fn svg(t: &Timeline) -> String {
    let scale = Scale::of(t.span);
    let lanes_top = AXIS_Y + 8.0;
    let queue_top = lanes_top + t.lane_names.len() as f64 * LANE + 24.0;
    let height = queue_top + t.queue_lanes.max(1) as f64 * QUEUE_LANE + 20.0;
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH} {height:.0}\">"
    ));
    line(format!("<style>{STYLE}</style>"));
    line("<text class=\"title\" x=\"10\" y=\"24\">git arbiter report</text>".into());
    line(format!(
        "<text class=\"stats\" x=\"10\" y=\"46\">{}</text>",
        escape(&stats(t))
    ));
    let lanes_note = match (t.slot_lanes, t.lane_names.len()) {
        (0, _) => "lanes assigned in order of start: the records do not say which slot each attempt held",
        (slots, lanes) if slots == lanes => "one lane per machine-wide slot, as recorded",
        _ => "slots as recorded; lanes for the attempts that recorded none, assigned in order of start",
    };
    let from = match t.attempts.is_empty() {
        true => "no attempts recorded".to_owned(),
        false => format!(
            "from {} UTC",
            format_time((t.span.from_ms / 1000).try_into().unwrap_or(i64::MAX))
        ),
    };
    line(format!(
        "<text class=\"note\" x=\"10\" y=\"64\">{} · {lanes_note} · dashed: a retry · ◆ landed · ✕ halted, or failed on the merged result</text>",
        escape(&from)
    ));
    let mut x = 10.0;
    for (class, what) in LEGEND {
        line(format!(
            "<rect class=\"{class}\" x=\"{x:.1}\" y=\"74\" width=\"10\" height=\"10\"/><text class=\"note\" x=\"{:.1}\" y=\"83\">{what}</text>",
            x + 14.0
        ));
        x += 30.0 + 6.0 * what.len() as f64;
    }
    // The time axis.
    let step = tick_step(t.makespan_ms());
    let bottom = height - 16.0;
    let mut at = 0;
    while at <= t.makespan_ms() {
        let x = scale.x(t.span.from_ms + at);
        line(format!(
            "<line class=\"tick\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            AXIS_Y - 4.0,
            AXIS_Y - 6.0,
            tick_label(at)
        ));
        at += step;
    }
    for (lane, name) in t.lane_names.iter().enumerate() {
        let y = lanes_top + lane as f64 * LANE;
        line(format!(
            "<rect class=\"lane-bg\" x=\"{LEFT}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\"/><text x=\"10\" y=\"{:.1}\">{}</text>",
            WIDTH - LEFT - RIGHT,
            LANE - 2.0,
            y + LANE / 2.0 + 4.0,
            escape(name)
        ));
    }
    for (i, a) in t.attempts.iter().enumerate() {
        let (x, w) = scale.bar(a.held);
        let y = lanes_top + t.lanes[i] as f64 * LANE + (LANE - BAR) / 2.0;
        let retry = if a.is_retry() { " retry" } else { "" };
        let mut group = format!(
            "<g class=\"attempt outcome-{}{retry}\"><title>{}</title>\
<clipPath id=\"clip-{i}\"><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{BAR}\"/></clipPath>\
<rect class=\"bar\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{BAR}\"/>",
            outcome_class(&a.outcome),
            escape(&describe(a))
        );
        for s in &a.segments {
            let (sx, sw) = scale.bar(s.span);
            let _ = write!(
                group,
                "<rect class=\"{}\" x=\"{sx:.1}\" y=\"{:.1}\" width=\"{sw:.1}\" height=\"{:.1}\"/>",
                s.phase.name(),
                y + 3.0,
                BAR - 6.0
            );
        }
        let label = match a.is_retry() {
            true => format!("{} #{}", a.wo, a.attempt),
            false => a.wo.clone(),
        };
        let _ = write!(
            group,
            "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\" clip-path=\"url(#clip-{i})\">{}</text>",
            x + 3.0,
            y + BAR - 5.0,
            escape(&label)
        );
        // A mark the merge queue's row does not show goes on the bar's lane.
        let queued_until = |at: u64| a.queue.iter().any(|s| s.to_ms == at);
        for m in a.marks.iter().filter(|m| !queued_until(m.at_ms)) {
            mark(&mut group, m.kind, scale.x(m.at_ms), y + BAR / 2.0, a);
        }
        group.push_str("</g>");
        line(group);
    }
    // The merge queue: each order's wait for a chain and its verification.
    line(format!(
        "<text x=\"10\" y=\"{:.1}\">merge queue</text>",
        queue_top + QUEUE_LANE - 3.0
    ));
    for (i, span, lane) in &t.queue {
        let a = &t.attempts[*i];
        let (x, w) = scale.bar(*span);
        let y = queue_top + *lane as f64 * QUEUE_LANE + (QUEUE_LANE - QUEUE_BAR) / 2.0;
        // The verification that let it land ends where it landed.
        let landed_here = a
            .marks
            .iter()
            .any(|m| m.kind == MarkKind::Landed && m.at_ms == span.to_ms);
        let verifying = a.verifying_ms.filter(|_| landed_here);
        let parts = match verifying {
            Some(v) => format!("verifying the merged result the last {}", format_ms(v)),
            None => "waiting, verifying on the merged result".into(),
        };
        let mut group = format!(
            "<g class=\"queued\"><title>{}</title><rect class=\"queue\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{QUEUE_BAR}\"/>",
            escape(&format!(
                "{} attempt {}: in the merge queue {} ({parts}); {}",
                a.wo,
                a.attempt,
                format_ms(span.ms()),
                a.outcome.describe()
            ))
        );
        if let Some(verifying) = verifying {
            let from = span.to_ms.saturating_sub(verifying).max(span.from_ms);
            let (vx, vw) = scale.bar(Span::new(from, span.to_ms));
            group.push_str(&format!(
                "<rect class=\"verifying\" x=\"{vx:.1}\" y=\"{y:.1}\" width=\"{vw:.1}\" height=\"{QUEUE_BAR}\"/>"
            ));
        }
        for m in a.marks.iter().filter(|m| m.at_ms == span.to_ms) {
            mark(&mut group, m.kind, scale.x(m.at_ms), y + QUEUE_BAR / 2.0, a);
        }
        group.push_str("</g>");
        line(group);
    }
    line("</svg>".into());
    out
}

/// The timeline as a standalone HTML page around the same SVG.
pub fn html(t: &Timeline) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>git arbiter report</title>\n<style>body{{margin:16px;background:#fff}}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
        svg(t)
    )
}

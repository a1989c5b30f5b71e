//! `git arbiter report`: a run's timeline, drawn from `refs/notes/arbiter`.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::{Run, TestEnv};

/// Writes its order's own file; `wo-1` fails its first attempt.
const BUILD: &str =
    "echo $ARBITER_WO > f${ARBITER_WO#wo-}.txt; [ $ARBITER_WO != wo-1 ] || [ $ARBITER_ATTEMPT -gt 1 ]";
/// Halts `wo-2` (blocking critique).
const CRITIC: &str = "[ $ARBITER_WO != wo-2 ]";

fn round(env: &TestEnv, extra: &[&str]) -> Run {
    let mut args = vec![
        "round",
        "--max-total",
        "2",
        "--build",
        BUILD,
        "--critic",
        CRITIC,
        "--gate",
        "true",
    ];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// Four orders run: `wo-1` retried, `wo-2` halted, the others landed.
fn ran() -> TestEnv {
    let env = TestEnv::new();
    env.disjoint_orders(4);
    round(&env, &[]).code(1);
    env
}

/// The record of `wo` as stored, read with stock git.
fn record(env: &TestEnv, wo: &str) -> serde_json::Value {
    let key_file = env.root.join(format!("key-{wo}"));
    std::fs::write(&key_file, format!("git-arbiter work order {wo}\n")).expect("key file");
    let key = env.git(&["hash-object", key_file.to_str().expect("utf-8")]);
    let note = env.git(&["notes", "--ref=arbiter", "show", key.trim()]);
    serde_json::from_str(&note).expect("a record is JSON")
}

fn events(record: &serde_json::Value) -> &Vec<serde_json::Value> {
    record["history"].as_array().expect("history")
}

fn at_ms(e: &serde_json::Value) -> u64 {
    e["at"].as_u64().expect("at") * 1000 + e["ms"].as_u64().unwrap_or(0)
}

fn parse(svg: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML ({e}):\n{svg}"))
}

fn has_class(node: &roxmltree::Node<'_, '_>, class: &str) -> bool {
    node.attribute("class")
        .is_some_and(|c| c.split(' ').any(|c| c == class))
}

fn number(node: &roxmltree::Node<'_, '_>, attribute: &str) -> f64 {
    node.attribute(attribute)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {attribute} on {node:?}"))
}

fn report_svg(env: &TestEnv, extra: &[&str]) -> String {
    let path = env.root.join("report.svg");
    let mut args = vec!["report", "--svg", path.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    env.run(&args).success();
    std::fs::read_to_string(&path).expect("the report")
}

#[test]
fn report_svg_draws_every_recorded_attempt_on_lanes_that_never_overlap() {
    let env = ran();
    let svg = report_svg(&env, &[]);
    let doc = parse(&svg);
    assert!(doc.descendants().all(|n| n.tag_name().name() != "script"));

    // As many bars as attempts the records dispatched.
    let wos = ["wo-0", "wo-1", "wo-2", "wo-3"];
    let records: Vec<serde_json::Value> = wos.iter().map(|wo| record(&env, wo)).collect();
    let dispatched = records
        .iter()
        .flat_map(events)
        .filter(|e| e["event"] == "dispatch")
        .count();
    let bars: Vec<roxmltree::Node> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "g" && has_class(n, "attempt"))
        .collect();
    assert_eq!(dispatched, 5, "wo-1 ran twice");
    assert_eq!(bars.len(), dispatched, "{svg}");
    assert_eq!(bars.iter().filter(|g| has_class(g, "retry")).count(), 1);
    assert_eq!(
        bars.iter()
            .filter(|g| has_class(g, "outcome-halted"))
            .count(),
        1
    );

    // Each landed order's record says how long the gates on the merged
    // result took (a `verify` verdict); the picture ends its time in the
    // queue with that verification.
    let landed: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| events(r).iter().any(|e| e["event"] == "merged"))
        .collect();
    assert_eq!(landed.len(), 3, "wo-0, wo-1 and wo-3 landed");
    for r in &landed {
        let verify = r["verdicts"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["kind"] == "verify"))
            .unwrap_or_else(|| panic!("no verify verdict: {r}"));
        assert_eq!(verify["passed"], true);
        assert!(verify["wall_ms"].is_u64(), "{verify}");
        assert!(verify["log"]
            .as_str()
            .is_some_and(|l| l.contains("verify-")));
    }
    let verifying = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "rect" && has_class(n, "verifying"))
        .count();
    // One per landed order, and the legend's swatch.
    assert_eq!(verifying, landed.len() + 1, "{svg}");

    // Bars of one lane (one height) never overlap.
    let mut lanes: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for g in &bars {
        let rect = g
            .children()
            .find(|n| has_class(n, "bar"))
            .expect("a bar in each attempt");
        let x = number(&rect, "x");
        lanes
            .entry(rect.attribute("y").expect("y").to_owned())
            .or_default()
            .push((x, x + number(&rect, "width")));
    }
    for (y, mut spans) in lanes {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in spans.windows(2) {
            // Drawn to a tenth of a pixel.
            assert!(pair[0].1 <= pair[1].0 + 0.1, "lane at y={y}: {spans:?}");
        }
    }

    // Utilisation, from the records: slot time held over the slots' time in
    // the makespan (first dispatch to the last event the picture shows).
    let mut held = 0u64;
    let mut slots = BTreeSet::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    for e in records.iter().flat_map(events) {
        match e["event"].as_str() {
            Some("dispatch") => first = first.min(at_ms(e)),
            Some("merged" | "halt") => last = last.max(at_ms(e)),
            _ => {}
        }
        if let Some(slot) = e.get("slot") {
            let (from, to) = (slot["from_ms"].as_u64(), slot["to_ms"].as_u64());
            let (from, to) = (from.expect("from_ms"), to.expect("to_ms"));
            held += to - from;
            slots.insert(slot["index"].as_u64().expect("index"));
            last = last.max(to);
        }
    }
    assert!(!slots.is_empty() && slots.len() <= 2, "{slots:?}");
    let utilisation = held as f64 / (slots.len() as f64 * (last - first) as f64);
    let stats = doc
        .descendants()
        .find(|n| has_class(n, "stats"))
        .and_then(|n| n.text())
        .expect("a header");
    assert!(
        stats.contains(&format!(
            "slot utilisation {:.1}% over {} lane(s)",
            utilisation * 100.0,
            slots.len()
        )),
        "{stats}"
    );
    assert!(
        stats.contains("orders landed 3 · halted 1 · cost unknown"),
        "{stats}"
    );
}

#[test]
fn report_html_embeds_the_same_svg_and_run_and_since_pick_attempts() {
    let env = ran();
    let notes_after_first = env.notes_tip().expect("state");
    // A second run, of new orders.
    env.work_order("wo-4", "Order 4", &[], &["f4.txt"]);
    env.work_order("wo-5", "Order 5", &[], &["f5.txt"]);
    env.commit_all("more orders");
    round(&env, &[]).code(1);

    let svg = env.root.join("all.svg");
    let html = env.root.join("all.html");
    let run = env.run(&[
        "report",
        "--html",
        html.to_str().expect("utf-8"),
        "--svg",
        svg.to_str().expect("utf-8"),
    ]);
    let run = run.success();
    assert!(run.stdout.contains("7 attempt(s)"), "{}", run.stdout);
    let svg = std::fs::read_to_string(svg).expect("svg");
    let html = std::fs::read_to_string(html).expect("html");
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains(&svg));

    let attempts = |svg: &str| {
        parse(svg)
            .descendants()
            .filter(|n| n.tag_name().name() == "g" && has_class(n, "attempt"))
            .count()
    };
    // Since the first run's last state: the second run's two attempts.
    assert_eq!(
        attempts(&report_svg(&env, &["--since", &notes_after_first])),
        2
    );
    // By run: the conductor that dispatched wo-4.
    let second = events(&record(&env, "wo-4"))[0]["run"]
        .as_str()
        .expect("a dispatch names its run")
        .to_owned();
    let first = events(&record(&env, "wo-0"))[0]["run"]
        .as_str()
        .expect("a dispatch names its run")
        .to_owned();
    assert_ne!(first, second);
    assert_eq!(attempts(&report_svg(&env, &["--run", &second])), 2);
    assert_eq!(attempts(&report_svg(&env, &["--run", &first])), 5);
}

#[test]
fn bad_input_is_one_error_exit_2_and_writes_nothing() {
    let env = ran();
    let out = env.root.join("out.svg");
    let out_arg = out.to_str().expect("utf-8");
    let first_line = |run: Run| {
        let run = run.code(2);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        run.stderr.lines().next().expect("an error").to_owned()
    };
    assert_eq!(
        first_line(env.run(&["report"])),
        "error: report: say where to write it, with --html FILE or --svg FILE"
    );
    assert_eq!(
        first_line(env.run(&["report", "--svg", out_arg, "--run", "nobody"])),
        "error: --run nobody: no attempt in refs/notes/arbiter was dispatched by that run"
    );
    assert_eq!(
        first_line(env.run(&["report", "--svg", out_arg, "--since", "no-such-rev"])),
        "error: --since no-such-rev: it names no commit"
    );
    let main = env.rev("main");
    assert_eq!(
        env.redact(&first_line(
            env.run(&["report", "--svg", out_arg, "--since", "main"])
        )),
        env.redact(&format!(
            "error: --since main: {main} is not a commit of refs/notes/arbiter"
        ))
    );
    let missing_dir = env.root.join("no/such/dir/out.svg");
    let line = first_line(env.run(&[
        "report",
        "--html",
        out_arg,
        "--svg",
        missing_dir.to_str().expect("utf-8"),
    ]));
    assert!(line.starts_with(&format!("error: cannot write {}", missing_dir.display())));
    assert!(!out.exists(), "nothing written");
    let listed = std::fs::read_dir(&env.root)
        .expect("root")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".arbiter-report")
        })
        .count();
    assert_eq!(listed, 0, "no temporary file left");
}

/// A fixed run, written as records: a retry, a halt with a hostile reason,
/// a reported cost, old records with no slot.
#[test]
fn report_of_a_fixed_run_snapshot() {
    let env = TestEnv::new();
    env.write("README", "x\n");
    for (wo, title) in [("wo-a", "A"), ("wo-b", "B"), ("wo-c", "C")] {
        env.work_order(wo, title, &[], &[&format!("{wo}.txt")]);
    }
    env.commit_all("orders");
    let t = 1_767_225_600; // 2026-01-01 00:00:00 UTC
    let run = "4242-1767225600000000000";
    let event = |secs: i64, ms: u32, event: &str, attempt: u32| serde_json::json!({"at": t + secs, "ms": ms, "event": event, "attempt": attempt});
    let dispatch = |secs: i64, attempt: u32| {
        let mut e = event(secs, 0, "dispatch", attempt);
        e["run"] = run.into();
        e
    };
    let slot = |mut e: serde_json::Value, index: u32, from: i64, to: i64| {
        e["slot"] = serde_json::json!({
            "index": index,
            "from_ms": (t + from) * 1000,
            "to_ms": (t + to) * 1000,
        });
        e
    };
    let verdicts = |build: u64, gate: u64| {
        serde_json::json!([
            {"kind": "build", "command": "b", "passed": true, "exit_code": 0, "wall_ms": build},
            {"kind": "gate", "command": "g", "passed": true, "exit_code": 0, "wall_ms": gate},
        ])
    };
    // The build reported what the attempt cost ($ARBITER_REPORT).
    let costed = |build: u64, gate: u64, cost_usd: f64| {
        let mut v = verdicts(build, gate);
        v[0]["report"] = serde_json::json!({"cost_usd": cost_usd, "model": "m"});
        v
    };
    let record = |wo: &str, attempts: u32, extra: serde_json::Value| {
        let mut r = serde_json::json!({
            "version": 1, "wo": wo, "status": "done", "halted": false, "halt_reason": null,
            "attempts": attempts, "cap": 3, "checkpoint_before": null, "checkpoint_after": null,
        });
        for (k, v) in extra.as_object().expect("fields") {
            r[k] = v.clone();
        }
        r.to_string()
    };
    // wo-a's last attempt: the merge queue's gates on the merged result
    // took the last second before it landed.
    let mut verified_a = costed(5_000, 2_000, 0.32);
    verified_a
        .as_array_mut()
        .expect("verdicts")
        .push(serde_json::json!(
            {"kind": "verify", "command": "g", "passed": true, "exit_code": 0, "wall_ms": 1_000}
        ));
    let mut needs_rework = event(4, 0, "needs_rework", 1);
    needs_rework["detail"] = "build exit 1".into();
    env.write_record(
        "wo-a",
        &record(
            "wo-a",
            2,
            serde_json::json!({
                "verdicts": verified_a,
                "earlier": [{"attempt": 1, "verdicts": costed(3_000, 0, 0.1)}],
                "history": [
                    dispatch(0, 1),
                    slot(needs_rework, 0, 1, 4),
                    dispatch(5, 2),
                    slot(event(13, 0, "built", 2), 0, 5, 13),
                    event(15, 500, "merged", 2),
                ],
            }),
        ),
    );
    env.write_record(
        "wo-b",
        &record(
            "wo-b",
            1,
            serde_json::json!({
                "verdicts": verdicts(6_000, 1_000),
                "history": [
                    dispatch(0, 1),
                    slot(event(8, 0, "built", 1), 1, 1, 8),
                    event(15, 500, "merged", 1),
                ],
            }),
        ),
    );
    let mut halt = event(12, 0, "halt", 1);
    halt["detail"] = "<script>alert(1)</script>\u{1b}[31m & more".into();
    env.write_record(
        "wo-c",
        &record(
            "wo-c",
            1,
            serde_json::json!({
                "halted": true,
                "verdicts": verdicts(2_000, 1_000),
                "history": [dispatch(8, 1), slot(halt, 1, 9, 12)],
            }),
        ),
    );
    let svg = report_svg(&env, &[]);
    parse(&svg);
    insta::assert_snapshot!(svg, @r#"
    <svg xmlns="http://www.w3.org/2000/svg" width="1200" height="242" viewBox="0 0 1200 242">
    <style>text{font-family:sans-serif;font-size:11px;fill:#222}.title{font-size:16px;font-weight:bold}.stats{font-size:12px}.note{fill:#666}.lane-bg{fill:#f4f5f7}.tick{stroke:#ccc;stroke-width:.5}.bar{fill:#e3e6ea;stroke:#666;stroke-width:.6}.setup{fill:#b9a3d6}.build{fill:#7fa7d9}.gates{fill:#8cc38c}.retry .bar{stroke:#d27b00;stroke-width:1.5;stroke-dasharray:3 2}.outcome-halted .bar{stroke:#c0392b;stroke-width:1.5}.queue{fill:#f2d49b}.verifying{fill:#d9a441}.outcome-rework .bar{stroke:#d27b00;stroke-width:1.5}.landed{fill:#2e8b57}.halt,.verify-failed{stroke:#c0392b;stroke-width:2}</style>
    <text class="title" x="10" y="24">git arbiter report</text>
    <text class="stats" x="10" y="46">makespan 15.5s · slot utilisation 67.7% over 2 lane(s) · 4 attempt(s) · orders landed 2 · halted 1 · cost $0.42 (+ 2 attempt(s) of unknown cost)</text>
    <text class="note" x="10" y="64">from 2026-01-01 00:00:00 UTC · one lane per machine-wide slot, as recorded · dashed: a retry · ◆ landed · ✕ halted, or failed on the merged result</text>
    <rect class="setup" x="10.0" y="74" width="10" height="10"/><text class="note" x="24.0" y="83">setup</text>
    <rect class="build" x="70.0" y="74" width="10" height="10"/><text class="note" x="84.0" y="83">build</text>
    <rect class="gates" x="130.0" y="74" width="10" height="10"/><text class="note" x="144.0" y="83">gates and critics</text>
    <rect class="queue" x="262.0" y="74" width="10" height="10"/><text class="note" x="276.0" y="83">in the merge queue</text>
    <rect class="verifying" x="400.0" y="74" width="10" height="10"/><text class="note" x="414.0" y="83">verifying the merged result</text>
    <line class="tick" x1="110.0" y1="106.0" x2="110.0" y2="226.0"/><text x="110.0" y="104.0" text-anchor="middle">0s</text>
    <line class="tick" x1="248.1" y1="106.0" x2="248.1" y2="226.0"/><text x="248.1" y="104.0" text-anchor="middle">2s</text>
    <line class="tick" x1="386.1" y1="106.0" x2="386.1" y2="226.0"/><text x="386.1" y="104.0" text-anchor="middle">4s</text>
    <line class="tick" x1="524.2" y1="106.0" x2="524.2" y2="226.0"/><text x="524.2" y="104.0" text-anchor="middle">6s</text>
    <line class="tick" x1="662.3" y1="106.0" x2="662.3" y2="226.0"/><text x="662.3" y="104.0" text-anchor="middle">8s</text>
    <line class="tick" x1="800.3" y1="106.0" x2="800.3" y2="226.0"/><text x="800.3" y="104.0" text-anchor="middle">10s</text>
    <line class="tick" x1="938.4" y1="106.0" x2="938.4" y2="226.0"/><text x="938.4" y="104.0" text-anchor="middle">12s</text>
    <line class="tick" x1="1076.5" y1="106.0" x2="1076.5" y2="226.0"/><text x="1076.5" y="104.0" text-anchor="middle">14s</text>
    <rect class="lane-bg" x="110" y="118.0" width="1070.0" height="24.0"/><text x="10" y="135.0">slot 0</text>
    <rect class="lane-bg" x="110" y="144.0" width="1070.0" height="24.0"/><text x="10" y="161.0">slot 1</text>
    <g class="attempt outcome-rework"><title>wo-a attempt 1: needs rework: build exit 1
    held a slot 3.0s (build 3.0s)
    cost $0.10
    run 4242-1767225600000000000</title><clipPath id="clip-0"><rect x="179.0" y="122.0" width="207.1" height="18"/></clipPath><rect class="bar" x="179.0" y="122.0" width="207.1" height="18"/><rect class="build" x="179.0" y="125.0" width="207.1" height="12.0"/><text class="label" x="182.0" y="135.0" clip-path="url(#clip-0)">wo-a</text></g>
    <g class="attempt outcome-landed"><title>wo-b attempt 1: landed
    held a slot 7.0s (build 6.0s, gates 1.0s)
    cost unknown
    run 4242-1767225600000000000</title><clipPath id="clip-1"><rect x="179.0" y="148.0" width="483.2" height="18"/></clipPath><rect class="bar" x="179.0" y="148.0" width="483.2" height="18"/><rect class="build" x="179.0" y="151.0" width="414.2" height="12.0"/><rect class="gates" x="593.2" y="151.0" width="69.0" height="12.0"/><text class="label" x="182.0" y="161.0" clip-path="url(#clip-1)">wo-b</text></g>
    <g class="attempt outcome-landed retry"><title>wo-a attempt 2 (retry): landed
    held a slot 8.0s (build 5.0s, gates 2.0s)
    cost $0.32
    run 4242-1767225600000000000</title><clipPath id="clip-2"><rect x="455.2" y="122.0" width="552.3" height="18"/></clipPath><rect class="bar" x="455.2" y="122.0" width="552.3" height="18"/><rect class="build" x="455.2" y="125.0" width="345.2" height="12.0"/><rect class="gates" x="869.4" y="125.0" width="138.1" height="12.0"/><text class="label" x="458.2" y="135.0" clip-path="url(#clip-2)">wo-a #2</text></g>
    <g class="attempt outcome-halted"><title>wo-c attempt 1: halted: &lt;script&gt;alert(1)&lt;/script&gt;[31m &amp; more
    held a slot 3.0s (build 2.0s, gates 1.0s)
    cost unknown
    run 4242-1767225600000000000</title><clipPath id="clip-3"><rect x="731.3" y="148.0" width="207.1" height="18"/></clipPath><rect class="bar" x="731.3" y="148.0" width="207.1" height="18"/><rect class="build" x="731.3" y="151.0" width="138.1" height="12.0"/><rect class="gates" x="869.4" y="151.0" width="69.0" height="12.0"/><text class="label" x="734.3" y="161.0" clip-path="url(#clip-3)">wo-c</text><path class="halt" d="M934.4 153.0L942.4 161.0M942.4 153.0L934.4 161.0"><title>wo-c: halted: &lt;script&gt;alert(1)&lt;/script&gt;[31m &amp; more</title></path></g>
    <text x="10" y="205.0">merge queue</text>
    <g class="queued"><title>wo-b attempt 1: in the merge queue 7.5s (waiting, verifying on the merged result); landed</title><rect class="queue" x="662.3" y="196.0" width="517.7" height="10"/><path class="landed" d="M1175.0 201.0L1180.0 196.0L1185.0 201.0L1180.0 206.0Z"><title>wo-b landed</title></path></g>
    <g class="queued"><title>wo-a attempt 2: in the merge queue 2.5s (verifying the merged result the last 1.0s); landed</title><rect class="queue" x="1007.4" y="210.0" width="172.6" height="10"/><rect class="verifying" x="1111.0" y="210.0" width="69.0" height="10"/><path class="landed" d="M1175.0 215.0L1180.0 210.0L1185.0 215.0L1180.0 220.0Z"><title>wo-a landed</title></path></g>
    </svg>
    "#);
}

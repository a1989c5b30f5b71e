//! What builders report they cost (`$ARBITER_REPORT`): recorded per
//! attempt, summed per order and per run, and the budgets.

use serde_json::json;

use crate::common::{Run, TestEnv};

fn repo(ids: &[&str]) -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    for id in ids {
        env.work_order(id, &format!("Order {id}"), &[], &[&format!("src/{id}.txt")]);
    }
    env.commit_all("init");
    env
}

/// Writes the order's own file, then reports $0.125 for wo-01 and $0.25
/// for any other order, with tokens and fields this version does not know.
const BUILD: &str = r#"mkdir -p src && echo "$ARBITER_WO $ARBITER_ATTEMPT" > "src/$ARBITER_WO.txt" && case $ARBITER_WO in wo-01) c=0.125;; *) c=0.25;; esac && printf '{"cost_usd":%s,"tokens":{"input":100,"output":20,"cache_read":1000},"model":"test-model","session":"s-%s"}' "$c" "$ARBITER_WO" > "$ARBITER_REPORT""#;

/// Reports $0.0625 and 10 input tokens wherever it runs (on a build and on
/// a merged result); fails wo-02's first attempt.
const GATE: &str = r#"printf '{"cost_usd":0.0625,"tokens":{"input":10}}' > "$ARBITER_REPORT" && test "$ARBITER_WO/$ARBITER_ATTEMPT" != wo-02/1"#;

fn round(env: &TestEnv, extra: &[&str]) -> Run {
    let mut args = vec!["round", "--max-total", "4"];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// Wall times (`0.0s`) vary from run to run.
fn redact_seconds(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            let secs = w
                .strip_suffix('s')
                .is_some_and(|n| n.parse::<f64>().is_ok());
            if secs {
                "[T]"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn row<'a>(json: &'a serde_json::Value, list: &str, id: &str) -> &'a serde_json::Value {
    json[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {json}"))
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {list}"))
}

#[test]
fn reported_costs_are_summed_per_order_and_per_run() {
    let env = repo(&["wo-01", "wo-02"]);
    // One order at a time: gates on merged results run once per landing.
    let run = round(&env, &["--build", BUILD, "--gate", GATE, "--max", "1"]).success();
    // wo-01: build 0.125 + gate 0.0625; wo-02: twice build 0.25 + gate
    // 0.0625 (attempt 1 failed its gate); two landings verified: 2 × 0.0625.
    let table: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("cost") || l.starts_with("order") || l.starts_with("wo-"))
        .map(|l| l.split_whitespace().last().unwrap_or_default())
        .collect();
    assert!(
        run.stdout.contains(
            "cost: $0.9375, tokens cache_read=3000 input=350 output=60\n      of it, gates on merged results: $0.125, tokens input=20\n"
        ),
        "{}",
        run.stdout
    );
    assert_eq!(table[1..], ["cost", "$0.1875", "$0.625"], "{}", run.stdout);

    let status = env.run(&["status", "--json"]).success().json();
    let one = row(&status, "orders", "wo-01");
    assert_eq!(one["cost_usd"], json!(0.1875));
    assert_eq!(
        one["tokens"],
        json!({"cache_read": 1000, "input": 110, "output": 20})
    );
    assert_eq!(one.get("attempts_without_cost"), None);
    let two = row(&status, "orders", "wo-02");
    assert_eq!(two["cost_usd"], json!(0.625));
    assert_eq!(
        two["tokens"],
        json!({"cache_read": 2000, "input": 220, "output": 40})
    );

    let show = env.run(&["show", "wo-02", "--json"]).success().json();
    assert_eq!(show["cost_usd"], json!(0.625));
    let runs = show["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for attempt in runs {
        assert_eq!(attempt["cost_usd"], json!(0.3125), "{attempt}");
    }
    let build = &runs[1]["verdicts"][0];
    assert_eq!(build["kind"], "build");
    assert_eq!(build["report"]["model"], "test-model");
    assert_eq!(
        build["report"]["session"], "s-wo-02",
        "unknown fields are kept"
    );

    let text = env.run(&["show", "wo-02"]).success().stdout;
    let costs: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("cost:") || l.starts_with("attempt ") || l.contains("model:"))
        .collect();
    insta::assert_snapshot!(redact_seconds(&costs.join("\n")), @"
    cost:     $0.625, tokens cache_read=2000 input=220 output=40
    attempt 1 (waited [T] for a slot), cost $0.3125, tokens cache_read=1000 input=110 output=20
      build model: test-model
    attempt 2 (waited [T] for a slot), cost $0.3125, tokens cache_read=1000 input=110 output=20
      build model: test-model
    ");

    let log = env.run(&["log", "wo-02", "--json"]).success().json();
    let verdicts: Vec<&serde_json::Value> = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e.get("cost_usd").is_some())
        .collect();
    assert_eq!(
        verdicts.iter().map(|e| &e["event"]).collect::<Vec<_>>(),
        ["needs_rework", "built"]
    );

    // Stock git reads it from the order's note.
    let key_file = env.root.join("key");
    std::fs::write(&key_file, "git-arbiter work order wo-01\n").expect("key file");
    let key = env.git(&["hash-object", &key_file.display().to_string()]);
    let note = env.git(&["notes", "--ref=arbiter", "show", key.trim()]);
    assert!(note.contains("\"cost_usd\": 0.125"), "{note}");
}

#[test]
fn a_malformed_report_is_a_warning_in_the_log_and_the_attempt_still_lands() {
    let env = repo(&["wo-01", "wo-02"]);
    let build = r#"mkdir -p src && echo x > "src/$ARBITER_WO.txt" && case $ARBITER_WO in wo-01) echo 'cost: lots' > "$ARBITER_REPORT";; *) echo '{"cost_usd":0.5}' > "$ARBITER_REPORT";; esac"#;
    let run = round(&env, &["--build", build, "--json"]).success();
    let summary = run.json();
    assert_eq!(summary["done"], json!(["wo-01", "wo-02"]));
    // The run's total is what was reported; the attempt without a report is
    // said to be unknown, not taken as free.
    assert_eq!(summary["cost_usd"], json!(0.5));
    assert_eq!(summary["attempts_without_cost"], json!(1));
    let unreported = row(&summary, "orders", "wo-01");
    assert_eq!(unreported.get("cost_usd"), None);
    assert_eq!(unreported["attempts_without_cost"], json!(1));
    assert_eq!(row(&summary, "orders", "wo-02")["cost_usd"], json!(0.5));
    let log = std::fs::read_to_string(env.repo.join(".git/arbiter/logs/wo-01/attempt-1.log"))
        .expect("attempt log");
    let warning = log
        .lines()
        .find(|l| l.contains("report"))
        .expect("a warning in the attempt log");
    assert!(
        warning.starts_with("[git-arbiter] warning: the build command's report ")
            && warning.contains("is ignored: not a JSON object"),
        "{warning}"
    );
    assert!(
        run.stderr.contains("arbiter warning wo=wo-01 detail="),
        "{}",
        run.stderr
    );
    let text = env.run(&["show", "wo-01"]).success().stdout;
    assert!(
        !text.lines().any(|l| l.starts_with("cost:")),
        "no report, no cost shown: {text}"
    );
}

#[test]
fn max_cost_stops_dispatch_once_the_reported_cost_reaches_it() {
    // The flag on one schedule, the config on the other.
    for (schedule, flag) in [("continuous", true), ("rounds", false)] {
        let env = repo(&["wo-02", "wo-03", "wo-04"]);
        let mut args = vec!["--build", BUILD, "--max", "1", "--json"];
        args.extend(["--schedule", schedule]);
        if flag {
            args.extend(["--max-cost", "0.5"]);
        } else {
            env.git(&["config", "arbiter.maxCost", "0.5"]);
        }
        let run = round(&env, &args).code(1);
        let summary = run.json();
        // Each build reports $0.25: two reach the budget, the third never starts.
        assert_eq!(summary["done"], json!(["wo-02", "wo-03"]), "{schedule}");
        assert_eq!(summary["pending"], json!(["wo-04"]), "{schedule}");
        assert_eq!(summary["cost_usd"], json!(0.5));
        let stopped = summary["stopped"].as_str().expect("stopped");
        assert_eq!(
            stopped,
            "cost_budget: the reported cost $0.50 reached --max-cost $0.50; builds already running finished"
        );
        assert!(
            run.stderr
                .contains("arbiter budget cost_budget=true spent_usd=0.5 max_usd=0.5\n"),
            "{}",
            run.stderr
        );
        let status = env.run(&["status", "--json"]).success().json();
        assert_eq!(row(&status, "orders", "wo-04")["attempts"], 0);
    }
}

#[test]
fn a_build_running_when_the_budget_is_reached_finishes_and_lands() {
    let env = repo(&["wo-02", "wo-03", "wo-04"]);
    // wo-02 reaches the budget alone; wo-03, dispatched with it, ends only
    // once wo-02 landed, which is after the run saw the budget reached.
    let build = r#"mkdir -p src && echo x > "src/$ARBITER_WO.txt" && case $ARBITER_WO in wo-02) c=0.5;; *) c=0.25; until git -C "$ARBITER_REPO" log --format=%B main | grep -q "Arbiter-WO: wo-02"; do sleep 0.05; done;; esac && echo "{\"cost_usd\":$c}" > "$ARBITER_REPORT""#;
    let run = round(
        &env,
        &[
            "--build",
            build,
            "--max",
            "2",
            "--max-cost",
            "0.5",
            "--timeout",
            "60s",
            "--json",
        ],
    )
    .code(1);
    let summary = run.json();
    assert_eq!(summary["done"], json!(["wo-02", "wo-03"]), "{}", run.stderr);
    assert_eq!(summary["pending"], json!(["wo-04"]));
    // What was running when the budget was reached is spent too.
    assert_eq!(summary["cost_usd"], json!(0.75));
    assert!(summary["stopped"]
        .as_str()
        .is_some_and(|s| s.starts_with("cost_budget: the reported cost $0.50 reached")));
}

#[test]
fn max_cost_per_order_halts_the_order_that_passes_it_and_keeps_its_branch() {
    let env = repo(&["wo-01", "wo-02"]);
    env.git(&["config", "arbiter.maxCostPerOrder", "0.5"]);
    // wo-01 fails each time at $0.40: its second attempt takes it to $0.80.
    let build = r#"mkdir -p src && echo x > "src/$ARBITER_WO.txt" && echo '{"cost_usd":0.4}' > "$ARBITER_REPORT" && test $ARBITER_WO != wo-01"#;
    let summary = round(&env, &["--build", build, "--json"]).code(1).json();
    assert_eq!(summary["done"], json!(["wo-02"]), "under its cap, it lands");
    let halted = row(&summary, "halted", "wo-01");
    assert_eq!(halted["reason"], "cost_cap_exceeded");
    assert_eq!(halted["branch"], "arbiter/wo-01");
    assert_eq!(
        halted["paths"],
        json!(["its attempts reported $0.80 in all, more than arbiter.maxCostPerOrder $0.50"])
    );
    assert_eq!(row(&summary, "orders", "wo-01")["attempts"], 2);
    assert!(
        env.git(&["branch", "--list", "arbiter/wo-01"])
            .contains("arbiter/wo-01"),
        "the halted order's branch is kept"
    );
    let text = env.run(&["round", "--build", build]).code(1).stdout;
    assert!(
        text.contains("  wo-01  cost_cap_exceeded [its attempts reported $0.80")
            && text.contains("      branch: arbiter/wo-01\n"),
        "{text}"
    );
}

#[test]
fn a_race_shows_each_instances_cost_and_the_total() {
    let env = repo(&["wo-01"]);
    let build = r#"mkdir -p src && echo "$ARBITER_INSTANCE" > src/wo-01.txt && printf '{"cost_usd":0.%s5}' "$ARBITER_INSTANCE" > "$ARBITER_REPORT""#;
    let run = env.run(&[
        "race",
        "wo-01",
        "-n",
        "2",
        "--build",
        build,
        "--score",
        "echo $ARBITER_INSTANCE",
        "--json",
    ]);
    let summary = run.success().json();
    let costs: Vec<&serde_json::Value> = summary["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .map(|i| &i["cost_usd"])
        .collect();
    assert_eq!(costs, [&json!(0.05), &json!(0.15)]);
    assert_eq!(summary["cost_usd"], json!(0.2));
}

#[test]
fn budgets_that_are_no_amount_are_input_errors() {
    let env = repo(&["wo-01"]);
    let run = env.run(&["round", "--build", "true", "--max-cost", "-1"]);
    insta::assert_snapshot!(run.snapshot(&env), @r"
    [stderr]
    error: invalid value '-1' for '--max-cost <USD>': '-1' is not an amount in USD (a number ≥ 0, e.g. 2.50)

    For more information, try '--help'.
    [exit status: 2]
    ");
    for (key, value) in [
        ("arbiter.maxCost", "lots"),
        ("arbiter.maxCostPerOrder", "-2"),
    ] {
        env.git(&["config", key, value]);
        let run = env.run(&["round", "--build", "true"]);
        env.git(&["config", "--unset", key]);
        assert_eq!(run.code, 2, "{key}");
        assert_eq!(
            run.stderr.lines().next(),
            Some(
                format!("error: config {key}: '{value}' is not an amount in USD (a number ≥ 0, e.g. 2.50)")
                    .as_str()
            )
        );
    }
    assert_eq!(env.notes_tip(), None, "nothing changed");
}

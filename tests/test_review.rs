//! Reviewing and recovering work: attempt logs, durations, `log`, `show`.

use crate::common::{Run, TestEnv};

fn repo() -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-01", "One", &[], &["one.txt"]);
    env.work_order("wo-02", "Two", &[], &["two.txt"]);
    env.commit_all("init");
    env
}

/// Writes the order's declared file (`one.txt` for wo-01, `two.txt` for wo-02).
const WRITE_OWN: &str =
    "echo \"$ARBITER_WO\" > $(echo $ARBITER_WO | sed 's/wo-01/one/;s/wo-02/two/').txt";

fn round(env: &TestEnv, extra: &[&str]) -> Run {
    let mut args = vec!["round", "--max-total", "4"];
    args.extend_from_slice(extra);
    env.run(&args)
}

fn attempt_log(env: &TestEnv, id: &str, attempt: u32) -> String {
    std::fs::read_to_string(
        env.repo
            .join(format!(".git/arbiter/logs/{id}/attempt-{attempt}.log")),
    )
    .expect("attempt log")
}

/// Wall times vary: `1.2s` becomes `[T]`, a UTC time `[TIME]`.
fn redact_times(text: &str) -> String {
    let mut out = String::new();
    const ENDS: [char; 6] = [' ', '\n', ',', '(', ')', '"'];
    for word in text.split_inclusive(ENDS) {
        let (core, tail) = word.split_at(word.trim_end_matches(ENDS).len());
        let is_wall = core
            .strip_suffix('s')
            .is_some_and(|n| !n.is_empty() && n.parse::<f64>().is_ok());
        let is_date = core.len() == 10 && core.as_bytes()[4] == b'-' && core.as_bytes()[7] == b'-';
        let is_clock = core.len() == 8 && core.as_bytes()[2] == b':' && core.as_bytes()[5] == b':';
        if is_wall {
            out.push_str("[T]");
        } else if is_date || is_clock {
            out.push_str("[TIME]");
        } else {
            out.push_str(core);
        }
        out.push_str(tail);
    }
    out.replace("[TIME] [TIME]", "[TIME]")
}

#[test]
fn an_attempt_log_has_a_header_markers_and_a_footer() {
    let env = repo();
    round(
        &env,
        &[
            "--build",
            &format!("echo building; {WRITE_OWN}"),
            "--gate",
            "echo gating",
            "--critic",
            "true",
        ],
    )
    .success();
    let log = env.redact(&redact_times(&attempt_log(&env, "wo-01", 1)));
    insta::assert_snapshot!(log, @r#"
    [git-arbiter] order wo-01 attempt 1 base [SHA] started [TIME] UTC after waiting [T] for a slot
    [git-arbiter] build: echo building; echo "$ARBITER_WO" > $(echo $ARBITER_WO | sed 's/wo-01/one/;s/wo-02/two/').txt
    building
    [git-arbiter] build ended: exit 0, wall time [T]
    [git-arbiter] gate: echo gating
    gating
    [git-arbiter] gate ended: exit 0, wall time [T]
    [git-arbiter] critic: true
    [git-arbiter] critic ended: exit 0, wall time [T]
    [git-arbiter] end of attempt 1: passed, wall time [T]
    "#);
}

#[test]
fn a_timeout_says_so_in_the_log() {
    let env = repo();
    round(
        &env,
        &["--build", "sleep 5", "--timeout", "300ms", "--once"],
    )
    .code(0);
    let log = redact_times(&attempt_log(&env, "wo-01", 1));
    assert!(
        log.contains("[git-arbiter] build ended: timed out (the timeout is [T]), wall time [T]\n"),
        "{log}"
    );
    assert!(
        log.contains("[git-arbiter] end of attempt 1: build timed out, wall time [T]\n"),
        "{log}"
    );
}

fn events(env: &TestEnv, args: &[&str]) -> Vec<(String, String)> {
    let mut all = vec!["log", "--json"];
    all.extend_from_slice(args);
    env.run(&all).success().json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            (
                e["wo"].as_str().expect("wo").to_owned(),
                e["event"].as_str().expect("event").to_owned(),
            )
        })
        .collect()
}

#[test]
fn log_lists_events_in_the_order_they_happened() {
    let env = repo();
    round(&env, &["--schedule", "rounds", "--build", WRITE_OWN]).success();
    let seen = events(&env, &[]);
    let pairs: Vec<(&str, &str)> = seen.iter().map(|(w, e)| (w.as_str(), e.as_str())).collect();
    // Both are dispatched in one transition, enter the merge queue, then
    // land one after the other: not all of wo-01's events before wo-02's.
    assert_eq!(
        pairs,
        [
            ("wo-01", "dispatch"),
            ("wo-02", "dispatch"),
            ("wo-01", "built"),
            ("wo-02", "built"),
            ("wo-01", "merged"),
            ("wo-02", "merged"),
        ]
    );
    // Columns are as wide as the longest id and event, no wider.
    let text = env.run(&["log"]).success().stdout;
    let first = text.lines().next().expect("a line");
    assert!(
        env.redact(first)
            .ends_with("  wo-01  dispatch  attempt=1  round_base=[SHA]"),
        "{text}"
    );
}

#[test]
fn log_of_an_unknown_order_is_an_input_error() {
    let env = repo();
    insta::assert_snapshot!(env.run(&["log", "wo-99"]).snapshot(&env), @r"
    [stderr]
    error: unknown work order 'wo-99': it has no file in the orders directory and no record in refs/notes/arbiter
    hint: 'git arbiter status' lists the work orders; 'git arbiter log' shows every order's events
    [exit status: 2]
    ");
}

#[test]
fn log_reads_the_state_without_the_orders_directory() {
    let env = repo();
    round(&env, &["--build", WRITE_OWN]).success();
    std::fs::remove_dir_all(env.repo.join("work-orders")).expect("remove orders");
    assert_eq!(events(&env, &[]).len(), 6);
    assert_eq!(events(&env, &["wo-02"]).len(), 3);
    env.run(&["log", "wo-99"]).code(2);
}

/// JSON numbers of milliseconds vary from run to run.
fn redact_ms(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("_ms\": ") {
            Some(at) => format!(
                "{}_ms\": [MS]{}",
                &l[..at],
                if l.ends_with(',') { "," } else { "" }
            ),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn show_a_done_order() {
    let env = repo();
    round(&env, &["--build", WRITE_OWN, "--gate", "true"]).success();
    let human = env.run(&["show", "wo-01"]).success();
    insta::assert_snapshot!(redact_times(&human.snapshot(&env)), @r#"
    wo-01  One
    status:   done
    attempts: 1 of 3

    attempt 1 (waited [T] for a slot)
      step    verdict  exit    wall  command
      build   passed   exit 0  [T]  echo "$ARBITER_WO" > $(echo $ARBITER_WO | sed 's/wo-01/one/;s/wo-02/two/').txt
      gate    passed   exit 0  [T]  true
      drift   passed   -       -     merge-back --drift-scope own (1 changed paths, all declared)
      verify  passed   exit 0  [T]  true
      verify log: $TEST_ENV/repo/.git/arbiter/logs/verify-[CONDUCTOR].log

    changes: 1 file(s), merge [SHA] against its first parent [SHA]
      one.txt  +1 -0  (added)
    drift:   passed, every changed path is declared

    log: $TEST_ENV/repo/.git/arbiter/logs/wo-01/attempt-1.log
      | [git-arbiter] build: echo "$ARBITER_WO" > $(echo $ARBITER_WO | sed 's/wo-01/one/;s/wo-02/two/').txt
      | [git-arbiter] build ended: exit 0, wall time [T]
      | [git-arbiter] gate: true
      | [git-arbiter] gate ended: exit 0, wall time [T]
      | [git-arbiter] end of attempt 1: passed, wall time [T]
    [stderr]
    [exit status: 0]
    "#);
    let json = env.run(&["show", "wo-01", "--json"]).success();
    insta::assert_snapshot!(redact_times(&redact_ms(&env.redact(&json.stdout))), @r#"
    {
      "version": 2,
      "id": "wo-01",
      "title": "One",
      "state": "done",
      "status": "done",
      "halted": false,
      "halt_reason": null,
      "attempts": 1,
      "cap": 3,
      "runs": [
        {
          "attempt": 1,
          "verdicts": [
            {
              "kind": "build",
              "command": "echo \"$ARBITER_WO\" > $(echo $ARBITER_WO | sed 's/wo-01/one/;s/wo-02/two/').txt",
              "passed": true,
              "exit_code": 0,
              "wall_ms": [MS]
            },
            {
              "kind": "gate",
              "command": "true",
              "passed": true,
              "exit_code": 0,
              "wall_ms": [MS]
            },
            {
              "kind": "drift",
              "command": "merge-back --drift-scope own",
              "passed": true,
              "detail": "1 changed paths, all declared"
            },
            {
              "kind": "verify",
              "command": "true",
              "passed": true,
              "exit_code": 0,
              "wall_ms": [MS],
              "log": "$TEST_ENV/repo/.git/arbiter/logs/verify-[CONDUCTOR].log"
            }
          ],
          "queue_wait_ms": [MS]
        }
      ],
      "changes": {
        "source": "merge",
        "from": "[SHA]",
        "to": "[SHA]",
        "files": [
          {
            "path": "one.txt",
            "kind": "added",
            "added": 1,
            "deleted": 0
          }
        ]
      },
      "drift": {
        "passed": true,
        "uncovered": []
      },
      "logs": [
        {
          "path": "$TEST_ENV/repo/.git/arbiter/logs/wo-01/attempt-1.log",
          "last_lines": [
            "[git-arbiter] build: echo \"$ARBITER_WO\" > $(echo $ARBITER_WO | sed 's/wo-01/one/;s/wo-02/two/').txt",
            "[git-arbiter] build ended: exit 0, wall time [T]",
            "[git-arbiter] gate: true",
            "[git-arbiter] gate ended: exit 0, wall time [T]",
            "[git-arbiter] end of attempt 1: passed, wall time [T]"
          ]
        }
      ]
    }
    "#);
    let patch = env.run(&["show", "wo-01", "-p"]).success().stdout;
    assert!(
        patch.contains("+++ b/one.txt\n@@ -0,0 +1 @@\n+wo-01\n"),
        "{patch}"
    );
}

#[test]
fn show_a_halted_order_with_drift() {
    let env = repo();
    env.git(&["config", "arbiter.retryCap", "2"]);
    round(
        &env,
        &[
            "--build",
            "echo no > one.txt; echo x > stray.txt",
            "--max",
            "1",
            "--once",
        ],
    )
    .code(1);
    let human = env.run(&["show", "wo-01"]).success();
    insta::assert_snapshot!(redact_times(&human.snapshot(&env)), @r#"
    wo-01  One
    status:   HALT undeclared_file_drift
              stray.txt
    attempts: 1 of 2

    attempt 1 (waited [T] for a slot)
      step   verdict  exit    wall  command
      build  passed   exit 0  [T]  echo no > one.txt; echo x > stray.txt
      drift  FAILED   -       -     merge-back (stray.txt)

    changes: 2 file(s), kept branch at [SHA] against its base [SHA]
      one.txt  +1 -0  (added)
      stray.txt  +1 -0  (added)
    drift:   FAILED, undeclared: stray.txt

    log: $TEST_ENV/repo/.git/arbiter/logs/wo-01/attempt-1.log
      | [git-arbiter] order wo-01 attempt 1 base [SHA] started [TIME] UTC after waiting [T] for a slot
      | [git-arbiter] build: echo no > one.txt; echo x > stray.txt
      | [git-arbiter] build ended: exit 0, wall time [T]
      | [git-arbiter] end of attempt 1: passed, wall time [T]
    [stderr]
    [exit status: 0]
    "#);
}

#[test]
fn show_an_unknown_order_is_an_input_error() {
    let env = repo();
    let run = env.run(&["show", "wo-99"]).code(2);
    assert!(
        run.stderr.contains("unknown work order 'wo-99'"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_round_summary_has_a_row_per_order_with_its_times() {
    let env = repo();
    let human = round(
        &env,
        &[
            "--schedule",
            "rounds",
            "--build",
            WRITE_OWN,
            "--gate",
            "true",
        ],
    )
    .success();
    // How busy the slots were varies from run to run.
    let text: String = redact_times(&human.stdout)
        .lines()
        .map(|l| match l.strip_prefix("slots busy: ") {
            Some(_) => "slots busy: [P]%\n".to_owned(),
            None => format!("{l}\n"),
        })
        .collect();
    insta::assert_snapshot!(text, @r"
    1 round(s): 2 done, 0 halted, 0 pending
    verified as merged: 1 gate run(s)
    slots busy: [P]%

    order  outcome  attempts  wait  build  gates  critics  queued  changed
    wo-01  done     1         [T]  [T]   [T]   -        [T]    1
    wo-02  done     1         [T]  [T]   [T]   -        [T]    1
    ");
    env.git(&["reset", "-q", "--hard"]);
    env.work_order("wo-03", "Three", &[], &["three.txt"]);
    env.commit_all("three");
    let json = round(&env, &["--json", "--build", "echo 3 > three.txt"])
        .success()
        .json();
    let rows = json["orders"].as_array().expect("orders");
    assert_eq!(rows.len(), 1, "only the orders this run dispatched: {json}");
    assert_eq!(rows[0]["id"], "wo-03");
    assert_eq!(rows[0]["outcome"], "done");
    assert_eq!(rows[0]["changed"], 1);
    assert!(
        rows[0]["build_ms"].is_u64() && rows[0]["queue_wait_ms"].is_u64(),
        "{json}"
    );
    assert!(rows[0]["gate_ms"].is_null());
}

/// Durations reach `log` too: the event that gave each attempt its verdict
/// says how long it waited for a slot and ran its build, gates and critics.
#[test]
fn log_shows_each_attempts_times() {
    let env = repo();
    let gate = "test \"$ARBITER_WO.$ARBITER_ATTEMPT\" != wo-01.1";
    round(&env, &["--build", WRITE_OWN, "--gate", gate]).success();
    let human = env.run(&["log", "wo-01"]).success().stdout;
    let verdicts: Vec<&str> = human
        .lines()
        .filter(|l| l.contains("needs_rework") || l.contains(" built "))
        .collect();
    assert_eq!(verdicts.len(), 2, "{human}");
    for line in &verdicts {
        assert!(
            line.contains("(wait ") && line.contains("build ") && line.contains("gates "),
            "{human}"
        );
    }
    let json = env.run(&["log", "wo-01", "--json"]).success().json();
    let timed: Vec<&serde_json::Value> = json["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e.get("times").is_some())
        .collect();
    assert_eq!(timed.len(), 2, "{json}");
    assert_eq!(timed[0]["attempt"], 1);
    assert_eq!(timed[1]["attempt"], 2);
    assert!(timed[1]["times"]["build_ms"].is_u64(), "{json}");
}

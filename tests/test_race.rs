use std::io::Write;
use std::process::Stdio;

use crate::common::{assert_interrupted, meet_second_start, Run, TestEnv};

fn repo() -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-01", "One", &[], &["src/one.txt"]);
    env.commit_all("init");
    env
}

/// Each instance writes its own version of the declared file.
const BUILD: &str = "mkdir -p src && echo \"instance $ARBITER_INSTANCE\" > src/one.txt";

/// Scores 5 / 8 / 7 for instances 0 / 1 / 2.
const SCORE_587: &str =
    "echo scoring; case $ARBITER_INSTANCE in 0) echo 5;; 1) echo 8;; *) echo 7;; esac";

fn race(env: &TestEnv, extra: &[&str]) -> Run {
    let mut args = vec!["race", "wo-01", "--json", "--max-total", "4"];
    args.extend_from_slice(extra);
    env.run(&args)
}

fn race_branches(env: &TestEnv) -> String {
    env.git(&["branch", "--list", "arbiter-race/*"])
}

/// The main worktree and those not free in the pool.
fn worktree_count(env: &TestEnv) -> usize {
    1 + env.linked_worktrees().len()
}

fn main_file(env: &TestEnv) -> Option<String> {
    let run = env.git_try_in(&env.repo, &["show", "main:src/one.txt"]);
    (run.code == 0).then_some(run.stdout)
}

#[test]
fn highest_score_is_merged_with_a_pick_record() {
    let env = repo();
    let summary = race(&env, &["-n", "3", "--build", BUILD, "--score", SCORE_587])
        .success()
        .json();
    assert_eq!(summary["winner"], 1);
    assert_eq!(main_file(&env).as_deref(), Some("instance 1\n"));
    let sha = summary["merge_commit"].as_str().expect("merge commit");
    assert_eq!(env.git(&["rev-parse", "main"]).trim(), sha);
    // Stock git reads the pick record.
    let note = env.git(&["notes", "--ref=arbiter-picks", "show", sha]);
    let pick: serde_json::Value = serde_json::from_str(&note).expect("pick record is JSON");
    assert_eq!(pick["version"], 1);
    assert_eq!(pick["wo_id"], "wo-01");
    assert_eq!(pick["winner_instance"], 1);
    assert_eq!(pick["score"], 8);
    assert_eq!(pick["verdict"], "passed");
    assert_eq!(pick["loser_instances"], serde_json::json!([0, 2]));
    assert_eq!(pick["instances"].as_array().expect("instances").len(), 3);
    assert_eq!(
        pick["merge_policy"],
        "no-ff merge-back, drift scope own, no conflict auto-resolution"
    );
    assert_eq!(summary["pick"], pick);
    // The merge commit's regular note is written by merge-back too.
    let regular = env.git(&["notes", "--ref=arbiter", "show", sha]);
    assert!(regular.contains("wo-01"), "{regular}");
    // Losers (and the merged winner) are gone.
    assert_eq!(race_branches(&env), "");
    assert_eq!(worktree_count(&env), 1);
    // The work order is done and `log` shows the pick.
    let log = env.run(&["log"]).success();
    assert!(log.stdout.contains("race_dispatch"), "{}", log.stdout);
    assert!(log.stdout.contains("pick"), "{}", log.stdout);
    assert!(log.stdout.contains("instance=1 score=8"), "{}", log.stdout);
    let events = env.run(&["log", "--json"]).success().json();
    let pick_event = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["event"] == "pick")
        .cloned()
        .expect("a pick event");
    assert_eq!(
        pick_event["pick"], pick,
        "log --json carries the pick record"
    );
    let status = env.run(&["status", "--json"]).success().json();
    let row = &status["orders"][0];
    assert_eq!(row["id"], "wo-01");
    assert_eq!(row["status"], "done");
    env.fsck();
    // Done: a second race is refused as bad input, nothing changes.
    let again = race(&env, &["-n", "2", "--build", BUILD, "--score", "echo 1"]).code(2);
    assert!(again.stderr.contains("already done"), "{}", again.stderr);
}

/// One rule for a spent retry cap, as the round's dispatch has: the order
/// The state deleted while a race builds: its record is gone, so nothing
/// lands and every instance is kept, and the escalation says why in a
/// sentence (it read "the work order was its record is gone").
#[test]
fn a_race_whose_record_is_gone_says_so() {
    let env = repo();
    let build = format!("git update-ref -d refs/notes/arbiter; {BUILD}");
    let run = race(&env, &["-n", "2", "--build", &build, "--score", SCORE_587]).code(1);
    let summary = run.json();
    assert_eq!(
        summary["escalation"],
        "the race no longer holds the work order (its record is gone); nothing was merged",
        "{summary}"
    );
    assert_eq!(main_file(&env), None, "nothing merged");
    assert_eq!(
        race_branches(&env).lines().count(),
        2,
        "both instances kept"
    );
}

/// halts `retry_cap_exhausted` (an escalation, exit 1), nothing is built.
#[test]
fn an_order_with_every_attempt_spent_halts_as_in_a_round() {
    let env = repo();
    env.git(&["config", "arbiter.retryCap", "1"]);
    // One failed attempt: back for rework, its one attempt spent.
    env.run(&["round", "--once", "--build", "false"]).success();
    let run = race(&env, &["-n", "2", "--build", BUILD, "--score", SCORE_587]).code(1);
    let summary = run.json();
    assert!(
        summary["escalation"]
            .as_str()
            .is_some_and(|e| e.contains("retry_cap_exhausted")),
        "{summary}"
    );
    assert!(
        run.stderr
            .contains("arbiter halt wo=wo-01 reason=retry_cap_exhausted"),
        "{}",
        run.stderr
    );
    let status = env.run(&["status", "--json"]).success().json();
    let row = &status["orders"][0];
    assert_eq!(row["halted"], true, "{row}");
    assert_eq!(row["halt_reason"], "retry_cap_exhausted", "{row}");
    assert_eq!(main_file(&env), None, "nothing merged");
    assert!(race_branches(&env).is_empty());
}

#[test]
fn a_tie_goes_to_the_earliest_finish() {
    let env = repo();
    // Instance 1's score runs after its finish is taken; instance 0's build
    // ends only once that score has run, so it finishes second whatever the load.
    let scored = env.root.join("scored-1");
    let build = format!(
        "{BUILD}; if [ $ARBITER_INSTANCE = 0 ]; then i=0; while [ ! -e {s} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; fi",
        s = scored.display()
    );
    let score = format!(
        "touch {}-$ARBITER_INSTANCE; echo 8",
        env.root.join("scored").display()
    );
    let summary = race(&env, &["-n", "2", "--build", &build, "--score", &score])
        .success()
        .json();
    assert_eq!(summary["winner"], 1, "{summary}");
    assert_eq!(main_file(&env).as_deref(), Some("instance 1\n"));
    let f0 = summary["instances"][0]["finished_at"].as_u64().expect("t0");
    let f1 = summary["instances"][1]["finished_at"].as_u64().expect("t1");
    assert!(f1 < f0);
}

#[test]
fn a_failed_gate_excludes_a_high_score() {
    let env = repo();
    let summary = race(
        &env,
        &[
            "-n",
            "3",
            "--build",
            BUILD,
            "--gate",
            "test $ARBITER_INSTANCE != 1",
            // The gate names instances: on the merged result there is none.
            "--verify",
            "none",
            "--score",
            SCORE_587,
        ],
    )
    .success()
    .json();
    assert_eq!(summary["winner"], 2);
    assert_eq!(summary["instances"][1]["verdict"], "gate_failed");
    assert_eq!(summary["instances"][1]["score"], serde_json::Value::Null);
    assert_eq!(main_file(&env).as_deref(), Some("instance 2\n"));
}

#[test]
fn min_score_above_every_score_merges_nothing_and_escalates() {
    let env = repo();
    let before = env.git(&["rev-parse", "main"]);
    let run = env
        .run(&[
            "race",
            "wo-01",
            "-n",
            "3",
            "--max-total",
            "4",
            "--build",
            BUILD,
            "--score",
            SCORE_587,
            "--min-score",
            "100",
        ])
        .code(1);
    assert!(run.stdout.contains("ESCALATION"), "{}", run.stdout);
    for line in [
        "#0  passed",
        "score=5",
        "#1  passed",
        "score=8",
        "#2  passed",
        "score=7",
    ] {
        assert!(run.stdout.contains(line), "missing {line}:\n{}", run.stdout);
    }
    assert_eq!(env.git(&["rev-parse", "main"]), before, "nothing merged");
    assert_eq!(main_file(&env), None);
    assert_eq!(race_branches(&env), "");
    // The floor also comes from config.
    env.git(&["config", "arbiter.minScore", "100"]);
    env.run(&["clear", "wo-01"]).success();
    let summary = race(&env, &["-n", "1", "--build", BUILD, "--score", "echo 99"])
        .code(1)
        .json();
    assert_eq!(summary["min_score"], 100);
    assert_eq!(summary["winner"], serde_json::Value::Null);
}

#[test]
fn invalid_score_output_makes_the_instance_invalid() {
    let env = repo();
    let score = "if [ $ARBITER_INSTANCE = 1 ]; then echo 99; echo 'not a number'; else echo 3; fi";
    let summary = race(&env, &["-n", "2", "--build", BUILD, "--score", score])
        .success()
        .json();
    assert_eq!(summary["winner"], 0);
    let bad = &summary["instances"][1];
    assert_eq!(bad["verdict"], "invalid_score");
    assert_eq!(bad["score"], serde_json::Value::Null);
    assert!(
        bad["reason"]
            .as_str()
            .expect("reason")
            .contains("'not a number' is not an integer"),
        "{bad}"
    );
}

#[test]
fn keep_losers_keeps_their_worktrees_and_branches() {
    let env = repo();
    let summary = race(
        &env,
        &[
            "-n",
            "3",
            "--build",
            BUILD,
            "--score",
            SCORE_587,
            "--keep-losers",
        ],
    )
    .success()
    .json();
    assert_eq!(summary["winner"], 1);
    let branches = race_branches(&env);
    assert!(
        branches.contains("arbiter-race/wo-01/0") && branches.contains("arbiter-race/wo-01/2"),
        "{branches}"
    );
    assert!(!branches.contains("arbiter-race/wo-01/1"), "{branches}");
    assert_eq!(worktree_count(&env), 3);
    let wt = summary["instances"][0]["worktree"].as_str().expect("path");
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(wt).join("src/one.txt")).expect("kept file"),
        "instance 0\n"
    );
}

#[test]
fn drift_in_the_best_falls_back_to_the_next_best() {
    let env = repo();
    let build = format!("{BUILD}; if [ $ARBITER_INSTANCE = 1 ]; then echo x > undeclared.txt; fi");
    let summary = race(&env, &["-n", "3", "--build", &build, "--score", SCORE_587])
        .success()
        .json();
    assert_eq!(summary["merges"][0]["instance"], 1);
    assert_eq!(summary["merges"][0]["outcome"], "undeclared_file_drift");
    assert_eq!(summary["merges"][1]["instance"], 2);
    assert_eq!(summary["merges"][1]["outcome"], "merged");
    assert_eq!(summary["winner"], 2);
    assert_eq!(main_file(&env).as_deref(), Some("instance 2\n"));
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "done", "{status}");
    assert_eq!(status["orders"][0]["halted"], false, "{status}");
    assert_eq!(race_branches(&env), "");
}

#[test]
fn the_race_respects_the_slot_cap() {
    let env = repo();
    let trace = env.root.join("trace");
    // Each build waits (up to 10 s) until a second one has started: with a
    // cap of 2 the first two always meet, and a cap wrongly held at 1 shows
    // as a peak of 1 instead of depending on how long a sleep overlaps.
    let build = format!(
        "echo \"start $(date +%s%N)\" >> {t}; {meet}; {BUILD}; echo \"end $(date +%s%N)\" >> {t}",
        t = trace.display(),
        meet = meet_second_start(&trace),
    );
    env.run(&[
        "race",
        "wo-01",
        "-n",
        "4",
        "--max-total",
        "2",
        "--build",
        &build,
        "--score",
        "echo $ARBITER_INSTANCE",
    ])
    .success();
    let text = std::fs::read_to_string(&trace).expect("trace");
    let mut events: Vec<(u128, i32)> = text
        .lines()
        .map(|l| {
            let (kind, t) = l.split_once(' ').expect("kind and time");
            (
                t.parse().expect("nanos"),
                if kind == "start" { 1 } else { -1 },
            )
        })
        .collect();
    assert_eq!(events.len(), 8, "{text}");
    // Ends before starts at the same instant.
    events.sort();
    let (mut now, mut peak) = (0, 0);
    for (_, d) in events {
        now += d;
        peak = peak.max(now);
    }
    assert_eq!(peak, 2, "peak concurrency with cap 2:\n{text}");
}

fn pick(env: &TestEnv, args: &[&str], stdin: &str) -> Run {
    let mut cmd = env.command_in(&env.root, args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn pick_reads_candidates_from_stdin() {
    let env = TestEnv::new();
    let input = r#"{"version":1,"candidates":[
        {"instance":0,"passed":true,"score":5,"finished_at":1,"verdict":"passed"},
        {"instance":1,"passed":true,"score":8,"finished_at":3,"verdict":"passed"},
        {"instance":2,"passed":true,"score":8,"finished_at":2,"verdict":"passed"},
        {"instance":3,"passed":false,"score":99,"finished_at":0,"verdict":"gate_failed"}]}"#;
    let out = pick(&env, &["pick", "--json"], input).success().json();
    assert_eq!(
        out,
        serde_json::json!({"version":2,"winner":2,"order":[2,1,0]})
    );
    assert_eq!(pick(&env, &["pick"], input).success().stdout, "2\n");
    let none = pick(&env, &["pick", "--json", "--min-score", "9"], input).code(1);
    assert_eq!(none.json()["winner"], serde_json::Value::Null);
    let bad = pick(&env, &["pick"], "{not json").code(2);
    assert!(
        bad.stderr
            .starts_with("error: stdin is not a candidate list"),
        "{}",
        bad.stderr
    );
    assert!(bad.stdout.is_empty());
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let env = repo();
    env.work_order("wo-02", "Two", &["wo-01"], &["src/two.txt"]);
    env.commit_all("wo-02");
    let before = env.git(&["for-each-ref"]);
    for (args, needle) in [
        (
            vec![
                "race", "wo-99", "-n", "2", "--build", "true", "--score", "echo 1",
            ],
            "no work order 'wo-99'",
        ),
        (
            vec![
                "race", "wo-01", "-n", "0", "--build", "true", "--score", "echo 1",
            ],
            "out of range",
        ),
        (
            vec![
                "race", "wo-02", "-n", "2", "--build", "true", "--score", "echo 1",
            ],
            "depends on 'wo-01'",
        ),
    ] {
        let run = env.run(&args).code(2);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("hint: "), "{}", run.stderr);
    }
    assert_eq!(env.git(&["for-each-ref"]), before, "nothing changed");
}

#[test]
fn stop_ends_the_race_gives_the_attempt_back_and_cleans_up() {
    let env = repo();
    let started = env.root.join("started");
    let build = format!("touch {}; sleep 300", started.display());
    let child = env
        .command_in(
            &env.repo,
            &[
                "race", "wo-01", "-n", "2", "--json", "--build", &build, "--score", "echo 1",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn race");
    for _ in 0..600 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started.exists(), "the builder never started");
    env.run(&["stop"]).success();
    assert_interrupted(child);
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "needs_rework", "{status}");
    assert_eq!(
        status["orders"][0]["attempts"], 0,
        "a stopped race is given back"
    );
    assert_eq!(race_branches(&env), "");
    assert_eq!(worktree_count(&env), 1);
    // A race afterwards runs normally.
    race(&env, &["-n", "2", "--build", BUILD, "--score", "echo 1"]).success();
}

/// The best instance's merge conflicts (the integration branch moved under
/// the race): it is never resolved silently; the next-best instance merges.
#[test]
fn a_conflict_in_the_best_falls_back_to_the_next_best() {
    let env = TestEnv::new();
    env.write("src/x.txt", "base\n");
    env.work_order("wo-02", "Two files", &[], &["src/x.txt", "src/y.txt"]);
    env.commit_all("init");
    let build =
        "if [ $ARBITER_INSTANCE = 0 ]; then echo zero > src/y.txt; else echo one > src/x.txt; fi";
    // Instance 1 scores best; while it is scored, someone commits a
    // conflicting edit of src/x.txt to main.
    let score = format!(
        "if [ $ARBITER_INSTANCE = 1 ]; then echo concurrent > {repo}/src/x.txt && git -C {repo} commit -qam concurrent && echo 8; else echo 5; fi",
        repo = env.repo.display()
    );
    let summary = env
        .run(&[
            "race", "wo-02", "--json", "-n", "2", "--build", build, "--score", &score,
        ])
        .success()
        .json();
    assert_eq!(summary["winner"], 0, "{summary}");
    assert_eq!(
        env.git(&["show", "main:src/x.txt"]),
        "concurrent\n",
        "the conflicting edit is kept, not overwritten"
    );
    assert_eq!(env.git(&["show", "main:src/y.txt"]), "zero\n");
    let log = env.run(&["log"]).success().stdout;
    assert!(
        log.contains("race_fallback") && log.contains("merge_conflict"),
        "{log}"
    );
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "done");
    assert_eq!(status["orders"][0]["halted"], false);
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    env.fsck();
}

/// A local change elsewhere in the checkout does not stop a race; one
/// where the winner writes keeps the winner waiting to land, on the order's
/// branch, and a round lands it without a rebuild.
#[test]
fn a_race_lands_around_local_changes_or_keeps_its_winner_waiting() {
    let env = repo();
    std::fs::write(env.repo.join("README"), "my edit\n").expect("edit");
    let summary = race(&env, &["-n", "2", "--build", BUILD, "--score", SCORE_587])
        .success()
        .json();
    assert_eq!(summary["winner"], 1, "{summary}");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("README")).expect("README"),
        "my edit\n"
    );

    let env = repo();
    env.write("src/one.txt", "the user's own\n");
    let summary = race(&env, &["-n", "2", "--build", BUILD, "--score", SCORE_587])
        .success()
        .json();
    assert!(
        summary["waiting"]
            .as_str()
            .is_some_and(|w| w.contains("'src/one.txt'")),
        "{summary}"
    );
    assert_eq!(summary["merges"][0]["outcome"], "waiting");
    assert_eq!(
        env.git(&["show", "arbiter/wo-01:src/one.txt"]),
        "instance 1\n"
    );
    assert_eq!(race_branches(&env), "");
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "verified", "{status}");
    std::fs::remove_file(env.repo.join("src/one.txt")).expect("rm");
    env.run(&["round", "--json", "--build", "false"]).success();
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/one.txt")).expect("one"),
        "instance 1\n"
    );
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    env.fsck();
}

#[test]
fn a_winner_failing_the_gates_once_merged_falls_back_to_the_next_best() {
    let env = TestEnv::new();
    env.write("lib.txt", "greet\nwave\n");
    env.work_order("wo-03", "Call a function", &[], &["app.txt"]);
    env.commit_all("init");
    // Each instance calls a function lib.txt defines; the gate checks that.
    let build =
        "if [ $ARBITER_INSTANCE = 0 ]; then echo greet > app.txt; else echo wave > app.txt; fi";
    let gate = "grep -qx \"$(cat app.txt)\" lib.txt";
    // Instance 0 scores best; while it is scored, main drops `greet`.
    let score = format!(
        "if [ $ARBITER_INSTANCE = 0 ]; then echo wave > {repo}/lib.txt && git -C {repo} commit -qam 'drop greet' && echo 9; else echo 5; fi",
        repo = env.repo.display()
    );
    let summary = env
        .run(&[
            "race", "wo-03", "--json", "-n", "2", "--build", build, "--gate", gate, "--score",
            &score,
        ])
        .success()
        .json();
    assert_eq!(summary["winner"], 1, "{summary}");
    assert_eq!(summary["merges"][0]["outcome"], "merged_gate_failed");
    assert_eq!(summary["gate_runs"], 2, "{summary}");
    assert_eq!(env.git(&["show", "main:app.txt"]), "wave\n");
    // Every first-parent commit of main passes the gate.
    for sha in env.git(&["rev-list", "--first-parent", "main"]).lines() {
        let app = env.git_try_in(&env.repo, &["show", &format!("{sha}:app.txt")]);
        if app.code == 0 {
            let lib = env.git(&["show", &format!("{sha}:lib.txt")]);
            assert!(lib.lines().any(|l| l == app.stdout.trim()), "{sha}");
        }
    }
    env.fsck();
}

use std::path::Path;

use crate::common::{assert_interrupted, event_names, meet_second_start, wait_for, Run, TestEnv};

/// A repo with disjoint work orders and a builder script that writes the
/// declared file of whichever WO it is building.
fn repo() -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-01", "One", &[], &["src/one.txt"]);
    env.work_order("wo-02", "Two", &[], &["src/two.txt"]);
    env.commit_all("init");
    env
}

const WRITE_OWN: &str = "mkdir -p src && echo \"$ARBITER_WO attempt $ARBITER_ATTEMPT\" > src/$(echo $ARBITER_WO | sed 's/wo-0//;s/1/one/;s/2/two/;s/3/three/').txt";

fn round(env: &TestEnv, extra: &[&str]) -> Run {
    let mut args = vec!["round", "--json", "--max-total", "4"];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// [`round`], returned only once every process it started has ended too,
/// however the conductor ended: its stderr is open in it as fd 3 as well,
/// which each process it starts inherits (nothing closes it), so that
/// stream ends when the last of them exits, not when the conductor does.
fn round_and_all_it_started(env: &TestEnv, extra: &[&str]) -> Run {
    let mut args = vec!["round", "--json", "--max-total", "4"];
    args.extend_from_slice(extra);
    let cmd = env.command_in(&env.repo, &args);
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 3>&2")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .current_dir(&env.repo)
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn round");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output().expect("wait")));
    crate::common::to_run(
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("every process the round started ends"),
    )
}

fn status_of(env: &TestEnv, id: &str) -> serde_json::Value {
    let json = env.run(&["status", "--json"]).success().json();
    json["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .find(|r| r["id"] == id)
        .cloned()
        .expect("row")
}

/// fsck clean, integration worktree clean, and no worktrees left but those
/// kept for the `kept` halted work orders.
fn clean_afterwards_keeping(env: &TestEnv, kept: usize) {
    env.fsck();
    assert_eq!(
        env.git(&["status", "--porcelain"]),
        "",
        "the checked-out integration branch must stay clean"
    );
    let worktrees = env.linked_worktrees();
    assert_eq!(worktrees.len(), kept, "leftover worktrees: {worktrees:?}");
}

fn clean_afterwards(env: &TestEnv) {
    clean_afterwards_keeping(env, 0);
}

#[test]
fn all_pass_merges_each_and_exits_0() {
    let env = repo();
    let run = round(&env, &["--build", WRITE_OWN]).success();
    let summary = run.json();
    assert_eq!(summary["version"], 2);
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    assert_eq!(summary["rounds"], 1, "disjoint orders share one round");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/one.txt")).expect("merged file"),
        "wo-01 attempt 1\n"
    );
    let log = env.git(&["log", "--format=%s%n%b", "main"]);
    assert!(
        log.contains("Merge wo-01: One") && log.contains("Arbiter-WO: wo-02"),
        "{log}"
    );
    assert!(
        run.stderr
            .contains("arbiter batch ready=2 batch=2 deferred=0"),
        "{}",
        run.stderr
    );
    // Every merge commit has a note stock git shows.
    let notes = env.git(&["log", "--notes=arbiter", "--merges", "--format=%N", "main"]);
    assert!(
        notes.contains("wo-01") && notes.contains("wo-02"),
        "{notes}"
    );
    assert!(env.git(&["branch", "--list", "arbiter/*"]).is_empty());
    clean_afterwards(&env);
    // Nothing left: a second run is a no-op.
    let again = round(&env, &["--build", "exit 99"]).success().json();
    assert_eq!(again["rounds"], 0);
}

#[test]
fn gate_fails_then_passes_on_retry() {
    let env = repo();
    let gate = "test \"$ARBITER_ATTEMPT\" != 1";
    let summary = round(
        &env,
        &["--schedule", "rounds", "--build", WRITE_OWN, "--gate", gate],
    )
    .success()
    .json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    assert_eq!(summary["rounds"], 2);
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/one.txt")).expect("merged"),
        "wo-01 attempt 2\n"
    );
    let row = status_of(&env, "wo-01");
    assert_eq!(row["attempts"], 2);
    clean_afterwards(&env);
}

#[test]
fn build_failure_exhausts_the_cap_and_escalates() {
    let env = repo();
    env.git(&["config", "arbiter.retryCap", "2"]);
    let run = round(&env, &["--build", "echo doomed; exit 7"]).code(1);
    let summary = run.json();
    assert_eq!(summary["halted"][0]["id"], "wo-01");
    assert_eq!(summary["halted"][0]["reason"], "retry_cap_exhausted");
    let row = status_of(&env, "wo-01");
    assert_eq!(row["attempts"], 2, "the cap is never exceeded");
    assert_eq!(row["halted"], true);
    let log = std::fs::read_to_string(env.repo.join(".git/arbiter/logs/wo-01/attempt-2.log"))
        .expect("log");
    assert!(log.contains("doomed"));
    let human = env.run(&["round", "--build", "true"]).code(1);
    assert!(human.stdout.contains("ESCALATION"), "{}", human.stdout);
    assert!(
        human.stdout.contains("wo-01  retry_cap_exhausted"),
        "{}",
        human.stdout
    );
    clean_afterwards(&env);
}

#[test]
fn critic_halts_and_keeps_the_branch() {
    let env = repo();
    let critic = "test \"$ARBITER_WO\" != wo-02";
    let summary = round(&env, &["--build", WRITE_OWN, "--critic", critic])
        .code(1)
        .json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01"]));
    assert_eq!(summary["halted"][0]["reason"], "blocking_critique");
    assert_eq!(summary["halted"][0]["branch"], "arbiter/wo-02");
    assert!(env
        .git(&["log", "--format=%s", "arbiter/wo-02"])
        .contains("wo-02: Two"));
    // clear lifts the halt and the next round runs it.
    env.run(&["clear", "wo-02"]).success();
    round(&env, &["--build", WRITE_OWN]).success();
    assert!(env.repo.join("src/two.txt").exists());
    clean_afterwards(&env);
}

/// Gone, or a zombie waiting for its new parent to reap it.
fn is_gone(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().next());
    matches!(state, None | Some("Z"))
}

#[test]
fn timeout_ends_the_whole_process_group() {
    let env = repo();
    env.git(&["config", "arbiter.retryCap", "1"]);
    let pids = env.root.join("pids");
    let build = format!("sleep 300 & echo $! >> {}; wait", pids.display());
    let summary = round(&env, &["--build", &build, "--timeout", "1s"])
        .code(1)
        .json();
    assert_eq!(summary["halted"].as_array().expect("halted").len(), 2);
    for pid in std::fs::read_to_string(&pids).expect("pids").lines() {
        assert!(is_gone(pid), "grandchild {pid} survived");
    }
    let row = status_of(&env, "wo-01");
    assert_eq!(row["last_verdicts"][0]["detail"], "timed out");
}

#[test]
fn drift_is_rejected_before_the_branch_moves() {
    let env = repo();
    let build = format!("{WRITE_OWN}; if [ $ARBITER_WO = wo-02 ]; then echo sneaky >> README; fi");
    let before = env.git(&["rev-parse", "main"]);
    let summary = round(&env, &["--build", &build]).code(1).json();
    assert_eq!(summary["halted"][0]["id"], "wo-02");
    assert_eq!(summary["halted"][0]["reason"], "undeclared_file_drift");
    assert_eq!(summary["halted"][0]["paths"], serde_json::json!(["README"]));
    // main holds wo-01's merge only: never the rejected change, not even for a moment.
    let reflog = env.git(&["reflog", "--format=%H", "main"]);
    assert_eq!(
        reflog.lines().count(),
        2,
        "main moved once (plus its creation): {reflog}"
    );
    assert_ne!(env.git(&["rev-parse", "main"]), before);
    assert_eq!(
        std::fs::read_to_string(env.repo.join("README")).expect("README"),
        "base\n"
    );
    // The rejected attempt stays for inspection: its worktree and branch.
    assert!(env
        .git(&["show", "--stat", "arbiter/wo-02"])
        .contains("README"));
    clean_afterwards_keeping(&env, 1);
}

#[test]
fn conflict_halts_with_merge_conflict() {
    let env = TestEnv::new();
    env.write("shared.txt", "one\n");
    env.work_order("wo-01", "Owner", &[], &["shared.txt"]);
    env.work_order("wo-02", "Intruder", &[], &["other.txt"]);
    env.commit_all("init");
    let build = "if [ $ARBITER_WO = wo-01 ]; then echo mine > shared.txt; else echo theirs > shared.txt; echo x > other.txt; fi";
    // Lockstep, so wo-01 lands first: landed before it, wo-02 would halt for drift.
    let summary = round(&env, &["--schedule", "rounds", "--build", build])
        .code(1)
        .json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01"]));
    assert_eq!(summary["halted"][0]["reason"], "merge_conflict");
    assert_eq!(
        summary["halted"][0]["paths"],
        serde_json::json!(["shared.txt"])
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("shared.txt")).expect("file"),
        "mine\n"
    );
    clean_afterwards_keeping(&env, 1);
}

#[test]
fn dependent_sees_its_dependency() {
    let env = TestEnv::new();
    env.write("README", "x\n");
    env.work_order("wo-01", "Base", &[], &["lib.txt"]);
    env.work_order("wo-02", "User", &["wo-01"], &["use.txt"]);
    env.commit_all("init");
    let build =
        "if [ $ARBITER_WO = wo-01 ]; then echo lib > lib.txt; else cat lib.txt > use.txt; fi";
    let summary = round(&env, &["--build", build]).success().json();
    assert_eq!(summary["rounds"], 2);
    assert_eq!(
        std::fs::read_to_string(env.repo.join("use.txt")).expect("file"),
        "lib\n"
    );
    clean_afterwards(&env);
}

#[test]
fn dry_run_plans_and_changes_nothing() {
    let env = TestEnv::new();
    env.write("README", "x\n");
    env.work_order("wo-01", "Base", &[], &["a"]);
    env.work_order("wo-02", "Same", &[], &["a"]);
    env.work_order("wo-03", "Dep", &["wo-01"], &["b"]);
    env.commit_all("init");
    let run = env
        .run(&["round", "--dry-run", "--build", "exit 1"])
        .success();
    insta::assert_snapshot!(run.stdout, @r"
    round 1: wo-01
    round 2: wo-02 wo-03
    ");
    assert_eq!(env.notes_tip(), None);
}

#[test]
fn builder_env_is_set_and_git_env_is_not() {
    let mut env = repo();
    let out = env.root.join("env.txt");
    let build = format!(
        "echo \"$ARBITER_WO|$ARBITER_TITLE|$ARBITER_ATTEMPT|${{ARBITER_ROUND_BASE:+base}}|$(test \"$ARBITER_BASE\" = \"$ARBITER_ROUND_BASE\" && git merge-base --is-ancestor $ARBITER_BASE HEAD && echo same)|$(basename $ARBITER_WORKTREE)|$(basename $ARBITER_WO_FILE)|${{GIT_DIR-unset}}|${{GIT_INDEX_FILE-unset}}|$(pwd -P | xargs basename)\" >> {}; {WRITE_OWN}",
        out.display()
    );
    // As from a hook: git's variables are set for the conductor itself.
    env.set_env("GIT_DIR", env.repo.join(".git").to_str().expect("utf-8"));
    env.set_env(
        "GIT_INDEX_FILE",
        env.repo.join(".git/index").to_str().expect("utf-8"),
    );
    env.run(&[
        "round",
        "--schedule",
        "rounds",
        "--build",
        &build,
        "--max",
        "1",
    ])
    .success();
    let text = std::fs::read_to_string(&out).expect("env");
    // One order per round: wo-02 reuses the pooled worktree `pool/0` of wo-01.
    assert_eq!(text, "wo-01|One|1|base|same|0|wo-01.md|unset|unset|0\nwo-02|Two|1|base|same|0|wo-02.md|unset|unset|0\n");
}

fn spawn_round(env: &TestEnv, dir: &Path, build: &str) -> std::process::Child {
    env.command_in(dir, &["round", "--json", "--build", build])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn round")
}

/// A round whose builders never finish, returned once one of them runs.
fn spawn_busy_round(env: &TestEnv) -> std::process::Child {
    let started = env.root.join("started");
    let build = format!("touch {}; sleep 300", started.display());
    let child = spawn_round(env, &env.repo, &build);
    wait_for(&started);
    child
}

#[test]
fn stop_ends_builders_records_state_and_resumes() {
    let env = repo();
    let child = spawn_busy_round(&env);
    env.run(&["stop"]).success();
    assert_interrupted(child);
    let row = status_of(&env, "wo-01");
    assert_eq!(row["status"], "needs_rework");
    assert_eq!(row["attempts"], 0, "a stopped attempt is given back");
    // A round started afterwards runs normally and finishes the work.
    round(&env, &["--build", WRITE_OWN]).success();
    clean_afterwards(&env);
}

/// A standalone merge-back never takes a work order from under a live round:
/// its branch may be half-built.
#[test]
fn merge_back_refuses_a_work_order_a_live_round_owns() {
    let env = repo();
    let child = spawn_busy_round(&env);
    let notes_before = env.notes_tip();
    let main_before = env.git(&["rev-parse", "main"]);
    let run = env.run(&["merge-back", "wo-01"]).code(2);
    assert!(
        run.stderr.contains("is being built by a running round"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint: "), "{}", run.stderr);
    assert_eq!(env.notes_tip(), notes_before);
    assert_eq!(env.git(&["rev-parse", "main"]), main_before);
    env.run(&["stop"]).success();
    assert_interrupted(child);
}

#[test]
fn sigint_stops_like_stop() {
    let env = repo();
    let child = spawn_busy_round(&env);
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT to our own child");
    assert_interrupted(child);
    assert_eq!(status_of(&env, "wo-02")["status"], "needs_rework");
    round(&env, &["--build", WRITE_OWN]).success();
}

#[test]
fn two_repos_share_the_machine_wide_cap() {
    let env = TestEnv::new();
    let log = env.root.join("concurrency.log");
    let build = format!(
        "echo \"start $(date +%s%N)\" >> {log}; {meet}; echo \"end $(date +%s%N)\" >> {log}; echo x > $ARBITER_WO.txt",
        log = log.display(),
        meet = meet_second_start(&log),
    );
    let second = env.root.join("repo2");
    env.git_in(&env.root, &["init", "-q", "-b", "main", "repo2"]);
    for dir in [&env.repo, &second] {
        std::fs::create_dir_all(dir.join("work-orders")).expect("mkdir");
        std::fs::write(dir.join("README"), "x\n").expect("write");
        for i in 0..4 {
            std::fs::write(
                dir.join(format!("work-orders/w{i}.md")),
                format!("# W{i}\n## Files to touch\n- w{i}.txt\n"),
            )
            .expect("write");
        }
        env.git_in(dir, &["add", "-A"]);
        env.git_in(dir, &["commit", "-q", "-m", "init"]);
        env.git_in(dir, &["config", "arbiter.maxTotal", "3"]);
    }
    let a = spawn_round(&env, &env.repo, &build);
    let b = spawn_round(&env, &second, &build);
    for child in [a, b] {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut events: Vec<(u128, i32)> = std::fs::read_to_string(&log)
        .expect("log")
        .lines()
        .map(|l| {
            let (kind, t) = l.split_once(' ').expect("kind time");
            (t.parse().expect("ns"), if kind == "start" { 1 } else { -1 })
        })
        .collect();
    events.sort_by_key(|&(t, d)| (t, d));
    let (mut now, mut peak) = (0, 0);
    for (_, d) in &events {
        now += d;
        peak = peak.max(now);
    }
    assert_eq!(events.len(), 16);
    assert!(peak <= 3, "{peak} builds ran at once with a cap of 3");
    assert!(peak >= 2, "builds never overlapped (peak {peak})");
}

#[test]
fn demo_shows_every_case_and_exits_0() {
    let env = TestEnv::new();
    let run = env.run_in(&env.root, &["demo"]).success();
    for want in [
        "wo-05  undeclared_file_drift [Makefile]",
        "Merge wo-04: Parser",
        "Merge wo-03: Greeting docs",
        "5 done, 1 halted",
        "$ git log --graph --oneline main",
    ] {
        assert!(
            run.stdout.contains(want),
            "missing {want:?} in:\n{}",
            run.stdout
        );
    }
    assert!(
        run.stderr.contains("arbiter rework wo=wo-04"),
        "the retry is shown:\n{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("deferred=1"),
        "the overlap is shown:\n{}",
        run.stderr
    );
}

#[test]
fn log_prints_the_disposition_history() {
    let env = repo();
    round(
        &env,
        &[
            "--build",
            WRITE_OWN,
            "--gate",
            "test \"$ARBITER_ATTEMPT\" != 1",
        ],
    )
    .success();
    let json = env.run(&["log", "--json", "wo-01"]).success().json();
    let events = event_names(&json);
    assert_eq!(json["version"], 2);
    // A round's merge writes no transition before the branch moves: the
    // dispatch already bounds recovery's search (see `merge`).
    assert_eq!(
        events,
        ["dispatch", "needs_rework", "dispatch", "built", "merged"],
        "{events:?}"
    );
    let human = env.run(&["log"]).success();
    assert!(
        human
            .stdout
            .lines()
            .any(|l| l.contains("wo-02") && l.contains("dispatch")),
        "{}",
        human.stdout
    );
}

#[test]
fn final_gate_runs_once_on_the_integration_tip() {
    let env = repo();
    let seen = env.root.join("final.txt");
    let gate = format!("cat src/one.txt src/two.txt >> {}", seen.display());
    let summary = round(&env, &["--build", WRITE_OWN, "--final-gate", &gate])
        .success()
        .json();
    assert_eq!(summary["final_gate"]["passed"], true);
    assert_eq!(
        std::fs::read_to_string(&seen).expect("ran"),
        "wo-01 attempt 1\nwo-02 attempt 1\n"
    );
    clean_afterwards(&env);

    let env = repo();
    let summary = round(&env, &["--build", WRITE_OWN, "--final-gate", "exit 3"])
        .code(1)
        .json();
    assert_eq!(summary["final_gate"]["passed"], false);
    assert_eq!(summary["final_gate"]["exit_code"], 3);
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    clean_afterwards(&env);
}

#[test]
fn budget_command_refusal_stops_with_an_escalation() {
    let env = repo();
    let summary = round(&env, &["--build", WRITE_OWN, "--budget-cmd", "exit 1"])
        .code(1)
        .json();
    assert_eq!(summary["rounds"], 0);
    assert!(
        summary["stopped"]
            .as_str()
            .expect("stopped")
            .contains("--budget-cmd"),
        "{summary}"
    );
    assert!(!env.repo.join("src/one.txt").exists());
}

#[test]
fn missing_build_command_is_an_input_error() {
    let env = repo();
    let run = env.run(&["round"]).code(2);
    assert!(
        run.stderr.starts_with("error: no build command\nhint: "),
        "{}",
        run.stderr
    );
    let run = env
        .run(&["round", "--build", "true", "--timeout", "soon"])
        .code(2);
    assert!(run.stderr.contains("--timeout"), "{}", run.stderr);
    let run = env
        .run(&["round", "--build", "true", "--into", "nope"])
        .code(2);
    assert!(
        run.stderr.contains("branch 'nope' does not exist"),
        "{}",
        run.stderr
    );
}

/// A conductor killed after its merge-back moved the branch but before the
/// merge was recorded: the next round counts the order done with that merge,
/// found by its trailers, and never builds or merges it again.
#[test]
fn a_merge_whose_record_was_lost_is_recovered_not_redone() {
    let env = repo();
    let base = env.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let landed = env.landed_merge("wo-01", 1, "src/one.txt");
    env.write_record(
        "wo-01",
        &format!(
            r#"{{"version":1,"wo":"wo-01","status":"in_progress","halted":false,"halt_reason":null,"attempts":1,"cap":3,"checkpoint_before":"{base}","checkpoint_after":null,"owner":"1-1","verdicts":[],"history":[]}}"#
        ),
    );
    round(&env, &["--build", WRITE_OWN]).success();
    let row = status_of(&env, "wo-01");
    assert_eq!(row["status"], "done");
    assert_eq!(row["attempts"], 1, "never built again");
    assert_eq!(row["checkpoint_after"], landed.as_str());
    let log = env.run(&["log", "--json", "wo-01"]).success().json();
    assert_eq!(event_names(&log), ["recovered_done"]);
    assert_eq!(status_of(&env, "wo-02")["status"], "done");
    let merges = env.git(&["rev-list", "--merges", "--count", &format!("{base}..main")]);
    assert_eq!(merges.trim(), "2", "wo-01 merged once, wo-02 once");
    env.fsck();
}

#[test]
fn a_killed_conductor_is_recovered_by_the_next_round() {
    let env = repo();
    let started = env.root.join("started");
    let killed = env.root.join("killed");
    // The first attempt runs until the conductor is dead, whatever the load.
    let build = format!(
        "if [ $ARBITER_ATTEMPT = 1 ]; then touch {}; while [ ! -e {} ]; do sleep 0.05; done; exit 0; fi; {WRITE_OWN}",
        started.display(),
        killed.display()
    );
    let mut child = spawn_round(&env, &env.repo, &build);
    wait_for(&started);
    child.kill().expect("SIGKILL the conductor");
    child.wait().expect("reap");
    std::fs::write(&killed, "").expect("killed");
    assert_eq!(
        status_of(&env, "wo-01")["status"],
        "needs_rework",
        "a dead owner's work is requeued"
    );
    let summary = round(&env, &["--build", &build]).success().json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    let row = status_of(&env, "wo-01");
    assert_eq!(
        row["attempts"], 2,
        "the killed attempt was counted before it started"
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/one.txt")).expect("merged"),
        "wo-01 attempt 2\n"
    );
    clean_afterwards(&env);
}

#[test]
fn clear_drops_the_kept_attempt_and_records_its_commit() {
    let env = repo();
    let build = format!("{WRITE_OWN}; if [ $ARBITER_WO = wo-02 ]; then echo sneaky >> README; fi");
    round(&env, &["--build", &build]).code(1);
    let kept = env.git(&["rev-parse", "arbiter/wo-02"]).trim().to_owned();
    let run = env.run(&["clear", "wo-02"]).success();
    assert_eq!(
        run.stderr,
        format!("arbiter clear wo=wo-02 dropped=arbiter/wo-02@{kept}\n")
    );
    assert!(env.git(&["branch", "--list", "arbiter/*"]).is_empty());
    let log = env.run(&["log", "--json", "wo-02"]).success().json();
    let last = log["events"]
        .as_array()
        .expect("events")
        .last()
        .cloned()
        .expect("an event");
    assert_eq!(last["event"], "clear");
    assert_eq!(last["detail"], format!("dropped arbiter/wo-02 at {kept}"));
    clean_afterwards(&env);
}

#[test]
fn status_during_a_round_shows_live_work_as_in_progress() {
    let env = repo();
    let child = spawn_busy_round(&env);
    assert_eq!(
        status_of(&env, "wo-01")["status"],
        "in_progress",
        "never 'recovered' while its conductor lives"
    );
    let batch = env.run(&["batch", "--json"]).success().json();
    assert_eq!(
        batch["batch"],
        serde_json::json!([]),
        "live work is not eligible twice"
    );
    env.run(&["stop"]).success();
    assert_interrupted(child);
}

/// Two conductors on one repository at once: each work order is built and
/// merged exactly once, and neither loses the other's state.
#[test]
fn two_conductors_never_merge_one_work_order_twice() {
    let env = TestEnv::new();
    env.disjoint_orders(6);
    let build = "sleep 0.3; echo $ARBITER_WO > f$(echo $ARBITER_WO | tr -d 'wo-').txt";
    let a = env
        .command_in(
            &env.repo,
            &["round", "--json", "--max", "2", "--build", build],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let b = env
        .command_in(
            &env.repo,
            &["round", "--json", "--max", "2", "--build", build],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    for child in [a, b] {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let trailers = env.git(&[
        "log",
        "--format=%(trailers:key=Arbiter-WO,valueonly)",
        "--merges",
        "main",
    ]);
    let mut merged: Vec<&str> = trailers.lines().filter(|l| !l.is_empty()).collect();
    merged.sort();
    assert_eq!(merged, ["wo-0", "wo-1", "wo-2", "wo-3", "wo-4", "wo-5"]);
    let status = env.run(&["status", "--json"]).success().json();
    assert!(
        status["orders"]
            .as_array()
            .expect("orders")
            .iter()
            .all(|r| r["status"] == "done" && r["attempts"] == 1),
        "{status}"
    );
    clean_afterwards(&env);
}

/// A local change in the checked-out integration branch is the user's
/// work in progress, not an error: the round starts and lands around it.
#[test]
fn a_dirty_integration_checkout_does_not_stop_a_round() {
    let env = repo();
    std::fs::write(env.repo.join("README"), "my edit\n").expect("edit");
    let summary = round(&env, &["--build", WRITE_OWN]).success().json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    assert_eq!(
        std::fs::read_to_string(env.repo.join("README")).expect("README"),
        "my edit\n"
    );
    assert_eq!(env.git(&["status", "--porcelain"]), " M README\n");
}

/// The user edits, mid-round, a file an order's landing changes: the
/// order's passed work waits to land (`verified`), its attempt not spent a
/// second time, the edit untouched; once the edit is stashed the same work
/// lands without a rebuild.
#[test]
fn an_edit_in_the_way_keeps_the_order_waiting_and_gives_nothing_up() {
    let env = repo();
    let edit = format!(
        "{WRITE_OWN}; mkdir -p {repo}/src; echo 'my edit' > {repo}/src/one.txt",
        repo = env.repo.display()
    );
    let summary = round(&env, &["--build", &edit]).success().json();
    assert_eq!(summary["waiting"][0]["id"], "wo-01", "{summary}");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/one.txt")).expect("one"),
        "my edit\n"
    );
    let row = status_of(&env, "wo-01");
    assert_eq!(row["status"], "verified", "{row}");
    assert_eq!(row["attempts"], 1, "{row}");
    env.git(&["stash", "-q", "--include-untracked"]);
    let summary = round(&env, &["--build", "false"]).success().json();
    assert_eq!(
        summary["done"],
        serde_json::json!(["wo-01", "wo-02"]),
        "{summary}"
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/one.txt")).expect("one"),
        "wo-01 attempt 1\n"
    );
}

/// A conductor killed after starting a builder's shell but before recording
/// its process group: the builder must not run at all (nothing could end
/// it), and the next round builds the order.
#[test]
fn a_builder_whose_group_was_not_recorded_never_runs() {
    let mut env = repo();
    let started = env.root.join("started");
    let build = format!("touch {}-$ARBITER_WO; {WRITE_OWN}", started.display());
    env.set_env("ARBITER_CRASH_AT", "command.spawned");
    // Returned once the builder's shell has ended too: a builder that ran
    // has touched its file by then.
    let killed = round_and_all_it_started(&env, &["--build", &build, "--max", "1"]);
    assert!(
        killed
            .stderr
            .contains("arbiter crash point=command.spawned"),
        "{}",
        killed.stderr
    );
    env.unset_env("ARBITER_CRASH_AT");
    let ran: Vec<_> = std::fs::read_dir(&env.root)
        .expect("root")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("started-"))
        .map(|e| e.file_name())
        .collect();
    assert!(ran.is_empty(), "unrecorded builders ran: {ran:?}");
    let run = round(&env, &["--build", &build]).success();
    assert_eq!(run.json()["done"], serde_json::json!(["wo-01", "wo-02"]));
    clean_afterwards(&env);
}

/// Builders run in their own process groups, so a conductor killed with
/// SIGKILL leaves them running: outside the slot cap, and writing into
/// worktrees that recovery hands to a new attempt. The next round ends them
/// before it recovers their work orders.
#[test]
fn the_next_round_ends_builders_a_killed_conductor_left_running() {
    let env = repo();
    let pids = env.root.join("pids");
    let build = format!(
        "if [ $ARBITER_ATTEMPT = 1 ]; then sleep 300 & echo $! >> {p}; touch {r}/started-$ARBITER_WO; wait; fi; {WRITE_OWN}",
        p = pids.display(),
        r = env.root.display()
    );
    let mut child = spawn_round(&env, &env.repo, &build);
    wait_for(&env.root.join("started-wo-01"));
    wait_for(&env.root.join("started-wo-02"));
    // A builder runs only once its group is recorded.
    child.kill().expect("SIGKILL the conductor");
    child.wait().expect("reap");
    let orphans: Vec<String> = std::fs::read_to_string(&pids)
        .expect("pids")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(orphans.len(), 2);
    assert!(
        orphans.iter().all(|pid| !is_gone(pid)),
        "the builders outlive a killed conductor"
    );

    let run = round(&env, &["--build", &build]).success();
    for pid in &orphans {
        assert!(is_gone(pid), "orphaned builder {pid} still runs");
    }
    assert_eq!(
        run.stderr.matches("ended process group").count(),
        2,
        "{}",
        run.stderr
    );
    assert_eq!(run.json()["done"], serde_json::json!(["wo-01", "wo-02"]));
    clean_afterwards(&env);
}

/// Issue 11, claims: two conductors on one repository picked batches
/// independently, so `faq-1` and `faq-2` (both declaring `FAQ.md`) were
/// built at once and one halted `merge_conflict`. An order in progress
/// claims its declared files: the second conductor defers `faq-2` as
/// `claimed` (naming `faq-1`) and builds what is free; `faq-2` runs later.
#[test]
fn a_second_conductor_defers_orders_claimed_by_the_first() {
    let env = TestEnv::new();
    env.write("FAQ.md", "faq\n");
    env.work_order("faq-1", "FAQ one", &[], &["FAQ.md"]);
    env.work_order("faq-2", "FAQ two", &[], &["FAQ.md"]);
    env.work_order("other", "Other", &[], &["other.md"]);
    env.commit_all("init");
    let started = env.root.join("started");
    let go = env.root.join("go");
    let build = format!(
        "case $ARBITER_WO in \
           faq-1) touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; echo one >> FAQ.md;; \
           faq-2) echo two >> FAQ.md;; \
           *) echo o > other.md;; esac",
        started = started.display(),
        go = go.display()
    );
    // The first conductor builds only faq-1 (and waits in its build).
    let first = env
        .command_in(
            &env.repo,
            &["round", "--max", "1", "--once", "--build", &build],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("first conductor");
    wait_for(&started);

    let batch = env.run(&["batch", "--json"]).success().json();
    assert_eq!(batch["deferred"][0]["id"], "faq-2", "{batch}");
    assert_eq!(batch["deferred"][0]["reason"], "claimed", "{batch}");
    assert_eq!(
        batch["deferred"][0]["conflicts_with"][0], "faq-1",
        "{batch}"
    );
    let status = env.run(&["status", "--json"]).success().json();
    assert!(
        status["orders"][0]["claimed_by"].is_string(),
        "faq-1 shows its conductor: {status}"
    );
    let conductor = status["orders"][0]["claimed_by"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let human = env.run(&["status"]).success().stdout;
    assert!(
        human.contains(&format!("in_progress ({conductor})")),
        "{human}"
    );

    let second = env.run(&["round", "--json", "--build", &build]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(!second.stderr.contains("wo=faq-2"), "{}", second.stderr);
    assert_eq!(env.git(&["show", "main:other.md"]), "o\n");

    std::fs::write(&go, "").expect("go");
    let out = first.wait_with_output().expect("first conductor");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.run(&["round", "--build", &build]).success();
    assert_eq!(env.git(&["show", "main:FAQ.md"]), "faq\none\ntwo\n");
    let log = env.git(&["log", "--first-parent", "--format=%B", "main"]);
    assert_eq!(log.matches("Arbiter-WO: faq-1").count(), 1);
    assert_eq!(log.matches("Arbiter-WO: faq-2").count(), 1);
    env.fsck();
}

/// On a terminal the live view shows each order's phase, and an order whose
/// checks passed while the rest of its batch still builds says it is
/// `waiting to merge`; the event lines still scroll above it. (`script`
/// gives the round a pseudo-terminal.)
#[test]
fn the_live_view_says_when_an_order_waits_to_merge() {
    let env = TestEnv::new();
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.work_order("wo-b", "B", &[], &["b.txt"]);
    env.commit_all("init");
    let bin = crate::common::bin();
    // wo-b is built until the view has shown wo-a waiting (script flushes
    // what the terminal got to `typescript` as it goes), not for a while.
    let typescript = env.root.join("typescript");
    let command = format!(
        "{} round --build 'case $ARBITER_WO in wo-a) echo a > a.txt;; \
         *) i=0; while ! grep -q \"wo-a  waiting to merge\" {} && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; echo b > b.txt;; esac'",
        bin.display(),
        typescript.display()
    );
    // The hermetic environment the binary gets in every test.
    let hermetic = env.command_in(&env.repo, &[]);
    let out = std::process::Command::new("script")
        .args(["-qfec", &command])
        .arg(&typescript)
        .current_dir(&env.repo)
        .env_clear()
        .envs(hermetic.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (util-linux) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("wo-a  waiting to merge"), "{text}");
    assert!(text.contains("arbiter merge wo=wo-b"), "{text}");
    assert_eq!(env.git(&["show", "main:b.txt"]), "b\n");
}

/// Orders whose builds end together land together: an order that passed
/// waits for the others still committing what their builders left (here
/// wo-02's 5,000 files) rather than land alone before them.
#[test]
fn orders_whose_builds_end_together_land_in_one_landing() {
    builds_ending_together_land_once(&mut TestEnv::new());
}

/// The same with each passed attempt half a second from its build's
/// thread to the loop that lands: it counts as committing until that loop
/// has it, and the other order, passed already, waits for it. (A landing
/// had taken the first alone when it looked in between.)
#[test]
fn an_attempt_passed_but_not_yet_taken_in_joins_the_landing() {
    let mut env = TestEnv::new();
    env.set_env("ARBITER_SLOW_AT", "attempt.ended");
    builds_ending_together_land_once(&mut env);
}

fn builds_ending_together_land_once(env: &mut TestEnv) {
    env.write("README", "base\n");
    env.work_order("wo-01", "Quick", &[], &["quick.txt"]);
    env.work_order("wo-02", "Bulky", &[], &["bulk/**"]);
    env.commit_all("init");
    // wo-01's build ends once the conductor has seen wo-02's end (its log
    // says so, right before it commits what wo-02's builder left: 5,000
    // files), so wo-01 passes while wo-02 is still being committed. Waiting
    // on the builder's own last command instead left the conductor's notice
    // of wo-02's end to the machine's load, and wo-01 at times landed alone.
    // (Anchored: the log also holds the build command, this text included.)
    let log = env.repo.join(".git/arbiter/logs/wo-02/attempt-1.log");
    // And wo-02's commit ends only once wo-01's build has: a post-commit
    // hook (it makes the leftovers go through `git commit`, whose end is
    // inside the commit of wo-02) waits for wo-01's log to say so. Without
    // it a quick commit of wo-02 beat wo-01's poll on a loaded machine, and
    // wo-02 landed alone. Sixty seconds, then it fails rather than hangs.
    let quick_log = env.repo.join(".git/arbiter/logs/wo-01/attempt-1.log");
    env.hook(
        "post-commit",
        &format!(
            "#!/bin/sh\n\
             [ \"$(git rev-parse --abbrev-ref HEAD)\" = arbiter/wo-02 ] || exit 0\n\
             for _ in $(seq 6000); do \
               grep -q '^.git-arbiter. build ended' {quick} 2>/dev/null && exit 0; sleep 0.01; \
             done\n\
             exit 1\n",
            quick = quick_log.display()
        ),
    );
    let build = format!(
        "if [ \"$ARBITER_WO\" = wo-01 ]; then \
           until grep -q '^.git-arbiter. build ended' {log} 2>/dev/null; do sleep 0.01; done; \
           echo quick > quick.txt; \
         else mkdir bulk && for i in $(seq 5000); do echo $i > bulk/$i; done; fi",
        log = log.display()
    );
    let run = round(env, &["--once", "--build", &build]).success();
    let landings: Vec<String> = env
        .git(&["reflog", "show", "main", "--format=%gs"])
        .lines()
        .filter(|l| l.contains("merge-back"))
        .map(str::to_owned)
        .collect();
    assert_eq!(landings.len(), 1, "{landings:?}\n{}", run.stdout);
    assert!(
        landings[0].contains("wo-01") && landings[0].contains("wo-02"),
        "{landings:?}"
    );
}

/// A builder that exits 0 and changes nothing (an agent that gave up
/// politely) has not done the order: `no_change`, a retryable failure with
/// its reason; `arbiter.allowEmpty=true` or the order's `## Allow empty`
/// make it done, as before.
#[test]
fn a_build_that_changes_nothing_is_no_change_unless_allowed() {
    let env = TestEnv::new();
    env.work_order("wo-a", "Nothing", &[], &["a.txt"]);
    env.commit_all("init");
    let run = env.run(&["round", "--build", "true"]).code(1);
    assert!(
        run.stderr
            .contains("reason=\"no_change: the build exited 0 and changed nothing"),
        "{}",
        run.stderr
    );
    let status = env.run(&["status", "--json"]).success().json();
    let row = &status["orders"][0];
    assert_eq!(row["halt_reason"], "retry_cap_exhausted", "{row}");
    assert!(
        row["last_failure"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("no_change")),
        "{row}"
    );

    env.run(&["retry", "--rebuild", "wo-a"]).success();
    env.git(&["config", "arbiter.allowEmpty", "maybe"]);
    let bad = env.run(&["round", "--build", "true"]).code(2);
    assert!(
        bad.stderr
            .contains("config arbiter.allowEmpty = 'maybe' is not a boolean"),
        "{}",
        bad.stderr
    );
    env.git(&["config", "arbiter.allowEmpty", "true"]);
    env.run(&["round", "--build", "true"]).success();
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "done");

    let env = TestEnv::new();
    env.write(
        "work-orders/wo-b.md",
        "# Check only\n\n## Files to touch\n- b.txt\n\n## Allow empty\nA check that may find nothing to fix.\n\n## Task\nLook.\n",
    );
    env.commit_all("init");
    env.run(&["round", "--build", "true"]).success();
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "done");
}

/// A second `round` while another conductor builds every pending order
/// says who holds them (conductor and pid) and exits 5, "nothing free",
/// instead of exit 0 with a bare `pending:` line.
#[test]
fn a_round_beside_one_holding_every_order_names_it_and_exits_5() {
    let env = TestEnv::new();
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.commit_all("init");
    let started = env.root.join("started");
    let release = env.root.join("release");
    let build = format!(
        "touch '{s}'; while [ ! -e '{r}' ]; do sleep 0.05; done; echo a > a.txt",
        s = started.display(),
        r = release.display()
    );
    let mut first = env
        .command_in(&env.repo, &["round", "--build", &build])
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first build started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = env.run(&["round", "--build", "echo b > a.txt"]).code(5);
    let pid = first.id();
    assert!(
        second
            .stdout
            .contains(&format!("wo-a held by another conductor ({pid}-"))
            && second.stdout.contains(&format!(", pid {pid})")),
        "{}",
        second.stdout
    );
    let json = env
        .run(&["round", "--json", "--build", "echo b > a.txt"])
        .code(5)
        .json();
    assert_eq!(json["held_elsewhere"][0]["id"], "wo-a");
    assert_eq!(json["held_elsewhere"][0]["pid"], pid);
    std::fs::write(&release, "").expect("release");
    assert!(first.wait().expect("wait").success());
    assert_eq!(env.git(&["show", "main:a.txt"]), "a\n");
}

//! `git arbiter retry`: re-checking kept work after fixing its order, `--rebuild`;
//! `clear` of several orders and `--all`.

use crate::common::TestEnv;

/// A repo with `src/a.rs` and `CHANGELOG.md`, and order `wo-01` declaring `src/**`.
fn setup() -> TestEnv {
    let env = TestEnv::new();
    env.write("src/a.rs", "a\n");
    env.write("CHANGELOG.md", "log\n");
    env.work_order("wo-01", "Login form", &[], &["src/**"]);
    env.commit_all("init");
    env
}

/// `wo-01`'s kept branch also touches `CHANGELOG.md`: its merge-back halts for drift.
fn drift_halted() -> TestEnv {
    let env = setup();
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("src/a.rs"), "a2\n").unwrap();
    std::fs::write(w.join("CHANGELOG.md"), "log\nlogin\n").unwrap();
    env.commit_in(&w, "work");
    env.run(&["merge-back", "wo-01"]).code(4);
    env
}

fn order(env: &TestEnv) -> serde_json::Value {
    env.run(&["status", "--json"]).success().json()["orders"][0].clone()
}

#[test]
fn retry_merges_kept_work_once_the_file_is_declared() {
    let env = drift_halted();
    let kept = env.rev("arbiter/wo-01");
    let tip = env.rev("main");
    // Still undeclared: halted again, exit 4, nothing moves.
    let run = env.run(&["retry", "wo-01"]).code(4);
    assert!(run.stdout.contains("CHANGELOG.md"), "{}", run.stdout);
    assert_eq!(env.rev("main"), tip);
    assert_eq!(order(&env)["halt_reason"], "undeclared_file_drift");
    // Declared now: merged without a rebuild, halt lifted, done.
    env.work_order("wo-01", "Login form", &[], &["src/**", "CHANGELOG.md"]);
    env.commit_all("declare the changelog");
    let run = env.run(&["retry", "wo-01"]).success();
    assert!(run.stdout.contains("wo-01 is done"), "{}", run.stdout);
    assert_eq!(env.rev("main^2"), kept);
    let o = order(&env);
    assert_eq!(o["status"], "done");
    assert_eq!(o["halted"], false);
    assert!(o["halt_reason"].is_null(), "{o}");
    // The kept worktree and branch are gone: the work is in the merge.
    assert!(env.git(&["branch", "--list", "arbiter/*"]).is_empty());
    assert!(!env.root.join("repo.arbiter/wo-01").exists());
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    env.fsck();
}

#[test]
fn retry_of_a_conflict_stays_halted_until_it_merges() {
    let env = setup();
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("src/a.rs"), "theirs\n").unwrap();
    env.commit_in(&w, "work");
    env.write("src/a.rs", "ours\n");
    env.commit_all("main moves");
    env.run(&["merge-back", "wo-01"]).code(3);
    env.run(&["retry", "wo-01"]).code(3);
    assert_eq!(order(&env)["halt_reason"], "merge_conflict");
    // The user resolves it on the kept branch.
    env.git_in(&w, &["merge", "-q", "-X", "ours", "main"]);
    env.run(&["retry", "wo-01"]).success();
    assert_eq!(order(&env)["status"], "done");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/a.rs")).unwrap(),
        "theirs\n"
    );
    env.fsck();
}

#[test]
fn retry_refuses_what_it_cannot_recheck() {
    let env = setup();
    env.work_order("wo-02", "Other", &[], &["other/**"]);
    env.commit_all("wo-02");
    // Not halted, unknown.
    let run = env.run(&["retry", "wo-01"]).code(2);
    assert!(run.stderr.contains("is not halted"), "{}", run.stderr);
    env.run(&["retry", "nope"]).code(2);
    // Halted for another reason: only --rebuild.
    env.run(&["halt", "wo-01", "--reason", "waiting"]).success();
    let run = env.run(&["retry", "wo-01"]).code(2);
    assert!(run.stderr.contains("--rebuild wo-01"), "{}", run.stderr);
    // A merge halt without a kept branch.
    let drift = drift_halted();
    drift.git(&["worktree", "remove", "--force", "../repo.arbiter/wo-01"]);
    drift.git(&["branch", "-D", "arbiter/wo-01"]);
    let run = drift.run(&["retry", "wo-01"]).code(2);
    assert!(run.stderr.contains("no kept branch"), "{}", run.stderr);
    assert!(run.stderr.contains("--rebuild"), "{}", run.stderr);
}

#[test]
fn retry_rebuild_lifts_any_halt_like_clear() {
    let env = drift_halted();
    let kept = env.rev("arbiter/wo-01");
    let run = env.run(&["retry", "--rebuild", "wo-01"]).success();
    assert!(
        run.stdout
            .contains(&format!("git branch arbiter/wo-01 {kept}")),
        "{}",
        run.stdout
    );
    let o = order(&env);
    assert_eq!(o["status"], "ready");
    assert_eq!(o["attempts"], 0);
    assert_eq!(o["halted"], false);
    assert!(env.git(&["branch", "--list", "arbiter/*"]).is_empty());
    // Any halt reason.
    env.run(&["halt", "wo-01", "--reason", "waiting"]).success();
    env.run(&["retry", "--rebuild", "wo-01"]).success();
    env.run(&["retry", "--rebuild", "wo-01"]).code(2);
}

#[test]
fn clear_takes_several_ids_and_all() {
    let env = setup();
    for id in ["wo-02", "wo-03", "wo-04"] {
        env.work_order(id, id, &[], &[&format!("{id}/**")]);
    }
    env.commit_all("more orders");
    for id in ["wo-01", "wo-02", "wo-03"] {
        env.run(&["halt", id, "--reason", "waiting"]).success();
    }
    // One of them not halted: nothing is cleared.
    env.run(&["clear", "wo-01", "wo-04"]).code(2);
    let halted = |env: &TestEnv| -> Vec<String> {
        let status = env.run(&["status", "--json"]).success().json();
        status["orders"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["halted"] == true)
            .map(|o| o["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(halted(&env), ["wo-01", "wo-02", "wo-03"]);
    let run = env.run(&["clear", "wo-01", "wo-02"]).success();
    assert_eq!(run.stdout, "Cleared wo-01\nCleared wo-02\n");
    assert_eq!(halted(&env), ["wo-03"]);
    env.run(&["clear", "--all"]).success();
    assert!(halted(&env).is_empty());
    let run = env.run(&["clear", "--all"]).success();
    assert_eq!(run.stdout, "No work order is halted\n");
    env.run(&["clear"]).code(2);
}

#[test]
fn clear_prints_how_to_restore_the_dropped_branch() {
    let env = drift_halted();
    let kept = env.rev("arbiter/wo-01");
    let run = env.run(&["clear", "--all"]).success();
    assert!(
        run.stdout
            .contains(&format!("git branch arbiter/wo-01 {kept}")),
        "{}",
        run.stdout
    );
    env.git(&["branch", "arbiter/wo-01", &kept]);
    assert_eq!(env.rev("arbiter/wo-01"), kept);
}

/// Fails its first attempt, passes the next.
const FLAKY: &str = "test \"$ARBITER_ATTEMPT\" -ge 2 && mkdir -p src && echo fixed > src/a.rs";

fn event_at(log: &serde_json::Value, name: &str, attempt: u32) -> i64 {
    log["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["event"] == name && e["attempt"] == attempt)
        .and_then(|e| e["at"].as_i64())
        .unwrap_or_else(|| panic!("no {name} event of attempt {attempt}: {log}"))
}

#[test]
fn retry_delay_waits_before_rebuilding_a_failed_order() {
    let env = setup();
    env.git(&["config", "arbiter.retryDelay", "2s"]);
    let run = env.run(&["round", "--build", FLAKY]).success();
    assert!(
        run.stderr.contains("arbiter wait wo=wo-01"),
        "{}",
        run.stderr
    );
    let log = env.run(&["log", "--json", "wo-01"]).success().json();
    let failed = event_at(&log, "needs_rework", 1);
    let again = event_at(&log, "dispatch", 2);
    assert!(again - failed >= 2, "rebuilt after {}s", again - failed);
    env.run(&["status", "--json"]).success();
    assert_eq!(order(&env)["status"], "done");
}

#[test]
fn retry_delay_default_rebuilds_at_once_and_bad_values_are_refused() {
    let env = setup();
    let run = env.run(&["round", "--build", FLAKY]).success();
    assert!(!run.stderr.contains("arbiter wait"), "{}", run.stderr);
    env.git(&["config", "arbiter.retryDelay", "soon"]);
    let run = env.run(&["round", "--build", FLAKY]).code(2);
    assert!(run.stderr.contains("arbiter.retryDelay"), "{}", run.stderr);
}

#[test]
fn stop_ends_a_round_waiting_out_the_retry_delay() {
    let env = setup();
    env.git(&["config", "arbiter.retryDelay", "1h"]);
    let child = env
        .command_in(&env.repo, &["round", "--build", FLAKY])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !env.run(&["log", "wo-01"]).stdout.contains("needs_rework") {
        assert!(std::time::Instant::now() < deadline, "no failed attempt");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    env.run(&["stop"]).success();
    crate::common::assert_interrupted(child);
    assert_eq!(order(&env)["status"], "needs_rework");
    assert_eq!(order(&env)["attempts"], 1);
}

/// An order whose record outlived its file is refused by `retry` and by
/// `merge-back` alike, each saying what restoring the file allows, and
/// nothing moves.
#[test]
fn retry_and_merge_back_refuse_an_order_without_its_file() {
    let env = drift_halted();
    std::fs::remove_file(env.repo.join("work-orders/wo-01.md")).expect("rm");
    env.commit_all("drop the order's file");
    let tip = env.rev("main");
    for (command, restore) in [
        ("retry", "restore its file to retry it"),
        ("merge-back", "restore its file to merge its branch back"),
    ] {
        let run = env.run(&[command, "wo-01"]).code(2);
        assert!(
            run.stderr
                .contains("work order 'wo-01' has a record but no file in the orders directory"),
            "{command}: {}",
            run.stderr
        );
        assert!(run.stderr.contains(restore), "{command}: {}", run.stderr);
        assert_eq!(env.rev("main"), tip, "{command}");
    }
    let shown = env.run(&["show", "--json", "wo-01"]).success().json();
    assert_eq!(shown["halt_reason"], "undeclared_file_drift", "{shown}");
}

//! Continuous dispatch, claims across conductors, and the verified merge
//! queue (issue 11): real processes on real repositories.

use crate::common::{Run, TestEnv};

/// The first-parent commits of `main` from the newest, as shas.
fn first_parents(env: &TestEnv) -> Vec<String> {
    env.git(&["rev-list", "--first-parent", "main"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// How many merges of `id` the first-parent chain of `main` holds.
fn landed(env: &TestEnv, id: &str) -> usize {
    env.git(&[
        "log",
        "--first-parent",
        "--format=%(trailers:key=Arbiter-WO,valueonly)",
        "main",
    ])
    .lines()
    .filter(|l| l.trim() == id)
    .count()
}

/// Does the gate `script` (run by `sh` in a checkout of `sha`) pass?
fn gate_passes_at(env: &TestEnv, sha: &str, script: &str) -> bool {
    let dir = env.root.join(format!("check-{sha}"));
    env.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        dir.to_str().unwrap(),
        sha,
    ]);
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&dir)
        .status()
        .expect("sh")
        .success();
    env.git(&["worktree", "remove", "--force", dir.to_str().unwrap()]);
    ok
}

fn history_events(env: &TestEnv, id: &str) -> Vec<String> {
    let log = env.run(&["log", "--json", id]).success().json();
    log["events"]
        .as_array()
        .map(|h| {
            h.iter()
                .filter_map(|e| e["event"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn two_conductors_never_build_overlapping_orders_at_once() {
    let env = TestEnv::new();
    env.write("FAQ.md", "# FAQ\n");
    env.work_order("faq-1", "First answer", &[], &["FAQ.md"]);
    env.work_order("faq-2", "Second answer", &[], &["FAQ.md"]);
    env.commit_all("init");
    let times = env.root.join("times.log");
    // Each builder records when it starts and ends, and edits the shared file.
    let build = format!(
        "echo \"$ARBITER_WO start $(date +%s%N)\" >> '{t}'; sleep 1; echo \"$ARBITER_WO\" >> FAQ.md; echo \"$ARBITER_WO end $(date +%s%N)\" >> '{t}'",
        t = times.display()
    );
    let go = env.root.join("go");
    let args = ["round", "--max-total", "4", "--build", build.as_str()];
    let children = vec![
        env.spawn_at_start_line(&env.repo, &args, &go),
        env.spawn_at_start_line(&env.repo, &args, &go),
    ];
    env.release_all(&go, children);
    // Both conductors may have finished with the other's order pending;
    // a last run picks up whatever is left.
    env.run(&["round", "--max-total", "4", "--build", build.as_str()])
        .success();
    let log = std::fs::read_to_string(&times).expect("times");
    let mut spans: Vec<(u128, u128)> = Vec::new();
    for id in ["faq-1", "faq-2"] {
        let at = |what: &str| -> Vec<u128> {
            log.lines()
                .filter(|l| l.starts_with(&format!("{id} {what} ")))
                .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
                .collect()
        };
        let (starts, ends) = (at("start"), at("end"));
        assert_eq!(starts.len(), 1, "{id} built once:\n{log}");
        assert_eq!(ends.len(), 1, "{id} built once:\n{log}");
        spans.push((starts[0], ends[0]));
    }
    let (a, b) = (spans[0], spans[1]);
    assert!(
        a.1 <= b.0 || b.1 <= a.0,
        "overlapping orders were built at the same time:\n{log}"
    );
    for id in ["faq-1", "faq-2"] {
        assert_eq!(landed(&env, id), 1, "{id} lands exactly once");
    }
    let status = env.run(&["status", "--json"]).success().stdout;
    assert!(!status.contains("merge_conflict"), "{status}");
    env.fsck();
}

#[test]
fn quick_orders_land_while_a_slow_build_runs() {
    let env = TestEnv::new();
    env.write("README", "x\n");
    env.work_order("slow", "Slow", &[], &["slow.txt"]);
    for i in 1..=5 {
        env.work_order(&format!("q{i}"), "Quick", &[], &[&format!("q{i}.txt")]);
    }
    env.commit_all("init");
    // The slow build lasts until the conductor has reported all five quick
    // merges (its stderr goes to a file the builder reads), or a minute: a
    // conductor that lands nothing while a build runs fails, not hangs.
    // (`q[1-5]` keeps the pattern from matching itself in the stderr.)
    let stderr = env.root.join("stderr");
    let build = format!(
        "if [ \"$ARBITER_WO\" = slow ]; then i=0; \
           until [ \"$(grep -c 'arbiter merge wo=q[1-5] ' '{e}')\" -ge 5 ] || [ $i -ge 1200 ]; do sleep 0.05; i=$((i+1)); done; \
         fi; echo done > \"$ARBITER_WO.txt\"",
        e = stderr.display()
    );
    let out = env
        .command_in(
            &env.repo,
            &["round", "--json", "--max-total", "6", "--build", &build],
        )
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .output()
        .expect("run");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: std::fs::read_to_string(&stderr).expect("stderr"),
    }
    .success();
    let summary = run.json();
    assert_eq!(summary["schedule"], "continuous");
    assert_eq!(summary["done"].as_array().map(Vec::len), Some(6));
    let slow_ended = run
        .stderr
        .find("arbiter build wo=slow result=")
        .expect("the slow build's end is reported");
    for i in 1..=5 {
        let merged = run
            .stderr
            .find(&format!("arbiter merge wo=q{i} "))
            .unwrap_or_else(|| panic!("q{i} merged:\n{}", run.stderr));
        assert!(
            merged < slow_ended,
            "q{i} landed only after the slow build ended:\n{}",
            run.stderr
        );
    }
    env.fsck();
}

/// A library file whose one function the app's file must name: each
/// order alone passes the gate, merged they do not.
const GATE: &str = "! [ -f app.txt ] || grep -qx \"$(cat app.txt)\" lib.txt";

fn breaking_pair() -> TestEnv {
    let env = TestEnv::new();
    env.write("lib.txt", "greet\n");
    env.work_order("wo-a", "Rename greet to hello", &[], &["lib.txt"]);
    env.work_order("wo-b", "Call greet", &[], &["app.txt"]);
    env.commit_all("init");
    env
}

const BREAKING_BUILD: &str =
    "if [ \"$ARBITER_WO\" = wo-a ]; then echo hello > lib.txt; else echo greet > app.txt; fi";

#[test]
fn verified_merges_never_put_a_failing_merge_on_main() {
    let env = breaking_pair();
    let run = env
        .run(&[
            "round",
            "--json",
            "--schedule",
            "rounds",
            "--once",
            "--verify",
            "merged",
            "--gate",
            GATE,
            "--build",
            BREAKING_BUILD,
        ])
        .success();
    let summary = run.json();
    assert_eq!(
        summary["done"],
        serde_json::json!(["wo-a"]),
        "{}",
        run.stderr
    );
    assert_eq!(summary["pending"], serde_json::json!(["wo-b"]));
    assert!(
        run.stderr
            .contains("arbiter rework wo=wo-b reason=merged_gate_failed"),
        "{}",
        run.stderr
    );
    assert!(history_events(&env, "wo-b").contains(&"merged_gate_failed".to_owned()));
    for sha in first_parents(&env) {
        assert!(gate_passes_at(&env, &sha, GATE), "{sha} fails the gate");
    }
    assert_eq!(landed(&env, "wo-b"), 0);
    env.fsck();
}

#[test]
fn without_verification_both_land_and_main_breaks() {
    let env = breaking_pair();
    let run = env
        .run(&[
            "round",
            "--json",
            "--schedule",
            "rounds",
            "--once",
            "--verify",
            "none",
            "--gate",
            GATE,
            "--build",
            BREAKING_BUILD,
        ])
        .success();
    assert_eq!(
        run.json()["done"],
        serde_json::json!(["wo-a", "wo-b"]),
        "{}",
        run.stderr
    );
    // What `--verify none` gives up: main's tip fails the gate every order passed.
    let tip = env.rev("main");
    assert!(!gate_passes_at(&env, &tip, GATE));
}

/// Eight orders: each adds `use-<n>.txt`, except the culprits, which change
/// an API file the gate requires unchanged once anything uses it.
fn eight_orders(culprits: &[usize]) -> TestEnv {
    let env = TestEnv::new();
    env.write("api1.txt", "ok\n");
    env.write("api2.txt", "ok\n");
    for n in 1..=8 {
        let id = format!("wo-0{n}");
        match culprits.iter().position(|&c| c == n) {
            Some(k) => env.work_order(&id, "Change the API", &[], &[&format!("api{}.txt", k + 1)]),
            None => env.work_order(&id, "Use the API", &[], &[&format!("use-{n}.txt")]),
        }
    }
    env.commit_all("init");
    env
}

const API_GATE: &str =
    "! ls use-*.txt >/dev/null 2>&1 || { grep -qx ok api1.txt && grep -qx ok api2.txt; }";

fn api_build(culprits: &[usize]) -> String {
    let mut script = String::from("n=${ARBITER_WO#wo-0}; case $n in ");
    for (k, c) in culprits.iter().enumerate() {
        script.push_str(&format!("{c}) echo v2 > api{}.txt ;; ", k + 1));
    }
    script.push_str("*) echo uses > use-$n.txt ;; esac");
    script
}

fn verify_runs(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("arbiter verify "))
        .collect()
}

/// A lockstep round of [`eight_orders`] with `culprits`, verified merged:
/// every good order lands, each culprit goes back for rework, and every
/// first-parent commit of main passes the gate. Returns the round and the
/// good orders.
fn bisect(culprits: &[usize]) -> (Run, Vec<String>) {
    let env = eight_orders(culprits);
    let run = env
        .run(&[
            "round",
            "--json",
            "--schedule",
            "rounds",
            "--once",
            "--max",
            "8",
            "--max-total",
            "8",
            "--gate",
            API_GATE,
            "--build",
            &api_build(culprits),
        ])
        .success();
    let summary = run.json();
    assert_eq!(
        summary["verify"], "merged",
        "a gate makes verification the default"
    );
    let bad: Vec<String> = culprits.iter().map(|c| format!("wo-0{c}")).collect();
    let good: Vec<String> = (1..=8)
        .map(|n| format!("wo-0{n}"))
        .filter(|id| !bad.contains(id))
        .collect();
    let done: Vec<&str> = summary["done"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(done, good, "{}", run.stderr);
    for culprit in &bad {
        assert!(
            run.stderr.contains(&format!(
                "arbiter rework wo={culprit} reason=merged_gate_failed"
            )),
            "{}",
            run.stderr
        );
    }
    for sha in first_parents(&env) {
        assert!(gate_passes_at(&env, &sha, API_GATE), "{sha} fails the gate");
    }
    env.fsck();
    (run, good)
}

/// One culprit among eight, at every position. A chain that fails is
/// bisected on prefixes down to two suspects; then the chain without one
/// suspect, and without the other, is tried, so that the seven good orders
/// land in one batch, verified, without verifying the merges after the
/// culprit again. With the full chain tried first (the one run a passing
/// batch costs), no strategy can land the seven within 1 + ⌈log2 8⌉ = 4
/// runs wherever the culprit is: that takes 4 for half the positions and 5
/// for the others, which is what this achieves.
#[test]
fn bisection_lands_the_seven_good_orders_of_eight_in_one_batch() {
    for culprit in 1..=8 {
        let (run, good) = bisect(&[culprit]);
        let lands: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.starts_with("arbiter land "))
            .collect();
        assert_eq!(lands.len(), 1, "{}", run.stderr);
        assert!(
            lands[0].ends_with(&format!("orders={}", good.join(","))),
            "{}",
            run.stderr
        );
        // The suspects' pair is (1, 2), (3, 4)…: the later one is tried first.
        let runs = if culprit % 2 == 0 { 4 } else { 5 };
        assert_eq!(
            run.json()["gate_runs"],
            runs,
            "culprit wo-0{culprit}: {}",
            run.stderr
        );
        assert_eq!(verify_runs(&run.stderr).len(), runs, "{}", run.stderr);
    }
}

/// Two culprits, apart or side by side (then both suspects of the last
/// bisection step are culprits, and the chain after the first one is the
/// very chain tried without it: its failure is not verified again).
#[test]
fn bisection_with_two_culprits_lands_all_six_good_orders() {
    for culprits in [[3, 6], [4, 5]] {
        let (run, _) = bisect(&culprits);
        // Each: the full chain, prefixes 4 and 2, both suspects left out
        // (both fail), prefix 3 naming the first culprit; the chain after
        // it is the one just tried without it, a known failure; two more
        // runs for the second culprit and one for what remains (or the
        // suspects left out).
        assert_eq!(run.json()["gate_runs"], 9, "{}", run.stderr);
        assert_eq!(verify_runs(&run.stderr).len(), 9, "{}", run.stderr);
    }
}

#[test]
fn one_gate_run_per_landed_batch_when_nothing_fails() {
    let env = TestEnv::new();
    env.disjoint_orders(4);
    let run = env
        .run(&[
            "round",
            "--json",
            "--schedule",
            "rounds",
            "--gate",
            "true",
            "--build",
            "echo x > f${ARBITER_WO#wo-}.txt",
        ])
        .success();
    let summary = run.json();
    assert_eq!(summary["landed_batches"], 1, "{}", run.stderr);
    assert_eq!(summary["gate_runs"], 1);
    assert_eq!(summary["done"].as_array().map(Vec::len), Some(4));
}

/// Verification runs the gates in a worktree prepared as a build's is:
/// the setup hook runs there first (a gate that needs installed
/// dependencies passed every build and failed every merged result before),
/// in a pooled worktree when the pool is on, so gates find caches warm.
#[test]
fn verification_runs_the_setup_hook_first() {
    for pool in ["--pool", "--no-pool"] {
        let env = TestEnv::new();
        env.write(".gitignore", "deps/\n");
        env.write("deps.lock", "v1\n");
        env.disjoint_orders(2);
        env.work_order("lock", "Bump the lock", &[], &["deps.lock"]);
        env.commit_all("the lock order");
        env.git(&["config", "arbiter.setupInputs", "deps.lock"]);
        let setups = env.root.join("setups.log");
        let setup = format!(
            "mkdir -p deps && cp deps.lock deps/installed && echo \"$ARBITER_WORKTREE\" >> '{}'",
            setups.display()
        );
        // Passes only where the setup installed what the tree's lock names.
        let gate = "cmp deps.lock deps/installed";
        // The builder that bumps the lock installs it too, as agents do.
        let build = "case $ARBITER_WO in lock) echo v2 > deps.lock; cp deps.lock deps/installed;; *) echo x > f${ARBITER_WO#wo-}.txt;; esac";
        let mut args = vec![
            "round",
            "--json",
            "--schedule",
            "rounds",
            "--setup",
            &setup,
            "--gate",
            gate,
            "--build",
            build,
        ];
        if pool == "--no-pool" {
            args.push(pool);
        }
        let run = env.run(&args).success();
        let summary = run.json();
        assert_eq!(
            summary["done"].as_array().map(Vec::len),
            Some(3),
            "{pool}: {}",
            run.stderr
        );
        assert_eq!(summary["gate_runs"], 1, "{pool}: {}", run.stderr);
        assert_eq!(landed(&env, "lock"), 1);
        let ran = std::fs::read_to_string(&setups).expect("the setup ran");
        let verified_in = ran.lines().last().unwrap_or_default();
        let expected = if pool == "--pool" {
            "/pool/"
        } else {
            "/verify-"
        };
        assert!(verified_in.contains(expected), "{pool}: {ran}");
    }
}

#[test]
fn a_conductor_killed_while_verifying_lands_nothing_twice() {
    for point in [
        "verify.started",
        "branch-cas.after",
        "merge-recorded.before",
    ] {
        let mut env = TestEnv::new();
        env.disjoint_orders(3);
        let build = "echo x > f${ARBITER_WO#wo-}.txt";
        env.set_env("ARBITER_CRASH_AT", point);
        let killed = env.run(&[
            "round",
            "--schedule",
            "rounds",
            "--gate",
            "true",
            "--build",
            build,
        ]);
        assert_ne!(
            killed.code, 0,
            "{point}: the run was killed\n{}",
            killed.stderr
        );
        env.set_env("ARBITER_CRASH_AT", "");
        let run = env
            .run(&["round", "--json", "--gate", "true", "--build", build])
            .success();
        assert_eq!(
            run.json()["done"].as_array().map(Vec::len),
            Some(3),
            "{point}: {}",
            run.stderr
        );
        for i in 0..3 {
            assert_eq!(
                landed(&env, &format!("wo-{i}")),
                1,
                "{point}: wo-{i} lands once"
            );
        }
        // Free pooled worktrees stay for the next run; nothing else does.
        let left = env.linked_worktrees();
        assert!(left.is_empty(), "{point}: leftovers: {left:?}");
        let worktrees = env.git(&["worktree", "list"]);
        assert!(!worktrees.contains("verify-"), "{point}");
        env.fsck();
    }
}

#[test]
fn bad_schedule_and_verify_values_are_input_errors() {
    let env = TestEnv::new();
    env.disjoint_orders(1);
    env.git(&["config", "arbiter.schedule", "sometimes"]);
    let run = env.run(&["round", "--build", "true"]).code(2);
    assert!(run.stderr.contains("arbiter.schedule"), "{}", run.stderr);
    env.git(&["config", "--unset", "arbiter.schedule"]);
    env.git(&["config", "arbiter.verify", "always"]);
    let run = env.run(&["round", "--build", "true"]).code(2);
    assert!(run.stderr.contains("arbiter.verify"), "{}", run.stderr);
    assert!(first_parents(&env).len() == 1, "nothing changed");
}

/// Without verification, orders that wait together land by one move of the
/// branch, and still each as its own merge commit on the first-parent
/// chain (in the order they waited), drift-checked on its own: an order
/// that strays outside its files is halted and the others land.
#[test]
fn unverified_orders_that_wait_together_land_as_one_batch_of_separate_merges() {
    let env = TestEnv::new();
    for id in ["wo-01", "wo-02", "wo-03", "wo-04"] {
        env.work_order(id, id, &[], &[&format!("{id}.txt")]);
    }
    env.commit_all("init");
    let before = first_parents(&env);
    let build =
        "echo $ARBITER_WO > $ARBITER_WO.txt; [ $ARBITER_WO = wo-03 ] && echo x > stray.txt; true";
    let run = env.run(&["round", "--schedule", "rounds", "--json", "--build", build]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let out = run.json();
    assert_eq!(out["landed_batches"], 1, "{out}");
    assert_eq!(
        out["done"],
        serde_json::json!(["wo-01", "wo-02", "wo-04"]),
        "{out}"
    );
    assert_eq!(out["halted"][0]["reason"], "undeclared_file_drift", "{out}");
    let after = first_parents(&env);
    assert_eq!(after.len(), before.len() + 3, "{after:?}");
    for id in ["wo-01", "wo-02", "wo-04"] {
        assert_eq!(landed(&env, id), 1, "{id}");
        assert_eq!(
            env.git(&["show", &format!("main:{id}.txt")]),
            format!("{id}\n")
        );
    }
    // Each merge's first parent is the one before it: a chain, not an octopus.
    for sha in &after[..3] {
        let parents = env.git(&["rev-list", "--parents", "-n", "1", sha]);
        assert_eq!(parents.split_whitespace().count(), 3, "{parents}");
    }
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let status = env.run(&["status", "--json"]).success().json();
    let done = status["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .filter(|o| o["status"] == "done")
        .count();
    assert_eq!(done, 3, "{status}");
    env.fsck();
}

/// A conductor killed while it wrote the ref keeping its merge chain
/// leaves that ref's lock behind: the next run removes it (only that
/// conductor ever writes its ref). Found by the kill-point matrix.
#[test]
fn a_dead_conductors_chain_ref_lock_is_removed() {
    let env = TestEnv::new();
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.commit_all("init");
    let chain = env.repo.join(".git/refs/arbiter/chain");
    std::fs::create_dir_all(&chain).expect("mkdir");
    let dead = chain.join("999999999-1.lock");
    std::fs::write(&dead, "").expect("lock");
    env.run(&["round", "--build", "echo a > a.txt"]).success();
    assert!(!dead.exists(), "the dead conductor's lock is gone");
}

/// `--verify merged` with no gate to run is said once per run, not
/// skipped in silence.
#[test]
fn verify_merged_without_a_gate_warns_once() {
    let env = TestEnv::new();
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.work_order("wo-b", "B", &[], &["b.txt"]);
    env.commit_all("init");
    let run = env
        .run(&[
            "round",
            "--verify",
            "merged",
            "--build",
            "echo x > ${ARBITER_WO#wo-}.txt",
        ])
        .success();
    assert_eq!(
        run.stderr.matches("with no gate configured").count(),
        1,
        "{}",
        run.stderr
    );
    let quiet = env
        .run(&["round", "--verify", "none", "--build", "true"])
        .success();
    assert!(
        !quiet.stderr.contains("no gate configured"),
        "{}",
        quiet.stderr
    );
}

/// `show` of an order whose merged verification failed says where the
/// gate's output is: the conductor's verify log, not the attempt's.
#[test]
fn show_links_the_verify_log_of_a_failed_merged_gate() {
    let env = TestEnv::new();
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.commit_all("init");
    env.git(&["config", "arbiter.retryCap", "1"]);
    env.run(&[
        "round",
        "--build",
        "echo a > a.txt",
        "--gate",
        "[ -z \"$ARBITER_VERIFY_ORDERS\" ] || { echo broken on the merged result; exit 1; }",
    ])
    .code(1);
    let show = env.run(&["show", "wo-a"]).success().stdout;
    let verify_log = show
        .lines()
        .find_map(|l| l.trim().strip_prefix("verify log: "))
        .unwrap_or_else(|| panic!("no verify log named:\n{show}"));
    assert!(
        std::fs::read_to_string(verify_log)
            .expect("the verify log")
            .contains("broken on the merged result"),
        "{verify_log}"
    );
    assert!(
        show.contains(&format!("          log: {verify_log}")),
        "the last failure points there too:\n{show}"
    );
}

/// Builds far quicker than the merge queue (each landing runs a slow gate)
/// do not run ahead of it without bound: at most four orders per `--max`
/// wait to land before another build starts. Without that, all 30 orders
/// were built and waited in the queue within the first landing.
#[test]
fn builds_do_not_run_far_ahead_of_a_slow_merge_queue() {
    let env = TestEnv::new();
    for i in 0..30 {
        env.write(&format!("f/{i}.txt"), "0\n");
        env.work_order(&format!("wo-{i}"), "Edit", &[], &[&format!("f/{i}.txt")]);
    }
    env.commit_all("init");
    let run = env
        .run(&[
            "round",
            "--max",
            "2",
            "--build",
            "echo 1 > f/${ARBITER_WO#wo-}.txt",
            "--gate",
            // Slow on the merged result only: builds stay quick.
            "[ -z \"$ARBITER_VERIFY_ORDERS\" ] || sleep 0.4",
            "--verify",
            "merged",
        ])
        .success();
    let (mut waiting, mut most) = (0i64, 0i64);
    for line in run.stderr.lines() {
        if line.starts_with("arbiter queue ") {
            waiting += 1;
        } else if line.starts_with("arbiter merge ") {
            waiting -= 1;
        } else if line.starts_with("arbiter claim ") {
            most = most.max(waiting);
        }
    }
    // Nothing of a run's own is recovered: an order's branch is this run's
    // until its worktree is given back, after it landed.
    assert!(!run.stderr.contains("arbiter recover"), "{}", run.stderr);
    // Four per build may wait; two builds may end before they are counted.
    assert!(
        most <= 2 * 4 + 2,
        "{most} orders waited to land at a claim\n{}",
        run.stderr
    );
    for i in 0..30 {
        assert_eq!(landed(&env, &format!("wo-{i}")), 1, "wo-{i}");
    }
    env.fsck();
}

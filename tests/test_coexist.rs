//! The world around a run is normal, not an error: a user editing and
//! staging in the checkout, an editor's `git status` taking `index.lock`
//! for a moment, `git gc` and `git maintenance`, a notes ref fetched back.
//! None of them may discard verified work, spend an attempt, or land
//! anything twice.

use std::path::Path;

use crate::common::{Run, TestEnv};

/// Two disjoint orders: `wo-01` rewrites the tracked `src/one.txt`,
/// `wo-02` adds `src/two.txt`.
fn repo() -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.write("src/one.txt", "one\n");
    env.work_order("wo-01", "One", &[], &["src/one.txt"]);
    env.work_order("wo-02", "Two", &[], &["src/two.txt"]);
    env.commit_all("init");
    env
}

/// A builder that writes its order's file and counts its runs in `<root>/runs`.
fn build(env: &TestEnv) -> String {
    format!(
        "echo $ARBITER_WO >> {runs}; mkdir -p src; case $ARBITER_WO in wo-01) echo built > src/one.txt;; wo-02) echo built > src/two.txt;; esac",
        runs = env.root.join("runs").display()
    )
}

fn round(env: &TestEnv, extra: &[&str]) -> Run {
    let mut args = vec!["round", "--json", "--max-total", "4"];
    args.extend_from_slice(extra);
    env.run(&args)
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

/// How many times each order's builder ran.
fn runs_of(env: &TestEnv, id: &str) -> usize {
    std::fs::read_to_string(env.root.join("runs"))
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == id)
        .count()
}

/// A round that must land both orders, each exactly once (`when` says
/// which case, for the failure message).
fn round_lands_both_once(env: &TestEnv, when: &str) {
    let summary = round(env, &["--build", &build(env)]).success().json();
    assert_eq!(
        summary["done"],
        serde_json::json!(["wo-01", "wo-02"]),
        "{when}: {summary}"
    );
    for id in ["wo-01", "wo-02"] {
        assert_eq!(env.merges_in(&env.repo, "main", id), 1, "{when}: {id}");
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// People keep working while agents run: an edit and a staged file that
/// the landings do not touch, made before the run and during it, stay as
/// they are; every order lands, each built exactly once.
#[test]
fn unrelated_local_changes_are_carried_over_and_every_order_lands_once() {
    let env = repo();
    env.write("notes.txt", "staged before the run\n");
    env.git(&["add", "notes.txt"]);
    // The user edits README while the builders run.
    let build = format!(
        "{}; echo 'edited during the run' >> {}/README",
        build(&env),
        env.repo.display()
    );
    let summary = round(&env, &["--build", &build]).success().json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    assert_eq!((runs_of(&env, "wo-01"), runs_of(&env, "wo-02")), (1, 1));
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-02"), 1);
    assert_eq!(read(&env.repo.join("src/one.txt")), "built\n");
    assert_eq!(read(&env.repo.join("src/two.txt")), "built\n");
    assert!(read(&env.repo.join("README")).starts_with("base\nedited during the run\n"));
    assert_eq!(
        env.git(&["status", "--porcelain"]),
        " M README\nA  notes.txt\n"
    );
    let log = env.run(&["log", "--json"]).success().json();
    assert!(
        !log.to_string().contains("abandoned"),
        "nothing was abandoned: {log}"
    );
    env.fsck();
}

/// An edit of a file a landing changes: the order passed, so it waits to
/// land (`verified`), its work kept, its builder run once; the others
/// land. Once the edit is stashed, the next round lands it without
/// building it again, and the stash is still the user's.
#[test]
fn an_overlapping_edit_keeps_the_work_verified_until_it_can_land() {
    let env = repo();
    env.write("src/one.txt", "the user's edit\n");
    let run = round(&env, &["--build", &build(&env)]).success();
    let summary = run.json();
    assert_eq!(summary["done"], serde_json::json!(["wo-02"]));
    let waiting = &summary["waiting"][0];
    assert_eq!(waiting["id"], "wo-01", "{summary}");
    assert!(
        waiting["why"]
            .as_str()
            .is_some_and(|w| w.contains("'src/one.txt'")),
        "{summary}"
    );
    assert_eq!(read(&env.repo.join("src/one.txt")), "the user's edit\n");
    assert_eq!(status_of(&env, "wo-01")["status"], "verified");
    assert_eq!(status_of(&env, "wo-01")["attempts"], 1);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 0);
    // Its work is kept on its branch, which doctor takes for no leftover.
    assert_eq!(env.git(&["show", "arbiter/wo-01:src/one.txt"]), "built\n");
    env.run(&["doctor"]).success();
    env.run(&["doctor", "--fix"]).success();
    assert_eq!(env.git(&["show", "arbiter/wo-01:src/one.txt"]), "built\n");
    let human = env.run(&["round", "--build", &build(&env), "--max-total", "4"]);
    // The first line and the waiting orders (the table has wall times).
    let text = human.snapshot(&env);
    let first = text.lines().next().unwrap_or_default();
    let waiting = &text[text.find("VERIFIED").expect("waiting orders")..];
    insta::assert_snapshot!(format!("{first}\n{waiting}"), @r#"
    0 landed batch(es): 1 done, 0 halted, 0 pending, 1 waiting to land
    VERIFIED, WAITING TO LAND: these passed, but the checkout of the branch could not follow:
      wo-01  local changes in the checkout $TEST_ENV/repo to files it changes: 'src/one.txt'
          branch: arbiter/wo-01
          next:   resolve that (commit or stash the changes in the way), then `git arbiter round` lands them without a rebuild
    [stderr]
    arbiter queue wo=wo-01 position=1
    arbiter verified wo=wo-01 waiting="local changes in the checkout $TEST_ENV/repo to files it changes: 'src/one.txt'"
    [exit status: 0]
    "#);
    insta::assert_snapshot!(env.run(&["status"]).snapshot(&env), @"
    ID     STATUS       ATTEMPTS  DEPS  MERGED        TITLE
    wo-01  verified     1/3       -     -             One
    wo-02  done → main  1/3       -     [SHORT]  Two
    wo-01 passed and waits to land: local changes in the checkout $TEST_ENV/repo to files it changes: 'src/one.txt'
      once that is resolved, 'git arbiter round' (or 'git arbiter retry wo-01') lands it without a rebuild
    [stderr]
    [exit status: 0]
    ");
    let show = env.run(&["show", "wo-01"]).success().stdout;
    assert!(
        show.contains("passed, waits to land: local changes in the checkout"),
        "{show}"
    );

    env.git(&["stash", "-q"]);
    let summary = round(&env, &["--build", &build(&env)]).success().json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    assert_eq!(runs_of(&env, "wo-01"), 1, "landed without a rebuild");
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(read(&env.repo.join("src/one.txt")), "built\n");
    assert_eq!(status_of(&env, "wo-01")["attempts"], 1);
    assert_eq!(env.git(&["stash", "list"]).lines().count(), 1);
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    env.fsck();
}

/// The same through `retry`: it lands the waiting work once the edit is
/// out of the way, and refuses (nothing changed) while it is not.
#[test]
fn retry_lands_work_waiting_to_land() {
    let env = repo();
    env.write("src/one.txt", "the user's edit\n");
    round(&env, &["--build", &build(&env)]).success();
    assert_eq!(status_of(&env, "wo-01")["status"], "verified");
    let notes = env.notes_tip();
    let run = env.run(&["retry", "wo-01"]).code(2);
    assert!(run.stderr.contains("'src/one.txt'"), "{}", run.stderr);
    assert_eq!(env.notes_tip(), notes, "nothing recorded");
    env.git(&["checkout", "--", "src/one.txt"]);
    let run = env.run(&["retry", "wo-01"]).success();
    assert!(run.stdout.contains("wo-01 is done"), "{}", run.stdout);
    assert_eq!(runs_of(&env, "wo-01"), 1);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(status_of(&env, "wo-01")["status"], "done");
    env.fsck();
}

/// An editor's `git status` takes `index.lock` for a moment, every 50 ms:
/// a landing waits for it, never reports it, discards nothing. Both with
/// a lock made and removed by hand, and with stock `git status` after a
/// `touch` (it then writes the refreshed index under the lock).
#[test]
fn a_flapping_index_lock_is_waited_for() {
    for real_status in [false, true, true] {
        let env = TestEnv::new();
        // 3,000 files, six orders.
        for d in 0..30 {
            for f in 0..100 {
                env.write(&format!("tree/d{d}/f{f}.txt"), &format!("{d} {f}\n"));
            }
        }
        for i in 0..6 {
            env.work_order(
                &format!("wo-{i}"),
                &format!("Order {i}"),
                &[],
                &[&format!("out/{i}.txt")],
            );
        }
        env.commit_all("init");
        let build = format!(
            "echo $ARBITER_WO >> {}; mkdir -p out; echo done > out/${{ARBITER_WO#wo-}}.txt",
            env.root.join("runs").display()
        );
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let editor = {
            let (repo, stop) = (env.repo.clone(), stop.clone());
            std::thread::spawn(move || {
                let lock = repo.join(".git/index.lock");
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if real_status {
                        let readme = repo.join("tree/d0/f0.txt");
                        let _ = std::fs::File::options()
                            .append(true)
                            .open(&readme)
                            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
                        let _ = std::process::Command::new("git")
                            .args(["status", "--porcelain"])
                            .current_dir(&repo)
                            .env("GIT_CONFIG_NOSYSTEM", "1")
                            .env("GIT_CONFIG_GLOBAL", "/dev/null")
                            .stdout(std::process::Stdio::null())
                            .stderr(std::process::Stdio::null())
                            .status();
                    } else if std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&lock)
                        .is_ok()
                    {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        let _ = std::fs::remove_file(&lock);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(30));
                }
            })
        };
        let run = env.run(&["round", "--json", "--build", &build, "--max-total", "3"]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        editor.join().expect("editor");
        let summary = run.success().json();
        assert_eq!(
            summary["done"].as_array().map(Vec::len),
            Some(6),
            "{summary}"
        );
        for i in 0..6 {
            assert_eq!(runs_of(&env, &format!("wo-{i}")), 1, "wo-{i} built once");
            assert_eq!(env.merges_in(&env.repo, "main", &format!("wo-{i}")), 1);
        }
        assert_eq!(env.git(&["status", "--porcelain"]), "");
        env.fsck();
    }
}

/// A lock that stays past the wait: nothing is discarded, the orders wait
/// to land, and land once it is gone.
#[test]
fn a_lock_held_past_the_wait_keeps_the_work_waiting() {
    let env = repo();
    env.git(&["config", "arbiter.indexLockWait", "300ms"]);
    let lock = env.repo.join(".git/index.lock");
    std::fs::write(&lock, "").expect("lock");
    let summary = round(&env, &["--build", &build(&env)]).success().json();
    assert_eq!(summary["done"], serde_json::json!([]), "{summary}");
    let waiting: Vec<&str> = summary["waiting"]
        .as_array()
        .expect("waiting")
        .iter()
        .map(|w| w["id"].as_str().expect("id"))
        .collect();
    assert_eq!(waiting, ["wo-01", "wo-02"]);
    assert!(summary["waiting"][0]["why"]
        .as_str()
        .is_some_and(|w| w.contains("index.lock")));
    std::fs::remove_file(&lock).expect("unlock");
    let summary = round(&env, &["--build", &build(&env)]).success().json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    assert_eq!((runs_of(&env, "wo-01"), runs_of(&env, "wo-02")), (1, 1));
    env.fsck();
}

/// Order A halts for drift; order B lands; A is fixed and retried. Its
/// merge onto the moved tip fails the gate (each passes alone): `retry`
/// goes through the merge queue, so it does not land, and the gate still
/// passes on main. A stays halted with its work kept.
#[test]
fn retry_lands_only_what_the_gates_pass_as_merged() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    // Each order's file alone is fine; both together break the build.
    env.write("check.sh", "! { test -e a.txt && test -e b.txt; }\n");
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.work_order("wo-b", "B", &[], &["b.txt"]);
    env.commit_all("init");
    env.git(&["config", "arbiter.gate", "sh check.sh"]);
    let build = "case $ARBITER_WO in wo-a) echo a > a.txt; echo n > NOTES.txt;; wo-b) echo b > b.txt;; esac";
    let run = env.run(&["round", "--json", "--build", build]).code(1);
    let summary = run.json();
    assert_eq!(summary["done"], serde_json::json!(["wo-b"]), "{summary}");
    assert_eq!(summary["halted"][0]["reason"], "undeclared_file_drift");
    // Fixed: NOTES.txt declared.
    env.work_order("wo-a", "A", &[], &["a.txt", "NOTES.txt"]);
    env.commit_all("declare NOTES.txt");
    let tip = env.rev("main");
    let run = env.run(&["retry", "wo-a"]).code(1);
    assert!(run.stdout.contains("merged_gate_failed"), "{}", run.stdout);
    assert_eq!(env.rev("main"), tip, "nothing landed");
    assert_eq!(env.merges_in(&env.repo, "main", "wo-a"), 0);
    let gate = std::process::Command::new("sh")
        .arg("check.sh")
        .current_dir(&env.repo)
        .status()
        .expect("gate");
    assert!(gate.success(), "the gate passes on main");
    let row = status_of(&env, "wo-a");
    assert_eq!(row["halted"], true, "{row}");
    assert_eq!(row["halt_reason"], "merged_gate_failed", "{row}");
    assert_eq!(env.git(&["show", "arbiter/wo-a:a.txt"]), "a\n");
    env.fsck();
}

/// The notes ref fetched back (or edited by hand) to any earlier state of
/// itself: the branch's history is the truth. The next run lands nothing a
/// second time and builds nothing again; the records are repaired.
#[test]
fn a_rolled_back_state_never_lands_anything_twice() {
    let env = repo();
    round(&env, &["--build", &build(&env)]).success();
    let states = env.git(&["rev-list", "refs/notes/arbiter"]);
    // At least the dispatch, the verdicts and the landing (verdicts of
    // builds that end together are one transition).
    assert!(states.lines().count() >= 3, "{states}");
    for old in states.lines().skip(1) {
        env.git(&["update-ref", "refs/notes/arbiter", old]);
        round_lands_both_once(&env, &format!("rolled back to {old}"));
        for id in ["wo-01", "wo-02"] {
            assert_eq!(runs_of(&env, id), 1, "{id} built again after {old}");
        }
    }
    // A done record edited by hand back to `ready`, and one to a halt.
    let ready = r#"{"version":1,"wo":"wo-01","status":"ready","halted":false,"halt_reason":null,"attempts":0,"cap":3,"checkpoint_before":null,"checkpoint_after":null,"verdicts":[],"history":[]}"#;
    let halted = r#"{"version":1,"wo":"wo-02","status":"needs_rework","halted":true,"halt_reason":"merge_conflict","attempts":1,"cap":3,"checkpoint_before":null,"checkpoint_after":null,"verdicts":[],"history":[]}"#;
    env.write_record("wo-01", ready);
    env.write_record("wo-02", halted);
    let doctor = env.run(&["doctor"]).code(1);
    assert!(
        doctor.stdout.contains("landed on main"),
        "{}",
        doctor.stdout
    );
    let summary = round(&env, &["--build", &build(&env)]).success().json();
    assert_eq!(
        summary["done"],
        serde_json::json!(["wo-01", "wo-02"]),
        "{summary}"
    );
    assert_eq!(summary["halted"], serde_json::json!([]), "{summary}");
    for id in ["wo-01", "wo-02"] {
        assert_eq!(env.merges_in(&env.repo, "main", id), 1);
        assert_eq!(runs_of(&env, id), 1);
        assert_eq!(status_of(&env, id)["status"], "done");
    }
    let log = env.run(&["log", "--json", "wo-02"]).success().json();
    assert!(log.to_string().contains("recovered_done"), "{log}");
    env.run(&["doctor"]).success();
    env.fsck();
}

/// The notes ref moved back under a running conductor, to a state from
/// before its claims: the attempts it has in flight are still its own.
/// Nothing is dispatched twice, each passed build lands once without a
/// rebuild or a spent attempt, a failed one counts as failed (wo-04 fails
/// once), and the run exits 0. It stopped with exit 2 on a worktree "in use
/// by a running git-arbiter" (itself), the work of the builds in flight
/// left on branches for `merge-back`.
#[test]
fn a_state_moved_back_under_a_run_keeps_the_runs_claims() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-00", "Zero", &[], &["wo-00.txt"]);
    env.commit_all("init");
    let runs = env.root.join("runs");
    let before = env.root.join("notes-before");
    let failed = env.root.join("failed-once");
    // wo-01 moves the state back as soon as it runs; the others are still
    // building then.
    let build = format!(
        "echo $ARBITER_WO >> {runs}; \
         if [ $ARBITER_WO = wo-01 ]; then git update-ref refs/notes/arbiter $(cat {before}); else sleep 1; fi; \
         if [ $ARBITER_WO = wo-04 ] && [ ! -e {failed} ]; then touch {failed}; exit 1; fi; \
         echo built > $ARBITER_WO.txt",
        runs = runs.display(),
        before = before.display(),
        failed = failed.display()
    );
    round(&env, &["--build", &build]).success();
    std::fs::write(&before, env.git(&["rev-parse", "refs/notes/arbiter"])).expect("write");
    for id in ["wo-01", "wo-02", "wo-03", "wo-04"] {
        env.work_order(id, id, &[], &[&format!("{id}.txt")]);
    }
    env.commit_all("more orders");
    let summary = round(&env, &["--build", &build]).success().json();
    assert_eq!(summary["halted"], serde_json::json!([]), "{summary}");
    for id in ["wo-01", "wo-02", "wo-03", "wo-04"] {
        let done = summary["done"].as_array().expect("done");
        assert!(done.contains(&serde_json::json!(id)), "{summary}");
        assert_eq!(env.merges_in(&env.repo, "main", id), 1, "{id}");
        let tries = if id == "wo-04" { 2 } else { 1 };
        assert_eq!(runs_of(&env, id), tries, "{id} built again");
        let row = status_of(&env, id);
        assert_eq!(row["status"], "done", "{row}");
        assert_eq!(row["attempts"], tries, "{row}");
    }
    let log = env.run(&["log", "--json", "wo-01"]).success().json();
    assert!(log.to_string().contains("waits to land"), "{log}");
    let log = env.run(&["log", "--json", "wo-04"]).success().json();
    assert!(log.to_string().contains("held again"), "{log}");
    assert_eq!(env.git(&["branch", "--list", "arbiter/*"]), "");
    env.run(&["doctor"]).success();
    env.fsck();
}

/// The state moved back while one conductor builds, and a second starts
/// then: the orders look free to it, but their branches are checked out in
/// worktrees the first holds, each with a commit its builder made. The
/// second leaves them to the first (no error, no attempt spent, and its
/// cleanup does not call that work made by hand); the first lands each
/// once. The second used to stop with exit 2 ("in use by a running
/// git-arbiter").
#[test]
fn a_second_conductor_leaves_orders_whose_claims_the_state_forgot() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    for id in ["wo-01", "wo-02", "wo-03"] {
        env.work_order(id, id, &[], &[&format!("{id}.txt")]);
    }
    env.commit_all("init");
    let runs = env.root.join("runs");
    let second = env.root.join("second");
    // Each builder commits its work; then wo-01 deletes the state (the
    // others still build) and runs a second conductor in the main worktree,
    // whose builds would fail.
    let build = format!(
        "echo $ARBITER_WO >> {runs}; \
         echo built > $ARBITER_WO.txt && git add -A && git commit -q -m built; \
         if [ $ARBITER_WO = wo-01 ]; then \
           sleep 0.5; git update-ref -d refs/notes/arbiter; \
           (cd {repo} && env -u ARBITER_WO {bin} round --json --build 'exit 1' > {second}.json 2> {second}.err; echo $? > {second}); \
         else sleep 3; fi",
        runs = runs.display(),
        repo = env.repo.display(),
        bin = crate::common::bin().display(),
        second = second.display()
    );
    let summary = round(&env, &["--build", &build]).success().json();
    let err = std::fs::read_to_string(second.with_extension("err")).unwrap_or_default();
    let code = read(&second);
    assert!(
        matches!(code.trim(), "0" | "5"),
        "the second conductor exited {code}: {err}"
    );
    assert!(!err.contains("no run of git-arbiter made"), "{err}");
    assert_eq!(summary["halted"], serde_json::json!([]), "{summary}");
    for id in ["wo-01", "wo-02", "wo-03"] {
        assert_eq!(env.merges_in(&env.repo, "main", id), 1, "{id}");
        assert_eq!(runs_of(&env, id), 1, "{id} built again");
        let row = status_of(&env, id);
        assert_eq!(row["status"], "done", "{row}");
        assert_eq!(row["attempts"], 1, "{row}");
    }
    assert_eq!(env.git(&["branch", "--list", "arbiter/*"]), "");
    env.run(&["doctor"]).success();
    env.fsck();
}

/// git's own maintenance beside runs: `git gc`, `git repack -d`, `git
/// pack-refs --all` and `git maintenance run` in a loop. Every order lands
/// exactly once, every run exits 0, and `git fsck --strict` is clean.
#[test]
fn git_maintenance_beside_runs_loses_nothing() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.commit_all("init");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let maintenance = {
        let stop = stop.clone();
        let repo = env.repo.clone();
        let git = move |args: &[&str]| {
            let _ = std::process::Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        };
        std::thread::spawn(move || {
            // What git runs on its own and calls safe beside writers. Not
            // `repack -a -d` by hand: it drops at once whatever no ref
            // reached when it began (no grace period), and git's `gc` moves
            // loose objects not yet reachable into a cruft pack, so an object
            // written just before the ref that names it was updated can go
            // (git-gc(1): "some risk of corruption" for concurrent writers).
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                git(&["gc", "-q"]);
                git(&["repack", "-d", "-q"]);
                git(&["pack-refs", "--all"]);
                git(&["maintenance", "run"]);
            }
        })
    };
    let build = "f=$(sed -n 's/^- //p' \"$ARBITER_WO_FILE\"); mkdir -p $(dirname $f); echo $ARBITER_WO > $f";
    let mut ids = Vec::new();
    for (round, extra) in [
        &[][..],
        &["--gate", "true"][..],
        &["--schedule", "rounds", "--gate", "true"][..],
    ]
    .into_iter()
    .enumerate()
    {
        for i in 0..8 {
            let id = format!("r{round}-o{i}");
            env.work_order(&id, &id, &[], &[&format!("r{round}/f{i}.txt")]);
            ids.push(id);
        }
        // The test's own commit races `git gc` as any git command does
        // (gc removes the empty object folder `git add` is writing into):
        // the user would run it again, so does the test.
        let message = format!("orders of round {round}");
        let added = (0..5).any(|_| env.git_try_in(&env.repo, &["add", "-A"]).code == 0);
        assert!(added, "git add -A failed five times beside git gc");
        let committed = (0..5).any(|_| {
            env.git_try_in(&env.repo, &["commit", "-q", "-m", &message])
                .code
                == 0
        });
        assert!(committed, "git commit failed five times beside git gc");
        let mut args = vec!["round", "--json", "--build", build];
        args.extend_from_slice(extra);
        let run = env.run(&args);
        assert_eq!(run.code, 0, "{extra:?}: {}\n{}", run.stdout, run.stderr);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    maintenance.join().expect("maintenance");
    for id in &ids {
        assert_eq!(env.merges_in(&env.repo, "main", id), 1, "{id}");
    }
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    env.fsck();
}

/// A run killed at each step of a landing while the user has an edit and
/// a staged change in the checkout: the next run finishes or redoes the
/// landing, the order lands once, and the user's changes are as they were.
#[test]
fn a_kill_mid_landing_keeps_the_users_changes() {
    for point in [
        "branch-cas.before",
        "branch-cas.after",
        "checkout-files.after",
        "checkout-index.after",
        "merge-recorded.before",
        "merge-recorded.after",
    ] {
        let mut env = repo();
        env.write("README", "the user's edit\n");
        env.write("notes.txt", "staged\n");
        env.git(&["add", "notes.txt"]);
        env.set_env("ARBITER_CRASH_AT", point);
        let killed = round(&env, &["--build", &build(&env)]);
        assert!(
            killed
                .stderr
                .contains(&format!("arbiter crash point={point}")),
            "{point}: {}",
            killed.stderr
        );
        env.unset_env("ARBITER_CRASH_AT");
        round_lands_both_once(&env, point);
        assert_eq!(
            read(&env.repo.join("README")),
            "the user's edit\n",
            "{point}"
        );
        assert_eq!(read(&env.repo.join("src/one.txt")), "built\n", "{point}");
        assert_eq!(
            env.git(&["status", "--porcelain"]),
            " M README\nA  notes.txt\n",
            "{point}"
        );
        assert!(!env.repo.join(".git/arbiter-landing").exists(), "{point}");
        assert!(!env.repo.join(".git/index.lock").exists(), "{point}");
        env.fsck();
    }
}

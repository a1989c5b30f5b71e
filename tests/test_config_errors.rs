//! Everyday configuration mistakes are input errors (exit 2, naming what and
//! where, spending no attempt): a command the shell cannot run, a missing git
//! identity, an unusable `--timeout` or `--max`, and rerunning a done order.

use std::path::Path;

use crate::common::{Run, TestEnv};

fn repo() -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-01", "One", &[], &["src/one.txt"]);
    env.work_order("wo-02", "Two", &[], &["src/two.txt"]);
    env.commit_all("init");
    env
}

/// Writes the declared file of whichever order it builds and counts its runs
/// in `<root>/runs`.
fn counting_build(env: &TestEnv) -> String {
    format!(
        "echo \"$ARBITER_WO\" >> {}; mkdir -p src && echo \"$ARBITER_WO\" > src/$(echo $ARBITER_WO | sed 's/wo-0//;s/1/one/;s/2/two/').txt",
        env.root.join("runs").display()
    )
}

/// Every order ready again with no attempt spent, none halted.
#[track_caller]
fn no_attempt_spent(env: &TestEnv) {
    let status = env.run(&["status", "--json"]).success().json();
    for row in status["orders"].as_array().expect("orders") {
        assert_eq!(row["attempts"], 0, "{status}");
        assert_eq!(row["halted"], false, "{status}");
    }
}

/// No worktree but the main one, no arbiter branch, fsck clean.
#[track_caller]
fn nothing_left(env: &TestEnv) {
    env.fsck();
    let worktrees = env.linked_worktrees();
    assert!(worktrees.is_empty(), "{worktrees:?}");
    assert_eq!(
        env.git(&["branch", "--list", "arbiter/*", "arbiter-race/*"]),
        ""
    );
}

/// The one-line error and its hint name the command, the order (`label`,
/// or its start when either order may be first), the worktree it ran in and
/// `$ARBITER_REPO`.
#[track_caller]
fn names_the_command(run: &Run, command: &str, label: &str, code: &str) {
    let err = &run.stderr;
    assert!(err.contains(&format!("error: {label}")), "{err}");
    assert!(
        err.contains(&format!(" command '{command}' exited {code}")),
        "{err}"
    );
    assert!(
        err.contains("hint: commands run in the order's worktree"),
        "{err}"
    );
    assert!(err.contains("\"$ARBITER_REPO\""), "{err}");
    assert!(err.contains("no attempt was spent"), "{err}");
}

/// A build command that is not found used to burn every attempt in a second
/// and halt the order `retry_cap_exhausted`.
#[test]
fn a_build_command_not_found_is_a_configuration_error() {
    let env = repo();
    let run = env
        .run(&["round", "--build", "arbiter-no-such-agent -p 'do it'"])
        .code(2);
    // Whichever order failed first is named; the other may not have started.
    names_the_command(&run, "arbiter-no-such-agent -p 'do it'", "wo-0", "127");
    assert!(run.stderr.contains("not found"), "{}", run.stderr);
    no_attempt_spent(&env);
    nothing_left(&env);
    let log = env.run(&["log"]).success().stdout;
    assert!(log.contains("command_not_runnable"), "{log}");
    assert!(!log.contains("retry_cap_exhausted"), "{log}");
}

/// `../check.sh` resolves inside the worktree, not the repository: once it
/// fails, no further order is built, and `$ARBITER_REPO` reaches the script.
#[test]
fn a_relative_gate_script_stops_dispatch_and_arbiter_repo_reaches_it() {
    let env = repo();
    env.write(
        "check.sh",
        "#!/bin/sh\necho \"checked $ARBITER_WO\" >> \"$ARBITER_REPO/checks\"\n",
    );
    std::fs::write(env.repo.join(".git/info/exclude"), "check.sh\nchecks\n").expect("exclude");
    let build = counting_build(&env);
    let run = env
        .run(&[
            "round",
            "--max-total",
            "1",
            "--build",
            &build,
            "--gate",
            "../check.sh",
        ])
        .code(2);
    names_the_command(&run, "../check.sh", "wo-0", "127");
    assert_eq!(env.runs(), 1, "the second order is not built");
    no_attempt_spent(&env);
    nothing_left(&env);

    let run = env
        .run(&[
            "round",
            "--build",
            &build,
            "--gate",
            "sh \"$ARBITER_REPO/check.sh\"",
            // The gate once per order: not again on the merged result.
            "--verify",
            "none",
        ])
        .success();
    assert_eq!(env.runs(), 3, "{}", run.stderr);
    let checks = std::fs::read_to_string(env.repo.join("checks"))
        .expect("the gate ran in the repository's script");
    let mut checks: Vec<&str> = checks.lines().collect();
    checks.sort_unstable();
    assert_eq!(checks, ["checked wo-01", "checked wo-02"]);
    nothing_left(&env);
}

/// A build already running when another order's command fails to run
/// finishes and merges; only the failed order is given back.
#[test]
fn builds_already_running_finish_and_merge() {
    let env = repo();
    // wo-01 fails only once wo-02 is building, and wo-02 goes on only once
    // the conductor has seen wo-01 end (its log says so).
    let started = env.root.join("started");
    let log = env.repo.join(".git/arbiter/logs/wo-01/attempt-1.log");
    let build = format!(
        "case $ARBITER_WO in wo-01) while [ ! -e {s} ]; do sleep 0.1; done; arbiter-no-such-agent;; \
         *) touch {s}; i=0; while ! grep -q ' ended: ' {l} 2>/dev/null && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; {};; esac",
        counting_build(&env),
        s = started.display(),
        l = log.display()
    );
    let run = env.run(&["round", "--build", &build]).code(2);
    names_the_command(&run, &build, "wo-01", "127");
    let status = env.run(&["status", "--json"]).success().json();
    let rows = status["orders"].as_array().expect("orders");
    assert_eq!(rows[0]["attempts"], 0, "{status}");
    assert_eq!(rows[0]["status"], "needs_rework", "{status}");
    assert_eq!(rows[1]["status"], "done", "{status}");
    assert_eq!(env.git(&["show", "main:src/two.txt"]), "wo-02\n");
    nothing_left(&env);
}

/// `$ARBITER_REPO` is the main worktree's top from a linked worktree too,
/// and the git dir of a bare repository.
#[test]
fn arbiter_repo_is_the_main_worktree_or_a_bare_git_dir() {
    let env = repo();
    let seen = env.root.join("seen");
    let build = format!(
        "echo \"$ARBITER_REPO\" >> {}; {}",
        seen.display(),
        counting_build(&env)
    );
    let linked = env.root.join("linked");
    env.git_worktree_add("other", &linked);
    env.run_in(
        &linked,
        &["round", "--max", "1", "--once", "--build", &build],
    )
    .success();
    let bare = env.root.join("bare.git");
    env.git_in(&env.root, &["clone", "-q", "--bare", "repo", "bare.git"]);
    let orders = env.repo.join("work-orders");
    env.run_in(
        &bare,
        &[
            "--orders",
            orders.to_str().expect("utf-8"),
            "round",
            "--max",
            "1",
            "--once",
            "--build",
            &build,
        ],
    )
    .success();
    assert_eq!(
        std::fs::read_to_string(&seen).expect("seen"),
        format!("{}\n{}\n", env.repo.display(), bare.display())
    );
}

/// A critic that is not executable (126) is no `blocking_critique`.
#[test]
fn a_critic_that_is_not_executable_halts_nothing() {
    let env = repo();
    env.write("critic.sh", "#!/bin/sh\nexit 0\n");
    env.commit_all("critic");
    let build = counting_build(&env);
    let run = env
        .run(&[
            "round",
            "--max",
            "1",
            "--build",
            &build,
            "--critic",
            "./critic.sh",
        ])
        .code(2);
    names_the_command(&run, "./critic.sh", "wo-01", "126");
    assert!(run.stderr.contains("not executable"), "{}", run.stderr);
    assert_eq!(env.runs(), 1);
    no_attempt_spent(&env);
    nothing_left(&env);
}

/// The race: an instance's gate or score that cannot run gives the attempt
/// back, and instances not yet started are not built.
#[test]
fn a_race_whose_gate_or_score_cannot_run_spends_no_attempt() {
    let env = repo();
    let build = counting_build(&env);
    let race = |extra: &[&str]| {
        let mut args = vec![
            "race",
            "wo-01",
            "-n",
            "2",
            "--max-total",
            "1",
            "--build",
            &build,
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    let run = race(&["--gate", "../check.sh", "--score", "echo 1"]).code(2);
    names_the_command(&run, "../check.sh", "wo-01#", "127");
    assert_eq!(env.runs(), 1, "the second instance is not built");
    no_attempt_spent(&env);
    nothing_left(&env);

    let run = race(&["--score", "no-such-scorer"]).code(2);
    names_the_command(&run, "no-such-scorer", "wo-01#", "127");
    assert_eq!(env.runs(), 2);
    no_attempt_spent(&env);
    nothing_left(&env);

    race(&["--score", "echo 1"]).success();
    assert_eq!(env.runs(), 4);
    nothing_left(&env);
}

fn without_identity(env: &TestEnv, dir: &Path, args: &[&str]) -> std::process::Output {
    env.command_in(dir, args)
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_AUTHOR_EMAIL")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .output()
        .expect("run")
}

/// `clear` and `merge-back` without user.name/user.email: exit 2 with the
/// hint, no state, no branch moved (`halt`, `round` and `race` are checked
/// in test_reliability).
#[test]
fn clear_and_merge_back_without_an_identity_write_nothing() {
    let env = repo();
    env.run(&["halt", "wo-01", "--reason", "x"]).success();
    env.git(&["branch", "arbiter/wo-02"]);
    let wt = env.root.join("by-hand");
    env.git(&[
        "worktree",
        "add",
        "-q",
        wt.to_str().expect("utf-8"),
        "arbiter/wo-02",
    ]);
    std::fs::create_dir_all(wt.join("src")).expect("src");
    std::fs::write(wt.join("src/two.txt"), "two\n").expect("write");
    env.git_in(&wt, &["add", "-A"]);
    env.git_in(&wt, &["commit", "-q", "-m", "two by hand"]);
    let refs = || env.git(&["for-each-ref"]);
    let before = (env.notes_tip(), refs());
    for args in [&["clear", "wo-01"][..], &["merge-back", "wo-02"][..]] {
        let out = without_identity(&env, &env.repo, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("error: no author identity is configured\nhint: set user.name and user.email with 'git config'"),
            "{args:?}: {stderr}"
        );
        assert_eq!((env.notes_tip(), refs()), before, "{args:?} wrote nothing");
    }
    assert_eq!(env.git(&["status", "--porcelain"]), "");
}

/// A timeout too long for a `Duration` used to panic (exit 101).
#[test]
fn an_overlong_timeout_is_an_input_error() {
    let env = repo();
    let huge = "99999999999999999999";
    for args in [
        &["round", "--build", "true", "--timeout", huge][..],
        &[
            "race",
            "wo-01",
            "-n",
            "1",
            "--build",
            "true",
            "--score",
            "echo 1",
            "--timeout",
            huge,
        ][..],
    ] {
        let run = env.run(args).code(2);
        assert!(
            run.stderr
                .contains(&format!("'{huge}' is too long a duration")),
            "{args:?}: {}",
            run.stderr
        );
    }
    env.git(&["config", "arbiter.timeout", huge]);
    let run = env.run(&["round", "--build", "true"]).code(2);
    assert!(
        run.stderr.contains(&format!(
            "config arbiter.timeout: '{huge}' is too long a duration"
        )),
        "{}",
        run.stderr
    );
    assert!(env.notes_tip().is_none());
}

/// `1h30m`-style timeouts are accepted, from the flag and from config.
#[test]
fn compound_timeouts_are_accepted() {
    let env = repo();
    let build = counting_build(&env);
    env.run(&[
        "round",
        "--once",
        "--max",
        "1",
        "--build",
        &build,
        "--timeout",
        "1h30m",
    ])
    .success();
    env.git(&["config", "arbiter.timeout", "2m30s"]);
    env.run(&[
        "race", "wo-02", "-n", "1", "--build", &build, "--score", "echo 1",
    ])
    .success();
    assert_eq!(env.runs(), 2);
    let run = env
        .run(&["round", "--build", "true", "--timeout", "30m1h"])
        .code(2);
    assert!(run.stderr.contains("largest to smallest"), "{}", run.stderr);
}

/// `--max 0` (or `arbiter.maxBatch 0`) used to mean "nothing to run".
#[test]
fn max_zero_is_an_input_error() {
    let env = repo();
    for args in [
        &["round", "--build", "true", "--max", "0"][..],
        &["batch", "--max", "0"][..],
    ] {
        let run = env.run(args).code(2);
        assert!(
            run.stderr.contains("error: --max must be at least 1"),
            "{args:?}: {}",
            run.stderr
        );
    }
    env.git(&["config", "arbiter.maxBatch", "0"]);
    for args in [&["round", "--dry-run"][..], &["batch"][..]] {
        let run = env.run(args).code(2);
        assert!(
            run.stderr
                .contains("error: config arbiter.maxBatch = 0: must be at least 1"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert!(env.notes_tip().is_none());
}

fn hint(run: &Run) -> &str {
    run.stderr
        .lines()
        .find_map(|l| l.strip_prefix("hint: "))
        .unwrap_or_else(|| panic!("no hint: {}", run.stderr))
}

/// `race` said "'git arbiter clear' it to run it again", which `clear`
/// refuses for a done order ("not halted"): all three commands now say the
/// same, true thing.
#[test]
fn race_clear_and_halt_agree_on_a_done_order() {
    let env = repo();
    env.run(&[
        "round",
        "--max",
        "1",
        "--once",
        "--build",
        &counting_build(&env),
    ])
    .success();
    let notes = env.notes_tip();
    let race = env
        .run(&[
            "race", "wo-01", "-n", "1", "--build", "true", "--score", "echo 1",
        ])
        .code(2);
    let clear = env.run(&["clear", "wo-01"]).code(2);
    let halt = env.run(&["halt", "wo-01", "--reason", "x"]).code(2);
    assert!(race.stderr.contains("is already done"), "{}", race.stderr);
    assert!(
        clear.stderr.contains("is done, not halted"),
        "{}",
        clear.stderr
    );
    assert!(halt.stderr.contains("is done"), "{}", halt.stderr);
    assert_eq!(hint(&race), hint(&clear));
    assert_eq!(hint(&race), hint(&halt));
    let merge = env.git(&["rev-parse", "main"]);
    assert!(
        hint(&race).contains("never runs again")
            && hint(&race).contains(&format!("git revert -m 1 {}", merge.trim())),
        "{}",
        hint(&race)
    );
    assert_eq!(env.notes_tip(), notes);
    assert!(!env.worktree_root().join("race-wo-01-0").exists());
}

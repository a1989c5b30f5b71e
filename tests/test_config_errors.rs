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

fn runs(env: &TestEnv) -> usize {
    std::fs::read_to_string(env.root.join("runs"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn worktree_root(env: &TestEnv) -> std::path::PathBuf {
    env.root.join("repo.arbiter")
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
    assert_eq!(runs(&env), 2);
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
    assert!(!worktree_root(&env).join("race-wo-01-0").exists());
}

//! Real setups, round two: a bare repository with worktrees, shallow
//! clones, `safe.directory`, the index format, encodings; each compared
//! with what stock git does in the same place.

use crate::common::TestEnv;

/// `git clone --bare src b.git; git -C b.git worktree add ../b-main main`:
/// run in `b-main`, a round puts its worktrees beside it, not into the
/// git directory, and lands there.
#[test]
fn a_bare_repository_with_a_worktree_works_beside_that_worktree() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-01", "One", &[], &["one.txt"]);
    env.commit_all("init");
    env.git_in(&env.root, &["clone", "-q", "--bare", "repo", "b.git"]);
    env.git_in(
        &env.root.join("b.git"),
        &["worktree", "add", "-q", "../b-main", "main"],
    );
    let main = env.root.join("b-main");
    let seen = env.root.join("arbiter-repo");
    let build = format!(
        "echo \"$ARBITER_REPO\" > {}; echo 1 > one.txt",
        seen.display()
    );
    let run = env
        .run_in(&main, &["round", "--json", "--build", &build])
        .success();
    assert_eq!(run.json()["done"], serde_json::json!(["wo-01"]));
    assert_eq!(env.git_in(&main, &["show", "main:one.txt"]), "1\n");
    assert_eq!(env.git_in(&main, &["status", "--porcelain"]), "");
    assert!(env.root.join("b-main.arbiter").is_dir());
    assert!(!env.root.join("b.git/worktrees/repo.arbiter").exists());
    // $ARBITER_REPO is the worktree it runs in.
    let seen = std::fs::read_to_string(&seen).expect("seen");
    assert_eq!(seen.trim(), main.display().to_string());
}

/// A repository owned by another user is refused as git refuses it, with
/// git's way out; once `safe.directory` trusts it, it is used with its own
/// configuration (its hooks run).
#[test]
fn a_repository_of_another_user_needs_safe_directory() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-01", "One", &[], &["one.txt"]);
    env.commit_all("init");
    let ran = env.root.join("post-merge-ran");
    env.hook(
        "post-merge",
        &format!("#!/bin/sh\ntouch {}\n", ran.display()),
    );
    let chowned = std::process::Command::new("chown")
        .args(["-R", "nobody"])
        .arg(&env.repo)
        .status()
        .is_ok_and(|s| s.success());
    if !chowned || env.git_try_in(&env.repo, &["status"]).code == 0 {
        eprintln!("skipped: needs root to give the repository to another user");
        return;
    }
    let git = env.git_try_in(&env.repo, &["status"]);
    assert!(git.stderr.contains("dubious ownership"), "{}", git.stderr);
    let notes = env.notes_tip();
    let run = env.run(&["round", "--build", "echo 1 > one.txt"]).code(2);
    insta::assert_snapshot!(run.snapshot(&env), @"
    [stderr]
    error: detected dubious ownership in repository at '$TEST_ENV/repo': it is not owned by the current user
    hint: if you trust it, add an exception as git does: git config --global --add safe.directory $TEST_ENV/repo
    [exit status: 2]
    ");
    assert_eq!(env.notes_tip(), notes, "nothing written");
    env.run(&["status"]).code(2);

    let path = env.repo.canonicalize().expect("canonical");
    env.git_in(
        &env.root,
        &[
            "config",
            "--global",
            "--add",
            "safe.directory",
            path.to_str().expect("utf-8"),
        ],
    );
    env.git(&["status"]);
    env.run(&["round", "--build", "echo 1 > one.txt"]).success();
    assert!(ran.exists(), "the repository's post-merge hook ran");
}

/// Hostile or broken orders are input errors, up front: a NUL or an escape
/// sequence in a title, a control character in a declared path (`lint` and
/// every command that loads the orders say so, exit 2, nothing spent); an
/// escape sequence reaching any output is printed escaped.
#[test]
fn control_characters_in_orders_are_refused_before_anything_runs() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.write(
        "work-orders/nul.md",
        "# Login\u{0}form\n\n## Files to touch\n- a.txt\n\n## Task\nx\n",
    );
    env.write(
        "work-orders/osc.md",
        "# Pwned \u{1b}]0;pwned\u{7}\n\n## Files to touch\n- b.txt\n\n## Task\nx\n",
    );
    env.write(
        "work-orders/path.md",
        "# Path\n\n## Files to touch\n- c\u{1b}[31m.txt\n\n## Task\nx\n",
    );
    env.commit_all("init");
    let lint = env.run(&["lint"]).code(2);
    insta::assert_snapshot!(lint.snapshot(&env), @r"
    $TEST_ENV/repo/work-orders/nul.md:1: error: control character \u{0} in the title
    $TEST_ENV/repo/work-orders/osc.md:1: error: control character \u{1b} in the title
    $TEST_ENV/repo/work-orders/path.md:4: error: declared entry 'c\u{1b}[31m.txt': control character \u{1b} in it
    [stderr]
    arbiter lint errors=3 warnings=0
    [exit status: 2]
    ");
    let round = env.run(&["round", "--build", "true"]).code(2);
    assert!(!round.stderr.contains('\u{1b}'), "{}", round.stderr);
    assert!(
        round.stderr.contains("nul.md:1: control character"),
        "{}",
        round.stderr
    );
    assert!(env.notes_tip().is_none(), "nothing spent");
}

/// `arbiter.retryCap=0` is refused like any count that must be positive.
#[test]
fn a_retry_cap_of_zero_is_an_input_error() {
    let env = TestEnv::new();
    env.work_order("wo-01", "One", &[], &["one.txt"]);
    env.commit_all("init");
    env.git(&["config", "arbiter.retryCap", "0"]);
    let run = env.run(&["round", "--build", "true"]).code(2);
    assert!(
        run.stderr
            .contains("error: config arbiter.retryCap = 0: must be at least 1"),
        "{}",
        run.stderr
    );
    assert!(env.notes_tip().is_none());
}

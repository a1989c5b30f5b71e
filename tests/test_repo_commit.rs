//! Real repositories: git configuration that refuses git-arbiter's own commit
//! of a builder's work (`commit.gpgsign` without a usable key, a failing
//! `prepare-commit-msg` hook), and partial clones whose blobs are not local.
//! Neither is the builder's fault: no attempt is spent on them.

use std::path::{Path, PathBuf};

use crate::common::{Run, TestEnv};

fn repo() -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-01", "One", &[], &["src/one.txt"]);
    env.commit_all("init");
    env
}

/// A build that writes the declared file and counts its runs in `<root>/runs`.
fn counting_build(env: &TestEnv) -> String {
    format!(
        "echo \"$ARBITER_WO ${{ARBITER_INSTANCE:-}}\" >> {}; mkdir -p src && echo built > src/one.txt",
        env.root.join("runs").display()
    )
}

fn attempts(env: &TestEnv, dir: &Path) -> serde_json::Value {
    let status = env.run_in(dir, &["status", "--json"]).success().json();
    status["orders"][0]["attempts"].clone()
}

/// No worktree but the main one, no arbiter branch, fsck clean.
fn nothing_left(env: &TestEnv, dir: &Path) {
    let fsck = env.git_try_in(dir, &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    let worktrees = env.linked_worktrees_in(dir);
    assert!(worktrees.is_empty(), "{worktrees:?}");
    assert_eq!(
        env.git_in(dir, &["branch", "--list", "arbiter/*", "arbiter-race/*"]),
        ""
    );
}

/// The builder's work is in the kept worktree `name`, on its kept branch,
/// staged but not committed; the message names git's cause and the place.
#[track_caller]
fn kept(env: &TestEnv, run: &Run, name: &str, branch: &str, cause: &str) {
    let wt = env
        .worktree_of(branch)
        .unwrap_or_else(|| env.worktree_root().join(name));
    assert!(run.stderr.contains(cause), "{}", run.stderr);
    assert!(
        run.stderr.contains(&wt.display().to_string()),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("no attempt was spent"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("src/one.txt")).expect("the builder's file is kept"),
        "built\n"
    );
    assert_eq!(
        env.git_in(&wt, &["status", "--porcelain"]),
        "A  src/one.txt\n"
    );
    assert_eq!(
        env.git(&["branch", "--list", branch])
            .trim_start_matches(['*', '+', ' ']),
        format!("{branch}\n")
    );
}

/// `commit.gpgsign` with a `gpg.program` that cannot sign used to rerun the
/// builder three times, throw each attempt's work away and halt
/// `retry_cap_exhausted`, the cause only in the log.
#[test]
fn gpgsign_without_a_key_stops_the_round_and_keeps_the_work() {
    let env = repo();
    env.git(&["config", "commit.gpgsign", "true"]);
    env.git(&["config", "gpg.program", "false"]);
    let build = counting_build(&env);
    let run = env.run(&["round", "--build", &build]).code(2);
    assert_eq!(env.runs(), 1, "the round stops after the first build");
    assert_eq!(attempts(&env, &env.repo), 0);
    kept(
        &env,
        &run,
        "wo-01",
        "arbiter/wo-01",
        "gpg failed to sign the data",
    );
    // The record says what was kept where, for the next run replaces it.
    let tip = env.git(&["rev-parse", "arbiter/wo-01"]);
    let log = env.run(&["log", "wo-01"]).success().stdout;
    assert!(log.contains("commit_failed"), "{log}");
    assert!(
        log.contains(&format!("on branch arbiter/wo-01 at {}", tip.trim())),
        "{log}"
    );

    env.git(&["config", "--unset", "commit.gpgsign"]);
    let run = env.run(&["round", "--build", &build]).success();
    assert!(
        run.stderr.contains("removed worktree") && run.stderr.contains(tip.trim()),
        "{}",
        run.stderr
    );
    assert_eq!(env.runs(), 2);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(attempts(&env, &env.repo), 1);
    nothing_left(&env, &env.repo);
}

fn failing_hook(env: &TestEnv) -> PathBuf {
    env.hook(
        "prepare-commit-msg",
        "#!/bin/sh\necho 'prepare-commit-msg: no ticket number in the message' >&2\nexit 1\n",
    )
}

/// A failing `prepare-commit-msg` hook (which `--no-verify` does not skip)
/// is configuration too.
#[test]
fn a_failing_prepare_commit_msg_hook_stops_the_round_and_keeps_the_work() {
    let env = repo();
    let hook = failing_hook(&env);
    let build = counting_build(&env);
    let run = env.run(&["round", "--build", &build]).code(2);
    assert_eq!(env.runs(), 1);
    assert_eq!(attempts(&env, &env.repo), 0);
    kept(
        &env,
        &run,
        "wo-01",
        "arbiter/wo-01",
        "prepare-commit-msg: no ticket number in the message",
    );

    std::fs::remove_file(hook).expect("remove hook");
    env.run(&["round", "--build", &build]).success();
    assert_eq!(env.runs(), 2);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    nothing_left(&env, &env.repo);
}

/// A builder that committed part of its work itself (signing off) leaves a
/// kept branch ahead of the base: still git-arbiter's, so the next round
/// rebuilds the order rather than deferring it as work made by hand.
#[test]
fn a_kept_branch_with_the_builders_own_commits_is_rebuilt() {
    let env = repo();
    env.git(&["config", "commit.gpgsign", "true"]);
    env.git(&["config", "gpg.program", "false"]);
    let build = format!(
        "{}; git add src && git -c commit.gpgsign=false commit -q -m mine && echo more > src/one.txt",
        counting_build(&env)
    );
    env.run(&["round", "--build", &build]).code(2);
    assert_eq!(attempts(&env, &env.repo), 0);
    env.git(&["config", "--unset", "commit.gpgsign"]);
    env.run(&["round", "--build", &build]).success();
    assert_eq!(env.runs(), 2);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(env.git(&["show", "main:src/one.txt"]), "more\n");
    nothing_left(&env, &env.repo);
}

/// The race commits each instance's leftovers the same way, and stops the same way.
#[test]
fn a_race_whose_commit_is_refused_keeps_the_work_and_spends_no_attempt() {
    let env = repo();
    env.git(&["config", "commit.gpgsign", "true"]);
    env.git(&["config", "gpg.program", "false"]);
    let build = counting_build(&env);
    let race = |env: &TestEnv| {
        env.run(&[
            "race", "wo-01", "-n", "2", "--build", &build, "--score", "echo 1",
        ])
    };
    let run = race(&env).code(2);
    assert_eq!(env.runs(), 2, "one build per instance");
    assert_eq!(attempts(&env, &env.repo), 0);
    for k in 0..2 {
        kept(
            &env,
            &run,
            &format!("race-wo-01-{k}"),
            &format!("arbiter-race/wo-01/{k}"),
            "gpg failed to sign the data",
        );
    }

    env.git(&["config", "--unset", "commit.gpgsign"]);
    race(&env).success();
    assert_eq!(env.runs(), 4);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    nothing_left(&env, &env.repo);
}

/// A partial clone `clone` of the test repository whose branch `dev` adds
/// files in subfolders: their blobs are on the promisor remote only. Returns
/// the clone's path.
fn partial_clone(env: &TestEnv) -> PathBuf {
    env.git(&["checkout", "-q", "-b", "dev"]);
    env.write("deep/er/file.txt", "deep\n");
    env.write("other.txt", "other\n");
    env.commit_all("dev");
    env.git(&["checkout", "-q", "main"]);
    env.git(&["config", "uploadpack.allowFilter", "true"]);
    let url = format!("file://{}", env.repo.display());
    env.git_in(
        &env.root,
        &["clone", "-q", "--filter=blob:none", &url, "clone"],
    );
    let clone = env.root.join("clone");
    env.git_in(&clone, &["branch", "-q", "dev", "origin/dev"]);
    let missing = env.git_in(&clone, &["rev-list", "--objects", "--missing=print", "dev"]);
    assert_eq!(missing.matches('?').count(), 2, "{missing}");
    clone
}

/// Creating a worktree in a partial clone failed with exit 128 ("could not
/// be retrieved from object database"). The blobs are fetched first.
#[test]
fn a_partial_clone_fetches_the_blobs_its_worktree_needs() {
    let env = repo();
    let clone = partial_clone(&env);
    // The builder fails unless the checkout wrote the fetched files.
    let build = format!(
        "test \"$(cat deep/er/file.txt other.txt)\" = \"$(printf 'deep\\nother')\" && {}",
        counting_build(&env)
    );
    env.run_in(&clone, &["round", "--into", "dev", "--build", &build])
        .success();
    assert_eq!(env.runs(), 1);
    assert_eq!(env.merges_in(&clone, "dev", "wo-01"), 1);
    let missing = env.git_in(&clone, &["rev-list", "--objects", "--missing=print", "dev"]);
    assert!(!missing.contains('?'), "{missing}");
    nothing_left(&env, &clone);
}

/// With the promisor remote gone, the checkout cannot be made: exit 2 naming
/// it, before any builder runs, no attempt spent, nothing left behind.
#[test]
fn a_partial_clone_whose_promisor_remote_is_gone_is_refused_before_any_attempt() {
    let env = repo();
    let clone = partial_clone(&env);
    let moved = env.root.join("moved-away");
    std::fs::rename(&env.repo, &moved).expect("move the remote away");
    let build = counting_build(&env);
    for args in [
        &["round", "--into", "dev", "--build", &build][..],
        &[
            "race", "wo-01", "-n", "2", "--into", "dev", "--build", &build, "--score", "echo 1",
        ][..],
    ] {
        let run = env.run_in(&clone, args).code(2);
        assert!(
            run.stderr.contains("could not be fetched")
                && run.stderr.contains("remote 'origin'")
                && run
                    .stderr
                    .contains("does not appear to be a git repository"),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(attempts(&env, &clone), 0, "{args:?}");
        assert_eq!(env.runs(), 0, "{args:?}");
        nothing_left(&env, &clone);
    }

    std::fs::rename(&moved, &env.repo).expect("bring the remote back");
    env.run_in(&clone, &["round", "--into", "dev", "--build", &build])
        .success();
    assert_eq!(env.merges_in(&clone, "dev", "wo-01"), 1);
    nothing_left(&env, &clone);
}

/// What a builder leaves is committed without `git commit` when no hook or
/// setting of git's would change that commit: `git write-tree` and a commit
/// written by git-arbiter. It must be byte for byte the commit `git commit`
/// makes (same identity, date, message), which a `post-commit` hook forces
/// here for comparison; HEAD's reflog says `commit: <subject>` either way.
/// Settings that change git's commit (a message encoding; a cleanup mode:
/// with `A` as the comment character, `strip` drops the `Arbiter-` trailer
/// lines) leave it to `git commit`.
#[test]
fn leftovers_are_committed_as_git_commit_commits_them() {
    let commit_of = |hook: bool, config: &[(&str, &str)]| {
        let env = repo();
        for (key, value) in config {
            env.git(&["config", key, value]);
        }
        let ran = env.root.join("post-commit.log");
        if hook {
            env.hook(
                "post-commit",
                &format!("#!/bin/sh\necho ran >> {}\n", ran.display()),
            );
        }
        env.run(&["round", "--build", &counting_build(&env)])
            .success();
        let sha = env.git(&["rev-parse", "main^2"]);
        let pooled = env.worktree_root().join("pool/0");
        let reflog = env.git_in(&pooled, &["reflog", "--format=%gs"]);
        assert!(reflog.contains("commit: wo-01: One\n"), "{reflog}");
        assert_eq!(
            std::fs::read_to_string(&ran).unwrap_or_default(),
            if hook { "ran\n" } else { "" }
        );
        env.fsck();
        (sha, env.git(&["cat-file", "-p", "main^2"]))
    };
    let (by_arbiter, object) = commit_of(false, &[]);
    let (by_git, _) = commit_of(true, &[]);
    assert_eq!(by_arbiter, by_git, "{object}");
    assert!(
        object.contains("\n\nwo-01: One\n\nUncommitted work left by the builder"),
        "{object}"
    );
    // What git's commit shows for each setting: an `encoding` header; no
    // trailer lines after the body.
    let encoded = |object: &str| object.contains("\nencoding ISO-8859-1\n");
    let stripped = |object: &str| object.ends_with("committed by git-arbiter.\n");
    for (config, shows) in [
        (
            &[("i18n.commitEncoding", "ISO-8859-1")][..],
            &encoded as &dyn Fn(&str) -> bool,
        ),
        (
            &[("commit.cleanup", "strip"), ("core.commentChar", "A")][..],
            &stripped,
        ),
    ] {
        let (plain, object) = commit_of(false, config);
        let (by_git, _) = commit_of(true, config);
        assert_eq!(plain, by_git, "{config:?}: {object}");
        assert!(shows(&object), "{config:?}: {object}");
    }
}

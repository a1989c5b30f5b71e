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

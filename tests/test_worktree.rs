//! `git arbiter worktree …` checked against stock git (the oracle).

use std::path::PathBuf;

use crate::common::{poll_until, waits_for_flock, TestEnv};

fn setup() -> TestEnv {
    let env = TestEnv::new();
    env.write("src/a.rs", "a\n");
    env.write("docs/readme.md", "hello\n");
    env.work_order("wo-01", "Login", &[], &["src/a.rs"]);
    env.commit_all("init");
    env
}

fn wt_dir(env: &TestEnv, name: &str) -> PathBuf {
    env.root.join("repo.arbiter").join(name)
}

fn branch_exists(env: &TestEnv, name: &str) -> bool {
    env.git_try_in(
        &env.repo,
        &["rev-parse", "--verify", "-q", &format!("refs/heads/{name}")],
    )
    .code
        == 0
}

/// Stock git's view: (path, branch) of every worktree.
fn porcelain(env: &TestEnv) -> Vec<(String, String)> {
    let text = env.git(&["worktree", "list", "--porcelain"]);
    let mut out = Vec::new();
    let mut path = String::new();
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = p.to_owned();
        } else if let Some(b) = line.strip_prefix("branch ") {
            out.push((path.clone(), b.to_owned()));
        }
    }
    out
}

#[test]
fn add_list_remove_accepted_by_stock_git() {
    let env = setup();
    let run = env.run(&["worktree", "add", "wo-01"]).success();
    insta::assert_snapshot!(run.snapshot(&env), @r#"
    {
      "version": 2,
      "name": "wo-01",
      "path": "$TEST_ENV/repo.arbiter/wo-01",
      "branch": "arbiter/wo-01",
      "base": "[SHA]"
    }
    [stderr]
    arbiter worktree add wo=wo-01 branch=arbiter/wo-01 base=[SHA] path=$TEST_ENV/repo.arbiter/wo-01
    [exit status: 0]
    "#);
    let wt = wt_dir(&env, "wo-01");
    assert!(porcelain(&env).contains(&(
        wt.display().to_string(),
        "refs/heads/arbiter/wo-01".to_owned()
    )));
    assert_eq!(env.git_in(&wt, &["status", "--porcelain"]), "");
    assert_eq!(
        env.git_in(&wt, &["rev-parse", "HEAD"]),
        env.git(&["rev-parse", "main"])
    );
    assert_eq!(std::fs::read_to_string(wt.join("src/a.rs")).unwrap(), "a\n");
    // Never inside .git/.
    assert!(!wt.starts_with(env.repo.join(".git")));

    insta::assert_snapshot!(env.run(&["worktree", "list"]).snapshot(&env), @r"
    wo-01                arbiter/wo-01                [SHORT] $TEST_ENV/repo.arbiter/wo-01
    [stderr]
    [exit status: 0]
    ");
    let json = env.run(&["worktree", "list", "--json"]).success().json();
    assert_eq!(json["version"], 2);
    assert_eq!(json["worktrees"][0]["name"], "wo-01");
    assert_eq!(json["worktrees"][0]["branch"], "arbiter/wo-01");
    assert_eq!(json["worktrees"][0]["prunable"], false);

    // A builder leaves untracked files and a commit; remove discards the worktree and the branch.
    std::fs::write(wt.join("untracked.txt"), "junk").unwrap();
    env.run(&["worktree", "remove", "wo-01"]).success();
    assert!(!wt.exists());
    assert_eq!(porcelain(&env).len(), 1);
    assert!(!branch_exists(&env, "arbiter/wo-01"));
    // Idempotent.
    env.run(&["worktree", "remove", "wo-01"]).success();
    env.git(&["worktree", "prune"]);
    env.fsck();
}

#[test]
fn base_and_into_choose_the_start() {
    let env = setup();
    let first = env.git(&["rev-parse", "HEAD"]).trim().to_owned();
    env.git(&["switch", "-q", "-c", "feature"]);
    env.write("f.txt", "f\n");
    let feature = env.commit_all("feature");
    env.git(&["switch", "-q", "main"]);
    env.run(&["worktree", "add", "wo-01", "--into", "feature"])
        .success();
    assert_eq!(env.git(&["rev-parse", "arbiter/wo-01"]).trim(), feature);
    env.run(&["worktree", "add", "wo-02", "--base", "main"])
        .success();
    assert_eq!(env.git(&["rev-parse", "arbiter/wo-02"]).trim(), first);
    env.fsck();
}

#[test]
fn stock_git_removes_and_prunes_them() {
    let env = setup();
    env.run(&["worktree", "add", "wo-01"]).success();
    env.run(&["worktree", "add", "wo-02"]).success();
    env.git(&[
        "worktree",
        "remove",
        wt_dir(&env, "wo-01").to_str().unwrap(),
    ]);
    std::fs::remove_dir_all(wt_dir(&env, "wo-02")).unwrap();
    let json = env.run(&["worktree", "list", "--json"]).success().json();
    assert_eq!(json["worktrees"][0]["prunable"], true);
    env.git(&["worktree", "prune"]);
    assert_eq!(porcelain(&env).len(), 1);
    // The branches are still there; remove deletes them without a worktree.
    env.run(&["worktree", "remove", "wo-02"]).success();
    assert!(!branch_exists(&env, "arbiter/wo-02"));
    env.fsck();
}

#[test]
fn worktree_dir_config_is_honoured() {
    let env = setup();
    env.git(&["config", "arbiter.worktreeDir", "../trees"]);
    env.run(&["worktree", "add", "wo-01"]).success();
    let wt = env.root.join("trees/wo-01");
    assert_eq!(env.git_in(&wt, &["status", "--porcelain"]), "");
    env.git(&["config", "arbiter.worktreeDir", ".git/trees"]);
    let run = env.run(&["worktree", "add", "wo-02"]).code(2);
    assert!(
        run.stderr.contains("inside the git directory"),
        "{}",
        run.stderr
    );
    assert!(!branch_exists(&env, "arbiter/wo-02"));
}

/// Every refusal exits 2 and leaves no branch, registration or folder behind.
#[test]
fn failures_exit_2_and_leave_nothing() {
    let env = setup();
    let root = env.root.join("repo.arbiter");
    std::fs::create_dir_all(root.join("wo-02")).unwrap();
    std::fs::write(root.join("wo-02/keep.txt"), "user data").unwrap();
    std::os::unix::fs::symlink(env.root.join("elsewhere"), root.join("wo-03")).unwrap();
    env.git(&["branch", "arbiter/wo-04"]);

    let cases: &[(&[&str], &str)] = &[
        (&["worktree", "add", "wo-02"], "already exists"),
        (&["worktree", "add", "wo-03"], "is a symlink"),
        (
            &["worktree", "add", "wo-04"],
            "branch 'arbiter/wo-04' already exists",
        ),
        (&["worktree", "add", "../evil"], "invalid work order id"),
        (
            &["worktree", "add", "wo-05", "--base", "no-such-rev"],
            "does not name a commit",
        ),
        (
            &["worktree", "add", "wo-06", "--into", "no-such-branch"],
            "does not exist",
        ),
    ];
    for (args, message) in cases {
        let run = env.run(args).code(2);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("hint:"), "{args:?}: {}", run.stderr);
    }
    for id in ["wo-02", "wo-03", "wo-05", "wo-06"] {
        assert!(!branch_exists(&env, &format!("arbiter/{id}")), "{id}");
    }
    assert_eq!(
        std::fs::read_to_string(root.join("wo-02/keep.txt")).unwrap(),
        "user data"
    );
    assert!(!env.root.join("elsewhere").exists());
    assert!(!root.join("wo-05").exists());
    assert_eq!(porcelain(&env).len(), 1);
    env.fsck();
}

/// add_worktree failing after the branch was made must delete the branch again.
#[test]
fn failed_registration_deletes_the_new_branch() {
    let env = setup();
    // A file where git keeps worktree registrations makes registration fail.
    std::fs::write(env.repo.join(".git/worktrees"), "not a directory").unwrap();
    let run = env.run(&["worktree", "add", "wo-01"]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(!branch_exists(&env, "arbiter/wo-01"));
    assert!(!wt_dir(&env, "wo-01").exists());
    std::fs::remove_file(env.repo.join(".git/worktrees")).unwrap();
    env.run(&["worktree", "add", "wo-01"]).success();
}

#[test]
fn remove_refuses_a_branch_checked_out_elsewhere() {
    let env = setup();
    env.git(&["branch", "arbiter/wo-01"]);
    env.git(&["switch", "-q", "arbiter/wo-01"]);
    let run = env.run(&["worktree", "remove", "wo-01"]).code(2);
    assert!(run.stderr.contains("is checked out in"), "{}", run.stderr);
    assert!(branch_exists(&env, "arbiter/wo-01"));
}

#[test]
fn remove_refuses_a_branch_checked_out_in_another_linked_worktree() {
    let env = setup();
    let mine = env.root.join("mine");
    env.git_worktree_add("arbiter/wo-01", &mine);
    let run = env.run(&["worktree", "remove", "wo-01"]).code(2);
    assert!(
        run.stderr
            .contains(&format!("is checked out in {}", mine.display())),
        "{}",
        run.stderr
    );
    assert!(branch_exists(&env, "arbiter/wo-01"));
    assert!(mine.join(".git").exists());
}

#[test]
fn cleanup_stale_removes_leftovers_and_keeps_halted_work() {
    use git_arbiter::state::{Status, Store};
    let env = setup();
    env.work_order("wo-02", "Halted", &[], &["b.txt"]);
    env.work_order("wo-03", "Live", &[], &["c.txt"]);
    env.commit_all("orders");
    for id in ["wo-01", "wo-02", "wo-03"] {
        env.run(&["worktree", "add", id]).success();
    }
    env.git(&["branch", "arbiter/unknown"]);
    env.run(&["halt", "wo-02", "--reason", "blocking_critique"])
        .success();

    let ctx = env.context();
    let store = Store::new(&ctx.repo, 3);
    store
        .transact(
            "test: wo-03 in progress",
            |txn| -> Result<(), git_arbiter::Error> {
                let mut r = txn.record("wo-03", false)?;
                r.status = Status::InProgress;
                r.owner = Some("live-conductor".into());
                txn.put(r);
                Ok(())
            },
        )
        .unwrap();
    let orders = ctx.load_orders(None).unwrap();
    let is_live = |r: &git_arbiter::state::Record| r.owner.as_deref() == Some("live-conductor");
    let main = ctx.repo.rev_parse_single("main").unwrap().detach();
    let report = git_arbiter::run::worktree::cleanup_stale(
        &ctx,
        &store,
        &orders,
        Some(main),
        &is_live,
        true,
    )
    .unwrap();
    let report = env.redact(&report.join("\n"));
    insta::assert_snapshot!(report, @r"
    kept branch arbiter/unknown: no work order 'unknown' is known
    removed worktree $TEST_ENV/repo.arbiter/wo-01 and branch arbiter/wo-01 (at [SHA])
    kept worktree $TEST_ENV/repo.arbiter/wo-02 and branch arbiter/wo-02: work order wo-02 is halted (blocking_critique)
    ");
    assert!(!branch_exists(&env, "arbiter/wo-01"));
    assert!(branch_exists(&env, "arbiter/wo-02"));
    assert!(branch_exists(&env, "arbiter/wo-03"));
    assert!(wt_dir(&env, "wo-03").exists());
    env.fsck();
}

/// Creating and removing worktrees take turns across processes (an flock on
/// `.git/arbiter/worktrees.lock`), so one conductor's leftover cleanup never
/// removes a worktree another is creating or removing at that moment.
#[test]
fn add_and_remove_wait_for_the_worktree_turn() {
    let env = setup();
    std::fs::create_dir_all(env.repo.join(".git/arbiter")).expect("mkdir");
    let turn = env.repo.join(".git/arbiter/worktrees.lock");
    let held = std::fs::File::create(&turn).expect("lock file");
    fs4::FileExt::lock(&held).expect("lock");
    for (args, exists_after) in [
        (&["worktree", "add", "wo-01"][..], true),
        (&["worktree", "remove", "wo-01"][..], false),
    ] {
        let mut child = env.command_in(&env.repo, args).spawn().expect("spawn");
        // Seen waiting for the turn (the kernel lists it as a blocked
        // waiter of the lock), not merely not finished yet.
        poll_until(&format!("{args:?} waits for the worktree turn"), || {
            assert!(
                child.try_wait().expect("try_wait").is_none(),
                "{args:?} went ahead while another process had the turn"
            );
            waits_for_flock(child.id(), &turn)
        });
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "{args:?} went ahead while another process had the turn"
        );
        assert_eq!(wt_dir(&env, "wo-01").exists(), !exists_after, "{args:?}");
        fs4::FileExt::unlock(&held).expect("unlock");
        assert!(child.wait().expect("wait").success(), "{args:?}");
        assert_eq!(wt_dir(&env, "wo-01").exists(), exists_after, "{args:?}");
        fs4::FileExt::lock(&held).expect("lock again");
    }
}

/// A run killed while `add` registered a worktree but before it wrote the
/// `.git` file leaves a registration stock git calls prunable. Removing it
/// (as crash cleanup does on every round) must not fail forever.
#[test]
fn a_half_made_worktree_is_removed_not_wedged() {
    let env = setup();
    env.run(&["worktree", "add", "wo-01"]).success();
    std::fs::remove_file(wt_dir(&env, "wo-01").join(".git")).expect("rm .git");
    assert!(env.git(&["worktree", "list"]).contains("prunable"));
    env.run(&["worktree", "remove", "wo-01"]).success();
    assert!(!wt_dir(&env, "wo-01").exists());
    assert!(!branch_exists(&env, "arbiter/wo-01"));
    assert_eq!(porcelain(&env).len(), 1, "only the main worktree is left");
    env.fsck();

    env.run(&["worktree", "add", "wo-01"]).success();
    std::fs::remove_file(wt_dir(&env, "wo-01").join(".git")).expect("rm .git");
    env.run(&["round", "--build", "echo changed > src/a.rs"])
        .success();
    assert_eq!(env.git(&["show", "main:src/a.rs"]), "changed\n");
}

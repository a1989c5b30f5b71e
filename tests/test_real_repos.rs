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
      hint: write the title as plain text
    $TEST_ENV/repo/work-orders/osc.md:1: error: control character \u{1b} in the title
      hint: write the title as plain text
    $TEST_ENV/repo/work-orders/path.md:4: error: declared entry 'c\u{1b}[31m.txt': control character \u{1b} in it
      hint: declare repo-relative paths or globs such as 'src/ui/**'
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

/// A repository where `wo-1` landed and `wo-2` never ran, with history
/// after both: what a shallow clone of it cannot see.
fn landed_then_more() -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-1", "One", &[], &["one.txt"]);
    env.work_order("wo-2", "Two", &[], &["two.txt"]);
    env.commit_all("init");
    env.run(&[
        "round",
        "--once",
        "--max",
        "1",
        "--max-total",
        "1",
        "--build",
        "echo 1 > one.txt",
    ])
    .success();
    for i in 0..3 {
        env.write("README", &format!("base {i}\n"));
        env.commit_all(&format!("more {i}"));
    }
    env
}

fn shallow_clone(env: &TestEnv, name: &str) -> std::path::PathBuf {
    let url = format!("file://{}", env.repo.display());
    env.git_in(&env.root, &["clone", "-q", "--depth", "1", &url, name]);
    env.root.join(name)
}

const BUILD_OWN: &str =
    "echo $ARBITER_WO > $(echo $ARBITER_WO | sed 's/wo-1/one/;s/wo-2/two/;s/wo-3/three/').txt";

/// Issue 32: a round in `git clone --depth 1` exited 128 reading a commit
/// beyond the shallow boundary. It runs; an order with no record whose
/// file is older than the history (it may have landed there) is not built,
/// said once, so nothing lands twice; an order written since runs.
#[test]
fn a_shallow_clone_runs_new_orders_and_never_lands_an_older_one_twice() {
    let env = landed_then_more();
    let clone = shallow_clone(&env, "shallow");
    let start = std::fs::read_to_string(clone.join(".git/shallow")).expect("shallow file");
    let start = start.trim();
    std::fs::write(
        clone.join("work-orders/wo-3.md"),
        "# Three\n\n## Files to touch\n- three.txt\n\n## Task\nDo three.\n",
    )
    .expect("write wo-3");
    env.git_in(&clone, &["add", "-A"]);
    env.commit_in(&clone, "wo-3");

    let status = env.run_in(&clone, &["status", "--json"]).success().json();
    let unknown: Vec<(&str, &str)> = status["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .filter_map(|o| Some((o["id"].as_str()?, o["may_have_landed_before"].as_str()?)))
        .collect();
    assert_eq!(unknown, [("wo-1", start), ("wo-2", start)]);
    let text = env.run_in(&clone, &["status"]).success();
    assert!(text.stdout.contains("ready (landed?)"), "{}", text.stdout);
    assert_eq!(text.stdout.matches("this clone is shallow").count(), 1);

    let batch = env.run_in(&clone, &["batch", "--json"]).success().json();
    let reasons: Vec<(&str, &str)> = batch["deferred"]
        .as_array()
        .expect("deferred")
        .iter()
        .map(|d| (d["id"].as_str().unwrap(), d["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [("wo-1", "shallow_history"), ("wo-2", "shallow_history")]
    );

    let run = env
        .run_in(&clone, &["round", "--json", "--build", BUILD_OWN])
        .success();
    assert_eq!(run.json()["done"], serde_json::json!(["wo-3"]));
    assert_eq!(
        run.stderr.matches("arbiter shallow ").count(),
        1,
        "said once: {}",
        run.stderr
    );
    assert!(run.stderr.contains("orders=wo-1,wo-2"), "{}", run.stderr);
    assert_eq!(
        env.merges_in(&clone, "main", "wo-1"),
        0,
        "never landed twice"
    );
    assert_eq!(env.merges_in(&clone, "main", "wo-3"), 1);
    let doctor = env.run_in(&clone, &["doctor", "--json"]).code(1).json();
    assert!(
        doctor["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["kind"] == "shallow_history" && !f["fixable"].as_bool().unwrap()),
        "{doctor}"
    );
    let race = env
        .run_in(
            &clone,
            &[
                "race", "wo-1", "-n", "2", "--score", "echo 1", "--build", "true",
            ],
        )
        .code(2);
    assert!(
        race.stderr.contains("may have landed before"),
        "{}",
        race.stderr
    );
    env.git_in(&clone, &["fsck", "--strict", "--no-progress"]);
}

/// With the records fetched, an order that landed beyond the boundary is
/// `done` and `show` says its merge is not here rather than failing; once
/// the history reaches back past the order files, the order that never ran
/// is built, and the landed one is still not built again.
#[test]
fn a_shallow_clone_learns_from_the_notes_and_a_deeper_history() {
    let env = landed_then_more();
    let clone = shallow_clone(&env, "shallow");
    env.git_in(
        &clone,
        &[
            "fetch",
            "-q",
            "origin",
            "refs/notes/arbiter:refs/notes/arbiter",
        ],
    );
    let show = env
        .run_in(&clone, &["show", "--json", "wo-1"])
        .success()
        .json();
    assert_eq!(show["status"], "done");
    let merge = env.rev("main^{/Merge wo-1}");
    assert_eq!(show["missing_commit"].as_str(), Some(merge.as_str()));
    let text = env.run_in(&clone, &["show", "wo-1"]).success();
    assert!(
        text.stdout.contains("not in this repository"),
        "{}",
        text.stdout
    );

    let run = env
        .run_in(&clone, &["round", "--json", "--build", BUILD_OWN])
        .success();
    assert_eq!(
        run.json()["done"],
        serde_json::json!(["wo-1"]),
        "wo-2 waits: {}",
        run.stderr
    );
    assert_eq!(env.merges_in(&clone, "main", "wo-2"), 0);

    env.git_in(&clone, &["fetch", "-q", "--unshallow"]);
    let run = env
        .run_in(&clone, &["round", "--json", "--build", BUILD_OWN])
        .success();
    assert_eq!(run.json()["done"], serde_json::json!(["wo-1", "wo-2"]));
    assert!(!run.stderr.contains("arbiter shallow"), "{}", run.stderr);
    assert_eq!(env.merges_in(&clone, "main", "wo-2"), 1);
    assert_eq!(env.merges_in(&clone, "main", "wo-1"), 1);
    env.git_in(&clone, &["fsck", "--strict", "--no-progress"]);
}

/// `--depth 1` at an order's merge: the merge is here, its first parent
/// is not; `show` says so instead of failing, and the order is `done`.
#[test]
fn a_shallow_clone_at_a_merge_shows_what_it_can() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-1", "One", &[], &["one.txt"]);
    env.commit_all("init");
    env.run(&["round", "--build", "echo 1 > one.txt"]).success();
    let clone = shallow_clone(&env, "shallow");
    env.git_in(
        &clone,
        &[
            "fetch",
            "-q",
            "origin",
            "refs/notes/arbiter:refs/notes/arbiter",
        ],
    );
    let show = env
        .run_in(&clone, &["show", "--json", "wo-1"])
        .success()
        .json();
    assert_eq!(show["status"], "done");
    assert_eq!(
        show["missing_commit"].as_str(),
        Some(env.rev("main^1").as_str())
    );
    // Without the notes the merge itself says it landed.
    let bare = shallow_clone(&env, "no-notes");
    let status = env.run_in(&bare, &["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "done");
}

/// Issue 32: a landing rewrote an `index.version 4` index as version 2 and
/// dropped its cache tree, so the user's next `git commit` hashed every
/// tree again. The version stays, and the cache tree is the one git makes
/// for the new tip (`git read-tree HEAD`).
#[test]
fn a_landing_keeps_the_index_version_and_a_valid_cache_tree() {
    let env = TestEnv::new();
    env.git(&["config", "index.version", "4"]);
    env.write("src/lib/a.rs", "a\n");
    env.write("src/lib/b.rs", "b\n");
    env.write("docs/x.md", "x\n");
    env.work_order("wo-1", "One", &[], &["src/lib/new.rs"]);
    env.work_order("wo-2", "Two", &[], &["docs/x.md"]);
    env.commit_all("init");
    let index = env.repo.join(".git/index");
    let read = |path: &std::path::Path| {
        gix::index::File::at(path, gix::hash::Kind::Sha1, false, Default::default())
            .expect("read index")
    };
    assert_eq!(read(&index).version(), gix::index::Version::V4);
    assert!(read(&index).tree().is_some());
    env.run(&[
        "round",
        "--build",
        "case $ARBITER_WO in wo-1) echo n > src/lib/new.rs;; *) echo y >> docs/x.md;; esac",
    ])
    .success();
    assert_eq!(read(&index).version(), gix::index::Version::V4);
    let primed = env.root.join("primed-index");
    std::fs::copy(&index, &primed).expect("copy");
    let status = std::process::Command::new("git")
        .args(["read-tree", "HEAD"])
        .current_dir(&env.repo)
        .env("GIT_INDEX_FILE", &primed)
        .status()
        .expect("git read-tree");
    assert!(status.success());
    let ours = read(&index);
    assert!(
        ours.tree().is_some_and(|t| t.num_entries.is_some()),
        "valid"
    );
    assert_eq!(ours.tree(), read(&primed).tree());
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    env.fsck();
}

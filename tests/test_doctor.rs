//! `git arbiter doctor [--fix]`: each problem is made with stock git or plain
//! files, reported (exit 1), repaired by `--fix` when it is provably
//! git-arbiter's, and gone on the next run (exit 0); nothing else is touched.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::common::{Run, TestEnv};

fn setup() -> TestEnv {
    let env = TestEnv::new();
    env.write("src/a.rs", "a\n");
    env.work_order("wo-01", "Login", &[], &["src/a.rs"]);
    env.work_order("wo-02", "Logout", &[], &["src/b.rs"]);
    env.commit_all("init");
    env
}

/// A file as a killed process leaves it, last written an hour ago.
fn old_file(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
    age(path, Duration::from_secs(3600));
}

fn age(path: &Path, by: Duration) {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    file.set_modified(SystemTime::now() - by)
        .expect("set mtime");
}

fn git_dir(env: &TestEnv) -> PathBuf {
    env.repo.join(".git")
}

fn kinds(run: &Run) -> Vec<(String, String, bool, bool)> {
    let json = run.json();
    assert_eq!(json["version"], 2);
    json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().expect("kind").to_owned(),
                f["path"].as_str().expect("path").to_owned(),
                f["fixable"].as_bool().expect("fixable"),
                f["fixed"].as_bool().expect("fixed"),
            )
        })
        .collect()
}

fn branch_exists(env: &TestEnv, name: &str) -> bool {
    env.git_try_in(
        &env.repo,
        &["rev-parse", "--verify", "-q", &format!("refs/heads/{name}")],
    )
    .code
        == 0
}

#[test]
fn a_healthy_repository_has_no_findings() {
    let env = setup();
    let run = env.run(&["doctor"]).success();
    let text = run.snapshot(&env);
    let version = env.git(&["--version"]);
    let text = text.replace(version.trim().trim_start_matches("git version "), "[GIT]");
    insta::assert_snapshot!(text, @r"
    git version: [GIT]
    integration branch: main
    slot directory: $TEST_ENV/slots

    no problems found
    [stderr]
    [exit status: 0]
    ");
    let json = env.run(&["doctor", "--json"]).success().json();
    assert_eq!(json["version"], 2);
    assert_eq!(json["remaining"], 0);
    assert!(json["git_version"].as_str().is_some_and(|v| !v.is_empty()));
}

#[test]
fn stale_locks_on_arbiter_refs_are_removed_others_only_reported() {
    let env = setup();
    let main = env.git(&["rev-parse", "HEAD"]);
    env.git(&["branch", "arbiter/wo-01"]);
    // Locked by a writer killed between taking the lock and renaming it.
    let gd = git_dir(&env);
    let ours = gd.join("refs/heads/arbiter/wo-01.lock");
    let notes = gd.join("refs/notes/arbiter.lock");
    let theirs = gd.join("refs/heads/main.lock");
    let index = gd.join("index.lock");
    let packed = gd.join("packed-refs.lock");
    for lock in [&ours, &notes, &theirs, &index, &packed] {
        old_file(lock, &main);
    }
    // A fresh one may be in use by a writer right now.
    let young = gd.join("refs/heads/arbiter/wo-02.lock");
    std::fs::write(&young, &main).expect("young lock");
    let run = env.run(&["doctor"]).code(1);
    insta::assert_snapshot!(env.redact(&run.stdout.replace(env.git(&["--version"]).trim().trim_start_matches("git version "), "[GIT]")), @r"
    git version: [GIT]
    integration branch: main
    slot directory: $TEST_ENV/slots

    locks:
      $TEST_ENV/repo/.git/packed-refs.lock: lock on packed-refs, 1h old [not fixed]
        hint: if no git process is running, remove $TEST_ENV/repo/.git/packed-refs.lock
      $TEST_ENV/repo/.git/refs/heads/arbiter/wo-01.lock: lock on git-arbiter's ref refs/heads/arbiter/wo-01, 1h old [fixable]
      $TEST_ENV/repo/.git/refs/heads/arbiter/wo-02.lock: lock on git-arbiter's ref refs/heads/arbiter/wo-02, 0s old [not fixed]
        hint: it may be in use right now: run doctor again in a few seconds
      $TEST_ENV/repo/.git/refs/heads/main.lock: lock on the integration branch refs/heads/main, 1h old [not fixed]
        hint: if no git process is running, remove $TEST_ENV/repo/.git/refs/heads/main.lock
      $TEST_ENV/repo/.git/refs/notes/arbiter.lock: lock on git-arbiter's ref refs/notes/arbiter, 1h old [fixable]
      $TEST_ENV/repo/.git/index.lock: index lock of the worktree $TEST_ENV/repo, 1h old [not fixed]
        hint: if no git process is running in $TEST_ENV/repo, remove $TEST_ENV/repo/.git/index.lock

    worktrees and branches:
      refs/heads/arbiter/wo-01: branch: work order wo-01 has no record [fixable]

    7 problems found, 3 fixable with 'git arbiter doctor --fix'
    ");

    let run = env.run(&["doctor", "--fix", "--json"]).code(1);
    let found = kinds(&run);
    let fixed: Vec<&str> = found.iter().filter(|f| f.3).map(|f| f.1.as_str()).collect();
    assert_eq!(
        fixed,
        [
            ours.display().to_string().as_str(),
            notes.display().to_string().as_str(),
        ]
    );
    // Deleting a branch takes packed-refs.lock too: it waits for the human.
    assert!(found.contains(&(
        "leftover_branch".into(),
        "refs/heads/arbiter/wo-01".into(),
        true,
        false
    )));
    let actions = run.json()["actions"].to_string();
    assert!(actions.contains("stopped removing leftovers"), "{actions}");
    assert!(!ours.exists() && !notes.exists());
    // Not ours, or maybe in use: kept.
    for kept in [&theirs, &index, &packed, &young] {
        assert!(kept.exists(), "{} was removed", kept.display());
    }
    assert_eq!(env.git(&["rev-parse", "main"]), main);

    for lock in [&theirs, &index, &packed] {
        std::fs::remove_file(lock).expect("remove");
    }
    age(&young, Duration::from_secs(60));
    env.run(&["doctor", "--fix"]).success();
    assert!(!young.exists());
    assert!(!branch_exists(&env, "arbiter/wo-01"));
    env.run(&["doctor"]).success();
    env.fsck();
}

#[test]
fn a_live_conductor_keeps_the_locks_of_its_work_and_of_the_notes() {
    let env = setup();
    env.write_record(
        "wo-01",
        r#"{"version":1,"wo":"wo-01","status":"in_progress","halted":false,"halt_reason":null,"attempts":1,"cap":3,"checkpoint_before":null,"checkpoint_after":null,"owner":"c1"}"#,
    );
    let gd = git_dir(&env);
    let its = gd.join("refs/heads/arbiter/wo-01.lock");
    let other = gd.join("refs/heads/arbiter/wo-02.lock");
    let notes = gd.join("refs/notes/arbiter.lock");
    for lock in [&its, &other, &notes] {
        old_file(lock, "0000000000000000000000000000000000000000\n");
    }
    // A conductor is live while it holds the flock on its file.
    let conductors = gd.join("arbiter/conductors");
    std::fs::create_dir_all(&conductors).expect("mkdir");
    // The shell becomes `sleep`, which keeps the locked descriptor: killing it frees the lock.
    let locked = env.root.join("locked");
    let mut holder = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 9>\"$0\"; flock 9; touch \"$1\"; exec sleep 60")
        .arg(conductors.join("c1.lock"))
        .arg(&locked)
        .spawn()
        .expect("flock");
    crate::common::wait_for(&locked);
    let run = env.run(&["doctor", "--fix", "--json"]).code(1);
    let json = run.json();
    for kept in [&its, &notes] {
        let finding = json["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|f| f["path"] == kept.display().to_string())
            .expect("reported");
        assert_eq!(finding["kind"], "ref_lock");
        assert_eq!(finding["fixable"], false);
        assert!(finding["hint"]
            .as_str()
            .expect("hint")
            .contains("a conductor is running (c1)"));
        assert!(kept.exists());
    }
    // wo-02 is no live conductor's work: its branch's lock is a leftover.
    assert!(!other.exists());
    holder.kill().expect("kill");
    holder.wait().expect("wait");
    env.run(&["doctor", "--fix"]).success();
    assert!(!its.exists() && !notes.exists());
}

#[test]
fn initializing_lock_of_a_killed_add_is_cleared_and_its_worktree_removed() {
    let env = setup();
    let wt = env.root.join("repo.arbiter/wo-01");
    let other = env.root.join("elsewhere");
    env.git_worktree_add("arbiter/wo-01", &wt);
    env.git_worktree_add("mine", &other);
    // What `add` writes first and removes last.
    let ours = git_dir(&env).join("worktrees/wo-01/locked");
    let theirs = git_dir(&env).join("worktrees/elsewhere/locked");
    old_file(&ours, "initializing\n");
    old_file(&theirs, "initializing\n");

    let run = env.run(&["doctor", "--json"]).code(1);
    let found = kinds(&run);
    assert!(found.contains(&(
        "worktree_lock".into(),
        ours.display().to_string(),
        true,
        false
    )));
    assert!(found.contains(&(
        "worktree_lock".into(),
        theirs.display().to_string(),
        false,
        false
    )));
    assert!(found.contains(&(
        "leftover_worktree".into(),
        wt.display().to_string(),
        true,
        false
    )));

    let run = env.run(&["doctor", "--fix"]).code(1);
    assert!(run.stderr.contains("removed worktree"), "{}", run.stderr);
    assert!(!wt.exists());
    assert!(!branch_exists(&env, "arbiter/wo-01"));
    // Not arbiter's: reported, kept.
    assert!(theirs.exists() && other.exists() && branch_exists(&env, "mine"));
    assert!(run.stdout.contains("git worktree unlock"), "{}", run.stdout);

    env.git(&["worktree", "unlock", other.to_str().expect("utf-8")]);
    env.run(&["doctor"]).success();
}

#[test]
fn leftover_branches_are_removed_unless_halted_or_unknown() {
    let env = setup();
    env.work_order("wo-03", "Halted", &[], &["src/c.rs"]);
    env.commit_all("wo-03");
    for b in [
        "arbiter/wo-01",
        "arbiter/ghost",
        "arbiter-race/wo-02/1",
        "arbiter/wo-03",
    ] {
        env.git(&["branch", b]);
    }
    env.write_record(
        "wo-03",
        r#"{"version":1,"wo":"wo-03","status":"needs_rework","halted":true,"halt_reason":"merge_conflict","attempts":1,"cap":3,"checkpoint_before":null,"checkpoint_after":null}"#,
    );
    let run = env.run(&["doctor", "--json"]).code(1);
    let found = kinds(&run);
    assert_eq!(
        found,
        [
            (
                "leftover_branch".into(),
                "refs/heads/arbiter/ghost".into(),
                false,
                false
            ),
            (
                "leftover_branch".into(),
                "refs/heads/arbiter-race/wo-02/1".into(),
                true,
                false
            ),
            (
                "leftover_branch".into(),
                "refs/heads/arbiter/wo-01".into(),
                true,
                false
            ),
        ]
    );
    let run = env.run(&["doctor", "--fix"]).code(1);
    assert!(!branch_exists(&env, "arbiter/wo-01"));
    assert!(!branch_exists(&env, "arbiter-race/wo-02/1"));
    // Unknown order: reported with what to do; halted: kept for inspection.
    assert!(branch_exists(&env, "arbiter/ghost") && branch_exists(&env, "arbiter/wo-03"));
    assert!(
        run.stdout.contains("git branch -D arbiter/ghost"),
        "{}",
        run.stdout
    );
    env.git(&["branch", "-D", "arbiter/ghost"]);
    env.run(&["doctor"]).success();
}

#[test]
fn a_fresh_clone_of_a_landed_order_is_recorded_done() {
    let env = setup();
    let merge = env.landed_merge("wo-01", 1, "src/a.rs");
    let clone = env.root.join("clone");
    env.git_in(&env.root, &["clone", "-q", "repo", "clone"]);
    let run = env.run_in(&clone, &["doctor", "--json"]).code(1);
    let found = kinds(&run);
    assert_eq!(
        found,
        [
            (
                "landed_not_done".into(),
                clone.join("work-orders/wo-01.md").display().to_string(),
                true,
                false
            ),
            (
                "notes_not_fetched".into(),
                "remote.origin.fetch".into(),
                false,
                false
            ),
        ]
    );
    // What remains is advice: exit 0.
    let run = env.run_in(&clone, &["doctor", "--fix"]).success();
    assert!(
        run.stderr.contains("recorded work order wo-01 as done"),
        "{}",
        run.stderr
    );
    let status = env.run_in(&clone, &["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["id"], "wo-01");
    assert_eq!(status["orders"][0]["status"], "done");
    assert_eq!(status["orders"][0]["checkpoint_after"], merge.as_str());
    let log = env.run_in(&clone, &["log", "--json"]).success().json();
    assert!(crate::common::event_names(&log).contains(&"reconstructed_done"));
    // The note left says what to add; doing so ends it.
    assert!(run
        .stdout
        .contains("+refs/notes/arbiter:refs/notes/remotes/origin/arbiter"));
    env.git_in(
        &clone,
        &[
            "config",
            "--add",
            "remote.origin.fetch",
            "+refs/notes/arbiter:refs/notes/remotes/origin/arbiter",
        ],
    );
    env.run_in(&clone, &["doctor"]).success();
    env.git_try_in(&clone, &["fsck", "--strict", "--no-dangling"])
        .code(0);
}

#[test]
fn a_record_the_branch_contradicts_is_set_done() {
    let env = setup();
    let merge = env.landed_merge("wo-01", 1, "src/a.rs");
    env.write_record(
        "wo-01",
        r#"{"version":1,"wo":"wo-01","status":"needs_rework","halted":false,"halt_reason":null,"attempts":1,"cap":3,"checkpoint_before":null,"checkpoint_after":null}"#,
    );
    let run = env.run(&["doctor"]).code(1);
    assert!(run.stdout.contains(&format!(
        "work order wo-01 landed on main in {merge} but its record says needs_rework"
    )));
    env.run(&["doctor", "--fix"]).success();
    env.run(&["doctor"]).success();
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "done");
}

#[test]
fn a_fetch_refspec_that_overwrites_local_notes_is_reported() {
    let env = setup();
    env.git(&["remote", "add", "origin", "https://example.com/x.git"]);
    env.git(&[
        "config",
        "--add",
        "remote.origin.fetch",
        "+refs/notes/*:refs/notes/*",
    ]);
    let json = env.run(&["doctor", "--json"]).code(1).json();
    assert_eq!(json["findings"][0]["kind"], "notes_fetch_overwrites");
    env.git(&["config", "--unset", "remote.origin.fetch", "notes"]);
    env.git(&[
        "config",
        "--add",
        "remote.origin.fetch",
        "+refs/notes/arbiter:refs/notes/remotes/origin/arbiter",
    ]);
    env.run(&["doctor"]).success();
}

#[test]
fn a_slot_directory_others_can_write_into_is_reported_never_chmod_ed() {
    use std::os::unix::fs::PermissionsExt;
    let env = setup();
    let chmod = |mode| {
        std::fs::set_permissions(&env.slot_dir, std::fs::Permissions::from_mode(mode))
            .expect("chmod")
    };
    let mode = || {
        std::fs::metadata(&env.slot_dir)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777
    };
    std::fs::create_dir_all(&env.slot_dir).expect("mkdir");
    // Anyone may have planted files in it: a human checks them first.
    chmod(0o777);
    let json = env.run(&["doctor", "--fix", "--json"]).code(1).json();
    let finding = &json["findings"][0];
    assert_eq!(finding["kind"], "slot_dir");
    assert_eq!(finding["path"], env.slot_dir.display().to_string());
    assert_eq!(finding["fixable"], false);
    assert!(finding["hint"]
        .as_str()
        .expect("hint")
        .contains("check its contents, then 'chmod 700"));
    assert_eq!(mode(), 0o777);

    // Others can only read it, and it holds only slot files: made private.
    chmod(0o755);
    let json = env.run(&["doctor", "--json"]).code(1).json();
    assert_eq!(json["findings"][0]["fixable"], true);
    env.run(&["doctor", "--fix"]).success();
    assert_eq!(mode(), 0o700);
    env.run(&["doctor"]).success();

    // Someone else's files in it: not provably a slot directory, left alone.
    std::fs::write(env.slot_dir.join("notes.txt"), "mine\n").expect("write");
    chmod(0o755);
    env.run(&["doctor", "--fix"]).code(1);
    assert_eq!(mode(), 0o755);
}

#[test]
fn usage_errors_exit_2() {
    let env = setup();
    env.run(&["doctor", "--bogus"]).code(2);
    let run = env.run(&["doctor", "--into", "nosuch"]).code(2);
    assert!(
        run.stderr.contains("branch 'nosuch' does not exist"),
        "{}",
        run.stderr
    );
}

/// A `packed-refs.lock` a killed ref edit of git-arbiter left (its marker
/// under `.git/arbiter/ref-edits/` is there, unlocked) is provably ours:
/// `--fix` removes it. Anyone else's stays reported only (above).
#[test]
fn a_packed_refs_lock_of_a_killed_edit_is_fixed() {
    let env = setup();
    env.git(&["pack-refs", "--all"]);
    let gd = git_dir(&env);
    let markers = gd.join("arbiter/ref-edits");
    std::fs::create_dir_all(&markers).expect("markers");
    std::fs::write(markers.join("4194303-0"), "").expect("marker");
    let lock = gd.join("packed-refs.lock");
    std::fs::write(&lock, "").expect("lock");
    let run = env.run(&["doctor"]).code(1);
    assert!(
        run.stdout
            .contains("left by a killed git-arbiter ref edit [fixable]"),
        "{}",
        run.stdout
    );
    let fixed = env.run(&["doctor", "--fix"]).success();
    assert!(
        fixed
            .stdout
            .contains("left by a killed git-arbiter ref edit [fixed]"),
        "{}",
        fixed.stdout
    );
    assert!(!lock.exists());
    assert_eq!(std::fs::read_dir(&markers).expect("markers").count(), 0);
}

/// A ref of ours pointing at an object the repository lost (what `git gc
/// --prune=now` beside a run can do): named, with how to recover; and the
/// recovery it suggests for the notes ref (an earlier state) is safe, as
/// the branch's history says what landed.
#[test]
fn refs_pointing_at_missing_objects_are_reported_with_the_way_back() {
    let env = setup();
    env.run(&[
        "round",
        "--build",
        "case $ARBITER_WO in wo-01) echo a2 > src/a.rs;; *) echo b > src/b.rs;; esac",
    ])
    .success();
    let tip = env.rev("refs/notes/arbiter");
    let earlier = env.rev("refs/notes/arbiter~2");
    let loose = git_dir(&env)
        .join("objects")
        .join(&tip[..2])
        .join(&tip[2..]);
    std::fs::remove_file(&loose).expect("the notes commit is loose");
    let run = env.run(&["doctor", "--json"]).code(1);
    assert_eq!(
        kinds(&run),
        [(
            "missing_object".to_owned(),
            "refs/notes/arbiter".to_owned(),
            false,
            false
        )]
    );
    let hint = run.json()["findings"][0]["hint"]
        .as_str()
        .expect("hint")
        .to_owned();
    assert!(
        hint.contains("git update-ref refs/notes/arbiter <commit>"),
        "{hint}"
    );
    // Following the hint: an earlier state; nothing lands twice.
    env.git(&["update-ref", "refs/notes/arbiter", &earlier]);
    env.run(&["round", "--build", "false"]).success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-02"), 1);
    env.run(&["doctor"]).success();

    // The integration branch at a pruned merge.
    let main = env.rev("main");
    let loose = git_dir(&env)
        .join("objects")
        .join(&main[..2])
        .join(&main[2..]);
    std::fs::remove_file(&loose).expect("the merge is loose");
    let run = env.run(&["doctor", "--json"]).code(1);
    let kinds = kinds(&run);
    assert!(
        kinds.contains(&(
            "missing_object".to_owned(),
            "refs/heads/main".to_owned(),
            false,
            false
        )),
        "{kinds:?}"
    );
    let hint = run.json()["findings"][0]["hint"]
        .as_str()
        .expect("hint")
        .to_owned();
    assert!(hint.contains("git reflog main"), "{hint}");
}

/// Issue 32: after a conductor was SIGKILLed its builder ran on, `doctor` did
/// not mention it and `--fix` removed the worktree from under it. The
/// builder is reported, and `--fix` ends it before removing anything.
#[test]
fn a_builder_a_killed_conductor_left_running_is_ended_before_its_worktree_goes() {
    let env = setup();
    let pids = env.root.join("pids");
    let started = env.root.join("started");
    let build = format!(
        "sleep 300 & echo $! >> {p}; touch {s}; wait",
        p = pids.display(),
        s = started.display()
    );
    let mut conductor = env
        .command_in(&env.repo, &["round", "--max", "1", "--build", &build])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn round");
    crate::common::wait_for(&started);
    conductor.kill().expect("SIGKILL the conductor");
    conductor.wait().expect("reap");
    let pid = std::fs::read_to_string(&pids)
        .expect("pids")
        .trim()
        .to_owned();
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).expect("builder's cwd");
    assert!(cwd.exists(), "the builder runs in its worktree");

    let run = env.run(&["doctor", "--json"]).code(1);
    let found = kinds(&run);
    assert!(
        found
            .iter()
            .any(|(kind, _, fixable, _)| kind == "orphaned_builder" && *fixable),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(kind, _, _, _)| kind == "leftover_branch"),
        "{found:?}"
    );
    let text = env.run(&["doctor"]).code(1);
    assert!(text.stdout.contains("processes"), "{}", text.stdout);
    assert!(!is_gone(&pid), "doctor alone ends nothing");

    let run = env.run(&["doctor", "--fix"]);
    assert!(run.stderr.contains("ended process group"), "{}", run.stderr);
    assert!(is_gone(&pid), "the orphaned builder {pid} still runs");
    assert!(!cwd.exists(), "its worktree is removed once it has ended");
    env.run(&["doctor"]).success();
}

/// A process that has exited (or is a zombie nobody reaped yet).
fn is_gone(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().next());
    matches!(state, None | Some("Z"))
}

/// A healthy clone whose `origin` does not fetch the notes ref gets advice,
/// not a problem: exit 0, the refspec to add.
#[test]
fn a_healthy_clone_gets_the_notes_refspec_as_a_note_and_exit_0() {
    let env = setup();
    let clone = env.root.join("clone");
    env.git_in(&env.root, &["clone", "-q", "repo", "clone"]);
    let run = env.run_in(&clone, &["doctor"]).success();
    let notes: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("note") || l.contains("problem"))
        .collect();
    insta::assert_snapshot!(env.redact(&notes.join("\n")), @r#"
    notes:
      remote.origin.fetch: fetching from origin does not fetch refs/notes/arbiter (no fetch refspec covers it; git clone never does) [note]
        hint: if origin has git-arbiter state, fetch it with 'git arbiter sync --remote origin' (fast-forward only); keep a copy of origin's with "git config --add remote.origin.fetch '+refs/notes/arbiter:refs/notes/remotes/origin/arbiter'"
    1 note (advice, not a problem)
    no problems found
    "#);
    let json = env.run_in(&clone, &["doctor", "--json"]).success().json();
    assert_eq!(json["remaining"], 0);
    assert_eq!(json["findings"][0]["advice"], true);
}

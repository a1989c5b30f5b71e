//! Exactly once, never wedged: each test reproduces one defect found by
//! adversarial testing (crashes, concurrency, stale locks) with the few
//! commands that showed it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::common::{poll_until, wait_for, Run, TestEnv};

fn repo() -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-01", "One", &[], &["src/one.txt"]);
    env.work_order("wo-02", "Two", &[], &["src/two.txt"]);
    env.commit_all("init");
    env
}

/// Writes the declared file of whichever order it builds.
const WRITE_OWN: &str = "mkdir -p src && echo \"$ARBITER_WO\" > src/$(echo $ARBITER_WO | sed 's/wo-0//;s/1/one/;s/2/two/').txt";

fn round(env: &TestEnv, build: &str) -> Run {
    env.run(&["round", "--json", "--max-total", "4", "--build", build])
}

/// No worktree but the main one, no arbiter branch, no lock file, fsck clean,
/// the checkout clean.
fn nothing_left(env: &TestEnv) {
    env.fsck();
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let worktrees = env.linked_worktrees();
    assert!(worktrees.is_empty(), "{worktrees:?}");
    assert_eq!(
        env.git(&["branch", "--list", "arbiter/*", "arbiter-race/*"]),
        ""
    );
}

/// Defect 1: a standalone merge-back wrote `Arbiter-Attempt: 1` while the
/// record said attempt 0; killed before its `done` record, recovery looked
/// for attempt 0 and the next round merged the order again.
#[test]
fn a_merge_back_killed_before_its_record_is_never_merged_again() {
    let env = repo();
    env.git(&["checkout", "-q", "-b", "arbiter/wo-01"]);
    env.write("src/one.txt", "by hand\n");
    env.commit_all("wo-01 by hand");
    env.git(&["checkout", "-q", "main"]);
    env.run(&["merge-back", "wo-01"]).success();
    // Exactly the state a kill between the branch move and the record leaves.
    env.git(&["update-ref", "refs/notes/arbiter", "refs/notes/arbiter~1"]);
    round(&env, WRITE_OWN).success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-02"), 1);
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/one.txt")).expect("file"),
        "by hand\n"
    );
    nothing_left(&env);
}

/// Defect 2: `git clone` does not fetch refs/notes/*; a round in the clone
/// rebuilt and merged every order a second time.
#[test]
fn a_fresh_clone_reconstructs_what_landed_instead_of_landing_it_twice() {
    let env = repo();
    round(&env, WRITE_OWN).success();
    env.git_in(&env.root, &["clone", "-q", "repo", "clone"]);
    let clone = env.root.join("clone");
    let summary = env
        .run_in(&clone, &["round", "--json", "--build", "exit 1"])
        .success()
        .json();
    assert_eq!(summary["done"], serde_json::json!(["wo-01", "wo-02"]));
    assert_eq!(env.merges_in(&clone, "main", "wo-01"), 1);
    assert_eq!(env.merges_in(&clone, "main", "wo-02"), 1);
    let log = env
        .run_in(&clone, &["log", "--json", "wo-01"])
        .success()
        .json();
    assert_eq!(crate::common::event_names(&log), ["reconstructed_done"]);

    // The same when the notes ref points at an unrelated commit.
    let unrelated = env.git(&[
        "commit-tree",
        "-m",
        "unrelated",
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    ]);
    env.git(&["update-ref", "refs/notes/arbiter", unrelated.trim()]);
    round(&env, "exit 1").success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-02"), 1);
}

/// Holds `<common-dir>/arbiter/conductors/<name>.lock` with flock(1), as a
/// running conductor does; the lock goes when the child is killed.
fn fake_live_conductor(env: &TestEnv, name: &str) -> std::process::Child {
    let dir = env.repo.join(".git/arbiter/conductors");
    std::fs::create_dir_all(&dir).expect("conductors dir");
    let lock = dir.join(format!("{name}.lock"));
    let ready = env.root.join(format!("{name}.ready"));
    // -o: the lock stays with flock itself, so killing it releases the lock.
    let child = std::process::Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sh", "-c", &format!("touch {}; sleep 60", ready.display())])
        .spawn()
        .expect("flock");
    wait_for(&ready);
    child
}

/// Defect 3: `clear` of an order a live conductor holds reset it with no
/// owner and removed the worktree its builder was using.
#[test]
fn clear_refuses_an_order_a_live_conductor_still_holds() {
    let env = repo();
    let mut holder = fake_live_conductor(&env, "77-1");
    env.write_record(
        "wo-01",
        r#"{"version":1,"wo":"wo-01","status":"in_progress","halted":true,"halt_reason":"by hand","attempts":1,"cap":3,"checkpoint_before":null,"checkpoint_after":null,"owner":"77-1","verdicts":[],"history":[]}"#,
    );
    let notes = env.notes_tip();
    let run = env.run(&["clear", "wo-01"]).code(2);
    assert!(
        run.stderr.contains("still held by running conductor 77-1"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint: "), "{}", run.stderr);
    assert_eq!(env.notes_tip(), notes, "nothing written");
    holder.kill().expect("kill");
    holder.wait().expect("reap");
    env.run(&["clear", "wo-01"]).success();
}

/// Defects 3 and 7: `halt` during a build aborted the whole round (exit 2,
/// other finished builds thrown away, the halted order's work deleted). A
/// halt stops that order's build only; its worktree and branch are kept.
#[test]
fn halt_during_a_build_stops_only_that_order() {
    let env = repo();
    let started = env.root.join("started");
    let build = format!(
        "{WRITE_OWN}; if [ $ARBITER_WO = wo-01 ]; then touch {}; sleep 60; fi",
        started.display()
    );
    let child = env
        .command_in(&env.repo, &["round", "--json", "--build", &build])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for(&started);
    env.run(&["halt", "wo-01", "--reason", "wrong approach"])
        .success();
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an escalation, not an abort:\n{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(summary["done"], serde_json::json!(["wo-02"]));
    assert_eq!(summary["halted"][0]["id"], "wo-01");
    assert_eq!(summary["halted"][0]["branch"], "arbiter/wo-01");
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 0);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-02"), 1);
    // What the builder wrote before the halt is committed on its kept branch.
    assert_eq!(env.git(&["show", "arbiter/wo-01:src/one.txt"]), "wo-01\n");
    assert!(env
        .worktree_of("arbiter/wo-01")
        .is_some_and(|wt| wt.is_dir()));
    // Then clear and a plain round land it exactly once.
    env.run(&["clear", "wo-01"]).success();
    round(&env, WRITE_OWN).success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    nothing_left(&env);
}

#[test]
fn halt_of_a_done_order_is_refused() {
    let env = repo();
    round(&env, WRITE_OWN).success();
    let notes = env.notes_tip();
    let run = env.run(&["halt", "wo-01", "--reason", "x"]).code(2);
    assert!(run.stderr.contains("is done"), "{}", run.stderr);
    assert_eq!(env.notes_tip(), notes);
}

/// Defect 5: a kill while gix created a worktree left it locked
/// ("initializing"), and every later round exited 2 until `git worktree unlock`.
#[test]
fn a_worktree_left_locked_while_initializing_does_not_wedge_rounds() {
    let env = repo();
    let root = env.worktree_root();
    std::fs::create_dir_all(&root).expect("root");
    env.git_worktree_add("arbiter/wo-01", &root.join("wo-01"));
    let admin = env.git(&["rev-parse", "--git-common-dir"]);
    let admin = env.repo.join(admin.trim()).join("worktrees/wo-01");
    std::fs::write(admin.join("locked"), "initializing\n").expect("lock");
    std::fs::remove_file(root.join("wo-01/README")).expect("half checked out");
    round(&env, WRITE_OWN).success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    nothing_left(&env);
}

/// A lock with any other reason is the user's: reported, never lifted.
#[test]
fn a_worktree_locked_by_hand_is_left_locked() {
    let env = repo();
    let root = env.worktree_root();
    std::fs::create_dir_all(&root).expect("root");
    let path = root.join("wo-01");
    env.git_worktree_add("arbiter/wo-01", &path);
    env.git(&[
        "worktree",
        "lock",
        "--reason",
        "on a USB disk",
        path.to_str().expect("utf-8"),
    ]);
    let run = round(&env, WRITE_OWN).code(2);
    assert!(run.stderr.contains("is locked"), "{}", run.stderr);
    assert!(env.git(&["worktree", "list"]).contains("locked"));
}

/// Defect 8: a builder that switched branch had its edits committed onto
/// that HEAD while the unchanged `arbiter/<id>` was merged and recorded done.
#[test]
fn a_builder_that_switches_branch_keeps_its_work() {
    let env = repo();
    let build = format!(
        "case $ARBITER_WO in wo-01) git checkout -q --detach;; wo-02) git checkout -q -b mine; {WRITE_OWN}; git add -A; git commit -qm mine;; esac; {WRITE_OWN}"
    );
    round(&env, &build).success();
    assert_eq!(env.git(&["show", "main:src/one.txt"]), "wo-01\n");
    assert_eq!(env.git(&["show", "main:src/two.txt"]), "wo-02\n");
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-02"), 1);
}

/// Work that does not contain the order's branch cannot be told apart: the
/// attempt fails with the reason, it is never `done` without the work.
#[test]
fn a_builder_that_leaves_an_unrelated_head_fails_the_attempt() {
    let env = repo();
    let build = format!(
        "if [ $ARBITER_WO = wo-01 ]; then git checkout -q --orphan elsewhere-$ARBITER_ATTEMPT; fi; {WRITE_OWN}"
    );
    let summary = round(&env, &build).code(1).json();
    assert_eq!(summary["halted"][0]["id"], "wo-01");
    assert_eq!(summary["halted"][0]["reason"], "retry_cap_exhausted");
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 0);
    let log = env.run(&["log", "wo-01"]).success();
    assert!(
        log.stdout.contains("does not contain arbiter/wo-01") || log.stdout.contains("no commit"),
        "{}",
        log.stdout
    );
}

/// Defect 6: a held `index.lock` during the checkout update left the branch
/// and files moved but not the index. Nothing moves while it is held past
/// the wait; the order waits to land, naming the lock, and lands once it
/// is gone.
#[test]
fn a_held_index_lock_moves_nothing_and_the_order_waits() {
    let env = repo();
    env.git(&["config", "arbiter.indexLockWait", "200ms"]);
    let main_before = env.git(&["rev-parse", "main"]);
    let lock = env.repo.join(".git/index.lock");
    std::fs::write(&lock, "").expect("lock");
    let run = round(&env, WRITE_OWN).success();
    assert!(
        run.stdout.contains(&lock.display().to_string()),
        "{}",
        run.stdout
    );
    assert_eq!(
        env.git(&["rev-parse", "main"]),
        main_before,
        "nothing moved"
    );
    std::fs::remove_file(&lock).expect("unlock");
    round(&env, WRITE_OWN).success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    nothing_left(&env);
}

/// Defect 9: a stale `refs/heads/main.lock` ended after 14 s with "the
/// branch moved under us 100 times in a row". The lock file is named.
#[test]
fn a_stale_lock_on_the_integration_branch_is_named() {
    let env = repo();
    let lock = env.repo.join(".git/refs/heads/main.lock");
    std::fs::write(&lock, "").expect("lock");
    let started = std::time::Instant::now();
    let run = round(&env, WRITE_OWN).code(2);
    assert!(
        run.stderr.contains(&lock.display().to_string()),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint: "), "{}", run.stderr);
    assert!(lock.exists(), "not ours to remove");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// Defect 10: a killed race leaked its `arbiter-race/<id>/<k>` branches and
/// worktrees: recovery only swept `refs/heads/arbiter/`.
#[test]
fn a_killed_race_leaves_nothing_behind_after_the_next_round() {
    let env = repo();
    let root = env.worktree_root();
    std::fs::create_dir_all(&root).expect("root");
    for k in 0..2 {
        let path = root.join(format!("race-wo-01-{k}"));
        env.git_worktree_add(&format!("arbiter-race/wo-01/{k}"), &path);
    }
    env.git(&["branch", "arbiter-race/wo-01/2"]);
    round(&env, WRITE_OWN).success();
    nothing_left(&env);
}

/// Defect 11: `refs/notes/arbiter` pointing at a blob or tree was exit 128.
#[test]
fn notes_ref_pointing_at_a_blob_is_an_input_error() {
    let env = repo();
    let blob = env.git(&["rev-parse", "main:README"]);
    env.git(&["update-ref", "refs/notes/arbiter", blob.trim()]);
    let run = env.run(&["status"]).code(2);
    assert!(
        run.stderr.contains("refs/notes/arbiter points at a blob"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("git reflog refs/notes/arbiter"),
        "{}",
        run.stderr
    );
}

/// Defect 9: a leftover `refs/heads/arbiter/<id>.lock` made every round exit
/// 128 with "Could not prepare reference edit". Locks on arbiter's own
/// branches that no live conductor can hold are cleared and reported.
#[test]
fn a_stale_lock_on_an_arbiter_branch_is_cleared() {
    let env = repo();
    let dir = env.repo.join(".git/refs/heads/arbiter");
    std::fs::create_dir_all(&dir).expect("dir");
    let lock = dir.join("wo-01.lock");
    std::fs::write(&lock, "").expect("lock");
    std::process::Command::new("touch")
        .args(["-d", "1 minute ago"])
        .arg(&lock)
        .status()
        .expect("touch");
    let run = round(&env, WRITE_OWN).success();
    assert!(
        run.stderr
            .contains(&format!("removed stale lock file {}", lock.display())),
        "{}",
        run.stderr
    );
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert!(!lock.exists());
}

/// Defect 11: SIGHUP (the terminal closed) is handled like Ctrl-C: builders
/// ended, the attempt given back, exit 130.
#[test]
fn sighup_stops_like_ctrl_c() {
    let env = repo();
    let started = env.root.join("started");
    let build = format!("touch {}; sleep 60", started.display());
    let child = env
        .command_in(&env.repo, &["round", "--json", "--build", &build])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for(&started);
    std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .expect("kill");
    crate::common::assert_interrupted(child);
    let status = env.run(&["status", "--json"]).success().json();
    for row in status["orders"].as_array().expect("orders") {
        assert_eq!(row["attempts"], 0, "{row}");
        assert_eq!(row["status"], "needs_rework", "{row}");
    }
}

/// Unmounts on drop, so a failing test leaves no mount behind.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// A repository on a 4 MiB tmpfs with one order `wo-01` declaring
/// `data.txt`, its worktrees outside; `None` where `mount` is refused.
fn small_disk_repo(env: &TestEnv) -> Option<Mount> {
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&env.repo)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        return None;
    }
    let mount = Mount(env.repo.clone());
    env.git(&["init", "-q", "-b", "main"]);
    let outside = env.root.join("worktrees");
    env.git(&[
        "config",
        "arbiter.worktreeDir",
        outside.to_str().expect("utf-8"),
    ]);
    env.write("data.txt", "original\n");
    env.work_order("wo-01", "Big", &[], &["data.txt"]);
    env.commit_all("init");
    Some(mount)
}

/// Defect 11: a full disk during the checkout update must never leave a
/// truncated file in the user's checkout; the next run finishes the update.
/// Needs a small tmpfs, so it runs only where `mount` is allowed (as in CI,
/// which runs as root).
#[test]
fn a_full_disk_during_the_checkout_update_leaves_no_truncated_file() {
    let env = TestEnv::new();
    let Some(_mount) = small_disk_repo(&env) else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    // The gate fills the disk, leaving room for the merge's objects and
    // state but not for the new 1.2 MB file.
    let gate = format!(
        "free=$(df --output=avail -k {repo} | tail -1); dd if=/dev/zero of={repo}/.git/filler bs=1k count=$((free - 300)) 2>/dev/null; true",
        repo = env.repo.display()
    );
    let build = "head -c 1200000 /dev/urandom > data.txt";
    let run = env.run(&["round", "--build", build, "--gate", &gate]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("No space left on device"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("data.txt")).expect("data"),
        "original\n",
        "the user's file is untouched, not truncated"
    );
    std::fs::remove_file(env.repo.join(".git/filler")).expect("free the disk");
    env.run(&["round", "--build", "exit 1"]).success();
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read(env.repo.join("data.txt"))
            .expect("data")
            .len(),
        1_200_000
    );
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    env.fsck();
}

/// A build that writes 1.2 MB into `data.txt` and, the first time only,
/// fills the small disk (`filler`) so that committing its work runs out of space.
fn fills_the_disk_once(env: &TestEnv, filler: &Path) -> String {
    format!(
        "head -c 1200000 /dev/urandom > data.txt; if [ ! -e {done} ]; then touch {done}; free=$(df --output=avail -k {repo} | tail -1); dd if=/dev/zero of={filler} bs=1k count=$((free - 300)) 2>/dev/null; fi; true",
        done = env.root.join("filled").display(),
        repo = env.repo.display(),
        filler = filler.display(),
    )
}

/// Defect 11: a full disk says so and spends no attempt: the builder was
/// not at fault.
#[test]
fn a_full_disk_while_committing_the_work_spends_no_attempt() {
    let env = TestEnv::new();
    let Some(_mount) = small_disk_repo(&env) else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let filler = env.repo.join(".git/filler");
    let build = fills_the_disk_once(&env, &filler);
    let run = env.run(&["round", "--build", &build]);
    assert_eq!(run.code, 128, "{}", run.stderr);
    assert!(
        run.stderr.contains("No space left on device"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("no attempt was spent"),
        "{}",
        run.stderr
    );
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["attempts"], 0, "{status}");
    std::fs::remove_file(&filler).expect("free the disk");
    env.run(&["round", "--build", &build]).success();
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["attempts"], 1, "{status}");
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
}

/// A missing git identity was exit 128 with no hint from `halt`, `clear`,
/// `round` and `race` (state boxed the commit's error as a git failure).
#[test]
fn no_identity_is_a_usage_error_for_every_command_that_writes_state() {
    let env = repo();
    for args in [
        &["halt", "wo-01", "--reason", "x"][..],
        &["round", "--build", "true"][..],
        &[
            "race", "wo-01", "-n", "1", "--build", "true", "--score", "echo 1",
        ][..],
    ] {
        let out = env
            .command_in(&env.repo, args)
            .env_remove("GIT_AUTHOR_NAME")
            .env_remove("GIT_AUTHOR_EMAIL")
            .env_remove("GIT_COMMITTER_NAME")
            .env_remove("GIT_COMMITTER_EMAIL")
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("error: no author identity is configured\nhint: set user.name and user.email with 'git config'"),
            "{args:?}: {stderr}"
        );
        assert!(env.notes_tip().is_none(), "{args:?}: no state was written");
    }
}

/// A branch made by hand (`git arbiter worktree add`, commits there) for an
/// order no round ever dispatched is the user's work: a round used to delete
/// it as a leftover and build the order from scratch. It is left alone, the
/// order is deferred with a warning, the other orders run, and `merge-back`
/// still lands it.
#[test]
fn a_round_leaves_work_made_by_hand_alone() {
    let env = repo();
    let added = env.run(&["worktree", "add", "wo-01"]).success().json();
    let path = PathBuf::from(added["path"].as_str().expect("path"));
    std::fs::create_dir_all(path.join("src")).expect("mkdir");
    std::fs::write(path.join("src/one.txt"), "by hand\n").expect("write");
    env.git_in(&path, &["add", "-A"]);
    env.git_in(&path, &["commit", "-q", "-m", "wo-01 by hand"]);
    let head = env.git_in(&path, &["rev-parse", "HEAD"]);
    // Work still in progress there, not committed yet.
    std::fs::write(path.join("notes.txt"), "thinking\n").expect("write");

    let run = round(&env, WRITE_OWN).success();
    let out = run.json();
    assert_eq!(
        env.merges_in(&env.repo, "main", "wo-01"),
        0,
        "{}",
        run.stderr
    );
    assert_eq!(env.merges_in(&env.repo, "main", "wo-02"), 1);
    assert!(
        run.stderr
            .contains("branch arbiter/wo-01: it holds work no run of git-arbiter made"),
        "{}",
        run.stderr
    );
    assert_eq!(env.git(&["rev-parse", "arbiter/wo-01"]), head);
    assert_eq!(
        std::fs::read_to_string(path.join("notes.txt")).expect("kept"),
        "thinking\n"
    );
    let status = env.run(&["status", "--json"]).success().json();
    let row = status["orders"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["id"] == "wo-01")
        .expect("wo-01")
        .clone();
    assert_eq!(row["status"], "ready", "{out}");
    assert_eq!(row["hand_made_branch"], head.trim());
    let doctor = env.run(&["doctor", "--json"]).success().stdout;
    assert!(!doctor.contains("wo-01"), "{doctor}");

    std::fs::remove_file(path.join("notes.txt")).expect("rm");
    env.run(&["merge-back", "wo-01"]).success();
    round(&env, WRITE_OWN).success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert_eq!(env.git(&["show", "main:src/one.txt"]), "by hand\n");
    env.fsck();
}

/// A kill while a ref edit holds `packed-refs.lock` (refs are packed, as after
/// any `git gc`: gix then takes it for every compare-and-swap and deletion)
/// left the lock, and every later round spent a minute retrying, then exited
/// 128. The lock a killed edit of ours left (its marker, unlocked, is there)
/// is cleared; anyone else's is named (exit 2), never removed.
#[test]
fn a_packed_refs_lock_left_by_a_killed_deletion_is_cleared() {
    let env = repo();
    env.git(&["pack-refs", "--all"]);
    let git_dir = env.repo.join(".git");
    let lock = git_dir.join("packed-refs.lock");

    // Someone else's lock: named, exit 2, left in place.
    std::fs::write(&lock, "").expect("lock");
    let run = round(&env, WRITE_OWN).code(2);
    assert!(
        run.stderr.contains(&lock.display().to_string()),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint: "), "{}", run.stderr);
    assert!(lock.exists(), "not ours to remove");
    std::fs::remove_file(&lock).expect("unlock");
    round(&env, WRITE_OWN).success();
    nothing_left(&env);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);

    // Exactly what a kill inside our deletion leaves: marker, then lock.
    env.work_order("wo-03", "Three", &[], &["src/three.txt"]);
    env.commit_all("wo-03");
    env.git(&["pack-refs", "--all"]);
    let markers = git_dir.join("arbiter/ref-edits");
    std::fs::create_dir_all(&markers).expect("markers");
    std::fs::write(markers.join("4194303-0"), "").expect("marker");
    std::fs::write(&lock, "").expect("lock");
    round(&env, "mkdir -p src && echo 3 > src/three.txt").success();
    assert!(!lock.exists());
    assert_eq!(std::fs::read_dir(&markers).expect("markers").count(), 0);
    assert_eq!(env.merges_in(&env.repo, "main", "wo-03"), 1);
    nothing_left(&env);
}

/// The same for a race: a full disk while its instances' work is committed
/// gives the attempt back instead of halting the order `race_no_winner`.
#[test]
fn a_full_disk_during_a_race_spends_no_attempt() {
    let env = TestEnv::new();
    let Some(_mount) = small_disk_repo(&env) else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let filler = env.repo.join(".git/filler");
    let build = fills_the_disk_once(&env, &filler);
    let race = [
        "race", "wo-01", "-n", "1", "--score", "echo 1", "--build", &build,
    ];
    let run = env.run(&race);
    assert_eq!(run.code, 128, "{}", run.stderr);
    assert!(
        run.stderr.contains("No space left on device"),
        "{}",
        run.stderr
    );
    let status = env.run(&["status", "--json"]).success().json();
    let row = &status["orders"][0];
    assert_eq!(row["attempts"], 0, "{status}");
    assert_eq!(row["halted"], false, "{status}");
    std::fs::remove_file(&filler).expect("free the disk");
    env.run(&race).success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
}

/// Is a `git update-ref` child of `pid` asleep in a timed wait (git's lock
/// retries poll)?
fn deleter_waits(pid: u32) -> bool {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    let children: String = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .collect::<Vec<_>>()
        .join(" ");
    children.split_whitespace().any(|child| {
        let proc = PathBuf::from(format!("/proc/{child}"));
        std::fs::read(proc.join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("update-ref"))
            && std::fs::read_to_string(proc.join("wchan")).is_ok_and(|w| w.contains("poll"))
    })
}

/// A branch deletion prepared while another ref edit held `packed-refs.lock`
/// in a repository without `packed-refs` failed once that lock was gone
/// ("Could not commit packed-ref transaction"): a continuous run deletes
/// branches while builders commit, so it ended the run.
#[test]
fn a_branch_deletion_outlasts_a_concurrent_packed_refs_lock() {
    let env = repo();
    // gix waits this long (1 s by default) for `packed-refs.lock`: the lock
    // must go while it waits, however loaded the machine.
    env.git(&["config", "core.packedRefsTimeout", "60000"]);
    env.run(&["worktree", "add", "wo-01"]).success();
    let lock = env.repo.join(".git/packed-refs.lock");
    std::fs::write(&lock, "").expect("lock");
    let mut remover = env
        .command_in(&env.repo, &["worktree", "remove", "wo-01"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // The lock goes only once the deletion waits for it: the remover is
    // inside its edit of the branch (its marker under ref-edits names the
    // branch's lock) and the `git update-ref` it runs for the deletion is
    // asleep between its tries to take `packed-refs.lock`.
    let pid = remover.id();
    let markers = env.repo.join(".git/arbiter/ref-edits");
    let editing_the_branch = || {
        std::fs::read_dir(&markers).is_ok_and(|listing| {
            listing.flatten().any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix(&format!("{pid}-"))
                    .is_some_and(|n| !n.ends_with(".new"))
                    && std::fs::read_to_string(e.path())
                        .is_ok_and(|named| named.ends_with("/refs/heads/arbiter/wo-01.lock"))
            })
        })
    };
    let mut ended = false;
    poll_until("the deletion waits for packed-refs.lock", || {
        ended = remover.try_wait().expect("try_wait").is_some();
        ended || (deleter_waits(pid) && editing_the_branch())
    });
    if ended {
        let out = remover.wait_with_output().expect("output");
        panic!(
            "the remover ended before it waited for the lock: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::remove_file(&lock).expect("unlock");
    let out = remover.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.git(&["branch", "--list", "arbiter/*"]), "");
    env.fsck();
}

/// Output that never arrived is not success: `status > /dev/full` used to
/// exit 0 with nothing written.
#[test]
fn stdout_on_a_full_disk_is_an_error() {
    let env = repo();
    for args in [&["status"][..], &["batch"], &["--help"]] {
        let full = std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = env
            .command_in(&env.repo, args)
            .stdout(full)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128), "{args:?}: {stderr}");
        assert!(
            stderr.ends_with(
                "error: writing to standard output: No space left on device (os error 28)\n"
            ),
            "{args:?}: {stderr}"
        );
    }
}

/// A reader that left (`| head`) is no error: the command ends quietly.
#[test]
fn stdout_to_a_closed_pipe_ends_quietly() {
    let env = repo();
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = env
        .command_in(&env.repo, &["status"])
        .stdout(writer)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// A closed stderr pipe is no reason to panic (exit 101): `batch` and
/// `stop` end as they would with someone reading.
#[test]
fn stderr_to_a_closed_pipe_never_panics() {
    let env = repo();
    for args in [&["batch"][..], &["stop"], &["status", "--bogus"]] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let status = env
            .command_in(&env.repo, args)
            .stdout(Stdio::null())
            .stderr(writer)
            .status()
            .expect("run");
        let want = if args.contains(&"--bogus") { 2 } else { 0 };
        assert_eq!(status.code(), Some(want), "{args:?}");
    }
}

/// A worktree `add` killed before it wrote `gitdir` leaves a registration
/// gix does not list: the next add of that name registered `wo-011` beside
/// it, and the stale one stayed for good.
#[test]
fn a_half_registered_worktree_is_pruned_by_the_next_run() {
    let env = repo();
    let stale = env.repo.join(".git/worktrees/wo-01");
    std::fs::create_dir_all(&stale).expect("mkdir");
    std::fs::write(stale.join("commondir"), "../..\n").expect("commondir");
    std::fs::write(stale.join("HEAD"), "ref: refs/heads/arbiter/wo-01\n").expect("HEAD");
    round(&env, WRITE_OWN).success();
    // Pooled worktrees (`0`, `1`, …) stay registered for the next run.
    let left: Vec<String> = std::fs::read_dir(env.repo.join(".git/worktrees"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with("wo-"))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    assert!(env.linked_worktrees().is_empty());
    env.fsck();
}

/// A lock a killed run's builder left a moment ago on its order's branch
/// stopped the next run ("cannot create branch … lock exists"): it is
/// waited out now, then cleared.
#[test]
fn a_fresh_lock_a_killed_run_left_on_an_arbiter_branch_is_waited_out() {
    let env = repo();
    let dir = env.repo.join(".git/refs/heads/arbiter");
    std::fs::create_dir_all(&dir).expect("dir");
    let lock = dir.join("wo-01.lock");
    std::fs::write(&lock, "").expect("lock");
    round(&env, WRITE_OWN).success();
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    assert!(!lock.exists());
}

/// A full disk at any write of a landing (the state, the merge, the
/// branch, the checkout, the record) never spends an attempt nor discards
/// passed work: once there is space again, the order lands exactly once,
/// its builder run once, its attempt the first.
#[test]
fn a_full_disk_at_any_write_of_a_landing_spends_no_attempt() {
    const POINTS: &[&str] = &[
        "verdict.before",
        "verdict.after",
        "verify.started",
        "merge-commit.after",
        "branch-cas.before",
        "branch-cas.after",
        "checkout-files.after",
        "checkout-index.after",
        "merge-recorded.before",
        "merge-recorded.after",
    ];
    for point in POINTS {
        let mut env = TestEnv::new();
        let Some(_mount) = small_disk_repo(&env) else {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        };
        let filler = env.repo.join(".git/filler");
        let runs = env.root.join("runs");
        let build = format!(
            "echo x >> {runs}; echo built > data.txt",
            runs = runs.display()
        );
        env.set_env("ARBITER_FILL_AT", point);
        env.set_env("ARBITER_FILL_FILE", filler.to_str().expect("utf-8"));
        let run = env.run(&["round", "--build", &build, "--gate", "true"]);
        assert!(
            run.stderr.contains(&format!("arbiter fill point={point}")),
            "{point}: {}",
            run.stderr
        );
        if run.code != 0 {
            assert!(
                run.stderr.contains("no attempt was spent"),
                "{point}: exit {}: {}",
                run.code,
                run.stderr
            );
        }
        env.unset_env("ARBITER_FILL_AT");
        std::fs::remove_file(&filler).expect("free the disk");
        let again = env.run(&["round", "--build", &build, "--gate", "true"]);
        assert_eq!(again.code, 0, "{point}: {}", again.stderr);
        assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1, "{point}");
        let status = env.run(&["status", "--json"]).success().json();
        assert_eq!(status["orders"][0]["status"], "done", "{point}: {status}");
        assert_eq!(status["orders"][0]["attempts"], 1, "{point}: {status}");
        let built = std::fs::read_to_string(&runs)
            .expect("runs")
            .lines()
            .count();
        assert_eq!(built, 1, "{point}: the passed work was built again");
        assert_eq!(env.git(&["status", "--porcelain"]), "", "{point}");
        env.fsck();
    }
}

/// A pooled worktree whose creation fails on a full disk was left as a
/// folder the pool no longer claimed: every later creation took the next
/// number, and the half-made folders (each a partial checkout) filled the
/// disk further (205 of them in a 10,000-order round). The folder goes with
/// the failure, and the next creation takes its number again.
#[test]
fn a_pooled_worktree_that_a_full_disk_broke_leaves_no_folder() {
    let env = TestEnv::new();
    let worktrees = env.root.join("worktrees");
    std::fs::create_dir_all(&worktrees).expect("mkdir");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&worktrees)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let _mount = Mount(worktrees.clone());
    env.git(&["init", "-q", "-b", "main"]);
    env.git(&[
        "config",
        "arbiter.worktreeDir",
        worktrees.to_str().expect("utf-8"),
    ]);
    for n in 0..4 {
        env.write(&format!("big{n}.bin"), &"x".repeat(400_000));
    }
    env.work_order("wo-01", "Big", &[], &["data.txt"]);
    env.commit_all("init");
    let pool = worktrees.join("pool");
    for _ in 0..2 {
        let run = env.run(&["round", "--build", "echo built > data.txt"]);
        assert_ne!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr.contains("No space left on device"),
            "{}",
            run.stderr
        );
        let left: Vec<_> = std::fs::read_dir(&pool)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "half-made worktrees left: {left:?}");
    }
    let remounted = std::process::Command::new("mount")
        .args(["-o", "remount,size=8m"])
        .arg(&worktrees)
        .status()
        .is_ok_and(|s| s.success());
    assert!(remounted);
    env.run(&["round", "--build", "echo built > data.txt"])
        .success();
    assert!(pool.join("0").is_dir(), "the pool starts at 0 again");
    assert_eq!(env.merges_in(&env.repo, "main", "wo-01"), 1);
    env.fsck();
}

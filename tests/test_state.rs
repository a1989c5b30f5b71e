use crate::common::TestEnv;

/// 40 separate processes each make one transition at the same moment; every
/// one of them must survive in the notes ref.
#[test]
fn forty_concurrent_transitions_all_survive() {
    let env = TestEnv::new();
    env.write("README", "x\n");
    for i in 0..40 {
        env.work_order(
            &format!("wo-{i:02}"),
            &format!("Order {i}"),
            &[],
            &[&format!("src/f{i}.rs")],
        );
    }
    env.commit_all("init");
    // A shared start line: every child waits for the file to appear, then goes.
    let go = env.root.join("go");
    // Every child spins on the go file, so all 40 start their transition together.
    let children: Vec<_> = (0..40)
        .map(|i| {
            let args = ["halt", &format!("wo-{i:02}"), "--reason", &format!("r{i}")];
            env.spawn_at_start_line(&env.repo, &args, &go)
        })
        .collect();
    env.release_all(&go, children);
    let listed = env.git(&["notes", "--ref=arbiter", "list"]);
    assert_eq!(listed.lines().count(), 40, "{listed}");
    let status = env.run(&["status", "--json"]).success().json();
    for (i, row) in status["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .enumerate()
    {
        assert_eq!(row["halted"], true, "{row}");
        assert_eq!(row["halt_reason"], format!("r{i}"));
    }
    // One commit per transition, plus nothing lost: the audit trail has all 40.
    let log = env.git(&["log", "--format=%s", "refs/notes/arbiter"]);
    assert_eq!(log.lines().count(), 40, "{log}");
    env.fsck();
}

#[test]
fn stock_git_reads_the_state() {
    let env = TestEnv::new();
    env.work_order("wo-01", "One", &[], &["a"]);
    env.commit_all("init");
    env.run(&["halt", "wo-01", "--reason", "manual"]).success();
    let key = {
        let run = std::process::Command::new("sh")
            .arg("-c")
            .arg("printf 'git-arbiter work order wo-01\\n' | git hash-object --stdin")
            .output()
            .expect("hash-object");
        String::from_utf8(run.stdout)
            .expect("utf-8")
            .trim()
            .to_owned()
    };
    let note = env.git(&["notes", "--ref=arbiter", "show", &key]);
    let record: serde_json::Value = serde_json::from_str(&note).expect("note is JSON");
    assert_eq!(record["version"], 1);
    assert_eq!(record["wo"], "wo-01");
    assert_eq!(record["halted"], true);
    assert_eq!(record["halt_reason"], "manual");
    // The key blob is reachable from the notes tree, so gc and `git notes prune` keep the state.
    env.git(&["notes", "--ref=arbiter", "prune"]);
    assert!(env.git(&["notes", "--ref=arbiter", "list"]).contains(&key));
    env.fsck();
}

#[test]
fn corrupt_note_is_a_clear_input_error() {
    let env = TestEnv::new();
    env.work_order("wo-01", "One", &[], &["a"]);
    env.commit_all("init");
    env.run(&["halt", "wo-01", "--reason", "manual"]).success();
    let key = env
        .git(&["notes", "--ref=arbiter", "list"])
        .split_whitespace()
        .nth(1)
        .expect("key")
        .to_owned();
    env.git(&[
        "notes",
        "--ref=arbiter",
        "add",
        "-f",
        "-m",
        "{not json",
        &key,
    ]);
    let before = env.git(&["rev-parse", "refs/notes/arbiter"]);
    let run = env.run(&["status"]).code(2);
    assert!(
        run.stderr
            .starts_with("error: corrupt note for work order 'wo-01'"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint: "), "{}", run.stderr);
    assert_eq!(env.git(&["rev-parse", "refs/notes/arbiter"]), before);
}

#[test]
fn a_stale_lock_is_reported_with_how_to_fix_it() {
    let env = TestEnv::new();
    env.work_order("wo-01", "One", &[], &["a"]);
    env.commit_all("init");
    env.run(&["halt", "wo-01", "--reason", "first"]).success();
    // A writer killed between taking the ref's lock and renaming it.
    let lock = env.repo.join(".git/refs/notes/arbiter.lock");
    std::fs::write(&lock, "").expect("lock");
    env.git(&["config", "core.filesRefLockTimeout", "1"]);
    let before = env.git(&["rev-parse", "refs/notes/arbiter"]);
    let run = env.run(&["clear", "wo-01"]).code(2);
    assert!(
        run.stderr.contains(&format!(
            "error: cannot update refs/notes/arbiter: {} exists",
            lock.display()
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "hint: if no git-arbiter or git process is running, remove the stale lock file {}",
            lock.display()
        )),
        "{}",
        run.stderr
    );
    assert_eq!(env.git(&["rev-parse", "refs/notes/arbiter"]), before);
    std::fs::remove_file(&lock).expect("remove");
    env.run(&["clear", "wo-01"]).success();
}

/// A work order's first record also adds its key blob under `keys/` in the
/// notes tree; the tree in between is never written, so stock git finds
/// nothing dangling.
#[test]
fn first_records_leave_no_dangling_objects() {
    let env = TestEnv::new();
    env.work_order("wo-01", "One", &[], &["a"]);
    env.work_order("wo-02", "Two", &[], &["b"]);
    env.commit_all("init");
    env.run(&["halt", "wo-01", "--reason", "manual"]).success();
    env.run(&["halt", "wo-02", "--reason", "manual"]).success();
    env.run(&["batch"]).success();
    let fsck = env.git_try_in(&env.repo, &["fsck", "--strict"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stderr);
    assert_eq!(fsck.stdout, "", "objects nothing refers to");
}

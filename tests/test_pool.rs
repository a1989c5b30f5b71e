//! The pool of warm worktrees (issue 12): reuse across orders and runs,
//! semantics of a fresh worktree for tracked and untracked content, ignored
//! build caches kept, the setup hook, halted orders' worktrees left alone,
//! stock git as the oracle, and crash recovery of a switch.

use std::path::{Path, PathBuf};

use crate::common::{Run, TestEnv};

/// `.gitignore` with `target/` and `node_modules/`, and orders `wo-<x>`
/// each declaring `<x>.txt`.
fn repo(ids: &[&str]) -> TestEnv {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.write(".gitignore", "target/\nnode_modules/\n");
    env.write("package-lock.json", "{\"v\":1}\n");
    for x in ids {
        env.work_order(
            &format!("wo-{x}"),
            &format!("Order {x}"),
            &[],
            &[&format!("{x}.txt")],
        );
    }
    env.commit_all("init");
    env
}

/// One order per round, one slot: every order after the first gets the
/// worktree the previous one gave back.
fn round(env: &TestEnv, extra: &[&str]) -> Run {
    // Lockstep, one order per round: each lands (and hands its worktree
    // back) before the next starts, so the next reuses it.
    let mut args = vec![
        "round",
        "--json",
        "--schedule",
        "rounds",
        "--max",
        "1",
        "--max-total",
        "1",
    ];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// Writes the order's own file, a build cache, and (as `wo-a`) a tracked
/// change and an untracked file left after its commit (by the gate below).
const BUILD: &str = r#"echo "$ARBITER_WO $ARBITER_WORKTREE" >> "$ARBITER_REPO/../worktrees"
if [ "$ARBITER_WO" = wo-b ]; then
  { echo "status:"; git status --porcelain --ignored
    echo "junk:"; test -e junk.txt && echo present
    echo "readme:"; cat README
    echo "cache:"; cat target/cache
    echo "tree:"; git rev-parse HEAD^{tree}
  } > "$ARBITER_REPO/../seen-by-b" 2>&1
fi
echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt"
mkdir -p target && echo "cache of $ARBITER_WO" >> target/cache"#;

/// Runs after the builder's work is committed: what it leaves is never merged.
const GATE: &str =
    r#"if [ "$ARBITER_WO" = wo-a ]; then echo junk > junk.txt; echo edited >> README; fi"#;

fn worktrees_used(env: &TestEnv) -> Vec<(String, PathBuf)> {
    std::fs::read_to_string(env.root.join("worktrees"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, p)| (id.to_owned(), PathBuf::from(p)))
        .collect()
}

/// One more order, `wo-c` (declaring `c.txt`), committed.
fn add_order_c(env: &TestEnv) {
    env.work_order("wo-c", "Order c", &[], &["c.txt"]);
    env.commit_all("order c");
}

fn pool_status(env: &TestEnv) -> Vec<serde_json::Value> {
    env.run(&["pool", "status", "--json"]).success().json()["worktrees"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Stock git accepts the worktree at `wt`: listed, clean, and (last) removable.
#[track_caller]
/// `git fsck --strict` is clean before and after `git worktree remove` of `wt`.
fn git_removes(env: &TestEnv, wt: &Path) {
    env.fsck();
    env.git(&["worktree", "remove", wt.to_str().expect("utf-8")]);
    env.fsck();
}

fn git_accepts(env: &TestEnv, wt: &Path) {
    let list = env.git(&["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(&format!("worktree {}", wt.display())),
        "git worktree list:\n{list}"
    );
    assert_eq!(
        env.git_in(wt, &["status", "--porcelain"]),
        "",
        "git status in {}",
        wt.display()
    );
}

#[test]
fn a_reused_worktree_holds_the_new_base_and_keeps_ignored_caches() {
    let env = repo(&["a", "b"]);
    round(&env, &["--build", BUILD, "--gate", GATE]).success();
    let used = worktrees_used(&env);
    assert_eq!(used.len(), 2, "{used:?}");
    assert_eq!(
        used[0].1, used[1].1,
        "wo-b reuses wo-a's worktree: {used:?}"
    );
    assert_eq!(used[0].1, env.worktree_root().join("pool/0"));

    let seen = std::fs::read_to_string(env.root.join("seen-by-b")).expect("wo-b looked");
    // wo-b's base is main after wo-a's merge: main's first parent now.
    let base_tree = env.rev("main^1^{tree}");
    assert_eq!(
        seen,
        format!("status:\n!! target/\njunk:\nreadme:\nbase\ncache:\ncache of wo-a\ntree:\n{base_tree}\n"),
        "tracked content equals the base, the untracked file is gone, the cache stays"
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("README")).expect("README"),
        "base\n",
        "the gate's edit was never merged"
    );

    // After the run: the builds' pooled worktree and the one the merge
    // queue verified in, free, clean, and stock git is happy with them.
    let rows = pool_status(&env);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r["state"] == "free"), "{rows:?}");
    let wt = env.worktree_root().join("pool/0");
    git_accepts(&env, &wt);
    assert_eq!(
        env.git_in(&wt, &["status", "--porcelain", "--ignored"]),
        "!! target/\n"
    );
    assert!(env.git(&["for-each-ref", "refs/heads/arbiter/"]).is_empty());
    git_removes(&env, &wt);
}

#[test]
fn without_keep_ignored_the_cache_goes_too() {
    let env = repo(&["a", "b"]);
    env.git(&["config", "arbiter.poolKeepIgnored", "false"]);
    round(&env, &["--build", BUILD, "--gate", GATE]).success();
    let seen = std::fs::read_to_string(env.root.join("seen-by-b")).expect("wo-b looked");
    assert!(
        seen.starts_with("status:\njunk:\nreadme:\nbase\ncache:\n"),
        "only wo-b's own cache is there: {seen}"
    );
    let wt = env.worktree_root().join("pool/0");
    assert_eq!(env.git_in(&wt, &["status", "--porcelain", "--ignored"]), "");
}

#[test]
fn the_pool_is_reused_across_runs_and_no_pool_makes_fresh_worktrees() {
    let env = repo(&["a", "b", "c"]);
    round(&env, &["--build", BUILD, "--once"]).success();
    round(&env, &["--build", BUILD, "--once"]).success();
    let used = worktrees_used(&env);
    assert_eq!(
        used[0].1, used[1].1,
        "a second run reuses the first one's worktree"
    );

    round(&env, &["--build", BUILD, "--no-pool"]).success();
    let used = worktrees_used(&env);
    assert_eq!(used[2], ("wo-c".into(), env.worktree_root().join("wo-c")));
    assert!(
        !env.worktree_root().join("wo-c").exists(),
        "--no-pool removes it"
    );
    env.fsck();
}

#[test]
fn setup_runs_once_per_worktree_and_again_when_its_inputs_change() {
    let env = repo(&["a", "b", "c", "d", "e"]);
    env.git(&[
        "config",
        "--add",
        "arbiter.setupInputs",
        "package-lock.json",
    ]);
    let setup = r#"mkdir -p node_modules && touch node_modules/.stamp && echo "$ARBITER_WO" >> "$ARBITER_REPO/../setups""#;
    let build =
        r#"test -e node_modules/.stamp || exit 9; echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt""#;
    let setups = || {
        std::fs::read_to_string(env.root.join("setups"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // Three orders share one worktree: one setup.
    env.git(&["mv", "work-orders/wo-d.md", "wo-d.md"]);
    env.git(&["mv", "work-orders/wo-e.md", "wo-e.md"]);
    env.commit_all("d and e later");
    round(&env, &["--build", build, "--setup", setup]).success();
    assert_eq!(setups(), ["wo-a"]);

    // A commit changes package-lock.json: the next order runs it again.
    env.write("package-lock.json", "{\"v\":2}\n");
    env.git(&["mv", "wo-d.md", "work-orders/wo-d.md"]);
    env.commit_all("new lock file, order d");
    round(&env, &["--build", build, "--setup", setup]).success();
    assert_eq!(setups(), ["wo-a", "wo-d"]);

    // Other changes (wo-d's own file) do not, and the config key works as the flag.
    env.git(&["config", "arbiter.setup", setup]);
    env.git(&["mv", "wo-e.md", "work-orders/wo-e.md"]);
    env.commit_all("order e");
    round(&env, &["--build", build]).success();
    assert_eq!(setups(), ["wo-a", "wo-d"]);
    let rows = pool_status(&env);
    assert!(rows[0]["last_setup_tree"].is_string(), "{rows:?}");
}

#[test]
fn a_failing_setup_is_a_retryable_setup_failure() {
    let env = repo(&["a"]);
    let setup = r#"echo "setup ran" ; test -e "$ARBITER_REPO/../setup-ok""#;
    let run = round(
        &env,
        &["--build", "echo a > a.txt", "--setup", setup, "--once"],
    )
    .code(0);
    let summary = run.json();
    assert_eq!(summary["done"], serde_json::json!([]), "{summary}");
    let status = env.run(&["status", "--json"]).success().json();
    let row = &status["orders"][0];
    assert_eq!(row["status"], "needs_rework", "{row}");
    let show = env.run(&["show", "wo-a", "--json"]).success().stdout;
    assert!(
        show.contains("setup '"),
        "the reason names the setup: {show}"
    );
    let log = std::fs::read_to_string(env.repo.join(".git/arbiter/logs/wo-a/attempt-1.log"))
        .expect("attempt log");
    assert!(
        log.contains("setup ran"),
        "setup output goes to the attempt log: {log}"
    );

    std::fs::write(env.root.join("setup-ok"), "").expect("write");
    round(&env, &["--build", "echo a > a.txt", "--setup", setup]).success();
}

#[test]
fn a_halted_orders_worktree_leaves_the_pool_untouched_until_clear() {
    let env = repo(&["a", "b"]);
    // wo-a touches an undeclared file (drift: halted) and leaves things behind.
    let build = r#"echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt"
echo "$ARBITER_WO $ARBITER_WORKTREE" >> "$ARBITER_REPO/../worktrees"
if [ "$ARBITER_WO" = wo-a ]; then echo oops > README; mkdir -p target; echo kept > target/cache; fi"#;
    let gate = r#"if [ "$ARBITER_WO" = wo-a ]; then echo left > untracked.txt; fi"#;
    round(&env, &["--build", build, "--gate", gate]).code(1);
    let used = worktrees_used(&env);
    assert_eq!(used.len(), 2, "{used:?}");
    assert_ne!(
        used[0].1, used[1].1,
        "the halted order's worktree is not reused"
    );
    let halted_wt = used[0].1.clone();
    assert_eq!(
        std::fs::read_to_string(halted_wt.join("untracked.txt")).expect("kept"),
        "left\n"
    );
    assert_eq!(
        std::fs::read_to_string(halted_wt.join("target/cache")).expect("kept"),
        "kept\n"
    );
    assert_eq!(
        env.git_in(&halted_wt, &["symbolic-ref", "--short", "HEAD"]),
        "arbiter/wo-a\n"
    );
    let rows = pool_status(&env);
    let states: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or(""),
                r["state"].as_str().unwrap_or(""),
            )
        })
        .collect();
    // The other order's worktree and the merge queue's, free.
    assert_eq!(states, [("0", "left"), ("1", "free"), ("2", "free")]);

    // The next run does not touch it either.
    add_order_c(&env);
    round(&env, &["--build", build]).code(1);
    assert_eq!(worktrees_used(&env)[2].1, used[1].1);
    assert!(halted_wt.join("untracked.txt").exists());

    // The escalation names it.
    let human = env
        .run(&["round", "--max-total", "1", "--build", build])
        .code(1);
    assert!(
        human
            .stdout
            .contains(&format!("worktree: {}", halted_wt.display())),
        "{}",
        human.stdout
    );

    // `clear` removes it with the branch.
    env.run(&["clear", "wo-a"]).success();
    assert!(!halted_wt.exists());
    assert!(env
        .git(&["for-each-ref", "refs/heads/arbiter/wo-a"])
        .is_empty());
    env.fsck();
}

#[test]
fn stock_git_accepts_every_pooled_worktree() {
    let env = repo(&["a", "b", "c", "d"]);
    // Two slots: two pooled worktrees building, and a third when an order
    // is dispatched before the one it follows has landed and given its back.
    env.run(&[
        "round",
        "--json",
        "--max",
        "2",
        "--max-total",
        "2",
        "--build",
        BUILD,
    ])
    .success();
    let rows = pool_status(&env);
    assert!((2..=3).contains(&rows.len()), "{rows:?}");
    for row in &rows {
        let wt = PathBuf::from(row["path"].as_str().expect("path"));
        git_accepts(&env, &wt);
    }
    env.fsck();
    // Free pooled worktrees are no leftovers to doctor.
    env.run(&["doctor"]).success();
    for row in &rows {
        env.git(&["worktree", "remove", row["path"].as_str().expect("path")]);
    }
    assert_eq!(
        env.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    // Bookkeeping of worktrees removed by hand goes with the next prune.
    env.run(&["pool", "prune"]).success();
    assert!(pool_status(&env).is_empty());
}

#[test]
fn pool_size_bounds_the_free_worktrees_and_prune_removes_them() {
    let env = repo(&["a", "b", "c"]);
    env.git(&["config", "arbiter.poolSize", "1"]);
    env.run(&[
        "round",
        "--json",
        "--max",
        "3",
        "--max-total",
        "3",
        "--build",
        BUILD,
    ])
    .success();
    let rows = pool_status(&env);
    assert_eq!(
        rows.len(),
        1,
        "extra worktrees are removed when freed: {rows:?}"
    );
    let out = env.run(&["pool", "prune", "--all"]).success().stdout;
    assert!(out.starts_with("removed "), "{out}");
    assert!(pool_status(&env).is_empty());
    assert_eq!(
        env.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
}

#[test]
fn pool_max_bytes_strips_the_least_recently_used_caches() {
    let env = repo(&["a", "b"]);
    env.git(&["config", "arbiter.poolMaxBytes", "10"]);
    let build = r#"echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt"; mkdir -p target; head -c 100 /dev/zero > target/big"#;
    env.run(&[
        "round",
        "--json",
        "--max",
        "2",
        "--max-total",
        "2",
        "--build",
        build,
    ])
    .success();
    let rows = pool_status(&env);
    let total: u64 = rows
        .iter()
        .filter_map(|r| r["ignored_bytes"].as_u64())
        .sum();
    assert!(total <= 10, "the budget holds: {rows:?}");
}

/// The ignored content a worktree keeps (a whole `target/` or
/// `node_modules/`, often hundreds of thousands of files) is only walked
/// for its size when a budget needs it: without `arbiter.poolMaxBytes` a
/// give-back records no size, and `pool status` measures what it shows.
/// Once a budget is set, a worktree freed before it is measured once, and
/// its size recorded.
#[test]
fn kept_caches_are_measured_only_for_a_budget_or_for_pool_status() {
    let env = repo(&["a", "b"]);
    let build = r#"echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt"; mkdir -p target; head -c 100 /dev/zero > target/big"#;
    env.run(&["round", "--max-total", "2", "--build", build])
        .success();
    let recorded = |n: &str| -> serde_json::Value {
        let ledger = env.repo.join(format!(".git/arbiter/pool/{n}.json"));
        let entry: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&ledger).expect("ledger")).expect("json");
        entry["ignored_bytes"].clone()
    };
    for n in ["0", "1"] {
        assert!(
            recorded(n).is_null(),
            "measured at give-back without a budget"
        );
    }
    let rows = pool_status(&env);
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row["state"], "free");
        assert_eq!(row["ignored_bytes"], 100, "{rows:?}");
    }
    // With a budget the give-back measures, and the worktree freed before
    // it is measured too.
    env.git(&["config", "arbiter.poolMaxBytes", "1g"]);
    add_order_c(&env);
    round(&env, &["--build", build]).success();
    for n in ["0", "1"] {
        assert_eq!(recorded(n), 100, "pool/{n}");
    }
}

#[test]
fn bad_pool_config_is_one_line_and_exit_2() {
    let env = repo(&["a"]);
    env.git(&["config", "arbiter.pool", "maybe"]);
    let run = round(&env, &["--build", "true"]).code(2);
    assert!(
        run.stderr
            .starts_with("error: config arbiter.pool = 'maybe' is not a boolean"),
        "{}",
        run.stderr
    );
    env.git(&["config", "--unset", "arbiter.pool"]);
    env.git(&["config", "arbiter.poolSize", "0"]);
    round(&env, &["--build", "true"]).code(2);
    env.git(&["config", "--unset", "arbiter.poolSize"]);
    env.git(&["config", "arbiter.poolMaxBytes", "lots"]);
    round(&env, &["--build", "true"]).code(2);
    assert!(
        env.git(&["for-each-ref", "refs/notes/"]).is_empty(),
        "nothing changed"
    );
}

/// A removal killed midway (gix deletes a registration's files in any
/// order) can leave `.git/worktrees/<n>` without its `gitdir`: neither gix
/// nor git lists it then, and only the next run can drop it. One that is
/// locked (an `add` in progress) stays.
#[test]
fn a_registration_a_killed_removal_left_is_pruned_by_the_next_run() {
    let env = repo(&["a", "b"]);
    // Two slots: two pooled worktrees, both free after the run.
    env.run(&["round", "--max-total", "2", "--build", BUILD])
        .success();
    let pool = env.worktree_root().join("pool/1");
    assert!(pool.is_dir());
    let registration = env.repo.join(".git/worktrees/1");
    std::fs::remove_dir_all(&pool).expect("the folder goes first");
    std::fs::remove_file(registration.join("gitdir")).expect("then gitdir");
    // An add killed after it locked the registration, before `gitdir`.
    let killed_add = env.repo.join(".git/worktrees/killed");
    std::fs::create_dir_all(&killed_add).expect("mkdir");
    std::fs::write(killed_add.join("locked"), "initializing\n").expect("lock");
    // A worktree locked by hand stays whatever it holds.
    let locked = env.repo.join(".git/worktrees/someone");
    std::fs::create_dir_all(&locked).expect("mkdir");
    std::fs::write(locked.join("locked"), "on a USB disk\n").expect("lock");
    // The next run needs one worktree: it takes the free `pool/0`.
    add_order_c(&env);
    round(&env, &["--build", BUILD]).success();
    assert!(
        !registration.exists(),
        "the half-removed registration is gone"
    );
    assert!(!killed_add.exists(), "a killed add's registration is gone");
    assert!(locked.exists(), "a registration locked by hand stays");
    std::fs::remove_dir_all(&locked).expect("tidy");
    env.fsck();
}

/// A removal killed midway (folders are deleted in no set order) can leave
/// a pooled worktree whose folder lost its `.git` file, or whose
/// registration lost its `HEAD` and `commondir` but not `gitdir`: no longer
/// a checkout (stock git says "not a git repository" there), yet listed.
/// The next run removes both, even when it takes no worktree.
#[test]
fn a_pooled_worktree_a_killed_removal_broke_is_removed_by_the_next_run() {
    let env = repo(&["a", "b"]);
    env.run(&["round", "--max-total", "2", "--build", BUILD])
        .success();
    let pool = env.worktree_root().join("pool");
    std::fs::remove_file(pool.join("0/.git")).expect("the .git file goes first");
    for file in ["HEAD", "commondir"] {
        std::fs::remove_file(env.repo.join(".git/worktrees/1").join(file)).expect("rm");
    }
    let broken = env.git_try_in(&pool.join("1"), &["status"]);
    assert!(
        broken.stderr.contains("not a git repository"),
        "{}",
        broken.stderr
    );
    // Nothing to build: recovery alone must clear them.
    env.run(&["round", "--build", BUILD]).success();
    for n in ["0", "1"] {
        let pool = env.worktree_root().join("pool").join(n);
        assert!(!pool.exists(), "{} is left", pool.display());
        assert!(!env.repo.join(".git/worktrees").join(n).exists());
    }
    let list = env.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    // And a run that takes a worktree makes a sound one.
    add_order_c(&env);
    round(&env, &["--build", BUILD]).success();
    let pool = env.worktree_root().join("pool/0");
    assert_eq!(env.git_in(&pool, &["status", "--porcelain"]), "");
    env.fsck();
}

/// A run killed while it made a pooled worktree (its entry says `creating`,
/// the folder holds part of a checkout, nothing is registered yet) leaves a
/// folder the next run may not need that number for: its recovery removes
/// it anyway, and so does `pool prune`; neither leaves the number taken.
#[test]
fn a_worktree_a_killed_creation_left_half_made_is_removed() {
    for recovery in ["round", "prune"] {
        let env = repo(&["a", "b"]);
        env.run(&["round", "--max-total", "2", "--build", BUILD])
            .success();
        let half_made = env.worktree_root().join("pool/2");
        std::fs::create_dir_all(&half_made).expect("mkdir");
        std::fs::write(half_made.join("README"), "base\n").expect("part of a checkout");
        let entry = env.repo.join(".git/arbiter/pool/2.json");
        std::fs::write(
            &entry,
            r#"{"state": "creating", "pid": 4242, "branch": "arbiter/wo-x", "last_use": 1}"#,
        )
        .expect("entry");
        // One killed before it had a folder takes no space: not listed.
        let no_folder = env.repo.join(".git/arbiter/pool/3.json");
        std::fs::write(
            &no_folder,
            r#"{"state": "creating", "pid": 4243, "branch": "arbiter/wo-y", "last_use": 1}"#,
        )
        .expect("entry");
        // Someone else's folder in the pool, without our entry, stays.
        let foreign = env.worktree_root().join("pool/mine");
        std::fs::create_dir_all(&foreign).expect("mkdir");
        // It takes disk space: `pool status` shows it, held while a run
        // (its lock) makes it, broken once nobody does.
        let row_2 = || {
            pool_status(&env)
                .into_iter()
                .find(|row| row["name"] == "2")
                .expect("the half-made worktree is listed")
        };
        let making =
            std::fs::File::create(env.repo.join(".git/arbiter/pool/2.lock")).expect("lock file");
        fs4::FileExt::try_lock(&making).expect("lock");
        let held = row_2();
        assert_eq!(held["state"], "held");
        assert_eq!(held["held_by"], 4242);
        assert_eq!(held["branch"], "arbiter/wo-x");
        // Unlocked before closed: a child another test's thread forks now
        // would hold a copy of the file, and with it the lock, until it execs.
        fs4::FileExt::unlock(&making).expect("unlock");
        drop(making);
        let broken = row_2();
        assert!(
            !pool_status(&env).iter().any(|row| row["name"] == "3"),
            "a creation killed before its folder is listed"
        );
        assert_eq!(broken["state"], "broken");
        assert_eq!(broken["path"], half_made.to_str().expect("utf-8"));
        assert_eq!(broken["held_by"], serde_json::Value::Null);
        if recovery == "round" {
            // Needs one worktree: it takes the free `pool/0`.
            add_order_c(&env);
            round(&env, &["--build", BUILD]).success();
        } else {
            env.run(&["pool", "prune"]).success();
        }
        assert!(
            !half_made.exists(),
            "{recovery}: the half-made folder is left"
        );
        assert!(!entry.exists(), "{recovery}: its entry is left");
        assert!(
            !no_folder.exists(),
            "{recovery}: the folderless entry is left"
        );
        assert!(foreign.exists(), "{recovery}: a folder not ours is removed");
        std::fs::remove_dir_all(&foreign).expect("tidy");
        env.fsck();
    }
}

/// A conductor killed while it reset a pooled worktree's index leaves its
/// `index.lock` (marked as ours) in a worktree the next run may not need:
/// its recovery removes the lock anyway, since it can hold the worktree.
#[test]
fn an_index_lock_a_killed_reset_left_in_a_free_worktree_goes() {
    let env = repo(&["a", "b"]);
    env.run(&["round", "--max-total", "2", "--build", BUILD])
        .success();
    let git_dir = env.repo.join(".git/worktrees/1");
    std::fs::write(git_dir.join("arbiter-index-lock"), "4242\n").expect("marker");
    std::fs::write(git_dir.join("index.lock"), "").expect("lock");
    add_order_c(&env);
    round(&env, &["--build", BUILD]).success();
    assert!(!git_dir.join("index.lock").exists());
    assert!(!git_dir.join("arbiter-index-lock").exists());
    // Without our marker a lock is someone else's: recovery leaves it.
    std::fs::write(git_dir.join("index.lock"), "").expect("lock");
    round(&env, &["--build", BUILD]).success();
    assert!(git_dir.join("index.lock").exists());
    std::fs::remove_file(git_dir.join("index.lock")).expect("tidy");
}

#[test]
fn a_worktree_killed_mid_switch_is_removed_by_the_next_run() {
    // `checkout-files.after#2`: the first is the merge updating main's checkout.
    for point in [
        "pool-switch.before",
        "checkout-files.after#2",
        "pool-switch.after",
        "pool-clean.after",
    ] {
        let env = repo(&["a", "b"]);
        let mut killed = env.command_in(
            &env.repo,
            &[
                "round",
                "--schedule",
                "rounds",
                "--max",
                "1",
                "--max-total",
                "1",
                "--build",
                BUILD,
            ],
        );
        killed.env("ARBITER_CRASH_AT", point);
        let out = killed.output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = point.split('#').next().unwrap_or(point);
        assert!(
            stderr.contains(&format!("arbiter crash point={name}")),
            "{point}: {stderr}"
        );
        if point == "pool-switch.before" {
            let rows = pool_status(&env);
            assert_eq!(rows[0]["state"], "broken", "found mid-switch: {rows:?}");
        }
        round(&env, &["--build", BUILD]).success();
        let done = env.run(&["status", "--json"]).success().json();
        for row in done["orders"].as_array().expect("orders") {
            assert_eq!(row["status"], "done", "{point}: {row}");
        }
        for row in pool_status(&env) {
            assert_eq!(row["state"], "free", "{point}: {row}");
            git_accepts(&env, Path::new(row["path"].as_str().expect("path")));
        }
        assert!(
            env.git(&["for-each-ref", "refs/heads/arbiter/"]).is_empty(),
            "{point}"
        );
        env.fsck();
    }
}

#[test]
fn races_use_the_pool() {
    let env = repo(&["a"]);
    let build = r#"echo "$ARBITER_INSTANCE" > a.txt; echo "$ARBITER_WORKTREE" >> "$ARBITER_REPO/../worktrees-race""#;
    env.run(&[
        "race",
        "wo-a",
        "-n",
        "2",
        "--max-total",
        "2",
        "--build",
        build,
        "--score",
        "echo 1",
    ])
    .success();
    let used = std::fs::read_to_string(env.root.join("worktrees-race")).expect("ran");
    assert!(used.lines().all(|l| l.contains("/pool/")), "{used}");
    let rows = pool_status(&env);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r["state"] == "free"), "{rows:?}");
    assert!(env
        .git(&["for-each-ref", "refs/heads/arbiter-race/"])
        .is_empty());
    env.fsck();
}

#[test]
fn a_file_the_new_base_no_longer_ignores_is_removed_on_switch() {
    let env = repo(&["a", "b"]);
    env.write(".gitignore", "target/\nnode_modules/\n*.log\n");
    env.commit_all("ignore logs");
    let gate = r#"if [ "$ARBITER_WO" = wo-a ]; then echo noise > build.log; fi"#;
    let build = r#"git status --porcelain --ignored > "$ARBITER_REPO/../status-$ARBITER_WO"; echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt""#;
    round(&env, &["--build", build, "--gate", gate, "--once"]).success();
    let wt = env.worktree_root().join("pool/0");
    assert!(wt.join("build.log").exists(), "kept while ignored");
    // The new base stops ignoring logs: the kept log would be untracked there.
    env.write(".gitignore", "target/\nnode_modules/\n");
    env.commit_all("logs are no longer ignored");
    round(&env, &["--build", build, "--gate", gate]).success();
    assert_eq!(
        std::fs::read_to_string(env.root.join("status-wo-b")).expect("seen"),
        "",
        "wo-b's worktree looks fresh"
    );
    assert!(!wt.join("build.log").exists());
}

#[test]
fn pool_status_shows_each_worktree_and_prune_keeps_what_is_not_free() {
    let env = repo(&["a", "b"]);
    let build = r#"echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt"; mkdir -p target; echo 12345678 > target/cache
if [ "$ARBITER_WO" = wo-a ]; then echo oops > README; fi"#;
    round(&env, &["--build", build]).code(1);
    insta::assert_snapshot!(env.run(&["pool", "status"]).snapshot(&env), @r"
    n  state  branch        held by  base          ignored  last setup  path
    0  left   arbiter/wo-a  -        [SHORT]  -        -           $TEST_ENV/repo.arbiter/pool/0
    1  free   -             -        [SHORT]  9 B      -           $TEST_ENV/repo.arbiter/pool/1
    [stderr]
    [exit status: 0]
    ");
    // The halted order's worktree is not free: prune leaves it to `clear`.
    let pruned = env.run(&["pool", "prune", "--all"]).success();
    insta::assert_snapshot!(pruned.snapshot(&env), @r"
    removed $TEST_ENV/repo.arbiter/pool/1
    [stderr]
    arbiter pool prune removed=1
    [exit status: 0]
    ");
    insta::assert_snapshot!(env.run(&["pool", "status"]).snapshot(&env), @r"
    n  state  branch        held by  base          ignored  last setup  path
    0  left   arbiter/wo-a  -        [SHORT]  -        -           $TEST_ENV/repo.arbiter/pool/0
    [stderr]
    [exit status: 0]
    ");
}

/// The give-back compares each tracked file's stat data with its index entry
/// instead of reading it: an edit that keeps the size and the modification
/// time, and a tracked folder swapped for a link to a copy of itself (every
/// file behind it has the same stat data), are still found and undone.
#[test]
fn edits_that_keep_size_and_mtime_are_undone_before_reuse() {
    let env = repo(&["a", "b"]);
    env.write("sub/f.txt", "tracked\n");
    env.commit_all("a folder");
    let gate = r#"if [ "$ARBITER_WO" = wo-a ]; then
  printf 'BASE\n' > README.new && touch -r README README.new && mv README.new README
  mv sub "$ARBITER_REPO/../moved-sub" && ln -s "$ARBITER_REPO/../moved-sub" sub
fi"#;
    let build = r#"echo "$ARBITER_WO $ARBITER_WORKTREE" >> "$ARBITER_REPO/../worktrees"
if [ "$ARBITER_WO" = wo-b ]; then
  { git status --porcelain; cat README; test -L sub && echo "sub is a link"; cat sub/f.txt
  } > "$ARBITER_REPO/../seen-by-b" 2>&1
fi
echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt""#;
    round(&env, &["--build", build, "--gate", gate]).success();
    let used = worktrees_used(&env);
    assert!(
        used.len() == 2 && used[0].1 == used[1].1,
        "wo-b reuses wo-a's worktree: {used:?}"
    );
    assert_eq!(
        std::fs::read_to_string(env.root.join("seen-by-b")).expect("wo-b looked"),
        "base\ntracked\n",
        "wo-b's worktree holds its base: clean, README restored, sub a folder again"
    );
    let wt = env.worktree_root().join("pool/0");
    git_accepts(&env, &wt);
    env.fsck();
}

/// A `post-commit` hook runs in the worktree when git commits the
/// builder's leftovers; what it leaves there was never proved clean, so
/// the next order on that worktree must not find it.
#[test]
fn what_a_post_commit_hook_leaves_is_gone_before_reuse() {
    let env = repo(&["a", "b"]);
    env.hook(
        "post-commit",
        "#!/bin/sh\necho junk > junk.txt\necho edited >> README\n",
    );
    let build = r#"echo "$ARBITER_WO $ARBITER_WORKTREE" >> "$ARBITER_REPO/../worktrees"
test ! -e junk.txt && test "$(cat README)" = base && echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt""#;
    let run = round(&env, &["--build", build]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let used = worktrees_used(&env);
    assert_eq!(used.len(), 2, "{used:?}");
    assert_eq!(
        used[0].1, used[1].1,
        "wo-b reuses wo-a's worktree: {used:?}"
    );
    env.fsck();
}

/// The shared index files in the git dir of the worktree at `wt`.
fn shared_indexes(env: &TestEnv, wt: &Path) -> Vec<String> {
    let git_dir = env.git_in(wt, &["rev-parse", "--absolute-git-dir"]);
    let mut names: Vec<String> = std::fs::read_dir(git_dir.trim())
        .expect("git dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("sharedindex."))
        .collect();
    names.sort();
    names
}

/// `git ls-files -s` as it is when the index of `wt` holds exactly HEAD's tree.
fn index_holds_head(env: &TestEnv, wt: &Path) {
    let tree: String = env
        .git_in(wt, &["ls-tree", "-r", "HEAD"])
        .lines()
        .map(|l| {
            let (meta, path) = l.split_once('\t').expect("tab");
            let mut parts = meta.split(' ');
            let (mode, _, id) = (parts.next(), parts.next(), parts.next());
            format!("{} {} 0\t{path}\n", mode.expect("mode"), id.expect("id"))
        })
        .collect();
    assert_eq!(
        env.git_in(wt, &["ls-files", "-s"]),
        tree,
        "{}",
        wt.display()
    );
}

/// The last order took `wt` again, which keeps a split index holding
/// exactly HEAD's tree, and git accepts it.
fn switched_again_split(env: &TestEnv, wt: &Path) {
    assert_eq!(
        worktrees_used(env).last().map(|(_, p)| p.as_path()),
        Some(wt)
    );
    assert!(is_split(env, wt));
    index_holds_head(env, wt);
    git_accepts(env, wt);
}

/// The index file of the worktree at `wt` links to a shared index.
fn is_split(env: &TestEnv, wt: &Path) -> bool {
    let git_dir = env.git_in(wt, &["rev-parse", "--absolute-git-dir"]);
    let index = std::fs::read(Path::new(git_dir.trim()).join("index")).expect("index");
    index.windows(4).any(|w| w == b"link")
}

/// Pooled worktrees keep git's split index (that a switch writes only the
/// changed entries is pinned in `checkout`'s tests), and stock git reads
/// it, keeps it split when it writes it (a builder's `git add`), checks it,
/// and removes the worktree.
#[test]
fn pooled_worktrees_keep_a_split_index_that_git_reads_and_keeps() {
    let env = repo(&["a", "b", "c"]);
    round(&env, &["--build", BUILD]).success();
    let wt = env.worktree_root().join("pool/0");
    assert_eq!(worktrees_used(&env).len(), 3);
    assert!(worktrees_used(&env).iter().all(|(_, p)| *p == wt));
    assert!(is_split(&env, &wt));
    assert!(!shared_indexes(&env, &wt).is_empty());
    index_holds_head(&env, &wt);
    git_accepts(&env, &wt);
    env.fsck();

    // Stock git writes it split again; one written whole by git (`git
    // update-index` may) is split anew by the next switch.
    env.git_in(&wt, &["status"]);
    std::fs::write(wt.join("extra.txt"), "x\n").expect("write");
    env.git_in(&wt, &["add", "-A"]);
    assert!(is_split(&env, &wt));
    env.git_in(&wt, &["reset", "-q", "--hard"]);
    env.git_in(&wt, &["update-index", "--no-split-index"]);
    assert!(!is_split(&env, &wt));

    // The next order switches that worktree again from what git wrote.
    env.work_order("wo-d", "Order d", &[], &["d.txt"]);
    env.commit_all("one more order");
    round(&env, &["--build", BUILD]).success();
    switched_again_split(&env, &wt);
    git_removes(&env, &wt);
}

/// `core.splitIndex=false` keeps every index whole, and the shared index
/// files an earlier run made go with the next write.
#[test]
fn core_split_index_false_keeps_pooled_indexes_whole() {
    let env = repo(&["a", "b"]);
    round(&env, &["--build", BUILD]).success();
    let wt = env.worktree_root().join("pool/0");
    assert!(is_split(&env, &wt));
    // A shared index nothing names (a killed write left it) goes with the next one.
    let git_dir = env.git_in(&wt, &["rev-parse", "--absolute-git-dir"]);
    let stale = Path::new(git_dir.trim()).join(format!("sharedindex.{}", "0".repeat(40)));
    std::fs::write(&stale, "left by a killed write").expect("write");

    env.git(&["config", "core.splitIndex", "false"]);
    add_order_c(&env);
    round(&env, &["--build", BUILD]).success();
    assert!(!is_split(&env, &wt));
    assert!(
        shared_indexes(&env, &wt).is_empty(),
        "{:?}",
        shared_indexes(&env, &wt)
    );
    index_holds_head(&env, &wt);
    git_accepts(&env, &wt);
    env.fsck();
}

/// As from a hook: `git commit` sets `GIT_INDEX_FILE` to the index of the
/// checkout it commits in. That is the conductor's checkout, never a pooled
/// worktree's: switching and resetting a pooled worktree must not take it
/// for the worktree's own index (and overwrite the user's).
#[test]
fn a_hooks_index_file_names_the_checkouts_index_not_a_pooled_worktrees() {
    let mut env = repo(&["a"]);
    let main_index = env.repo.join(".git/index");
    env.set_env("GIT_INDEX_FILE", main_index.to_str().expect("utf-8"));
    round(&env, &["--build", BUILD]).success();
    // The next order's base differs from what the pooled worktree holds,
    // and the user's checkout is on another branch: nothing of the run
    // has any business with its index.
    env.write("README", "edited by the user\n");
    env.work_order("wo-b", "Order b", &[], &["b.txt"]);
    env.commit_all("more");
    env.git(&["checkout", "-q", "-b", "elsewhere"]);
    env.write("mine.txt", "staged by the user\n");
    env.git(&["add", "mine.txt"]);
    let staged = env.git(&["ls-files", "-s"]);
    round(&env, &["--build", BUILD, "--into", "main"]).success();
    env.unset_env("GIT_INDEX_FILE");
    let wt = env.worktree_root().join("pool/0");
    assert_eq!(worktrees_used(&env).len(), 2);
    assert!(worktrees_used(&env).iter().all(|(_, p)| *p == wt));
    assert_eq!(
        env.git(&["ls-files", "-s"]),
        staged,
        "the user's index is untouched"
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "A  mine.txt\n");
    index_holds_head(&env, &wt);
    git_accepts(&env, &wt);
    env.fsck();
}

/// A free worktree whose shared index is gone (removed by hand, or by a
/// tool cleaning git dirs) is reset in full by its next switch, not left
/// failing every order that gets it.
#[test]
fn a_worktree_whose_shared_index_is_gone_is_reset_not_wedged() {
    let env = repo(&["a"]);
    round(&env, &["--build", BUILD]).success();
    let wt = env.worktree_root().join("pool/0");
    let git_dir = env.git_in(&wt, &["rev-parse", "--absolute-git-dir"]);
    for name in shared_indexes(&env, &wt) {
        std::fs::remove_file(Path::new(git_dir.trim()).join(name)).expect("rm");
    }
    env.work_order("wo-b", "Order b", &[], &["b.txt"]);
    env.commit_all("one more order");
    round(&env, &["--build", BUILD]).success();
    switched_again_split(&env, &wt);
    env.fsck();
}

/// Takes at once in one process (a round's builders) each get a free
/// worktree while one is free: none is made anew. Each take used to lock
/// every free worktree in turn while looking for the most recently used,
/// so a take running beside it skipped them and made a new one.
#[test]
fn takes_at_once_share_the_free_worktrees_and_make_none_anew() {
    use git_arbiter::run::pool;
    const TAKERS: usize = 8;
    let env = repo(&[]);
    let ctx = env.context();
    let base = ctx.repo.head_id().expect("HEAD").detach();
    let opts = pool::Options {
        enabled: true,
        size: 2 * TAKERS,
        keep_ignored: true,
        ..pool::Options::default()
    };
    let pooled =
        || std::fs::read_dir(env.worktree_root().join("pool")).map_or(0, |dir| dir.count());
    // Each taker's context is one of the run's, as a round's builders'
    // are: the leases they take are given back through the run's context.
    let shared = ctx.share();
    for round in 0..60 {
        let barrier = std::sync::Barrier::new(TAKERS);
        let taken: Vec<PathBuf> = std::thread::scope(|scope| {
            let takers: Vec<_> = (0..TAKERS)
                .map(|i| {
                    let (ctx, barrier, opts) = (shared.local(), &barrier, &opts);
                    scope.spawn(move || {
                        let id = format!("r{round}-{i}");
                        barrier.wait();
                        pool::take(&ctx, opts, &id, &format!("arbiter/{id}"), base)
                            .expect("take")
                            .path
                    })
                })
                .collect();
            takers
                .into_iter()
                .map(|t| t.join().expect("taker"))
                .collect()
        });
        let mut distinct = taken.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            TAKERS,
            "round {round}: one worktree taken twice"
        );
        assert_eq!(
            pooled(),
            TAKERS,
            "round {round}: a worktree made while one was free"
        );
        for i in 0..TAKERS {
            let id = format!("r{round}-{i}");
            pool::give_back(&ctx, &id, &format!("arbiter/{id}"), false).expect("give back");
        }
    }
}

/// Issue 32: edits made to a free pooled worktree between runs (a leftover
/// background process, a person looking around) were trusted: the next
/// order's builder found them, and they landed in its merge. A take proves
/// the worktree equals the tree it was left at, by a means its folder's
/// time stamp, set back, cannot fool; what it undid is in the attempt log;
/// ignored caches stay.
#[test]
fn edits_to_a_free_pooled_worktree_are_undone_before_it_is_taken() {
    let env = repo(&["a", "b"]);
    env.write("sub/f.txt", "tracked\n");
    env.commit_all("a folder");
    let build = r#"echo "$ARBITER_WO $ARBITER_WORKTREE" >> "$ARBITER_REPO/../worktrees"
if [ "$ARBITER_WO" = wo-b ]; then
  { git status --porcelain --untracked-files=all; cat sub/f.txt; cat target/keep
  } > "$ARBITER_REPO/../seen-by-b" 2>&1
fi
echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt""#;
    env.run(&["round", "--max", "1", "--once", "--build", build])
        .success();
    let wt = env.worktree_root().join("pool/0");
    assert_eq!(pool_status(&env)[0]["state"], "free");
    // Someone else writes there: same size, times set back.
    let sub = wt.join("sub");
    let stamp = std::fs::metadata(&sub)
        .and_then(|m| m.modified())
        .expect("stamp");
    let file = sub.join("f.txt");
    let file_stamp = std::fs::metadata(&file)
        .and_then(|m| m.modified())
        .expect("stamp");
    std::fs::write(&file, "TRACKED\n").expect("edit");
    std::fs::write(sub.join("junk.txt"), "junk\n").expect("junk");
    std::fs::create_dir_all(wt.join("target")).expect("mkdir");
    std::fs::write(wt.join("target/keep"), "warm\n").expect("cache");
    for (path, at) in [(&file, file_stamp), (&sub, stamp)] {
        std::fs::File::open(path)
            .and_then(|f| f.set_modified(at))
            .expect("set the time back");
    }

    env.run(&["round", "--build", build]).success();
    let used = worktrees_used(&env);
    assert!(used.len() == 2 && used[0].1 == used[1].1, "{used:?}");
    assert_eq!(
        std::fs::read_to_string(env.root.join("seen-by-b")).expect("wo-b looked"),
        "tracked\nwarm\n",
        "wo-b's worktree is its base, its ignored cache kept"
    );
    let changed = env.git(&["diff", "--name-only", "main^1", "main"]);
    assert_eq!(changed, "b.txt\n", "only wo-b's own file landed");
    let log = std::fs::read_to_string(env.repo.join(".git/arbiter/logs/wo-b/attempt-1.log"))
        .expect("attempt log");
    assert!(
        log.contains("the pooled worktree was not as left")
            && log.contains("'sub/f.txt'")
            && log.contains("'sub/junk.txt'"),
        "{log}"
    );
    git_accepts(&env, &wt);
    env.fsck();
}

/// Issue 32: a setup that wrote tracked files had its edits blamed on the
/// orders (halted `undeclared_file_drift`), or landed silently in an
/// order's merge when the order declared the file (a lockfile). The setup
/// may make ignored files only: anything else stops the run as a
/// configuration error naming the files (exit 2, no attempt spent).
#[test]
fn a_setup_that_writes_tracked_or_unignored_files_is_a_setup_failure() {
    for (setup, event, named) in [
        (
            "echo SETUP >> package-lock.json",
            "setup_modified_tracked",
            "'package-lock.json'",
        ),
        ("echo KEY=1 > .env", "setup_left_untracked", "'.env'"),
    ] {
        let env = repo(&["a", "b"]);
        let before = env.rev("main");
        let run = env
            .run(&[
                "round",
                "--setup",
                setup,
                "--build",
                "echo $ARBITER_WO > ${ARBITER_WO#wo-}.txt",
            ])
            .code(2);
        assert!(
            run.stderr.contains(event) && run.stderr.contains(named),
            "{setup}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("ignore"),
            "the hint says what to do: {}",
            run.stderr
        );
        assert_eq!(env.rev("main"), before, "{setup}: nothing landed");
        let status = env.run(&["status", "--json"]).success().json();
        for row in status["orders"].as_array().expect("orders") {
            assert_eq!(row["attempts"], 0, "{setup}: no attempt spent: {row}");
            assert_ne!(row["halted"], true, "{setup}: {row}");
        }
        let log = env.run(&["log"]).success().stdout;
        assert!(log.contains(event), "{setup}: {log}");
    }
    // Only ignored files: the setup's business.
    let env = repo(&["a"]);
    env.run(&[
        "round",
        "--setup",
        "mkdir -p node_modules && echo dep > node_modules/dep",
        "--build",
        "echo a > a.txt",
    ])
    .success();
    assert_eq!(
        env.git(&["diff", "--name-only", "main^1", "main"]),
        "a.txt\n"
    );
}

/// A round with two slots and a pool of two worktrees whose landings are
/// slower than its builds: the gates run again on the merged tip, and
/// there they sleep, so orders wait in the merge queue.
fn behind_a_slow_queue(env: &TestEnv, build: &str) -> Run {
    env.git(&["config", "arbiter.poolSize", "2"]);
    let gate = r#"test -n "$ARBITER_WO" || sleep 0.4"#;
    env.run(&[
        "round",
        "--json",
        "--max",
        "2",
        "--max-total",
        "2",
        "--build",
        build,
        "--gate",
        gate,
    ])
}

/// Orders that wait in the merge queue do not hold worktrees a build needs:
/// with builds faster than the landings, a build that finds the pool full
/// takes back the worktree of an order waiting to land (its branch kept)
/// rather than check out a new one. Each worktree is told by the inode of
/// its `.git` file (made once, when the worktree is made): builds run in the
/// pool's two and the ones the merge queue made for its verifications while
/// builds held those (it takes nothing back); without the take-back, all 8
/// ran in new worktrees. Every order lands.
#[test]
fn a_build_takes_back_the_worktree_of_an_order_waiting_to_land() {
    let ids = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let env = repo(&ids);
    let build = r#"echo "$(stat -c %i .git) $ARBITER_WORKTREE" >> "$ARBITER_REPO/../builds"
echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt""#;
    behind_a_slow_queue(&env, build).success();
    for x in ids {
        assert_eq!(
            env.merges_in(&env.repo, "main", &format!("wo-{x}")),
            1,
            "wo-{x}"
        );
    }
    let builds = std::fs::read_to_string(env.root.join("builds")).expect("builds ran");
    let worktrees: std::collections::BTreeSet<&str> = builds.lines().collect();
    assert!(
        worktrees.len() <= 4,
        "builds ran in {} worktrees:\n{builds}",
        worktrees.len()
    );
    assert!(env.git(&["for-each-ref", "refs/heads/arbiter/"]).is_empty());
    env.fsck();
}

/// An order that halts in the merge queue after a build took its worktree
/// back still leaves its branch checked out for the user to look at.
#[test]
fn an_order_halted_after_its_worktree_was_taken_back_is_checked_out_again() {
    let ids = ["a", "b", "c", "d", "e", "f"];
    let env = repo(&ids);
    // wo-a touches an undeclared file: it halts when it lands.
    let build = r#"echo "$ARBITER_WO" > "${ARBITER_WO#wo-}.txt"
if [ "$ARBITER_WO" = wo-a ]; then echo oops > README; fi"#;
    behind_a_slow_queue(&env, build).code(1);
    for x in &ids[1..] {
        assert_eq!(
            env.merges_in(&env.repo, "main", &format!("wo-{x}")),
            1,
            "wo-{x}"
        );
    }
    let list = env.git(&["worktree", "list", "--porcelain"]);
    let kept = list
        .split("\n\n")
        .find(|w| w.contains("branch refs/heads/arbiter/wo-a"))
        .unwrap_or_else(|| panic!("wo-a's branch is checked out somewhere:\n{list}"));
    let path = kept
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("worktree "))
        .expect("path");
    assert_eq!(
        std::fs::read_to_string(Path::new(path).join("README")).expect("README"),
        "oops\n"
    );
    env.run(&["clear", "wo-a"]).success();
    assert!(!env.git(&["worktree", "list"]).contains("arbiter/wo-a"));
    env.fsck();
}

/// A builder that untracks a file and commits it as gone leaves the file
/// on disk: its leftovers are committed as `git add -A` commits them (the
/// file back), in a reused worktree as in a fresh one.
#[test]
fn a_file_a_builder_untracked_in_a_reused_worktree_is_committed_back() {
    let ids = ["a", "b", "c", "d", "e"];
    let env = TestEnv::new();
    env.write("lib/keep.txt", "kept\n");
    for x in ids {
        env.write(&format!("lib/{x}.txt"), "base\n");
        env.work_order(&format!("wo-{x}"), "Edit", &[], &[&format!("lib/{x}.txt")]);
    }
    env.commit_all("init");
    // The order's edit leaves its folder's names as they were.
    let build = r#"echo more >> "lib/${ARBITER_WO#wo-}.txt"
git rm -q --cached lib/keep.txt && git commit -qm "the builder's""#;
    env.run(&["round", "--max", "1", "--build", build])
        .success();
    for x in ids {
        assert_eq!(
            env.merges_in(&env.repo, "main", &format!("wo-{x}")),
            1,
            "wo-{x}"
        );
    }
    assert!(env.git(&["ls-files", "lib"]).contains("lib/keep.txt\n"));
    env.fsck();
}

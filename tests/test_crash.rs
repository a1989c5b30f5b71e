//! Issue 9: "after any crash or kill at any step, the next run recovers".
//!
//! Kill-point matrices: a debug build aborts (no unwinding, as with SIGKILL)
//! at the named point `ARBITER_CRASH_AT=<point>[#<n>]`; then the command a
//! user would run next must finish the work, and the repository must hold
//! each work order's merge exactly once, the expected tree, no stale
//! worktree, branch or lock file, pass `git fsck --strict`, and show every
//! order `done`. Each area is one test that tries every point and reports
//! every broken one at once.
//!
//! The random SIGKILL loops (one conductor, or one of two) are `#[ignore]`d
//! (slow): run them with
//! `cargo test --test cli test_crash -- --ignored`, `ARBITER_SEED=<n>` to
//! replay a run, `ARBITER_ITERATIONS=<n>` for more iterations.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::TestEnv;

/// Longer than any healthy run here takes: a run past it is reported as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// How one run of the binary ended.
struct Ended {
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    hung: bool,
}

impl Ended {
    fn crashed_at(&self, point: &str) -> bool {
        self.signal == Some(rustix::process::Signal::ABORT.as_raw())
            && self
                .stderr
                .contains(&format!("arbiter crash point={point}\n"))
    }

    fn ok(&self) -> bool {
        self.code == Some(0) && !self.hung
    }

    /// `exit 2: error: …` with the last lines of stderr.
    fn describe(&self) -> String {
        let how = if self.hung {
            format!("hung (killed after {}s)", RUN_TIMEOUT.as_secs())
        } else if let Some(sig) = self.signal {
            format!("signal {sig}")
        } else {
            format!("exit {}", self.code.unwrap_or(-1))
        };
        let tail: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.starts_with("arbiter ") || l.contains("error"))
            .collect();
        let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
        if tail.is_empty() {
            how
        } else {
            format!("{how}: {tail}")
        }
    }
}

/// Run `cmd`, killing it if it runs past `timeout`.
fn run_timed(mut cmd: Command, timeout: Duration) -> Ended {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let (status, hung) = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break (status, false);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break (child.wait().expect("reap"), true);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ended {
        code: status.code(),
        signal: status.signal(),
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
        hung,
    }
}

/// The binary in the main repository, killed at `crash` if given.
fn arbiter(env: &TestEnv, args: &[&str], crash: Option<&str>) -> Ended {
    let mut cmd = env.command_in(&env.repo, args);
    if let Some(spec) = crash {
        cmd.env("ARBITER_CRASH_AT", spec);
    }
    run_timed(cmd, RUN_TIMEOUT)
}

/// Stock git's stdout, or `None` when it fails.
fn git_ok(env: &TestEnv, args: &[&str]) -> Option<String> {
    let run = env.git_try_in(&env.repo, args);
    (run.code == 0).then_some(run.stdout)
}

/// `path -> "mode oid"` for every file of `rev`.
fn tree_of(env: &TestEnv, rev: &str) -> BTreeMap<String, String> {
    git_ok(env, &["ls-tree", "-r", "--full-tree", rev])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (meta, path) = l.split_once('\t')?;
            let mut meta = meta.split(' ');
            let (mode, _kind, oid) = (meta.next()?, meta.next()?, meta.next()?);
            Some((path.to_owned(), format!("{mode} {oid}")))
        })
        .collect()
}

/// The tree `base` plus `files` (path, content) as regular files.
fn expected_tree(
    env: &TestEnv,
    base: &str,
    files: &[(String, String)],
) -> BTreeMap<String, String> {
    let mut tree = tree_of(env, base);
    assert!(!tree.is_empty(), "no tree at {base}");
    let scratch = env.root.join("expected-blob");
    for (path, content) in files {
        std::fs::write(&scratch, content).expect("write blob");
        let oid = env.git(&["hash-object", scratch.to_str().expect("utf-8")]);
        tree.insert(path.clone(), format!("100644 {}", oid.trim()));
    }
    tree
}

/// What the repository must look like once the work is recovered.
struct Expect<'a> {
    /// Each must have landed exactly once on `main`'s first-parent chain and be `done`.
    orders: &'a [String],
    /// `main`'s tree.
    tree: &'a BTreeMap<String, String>,
    /// Branches under `arbiter/` that may stay (the user's own, for a standalone merge-back).
    kept_branches: &'a [&'a str],
}

/// Every invariant the repository breaks, one line each.
fn broken(env: &TestEnv, want: &Expect) -> Vec<String> {
    let mut out = Vec::new();

    // Exactly once.
    let log = git_ok(env, &["log", "--first-parent", "--format=%B", "main"]).unwrap_or_default();
    for id in want.orders {
        let trailer = format!("Arbiter-WO: {id}");
        let n = log.lines().filter(|l| l.trim() == trailer).count();
        if n != 1 {
            out.push(format!("{id} landed {n} times on main"));
        }
    }

    // The tree.
    let tree = tree_of(env, "main");
    if &tree != want.tree {
        let mut diff = Vec::new();
        for (path, entry) in want.tree {
            match tree.get(path) {
                None => diff.push(format!("missing {path}")),
                Some(got) if got != entry => diff.push(format!("wrong {path}")),
                _ => {}
            }
        }
        diff.extend(
            tree.keys()
                .filter(|p| !want.tree.contains_key(*p))
                .map(|p| format!("extra {p}")),
        );
        diff.truncate(6);
        out.push(format!("main's tree differs: {}", diff.join(", ")));
    }

    // Worktrees: only the main one and the free ones of the pool (on a
    // detached HEAD, clean), nothing else under the worktree dir or .git/worktrees.
    let list = git_ok(env, &["worktree", "list", "--porcelain"]).unwrap_or_default();
    let pool_dir = env.root.join("repo.arbiter/pool");
    let mut pooled = Vec::new();
    let mut linked = Vec::new();
    for block in list.split("\n\n") {
        let Some(path) = block.lines().find_map(|l| l.strip_prefix("worktree ")) else {
            continue;
        };
        let path = Path::new(path);
        if path == env.repo {
            continue;
        }
        if path.parent() == Some(pool_dir.as_path()) && block.lines().any(|l| l == "detached") {
            match env.git_try_in(path, &["status", "--porcelain"]) {
                run if run.code == 0 && run.stdout.is_empty() => {}
                run => out.push(format!(
                    "free pooled worktree {} is not clean: {:?}",
                    path.display(),
                    run.stdout
                        .lines()
                        .chain(run.stderr.lines())
                        .take(4)
                        .collect::<Vec<_>>()
                )),
            }
            pooled.push(path.file_name().map(|n| n.to_string_lossy().into_owned()));
        } else {
            linked.push(path.display().to_string());
        }
    }
    if !linked.is_empty() {
        let flags: Vec<&str> = list
            .lines()
            .filter(|l| l.starts_with("locked") || l.starts_with("prunable"))
            .collect();
        out.push(format!(
            "stale worktrees {linked:?} {}",
            if flags.is_empty() {
                String::new()
            } else {
                format!("({})", flags.join("; "))
            }
        ));
    }
    let entries = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let left: Vec<String> = entries(&env.root.join("repo.arbiter"))
        .into_iter()
        .filter(|e| e != "pool")
        .chain(
            entries(&pool_dir)
                .into_iter()
                .filter(|e| !pooled.contains(&Some(e.clone()))),
        )
        .collect();
    if !left.is_empty() {
        out.push(format!("worktree dir still holds {left:?}"));
    }
    let admin = entries(&env.repo.join(".git/worktrees"));
    if admin.len() != pooled.len() {
        out.push(format!(
            ".git/worktrees holds {admin:?} for {} free pooled worktrees",
            pooled.len()
        ));
    }

    // Branches.
    let refs = git_ok(
        env,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/arbiter/",
            "refs/heads/arbiter-race/",
        ],
    )
    .unwrap_or_default();
    let stale: Vec<&str> = refs
        .lines()
        .filter(|b| !want.kept_branches.contains(b))
        .collect();
    if !stale.is_empty() {
        out.push(format!("stale branches {stale:?}"));
    }

    // Lock files git (or gix) leaves: refs, index, packed-refs, HEAD, config,
    // per-worktree admin dirs. `.git/arbiter/*.lock` are flock files that
    // stay by design, and objects never hold locks.
    let mut locks = Vec::new();
    find_locks(&env.repo.join(".git"), &env.repo.join(".git"), &mut locks);
    if !locks.is_empty() {
        out.push(format!("lock files left: {locks:?}"));
    }

    // fsck: dangling objects are expected (a merge commit written before a
    // kill stopped the branch from moving to it); nothing else is.
    let fsck = env.git_try_in(&env.repo, &["fsck", "--strict"]);
    let bad: Vec<&str> = fsck
        .stdout
        .lines()
        .chain(fsck.stderr.lines())
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("error")
                || l.contains("missing")
                || l.contains("broken")
                || l.contains("warning")
        })
        .take(3)
        .collect();
    if fsck.code != 0 || !bad.is_empty() {
        out.push(format!("git fsck --strict: exit {} {bad:?}", fsck.code));
    }

    // The checked-out integration branch.
    match git_ok(env, &["status", "--porcelain"]) {
        Some(s) if s.is_empty() => {}
        Some(s) => out.push(format!(
            "main's worktree is not clean: {:?}",
            s.lines().take(4).collect::<Vec<_>>()
        )),
        None => out.push("git status failed".into()),
    }
    if git_ok(env, &["symbolic-ref", "HEAD"]).as_deref() != Some("refs/heads/main\n") {
        out.push("HEAD is no longer main".into());
    }

    // The state.
    let status = arbiter(env, &["status", "--json"], None);
    if !status.ok() {
        out.push(format!("status --json: {}", status.describe()));
    } else {
        let json: serde_json::Value = serde_json::from_str(&status.stdout).unwrap_or_default();
        let rows = json["orders"].as_array().cloned().unwrap_or_default();
        for id in want.orders {
            match rows.iter().find(|r| r["id"] == id.as_str()) {
                None => out.push(format!("status has no row for {id}")),
                Some(r) if r["status"] != "done" || r["halted"] != false => out.push(format!(
                    "{id} is {} (terminal {}, halt_reason {})",
                    r["status"], r["halted"], r["halt_reason"]
                )),
                _ => {}
            }
        }
    }
    out
}

fn find_locks(top: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if dir == top && (name == "objects" || name == "arbiter") {
            continue;
        }
        if path.is_dir() {
            find_locks(top, &path, out);
        } else if name.to_string_lossy().ends_with(".lock") {
            out.push(
                path.strip_prefix(top)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            );
        }
    }
}

/// Failures of one area, case by case.
#[derive(Default)]
struct Report {
    cases: usize,
    failures: Vec<(String, Vec<String>)>,
    unreached: Vec<String>,
    /// `point×n`: how many hits of each point were tried.
    reached: Vec<String>,
}

impl Report {
    fn absorb(&mut self, other: Report) {
        self.cases += other.cases;
        self.failures.extend(other.failures);
        self.unreached.extend(other.unreached);
        self.reached.extend(other.reached);
    }

    fn hits(&mut self, point: &str, n: u32) {
        if n > 0 {
            self.reached.push(format!("{point}x{n}"));
        }
    }

    fn add(&mut self, case: &str, problems: Vec<String>) {
        self.cases += 1;
        if !problems.is_empty() {
            self.failures.push((case.to_owned(), problems));
        }
    }

    /// Fail on any broken case, and on any point the matrix tried but
    /// never reached unless it starts with one of `may_skip` (the points
    /// that command has no business with): a kill case that never runs
    /// proves nothing, and with kill points compiled out (a release build)
    /// every case would pass unrun.
    #[track_caller]
    fn finish(mut self, area: &str, may_skip: &[&str]) {
        let unexpected: Vec<String> = self
            .unreached
            .iter()
            .filter(|p| !may_skip.iter().any(|s| p.starts_with(s)))
            .cloned()
            .collect();
        for point in unexpected {
            self.failures
                .push((point, vec![format!("{area} never reaches this point")]));
        }
        let mut text = format!(
            "{area}: {} of {} kill cases broke an invariant\n",
            self.failures.len(),
            self.cases
        );
        for (case, problems) in &self.failures {
            text.push_str(&format!("  {case}\n"));
            for p in problems {
                text.push_str(&format!("      - {p}\n"));
            }
        }
        if !self.reached.is_empty() {
            text.push_str(&format!("  (hits tried: {})\n", self.reached.join(" ")));
        }
        if !self.unreached.is_empty() {
            text.push_str(&format!("  (not reached: {})\n", self.unreached.join(" ")));
        }
        eprintln!("{text}");
        assert!(self.failures.is_empty(), "{text}");
    }
}

/// Run `each` for every point on two workers (the cases are independent
/// repositories), the reports kept in point order.
fn each_point(points: &[&'static str], each: impl Fn(&'static str, &mut Report) + Sync) -> Report {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&point) = points.get(i) else { break };
                let mut report = Report::default();
                each(point, &mut report);
                done.lock().expect("reports").insert(i, report);
            });
        }
    });
    let mut all = Report::default();
    for (_, report) in done.into_inner().expect("reports") {
        all.absorb(report);
    }
    all
}

/// Points a standalone `merge-back` has no business with: it builds
/// nothing and, landing through the merge queue as a conductor, records no
/// merge start (its dispatch bounds recovery) and removes no worktree.
const MERGE_BACK_SKIPS: &[&str] = &[
    "remote-",
    "dispatch.",
    "worktree-add.",
    "pool-switch.",
    "shared-index.",
    "build.",
    "command.",
    "leftovers",
    "attempt.",
    "verdict.",
    "verify.",
    "merge-start.",
    "worktree-remove.",
    "branch-delete.",
    "pool-clean.",
];

/// Points `race -n 2` has no business with: its instances start in fresh
/// pooled worktrees (no switch), its attempts end in those instances (not
/// in a round's build threads), its verdicts are picks, its merge is
/// verified by the instances' own gates, and its worktrees go back to the
/// pool rather than being removed.
const RACE_SKIPS: &[&str] = &[
    "remote-",
    "pool-switch.",
    "attempt.",
    "verdict.",
    "verify.",
    "merge-start.",
    "worktree-remove.",
];

/// Points `clear` has no business with: it builds and merges nothing.
const CLEAR_SKIPS: &[&str] = &[
    "remote-",
    "dispatch.",
    "worktree-add.",
    "pool-switch.",
    "shared-index.",
    "build.",
    "command.",
    "leftovers",
    "attempt.",
    "verdict.",
    "verify.",
    "merge-",
    "branch-cas.",
    "checkout-",
    "pool-clean.",
];

/// Merge-back points at which its start is recorded.
const RECORDED_BY_MERGE_BACK: &[&str] = &[
    "merge-start.after",
    "branch-cas.before",
    "branch-cas.after",
    "checkout-files.after",
    "checkout-index.after",
    "merge-recorded.before",
    "merge-recorded.after",
];

/// How one kill case went: the crashing run, then the recovery.
enum Kill {
    /// The point is reached fewer than n times: nothing to test.
    NotReached,
    /// The crashing run ended some other way: reported as is.
    Unexpected(String),
    Died,
}

fn kill_at(env: &TestEnv, args: &[&str], point: &str, nth: u32) -> Kill {
    let run = arbiter(env, args, Some(&spec(point, nth)));
    if run.crashed_at(point) {
        Kill::Died
    } else if run.ok() && !run.stderr.contains("arbiter crash point=") {
        Kill::NotReached
    } else {
        Kill::Unexpected(format!(
            "the run to be killed ended otherwise: {}",
            run.describe()
        ))
    }
}

/// A recovery command that must succeed; if it does not, whether a second
/// try does (to tell "wedged" from "needs two runs").
fn recover(env: &TestEnv, args: &[&str], what: &str, problems: &mut Vec<String>) -> bool {
    let run = arbiter(env, args, None);
    if run.ok() {
        return true;
    }
    let again = arbiter(env, args, None);
    problems.push(format!(
        "{what} failed: {}; run again: {}",
        run.describe(),
        if again.ok() {
            "exit 0".to_owned()
        } else {
            again.describe()
        }
    ));
    again.ok()
}

fn spec(point: &str, nth: u32) -> String {
    if nth == 1 {
        point.to_owned()
    } else {
        format!("{point}#{nth}")
    }
}

fn points_except(skip: &[&str]) -> Vec<&'static str> {
    git_arbiter::sys::crash::POINTS
        .iter()
        .copied()
        .filter(|p| !skip.iter().any(|s| p.starts_with(s)))
        .collect()
}

/// Hits tried per point, each in a fresh repository. The round below
/// reaches none more than 4 times (4 builds, 4 verdicts, 3 merges), so the
/// last try finds the run ending normally and the report shows the count.
const MAX_NTH: u32 = 5;

// ---------------------------------------------------------------- round

/// Three disjoint orders; `wo-c`'s first attempt fails its gate, so a round
/// hits the rework path and a second round (in a reused pooled worktree).
fn round_repo() -> (TestEnv, String) {
    let env = TestEnv::new();
    env.write("README", "base\n");
    for id in ["a", "b", "c"] {
        env.work_order(
            &format!("wo-{id}"),
            &format!("Order {id}"),
            &[],
            &[&format!("{id}.txt")],
        );
    }
    let base = env.commit_all("init");
    // One free pooled worktree stays: the round switches it (wo-c's second
    // attempt) and removes the two others, so it meets every worktree point.
    env.git(&["config", "arbiter.poolSize", "1"]);
    (env, base)
}

/// Deterministic content, whatever the attempt: the recovered tree must
/// equal the one a run without crash makes.
const ROUND_BUILD: &str = "echo \"$ARBITER_WO\" > \"${ARBITER_WO#wo-}.txt\"";
const ROUND_GATE: &str = "test \"$ARBITER_WO.$ARBITER_ATTEMPT\" != wo-c.1";

fn round_args() -> Vec<&'static str> {
    vec![
        "round",
        "--json",
        "--max-total",
        "4",
        "--build",
        ROUND_BUILD,
        "--gate",
        ROUND_GATE,
    ]
}

fn order_files(ids: &[&str]) -> (Vec<String>, Vec<(String, String)>) {
    (
        ids.iter().map(|id| format!("wo-{id}")).collect(),
        ids.iter()
            .map(|id| (format!("{id}.txt"), format!("wo-{id}\n")))
            .collect(),
    )
}

/// Points a round never reaches; they have their own matrices (a round's
/// merge records no start: its dispatch bounds recovery's search; a round
/// through a remote is in test_remote.rs).
const NOT_IN_A_ROUND: &[&str] = &["pick.", "clear.", "merge-start.", "remote-"];

#[test]
fn kill_point_matrix_round() {
    let (orders, files) = order_files(&["a", "b", "c"]);

    // A run without a crash, to check the expectation itself.
    let (env, base) = round_repo();
    let tree = expected_tree(&env, &base, &files);
    let want = Expect {
        orders: &orders,
        tree: &tree,
        kept_branches: &[],
    };
    let control = arbiter(&env, &round_args(), None);
    assert!(control.ok(), "control round: {}", control.describe());
    assert_eq!(broken(&env, &want), Vec::<String>::new(), "control round");

    let report = each_point(&points_except(NOT_IN_A_ROUND), |point, report| {
        for nth in 1..=MAX_NTH {
            let (env, base) = round_repo();
            let tree = expected_tree(&env, &base, &files);
            let want = Expect {
                orders: &orders,
                tree: &tree,
                kept_branches: &[],
            };
            let case = spec(point, nth);
            match kill_at(&env, &round_args(), point, nth) {
                Kill::NotReached => {
                    if nth == 1 {
                        report.add(&case, vec!["a round never reaches this point".into()]);
                    }
                    report.hits(point, nth - 1);
                    return;
                }
                Kill::Unexpected(why) => {
                    report.add(&case, vec![why]);
                    return;
                }
                Kill::Died => {}
            }
            let mut problems = Vec::new();
            recover(&env, &round_args(), "the next round", &mut problems);
            problems.extend(broken(&env, &want));
            report.add(&case, problems);
        }
        report.hits(point, MAX_NTH);
    });
    report.finish("round", &[]);
}

// ---------------------------------------------------------------- merge-back

/// `wo-1` declares `one.txt`; its branch `arbiter/wo-1` (plain git) writes it.
fn merge_back_repo() -> (TestEnv, String) {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-1", "One", &[], &["one.txt"]);
    let base = env.commit_all("init");
    env.git(&["checkout", "-q", "-b", "arbiter/wo-1"]);
    env.write("one.txt", "wo-1\n");
    env.commit_all("work");
    env.git(&["checkout", "-q", "main"]);
    (env, base)
}

/// The standalone `merge-back` killed at each point it reaches. What a user
/// does next, two ways: run the same merge-back again, then a round; or a
/// round straight away (`--build true`: the work is on the branch already).
/// Either way the branch's work lands exactly once and is never dropped.
#[test]
fn kill_point_matrix_merge_back() {
    let orders = vec!["wo-1".to_owned()];
    let files = vec![("one.txt".to_owned(), "wo-1\n".to_owned())];
    let round: &[&str] = &["round", "--json", "--build", "true"];
    let mut report = Report::default();
    for point in points_except(&["pick.", "clear."]) {
        for again in [true, false] {
            // Before its start is recorded a merge-back has written nothing
            // durable: the repository is as the user left it, and a round
            // leaves that hand-made branch alone (see
            // `test_reliability::a_round_leaves_work_made_by_hand_alone`).
            // From then on the next round must finish the merge-back.
            if !again && !RECORDED_BY_MERGE_BACK.contains(&point) {
                continue;
            }
            let (env, base) = merge_back_repo();
            match kill_at(&env, &["merge-back", "wo-1"], point, 1) {
                Kill::NotReached => {
                    if again {
                        report.unreached.push(point.to_owned());
                    }
                    break;
                }
                Kill::Unexpected(why) => {
                    report.add(point, vec![why]);
                    break;
                }
                Kill::Died => {}
            }
            let tree = expected_tree(&env, &base, &files);
            let want = Expect {
                orders: &orders,
                tree: &tree,
                kept_branches: &["arbiter/wo-1"],
            };
            let mut problems = Vec::new();
            let case = if again {
                recover(
                    &env,
                    &["merge-back", "wo-1"],
                    "merge-back again",
                    &mut problems,
                );
                recover(&env, round, "a round after it", &mut problems);
                format!("{point} (merge-back again, then round --build true)")
            } else {
                recover(&env, round, "a round", &mut problems);
                format!("{point} (round --build true)")
            };
            problems.extend(broken(&env, &want));
            report.add(&case, problems);
        }
    }
    report.finish("merge-back", MERGE_BACK_SKIPS);
}

// ---------------------------------------------------------------- race

fn race_repo() -> (TestEnv, String) {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.work_order("wo-1", "One", &[], &["one.txt"]);
    let base = env.commit_all("init");
    (env, base)
}

/// Every instance writes the same content, so whichever wins the tree is known.
const RACE_BUILD: &str = "echo wo-1 > one.txt";

fn race_args() -> Vec<&'static str> {
    vec![
        "race",
        "wo-1",
        "-n",
        "2",
        "--json",
        "--max-total",
        "4",
        "--build",
        RACE_BUILD,
        "--score",
        "echo $ARBITER_INSTANCE",
    ]
}

/// `race -n 2` killed at each point it reaches (each hit, up to
/// [`MAX_NTH`]); then what a user runs to finish the order, two ways: a
/// plain round; or the same race again (refused with "already done" when
/// the kill came after the merge landed), then a round. The order must land
/// exactly once, with no `arbiter-race/*` branch or race worktree left.
#[test]
fn kill_point_matrix_race() {
    let orders = vec!["wo-1".to_owned()];
    let files = vec![("one.txt".to_owned(), "wo-1\n".to_owned())];
    let round: &[&str] = &["round", "--json", "--build", RACE_BUILD];
    let report = each_point(&points_except(&["clear."]), |point, report| {
        for nth in 1..=MAX_NTH {
            for again in [false, true] {
                let (env, base) = race_repo();
                let tree = expected_tree(&env, &base, &files);
                let want = Expect {
                    orders: &orders,
                    tree: &tree,
                    kept_branches: &[],
                };
                let case = spec(point, nth);
                match kill_at(&env, &race_args(), point, nth) {
                    Kill::NotReached => {
                        if nth == 1 {
                            report.unreached.push(point.to_owned());
                        }
                        report.hits(point, nth - 1);
                        return;
                    }
                    Kill::Unexpected(why) => {
                        report.add(&case, vec![why]);
                        return;
                    }
                    Kill::Died => {}
                }
                let mut problems = Vec::new();
                let case = if again {
                    let run = arbiter(&env, &race_args(), None);
                    let done = run.code == Some(2) && run.stderr.contains("already done");
                    if !run.ok() && !done {
                        problems.push(format!("the race again: {}", run.describe()));
                    }
                    recover(&env, round, "a round after it", &mut problems);
                    format!("{case} (race again, then round)")
                } else {
                    recover(&env, round, "the next round", &mut problems);
                    format!("{case} (round)")
                };
                problems.extend(broken(&env, &want));
                report.add(&case, problems);
            }
        }
        report.hits(point, MAX_NTH);
    });
    report.finish("race", RACE_SKIPS);
}

// ---------------------------------------------------------------- clear

/// `wo-b` drifts (touches README) and halts with its branch and worktree
/// kept; `clear wo-b` is killed at each point it reaches. What a user does
/// next: `clear wo-b` again (done, or refused as "not halted" when the kill
/// came after the halt was lifted), then a round with a well-behaved
/// builder: both orders land once and nothing is left.
#[test]
fn kill_point_matrix_clear() {
    let (orders, files) = order_files(&["a", "b"]);
    let drifting =
        format!("{ROUND_BUILD}; if [ $ARBITER_WO = wo-b ]; then echo sneaky >> README; fi");
    let round: &[&str] = &["round", "--json", "--build", ROUND_BUILD];
    let mut report = Report::default();
    for point in points_except(&["pick."]) {
        let env = TestEnv::new();
        env.write("README", "base\n");
        env.work_order("wo-a", "Order a", &[], &["a.txt"]);
        env.work_order("wo-b", "Order b", &[], &["b.txt"]);
        let base = env.commit_all("init");
        let halted = arbiter(&env, &["round", "--json", "--build", &drifting], None);
        assert_eq!(
            halted.code,
            Some(1),
            "the drift halt: {}",
            halted.describe()
        );
        assert!(
            env.git(&["branch", "--list", "arbiter/wo-b"])
                .contains("arbiter/wo-b"),
            "the halted order keeps its branch"
        );
        match kill_at(&env, &["clear", "wo-b"], point, 1) {
            Kill::NotReached => {
                report.unreached.push(point.to_owned());
                continue;
            }
            Kill::Unexpected(why) => {
                report.add(point, vec![why]);
                continue;
            }
            Kill::Died => {}
        }
        let tree = expected_tree(&env, &base, &files);
        let want = Expect {
            orders: &orders,
            tree: &tree,
            kept_branches: &[],
        };
        let mut problems = Vec::new();
        let again = arbiter(&env, &["clear", "wo-b"], None);
        let lifted = again.code == Some(2) && again.stderr.contains("is not halted");
        if !again.ok() && !lifted {
            problems.push(format!("clear again: {}", again.describe()));
        }
        recover(&env, round, "the next round", &mut problems);
        problems.extend(broken(&env, &want));
        report.add(point, problems);
    }
    report.finish("clear", CLEAR_SKIPS);
}

// ---------------------------------------------------------------- random SIGKILL

/// xorshift64*: enough for picking delays, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// A repository of `n` tracked files, so that a worktree checkout takes a
/// noticeable time and a kill often lands inside one.
fn big_template(n: usize) -> TestEnv {
    let env = TestEnv::new();
    for i in 0..n {
        let path = env.repo.join(format!("src/d{:02}/f{i:05}.txt", i % 50));
        if i % 50 == i {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        }
        std::fs::write(&path, format!("file {i}\n{}\n", "x".repeat(i % 200))).expect("write");
    }
    env.write("README", "big\n");
    env.commit_all("big tree");
    env
}

/// One iteration's repository: a clone of `template` with 4-6 new orders
/// `w<j>` (each writing `out/w<j>.txt` after a random sleep, some failing
/// their first gate); returns it with its base commit, the orders and the
/// round's arguments.
fn loop_repo(template: &TestEnv, rng: &mut Rng) -> (TestEnv, String, Vec<String>, Vec<String>) {
    let env = TestEnv::new();
    std::fs::remove_dir_all(&env.repo).expect("remove the fresh repo");
    let from = template.repo.to_str().expect("utf-8");
    env.git_in(&env.root, &["clone", "-q", from, "repo"]);
    let n = rng.range(4, 6) as usize;
    let ids: Vec<String> = (0..n).map(|j| format!("w{j}")).collect();
    let mut sleeps = String::new();
    let mut fail_first = Vec::new();
    for id in &ids {
        env.work_order(id, &format!("Order {id}"), &[], &[&format!("out/{id}.txt")]);
        sleeps.push_str(&format!("{id}) sleep 0.{:03};; ", rng.range(100, 900)));
        if rng.range(0, 3) == 0 {
            fail_first.push(format!("$ARBITER_WO.$ARBITER_ATTEMPT != {id}.1"));
        }
    }
    let base = env.commit_all("orders");
    let build = format!(
        "case $ARBITER_WO in {sleeps}esac; mkdir -p out; echo \"$ARBITER_WO\" > \"out/$ARBITER_WO.txt\""
    );
    let gate = if fail_first.is_empty() {
        "true".to_owned()
    } else {
        format!("test {}", fail_first.join(" -a "))
    };
    let args = [
        "round",
        "--json",
        "--max-total",
        "4",
        "--build",
        &build,
        "--gate",
        &gate,
    ]
    .map(str::to_owned)
    .to_vec();
    (env, base, ids, args)
}

/// Random SIGKILLs of a conductor in the middle of a round on a large
/// repository, each followed by a plain round that must recover everything.
/// The kill delay is uniform over the length of an uninterrupted round
/// (measured first), so kills land in every phase.
#[test]
#[ignore = "slow: cargo test --test cli test_crash -- --ignored"]
fn random_sigkill_loop() {
    kill_loop(1);
}

/// The same with two conductors started together on the repository: one
/// is killed, the other must finish on its own (never wait on the dead
/// one's claims for ever), and the plain round after them must recover
/// everything, each order landed exactly once.
#[test]
#[ignore = "slow: cargo test --test cli test_crash -- --ignored"]
fn random_sigkill_loop_beside_a_live_conductor() {
    kill_loop(2);
}

/// `conductors` rounds started together per iteration; the first is killed.
fn kill_loop(conductors: usize) {
    let seed: u64 = std::env::var("ARBITER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_A7B1_7E12_0009);
    let iterations: u64 = std::env::var("ARBITER_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let name = format!("random_sigkill_loop ({conductors} conductor(s))");
    eprintln!("{name}: ARBITER_SEED={seed} iterations={iterations}");
    let mut rng = Rng(seed.max(1));
    let template = big_template(3000);

    // How long a whole round takes here, without a kill.
    let (env, base, ids, args) = loop_repo(&template, &mut Rng(seed.max(1) ^ 0xCA1B));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = Instant::now();
    let control = run_timed(env.command_in(&env.repo, &args), Duration::from_secs(300));
    let full = started.elapsed();
    let files: Vec<(String, String)> = ids
        .iter()
        .map(|id| (format!("out/{id}.txt"), format!("{id}\n")))
        .collect();
    let tree = expected_tree(&env, &base, &files);
    let want = Expect {
        orders: &ids,
        tree: &tree,
        kept_branches: &[],
    };
    assert!(control.ok(), "uninterrupted round: {}", control.describe());
    assert_eq!(
        broken(&env, &want),
        Vec::<String>::new(),
        "uninterrupted round"
    );
    let span = full.as_millis() as u64 * 11 / 10;
    eprintln!("{name}: an uninterrupted round takes {full:?}; kills within {span} ms");

    let mut report = Report::default();
    let (mut killed, mut finished_first) = (0, 0);
    for it in 0..iterations {
        let (env, base, ids, args) = loop_repo(&template, &mut rng);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let delay = rng.range(0, span);
        let mut children: Vec<_> = (0..conductors)
            .map(|_| {
                env.command_in(&env.repo, &args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn round")
            })
            .collect();
        std::thread::sleep(Duration::from_millis(delay));
        if children[0].try_wait().expect("wait").is_some() {
            finished_first += 1;
        } else {
            children[0].kill().expect("SIGKILL the conductor");
            killed += 1;
        }
        children[0].wait().expect("reap");
        let mut problems = Vec::new();
        // The others run on: they must end by themselves.
        for (k, child) in children.iter_mut().enumerate().skip(1) {
            let deadline = Instant::now() + Duration::from_secs(300);
            while child.try_wait().expect("wait").is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    problems.push(format!("conductor {k} beside the killed one never ended"));
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.wait();
        }

        let files: Vec<(String, String)> = ids
            .iter()
            .map(|id| (format!("out/{id}.txt"), format!("{id}\n")))
            .collect();
        let tree = expected_tree(&env, &base, &files);
        let want = Expect {
            orders: &ids,
            tree: &tree,
            kept_branches: &[],
        };
        let run = run_timed(env.command_in(&env.repo, &args), Duration::from_secs(300));
        if !run.ok() {
            let again = arbiter(&env, &args, None);
            problems.push(format!(
                "the next round failed: {}; run again: {}",
                run.describe(),
                if again.ok() {
                    "exit 0".into()
                } else {
                    again.describe()
                }
            ));
        }
        problems.extend(broken(&env, &want));
        let case = format!(
            "ARBITER_SEED={seed} iteration {it} ({} orders, SIGKILL after {delay} ms)",
            ids.len()
        );
        if !problems.is_empty() {
            eprintln!("{case}: {problems:?}");
        }
        report.add(&case, problems);
    }
    eprintln!("{name}: {killed} killed mid-round, {finished_first} finished before the kill");
    report.finish(&format!("{name} (ARBITER_SEED={seed})"), &[]);
}

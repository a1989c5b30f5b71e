//! `status` and `batch --max 64` over 10,000 work orders (targets: both
//! under 150 ms, issue 35; issue 2 asked 200 and 300 ms), timed as a user runs them: the release
//! binary as a fresh process, median of several runs, next to baselines
//! measured in the same run on the same repository, so the numbers can be
//! compared across machines. Then the overlap check of two work orders with
//! 5,000 literal entries each, against comparing every pair of entries in the
//! same run (issue 9). Prints; never asserts times.
//!
//! Run: `cargo bench --bench status_batch` (`ARBITER_BENCH_RUNS=N` for more runs,
//! `ARBITER_BENCH_KEEP=DIR` to keep the repository for profiling).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use git_arbiter::state::scope::{sets_overlap, Entry};
use git_arbiter::state::{Record, Status, Store, Verdict};

/// Work orders in the benchmark; `cargo test --all-targets` runs this file
/// without `--bench` as a quick smoke test with `SMOKE_ORDERS` instead.
const ORDERS: usize = 10_000;
const SMOKE_ORDERS: usize = 300;
/// Components of the imaginary code base; work orders of one component share
/// some files, so a realistic share of them overlap.
const COMPONENTS: usize = 400;

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let n = if bench { ORDERS } else { SMOKE_ORDERS };
    let runs: usize = std::env::var("ARBITER_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 9 } else { 1 });
    let dir = tempfile::Builder::new()
        .prefix("arbiter-bench")
        .tempdir()
        .expect("temp dir");
    // ARBITER_BENCH_KEEP=DIR keeps the generated repository there, for profiling.
    let repo = match std::env::var_os("ARBITER_BENCH_KEEP") {
        Some(keep) => PathBuf::from(keep),
        None => dir.path().join("repo"),
    };

    let setup = Instant::now();
    let (seed, unrelated) = make_repo(&repo, n);
    let orders_time = setup.elapsed();
    let notes = Instant::now();
    write_state(&repo, n, &seed, &unrelated);
    let notes_time = notes.elapsed();
    println!(
        "repository: {n} work orders x 10 declared entries, state for all {n} in refs/notes/arbiter"
    );
    println!(
        "setup: orders committed in {:.1} s, state written in one transaction in {:.1} s",
        orders_time.as_secs_f64(),
        notes_time.as_secs_f64()
    );

    // A user's work orders were written a while before they run `status`:
    // files younger than a few seconds are always read again (their time
    // stamps cannot yet prove them unchanged; see `state::read_cache`).
    std::thread::sleep(Duration::from_millis(3500));
    let bin = env!("CARGO_BIN_EXE_git-arbiter");
    // Sanity: both commands succeed and see every work order, or the timings mean nothing.
    let status = run(&repo, bin, &["status", "--json"]);
    let rows = serde_json::from_slice::<serde_json::Value>(&status).expect("status JSON")["orders"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(rows, n, "status --json lists every work order");
    let batch = serde_json::from_slice::<serde_json::Value>(&run(
        &repo,
        bin,
        &["batch", "--json", "--max", "64"],
    ))
    .expect("batch JSON");
    println!(
        "batch --max 64 picks {} and defers {}",
        batch["batch"].as_array().map_or(0, Vec::len),
        batch["deferred"].as_array().map_or(0, Vec::len)
    );

    let baseline_spawn = median(&repo, runs, "git", &["rev-parse", "HEAD"]);
    let baseline_notes = median(
        &repo,
        runs,
        "sh",
        &["-c", "git notes --ref=arbiter list | wc -l"],
    );
    let batch_time = median(&repo, runs, bin, &["batch", "--json", "--max", "64"]);
    let status_time = median(&repo, runs, bin, &["status"]);

    println!();
    println!("median of {runs} runs (after one warm-up run each):");
    let row = |name: &str, t: Duration, target: Option<u64>| {
        let ms = t.as_secs_f64() * 1000.0;
        let target = target.map_or(String::new(), |target| {
            format!(
                "  target < {target} ms: {}",
                if ms < target as f64 { "met" } else { "MISSED" }
            )
        });
        println!(
            "  {name:<40} {ms:8.1} ms  {:6.1}x spawn  {:5.2}x notes-list{target}",
            t.as_secs_f64() / baseline_spawn.as_secs_f64(),
            t.as_secs_f64() / baseline_notes.as_secs_f64(),
        );
    };
    row("git rev-parse HEAD (process spawn)", baseline_spawn, None);
    row("git notes --ref=arbiter list | wc -l", baseline_notes, None);
    row(
        "git arbiter batch --max 64",
        batch_time,
        bench.then_some(150),
    );
    row("git arbiter status", status_time, bench.then_some(150));
    if !bench {
        println!("(smoke run over {n} work orders; `cargo bench --bench status_batch` measures {ORDERS})");
    }

    let literals = if bench { LITERALS } else { SMOKE_LITERALS };
    literal_overlap(literals, runs);
}

/// Literal entries in each of the two work orders compared by `literal_overlap`.
const LITERALS: usize = 5_000;
const SMOKE_LITERALS: usize = 500;

/// The overlap check of two work orders with `n` literal entries each, all in
/// shared directories but disjoint (the worst case: every pair is looked at),
/// against comparing every pair, the definition, measured here as the baseline.
fn literal_overlap(n: usize, runs: usize) {
    let set = |name: &str| -> Vec<Entry> {
        (0..n)
            .map(|i| Entry::parse(&format!("src/m{}/{name}{i}.rs", i % 50)).expect("valid entry"))
            .collect()
    };
    let (a, b) = (set("a"), set("b"));
    let pairwise = || a.iter().any(|x| b.iter().any(|y| x.overlaps(y)));
    let time = |f: &dyn Fn() -> bool, runs: usize| {
        let mut times: Vec<Duration> = (0..runs.max(1))
            .map(|_| {
                let start = Instant::now();
                assert!(!f(), "the two sets are disjoint");
                start.elapsed()
            })
            .collect();
        times.sort();
        times[times.len() / 2]
    };
    // The pairwise baseline takes seconds at full size: a few runs suffice.
    let baseline = time(&pairwise, runs.min(3));
    let fast = time(&|| sets_overlap(&a, &b), runs);
    println!();
    println!("overlap of two work orders with {n} literal entries each (median):");
    println!(
        "  every pair compared (baseline)  {:10.3} ms",
        baseline.as_secs_f64() * 1000.0
    );
    println!(
        "  scope::sets_overlap             {:10.3} ms  {:8.1}x faster",
        fast.as_secs_f64() * 1000.0,
        baseline.as_secs_f64() / fast.as_secs_f64()
    );
}

/// Hermetic git: no user or system config, fixed identity and dates.
fn command(repo: &Path, program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(repo)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    cmd
}

fn run(repo: &Path, program: &str, args: &[&str]) -> Vec<u8> {
    let output = command(repo, program, args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn median(repo: &Path, runs: usize, program: &str, args: &[&str]) -> Duration {
    run(repo, program, args);
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            run(repo, program, args);
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The declared entries of work order `i`: a mix of literal files, literal
/// directories, `*` globs and `**` globs, with files shared inside a component.
fn entries(i: usize) -> [String; 10] {
    let c = i % COMPONENTS;
    let f = i / COMPONENTS;
    [
        format!("src/c{c}/f{f}/**"),
        format!("src/c{c}/f{f}.rs"),
        format!("tests/c{c}/f{f}_*.rs"),
        format!("docs/c{c}/f{f}.md"),
        // Shared by every 7th feature of the component: the overlaps.
        format!("src/c{c}/shared/types{}.rs", f % 7),
        format!("assets/c{c}/f{f}"),
        format!("config/c{c}-f{f}.toml"),
        format!("migrations/c{c}/{f:04}_*.sql"),
        format!("bench/c{c}/f{f}.rs"),
        format!("src/c{c}/f{f}/**/*.proto"),
    ]
}

fn id(i: usize) -> String {
    format!("wo-{i:05}")
}

/// Ids of the work orders `i` depends on: a fifth depend on the previous
/// feature of the same component.
fn deps(i: usize) -> Option<usize> {
    (i >= COMPONENTS && i.is_multiple_of(5)).then(|| i - COMPONENTS)
}

/// Returns the seed commit and a commit unrelated to the branch.
fn make_repo(repo: &Path, n: usize) -> (String, String) {
    std::fs::create_dir_all(repo).expect("repo dir");
    run(repo, "git", &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "bench\n").expect("write");
    run(repo, "git", &["add", "README.md"]);
    run(repo, "git", &["commit", "-q", "-m", "seed"]);
    let seed = String::from_utf8(run(repo, "git", &["rev-parse", "HEAD"])).expect("utf-8");

    let orders: PathBuf = repo.join("work-orders");
    std::fs::create_dir_all(&orders).expect("orders dir");
    for i in 0..n {
        let mut text = format!(
            "# Feature {} of component {}\n\n",
            i / COMPONENTS,
            i % COMPONENTS
        );
        if let Some(dep) = deps(i) {
            text.push_str(&format!("## Depends on\n- {}\n\n", id(dep)));
        }
        text.push_str("## Files to touch\n");
        for e in entries(i) {
            text.push_str(&format!("- {e}\n"));
        }
        text.push_str("\n## Task\nImplement the feature, with tests and docs.\n");
        std::fs::write(orders.join(format!("{}.md", id(i))), text).expect("write order");
    }
    run(repo, "git", &["add", "work-orders"]);
    run(repo, "git", &["commit", "-q", "-m", "work orders"]);
    let empty_tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    let unrelated = String::from_utf8(run(
        repo,
        "git",
        &["commit-tree", "-m", "elsewhere", empty_tree],
    ))
    .expect("utf-8");
    (seed.trim().to_owned(), unrelated.trim().to_owned())
}

/// State for every work order, in one transaction: mostly done, some ready,
/// needing rework or blocked, a few in progress (so recovery runs its ancestry
/// check) and a few halted.
fn write_state(repo_path: &Path, n: usize, seed: &str, unrelated: &str) {
    let repo = gix::open(repo_path).expect("open repo");
    let store = Store::new(&repo, 3);
    store
        .transact("bench: state for every work order", |txn| {
            for i in 0..n {
                let mut r = Record::new(&id(i), deps(i).is_some(), 3);
                let verdict = |kind: &str, passed: bool| Verdict {
                    kind: kind.into(),
                    command: format!("cargo test -p c{}", i % COMPONENTS),
                    passed,
                    exit_code: Some(if passed { 0 } else { 1 }),
                    detail: None,
                    wall_ms: None,
                    log: None,
                    report: None,
                };
                r.checkpoint_before = Some(seed.to_owned());
                match i % 10 {
                    0..=5 => {
                        r.status = Status::Done;
                        r.attempts = 1;
                        r.checkpoint_after = Some(seed.to_owned());
                        r.verdicts = vec![verdict("build", true), verdict("gate", true)];
                        r.log("dispatch", None);
                        r.log("merged", Some(seed.to_owned()));
                    }
                    7 => {
                        r.status = Status::NeedsRework;
                        r.attempts = 1;
                        r.verdicts = vec![verdict("build", true), verdict("gate", false)];
                        r.log("dispatch", None);
                        r.log("rework", Some("gate failed".into()));
                    }
                    9 if i % 100 == 9 => {
                        r.status = Status::InProgress;
                        r.attempts = 1;
                        // Half landed (an ancestor of the tip), half never merged.
                        r.checkpoint_after =
                            Some(if i % 200 == 9 { seed } else { unrelated }.to_owned());
                        r.log("dispatch", None);
                    }
                    _ => {}
                }
                if i % 1000 == 19 {
                    r.halt("retry_cap_exhausted", Vec::new());
                }
                txn.put(r);
            }
            Ok::<_, git_arbiter::state::Error>(())
        })
        .expect("write state");
}

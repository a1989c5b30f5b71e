//! The pool of warm worktrees (issue 12), side by side in one run, on
//! generated repositories of 5,000 and 50,000 files; 8 orders × 3 batches
//! with one-line builders:
//!
//! 1. per-order setup (creating or switching the worktree: `pool::take`,
//!    which first proves the free worktree unchanged since its give-back:
//!    one stat of every tracked file and a read of every folder whose
//!    change time does not prove its names unchanged) in each batch, and the give-back (reset, untracked files removed)
//!    that makes a worktree free again: its full walk, as these orders are
//!    committed by hand (a round's own commit of the leftovers lets the
//!    give-back skip it);
//! 2. wall time of each batch (`git arbiter round --once`, 8 slots) with the
//!    pool, with `--no-pool`, and the same work with the git CLI
//!    (`git worktree add` per order, commit, `git merge --no-ff`,
//!    `git worktree remove`, `git branch -D`), and one stat of every file
//!    (what each order's leftovers cost, pool or not, and each take's proof);
//! 3. a gate that takes 3 s on an empty `target/` and 0.1 s when it finds
//!    its cache, with and without the pool.
//!
//! Parts 1 and 2 run five times on fresh copies (the git CLI's once) and
//! report medians: one run of a batch swings by half on this machine.
//!
//! Run: `cargo bench --bench pool` (`-- --files 5000` for one size,
//! `-- --setup-only` for part 1 alone). Prints
//! ratios against the baselines measured in the same run; never asserts a
//! time. Without `--bench` (as `cargo test --all-targets` runs it) it does
//! one small smoke run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use git_arbiter::run::pool;
use git_arbiter::state::context::Context;

mod support;
use support::{fresh, git, median, ms};

const PER_BATCH: usize = 8;
const BATCHES: [&str; 3] = ["a", "b", "c"];
const BUILD: &str = "mkdir -p out && echo done > out/$ARBITER_WO.txt";
const GATE: &str = "if [ -e target/gate-cache ]; then sleep 0.1; else sleep 3; mkdir -p target && touch target/gate-cache; fi";

fn ids() -> Vec<String> {
    BATCHES
        .iter()
        .flat_map(|b| (0..PER_BATCH).map(move |i| format!("{b}{i}")))
        .collect()
}

/// `files` files in 50 folders, `.gitignore` with `target/`, and 24 orders
/// (`a0`…`c7`) each declaring `out/<id>.txt`.
fn template(root: &Path, files: usize) -> PathBuf {
    let repo = root.join("template");
    std::fs::create_dir_all(repo.join("work-orders")).expect("mkdir");
    for i in 0..files {
        let dir = repo.join(format!("src/m{:02}", i % 50));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("// file {i}\npub fn f{i}() {{}}\n"),
        )
        .expect("write");
    }
    std::fs::write(repo.join(".gitignore"), "target/\n").expect("write");
    for id in ids() {
        std::fs::write(
            repo.join(format!("work-orders/{id}.md")),
            format!("# Order {id}\n\n## Files to touch\n- out/{id}.txt\n\n## Task\nWrite it.\n"),
        )
        .expect("write");
    }
    git(root, &["init", "-q", "-b", "main", "template"]);
    git(&repo, &["config", "user.name", "bench"]);
    git(&repo, &["config", "user.email", "bench@example.com"]);
    // No background `gc --auto`: it would repack while the template is
    // copied, and add noise to the timed runs. One pack, shared by the copies.
    git(&repo, &["config", "gc.auto", "0"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    git(&repo, &["repack", "-adq"]);
    repo
}

/// Drop `repo` and its worktrees, so the disk holds one copy at a time.
fn drop_repo(repo: &Path) {
    let _ = std::fs::remove_dir_all(repo);
    for suffix in ["arbiter", "byhand"] {
        let _ = std::fs::remove_dir_all(repo.with_extension(suffix));
    }
}

/// One batch's per-order take and give-back times.
type Timings = (Vec<Duration>, Vec<Duration>);

/// Per-order `pool::take` and `pool::give_back` times, by batch: each
/// order's worktree is taken at the batch's base, its file committed there,
/// merged into main with `git merge`, and the worktree given back.
fn library_batches(repo: &Path) -> Vec<Timings> {
    let ctx = Context::discover(repo).expect("open");
    let opts = pool::Options {
        enabled: true,
        size: PER_BATCH,
        keep_ignored: true,
        ..pool::Options::default()
    };
    let mut out = Vec::new();
    for batch in BATCHES {
        let base = gix::ObjectId::from_hex(git(repo, &["rev-parse", "main"]).trim().as_bytes())
            .expect("sha");
        let mut takes = Vec::new();
        for i in 0..PER_BATCH {
            let id = format!("{batch}{i}");
            let branch = format!("arbiter/{id}");
            let start = Instant::now();
            let wt = pool::take(&ctx, &opts, &id, &branch, base)
                .expect("take")
                .path;
            takes.push(start.elapsed());
            std::fs::create_dir_all(wt.join("out")).expect("mkdir");
            std::fs::write(wt.join(format!("out/{id}.txt")), "done\n").expect("write");
            git(&wt, &["add", "-A"]);
            git(&wt, &["commit", "-q", "-m", &id]);
        }
        let mut gives = Vec::new();
        for i in 0..PER_BATCH {
            let id = format!("{batch}{i}");
            let branch = format!("arbiter/{id}");
            git(repo, &["merge", "-q", "--no-ff", "--no-edit", &branch]);
            let start = Instant::now();
            pool::give_back(&ctx, &id, &branch, false).expect("give back");
            gives.push(start.elapsed());
        }
        out.push((takes, gives));
    }
    out
}

/// Wall time of each batch: `git arbiter round --once` with `extra` flags.
fn arbiter_batches(repo: &Path, slots: &Path, extra: &[&str]) -> Vec<Duration> {
    let mut out = Vec::new();
    for _ in BATCHES {
        let start = Instant::now();
        let mut args = vec![
            "round",
            "--once",
            "--max",
            "8",
            "--max-total",
            "8",
            "--build",
            BUILD,
        ];
        args.extend_from_slice(extra);
        let output = Command::new(env!("CARGO_BIN_EXE_git-arbiter"))
            .current_dir(repo)
            .env("ARBITER_SLOT_DIR", slots)
            .args(&args)
            .output()
            .expect("git-arbiter runs");
        out.push(start.elapsed());
        assert!(
            output.status.success(),
            "round failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    out
}

/// The same batches with the git CLI: a worktree per order, commit, merge, remove.
fn by_hand_batches(repo: &Path) -> Vec<Duration> {
    let wt_root = repo.with_extension("byhand");
    let mut out = Vec::new();
    for batch in BATCHES {
        let start = Instant::now();
        for i in 0..PER_BATCH {
            let id = format!("{batch}{i}");
            let wt = wt_root.join(&id);
            let wt_s = wt.to_str().expect("utf-8 path");
            git(repo, &["worktree", "add", "-q", "-b", &id, wt_s, "main"]);
            std::fs::create_dir_all(wt.join("out")).expect("mkdir");
            std::fs::write(wt.join(format!("out/{id}.txt")), "done\n").expect("write");
            git(&wt, &["add", "-A"]);
            git(&wt, &["commit", "-q", "-m", &id]);
        }
        for i in 0..PER_BATCH {
            let id = format!("{batch}{i}");
            git(repo, &["merge", "-q", "--no-ff", "--no-edit", &id]);
            let wt = wt_root.join(&id);
            git(
                repo,
                &["worktree", "remove", "--force", wt.to_str().expect("utf-8")],
            );
            git(repo, &["branch", "-q", "-D", &id]);
        }
        out.push(start.elapsed());
    }
    out
}

/// The median time to stat every file of `repo` outside `.git`, each
/// relative to its open folder (as a check for leftovers does).
fn stat_walk(repo: &Path) -> Duration {
    fn walk(dir: &Path) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let entry = entry.expect("entry");
            let meta = entry.metadata().expect("stat");
            if meta.is_dir() && entry.file_name() != ".git" {
                walk(&entry.path());
            }
        }
    }
    let times = (0..5)
        .map(|_| {
            let start = Instant::now();
            walk(repo);
            start.elapsed()
        })
        .collect();
    median(times)
}

/// The batches of `git arbiter round --once` with `extra` flags on a fresh
/// copy of `template`.
fn timed_round(
    template: &Path,
    root: &Path,
    name: &str,
    slots: &Path,
    extra: &[&str],
) -> Vec<Duration> {
    let repo = fresh(template, root, name);
    let batches = arbiter_batches(&repo, slots, extra);
    drop_repo(&repo);
    batches
}

/// Each batch's median over `runs`.
fn per_batch_median(runs: &[Vec<Duration>]) -> Vec<Duration> {
    (0..BATCHES.len())
        .map(|n| median(runs.iter().map(|run| run[n]).collect()))
        .collect()
}

/// Batches 2 and 3 together.
fn later(batches: &[Duration]) -> Duration {
    batches[1..].iter().sum()
}

struct Sizes {
    /// Median per-order take in batches 2–3 over every run.
    take_later: Duration,
    /// One stat of every file of the repository.
    walk: Duration,
}

fn one_size(root: &Path, files: usize, reps: usize, with_gate: bool, setup_only: bool) -> Sizes {
    let slots = root.join("slots");
    let started = Instant::now();
    let template = template(root, files);
    println!(
        "\n== {files}-file repository (generated in {:.1} s), {PER_BATCH} orders x {} batches",
        started.elapsed().as_secs_f64(),
        BATCHES.len()
    );

    // Every scenario but the git CLI's and the gate's runs `reps` times,
    // each on a fresh copy, interleaved: the machine's speed swings within a
    // run, and the median of a few stays put where one measurement does not.
    let libs: Vec<_> = (0..reps)
        .map(|_| {
            let repo = fresh(&template, root, "lib");
            let batches = library_batches(&repo);
            drop_repo(&repo);
            batches
        })
        .collect();
    println!("per-order setup (pool::take) and give-back, median per batch over {reps} runs:");
    for n in 0..BATCHES.len() {
        let of_batch = |pick: fn(&Timings) -> &Vec<Duration>| {
            median(libs.iter().flat_map(|run| pick(&run[n]).clone()).collect())
        };
        println!(
            "  batch {}  take {:>8.1} ms   give back {:>8.1} ms",
            n + 1,
            ms(of_batch(|b| &b.0)),
            ms(of_batch(|b| &b.1))
        );
    }
    let take_later = median(
        libs.iter()
            .flat_map(|run| run[1..].iter().flat_map(|(t, _)| t.iter().copied()))
            .collect(),
    );

    let walk = stat_walk(&template);
    println!(
        "one stat of every file of the repository: {:.1} ms ({:.2} us a file); a take makes one such walk (its proof), and each order one (its leftovers), with or without the pool; a landing stats only the paths it changes",
        ms(walk),
        walk.as_secs_f64() * 1e6 / files as f64
    );
    // The target is set on real repositories; a smoke run's few hundred
    // files leave the fixed cost of a take alone.
    println!(
        "per-order take in batches 2-3 / one stat walk = {:.2}x{}",
        take_later.as_secs_f64() / walk.as_secs_f64(),
        if files >= 5_000 {
            " (target <= 2x)"
        } else {
            ""
        }
    );
    if setup_only {
        let _ = std::fs::remove_dir_all(&template);
        return Sizes { take_later, walk };
    }
    let mut pooled = Vec::new();
    let mut no_pool = Vec::new();
    for _ in 0..reps {
        pooled.push(timed_round(&template, root, "pooled", &slots, &[]));
        no_pool.push(timed_round(
            &template,
            root,
            "nopool",
            &slots,
            &["--no-pool"],
        ));
    }
    let repo = fresh(&template, root, "byhand");
    let by_hand = by_hand_batches(&repo);
    drop_repo(&repo);
    println!("wall time per batch (ms; median over {reps} runs, the git CLI's one run):");
    println!("                                  batch 1    batch 2    batch 3");
    for (name, b) in [
        ("git-arbiter round (pool)", per_batch_median(&pooled)),
        ("git-arbiter round --no-pool", per_batch_median(&no_pool)),
        ("git CLI by hand", by_hand.clone()),
    ] {
        println!(
            "  {name:<28} {:>8.1}   {:>8.1}   {:>8.1}",
            ms(b[0]),
            ms(b[1]),
            ms(b[2])
        );
    }
    let later_of = |runs: &[Vec<Duration>]| median(runs.iter().map(|b| later(b)).collect());
    let ours = later_of(&pooled).as_secs_f64();
    println!(
        "batches 2-3 (medians): git CLI / pool = {:.1}x (target >= 10x), --no-pool / pool = {:.1}x (target >= 5x)",
        later(&by_hand).as_secs_f64() / ours,
        later_of(&no_pool).as_secs_f64() / ours
    );
    let each: Vec<String> = pooled
        .iter()
        .zip(&no_pool)
        .map(|(p, n)| format!("{:.1}x", later(n).as_secs_f64() / later(p).as_secs_f64()))
        .collect();
    println!("  --no-pool / pool in each run: {}", each.join(", "));

    if with_gate {
        let gated = timed_round(&template, root, "gate-pooled", &slots, &["--gate", GATE]);
        let gated_fresh = timed_round(
            &template,
            root,
            "gate-nopool",
            &slots,
            &["--gate", GATE, "--no-pool"],
        );
        println!("gate of 3 s cold / 0.1 s warm, wall time per batch (ms):");
        for (name, b) in [("with the pool", &gated), ("--no-pool", &gated_fresh)] {
            println!(
                "  {name:<28} {:>8.1}   {:>8.1}   {:>8.1}",
                ms(b[0]),
                ms(b[1]),
                ms(b[2])
            );
        }
    }
    let _ = std::fs::remove_dir_all(&template);
    Sizes { take_later, walk }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let setup_only = args.iter().any(|a| a == "--setup-only");
    let only = args
        .iter()
        .position(|a| a == "--files")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse::<usize>().ok());
    let sizes: Vec<usize> = match (bench, only) {
        (_, Some(n)) => vec![n],
        (true, None) => vec![5_000, 50_000],
        (false, None) => vec![300],
    };
    let reps = if bench { 5 } else { 1 };
    let root = tempfile::tempdir().expect("temp dir");
    let mut results = Vec::new();
    for (i, &files) in sizes.iter().enumerate() {
        let dir = root.path().join(format!("s{files}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        // The gate scenario once, on the first repository.
        results.push((files, one_size(&dir, files, reps, i == 0, setup_only)));
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let [(small, a), (large, b)] = results.as_slice() {
        // Before takes proved the worktree this was at most 2x; a proof
        // stats every file, so a take now grows as one stat walk does.
        println!(
            "\nper-order setup in batches 2-3: {large} files / {small} files = {:.2}x; one stat walk: {:.2}x",
            b.take_later.as_secs_f64() / a.take_later.as_secs_f64(),
            b.walk.as_secs_f64() / a.walk.as_secs_f64()
        );
    }
}

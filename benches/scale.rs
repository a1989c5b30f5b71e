//! Per-order conductor overhead as the work grows (issue 35): one round of
//! N trivial orders (each writes one file) for N = 50, 500 and 5,000, and
//! 50 new orders in a repository where 0, 1,000 and 10,000 orders are
//! settled already (landed by earlier rounds, their records in the notes).
//! In both, each landed order adds a file, so the tree grows with the work
//! and every check of a worktree (what a builder changed, that a pooled
//! worktree is clean) stats more files, as `git status` would. A third
//! part keeps the tree fixed (10,000 files, each order edits one of them,
//! the pool warmed by an untimed round) so that what grows with N is the
//! state alone; a fourth does the same for settled history (every order,
//! settled or new, edits one of 1,000 files), and beside each the same
//! 50 orders in a fresh repository holding as many files (none of them
//! orders): the settled orders' own files stay in the tree, so that ratio
//! is the state's share. The peak RSS of any run so far is printed beside
//! each.
//! Each is timed as a user runs it (the release binary, a fresh process),
//! on tmpfs when there is one, and printed as milliseconds per order with
//! the ratio to the smallest case measured in the same run. Never asserts
//! a time: machines are noisy.
//!
//! Run: `cargo bench --bench scale` (`-- --orders 50,500 --settled 0,1000`
//! to choose the sizes). Without `--bench` (as `cargo test --all-targets`
//! runs it) it does one small smoke run, so the suite checks it still works.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;
use support::{children_max_rss, git, ms, timed_arbiter};

/// A repository with `n` orders `wo-<prefix><i>`, each declaring
/// `f/<prefix><i>.txt`, committed on `main`; made (if it is not there yet)
/// with `base_files` files `f/<i>.txt`, so with `prefix` empty each order
/// edits one of them, and otherwise writes a file of its own.
fn repo_with_orders(dir: &Path, prefix: &str, n: usize, base_files: usize) -> PathBuf {
    orders_on(dir, prefix, n, base_files, |i| format!("{prefix}{i}"))
}

/// [`repo_with_orders`] with orders `wo-<prefix><i>` that each declare
/// `f/<file(i)>.txt`.
fn orders_on(
    dir: &Path,
    prefix: &str,
    n: usize,
    base_files: usize,
    file: impl Fn(usize) -> String,
) -> PathBuf {
    if !dir.exists() {
        std::fs::create_dir_all(dir.join("f")).expect("mkdir");
        git(dir, &["init", "-q", "-b", "main"]);
        git(dir, &["config", "user.name", "bench"]);
        git(dir, &["config", "user.email", "bench@example.com"]);
        std::fs::write(dir.join("README"), "base\n").expect("write");
        for i in 0..base_files {
            std::fs::write(dir.join(format!("f/{i}.txt")), "base\n").expect("write");
        }
    }
    std::fs::create_dir_all(dir.join("work-orders")).expect("mkdir");
    for i in 0..n {
        std::fs::write(
            dir.join(format!("work-orders/wo-{prefix}{i}.md")),
            format!(
                "# Order {prefix}{i}\n\n## Files to touch\n- f/{}.txt\n\n## Task\nWrite it.\n",
                file(i)
            ),
        )
        .expect("write");
    }
    git(dir, &["add", "-A"]);
    git(
        dir,
        &["commit", "-q", "-m", &format!("{n} orders {prefix}")],
    );
    dir.to_owned()
}

/// Commit `n` files `pad/<i>.md` to `repo`, each the size of an order
/// file, none of them an order.
fn pad(repo: &Path, n: usize) {
    if n == 0 {
        return;
    }
    std::fs::create_dir_all(repo.join("pad")).expect("mkdir");
    for i in 0..n {
        std::fs::write(
            repo.join(format!("pad/{i}.md")),
            format!("# Note {i}\n\n## Files\n- f/{i}.txt\n\n## Text\nNot an order.\n"),
        )
        .expect("write");
    }
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", &format!("{n} other files")]);
}

/// One round over every eligible order: its wall time.
fn round(repo: &Path, slots: &Path) -> Duration {
    timed_arbiter(
        repo,
        slots,
        &[
            "round",
            "--build",
            "mkdir -p f && echo done > f/${ARBITER_WO#wo-}.txt",
        ],
    )
}

/// Peak RSS so far, for a column.
fn rss() -> String {
    format!("peak RSS {:4} MiB", children_max_rss() / 1024)
}

fn sizes(flag: &str, default: &[usize]) -> Vec<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(|list| {
            list.split(',')
                .map(|n| n.trim().parse().expect("a number"))
                .collect()
        })
        .unwrap_or_else(|| default.to_vec())
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (orders, settled, new, files) = if bench {
        (
            sizes("--orders", &[50, 500, 5000]),
            sizes("--settled", &[0, 1000, 10_000]),
            50,
            10_000,
        )
    } else {
        (vec![10, 30], vec![0, 20], 10, 100)
    };
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    };
    let root = tempfile::Builder::new()
        .prefix("arbiter-scale")
        .tempdir_in(&base)
        .expect("temp dir");
    let slots = root.path().join("slots");
    println!("file system: {}", base.display());

    println!("one round of N trivial orders:");
    let mut first = None;
    for &n in &orders {
        let repo = repo_with_orders(&root.path().join(format!("run-{n}")), "", n, 0);
        let per_order = ms(round(&repo, &slots)) / n as f64;
        let baseline = *first.get_or_insert(per_order);
        println!(
            "  {n:>6} orders  {per_order:8.2} ms/order  {:5.2}x the first  {}",
            per_order / baseline,
            rss()
        );
        let _ = std::fs::remove_dir_all(&repo);
        let _ = std::fs::remove_dir_all(repo.with_extension("arbiter"));
    }

    println!("{new} new orders after S settled ones (their setup rounds untimed):");
    let mut first = None;
    for &s in &settled {
        let dir = root.path().join(format!("settled-{s}"));
        if s > 0 {
            let repo = repo_with_orders(&dir, "old", s, 0);
            round(&repo, &slots);
        }
        let repo = repo_with_orders(&dir, "new", new, 0);
        let per_order = ms(round(&repo, &slots)) / new as f64;
        let baseline = *first.get_or_insert(per_order);
        println!(
            "  {s:>6} settled  {per_order:8.2} ms/order  {:5.2}x the first  {}",
            per_order / baseline,
            rss()
        );
        let _ = std::fs::remove_dir_all(&repo);
        let _ = std::fs::remove_dir_all(repo.with_extension("arbiter"));
    }

    // What grows here is the state and the history alone: the settled
    // orders edited files the tree already had.
    let fixed = files / 10;
    println!(
        "{new} new orders after S settled ones, all editing one of {fixed} files (setup untimed):"
    );
    let edit = [
        "round",
        "--build",
        "echo done >> \"$(sed -n 's/^- //p' \"work-orders/$ARBITER_WO.md\")\"",
    ];
    let mut first = None;
    for &s in &settled {
        let dir = root.path().join(format!("history-{s}"));
        let repo = orders_on(&dir, "old", s, fixed, |i| (i % fixed).to_string());
        if s > 0 {
            timed_arbiter(&repo, &slots, &edit);
        }
        let repo = orders_on(&dir, "new", new, fixed, |i| (i % fixed).to_string());
        let per_order = ms(timed_arbiter(&repo, &slots, &edit)) / new as f64;
        let baseline = *first.get_or_insert(per_order);
        let _ = std::fs::remove_dir_all(&repo);
        let _ = std::fs::remove_dir_all(repo.with_extension("arbiter"));
        // The settled orders' files stay in the tree, and every check of a
        // worktree stats them: the same 50 in a fresh repository with as
        // many other files tell the tree's share from the state's.
        let dir = root.path().join(format!("padded-{s}"));
        let repo = orders_on(&dir, "new", new, fixed, |i| (i % fixed).to_string());
        pad(&repo, s);
        let same_tree = ms(timed_arbiter(&repo, &slots, &edit)) / new as f64;
        println!(
            "  {s:>6} settled  {per_order:8.2} ms/order  {:5.2}x the first  \
             {:5.2}x the same tree without them ({same_tree:.2})  {}",
            per_order / baseline,
            per_order / same_tree,
            rss()
        );
        let _ = std::fs::remove_dir_all(&repo);
        let _ = std::fs::remove_dir_all(repo.with_extension("arbiter"));
    }

    println!("one round of N orders, each editing one of {files} files (pool warmed, untimed):");
    let mut first = None;
    for &n in &orders {
        let dir = root.path().join(format!("fixed-{n}"));
        let warm = repo_with_orders(&dir, "warm", 1, files);
        round(&warm, &slots);
        let repo = repo_with_orders(&dir, "", n.min(files), files);
        let n = n.min(files);
        let per_order = ms(round(&repo, &slots)) / n as f64;
        let baseline = *first.get_or_insert(per_order);
        println!(
            "  {n:>6} orders  {per_order:8.2} ms/order  {:5.2}x the first  {}",
            per_order / baseline,
            rss()
        );
        let _ = std::fs::remove_dir_all(&repo);
        let _ = std::fs::remove_dir_all(repo.with_extension("arbiter"));
    }
}

//! A round of 8 work orders with trivial builders on a 5,000-file repository,
//! side by side with the same work done by hand with the git CLI (worktree
//! add, commit, `git merge --no-ff`, `git diff --name-only`, worktree remove,
//! branch -D). Prints times, the ratio, and the conductor's peak RSS, on the
//! disk and on tmpfs (see `compare` for why the file system matters here).
//!
//! Run: `cargo bench --bench round` (`-- --fs disk` or `-- --fs tmpfs` for
//! one file system). Never asserts a time: machines are noisy.
//! Without `--bench` (as `cargo test --all-targets` runs it) it does one small
//! smoke run, so the test suite checks that it still works.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::{children_max_rss, fresh, git, median, timed_arbiter};

const ORDERS: usize = 8;

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
    for i in 0..ORDERS {
        std::fs::write(
            repo.join(format!("work-orders/wo-{i}.md")),
            format!("# Order {i}\n\n## Files to touch\n- out/wo-{i}.txt\n\n## Task\nWrite it.\n"),
        )
        .expect("write");
    }
    git(root, &["init", "-q", "-b", "main", "template"]);
    git(&repo, &["config", "user.name", "bench"]);
    git(&repo, &["config", "user.email", "bench@example.com"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    repo
}

fn arbiter_round(repo: &Path, slots: &Path) -> Duration {
    timed_arbiter(
        repo,
        slots,
        &[
            "round",
            "--max",
            "8",
            "--max-total",
            "8",
            "--build",
            "mkdir -p out && echo done > out/$ARBITER_WO.txt",
        ],
    )
}

fn by_hand(repo: &Path) -> Duration {
    let start = Instant::now();
    let wt_root = repo.with_extension("byhand");
    for i in 0..ORDERS {
        let wt = wt_root.join(format!("wo-{i}"));
        let wt_s = wt.to_str().expect("utf-8 path");
        git(
            repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &format!("wo-{i}"),
                wt_s,
                "main",
            ],
        );
        std::fs::create_dir_all(wt.join("out")).expect("mkdir");
        std::fs::write(wt.join(format!("out/wo-{i}.txt")), "done\n").expect("write");
        git(&wt, &["add", "-A"]);
        git(&wt, &["commit", "-q", "-m", &format!("wo-{i}")]);
    }
    for i in 0..ORDERS {
        let before = String::from_utf8(
            Command::new("git")
                .current_dir(repo)
                .args(["rev-parse", "HEAD"])
                .output()
                .expect("rev-parse")
                .stdout,
        )
        .expect("utf-8");
        git(
            repo,
            &["merge", "-q", "--no-ff", "--no-edit", &format!("wo-{i}")],
        );
        git(repo, &["diff", "--name-only", before.trim(), "HEAD"]);
        let wt = wt_root.join(format!("wo-{i}"));
        git(
            repo,
            &[
                "worktree",
                "remove",
                "--force",
                wt.to_str().expect("utf-8 path"),
            ],
        );
        git(repo, &["branch", "-q", "-D", &format!("wo-{i}")]);
    }
    start.elapsed()
}

/// One side by side comparison under `root`: medians of `runs` of each.
/// The order alternates: on a file system where creating files right after
/// many were deleted is slow (ext4 without a journal skips inodes deleted in
/// the last minute, one by one), whichever runs after the git CLI's
/// `worktree remove` of 40,000 files pays for it.
fn compare(root: &Path, files: usize, runs: usize) -> (Duration, Duration, i64) {
    let slots = root.join("slots");
    let template = template(root, files);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut peak_rss = 0;
    for run in 0..runs {
        let mut ours_run = || {
            let repo = fresh(&template, root, &format!("a{run}"));
            let before = children_max_rss();
            ours.push(arbiter_round(&repo, &slots));
            peak_rss = peak_rss.max(children_max_rss().max(before));
        };
        if run % 2 == 0 {
            ours_run();
            theirs.push(by_hand(&fresh(&template, root, &format!("b{run}"))));
        } else {
            theirs.push(by_hand(&fresh(&template, root, &format!("b{run}"))));
            ours_run();
        }
    }
    (median(ours), median(theirs), peak_rss)
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (files, runs) = if bench { (5_000, 5) } else { (200, 1) };
    // The disk, and memory (tmpfs) where there is one: the first measures
    // what a user of this machine sees, the second the tools themselves.
    // `-- --fs disk` or `-- --fs tmpfs` measures one.
    let args: Vec<String> = std::env::args().collect();
    let only = args
        .iter()
        .position(|a| a == "--fs")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let mut places = Vec::new();
    if only != Some("tmpfs") {
        places.push(("disk", tempfile::tempdir().expect("temp dir")));
    }
    if bench && only != Some("disk") && Path::new("/dev/shm").is_dir() {
        if let Ok(dir) = tempfile::tempdir_in("/dev/shm") {
            places.push(("tmpfs", dir));
        }
    }
    println!("round of {ORDERS} work orders, {files}-file repository, median of {runs}:");
    for (name, dir) in &places {
        let (ours, theirs, peak_rss) = compare(dir.path(), files, runs);
        println!("  on {name} ({}):", dir.path().display());
        println!(
            "    git-arbiter round      {:>8.1} ms",
            ours.as_secs_f64() * 1e3
        );
        println!(
            "    git CLI by hand        {:>8.1} ms",
            theirs.as_secs_f64() * 1e3
        );
        println!(
            "    speed-up               {:>8.2}x (target >= 1.5x)",
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
        println!(
            "    peak RSS of any child  {:>8.1} MB (the conductor; target < 150 MB)",
            peak_rss as f64 / 1024.0
        );
    }
}

//! Helpers the benchmarks share: running git, copying a template
//! repository, medians.

#![allow(dead_code)] // each bench uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Run `git args` in `dir` and return its stdout; panics when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A copy of `template` at `root/name` (`cp -a`), replacing any earlier
/// copy and its worktree dir.
pub fn fresh(template: &Path, root: &Path, name: &str) -> PathBuf {
    let dest = root.join(name);
    let _ = std::fs::remove_dir_all(&dest);
    let _ = std::fs::remove_dir_all(root.join(format!("{name}.arbiter")));
    let status = Command::new("cp")
        .arg("-a")
        .arg(template)
        .arg(&dest)
        .status()
        .expect("cp");
    assert!(status.success(), "cp -a {}", template.display());
    dest
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `git arbiter args…` in `repo`, its machine-wide slots under `slots`, run
/// as a user runs it (the release binary, a fresh process): its wall time.
/// Panics when it fails.
pub fn timed_arbiter(repo: &Path, slots: &Path, args: &[&str]) -> Duration {
    let start = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_git-arbiter"))
        .current_dir(repo)
        .env("ARBITER_SLOT_DIR", slots)
        .args(args)
        .output()
        .expect("git-arbiter runs");
    let elapsed = start.elapsed();
    assert!(
        output.status.success(),
        "git arbiter {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

/// Peak RSS (KiB) of the largest waited-for child so far, from getrusage(2).
pub fn children_max_rss() -> i64 {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_CHILDREN is always valid.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage.ru_maxrss
    }
}

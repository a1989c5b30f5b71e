//! Named kill points for the crash tests (issue "exactly once, never wedged").
//!
//! With `ARBITER_CRASH_AT=<point>` a debug build aborts at that point,
//! without unwinding: no destructor runs, no lock file is cleaned up, as
//! with SIGKILL. `<point>#<n>` aborts at the n-th time the point is reached
//! (1 for the first), so a round can be killed at its second merge. Release
//! builds compile the points away.
//!
//! `ARBITER_FILL_AT=<point>[#<n>]` with `ARBITER_FILL_FILE=<path>` instead
//! fills the disk there: the file at `<path>` grows until the file system
//! is full, so that whatever the process writes next fails with ENOSPC as
//! on a real full disk (the full-disk tests).
//!
//! `ARBITER_SLOW_AT=<point>` makes every pass through that point wait half
//! a second: a window between two threads that load opens only at times,
//! held open for a test.

/// Every point, in the order a work order meets them. The kill-point matrix
/// test runs a small round once per point.
pub const POINTS: &[&str] = &[
    // round / race
    "dispatch.before",
    "dispatch.after",
    "worktree-add.before",
    "worktree-add.after",
    // the pool: switching a free worktree to an order's base, resetting it after
    "pool-switch.before",
    "pool-switch.after",
    // a split index's new shared index is written, the index naming it not yet
    "shared-index.after",
    "build.started",
    // a command's shell started, its process group not recorded yet
    "command.spawned",
    "leftovers.before",
    // the leftovers staged (the index written), not yet committed
    "leftovers-index.after",
    "leftovers.after",
    // the attempt's outcome known to its build thread, not yet to the run
    "attempt.ended",
    "verdict.before",
    "verdict.after",
    // the merge queue's verification of a chain
    "verify.started",
    // merge-back (round, race and the standalone command)
    "merge-start.after",
    "merge-commit.after",
    "branch-cas.before",
    "branch-cas.after",
    "checkout-files.after",
    "checkout-index.after",
    "merge-recorded.before",
    "merge-recorded.after",
    // pruning
    "worktree-remove.before",
    "worktree-remove.after",
    "branch-delete.before",
    "branch-delete.after",
    "pool-clean.after",
    // race
    "pick.before",
    "pick.after",
    // clear
    "clear.recorded",
    // with a remote: a push taken by the remote, the local refs not yet moved
    "remote-push.after",
];

/// Abort here if `ARBITER_CRASH_AT` names this point (debug builds only).
pub fn point(name: &str) {
    #[cfg(debug_assertions)]
    armed::hit(name);
    #[cfg(not(debug_assertions))]
    let _ = name;
}

#[cfg(debug_assertions)]
mod armed {
    use std::io::Write;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::OnceLock;

    static TARGET: OnceLock<Option<(String, u32)>> = OnceLock::new();
    static HITS: AtomicU32 = AtomicU32::new(0);
    static FILL: OnceLock<Option<(String, u32)>> = OnceLock::new();
    static FILL_HITS: AtomicU32 = AtomicU32::new(0);
    static SLOW: OnceLock<Option<String>> = OnceLock::new();

    /// `<point>[#<n>]` from the variable `var`.
    fn spec(var: &str) -> Option<(String, u32)> {
        let spec = std::env::var(var).ok()?;
        Some(match spec.split_once('#') {
            Some((point, n)) => (point.to_owned(), n.parse().unwrap_or(1)),
            None => (spec, 1),
        })
    }

    pub fn hit(name: &str) {
        debug_assert!(super::POINTS.contains(&name), "unlisted kill point {name}");
        if SLOW
            .get_or_init(|| std::env::var("ARBITER_SLOW_AT").ok())
            .as_deref()
            == Some(name)
        {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        if let Some((point, nth)) = FILL.get_or_init(|| spec("ARBITER_FILL_AT")) {
            if point == name && FILL_HITS.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
                fill_the_disk(name);
            }
        }
        if let Some((point, nth)) = TARGET.get_or_init(|| spec("ARBITER_CRASH_AT")) {
            if point == name && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
                // Written, not eprintln!: with stderr closed, still abort here.
                let _ = writeln!(std::io::stderr(), "arbiter crash point={name}");
                std::process::abort();
            }
        }
    }

    /// Grow `ARBITER_FILL_FILE` until its file system is full.
    fn fill_the_disk(name: &str) {
        let Some(path) = std::env::var_os("ARBITER_FILL_FILE") else {
            return;
        };
        let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        else {
            return;
        };
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        // The last bytes that still fit, so nothing is left.
        for size in [4096, 512, 1] {
            while file.write_all(&block[..size]).is_ok() {}
        }
        let _ = file.sync_all();
        let _ = writeln!(std::io::stderr(), "arbiter fill point={name}");
    }
}

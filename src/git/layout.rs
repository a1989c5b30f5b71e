//! Where git-arbiter keeps its files in a repository: one directory,
//! `<git-common-dir>/arbiter/`, shared by the main worktree and every linked
//! one (a conductor in any of them sees the same logs, conductors and locks).

use std::path::{Path, PathBuf};

/// `<git-common-dir>/arbiter`.
pub fn dir(repo: &gix::Repository) -> PathBuf {
    repo.common_dir().join("arbiter")
}

/// `<dir>/logs/<id>`: the logs of one work order's builds, gates and critics.
pub fn logs(repo: &gix::Repository, id: &str) -> PathBuf {
    dir(repo).join("logs").join(id)
}

/// `<dir>/logs/<file>`: a log of the run itself (a verification, the final gate).
pub fn run_log(repo: &gix::Repository, file: &str) -> PathBuf {
    dir(repo).join("logs").join(file)
}

/// `<dir>/fetch.lock`: held by the fetch of the state in progress.
pub fn fetch_lock(repo: &gix::Repository) -> PathBuf {
    dir(repo).join("fetch.lock")
}

/// `<dir>/conductors`: one locked file per running conductor.
pub fn conductors(repo: &gix::Repository) -> PathBuf {
    dir(repo).join("conductors")
}

/// `<dir>/<what>.lock`: the file whose flock is the turn at `what`.
pub fn turn(repo: &gix::Repository, what: &str) -> PathBuf {
    dir(repo).join(format!("{what}.lock"))
}

/// `<dir>/ref-edits`: markers of ref edits in progress.
pub fn ref_edits(repo: &gix::Repository) -> PathBuf {
    dir(repo).join("ref-edits")
}

/// `<git-dir>/arbiter-index-lock` of a worktree: written just before
/// git-arbiter takes that worktree's `index.lock` and removed after it, so
/// a lock beside it is one a killed git-arbiter left.
pub fn index_lock_marker(git_dir: &Path) -> PathBuf {
    git_dir.join("arbiter-index-lock")
}

/// `<git-dir>/arbiter-index-tree` of a worktree: `<checksum> <tree>`, the
/// last index file git-arbiter wrote there or proved to hold exactly that
/// tree, by its checksum. A new process trusts it only while the index
/// file still ends in that checksum (the same bytes, the same entries).
pub fn index_tree_memo(git_dir: &Path) -> PathBuf {
    git_dir.join("arbiter-index-tree")
}

/// `<git-dir>/arbiter-landing` of a checkout of the integration branch:
/// `from <commit>` and `to <commit>` of a landing whose branch move may have
/// happened while its files and index were not yet updated there.
pub fn landing_journal(git_dir: &Path) -> PathBuf {
    git_dir.join("arbiter-landing")
}

/// Remove the lock of `index` (in the worktree whose git dir is `git_dir`)
/// when its marker says a git-arbiter took it, and the marker: for a caller
/// that knows no git-arbiter works there now. True when a lock went.
pub fn clear_index_lock_left(git_dir: &Path, index: &Path) -> bool {
    let marker = index_lock_marker(git_dir);
    if !marker.exists() {
        return false;
    }
    let removed = std::fs::remove_file(index.with_extension("lock")).is_ok();
    let _ = std::fs::remove_file(&marker);
    removed
}

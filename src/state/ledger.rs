//! The pool's bookkeeping (see the `pool` module): one JSON entry and one
//! lock file per pooled worktree under `<common-dir>/arbiter/pool/`. Below
//! `worktree`, which must not remove a pooled worktree a live process holds.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::state::context::Context;
use crate::sys::caches::Caches;
use crate::sys::error::{Diagnosis, ExitCode, Result};
use crate::sys::flock::Held;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Serializing, writing or renaming a pooled worktree's entry into place.
    #[error("writing {}: {source}", path.display())]
    WriteEntry {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening {}: {source}", path.display())]
    OpenLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("locking {}: {source}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("removing {}: {source}", path.display())]
    RemoveEntry {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Where a pooled worktree is in its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Being created with its first order's branch.
    #[default]
    Creating,
    /// Being switched to an order's base; a killed switch leaves this.
    Switching,
    /// An order's attempt runs in it.
    Held,
    /// Being reset after an attempt; a killed reset leaves this.
    Cleaning,
    /// Clean at `tree`, ready for the next order.
    Free,
    /// Its order halted (or its work could not be committed): it left the
    /// pool and is kept as it is until the order's branch is removed.
    Left,
}

/// The bookkeeping of one pooled worktree, `<common-dir>/arbiter/pool/<n>.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Entry {
    pub state: State,
    /// The process that holds (or last held) it.
    pub pid: Option<u32>,
    /// The branch it has (or last had) checked out.
    pub branch: Option<String>,
    /// The commit it was switched to, or holds when free.
    pub base: Option<String>,
    /// The tree its index and files hold when free.
    pub tree: Option<String>,
    /// The checksum of the index written when it was last made free: a free
    /// worktree whose index changed since is reset in full, not trusted.
    pub index_checksum: Option<String>,
    /// The tree the setup command last succeeded on, and when.
    pub setup_tree: Option<String>,
    pub setup_at: Option<i64>,
    /// Seconds since the epoch of its last take or give-back.
    pub last_use: i64,
    /// Bytes of ignored files kept in it, measured when it was made free.
    pub ignored_bytes: Option<u64>,
}

pub(crate) fn meta_dir(common: &Path) -> PathBuf {
    common.join("arbiter").join("pool")
}

pub(crate) fn entry_path(common: &Path, n: &str) -> PathBuf {
    meta_dir(common).join(format!("{n}.json"))
}

/// Where the stamps of pooled worktree `n`'s folders wait for the next
/// process that takes it (see `git::stamps::save`).
pub(crate) fn stamps_path(common: &Path, n: &str) -> PathBuf {
    meta_dir(common).join(format!("{n}.stamps"))
}

/// The numbers that have an entry.
pub(crate) fn numbers(common: &Path) -> Vec<String> {
    std::fs::read_dir(meta_dir(common))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|file| {
            let name = file.file_name();
            Some(name.to_str()?.strip_suffix(".json")?.to_owned())
        })
        .collect()
}

pub(crate) fn read_entry(common: &Path, n: &str) -> Option<Entry> {
    let bytes = std::fs::read(entry_path(common, n)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Write `<n>.json` atomically: a crash leaves the old or the new content.
pub(crate) fn write_entry(common: &Path, n: &str, entry: &Entry) -> Result<()> {
    let dir = meta_dir(common);
    let path = entry_path(common, n);
    let failed = |source| Error::WriteEntry {
        path: path.clone(),
        source,
    };
    // Serialized first, then written at once: the file is unbuffered, and
    // the serializer writes token by token.
    let text = serde_json::to_vec_pretty(entry).map_err(|e| failed(e.into()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(failed)?;
    tmp.write_all(&text).map_err(failed)?;
    tmp.persist(&path).map_err(|e| failed(e.error))?;
    Ok(())
}

/// Take the lock of pooled worktree `n` if no process holds it; `None` when
/// one does. The lock lasts until the returned guard is dropped.
pub(crate) fn hold(ctx: &Context, n: &str) -> Result<Option<Held>> {
    let dir = meta_dir(ctx.repo.common_dir());
    std::fs::create_dir_all(&dir).map_err(|source| Error::CreateDir {
        dir: dir.clone(),
        source,
    })?;
    let path = dir.join(format!("{n}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| Error::OpenLock {
            path: path.clone(),
            source,
        })?;
    let held = Held::try_take(file).map_err(|source| Error::Lock { path, source })?;
    Ok(held)
}

/// Drop the bookkeeping of pooled worktree `n` (its worktree is gone). The
/// lock file stays: removing it could let two processes lock two files.
pub(crate) fn forget(ctx: &Context, n: &str) -> Result<()> {
    let _ = std::fs::remove_file(stamps_path(ctx.repo.common_dir(), n));
    let path = entry_path(ctx.repo.common_dir(), n);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::RemoveEntry { path, source }.into()),
    }
}

/// The branches whose pooled worktree this process holds for an attempt
/// (a [`Caches`] entry): recovery in another thread of the same run must
/// not take them for a killed run's leftovers (their lock is held, by us).
#[derive(Default)]
struct Leased(Mutex<Vec<String>>);

fn leased(caches: &Caches) -> Arc<Leased> {
    caches.get::<Leased>()
}

impl Leased {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        // Push and remove only: a panic elsewhere leaves it usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub(crate) fn lease(caches: &Caches, branch: &str) {
    leased(caches).lock().push(branch.to_owned());
}

pub(crate) fn release(caches: &Caches, branch: &str) {
    leased(caches).lock().retain(|b| b != branch);
}

/// Does this process hold the pooled worktree of `branch`?
pub(crate) fn is_leased(caches: &Caches, branch: &str) -> bool {
    leased(caches).lock().iter().any(|b| b == branch)
}

#[cfg(test)]
mod tests {
    use crate::testutil::{new_repo, scratch};

    /// A process forked by another thread while a pooled worktree is given
    /// back holds a copy of its lock file until it execs: the worktree must
    /// be free to take all the same (else a take makes a new one).
    #[test]
    fn a_released_hold_is_free_while_a_copy_of_its_file_lives() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        let ctx = crate::state::context::Context::discover(&dir).expect("open");
        let held = super::hold(&ctx, "0").expect("hold").expect("free");
        let copy = rustix::io::dup(held.file()).expect("dup");
        drop(held);
        assert!(
            super::hold(&ctx, "0").expect("hold").is_some(),
            "the worktree given back is still held"
        );
        drop(copy);
    }
}

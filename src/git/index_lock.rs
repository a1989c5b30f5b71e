//! The index file's lock (`index.lock`) as git takes it, waited for briefly
//! when someone else (an editor's `git status`) holds it, and the index
//! read and written through it.

use std::io::Write;
use std::path::{Path, PathBuf};

use gix::ObjectId;

use crate::git::paths::workdir;
use crate::git::splitindex;
use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The marker that says a held `index.lock` is ours.
    #[error("writing {}: {source}", marker.display())]
    WriteMarker {
        marker: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the index of {}: {source}", dir.display())]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Putting the written index in place of the old one.
    #[error("writing the index of {}: {source}", dir.display())]
    Commit {
        dir: PathBuf,
        #[source]
        source: gix::lock::commit::Error<gix::lock::File>,
    },
    #[error("reading the index of {}: {source}", dir.display())]
    Read {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// A held `index.lock`; the new index is written through it. While it is
/// held, a marker file beside it says the lock is git-arbiter's: a process
/// killed holding it leaves both, and [`sync_worktrees`] then knows the lock
/// is a leftover of ours, not a running git command's.
pub(crate) struct IndexLock {
    lock: Option<gix::lock::File>,
    marker: PathBuf,
    /// The worktree's git dir, where a split index keeps its shared index.
    git_dir: PathBuf,
    /// The shared index files there are git-arbiter's ([`splitindex`]).
    owned: bool,
    /// Write the index split.
    split: bool,
    /// Its `splitIndex.maxPercentChange`.
    max_percent: u8,
}

impl Drop for IndexLock {
    fn drop(&mut self) {
        // The lock file goes first (gix removes it when dropped), then the marker.
        drop(self.lock.take());
        let _ = std::fs::remove_file(&self.marker);
    }
}

fn index_lock_marker(wt: &gix::Repository) -> PathBuf {
    crate::git::layout::index_lock_marker(wt.git_dir())
}

/// Remove an `index.lock` a killed git-arbiter left (its marker is there).
pub(crate) fn clear_our_stale_index_lock(wt: &gix::Repository) {
    crate::git::layout::clear_index_lock_left(wt.git_dir(), &wt.index_path());
}

impl IndexLock {
    pub(crate) fn take(wt: &gix::Repository) -> Result<IndexLock> {
        IndexLock::try_take(wt)?.ok_or_else(|| crate::sys::error::Error::Locked {
            what: format!(
                "the index of {}",
                wt.workdir().unwrap_or(wt.git_dir()).display()
            ),
            lock: wt.index_path().with_extension("lock"),
        })
    }

    /// Take the lock if it is free now; `None` when someone holds it.
    fn try_take(wt: &gix::Repository) -> Result<Option<IndexLock>> {
        let path = wt.index_path();
        // The marker goes first: a kill between the two then leaves a marker
        // without a lock (harmless), never a lock nobody can tell is ours.
        // A marker already there stays: it tells of a lock a killed
        // git-arbiter left, which recovery removes, never of ours.
        let marker = index_lock_marker(wt);
        let marked_before = marker.exists();
        if !marked_before {
            std::fs::write(&marker, format!("{}\n", std::process::id())).map_err(|source| {
                Error::WriteMarker {
                    marker: marker.clone(),
                    source,
                }
            })?;
        }
        let Ok(lock) = gix::lock::File::acquire_to_update_resource(
            &path,
            gix::lock::acquire::Fail::Immediately,
            None,
            0,
        ) else {
            if !marked_before {
                let _ = std::fs::remove_file(&marker);
            }
            return Ok(None);
        };
        Ok(Some(IndexLock {
            lock: Some(lock),
            marker,
            git_dir: wt.git_dir().to_owned(),
            owned: splitindex::owned(wt),
            split: splitindex::wanted(wt),
            max_percent: splitindex::max_percent_change(wt),
        }))
    }

    /// [`IndexLock::take`], waiting up to `wait` for a lock someone else
    /// holds (an editor's `git status` takes it for a moment); `None` when
    /// it is still held then.
    pub(crate) fn wait(
        wt: &gix::Repository,
        wait: std::time::Duration,
    ) -> Result<Option<IndexLock>> {
        let started = std::time::Instant::now();
        loop {
            match IndexLock::try_take(wt)? {
                Some(lock) => return Ok(Some(lock)),
                None if started.elapsed() >= wait => return Ok(None),
                None => std::thread::sleep(lock_pause(started)),
            }
        }
    }

    /// Is the index written split ([`splitindex::wanted`])?
    pub(crate) fn writes_split(&self) -> bool {
        self.split
    }

    /// Write `index` through the lock and put it in place; returns its
    /// checksum. A split index gets a new shared index holding all of it.
    pub(crate) fn commit(self, index: &gix::index::State, dir: &Path) -> Result<ObjectId> {
        if self.split && !index.is_sparse() {
            let shared = splitindex::write_shared(&self.git_dir, index)?;
            crate::sys::crash::point("shared-index.after");
            let empty = gix::index::State::new(index.object_hash());
            let data = splitindex::split_file(&empty, shared, &[])?;
            let git_dir = self.git_dir.clone();
            let checksum = self.put(data, index.object_hash(), dir)?;
            splitindex::remove_stale(&git_dir, Some(shared));
            return Ok(checksum);
        }
        let stale = self.owned.then(|| self.git_dir.clone());
        // The finished bytes are hashed at once: `File::write_to` feeds the
        // checksum every small write (a few per entry), three times the cost
        // on 50,000 entries. Same bytes, same trailing checksum.
        let data = crate::git::index_file::encode(index)?;
        let checksum = self.put(data, index.object_hash(), dir)?;
        // Split no more (`core.splitIndex=false`): no shared index is needed.
        if let Some(git_dir) = stale {
            splitindex::remove_stale(&git_dir, None);
        }
        Ok(checksum)
    }

    /// Write the split index `split` (only what it adds and deletes, unless
    /// that has grown past git's limit: then all of it, shared anew).
    pub(crate) fn commit_split(self, split: &splitindex::Split, dir: &Path) -> Result<ObjectId> {
        match split.shared_checksum() {
            Some(shared) if self.split && !split.too_many_added(self.max_percent) => {
                let data = splitindex::split_file(&split.added, shared, &split.deleted)?;
                let git_dir = self.git_dir.clone();
                let checksum = self.put(data, split.added.object_hash(), dir)?;
                // git keeps a shared index it replaced for two weeks; no
                // other index of this worktree names it.
                splitindex::remove_stale(&git_dir, Some(shared));
                Ok(checksum)
            }
            _ => self.commit(&split.merged(), dir),
        }
    }

    /// Write the index file `data` and its checksum through the lock, and
    /// put it in place.
    fn put(mut self, data: Vec<u8>, hash: gix::hash::Kind, dir: &Path) -> Result<ObjectId> {
        let mut lock = self.lock.take().expect("an index lock is committed once");
        let checksum = splitindex::checksum_of(hash, &data)?;
        lock.write_all(&data)
            .and_then(|()| lock.write_all(checksum.as_slice()))
            .map_err(|source| Error::Write {
                dir: dir.to_owned(),
                source,
            })?;
        lock.commit().map_err(|source| Error::Commit {
            dir: dir.to_owned(),
            source,
        })?;
        Ok(checksum)
    }
}

/// Sleep between two tries of a lock held by someone else: short (an
/// editor's `git status` holds it for milliseconds), a little random so two
/// waiters do not keep meeting.
fn lock_pause(started: std::time::Instant) -> std::time::Duration {
    let spent = started.elapsed().as_millis() as u64;
    let base = (2 + spent / 20).min(25);
    let jitter = crate::sys::clock::now_nanos() % (base + 1);
    std::time::Duration::from_millis(base + jitter)
}

/// `wt`'s index, read as git reads it: the checksum at its end is not
/// verified (git does that in `git fsck` only; at 50,000 entries it costs
/// twice the decoding).
pub(crate) fn read_index(wt: &gix::Repository) -> Result<gix::index::File> {
    // The message names the worktree's folder: a repository without one
    // is refused before its index is read.
    let dir = workdir(wt)?;
    Ok(gix::index::File::at(
        wt.index_path(),
        wt.object_hash(),
        true,
        gix::index::decode::Options::default(),
    )
    .map_err(|source| Error::Read { dir, source })?)
}

/// Keep `wt`'s index split from now on ([`splitindex`]): a pooled worktree,
/// switched from one base to the next. An index not split yet is written
/// split now, with the same entries.
pub(crate) fn keep_index_split(wt: &gix::Repository) -> Result<()> {
    if splitindex::owned(wt) {
        return Ok(());
    }
    splitindex::enable(wt)?;
    clear_our_stale_index_lock(wt);
    let Ok(index) = read_index(wt) else {
        // No index (or none readable): the next full write makes one, split.
        return Ok(());
    };
    let dir = workdir(wt)?;
    IndexLock::take(wt)?.commit(&index, &dir).map(drop)
}

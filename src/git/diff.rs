//! Which paths two trees differ in, as the drift check and the checkouts
//! count them: every non-tree entry, renames off (a rename is a deletion and
//! an addition), no blob read.

use gix::bstr::ByteSlice;
use gix::diff::tree::{recorder::Change, Recorder};
use gix::objs::TreeRefIter;
use gix::ObjectId;
use serde::Serialize;

use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading tree {tree}: {source}")]
    ReadTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("diffing {old_tree}..{new_tree}: {source}")]
    Diff {
        old_tree: ObjectId,
        new_tree: ObjectId,
        #[source]
        source: gix::diff::tree::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Added,
    Deleted,
    Modified,
}

/// One changed non-tree path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub path: Vec<u8>,
    pub kind: Kind,
}

impl Changed {
    /// The path as text (lossy for non-UTF-8 names; only used for display and notes).
    pub fn display(&self) -> String {
        self.path.to_str_lossy().into_owned()
    }
}

/// Every non-tree path that differs between `old_tree` and `new_tree`, sorted by path.
///
/// The plain tree diff: with rename tracking off no blob is ever read, so the
/// diff needs none of the attribute and filter setup `diff_tree_to_tree` does.
pub fn changed_paths(
    repo: &gix::Repository,
    old_tree: ObjectId,
    new_tree: ObjectId,
) -> Result<Vec<Changed>> {
    let old = repo.find_tree(old_tree).map_err(|source| Error::ReadTree {
        tree: old_tree,
        source,
    })?;
    let new = repo.find_tree(new_tree).map_err(|source| Error::ReadTree {
        tree: new_tree,
        source,
    })?;
    let mut recorder = Recorder::default();
    gix::diff::tree(
        TreeRefIter::from_bytes(&old.data, repo.object_hash()),
        TreeRefIter::from_bytes(&new.data, repo.object_hash()),
        gix::diff::tree::State::default(),
        &repo.objects,
        &mut recorder,
    )
    .map_err(|source| Error::Diff {
        old_tree,
        new_tree,
        source,
    })?;
    let mut out = Vec::with_capacity(recorder.records.len());
    for change in recorder.records {
        let (path, kind) = match change {
            Change::Addition {
                path, entry_mode, ..
            } if !entry_mode.is_tree() => (path, Kind::Added),
            Change::Deletion {
                path, entry_mode, ..
            } if !entry_mode.is_tree() => (path, Kind::Deleted),
            // tree→tree is only a directory whose contents changed; those are listed on their own.
            Change::Modification {
                path,
                previous_entry_mode,
                entry_mode,
                ..
            } if !(previous_entry_mode.is_tree() && entry_mode.is_tree()) => {
                let kind = if previous_entry_mode.is_tree() {
                    Kind::Added
                } else if entry_mode.is_tree() {
                    Kind::Deleted
                } else {
                    Kind::Modified
                };
                (path, kind)
            }
            _ => continue,
        };
        out.push(Changed {
            path: path.into(),
            kind,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    Ok(out)
}

//! What a worktree holds that its index does not: edits that updating the
//! files could lose, untracked files in the way of tracked ones, and the
//! blob git would store for a file.

use std::path::{Path, PathBuf};

use gix::bstr::{BStr, ByteSlice};
use gix::ObjectId;

use crate::git::paths::rel_path;
use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {}: {source}", dir.display())]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("preparing status: {source}")]
    Prepare {
        #[source]
        source: gix::Error,
    },
    #[error("reading status: {source}")]
    Start {
        #[source]
        source: gix::Error,
    },
    #[error("reading status: {source}")]
    Item {
        #[source]
        source: gix::Error,
    },
    #[error("hashing {}: {source}", path.display())]
    Hash {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Could updating the files lose this difference between index and worktree?
/// Not when only the stat data is stale (the content equals the index), nor
/// when a submodule is merely at another commit with clean files: the update
/// never writes inside a submodule (as `git merge` does not), and after a
/// merge that moved its commit that is exactly the state git leaves, fixed
/// by `git submodule update`.
pub(crate) fn is_edit(item: &gix::status::index_worktree::Item) -> bool {
    use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
    match item {
        gix::status::index_worktree::Item::Modification { status, .. } => match status {
            EntryStatus::NeedsUpdate(_) => false,
            EntryStatus::Change(Change::SubmoduleModification(sm)) => {
                sm.changes.as_ref().is_some_and(|c| !c.is_empty())
            }
            _ => true,
        },
        _ => true,
    }
}

/// Of the paths a merge adds, those an untracked file (or a file where a
/// directory is needed) occupies in `dir`; `tracked` says whether a path is in
/// the old tree. Sorted, no duplicates.
pub(crate) fn untracked_in_the_way<'a>(
    dir: &Path,
    added: impl Iterator<Item = &'a [u8]>,
    tracked: impl Fn(&[u8]) -> bool,
) -> Result<Vec<String>> {
    let mut collisions = Vec::new();
    'paths: for path in added {
        let rel = rel_path(path)?;
        // The path's folders from the top: the first that is not a folder
        // on disk decides. An untracked file there blocks (the new tree
        // needs a folder); a tracked one goes first, as git removes it;
        // nothing there means nothing below it either. What is behind a
        // link is never looked at: that would be some other file.
        let mut folders: Vec<&Path> = rel
            .ancestors()
            .skip(1)
            .filter(|a| !a.as_os_str().is_empty())
            .collect();
        folders.reverse();
        for folder in folders {
            match std::fs::symlink_metadata(dir.join(folder)) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    let is_tracked = gix::path::os_str_into_bstr(folder.as_os_str())
                        .map(|f| tracked(f.as_bytes()))
                        .unwrap_or(false);
                    if !is_tracked {
                        collisions.push(folder.to_string_lossy().into_owned());
                    }
                    continue 'paths;
                }
                Err(_) => continue 'paths,
            }
        }
        match std::fs::symlink_metadata(dir.join(&rel)) {
            // A tracked directory the merge replaces by a file (as git does,
            // its tracked files go first): only untracked files in it block.
            Ok(meta) if meta.is_dir() => untracked_below(dir, &rel, &tracked, &mut collisions)?,
            Ok(_) => collisions.push(path.to_str_lossy().into_owned()),
            Err(_) => {}
        }
    }
    collisions.sort();
    collisions.dedup();
    Ok(collisions)
}

/// Every file below the folder `rel` of `dir` that `tracked` does not know,
/// into `found` as repository paths. A nested repository counts as one.
fn untracked_below(
    dir: &Path,
    rel: &Path,
    tracked: &impl Fn(&[u8]) -> bool,
    found: &mut Vec<String>,
) -> Result<()> {
    let abs = dir.join(rel);
    let listing = std::fs::read_dir(&abs).map_err(|source| Error::ReadDir {
        dir: abs.clone(),
        source,
    })?;
    for entry in listing {
        let entry = entry.map_err(|source| Error::ReadDir {
            dir: abs.clone(),
            source,
        })?;
        let child = rel.join(entry.file_name());
        let repo_path = gix::path::os_str_into_bstr(child.as_os_str())
            .map(|p| p.to_vec())
            .unwrap_or_default();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && !dir.join(&child).join(".git").exists() {
            untracked_below(dir, &child, tracked, found)?;
        } else if !tracked(&repo_path) {
            found.push(child.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

/// Changes between index and files only (HEAD is ahead of the index during
/// recovery); `index` is the worktree's index if already loaded.
pub(crate) fn unstaged_changes(
    wt: &gix::Repository,
    index: Option<gix::index::File>,
) -> Result<Vec<String>> {
    let mut status = wt
        .status(gix::progress::Discard)
        .map_err(|source| Error::Prepare { source })?;
    if let Some(index) = index {
        status = status.index(index.into());
    }
    let iter = status
        .untracked_files(gix::status::UntrackedFiles::None)
        .index_worktree_rewrites(None)
        .into_index_worktree_iter(Vec::new())
        .map_err(|source| Error::Start { source })?;
    let mut paths = Vec::new();
    for item in iter {
        let item = item.map_err(|source| Error::Item { source })?;
        if is_edit(&item) {
            paths.push(item.rela_path().to_str_lossy().into_owned());
        }
    }
    Ok(paths)
}

/// The id of the blob git would store for `entry`'s file (through the
/// filters of .gitattributes; a link's target), without storing it; `None`
/// when it cannot be read as one.
pub(crate) fn blob_id(
    wt: &gix::Repository,
    to_git: &mut crate::git::encoding::ToGit<'_>,
    index: &gix::index::State,
    dir: &Path,
    path: &BStr,
    mode: gix::index::entry::Mode,
) -> Result<Option<ObjectId>> {
    let abs = dir.join(rel_path(path)?);
    let data = if mode == gix::index::entry::Mode::SYMLINK {
        match std::fs::read_link(&abs) {
            Ok(target) => gix::path::os_str_into_bstr(target.as_os_str())
                .map(|t| t.to_vec())
                .unwrap_or_default(),
            Err(_) => return Ok(None),
        }
    } else {
        match to_git.blob(index, path, &abs)? {
            Some(data) => data,
            None => return Ok(None),
        }
    };
    gix::objs::compute_hash(wt.object_hash(), gix::objs::Kind::Blob, &data)
        .map(Some)
        .map_err(|source| Error::Hash { path: abs, source }.into())
}

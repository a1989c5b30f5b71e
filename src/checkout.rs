//! Keep a checked-out integration branch in step with merge-back.
//!
//! gix 0.90 has no two-way checkout (`git read-tree -m -u A B`), so this
//! module does it: delete what B drops, build the index from B, reuse the stat
//! data of entries unchanged since A (marked SKIP_WORKTREE so checkout leaves
//! their files alone) and check out the rest over the old files. A worktree
//! with local changes is never touched: [`preflight`] refuses first, naming
//! the files, before anything moves.
//!
//! The branch moves before the files follow, so a crash in between leaves a
//! worktree whose index still matches the previous tip's tree.
//! [`sync_checked_out`] recognises that state and finishes the update.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::{BStr, ByteSlice};
use gix::refs::FullName;
use gix::ObjectId;

use crate::context::Context;
use crate::error::{Error, GitContext, InputError, Result};

/// How many arbiter merges back recovery looks for the tree a stale index matches.
const MAX_RECOVERY_DEPTH: usize = 64;

/// Every worktree (main or linked) that has `branch` checked out, as a repository handle.
pub fn worktrees_with_branch(ctx: &Context, branch: &FullName) -> Result<Vec<gix::Repository>> {
    let mut out = Vec::new();
    let main = ctx
        .repo
        .main_repo()
        .git_context("opening the main worktree")?;
    if main.workdir().is_some() && main.head_name().ok().flatten().as_ref() == Some(branch) {
        out.push(main);
    }
    for proxy in ctx
        .repo
        .worktrees()
        .git_context("listing linked worktrees")?
    {
        // A registration whose folder is gone has no files to keep in step.
        if proxy.is_prunable() {
            continue;
        }
        let Ok(repo) = proxy.into_repo_with_possibly_inaccessible_worktree() else {
            continue;
        };
        if repo.workdir().is_some() && repo.head_name().ok().flatten().as_ref() == Some(branch) {
            out.push(repo);
        }
    }
    Ok(out)
}

fn workdir(wt: &gix::Repository) -> Result<PathBuf> {
    wt.workdir().map(Path::to_owned).ok_or_else(|| {
        Error::Input(InputError::new(
            "a checked-out branch without a worktree was found",
        ))
    })
}

/// Tracked paths with local changes (staged or not) in `wt`; untracked files are not listed.
pub fn local_changes(wt: &gix::Repository) -> Result<Vec<String>> {
    let iter = wt
        .status(gix::progress::Discard)
        .git_context("preparing status")?
        .untracked_files(gix::status::UntrackedFiles::None)
        .index_worktree_rewrites(None)
        .into_iter(None)
        .git_context("reading status")?;
    let mut paths = BTreeSet::new();
    for item in iter {
        let item = item.git_context("reading status")?;
        if let gix::status::Item::IndexWorktree(gix::status::index_worktree::Item::Modification {
            status: gix::status::plumbing::index_as_worktree::EntryStatus::NeedsUpdate(_),
            ..
        }) = &item
        {
            // Only the stat data is stale; the content equals the index.
            continue;
        }
        paths.insert(item.location().to_str_lossy().into_owned());
    }
    Ok(paths.into_iter().collect())
}

/// Non-tree entries of `tree`, path → (mode, id).
fn flat_tree(
    repo: &gix::Repository,
    tree: ObjectId,
) -> Result<std::collections::BTreeMap<Vec<u8>, (gix::objs::tree::EntryMode, ObjectId)>> {
    let index = repo
        .index_from_tree(&tree)
        .git_context(format!("reading tree {tree}"))?;
    Ok(index
        .entries()
        .iter()
        .map(|e| {
            (
                e.path(&index).to_vec(),
                (
                    e.mode
                        .to_tree_entry_mode()
                        .unwrap_or(gix::objs::tree::EntryKind::Blob.into()),
                    e.id,
                ),
            )
        })
        .collect())
}

/// Refuse (exit 2, nothing moved) when updating `wt` from `old_tree` to
/// `new_tree` could lose a user's work: tracked local changes, or an untracked
/// (or ignored) file where the new tree puts one.
pub fn preflight(wt: &gix::Repository, old_tree: ObjectId, new_tree: ObjectId) -> Result<()> {
    let dir = workdir(wt)?;
    let changed = local_changes(wt)?;
    if !changed.is_empty() {
        return Err(InputError::new(format!(
            "the integration branch is checked out in {} with local changes: {}",
            dir.display(),
            list(&changed)
        ))
        .hint("commit or stash them there first; git arbiter never overwrites a user's edit")
        .into());
    }
    let old = flat_tree(wt, old_tree)?;
    let new = flat_tree(wt, new_tree)?;
    let mut collisions = Vec::new();
    for path in new.keys().filter(|p| !old.contains_key(*p)) {
        let rel = rel_path(path)?;
        if std::fs::symlink_metadata(dir.join(&rel)).is_ok() {
            collisions.push(path.to_str_lossy().into_owned());
            continue;
        }
        // An untracked file where the new tree needs a directory blocks it too.
        for ancestor in rel.ancestors().skip(1) {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            let tracked = gix::path::os_str_into_bstr(ancestor.as_os_str())
                .map(|a| old.contains_key(a.as_bytes()))
                .unwrap_or(false);
            if let Ok(meta) = std::fs::symlink_metadata(dir.join(ancestor)) {
                if !meta.is_dir() && !tracked {
                    collisions.push(ancestor.to_string_lossy().into_owned());
                }
            }
        }
    }
    if !collisions.is_empty() {
        collisions.sort();
        collisions.dedup();
        return Err(InputError::new(format!(
            "the integration branch is checked out in {} and untracked files would be overwritten by the merge: {}",
            dir.display(),
            list(&collisions)
        ))
        .hint("move or remove them there first")
        .into());
    }
    Ok(())
}

/// A repository path as a relative file-system path.
fn rel_path(path: &[u8]) -> Result<PathBuf> {
    Ok(gix::path::from_bstr(BStr::new(path))
        .git_context(format!("path '{}'", path.to_str_lossy()))?
        .into_owned())
}

fn list(paths: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut s = paths
        .iter()
        .take(SHOWN)
        .map(|p| format!("'{p}'"))
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        s.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    s
}

/// Two-way checkout of `wt` from `old_tree` to `new_tree` (whose index and
/// files must equal `old_tree`, as [`preflight`] checked): only changed files
/// are rewritten, and the index ends up matching `new_tree` with fresh stat data.
pub fn apply(wt: &gix::Repository, old_tree: ObjectId, new_tree: ObjectId) -> Result<()> {
    let dir = workdir(wt)?;
    let old = flat_tree(wt, old_tree)?;
    let new_flat = flat_tree(wt, new_tree)?;

    // 1. Delete what the new tree no longer has (files, links, empty gitlink dirs).
    let mut dirs = BTreeSet::new();
    for path in old.keys().filter(|p| !new_flat.contains_key(*p)) {
        let rel = rel_path(path)?;
        let abs = dir.join(&rel);
        match std::fs::symlink_metadata(&abs) {
            Ok(meta) if meta.is_dir() => {
                // A gitlink's folder: remove it only when empty (never a populated submodule).
                let _ = std::fs::remove_dir(&abs);
            }
            Ok(_) => std::fs::remove_file(&abs)
                .map_err(Error::io(format!("removing {}", abs.display())))?,
            Err(_) => {}
        }
        for parent in rel.ancestors().skip(1) {
            if !parent.as_os_str().is_empty() {
                dirs.insert(parent.to_owned());
            }
        }
    }
    // Deepest first, so emptied parents go too; non-empty ones stay (remove_dir refuses).
    let mut dirs: Vec<_> = dirs.into_iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        let _ = std::fs::remove_dir(dir.join(d));
    }

    // 2. The new index; entries unchanged since the old tree keep their stat data and are skipped.
    let old_index = wt.open_index().ok();
    let mut index = wt
        .index_from_tree(&new_tree)
        .git_context(format!("reading tree {new_tree}"))?;
    let mut skipped = Vec::new();
    {
        let (entries, paths) = index.entries_mut_and_pathbacking();
        for (i, entry) in entries.iter_mut().enumerate() {
            let path = entry.path_in(paths);
            let unchanged = old
                .get(path.as_bytes())
                .is_some_and(|(_, id)| *id == entry.id)
                && new_flat
                    .get(path.as_bytes())
                    .zip(old.get(path.as_bytes()))
                    .is_some_and(|(n, o)| n.0 == o.0);
            if !unchanged {
                continue;
            }
            if let Some(prev) = old_index.as_ref().and_then(|ix| ix.entry_by_path(path)) {
                entry.stat = prev.stat;
            }
            entry.flags.insert(gix::index::entry::Flags::SKIP_WORKTREE);
            skipped.push(i);
        }
    }

    // 3. Write the changed entries over the old files.
    let mut options = wt
        .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
        .git_context("reading checkout options")?;
    options.destination_is_initially_empty = false;
    options.overwrite_existing = true;
    let objects = wt
        .objects
        .clone()
        .into_arc()
        .git_context("opening the object database")?;
    let outcome = gix::worktree::state::checkout(
        &mut index,
        &dir,
        objects,
        &gix::progress::Discard,
        &gix::progress::Discard,
        &AtomicBool::new(false),
        options,
    )
    .git_context(format!("updating the files of {}", dir.display()))?;
    if let Some(first) = outcome.errors.first() {
        return Err(Error::Git {
            context: format!(
                "updating {} in {}",
                first.path.to_str_lossy(),
                dir.display()
            ),
            source: first.error.to_string().into(),
        });
    }
    if let Some(first) = outcome.collisions.first() {
        return Err(Error::Git {
            context: format!("updating the files of {}", dir.display()),
            source: format!("'{}' collided ({:?})", first.path, first.error_kind).into(),
        });
    }

    // 4. Clear our markers and write the index.
    let entries = index.entries_mut();
    for i in skipped {
        entries[i]
            .flags
            .remove(gix::index::entry::Flags::SKIP_WORKTREE);
    }
    index
        .write(Default::default())
        .git_context(format!("writing the index of {}", dir.display()))?;
    Ok(())
}

/// Does the index of `wt` hold exactly `tree` (paths, modes, ids; no conflicts)?
fn index_matches(wt: &gix::Repository, tree: ObjectId) -> Result<bool> {
    let Ok(index) = wt.open_index() else {
        return Ok(false);
    };
    let want = flat_tree(wt, tree)?;
    if index.entries().len() != want.len() {
        return Ok(false);
    }
    Ok(index.entries().iter().all(|e| {
        e.stage_raw() == 0
            && want
                .get(e.path(&index).as_bytes())
                .is_some_and(|(mode, id)| *id == e.id && e.mode.to_tree_entry_mode() == Some(*mode))
    }))
}

fn tree_of(repo: &gix::Repository, commit: ObjectId) -> Result<ObjectId> {
    Ok(repo
        .find_commit(commit)
        .git_context(format!("reading commit {commit}"))?
        .tree_id()
        .git_context(format!("reading the tree of {commit}"))?
        .detach())
}

/// Crash recovery: every worktree with `branch` checked out whose index still
/// matches the tree of an earlier commit on the branch's first-parent chain of
/// arbiter merges (the branch moved, the files did not follow) is brought up
/// to the branch tip. Worktrees in any other state are left alone.
pub fn sync_checked_out(ctx: &Context, branch: &FullName) -> Result<()> {
    sync_checked_out_report(ctx, branch).map(|_| ())
}

/// [`sync_checked_out`], returning the worktrees that were updated.
pub fn sync_checked_out_report(ctx: &Context, branch: &FullName) -> Result<Vec<PathBuf>> {
    let mut synced = Vec::new();
    let tip = ctx.branch_tip(branch)?;
    for wt in worktrees_with_branch(ctx, branch)? {
        let head_tree = tree_of(&ctx.repo, tip)?;
        if index_matches(&wt, head_tree)? {
            continue;
        }
        let mut commit = tip;
        for _ in 0..MAX_RECOVERY_DEPTH {
            let c = ctx
                .repo
                .find_commit(commit)
                .git_context(format!("reading commit {commit}"))?;
            // Only merges git-arbiter wrote can have left a worktree behind.
            let ours = c
                .message_raw_sloppy()
                .lines()
                .any(|l| l.starts_with(b"Arbiter-WO: "));
            let Some(parent) = c.parent_ids().next().map(|p| p.detach()) else {
                break;
            };
            if !ours {
                break;
            }
            let parent_tree = tree_of(&ctx.repo, parent)?;
            if index_matches(&wt, parent_tree)? {
                // The files must still equal that index: never overwrite an edit.
                let dirty = unstaged_changes(&wt)?;
                if !dirty.is_empty() {
                    return Err(InputError::new(format!(
                        "{} is behind its branch after an interrupted merge-back and has local changes: {}",
                        workdir(&wt)?.display(),
                        list(&dirty)
                    ))
                    .hint("commit or stash them, then run 'git reset --keep HEAD' there")
                    .into());
                }
                preflight_untracked_only(&wt, parent_tree, head_tree)?;
                apply(&wt, parent_tree, head_tree)?;
                synced.push(workdir(&wt)?);
                break;
            }
            commit = parent;
        }
    }
    Ok(synced)
}

/// Changes between index and files only (HEAD is ahead of the index during recovery).
fn unstaged_changes(wt: &gix::Repository) -> Result<Vec<String>> {
    let iter = wt
        .status(gix::progress::Discard)
        .git_context("preparing status")?
        .untracked_files(gix::status::UntrackedFiles::None)
        .index_worktree_rewrites(None)
        .into_index_worktree_iter(Vec::new())
        .git_context("reading status")?;
    let mut paths = Vec::new();
    for item in iter {
        let item = item.git_context("reading status")?;
        if let gix::status::index_worktree::Item::Modification {
            status: gix::status::plumbing::index_as_worktree::EntryStatus::NeedsUpdate(_),
            ..
        } = &item
        {
            continue;
        }
        paths.push(item.rela_path().to_str_lossy().into_owned());
    }
    Ok(paths)
}

fn preflight_untracked_only(
    wt: &gix::Repository,
    old_tree: ObjectId,
    new_tree: ObjectId,
) -> Result<()> {
    let dir = workdir(wt)?;
    let old = flat_tree(wt, old_tree)?;
    let new = flat_tree(wt, new_tree)?;
    let mut blocked = Vec::new();
    for p in new.keys().filter(|p| !old.contains_key(*p)) {
        if std::fs::symlink_metadata(dir.join(rel_path(p)?)).is_ok() {
            blocked.push(p.to_str_lossy().into_owned());
        }
    }
    if blocked.is_empty() {
        Ok(())
    } else {
        Err(InputError::new(format!(
            "{} is behind its branch after an interrupted merge-back and untracked files block the update: {}",
            dir.display(),
            list(&blocked)
        ))
        .hint("move them away and run git arbiter again")
        .into())
    }
}

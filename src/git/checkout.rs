//! Two-way checkouts and the index writes beneath them.
//!
//! gix 0.90 has no two-way checkout (`git read-tree -m -u A B`), so this
//! module does it for pooled worktrees (`switch_clean`, `reset_to`):
//! delete what B drops, build the index from B (or edit the one of A in
//! place), reuse the stat data of entries unchanged since A (marked
//! SKIP_WORKTREE so checkout leaves their files alone) and check out the
//! rest over the old files. The same pieces update a user's checkout of the
//! integration branch after a landing (the `user_checkout` module).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::ObjectId;

use crate::git::diff::Changed;
use crate::git::index_lock::{read_index, IndexLock};
use crate::git::index_memo::{flat_tree, index_mode, remember_holds_of};
use crate::git::paths::{rel_path, workdir};
use crate::git::splitindex;
use crate::sys::caches::Caches;
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading checkout options: {source}")]
    Options {
        #[source]
        source: gix::Error,
    },
    #[error("reading tree {tree}: {source}")]
    ReadTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    /// A path of the tree git would refuse to check out.
    #[error("reading tree {tree}: the path '{}' is invalid: {source}", path.to_str_lossy())]
    InvalidPath {
        tree: ObjectId,
        path: BString,
        #[source]
        source: gix::validate::path::component::Error,
    },
    #[error("removing {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating {}: {source}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the object database: {source}")]
    Objects {
        #[source]
        source: std::io::Error,
    },
    #[error("updating the files of {}: {source}", dir.display())]
    Checkout {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    /// The first file the checkout could not write.
    #[error("updating {} in {}: {source}", path.to_str_lossy(), dir.display())]
    Update {
        path: BString,
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    /// The first file the checkout found something else in the place of.
    #[error("updating the files of {}: '{path}' collided ({kind:?})", dir.display())]
    Collision {
        dir: PathBuf,
        path: BString,
        kind: std::io::ErrorKind,
    },
    #[error("moving the new {} into place: {source}", path.display())]
    Move {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("applying {}: {source}", file.display())]
    Sparse {
        file: PathBuf,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Untracked files in a checked-out worktree where a merge puts tracked
/// ones: that merge cannot land there now (others may), and nothing moved.
#[derive(Debug)]
pub struct Blocked {
    pub paths: Vec<String>,
    /// The refusal as a standalone `merge-back` reports it.
    pub error: crate::sys::error::Error,
}

/// Two-way checkout of `wt` from `old_tree` to `new_tree`, whose index and
/// files hold `old_tree` (`index`, when read already): only changed files
/// are rewritten, and the index ends up matching `new_tree` with fresh stat
/// data.
pub(crate) fn apply(
    caches: &Caches,
    wt: &gix::Repository,
    old_tree: ObjectId,
    new_tree: ObjectId,
    changed: &[Changed],
    index: Option<gix::index::File>,
) -> Result<()> {
    let lock = IndexLock::take(wt)?;
    match index {
        // Edit the index in place when it is a plain one and the change is
        // small (and no sparse patterns decide which new entries get files).
        Some(index)
            if !index.is_sparse()
                && index.link().is_none()
                && sparse_patterns(wt)?.is_none()
                && changed.len() <= index.entries().len() / 4 + 64 =>
        {
            match apply_in_place(wt, index, new_tree, changed)? {
                InPlace::Done(index) => lock
                    .commit(&index, &workdir(wt)?)
                    .map(|checksum| remember_holds_of(caches, wt, checksum, new_tree)),
                InPlace::NotApplicable => apply_from_tree(wt, old_tree, new_tree, lock),
            }
        }
        _ => apply_from_tree(wt, old_tree, new_tree, lock),
    }?;
    crate::sys::crash::point("checkout-index.after");
    Ok(())
}

pub(crate) enum InPlace {
    /// The files are written; this index is to be written next.
    Done(Box<gix::index::File>),
    /// Nothing was touched; the general path must do it.
    NotApplicable,
}

/// [`apply`] for an index equal to the old tree: only the `changed` paths are
/// looked up in the new tree, deleted, written and replaced in the index; every
/// other entry (and its stat data) stays as it is.
pub(crate) fn apply_in_place(
    wt: &gix::Repository,
    mut index: gix::index::File,
    new_tree: ObjectId,
    changed: &[Changed],
) -> Result<InPlace> {
    let dir = workdir(wt)?;
    let options = in_place_options(wt)?;
    let (mut writes, gone) = new_entries(wt, new_tree, changed, &options)?;
    let removed: Vec<&[u8]> = gone
        .into_iter()
        .filter(|p| index.entry_by_path(p.as_bstr()).is_some())
        .collect();

    // The new index, so far without the new files' stat data.
    let is_changed = |path: &BStr| is_one_of(changed, path);
    index.remove_entries(|_, path, _| is_changed(path));
    for e in writes.entries() {
        index.dangerously_push_entry(e.stat, e.id, e.flags, e.mode, e.path(&writes));
    }
    index.sort_entries();
    let has = |p: &BStr| index.entry_by_path(p).is_some();
    let has_under = |dir: &BStr| index.prefixed_entries(dir).is_some_and(|e| !e.is_empty());
    if malformed(&writes, has, has_under) {
        return Ok(InPlace::NotApplicable);
    }

    let attributes = index
        .entries()
        .iter()
        .map(|e| (splitindex::Fields::of(e), e.path(&index)));
    write_changed_files(
        wt,
        &mut writes,
        attributes,
        changed,
        &removed,
        &dir,
        options,
    )?;
    set_stats(&writes, &mut index);
    // The tree cache no longer describes the entries.
    index.remove_tree();
    index.remove_resolve_undo();
    Ok(InPlace::Done(Box::new(index)))
}

/// [`apply_in_place`] for a split index: only the split file changes. The
/// shared index is read but never rebuilt, so a switch costs the changed
/// entries and one read of the shared index, not a rewrite of all of it.
pub(crate) fn apply_split_in_place(
    wt: &gix::Repository,
    mut split: splitindex::Split,
    new_tree: ObjectId,
    changed: &[Changed],
) -> Result<Option<splitindex::Split>> {
    let dir = workdir(wt)?;
    let options = in_place_options(wt)?;
    let (mut writes, gone) = new_entries(wt, new_tree, changed, &options)?;
    let removed: Vec<&[u8]> = gone
        .into_iter()
        .filter(|p| split.has(p.as_bstr()))
        .collect();

    // The new index, so far without the new files' stat data.
    for c in changed {
        if let Some(i) = split.shared_at(c.path.as_bstr()) {
            split.deleted[i] = true;
        }
    }
    split
        .added
        .remove_entries(|_, path, _| is_one_of(changed, path));
    for e in writes.entries() {
        split
            .added
            .dangerously_push_entry(e.stat, e.id, e.flags, e.mode, e.path(&writes));
    }
    split.added.sort_entries();
    let has = |p: &BStr| split.has(p);
    let has_under = |dir: &BStr| split.has_under(dir);
    if malformed(&writes, has, has_under) {
        return Ok(None);
    }

    write_changed_files(
        wt,
        &mut writes,
        split.attribute_files(),
        changed,
        &removed,
        &dir,
        options,
    )?;
    set_stats(&writes, &mut split.added);
    Ok(Some(split))
}

/// Is `path` one of `changed` (sorted by path)?
pub(crate) fn is_one_of(changed: &[Changed], path: &BStr) -> bool {
    changed
        .binary_search_by(|c| c.path.as_slice().cmp(path.as_bytes()))
        .is_ok()
}

/// Checkout options for writing some files over a populated worktree.
pub(crate) fn in_place_options(
    wt: &gix::Repository,
) -> Result<gix::worktree::state::checkout::Options> {
    let mut options = wt
        .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
        .map_err(|source| Error::Options { source })?;
    options.destination_is_initially_empty = false;
    options.overwrite_existing = true;
    Ok(options)
}

/// What each changed path becomes: the non-tree entries of `new_tree` among
/// `changed` (sorted, without stat data), and the changed paths it does not have.
pub(crate) fn new_entries<'a>(
    wt: &gix::Repository,
    new_tree: ObjectId,
    changed: &'a [Changed],
    options: &gix::worktree::state::checkout::Options,
) -> Result<(gix::index::State, Vec<&'a [u8]>)> {
    use gix::index::entry::{Flags, Stat};
    let tree = wt.find_tree(new_tree).map_err(|source| Error::ReadTree {
        tree: new_tree,
        source,
    })?;
    let mut writes = gix::index::State::new(wt.object_hash());
    let mut gone = Vec::new();
    for c in changed {
        let entry = tree
            .lookup_entry(c.path.split(|b| *b == b'/'))
            .map_err(|source| Error::ReadTree {
                tree: new_tree,
                source,
            })?
            .filter(|e| !e.mode().is_tree());
        match entry {
            Some(e) => {
                // The same checks `index_from_tree` applies to every path.
                let mut components = c.path.split(|b| *b == b'/').peekable();
                while let Some(name) = components.next() {
                    let leaf_mode = (components.peek().is_none() && e.mode().is_link())
                        .then_some(gix::validate::path::component::Mode::Symlink);
                    gix::validate::path::component(name.as_bstr(), leaf_mode, options.validate)
                        .map_err(|source| Error::InvalidPath {
                            tree: new_tree,
                            path: c.path.as_slice().into(),
                            source,
                        })?;
                }
                writes.dangerously_push_entry(
                    Stat::default(),
                    e.object_id(),
                    Flags::empty(),
                    index_mode(e.mode()),
                    c.path.as_bstr(),
                );
            }
            None => gone.push(c.path.as_slice()),
        }
    }
    writes.sort_entries();
    Ok((writes, gone))
}

/// A malformed tree (a file and a directory at one path) among `writes`,
/// judged by the new index: the general path must handle it.
fn malformed(
    writes: &gix::index::State,
    has: impl Fn(&BStr) -> bool,
    has_under: impl Fn(&BStr) -> bool,
) -> bool {
    writes.entries().iter().any(|e| {
        let path = e.path(writes);
        let mut dir_prefix = path.to_vec();
        dir_prefix.push(b'/');
        let file_ancestor = path
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .any(|(i, _)| has(path[..i].as_bstr()));
        has_under(dir_prefix.as_bstr()) || file_ancestor
    })
}

/// Delete `removed` and write `writes` (given their stat data). The checkout
/// reads `.gitattributes` (eol, ident, filters) from the index it is given,
/// so every one among `entries` (the new index) goes along, marked to be
/// skipped unless it changed itself.
pub(crate) fn write_changed_files<'e>(
    wt: &gix::Repository,
    writes: &mut gix::index::State,
    entries: impl Iterator<Item = (splitindex::Fields, &'e BStr)>,
    changed: &[Changed],
    removed: &[&[u8]],
    dir: &Path,
    options: gix::worktree::state::checkout::Options,
) -> Result<()> {
    use gix::index::entry::Flags;
    // 1. Delete what the new tree no longer has.
    remove_paths(dir, removed.iter().copied())?;
    // 2. Write the new and changed files.
    for (e, path) in entries {
        if splitindex::is_attributes_file(path) && !is_one_of(changed, path) {
            writes.dangerously_push_entry(
                e.stat,
                e.id,
                e.flags | Flags::SKIP_WORKTREE,
                e.mode,
                path,
            );
        }
    }
    writes.sort_entries();
    write_files(wt, writes, dir, options)?;
    crate::sys::crash::point("checkout-files.after");
    Ok(())
}

/// 3. The fresh stat data of the files `writes` wrote into their entries.
pub(crate) fn set_stats(writes: &gix::index::State, index: &mut gix::index::State) {
    for e in writes.entries() {
        if e.flags.contains(gix::index::entry::Flags::SKIP_WORKTREE) {
            continue;
        }
        if let Some(target) = index
            .entry_mut_by_path_and_stage(e.path(writes), gix::index::entry::Stage::Unconflicted)
        {
            target.stat = e.stat;
        }
    }
}

/// Delete the files (links, empty gitlink folders) at `paths` and the folders that leaves empty.
pub(crate) fn remove_paths<'a>(dir: &Path, paths: impl Iterator<Item = &'a [u8]>) -> Result<()> {
    let mut dirs = BTreeSet::new();
    for path in paths {
        let rel = rel_path(path)?;
        let abs = dir.join(&rel);
        match std::fs::symlink_metadata(&abs) {
            Ok(meta) if meta.is_dir() => {
                // A gitlink's folder: remove it only when empty (never a populated submodule).
                let _ = std::fs::remove_dir(&abs);
            }
            Ok(_) => std::fs::remove_file(&abs).map_err(|source| Error::Remove {
                path: abs.clone(),
                source,
            })?,
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
    Ok(())
}

/// Check out the entries of `index` into `dir` with gix's parallel checkout.
pub(crate) fn write_files(
    wt: &gix::Repository,
    index: &mut gix::index::State,
    dir: &Path,
    mut options: gix::worktree::state::checkout::Options,
) -> Result<()> {
    // Files are written into a staging folder beside the index first and
    // renamed into place only once all were written: a full disk (or any
    // failed write) leaves the user's files as they were, never truncated.
    let staging = wt.git_dir().join("arbiter-checkout");
    let same_device = |a: &Path, b: &Path| {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev(),
            _ => false,
        }
    };
    if !same_device(wt.git_dir(), dir) {
        // Renames cannot cross devices: write in place, as git does.
        checkout_into(wt, index, dir, options)?;
        return crate::git::encoding::as_git_writes_it(wt, index, dir);
    }
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging).map_err(|source| Error::Create {
        path: staging.clone(),
        source,
    })?;
    options.destination_is_initially_empty = true;
    options.overwrite_existing = false;
    let written = checkout_into(wt, index, &staging, options)
        .and_then(|()| crate::git::encoding::as_git_writes_it(wt, index, &staging))
        .and_then(|()| move_into_place(index, &staging, dir));
    let _ = std::fs::remove_dir_all(&staging);
    written
}

/// Below this many entries a checkout writes from the calling thread: gix
/// would start threads (each with its own attribute and filter state) for
/// the few files a switch or a landing writes.
const SERIAL_CHECKOUT_BELOW: usize = 256;

/// gix's parallel checkout of the entries of `index` not marked SKIP_WORKTREE into `dest`.
fn checkout_into(
    wt: &gix::Repository,
    index: &mut gix::index::State,
    dest: &Path,
    mut options: gix::worktree::state::checkout::Options,
) -> Result<()> {
    if index.entries().len() < SERIAL_CHECKOUT_BELOW {
        options.thread_limit = Some(1);
    }
    let objects = wt
        .objects
        .clone()
        .into_arc()
        .map_err(|source| Error::Objects { source })?;
    let outcome = gix::worktree::state::checkout(
        index,
        dest,
        objects,
        &gix::progress::Discard,
        &gix::progress::Discard,
        &AtomicBool::new(false),
        options,
    )
    .map_err(|source| Error::Checkout {
        dir: dest.to_owned(),
        source,
    })?;
    check_outcome(dest, outcome)
}

/// Rename each file [`checkout_into`] wrote under `staging` to its place in
/// `dir`, and take the stat data of the file in its final place.
fn move_into_place(index: &mut gix::index::State, staging: &Path, dir: &Path) -> Result<()> {
    use gix::index::entry::{Flags, Stat};
    let (entries, paths) = index.entries_mut_and_pathbacking();
    for entry in entries.iter_mut() {
        if entry.flags.contains(Flags::SKIP_WORKTREE) {
            continue;
        }
        let rel = rel_path(entry.path_in(paths).as_bytes())?;
        let (from, to) = (staging.join(&rel), dir.join(&rel));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Create {
                path: parent.to_owned(),
                source,
            })?;
        }
        if std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_dir()) {
            // A submodule's folder: made, never moved over a populated one.
            std::fs::create_dir_all(&to).map_err(|source| Error::Create {
                path: to.clone(),
                source,
            })?;
        } else {
            std::fs::rename(&from, &to).map_err(|source| Error::Move {
                path: to.clone(),
                source,
            })?;
        }
        let meta =
            gix::index::fs::Metadata::from_path_no_follow(&to).map_err(|source| Error::Read {
                path: to.clone(),
                source,
            })?;
        entry.stat = Stat::from_fs(&meta).unwrap_or_default();
    }
    Ok(())
}

fn check_outcome(dir: &Path, outcome: gix::worktree::state::checkout::Outcome) -> Result<()> {
    if let Some(first) = outcome.errors.into_iter().next() {
        return Err(Error::Update {
            path: first.path,
            dir: dir.to_owned(),
            source: first.error,
        }
        .into());
    }
    if let Some(first) = outcome.collisions.into_iter().next() {
        return Err(Error::Collision {
            dir: dir.to_owned(),
            path: first.path,
            kind: first.error_kind,
        }
        .into());
    }
    Ok(())
}

/// [`apply`] by building the whole index from `new_tree`.
pub(crate) fn apply_from_tree(
    wt: &gix::Repository,
    old_tree: ObjectId,
    new_tree: ObjectId,
    lock: IndexLock,
) -> Result<()> {
    let dir = workdir(wt)?;
    let old = flat_tree(wt, old_tree)?;
    let new_flat = flat_tree(wt, new_tree)?;

    // 1. Delete what the new tree no longer has (files, links, empty gitlink dirs).
    remove_paths(
        &dir,
        old.keys()
            .filter(|p| !new_flat.contains_key(*p))
            .map(Vec::as_slice),
    )?;

    // 2. The new index; entries unchanged since the old tree keep their stat
    // data and are skipped. In a sparse checkout, entries the patterns
    // exclude are marked as `git merge` leaves them: no file, bit kept.
    let old_index = read_index(wt).ok();
    let mut index = wt
        .index_from_tree(&new_tree)
        .map_err(|source| Error::ReadTree {
            tree: new_tree,
            source,
        })?;
    mark_sparse(wt, &mut index)?;
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
            if !entry
                .flags
                .contains(gix::index::entry::Flags::SKIP_WORKTREE)
            {
                entry.flags.insert(gix::index::entry::Flags::SKIP_WORKTREE);
                skipped.push(i);
            }
        }
    }

    // 3. Write the changed entries over the old files.
    write_files(wt, &mut index, &dir, in_place_options(wt)?)?;
    crate::sys::crash::point("checkout-files.after");

    // 4. Clear our markers and write the index.
    let entries = index.entries_mut();
    for i in skipped {
        entries[i]
            .flags
            .remove(gix::index::entry::Flags::SKIP_WORKTREE);
    }
    lock.commit(&index, &dir).map(drop)
}

/// Mark the entries of `index` that `wt`'s sparse-checkout patterns
/// exclude, if it has any, as `git merge` leaves them: no file, bit kept.
fn mark_sparse(wt: &gix::Repository, index: &mut gix::index::State) -> Result<()> {
    if let Some(sparse) = sparse_patterns(wt)? {
        gix::worktree::sparse::apply_patterns(
            index,
            &sparse.patterns,
            &sparse.source,
            sparse.cone,
            sparse.case,
        )
        .map_err(|source| Error::Sparse {
            file: sparse.source.clone(),
            source,
        })?;
    }
    Ok(())
}

/// The active sparse-checkout patterns of a worktree.
pub(crate) struct Sparse {
    pub(crate) patterns: Vec<u8>,
    pub(crate) source: PathBuf,
    pub(crate) cone: bool,
    pub(crate) case: gix::glob::pattern::Case,
}

/// `wt`'s sparse-checkout patterns, if sparse checkout is on there.
pub(crate) fn sparse_patterns(wt: &gix::Repository) -> Result<Option<Sparse>> {
    use gix::config::tree::Core;
    let config = wt.config_snapshot();
    if config.boolean(Core::SPARSE_CHECKOUT) != Some(true) {
        return Ok(None);
    }
    let source = wt.git_dir().join("info/sparse-checkout");
    let patterns = gix::worktree::sparse::read_patterns(wt.git_dir()).map_err(|e| Error::Read {
        path: source.clone(),
        source: e,
    })?;
    Ok(patterns.map(|patterns| Sparse {
        patterns,
        source,
        cone: config.boolean(Core::SPARSE_CHECKOUT_CONE) == Some(true),
        case: if config.boolean(Core::IGNORE_CASE) == Some(true) {
            gix::glob::pattern::Case::Fold
        } else {
            gix::glob::pattern::Case::Sensitive
        },
    }))
}

/// A sparse index (folders outside the cone stored as one entry) is refused
/// before anything moves: gix cannot yet compare or rewrite one.
pub(crate) fn refuse_sparse_index(wt: &gix::Repository, index: &gix::index::State) -> Result<()> {
    if !index.is_sparse() {
        return Ok(());
    }
    Err(InputError::new(format!(
        "the integration branch is checked out in {} with a sparse index, which git-arbiter cannot update yet",
        workdir(wt)?.display()
    ))
    .hint("keep the sparse checkout but not the sparse index: 'git sparse-checkout init --no-sparse-index' there")
    .into())
}

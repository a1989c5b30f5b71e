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
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::{BStr, ByteSlice};
use gix::refs::FullName;
use gix::ObjectId;

use crate::context::Context;
use crate::drift::Changed;
use crate::error::{Error, GitContext, InputError, Result};
use crate::splitindex;

/// Every worktree (main or linked) that has `branch` checked out, as a repository handle.
pub fn worktrees_with_branch(ctx: &Context, branch: &FullName) -> Result<Vec<gix::Repository>> {
    let mut out = Vec::new();
    // Opening a repository parses its configuration: look at each HEAD file
    // first and open only the worktrees that have the branch checked out (a
    // round has one linked worktree per building work order).
    if crate::worktree::head_may_name(ctx.repo.common_dir(), branch) {
        let main = ctx
            .repo
            .main_repo()
            .git_context("opening the main worktree")?;
        if main.workdir().is_some() && main.head_name().ok().flatten().as_ref() == Some(branch) {
            out.push(crate::context::cached(main));
        }
    }
    for proxy in ctx
        .repo
        .worktrees()
        .git_context("listing linked worktrees")?
    {
        if !crate::worktree::head_may_name(proxy.git_dir(), branch) {
            continue;
        }
        // A registration whose folder is gone has no files to keep in step.
        if proxy.is_prunable() {
            continue;
        }
        let Ok(repo) = proxy.into_repo_with_possibly_inaccessible_worktree() else {
            continue;
        };
        if repo.workdir().is_some() && repo.head_name().ok().flatten().as_ref() == Some(branch) {
            out.push(crate::context::cached(repo));
        }
    }
    Ok(out)
}

pub(crate) fn workdir(wt: &gix::Repository) -> Result<PathBuf> {
    wt.workdir().map(Path::to_owned).ok_or_else(|| {
        Error::Input(InputError::new(
            "a checked-out branch without a worktree was found",
        ))
    })
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

/// The index mode `State::from_tree` gives a tree entry of `mode`.
pub(crate) fn index_mode(mode: gix::objs::tree::EntryMode) -> gix::index::entry::Mode {
    use gix::index::entry::Mode;
    use gix::objs::tree::EntryKind;
    match mode.kind() {
        EntryKind::Tree => Mode::DIR,
        EntryKind::Blob => Mode::FILE,
        EntryKind::BlobExecutable => Mode::FILE_EXECUTABLE,
        EntryKind::Link => Mode::SYMLINK,
        EntryKind::Commit => Mode::COMMIT,
    }
}

/// Index files known to hold a tree, by the checksum that ends each file
/// (the hash of its content): a landing checks that the checked-out
/// branch's index holds the tip's tree, twice, and its previous landing
/// wrote that very index. Comparing 50,000 entries with the tree again
/// each time is a waste: the same checksum is the same content.
static HOLDS: std::sync::Mutex<std::collections::VecDeque<(ObjectId, ObjectId)>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

fn known_to_hold(checksum: ObjectId, tree: ObjectId) -> bool {
    HOLDS
        .lock()
        .is_ok_and(|known| known.contains(&(checksum, tree)))
}

pub(crate) fn remember_holds(checksum: ObjectId, tree: ObjectId) {
    // An index written without its hash (`index.skipHash`) ends in zeros.
    if checksum.is_null() {
        return;
    }
    if let Ok(mut known) = HOLDS.lock() {
        if known.len() >= 64 {
            known.pop_front();
        }
        known.push_back((checksum, tree));
    }
}

/// [`remember_holds`], and on disk beside `wt`'s index for the next process:
/// proving it again costs a walk of the whole tree (milliseconds at 5,000
/// files, tens at 50,000) at the start of every run. Speed only: a memo
/// that cannot be written is not needed.
pub(crate) fn remember_holds_of(wt: &gix::Repository, checksum: ObjectId, tree: ObjectId) {
    use std::io::Write;
    remember_holds(checksum, tree);
    if checksum.is_null() || recorded_to_hold(wt, checksum, tree) {
        return;
    }
    let path = crate::layout::index_tree_memo(wt.git_dir());
    let _ = tempfile::NamedTempFile::new_in(wt.git_dir()).and_then(|mut file| {
        writeln!(file, "{checksum} {tree}")?;
        file.persist(&path).map_err(|e| e.error)
    });
}

/// Does the memo beside `wt`'s index say the index ending in `checksum`
/// holds `tree`?
fn recorded_to_hold(wt: &gix::Repository, checksum: ObjectId, tree: ObjectId) -> bool {
    std::fs::read_to_string(crate::layout::index_tree_memo(wt.git_dir()))
        .is_ok_and(|memo| memo.trim_end() == format!("{checksum} {tree}"))
}

/// [`index_equals_tree`] for an index file, remembered by its checksum.
pub(crate) fn holds(
    repo: &gix::Repository,
    index: &gix::index::File,
    tree: ObjectId,
) -> Result<bool> {
    holds_state(repo, index, index.checksum(), tree)
}

/// [`holds`] for an index read as `state`, its file's checksum `checksum`.
pub(crate) fn holds_state(
    repo: &gix::Repository,
    index: &gix::index::State,
    checksum: Option<ObjectId>,
    tree: ObjectId,
) -> Result<bool> {
    let checksum = checksum.filter(|c| !c.is_null());
    if checksum.is_some_and(|c| known_to_hold(c, tree)) {
        return Ok(true);
    }
    if let Some(checksum) = checksum.filter(|c| recorded_to_hold(repo, *c, tree)) {
        remember_holds(checksum, tree);
        return Ok(true);
    }
    let equal = index_equals_tree(repo, index, tree)?;
    if let (true, Some(checksum)) = (equal, checksum) {
        remember_holds_of(repo, checksum, tree);
    }
    Ok(equal)
}

/// The checksum that ends `wt`'s index file, read without reading the index.
pub(crate) fn index_file_checksum(wt: &gix::Repository) -> Option<ObjectId> {
    use std::io::{Read, Seek, SeekFrom};
    let len = wt.object_hash().len_in_bytes();
    let mut file = std::fs::File::open(wt.index_path()).ok()?;
    file.seek(SeekFrom::End(-(len as i64))).ok()?;
    let mut bytes = vec![0; len];
    file.read_exact(&mut bytes).ok()?;
    ObjectId::try_from(bytes.as_slice()).ok()
}

/// Does `index` hold exactly `tree` (paths, modes, ids; stage 0 only, nothing
/// else)? One depth-first walk of the tree objects against the sorted entries
/// (tree order visits paths in index order), without building a second index.
pub(crate) fn index_equals_tree(
    repo: &gix::Repository,
    index: &gix::index::State,
    tree: ObjectId,
) -> Result<bool> {
    fn walk(
        repo: &gix::Repository,
        index: &gix::index::State,
        tree: ObjectId,
        prefix: &mut Vec<u8>,
        pos: &mut usize,
    ) -> Result<bool> {
        let tree = repo
            .find_tree(tree)
            .git_context(format!("reading tree {tree}"))?;
        for entry in tree.iter() {
            let entry = entry
                .git_context(format!("reading tree {}", tree.id))?
                .inner;
            let len = prefix.len();
            prefix.extend_from_slice(entry.filename);
            if entry.mode.is_tree() {
                prefix.push(b'/');
                if !walk(repo, index, entry.oid.to_owned(), prefix, pos)? {
                    return Ok(false);
                }
            } else {
                let Some(e) = index.entries().get(*pos) else {
                    return Ok(false);
                };
                if e.stage_raw() != 0
                    || e.id != entry.oid
                    || e.mode != index_mode(entry.mode)
                    || e.path(index).as_bytes() != prefix.as_slice()
                {
                    return Ok(false);
                }
                *pos += 1;
            }
            prefix.truncate(len);
        }
        Ok(true)
    }
    let mut pos = 0;
    Ok(walk(repo, index, tree, &mut Vec::new(), &mut pos)? && pos == index.entries().len())
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

/// Untracked files in a checked-out worktree where a merge puts tracked
/// ones: that merge cannot land there now (others may), and nothing moved.
#[derive(Debug)]
pub struct Blocked {
    pub paths: Vec<String>,
    /// The refusal as a standalone `merge-back` reports it.
    pub error: Error,
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
    crate::layout::index_lock_marker(wt.git_dir())
}

/// Remove an `index.lock` a killed git-arbiter left (its marker is there).
pub(crate) fn clear_our_stale_index_lock(wt: &gix::Repository) {
    crate::layout::clear_index_lock_left(wt.git_dir(), &wt.index_path());
}

impl IndexLock {
    pub(crate) fn take(wt: &gix::Repository) -> Result<IndexLock> {
        IndexLock::try_take(wt)?.ok_or_else(|| {
            let lock = wt.index_path().with_extension("lock");
            InputError::new(format!(
                "the index of {} is locked: {} exists",
                wt.workdir().unwrap_or(wt.git_dir()).display(),
                lock.display()
            ))
            .hint(format!(
                "another git process is running there, or one was killed: if none is running, remove {}",
                lock.display()
            ))
            .into()
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
            std::fs::write(&marker, format!("{}\n", std::process::id()))
                .map_err(Error::io(format!("writing {}", marker.display())))?;
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
            crate::crash::point("shared-index.after");
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
        let data = crate::index_file::encode(index)?;
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
        let context = || format!("writing the index of {}", dir.display());
        let mut lock = self.lock.take().expect("an index lock is committed once");
        let checksum = splitindex::checksum_of(hash, &data)?;
        lock.write_all(&data)
            .and_then(|()| lock.write_all(checksum.as_slice()))
            .map_err(Error::io(context()))?;
        lock.commit().git_context(context())?;
        Ok(checksum)
    }
}

/// Sleep between two tries of a lock held by someone else: short (an
/// editor's `git status` holds it for milliseconds), a little random so two
/// waiters do not keep meeting.
fn lock_pause(started: std::time::Instant) -> std::time::Duration {
    let spent = started.elapsed().as_millis() as u64;
    let base = (2 + spent / 20).min(25);
    let jitter = crate::state::now_nanos() % (base + 1);
    std::time::Duration::from_millis(base + jitter)
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
    let listing =
        std::fs::read_dir(&abs).map_err(Error::io(format!("reading {}", abs.display())))?;
    for entry in listing {
        let entry = entry.map_err(Error::io(format!("reading {}", abs.display())))?;
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

/// A repository path as a relative file-system path.
pub(crate) fn rel_path(path: &[u8]) -> Result<PathBuf> {
    Ok(gix::path::from_bstr(BStr::new(path))
        .git_context(format!("path '{}'", path.to_str_lossy()))?
        .into_owned())
}

pub(crate) fn list(paths: &[String]) -> String {
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

/// Two-way checkout of `wt` from `old_tree` to `new_tree`, whose index and
/// files hold `old_tree` (`index`, when read already): only changed files
/// are rewritten, and the index ends up matching `new_tree` with fresh stat
/// data.
pub(crate) fn apply(
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
                    .map(|checksum| remember_holds_of(wt, checksum, new_tree)),
                InPlace::NotApplicable => apply_from_tree(wt, old_tree, new_tree, lock),
            }
        }
        _ => apply_from_tree(wt, old_tree, new_tree, lock),
    }?;
    crate::crash::point("checkout-index.after");
    Ok(())
}

enum InPlace {
    /// The files are written; this index is to be written next.
    Done(Box<gix::index::File>),
    /// Nothing was touched; the general path must do it.
    NotApplicable,
}

/// [`apply`] for an index equal to the old tree: only the `changed` paths are
/// looked up in the new tree, deleted, written and replaced in the index; every
/// other entry (and its stat data) stays as it is.
fn apply_in_place(
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
fn apply_split_in_place(
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
        .git_context("reading checkout options")?;
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
    let tree = wt
        .find_tree(new_tree)
        .git_context(format!("reading tree {new_tree}"))?;
    let mut writes = gix::index::State::new(wt.object_hash());
    let mut gone = Vec::new();
    for c in changed {
        let entry = tree
            .lookup_entry(c.path.split(|b| *b == b'/'))
            .git_context(format!("reading tree {new_tree}"))?
            .filter(|e| !e.mode().is_tree());
        match entry {
            Some(e) => {
                // The same checks `index_from_tree` applies to every path.
                let mut components = c.path.split(|b| *b == b'/').peekable();
                while let Some(name) = components.next() {
                    let leaf_mode = (components.peek().is_none() && e.mode().is_link())
                        .then_some(gix::validate::path::component::Mode::Symlink);
                    gix::validate::path::component(name.as_bstr(), leaf_mode, options.validate)
                        .git_context(format!(
                            "reading tree {new_tree}: the path '{}' is invalid",
                            c.path.to_str_lossy()
                        ))?;
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
    crate::crash::point("checkout-files.after");
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
fn remove_paths<'a>(dir: &Path, paths: impl Iterator<Item = &'a [u8]>) -> Result<()> {
    let mut dirs = BTreeSet::new();
    for path in paths {
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
    Ok(())
}

/// Check out the entries of `index` into `dir` with gix's parallel checkout.
fn write_files(
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
        return crate::encoding::as_git_writes_it(wt, index, dir);
    }
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging).map_err(Error::io(format!("creating {}", staging.display())))?;
    options.destination_is_initially_empty = true;
    options.overwrite_existing = false;
    let written = checkout_into(wt, index, &staging, options)
        .and_then(|()| crate::encoding::as_git_writes_it(wt, index, &staging))
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
        .git_context("opening the object database")?;
    let outcome = gix::worktree::state::checkout(
        index,
        dest,
        objects,
        &gix::progress::Discard,
        &gix::progress::Discard,
        &AtomicBool::new(false),
        options,
    )
    .git_context(format!("updating the files of {}", dest.display()))?;
    check_outcome(dest, &outcome)
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
            std::fs::create_dir_all(parent)
                .map_err(Error::io(format!("creating {}", parent.display())))?;
        }
        if std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_dir()) {
            // A submodule's folder: made, never moved over a populated one.
            std::fs::create_dir_all(&to)
                .map_err(Error::io(format!("creating {}", to.display())))?;
        } else {
            std::fs::rename(&from, &to).map_err(Error::io(format!(
                "moving the new {} into place",
                to.display()
            )))?;
        }
        let meta = gix::index::fs::Metadata::from_path_no_follow(&to)
            .map_err(Error::io(format!("reading {}", to.display())))?;
        entry.stat = Stat::from_fs(&meta).unwrap_or_default();
    }
    Ok(())
}

fn check_outcome(dir: &Path, outcome: &gix::worktree::state::checkout::Outcome) -> Result<()> {
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
    Ok(())
}

/// [`apply`] by building the whole index from `new_tree`.
fn apply_from_tree(
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
        .git_context(format!("reading tree {new_tree}"))?;
    if let Some(sparse) = sparse_patterns(wt)? {
        gix::worktree::sparse::apply_patterns(
            &mut index,
            &sparse.patterns,
            &sparse.source,
            sparse.cone,
            sparse.case,
        )
        .git_context(format!("applying {}", sparse.source.display()))?;
    }
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
    let mut options = wt
        .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
        .git_context("reading checkout options")?;
    options.destination_is_initially_empty = false;
    options.overwrite_existing = true;
    write_files(wt, &mut index, &dir, options)?;
    crate::crash::point("checkout-files.after");

    // 4. Clear our markers and write the index.
    let entries = index.entries_mut();
    for i in skipped {
        entries[i]
            .flags
            .remove(gix::index::entry::Flags::SKIP_WORKTREE);
    }
    lock.commit(&index, &dir).map(drop)
}

/// Run the `post-merge` hook of the worktree at `dir` with the argument `0`
/// (not a squash merge), as `git merge` does after updating a checkout:
/// setups such as git-lfs rely on it. Its output goes to stderr (stdout may
/// carry JSON); like git, its exit status changes nothing. gix has no hook
/// runner, so git's `hook run` does it (git ≥ 2.36), when there is a hook.
pub fn run_post_merge(dir: &Path) {
    if gix::open(dir).is_ok_and(|wt| !crate::hooks::present(&wt, "post-merge")) {
        return;
    }
    let mut cmd = std::process::Command::new("git");
    for var in crate::exec::GIT_ENV {
        cmd.env_remove(var);
    }
    let ran = cmd
        .current_dir(dir)
        .args(["hook", "run", "--ignore-missing", "post-merge", "--", "0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::io::stderr())
        .status();
    // Written, not eprintln!: a closed stderr must not turn into a panic.
    let line = match ran {
        Ok(status) if status.success() => return,
        Ok(status) => format!(
            "arbiter hook post-merge dir={} status={status}",
            dir.display()
        ),
        Err(e) => format!(
            "arbiter hook post-merge dir={} error=\"{e}\"",
            dir.display()
        ),
    };
    let _ = writeln!(std::io::stderr(), "{line}");
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
    let patterns = gix::worktree::sparse::read_patterns(wt.git_dir())
        .map_err(Error::io(format!("reading {}", source.display())))?;
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

/// Changes between index and files only (HEAD is ahead of the index during
/// recovery); `index` is the worktree's index if already loaded.
fn unstaged_changes(wt: &gix::Repository, index: Option<gix::index::File>) -> Result<Vec<String>> {
    let mut status = wt
        .status(gix::progress::Discard)
        .git_context("preparing status")?;
    if let Some(index) = index {
        status = status.index(index.into());
    }
    let iter = status
        .untracked_files(gix::status::UntrackedFiles::None)
        .index_worktree_rewrites(None)
        .into_index_worktree_iter(Vec::new())
        .git_context("reading status")?;
    let mut paths = Vec::new();
    for item in iter {
        let item = item.git_context("reading status")?;
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
    to_git: &mut crate::encoding::ToGit<'_>,
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
        .git_context(format!("hashing {}", abs.display()))
}

// ---- pooled worktrees -------------------------------------------------------

/// Make the index and tracked files of `wt` hold exactly `tree`, whatever
/// they hold now (`git reset --hard`): a pooled worktree between two work
/// orders, where nobody's edits live (the builder's work is on its branch).
/// Only files that differ from `tree` are written: an entry is skipped when
/// the index has `tree`'s blob there and the file still matches the index.
/// Whatever occupies a path a written file needs (an ignored file or folder)
/// is removed first. Untracked files are the pool's to remove. Returns the
/// index now on disk and its checksum.
pub(crate) fn reset_to(
    wt: &gix::Repository,
    tree: ObjectId,
) -> Result<(gix::index::File, Option<ObjectId>)> {
    use gix::index::entry::Flags;
    clear_our_stale_index_lock(wt);
    let dir = workdir(wt)?;
    let old_index = read_index(wt).ok().filter(|ix| !ix.is_sparse());
    // The common case: the builder's work is committed, so the index holds
    // `tree` already and only files whose stat data differ need looking at.
    if let Some(index) = &old_index {
        // Entries git treats specially (no file wanted, changes ignored,
        // not yet added) go the whole way: the reset clears their bits.
        let plain = !index.entries().iter().any(|e| {
            e.flags
                .intersects(Flags::SKIP_WORKTREE | Flags::INTENT_TO_ADD | Flags::ASSUME_VALID)
        });
        if plain && holds(wt, index, tree)? {
            return restore_files(wt, index.clone(), &dir);
        }
    }
    // Files that differ from their index entry must be written again.
    let dirty: BTreeSet<Vec<u8>> = match &old_index {
        Some(ix) => unstaged_changes(wt, Some(ix.clone()))?
            .into_iter()
            .map(String::into_bytes)
            .collect(),
        None => BTreeSet::new(),
    };
    let lock = IndexLock::take(wt)?;
    let mut index = wt
        .index_from_tree(&tree)
        .git_context(format!("reading tree {tree}"))?;
    if let Some(old) = &old_index {
        remove_paths(
            &dir,
            old.entries()
                .iter()
                .map(|e| e.path(old).as_bytes())
                .filter(|p| index.entry_by_path(p.as_bstr()).is_none()),
        )?;
    }
    let mut skipped = Vec::new();
    let mut written = Vec::new();
    {
        let (entries, paths) = index.entries_mut_and_pathbacking();
        for (i, entry) in entries.iter_mut().enumerate() {
            let path = entry.path_in(paths);
            let same = old_index
                .as_ref()
                .and_then(|ix| ix.entry_by_path(path))
                .filter(|prev| {
                    prev.id == entry.id
                        && prev.mode == entry.mode
                        && !dirty.contains(path.as_bytes())
                });
            match same {
                Some(prev) => {
                    entry.stat = prev.stat;
                    entry.flags.insert(Flags::SKIP_WORKTREE);
                    skipped.push(i);
                }
                None => written.push(path.to_vec()),
            }
        }
    }
    clear_the_way(&dir, written.iter().map(Vec::as_slice), |p| {
        index.entry_by_path(p.as_bstr()).is_some()
    })?;
    let mut options = wt
        .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
        .git_context("reading checkout options")?;
    options.destination_is_initially_empty = false;
    options.overwrite_existing = true;
    write_files(wt, &mut index, &dir, options)?;
    let entries = index.entries_mut();
    for i in skipped {
        entries[i].flags.remove(Flags::SKIP_WORKTREE);
    }
    let checksum = lock.commit(&index, &dir)?;
    Ok((index, Some(checksum)))
}

/// [`reset_to`] for an index that holds the tree already: the files whose
/// stat data differ from their entry (or that may have changed unseen: racy
/// entries) are written again from their blob, and the index is written with
/// their new stat data. Nothing is written when every file matches.
fn restore_files(
    wt: &gix::Repository,
    mut index: gix::index::File,
    dir: &Path,
) -> Result<(gix::index::File, Option<ObjectId>)> {
    use gix::index::entry::{Flags, Stat};
    let suspects: Vec<usize> = stat_suspects(wt, &index, dir)
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    // An index without a checksum (`index.skipHash`) is written once more
    // with one: the pool recognises its own index by it.
    if let (true, Some(checksum)) = (suspects.is_empty(), index.checksum()) {
        return Ok((index, Some(checksum)));
    }
    let lock = IndexLock::take(wt)?;
    let mut writes = gix::index::State::new(wt.object_hash());
    for &i in &suspects {
        let e = &index.entries()[i];
        writes.dangerously_push_entry(
            Stat::default(),
            e.id,
            Flags::empty(),
            e.mode,
            e.path(&index),
        );
    }
    // The checkout reads `.gitattributes` from the index it is given.
    for (i, e) in index.entries().iter().enumerate() {
        let path = e.path(&index);
        let is_attributes = path == ".gitattributes" || path.ends_with(b"/.gitattributes");
        if is_attributes && suspects.binary_search(&i).is_err() {
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
    clear_the_way(
        dir,
        suspects
            .iter()
            .map(|&i| index.entries()[i].path(&index).as_bytes()),
        |p| index.entry_by_path(p.as_bstr()).is_some(),
    )?;
    let mut options = wt
        .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
        .git_context("reading checkout options")?;
    options.destination_is_initially_empty = false;
    options.overwrite_existing = true;
    write_files(wt, &mut writes, dir, options)?;
    for e in writes.entries() {
        if e.flags.contains(Flags::SKIP_WORKTREE) {
            continue;
        }
        if let Some(target) = index
            .entry_mut_by_path_and_stage(e.path(&writes), gix::index::entry::Stage::Unconflicted)
        {
            target.stat = e.stat;
        }
    }
    let checksum = lock.commit(&index, dir)?;
    Ok((index, Some(checksum)))
}

/// The positions of the entries of `index` (stage 0, as [`index_equals_tree`]
/// checked) whose file in `dir` may not hold the entry's blob, each with the
/// stat data its file had (none when there was no file to stat): missing, of
/// another kind or mode, with stat data other than recorded, or written in
/// the same moment as the index (racy: a later change may not show in the
/// stat data). Stricter than git's status, never laxer: a file listed here
/// is only written again. Each folder is opened once, without following
/// links on the way (a folder replaced by a link lists everything below
/// it), and its files are looked up relative to it, so a check costs one
/// path component rather than a walk of the whole path.
pub(crate) fn stat_suspects(
    wt: &gix::Repository,
    index: &gix::index::State,
    dir: &Path,
) -> Vec<(usize, Option<gix::index::entry::Stat>)> {
    let config = wt.config_snapshot();
    let file_mode = config.boolean("core.fileMode").unwrap_or(true);
    let trust_ctime = config.boolean("core.trustctime").unwrap_or(true);
    // The checks are system calls, independent of each other: spread them
    // over the cores in contiguous ranges (each opens its own folders).
    const PER_THREAD: usize = 4096;
    let len = index.entries().len();
    let threads = crate::parallel::cores()
        .min(len.div_ceil(PER_THREAD))
        .max(1);
    if threads == 1 {
        return stat_suspects_in(index, 0..len, dir, file_mode, trust_ctime);
    }
    let chunk = len.div_ceil(threads);
    std::thread::scope(|scope| {
        let running: Vec<_> = (0..threads)
            .map(|t| {
                let range = t * chunk..((t + 1) * chunk).min(len);
                let check = range.clone();
                let thread = scope
                    .spawn(move || stat_suspects_in(index, check, dir, file_mode, trust_ctime));
                (range, thread)
            })
            .collect();
        running
            .into_iter()
            .flat_map(|(range, thread)| {
                // A check that panicked proves nothing: its whole range is suspect.
                thread
                    .join()
                    .unwrap_or_else(|_| range.map(|at| (at, None)).collect())
            })
            .collect()
    })
}

/// The folders of a worktree open along one path, each opened from its
/// parent without following a link: paths asked for in index order (each
/// folder after its parent) open only the folders that change.
pub(crate) struct OpenFolders {
    top: rustix::fd::OwnedFd,
    /// Each folder's path with a trailing '/', and its fd (none when it
    /// cannot be opened as a folder).
    open: Vec<(Vec<u8>, Option<rustix::fd::OwnedFd>)>,
}

impl OpenFolders {
    const FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY
        .union(rustix::fs::OFlags::DIRECTORY)
        .union(rustix::fs::OFlags::NOFOLLOW)
        .union(rustix::fs::OFlags::CLOEXEC);

    /// The worktree at `dir`, its top open.
    pub(crate) fn new(dir: &Path) -> rustix::io::Result<Self> {
        let top = rustix::fs::open(dir, Self::FLAGS, rustix::fs::Mode::empty())?;
        Ok(OpenFolders {
            top,
            open: Vec::new(),
        })
    }

    /// The folder `folder` (a path relative to the top ending in '/', or
    /// empty for the top itself); `None` when it, or one on the way, is not
    /// a folder now (gone, a file, a link).
    pub(crate) fn get(&mut self, folder: &[u8]) -> Option<&rustix::fd::OwnedFd> {
        // Keep the open folders that are ancestors of this one, open the rest.
        while self
            .open
            .last()
            .is_some_and(|(p, _)| !folder.starts_with(p))
        {
            self.open.pop();
        }
        let mut done = self.open.last().map_or(0, |(p, _)| p.len());
        while done < folder.len() {
            let end = done + folder[done..].iter().position(|b| *b == b'/').unwrap_or(0) + 1;
            let name = &folder[done..end - 1];
            let fd = match self.open.last() {
                Some((_, None)) => None,
                Some((_, Some(fd))) => Self::open_in(fd, name),
                None => Self::open_in(&self.top, name),
            };
            self.open.push((folder[..end].to_vec(), fd));
            done = end;
        }
        match self.open.last() {
            Some((_, fd)) => fd.as_ref(),
            None => Some(&self.top),
        }
    }

    fn open_in(parent: &rustix::fd::OwnedFd, name: &[u8]) -> Option<rustix::fd::OwnedFd> {
        rustix::fs::openat(parent, name, Self::FLAGS, rustix::fs::Mode::empty()).ok()
    }
}

/// [`stat_suspects`] for the entries at `range`.
// The integer types of `struct stat` differ between platforms: the casts are
// needed somewhere, if not here.
#[allow(clippy::unnecessary_cast)]
fn stat_suspects_in(
    index: &gix::index::State,
    range: std::ops::Range<usize>,
    dir: &Path,
    file_mode: bool,
    trust_ctime: bool,
) -> Vec<(usize, Option<gix::index::entry::Stat>)> {
    use gix::index::entry::Mode;
    use rustix::fs::{AtFlags, FileType};
    let stamp = index.timestamp();
    let (stamp_secs, stamp_nsecs) = (stamp.unix_seconds(), stamp.nanoseconds());
    let Ok(mut folders) = OpenFolders::new(dir) else {
        return range.map(|at| (at, None)).collect();
    };
    let mut suspects = Vec::new();
    for (i, entry) in index.entries()[range.clone()].iter().enumerate() {
        let i = range.start + i;
        let path = entry.path(index).as_bytes();
        let (parent, name) = match path.iter().rposition(|b| *b == b'/') {
            Some(at) => (&path[..=at], &path[at + 1..]),
            None => (&path[..0], path),
        };
        let Some(folder) = folders.get(parent) else {
            suspects.push((i, None));
            continue;
        };
        let Ok(st) = rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW) else {
            suspects.push((i, None));
            continue;
        };
        let kind = FileType::from_raw_mode(st.st_mode);
        let executable = st.st_mode & 0o100 != 0;
        let kind_matches = match entry.mode {
            Mode::FILE => kind == FileType::RegularFile && (!file_mode || !executable),
            Mode::FILE_EXECUTABLE => kind == FileType::RegularFile && (!file_mode || executable),
            Mode::SYMLINK => kind == FileType::Symlink,
            // A submodule's files are never ours to write: its folder is enough.
            Mode::COMMIT => {
                if kind != FileType::Directory {
                    suspects.push((i, None));
                }
                continue;
            }
            _ => false,
        };
        let s = &entry.stat;
        let same_time = |secs: u32, nsecs: u32, fs_secs: i64, fs_nsecs: u64| {
            secs == fs_secs as u32 && (nsecs == 0 || nsecs == fs_nsecs as u32)
        };
        let unchanged = kind_matches
            && s.size == st.st_size as u32
            && (s.ino == 0 || s.ino == st.st_ino as u32)
            && same_time(
                s.mtime.secs,
                s.mtime.nsecs,
                st.st_mtime as i64,
                st.st_mtime_nsec as u64,
            )
            && (!trust_ctime
                || same_time(
                    s.ctime.secs,
                    s.ctime.nsecs,
                    st.st_ctime as i64,
                    st.st_ctime_nsec as u64,
                ));
        let racy = (i64::from(s.mtime.secs), s.mtime.nsecs) >= (stamp_secs, stamp_nsecs);
        if !unchanged || racy {
            suspects.push((i, kind_matches.then(|| index_stat(&st))));
        }
    }
    suspects
}

/// What the index records of a file's `lstat`, truncated as git and gix do.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn index_stat(st: &rustix::fs::Stat) -> gix::index::entry::Stat {
    use gix::index::entry::stat::Time;
    gix::index::entry::Stat {
        mtime: Time {
            secs: st.st_mtime as u32,
            nsecs: st.st_mtime_nsec as u32,
        },
        ctime: Time {
            secs: st.st_ctime as u32,
            nsecs: st.st_ctime_nsec as u32,
        },
        dev: st.st_dev as u32,
        ino: st.st_ino as u32,
        uid: st.st_uid as u32,
        gid: st.st_gid as u32,
        size: st.st_size as u32,
    }
}

/// Switch the pooled worktree `wt`, whose index and files hold `old_tree`
/// (its index is the one git-arbiter wrote), to `new_tree`: only the files
/// of `changed` are written, and a split index only its split file. False,
/// with nothing touched, when its index is sparse or cannot be read (its
/// shared index removed): the caller resets it.
pub(crate) fn switch_clean(
    wt: &gix::Repository,
    old_tree: ObjectId,
    new_tree: ObjectId,
    changed: &[Changed],
) -> Result<bool> {
    clear_our_stale_index_lock(wt);
    let dir = workdir(wt)?;
    let small = |entries: usize| changed.len() <= entries / 4 + 64;
    let Ok(split) = splitindex::read(wt) else {
        return Ok(false);
    };
    if let Some(split) = split {
        let added = changed
            .iter()
            .map(|c| c.path.as_slice())
            .filter(|p| !split.has(p.as_bstr()));
        clear_the_way(&dir, added, |p| split.has(p.as_bstr()))?;
        let lock = IndexLock::take(wt)?;
        let in_place = sparse_patterns(wt)?.is_none() && small(split.shared.len());
        let done = match in_place {
            true => apply_split_in_place(wt, split, new_tree, changed)?,
            false => None,
        };
        match done {
            Some(split) => remember_holds(lock.commit_split(&split, &dir)?, new_tree),
            None => apply_from_tree(wt, old_tree, new_tree, lock)?,
        }
        crate::crash::point("checkout-index.after");
        return Ok(true);
    }
    let index = match read_index(wt) {
        Ok(index) if !index.is_sparse() => index,
        _ => return Ok(false),
    };
    let added = changed
        .iter()
        .map(|c| c.path.as_slice())
        .filter(|p| index.entry_by_path(p.as_bstr()).is_none());
    clear_the_way(&dir, added, |p| index.entry_by_path(p.as_bstr()).is_some())?;
    apply(wt, old_tree, new_tree, changed, Some(index))?;
    Ok(true)
}

/// `wt`'s index, read as git reads it: the checksum at its end is not
/// verified (git does that in `git fsck` only; at 50,000 entries it costs
/// twice the decoding).
pub(crate) fn read_index(wt: &gix::Repository) -> Result<gix::index::File> {
    gix::index::File::at(
        wt.index_path(),
        wt.object_hash(),
        true,
        gix::index::decode::Options::default(),
    )
    .git_context(format!("reading the index of {}", workdir(wt)?.display()))
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

/// Remove what occupies the place of each of `paths` in `dir` (a file, a
/// link, a whole folder) and any ancestor that is not a folder, unless
/// `tracked` says the index already has that path: in a pooled worktree
/// that is ignored content (build caches), never a user's work.
fn clear_the_way<'a>(
    dir: &Path,
    paths: impl Iterator<Item = &'a [u8]>,
    tracked: impl Fn(&[u8]) -> bool,
) -> Result<()> {
    for path in paths {
        let rel = rel_path(path)?;
        for ancestor in rel.ancestors().skip(1) {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            let abs = dir.join(ancestor);
            if std::fs::symlink_metadata(&abs).is_ok_and(|m| !m.is_dir()) {
                std::fs::remove_file(&abs)
                    .map_err(Error::io(format!("removing {}", abs.display())))?;
            }
        }
        let abs = dir.join(&rel);
        match std::fs::symlink_metadata(&abs) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&abs)
                .map_err(Error::io(format!("removing {}", abs.display())))?,
            Ok(_) if !tracked(path) => std::fs::remove_file(&abs)
                .map_err(Error::io(format!("removing {}", abs.display())))?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::{Path, PathBuf};

    use gix::ObjectId;

    use crate::testutil::{copy_of, git, new_repo, scratch, Rng};

    /// One entry of a generated tree.
    #[derive(Clone, Debug)]
    pub(crate) enum Entry {
        File { text: String, executable: bool },
        Link(String),
    }

    /// A random tree over a three-letter alphabet at most three deep, so that
    /// two trees often turn a file into a folder and back. No path is both a
    /// file and a prefix of another.
    pub(crate) fn random_tree(rng: &mut Rng) -> Vec<(String, Entry)> {
        let mut tree: Vec<(String, Entry)> = Vec::new();
        for _ in 0..rng.below(12) + 1 {
            let depth = rng.below(3) + 1;
            let path: Vec<&str> = (0..depth)
                .map(|_| ["a", "b", "c"][rng.below(3) as usize])
                .collect();
            let path = path.join("/");
            let clashes = tree.iter().any(|(p, _)| {
                *p == path
                    || p.starts_with(&format!("{path}/"))
                    || path.starts_with(&format!("{p}/"))
            });
            if clashes {
                continue;
            }
            let entry = match rng.below(5) {
                0 => Entry::Link(["a", "../b", "nowhere"][rng.below(3) as usize].into()),
                k => Entry::File {
                    text: format!("{}\n", rng.below(3)),
                    executable: k == 1,
                },
            };
            tree.push((path, entry));
        }
        tree
    }

    /// Replace everything but `.git` in `dir` with `tree`; return the commit.
    pub(crate) fn commit_tree(
        root: &Path,
        dir: &Path,
        tree: &[(String, Entry)],
        message: &str,
    ) -> String {
        for entry in std::fs::read_dir(dir).expect("dir").flatten() {
            if entry.file_name() != ".git" {
                let path = entry.path();
                if path.is_dir() && !path.is_symlink() {
                    std::fs::remove_dir_all(&path).expect("rm -r");
                } else {
                    std::fs::remove_file(&path).expect("rm");
                }
            }
        }
        for (path, entry) in tree {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            match entry {
                Entry::File { text, executable } => {
                    std::fs::write(&path, text).expect("write");
                    let mode = if *executable { 0o755 } else { 0o644 };
                    std::fs::set_permissions(
                        &path,
                        std::os::unix::fs::PermissionsExt::from_mode(mode),
                    )
                    .expect("chmod");
                }
                Entry::Link(target) => std::os::unix::fs::symlink(target, &path).expect("symlink"),
            }
        }
        git(root, dir, &["add", "-A"]);
        git(root, dir, &["commit", "-q", "--allow-empty", "-m", message]);
        git(root, dir, &["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// What a checkout left: the index (`git ls-files -s`), every file of the
    /// worktree with its kind, mode and content, and whether git sees any
    /// difference between index and files without rehashing (stale stat data).
    pub(crate) fn outcome(root: &Path, dir: &Path) -> (String, Vec<String>, String) {
        fn walk(top: &Path, dir: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).expect("dir").flatten() {
                let path = entry.path();
                let rel = path
                    .strip_prefix(top)
                    .expect("inside")
                    .display()
                    .to_string();
                if rel == ".git" {
                    continue;
                }
                let meta = std::fs::symlink_metadata(&path).expect("meta");
                if meta.is_symlink() {
                    let target = std::fs::read_link(&path).expect("link");
                    out.push(format!("{rel} -> {}", target.display()));
                } else if meta.is_dir() {
                    out.push(format!("{rel}/"));
                    walk(top, &path, out);
                } else {
                    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111;
                    let text = std::fs::read_to_string(&path).expect("read");
                    out.push(format!("{rel} x={} {text:?}", mode != 0));
                }
            }
        }
        let mut files = Vec::new();
        walk(dir, dir, &mut files);
        files.sort();
        let index = git(root, dir, &["ls-files", "-s"]);
        let stale = git(root, dir, &["diff-files", "--name-status"]);
        (index, files, stale)
    }

    /// Both ways of [`super::apply`] end where `git read-tree -m -u` does, on
    /// random pairs of trees: same index, same files (kinds, modes, contents,
    /// empty folders gone), and an index whose stat data matches the files.
    #[test]
    fn both_checkout_paths_match_git_read_tree() {
        let (_tmp, root) = scratch();
        let mut rng = Rng(0x005e_ed0f_a2b1_7e25);
        let mut in_place = 0;
        let mut split_in_place = 0;
        for case in 0..40 {
            let (old, new) = (random_tree(&mut rng), random_tree(&mut rng));
            let seed = new_repo(&root, &format!("seed-{case}"));
            let old_commit = commit_tree(&root, &seed, &old, "old");
            let new_commit = commit_tree(&root, &seed, &new, "new");
            git(&root, &seed, &["checkout", "-q", "-f", &old_commit]);
            let copies: Vec<PathBuf> = ["git", "in-place", "from-tree", "split"]
                .iter()
                .map(|way| {
                    let copy = copy_of(&root, &seed, &format!("{way}-{case}"));
                    // A copy has new inodes: let the index take their stat data.
                    git(&root, &copy, &["update-index", "-q", "--refresh"]);
                    copy
                })
                .collect();
            git(
                &root,
                &copies[0],
                &["read-tree", "-m", "-u", &old_commit, &new_commit],
            );
            let want = outcome(&root, &copies[0]);
            assert_eq!(want.2, "", "git left stale entries");

            for (k, copy) in copies[1..].iter().enumerate() {
                let Update {
                    wt,
                    old_tree,
                    new_tree,
                    changed,
                } = update_of(copy, &old_commit, &new_commit);
                if k == 2 {
                    // A pooled worktree's way: its index split first, then
                    // switched by writing the split file only.
                    // Never a new shared index for the few entries here.
                    git(
                        &root,
                        copy,
                        &["config", "splitIndex.maxPercentChange", "100"],
                    );
                    let wt = gix::open_opts(copy, gix::open::Options::isolated()).expect("open");
                    super::keep_index_split(&wt).expect("split the index");
                    let shared_before = super::splitindex::read(&wt)
                        .expect("read")
                        .expect("split")
                        .shared_checksum();
                    let switched = super::switch_clean(&wt, old_tree, new_tree, &changed);
                    assert!(switched.expect("switch"), "not sparse");
                    let got = outcome(&root, copy);
                    assert_eq!(got, want, "case {case}, split: {old:?} -> {new:?}");
                    let split = super::splitindex::read(&wt).expect("read").expect("split");
                    let shared = std::fs::read_dir(wt.git_dir())
                        .expect("git dir")
                        .flatten()
                        .filter(|e| e.file_name().to_string_lossy().starts_with("sharedindex."))
                        .count();
                    assert_eq!(shared, 1, "case {case}: one shared index");
                    // The same shared index: only the split file was written.
                    if split.shared_checksum() == shared_before {
                        split_in_place += 1;
                    }
                    continue;
                }
                let lock = super::IndexLock::take(&wt).expect("lock");
                if k == 0 {
                    let index = super::read_index(&wt).expect("index");
                    match super::apply_in_place(&wt, index, new_tree, &changed).expect("in place") {
                        super::InPlace::Done(index) => {
                            in_place += 1;
                            lock.commit(&index, copy).expect("write index");
                        }
                        super::InPlace::NotApplicable => continue,
                    }
                } else {
                    super::apply_from_tree(&wt, old_tree, new_tree, lock).expect("from tree");
                }
                let got = outcome(&root, copy);
                let way = ["in place", "from the tree"][k];
                assert_eq!(got, want, "case {case}, {way}: {old:?} -> {new:?}");
            }
        }
        // Type changes send some cases to the general path; most stay in place.
        assert!(in_place >= 20, "only {in_place} of 40 cases went in place");
        assert!(
            split_in_place >= 20,
            "only {split_in_place} of 40 split indexes took the changes only"
        );
    }

    /// A small random change of `tree`: entries edited, removed, added, a
    /// file turned into a folder, a link.
    fn mutate(rng: &mut Rng, tree: &mut Vec<(String, Entry)>) {
        let clashes = |tree: &[(String, Entry)], path: &str| {
            tree.iter().any(|(p, _)| {
                p == path
                    || p.starts_with(&format!("{path}/"))
                    || path.starts_with(&format!("{p}/"))
            })
        };
        for _ in 0..rng.below(3) + 1 {
            let n = tree.len() as u64;
            match rng.below(5) {
                0 if n > 0 => {
                    tree.remove(rng.below(n) as usize);
                }
                1 if n > 0 => {
                    let i = rng.below(n) as usize;
                    tree[i].1 = Entry::File {
                        text: format!("{}\n", rng.below(1000)),
                        executable: rng.below(4) == 0,
                    };
                }
                2 if n > 0 => {
                    let i = rng.below(n) as usize;
                    let (path, _) = tree.remove(i);
                    let inner = format!("{path}/inner");
                    if !clashes(tree, &inner) {
                        tree.push((
                            inner,
                            Entry::File {
                                text: "in\n".into(),
                                executable: false,
                            },
                        ));
                    }
                }
                3 => {
                    let path = format!(
                        "{}/l{}",
                        ["a", "b", "e/f"][rng.below(3) as usize],
                        rng.below(50)
                    );
                    if !clashes(tree, &path) {
                        tree.push((path, Entry::Link("../a".into())));
                    }
                }
                _ => {
                    let path = format!(
                        "{}/n{}",
                        ["a", "b", "c", "d"][rng.below(4) as usize],
                        rng.below(200)
                    );
                    if !clashes(tree, &path) {
                        tree.push((
                            path,
                            Entry::File {
                                text: format!("{}\n", rng.below(9)),
                                executable: false,
                            },
                        ));
                    }
                }
            }
        }
    }

    /// A pooled worktree's life: its split index switched along a chain of
    /// small random changes, with stock git writing that index between
    /// switches (`git status` refreshes it, `git add -A` rewrites it, and
    /// copies racily clean entries into it), ends every switch where `git
    /// read-tree -m -u` does. Most switches write the split file only; a new
    /// shared index comes when the changes outgrow it.
    #[test]
    fn a_split_index_switched_again_and_again_matches_git_read_tree() {
        let (_tmp, root) = scratch();
        let mut rng = Rng(0x5b11_7a1d_e0c5_0001);
        let seed = new_repo(&root, "seed");
        let mut tree: Vec<(String, Entry)> = (0..40)
            .map(|i| {
                let path = format!("{}/f{i}", ["a", "b", "c", "d"][i % 4]);
                (
                    path,
                    Entry::File {
                        text: format!("{i}\n"),
                        executable: false,
                    },
                )
            })
            .collect();
        let mut commits = vec![commit_tree(&root, &seed, &tree, "0")];
        for k in 1..=30 {
            mutate(&mut rng, &mut tree);
            commits.push(commit_tree(&root, &seed, &tree, &k.to_string()));
        }
        git(&root, &seed, &["checkout", "-q", "-f", &commits[0]]);
        let copies: Vec<PathBuf> = ["git", "split"]
            .iter()
            .map(|way| {
                let copy = copy_of(&root, &seed, way);
                git(&root, &copy, &["update-index", "-q", "--refresh"]);
                copy
            })
            .collect();
        let (by_git, split) = (&copies[0], &copies[1]);
        git(
            &root,
            split,
            &["config", "splitIndex.maxPercentChange", "30"],
        );
        let wt = gix::open_opts(split, gix::open::Options::isolated()).expect("open");
        super::keep_index_split(&wt).expect("split the index");
        let (mut in_place, mut shared_anew) = (0, 0);
        for k in 1..commits.len() {
            git(
                &root,
                by_git,
                &["read-tree", "-m", "-u", &commits[k - 1], &commits[k]],
            );
            let Update {
                wt,
                old_tree,
                new_tree,
                changed,
            } = update_of(split, &commits[k - 1], &commits[k]);
            let shared = |wt: &gix::Repository| {
                super::splitindex::read(wt)
                    .expect("read")
                    .expect("split")
                    .shared_checksum()
            };
            let before = shared(&wt);
            let switched = super::switch_clean(&wt, old_tree, new_tree, &changed);
            assert!(switched.expect("switch"), "not sparse");
            git(
                &root,
                split,
                &["update-ref", "--no-deref", "HEAD", &commits[k]],
            );
            assert_eq!(outcome(&root, split), outcome(&root, by_git), "step {k}");
            if shared(&wt) == before {
                in_place += 1;
            } else {
                shared_anew += 1;
            }
            match k % 3 {
                0 => drop(git(&root, split, &["status", "--porcelain"])),
                1 => drop(git(&root, split, &["add", "-A"])),
                _ => {}
            }
        }
        assert!(
            in_place >= 15,
            "{in_place} of 30 switches wrote the split file only"
        );
        assert!(shared_anew >= 1, "no switch outgrew its shared index");
    }

    /// A split index switched in place writes the changed files through the
    /// `.gitattributes` files it keeps (at the top and in a folder), as
    /// `git read-tree -m -u` does: the shared index's attribute files are
    /// found without decoding its entries.
    #[test]
    fn a_split_index_switched_in_place_keeps_applying_its_attributes() {
        let (_tmp, root) = scratch();
        let seed = new_repo(&root, "seed");
        let write = |path: &str, text: &str| {
            let path = seed.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        write(".gitattributes", "*.txt eol=crlf\n");
        write("sub/.gitattributes", "*.txt eol=lf\n");
        write("a.txt", "one\n");
        write("sub/b.txt", "two\n");
        git(&root, &seed, &["add", "-A"]);
        git(&root, &seed, &["commit", "-q", "-m", "old"]);
        let old = git(&root, &seed, &["rev-parse", "HEAD"]).trim().to_owned();
        write("a.txt", "one\nmore\n");
        write("sub/b.txt", "two\nmore\n");
        git(&root, &seed, &["add", "-A"]);
        git(&root, &seed, &["commit", "-q", "-m", "new"]);
        let new = git(&root, &seed, &["rev-parse", "HEAD"]).trim().to_owned();
        git(&root, &seed, &["checkout", "-q", "-f", &old]);
        let by_git = copy_of(&root, &seed, "git");
        let split = copy_of(&root, &seed, "split");
        for copy in [&by_git, &split] {
            git(&root, copy, &["update-index", "-q", "--refresh"]);
        }
        git(&root, &by_git, &["read-tree", "-m", "-u", &old, &new]);
        // Two of four entries change: more than git's 20% would share anew.
        let max = ["config", "splitIndex.maxPercentChange", "100"];
        git(&root, &split, &max);
        let wt = gix::open_opts(&split, gix::open::Options::isolated()).expect("open");
        super::keep_index_split(&wt).expect("split the index");
        let shared = |wt: &gix::Repository| {
            super::splitindex::read(wt)
                .expect("read")
                .expect("split")
                .shared_checksum()
        };
        let before = shared(&wt);
        let update = update_of(&split, &old, &new);
        let switched = super::switch_clean(&wt, update.old_tree, update.new_tree, &update.changed);
        assert!(switched.expect("switch"));
        assert_eq!(shared(&wt), before, "switched in place");
        git(&root, &split, &["update-ref", "--no-deref", "HEAD", &new]);
        assert_eq!(outcome(&root, &split), outcome(&root, &by_git));
        let read = |path: &str| std::fs::read_to_string(split.join(path)).expect("read");
        assert_eq!(read("a.txt"), "one\r\nmore\r\n");
        assert_eq!(read("sub/b.txt"), "two\nmore\n");
    }

    /// A worktree at `dir` opened for an update from `old_commit` to
    /// `new_commit`: its trees and the paths changed between them.
    struct Update {
        wt: gix::Repository,
        old_tree: ObjectId,
        new_tree: ObjectId,
        changed: Vec<crate::drift::Changed>,
    }

    fn update_of(dir: &Path, old_commit: &str, new_commit: &str) -> Update {
        let wt = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
        let tree_of = |commit: &str| -> ObjectId {
            let id = ObjectId::from_hex(commit.as_bytes()).expect("sha");
            wt.find_commit(id)
                .expect("commit")
                .tree_id()
                .expect("tree")
                .detach()
        };
        let (old_tree, new_tree) = (tree_of(old_commit), tree_of(new_commit));
        let changed = crate::drift::changed_paths(&wt, old_tree, new_tree).expect("diff");
        Update {
            wt,
            old_tree,
            new_tree,
            changed,
        }
    }

    /// What one run proves about an index (it holds HEAD's tree) is kept
    /// beside it for the next, by the index's checksum: an index written
    /// since (the user staged a change) is not taken for the one proved.
    #[test]
    fn an_index_proved_to_hold_a_tree_is_remembered_by_its_checksum() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        std::fs::write(dir.join("a.txt"), "one\n").expect("write");
        git(&root, &dir, &["add", "-A"]);
        git(&root, &dir, &["commit", "-q", "-m", "one"]);
        let wt = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
        let tree = wt.head_tree_id().expect("tree").detach();
        let index = super::read_index(&wt).expect("index");
        assert!(super::holds(&wt, &index, tree).expect("holds"));
        let memo = crate::layout::index_tree_memo(wt.git_dir());
        let checksum = index.checksum().expect("checksum");
        assert_eq!(
            std::fs::read_to_string(&memo).expect("memo"),
            format!("{checksum} {tree}\n")
        );
        assert!(super::recorded_to_hold(&wt, checksum, tree));

        std::fs::write(dir.join("a.txt"), "two\n").expect("write");
        git(&root, &dir, &["add", "a.txt"]);
        let staged = super::read_index(&wt).expect("index");
        assert!(
            !super::holds(&wt, &staged, tree).expect("holds"),
            "a staged change was taken for HEAD's tree"
        );
    }
}

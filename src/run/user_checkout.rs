//! Keep a checked-out copy of the integration branch in step with a landing,
//! the way `git merge` keeps the worktree it runs in (a two-way
//! `git read-tree -m -u`): only the paths the landing changes are written,
//! and only where the user has no change of their own. Local edits and
//! staged changes anywhere else are carried over untouched; untracked files
//! stay where they are.
//!
//! A landing is refused for the checkout ([`Blocked`], nothing touched)
//! only when
//! - a path it changes has a local edit, a staged change or a deletion, or
//!   a staged file is where it needs a folder (or the reverse);
//! - an untracked file is where it puts one;
//! - the index has unmerged entries (a conflicted merge in progress);
//! - `index.lock` stays taken for the whole bounded wait (an editor's
//!   `git status` takes it for a moment: that is waited for).
//!
//! The index lock is taken before anything is checked and held until the
//! new index is in place, so no `git add` can come between the check and
//! the write. The branch moves between the two: a journal beside the index
//! ([`crate::git::layout::landing_journal`]) names the landing from the moment
//! before the move until the index is written, and [`finish_interrupted`]
//! completes (or drops) what a killed process left.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gix::bstr::{BStr, ByteSlice};
use gix::index::entry::{Flags, Mode, Stage};
use gix::refs::FullName;
use gix::ObjectId;

use crate::git::checkout;
use crate::git::diff::Changed;
use crate::git::index_lock::IndexLock;
use crate::state::context::Context;
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading tree {tree}: {source}")]
    ReadTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading core.checkStat: {source}")]
    StatOptions {
        #[source]
        source: gix::Error,
    },
    #[error("hashing {}: {source}", path.display())]
    Hash {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("applying {}: {source}", file.display())]
    Sparse {
        file: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("writing {}: {source}", path.display())]
    WriteJournal {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the main worktree: {source}")]
    OpenMain {
        #[source]
        source: gix::Error,
    },
    #[error("listing linked worktrees: {source}")]
    ListWorktrees {
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// How long a landing waits for someone else's `index.lock` on a checkout
/// before the checkout is reported blocked (`arbiter.indexLockWait`).
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Why a checkout cannot follow a landing now. Nothing was touched there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// `index.lock` stayed taken for the whole wait.
    Locked { dir: PathBuf, lock: PathBuf },
    /// The user changed paths the landing changes (edited, staged, deleted).
    Edited { dir: PathBuf, paths: Vec<String> },
    /// Untracked (or ignored) files are where the landing puts files.
    Untracked { dir: PathBuf, paths: Vec<String> },
    /// The index has unmerged entries: a conflicted merge is in progress.
    Unmerged { dir: PathBuf, paths: Vec<String> },
}

impl Blocked {
    /// The paths behind it (none for a lock).
    pub fn paths(&self) -> &[String] {
        match self {
            Blocked::Locked { .. } => &[],
            Blocked::Edited { paths, .. }
            | Blocked::Untracked { paths, .. }
            | Blocked::Unmerged { paths, .. } => paths,
        }
    }

    /// Does it concern every landing, whatever it changes (a lock, a conflict)?
    pub fn blocks_everything(&self) -> bool {
        matches!(self, Blocked::Locked { .. } | Blocked::Unmerged { .. })
    }

    /// One line saying what is in the way, where.
    pub fn describe(&self) -> String {
        match self {
            Blocked::Locked { dir, lock } => format!(
                "the index of the checkout {} stayed locked ({} exists)",
                dir.display(),
                lock.display()
            ),
            Blocked::Edited { dir, paths } => format!(
                "local changes in the checkout {} to files it changes: {}",
                dir.display(),
                crate::git::paths::list(paths)
            ),
            Blocked::Untracked { dir, paths } => format!(
                "untracked files in the checkout {} where it puts files: {}",
                dir.display(),
                crate::git::paths::list(paths)
            ),
            Blocked::Unmerged { dir, paths } => format!(
                "unmerged files in the checkout {} (a merge in progress): {}",
                dir.display(),
                crate::git::paths::list(paths)
            ),
        }
    }

    /// What the user does about it.
    pub fn hint(&self) -> String {
        match self {
            Blocked::Locked { lock, .. } => format!(
                "a git command is running there, or one was killed: if none is running, remove {}",
                lock.display()
            ),
            Blocked::Edited { .. } => {
                "commit or stash those changes there; git-arbiter never overwrites your edits"
                    .into()
            }
            Blocked::Untracked { .. } => "move or remove those files there".into(),
            Blocked::Unmerged { .. } => {
                "finish or abort the merge there ('git merge --continue' or 'git merge --abort')"
                    .into()
            }
        }
    }

    /// The refusal as an error, for a command that stops on it.
    pub fn error(&self) -> crate::sys::error::Error {
        InputError::new(self.describe()).hint(self.hint()).into()
    }
}

/// A checkout checked, and locked, for one landing: [`Prepared::begin`]
/// before the branch moves, [`Prepared::apply`] after it (or
/// [`Prepared::cancel`] when it did not move).
pub struct Prepared {
    wt: gix::Repository,
    dir: PathBuf,
    lock: IndexLock,
    index: gix::index::File,
    from: ObjectId,
    to: ObjectId,
    to_tree: ObjectId,
    changed: Vec<Changed>,
}

impl Prepared {
    /// The worktree's top.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Write the journal: the branch is about to move from `from` to `to`.
    pub fn begin(&self) -> Result<()> {
        let journal = crate::git::layout::landing_journal(self.wt.git_dir());
        write_journal(&journal, self.from, self.to)
    }

    /// The branch did not move: forget the journal (the lock goes when
    /// `self` is dropped).
    pub fn cancel(&self) {
        let _ = std::fs::remove_file(crate::git::layout::landing_journal(self.wt.git_dir()));
    }

    /// The branch moved: write the changed paths and the index, then drop
    /// the journal. On an error the journal stays, for [`finish_interrupted`].
    pub fn apply(self) -> Result<PathBuf> {
        let Prepared {
            wt,
            dir,
            lock,
            index,
            to_tree,
            changed,
            ..
        } = self;
        update(&wt, &dir, lock, index, to_tree, &changed)?;
        crate::sys::crash::point("checkout-index.after");
        let _ = std::fs::remove_file(crate::git::layout::landing_journal(wt.git_dir()));
        Ok(dir)
    }
}

/// A move of a checked-out branch: its commits and their trees.
#[derive(Debug, Clone, Copy)]
pub struct Move {
    pub from: ObjectId,
    pub from_tree: ObjectId,
    pub to: ObjectId,
    pub to_tree: ObjectId,
}

impl Move {
    /// The move from commit `from` to commit `to`.
    pub fn between(ctx: &Context, from: ObjectId, to: ObjectId) -> Result<Move> {
        Ok(Move {
            from,
            from_tree: ctx.tree_of(from)?,
            to,
            to_tree: ctx.tree_of(to)?,
        })
    }
}

/// Take `wt`'s index lock (waiting up to `wait` for someone else's) and
/// check that the landing `step` (`changed` between its trees) can update
/// it without touching a change of the user's.
pub fn prepare(
    wt: &gix::Repository,
    step: Move,
    changed: &[Changed],
    wait: Duration,
) -> Result<std::result::Result<Prepared, Blocked>> {
    let dir = crate::git::paths::workdir(wt)?;
    let Some(lock) = IndexLock::wait(wt, wait)? else {
        return Ok(Err(Blocked::Locked {
            lock: wt.index_path().with_extension("lock"),
            dir,
        }));
    };
    let index = read_or_empty(wt)?;
    checkout::refuse_sparse_index(wt, &index)?;
    let unmerged = unmerged_paths(&index);
    if !unmerged.is_empty() {
        return Ok(Err(Blocked::Unmerged {
            dir,
            paths: unmerged,
        }));
    }
    let old = entries_at(wt, step.from_tree, changed)?;
    let new = entries_at(wt, step.to_tree, changed)?;
    let mut files = Files::new(wt, &index, &dir)?;
    let mut edited = Vec::new();
    for ((c, old), new) in changed.iter().zip(&old).zip(&new) {
        let path = c.path.as_bstr();
        let entry = index.entry_by_path(path);
        if !same_entry(entry, *old) {
            edited.push(c.display());
            continue;
        }
        if let Some(entry) = entry {
            if !files.holds_entry(entry)? {
                edited.push(c.display());
            }
        }
        if new.is_some() {
            // A file the user staged where this needs a folder, or staged
            // files below a path this makes a file.
            edited.extend(staged_in_the_way(&index, path, changed));
        }
    }
    edited.sort();
    edited.dedup();
    if !edited.is_empty() {
        return Ok(Err(Blocked::Edited { dir, paths: edited }));
    }
    // Untracked files at, or where a folder is needed for, the paths the
    // landing adds.
    let added = changed
        .iter()
        .zip(&new)
        .filter(|(c, new)| new.is_some() && index.entry_by_path(c.path.as_bstr()).is_none())
        .map(|(c, _)| c.path.as_slice());
    let untracked = crate::git::status::untracked_in_the_way(&dir, added, |p| {
        index.entry_by_path(p.as_bstr()).is_some()
    })?;
    if !untracked.is_empty() {
        return Ok(Err(Blocked::Untracked {
            dir,
            paths: untracked,
        }));
    }
    Ok(Ok(Prepared {
        wt: wt.clone(),
        dir,
        lock,
        index,
        from: step.from,
        to: step.to,
        to_tree: step.to_tree,
        changed: changed.to_vec(),
    }))
}

/// The index of `wt`, or an empty one when it has none yet.
fn read_or_empty(wt: &gix::Repository) -> Result<gix::index::File> {
    if wt.index_path().exists() {
        return crate::git::index_lock::read_index(wt);
    }
    Ok(gix::index::File::from_state(
        gix::index::State::new(wt.object_hash()),
        wt.index_path(),
    ))
}

/// The paths of unmerged entries (stage 1–3), each once.
fn unmerged_paths(index: &gix::index::State) -> Vec<String> {
    let mut paths: Vec<String> = index
        .entries()
        .iter()
        .filter(|e| e.stage() != Stage::Unconflicted)
        .map(|e| e.path(index).to_str_lossy().into_owned())
        .collect();
    paths.dedup();
    paths
}

/// The non-tree entry of `tree` at each changed path, in order.
fn entries_at(
    wt: &gix::Repository,
    tree: ObjectId,
    changed: &[Changed],
) -> Result<Vec<Option<(Mode, ObjectId)>>> {
    let tree = wt
        .find_tree(tree)
        .map_err(|source| Error::ReadTree { tree, source })?;
    changed
        .iter()
        .map(|c| {
            let entry = tree
                .lookup_entry(c.path.split(|b| *b == b'/'))
                .map_err(|source| Error::ReadTree {
                    tree: tree.id,
                    source,
                })?;
            Ok(entry
                .filter(|e| !e.mode().is_tree())
                .map(|e| (crate::git::index_memo::index_mode(e.mode()), e.object_id())))
        })
        .collect()
}

/// Does the index entry (stage 0) at a path hold what the tree has there?
/// An entry only added with `git add -N` is the user's.
fn same_entry(entry: Option<&gix::index::Entry>, tree: Option<(Mode, ObjectId)>) -> bool {
    match (entry, tree) {
        (None, None) => true,
        (Some(e), Some((mode, id))) => {
            e.mode == mode && e.id == id && !e.flags.contains(Flags::INTENT_TO_ADD)
        }
        _ => false,
    }
}

/// Index entries the landing's new file at `path` would collide with and
/// that it does not change itself: a file at one of its folders, or files
/// below it.
fn staged_in_the_way(index: &gix::index::State, path: &BStr, changed: &[Changed]) -> Vec<String> {
    let mine = |p: &BStr| checkout::is_one_of(changed, p);
    let mut found = Vec::new();
    for (at, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
        let folder = path[..at].as_bstr();
        if index.entry_by_path(folder).is_some() && !mine(folder) {
            found.push(folder.to_str_lossy().into_owned());
        }
    }
    let mut below = path.to_vec();
    below.push(b'/');
    if let Some(entries) = index.prefixed_entries(below.as_bstr()) {
        for e in entries {
            let p = e.path(index);
            if !mine(p) {
                found.push(p.to_str_lossy().into_owned());
            }
        }
    }
    found
}

/// Looks at the files of a worktree the way `git status` judges them:
/// stat data first, the content (through the filters of .gitattributes)
/// only when they do not vouch for it.
struct Files<'a> {
    wt: &'a gix::Repository,
    index: &'a gix::index::State,
    dir: &'a Path,
    stat: gix::index::entry::stat::Options,
    file_mode: bool,
    symlinks: bool,
    to_git: Option<crate::git::encoding::ToGit<'a>>,
}

impl<'a> Files<'a> {
    fn new(wt: &'a gix::Repository, index: &'a gix::index::State, dir: &'a Path) -> Result<Self> {
        let config = wt.config_snapshot();
        Ok(Files {
            wt,
            index,
            dir,
            stat: wt
                .stat_options()
                .map_err(|source| Error::StatOptions { source })?,
            file_mode: config.boolean("core.fileMode") != Some(false),
            symlinks: config.boolean("core.symlinks") != Some(false),
            to_git: None,
        })
    }

    /// Is something (a file, a link, a folder) at `path`?
    fn occupied(&self, path: &BStr) -> bool {
        crate::git::paths::rel_path(path)
            .is_ok_and(|rel| std::fs::symlink_metadata(self.dir.join(rel)).is_ok())
    }

    /// Does the file of `entry` hold what the entry says: as git would see
    /// it, unchanged? Entries git does not look at (outside a sparse
    /// checkout, assumed unchanged) and submodules (whose files a merge
    /// never writes) count as unchanged.
    fn holds_entry(&mut self, entry: &gix::index::Entry) -> Result<bool> {
        if entry
            .flags
            .intersects(Flags::SKIP_WORKTREE | Flags::ASSUME_VALID)
            || entry.mode == Mode::COMMIT
        {
            return Ok(true);
        }
        let path = entry.path(self.index);
        let abs = self.dir.join(crate::git::paths::rel_path(path)?);
        let Ok(meta) = gix::index::fs::Metadata::from_path_no_follow(&abs) else {
            return Ok(false);
        };
        if !self.kind_matches(entry.mode, &meta) {
            return Ok(false);
        }
        if let Ok(now) = gix::index::entry::Stat::from_fs(&meta) {
            if entry.stat.matches(&now, self.stat)
                && !entry.stat.is_racy(self.index.timestamp(), self.stat)
            {
                return Ok(true);
            }
        }
        Ok(self.content_id(path, entry.mode, &abs)? == Some(entry.id))
    }

    fn kind_matches(&self, mode: Mode, meta: &gix::index::fs::Metadata) -> bool {
        match mode {
            Mode::SYMLINK if self.symlinks => meta.is_symlink(),
            // Without links, a link is a file holding its target.
            Mode::SYMLINK => meta.is_file(),
            Mode::FILE => meta.is_file() && (!self.file_mode || !meta.is_executable()),
            Mode::FILE_EXECUTABLE => meta.is_file() && (!self.file_mode || meta.is_executable()),
            _ => false,
        }
    }

    /// The blob id git would store for the file at `abs`.
    fn content_id(&mut self, path: &BStr, mode: Mode, abs: &Path) -> Result<Option<ObjectId>> {
        if mode == Mode::SYMLINK && !self.symlinks {
            let Ok(target) = std::fs::read(abs) else {
                return Ok(None);
            };
            return gix::objs::compute_hash(self.wt.object_hash(), gix::objs::Kind::Blob, &target)
                .map(Some)
                .map_err(|source| {
                    Error::Hash {
                        path: abs.to_owned(),
                        source,
                    }
                    .into()
                });
        }
        let to_git = match &mut self.to_git {
            Some(to_git) => to_git,
            None => self
                .to_git
                .insert(crate::git::encoding::ToGit::new(self.wt, self.index)?),
        };
        crate::git::status::blob_id(self.wt, to_git, self.index, self.dir, path, mode)
    }
}

/// Replace the changed paths of `index` (the user's, read under `lock`) by
/// the new tree's entries, write their files, and put the index in place.
/// Every other entry, staged changes included, stays as it is.
fn update(
    wt: &gix::Repository,
    dir: &Path,
    lock: IndexLock,
    mut index: gix::index::File,
    to_tree: ObjectId,
    changed: &[Changed],
) -> Result<()> {
    let options = checkout::in_place_options(wt)?;
    let (mut writes, gone) = checkout::new_entries(wt, to_tree, changed, &options)?;
    let removed: Vec<&[u8]> = gone
        .into_iter()
        .filter(|p| index.entry_by_path(p.as_bstr()).is_some())
        .collect();
    if let Some(sparse) = checkout::sparse_patterns(wt)? {
        // New entries the sparse patterns exclude get no file, as with git.
        gix::worktree::sparse::apply_patterns(
            &mut writes,
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
    index.remove_entries(|_, path, _| checkout::is_one_of(changed, path));
    for e in writes.entries() {
        index.dangerously_push_entry(e.stat, e.id, e.flags, e.mode, e.path(&writes));
    }
    index.sort_entries();
    let attributes = index
        .entries()
        .iter()
        .map(|e| (crate::git::splitindex::Fields::of(e), e.path(&index)));
    checkout::write_changed_files(wt, &mut writes, attributes, changed, &removed, dir, options)?;
    checkout::set_stats(&writes, &mut index);
    crate::git::index_file::refresh_cache_tree(
        &mut index,
        wt,
        to_tree,
        changed.iter().map(|c| c.path.as_slice()),
    )?;
    lock.commit(&index, dir)?;
    Ok(())
}

/// Write the journal of a landing about to move a checked-out branch.
fn write_journal(path: &Path, from: ObjectId, to: ObjectId) -> Result<()> {
    use std::io::Write;
    let parent = path.parent().unwrap_or(Path::new("."));
    let failed = |source| Error::WriteJournal {
        path: path.to_owned(),
        source,
    };
    let mut file = tempfile::NamedTempFile::new_in(parent).map_err(failed)?;
    writeln!(file, "from {from}\nto {to}")
        .and_then(|()| file.as_file().sync_all())
        .map_err(failed)?;
    file.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

/// The landing a journal names: `(from, to)`.
fn read_journal(path: &Path) -> Option<(ObjectId, ObjectId)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut from = None;
    let mut to = None;
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("from", hex)) => from = ObjectId::from_hex(hex.as_bytes()).ok(),
            Some(("to", hex)) => to = ObjectId::from_hex(hex.as_bytes()).ok(),
            _ => {}
        }
    }
    Some((from?, to?))
}

/// What [`finish_interrupted`] did in one checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// The files of the interrupted landing were written there.
    Updated(PathBuf),
    /// The branch never moved: nothing to finish.
    NotMoved(PathBuf),
    /// Changes the user made since, to paths the landing changed, were left
    /// as they are (the paths), the rest updated.
    LeftAlone { dir: PathBuf, paths: Vec<String> },
}

impl Finished {
    /// One line for a recovery report; `None` when nothing worth saying happened.
    pub fn report(&self) -> Option<String> {
        match self {
            Finished::Updated(dir) => Some(format!(
                "finished updating the checkout {} after an interrupted landing",
                dir.display()
            )),
            Finished::NotMoved(_) => None,
            Finished::LeftAlone { dir, paths } => Some(format!(
                "finished updating the checkout {} after an interrupted landing, leaving the user's changes to {} as they are",
                dir.display(),
                crate::git::paths::list(paths)
            )),
        }
    }
}

/// Finish the landings a killed process left half done in the checkouts
/// of `branch` (`worktrees`), by their journals. Call with the merge turn
/// held: no landing of ours is in flight.
pub fn finish_interrupted(
    ctx: &Context,
    branch: &FullName,
    worktrees: &[gix::Repository],
) -> Result<Vec<Finished>> {
    let mut done = Vec::new();
    for wt in worktrees {
        // No landing of ours is running: a lock with our marker is a leftover.
        crate::git::index_lock::clear_our_stale_index_lock(wt);
        let journal = crate::git::layout::landing_journal(wt.git_dir());
        if !journal.exists() {
            continue;
        }
        let dir = crate::git::paths::workdir(wt)?;
        let Some((from, to)) = read_journal(&journal) else {
            // Killed while writing it: the branch had not moved yet.
            let _ = std::fs::remove_file(&journal);
            continue;
        };
        let tip = ctx.branch_tip(branch)?;
        if tip != to {
            // Not moved (killed before the move), or moved on by the user
            // since: there is nothing of ours to finish.
            let _ = std::fs::remove_file(&journal);
            if tip == from {
                done.push(Finished::NotMoved(dir));
            }
            continue;
        }
        done.push(finish_one(ctx, wt, &dir, from, to)?);
        let _ = std::fs::remove_file(&journal);
    }
    Ok(done)
}

/// Bring the checkout `wt` from `from` to `to` where a killed landing left
/// it: each changed path whose entry still holds `from`'s and whose file
/// holds `from`'s or `to`'s content (written before the kill) is updated;
/// a path the user changed since is left alone.
fn finish_one(
    ctx: &Context,
    wt: &gix::Repository,
    dir: &Path,
    from: ObjectId,
    to: ObjectId,
) -> Result<Finished> {
    let lock = IndexLock::take(wt)?;
    let index = read_or_empty(wt)?;
    let (from_tree, to_tree) = (ctx.tree_of(from)?, ctx.tree_of(to)?);
    let changed = crate::git::diff::changed_paths(&ctx.repo, from_tree, to_tree)?;
    let old = entries_at(wt, from_tree, &changed)?;
    let new = entries_at(wt, to_tree, &changed)?;
    let mut files = Files::new(wt, &index, dir)?;
    let mut todo = Vec::new();
    let mut left = Vec::new();
    for ((c, old), new) in changed.iter().zip(&old).zip(&new) {
        let entry = index.entry_by_path(c.path.as_bstr());
        if same_entry(entry, *new) {
            // Already the new entry (the index was written before the kill).
            continue;
        }
        if !same_entry(entry, *old) {
            left.push(c.display());
            continue;
        }
        let file_ok = match entry {
            Some(e) => files.holds_entry(e)? || files.holds_blob(c.path.as_bstr(), *new)?,
            // The old tree had nothing there: nothing, or the new file.
            None => {
                !files.occupied(c.path.as_bstr()) || files.holds_blob(c.path.as_bstr(), *new)?
            }
        };
        if file_ok {
            todo.push(c.clone());
        } else {
            left.push(c.display());
        }
    }
    drop(files);
    if todo.is_empty() && left.is_empty() {
        drop(lock);
        return Ok(Finished::Updated(dir.to_owned()));
    }
    update(wt, dir, lock, index, to_tree, &todo)?;
    Ok(if left.is_empty() {
        Finished::Updated(dir.to_owned())
    } else {
        Finished::LeftAlone {
            dir: dir.to_owned(),
            paths: left,
        }
    })
}

impl Files<'_> {
    /// Does the file at `path` hold `blob` (`None`: is there nothing)?
    fn holds_blob(&mut self, path: &BStr, blob: Option<(Mode, ObjectId)>) -> Result<bool> {
        let abs = self.dir.join(crate::git::paths::rel_path(path)?);
        let Some((mode, id)) = blob else {
            return Ok(std::fs::symlink_metadata(&abs).is_err());
        };
        if mode == Mode::COMMIT {
            return Ok(true);
        }
        match gix::index::fs::Metadata::from_path_no_follow(&abs) {
            Ok(meta) if self.kind_matches(mode, &meta) => {
                Ok(self.content_id(path, mode, &abs)? == Some(id))
            }
            _ => Ok(false),
        }
    }
}

/// Paths with unmerged entries in a checkout of `branch`, with the
/// checkout: nothing lands there until the merge is finished or aborted.
pub fn unmerged_checkouts(ctx: &Context, branch: &FullName) -> Result<Vec<(PathBuf, Vec<String>)>> {
    let mut out = Vec::new();
    for wt in crate::run::user_checkout::worktrees_with_branch(ctx, branch)? {
        let Ok(index) = crate::git::index_lock::read_index(&wt) else {
            continue;
        };
        let paths = unmerged_paths(&index);
        if !paths.is_empty() {
            out.push((crate::git::paths::workdir(&wt)?, paths));
        }
    }
    Ok(out)
}

/// How long to wait for an `index.lock` on a checkout (`arbiter.indexLockWait`).
pub fn lock_wait(ctx: &Context) -> Result<Duration> {
    Ok(ctx
        .config_duration("arbiter.indexLockWait", "10s")?
        .unwrap_or(DEFAULT_LOCK_WAIT))
}

/// Every worktree (main or linked) that has `branch` checked out, as a repository handle.
pub fn worktrees_with_branch(ctx: &Context, branch: &FullName) -> Result<Vec<gix::Repository>> {
    let mut out = Vec::new();
    // Opening a repository parses its configuration: look at each HEAD file
    // first and open only the worktrees that have the branch checked out (a
    // round has one linked worktree per building work order).
    if crate::run::worktree::head_may_name(ctx.repo.common_dir(), branch) {
        let main = ctx
            .repo
            .main_repo()
            .map_err(|source| Error::OpenMain { source })?;
        if main.workdir().is_some() && main.head_name().ok().flatten().as_ref() == Some(branch) {
            out.push(crate::state::context::cached(&ctx.caches, main));
        }
    }
    for proxy in ctx
        .repo
        .worktrees()
        .map_err(|source| Error::ListWorktrees { source })?
    {
        if !crate::run::worktree::head_may_name(proxy.git_dir(), branch) {
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
            out.push(crate::state::context::cached(&ctx.caches, repo));
        }
    }
    Ok(out)
}

/// Run the `post-merge` hook of the worktree at `dir` with the argument `0`
/// (not a squash merge), as `git merge` does after updating a checkout:
/// setups such as git-lfs rely on it. Its output goes to stderr (stdout may
/// carry JSON); like git, its exit status changes nothing. gix has no hook
/// runner, so git's `hook run` does it (git ≥ 2.36), when there is a hook.
pub fn run_post_merge(dir: &Path) {
    if gix::open(dir).is_ok_and(|wt| !crate::git::hooks::present(&wt, "post-merge")) {
        return;
    }
    let mut cmd = std::process::Command::new("git");
    for var in crate::git::config_env::GIT_ENV {
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
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use gix::ObjectId;

    use super::{Blocked, Move};
    use crate::testutil::{git, new_repo, scratch};

    /// The move of the checkout at `dir` from commit `from` to `to`, and the
    /// paths it changes.
    fn step(
        dir: &Path,
        from: &str,
        to: &str,
    ) -> (gix::Repository, Move, Vec<crate::git::diff::Changed>) {
        let wt = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
        let id = |hex: &str| ObjectId::from_hex(hex.trim().as_bytes()).expect("sha");
        let tree = |c: ObjectId| {
            wt.find_commit(c)
                .expect("commit")
                .tree_id()
                .expect("tree")
                .detach()
        };
        let (from, to) = (id(from), id(to));
        let step = Move {
            from,
            from_tree: tree(from),
            to,
            to_tree: tree(to),
        };
        let changed =
            crate::git::diff::changed_paths(&wt, step.from_tree, step.to_tree).expect("diff");
        (wt, step, changed)
    }

    /// A repository at `old` whose next commit `new` rewrites `a.txt` and
    /// `c.txt` (checked out with CRLF) and adds `d.txt`.
    fn repo(root: &Path) -> (std::path::PathBuf, String, String) {
        let dir = new_repo(root, "repo");
        std::fs::write(dir.join(".gitattributes"), "c.txt eol=crlf\n").expect("write");
        for (name, text) in [("a.txt", "one\n"), ("b.txt", "two\n"), ("c.txt", "x\n")] {
            std::fs::write(dir.join(name), text).expect("write");
        }
        git(root, &dir, &["add", "-A"]);
        git(root, &dir, &["commit", "-q", "-m", "old"]);
        let old = git(root, &dir, &["rev-parse", "HEAD"]);
        for (name, text) in [("a.txt", "one!\n"), ("c.txt", "y\n"), ("d.txt", "new\n")] {
            std::fs::write(dir.join(name), text).expect("write");
        }
        git(root, &dir, &["add", "-A"]);
        git(root, &dir, &["commit", "-q", "-m", "new"]);
        let new = git(root, &dir, &["rev-parse", "HEAD"]);
        git(root, &dir, &["checkout", "-q", "-f", old.trim()]);
        (dir, old, new)
    }

    /// Files the index cannot vouch for by their stat data are read: the
    /// same content written again (through the eol filter) is no edit; an
    /// edit of the same size, in the second the index was written, is one.
    #[test]
    fn suspect_files_are_read_not_trusted() {
        let (_tmp, root) = scratch();
        let (dir, old, new) = repo(&root);
        for (name, text) in [("a.txt", "one\n"), ("c.txt", "x\r\n")] {
            std::fs::remove_file(dir.join(name)).expect("rm");
            std::fs::write(dir.join(name), text).expect("write");
        }
        let (wt, mv, changed) = step(&dir, &old, &new);
        let ready = super::prepare(&wt, mv, &changed, std::time::Duration::ZERO).expect("prepare");
        assert!(ready.is_ok(), "the same content is no edit");
        drop(ready);
        // Same size, so only the content tells.
        std::fs::write(dir.join("a.txt"), "ONE\n").expect("write");
        match super::prepare(&wt, mv, &changed, std::time::Duration::ZERO).expect("prepare") {
            Err(Blocked::Edited { paths, .. }) => assert_eq!(paths, ["a.txt"]),
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("an edit was not seen"),
        }
    }

    /// As `git merge` (a two-way `read-tree -m -u`): an unrelated edit and
    /// an unrelated staged change stay, the landing's paths are written,
    /// and the index ends up as git's would.
    #[test]
    fn local_changes_elsewhere_are_carried_over_as_git_carries_them() {
        let (_tmp, root) = scratch();
        let (dir, old, new) = repo(&root);
        let oracle = crate::testutil::copy_of(&root, &dir, "oracle");
        for d in [&dir, &oracle] {
            std::fs::write(d.join("b.txt"), "edited\n").expect("write");
            std::fs::write(d.join("e.txt"), "staged\n").expect("write");
            git(&root, d, &["add", "e.txt"]);
            git(&root, d, &["update-index", "-q", "--refresh"]);
        }
        git(
            &root,
            &oracle,
            &["read-tree", "-m", "-u", old.trim(), new.trim()],
        );
        let (wt, mv, changed) = step(&dir, &old, &new);
        let ready = super::prepare(&wt, mv, &changed, std::time::Duration::ZERO)
            .expect("prepare")
            .unwrap_or_else(|b| panic!("{b:?}"));
        ready.begin().expect("journal");
        ready.apply().expect("apply");
        assert!(!crate::git::layout::landing_journal(wt.git_dir()).exists());
        let ls = |d: &Path| {
            git(&root, d, &["ls-files", "-s", "--debug"])
                .lines()
                .filter(|l| {
                    !l.trim_start().starts_with("ctime")
                        && !l.trim_start().starts_with("mtime")
                        && !l.trim_start().starts_with("dev")
                        && !l.trim_start().starts_with("uid")
                        && !l.trim_start().starts_with("size")
                })
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(ls(&dir), ls(&oracle));
        for name in ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"] {
            assert_eq!(
                std::fs::read(dir.join(name)).expect("ours"),
                std::fs::read(oracle.join(name)).expect("git's"),
                "{name}"
            );
        }
        assert_eq!(git(&root, &dir, &["diff", "--name-only"]), "b.txt\n");
    }

    /// A staged change, a deletion, an added file of the user's where the
    /// landing writes, and unmerged entries each keep the checkout from
    /// following, naming the path; nothing is touched.
    #[test]
    fn changes_where_the_landing_writes_block_it() {
        let (_tmp, root) = scratch();
        let (dir, old, new) = repo(&root);
        let (wt, mv, changed) = step(&dir, &old, &new);
        let blocked = |wt: &gix::Repository| match super::prepare(
            wt,
            mv,
            &changed,
            std::time::Duration::ZERO,
        )
        .expect("prepare")
        {
            Err(b) => b,
            Ok(_) => panic!("not blocked"),
        };
        std::fs::write(dir.join("a.txt"), "staged\n").expect("write");
        git(&root, &dir, &["add", "a.txt"]);
        assert!(matches!(blocked(&wt), Blocked::Edited { paths, .. } if paths == ["a.txt"]));
        git(&root, &dir, &["reset", "-q", "--hard"]);
        std::fs::remove_file(dir.join("c.txt")).expect("rm");
        assert!(matches!(blocked(&wt), Blocked::Edited { paths, .. } if paths == ["c.txt"]));
        git(&root, &dir, &["reset", "-q", "--hard"]);
        std::fs::write(dir.join("d.txt"), "mine\n").expect("write");
        assert!(matches!(blocked(&wt), Blocked::Untracked { paths, .. } if paths == ["d.txt"]));
        git(&root, &dir, &["add", "d.txt"]);
        assert!(matches!(blocked(&wt), Blocked::Edited { paths, .. } if paths == ["d.txt"]));
        assert_eq!(
            std::fs::read_to_string(dir.join("d.txt")).expect("d"),
            "mine\n"
        );
        // `reset --hard` removes the staged new file too.
        git(&root, &dir, &["reset", "-q", "--hard"]);
        assert!(!dir.join("d.txt").exists());
        // A conflicted merge in progress.
        git(&root, &dir, &["checkout", "-q", "-b", "side"]);
        std::fs::write(dir.join("b.txt"), "side\n").expect("write");
        git(&root, &dir, &["commit", "-q", "-am", "side"]);
        git(&root, &dir, &["checkout", "-q", old.trim()]);
        std::fs::write(dir.join("b.txt"), "ours\n").expect("write");
        git(&root, &dir, &["commit", "-q", "-am", "ours"]);
        let merged = crate::testutil::git_command(&root, &dir)
            .args(["merge", "-q", "side"])
            .output()
            .expect("git merge");
        assert!(
            String::from_utf8_lossy(&merged.stdout).contains("CONFLICT"),
            "the merge conflicts: {merged:?}"
        );
        assert!(matches!(blocked(&wt), Blocked::Unmerged { paths, .. } if paths == ["b.txt"]));
    }

    /// The index of the checkout at `dir`, as gix reads it.
    fn index_of(dir: &Path) -> gix::index::File {
        gix::index::File::at(
            dir.join(".git/index"),
            gix::hash::Kind::Sha1,
            false,
            Default::default(),
        )
        .expect("read index")
    }

    /// A clean checkout follows random landings as `git read-tree -m -u`
    /// does: files (kinds, modes, content), the index, and no stale entry.
    /// The index keeps its version (4 in every other case), and its cache
    /// tree is the one git makes for the new tree (`git read-tree`).
    #[test]
    fn a_clean_checkout_follows_as_git_read_tree() {
        use crate::testutil::{commit_tree, outcome, random_tree};
        let (_tmp, root) = scratch();
        let mut rng = crate::testutil::Rng(0x5eed_cafe);
        for case in 0..30 {
            let (old, new) = (random_tree(&mut rng), random_tree(&mut rng));
            let seed = new_repo(&root, &format!("seed-{case}"));
            let old_commit = commit_tree(&root, &seed, &old, "old");
            let new_commit = commit_tree(&root, &seed, &new, "new");
            git(&root, &seed, &["checkout", "-q", "-f", &old_commit]);
            let version = if case % 2 == 0 { "4" } else { "2" };
            git(&root, &seed, &["update-index", "--index-version", version]);
            let primed = crate::testutil::copy_of(&root, &seed, &format!("primed-{case}"));
            git(&root, &primed, &["read-tree", &new_commit]);
            let by_git = crate::testutil::copy_of(&root, &seed, &format!("git-{case}"));
            let ours = crate::testutil::copy_of(&root, &seed, &format!("ours-{case}"));
            for copy in [&by_git, &ours] {
                git(&root, copy, &["update-index", "-q", "--refresh"]);
            }
            git(
                &root,
                &by_git,
                &["read-tree", "-m", "-u", &old_commit, &new_commit],
            );
            let (wt, mv, changed) = step(&ours, &old_commit, &new_commit);
            let ready = super::prepare(&wt, mv, &changed, std::time::Duration::ZERO)
                .expect("prepare")
                .unwrap_or_else(|b| {
                    panic!("case {case}: blocked: {}: {old:?} -> {new:?}", b.describe())
                });
            assert!(index_of(&ours).tree().is_some(), "git's checkout made one");
            ready.apply().expect("apply");
            assert_eq!(
                outcome(&root, &ours),
                outcome(&root, &by_git),
                "case {case}: {old:?} -> {new:?}"
            );
            let index = index_of(&ours);
            assert_eq!(index.version() as u8, version.parse::<u8>().unwrap());
            assert_eq!(
                index.tree(),
                index_of(&primed).tree(),
                "case {case}: {old:?} -> {new:?}"
            );
            git(&root, &ours, &["fsck", "--strict", "--no-progress"]);
        }
    }

    /// Changes the user staged are carried over; the cache tree is never
    /// wrong about them: `git write-tree` with it (which trusts its valid
    /// nodes) writes the tree a fresh index of the same entries writes.
    #[test]
    fn the_cache_tree_never_hides_changes_the_user_staged() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        for (path, text) in [
            ("a/b/x", "x"),
            ("a/y", "y"),
            ("c/z", "z"),
            ("d/w", "w"),
            ("top", "t"),
        ] {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).expect("mkdir");
            std::fs::write(file, text).expect("write");
        }
        git(&root, &dir, &["add", "-A"]);
        git(&root, &dir, &["commit", "-q", "-m", "old"]);
        let old = git(&root, &dir, &["rev-parse", "HEAD"]);
        git(&root, &dir, &["checkout", "-q", "-b", "side"]);
        std::fs::write(dir.join("a/b/x"), "x2").expect("write");
        std::fs::write(dir.join("a/b/new"), "n").expect("write");
        std::fs::remove_file(dir.join("d/w")).expect("rm");
        git(&root, &dir, &["add", "-A"]);
        git(&root, &dir, &["commit", "-q", "-m", "new"]);
        let new = git(&root, &dir, &["rev-parse", "HEAD"]);
        git(&root, &dir, &["checkout", "-q", "main"]);
        // Staged by the user: beside a changed path, in an untouched
        // directory, a new directory, and an intent to add.
        std::fs::write(dir.join("a/y"), "y staged").expect("write");
        std::fs::write(dir.join("c/z"), "z staged").expect("write");
        std::fs::create_dir_all(dir.join("e")).expect("mkdir");
        std::fs::write(dir.join("e/v"), "v").expect("write");
        std::fs::write(dir.join("later"), "l").expect("write");
        git(&root, &dir, &["add", "a/y", "c/z", "e/v"]);
        git(&root, &dir, &["add", "-N", "later"]);
        git(&root, &dir, &["write-tree"]);
        let (wt, mv, changed) = step(&dir, &old, &new);
        let ready = super::prepare(&wt, mv, &changed, std::time::Duration::ZERO)
            .expect("prepare")
            .unwrap_or_else(|b| panic!("blocked: {}", b.describe()));
        ready.apply().expect("apply");
        let index = index_of(&dir);
        let tree = index.tree().expect("kept");
        assert_eq!(tree.num_entries, None, "the top holds staged changes");
        let child = |name: &str| {
            tree.children
                .iter()
                .find(|c| c.name.as_slice() == name.as_bytes())
        };
        assert_eq!(
            child("a").and_then(|c| c.num_entries),
            None,
            "a/y is staged"
        );
        assert!(child("d").is_none(), "d is gone");
        // Untouched by the landing: as `git write-tree` left it, staged z in.
        assert_eq!(child("c").and_then(|c| c.num_entries), Some(1));
        let b = child("a")
            .and_then(|a| a.children.iter().find(|c| c.name.as_slice() == b"b"))
            .expect("a/b");
        assert_eq!(b.num_entries, Some(2), "a/b is as the new tree has it");
        git(&root, &dir, &["rm", "-q", "--cached", "later"]);
        let listed = git(&root, &dir, &["ls-files", "-s"]);
        let fresh = root.join("fresh-index");
        let by_entries = crate::testutil::run_with_input(
            crate::testutil::git_command(&root, &dir)
                .args(["update-index", "--index-info"])
                .env("GIT_INDEX_FILE", &fresh),
            listed.as_bytes(),
        );
        assert!(by_entries.status.success());
        let truth = crate::testutil::git_command(&root, &dir)
            .args(["write-tree"])
            .env("GIT_INDEX_FILE", &fresh)
            .output()
            .expect("write-tree");
        let truth = String::from_utf8(truth.stdout).expect("utf-8");
        assert_eq!(git(&root, &dir, &["write-tree"]), truth);
    }

    /// `index.lock` held by someone else past the wait blocks it; the
    /// marker of a lock left by a killed git-arbiter stays for recovery.
    #[test]
    fn a_held_index_lock_blocks_after_the_wait() {
        let (_tmp, root) = scratch();
        let (dir, old, new) = repo(&root);
        let (wt, mv, changed) = step(&dir, &old, &new);
        let lock = dir.join(".git/index.lock");
        std::fs::write(&lock, "").expect("lock");
        let started = std::time::Instant::now();
        let wait = std::time::Duration::from_millis(200);
        match super::prepare(&wt, mv, &changed, wait).expect("prepare") {
            Err(Blocked::Locked { lock: named, .. }) => assert_eq!(named, lock),
            other => panic!("{:?}", other.err()),
        }
        assert!(started.elapsed() >= wait);
        assert!(lock.exists(), "not ours to remove");
        // Released during the wait: taken. The lock goes once this thread
        // has met it: asleep between two tries (the only sleep `prepare`
        // has), as `/proc` shows. The wait is generous, so that a slow
        // release does not run it out.
        let this_thread = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
        let returned = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let release = {
            let (lock, returned) = (lock.clone(), returned.clone());
            std::thread::spawn(move || {
                let wchan = Path::new("/proc").join(this_thread).join("wchan");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                loop {
                    // Read before the thread's state: a thread seen asleep
                    // after this had not returned yet.
                    assert!(
                        !returned.load(std::sync::atomic::Ordering::SeqCst),
                        "prepare returned before it waited for the lock"
                    );
                    let asleep =
                        std::fs::read_to_string(&wchan).is_ok_and(|w| w.contains("nanosleep"));
                    if asleep {
                        break;
                    }
                    assert!(
                        std::time::Instant::now() < deadline,
                        "prepare never waited for the lock"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                std::fs::remove_file(lock).expect("unlock");
            })
        };
        let ready =
            super::prepare(&wt, mv, &changed, std::time::Duration::from_secs(60)).expect("prepare");
        returned.store(true, std::sync::atomic::Ordering::SeqCst);
        release.join().expect("released during the wait");
        assert!(ready.is_ok());
    }
}

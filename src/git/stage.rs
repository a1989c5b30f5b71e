//! A builder's leftovers staged as `git add -A` stages them, without git,
//! in the plain case: the new tree is HEAD's tree edited by what changed,
//! and the index records exactly that tree.
//!
//! Why not `git add -A`: git trusts a file's stat data only when the index
//! was written in a later second than the file (git on Linux is built
//! without sub-second times). A worktree checked out or switched in the
//! second its builder finishes (a one-line builder, or a warm gate) has
//! every entry "racily clean" for git, and each `git add -A` there reads
//! every file again: 80–250 ms at 5,000 files, seconds at 50,000. gix
//! compares to the nanosecond, so only the files that changed are read.
//!
//! Anything but the plain case returns `None`, with nothing written, and the
//! caller runs git: a configured filter driver (git runs it), `core.fileMode`
//! or `core.symlinks` off, `core.ignoreCase`, sparse checkout, an fsmonitor
//! or untracked cache, entries staged, conflicted, intent-to-add, skipped or
//! assumed unchanged, submodules and nested repositories, a file turned into
//! a folder or back, or an index that does not hold HEAD's tree.

use std::path::Path;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{Flags, Mode, Stage, Stat};
use gix::objs::tree::EntryKind;
use gix::ObjectId;

use crate::git::index_lock::IndexLock;
use crate::git::splitindex;
use crate::git::stamps::is_ignore_rules;
use crate::sys::caches::Caches;
use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing the leftovers' objects: {source}")]
    WriteObjects {
        #[source]
        source: gix::Error,
    },
    #[error("reading tree {tree}: {source}")]
    ReadTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("editing the tree of the leftovers: {source}")]
    EditTree {
        #[source]
        source: gix::Error,
    },
    #[error("writing the tree of the leftovers: {source}")]
    WriteTree {
        #[source]
        source: gix::Error,
    },
    #[error("the path '{path}' is not one of this system: {source}")]
    ForeignPath {
        path: BString,
        #[source]
        source: gix::Error,
    },
    #[error("storing {path}: {source}")]
    Store {
        path: BString,
        #[source]
        source: gix::Error,
    },
    #[error("hashing {path}: {source}")]
    Hash {
        path: BString,
        #[source]
        source: gix::Error,
    },
    #[error("preparing a directory walk: {source}")]
    PrepareWalk {
        #[source]
        source: gix::Error,
    },
    #[error("listing the untracked files: {source}")]
    Untracked {
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// A path's new state: its blob, kind and stat data, or gone.
struct Staged {
    path: BString,
    now: Option<(ObjectId, EntryKind, Stat)>,
}

/// A file as found on disk.
enum Found {
    Gone,
    Blob(ObjectId, EntryKind, Stat),
    /// Anything git handles differently: a folder, a repository, a socket,
    /// a path below something that is no longer a folder.
    Other,
}

/// Stage everything in the worktree `wt` whose HEAD's tree is `head_tree`
/// (new, modified and deleted files, ignored ones left alone) and return the
/// index's tree, as `git add -A && git write-tree` would; `None`, with nothing
/// written, when the plain case does not hold and git must do it.
pub(crate) fn stage_all(
    caches: &Caches,
    wt: &gix::Repository,
    head_tree: ObjectId,
) -> Result<Option<ObjectId>> {
    if !plain_config(wt) {
        return Ok(None);
    }
    let dir = crate::git::paths::workdir(wt)?;
    // git takes the lock before it reads the index; so does this.
    let Ok(lock) = IndexLock::take(wt) else {
        return Ok(None);
    };
    let Some((mut index, checksum, split)) = read_index(wt, &lock) else {
        return Ok(None);
    };
    if !plain_index(&index)
        || !crate::git::index_memo::holds_state(caches, wt, &index, checksum, head_tree)?
    {
        return Ok(None);
    }
    let suspects = suspects_marked(wt, &mut index, &dir);
    let mut to_git = crate::git::encoding::ToGit::new(wt, &index)?;
    // A changed ignore rule can turn ignored files anywhere into untracked
    // ones, in folders nobody touched: then every folder is listed.
    let rules_changed = suspects
        .iter()
        .any(|(at, _)| is_ignore_rules(index.entries()[*at].path(&index)));
    let mut staged = Vec::new();
    for (at, _) in suspects {
        let entry = &index.entries()[at];
        let path = entry.path(&index).to_owned();
        match hash(wt, &mut to_git, &index, &dir, path.as_bstr(), Blob::Store)? {
            Found::Gone => staged.push(Staged { path, now: None }),
            Found::Blob(id, kind, stat) => {
                if id != entry.id || mode_of(kind) != entry.mode || stat != entry.stat {
                    staged.push(Staged {
                        path,
                        now: Some((id, kind, stat)),
                    });
                }
            }
            Found::Other => return Ok(None),
        }
    }
    let stamps = crate::git::stamps::recorded(caches, &dir)
        .filter(|stamps| !rules_changed && stamps.same_rules(wt, &index));
    let Some(untracked) = untracked(wt, &index, stamps.as_deref())? else {
        return Ok(None);
    };
    for path in untracked {
        match hash(wt, &mut to_git, &index, &dir, path.as_bstr(), Blob::Store)? {
            Found::Blob(id, kind, stat) => staged.push(Staged {
                path,
                now: Some((id, kind, stat)),
            }),
            Found::Gone | Found::Other => return Ok(None),
        }
    }
    drop(to_git);
    if staged.is_empty() {
        return Ok(Some(head_tree));
    }
    staged.sort_by(|a, b| a.path.cmp(&b.path));

    let tree = edited_tree(wt, head_tree, &staged)?;
    crate::git::odb::refresh(wt, written_anew(wt, tree, &staged)?)
        .map_err(|source| Error::WriteObjects { source })?;
    let checksum = write_index(lock, index, split, &staged, &dir)?;
    crate::sys::crash::point("leftovers-index.after");
    crate::git::index_memo::remember_holds(caches, checksum, tree);
    Ok(Some(tree))
}

/// `head_tree` edited by what was staged (sorted by path): removals and
/// upserts, written.
fn edited_tree(wt: &gix::Repository, head_tree: ObjectId, staged: &[Staged]) -> Result<ObjectId> {
    let mut editor = wt.edit_tree(head_tree).map_err(|source| Error::ReadTree {
        tree: head_tree,
        source,
    })?;
    for s in staged.iter().filter(|s| s.now.is_none()) {
        editor
            .remove(s.path.as_bstr())
            .map_err(|source| Error::EditTree { source })?;
    }
    for s in staged {
        if let Some((id, kind, _)) = s.now {
            editor
                .upsert(s.path.as_bstr(), kind, id)
                .map_err(|source| Error::EditTree { source })?;
        }
    }
    Ok(editor
        .write()
        .map_err(|source| Error::WriteTree { source })?
        .detach())
}

/// The index of `wt` (locked by `lock`), its file's checksum, and, when it
/// is kept split, the split as read: a split index is read once, for the
/// staging and for the write. `None` when it cannot be read, or has an
/// extension the split reading drops.
fn read_index(
    wt: &gix::Repository,
    lock: &IndexLock,
) -> Option<(
    gix::index::State,
    Option<ObjectId>,
    Option<splitindex::Split>,
)> {
    if lock.writes_split() {
        match splitindex::read(wt) {
            Ok(Some(split)) if split.extended => return None,
            Ok(Some(split)) => return Some((split.merged(), split.checksum, Some(split))),
            Ok(None) => {}
            Err(_) => return None,
        }
    }
    let file = crate::git::index_lock::read_index(wt).ok()?;
    let checksum = file.checksum();
    Some((file.into(), checksum, None))
}

/// What the worktree `wt` holds besides its index, as `git status` with no
/// untracked cache finds it: the tracked files whose content (or kind)
/// differs, and the untracked files outside the ignored ones. Each file's
/// stat data is checked and the content of the suspect ones hashed (as
/// `stage_all` does, but nothing is written to the object database); folders the [`crate::git::stamps`] of this process prove
/// unchanged (their ctime, which nothing sets back) are not listed. `None`
/// where the plain case does not hold: gix's status judges there.
pub(crate) fn changes(
    caches: &Caches,
    wt: &gix::Repository,
) -> Result<Option<(Vec<String>, Vec<String>)>> {
    if !plain_config(wt) {
        return Ok(None);
    }
    let dir = crate::git::paths::workdir(wt)?;
    let mut index = match splitindex::read(wt) {
        Ok(Some(split)) if split.extended => return Ok(None),
        Ok(Some(split)) => split.merged(),
        Ok(None) => match crate::git::index_lock::read_index(wt) {
            Ok(file) => file.into(),
            Err(_) => return Ok(None),
        },
        Err(_) => return Ok(None),
    };
    if !plain_index(&index) {
        return Ok(None);
    }
    let suspects = suspects_marked(wt, &mut index, &dir);
    let mut modified = Vec::new();
    if !suspects.is_empty() {
        let mut to_git = crate::git::encoding::ToGit::new(wt, &index)?;
        for (at, _) in &suspects {
            let entry = &index.entries()[*at];
            let path = entry.path(&index);
            let same = match hash(wt, &mut to_git, &index, &dir, path, Blob::IdOnly)? {
                Found::Blob(id, kind, _) => id == entry.id && mode_of(kind) == entry.mode,
                Found::Gone => false,
                Found::Other => return Ok(None),
            };
            if !same {
                modified.push(path.to_str_lossy().into_owned());
            }
        }
    }
    let rules_changed = suspects
        .iter()
        .any(|(at, _)| is_ignore_rules(index.entries()[*at].path(&index)));
    let stamps = crate::git::stamps::recorded(caches, &dir)
        .filter(|stamps| !rules_changed && stamps.same_rules(wt, &index));
    let Some(untracked) = untracked(wt, &index, stamps.as_deref())? else {
        return Ok(None);
    };
    let mut untracked: Vec<String> = untracked
        .iter()
        .map(|p| p.to_str_lossy().into_owned())
        .collect();
    modified.sort();
    untracked.sort();
    Ok(Some((modified, untracked)))
}

/// The entries of `index` whose files' stat data do not vouch for them
/// (see [`crate::git::stat::stat_suspects`]); every other entry is marked up to
/// date, as the walk for untracked files takes an entry as tracked without
/// looking at the disk only then (an in-memory flag).
fn suspects_marked(
    wt: &gix::Repository,
    index: &mut gix::index::State,
    dir: &Path,
) -> Vec<(usize, Option<Stat>)> {
    let suspects = crate::git::stat::stat_suspects(wt, index, dir);
    let mut suspect = vec![false; index.entries().len()];
    for (at, _) in &suspects {
        suspect[*at] = true;
    }
    for (entry, suspect) in index.entries_mut().iter_mut().zip(&suspect) {
        if !suspect {
            entry.flags.insert(Flags::UPTODATE);
        }
    }
    suspects
}

/// Nothing configured that makes `git add` do more than hash files.
fn plain_config(wt: &gix::Repository) -> bool {
    let config = wt.config_snapshot();
    let filter_driver = config
        .plumbing()
        .sections_by_name("filter")
        .is_some_and(|mut sections| sections.next().is_some());
    config.boolean("core.fileMode") != Some(false)
        && config.boolean("core.symlinks") != Some(false)
        && config.boolean("core.ignoreCase") != Some(true)
        && config.boolean("core.sparseCheckout") != Some(true)
        && config.string("core.fsmonitor").is_none()
        && !filter_driver
}

/// Every entry plainly tracked: no conflict, no flag `git add` honours, no submodule.
fn plain_index(index: &gix::index::State) -> bool {
    let flagged = Flags::INTENT_TO_ADD | Flags::SKIP_WORKTREE | Flags::ASSUME_VALID;
    !index.is_sparse()
        && index.fs_monitor().is_none()
        && index.untracked().is_none()
        && index.entries().iter().all(|e| {
            e.stage() == Stage::Unconflicted
                && !e.flags.intersects(flagged)
                && e.mode != Mode::COMMIT
        })
}

/// The objects a commit of `tree` refers to anew with the `staged` changes:
/// their blobs and the trees on their paths. gix skips writing an object it
/// finds, perhaps in a pack about to go (see [`crate::git::odb::write_fresh`]).
fn written_anew(
    wt: &gix::Repository,
    tree: ObjectId,
    staged: &[Staged],
) -> Result<std::collections::BTreeSet<ObjectId>> {
    let mut ids: std::collections::BTreeSet<ObjectId> = staged
        .iter()
        .filter_map(|s| s.now.map(|(id, ..)| id))
        .collect();
    ids.insert(tree);
    let root = wt
        .find_tree(tree)
        .map_err(|source| Error::ReadTree { tree, source })?;
    let mut folders: std::collections::BTreeSet<&[u8]> = Default::default();
    for s in staged {
        let path = s.path.as_slice();
        for (at, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
            folders.insert(&path[..at]);
        }
    }
    for folder in folders {
        let entry = root
            .lookup_entry(folder.split(|b| *b == b'/'))
            .map_err(|source| Error::ReadTree { tree, source })?;
        if let Some(entry) = entry.filter(|e| e.mode().is_tree()) {
            ids.insert(entry.object_id());
        }
    }
    Ok(ids)
}

/// The index mode of a blob of `kind`.
fn mode_of(kind: EntryKind) -> Mode {
    match kind {
        EntryKind::BlobExecutable => Mode::FILE_EXECUTABLE,
        EntryKind::Link => Mode::SYMLINK,
        EntryKind::Commit => Mode::COMMIT,
        EntryKind::Tree => Mode::DIR,
        EntryKind::Blob => Mode::FILE,
    }
}

/// What [`hash`] does with the blob of a file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Blob {
    /// Store it in the object database (staging).
    Store,
    /// Only compute its id (a check that must write nothing).
    IdOnly,
}

/// Hash the file at `path` as git stores it (filters of .gitattributes,
/// end-of-line conversion), into the object database with [`Blob::Store`].
#[allow(clippy::unnecessary_cast)]
fn hash(
    wt: &gix::Repository,
    to_git: &mut crate::git::encoding::ToGit<'_>,
    index: &gix::index::State,
    dir: &Path,
    path: &BStr,
    blob: Blob,
) -> Result<Found> {
    use rustix::fs::FileType;
    let rel = gix::path::from_bstr(path).map_err(|source| Error::ForeignPath {
        path: path.to_owned(),
        source,
    })?;
    // A folder of its path turned into a link or a file: git sees that
    // instead, and a look through the link would find some other file.
    let mut folder = dir.to_owned();
    for name in rel.parent().into_iter().flat_map(Path::components) {
        folder.push(name);
        match rustix::fs::lstat(&folder) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
            Err(rustix::io::Errno::NOENT) => return Ok(Found::Gone),
            _ => return Ok(Found::Other),
        }
    }
    // The stat data before the read, as git takes it: a write in between
    // leaves the file racy, and the next look reads it again.
    let st = match rustix::fs::lstat(dir.join(&rel)) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(Found::Gone),
        Err(_) => return Ok(Found::Other),
    };
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::RegularFile && kind != FileType::Symlink {
        return Ok(Found::Other);
    }
    let entry_kind = match (kind, st.st_mode as u32 & 0o111 != 0) {
        (FileType::Symlink, _) => EntryKind::Link,
        (_, true) => EntryKind::BlobExecutable,
        (_, false) => EntryKind::Blob,
    };
    let blob = if blob == Blob::IdOnly {
        let mode = match kind {
            FileType::Symlink => Mode::SYMLINK,
            _ => Mode::FILE,
        };
        let Some(id) = crate::git::status::blob_id(wt, to_git, index, dir, path, mode)? else {
            return Ok(Found::Gone);
        };
        Some((id, entry_kind, ()))
    } else if kind == FileType::RegularFile && to_git.has_encodings() {
        let Some(data) = to_git.blob(index, path, &dir.join(&rel))? else {
            return Ok(Found::Gone);
        };
        let id = wt
            .write_blob(&data)
            .map_err(|source| Error::Store {
                path: path.to_owned(),
                source,
            })?
            .detach();
        Some((id, entry_kind, ()))
    } else {
        to_git
            .pipeline
            .worktree_file_to_object(path, index)
            .map_err(|source| Error::Hash {
                path: path.to_owned(),
                source,
            })?
            .map(|(id, kind, _)| (id, kind, ()))
    };
    Ok(match blob {
        Some((id, kind, _)) if !matches!(kind, EntryKind::Commit | EntryKind::Tree) => {
            Found::Blob(id, kind, crate::git::stat::index_stat(&st))
        }
        _ => Found::Other,
    })
}

/// The untracked files `git add -A` would add (not ignored, each file on its
/// own), or `None` when the walk meets something git adds otherwise (a
/// nested repository) or not at all (a socket). Folders `stamps` proves
/// unchanged since the worktree held no untracked file are not listed.
fn untracked(
    wt: &gix::Repository,
    index: &gix::index::State,
    stamps: Option<&crate::git::stamps::Stamps>,
) -> Result<Option<Vec<BString>>> {
    use gix::dir::entry::{Kind, Status};
    use gix::dir::walk::EmissionMode;
    // Only where the index names nothing can an untracked file be: the walk
    // (which classifies every file it meets) looks there alone, and not at
    // all when there is no such place.
    let dir = crate::git::paths::workdir(wt)?;
    let mut unknown = unknown_names(index, &dir, stamps);
    // A new ignore file may un-ignore files in the folders below it.
    if stamps.is_some()
        && unknown
            .as_ref()
            .is_some_and(|names| names.iter().any(|n| is_ignore_rules(n.as_bstr())))
    {
        unknown = unknown_names(index, &dir, None);
    }
    if unknown.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Some(Vec::new()));
    }
    let patterns: Vec<BString> = unknown
        .unwrap_or_default()
        .into_iter()
        .map(|path| {
            let mut literal = BString::from(":(literal)");
            literal.extend_from_slice(&path);
            literal
        })
        .collect();
    let options = wt
        .dirwalk_options()
        .map_err(|source| Error::PrepareWalk { source })?
        .emit_untracked(EmissionMode::Matching)
        .emit_ignored(None)
        .emit_tracked(false)
        .emit_pruned(false)
        .emit_empty_directories(false)
        .recurse_repositories(false);
    let mut found = gix::dir::walk::delegate::Collect::default();
    wt.dirwalk(
        index,
        &patterns,
        &std::sync::atomic::AtomicBool::new(false),
        options,
        &mut found,
    )
    .map_err(|source| Error::Untracked { source })?;
    let mut paths = Vec::new();
    for (entry, _) in found.unorded_entries {
        if entry.status != Status::Untracked {
            continue;
        }
        match entry.disk_kind {
            Some(Kind::File | Kind::Symlink) => paths.push(entry.rela_path),
            _ => return Ok(None),
        }
    }
    Ok(Some(paths))
}

/// Each name in a folder of the worktree `dir` that holds tracked files
/// (the worktree's top included) that the index does not name there: an
/// untracked or ignored file or folder, where every untracked file is or
/// is below. `None` when a folder cannot be read as one (gone, or a link
/// now) or holds a nested `.git`: then only a full walk tells. A folder
/// `stamps` proves unchanged (no name came) is not read.
fn unknown_names(
    index: &gix::index::State,
    dir: &Path,
    stamps: Option<&crate::git::stamps::Stamps>,
) -> Option<Vec<BString>> {
    use rustix::fs::Dir;
    use std::collections::{BTreeMap, HashMap, HashSet};
    // Each folder that holds tracked files (its path with a trailing '/',
    // the top's empty), with the names tracked in it. Sorted, each folder
    // comes after its parent.
    let mut folders: BTreeMap<&[u8], HashSet<&[u8]>> = BTreeMap::new();
    folders.entry(b"").or_default();
    // Entries come sorted, so a folder's files mostly follow each other:
    // their names are gathered and added to the map once per run, and the
    // folders above are entered only when the folder changes.
    let mut parent: &[u8] = b"";
    let mut names: Vec<&[u8]> = Vec::new();
    for entry in index.entries() {
        let path = entry.path(index).as_bytes();
        let start = path.iter().rposition(|b| *b == b'/').map_or(0, |at| at + 1);
        if path[..start] != *parent {
            folders.entry(parent).or_default().extend(names.drain(..));
            parent = &path[..start];
            let mut above = 0;
            while let Some(at) = path[above..start].iter().position(|b| *b == b'/') {
                folders
                    .entry(&path[..above])
                    .or_default()
                    .insert(&path[above..above + at]);
                above += at + 1;
            }
        }
        names.push(&path[start..]);
    }
    folders.entry(parent).or_default().extend(names);
    // How many tracked folders each folder holds.
    let mut subfolders: HashMap<&[u8], usize> = HashMap::new();
    for folder in folders.keys().filter(|f| !f.is_empty()) {
        let name_start = folder[..folder.len() - 1]
            .iter()
            .rposition(|b| *b == b'/')
            .map_or(0, |at| at + 1);
        *subfolders.entry(&folder[..name_start]).or_default() += 1;
    }
    let mut open = crate::git::stat::OpenFolders::new(dir).ok()?;
    let mut unknown = Vec::new();
    for (&folder, tracked) in &folders {
        let fd = open.get(folder)?;
        let tracked_subfolders = subfolders.get(folder).copied().unwrap_or(0);
        let tracked_names = || crate::git::stamps::names_digest(tracked.iter().copied());
        if stamps.is_some_and(|s| s.unchanged(folder, fd, tracked_subfolders, tracked_names)) {
            continue;
        }
        for found in Dir::read_from(fd).ok()? {
            let name = found.ok()?;
            let name = name.file_name().to_bytes();
            if name == b"." || name == b".." || tracked.contains(name) {
                continue;
            }
            if name == b".git" {
                if folder.is_empty() {
                    continue;
                }
                return None;
            }
            let mut path = BString::from(folder);
            path.extend_from_slice(name);
            unknown.push(path);
        }
    }
    Some(unknown)
}

/// Write `index` with `staged` (sorted by path) through `lock`: a split
/// index gets only the changed entries in its split file.
fn write_index(
    lock: IndexLock,
    index: gix::index::State,
    split: Option<splitindex::Split>,
    staged: &[Staged],
    dir: &Path,
) -> Result<ObjectId> {
    let is_staged = |p: &BStr| staged.binary_search_by(|s| s.path.as_bstr().cmp(p)).is_ok();
    if let Some(mut split) = split {
        for s in staged {
            if let Some(at) = split.shared_at(s.path.as_bstr()) {
                split.deleted[at] = true;
            }
        }
        split.added.remove_entries(|_, path, _| is_staged(path));
        push_staged(&mut split.added, staged);
        return lock.commit_split(&split, dir);
    }
    let mut state = index;
    state.remove_entries(|_, path, _| is_staged(path));
    push_staged(&mut state, staged);
    // The tree cache no longer describes the entries.
    state.remove_tree();
    lock.commit(&state, dir)
}

fn push_staged(state: &mut gix::index::State, staged: &[Staged]) {
    for s in staged {
        if let Some((id, kind, stat)) = s.now {
            state.dangerously_push_entry(stat, id, Flags::empty(), mode_of(kind), s.path.as_bstr());
        }
    }
    state.sort_entries();
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use gix::bstr::BString;

    use crate::sys::caches::Caches;
    use gix::ObjectId;

    use crate::testutil::{copy_of, git, new_repo, scratch, Rng};

    /// What a case does that `stage_all` may leave to git (a later change
    /// can undo it).
    #[derive(Default)]
    struct Expect {
        git_only: bool,
    }

    fn write(dir: &Path, path: &str, content: &[u8]) {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let _ = std::fs::remove_file(&path);
        std::fs::write(path, content).expect("write");
    }

    fn set_executable(path: &Path, on: bool) {
        use std::os::unix::fs::PermissionsExt;
        let mode = if on { 0o755 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    const TRACKED: [&str; 9] = [
        "top.txt",
        "a/f1.txt",
        "a/f2.crlf",
        "a/b/f3.txt",
        "a/b/id.c",
        "b/f4.bin",
        "b/c/f5.txt",
        "run.sh",
        "keep.log",
    ];

    /// The committed state every case starts from: text, CRLF and ident
    /// attributes, ignore rules with a negation, a link and an executable.
    fn seed(root: &Path, dir: &Path, autocrlf: Option<&str>) {
        if let Some(value) = autocrlf {
            git(root, dir, &["config", "core.autocrlf", value]);
        }
        write(dir, ".gitignore", b"*.log\n!keep.log\nbuild/\n/tmp\n");
        write(
            dir,
            ".gitattributes",
            b"*.crlf text eol=crlf\n*.txt text=auto\nid.c ident\n*.bin -text\n",
        );
        for (i, path) in TRACKED.iter().enumerate() {
            write(dir, path, format!("line {i}\nsecond line\n").as_bytes());
        }
        set_executable(&dir.join("run.sh"), true);
        std::os::unix::fs::symlink("a/f1.txt", dir.join("ln")).expect("symlink");
        git(root, dir, &["add", "-A"]);
        git(root, dir, &["commit", "-q", "-m", "seed"]);
    }

    /// One random change to the worktree `dir`.
    fn mutate(rng: &mut Rng, dir: &Path, n: usize, expect: &mut Expect) {
        let tracked = TRACKED[rng.below(TRACKED.len() as u64) as usize];
        let path = dir.join(tracked);
        // The three changes left to git come up one time in eleven.
        let change = match rng.below(33) {
            c @ 0..=14 => c,
            c => c % 12,
        };
        match change {
            // The same size: only the stat data tell it changed.
            0 => write(dir, tracked, b"LINE 0\nSECOND LINE\n"),
            1 => write(
                dir,
                tracked,
                format!("edit {n}\r\nwith crlf\r\n").as_bytes(),
            ),
            2 => drop(std::fs::remove_file(&path)),
            3 => drop(std::fs::remove_dir_all(dir.join(["a/b", "b", "a"][n % 3]))),
            4 => write(dir, &format!("new/deep/n{n}.txt"), b"new\n"),
            5 => write(dir, &format!("a/n{n}.crlf"), b"one\ntwo\r\n"),
            6 => match n % 3 {
                0 => write(dir, &format!("x{n}.log"), b"ignored\n"),
                // Names a pathspec would read as magic or a pattern: taken as they are.
                1 => write(dir, &format!("a/[b]*?{n} x.txt"), b"odd\n"),
                _ => write(dir, &format!(":(glob)n{n}/!*"), b"odd\n"),
            },
            7 => write(dir, &format!("build/o{n}"), b"ignored\n"),
            8 => write(dir, "a/b/id.c", b"$Id: 0123456789abcdef $\n"),
            9 => {
                if path.is_file() {
                    let on = rng.below(2) == 0;
                    set_executable(&path, on);
                }
            }
            10 => {
                let _ = std::fs::remove_file(dir.join("ln"));
                match rng.below(2) {
                    0 => write(dir, "ln", b"a file now\n"),
                    _ => std::os::unix::fs::symlink("b", dir.join("ln")).expect("symlink"),
                }
            }
            // Only the stat data change: a refresh, no new content.
            11 => {
                if let Ok(content) = std::fs::read(&path) {
                    write(dir, tracked, &content);
                }
            }
            // A file turned into a folder: left to git.
            12 => {
                if std::fs::remove_file(&path).is_ok() {
                    write(dir, &format!("{tracked}/inside"), b"x\n");
                    expect.git_only = true;
                }
            }
            // A folder turned into a link to another that holds files of
            // the same names: left to git.
            13 => {
                let (folder, target) = [("a/b", "../o"), ("b", "o")][n % 2];
                for name in ["f3.txt", "id.c", "f4.bin"] {
                    write(dir, &format!("o/{name}"), b"other\n");
                }
                if std::fs::remove_dir_all(dir.join(folder)).is_ok() {
                    std::os::unix::fs::symlink(target, dir.join(folder)).expect("symlink");
                    expect.git_only = true;
                }
            }
            // A nested repository: git adds it as a gitlink.
            _ => {
                let nested = dir.join(format!("nested{n}"));
                std::fs::create_dir_all(&nested).expect("mkdir");
                git(dir, &nested, &["init", "-q"]);
                write(&nested, "f", b"f\n");
                git(dir, &nested, &["add", "f"]);
                git(dir, &nested, &["commit", "-q", "-m", "nested"]);
                expect.git_only = true;
            }
        }
    }

    /// `stage_all` ends where `git add -A && git write-tree` does, on random
    /// changes: the same tree, the same `git ls-files -s`, a clean `git
    /// status`; and where it leaves the work to git, the index is untouched.
    #[test]
    fn staging_matches_git_add_all() {
        let (_tmp, root) = scratch();
        let mut rng = Rng(0x57a9_e0a1_1f00_d5e7);
        let (mut ours, mut split_ours) = (0, 0);
        for case in 0..48 {
            let dir = new_repo(&root, &format!("ours-{case}"));
            let autocrlf = [None, Some("input"), Some("true")][case % 3];
            seed(&root, &dir, autocrlf);
            let split = case % 2 == 1;
            if split {
                let wt = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
                crate::git::index_lock::keep_index_split(&wt).expect("split the index");
            }
            let mut expect = Expect::default();
            for n in 0..1 + rng.below(6) as usize {
                mutate(&mut rng, &dir, n, &mut expect);
            }
            let theirs = copy_of(&root, &dir, &format!("git-{case}"));
            git(&root, &theirs, &["add", "-A"]);
            let want_tree = git(&root, &theirs, &["write-tree"]);
            let want_index = git(&root, &theirs, &["ls-files", "-s"]);

            let index_before = std::fs::read(dir.join(".git/index")).expect("index");
            let (wt, head_tree) = open_at_head(&root, &dir);
            let staged = super::stage_all(&Caches::default(), &wt, head_tree).expect("stage");
            let Some(tree) = staged else {
                assert!(expect.git_only, "case {case}: left to git unexpectedly");
                let index_after = std::fs::read(dir.join(".git/index")).expect("index");
                assert!(index_after == index_before, "case {case}: index written");
                continue;
            };
            assert_eq!(tree.to_string(), want_tree.trim(), "case {case}: tree");
            let got_index = git(&root, &dir, &["ls-files", "-s"]);
            assert_eq!(got_index, want_index, "case {case}: index");
            // Nothing left unstaged: no file differs from its entry, none is untracked.
            let unstaged = git(&root, &dir, &["diff-files", "--name-status"]);
            assert_eq!(unstaged, "", "case {case}: unstaged after staging");
            let untracked = git(&root, &dir, &["ls-files", "-o", "--exclude-standard"]);
            assert_eq!(untracked, "", "case {case}: untracked after staging");
            git(&root, &dir, &["fsck", "--strict", "--no-dangling"]);
            ours += 1;
            split_ours += usize::from(split);
        }
        assert!(ours >= 30, "only {ours} of 48 cases staged without git");
        assert!(
            split_ours >= 12,
            "only {split_ours} split cases staged without git"
        );
    }

    /// A file changed in the moment its split index was written, its stat
    /// data as before (ctime not trusted): only the index file's time tells
    /// it may have changed, and the split index read as one keeps that time.
    #[test]
    fn a_racily_clean_file_of_a_split_index_is_read_again() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        seed(&root, &dir, None);
        git(&root, &dir, &["config", "core.trustctime", "false"]);
        let (wt, head_tree) = open_at_head(&root, &dir);
        crate::git::index_lock::keep_index_split(&wt).expect("split the index");
        let file = dir.join("a/f1.txt");
        let mtime = filetime::FileTime::from_last_modification_time(
            &std::fs::metadata(&file).expect("stat"),
        );
        filetime::set_file_mtime(dir.join(".git/index"), mtime).expect("index time");
        std::fs::write(&file, b"LINE 1\nsecond line\n").expect("rewrite");
        filetime::set_file_mtime(&file, mtime).expect("file time");

        let (wt, _) = open_at_head(&root, &dir);
        let tree = super::stage_all(&Caches::default(), &wt, head_tree)
            .expect("stage")
            .expect("staged without git");
        let staged = git(&root, &dir, &["rev-parse", &format!("{tree}:a/f1.txt")]);
        let on_disk = git(&root, &dir, &["hash-object", "a/f1.txt"]);
        assert_eq!(staged, on_disk, "the change was not seen");
    }

    /// An untracked cache git keeps in the split file of a split index is
    /// git's to update: the staging is left to it, nothing written.
    #[test]
    fn a_split_index_with_an_untracked_cache_is_left_to_git() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        seed(&root, &dir, None);
        let (wt, head_tree) = open_at_head(&root, &dir);
        crate::git::index_lock::keep_index_split(&wt).expect("split the index");
        git(&root, &dir, &["config", "core.splitIndex", "true"]);
        git(&root, &dir, &["update-index", "--untracked-cache"]);
        git(&root, &dir, &["status", "--porcelain"]);
        let split = {
            let wt = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
            crate::git::splitindex::read(&wt)
                .expect("read")
                .expect("still split")
        };
        assert!(split.extended, "git put the untracked cache elsewhere");
        write(&dir, "new.txt", b"new\n");
        let before = std::fs::read(dir.join(".git/index")).expect("index");
        let (wt, _) = open_at_head(&root, &dir);
        assert_eq!(
            super::stage_all(&Caches::default(), &wt, head_tree).expect("stage"),
            None
        );
        let after = std::fs::read(dir.join(".git/index")).expect("index");
        assert!(after == before, "the index was written");
    }

    /// The names the index does not know, folder by folder; none to tell
    /// when a tracked folder is a link now or holds a repository.
    #[test]
    fn unknown_names_are_where_untracked_files_can_be() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        seed(&root, &dir, None);
        let unknown = |dir: &Path| {
            let wt = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
            let index = crate::git::index_lock::read_index(&wt).expect("index");
            super::unknown_names(&index, dir, None).map(|mut names| {
                names.sort();
                names
            })
        };
        assert_eq!(unknown(&dir), Some(Vec::new()));
        write(&dir, "a/b/new.txt", b"new\n");
        write(&dir, "fresh/deep/x", b"x\n");
        write(&dir, "build/o", b"ignored\n");
        let names: Vec<BString> = ["a/b/new.txt", "build", "fresh"].map(BString::from).into();
        assert_eq!(unknown(&dir), Some(names));
        std::fs::create_dir(dir.join("a/b/.git")).expect("mkdir");
        assert_eq!(unknown(&dir), None, "a repository inside");
        std::fs::remove_dir(dir.join("a/b/.git")).expect("rmdir");
        std::fs::rename(dir.join("a/b"), dir.join("elsewhere")).expect("move");
        std::os::unix::fs::symlink("../elsewhere", dir.join("a/b")).expect("symlink");
        assert_eq!(unknown(&dir), None, "a link where a folder was");
    }

    /// What `git add -A` would refuse or do otherwise is left to it, with
    /// nothing written: a held `index.lock` (kept), something the builder
    /// staged itself, an index that cannot be read.
    #[test]
    fn a_locked_staged_or_unreadable_index_is_left_to_git() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        seed(&root, &dir, None);
        write(&dir, "new.txt", b"new\n");
        let (wt, head_tree) = open_at_head(&root, &dir);
        let index_path = dir.join(".git/index");
        let left_to_git = |why: &str| {
            let before = std::fs::read(&index_path).expect("index");
            let staged = super::stage_all(&Caches::default(), &wt, head_tree).expect("stage");
            assert_eq!(staged, None, "{why}");
            let after = std::fs::read(&index_path).expect("index");
            assert!(after == before, "{why}: the index was written");
        };

        let lock = dir.join(".git/index.lock");
        std::fs::write(&lock, b"another git's").expect("lock");
        left_to_git("a held index.lock");
        assert_eq!(std::fs::read(&lock).expect("lock kept"), b"another git's");
        std::fs::remove_file(&lock).expect("rm lock");

        git(&root, &dir, &["add", "new.txt"]);
        left_to_git("a file the builder staged");

        std::fs::write(&index_path, b"DIRC garbage").expect("corrupt");
        left_to_git("an unreadable index");
    }

    /// The repository at `dir`, opened with nothing from outside it, and its HEAD's tree.
    fn open_at_head(root: &Path, dir: &Path) -> (gix::Repository, ObjectId) {
        let wt = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
        let head_tree = git(root, dir, &["rev-parse", "HEAD^{tree}"]);
        let head_tree = ObjectId::from_hex(head_tree.trim().as_bytes()).expect("sha");
        (wt, head_tree)
    }

    /// Wait until the file system's clock (as it stamps files under `root`)
    /// has moved past every change made there so far: stamps count only
    /// when older than the moment they are taken, whatever the granularity.
    fn let_the_clock_move(root: &Path) {
        use std::os::unix::fs::MetadataExt;
        let probe = root.join("clock-probe");
        let ctime = || {
            std::fs::write(&probe, b"tick").expect("probe");
            let meta = std::fs::metadata(&probe).expect("probe");
            (meta.ctime(), meta.ctime_nsec())
        };
        let then = ctime();
        for _ in 0..500 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            if ctime() > then {
                return;
            }
        }
        panic!("the file system's clock did not move in 5 s");
    }

    /// A worktree stamped clean (as a pooled one handed to a builder) and
    /// changed: each folder whose stamp still holds is not listed.
    fn stamped(caches: &Caches, root: &Path, name: &str) -> (PathBuf, gix::Repository, ObjectId) {
        let dir = new_repo(root, name);
        seed(root, &dir, None);
        // Ignored files already there: in a tracked folder, in a folder of
        // their own inside a tracked one, and in an ignored folder.
        write(&dir, "a/b/old.log", b"ignored\n");
        write(&dir, "b/objs/x.log", b"ignored\n");
        write(&dir, "build/o", b"ignored\n");
        // And one ignored by a rule from outside the worktree.
        write(&dir, ".git/info/exclude", b"*.tmp\n");
        write(&dir, "a/b/old.tmp", b"ignored\n");
        let_the_clock_move(root);
        let (wt, head_tree) = open_at_head(root, &dir);
        crate::git::stamps::remember(caches, &wt, &dir, head_tree);
        (dir, wt, head_tree)
    }

    /// What `stage_all` and `git add -A` make of the worktree `dir`: trees.
    fn both_trees(
        caches: &Caches,
        root: &Path,
        dir: &Path,
        wt: &gix::Repository,
        head: ObjectId,
    ) -> (String, String) {
        let name = dir.file_name().expect("name").to_string_lossy();
        let theirs = copy_of(root, dir, &format!("{name}-git"));
        git(root, &theirs, &["add", "-A"]);
        let want = git(root, &theirs, &["write-tree"]).trim().to_owned();
        let ours = super::stage_all(caches, wt, head)
            .expect("stage")
            .expect("staged without git");
        (ours.to_string(), want)
    }

    /// Stamped folders skip no file `git add -A` adds: a file in a folder of
    /// ignored files inside an unchanged folder, files an edited or a new
    /// `.gitignore` no longer ignores, and random changes.
    #[test]
    fn stamped_folders_stage_as_git_adds() {
        let (_tmp, root) = scratch();
        let caches = Caches::default();
        type Case = (&'static str, fn(&Path));
        let cases: [Case; 5] = [
            ("in a folder of ignored files", |dir| {
                write(dir, "b/objs/new.txt", b"new\n")
            }),
            ("edited ignore rules", |dir| {
                write(dir, ".gitignore", b"!keep.log\nbuild/\n/tmp\n")
            }),
            ("a new ignore file", |dir| {
                write(dir, "a/.gitignore", b"!*.log\n")
            }),
            ("edited info/exclude", |dir| {
                write(dir, ".git/info/exclude", b"")
            }),
            ("a new folder", |dir| write(dir, "c/d/new.txt", b"new\n")),
        ];
        for (i, (what, change)) in cases.iter().enumerate() {
            let (dir, wt, head) = stamped(&caches, &root, &format!("case-{i}"));
            change(&dir);
            let (ours, want) = both_trees(&caches, &root, &dir, &wt, head);
            assert_eq!(ours, want, "{what}");
        }
        let mut rng = Rng(0x5a3b_0dd5_7a4d_e11a);
        for case in 0..24 {
            let (dir, wt, head) = stamped(&caches, &root, &format!("random-{case}"));
            let mut expect = Expect::default();
            for n in 0..1 + rng.below(6) as usize {
                mutate(&mut rng, &dir, n, &mut expect);
            }
            if expect.git_only {
                continue;
            }
            let (ours, want) = both_trees(&caches, &root, &dir, &wt, head);
            assert_eq!(ours, want, "random case {case}");
        }
    }

    /// Stamps vouch for the names tracked when they were taken: a file the
    /// builder untracked and committed as gone (its folder unchanged), or
    /// one a committed `.gitignore` edit no longer ignores, is found as
    /// `git add -A` finds it.
    #[test]
    fn stamps_vouch_only_for_what_was_tracked_and_ignored_when_taken() {
        let (_tmp, root) = scratch();
        let caches = Caches::default();
        type Case = (&'static str, fn(&Path, &Path));
        let cases: [Case; 2] = [
            ("untracked and committed as gone", |root, dir| {
                git(root, dir, &["rm", "-q", "--cached", "a/b/f3.txt"]);
            }),
            ("no longer ignored by a committed rule", |root, dir| {
                write(dir, ".gitignore", b"build/\n/tmp\n");
                git(root, dir, &["add", ".gitignore"]);
            }),
        ];
        for (i, (what, change)) in cases.iter().enumerate() {
            let (dir, _, _) = stamped(&caches, &root, &format!("case-{i}"));
            change(&root, &dir);
            git(&root, &dir, &["commit", "-q", "-m", "the builder's"]);
            let (wt, head) = open_at_head(&root, &dir);
            let (ours, want) = both_trees(&caches, &root, &dir, &wt, head);
            assert_eq!(ours, want, "{what}");
        }
    }

    /// A repository stamped clean with an untracked `a/before.txt` already
    /// there, against the stamps' premise: what they spare shows.
    fn stamped_over_an_untracked_file(root: &Path) -> (PathBuf, gix::Repository, Caches) {
        let dir = new_repo(root, "repo");
        seed(root, &dir, None);
        write(&dir, "a/before.txt", b"there before the stamps\n");
        let_the_clock_move(root);
        let (wt, head) = open_at_head(root, &dir);
        let caches = Caches::default();
        crate::git::stamps::remember(&caches, &wt, &dir, head);
        (dir, wt, caches)
    }

    /// What the stamps spare: a folder proved unchanged is not listed (an
    /// untracked file put there before the stamps, against their premise,
    /// stays out), and one that changed since is.
    #[test]
    fn a_folder_unchanged_since_its_stamp_is_not_listed() {
        let (_tmp, root) = scratch();
        let (dir, wt, caches) = stamped_over_an_untracked_file(&root);
        let index = crate::git::index_lock::read_index(&wt).expect("index");
        let stamps = crate::git::stamps::recorded(&caches, &dir).expect("stamped");
        let names = |stamps| super::unknown_names(&index, &dir, stamps).expect("names");
        assert_eq!(names(Some(&*stamps)), Vec::<BString>::new());
        assert_eq!(names(None), vec![BString::from("a/before.txt")]);
        // A name that came and went: the folder's stamp changed.
        write(&dir, "a/gone", b"x\n");
        std::fs::remove_file(dir.join("a/gone")).expect("rm");
        assert_eq!(names(Some(&*stamps)), vec![BString::from("a/before.txt")]);
        crate::git::stamps::forget(&caches, &dir);
        assert!(crate::git::stamps::recorded(&caches, &dir).is_none());
    }

    /// Stamps kept in a file serve another process as they served this
    /// one; a file another hasher wrote (its probe differs) or a garbled
    /// one serves nobody, and a file is read once.
    #[test]
    fn stamps_saved_for_another_process_spare_it_the_same_folders() {
        let (_tmp, root) = scratch();
        let (dir, wt, ours) = stamped_over_an_untracked_file(&root);
        let file = root.join("stamps");
        crate::git::stamps::save(&ours, &dir, &file);
        let saved = std::fs::read(&file).expect("saved");

        let index = crate::git::index_lock::read_index(&wt).expect("index");
        let theirs = Caches::default();
        crate::git::stamps::load(&theirs, &dir, &file);
        assert!(!file.exists(), "read once");
        let stamps = crate::git::stamps::recorded(&theirs, &dir).expect("loaded");
        assert_eq!(
            super::unknown_names(&index, &dir, Some(&*stamps)).expect("names"),
            Vec::<BString>::new()
        );

        let mut other_hasher: serde_json::Value = serde_json::from_slice(&saved).expect("json");
        other_hasher["probe"] = serde_json::json!(1);
        for (what, bytes) in [
            (
                "another hasher's",
                serde_json::to_vec(&other_hasher).expect("json"),
            ),
            ("garbled", b"{\"probe\":".to_vec()),
        ] {
            std::fs::write(&file, bytes).expect("write");
            let caches = Caches::default();
            crate::git::stamps::load(&caches, &dir, &file);
            assert!(
                crate::git::stamps::recorded(&caches, &dir).is_none(),
                "{what}"
            );
        }
    }
}

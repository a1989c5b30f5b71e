//! The folders of a worktree handed to a builder with no untracked file in
//! it (a pooled worktree just switched), stamped at that moment: a folder
//! whose stamp is unchanged when the leftovers are staged gained no name
//! since, so the search for untracked files need not list it.
//!
//! A name added to or removed from a folder gives it a new ctime, which no
//! process can set back. The stamps are trusted only when they are older
//! than a reference ctime the same file system gave the worktree's top just
//! before they were taken (git's racy-timestamp rule, whose reference is the
//! index file's time): a folder changed after that gets a later ctime
//! whatever the file system's clock granularity. A folder with any folder in it that is
//! not tracked (an ignored `target/`) is listed anyway: files can appear in
//! there without its own stamp changing. Its link count tells (2 plus its
//! subfolders), once the top's count proved that this file system keeps it.
//! Ignore rules from outside the worktree (`info/exclude`, the user's
//! excludes file) that changed since void the stamps: files they stop
//! ignoring may be anywhere.
//!
//! A stamp vouches for the names a folder holds, and those were the names
//! tracked there when it was taken (besides ignored files). So it counts
//! only while the index tracks the same names there, and the tree's
//! `.gitignore` files are the ones it had: a builder that untracks a file
//! and commits it as gone, or commits a rule that no longer ignores one,
//! leaves a file untracked in a folder whose stamp still holds.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gix::ObjectId;
use rustix::fd::AsFd;

use crate::git::stat::OpenFolders;
use crate::sys::caches::Caches;

/// What says whether names came or went in a folder.
#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
struct Stamp {
    dev: u64,
    ino: u64,
    nlink: u64,
    ctime: (i64, i64),
    mtime: (i64, i64),
}

impl Stamp {
    // The integer types of `struct stat` differ between platforms.
    #[allow(clippy::unnecessary_cast)]
    fn of(folder: impl AsFd) -> Option<Stamp> {
        let st = rustix::fs::fstat(folder).ok()?;
        Some(Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            nlink: st.st_nlink as u64,
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
        })
    }
}

/// What says a file changed, `None` when it is absent.
type FileStamp = Option<crate::sys::file_stamp::FileStamp>;

/// The files of ignore rules from outside the worktree `wt`: its
/// repository's `info/exclude` and the user's excludes file, as gix finds
/// them, each stamped.
fn outside_rules(wt: &gix::Repository) -> Vec<(PathBuf, FileStamp)> {
    let user = match wt.config_snapshot().trusted_path("core.excludesFile") {
        Ok(Some(path)) => Some(path),
        Ok(None) => gix::path::env::xdg_config("ignore", &mut |name| std::env::var_os(name)),
        // An unreadable value: whatever it becomes, it will differ.
        Err(_) => Some(PathBuf::new()),
    };
    std::iter::once(wt.common_dir().join("info").join("exclude"))
        .chain(user)
        .map(|path| {
            let stamp = crate::sys::file_stamp::FileStamp::of_path(&path);
            (path, stamp)
        })
        .collect()
}

/// The trusted stamps of one clean worktree, by folder (its path with a
/// trailing '/', the top's empty), each with the [`names_digest`] of the
/// names its tree tracked there; the ignore rules from outside it, and
/// the [`rules_digest`] of its tree's `.gitignore` files.
#[derive(Debug, Default)]
pub(crate) struct Stamps {
    folders: HashMap<Vec<u8>, (Stamp, u64)>,
    outside: Vec<(PathBuf, FileStamp)>,
    rules: u64,
}

impl Stamps {
    /// Are the ignore rules those of the stamps: from outside the worktree
    /// `wt`, and the `.gitignore` files `index` tracks?
    pub(crate) fn same_rules(&self, wt: &gix::Repository, index: &gix::index::State) -> bool {
        let tracked_rules = index
            .entries()
            .iter()
            .filter(|entry| is_ignore_rules(entry.path(index)))
            .map(|entry| rule_hash(entry.path(index), &entry.id));
        rules_digest(tracked_rules) == self.rules && outside_rules(wt) == self.outside
    }

    /// Has `folder` (open as `fd`) neither gained nor lost a name since it
    /// was stamped, holds no folder but its `tracked_subfolders`, and are
    /// the names tracked there now (their [`names_digest`], asked only
    /// then) the ones tracked when it was stamped?
    pub(crate) fn unchanged(
        &self,
        folder: &[u8],
        fd: impl AsFd,
        tracked_subfolders: usize,
        tracked_names: impl FnOnce() -> u64,
    ) -> bool {
        let Some((then, names)) = self.folders.get(folder) else {
            return false;
        };
        Stamp::of(fd).is_some_and(|now| now == *then && now.nlink == 2 + tracked_subfolders as u64)
            && tracked_names() == *names
    }
}

/// Is `path` a file of ignore rules? Asked of every index entry whenever
/// stamps are checked: a comparison of its end, no search.
pub(crate) fn is_ignore_rules(path: &gix::bstr::BStr) -> bool {
    const NAME: &[u8] = b".gitignore";
    path.ends_with(NAME) && (path.len() == NAME.len() || path[path.len() - NAME.len() - 1] == b'/')
}

/// A digest of a set of names, in any order: equal sets, equal digests
/// (and a different set a different one but by a 2^-64 chance).
pub(crate) fn names_digest<'a>(names: impl Iterator<Item = &'a [u8]>) -> u64 {
    names.map(name_hash).fold(0, u64::wrapping_add)
}

fn name_hash(name: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(name);
    hasher.finish()
}

/// [`names_digest`] for `.gitignore` files, each a [`rule_hash`].
fn rules_digest(hashes: impl Iterator<Item = u64>) -> u64 {
    hashes.fold(0, u64::wrapping_add)
}

fn rule_hash(path: &[u8], id: &gix::oid) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(path);
    hasher.write(id.as_bytes());
    hasher.finish()
}

/// The worktrees handed over clean, with their stamps (a [`Caches`] entry).
#[derive(Default)]
struct Clean(Mutex<Vec<(PathBuf, Arc<Stamps>)>>);

impl Clean {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(PathBuf, Arc<Stamps>)>> {
        // Push and remove only: a panic elsewhere cannot leave it half-edited.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The worktree `wt` at `dir`, whose files hold `tree` and which has no
/// untracked file, goes to a builder now: stamp the folders of `tree`.
/// Nothing is kept when the file system cannot prove what the stamps need.
pub(crate) fn remember(caches: &Caches, wt: &gix::Repository, dir: &Path, tree: ObjectId) {
    forget(caches, dir);
    let (Ok(top), Some(stamps)) = (dir.canonicalize(), stamp(caches, wt, dir, tree)) else {
        return;
    };
    caches.get::<Clean>().lock().push((top, Arc::new(stamps)));
}

/// Whatever was stamped of the worktree at `dir` no longer holds.
pub(crate) fn forget(caches: &Caches, dir: &Path) {
    let Ok(top) = dir.canonicalize() else {
        return;
    };
    caches
        .get::<Clean>()
        .lock()
        .retain(|(path, _)| *path != top);
}

/// The stamps of a worktree as a file, for the next process that takes it
/// (see [`save`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    /// The [`names_digest`] of a fixed name: a build whose hasher digests
    /// otherwise (another toolchain) could not compare the digests.
    probe: u64,
    rules: u64,
    outside: Vec<(PathBuf, FileStamp)>,
    /// Folders whose path is UTF-8 (any other is listed, as if it changed).
    folders: Vec<(String, Stamp, u64)>,
}

fn probe() -> u64 {
    name_hash(b"git-arbiter stamps")
}

/// Keep the stamps of the worktree at `dir` in `file` for another process
/// (none kept: no file). A stamp stays true evidence whenever it is read:
/// it was taken of a clean worktree, and vouches only for a folder whose
/// name list, device and inode have not changed since. Nothing is kept
/// when it cannot be written: the next take lists every folder.
pub(crate) fn save(caches: &Caches, dir: &Path, file: &Path) {
    let saved = recorded(caches, dir).map(|stamps| Saved {
        probe: probe(),
        rules: stamps.rules,
        outside: stamps.outside.clone(),
        folders: stamps
            .folders
            .iter()
            .filter_map(|(path, (stamp, names))| {
                Some((String::from_utf8(path.clone()).ok()?, *stamp, *names))
            })
            .collect(),
    });
    let written = saved.and_then(|saved| {
        let bytes = serde_json::to_vec(&saved).ok()?;
        let parent = file.parent()?;
        let mut tmp = tempfile::NamedTempFile::new_in(parent).ok()?;
        std::io::Write::write_all(&mut tmp, &bytes).ok()?;
        tmp.persist(file).ok()
    });
    if written.is_none() {
        let _ = std::fs::remove_file(file);
    }
}

/// The stamps [`save`] kept in `file` become those of the worktree at
/// `dir` in this process; the file is consumed.
pub(crate) fn load(caches: &Caches, dir: &Path, file: &Path) {
    let Ok(bytes) = std::fs::read(file) else {
        return;
    };
    let _ = std::fs::remove_file(file);
    let Ok(saved) = serde_json::from_slice::<Saved>(&bytes) else {
        return;
    };
    let Ok(top) = dir.canonicalize() else {
        return;
    };
    if saved.probe != probe() {
        return;
    }
    let stamps = Stamps {
        folders: saved
            .folders
            .into_iter()
            .map(|(path, stamp, names)| (path.into_bytes(), (stamp, names)))
            .collect(),
        outside: saved.outside,
        rules: saved.rules,
    };
    forget(caches, dir);
    caches.get::<Clean>().lock().push((top, Arc::new(stamps)));
}

/// The stamps of the worktree at `dir`, if it was handed over clean.
pub(crate) fn recorded(caches: &Caches, dir: &Path) -> Option<Arc<Stamps>> {
    let top = dir.canonicalize().ok()?;
    caches
        .get::<Clean>()
        .lock()
        .iter()
        .find(|(path, _)| *path == top)
        .map(|(_, stamps)| stamps.clone())
}

fn stamp(caches: &Caches, wt: &gix::Repository, dir: &Path, tree: ObjectId) -> Option<Stamps> {
    let mut open = OpenFolders::new(dir).ok()?;
    let top = open.get(b"")?;
    // Touching the top's access time gives it a ctime from the file
    // system's own clock: the reference every stamp must be older than.
    let now = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: rustix::fs::UTIME_NOW,
    };
    let omit = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: rustix::fs::UTIME_OMIT,
    };
    let times = rustix::fs::Timestamps {
        last_access: now,
        last_modification: omit,
    };
    rustix::fs::futimens(top, &times).ok()?;
    let reference = Stamp::of(top)?;
    if !keeps_link_counts(top, reference.nlink)? {
        return None;
    }
    let shape = shape_of(caches, wt, tree)?;
    let mut stamps = Stamps {
        outside: outside_rules(wt),
        rules: shape.rules,
        ..Stamps::default()
    };
    for (folder, names) in shape.folders.iter() {
        let Some(stamp) = open.get(folder).and_then(Stamp::of) else {
            continue;
        };
        if stamp.ctime < reference.ctime {
            stamps.folders.insert(folder.clone(), (stamp, *names));
        }
    }
    Some(stamps)
}

/// The shape of the last tree asked for (a [`Caches`] entry): the orders
/// of a batch share a base, and at 50,000 files reading its trees costs
/// more than the stamps.
#[derive(Default)]
struct LastTree(Mutex<Option<(ObjectId, Arc<Shape>)>>);

/// What of a tree the stamps need.
#[derive(Default)]
struct Shape {
    /// Each folder's path with a trailing '/' (the top's empty), before
    /// the folders in it, with the [`names_digest`] of its entries.
    folders: Vec<(Vec<u8>, u64)>,
    /// The [`rules_digest`] of its `.gitignore` files.
    rules: u64,
}

fn shape_of(caches: &Caches, repo: &gix::Repository, tree: ObjectId) -> Option<Arc<Shape>> {
    let last_tree = caches.get::<LastTree>();
    let mut last = last_tree.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((id, shape)) = last.as_ref() {
        if *id == tree {
            return Some(shape.clone());
        }
    }
    let mut shape = Shape::default();
    let mut rules = Vec::new();
    tracked_folders(repo, tree, &mut Vec::new(), &mut shape.folders, &mut rules)?;
    shape.rules = rules_digest(rules.into_iter());
    let shape = Arc::new(shape);
    *last = Some((tree, shape.clone()));
    Some(shape)
}

/// Does the folder `top`, with link count `nlink`, count 2 plus its
/// subfolders, and have one (a file system that reports a fixed count, as
/// some network and FUSE ones do, cannot say what a folder holds)?
fn keeps_link_counts(top: impl AsFd, nlink: u64) -> Option<bool> {
    use rustix::fs::{AtFlags, FileType};
    let mut subfolders = 0;
    for entry in rustix::fs::Dir::read_from(&top).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => {
                let st =
                    rustix::fs::statat(&top, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
                FileType::from_raw_mode(st.st_mode)
            }
            kind => kind,
        };
        if kind == FileType::Directory {
            subfolders += 1;
        }
    }
    Some(subfolders > 0 && nlink == 2 + subfolders)
}

/// Each folder of `tree` (at `prefix`, with a trailing '/') before the
/// folders in it, with the digest of its names; submodules are not folders
/// of ours. The [`rule_hash`] of each `.gitignore` goes to `rules`.
fn tracked_folders(
    repo: &gix::Repository,
    tree: ObjectId,
    prefix: &mut Vec<u8>,
    out: &mut Vec<(Vec<u8>, u64)>,
    rules: &mut Vec<u64>,
) -> Option<()> {
    let at = out.len();
    out.push((prefix.clone(), 0));
    let tree = repo.find_tree(tree).ok()?;
    let mut names = 0u64;
    for entry in tree.iter() {
        let entry = entry.ok()?;
        names = names.wrapping_add(name_hash(entry.filename()));
        let len = prefix.len();
        prefix.extend_from_slice(entry.filename());
        if entry.mode().is_tree() {
            prefix.push(b'/');
            tracked_folders(repo, entry.object_id(), prefix, out, rules)?;
        } else if entry.filename() == ".gitignore" && entry.mode().is_blob() {
            rules.push(rule_hash(prefix, entry.oid()));
        }
        prefix.truncate(len);
    }
    out[at].1 = names;
    Some(())
}

#[cfg(test)]
mod tests {
    use gix::bstr::BStr;

    #[test]
    fn ignore_rules_are_files_named_gitignore_anywhere() {
        let is = |path: &str| super::is_ignore_rules(BStr::new(path));
        assert!(is(".gitignore") && is("a/.gitignore") && is("a/b/.gitignore"));
        assert!(!is("a.gitignore") && !is("a/my.gitignore") && !is(".gitignore/x"));
        assert!(!is("gitignore") && !is(""));
    }

    #[test]
    fn a_names_digest_is_that_of_the_set() {
        let digest = |names: &[&str]| super::names_digest(names.iter().map(|n| n.as_bytes()));
        assert_eq!(digest(&["a", "b", "c"]), digest(&["c", "a", "b"]));
        assert_ne!(digest(&["a", "b"]), digest(&["a", "b", "c"]));
        assert_ne!(digest(&["a", "b"]), digest(&["a", "c"]));
    }
}

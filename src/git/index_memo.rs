//! Which tree an index holds: proved by one walk of the tree against the
//! sorted entries, and remembered by the index file's checksum (in this
//! process, and in a memo beside the index for the next), since a landing
//! asks it of the same index again and again.

use gix::bstr::ByteSlice;
use gix::ObjectId;

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use crate::sys::caches::Caches;
use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading tree {tree}: {source}")]
    ReadTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading tree {tree}: {source}")]
    DecodeTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading tree {tree}: {source}")]
    TreeIndex {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
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
/// each time is a waste: the same checksum is the same content. A
/// [`Caches`] entry.
#[derive(Default)]
struct Holds(Mutex<VecDeque<(ObjectId, ObjectId)>>);

impl Holds {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(ObjectId, ObjectId)>> {
        // Push and pop only: a panic elsewhere cannot leave it half-edited.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn known_to_hold(caches: &Caches, checksum: ObjectId, tree: ObjectId) -> bool {
    caches.get::<Holds>().lock().contains(&(checksum, tree))
}

pub(crate) fn remember_holds(caches: &Caches, checksum: ObjectId, tree: ObjectId) {
    // An index written without its hash (`index.skipHash`) ends in zeros.
    if checksum.is_null() {
        return;
    }
    let holds = caches.get::<Holds>();
    let mut known = holds.lock();
    if known.len() >= 64 {
        known.pop_front();
    }
    known.push_back((checksum, tree));
}

/// [`remember_holds`], and on disk beside `wt`'s index for the next process:
/// proving it again costs a walk of the whole tree (milliseconds at 5,000
/// files, tens at 50,000) at the start of every run. Speed only: a memo
/// that cannot be written is not needed.
pub(crate) fn remember_holds_of(
    caches: &Caches,
    wt: &gix::Repository,
    checksum: ObjectId,
    tree: ObjectId,
) {
    use std::io::Write;
    remember_holds(caches, checksum, tree);
    if checksum.is_null() || recorded_to_hold(wt, checksum, tree) {
        return;
    }
    let path = crate::git::layout::index_tree_memo(wt.git_dir());
    let _ = tempfile::NamedTempFile::new_in(wt.git_dir()).and_then(|mut file| {
        writeln!(file, "{checksum} {tree}")?;
        file.persist(&path).map_err(|e| e.error)
    });
}

/// Does the memo beside `wt`'s index say the index ending in `checksum`
/// holds `tree`?
fn recorded_to_hold(wt: &gix::Repository, checksum: ObjectId, tree: ObjectId) -> bool {
    std::fs::read_to_string(crate::git::layout::index_tree_memo(wt.git_dir()))
        .is_ok_and(|memo| memo.trim_end() == format!("{checksum} {tree}"))
}

/// [`index_equals_tree`] for an index file, remembered by its checksum.
pub(crate) fn holds(
    caches: &Caches,
    repo: &gix::Repository,
    index: &gix::index::File,
    tree: ObjectId,
) -> Result<bool> {
    holds_state(caches, repo, index, index.checksum(), tree)
}

/// [`holds`] for an index read as `state`, its file's checksum `checksum`.
pub(crate) fn holds_state(
    caches: &Caches,
    repo: &gix::Repository,
    index: &gix::index::State,
    checksum: Option<ObjectId>,
    tree: ObjectId,
) -> Result<bool> {
    let checksum = checksum.filter(|c| !c.is_null());
    if checksum.is_some_and(|c| known_to_hold(caches, c, tree)) {
        return Ok(true);
    }
    if let Some(checksum) = checksum.filter(|c| recorded_to_hold(repo, *c, tree)) {
        remember_holds(caches, checksum, tree);
        return Ok(true);
    }
    let equal = index_equals_tree(repo, index, tree)?;
    if let (true, Some(checksum)) = (equal, checksum) {
        remember_holds_of(caches, repo, checksum, tree);
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
            .map_err(|source| Error::ReadTree { tree, source })?;
        for entry in tree.iter() {
            let entry = entry
                .map_err(|source| Error::DecodeTree {
                    tree: tree.id,
                    source,
                })?
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
pub(crate) fn flat_tree(
    repo: &gix::Repository,
    tree: ObjectId,
) -> Result<std::collections::BTreeMap<Vec<u8>, (gix::objs::tree::EntryMode, ObjectId)>> {
    let index = repo
        .index_from_tree(&tree)
        .map_err(|source| Error::TreeIndex { tree, source })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{git, new_repo, scratch};

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
        let index = crate::git::index_lock::read_index(&wt).expect("index");
        let caches = Caches::default();
        assert!(holds(&caches, &wt, &index, tree).expect("holds"));
        let memo = crate::git::layout::index_tree_memo(wt.git_dir());
        let checksum = index.checksum().expect("checksum");
        assert_eq!(
            std::fs::read_to_string(&memo).expect("memo"),
            format!("{checksum} {tree}\n")
        );
        assert!(recorded_to_hold(&wt, checksum, tree));

        std::fs::write(dir.join("a.txt"), "two\n").expect("write");
        git(&root, &dir, &["add", "a.txt"]);
        let staged = crate::git::index_lock::read_index(&wt).expect("index");
        assert!(
            !holds(&Caches::default(), &wt, &staged, tree).expect("holds"),
            "a staged change was taken for HEAD's tree"
        );
    }
}

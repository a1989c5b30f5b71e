//! git's split index (gitformat-index(5), "Split index") for the pool's
//! worktrees. The index file holds only the entries that differ from a
//! shared index, `<git-dir>/sharedindex.<checksum>`, so switching a pooled
//! worktree to another base writes a few entries instead of the whole index
//! (4 MB at 50,000 files, with its checksum). git reads such an index and,
//! with `core.splitIndex` unset, keeps it split when it writes it again (a
//! builder's `git add`); `core.splitIndex=false` turns it off here as there.
//!
//! Only a worktree marked by [`enable`] (the pool's) is written this way:
//! git-arbiter then owns the shared index files in its git dir and removes
//! the ones its index no longer names. A user's own checkout is never split
//! by git-arbiter.

use std::path::Path;

use gix::bstr::BStr;
use gix::index::entry::Stage;
use gix::index::Entry;
use gix::ObjectId;

use crate::error::{Error, GitContext, Result};

/// In a worktree's git dir: git-arbiter keeps its index split.
const MARKER: &str = "arbiter-split-index";

/// git's default `splitIndex.maxPercentChange`: once more entries than this
/// share of the index live in the split file, a new shared index is written.
const MAX_PERCENT_CHANGE: u8 = 20;

/// `splitIndex.maxPercentChange` as git reads it: 0 to 100, else the default.
pub(crate) fn max_percent_change(wt: &gix::Repository) -> u8 {
    wt.config_snapshot()
        .integer("splitIndex.maxPercentChange")
        .and_then(|p| u8::try_from(p).ok())
        .filter(|p| *p <= 100)
        .unwrap_or(MAX_PERCENT_CHANGE)
}

/// Mark `wt` as one whose index git-arbiter keeps split.
pub(crate) fn enable(wt: &gix::Repository) -> Result<()> {
    let marker = wt.git_dir().join(MARKER);
    std::fs::write(&marker, b"").map_err(Error::io(format!("writing {}", marker.display())))
}

/// Was `wt` marked by [`enable`]: the shared index files in its git dir are ours.
pub(crate) fn owned(wt: &gix::Repository) -> bool {
    wt.git_dir().join(MARKER).exists()
}

/// Is `wt`'s index to be written split: marked by [`enable`], and not
/// turned off by `core.splitIndex=false`.
pub(crate) fn wanted(wt: &gix::Repository) -> bool {
    owned(wt) && wt.config_snapshot().boolean("core.splitIndex") != Some(false)
}

/// A split index as read: the shared index, which of its entries are gone,
/// and the entries the split file adds (git's replacements among them).
pub(crate) struct Split {
    pub shared: gix::index::File,
    /// One flag per entry of `shared`.
    pub deleted: Vec<bool>,
    /// Sorted; no path of theirs is also a live entry of `shared`.
    pub added: gix::index::State,
    /// The split file's checksum, which names the whole index.
    pub checksum: Option<ObjectId>,
    /// The split file's modification time, which tells racily clean entries.
    pub timestamp: filetime::FileTime,
    /// The split file has an extension this reading drops (an untracked
    /// cache, a file system monitor's token, sparse folders).
    pub extended: bool,
}

impl Split {
    /// The stage-0 entry at `path`, wherever it lives.
    pub fn entry(&self, path: &BStr) -> Option<&Entry> {
        self.added
            .entry_by_path_and_stage(path, Stage::Unconflicted)
            .or_else(|| self.shared_at(path).map(|i| &self.shared.entries()[i]))
    }

    /// The position in the shared index of the live stage-0 entry at `path`.
    pub fn shared_at(&self, path: &BStr) -> Option<usize> {
        self.shared
            .entry_index_by_path_and_stage(path, Stage::Unconflicted)
            .filter(|&i| !self.deleted[i])
    }

    /// Is any live entry below the folder `dir` (given with its trailing `/`)?
    pub fn has_under(&self, dir: &BStr) -> bool {
        let live_shared = self
            .shared
            .prefixed_entries_range(dir)
            .is_some_and(|range| range.into_iter().any(|i| !self.deleted[i]));
        live_shared
            || self
                .added
                .prefixed_entries(dir)
                .is_some_and(|entries| !entries.is_empty())
    }

    /// Every live entry with its path (the shared ones first).
    pub fn entries(&self) -> impl Iterator<Item = (&Entry, &BStr)> {
        let shared = self
            .shared
            .entries()
            .iter()
            .zip(&self.deleted)
            .filter(|(_, gone)| !**gone)
            .map(|(e, _)| (e, e.path(&self.shared)));
        let added = self
            .added
            .entries()
            .iter()
            .map(|e| (e, e.path(&self.added)));
        shared.chain(added)
    }

    /// Too many entries in the split file for `max_percent` (git's
    /// `splitIndex.maxPercentChange`): a new shared index is due.
    pub fn too_many_added(&self, max_percent: u8) -> bool {
        let live = self.deleted.iter().filter(|gone| !**gone).count() + self.added.entries().len();
        match max_percent {
            0 => true,
            100 => false,
            p => self.added.entries().len() * 100 > live * usize::from(p),
        }
    }

    /// The whole index these describe, as one state, with the split file's
    /// time (for a new shared index, or to read it as one).
    pub fn merged(&self) -> gix::index::State {
        let mut state = gix::index::State::new(self.shared.object_hash());
        for (e, path) in self.entries() {
            state.dangerously_push_entry(e.stat, e.id, e.flags, e.mode, path);
        }
        state.sort_entries();
        state.set_timestamp(self.timestamp);
        state
    }

    /// The checksum of the shared index, which names its file.
    pub fn shared_checksum(&self) -> Option<ObjectId> {
        self.shared.checksum()
    }
}

/// `wt`'s index as a split index, when git-arbiter keeps it split and it is
/// one; `None` otherwise (the caller reads it as usual). The checksums are
/// not verified, as git does not outside `git fsck`; the shared index must
/// be the one the split file names.
pub(crate) fn read(wt: &gix::Repository) -> Result<Option<Split>> {
    if !wanted(wt) {
        return Ok(None);
    }
    let path = wt.index_path();
    let context = || format!("reading the index {}", path.display());
    let data = match std::fs::read(&path) {
        Ok(data) => data,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(context())(e)),
    };
    let mtime = filetime::FileTime::from_last_modification_time(
        &std::fs::metadata(&path).map_err(Error::io(context()))?,
    );
    let (file, checksum) = gix::index::State::from_bytes(
        &data,
        mtime,
        wt.object_hash(),
        gix::index::decode::Options::default(),
    )
    .git_context(context())?;
    let Some(link) = file.link() else {
        return Ok(None);
    };
    let shared = gix::index::File::at(
        wt.git_dir()
            .join(format!("sharedindex.{}", link.shared_index_checksum)),
        wt.object_hash(),
        true,
        gix::index::decode::Options {
            expected_checksum: Some(link.shared_index_checksum),
            ..Default::default()
        },
    )
    .git_context(context())?;
    let mut deleted = vec![false; shared.entries().len()];
    let mut added = gix::index::State::new(wt.object_hash());
    let corrupt = || {
        Error::from(crate::error::InputError::new(format!(
            "{}: its link extension does not fit its shared index",
            path.display()
        )))
    };
    // git copies an entry it wrote in the same second as its file (racily
    // clean) into the split file unchanged: such a copy is the shared entry.
    let copy = |old: &Entry, new: &Entry| {
        (old.id, old.mode, old.stat, old.flags) == (new.id, new.mode, new.stat, new.flags)
    };
    let mut replaced = 0;
    if let Some(bitmaps) = &link.bitmaps {
        // git's replacements: the first entries of the split file, in the
        // order of the bits, each taking the path of the entry it replaces.
        let mut fits = true;
        bitmaps.replace.for_each_set_bit(|i| {
            match (shared.entries().get(i), file.entries().get(replaced)) {
                (Some(old), Some(new)) => {
                    if !copy(old, new) {
                        deleted[i] = true;
                        added.dangerously_push_entry(
                            new.stat,
                            new.id,
                            new.flags,
                            new.mode,
                            old.path(&shared),
                        );
                    }
                    replaced += 1;
                    Some(())
                }
                _ => {
                    fits = false;
                    None
                }
            }
        });
        bitmaps
            .delete
            .for_each_set_bit(|i| match deleted.get_mut(i) {
                Some(gone) => {
                    *gone = true;
                    Some(())
                }
                None => {
                    fits = false;
                    None
                }
            });
        if !fits {
            return Err(corrupt());
        }
    }
    // The other entries are added; one at the path and stage of a shared
    // entry takes its place.
    for e in file.entries().iter().skip(replaced) {
        let path = e.path(&file);
        match shared.entry_index_by_path_and_stage(path, e.stage()) {
            Some(i) if copy(&shared.entries()[i], e) => deleted[i] = false,
            found => {
                if let Some(i) = found {
                    deleted[i] = true;
                }
                added.dangerously_push_entry(e.stat, e.id, e.flags, e.mode, path);
            }
        }
    }
    added.sort_entries();
    let extended = file.untracked().is_some() || file.fs_monitor().is_some() || file.is_sparse();
    Ok(Some(Split {
        shared,
        deleted,
        added,
        checksum,
        timestamp: mtime,
        extended,
    }))
}

/// The bytes of an index file holding `state`'s entries, then the `link`
/// extension when given (a split file), without the trailing checksum.
fn serialize(state: &gix::index::State, link: Option<&[u8]>) -> Result<Vec<u8>> {
    let mut data = Vec::with_capacity(state.entries().len() * 80 + 4096);
    state
        .write_to(
            &mut data,
            gix::index::write::Options {
                extensions: gix::index::write::Extensions::None,
                ..Default::default()
            },
        )
        .git_context("writing an index")?;
    if let Some(link) = link {
        let size = u32::try_from(link.len()).map_err(|_| {
            crate::error::InputError::new("the link extension of a split index is too large")
        })?;
        data.extend_from_slice(b"link");
        data.extend_from_slice(&size.to_be_bytes());
        data.extend_from_slice(link);
    }
    Ok(data)
}

/// The bytes of a split file: `added`'s entries and a link to the shared
/// index `shared` whose entries flagged in `deleted` are gone.
pub(crate) fn split_file(
    added: &gix::index::State,
    shared: ObjectId,
    deleted: &[bool],
) -> Result<Vec<u8>> {
    let bitmap = |bits: &[bool]| -> Result<Vec<u8>> {
        let mut out = Vec::new();
        gix_bitmap::ewah::Vec::from_bits(bits)
            .ok_or_else(|| {
                crate::error::InputError::new("an index of more than 4 billion entries")
            })?
            .write_to(&mut out)
            .map_err(Error::io("encoding a split index bitmap"))?;
        Ok(out)
    };
    // Trailing zeros say nothing: git writes an empty bitmap as zero bits.
    let used = deleted.iter().rposition(|gone| *gone).map_or(0, |i| i + 1);
    let mut link = shared.as_slice().to_vec();
    link.extend(bitmap(&deleted[..used])?);
    link.extend(bitmap(&[])?);
    serialize(added, Some(&link))
}

/// Write `state` as the shared index `<git_dir>/sharedindex.<checksum>`
/// (unless it is there already) and return its checksum.
pub(crate) fn write_shared(git_dir: &Path, state: &gix::index::State) -> Result<ObjectId> {
    let mut data = serialize(state, None)?;
    let checksum = checksum_of(state.object_hash(), &data)?;
    let path = git_dir.join(format!("sharedindex.{checksum}"));
    if path.exists() {
        return Ok(checksum);
    }
    let context = || format!("writing {}", path.display());
    data.extend_from_slice(checksum.as_slice());
    // Readable as git makes it (0666 less the umask), not only by its owner.
    let mut tmp = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(git_dir)
        .map_err(Error::io(context()))?;
    std::io::Write::write_all(&mut tmp, &data).map_err(Error::io(context()))?;
    tmp.persist(&path)
        .map_err(|e| Error::io(context())(e.error))?;
    Ok(checksum)
}

/// The checksum git writes at the end of an index file holding `data`.
pub(crate) fn checksum_of(hash: gix::hash::Kind, data: &[u8]) -> Result<ObjectId> {
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(data);
    hasher.try_finalize().git_context("hashing an index")
}

/// Remove every shared index in `git_dir` but `keep` (the one the index
/// names now): left by an earlier write, by a killed one, or by git.
pub(crate) fn remove_stale(git_dir: &Path, keep: Option<ObjectId>) {
    let keep = keep.map(|keep| format!("sharedindex.{keep}"));
    let Ok(dir) = std::fs::read_dir(git_dir) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let name = name.as_encoded_bytes();
        if name.starts_with(b"sharedindex.") && keep.as_ref().is_none_or(|k| name != k.as_bytes()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use crate::testutil::{git, new_repo, scratch};

    /// An empty repository `<root>/repo`.
    type Row = (String, gix::ObjectId, u32, gix::index::entry::Stat);

    fn rows<'a>(
        entries: impl Iterator<Item = (&'a gix::index::Entry, &'a gix::bstr::BStr)>,
    ) -> Vec<Row> {
        let mut rows: Vec<Row> = entries
            .map(|(e, path)| (path.to_string(), e.id, e.mode.bits(), e.stat))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    /// A split index as git writes it (a replaced entry, a deleted one, an
    /// added one, and an unchanged one git copied because it is racily
    /// clean) reads as the same entries gix finds by dissolving it, and only
    /// the real changes count as added.
    #[test]
    fn a_split_index_git_wrote_reads_as_the_whole_index() {
        let (_tmp, root) = scratch();
        let (root, dir) = (root.as_path(), &new_repo(&root, "repo"));
        let git = |dir: &std::path::Path, args: &[&str]| git(root, dir, args);
        for name in ["a", "b", "c", "d", "e"] {
            std::fs::write(dir.join(name), format!("{name}\n")).expect("write");
        }
        // A file dated after the index is racily clean whenever git writes
        // the index: git copies its unchanged entry into the split file.
        let touched = Command::new("touch")
            .args(["-d", "+1 hour", "d"])
            .current_dir(dir)
            .status()
            .expect("touch");
        assert!(touched.success());
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", "five"]);
        git(dir, &["update-index", "--split-index"]);
        std::fs::write(dir.join("b"), "b, changed\n").expect("write");
        std::fs::write(dir.join("f"), "f\n").expect("write");
        git(dir, &["add", "b", "f"]);
        git(dir, &["rm", "-q", "c"]);
        let index = std::fs::read(dir.join(".git/index")).expect("index");
        assert!(index.windows(4).any(|w| w == b"link"), "git kept it split");
        let in_split_file = u32::from_be_bytes(index[8..12].try_into().expect("count"));

        let repo = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
        super::enable(&repo).expect("mark");
        let split = super::read(&repo).expect("read").expect("split");
        let whole = repo.open_index().expect("gix reads it whole");
        assert_eq!(
            rows(split.entries()),
            rows(whole.entries().iter().map(|e| (e, e.path(&whole)))),
            "the same entries, stat data included"
        );
        let added: Vec<String> = split
            .added
            .entries()
            .iter()
            .map(|e| e.path(&split.added).to_string())
            .collect();
        assert_eq!(added, ["b", "f"], "the racy copy of d is the shared entry");
        assert!(
            in_split_file >= 3,
            "git copied d too: {in_split_file} entries"
        );
        assert!(!split.too_many_added(100));
        assert!(split.too_many_added(0));
        assert!(split.too_many_added(20), "2 of 5 entries");
        assert!(!split.too_many_added(40));
    }

    /// A link whose bitmap names more entries than its shared index has is
    /// an error (the pool then resets the worktree), never a wrong view.
    #[test]
    fn a_link_that_does_not_fit_its_shared_index_is_refused() {
        let (_tmp, root) = scratch();
        let (root, dir) = (root.as_path(), &new_repo(&root, "repo"));
        std::fs::write(dir.join("a"), "a\n").expect("write");
        git(root, dir, &["add", "a"]);
        let repo = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
        let whole = repo.open_index().expect("index");
        let shared = super::write_shared(repo.git_dir(), &whole).expect("shared");
        let empty = gix::index::State::new(repo.object_hash());
        let mut data = super::split_file(&empty, shared, &[false, false, true]).expect("split");
        let sum = super::checksum_of(repo.object_hash(), &data).expect("sum");
        data.extend_from_slice(sum.as_slice());
        std::fs::write(repo.index_path(), data).expect("write");
        super::enable(&repo).expect("mark");
        assert!(
            super::read(&repo).is_err(),
            "a bitmap past the shared index was accepted"
        );
        // The same link within bounds reads.
        let mut data = super::split_file(&empty, shared, &[true]).expect("split");
        let sum = super::checksum_of(repo.object_hash(), &data).expect("sum");
        data.extend_from_slice(sum.as_slice());
        std::fs::write(repo.index_path(), data).expect("write");
        let split = super::read(&repo).expect("read").expect("split");
        assert_eq!(split.entries().count(), 0, "its one entry is deleted");
    }
}

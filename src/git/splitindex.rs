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

use std::path::{Path, PathBuf};

use gix::bstr::{BStr, ByteSlice};
use gix::index::entry::stat::Time;
use gix::index::entry::{Flags, Mode, Stage, Stat};
use gix::index::Entry;
use gix::ObjectId;

use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The marker that says git-arbiter keeps a worktree's index split.
    #[error("writing {}: {source}", marker.display())]
    WriteMarker {
        marker: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the shared index {}: {source}", path.display())]
    ReadShared {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the index {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing an index: {source}")]
    Serialize {
        #[source]
        source: gix::Error,
    },
    #[error("encoding a split index bitmap: {source}")]
    Bitmap {
        #[source]
        source: std::io::Error,
    },
    #[error("writing {}: {source}", path.display())]
    WriteShared {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("hashing an index: {source}")]
    Hash {
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

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
    std::fs::write(&marker, b"").map_err(|source| Error::WriteMarker { marker, source }.into())
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

/// One entry's data as the index holds it; its path is kept apart.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct Fields {
    pub stat: Stat,
    pub id: ObjectId,
    pub flags: Flags,
    pub mode: Mode,
}

impl Fields {
    pub fn of(e: &Entry) -> Self {
        Fields {
            stat: e.stat,
            id: e.id,
            flags: e.flags,
            mode: e.mode,
        }
    }
}

/// An index file read in place: mapped, each entry found by where it
/// starts and decoded only when asked for. A switch looks up a few of the
/// shared index's paths; decoding every entry (gix's `File::at`) cost ~2 ms
/// and 5 MB allocated and given back per take at 50,000 files, and a split
/// file git wrote while every file was racily clean holds a copy of each.
pub(crate) struct Mapped {
    data: memmap2::Mmap,
    /// Where each entry starts in `data`.
    starts: Vec<u32>,
    /// Where the extensions start.
    entries_end: usize,
    /// The positions of the `.gitattributes` files, which every checkout
    /// needs (found while the entries are, not by another pass).
    attributes: Vec<usize>,
    hash: gix::hash::Kind,
    /// The checksum at the file's end.
    checksum: ObjectId,
}

impl Mapped {
    /// The index file at `path` and its metadata; `None` when its layout is
    /// not read in place.
    fn open(
        path: &Path,
        hash: gix::hash::Kind,
    ) -> std::io::Result<(Option<Self>, std::fs::Metadata)> {
        let file = std::fs::File::open(path)?;
        let metadata = file.metadata()?;
        // SAFETY: index files are never written in place: git and
        // git-arbiter write a new file and rename it over the old one.
        let map = unsafe { memmap2::Mmap::map(&file) }?;
        Ok((Self::new(map, hash), metadata))
    }

    fn new(data: memmap2::Mmap, hash: gix::hash::Kind) -> Option<Self> {
        let Layout {
            starts,
            entries_end,
            attributes,
        } = entry_starts(&data, hash.len_in_bytes())?;
        let checksum = ObjectId::from_bytes_or_panic(&data[data.len() - hash.len_in_bytes()..]);
        Some(Mapped {
            data,
            starts,
            entries_end,
            attributes,
            hash,
            checksum,
        })
    }

    fn bytes(&self) -> &[u8] {
        &self.data
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn object_hash(&self) -> gix::hash::Kind {
        self.hash
    }

    pub fn checksum(&self) -> ObjectId {
        self.checksum
    }

    /// Each extension's signature and content, in order; `None` when they
    /// do not fill the space between the entries and the checksum.
    fn extensions(&self) -> Option<Vec<(&[u8], &[u8])>> {
        let data = &self.bytes()[..self.bytes().len() - self.hash.len_in_bytes()];
        let mut at = self.entries_end;
        let mut out = Vec::new();
        while at < data.len() {
            let signature = data.get(at..at + 4)?;
            let size = u32::from_be_bytes(data.get(at + 4..at + 8)?.try_into().ok()?);
            let content = data.get(at + 8..(at + 8).checked_add(usize::try_from(size).ok()?)?)?;
            out.push((signature, content));
            at += 8 + content.len();
        }
        Some(out)
    }

    /// The at-rest flags of entry `i` and where its path starts.
    fn flags_at(&self, i: usize) -> (u16, usize) {
        let data = self.bytes();
        let at = self.starts[i] as usize + 40 + self.hash.len_in_bytes();
        let flags = u16::from_be_bytes([data[at], data[at + 1]]);
        let path = at + if flags & EXTENDED != 0 { 4 } else { 2 };
        (flags, path)
    }

    pub fn path(&self, i: usize) -> &BStr {
        let data = self.bytes();
        let (flags, start) = self.flags_at(i);
        path_of(data, flags, start).unwrap_or_default().as_bstr()
    }

    fn stage(&self, i: usize) -> u16 {
        (self.flags_at(i).0 & STAGE_MASK) >> 12
    }

    pub fn fields(&self, i: usize) -> Fields {
        let data = self.bytes();
        let start = self.starts[i] as usize;
        let word = |n: usize| {
            let at = start + 4 * n;
            u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
        };
        let (at_rest, path) = self.flags_at(i);
        let mut flags = Flags::from_bits_retain(u32::from(at_rest));
        if at_rest & EXTENDED != 0 {
            let extended = u16::from_be_bytes([data[path - 2], data[path - 1]]);
            flags |= Flags::from_bits_retain(u32::from(extended) << 16);
        }
        let id_at = start + 40;
        Fields {
            stat: Stat {
                ctime: Time {
                    secs: word(0),
                    nsecs: word(1),
                },
                mtime: Time {
                    secs: word(2),
                    nsecs: word(3),
                },
                dev: word(4),
                ino: word(5),
                uid: word(7),
                gid: word(8),
                size: word(9),
            },
            id: ObjectId::from_bytes_or_panic(&data[id_at..id_at + self.hash.len_in_bytes()]),
            flags: flags & !Flags::PATH_LEN,
            mode: Mode::from_bits_truncate(word(6)),
        }
    }

    /// The position of the entry at `path` and `stage`, as the index sorts
    /// them: by path, then by stage.
    pub fn find(&self, path: &BStr, stage: Stage) -> Option<usize> {
        let stage = stage as u16;
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.path(mid).cmp(path).then(self.stage(mid).cmp(&stage)) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Do entry `i` and entry `j` of `other` hold the same data (paths
    /// aside)? Compared as stored: stat data, id, then the flags.
    fn same_as(&self, i: usize, other: &Mapped, j: usize) -> bool {
        let fixed = 40 + self.hash.len_in_bytes();
        let (a, b) = (self.starts[i] as usize, other.starts[j] as usize);
        let ((flags_a, path_a), (flags_b, path_b)) = (self.flags_at(i), other.flags_at(j));
        self.bytes()[a..a + fixed] == other.bytes()[b..b + fixed]
            && flags_a & !PATH_LEN == flags_b & !PATH_LEN
            && self.bytes()[a + fixed + 2..path_a] == other.bytes()[b + fixed + 2..path_b]
    }

    /// Is entry `i` the one at `path` and `stage`?
    fn is_at(&self, i: usize, path: &BStr, stage: Stage) -> bool {
        self.stage(i) == stage as u16 && self.path(i) == path
    }

    /// The positions of the entries whose paths start with `prefix`.
    pub fn prefixed(&self, prefix: &BStr) -> std::ops::Range<usize> {
        let first = self.partition_from(0, |p| p < prefix);
        let end = self.partition_from(first, |p| p.starts_with(prefix));
        first..end
    }

    /// The first position from `from` on whose path `before` rejects (they
    /// are sorted so that `before` accepts a leading run).
    fn partition_from(&self, from: usize, before: impl Fn(&BStr) -> bool) -> usize {
        let (mut lo, mut hi) = (from, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(self.path(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// The shared index at `path`, which a split file names by `checksum`;
/// `None` when its layout is not read in place.
fn shared_at(path: &Path, hash: gix::hash::Kind, checksum: ObjectId) -> Result<Option<Mapped>> {
    let (mapped, _) = Mapped::open(path, hash).map_err(|source| Error::ReadShared {
        path: path.to_owned(),
        source,
    })?;
    let Some(mapped) = mapped else {
        return Ok(None);
    };
    // A null checksum is git's `index.skipHash`: nothing to compare.
    if mapped.checksum() != checksum && !mapped.checksum().is_null() {
        return Err(InputError::new(format!(
            "{}: its checksum is not the one its split index names",
            path.display()
        ))
        .into());
    }
    Ok(Some(mapped))
}

/// At-rest flag bits (gitformat-index(5)).
const EXTENDED: u16 = 0x4000;
const STAGE_MASK: u16 = 0x3000;
const PATH_LEN: u16 = 0x0fff;

/// The path that starts at `start` of an entry with at-rest `flags`.
fn path_of(data: &[u8], flags: u16, start: usize) -> Option<&[u8]> {
    let rest = data.get(start..)?;
    let len = match flags & PATH_LEN {
        PATH_LEN => rest.iter().position(|&b| b == 0)?,
        len => usize::from(len),
    };
    rest.get(..len)
}

/// Where each entry of the index file `data` starts, and where the entries
/// end, when it is a version 2 or 3 index whose entries all lie before its
/// checksum; `None` for any other (version 4 compresses its paths: each depends on the one before).
fn entry_starts(data: &[u8], hash_len: usize) -> Option<Layout> {
    let end = data.len().checked_sub(hash_len)?;
    let word = |at: usize| Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?));
    if data.get(..4)? != b"DIRC" || !matches!(word(4)?, 2 | 3) {
        return None;
    }
    let count = usize::try_from(word(8)?).ok()?;
    u32::try_from(end).ok()?;
    let mut starts = Vec::with_capacity(count.min(end / 62));
    let mut attributes = Vec::new();
    let mut at = 12;
    for i in 0..count {
        let flags_at = at + 40 + hash_len;
        let flags = u16::from_be_bytes(data.get(flags_at..flags_at + 2)?.try_into().ok()?);
        let path_start = flags_at + if flags & EXTENDED != 0 { 4 } else { 2 };
        let path = path_of(&data[..end], flags, path_start)?;
        // An entry is padded with 1 to 8 NULs to a multiple of 8 bytes.
        let next = at + ((path_start - at + path.len() + 8) & !7);
        if next > end || data[path_start + path.len()] != 0 {
            return None;
        }
        starts.push(at as u32);
        if is_attributes_file(path.as_bstr()) {
            attributes.push(i);
        }
        at = next;
    }
    Some(Layout {
        starts,
        entries_end: at,
        attributes,
    })
}

struct Layout {
    starts: Vec<u32>,
    entries_end: usize,
    attributes: Vec<usize>,
}

/// Does `path` name a `.gitattributes` file?
pub(crate) fn is_attributes_file(path: &BStr) -> bool {
    path == ".gitattributes" || path.ends_with(b"/.gitattributes")
}

/// A split index as read: the shared index, which of its entries are gone,
/// and the entries the split file adds (git's replacements among them).
pub(crate) struct Split {
    pub shared: Mapped,
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
    /// Is there a stage-0 entry at `path`, wherever it lives?
    pub fn has(&self, path: &BStr) -> bool {
        self.added
            .entry_by_path_and_stage(path, Stage::Unconflicted)
            .is_some()
            || self.shared_at(path).is_some()
    }

    /// The position in the shared index of the live stage-0 entry at `path`.
    pub fn shared_at(&self, path: &BStr) -> Option<usize> {
        self.shared
            .find(path, Stage::Unconflicted)
            .filter(|&i| !self.deleted[i])
    }

    /// Is any live entry below the folder `dir` (given with its trailing `/`)?
    pub fn has_under(&self, dir: &BStr) -> bool {
        self.shared.prefixed(dir).any(|i| !self.deleted[i])
            || self
                .added
                .prefixed_entries(dir)
                .is_some_and(|entries| !entries.is_empty())
    }

    /// The live entries of `.gitattributes` files (the shared ones first).
    pub fn attribute_files(&self) -> impl Iterator<Item = (Fields, &BStr)> {
        let shared = self
            .shared
            .attributes
            .iter()
            .filter(|&&i| !self.deleted[i])
            .map(|&i| (self.shared.fields(i), self.shared.path(i)));
        let added = self
            .added
            .entries()
            .iter()
            .map(|e| (Fields::of(e), e.path(&self.added)))
            .filter(|(_, path)| is_attributes_file(path));
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
        // Both are sorted by path, then stage: one pass merges them (sorting
        // the whole index again was a tenth of a 5,000-file staging).
        let mut shared = (0..self.shared.len())
            .filter(|&i| !self.deleted[i])
            .map(|i| (self.shared.fields(i), self.shared.path(i)))
            .peekable();
        let mut added = self
            .added
            .entries()
            .iter()
            .map(|e| (Fields::of(e), e.path(&self.added)))
            .peekable();
        fn key<'a>((e, path): &(Fields, &'a BStr)) -> (&'a BStr, u8) {
            (path, e.flags.stage() as u8)
        }
        let mut last = None;
        let mut sorted = true;
        loop {
            let next = match (shared.peek(), added.peek()) {
                (Some(s), Some(a)) if key(a) < key(s) => added.next(),
                (Some(_), _) => shared.next(),
                (None, _) => added.next(),
            };
            let Some(entry) = next else {
                break;
            };
            // A shared index out of order (git refuses to read one) is
            // sorted as before rather than trusted.
            if last.is_some_and(|last| last > key(&entry)) {
                sorted = false;
            }
            last = Some(key(&entry));
            let (e, path) = entry;
            state.dangerously_push_entry(e.stat, e.id, e.flags, e.mode, path);
        }
        if !sorted {
            state.sort_entries();
        }
        state.set_timestamp(self.timestamp);
        state
    }

    /// The checksum of the shared index, which names its file.
    pub fn shared_checksum(&self) -> Option<ObjectId> {
        Some(self.shared.checksum())
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
    let (file, metadata) = match Mapped::open(&path, wt.object_hash()) {
        Ok((Some(file), metadata)) => (file, metadata),
        // A layout not read in place (version 4): read as usual, by gix.
        Ok((None, _)) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(Error::Read { path, source }.into()),
    };
    let mtime = filetime::FileTime::from_last_modification_time(&metadata);
    let corrupt = || {
        crate::sys::error::Error::from(InputError::new(format!(
            "{}: its link extension does not fit its shared index",
            path.display()
        )))
    };
    // Extensions that do not add up: gix reads it whole, and says what is wrong.
    let Some(extensions) = file.extensions() else {
        return Ok(None);
    };
    let mut link = None;
    let mut extended = false;
    for (signature, content) in extensions {
        match signature {
            b"link" => link = Some(decode_link(content, wt.object_hash()).ok_or_else(corrupt)?),
            b"UNTR" | b"FSMN" | b"sdir" => extended = true,
            _ => {}
        }
    }
    let Some((shared_checksum, bitmaps)) = link else {
        return Ok(None);
    };
    let shared = wt.git_dir().join(format!("sharedindex.{shared_checksum}"));
    let Some(shared) = shared_at(&shared, wt.object_hash(), shared_checksum)? else {
        return Ok(None);
    };
    let mut deleted = vec![false; shared.len()];
    let mut added = gix::index::State::new(wt.object_hash());
    // git copies an entry it wrote in the same second as its file (racily
    // clean) into the split file unchanged: such a copy is the shared entry.
    let replaced = match &bitmaps {
        Some((delete, replace)) => {
            apply_bitmaps(&shared, &file, delete, replace, &mut deleted, &mut added)
                .ok_or_else(corrupt)?
        }
        None => 0,
    };
    add_the_rest(&shared, &file, replaced, &mut deleted, &mut added);
    added.sort_entries();
    Ok(Some(Split {
        shared,
        deleted,
        added,
        // A null one (`index.skipHash`) names nothing.
        checksum: Some(file.checksum()).filter(|c| !c.is_null()),
        timestamp: mtime,
        extended,
    }))
}

/// git's delete and replace bitmaps applied to the entries of `shared`:
/// the replacements are the first entries of the split `file`, in the order
/// of the bits, each taking the path of the entry it replaces. Returns how
/// many entries of `file` they took; `None` when the bitmaps do not fit.
fn apply_bitmaps(
    shared: &Mapped,
    file: &Mapped,
    delete: &gix_bitmap::ewah::Vec,
    replace: &gix_bitmap::ewah::Vec,
    deleted: &mut [bool],
    added: &mut gix::index::State,
) -> Option<usize> {
    let mut replaced = 0;
    let mut fits = true;
    replace.for_each_set_bit(|i| {
        if i >= shared.len() || replaced >= file.len() {
            fits = false;
            return None;
        }
        if !shared.same_as(i, file, replaced) {
            let new = file.fields(replaced);
            deleted[i] = true;
            added.dangerously_push_entry(new.stat, new.id, new.flags, new.mode, shared.path(i));
        }
        replaced += 1;
        Some(())
    });
    delete.for_each_set_bit(|i| match deleted.get_mut(i) {
        Some(gone) => {
            *gone = true;
            Some(())
        }
        None => {
            fits = false;
            None
        }
    });
    fits.then_some(replaced)
}

/// The entries of the split `file` after the first `replaced` are added;
/// one at the path and stage of a shared entry takes its place.
fn add_the_rest(
    shared: &Mapped,
    file: &Mapped,
    replaced: usize,
    deleted: &mut [bool],
    added: &mut gix::index::State,
) {
    // Both are sorted: an entry is most often right after the one before.
    let mut next = 0;
    for j in replaced..file.len() {
        let (path, new) = (file.path(j), file.fields(j));
        let stage = new.flags.stage();
        let found = match next < shared.len() && shared.is_at(next, path, stage) {
            true => Some(next),
            false => shared.find(path, stage),
        };
        if let Some(i) = found {
            next = i + 1;
        }
        match found {
            Some(i) if shared.same_as(i, file, j) => deleted[i] = false,
            found => {
                if let Some(i) = found {
                    deleted[i] = true;
                }
                added.dangerously_push_entry(new.stat, new.id, new.flags, new.mode, path);
            }
        }
    }
}

/// The link extension's content: the shared index's checksum, then the
/// delete and replace bitmaps unless it has none (gitformat-index(5)).
fn decode_link(
    content: &[u8],
    hash: gix::hash::Kind,
) -> Option<(
    ObjectId,
    Option<(gix_bitmap::ewah::Vec, gix_bitmap::ewah::Vec)>,
)> {
    let (id, rest) = content.split_at_checked(hash.len_in_bytes())?;
    let id = ObjectId::from_bytes_or_panic(id);
    if rest.is_empty() {
        return Some((id, None));
    }
    let (delete, rest) = gix_bitmap::ewah::decode(rest).ok()?;
    let (replace, rest) = gix_bitmap::ewah::decode(rest).ok()?;
    rest.is_empty().then_some((id, Some((delete, replace))))
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
        .map_err(|source| Error::Serialize { source })?;
    if let Some(link) = link {
        let size = u32::try_from(link.len())
            .map_err(|_| InputError::new("the link extension of a split index is too large"))?;
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
            .ok_or_else(|| InputError::new("an index of more than 4 billion entries"))?
            .write_to(&mut out)
            .map_err(|source| Error::Bitmap { source })?;
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
    let failed = |source| Error::WriteShared {
        path: path.clone(),
        source,
    };
    data.extend_from_slice(checksum.as_slice());
    // Readable as git makes it (0666 less the umask), not only by its owner.
    let mut tmp = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(git_dir)
        .map_err(failed)?;
    std::io::Write::write_all(&mut tmp, &data).map_err(failed)?;
    tmp.persist(&path).map_err(|e| failed(e.error))?;
    Ok(checksum)
}

/// The checksum git writes at the end of an index file holding `data`.
pub(crate) fn checksum_of(hash: gix::hash::Kind, data: &[u8]) -> Result<ObjectId> {
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(data);
    hasher
        .try_finalize()
        .map_err(|source| Error::Hash { source }.into())
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
    use crate::testutil::{git, git_command, git_with_input, new_repo, scratch};

    /// An empty repository `<root>/repo`.
    type Row = (String, gix::ObjectId, u32, gix::index::entry::Stat);

    fn rows<'a>(entries: impl Iterator<Item = (super::Fields, &'a gix::bstr::BStr)>) -> Vec<Row> {
        let mut rows: Vec<Row> = entries
            .map(|(e, path)| (path.to_string(), e.id, e.mode.bits(), e.stat))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    fn whole_rows(
        whole: &gix::index::State,
    ) -> impl Iterator<Item = (super::Fields, &gix::bstr::BStr)> {
        whole
            .entries()
            .iter()
            .map(|e| (super::Fields::of(e), e.path(whole)))
    }

    /// A split index is read in place, entry by entry: what it finds is what
    /// git lists, whatever the entries' layout (a path past 4,095 bytes,
    /// extended flags in version 3, a conflict's stages). Version 4
    /// compresses paths: that index is left to gix.
    #[test]
    fn a_shared_index_read_in_place_finds_what_gix_decodes() {
        for version in ["2", "3", "4"] {
            let (_tmp, root) = scratch();
            let (root, dir) = (root.as_path(), &new_repo(&root, "repo"));
            let git = |args: &[&str]| git(root, dir, args);
            let blob = |text: &str| {
                let out = git_with_input(
                    root,
                    dir,
                    &["hash-object", "-w", "--stdin"],
                    text.as_bytes(),
                );
                String::from_utf8(out.stdout)
                    .expect("utf-8")
                    .trim()
                    .to_owned()
            };
            let long = format!("{}/end", "d".repeat(4200));
            let mut paths = vec![
                "a-b".to_owned(),
                "a.txt".to_owned(),
                "a/b".to_owned(),
                "a/c/d".to_owned(),
                "ab".to_owned(),
                long.clone(),
                "z".to_owned(),
            ];
            for path in &paths {
                let id = blob(path);
                git(&[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{id},{path}"),
                ]);
            }
            // A conflict: stages 1 to 3 at one path.
            let mut stages = String::new();
            for stage in 1..=3 {
                stages.push_str(&format!("100644 {} {stage}\tc\n", blob(&stage.to_string())));
            }
            let unmerged = git_with_input(
                root,
                dir,
                &["update-index", "--index-info"],
                stages.as_bytes(),
            );
            assert!(unmerged.status.success());
            paths.push("c".to_owned());
            if version != "2" {
                std::fs::write(dir.join("new"), "new\n").expect("write");
                git(&["add", "-N", "new"]);
                paths.push("new".to_owned());
            }
            git(&["update-index", "--index-version", version]);
            git(&["update-index", "--split-index"]);
            let repo = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
            super::enable(&repo).expect("mark");
            if version == "4" {
                // Compressed paths are not read in place: gix reads it whole.
                assert!(super::read(&repo).expect("read").is_none());
                let whole = repo.open_index().expect("gix reads it whole");
                assert_eq!(whole.entries().len(), paths.len() + 2, "c has three stages");
                continue;
            }
            let split = super::read(&repo).expect("read").expect("split");
            let shared = std::fs::read(
                repo.git_dir()
                    .join(format!("sharedindex.{}", split.shared.checksum())),
            )
            .expect("shared index");
            assert_eq!(
                shared[4..8],
                version.parse::<u32>().expect("number").to_be_bytes(),
                "git wrote the shared index in version {version}"
            );
            // gix cannot be the judge: it misreads a path past 4,095 bytes.
            let listed = git_command(root, dir)
                .args(["ls-files", "--stage", "-z"])
                .output()
                .expect("ls-files");
            let listed: Vec<(u32, gix::ObjectId, u32, String)> = listed
                .stdout
                .split(|&b| b == 0)
                .filter(|line| !line.is_empty())
                .map(|line| {
                    let line = String::from_utf8(line.to_vec()).expect("utf-8");
                    let (info, path) = line.split_once('\t').expect("tab");
                    let info: Vec<&str> = info.split(' ').collect();
                    (
                        u32::from_str_radix(info[0], 8).expect("mode"),
                        gix::ObjectId::from_hex(info[1].as_bytes()).expect("id"),
                        info[2].parse().expect("stage"),
                        path.to_owned(),
                    )
                })
                .collect();
            let merged = split.merged();
            let mut ours: Vec<_> = whole_rows(&merged)
                .map(|(e, path)| {
                    (
                        e.mode.bits(),
                        e.id,
                        e.flags.stage() as u32,
                        path.to_string(),
                    )
                })
                .collect();
            ours.sort_by(|a, b| (&a.3, a.2).cmp(&(&b.3, b.2)));
            assert_eq!(ours, listed, "version {version}: the entries git lists");
            for i in 0..split.shared.len() {
                let (path, fields) = (split.shared.path(i), split.shared.fields(i));
                assert_eq!(
                    split.shared.find(path, fields.flags.stage()),
                    Some(i),
                    "{path}"
                );
                let intent = fields
                    .flags
                    .contains(gix::index::entry::Flags::INTENT_TO_ADD);
                assert_eq!(intent, path == "new", "{path}: intent to add");
            }
            for path in &paths {
                let stage0 = !path.starts_with('c');
                assert_eq!(split.has(path.as_str().into()), stage0, "{path}");
            }
            for absent in ["", "0", "a", "a/", "a/bb", "aa", "c0", "zz"] {
                assert!(!split.has(absent.into()), "{absent}");
            }
            for (dir, under) in [("a/", true), ("a/c/", true), ("b/", false), ("d", true)] {
                assert_eq!(split.has_under(dir.into()), under, "{dir}");
            }
        }
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
        let touched = std::process::Command::new("touch")
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
            rows(whole_rows(&split.merged())),
            rows(whole_rows(&whole)),
            "the same entries, stat data included"
        );
        let order = |state: &gix::index::State| -> Vec<(String, gix::index::entry::Stage)> {
            state
                .entries()
                .iter()
                .map(|e| (e.path(state).to_string(), e.stage()))
                .collect()
        };
        assert_eq!(
            order(&split.merged()),
            order(&whole),
            "merged in the index's order"
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
        assert_eq!(
            split.merged().entries().len(),
            0,
            "its one entry is deleted"
        );
        // A shared index that is not the one the link names is refused.
        let path = repo.git_dir().join(format!("sharedindex.{shared}"));
        let mut bytes = std::fs::read(&path).expect("shared index");
        *bytes.last_mut().expect("a checksum") ^= 1;
        std::fs::write(&path, bytes).expect("write");
        assert!(super::read(&repo).is_err(), "a wrong checksum was accepted");
    }
}

//! What earlier processes read of the state, kept on disk so the next one
//! need not read it again: the bytes of record notes by blob id, and the
//! text of work-order files by their `stat` data. `status` or `batch` over
//! 10,000 orders otherwise opens and inflates 10,000 loose notes and opens
//! 10,000 files, most of them unchanged since the last command.
//!
//! Derived data only, like git's index: every entry is checked against what
//! it stands for before it is used (a note by its object id, which names
//! its content; a file by device, inode, size, modification and change
//! time), and a file is entered only once its times are older than the read
//! by [`SETTLED`], so a later write cannot leave the same stamp (git's
//! "racy" files). A missing, unreadable or garbled cache is an empty one;
//! it is written whole to a temporary file and renamed, so readers see the
//! old or the new one. Deleting it costs one slower command.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use gix::hash::ObjectId;

/// How much older than the read a file's times must be for its stamp to
/// prove its content later: wider than any file system's time granularity
/// (FAT's is 2 s).
pub(crate) const SETTLED: Duration = Duration::from_secs(3);

/// The first line of a cache file: its format. Any other is not read.
const MAGIC: &[u8] = b"git-arbiter read cache 1\n";

/// The `stat` data that proves a file unchanged.
pub use crate::sys::file_stamp::FileStamp as Stamp;

/// Were both times of `stamp` at least [`SETTLED`] before `read_at`?
fn settled_before(stamp: &Stamp, read_at: SystemTime) -> bool {
    let Ok(since) = read_at.duration_since(SystemTime::UNIX_EPOCH) else {
        return false;
    };
    let Some(limit) = since.checked_sub(SETTLED) else {
        return false;
    };
    let limit = (limit.as_secs() as i64, i64::from(limit.subsec_nanos()));
    stamp.mtime < limit && stamp.ctime < limit
}

fn put_stamp(out: &mut Vec<u8>, stamp: &Stamp) {
    for n in [stamp.dev, stamp.ino, stamp.size] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    for n in [stamp.mtime.0, stamp.mtime.1, stamp.ctime.0, stamp.ctime.1] {
        out.extend_from_slice(&n.to_le_bytes());
    }
}

fn take_stamp(input: &mut Reader<'_>) -> Option<Stamp> {
    let mut unsigned = [0u64; 3];
    for n in &mut unsigned {
        *n = input.u64()?;
    }
    let mut signed = [0i64; 4];
    for n in &mut signed {
        // Written from an i64: the same bits.
        *n = input.u64()? as i64;
    }
    Some(Stamp {
        dev: unsigned[0],
        ino: unsigned[1],
        size: unsigned[2],
        mtime: (signed[0], signed[1]),
        ctime: (signed[2], signed[3]),
    })
}

/// The bytes of record notes, by blob id.
#[derive(Default)]
pub struct Notes {
    path: Option<PathBuf>,
    /// The file as read: entries point into it, nothing is copied.
    file: Vec<u8>,
    read: HashMap<ObjectId, std::ops::Range<usize>>,
    added: HashMap<ObjectId, Box<[u8]>>,
}

impl Notes {
    /// The cache at `path`; empty when there is none or it cannot be read.
    pub fn load(path: PathBuf) -> Notes {
        let file = std::fs::read(&path).unwrap_or_default();
        let read = decode_notes(&file).unwrap_or_default();
        Notes {
            path: Some(path),
            file,
            read,
            added: HashMap::new(),
        }
    }

    pub fn get(&self, blob: &ObjectId) -> Option<&[u8]> {
        match self.read.get(blob) {
            Some(range) => Some(&self.file[range.clone()]),
            None => self.added.get(blob).map(|b| &b[..]),
        }
    }

    pub fn len(&self) -> usize {
        self.read.len() + self.added.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keep `bytes` as the content of `blob` (the caller read it by that id).
    pub fn insert(&mut self, blob: ObjectId, bytes: &[u8]) {
        if !self.read.contains_key(&blob) {
            self.added.entry(blob).or_insert_with(|| bytes.into());
        }
    }

    /// Keep only the notes in `keep`, and write them to disk. Best effort: a
    /// cache that cannot be written is only a slower next command.
    pub fn keep_and_save(&mut self, keep: &std::collections::HashSet<ObjectId>) {
        let mut ids: Vec<ObjectId> = self
            .read
            .keys()
            .chain(self.added.keys())
            .filter(|id| keep.contains(*id))
            .copied()
            .collect();
        ids.sort();
        let mut out = MAGIC.to_vec();
        for id in &ids {
            if let Some(bytes) = self.get(id) {
                put_bytes(&mut out, id.as_bytes());
                put_bytes(&mut out, bytes);
            }
        }
        if let Some(path) = &self.path {
            crate::sys::whole_file::save(path, &out);
        }
        self.read = decode_notes(&out).unwrap_or_default();
        self.file = out;
        self.added.clear();
    }
}

fn decode_notes(bytes: &[u8]) -> Option<HashMap<ObjectId, std::ops::Range<usize>>> {
    let mut input = Reader::new(bytes)?;
    let mut read = HashMap::new();
    while !input.done() {
        let id = ObjectId::try_from(&bytes[input.bytes()?]).ok()?;
        read.insert(id, input.bytes()?);
    }
    Some(read)
}

/// The text of files, by path and stamp.
#[derive(Default)]
pub struct Files {
    path: Option<PathBuf>,
    /// The file as read: texts point into it, nothing is copied.
    file: Vec<u8>,
    texts: HashMap<PathBuf, (Stamp, std::ops::Range<usize>)>,
}

impl Files {
    /// The cache at `path`; empty when there is none or it cannot be read.
    pub fn load(path: PathBuf) -> Files {
        let file = std::fs::read(&path).unwrap_or_default();
        let texts = decode_files(&file).unwrap_or_default();
        Files {
            path: Some(path),
            file,
            texts,
        }
    }

    /// The text of `file` if it was read with this very stamp.
    pub fn get(&self, file: &Path, stamp: &Stamp) -> Option<&str> {
        match self.texts.get(file) {
            // Checked as UTF-8 when loaded.
            Some((known, range)) if known == stamp => {
                std::str::from_utf8(&self.file[range.clone()]).ok()
            }
            _ => None,
        }
    }

    /// Write `entries` (each file's stamp before it was read, and the text
    /// read) as the cache, leaving out files written too recently before
    /// `read_at` for their stamp to prove anything.
    pub fn save<'a>(
        &self,
        entries: impl Iterator<Item = (&'a Path, Stamp, &'a str)>,
        read_at: SystemTime,
    ) {
        let Some(path) = &self.path else {
            return;
        };
        let mut out = MAGIC.to_vec();
        for (file, stamp, text) in entries {
            if !settled_before(&stamp, read_at) {
                continue;
            }
            put_bytes(&mut out, file.as_os_str().as_encoded_bytes());
            put_stamp(&mut out, &stamp);
            put_bytes(&mut out, text.as_bytes());
        }
        crate::sys::whole_file::save(path, &out);
    }
}

fn decode_files(bytes: &[u8]) -> Option<HashMap<PathBuf, (Stamp, std::ops::Range<usize>)>> {
    use std::os::unix::ffi::OsStrExt;
    let mut input = Reader::new(bytes)?;
    let mut texts = HashMap::new();
    while !input.done() {
        let file = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes[input.bytes()?]));
        let stamp = take_stamp(&mut input)?;
        let text = input.bytes()?;
        std::str::from_utf8(&bytes[text.clone()]).ok()?;
        texts.insert(file, (stamp, text));
    }
    Some(texts)
}

/// A length (`u32`, little-endian), then the bytes.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // A note or work order of 4 GiB is not read by anything here.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&bytes[..len as usize]);
}

/// Entries of a cache file, read as ranges of it.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// The entries after [`MAGIC`], if the file starts with it.
    fn new(bytes: &'a [u8]) -> Option<Reader<'a>> {
        bytes.starts_with(MAGIC).then_some(Reader {
            bytes,
            at: MAGIC.len(),
        })
    }

    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }

    fn take(&mut self, n: usize) -> Option<std::ops::Range<usize>> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())?;
        let range = self.at..end;
        self.at = end;
        Some(range)
    }

    fn bytes(&mut self) -> Option<std::ops::Range<usize>> {
        let len = self.take(4)?;
        let len = u32::from_le_bytes(self.bytes[len].try_into().ok()?);
        self.take(len as usize)
    }

    fn u64(&mut self) -> Option<u64> {
        let range = self.take(8)?;
        Some(u64::from_le_bytes(self.bytes[range].try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn old_file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A read long enough after now for files written now to be settled (a
    /// change time cannot be set back).
    fn later() -> SystemTime {
        SystemTime::now() + SETTLED + Duration::from_secs(1)
    }

    #[test]
    fn a_file_is_served_only_with_the_stamp_it_was_read_with() {
        let dir = tempfile::tempdir().unwrap();
        let cache_path = dir.path().join("cache");
        let a = old_file(dir.path(), "a.md", "# A\n");
        let stamp = Stamp::of(&std::fs::metadata(&a).unwrap());
        Files::load(cache_path.clone()).save([(a.as_path(), stamp, "# A\n")].into_iter(), later());
        let cache = Files::load(cache_path.clone());
        assert_eq!(cache.get(&a, &stamp), Some("# A\n"));

        // Rewritten with the same size: a new change time, not served.
        std::fs::write(&a, "# B\n").unwrap();
        let now = Stamp::of(&std::fs::metadata(&a).unwrap());
        assert_ne!(now, stamp);
        assert_eq!(cache.get(&a, &now), None);
    }

    #[test]
    fn a_file_written_just_before_the_read_is_not_entered() {
        let dir = tempfile::tempdir().unwrap();
        let cache_path = dir.path().join("cache");
        let a = old_file(dir.path(), "a.md", "# A\n");
        let stamp = Stamp::of(&std::fs::metadata(&a).unwrap());
        Files::load(cache_path.clone()).save(
            [(a.as_path(), stamp, "# A\n")].into_iter(),
            SystemTime::now(),
        );
        assert_eq!(Files::load(cache_path).get(&a, &stamp), None);
    }

    #[test]
    fn notes_round_trip_and_keep_only_what_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("arbiter").join("notes");
        let (one, two) = (ObjectId::from([1; 20]), ObjectId::from([2; 20]));
        let mut cache = Notes::load(path.clone());
        assert!(cache.is_empty());
        cache.insert(one, b"{\"one\":1}");
        cache.insert(two, b"{\"two\":2}");
        cache.keep_and_save(&[one].into_iter().collect());
        let cache = Notes::load(path);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&one), Some(&b"{\"one\":1}"[..]));
        assert_eq!(cache.get(&two), None);
    }

    #[test]
    fn a_garbled_or_truncated_cache_is_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes");
        let one = ObjectId::from([1; 20]);
        let mut cache = Notes::load(path.clone());
        cache.insert(one, b"{}");
        cache.keep_and_save(&[one].into_iter().collect());
        let whole = std::fs::read(&path).unwrap();
        for cut in [1, MAGIC.len(), whole.len() - 1] {
            std::fs::write(&path, &whole[..cut]).unwrap();
            assert!(Notes::load(path.clone()).is_empty(), "cut at {cut}");
        }
        let mut other = whole.clone();
        other[0] ^= 1;
        std::fs::write(&path, &other).unwrap();
        assert!(Notes::load(path).is_empty());
    }
}

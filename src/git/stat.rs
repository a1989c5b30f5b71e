//! The stat pass: which index entries' files may have changed, told from
//! `lstat` alone, each folder opened once.

use std::path::Path;

use gix::bstr::ByteSlice;

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
    let threads = crate::sys::parallel::cores()
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

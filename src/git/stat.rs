//! The stat pass: which index entries' files may have changed, told from
//! `lstat` alone, each folder opened once.

use std::path::Path;

use gix::bstr::ByteSlice;

/// The positions of the entries of `index` (stage 0, as [`index_equals_tree`]
/// checked) whose file in `dir` may not hold the entry's blob, each with the
/// stat data its file had (none when there was no file to stat): missing, of
/// another kind or mode, with stat data other than recorded (compared as
/// git compares them: `core.checkStat`, `core.trustctime`), or written in
/// the same moment as the index (racy: a later change may not show in the
/// stat data). As strict as git's status: a file listed here
/// is only written again. Each folder is opened once, without following
/// links on the way (a folder replaced by a link lists everything below
/// it), and its files are looked up relative to it, so a check costs one
/// path component rather than a walk of the whole path.
pub(crate) fn stat_suspects(
    wt: &gix::Repository,
    index: &gix::index::State,
    dir: &Path,
) -> Vec<(usize, Option<gix::index::entry::Stat>)> {
    let file_mode = wt
        .config_snapshot()
        .boolean("core.fileMode")
        .unwrap_or(true);
    // `core.checkStat`, `core.trustctime` as git reads them; a malformed
    // value compares every field, the strict side. Nanoseconds count, as in
    // a git built with USE_NSEC: a checkout's files share the second the
    // index is written in, and in whole seconds every one would be racy
    // (read again), although the index was written after them.
    let options = gix::index::entry::stat::Options {
        use_nsec: true,
        ..wt.stat_options().unwrap_or_default()
    };
    // The checks are system calls, independent of each other: spread them
    // over the cores in contiguous ranges (each opens its own folders).
    const PER_THREAD: usize = 4096;
    let len = index.entries().len();
    let threads = crate::sys::parallel::cores()
        .min(len.div_ceil(PER_THREAD))
        .max(1);
    if threads == 1 {
        return stat_suspects_in(index, 0..len, dir, file_mode, options);
    }
    let chunk = len.div_ceil(threads);
    std::thread::scope(|scope| {
        let running: Vec<_> = (0..threads)
            .map(|t| {
                let range = t * chunk..((t + 1) * chunk).min(len);
                let check = range.clone();
                let thread =
                    scope.spawn(move || stat_suspects_in(index, check, dir, file_mode, options));
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
    options: gix::index::entry::stat::Options,
) -> Vec<(usize, Option<gix::index::entry::Stat>)> {
    use gix::index::entry::Mode;
    use rustix::fs::{AtFlags, FileType};
    let stamp = index.timestamp();
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
        let now = index_stat(&st);
        let unchanged = kind_matches && entry.stat.matches(&now, options);
        let racy = entry.stat.is_racy(stamp, options);
        if !unchanged || racy {
            suspects.push((i, kind_matches.then_some(now)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{git, new_repo, scratch};

    /// A file replaced by a copy with the same size and times (a new inode)
    /// is a suspect as git's status sees it by default, and not with
    /// `core.checkStat=minimal` (with `core.trustctime=false`, ctime being
    /// the change time of whatever touched the inode last), which compares
    /// only sizes and whole seconds of mtime.
    #[test]
    fn the_stat_pass_compares_what_git_is_configured_to_compare() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        let file = dir.join("a.txt");
        std::fs::write(&file, "one\n").expect("write");
        // Times well before the index, so nothing is racy.
        let past = filetime::FileTime::from_unix_time(1_700_000_000, 0);
        filetime::set_file_times(&file, past, past).expect("times");
        git(&root, &dir, &["add", "a.txt"]);
        let copy = dir.join("a.copy");
        std::fs::copy(&file, &copy).expect("copy");
        filetime::set_file_times(&copy, past, past).expect("times");
        let suspects = |setting: &[(&str, &str)]| {
            for (key, value) in setting {
                git(&root, &dir, &["config", key, value]);
            }
            let wt = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
            let index = wt.open_index().expect("index");
            stat_suspects(&wt, &index, &dir).len()
        };
        assert_eq!(suspects(&[]), 0, "an untouched file is a suspect");
        // Same size and mtime, another inode and ctime.
        std::fs::rename(&copy, &file).expect("replace");
        assert_eq!(suspects(&[]), 1, "a new inode went unseen");
        assert_eq!(
            suspects(&[("core.checkStat", "minimal"), ("core.trustctime", "false")]),
            0,
            "core.checkStat=minimal compares sizes and whole seconds only"
        );
        assert_eq!(
            suspects(&[("core.checkStat", "default")]),
            1,
            "the inode is compared again"
        );
    }

    /// A file written in the same second as the index, but before it, is
    /// not racy: nanoseconds tell them apart (in whole seconds every file a
    /// checkout just wrote would be read again); one written after is.
    #[test]
    fn racy_is_judged_to_the_nanosecond() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        let file = dir.join("a.txt");
        std::fs::write(&file, "one\n").expect("write");
        let before = filetime::FileTime::from_unix_time(1_700_000_000, 100);
        filetime::set_file_times(&file, before, before).expect("times");
        git(&root, &dir, &["add", "a.txt"]);
        let suspects = |index_time: filetime::FileTime| {
            filetime::set_file_mtime(dir.join(".git/index"), index_time).expect("index time");
            let wt = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
            let index = wt.open_index().expect("index");
            stat_suspects(&wt, &index, &dir).len()
        };
        assert_eq!(
            suspects(filetime::FileTime::from_unix_time(1_700_000_000, 200)),
            0
        );
        assert_eq!(
            suspects(filetime::FileTime::from_unix_time(1_700_000_000, 50)),
            1
        );
    }
}

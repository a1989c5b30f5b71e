//! The `stat` data that says a file was not written since it was last seen:
//! device, inode, size, modification and change time (the change time
//! cannot be set back, so a rewrite that restores the modification time
//! still shows).

use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl FileStamp {
    pub fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of the file at `path` (links followed), `None` when there
    /// is none to stat.
    pub fn of_path(path: &Path) -> Option<FileStamp> {
        std::fs::metadata(path)
            .ok()
            .map(|meta| FileStamp::of(&meta))
    }
}

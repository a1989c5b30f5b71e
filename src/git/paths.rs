//! Paths as git stores them and as people read them.

use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};

use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A repository path this system cannot name (not UTF-8 where it must be).
    #[error("path '{}': {source}", path.to_str_lossy())]
    Foreign {
        path: BString,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// The folder of a worktree's files; a repository without one is an input error.
pub(crate) fn workdir(wt: &gix::Repository) -> Result<PathBuf> {
    wt.workdir().map(Path::to_owned).ok_or_else(|| {
        crate::sys::error::Error::Input(InputError::new(
            "a checked-out branch without a worktree was found",
        ))
    })
}

/// A repository path as a relative file-system path.
pub(crate) fn rel_path(path: &[u8]) -> Result<PathBuf> {
    Ok(gix::path::from_bstr(BStr::new(path))
        .map_err(|source| Error::Foreign {
            path: path.into(),
            source,
        })?
        .into_owned())
}

/// Up to ten paths, quoted, and how many more there are.
pub(crate) fn list(paths: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut s = paths
        .iter()
        .take(SHOWN)
        .map(|p| format!("'{p}'"))
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        s.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    s
}

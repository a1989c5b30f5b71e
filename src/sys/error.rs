//! The library's one error type. Each kernel has its own typed error; this
//! enum wraps them so the CLI renders every failure in one place, with the
//! exit code and hint the contract fixes. It sits at the bottom and names no
//! kernel: a kernel's error says its own exit code and hint ([`Diagnosis`])
//! and converts into [`Error::Kernel`].

use std::fmt;

/// Exit codes of the public contract (README "Exit codes"); in JSON, the number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExitCode {
    #[default]
    Success = 0,
    /// A terminal work order remains.
    Escalation = 1,
    /// Usage, configuration or input error; nothing changed.
    Usage = 2,
    MergeConflict = 3,
    DriftRejected = 4,
    /// Nothing free: a non-blocking slot acquire found every slot taken, or
    /// a `round` found every order it could run held by another conductor.
    NoSlot = 5,
    /// An unexpected failure of the repository or the file system (as git's `fatal:`).
    Fatal = 128,
    Interrupted = 130,
}

impl ExitCode {
    pub fn code(self) -> i32 {
        self as i32
    }
}

impl serde::Serialize for ExitCode {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_i32(self.code())
    }
}

/// Something wrong with what the user gave us: one line naming what and where,
/// and a hint saying how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub message: String,
    pub hint: Option<String>,
}

impl InputError {
    pub fn new(message: impl Into<String>) -> Self {
        InputError {
            message: message.into(),
            hint: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for InputError {}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Input(#[from] InputError),
    /// A kernel's typed error (work orders, state, objects, …).
    #[error(transparent)]
    Kernel(Kernel),
    #[error("{context}: {source}")]
    Git {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// Any of the above that failed for want of disk space (ENOSPC or
    /// EDQUOT anywhere in its chain, gix's error trees included), found
    /// once where the error is made: a run stops here rather than failing
    /// the attempt it was making.
    #[error(transparent)]
    DiskFull(Box<Error>),
    /// A lock file someone else holds (or a killed process left).
    #[error("{what} is locked: {} exists", lock.display())]
    Locked {
        what: String,
        lock: std::path::PathBuf,
    },
    #[error("interrupted")]
    Interrupted,
    /// A non-blocking slot acquire found no slot it may take.
    #[error("no slot free (cap {cap}): every slot is held or promised to an earlier waiter")]
    NoSlot { cap: u32 },
}

impl Error {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Input(_) => ExitCode::Usage,
            Error::Kernel(e) => e.exit_code(),
            Error::Git { .. } | Error::Io { .. } => ExitCode::Fatal,
            Error::DiskFull(e) => e.exit_code(),
            Error::Locked { .. } => ExitCode::Usage,
            Error::Interrupted => ExitCode::Interrupted,
            Error::NoSlot { .. } => ExitCode::NoSlot,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            Error::DiskFull(_) => Some(
                "free some disk space and run it again: no attempt was spent on this".into(),
            ),
            Error::Locked { lock, .. } => Some(format!(
                "another git process is running there, or one was killed: if none is running, remove {}",
                lock.display()
            )),
            Error::Input(e) => e.hint.clone(),
            Error::Kernel(e) => e.hint(),
            Error::NoSlot { .. } => Some(
                "wait for one (drop --no-wait), or raise the cap with --max-total N or 'git config arbiter.maxTotal N'"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Did this fail for want of disk space?
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::DiskFull(_))
    }

    /// `self`, or [`Error::DiskFull`] of it when its causes say the disk is full.
    fn classified(self) -> Error {
        match self {
            Error::DiskFull(_) => self,
            e if crate::sys::failure::is_disk_full(&e) => Error::DiskFull(Box::new(e)),
            e => e,
        }
    }

    /// Wrap any git (gix) failure with what we were doing.
    pub fn git(
        context: impl Into<String>,
    ) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync + 'static>) -> Error {
        let context = context.into();
        move |source| Error::Git { context, source }.classified()
    }

    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }.classified()
    }
}

/// What the contract says about a kernel's typed error: the exit code it
/// ends a command with and the hint that tells the user how to fix it.
pub trait Diagnosis: std::error::Error + Send + Sync + 'static {
    fn exit_code(&self) -> ExitCode;

    fn hint(&self) -> Option<String> {
        None
    }
}

/// A kernel's error as the library's: its message and its causes unchanged.
#[derive(Debug)]
pub struct Kernel(Box<dyn Diagnosis>);

impl std::ops::Deref for Kernel {
    type Target = dyn Diagnosis;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Kernel {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl<E: Diagnosis> From<E> for Error {
    fn from(e: E) -> Self {
        Error::Kernel(Kernel(Box::new(e))).classified()
    }
}

/// Attach context to any git-side error in one call: `.git_context("reading HEAD")?`.
pub trait GitContext<T> {
    fn git_context(self, context: impl Into<String>) -> Result<T>;
}

impl<T, E> GitContext<T> for std::result::Result<T, E>
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn git_context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|source| Error::git(context)(Box::new(source)))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use crate::sys::failure::{causes, is_disk_full, says_disk_full};

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> std::io::Error {
        std::io::Error::from_raw_os_error(28)
    }

    /// A full disk is found once, where the error is made, whichever way it
    /// is made: an I/O error, a git error whose causes hold one, a kernel's
    /// error; the exit code stays the one of what failed.
    #[test]
    fn a_full_disk_is_a_variant_wherever_the_error_is_made() {
        let io = Error::io("writing x")(full());
        assert!(matches!(io, Error::DiskFull(_)), "{io:?}");
        assert_eq!(io.exit_code(), ExitCode::Fatal);
        assert!(io
            .hint()
            .is_some_and(|h| h.contains("free some disk space")));
        assert_eq!(io.to_string(), format!("writing x: {}", full()));

        let nested: Result<()> = Err(std::io::Error::other(full())).git_context("committing");
        assert!(nested.is_err_and(|e| e.is_disk_full()));

        #[derive(Debug, thiserror::Error)]
        #[error("kernel")]
        struct KernelError(#[source] std::io::Error);
        impl Diagnosis for KernelError {
            fn exit_code(&self) -> ExitCode {
                ExitCode::Usage
            }
        }
        let kernel = Error::from(KernelError(full()));
        assert!(kernel.is_disk_full());
        assert_eq!(kernel.exit_code(), ExitCode::Usage);
        assert!(!Error::from(KernelError(std::io::Error::other("no"))).is_disk_full());
        assert!(!Error::io("reading")(std::io::Error::other("gone")).is_disk_full());
    }

    #[test]
    fn a_held_lock_is_a_variant_with_its_file_in_the_hint() {
        let locked = Error::Locked {
            what: "the index of /r".into(),
            lock: "/r/.git/index.lock".into(),
        };
        assert_eq!(locked.exit_code(), ExitCode::Usage);
        assert_eq!(
            locked.to_string(),
            "the index of /r is locked: /r/.git/index.lock exists"
        );
        assert!(locked
            .hint()
            .is_some_and(|h| h.ends_with("remove /r/.git/index.lock")));
    }
}

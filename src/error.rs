//! The library's one error type. Each kernel has its own typed error; this
//! enum wraps them so the CLI renders every failure in one place, with the
//! exit code and hint the contract fixes.

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
    #[error(transparent)]
    Orders(#[from] crate::orders::Error),
    #[error(transparent)]
    State(#[from] crate::state::Error),
    #[error(transparent)]
    Object(#[from] crate::odb::Error),
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
    #[error("interrupted")]
    Interrupted,
    /// A non-blocking slot acquire found no slot it may take.
    #[error("no slot free (cap {cap}): every slot is held or promised to an earlier waiter")]
    NoSlot { cap: u32 },
}

impl Error {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Input(_) | Error::Orders(_) => ExitCode::Usage,
            Error::State(e) => state_exit_code(e),
            Error::Object(e) => object_exit_code(e),
            Error::Git { .. } | Error::Io { .. } => ExitCode::Fatal,
            Error::Interrupted => ExitCode::Interrupted,
            Error::NoSlot { .. } => ExitCode::NoSlot,
        }
    }

    pub fn hint(&self) -> Option<String> {
        if self.is_disk_full() {
            return Some(
                "free some disk space and run it again: no attempt was spent on this".into(),
            );
        }
        match self {
            Error::Input(e) => e.hint.clone(),
            Error::Orders(e) => e.hint(),
            Error::State(e) => state_hint(e),
            Error::Object(e) => object_hint(e),
            Error::NoSlot { .. } => Some(
                "wait for one (drop --no-wait), or raise the cap with --max-total N or 'git config arbiter.maxTotal N'"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Did this fail for want of disk space (ENOSPC or EDQUOT anywhere in
    /// its chain, gix's error trees included)?
    pub fn is_disk_full(&self) -> bool {
        crate::failure::is_disk_full(self)
    }

    /// Wrap any git (gix) failure with what we were doing.
    pub fn git(
        context: impl Into<String>,
    ) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync + 'static>) -> Error {
        let context = context.into();
        move |source| Error::Git { context, source }
    }

    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}

fn state_exit_code(e: &crate::state::Error) -> ExitCode {
    use crate::state::Error as E;
    match e {
        E::Corrupt { .. } | E::NotACommit { .. } | E::Locked { .. } => ExitCode::Usage,
        E::Object(e) => object_exit_code(e),
        E::Contended { .. } | E::Git(_) => ExitCode::Fatal,
    }
}

fn state_hint(e: &crate::state::Error) -> Option<String> {
    use crate::state::Error as E;
    match e {
        E::Corrupt { wo, .. } => Some(format!(
            "inspect it with 'git notes --ref=arbiter show {}'; an earlier good version is in 'git log -p refs/notes/arbiter' (work order {wo})",
            crate::state::key_for(wo)
        )),
        E::NotACommit { reference, .. } => Some(format!(
            "'git reflog {reference}' shows where it pointed before; restore it with 'git update-ref {reference} <commit>', or delete it with 'git update-ref -d {reference}' to start without state"
        )),
        E::Locked { lock, .. } => Some(format!(
            "if no git-arbiter or git process is running, remove the stale lock file {}",
            lock.display()
        )),
        E::Object(e) => object_hint(e),
        _ => None,
    }
}

fn object_exit_code(e: &crate::odb::Error) -> ExitCode {
    match e {
        crate::odb::Error::MissingIdentity { .. } | crate::odb::Error::Signing { .. } => {
            ExitCode::Usage
        }
        crate::odb::Error::Git(_) => ExitCode::Fatal,
    }
}

fn object_hint(e: &crate::odb::Error) -> Option<String> {
    match e {
        crate::odb::Error::MissingIdentity { .. } => {
            Some("set user.name and user.email with 'git config'".into())
        }
        crate::odb::Error::Signing { .. } => Some(
            "check gpg.format, user.signingkey and the signing program with 'git commit -S --allow-empty -m test', or unset commit.gpgsign".into(),
        ),
        crate::odb::Error::Git(_) => None,
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
        self.map_err(|source| Error::Git {
            context: context.into(),
            source: Box::new(source),
        })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use crate::failure::{causes, is_disk_full, says_disk_full};

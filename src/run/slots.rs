//! Machine-wide build slots: a cap on concurrent builds
//! shared by every git-arbiter process of the user, across repositories.
//!
//! Layout of the slot directory (owned by the user, writable by nobody else;
//! created with mode 0700):
//!
//! - `slot-<k>` — one file per slot, `k` from 0. A slot is held exactly while
//!   some process holds an exclusive `flock(2)` on its file, so the kernel
//!   frees it the moment the holder dies, however it dies. The holder writes
//!   its [`HolderInfo`] and its cap as JSON into the file after locking it;
//!   the content of an unlocked file is stale and never read as a holder.
//! - `queue/t-<n>-<pid>` — a waiter's ticket, `n` zero-padded so names sort by
//!   arrival. The waiter holds it `flock`ed, so a dead waiter's ticket is seen
//!   as dead and skipped (and removed). Its content is the waiter's cap and info.
//! - `lock` — a mutex (`flock`) around every admission decision and every
//!   ticket creation, so counting the held slots and taking one is atomic among
//!   acquirers. Releasing a slot needs no mutex: it only ever frees capacity.
//!
//! Fairness: waiters are admitted strictly oldest first. Walking the live
//! queue from the oldest ticket, each waiter fits while the number of held
//! slots (plus those admitted before it in the walk) is below *its* cap; the
//! first that does not fit blocks everyone behind it. So no waiter starves,
//! even when processes run with different caps, and a non-blocking acquire
//! never jumps the queue (it is a ticket at the very end).
//!
//! All file descriptors are opened by std, i.e. with `O_CLOEXEC`: a slot fd
//! never reaches a builder, so a builder that outlives git-arbiter does not
//! keep the slot. Every entry is opened with `O_NOFOLLOW` and must be a
//! regular file of ours: a `slot-0 -> ~/.bashrc` planted by someone else is
//! refused, never truncated and written.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::state::context::{defaults, Context};
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};
use crate::sys::flock::{free_now, try_lock};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating the slot directory {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating {}: {source}", dir.display())]
    CreateQueue {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("making the slot directory {} private: {source}", dir.display())]
    MakePrivate {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("listing {}: {source}", dir.display())]
    List {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("locking {}: {source}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("probing {}: {source}", path.display())]
    Probe {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("taking a slot in {}: every slot file is locked by something outside git-arbiter", dir.display())]
    AllLocked { dir: PathBuf },
    #[error("waiting in {}: our queue ticket disappeared", dir.display())]
    TicketGone { dir: PathBuf },
    #[error("locking {}: a fresh ticket is locked by someone else", path.display())]
    TicketTaken { path: PathBuf },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// The largest cap accepted; more slots than this is a typo, not a machine.
pub const MAX_CAP: u32 = 1024;

/// How often a waiter re-checks the queue. Waiting is polling on purpose:
/// flock has no "notify me when any of these is free", and a poll keeps the
/// wait interruptible.
const POLL: Duration = Duration::from_millis(25);
/// How often an acquirer retries the directory mutex (held only for a few
/// file operations at a time).
const MUTEX_POLL: Duration = Duration::from_millis(2);

const QUEUE: &str = "queue";
const MUTEX: &str = "lock";

/// Who holds (or waits for) a slot; written into the slot file for `status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderInfo {
    pub pid: u32,
    /// The repository the build belongs to (its worktree top or git dir).
    pub repo: String,
    /// The work order id, or a label for a command (`slot run --label`).
    pub wo: String,
    /// Unix seconds when the slot was taken (or, for a waiter, when it began waiting).
    pub since: i64,
}

impl HolderInfo {
    /// Info for this process, taken now.
    pub fn now(repo: impl Into<String>, wo: impl Into<String>) -> HolderInfo {
        HolderInfo {
            pid: std::process::id(),
            repo: repo.into(),
            wo: wo.into(),
            since: crate::sys::clock::now(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Wait (in turn) until a slot is free.
    Block,
    /// Take a slot only if one is free now and nobody is waiting ahead.
    NonBlocking,
}

/// What a waiter is waiting for; reported whenever it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitState {
    pub cap: u32,
    /// Slots held right now, by anyone.
    pub held: u32,
    /// Live waiters that arrived earlier and go first.
    pub ahead: u32,
}

/// A held slot. Dropping it releases the lock and closes the file.
#[derive(Debug)]
pub struct Slot {
    // Never read outside tests: holding the locked file *is* holding the slot.
    _lock: crate::sys::flock::Held,
    index: usize,
}

impl Slot {
    pub fn index(&self) -> usize {
        self.index
    }
}

/// A held slot as seen by `status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub slot: usize,
    /// `None` when the locked file holds no readable info (a holder that is
    /// not git-arbiter, or a foreign version): the slot still counts as held.
    pub info: Option<HolderInfo>,
    /// The cap the holder was admitted under; `None` if not recorded (a
    /// holder from before caps were recorded, or not git-arbiter).
    pub cap: Option<u32>,
}

/// A live waiter, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    pub ticket: u64,
    pub cap: u32,
    pub info: HolderInfo,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Occupancy {
    pub holders: Vec<Held>,
    pub waiters: Vec<Waiter>,
}

/// What a held slot file contains. Flat, so that holders of either format
/// read each other's files.
#[derive(Serialize, Deserialize)]
struct SlotBody {
    #[serde(flatten)]
    info: HolderInfo,
    #[serde(default)]
    cap: Option<u32>,
}

/// What a ticket file contains.
#[derive(Serialize, Deserialize)]
struct TicketBody {
    cap: u32,
    info: HolderInfo,
}

/// The slot directory: `$ARBITER_SLOT_DIR`, else `git config arbiter.slotDir`,
/// else `$XDG_RUNTIME_DIR/git-arbiter`, else `$XDG_STATE_HOME/git-arbiter`,
/// else `~/.local/state/git-arbiter`. Created (mode 0700) and checked; see
/// [`prepare_dir`].
pub fn slot_dir(ctx: Option<&Context>) -> Result<PathBuf> {
    let config = ctx.and_then(|c| c.config_string("arbiter.slotDir"));
    let dir = resolve_slot_dir(&|key| std::env::var_os(key), config.as_deref())?;
    prepare_dir(&dir)?;
    Ok(dir)
}

/// The resolution order of [`slot_dir`], with the environment passed in (for tests).
pub fn resolve_slot_dir(
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    config: Option<&str>,
) -> Result<PathBuf> {
    let set = |key: &str| env(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    let absolute = |path: PathBuf, source: &str| -> Result<PathBuf> {
        if path.is_absolute() {
            Ok(path)
        } else {
            Err(InputError::new(format!(
                "{source} = '{}' is not an absolute path",
                path.display()
            ))
            .hint("the slot directory is shared machine-wide: give an absolute path")
            .into())
        }
    };
    if let Some(dir) = set("ARBITER_SLOT_DIR") {
        return absolute(dir, "ARBITER_SLOT_DIR");
    }
    if let Some(raw) = config.filter(|c| !c.is_empty()) {
        // git itself expands a leading `~/` in path-valued settings; do the same.
        let dir = match raw.strip_prefix("~/") {
            Some(rest) => set("HOME")
                .ok_or_else(|| {
                    InputError::new(format!(
                        "config arbiter.slotDir = '{raw}' needs $HOME, which is not set"
                    ))
                })?
                .join(rest),
            None => PathBuf::from(raw),
        };
        return absolute(dir, "config arbiter.slotDir");
    }
    // Other sources are conventions, not instructions: ignore a relative value
    // as the XDG spec says, and fall through.
    let base = ["XDG_RUNTIME_DIR", "XDG_STATE_HOME"]
        .into_iter()
        .find_map(|key| set(key).filter(|p| p.is_absolute()))
        .or_else(|| {
            set("HOME")
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".local/state"))
        })
        .ok_or_else(|| {
            InputError::new("cannot choose a slot directory: $HOME is not set")
                .hint("set ARBITER_SLOT_DIR or 'git config --global arbiter.slotDir DIR'")
        })?;
    Ok(base.join("git-arbiter"))
}

/// The cap: `--max-total`, else `git config arbiter.maxTotal`, else 6. Must be 1..=1024.
pub fn cap(ctx: Option<&Context>, flag: Option<u32>) -> Result<u32> {
    let (value, source) = match flag {
        Some(v) => (v, "--max-total "),
        None => match ctx.map(|c| c.config_u32("arbiter.maxTotal")).transpose()? {
            Some(Some(v)) => (v, "config arbiter.maxTotal = "),
            _ => return Ok(defaults::MAX_TOTAL),
        },
    };
    check_cap(value, source)?;
    Ok(value)
}

fn check_cap(value: u32, source: &str) -> Result<()> {
    if (1..=MAX_CAP).contains(&value) {
        Ok(())
    } else {
        Err(InputError::new(format!(
            "{source}{value}: the slot cap must be between 1 and {MAX_CAP}"
        ))
        .hint("set it with --max-total N or 'git config arbiter.maxTotal N'")
        .into())
    }
}

/// Create the slot directory (and its `queue/`) with mode 0700 and check it.
///
/// Policy for an existing directory: one owned by another user is refused (its
/// owner could fake or starve our slots), and so is one that others can write
/// into, however it came to be: anyone may have planted entries in it, and a
/// chmod would only make them look trusted. One of ours that others can merely
/// read is repaired to 0700 when it holds nothing but slot files, as it then
/// is ours in every sense; otherwise it is some other directory the user
/// pointed us at (say `$HOME`), and we refuse rather than chmod it behind
/// their back.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    match fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        // Something other than a directory is in the way: the configured path
        // is wrong, which is the user's to fix, not a failure of ours.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Err(not_a_directory(dir))
        }
        Err(e) => {
            return Err(Error::CreateDir {
                dir: dir.to_owned(),
                source: e,
            }
            .into())
        }
    }
    check_private(dir, true)?;
    let queue = dir.join(QUEUE);
    match fs::DirBuilder::new().mode(0o700).create(&queue) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(Error::CreateQueue {
                dir: queue,
                source: e,
            }
            .into())
        }
        _ => {}
    }
    check_private(&queue, false)
}

const OWN_DIR_HINT: &str = "point ARBITER_SLOT_DIR or arbiter.slotDir at a directory of your own";

fn not_a_directory(dir: &Path) -> crate::sys::error::Error {
    InputError::new(format!(
        "slot directory {} is not a directory",
        dir.display()
    ))
    .hint(OWN_DIR_HINT)
    .into()
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// `top`: the slot directory itself, which the user may reach through a
/// symlink; `queue/` inside it is ours alone and must be a real directory.
fn check_private(dir: &Path, top: bool) -> Result<()> {
    let meta = if top {
        fs::metadata(dir)
    } else {
        fs::symlink_metadata(dir)
    }
    .map_err(|source| Error::Read {
        path: dir.to_owned(),
        source,
    })?;
    let hint = OWN_DIR_HINT;
    if !meta.is_dir() {
        return Err(not_a_directory(dir));
    }
    let me = euid();
    if meta.uid() != me {
        return Err(InputError::new(format!(
            "slot directory {} belongs to uid {}, not to you (uid {me})",
            dir.display(),
            meta.uid()
        ))
        .hint(hint)
        .into());
    }
    if meta.mode() & 0o022 != 0 {
        return Err(InputError::new(format!(
            "slot directory {} is writable by other users (mode {:o})",
            dir.display(),
            meta.mode() & 0o777
        ))
        .hint(format!(
            "anyone may have planted files in it: check them, then 'chmod 700 {}', or {hint}",
            dir.display()
        ))
        .into());
    }
    if meta.mode() & 0o077 == 0 {
        return Ok(());
    }
    if top && !only_slot_entries(dir)? {
        return Err(InputError::new(format!(
            "slot directory {} is accessible to other users (mode {:o})",
            dir.display(),
            meta.mode() & 0o777
        ))
        .hint(format!(
            "make it private with 'chmod 700 {}', or {hint}",
            dir.display()
        ))
        .into());
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|source| {
        Error::MakePrivate {
            dir: dir.to_owned(),
            source,
        }
    })?;
    Ok(())
}

fn only_slot_entries(dir: &Path) -> Result<bool> {
    for entry in read_dir(dir)? {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name == QUEUE || name == MUTEX || slot_index(&name).is_some()) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    fs::read_dir(dir)
        .and_then(|entries| entries.collect::<std::io::Result<Vec<_>>>())
        .map_err(|source| {
            Error::List {
                dir: dir.to_owned(),
                source,
            }
            .into()
        })
}

/// `slot-<k>` with `k` in canonical decimal.
fn slot_index(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("slot-")?;
    let k: usize = digits.parse().ok()?;
    (k.to_string() == digits).then_some(k)
}

/// `t-<n>-<pid>` → `n`.
fn ticket_number(name: &str) -> Option<u64> {
    let (n, _pid) = name.strip_prefix("t-")?.split_once('-')?;
    n.parse().ok()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Create {
    No,
    IfMissing,
    /// Fail if it exists (a fresh ticket).
    New,
}

/// Open an entry of the slot directory for locking. Never through a symlink,
/// and only a regular file of ours: anything else was put there by someone
/// else, and writing to it would write wherever it leads.
fn open_entry(path: &Path, create: Create) -> Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    match create {
        Create::No => {}
        Create::IfMissing => {
            options.create(true).truncate(false);
        }
        Create::New => {
            options.create_new(true);
        }
    }
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if Errno::from_io_error(&e) == Some(Errno::LOOP) => {
            return Err(foreign_entry(path, "is a symbolic link"))
        }
        Err(e) if Errno::from_io_error(&e) == Some(Errno::ISDIR) => {
            return Err(foreign_entry(path, "is not a regular file"))
        }
        Err(source) => {
            return Err(Error::Open {
                path: path.to_owned(),
                source,
            }
            .into())
        }
    };
    let meta = file.metadata().map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    check_entry(path, &meta, euid())?;
    Ok(file)
}

/// `meta` is the open file's (fstat), so it is the file we will write.
fn check_entry(path: &Path, meta: &fs::Metadata, me: u32) -> Result<()> {
    if !meta.is_file() {
        return Err(foreign_entry(path, "is not a regular file"));
    }
    if meta.uid() != me {
        return Err(foreign_entry(
            path,
            &format!("belongs to uid {}, not to you (uid {me})", meta.uid()),
        ));
    }
    Ok(())
}

fn foreign_entry(path: &Path, what: &str) -> crate::sys::error::Error {
    InputError::new(format!("{} {what}", path.display()))
        .hint(
            "only git-arbiter's own files belong in the slot directory: \
             find out who put it there, then remove it",
        )
        .into()
}

/// An entry that vanished since the directory was listed (a waiter left).
fn is_gone(e: &crate::sys::error::Error) -> bool {
    let crate::sys::error::Error::Kernel(kernel) = e else {
        return false;
    };
    let kernel: &dyn std::error::Error = &**kernel;
    matches!(
        kernel.downcast_ref::<Error>(),
        Some(Error::Open { source, .. } | Error::Read { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound
    )
}

fn read_json<T: for<'de> Deserialize<'de>>(file: &mut File) -> Option<T> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

/// The directory mutex, held for one admission decision.
struct DirLock {
    // Never read: holding the locked file *is* holding the mutex.
    _lock: crate::sys::flock::Held,
}

impl DirLock {
    fn take(dir: &Path, interrupt: &AtomicBool) -> Result<DirLock> {
        let path = dir.join(MUTEX);
        loop {
            let file = open_entry(&path, Create::IfMissing)?;
            let locked = crate::sys::flock::Held::try_take(file).map_err(|source| Error::Lock {
                path: path.clone(),
                source,
            })?;
            if let Some(lock) = locked {
                return Ok(DirLock { _lock: lock });
            }
            if interrupt.load(Ordering::SeqCst) {
                return Err(crate::sys::error::Error::Interrupted);
            }
            std::thread::sleep(MUTEX_POLL);
        }
    }
}

/// A waiter's place in the queue; dropping it leaves the queue.
struct Ticket {
    file: File,
    path: PathBuf,
    name: String,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Remove the name while the lock is still held, so nobody sees an
        // unlocked ticket of ours and mistakes it for a dead waiter's.
        let _ = fs::remove_file(&self.path);
    }
}

/// The held slots. Probing takes each free file's lock for an instant, so
/// callers hold the directory mutex: an acquirer must not see a free slot as
/// held because `status` was probing it.
fn probe_holders(dir: &Path) -> Result<Vec<Held>> {
    let mut held = Vec::new();
    for entry in read_dir(dir)? {
        let Some(slot) = slot_index(&entry.file_name().to_string_lossy()) else {
            continue;
        };
        let path = entry.path();
        let mut file = match open_entry(&path, Create::No) {
            Ok(f) => f,
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(e),
        };
        if !free_now(&file).map_err(|source| Error::Probe {
            path: path.clone(),
            source,
        })? {
            let body: Option<SlotBody> = read_json(&mut file);
            held.push(Held {
                slot,
                cap: body.as_ref().and_then(|b| b.cap),
                info: body.map(|b| b.info),
            });
        }
    }
    held.sort_by_key(|h| h.slot);
    Ok(held)
}

/// A live waiter's ticket as seen in the queue.
struct Queued {
    name: String,
    number: u64,
    /// `None` if unreadable (not written by git-arbiter).
    body: Option<TicketBody>,
}

/// Live tickets, oldest first, and the number for the next ticket. Dead
/// tickets are skipped, and removed when `reap` (only under the directory
/// mutex, so no ticket is being created at the same moment).
fn probe_queue(dir: &Path, reap: bool) -> Result<(Vec<Queued>, u64)> {
    let queue = dir.join(QUEUE);
    if !queue.exists() {
        return Ok((Vec::new(), 0));
    }
    let mut entries: Vec<(String, u64, PathBuf)> = read_dir(&queue)?
        .into_iter()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            ticket_number(&name).map(|n| (name, n, e.path()))
        })
        .collect();
    entries.sort_by_key(|(_, n, _)| *n);
    let next = entries.last().map_or(0, |(_, n, _)| n + 1);
    let mut live = Vec::new();
    for (name, number, path) in entries {
        let mut file = match open_entry(&path, Create::No) {
            Ok(f) => f,
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(e),
        };
        if free_now(&file).map_err(|source| Error::Probe {
            path: path.clone(),
            source,
        })? {
            if reap {
                let _ = fs::remove_file(&path);
            }
        } else {
            live.push(Queued {
                name,
                number,
                body: read_json(&mut file),
            });
        }
    }
    Ok((live, next))
}

/// How many waiters at the head of the queue may take a slot now, given the
/// held count and each waiter's cap in queue order (see the module docs).
fn admissible(held: u32, caps: impl IntoIterator<Item = u32>) -> usize {
    // The i-th waiter (0-based) fits if the held slots plus the i admitted
    // before it leave room under its cap.
    caps.into_iter()
        .enumerate()
        .take_while(|&(i, cap)| u64::from(held) + (i as u64) < u64::from(cap))
        .count()
}

/// Take the lowest free slot and write `info` and `cap` into it. Called under the mutex.
fn take_slot(dir: &Path, held: &[Held], cap: u32, info: &HolderInfo) -> Result<Slot> {
    let limit = held.len() + MAX_CAP as usize + 1;
    for index in 0..limit {
        if held.iter().any(|h| h.slot == index) {
            continue;
        }
        let path = dir.join(format!("slot-{index}"));
        let file = open_entry(&path, Create::IfMissing)?;
        // Only a process outside the protocol can hold it here; skip it.
        let locked = crate::sys::flock::Held::try_take(file).map_err(|source| Error::Lock {
            path: path.clone(),
            source,
        })?;
        let Some(lock) = locked else {
            continue;
        };
        let body = SlotBody {
            info: info.clone(),
            cap: Some(cap),
        };
        let mut text = serde_json::to_string(&body).expect("holder info always serializes");
        text.push('\n');
        let mut file = lock.file();
        file.set_len(0)
            .and_then(|_| file.write_all(text.as_bytes()))
            .map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
        return Ok(Slot { _lock: lock, index });
    }
    Err(Error::AllLocked {
        dir: dir.to_owned(),
    }
    .into())
}

/// Take one slot of `cap` in `dir`.
///
/// `Wait::Block` waits in turn (oldest waiter first) and calls `on_wait` with
/// the state each time it changes (first when the wait begins);
/// `Wait::NonBlocking` returns `Ok(None)` unless a slot is free now and nobody
/// waits ahead. Setting `interrupt` ends a wait with `Error::Interrupted`.
pub fn acquire(
    dir: &Path,
    cap: u32,
    info: &HolderInfo,
    wait: Wait,
    interrupt: &AtomicBool,
    on_wait: &mut dyn FnMut(&WaitState),
) -> Result<Option<Slot>> {
    check_cap(cap, "slot cap ")?;
    prepare_dir(dir)?;
    let mut ticket: Option<Ticket> = None;
    let mut reported: Option<WaitState> = None;
    loop {
        if interrupt.load(Ordering::SeqCst) {
            return Err(crate::sys::error::Error::Interrupted);
        }
        let mutex = DirLock::take(dir, interrupt)?;
        let held = probe_holders(dir)?;
        let (queue, next) = probe_queue(dir, true)?;
        // Our position: at our ticket, or (no ticket yet) after everyone.
        let position =
            match &ticket {
                Some(t) => queue.iter().position(|q| q.name == t.name).ok_or_else(|| {
                    Error::TicketGone {
                        dir: dir.to_owned(),
                    }
                })?,
                None => queue.len(),
            };
        let caps = queue
            .iter()
            .take(position)
            // A live ticket without readable content is not ours to judge: assume our cap.
            .map(|q| q.body.as_ref().map_or(cap, |b| b.cap))
            .chain(std::iter::once(cap));
        let held_count = held.len() as u32;
        if position < admissible(held_count, caps) {
            let slot = take_slot(dir, &held, cap, info)?;
            drop(ticket);
            drop(mutex);
            return Ok(Some(slot));
        }
        if wait == Wait::NonBlocking {
            return Ok(None);
        }
        if ticket.is_none() {
            ticket = Some(create_ticket(dir, next, cap, info)?);
        }
        drop(mutex);
        let state = WaitState {
            cap,
            held: held_count,
            ahead: position as u32,
        };
        if reported != Some(state) {
            // Outside the mutex: the callback may block on a slow stderr.
            on_wait(&state);
            reported = Some(state);
        }
        std::thread::sleep(POLL);
    }
}

/// Join the queue: create and lock a ticket. Called under the mutex.
fn create_ticket(dir: &Path, number: u64, cap: u32, info: &HolderInfo) -> Result<Ticket> {
    let name = format!("t-{number:020}-{}", std::process::id());
    let path = dir.join(QUEUE).join(&name);
    let file = open_entry(&path, Create::New)?;
    // From here on the file is removed again if anything fails.
    let ticket = Ticket { file, path, name };
    // Lock before writing: an unlocked ticket reads as a dead waiter's.
    let locked = try_lock(&ticket.file).map_err(|source| Error::Lock {
        path: ticket.path.clone(),
        source,
    })?;
    if !locked {
        return Err(Error::TicketTaken {
            path: ticket.path.clone(),
        }
        .into());
    }
    let body = serde_json::to_string(&TicketBody {
        cap,
        info: info.clone(),
    })
    .expect("ticket always serializes");
    (&ticket.file)
        .write_all(body.as_bytes())
        .map_err(|source| Error::Write {
            path: ticket.path.clone(),
            source,
        })?;
    Ok(ticket)
}

/// Who holds slots and who waits, read under the directory mutex. Read-only:
/// a missing directory means nobody.
pub fn occupancy(dir: &Path) -> Result<Occupancy> {
    if !dir.join(MUTEX).exists() {
        return Ok(Occupancy::default());
    }
    // `status` is not interruptible by flag; Ctrl-C ends it outright.
    let never = AtomicBool::new(false);
    let _mutex = DirLock::take(dir, &never)?;
    let holders = probe_holders(dir)?;
    let (queue, _) = probe_queue(dir, false)?;
    let waiters = queue
        .into_iter()
        .filter_map(|q| {
            q.body.map(|b| Waiter {
                ticket: q.number,
                cap: b.cap,
                info: b.info,
            })
        })
        .collect();
    Ok(Occupancy { holders, waiters })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::error::Error;
    use std::sync::{Arc, Mutex};

    /// The holders of slots in `dir` (those whose info is readable), by slot index.
    fn holders(dir: &Path) -> Result<Vec<HolderInfo>> {
        Ok(occupancy(dir)?
            .holders
            .into_iter()
            .filter_map(|h| h.info)
            .collect())
    }

    fn info(wo: &str) -> HolderInfo {
        HolderInfo::now("/repo", wo)
    }

    fn take(dir: &Path, cap: u32, wo: &str) -> Option<Slot> {
        let no = AtomicBool::new(false);
        acquire(dir, cap, &info(wo), Wait::NonBlocking, &no, &mut |_| {}).expect("acquire")
    }

    fn temp() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().expect("tempdir");
        let dir = t.path().join("slots");
        (t, dir)
    }

    #[test]
    fn cap_is_respected_and_release_frees() {
        let (_t, dir) = temp();
        let a = take(&dir, 2, "a").expect("first");
        let b = take(&dir, 2, "b").expect("second");
        assert_ne!(a.index(), b.index());
        assert!(take(&dir, 2, "c").is_none(), "a third slot of 2");
        let index = a.index();
        drop(a);
        let c = take(&dir, 2, "c").expect("freed slot");
        assert_eq!(c.index(), index, "the lowest free slot is reused");
    }

    /// A process forked by another thread while a slot is released holds a
    /// copy of its file until it execs: the release must not wait for it
    /// (it made `cap_is_respected_and_release_frees` fail now and then).
    #[test]
    fn a_released_slot_is_free_while_a_copy_of_its_file_lives() {
        let (_t, dir) = temp();
        let a = take(&dir, 1, "a").expect("first");
        let copy = rustix::io::dup(a._lock.file()).expect("dup");
        drop(a);
        assert!(
            take(&dir, 1, "b").is_some(),
            "the released slot is still held"
        );
        drop(copy);
    }

    #[test]
    fn a_smaller_cap_counts_every_holder() {
        let (_t, dir) = temp();
        let _a = take(&dir, 6, "a").expect("a");
        let _b = take(&dir, 6, "b").expect("b");
        assert!(take(&dir, 2, "c").is_none(), "2 held, cap 2");
        assert!(take(&dir, 3, "d").is_some(), "2 held, cap 3");
    }

    #[test]
    fn holders_report_info_and_ignore_stale_files() {
        let (_t, dir) = temp();
        let a = take(&dir, 3, "wo-a").expect("a");
        let b = take(&dir, 3, "wo-b").expect("b");
        drop(a);
        // The released slot-0 still contains wo-a's JSON: it must not show.
        assert!(fs::read_to_string(dir.join("slot-0"))
            .expect("slot-0")
            .contains("wo-a"));
        let hs = holders(&dir).expect("holders");
        assert_eq!(hs.len(), 1);
        assert_eq!(hs[0].wo, "wo-b");
        assert_eq!(hs[0].pid, std::process::id());
        assert_eq!(b.index(), 1);
        let occ = occupancy(&dir).expect("occupancy");
        assert_eq!(occ.holders[0].slot, 1);
        // A retaken slot shows the new holder's info only (the file was truncated).
        let c = take(&dir, 3, "c").expect("c");
        assert_eq!(c.index(), 0);
        let text = fs::read_to_string(dir.join("slot-0")).expect("slot-0");
        assert!(!text.contains("wo-a"), "{text}");
    }

    #[test]
    fn holders_report_their_cap() {
        let (_t, dir) = temp();
        let _a = take(&dir, 3, "a").expect("a");
        // A holder that wrote no cap (an older git-arbiter) still shows its info.
        let old = dir.join("slot-1");
        let body = serde_json::to_string(&info("old")).expect("json");
        fs::write(&old, body).expect("write");
        let old = File::open(&old).expect("open");
        assert!(try_lock(&old).expect("lock"));
        let occ = occupancy(&dir).expect("occupancy");
        assert_eq!(occ.holders.len(), 2);
        assert_eq!(occ.holders[0].cap, Some(3));
        assert_eq!(occ.holders[1].cap, None);
        assert_eq!(
            occ.holders[1].info.as_ref().map(|i| i.wo.as_str()),
            Some("old")
        );
    }

    #[test]
    fn interrupt_ends_a_wait() {
        let (_t, dir) = temp();
        let _a = take(&dir, 1, "a").expect("a");
        let flag = Arc::new(AtomicBool::new(false));
        let setter = Arc::clone(&flag);
        let mut states = Vec::new();
        let result = acquire(&dir, 1, &info("b"), Wait::Block, &flag, &mut |s| {
            states.push(*s);
            setter.store(true, Ordering::SeqCst);
        });
        assert!(matches!(result, Err(Error::Interrupted)), "{result:?}");
        assert_eq!(
            states,
            [WaitState {
                cap: 1,
                held: 1,
                ahead: 0
            }]
        );
        // The interrupted waiter left the queue.
        assert!(occupancy(&dir).expect("occ").waiters.is_empty());
        assert_eq!(fs::read_dir(dir.join(QUEUE)).expect("queue").count(), 0);
    }

    #[test]
    fn waiters_are_served_in_arrival_order() {
        let (_t, dir) = temp();
        let first = take(&dir, 1, "holder").expect("holder");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for (i, name) in ["w0", "w1", "w2", "w3"].into_iter().enumerate() {
            let thread_dir = dir.clone();
            let order = Arc::clone(&order);
            threads.push(std::thread::spawn(move || {
                let dir = thread_dir;
                let no = AtomicBool::new(false);
                let slot = acquire(&dir, 1, &info(name), Wait::Block, &no, &mut |_| {})
                    .expect("acquire")
                    .expect("blocking acquire yields a slot");
                order.lock().expect("order").push(name);
                drop(slot);
            }));
            // Each waiter must be queued before the next arrives.
            while occupancy(&dir).expect("occ").waiters.len() < i + 1 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        drop(first);
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(*order.lock().expect("order"), ["w0", "w1", "w2", "w3"]);
    }

    #[test]
    fn a_non_blocking_acquire_does_not_jump_the_queue() {
        let (_t, dir) = temp();
        prepare_dir(&dir).expect("prepare");
        // A live waiter that this test holds in place: every slot is free,
        // yet it is ahead of anyone who comes now.
        let waiter = create_ticket(&dir, 0, 1, &info("waiter")).expect("ticket");
        assert!(
            take(&dir, 1, "jumper").is_none(),
            "a non-blocking acquire took the slot a waiter queued for"
        );
        // With a cap of 2 there is room for the waiter and the newcomer.
        let second = take(&dir, 2, "second").expect("room for both");
        drop(second);
        drop(waiter);
        assert!(take(&dir, 1, "jumper").is_some(), "the queue is empty now");
    }

    #[test]
    fn dead_tickets_are_skipped_and_reaped() {
        let (_t, dir) = temp();
        prepare_dir(&dir).expect("prepare");
        // An unlocked ticket is what a killed waiter leaves behind.
        let stale = dir.join(QUEUE).join("t-00000000000000000000-1");
        fs::write(
            &stale,
            r#"{"cap":1,"info":{"pid":1,"repo":"/r","wo":"dead","since":0}}"#,
        )
        .expect("write");
        assert!(occupancy(&dir).expect("occ").waiters.is_empty());
        assert!(take(&dir, 1, "a").is_some(), "a dead waiter blocks nobody");
        assert!(!stale.exists(), "the dead ticket is removed");
    }

    #[test]
    fn admission_walk_blocks_behind_a_waiter_that_does_not_fit() {
        assert_eq!(admissible(0, [1, 1, 1]), 1);
        assert_eq!(admissible(2, [6, 6, 6]), 3);
        assert_eq!(admissible(2, [2, 6, 6]), 0, "head-of-line waiter blocks");
        assert_eq!(admissible(1, [3, 6, 2]), 2);
        assert_eq!(admissible(0, []), 0);
    }

    #[test]
    fn names_parse_strictly() {
        assert_eq!(slot_index("slot-0"), Some(0));
        assert_eq!(slot_index("slot-12"), Some(12));
        assert_eq!(slot_index("slot-012"), None);
        assert_eq!(slot_index("slot-"), None);
        assert_eq!(slot_index("lock"), None);
        assert_eq!(ticket_number("t-00000000000000000007-42"), Some(7));
        assert_eq!(ticket_number("t-x-42"), None);
    }

    #[test]
    fn directory_is_private_and_repaired_or_refused() {
        let (t, dir) = temp();
        prepare_dir(&dir).expect("prepare");
        let mode = |p: &Path| fs::metadata(p).expect("meta").mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(QUEUE)), 0o700);
        // A slot dir of ours with wider access is repaired.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        prepare_dir(&dir).expect("repair");
        assert_eq!(mode(&dir), 0o700);
        // Some other directory of ours is refused, and left alone.
        let other = t.path().join("other");
        fs::create_dir(&other).expect("mkdir");
        fs::write(other.join("notes.txt"), "x").expect("write");
        fs::set_permissions(&other, fs::Permissions::from_mode(0o755)).expect("chmod");
        let err = prepare_dir(&other).expect_err("refused");
        assert!(matches!(err, Error::Input(_)), "{err:?}");
        assert_eq!(mode(&other), 0o755);
    }

    #[test]
    fn symlinked_entries_are_refused_not_followed() {
        let (t, dir) = temp();
        prepare_dir(&dir).expect("prepare");
        let victim = t.path().join("victim");
        fs::write(&victim, "precious").expect("write");
        let missing = t.path().join("missing");
        for (name, target) in [("slot-0", &victim), ("lock", &victim), ("slot-0", &missing)] {
            let link = dir.join(name);
            // The lock exists once an acquire has run.
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link).expect("symlink");
            let err = acquire(
                &dir,
                2,
                &info("a"),
                Wait::NonBlocking,
                &AtomicBool::new(false),
                &mut |_| {},
            )
            .expect_err("refused");
            assert!(matches!(err, Error::Input(_)), "{name}: {err:?}");
            assert!(err.to_string().contains("is a symbolic link"), "{err}");
            fs::remove_file(&link).expect("rm");
        }
        assert_eq!(fs::read_to_string(&victim).expect("victim"), "precious");
        assert!(!missing.exists(), "a dangling link was followed");
        // A queued ticket is probed the same way.
        let ticket = dir.join(QUEUE).join("t-00000000000000000000-1");
        std::os::unix::fs::symlink(&victim, &ticket).expect("symlink");
        assert!(matches!(occupancy(&dir), Err(Error::Input(_))));
    }

    #[test]
    fn entries_must_be_regular_files_of_ours() {
        let (_t, dir) = temp();
        prepare_dir(&dir).expect("prepare");
        let fifo = dir.join("slot-0");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .expect("mkfifo");
        let err = acquire(
            &dir,
            2,
            &info("a"),
            Wait::NonBlocking,
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .expect_err("a fifo is refused");
        assert!(err.to_string().contains("is not a regular file"), "{err}");
        fs::remove_file(&fifo).expect("rm");
        fs::create_dir(&fifo).expect("mkdir");
        let err = acquire(
            &dir,
            2,
            &info("a"),
            Wait::NonBlocking,
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .expect_err("a directory is refused");
        assert!(err.to_string().contains("is not a regular file"), "{err}");
        // Someone else's file (ownership is checked on the open file's fstat).
        let lock = dir.join(MUTEX);
        let meta = fs::metadata(&lock).expect("lock");
        check_entry(&lock, &meta, meta.uid()).expect("ours");
        let err = check_entry(&lock, &meta, meta.uid() + 1).expect_err("not ours");
        assert!(matches!(err, Error::Input(_)), "{err:?}");
        assert!(err.to_string().contains("belongs to uid"), "{err}");
    }

    #[test]
    fn directory_others_can_write_into_is_refused_not_repaired() {
        let (_t, dir) = temp();
        prepare_dir(&dir).expect("prepare");
        let mode = |p: &Path| fs::metadata(p).expect("meta").mode() & 0o777;
        for (path, open) in [
            (dir.clone(), 0o777),
            (dir.clone(), 0o720),
            (dir.join(QUEUE), 0o702),
        ] {
            fs::set_permissions(&path, fs::Permissions::from_mode(open)).expect("chmod");
            let err = prepare_dir(&dir).expect_err("refused");
            assert!(matches!(err, Error::Input(_)), "{err:?}");
            assert!(err.to_string().contains("writable by other users"), "{err}");
            assert_eq!(mode(&path), open, "{} was chmod'ed", path.display());
            fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).expect("chmod");
        }
        prepare_dir(&dir).expect("private again");
    }

    #[test]
    fn a_file_in_place_of_the_directory_is_an_input_error() {
        let (t, dir) = temp();
        let file = t.path().join("file");
        fs::write(&file, "x").expect("write");
        for path in [file.clone(), file.join("slots")] {
            let err = prepare_dir(&path).expect_err("refused");
            assert!(
                matches!(err, Error::Input(_)),
                "{}: {err:?}",
                path.display()
            );
        }
        // The same for queue/, even as a symlink to a directory.
        prepare_dir(&dir).expect("prepare");
        fs::remove_dir(dir.join(QUEUE)).expect("rmdir");
        std::os::unix::fs::symlink(t.path(), dir.join(QUEUE)).expect("symlink");
        let err = prepare_dir(&dir).expect_err("refused");
        assert!(matches!(err, Error::Input(_)), "{err:?}");
    }

    #[test]
    fn slot_dir_resolution_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let all: &[(&str, &str)] = &[
            ("ARBITER_SLOT_DIR", "/a"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
            ("XDG_STATE_HOME", "/state"),
            ("HOME", "/home/u"),
        ];
        let r = |e: &dyn Fn(&str) -> Option<std::ffi::OsString>, c: Option<&str>| {
            resolve_slot_dir(e, c).expect("resolve")
        };
        assert_eq!(r(&env(all), Some("/cfg")), PathBuf::from("/a"));
        assert_eq!(r(&env(&all[1..]), Some("/cfg")), PathBuf::from("/cfg"));
        assert_eq!(
            r(&env(&all[1..]), Some("~/slots")),
            PathBuf::from("/home/u/slots")
        );
        assert_eq!(
            r(&env(&all[1..]), None),
            PathBuf::from("/run/user/1/git-arbiter")
        );
        assert_eq!(
            r(&env(&all[2..]), None),
            PathBuf::from("/state/git-arbiter")
        );
        assert_eq!(
            r(&env(&all[3..]), None),
            PathBuf::from("/home/u/.local/state/git-arbiter")
        );
        let relative: &[(&str, &str)] = &[("ARBITER_SLOT_DIR", "rel")];
        assert!(matches!(
            resolve_slot_dir(&env(relative), None),
            Err(Error::Input(_))
        ));
        assert!(matches!(
            resolve_slot_dir(&env(&[]), None),
            Err(Error::Input(_))
        ));
    }

    #[test]
    fn cap_bounds() {
        assert_eq!(cap(None, None).expect("default"), defaults::MAX_TOTAL);
        assert_eq!(cap(None, Some(3)).expect("flag"), 3);
        assert!(matches!(cap(None, Some(0)), Err(Error::Input(_))));
        assert!(matches!(cap(None, Some(MAX_CAP + 1)), Err(Error::Input(_))));
    }
}

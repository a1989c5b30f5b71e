//! Conductors: the running `round`/`race` processes of one repository.
//!
//! Each conductor holds an flock on `<git-common-dir>/arbiter/conductors/<name>.lock`
//! for as long as it runs. That gives, with no daemon and no stale-pid guessing:
//! - liveness: a work order `in_progress` under a live owner is never
//!   "recovered" by another conductor (the kernel drops a dead owner's lock);
//! - `git arbiter stop`: a `<name>.stop` file beside each live lock, which the
//!   conductor polls; conductors started later have other names and run normally.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::state::context::Context;
use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating {}: {source}", path.display())]
    Create {
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
    #[error("installing the signal handler: {source}")]
    Signals {
        #[source]
        source: std::io::Error,
    },
    #[error("removing {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {}: {source}", dir.display())]
    List {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Disk space each conductor keeps in a file while it runs, freed when the
/// disk fills so its own state transitions can still be written.
const RESERVE_BYTES: usize = 512 * 1024;

pub fn dir(ctx: &Context) -> PathBuf {
    crate::git::layout::conductors(&ctx.repo)
}

pub struct Conductor {
    pub name: String,
    dir: PathBuf,
    _lock: File,
    interrupt: Arc<AtomicBool>,
}

impl Conductor {
    /// Register this process as a conductor. SIGINT, SIGTERM and SIGHUP (the
    /// terminal closed) set its interrupt flag instead of killing it, so it
    /// can stop in good order.
    pub fn register(ctx: &Context) -> Result<Conductor> {
        let dir = dir(ctx);
        std::fs::create_dir_all(&dir).map_err(|source| Error::Create {
            path: dir.clone(),
            source,
        })?;
        let name = format!("{}-{}", std::process::id(), crate::sys::clock::now_nanos());
        let path = dir.join(format!("{name}.lock"));
        let mut lock = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(|source| Error::Create {
                path: path.clone(),
                source,
            })?;
        // Waits, at most for a probe: the name is this process's alone, but
        // `stop` may be looking at every lock file at this moment.
        fs4::FileExt::lock(&lock).map_err(|source| Error::Lock {
            path: path.clone(),
            source,
        })?;
        let _ = writeln!(lock, "{}", std::process::id());
        // Best effort: on a disk already full there is no reserve to keep.
        let reserve = dir.join(format!("{name}.reserve"));
        if std::fs::write(&reserve, vec![0u8; RESERVE_BYTES]).is_err() {
            let _ = std::fs::remove_file(&reserve);
        }
        let interrupt = Arc::new(AtomicBool::new(false));
        for signal in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::flag::register(signal, Arc::clone(&interrupt))
                .map_err(|source| Error::Signals { source })?;
        }
        Ok(Conductor {
            name,
            dir,
            _lock: lock,
            interrupt,
        })
    }

    /// Has Ctrl-C, SIGTERM or `git arbiter stop` asked us to stop?
    pub fn should_stop(&self) -> bool {
        if self.interrupt.load(Ordering::Relaxed) {
            return true;
        }
        if self.dir.join(format!("{}.stop", self.name)).exists() {
            self.interrupt.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Give the disk space kept at registration back, so that the state
    /// transitions after a "no space left on device" can still be written
    /// (an attempt given back, not spent).
    pub fn release_reserve(&self) {
        let _ = std::fs::remove_file(self.dir.join(format!("{}.reserve", self.name)));
    }

    /// Where the process groups of the commands we run are recorded (see
    /// [`end_orphans`]).
    pub fn groups_dir(&self) -> PathBuf {
        self.dir.join(format!("{}.groups", self.name))
    }

    /// The flag set when we should stop (shared with waiting code such as slots).
    pub fn interrupt_flag(&self) -> &AtomicBool {
        &self.interrupt
    }
}

impl Drop for Conductor {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.groups_dir());
        let _ = std::fs::remove_file(self.dir.join(format!("{}.stop", self.name)));
        self.release_reserve();
        let _ = std::fs::remove_file(self.dir.join(format!("{}.lock", self.name)));
    }
}

/// The process id a conductor's name (`<pid>-<nanos>`, see
/// [`Conductor::register`]) begins with.
pub fn pid_of(name: &str) -> Option<u32> {
    name.split('-').next()?.parse().ok()
}

/// Is this work order being worked on by a conductor that is running now?
/// A claim leased from another clone (`--remote`) is live until its lease
/// expires: that clone's conductors cannot be seen from here.
pub fn owns_live(ctx: &Context, record: &crate::state::Record) -> bool {
    let Some(owner) = record.owner.as_deref() else {
        return false;
    };
    match &record.lease {
        Some(lease) if lease.clone != ctx.clone_id() => !lease.expired(),
        _ => is_live(ctx, owner),
    }
}

/// Is the conductor `name` running now?
pub fn is_live(ctx: &Context, name: &str) -> bool {
    lock_is_held(&dir(ctx).join(format!("{name}.lock")))
}

fn lock_is_held(path: &Path) -> bool {
    File::open(path)
        .is_ok_and(|file| crate::sys::flock::held_by_a_live_process(&file).unwrap_or(false))
}

/// End the commands that conductors killed without warning (SIGKILL, a
/// crash, a power cut) left running: builders run in their own process
/// groups, so they outlive their conductor, keep writing into worktrees that
/// recovery hands to a new attempt, and hold no build slot. Every group a dead
/// conductor recorded gets SIGKILL, unless its leader's pid now belongs to a
/// different process. Returns one report line per group ended.
pub fn end_orphans(ctx: &Context) -> Result<Vec<String>> {
    // A dead conductor's disk reserve is space to give back first.
    for (name, reserve) in entries(ctx, ".reserve")? {
        if !is_live(ctx, &name) {
            let _ = std::fs::remove_file(reserve);
        }
    }
    let mut report = Vec::new();
    for orphan in orphans(ctx)? {
        // ESRCH (already gone) is fine: nothing to report.
        if rustix::process::kill_process_group(orphan.group, rustix::process::Signal::KILL).is_ok()
        {
            report.push(format!(
                "ended process group {} left running by dead conductor {}",
                orphan.group, orphan.conductor
            ));
        }
    }
    for (name, groups) in entries(ctx, ".groups")? {
        if is_live(ctx, &name) {
            continue;
        }
        match std::fs::remove_dir_all(&groups) {
            // Another conductor starting now ended them first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other.map_err(|source| Error::Remove {
                path: groups.clone(),
                source,
            })?,
        }
    }
    report.sort();
    Ok(report)
}

/// A builder's process group a dead conductor left running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub conductor: String,
    pub group: rustix::process::Pid,
}

/// The process groups dead conductors recorded that still run (read only:
/// [`end_orphans`] ends them).
pub fn orphans(ctx: &Context) -> Result<Vec<Orphan>> {
    let this_boot = crate::run::exec::boot_id();
    let mut found = Vec::new();
    for (name, groups) in entries(ctx, ".groups")? {
        // A live conductor made this directory after taking its lock.
        if is_live(ctx, &name) {
            continue;
        }
        for record in std::fs::read_dir(&groups).into_iter().flatten().flatten() {
            let Some(pgid) = record.file_name().to_str().and_then(group_id) else {
                continue;
            };
            let recorded = std::fs::read_to_string(record.path()).unwrap_or_default();
            let ours = is_our_group(
                recorded.trim(),
                this_boot.as_deref(),
                crate::run::exec::process_identity(pgid.as_raw_pid() as u32).as_deref(),
            );
            // Signal 0: does the group still have a process?
            if ours && rustix::process::test_kill_process_group(pgid).is_ok() {
                found.push(Orphan {
                    conductor: name.clone(),
                    group: pgid,
                });
            }
        }
    }
    found.sort_by_key(|o| o.group.as_raw_pid());
    Ok(found)
}

/// The process group a record file names. Only ids above 1: `kill(-1)`
/// would signal every process we may signal, and `kill(-0)` our own group.
fn group_id(file_name: &str) -> Option<rustix::process::Pid> {
    file_name
        .parse::<i32>()
        .ok()
        .filter(|&id| id > 1)
        .and_then(rustix::process::Pid::from_raw)
}

/// Is the group whose leader was `recorded` ([`crate::run::exec::process_identity`])
/// still that group? Not if it was recorded in another boot (it died with
/// it), nor if the leader's pid now names another process. A group whose
/// leader is gone is: Linux hands out no pid that is still a group's id.
fn is_our_group(recorded: &str, this_boot: Option<&str>, leader_now: Option<&str>) -> bool {
    let Some((boot, _)) = recorded.split_once(' ') else {
        return false;
    };
    if this_boot != Some(boot) {
        return false;
    }
    leader_now.is_none_or(|now| now == recorded)
}

/// (conductor name, path) of each `<name><suffix>` in the conductors' directory.
fn entries(ctx: &Context, suffix: &str) -> Result<Vec<(String, PathBuf)>> {
    let dir = dir(ctx);
    let listing = match std::fs::read_dir(&dir) {
        Ok(listing) => listing,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::List { dir, source }.into()),
    };
    Ok(listing
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let name = path.file_name()?.to_str()?.strip_suffix(suffix)?.to_owned();
            Some((name, path))
        })
        .collect())
}

/// Ask every live conductor of this repository to stop; returns their names.
/// A dead conductor's lock file is left alone: removing it could race with a
/// conductor that has just created it and not yet locked it.
pub fn request_stop_all(ctx: &Context) -> Result<Vec<String>> {
    let mut stopped = Vec::new();
    for (name, path) in entries(ctx, ".lock")? {
        if lock_is_held(&path) {
            let stop = dir(ctx).join(format!("{name}.stop"));
            std::fs::write(&stop, b"stop\n").map_err(|source| Error::Write {
                path: stop.clone(),
                source,
            })?;
            stopped.push(name);
        }
    }
    stopped.sort();
    Ok(stopped)
}

#[cfg(test)]
mod tests {
    use super::{group_id, is_our_group, lock_is_held};

    #[test]
    fn a_record_names_a_group_only_by_an_id_above_1() {
        assert_eq!(group_id("4242"), rustix::process::Pid::from_raw(4242));
        for bad in ["1", "0", "-1", "-4242", "", "abc", "42.tmp", " 42"] {
            assert_eq!(group_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_group_is_ours_only_from_this_boot_and_its_own_leader() {
        let boot = Some("b1");
        // The leader still runs: it must be the same process.
        assert!(is_our_group("b1 100", boot, Some("b1 100")));
        assert!(!is_our_group("b1 100", boot, Some("b1 250")));
        // The leader is gone: the group id cannot have been handed out again.
        assert!(is_our_group("b1 100", boot, None));
        // Recorded before a reboot: that group died with the old boot.
        assert!(!is_our_group("b0 100", boot, None));
        assert!(!is_our_group("b0 100", boot, Some("b1 100")));
        // Nothing usable recorded, or no boot id here: leave it alone.
        assert!(!is_our_group("", boot, None));
        assert!(!is_our_group("b1 100", None, None));
    }

    /// Two conductors starting at once both look at a dead one's lock: one's
    /// look must not make it seem alive to the other (which would then leave
    /// the dead one's orders and process groups alone).
    #[test]
    fn a_dead_conductor_stays_dead_while_another_looks_at_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("1-1.lock");
        std::fs::write(&path, "1\n").expect("lock file");
        let looking = std::fs::File::open(&path).expect("open");
        assert!(!crate::sys::flock::held_by_a_live_process(&looking).expect("probe"));
        assert!(!lock_is_held(&path));
        drop(looking);

        let running = std::fs::File::open(&path).expect("open");
        fs4::FileExt::try_lock(&running).expect("lock");
        assert!(lock_is_held(&path));
    }
}

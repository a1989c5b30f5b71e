//! Ref edits that a killed process cannot wedge. Whenever the repository has
//! a `packed-refs` file, gix takes `packed-refs.lock` for every
//! compare-and-swap and deletion; a process killed while holding it leaves it
//! behind, and every later ref edit fails (stock git never clears it either).
//!
//! Each ref edit of git-arbiter runs inside [`guarded`]: a marker file under
//! `<git-common-dir>/arbiter/ref-edits/`, locked (flock) for as long as the
//! edit lasts. The lock of a killed process is released by the kernel, so a
//! marker nobody holds is a killed edit's. A `packed-refs.lock` taken just
//! after such a marker, while no live edit of ours is marked, is that killed
//! edit's and is removed; any other is someone else's and only named
//! ([`blocking_lock`]). A marker also names the lock file of the ref it
//! edits: that `<ref>.lock`, when a dead marker names it and no live one
//! marked before the lock was taken does, was left by the killed edit and
//! is removed before the next edit of
//! that ref (a conductor killed while it wrote the state or made a branch
//! would otherwise stop every later run until someone removed it by hand).
//!
//! Listings of refs go through [`listed`]: a ref deleted or packed by
//! another process between the listing and its read is not an error.

use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// How long after its marker a killed edit may have taken `packed-refs.lock`
/// (an edit takes milliseconds); a lock taken later is not that edit's.
const WINDOW: Duration = Duration::from_secs(10);

fn markers_dir(repo: &gix::Repository) -> PathBuf {
    crate::git::layout::ref_edits(repo)
}

fn packed_refs_lock(repo: &gix::Repository) -> PathBuf {
    repo.common_dir().join("packed-refs.lock")
}

/// Run `edit` (one ref transaction on `reference`, a full name such as
/// `refs/heads/main`, or `HEAD`) marked as git-arbiter's, after clearing the
/// `packed-refs.lock` or `<reference>.lock` a killed edit of ours left.
pub fn guarded<T>(repo: &gix::Repository, reference: &str, edit: impl FnOnce() -> T) -> T {
    let dir = markers_dir(repo);
    clear_ours(&dir, &packed_refs_lock(repo));
    let lock = ref_lock(repo, reference);
    clear_named(&dir, &lock);
    let marker = Marker::take(&dir, &lock);
    // gix trusts its snapshot of `packed-refs` while the file's mtime is
    // unchanged, and a `git pack-refs` beside us can rewrite it within one
    // tick of the file system's clock: a ref packed meanwhile (its loose
    // file gone) would read as its older packed value, or as missing.
    let _ = repo.refs.force_refresh_packed_buffer();
    let out = edit();
    drop(marker);
    out
}

/// Why [`delete`] did not delete a ref.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error("cannot run git to delete {reference}: {source}")]
    Spawn {
        reference: String,
        #[source]
        source: std::io::Error,
    },
    #[error("git could not delete {reference}: {stderr}")]
    Refused { reference: String, stderr: String },
}

/// Delete `reference` (a full name), if it still points at `expected` when
/// given, marked as [`guarded`] marks an edit. Done by stock git, not gix:
/// gix 0.90 deletes a packed ref by rewriting `packed-refs` from a snapshot
/// it read before taking `packed-refs.lock` and validated by mtime alone, so
/// a `git pack-refs` beside it loses every ref packed in between (the
/// integration branch rolled back under a run). git re-reads the file under
/// its lock and validates it by inode and size as well. A ref that does not
/// exist is deleted already (unless `expected` names a value).
pub fn delete(
    repo: &gix::Repository,
    reference: &str,
    expected: Option<gix::ObjectId>,
) -> Result<(), DeleteError> {
    guarded(repo, reference, || {
        if let Some(done) = delete_loose(repo, reference, expected, || {}) {
            return done;
        }
        let mut cmd = std::process::Command::new("git");
        for var in crate::git::config_env::GIT_ENV {
            cmd.env_remove(var);
        }
        cmd.arg("--git-dir")
            .arg(repo.current_dir().join(repo.common_dir()))
            .args(["update-ref", "--no-deref", "-d", reference]);
        if let Some(expected) = expected {
            cmd.arg(expected.to_string());
        }
        let out = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
            .map_err(|source| DeleteError::Spawn {
                reference: reference.to_owned(),
                source,
            })?;
        // Whatever git read, ours is older now.
        let _ = repo.refs.force_refresh_packed_buffer();
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        Err(DeleteError::Refused {
            reference: reference.to_owned(),
            stderr: stderr.lines().next().unwrap_or_default().trim().to_owned(),
        })
    })
}

/// [`delete`] in this process for the plain case: `reference` (under
/// `refs/heads/` or `refs/arbiter/`) is a loose ref alone, pointing at an
/// object, its lock free, and `packed-refs` neither holds it nor is locked.
/// Done as git's files backend does it: under `<ref>.lock`, checked against
/// `expected`, its reflog removed with it. A `git pack-refs` may have packed
/// it meanwhile (it locks `packed-refs` before it reads loose refs): that
/// shows afterwards as `packed-refs.lock` or the ref in `packed-refs`, and
/// git deletes the packed copy. `None` in any other case: git decides, as
/// it waits for locks and keeps `packed-refs` whole (a git process costs a
/// landing about 2 ms per branch, on its critical path). `meanwhile` runs
/// once the loose file is gone (tests pack the ref there).
fn delete_loose(
    repo: &gix::Repository,
    reference: &str,
    expected: Option<gix::ObjectId>,
    meanwhile: impl FnOnce(),
) -> Option<Result<(), DeleteError>> {
    if !(reference.starts_with("refs/heads/") || reference.starts_with("refs/arbiter/"))
        || packed_refs_lock(repo).exists()
        || is_packed(repo, reference)?
    {
        return None;
    }
    let common = repo.common_dir();
    let loose = common.join(reference);
    let lock = gix::lock::File::acquire_to_update_resource(
        &loose,
        gix::lock::acquire::Fail::Immediately,
        None,
        0,
    )
    .ok()?;
    let content = std::fs::read(&loose).ok()?;
    let value = gix::ObjectId::from_hex(content.strip_suffix(b"\n")?).ok()?;
    if expected.is_some_and(|expected| expected != value) {
        return None;
    }
    match std::fs::remove_file(common.join("logs").join(reference)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return None,
        _ => {}
    }
    std::fs::remove_file(&loose).ok()?;
    meanwhile();
    drop(lock);
    remove_empty_parents(common, reference);
    // Packed by `git pack-refs` while we deleted it: its packed copy is ours
    // to delete still.
    if packed_refs_lock(repo).exists() || is_packed(repo, reference) != Some(false) {
        return None;
    }
    Some(Ok(()))
}

/// Is `reference` in `packed-refs`, read afresh (gix's snapshot is
/// trusted by mtime alone)? `None` when that cannot be told.
fn is_packed(repo: &gix::Repository, reference: &str) -> Option<bool> {
    let path = repo.refs.packed_refs_path();
    let buffer = match gix::refs::packed::Buffer::open(path.clone(), 32 * 1024, repo.object_hash())
    {
        Ok(buffer) => buffer,
        Err(_) if !path.exists() => return Some(false),
        Err(_) => return None,
    };
    Some(buffer.try_find(reference).ok()?.is_some())
}

/// The folders a deleted ref and its reflog leave empty, up to the
/// namespace (`refs/heads`, `refs/arbiter`), removed as git removes them.
fn remove_empty_parents(common: &Path, reference: &str) {
    for base in [common.to_path_buf(), common.join("logs")] {
        let mut folder = Path::new(reference).parent();
        while let Some(at) = folder.filter(|f| f.components().count() > 2) {
            if std::fs::remove_dir(base.join(at)).is_err() {
                break;
            }
            folder = at.parent();
        }
    }
}

/// How often [`edit`] tries a ref edit that failed but for a lost race.
const EDIT_TRIES: u32 = 7;

/// [`guarded`] for an edit that may fail for a moment beside git's own
/// maintenance (`git pack-refs` holding `packed-refs.lock`, or moving the
/// ref as it is read): tried again, a little later each time, unless it
/// lost a compare-and-swap (the caller decides about that) or failed
/// [`EDIT_TRIES`] times.
pub fn edit<T>(
    repo: &gix::Repository,
    reference: &str,
    mut edit: impl FnMut() -> Result<T, gix::Error>,
) -> Result<T, gix::Error> {
    let mut pause = Duration::from_millis(5);
    for _ in 1..EDIT_TRIES {
        match guarded(repo, reference, &mut edit) {
            Err(e) if !e.is_conflict() => std::thread::sleep(pause),
            done => return done,
        }
        pause *= 2;
    }
    guarded(repo, reference, edit)
}

/// The lock file git and gix take to edit `reference`, by its canonical
/// path: markers name it by bytes, and a linked worktree's handle spells the
/// common dir `<git-dir>/worktrees/<name>/../..`.
fn ref_lock(repo: &gix::Repository, reference: &str) -> PathBuf {
    // Refs outside `refs/` (HEAD) belong to their worktree.
    let base = if reference.starts_with("refs/") {
        repo.common_dir()
    } else {
        repo.git_dir()
    };
    let base = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
    base.join(format!("{reference}.lock"))
}

/// May the running edit marked at `marked_at` hold the lock file taken at
/// `locked_at`? Not when it was marked after the lock was taken: an edit
/// marks itself before it locks, so it is only waiting for that lock (two
/// edits of the next run, each waiting for a killed one's lock, must not
/// keep each other from clearing it). File times are coarse: equal times
/// may hold.
fn may_hold(marked_at: Option<SystemTime>, locked_at: Option<SystemTime>) -> bool {
    match (marked_at, locked_at) {
        (Some(marked_at), Some(locked_at)) => marked_at <= locked_at,
        _ => true,
    }
}

/// Remove `lock` when a dead marker names it and no live one does, and it
/// was taken within [`WINDOW`] of that marker; then those dead markers.
fn clear_named(dir: &Path, lock: &Path) {
    let Ok(locked_at) = std::fs::symlink_metadata(lock).and_then(|m| m.modified()) else {
        return;
    };
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let named = lock.as_os_str().as_encoded_bytes();
    let (mut dead, mut live, mut close) = (Vec::new(), false, false);
    for entry in listing.flatten() {
        let path = entry.path();
        if being_made(&path) {
            continue;
        }
        let Ok(content) = std::fs::read(&path) else {
            continue;
        };
        if content != named {
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        let marked_at = file.metadata().and_then(|m| m.modified()).ok();
        match look(&file) {
            Look::Running => live |= may_hold(marked_at, Some(locked_at)),
            Look::Finished => {}
            Look::Killed => {
                close |= marked_at.is_some_and(|marked_at| {
                    locked_at
                        .duration_since(marked_at)
                        .unwrap_or_else(|e| e.duration())
                        <= WINDOW
                });
                dead.push(path);
            }
        }
    }
    if live || dead.is_empty() {
        return;
    }
    if close {
        let _ = std::fs::remove_file(lock);
    }
    for path in dead {
        let _ = std::fs::remove_file(path);
    }
}

/// The lock file that stops edits of `reference` (`refs/notes/arbiter`, a
/// full branch name), for an error message: `packed-refs.lock` if it exists,
/// else the ref's own lock.
pub fn blocking_lock(repo: &gix::Repository, reference: &str) -> PathBuf {
    let packed = packed_refs_lock(repo);
    if packed.exists() {
        packed
    } else {
        ref_lock(repo, reference)
    }
}

/// A lock file held this long is no running edit's: git and gix hold one for
/// milliseconds (a `git pack-refs` of a huge repository, for seconds).
const STALE_AGE: Duration = Duration::from_secs(5);

/// Has `lock` stayed untouched for [`STALE_AGE`]? Then waiting is pointless:
/// report it.
pub fn is_stale(lock: &Path) -> bool {
    std::fs::symlink_metadata(lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= STALE_AGE)
}

/// A marker of one running edit: created under a temporary name, locked,
/// then renamed, so no one ever sees it unlocked while its edit runs. Best
/// effort: without it an edit runs as before, only unmarked.
struct Marker {
    path: PathBuf,
    _file: File,
}

impl Marker {
    /// A marker of an edit that takes `lock`, named in it.
    fn take(dir: &Path, lock: &Path) -> Option<Marker> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        std::fs::create_dir_all(dir).ok()?;
        let temp = dir.join(format!("{name}.new"));
        let mut file = File::create(&temp).ok()?;
        if fs4::FileExt::try_lock(&file).is_err() {
            let _ = std::fs::remove_file(&temp);
            return None;
        }
        if std::io::Write::write_all(&mut file, lock.as_os_str().as_encoded_bytes()).is_err() {
            let _ = std::fs::remove_file(&temp);
            return None;
        }
        let path = dir.join(name);
        if std::fs::rename(&temp, &path).is_err() {
            let _ = std::fs::remove_file(&temp);
            return None;
        }
        Some(Marker { path, _file: file })
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        // Removed while still locked; the lock goes with the file handle.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What the markers say about `lock`.
struct Seen {
    /// Markers of edits that are no longer running.
    dead: Vec<PathBuf>,
    /// `lock` exists and a killed edit of ours left it.
    ours: bool,
    /// A marker was left half made longer than [`WINDOW`] ago.
    made_long_ago: bool,
}

/// What a marker, opened by its name, says of its edit.
#[derive(Debug, PartialEq, Eq)]
enum Look {
    /// Its edit runs, or we cannot tell (a running edit's lock must never go).
    Running,
    /// Its edit ended normally after we opened it: no evidence of anything.
    Finished,
    /// Its process was killed during the edit.
    Killed,
}

fn look(file: &File) -> Look {
    if crate::sys::flock::held_by_a_live_process(file).unwrap_or(true) {
        return Look::Running;
    }
    // An edit removes its marker before unlocking it, so an unlocked marker
    // that is gone from its folder (looked at after the lock, in that order)
    // was a finished edit's; taken for a killed one, it could make a lock
    // that someone else took meanwhile look ours.
    if file.metadata().is_ok_and(|m| m.nlink() == 0) {
        Look::Finished
    } else {
        Look::Killed
    }
}

/// A marker under its temporary name: its edit has not started, and a look
/// at it could keep its maker from locking it.
fn being_made(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "new")
}

/// Was `path` last written more than [`WINDOW`] ago? A marker is made in
/// microseconds, so a half-made one that old is a killed process's.
fn is_old(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > WINDOW)
}

fn inspect(dir: &Path, lock: &Path) -> Seen {
    let mut seen = Seen {
        dead: Vec::new(),
        ours: false,
        made_long_ago: false,
    };
    let Ok(listing) = std::fs::read_dir(dir) else {
        return seen;
    };
    let locked_at = std::fs::symlink_metadata(lock)
        .and_then(|m| m.modified())
        .ok();
    let mut live = false;
    let mut left_by_dead = false;
    for entry in listing.flatten() {
        let path = entry.path();
        if being_made(&path) {
            seen.made_long_ago |= is_old(&path);
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        let marked_at = file.metadata().and_then(|m| m.modified()).ok();
        match look(&file) {
            Look::Running => live |= may_hold(marked_at, locked_at),
            Look::Finished => {}
            Look::Killed => {
                if let (Some(locked_at), Some(marked_at)) = (locked_at, marked_at) {
                    // Either way round: file times can be coarser than one edit.
                    let apart = locked_at
                        .duration_since(marked_at)
                        .unwrap_or_else(|e| e.duration());
                    left_by_dead |= apart <= WINDOW;
                }
                seen.dead.push(path);
            }
        }
    }
    seen.ours = locked_at.is_some() && !live && left_by_dead;
    seen
}

/// Remove `lock` if a killed edit of ours left it (see the module docs), and
/// the markers of killed edits once no lock needs them as evidence. Returns
/// whether it removed `lock`.
fn clear_ours(dir: &Path, lock: &Path) -> bool {
    let seen = inspect(dir, lock);
    if seen.made_long_ago {
        remove_half_made(dir);
    }
    let removed = seen.ours && std::fs::remove_file(lock).is_ok();
    if removed || !lock.exists() {
        for path in seen.dead {
            // Still the evidence for the ref lock it names ([`clear_named`]).
            let names_a_lock = std::fs::read(&path).is_ok_and(|named| {
                !named.is_empty() && Path::new(std::ffi::OsStr::from_bytes(&named)).exists()
            });
            if !names_a_lock {
                let _ = std::fs::remove_file(path);
            }
        }
    }
    removed
}

/// Remove the markers that killed processes left half made.
fn remove_half_made(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if being_made(&path) && is_old(&path) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The `packed-refs.lock` of `repo`, if a killed ref edit of git-arbiter left it.
pub fn left_by_killed_edit(repo: &gix::Repository) -> Option<PathBuf> {
    let lock = packed_refs_lock(repo);
    inspect(&markers_dir(repo), &lock).ours.then_some(lock)
}

/// Remove the `packed-refs.lock` a killed ref edit of git-arbiter left, if
/// any (`doctor --fix`); returns its path when it did.
pub fn clear_left_by_killed_edit(repo: &gix::Repository) -> Option<PathBuf> {
    let lock = packed_refs_lock(repo);
    clear_ours(&markers_dir(repo), &lock).then_some(lock)
}

/// One item of a listing of `repo`'s refs. A loose ref whose file went
/// away between the listing and its read (deleted, or packed by `git
/// pack-refs`, by another thread or process) is read afresh by name, as
/// git's files backend does: `None` when it is gone. Listing again instead
/// could fail as often as it was tried while a run deleted branches.
pub fn listed<'r>(
    repo: &'r gix::Repository,
    item: Result<gix::Reference<'r>, gix::Error>,
) -> Result<Option<gix::Reference<'r>>, gix::Error> {
    let err = match item {
        Ok(reference) => return Ok(Some(reference)),
        Err(err) => err,
    };
    let gone = err
        .downcast_any_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound);
    let path = err.metadata().find_map(|m| match m.get("path") {
        Some(gix::error::MetadataValue::Path(path)) => Some(path.clone()),
        _ => None,
    });
    let name = path.as_deref().and_then(|path| {
        [repo.common_dir(), repo.git_dir()]
            .iter()
            .find_map(|base| path.strip_prefix(base).ok())
            .and_then(|rela| rela.to_str())
            .map(|rela| rela.replace(std::path::MAIN_SEPARATOR, "/"))
    });
    match (gone, name) {
        (true, Some(name)) => repo.try_find_reference(name.as_str()),
        _ => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A branch deleted, and one packed, between the listing of the loose
    /// refs and their reads: the deleted one is skipped, the packed one
    /// read from `packed-refs`, the rest as listed.
    #[test]
    fn a_listing_skips_a_ref_deleted_meanwhile_and_finds_one_packed_meanwhile() {
        use crate::testutil::git;
        let (_root, dir, repo_dir) = one_commit_and_branch("arbiter/a");
        for branch in ["arbiter/b", "arbiter/c"] {
            git(&dir, &repo_dir, &["branch", branch]);
        }
        let repo = gix::open_opts(&repo_dir, gix::open::Options::isolated()).expect("open");
        let platform = repo.references().expect("refs");
        let mut listing = platform.prefixed("refs/heads/arbiter/").expect("list");
        let first = listing.next().expect("a").expect("read a");
        assert_eq!(first.name().as_bstr(), "refs/heads/arbiter/a");
        let heads = repo_dir.join(".git/refs/heads/arbiter");
        std::fs::remove_file(heads.join("b")).expect("delete b");
        git(&dir, &repo_dir, &["pack-refs", "--all"]);
        assert!(!heads.join("c").exists(), "c is packed now");
        let rest: Vec<String> = listing
            .filter_map(|item| listed(&repo, item).expect("tolerated"))
            .map(|r| r.name().as_bstr().to_string())
            .collect();
        assert_eq!(rest, ["refs/heads/arbiter/c"]);
        // A ref that is there but garbled is an error still, not skipped.
        std::fs::create_dir_all(&heads).expect("mkdir");
        std::fs::write(heads.join("d"), "not a ref\n").expect("garble d");
        let platform = repo.references().expect("refs");
        let garbled = platform
            .prefixed("refs/heads/arbiter/")
            .expect("list")
            .map(|item| listed(&repo, item))
            .filter(Result::is_err)
            .count();
        assert_eq!(garbled, 1, "the garbled ref's error is passed on");
    }

    /// A repository whose `packed-refs` holds `main` and `gone`, opened by
    /// gix with that file read; then `git pack-refs` packs `late` (a new
    /// branch) and the file is given its old mtime back, as a rewrite in
    /// the same tick of the file system's clock leaves it.
    fn packed_behind_gix_back() -> (tempfile::TempDir, PathBuf, gix::Repository, String) {
        use crate::testutil::git;
        let (root, dir, repo_dir) = one_commit_and_branch("gone");
        git(&dir, &repo_dir, &["pack-refs", "--all"]);
        let repo = gix::open_opts(&repo_dir, gix::open::Options::isolated()).expect("open");
        assert!(repo
            .try_find_reference("refs/heads/gone")
            .expect("find")
            .is_some());
        let packed = repo_dir.join(".git/packed-refs");
        let mtime = std::fs::metadata(&packed)
            .and_then(|m| m.modified())
            .expect("mtime");
        git(
            &dir,
            &repo_dir,
            &["commit", "-q", "--allow-empty", "-m", "two"],
        );
        let late = git(&dir, &repo_dir, &["rev-parse", "HEAD"])
            .trim()
            .to_owned();
        git(&dir, &repo_dir, &["branch", "late"]);
        git(&dir, &repo_dir, &["pack-refs", "--all"]);
        std::fs::File::options()
            .write(true)
            .open(&packed)
            .and_then(|f| f.set_modified(mtime))
            .expect("set mtime");
        (root, repo_dir, repo, late)
    }

    /// gix deletes a packed ref by writing back its snapshot of
    /// `packed-refs`: with a snapshot older than the file, it drops what git
    /// packed meanwhile. [`delete`] leaves that to git, which re-reads the
    /// file under its lock.
    #[test]
    fn deleting_a_packed_ref_keeps_refs_packed_behind_gix_back() {
        let (_root, dir, repo, late) = packed_behind_gix_back();
        delete(&repo, "refs/heads/gone", None).expect("delete");
        let git = |args: &[&str]| crate::testutil::git(&dir, &dir, args);
        assert_eq!(git(&["rev-parse", "refs/heads/late"]).trim(), late);
        assert_eq!(git(&["rev-parse", "main"]).trim(), late);
        assert!(crate::testutil::git_command(&dir, &dir)
            .args(["rev-parse", "-q", "--verify", "refs/heads/gone"])
            .status()
            .is_ok_and(|s| !s.success()));
        // And gix sees the file as it is now.
        assert!(repo
            .try_find_reference("refs/heads/gone")
            .expect("find")
            .is_none());
        assert!(repo
            .try_find_reference("refs/heads/late")
            .expect("find")
            .is_some());
    }

    /// An edit reads the refs as they are, not as gix's snapshot of
    /// `packed-refs` had them: `late`, packed behind its back, is there.
    /// A repository `r` in a scratch folder (returned second) with one
    /// commit on `main` and branch `branch` (loose, with a reflog) at it.
    fn one_commit_and_branch(branch: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        use crate::testutil::{commit_files, git, new_repo, scratch};
        let (root, dir) = scratch();
        let repo_dir = new_repo(&dir, "r");
        commit_files(&dir, &repo_dir, &[], "one");
        git(&dir, &repo_dir, &["branch", branch]);
        (root, dir, repo_dir)
    }

    /// A repository with branches `main` and `arbiter/a` (loose, with a
    /// reflog), and gix's handle on it.
    fn loose_branch() -> (tempfile::TempDir, PathBuf, PathBuf, gix::Repository) {
        let (root, dir, repo_dir) = one_commit_and_branch("arbiter/a");
        let repo = gix::open_opts(&repo_dir, gix::open::Options::isolated()).expect("open");
        (root, dir, repo_dir, repo)
    }

    fn refs_of(dir: &Path, repo_dir: &Path) -> String {
        crate::testutil::git(
            dir,
            repo_dir,
            &["for-each-ref", "--format=%(refname) %(objectname)"],
        )
    }

    #[test]
    fn a_loose_branch_is_deleted_in_process_with_its_reflog_and_folder() {
        let (_root, dir, repo_dir, repo) = loose_branch();
        let git_dir = repo_dir.join(".git");
        assert!(git_dir.join("logs/refs/heads/arbiter/a").exists());
        let done = delete_loose(&repo, "refs/heads/arbiter/a", None, || {});
        assert!(matches!(done, Some(Ok(()))), "the plain case is ours");
        assert!(!refs_of(&dir, &repo_dir).contains("arbiter/a"));
        for gone in ["refs/heads/arbiter", "logs/refs/heads/arbiter"] {
            assert!(!git_dir.join(gone).exists(), "{gone} left behind");
        }
        assert!(git_dir.join("refs/heads").is_dir());
        crate::testutil::git(&dir, &repo_dir, &["fsck", "--strict"]);
    }

    #[test]
    fn a_delete_expecting_another_value_is_left_to_git_and_refused() {
        let (_root, dir, repo_dir, repo) = loose_branch();
        let other =
            gix::ObjectId::from_hex(b"1111111111111111111111111111111111111111").expect("sha");
        assert!(delete_loose(&repo, "refs/heads/arbiter/a", Some(other), || {}).is_none());
        assert!(matches!(
            delete(&repo, "refs/heads/arbiter/a", Some(other)),
            Err(DeleteError::Refused { .. })
        ));
        assert!(refs_of(&dir, &repo_dir).contains("arbiter/a"));
    }

    #[test]
    fn a_packed_branch_is_left_to_git_which_deletes_both_copies() {
        let (_root, dir, repo_dir, repo) = loose_branch();
        crate::testutil::git(&dir, &repo_dir, &["pack-refs", "--all", "--no-prune"]);
        assert!(delete_loose(&repo, "refs/heads/arbiter/a", None, || {}).is_none());
        delete(&repo, "refs/heads/arbiter/a", None).expect("deleted");
        let left = refs_of(&dir, &repo_dir);
        assert!(!left.contains("arbiter/a") && left.contains("refs/heads/main"));
    }

    #[test]
    fn a_branch_packed_while_it_was_deleted_is_deleted_from_packed_refs_too() {
        let (_root, dir, repo_dir, repo) = loose_branch();
        let value = refs_of(&dir, &repo_dir)
            .lines()
            .find_map(|l| l.strip_prefix("refs/heads/arbiter/a ").map(str::to_owned))
            .expect("branch");
        // What a `git pack-refs` that read the loose ref just before it went
        // writes after.
        let pack = || {
            std::fs::write(
                repo_dir.join(".git/packed-refs"),
                format!(
                    "# pack-refs with: peeled fully-peeled sorted \n{value} refs/heads/arbiter/a\n"
                ),
            )
            .expect("write packed-refs")
        };
        assert!(delete_loose(&repo, "refs/heads/arbiter/a", None, pack).is_none());
        assert!(
            refs_of(&dir, &repo_dir).contains("arbiter/a"),
            "packed copy"
        );
        delete(&repo, "refs/heads/arbiter/a", None).expect("deleted");
        assert!(!refs_of(&dir, &repo_dir).contains("arbiter/a"));
    }

    #[test]
    fn deletes_beside_a_looping_pack_refs_delete_exactly_their_refs() {
        use crate::testutil::git;
        let (_root, dir, repo_dir, repo) = loose_branch();
        let input: String = (0..120)
            .map(|i| format!("create refs/heads/arbiter/o{i} HEAD\n"))
            .collect();
        let mut update = std::process::Command::new("git")
            .args(["update-ref", "--stdin"])
            .current_dir(&repo_dir)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("git runs");
        std::io::Write::write_all(update.stdin.as_mut().expect("stdin"), input.as_bytes())
            .expect("write");
        drop(update.stdin.take());
        assert!(update.wait().expect("wait").success());
        let stop = std::sync::atomic::AtomicBool::new(false);
        let packs = AtomicU64::new(0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    // Contended locks make it fail now and then: that is the point.
                    let _ = std::process::Command::new("git")
                        .args(["pack-refs", "--all"])
                        .current_dir(&repo_dir)
                        .output();
                    packs.fetch_add(1, Ordering::Relaxed);
                }
            });
            for i in (0..120).step_by(2) {
                // Each delete meets another pack, at a varying point of it.
                let seen = packs.load(Ordering::Relaxed);
                while packs.load(Ordering::Relaxed) == seen {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_micros(137 * (i % 23)));
                let name = format!("refs/heads/arbiter/o{i}");
                let mut tries = 0;
                while let Err(e) = delete(&repo, &name, None) {
                    tries += 1;
                    assert!(tries < 50, "{name}: {e}");
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        let left = refs_of(&dir, &repo_dir);
        for i in 0..120 {
            let name = format!("refs/heads/arbiter/o{i} ");
            assert_eq!(left.contains(&name), i % 2 == 1, "{name}in\n{left}");
        }
        git(&dir, &repo_dir, &["fsck", "--strict"]);
    }

    #[test]
    fn a_guarded_edit_sees_refs_packed_behind_gix_back() {
        let (_root, _dir, repo, late) = packed_behind_gix_back();
        let seen = guarded(&repo, "refs/heads/late", || {
            repo.try_find_reference("refs/heads/late")
                .expect("find")
                .map(|mut r| r.peel_to_id().expect("peel").to_string())
        });
        assert_eq!(seen.as_deref(), Some(late.as_str()));
    }

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("ref-edits");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let lock = root.path().join("packed-refs.lock");
        (root, dir, lock)
    }

    #[test]
    fn a_lock_beside_a_dead_marker_is_cleared() {
        let (_root, dir, lock) = setup();
        std::fs::write(dir.join("1-0"), "").expect("marker");
        std::fs::write(&lock, "").expect("lock");
        clear_ours(&dir, &lock);
        assert!(!lock.exists());
        assert!(!dir.join("1-0").exists());
    }

    #[test]
    fn a_lock_is_kept_while_a_marked_edit_runs() {
        let (_root, dir, lock) = setup();
        std::fs::write(dir.join("1-0"), "").expect("marker");
        let running = Marker::take(&dir, &lock).expect("marker");
        std::fs::write(&lock, "").expect("lock");
        clear_ours(&dir, &lock);
        assert!(lock.exists(), "a live edit may hold it");
        drop(running);
        clear_ours(&dir, &lock);
        assert!(!lock.exists());
    }

    #[test]
    fn a_lock_without_our_marker_is_not_ours() {
        let (_root, dir, lock) = setup();
        std::fs::write(&lock, "").expect("lock");
        clear_ours(&dir, &lock);
        assert!(lock.exists());
    }

    #[test]
    fn a_lock_taken_long_after_a_dead_marker_is_not_ours() {
        let (_root, dir, lock) = setup();
        let marker = dir.join("1-0");
        std::fs::write(&marker, "").expect("marker");
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        File::options()
            .write(true)
            .open(&marker)
            .and_then(|f| f.set_modified(old))
            .expect("age the marker");
        std::fs::write(&lock, "").expect("lock");
        clear_ours(&dir, &lock);
        assert!(lock.exists());
        std::fs::remove_file(&lock).expect("unlock");
        clear_ours(&dir, &lock);
        assert!(!marker.exists(), "dead markers go once no lock needs them");
    }

    #[test]
    fn a_ref_lock_a_killed_edit_left_is_cleared_before_the_next_edit() {
        let (root, dir, _) = setup();
        let lock = root.path().join("refs/notes/arbiter.lock");
        let marker = killed_edit(&dir, &lock);
        clear_named(&dir, &lock);
        assert!(!lock.exists());
        assert!(!marker.exists());
    }

    /// What an edit of `lock` killed midway leaves: its marker `<dir>/7-0`
    /// naming the lock, which nobody holds, and the lock. Returns the marker.
    fn killed_edit(dir: &Path, lock: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::create_dir_all(lock.parent().expect("parent")).expect("mkdir");
        let marker = dir.join("7-0");
        std::fs::write(&marker, lock.as_os_str().as_encoded_bytes()).expect("marker");
        std::fs::write(lock, "").expect("lock");
        marker
    }

    fn set_age(path: &Path, seconds: u64) {
        let at = std::time::SystemTime::now() - Duration::from_secs(seconds);
        File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(at))
            .expect("age the file");
    }

    /// Two threads of the next run both edit the ref and fail on the lock
    /// a killed edit left: neither's marker may stop the other clearing it
    /// (a round's notes were wedged that way after a kill).
    #[test]
    fn edits_that_started_after_a_killed_edits_lock_do_not_keep_it() {
        let (root, dir, packed) = setup();
        let lock = root.path().join("refs/notes/arbiter.lock");
        let dead = killed_edit(&dir, &lock);
        set_age(&dead, 3);
        set_age(&lock, 2);
        let waiting = Marker::take(&dir, &lock).expect("marker");
        clear_named(&dir, &lock);
        assert!(
            !lock.exists(),
            "the waiting edit's marker is younger than the lock"
        );
        drop(waiting);

        std::fs::write(dir.join("8-0"), "").expect("marker");
        set_age(&dir.join("8-0"), 3);
        std::fs::write(&packed, "").expect("lock");
        set_age(&packed, 2);
        let waiting = Marker::take(&dir, &packed).expect("marker");
        clear_ours(&dir, &packed);
        assert!(
            !packed.exists(),
            "the waiting edit's marker is younger than the lock"
        );
        drop(waiting);
    }

    /// A killed edit made through a linked worktree's handle (a commit on
    /// its branch) named the branch's lock by that handle's common dir,
    /// `<git-dir>/worktrees/<name>/../..`; the next edit of that branch,
    /// through the main repository's handle, must still see it as ours.
    #[test]
    fn a_ref_lock_is_named_alike_through_every_worktree_of_the_repository() {
        use crate::testutil::{git, new_repo, scratch};
        let (_keep, root) = scratch();
        let main = new_repo(&root, "repo");
        git(
            &root,
            &main,
            &["commit", "-q", "--allow-empty", "-m", "base"],
        );
        let linked = root.join("linked");
        let linked_arg = linked.to_str().expect("utf-8");
        git(
            &root,
            &main,
            &["worktree", "add", "-q", "-b", "topic", linked_arg],
        );
        let through_main = gix::open(&main).expect("open main");
        let through_linked = gix::open(&linked).expect("open linked");
        let reference = "refs/heads/topic";
        assert_eq!(
            ref_lock(&through_linked, reference),
            ref_lock(&through_main, reference)
        );

        let lock = ref_lock(&through_linked, reference);
        killed_edit(&markers_dir(&through_linked), &lock);
        guarded(&through_main, reference, || ());
        assert!(!lock.exists(), "the killed edit's lock is cleared");
    }

    /// Edits of the next run look at a killed edit's marker at the same
    /// moment (each build thread writes the state): one's look must not make
    /// the marker seem alive to the other, which would then give up on the
    /// lock the killed edit left (a round exited 2 on it).
    #[test]
    fn a_killed_edits_marker_stays_dead_while_another_edit_looks_at_it() {
        let (root, dir, packed) = setup();
        let lock = root.path().join("refs/notes/arbiter.lock");
        let dead = killed_edit(&dir, &lock);
        let looking = File::open(&dead).expect("open");
        assert!(!crate::sys::flock::held_by_a_live_process(&looking).expect("probe"));
        clear_named(&dir, &lock);
        assert!(!lock.exists(), "the ref lock is cleared");

        drop(looking);

        let dead = dir.join("8-0");
        std::fs::write(&dead, "").expect("marker");
        std::fs::write(&packed, "").expect("lock");
        let looking = File::open(&dead).expect("open");
        assert!(!crate::sys::flock::held_by_a_live_process(&looking).expect("probe"));
        clear_ours(&dir, &packed);
        assert!(!packed.exists(), "packed-refs.lock is cleared");
    }

    /// A marker being made (`<name>.new`, not yet locked or renamed) is
    /// not looked at, so the look cannot stop its edit from locking it, nor
    /// removed; one a process killed while making it is, once old.
    #[test]
    fn a_marker_being_made_is_left_alone_until_old() {
        let (_root, dir, lock) = setup();
        let making = dir.join("9-0.new");
        std::fs::write(&making, "").expect("marker");
        std::fs::write(&lock, "").expect("lock");
        clear_ours(&dir, &lock);
        assert!(lock.exists(), "no marker says it is ours");
        std::fs::remove_file(&lock).expect("unlock");
        clear_ours(&dir, &lock);
        assert!(making.exists(), "a marker being made stays");
        set_age(&making, 60);
        clear_ours(&dir, &lock);
        assert!(!making.exists(), "an old one is a killed process's");
    }

    /// A marker opened just before its edit ended (removed, then unlocked)
    /// says nothing: taken for a killed edit's, it would make a lock that
    /// stock git took within seconds of it look ours, and be removed.
    #[test]
    fn a_marker_its_edit_removed_is_no_evidence() {
        let (_root, dir, lock) = setup();
        let running = Marker::take(&dir, &lock).expect("marker");
        let seen = File::open(&running.path).expect("open");
        assert_eq!(look(&seen), Look::Running);
        drop(running);
        // A process another test forks shares the marker's open file until
        // it execs, and its lock with it: running a moment longer is the
        // safe answer. Once nobody holds it, it is a finished edit's.
        let mut after = look(&seen);
        for _ in 0..1000 {
            if after != Look::Running {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            after = look(&seen);
        }
        assert_eq!(after, Look::Finished);

        std::fs::write(dir.join("7-0"), "").expect("marker");
        let killed = File::open(dir.join("7-0")).expect("open");
        assert_eq!(look(&killed), Look::Killed);
    }

    #[test]
    fn a_ref_lock_is_kept_while_the_edit_naming_it_runs() {
        let (root, dir, _) = setup();
        let lock = root.path().join("refs/heads/main.lock");
        std::fs::create_dir_all(lock.parent().expect("parent")).expect("mkdir");
        let running = Marker::take(&dir, &lock).expect("marker");
        std::fs::write(&lock, "").expect("lock");
        clear_named(&dir, &lock);
        assert!(lock.exists(), "the running edit holds it");
        // A lock no marker names is someone else's.
        let other = root.path().join("refs/heads/other.lock");
        std::fs::write(&other, "").expect("lock");
        clear_named(&dir, &other);
        assert!(other.exists());
        drop(running);
    }
}

//! Warm worktrees (`arbiter.pool`): linked worktrees under
//! `<worktreeDir>/pool/<n>` reused from one work order to the next, within a
//! run and across runs, so a builder's build caches (ignored files such as
//! `target/` or `node_modules/`) stay warm and only the files that differ
//! between two bases are written.
//!
//! The life of a pooled worktree:
//! - [`take`]: a free one is switched to a new branch at the order's base by
//!   a two-way update from the tree it holds ([`crate::git::reset::switch_clean`]), or
//!   a new one is created when none is free.
//! - The attempt runs there; [`setup_needed`] / [`setup_done`] decide whether
//!   the setup hook runs first.
//! - [`give_back`]: its HEAD is detached, the order's branch deleted, and the
//!   worktree reset to the tree it holds with untracked files removed
//!   (ignored ones kept unless `arbiter.poolKeepIgnored=false`): free again.
//!   A halted order's worktree leaves the pool instead, untouched, until
//!   `git arbiter clear` removes it with the order's branch.
//!
//! The bookkeeping is one JSON file per worktree, `<common-dir>/arbiter/pool/<n>.json`,
//! written by tempfile and rename, only by the holder of `<n>.lock` (an
//! flock: a killed holder's lock is released by the kernel). A worktree found
//! with its lock free in a state other than free or left (a run was killed
//! while it switched or cleaned it) is removed by the next [`take`]; one
//! still on an order's branch is judged with that order by
//! [`worktree::cleanup_stale`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gix::bstr::{BString, ByteSlice};
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;
use gix::ObjectId;
use serde::Serialize;

use crate::run::worktree::{self, Info};
use crate::state::context::Context;
pub(crate) use crate::state::ledger::{forget, hold};
use crate::state::ledger::{read_entry, stamps_path, write_entry};
pub use crate::state::ledger::{Entry, State};
use crate::sys::caches::Caches;
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating branch {branch}: {source}")]
    CreateBranch {
        branch: String,
        #[source]
        source: gix::Error,
    },
    #[error("moving HEAD of {}: {source}", dir.display())]
    MoveHead {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("reading HEAD of {}: {source}", dir.display())]
    ReadHead {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("reading the status of {}: {source}", dir.display())]
    Status {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    /// A path of the index or of a directory walk that is no path here.
    #[error("the path '{path}': {source}")]
    Path {
        path: BString,
        #[source]
        source: gix::Error,
    },
    #[error("reading the index of {}: {source}", dir.display())]
    ReadIndex {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("preparing a directory walk: {source}")]
    WalkOptions {
        #[source]
        source: gix::Error,
    },
    #[error("listing the untracked files of {}: {source}", dir.display())]
    Untracked {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("removing {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the pooled worktree {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("reading commit {commit}: {source}")]
    ReadCommit {
        commit: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading the tree of {commit}: {source}")]
    ReadTree {
        commit: ObjectId,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// How a run uses the pool (`--no-pool`, `--setup`, `arbiter.pool*`, `arbiter.setup*`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Reuse worktrees (`arbiter.pool`, default on); off: a fresh worktree per attempt.
    pub enabled: bool,
    /// At most this many free worktrees stay (`arbiter.poolSize`, default: the slot cap plus one).
    pub size: usize,
    /// Budget over the pool's ignored content, in bytes (`arbiter.poolMaxBytes`).
    pub max_bytes: Option<u64>,
    /// Keep ignored files between orders (`arbiter.poolKeepIgnored`, default true).
    pub keep_ignored: bool,
    /// Run in a worktree before its first build, and again when
    /// `setup_inputs` change (`--setup`, `arbiter.setup`).
    pub setup: Option<String>,
    /// Globs (`arbiter.setupInputs`, multi-valued) of the paths whose change reruns the setup.
    pub setup_inputs: Vec<String>,
}

impl Options {
    /// Flags beat `git config`, which beats the defaults; `cap` is the run's slot cap.
    pub fn resolve(
        ctx: &Context,
        no_pool: bool,
        setup: Option<String>,
        cap: u32,
    ) -> Result<Options> {
        let enabled = !no_pool && ctx.config_bool("arbiter.pool")?.unwrap_or(true);
        let size = match ctx.config_u32("arbiter.poolSize")? {
            Some(0) => {
                return Err(
                    InputError::new("config arbiter.poolSize = 0: must be at least 1")
                        .hint("turn the pool off with 'git config arbiter.pool false' instead")
                        .into(),
                )
            }
            Some(n) => n as usize,
            // One worktree per slot, and one for the merge queue, which
            // verifies merged results in a pooled worktree while builds run.
            None => cap as usize + 1,
        };
        let max_bytes = match ctx.config_string("arbiter.poolMaxBytes") {
            None => None,
            Some(raw) => {
                let value = ctx
                    .repo
                    .config_snapshot()
                    .try_integer("arbiter.poolMaxBytes")
                    .ok()
                    .flatten()
                    .and_then(|v| u64::try_from(v).ok());
                match value {
                    Some(v) => Some(v),
                    None => {
                        return Err(InputError::new(format!(
                            "config arbiter.poolMaxBytes = '{raw}' is not a size"
                        ))
                        .hint("e.g. 'git config arbiter.poolMaxBytes 20g' (k, m, g suffixes)")
                        .into())
                    }
                }
            }
        };
        let setup_inputs = ctx.config_strings("arbiter.setupInputs");
        for glob in &setup_inputs {
            input_glob(glob)?;
        }
        Ok(Options {
            enabled,
            size,
            max_bytes,
            keep_ignored: ctx.config_bool("arbiter.poolKeepIgnored")?.unwrap_or(true),
            setup: setup
                .or_else(|| ctx.config_string("arbiter.setup"))
                .filter(|s| !s.trim().is_empty()),
            setup_inputs,
        })
    }
}

fn input_glob(glob: &str) -> Result<globset::GlobMatcher> {
    globset::GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            InputError::new(format!("config arbiter.setupInputs = '{glob}': {e}"))
                .hint("use globs such as 'Cargo.lock' or '**/package-lock.json'")
                .into()
        })
}

/// A pooled worktree this process holds for an attempt, from [`take`] to [`give_back`].
struct Lease {
    n: String,
    branch: String,
    path: PathBuf,
    common: PathBuf,
    opts: Options,
    /// Its order's work is committed and waits in the merge queue, which
    /// needs only the branch: a take may have the worktree back.
    waits_to_land: bool,
    _lock: crate::sys::flock::Held,
}

/// The leases of this process (a [`Caches`] entry). A lease is found by
/// branch, so the round and the race hand back a worktree by the name they
/// created it with.
#[derive(Default)]
struct Leases(Mutex<Vec<Lease>>);

fn leases(caches: &Caches) -> Arc<Leases> {
    caches.get::<Leases>()
}

impl Leases {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Lease>> {
        // A panic elsewhere cannot leave the list half-edited: push and remove only.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn now() -> i64 {
    crate::sys::clock::now()
}

/// A worktree on a new branch `branch` at `base` for an attempt, named
/// `name` when it is not pooled. With the pool on: a free pooled worktree
/// switched to `base` (most recently used first: its caches are the
/// warmest), else a new pooled one. With it off: a fresh worktree
/// `<worktreeDir>/<name>`, as [`worktree::add`]. Leftovers of an earlier
/// run under that name or branch are removed first either way.
pub fn take(
    ctx: &Context,
    opts: &Options,
    name: &str,
    branch: &str,
    base: ObjectId,
) -> Result<Taken> {
    take_as(ctx, opts, name, branch, base, false)
}

/// [`take`] for a round's build: when no pooled worktree is free and the
/// pool is full, the worktree of an order waiting in the merge queue is
/// taken back first ([`waits_to_land`]), so that a long queue does not
/// make the pool check out new worktrees and remove them again.
pub fn take_for_build(
    ctx: &Context,
    opts: &Options,
    name: &str,
    branch: &str,
    base: ObjectId,
) -> Result<Taken> {
    take_as(ctx, opts, name, branch, base, true)
}

fn take_as(
    ctx: &Context,
    opts: &Options,
    name: &str,
    branch: &str,
    base: ObjectId,
    may_reclaim: bool,
) -> Result<Taken> {
    worktree::remove_before_take(ctx, name, branch)?;
    if !opts.enabled {
        return Ok(Taken {
            path: worktree::add(ctx, name, branch, base)?,
            cleaned: Dirt::default(),
        });
    }
    let common = ctx.repo.common_dir().to_owned();
    let mut best = warmest_free(ctx, &common)?;
    if best.is_none() && may_reclaim {
        best = reclaim_from_the_queue(ctx, opts.size)?;
    }
    let mut cleaned = Dirt::default();
    let leased = match best {
        Some((info, entry, lock)) => {
            cleaned = switch(ctx, &info, entry, branch, base, opts.keep_ignored)?;
            (info.name, info.path, lock)
        }
        None => create(ctx, branch, base)?,
    };
    let (n, path, lock) = leased;
    // Whatever an earlier order proved about this worktree is not this one's.
    crate::run::exec::take_settled(&ctx.caches, &path);
    crate::state::ledger::lease(&ctx.caches, branch);
    leases(&ctx.caches).lock().push(Lease {
        n,
        branch: branch.to_owned(),
        path: path.clone(),
        common,
        opts: opts.clone(),
        waits_to_land: false,
        _lock: lock,
    });
    Ok(Taken { path, cleaned })
}

/// Say that the order on `branch` waits in the merge queue: its worktree
/// (if pooled and held here) may go back to the pool, its branch kept,
/// when a take finds the pool full. Otherwise every order waiting to land
/// would hold a worktree, and takes would check out new ones meanwhile,
/// each a write of every file of the tree, only to remove them again.
pub fn waits_to_land(caches: &Caches, branch: &str) {
    let leases = leases(caches);
    let mut all = leases.lock();
    // Moved to the end: those waiting stand in the order they entered the queue.
    if let Some(i) = all.iter().position(|l| l.branch == branch) {
        let mut lease = all.remove(i);
        lease.waits_to_land = true;
        all.push(lease);
    }
}

/// Give back, its branch kept, the worktree of the order that entered the
/// merge queue first of those held here, when the pool holds `size`
/// worktrees or more, and keep it for the take that asked: still locked,
/// so that a take beside it cannot have it first and leave this one to
/// make a new worktree (the pool grew past 200 worktrees that way while
/// the queue was long). `None` when there is none such.
fn reclaim_from_the_queue(
    ctx: &Context,
    size: usize,
) -> Result<Option<(Info, Entry, crate::sys::flock::Held)>> {
    if crate::state::ledger::numbers(ctx.repo.common_dir()).len() < size {
        return Ok(None);
    }
    let reclaiming = ctx.caches.get::<Reclaiming>();
    let lease = {
        let leases = leases(&ctx.caches);
        let mut all = leases.lock();
        let Some(i) = all.iter().position(|l| l.waits_to_land) else {
            return Ok(None);
        };
        // Said before the lease goes: a give-back of this order that finds
        // no lease waits until the worktree is back in the pool.
        reclaiming.lock().insert(all[i].branch.clone());
        all.remove(i)
    };
    // The branch stays this run's (`ledger::is_leased`) until its order
    // leaves the queue and is given back: a recovery pass meanwhile took it
    // for a leftover and deleted it under the lander.
    let branch = lease.branch.clone();
    let name = worktree::name_of_branch(&branch).unwrap_or_default();
    let (n, path, common) = (lease.n.clone(), lease.path.clone(), lease.common.clone());
    let given = give_back_holding(ctx, &name, lease, Keep::Branch);
    reclaiming.lock().remove(&branch);
    let Some(lock) = given? else {
        return Ok(None);
    };
    let entry = read_entry(&common, &n).filter(|e| e.state == State::Free);
    Ok(entry.map(|entry| {
        let info = Info {
            name: n,
            path,
            branch: None,
            head: entry.base.clone(),
            prunable: false,
        };
        (info, entry, lock)
    }))
}

/// The branches whose worktree [`reclaim_from_the_queue`] is handing back
/// (a [`Caches`] entry).
#[derive(Default)]
struct Reclaiming(Mutex<std::collections::BTreeSet<String>>);

impl Reclaiming {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Wait until no take is handing back the worktree of `branch`: the order
/// left the merge queue while its worktree went back to the pool, and what
/// its fate does next (delete the branch, check it out for the user) must
/// find the worktree off the branch.
fn wait_for_reclaim(ctx: &Context, branch: &str) {
    let reclaiming = ctx.caches.get::<Reclaiming>();
    while reclaiming.lock().contains(branch) {
        // A reset takes milliseconds: polled rather than signalled.
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The free pooled worktree to take, locked: the most recently used (its
/// caches are the warmest). Worktrees a killed run left mid-switch,
/// mid-reset or half-made are discarded on the way.
fn warmest_free(
    ctx: &Context,
    common: &Path,
) -> Result<Option<(Info, Entry, crate::sys::flock::Held)>> {
    let free = |info: &Info, entry: Option<&Entry>| {
        info.branch.is_none() && !info.prunable && entry.is_some_and(|e| e.state == State::Free)
    };
    // Most recently used first (its caches are the warmest), judged before
    // any lock is taken: a take locks only the free worktree it keeps (and
    // the broken ones it removes), so a take beside it never finds one it
    // wants locked for a moment and makes a new one instead.
    let mut candidates: Vec<(Info, Option<Entry>)> = worktree::pooled(ctx)?
        .into_iter()
        .map(|info| {
            let entry = read_entry(common, &info.name);
            (info, entry)
        })
        .collect();
    candidates.sort_by_key(|(_, entry)| std::cmp::Reverse(entry.as_ref().map(|e| e.last_use)));
    let mut best: Option<(Info, Entry, crate::sys::flock::Held)> = None;
    for (info, seen) in candidates {
        if best.is_some() && free(&info, seen.as_ref()) {
            continue;
        }
        let Some(lock) = hold(ctx, &info.name)? else {
            continue;
        };
        // Under its lock, as it is now.
        let entry = read_entry(common, &info.name);
        match entry {
            Some(entry) if free(&info, Some(&entry)) => {
                if best.is_none() {
                    best = Some((info, entry, lock));
                }
            }
            Some(Entry {
                state: State::Left, ..
            }) => {}
            // Still on an order's branch: that order's worktree, judged with
            // it by `worktree::cleanup_stale` (a halted order's is kept).
            _ if info.branch.is_some() && !info.prunable => {}
            // A killed run left it mid-switch, mid-reset or half-made.
            _ => discard(ctx, &info)?,
        }
    }
    Ok(best)
}

/// A worktree taken for an attempt.
#[derive(Debug)]
pub struct Taken {
    pub path: PathBuf,
    /// What was found in it, pooled and free, that its give-back had not
    /// left there, and was undone before the attempt.
    pub cleaned: Dirt,
}

/// Remove a pooled worktree nobody holds and its bookkeeping.
fn discard(ctx: &Context, info: &Info) -> Result<()> {
    remove_pooled(ctx, &info.path)?;
    forget(ctx, &info.name)
}

/// Remove the pooled worktree at `path`, and what this process stamped of
/// its folders (a worktree made there later is another).
fn remove_pooled(ctx: &Context, path: &Path) -> Result<()> {
    crate::git::stamps::forget(&ctx.caches, path);
    worktree::remove_pooled(ctx, path)
}

/// A new pooled worktree `pool/<n>` (the lowest free number) with `branch` at `base`.
fn create(
    ctx: &Context,
    branch: &str,
    base: ObjectId,
) -> Result<(String, PathBuf, crate::sys::flock::Held)> {
    let dir = worktree::pool_dir(ctx)?;
    let common = ctx.repo.common_dir().to_owned();
    for i in 0..u32::MAX {
        let n = i.to_string();
        // A folder there that is not a registered worktree is not ours to
        // overwrite, unless its entry says a creation of ours was killed
        // there (and nobody holds it): that half-made worktree goes.
        let path = dir.join(&n);
        if std::fs::symlink_metadata(&path).is_ok() {
            let killed = read_entry(&common, &n).is_some_and(|e| e.state == State::Creating);
            if !killed {
                continue;
            }
            let Some(_held) = hold(ctx, &n)? else {
                continue;
            };
            worktree::clear_half_made(ctx, &n, &path)?;
        }
        let Some(lock) = hold(ctx, &n)? else {
            continue;
        };
        // A registration a killed `add` left under this number, or the next
        // `add` would register beside it.
        worktree::clear_half_made(ctx, &n, &path)?;
        let mut entry = Entry {
            state: State::Creating,
            pid: Some(std::process::id()),
            branch: Some(branch.to_owned()),
            base: Some(base.to_string()),
            last_use: now(),
            ..Entry::default()
        };
        write_entry(&common, &n, &entry)?;
        let path = match worktree::add_under(ctx, Some(worktree::POOL_DIR), &n, branch, base) {
            Ok(path) => path,
            Err(e) => {
                let _ = forget(ctx, &n);
                return Err(e);
            }
        };
        // Split from the start, so that its first switch writes a few entries.
        // Only speed depends on it: an index left whole (a full disk) still
        // serves, and the next write of it tries again.
        crate::git::stamps::forget(&ctx.caches, &path);
        if let Ok(wt) = open(ctx, &path) {
            let _ = crate::git::index_lock::keep_index_split(&wt);
            // Made from `base` alone, and nothing of ours writes there before
            // the builder: stamped as a switch stamps (only the folders
            // older than this moment count).
            if let Ok(tree) = ctx.tree_of(base) {
                crate::git::stamps::remember(&ctx.caches, &wt, &path, tree);
            }
        }
        entry.state = State::Held;
        write_entry(&common, &n, &entry)?;
        return Ok((n, path, lock));
    }
    Err(InputError::new(format!(
        "no number is free for a pooled worktree in {}",
        dir.display()
    ))
    .hint("run 'git arbiter pool prune --all'")
    .into())
}

/// Switch the free pooled worktree `info` (left clean at `entry.tree`) to
/// a new branch `branch` at `base`: only the files that differ are
/// written. Whatever was written there since it was given back (a
/// builder's leftover process, a person looking around) is undone first
/// and returned.
fn switch(
    ctx: &Context,
    info: &Info,
    mut entry: Entry,
    branch: &str,
    base: ObjectId,
    keep_ignored: bool,
) -> Result<Dirt> {
    crate::git::promisor::fetch_missing(&ctx.repo, base)?;
    let common = ctx.repo.common_dir().to_owned();
    let base_tree = ctx.tree_of(base)?;
    // What the process that made it free stamped spares this one's proof
    // (`dirt`) a read of every folder.
    crate::git::stamps::load(&ctx.caches, &info.path, &stamps_path(&common, &info.name));
    entry.state = State::Switching;
    entry.pid = Some(std::process::id());
    entry.branch = Some(branch.to_owned());
    entry.base = Some(base.to_string());
    entry.last_use = now();
    write_entry(&common, &info.name, &entry)?;
    crate::sys::crash::point("pool-switch.before");
    let full = format!("refs/heads/{branch}");
    crate::git::refguard::edit(&ctx.repo, &full, || {
        ctx.repo.reference(
            full.as_str(),
            base,
            PreviousValue::MustNotExist,
            format!("arbiter: pooled worktree {}", info.name),
        )
    })
    .map_err(|source| Error::CreateBranch {
        branch: branch.to_owned(),
        source,
    })?;
    let wt = open(ctx, &info.path)?;
    let found = hold_exactly(ctx, &wt, &entry, base_tree, keep_ignored)?;
    attach_head(&wt, &full)?;
    // Clean now, and nothing of ours writes there before the builder: the
    // search for its untracked files lists only the folders that changed.
    crate::git::stamps::remember(&ctx.caches, &wt, &info.path, base_tree);
    crate::sys::crash::point("pool-switch.after");
    entry.state = State::Held;
    write_entry(&common, &info.name, &entry)?;
    Ok(found)
}

/// Make the pooled worktree `wt`, whose ledger entry is `entry`, hold
/// exactly `base_tree`: only the difference from the tree the give-back
/// left is written when its index and files are proved to hold that tree,
/// else it is reset. Returns what was found changed since the give-back.
fn hold_exactly(
    ctx: &Context,
    wt: &gix::Repository,
    entry: &Entry,
    base_tree: ObjectId,
    keep_ignored: bool,
) -> Result<Dirt> {
    let old_tree = entry
        .tree
        .as_deref()
        .and_then(|t| ObjectId::from_hex(t.as_bytes()).ok());
    // The index is the one the give-back left (its checksum says so), so
    // index and files hold the old tree: only the difference is written.
    let mut trusted = entry.index_checksum.is_some()
        && crate::git::index_memo::index_file_checksum(wt).map(|c| c.to_string())
            == entry.index_checksum;
    // A worktree pooled before indexes were split is split now (speed only,
    // as in `create`).
    let _ = crate::git::index_lock::keep_index_split(wt);
    // Free is what the give-back left, not what is there now: proved. An
    // index that cannot be read (its shared index removed) proves nothing:
    // the whole worktree is reset below.
    let found = match trusted {
        true => dirt(&ctx.caches, wt).unwrap_or_else(|_| {
            trusted = false;
            Dirt::default()
        }),
        false => Dirt::default(),
    };
    if found.modified.is_empty() && !found.untracked.is_empty() {
        let listing = found
            .untracked
            .iter()
            .map(|p| (p.trim_end_matches('/').into(), false))
            .collect();
        remove_listed(wt, listing, true, None, false)?;
    }
    let switched = match old_tree {
        // A tracked file changed since: the whole worktree is reset below.
        Some(old_tree) if trusted && found.modified.is_empty() => {
            let changed = crate::git::diff::changed_paths(&ctx.repo, old_tree, base_tree)?;
            let ignore_rules_changed = changed
                .iter()
                .any(|c| c.path == b".gitignore" || c.path.ends_with(b"/.gitignore"));
            let switched =
                crate::git::reset::switch_clean(&ctx.caches, wt, old_tree, base_tree, &changed)?;
            // Files the old rules ignored may be untracked under the new ones.
            if switched && ignore_rules_changed {
                remove_untracked(wt, true)?;
            }
            switched
        }
        _ => false,
    };
    // The index is not the one the reset wrote: do it all again.
    if !switched {
        crate::git::reset::reset_to(&ctx.caches, wt, base_tree)?;
        remove_untracked(wt, keep_ignored)?;
    }
    Ok(found)
}

fn open(ctx: &Context, path: &Path) -> Result<gix::Repository> {
    worktree::open_linked(&ctx.caches, &ctx.repo, path)
}

fn set_head(wt: &gix::Repository, new: Target, message: String) -> Result<()> {
    let head: gix::refs::FullName = "HEAD".try_into().expect("HEAD is a valid ref name");
    crate::git::refguard::edit(wt, "HEAD", || {
        wt.edit_reference(RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: message.clone().into(),
                },
                expected: PreviousValue::Any,
                new: new.clone(),
            },
            name: head.clone(),
            deref: false,
        })
    })
    .map_err(|source| Error::MoveHead {
        dir: wt.workdir().unwrap_or(wt.git_dir()).to_owned(),
        source,
    })?;
    Ok(())
}

/// Put the worktree's HEAD on `full` (whose tip is the tree it now holds).
fn attach_head(wt: &gix::Repository, full: &str) -> Result<()> {
    let name: gix::refs::FullName = full
        .try_into()
        .map_err(|_| InputError::new(format!("'{full}' is not a valid branch name")))?;
    set_head(
        wt,
        Target::Symbolic(name),
        format!("arbiter: pooled for {full}"),
    )
}

/// Hand back the worktree of an attempt on `branch` (named `name` when not
/// pooled). `keep`: its order halted or its work stays for the user: a
/// pooled worktree leaves the pool untouched, a fresh one stays. Otherwise
/// the branch is deleted and the worktree reset for the next order (or
/// removed when the pool is full); without the pool it is removed.
pub fn give_back(ctx: &Context, name: &str, branch: &str, keep: bool) -> Result<()> {
    give_back_as(
        ctx,
        name,
        branch,
        if keep { Keep::All } else { Keep::Nothing },
    )
}

/// [`give_back`] of an attempt whose work waits to land: its worktree goes
/// back to the pool (or is removed), its branch stays.
pub fn give_back_keeping_branch(ctx: &Context, name: &str, branch: &str) -> Result<()> {
    give_back_as(ctx, name, branch, Keep::Branch)
}

/// What of an attempt stays when its worktree is given back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Nothing,
    Branch,
    /// The worktree and the branch, for the user.
    All,
}

/// This process's lease of `branch`'s pooled worktree, ended.
fn end_lease(ctx: &Context, branch: &str) -> Option<Lease> {
    let leases = leases(&ctx.caches);
    let mut all = leases.lock();
    all.iter()
        .position(|l| l.branch == branch)
        .map(|i| all.remove(i))
}

fn give_back_as(ctx: &Context, name: &str, branch: &str, keep: Keep) -> Result<()> {
    let given = match end_lease(ctx, branch) {
        Some(lease) => give_back_lease(ctx, name, lease, keep),
        None => {
            wait_for_reclaim(ctx, branch);
            match keep {
                Keep::All => Ok(()),
                Keep::Branch => worktree::remove_keeping_branch(ctx, name, branch),
                Keep::Nothing => worktree::remove(ctx, name, branch),
            }
        }
    };
    // This run's until it is given back: a recovery pass in between took
    // the branch of an order that had just landed for a leftover, and
    // reported deleting it.
    crate::state::ledger::release(&ctx.caches, branch);
    given
}

/// [`give_back_as`] of the ended `lease` of the attempt `name`.
fn give_back_lease(ctx: &Context, name: &str, lease: Lease, keep: Keep) -> Result<()> {
    let budget = lease.opts.max_bytes;
    let freed = give_back_holding(ctx, name, lease, keep)?;
    match (freed, budget) {
        (Some(lock), Some(max)) => {
            drop(lock);
            enforce_budget(ctx, max)
        }
        _ => Ok(()),
    }
}

/// [`give_back_lease`], still holding the worktree's lock when it is free
/// in the pool again (its budget not enforced: the caller takes it again).
fn give_back_holding(
    ctx: &Context,
    name: &str,
    lease: Lease,
    keep: Keep,
) -> Result<Option<crate::sys::flock::Held>> {
    let branch = lease.branch.as_str();
    let settled = crate::run::exec::take_settled(&ctx.caches, &lease.path);
    let mut entry = read_entry(&lease.common, &lease.n).unwrap_or_default();
    entry.last_use = now();
    if keep == Keep::All {
        crate::git::stamps::forget(&ctx.caches, &lease.path);
        entry.state = State::Left;
        return write_entry(&lease.common, &lease.n, &entry).map(|()| None);
    }
    entry.state = State::Cleaning;
    write_entry(&lease.common, &lease.n, &entry)?;
    let wt = open(ctx, &lease.path)?;
    let tip = wt
        .head_id()
        .map_err(|source| Error::ReadHead {
            dir: lease.path.clone(),
            source,
        })?
        .detach();
    set_head(
        &wt,
        Target::Object(tip),
        format!("arbiter: {branch} is done, back to the pool"),
    )?;
    if keep == Keep::Nothing {
        worktree::remove(ctx, name, branch)?;
    }
    if full_without(ctx, &lease.n, lease.opts.size)? {
        remove_pooled(ctx, &lease.path)?;
        return forget(ctx, &lease.n).map(|()| None);
    }
    let cleaned = clean_for_the_pool(ctx, &wt, &lease, tip, settled);
    let (tree, kept, checksum) = match cleaned {
        Ok(cleaned) => cleaned,
        // A worktree that cannot be reset (a full disk, a file it cannot
        // remove) leaves the pool rather than stopping the run; the order's
        // work is on the integration branch or discarded already.
        Err(e) => {
            return match remove_pooled(ctx, &lease.path) {
                Ok(()) => forget(ctx, &lease.n).map(|()| None),
                Err(_) => Err(e),
            };
        }
    };
    crate::git::stamps::save(
        &ctx.caches,
        &lease.path,
        &stamps_path(&lease.common, &lease.n),
    );
    entry.state = State::Free;
    entry.base = Some(tip.to_string());
    entry.tree = Some(tree.to_string());
    entry.index_checksum = checksum.map(|c| c.to_string());
    entry.ignored_bytes = kept;
    if !lease.opts.keep_ignored {
        // Whatever the setup made (ignored files) is gone with them.
        entry.setup_tree = None;
    }
    write_entry(&lease.common, &lease.n, &entry)?;
    let Lease { _lock: lock, .. } = lease;
    Ok(Some(lock))
}

/// Make the pooled worktree `wt`, its order done at `tip`, hold exactly
/// `tip`'s tree, its untracked files gone (and its ignored ones unless the
/// pool keeps them). `settled`: what was proved of its files when the
/// builder's leftovers were committed, if nothing of ours ran there since.
/// Returns the tree, the bytes of ignored files kept (when measured) and
/// the index checksum.
fn clean_for_the_pool(
    ctx: &Context,
    wt: &gix::Repository,
    lease: &Lease,
    tip: ObjectId,
    settled: Option<(ObjectId, ObjectId)>,
) -> Result<(ObjectId, Option<u64>, Option<ObjectId>)> {
    let keep_ignored = lease.opts.keep_ignored;
    // Its files were proved equal to the tip when the builder's leftovers
    // were committed, and nothing of ours ran there since: only the ignored
    // files it keeps are left besides. Walking every file again would prove
    // it twice (at 50,000 files, most of what a give-back costs). The
    // stamps taken when it was handed to the builder stay: they vouch for
    // no file, only that a folder still holds the names it held then, as
    // long as the index tracks the same names there (see `stamps`); so the
    // next take in this process lists only the folders that changed.
    let settled = settled.filter(|(commit, checksum)| {
        *commit == tip && crate::git::index_memo::index_file_checksum(wt) == Some(*checksum)
    });
    let tree = ctx.tree_of(tip)?;
    if let Some((_, checksum)) = settled.filter(|_| keep_ignored && lease.opts.max_bytes.is_none())
    {
        crate::sys::crash::point("pool-clean.after");
        return Ok((tree, None, Some(checksum)));
    }
    // Stamped before the walk proves the folders clean: a name that
    // comes or goes from here on, the walk's own removals included,
    // gives its folder a new change time, and the next take in this
    // process lists it again (see `dirt`).
    crate::git::stamps::remember(&ctx.caches, wt, &lease.path, tree);
    // The walk for untracked files and the reset each read the whole
    // worktree: they look at once. The walk judges by the index as the
    // builder left it; whatever it lists that the reset's index tracks
    // (the builder unstaged a file of the tree) was written by the reset and stays.
    let walker = wt.clone();
    let (reset, listing) = std::thread::scope(|scope| {
        let walk = scope.spawn(move || untracked(&walker));
        let reset = crate::git::reset::reset_to(&ctx.caches, wt, tree);
        let listing = walk.join().unwrap_or_else(|_| {
            Err(crate::sys::error::Error::Input(InputError::new(
                "listing the untracked files of a pooled worktree failed",
            )))
        });
        (reset, listing)
    });
    let (index, checksum) = reset?;
    // The size of what stays is walked for a budget only: a whole
    // `node_modules/` on every give-back would cost more than the rest.
    let measure = lease.opts.max_bytes.is_some();
    let kept = remove_listed(wt, listing?, keep_ignored, Some(&index), measure)?;
    crate::sys::crash::point("pool-clean.after");
    Ok((tree, kept, checksum))
}

/// Are `size` pooled worktrees free already, besides `n`? Each free one has
/// an entry in the ledger: with fewer entries than `size` besides `n`'s,
/// the registrations need not be listed.
fn full_without(ctx: &Context, n: &str, size: usize) -> Result<bool> {
    let others = crate::state::ledger::numbers(ctx.repo.common_dir())
        .iter()
        .filter(|other| *other != n)
        .count();
    Ok(others >= size && free_count(ctx)? >= size)
}

/// How many pooled worktrees are free now.
fn free_count(ctx: &Context) -> Result<usize> {
    let common = ctx.repo.common_dir();
    Ok(worktree::pooled(ctx)?
        .iter()
        .filter(|i| read_entry(common, &i.name).is_some_and(|e| e.state == State::Free))
        .count())
}

/// Above `max` bytes of ignored content in free worktrees, the least
/// recently used lose their ignored files first.
fn enforce_budget(ctx: &Context, max: u64) -> Result<()> {
    let common = ctx.repo.common_dir().to_owned();
    let mut free = Vec::new();
    for info in worktree::pooled(ctx)? {
        let Some(entry) = read_entry(&common, &info.name).filter(|e| e.state == State::Free) else {
            continue;
        };
        free.push((info, entry));
    }
    // Given back before the budget was set: measured now, once.
    for (info, entry) in &mut free {
        if entry.ignored_bytes.is_some() {
            continue;
        }
        let Some(_lock) = hold(ctx, &info.name)? else {
            continue;
        };
        if read_entry(&common, &info.name).is_none_or(|e| e.state != State::Free) {
            continue;
        }
        // One that cannot be walked counts as empty, as before the budget.
        let Ok(bytes) = ignored_size(ctx, &info.path) else {
            continue;
        };
        entry.ignored_bytes = Some(bytes);
        write_entry(&common, &info.name, entry)?;
    }
    let mut total: u64 = free.iter().filter_map(|(_, e)| e.ignored_bytes).sum();
    free.sort_by_key(|(_, e)| e.last_use);
    for (info, mut entry) in free {
        if total <= max {
            break;
        }
        let bytes = entry.ignored_bytes.unwrap_or(0);
        if bytes == 0 {
            continue;
        }
        let Some(_lock) = hold(ctx, &info.name)? else {
            continue;
        };
        // Taken and given back meanwhile: its numbers changed, look again next time.
        if read_entry(&common, &info.name).is_none_or(|e| e.state != State::Free) {
            continue;
        }
        remove_untracked(&open(ctx, &info.path)?, false)?;
        entry.ignored_bytes = Some(0);
        entry.setup_tree = None;
        write_entry(&common, &info.name, &entry)?;
        total -= bytes;
    }
    Ok(())
}

/// The top folder of the pooled worktree `wt`.
fn files_of(wt: &gix::Repository) -> Result<PathBuf> {
    wt.workdir().map(Path::to_owned).ok_or_else(|| {
        crate::sys::error::Error::Input(InputError::new("a pooled worktree without files"))
    })
}

/// Remove the untracked files of `wt` (and its ignored ones unless
/// `keep_ignored`).
fn remove_untracked(wt: &gix::Repository, keep_ignored: bool) -> Result<()> {
    let listing = untracked(wt)?;
    remove_listed(wt, listing, keep_ignored, None, false).map(drop)
}

/// What a worktree holds besides its index: tracked files whose content
/// differs from it, and untracked files outside the ignored ones (a wholly
/// untracked folder as one path, ending in `/`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirt {
    pub modified: Vec<String>,
    pub untracked: Vec<String>,
}

impl Dirt {
    pub fn is_empty(&self) -> bool {
        self.modified.is_empty() && self.untracked.is_empty()
    }

    /// One line for an attempt's log about the dirt a take undid; `None`
    /// when there was none.
    pub fn cleaned_report(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if !self.modified.is_empty() {
            parts.push(format!(
                "restored tracked files changed since it was given back: {}",
                crate::git::paths::list(&self.modified)
            ));
        }
        if !self.untracked.is_empty() {
            parts.push(format!(
                "removed untracked files: {}",
                crate::git::paths::list(&self.untracked)
            ));
        }
        Some(format!(
            "the pooled worktree was not as left: {}",
            parts.join("; ")
        ))
    }
}

/// The [`Dirt`] of worktree `wt`, found as `git status` finds it with no
/// untracked cache: every tracked file's stat data (its content when they
/// differ), every folder read but those whose change time proves that no
/// name came or went since this process saw the worktree clean (see
/// [`crate::git::stamps`]). A folder's modification time proves nothing here: a
/// file can be written into it and that time set back; the change time
/// cannot be.
pub fn dirt(caches: &Caches, wt: &gix::Repository) -> Result<Dirt> {
    use gix::status::index_worktree::Item;
    if let Some((modified, untracked)) = crate::git::stage::changes(caches, wt)? {
        return Ok(Dirt {
            modified,
            untracked,
        });
    }
    let dir = files_of(wt)?;
    let status = |source| Error::Status {
        dir: dir.clone(),
        source,
    };
    let iter = wt
        .status(gix::progress::Discard)
        .map_err(status)?
        .untracked_files(gix::status::UntrackedFiles::Collapsed)
        .index_worktree_rewrites(None)
        .into_index_worktree_iter(Vec::new())
        .map_err(status)?;
    let mut found = Dirt::default();
    for item in iter {
        let item = item.map_err(status)?;
        if !crate::git::status::is_edit(&item) {
            continue;
        }
        let path = item.rela_path().to_str_lossy().into_owned();
        match &item {
            Item::DirectoryContents { entry, .. } => {
                if entry.status == gix::dir::entry::Status::Untracked {
                    let slash = if entry.disk_kind == Some(gix::dir::entry::Kind::Directory) {
                        "/"
                    } else {
                        ""
                    };
                    found.untracked.push(format!("{path}{slash}"));
                }
            }
            _ => found.modified.push(path),
        }
    }
    found.modified.sort();
    found.untracked.sort();
    Ok(found)
}

/// The bytes of ignored content in the worktree at `path`.
fn ignored_size(ctx: &Context, path: &Path) -> Result<u64> {
    let wt = open(ctx, path)?;
    let top = files_of(&wt)?;
    let mut bytes = 0;
    for (rela_path, ignored) in untracked(&wt)? {
        if ignored {
            let rel = gix::path::from_bstr(rela_path.as_bstr()).map_err(|source| Error::Path {
                path: rela_path.clone(),
                source,
            })?;
            bytes += size_of(&top.join(rel));
        }
    }
    Ok(bytes)
}

/// The untracked and ignored paths of `wt` (folders whose content is all
/// of one kind as one entry), relative to its top; `true` for ignored ones.
fn untracked(wt: &gix::Repository) -> Result<Vec<(gix::bstr::BString, bool)>> {
    use gix::dir::entry::Status;
    use gix::dir::walk::EmissionMode;
    let dir = files_of(wt)?;
    // Without its checksum verified, as `crate::git::index_lock::read_index` reads it.
    let index = gix::index::File::at_or_default(
        wt.index_path(),
        wt.object_hash(),
        true,
        Default::default(),
    )
    .map_err(|source| Error::ReadIndex {
        dir: dir.clone(),
        source,
    })?;
    let options = wt
        .dirwalk_options()
        .map_err(|source| Error::WalkOptions { source })?
        .emit_untracked(EmissionMode::CollapseDirectory)
        .emit_ignored(Some(EmissionMode::CollapseDirectory))
        .for_deletion(Some(Default::default()))
        .emit_pruned(false);
    let mut found = gix::dir::walk::delegate::Collect::default();
    wt.dirwalk(
        &index,
        None::<&str>,
        &std::sync::atomic::AtomicBool::new(false),
        options,
        &mut found,
    )
    .map_err(|source| Error::Untracked { dir, source })?;
    let mut listing = Vec::new();
    for (entry, _) in found.unorded_entries {
        let ignored = matches!(entry.status, Status::Ignored(_));
        if !ignored && entry.status != Status::Untracked {
            continue;
        }
        listing.push((entry.rela_path, ignored));
    }
    Ok(listing)
}

/// Remove the paths of `listing` ([`untracked`]) in `wt`, the ignored ones
/// only unless `keep_ignored`, and none that `tracked` (the index now on
/// disk, when the listing was made with an earlier one) has as a file or
/// folder; returns the bytes of ignored content kept when asked to `measure`.
fn remove_listed(
    wt: &gix::Repository,
    listing: Vec<(gix::bstr::BString, bool)>,
    keep_ignored: bool,
    tracked: Option<&gix::index::File>,
    measure: bool,
) -> Result<Option<u64>> {
    let dir = files_of(wt)?;
    let mut kept = 0;
    for (rela_path, ignored) in listing {
        let repo_path = rela_path.as_bstr();
        if tracked.is_some_and(|index| {
            index.entry_by_path(repo_path).is_some() || index.path_is_directory(repo_path)
        }) {
            continue;
        }
        let rel = gix::path::from_bstr(repo_path).map_err(|source| Error::Path {
            path: rela_path.clone(),
            source,
        })?;
        let path = dir.join(rel);
        if ignored && keep_ignored {
            if measure {
                kept += size_of(&path);
            }
            continue;
        }
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(_) => continue,
        };
        let removed = if meta.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|source| Error::Remove { path, source })?;
    }
    Ok(measure.then_some(kept))
}

/// Bytes in the files at and below `path` (links are not followed).
fn size_of(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| size_of(&e.path())).sum())
        .unwrap_or(0)
}

// ---- the setup hook -----------------------------------------------------------

/// Does the setup command have to run in `worktree` before a build at
/// `base`? Yes in a worktree that is not pooled, or has not run it yet (or
/// lost what it made), and when a path matching `inputs` differs between
/// the tree it last ran on and `base`'s.
pub fn setup_needed(
    caches: &Caches,
    worktree: &Path,
    base: ObjectId,
    inputs: &[String],
) -> Result<bool> {
    let Some((common, n)) = lease_of(caches, worktree) else {
        return Ok(true);
    };
    let Some(last) = read_entry(&common, &n)
        .and_then(|e| e.setup_tree)
        .and_then(|t| ObjectId::from_hex(t.as_bytes()).ok())
    else {
        return Ok(true);
    };
    let (repo, tree) = base_tree(worktree, base)?;
    if tree == last {
        return Ok(false);
    }
    let globs = inputs
        .iter()
        .map(|g| input_glob(g))
        .collect::<Result<Vec<_>>>()?;
    let changed = crate::git::diff::changed_paths(&repo, last, tree)?;
    Ok(changed.iter().any(|c| {
        let path = String::from_utf8_lossy(&c.path);
        globs.iter().any(|g| g.is_match(path.as_ref()))
    }))
}

/// The repository of `worktree` and the tree of commit `base`.
fn base_tree(worktree: &Path, base: ObjectId) -> Result<(gix::Repository, ObjectId)> {
    // Objects only: what a hook's `GIT_INDEX_FILE` says does not matter here.
    let repo = gix::open(worktree).map_err(|source| Error::Open {
        path: worktree.to_owned(),
        source,
    })?;
    let tree = repo
        .find_commit(base)
        .map_err(|source| Error::ReadCommit {
            commit: base,
            source,
        })?
        .tree_id()
        .map_err(|source| Error::ReadTree {
            commit: base,
            source,
        })?
        .detach();
    Ok((repo, tree))
}

/// Record that the setup command succeeded in `worktree` at `base`.
pub fn setup_done(caches: &Caches, worktree: &Path, base: ObjectId) -> Result<()> {
    let Some((common, n)) = lease_of(caches, worktree) else {
        return Ok(());
    };
    let (_, tree) = base_tree(worktree, base)?;
    let mut entry = read_entry(&common, &n).unwrap_or_default();
    entry.setup_tree = Some(tree.to_string());
    entry.setup_at = Some(now());
    write_entry(&common, &n, &entry)
}

/// The common dir and number of the pooled worktree at `worktree`, if this process holds it.
fn lease_of(caches: &Caches, worktree: &Path) -> Option<(PathBuf, String)> {
    leases(caches)
        .lock()
        .iter()
        .find(|l| l.path == worktree)
        .map(|l| (l.common.clone(), l.n.clone()))
}

// ---- status and prune ---------------------------------------------------------

/// One pooled worktree, as `git arbiter pool status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub path: PathBuf,
    /// `free`, `held`, `left` (its order halted), `broken` (a killed run
    /// left it mid-switch; the next run removes it).
    pub state: &'static str,
    /// The branch it has checked out, and the process holding it, if any.
    pub branch: Option<String>,
    pub held_by: Option<u32>,
    /// The commit it was switched to (held) or holds (free).
    pub base: Option<String>,
    /// Bytes of ignored files (build caches) kept in it, when last measured.
    pub ignored_bytes: Option<u64>,
    pub last_setup_tree: Option<String>,
    pub last_setup_at: Option<i64>,
    pub last_use: Option<i64>,
}

/// Every pooled worktree, by number.
pub fn status(ctx: &Context) -> Result<Vec<Row>> {
    let common = ctx.repo.common_dir().to_owned();
    let mut rows = Vec::new();
    let registered = worktree::pooled_with_heads(ctx)?;
    rows.extend(being_made(ctx, &registered)?);
    for info in registered {
        let held = hold(ctx, &info.name)?.is_none();
        let entry = read_entry(&common, &info.name);
        let state = match (&entry, held) {
            (_, true) => "held",
            (Some(e), false) if e.state == State::Free && info.branch.is_none() => "free",
            (Some(e), false) if e.state == State::Left => "left",
            (_, false) if info.branch.is_some() => "left",
            _ => "broken",
        };
        rows.push(Row {
            path: info.path.clone(),
            state,
            branch: info.branch.clone(),
            held_by: held.then(|| entry.as_ref().and_then(|e| e.pid)).flatten(),
            base: entry
                .as_ref()
                .and_then(|e| e.base.clone())
                .or(info.head.clone()),
            // Measured at give-back only for a budget: a free one is
            // measured now, a held one shows what it kept when last freed.
            ignored_bytes: entry.as_ref().and_then(|e| e.ignored_bytes).or_else(|| {
                (state == "free")
                    .then(|| ignored_size(ctx, &info.path).ok())
                    .flatten()
            }),
            last_setup_tree: entry.as_ref().and_then(|e| e.setup_tree.clone()),
            last_setup_at: entry.as_ref().and_then(|e| e.setup_at),
            last_use: entry.as_ref().map(|e| e.last_use),
            name: info.name,
        });
    }
    rows.sort_by_key(|r| r.name.parse::<u64>().unwrap_or(u64::MAX));
    Ok(rows)
}

/// The pooled worktrees made before git knows them (no registration yet):
/// `held` while their run makes them, `broken` when it was killed (the next
/// run or `pool prune` removes them). Those that never got a folder take no
/// space and are not shown.
fn being_made(ctx: &Context, registered: &[Info]) -> Result<Vec<Row>> {
    let common = ctx.repo.common_dir().to_owned();
    let dir = worktree::pool_dir(ctx)?;
    let mut rows = Vec::new();
    for name in crate::state::ledger::numbers(&common) {
        if registered.iter().any(|info| info.name == name) {
            continue;
        }
        let Some(entry) = read_entry(&common, &name).filter(|e| e.state == State::Creating) else {
            continue;
        };
        let held = hold(ctx, &name)?.is_none();
        let path = dir.join(&name);
        if !held && std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        rows.push(Row {
            name,
            path,
            state: if held { "held" } else { "broken" },
            branch: entry.branch.clone(),
            held_by: held.then_some(entry.pid).flatten(),
            base: entry.base.clone(),
            ignored_bytes: None,
            last_setup_tree: None,
            last_setup_at: None,
            last_use: Some(entry.last_use),
        });
    }
    Ok(rows)
}

/// Remove free pooled worktrees beyond `size` (the least recently used go
/// first), or every free one with `all`, and those a killed run left
/// broken or half made. Held ones and those of halted orders are never
/// touched. Returns the paths removed.
pub fn prune(ctx: &Context, size: usize, all: bool) -> Result<Vec<PathBuf>> {
    let common = ctx.repo.common_dir().to_owned();
    let mut removed = worktree::remove_killed_creations(ctx)?;
    let mut free = Vec::new();
    for info in worktree::pooled(ctx)? {
        let Some(lock) = hold(ctx, &info.name)? else {
            continue;
        };
        match read_entry(&common, &info.name) {
            Some(e) if e.state == State::Free && info.branch.is_none() => {
                free.push((e.last_use, info, lock))
            }
            Some(e) if e.state == State::Left => {}
            _ if info.branch.is_some() => {}
            _ => {
                discard(ctx, &info)?;
                removed.push(info.path);
            }
        }
    }
    // Most recently used first: those past `size` go.
    free.sort_by_key(|(last_use, _, _)| std::cmp::Reverse(*last_use));
    let keep = if all { 0 } else { size };
    for (_, info, _lock) in free.into_iter().skip(keep) {
        discard(ctx, &info)?;
        removed.push(info.path);
    }
    // Bookkeeping whose worktree is gone (removed by hand with `git worktree remove`).
    let names: std::collections::BTreeSet<String> =
        worktree::pooled(ctx)?.into_iter().map(|i| i.name).collect();
    for n in crate::state::ledger::numbers(&common) {
        if !names.contains(&n) {
            if let Some(_lock) = hold(ctx, &n)? {
                forget(ctx, &n)?;
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_inputs_are_globs_over_repository_paths() {
        let lock = input_glob("package-lock.json").expect("glob");
        assert!(lock.is_match("package-lock.json"));
        assert!(
            !lock.is_match("web/package-lock.json"),
            "a bare name is the top-level file"
        );
        let nested = input_glob("**/Cargo.lock").expect("glob");
        assert!(nested.is_match("Cargo.lock") && nested.is_match("crates/a/Cargo.lock"));
        let star = input_glob("*.lock").expect("glob");
        assert!(!star.is_match("a/b.lock"), "'*' does not cross '/'");
        assert!(input_glob("a[").is_err());
    }

    /// A repository with a tracked `sub/f.txt` at `<root>/repo`, its
    /// context, a pool of one that keeps ignored files, and its HEAD.
    fn pool_of_one(root: &std::path::Path) -> (Context, Options, ObjectId) {
        use crate::testutil::{git, new_repo};
        let repo = new_repo(root, "repo");
        std::fs::create_dir(repo.join("sub")).expect("mkdir");
        std::fs::write(repo.join("sub/f.txt"), "tracked\n").expect("write");
        git(root, &repo, &["add", "-A"]);
        git(root, &repo, &["commit", "-q", "-m", "init"]);
        let base = ObjectId::from_hex(git(root, &repo, &["rev-parse", "HEAD"]).trim().as_bytes())
            .expect("sha");
        let ctx = Context::isolated(&repo, &["user.name=t", "user.email=t@t"]).expect("open");
        let opts = Options {
            enabled: true,
            size: 1,
            keep_ignored: true,
            ..Options::default()
        };
        (ctx, opts, base)
    }

    /// In one process, between a give-back and the next take: a tracked
    /// file edited with its times set back, a file added to a folder whose
    /// modification time is set back, both found and undone.
    #[test]
    fn a_take_in_the_same_process_finds_what_was_written_since_the_give_back() {
        let (_tmp, root) = crate::testutil::scratch();
        let (ctx, opts, base) = pool_of_one(&root);
        let wt = take(&ctx, &opts, "a", "arbiter/a", base)
            .expect("take")
            .path;
        give_back(&ctx, "a", "arbiter/a", false).expect("give back");
        assert!(
            crate::git::stamps::recorded(&ctx.caches, &wt).is_some(),
            "stamped when given back clean"
        );
        let sub = wt.join("sub");
        let file = sub.join("f.txt");
        let times = |p: &std::path::Path| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .expect("mtime")
        };
        let (sub_time, file_time) = (times(&sub), times(&file));
        std::fs::write(&file, "TRACKED\n").expect("edit");
        std::fs::write(sub.join("junk.txt"), "junk\n").expect("junk");
        for (path, at) in [(&file, file_time), (&sub, sub_time)] {
            std::fs::File::open(path)
                .and_then(|f| f.set_modified(at))
                .expect("set the time back");
        }
        let taken = take(&ctx, &opts, "b", "arbiter/b", base).expect("take");
        assert_eq!(taken.path, wt);
        assert_eq!(taken.cleaned.modified, ["sub/f.txt"]);
        assert_eq!(taken.cleaned.untracked, ["sub/junk.txt"]);
        assert_eq!(std::fs::read_to_string(&file).expect("read"), "tracked\n");
        assert!(!sub.join("junk.txt").exists());
        // A check writes nothing: what a stranger wrote is not stored.
        let stranger =
            gix::objs::compute_hash(ctx.repo.object_hash(), gix::objs::Kind::Blob, b"TRACKED\n")
                .expect("hash");
        assert!(!ctx.repo.has_object(stranger), "the proof stored a blob");
    }

    /// A worktree given back without a walk (its leftovers were committed,
    /// nothing of ours ran there since) keeps the stamps of its take, which
    /// vouch for names, not files: a file a leftover process wrote between
    /// that commit and the give-back, in a folder the builder changed or
    /// in one it did not, is found by the next take in the same process.
    #[test]
    fn a_file_written_after_the_leftovers_commit_is_found_by_the_next_take() {
        let (_tmp, root) = crate::testutil::scratch();
        let (ctx, opts, base) = pool_of_one(&root);
        // Taken again (a switch): the stamps kept are a switch's.
        take(&ctx, &opts, "made", "arbiter/made", base).expect("take");
        give_back(&ctx, "made", "arbiter/made", false).expect("give back");
        let wt = take(&ctx, &opts, "settled-a", "arbiter/settled-a", base)
            .expect("take")
            .path;
        // The builder's work, committed as the leftovers commit records it.
        std::fs::write(wt.join("sub/new.txt"), "work\n").expect("write");
        crate::testutil::git(&root, &wt, &["add", "-A"]);
        crate::testutil::git(&root, &wt, &["commit", "-q", "-m", "work"]);
        let opened = open(&ctx, &wt).expect("open");
        let head = opened.head_id().expect("head").detach();
        let checksum = crate::git::index_memo::index_file_checksum(&opened).expect("checksum");
        crate::run::exec::mark_settled(&ctx.caches, &wt, head, checksum);
        // Then a leftover process of the builder writes there.
        std::fs::write(wt.join("sub/stray.txt"), "stray\n").expect("stray");
        std::fs::write(wt.join("stray.txt"), "stray\n").expect("stray");
        give_back(&ctx, "settled-a", "arbiter/settled-a", false).expect("give back");
        assert!(
            crate::git::stamps::recorded(&ctx.caches, &wt).is_some(),
            "the take's stamps are kept"
        );
        let taken = take(&ctx, &opts, "settled-b", "arbiter/settled-b", base).expect("take");
        assert_eq!(taken.path, wt);
        assert_eq!(taken.cleaned.untracked, ["stray.txt", "sub/stray.txt"]);
        assert!(!wt.join("sub/stray.txt").exists());
        assert!(!wt.join("stray.txt").exists());
    }

    /// A worktree made free by one process and taken by another: the
    /// stamps the first kept spare no file the second must find (a stray
    /// file written between, a tracked file edited), and are read once.
    #[test]
    fn a_take_in_another_process_finds_what_was_written_since_the_give_back() {
        let (_tmp, root) = crate::testutil::scratch();
        let (ctx, opts, base) = pool_of_one(&root);
        take(&ctx, &opts, "made", "arbiter/made", base).expect("take");
        give_back(&ctx, "made", "arbiter/made", false).expect("give back");
        let stamps = stamps_path(ctx.repo.common_dir(), "0");
        assert!(stamps.exists(), "kept for the next process");
        let wt = take(&ctx, &opts, "a", "arbiter/a", base)
            .expect("take")
            .path;
        assert!(!stamps.exists(), "read by the take");
        give_back(&ctx, "a", "arbiter/a", false).expect("give back");
        assert!(stamps.exists(), "kept again");

        std::fs::write(wt.join("sub/stray.txt"), "stray\n").expect("stray");
        std::fs::write(wt.join("sub/f.txt"), "TRACKED\n").expect("edit");
        let other = Context::isolated(&root.join("repo"), &["user.name=t", "user.email=t@t"])
            .expect("open");
        let taken = take(&other, &opts, "b", "arbiter/b", base).expect("take");
        assert_eq!(taken.path, wt);
        assert_eq!(taken.cleaned.modified, ["sub/f.txt"]);
        assert_eq!(taken.cleaned.untracked, ["sub/stray.txt"]);
        assert!(!wt.join("sub/stray.txt").exists());
    }

    /// The worktree of an order waiting to land, taken back for a build,
    /// stays locked until that build has it: a take beside it that found
    /// nothing free a moment earlier cannot have it first (the build would
    /// make a new worktree, and a long queue grew the pool past 200).
    #[test]
    fn a_worktree_taken_back_from_the_queue_is_kept_for_the_take_that_asked() {
        let (_tmp, root) = crate::testutil::scratch();
        let (ctx, opts, base) = pool_of_one(&root);
        let wt = take_for_build(&ctx, &opts, "q-a", "arbiter/q-a", base)
            .expect("take")
            .path;
        waits_to_land(&ctx.caches, "arbiter/q-a");
        let common = ctx.repo.common_dir().to_owned();
        let (info, entry, lock) = reclaim_from_the_queue(&ctx, opts.size)
            .expect("reclaim")
            .expect("the waiting order's worktree");
        assert_eq!(
            (info.path.as_path(), entry.state),
            (wt.as_path(), State::Free)
        );
        assert!(
            warmest_free(&ctx, &common).expect("look").is_none(),
            "a take beside it found the reclaimed worktree"
        );
        drop(lock);
        let taken = take_for_build(&ctx, &opts, "q-b", "arbiter/q-b", base).expect("take");
        assert_eq!(taken.path, wt);
        assert_eq!(crate::state::ledger::numbers(&common).len(), 1);
        // The first order's branch stays for the merge queue, this run's
        // until its order is given back.
        assert!(ctx
            .repo
            .try_find_reference("refs/heads/arbiter/q-a")
            .expect("read")
            .is_some());
        assert!(crate::state::ledger::is_leased(&ctx.caches, "arbiter/q-a"));
        give_back(&ctx, "q-a", "arbiter/q-a", false).expect("give back");
        assert!(!crate::state::ledger::is_leased(&ctx.caches, "arbiter/q-a"));
    }

    #[test]
    fn bookkeeping_round_trips_and_tolerates_unknown_fields() {
        let entry = Entry {
            state: State::Free,
            tree: Some("t".into()),
            ignored_bytes: Some(3),
            ..Entry::default()
        };
        let text = serde_json::to_string(&entry).expect("json");
        assert!(text.contains("\"state\":\"free\""), "{text}");
        let back: Entry = serde_json::from_str(&text.replace('{', "{\"later\":1,")).expect("read");
        assert_eq!(back.state, State::Free);
        assert_eq!(back.ignored_bytes, Some(3));
    }
}

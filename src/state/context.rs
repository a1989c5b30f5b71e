//! The repository git-arbiter runs in, its configuration (`arbiter.*`, flag
//! beats `git config` beats default) and the integration branch.

use std::path::{Path, PathBuf};

use gix::refs::FullName;

use crate::state::orders::{self, Orders};
use crate::sys::caches::Caches;
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the first-parent history of {tip}: {source}")]
    History {
        tip: gix::ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("creating {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening {}: {source}", path.display())]
    OpenTurn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("locking {}: {source}", path.display())]
    LockTurn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("using {} as the worktree: {source}", dir.display())]
    SetWorktree {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("opening the repository at {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("reloading configuration: {source}")]
    Reload {
        #[source]
        source: gix::Error,
    },
    #[error("restoring the worktree: {source}")]
    RestoreWorktree {
        #[source]
        source: gix::Error,
    },
    #[error("reading branch: {source}")]
    ReadBranch {
        #[source]
        source: gix::Error,
    },
    #[error("reading HEAD: {source}")]
    ReadHead {
        #[source]
        source: gix::Error,
    },
    #[error("resolving the detached HEAD: {source}")]
    DetachedHead {
        #[source]
        source: gix::Error,
    },
    #[error("reading the integration branch: {source}")]
    ReadIntegration {
        #[source]
        source: gix::Error,
    },
    #[error("resolving {branch}: {source}")]
    Resolve {
        branch: gix::bstr::BString,
        #[source]
        source: gix::Error,
    },
    #[error("reading commit {commit}: {source}")]
    ReadCommit {
        commit: gix::ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading the tree of {commit}: {source}")]
    ReadTree {
        commit: gix::ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("finding the merge base of {ancestor} and {tip}: {source}")]
    MergeBase {
        ancestor: gix::ObjectId,
        tip: gix::ObjectId,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Defaults of every `arbiter.*` key, in one place.
pub mod defaults {
    pub const ORDERS: &str = "work-orders";
    pub const RETRY_CAP: u32 = 3;
    pub const MAX_TOTAL: u32 = 6;
    pub const MAX_BATCH: u32 = 8;
}

/// A repository format gix 0.90, as git-arbiter builds it, cannot work with,
/// read from the repository's own config as git reads it (`extensions.*`
/// counts only there, and only from format version 1): SHA-256 objects would
/// not open at all, and reftable refs would be read as missing and written
/// as loose files git never looks at.
fn unsupported_format(config: &gix::config::File, repo: &Path) -> Option<InputError> {
    let local = |meta: &gix::config::file::Metadata| meta.source == gix::config::Source::Local;
    let version = config
        .integer_filter("core.repositoryFormatVersion", local)
        .ok()
        .flatten()
        .unwrap_or(0);
    if version < 1 {
        return None;
    }
    let object_format = config.string_filter("extensions.objectFormat", local);
    let ref_storage = config.string_filter("extensions.refStorage", local);
    let (what, hint) = if object_format.is_some_and(|f| !f.eq_ignore_ascii_case(b"sha1")) {
        (
            "the SHA-256 object format",
            "git-arbiter works on SHA-1 repositories, the default of 'git init'",
        )
    } else if ref_storage.is_some_and(|f| !f.eq_ignore_ascii_case(b"files")) {
        (
            "the reftable ref format",
            "git-arbiter works on the files ref format; a clone made with 'git clone --ref-format=files' can be used",
        )
    } else {
        return None;
    };
    Some(
        InputError::new(format!(
            "{} uses {what}, which git-arbiter does not support yet",
            repo.display()
        ))
        .hint(hint),
    )
}

/// git's rule for `GIT_DIR` without `GIT_WORK_TREE` (`git help git`,
/// ENVIRONMENT): the current directory is the top of the worktree unless
/// `core.worktree` names one or `core.bare` is true. gix takes the parent of
/// a `.git` directory instead, and no worktree for a git dir named otherwise.
fn worktree_of_explicit_git_dir(repo: &gix::Repository, cwd: &Path) -> Option<PathBuf> {
    if std::env::var_os("GIT_DIR").is_none() || std::env::var_os("GIT_WORK_TREE").is_some() {
        return None;
    }
    let config = repo.config_snapshot();
    let bare = config.boolean("core.bare") == Some(true);
    (!bare && config.string("core.worktree").is_none()).then(|| cwd.to_owned())
}

/// When gix cannot open the repository at `cwd`: find it as gix looks for it
/// (`GIT_DIR`, else upwards) and say if its format is the reason.
fn unsupported_format_at(cwd: &Path) -> Option<InputError> {
    let (git_dir, workdir) = match std::env::var_os("GIT_DIR") {
        Some(dir) => (
            cwd.join(dir),
            std::env::var_os("GIT_WORK_TREE").map(|dir| cwd.join(dir)),
        ),
        None => {
            let options = gix::discover::upwards::Options::default().apply_environment();
            let (path, _trust) = gix::discover::upwards_opts(cwd, options).ok()?;
            path.into_repository_and_work_tree_directories()
        }
    };
    // A linked worktree's shared config is in the common directory.
    let common_dir = match gix::discover::path::from_plain_file(&git_dir.join("commondir")) {
        Some(relative) => git_dir.join(relative.ok()?),
        None => git_dir.clone(),
    };
    let config = gix::config::File::from_path_no_includes(
        common_dir.join("config"),
        gix::config::Source::Local,
    )
    .ok()?;
    unsupported_format(&config, workdir.as_deref().unwrap_or(&git_dir))
}

/// A repository owned by someone else is used only where `safe.directory`
/// trusts it, as git refuses it otherwise (gix would open it with its own
/// configuration, hooks and filters ignored: not what git would do there).
fn refuse_dubious_ownership(repo: &gix::Repository) -> Result<()> {
    if repo.git_dir_trust() == gix::sec::Trust::Full {
        return Ok(());
    }
    let place = repo.workdir().unwrap_or(repo.git_dir()).to_owned();
    let place = std::fs::canonicalize(&place).unwrap_or(place);
    Err(InputError::new(format!(
        "detected dubious ownership in repository at '{}': it is not owned by the current user",
        place.display()
    ))
    .hint(format!(
        "if you trust it, add an exception as git does: git config --global --add safe.directory {}",
        place.display()
    ))
    .into())
}

/// Decoded objects kept in memory, for all handles of one context and those
/// it shares. 32 MB held a 10,000-order round's conductor above 150 MB;
/// half of it still holds dozens of versions of a 10,000-file tree.
const OBJECT_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// `repo` with the object cache every handle of ours has: a worktree's
/// checkout reads the same trees (and often blobs) again for each path, and
/// gix maps and unmaps a loose object at each read.
pub(crate) fn cached(caches: &Caches, mut repo: gix::Repository) -> gix::Repository {
    share_objects(caches, &mut repo);
    repo
}

/// Give `repo` the object cache of `caches`, unless it has one.
fn share_objects(caches: &Caches, repo: &mut gix::Repository) {
    if !repo.objects.has_object_cache() {
        let memory = caches.get::<Objects>();
        let store = memory.lock().store_number(repo.objects.store_ref().path());
        repo.objects.set_object_cache(move || {
            Box::new(SharedObjects {
                memory: memory.clone(),
                store,
            })
        });
    }
}

/// The object cache all handles of a context share, by object database:
/// an object is named by its content, so what one thread read serves the
/// others (each build thread's handle would read the batch's base trees
/// again, and a loose object costs a map, an inflate and an unmap each
/// time). Kept apart per database, so that one never finds an object
/// another has and it lacks.
struct SharedObjects {
    memory: std::sync::Arc<Objects>,
    store: usize,
}

/// The process's decoded objects (an entry of its [`Caches`]).
#[derive(Default)]
struct Objects(std::sync::Mutex<ObjectMemory>);

impl Objects {
    fn lock(&self) -> std::sync::MutexGuard<'_, ObjectMemory> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Default)]
struct ObjectMemory {
    /// The objects folders, numbered by position.
    stores: Vec<PathBuf>,
    objects: std::collections::HashMap<(usize, gix::ObjectId), (gix::object::Kind, Vec<u8>)>,
    /// Oldest first: the first to go when the budget is reached.
    order: std::collections::VecDeque<(usize, gix::ObjectId)>,
    bytes: usize,
}

impl ObjectMemory {
    fn store_number(&mut self, path: &Path) -> usize {
        match self.stores.iter().position(|known| known == path) {
            Some(n) => n,
            None => {
                self.stores.push(path.to_owned());
                self.stores.len() - 1
            }
        }
    }
}

impl gix::odb::pack::cache::Object for SharedObjects {
    fn put(&mut self, id: gix::ObjectId, kind: gix::object::Kind, data: &[u8]) {
        if data.len() > OBJECT_CACHE_BYTES / 8 {
            return;
        }
        let key = (self.store, id);
        let mut memory = self.memory.lock();
        if memory.objects.contains_key(&key) {
            return;
        }
        while memory.bytes + data.len() > OBJECT_CACHE_BYTES {
            let Some(oldest) = memory.order.pop_front() else {
                break;
            };
            if let Some((_, gone)) = memory.objects.remove(&oldest) {
                memory.bytes -= gone.len();
            }
        }
        memory.bytes += data.len();
        memory.order.push_back(key);
        memory.objects.insert(key, (kind, data.to_vec()));
    }

    fn get(&mut self, id: &gix::ObjectId, out: &mut Vec<u8>) -> Option<gix::object::Kind> {
        let memory = self.memory.lock();
        let (kind, data) = memory.objects.get(&(self.store, *id))?;
        out.clear();
        out.extend_from_slice(data);
        Some(*kind)
    }
}

/// A [`Context`] that can cross threads; [`SharedContext::local`] opens it.
pub struct SharedContext {
    repo: gix::ThreadSafeRepository,
    workdir: Option<PathBuf>,
    cwd: PathBuf,
    caches: Caches,
}

impl SharedContext {
    /// The caches of this context family.
    pub fn caches(&self) -> &Caches {
        &self.caches
    }

    pub fn local(&self) -> Context {
        // A thread's handle starts without the cache that spares a reread
        // (a loose object is mapped and unmapped at each read).
        let mut repo = self.repo.to_thread_local();
        share_objects(&self.caches, &mut repo);
        Context {
            repo,
            workdir: self.workdir.clone(),
            cwd: self.cwd.clone(),
            caches: self.caches.clone(),
            history: Default::default(),
        }
    }
}

/// See [`Context::clone_id`].
#[derive(Default)]
struct CloneId(std::sync::OnceLock<String>);

pub struct Context {
    pub repo: gix::Repository,
    /// Top of the worktree we run in, if any (a bare repository has none).
    pub workdir: Option<PathBuf>,
    /// Where the process was started; relative flag values resolve against it.
    pub cwd: PathBuf,
    /// What this process has read or proved and may reuse, shared by every
    /// context [`Context::share`] makes from this one.
    pub caches: Caches,
    /// What the integration branch's first-parent chain says landed, as
    /// far as read: kept, so that only new commits are read again.
    history: std::cell::RefCell<crate::git::history::Landed>,
}

impl Context {
    /// The landed merges of the first-parent chain from `tip` (see
    /// [`crate::git::history`]), reading only commits new since the last call.
    pub fn landed(
        &self,
        tip: gix::ObjectId,
    ) -> Result<std::cell::Ref<'_, crate::git::history::Landed>> {
        // A process starts from what an earlier one read, and leaves what
        // it read once that is many commits more, in one read or several.
        const SAVE_AFTER: usize = 64;
        let saved = crate::git::layout::dir(&self.repo).join("landed");
        let mut history = self.history.borrow_mut();
        if history.is_unread() {
            if let Some(view) = crate::git::history::Landed::load(&saved) {
                *history = view;
            }
        }
        history
            .update(&self.repo, tip)
            .map_err(|source| Error::History { tip, source })?;
        history.save_after(SAVE_AFTER, &saved);
        drop(history);
        Ok(self.history.borrow())
    }

    /// Wait for this process's turn at `what` among all processes on this
    /// repository; the turn lasts until the returned guard is dropped. An
    /// flock on `<git-common-dir>/arbiter/<what>.lock`: a killed holder
    /// releases it at once, so nothing can be wedged by a crash.
    pub fn take_turn(&self, what: &str) -> Result<crate::sys::flock::Held> {
        let dir = crate::git::layout::dir(&self.repo);
        std::fs::create_dir_all(&dir).map_err(|source| Error::CreateDir {
            dir: dir.clone(),
            source,
        })?;
        let path = crate::git::layout::turn(&self.repo, what);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| Error::OpenTurn {
                path: path.clone(),
                source,
            })?;
        let held = crate::sys::flock::Held::wait(file)
            .map_err(|source| Error::LockTurn { path, source })?;
        Ok(held)
    }

    /// Discover the repository from `cwd`, honouring `GIT_DIR`, `GIT_WORK_TREE`
    /// and `GIT_CEILING_DIRECTORIES` as git (and hooks) expect, and the
    /// `git -c` settings git passes in `GIT_CONFIG_PARAMETERS`.
    pub fn discover(cwd: &Path) -> Result<Context> {
        // Command-line overrides stay in the open options, so `reload()` keeps them.
        let overrides = crate::git::config_env::overrides_from_env()?;
        let mut options = gix::sec::trust::Mapping::<gix::open::Options>::default();
        options.full = options.full.cli_overrides(overrides.iter().cloned());
        options.reduced = options.reduced.cli_overrides(overrides);
        let repo = gix::ThreadSafeRepository::discover_with_environment_overrides_opts(
            cwd,
            Default::default(),
            options,
        )
        .map_err(|e| {
            unsupported_format_at(cwd).unwrap_or_else(|| {
                InputError::new(format!("not a git repository: {} ({e})", cwd.display()))
                    .hint("run git arbiter inside a git repository, or set GIT_DIR")
            })
        })?;
        let mut repo = repo.to_thread_local();
        refuse_dubious_ownership(&repo)?;
        if let Some(refused) = unsupported_format(
            repo.config_snapshot().plumbing(),
            repo.workdir().unwrap_or(repo.git_dir()),
        ) {
            return Err(refused.into());
        }
        if let Some(top) = worktree_of_explicit_git_dir(&repo, cwd) {
            repo.set_workdir(top).map_err(|source| Error::SetWorktree {
                dir: cwd.to_owned(),
                source,
            })?;
        }
        // A round merges many work orders into one branch: the trees and
        // commits near its tip are read again by every merge-back.
        let caches = Caches::default();
        share_objects(&caches, &mut repo);
        let workdir = repo.workdir().map(Path::to_owned);
        Ok(Context {
            repo,
            workdir,
            cwd: cwd.to_owned(),
            caches,
            history: Default::default(),
        })
    }

    /// Open the repository at `path` with nothing from outside it: no `GIT_*`
    /// variables, no system or global configuration (so no identity but its
    /// own), and `overrides` (`key=value`, as with `git -c`) on top. For tests
    /// and embedders that must not see the user's settings.
    pub fn isolated(path: &Path, overrides: &[&str]) -> Result<Context> {
        let options = gix::open::Options::isolated().config_overrides(overrides.iter().copied());
        let mut repo = gix::open_opts(path, options).map_err(|source| Error::Open {
            path: path.to_owned(),
            source,
        })?;
        let caches = Caches::default();
        share_objects(&caches, &mut repo);
        Ok(Context {
            workdir: repo.workdir().map(Path::to_owned),
            cwd: path.to_owned(),
            repo,
            caches,
            history: Default::default(),
        })
    }

    /// What another thread needs to open this context again (a
    /// `gix::Repository` is not `Sync`): same repository, overrides and worktree.
    pub fn share(&self) -> SharedContext {
        SharedContext {
            repo: self.repo.clone().into_sync(),
            workdir: self.workdir.clone(),
            cwd: self.cwd.clone(),
            caches: self.caches.clone(),
        }
    }

    /// Re-read configuration written by other processes.
    pub fn reload(&mut self) -> Result<()> {
        self.repo
            .reload()
            .map_err(|source| Error::Reload { source })?;
        // Reopening infers the worktree from the git dir alone; keep the one found at discovery.
        if self.repo.workdir() != self.workdir.as_deref() {
            self.repo
                .set_workdir(self.workdir.clone())
                .map_err(|source| Error::RestoreWorktree { source })?;
        }
        Ok(())
    }

    pub fn config_string(&self, key: &str) -> Option<String> {
        self.repo
            .config_snapshot()
            .string(key)
            .map(|v| v.to_string())
    }

    /// All values of a multi-valued key, in configuration order.
    pub fn config_strings(&self, key: &str) -> Vec<String> {
        self.repo
            .config_snapshot()
            .plumbing()
            .strings(key)
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.to_string())
            .collect()
    }

    /// A boolean from `git config`; a malformed value is an input error.
    pub fn config_bool(&self, key: &str) -> Result<Option<bool>> {
        self.repo.config_snapshot().try_boolean(key).map_err(|_| {
            InputError::new(format!(
                "config {key} = '{}' is not a boolean",
                self.config_string(key).unwrap_or_default()
            ))
            .hint(format!("fix it with 'git config {key} true' (or false)"))
            .into()
        })
    }

    /// A non-negative integer from `git config`; a malformed value is an input error.
    pub fn config_u32(&self, key: &str) -> Result<Option<u32>> {
        let Some(raw) = self.config_string(key) else {
            return Ok(None);
        };
        let value = self.repo.config_snapshot().integer(key);
        match value.and_then(|v| u32::try_from(v).ok()) {
            Some(v) => Ok(Some(v)),
            None => Err(InputError::new(format!(
                "config {key} = '{raw}' is not a non-negative integer"
            ))
            .hint(format!("fix it with 'git config {key} <number>'"))
            .into()),
        }
    }

    /// An amount in USD from `git config` (a budget: `2.50`); anything but a
    /// number ≥ 0 is an input error naming the key.
    pub fn config_usd(&self, key: &str) -> Result<Option<f64>> {
        self.config_string(key)
            .map(|v| {
                crate::state::cost::parse_usd(&v).map_err(|e| {
                    InputError::new(format!("config {key}: {e}"))
                        .hint(format!(
                            "e.g. 'git config {key} 5.00', or unset it for no budget"
                        ))
                        .into()
                })
            })
            .transpose()
    }

    /// A duration from `git config` (`90s`, `10m`, `1h30m`, …); a malformed
    /// value is an input error naming the key, with `example` as the fix.
    pub fn config_duration(&self, key: &str, example: &str) -> Result<Option<std::time::Duration>> {
        self.config_string(key)
            .map(|v| {
                crate::sys::duration::parse(&v).map_err(|e| {
                    InputError::new(format!("config {key}: {e}"))
                        .hint(format!("e.g. 'git config {key} {example}'"))
                        .into()
                })
            })
            .transpose()
    }

    /// At most this many work orders per batch: `--max`, else
    /// `arbiter.maxBatch`, else 8. Zero is refused: it would select nothing,
    /// and a round would report that as nothing to run.
    pub fn max_batch(&self, flag: Option<u32>) -> Result<usize> {
        let refused = match flag {
            Some(0) => InputError::new("--max must be at least 1").hint("e.g. --max 4"),
            Some(n) => return Ok(n as usize),
            None => match self.config_u32("arbiter.maxBatch")? {
                Some(0) => InputError::new("config arbiter.maxBatch = 0: must be at least 1")
                    .hint("fix it with 'git config arbiter.maxBatch <number>', or unset it for 8"),
                Some(n) => return Ok(n as usize),
                None => return Ok(defaults::MAX_BATCH as usize),
            },
        };
        Err(refused.into())
    }

    pub fn retry_cap(&self) -> Result<u32> {
        match self.config_u32("arbiter.retryCap")? {
            // No attempt at all: every order would halt unbuilt.
            Some(0) => Err(InputError::new("config arbiter.retryCap = 0: must be at least 1")
                .hint("e.g. 'git config arbiter.retryCap 3'; 'git arbiter halt <id>' stops an order")
                .into()),
            Some(cap) => Ok(cap),
            None => Ok(defaults::RETRY_CAP),
        }
    }

    /// The orders directory: `--orders` (relative to the current directory), else
    /// `arbiter.orders` (relative to the worktree top), else `work-orders/` at the top.
    pub fn orders_dir(&self, flag: Option<&Path>) -> Result<PathBuf> {
        if let Some(flag) = flag {
            let here = self.cwd.join(flag);
            // As every path on git's command line, relative to the current
            // directory; from a subdirectory, the usual mistake is meaning
            // the top's.
            if let Some(at_top) = self
                .workdir
                .as_ref()
                .map(|top| top.join(flag))
                .filter(|at_top| flag.is_relative() && !here.exists() && at_top.is_dir())
            {
                return Err(InputError::new(format!(
                    "--orders {}: no such directory here ({}), relative to the current directory",
                    flag.display(),
                    here.display()
                ))
                .hint(format!(
                    "{} exists: run from the top of the worktree, or pass --orders {}",
                    at_top.display(),
                    at_top.display()
                ))
                .into());
            }
            return Ok(here);
        }
        let top = self.workdir.clone().ok_or_else(|| {
            InputError::new("this repository has no worktree to find work orders in")
                .hint("pass --orders DIR or set 'git config arbiter.orders DIR'")
        });
        match self.config_string("arbiter.orders") {
            Some(dir) if Path::new(&dir).is_absolute() => Ok(PathBuf::from(dir)),
            Some(dir) => Ok(top?.join(dir)),
            None => Ok(top?.join(defaults::ORDERS)),
        }
    }

    pub fn load_orders(&self, flag: Option<&Path>) -> Result<Orders> {
        let cache = crate::git::layout::dir(&self.repo).join("orders.cache");
        Ok(orders::load_cached(&self.orders_dir(flag)?, &cache)?)
    }

    /// The integration branch: `--into BRANCH`, else the branch checked out here.
    pub fn integration_branch(&self, into: Option<&str>) -> Result<FullName> {
        match into {
            Some(name) => {
                let full = if name.starts_with("refs/") {
                    name.to_owned()
                } else {
                    format!("refs/heads/{name}")
                };
                let full = FullName::try_from(full.as_str()).map_err(|_| {
                    InputError::new(format!("--into '{name}' is not a valid branch name"))
                        .hint("name an existing local branch, e.g. --into main")
                })?;
                if self
                    .repo
                    .try_find_reference(full.as_ref())
                    .map_err(|source| Error::ReadBranch { source })?
                    .is_none()
                {
                    return Err(InputError::new(format!("branch '{name}' does not exist"))
                        .hint("create it first, or name an existing branch with --into")
                        .into());
                }
                Ok(full)
            }
            None => self
                .repo
                .head_name()
                .map_err(|source| Error::ReadHead { source })?
                .ok_or_else(|| {
                    InputError::new(
                        "HEAD is detached: there is no current branch to integrate into",
                    )
                    .hint("check out a branch or pass --into BRANCH")
                    .into()
                }),
        }
    }

    /// The commit read-only views (`status`, `batch`) are computed against:
    /// the tip of `--into`, else of the current branch, else, on a detached
    /// HEAD, the checked-out commit: looking needs no branch to integrate into.
    /// `None` for a branch without commits.
    pub fn view_tip(&self, into: Option<&str>) -> Result<Option<gix::ObjectId>> {
        if into.is_none()
            && self
                .repo
                .head_name()
                .map_err(|source| Error::ReadHead { source })?
                .is_none()
        {
            let head = self
                .repo
                .head_id()
                .map_err(|source| Error::DetachedHead { source })?;
            return Ok(Some(head.detach()));
        }
        let branch = self.integration_branch(into)?;
        Ok(self.branch_tip(&branch).ok())
    }

    /// The commit the integration branch points at.
    pub fn branch_tip(&self, branch: &FullName) -> Result<gix::ObjectId> {
        let mut reference = self
            .repo
            .try_find_reference(branch.as_ref())
            .map_err(|source| Error::ReadIntegration { source })?
            .ok_or_else(|| -> crate::sys::error::Error {
                InputError::new(format!("branch '{}' has no commits yet", branch.shorten()))
                    .hint("make a first commit on it")
                    .into()
            })?;
        Ok(reference
            .peel_to_id()
            .map_err(|source| Error::Resolve {
                branch: branch.as_bstr().to_owned(),
                source,
            })?
            .detach())
    }

    /// The tree of `commit`.
    pub fn tree_of(&self, commit: gix::ObjectId) -> Result<gix::ObjectId> {
        Ok(self
            .repo
            .find_commit(commit)
            .map_err(|source| Error::ReadCommit { commit, source })?
            .tree_id()
            .map_err(|source| Error::ReadTree { commit, source })?
            .detach())
    }

    /// The remote this process's run coordinates through (`--remote`), once set.
    pub fn remote(&self) -> Option<std::sync::Arc<crate::state::remote::Remote>> {
        self.caches.get::<crate::state::remote::Active>().get()
    }

    /// Run through `remote` from now on (every context shared from this one too).
    pub fn use_remote(&self, remote: crate::state::remote::Remote) {
        self.caches
            .get::<crate::state::remote::Active>()
            .set(std::sync::Arc::new(remote));
    }

    /// Coordinate through the git remote `name` from now on (`--remote`):
    /// its branch `into` (else the current branch's name) and its notes ref
    /// are fetched, and this clone's notes ref follows the remote's.
    /// A run refuses a clone whose notes ref has transitions the remote
    /// lacks (`git arbiter sync` pushes them); a look (`status`) shows them.
    pub fn connect_remote(&self, name: &str, into: Option<&str>, looking: bool) -> Result<()> {
        let branch = match into {
            // The remote's branch: this clone need not have it.
            Some(name) if !name.starts_with("refs/") => {
                FullName::try_from(format!("refs/heads/{name}")).map_err(|_| {
                    InputError::new(format!("--into '{name}' is not a valid branch name"))
                        .hint("name the remote's integration branch, e.g. --into main")
                })?
            }
            _ => self.integration_branch(into)?,
        };
        let secs = match self.config_u32("arbiter.leaseSeconds")? {
            Some(secs) => u64::from(secs),
            None => crate::state::remote::DEFAULT_LEASE_SECS,
        };
        let remote = crate::state::remote::Remote::open(
            &self.repo,
            name,
            &branch,
            std::time::Duration::from_secs(secs),
        )
        .map_err(crate::state::Error::Remote)?;
        let fetched = match looking {
            true => remote.catch_up(&self.repo),
            false => remote.fetch(&self.repo),
        };
        fetched.map_err(crate::state::Error::Remote)?;
        self.use_remote(remote);
        Ok(())
    }

    /// The state's store for this context: the configured retry cap, and the
    /// remote this process runs through, if any.
    pub fn store(&self) -> Result<crate::state::Store<'_>> {
        Ok(crate::state::Store::new(&self.repo, self.retry_cap()?).with_remote(self.remote()))
    }

    /// The branch work lands on: the remote's (as fetched) when this
    /// process coordinates through one, else [`Context::integration_branch`].
    pub fn landing_branch(&self, into: Option<&str>) -> Result<FullName> {
        match self.remote() {
            Some(remote) => Ok(remote.tracking.clone()),
            None => self.integration_branch(into),
        }
    }

    /// `arbiter.remote`, unless empty (`git -c arbiter.remote= …` turns it off).
    pub fn configured_remote(&self) -> Option<String> {
        self.config_string("arbiter.remote")
            .filter(|name| !name.is_empty())
    }

    /// With `arbiter.remote` set, a command that changes the state makes
    /// its transitions through that remote, as `round --remote` does.
    pub fn follow_configured_remote(&self, into: Option<&str>) -> Result<()> {
        match self.configured_remote() {
            Some(name) if self.remote().is_none() => self.connect_remote(&name, into, false),
            _ => Ok(()),
        }
    }

    /// This clone's id ([`crate::state::remote::clone_id`]), read once.
    pub fn clone_id(&self) -> String {
        self.caches
            .get::<CloneId>()
            .0
            .get_or_init(|| crate::state::remote::clone_id(&self.repo))
            .clone()
    }

    /// Is `ancestor` reachable from `tip`? An error (e.g. a missing object) is returned, never guessed.
    pub fn is_ancestor(&self, ancestor: gix::ObjectId, tip: gix::ObjectId) -> Result<bool> {
        is_ancestor(&self.repo, ancestor, tip)
    }
}

/// [`Context::is_ancestor`] in `repo` (a worktree's, say).
pub(crate) fn is_ancestor(
    repo: &gix::Repository,
    ancestor: gix::ObjectId,
    tip: gix::ObjectId,
) -> Result<bool> {
    use crate::git::history::AncestryError;
    crate::git::history::is_ancestor(repo, ancestor, tip).map_err(|e| {
        match e {
            AncestryError::ReadCommit { commit, source } => Error::ReadCommit { commit, source },
            AncestryError::MergeBase {
                ancestor,
                tip,
                source,
            } => Error::MergeBase {
                ancestor,
                tip,
                source,
            },
        }
        .into()
    })
}

#[cfg(test)]
mod tests {
    use crate::testutil::{git, new_repo, scratch};

    /// A child another thread forks while a turn is given back holds a copy
    /// of the turn's file until it execs: the turn must be free all the same
    /// (else the next taker waits on a lock nobody holds).
    #[test]
    fn a_turn_given_back_is_free_while_a_copy_of_its_file_lives() {
        let (_keep, root) = scratch();
        let dir = new_repo(&root, "repo");
        let ctx = super::Context::isolated(&dir, &[]).expect("open");
        let turn = ctx.take_turn("test").expect("turn");
        let copy = rustix::io::dup(turn.file()).expect("dup");
        drop(turn);
        // A probe rather than a wait: a turn still held fails, not hangs.
        let file = std::fs::File::open(crate::git::layout::turn(&ctx.repo, "test")).expect("open");
        assert!(
            crate::sys::flock::Held::try_take(file)
                .expect("lock")
                .is_some(),
            "the turn given back is still held"
        );
        drop(copy);
    }

    /// Handles of one object database share what they read; a database
    /// that lacks an object does not find it because another one was read.
    #[test]
    fn the_object_cache_is_shared_within_a_database_only() {
        let (_keep, root) = scratch();
        let has = new_repo(&root, "has");
        let lacks = new_repo(&root, "lacks");
        std::fs::write(has.join("f"), "only in one repository\n").expect("write");
        let blob = git(&root, &has, &["hash-object", "-w", "f"]);
        let blob = gix::ObjectId::from_hex(blob.trim().as_bytes()).expect("sha");
        let ctx = super::Context::isolated(&has, &[]).expect("open");
        let open = |dir: &std::path::Path| {
            let repo = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
            super::cached(&ctx.caches, repo)
        };
        assert!(ctx.repo.find_object(blob).is_ok());
        // Gone from disk, still found by a second handle: it came from the cache.
        let loose = has.join(".git/objects").join(&blob.to_string()[..2]);
        std::fs::remove_dir_all(loose).expect("remove the loose object");
        assert!(open(&has).find_object(blob).is_ok());
        assert!(ctx.share().local().repo.find_object(blob).is_ok());
        assert!(open(&lacks).find_object(blob).is_err());
        // Another context's caches hold nothing of this one's.
        let other = super::Context::isolated(&has, &[]).expect("open");
        assert!(other.repo.find_object(blob).is_err());
    }

    /// The shared cache keeps to its budget: the oldest objects go first,
    /// and one larger than an eighth of it is not kept at all.
    #[test]
    fn the_object_cache_keeps_to_its_budget() {
        use gix::odb::pack::cache::Object;
        let memory = std::sync::Arc::new(super::Objects::default());
        let store = memory
            .lock()
            .store_number(std::path::Path::new("/budget-test"));
        let mut cache = super::SharedObjects {
            memory: memory.clone(),
            store,
        };
        let id = |n: u8| gix::ObjectId::from_bytes_or_panic(&[n; 20]);
        let eighth = vec![7u8; super::OBJECT_CACHE_BYTES / 8];
        let mut out = Vec::new();
        cache.put(
            id(0),
            gix::object::Kind::Blob,
            &[0u8; super::OBJECT_CACHE_BYTES / 8 + 1],
        );
        assert_eq!(cache.get(&id(0), &mut out), None, "too large to keep");
        for n in 1..=9 {
            cache.put(id(n), gix::object::Kind::Blob, &eighth);
        }
        assert_eq!(cache.get(&id(1), &mut out), None, "the oldest went");
        assert_eq!(cache.get(&id(9), &mut out), Some(gix::object::Kind::Blob));
        assert_eq!(out, eighth);
        assert!(memory.lock().bytes <= super::OBJECT_CACHE_BYTES);
    }

    /// Near commits are found by their parents, in merges too; a far one is
    /// left to the merge base, which still says yes; a later commit is no
    /// ancestor either way.
    #[test]
    fn an_ancestor_is_found_near_or_far() {
        let (_keep, root) = scratch();
        let dir = new_repo(&root, "repo");
        let commit = |message: &str| {
            git(
                &root,
                &dir,
                &["commit", "-q", "--allow-empty", "-m", message],
            );
            let sha = git(&root, &dir, &["rev-parse", "HEAD"]);
            gix::ObjectId::from_hex(sha.trim().as_bytes()).expect("sha")
        };
        let first = commit("first");
        git(&root, &dir, &["checkout", "-q", "-b", "side"]);
        let side = commit("side");
        git(&root, &dir, &["checkout", "-q", "main"]);
        commit("main");
        git(
            &root,
            &dir,
            &["merge", "-q", "--no-ff", "-m", "merge", "side"],
        );
        let merge = commit("after the merge");
        let ctx = super::Context::isolated(&dir, &[]).expect("open");
        assert!(crate::git::history::near_ancestor(&ctx.repo, side, merge));
        assert!(crate::git::history::near_ancestor(&ctx.repo, first, merge));
        assert!(!crate::git::history::near_ancestor(&ctx.repo, merge, first));
        for n in 0..70 {
            commit(&format!("later {n}"));
        }
        let tip = commit("tip");
        assert!(
            !crate::git::history::near_ancestor(&ctx.repo, first, tip),
            "too far to look"
        );
        assert!(ctx.is_ancestor(first, tip).expect("merge base"));
        assert!(!ctx.is_ancestor(tip, first).expect("merge base"));
    }
}

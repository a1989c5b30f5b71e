//! Worktree lifecycle (DESIGN kernel 3): one linked worktree plus branch
//! `arbiter/<id>` per build, registered so stock git accepts it
//! (`git worktree list`, `git status`, `git worktree remove`, `prune`).
//!
//! Worktrees live in one folder outside `.git/` (reference defect 4 put them
//! in `.git/worktrees/`, git's own admin area): `arbiter.worktreeDir`, else a
//! sibling `<repo-dir>.arbiter/` of the main worktree.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::bstr::BString;
use gix::refs::transaction::PreviousValue;
use gix::refs::{FullName, Target};
use gix::ObjectId;
use serde::Serialize;

use crate::state::context::Context;
use crate::state::orders::Orders;
use crate::state::{Record, Status, Store};
use crate::sys::caches::Caches;
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A worktree a live git-arbiter process holds (`what` names it).
    #[error("{what} is in use by a running git-arbiter")]
    InUse { what: String },
    #[error("opening the main repository: {source}")]
    OpenMain {
        #[source]
        source: gix::Error,
    },
    #[error("opening the main worktree: {source}")]
    OpenMainWorktree {
        #[source]
        source: gix::Error,
    },
    #[error("reading {name}: {source}")]
    ReadRef {
        name: BString,
        #[source]
        source: gix::Error,
    },
    #[error("resolving {name}: {source}")]
    ResolveRef {
        name: BString,
        #[source]
        source: gix::Error,
    },
    #[error("creating {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating branch {branch}: {source}")]
    CreateBranch {
        branch: BString,
        #[source]
        source: gix::Error,
    },
    #[error("configuring the new worktree: {source}")]
    Configure {
        #[source]
        source: gix::Error,
    },
    #[error("adding worktree {}: {source}", path.display())]
    Add {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("reading the index of {}: {source}", dir.display())]
    ReadIndex {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("writing the index of {}: {source}", dir.display())]
    WriteIndex {
        dir: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("reading {}: {source}", path.display())]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("editing {}: {source}", path.display())]
    EditConfig {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("writing {}: {source}", path.display())]
    WriteConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("keeping {commit} on {branch}: {source}")]
    Keep {
        commit: ObjectId,
        branch: String,
        #[source]
        source: gix::Error,
    },
    #[error("deleting {name}: {source}")]
    DeleteBranch {
        name: String,
        #[source]
        source: crate::git::refguard::DeleteError,
    },
    #[error("removing the stale registration {}: {source}", path.display())]
    RemoveRegistration {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("removing {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("removing the half-made worktree {}: {source}", path.display())]
    RemoveHalfMade {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("unlocking the half-made worktree {}: {source}", path.display())]
    Unlock {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("removing worktree {}: {source}", path.display())]
    RemoveWorktree {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("listing linked worktrees: {source}")]
    ListWorktrees {
        #[source]
        source: gix::Error,
    },
    /// The worktree's folder could not be resolved.
    #[error("opening the worktree {}: {source}", path.display())]
    Locate {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Listing the registrations to find the worktree's among them.
    #[error("opening the worktree {}: {source}", path.display())]
    ListForOpen {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("opening the worktree {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("listing references: {source}")]
    ListRefs {
        #[source]
        source: gix::Error,
    },
    #[error("listing arbiter branches: {source}")]
    ListBranches {
        #[source]
        source: gix::Error,
    },
    #[error("reading a reference: {source}")]
    ReadAReference {
        #[source]
        source: gix::Error,
    },
    #[error("removing the stale lock file {}: {source}", path.display())]
    RemoveStaleLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        match self {
            Error::InUse { .. } => ExitCode::Usage,
            _ => ExitCode::Fatal,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            Error::InUse { .. } => {
                Some("wait for it to finish, or stop it with 'git arbiter stop'".into())
            }
            _ => None,
        }
    }
}

/// Did `e` find a worktree a live git-arbiter holds ([`Error::InUse`])?
pub fn is_in_use(e: &crate::sys::error::Error) -> bool {
    let crate::sys::error::Error::Kernel(kernel) = e else {
        return false;
    };
    let kernel: &dyn std::error::Error = &**kernel;
    matches!(kernel.downcast_ref::<Error>(), Some(Error::InUse { .. }))
}

/// Branches git-arbiter owns: `refs/heads/arbiter/*`.
pub const BRANCH_PREFIX: &str = "refs/heads/arbiter/";
/// The lock reason of a worktree being created (gix and git alike).
pub(crate) const INITIALIZING: &str = "initializing";

/// The branch a work order is built on: `arbiter/<id>`.
pub fn branch_of(id: &str) -> String {
    format!("arbiter/{id}")
}

/// The full name of [`branch_of`]: `refs/heads/arbiter/<id>`.
pub fn branch_ref(id: &str) -> String {
    format!("{BRANCH_PREFIX}{id}")
}

/// The record event of an attempt whose builder's work could not be
/// committed (git's configuration refused): its attempt was given back, its
/// worktree and branch kept for the user until the next run removes them.
pub const KEPT_UNCOMMITTED: &str = "commit_failed";

/// Race instances' branches: `refs/heads/arbiter-race/<id>/<k>`.
pub const RACE_BRANCH_PREFIX: &str = "refs/heads/arbiter-race/";

/// The branch instance `k` of a race of `id` is built on: `arbiter-race/<id>/<k>`.
pub fn race_branch(id: &str, k: u32) -> String {
    format!("arbiter-race/{id}/{k}")
}

/// The worktree name of instance `k` of a race of `id`: `race-<id>-<k>`.
pub fn race_name(id: &str, k: u32) -> String {
    format!("race-{id}-{k}")
}

/// Creating and removing arbiter's worktrees take turns across processes.
/// Without them one conductor's crash cleanup, working from a snapshot, could
/// remove a worktree another conductor is creating or removing at that moment.
const WORKTREE_TURN: &str = "worktrees";

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Info {
    /// Folder name under the worktree dir (the WO id, or `race-<id>-<k>`).
    pub name: String,
    pub path: PathBuf,
    /// Short branch name, `None` when detached.
    pub branch: Option<String>,
    /// The commit checked out, `None` when unreadable.
    pub head: Option<String>,
    /// The folder is gone; `git worktree prune` (or `remove`) would drop it.
    pub prunable: bool,
}

/// Each repository's main worktree top, by common dir (a [`Caches`] entry).
#[derive(Default)]
struct MainTops(std::sync::Mutex<Vec<(PathBuf, PathBuf)>>);

impl MainTops {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(PathBuf, PathBuf)>> {
        // Push only: a panic elsewhere cannot leave it half-edited.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The main worktree's top; for a bare repository, the linked worktree
/// git-arbiter runs in, else the repository's own folder (its git dir):
/// where the repository is for builders (`$ARBITER_REPO`) and beside which
/// arbiter's worktrees go.
pub fn main_top(ctx: &Context) -> Result<PathBuf> {
    // Opening the main repository parses its configuration, and each take
    // and give-back of a worktree asks where the worktrees are: once per
    // repository and process is enough (the main worktree does not move).
    let tops = ctx.caches.get::<MainTops>();
    let common = normalize(&absolute(ctx, ctx.repo.common_dir()));
    let known = |tops: &[(PathBuf, PathBuf)]| {
        tops.iter()
            .find(|(c, _)| *c == common)
            .map(|(_, top)| top.clone())
    };
    if let Some(top) = known(&tops.lock()) {
        return Ok(top);
    }
    let main = ctx
        .repo
        .main_repo()
        .map_err(|source| Error::OpenMain { source })?;
    let top = match (main.workdir(), &ctx.workdir) {
        (Some(w), _) => normalize(&absolute(ctx, w)),
        (None, Some(here)) => normalize(&absolute(ctx, here)),
        (None, None) => common.clone(),
    };
    let mut tops = tops.lock();
    if known(&tops).is_none() {
        tops.push((common, top.clone()));
    }
    Ok(top)
}

/// The directory holding arbiter's worktrees (created on demand by [`add`]).
pub fn root_dir(ctx: &Context) -> Result<PathBuf> {
    let common = normalize(&absolute(ctx, ctx.repo.common_dir()));
    let anchor = main_top(ctx)?;
    let dir = match ctx.config_string("arbiter.worktreeDir") {
        Some(d) if d.is_empty() => {
            return Err(InputError::new("config arbiter.worktreeDir is empty")
                .hint("unset it or name a directory outside .git/")
                .into())
        }
        Some(d) => {
            let d = expand_home(&d);
            if d.is_absolute() {
                d
            } else {
                anchor.join(d)
            }
        }
        None => {
            let name = anchor
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "repo".into());
            anchor
                .parent()
                .unwrap_or(&anchor)
                .join(format!("{name}.arbiter"))
        }
    };
    let dir = normalize(&dir);
    let resolved = resolve_existing_prefix(&dir);
    let common_resolved = resolve_existing_prefix(&common);
    if resolved.starts_with(&common_resolved) {
        return Err(InputError::new(format!(
            "the worktree dir {} is inside the git directory {}",
            dir.display(),
            common.display()
        ))
        .hint("set 'git config arbiter.worktreeDir' to a directory outside .git/")
        .into());
    }
    Ok(dir)
}

fn absolute(ctx: &Context, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        normalize(&ctx.repo.current_dir().join(p))
    }
}

fn expand_home(d: &str) -> PathBuf {
    match d.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(rest))
            .unwrap_or_else(|| PathBuf::from(d)),
        None => PathBuf::from(d),
    }
}

/// Lexically drop `.` and resolve `..` (the path may not exist yet).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Canonicalize the longest existing prefix of `p`, keeping the rest as written.
fn resolve_existing_prefix(p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = p.to_owned();
    loop {
        if let Ok(c) = cur.canonicalize() {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (cur.file_name().map(|n| n.to_owned()), cur.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                cur = parent.to_owned();
            }
            _ => return p.to_owned(),
        }
    }
}

/// [`resolve_existing_prefix`] for many paths, most in a few folders (a
/// listing of worktrees): each folder is resolved once, and a path in it
/// that is no link (or is missing) resolves to the folder's resolution
/// joined with its name, without a walk of every component for each path.
#[derive(Default)]
struct Resolver {
    folders: std::collections::HashMap<PathBuf, PathBuf>,
}

impl Resolver {
    fn resolve(&mut self, path: &Path) -> PathBuf {
        use std::path::Component;
        let (Some(parent), Some(Component::Normal(name))) =
            (path.parent(), path.components().next_back())
        else {
            return resolve_existing_prefix(path);
        };
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.file_type().is_symlink() => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            _ => return resolve_existing_prefix(path),
        }
        self.folders
            .entry(parent.to_owned())
            .or_insert_with(|| resolve_existing_prefix(parent))
            .join(name)
    }
}

/// A folder name is one safe path component: `[A-Za-z0-9][A-Za-z0-9._-]*`, ≤ 100 bytes.
pub fn check_name(name: &str) -> Result<()> {
    let mut bytes = name.bytes();
    let ok = !name.is_empty()
        && name.len() <= 100
        && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !name.ends_with(".lock");
    if ok {
        Ok(())
    } else {
        Err(InputError::new(format!(
            "'{name}' is not a safe worktree name (one path component of [A-Za-z0-9._-], starting with a letter or digit)"
        ))
        .hint("use the work order's id")
        .into())
    }
}

fn branch_name(branch: &str) -> Result<FullName> {
    let full = format!("refs/heads/{branch}");
    FullName::try_from(full.as_str()).map_err(|_| {
        InputError::new(format!("'{branch}' is not a valid branch name"))
            .hint("use a name such as arbiter/<id>")
            .into()
    })
}

/// Create branch `branch` at `base` (it must not exist) and a linked worktree
/// `<root_dir>/<name>` with it checked out. On any failure nothing is left:
/// no branch, no registration, no folder.
pub fn add(ctx: &Context, name: &str, branch: &str, base: ObjectId) -> Result<PathBuf> {
    add_under(ctx, None, name, branch, base)
}

/// [`add`] into `<root_dir>/<sub>/<name>` (the pool's `pool/<n>`) when `sub` is given.
pub(crate) fn add_under(
    ctx: &Context,
    sub: Option<&str>,
    name: &str,
    branch: &str,
    base: ObjectId,
) -> Result<PathBuf> {
    check_name(name)?;
    let full = branch_name(branch)?;
    ctx.repo
        .find_commit(base)
        .map_err(|_| InputError::new(format!("{base} is not a commit")).hint("pass a commit"))?;
    // Before anything is made, and outside the turn: a fetch may take a while.
    crate::git::promisor::fetch_missing(&ctx.repo, base)?;
    let _turn = ctx.take_turn(WORKTREE_TURN)?;
    // gix refuses to add beside a registration without `gitdir`.
    prune_unlisted_registrations(ctx)?;
    let root = match sub {
        Some(sub) => root_dir(ctx)?.join(sub),
        None => root_dir(ctx)?,
    };
    let dest = root.join(name);
    check_destination(&root, &dest)?;
    if ctx
        .repo
        .try_find_reference(full.as_ref())
        .map_err(|source| Error::ReadRef {
            name: full.as_bstr().to_owned(),
            source,
        })?
        .is_some()
    {
        return Err(InputError::new(format!("branch '{branch}' already exists"))
            .hint(format!(
                "remove the old worktree with 'git arbiter worktree remove {name}', or delete the branch"
            ))
            .into());
    }
    make_root(&root, &dest)?;

    create_branch(ctx, &full, name, base)?;
    crate::sys::crash::point("worktree-add.before");
    if let Err(e) = check_out_new(ctx, &dest, &full) {
        // add_worktree rolls back its own files but not the branch we made for it.
        let _ = delete_branch(&ctx.repo, &full, Some(base));
        if std::fs::read_dir(&dest).is_ok_and(|mut d| d.next().is_none()) {
            let _ = std::fs::remove_dir(&dest);
        }
        return Err(e);
    }
    crate::sys::crash::point("worktree-add.after");
    Ok(dest)
}

/// A worktree `<root_dir>/<name>` with the existing `branch` checked out,
/// for the user to look at the work of an order that halted after its
/// worktree went back to the pool; none is made when a worktree has the
/// branch checked out already. Returns where the branch is checked out.
pub fn check_out_kept(ctx: &Context, name: &str, branch: &str) -> Result<PathBuf> {
    check_name(name)?;
    let full = branch_name(branch)?;
    let _turn = ctx.take_turn(WORKTREE_TURN)?;
    let listed = Registrations::read(&ctx.repo)?;
    if let Some(elsewhere) = checked_out_at(ctx, &full, listed.left())? {
        return Ok(elsewhere);
    }
    prune_unlisted_registrations(ctx)?;
    let root = root_dir(ctx)?;
    let dest = root.join(name);
    check_destination(&root, &dest)?;
    make_root(&root, &dest)?;
    check_out_new(ctx, &dest, &full)?;
    Ok(dest)
}

/// Create the worktree folder `root` that will hold `dest`, and check
/// again that `dest` resolves where expected (a link may have appeared).
fn make_root(root: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(root).map_err(|source| Error::CreateDir {
        path: root.to_owned(),
        source,
    })?;
    check_destination(root, dest)
}

/// Create the new worktree's branch `full` at `base`, refusing one that
/// exists (another process may have made it just now) or is locked.
fn create_branch(ctx: &Context, full: &FullName, name: &str, base: ObjectId) -> Result<()> {
    let branch = full.shorten();
    match crate::git::refguard::edit(&ctx.repo, &full.as_bstr().to_string(), || {
        ctx.repo.reference(
            full.as_ref(),
            base,
            PreviousValue::MustNotExist,
            format!("arbiter: worktree {name}"),
        )
    }) {
        Ok(_) => Ok(()),
        Err(e) => {
            let lock = crate::git::refguard::blocking_lock(&ctx.repo, &full.as_bstr().to_string());
            if lock.exists() {
                return Err(ref_locked(&format!("create branch '{branch}'"), &lock));
            }
            if e.is_conflict() {
                return Err(InputError::new(format!("branch '{branch}' already exists"))
                    .hint("another process created it just now")
                    .into());
            }
            Err(Error::CreateBranch {
                branch: branch.to_owned(),
                source: e,
            }
            .into())
        }
    }
}

/// Check out the new worktree at `dest` on the branch `full`, never sparse
/// and with every file as git writes it; a registration `git gc` removed
/// as it was being made is made again.
fn check_out_new(ctx: &Context, dest: &Path, full: &FullName) -> Result<()> {
    let interrupt = AtomicBool::new(false);
    // A builder needs every file its order may touch: its worktree is never
    // sparse, even where the worktree it is made from is.
    let mut full_repo = ctx.repo.clone();
    full_repo
        .config_snapshot_mut()
        .set_value(&gix::config::tree::Core::SPARSE_CHECKOUT, "false")
        .map_err(|source| Error::Configure { source })?;
    let add = || {
        full_repo
            .add_worktree(
                dest,
                gix::worktree::add::Head::Attached(full.clone()),
                gix::progress::Discard,
                &interrupt,
            )
            .map_err(|source| {
                crate::sys::error::Error::from(Error::Add {
                    path: dest.to_owned(),
                    source,
                })
            })
    };
    // `git gc` runs `git worktree prune`, which may remove a registration
    // being made (it has no `gitdir` file yet), and `git pack-refs` may move
    // a ref as it is read: made again, a little later (gix rolls back its
    // own files on a failure).
    let mut added = add();
    for tries in 1..=ADD_RETRIES {
        if added.is_ok() {
            break;
        }
        if std::fs::read_dir(dest).is_ok_and(|mut d| d.next().is_none()) {
            let _ = std::fs::remove_dir(dest);
        }
        std::thread::sleep(std::time::Duration::from_millis(u64::from(tries) * 10));
        added = add();
    }
    added.and_then(|(made, _)| {
        not_sparse(&made)?;
        as_git_writes_them(&made)
    })
}

/// gix's checkout of a new worktree writes some files other than git
/// would (`ident`, UTF-16 `working-tree-encoding`): those are written again
/// as git writes them, and the index takes their stat data.
fn as_git_writes_them(made: &gix::Repository) -> Result<()> {
    let Some(dir) = made.workdir() else {
        return Ok(());
    };
    let mut index = made.open_index().map_err(|source| Error::ReadIndex {
        dir: dir.to_owned(),
        source,
    })?;
    let before = index.entries().iter().map(|e| e.stat).collect::<Vec<_>>();
    crate::git::encoding::as_git_writes_it(made, &mut index, dir)?;
    if index.entries().iter().map(|e| e.stat).eq(before) {
        return Ok(());
    }
    index
        .write(gix::index::write::Options::default())
        .map_err(|source| Error::WriteIndex {
            dir: dir.to_owned(),
            source,
        })?;
    Ok(())
}

/// How often a worktree whose making failed is made again.
const ADD_RETRIES: u32 = 5;

/// gix copies the source's `config.worktree` into a new worktree, a
/// `core.sparseCheckout = true` with it: turn it off there, or the builder's
/// own git commands would treat its full checkout as sparse.
fn not_sparse(made: &gix::Repository) -> Result<()> {
    let path = made.git_dir().join("config.worktree");
    if !path.exists() {
        return Ok(());
    }
    let mut config =
        gix::config::File::from_path_no_includes(path.clone(), gix::config::Source::Worktree)
            .map_err(|source| Error::ReadConfig {
                path: path.clone(),
                source,
            })?;
    if config.boolean("core.sparseCheckout").ok().flatten() != Some(true) {
        return Ok(());
    }
    config
        .set_raw_value_by("core", None, "sparseCheckout", "false")
        .map_err(|source| Error::EditConfig {
            path: path.clone(),
            source,
        })?;
    let mut out = Vec::new();
    config
        .write_to(&mut out)
        .map_err(|source| Error::WriteConfig {
            path: path.clone(),
            source,
        })?;
    std::fs::write(&path, out).map_err(|source| Error::WriteConfig { path, source })?;
    Ok(())
}

/// The destination must not exist in any form (file, folder, dangling
/// symlink) and must resolve directly inside the worktree dir.
fn check_destination(root: &Path, dest: &Path) -> Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(dest) {
        let what = if meta.file_type().is_symlink() {
            "is a symlink"
        } else {
            "already exists"
        };
        return Err(
            InputError::new(format!("worktree destination {} {what}", dest.display()))
                .hint("remove it, or run 'git arbiter worktree list' to see arbiter's worktrees")
                .into(),
        );
    }
    let root_resolved = resolve_existing_prefix(root);
    let dest_resolved = resolve_existing_prefix(dest);
    if dest_resolved.parent() != Some(root_resolved.as_path()) {
        return Err(InputError::new(format!(
            "worktree destination {} resolves to {}, outside the worktree dir {}",
            dest.display(),
            dest_resolved.display(),
            root_resolved.display()
        ))
        .hint("check 'git config arbiter.worktreeDir' and symlinks on the way")
        .into());
    }
    Ok(())
}

/// Keep `source` on the order's branch `arbiter/<id>` (created, or moved
/// there), for work that waits to land and lives on another branch (a
/// race's winner): its commit stays reachable, and a round lands it from
/// there. Refused while a worktree has that branch checked out.
pub fn keep_on_branch(ctx: &Context, id: &str, source: ObjectId) -> Result<()> {
    let full = branch_name(&branch_of(id))?;
    let _turn = ctx.take_turn(WORKTREE_TURN)?;
    let current = ctx
        .repo
        .try_find_reference(full.as_ref())
        .map_err(|source| Error::ReadRef {
            name: full.as_bstr().to_owned(),
            source,
        })?
        .map(|mut r| r.peel_to_id().map(|id| id.detach()))
        .transpose()
        .map_err(|source| Error::ResolveRef {
            name: full.as_bstr().to_owned(),
            source,
        })?;
    if current == Some(source) {
        return Ok(());
    }
    let listed = Registrations::read(&ctx.repo)?;
    if let Some(elsewhere) = checked_out_at(ctx, &full, listed.left())? {
        return Err(InputError::new(format!(
            "branch '{}' is checked out in {}; its work cannot be kept there",
            branch_of(id),
            elsewhere.display()
        ))
        .hint("switch that worktree to another branch first")
        .into());
    }
    let expected = match current {
        Some(old) => PreviousValue::MustExistAndMatch(Target::Object(old)),
        None => PreviousValue::MustNotExist,
    };
    crate::git::refguard::edit(&ctx.repo, &full.as_bstr().to_string(), || {
        ctx.repo.reference(
            full.as_ref(),
            source,
            expected.clone(),
            format!("arbiter: keep the work of {id}, waiting to land"),
        )
    })
    .map_err(|e| Error::Keep {
        commit: source,
        branch: branch_of(id),
        source: e,
    })?;
    Ok(())
}

/// A ref edit stopped by a lock file that is not ours to remove.
fn ref_locked(what: &str, lock: &Path) -> crate::sys::error::Error {
    InputError::new(format!("cannot {what}: {} exists", lock.display()))
        .hint(format!(
            "a git process holds it, or was killed holding it: if none is running, remove {}",
            lock.display()
        ))
        .into()
}

/// The name prefix of a conductor's verification worktree, `verify-<conductor>`.
pub const VERIFY_PREFIX: &str = "verify-";

/// Merge queues' verification branches: `refs/heads/arbiter-verify/<conductor>`.
pub const VERIFY_BRANCH_PREFIX: &str = "refs/heads/arbiter-verify/";

/// The branch the merge queue of `conductor` verifies on: `arbiter-verify/<conductor>`.
pub fn verify_branch(conductor: &str) -> String {
    format!("arbiter-verify/{conductor}")
}

fn delete_branch(repo: &gix::Repository, full: &FullName, expect: Option<ObjectId>) -> Result<()> {
    let name = full.as_bstr().to_string();
    crate::git::refguard::delete(repo, &name, expect).map_err(|source| {
        // git waited for the lock as long as its configuration says: one
        // that is still there is someone's, reported rather than waited on.
        let lock = crate::git::refguard::blocking_lock(repo, &name);
        if lock.exists() {
            return ref_locked(&format!("delete {name}"), &lock);
        }
        Error::DeleteBranch { name, source }.into()
    })
}

/// Drop `<git-common-dir>/worktrees/<name>` when it points at no worktree:
/// an `add` killed before it wrote `gitdir` (gix then does not list it, and
/// the next `add` of that name registers `<name>1` beside it), or one whose
/// folder is gone. Stock git's `worktree prune` drops such entries too.
fn prune_registration(ctx: &Context, name: &str) -> Result<()> {
    let registration = ctx.repo.common_dir().join("worktrees").join(name);
    if !registration.is_dir() {
        return Ok(());
    }
    let points_at_a_worktree = std::fs::read_to_string(registration.join("gitdir"))
        .ok()
        .is_some_and(|gitdir| Path::new(gitdir.trim()).exists());
    if points_at_a_worktree {
        return Ok(());
    }
    std::fs::remove_dir_all(&registration).map_err(|source| Error::RemoveRegistration {
        path: registration.clone(),
        source,
    })?;
    Ok(())
}

/// Drop each `<git-common-dir>/worktrees/<name>` without a `gitdir` (or
/// with an empty one) that is not locked by hand: what a removal killed
/// midway leaves (gix deletes a registration's files in any order), or an
/// `add` killed before it wrote `gitdir` (its `initializing` lock stays).
/// Neither gix nor git lists such an entry, so nothing else would ever drop
/// it, and while it is there gix refuses every `add`. Our adds hold the
/// worktree turn the caller holds; git's own writes `gitdir` microseconds
/// after its lock. Returns one report line each.
fn prune_unlisted_registrations(ctx: &Context) -> Result<Vec<String>> {
    let dir = ctx.repo.common_dir().join("worktrees");
    let Ok(listing) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut report = Vec::new();
    for entry in listing.flatten() {
        let registration = entry.path();
        let gitdir = std::fs::read_to_string(registration.join("gitdir"));
        // A lock by hand (`git worktree lock`) keeps it; `initializing` is
        // the lock an add takes just before it writes `gitdir`.
        let locked_by_hand = std::fs::read_to_string(registration.join("locked"))
            .is_ok_and(|reason| reason.trim() != INITIALIZING);
        if !registration.is_dir() || gitdir.is_ok_and(|g| !g.trim().is_empty()) || locked_by_hand {
            continue;
        }
        std::fs::remove_dir_all(&registration).map_err(|source| Error::RemoveRegistration {
            path: registration.clone(),
            source,
        })?;
        report.push(format!(
            "removed {}, a worktree registration without its gitdir (a removal was killed midway)",
            registration.display()
        ));
    }
    Ok(report)
}

/// Is the worktree at `path`, registered at `registration`, a checkout
/// stock git accepts: a `.git` file naming a git dir that holds `HEAD` and
/// `commondir`? A removal killed midway deletes files in no set order and
/// can leave either side without them; a registration locked by hand
/// counts as sound whatever it holds.
fn is_checkout(registration: Option<&Path>, path: &Path) -> bool {
    let Some(registration) = registration else {
        return false;
    };
    if std::fs::read_to_string(registration.join("locked"))
        .is_ok_and(|reason| reason.trim() != INITIALIZING)
    {
        return true;
    }
    let Ok(dot_git) = std::fs::read_to_string(path.join(".git")) else {
        return false;
    };
    let Some(git_dir) = dot_git.strip_prefix("gitdir: ").map(str::trim) else {
        return false;
    };
    let git_dir = path.join(git_dir);
    git_dir.join("HEAD").is_file() && git_dir.join("commondir").is_file()
}

/// Remove a worktree that is no longer a checkout: its folder and its
/// registration, as `git worktree prune` would (gix's removal needs a
/// readable worktree). The caller holds the worktree turn.
fn remove_broken(registration: Option<&Path>, path: &Path) -> Result<()> {
    for dir in [Some(path), registration].into_iter().flatten() {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(Error::Remove {
                    path: dir.to_owned(),
                    source,
                }
                .into())
            }
        }
    }
    Ok(())
}

/// Is `dest` (a folder of ours under the worktree dir that no registration
/// names) what an `add` killed before registering it left: empty, or with a
/// `.git` file naming a registration that is not there? Anything else in
/// it may be a person's: it stays, and the add refuses with its path.
fn half_made(ctx: &Context, dest: &Path) -> bool {
    let Ok(mut entries) = std::fs::read_dir(dest) else {
        return false;
    };
    if find_registered(&ctx.repo, dest).ok().flatten().is_some() {
        return false;
    }
    if entries.next().is_none() {
        return true;
    }
    let Ok(dot_git) = std::fs::read_to_string(dest.join(".git")) else {
        return false;
    };
    let Some(gitdir) = dot_git.trim().strip_prefix("gitdir: ") else {
        return false;
    };
    let gitdir = Path::new(gitdir);
    gitdir.starts_with(ctx.repo.common_dir().join("worktrees")) && !gitdir.exists()
}

/// The registered linked worktree at `path`, if any.
fn find_registered<'r>(
    repo: &'r gix::Repository,
    path: &Path,
) -> Result<Option<gix::worktree::Proxy<'r>>> {
    let mut resolver = Resolver::default();
    let want = resolver.resolve(path);
    for proxy in repo
        .worktrees()
        .map_err(|source| Error::ListWorktrees { source })?
    {
        let Ok(base) = proxy.base() else { continue };
        if base == path || resolver.resolve(&base) == want {
            return Ok(Some(proxy));
        }
    }
    Ok(None)
}

/// The linked worktrees registered when read, each with where it is, for
/// the lookups of one removal: each is found as [`find_registered`] and
/// [`pooled`] would find it, and a registration taken out (to be removed)
/// is not found again.
struct Registrations<'r> {
    resolver: Resolver,
    /// Each registration with its worktree's folder as recorded and resolved.
    listed: Vec<(gix::worktree::Proxy<'r>, Option<(PathBuf, PathBuf)>)>,
}

impl<'r> Registrations<'r> {
    fn read(repo: &'r gix::Repository) -> Result<Self> {
        let mut resolver = Resolver::default();
        let listed = repo
            .worktrees()
            .map_err(|source| Error::ListWorktrees { source })?
            .into_iter()
            .map(|proxy| {
                let base = proxy.base().ok().map(|base| {
                    let resolved = resolver.resolve(&base);
                    (base, resolved)
                });
                (proxy, base)
            })
            .collect();
        Ok(Registrations { resolver, listed })
    }

    /// Take out the registration of the worktree at `path`.
    fn take_at(&mut self, path: &Path) -> Option<gix::worktree::Proxy<'r>> {
        let want = self.resolver.resolve(path);
        let at = self.listed.iter().position(|(_, base)| {
            base.as_ref()
                .is_some_and(|(base, resolved)| base == path || *resolved == want)
        })?;
        Some(self.listed.remove(at).0)
    }

    /// Take out the pooled worktree (as [`pooled`] lists it) that has
    /// `branch` checked out.
    fn take_pooled_on(
        &mut self,
        ctx: &Context,
        branch: &str,
    ) -> Result<Option<(Info, gix::worktree::Proxy<'r>)>> {
        let pool = resolve_existing_prefix(&pool_dir(ctx)?);
        let found = self.listed.iter().position(|(proxy, base)| {
            base.as_ref()
                .is_some_and(|(_, resolved)| resolved.parent() == Some(pool.as_path()))
                && head_branch(proxy.git_dir())
                    .is_some_and(|full| full.shorten() == branch.as_bytes())
        });
        let Some((proxy, Some((path, resolved)))) = found.map(|at| self.listed.remove(at)) else {
            return Ok(None);
        };
        let info = Info {
            name: resolved
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path,
            branch: Some(branch.to_owned()),
            head: None,
            prunable: proxy.is_prunable(),
        };
        Ok(Some((info, proxy)))
    }

    /// Put back a registration taken out and kept.
    fn keep(&mut self, proxy: gix::worktree::Proxy<'r>) {
        self.listed.push((proxy, None));
    }

    /// The registrations not taken out.
    fn left(&self) -> impl Iterator<Item = &gix::worktree::Proxy<'r>> {
        self.listed.iter().map(|(proxy, _)| proxy)
    }
}

/// Remove worktree `<root_dir>/<name>` (untracked files included: builders
/// leave them) and delete branch `branch`. Missing pieces are fine. A branch
/// checked out in some other worktree is never deleted.
pub fn remove(ctx: &Context, name: &str, branch: &str) -> Result<()> {
    remove_taking_turn(ctx, name, branch, false, HOLD_TRIES)
}

/// [`remove`] before the order's worktree is taken: a pooled worktree that
/// a live process holds on `branch` (another conductor builds the order,
/// its claim forgotten by the state) is [`Error::InUse`] after a moment,
/// not after [`HOLD_TRIES`].
pub fn remove_before_take(ctx: &Context, name: &str, branch: &str) -> Result<()> {
    remove_taking_turn(ctx, name, branch, false, TAKE_HOLD_TRIES)
}

/// How often [`remove_before_take`] tries to hold a worktree on the
/// order's branch: long enough for another run's look at the pool.
const TAKE_HOLD_TRIES: u32 = 5;

/// [`remove`] the worktree but keep its branch: work waiting to land.
pub fn remove_keeping_branch(ctx: &Context, name: &str, branch: &str) -> Result<()> {
    remove_taking_turn(ctx, name, branch, true, HOLD_TRIES)
}

/// [`remove_in_turn`] of checked names, the worktree turn taken for it.
fn remove_taking_turn(
    ctx: &Context,
    name: &str,
    branch: &str,
    keep_branch: bool,
    tries: u32,
) -> Result<()> {
    check_name(name)?;
    branch_name(branch)?;
    let _turn = ctx.take_turn(WORKTREE_TURN)?;
    remove_in_turn(ctx, name, branch, keep_branch, tries)
}

/// [`remove`] for a caller that holds the worktree turn. The worktree is
/// `<root_dir>/<name>`, or else a pooled worktree (see the `pool` module) that
/// has `branch` checked out: one whose order halted, or one a killed run
/// left; a pooled worktree a live process holds is refused. The branch is
/// deleted too unless `keep_branch`.
fn remove_in_turn(
    ctx: &Context,
    name: &str,
    branch: &str,
    keep_branch: bool,
    tries: u32,
) -> Result<()> {
    let full = branch_name(branch)?;
    let mut dest = root_dir(ctx)?.join(name);
    // One listing serves every lookup below: under the turn, only this
    // removal changes the registrations.
    let mut listed = Registrations::read(&ctx.repo)?;
    let mut at_dest = listed.take_at(&dest);
    if at_dest.is_none() {
        if let Some((info, proxy)) = listed.take_pooled_on(ctx, branch)? {
            match hold_while_on(ctx, &info, &full, tries)? {
                Held::Locked(_held) => {
                    remove_registration(&info.path, proxy)?;
                    crate::state::ledger::forget(ctx, &info.name)?;
                    dest = info.path;
                }
                // Taken and switched to another branch meanwhile: nothing of
                // `branch` is left in it.
                Held::Moved => listed.keep(proxy),
                Held::InUse => {
                    return Err(Error::InUse {
                        what: format!(
                            "the pooled worktree {} holding branch '{branch}'",
                            info.path.display()
                        ),
                    }
                    .into())
                }
            }
        }
    }
    if let Some(proxy) = at_dest.take() {
        remove_registration(&dest, proxy)?;
    }
    prune_registration(ctx, name)?;
    if half_made(ctx, &dest) {
        std::fs::remove_dir_all(&dest).map_err(|source| Error::RemoveHalfMade {
            path: dest.clone(),
            source,
        })?;
    }
    if keep_branch {
        return Ok(());
    }
    if ctx
        .repo
        .try_find_reference(full.as_ref())
        .map_err(|source| Error::ReadRef {
            name: full.as_bstr().to_owned(),
            source,
        })?
        .is_none()
    {
        return Ok(());
    }
    if let Some(elsewhere) = checked_out_at(ctx, &full, listed.left())? {
        return Err(InputError::new(format!(
            "branch '{branch}' is checked out in {}; not deleting it",
            elsewhere.display()
        ))
        .hint("switch that worktree to another branch first")
        .into());
    }
    crate::sys::crash::point("branch-delete.before");
    match delete_branch(&ctx.repo, &full, None) {
        Ok(()) => {
            crate::sys::crash::point("branch-delete.after");
            Ok(())
        }
        // Deleted concurrently: the outcome we wanted.
        Err(_)
            if ctx
                .repo
                .try_find_reference(full.as_ref())
                .ok()
                .flatten()
                .is_none() =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Remove the linked worktree registered at `dest` (untracked files included),
/// if any; the caller holds the worktree turn.
fn remove_registered(ctx: &Context, dest: &Path) -> Result<()> {
    match find_registered(&ctx.repo, dest)? {
        Some(proxy) => remove_registration(dest, proxy),
        None => Ok(()),
    }
}

/// [`remove_registered`] with the registration of `dest` found already.
fn remove_registration(dest: &Path, proxy: gix::worktree::Proxy<'_>) -> Result<()> {
    // gix and git lock a worktree with this reason while they create it.
    // Creating an arbiter worktree takes the turn we hold: so no one is
    // creating this one, and the lock is what a killed `add` left.
    if proxy.lock_reason().is_some_and(|r| r == INITIALIZING) {
        proxy.set_lock(None).map_err(|source| Error::Unlock {
            path: dest.to_owned(),
            source,
        })?;
    }
    if proxy.is_locked() {
        return Err(
            InputError::new(format!("worktree {} is locked", dest.display()))
                .hint(format!(
                    "unlock it with 'git worktree unlock {}'",
                    dest.display()
                ))
                .into(),
        );
    }
    // No `.git` file: an `add` killed midway (or a hand edit) left a
    // folder that is no longer a checkout and a registration stock git
    // calls prunable. gix refuses to remove a worktree whose backlink it
    // cannot read, so clear the folder first or every later round fails.
    // Killed before it wrote all of `.git` (or any): the same.
    let dot_git = dest.join(".git");
    let backlink = std::fs::read_to_string(&dot_git)
        .is_ok_and(|text| text.starts_with("gitdir: ") && text.ends_with('\n'));
    if dest.is_dir() && !backlink {
        std::fs::remove_dir_all(dest).map_err(|source| Error::Remove {
            path: dest.to_owned(),
            source,
        })?;
    }
    crate::sys::crash::point("worktree-remove.before");
    proxy
        .remove(
            gix::worktree::remove::Force::DiscardChanges,
            gix::progress::Discard,
        )
        .map_err(|source| Error::RemoveWorktree {
            path: dest.to_owned(),
            source,
        })?;
    crate::sys::crash::point("worktree-remove.after");
    Ok(())
}

/// The registration (`<git-common-dir>/worktrees/<name>`, the worktree's
/// own git dir) of the linked worktree at `path`.
fn registration_of(ctx: &Context, path: &Path) -> Option<PathBuf> {
    let listing = std::fs::read_dir(ctx.repo.common_dir().join("worktrees")).ok()?;
    listing.flatten().map(|e| e.path()).find(|r| {
        std::fs::read_to_string(r.join("gitdir"))
            .is_ok_and(|gitdir| Path::new(gitdir.trim()).parent() == Some(path))
    })
}

/// What [`hold_while_on`] found.
enum Held {
    /// Locked, and still on the branch.
    Locked(crate::sys::flock::Held),
    /// No longer on the branch: another order took it.
    Moved,
    /// Held all along, still on the branch: someone works in it.
    InUse,
}

/// The lock of pooled worktree `info` while it is still on `branch`,
/// waiting a moment for it: a run's search of the pool holds each free
/// worktree's lock while it looks at it, and a worktree read as on a
/// killed run's branch may be taken for another order meanwhile (its HEAD
/// read just before the switch).
fn hold_while_on(ctx: &Context, info: &Info, branch: &FullName, tries: u32) -> Result<Held> {
    let on_branch = || {
        registration_of(ctx, &info.path).is_none_or(|r| head_branch(&r).as_ref() == Some(branch))
    };
    for k in 0..tries {
        if k > 0 {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if let Some(held) = crate::state::ledger::hold(ctx, &info.name)? {
            return Ok(if on_branch() {
                Held::Locked(held)
            } else {
                Held::Moved
            });
        }
        if !on_branch() {
            return Ok(Held::Moved);
        }
    }
    Ok(Held::InUse)
}

/// Is `branch` checked out in a pooled worktree a live process holds now?
fn in_use_on(ctx: &Context, branch: &str) -> Result<bool> {
    let full = branch_name(branch)?;
    let mut listed = Registrations::read(&ctx.repo)?;
    let Some((info, _)) = listed.take_pooled_on(ctx, branch)? else {
        return Ok(false);
    };
    Ok(matches!(hold_while_on(ctx, &info, &full, 1)?, Held::InUse))
}

/// How often [`hold_while_on`] tries, 100 ms apart.
const HOLD_TRIES: u32 = 30;

/// Remove what a killed `add` of the pooled worktree `pool/<n>` at `path`
/// left: its registration, whole or without `gitdir`, and its folder.
pub(crate) fn clear_half_made(ctx: &Context, n: &str, path: &Path) -> Result<()> {
    let _turn = ctx.take_turn(WORKTREE_TURN)?;
    clear_half_made_in_turn(ctx, n, path)
}

/// [`clear_half_made`] for a caller that has the worktree turn.
fn clear_half_made_in_turn(ctx: &Context, n: &str, path: &Path) -> Result<()> {
    remove_registered(ctx, path)?;
    prune_registration(ctx, n)?;
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|source| Error::RemoveHalfMade {
            path: path.to_owned(),
            source,
        })?;
    }
    Ok(())
}

/// Remove what killed creations of pooled worktrees left: each entry that
/// still says `creating`, that no process holds, for a number no worktree
/// is registered under (a registered one is judged with the pool), with its
/// folder and any half-written registration. Nothing ran in such a folder:
/// a builder starts only once its worktree is made. Without this, a folder
/// stays until a later creation needs that very number, and `pool prune`
/// would drop the entry that marks it as ours. Returns the folders removed.
pub(crate) fn remove_killed_creations(ctx: &Context) -> Result<Vec<PathBuf>> {
    let _turn = ctx.take_turn(WORKTREE_TURN)?;
    remove_killed_creations_in_turn(ctx)
}

fn remove_killed_creations_in_turn(ctx: &Context) -> Result<Vec<PathBuf>> {
    use crate::state::ledger::{self, State};
    let common = ctx.repo.common_dir().to_owned();
    let creating =
        |n: &str| ledger::read_entry(&common, n).is_some_and(|e| e.state == State::Creating);
    let numbers: Vec<String> = ledger::numbers(&common)
        .into_iter()
        .filter(|n| creating(n))
        .collect();
    if numbers.is_empty() {
        return Ok(Vec::new());
    }
    let registered: std::collections::BTreeSet<String> =
        pooled(ctx)?.into_iter().map(|info| info.name).collect();
    let dir = pool_dir(ctx)?;
    let mut removed = Vec::new();
    for n in numbers {
        if registered.contains(&n) {
            continue;
        }
        let Some(_held) = ledger::hold(ctx, &n)? else {
            continue;
        };
        // Under its lock, as it is now.
        if !creating(&n) {
            continue;
        }
        let path = dir.join(&n);
        let existed = std::fs::symlink_metadata(&path).is_ok();
        clear_half_made_in_turn(ctx, &n, &path)?;
        ledger::forget(ctx, &n)?;
        if existed {
            removed.push(path);
        }
    }
    Ok(removed)
}

/// Remove the pooled worktree at `path` (its branch, if any, stays).
pub(crate) fn remove_pooled(ctx: &Context, path: &Path) -> Result<()> {
    let _turn = ctx.take_turn(WORKTREE_TURN)?;
    remove_registered(ctx, path)
}

/// The folder of the worktree pool, `<root_dir>/pool`.
pub(crate) fn pool_dir(ctx: &Context) -> Result<PathBuf> {
    Ok(root_dir(ctx)?.join(POOL_DIR))
}

/// Open the linked worktree checked out at `path` as one of `repo`'s: with
/// the settings `repo` was opened with (`git -c` ones included), but none of
/// the variables a hook may have set for `repo` itself (`GIT_INDEX_FILE`
/// names *its* index, and would be taken for the worktree's).
pub(crate) fn open_linked(
    caches: &Caches,
    repo: &gix::Repository,
    path: &Path,
) -> Result<gix::Repository> {
    let want = std::fs::canonicalize(path).map_err(|source| Error::Locate {
        path: path.to_owned(),
        source,
    })?;
    let open = |source| Error::Open {
        path: path.to_owned(),
        source,
    };
    if let Some(proxy) = named_registration(repo, &want) {
        return proxy
            .into_repo()
            .map(|repo| crate::state::context::cached(caches, repo))
            .map_err(|source| open(source).into());
    }
    let mut resolver = Resolver::default();
    let listed = repo.worktrees().map_err(|source| Error::ListForOpen {
        path: path.to_owned(),
        source,
    })?;
    for proxy in listed {
        let here = proxy.base().ok().map(|b| resolver.resolve(&b));
        if here.as_deref() == Some(want.as_path()) {
            return proxy
                .into_repo()
                .map(|repo| crate::state::context::cached(caches, repo))
                .map_err(|source| open(source).into());
        }
    }
    Err(
        InputError::new(format!("{} is not a registered worktree", path.display()))
            .hint("run 'git worktree list' to see the registered ones")
            .into(),
    )
}

/// The registration that the `.git` file of the worktree at `dir` (a
/// canonical path) names, when it is one of `repo`'s and names `dir` back:
/// one registration read instead of all of them (a worktree is opened a few
/// times per order). `None` leaves the search to a listing.
fn named_registration<'r>(
    repo: &'r gix::Repository,
    dir: &Path,
) -> Option<gix::worktree::Proxy<'r>> {
    let dot_git = std::fs::read_to_string(dir.join(".git")).ok()?;
    let gitdir = Path::new(
        dot_git
            .strip_prefix("gitdir: ")?
            .trim_end_matches(['\n', '\r']),
    );
    let id = gitdir.file_name()?.to_str()?;
    let proxy = repo.worktree_proxy_by_id(id).ok()??;
    let base = std::fs::canonicalize(proxy.base().ok()?).ok()?;
    (base == dir).then_some(proxy)
}

/// The sub-folder of the worktree dir that holds the pool.
pub(crate) const POOL_DIR: &str = "pool";

/// The pooled worktrees (the `pool` module's): the linked worktrees registered
/// directly under [`pool_dir`], by name (`0`, `1`, …), their commits unread
/// (`head` is `None`).
pub(crate) fn pooled(ctx: &Context) -> Result<Vec<Info>> {
    registered_under(ctx, &pool_dir(ctx)?, false)
}

/// [`pooled`], with each worktree's commit.
pub(crate) fn pooled_with_heads(ctx: &Context) -> Result<Vec<Info>> {
    registered_under(ctx, &pool_dir(ctx)?, true)
}

/// Where `full` is checked out: the main worktree, or one of the linked
/// worktrees registered at `linked` (their HEAD files read now).
fn checked_out_at<'r>(
    ctx: &Context,
    full: &FullName,
    linked: impl Iterator<Item = &'r gix::worktree::Proxy<'r>>,
) -> Result<Option<PathBuf>> {
    // The main worktree's HEAD is the common dir's: read as a file, the
    // repository opened only to say where it is.
    if head_branch(ctx.repo.common_dir()).as_ref() == Some(full) {
        let main = ctx
            .repo
            .main_repo()
            .map_err(|source| Error::OpenMainWorktree { source })?;
        return Ok(Some(
            main.workdir()
                .map(Path::to_owned)
                .unwrap_or_else(|| main.git_dir().to_owned()),
        ));
    }
    for proxy in linked {
        if head_branch(proxy.git_dir()).as_ref() == Some(full) {
            return Ok(Some(
                proxy.base().unwrap_or_else(|_| proxy.git_dir().to_owned()),
            ));
        }
    }
    Ok(None)
}

/// Arbiter's worktrees: the linked worktrees registered directly under [`root_dir`], by name.
pub fn list(ctx: &Context) -> Result<Vec<Info>> {
    registered_under(ctx, &root_dir(ctx)?, true)
}

/// What a worktree's `HEAD` file says, read from the file alone: opening
/// each worktree as a repository costs a configuration and object-database
/// load apiece, and the pool lists its worktrees at every take and give-back.
enum HeadFile {
    Branch(FullName),
    Detached(gix::ObjectId),
}

fn read_head_file(git_dir: &Path) -> Option<HeadFile> {
    let content = std::fs::read(git_dir.join("HEAD")).ok()?;
    let content = String::from_utf8_lossy(&content);
    let content = content.trim();
    // git allows any blanks after `ref:`.
    match content.strip_prefix("ref:") {
        Some(name) => FullName::try_from(name.trim_start())
            .ok()
            .map(HeadFile::Branch),
        None => gix::ObjectId::from_hex(content.as_bytes())
            .ok()
            .map(HeadFile::Detached),
    }
}

/// The branch a worktree's HEAD names, `None` when detached or unreadable.
fn head_branch(git_dir: &Path) -> Option<FullName> {
    match read_head_file(git_dir)? {
        HeadFile::Branch(full) => Some(full),
        HeadFile::Detached(_) => None,
    }
}

/// Does the HEAD file in `git_dir` name `branch`? One that cannot be read
/// or parsed counts as a match, so that opening the repository decides.
pub(crate) fn head_may_name(git_dir: &Path, branch: &FullName) -> bool {
    match read_head_file(git_dir) {
        Some(HeadFile::Branch(full)) => full == *branch,
        Some(HeadFile::Detached(_)) => false,
        None => true,
    }
}

/// A linked worktree's branch (as [`head_branch`]) and the commit its HEAD
/// names (`None` when unreadable), a branch's through the shared refs.
fn head_of(repo: &gix::Repository, git_dir: &Path) -> (Option<FullName>, Option<String>) {
    match read_head_file(git_dir) {
        Some(HeadFile::Branch(full)) => {
            let head = repo
                .try_find_reference(full.as_ref())
                .ok()
                .flatten()
                .and_then(|mut r| r.peel_to_id().ok())
                .map(|id| id.to_string());
            (Some(full), head)
        }
        Some(HeadFile::Detached(id)) => (None, Some(id.to_string())),
        None => (None, None),
    }
}

/// The linked worktrees registered directly under `dir`, by folder name;
/// with `heads`, each one's commit too (read through the refs, which the
/// pool's takes and give-backs do not need).
fn registered_under(ctx: &Context, dir: &Path, heads: bool) -> Result<Vec<Info>> {
    let root = resolve_existing_prefix(dir);
    let mut resolver = Resolver::default();
    let mut out = Vec::new();
    for proxy in ctx
        .repo
        .worktrees()
        .map_err(|source| Error::ListWorktrees { source })?
    {
        let Ok(base) = proxy.base() else { continue };
        let resolved = resolver.resolve(&base);
        if resolved.parent() != Some(root.as_path()) {
            continue;
        }
        let name = resolved
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prunable = proxy.is_prunable();
        let (branch, head) = if heads {
            head_of(&ctx.repo, proxy.git_dir())
        } else {
            (head_branch(proxy.git_dir()), None)
        };
        let branch = branch.map(|b| b.shorten().to_string());
        out.push(Info {
            name,
            path: base,
            branch,
            head,
            prunable,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The work order a worktree name or `arbiter/` branch suffix belongs to:
/// `<id>` itself, or `race-<id>-<k>`.
pub(crate) fn owner_of<'o>(orders: &'o Orders, name: &str) -> Option<&'o str> {
    if let Some(wo) = orders.get(name) {
        return Some(&wo.id);
    }
    let rest = name.strip_prefix("race-")?;
    let (id, k) = rest.rsplit_once('-')?;
    if k.is_empty() || !k.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    orders.get(id).map(|wo| wo.id.as_str())
}

/// The worktree name that goes with a short branch name: `<id>` for
/// `arbiter/<id>`, `race-<id>-<k>` for `arbiter-race/<id>/<k>`.
pub(crate) fn name_of_branch(branch: &str) -> Option<String> {
    if let Some(id) = branch.strip_prefix("arbiter/") {
        return Some(id.to_owned());
    }
    let (id, k) = branch.strip_prefix("arbiter-race/")?.rsplit_once('/')?;
    Some(format!("race-{id}-{k}"))
}

/// The tips of the `arbiter/<id>` branches, by id.
pub type BranchTips = std::collections::BTreeMap<String, gix::ObjectId>;

/// [`BranchTips`] in one listing of `refs/heads/arbiter/`, not a lookup per
/// order (status reads every order's). A branch another thread or
/// conductor deletes meanwhile is left out ([`crate::git::refguard::listed`]).
pub fn branch_tips(ctx: &Context) -> Result<BranchTips> {
    let mut tips = BranchTips::new();
    let refs = ctx
        .repo
        .references()
        .map_err(|source| Error::ListRefs { source })?;
    for r in refs
        .prefixed(BRANCH_PREFIX)
        .map_err(|source| Error::ListBranches { source })?
    {
        let Some(mut r) = crate::git::refguard::listed(&ctx.repo, r)
            .map_err(|source| Error::ReadAReference { source })?
        else {
            continue;
        };
        let name = r.name().as_bstr().to_string();
        let Some(id) = name.strip_prefix(BRANCH_PREFIX).map(str::to_owned) else {
            continue;
        };
        let head = r
            .peel_to_id()
            .map_err(|source| Error::ResolveRef {
                name: name.as_str().into(),
                source,
            })?
            .detach();
        tips.insert(id, head);
    }
    Ok(tips)
}

/// The tip of `arbiter/<id>` if it is someone's own work rather than a
/// leftover: the order was never dispatched (no record, or one that counts no
/// attempt) and the branch holds commits the integration branch (at `tip`)
/// lacks. Dispatch records the attempt before it creates the branch, so no
/// run of git-arbiter made it: it was made by hand (`git arbiter worktree
/// add`, `git branch`), to be merged with `merge-back`. Rounds leave it alone.
/// Not so a branch kept after its commit failed ([`KEPT_UNCOMMITTED`]): its
/// attempt was given back, but a round made it.
/// `tips` is [`branch_tips`], read once for many orders.
pub fn hand_made_work(
    ctx: &Context,
    id: &str,
    record: Option<&Record>,
    tip: Option<gix::ObjectId>,
    tips: &BranchTips,
) -> Result<Option<gix::ObjectId>> {
    if record.is_some_and(|r| {
        r.attempts > 0
            || r.halted
            || r.history
                .last()
                .is_some_and(|e| e.event == KEPT_UNCOMMITTED)
    }) {
        return Ok(None);
    }
    let Some(&head) = tips.get(id) else {
        return Ok(None);
    };
    let merged = match tip {
        Some(tip) => ctx.is_ancestor(head, tip)?,
        None => false,
    };
    Ok((!merged).then_some(head))
}

/// Crash recovery for worktrees and `arbiter/*` branches a killed run left
/// behind. A leftover is removed when its work order is neither halted nor
/// in progress by a live owner (`is_live`); a halted order's branch and
/// worktree are kept for inspection (DESIGN "Nothing unmerged is silently
/// lost"), as is anything that belongs to no known work order, and a branch
/// made by hand ([`hand_made_work`] against the integration tip `tip`).
/// Returns one report line per leftover.
pub fn cleanup_stale(
    ctx: &Context,
    store: &Store,
    orders: &Orders,
    tip: Option<gix::ObjectId>,
    is_live: &dyn Fn(&Record) -> bool,
    wait_out_fresh_locks: bool,
) -> Result<Vec<String>> {
    let mut report = Vec::new();
    // Dispatch records `in_progress` before it creates a worktree, and
    // creation waits for this turn: so whatever is listed below is either in
    // the snapshot as live work, or a true leftover.
    let _turn = ctx.take_turn(WORKTREE_TURN)?;
    report.extend(prune_unlisted_registrations(ctx)?);
    for path in remove_killed_creations_in_turn(ctx)? {
        report.push(format!(
            "removed the half-made pooled worktree {} (its creation was killed midway)",
            path.display()
        ));
    }
    report.extend(repair_unheld_pooled(ctx)?);
    let names = leftover_names(ctx)?;
    let mut snapshot = store.snapshot()?;
    report.extend(clear_stale_branch_locks(
        ctx,
        orders,
        &mut snapshot,
        is_live,
        wait_out_fresh_locks,
    )?);
    let mut leftovers = Leftovers {
        ctx,
        orders,
        tip,
        is_live,
        tips: branch_tips(ctx)?,
        snapshot,
    };
    for (name, (info, found_branch)) in names {
        report.extend(leftovers.settle(&name, info, found_branch)?);
    }
    Ok(report)
}

/// Pooled worktrees no one holds (every switch and reset holds its lock):
/// one that is no longer a checkout (a removal was killed midway) goes, and
/// an index lock ours left in one is stale and goes.
fn repair_unheld_pooled(ctx: &Context) -> Result<Vec<String>> {
    let mut report = Vec::new();
    for info in pooled(ctx)? {
        let Some(_held) = crate::state::ledger::hold(ctx, &info.name)? else {
            continue;
        };
        let registration = registration_of(ctx, &info.path);
        if info.branch.is_none() && !is_checkout(registration.as_deref(), &info.path) {
            remove_broken(registration.as_deref(), &info.path)?;
            crate::state::ledger::forget(ctx, &info.name)?;
            report.push(format!(
                "removed the pooled worktree {}, no longer a checkout (a removal was killed midway)",
                info.path.display()
            ));
            continue;
        }
        if let Some(git_dir) = registration {
            if crate::git::layout::clear_index_lock_left(&git_dir, &git_dir.join("index")) {
                report.push(format!(
                    "removed the index lock a killed git-arbiter left in {}",
                    info.path.display()
                ));
            }
        }
    }
    Ok(report)
}

/// Each name that may be a leftover → its worktree and its branch, as found.
type Names = std::collections::BTreeMap<String, (Option<Info>, Option<String>)>;

/// Every worktree and arbiter branch by the name that ties them to an
/// order: arbiter's worktrees, pooled ones still on an order's branch that
/// no live process holds, and the `arbiter/*` and `arbiter-race/*` branches.
fn leftover_names(ctx: &Context) -> Result<Names> {
    let mut names = Names::new();
    for info in list(ctx)? {
        let name = info.name.clone();
        names.entry(name).or_default().0 = Some(info);
    }
    // A pooled worktree still on an order's branch (its order halted, or a
    // killed run left it) goes with that order; one a live process holds
    // is in use, not a leftover.
    for info in pooled(ctx)? {
        let Some(name) = info.branch.as_deref().and_then(name_of_branch) else {
            continue;
        };
        if crate::state::ledger::hold(ctx, &info.name)?.is_none() {
            continue;
        }
        names.entry(name).or_default().0.get_or_insert(info);
    }
    let refs = ctx
        .repo
        .references()
        .map_err(|source| Error::ListRefs { source })?;
    for prefix in [BRANCH_PREFIX, RACE_BRANCH_PREFIX] {
        for r in refs
            .prefixed(prefix)
            .map_err(|source| Error::ListBranches { source })?
        {
            let Some(r) = crate::git::refguard::listed(&ctx.repo, r)
                .map_err(|source| Error::ReadAReference { source })?
            else {
                continue;
            };
            let full = r.name().as_bstr().to_string();
            let Some(suffix) = full.strip_prefix(prefix) else {
                continue;
            };
            // A race branch `arbiter-race/<id>/<k>` goes with worktree `race-<id>-<k>`.
            let name = match (prefix == RACE_BRANCH_PREFIX, suffix.rsplit_once('/')) {
                (false, _) => suffix.to_owned(),
                (true, Some((id, k))) => format!("race-{id}-{k}"),
                (true, None) => suffix.to_owned(),
            };
            let short = full.trim_start_matches("refs/heads/").to_owned();
            names.entry(name).or_default().1 = Some(short);
        }
    }
    Ok(names)
}

/// What [`cleanup_stale`] judges each leftover by.
struct Leftovers<'a> {
    ctx: &'a Context,
    orders: &'a Orders,
    tip: Option<gix::ObjectId>,
    is_live: &'a dyn Fn(&Record) -> bool,
    tips: BranchTips,
    snapshot: crate::state::Snapshot<'a>,
}

impl Leftovers<'_> {
    /// Keep or remove the worktree and branch found under `name`; the
    /// report line, if any.
    fn settle(
        &mut self,
        name: &str,
        info: Option<Info>,
        found_branch: Option<String>,
    ) -> Result<Option<String>> {
        // A conductor's verification worktree: the merge queue removes its
        // own, and those of dead conductors (`queue::remove_dead_verifiers`).
        if name.starts_with(VERIFY_PREFIX) {
            return Ok(None);
        }
        let has_branch = found_branch.is_some();
        let branch = match (&info, found_branch) {
            (_, Some(b)) => b,
            (
                Some(Info {
                    branch: Some(b), ..
                }),
                None,
            ) if b.starts_with("arbiter/") || b.starts_with("arbiter-race/") => b.clone(),
            _ => branch_of(name),
        };
        let kept = |why: String| {
            Ok(Some(format!(
                "kept {}: {why}",
                describe(&info, has_branch, &branch)
            )))
        };
        let Some(wo) = owner_of(self.orders, name) else {
            return kept(format!("no work order '{name}' is known"));
        };
        // This run's own attempt (its settling gives the worktree back).
        if crate::state::ledger::is_leased(&self.ctx.caches, &branch) {
            return Ok(None);
        }
        let record = self.snapshot.record(wo)?;
        if let Some(r) = &record {
            if r.halted {
                let reason = r.halt_reason.as_deref().unwrap_or("no reason");
                return kept(format!("work order {wo} is halted ({reason})"));
            }
            // A killed standalone merge-back's branch: recovery merges it.
            if (r.status == Status::InProgress && (self.is_live)(r)) || r.merge_back_pending() {
                return Ok(None);
            }
            // Passed work waiting to land (or about to wait, its conductor
            // gone): its branch holds that work until it lands.
            if name == wo && !landed_work(self.ctx, r, self.tip)? {
                return Ok(None);
            }
        }
        if name == wo {
            if let Some(head) = hand_made_work(self.ctx, wo, record.as_ref(), self.tip, &self.tips)?
            {
                // A live conductor's attempt whose claim the state forgot:
                // its work, not a leftover.
                if in_use_on(self.ctx, &branch)? {
                    return Ok(None);
                }
                return kept(format!(
                    "it holds work no run of git-arbiter made (at {head}); \
                     merge it with 'git arbiter merge-back {wo}' or drop it with \
                     'git arbiter worktree remove {wo}'"
                ));
            }
        }
        if check_name(name).is_err() {
            return kept("not a name git-arbiter creates".into());
        }
        let mut what = describe(&info, has_branch, &branch);
        // Its commit stays findable (`git branch <name> <sha>`) from the report.
        if let Some(tip) = self
            .ctx
            .repo
            .try_find_reference(format!("refs/heads/{branch}").as_str())
            .ok()
            .flatten()
            .and_then(|mut r| r.peel_to_id().ok())
        {
            what.push_str(&format!(" (at {tip})"));
        }
        // Held now: a live conductor's attempt whose claim the state forgot
        // (its notes moved back), not a leftover; not waited for.
        match remove_in_turn(self.ctx, name, &branch, false, 1) {
            Ok(()) => Ok(Some(format!("removed {what}"))),
            Err(e) if is_in_use(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Is the passed work `r` waits to land with (if any) contained in the
/// integration tip, i.e. landed? No work waiting counts as landed.
pub(crate) fn landed_work(ctx: &Context, r: &Record, tip: Option<gix::ObjectId>) -> Result<bool> {
    let Some(source) = r
        .landing
        .as_ref()
        .and_then(|l| ObjectId::from_hex(l.source.as_bytes()).ok())
    else {
        return Ok(true);
    };
    match tip {
        Some(tip) if ctx.repo.has_object(source) => ctx.is_ancestor(source, tip),
        _ => Ok(false),
    }
}

/// A lock file younger than this may belong to a git command running right
/// now (a builder committing on its branch); older ones on a branch no live
/// conductor works on are leftovers.
pub(crate) const STALE_LOCK_AGE: std::time::Duration = std::time::Duration::from_secs(5);

/// Remove the `.lock` files a killed git or git-arbiter process left on
/// arbiter's own branches (`arbiter/*`, `arbiter-race/*`): each makes every
/// later edit of that branch fail. Only for orders no live conductor works on,
/// and only locks older than [`STALE_LOCK_AGE`]; a younger one is waited out
/// when `wait` (a run about to build), else left (`doctor` says to run it
/// again). Returns one report line each.
pub(crate) fn clear_stale_branch_locks(
    ctx: &Context,
    orders: &Orders,
    snapshot: &mut crate::state::Snapshot<'_>,
    is_live: &dyn Fn(&Record) -> bool,
    wait: bool,
) -> Result<Vec<String>> {
    let mut report = Vec::new();
    let common = ctx.repo.common_dir();
    for prefix in [BRANCH_PREFIX, RACE_BRANCH_PREFIX] {
        let dir = common.join(prefix.trim_end_matches('/'));
        let mut pending = vec![dir.clone()];
        while let Some(d) = pending.pop() {
            let Ok(listing) = std::fs::read_dir(&d) else {
                continue;
            };
            for entry in listing.flatten() {
                let path = entry.path();
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    pending.push(path);
                    continue;
                }
                let Some(rel) = path
                    .strip_prefix(&dir)
                    .ok()
                    .and_then(|r| r.to_str())
                    .and_then(|r| r.strip_suffix(".lock"))
                else {
                    continue;
                };
                // `arbiter/<id>` or `arbiter-race/<id>/<k>`: the order is the first component.
                let id = rel.split('/').next().unwrap_or(rel);
                if let Some(wo) = orders.get(id) {
                    if snapshot
                        .record(&wo.id)?
                        .is_some_and(|r| r.status == Status::InProgress && is_live(&r))
                    {
                        continue;
                    }
                }
                // A lock of a run killed a moment ago (its builder's `git
                // commit`) is waited out, not refused: it would stop the
                // order's next branch. One still changing is someone's.
                let age = meta
                    .modified()
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .unwrap_or_default();
                if age < STALE_LOCK_AGE {
                    if !wait {
                        continue;
                    }
                    std::thread::sleep(STALE_LOCK_AGE - age);
                    let unchanged = std::fs::symlink_metadata(&path)
                        .and_then(|now| now.modified())
                        .ok()
                        == meta.modified().ok();
                    if !unchanged {
                        continue;
                    }
                }
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(Error::RemoveStaleLock { path, source: e }.into()),
                }
                report.push(format!("removed stale lock file {}", path.display()));
            }
        }
    }
    Ok(report)
}

fn describe(info: &Option<Info>, has_branch: bool, branch: &str) -> String {
    match (info, has_branch) {
        (Some(i), true) => format!("worktree {} and branch {branch}", i.path.display()),
        (Some(i), false) => format!("worktree {}", i.path.display()),
        (None, _) => format!("branch {branch}"),
    }
}

#[cfg(test)]
mod tests {
    /// A HEAD file read as git reads it: blanks after `ref:` allowed, and
    /// one that tells nothing left to opening the repository.
    #[test]
    fn a_head_file_names_its_branch_as_git_reads_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let main: gix::refs::FullName = "refs/heads/main".try_into().expect("name");
        let names = |content: &str| {
            std::fs::write(dir.path().join("HEAD"), content).expect("HEAD");
            super::head_may_name(dir.path(), &main)
        };
        assert!(names("ref: refs/heads/main\n"));
        assert!(names("ref:refs/heads/main\n"));
        assert!(names("ref:\trefs/heads/main"));
        assert!(!names("ref: refs/heads/other\n"));
        assert!(!names(&format!("{}\n", "a".repeat(40))));
        assert!(names("garbage\n"), "unparsable: the repository decides");
        std::fs::remove_file(dir.path().join("HEAD")).expect("rm");
        assert!(super::head_may_name(dir.path(), &main), "unreadable");
    }

    #[test]
    fn pooled_worktrees_are_named_by_their_branch() {
        assert_eq!(
            super::name_of_branch("arbiter/wo-1").as_deref(),
            Some("wo-1")
        );
        assert_eq!(
            super::name_of_branch("arbiter-race/wo-1/2").as_deref(),
            Some("race-wo-1-2")
        );
        assert_eq!(super::name_of_branch("main"), None);
    }

    /// A worktree opens with the registration that names it back, whether
    /// its `.git` file names that registration or another one, and through
    /// a link to its folder; a folder no registration names is refused.
    #[test]
    fn a_worktree_opens_with_the_registration_that_names_it() {
        use crate::testutil::{git, new_repo, scratch};
        let (_keep, root) = scratch();
        let repo = new_repo(&root, "repo");
        git(
            &root,
            &repo,
            &["commit", "-q", "--allow-empty", "-m", "init"],
        );
        for name in ["a", "b"] {
            let path = root.join(name);
            git(
                &root,
                &repo,
                &["worktree", "add", "-q", "-b", name, path.to_str().unwrap()],
            );
        }
        let opened = gix::open_opts(&repo, gix::open::Options::isolated()).unwrap();
        let git_dir_of = |path: &std::path::Path| {
            let wt = super::open_linked(&super::Caches::default(), &opened, path).expect("opens");
            std::fs::canonicalize(wt.git_dir()).unwrap()
        };
        let registration =
            |id: &str| std::fs::canonicalize(repo.join(".git/worktrees").join(id)).unwrap();
        assert_eq!(git_dir_of(&root.join("a")), registration("a"));
        std::os::unix::fs::symlink(root.join("a"), root.join("via")).unwrap();
        assert_eq!(git_dir_of(&root.join("via")), registration("a"));
        // `a`'s `.git` file names `b`'s registration, which names `b`: `a`'s own is found.
        let b_link = std::fs::read_to_string(root.join("b/.git")).unwrap();
        std::fs::write(root.join("a/.git"), &b_link).unwrap();
        assert_eq!(git_dir_of(&root.join("a")), registration("a"));
        assert_eq!(git_dir_of(&root.join("b")), registration("b"));
        std::fs::create_dir(root.join("stray")).unwrap();
        std::fs::write(root.join("stray/.git"), &b_link).unwrap();
        assert!(
            super::open_linked(&super::Caches::default(), &opened, &root.join("stray")).is_err()
        );
    }

    /// The resolver's shortcut (a folder resolved once, its entries joined
    /// to it) must say what a full resolution says, links included: a
    /// pooled worktree's folder replaced by a link is not in the pool.
    #[test]
    fn resolving_in_a_resolved_folder_matches_a_full_resolution() {
        let (_keep, top) = crate::testutil::scratch();
        std::fs::create_dir_all(top.join("real/pool/0")).unwrap();
        std::fs::create_dir_all(top.join("elsewhere/7")).unwrap();
        std::fs::write(top.join("real/pool/file"), "").unwrap();
        std::os::unix::fs::symlink(top.join("real"), top.join("via")).unwrap();
        std::os::unix::fs::symlink(top.join("elsewhere/7"), top.join("real/pool/1")).unwrap();
        std::os::unix::fs::symlink(top.join("gone"), top.join("real/pool/2")).unwrap();
        let mut resolver = super::Resolver::default();
        for dir in ["real/pool", "via/pool"] {
            for name in ["0", "1", "2", "3", "file", "..", "0/.."] {
                let path = top.join(dir).join(name);
                assert_eq!(
                    resolver.resolve(&path),
                    super::resolve_existing_prefix(&path),
                    "{}",
                    path.display()
                );
            }
        }
        let pool = super::resolve_existing_prefix(&top.join("via/pool"));
        assert_ne!(
            resolver.resolve(&top.join("via/pool/1")).parent(),
            Some(pool.as_path())
        );
    }
}

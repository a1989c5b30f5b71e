//! Scale-out (`--remote NAME`, `arbiter.remote`): the notes ref and the
//! integration branch belong to a git remote, and every machine runs the
//! same `round` against it. The git server is the coordination engine:
//!
//! - A transition is computed on the local copy of the notes ref, then
//!   pushed with `--force-with-lease=refs/notes/arbiter:<the tip it was
//!   computed on>`: a compare-and-swap on the remote. Only once the remote
//!   took it does the local ref move. A lost race fetches what moved and
//!   computes the transition again ([`crate::state::Store::transact`]).
//! - A landing pushes the merge onto the remote's branch the same way; the
//!   branch's tip is kept here as `refs/remotes/<name>/<branch>`, which is
//!   what the run merges onto, verifies and dispatches from. No local
//!   branch or checkout is touched (`git pull` brings the work in).
//! - A passed attempt's commit is pushed to `refs/arbiter/results/<id>/<n>`
//!   so that any machine can land it.
//! - A claim carries a [`Lease`] (machine, clone, expiry), renewed while the
//!   work is held. Another machine treats an expired lease as a dead
//!   conductor; the holder's own late result is recorded and discarded.
//!
//! The local notes ref only ever follows the remote's by fast-forward: a
//! remote state that is not a descendant of what this clone saw was
//! rewritten by someone else, and is reported, never adopted.
//!
//! Fetch and push are [`crate::git::transport`]'s. Nothing the remote
//! sends is executed: commands come from local flags and config.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use gix::refs::transaction::PreviousValue;
use gix::refs::{FullName, Target};
use gix::ObjectId;
use serde::{Deserialize, Serialize};

use crate::git::transport::{self, RefUpdate};
pub use crate::git::transport::{Expect, Pushed};
use crate::state::NOTES_REF;
use crate::sys::error::{Diagnosis, ExitCode};

/// `arbiter.leaseSeconds` when unset.
pub const DEFAULT_LEASE_SECS: u64 = 600;
/// Where passed attempts' commits go on the remote: `<prefix>/<id>/<attempt>`.
pub const RESULTS_PREFIX: &str = "refs/arbiter/results";
/// How long a transition waits for a remote that cannot be reached before
/// the run gives up (a partition shorter than this only delays it).
pub const PATIENCE: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("remote '{name}' is not configured")]
    Unknown { name: String },
    #[error("remote '{remote}' has no branch '{branch}'")]
    NoBranch { remote: String, branch: String },
    #[error("remote '{remote}' cannot be reached: {said}")]
    Unreachable { remote: String, said: String },
    #[error("remote '{remote}' refused {what}: {said}")]
    Refused {
        remote: String,
        what: String,
        said: String,
    },
    #[error("remote '{remote}': its {NOTES_REF} ({theirs}) does not contain this clone's ({ours}): the remote's state was rewritten")]
    Rewritten {
        remote: String,
        ours: ObjectId,
        theirs: ObjectId,
    },
    #[error("this clone's {NOTES_REF} has transitions remote '{remote}' lacks")]
    Ahead { remote: String },
    #[error("running git {what}: {source}")]
    Spawn {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("updating {name}: {source}")]
    LocalRef {
        name: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    #[error("config arbiter.leaseSeconds = 0: must be at least 1")]
    ZeroLease,
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        match self {
            Error::Unknown { .. }
            | Error::NoBranch { .. }
            | Error::Rewritten { .. }
            | Error::Ahead { .. }
            | Error::ZeroLease => ExitCode::Usage,
            _ => ExitCode::Fatal,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            Error::Unknown { name } => {
                format!("add it with 'git remote add {name} <url>', or name another with --remote")
            }
            Error::NoBranch { remote, branch } => {
                format!("push it first: 'git push {remote} {branch}'")
            }
            Error::Unreachable { .. } => {
                "check the network and the remote's URL ('git remote -v'); nothing was changed there".into()
            }
            Error::Refused { .. } => {
                "each machine needs the right to push refs/notes/arbiter, refs/arbiter/results/* and the integration branch".into()
            }
            Error::Rewritten { remote, theirs, .. } => format!(
                "someone moved the remote's state back or replaced it; inspect 'git log {theirs}' and, if it is to be trusted, 'git update-ref {NOTES_REF} {theirs}' then run again (remote '{remote}')"
            ),
            Error::Ahead { remote } => {
                format!("push them first with 'git arbiter sync --remote {remote}'")
            }
            Error::ZeroLease => "e.g. 'git config arbiter.leaseSeconds 600'".into(),
            Error::Spawn { .. } | Error::LocalRef { .. } => return None,
        })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Who holds a claim, and until when: renewed
/// while the work is held, so a machine that vanished lets go by itself.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The machine's host name, for people.
    pub machine: String,
    /// The clone the conductor runs in ([`clone_id`]): its conductors'
    /// liveness is known there without waiting for the expiry.
    pub clone: String,
    /// Milliseconds since the epoch: a lease of a second or two (tests,
    /// fast failover) must not lapse early by rounding.
    pub expires_ms: u64,
}

impl Lease {
    pub fn expired(&self) -> bool {
        self.expires_ms <= crate::sys::clock::now_millis()
    }
}

/// One ref a push moves: `to` onto `name` on the remote, if it is as
/// `expect` says there now; once pushed, `local` (if any) follows here.
#[derive(Clone, Debug)]
pub struct Update {
    pub name: String,
    pub expect: Expect,
    pub to: ObjectId,
    pub local: Option<String>,
}

impl Update {
    fn on_remote(&self) -> RefUpdate {
        RefUpdate {
            name: self.name.clone(),
            expect: self.expect,
            to: self.to,
        }
    }
}

/// What [`Remote::sync`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Synced {
    UpToDate,
    /// This clone's notes ref moved forward to the remote's.
    Fetched {
        from: Option<ObjectId>,
        to: ObjectId,
    },
    /// The remote's moved forward to this clone's.
    Pushed {
        from: Option<ObjectId>,
        to: ObjectId,
    },
}

/// The remote a run coordinates through, and what this process counted.
pub struct Remote {
    pub name: String,
    /// The integration branch on the remote (`refs/heads/…`).
    pub branch: FullName,
    /// Its tip as last seen here: `refs/remotes/<name>/<branch>`.
    pub tracking: FullName,
    /// How long a claim holds without renewal.
    pub lease: Duration,
    machine: String,
    clone: String,
    /// The conductor of this process, once registered.
    owner: OnceLock<String>,
    /// The orders this conductor holds, as its own accepted pushes said.
    held: Mutex<BTreeSet<String>>,
    last_fetch: Mutex<Option<Instant>>,
    /// Held by this process's fetch in progress; when the last one started
    /// and whether it brought the branch too.
    fetching: Mutex<Option<(Instant, bool)>>,
    /// Held by a transition of this process from its read to its push.
    turn: Mutex<()>,
    /// Pushes made, and those that lost a race.
    pub pushes: AtomicU64,
    pub lost: AtomicU64,
}

/// The remote of this process's run, if any (a [`crate::sys::caches::Caches`] entry).
#[derive(Default)]
pub struct Active(OnceLock<Arc<Remote>>);

impl Active {
    pub fn get(&self) -> Option<Arc<Remote>> {
        self.0.get().cloned()
    }

    pub fn set(&self, remote: Arc<Remote>) {
        let _ = self.0.set(remote);
    }
}

impl Remote {
    /// The remote `name` of `repo`, owning the branch `branch`
    /// (`refs/heads/…`), with claims leased for `lease`.
    pub fn open(
        repo: &gix::Repository,
        name: &str,
        branch: &FullName,
        lease: Duration,
    ) -> Result<Remote> {
        let known = repo
            .find_remote(name)
            .ok()
            .is_some_and(|r| r.url(gix::remote::Direction::Push).is_some());
        if !known || name.is_empty() || name.starts_with('-') {
            return Err(Error::Unknown {
                name: name.to_owned(),
            });
        }
        if lease.is_zero() {
            return Err(Error::ZeroLease);
        }
        let short = branch.shorten().to_string();
        let tracking = FullName::try_from(format!("refs/remotes/{name}/{short}")).map_err(|e| {
            Error::LocalRef {
                name: format!("refs/remotes/{name}/{short}"),
                source: Box::new(e),
            }
        })?;
        Ok(Remote {
            name: name.to_owned(),
            branch: branch.clone(),
            tracking,
            lease,
            machine: host_name(),
            clone: clone_id(repo),
            owner: OnceLock::new(),
            held: Mutex::default(),
            last_fetch: Mutex::default(),
            fetching: Mutex::default(),
            turn: Mutex::default(),
            pushes: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        })
    }

    /// The remote `name` for [`Remote::sync`], which moves only the state:
    /// no branch of it is fetched or pushed.
    pub fn for_state(repo: &gix::Repository, name: &str) -> Result<Remote> {
        let unused = FullName::try_from("refs/heads/HEAD").map_err(|e| Error::LocalRef {
            name: "refs/heads/HEAD".into(),
            source: Box::new(e),
        })?;
        Remote::open(repo, name, &unused, Duration::from_secs(DEFAULT_LEASE_SECS))
    }

    /// Where the remote's notes ref is copied by a fetch: the state as the
    /// remote has it, before this clone follows it.
    pub fn notes_copy(&self) -> String {
        format!("refs/arbiter/remote/{}/notes", self.name)
    }

    /// This clone's conductor `name` runs the claims from now on.
    pub fn set_owner(&self, name: &str) {
        let _ = self.owner.set(name.to_owned());
    }

    /// This process's turn at a transition ([`crate::state::Store::transact`]).
    pub fn turn(&self) -> std::sync::MutexGuard<'_, ()> {
        lock(&self.turn)
    }

    /// The conductor of this process, once registered.
    pub fn owner(&self) -> Option<&str> {
        self.owner.get().map(String::as_str)
    }

    /// A new claim's lease, from now.
    pub fn new_lease(&self) -> Lease {
        Lease {
            machine: self.machine.clone(),
            clone: self.clone.clone(),
            expires_ms: crate::sys::clock::now_millis()
                .saturating_add(u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// The orders this process's conductor holds, as last written.
    pub fn held(&self) -> Vec<String> {
        lock(&self.held).iter().cloned().collect()
    }

    /// `records` as written with a remote: each one this process's
    /// conductor holds gets a fresh lease (every write renews it).
    pub fn lease_held(
        &self,
        records: &std::collections::BTreeMap<String, crate::state::Record>,
    ) -> std::collections::BTreeMap<String, crate::state::Record> {
        let me = self.owner.get().map(String::as_str);
        records
            .iter()
            .map(|(id, record)| {
                let mut record = record.clone();
                if me.is_some()
                    && record.owner.as_deref() == me
                    && record.status == crate::state::Status::InProgress
                    && !record.halted
                {
                    record.lease = Some(self.new_lease());
                }
                (id.clone(), record)
            })
            .collect()
    }

    /// Records this process wrote and the remote took: remember which of
    /// them its conductor holds, for [`Remote::held`].
    pub fn wrote<'r>(&self, records: impl Iterator<Item = (&'r String, &'r crate::state::Record)>) {
        let Some(me) = self.owner.get() else {
            return;
        };
        let mut held = lock(&self.held);
        for (id, record) in records {
            if record.owner.as_deref() == Some(me.as_str()) && record.lease.is_some() {
                held.insert(id.clone());
            } else {
                held.remove(id);
            }
        }
    }

    /// Forget `id` as held (its claim is gone).
    pub fn let_go(&self, id: &str) {
        lock(&self.held).remove(id);
    }

    /// Fetch the remote's notes ref and branch, then move this clone's
    /// notes ref forward to the remote's.
    pub fn fetch(&self, repo: &gix::Repository) -> Result<()> {
        self.fetch_since(repo, Instant::now())
    }

    /// [`Remote::fetch`], where a fetch of this process begun at `since` or
    /// later will do.
    fn fetch_since(&self, repo: &gix::Repository, since: Instant) -> Result<()> {
        *lock(&self.last_fetch) = Some(Instant::now());
        self.fetch_refs(repo, true, since)?;
        self.follow(repo)
    }

    /// Copy the remote's notes ref (to [`Remote::notes_copy`]) and, with
    /// `branch`, its integration branch (to `tracking`), unless a fetch of
    /// this process begun at `since` or later brought them.
    fn fetch_refs(&self, repo: &gix::Repository, branch: bool, since: Instant) -> Result<()> {
        // The notes ref may not exist on the remote yet: a missing ref
        // named in a refspec is an error to git, one a pattern matches is not.
        let mut refspecs = vec![format!("+{NOTES_REF}*:{}*", self.notes_copy())];
        if branch {
            refspecs.push(format!(
                "+{}:{}",
                self.branch.as_bstr(),
                self.tracking.as_bstr()
            ));
        }
        // What is new descends from the tips seen last: offering only those
        // spares a negotiation over every branch of the clone.
        let tips = [self.notes_copy(), self.tracking.as_bstr().to_string()];
        // Threads of this process (a dispatch, the halt watch) fetch one at
        // a time; one that waited for a recent enough fetch has what it
        // asked for.
        let mut fetching = lock(&self.fetching);
        if let Some((started, with_branch)) = *fetching {
            if started >= since && (with_branch || !branch) {
                return Ok(());
            }
        }
        let started = Instant::now();
        transport::fetch(repo, &self.name, &refspecs, &tips).map_err(|e| match e {
            transport::Error::NoSuchRef { .. } => Error::NoBranch {
                remote: self.name.clone(),
                branch: self.branch.shorten().to_string(),
            },
            e => self.transport_error(e, ""),
        })?;
        *fetching = Some((started, branch));
        Ok(())
    }

    /// `e`, said of this remote (`what`: the refs a refused push named).
    fn transport_error(&self, e: transport::Error, what: &str) -> Error {
        let remote = self.name.clone();
        match e {
            transport::Error::Refused { said } => Error::Refused {
                remote,
                what: what.to_owned(),
                said,
            },
            transport::Error::Spawn { what, source } => Error::Spawn { what, source },
            transport::Error::Unreachable { said } | transport::Error::NoSuchRef { said } => {
                Error::Unreachable { remote, said }
            }
        }
    }

    /// `git arbiter sync`: bring this clone's notes ref and the remote's
    /// together, by fast-forward only, whichever is behind.
    pub fn sync(&self, repo: &gix::Repository) -> Result<Synced> {
        self.fetch_refs(repo, false, Instant::now())?;
        let theirs = peel(repo, &self.notes_copy())?;
        let ours = peel(repo, NOTES_REF)?;
        let push = |from: Option<ObjectId>, to: ObjectId| -> Result<Synced> {
            let update = Update {
                name: NOTES_REF.into(),
                expect: Expect::tip(from),
                to,
                local: None,
            };
            match self.push(repo, &[update])? {
                Pushed::Accepted => Ok(Synced::Pushed { from, to }),
                // Moved since the fetch: tried again from the start.
                Pushed::Stale => self.sync(repo),
            }
        };
        match (ours, theirs) {
            (None, None) => Ok(Synced::UpToDate),
            (Some(ours), None) => push(None, ours),
            (Some(ours), Some(theirs)) if ours == theirs => Ok(Synced::UpToDate),
            (Some(ours), Some(theirs)) if ancestor(repo, theirs, ours) => push(Some(theirs), ours),
            (Some(ours), Some(theirs)) if !ancestor(repo, ours, theirs) => Err(Error::Rewritten {
                remote: self.name.clone(),
                ours,
                theirs,
            }),
            (ours, Some(theirs)) => {
                self.follow(repo)?;
                Ok(Synced::Fetched {
                    from: ours,
                    to: theirs,
                })
            }
        }
    }

    /// [`Remote::fetch`] during a run: a copy older than this clone's notes
    /// ref is one fetched before another thread's push was taken, not
    /// transitions the remote lacks (those are refused before a run starts).
    pub fn catch_up(&self, repo: &gix::Repository) -> Result<()> {
        match self.fetch(repo) {
            Err(Error::Ahead { .. }) => Ok(()),
            other => other,
        }
    }

    /// [`Remote::catch_up`] of the state alone: after a transition that
    /// moved no branch lost its race, only the notes ref is needed again.
    pub fn catch_up_state(&self, repo: &gix::Repository) -> Result<()> {
        self.fetch_refs(repo, false, Instant::now())?;
        match self.follow(repo) {
            Err(Error::Ahead { .. }) => Ok(()),
            other => other,
        }
    }

    /// [`Remote::catch_up`] unless the last fetch was less than `every` ago.
    pub fn refresh(&self, repo: &gix::Repository, every: Duration) -> Result<()> {
        if lock(&self.last_fetch).is_some_and(|at| at.elapsed() < every) {
            return Ok(());
        }
        let since = Instant::now()
            .checked_sub(every)
            .unwrap_or_else(Instant::now);
        match self.fetch_since(repo, since) {
            Err(Error::Ahead { .. }) => Ok(()),
            other => other,
        }
    }

    /// Move this clone's notes ref to the remote's copy, by fast-forward only.
    fn follow(&self, repo: &gix::Repository) -> Result<()> {
        let theirs = peel(repo, &self.notes_copy())?;
        let ours = peel(repo, NOTES_REF)?;
        let Some(theirs) = theirs else {
            return match ours {
                None => Ok(()),
                Some(_) => Err(Error::Ahead {
                    remote: self.name.clone(),
                }),
            };
        };
        let expected = match ours {
            Some(ours) if ours == theirs => return Ok(()),
            Some(ours) => {
                if !ancestor(repo, ours, theirs) {
                    if ancestor(repo, theirs, ours) {
                        return Err(Error::Ahead {
                            remote: self.name.clone(),
                        });
                    }
                    return Err(Error::Rewritten {
                        remote: self.name.clone(),
                        ours,
                        theirs,
                    });
                }
                PreviousValue::MustExistAndMatch(Target::Object(ours))
            }
            None => PreviousValue::MustNotExist,
        };
        match set_ref(repo, NOTES_REF, theirs, expected, "fetched") {
            Ok(()) => Ok(()),
            // Another thread or process moved it meanwhile: to the remote's
            // state or past it, since it only ever follows the remote.
            Err(_) if peel(repo, NOTES_REF)? != ours => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Push `updates` as one atomic compare-and-swap on the remote; once
    /// it took them, the local refs follow.
    pub fn push(&self, repo: &gix::Repository, updates: &[Update]) -> Result<Pushed> {
        self.pushes.fetch_add(1, Ordering::Relaxed);
        let on_remote: Vec<RefUpdate> = updates.iter().map(Update::on_remote).collect();
        let pushed = transport::push(repo, &self.name, &on_remote).map_err(|e| {
            let names: Vec<&str> = updates.iter().map(|u| u.name.as_str()).collect();
            self.transport_error(e, &names.join(", "))
        })?;
        if pushed == Pushed::Stale {
            self.lost.fetch_add(1, Ordering::Relaxed);
            return Ok(Pushed::Stale);
        }
        crate::sys::crash::point("remote-push.after");
        for u in updates {
            if let Some(local) = &u.local {
                // Moved meanwhile (a fetch in another thread): past this
                // push, since local refs only follow the remote.
                let expected = match u.expect {
                    Expect::Is(id) => PreviousValue::MustExistAndMatch(Target::Object(id)),
                    Expect::Absent => PreviousValue::MustNotExist,
                    Expect::Any => PreviousValue::Any,
                };
                if set_ref(repo, local, u.to, expected, "pushed").is_err() {
                    let _ = self.catch_up(repo);
                }
            }
        }
        Ok(Pushed::Accepted)
    }

    /// Fetch the published results `(id, attempt)` whose commits this
    /// clone lacks. A result the remote does not have is left missing.
    pub fn fetch_results(&self, repo: &gix::Repository, wanted: &[(String, u32)]) -> Result<()> {
        if wanted.is_empty() {
            return Ok(());
        }
        // Patterns: a result the remote lacks is not an error.
        let refspecs: Vec<String> = wanted
            .iter()
            .map(|(id, attempt)| {
                let name = result_ref(id, *attempt);
                format!("+{name}*:{name}*")
            })
            .collect();
        transport::fetch(repo, &self.name, &refspecs, &[]).map_err(|e| self.transport_error(e, ""))
    }
}

/// Where attempt `attempt` of `id` is published on the remote.
pub fn result_ref(id: &str, attempt: u32) -> String {
    format!("{RESULTS_PREFIX}/{id}/{attempt}")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn peel(repo: &gix::Repository, name: &str) -> Result<Option<ObjectId>> {
    let err = |e: Box<dyn std::error::Error + Send + Sync>| Error::LocalRef {
        name: name.to_owned(),
        source: e,
    };
    match repo.try_find_reference(name).map_err(|e| err(e.into()))? {
        Some(mut r) => Ok(Some(r.peel_to_id().map_err(|e| err(e.into()))?.detach())),
        None => Ok(None),
    }
}

/// Is `a` reachable from `b`? Unknown (a missing object) counts as no:
/// the caller then refuses to move anything.
fn ancestor(repo: &gix::Repository, a: ObjectId, b: ObjectId) -> bool {
    crate::git::history::is_ancestor(repo, a, b).unwrap_or(false)
}

fn set_ref(
    repo: &gix::Repository,
    name: &str,
    to: ObjectId,
    expected: PreviousValue,
    why: &str,
) -> Result<()> {
    crate::git::refguard::guarded(repo, name, || {
        repo.reference(name, to, expected.clone(), format!("arbiter: remote {why}"))
    })
    .map(|_| ())
    .map_err(|e| Error::LocalRef {
        name: name.to_owned(),
        source: Box::new(e),
    })
}

/// This machine's name, as the kernel has it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

/// This clone's id: made once, kept in `<git-common-dir>/arbiter/clone-id`.
/// Two clones on one machine are two ids (their conductors' locks are apart).
pub fn clone_id(repo: &gix::Repository) -> String {
    let path = crate::git::layout::dir(repo).join("clone-id");
    if let Ok(id) = std::fs::read_to_string(&path) {
        let id = id.trim();
        if !id.is_empty() {
            return id.to_owned();
        }
    }
    let made = format!(
        "{:016x}",
        crate::sys::clock::now_nanos() ^ (u64::from(std::process::id()) << 40)
    );
    if let Some(dir) = path.parent() {
        let temp = dir.join(format!("clone-id.{}", std::process::id()));
        if std::fs::create_dir_all(dir).is_ok()
            && std::fs::write(&temp, format!("{made}\n")).is_ok()
        {
            // Two first runs at once: the first link wins, both read it.
            let _ = std::fs::hard_link(&temp, &path);
            let _ = std::fs::remove_file(&temp);
        }
    }
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => id.trim().to_owned(),
        _ => made,
    }
}

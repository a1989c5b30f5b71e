//! Run state in git: one JSON note per work order under `refs/notes/arbiter`.
//!
//! Each work order's note annotates a stable *key blob* (`git-arbiter work
//! order <id>\n`), written to the object database and kept reachable through a
//! non-note subtree `wo-keys/<id>` of the notes tree, so `git gc` and
//! `git notes prune` never drop the state. Merge commits made by git-arbiter
//! get their own notes in the same ref.
//!
//! Every transition is one commit on the notes ref, moved by compare-and-swap
//! from the tip it was computed from; a lost race re-reads the new tip and
//! re-applies the transition. `git notes add` is never used: it has no
//! compare-and-swap.

pub mod context;
pub mod cost;
pub mod ledger;
pub mod notes_index;
pub mod orders;
pub mod read_cache;
pub mod remote;
pub mod scope;
pub mod select;

use std::collections::BTreeMap;
use std::sync::PoisonError;
use std::time::Duration;

use gix::hash::ObjectId;
use gix::refs::transaction::PreviousValue;
use gix::refs::Target;
use serde::{Deserialize, Serialize};

use crate::git::odb::{write_commit, write_reachable, LooseReader};
use crate::sys::clock::{now_ms, since_epoch};
use crate::sys::error::{Diagnosis, ExitCode};

pub const NOTES_REF: &str = "refs/notes/arbiter";
/// The halt of an order dispatched with every attempt of its retry cap spent.
pub const RETRY_CAP_EXHAUSTED: &str = "retry_cap_exhausted";
/// Non-note subtree holding each work order's key blob, so it stays reachable.
const KEYS_DIR: &str = "wo-keys";
/// How often a lost compare-and-swap is retried before giving up.
const MAX_RETRIES: u32 = 1000;
/// How many times in a row the ref's lock may be found taken (each after
/// gix waited `core.filesRefLockTimeout`) before a stale lock is suspected;
/// sooner if the same lock file stays ([`crate::git::refguard::is_stale`]).
const MAX_LOCKED: u32 = 50;
/// How many times in a row a ref edit may fail otherwise (a read racing
/// `git pack-refs`, say) before the failure is reported.
const MAX_FAILED: u32 = 10;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ready,
    Blocked,
    InProgress,
    /// Built, checked and verified, waiting to land (see [`Landing`]).
    Verified,
    NeedsRework,
    Done,
}

impl Status {
    /// The one word every command's JSON gives an order's state: its
    /// status, or `halted`, which dominates it.
    pub fn state(self, halted: bool) -> &'static str {
        if halted {
            "halted"
        } else {
            self.as_str()
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ready => "ready",
            Status::Blocked => "blocked",
            Status::InProgress => "in_progress",
            Status::Verified => "verified",
            Status::NeedsRework => "needs_rework",
            Status::Done => "done",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of one verdict command of an attempt (build, gate, critic, …).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub kind: String,
    pub command: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// How long the command ran, in milliseconds (absent in older notes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<u64>,
    /// Where its output went, when not the attempt's own log (a gate run on
    /// the merged result writes to the conductor's verify log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// What the command reported it cost (`$ARBITER_REPORT`), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<cost::Report>,
}

/// The verdicts of an attempt before the current one, kept when the next
/// attempt starts so `show` can tell every attempt's story.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PastAttempt {
    pub attempt: u32,
    pub verdicts: Vec<Verdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait_ms: Option<u64>,
}

/// One entry of the disposition history.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub at: i64,
    /// Milliseconds past `at`: events of different orders within one second
    /// are told apart by it (absent in older notes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u32>,
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// On the event that dispatched an attempt: the conductor that took it,
    /// the run's id (`claim … conductor=<id>`); absent in older notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// On the event that settled an attempt: the machine-wide slot its
    /// build held, and when; absent in older notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<SlotHeld>,
}

/// The machine-wide slot an attempt held (the slot file `slot-<index>`)
/// from `from_ms` to `to_ms`, in milliseconds since the Unix epoch: what
/// `report` draws an attempt's bar from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotHeld {
    pub index: u32,
    pub from_ms: u64,
    pub to_ms: u64,
}

/// The history events of an attempt that failed, its reason as detail:
/// a build, setup, gate or timeout (`needs_rework`), or a gate on the
/// merged result (`merged_gate_failed`).
pub const FAILURE_EVENTS: &[&str] = &["needs_rework", MERGED_GATE_FAILED_EVENT];

/// The history event of an order whose merged result failed the gates.
pub const MERGED_GATE_FAILED_EVENT: &str = "merged_gate_failed";

/// The history event a standalone `merge-back` of an earlier version
/// recorded before its branch moved (see [`Record::merge_back_pending`]).
pub const MERGE_START_EVENT: &str = "merge_start";

/// The history event of an order whose passed work could not land now: it
/// is `verified`, waiting to land.
pub const WAITING_EVENT: &str = "waiting_to_land";

/// Work that passed its checks and waits to land, kept on its branch: it
/// lands later without a rebuild, through the merge queue.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Landing {
    /// The commit to merge: its branch's tip when it passed.
    pub source: String,
    /// The merged tree its gates passed on (with the merges landing with it),
    /// when they ran: landing that very tree again needs no new gate run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_tree: Option<String>,
    /// What kept it from landing, while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

/// The state of one work order, as stored in its note.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub version: u32,
    pub wo: String,
    pub status: Status,
    pub halted: bool,
    pub halt_reason: Option<String>,
    /// Paths or details behind the halt (drifted paths, conflicting paths, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halt_paths: Vec<String>,
    pub attempts: u32,
    pub cap: u32,
    pub checkpoint_before: Option<String>,
    pub checkpoint_after: Option<String>,
    /// The conductor working on it while `in_progress` (see `round`), so a
    /// live conductor's work is never "recovered" by another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// With a remote (`--remote`): how long the owner's claim holds
    /// without renewal, and where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<remote::Lease>,
    /// The branch its merge landed on (short name), written with `done`;
    /// records from before this field have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_into: Option<String>,
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
    /// How long the current attempt waited for a machine-wide slot, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait_ms: Option<u64>,
    /// The verdicts of earlier attempts, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<PastAttempt>,
    /// Passed work on its way to land: set when it enters the merge queue,
    /// kept while it is `verified` (waiting), gone once it landed or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landing: Option<Landing>,
    #[serde(default)]
    pub history: Vec<Event>,
}

impl Record {
    /// The state of a work order that has no note yet.
    pub fn new(wo: &str, has_deps: bool, cap: u32) -> Record {
        Record {
            version: 1,
            wo: wo.to_owned(),
            status: if has_deps {
                Status::Blocked
            } else {
                Status::Ready
            },
            halted: false,
            halt_reason: None,
            halt_paths: Vec::new(),
            attempts: 0,
            cap,
            checkpoint_before: None,
            checkpoint_after: None,
            owner: None,
            lease: None,
            merged_into: None,
            verdicts: Vec::new(),
            queue_wait_ms: None,
            earlier: Vec::new(),
            landing: None,
            history: Vec::new(),
        }
    }

    /// Begin a new attempt's verdicts: the current ones (if any) are kept in
    /// `earlier`. Call before `attempts` is incremented.
    pub fn start_attempt(&mut self) {
        let verdicts = std::mem::take(&mut self.verdicts);
        let queue_wait_ms = self.queue_wait_ms.take();
        if self.attempts > 0 && !verdicts.is_empty() {
            self.earlier.push(PastAttempt {
                attempt: self.attempts,
                verdicts,
                queue_wait_ms,
            });
        }
    }

    pub fn log(&mut self, event: impl Into<String>, detail: Option<String>) {
        let (at, ms) = now_ms();
        self.history.push(Event {
            at,
            ms: Some(ms),
            event: event.into(),
            attempt: (self.attempts > 0).then_some(self.attempts),
            detail,
            run: None,
            slot: None,
        });
    }

    /// The slot the current attempt's build held, said on the event just
    /// logged (the one that settled the attempt).
    pub fn held_slot(&mut self, slot: Option<SlotHeld>) {
        if let Some(event) = self.history.last_mut() {
            event.slot = slot;
        }
    }

    /// Is this still attempt `attempt` of conductor `owner`, in progress and
    /// not halted? Every verdict a conductor writes, and every merge it makes,
    /// is conditional on this (a compare-and-swap on the record, not only on
    /// the ref): a `halt` or a takeover in the meantime wins.
    pub fn held_by(&self, owner: &str, attempt: u32) -> bool {
        self.status == Status::InProgress
            && !self.halted
            && self.owner.as_deref() == Some(owner)
            && self.attempts == attempt
            // A lapsed lease is a claim another machine may take now.
            && !self.lease.as_ref().is_some_and(remote::Lease::expired)
    }

    /// What to do about a done work order, said alike by every command that
    /// refuses one (`race`, `clear`, `halt`): none of them runs it again.
    pub fn done_hint(&self) -> String {
        let undo = match &self.checkpoint_after {
            Some(merge) => format!(" (to undo it: 'git revert -m 1 {merge}')"),
            None => String::new(),
        };
        format!(
            "a done work order never runs again; to change its work, write a new work order{undo}"
        )
    }

    /// Was this left by a standalone `merge-back` of an earlier version that
    /// started (its `merge_start` is the last event) and never recorded its
    /// outcome, e.g. because it was killed? Such a merge belongs to no
    /// conductor: recovery keeps its branch's work waiting to land.
    pub fn merge_back_pending(&self) -> bool {
        self.status == Status::InProgress
            && !self.halted
            && self.owner.is_none()
            && self
                .history
                .last()
                .is_some_and(|e| e.event == MERGE_START_EVENT)
    }

    /// `clear`: the order starts afresh, its halt lifted, no attempt spent,
    /// `ready` (or `blocked` while it has dependencies), with `cap` attempts;
    /// `dropped` names the kept branch dropped with it, for the history.
    pub fn clear(&mut self, has_deps: bool, cap: u32, dropped: Option<String>) {
        self.halted = false;
        self.halt_reason = None;
        self.halt_paths.clear();
        self.attempts = 0;
        self.cap = cap;
        self.owner = None;
        self.lease = None;
        self.landing = None;
        self.status = if has_deps {
            Status::Blocked
        } else {
            Status::Ready
        };
        self.log("clear", dropped);
    }

    /// Done, its merge `merge` found on the branch (by recovery, or by
    /// `doctor` for an order with no record), no conductor holding it; `event`
    /// says how it was found.
    pub fn mark_done(&mut self, event: &str, merge: String) {
        self.status = Status::Done;
        self.checkpoint_after = Some(merge.clone());
        self.owner = None;
        self.lease = None;
        self.landing = None;
        self.log(event, Some(merge));
    }

    /// Dispatch a new attempt to conductor `owner`, built off `base`;
    /// `event` (with `detail`) says who dispatched it. The caller has checked
    /// the retry cap.
    pub fn dispatch(&mut self, owner: &str, base: String, event: &str, detail: String) {
        self.start_attempt();
        self.attempts += 1;
        self.status = Status::InProgress;
        self.owner = Some(owner.to_owned());
        self.checkpoint_before = Some(base);
        self.checkpoint_after = None;
        self.landing = None;
        self.log(event, Some(detail));
        if let Some(dispatched) = self.history.last_mut() {
            dispatched.run = Some(owner.to_owned());
        }
    }

    /// The current attempt ended without landing: the order is to be built
    /// again, held by nobody; the attempt counts. The caller logs why.
    pub fn release(&mut self) {
        self.status = Status::NeedsRework;
        self.owner = None;
        self.lease = None;
        self.landing = None;
    }

    /// [`Record::release`], and the attempt does not count: it was stopped
    /// by the user, the machine or the configuration, not failed.
    pub fn give_back(&mut self) {
        self.release();
        self.attempts = self.attempts.saturating_sub(1);
    }

    /// Merged into the branch `into` (its short name): done, held by nobody;
    /// `detail` (the merge, or why nothing was to merge) goes to the history.
    pub fn mark_merged(&mut self, into: String, detail: String) {
        self.status = Status::Done;
        self.owner = None;
        self.lease = None;
        self.landing = None;
        self.merged_into = Some(into);
        self.log("merged", Some(detail));
    }

    /// The passed attempt enters the merge queue with `source` (its
    /// branch's tip): from here on its work is never discarded for
    /// anything but its own failure.
    pub fn queue_to_land(&mut self, source: String) {
        self.landing = Some(Landing {
            source,
            verified_tree: None,
            blocked: None,
        });
    }

    /// Its work could not land now (`why`): `verified`, held by nobody,
    /// waiting to land; `verified_tree` is the merged tree its gates passed
    /// on, if they ran. An order without a [`Landing`] has nothing to wait
    /// with: the caller checks.
    pub fn wait_to_land(&mut self, verified_tree: Option<String>, why: String) {
        self.status = Status::Verified;
        self.owner = None;
        self.lease = None;
        if let Some(landing) = &mut self.landing {
            if verified_tree.is_some() {
                landing.verified_tree = verified_tree;
            }
            landing.blocked = Some(why.clone());
        }
        self.log(WAITING_EVENT, Some(why));
    }

    /// Conductor `owner` takes a `verified` order to land it: in progress,
    /// held by `owner`, the same attempt (no attempt is spent on landing).
    pub fn adopt_to_land(&mut self, owner: &str) {
        self.status = Status::InProgress;
        self.owner = Some(owner.to_owned());
        self.log("land_verified", None);
    }

    /// Is this passed work waiting to land, held by nobody?
    pub fn waits_to_land(&self) -> bool {
        self.status == Status::Verified && !self.halted && self.landing.is_some()
    }

    /// Recovery of an attempt whose conductor died before merging it: the
    /// order is to be built again, held by nobody.
    pub fn requeue_for_rework(&mut self) {
        self.release();
        self.log("recovered_needs_rework", None);
    }

    /// HALT the order held by nobody, for the user to look at: recovery that
    /// could not decide, or a merge that conflicted (`paths` say why).
    pub fn halt_unowned(&mut self, reason: &str, paths: Vec<String>) {
        self.owner = None;
        self.lease = None;
        self.halt(reason, paths);
    }

    /// Lift a halt this attempt's own merge set (a race falling back to its
    /// next-best instance): the attempt goes on, held by `owner`.
    pub fn resume(&mut self, owner: &str) {
        self.lift_halt();
        self.status = Status::InProgress;
        self.owner = Some(owner.to_owned());
    }

    /// Lift the HALT flag (its history stays).
    pub fn lift_halt(&mut self) {
        self.halted = false;
        self.halt_reason = None;
        self.halt_paths.clear();
        self.log("halt_lifted", None);
    }

    /// The last failed attempt and why it failed, as recorded ("build exit
    /// 1", "setup 'npm ci' exit 1", a gate that failed on the merged
    /// result): what an escalation shows beside its halt reason.
    pub fn last_failure(&self) -> Option<&Event> {
        self.history
            .iter()
            .rev()
            .find(|e| FAILURE_EVENTS.contains(&e.event.as_str()) && e.detail.is_some())
    }

    /// The log of the last gate run on a merged result that failed.
    pub fn last_verify_log(&self) -> Option<&str> {
        self.verdicts
            .iter()
            .chain(self.earlier.iter().flat_map(|p| &p.verdicts))
            .filter(|v| v.kind == "verify" && !v.passed)
            .find_map(|v| v.log.as_deref())
    }

    /// Set the terminal HALT flag. HALT dominates status everywhere.
    pub fn halt(&mut self, reason: impl Into<String>, paths: Vec<String>) {
        let reason = reason.into();
        self.halted = true;
        self.halt_paths = paths;
        self.log("halt", Some(reason.clone()));
        self.halt_reason = Some(reason);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("corrupt note for work order '{wo}' in {NOTES_REF} (note {note}): {message}")]
    Corrupt {
        wo: String,
        note: String,
        message: String,
    },
    #[error("{reference} is held by other writers: gave up after {MAX_RETRIES} compare-and-swap attempts")]
    Contended { reference: String },
    #[error("cannot update {reference}: {} exists", lock.display())]
    Locked {
        reference: String,
        /// The lock file that stayed: a writer killed between locking and
        /// renaming leaves it behind, as with git.
        lock: std::path::PathBuf,
    },
    #[error("{reference} points at a {kind} ({id}), not at a notes commit")]
    NotACommit {
        reference: String,
        kind: String,
        id: String,
    },
    #[error(transparent)]
    Object(#[from] crate::git::odb::Error),
    #[error(transparent)]
    Remote(#[from] remote::Error),
    #[error("reading or writing {NOTES_REF}: {0}")]
    Git(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        match self {
            Error::Corrupt { .. } | Error::NotACommit { .. } | Error::Locked { .. } => {
                ExitCode::Usage
            }
            Error::Object(e) => e.exit_code(),
            Error::Remote(e) => e.exit_code(),
            Error::Contended { .. } | Error::Git(_) => ExitCode::Fatal,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            Error::Corrupt { wo, .. } => Some(format!(
                "inspect it with 'git notes --ref=arbiter show {}'; an earlier good version is in 'git log -p refs/notes/arbiter' (work order {wo})",
                key_for(wo)
            )),
            Error::NotACommit { reference, .. } => Some(format!(
                "'git reflog {reference}' shows where it pointed before; restore it with 'git update-ref {reference} <commit>', or delete it with 'git update-ref -d {reference}' to start without state"
            )),
            Error::Locked { lock, .. } => Some(format!(
                "if no git-arbiter or git process is running, remove the stale lock file {}",
                lock.display()
            )),
            Error::Object(e) => e.hint(),
            Error::Remote(e) => e.hint(),
            Error::Contended { .. } | Error::Git(_) => None,
        }
    }
}

fn git_err(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Git(Box::new(e))
}

fn key_bytes(wo: &str) -> Vec<u8> {
    format!("git-arbiter work order {wo}\n").into_bytes()
}

/// The object a work order's note is attached to: the blob `git-arbiter work order <id>\n`.
pub fn key_for(wo: &str) -> ObjectId {
    gix::objs::compute_hash(
        gix::hash::Kind::Sha1,
        gix::object::Kind::Blob,
        &key_bytes(wo),
    )
    .expect("sha1 hashing of an in-memory buffer cannot fail")
}

/// A consistent read of the notes ref at one tip.
pub struct Snapshot<'repo> {
    repo: &'repo gix::Repository,
    pub tip: Option<ObjectId>,
    notes: gix::note::plumbing::State,
    /// The notes tree at `tip`, as read (`notes` may be edited since).
    tree: ObjectId,
    parsed: Option<std::sync::Arc<ParsedRecords>>,
    index: Option<std::sync::Arc<notes_index::NotesIndex>>,
    disk: DiskNotes,
}

/// The notes an earlier process read ([`read_cache::Notes`]), loaded on the
/// first read of many records: a `status` or a conductor's start-up. A
/// process that remembers what it parsed ([`Store::remembering`]) uses them
/// only for that first read, then keeps its own memory.
#[derive(Clone, Default)]
struct DiskNotes(std::sync::Arc<std::sync::Mutex<DiskState>>);

#[derive(Default)]
enum DiskState {
    #[default]
    Unloaded,
    Loaded(read_cache::Notes),
    Unused,
}

/// Reads of fewer records than this leave the disk cache alone: a few notes
/// cost less to read than the cache file.
const DISK_CACHE_MIN: usize = 256;

/// A cache that misses this many notes is written again.
const DISK_CACHE_STALE: usize = 64;

/// Records parsed already, by key, each with its note blob (a [`Caches`]
/// entry): a note is named by its content, so a record that did not change
/// since it was last read costs a lookup, not a read, an inflate and a
/// parse. Every transition reads the records it decides on, and most of
/// them (settled orders above all) are the same from one transition to the
/// next. One version per key: a newer one read replaces it.
///
/// [`Caches`]: crate::sys::caches::Caches
#[derive(Default)]
pub struct ParsedRecords(std::sync::Mutex<std::collections::HashMap<ObjectId, (ObjectId, Record)>>);

impl ParsedRecords {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<ObjectId, (ObjectId, Record)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<'repo> Snapshot<'repo> {
    pub fn read(repo: &'repo gix::Repository) -> Result<Self, Error> {
        let (tip, notes) = read_notes(repo, NOTES_REF)?;
        Ok(Snapshot {
            repo,
            tip,
            tree: notes.root_tree_id(),
            notes,
            parsed: None,
            index: None,
            disk: DiskNotes::default(),
        })
    }

    /// The notes ref as it was at its commit `commit`, a past state of it
    /// (`report --since`); the caller has checked that it is one.
    pub fn read_at(repo: &'repo gix::Repository, commit: ObjectId) -> Result<Self, Error> {
        let (tip, notes) =
            crate::git::odb::retry_transient(|| notes_at(repo, NOTES_REF, Some(commit)))?;
        Ok(Snapshot {
            repo,
            tip,
            tree: notes.root_tree_id(),
            notes,
            parsed: None,
            index: None,
            disk: DiskNotes::default(),
        })
    }

    /// The raw note attached to `object`, if any.
    pub fn note(&mut self, object: &gix::hash::oid) -> Result<Option<Vec<u8>>, Error> {
        let (repo, notes) = (self.repo, &mut self.notes);
        crate::git::odb::retry_transient(|| match notes.get(object, &repo.objects) {
            Ok(Some(blob)) => Ok(Some(repo.find_blob(blob).map_err(git_err)?.take_data())),
            Ok(None) => Ok(None),
            Err(e) => Err(git_err(e)),
        })
    }

    /// The ids of the work orders with a key under `wo-keys/` (every record
    /// git-arbiter wrote), sorted: what the state knows without the orders.
    pub fn ids(&self) -> Result<Vec<String>, Error> {
        let Some(tip) = self.tip else {
            return Ok(Vec::new());
        };
        let tree = self
            .repo
            .find_commit(tip)
            .map_err(git_err)?
            .tree()
            .map_err(git_err)?;
        let Some(keys) = tree.find_entry(KEYS_DIR) else {
            return Ok(Vec::new());
        };
        let keys = keys
            .object()
            .map_err(git_err)?
            .try_into_tree()
            .map_err(git_err)?;
        let mut ids: Vec<String> = keys
            .iter()
            .filter_map(|e| e.ok().map(|e| e.filename().to_string()))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// The key and note blob of each of `wos`, in order, up to the first
    /// that could not be looked up (and that error).
    #[allow(clippy::type_complexity)]
    fn note_blobs<'w>(
        &mut self,
        wos: &[&'w str],
    ) -> (Vec<(&'w str, ObjectId, Option<ObjectId>)>, Option<Error>) {
        // A process that reads the state again and again keeps an index
        // of the notes, brought up to date by what changed; a read of many
        // records starts from the index an earlier process left on disk.
        let one_read;
        let index = match &self.index {
            Some(index) => Some(&**index),
            None if wos.len() >= DISK_CACHE_MIN => {
                one_read = notes_index::NotesIndex::default();
                Some(&one_read)
            }
            None => None,
        };
        if let Some(index) = index {
            if let Ok(found) = index.lookup(self.repo, self.tree, wos) {
                let found = wos.iter().zip(found);
                return (
                    found.map(|(wo, (key, blob))| (*wo, key, blob)).collect(),
                    None,
                );
            }
        }
        // Otherwise the notes tree is walked, cheaply and in order; an
        // index that failed is tried the same way, for its error.
        let mut found = Vec::with_capacity(wos.len());
        for wo in wos {
            let key = key_for(wo);
            match self.notes.get(&key, &self.repo.objects) {
                Ok(blob) => found.push((*wo, key, blob)),
                Err(e) => return (found, Some(git_err(e))),
            }
        }
        (found, None)
    }

    /// The note blob of each of `wos`, in order: what names each record's
    /// version, read without parsing any.
    pub fn blobs(&mut self, wos: &[&str]) -> Result<Vec<Option<ObjectId>>, Error> {
        let (found, error) = self.note_blobs(wos);
        match error {
            Some(e) => Err(e),
            None => Ok(found.into_iter().map(|(_, _, blob)| blob).collect()),
        }
    }

    /// Does this snapshot come from a store that remembers what it read
    /// ([`Store::remembering`]), for a process that reads again and again?
    pub fn remembers(&self) -> bool {
        self.index.is_some()
    }

    /// The stored record of `wo`, or `None` when it has no note yet.
    pub fn record(&mut self, wo: &str) -> Result<Option<Record>, Error> {
        let key = key_for(wo);
        let Some(bytes) = self.note(&key)? else {
            return Ok(None);
        };
        parse_record(wo, &key, &bytes).map(Some)
    }

    /// The stored records of many work orders, in the order of `wos`: the
    /// same as calling [`Snapshot::record`] for each in turn (including which
    /// error is returned: the first in that order), but the notes are read
    /// and parsed on a few threads.
    pub fn records(&mut self, wos: &[&str]) -> Result<Vec<Option<Record>>, Error> {
        let (found, lookup_error) = self.note_blobs(wos);
        // Records parsed before (same blob) are taken from memory; only the
        // others are read.
        let mut records: Vec<Option<Option<Record>>> = vec![None; found.len()];
        if let Some(parsed) = &self.parsed {
            let parsed = parsed.lock();
            for (slot, (_, key, blob)) in records.iter_mut().zip(&found) {
                if let Some(blob) = blob {
                    *slot = parsed
                        .get(key)
                        .filter(|(parsed_from, _)| parsed_from == blob)
                        .map(|(_, record)| Some(record.clone()));
                }
            }
        }
        let to_read: Vec<usize> = (0..found.len()).filter(|&i| records[i].is_none()).collect();
        let unread: Vec<(&str, ObjectId, Option<ObjectId>)> =
            to_read.iter().map(|&i| found[i]).collect();
        let mut disk = self.disk.0.lock().unwrap_or_else(PoisonError::into_inner);
        if unread.len() >= DISK_CACHE_MIN && matches!(*disk, DiskState::Unloaded) {
            *disk = DiskState::Loaded(read_cache::Notes::load(
                crate::git::layout::dir(self.repo).join("notes.cache"),
            ));
        }
        let cached = match &*disk {
            DiskState::Loaded(notes) => Some(notes),
            _ => None,
        };
        let objects_dir = self.repo.objects.store_ref().path().to_owned();
        // Each record, and the note's bytes when they were read from the
        // objects (for the disk cache).
        let read = |repo: &gix::Repository, chunk: &[(&str, ObjectId, Option<ObjectId>)]| {
            let mut out = Vec::with_capacity(chunk.len());
            let mut loose = LooseReader::default();
            for (wo, key, blob) in chunk {
                let record = match blob {
                    None => Ok((None, None)),
                    Some(blob) => match cached.and_then(|c| c.get(blob)) {
                        Some(bytes) => parse_record(wo, key, bytes).map(|r| (Some(r), None)),
                        None => match loose.read_blob(&objects_dir, blob) {
                            Some(bytes) => parse_record(wo, key, bytes)
                                .map(|r| (Some(r), cached.map(|_| bytes.to_vec()))),
                            None => repo.find_blob(*blob).map_err(git_err).and_then(|b| {
                                let bytes = b.detach().data;
                                parse_record(wo, key, &bytes)
                                    .map(|r| (Some(r), cached.map(|_| bytes)))
                            }),
                        },
                    },
                };
                let failed = record.is_err();
                out.push(record);
                if failed {
                    break;
                }
            }
            out
        };
        // A repository handle per thread: one is not shared across threads.
        let shared = self.repo.clone().into_sync();
        let parts = crate::sys::parallel::read_in_chunks(&unread, MIN_NOTES_PER_READER, |chunk| {
            read(&shared.to_thread_local(), chunk)
        });
        let mut fresh = Vec::with_capacity(unread.len());
        let mut read_anew = Vec::new();
        for (&i, read) in to_read.iter().zip(parts.into_iter().flatten()) {
            let (record, bytes) = read?;
            if let (Some(blob), Some(record)) = (found[i].2, &record) {
                // Kept only by a process that remembers what it parsed.
                if self.parsed.is_some() {
                    fresh.push((found[i].1, (blob, record.clone())));
                }
                if let Some(bytes) = bytes {
                    read_anew.push((blob, bytes));
                }
            }
            records[i] = Some(record);
        }
        if let DiskState::Loaded(notes) = &mut *disk {
            for (blob, bytes) in &read_anew {
                notes.insert(*blob, bytes);
            }
            // Only a read of every record knows which notes are current.
            if self.parsed.is_none()
                && lookup_error.is_none()
                && read_anew.len() >= DISK_CACHE_STALE
            {
                notes.keep_and_save(&found.iter().filter_map(|(_, _, blob)| *blob).collect());
            }
            if self.parsed.is_some() {
                *disk = DiskState::Unused;
            }
        }
        drop(disk);
        if let Some(parsed) = &self.parsed {
            parsed.lock().extend(fresh);
        }
        match lookup_error {
            Some(e) => Err(e),
            None => Ok(records.into_iter().flatten().collect()),
        }
    }
}

/// Fewer notes than this per thread are not worth a thread.
const MIN_NOTES_PER_READER: usize = 256;

/// Parse and check the note of `wo` (attached to `key`).
fn parse_record(wo: &str, key: &ObjectId, bytes: &[u8]) -> Result<Record, Error> {
    let corrupt = |message: String| Error::Corrupt {
        wo: wo.to_owned(),
        note: key.to_string(),
        message,
    };
    let record: Record = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if record.version != 1 {
        return Err(corrupt(format!("unsupported version {}", record.version)));
    }
    if record.wo != wo {
        return Err(corrupt(format!("it names work order '{}'", record.wo)));
    }
    Ok(record)
}

/// One transition being prepared: reads see the tip it started from plus its own writes.
pub struct Txn<'s, 'repo> {
    snapshot: &'s mut Snapshot<'repo>,
    records: BTreeMap<String, Record>,
    notes: BTreeMap<ObjectId, Vec<u8>>,
    default_cap: u32,
    /// With a remote: other refs the same atomic push moves.
    refs: Vec<remote::Update>,
}

impl Txn<'_, '_> {
    /// With a remote, also move `update` in the push of this transition:
    /// both or neither. Without one, nothing.
    pub fn push_ref(&mut self, update: remote::Update) {
        self.refs.push(update);
    }

    /// The record of `wo`, stored or fresh (`has_deps` decides a fresh one's status).
    pub fn record(&mut self, wo: &str, has_deps: bool) -> Result<Record, Error> {
        if let Some(r) = self.records.get(wo) {
            return Ok(r.clone());
        }
        Ok(self
            .snapshot
            .record(wo)?
            .unwrap_or_else(|| Record::new(wo, has_deps, self.default_cap)))
    }

    pub fn stored(&mut self, wo: &str) -> Result<Option<Record>, Error> {
        if let Some(r) = self.records.get(wo) {
            return Ok(Some(r.clone()));
        }
        self.snapshot.record(wo)
    }

    pub fn put(&mut self, record: Record) {
        self.records.insert(record.wo.clone(), record);
    }

    /// Attach a note to any object (e.g. a merge commit).
    pub fn put_note(&mut self, object: ObjectId, bytes: Vec<u8>) {
        self.notes.insert(object, bytes);
    }

    /// The note on `object` as of this transaction.
    pub fn note(&mut self, object: &gix::hash::oid) -> Result<Option<Vec<u8>>, Error> {
        if let Some(b) = self.notes.get(object) {
            return Ok(Some(b.clone()));
        }
        self.snapshot.note(object)
    }
}

/// The store of run state for one repository.
pub struct Store<'repo> {
    pub repo: &'repo gix::Repository,
    pub default_cap: u32,
    parsed: Option<std::sync::Arc<ParsedRecords>>,
    index: Option<std::sync::Arc<notes_index::NotesIndex>>,
    disk: DiskNotes,
    remote: Option<std::sync::Arc<remote::Remote>>,
}

impl<'repo> Store<'repo> {
    pub fn new(repo: &'repo gix::Repository, default_cap: u32) -> Self {
        Store {
            repo,
            default_cap,
            parsed: None,
            index: None,
            disk: DiskNotes::default(),
            remote: None,
        }
    }

    /// This store, its transitions pushed to `remote` (if any) by
    /// compare-and-swap before the local notes ref follows ([`remote`]).
    pub fn with_remote(mut self, remote: Option<std::sync::Arc<remote::Remote>>) -> Self {
        self.remote = remote;
        self
    }

    /// The remote this store's transitions go to, if any.
    pub fn remote(&self) -> Option<&remote::Remote> {
        self.remote.as_deref()
    }

    /// This store, its snapshots keeping the records they parse in
    /// `caches` ([`ParsedRecords`]), and an index of the notes brought up to
    /// date by what changed ([`notes_index`]), for the next: for a process that reads
    /// the state again at every transition.
    pub fn remembering(mut self, caches: &crate::sys::caches::Caches) -> Self {
        self.parsed = Some(caches.get::<ParsedRecords>());
        self.index = Some(caches.get::<notes_index::NotesIndex>());
        self
    }

    pub fn snapshot(&self) -> Result<Snapshot<'repo>, Error> {
        let mut snapshot = Snapshot::read(self.repo)?;
        snapshot.parsed = self.parsed.clone();
        snapshot.index = self.index.clone();
        snapshot.disk = self.disk.clone();
        Ok(snapshot)
    }

    /// Apply `change` as one compare-and-swap commit on the notes ref.
    ///
    /// `change` may run more than once: after a lost race it is re-run on the
    /// new tip, so it must derive everything from what the `Txn` reads. It
    /// returns a value and whether anything changed (`Ok((v, false))` writes
    /// nothing). Returns the value and the notes tip after the transition.
    pub fn transact<T, E>(
        &self,
        message: &str,
        mut change: impl FnMut(&mut Txn<'_, 'repo>) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<Error>,
    {
        let mut backoff = Duration::from_millis(1);
        let mut locked_in_a_row = 0;
        let mut failed_in_a_row = 0;
        let mut unreachable_since: Option<std::time::Instant> = None;
        for _ in 0..MAX_RETRIES {
            // With a remote, this process's transitions take turns: threads
            // of one conductor never lose a race to each other.
            let turn = self.remote.as_deref().map(remote::Remote::turn);
            let mut snapshot = self.snapshot()?;
            let mut txn = Txn {
                snapshot: &mut snapshot,
                records: BTreeMap::new(),
                notes: BTreeMap::new(),
                default_cap: self.default_cap,
                refs: Vec::new(),
            };
            let value = change(&mut txn)?;
            let (records, notes, refs) = (
                std::mem::take(&mut txn.records),
                std::mem::take(&mut txn.notes),
                std::mem::take(&mut txn.refs),
            );
            if records.is_empty() && notes.is_empty() {
                return Ok(value);
            }
            let committed = crate::git::odb::retry_transient(|| {
                self.commit(&mut snapshot, &records, &notes, &refs, message)
            })?;
            match committed {
                Attempt::Committed => return Ok(value),
                Attempt::Lost => locked_in_a_row = 0,
                Attempt::Failed(e) => {
                    failed_in_a_row += 1;
                    if failed_in_a_row >= MAX_FAILED {
                        return Err(git_err(e).into());
                    }
                }
                Attempt::Locked => {
                    locked_in_a_row += 1;
                    let lock = crate::git::refguard::blocking_lock(self.repo, NOTES_REF);
                    if locked_in_a_row >= MAX_LOCKED || crate::git::refguard::is_stale(&lock) {
                        break;
                    }
                }
                // A partition: the transition waits for the remote (the
                // builds go on), up to a point.
                Attempt::Unreachable(e) => {
                    let since = *unreachable_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() >= remote::PATIENCE {
                        return Err(Error::Remote(e).into());
                    }
                    drop(turn);
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
            }
            drop(turn);
            std::thread::sleep(backoff + jitter(backoff));
            backoff = (backoff * 2).min(Duration::from_millis(50));
        }
        Err(contended(self.repo, NOTES_REF).into())
    }

    /// Change the record of `id` in one transition while conductor `owner`
    /// holds its attempt `attempt` ([`Record::held_by`]): `Ok(false)`, and
    /// nothing written, when it no longer does (halted, taken over, gone).
    pub fn update_held(
        &self,
        message: &str,
        id: &str,
        owner: &str,
        attempt: u32,
        mut change: impl FnMut(&mut Record),
    ) -> Result<bool, Error> {
        self.transact(message, |txn| -> Result<bool, Error> {
            let Some(mut record) = txn.stored(id)? else {
                return Ok(false);
            };
            if !record.held_by(owner, attempt) {
                return Ok(false);
            }
            change(&mut record);
            txn.put(record);
            Ok(true)
        })
    }

    /// The snapshot's notes tree as edited, written; the key blobs of new
    /// work orders go under `keys/` by a second edit. The trees are made in
    /// memory and only the final ones are written: the notes tree in
    /// between would be left dangling.
    fn notes_tree(
        &self,
        snapshot: &mut Snapshot<'repo>,
        new_keys: &[(String, ObjectId)],
    ) -> Result<ObjectId, Error> {
        let repo = self.repo;
        if new_keys.is_empty() {
            return snapshot.notes.write(&repo.objects).map_err(git_err);
        }
        let staging = repo.clone().with_object_memory();
        let notes_only = snapshot.notes.write(&staging.objects).map_err(git_err)?;
        let root: gix::objs::Tree = staging
            .find_tree(notes_only)
            .map_err(git_err)?
            .decode()
            .map_err(git_err)?
            .into();
        // gix's own tree editor looks up every entry of every tree it
        // writes: a stat of one loose key per order at each new order's
        // first transition. These entries were all written here.
        let mut editor = gix::objs::tree::Editor::new(root, &staging.objects, repo.object_hash());
        for (wo, key) in new_keys {
            gix::validate::path::component(wo.as_str().into(), None, Default::default())
                .map_err(git_err)?;
            let written =
                crate::git::odb::write_fresh_buf(repo, gix::objs::Kind::Blob, &key_bytes(wo))
                    .map_err(git_err)?;
            debug_assert_eq!(written, *key);
            editor
                .upsert(
                    [KEYS_DIR, wo.as_str()],
                    gix::object::tree::EntryKind::Blob,
                    written,
                )
                .map_err(git_err)?;
        }
        let tree = editor
            .write(|tree| staging.write_object(tree).map(gix::Id::detach))
            .map_err(git_err)?;
        let staged = staging.objects.reset_object_memory().unwrap_or_default();
        write_reachable(repo, &staged, tree)?;
        Ok(tree)
    }

    /// Write the records and notes on top of the snapshot's tip.
    fn commit(
        &self,
        snapshot: &mut Snapshot<'repo>,
        records: &BTreeMap<String, Record>,
        notes: &BTreeMap<ObjectId, Vec<u8>>,
        refs: &[remote::Update],
        message: &str,
    ) -> Result<Attempt, Error> {
        let repo = self.repo;
        let leased;
        let records = match &self.remote {
            Some(remote) => {
                leased = remote.lease_held(records);
                &leased
            }
            None => records,
        };
        let mut new_keys = Vec::new();
        for (wo, record) in records {
            let key = key_for(wo);
            if snapshot
                .notes
                .get(&key, &repo.objects)
                .map_err(git_err)?
                .is_none()
            {
                new_keys.push((wo.clone(), key));
            }
            let mut json = serde_json::to_vec_pretty(record).expect("a record always serializes");
            json.push(b'\n');
            let blob = crate::git::odb::write_fresh_buf(repo, gix::objs::Kind::Blob, &json)
                .map_err(git_err)?;
            snapshot
                .notes
                .edit(key, Some(blob), &repo.objects)
                .map_err(git_err)?;
        }
        for (object, bytes) in notes {
            let mut bytes = bytes.clone();
            if !bytes.ends_with(b"\n") {
                bytes.push(b'\n');
            }
            let blob = crate::git::odb::write_fresh_buf(repo, gix::objs::Kind::Blob, &bytes)
                .map_err(git_err)?;
            snapshot
                .notes
                .edit(*object, Some(blob), &repo.objects)
                .map_err(git_err)?;
        }
        let tree = self.notes_tree(snapshot, &new_keys)?;
        let commit = write_commit(repo, message, tree, snapshot.tip)?;
        if let Some(remote) = &self.remote {
            return Self::push(repo, remote, snapshot.tip, commit, records, refs);
        }
        let expected = match snapshot.tip {
            Some(tip) => PreviousValue::MustExistAndMatch(Target::Object(tip)),
            None => PreviousValue::MustNotExist,
        };
        match crate::git::refguard::guarded(repo, NOTES_REF, || {
            repo.reference(NOTES_REF, commit, expected, format!("arbiter: {message}"))
        }) {
            Ok(_) => Ok(Attempt::Committed),
            // gix gave up waiting for a lock (it reports some as conflicts).
            Err(_) if crate::git::refguard::blocking_lock(repo, NOTES_REF).exists() => {
                Ok(Attempt::Locked)
            }
            Err(e) if e.is_conflict() => Ok(Attempt::Lost),
            Err(e) if e.is_retryable() => Ok(Attempt::Locked),
            // Most likely a race with `git pack-refs` moving the ref into
            // `packed-refs` as we read it: tried again a few times.
            Err(e) => Ok(Attempt::Failed(e)),
        }
    }
}

impl Store<'_> {
    /// Push the notes commit `commit` (made on `tip`), with `refs`, to the
    /// remote by compare-and-swap; once it took them, the local refs follow.
    fn push(
        repo: &gix::Repository,
        remote: &remote::Remote,
        tip: Option<ObjectId>,
        commit: ObjectId,
        records: &BTreeMap<String, Record>,
        refs: &[remote::Update],
    ) -> Result<Attempt, Error> {
        // A local ref this push would move, locked by a writer that died:
        // said now, before the remote takes what this clone then could not follow.
        let locals =
            std::iter::once(NOTES_REF).chain(refs.iter().filter_map(|u| u.local.as_deref()));
        for name in locals {
            let lock = crate::git::refguard::blocking_lock(repo, name);
            if crate::git::refguard::is_stale(&lock) {
                return Err(contended(repo, name));
            }
        }
        let mut updates = vec![remote::Update {
            name: NOTES_REF.into(),
            expect: remote::Expect::tip(tip),
            to: commit,
            local: Some(NOTES_REF.into()),
        }];
        updates.extend_from_slice(refs);
        match remote.push(repo, &updates) {
            Ok(remote::Pushed::Accepted) => {
                remote.wrote(records.iter());
                Ok(Attempt::Committed)
            }
            Ok(remote::Pushed::Stale) => {
                let caught_up = if refs.is_empty() {
                    remote.catch_up_state(repo)
                } else {
                    remote.catch_up(repo)
                };
                match caught_up {
                    Ok(()) => Ok(Attempt::Lost),
                    Err(e @ remote::Error::Unreachable { .. }) => Ok(Attempt::Unreachable(e)),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e @ remote::Error::Unreachable { .. }) => Ok(Attempt::Unreachable(e)),
            Err(e) => Err(e.into()),
        }
    }
}

/// Attach `bytes` as the note on `object` in `notes_ref` (e.g.
/// `refs/notes/arbiter-picks`) unless `object` already has one there: a
/// compare-and-swap commit on that ref, redone on a lost race. `Ok(false)`:
/// a note already exists (written by anyone, before or during this call) and
/// nothing was changed.
pub fn write_note_once(
    repo: &gix::Repository,
    notes_ref: &str,
    object: ObjectId,
    bytes: &[u8],
    message: &str,
) -> Result<bool, Error> {
    let mut backoff = Duration::from_millis(1);
    for _ in 0..MAX_RETRIES {
        let (tip, mut notes) = read_notes(repo, notes_ref)?;
        if notes
            .get(&object, &repo.objects)
            .map_err(git_err)?
            .is_some()
        {
            return Ok(false);
        }
        let mut bytes = bytes.to_vec();
        if !bytes.ends_with(b"\n") {
            bytes.push(b'\n');
        }
        let commit = crate::git::odb::retry_transient(|| -> Result<ObjectId, Error> {
            let blob = crate::git::odb::write_fresh_buf(repo, gix::objs::Kind::Blob, &bytes)
                .map_err(git_err)?;
            notes
                .edit(object, Some(blob), &repo.objects)
                .map_err(git_err)?;
            let tree = notes.write(&repo.objects).map_err(git_err)?;
            Ok(write_commit(repo, message, tree, tip)?)
        })?;
        let expected = match tip {
            Some(tip) => PreviousValue::MustExistAndMatch(Target::Object(tip)),
            None => PreviousValue::MustNotExist,
        };
        match crate::git::refguard::guarded(repo, notes_ref, || {
            repo.reference(notes_ref, commit, expected, format!("arbiter: {message}"))
        }) {
            Ok(_) => return Ok(true),
            Err(e) if e.is_conflict() || e.is_retryable() => {
                std::thread::sleep(backoff + jitter(backoff));
                backoff = (backoff * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(git_err(e)),
        }
    }
    Err(contended(repo, notes_ref))
}

/// How one compare-and-swap attempt on the notes ref ended.
enum Attempt {
    Committed,
    /// Another writer moved the ref first: re-read and re-apply.
    Lost,
    /// The ref's lock file was taken for longer than gix waits.
    Locked,
    /// The edit failed otherwise; it is tried again [`MAX_FAILED`] times.
    Failed(gix::Error),
    /// The remote could not be reached: tried again until [`remote::PATIENCE`] ran out.
    Unreachable(remote::Error),
}

fn contended(repo: &gix::Repository, reference: &str) -> Error {
    let lock = crate::git::refguard::blocking_lock(repo, reference);
    if lock.exists() {
        Error::Locked {
            reference: reference.to_owned(),
            lock,
        }
    } else {
        Error::Contended {
            reference: reference.to_owned(),
        }
    }
}

/// The tip of `notes_ref` (`None`: no notes yet) and its notes tree, ready to read and edit.
fn read_notes(
    repo: &gix::Repository,
    notes_ref: &str,
) -> Result<(Option<ObjectId>, gix::note::plumbing::State), Error> {
    crate::git::odb::retry_transient(|| read_notes_once(repo, notes_ref))
}

fn read_notes_once(
    repo: &gix::Repository,
    notes_ref: &str,
) -> Result<(Option<ObjectId>, gix::note::plumbing::State), Error> {
    let tip = match repo.try_find_reference(notes_ref).map_err(git_err)? {
        Some(mut r) => Some(r.peel_to_id().map_err(git_err)?.detach()),
        None => None,
    };
    notes_at(repo, notes_ref, tip)
}

/// The notes of `notes_ref` as its commit `tip` holds them (none: no notes).
fn notes_at(
    repo: &gix::Repository,
    notes_ref: &str,
    tip: Option<ObjectId>,
) -> Result<(Option<ObjectId>, gix::note::plumbing::State), Error> {
    let tree = match tip {
        Some(tip) => {
            let object = repo.find_object(tip).map_err(git_err)?;
            if object.kind != gix::object::Kind::Commit {
                return Err(Error::NotACommit {
                    reference: notes_ref.to_owned(),
                    kind: object.kind.to_string(),
                    id: tip.to_string(),
                });
            }
            object.into_commit().tree_id().map_err(git_err)?.detach()
        }
        None => ObjectId::empty_tree(repo.object_hash()),
    };
    let notes = gix::note::plumbing::State::new(tree, &repo.objects).map_err(git_err)?;
    Ok((tip, notes))
}

/// The note on `object` in `notes_ref` (e.g. `refs/notes/arbiter-picks`), if any.
pub fn read_note(
    repo: &gix::Repository,
    notes_ref: &str,
    object: &gix::hash::oid,
) -> Result<Option<Vec<u8>>, Error> {
    let (_, mut notes) = read_notes(repo, notes_ref)?;
    match notes.get(object, &repo.objects).map_err(git_err)? {
        Some(blob) => Ok(Some(repo.find_blob(blob).map_err(git_err)?.take_data())),
        None => Ok(None),
    }
}

fn jitter(base: Duration) -> Duration {
    // Enough randomness to break lock-step retries between processes.
    let nanos = since_epoch().subsec_nanos() ^ std::process::id().wrapping_mul(2_654_435_761);
    Duration::from_nanos(u64::from(nanos) % (base.as_nanos() as u64 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halted_dominates_the_state_word_and_the_last_failure_is_the_latest_with_a_reason() {
        assert_eq!(Status::NeedsRework.state(true), "halted");
        assert_eq!(Status::InProgress.state(false), "in_progress");
        let mut record = Record::new("wo-01", false, 3);
        assert!(record.last_failure().is_none());
        record.attempts = 1;
        record.log("needs_rework", Some("build exit 1".into()));
        record.attempts = 2;
        record.log(MERGED_GATE_FAILED_EVENT, Some("gate 'make' exit 2".into()));
        record.log("halt", Some(RETRY_CAP_EXHAUSTED.into()));
        let last = record.last_failure().expect("a failure");
        assert_eq!(
            (last.attempt, last.detail.as_deref()),
            (Some(2), Some("gate 'make' exit 2"))
        );
    }

    #[test]
    fn key_is_the_blob_git_would_write() {
        let (_tmp, root) = crate::testutil::scratch();
        for wo in ["wo-01", "wo-02", "x"] {
            let out = crate::testutil::git_with_input(
                &root,
                &root,
                &["hash-object", "--stdin"],
                &key_bytes(wo),
            );
            assert!(out.status.success());
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                key_for(wo).to_string(),
                "{wo}"
            );
        }
        assert_eq!(key_bytes("wo-01"), b"git-arbiter work order wo-01\n");
    }

    #[test]
    fn recovery_transitions_leave_no_owner() {
        let taken = || {
            let mut r = Record::new("wo-01", false, 3);
            r.status = Status::InProgress;
            r.owner = Some("c1".into());
            r
        };
        let mut r = taken();
        r.mark_done("recovered_done", "abc".into());
        assert_eq!(
            (r.status, r.owner.as_deref(), r.checkpoint_after.as_deref()),
            (Status::Done, None, Some("abc"))
        );
        assert_eq!(
            r.history.last().map(|e| e.event.as_str()),
            Some("recovered_done")
        );
        let mut r = taken();
        r.requeue_for_rework();
        assert_eq!((r.status, r.owner.as_deref()), (Status::NeedsRework, None));
        let mut r = taken();
        r.halt_unowned("recovery_failed", vec!["why".into()]);
        assert!(r.halted && r.owner.is_none());
        assert_eq!(r.halt_paths, ["why"]);
    }

    #[test]
    fn an_attempt_is_dispatched_held_and_let_go() {
        let mut r = Record::new("wo-01", false, 3);
        r.dispatch("c1", "base1".into(), "dispatch", "round_base=base1".into());
        assert!(r.held_by("c1", 1));
        assert_eq!(r.checkpoint_before.as_deref(), Some("base1"));
        r.release();
        assert_eq!(
            (r.status, r.owner.as_deref(), r.attempts),
            (Status::NeedsRework, None, 1)
        );
        r.dispatch("c2", "base2".into(), "dispatch", "round_base=base2".into());
        assert!(r.held_by("c2", 2) && !r.held_by("c1", 2));
        // Stopped, not failed: the attempt does not count.
        r.give_back();
        assert_eq!(
            (r.status, r.owner.as_deref(), r.attempts),
            (Status::NeedsRework, None, 1)
        );
        r.dispatch("c1", "base3".into(), "dispatch", "round_base=base3".into());
        r.halt("merge_conflict", vec!["a.rs".into()]);
        assert!(!r.held_by("c1", 2));
        r.resume("c1");
        assert!(r.held_by("c1", 2));
        r.mark_merged("main".into(), "sha".into());
        assert_eq!(
            (r.status, r.owner.as_deref(), r.merged_into.as_deref()),
            (Status::Done, None, Some("main"))
        );
        let events: Vec<&str> = r.history.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(
            events,
            [
                "dispatch",
                "dispatch",
                "dispatch",
                "halt",
                "halt_lifted",
                "merged"
            ]
        );
    }

    /// A store that remembers parsed records reads what changed since, and
    /// gives the same records as one that reads every note.
    #[test]
    fn remembered_records_follow_every_change() {
        let repo = crate::testutil::TestRepo::new();
        let caches = crate::sys::caches::Caches::default();
        let remembering = Store::new(&repo.ctx.repo, 3).remembering(&caches);
        let plain = Store::new(&repo.ctx.repo, 3);
        let ids = ["wo-a", "wo-b", "wo-c"];
        let put = |wo: &str, event: &str| {
            remembering
                .transact::<_, Error>("test", |txn| {
                    let mut r = txn.record(wo, false)?;
                    r.log(event, None);
                    txn.put(r);
                    Ok(())
                })
                .expect("transact");
        };
        for wo in ids {
            put(wo, "first");
        }
        let read = |store: &Store| {
            store
                .snapshot()
                .and_then(|mut s| s.records(&ids))
                .expect("read")
        };
        assert_eq!(read(&remembering), read(&plain));
        put("wo-b", "second");
        let after = read(&remembering);
        assert_eq!(after, read(&plain));
        let b = after[1].as_ref().expect("wo-b");
        assert_eq!(b.history.last().map(|e| e.event.as_str()), Some("second"));
        // wo-b's first version went when its second was read: a run that
        // reads a few records at a time kept every version it ever read.
        assert_eq!(caches.get::<ParsedRecords>().lock().len(), 3);
    }

    /// A conductor that reads every record at each step keeps the versions
    /// that are current, not every version it ever parsed.
    #[test]
    fn remembered_records_keep_what_is_current() {
        let repo = crate::testutil::TestRepo::new();
        let caches = crate::sys::caches::Caches::default();
        let store = Store::new(&repo.ctx.repo, 3).remembering(&caches);
        let ids: Vec<String> = (0..DISK_CACHE_MIN + 10)
            .map(|i| format!("wo-{i}"))
            .collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        for round in 0..3 {
            store
                .transact::<_, Error>("test", |txn| {
                    for wo in &ids {
                        let mut r = txn.record(wo, false)?;
                        r.log(format!("round-{round}"), None);
                        txn.put(r);
                    }
                    Ok(())
                })
                .expect("transact");
            let read = store
                .snapshot()
                .and_then(|mut s| s.records(&ids))
                .expect("read");
            assert_eq!(read.len(), ids.len());
        }
        let remembered = caches.get::<ParsedRecords>().lock().len();
        assert!(
            remembered <= 2 * ids.len(),
            "{remembered} remembered for {} orders",
            ids.len()
        );
    }

    /// Records read through the disk cache are the records in the notes,
    /// whatever changed since the cache was written, and whatever became
    /// of the cache file.
    #[test]
    fn records_read_through_the_disk_cache_are_the_notes() {
        let repo = crate::testutil::TestRepo::new();
        let store = Store::new(&repo.ctx.repo, 3);
        let ids: Vec<String> = (0..DISK_CACHE_MIN + 10)
            .map(|i| format!("wo-{i}"))
            .collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let put = |wos: &[&str], event: &str| {
            store
                .transact::<_, Error>("test", |txn| {
                    for wo in wos {
                        let mut r = txn.record(wo, false)?;
                        r.log(event, None);
                        txn.put(r);
                    }
                    Ok(())
                })
                .expect("transact");
        };
        put(&ids, "first");
        let read = || {
            Store::new(&repo.ctx.repo, 3)
                .snapshot()
                .and_then(|mut s| s.records(&ids))
                .expect("read")
        };
        let first = read();
        let cache = crate::git::layout::dir(&repo.ctx.repo).join("notes.cache");
        assert_eq!(
            read_cache::Notes::load(cache.clone()).len(),
            ids.len(),
            "a read of every record writes the cache"
        );
        assert_eq!(read(), first);

        put(&ids[..3], "second");
        let after = read();
        let events = |r: &Option<Record>| {
            r.as_ref()
                .and_then(|r| r.history.last())
                .map(|e| e.event.clone())
        };
        assert_eq!(events(&after[0]).as_deref(), Some("second"));
        assert_eq!(after[3..], first[3..]);

        // Garbled, or the notes of another state: the notes still win.
        std::fs::write(&cache, b"git-arbiter read cache 1\n\x05").expect("write");
        assert_eq!(read(), after);
        let mut other = read_cache::Notes::load(cache.clone());
        other.insert(ObjectId::null(gix::hash::Kind::Sha1), b"{}");
        other.keep_and_save(
            &[ObjectId::null(gix::hash::Kind::Sha1)]
                .into_iter()
                .collect(),
        );
        assert_eq!(read(), after);
    }

    #[test]
    fn record_round_trips() {
        let mut r = Record::new("wo-01", false, 3);
        r.halt("merge_conflict", vec!["a.rs".into()]);
        let json = serde_json::to_string(&r).expect("serializes");
        assert!(json.contains("\"version\":1"));
        let back: Record = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, r);
    }

    #[test]
    fn a_note_without_timings_still_parses() {
        let old = r#"{"version":1,"wo":"wo-01","status":"done","halted":false,"halt_reason":null,"attempts":1,"cap":3,"checkpoint_before":null,"checkpoint_after":null,"verdicts":[{"kind":"build","command":"true","passed":true,"exit_code":0}],"history":[{"at":5,"event":"dispatch"}]}"#;
        let r: Record = serde_json::from_str(old).expect("parses");
        assert_eq!(r.verdicts[0].wall_ms, None);
        assert_eq!(r.queue_wait_ms, None);
        assert_eq!(r.history[0].ms, None);
        assert_eq!((&r.history[0].run, r.history[0].slot), (&None, None));
        let json = serde_json::to_string(&r).expect("json");
        assert!(!json.contains("wall_ms") && !json.contains("\"run\"") && !json.contains("slot"));
    }

    #[test]
    fn a_dispatch_names_its_run_and_the_settling_event_its_slot() {
        let mut r = Record::new("wo-01", false, 3);
        r.dispatch("c1", "base".into(), "dispatch", String::new());
        assert_eq!(r.history[0].run.as_deref(), Some("c1"));
        r.log("built", None);
        let held = SlotHeld {
            index: 2,
            from_ms: 10,
            to_ms: 20,
        };
        r.held_slot(Some(held));
        assert_eq!((r.history[1].slot, &r.history[1].run), (Some(held), &None));
        let back: Record =
            serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("parses");
        assert_eq!(back, r);
    }

    #[test]
    fn a_new_attempt_keeps_the_last_ones_verdicts() {
        let mut r = Record::new("wo-01", false, 3);
        r.start_attempt();
        assert!(r.earlier.is_empty());
        r.attempts = 1;
        r.queue_wait_ms = Some(7);
        r.verdicts.push(Verdict {
            kind: "build".into(),
            command: "false".into(),
            passed: false,
            exit_code: Some(1),
            detail: None,
            wall_ms: Some(12),
            log: None,
            report: None,
        });
        r.start_attempt();
        assert!(r.verdicts.is_empty() && r.queue_wait_ms.is_none());
        assert_eq!(r.earlier.len(), 1);
        assert_eq!(r.earlier[0].attempt, 1);
        assert_eq!(r.earlier[0].queue_wait_ms, Some(7));
        assert_eq!(r.earlier[0].verdicts[0].wall_ms, Some(12));
    }
}

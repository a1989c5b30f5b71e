//! The merge queue: orders whose build and gates passed land here, as one
//! batch, whatever is waiting. Their merges are chained in the object
//! database on top of the integration tip (drift per order, own scope, as a
//! merge-back checks it), then
//! - [`Verify::Merged`]: the gates run once on the chain's tip in a scratch
//!   worktree, and the branch moves to it by one compare-and-swap only if
//!   they pass. On failure the chain is bisected (gates on prefixes) for the
//!   first merge after which they fail; with two suspects left, the chain
//!   without each is tried, which lands every other merge at once when one
//!   passes. The culprit goes back for rework ([`MERGED_GATE_FAILED`], its
//!   attempt spent); what was not verified is chained again on the new tip
//!   and verified again. No merge lands that the gates did not pass as merged.
//! - [`Verify::None`]: the branch moves to the chain's tip at once. Each
//!   order still gets its own merge commit, drift-checked on its own; a
//!   checked-out integration branch is updated (and its `post-merge` hook
//!   run) once for the chain, and the notes record the whole landing in one
//!   transaction.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gix::refs::FullName;
use gix::ObjectId;

use crate::run::builder::NotRunnable;
use crate::run::conductor::{self, Conductor};
use crate::run::exec::{self, Exit};
use crate::run::merge::{self, Landed, Link, Linked, Request};
use crate::run::progress::{Event, Phase, Progress};
use crate::run::worktree::{self, VERIFY_PREFIX};
use crate::state::context::Context;
use crate::state::cost::Spent;
use crate::state::{Store, Verdict};
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("keeping {commit} on {name}: {source}")]
    KeepChain {
        commit: ObjectId,
        name: String,
        #[source]
        source: gix::Error,
    },
    /// A verification command that could not be started or waited for.
    #[error("running {kind} '{command}' on the merged result: {source}")]
    RunCheck {
        kind: &'static str,
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("removing {}: {source}", path.display())]
    RemoveLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("listing references: {source}")]
    ListRefs {
        #[source]
        source: gix::Error,
    },
    #[error("listing verification branches: {source}")]
    ListVerifyBranches {
        #[source]
        source: gix::Error,
    },
    #[error("listing merge chain refs: {source}")]
    ListChainRefs {
        #[source]
        source: gix::Error,
    },
    #[error("deleting {name}: {source}")]
    DeleteRef {
        name: String,
        #[source]
        source: crate::git::refguard::DeleteError,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

pub use crate::run::merge::MERGED_GATE_FAILED;

/// Whether the gates run on the merged result before the branch moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verify {
    /// The chain lands as it is, unverified.
    #[default]
    None,
    /// The gates pass on the chain's tip before it lands.
    Merged,
}

impl Verify {
    pub fn name(self) -> &'static str {
        match self {
            Verify::None => "none",
            Verify::Merged => "merged",
        }
    }

    /// `--verify` or `arbiter.verify`: `merged` or `none`; unset is
    /// `merged` whenever a gate is configured.
    pub fn parse(value: Option<&str>, has_gates: bool) -> std::result::Result<Verify, String> {
        match value {
            Some("merged") => Ok(Verify::Merged),
            Some("none") => Ok(Verify::None),
            Some(other) => Err(format!("'{other}' is not 'merged' or 'none'")),
            None if has_gates => Ok(Verify::Merged),
            None => Ok(Verify::None),
        }
    }
}

/// How a queue checks what it lands: `--verify`, the gates and their time
/// limit, and the pool (with its setup hook) the gates run in.
pub struct Checks<'a> {
    pub verify: Verify,
    pub gates: &'a [String],
    pub timeout: Option<Duration>,
    pub pool: &'a crate::run::pool::Options,
}

/// An order waiting to land: its merge request and when it entered.
#[derive(Clone)]
pub struct Entry<'a> {
    pub req: Request<'a>,
    pub entered: Instant,
    /// A merged tree its gates already passed on (work that waited to land):
    /// a chain that comes out the same needs no gate run.
    pub verified: Option<ObjectId>,
}

/// How an order left the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Its merge is on the branch (`sha`, its own merge commit), landed in
    /// this run's landing number `batch`.
    Landed {
        sha: ObjectId,
        batch: usize,
        /// Files its merge changed.
        changed: usize,
    },
    /// Its work was already on the branch.
    UpToDate,
    /// Halted by its merge: `merge_conflict`, `undeclared_file_drift`.
    Halted { reason: String, paths: Vec<String> },
    /// A checkout of the branch could not follow (`why`): `verified`,
    /// waiting to land, its work kept.
    Waiting { why: String, hint: String },
    /// No longer this conductor's (halted by hand, taken over).
    Withdrawn { reason: String },
    /// Its merge broke the gates once merged: back for rework.
    GateFailed { detail: String },
    /// A stop came while verifying: given back unmerged.
    Interrupted,
}

/// Refs that keep a conductor's merge chain (and a chain tried without one
/// of its merges) reachable until it lands: `<prefix><conductor>`.
pub const CHAIN_REFS: &str = "refs/arbiter/chain/";
pub const RELINKED_REFS: &str = "refs/arbiter/relinked/";

/// Gate verdicts of one landing, by the tree they were on.
type Known = std::collections::HashMap<ObjectId, bool>;

/// What the gates decided about a chain.
struct Decided {
    /// Positions (in the chain) of the orders that land, in order.
    lands: Vec<usize>,
    /// Their merges: the chain's own, or merged again when an earlier
    /// link was left out.
    links: Vec<Link>,
    /// The position of the merge that broke the gates, and how it was found.
    culprit: Option<(usize, String)>,
}

/// A verification of a merged result in progress: the worktree it runs in
/// (taken as `name` on `branch`), what the setup and gates are told, and
/// where they write.
struct Verification {
    /// The merged commit verified.
    at: ObjectId,
    name: String,
    branch: String,
    path: PathBuf,
    env: Vec<(String, String)>,
    log: PathBuf,
}

/// The queue of one conductor: its merge session, its verification worktree
/// and the counts the summary reports.
pub struct Queue<'a> {
    ctx: &'a Context,
    store: &'a Store<'a>,
    into: &'a FullName,
    verify: Verify,
    gates: &'a [String],
    timeout: Option<Duration>,
    pool: &'a crate::run::pool::Options,
    me: &'a Conductor,
    repo_top: PathBuf,
    /// How long a landing waits for someone else's `index.lock` on a checkout.
    lock_wait: Duration,
    session: merge::Session,
    /// Landings so far (the `batch` of [`Fate::Landed`]).
    pub batches: usize,
    /// Verification runs so far (each runs every gate once).
    pub gate_runs: usize,
    /// What the setup and gates run on merged results reported they cost,
    /// since it was last taken ([`Queue::take_spent`]).
    spent: std::sync::Mutex<Spent>,
    /// A merge that fails the gates goes back for rework; else (a race,
    /// which falls back to its next-best instance) it is only reported.
    rework_culprits: bool,
}

impl<'a> Queue<'a> {
    pub fn new(
        ctx: &'a Context,
        store: &'a Store<'a>,
        into: &'a FullName,
        checks: Checks<'a>,
        me: &'a Conductor,
    ) -> Result<Queue<'a>> {
        let Checks {
            verify,
            gates,
            timeout,
            pool,
        } = checks;
        Ok(Queue {
            ctx,
            store,
            into,
            // Nothing to verify with: the merged result is what the
            // branch-level checks see.
            verify: if gates.is_empty() {
                Verify::None
            } else {
                verify
            },
            gates,
            timeout,
            pool,
            me,
            repo_top: worktree::main_top(ctx)?,
            lock_wait: crate::run::user_checkout::lock_wait(ctx)?,
            session: merge::Session::default(),
            batches: 0,
            gate_runs: 0,
            spent: std::sync::Mutex::default(),
            rework_culprits: true,
        })
    }

    /// What the checks on merged results reported they cost since the last
    /// call: the run's, not any one order's.
    pub fn take_spent(&self) -> Spent {
        std::mem::take(&mut *self.spent.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A merge that fails the gates is reported ([`Fate::GateFailed`]) and
    /// its record left held by its owner, who decides ([`Queue::reject`]).
    pub fn keeping_culprits(mut self) -> Self {
        self.rework_culprits = false;
        self
    }

    /// What this queue does: [`Verify::None`] when there is no gate to verify with.
    pub fn verify(&self) -> Verify {
        self.verify
    }

    /// Land `entries` (in order) as one chain, reporting each order's fate
    /// as it is known.
    pub fn land(
        &mut self,
        entries: Vec<Entry<'_>>,
        progress: &dyn Progress,
    ) -> Result<Vec<(String, Fate)>> {
        let mut fates = Vec::with_capacity(entries.len());
        let mut known: Known = entries
            .iter()
            .filter_map(|e| e.verified.map(|tree| (tree, true)))
            .collect();
        let mut pending = entries;
        while !pending.is_empty() {
            let tip = self.ctx.branch_tip(self.into)?;
            let (chain, later) = self.chain(tip, pending, &mut fates, progress)?;
            if chain.is_empty() {
                pending = later;
                continue;
            }
            if let Some((_, last)) = chain.last() {
                self.keep(CHAIN_REFS, last.sha)?;
            }
            let links: Vec<(&Request, &Link)> = chain.iter().map(|(e, l)| (&e.req, l)).collect();
            let (runs_before, verifying) = (self.gate_runs, Instant::now());
            let Some(mut decided) = self.decide(&links, &mut known, progress)? else {
                for entry in chain.into_iter().map(|(e, _)| e).chain(later) {
                    fates.push((entry.req.wo.id.clone(), Fate::Interrupted));
                }
                break;
            };
            if self.gate_runs > runs_before {
                let verified = merge::Verified {
                    command: self.gates.join(" && "),
                    wall_ms: u64::try_from(verifying.elapsed().as_millis()).unwrap_or(u64::MAX),
                    log: self.verify_log().display().to_string(),
                };
                for link in &mut decided.links {
                    link.verified = Some(verified.clone());
                }
            }
            let out = self.land_decided(tip, &links, decided, progress)?;
            pending = leave(chain, out, &mut fates).chain(later).collect();
        }
        Ok(fates)
    }

    /// Land what the gates decided about the chain `links` on `tip`: the
    /// fates of the orders that leave the chain, by position. The others
    /// were not landed (the branch moved, a checkout held the landing back):
    /// they are chained again on the new tip and verified again.
    fn land_decided(
        &mut self,
        tip: ObjectId,
        links: &[(&Request, &Link)],
        decided: Decided,
        progress: &dyn Progress,
    ) -> Result<Vec<(usize, Fate)>> {
        let landing: Vec<(&Request, &Link)> = decided
            .lands
            .iter()
            .zip(&decided.links)
            .map(|(&at, link)| (links[at].0, link))
            .collect();
        let landed = merge::land(
            self.ctx,
            self.store,
            self.into,
            tip,
            &landing,
            self.lock_wait,
        )?;
        let mut out: Vec<(usize, Fate)> = Vec::new();
        match landed {
            Landed::Landed { sha } => {
                if !landing.is_empty() {
                    self.batches += 1;
                    let ids: Vec<&str> = landing.iter().map(|(r, _)| r.wo.id.as_str()).collect();
                    report_land(progress, self.batches, sha, &ids);
                }
                if let Some((at, detail)) = decided.culprit {
                    let fate = if self.rework_culprits {
                        self.reject(links[at].0, detail, progress)?
                    } else {
                        Fate::GateFailed { detail }
                    };
                    out.push((at, fate));
                }
                for (&at, link) in decided.lands.iter().zip(&decided.links) {
                    let fate = Fate::Landed {
                        sha: link.sha,
                        batch: self.batches,
                        changed: link.changed.len(),
                    };
                    out.push((at, fate));
                }
            }
            // Someone else's merge came first: the verdicts were on a
            // chain that can no longer land. Chain again, verify again.
            Landed::Moved => {}
            Landed::Withdrawn { index, reason } => {
                out.push((decided.lands[index], Fate::Withdrawn { reason }));
            }
            // The others go on: chained again without these, verified again.
            Landed::Blocked { indexes, why } => {
                let tree = (self.verify == Verify::Merged)
                    .then(|| landing.last().map(|(_, link)| link.tree))
                    .flatten();
                for index in indexes {
                    let fate = self.wait(landing[index].0, tree, &why, progress)?;
                    out.push((decided.lands[index], fate));
                }
            }
        }
        Ok(out)
    }

    /// Chain the merges of `pending` onto `tip`. Orders that cannot be
    /// chained get their fate in `fates`; an order already contained in an
    /// earlier link is left for the next chain (`later`), on the landed tip.
    #[allow(clippy::type_complexity)]
    fn chain<'e>(
        &mut self,
        tip: ObjectId,
        pending: Vec<Entry<'e>>,
        fates: &mut Vec<(String, Fate)>,
        progress: &dyn Progress,
    ) -> Result<(Vec<(Entry<'e>, Link)>, Vec<Entry<'e>>)> {
        let mut chain: Vec<(Entry<'e>, Link)> = Vec::new();
        let mut later = Vec::new();
        for entry in pending {
            let onto = chain.last().map_or(tip, |(_, link)| link.sha);
            let id = entry.req.wo.id.clone();
            progress.phase(&id, Phase::Merge);
            match self.session.link(self.ctx, self.store, onto, &entry.req)? {
                Linked::Merge(link) => chain.push((entry, link)),
                Linked::UpToDate if chain.is_empty() => {
                    let fate = match merge::record_up_to_date(self.store, &entry.req, tip)? {
                        None => Fate::UpToDate,
                        Some(reason) => Fate::Withdrawn { reason },
                    };
                    fates.push((id, fate));
                }
                Linked::UpToDate => later.push(entry),
                Linked::Conflict { paths } => fates.push((
                    id,
                    Fate::Halted {
                        reason: merge::HALT_CONFLICT.into(),
                        paths,
                    },
                )),
                Linked::Drift { paths } => fates.push((
                    id,
                    Fate::Halted {
                        reason: merge::HALT_DRIFT.into(),
                        paths,
                    },
                )),
                Linked::Withdrawn { reason } => fates.push((id, Fate::Withdrawn { reason })),
            }
        }
        Ok((chain, later))
    }

    /// Which links of `links` land, as which merges, and which one broke the
    /// gates: all of them without verification or when the gates pass on
    /// the last; else, bisecting on prefixes, the first link after which
    /// they fail is the culprit.
    /// `None` when a stop interrupted the gates.
    fn decide(
        &mut self,
        links: &[(&Request, &Link)],
        known: &mut Known,
        progress: &dyn Progress,
    ) -> Result<Option<Decided>> {
        let n = links.len();
        let prefix = |len: usize, culprit: Option<(usize, String)>| Decided {
            lands: (0..len).collect(),
            links: links[..len].iter().map(|(_, l)| (*l).clone()).collect(),
            culprit,
        };
        if self.verify == Verify::None {
            return Ok(Some(prefix(n, None)));
        }
        match self.passes(links, known, progress)? {
            None => return Ok(None),
            Some(true) => return Ok(Some(prefix(n, None))),
            Some(false) => {}
        }
        // The empty prefix (the tip) passed when it landed; the whole chain fails.
        let (mut good, mut bad) = (0, n);
        while bad - good > 1 {
            if bad - good == 2 {
                // Two suspects. One more prefix would name the culprit but
                // leave the merges after it to verify again on the new tip;
                // the chain without a suspect, when it passes, names the
                // culprit and lands every other merge at once.
                for suspect in [good + 1, good] {
                    let Some((lands, relinked)) = self.without(links, suspect)? else {
                        continue;
                    };
                    let tried: Vec<(&Request, &Link)> = lands
                        .iter()
                        .zip(&relinked)
                        .map(|(&at, link)| (links[at].0, link))
                        .collect();
                    match self.passes(&tried, known, progress)? {
                        None => return Ok(None),
                        Some(true) => {
                            let detail = format!(
                                "the gates failed on the merged result with the {n} merges and passed without it"
                            );
                            return Ok(Some(Decided {
                                lands,
                                links: relinked,
                                culprit: Some((suspect, detail)),
                            }));
                        }
                        Some(false) => {}
                    }
                }
                // Both failed: more than one culprit; the first, by prefix.
            }
            let mid = good + (bad - good) / 2;
            match self.passes(&links[..mid], known, progress)? {
                None => return Ok(None),
                Some(true) => good = mid,
                Some(false) => bad = mid,
            }
        }
        let detail = format!(
            "the gates passed on the merged result with the {good} merge(s) before it and failed once it was merged"
        );
        Ok(Some(prefix(good, Some((good, detail)))))
    }

    /// The chain `links` without the link at `skip`: the links before it,
    /// and those after it merged again onto them. `None` when one of those
    /// would not merge cleanly there.
    fn without(
        &mut self,
        links: &[(&Request, &Link)],
        skip: usize,
    ) -> Result<Option<(Vec<usize>, Vec<Link>)>> {
        let mut lands: Vec<usize> = (0..skip).collect();
        let mut relinked: Vec<Link> = links[..skip].iter().map(|(_, l)| (*l).clone()).collect();
        for (at, (req, _)) in links.iter().enumerate().skip(skip + 1) {
            let onto = relinked.last().map_or(links[0].1.onto, |l| l.sha);
            let Some(link) = self.session.relink(self.ctx, onto, req)? else {
                return Ok(None);
            };
            lands.push(at);
            relinked.push(link);
        }
        if let Some(last) = relinked.last() {
            self.keep(RELINKED_REFS, last.sha)?;
        }
        Ok(Some((lands, relinked)))
    }

    /// Keep the merge `sha` (a chain's tip, not landed yet) reachable from
    /// this conductor's ref under `prefix` until the next chain: what no
    /// ref reaches, a `git gc` and then a `git repack -a -d` beside us may
    /// drop, and the chain would land on a missing commit.
    fn keep(&self, prefix: &str, sha: ObjectId) -> Result<()> {
        let name = format!("{prefix}{}", self.me.name);
        let repo = &self.ctx.repo;
        crate::git::refguard::edit(repo, &name, || {
            repo.reference(
                name.as_str(),
                sha,
                gix::refs::transaction::PreviousValue::Any,
                "arbiter: keep a merge chain until it lands",
            )
        })
        .map_err(|source| Error::KeepChain {
            commit: sha,
            name: name.clone(),
            source,
        })?;
        Ok(())
    }

    /// Whether the gates pass on the tip of `links`. A tree already
    /// verified in this landing is not verified again: the chain after a
    /// culprit is often the very chain a bisection step already tried.
    fn passes(
        &mut self,
        links: &[(&Request, &Link)],
        known: &mut Known,
        progress: &dyn Progress,
    ) -> Result<Option<bool>> {
        let tree = links[links.len() - 1].1.tree;
        if let Some(&passed) = known.get(&tree) {
            return Ok(Some(passed));
        }
        let result = self.gates_pass(links, progress)?;
        if let Some(passed) = result {
            known.insert(tree, passed);
        }
        Ok(result)
    }

    /// Run every gate on the tip of `links`. `None`: interrupted.
    fn gates_pass(
        &mut self,
        links: &[(&Request, &Link)],
        progress: &dyn Progress,
    ) -> Result<Option<bool>> {
        let at = links[links.len() - 1].1.sha;
        let ids: Vec<&str> = links.iter().map(|(r, _)| r.wo.id.as_str()).collect();
        self.gate_runs += 1;
        let verification = self.start_verification(at, &ids)?;
        let result = self.run_checks(&verification)?;
        crate::run::pool::give_back(self.ctx, &verification.name, &verification.branch, false)?;
        progress.event(&Event::Verify {
            tip: at,
            orders: ids.iter().map(|id| (*id).to_owned()).collect(),
            passed: result,
            gate_runs: self.gate_runs,
        });
        Ok(result)
    }

    /// Take a worktree at the merged commit `at` (of the orders `ids`) for
    /// this conductor's verification: a pooled one (when the pool is on),
    /// so that gates that build find their caches warm, prepared by the
    /// setup hook as for a build. Its log says what is verified.
    fn start_verification(&self, at: ObjectId, ids: &[&str]) -> Result<Verification> {
        let name = format!("{VERIFY_PREFIX}{}", self.me.name);
        let branch = worktree::verify_branch(&self.me.name);
        let taken = crate::run::pool::take(self.ctx, self.pool, &name, &branch, at)?;
        let path = taken.path;
        crate::sys::crash::point("verify.started");
        let log = self.verify_log();
        if let Some(cleaned) = taken.cleaned.cleaned_report() {
            exec::note(&log, &cleaned);
        }
        exec::note(
            &log,
            &format!(
                "verify {} (orders {}) started {} UTC",
                at,
                ids.join(","),
                crate::sys::clock::format_time(crate::sys::clock::now())
            ),
        );
        let env = vec![
            ("ARBITER_BASE".to_string(), at.to_string()),
            ("ARBITER_ROUND_BASE".to_string(), at.to_string()),
            ("ARBITER_VERIFY_ORDERS".to_string(), ids.join(",")),
            ("ARBITER_WORKTREE".to_string(), path.display().to_string()),
            (
                "ARBITER_REPO".to_string(),
                self.repo_top.display().to_string(),
            ),
        ];
        Ok(Verification {
            at,
            name,
            branch,
            path,
            env,
            log,
        })
    }

    /// The setup, as before a build: only when its inputs changed since it
    /// last ran there. Failing on the merged result, it fails the
    /// verification (an order changed what it installs). Then every gate,
    /// until one fails. `None`: interrupted.
    fn run_checks(&self, verification: &Verification) -> Result<Option<bool>> {
        let (path, at) = (&verification.path, verification.at);
        let mut result = Some(true);
        if let Some(cmd) = self.pool.setup.as_deref() {
            // An unreadable record of the last setup only costs a setup run.
            if crate::run::pool::setup_needed(&self.ctx.caches, path, at, &self.pool.setup_inputs)
                .unwrap_or(true)
            {
                result = self.run_check(verification, "setup", cmd, 1)?;
                if result == Some(true) {
                    // Unrecorded, it only costs a setup run next time.
                    let _ = crate::run::pool::setup_done(&self.ctx.caches, path, at);
                }
            }
        }
        for (i, cmd) in self.gates.iter().enumerate() {
            if result != Some(true) {
                break;
            }
            result = self.run_check(verification, "gate", cmd, i + 2)?;
        }
        Ok(result)
    }

    /// Run the setup or a gate (`kind`) `cmd`, the verification's `seq`th
    /// command, on the merged result: whether it passed, `None` when a stop
    /// interrupted it. A command that could not run at all (or a setup that
    /// wrote tracked files, which changes what is verified) is an error, the
    /// worktree given back first.
    fn run_check(
        &self,
        verification: &Verification,
        kind: &'static str,
        cmd: &str,
        seq: usize,
    ) -> Result<Option<bool>> {
        let Verification { path, env, log, .. } = verification;
        let stop = || self.me.should_stop();
        // As for a build: a gate that reports its cost does so here too.
        let report = crate::run::builder::report_path(log, seq, kind);
        if let Err(e) = std::fs::remove_file(&report) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(Error::RunCheck {
                    kind,
                    command: cmd.to_owned(),
                    source: e,
                }
                .into());
            }
        }
        let mut env = env.clone();
        env.push(("ARBITER_REPORT".into(), report.display().to_string()));
        let exit = exec::run(
            &exec::Spec {
                command: cmd,
                cwd: path,
                env: &env,
                log,
                kind: Some(if kind == "setup" {
                    "verify setup"
                } else {
                    "verify gate"
                }),
                stdout_to: None,
                timeout: self.timeout,
                groups: Some(&self.me.groups_dir()),
                caches: &self.ctx.caches,
            },
            &stop,
        )
        .map_err(|source| Error::RunCheck {
            kind,
            command: cmd.to_owned(),
            source,
        })?;
        match crate::run::builder::read_report(&report) {
            Ok(Some(report)) => self
                .spent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .add_report(&report),
            Ok(None) => {}
            Err(why) => exec::note(
                log,
                &format!(
                    "warning: the verify {kind} command's report {} is ignored: {why}",
                    report.display()
                ),
            ),
        }
        if exit == Exit::Interrupted {
            return Ok(None);
        }
        let mut failed = NotRunnable::of(&exit, "verify", kind, cmd, path, log);
        if failed.is_none() && kind == "setup" && exit.success() {
            // A setup that writes tracked files changes what is verified.
            let wt = crate::run::worktree::open_linked(&self.ctx.caches, &self.ctx.repo, path)?;
            failed = NotRunnable::of_setup(&self.ctx.caches, &wt, "verify", cmd, path, log)?;
        }
        if let Some(failed) = failed {
            crate::run::pool::give_back(self.ctx, &verification.name, &verification.branch, false)?;
            return Err(crate::run::builder::not_runnable_error(&failed, &self.repo_top).into());
        }
        Ok(Some(exit.success()))
    }

    /// A checkout of the branch cannot follow the landing of `req` now
    /// (`why`): its order is `verified`, waiting to land, with the merged
    /// tree its gates passed on (`tree`, when they ran).
    fn wait(
        &self,
        req: &Request,
        tree: Option<ObjectId>,
        why: &crate::run::user_checkout::Blocked,
        progress: &dyn Progress,
    ) -> Result<Fate> {
        let id = req.wo.id.as_str();
        let detail = why.describe();
        let held = self.store.update_held(
            &format!("{} {id}", crate::state::WAITING_EVENT),
            id,
            req.owner,
            req.attempt,
            |r| {
                if r.landing.is_none() {
                    r.queue_to_land(req.source.to_string());
                }
                r.wait_to_land(tree.map(|t| t.to_string()), detail.clone());
            },
        )?;
        if !held {
            return Ok(Fate::Withdrawn {
                reason: "no longer held by this conductor".into(),
            });
        }
        progress.event(&Event::Waiting {
            wo: id.to_owned(),
            why: detail.clone(),
        });
        Ok(Fate::Waiting {
            why: detail,
            hint: why.hint(),
        })
    }

    /// Where this conductor's gate runs on merged results write.
    fn verify_log(&self) -> std::path::PathBuf {
        crate::git::layout::run_log(
            &self.ctx.repo,
            &format!("{VERIFY_PREFIX}{}.log", self.me.name),
        )
    }

    /// The order whose merge broke the gates goes back for rework: its
    /// attempt is spent, as a failed gate's would be.
    pub fn reject(&self, req: &Request, detail: String, progress: &dyn Progress) -> Result<Fate> {
        let id = req.wo.id.as_str();
        let verify_log = self.verify_log();
        let held = self.store.update_held(
            &format!("{MERGED_GATE_FAILED} {id}"),
            id,
            req.owner,
            req.attempt,
            |r| {
                r.verdicts.push(Verdict {
                    kind: "verify".into(),
                    command: self.gates.join(" && "),
                    passed: false,
                    exit_code: None,
                    wall_ms: None,
                    log: Some(verify_log.display().to_string()),
                    report: None,
                    detail: Some(detail.clone()),
                });
                r.release();
                r.log(MERGED_GATE_FAILED, Some(detail.clone()));
            },
        )?;
        if !held {
            return Ok(Fate::Withdrawn {
                reason: "no longer held by this conductor".into(),
            });
        }
        progress.event(&Event::Rejected {
            wo: id.to_owned(),
            reason: MERGED_GATE_FAILED.into(),
        });
        Ok(Fate::GateFailed { detail })
    }
}

/// The orders of `chain` that left it (`out`, their fates by position)
/// get their fate in `fates`, in chain order; the rest stay, in order, to be
/// chained again.
fn leave<'e>(
    chain: Vec<(Entry<'e>, Link)>,
    mut out: Vec<(usize, Fate)>,
    fates: &mut Vec<(String, Fate)>,
) -> std::vec::IntoIter<Entry<'e>> {
    out.sort_by_key(|(at, _)| *at);
    let mut out = out.into_iter().peekable();
    let mut rest = Vec::new();
    for (at, (entry, _)) in chain.into_iter().enumerate() {
        match out.next_if(|(o, _)| *o == at) {
            Some((_, fate)) => fates.push((entry.req.wo.id.clone(), fate)),
            None => rest.push(entry),
        }
    }
    rest.into_iter()
}

fn report_land(progress: &dyn Progress, batch: usize, sha: ObjectId, ids: &[&str]) {
    progress.event(&Event::Land {
        batch,
        sha,
        orders: ids.iter().map(|id| (*id).to_owned()).collect(),
    });
}

/// Remove the verification worktrees of conductors that are gone (killed
/// while verifying). Returns one report line each.
pub fn remove_dead_verifiers(ctx: &Context) -> Result<Vec<String>> {
    let locks = verify_branch_locks(ctx);
    let mut report = Vec::new();
    for name in verifier_names(ctx, &locks)? {
        let Some(conductor) = name.strip_prefix(VERIFY_PREFIX) else {
            continue;
        };
        if conductor::is_live(ctx, conductor) {
            continue;
        }
        // Only that conductor edits its branch: a lock on it is its own.
        let lock = locks.join(format!("{conductor}.lock"));
        if lock.exists() {
            std::fs::remove_file(&lock).map_err(|source| Error::RemoveLock {
                path: lock.clone(),
                source,
            })?;
        }
        worktree::remove(ctx, &name, &worktree::verify_branch(conductor))?;
        report.push(format!(
            "removed the verification worktree {name} of conductor {conductor}, which is gone"
        ));
    }
    drop_dead_chain_refs(ctx)?;
    Ok(report)
}

/// Where the locks of the verification branches are (one folder of the
/// common directory).
fn verify_branch_locks(ctx: &Context) -> PathBuf {
    ctx.repo
        .common_dir()
        .join(worktree::VERIFY_BRANCH_PREFIX.trim_end_matches('/'))
}

/// The names of every verification worktree there may be: those listed,
/// and what a killed `add` may have left unlisted (a registration without
/// `gitdir`, a folder, a branch, or only the lock of a branch in `locks`).
/// Other worktrees' names are among them too: the caller skips them.
fn verifier_names(
    ctx: &Context,
    locks: &std::path::Path,
) -> Result<std::collections::BTreeSet<String>> {
    let mut names: std::collections::BTreeSet<String> = worktree::list(ctx)?
        .into_iter()
        .map(|info| info.name)
        .collect();
    for dir in [
        ctx.repo.common_dir().join("worktrees"),
        worktree::root_dir(ctx)?,
    ] {
        if let Ok(listing) = std::fs::read_dir(&dir) {
            names.extend(
                listing
                    .flatten()
                    .filter_map(|e| e.file_name().into_string().ok()),
            );
        }
    }
    let branches = ctx
        .repo
        .references()
        .map_err(|source| Error::ListRefs { source })?
        .prefixed(worktree::VERIFY_BRANCH_PREFIX)
        .map_err(|source| Error::ListVerifyBranches { source })?
        .filter_map(|r| crate::git::refguard::listed(&ctx.repo, r).ok().flatten())
        .filter_map(|r| {
            let full = r.name().as_bstr().to_string();
            full.strip_prefix(worktree::VERIFY_BRANCH_PREFIX)
                .map(|c| format!("{VERIFY_PREFIX}{c}"))
        })
        .collect::<Vec<_>>();
    names.extend(branches);
    // A branch lock with no branch: the add was killed creating it.
    if let Ok(listing) = std::fs::read_dir(locks) {
        names.extend(listing.flatten().filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some(format!("{VERIFY_PREFIX}{}", name.strip_suffix(".lock")?))
        }));
    }
    Ok(names)
}

/// The refs that kept dead conductors' chains until they landed, and the
/// locks a conductor killed while writing one left on them (only that
/// conductor writes its ref), go.
fn drop_dead_chain_refs(ctx: &Context) -> Result<()> {
    for prefix in [CHAIN_REFS, RELINKED_REFS] {
        let folder = ctx.repo.common_dir().join(prefix);
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(conductor) = name.strip_suffix(".lock") {
                if !conductor::is_live(ctx, conductor) {
                    std::fs::remove_file(entry.path()).map_err(|source| Error::RemoveLock {
                        path: entry.path(),
                        source,
                    })?;
                }
            }
        }
        let refs = ctx
            .repo
            .references()
            .map_err(|source| Error::ListRefs { source })?;
        let dead: Vec<String> = refs
            .prefixed(prefix)
            .map_err(|source| Error::ListChainRefs { source })?
            .filter_map(|r| crate::git::refguard::listed(&ctx.repo, r).ok().flatten())
            .map(|r| r.name().as_bstr().to_string())
            .filter(|name| {
                name.strip_prefix(prefix)
                    .is_some_and(|c| !conductor::is_live(ctx, c))
            })
            .collect();
        for name in dead {
            drop_ref(&ctx.repo, &name)?;
        }
    }
    Ok(())
}

/// Delete the ref `name`, whatever it points at.
fn drop_ref(repo: &gix::Repository, name: &str) -> Result<()> {
    crate::git::refguard::delete(repo, name, None).map_err(|source| {
        Error::DeleteRef {
            name: name.to_owned(),
            source,
        }
        .into()
    })
}

impl Drop for Queue<'_> {
    /// What this conductor kept is on the branch, or waits to be merged
    /// again: its refs go.
    fn drop(&mut self) {
        for prefix in [CHAIN_REFS, RELINKED_REFS] {
            let name = format!("{prefix}{}", self.me.name);
            if self
                .ctx
                .repo
                .try_find_reference(name.as_str())
                .ok()
                .flatten()
                .is_some()
            {
                let _ = drop_ref(&self.ctx.repo, &name);
            }
        }
    }
}

/// An `InputError` for a bad `--verify` / `arbiter.verify`.
pub fn bad_verify(what: &str, why: String) -> crate::sys::error::Error {
    InputError::new(format!("{what}: {why}"))
        .hint("use 'merged' (gates run on the merged result before it lands) or 'none'")
        .into()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::run::drift::DriftScope;
    use crate::state::orders::WorkOrder;
    use crate::state::Status;
    use crate::testutil::{git, rev, work_order, TestRepo};

    /// The events a queue reported.
    #[derive(Default)]
    struct Seen(Mutex<Vec<Event>>);

    impl Progress for Seen {
        fn event(&self, event: &Event) {
            self.0.lock().expect("lock").push(event.clone());
        }
        fn phase(&self, _: &str, _: Phase) {}
        fn finished(&self, _: &str) {}
    }

    impl Seen {
        fn count(&self, what: fn(&Event) -> bool) -> usize {
            self.0
                .lock()
                .expect("lock")
                .iter()
                .filter(|e| what(e))
                .count()
        }
    }

    /// A repository and a conductor whose queue lands there.
    struct Fixture {
        repo: TestRepo,
        me: Conductor,
        /// Each order and the tip of its work, in the order they queue.
        orders: Vec<(WorkOrder, ObjectId)>,
    }

    impl Fixture {
        fn new() -> Fixture {
            let repo = TestRepo::new();
            let me = Conductor::register(&repo.ctx).expect("register");
            Fixture {
                repo,
                me,
                orders: Vec::new(),
            }
        }

        /// Order `id`, declaring `declared`, whose work writes `files`,
        /// passed and held by this conductor: it queues next.
        fn order(&mut self, id: &str, declared: &[&str], files: &[(&str, &str)]) {
            let source = self.repo.work(id, files);
            self.repo.dispatch(id, &self.me.name);
            self.orders.push((work_order(id, declared), source));
        }

        /// Land the orders as one queue with `gates` (none: unverified);
        /// each entry says its merged tree `verified` already. Each
        /// order's fate, the queue's landings and gate runs, and its events.
        fn land(
            &self,
            gates: &[&str],
            verified: Option<ObjectId>,
        ) -> (BTreeMap<String, Fate>, (usize, usize), Seen) {
            let gates: Vec<String> = gates.iter().map(|g| (*g).to_owned()).collect();
            let pool = crate::run::pool::Options::default();
            let store = self.repo.store();
            let checks = Checks {
                verify: Verify::Merged,
                gates: &gates,
                timeout: None,
                pool: &pool,
            };
            let mut queue = Queue::new(&self.repo.ctx, &store, &self.repo.main, checks, &self.me)
                .expect("queue");
            let entries = self
                .orders
                .iter()
                .map(|(wo, source)| Entry {
                    req: Request {
                        wo,
                        into: &self.repo.main,
                        source: *source,
                        attempt: 1,
                        round_base: None,
                        scope: DriftScope::Own,
                        extra_note: None,
                        owner: &self.me.name,
                    },
                    entered: Instant::now(),
                    verified,
                })
                .collect();
            let seen = Seen::default();
            let fates = queue.land(entries, &seen).expect("land");
            let counts = (queue.batches, queue.gate_runs);
            (fates.into_iter().collect(), counts, seen)
        }

        /// The merge that landed order `id`.
        fn landed(fates: &BTreeMap<String, Fate>, id: &str) -> ObjectId {
            match &fates[id] {
                Fate::Landed { sha, .. } => *sha,
                other => panic!("{id} did not land: {other:?}"),
            }
        }

        fn parent(&self, sha: ObjectId) -> ObjectId {
            rev(&self.repo.root, &self.repo.dir, &format!("{sha}^1"))
        }

        fn status(&self, id: &str) -> Status {
            self.repo.record(id).expect("a record").status
        }
    }

    /// Ready orders land as one chain on the branch's tip, each its own
    /// merge onto the one before, in one landing, without gates.
    #[test]
    fn ready_orders_land_as_one_chain_on_the_tip() {
        let mut f = Fixture::new();
        let tip = f.repo.on_main(&[("a.txt", "moved on\n")]);
        f.order("wo-1", &["c.txt"], &[("c.txt", "1\n")]);
        f.order("wo-2", &["d.txt"], &[("d.txt", "2\n")]);
        f.order("wo-3", &["e.txt"], &[("e.txt", "3\n")]);
        let (fates, counts, seen) = f.land(&[], None);
        assert_eq!(counts, (1, 0), "one landing, no gate run");
        let shas: Vec<ObjectId> = ["wo-1", "wo-2", "wo-3"]
            .iter()
            .map(|id| Fixture::landed(&fates, id))
            .collect();
        assert_eq!(f.parent(shas[0]), tip);
        assert_eq!(f.parent(shas[1]), shas[0]);
        assert_eq!(f.parent(shas[2]), shas[1]);
        assert_eq!(f.repo.tip(), shas[2]);
        for (id, fate) in &fates {
            assert!(
                matches!(
                    fate,
                    Fate::Landed {
                        batch: 1,
                        changed: 1,
                        ..
                    }
                ),
                "{id}"
            );
            assert_eq!(f.status(id), Status::Done, "{id}");
        }
        assert_eq!(seen.count(|e| matches!(e, Event::Land { .. })), 1);
        let files = git(
            &f.repo.root,
            &f.repo.dir,
            &["ls-tree", "--name-only", "main"],
        );
        assert_eq!(files, "a.txt\nb.txt\nc.txt\nd.txt\ne.txt\n");
    }

    /// Each order is checked on its own: one that drifts and one that
    /// conflicts with an earlier link leave the chain; one halted by hand
    /// meanwhile is withdrawn when the chain would land, and the others
    /// are chained again without it and land.
    #[test]
    fn drift_and_conflicts_halt_each_order_alone() {
        let mut f = Fixture::new();
        let tip = f.repo.tip();
        f.order("wo-1", &["c.txt"], &[("c.txt", "1\n")]);
        f.order(
            "wo-2",
            &["d.txt"],
            &[("d.txt", "2\n"), ("x.txt", "drift\n")],
        );
        f.order("wo-3", &["c.txt"], &[("c.txt", "3\n")]);
        f.order("wo-4", &["e.txt"], &[("e.txt", "4\n")]);
        f.order("wo-5", &["f.txt"], &[("f.txt", "5\n")]);
        f.repo.change("wo-5", |r| r.halt("by_hand", Vec::new()));
        let (fates, counts, _) = f.land(&[], None);
        assert_eq!(counts, (1, 0));
        let halted = |reason: &str, path: &str| Fate::Halted {
            reason: reason.into(),
            paths: vec![path.into()],
        };
        assert_eq!(fates["wo-2"], halted(merge::HALT_DRIFT, "x.txt"));
        assert_eq!(fates["wo-3"], halted(merge::HALT_CONFLICT, "c.txt"));
        let withdrawn = Fate::Withdrawn {
            reason: "halted while in flight (by_hand)".into(),
        };
        assert_eq!(fates["wo-5"], withdrawn);
        let (one, four) = (
            Fixture::landed(&fates, "wo-1"),
            Fixture::landed(&fates, "wo-4"),
        );
        assert_eq!((f.parent(one), f.parent(four)), (tip, one));
        assert_eq!(f.repo.tip(), four);
        let record = f.repo.record("wo-2").expect("record");
        assert_eq!(record.halt_reason.as_deref(), Some(merge::HALT_DRIFT));
    }

    /// Work already on the branch is up to date: done, no merge.
    #[test]
    fn work_already_on_the_branch_is_up_to_date() {
        let mut f = Fixture::new();
        f.order("wo-1", &[], &[("c.txt", "1\n")]);
        git(
            &f.repo.root,
            &f.repo.dir,
            &["merge", "-q", "--ff-only", "arbiter/wo-1"],
        );
        let tip = f.repo.tip();
        let (fates, counts, _) = f.land(&[], None);
        assert_eq!(fates["wo-1"], Fate::UpToDate);
        assert_eq!(counts, (0, 0));
        assert_eq!(f.repo.tip(), tip);
        assert_eq!(f.status("wo-1"), Status::Done);
    }

    /// The gates fail on the chain: bisection finds the merge that breaks
    /// them (the prefix before it passes; the chain without it passes),
    /// which goes back for rework, and every other merge lands at once,
    /// the one after it merged again without it.
    #[test]
    fn the_merge_that_breaks_the_gates_is_found_and_the_others_land() {
        let mut f = Fixture::new();
        let tip = f.repo.tip();
        f.order("wo-1", &["c.txt"], &[("c.txt", "1\n")]);
        f.order("wo-2", &["bad.txt"], &[("bad.txt", "breaks the gate\n")]);
        f.order("wo-3", &["e.txt"], &[("e.txt", "3\n")]);
        let (fates, counts, seen) = f.land(&["test ! -e bad.txt"], None);
        // The whole chain, the prefix [wo-1], the chain without wo-3, the
        // chain without wo-2.
        assert_eq!(counts, (1, 4));
        assert_eq!(seen.count(|e| matches!(e, Event::Verify { .. })), 4);
        match &fates["wo-2"] {
            Fate::GateFailed { detail } => {
                assert!(detail.contains("passed without it"), "{detail}")
            }
            other => panic!("wo-2 was not found: {other:?}"),
        }
        let (one, three) = (
            Fixture::landed(&fates, "wo-1"),
            Fixture::landed(&fates, "wo-3"),
        );
        assert_eq!((f.parent(one), f.parent(three)), (tip, one));
        assert_eq!(f.repo.tip(), three);
        assert!(!f.repo.dir.join("bad.txt").exists());
        let record = f.repo.record("wo-2").expect("record");
        assert_eq!(record.status, Status::NeedsRework);
        assert_eq!(
            record.history.last().map(|e| e.event.as_str()),
            Some(MERGED_GATE_FAILED)
        );
        assert!(record
            .verdicts
            .iter()
            .any(|v| v.kind == "verify" && !v.passed));
    }

    /// The first of two merges breaks the gates: the prefix before it (the
    /// tip) passed, the chain without it passes, the other lands.
    #[test]
    fn a_first_merge_that_breaks_the_gates_is_found() {
        let mut f = Fixture::new();
        let tip = f.repo.tip();
        f.order("wo-1", &["bad.txt"], &[("bad.txt", "breaks the gate\n")]);
        f.order("wo-2", &["e.txt"], &[("e.txt", "2\n")]);
        let (fates, counts, _) = f.land(&["test ! -e bad.txt"], None);
        assert!(matches!(fates["wo-1"], Fate::GateFailed { .. }));
        let two = Fixture::landed(&fates, "wo-2");
        assert_eq!(f.parent(two), tip);
        // The whole chain, without wo-2 (fails), without wo-1 (passes).
        assert_eq!(counts, (1, 3));
    }

    /// A merged tree the gates already passed on is not verified again.
    #[test]
    fn a_tree_already_verified_lands_without_a_gate_run() {
        let mut f = Fixture::new();
        f.order("wo-1", &["c.txt"], &[("c.txt", "1\n")]);
        let merged = git(
            &f.repo.root,
            &f.repo.dir,
            &["merge-tree", "--write-tree", "main", "arbiter/wo-1"],
        );
        let tree = ObjectId::from_hex(merged.trim().as_bytes()).expect("tree");
        let (fates, counts, _) = f.land(&["false"], Some(tree));
        Fixture::landed(&fates, "wo-1");
        assert_eq!(counts, (1, 0));
    }

    /// Someone else's merge lands while the gates run: the chain is merged
    /// again on the new tip and verified again before it lands there.
    #[test]
    fn a_branch_moved_while_verifying_is_chained_and_verified_again() {
        let mut f = Fixture::new();
        f.order("wo-1", &["c.txt"], &[("c.txt", "1\n")]);
        // Once: a commit on `main` (in its checkout) that changes the merged tree.
        let (root, dir) = (f.repo.root.display(), f.repo.dir.display());
        let hermetic = format!(
            "env -i PATH=\"$PATH\" HOME={root} GIT_CONFIG_NOSYSTEM=1 \
             GIT_CONFIG_GLOBAL={root}/global.gitconfig \
             git -C {dir} -c user.name=t -c user.email=t@t"
        );
        let gate = format!(
            "if [ ! -e {dir}/moved.txt ]; then echo moved > {dir}/moved.txt && \
             {hermetic} add moved.txt && {hermetic} commit -q -m moved; fi"
        );
        let (fates, counts, _) = f.land(&[&gate], None);
        assert_eq!(counts, (1, 2), "verified on each tip");
        let one = Fixture::landed(&fates, "wo-1");
        let moved = f.parent(one);
        let subject = git(
            &f.repo.root,
            &f.repo.dir,
            &["log", "-1", "--format=%s", &moved.to_string()],
        );
        assert_eq!(subject, "moved\n");
        assert_eq!(f.repo.tip(), one);
    }

    /// A stop while the gates run: nothing lands, every order is given back
    /// as interrupted, still held.
    #[test]
    fn a_stop_while_verifying_lands_nothing() {
        let mut f = Fixture::new();
        let tip = f.repo.tip();
        f.order("wo-1", &["c.txt"], &[("c.txt", "1\n")]);
        f.order("wo-2", &["d.txt"], &[("d.txt", "2\n")]);
        let stop = conductor::dir(&f.repo.ctx).join(format!("{}.stop", f.me.name));
        std::fs::write(&stop, "").expect("stop");
        let (fates, counts, _) = f.land(&["sleep 30"], None);
        assert_eq!(fates["wo-1"], Fate::Interrupted);
        assert_eq!(fates["wo-2"], Fate::Interrupted);
        assert_eq!(counts, (0, 1));
        assert_eq!(f.repo.tip(), tip);
        assert!(f
            .repo
            .record("wo-1")
            .expect("record")
            .held_by(&f.me.name, 1));
    }

    /// A change of the user's in the way of one order's merge: that order
    /// waits to land (`verified`, its work kept), the others land.
    #[test]
    fn an_order_a_checkout_cannot_take_waits_and_the_others_land() {
        let mut f = Fixture::new();
        let tip = f.repo.tip();
        f.order("wo-1", &["b.txt"], &[("b.txt", "the work\n")]);
        f.order("wo-2", &["d.txt"], &[("d.txt", "2\n")]);
        std::fs::write(f.repo.dir.join("b.txt"), "the user's\n").expect("edit");
        let (fates, _, seen) = f.land(&[], None);
        match &fates["wo-1"] {
            Fate::Waiting { why, .. } => assert!(why.contains("b.txt"), "{why}"),
            other => panic!("wo-1 does not wait: {other:?}"),
        }
        let two = Fixture::landed(&fates, "wo-2");
        assert_eq!(f.parent(two), tip);
        let record = f.repo.record("wo-1").expect("record");
        assert_eq!(
            (record.status, record.owner.as_deref()),
            (Status::Verified, None)
        );
        assert!(record.waits_to_land());
        assert_eq!(seen.count(|e| matches!(e, Event::Waiting { .. })), 1);
    }

    /// What a dead conductor's queue left (its verification worktree and
    /// branch, the refs keeping its chains, their locks, its branch's lock)
    /// goes; a live conductor's stays.
    #[test]
    fn a_dead_conductors_verification_leftovers_go() {
        let f = Fixture::new();
        let (root, dir, ctx) = (&f.repo.root, &f.repo.dir, &f.repo.ctx);
        let dead = "1-1";
        let base = f.repo.base.to_string();
        let verify_dir = worktree::root_dir(ctx)
            .expect("root")
            .join(format!("{VERIFY_PREFIX}{dead}"));
        let verify_dir = verify_dir.display().to_string();
        let branch = worktree::verify_branch(dead);
        git(
            root,
            dir,
            &["worktree", "add", "-q", "-b", &branch, &verify_dir, &base],
        );
        // A branch a killed `add` left without its worktree, and an empty
        // folder (with anything in it, it may be a person's: it stays).
        let branch = worktree::verify_branch("4-4");
        git(root, dir, &["branch", &branch, &base]);
        let folder = worktree::root_dir(ctx)
            .expect("root")
            .join(format!("{VERIFY_PREFIX}5-5"));
        std::fs::create_dir_all(&folder).expect("mkdir");
        for prefix in [CHAIN_REFS, RELINKED_REFS] {
            for who in [dead, f.me.name.as_str()] {
                git(root, dir, &["update-ref", &format!("{prefix}{who}"), &base]);
            }
        }
        let common = ctx.repo.common_dir().to_owned();
        let chain_lock = common.join(format!("{CHAIN_REFS}2-2.lock"));
        let branch_lock = common.join(worktree::VERIFY_BRANCH_PREFIX).join("3-3.lock");
        for lock in [&chain_lock, &branch_lock] {
            std::fs::create_dir_all(lock.parent().expect("parent")).expect("mkdir");
            std::fs::write(lock, "").expect("lock");
        }
        let report = remove_dead_verifiers(ctx).expect("remove");
        assert_eq!(report.len(), 4, "{report:?}");
        for (line, who) in report.iter().zip([dead, "3-3", "4-4", "5-5"]) {
            assert!(line.contains(&format!("{VERIFY_PREFIX}{who} ")), "{line}");
        }
        assert!(!std::path::Path::new(&verify_dir).exists() && !folder.exists());
        assert!(!chain_lock.exists() && !branch_lock.exists());
        let refs = git(root, dir, &["for-each-ref", "--format=%(refname)"]);
        let me = &f.me.name;
        assert_eq!(
            refs,
            format!("{CHAIN_REFS}{me}\n{RELINKED_REFS}{me}\nrefs/heads/main\n")
        );
    }

    #[test]
    fn verify_is_merged_when_a_gate_is_configured() {
        assert_eq!(Verify::parse(None, true), Ok(Verify::Merged));
        assert_eq!(Verify::parse(None, false), Ok(Verify::None));
        assert_eq!(Verify::parse(Some("none"), true), Ok(Verify::None));
        assert_eq!(Verify::parse(Some("merged"), false), Ok(Verify::Merged));
        assert!(Verify::parse(Some("always"), true).is_err());
    }
}

//! Reviewing work after the fact: which work orders the state knows, and the
//! evidence `show` presents for one of them.

use std::collections::BTreeMap;

use gix::ObjectId;
use serde::Serialize;

use crate::git::diff::Kind;
use crate::run::worktree::branch_of;
use crate::state::context::Context;
use crate::state::cost::Spent;
use crate::state::orders::Orders;
use crate::state::{PastAttempt, Record, Snapshot, Status};
use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the merge {merge}: {source}")]
    ReadMerge {
        merge: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading {branch}: {source}")]
    ReadBranch {
        branch: String,
        #[source]
        source: gix::Error,
    },
    #[error("resolving {branch}: {source}")]
    ResolveBranch {
        branch: String,
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
    #[error("running git diff: {source}")]
    RunDiff {
        #[source]
        source: std::io::Error,
    },
    /// git diff ran and failed: what it said, then how it exited.
    #[error("git diff {from}..{to}: {stderr}: {status}")]
    Diff {
        from: String,
        to: String,
        stderr: String,
        status: std::process::ExitStatus,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Every work order id the state or the orders directory knows, sorted.
/// The state alone suffices: records written by git-arbiter keep a key
/// under `wo-keys/`, so history stays readable after the orders are gone.
pub fn known_ids(snapshot: &Snapshot<'_>, orders: Option<&Orders>) -> Result<Vec<String>> {
    let mut ids = snapshot.ids()?;
    ids.extend(
        orders
            .into_iter()
            .flat_map(|o| o.iter().map(|w| w.id.clone())),
    );
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// The orders, when they load. Reviewing reads the state, so a missing or
/// broken orders directory must not hide it (`lint` reports those).
pub fn orders_if_any(ctx: &Context, flag: Option<&std::path::Path>) -> Option<Orders> {
    ctx.load_orders(flag).ok()
}

/// `id` names no work order among `known`: exit 2, with the closest ids
/// and where the ids are listed.
pub fn unknown_order<'a>(id: &str, known: impl IntoIterator<Item = &'a str>) -> InputError {
    let near = crate::state::orders::closest_ids(id, known);
    let listed =
        "'git arbiter status' lists the work orders; 'git arbiter log' shows every order's events";
    InputError::new(format!(
        "unknown work order '{id}': it has no file in the orders directory and no record in {}",
        crate::state::NOTES_REF
    ))
    .hint(match near.as_slice() {
        [] => listed.to_owned(),
        [one] => format!("did you mean '{one}'? {listed}"),
        many => format!(
            "did you mean one of {}? {listed}",
            many.iter()
                .map(|id| format!("'{id}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// The id `arg` names among the orders and records known (see
/// [`crate::state::orders::resolve_id`]); an unknown one is [`unknown_order`].
pub fn resolve_order(ctx: &Context, orders: Option<&Orders>, arg: &str) -> Result<String> {
    let snapshot = Snapshot::read(&ctx.repo)?;
    let known = known_ids(&snapshot, orders)?;
    crate::state::orders::resolve_id(arg, known.iter().map(String::as_str))
        .ok_or_else(|| unknown_order(arg, known.iter().map(String::as_str)).into())
}

/// How many lines of each log `show` repeats.
const LOG_TAIL: usize = 5;

/// The evidence for reviewing one work order (`git arbiter show`).
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    pub version: u32,
    #[serde(rename = "id")]
    pub wo_id: String,
    pub title: Option<String>,
    /// `status` (`ready` or `blocked` before any record), or `halted`.
    pub state: &'static str,
    pub status: Option<Status>,
    pub halted: bool,
    pub halt_reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub halt_paths: Vec<String>,
    pub attempts: u32,
    pub cap: Option<u32>,
    /// Each attempt that left verdicts, oldest first.
    pub runs: Vec<AttemptEvidence>,
    /// What the work changed: the merge against its first parent when done,
    /// the kept branch against its base when halted.
    pub changes: Option<Changes>,
    pub drift: Option<DriftVerdict>,
    /// A `verified` order's passed work waiting to land: what keeps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// The commit `changes` needs that this repository does not have (a
    /// shallow clone's history begins after it), so `changes` is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_commit: Option<String>,
    /// Why its last attempt failed, while it is to be built again or halted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<crate::run::reconcile::LastFailure>,
    pub logs: Vec<LogTail>,
    /// What its attempts reported they cost (`cost_usd`, `tokens`,
    /// `attempts_without_cost`), when any reported.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
}

/// One attempt as recorded, with what its commands reported they cost.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptEvidence {
    #[serde(flatten)]
    pub attempt: PastAttempt,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Changes {
    /// `merge` or `kept_branch`.
    pub source: &'static str,
    pub from: String,
    pub to: String,
    pub files: Vec<FileChange>,
    /// The full patch (`show -p`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileChange {
    pub path: String,
    /// `added`, `deleted` or `modified`.
    pub kind: &'static str,
    /// Lines added and deleted; absent for a binary file.
    pub added: Option<u64>,
    pub deleted: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DriftVerdict {
    pub passed: bool,
    pub uncovered: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LogTail {
    pub path: String,
    pub last_lines: Vec<String>,
}

/// Gather the evidence for `id`; `patch` adds the full diff.
pub fn evidence(ctx: &Context, orders: Option<&Orders>, id: &str, patch: bool) -> Result<Evidence> {
    let id = &resolve_order(ctx, orders, id)?;
    let mut snapshot = Snapshot::read(&ctx.repo)?;
    let record = snapshot.record(id)?;
    let mut ev = Evidence {
        version: crate::JSON_VERSION,
        wo_id: id.to_owned(),
        title: orders.and_then(|o| o.get(id)).map(|w| w.title.clone()),
        state: match orders.and_then(|o| o.get(id)) {
            Some(wo) if !wo.deps.is_empty() => Status::Blocked.as_str(),
            _ => Status::Ready.as_str(),
        },
        status: None,
        halted: false,
        halt_reason: None,
        halt_paths: Vec::new(),
        attempts: 0,
        cap: None,
        runs: Vec::new(),
        changes: None,
        drift: None,
        waiting: None,
        missing_commit: None,
        last_failure: None,
        logs: log_tails(ctx, id),
        spent: None,
    };
    let Some(record) = record else {
        return Ok(ev);
    };
    ev.status = Some(record.status);
    ev.state = record.status.state(record.halted);
    ev.halted = record.halted;
    ev.halt_reason = record.halt_reason.clone();
    ev.halt_paths = record.halt_paths.clone();
    ev.attempts = record.attempts;
    ev.cap = Some(record.cap);
    ev.last_failure = (record.halted || record.status == Status::NeedsRework)
        .then(|| crate::run::reconcile::LastFailure::of(ctx, &record))
        .flatten();
    ev.waiting = record
        .landing
        .as_ref()
        .filter(|_| record.waits_to_land())
        .map(|l| l.blocked.clone().unwrap_or_default());
    let mut runs = record.earlier.clone();
    if record.attempts > 0 && !record.verdicts.is_empty() {
        runs.push(PastAttempt {
            attempt: record.attempts,
            verdicts: record.verdicts.clone(),
            queue_wait_ms: record.queue_wait_ms,
        });
    }
    ev.runs = runs
        .into_iter()
        .map(|attempt| AttemptEvidence {
            spent: Spent::of_attempt(&attempt.verdicts).shown(),
            attempt,
        })
        .collect();
    ev.spent = Spent::of_record(&record).shown();
    let merged = match (&record.status, &record.checkpoint_after) {
        (Status::Done, Some(sha)) => ObjectId::from_hex(sha.as_bytes()).ok(),
        _ => None,
    };
    if let Some(merge) = merged {
        merge_evidence(ctx, &mut snapshot, merge, patch, &mut ev)?;
    } else if record.halted {
        kept_evidence(ctx, &record, patch, &mut ev)?;
    }
    Ok(ev)
}

/// What a landed order's merge `merge` changed against its first parent
/// (or which commit a shallow clone lacks), and its drift verdict.
fn merge_evidence(
    ctx: &Context,
    snapshot: &mut Snapshot,
    merge: ObjectId,
    patch: bool,
    ev: &mut Evidence,
) -> Result<()> {
    let parent = match ctx.repo.has_object(merge) {
        true => ctx
            .repo
            .find_commit(merge)
            .map_err(|source| Error::ReadMerge { merge, source })?
            .parent_ids()
            .next()
            .map(|p| p.detach()),
        false => None,
    };
    match parent {
        Some(parent) if ctx.repo.has_object(parent) => {
            ev.changes = Some(changes(ctx, "merge", parent, merge, patch)?);
        }
        Some(parent) => ev.missing_commit = Some(parent.to_string()),
        None if !ctx.repo.has_object(merge) => ev.missing_commit = Some(merge.to_string()),
        None => {}
    }
    ev.drift = snapshot
        .note(&merge)?
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|note| {
            let drift = note.get("drift")?;
            Some(DriftVerdict {
                passed: drift.get("passed")?.as_bool()?,
                uncovered: drift
                    .get("uncovered")?
                    .as_array()?
                    .iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect(),
            })
        });
    Ok(())
}

/// What a halted order's kept branch changed against its base, and the
/// drift that halted it.
fn kept_evidence(ctx: &Context, record: &Record, patch: bool, ev: &mut Evidence) -> Result<()> {
    let id = record.wo.as_str();
    let kept = ctx
        .repo
        .try_find_reference(format!("refs/heads/{}", branch_of(id)).as_str())
        .map_err(|source| Error::ReadBranch {
            branch: branch_of(id),
            source,
        })?;
    let base = record
        .checkpoint_before
        .as_deref()
        .and_then(|b| ObjectId::from_hex(b.as_bytes()).ok());
    if let (Some(mut kept), Some(base)) = (kept, base) {
        let tip = kept
            .peel_to_id()
            .map_err(|source| Error::ResolveBranch {
                branch: branch_of(id),
                source,
            })?
            .detach();
        match ctx.repo.has_object(base) {
            true => ev.changes = Some(changes(ctx, "kept_branch", base, tip, patch)?),
            false => ev.missing_commit = Some(base.to_string()),
        }
    }
    if record.halt_reason.as_deref() == Some(crate::run::merge::HALT_DRIFT) {
        ev.drift = Some(DriftVerdict {
            passed: false,
            uncovered: record.halt_paths.clone(),
        });
    }
    Ok(())
}

/// The files changed between two commits, with line counts, and the patch if asked.
fn changes(
    ctx: &Context,
    source: &'static str,
    from: ObjectId,
    to: ObjectId,
    patch: bool,
) -> Result<Changes> {
    let tree = |id: ObjectId| -> Result<ObjectId> {
        Ok(ctx
            .repo
            .find_commit(id)
            .map_err(|source| Error::ReadCommit { commit: id, source })?
            .tree_id()
            .map_err(|source| Error::ReadTree { commit: id, source })?
            .detach())
    };
    let changed = crate::git::diff::changed_paths(&ctx.repo, tree(from)?, tree(to)?)?;
    let range = [from.to_string(), to.to_string()];
    let counts = numstat(&git_diff(ctx, &["--numstat", "-z"], &range)?);
    let files = changed
        .iter()
        .map(|c| {
            let path = c.display();
            let (added, deleted) = counts.get(&path).copied().unwrap_or((None, None));
            FileChange {
                kind: match c.kind {
                    Kind::Added => "added",
                    Kind::Deleted => "deleted",
                    Kind::Modified => "modified",
                },
                path,
                added,
                deleted,
            }
        })
        .collect();
    let patch = if patch {
        Some(git_diff(ctx, &["--no-color", "--no-ext-diff"], &range)?)
    } else {
        None
    };
    Ok(Changes {
        source,
        from: from.to_string(),
        to: to.to_string(),
        files,
        patch,
    })
}

/// `git diff --no-renames ARGS FROM TO` in the repository. gix 0.90 computes
/// blob diffs but writes no patch or numstat text, so git does.
fn git_diff(ctx: &Context, args: &[&str], range: &[String; 2]) -> Result<String> {
    let mut cmd = std::process::Command::new("git");
    for var in crate::git::config_env::GIT_ENV {
        cmd.env_remove(var);
    }
    let out = cmd
        .arg("--git-dir")
        .arg(ctx.repo.git_dir())
        .args(["diff", "--no-renames"])
        .args(args)
        .args(range)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| Error::RunDiff { source })?;
    if !out.status.success() {
        return Err(Error::Diff {
            from: range[0].clone(),
            to: range[1].clone(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            status: out.status,
        }
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `git diff --numstat -z` output: path → (added, deleted), `None` for binary.
fn numstat(text: &str) -> BTreeMap<String, (Option<u64>, Option<u64>)> {
    text.split('\0')
        .filter_map(|entry| {
            let mut parts = entry.trim_start_matches('\n').splitn(3, '\t');
            let added = parts.next()?.parse().ok();
            let deleted = parts.next()?.parse().ok();
            Some((parts.next()?.to_owned(), (added, deleted)))
        })
        .collect()
}

/// Every log of `id` (round attempts, race instances), with its last lines.
fn log_tails(ctx: &Context, id: &str) -> Vec<LogTail> {
    let dir = crate::git::layout::logs(&ctx.repo, id);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read(&path)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            LogTail {
                path: path.display().to_string(),
                last_lines: lines[lines.len().saturating_sub(LOG_TAIL)..]
                    .iter()
                    .map(|l| (*l).to_owned())
                    .collect(),
            }
        })
        .collect()
}

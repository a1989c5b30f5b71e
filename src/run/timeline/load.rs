//! Reading a timeline from `refs/notes/arbiter` alone, so that it can be
//! drawn for any past run, in any clone that has the notes.

use std::collections::BTreeMap;

use gix::ObjectId;

use super::{attempts_of, Attempt, Timeline};
use crate::state::context::Context;
use crate::state::orders::Orders;
use crate::state::{Snapshot, NOTES_REF};
use crate::sys::error::{Diagnosis, ExitCode, Result};

/// Which attempts a report shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Select {
    /// Every attempt the state records.
    All,
    /// The attempts run `id` dispatched: the conductor named on their
    /// dispatch (`claim … conductor=<id>`; a race's `race-<id>` too).
    /// Notes written before runs were recorded name none.
    Run(String),
    /// The attempts with an event recorded after the commit `rev` of the
    /// notes ref (so an attempt running then is drawn whole): each record's
    /// history then was a beginning of its history now.
    Since(String),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--run {run}: no attempt in {NOTES_REF} was dispatched by that run")]
    UnknownRun {
        run: String,
        /// The runs the state names, latest first.
        known: Vec<String>,
    },
    #[error("--since {rev}: it names no commit")]
    BadRev { rev: String },
    #[error("--since {rev}: {commit} is not a commit of {NOTES_REF}")]
    NotInNotes { rev: String, commit: ObjectId },
    #[error("--since {rev}: {NOTES_REF} does not exist")]
    NoNotes { rev: String },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Usage
    }

    fn hint(&self) -> Option<String> {
        match self {
            Error::UnknownRun { known, .. } if known.is_empty() => Some(
                "the records name no run: they were written before runs were recorded; report without --run".into(),
            ),
            Error::UnknownRun { known, .. } => Some(format!(
                "a run's id is its conductor's, as in 'claim … conductor=<id>'; the latest runs recorded: {}",
                known.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            )),
            Error::BadRev { .. } | Error::NotInNotes { .. } | Error::NoNotes { .. } => Some(format!(
                "pass a commit of {NOTES_REF}, as 'git log --oneline {NOTES_REF}' lists them (e.g. '{NOTES_REF}@{{1}}' or '{NOTES_REF}~5')"
            )),
        }
    }
}

/// The timeline of the attempts `select` picks among the orders the state
/// (and `orders`, when they load) knows.
pub fn load(ctx: &Context, orders: Option<&Orders>, select: &Select) -> Result<Timeline> {
    let mut snapshot = Snapshot::read(&ctx.repo)?;
    let ids = crate::run::review::known_ids(&snapshot, orders)?;
    let since = match select {
        Select::Since(rev) => Some(events_at(ctx, &snapshot, rev, &ids)?),
        Select::All | Select::Run(_) => None,
    };
    let mut attempts = Vec::new();
    for id in &ids {
        let Some(record) = snapshot.record(id)? else {
            continue;
        };
        attempts.extend(attempts_of(&record));
    }
    let picked: Vec<Attempt> = match select {
        Select::All => attempts,
        Select::Run(run) => {
            let picked: Vec<Attempt> = attempts
                .iter()
                .filter(|a| a.run.as_deref().is_some_and(|r| names_run(r, run)))
                .cloned()
                .collect();
            if picked.is_empty() {
                return Err(Error::UnknownRun {
                    run: run.clone(),
                    known: latest_runs(&attempts),
                }
                .into());
            }
            picked
        }
        Select::Since(_) => {
            let before = since.unwrap_or_default();
            attempts
                .into_iter()
                .filter(|a| a.events.1 >= before.get(&a.wo).copied().unwrap_or(0))
                .collect()
        }
    };
    Ok(Timeline::new(picked))
}

/// Does `arg` name the run of conductor `conductor` (a race names its run
/// `race-<conductor>`)?
fn names_run(conductor: &str, arg: &str) -> bool {
    arg == conductor || arg.strip_prefix("race-") == Some(conductor)
}

/// The runs the attempts name, latest dispatch first.
fn latest_runs(attempts: &[Attempt]) -> Vec<String> {
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    for a in attempts {
        if let Some(run) = &a.run {
            let at = last.entry(run).or_default();
            *at = (*at).max(a.dispatched_ms);
        }
    }
    let mut runs: Vec<(&str, u64)> = last.into_iter().collect();
    runs.sort_by_key(|&(run, at)| (std::cmp::Reverse(at), run));
    runs.into_iter().map(|(run, _)| run.to_owned()).collect()
}

/// How many history events each order's record held at the commit `rev`
/// of the notes ref, which must be its tip or an ancestor of it.
fn events_at(
    ctx: &Context,
    now: &Snapshot<'_>,
    rev: &str,
    ids: &[String],
) -> Result<BTreeMap<String, usize>> {
    let bad = || Error::BadRev {
        rev: rev.to_owned(),
    };
    let commit = ctx
        .repo
        .rev_parse_single(rev)
        .map_err(|_| bad())?
        .object()
        .map_err(|_| bad())?
        .peel_to_commit()
        .map_err(|_| bad())?
        .id;
    let Some(tip) = now.tip else {
        return Err(Error::NoNotes {
            rev: rev.to_owned(),
        }
        .into());
    };
    if !ctx.is_ancestor(commit, tip)? {
        return Err(Error::NotInNotes {
            rev: rev.to_owned(),
            commit,
        }
        .into());
    }
    let mut then = Snapshot::read_at(&ctx.repo, commit)?;
    let mut counts = BTreeMap::new();
    for id in ids {
        if let Some(record) = then.record(id)? {
            counts.insert(id.clone(), record.history.len());
        }
    }
    Ok(counts)
}

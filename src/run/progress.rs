//! Where a round or race reports what happens, below both and the build
//! steps they share; the CLI implements it.
//!
//! Each report is an [`Event`]: typed, so the live view matches on variants,
//! and rendered by its `Display` as the one compact line scripts read,
//! `arbiter <kernel> key=value …`.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use gix::ObjectId;

use crate::run::exec::Exit;
use crate::state::cost::{Spent, Usd};
use crate::state::select::InstanceVerdict;

/// Where a round or race reports what happens; the CLI renders it (live view on a
/// TTY, compact `arbiter <kernel> key=value …` lines otherwise).
pub trait Progress: Sync {
    fn event(&self, event: &Event);
    /// A work order (or race instance) entered a phase.
    fn phase(&self, wo: &str, phase: Phase);
    /// A work order finished this round.
    fn finished(&self, wo: &str);
    /// This conductor now holds `in_use` of the machine-wide `cap` slots.
    fn slots(&self, _in_use: usize, _cap: u32) {}
}

/// A gate or a critic: the checks run on a build, reported alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Gate,
    Critic,
}

impl Check {
    /// Its kernel in progress lines, and its kind in verdicts.
    pub fn name(self) -> &'static str {
        match self {
            Check::Gate => "gate",
            Check::Critic => "critic",
        }
    }
}

/// Where a work order (or race instance) is, for the live view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a machine-wide slot.
    Slot,
    Setup,
    Build,
    Check(Check),
    /// A race instance's score command.
    Score,
    /// Passed; in the merge queue.
    Queued,
    Merge,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Slot => "slot",
            Phase::Setup => "setup",
            Phase::Build => "build",
            Phase::Check(check) => check.name(),
            Phase::Score => "score",
            Phase::Queued => "waiting to merge",
            Phase::Merge => "merge",
        })
    }
}

/// What a round or race reports. Several variants may share a kernel (the
/// word after `arbiter`): the line is what scripts read, the variant is what
/// happened. Each variant's doc gives its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `plan round=<n> batch=<ids>`: a dry run's planned batch.
    Plan { round: usize, batch: Vec<String> },
    /// `batch ready=<n> batch=<n> deferred=<n> max=<n>`: a batch was selected.
    Batch {
        ready: usize,
        batch: usize,
        deferred: usize,
        max: usize,
    },
    /// `round n=<n> base=<sha> batch=<ids>`: a lockstep round starts.
    Round {
        n: usize,
        base: ObjectId,
        batch: Vec<String>,
    },
    /// `claim wo=<id> conductor=<name> base=<sha> files=<paths>`: dispatched,
    /// its worktree made.
    Claim {
        wo: String,
        conductor: String,
        base: ObjectId,
        files: Vec<String>,
    },
    /// `defer wo=<id> reason=<reason> conflicts_with=<name>`: left for
    /// another time (claimed by another conductor).
    Defer {
        wo: String,
        reason: String,
        conflicts_with: String,
    },
    /// `wait wo=<id> seconds=<n>`: the run waits for an order's retry delay.
    Wait { wo: String, remaining: Duration },
    /// `budget exhausted=true status=<status>`: `--budget-cmd` refused more work.
    BudgetExhausted { status: ExitStatus },
    /// `budget cost_budget=true spent_usd=<x> max_usd=<x>`: the reported
    /// cost reached `--max-cost`.
    CostBudget { spent: Usd, max: Usd },
    /// `cost wo=<id> attempt=<n> usd=<x>|- total_usd=<x>|- [tokens=<kind>=<n>,…]`:
    /// what an attempt reported it cost, and the run's total so far.
    Cost {
        wo: String,
        attempt: u32,
        spent: Spent,
        total: Spent,
    },

    /// `recover detail=<text>`: what a dead conductor left, now cleaned up.
    /// Free-form: the cleanups (orphaned processes, stale worktrees, dead
    /// verifiers) each describe what they did in their own words.
    Recovered { detail: String },
    /// `recover wo=<id> merge_back=<outcome>`: a killed merge-back finished.
    RecoveredMergeBack { wo: String, outcome: &'static str },
    /// `recover wo=<id> outcome=<outcome>`: a record set right from git's state.
    RecoveredRecord { wo: String, outcome: &'static str },

    /// `slot wo=<id> waiting=true cap=<n> held=<n> ahead=<n>`: waiting for a
    /// machine-wide slot.
    SlotWait {
        wo: String,
        cap: u32,
        held: u32,
        ahead: u32,
    },
    /// `build wo=<id> attempt=<n> slots=<in_use>/<cap>`: a build starts.
    BuildStarted {
        wo: String,
        attempt: u32,
        in_use: usize,
        cap: u32,
    },
    /// `build wo=<label> result=<exit> elapsed=<s>s`: a build ended (of a
    /// work order or a race instance).
    BuildFinished {
        wo: String,
        result: Exit,
        elapsed: Duration,
    },
    /// `gate|critic wo=<label> command=<cmd> result=<exit>`: a check ended.
    Checked {
        check: Check,
        wo: String,
        command: String,
        result: Exit,
    },
    /// `setup wo=<label> result=<exit>`: the setup command ran in a worktree.
    Setup { wo: String, result: Exit },
    /// `warning wo=<id> detail=<text>`: something went wrong that changes no
    /// outcome; the detail is a message for people.
    Warning { wo: String, detail: String },
    /// `shallow start=<sha> orders=<ids> detail=<text>`: once per run, the
    /// orders a shallow clone cannot tell landed, which are not built.
    Shallow {
        start: String,
        orders: Vec<String>,
        detail: String,
    },

    /// `rework wo=<id> reason=<why> log=<path>`: the attempt failed, back for
    /// a retry.
    Rework {
        wo: String,
        reason: String,
        log: PathBuf,
    },
    /// `kept wo=<id> reason=<why> worktree=<path> branch=<name> log=<path>`:
    /// git would not commit what the builder left, so its worktree and branch
    /// stay.
    Kept {
        wo: String,
        reason: String,
        worktree: PathBuf,
        branch: String,
        log: PathBuf,
    },
    /// `rework wo=<id> reason=<why>`: the merged result failed the gates with
    /// this order merged; its attempt is spent.
    Rejected { wo: String, reason: String },
    /// `wait wo=<id> why=<what>`: it passed, but a checkout of the branch
    /// cannot follow its landing now; it is `verified`, waiting to land.
    Waiting { wo: String, why: String },
    /// `halt wo=<id> reason=<why>`: halted before it was built (its retry
    /// cap is spent).
    Halt { wo: String, reason: String },
    /// `halt wo=<id> reason=<why> log=<path>`: a critic blocked the attempt.
    Blocked {
        wo: String,
        reason: String,
        log: PathBuf,
    },
    /// `halt wo=<id> reason=<why> paths=<paths>`: its merge halted (a
    /// conflict, drift, a blocked checkout) on these paths.
    MergeHalted {
        wo: String,
        reason: String,
        paths: Vec<String>,
    },
    /// `halt wo=<id> reason=<why> kept=<branch>`: halted by hand while it
    /// was building; its branch stays.
    HaltedInFlight {
        wo: String,
        reason: String,
        kept: String,
    },

    /// `queue wo=<id> position=<n>`: built and checked, waiting to merge.
    Queued { wo: String, position: usize },
    /// `verify tip=<sha> orders=<ids> result=passed|failed|interrupted
    /// gate_runs=<n>`: the gates ran on a chain of merges. `passed` is `None`
    /// when interrupted.
    Verify {
        tip: ObjectId,
        orders: Vec<String>,
        passed: Option<bool>,
        gate_runs: usize,
    },
    /// `land batch=<n> sha=<sha> orders=<ids>`: merges landed together.
    Land {
        batch: usize,
        sha: ObjectId,
        orders: Vec<String>,
    },
    /// `merge wo=<id> sha=<sha> changed=<n>`: merged back.
    Merged {
        wo: String,
        sha: ObjectId,
        changed: usize,
    },
    /// `merge wo=<id> up_to_date=true`: nothing to merge.
    UpToDate { wo: String },
    /// `final-gate result=<exit> log=<path>`: the final gate ran on the tip.
    FinalGate { result: Exit, log: PathBuf },

    /// `race wo=<id> n=<n> base=<sha> attempt=<n>`: a race starts.
    Race {
        wo: String,
        n: u32,
        base: ObjectId,
        attempt: u32,
    },
    /// `instance wo=<id> instance=<k> verdict=<verdict> score=<n>|-`: how an
    /// instance ended.
    Instance {
        wo: String,
        instance: u32,
        verdict: InstanceVerdict,
        score: Option<i64>,
    },
    /// `merge wo=<id> instance=<k> outcome=<outcome> paths=<paths>`: a race
    /// instance's try at merging back.
    RaceMerge {
        wo: String,
        instance: u32,
        outcome: String,
        paths: Vec<String>,
    },
    /// `pick wo=<id> instance=<k> score=<n> sha=<sha>`: the race's winner,
    /// merged.
    Pick {
        wo: String,
        instance: u32,
        score: i64,
        sha: ObjectId,
    },
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Plan { round, batch } => Line::new(f, "plan")
                .field("round", round)
                .field("batch", batch.join(","))
                .finish(),
            Event::Batch {
                ready,
                batch,
                deferred,
                max,
            } => Line::new(f, "batch")
                .field("ready", ready)
                .field("batch", batch)
                .field("deferred", deferred)
                .field("max", max)
                .finish(),
            Event::Round { n, base, batch } => Line::new(f, "round")
                .field("n", n)
                .field("base", short(base))
                .field("batch", batch.join(","))
                .finish(),
            Event::Claim {
                wo,
                conductor,
                base,
                files,
            } => Line::new(f, "claim")
                .field("wo", wo)
                .field("conductor", conductor)
                .field("base", short(base))
                .field("files", files.join(","))
                .finish(),
            Event::Defer {
                wo,
                reason,
                conflicts_with,
            } => Line::new(f, "defer")
                .field("wo", wo)
                .field("reason", reason)
                .field("conflicts_with", conflicts_with)
                .finish(),
            Event::Wait { wo, remaining } => Line::new(f, "wait")
                .field("wo", wo)
                .field("seconds", remaining.as_secs())
                .finish(),
            Event::BudgetExhausted { status } => Line::new(f, "budget")
                .field("exhausted", true)
                .field("status", status)
                .finish(),
            Event::CostBudget { spent, max } => Line::new(f, "budget")
                .field(crate::state::cost::COST_BUDGET, true)
                .field("spent_usd", spent.0)
                .field("max_usd", max.0)
                .finish(),
            Event::Cost {
                wo,
                attempt,
                spent,
                total,
            } => {
                let usd = |s: &Spent| s.cost_usd.map_or("-".to_owned(), |c| c.to_string());
                let tokens: Vec<String> = spent
                    .tokens
                    .iter()
                    .map(|(k, n)| format!("{k}={n}"))
                    .collect();
                let mut line = Line::new(f, "cost");
                line.field("wo", wo)
                    .field("attempt", attempt)
                    .field("usd", usd(spent))
                    .field("total_usd", usd(total));
                if !tokens.is_empty() {
                    line.field("tokens", tokens.join(","));
                }
                line.finish()
            }
            Event::Recovered { detail } => Line::new(f, "recover").field("detail", detail).finish(),
            Event::RecoveredMergeBack { wo, outcome } => Line::new(f, "recover")
                .field("wo", wo)
                .field("merge_back", outcome)
                .finish(),
            Event::RecoveredRecord { wo, outcome } => Line::new(f, "recover")
                .field("wo", wo)
                .field("outcome", outcome)
                .finish(),
            Event::SlotWait {
                wo,
                cap,
                held,
                ahead,
            } => Line::new(f, "slot")
                .field("wo", wo)
                .field("waiting", true)
                .field("cap", cap)
                .field("held", held)
                .field("ahead", ahead)
                .finish(),
            Event::BuildStarted {
                wo,
                attempt,
                in_use,
                cap,
            } => Line::new(f, "build")
                .field("wo", wo)
                .field("attempt", attempt)
                .field("slots", format_args!("{in_use}/{cap}"))
                .finish(),
            Event::BuildFinished {
                wo,
                result,
                elapsed,
            } => Line::new(f, "build")
                .field("wo", wo)
                .field("result", result.describe())
                .field("elapsed", format_args!("{:.1}s", elapsed.as_secs_f64()))
                .finish(),
            Event::Checked {
                check,
                wo,
                command,
                result,
            } => Line::new(f, check.name())
                .field("wo", wo)
                .field("command", command)
                .field("result", result.describe())
                .finish(),
            Event::Setup { wo, result } => Line::new(f, "setup")
                .field("wo", wo)
                .field("result", result.describe())
                .finish(),
            Event::Warning { wo, detail } => Line::new(f, "warning")
                .field("wo", wo)
                .field("detail", detail)
                .finish(),
            Event::Shallow {
                start,
                orders,
                detail,
            } => Line::new(f, "shallow")
                .field("start", &start[..start.len().min(12)])
                .field("orders", orders.join(","))
                .field("detail", detail)
                .finish(),
            Event::Rework { wo, reason, log } => Line::new(f, "rework")
                .field("wo", wo)
                .field("reason", reason)
                .field("log", log.display())
                .finish(),
            Event::Kept {
                wo,
                reason,
                worktree,
                branch,
                log,
            } => Line::new(f, "kept")
                .field("wo", wo)
                .field("reason", reason)
                .field("worktree", worktree.display())
                .field("branch", branch)
                .field("log", log.display())
                .finish(),
            Event::Rejected { wo, reason } => Line::new(f, "rework")
                .field("wo", wo)
                .field("reason", reason)
                .finish(),
            Event::Waiting { wo, why } => Line::new(f, "verified")
                .field("wo", wo)
                .field("waiting", why)
                .finish(),
            Event::Halt { wo, reason } => Line::new(f, "halt")
                .field("wo", wo)
                .field("reason", reason)
                .finish(),
            Event::Blocked { wo, reason, log } => Line::new(f, "halt")
                .field("wo", wo)
                .field("reason", reason)
                .field("log", log.display())
                .finish(),
            Event::MergeHalted { wo, reason, paths } => Line::new(f, "halt")
                .field("wo", wo)
                .field("reason", reason)
                .field("paths", paths.join(","))
                .finish(),
            Event::HaltedInFlight { wo, reason, kept } => Line::new(f, "halt")
                .field("wo", wo)
                .field("reason", reason)
                .field("kept", kept)
                .finish(),
            Event::Queued { wo, position } => Line::new(f, "queue")
                .field("wo", wo)
                .field("position", position)
                .finish(),
            Event::Verify {
                tip,
                orders,
                passed,
                gate_runs,
            } => Line::new(f, "verify")
                .field("tip", short(tip))
                .field("orders", orders.join(","))
                .field(
                    "result",
                    match passed {
                        Some(true) => "passed",
                        Some(false) => "failed",
                        None => "interrupted",
                    },
                )
                .field("gate_runs", gate_runs)
                .finish(),
            Event::Land { batch, sha, orders } => Line::new(f, "land")
                .field("batch", batch)
                .field("sha", short(sha))
                .field("orders", orders.join(","))
                .finish(),
            Event::Merged { wo, sha, changed } => Line::new(f, "merge")
                .field("wo", wo)
                .field("sha", short(sha))
                .field("changed", changed)
                .finish(),
            Event::UpToDate { wo } => Line::new(f, "merge")
                .field("wo", wo)
                .field("up_to_date", true)
                .finish(),
            Event::FinalGate { result, log } => Line::new(f, "final-gate")
                .field("result", result.describe())
                .field("log", log.display())
                .finish(),
            Event::Race {
                wo,
                n,
                base,
                attempt,
            } => Line::new(f, "race")
                .field("wo", wo)
                .field("n", n)
                .field("base", short(base))
                .field("attempt", attempt)
                .finish(),
            Event::Instance {
                wo,
                instance,
                verdict,
                score,
            } => Line::new(f, "instance")
                .field("wo", wo)
                .field("instance", instance)
                .field("verdict", verdict)
                .field(
                    "score",
                    score.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                )
                .finish(),
            Event::RaceMerge {
                wo,
                instance,
                outcome,
                paths,
            } => Line::new(f, "merge")
                .field("wo", wo)
                .field("instance", instance)
                .field("outcome", outcome)
                .field("paths", paths.join(","))
                .finish(),
            Event::Pick {
                wo,
                instance,
                score,
                sha,
            } => Line::new(f, "pick")
                .field("wo", wo)
                .field("instance", instance)
                .field("score", score)
                .field("sha", short(sha))
                .finish(),
        }
    }
}

/// A sha as progress lines show it: its first 12 hex digits.
fn short(sha: &ObjectId) -> impl fmt::Display + '_ {
    sha.to_hex_with_len(12)
}

/// Writes `arbiter <kernel>` then ` key=value` per field, keeping the first
/// write error (as `fmt::DebugStruct` does) so a variant's fields chain.
struct Line<'a, 'b> {
    f: &'a mut fmt::Formatter<'b>,
    result: fmt::Result,
}

impl<'a, 'b> Line<'a, 'b> {
    fn new(f: &'a mut fmt::Formatter<'b>, kernel: &str) -> Self {
        let result = write!(f, "arbiter {kernel}");
        Line { f, result }
    }

    fn field(&mut self, key: &str, value: impl fmt::Display) -> &mut Self {
        if self.result.is_ok() {
            let value = value.to_string();
            self.result = write!(self.f, " {key}=");
            if self.result.is_ok() {
                self.result = write_value(self.f, &value);
            }
        }
        self
    }

    fn finish(&mut self) -> fmt::Result {
        self.result
    }
}

/// A value as is, or quoted and escaped (Rust's `{:?}`) when it is empty,
/// would break `key=value` splitting, or holds a control character (never
/// printed raw: it could drive the terminal).
fn write_value(f: &mut fmt::Formatter<'_>, value: &str) -> fmt::Result {
    if value.is_empty()
        || value.contains(|c: char| c.is_whitespace() || c.is_control() || c == '"' || c == '=')
    {
        write!(f, "{value:?}")
    } else {
        f.write_str(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(hex: &str) -> ObjectId {
        ObjectId::from_hex(hex.as_bytes()).expect("valid hex")
    }

    #[test]
    fn plain_values_are_written_as_they_are() {
        let event = Event::Claim {
            wo: "wo-01".into(),
            conductor: "host-42".into(),
            base: sha("0123456789abcdef0123456789abcdef01234567"),
            files: vec!["src/a.rs".into(), "src/b.rs".into()],
        };
        assert_eq!(
            event.to_string(),
            "arbiter claim wo=wo-01 conductor=host-42 base=0123456789ab files=src/a.rs,src/b.rs"
        );
    }

    #[test]
    fn values_with_spaces_quotes_or_equals_are_quoted_and_escaped() {
        let event = Event::Checked {
            check: Check::Gate,
            wo: "wo-01".into(),
            command: r#"test "$(cat a)" = a"#.into(),
            result: Exit::Code(1),
        };
        assert_eq!(
            event.to_string(),
            r#"arbiter gate wo=wo-01 command="test \"$(cat a)\" = a" result="exit 1""#
        );
        let event = Event::Warning {
            wo: "wo-02".into(),
            detail: "a=b".into(),
        };
        assert_eq!(
            event.to_string(),
            r#"arbiter warning wo=wo-02 detail="a=b""#
        );
    }

    #[test]
    fn empty_values_are_quoted() {
        let event = Event::MergeHalted {
            wo: "wo-03".into(),
            reason: "conflict".into(),
            paths: Vec::new(),
        };
        assert_eq!(
            event.to_string(),
            r#"arbiter halt wo=wo-03 reason=conflict paths="""#
        );
    }

    #[test]
    fn variants_sharing_a_kernel_keep_their_own_keys() {
        let merged = Event::Merged {
            wo: "wo-04".into(),
            sha: sha("fedcba9876543210fedcba9876543210fedcba98"),
            changed: 3,
        };
        assert_eq!(
            merged.to_string(),
            "arbiter merge wo=wo-04 sha=fedcba987654 changed=3"
        );
        let up_to_date = Event::UpToDate { wo: "wo-04".into() };
        assert_eq!(
            up_to_date.to_string(),
            "arbiter merge wo=wo-04 up_to_date=true"
        );
        let rejected = Event::Rejected {
            wo: "wo-05".into(),
            reason: "merged_gate_failed".into(),
        };
        assert_eq!(
            rejected.to_string(),
            "arbiter rework wo=wo-05 reason=merged_gate_failed"
        );
    }

    #[test]
    fn numbers_durations_and_missing_scores() {
        let started = Event::BuildStarted {
            wo: "wo-06".into(),
            attempt: 2,
            in_use: 1,
            cap: 4,
        };
        assert_eq!(
            started.to_string(),
            "arbiter build wo=wo-06 attempt=2 slots=1/4"
        );
        let finished = Event::BuildFinished {
            wo: "wo-06".into(),
            result: Exit::Signal(9),
            elapsed: Duration::from_millis(1240),
        };
        assert_eq!(
            finished.to_string(),
            r#"arbiter build wo=wo-06 result="killed by signal 9" elapsed=1.2s"#
        );
        let instance = Event::Instance {
            wo: "wo-07".into(),
            instance: 1,
            verdict: InstanceVerdict::BuildFailed,
            score: None,
        };
        assert_eq!(
            instance.to_string(),
            "arbiter instance wo=wo-07 instance=1 verdict=build_failed score=-"
        );
        let verify = Event::Verify {
            tip: sha("0123456789abcdef0123456789abcdef01234567"),
            orders: vec!["wo-08".into(), "wo-09".into()],
            passed: None,
            gate_runs: 2,
        };
        assert_eq!(
            verify.to_string(),
            "arbiter verify tip=0123456789ab orders=wo-08,wo-09 result=interrupted gate_runs=2"
        );
    }
}

//! Selection, best-of-N: candidates that passed their gates
//! and produced a valid score, highest score first, earliest finish breaking
//! ties; below the floor (`--min-score`) nothing wins. Pure: no I/O.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// How a race instance ended; in JSON and records, its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum InstanceVerdict {
    /// Not finished (yet).
    #[default]
    Pending,
    /// Built, committed, every gate passed (then scored).
    Passed,
    BuildFailed,
    GateFailed,
    /// The score command failed or printed no integer.
    InvalidScore,
    Interrupted,
    /// Its slot or its branch could not be had (the reason says which).
    Error,
    /// A command of another instance could not run: this one never started.
    NotStarted,
    /// git refused to commit what its builder left.
    CommitFailed,
    /// The shell could not run one of its commands (126/127).
    #[serde(rename = "command_not_runnable")]
    NotRunnable,
}

impl std::fmt::Display for InstanceVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InstanceVerdict::Pending => "pending",
            InstanceVerdict::Passed => "passed",
            InstanceVerdict::BuildFailed => "build_failed",
            InstanceVerdict::GateFailed => "gate_failed",
            InstanceVerdict::InvalidScore => "invalid_score",
            InstanceVerdict::Interrupted => "interrupted",
            InstanceVerdict::Error => "error",
            InstanceVerdict::NotStarted => "not_started",
            InstanceVerdict::CommitFailed => "commit_failed",
            InstanceVerdict::NotRunnable => "command_not_runnable",
        })
    }
}

/// One instance of a race, as selection sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// 0-based instance number (`ARBITER_INSTANCE`).
    pub instance: u32,
    /// Build and every gate exited 0.
    pub passed: bool,
    /// The score command's integer, if it produced a valid one.
    #[serde(default)]
    pub score: Option<i64>,
    /// When its gates completed, nanoseconds since the Unix epoch.
    pub finished_at: u64,
    #[serde(default)]
    pub verdict: InstanceVerdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Candidate {
    /// Eligible: passed its gates with a valid score at or above the floor.
    fn eligible(&self, min_score: Option<i64>) -> Option<i64> {
        let score = self.score.filter(|_| self.passed)?;
        match min_score {
            Some(floor) if score < floor => None,
            _ => Some(score),
        }
    }
}

/// Better first: higher score, then earlier finish, then lower instance number.
fn better(a: &Candidate, sa: i64, b: &Candidate, sb: i64) -> Ordering {
    sb.cmp(&sa)
        .then(a.finished_at.cmp(&b.finished_at))
        .then(a.instance.cmp(&b.instance))
}

/// Indices of every eligible candidate, best first: the winner and then the
/// fallback order (the next-best passing instance is tried when the winner
/// cannot merge).
pub fn order(cands: &[Candidate], min_score: Option<i64>) -> Vec<usize> {
    let mut eligible: Vec<(usize, i64)> = cands
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.eligible(min_score).map(|s| (i, s)))
        .collect();
    eligible.sort_by(|&(i, si), &(j, sj)| better(&cands[i], si, &cands[j], sj));
    eligible.into_iter().map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn verdicts_keep_their_names_in_json_and_text() {
        use InstanceVerdict::*;
        for v in [
            Pending,
            Passed,
            BuildFailed,
            GateFailed,
            InvalidScore,
            Interrupted,
            Error,
            NotStarted,
            CommitFailed,
            NotRunnable,
        ] {
            let json = serde_json::to_string(&v).expect("serializes");
            assert_eq!(json, format!("\"{v}\""));
            assert_eq!(serde_json::from_str::<InstanceVerdict>(&json).ok(), Some(v));
        }
        assert_eq!(NotRunnable.to_string(), "command_not_runnable");
    }

    /// The winner: the first of [`order`].
    fn pick(cands: &[Candidate], min_score: Option<i64>) -> Option<usize> {
        order(cands, min_score).into_iter().next()
    }

    fn c(instance: u32, passed: bool, score: Option<i64>, finished_at: u64) -> Candidate {
        Candidate {
            instance,
            passed,
            score,
            finished_at,
            verdict: if passed {
                InstanceVerdict::Passed
            } else {
                InstanceVerdict::GateFailed
            },
            reason: None,
        }
    }

    #[test]
    fn highest_score_wins() {
        let cands = [
            c(0, true, Some(5), 1),
            c(1, true, Some(8), 2),
            c(2, true, Some(7), 3),
        ];
        assert_eq!(pick(&cands, None), Some(1));
        assert_eq!(order(&cands, None), vec![1, 2, 0]);
    }

    #[test]
    fn tie_goes_to_the_earliest_finish() {
        let cands = [c(0, true, Some(8), 50), c(1, true, Some(8), 10)];
        assert_eq!(pick(&cands, None), Some(1));
    }

    #[test]
    fn failed_gate_excludes_a_high_score() {
        let cands = [c(0, true, Some(3), 1), c(1, false, Some(100), 0)];
        assert_eq!(pick(&cands, None), Some(0));
        assert_eq!(order(&cands, None), vec![0]);
    }

    #[test]
    fn missing_score_is_not_eligible() {
        let cands = [c(0, true, None, 1)];
        assert_eq!(pick(&cands, None), None);
    }

    #[test]
    fn floor_above_every_score_picks_nothing() {
        let cands = [c(0, true, Some(5), 1), c(1, true, Some(8), 2)];
        assert_eq!(pick(&cands, Some(9)), None);
        assert_eq!(pick(&cands, Some(8)), Some(1), "the floor is inclusive");
        assert_eq!(pick(&[], None), None);
    }

    proptest! {
        #[test]
        fn pick_is_maximal(raw in proptest::collection::vec((any::<bool>(), proptest::option::of(-20i64..20), 0u64..10), 0..12), floor in proptest::option::of(-20i64..20)) {
            let cands: Vec<Candidate> = raw.iter().enumerate().map(|(i, (p, s, f))| c(i as u32, *p, *s, *f)).collect();
            let ok = |x: &Candidate| x.passed && x.score.is_some_and(|s| floor.is_none_or(|f| s >= f));
            match pick(&cands, floor) {
                None => prop_assert!(cands.iter().all(|x| !ok(x))),
                Some(w) => {
                    let win = &cands[w];
                    prop_assert!(ok(win));
                    for x in cands.iter().filter(|x| ok(x)) {
                        prop_assert!(x.score < win.score || (x.score == win.score && x.finished_at >= win.finished_at));
                    }
                }
            }
            let ord = order(&cands, floor);
            prop_assert_eq!(ord.len(), cands.iter().filter(|x| ok(x)).count());
            for pair in ord.windows(2) {
                let (a, b) = (&cands[pair[0]], &cands[pair[1]]);
                prop_assert!(a.score > b.score || (a.score == b.score && a.finished_at <= b.finished_at));
            }
        }
    }
}

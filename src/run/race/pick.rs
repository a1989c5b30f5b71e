//! The write-once pick record of a race (`refs/notes/arbiter-picks`): which
//! instance won, why, and what the others did, attached to the merge commit.

use serde::{Deserialize, Serialize};

use crate::state;
use crate::state::context::Context;
use crate::state::select::InstanceVerdict;
use crate::sys::error::{InputError, Result};

/// Where pick records live (one note per winning merge commit).
pub const PICKS_REF: &str = "refs/notes/arbiter-picks";
pub const MERGE_POLICY: &str = "no-ff merge-back, drift scope own, no conflict auto-resolution";
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PickInstance {
    pub instance: u32,
    pub verdict: InstanceVerdict,
    pub score: Option<i64>,
    pub reason: Option<String>,
}

/// The write-once pick record (`refs/notes/arbiter-picks`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PickRecord {
    pub version: u32,
    pub wo_id: String,
    pub winner_instance: u32,
    pub worktree_path: String,
    pub verdict: InstanceVerdict,
    pub score: i64,
    pub finished_at: u64,
    pub merge_policy: String,
    pub timestamp: i64,
    pub run_id: String,
    /// The commit the record is attached to (the merge commit).
    pub commit: String,
    pub loser_instances: Vec<u32>,
    pub instances: Vec<PickInstance>,
}

impl PickRecord {
    /// Every required field present and consistent, the winner among the instances.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.version != 1 {
            return Err(format!("unsupported version {}", self.version));
        }
        for (name, value) in [
            ("wo_id", &self.wo_id),
            ("worktree_path", &self.worktree_path),
            ("merge_policy", &self.merge_policy),
            ("run_id", &self.run_id),
            ("commit", &self.commit),
        ] {
            if value.trim().is_empty() {
                return Err(format!("field '{name}' is empty"));
            }
        }
        let Some(winner) = self
            .instances
            .iter()
            .find(|i| i.instance == self.winner_instance)
        else {
            return Err(format!(
                "winner_instance {} is not among the instances",
                self.winner_instance
            ));
        };
        if winner.verdict != InstanceVerdict::Passed || winner.score != Some(self.score) {
            return Err("the winner's verdict or score disagrees with its instance".into());
        }
        let mut expected: Vec<u32> = self
            .instances
            .iter()
            .map(|i| i.instance)
            .filter(|&i| i != self.winner_instance)
            .collect();
        expected.sort_unstable();
        let mut losers = self.loser_instances.clone();
        losers.sort_unstable();
        if losers != expected {
            return Err("loser_instances must be every instance but the winner".into());
        }
        Ok(())
    }
}

/// Validate `record` and attach it, write-once, to `commit` in `refs/notes/arbiter-picks`.
pub fn store_pick(ctx: &Context, commit: gix::ObjectId, record: &PickRecord) -> Result<()> {
    record.validate().map_err(|e| {
        InputError::new(format!("invalid pick record: {e}"))
            .hint("this is a bug in git-arbiter; nothing was written")
    })?;
    let mut bytes = serde_json::to_vec_pretty(record).expect("a pick record always serializes");
    bytes.push(b'\n');
    let written = state::write_note_once(
        &ctx.repo,
        PICKS_REF,
        commit,
        &bytes,
        &format!("pick {} instance {}", record.wo_id, record.winner_instance),
    )?;
    if !written {
        return Err(InputError::new(format!(
            "a pick record already exists for {commit} in {PICKS_REF}: pick records are write-once"
        ))
        .hint(format!(
            "read it with 'git notes --ref=arbiter-picks show {commit}'"
        ))
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> PickRecord {
        PickRecord {
            version: 1,
            wo_id: "wo-01".into(),
            winner_instance: 1,
            worktree_path: "/tmp/x".into(),
            verdict: InstanceVerdict::Passed,
            score: 8,
            finished_at: 1,
            merge_policy: MERGE_POLICY.into(),
            timestamp: 0,
            run_id: "race-1".into(),
            commit: "abc".into(),
            loser_instances: vec![0],
            instances: vec![
                PickInstance {
                    instance: 0,
                    verdict: InstanceVerdict::Passed,
                    score: Some(5),
                    reason: None,
                },
                PickInstance {
                    instance: 1,
                    verdict: InstanceVerdict::Passed,
                    score: Some(8),
                    reason: None,
                },
            ],
        }
    }

    #[test]
    fn validation_catches_missing_and_inconsistent_fields() {
        assert_eq!(record().validate(), Ok(()));
        let mut r = record();
        r.winner_instance = 7;
        assert!(r.validate().is_err());
        let mut r = record();
        r.run_id.clear();
        assert!(r.validate().is_err());
        let mut r = record();
        r.loser_instances.clear();
        assert!(r.validate().is_err());
        let mut r = record();
        r.score = 5;
        assert!(r.validate().is_err());
    }

    #[test]
    fn pick_record_is_write_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let status = std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(dir.path())
            .env("GIT_CONFIG_GLOBAL", dir.path().join("global.gitconfig"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .expect("git init");
        assert!(status.success());
        let ctx = Context::isolated(
            dir.path(),
            &["user.name=Arbiter Test", "user.email=test@example.com"],
        )
        .expect("open");
        let object = ctx.repo.write_blob(b"some object").expect("blob").detach();
        let first = record();
        store_pick(&ctx, object, &first).expect("first write");
        let mut second = record();
        second.run_id = "race-2".into();
        let err = store_pick(&ctx, object, &second).expect_err("second write refused");
        assert_eq!(err.exit_code(), crate::ExitCode::Usage);
        // Exactly one write happened: the notes ref has a single, parentless commit.
        let tip = ctx
            .repo
            .find_reference(PICKS_REF)
            .expect("picks ref")
            .peel_to_id()
            .expect("tip")
            .detach();
        let commit = ctx.repo.find_commit(tip).expect("commit");
        assert!(commit.parent_ids().next().is_none(), "exactly one write");
    }
}

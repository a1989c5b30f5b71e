//! What the integration branch says landed: the merge commits with an
//! `Arbiter-WO` trailer on its first-parent chain. Only git-arbiter's
//! landings put such commits on that chain (builders' commits arrive as
//! second parents), and an order lands once: an order whose merge is there
//! is done, whatever the notes say (a notes ref fetched back, or edited,
//! can never cause a second merge).
//!
//! The chain is read once per process, then only the commits that are new
//! since the tip it was read at: a run that lands a thousand orders reads
//! each commit once, not the whole chain per order.

use std::collections::{HashMap, HashSet};

use gix::bstr::ByteSlice;
use gix::ObjectId;

/// How many first-parent commits one read goes back at most: from a tip
/// read for the first time, or from a new tip to the last one read.
pub const MAX_SCAN: usize = 10_000;

/// The landed merges of one branch's first-parent chain, as far as read.
#[derive(Default, Debug)]
pub struct Landed {
    /// The tip the chain was read from.
    tip: Option<ObjectId>,
    /// Every first-parent commit read.
    seen: HashSet<ObjectId>,
    /// The newest merge of each order.
    merges: HashMap<String, ObjectId>,
    /// The oldest commit read when the chain ends at a parent the object
    /// database does not have: a shallow clone's history begins there.
    boundary: Option<ObjectId>,
    /// [`MAX_SCAN`] unless a test says otherwise.
    limit: Option<usize>,
}

impl Landed {
    /// Bring the view to `tip`: read the commits new since the last tip
    /// (all of them when the branch was rewritten or never read).
    pub fn update(&mut self, repo: &gix::Repository, tip: ObjectId) -> Result<(), gix::Error> {
        if self.tip == Some(tip) {
            return Ok(());
        }
        let mut fresh = Vec::new();
        let mut merges = Vec::new();
        let mut joined = false;
        let mut boundary = None;
        let mut next = Some(tip);
        while let Some(id) = next {
            if Some(id) == self.tip {
                joined = true;
                break;
            }
            if fresh.len() >= self.limit.unwrap_or(MAX_SCAN) {
                break;
            }
            let Some(object) = repo.try_find_object(id)? else {
                boundary = fresh.last().copied();
                break;
            };
            let commit = object.try_into_commit().map_err(gix::Error::from_error)?;
            let mut parents = commit.parent_ids();
            next = parents.next().map(|p| p.detach());
            if parents.next().is_some() {
                for line in commit.message_raw_sloppy().lines() {
                    if let Some(wo) = line.strip_prefix(b"Arbiter-WO: ") {
                        merges.push((wo.to_str_lossy().trim().to_owned(), id));
                    }
                }
            }
            fresh.push(id);
        }
        if self.tip.is_some() && !joined {
            // Not a descendant of the tip read before (reset, rewritten):
            // read it afresh.
            *self = Landed {
                limit: self.limit,
                ..Landed::default()
            };
            return self.update(repo, tip);
        }
        if !joined {
            self.boundary = boundary;
        }
        // Newest first: a newer merge of an order wins over an older one.
        for (wo, id) in merges.into_iter().rev() {
            self.merges.insert(wo, id);
        }
        self.seen.extend(fresh);
        self.tip = Some(tip);
        Ok(())
    }

    /// The newest merge of order `id` on the chain, if read.
    pub fn merge_of(&self, id: &str) -> Option<ObjectId> {
        self.merges.get(id).copied()
    }

    /// Where the chain read ends in a shallow clone: merges before this
    /// commit are not in the repository, so an order not found may still
    /// have landed.
    pub fn shallow_boundary(&self) -> Option<ObjectId> {
        self.boundary
    }
}

/// Why [`is_ancestor`] could not tell.
#[derive(Debug, thiserror::Error)]
pub enum AncestryError {
    #[error("reading commit {commit}: {source}")]
    ReadCommit {
        commit: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("finding the merge base of {ancestor} and {tip}: {source}")]
    MergeBase {
        ancestor: ObjectId,
        tip: ObjectId,
        #[source]
        source: gix::Error,
    },
}

/// Is `ancestor` reachable from `tip`? An error (e.g. a missing object) is
/// returned, never guessed.
pub fn is_ancestor(
    repo: &gix::Repository,
    ancestor: ObjectId,
    tip: ObjectId,
) -> Result<bool, AncestryError> {
    if ancestor == tip || near_ancestor(repo, ancestor, tip) {
        return Ok(true);
    }
    repo.find_commit(ancestor)
        .map_err(|source| AncestryError::ReadCommit {
            commit: ancestor,
            source,
        })?;
    let base = repo
        .merge_base(ancestor, tip)
        .map_err(|source| AncestryError::MergeBase {
            ancestor,
            tip,
            source,
        })?;
    Ok(base.is_some_and(|b| b.detach() == ancestor))
}

/// Is `ancestor` one of the few commits nearest `tip` (`tip` included)? An
/// order's branch is a commit or two past its base, and the merge base that
/// settles it otherwise loads the whole commit graph first. `false` says
/// nothing: not found that near, or a commit that cannot be read.
pub(crate) fn near_ancestor(repo: &gix::Repository, ancestor: ObjectId, tip: ObjectId) -> bool {
    const NEAR: usize = 64;
    let mut seen = HashSet::new();
    let mut next = std::collections::VecDeque::from([tip]);
    while let Some(id) = next.pop_front() {
        if id == ancestor {
            return true;
        }
        if seen.len() == NEAR || !seen.insert(id) {
            continue;
        }
        let Ok(commit) = repo.find_commit(id) else {
            return false;
        };
        next.extend(commit.parent_ids().map(|p| p.detach()));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::Landed;
    use crate::testutil::{git, new_repo, scratch};

    fn merge(root: &std::path::Path, dir: &std::path::Path, wo: &str) -> String {
        let side = git(
            root,
            dir,
            &["commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "side"],
        );
        let merge = git(
            root,
            dir,
            &[
                "commit-tree",
                "HEAD^{tree}",
                "-p",
                "HEAD",
                "-p",
                side.trim(),
                "-m",
                &format!("Merge {wo}: x\n\nArbiter-WO: {wo}\n"),
            ],
        );
        git(root, dir, &["reset", "-q", "--hard", merge.trim()]);
        merge.trim().to_owned()
    }

    /// A first read stops after the bound; later reads still take only the
    /// new commits (not the whole bound again, per landing).
    #[test]
    fn a_long_chain_is_read_to_the_bound_once_then_only_what_is_new() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        for i in 0..5 {
            git(
                &root,
                &dir,
                &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
            );
        }
        let repo = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
        let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).expect("sha");
        let mut landed = Landed {
            limit: Some(3),
            ..Landed::default()
        };
        let tip = git(&root, &dir, &["rev-parse", "HEAD"]);
        landed.update(&repo, id(tip.trim())).expect("read");
        assert_eq!(landed.shallow_boundary(), None, "the bound is no boundary");
        assert_eq!(landed.seen.len(), 3);
        let m = merge(&root, &dir, "wo-a");
        landed.update(&repo, id(&m)).expect("read");
        assert_eq!(landed.merge_of("wo-a"), Some(id(&m)));
        assert_eq!(landed.seen.len(), 4, "the new merge only");
    }

    /// A shallow clone's chain ends at its boundary: said, never an error.
    #[test]
    fn a_shallow_clone_s_chain_ends_at_its_boundary() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        for i in 0..4 {
            git(
                &root,
                &dir,
                &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
            );
        }
        let a = merge(&root, &dir, "wo-a");
        let url = format!("file://{}", dir.display());
        git(
            &root,
            &root,
            &["clone", "-q", "--depth", "2", &url, "shallow"],
        );
        let repo =
            gix::open_opts(root.join("shallow"), gix::open::Options::isolated()).expect("open");
        let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).expect("sha");
        let mut landed = Landed::default();
        landed.update(&repo, id(&a)).expect("read");
        assert_eq!(landed.merge_of("wo-a"), Some(id(&a)));
        let parent = git(&root, &dir, &["rev-parse", "HEAD^"]);
        assert_eq!(landed.shallow_boundary(), Some(id(parent.trim())));
        // The full repository's chain ends at its root.
        let full = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
        let mut landed = Landed::default();
        landed.update(&full, id(&a)).expect("read");
        assert_eq!(landed.shallow_boundary(), None);
    }

    #[test]
    fn merges_are_read_once_and_new_ones_added() {
        let (_tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        git(
            &root,
            &dir,
            &["commit", "-q", "--allow-empty", "-m", "root"],
        );
        let a = merge(&root, &dir, "wo-a");
        let repo = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
        let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).expect("sha");
        let mut landed = Landed::default();
        landed.update(&repo, id(&a)).expect("read");
        assert_eq!(landed.merge_of("wo-a"), Some(id(&a)));
        assert_eq!(landed.merge_of("wo-b"), None);
        assert_eq!(landed.shallow_boundary(), None);
        let seen = landed.seen.len();
        let b = merge(&root, &dir, "wo-b");
        landed.update(&repo, id(&b)).expect("read");
        assert_eq!(landed.merge_of("wo-b"), Some(id(&b)));
        assert_eq!(landed.seen.len(), seen + 1, "only the new commit was read");
        // Reset back past wo-b: read afresh, wo-b is gone.
        landed.update(&repo, id(&a)).expect("read");
        assert_eq!(landed.merge_of("wo-b"), None);
        assert_eq!(landed.merge_of("wo-a"), Some(id(&a)));
    }
}

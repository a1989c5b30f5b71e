//! What the integration branch says landed: the merge commits with an
//! `Arbiter-WO` trailer on its first-parent chain. Only git-arbiter's
//! landings put such commits on that chain (builders' commits arrive as
//! second parents), and an order lands once: an order whose merge is there
//! is done, whatever the notes say (a notes ref fetched back, or edited,
//! can never cause a second merge).
//!
//! The chain is read once per process, then only the commits that are new
//! since the tip it was read at: a run that lands a thousand orders reads
//! each commit once, not the whole chain per order. What was read is kept
//! on disk for the next process ([`Landed::load`], [`Landed::save`]): a
//! `status` with open orders otherwise inflates every merge of 10,000
//! landed ones.

use std::collections::{HashMap, HashSet};

use gix::bstr::ByteSlice;
use gix::ObjectId;

/// How many first-parent commits one read goes back at most: from a tip
/// read for the first time, or from a new tip to the last one read.
pub const MAX_SCAN: usize = 10_000;

/// The first line of a saved view: its format. Any other is not read.
const LANDED_MAGIC: &[u8] = b"git-arbiter landed 1\n";

/// The landed merges of one branch's first-parent chain, as far as read.
#[derive(Default, Debug)]
pub struct Landed {
    /// The tip the chain was read from.
    tip: Option<ObjectId>,
    /// The newest merge of each order.
    merges: HashMap<String, ObjectId>,
    /// The oldest commit read when the chain ends at a parent the object
    /// database does not have: a shallow clone's history begins there.
    boundary: Option<ObjectId>,
    /// [`MAX_SCAN`] unless a test says otherwise.
    limit: Option<usize>,
    /// Commits read since the view was loaded or saved.
    unsaved: usize,
}

impl Landed {
    /// Bring the view to `tip`: read the commits new since the last tip
    /// (all of them when the branch was rewritten or never read); how many
    /// commits were read.
    pub fn update(&mut self, repo: &gix::Repository, tip: ObjectId) -> Result<usize, gix::Error> {
        if self.tip == Some(tip) {
            return Ok(0);
        }
        let mut read = 0;
        let mut last_read = None;
        let mut merges = Vec::new();
        let mut joined = false;
        let mut boundary = None;
        let mut next = Some(tip);
        while let Some(id) = next {
            if Some(id) == self.tip {
                joined = true;
                break;
            }
            if read >= self.limit.unwrap_or(MAX_SCAN) {
                break;
            }
            let Some(object) = repo.try_find_object(id)? else {
                boundary = last_read;
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
            read += 1;
            last_read = Some(id);
        }
        if self.tip.is_some() && !joined {
            // Not a descendant of the tip read before (reset, rewritten):
            // what this walk read is the whole view, as a first read's.
            *self = Landed {
                limit: self.limit,
                ..Landed::default()
            };
        }
        if !joined {
            self.boundary = boundary;
        }
        // Newest first: a newer merge of an order wins over an older one.
        for (wo, id) in merges.into_iter().rev() {
            self.merges.insert(wo, id);
        }
        self.unsaved += read;
        self.tip = Some(tip);
        Ok(read)
    }

    /// Has nothing been read yet?
    pub fn is_unread(&self) -> bool {
        self.tip.is_none()
    }

    /// The view a process saved at `path`: the tip it was read at and the
    /// number of orders, then a line `<merge> <order>` per order. `None` when there is none or it
    /// is not whole. Derived data, as git's index is: the tip names the
    /// chain, and a later tip that does not descend from it reads anew.
    pub fn load(path: &std::path::Path) -> Option<Landed> {
        let text = std::fs::read(path).ok()?;
        let text = text.strip_prefix(LANDED_MAGIC)?;
        let (head, rest) = text.split_once_str(b"\n")?;
        let (tip, count) = head.split_once_str(b" ")?;
        let count: usize = count.to_str().ok()?.parse().ok()?;
        let mut merges = HashMap::new();
        for line in rest.lines() {
            let (merge, wo) = line.split_once_str(b" ")?;
            merges.insert(
                wo.to_str().ok()?.to_owned(),
                ObjectId::from_hex(merge).ok()?,
            );
        }
        // A file cut short, even at the end of a line, is not whole: a
        // merge missing from the view could let its order land again.
        if merges.len() != count || (!rest.is_empty() && !rest.ends_with(b"\n")) {
            return None;
        }
        Some(Landed {
            tip: Some(ObjectId::from_hex(tip).ok()?),
            merges,
            ..Landed::default()
        })
    }

    /// Keep the view at `path` for the next process, whole or not at all
    /// (best effort), once `after` commits were read since it was loaded or
    /// last kept: a conductor that lands one order at a time keeps it
    /// every so often. A shallow clone's view is not kept: a later fetch
    /// may deepen its history.
    pub fn save_after(&mut self, after: usize, path: &std::path::Path) {
        if self.unsaved < after {
            return;
        }
        let Some(tip) = self.tip.filter(|_| self.boundary.is_none()) else {
            return;
        };
        self.unsaved = 0;
        let mut merges: Vec<(&String, &ObjectId)> = self.merges.iter().collect();
        merges.sort_unstable();
        let mut out = LANDED_MAGIC.to_vec();
        out.extend_from_slice(format!("{tip} {}\n", merges.len()).as_bytes());
        for (wo, merge) in merges {
            out.extend_from_slice(format!("{merge} {wo}\n").as_bytes());
        }
        crate::sys::whole_file::save(path, &out);
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

    /// A scratch folder (returned second) with a repository `repo` (third)
    /// holding one commit.
    fn with_root_commit() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let (tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        crate::testutil::commit_files(&root, &dir, &[], "root");
        (tmp, root, dir)
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
        assert_eq!(landed.update(&repo, id(tip.trim())).expect("read"), 3);
        assert_eq!(landed.shallow_boundary(), None, "the bound is no boundary");
        let m = merge(&root, &dir, "wo-a");
        let read = landed.update(&repo, id(&m)).expect("read");
        assert_eq!(landed.merge_of("wo-a"), Some(id(&m)));
        assert_eq!(read, 1, "the new merge only");
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
        let (_tmp, root, dir) = with_root_commit();
        let a = merge(&root, &dir, "wo-a");
        let repo = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
        let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).expect("sha");
        let mut landed = Landed::default();
        landed.update(&repo, id(&a)).expect("read");
        assert_eq!(landed.merge_of("wo-a"), Some(id(&a)));
        assert_eq!(landed.merge_of("wo-b"), None);
        assert_eq!(landed.shallow_boundary(), None);
        let b = merge(&root, &dir, "wo-b");
        let read = landed.update(&repo, id(&b)).expect("read");
        assert_eq!(landed.merge_of("wo-b"), Some(id(&b)));
        assert_eq!(read, 1, "only the new commit was read");
        // Reset back past wo-b: read afresh, wo-b is gone.
        landed.update(&repo, id(&a)).expect("read");
        assert_eq!(landed.merge_of("wo-b"), None);
        assert_eq!(landed.merge_of("wo-a"), Some(id(&a)));
    }

    /// A saved view is where the next process starts: it reads only the
    /// commits after the saved tip, or the chain afresh when the tip it is
    /// given does not descend from it; a file cut short is no view.
    #[test]
    fn a_saved_view_is_where_the_next_process_starts() {
        let (_tmp, root, dir) = with_root_commit();
        let a = merge(&root, &dir, "wo-a");
        let b = merge(&root, &dir, "wo-b");
        let repo = gix::open_opts(&dir, gix::open::Options::isolated()).expect("open");
        let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).expect("sha");
        let saved = root.join("landed");
        let mut landed = Landed::default();
        assert_eq!(landed.update(&repo, id(&a)).expect("read"), 2);
        landed.save_after(3, &saved);
        assert!(!saved.exists(), "2 commits read of 3");
        assert_eq!(landed.update(&repo, id(&b)).expect("read"), 1);
        landed.save_after(3, &saved);
        let mut next = Landed::load(&saved).expect("3 commits read, in two reads");
        assert!(!next.is_unread());
        let c = merge(&root, &dir, "wo-c");
        assert_eq!(
            next.update(&repo, id(&c)).expect("read"),
            1,
            "the new merge only"
        );
        for (wo, at) in [("wo-a", &a), ("wo-b", &b), ("wo-c", &c)] {
            assert_eq!(next.merge_of(wo), Some(id(at)), "{wo}");
        }
        next.save_after(3, &saved);
        assert_eq!(
            Landed::load(&saved).expect("whole").merge_of("wo-c"),
            None,
            "one commit read since it was loaded"
        );
        // Another line of history from `a`: read afresh, once.
        git(&root, &dir, &["reset", "-q", "--hard", &a]);
        let d = merge(&root, &dir, "wo-d");
        let mut other = Landed::load(&saved).expect("whole");
        assert_eq!(other.update(&repo, id(&d)).expect("read"), 3);
        assert_eq!(other.merge_of("wo-b"), None);
        assert_eq!(other.merge_of("wo-d"), Some(id(&d)));
        let whole = std::fs::read(&saved).expect("read");
        std::fs::write(&saved, &whole[..whole.len() - 1]).expect("write");
        assert!(Landed::load(&saved).is_none(), "cut short");
        let last_line = whole[..whole.len() - 1]
            .iter()
            .rposition(|b| *b == b'\n')
            .expect("lines");
        std::fs::write(&saved, &whole[..=last_line]).expect("write");
        assert!(Landed::load(&saved).is_none(), "a line short");
        std::fs::write(&saved, b"garbled\n").expect("write");
        assert!(Landed::load(&saved).is_none(), "garbled");
        // A shallow clone's view is not kept.
        std::fs::remove_file(&saved).expect("remove");
        let mut shallow = Landed {
            boundary: Some(id(&a)),
            unsaved: 10,
            ..next
        };
        shallow.save_after(3, &saved);
        assert!(!saved.exists());
    }
}

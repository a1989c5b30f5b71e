//! Fetch and push through the git CLI, as git does them over any transport
//! (ssh, https, `git://`, `file://`): gix 0.90 cannot push, and its fetch
//! has no `--no-write-fetch-head` nor forced refspecs over every transport.
//! What git says is read here (`--porcelain` push lines, fetch errors);
//! callers get outcomes, not git's words.

use std::process::{Command, Output, Stdio};

use gix::ObjectId;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing was changed there: the remote could not be reached (or git
    /// could not talk to it).
    #[error("{said}")]
    Unreachable { said: String },
    /// The remote refused the push (a hook, a permission): `said` names the refs.
    #[error("{said}")]
    Refused { said: String },
    /// A ref named in a fetch refspec (not a pattern) is not on the remote.
    #[error("{said}")]
    NoSuchRef { said: String },
    #[error("running git {what}: {source}")]
    Spawn {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// What a pushed ref must be on the remote for the push to go through.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    Is(ObjectId),
    Absent,
    /// Anything: a ref only its writer moves.
    Any,
}

impl Expect {
    /// `Is(tip)`, or `Absent` when there is no tip.
    pub fn tip(tip: Option<ObjectId>) -> Expect {
        tip.map_or(Expect::Absent, Expect::Is)
    }
}

/// One ref a push moves: `to` onto `name` on the remote, if it is as
/// `expect` says there now.
#[derive(Clone, Debug)]
pub struct RefUpdate {
    pub name: String,
    pub expect: Expect,
    pub to: ObjectId,
}

/// How a push went.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed {
    Accepted,
    /// A ref was not as expected there, or another push held its lock: a
    /// race lost. Nothing was changed (the push is atomic).
    Stale,
}

/// Push `updates` to `remote` as one atomic compare-and-swap
/// (`--force-with-lease` per ref, `--atomic`).
pub fn push(repo: &gix::Repository, remote: &str, updates: &[RefUpdate]) -> Result<Pushed, Error> {
    let out = git(repo, "push", |cmd| {
        // State transitions are not the user's pushes: their pre-push hook is not for these.
        cmd.args(["push", "--atomic", "--porcelain", "--no-verify"]);
        for u in updates {
            match u.expect {
                Expect::Is(id) => cmd.arg(format!("--force-with-lease={}:{id}", u.name)),
                Expect::Absent => cmd.arg(format!("--force-with-lease={}:", u.name)),
                Expect::Any => cmd,
            };
        }
        cmd.arg(remote);
        for u in updates {
            let force = if matches!(u.expect, Expect::Any) {
                "+"
            } else {
                ""
            };
            cmd.arg(format!("{force}{}:{}", u.to, u.name));
        }
    })?;
    if out.status.success() {
        return Ok(Pushed::Accepted);
    }
    // `--porcelain`: one line per ref, "!" for one not pushed.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rejected: Vec<&str> = stdout.lines().filter(|l| l.starts_with('!')).collect();
    if rejected.is_empty() {
        return Err(Error::Unreachable { said: said(&out) });
    }
    // A race lost on the server: the lease did not hold, or another push
    // held the ref's lock (an atomic push then fails whole).
    let lost_race = |l: &&str| {
        [
            "stale info",
            "fetch first",
            "non-fast-forward",
            "lock",
            "atomic",
            "incorrect old value",
        ]
        .iter()
        .any(|why| l.contains(why))
    };
    if rejected.iter().all(lost_race) {
        return Ok(Pushed::Stale);
    }
    Err(Error::Refused {
        said: rejected.join("; "),
    })
}

/// Fetch `refspecs` from `remote`: no tags, no FETCH_HEAD (two processes in
/// one clone would write it at once), no submodules, no gc or maintenance
/// started from the fetch; the negotiation offers only `tips` (those that
/// exist here) when any is given.
pub fn fetch(
    repo: &gix::Repository,
    remote: &str,
    refspecs: &[String],
    tips: &[String],
) -> Result<(), Error> {
    // Fetches of the same refs by two threads or processes of this clone
    // race for its local copies, and git fails the slower one: they take
    // turns. Where the lock cannot be had (a read-only git dir), the
    // retries below still cover it.
    let _one_at_a_time = one_fetch_at_a_time(repo);
    let mut tries = 0;
    loop {
        match fetch_once(repo, remote, refspecs, tips) {
            // Another fetch moved or held the same local copies meanwhile:
            // the remote answered; the refs are forced (`+`), so fetching
            // again is safe.
            Err(Error::Unreachable { said }) if said.contains("cannot lock ref") => {
                tries += 1;
                if tries >= LOCAL_RACE_RETRIES {
                    return Err(Error::Unreachable { said });
                }
                std::thread::sleep(race_pause(tries));
            }
            done => return done,
        }
    }
}

fn one_fetch_at_a_time(repo: &gix::Repository) -> Option<crate::sys::flock::Held> {
    let path = crate::git::layout::fetch_lock(repo);
    std::fs::create_dir_all(path.parent()?).ok()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()?;
    crate::sys::flock::Held::wait(file).ok()
}

/// Does `remote` fetch over the plain TCP git protocol (`git://`)?
fn plain_tcp(repo: &gix::Repository, remote: &str) -> bool {
    repo.find_remote(remote)
        .ok()
        .and_then(|r| {
            r.url(gix::remote::Direction::Fetch)
                .map(|url| url.scheme == gix::url::Scheme::Git)
        })
        .unwrap_or(false)
}

/// How often a fetch that lost the race for its local refs (to a fetch
/// not of ours: the user's `git fetch`) is made again: at most about 1.5 s
/// of pauses in all.
const LOCAL_RACE_RETRIES: u64 = 24;

/// The pause before try `tries + 1`: longer each time, up to 50 ms, and
/// jittered, so that a fetch in a loop beside us (a script's, an editor's)
/// does not win every time by starting in step with ours.
fn race_pause(tries: u64) -> std::time::Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| u64::from(t.subsec_nanos()));
    let base = (5 * tries).min(50);
    std::time::Duration::from_millis(base / 2 + nanos % (base + 1))
}

fn fetch_once(
    repo: &gix::Repository,
    remote: &str,
    refspecs: &[String],
    tips: &[String],
) -> Result<(), Error> {
    let out = git(repo, "fetch", |cmd| {
        if plain_tcp(repo, remote) {
            // Over git:// each protocol-v2 request stalls about 40 ms
            // (small writes, Nagle's algorithm against delayed ACKs: neither
            // git's client nor its daemon sets TCP_NODELAY), measured here
            // at 50 ms a fetch against 10 ms with v0, whose one ref
            // advertisement a push reads anyway.
            cmd.args(["-c", "protocol.version=0"]);
        }
        cmd.args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            "--no-auto-gc",
            "--no-auto-maintenance",
        ]);
        for tip in tips {
            if repo
                .try_find_reference(tip.as_str())
                .ok()
                .flatten()
                .is_some()
            {
                cmd.arg(format!("--negotiation-tip={tip}"));
            }
        }
        cmd.arg(remote).args(refspecs);
    })?;
    if out.status.success() {
        return Ok(());
    }
    let said = said(&out);
    if said.contains("couldn't find remote ref") {
        return Err(Error::NoSuchRef { said });
    }
    Err(Error::Unreachable { said })
}

fn git(
    repo: &gix::Repository,
    what: &'static str,
    args: impl FnOnce(&mut Command),
) -> Result<Output, Error> {
    let mut cmd = Command::new("git");
    for var in crate::git::config_env::GIT_ENV {
        cmd.env_remove(var);
    }
    // From the top of the worktree (the git dir when bare), as git runs
    // from a subfolder: a relative remote URL means the same thing.
    let top = repo.workdir().unwrap_or(repo.git_dir());
    // A remote that asks for a password fails instead of waiting for one.
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .current_dir(repo.current_dir().join(top))
        .arg("--git-dir")
        .arg(repo.current_dir().join(repo.git_dir()))
        .stdin(Stdio::null());
    args(&mut cmd);
    cmd.output().map_err(|source| Error::Spawn { what, source })
}

/// What git said on stderr, on one line.
fn said(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        format!("git {}", out.status)
    } else {
        lines.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{git, new_repo, scratch};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};

    const MAIN: &str = "+refs/heads/main:refs/remotes/origin/main";

    /// `<root>/remote.git` with one commit on `main`, and `<root>/clone` of it.
    fn remote_and_clone(root: &Path) -> (PathBuf, PathBuf) {
        let src = new_repo(root, "src");
        git(root, &src, &["commit", "-q", "--allow-empty", "-m", "0"]);
        git(root, root, &["clone", "-q", "--bare", "src", "remote.git"]);
        git(root, root, &["clone", "-q", "remote.git", "clone"]);
        (root.join("remote.git"), root.join("clone"))
    }

    /// Move the remote's `main` to a new commit on it.
    fn move_main(root: &Path, remote: &Path, i: usize) {
        let tree = git(root, remote, &["rev-parse", "main^{tree}"]);
        let message = i.to_string();
        let args = ["commit-tree", tree.trim(), "-p", "main", "-m", &message];
        let commit = git(root, remote, &args);
        git(
            root,
            remote,
            &["update-ref", "refs/heads/main", commit.trim()],
        );
    }

    /// Two threads of one conductor (the dispatch and the halt watch)
    /// fetch the same refs while the remote moves: git refuses the slower
    /// one's ref update ("cannot lock ref … is at … but expected …"),
    /// which is no sign of an unreachable remote.
    #[test]
    fn fetches_racing_for_the_same_refs_in_one_clone_all_succeed() {
        let (_tmp, root) = scratch();
        let (remote, clone) = remote_and_clone(&root);
        let repo = gix::open(clone).expect("open").into_sync();
        let refspecs = [MAIN.to_owned()];
        let tips = ["refs/remotes/origin/main".to_owned()];
        std::thread::scope(|s| {
            s.spawn(|| (0..60).for_each(|i| move_main(&root, &remote, i)));
            for _ in 0..3 {
                s.spawn(|| {
                    let repo = repo.to_thread_local();
                    for _ in 0..30 {
                        if let Err(e) = fetch(&repo, "origin", &refspecs, &tips) {
                            panic!("a fetch failed: {e}");
                        }
                    }
                });
            }
        });
    }

    /// The user's own `git fetch` (which takes no turn with ours) moving
    /// the same remote-tracking ref meanwhile: ours is made again.
    #[test]
    fn a_fetch_racing_the_users_git_fetch_succeeds() {
        let (_tmp, root) = scratch();
        let (remote, clone) = remote_and_clone(&root);
        let repo = gix::open(&clone).expect("open");
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0;
                while !done.load(Ordering::SeqCst) {
                    move_main(&root, &remote, i);
                    // Whether the user's fetch loses a race is git's business.
                    let _ = crate::testutil::git_command(&root, &clone)
                        .args(["fetch", "-q", "origin", MAIN])
                        .output();
                    i += 1;
                }
            });
            for _ in 0..40 {
                if let Err(e) = fetch(&repo, "origin", &[MAIN.to_owned()], &[]) {
                    done.store(true, Ordering::SeqCst);
                    panic!("a fetch failed: {e}");
                }
            }
            done.store(true, Ordering::SeqCst);
        });
    }
}

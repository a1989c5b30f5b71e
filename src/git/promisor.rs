//! Partial clones (`git clone --filter=blob:none`): the blobs (or trees) of a
//! commit may exist only on a promisor remote. Stock git fetches what a
//! checkout lacks in one batch before it writes files; gix 0.90 reads only
//! what is local and cannot fetch from a promisor remote, so before a
//! checkout [`fetch_missing`] does what git's checkout does, with git.

use std::io::Write;
use std::process::{Command, Stdio};

use gix::ObjectId;

use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading commit {commit}: {source}")]
    ReadCommit {
        commit: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading the tree of {commit}: {source}")]
    CommitTree {
        commit: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading tree {tree}: {source}")]
    ReadTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("decoding tree {tree}: {source}")]
    DecodeTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// The remotes missing objects may be fetched from, in the order git tries
/// them: `remote.<name>.promisor = true`, then `extensions.partialClone`.
fn promisor_remotes(repo: &gix::Repository) -> Vec<String> {
    let config = repo.config_snapshot();
    let mut remotes: Vec<String> = repo
        .remote_names()
        .into_iter()
        .map(|name| name.to_string())
        .filter(|name| {
            config
                .boolean(format!("remote.{name}.promisor").as_str())
                .unwrap_or(false)
        })
        .collect();
    if let Some(name) = config
        .string("extensions.partialClone")
        .map(|v| v.to_string())
    {
        if !remotes.contains(&name) {
            remotes.push(name);
        }
    }
    remotes
}

/// The objects of `commit`'s tree a checkout needs that are not local: trees
/// and blobs (submodule commits are not checked out). A missing tree hides
/// what it holds; it is listed itself, and looked into once fetched.
fn missing_objects(repo: &gix::Repository, commit: ObjectId) -> Result<Vec<ObjectId>> {
    let tree = repo
        .find_commit(commit)
        .map_err(|source| Error::ReadCommit { commit, source })?
        .tree_id()
        .map_err(|source| Error::CommitTree { commit, source })?
        .detach();
    let mut missing = Vec::new();
    let mut pending = vec![tree];
    while let Some(id) = pending.pop() {
        if !repo.has_object(id) {
            missing.push(id);
            continue;
        }
        let tree = repo
            .find_tree(id)
            .map_err(|source| Error::ReadTree { tree: id, source })?;
        for entry in tree.iter() {
            let entry = entry.map_err(|source| Error::DecodeTree { tree: id, source })?;
            let (mode, oid) = (entry.mode(), entry.oid().to_owned());
            if mode.is_tree() {
                pending.push(oid);
            } else if mode.is_blob_or_symlink() && !repo.has_object(oid) {
                missing.push(oid);
            }
        }
    }
    Ok(missing)
}

/// Make every object a checkout of `commit` needs local. A repository
/// without a promisor remote has nothing to fetch (a missing object there is
/// corruption, which the checkout reports). Objects no promisor remote could
/// send are an input error naming the remote and what git said: nothing was
/// checked out, and the user can restore the remote.
pub fn fetch_missing(repo: &gix::Repository, commit: ObjectId) -> Result<()> {
    let remotes = promisor_remotes(repo);
    if remotes.is_empty() {
        return Ok(());
    }
    let mut failures = Vec::new();
    // Fetching a missing tree brings all trees below it (the fetch filters
    // blobs only): at most two passes per remote, trees then blobs.
    for remote in &remotes {
        for _ in 0..2 {
            let missing = missing_objects(repo, commit)?;
            if missing.is_empty() {
                return Ok(());
            }
            if let Err(e) = fetch(repo, remote, &missing) {
                failures.push(format!("remote '{remote}': {e}"));
                break;
            }
        }
    }
    let missing = missing_objects(repo, commit)?;
    if missing.is_empty() {
        return Ok(());
    }
    let why = if failures.is_empty() {
        "the promisor remotes did not send them".to_owned()
    } else {
        failures.join("; ")
    };
    Err(InputError::new(format!(
        "{} objects of {} are not in this partial clone and could not be fetched: {why}",
        missing.len(),
        commit.to_hex_with_len(12)
    ))
    .hint(format!(
        "make the promisor remote ({}) reachable again, see 'git remote -v'; nothing was checked out",
        remotes.join(", ")
    ))
    .into())
}

/// Fetch `ids` from promisor remote `remote` in one batch, with the command
/// git's own checkout runs for that (`promisor-remote.c`): no negotiation,
/// no tags, no FETCH_HEAD, objects named on stdin. Err: what git said.
fn fetch(
    repo: &gix::Repository,
    remote: &str,
    ids: &[ObjectId],
) -> std::result::Result<(), String> {
    let git_dir = repo.current_dir().join(repo.git_dir());
    let mut cmd = Command::new("git");
    for var in crate::git::config_env::GIT_ENV {
        cmd.env_remove(var);
    }
    cmd.arg("--git-dir")
        .arg(&git_dir)
        .args(["-c", "fetch.negotiationAlgorithm=noop", "fetch", remote])
        .args([
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            "--filter=blob:none",
            "--stdin",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run git: {e}"))?;
    let list: String = ids.iter().map(|id| format!("{id}\n")).collect();
    // git reads all of stdin before it writes much: no deadlock on stderr.
    if let Some(mut stdin) = child.stdin.take() {
        // A git that exits early closes the pipe; its status and stderr say why.
        let _ = stdin.write_all(list.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for git: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let said: Vec<&str> = std::str::from_utf8(&out.stderr)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    Err(if said.is_empty() {
        format!("'git fetch' {}", out.status)
    } else {
        said.join(" ")
    })
}

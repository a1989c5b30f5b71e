//! Helpers for the library's unit tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Stock git with nothing of the user's (its global configuration is
/// `<root>/global.gitconfig`), in `dir`; panics on failure.
pub(crate) fn git(root: &Path, dir: &Path, args: &[&str]) -> String {
    let out = git_command(root, dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Stock git in `dir` with nothing of the user's (see [`git`]), to be given
/// its arguments and run as the caller needs (stdin, status).
pub(crate) fn git_command(root: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", root.join("global.gitconfig"))
        .env("GIT_AUTHOR_NAME", "Arbiter Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Arbiter Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com");
    cmd
}

/// Stock git (as [`git_command`]) with `input` on its stdin: its output.
pub(crate) fn git_with_input(
    root: &Path,
    dir: &Path,
    args: &[&str],
    input: &[u8],
) -> std::process::Output {
    run_with_input(git_command(root, dir).args(args), input)
}

/// Run `cmd` with `input` on its stdin: its output.
pub(crate) fn run_with_input(cmd: &mut Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().expect("stdin").write_all(input)?;
            child.wait_with_output()
        })
        .expect("the command runs")
}

/// A scratch folder for one test (its canonical path; gone when the guard
/// drops), holding the empty global configuration [`git`] points at.
pub(crate) fn scratch() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().canonicalize().expect("canonical");
    std::fs::write(root.join("global.gitconfig"), "").expect("global config");
    (tmp, root)
}

/// A new, empty repository `<root>/<name>` on branch `main`.
pub(crate) fn new_repo(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).expect("mkdir");
    git(root, &dir, &["init", "-q", "-b", "main"]);
    dir
}

/// A copy of the repository `seed` at `<root>/<name>` (`cp -a`: new inodes
/// and change times, so its index's stat data are stale).
pub(crate) fn copy_of(root: &Path, seed: &Path, name: &str) -> PathBuf {
    let copy = root.join(name);
    let status = Command::new("cp")
        .arg("-a")
        .arg(seed)
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(status.success());
    copy
}

/// A tiny seeded generator (xorshift64*): the same cases on every run.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---- random trees, for the checkout tests ------------------------------------

/// One entry of a generated tree.
#[derive(Clone, Debug)]
pub(crate) enum Entry {
    File { text: String, executable: bool },
    Link(String),
}

/// A random tree over a three-letter alphabet at most three deep, so that
/// two trees often turn a file into a folder and back. No path is both a
/// file and a prefix of another.
pub(crate) fn random_tree(rng: &mut Rng) -> Vec<(String, Entry)> {
    let mut tree: Vec<(String, Entry)> = Vec::new();
    for _ in 0..rng.below(12) + 1 {
        let depth = rng.below(3) + 1;
        let path: Vec<&str> = (0..depth)
            .map(|_| ["a", "b", "c"][rng.below(3) as usize])
            .collect();
        let path = path.join("/");
        let clashes = tree.iter().any(|(p, _)| {
            *p == path || p.starts_with(&format!("{path}/")) || path.starts_with(&format!("{p}/"))
        });
        if clashes {
            continue;
        }
        let entry = match rng.below(5) {
            0 => Entry::Link(["a", "../b", "nowhere"][rng.below(3) as usize].into()),
            k => Entry::File {
                text: format!("{}\n", rng.below(3)),
                executable: k == 1,
            },
        };
        tree.push((path, entry));
    }
    tree
}

/// Replace everything but `.git` in `dir` with `tree`; return the commit.
pub(crate) fn commit_tree(
    root: &Path,
    dir: &Path,
    tree: &[(String, Entry)],
    message: &str,
) -> String {
    for entry in std::fs::read_dir(dir).expect("dir").flatten() {
        if entry.file_name() != ".git" {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                std::fs::remove_dir_all(&path).expect("rm -r");
            } else {
                std::fs::remove_file(&path).expect("rm");
            }
        }
    }
    for (path, entry) in tree {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        match entry {
            Entry::File { text, executable } => {
                std::fs::write(&path, text).expect("write");
                let mode = if *executable { 0o755 } else { 0o644 };
                std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode))
                    .expect("chmod");
            }
            Entry::Link(target) => std::os::unix::fs::symlink(target, &path).expect("symlink"),
        }
    }
    git(root, dir, &["add", "-A"]);
    git(root, dir, &["commit", "-q", "--allow-empty", "-m", message]);
    git(root, dir, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// What a checkout left: the index (`git ls-files -s`), every file of the
/// worktree with its kind, mode and content, and whether git sees any
/// difference between index and files without rehashing (stale stat data).
pub(crate) fn outcome(root: &Path, dir: &Path) -> (String, Vec<String>, String) {
    fn walk(top: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("dir").flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(top)
                .expect("inside")
                .display()
                .to_string();
            if rel == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).expect("meta");
            if meta.is_symlink() {
                let target = std::fs::read_link(&path).expect("link");
                out.push(format!("{rel} -> {}", target.display()));
            } else if meta.is_dir() {
                out.push(format!("{rel}/"));
                walk(top, &path, out);
            } else {
                let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111;
                let text = std::fs::read_to_string(&path).expect("read");
                out.push(format!("{rel} x={} {text:?}", mode != 0));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    let index = git(root, dir, &["ls-files", "-s"]);
    let stale = git(root, dir, &["diff-files", "--name-status"]);
    (index, files, stale)
}

// ---- commits and work orders, for the merge, queue and recovery tests -------

/// Write `files` (path, text) in `dir`, commit everything with `message`
/// and return the new commit.
pub(crate) fn commit_files(
    root: &Path,
    dir: &Path,
    files: &[(&str, &str)],
    message: &str,
) -> gix::ObjectId {
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
    }
    git(root, dir, &["add", "-A"]);
    git(root, dir, &["commit", "-q", "--allow-empty", "-m", message]);
    rev(root, dir, "HEAD")
}

/// The object `rev` names in the repository at `dir`.
pub(crate) fn rev(root: &Path, dir: &Path, rev: &str) -> gix::ObjectId {
    let hex = git(root, dir, &["rev-parse", "--verify", rev]);
    gix::ObjectId::from_hex(hex.trim().as_bytes()).expect("an object id")
}

/// A work order `id` declaring `files` (none: it may touch anything), with
/// no dependencies, its file at `<id>.md`.
pub(crate) fn work_order(id: &str, files: &[&str]) -> crate::state::orders::WorkOrder {
    crate::state::orders::WorkOrder {
        id: id.into(),
        title: format!("title of {id}"),
        path: PathBuf::from(format!("{id}.md")),
        deps: Vec::new(),
        files: files
            .iter()
            .map(|f| crate::state::scope::Entry::parse(f).expect("a valid entry"))
            .collect(),
        task: String::new(),
        allow_empty: false,
        lines: Default::default(),
    }
}

/// A repository whose `main` (checked out) starts at `base`, holding
/// `a.txt` and `b.txt`, opened with nothing of the user's; its work orders'
/// records in `refs/notes/arbiter`.
pub(crate) struct TestRepo {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub dir: PathBuf,
    pub ctx: crate::state::context::Context,
    pub main: gix::refs::FullName,
    pub base: gix::ObjectId,
}

impl TestRepo {
    pub(crate) fn new() -> TestRepo {
        let (tmp, root) = scratch();
        let dir = new_repo(&root, "repo");
        let base = commit_files(
            &root,
            &dir,
            &[("a.txt", "one\n"), ("b.txt", "two\n")],
            "base",
        );
        TestRepo {
            ctx: Self::open(&dir),
            _tmp: tmp,
            root,
            dir,
            main: "refs/heads/main".try_into().expect("a branch name"),
            base,
        }
    }

    /// The repository at `dir` as git-arbiter opens it, with an identity.
    pub(crate) fn open(dir: &Path) -> crate::state::context::Context {
        crate::state::context::Context::isolated(dir, &["user.name=t", "user.email=t@t"])
            .expect("open")
    }

    pub(crate) fn store(&self) -> crate::state::Store<'_> {
        crate::state::Store::new(&self.ctx.repo, 3)
    }

    /// `files` committed on `main`: its new tip.
    pub(crate) fn on_main(&self, files: &[(&str, &str)]) -> gix::ObjectId {
        commit_files(&self.root, &self.dir, files, "on main")
    }

    /// The work of order `id`: `files` committed on `arbiter/<id>` off
    /// `base`, `main` checked out again. Its tip.
    pub(crate) fn work(&self, id: &str, files: &[(&str, &str)]) -> gix::ObjectId {
        let branch = format!("arbiter/{id}");
        let base = self.base.to_string();
        git(
            &self.root,
            &self.dir,
            &["checkout", "-q", "-b", &branch, &base],
        );
        let tip = commit_files(&self.root, &self.dir, files, &format!("work of {id}"));
        git(&self.root, &self.dir, &["checkout", "-q", "main"]);
        tip
    }

    /// Where `main` is.
    pub(crate) fn tip(&self) -> gix::ObjectId {
        self.ctx.branch_tip(&self.main).expect("tip")
    }

    /// Order `id` in progress, its attempt 1 held by `owner`.
    pub(crate) fn dispatch(&self, id: &str, owner: &str) {
        self.change(id, |r| {
            r.dispatch(owner, self.base.to_string(), "dispatch", String::new())
        });
    }

    /// Change the record of `id` (a fresh one if it has none) in one transition.
    pub(crate) fn change(&self, id: &str, mut change: impl FnMut(&mut crate::state::Record)) {
        self.store()
            .transact("test", |txn| -> Result<(), crate::state::Error> {
                let mut r = txn.record(id, false)?;
                change(&mut r);
                txn.put(r);
                Ok(())
            })
            .expect("a transition");
    }

    /// The stored record of `id`.
    pub(crate) fn record(&self, id: &str) -> Option<crate::state::Record> {
        let store = self.store();
        let mut snapshot = store.snapshot().expect("snapshot");
        snapshot.record(id).expect("read")
    }
}

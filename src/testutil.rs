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

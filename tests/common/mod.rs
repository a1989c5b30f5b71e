//! Hermetic harness: the real binary against real temporary repositories made
//! with stock git (the oracle). Temp HOME, no global or system config, fixed
//! dates, `LC_ALL=C`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The identity every commit of the harness is made with.
pub const IDENTITY: &[&str] = &["user.name=Arbiter Test", "user.email=test@example.com"];

pub struct TestEnv {
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    /// The main repository (created by `TestEnv::new`).
    pub repo: PathBuf,
    pub slot_dir: PathBuf,
    extra_env: BTreeMap<String, String>,
}

/// What one run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// stdout, stderr and the exit status in one text, for snapshots.
    pub fn snapshot(&self, env: &TestEnv) -> String {
        env.redact(&format!(
            "{}[stderr]\n{}[exit status: {}]\n",
            self.stdout, self.stderr, self.code
        ))
    }

    #[track_caller]
    pub fn success(self) -> Self {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn code(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "expected exit {code}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Wait for a conductor that was stopped or interrupted: it ends with exit 130.
pub fn assert_interrupted(child: std::process::Child) {
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The event names of a `git arbiter log --json` document, oldest first.
pub fn event_names(log: &serde_json::Value) -> Vec<&str> {
    log["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["event"].as_str().expect("event"))
        .collect()
}

/// Wait (up to 30 s) until `path` exists.
#[track_caller]
pub fn wait_for(path: &Path) {
    for _ in 0..600 {
        if path.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} never appeared", path.display());
}

/// A shell snippet for builds that append `start <time>` lines to `trace`:
/// wait (up to 10 s) until a second build has started. Tests of a slot cap
/// use it so that builds that may overlap always do, instead of hoping a
/// sleep is long enough on a loaded machine.
pub fn meet_second_start(trace: &Path) -> String {
    format!(
        "i=0; while [ \"$(grep -c '^start ' {t})\" -lt 2 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
        t = trace.display()
    )
}

/// Check `cond` every 5 ms until it holds; panic naming `what` after 60 s
/// (a generous deadline: a regression fails instead of hanging).
#[track_caller]
pub fn poll_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Is process `pid` blocked waiting for an flock on `path`? `/proc/locks`
/// lists each blocked waiter as a `->` line below the lock it waits for:
/// `1: -> FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`.
pub fn waits_for_flock(pid: u32, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(inode) = std::fs::metadata(path).map(|m| m.ino().to_string()) else {
        return false;
    };
    let pid = pid.to_string();
    let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks");
    locks.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        matches!(
            fields[..],
            [_, "->", "FLOCK", _, _, who, file, ..]
                if who == pid && file.rsplit(':').next() == Some(inode.as_str())
        )
    })
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_git-arbiter"))
}

impl TestEnv {
    /// Where git-arbiter puts its worktrees by default.
    pub fn worktree_root(&self) -> PathBuf {
        self.root.join("repo.arbiter")
    }

    /// `git arbiter worktree add <id>`: branch `arbiter/<id>` and its worktree's path.
    pub fn add_worktree(&self, id: &str) -> PathBuf {
        self.run(&["worktree", "add", id]).success();
        self.worktree_root().join(id)
    }

    /// What `git worktree list --porcelain` (run in `dir`) shows besides
    /// the main worktree and the free worktrees of git-arbiter's pool
    /// (`<worktreeDir>/pool/<n>` on a detached HEAD, ready for the next
    /// order; each must be clean for stock git): one path per worktree.
    #[track_caller]
    pub fn linked_worktrees_in(&self, dir: &Path) -> Vec<String> {
        let list = self.git_in(dir, &["worktree", "list", "--porcelain"]);
        let mut out = Vec::new();
        for (i, block) in list
            .split("\n\n")
            .filter(|b| !b.trim().is_empty())
            .enumerate()
        {
            let path = block
                .lines()
                .find_map(|l| l.strip_prefix("worktree "))
                .unwrap_or_default();
            if i == 0 {
                continue;
            }
            let pooled = Path::new(path)
                .parent()
                .is_some_and(|p| p.ends_with("pool") && p.to_string_lossy().contains(".arbiter"));
            if pooled && block.lines().any(|l| l == "detached") {
                let status = self.git_in(Path::new(path), &["status", "--porcelain"]);
                assert_eq!(status, "", "a free pooled worktree must be clean: {path}");
                continue;
            }
            out.push(path.to_owned());
        }
        out
    }

    /// The worktree that has `branch` (short name) checked out, if any: a
    /// kept one is wherever the pool put it.
    pub fn worktree_of(&self, branch: &str) -> Option<PathBuf> {
        let list = self.git(&["worktree", "list", "--porcelain"]);
        list.split("\n\n")
            .find(|b| {
                b.lines()
                    .any(|l| l == format!("branch refs/heads/{branch}"))
            })
            .and_then(|b| b.lines().find_map(|l| l.strip_prefix("worktree ")))
            .map(PathBuf::from)
    }

    /// [`TestEnv::linked_worktrees_in`] the repository.
    #[track_caller]
    pub fn linked_worktrees(&self) -> Vec<String> {
        self.linked_worktrees_in(&self.repo)
    }

    /// Stage everything in `dir` and commit it.
    pub fn commit_in(&self, dir: &Path, message: &str) {
        self.git_in(dir, &["add", "-A"]);
        self.git_in(dir, &["commit", "-q", "-m", message]);
    }

    /// The commit `rev` names in the main repository.
    pub fn rev(&self, rev: &str) -> String {
        self.git(&["rev-parse", rev]).trim().to_owned()
    }

    /// How many merges on `branch`'s first-parent chain (in the repository
    /// at `dir`) carry `Arbiter-WO: <id>`.
    pub fn merges_in(&self, dir: &Path, branch: &str, id: &str) -> usize {
        self.git_in(
            dir,
            &["log", "--first-parent", "--merges", "--format=%B", branch],
        )
        .lines()
        .filter(|l| *l == format!("Arbiter-WO: {id}"))
        .count()
    }

    /// How many builds ran, for builds that append a line to `<root>/runs`.
    pub fn runs(&self) -> usize {
        std::fs::read_to_string(self.root.join("runs"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// A fresh environment with an initialized repository `repo` on branch `main`.
    pub fn new() -> TestEnv {
        let dir = tempfile::Builder::new()
            .prefix("arbiter-test")
            .tempdir()
            .expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let home = root.join("home");
        std::fs::create_dir_all(&home).expect("home");
        let slot_dir = root.join("slots");
        std::fs::write(root.join("global.gitconfig"), "").expect("global config");
        let env = TestEnv {
            _root: dir,
            repo: root.join("repo"),
            home,
            slot_dir,
            root,
            extra_env: BTreeMap::new(),
        };
        env.git_in(&env.root, &["init", "-q", "-b", "main", "repo"]);
        env
    }

    /// The repository opened in this process as the binary sees it, and
    /// nothing of the user's: no global or system config, no `GIT_*`
    /// variables, the harness's identity.
    pub fn context(&self) -> git_arbiter::state::context::Context {
        git_arbiter::state::context::Context::isolated(&self.repo, IDENTITY)
            .expect("open the repository")
    }

    pub fn set_env(&mut self, key: &str, value: &str) {
        self.extra_env.insert(key.into(), value.into());
    }

    pub fn unset_env(&mut self, key: &str) {
        self.extra_env.remove(key);
    }

    fn apply_env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("LC_ALL", "C")
            // A file of its own, never /dev/null: run as root, a test that
            // writes global config would otherwise replace /dev/null itself.
            .env("GIT_CONFIG_GLOBAL", self.root.join("global.gitconfig"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Arbiter Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Arbiter Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .env("ARBITER_SLOT_DIR", &self.slot_dir)
            .env("NO_COLOR", "1");
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
    }

    /// A `Command` for the binary with the hermetic environment, cwd = `dir`.
    pub fn command_in(&self, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        self.apply_env(&mut cmd);
        cmd.current_dir(dir).args(args).stdin(Stdio::null());
        cmd
    }

    /// Spawn the binary in `dir`, held at a start line until the file `go`
    /// exists, so that many processes can be released at the same moment.
    pub fn spawn_at_start_line(&self, dir: &Path, args: &[&str], go: &Path) -> std::process::Child {
        let cmd = self.command_in(dir, args);
        let mut shell = Command::new("sh");
        shell
            .arg("-c")
            .arg(format!(
                ": > '{go}.ready.'$$; while [ ! -e '{go}' ]; do :; done; exec \"$0\" \"$@\"",
                go = go.display()
            ))
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .current_dir(dir)
            .env_clear()
            .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        shell.spawn().expect("spawn")
    }

    /// Release processes held by `spawn_at_start_line` and require that each succeeds.
    #[track_caller]
    pub fn release_all(&self, go: &Path, children: Vec<std::process::Child>) {
        // Every child at the start line (its ready file written) before the go.
        let ready = format!("{}.ready.", go.file_name().expect("go").to_string_lossy());
        let dir = go.parent().expect("go has a directory");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let at_line = std::fs::read_dir(dir)
                .expect("go directory")
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&ready))
                .count();
            if at_line == children.len() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{at_line} of {} ready",
                children.len()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::write(go, "").expect("go");
        // Exit 5: everything left was the other conductor's to finish.
        for child in children {
            let out = child.wait_with_output().expect("wait");
            assert!(
                matches!(out.status.code(), Some(0 | 5)),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        let output = self
            .command_in(dir, args)
            .output()
            .expect("run git-arbiter");
        to_run(output)
    }

    /// Run the binary in the main repository.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_in(&self.repo, args)
    }

    /// Run stock git in `dir`; panics on failure.
    pub fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let run = self.git_try_in(dir, args);
        assert_eq!(
            run.code, 0,
            "git {args:?} failed:\n{}{}",
            run.stdout, run.stderr
        );
        run.stdout
    }

    pub fn git_try_in(&self, dir: &Path, args: &[&str]) -> Run {
        let mut cmd = Command::new("git");
        self.apply_env(&mut cmd);
        let output = cmd
            .current_dir(dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run git");
        to_run(output)
    }

    /// Run stock git in the main repository.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.repo, args)
    }

    /// Stock git's `worktree add -q -b <branch> <path>`: a linked worktree
    /// made by hand, as a user (or a killed run) leaves one.
    pub fn git_worktree_add(&self, branch: &str, path: &Path) {
        self.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            branch,
            path.to_str().expect("utf-8"),
        ]);
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.repo.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, content).expect("write");
    }

    /// Install `script` as the executable git hook `name` of the repository.
    pub fn hook(&self, name: &str, script: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.repo.join(".git/hooks").join(name);
        std::fs::write(&path, script).expect("hook");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    /// Write a work order `work-orders/<id>.md`; with no `files`, without a
    /// `## Files to touch` section (the order may touch anything).
    pub fn work_order(&self, id: &str, title: &str, deps: &[&str], files: &[&str]) {
        let mut text = format!("# {title}\n\n");
        if !deps.is_empty() {
            text.push_str("## Depends on\n");
            for d in deps {
                text.push_str(&format!("- {d}\n"));
            }
            text.push('\n');
        }
        if !files.is_empty() {
            text.push_str("## Files to touch\n");
            for f in files {
                text.push_str(&format!("- {f}\n"));
            }
            text.push('\n');
        }
        text.push_str(&format!("## Task\nDo {title}.\n"));
        self.write(&format!("work-orders/{id}.md"), &text);
    }

    /// What a merge-back leaves when killed after moving the branch: the
    /// checked-out `main` at a merge (with merge-back's trailers) of a side
    /// commit that writes `path`. Returns the merge.
    pub fn landed_merge(&self, wo: &str, attempt: u32, path: &str) -> String {
        let base = self.git(&["rev-parse", "HEAD"]).trim().to_owned();
        self.git(&["checkout", "-q", "-b", &format!("side-{wo}-{attempt}")]);
        self.write(path, &format!("{wo} {attempt}\n"));
        let side = self.commit_all("work");
        self.git(&["checkout", "-q", "main"]);
        let tree = self.git(&["merge-tree", "--write-tree", "main", &side]);
        let merge = self.git(&[
            "commit-tree",
            tree.trim(),
            "-p",
            &base,
            "-p",
            &side,
            "-m",
            &format!("Merge {wo}: x\n\nArbiter-WO: {wo}\nArbiter-Attempt: {attempt}"),
        ]);
        self.git(&["reset", "-q", "--hard", merge.trim()]);
        merge.trim().to_owned()
    }

    /// Store `json` as the state note of work order `wo`, as a crashed run
    /// could have left it (test setup only: the product never writes with
    /// `git notes add`).
    pub fn write_record(&self, wo: &str, json: &str) {
        let key_file = self.root.join(format!("key-{wo}"));
        std::fs::write(&key_file, format!("git-arbiter work order {wo}\n")).expect("key file");
        let key = self.git(&["hash-object", "-w", key_file.to_str().expect("utf-8")]);
        self.git(&[
            "notes",
            "--ref=arbiter",
            "add",
            "-f",
            "-m",
            json,
            key.trim(),
        ]);
    }

    /// Where `refs/notes/arbiter` points, or `None` before any state is written.
    pub fn notes_tip(&self) -> Option<String> {
        let run = self.git_try_in(
            &self.repo,
            &["rev-parse", "-q", "--verify", "refs/notes/arbiter"],
        );
        (run.code == 0).then(|| run.stdout.trim().to_owned())
    }

    /// `n` work orders `wo-<i>`, each declaring only `f<i>.txt`, committed
    /// with a README; returns that commit.
    pub fn disjoint_orders(&self, n: usize) -> String {
        self.write("README", "x\n");
        for i in 0..n {
            self.work_order(
                &format!("wo-{i}"),
                &format!("Order {i}"),
                &[],
                &[&format!("f{i}.txt")],
            );
        }
        self.commit_all("init")
    }

    pub fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// `git fsck --strict` must be clean.
    #[track_caller]
    pub fn fsck(&self) {
        let run = self.git_try_in(&self.repo, &["fsck", "--strict", "--no-dangling"]);
        assert_eq!(
            run.code, 0,
            "git fsck --strict failed:\n{}{}",
            run.stdout, run.stderr
        );
    }

    /// Replace temp paths and object ids so snapshots are stable.
    pub fn redact(&self, text: &str) -> String {
        let text = text.replace(&self.root.display().to_string(), "$TEST_ENV");
        let mut out = String::with_capacity(text.len());
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let run = bytes[i..]
                .iter()
                .take_while(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                .count();
            let boundary_before = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
            let boundary_after = i + run == bytes.len() || !bytes[i + run].is_ascii_alphanumeric();
            if (run == 40
                || (7..=12).contains(&run)
                    && bytes[i..i + run].iter().any(u8::is_ascii_digit)
                    && bytes[i..i + run].iter().any(u8::is_ascii_alphabetic))
                && boundary_before
                && boundary_after
            {
                out.push_str(if run == 40 { "[SHA]" } else { "[SHORT]" });
                i += run;
            } else {
                let c = text[i..].chars().next().expect("in bounds");
                out.push(c);
                i += c.len_utf8();
            }
        }
        redact_conductors(&out)
    }
}

/// A conductor's name (`<pid>-<nanoseconds>`) in the name of its verify
/// log becomes `[CONDUCTOR]`.
fn redact_conductors(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("verify-") {
        let (before, after) = rest.split_at(at + "verify-".len());
        out.push_str(before);
        let name_len = after
            .find(|c: char| !(c.is_ascii_digit() || c == '-'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let is_conductor = name.split('-').count() == 2 && name.split('-').all(|p| !p.is_empty());
        if is_conductor && after[name_len..].starts_with(".log") {
            out.push_str("[CONDUCTOR]");
            rest = &after[name_len..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// What one finished run of the binary (`Command::output`) produced.
pub fn to_run(output: Output) -> Run {
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// How one order's merge came out when landed in process.
#[derive(Debug)]
pub enum Merged {
    Landed(gix::ObjectId),
    UpToDate,
    Conflict(Vec<String>),
    Drift(Vec<String>),
}

/// The conductor name [`land_in_process`] holds records as.
pub const IN_PROCESS: &str = "test";

/// Land `req` (whose `owner` must be [`IN_PROCESS`]) on its branch in
/// process, as the merge queue lands one order: its record is taken for
/// this conductor, merged onto the tip in `session`, landed by
/// compare-and-swap, and recorded.
pub fn land_in_process(
    ctx: &git_arbiter::state::context::Context,
    store: &git_arbiter::state::Store<'_>,
    session: &mut git_arbiter::run::merge::Session,
    req: &git_arbiter::run::merge::Request<'_>,
) -> Merged {
    use git_arbiter::run::merge::{Landed, Linked};
    assert_eq!(req.owner, IN_PROCESS);
    store
        .transact("test: hold", |txn| -> git_arbiter::Result<()> {
            let mut r = txn.record(&req.wo.id, false)?;
            r.status = git_arbiter::state::Status::InProgress;
            r.halted = false;
            r.owner = Some(IN_PROCESS.into());
            r.attempts = req.attempt;
            txn.put(r);
            Ok(())
        })
        .expect("hold the record");
    let tip = ctx.branch_tip(req.into).expect("tip");
    match session.link(ctx, store, tip, req).expect("merge") {
        Linked::Merge(link) => {
            let landed = git_arbiter::run::merge::land(
                ctx,
                store,
                req.into,
                tip,
                &[(req, &link)],
                std::time::Duration::from_secs(5),
            )
            .expect("land");
            match landed {
                Landed::Landed { sha } => Merged::Landed(sha),
                other => panic!("not landed: {other:?}"),
            }
        }
        Linked::UpToDate => {
            git_arbiter::run::merge::record_up_to_date(store, req, tip).expect("record");
            Merged::UpToDate
        }
        Linked::Conflict { paths } => Merged::Conflict(paths),
        Linked::Drift { paths } => Merged::Drift(paths),
        Linked::Withdrawn { reason } => panic!("withdrawn: {reason}"),
    }
}

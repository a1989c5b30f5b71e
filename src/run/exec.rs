//! Running untrusted commands (builders, gates, critics, scores).
//!
//! Each runs through `sh -c` in its own process group, so a timeout or a stop
//! ends the whole tree of processes, grandchildren included. Output goes to a
//! log file and is never parsed for control flow (a score's last line is the
//! one documented exception, read from a separate capture). git's own
//! environment variables are removed: a builder started from a hook must not
//! inherit the hook's `GIT_DIR` or `GIT_INDEX_FILE` and write into our repository.
//!
//! A command's output reaches its log through a pipe we drain, capped at
//! [`LOG_CAP`]: a builder stuck printing in a loop must not fill the disk.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use crate::sys::caches::Caches;
use crate::sys::clock::format_ms;

/// At most this much of one command's output goes to its log: the first and
/// the last half, and between them a line saying how many bytes were cut.
pub const LOG_CAP: usize = 8 << 20;

/// The start of every line git-arbiter itself writes into a log (the
/// attempt's header and footer, a marker before and after each command), so
/// a reader can tell them from the command's own output.
pub const MARKER: &str = "[git-arbiter] ";

/// How long to wait, once the command's process group is gone, for the last
/// of its output. Only a process that left the group (a daemon) can keep the
/// pipe open longer, and it must not hold up the conductor.
const LAST_OUTPUT_WAIT: Duration = Duration::from_secs(1);

/// Worktrees whose files git-arbiter proved equal to a commit (the builder's
/// leftovers just staged by `git add -A` and committed), by canonical path:
/// that commit and the checksum of the index file that proved it. Nothing
/// of ours has run there since: [`run`] forgets a worktree it runs a command
/// in. A [`Caches`] entry.
#[derive(Default)]
struct Settled(Mutex<std::collections::BTreeMap<PathBuf, (gix::ObjectId, gix::ObjectId)>>);

type SettledMap = std::collections::BTreeMap<PathBuf, (gix::ObjectId, gix::ObjectId)>;

fn settled(caches: &Caches) -> std::sync::Arc<Settled> {
    caches.get::<Settled>()
}

impl Settled {
    fn lock(&self) -> std::sync::MutexGuard<'_, SettledMap> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Record that the files of the worktree at `dir` equal `commit`, as its
/// index (whose file ends in `index_checksum`) says.
pub fn mark_settled(
    caches: &Caches,
    dir: &Path,
    commit: gix::ObjectId,
    index_checksum: gix::ObjectId,
) {
    if let Ok(dir) = dir.canonicalize() {
        let settled = settled(caches);
        let mut all = settled.lock();
        // Worktrees that are removed, not given back (`--no-pool`), are
        // never read: forgetting costs a give-back its shortcut, nothing more.
        if all.len() >= 256 {
            all.clear();
        }
        all.insert(dir, (commit, index_checksum));
    }
}

/// What [`mark_settled`] recorded for `dir`, if no command ran there since;
/// forgotten as it is read.
pub fn take_settled(caches: &Caches, dir: &Path) -> Option<(gix::ObjectId, gix::ObjectId)> {
    let dir = dir.canonicalize().ok()?;
    settled(caches).lock().remove(&dir)
}

/// A command runs in `dir`: forget what was proved about any worktree it is in.
fn unsettle(caches: &Caches, dir: &Path) {
    let settled = settled(caches);
    let mut all = settled.lock();
    if all.is_empty() {
        return;
    }
    // A folder that cannot be resolved is one no command can start in.
    if let Ok(dir) = dir.canonicalize() {
        all.retain(|top, _| !dir.starts_with(top));
    }
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    TimedOut,
    Interrupted,
}

impl Exit {
    pub fn success(&self) -> bool {
        *self == Exit::Code(0)
    }

    /// The exit code to record (a signal as 128 + n, as shells do).
    pub fn code(&self) -> Option<i32> {
        match self {
            Exit::Code(c) => Some(*c),
            Exit::Signal(s) => Some(128 + s),
            Exit::TimedOut | Exit::Interrupted => None,
        }
    }

    /// The shell could not run the command at all: 127 not found, 126 found
    /// but not executable. A command that itself exits 126 or 127 cannot be
    /// told apart from that, and is taken for the same.
    pub fn not_runnable(&self) -> bool {
        matches!(self, Exit::Code(126 | 127))
    }

    pub fn describe(&self) -> String {
        match self {
            Exit::Code(c) => format!("exit {c}"),
            Exit::Signal(s) => format!("killed by signal {s}"),
            Exit::TimedOut => "timed out".into(),
            Exit::Interrupted => "interrupted".into(),
        }
    }
}

pub struct Spec<'a> {
    pub command: &'a str,
    pub cwd: &'a Path,
    pub env: &'a [(String, String)],
    /// stdout and stderr are appended here, at most [`LOG_CAP`] bytes of them.
    pub log: &'a Path,
    /// What the command is (`build`, `gate`, …): when set, the log gets a
    /// [`MARKER`] line naming it and the command before its output, and one
    /// with its exit and wall time after.
    pub kind: Option<&'a str>,
    /// Capture stdout to this file instead of the log (stderr still goes to the log).
    pub stdout_to: Option<&'a Path>,
    pub timeout: Option<Duration>,
    /// While the command runs, its process group is recorded in this
    /// directory, so that if we are killed the next conductor can end what we
    /// left running (the conductor's orphan cleanup).
    pub groups: Option<&'a Path>,
    /// The process's caches: a command run in a worktree voids what was
    /// proved of its files ([`take_settled`]).
    pub caches: &'a Caches,
}

/// What a recorded command's shell runs before the command, on its first
/// line (so the shell's line numbers stay the command's): wait for the line
/// that says its group is recorded, give up at an end of file (the
/// conductor died first), and leave the command an empty stdin, as others get.
const AFTER_RECORD: &str = "IFS= read -r arbiter_recorded || exit 125; exec </dev/null; ";

/// A `Command` for `sh -c CMD` with git's variables removed and `env` added.
pub fn shell(command: &str, cwd: &Path, env: &[(String, String)]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null());
    for var in crate::git::config_env::GIT_ENV {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Run to completion, a timeout, or until `stop()` says so.
pub fn run(spec: &Spec<'_>, stop: &dyn Fn() -> bool) -> std::io::Result<Exit> {
    run_telling_exit(spec, stop, &mut || {})
}

/// [`run`], calling `exited` as soon as the command has exited, before its
/// log says it ended: what the caller does next starts before anyone
/// reading the log can see the end.
pub fn run_telling_exit(
    spec: &Spec<'_>,
    stop: &dyn Fn() -> bool,
    exited: &mut dyn FnMut(),
) -> std::io::Result<Exit> {
    unsettle(spec.caches, spec.cwd);
    if let Some(dir) = spec.log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if let Some(kind) = spec.kind {
        note(spec.log, &format!("{kind}: {}", spec.command));
    }
    let started = Instant::now();
    let log = File::options().create(true).append(true).open(spec.log)?;
    // One pipe for both streams keeps their interleaving, as a shared file did.
    let (output, input) = std::io::pipe()?;
    let stdout: Stdio = match spec.stdout_to {
        Some(path) => File::create(path)?.into(),
        None => input.try_clone()?.into(),
    };
    let drain = Drain::start(output, CappedLog::new(log, LOG_CAP))?;
    // A recorded command waits for its record: were we killed between
    // starting its shell and recording its group, nothing could end it.
    let gate = spec.groups.map(|_| std::io::pipe()).transpose()?;
    let mut cmd = match gate {
        Some(_) => shell(
            &format!("{AFTER_RECORD}{}", spec.command),
            spec.cwd,
            spec.env,
        ),
        None => shell(spec.command, spec.cwd, spec.env),
    };
    let opener = gate.map(|(waiting, opener)| {
        cmd.stdin(waiting);
        opener
    });
    cmd.stdout(stdout).stderr(input).process_group(0);
    let mut child = cmd.spawn()?;
    // Our copies of the pipes' ends: the drain sees the end of the output
    // only once no one else holds one, the shell an end of file on its
    // stdin if we die before opening the gate.
    drop(cmd);
    crate::sys::crash::point("command.spawned");
    let _record = spec.groups.map(|dir| GroupRecord::new(dir, child.id()));
    if let Some(mut opener) = opener {
        // A shell that already exited (a syntax error) has closed its end.
        let _ = opener.write_all(b"\n");
    }
    let exit = wait(&mut child, spec.timeout, stop);
    exited();
    drain.finish();
    if let (Some(kind), Ok(exit)) = (spec.kind, &exit) {
        let how = match (exit, spec.timeout) {
            (Exit::TimedOut, Some(limit)) => format!(
                "timed out (the timeout is {})",
                format_ms(limit.as_millis() as u64)
            ),
            _ => exit.describe(),
        };
        let wall = format_ms(started.elapsed().as_millis() as u64);
        note(spec.log, &format!("{kind} ended: {how}, wall time {wall}"));
    }
    exit
}

/// Append one [`MARKER`] line to `log`. Best effort, as the log itself: no
/// verdict depends on it.
pub fn note(log: &Path, line: &str) {
    if let Some(dir) = log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = File::options()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut f| f.write_all(format!("{MARKER}{line}\n").as_bytes()));
}

/// Wait for the command (and end its process group) as [`run`] says.
fn wait(
    child: &mut Child,
    timeout: Option<Duration>,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Exit> {
    let started = Instant::now();
    // Short first looks, then every 20 ms: a command that ends in a few
    // milliseconds (a one-line builder, a warm gate) is seen ending then,
    // not a whole poll later.
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait()? {
            // The shell is gone; end anything it left running in its group.
            kill_group(child, Signal::KILL);
            use std::os::unix::process::ExitStatusExt;
            return Ok(match (status.code(), status.signal()) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(s)) => Exit::Signal(s),
                (None, None) => Exit::Code(-1),
            });
        }
        let timed_out = timeout.is_some_and(|t| started.elapsed() >= t);
        if timed_out || stop() {
            terminate(child)?;
            return Ok(if timed_out {
                Exit::TimedOut
            } else {
                Exit::Interrupted
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// A command's log, capped: the first `cap / 2` bytes of output are written
/// at once (so the log can be followed live), the last `cap / 2` are held
/// back until the end, and whatever falls between is counted and dropped.
struct CappedLog {
    /// `None` once a write failed: logging is best effort, the command's
    /// verdict does not depend on it.
    file: Option<File>,
    head_left: usize,
    head_ends_line: bool,
    tail: VecDeque<u8>,
    tail_cap: usize,
    cut: u64,
    finished: bool,
}

impl CappedLog {
    fn new(file: File, cap: usize) -> CappedLog {
        CappedLog {
            file: Some(file),
            head_left: cap / 2,
            head_ends_line: true,
            tail: VecDeque::new(),
            tail_cap: cap - cap / 2,
            cut: 0,
            finished: false,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if let Some(file) = &mut self.file {
            if file.write_all(bytes).is_err() {
                self.file = None;
            }
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let head = bytes.len().min(self.head_left);
        let (head, rest) = bytes.split_at(head);
        if let Some(&last) = head.last() {
            self.write(head);
            self.head_left -= head.len();
            self.head_ends_line = last == b'\n';
        }
        self.tail.extend(rest);
        let over = self.tail.len().saturating_sub(self.tail_cap);
        self.tail.drain(..over);
        self.cut += over as u64;
    }

    /// Write what was held back, after a line saying what was cut, if anything.
    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.cut > 0 {
            let newline = if self.head_ends_line { "" } else { "\n" };
            let marker = format!("{newline}[git-arbiter: {} bytes cut here]\n", self.cut);
            self.write(marker.as_bytes());
        }
        let tail = std::mem::take(&mut self.tail);
        let (front, back) = tail.as_slices();
        self.write(front);
        self.write(back);
    }
}

/// A thread copying a command's output from its pipe into a [`CappedLog`].
struct Drain {
    log: Arc<Mutex<CappedLog>>,
    ended: mpsc::Receiver<()>,
}

impl Drain {
    fn start(mut output: std::io::PipeReader, log: CappedLog) -> std::io::Result<Drain> {
        let log = Arc::new(Mutex::new(log));
        let (ended_tx, ended) = mpsc::channel();
        let shared = Arc::clone(&log);
        std::thread::Builder::new()
            .name("exec-log".into())
            .spawn(move || {
                let mut buf = vec![0; 64 << 10];
                loop {
                    match output.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            let mut log = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            // After `finish`, a process that left the group keeps
                            // being read, so it never blocks on a full pipe, but
                            // its output goes nowhere.
                            if !log.finished {
                                log.push(&buf[..n]);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                let _ = ended_tx.send(());
            })?;
        Ok(Drain { log, ended })
    }

    /// Wait (briefly) for the end of the output, then complete the log.
    fn finish(self) {
        let _ = self.ended.recv_timeout(LAST_OUTPUT_WAIT);
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .finish();
    }
}

/// A running command's process group, as a file `<dir>/<pgid>` holding the
/// leader's [`process_identity`] (so a recycled pid is never taken for it),
/// removed once the group has been ended.
struct GroupRecord(Option<std::path::PathBuf>);

impl GroupRecord {
    fn new(dir: &Path, pgid: u32) -> GroupRecord {
        let path = dir.join(pgid.to_string());
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, process_identity(pgid).unwrap_or_default()));
        // Best effort: without the record only the crash cleanup is lost.
        GroupRecord(written.is_ok().then_some(path))
    }
}

impl Drop for GroupRecord {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Who process `pid` is, for good: `<boot id> <start time>`. A pid alone is
/// recycled, and after a reboot start times repeat too.
pub fn process_identity(pid: u32) -> Option<String> {
    Some(format!("{} {}", boot_id()?, start_time(pid)?))
}

/// This boot of the machine (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_owned())
}

/// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks
/// since boot.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: skip past its last ')'.
    let after_name = stat.rsplit_once(')')?.1;
    after_name.split_whitespace().nth(19).map(str::to_owned)
}

/// SIGTERM the group, give it two seconds, then SIGKILL it.
fn terminate(child: &mut Child) -> std::io::Result<()> {
    kill_group(child, Signal::TERM);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_group(child, Signal::KILL);
    child.wait()?;
    Ok(())
}

/// Signal the process group we created with `process_group(0)`, whose id is
/// the child's pid. A vanished group yields ESRCH, which is fine.
fn kill_group(child: &Child, signal: Signal) {
    let _ = rustix::process::kill_process_group(Pid::from_child(child), signal);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(
        caches: &'a Caches,
        cmd: &'a str,
        dir: &'a Path,
        log: &'a Path,
        timeout: Option<Duration>,
    ) -> Spec<'a> {
        Spec {
            command: cmd,
            cwd: dir,
            env: &[],
            log,
            kind: None,
            stdout_to: None,
            timeout,
            groups: None,
            caches,
        }
    }

    /// What was proved about a worktree is forgotten once any command of
    /// ours runs in it (or below it), and kept while commands run elsewhere.
    #[test]
    fn a_command_run_in_a_settled_worktree_unsettles_it() {
        let caches = Caches::default();
        let dir = tempfile::tempdir().expect("tmp");
        let (wt, elsewhere) = (dir.path().join("wt"), dir.path().join("other"));
        std::fs::create_dir_all(wt.join("sub")).expect("mkdir");
        std::fs::create_dir_all(&elsewhere).expect("mkdir");
        let log = dir.path().join("x.log");
        let (commit, index) = (
            gix::ObjectId::empty_tree(gix::hash::Kind::Sha1),
            gix::ObjectId::null(gix::hash::Kind::Sha1),
        );
        mark_settled(&caches, &wt, commit, index);
        run(&spec(&caches, "true", &elsewhere, &log, None), &|| false).expect("runs");
        assert_eq!(
            take_settled(&caches, &wt.join("sub/..")),
            Some((commit, index))
        );
        assert_eq!(take_settled(&caches, &wt), None, "read once");
        mark_settled(&caches, &wt, commit, index);
        run(&spec(&caches, "true", &wt.join("sub"), &log, None), &|| {
            false
        })
        .expect("runs");
        assert_eq!(take_settled(&caches, &wt), None);
    }

    #[test]
    fn a_named_command_is_marked_in_the_log_and_a_timeout_says_so() {
        let caches = Caches::default();
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("x.log");
        let mut s = spec(&caches, "echo hi; exit 3", dir.path(), &log, None);
        s.kind = Some("gate");
        assert_eq!(run(&s, &|| false).expect("runs"), Exit::Code(3));
        let mut s = spec(
            &caches,
            "sleep 5",
            dir.path(),
            &log,
            Some(Duration::from_millis(200)),
        );
        s.kind = Some("build");
        assert_eq!(run(&s, &|| false).expect("runs"), Exit::TimedOut);
        let text = std::fs::read_to_string(&log).expect("log");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert_eq!(lines[0], "[git-arbiter] gate: echo hi; exit 3");
        assert_eq!(lines[1], "hi");
        assert!(
            lines[2].starts_with("[git-arbiter] gate ended: exit 3, wall time "),
            "{text}"
        );
        assert_eq!(lines[3], "[git-arbiter] build: sleep 5");
        assert!(
            lines[4].starts_with(
                "[git-arbiter] build ended: timed out (the timeout is 0.2s), wall time "
            ),
            "{text}"
        );
    }

    #[test]
    fn exit_codes_and_log() {
        let caches = Caches::default();
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("x.log");
        let exit = run(
            &spec(
                &caches,
                "echo out; echo err >&2; exit 3",
                dir.path(),
                &log,
                None,
            ),
            &|| false,
        )
        .expect("runs");
        assert_eq!(exit, Exit::Code(3));
        let text = std::fs::read_to_string(&log).expect("log");
        assert!(text.contains("out") && text.contains("err"), "{text}");
    }

    #[test]
    fn the_log_keeps_head_and_tail_of_long_output() {
        let caches = Caches::default();
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("x.log");
        let last = 2_000_000;
        let total: usize = (1..=last).map(|i: u32| i.to_string().len() + 1).sum();
        assert!(
            total > LOG_CAP + LOG_CAP / 2,
            "the output must exceed the cap"
        );
        // A timeout, so that a builder blocked by the cap fails the test
        // instead of hanging it.
        let cmd = format!("seq 1 {last}; echo done >&2");
        let exit = run(
            &spec(
                &caches,
                &cmd,
                dir.path(),
                &log,
                Some(Duration::from_secs(120)),
            ),
            &|| false,
        )
        .expect("runs");
        assert_eq!(exit, Exit::Code(0));
        let text = std::fs::read_to_string(&log).expect("log");
        let marker = format!("\n[git-arbiter: {} bytes cut here]\n", total + 5 - LOG_CAP);
        assert!(
            text.len() <= LOG_CAP + marker.len() + 1,
            "{} bytes",
            text.len()
        );
        assert!(text.starts_with("1\n2\n3\n"), "{}", &text[..20]);
        assert!(
            text.ends_with("1999999\n2000000\ndone\n"),
            "{}",
            &text[text.len() - 40..]
        );
        let at = text.find(&marker).expect("the marker names the bytes cut");
        assert_eq!(text.matches("git-arbiter:").count(), 1);
        // The head is cut mid-line (a newline is added before the marker).
        assert_eq!(at, LOG_CAP / 2);
        assert_eq!(text.len() - (at + marker.len()), LOG_CAP - LOG_CAP / 2);
    }

    #[test]
    fn output_within_the_cap_is_logged_whole() {
        let caches = Caches::default();
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("x.log");
        std::fs::write(&log, "before\n").expect("write");
        run(
            &spec(&caches, "seq 1 1000", dir.path(), &log, None),
            &|| false,
        )
        .expect("runs");
        let want: String = (1..=1000).map(|i| format!("{i}\n")).collect();
        assert_eq!(
            std::fs::read_to_string(&log).expect("log"),
            format!("before\n{want}")
        );
    }

    #[test]
    fn a_process_that_left_the_group_holding_the_output_does_not_wedge_run() {
        let caches = Caches::default();
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("x.log");
        let pidfile = dir.path().join("pid");
        // `setsid` takes the sleeper out of the process group, which is all
        // that ending the command kills; it keeps the output pipe open.
        let cmd = format!(
            "setsid sleep 30 & echo $! > {}; echo started",
            pidfile.display()
        );
        let started = Instant::now();
        let exit = run(&spec(&caches, &cmd, dir.path(), &log, None), &|| false).expect("runs");
        let elapsed = started.elapsed();
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .expect("pid")
            .trim()
            .parse()
            .expect("pid number");
        // The sleeper this test started.
        let _ = rustix::process::kill_process(Pid::from_raw(pid).expect("pid"), Signal::KILL);
        assert_eq!(exit, Exit::Code(0));
        assert!(elapsed < Duration::from_secs(20), "run waited {elapsed:?}");
        assert_eq!(std::fs::read_to_string(&log).expect("log"), "started\n");
    }

    #[test]
    fn timeout_kills_grandchildren() {
        let caches = Caches::default();
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("x.log");
        let pidfile = dir.path().join("pid");
        let cmd = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
        let exit = run(
            &spec(
                &caches,
                &cmd,
                dir.path(),
                &log,
                Some(Duration::from_millis(300)),
            ),
            &|| false,
        )
        .expect("runs");
        assert_eq!(exit, Exit::TimedOut);
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .expect("pid")
            .trim()
            .parse()
            .expect("pid number");
        // Dead means gone, or a zombie waiting for init to reap it. A process
        // killed a moment ago may still be on its way out (state R after it
        // closed its files, which is when `run` sees the output end): give it
        // a few seconds on a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            if matches!(state, None | Some("Z") | Some("X")) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "grandchild {pid} survived the timeout: {stat}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn start_time_names_one_process() {
        let me = start_time(std::process::id()).expect("our own stat");
        assert!(me.parse::<u64>().is_ok(), "{me}");
        assert_eq!(start_time(std::process::id()).as_deref(), Some(me.as_str()));
        // A process named with spaces and parentheses still parses.
        let dir = tempfile::tempdir().expect("tmp");
        let odd = dir.path().join("a) (b");
        std::os::unix::fs::symlink("/bin/sleep", &odd).expect("symlink");
        let mut child = Command::new(&odd).arg("5").spawn().expect("spawn");
        let theirs = start_time(child.id());
        child.kill().expect("kill");
        child.wait().expect("reap");
        assert!(theirs.is_some_and(|t| t.parse::<u64>().is_ok_and(|t| t > 0)));
        assert_eq!(start_time(u32::MAX), None);
        let identity = process_identity(std::process::id()).expect("identity");
        assert_eq!(identity, format!("{} {me}", boot_id().expect("boot id")));
    }

    /// The `GIT_*` variables of [`GIT_ENV`] (a hook's git sets them) never
    /// reach the command; the extra environment does. Setting them in this
    /// process would race the other tests' threads, so the test runs itself
    /// again in a child process that has them all set.
    #[test]
    fn extra_environment_is_added() {
        let caches = Caches::default();
        const CHILD: &str = "ARBITER_EXEC_TEST_CHILD";
        if std::env::var_os(CHILD).is_none() {
            let mut child = Command::new(std::env::current_exe().expect("test binary"));
            let module = module_path!().split_once("::").map_or("", |(_, m)| m);
            child
                .args(["--exact", &format!("{module}::extra_environment_is_added")])
                .env(CHILD, "1");
            for var in crate::git::config_env::GIT_ENV {
                child.env(var, "/leaked");
            }
            let out = child.output().expect("test binary runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{stdout}");
            assert!(
                stdout.contains("1 passed"),
                "the child ran no test: {stdout}"
            );
            return;
        }
        assert_eq!(std::env::var("GIT_DIR").as_deref(), Ok("/leaked"));
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("x.log");
        let out = dir.path().join("out");
        let mut s = spec(&caches, "env", dir.path(), &log, None);
        let env = [("X".to_string(), "1".to_string())];
        s.env = &env;
        s.stdout_to = Some(&out);
        run(&s, &|| false).expect("runs");
        let seen = std::fs::read_to_string(&out).expect("out");
        for var in crate::git::config_env::GIT_ENV {
            assert!(
                !seen.lines().any(|l| l.starts_with(&format!("{var}="))),
                "{var} reached the command:\n{seen}"
            );
        }
        assert!(seen.lines().any(|l| l == "X=1"), "{seen}");
    }
}

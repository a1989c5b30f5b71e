//! Scale-out: several conductors, each in its own clone (a machine), one
//! queue on a git remote served over a real protocol (`git daemon` on
//! loopback) or `file://`. Stock git is the oracle for what landed.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::TestEnv;

/// A bare remote holding `n` disjoint orders, each editing its own file.
fn remote_with_orders(env: &TestEnv, n: usize) -> PathBuf {
    for i in 1..=n {
        let id = format!("wo-{i:02}");
        env.work_order(&id, &id, &[], &[&format!("f/{id}.txt")]);
        env.write(&format!("f/{id}.txt"), "0\n");
    }
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "orders"]);
    let bare = env.root.join("remote.git");
    env.git_in(
        &env.root,
        &[
            "clone",
            "-q",
            "--bare",
            "repo",
            bare.to_str().expect("utf-8"),
        ],
    );
    bare
}

/// A clone of `url` named `name`: one machine.
fn machine(env: &TestEnv, url: &str, name: &str) -> PathBuf {
    env.git_in(&env.root, &["clone", "-q", url, name]);
    env.root.join(name)
}

/// `round --remote origin` in `dir` with its own machine-wide slots.
fn conductor(env: &TestEnv, dir: &Path, extra: &[&str]) -> Child {
    let mut args = vec![
        "round",
        "--remote",
        "origin",
        "--max",
        "4",
        "--max-total",
        "4",
    ];
    args.extend_from_slice(extra);
    let mut cmd = env.command_in(dir, &args);
    cmd.env("ARBITER_SLOT_DIR", dir.join(".git/slots"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("start a conductor")
}

fn finish(child: Child, within: Duration) -> (i32, String) {
    let started = Instant::now();
    let mut child = child;
    loop {
        if let Some(_status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
            return (out.status.code().unwrap_or(-1), said);
        }
        if started.elapsed() > within {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "a conductor ran past {within:?}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The orders whose merge is on the remote branch's first-parent chain,
/// one entry per merge (stock git reads them).
fn landed(env: &TestEnv, bare: &Path) -> Vec<String> {
    let log = env.git_in(bare, &["log", "--first-parent", "--format=%B", "main"]);
    let mut ids: Vec<String> = log
        .lines()
        .filter_map(|l| l.strip_prefix("Arbiter-WO: "))
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids
}

/// The record of `id` in the remote's notes, read with stock git.
fn record(env: &TestEnv, bare: &Path, id: &str) -> serde_json::Value {
    let blob = format!("git-arbiter work order {id}\n");
    let path = env.root.join("key");
    std::fs::write(&path, blob).expect("key");
    let key = env.git_in(bare, &["hash-object", path.to_str().expect("utf-8")]);
    let note = env.git_in(bare, &["notes", "--ref=arbiter", "show", key.trim()]);
    serde_json::from_str(&note).expect("a record is JSON")
}

/// The file a [`slow_machine`]'s builders touch as they start.
fn building_marker(env: &TestEnv, dir: &Path) -> PathBuf {
    let name = dir.file_name().expect("a machine's folder");
    env.root
        .join(format!("{}-building", name.to_string_lossy()))
}

/// `round --remote` in `dir` with builders that sleep `secs` then write
/// `word`, once all of the remote's `n` orders are claimed in progress.
fn slow_machine(env: &TestEnv, bare: &Path, dir: &Path, n: usize, secs: u32, word: &str) -> Child {
    let marker = building_marker(env, dir);
    let slow = format!(
        "touch {}; sleep {secs}; echo {word} >> \"f/$ARBITER_WO.txt\"",
        marker.display()
    );
    let child = conductor(env, dir, &["--build", &slow]);
    crate::common::wait_for(&marker);
    crate::common::poll_until("the claims reach the remote", || {
        all_ids(n)
            .iter()
            .all(|id| record(env, bare, id)["status"] == "in_progress")
    });
    child
}

fn all_ids(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("wo-{i:02}")).collect()
}

/// `git daemon` serving `base` on a free loopback port, pushes allowed.
struct Daemon {
    child: Child,
    port: u16,
}

impl Daemon {
    fn start(env: &TestEnv, base: &Path) -> Daemon {
        for _ in 0..20 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .expect("a free port")
                .local_addr()
                .expect("address")
                .port();
            let mut cmd = std::process::Command::new("git");
            cmd.args([
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
            ])
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .env("HOME", &env.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            let mut child = cmd.spawn().expect("git daemon");
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(5) {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Daemon { child, port };
                }
                if child.try_wait().expect("daemon").is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("git daemon did not start");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn three_machines_through_git_daemon_land_every_order_once_and_verified() {
    let env = TestEnv::new();
    let bare = remote_with_orders(&env, 24);
    let daemon = Daemon::start(&env, &env.root);
    let url = format!("git://127.0.0.1:{}/remote.git", daemon.port);
    let machines: Vec<PathBuf> = ["m1", "m2", "m3"]
        .iter()
        .map(|m| machine(&env, &url, m))
        .collect();
    // Builders sleep 0.5–2 s; a gate runs on every merged result.
    let build = "h=$((1${ARBITER_WO#wo-} % 4 + 1)); sleep $((h / 2)).$((h % 2 * 5)); \
                 echo \"$ARBITER_WO\" >> \"f/$ARBITER_WO.txt\"";
    let children: Vec<Child> = machines
        .iter()
        .map(|dir| conductor(&env, dir, &["--build", build, "--gate", "test -d f"]))
        .collect();
    for child in children {
        let (code, said) = finish(child, Duration::from_secs(120));
        assert_eq!(code, 0, "a conductor failed:\n{said}");
    }
    assert_eq!(
        landed(&env, &bare),
        all_ids(24),
        "each order lands exactly once"
    );
    for id in all_ids(24) {
        let r = record(&env, &bare, &id);
        assert_eq!(r["status"], "done", "{id}: {r}");
        assert!(
            r["verdicts"]
                .as_array()
                .expect("verdicts")
                .iter()
                .any(|v| v["kind"] == "verify" && v["passed"] == true),
            "{id} landed without its merged result passing the gates: {r}"
        );
    }
    env.git_in(&bare, &["fsck", "--strict"]);
    // The work is on the remote: a machine pulls it as any branch.
    env.git_in(&machines[0], &["pull", "-q", "--ff-only"]);
    assert_eq!(
        std::fs::read_to_string(machines[0].join("f/wo-07.txt")).expect("file"),
        "0\nwo-07\n"
    );
}

#[test]
fn over_file_urls_a_plain_clone_reads_the_state_and_syncs_it() {
    let env = TestEnv::new();
    let bare = remote_with_orders(&env, 6);
    let url = format!("file://{}", bare.display());
    let (m1, m2) = (machine(&env, &url, "m1"), machine(&env, &url, "m2"));
    let build = "echo x >> \"f/$ARBITER_WO.txt\"";
    let children = [
        conductor(&env, &m1, &["--build", build]),
        conductor(&env, &m2, &["--build", build]),
    ];
    for child in children {
        let (code, said) = finish(child, Duration::from_secs(60));
        assert_eq!(code, 0, "{said}");
    }
    assert_eq!(landed(&env, &bare), all_ids(6));
    // A clone that never ran a conductor sees every order done.
    let viewer = machine(&env, &url, "viewer");
    let status = env.run_in(&viewer, &["status", "--remote", "origin", "--json"]);
    let status = status.success().json();
    let done = status["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .filter(|o| o["status"] == "done")
        .count();
    assert_eq!(done, 6, "{status}");
    // Already in step after status fetched it.
    let synced = env.run_in(&viewer, &["sync"]).success();
    assert!(synced.stderr.contains("up-to-date"), "{}", synced.stderr);
    // A remote state rewritten by someone (not a descendant of what this
    // clone saw) is refused, and nothing moves on either side.
    let tip = env.git_in(&viewer, &["rev-parse", "refs/notes/arbiter"]);
    let rewritten = env.git_in(
        &bare,
        &[
            "commit-tree",
            "-p",
            "refs/notes/arbiter~2",
            "-m",
            "rewritten",
            "refs/notes/arbiter~2^{tree}",
        ],
    );
    env.git_in(
        &bare,
        &["update-ref", "refs/notes/arbiter", rewritten.trim()],
    );
    let refused = env.run_in(&viewer, &["sync"]).code(2);
    assert!(refused.stderr.contains("rewritten"), "{}", refused.stderr);
    assert_eq!(
        env.git_in(&bare, &["rev-parse", "refs/notes/arbiter"]),
        rewritten
    );
    assert_eq!(
        env.git_in(&viewer, &["rev-parse", "refs/notes/arbiter"]),
        tip
    );
    // A state ahead of the remote's is pushed by compare-and-swap.
    env.git_in(&bare, &["update-ref", "refs/notes/arbiter", tip.trim()]);
    env.git_in(
        &viewer,
        &["notes", "--ref=arbiter", "add", "-f", "-m", "mine", "HEAD"],
    );
    let pushed = env.run_in(&viewer, &["sync"]).success();
    assert!(pushed.stderr.contains("pushed"), "{}", pushed.stderr);
    assert_eq!(
        env.git_in(&bare, &["rev-parse", "refs/notes/arbiter"]),
        env.git_in(&viewer, &["rev-parse", "refs/notes/arbiter"])
    );
    // Bad input is one error, exit 2, and nothing moves.
    let notes = env.git_in(&bare, &["rev-parse", "refs/notes/arbiter"]);
    let unknown = env.run_in(&viewer, &["round", "--remote", "nope", "--build", "true"]);
    assert!(unknown
        .code(2)
        .stderr
        .contains("remote 'nope' is not configured"));
    let no_branch = env.run_in(
        &viewer,
        &[
            "round", "--remote", "origin", "--into", "nosuch", "--build", "true",
        ],
    );
    assert!(no_branch.code(2).stderr.contains("has no branch 'nosuch'"));
    env.git_in(&viewer, &["config", "arbiter.leaseSeconds", "0"]);
    let zero = env.run_in(&viewer, &["round", "--remote", "origin", "--build", "true"]);
    assert!(zero.code(2).stderr.contains("leaseSeconds = 0"));
    assert_eq!(
        env.git_in(&bare, &["rev-parse", "refs/notes/arbiter"]),
        notes
    );
}

/// Orders held by a conductor killed mid-build are built elsewhere once
/// its leases lapse; nothing lands twice.
#[test]
fn a_killed_machines_orders_are_rebuilt_elsewhere_after_its_leases_lapse() {
    let env = TestEnv::new();
    let bare = remote_with_orders(&env, 4);
    let url = format!("file://{}", bare.display());
    let (m1, m2) = (machine(&env, &url, "m1"), machine(&env, &url, "m2"));
    for m in [&m1, &m2] {
        env.git_in(m, &["config", "arbiter.leaseSeconds", "2"]);
    }
    let mut killed = slow_machine(&env, &bare, &m1, 4, 30, "slow");
    killed.kill().expect("SIGKILL");
    let _ = killed.wait();
    let (code, said) = finish(
        conductor(
            &env,
            &m2,
            &["--build", "echo fast >> \"f/$ARBITER_WO.txt\""],
        ),
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{said}");
    assert_eq!(landed(&env, &bare), all_ids(4));
    env.git_in(&m2, &["pull", "-q", "--ff-only"]);
    for id in all_ids(4) {
        let r = record(&env, &bare, &id);
        assert_eq!(r["status"], "done");
        assert_eq!(r["attempts"], 2, "{id}: rebuilt once: {r}");
        let text = std::fs::read_to_string(m2.join(format!("f/{id}.txt"))).expect("file");
        assert_eq!(text, "0\nfast\n", "{id}: only the rebuild landed");
    }
    // The killed conductor's builders outlive it (their own process groups).
    let _ = std::process::Command::new("pkill")
        .args(["-f", &building_marker(&env, &m1).display().to_string()])
        .status();
}

/// A machine cut off from the remote while it builds: its leases lapse,
/// another machine lands the orders, and when it is back its late results
/// are recorded on the orders and discarded.
#[test]
fn a_partitioned_machines_late_results_are_recorded_and_never_land() {
    let env = TestEnv::new();
    let bare = remote_with_orders(&env, 3);
    // m1 reaches the remote through a link that the partition removes.
    let link = env.root.join("link.git");
    std::os::unix::fs::symlink(&bare, &link).expect("link");
    let m1 = machine(&env, &format!("file://{}", link.display()), "m1");
    let m2 = machine(&env, &format!("file://{}", bare.display()), "m2");
    for m in [&m1, &m2] {
        env.git_in(m, &["config", "arbiter.leaseSeconds", "2"]);
    }
    let cut_off = slow_machine(&env, &bare, &m1, 3, 5, "late");
    std::fs::remove_file(&link).expect("partition");
    std::thread::sleep(Duration::from_secs(3));
    let (code, said) = finish(
        conductor(
            &env,
            &m2,
            &["--build", "echo on-time >> \"f/$ARBITER_WO.txt\""],
        ),
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{said}");
    std::os::unix::fs::symlink(&bare, &link).expect("heal");
    let (_, said) = finish(cut_off, Duration::from_secs(90));
    assert_eq!(landed(&env, &bare), all_ids(3), "{said}");
    for id in all_ids(3) {
        let r = record(&env, &bare, &id);
        assert_eq!(r["status"], "done", "{r}");
        let late = r["history"]
            .as_array()
            .expect("history")
            .iter()
            .any(|e| e["event"] == "late_result_discarded");
        assert!(late, "{id}: the late result is not recorded: {r}\n{said}");
    }
    env.git_in(&m2, &["pull", "-q", "--ff-only"]);
    let text = std::fs::read_to_string(m2.join("f/wo-01.txt")).expect("file");
    assert_eq!(text, "0\non-time\n", "the late result never lands");
}

/// Kill-point matrix through a remote: a machine killed at each durable
/// step (a debug build aborts at `ARBITER_CRASH_AT`, as with SIGKILL), then
/// another machine runs: every order lands exactly once, every record is
/// done, and the remote passes `git fsck --strict`. Every broken point is
/// reported at once.
#[test]
fn a_machine_killed_at_any_step_is_finished_by_another_and_nothing_lands_twice() {
    let points = [
        "dispatch.before",
        // Each push the remote took, before the local refs followed: the
        // dispatch, the verdicts (with the published results), the landing.
        // (Builds that end together share their pushes: a fourth happens
        // only when they do not.)
        "remote-push.after",
        "remote-push.after#2",
        "remote-push.after#3",
        "dispatch.after",
        "build.started",
        "verdict.before",
        "verdict.after",
        "verify.started",
        "branch-cas.before",
        "branch-cas.after",
    ];
    let mut broken = Vec::new();
    for point in points {
        let env = TestEnv::new();
        let bare = remote_with_orders(&env, 2);
        let url = format!("file://{}", bare.display());
        let (m1, m2) = (machine(&env, &url, "m1"), machine(&env, &url, "m2"));
        for m in [&m1, &m2] {
            env.git_in(m, &["config", "arbiter.leaseSeconds", "1"]);
        }
        let build = [
            "--build",
            "echo x >> \"f/$ARBITER_WO.txt\"",
            "--gate",
            "test -d f",
        ];
        let mut killed = env.command_in(&m1, &["round", "--remote", "origin"]);
        killed
            .args(build)
            .env("ARBITER_CRASH_AT", point)
            .env("ARBITER_SLOT_DIR", m1.join(".git/slots"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let killed = killed.output().expect("m1");
        let name = point.split('#').next().unwrap_or(point);
        let crashed = String::from_utf8_lossy(&killed.stderr)
            .contains(&format!("arbiter crash point={name}\n"));
        if !crashed {
            broken.push(format!("{point}: never reached"));
            continue;
        }
        let (code, said) = finish(conductor(&env, &m2, &build), Duration::from_secs(60));
        let landed = landed(&env, &bare);
        let done = all_ids(2)
            .iter()
            .all(|id| record(&env, &bare, id)["status"] == "done");
        let fsck = env.git_try_in(&bare, &["fsck", "--strict"]).code == 0;
        if code != 0 || landed != all_ids(2) || !done || !fsck {
            let tail: Vec<&str> = said.lines().rev().take(4).collect();
            broken.push(format!(
                "{point}: exit {code}, landed {landed:?}, all done {done}, fsck {fsck}: {tail:?}"
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// A halt made on another machine (its `arbiter.remote` set) goes to the
/// remote, and the machine building the order stops that build.
#[test]
fn a_halt_on_another_machine_stops_the_build_through_the_remote() {
    let env = TestEnv::new();
    let bare = remote_with_orders(&env, 1);
    let url = format!("file://{}", bare.display());
    let (m1, m2) = (machine(&env, &url, "m1"), machine(&env, &url, "m2"));
    env.git_in(&m2, &["config", "arbiter.remote", "origin"]);
    let building = slow_machine(&env, &bare, &m1, 1, 30, "slow");
    // Another machine sees who builds it, and where.
    let seen = env.run_in(&m2, &["status", "--remote", "origin", "--json"]);
    let seen = seen.success().json();
    assert!(seen["orders"][0]["claimed_by"].is_string(), "{seen}");
    assert!(seen["orders"][0]["claimed_on"].is_string(), "{seen}");
    // A round there finds nothing to do: the order is another machine's,
    // named by its machine (its pid means nothing here).
    let idle = env.run_in(
        &m2,
        &[
            "round",
            "--once",
            "--json",
            "--build",
            "true",
            "--max-total",
            "1",
        ],
    );
    let idle = idle.code(5).json();
    assert_eq!(idle["held_elsewhere"][0]["id"], "wo-01", "{idle}");
    assert!(idle["held_elsewhere"][0]["machine"].is_string(), "{idle}");
    assert!(idle["held_elsewhere"][0]["pid"].is_null(), "{idle}");
    let started = Instant::now();
    env.run_in(&m2, &["halt", "wo-01", "--reason", "wrong approach"])
        .success();
    assert_eq!(record(&env, &bare, "wo-01")["halted"], true);
    let (code, said) = finish(building, Duration::from_secs(25));
    assert_eq!(code, 1, "the halt escalates: {said}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the build ran on after the halt"
    );
    assert!(landed(&env, &bare).is_empty());
    // A race does not run through a remote yet: refused before anything runs.
    let race = env.run_in(
        &m2,
        &[
            "race", "wo-01", "-n", "2", "--build", "true", "--score", "echo 1",
        ],
    );
    assert!(race
        .code(2)
        .stderr
        .contains("race does not run through a remote"));
}

/// A remote named by a path relative to the clone, the run started in a
/// subfolder: the URL means what it means to git there.
#[test]
fn a_relative_remote_url_works_from_a_subfolder() {
    let env = TestEnv::new();
    env.write("sub/keep", "x\n");
    let bare = remote_with_orders(&env, 1);
    let m1 = machine(&env, &format!("file://{}", bare.display()), "m1");
    env.git_in(&m1, &["remote", "set-url", "origin", "../remote.git"]);
    let mut cmd = env.command_in(
        &m1.join("sub"),
        &[
            "round",
            "--remote",
            "origin",
            "--build",
            "echo x >> \"f/$ARBITER_WO.txt\"",
        ],
    );
    cmd.env("ARBITER_SLOT_DIR", m1.join(".git/slots"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (code, said) = finish(cmd.spawn().expect("round"), Duration::from_secs(60));
    assert_eq!(code, 0, "{said}");
    assert_eq!(landed(&env, &bare), all_ids(1));
}

/// The remote's state rewritten by someone while a machine runs (a force
/// push of an older state): reported, never adopted, and nothing lands.
#[test]
fn a_remote_state_rewritten_during_a_run_is_reported_and_nothing_lands() {
    let env = TestEnv::new();
    let bare = remote_with_orders(&env, 1);
    let m1 = machine(&env, &format!("file://{}", bare.display()), "m1");
    let running = slow_machine(&env, &bare, &m1, 1, 3, "x");
    let claimed = env.git_in(&bare, &["rev-parse", "refs/notes/arbiter"]);
    let rewritten = env.git_in(
        &bare,
        &[
            "commit-tree",
            "-m",
            "someone else's state",
            "refs/notes/arbiter^{tree}",
        ],
    );
    env.git_in(
        &bare,
        &["update-ref", "refs/notes/arbiter", rewritten.trim()],
    );
    let (code, said) = finish(running, Duration::from_secs(60));
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("rewritten"), "{said}");
    assert!(landed(&env, &bare).is_empty(), "{said}");
    assert_eq!(
        env.git_in(&bare, &["rev-parse", "refs/notes/arbiter"]),
        rewritten,
        "the rewritten state was not pushed over"
    );
    assert_ne!(claimed, rewritten);
}

/// A remote that refuses the pushes (a hook, a permission): said once,
/// with what each machine needs, and the run stops; it is not taken for a
/// lost race and tried forever.
#[test]
fn a_remote_that_refuses_the_pushes_stops_the_run_with_the_reason() {
    let env = TestEnv::new();
    let bare = remote_with_orders(&env, 1);
    let hook = bare.join("hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'no arbiter here' >&2\nexit 1\n").expect("hook");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let m1 = machine(&env, &format!("file://{}", bare.display()), "m1");
    let (code, said) = finish(
        conductor(&env, &m1, &["--build", "echo x >> \"f/$ARBITER_WO.txt\""]),
        Duration::from_secs(60),
    );
    assert_eq!(code, 128, "{said}");
    assert!(
        said.contains("remote 'origin' refused refs/notes/arbiter"),
        "{said}"
    );
    assert!(said.contains("the right to push"), "{said}");
    assert!(landed(&env, &bare).is_empty());
    assert!(env
        .git_try_in(
            &bare,
            &["rev-parse", "--verify", "-q", "refs/notes/arbiter"]
        )
        .stdout
        .is_empty());
}

/// A lock on this clone's notes ref left by a killed writer: said (exit 2,
/// the lock named) before anything is pushed, so the remote never takes a
/// transition this clone could not follow.
#[test]
fn a_stale_local_lock_is_reported_before_anything_is_pushed() {
    let env = TestEnv::new();
    let bare = remote_with_orders(&env, 1);
    let m1 = machine(&env, &format!("file://{}", bare.display()), "m1");
    let lock = m1.join(".git/refs/notes/arbiter.lock");
    std::fs::create_dir_all(lock.parent().expect("refs/notes")).expect("mkdir");
    let file = std::fs::File::create(&lock).expect("lock");
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(60))
        .expect("age the lock");
    let (code, said) = finish(
        conductor(&env, &m1, &["--build", "echo x >> \"f/$ARBITER_WO.txt\""]),
        Duration::from_secs(60),
    );
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("arbiter.lock"), "{said}");
    assert!(said.contains("remove the stale lock file"), "{said}");
    assert!(env
        .git_try_in(
            &bare,
            &["rev-parse", "--verify", "-q", "refs/notes/arbiter"]
        )
        .stdout
        .is_empty());
    assert!(landed(&env, &bare).is_empty());
}

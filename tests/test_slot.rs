//! Machine-wide slots, exercised with real processes: flock release on kill,
//! the cap under concurrency (measured by the commands themselves), FIFO
//! order, no fd inheritance, signals, status output, the directory's mode.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use crate::common::{Run, TestEnv};

/// Start `git arbiter ARGS` in the repository without waiting for it.
fn spawn(env: &TestEnv, args: &[&str]) -> Child {
    env.command_in(&env.repo, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn git-arbiter")
}

fn finish(child: Child) -> Run {
    let output = child.wait_with_output().expect("wait");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn status(env: &TestEnv) -> serde_json::Value {
    env.run(&["slot", "status", "--json"]).success().json()
}

/// Poll until `cond` holds. A generous bound turns a hang into a failure; no
/// duration is asserted.
#[track_caller]
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if cond() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("timed out waiting until {what}");
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// A command for `slot run` that holds until `release` exists.
fn hold_until(release: &Path) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        r#"while [ ! -e "$0" ]; do sleep 0.02; done"#.into(),
        release.display().to_string(),
    ]
}

/// A `slot run FLAGS -- <hold>` that has its slot; it ends once `release` exists.
fn spawn_holder(env: &TestEnv, flags: &[&str]) -> (PathBuf, Child) {
    let release = env.root.join("release");
    let hold = hold_until(&release);
    let mut head = vec!["slot", "run"];
    head.extend_from_slice(flags);
    head.push("--");
    let holder = spawn(env, &args(&head, &hold));
    wait_until("the holder has its slot", || status(env)["used"] == 1);
    (release, holder)
}

fn args<'a>(head: &[&'a str], tail: &'a [String]) -> Vec<&'a str> {
    head.iter()
        .copied()
        .chain(tail.iter().map(String::as_str))
        .collect()
}

#[test]
fn killed_holder_frees_its_slot_at_once() {
    let env = TestEnv::new();
    let pidfile = env.root.join("builder.pid");
    let script = format!("echo $$ > '{}'; exec sleep 30", pidfile.display());
    let mut holder = spawn(
        &env,
        &["slot", "run", "--max-total", "1", "--", "sh", "-c", &script],
    );
    wait_until("the holder runs its command", || {
        pidfile.exists() && status(&env)["used"] == 1
    });
    env.run(&["slot", "run", "--no-wait", "--max-total", "1", "--", "true"])
        .code(5);
    holder.kill().expect("kill -9 the holder");
    holder.wait().expect("reap the holder");
    // The builder (sleep) outlives its parent; it must not keep the slot.
    let builder: u32 = std::fs::read_to_string(&pidfile)
        .expect("pid")
        .trim()
        .parse()
        .expect("pid number");
    assert!(
        Path::new(&format!("/proc/{builder}")).exists(),
        "the orphaned builder still runs"
    );
    let run = env.run(&["slot", "run", "--no-wait", "--max-total", "1", "--", "true"]);
    signal(builder, "-KILL");
    run.success();
}

#[test]
fn cap_holds_across_concurrent_processes() {
    let env = TestEnv::new();
    env.git(&["config", "arbiter.maxTotal", "3"]);
    let log = env.root.join("log");
    // Each command logs its start and end itself (O_APPEND lines are atomic).
    // The first one waits for a second to start, so overlap is not left to
    // timing: a correct cap admits a second at once, a broken one never does.
    let script = r#"
        echo "start $$" >> "$0"
        i=0
        while [ "$(grep -c start "$0")" -lt 2 ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done
        sleep 0.2
        echo "end $$" >> "$0"
    "#;
    let log_arg = log.display().to_string();
    let children: Vec<Child> = (0..7)
        .map(|_| spawn(&env, &["slot", "run", "--", "sh", "-c", script, &log_arg]))
        .collect();
    for child in children {
        finish(child).success();
    }
    let text = std::fs::read_to_string(&log).expect("log");
    let (mut running, mut max, mut starts) = (0i32, 0i32, 0);
    for line in text.lines() {
        if line.starts_with("start") {
            running += 1;
            starts += 1;
        } else if line.starts_with("end") {
            running -= 1;
        }
        max = max.max(running);
    }
    eprintln!("cap 3, 7 processes: max concurrency observed {max}");
    assert_eq!(starts, 7, "{text}");
    assert_eq!(running, 0, "{text}");
    assert!(max <= 3, "more than the cap at once:\n{text}");
    assert!(max >= 2, "never two at once:\n{text}");
}

#[test]
fn no_wait_exits_5_when_no_slot_is_free() {
    let env = TestEnv::new();
    let (release, holder) = spawn_holder(&env, &["--max-total", "1"]);
    let run = env.run(&["slot", "run", "--no-wait", "--max-total", "1", "--", "true"]);
    std::fs::write(&release, "").expect("release");
    insta::assert_snapshot!(run.snapshot(&env), @r"
    [stderr]
    error: no slot free (cap 1): every slot is held or promised to an earlier waiter
    hint: wait for one (drop --no-wait), or raise the cap with --max-total N or 'git config arbiter.maxTotal N'
    [exit status: 5]
    ");
    finish(holder).success();
    // With the holder gone the same call succeeds and passes the exit code through.
    env.run(&[
        "slot",
        "run",
        "--no-wait",
        "--max-total",
        "1",
        "--",
        "sh",
        "-c",
        "exit 7",
    ])
    .code(7);
}

#[test]
fn slot_fd_is_not_inherited_by_the_command() {
    let env = TestEnv::new();
    let run = env
        .run(&[
            "slot",
            "run",
            "--",
            "sh",
            "-c",
            "ls -l /proc/$$/fd; echo slot=$ARBITER_SLOT",
        ])
        .success();
    // The listing worked (stdin is there) and names no file of the slot dir.
    assert!(run.stdout.contains(" 0 -> "), "{}", run.stdout);
    assert!(run.stdout.contains("slot=0"), "{}", run.stdout);
    let slot_dir = env.slot_dir.display().to_string();
    assert!(
        !run.stdout.contains(&slot_dir),
        "a slot-dir fd leaked into the command:\n{}",
        run.stdout
    );
}

#[test]
fn waiters_are_served_in_arrival_order_and_dead_ones_skipped() {
    let env = TestEnv::new();
    let order = env.root.join("order");
    let (release, holder) = spawn_holder(&env, &["--max-total", "1"]);
    let mut waiters = Vec::new();
    for (i, label) in ["a", "x", "b", "c"].into_iter().enumerate() {
        let script = format!("echo {label} >> '{}'", order.display());
        // Progress goes to a file the test can watch while the waiter runs.
        let log = env.root.join(format!("waiter-{label}.log"));
        let child = env
            .command_in(
                &env.repo,
                &[
                    "slot",
                    "run",
                    "--max-total",
                    "1",
                    "--label",
                    label,
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
            )
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("waiter log"))
            .spawn()
            .expect("spawn git-arbiter");
        wait_until(&format!("{label} is queued"), || {
            let s = status(&env);
            let queue = s["waiters"].as_array().expect("waiters").clone();
            queue.len() == i + 1 && queue[i]["wo"] == label
        });
        waiters.push((label, child, log));
    }
    // x dies while waiting: its ticket must not block b and c.
    let (_, mut x, _) = waiters.remove(1);
    x.kill().expect("kill x");
    x.wait().expect("reap x");
    wait_until("x is gone from the queue", || {
        status(&env)["waiters"].as_array().expect("waiters").len() == 3
    });
    // Release only once b has seen it: b polls on its own clock.
    let b_log = waiters[1].2.clone();
    wait_until("b sees only a ahead", || {
        std::fs::read_to_string(&b_log).is_ok_and(|t| t.contains("held=1 ahead=1\n"))
    });
    std::fs::write(&release, "").expect("release");
    finish(holder).success();
    let mut stderr = Vec::new();
    for (label, child, log) in waiters {
        finish(child).success();
        stderr.push((label, std::fs::read_to_string(log).expect("waiter log")));
    }
    assert_eq!(std::fs::read_to_string(&order).expect("order"), "a\nb\nc\n");
    // b saw a and x ahead, then only a once x died.
    let b = &stderr[1].1;
    assert!(
        b.starts_with(
            "arbiter slot waiting wo=b cap=1 held=1 ahead=2\n\
             arbiter slot waiting wo=b cap=1 held=1 ahead=1\n"
        ),
        "{b}"
    );
}

#[test]
fn interrupted_waiter_exits_130_and_leaves_the_queue() {
    let env = TestEnv::new();
    let (release, holder) = spawn_holder(&env, &["--max-total", "1"]);
    let waiter = spawn(&env, &["slot", "run", "--max-total", "1", "--", "true"]);
    wait_until("the waiter is queued", || {
        status(&env)["waiters"].as_array().expect("waiters").len() == 1
    });
    signal(waiter.id(), "-INT");
    let run = finish(waiter).code(130);
    assert!(
        run.stderr.ends_with("error: interrupted\n"),
        "{}",
        run.stderr
    );
    assert_eq!(
        status(&env)["waiters"].as_array().expect("waiters").len(),
        0
    );
    assert_eq!(
        std::fs::read_dir(env.slot_dir.join("queue"))
            .expect("queue dir")
            .count(),
        0,
        "the ticket file was removed"
    );
    std::fs::write(&release, "").expect("release");
    finish(holder).success();
}

#[test]
fn sigterm_is_passed_on_to_the_command() {
    let env = TestEnv::new();
    let ready = env.root.join("ready");
    let script = format!(
        r#"trap 'exit 7' TERM; echo > '{}'; while :; do sleep 0.02; done"#,
        ready.display()
    );
    let holder = spawn(&env, &["slot", "run", "--", "sh", "-c", &script]);
    wait_until("the command is ready", || ready.exists());
    signal(holder.id(), "-TERM");
    finish(holder).code(7);
    assert_eq!(status(&env)["used"], 0);
}

/// SIGTERM reaches what the command started too (its process group):
/// `sh -c 'sleep 20; …'` leaves no `sleep` behind holding nothing.
#[test]
fn sigterm_ends_the_commands_whole_process_group() {
    let env = TestEnv::new();
    let ready = env.root.join("ready");
    let pid_file = env.root.join("sleep.pid");
    let script = format!(
        "sleep 20 & echo $! > '{pid}'; echo > '{ready}'; wait; echo never",
        pid = pid_file.display(),
        ready = ready.display()
    );
    let holder = spawn(&env, &["slot", "run", "--", "sh", "-c", &script]);
    wait_until("the command is ready", || ready.exists());
    let sleeper: i32 = std::fs::read_to_string(&pid_file)
        .expect("pid")
        .trim()
        .parse()
        .expect("a pid");
    signal(holder.id(), "-TERM");
    finish(holder).code(143);
    wait_until("the sleep ended", || {
        // A zombie until init reaps it counts as ended.
        std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
            .map_or(true, |stat| stat.split_whitespace().nth(2) == Some("Z"))
    });
    assert_eq!(status(&env)["used"], 0);
}

#[test]
fn status_human_and_json() {
    let env = TestEnv::new();
    env.git(&["config", "arbiter.maxTotal", "1"]);
    let empty = env.run(&["slot", "status"]).success();
    insta::assert_snapshot!(empty.snapshot(&env), @r"
    slots: 0 of 1 in use, 0 waiting ($TEST_ENV/slots)
    [stderr]
    [exit status: 0]
    ");
    let (release, holder) = spawn_holder(&env, &["--label", "wo-01"]);
    let waiter = spawn(&env, &["slot", "run", "--label", "wo-02", "--", "true"]);
    wait_until("the waiter is queued", || {
        status(&env)["waiters"].as_array().expect("waiters").len() == 1
    });
    let redact = |text: &str| -> String {
        let mut text = env.redact(text);
        for pid in [holder.id(), waiter.id()] {
            text = text.replace(&pid.to_string(), "[PID]");
        }
        // Pids and times vary in width: compare content, not column padding.
        let mut out = String::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split("  ").filter(|w| !w.is_empty()).collect();
            out.push_str(
                &words
                    .iter()
                    .map(|w| w.trim())
                    .collect::<Vec<_>>()
                    .join("  "),
            );
            out.push('\n');
        }
        out
    };
    let human = env.run(&["slot", "status"]).success();
    insta::with_settings!({filters => vec![(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[TIME]")]}, {
        insta::assert_snapshot!(redact(&human.snapshot(&env)), @r"
        slots: 1 of 1 in use, 1 waiting ($TEST_ENV/slots)
        SLOT  PID  CAP  SINCE  WO  REPO
        0  [PID]  1  [TIME]  wo-01  $TEST_ENV/repo
        WAITING  PID  CAP  SINCE  WO  REPO
        #1  [PID]  1  [TIME]  wo-02  $TEST_ENV/repo
        [stderr]
        [exit status: 0]
        ");
    });
    // Pin the output as printed (field order included); only the times vary.
    let raw = env.run(&["slot", "status", "--json"]).success();
    let json = raw.json();
    let mut text = raw.stdout.clone();
    for list in ["holders", "waiters"] {
        for row in json[list].as_array().expect(list) {
            let since = row["since"].as_i64().expect("since");
            assert!(since > 1_700_000_000, "{since}");
            text = text.replace(&format!("\"since\": {since}"), "\"since\": \"[since]\"");
        }
    }
    insta::assert_snapshot!(redact(&text), @r#"
    {
    "version": 2,
    "dir": "$TEST_ENV/slots",
    "cap": 1,
    "used": 1,
    "holders": [
    {
    "slot": 0,
    "pid": [PID],
    "repo": "$TEST_ENV/repo",
    "wo": "wo-01",
    "since": "[since]",
    "cap": 1
    }
    ],
    "waiters": [
    {
    "pid": [PID],
    "repo": "$TEST_ENV/repo",
    "wo": "wo-02",
    "since": "[since]",
    "cap": 1
    }
    ]
    }
    "#);
    std::fs::write(&release, "").expect("release");
    finish(holder).success();
    finish(waiter).success();
}

#[test]
fn slot_dir_is_private() {
    let mut env = TestEnv::new();
    env.run(&["slot", "run", "--", "true"]).success();
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&env.slot_dir), 0o700);
    assert_eq!(mode(&env.slot_dir.join("queue")), 0o700);
    // A directory of ours that holds other things and is open to others is
    // refused, not chmod'ed behind the user's back.
    let shared = env.root.join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::write(shared.join("notes"), "").expect("write");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    env.set_env("ARBITER_SLOT_DIR", &shared.display().to_string());
    let run = env.run(&["slot", "run", "--", "true"]).code(2);
    assert!(
        run.stderr.contains("accessible to other users"),
        "{}",
        run.stderr
    );
    assert_eq!(mode(&shared), 0o755);
    assert!(!shared.join("lock").exists(), "nothing was written");
}

#[test]
fn bad_cap_is_a_usage_error_and_changes_nothing() {
    let env = TestEnv::new();
    let run = env
        .run(&["slot", "run", "--max-total", "0", "--", "true"])
        .code(2);
    assert_eq!(
        run.stderr,
        "error: --max-total 0: the slot cap must be between 1 and 1024\n\
         hint: set it with --max-total N or 'git config arbiter.maxTotal N'\n"
    );
    env.git(&["config", "arbiter.maxTotal", "lots"]);
    let run = env.run(&["slot", "run", "--", "true"]).code(2);
    assert!(run.stderr.contains("arbiter.maxTotal"), "{}", run.stderr);
    assert!(!env.slot_dir.exists(), "no slot dir was created");
    env.run(&["slot", "run"]).code(2);
}

#[test]
fn planted_symlink_slot_is_refused_and_its_target_untouched() {
    let env = TestEnv::new();
    env.run(&["slot", "run", "--", "true"]).success();
    // What another user could plant in an open slot directory.
    let victim = env.root.join("victim");
    std::fs::write(&victim, "precious\n").expect("victim");
    let slot = env.slot_dir.join("slot-0");
    std::fs::remove_file(&slot).expect("rm slot-0");
    std::os::unix::fs::symlink(&victim, &slot).expect("symlink");
    let run = env.run(&["slot", "run", "--", "true"]).code(2);
    assert!(
        run.stderr
            .starts_with(&format!("error: {} is a symbolic link", slot.display())),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("\nhint: "), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
    env.run(&["slot", "status"]).code(2);
    // A dangling one must not create its target either.
    let lock = env.slot_dir.join("lock");
    let target = env.root.join("created-through-lock");
    std::fs::remove_file(&slot).expect("rm symlink");
    std::fs::remove_file(&lock).expect("rm lock");
    std::os::unix::fs::symlink(&target, &lock).expect("symlink");
    env.run(&["slot", "run", "--", "true"]).code(2);
    assert!(!target.exists(), "the lock symlink was followed");
}

#[test]
fn slot_dir_writable_by_others_is_refused_not_repaired() {
    let env = TestEnv::new();
    env.run(&["slot", "run", "--", "true"]).success();
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o7777;
    // Only slot files inside, yet others could have planted any of them.
    std::fs::set_permissions(&env.slot_dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let run = env.run(&["slot", "run", "--", "true"]).code(2);
    let dir = env.slot_dir.display().to_string();
    assert!(
        run.stderr.starts_with(&format!(
            "error: slot directory {dir} is writable by other users (mode 777)"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("chmod 700 {dir}")),
        "{}",
        run.stderr
    );
    assert_eq!(mode(&env.slot_dir), 0o777, "the directory was not chmod'ed");
    env.run(&["slot", "status"]).code(2);
    assert_eq!(mode(&env.slot_dir), 0o777);
    // The queue inside is held to the same rule.
    std::fs::set_permissions(&env.slot_dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let queue = env.slot_dir.join("queue");
    std::fs::set_permissions(&queue, std::fs::Permissions::from_mode(0o770)).expect("chmod");
    env.run(&["slot", "run", "--", "true"]).code(2);
    assert_eq!(mode(&queue), 0o770);
}

#[test]
fn slot_dir_that_is_a_file_is_a_usage_error() {
    let mut env = TestEnv::new();
    let file = env.root.join("not-a-dir");
    std::fs::write(&file, "x").expect("write");
    env.set_env("ARBITER_SLOT_DIR", &file.display().to_string());
    let run = env.run(&["slot", "run", "--", "true"]).code(2);
    assert!(
        run.stderr.starts_with(&format!(
            "error: slot directory {} is not a directory",
            file.display()
        )),
        "{}",
        run.stderr
    );
    env.run(&["slot", "status"]).code(2);
    // Below a file, too.
    env.set_env(
        "ARBITER_SLOT_DIR",
        &file.join("slots").display().to_string(),
    );
    env.run(&["slot", "status"]).code(2);
    assert_eq!(std::fs::read_to_string(&file).expect("file"), "x");
}

#[test]
fn status_shows_the_cap_each_holder_uses() {
    let env = TestEnv::new();
    // A conductor elsewhere runs with a cap of 2; this repository's cap is 6.
    let (release, holder) = spawn_holder(&env, &["--max-total", "2", "--label", "other"]);
    let json = status(&env);
    assert_eq!(json["cap"], 6);
    assert_eq!(json["holders"][0]["cap"], 2, "{json}");
    let human = env.run(&["slot", "status"]).success().stdout;
    assert!(
        human.contains("\nnote: running holders and waiters use cap 2; the cap here is 6\n"),
        "{human}"
    );
    // A waiter with a cap of 1 waits although this view says 1 of 6.
    let waiter = spawn(&env, &["slot", "run", "--max-total", "1", "--", "true"]);
    wait_until("the waiter is queued", || {
        status(&env)["waiters"].as_array().expect("waiters").len() == 1
    });
    let human = env.run(&["slot", "status"]).success().stdout;
    assert!(
        human.contains("\nnote: running holders and waiters use caps 1, 2; the cap here is 6\n"),
        "{human}"
    );
    std::fs::write(&release, "").expect("release");
    finish(holder).success();
    finish(waiter).success();
    let human = env.run(&["slot", "status"]).success().stdout;
    assert!(!human.contains("note:"), "{human}");
}

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use git_arbiter::run::slots::{self, HolderInfo, Wait, WaitState};
use git_arbiter::state::context::Context;
use git_arbiter::{Error, ExitCode};
use rustix::process::{Pid, Signal};
use serde::Serialize;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::{json, out, render_error, table, Env};

/// Machine-wide build slots: who holds them, or hold one around a command.
///
/// Every git-arbiter process of the user shares one cap on concurrent builds,
/// across repositories (`--max-total`, else `arbiter.maxTotal`, else 6). A slot
/// is an flock'd file in the slot directory (`$ARBITER_SLOT_DIR`, else
/// `arbiter.slotDir`, else `$XDG_RUNTIME_DIR/git-arbiter`, else
/// `~/.local/state/git-arbiter`), so the slot of a killed holder is free at
/// once. Waiters are served first come, first served.
#[derive(Args, Debug)]
pub struct SlotArgs {
    #[command(subcommand)]
    command: SlotCommand,
}

#[derive(Subcommand, Debug)]
enum SlotCommand {
    Status(StatusArgs),
    Run(RunArgs),
}

/// Show the cap, the holders (pid, cap, since, work order, repo) and the waiters.
///
/// Read-only. Outside a repository the cap is `--max-total` or the default.
/// Each holder and waiter shows the cap it runs under, which may differ from
/// this one (another repository's config, another `--max-total`).
#[derive(Args, Debug)]
struct StatusArgs {
    /// Print `{"version":2,"dir":…,"cap":…,"used":…,"holders":[…],"waiters":[…]}`
    #[arg(long)]
    json: bool,
    /// The cap to report [default: `arbiter.maxTotal`, else 6]
    #[arg(long, value_name = "N")]
    max_total: Option<u32>,
}

/// Hold one slot while CMD runs, for hooks and scripts.
///
/// Waits in turn for a free slot (printing `arbiter slot waiting …` on
/// stderr), runs CMD with `ARBITER_SLOT=<index>` in its environment, releases
/// the slot when CMD ends and exits with CMD's exit status (128+N if a signal
/// N ended it). Exit 5 with `--no-wait` when no slot is free, 130 when
/// interrupted while waiting. While CMD runs, SIGTERM and SIGHUP are passed on
/// to it. Run from a script or hook (stdin not a terminal), CMD gets a
/// process group of its own and SIGINT, SIGTERM and SIGHUP are passed on to
/// that whole group, so what CMD started ends too; on a terminal CMD stays
/// in the terminal's group, where Ctrl-C reaches it.
#[derive(Args, Debug)]
struct RunArgs {
    /// The machine-wide cap [default: `arbiter.maxTotal`, else 6]
    #[arg(long, value_name = "N")]
    max_total: Option<u32>,
    /// Exit 5 at once instead of waiting when no slot is free
    #[arg(long)]
    no_wait: bool,
    /// What `slot status` shows for this holder [default: CMD]
    #[arg(long, value_name = "LABEL")]
    label: Option<String>,
    /// The command and its arguments (after `--`)
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

pub fn cmd_slot(env: &Env, args: SlotArgs) -> Result<ExitCode, Error> {
    // Slots are machine-wide: outside a repository they still work, with no
    // repository configuration to read.
    let ctx = env.context().ok();
    match args.command {
        SlotCommand::Status(a) => status(ctx.as_ref(), a),
        SlotCommand::Run(a) => run(env, ctx.as_ref(), a),
    }
}

#[derive(Serialize)]
struct StatusOutput {
    version: u32,
    dir: String,
    cap: u32,
    used: usize,
    holders: Vec<HolderRow>,
    waiters: Vec<WaiterRow>,
}

#[derive(Serialize)]
struct HolderRow {
    slot: usize,
    /// Null when the locked slot file holds no readable info.
    pid: Option<u32>,
    repo: Option<String>,
    wo: Option<String>,
    since: Option<i64>,
    /// The cap the holder was admitted under; null if it recorded none.
    cap: Option<u32>,
}

#[derive(Serialize)]
struct WaiterRow {
    pid: u32,
    repo: String,
    wo: String,
    since: i64,
    cap: u32,
}

fn status(ctx: Option<&Context>, args: StatusArgs) -> Result<ExitCode, Error> {
    let cap = slots::cap(ctx, args.max_total)?;
    let dir = slots::slot_dir(ctx)?;
    let occupancy = slots::occupancy(&dir)?;
    let output = StatusOutput {
        version: git_arbiter::JSON_VERSION,
        dir: dir.display().to_string(),
        cap,
        used: occupancy.holders.len(),
        holders: occupancy
            .holders
            .iter()
            .map(|h| HolderRow {
                slot: h.slot,
                pid: h.info.as_ref().map(|i| i.pid),
                repo: h.info.as_ref().map(|i| i.repo.clone()),
                wo: h.info.as_ref().map(|i| i.wo.clone()),
                since: h.info.as_ref().map(|i| i.since),
                cap: h.cap,
            })
            .collect(),
        waiters: occupancy
            .waiters
            .iter()
            .map(|w| WaiterRow {
                pid: w.info.pid,
                repo: w.info.repo.clone(),
                wo: w.info.wo.clone(),
                since: w.info.since,
                cap: w.cap,
            })
            .collect(),
    };
    if args.json {
        out(&json(&output));
    } else {
        out(&render(&output));
    }
    Ok(ExitCode::Success)
}

fn render(o: &StatusOutput) -> String {
    let mut text = format!(
        "slots: {} of {} in use, {} waiting ({})\n",
        o.used,
        o.cap,
        o.waiters.len(),
        o.dir
    );
    // `N of cap` above is this command's view; say so when others run with
    // another cap, as theirs decides when they (and those behind them) run.
    let mut others: Vec<u32> = o
        .holders
        .iter()
        .filter_map(|h| h.cap)
        .chain(o.waiters.iter().map(|w| w.cap))
        .collect();
    others.sort_unstable();
    others.dedup();
    if others.iter().any(|&c| c != o.cap) {
        let list: Vec<String> = others.iter().map(u32::to_string).collect();
        text.push_str(&format!(
            "note: running holders and waiters use cap{} {}; the cap here is {}\n",
            if others.len() == 1 { "" } else { "s" },
            list.join(", "),
            o.cap
        ));
    }
    let unknown = || "?".to_string();
    if !o.holders.is_empty() {
        let rows: Vec<Vec<String>> = o
            .holders
            .iter()
            .map(|h| {
                vec![
                    h.slot.to_string(),
                    h.pid.map_or_else(unknown, |p| p.to_string()),
                    h.cap.map_or_else(unknown, |c| c.to_string()),
                    h.since.map_or_else(unknown, utc),
                    h.wo.clone().unwrap_or_else(unknown),
                    h.repo.clone().unwrap_or_else(unknown),
                ]
            })
            .collect();
        text.push_str(&table(
            &["SLOT", "PID", "CAP", "SINCE", "WO", "REPO"],
            &rows,
        ));
    }
    if !o.waiters.is_empty() {
        let rows: Vec<Vec<String>> = o
            .waiters
            .iter()
            .enumerate()
            .map(|(i, w)| {
                vec![
                    format!("#{}", i + 1),
                    w.pid.to_string(),
                    w.cap.to_string(),
                    utc(w.since),
                    w.wo.clone(),
                    w.repo.clone(),
                ]
            })
            .collect();
        text.push_str(&table(
            &["WAITING", "PID", "CAP", "SINCE", "WO", "REPO"],
            &rows,
        ));
    }
    text
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC), without a date library.
fn utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A `key=value` value: bare when it is one plain word, else quoted.
fn kv(value: &str) -> String {
    if !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:@+,".contains(c))
    {
        value.to_owned()
    } else {
        format!("{value:?}")
    }
}

fn run(env: &Env, ctx: Option<&Context>, args: RunArgs) -> Result<ExitCode, Error> {
    let cap = slots::cap(ctx, args.max_total)?;
    let dir = slots::slot_dir(ctx)?;
    let label = args.label.clone().unwrap_or_else(|| {
        args.command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    });
    let info = HolderInfo::now(holder_place(env, ctx), label.clone());

    // On a terminal CMD stays in our process group, the terminal's: Ctrl-C
    // reaches it there, and it may read the terminal. Elsewhere (a hook, a
    // script) it gets a group of its own, so a signal passed on reaches
    // what it started too, as Ctrl-C would.
    let own_group = !std::io::IsTerminal::is_terminal(&std::io::stdin());
    let (interrupt, forward) = handle_signals(own_group)?;

    let wait = if args.no_wait {
        Wait::NonBlocking
    } else {
        Wait::Block
    };
    let mut on_wait = |s: &WaitState| {
        say!(
            "arbiter slot waiting wo={} cap={} held={} ahead={}",
            kv(&label),
            s.cap,
            s.held,
            s.ahead
        );
    };
    let Some(slot) = slots::acquire(&dir, cap, &info, wait, &interrupt, &mut on_wait)? else {
        return Err(Error::NoSlot { cap });
    };
    // A signal between the last poll and here still means "do not start CMD".
    if interrupt.load(Ordering::SeqCst) {
        return Err(Error::Interrupted);
    }

    let program = &args.command[0];
    let mut command = std::process::Command::new(program);
    command
        .args(&args.command[1..])
        .env("ARBITER_SLOT", slot.index().to_string());
    if own_group {
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            // As env(1), nice(1) and timeout(1): 127 not found, 126 not runnable.
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            render_error(&Error::io(format!(
                "cannot run '{}'",
                program.to_string_lossy()
            ))(e));
            drop(slot);
            std::process::exit(code);
        }
    };
    let status = wait_passing_signals(&mut child, &forward, own_group)?;
    drop(slot);
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(ExitCode::Fatal.code());
    // CMD's status is passed through as is; the contract's ExitCode only
    // carries git-arbiter's own codes, so exit here (the slot is released).
    std::process::exit(code);
}

/// Where a slot's holder runs, as `git arbiter slot status` shows it: the
/// repository's worktree (or git dir), else the current directory.
fn holder_place(env: &Env, ctx: Option<&Context>) -> String {
    let place = match ctx {
        Some(c) => c
            .workdir
            .clone()
            .unwrap_or_else(|| c.repo.git_dir().to_owned()),
        None => env.cwd.clone(),
    };
    place.display().to_string()
}

/// Signal handlers for the wait and the run: an interrupt flag (a signal
/// before CMD starts means do not start it) and the signal to pass on to
/// CMD (`own_group`: CMD has a process group of its own, and Ctrl-C is
/// passed on too).
fn handle_signals(own_group: bool) -> Result<(Arc<AtomicBool>, Arc<AtomicUsize>), Error> {
    // Handlers, not SIG_IGN: an ignored disposition would be inherited by CMD
    // across exec, a handler is reset to the default there.
    let interrupt = Arc::new(AtomicBool::new(false));
    let forward = Arc::new(AtomicUsize::new(0));
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(&interrupt))
            .map_err(Error::io("installing the signal handler"))?;
    }
    let passed_on: &[i32] = if own_group {
        &[SIGINT, SIGTERM, SIGHUP]
    } else {
        &[SIGTERM, SIGHUP]
    };
    for &signal in passed_on {
        signal_hook::flag::register_usize(signal, Arc::clone(&forward), signal as usize)
            .map_err(Error::io("installing the signal handler"))?;
    }
    Ok((interrupt, forward))
}

/// Wait for CMD, passing on the signals this process receives.
fn wait_passing_signals(
    child: &mut std::process::Child,
    forward: &AtomicUsize,
    own_group: bool,
) -> Result<std::process::ExitStatus, Error> {
    Ok(loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(Error::io("waiting for the command")(e)),
        }
        let forwarded = i32::try_from(forward.swap(0, Ordering::SeqCst)).ok();
        if let Some(signal) = forwarded.and_then(Signal::from_named_raw) {
            // Our own child's pid, which is not yet reaped (try_wait just said
            // it runs), so the pid (and its group's id) cannot have been reused.
            let pid = Pid::from_child(child);
            let _ = match own_group {
                true => rustix::process::kill_process_group(pid, signal),
                false => rustix::process::kill_process(pid, signal),
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_767_225_600), "2026-01-01T00:00:00Z");
        assert_eq!(utc(951_827_696), "2000-02-29T12:34:56Z");
        assert_eq!(utc(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn kv_quotes_only_when_needed() {
        assert_eq!(kv("wo-01"), "wo-01");
        assert_eq!(kv("sleep 30"), "\"sleep 30\"");
        assert_eq!(kv(""), "\"\"");
    }
}

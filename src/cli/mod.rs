//! The command line: parse with clap, call the library, render results, and
//! render every error once (`error: …` plus `hint: …`) with the contract's exit code.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, Parser, Subcommand};
use git_arbiter::state::context::Context;
use git_arbiter::{Error, ExitCode};

/// `eprintln!` that never panics: with stderr closed (`2>&-` on a pipe whose
/// reader left) there is no one to tell, and what the command did must not
/// turn into a panic because of it.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod batch;
mod clear;
mod complete_ids;
mod demo;
mod doctor;
mod generate;
mod halt;
mod install_docs;
mod lint;
mod log;
mod merge_back;
mod pick;
mod pool;
mod progress;
mod race;
mod report;
mod retry;
mod round;
mod show;
mod slot;
mod status;
mod stop;
mod sync;
mod worktree;

/// Conduct parallel builders on one git repository.
///
/// git-arbiter runs work orders (Markdown files under `work-orders/`) through
/// builders such as AI coding agents or scripts, each in its own linked
/// worktree. It decides from git's own data which orders run together
/// (disjoint declared files), starts the next whenever a builder finishes,
/// lands the clean ones through a merge queue that runs the gates on the
/// merged result before the branch moves, rejects merges that touched
/// undeclared files, and keeps all of its state in `refs/notes/arbiter`.
///
/// Exit codes: 0 success, 1 escalation (a halted work order remains),
/// 2 usage/config/input error, 3 merge conflict, 4 drift rejected,
/// 5 no slot free, 128 unexpected repository or file-system failure,
/// 130 interrupted.
#[derive(Parser, Debug)]
#[command(
    name = "git-arbiter",
    bin_name = "git arbiter",
    version,
    max_term_width = 100
)]
pub struct Cli {
    /// The older spelling `git arbiter --orders DIR <subcommand>`, still
    /// accepted for the subcommands that read orders; hidden so the help
    /// documents one place for it, after the subcommand as git's own options.
    #[arg(long, value_name = "DIR", hide = true)]
    pub orders: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// `--orders`, on exactly the subcommands that read work orders.
#[derive(Args, Debug, Clone)]
pub struct OrdersArgs {
    /// Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]
    #[arg(long, value_name = "DIR")]
    pub orders: Option<PathBuf>,
}

/// How kept work is checked before it lands (`retry`, `merge-back`): as a round checks it.
#[derive(Args, Debug, Clone)]
pub struct GateArgs {
    /// Gate command (repeatable), run on the merged result before the branch moves [default: `arbiter.gate`]
    #[arg(long = "gate", value_name = "CMD")]
    pub gates: Vec<String>,
    /// `merged` (gates run on the merged result before the branch moves) or `none` [default: `arbiter.verify`, else merged when a gate is configured]
    #[arg(long, value_name = "WHAT", value_parser = ["merged", "none"])]
    pub verify: Option<String>,
    /// Per-gate time limit, e.g. `90s`, `10m` [default: `arbiter.timeout`, else none]
    #[arg(long, value_name = "DURATION", value_parser = round::parse_duration)]
    pub timeout: Option<std::time::Duration>,
}

/// The checks of [`GateArgs`], resolved against the configuration.
pub struct Gates {
    pub gates: Vec<String>,
    pub verify: git_arbiter::run::queue::Verify,
    pub timeout: Option<std::time::Duration>,
    pub pool: git_arbiter::run::pool::Options,
}

impl GateArgs {
    pub fn resolve(self, ctx: &Context) -> Result<Gates, Error> {
        let gates = if self.gates.is_empty() {
            ctx.config_strings("arbiter.gate")
        } else {
            self.gates
        };
        let verify = round::verify_or_config(ctx, self.verify.as_deref(), !gates.is_empty())?;
        let max_total = git_arbiter::run::slots::cap(Some(ctx), None)?;
        Ok(Gates {
            verify,
            timeout: round::timeout_or_config(ctx, self.timeout)?,
            pool: git_arbiter::run::pool::Options::resolve(ctx, false, None, max_total)?,
            gates,
        })
    }
}

impl Gates {
    pub fn checks(&self) -> git_arbiter::run::queue::Checks<'_> {
        git_arbiter::run::queue::Checks {
            verify: self.verify,
            gates: &self.gates,
            timeout: self.timeout,
            pool: &self.pool,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Round(round::RoundArgs),
    Race(race::RaceArgs),
    Pick(pick::PickArgs),
    Demo(demo::DemoArgs),
    Status(status::StatusArgs),
    #[command(subcommand)]
    Worktree(worktree::WorktreeCommand),
    MergeBack(merge_back::MergeBackArgs),
    Batch(batch::BatchArgs),
    Lint(lint::LintArgs),
    Clear(clear::ClearArgs),
    Retry(retry::RetryArgs),
    Halt(halt::HaltArgs),
    Slot(slot::SlotArgs),
    Stop(stop::StopArgs),
    Sync(sync::SyncArgs),
    Log(log::LogArgs),
    Show(show::ShowArgs),
    Report(report::ReportArgs),
    Doctor(doctor::DoctorArgs),
    #[command(subcommand)]
    Pool(pool::PoolCommand),
    InstallDocs(install_docs::InstallDocsArgs),
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
    /// Called by the shell completions for a work-order argument.
    #[command(hide = true, name = "complete-ids")]
    CompleteIds(complete_ids::CompleteIdsArgs),
}

impl Command {
    /// The `--orders` of a subcommand that reads work orders, `None` for the others.
    fn orders_args(&self) -> Option<&OrdersArgs> {
        match self {
            Command::Round(a) => Some(&a.orders),
            Command::Race(a) => Some(&a.orders),
            Command::Status(a) => Some(&a.orders),
            Command::MergeBack(a) => Some(&a.orders),
            Command::Batch(a) => Some(&a.orders),
            Command::Lint(a) => Some(&a.orders),
            Command::Clear(a) => Some(&a.orders),
            Command::Retry(a) => Some(&a.orders),
            Command::Halt(a) => Some(&a.orders),
            Command::Log(a) => Some(&a.orders),
            Command::Show(a) => Some(&a.orders),
            Command::Report(a) => Some(&a.orders),
            Command::Doctor(a) => Some(&a.orders),
            Command::CompleteIds(a) => Some(&a.orders),
            // demo writes its own orders into a temporary repository.
            Command::Pick(_)
            | Command::Demo(_)
            | Command::Worktree(_)
            | Command::Pool(_)
            | Command::Slot(_)
            | Command::Stop(_)
            | Command::Sync(_)
            | Command::InstallDocs(_)
            | Command::Generate(_) => None,
        }
    }
}

/// Everything a subcommand needs from its surroundings.
pub struct Env {
    /// `--orders`, from after the subcommand or else from before it.
    pub orders: Option<PathBuf>,
    pub cwd: PathBuf,
}

impl Env {
    pub fn context(&self) -> Result<Context, Error> {
        Context::discover(&self.cwd)
    }

    pub fn orders_flag(&self) -> Option<&Path> {
        self.orders.as_deref()
    }
}

/// Print to stdout. A closed pipe (`| head`) ends quietly, as in git and
/// ripgrep; any other failure (a full disk) ends with an error, so output
/// that never arrived does not read as success.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(printable(text).as_bytes())
        .and_then(|_| stdout.flush())
    {
        std::process::exit(stdout_failed(e));
    }
}

/// The exit code after a failed write to stdout, with the error said
/// unless it is a closed pipe. No hint: what the command did is done (a
/// round's merges stay merged), only its report is lost.
fn stdout_failed(e: std::io::Error) -> i32 {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return ExitCode::Success.code();
    }
    say!("error: writing to standard output: {e}");
    ExitCode::Fatal.code()
}

/// An order's reported cost in a table: the sum, `+?` when some attempt
/// reported none (unknown, not free), `?` when none reported a cost but
/// some attempt `ran`, `-` when nothing ran.
pub fn cost_cell(spent: Option<&git_arbiter::state::cost::Spent>, ran: bool) -> String {
    use git_arbiter::state::cost::format_usd;
    match spent.map(|s| (s.cost_usd, s.attempts_without_cost)) {
        Some((Some(usd), 0)) => format_usd(usd),
        Some((Some(usd), _)) => format!("{}+?", format_usd(usd)),
        Some((None, _)) => "?".into(),
        None if ran => "?".into(),
        None => "-".into(),
    }
}

/// Columns padded to their widest cell, two spaces apart; the last is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cols: &[String]| {
        let mut s = String::new();
        for (i, c) in cols.iter().enumerate() {
            if i + 1 == cols.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.push('\n');
        s
    };
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut text = line(&header);
    for row in rows {
        text.push_str(&line(row));
    }
    text
}

pub fn json<T: serde::Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("output types always serialize");
    s.push('\n');
    s
}

pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let printed = e.print();
            return if e.use_stderr() {
                ExitCode::Usage.code()
            } else {
                // --help and --version: their text is the output.
                printed.map_or_else(stdout_failed, |()| ExitCode::Success.code())
            };
        }
    };
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(e) => {
            say!("error: cannot read the current directory: {e}");
            return ExitCode::Usage.code();
        }
    };
    // After the subcommand wins over before it, as a later option does in git.
    let orders = match (cli.command.orders_args(), cli.orders) {
        (Some(args), before) => args.orders.clone().or(before),
        (None, None) => None,
        (None, Some(_)) => {
            let mut cmd = Cli::command();
            let _ = cmd
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    "--orders applies only to subcommands that read work orders",
                )
                .print();
            return ExitCode::Usage.code();
        }
    };
    let env = Env { orders, cwd };
    let result = match cli.command {
        Command::Round(args) => round::cmd_round(&env, args),
        Command::Race(args) => race::cmd_race(&env, args),
        Command::Pick(args) => pick::cmd_pick(args),
        Command::Demo(args) => demo::cmd_demo(args),
        Command::Status(args) => status::cmd_status(&env, args),
        Command::Worktree(cmd) => worktree::cmd_worktree(&env, cmd),
        Command::MergeBack(args) => merge_back::cmd_merge_back(&env, args),
        Command::Batch(args) => batch::cmd_batch(&env, args),
        Command::Lint(args) => lint::cmd_lint(&env, args),
        Command::Clear(args) => clear::cmd_clear(&env, args),
        Command::Retry(args) => retry::cmd_retry(&env, args),
        Command::Halt(args) => halt::cmd_halt(&env, args),
        Command::Slot(args) => slot::cmd_slot(&env, args),
        Command::Stop(args) => stop::cmd_stop(&env, args),
        Command::Sync(args) => sync::cmd_sync(&env, args),
        Command::Log(args) => log::cmd_log(&env, args),
        Command::Show(args) => show::cmd_show(&env, args),
        Command::Report(args) => report::cmd_report(&env, args),
        Command::Doctor(args) => doctor::cmd_doctor(&env, args),
        Command::Pool(cmd) => pool::cmd_pool(&env, cmd),
        Command::Generate(args) => generate::cmd_generate(args),
        Command::InstallDocs(args) => install_docs::cmd_install_docs(args),
        Command::CompleteIds(_) => complete_ids::cmd_complete_ids(&env),
    };
    match result {
        Ok(code) => code.code(),
        Err(e) => {
            render_error(&e);
            e.exit_code().code()
        }
    }
}

pub fn render_error(e: &Error) {
    let mut text = format!("error: {e}\n");
    if let Some(hint) = e.hint() {
        text.push_str(&format!("hint: {hint}\n"));
    }
    let _ = std::io::stderr().write_all(printable(&text).as_bytes());
}

/// `text` with every control character but a newline or a tab written as
/// an escape (`\u{1b}`): names and paths from a repository or a work order
/// must never drive the reader's terminal (an ANSI or OSC sequence).
fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let tame = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if text.chars().all(tame) {
        return text.into();
    }
    text.chars()
        .map(|c| match tame(c) {
            true => c.to_string(),
            false => c.escape_unicode().to_string(),
        })
        .collect::<String>()
        .into()
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_printed_as_escapes() {
        assert_eq!(super::printable("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            super::printable("x\u{1b}]0;pwned\u{7}y"),
            "x\\u{1b}]0;pwned\\u{7}y"
        );
    }
}

use clap::Args;
use git_arbiter::{run::lint, Error, ExitCode};

use super::{json, out, Env};

/// Check the work orders: every error at once, and what is probably not meant.
///
/// Errors are what every other command refuses to run with (a malformed
/// order, a misspelt section such as `## Dependencies`, an empty
/// `## Files to touch`, an unknown dependency, a cycle), all of them rather
/// than the first. Warnings: an order without declared files (it only runs
/// alone), a glob that matches no tracked file at the integration tip (or
/// only directories, covering nothing inside them), a dependency on a halted
/// order; `batch` lists the same warnings.
///
/// Prints one line per finding, `path:line: error|warning: message`, each
/// followed by `  hint: …` when there is something to do about it, and
/// `arbiter lint errors=<n> warnings=<n>` on stderr. Exit 2 when there is an
/// error, else 0. Read-only.
#[derive(Args, Debug)]
pub struct LintArgs {
    /// Print `{"version":2,"errors":n,"warnings":n,"findings":[{"path","line","severity","message","hint"}]}`
    #[arg(long)]
    json: bool,
    /// The integration branch [default: the current branch; on a detached HEAD, the checked-out commit]
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

pub fn cmd_lint(env: &Env, args: LintArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let dir = ctx.orders_dir(env.orders_flag())?;
    let report = lint::lint(&ctx, &dir, args.into.as_deref())?;
    if args.json {
        out(&json(&report));
    } else {
        let text: String = report
            .findings
            .iter()
            .map(|finding| match &finding.hint {
                Some(hint) => format!("{finding}\n  hint: {hint}\n"),
                None => format!("{finding}\n"),
            })
            .collect();
        out(&text);
    }
    say!(
        "arbiter lint errors={} warnings={}",
        report.errors,
        report.warnings
    );
    Ok(if report.errors > 0 {
        ExitCode::Usage
    } else {
        ExitCode::Success
    })
}

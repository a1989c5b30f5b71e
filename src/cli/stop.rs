use clap::Args;
use git_arbiter::{run::conductor, Error, ExitCode};

use super::Env;

/// Ask the running conductors (`round`, `race`) of this repository to stop.
///
/// They stop dispatching, end their builders' process groups, record
/// consistent state and exit 130. A round started afterwards runs normally;
/// running `round` again resumes the work.
#[derive(Args, Debug)]
pub struct StopArgs {}

pub fn cmd_stop(env: &Env, _args: StopArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let stopped = conductor::request_stop_all(&ctx)?;
    say!("arbiter stop conductors={}", stopped.len());
    Ok(ExitCode::Success)
}

use clap::Args;
use git_arbiter::state::remote::{Remote, Synced};
use git_arbiter::{Error, ExitCode};

use super::Env;

/// Bring this clone's state (`refs/notes/arbiter`) and a git remote's together.
///
/// Whichever is behind moves forward to the other: the remote's is fetched,
/// or this clone's is pushed (by compare-and-swap). A remote state that
/// does not contain this clone's, and is not contained in it, was rewritten
/// by someone: that is refused (exit 2) and nothing moves. Nothing fetched
/// is ever executed.
#[derive(Args, Debug)]
pub struct SyncArgs {
    /// The git remote [default: `arbiter.remote`, else `origin`]
    #[arg(long, value_name = "NAME")]
    remote: Option<String>,
}

pub fn cmd_sync(env: &Env, args: SyncArgs) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    let name = args
        .remote
        .or_else(|| ctx.configured_remote())
        .unwrap_or_else(|| "origin".into());
    let remote = Remote::for_state(&ctx.repo, &name).map_err(git_arbiter::state::Error::Remote)?;
    let short = |id: Option<gix::ObjectId>| {
        id.map_or_else(
            || "(none)".to_owned(),
            |id| id.to_hex_with_len(12).to_string(),
        )
    };
    match remote
        .sync(&ctx.repo)
        .map_err(git_arbiter::state::Error::Remote)?
    {
        Synced::UpToDate => say!("arbiter sync remote={name} up-to-date"),
        Synced::Fetched { from, to } => say!(
            "arbiter sync remote={name} fetched {}..{}",
            short(from),
            short(Some(to))
        ),
        Synced::Pushed { from, to } => say!(
            "arbiter sync remote={name} pushed {}..{}",
            short(from),
            short(Some(to))
        ),
    }
    Ok(ExitCode::Success)
}

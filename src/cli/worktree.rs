use std::path::PathBuf;

use clap::{Args, Subcommand};
use git_arbiter::sys::error::{GitContext, InputError};
use git_arbiter::{run::worktree, state::orders, Error, ExitCode};
use serde::Serialize;

use super::{json, out, Env};

/// Create, remove and list git-arbiter's linked worktrees.
///
/// Each work order is built in its own linked worktree on branch
/// `arbiter/<id>`, under `arbiter.worktreeDir` (default: the folder
/// `<repo>.arbiter/` beside the main worktree, never inside `.git/`). They are
/// ordinary linked worktrees: `git worktree list`, `git status` and
/// `git worktree remove` work on them.
#[derive(Subcommand, Debug)]
pub enum WorktreeCommand {
    Add(AddArgs),
    Remove(RemoveArgs),
    List(ListArgs),
}

/// Create branch `arbiter/<id>` at REV and a linked worktree for it.
///
/// Prints the worktree's path. The branch must not exist yet; the destination
/// folder must not exist (nor be a symlink). On failure nothing is left behind.
#[derive(Args, Debug)]
pub struct AddArgs {
    /// The work order's id (also the worktree's folder name)
    id: String,
    /// Start the branch here [default: the integration branch's tip]
    #[arg(long, value_name = "REV")]
    base: Option<String>,
    /// The integration branch whose tip is the default base [default: the current branch]
    #[arg(long, value_name = "BRANCH")]
    into: Option<String>,
}

/// Remove the worktree of `<id>` (discarding what a builder left in it) and delete branch `arbiter/<id>`.
///
/// Missing pieces are fine: removing twice succeeds.
#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// The work order's id
    id: String,
}

/// List git-arbiter's worktrees: name, branch, commit and path.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print `{"version":2,"worktrees":[{"name","path","branch","head","prunable"}]}`
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ListOutput<'a> {
    version: u32,
    worktrees: &'a [worktree::Info],
}

#[derive(Serialize)]
struct AddOutput {
    version: u32,
    name: String,
    path: PathBuf,
    branch: String,
    base: String,
}

fn check_id(id: &str) -> Result<(), Error> {
    orders::check_id(id).map_err(|m| {
        InputError::new(format!("invalid work order id: {m}"))
            .hint("ids are work order file stems such as wo-01")
            .into()
    })
}

pub fn cmd_worktree(env: &Env, cmd: WorktreeCommand) -> Result<ExitCode, Error> {
    let ctx = env.context()?;
    match cmd {
        WorktreeCommand::Add(args) => {
            check_id(&args.id)?;
            let base = match &args.base {
                Some(rev) => {
                    ctx.repo
                        .rev_parse_single(rev.as_str())
                        .map_err(|_| {
                            InputError::new(format!("--base '{rev}' does not name a commit"))
                                .hint("pass a branch, tag or commit id")
                        })?
                        .object()
                        .git_context(format!("reading {rev}"))?
                        .peel_to_commit()
                        .map_err(|_| {
                            InputError::new(format!("--base '{rev}' does not name a commit"))
                                .hint("pass a branch, tag or commit id")
                        })?
                        .id
                }
                None => {
                    let branch = ctx.integration_branch(args.into.as_deref())?;
                    ctx.branch_tip(&branch)?
                }
            };
            let branch = worktree::branch_of(&args.id);
            let path = worktree::add(&ctx, &args.id, &branch, base)?;
            out(&json(&AddOutput {
                version: git_arbiter::JSON_VERSION,
                name: args.id.clone(),
                path: path.clone(),
                branch: branch.clone(),
                base: base.to_string(),
            }));
            say!(
                "arbiter worktree add wo={} branch={branch} base={base} path={}",
                args.id,
                path.display()
            );
        }
        WorktreeCommand::Remove(args) => {
            check_id(&args.id)?;
            worktree::remove(&ctx, &args.id, &worktree::branch_of(&args.id))?;
            say!("arbiter worktree remove wo={}", args.id);
        }
        WorktreeCommand::List(args) => {
            let list = worktree::list(&ctx)?;
            if args.json {
                out(&json(&ListOutput {
                    version: git_arbiter::JSON_VERSION,
                    worktrees: &list,
                }));
            } else {
                let mut text = String::new();
                for w in &list {
                    text.push_str(&format!(
                        "{:<20} {:<28} {:<12} {}{}\n",
                        w.name,
                        w.branch.as_deref().unwrap_or("(detached)"),
                        w.head.as_deref().map_or("-", |h| &h[..h.len().min(12)]),
                        w.path.display(),
                        if w.prunable { " (prunable)" } else { "" }
                    ));
                }
                out(&text);
            }
        }
    }
    Ok(ExitCode::Success)
}

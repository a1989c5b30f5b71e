use std::path::Path;
use std::process::Command;

use clap::Args;
use git_arbiter::run::round::{self, Options};
use git_arbiter::state::context::Context;
use git_arbiter::sys::error::InputError;
use git_arbiter::{Error, ExitCode};

use super::{out, progress};

/// Run a full round on a built-in example, in a temporary repository.
///
/// Six work orders and a scripted builder show: a batch of disjoint orders
/// built at once, an order deferred because its files overlap, a dependency
/// that sees its dependency's change, a failed attempt retried and passing,
/// and a merge rejected for touching an undeclared file. Prints the summary
/// and `git log --graph --oneline` of the result.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Keep the demo repository and print where it is
    #[arg(long)]
    keep: bool,
}

const ORDERS: &[(&str, &str)] = &[
    ("wo-01", "# Greeting\n\n## Files to touch\n- src/greet.sh\n\n## Task\nPrint a greeting.\n"),
    ("wo-02", "# Farewell\n\n## Files to touch\n- src/farewell.sh\n\n## Task\nPrint a farewell.\n"),
    (
        "wo-03",
        "# Greeting docs\n\n## Depends on\n- wo-01\n\n## Files to touch\n- docs/**\n\n## Task\nDocument src/greet.sh.\n",
    ),
    ("wo-04", "# Parser\n\n## Files to touch\n- src/parse.sh\n\n## Task\nParse arguments (flaky first attempt).\n"),
    (
        "wo-05",
        "# Config\n\n## Files to touch\n- src/config.sh\n\n## Task\nAdd a config file (the builder also edits the Makefile).\n",
    ),
    ("wo-06", "# Louder greeting\n\n## Files to touch\n- src/greet.sh\n\n## Task\nMake the greeting louder.\n"),
];

/// The scripted builder: what a coding agent would do, deterministically.
const BUILDER: &str = r#"#!/bin/sh
set -e
mkdir -p src docs
case "$ARBITER_WO" in
  wo-01) printf 'echo hello\n' > src/greet.sh ;;
  wo-02) printf 'echo goodbye\n' > src/farewell.sh ;;
  wo-03) test -f src/greet.sh || { echo "dependency not merged yet" >&2; exit 1; }
         printf '# greet.sh\n\nIt runs: %s\n' "$(cat src/greet.sh)" > docs/greet.md ;;
  wo-04) if [ "$ARBITER_ATTEMPT" = 1 ]; then echo "flaky: failing attempt 1" >&2; exit 1; fi
         printf 'echo "args: $*"\n' > src/parse.sh ;;
  wo-05) printf 'CONFIG=1\n' > src/config.sh
         printf 'all:\n\t@echo sneaky\n' >> Makefile ;;
  wo-06) printf 'echo HELLO\n' > src/greet.sh ;;
esac
"#;

const GATE: &str = "for f in src/*.sh; do [ -e \"$f\" ] || continue; sh -n \"$f\" || exit 1; done";

pub fn cmd_demo(args: DemoArgs) -> Result<ExitCode, Error> {
    let dir = tempfile::Builder::new()
        .prefix("git-arbiter-demo-")
        .tempdir()
        .map_err(Error::io("creating the demo directory"))?;
    let root = dir.path().to_path_buf();
    let repo = root.join("repo");
    setup(&root, &repo)?;
    let ctx = Context::discover(&repo)?;
    let orders = ctx.load_orders(None)?;
    out(&format!(
        "git-arbiter demo: {} work orders in {}\n\n",
        orders.len(),
        repo.display()
    ));
    let max_total = git_arbiter::run::slots::cap(Some(&ctx), None)?;
    let opts = Options {
        build: format!("sh {}", root.join("builder.sh").display()),
        gates: vec![GATE.to_owned()],
        max: ctx.max_batch(None)?,
        max_total,
        verify: git_arbiter::run::queue::Verify::Merged,
        pool: git_arbiter::run::pool::Options::resolve(&ctx, false, None, max_total)?,
        ..Options::default()
    };
    let progress = progress::for_stderr();
    let summary = round::run(&ctx, &orders, &opts, progress.as_ref())?;
    drop(progress);
    out(&format!(
        "\n{}",
        super::round::render(
            &summary,
            false,
            &orders,
            &super::round::kept_worktrees(&ctx, &summary)
        )
    ));
    // Display only: stock git draws the graph the user knows.
    let graph = demo_git(
        &repo,
        &["log", "--graph", "--oneline", "--decorate=short", "main"],
    )?;
    out(&format!("\n$ git log --graph --oneline main\n{graph}"));
    let expected_halt = summary.halted.len() == 1
        && summary.halted[0].wo_id == "wo-05"
        && summary.halted[0].reason == git_arbiter::run::merge::HALT_DRIFT;
    let expected_done = ["wo-01", "wo-02", "wo-03", "wo-04", "wo-06"]
        .iter()
        .all(|id| summary.done.iter().any(|d| d == id));
    if args.keep {
        let kept = dir.keep();
        out(&format!("\nkept: {}\n", kept.display()));
    } else {
        // The escalation above names paths in it.
        out(&format!(
            "\n{} and everything named above in it is removed now; `git arbiter demo --keep` keeps it to look around\n",
            root.display()
        ));
    }
    if expected_halt && expected_done {
        out("\ndemo: as expected — 5 merged (wo-04 on its second attempt), wo-05 rejected for drift (Makefile)\n");
        Ok(ExitCode::Success)
    } else {
        Err(
            InputError::new("the demo did not end as expected (see the summary above)")
                .hint("please report this with the output")
                .into(),
        )
    }
}

fn setup(root: &Path, repo: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(repo.join("work-orders"))
        .map_err(Error::io("creating the demo repository"))?;
    for (id, text) in ORDERS {
        std::fs::write(repo.join("work-orders").join(format!("{id}.md")), text)
            .map_err(Error::io("writing the demo work orders"))?;
    }
    std::fs::write(repo.join("README"), "git-arbiter demo\n")
        .map_err(Error::io("writing README"))?;
    std::fs::write(repo.join("Makefile"), "all:\n\t@echo build\n")
        .map_err(Error::io("writing Makefile"))?;
    std::fs::write(root.join("builder.sh"), BUILDER)
        .map_err(Error::io("writing the demo builder"))?;
    // The fixture is made with stock git, exactly as a user's repository would be.
    demo_git(root, &["init", "-q", "-b", "main", "repo"])?;
    demo_git(repo, &["config", "user.name", "git-arbiter demo"])?;
    demo_git(repo, &["config", "user.email", "demo@git-arbiter.invalid"])?;
    demo_git(repo, &["add", "-A"])?;
    demo_git(repo, &["commit", "-q", "-m", "Initial commit"])?;
    Ok(())
}

fn demo_git(dir: &Path, args: &[&str]) -> Result<String, Error> {
    let mut cmd = Command::new("git");
    for var in git_arbiter::git::config_env::GIT_ENV {
        cmd.env_remove(var);
    }
    let output = cmd
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(Error::io(format!("running git {}", args.join(" "))))?;
    if !output.status.success() {
        return Err(Error::git(format!("git {}", args.join(" ")))(
            String::from_utf8_lossy(&output.stderr)
                .trim()
                .to_owned()
                .into(),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use git_arbiter::sys::error::InputError;
use git_arbiter::{Error, ExitCode};

use super::generate::{bash, fish, man_pages, zsh, BIN};
use super::out;

/// Install the man pages and shell completions where `man` and the shells find them.
///
/// git turns `git arbiter --help` into `man git-arbiter`, which says "No
/// manual entry" until the pages are installed (`git arbiter help <command>`
/// and `-h` always work). This writes, under the prefix (`$XDG_DATA_HOME`,
/// else `~/.local/share`): the man pages into `man/man1/`, the bash
/// completion into `bash-completion/completions/` (bash-completion's own
/// per-user folder), the fish completion into
/// `fish/vendor_completions.d/`, and the zsh one into `zsh/site-functions/`.
/// It prints every file it wrote, then the lines to add to a shell profile
/// where `man` or zsh would not look there by themselves. The pages are made
/// from this binary's own command definitions, so they match it.
#[derive(Args, Debug)]
pub struct InstallDocsArgs {
    /// Install under DIR instead of `$XDG_DATA_HOME` (else `~/.local/share`)
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
}

pub fn cmd_install_docs(args: InstallDocsArgs) -> Result<ExitCode, Error> {
    let prefix = match args.prefix {
        Some(prefix) => prefix,
        None => default_prefix()?,
    };
    if prefix.exists() && !prefix.is_dir() {
        return Err(
            InputError::new(format!("--prefix {} is not a directory", prefix.display()))
                .hint("give a directory such as ~/.local/share or /usr/local/share")
                .into(),
        );
    }
    let man1 = prefix.join("man/man1");
    let mut files: Vec<(PathBuf, Vec<u8>)> = man_pages()?
        .into_iter()
        .map(|(name, bytes)| (man1.join(name), bytes))
        .collect();
    files.push((prefix.join("bash-completion/completions").join(BIN), bash()));
    files.push((
        prefix
            .join("fish/vendor_completions.d")
            .join(format!("{BIN}.fish")),
        fish(),
    ));
    let zsh_dir = prefix.join("zsh/site-functions");
    files.push((zsh_dir.join(format!("_{BIN}")), zsh()));
    let mut report = String::new();
    for (path, bytes) in &files {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(Error::io(format!("creating {}", dir.display())))?;
        }
        std::fs::write(path, bytes).map_err(Error::io(format!("writing {}", path.display())))?;
        report.push_str(&format!("wrote {}\n", path.display()));
    }
    let man_dir = prefix.join("man");
    match man_finds(&man1) {
        Some(true) => report.push_str("man git-arbiter finds the installed page\n"),
        Some(false) => report.push_str(&format!(
            "man does not look in {dir}: add to your shell profile\n  export MANPATH=\"{dir}:$MANPATH\"\n",
            dir = man_dir.display()
        )),
        None => report.push_str("no `man` program here: 'git arbiter help <command>' shows the same text\n"),
    }
    // bash-completion loads a script when its command is completed, and for
    // `git arbiter …` that command is git: git's completion finds
    // `_git_arbiter` only once the script is sourced.
    report.push_str(&format!(
        "for `git arbiter <TAB>` in bash, add to ~/.bashrc\n  source {}\n",
        prefix
            .join("bash-completion/completions")
            .join(BIN)
            .display()
    ));
    report.push_str(&format!(
        "for zsh, add to ~/.zshrc before compinit\n  fpath=({} $fpath)\n",
        zsh_dir.display()
    ));
    out(&report);
    Ok(ExitCode::Success)
}

/// `$XDG_DATA_HOME`, else `~/.local/share` (the XDG base directory rule).
fn default_prefix() -> Result<PathBuf, Error> {
    if let Some(data) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(data));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| PathBuf::from(home).join(".local/share"))
        .ok_or_else(|| {
            InputError::new("neither XDG_DATA_HOME nor HOME is set")
                .hint("give the directory with --prefix DIR")
                .into()
        })
}

/// Does `man -w git-arbiter` find the page in `man1`? `None` when there is
/// no `man` to ask (the man search path is man's own business: asking it is
/// the only faithful answer).
fn man_finds(man1: &Path) -> Option<bool> {
    let found = Command::new("man").args(["-w", BIN]).output().ok()?;
    let path = String::from_utf8_lossy(&found.stdout);
    let want = man1.canonicalize().unwrap_or_else(|_| man1.to_owned());
    Some(
        found.status.success()
            && Path::new(path.trim())
                .parent()
                .and_then(|p| p.canonicalize().ok())
                .is_some_and(|p| p == want),
    )
}

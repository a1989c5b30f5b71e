use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, ValueEnum};
use clap_complete::Shell;
use git_arbiter::{Error, ExitCode};

use super::{out, Cli};

/// Generate the man pages or a shell completion script from the command definitions.
///
/// The same clap definitions that parse the command line produce the docs,
/// so they cannot drift apart (as `rg --generate`). The committed copies in
/// `man/` and `completions/` are refreshed with `scripts/gen-docs`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// What to generate
    kind: Kind,
    /// Write the file(s) into DIR (created if missing) instead of stdout. `man`
    /// writes `git-arbiter.1` plus one `git-arbiter-<subcommand>.1` per
    /// subcommand; on stdout it prints only `git-arbiter.1`.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Kind {
    /// Man pages (roff)
    Man,
    /// bash completion; also completes `git arbiter …` through git's own completion
    CompleteBash,
    /// zsh completion (`_git-arbiter`, which zsh's `_git` also uses for `git arbiter …`)
    CompleteZsh,
    /// fish completion for `git-arbiter` (fish's git completion forwards `git arbiter …` to it)
    CompleteFish,
}

/// The name git dispatches to, and the name every generated file is keyed on.
pub(super) const BIN: &str = "git-arbiter";

pub fn cmd_generate(args: GenerateArgs) -> Result<ExitCode, Error> {
    let files = match args.kind {
        Kind::Man => man_pages()?,
        Kind::CompleteBash => vec![(format!("{BIN}.bash"), bash())],
        Kind::CompleteZsh => vec![(format!("_{BIN}"), zsh())],
        Kind::CompleteFish => vec![(format!("{BIN}.fish"), fish())],
    };
    match args.out {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(Error::io(format!("creating {}", dir.display())))?;
            for (name, bytes) in &files {
                write_file(&dir.join(name), bytes)?;
            }
        }
        None => out(&String::from_utf8_lossy(&files[0].1)),
    }
    Ok(ExitCode::Success)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    std::fs::write(path, bytes).map_err(Error::io(format!("writing {}", path.display())))
}

/// The command as the docs present it: no `help` subcommand (each page
/// documents `--help` already) and everything hidden left out.
fn documented_command() -> clap::Command {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// `git-arbiter.1` first, then one page per visible subcommand, recursively
/// (a subcommand group such as `slot` gets `git-arbiter-slot-run.1` and so on).
pub(super) fn man_pages() -> Result<Vec<(String, Vec<u8>)>, Error> {
    fn walk(cmd: clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> Result<(), Error> {
        let man = clap_mangen::Man::new(cmd.clone())
            // git's pages carry "Git Manual"; ours says whose manual it is.
            .manual("git-arbiter Manual")
            // Subcommands carry no version of their own; every page names the release.
            .source(format!("git-arbiter {}", env!("CARGO_PKG_VERSION")));
        let mut bytes = Vec::new();
        man.render(&mut bytes)
            .map_err(Error::io("rendering a man page"))?;
        pages.push((man.get_filename(), bytes));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub.clone(), pages)?;
        }
        Ok(())
    }
    let mut pages = Vec::new();
    walk(documented_command(), &mut pages)?;
    Ok(pages)
}

fn completion(shell: Shell) -> Vec<u8> {
    // Completions key every subcommand on the binary's name; the help's
    // "git arbiter" (with a space) would name bash's case labels differently
    // from the function that dispatches to them.
    let mut cmd = completed_command().bin_name(BIN);
    let mut bytes = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN, &mut bytes);
    bytes
}

/// The command without what is hidden: clap_complete offers hidden
/// subcommands and arguments (`generate`, `complete-ids`, the top-level
/// `--orders`), and clap has no way to remove a subcommand, so the visible
/// parts are copied into a fresh command.
fn completed_command() -> clap::Command {
    let full = Cli::command();
    let mut cmd = clap::Command::new(BIN)
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true);
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    cmd.args(full.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// Subcommands whose first positional is a work-order id.
const ID_SUBCOMMANDS: &[&str] = &[
    "clear",
    "halt",
    "race",
    "log",
    "retry",
    "merge-back",
    "show",
];

/// clap's bash completion for `git-arbiter`, plus `_git_arbiter` for git's own
/// bash completion, which calls `_git_<command>` for `git <command> <TAB>`.
pub(super) fn bash() -> Vec<u8> {
    let script = String::from_utf8(completion(Shell::Bash)).expect("clap writes UTF-8");
    // clap_complete 4.6 names the dispatch states of a dashed binary name
    // `git__arbiter__subcmd__<sub>` but labels their cases
    // `git__subcmd__arbiter__subcmd__<sub>`, so nothing below the top level
    // would complete. Align the labels (tests/test_docs.rs completes
    // `git arbiter batch --` to catch a change on either side).
    let mut script = script.replace("git__subcmd__arbiter__subcmd__", "git__arbiter__subcmd__");
    // Offer the ids next to the options of subcommands that take one (clap
    // spells a dash in a subcommand name `__subcmd__` in its labels).
    for sub in ID_SUBCOMMANDS {
        let label = format!(
            "        git__arbiter__subcmd__{})\n",
            sub.replace('-', "__subcmd__")
        );
        let Some(start) = script.find(&label) else {
            continue;
        };
        let end = script[start..]
            .find("\n            ;;\n")
            .map_or(script.len(), |e| start + e);
        let block = script[start..end].replace(
            r#"compgen -W "${opts}""#,
            r#"compgen -W "${opts} $(__git_arbiter_ids)""#,
        );
        script.replace_range(start..end, &block);
    }
    script.push_str(GIT_BASH_WRAPPER);
    script.into_bytes()
}

/// clap's zsh completion, with work-order ids for the id argument of the
/// subcommands that take one (clap offers `_default` there: file names).
pub(super) fn zsh() -> Vec<u8> {
    let mut script = String::from_utf8(completion(Shell::Zsh)).expect("clap writes UTF-8");
    for sub in ID_SUBCOMMANDS {
        // The first block is the subcommand's own; later ones belong to `help`.
        let label = format!("\n({sub})\n_arguments ");
        let Some(start) = script.find(&label) else {
            continue;
        };
        let end = script[start..]
            .find("\n;;\n")
            .map_or(script.len(), |e| start + e);
        let block: Vec<String> = script[start..end]
            .split('\n')
            .map(|line| {
                // A positional spec starts `':` or `'*:`; options start `'-` or `'(`.
                let positional = line.starts_with("':") || line.starts_with("'*:");
                if positional {
                    line.replace(":_default' \\", ":_git_arbiter_ids' \\")
                } else {
                    line.to_owned()
                }
            })
            .collect();
        script.replace_range(start..end, &block.join("\n"));
    }
    let call = "if [ \"$funcstack[1]\" = \"_git-arbiter\" ]; then";
    let ids = "# The work orders of the repository at hand, for an id argument.\n\
               _git_arbiter_ids() {\n    \
                   local -a ids\n    \
                   ids=(${(f)\"$(git arbiter complete-ids 2>/dev/null)\"})\n    \
                   _describe -t work-orders 'work order' ids\n\
               }\n\n";
    if let Some(at) = script.find(call) {
        script.insert_str(at, ids);
    }
    script.into_bytes()
}

/// clap's fish completion, with work-order ids for the subcommands that take one.
pub(super) fn fish() -> Vec<u8> {
    let mut script = String::from_utf8(completion(Shell::Fish)).expect("clap writes UTF-8");
    for sub in ID_SUBCOMMANDS {
        script.push_str(&format!(
            "complete -c {BIN} -n \"__fish_{fn_name}_using_subcommand {sub}\" -f -a \"(git arbiter complete-ids 2>/dev/null)\" -d 'work order'\n",
            fn_name = BIN.replace('-', "_"),
        ));
    }
    script.into_bytes()
}

/// git's completion hands `_git_arbiter` the words of the whole line
/// (`git [-C dir …] arbiter sta`); clap's function expects its own command
/// name first. So the words up to `arbiter` become one `git-arbiter`, and
/// because git registers its completion with `-o nospace`, finished words get
/// the trailing space that git's own `__gitcomp` would add.
const GIT_BASH_WRAPPER: &str = r#"
# The work orders of the repository at hand, for an id argument; through
# git's completion, of the repository `git -C <dir>` names.
__git_arbiter_ids() {
    git ${__git_C_args:+"${__git_C_args[@]}"} arbiter complete-ids 2>/dev/null
}

# `git arbiter <TAB>` through git's own bash completion, which calls
# _git_arbiter with COMP_WORDS holding the whole `git … arbiter …` line.
_git_arbiter() {
    local i start=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ "${COMP_WORDS[i]}" == arbiter ]]; then
            start=$i
            break
        fi
    done
    if ((start == 0)); then
        return 0
    fi
    local COMP_WORDS=(git-arbiter "${COMP_WORDS[@]:start+1}")
    local COMP_CWORD=$((COMP_CWORD - start))
    _git__arbiter git-arbiter "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    for i in "${!COMPREPLY[@]}"; do
        if [[ ! -d "${COMPREPLY[i]}" && "${COMPREPLY[i]}" != *= ]]; then
            COMPREPLY[i]="${COMPREPLY[i]} "
        fi
    done
}
"#;

//! The committed man pages and completions are what `git arbiter generate`
//! produces from the current clap definitions, and they work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{bin, TestEnv};

const REGENERATE: &str = "scripts/gen-docs";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .map(|e| {
            let e = e.expect("directory entry");
            let name = e.file_name().into_string().expect("utf-8 file name");
            (name, std::fs::read(e.path()).expect("read generated file"))
        })
        .collect()
}

/// Generate into a temp dir and compare with the committed copy, file by file.
#[track_caller]
fn assert_current(committed: &str, kinds: &[&str]) {
    let env = TestEnv::new();
    let out = env.root.join(committed);
    for kind in kinds {
        env.run_in(
            &env.root,
            &["generate", kind, "--out", out.to_str().expect("utf-8")],
        )
        .success();
    }
    let fresh = read_dir_files(&out);
    let stored = read_dir_files(&manifest_dir().join(committed));
    assert!(
        !fresh.is_empty(),
        "generate wrote nothing into {committed}/"
    );
    let mut stale = Vec::new();
    for (name, bytes) in &fresh {
        match stored.get(name) {
            None => stale.push(format!("{committed}/{name} is missing")),
            Some(old) if old != bytes => stale.push(format!("{committed}/{name} is out of date")),
            Some(_) => {}
        }
    }
    for name in stored.keys().filter(|n| !fresh.contains_key(*n)) {
        stale.push(format!(
            "{committed}/{name} is no longer generated (a removed subcommand?)"
        ));
    }
    assert!(
        stale.is_empty(),
        "{}\nregenerate with: {REGENERATE}  (it runs `cargo run -- generate man --out man` and \
         `cargo run -- generate complete-<shell> --out completions`), then commit the result",
        stale.join("\n")
    );
}

#[test]
fn committed_man_pages_are_current() {
    assert_current("man", &["man"]);
}

#[test]
fn committed_completions_are_current() {
    assert_current(
        "completions",
        &["complete-bash", "complete-zsh", "complete-fish"],
    );
}

/// The subcommands listed under "Commands:" in a help text.
fn listed_subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A wrapped description line is indented further than the names.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_subcommand_has_help_and_a_man_page() {
    let env = TestEnv::new();
    let man_dir = manifest_dir().join("man");
    // Every node of the command tree as `--help` lists it.
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = queue.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let run = env.run_in(&env.root, &args).success();
        assert!(
            run.stdout.contains("Usage: git arbiter"),
            "{args:?} printed no usage:\n{}",
            run.stdout
        );
        assert!(
            !run.stdout.lines().next().unwrap_or("").trim().is_empty(),
            "{args:?} has no one-line description (add a doc comment)"
        );
        let page = if path.is_empty() {
            "git-arbiter.1".to_owned()
        } else {
            format!("git-arbiter-{}.1", path.join("-"))
        };
        assert!(
            man_dir.join(&page).is_file(),
            "man/{page} is missing; regenerate with {REGENERATE}"
        );
        seen += 1;
        for sub in listed_subcommands(&run.stdout) {
            let mut child = path.clone();
            child.push(sub);
            queue.push(child);
        }
    }
    assert!(seen >= 5, "only {seen} commands found in --help");
    // The hidden generator is not listed but has its help too.
    env.run_in(&env.root, &["generate", "--help"]).success();
}

/// `git arbiter --help` is turned by git into `man git-arbiter`: with the
/// pages installed as the README says, it shows ours.
#[test]
fn git_help_finds_the_installed_man_page() {
    if Command::new("man").arg("-w").arg("man").output().is_err() {
        eprintln!("skipping: no `man` program on this machine");
        return;
    }
    let mut env = TestEnv::new();
    let man1 = env.root.join("share/man/man1");
    std::fs::create_dir_all(&man1).expect("man1 dir");
    for (name, bytes) in read_dir_files(&manifest_dir().join("man")) {
        std::fs::write(man1.join(name), bytes).expect("install page");
    }
    let bin_dir = bin().parent().expect("bin dir").to_owned();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    env.set_env("PATH", path.to_str().expect("utf-8 PATH"));
    env.set_env(
        "MANPATH",
        env.root.join("share/man").to_str().expect("utf-8"),
    );
    env.set_env("MANPAGER", "cat");
    env.set_env("PAGER", "cat");
    env.set_env("MANWIDTH", "100");
    let run = env.git_try_in(&env.repo, &["arbiter", "--help"]);
    assert_eq!(run.code, 0, "git arbiter --help failed:\n{}", run.stderr);
    assert!(
        run.stdout
            .contains("git-arbiter - Conduct parallel builders"),
        "git arbiter --help did not show our man page:\n{}",
        run.stdout
    );
}

/// Bash completion of whole `git … arbiter …` lines, through git's own
/// completion when installed (as a user gets it), else by calling
/// `_git_arbiter` as git's completion would.
fn complete_bash(lines: &[&str]) -> Vec<String> {
    let script = manifest_dir().join("completions/git-arbiter.bash");
    let git_completion = Path::new("/usr/share/bash-completion/completions/git");
    let (setup, entry) = if git_completion.is_file() {
        (
            format!("source {}", git_completion.display()),
            "__git_wrap__git_main",
        )
    } else {
        (String::new(), "_git_arbiter")
    };
    let mut program = format!(
        r#"{setup}
source '{script}'
complete_line() {{
    COMP_LINE="$1"; COMP_POINT=${{#1}}
    read -ra COMP_WORDS <<<"$1"
    if [[ "$1" == *" " ]]; then COMP_WORDS+=(""); fi
    COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
    COMPREPLY=()
    {entry}
    printf '%s|' "${{COMPREPLY[@]}}"; echo
}}
"#,
        script = script.display()
    );
    for line in lines {
        program.push_str(&format!("complete_line '{line}'\n"));
    }
    let env = TestEnv::new();
    // Orders for the id completion, and `git arbiter` on PATH for it.
    env.work_order("wo-01", "One", &[], &["a"]);
    env.work_order("wo-02", "Two", &[], &["b"]);
    let bin_dir = bin().parent().expect("bin dir").to_owned();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let output = Command::new("bash")
        .arg("--norc")
        .arg("-c")
        .arg(&program)
        .current_dir(&env.repo)
        .env("PATH", path)
        .env("HOME", &env.home)
        .env("GIT_CONFIG_GLOBAL", env.root.join("global.gitconfig"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "bash failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_git_arbiter_lines() {
    let replies = complete_bash(&[
        "git arbiter stat",
        "git arbiter ",
        "git arbiter batch --m",
        "git -C . arbiter halt wo-01 --r",
        "git -c a.b=c arbiter clear --he",
    ]);
    // Finished words end in a space, as git's own completion gives them.
    assert_eq!(replies[0], "status |");
    for sub in ["status |", "batch |", "clear |", "halt |"] {
        assert!(
            replies[1].contains(sub),
            "{sub} missing in {:?}",
            replies[1]
        );
    }
    assert!(
        replies[2].split('|').any(|r| r == "--max "),
        "{}",
        replies[2]
    );
    assert_eq!(replies[3], "--reason |");
    assert_eq!(replies[4], "--help |");
}

/// An id argument completes to the repository's work orders; the hidden
/// subcommands are never offered.
#[test]
fn bash_completes_work_order_ids_and_hides_generate() {
    let subs = [
        "clear",
        "halt",
        "race",
        "log",
        "retry",
        "merge-back",
        "show",
    ];
    let lines: Vec<String> = subs.iter().map(|s| format!("git arbiter {s} ")).collect();
    let mut all: Vec<&str> = lines.iter().map(String::as_str).collect();
    all.push("git arbiter ");
    all.push("git arbiter clear wo-0");
    // The completions run in the repository; `-C ..` names its parent, which
    // holds no repository: no ids (only through git's own completion,
    // which parses `-C`).
    all.push("git -C .. arbiter clear ");
    let replies = complete_bash(&all);
    for (sub, reply) in subs.iter().zip(&replies) {
        for id in ["wo-01 ", "wo-02 "] {
            assert!(reply.split('|').any(|r| r == id), "{sub}: {reply}");
        }
    }
    let top = &replies[subs.len()];
    assert!(top.contains("status "), "{top}");
    assert!(!top.contains("generate"), "{top}");
    assert!(!top.contains("complete-ids"), "{top}");
    assert_eq!(replies[subs.len() + 1], "wo-01 |wo-02 |");
    if Path::new("/usr/share/bash-completion/completions/git").is_file() {
        let elsewhere = &replies[subs.len() + 2];
        assert!(!elsewhere.contains("wo-01"), "{elsewhere}");
    }
}

/// zsh and fish are not installed where the tests run, so their scripts are
/// checked as text: each id argument completes through `complete-ids`, and
/// no hidden subcommand is offered.
#[test]
fn zsh_and_fish_complete_work_order_ids() {
    let zsh = std::fs::read_to_string(manifest_dir().join("completions/_git-arbiter"))
        .expect("zsh completion");
    let fish = std::fs::read_to_string(manifest_dir().join("completions/git-arbiter.fish"))
        .expect("fish completion");
    assert!(zsh.contains("_git_arbiter_ids() {"), "zsh helper");
    assert!(zsh.contains("git arbiter complete-ids"), "zsh helper");
    for sub in [
        "clear",
        "halt",
        "race",
        "log",
        "retry",
        "merge-back",
        "show",
    ] {
        let block = zsh
            .split(&format!("\n({sub})\n"))
            .nth(1)
            .and_then(|rest| rest.split("\n;;\n").next())
            .unwrap_or_else(|| panic!("zsh: no block for {sub}"));
        assert!(
            block.contains(":_git_arbiter_ids' \\"),
            "zsh {sub}: {block}"
        );
        assert!(
            fish.contains(&format!(
                "__fish_git_arbiter_using_subcommand {sub}\" -f -a \"(git arbiter complete-ids"
            )),
            "fish {sub}"
        );
    }
    for hidden in ["generate", "complete-ids"] {
        assert!(!zsh.contains(&format!("'{hidden}:")), "zsh offers {hidden}");
        assert!(
            !fish.contains(&format!("-a \"{hidden}\"")),
            "fish offers {hidden}"
        );
    }
}

#[test]
fn bash_completes_the_plain_binary_name() {
    let script = manifest_dir().join("completions/git-arbiter.bash");
    let program = format!(
        r#"source '{}'
COMP_WORDS=(git-arbiter status --j); COMP_CWORD=2
_git__arbiter git-arbiter --j status
printf '%s|' "${{COMPREPLY[@]}}""#,
        script.display()
    );
    let output = Command::new("bash")
        .args(["--norc", "-c", &program])
        .output()
        .expect("run bash");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "--json|");
}

/// README's first command runs `examples/basic/setup.sh`: it must work on a
/// machine without a git identity and show the documented batch.
#[test]
fn basic_example_runs_status_and_batch() {
    let env = TestEnv::new();
    let bin_dir = bin().parent().expect("bin dir").to_owned();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let example = env.root.join("example");
    // No identity in the environment or any config, as on a fresh machine.
    let output = Command::new(manifest_dir().join("examples/basic/setup.sh"))
        .arg(&example)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &env.home)
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_GLOBAL", env.root.join("global.gitconfig"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(&env.root)
        .output()
        .expect("run setup.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "setup.sh failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("login-api     blocked"), "{stdout}");
    // `batch` prints its selection as text: the rows of its "batch:" table.
    let picked: Vec<&str> = stdout
        .lines()
        .skip_while(|l| *l != "batch:")
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(picked, ["docs", "login-form"], "{stdout}");
    assert!(
        stdout.contains("login-styles  overlap (with login-form)"),
        "{stdout}"
    );
    assert!(stdout.contains("no_declared_files"), "{stdout}");
}

/// `git arbiter install-docs` puts the pages and completions where `man`
/// and the shells look (under `--prefix`, default `~/.local/share`), says
/// what it wrote, and then `git arbiter --help` shows the page.
#[test]
fn install_docs_makes_git_arbiter_help_work() {
    let mut env = TestEnv::new();
    let prefix = env.root.join("share");
    let home = env.root.clone();
    env.set_env("HOME", home.to_str().expect("utf-8"));
    env.unset_env("XDG_DATA_HOME");
    env.set_env("MANPATH", prefix.join("man").to_str().expect("utf-8"));
    let run = env.run(&["install-docs"]).success();
    let default = env.root.join(".local/share");
    assert!(
        run.stdout.contains(&format!(
            "wrote {}",
            default.join("man/man1/git-arbiter.1").display()
        )),
        "{}",
        run.stdout
    );
    let run = env
        .run(&["install-docs", "--prefix", prefix.to_str().expect("utf-8")])
        .success();
    assert_eq!(
        read_dir_files(&prefix.join("man/man1")),
        read_dir_files(&manifest_dir().join("man")),
        "the committed pages"
    );
    let completions = read_dir_files(&manifest_dir().join("completions"));
    for (installed, committed) in [
        (
            "bash-completion/completions/git-arbiter",
            "git-arbiter.bash",
        ),
        (
            "fish/vendor_completions.d/git-arbiter.fish",
            "git-arbiter.fish",
        ),
        ("zsh/site-functions/_git-arbiter", "_git-arbiter"),
    ] {
        assert_eq!(
            std::fs::read(prefix.join(installed)).expect("installed"),
            completions[committed],
            "{installed}"
        );
    }
    assert!(run.stdout.contains("fpath=("), "{}", run.stdout);
    if Command::new("man").arg("-w").arg("man").output().is_ok() {
        assert!(
            run.stdout
                .contains("man git-arbiter finds the installed page"),
            "{}",
            run.stdout
        );
        let bin_dir = bin().parent().expect("bin dir").to_owned();
        let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .expect("PATH");
        env.set_env("PATH", path.to_str().expect("utf-8 PATH"));
        env.set_env("MANPAGER", "cat");
        env.set_env("PAGER", "cat");
        let help = env.git_try_in(&env.repo, &["arbiter", "--help"]);
        assert!(
            help.stdout
                .contains("git-arbiter - Conduct parallel builders"),
            "{}{}",
            help.stdout,
            help.stderr
        );
    }
    let file = env.root.join("a-file");
    std::fs::write(&file, "").expect("write");
    env.run(&["install-docs", "--prefix", file.to_str().expect("utf-8")])
        .code(2);
}

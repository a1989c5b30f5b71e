//! Real repositories as git sets them up: `git -c` overrides, repository
//! formats git-arbiter cannot read, detached HEADs, `GIT_DIR` without
//! `GIT_WORK_TREE`, and paths that differ only in Unicode normalisation.
//! Stock git is the oracle throughout.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{bin, Run, TestEnv};

/// An environment whose PATH starts with the binary's directory, so that
/// `git arbiter …` runs it as git users do; one committed order `wo-01`.
fn via_git() -> TestEnv {
    let mut env = TestEnv::new();
    let dir = bin().parent().expect("binary directory").to_owned();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![dir];
    paths.extend(std::env::split_paths(&path));
    let joined = std::env::join_paths(paths).expect("PATH");
    env.set_env("PATH", joined.to_str().expect("utf-8 PATH"));
    env.work_order("wo-01", "One", &[], &["a.txt"]);
    env.commit_all("init");
    env
}

/// Stock git in `dir` with the hermetic environment plus `vars`, minus `unset`.
fn git_with(
    env: &TestEnv,
    dir: &Path,
    args: &[&str],
    vars: &[(&str, &str)],
    unset: &[&str],
) -> Run {
    let probe = env.command_in(dir, &[]);
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .envs(probe.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .envs(vars.iter().copied())
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null());
    for name in unset {
        cmd.env_remove(name);
    }
    let out = cmd.output().expect("run git");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Environment variables to set: `(name, value)`.
type Vars<'a> = &'a [(&'a str, &'a str)];

const IDENTITY: [&str; 4] = [
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
];

/// `git -c arbiter.retryCap=1 arbiter status` was shown cap 3: git hands `-c`
/// to subcommands in `GIT_CONFIG_PARAMETERS`, which was not read. The cap
/// shown is the value `git config` reads in the same environment, whichever
/// of the repository's config, `GIT_CONFIG_COUNT` and `-c` sets it.
#[test]
fn dash_c_overrides_arbiter_keys_as_git_config_reads_them() {
    let env = via_git();
    env.git(&["config", "arbiter.retryCap", "5"]);
    let count = [
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "arbiter.retryCap"),
        ("GIT_CONFIG_VALUE_0", "2"),
    ];
    let cases: [(&[&str], Vars); 4] = [
        (&[], &[]),
        (&["-c", "arbiter.retryCap=1"], &[]),
        (&[], &count),
        (&["-c", "arbiter.retryCap=1"], &count),
    ];
    for (dash_c, vars) in cases {
        let mut config = dash_c.to_vec();
        config.extend(["config", "arbiter.retryCap"]);
        let expected = git_with(&env, &env.repo, &config, vars, &[]);
        assert_eq!(expected.code, 0, "{}", expected.stderr);
        let mut status = dash_c.to_vec();
        status.extend(["arbiter", "status", "--json"]);
        let run = git_with(&env, &env.repo, &status, vars, &[]).success();
        assert_eq!(
            run.json()["orders"][0]["cap"].to_string(),
            expected.stdout.trim(),
            "git {dash_c:?} with {vars:?}"
        );
    }
}

/// Values with spaces and single quotes survive git's shell-style quoting.
#[test]
fn dash_c_values_with_spaces_and_quotes_arrive_intact() {
    let env = via_git();
    for dir in ["my orders", "it's"] {
        let order = env.repo.join(dir).join("wo-x.md");
        std::fs::create_dir_all(order.parent().expect("parent")).expect("mkdir");
        std::fs::write(&order, "# X\n\n## Files to touch\n- x.txt\n").expect("order");
        let setting = format!("arbiter.orders={dir}");
        let run = git_with(
            &env,
            &env.repo,
            &["-c", &setting, "arbiter", "status", "--json"],
            &[],
            &[],
        )
        .success();
        assert_eq!(run.json()["orders"][0]["id"], "wo-x", "{dir}");
    }
}

/// `git -c user.name=X -c user.email=y@z arbiter halt …` on a machine with no
/// identity was refused for want of one; the state commit now carries the
/// identity git itself would use.
#[test]
fn dash_c_identity_is_used_for_state_commits() {
    let env = via_git();
    let dash_c = [
        "-c",
        "user.name=Ada Lovelace",
        "-c",
        "user.email=ada@example.com",
    ];
    let mut ident = dash_c.to_vec();
    ident.extend(["var", "GIT_COMMITTER_IDENT"]);
    let oracle = git_with(&env, &env.repo, &ident, &[], &IDENTITY).success();
    let mut halt = dash_c.to_vec();
    halt.extend(["arbiter", "halt", "wo-01", "--reason", "x"]);
    git_with(&env, &env.repo, &halt, &[], &IDENTITY).success();
    let committer = env.git(&["log", "-1", "--format=%cn <%ce>", "refs/notes/arbiter"]);
    assert!(
        oracle.stdout.starts_with(committer.trim()),
        "{committer} vs git's {}",
        oracle.stdout
    );
    env.fsck();
}

/// A `GIT_CONFIG_PARAMETERS` git cannot parse is refused (git: "bogus
/// format"), exit 2, naming the variable; nothing is written.
#[test]
fn malformed_config_parameters_are_a_usage_error() {
    let env = via_git();
    for bad in [
        "'arbiter.retryCap=1",
        "arbiter.retryCap=1",
        "'a.b'x",
        "'nodot'='1'",
    ] {
        let vars = [("GIT_CONFIG_PARAMETERS", bad)];
        assert_ne!(
            git_with(&env, &env.repo, &["config", "-l"], &vars, &[]).code,
            0,
            "git accepts {bad}"
        );
        let out = env
            .command_in(&env.repo, &["halt", "wo-01", "--reason", "x"])
            .env("GIT_CONFIG_PARAMETERS", bad)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.starts_with("error: GIT_CONFIG_PARAMETERS"),
            "{bad}: {stderr}"
        );
        assert!(env.notes_tip().is_none(), "{bad}: nothing written");
    }
}

/// A repository made with `git init <format>` holding one order `wo-01` on `main`.
fn repo_in_format(env: &TestEnv, name: &str, format: &str) -> std::path::PathBuf {
    env.git_in(&env.root, &["init", "-q", "-b", "main", format, name]);
    let repo = env.root.join(name);
    std::fs::create_dir_all(repo.join("work-orders")).expect("mkdir");
    std::fs::write(
        repo.join("work-orders/wo-01.md"),
        "# One\n\n## Files to touch\n- a.txt\n",
    )
    .expect("order");
    env.git_in(&repo, &["add", "-A"]);
    env.git_in(&repo, &["commit", "-q", "-m", "init"]);
    repo
}

/// SHA-256 repositories were "not a git repository" and reftable ones exit
/// 128 ("The reference at HEAD could not be decoded") or "branch 'main' does
/// not exist" — and `halt` wrote a loose ref beside the reftable that git
/// never sees. gix 0.90 as built here reads neither format: every command
/// refuses up front, exit 2, naming the repository and its format, and
/// leaves the refs as they were.
#[test]
fn unsupported_repository_formats_are_named_and_refused() {
    let env = TestEnv::new();
    for (name, format, says) in [
        ("sha", "--object-format=sha256", "the SHA-256 object format"),
        ("table", "--ref-format=reftable", "the reftable ref format"),
    ] {
        let repo = repo_in_format(&env, name, format);
        let refs_before = env.git_in(&repo, &["for-each-ref"]);
        for args in [
            &["status"][..],
            &["status", "--into", "main"][..],
            &["batch"][..],
            &["halt", "wo-01", "--reason", "x"][..],
            &["round", "--build", "true", "--into", "main"][..],
        ] {
            let run = env.run_in(&repo, args).code(2);
            let expected = format!(
                "error: {} uses {says}, which git-arbiter does not support yet\nhint: ",
                repo.display()
            );
            assert!(
                run.stderr.starts_with(&expected),
                "{args:?}: {}",
                run.stderr
            );
            assert_eq!(run.stdout, "", "{args:?}");
        }
        // From a subdirectory, and with GIT_DIR, the same repository is named.
        std::fs::create_dir_all(repo.join("sub")).expect("mkdir");
        let run = env.run_in(&repo.join("sub"), &["status"]).code(2);
        assert!(
            run.stderr
                .contains(&format!("{} uses {says}", repo.display())),
            "{}",
            run.stderr
        );
        let run = env
            .command_in(&env.root, &["status"])
            .env("GIT_DIR", repo.join(".git"))
            .env("GIT_WORK_TREE", &repo)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("uses {says}")), "{stderr}");

        assert_eq!(env.git_in(&repo, &["for-each-ref"]), refs_before, "{name}");
        assert!(
            !repo.join(".git/refs/notes").exists(),
            "{name}: no loose ref written"
        );
        let fsck = env.git_try_in(&repo, &["fsck", "--strict", "--no-dangling"]);
        assert_eq!(fsck.code, 0, "{name}: {}", fsck.stderr);
    }
}

/// A work order declaring `café.txt` (NFC: U+00E9) whose builder wrote
/// `cafe\u{301}.txt` (NFD: `e` + U+0301) drifts, and the drift used to read
/// `café.txt` — the very name declared. Both the merge-back message and the
/// round's escalation now show the changed path as git quotes it (the same
/// text as `git diff --name-only`) with the declared form beside it; JSON
/// keeps the raw path.
#[test]
fn drift_between_unicode_normalisations_is_visible() {
    let nfc = "caf\u{e9}.txt";
    let nfd = "cafe\u{301}.txt";
    let expected = r#""cafe\314\201.txt" (declared as "caf\303\251.txt", the same name in another Unicode normalisation)"#;

    let env = TestEnv::new();
    env.write("README", "x\n");
    env.work_order("wo-01", "Cafe", &[], &[nfc]);
    env.commit_all("init");
    env.run(&["worktree", "add", "wo-01"]).success();
    let wt = env.root.join("repo.arbiter/wo-01");
    std::fs::write(wt.join(nfd), "x\n").expect("write");
    env.git_in(&wt, &["add", "-A"]);
    env.git_in(&wt, &["commit", "-q", "-m", "work"]);
    let quoted = env.git(&["diff", "--name-only", "main", "arbiter/wo-01"]);
    assert_eq!(quoted, "\"cafe\\314\\201.txt\"\n", "git's own quoting");

    let json = env.run(&["merge-back", "wo-01", "--json"]).code(4).json();
    assert_eq!(json["paths"], serde_json::json!([nfd]));
    env.run(&["clear", "wo-01"]).success();
    env.run(&["worktree", "add", "wo-01"]).success();
    std::fs::write(wt.join(nfd), "x\n").expect("write");
    env.git_in(&wt, &["add", "-A"]);
    env.git_in(&wt, &["commit", "-q", "-m", "work"]);
    let run = env.run(&["merge-back", "wo-01"]).code(4);
    assert!(
        run.stdout.ends_with(&format!(":\n  {expected}\n")),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains(quoted.trim()), "{}", run.stdout);

    env.run(&["clear", "wo-01"]).success();
    let build = format!("printf x > '{nfd}'");
    let run = env.run(&["round", "--build", &build]).code(1);
    assert!(
        run.stdout
            .contains(&format!("  wo-01  undeclared_file_drift [{expected}]\n")),
        "{}",
        run.stdout
    );
}

/// On a detached HEAD (`git checkout --detach`, a rebase, a bisect) `status`
/// and `batch` failed for want of a current branch. Read-only, they need
/// none: with `--into` they use that branch, without it the checked-out
/// commit, which is where the branch's tip was when HEAD was attached, so
/// they show what they showed on the branch. `log` needs neither.
#[test]
fn read_only_commands_work_on_a_detached_head() {
    let env = TestEnv::new();
    env.disjoint_orders(3);
    env.run(&[
        "round",
        "--build",
        "echo x > f0.txt",
        "--max",
        "1",
        "--once",
    ])
    .success();
    let on_branch: Vec<String> = [
        &["status", "--json"][..],
        &["batch"][..],
        &["log", "--json"][..],
    ]
    .iter()
    .map(|args| env.run(args).success().stdout)
    .collect();
    env.git(&["checkout", "-q", "--detach"]);
    let symbolic = env.git_try_in(&env.repo, &["symbolic-ref", "-q", "HEAD"]);
    assert_eq!(symbolic.code, 1, "HEAD is detached");
    for (args, attached) in [
        (&["status", "--json"][..], &on_branch[0]),
        (&["batch"][..], &on_branch[1]),
        (&["log", "--json"][..], &on_branch[2]),
        (&["status", "--json", "--into", "main"][..], &on_branch[0]),
        (&["batch", "--into", "main"][..], &on_branch[1]),
    ] {
        assert_eq!(&env.run(args).success().stdout, attached, "{args:?}");
    }
    env.run(&["status"]).success();
}

/// The ids of the orders `git arbiter status` lists, run in `dir` with `vars`.
fn listed_orders(env: &TestEnv, dir: &Path, vars: Vars) -> Run {
    let out = env
        .command_in(dir, &["status", "--json"])
        .envs(vars.iter().copied())
        .output()
        .expect("run");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ids(run: &Run) -> Vec<String> {
    run.json()["orders"]
        .as_array()
        .expect("orders")
        .iter()
        .map(|o| o["id"].as_str().expect("id").to_owned())
        .collect()
}

/// The orders in `<top>/work-orders`, by file name.
fn orders_under(top: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(top.join("work-orders"))
        .expect("work-orders")
        .map(|e| {
            let name = e.expect("entry").file_name();
            let name = name.to_str().expect("utf-8");
            name.strip_suffix(".md").expect(".md").to_owned()
        })
        .collect();
    ids.sort();
    ids
}

/// With `GIT_DIR` set and no `GIT_WORK_TREE`, git takes the current
/// directory as the top of the worktree unless `core.worktree` says
/// otherwise or `core.bare` is true; gix took the parent of a `.git`
/// directory, or no worktree at all for a separate git dir. Orders are now
/// read under the top `git rev-parse --show-toplevel` reports in the same
/// environment.
#[test]
fn git_dir_without_work_tree_finds_the_worktree_as_git_does() {
    let env = TestEnv::new();
    env.work_order("wo-01", "Top", &[], &["a.txt"]);
    env.commit_all("init");
    let sub = env.repo.join("sub");
    std::fs::create_dir_all(sub.join("work-orders")).expect("mkdir");
    std::fs::write(
        sub.join("work-orders/wo-sub.md"),
        "# Sub\n\n## Files to touch\n- s.txt\n",
    )
    .expect("order");
    let store = env.root.join("store.git");
    let sep = env.root.join("sep");
    env.git_in(
        &env.root,
        &[
            "init",
            "-q",
            "-b",
            "main",
            "--separate-git-dir",
            store.to_str().expect("utf-8"),
            "sep",
        ],
    );
    std::fs::create_dir_all(sep.join("work-orders")).expect("mkdir");
    std::fs::write(
        sep.join("work-orders/wo-sep.md"),
        "# Sep\n\n## Files to touch\n- s.txt\n",
    )
    .expect("order");
    let store_dir = store.to_str().expect("utf-8");
    let repo_dir = env.repo.to_str().expect("utf-8");

    let check = |dir: &Path, vars: Vars, expected: &[&str]| {
        let top = git_with(&env, dir, &["rev-parse", "--show-toplevel"], vars, &[]).success();
        let top = Path::new(top.stdout.trim());
        assert_eq!(
            orders_under(top),
            expected,
            "git's top {} for {vars:?}",
            top.display()
        );
        let run = listed_orders(&env, dir, vars).success();
        assert_eq!(ids(&run), expected, "{vars:?} in {}", dir.display());
    };
    // The current directory is the top: a separate git dir, and a subdirectory.
    check(&sep, &[("GIT_DIR", store_dir)], &["wo-sep"]);
    check(&sub, &[("GIT_DIR", "../.git")], &["wo-sub"]);
    // GIT_WORK_TREE, as before, names the top.
    check(
        &sub,
        &[("GIT_DIR", "../.git"), ("GIT_WORK_TREE", repo_dir)],
        &["wo-01"],
    );
    // core.worktree names it when GIT_WORK_TREE does not.
    env.git(&["config", "core.worktree", repo_dir]);
    check(&sub, &[("GIT_DIR", "../.git")], &["wo-01"]);
    env.git(&["config", "--unset", "core.worktree"]);

    // A bare repository has no worktree for git or for git-arbiter.
    env.git_in(&env.root, &["clone", "-q", "--bare", "repo", "bare.git"]);
    let bare = [("GIT_DIR", "../../bare.git")];
    assert_ne!(
        git_with(&env, &sub, &["rev-parse", "--show-toplevel"], &bare, &[]).code,
        0
    );
    let run = listed_orders(&env, &sub, &bare).code(2);
    assert!(run.stderr.contains("has no worktree"), "{}", run.stderr);
}

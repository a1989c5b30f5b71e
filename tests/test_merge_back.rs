//! `git arbiter merge-back`: outcomes, drift table, the checked-out branch, recovery.

use std::path::Path;

use crate::common::{event_names, TestEnv};

/// A repo with `src/a.rs`, `b.txt`, `dir/c.txt` and a work order `wo-01` declaring `files`.
fn setup(files: &[&str]) -> TestEnv {
    let env = TestEnv::new();
    env.write("src/a.rs", "a\n");
    env.write("b.txt", "b\n");
    env.write("dir/c.txt", "c\n");
    env.work_order("wo-01", "Login form", &[], files);
    env.commit_all("init");
    env
}

#[test]
fn merged_human_and_json_output() {
    let env = setup(&["src/**"]);
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("src/a.rs"), "a2\n").unwrap();
    std::fs::write(w.join("src/new.rs"), "n\n").unwrap();
    env.commit_in(&w, "work");
    let before = env.rev("main");
    insta::assert_snapshot!(env.run(&["merge-back", "wo-01"]).snapshot(&env), @"
    Merged wo-01 into main as [SHA] (2 paths changed)
    [stderr]
    arbiter land batch=1 sha=[SHORT] orders=wo-01
    arbiter merge-back wo=wo-01 outcome=merged sha=[SHA] changed=2
    [exit status: 0]
    ");
    let after = env.rev("main");
    // Two parents: the pre-merge tip and the WO branch.
    assert_eq!(env.rev("main^1"), before);
    assert_eq!(env.rev("main^2"), env.rev("arbiter/wo-01"));
    let msg = env.git(&["log", "-1", "--format=%B", "main"]);
    assert!(msg.starts_with("Merge wo-01: Login form\n\n"), "{msg}");
    let trailers = env.git(&["log", "-1", "--format=%(trailers:only,unfold)", "main"]);
    assert_eq!(
        trailers.trim(),
        format!("Arbiter-WO: wo-01\nArbiter-Attempt: 1\nArbiter-Round-Base: {before}")
    );
    // The note rides on the merge commit and stock git shows it.
    let note: serde_json::Value =
        serde_json::from_str(&env.git(&["notes", "--ref=arbiter", "show", &after])).unwrap();
    assert_eq!(note["wo"], "wo-01");
    assert_eq!(note["drift"]["passed"], true);
    assert_eq!(note["declared"], serde_json::json!(["src/**"]));
    assert_eq!(
        note["changed"],
        serde_json::json!(["src/a.rs", "src/new.rs"])
    );
    assert!(env
        .git(&["log", "--notes=arbiter", "-1"])
        .contains("\"wo\": \"wo-01\""));
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "done");
    assert_eq!(status["orders"][0]["checkpoint_after"], after.as_str());
    // Not dispatched by a round: the merge-back takes the order up (with
    // the tip as recovery's search bound), then records the merge.
    assert_eq!(status["orders"][0]["checkpoint_before"], before.as_str());
    let log = env.run(&["log", "--json", "wo-01"]).success().json();
    assert_eq!(event_names(&log), ["merge_back", "merged"]);
    // The checked-out main worktree followed the merge.
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/new.rs")).unwrap(),
        "n\n"
    );

    // Merging again: nothing to add.
    let json = env.run(&["merge-back", "wo-01", "--json"]).success().json();
    assert_eq!(json["merged"], false);
    assert_eq!(json["up_to_date"], true);
    assert_eq!(env.rev("main"), after);
    env.fsck();
}

#[test]
fn merged_json_envelope() {
    let env = setup(&["src/a.rs"]);
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("src/a.rs"), "a2\n").unwrap();
    env.commit_in(&w, "work");
    insta::assert_snapshot!(env.run(&["merge-back", "wo-01", "--json"]).snapshot(&env), @r#"
    {
      "changed": [
        "src/a.rs"
      ],
      "merged": true,
      "pre_merge_head": "[SHA]",
      "sha": "[SHA]",
      "version": 2
    }
    [stderr]
    arbiter land batch=1 sha=[SHORT] orders=wo-01
    arbiter merge-back wo=wo-01 outcome=merged sha=[SHA] changed=1
    [exit status: 0]
    "#);
    env.fsck();
}

#[test]
fn conflict_halts_and_leaves_the_branch() {
    let env = setup(&["b.txt"]);
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("b.txt"), "theirs\n").unwrap();
    env.commit_in(&w, "work");
    env.write("b.txt", "ours\n");
    let tip = env.commit_all("main moves");
    let refs_before = env.git(&["show-ref", "--heads"]);
    insta::assert_snapshot!(env.run(&["merge-back", "wo-01"]).snapshot(&env), @r"
    CONFLICT: arbiter/wo-01 does not merge cleanly into main; wo-01 is halted (merge_conflict):
      b.txt
    [stderr]
    arbiter merge-back wo=wo-01 outcome=conflict paths=1
    [exit status: 3]
    ");
    assert_eq!(env.rev("main"), tip);
    assert_eq!(env.git(&["show-ref", "--heads"]), refs_before);
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["halted"], true);
    assert_eq!(status["orders"][0]["halt_reason"], "merge_conflict");
    // A halted WO is never merged: exit 2.
    let run = env.run(&["merge-back", "wo-01"]).code(2);
    assert!(run.stderr.contains("is halted"), "{}", run.stderr);
    env.fsck();
}

/// One drift case: what the builder does, and the paths that must be rejected.
struct Case {
    name: &'static str,
    declared: &'static [&'static str],
    act: fn(&TestEnv, &Path),
    drift: &'static [&'static str],
}

fn sh(env: &TestEnv, dir: &Path, script: &str) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = env;
}

const CASES: &[Case] = &[
    Case {
        name: "add undeclared",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "echo x > x.txt"),
        drift: &["x.txt"],
    },
    Case {
        name: "modify undeclared",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "echo x >> b.txt"),
        drift: &["b.txt"],
    },
    Case {
        name: "delete undeclared",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "rm b.txt"),
        drift: &["b.txt"],
    },
    Case {
        name: "rename declared to undeclared",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "git mv src/a.rs moved.rs"),
        drift: &["moved.rs"],
    },
    Case {
        name: "rename undeclared to declared",
        declared: &["src/**"],
        act: |e, d| sh(e, d, "git mv b.txt src/b.txt"),
        drift: &["b.txt"],
    },
    Case {
        name: "mode change",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "chmod +x b.txt"),
        drift: &["b.txt"],
    },
    Case {
        name: "symlink",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "ln -s b.txt link"),
        drift: &["link"],
    },
    Case {
        name: "file becomes symlink",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "rm b.txt && ln -s dir/c.txt b.txt"),
        drift: &["b.txt"],
    },
    Case {
        name: "submodule",
        declared: &["src/a.rs"],
        act: |e, d| {
            sh(
                e,
                d,
                "printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ./sub\\n' > .gitmodules",
            );
            // A nested repository: `git add -A` records it as a gitlink.
            let sub = d.join("sub");
            std::fs::create_dir(&sub).unwrap();
            e.git_in(&sub, &["init", "-q"]);
            e.git_in(&sub, &["commit", "-q", "--allow-empty", "-m", "sub"]);
        },
        drift: &[".gitmodules", "sub"],
    },
    Case {
        name: "space in name",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "mkdir -p 'a dir' && echo x > 'a dir/f g.txt'"),
        drift: &["a dir/f g.txt"],
    },
    Case {
        name: "newline in name",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "echo x > \"$(printf 'new\\nline')\""),
        drift: &["new\nline"],
    },
    Case {
        name: "non-ascii name",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "echo x > café.txt"),
        drift: &["café.txt"],
    },
    Case {
        name: "directory becomes a file",
        declared: &["src/a.rs"],
        act: |e, d| sh(e, d, "rm -r dir && echo x > dir"),
        drift: &["dir", "dir/c.txt"],
    },
    // Covered changes merge, including awkward names that are declared.
    Case {
        name: "declared space name",
        declared: &["a dir/**"],
        act: |e, d| sh(e, d, "mkdir -p 'a dir' && echo x > 'a dir/f g.txt'"),
        drift: &[],
    },
    Case {
        name: "declared non-ascii",
        declared: &["café.txt"],
        act: |e, d| sh(e, d, "echo x > café.txt"),
        drift: &[],
    },
    Case {
        name: "declared delete via dir",
        declared: &["dir"],
        act: |e, d| sh(e, d, "rm dir/c.txt"),
        drift: &[],
    },
    Case {
        name: "rename both declared",
        declared: &["src/a.rs", "src/z.rs"],
        act: |e, d| sh(e, d, "git mv src/a.rs src/z.rs"),
        drift: &[],
    },
];

#[test]
fn drift_table() {
    for case in CASES {
        let env = setup(case.declared);
        let w = env.add_worktree("wo-01");
        (case.act)(&env, &w);
        env.commit_in(&w, case.name);
        let before = env.rev("main");
        let run = env.run(&["merge-back", "wo-01", "--json"]);
        let json = run.json();
        if case.drift.is_empty() {
            assert_eq!(run.code, 0, "{}: {}{}", case.name, run.stdout, run.stderr);
            assert_eq!(json["merged"], true, "{}", case.name);
            assert_eq!(env.git(&["status", "--porcelain"]), "", "{}", case.name);
        } else {
            assert_eq!(run.code, 4, "{}: {}{}", case.name, run.stdout, run.stderr);
            assert_eq!(
                json["halt_reason"], "undeclared_file_drift",
                "{}",
                case.name
            );
            assert_eq!(
                json["paths"],
                serde_json::json!(case.drift),
                "{}",
                case.name
            );
            assert_eq!(env.rev("main"), before, "{}: the branch moved", case.name);
            let status = env.run(&["status", "--json"]).success().json();
            assert_eq!(status["orders"][0]["halt_reason"], "undeclared_file_drift");
        }
        env.fsck();
    }
}

#[test]
fn drift_human_output() {
    let env = setup(&["src/a.rs"]);
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("src/a.rs"), "a2\n").unwrap();
    std::fs::write(w.join("b.txt"), "b2\n").unwrap();
    env.commit_in(&w, "work");
    insta::assert_snapshot!(env.run(&["merge-back", "wo-01"]).snapshot(&env), @r"
    DRIFT: arbiter/wo-01 changes files its work order does not declare; wo-01 is halted (undeclared_file_drift), main is unchanged:
      b.txt
    [stderr]
    arbiter merge-back wo=wo-01 outcome=drift paths=1
    [exit status: 4]
    ");
}

/// `--drift-scope batch` accepts what another order of the batch declared; `own` does not.
#[test]
fn drift_scope_batch_is_the_looser_union() {
    for (scope, code) in [("own", 4), ("batch", 0)] {
        let env = setup(&["src/a.rs"]);
        env.work_order("wo-02", "Other", &[], &["b.txt"]);
        env.commit_all("wo-02");
        let w = env.add_worktree("wo-01");
        std::fs::write(w.join("b.txt"), "touched by wo-01\n").unwrap();
        env.commit_in(&w, "work");
        env.run(&["merge-back", "wo-01", "--drift-scope", scope])
            .code(code);
        env.fsck();
    }
}

#[test]
fn unknown_order_or_missing_branch_exit_2() {
    let env = setup(&["src/a.rs"]);
    let run = env.run(&["merge-back", "wo-99"]).code(2);
    assert!(
        run.stderr.contains("unknown work order 'wo-99'"),
        "{}",
        run.stderr
    );
    let run = env.run(&["merge-back", "wo-01"]).code(2);
    assert!(
        run.stderr.contains("branch 'arbiter/wo-01' does not exist"),
        "{}",
        run.stderr
    );
}

#[test]
fn checked_out_in_a_linked_worktree_follows() {
    let env = setup(&["dir/**", "new/**"]);
    env.git(&["branch", "integration"]);
    let side = env.root.join("side");
    env.git(&[
        "worktree",
        "add",
        "-q",
        side.to_str().unwrap(),
        "integration",
    ]);
    let w = env.add_worktree("wo-01");
    sh(
        &env,
        &w,
        "rm dir/c.txt && mkdir -p new/deep && echo n > new/deep/n.txt && echo d > dir/d.txt",
    );
    env.commit_in(&w, "work");
    env.run(&["merge-back", "wo-01", "--into", "integration"])
        .success();
    assert_eq!(env.git_in(&side, &["status", "--porcelain"]), "");
    assert!(!side.join("dir/c.txt").exists());
    assert_eq!(
        std::fs::read_to_string(side.join("new/deep/n.txt")).unwrap(),
        "n\n"
    );
    assert_eq!(
        std::fs::read_to_string(side.join("dir/d.txt")).unwrap(),
        "d\n"
    );
    // The main worktree (on main) was not touched.
    assert!(env.repo.join("dir/c.txt").exists());
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    env.fsck();
}

/// As with `git merge`: local edits and staged changes in files the merge
/// does not touch are carried over untouched; an edit, a staged change or
/// an untracked file where the merge writes refuses it before anything
/// moves or is recorded.
#[test]
fn local_changes_in_the_checkout_are_kept_or_refuse_before_anything_moves() {
    let env = setup(&["src/**"]);
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("src/a.rs"), "a2\n").unwrap();
    std::fs::write(w.join("src/new.rs"), "theirs\n").unwrap();
    env.commit_in(&w, "work");
    let before = env.rev("main");
    let notes_before = env.notes_tip();

    // An edit of a file the merge changes.
    env.write("src/a.rs", "my edit\n");
    let run = env.run(&["merge-back", "wo-01"]).code(2);
    assert!(
        run.stderr.contains("to files it changes: 'src/a.rs'"),
        "{}",
        run.stderr
    );
    assert_eq!(env.rev("main"), before);
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/a.rs")).unwrap(),
        "my edit\n"
    );
    env.git(&["checkout", "--", "src/a.rs"]);

    // An untracked file where the merge would create one.
    env.write("src/new.rs", "mine\n");
    let run = env.run(&["merge-back", "wo-01"]).code(2);
    assert!(
        run.stderr.contains("untracked files in the checkout")
            && run.stderr.contains("'src/new.rs'"),
        "{}",
        run.stderr
    );
    assert_eq!(env.rev("main"), before);
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/new.rs")).unwrap(),
        "mine\n"
    );
    // Nothing was recorded, nothing halted.
    assert_eq!(notes_before, env.notes_tip());
    std::fs::remove_file(env.repo.join("src/new.rs")).unwrap();

    // Edits elsewhere, staged or not, stay as they are.
    env.write("b.txt", "my edit\n");
    env.write("dir/c.txt", "staged\n");
    env.git(&["add", "dir/c.txt"]);
    env.run(&["merge-back", "wo-01"]).success();
    assert_eq!(env.rev("main^1"), before);
    assert_eq!(
        env.git(&["status", "--porcelain"]),
        " M b.txt\nM  dir/c.txt\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("b.txt")).unwrap(),
        "my edit\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/a.rs")).unwrap(),
        "a2\n"
    );
    assert_eq!(env.git(&["diff", "--cached", "--name-only"]), "dir/c.txt\n");
    env.fsck();
}

/// What a landing killed after moving the branch leaves: main at an
/// arbiter-style merge of `arbiter/wo-01`, the checked-out files still at
/// `old`, and the journal it wrote before the move.
fn move_main_under_the_worktree(env: &TestEnv, old: &str) {
    let tree = env.git(&["merge-tree", "--write-tree", "main", "arbiter/wo-01"]);
    let merge = env.git(&[
        "commit-tree",
        tree.trim(),
        "-p",
        old,
        "-p",
        "arbiter/wo-01",
        "-m",
        "Merge wo-01: Login form\n\nArbiter-WO: wo-01\nArbiter-Attempt: 1",
    ]);
    std::fs::write(
        env.repo.join(".git/arbiter-landing"),
        format!("from {old}\nto {}\n", merge.trim()),
    )
    .unwrap();
    env.git(&["update-ref", "refs/heads/main", merge.trim(), old]);
}

fn finish_interrupted(env: &TestEnv) -> Vec<git_arbiter::run::user_checkout::Finished> {
    let ctx = env.context();
    let branch = ctx.integration_branch(None).unwrap();
    let worktrees = git_arbiter::run::user_checkout::worktrees_with_branch(&ctx, &branch).unwrap();
    git_arbiter::run::user_checkout::finish_interrupted(&ctx, &branch, &worktrees).unwrap()
}

/// A kill between moving the branch and updating the checked-out worktree:
/// the next start finds the journal and finishes the update.
#[test]
fn recovery_finishes_a_checkout_left_behind() {
    let env = setup(&["src/**"]);
    let old = env.rev("main");
    // Build an arbiter-style merge with plumbing and move main under the worktree's feet.
    let w = env.add_worktree("wo-01");
    sh(&env, &w, "echo a2 > src/a.rs && echo n > src/n.rs");
    env.commit_in(&w, "work");
    env.write("b.txt", "the user's edit\n");
    move_main_under_the_worktree(&env, &old);
    assert_ne!(env.git(&["status", "--porcelain"]), " M b.txt\n");

    let finished = finish_interrupted(&env);
    assert!(
        matches!(
            finished.as_slice(),
            [git_arbiter::run::user_checkout::Finished::Updated(_)]
        ),
        "{finished:?}"
    );
    assert_eq!(env.git(&["status", "--porcelain"]), " M b.txt\n");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/n.rs")).unwrap(),
        "n\n"
    );
    assert!(!env.repo.join(".git/arbiter-landing").exists());
    // Idempotent.
    assert!(finish_interrupted(&env).is_empty());
    assert_eq!(env.git(&["status", "--porcelain"]), " M b.txt\n");
    env.fsck();
}

/// An edit made after the kill to a file the landing changed is left as it
/// is, and said; the other files are updated.
#[test]
fn recovery_never_overwrites_an_edit() {
    let env = setup(&["src/**"]);
    let old = env.rev("main");
    let w = env.add_worktree("wo-01");
    sh(&env, &w, "echo a2 > src/a.rs && echo n > src/n.rs");
    env.commit_in(&w, "work");
    move_main_under_the_worktree(&env, &old);
    env.write("src/a.rs", "user edit\n");
    let finished = finish_interrupted(&env);
    let [git_arbiter::run::user_checkout::Finished::LeftAlone { paths, .. }] = finished.as_slice()
    else {
        panic!("{finished:?}");
    };
    assert_eq!(paths, &["src/a.rs"]);
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/a.rs")).unwrap(),
        "user edit\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/n.rs")).unwrap(),
        "n\n"
    );
}

/// A kill after the journal but before the move: nothing moved, the
/// journal goes, the checkout is untouched.
#[test]
fn recovery_drops_the_journal_of_a_landing_that_never_moved() {
    let env = setup(&["src/**"]);
    let old = env.rev("main");
    let w = env.add_worktree("wo-01");
    sh(&env, &w, "echo a2 > src/a.rs");
    env.commit_in(&w, "work");
    move_main_under_the_worktree(&env, &old);
    env.git(&["update-ref", "refs/heads/main", &old]);
    let finished = finish_interrupted(&env);
    assert!(
        matches!(
            finished.as_slice(),
            [git_arbiter::run::user_checkout::Finished::NotMoved(_)]
        ),
        "{finished:?}"
    );
    assert!(!env.repo.join(".git/arbiter-landing").exists());
    assert_eq!(env.git(&["status", "--porcelain"]), "");
}

/// The checked-out main worktree follows type changes (file → folder,
/// symlink, executable bit), deletions and additions; untouched files keep
/// their stat data (status stays clean without rehashing them).
#[test]
fn checked_out_main_follows_type_changes() {
    let env = setup(&["src/**", "dir/**", "b.txt", "b.txt/**"]);
    let w = env.add_worktree("wo-01");
    sh(
        &env,
        &w,
        "rm -r dir && rm b.txt && mkdir b.txt && echo x > b.txt/x \
         && chmod +x src/a.rs && ln -s a.rs src/link && echo n > src/n.rs",
    );
    env.commit_in(&w, "work");
    let untouched_before = std::fs::metadata(env.repo.join("work-orders/wo-01.md"))
        .unwrap()
        .modified()
        .unwrap();
    env.run(&["merge-back", "wo-01"]).success();
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    assert_eq!(env.git(&["diff", "--stat", "HEAD", "arbiter/wo-01"]), "");
    assert!(!env.repo.join("dir").exists());
    assert_eq!(
        std::fs::read_to_string(env.repo.join("b.txt/x")).unwrap(),
        "x\n"
    );
    assert_eq!(
        std::fs::read_link(env.repo.join("src/link")).unwrap(),
        Path::new("a.rs")
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.repo.join("src/a.rs"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o111, 0);
    assert_eq!(
        std::fs::metadata(env.repo.join("work-orders/wo-01.md"))
            .unwrap()
            .modified()
            .unwrap(),
        untouched_before
    );
    // The index is git's: `git ls-files -s` agrees with the tree.
    let staged = env.git(&["ls-files", "-s"]);
    let tree = env.git(&["ls-tree", "-r", "HEAD"]);
    assert_eq!(staged.lines().count(), tree.lines().count());
    env.fsck();
}

/// A staged change where the merge writes refuses, even with the file on
/// disk equal to the index; staged files elsewhere, new ones included, are
/// carried over.
#[test]
fn staged_change_where_the_merge_writes_refuses() {
    let env = setup(&["src/**"]);
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("src/a.rs"), "a2\n").unwrap();
    env.commit_in(&w, "work");
    let before = env.rev("main");
    env.write("src/a.rs", "staged\n");
    env.git(&["add", "src/a.rs"]);
    let run = env.run(&["merge-back", "wo-01"]).code(2);
    assert!(
        run.stderr.contains("to files it changes: 'src/a.rs'"),
        "{}",
        run.stderr
    );
    assert_eq!(env.rev("main"), before);
    // A staged deletion of it counts too.
    env.git(&["reset", "-q", "--hard"]);
    env.git(&["rm", "-q", "--cached", "src/a.rs"]);
    env.run(&["merge-back", "wo-01"]).code(2);
    assert_eq!(env.rev("main"), before);
    env.git(&["reset", "-q", "--hard"]);
    // A new staged file elsewhere stays staged.
    env.write("new.txt", "new\n");
    env.git(&["add", "new.txt"]);
    env.run(&["merge-back", "wo-01"]).success();
    assert_eq!(env.git(&["status", "--porcelain"]), "A  new.txt\n");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/a.rs")).unwrap(),
        "a2\n"
    );
    env.fsck();
}

/// Six merge-backs into one branch at the same moment: every lost
/// compare-and-swap is redone on the new tip, none is forced, all six land.
#[test]
fn concurrent_merge_backs_all_land_in_one_chain() {
    let env = TestEnv::new();
    let base = env.disjoint_orders(6);
    env.git(&["branch", "integ"]);
    for i in 0..6 {
        let id = format!("wo-{i}");
        env.git(&["branch", &format!("arbiter/{id}"), &base]);
        let w = env.root.join(format!("wt-{i}"));
        env.git(&[
            "worktree",
            "add",
            "-q",
            w.to_str().expect("utf-8"),
            &format!("arbiter/{id}"),
        ]);
        std::fs::write(w.join(format!("f{i}.txt")), format!("{i}\n")).expect("write");
        env.commit_in(&w, &format!("work {i}"));
    }
    let go = env.root.join("go");
    let children: Vec<_> = (0..6)
        .map(|i| {
            let args = ["merge-back", &format!("wo-{i}"), "--into", "integ"];
            env.spawn_at_start_line(&env.repo, &args, &go)
        })
        .collect();
    env.release_all(&go, children);
    // One first-parent chain of six merges on top of the base, each WO's file present.
    let chain = env.git(&["rev-list", "--first-parent", &format!("{base}..integ")]);
    assert_eq!(chain.lines().count(), 6, "{chain}");
    let merges = env.git(&["rev-list", "--merges", "--count", &format!("{base}..integ")]);
    assert_eq!(merges.trim(), "6");
    let files = env.git(&["ls-tree", "--name-only", "integ"]);
    for i in 0..6 {
        assert!(
            files.lines().any(|f| f == format!("f{i}.txt")),
            "f{i}.txt missing:\n{files}"
        );
    }
    let status = env
        .run(&["status", "--json", "--into", "integ"])
        .success()
        .json();
    assert!(
        status["orders"]
            .as_array()
            .expect("orders")
            .iter()
            .all(|r| r["status"] == "done"),
        "{status}"
    );
    env.fsck();
}

/// One process (a round) merges many times; merge attributes come from the
/// index, and a `.gitattributes` committed between two merge-backs counts
/// for the second. Here `merge=union` turns a conflict into a clean merge,
/// as it does for `git merge-tree`.
#[test]
fn attributes_committed_between_merge_backs_count() {
    use crate::common::{land_in_process, Merged, IN_PROCESS};
    use git_arbiter::run::merge::{DriftScope, Request};
    let env = TestEnv::new();
    env.write("a.txt", "a\n");
    env.write("log.txt", "base\n");
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.work_order("wo-b", "B", &[], &["log.txt"]);
    let base = env.commit_all("init");
    for (id, path, text) in [
        ("wo-a", "a.txt", "a2\n"),
        ("wo-b", "log.txt", "base\ntheirs\n"),
    ] {
        env.git(&["checkout", "-q", "-b", &format!("arbiter/{id}"), &base]);
        env.write(path, text);
        env.commit_all(id);
        env.git(&["checkout", "-q", "main"]);
    }
    let ctx = env.context();
    let orders = ctx.load_orders(None).expect("orders");
    let store = git_arbiter::state::Store::new(&ctx.repo, 3);
    let into = gix::refs::FullName::try_from("refs/heads/main").expect("name");
    // One session for both merges, as a round keeps: its caches must see the
    // attributes committed in between.
    let session = std::cell::RefCell::new(git_arbiter::run::merge::Session::default());
    let merge = |id: &str| {
        let source = env.rev(&format!("arbiter/{id}"));
        let request = Request {
            wo: orders.get(id).expect("order"),
            into: &into,
            source: gix::ObjectId::from_hex(source.as_bytes()).expect("sha"),
            attempt: 1,
            round_base: None,
            scope: DriftScope::Own,
            extra_note: None,
            owner: IN_PROCESS,
        };
        land_in_process(&ctx, &store, &mut session.borrow_mut(), &request)
    };
    assert!(matches!(merge("wo-a"), Merged::Landed(_)));

    env.write("log.txt", "base\nours\n");
    env.write(".gitattributes", "log.txt merge=union\n");
    env.commit_all("ours, merged by union");
    let oracle = env.git_try_in(
        &env.repo,
        &["merge-tree", "--write-tree", "main", "arbiter/wo-b"],
    );
    assert_eq!(oracle.code, 0, "git merges it cleanly too");
    let outcome = merge("wo-b");
    assert!(matches!(outcome, Merged::Landed(_)), "{outcome:?}");
    assert_eq!(env.git(&["show", "main:log.txt"]), "base\nours\ntheirs\n");
    env.fsck();
}

/// As `git merge` does, a merge-back with no committer identity stops before
/// it writes anything: exit 2, one line that says how to fix it.
#[test]
fn no_identity_is_a_usage_error_and_changes_nothing() {
    let env = setup(&["src/a.rs"]);
    let w = env.add_worktree("wo-01");
    std::fs::write(w.join("src/a.rs"), "a2\n").expect("write");
    env.commit_in(&w, "work");
    let before = env.rev("main");
    let out = env
        .command_in(&env.repo, &["merge-back", "wo-01"])
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_AUTHOR_EMAIL")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    insta::assert_snapshot!(stderr, @r"
    error: no author identity is configured
    hint: set user.name and user.email with 'git config'
    ");
    assert_eq!(env.rev("main"), before);
    assert!(env.notes_tip().is_none(), "no state was written");
}

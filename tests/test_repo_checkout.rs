//! The checked-out integration branch after a merge holds what stock git
//! would write there: the oracle is a fresh `git clone` of the same tip
//! with the same configuration, compared byte for byte.

use crate::common::TestEnv;

/// Configuration both the repository and the oracle clone get: eol
/// conversion, a smudge/clean driver, and a long-running process filter
/// (the protocol git-lfs speaks; `tests/fixtures/process-filter.py`).
fn config() -> Vec<(&'static str, String)> {
    let filter = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/process-filter.py"
    );
    vec![
        ("core.autocrlf", "true".into()),
        ("filter.upper.smudge", "tr a-z A-Z".into()),
        ("filter.upper.clean", "tr A-Z a-z".into()),
        ("filter.proc.process", format!("python3 {filter}")),
        ("filter.proc.required", "true".into()),
    ]
}

const ATTRIBUTES: &str =
    "*.sh text eol=lf\n*.txt eol=crlf\n*.up filter=upper\n*.pf filter=proc\nid.c ident\n";

/// What the order writes; with `bulk`, also enough other files that the
/// update rebuilds the whole index instead of editing it in place.
fn build(bulk: bool) -> String {
    let mut build = String::from(
        "printf 'echo hi\\nexit 0\\n' > run.sh; printf 'l1\\nl2\\n' > a.txt; \
         printf 'hello\\n' > b.up; printf 'big\\n' > c.pf; printf '/* $Id$ */\\n' > id.c; \
         printf '$Id: 0123456789012345678901234567890123456789$\\n' > no-ident.c",
    );
    if bulk {
        build.push_str("; mkdir -p gen; for i in $(seq 1 120); do echo $i > gen/$i.txt; done");
    }
    build
}

fn assert_checkout_as_git_writes_it(bulk: bool) {
    let env = TestEnv::new();
    for (key, value) in config() {
        env.git(&["config", key, &value]);
    }
    env.write(".gitattributes", ATTRIBUTES);
    for i in 0..40 {
        env.write(&format!("old/{i}.dat"), &format!("{i}\n"));
    }
    env.work_order(
        "wo-01",
        "Attributes",
        &[],
        &[
            "run.sh",
            "a.txt",
            "b.up",
            "c.pf",
            "id.c",
            "no-ident.c",
            "gen/**",
        ],
    );
    env.commit_all("init");
    env.run(&["round", "--build", &build(bulk)]).success();
    assert_eq!(env.git(&["status", "--porcelain"]), "");

    let oracle = git_checkout_of(&env, "oracle", "main");
    // `no-ident.c` holds an expanded-looking `$Id$` but no `ident`
    // attribute: left as written, as git leaves it.
    let mut paths = vec!["run.sh", "a.txt", "b.up", "c.pf", "id.c", "no-ident.c"];
    if bulk {
        paths.push("gen/7.txt");
    }
    for path in paths {
        let ours = std::fs::read(env.repo.join(path)).expect("ours");
        let git = std::fs::read(oracle.join(path)).expect("git's");
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&git),
            "{path} (bulk: {bulk})"
        );
    }
    env.fsck();
}

/// Defect 2: an ordinary merge wrote `*.sh` with CRLF under
/// `core.autocrlf=true` despite `eol=lf`, and ran no filter or `ident`.
#[test]
fn an_ordinary_update_applies_attributes_and_filters() {
    assert_checkout_as_git_writes_it(false);
}

#[test]
fn a_large_update_applies_attributes_and_filters() {
    assert_checkout_as_git_writes_it(true);
}

/// Defect 3: an order that replaces a tracked directory by a file was
/// refused as "untracked files would be overwritten: 'src/d'", though
/// `git merge` succeeds; the refusal dropped the whole batch with attempts
/// still 0/3, so every later round rebuilt and abandoned again.
#[test]
fn a_directory_replaced_by_a_file_lands_as_git_merges_it() {
    let env = TestEnv::new();
    env.write("src/d/x.txt", "x\n");
    env.write("src/d/sub/y.txt", "y\n");
    env.work_order("wo-01", "Flatten", &[], &["src/d"]);
    env.work_order("wo-02", "Other", &[], &["other.txt"]);
    env.commit_all("init");
    let run = env.run(&[
        "round",
        "--build",
        "case $ARBITER_WO in wo-01) rm -rf src/d; echo file > src/d;; *) echo o > other.txt;; esac",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/d")).expect("src/d is a file"),
        "file\n"
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    assert_eq!(env.git(&["ls-files", "src"]), "src/d\n");
    env.fsck();
}

/// Untracked files inside that directory are the user's: that order's
/// landing waits (`verified`, its work kept), it alone; the other order
/// lands, nothing loops or is built again, and once the files are moved a
/// plain `retry` lands the kept work.
#[test]
fn untracked_files_in_the_way_keep_only_that_order_waiting() {
    let env = TestEnv::new();
    env.write("src/d/x.txt", "x\n");
    env.work_order("wo-01", "Flatten", &[], &["src/d", "new.txt"]);
    env.work_order("wo-02", "Other", &[], &["other.txt"]);
    env.commit_all("init");
    env.write("src/d/mine.txt", "my notes\n");
    env.write("new.txt", "mine too\n");
    let build = "case $ARBITER_WO in wo-01) rm -rf src/d; echo file > src/d; echo n > new.txt;; *) echo o > other.txt;; esac";
    let run = env.run(&["round", "--json", "--build", build]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert_eq!(out["waiting"][0]["id"], "wo-01", "{out}");
    let why = out["waiting"][0]["why"].as_str().expect("why");
    assert!(
        why.contains("untracked files") && why.contains("'new.txt', 'src/d/mine.txt'"),
        "{out}"
    );
    assert_eq!(env.git(&["show", "main:other.txt"]), "o\n");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("src/d/mine.txt")).expect("kept"),
        "my notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.repo.join("new.txt")).expect("kept"),
        "mine too\n"
    );
    // Nothing left to build: a second round builds nothing, still waits.
    let again = env.run(&["round", "--json", "--build", "exit 1"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.json()["rounds"], 0);
    assert_eq!(again.json()["waiting"][0]["id"], "wo-01");

    std::fs::remove_dir_all(env.repo.join("src/d")).expect("move");
    std::fs::remove_file(env.repo.join("new.txt")).expect("move");
    env.git(&["checkout", "--", "src/d"]);
    env.run(&["retry", "wo-01"]).success();
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["status"], "done", "{status}");
    assert_eq!(status["orders"][0]["halted"], false, "{status}");
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    assert_eq!(env.git(&["show", "main:new.txt"]), "n\n");
    env.fsck();
}

/// An untracked file below a folder the merge turns into a file is not a
/// path the merge changes, but it is in the way all the same: the order
/// whose merge writes there waits, naming that path (a landing once found
/// no order to blame and stopped the whole run). Verified and unverified
/// landings alike.
#[test]
fn an_untracked_file_below_a_replaced_folder_keeps_the_order_that_replaces_it_waiting() {
    for extra in [&[][..], &["--gate", "true"][..]] {
        let env = TestEnv::new();
        env.write("src/d/x.txt", "x\n");
        env.work_order("wo-01", "Flatten", &[], &["src/d"]);
        env.work_order("wo-02", "Other", &[], &["other.txt"]);
        env.commit_all("init");
        env.write("src/d/mine.txt", "my notes\n");
        let build = "case $ARBITER_WO in wo-01) rm -rf src/d; echo file > src/d;; *) echo o > other.txt;; esac";
        let mut args = vec!["round", "--json", "--build", build];
        args.extend_from_slice(extra);
        let run = env.run(&args);
        assert_eq!(run.code, 0, "{extra:?}: {}", run.stderr);
        let out = run.json();
        assert_eq!(out["waiting"][0]["id"], "wo-01", "{out}");
        assert!(
            out["waiting"][0]["why"]
                .as_str()
                .is_some_and(|w| w.ends_with("'src/d/mine.txt'")),
            "{out}"
        );
        assert_eq!(env.git(&["show", "main:other.txt"]), "o\n");
        assert_eq!(
            std::fs::read_to_string(env.repo.join("src/d/mine.txt")).expect("kept"),
            "my notes\n"
        );
        env.fsck();
    }
}

/// Defect 7: after an order bumped an initialised submodule, the checkout
/// shows ` M vendor/lib` (as after `git merge`: neither updates the
/// submodule's own checkout), and every later round refused it as a local
/// change, where committing would have reverted the bump. A submodule whose
/// files are clean is never written by the update, so its checked-out commit
/// is no edit to protect.
#[test]
fn a_bumped_submodule_does_not_block_later_rounds() {
    let env = TestEnv::new();
    let sub = env.root.join("sub");
    env.git_in(&env.root, &["init", "-q", "-b", "main", "sub"]);
    std::fs::write(sub.join("lib.txt"), "1\n").expect("write");
    env.git_in(&sub, &["add", "-A"]);
    env.git_in(&sub, &["commit", "-q", "-m", "one"]);
    std::fs::write(sub.join("lib.txt"), "2\n").expect("write");
    env.git_in(&sub, &["commit", "-q", "-am", "two"]);
    let two = env.git_in(&sub, &["rev-parse", "HEAD"]);
    let one = env.git_in(&sub, &["rev-parse", "HEAD~1"]);
    env.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        sub.to_str().expect("utf-8"),
        "vendor/lib",
    ]);
    env.git_in(
        &env.repo.join("vendor/lib"),
        &["checkout", "-q", one.trim()],
    );
    env.work_order("wo-01", "Bump", &[], &["vendor/lib"]);
    env.work_order("wo-02", "Other", &[], &["other.txt"]);
    env.commit_all("init");

    let bump = format!(
        "case $ARBITER_WO in wo-01) git update-index --cacheinfo 160000,{},vendor/lib && git commit -q -m bump;; *) echo o > other.txt;; esac",
        two.trim()
    );
    env.run(&["round", "--max", "1", "--once", "--build", &bump])
        .success();
    assert_eq!(
        env.git(&["ls-tree", "main", "vendor/lib"])
            .split_whitespace()
            .nth(2),
        Some(two.trim())
    );
    // What `git merge` leaves too: the submodule still at the old commit.
    assert_eq!(env.git(&["status", "--porcelain"]), " M vendor/lib\n");
    env.run(&["round", "--build", &bump]).success();
    assert_eq!(env.git(&["show", "main:other.txt"]), "o\n");
    env.fsck();

    // Edited files inside the submodule are a user's work: a landing that
    // does not touch it goes on, and they stay as they are.
    std::fs::write(env.repo.join("vendor/lib/lib.txt"), "edited\n").expect("edit");
    env.work_order("wo-03", "Third", &[], &["third.txt"]);
    env.git(&["add", "work-orders"]);
    env.git(&["commit", "-q", "-m", "wo-03"]);
    env.run(&["round", "--build", "echo 3 > third.txt"])
        .success();
    assert_eq!(env.git(&["show", "main:third.txt"]), "3\n");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("vendor/lib/lib.txt")).expect("lib"),
        "edited\n"
    );
}

/// Files on disk under `dir` (relative, sorted), `.git` left out.
fn files_on_disk(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if entry.file_name() == ".git" {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("below");
                found.push(rel.display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// A cone-mode sparse checkout of `src/a` and `work-orders`; three orders:
/// one inside the cone, one changing a few files outside it (an in-place
/// update before), one changing many (an index rebuild before).
fn sparse_repo() -> TestEnv {
    let env = TestEnv::new();
    env.write("src/a/x.txt", "a\n");
    for i in 0..3 {
        env.write(&format!("src/b/{i}.txt"), "b\n");
    }
    for i in 0..100 {
        env.write(&format!("src/c/{i}.txt"), "c\n");
    }
    env.work_order("wo-1", "Inside", &[], &["src/a/new.txt"]);
    env.work_order("wo-2", "Few outside", &[], &["src/b"]);
    env.work_order("wo-3", "Many outside", &[], &["src/c"]);
    env.commit_all("init");
    env.git(&["sparse-checkout", "set", "src/a", "work-orders"]);
    env
}

/// Defect 1: a merge of many paths rebuilt the index without the
/// skip-worktree bits (`git status` then showed every file outside the cone
/// deleted); a small one wrote changed files outside the cone and dropped
/// their bits; builders inherited the cone and never saw the files their
/// order declares. Oracle: a sparse checkout of the same tip made by git.
#[test]
fn a_sparse_checkout_keeps_its_cone_and_builders_see_their_files() {
    let env = sparse_repo();
    // Each builder first checks that its declared files are there.
    let build = "case $ARBITER_WO in \
        wo-1) echo n > src/a/new.txt;; \
        wo-2) test -f src/b/0.txt && echo B > src/b/0.txt && echo n > src/b/new.txt;; \
        wo-3) test -f src/c/0.txt && for i in $(seq 0 99); do echo C > src/c/$i.txt; done;; esac";
    env.run(&["round", "--build", build]).success();
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    assert_eq!(env.git(&["show", "main:src/b/0.txt"]), "B\n");
    assert_eq!(env.git(&["show", "main:src/c/7.txt"]), "C\n");

    let oracle = env.root.join("oracle");
    let repo = env.repo.display().to_string();
    let oracle_path = oracle.display().to_string();
    env.git_in(
        &env.root,
        &["clone", "-q", "--no-checkout", &repo, &oracle_path],
    );
    env.git_in(&oracle, &["sparse-checkout", "set", "src/a", "work-orders"]);
    env.git_in(&oracle, &["checkout", "-q", "main"]);
    assert_eq!(
        env.git(&["ls-files", "-t"]),
        env.git_in(&oracle, &["ls-files", "-t"])
    );
    assert_eq!(files_on_disk(&env.repo), files_on_disk(&oracle));
    env.fsck();
}

/// With a sparse index gix cannot compare or rewrite the index: refused up
/// front (exit 2, a hint, nothing built or moved), never exit 128.
#[test]
fn a_sparse_index_is_refused_before_anything_moves() {
    let env = sparse_repo();
    env.git(&["sparse-checkout", "init", "--cone", "--sparse-index"]);
    let before = env.git(&["rev-parse", "main"]);
    let run = env
        .run(&["round", "--build", "echo x > src/a/new.txt"])
        .code(2);
    assert!(run.stderr.contains("sparse index"), "{}", run.stderr);
    assert!(run.stderr.contains("--no-sparse-index"), "{}", run.stderr);
    assert_eq!(env.git(&["rev-parse", "main"]), before);
    assert_eq!(env.git(&["notes", "--ref=arbiter", "list"]), "");
}

/// Defect 10: merges ran no hook on the user's checkout. Like `git merge`,
/// each landing that updates it runs `post-merge 0` there, once the checkout
/// holds the merges (git-lfs and many setups rely on it); a failing hook is
/// reported and changes nothing. Orders that wait together land together:
/// one run of the hook for the two.
#[test]
fn post_merge_runs_in_the_updated_checkout() {
    let env = TestEnv::new();
    env.work_order("wo-01", "One", &[], &["one.txt"]);
    env.work_order("wo-02", "Two", &[], &["two.txt"]);
    env.commit_all("init");
    let seen = env.root.join("post-merge.log");
    env.hook(
        "post-merge",
        &format!(
            "#!/bin/sh\necho \"$1 $(git rev-parse HEAD) $(cat one.txt 2>/dev/null)\" >> {}\nexit 1\n",
            seen.display()
        ),
    );
    let build = "case $ARBITER_WO in wo-01) echo wo-01 > one.txt;; *) echo wo-02 > two.txt;; esac";
    let run = env.run(&["round", "--schedule", "rounds", "--json", "--build", build]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("arbiter hook post-merge"),
        "{}",
        run.stderr
    );
    assert_eq!(run.json()["landed_batches"], 1, "{}", run.stdout);
    let log = std::fs::read_to_string(&seen).expect("the hook ran");
    let main = env.git(&["rev-parse", "main"]);
    assert_eq!(log, format!("0 {} wo-01\n", main.trim()));
}

/// Defect 5: with `commit.gpgsign=true` merge commits carried no signature
/// (`git commit` would sign or fail). Signed with the configured SSH key,
/// they pass `git verify-commit`; a signer that fails stops the merge
/// before anything moves, exit 2, naming the cause.
#[test]
fn merge_commits_are_signed_as_git_signs() {
    let env = TestEnv::new();
    let key = env.root.join("key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen");
    assert!(made.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).expect("public key");
    let allowed = env.root.join("allowed_signers");
    std::fs::write(&allowed, format!("test@example.com {public}")).expect("allowed signers");
    for (k, v) in [
        ("commit.gpgsign", "true"),
        ("gpg.format", "ssh"),
        ("user.signingkey", key.to_str().expect("utf-8")),
        (
            "gpg.ssh.allowedSignersFile",
            allowed.to_str().expect("utf-8"),
        ),
    ] {
        env.git(&["config", k, v]);
    }
    env.work_order("wo-01", "One", &[], &["one.txt"]);
    env.work_order("wo-02", "Two", &[], &["two.txt"]);
    env.commit_all("init");
    env.run(&[
        "round",
        "--max",
        "1",
        "--once",
        "--build",
        "echo 1 > one.txt",
    ])
    .success();
    let verified = env.git_try_in(&env.repo, &["verify-commit", "main"]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
    assert!(
        verified.stderr.contains("Good \"git\" signature"),
        "{}",
        verified.stderr
    );

    env.git(&["config", "user.signingkey", "/nonexistent/key"]);
    let before = env.git(&["rev-parse", "main"]);
    // The builder commits its own work unsigned: only the merge is signed here.
    let build =
        "echo 2 > two.txt && git add two.txt && git -c commit.gpgsign=false commit -q -m two";
    let run = env.run(&["round", "--build", build]).code(2);
    assert!(
        run.stderr
            .contains("signing the merge commit with ssh-keygen failed"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint: "), "{}", run.stderr);
    assert_eq!(env.git(&["rev-parse", "main"]), before);
    // The build passed: its work waits to land, and lands once signing works.
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][1]["status"], "verified", "{status}");
    env.git(&["config", "user.signingkey", key.to_str().expect("utf-8")]);
    env.run(&["round", "--build", "false"]).success();
    assert_eq!(env.git(&["show", "main:two.txt"]), "2\n");
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][1]["attempts"], 1, "{status}");
    let verified = env.git_try_in(&env.repo, &["verify-commit", "main"]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
}

/// The same with OpenPGP, git's default `gpg.format`: no `user.signingkey`,
/// so the key is found by the committer identity, as git does.
#[test]
fn merge_commits_are_signed_with_openpgp() {
    let mut env = TestEnv::new();
    let gnupg = env.root.join("gnupg");
    std::fs::create_dir_all(&gnupg).expect("gnupg home");
    std::process::Command::new("chmod")
        .arg("700")
        .arg(&gnupg)
        .status()
        .expect("chmod");
    env.set_env("GNUPGHOME", gnupg.to_str().expect("utf-8"));
    let made = std::process::Command::new("gpg")
        .env("GNUPGHOME", &gnupg)
        .args([
            "--batch",
            "--quiet",
            "--passphrase",
            "",
            "--quick-gen-key",
            "Arbiter Test <test@example.com>",
            "ed25519",
            "sign",
            "never",
        ])
        .output()
        .expect("gpg");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    env.git(&["config", "commit.gpgsign", "true"]);
    env.work_order("wo-01", "One", &[], &["one.txt"]);
    env.commit_all("init");
    let run = env.run(&["round", "--build", "echo 1 > one.txt"]);
    let verified = env.git_try_in(&env.repo, &["verify-commit", "main"]);
    // gpg started an agent for this home: it goes with the test.
    let _ = std::process::Command::new("gpgconf")
        .env("GNUPGHOME", &gnupg)
        .args(["--kill", "gpg-agent"])
        .status();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
    assert!(
        verified
            .stderr
            .contains("Good signature from \"Arbiter Test <test@example.com>\""),
        "{}",
        verified.stderr
    );
}

/// Every attribute kind at once, encodings included: `eol`, a smudge/clean
/// driver, a process filter, `ident`, and `working-tree-encoding` in each
/// of the Unicode forms gix reads back, and one gix converts itself
/// (Shift_JIS).
const EVERY_KIND: &str = "*.crlf text eol=crlf\n*.up filter=upper\n*.pf filter=proc\nid.c ident\n\
    *.u16 working-tree-encoding=UTF-16\n*.u16le working-tree-encoding=UTF-16LE\n\
    *.u16crlf working-tree-encoding=UTF-16 eol=crlf\n*.u16be working-tree-encoding=UTF-16BE\n\
    *.sjis working-tree-encoding=SHIFT-JIS\n";

/// Files the orders rewrite, each in the form `git checkout` writes
/// (CRLF under `core.autocrlf=true`, upper case through the filters, `$Id$`
/// expanded), with `$1` in their text: a pooled worktree keeps what its
/// last builder wrote, as a checkout keeps what was committed from it.
const REWRITTEN: &[(&str, &str)] = &[
    ("a.crlf", "printf 'x $1\\r\\ny\\r\\n' > a.crlf"),
    ("b.up", "printf 'HELLO %s\\r\\n' $(echo $1 | tr a-z A-Z) > b.up"),
    ("c.pf", "printf 'BIG %s\\r\\n' $(echo $1 | tr a-z A-Z) > c.pf"),
    (
        "id.c",
        "printf '/* $Id: %s $ */ $1\\r\\n' $(printf '/* $Id$ */ $1\\n' | git hash-object --stdin) > id.c",
    ),
    ("t.u16", "printf 'caf\\303\\251 $1\\r\\n' | iconv -f UTF-8 -t UTF-16 > t.u16"),
    ("t.u16le", "printf 'le $1\\r\\n' | iconv -f UTF-8 -t UTF-16LE > t.u16le"),
    ("t.u16crlf", "printf 'two $1\\r\\nlines\\r\\n' | iconv -f UTF-8 -t UTF-16 > t.u16crlf"),
    ("t.u16be", "printf 'be \\360\\237\\230\\200 $1\\r\\n' | iconv -f UTF-8 -t UTF-16BE > t.u16be"),
    ("t.sjis", "printf '\\346\\227\\245\\346\\234\\254 $1\\r\\n' | iconv -f UTF-8 -t SHIFT-JIS > t.sjis"),
];

/// A clone of the repository by stock git with `config()`, at `rev`.
fn git_checkout_of(env: &TestEnv, name: &str, rev: &str) -> std::path::PathBuf {
    let oracle = env.root.join(name);
    let mut clone = vec![
        "clone".to_owned(),
        "-q".to_owned(),
        "--no-checkout".to_owned(),
    ];
    for (key, value) in config() {
        clone.push("-c".into());
        clone.push(format!("{key}={value}"));
    }
    clone.push(env.repo.display().to_string());
    clone.push(oracle.display().to_string());
    let clone: Vec<&str> = clone.iter().map(String::as_str).collect();
    env.git_in(&env.root, &clone);
    env.git_in(&oracle, &["checkout", "-q", rev]);
    oracle
}

fn every_path() -> Vec<&'static str> {
    REWRITTEN.iter().map(|(p, _)| *p).collect()
}

#[track_caller]
fn assert_same_files(ours: &std::path::Path, git: &std::path::Path, what: &str) {
    for path in every_path() {
        let mine = std::fs::read(ours.join(path)).expect("ours");
        let theirs = std::fs::read(git.join(path)).expect("git's");
        assert!(
            mine == theirs,
            "{what}: {path}: ours {mine:02x?}, git's {theirs:02x?}"
        );
    }
}

/// Issue 32, 1: every checkout git-arbiter writes (a new pooled worktree,
/// a pooled worktree switched to a later base, a worktree of `--no-pool`,
/// the worktree a merged result is verified in, the user's checkout after
/// a landing) holds the bytes `git checkout` writes, for every kind of
/// attribute; and what builders write in those forms is stored as `git
/// add` stores it.
#[test]
fn every_checkout_writes_each_kind_of_attribute_as_git_checkout_does() {
    let env = TestEnv::new();
    for (key, value) in config() {
        env.git(&["config", key, &value]);
    }
    // Stored as git stores them (UTF-8, LF, lower case): the attributes
    // come in the next commit.
    for (path, _) in REWRITTEN {
        env.write(path, "caf\u{e9} line one\nline two\n");
    }
    env.write("b.up", "hello\n");
    env.write("c.pf", "big\n");
    env.write("id.c", "/* $Id$ */\n");
    env.write("t.sjis", "\u{65e5}\u{672c}\n");
    env.commit_all("content");
    env.write(".gitattributes", EVERY_KIND);
    env.git(&["add", ".gitattributes"]);
    env.git(&["commit", "-q", "-m", "attributes"]);
    // The files as git writes them under the new attributes.
    for path in every_path() {
        std::fs::remove_file(env.repo.join(path)).expect("rm");
    }
    env.git(&["checkout", "--", "."]);
    let seen = env.root.join("seen");
    let copy_all = every_path().join(" ");
    let build = |round: usize| {
        let mut cases = String::new();
        for (path, write) in REWRITTEN {
            let id = format!("r{round}-{}", path.replace('.', "-"));
            cases.push_str(&format!("{id}) {} ;;\n", write.replace("$1", &id)));
        }
        format!(
            "mkdir -p {seen}/$ARBITER_WO && cp {copy_all} {seen}/$ARBITER_WO/ && \
             case $ARBITER_WO in\n{cases}esac",
            seen = seen.display()
        )
    };
    let verified = env.root.join("verified");
    let gate = format!(
        "d={}/$(git rev-parse HEAD); mkdir -p $d && cp {copy_all} $d/",
        verified.display()
    );
    for round in 1..=3 {
        for (path, _) in REWRITTEN {
            let id = format!("r{round}-{}", path.replace('.', "-"));
            env.work_order(&id, &id, &[], &[path]);
        }
        env.commit_all("orders");
        let base = env.rev("main");
        let mut args = vec!["round".to_owned(), "--build".to_owned(), build(round)];
        if round == 3 {
            args.extend(["--no-pool", "--verify", "merged", "--gate"].map(String::from));
            args.push(gate.clone());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        env.run(&args).success();
        assert_eq!(env.git(&["status", "--porcelain"]), "", "round {round}");
        // What each builder found: git's checkout of its base.
        let at_base = git_checkout_of(&env, &format!("base-{round}"), &base);
        for (path, _) in REWRITTEN {
            let id = format!("r{round}-{}", path.replace('.', "-"));
            assert_same_files(&seen.join(&id), &at_base, &format!("{id}'s worktree"));
        }
        // What the user's checkout holds, and what was stored.
        let tip = env.rev("main");
        let at_tip = git_checkout_of(&env, &format!("tip-{round}"), &tip);
        assert_same_files(
            &env.repo,
            &at_tip,
            &format!("the checkout after round {round}"),
        );
        for (path, _) in REWRITTEN {
            let id = format!("r{round}-{}", path.replace('.', "-"));
            let stored = env.git(&["show", &format!("main:{path}")]);
            assert!(stored.contains(&id), "{path}: {stored:?}");
            let ours = std::fs::read(env.repo.join(path)).expect("ours");
            env.git_in(&at_tip, &["add", "--renormalize", path]);
            assert_eq!(
                env.git_in(&at_tip, &["status", "--porcelain", path]),
                "",
                "{path}: git stores the same ({ours:02x?})"
            );
        }
        if round == 3 {
            for dir in std::fs::read_dir(&verified).expect("verified") {
                let dir = dir.expect("entry").path();
                let rev = dir
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                let at = git_checkout_of(&env, &format!("verified-{}", &rev[..12]), &rev);
                assert_same_files(&dir, &at, "a verification worktree");
            }
        }
    }
    env.fsck();
}

/// A UTF-16 file a builder writes without the byte order mark its
/// encoding requires is refused as `git add` refuses it: a failure of that
/// attempt, with git's message, not a configuration error stopping the run.
#[test]
fn a_utf16_file_written_without_its_mark_fails_the_attempt_with_gits_message() {
    let env = TestEnv::new();
    env.write(".gitattributes", "*.u16 working-tree-encoding=UTF-16\n");
    env.write("t.u16", "");
    env.work_order("wo-a", "Encoded", &[], &["t.u16"]);
    env.commit_all("init");
    let run = env.run(&[
        "round",
        "--build",
        "case $ARBITER_ATTEMPT in 1) t=UTF-16LE ;; *) t=UTF-16 ;; esac; printf 'hi\\n' | iconv -f UTF-8 -t $t > t.u16",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("BOM is required in 't.u16' if encoded as UTF-16"),
        "{}",
        run.stderr
    );
    let status = env.run(&["status", "--json"]).success().json();
    assert_eq!(status["orders"][0]["attempts"], 2, "{status}");
    assert_eq!(env.git(&["show", "main:t.u16"]), "hi\n");
    assert_eq!(env.git(&["status", "--porcelain"]), "");
}

/// A Unicode encoding gix cannot read back (UTF-32, UTF-16LE-BOM) would
/// fail every status of a worktree holding such a file: refused before
/// any build, naming the path and the attribute.
#[test]
fn an_encoding_gix_cannot_read_back_is_refused_before_any_build() {
    let utf32: Vec<u8> = [0xfeff_u32, 'h' as u32, '\n' as u32]
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect();
    let utf16: Vec<u8> = [0xfeff_u16, 'h' as u16, '\n' as u16]
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect();
    for (name, bytes) in [("UTF-32", utf32), ("UTF-16LE-BOM", utf16)] {
        let env = TestEnv::new();
        env.write(
            ".gitattributes",
            &format!("*.enc working-tree-encoding={name}\n"),
        );
        env.commit_all("attributes");
        std::fs::write(env.repo.join("t.enc"), bytes).expect("write");
        env.work_order("wo-a", "Other", &[], &["a.txt"]);
        env.commit_all("init");
        let before = env.rev("main");
        let run = env.run(&["round", "--build", "echo a > a.txt"]).code(2);
        assert!(
            run.stderr
                .contains(&format!("'t.enc' has working-tree-encoding={name}")),
            "{}",
            run.stderr
        );
        assert_eq!(env.rev("main"), before);
        let status = env.run(&["status", "--json"]).success().json();
        assert_eq!(status["orders"][0]["attempts"], 0, "{name}: {status}");
    }
}

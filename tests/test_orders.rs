use crate::common::{Run, TestEnv};

fn setup() -> TestEnv {
    let env = TestEnv::new();
    env.work_order("wo-01", "One", &[], &["src/a.rs"]);
    env.commit_all("init");
    env
}

#[test]
fn bad_inputs_exit_2_with_one_line_and_change_nothing() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "wo-02.md",
            "# T\n## Files to touch\n- ../x\n",
            "wo-02.md:3: declared entry '../x': '..' component",
        ),
        (
            "wo-02.md",
            "# T\n## Files to touch\n- /abs\n",
            "wo-02.md:3: declared entry '/abs': absolute path",
        ),
        (
            "wo-02.md",
            "# T\n## Files to touch\n- a/.git/x\n",
            "wo-02.md:3: declared entry 'a/.git/x': '.git' component",
        ),
        (
            "wo-02.md",
            "# T\n## Files to touch\n- \n",
            "wo-02.md:3: empty entry",
        ),
        (
            "wo-02.md",
            "# T\n## Files to touch\n- src/[ab\n",
            "wo-02.md:3: declared entry 'src/[ab': invalid glob",
        ),
        (
            "wo-02.md",
            "# T\n## Depends on\n- nope\n",
            "wo-02.md:3: unknown dependency 'nope'",
        ),
        ("Bad.md", "# T\n", "Bad.md:1: id 'Bad' must match"),
        ("wo-02.md", "no title\n", "wo-02.md:1: no title"),
        (
            "a..b.md",
            "# T\n",
            "a..b.md:1: id 'a..b' is not a valid git ref component",
        ),
    ];
    for (file, text, want) in cases {
        let env = setup();
        env.write(&format!("work-orders/{file}"), text);
        for args in [&["status"][..], &["batch"][..]] {
            let run = env.run(args).code(2);
            let first = run.stderr.lines().next().unwrap_or_default();
            assert!(
                first.starts_with("error: ") && first.contains(want),
                "{file}: {first}\n(wanted {want})"
            );
            assert!(
                run.stderr
                    .lines()
                    .nth(1)
                    .is_some_and(|l| l.starts_with("hint: ")),
                "{}",
                run.stderr
            );
            assert!(run.stdout.is_empty());
        }
        assert_eq!(env.notes_tip(), None);
    }
}

#[test]
fn cycle_is_printed() {
    let env = setup();
    env.work_order("wo-02", "Two", &["wo-03"], &["b"]);
    env.work_order("wo-03", "Three", &["wo-02"], &["c"]);
    let run = env.run(&["batch"]).code(2);
    assert_eq!(
        run.stderr.lines().next(),
        Some("error: dependency cycle: wo-02 -> wo-03 -> wo-02")
    );
}

#[test]
fn duplicate_ids_differing_in_case_only() {
    let env = setup();
    env.write("work-orders/WO-01.md", "# dup\n");
    let run = env.run(&["status"]).code(2);
    assert!(
        run.stderr.contains("WO-01") || run.stderr.contains("duplicate"),
        "{}",
        run.stderr
    );
}

#[test]
fn orders_dir_from_flag_and_config() {
    let env = TestEnv::new();
    env.write("plans/x-1.md", "# X\n## Files to touch\n- x\n");
    env.commit_all("init");
    let run = env.run(&["status"]).code(2);
    assert!(run.stderr.contains("work-orders"), "{}", run.stderr);
    env.run(&["status", "--orders", "plans"]).success();
    // The form before the subcommand still works; after it wins.
    env.run(&["--orders", "plans", "status"]).success();
    env.run(&["--orders", "nowhere", "status", "--orders", "plans"])
        .success();
    env.git(&["config", "arbiter.orders", "plans"]);
    let run = env.run_in(&env.repo.join("plans"), &["status"]).success();
    assert!(run.stdout.contains("x-1"), "{}", run.stdout);
}

#[test]
fn a_byte_order_mark_before_the_title_is_accepted() {
    let env = setup();
    // Windows editors (Notepad, some VS Code setups) save UTF-8 with a BOM.
    env.write(
        "work-orders/wo-02.md",
        "\u{feff}# Two\r\n## Files to touch\r\n- src/b.rs\r\n",
    );
    let run = env.run(&["status", "--json"]).success();
    let rows = run.json()["orders"].clone();
    let two = rows
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["id"] == "wo-02"))
        .unwrap_or_else(|| panic!("wo-02 is listed: {rows}"));
    assert_eq!(two["title"], "Two");
    let run = env.run(&["batch", "--json"]).success();
    assert_eq!(
        run.json()["batch"][1]["files"][0],
        "src/b.rs",
        "{}",
        run.stdout
    );
}

fn round(env: &TestEnv, build: &str) -> Run {
    env.run(&["round", "--json", "--max-total", "2", "--build", build])
}

#[test]
fn an_order_without_declared_files_runs_alone_and_lands() {
    let env = TestEnv::new();
    env.write("README", "base\n");
    env.write("src/a.rs", "a\n");
    env.write(
        "work-orders/tidy-up.md",
        "# Tidy up\n\n## Task\nRename things across the code base.\n",
    );
    env.work_order("wo-01", "One", &[], &["src/one.txt"]);
    env.commit_all("init");
    let build = "if [ $ARBITER_WO = tidy-up ]; then echo tidy > README; echo b > src/a.rs; \
                 else mkdir -p src; echo one > src/one.txt; fi";
    let summary = round(&env, build).success().json();
    assert_eq!(summary["done"], serde_json::json!(["tidy-up", "wo-01"]));
    assert_eq!(summary["halted"], serde_json::json!([]));
    assert_eq!(summary["rounds"], 2, "tidy-up ran alone, after wo-01");
    assert_eq!(
        std::fs::read_to_string(env.repo.join("README")).expect("README"),
        "tidy\n"
    );
    env.fsck();
}

#[test]
fn an_empty_files_to_touch_is_an_error() {
    let env = TestEnv::new();
    env.write(
        "work-orders/wo-01.md",
        "# One\n\n## Files to touch\n\n## Task\nx\n",
    );
    env.commit_all("init");
    for args in [&["status"][..], &["batch"], &["round", "--build", "true"]] {
        let run = env.run(args).code(2);
        assert_eq!(
            run.stderr,
            format!(
                "error: {}/work-orders/wo-01.md:3: '## Files to touch' declares no files\n\
                 hint: declare an entry, or remove the section to let the order touch anything\n",
                env.repo.display()
            ),
            "{args:?}"
        );
    }
    assert_eq!(env.notes_tip(), None, "nothing changed");
}

#[test]
fn misspelt_sections_are_errors() {
    for (heading, meant) in [
        ("## Dependencies", "## Depends on"),
        ("## Files to tuoch", "## Files to touch"),
        ("## depends", "## Depends on"),
    ] {
        let env = TestEnv::new();
        env.work_order("wo-01", "One", &[], &["a.txt"]);
        env.write(
            "work-orders/wo-02.md",
            &format!("# Two\n\n{heading}\n- wo-01\n\n## Task\nx\n"),
        );
        env.commit_all("init");
        let run = env.run(&["batch"]).code(2);
        let first = run.stderr.lines().next().unwrap_or_default();
        assert!(
            first.ends_with(&format!(
                "wo-02.md:3: unknown section '{heading}': did you mean '{meant}'?"
            )),
            "{first}"
        );
        assert!(run.stdout.is_empty());
    }
    // Other headings are task text.
    let env = TestEnv::new();
    env.write(
        "work-orders/wo-01.md",
        "# One\n\n## Files to touch\n- a.txt\n\n## Task\nDo it.\n\n## Notes\nCarefully.\n",
    );
    env.commit_all("init");
    env.run(&["batch"]).success();
}

#[test]
fn readme_and_underscore_or_dot_files_are_not_orders() {
    let env = TestEnv::new();
    env.work_order("wo-01", "One", &[], &["a.txt"]);
    env.write("work-orders/README.md", "# How we write orders\n");
    env.write("work-orders/readme.md", "notes\n");
    env.write("work-orders/_template.md", "# Title\n## Files to touch\n");
    env.write("work-orders/.wo-02.md.swp.md", "junk\n");
    env.commit_all("init");
    let json = env.run(&["status", "--json"]).success().json();
    assert_eq!(json["orders"].as_array().map(Vec::len), Some(1), "{json}");
}

#[test]
fn a_glob_covers_the_files_it_matches_not_what_is_below_them() {
    let env = TestEnv::new();
    env.write("crates/searcher/Cargo.toml", "[package]\n");
    env.write("crates/searcher/src/lib.rs", "lib\n");
    env.work_order("wo-01", "Manifest", &[], &["crates/searcher/*"]);
    env.work_order("wo-02", "Library", &[], &["crates/searcher/src/lib.rs"]);
    env.commit_all("init");
    // Disjoint now: no file is covered by both.
    let batch = env.run(&["batch", "--json"]).success().json();
    assert_eq!(batch["batch"].as_array().map(Vec::len), Some(2), "{batch}");
    assert_eq!(batch["deferred"], serde_json::json!([]));
    // And the drift check agrees: wo-01 may not edit the library.
    let build = "echo changed > crates/searcher/src/lib.rs";
    // Lockstep, so wo-01 merges first: landed after wo-02, its identical
    // edit would change nothing and so drift nowhere.
    let summary = env
        .run(&["round", "--json", "--schedule", "rounds", "--build", build])
        .code(1)
        .json();
    assert_eq!(summary["done"], serde_json::json!(["wo-02"]));
    assert_eq!(summary["halted"][0]["id"], "wo-01");
    assert_eq!(summary["halted"][0]["reason"], "undeclared_file_drift");
}

/// `--orders` exists only where orders are read: not in the help of the
/// others, and refused for them in either position.
#[test]
fn orders_flag_only_on_subcommands_that_read_orders() {
    let env = TestEnv::new();
    for sub in ["status", "batch", "round", "merge-back", "lint", "log"] {
        let help = env.run(&[sub, "--help"]).success().stdout;
        assert!(help.contains("--orders <DIR>"), "{sub}:\n{help}");
    }
    for sub in [
        &["pick"][..],
        &["stop"],
        &["slot", "run"],
        &["worktree", "add"],
    ] {
        let mut args = sub.to_vec();
        args.push("--help");
        let help = env.run(&args).success().stdout;
        assert!(!help.contains("--orders"), "{sub:?}:\n{help}");
    }
    assert!(!env.run(&["--help"]).success().stdout.contains("--orders"));
    let run = env.run(&["stop", "--orders", "plans"]).code(2);
    assert!(run.stderr.contains("--orders"), "{}", run.stderr);
    let run = env.run(&["--orders", "plans", "stop"]).code(2);
    assert!(
        run.stderr
            .contains("--orders applies only to subcommands that read work orders"),
        "{}",
        run.stderr
    );
}

/// Ids are looked up as people type them: a path or a `.md` file name
/// names its order; an unknown id gets the closest ones.
#[test]
fn an_order_is_named_by_its_file_and_a_misspelt_id_gets_a_suggestion() {
    let env = TestEnv::new();
    env.work_order("globset-test", "Globs", &[], &["g.txt"]);
    env.work_order("other", "Other", &[], &["o.txt"]);
    env.commit_all("init");
    for arg in [
        "globset-test.md",
        "work-orders/globset-test.md",
        "./work-orders/globset-test.md",
    ] {
        let show = env.run(&["show", arg]).success();
        assert!(
            show.stdout.starts_with("globset-test  Globs\n"),
            "{arg}: {}",
            show.stdout
        );
    }
    insta::assert_snapshot!(env.run(&["show", "globset-tests"]).snapshot(&env), @"
    [stderr]
    error: unknown work order 'globset-tests': it has no file in the orders directory and no record in refs/notes/arbiter
    hint: did you mean 'globset-test'? 'git arbiter status' lists the work orders; 'git arbiter log' shows every order's events
    [exit status: 2]
    ");
    insta::assert_snapshot!(env.run(&["retry", "Globset-test"]).snapshot(&env), @"
    [stderr]
    error: unknown work order 'Globset-test': it has no file in the orders directory and no record in refs/notes/arbiter
    hint: did you mean 'globset-test'? 'git arbiter status' lists the work orders; 'git arbiter log' shows every order's events
    [exit status: 2]
    ");
    insta::assert_snapshot!(env.run(&["clear"]).snapshot(&env), @"
    [stderr]
    error: no work order to clear
    hint: name the halted orders ('git arbiter clear wo-01 wo-02'), or clear every halted one with --all
    [exit status: 2]
    ");
    env.write(
        "work-orders/dep.md",
        "# Dep\n\n## Depends on\n- globset-tests\n\n## Files to touch\n- d.txt\n\n## Task\nx\n",
    );
    insta::assert_snapshot!(env.run(&["lint"]).snapshot(&env), @"
    $TEST_ENV/repo/work-orders/dep.md:4: error: unknown dependency 'globset-tests'
      hint: did you mean 'globset-test'? Otherwise create $TEST_ENV/repo/work-orders/globset-tests.md or remove the entry
    [stderr]
    arbiter lint errors=1 warnings=0
    [exit status: 2]
    ");
}

/// What a newcomer trips over around the orders directory: a relative
/// `--orders` from a subdirectory, an empty directory, a `.txt` order.
#[test]
fn the_orders_directory_says_what_it_did_not_read() {
    let env = TestEnv::new();
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.write("src/keep.rs", "fn main() {}\n");
    env.write("work-orders/notes.txt", "# Not an order\n");
    env.write("work-orders/_draft.md", "# Draft\n");
    env.commit_all("init");
    let sub = env.repo.join("src");
    let run = env
        .run_in(&sub, &["status", "--orders", "work-orders"])
        .code(2);
    insta::assert_snapshot!(env.redact(&run.stderr), @"
    error: --orders work-orders: no such directory here ($TEST_ENV/repo/src/work-orders), relative to the current directory
    hint: $TEST_ENV/repo/work-orders exists: run from the top of the worktree, or pass --orders $TEST_ENV/repo/work-orders
    ");
    let lint = env.run(&["lint"]).success().stdout;
    assert!(
        lint.contains("notes.txt:1: warning: not read as a work order"),
        "{lint}"
    );
    assert!(!lint.contains("_draft"), "{lint}");
    let run = env.run(&["round", "--build", "echo a > a.txt"]).success();
    assert_eq!(
        run.stderr
            .matches("warning: not read as work orders (only '.md' files are): notes.txt")
            .count(),
        1,
        "{}",
        run.stderr
    );
    let empty = env.root.join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let run = env
        .run(&[
            "round",
            "--orders",
            empty.to_str().expect("utf-8"),
            "--build",
            "true",
        ])
        .success();
    assert!(
        run.stderr.contains("warning: no work orders in"),
        "{}",
        run.stderr
    );
}

/// `batch` prints text, as every other command does; `--json` the JSON.
#[test]
fn batch_prints_text_by_default() {
    let env = TestEnv::new();
    env.work_order("wo-a", "A", &[], &["a.txt"]);
    env.work_order("wo-b", "B", &[], &["a.txt", "b.txt"]);
    env.commit_all("init");
    insta::assert_snapshot!(env.run(&["batch"]).snapshot(&env), @"
    batch:
      ID    FILES
      wo-a  a.txt
    deferred:
      ID    REASON
      wo-b  overlap (with wo-a)
    [stderr]
    arbiter batch ready=2 batch=1 deferred=1 max=8
    [exit status: 0]
    ");
    let json = env.run(&["batch", "--json"]).success().json();
    assert_eq!(json["batch"][0]["id"], "wo-a");
    assert_eq!(json["deferred"][0]["reason"], "overlap");
}

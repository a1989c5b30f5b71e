//! `git arbiter lint`: every error at once, warnings for what is probably
//! not meant, and the same warnings in `batch`.

use crate::common::TestEnv;

/// Orders with one of each finding `lint` knows.
fn findings() -> TestEnv {
    let env = TestEnv::new();
    env.write("crates/searcher/src/lib.rs", "lib\n");
    env.write("docs/guide.md", "guide\n");
    env.work_order("base", "Base", &[], &["base.txt"]);
    env.work_order("docs", "Docs", &["base"], &["docs/*.md", "docs/*.txt"]);
    env.work_order("search", "Search", &[], &["crates/searcher/*"]);
    env.write("work-orders/tidy-up.md", "# Tidy up\n\n## Task\nTidy.\n");
    env.commit_all("init");
    env.run(&["halt", "base", "--reason", "needs a decision"])
        .success();
    env
}

#[test]
fn lint_warns_and_exits_0_without_errors() {
    let env = findings();
    insta::assert_snapshot!(env.run(&["lint"]).snapshot(&env), @"
    $TEST_ENV/repo/work-orders/docs.md:4: warning: docs waits on halted work order base: it cannot run until 'base' is cleared
      hint: see why with 'git arbiter log base', then 'git arbiter clear base'
    $TEST_ENV/repo/work-orders/docs.md:8: warning: glob 'docs/*.txt' matches no tracked file
      hint: fine if the order creates such files; otherwise check the spelling
    $TEST_ENV/repo/work-orders/search.md:4: warning: glob 'crates/searcher/*' matches only directories, and a glob covers only the files it matches
      hint: declare 'crates/searcher/**' to cover everything inside them
    $TEST_ENV/repo/work-orders/tidy-up.md:1: warning: tidy-up declares no files: it may touch anything, so it only runs alone
      hint: list what it changes under '## Files to touch' so it can run alongside other orders
    [stderr]
    arbiter lint errors=0 warnings=4
    [exit status: 0]
    ");
    insta::assert_snapshot!(env.run(&["lint", "--json"]).snapshot(&env), @r#"
    {
      "version": 2,
      "errors": 0,
      "warnings": 4,
      "findings": [
        {
          "path": "$TEST_ENV/repo/work-orders/docs.md",
          "line": 4,
          "severity": "warning",
          "message": "docs waits on halted work order base: it cannot run until 'base' is cleared",
          "hint": "see why with 'git arbiter log base', then 'git arbiter clear base'"
        },
        {
          "path": "$TEST_ENV/repo/work-orders/docs.md",
          "line": 8,
          "severity": "warning",
          "message": "glob 'docs/*.txt' matches no tracked file",
          "hint": "fine if the order creates such files; otherwise check the spelling"
        },
        {
          "path": "$TEST_ENV/repo/work-orders/search.md",
          "line": 4,
          "severity": "warning",
          "message": "glob 'crates/searcher/*' matches only directories, and a glob covers only the files it matches",
          "hint": "declare 'crates/searcher/**' to cover everything inside them"
        },
        {
          "path": "$TEST_ENV/repo/work-orders/tidy-up.md",
          "line": 1,
          "severity": "warning",
          "message": "tidy-up declares no files: it may touch anything, so it only runs alone",
          "hint": "list what it changes under '## Files to touch' so it can run alongside other orders"
        }
      ]
    }
    [stderr]
    arbiter lint errors=0 warnings=4
    [exit status: 0]
    "#);
}

#[test]
fn batch_lists_the_same_warnings() {
    let env = findings();
    let lint = env.run(&["lint", "--json"]).success().json();
    let batch = env.run(&["batch", "--json"]).success().json();
    let want: Vec<String> = lint["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            format!(
                "{}:{}: {}",
                f["path"].as_str().unwrap_or_default(),
                f["line"],
                f["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(batch["warnings"], serde_json::json!(want));
}

#[test]
fn lint_reports_every_error_and_exits_2() {
    let env = findings();
    env.write(
        "work-orders/bad-entry.md",
        "# Bad\n\n## Files to touch\n- ../up\n- /abs\n",
    );
    env.write("work-orders/empty.md", "# Empty\n\n## Files to touch\n");
    env.write("work-orders/typo.md", "# Typo\n\n## Dependancies\n- base\n");
    env.write(
        "work-orders/orphan.md",
        "# Orphan\n\n## Depends on\n- nowhere\n",
    );
    env.work_order("loop-a", "A", &["loop-b"], &["a.txt"]);
    env.work_order("loop-b", "B", &["loop-a"], &["b.txt"]);
    let before = env.notes_tip();
    insta::assert_snapshot!(env.run(&["lint"]).snapshot(&env), @"
    $TEST_ENV/repo/work-orders/bad-entry.md:4: error: declared entry '../up': '..' component (entries may not leave the repository)
      hint: declare repo-relative paths or globs such as 'src/ui/**'
    $TEST_ENV/repo/work-orders/bad-entry.md:5: error: declared entry '/abs': absolute path (entries are relative to the repository top)
      hint: declare repo-relative paths or globs such as 'src/ui/**'
    $TEST_ENV/repo/work-orders/docs.md:4: warning: docs waits on halted work order base: it cannot run until 'base' is cleared
      hint: see why with 'git arbiter log base', then 'git arbiter clear base'
    $TEST_ENV/repo/work-orders/docs.md:8: warning: glob 'docs/*.txt' matches no tracked file
      hint: fine if the order creates such files; otherwise check the spelling
    $TEST_ENV/repo/work-orders/empty.md:3: error: '## Files to touch' declares no files
      hint: declare an entry, or remove the section to let the order touch anything
    $TEST_ENV/repo/work-orders/loop-a.md:4: error: dependency cycle: loop-a -> loop-b -> loop-a
      hint: remove one of these 'Depends on' entries so the dependencies form no loop
    $TEST_ENV/repo/work-orders/orphan.md:1: warning: orphan declares no files: it may touch anything, so it only runs alone
      hint: list what it changes under '## Files to touch' so it can run alongside other orders
    $TEST_ENV/repo/work-orders/orphan.md:4: error: unknown dependency 'nowhere'
      hint: create $TEST_ENV/repo/work-orders/nowhere.md or remove the entry
    $TEST_ENV/repo/work-orders/search.md:4: warning: glob 'crates/searcher/*' matches only directories, and a glob covers only the files it matches
      hint: declare 'crates/searcher/**' to cover everything inside them
    $TEST_ENV/repo/work-orders/tidy-up.md:1: warning: tidy-up declares no files: it may touch anything, so it only runs alone
      hint: list what it changes under '## Files to touch' so it can run alongside other orders
    $TEST_ENV/repo/work-orders/typo.md:3: error: unknown section '## Dependancies': did you mean '## Depends on'?
      hint: write '## Depends on', or reword the heading if it is part of the task text
    [stderr]
    arbiter lint errors=6 warnings=5
    [exit status: 2]
    ");
    let json = env.run(&["lint", "--json"]).code(2).json();
    assert_eq!(json["errors"], 6);
    assert_eq!(env.notes_tip(), before, "lint changes nothing");
}

/// The text report carries the hints its `--json` has, and task text left
/// without its `## Task` heading is called that, not a malformed entry.
#[test]
fn text_findings_carry_their_hints_and_a_forgotten_task_heading_is_named() {
    let env = TestEnv::new();
    env.write(
        "work-orders/a.md",
        "# No task heading\n\n## Files to touch\n- a.txt\n\nDo the thing.\n",
    );
    env.commit_all("init");
    insta::assert_snapshot!(env.run(&["lint"]).snapshot(&env), @"
    $TEST_ENV/repo/work-orders/a.md:6: error: expected a '- ' bullet, found 'Do the thing.'
      hint: if this is the task text, put '## Task' on a line before it; otherwise write one entry per line as '- <entry>'
    [stderr]
    arbiter lint errors=1 warnings=0
    [exit status: 2]
    ");
}

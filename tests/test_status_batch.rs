use crate::common::TestEnv;

fn example() -> TestEnv {
    let env = TestEnv::new();
    env.write("src/a.rs", "a\n");
    env.work_order(
        "wo-01",
        "Login form",
        &[],
        &["src/ui/login/**", "tests/login.rs"],
    );
    env.work_order("wo-02", "Login API", &["wo-01"], &["src/api/login.rs"]);
    env.work_order("wo-03", "Login styles", &[], &["src/ui/login/style.css"]);
    env.work_order("wo-04", "Docs", &[], &["docs/*.md"]);
    env.work_order("wo-05", "Anything", &[], &[]);
    env.commit_all("init");
    env
}

#[test]
fn status_table_and_json() {
    let env = example();
    env.run(&["halt", "wo-04", "--reason", "waiting for review"])
        .success();
    insta::assert_snapshot!(env.run(&["status"]).snapshot(&env), @r"
    ID     STATUS                   ATTEMPTS  DEPS   MERGED  TITLE
    wo-01  ready                    0/3       -      -       Login form
    wo-02  blocked                  0/3       wo-01  -       Login API
    wo-03  ready                    0/3       -      -       Login styles
    wo-04  HALT waiting for review  0/3       -      -       Docs
    wo-05  ready                    0/3       -      -       Anything
    [stderr]
    [exit status: 0]
    ");
    let json = env.run(&["status", "--json"]).success().json();
    assert_eq!(json["version"], 2);
    let row = &json["orders"][3];
    assert_eq!(row["id"], "wo-04");
    assert_eq!(row["halted"], true);
    assert_eq!(row["state"], "halted");
    assert_eq!(row["halt_reason"], "waiting for review");
    // One vocabulary: `show --json` says the same of the same order.
    let show = env.run(&["show", "wo-04", "--json"]).success().json();
    assert_eq!(show["id"], "wo-04");
    assert_eq!(show["state"], "halted");
    assert_eq!(show["halted"], true);
    assert_eq!(show["version"], 2);
    assert_eq!(json["orders"][1]["state"], "blocked");
    for key in [
        "id",
        "title",
        "state",
        "status",
        "halted",
        "halt_reason",
        "attempts",
        "cap",
        "deps",
        "checkpoint_before",
        "checkpoint_after",
    ] {
        assert!(row.get(key).is_some(), "missing {key}");
    }
}

#[test]
fn batch_json_and_summary_line() {
    let env = example();
    insta::assert_snapshot!(env.run(&["batch", "--json", "--max", "8"]).snapshot(&env), @r#"
    {
      "version": 2,
      "batch": [
        {
          "id": "wo-01",
          "files": [
            "src/ui/login/**",
            "tests/login.rs"
          ]
        },
        {
          "id": "wo-04",
          "files": [
            "docs/*.md"
          ]
        }
      ],
      "deferred": [
        {
          "id": "wo-03",
          "reason": "overlap",
          "conflicts_with": [
            "wo-01"
          ]
        },
        {
          "id": "wo-05",
          "reason": "no_declared_files",
          "conflicts_with": []
        }
      ],
      "warnings": [
        "$TEST_ENV/repo/work-orders/wo-01.md:4: glob 'src/ui/login/**' matches no tracked file",
        "$TEST_ENV/repo/work-orders/wo-04.md:4: glob 'docs/*.md' matches no tracked file",
        "$TEST_ENV/repo/work-orders/wo-05.md:1: wo-05 declares no files: it may touch anything, so it only runs alone"
      ]
    }
    [stderr]
    arbiter batch ready=4 batch=2 deferred=2 max=8
    [exit status: 0]
    "#);
    let run = env.run(&["batch", "--max", "1"]).success();
    assert_eq!(
        run.stderr,
        "arbiter batch ready=4 batch=1 deferred=3 max=1\n"
    );
}

#[test]
fn halted_wo_is_never_batched_until_cleared() {
    let env = example();
    env.run(&["halt", "wo-01", "--reason", "x"]).success();
    let json = env.run(&["batch", "--json"]).success().json();
    assert!(json["batch"]
        .as_array()
        .expect("batch")
        .iter()
        .all(|p| p["id"] != "wo-01"));
    env.run(&["clear", "wo-01"]).success();
    let json = env.run(&["batch", "--json"]).success().json();
    assert_eq!(json["batch"][0]["id"], "wo-01");
    let run = env.run(&["clear", "wo-01"]).code(2);
    assert!(run.stderr.contains("is not halted"));
}

#[test]
fn recovery_rule_is_applied_in_status() {
    let env = example();
    let base = env.git(&["rev-parse", "HEAD"]).trim().to_owned();
    // A crashed run left two WOs in_progress: one whose merge landed, one whose did not.
    env.write("src/ui/login/form.rs", "x\n");
    let merged = env.commit_all("landed");
    let side = {
        env.git(&["checkout", "-q", "-b", "side", &base]);
        env.write("src/api/login.rs", "x\n");
        let c = env.commit_all("never merged");
        env.git(&["checkout", "-q", "main"]);
        c
    };
    env.write_record(
        "wo-01",
        &format!(
            r#"{{"version":1,"wo":"wo-01","status":"in_progress","halted":false,"halt_reason":null,"attempts":1,"cap":3,"checkpoint_before":"{base}","checkpoint_after":"{merged}","verdicts":[],"history":[]}}"#
        ),
    );
    env.write_record(
        "wo-03",
        &format!(
            r#"{{"version":1,"wo":"wo-03","status":"in_progress","halted":false,"halt_reason":null,"attempts":1,"cap":3,"checkpoint_before":"{base}","checkpoint_after":"{side}","verdicts":[],"history":[]}}"#
        ),
    );
    env.write_record(
        "wo-04",
        r#"{"version":1,"wo":"wo-04","status":"in_progress","halted":false,"halt_reason":null,"attempts":1,"cap":3,"checkpoint_before":null,"checkpoint_after":"1111111111111111111111111111111111111111","verdicts":[],"history":[]}"#,
    );
    let json = env.run(&["status", "--json"]).success().json();
    let orders = json["orders"].as_array().expect("orders");
    assert_eq!(orders[0]["status"], "done");
    assert_eq!(orders[2]["status"], "needs_rework");
    assert_eq!(
        orders[3]["status"], "in_progress",
        "an ancestry check that errors is reported, not guessed"
    );
    assert_eq!(orders[3]["recovery"]["outcome"], "error");
    let human = env.run(&["status"]).success();
    assert!(
        human
            .stdout
            .contains("warning: wo-04: cannot tell whether its merge landed"),
        "{}",
        human.stdout
    );
}

/// A merge-back killed after moving the branch but before recording it
/// leaves no checkpoint_after: recovery finds the merge on the first-parent
/// chain by its trailers, only for the recorded attempt and only since
/// checkpoint_before.
#[test]
fn recovery_finds_a_merge_by_its_trailers() {
    let env = example();
    // wo-02's attempt-1 merge predates its checkpoint_before (its record
    // rolled back, say): it landed all the same, so it is done.
    env.landed_merge("wo-02", 1, "src/api/login.rs");
    let before = env.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let landed = env.landed_merge("wo-01", 2, "src/ui/login/form.rs");
    env.landed_merge("wo-03", 1, "src/ui/other.rs");
    let record = |wo: &str, attempts: u32| {
        format!(
            r#"{{"version":1,"wo":"{wo}","status":"in_progress","halted":false,"halt_reason":null,"attempts":{attempts},"cap":3,"checkpoint_before":"{before}","checkpoint_after":null,"verdicts":[],"history":[]}}"#
        )
    };
    env.write_record("wo-01", &record("wo-01", 2));
    env.write_record("wo-02", &record("wo-02", 1));
    // wo-03's merge names attempt 1 while the record is at attempt 2: it
    // still landed after this attempt started, so merging again would land
    // it twice (a standalone merge-back once wrote such a pair).
    let other_attempt = env.git(&["rev-parse", "HEAD"]).trim().to_owned();
    env.write_record("wo-03", &record("wo-03", 2));
    let json = env.run(&["status", "--json"]).success().json();
    let orders = json["orders"].as_array().expect("orders");
    assert_eq!(orders[0]["status"], "done");
    assert_eq!(orders[0]["recovery"]["merge"], landed.as_str());
    assert_eq!(orders[1]["status"], "done");
    assert_eq!(orders[2]["status"], "done");
    assert_eq!(orders[2]["recovery"]["merge"], other_attempt.as_str());
    env.fsck();
}

/// A done order names the branch its merge landed on, in the table, the JSON
/// and the merge commit's note; a record from before that was kept shows
/// plain `done`.
#[test]
fn status_shows_the_branch_a_done_order_was_merged_into() {
    let env = example();
    env.git(&["branch", "integration"]);
    env.run(&["worktree", "add", "wo-04"]).success();
    let w = env.root.join("repo.arbiter").join("wo-04");
    std::fs::create_dir_all(w.join("docs")).expect("mkdir");
    std::fs::write(w.join("docs/a.md"), "a\n").expect("write");
    env.git_in(&w, &["add", "-A"]);
    env.git_in(&w, &["commit", "-q", "-m", "docs"]);
    env.run(&["merge-back", "wo-04", "--into", "integration"])
        .success();
    let old_done = r#"{"version":1,"wo":"wo-05","status":"done","halted":false,"halt_reason":null,"attempts":1,"cap":3,"checkpoint_before":null,"checkpoint_after":null,"verdicts":[],"history":[]}"#;
    env.write_record("wo-05", old_done);

    let human = env.run(&["status"]).success().stdout;
    let status_of = |id: &str| {
        let line = human
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("no row {id}:\n{human}"));
        line.split("  ")
            .nth(1)
            .map(str::trim)
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(status_of("wo-04"), "done → integration", "{human}");
    assert_eq!(status_of("wo-05"), "done", "{human}");

    let json = env.run(&["status", "--json"]).success().json();
    assert_eq!(json["orders"][3]["merged_into"], "integration");
    assert!(json["orders"][4].get("merged_into").is_none());
    let merge = env.git(&["rev-parse", "integration"]);
    let note: serde_json::Value =
        serde_json::from_str(&env.git(&["notes", "--ref=arbiter", "show", merge.trim()]))
            .expect("note JSON");
    assert_eq!(note["into"], "integration");
}

/// An order that failed up to its retry cap says why, not only
/// `retry_cap_exhausted`: the last failure and its log in the escalation,
/// in `status` and in `show`.
#[test]
fn a_halt_after_the_retry_cap_names_the_last_failure_and_its_log() {
    let env = TestEnv::new();
    env.work_order("wo-a", "Fails", &[], &["a.txt"]);
    env.commit_all("init");
    let run = env
        .run(&["round", "--setup", "exit 3", "--build", "true"])
        .code(1);
    let summary: String = run
        .stdout
        .lines()
        .filter(|l| !l.starts_with("slots busy"))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!(env.redact(&summary), @"
    0 landed batch(es): 0 done, 1 halted, 0 pending

    order  outcome                      attempts  wait  build  gates  critics  queued  changed
    wo-a   halted: retry_cap_exhausted  3         0.0s  -      -      -        -       -


    ESCALATION: these work orders are halted and need a human:
      wo-a  retry_cap_exhausted
          last:   attempt 3 failed: setup 'exit 3' exit 3
          next:   when fixed, `git arbiter retry --rebuild wo-a` builds it afresh
          log:    $TEST_ENV/repo/.git/arbiter/logs/wo-a/attempt-3.log
    ");
    let status = env.run(&["status"]).success();
    insta::assert_snapshot!(env.redact(&status.stdout), @"
    ID    STATUS                    ATTEMPTS  DEPS  MERGED  TITLE
    wo-a  HALT retry_cap_exhausted  3/3       -     -       Fails
    wo-a: attempt 3 failed: setup 'exit 3' exit 3
      log: $TEST_ENV/repo/.git/arbiter/logs/wo-a/attempt-3.log
    ");
    let show = env.run(&["show", "wo-a"]).success().stdout;
    let head: String = show.lines().take(5).map(|l| format!("{l}\n")).collect();
    insta::assert_snapshot!(env.redact(&head), @"
    wo-a  Fails
    status:   HALT retry_cap_exhausted
    attempts: 3 of 3
    last:     attempt 3 failed: setup 'exit 3' exit 3
              log: $TEST_ENV/repo/.git/arbiter/logs/wo-a/attempt-3.log
    ");
    let json = env.run(&["status", "--json"]).success().json();
    assert_eq!(
        json["orders"][0]["last_failure"]["reason"],
        "setup 'exit 3' exit 3"
    );
}

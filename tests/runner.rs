//! All CLI tests compile into this one binary (as jj does).

mod common;

mod test_coexist;
mod test_config_errors;
mod test_cost;
mod test_crash;
mod test_docs;
mod test_doctor;
mod test_layers;
mod test_lint;
mod test_merge_back;
mod test_oracle;
mod test_orders;
mod test_pool;
mod test_queue;
mod test_race;
mod test_real_repos;
mod test_reliability;
mod test_remote;
mod test_repo_checkout;
mod test_repo_commit;
mod test_repo_config;
mod test_report;
mod test_retry;
mod test_review;
mod test_round;
mod test_slot;
mod test_state;
mod test_status_batch;
mod test_worktree;

#[test]
fn every_test_file_is_listed() {
    let listed = include_str!("runner.rs");
    for entry in
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests")).expect("tests dir")
    {
        let name = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("utf-8 name");
        if let Some(stem) = name.strip_suffix(".rs") {
            if stem.starts_with("test_") {
                assert!(
                    listed.contains(&format!("mod {stem};")),
                    "tests/{name} is not listed in tests/runner.rs"
                );
            }
        }
    }
}

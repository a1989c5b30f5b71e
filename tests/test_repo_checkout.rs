//! The checked-out integration branch after a merge holds what stock git
//! would write there: the oracle is a fresh `git clone` of the same tip
//! with the same configuration, compared byte for byte.

use crate::common::TestEnv;

/// Configuration both the repository and the oracle clone get.
const CONFIG: &[(&str, &str)] = &[
    ("core.autocrlf", "true"),
    ("filter.upper.smudge", "tr a-z A-Z"),
    ("filter.upper.clean", "tr A-Z a-z"),
];

const ATTRIBUTES: &str = "*.sh text eol=lf\n*.txt eol=crlf\n*.up filter=upper\nid.c ident\n";

/// What the order writes; with `bulk`, also enough other files that the
/// update rebuilds the whole index instead of editing it in place.
fn build(bulk: bool) -> String {
    let mut build = String::from(
        "printf 'echo hi\\nexit 0\\n' > run.sh; printf 'l1\\nl2\\n' > a.txt; \
         printf 'hello\\n' > b.up; printf '/* $Id$ */\\n' > id.c",
    );
    if bulk {
        build.push_str("; mkdir -p gen; for i in $(seq 1 120); do echo $i > gen/$i.txt; done");
    }
    build
}

fn assert_checkout_as_git_writes_it(bulk: bool) {
    let env = TestEnv::new();
    for (key, value) in CONFIG {
        env.git(&["config", key, value]);
    }
    env.write(".gitattributes", ATTRIBUTES);
    for i in 0..40 {
        env.write(&format!("old/{i}.dat"), &format!("{i}\n"));
    }
    env.work_order(
        "wo-01",
        "Attributes",
        &[],
        &["run.sh", "a.txt", "b.up", "id.c", "gen/**"],
    );
    env.commit_all("init");
    env.run(&["round", "--build", &build(bulk)]).success();
    assert_eq!(env.git(&["status", "--porcelain"]), "");

    let oracle = env.root.join("oracle");
    let mut clone = vec!["clone".to_owned(), "-q".to_owned()];
    for (key, value) in CONFIG {
        clone.push("-c".into());
        clone.push(format!("{key}={value}"));
    }
    clone.push(env.repo.display().to_string());
    clone.push(oracle.display().to_string());
    let clone: Vec<&str> = clone.iter().map(String::as_str).collect();
    env.git_in(&env.root, &clone);
    // `ident` expands, as git's does, but gix 0.90 writes `$Id: <sha>$`
    // where git writes `$Id: <sha> $`; both read back as the same blob.
    let ident = std::fs::read_to_string(env.repo.join("id.c")).expect("id.c");
    let blob = env.git(&["rev-parse", "HEAD:id.c"]);
    assert_eq!(ident, format!("/* $Id: {}$ */\r\n", blob.trim()));
    let mut paths = vec!["run.sh", "a.txt", "b.up"];
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

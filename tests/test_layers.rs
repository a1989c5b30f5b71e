//! The library is one stack of layers: no two top-level modules of `src/`
//! import each other, directly or through others. Read from the `crate::`
//! paths in the source (as `modcycles.py` does), so a new cycle fails here
//! rather than in a review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules: `src/<m>.rs`, or every `.rs` file under `src/<m>/`.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                rs_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut mods = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("src").flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "lib" && stem != "main" {
                mods.insert(stem.to_owned(), vec![path]);
            }
        } else if path.is_dir() {
            let mut files = Vec::new();
            rs_files(&path, &mut files);
            mods.insert(name, files);
        }
    }
    mods
}

/// The first segment of every path after `crate::` in `text`: `crate::a::b`
/// gives `a`, `crate::{a::x, b}` gives `a` and `b`.
fn crate_paths(text: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            found.push(ident(rest));
            continue;
        };
        // Each item at depth 1 of the group starts right after `{` or a `,`.
        let mut depth = 1;
        let mut item_start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => break,
                '}' => depth -= 1,
                ',' if depth == 1 => item_start = true,
                c if c.is_whitespace() => {}
                _ if item_start && depth == 1 => {
                    found.push(ident(&group[i..]));
                    item_start = false;
                }
                _ => {}
            }
        }
    }
    found
}

/// Module → the other modules its non-test code names.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut edges = BTreeMap::new();
    for (name, files) in &mods {
        let mut to = BTreeSet::new();
        for file in files {
            let text = std::fs::read_to_string(file).expect("read source");
            // Unit tests may reach anywhere.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for target in crate_paths(code) {
                if target != *name && mods.contains_key(&target) {
                    to.insert(target);
                }
            }
        }
        edges.insert(name.clone(), to);
    }
    edges
}

/// Every module reachable from `from` (not counting `from` itself unless a
/// path leads back to it).
fn reachable(edges: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&str> = edges[from].iter().map(String::as_str).collect();
    while let Some(m) = stack.pop() {
        if seen.insert(m.to_owned()) {
            stack.extend(edges[m].iter().map(String::as_str));
        }
    }
    seen
}

/// The cycles: groups of modules that all reach each other.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach: BTreeMap<&str, BTreeSet<String>> = edges
        .keys()
        .map(|m| (m.as_str(), reachable(edges, m)))
        .collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for (m, from_m) in &reach {
        if !from_m.contains(*m) || found.iter().any(|c| c.contains(*m)) {
            continue;
        }
        let group = from_m
            .iter()
            .filter(|n| reach[n.as_str()].contains(*m))
            .cloned()
            .collect();
        found.push(group);
    }
    found
}

#[test]
fn no_module_imports_itself_through_others() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = edges(&src);
    // Not vacuous: the modules and their imports were found.
    assert!(edges.len() >= 20, "only {} modules in src/", edges.len());
    assert!(edges["round"].contains("builder"), "{edges:?}");
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "import cycles among src/ modules (break them; see the layers in src/lib.rs): {found:?}"
    );
}

#[test]
fn a_cycle_is_found() {
    assert_eq!(
        crate_paths("use crate::{a::{x, y}, b};\nuse crate::c::z; [`crate::d`]"),
        ["a", "b", "c", "d"]
    );
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"]),
        ("c", &["a"]),
        ("d", &["a"]),
    ]
    .into_iter()
    .map(|(m, to)| (m.into(), to.iter().map(|t| t.to_string()).collect()))
    .collect();
    let want: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    assert_eq!(cycles(&edges), [want]);
}

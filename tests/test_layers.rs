//! The library is four layers, bottom up: `sys` (process and file-system
//! primitives), `git` (git's formats and behaviour), `state` (work orders,
//! records, configuration), `run` (everything that runs work). A module
//! imports only from its own layer or the ones below, and no two modules
//! import each other, directly or through others. Read from the `crate::`
//! paths in the source (as `modcycles.py` does), so a layer broken or a new
//! cycle fails here rather than in a review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of `src/`, bottom up.
const LAYERS: [&str; 4] = ["sys", "git", "state", "run"];

/// Every module of the layers, named by its path below `crate` (`git::odb`,
/// `run::race`; a folder module holds the files under it; `state` is the
/// `state` layer's own `mod.rs`).
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
    for layer in LAYERS {
        for entry in std::fs::read_dir(src.join(layer)).expect("layer").flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "mod.rs" {
                mods.insert(layer.to_owned(), vec![path]);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                mods.insert(format!("{layer}::{stem}"), vec![path]);
            } else if path.is_dir() {
                let mut files = Vec::new();
                rs_files(&path, &mut files);
                mods.insert(format!("{layer}::{name}"), files);
            }
        }
    }
    mods
}

/// Every path after `crate::` in `text`, groups expanded: `crate::a::b`
/// gives `a::b`, `crate::{a::{x, y}, b}` gives `a::x`, `a::y` and `b`.
fn crate_paths(text: &str) -> Vec<String> {
    fn is_ident(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_'
    }
    /// The use tree at the start of `rest` under `prefix`; returns where it ends.
    fn tree(rest: &str, prefix: &str, out: &mut Vec<String>) -> usize {
        let mut path = prefix.to_owned();
        let mut at = 0;
        loop {
            let ident: String = rest[at..].chars().take_while(|c| is_ident(*c)).collect();
            at += ident.len();
            if !ident.is_empty() {
                if !path.is_empty() {
                    path.push_str("::");
                }
                path.push_str(&ident);
            }
            if rest[at..].starts_with("::{") {
                at += 3;
                loop {
                    at += rest[at..].len() - rest[at..].trim_start().len();
                    if rest[at..].starts_with('}') {
                        return at + 1;
                    }
                    at += tree(&rest[at..], &path, out);
                    at += rest[at..].len() - rest[at..].trim_start().len();
                    if rest[at..].starts_with(',') {
                        at += 1;
                    }
                }
            }
            if rest[at..].starts_with("::") && rest[at + 2..].starts_with(is_ident) {
                at += 2;
                continue;
            }
            if !path.is_empty() {
                out.push(path);
            }
            // Skip the rest of the item (`as x`, `*`) up to its separator.
            let end = rest[at..].find([',', '}']).unwrap_or(rest.len() - at);
            return at + end.min(rest[at..].find(['\n', ';']).unwrap_or(end));
        }
    }
    let mut found = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut i = 0;
            loop {
                i += group[i..].len() - group[i..].trim_start().len();
                if group[i..].starts_with('}') || i >= group.len() {
                    break;
                }
                i += tree(&group[i..], "", &mut found);
                i += group[i..].len() - group[i..].trim_start().len();
                if group[i..].starts_with(',') {
                    i += 1;
                } else {
                    break;
                }
            }
        } else {
            tree(rest, "", &mut found);
        }
    }
    found
}

/// The module a path names: its longest prefix that is a module.
fn module_of<'a>(mods: &'a BTreeMap<String, Vec<PathBuf>>, path: &str) -> Option<&'a str> {
    let mut segments: Vec<&str> = path.split("::").collect();
    while !segments.is_empty() {
        if let Some((name, _)) = mods.get_key_value(&segments.join("::")) {
            return Some(name);
        }
        segments.pop();
    }
    None
}

fn layer_of(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or_default();
    LAYERS
        .iter()
        .position(|l| *l == top)
        .unwrap_or_else(|| panic!("{module} is in no layer"))
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
            for path in crate_paths(code) {
                if let Some(target) = module_of(&mods, &path) {
                    if target != name {
                        to.insert(target.to_owned());
                    }
                }
            }
        }
        edges.insert(name.clone(), to);
    }
    edges
}

/// The imports that climb: from a module to one in a higher layer.
fn climbs(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (from, to) in edges {
        for target in to {
            if layer_of(target) > layer_of(from) {
                found.push((from.clone(), target.clone()));
            }
        }
    }
    found
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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let edges = edges(&src());
    // Not vacuous: the modules and their imports were found.
    assert!(edges.len() >= 40, "only {} modules in src/", edges.len());
    assert!(edges["run::round"].contains("run::builder"), "{edges:?}");
    assert!(edges["run::round"].contains("state"), "{edges:?}");
    let found = climbs(&edges);
    assert!(
        found.is_empty(),
        "imports from a higher layer (the layers, bottom up, are {LAYERS:?}; see src/lib.rs): {found:?}"
    );
}

#[test]
fn no_module_imports_itself_through_others() {
    let edges = edges(&src());
    let found = cycles(&edges);
    assert!(
        found.is_empty(),
        "import cycles among src/ modules (break them; see the layers in src/lib.rs): {found:?}"
    );
}

/// `src/` holds the entry points and the layers' folders, nothing else but
/// the unit tests' helpers.
#[test]
fn the_source_root_holds_only_the_layers() {
    let mut root: Vec<String> = std::fs::read_dir(src())
        .expect("src")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    root.sort();
    let mut want = vec!["cli", "lib.rs", "main.rs", "testutil.rs"];
    want.extend(LAYERS);
    want.sort();
    assert_eq!(root, want);
}

#[test]
fn a_climb_and_a_cycle_are_found() {
    assert_eq!(
        crate_paths("use crate::{a::{x, y as z}, b};\nuse crate::c::z; [`crate::d`]"),
        ["a::x", "a::y", "b", "c::z", "d"]
    );
    assert_eq!(
        crate_paths("use crate::{git::{odb::{self, Error}, hooks}, state};"),
        ["git::odb::self", "git::odb::Error", "git::hooks", "state"]
    );
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("git::a", &["git::b"][..]),
        ("git::b", &["git::c"]),
        ("git::c", &["git::a"]),
        ("run::d", &["git::a"]),
        ("sys::e", &["state"]),
        ("state", &[]),
    ]
    .into_iter()
    .map(|(m, to)| (m.into(), to.iter().map(|t| t.to_string()).collect()))
    .collect();
    let want: BTreeSet<String> = ["git::a", "git::b", "git::c"].map(String::from).into();
    assert_eq!(cycles(&edges), [want]);
    assert_eq!(climbs(&edges), [("sys::e".to_owned(), "state".to_owned())]);
}

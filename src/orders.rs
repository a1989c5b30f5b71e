//! Work orders: `<orders-dir>/<id>.md` files, parsed and validated as a set.
//!
//! Format (DESIGN "Concepts"): the title is the first level-1 heading;
//! `## Depends on` and `## Files to touch` hold bullet lists; `## Task` is the
//! free text handed to the builder. Other `##` sections are kept in the task
//! text. Headings inside fenced code blocks are ignored. A UTF-8 byte order
//! mark at the start of the file is skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::scope::Entry;

/// One parsed, validated work order.
#[derive(Debug, Clone)]
pub struct WorkOrder {
    pub id: String,
    pub title: String,
    pub path: PathBuf,
    pub deps: Vec<String>,
    pub files: Vec<Entry>,
    pub task: String,
}

impl WorkOrder {
    /// The declared entries as text, in file order.
    pub fn file_strings(&self) -> Vec<String> {
        self.files.iter().map(|e| e.as_str().to_owned()).collect()
    }

    /// Does this WO's own declared set cover `path`?
    pub fn covers(&self, path: &str) -> bool {
        self.files.iter().any(|e| e.covers(path))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}:{line}: {message}", file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        message: String,
        hint: String,
    },
    #[error("dependency cycle: {}", cycle.join(" -> "))]
    Cycle { cycle: Vec<String> },
    #[error("work-order directory {}: {message}", dir.display())]
    Dir {
        dir: PathBuf,
        message: String,
        hint: String,
    },
}

impl Error {
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Invalid { hint, .. } | Error::Dir { hint, .. } => Some(hint.clone()),
            Error::Cycle { .. } => Some(
                "remove one of these 'Depends on' entries so the dependencies form no loop".into(),
            ),
        }
    }
}

fn invalid(file: &Path, line: usize, message: impl Into<String>, hint: impl Into<String>) -> Error {
    Error::Invalid {
        file: file.to_owned(),
        line,
        message: message.into(),
        hint: hint.into(),
    }
}

/// Is `id` a safe work-order id: `[a-z0-9][a-z0-9._-]*`, at most 64 characters,
/// and usable as the ref component of `refs/heads/arbiter/<id>`?
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 64 {
        return Err(format!("id '{id}' must be 1 to 64 characters long"));
    }
    let mut bytes = id.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok =
        bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if !first_ok || !rest_ok {
        return Err(format!(
            "id '{id}' must match [a-z0-9][a-z0-9._-]* (lowercase letters, digits, '.', '_', '-')"
        ));
    }
    let full = format!("refs/heads/arbiter/{id}");
    if gix::refs::FullName::try_from(full.as_str()).is_err() {
        return Err(format!(
            "id '{id}' is not a valid git ref component (e.g. '..' or a '.lock' ending)"
        ));
    }
    Ok(())
}

#[derive(PartialEq, Clone, Copy)]
enum Section {
    Preamble,
    Deps,
    Files,
    Task,
    Other,
}

/// Parse one work-order file. `id` comes from the file stem.
pub fn parse(id: &str, path: &Path, text: &str) -> Result<WorkOrder, Error> {
    if let Err(message) = check_id(id) {
        return Err(invalid(
            path,
            1,
            message,
            "rename the file to a lowercase id such as 'wo-01.md'",
        ));
    }
    // Editors on Windows may save UTF-8 with a byte order mark; it is not
    // part of the text, and left in place it would hide the `# Title`.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut title = None;
    let mut deps: Vec<(String, usize)> = Vec::new();
    let mut files = Vec::new();
    let mut task = String::new();
    let mut section = Section::Preamble;
    let mut in_fence = false;
    let mut seen = [false; 3];
    for (index, line) in text.lines().enumerate() {
        let lineno = index + 1;
        let trimmed = line.trim_end();
        if trimmed.trim_start().starts_with("```") || trimmed.trim_start().starts_with("~~~") {
            in_fence = !in_fence;
        }
        if !in_fence {
            if let Some(heading) = trimmed.strip_prefix("# ") {
                if title.is_none() {
                    let heading = heading.trim();
                    if heading.is_empty() {
                        return Err(invalid(
                            path,
                            lineno,
                            "empty title",
                            "write the title after '# '",
                        ));
                    }
                    title = Some(heading.to_owned());
                    continue;
                }
            } else if let Some(heading) = trimmed.strip_prefix("## ") {
                let name = heading.trim().to_ascii_lowercase();
                let next = match name.as_str() {
                    "depends on" => Some((Section::Deps, 0)),
                    "files to touch" => Some((Section::Files, 1)),
                    "task" => Some((Section::Task, 2)),
                    _ => None,
                };
                if let Some((next, slot)) = next {
                    if seen[slot] {
                        return Err(invalid(
                            path,
                            lineno,
                            format!("section '## {}' appears twice", heading.trim()),
                            "merge the two sections into one",
                        ));
                    }
                    seen[slot] = true;
                    section = next;
                    continue;
                }
                if section != Section::Task {
                    section = Section::Other;
                }
            }
        }
        match section {
            Section::Preamble | Section::Other => {}
            Section::Task => {
                task.push_str(line);
                task.push('\n');
            }
            Section::Deps | Section::Files => {
                let content = trimmed.trim_start();
                if content.is_empty() || (content.starts_with("<!--") && content.ends_with("-->")) {
                    continue;
                }
                let Some(item) = content
                    .strip_prefix("- ")
                    .or_else(|| content.strip_prefix("* "))
                else {
                    let empty_bullet = content == "-" || content == "*";
                    return Err(if empty_bullet {
                        invalid(
                            path,
                            lineno,
                            "empty entry",
                            "remove the empty bullet or write a path after it",
                        )
                    } else {
                        invalid(
                            path,
                            lineno,
                            format!("expected a '- ' bullet, found '{content}'"),
                            "write one entry per line as '- <entry>'",
                        )
                    });
                };
                let item = strip_backticks(item.trim());
                if section == Section::Deps {
                    if let Err(message) = check_id(item) {
                        return Err(invalid(
                            path,
                            lineno,
                            format!("dependency {message}"),
                            "name the work order by its file stem, e.g. '- wo-01'",
                        ));
                    }
                    if deps.iter().any(|(d, _)| d == item) {
                        continue;
                    }
                    deps.push((item.to_owned(), lineno));
                } else {
                    let entry = Entry::parse(item).map_err(|e| {
                        invalid(
                            path,
                            lineno,
                            format!("declared entry '{item}': {e}"),
                            "declare repo-relative paths or globs such as 'src/ui/**'",
                        )
                    })?;
                    if !files.contains(&entry) {
                        files.push(entry);
                    }
                }
            }
        }
    }
    let Some(title) = title else {
        return Err(invalid(
            path,
            1,
            "no title",
            "start the file with a '# Title' line",
        ));
    };
    if let Some((_, line)) = deps.iter().find(|(d, _)| d == id) {
        return Err(invalid(
            path,
            *line,
            format!("work order '{id}' depends on itself"),
            "remove the entry",
        ));
    }
    Ok(WorkOrder {
        id: id.to_owned(),
        title,
        path: path.to_owned(),
        deps: deps.into_iter().map(|(d, _)| d).collect(),
        files,
        task: task.trim().to_owned(),
    })
}

fn strip_backticks(s: &str) -> &str {
    s.strip_prefix('`')
        .and_then(|s| s.strip_suffix('`'))
        .unwrap_or(s)
}

/// The validated set of work orders, sorted by id.
#[derive(Debug, Clone, Default)]
pub struct Orders {
    pub dir: PathBuf,
    pub list: Vec<WorkOrder>,
    index: BTreeMap<String, usize>,
}

impl Orders {
    pub fn get(&self, id: &str) -> Option<&WorkOrder> {
        self.index.get(id).map(|&i| &self.list[i])
    }

    pub fn iter(&self) -> impl Iterator<Item = &WorkOrder> {
        self.list.iter()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Build from parsed orders, checking unknown dependencies and cycles.
    pub fn from_list(
        dir: PathBuf,
        mut list: Vec<WorkOrder>,
        texts: &[(PathBuf, String)],
    ) -> Result<Orders, Error> {
        list.sort_by(|a, b| a.id.cmp(&b.id));
        let index: BTreeMap<String, usize> = list
            .iter()
            .enumerate()
            .map(|(i, wo)| (wo.id.clone(), i))
            .collect();
        for wo in &list {
            for dep in &wo.deps {
                if !index.contains_key(dep) {
                    let line = texts
                        .iter()
                        .find(|(p, _)| *p == wo.path)
                        .and_then(|(_, t)| line_of_dep(t, dep))
                        .unwrap_or(1);
                    return Err(invalid(
                        &wo.path,
                        line,
                        format!("unknown dependency '{dep}'"),
                        format!("create {}/{dep}.md or remove the entry", dir.display()),
                    ));
                }
            }
        }
        let orders = Orders { dir, list, index };
        if let Some(cycle) = orders.find_cycle() {
            return Err(Error::Cycle { cycle });
        }
        Ok(orders)
    }

    /// The first dependency cycle in id order, as `a -> b -> a`.
    fn find_cycle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Active,
            Done,
        }
        let mut marks = vec![Mark::New; self.list.len()];
        for start in 0..self.list.len() {
            if marks[start] != Mark::New {
                continue;
            }
            // Iterative DFS: (node, next dependency to visit).
            let mut stack = vec![(start, 0usize)];
            marks[start] = Mark::Active;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let deps = &self.list[node].deps;
                if *next < deps.len() {
                    let dep = self.index[&deps[*next]];
                    *next += 1;
                    match marks[dep] {
                        Mark::New => {
                            marks[dep] = Mark::Active;
                            stack.push((dep, 0));
                        }
                        Mark::Active => {
                            let from = stack
                                .iter()
                                .position(|&(n, _)| n == dep)
                                .expect("active node is on the stack");
                            let mut cycle: Vec<String> = stack[from..]
                                .iter()
                                .map(|&(n, _)| self.list[n].id.clone())
                                .collect();
                            cycle.push(self.list[dep].id.clone());
                            return Some(cycle);
                        }
                        Mark::Done => {}
                    }
                } else {
                    marks[node] = Mark::Done;
                    stack.pop();
                }
            }
        }
        None
    }
}

fn line_of_dep(text: &str, dep: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim();
            let item = l
                .strip_prefix("- ")
                .or_else(|| l.strip_prefix("* "))
                .map(str::trim);
            item.map(strip_backticks) == Some(dep)
        })
        .map(|i| i + 1)
}

fn file_stem(path: &Path) -> &str {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
}

/// At most this many threads read and parse work orders in [`load`].
const MAX_READERS: usize = 4;
/// Fewer files than this per thread are not worth a thread.
const MIN_FILES_PER_READER: usize = 256;

/// Read and parse `paths` on a few threads. The results are in the order of
/// `paths` and end at the first error (the first in that order).
fn read_and_parse(paths: &[PathBuf]) -> Vec<Result<(WorkOrder, String), Error>> {
    let read = |paths: &[PathBuf]| {
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            let result = std::fs::read_to_string(path)
                .map_err(|e| {
                    invalid(
                        path,
                        1,
                        format!("cannot read: {e}"),
                        "work orders must be readable UTF-8 Markdown",
                    )
                })
                .and_then(|text| Ok((parse(file_stem(path), path, &text)?, text)));
            let failed = result.is_err();
            out.push(result);
            if failed {
                break;
            }
        }
        out
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_READERS)
        .min(paths.len().div_ceil(MIN_FILES_PER_READER))
        .max(1);
    if workers == 1 {
        return read(paths);
    }
    let chunk = paths.len().div_ceil(workers);
    let parts: Vec<Vec<_>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|part| scope.spawn(move || read(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut out = Vec::with_capacity(paths.len());
    for part in parts {
        let failed = part.last().is_some_and(Result::is_err);
        out.extend(part);
        if failed {
            break;
        }
    }
    out
}

/// Read and validate every `*.md` in `dir`. A missing directory is an error:
/// the user pointed us somewhere that holds no work orders.
pub fn load(dir: &Path) -> Result<Orders, Error> {
    let read_dir = std::fs::read_dir(dir).map_err(|e| Error::Dir {
        dir: dir.to_owned(),
        message: e.to_string(),
        hint: "create it, or point --orders / 'git config arbiter.orders' at your work orders"
            .into(),
    })?;
    let mut paths = Vec::new();
    for entry in read_dir {
        let entry = entry.map_err(|e| Error::Dir {
            dir: dir.to_owned(),
            message: e.to_string(),
            hint: "check the directory's permissions".into(),
        })?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "md") {
            // The directory entry's own type costs no system call; only a
            // symbolic link (or an unknown type) needs `is_file` to follow it.
            let is_file = match entry.file_type() {
                Ok(t) if t.is_file() => true,
                Ok(t) if t.is_dir() => false,
                _ => path.is_file(),
            };
            if is_file {
                paths.push(path);
            }
        }
    }
    paths.sort();
    // Duplicate ids are found from the names alone, before anything is read;
    // such an error still only wins over the errors of the files before it.
    let mut duplicate = None;
    let mut seen: BTreeMap<String, &Path> = BTreeMap::new();
    for (i, path) in paths.iter().enumerate() {
        let stem = file_stem(path);
        if let Some(first) = seen.get(&stem.to_ascii_lowercase()) {
            duplicate = Some((
                i,
                invalid(
                    path,
                    1,
                    format!(
                        "duplicate work-order id '{stem}' (also {})",
                        first.display()
                    ),
                    "give each work order its own file name",
                ),
            ));
            break;
        }
        seen.insert(stem.to_ascii_lowercase(), path);
    }
    let readable = duplicate.as_ref().map_or(paths.len(), |(i, _)| *i);
    let mut texts = Vec::with_capacity(readable);
    let mut list = Vec::with_capacity(readable);
    for read in read_and_parse(&paths[..readable]) {
        let (wo, text) = read?;
        texts.push((wo.path.clone(), text));
        list.push(wo);
    }
    if let Some((_, e)) = duplicate {
        return Err(e);
    }
    Orders::from_list(dir.to_owned(), list, &texts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<WorkOrder, Error> {
        parse("wo-01", Path::new("work-orders/wo-01.md"), text)
    }

    #[test]
    fn parses_all_sections() {
        let wo = p("# Login form\n\n## Depends on\n- wo-00\n\n## Files to touch\n- src/ui/login/**\n- `tests/login.rs`\n\n## Task\nBuild it.\n\n## Notes\nmore\n")
            .expect("valid");
        assert_eq!(wo.title, "Login form");
        assert_eq!(wo.deps, ["wo-00"]);
        assert_eq!(wo.file_strings(), ["src/ui/login/**", "tests/login.rs"]);
        assert_eq!(wo.task, "Build it.\n\n## Notes\nmore");
    }

    #[test]
    fn a_byte_order_mark_before_the_title_is_ignored() {
        let wo = p("\u{feff}# Login form\n## Files to touch\n- src/a.rs\n").expect("valid");
        assert_eq!(wo.title, "Login form");
        assert_eq!(wo.file_strings(), ["src/a.rs"]);
        // Only at the very start: elsewhere it is text like any other.
        let err = p("\u{feff}\u{feff}# T\n").unwrap_err().to_string();
        assert!(err.contains(":1: no title"), "{err}");
    }

    #[test]
    fn headings_in_fences_are_text() {
        let wo = p("# T\n## Task\n```\n## Files to touch\n- x\n```\n").expect("valid");
        assert!(wo.files.is_empty());
        assert!(wo.task.contains("- x"));
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("no title here\n", 1, "no title"),
            (
                "# T\n## Files to touch\n- /etc/passwd\n",
                3,
                "absolute path",
            ),
            ("# T\n## Files to touch\n- a/../b\n", 3, "'..'"),
            ("# T\n## Files to touch\n- .git/hooks/x\n", 3, "'.git'"),
            ("# T\n## Files to touch\n-\n", 3, "empty entry"),
            ("# T\n## Files to touch\n- src/[x\n", 3, "invalid glob"),
            (
                "# T\n## Files to touch\nsrc/a.rs\n",
                3,
                "expected a '- ' bullet",
            ),
            ("# T\n## Depends on\n- Bad_Id\n", 3, "must match"),
            ("# T\n## Depends on\n- wo-01\n", 3, "depends on itself"),
            ("# T\n## Task\nx\n## Task\n", 4, "appears twice"),
        ];
        for (text, want_line, want_msg) in cases {
            match p(text) {
                Err(Error::Invalid { line, message, .. }) => {
                    assert_eq!(line, want_line, "{text:?}: {message}");
                    assert!(message.contains(want_msg), "{text:?}: {message}");
                }
                other => panic!("{text:?}: expected an error, got {other:?}"),
            }
        }
    }

    #[test]
    fn id_rules() {
        for ok in ["a", "wo-01", "0.1_x", &"a".repeat(64)] {
            assert!(check_id(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "A",
            "-a",
            ".a",
            "a/b",
            "a b",
            "a..b",
            "a.lock",
            "a.",
            &"a".repeat(65),
        ] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn load_reports_the_first_error_in_file_order() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        // Enough files for several reader threads.
        for i in 0..1200 {
            write(
                &format!("w{i:04}.md"),
                "# T\n## Files to touch\n- src/a/**\n",
            );
        }
        let ok = load(dir.path()).expect("valid");
        assert_eq!(ok.len(), 1200);
        write("w0999.md", "# T\n## Files to touch\n- src/[x\n");
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("w0999.md:3: declared entry"), "{err}");
        write(
            "w0900.md",
            "# T\n## Depends on\n- nowhere\n## Files to touch\n- src/[x\n",
        );
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("w0900.md:5: declared entry"), "{err}");
        write("w0100.md", "no title\n");
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("w0100.md:1: no title"), "{err}");
        // Upper case sorts first; the id is refused before any later file counts.
        write("W1000.md", "# T\n");
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("W1000.md:1: id 'W1000' must match"), "{err}");
    }

    fn wo(id: &str, deps: &[&str]) -> WorkOrder {
        WorkOrder {
            id: id.into(),
            title: id.into(),
            path: PathBuf::from(format!("{id}.md")),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            files: vec![],
            task: String::new(),
        }
    }

    #[test]
    fn cycles_and_unknown_deps() {
        let err = Orders::from_list(
            "w".into(),
            vec![wo("a", &["b"]), wo("b", &["c"]), wo("c", &["a"])],
            &[],
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "dependency cycle: a -> b -> c -> a");
        let err = Orders::from_list("w".into(), vec![wo("a", &["zz"])], &[]).unwrap_err();
        assert!(err.to_string().contains("unknown dependency 'zz'"), "{err}");
        let ok = Orders::from_list(
            "w".into(),
            vec![wo("b", &["a"]), wo("a", &[]), wo("c", &["a", "b"])],
            &[],
        )
        .expect("a DAG");
        assert_eq!(
            ok.list.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
    }
}

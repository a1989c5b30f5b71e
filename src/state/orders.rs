//! Work orders: `<orders-dir>/<id>.md` files, parsed and validated as a set.
//!
//! Format (README "Work orders"): the title is the first level-1 heading;
//! `## Depends on` and `## Files to touch` hold bullet lists; `## Task` is the
//! free text handed to the builder. Other `##` headings are text (kept in the
//! task text after `## Task`), unless they look like a misspelt section name
//! (`## Dependencies`, `## Files to tuoch`): those are errors, since ignoring
//! them would drop a dependency or a declared file without a word. Headings
//! inside fenced code blocks are ignored. A UTF-8 byte order mark at the
//! start of the file is skipped.
//!
//! Without `## Files to touch` an order may touch anything; a section with
//! no entries is an error, as it is more likely a mistake than a wish.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::state::read_cache;
use crate::state::scope::Entry;

/// One parsed, validated work order.
#[derive(Debug, Clone)]
pub struct WorkOrder {
    pub id: String,
    pub title: String,
    pub path: PathBuf,
    pub deps: Vec<String>,
    /// Empty when the order has no `## Files to touch`: it may touch anything.
    pub files: Vec<Entry>,
    pub task: String,
    /// `## Allow empty`: a build that exits 0 and changes nothing is done,
    /// not a `no_change` failure.
    pub allow_empty: bool,
    pub lines: Lines,
}

/// Where a work order declared things (1-based lines), for messages.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    /// The line of each of `deps`, in the same order.
    pub deps: Vec<usize>,
    /// The line of each of `files`, in the same order.
    pub files: Vec<usize>,
}

impl WorkOrder {
    /// The declared entries as text, in file order.
    pub fn file_strings(&self) -> Vec<String> {
        self.files.iter().map(|e| e.as_str().to_owned()).collect()
    }

    /// Does the order declare no files, and so may touch anything (and runs alone)?
    pub fn touches_anything(&self) -> bool {
        self.files.is_empty()
    }

    /// Does this WO's own declared set cover `path`?
    pub fn covers(&self, path: &str) -> bool {
        self.touches_anything() || self.files.iter().any(|e| e.covers(path))
    }

    /// The line of dependency `dep`, or 1 when it is not one.
    pub fn dep_line(&self, dep: &str) -> usize {
        self.deps
            .iter()
            .position(|d| d == dep)
            .and_then(|i| self.lines.deps.get(i).copied())
            .unwrap_or(1)
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
    /// `file` and `line` name the first order's dependency on the second.
    #[error("dependency cycle: {}", cycle.join(" -> "))]
    Cycle {
        cycle: Vec<String>,
        file: PathBuf,
        line: usize,
    },
    #[error("work-order directory {}: {message}", dir.display())]
    Dir {
        dir: PathBuf,
        message: String,
        hint: String,
    },
}

impl Error {
    /// The file and line the error is about (a directory error has no line).
    pub fn location(&self) -> (&Path, Option<usize>) {
        match self {
            Error::Invalid { file, line, .. } | Error::Cycle { file, line, .. } => {
                (file, Some(*line))
            }
            Error::Dir { dir, .. } => (dir, None),
        }
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> String {
        match self {
            Error::Invalid { message, .. } | Error::Dir { message, .. } => message.clone(),
            Error::Cycle { .. } => self.to_string(),
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Invalid { hint, .. } | Error::Dir { hint, .. } => Some(hint.clone()),
            Error::Cycle { .. } => Some(
                "remove one of these 'Depends on' entries so the dependencies form no loop".into(),
            ),
        }
    }
}

impl crate::sys::error::Diagnosis for Error {
    fn exit_code(&self) -> crate::sys::error::ExitCode {
        crate::sys::error::ExitCode::Usage
    }

    fn hint(&self) -> Option<String> {
        Error::hint(self)
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
    /// `## Allow empty`: a build that changes nothing is a success; what
    /// follows the heading (why) is for people.
    AllowEmpty,
    Other,
}

/// The sections, by the name written after `## ` (compared case-insensitively).
const SECTIONS: [(&str, Section); 4] = [
    ("Depends on", Section::Deps),
    ("Files to touch", Section::Files),
    ("Task", Section::Task),
    ("Allow empty", Section::AllowEmpty),
];

/// Names people write for a section, with the section they mean: a heading
/// equal or close to one of these is a misspelt section, not task text.
const NEAR_NAMES: &[(&str, &str)] = &[
    ("depends on", "Depends on"),
    ("dependencies", "Depends on"),
    ("dependency", "Depends on"),
    ("depends", "Depends on"),
    ("deps", "Depends on"),
    ("prerequisites", "Depends on"),
    ("files to touch", "Files to touch"),
    ("files", "Files to touch"),
    ("files to change", "Files to touch"),
    ("files to edit", "Files to touch"),
    ("files to modify", "Files to touch"),
    ("declared files", "Files to touch"),
    ("task", "Task"),
    ("allow empty", "Allow empty"),
    ("allow no change", "Allow empty"),
    ("allow empty change", "Allow empty"),
];

/// The section `name` (a `##` heading's text, lowercase) was probably meant
/// to be. Damerau-Levenshtein distance at most 2, but 1 for names shorter
/// than 8 characters: `## Test`, `## Docs` or `## Steps` are ordinary task
/// headings two edits away from `Task` or `Deps`.
fn meant_section(name: &str) -> Option<&'static str> {
    NEAR_NAMES.iter().find_map(|&(near, section)| {
        let allowed = if near.chars().count() < 8 { 1 } else { 2 };
        (strsim::damerau_levenshtein(name, near) <= allowed).then_some(section)
    })
}

/// The id `arg` names among `known`: itself, else the stem of a path or
/// file name given for it (`work-orders/a.md`, `./a.md`, `a.md`).
pub fn resolve_id<'a>(arg: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let known: Vec<&str> = known.into_iter().collect();
    if known.contains(&arg) {
        return Some(arg.to_owned());
    }
    let name = arg.rsplit(['/', '\\']).next().unwrap_or(arg);
    let stem = name.strip_suffix(".md").unwrap_or(name);
    known.contains(&stem).then(|| stem.to_owned())
}

/// The ids among `known` closest to the unknown `arg` (Damerau-Levenshtein
/// distance at most a third of its length, at least 1, at most 3), nearest
/// first: what "did you mean" offers.
pub fn closest_ids<'a>(arg: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let name = arg.rsplit(['/', '\\']).next().unwrap_or(arg);
    let stem = name
        .strip_suffix(".md")
        .unwrap_or(name)
        .to_ascii_lowercase();
    let allowed = (stem.chars().count() / 3).clamp(1, 3);
    let mut near: Vec<(usize, &str)> = known
        .into_iter()
        .map(|id| (strsim::damerau_levenshtein(&stem, id), id))
        .filter(|(distance, _)| *distance <= allowed)
        .collect();
    near.sort();
    near.into_iter()
        .take(3)
        .map(|(_, id)| id.to_owned())
        .collect()
}

/// Parse one work-order file. `id` comes from the file stem. On error, the
/// first problem of the file.
pub fn parse(id: &str, path: &Path, text: &str) -> Result<WorkOrder, Error> {
    parse_all(id, path, text)
        .map_err(|errors| errors.into_iter().next().expect("an Err holds an error"))
}

/// Parse one work-order file, reporting every problem found in it, in the
/// order found (a bad id ends the search: the file may not be an order at all).
fn parse_all(id: &str, path: &Path, text: &str) -> Result<WorkOrder, Vec<Error>> {
    if let Err(message) = check_id(id) {
        return Err(vec![invalid(
            path,
            1,
            message,
            "rename the file to a lowercase id such as 'wo-01.md', \
             or start its name with '_' if it is not a work order",
        )]);
    }
    let mut parser = Parser::new(path);
    // Editors on Windows may save UTF-8 with a byte order mark; it is not
    // part of the text, and left in place it would hide the `# Title`.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, line) in text.lines().enumerate() {
        parser.line(index + 1, line);
    }
    parser.finish(id)
}

/// What a work-order file said so far, line by line, and what was wrong.
struct Parser<'a> {
    path: &'a Path,
    errors: Vec<Error>,
    title: Option<String>,
    titled: bool,
    deps: Vec<(String, usize)>,
    files: Vec<Entry>,
    declared: std::collections::HashSet<String>,
    file_lines: Vec<usize>,
    files_heading: Option<usize>,
    /// Lines written in `## Files to touch`, accepted or not.
    file_items: usize,
    task: String,
    section: Section,
    in_fence: bool,
    seen: [bool; SECTIONS.len()],
}

impl<'a> Parser<'a> {
    fn new(path: &'a Path) -> Self {
        Parser {
            path,
            errors: Vec::new(),
            title: None,
            titled: false,
            deps: Vec::new(),
            files: Vec::new(),
            declared: Default::default(),
            file_lines: Vec::new(),
            files_heading: None,
            file_items: 0,
            task: String::new(),
            section: Section::Preamble,
            in_fence: false,
            seen: [false; SECTIONS.len()],
        }
    }

    fn error(&mut self, line: usize, message: impl Into<String>, hint: impl Into<String>) {
        self.errors.push(invalid(self.path, line, message, hint));
    }

    fn line(&mut self, lineno: usize, line: &str) {
        let trimmed = line.trim_end();
        if trimmed.trim_start().starts_with("```") || trimmed.trim_start().starts_with("~~~") {
            self.in_fence = !self.in_fence;
        }
        if !self.in_fence && self.heading(lineno, trimmed) {
            return;
        }
        match self.section {
            Section::Preamble | Section::Other | Section::AllowEmpty => {}
            Section::Task => {
                self.task.push_str(line);
                self.task.push('\n');
            }
            Section::Deps | Section::Files => self.list_line(lineno, trimmed.trim_start()),
        }
    }

    /// The title or a section heading; true when the line is one.
    fn heading(&mut self, lineno: usize, trimmed: &str) -> bool {
        if let Some(heading) = trimmed.strip_prefix("# ") {
            if self.titled {
                return false;
            }
            self.titled = true;
            self.title_line(lineno, heading.trim());
            return true;
        }
        let Some(heading) = trimmed.strip_prefix("## ") else {
            return false;
        };
        let heading = heading.trim();
        let name = heading.to_ascii_lowercase();
        let known = SECTIONS
            .iter()
            .position(|(known, _)| known.eq_ignore_ascii_case(&name));
        if let Some(slot) = known {
            if self.seen[slot] {
                self.error(
                    lineno,
                    format!("section '## {heading}' appears twice"),
                    "merge the two sections into one",
                );
            }
            self.seen[slot] = true;
            self.section = SECTIONS[slot].1;
            if self.section == Section::Files {
                self.files_heading = Some(lineno);
            }
            return true;
        }
        if let Some(meant) = meant_section(&name) {
            self.error(
                lineno,
                format!("unknown section '## {heading}': did you mean '## {meant}'?"),
                format!("write '## {meant}', or reword the heading if it is part of the task text"),
            );
        }
        if self.section != Section::Task {
            self.section = Section::Other;
        }
        false
    }

    fn title_line(&mut self, lineno: usize, heading: &str) {
        if heading.is_empty() {
            self.error(lineno, "empty title", "write the title after '# '");
        } else if let Some(c) = heading.chars().find(|c| c.is_control()) {
            // A NUL cannot go into a commit message; an escape
            // sequence printed raw would drive the reader's terminal.
            self.error(
                lineno,
                format!("control character {} in the title", c.escape_unicode()),
                "write the title as plain text",
            );
        } else {
            self.title = Some(heading.to_owned());
        }
    }

    /// A line of `## Depends on` or `## Files to touch`: one bullet, one entry.
    fn list_line(&mut self, lineno: usize, content: &str) {
        if content.is_empty() || (content.starts_with("<!--") && content.ends_with("-->")) {
            return;
        }
        if self.section == Section::Files {
            self.file_items += 1;
        }
        let Some(item) = content
            .strip_prefix("- ")
            .or_else(|| content.strip_prefix("* "))
        else {
            if content == "-" || content == "*" {
                self.error(
                    lineno,
                    "empty entry",
                    "remove the empty bullet or write a path after it",
                );
            } else {
                let hint = if !self.seen[2] && content.contains(' ') {
                    // Prose after the list: the task, its heading forgotten.
                    "if this is the task text, put '## Task' on a line before it; \
                     otherwise write one entry per line as '- <entry>'"
                } else {
                    "write one entry per line as '- <entry>'"
                };
                self.error(
                    lineno,
                    format!("expected a '- ' bullet, found '{content}'"),
                    hint,
                );
            }
            return;
        };
        let item = strip_backticks(item.trim());
        if self.section == Section::Deps {
            if let Err(message) = check_id(item) {
                self.error(
                    lineno,
                    format!("dependency {message}"),
                    "name the work order by its file stem, e.g. '- wo-01'",
                );
            } else if !self.deps.iter().any(|(d, _)| d == item) {
                self.deps.push((item.to_owned(), lineno));
            }
            return;
        }
        match Entry::parse(item) {
            Err(e) => self.error(
                lineno,
                format!("declared entry '{item}': {e}"),
                "declare repo-relative paths or globs such as 'src/ui/**'",
            ),
            Ok(entry) if self.declared.insert(entry.as_str().to_owned()) => {
                self.files.push(entry);
                self.file_lines.push(lineno);
            }
            Ok(_) => {}
        }
    }

    /// The work order `id`, or every problem found.
    fn finish(mut self, id: &str) -> Result<WorkOrder, Vec<Error>> {
        if !self.titled {
            self.error(1, "no title", "start the file with a '# Title' line");
        }
        if let Some(heading) = self.files_heading.filter(|_| self.file_items == 0) {
            self.error(
                heading,
                "'## Files to touch' declares no files",
                "declare an entry, or remove the section to let the order touch anything",
            );
        }
        if let Some(line) = self.deps.iter().find(|(d, _)| d == id).map(|(_, l)| *l) {
            self.error(
                line,
                format!("work order '{id}' depends on itself"),
                "remove the entry",
            );
        }
        let Some(title) = self.title.filter(|_| self.errors.is_empty()) else {
            return Err(self.errors);
        };
        let (deps, dep_lines) = self.deps.into_iter().unzip();
        Ok(WorkOrder {
            id: id.to_owned(),
            title,
            path: self.path.to_owned(),
            deps,
            files: self.files,
            task: self.task.trim().to_owned(),
            allow_empty: self.seen[3],
            lines: Lines {
                deps: dep_lines,
                files: self.file_lines,
            },
        })
    }
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

    /// The id `arg` names: itself when known, else the id of an order file
    /// it names as a path or a file name (`work-orders/a.md`, `a.md`).
    pub fn id_of(&self, arg: &str) -> Option<String> {
        resolve_id(arg, self.list.iter().map(|wo| wo.id.as_str()))
    }

    /// Build from parsed orders, checking unknown dependencies and cycles.
    pub fn from_list(dir: PathBuf, list: Vec<WorkOrder>) -> Result<Orders, Error> {
        let orders = Orders::unchecked(dir, list);
        match orders
            .dependency_errors(&|_| false, true)
            .into_iter()
            .next()
        {
            Some(e) => Err(e),
            None => Ok(orders),
        }
    }

    /// Sorted and indexed, dependencies not checked.
    fn unchecked(dir: PathBuf, mut list: Vec<WorkOrder>) -> Orders {
        list.sort_by(|a, b| a.id.cmp(&b.id));
        let index = list
            .iter()
            .enumerate()
            .map(|(i, wo)| (wo.id.clone(), i))
            .collect();
        Orders { dir, list, index }
    }

    /// Unknown dependencies, in id and file order, then dependency cycles. A
    /// dependency on an id `exists` knows (an order that failed to load) is
    /// not unknown, but cannot be part of a cycle either. With `first_only`,
    /// at most the first error.
    fn dependency_errors(&self, exists: &dyn Fn(&str) -> bool, first_only: bool) -> Vec<Error> {
        let mut errors = Vec::new();
        for wo in &self.list {
            for (i, dep) in wo.deps.iter().enumerate() {
                if !self.index.contains_key(dep) && !exists(dep) {
                    errors.push(invalid(
                        &wo.path,
                        wo.lines.deps.get(i).copied().unwrap_or(1),
                        format!("unknown dependency '{dep}'"),
                        match closest_ids(dep, self.list.iter().map(|w| w.id.as_str())).first() {
                            Some(near) => format!(
                                "did you mean '{near}'? Otherwise create {}/{dep}.md or remove the entry",
                                self.dir.display()
                            ),
                            None => format!(
                                "create {}/{dep}.md or remove the entry",
                                self.dir.display()
                            ),
                        },
                    ));
                    if first_only {
                        return errors;
                    }
                }
            }
        }
        for cycle in self.find_cycles(first_only) {
            let first = &self.list[self.index[&cycle[0]]];
            errors.push(Error::Cycle {
                file: first.path.clone(),
                line: first.dep_line(&cycle[1]),
                cycle,
            });
        }
        errors
    }

    /// Dependency cycles in id order, as `a -> b -> a`: one for each
    /// dependency that closes a loop in a depth-first walk, so every order
    /// on a loop is in at least one of them. With `first_only`, the first.
    fn find_cycles(&self, first_only: bool) -> Vec<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Active,
            Done,
        }
        let mut cycles = Vec::new();
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
                    let dep = self.index.get(&deps[*next]).copied();
                    *next += 1;
                    let Some(dep) = dep else {
                        continue;
                    };
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
                            cycles.push(cycle);
                            if first_only {
                                return cycles;
                            }
                        }
                        Mark::Done => {}
                    }
                } else {
                    marks[node] = Mark::Done;
                    stack.pop();
                }
            }
        }
        cycles
    }
}

fn file_stem(path: &Path) -> &str {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
}

/// Is `path` (a file of the orders directory) a work order? Every `*.md`
/// but `README.md` (any case) and names starting with `_` or `.`: the
/// directory may hold its own notes, templates and editors' files.
fn is_order_file(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.extension().is_some_and(|e| e == "md")
        && !name.starts_with(['_', '.'])
        && !file_stem(path).eq_ignore_ascii_case("readme")
}

/// Files in the orders directory `dir` that are not read as work orders
/// although nothing marks them as not being one (`notes.txt`, `a.MD`,
/// `b.markdown`): said, since a misnamed order is otherwise silently
/// never run. Hidden files, `_`-prefixed ones and a README are not.
pub fn stray_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(read_dir) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut stray: Vec<PathBuf> = read_dir
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|path| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            !is_order_file(path)
                && !name.starts_with(['_', '.'])
                && !file_stem(path).eq_ignore_ascii_case("readme")
        })
        .collect();
    stray.sort();
    stray
}

/// Fewer files than this per thread are not worth a thread.
const MIN_FILES_PER_READER: usize = 256;

/// Read and parse `paths` on a few threads, in the order of `paths`. With
/// `first_only`, the results end at the first file with an error (the first
/// in that order), which holds that error only; otherwise every file is read
/// and each failed one holds all of its errors. With `cache`, a file whose
/// stamp is the one it had when an earlier process read it is not read
/// again, and the cache is written again when many were.
fn read_and_parse(
    paths: &[PathBuf],
    first_only: bool,
    cache: Option<&read_cache::Files>,
) -> Vec<Result<WorkOrder, Vec<Error>>> {
    let read_at = std::time::SystemTime::now();
    let cannot_read = |path: &Path, e: std::io::Error| {
        vec![invalid(
            path,
            1,
            format!("cannot read: {e}"),
            "work orders must be readable UTF-8 Markdown",
        )]
    };
    // The text of `path` and its stamp before it was read, and whether the
    // cache held it.
    type Text<'c> = std::borrow::Cow<'c, str>;
    let text_of = |path: &Path| -> Result<(Text<'_>, Option<read_cache::Stamp>), Vec<Error>> {
        let Some(cache) = cache else {
            let text = std::fs::read_to_string(path).map_err(|e| cannot_read(path, e))?;
            return Ok((Text::Owned(text), None));
        };
        let stamp = std::fs::metadata(path)
            .map(|meta| read_cache::Stamp::of(&meta))
            .map_err(|e| cannot_read(path, e))?;
        if let Some(text) = cache.get(path, &stamp) {
            return Ok((Text::Borrowed(text), Some(stamp)));
        }
        let text = std::fs::read_to_string(path).map_err(|e| cannot_read(path, e))?;
        Ok((Text::Owned(text), Some(stamp)))
    };
    let read = |paths: &[PathBuf]| {
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            let result = text_of(path).and_then(|(text, stamp)| {
                let order = parse_all(file_stem(path), path, &text)?;
                Ok((order, stamp.map(|stamp| (stamp, text))))
            });
            let failed = result.is_err();
            out.push(result);
            if failed && first_only {
                break;
            }
        }
        out
    };
    let parts = crate::sys::parallel::read_in_chunks(paths, MIN_FILES_PER_READER, read);
    let mut out = Vec::with_capacity(paths.len());
    let mut texts = Vec::new();
    let mut misses = 0;
    for part in parts {
        let failed = part.last().is_some_and(Result::is_err);
        for result in part {
            out.push(result.map(|(order, read)| {
                if let Some((stamp, text)) = read {
                    misses += usize::from(matches!(text, std::borrow::Cow::Owned(_)));
                    texts.push((order.path.clone(), stamp, text));
                }
                order
            }));
        }
        if failed && first_only {
            break;
        }
    }
    if let Some(cache) = cache {
        // Only a read of every file knows which are current.
        if misses >= CACHE_STALE && out.len() == paths.len() && out.iter().all(Result::is_ok) {
            cache.save(
                texts
                    .iter()
                    .map(|(path, stamp, text)| (path.as_path(), *stamp, text.as_ref())),
                read_at,
            );
        }
    }
    out
}

/// A cache that missed this many work orders is written again.
const CACHE_STALE: usize = 32;

/// The work-order files of `dir` ([`is_order_file`]), sorted. A missing
/// directory is an error: the user pointed us somewhere that holds no work orders.
fn order_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
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
        if is_order_file(&path) {
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
    Ok(paths)
}

/// The files of (sorted) `paths` whose id, ignoring case, an earlier file
/// already has: their index and the error. With `first_only`, the first.
fn duplicates(paths: &[PathBuf], first_only: bool) -> Vec<(usize, Error)> {
    let mut found = Vec::new();
    let mut seen: BTreeMap<String, &Path> = BTreeMap::new();
    for (i, path) in paths.iter().enumerate() {
        let stem = file_stem(path);
        if let Some(first) = seen.get(&stem.to_ascii_lowercase()) {
            found.push((
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
            if first_only {
                break;
            }
        } else {
            seen.insert(stem.to_ascii_lowercase(), path);
        }
    }
    found
}

/// Read and validate every work order in `dir`; the first error ends it.
pub fn load(dir: &Path) -> Result<Orders, Error> {
    load_through(dir, None)
}

/// [`load`], reading only the files that changed since `cache` ([`read_cache::Files`]) was written.
pub fn load_cached(dir: &Path, cache: &Path) -> Result<Orders, Error> {
    load_through(dir, Some(&read_cache::Files::load(cache.to_owned())))
}

fn load_through(dir: &Path, cache: Option<&read_cache::Files>) -> Result<Orders, Error> {
    let paths = order_files(dir)?;
    // Duplicate ids are found from the names alone, before anything is read;
    // such an error still only wins over the errors of the files before it.
    let duplicate = duplicates(&paths, true).into_iter().next();
    let readable = duplicate.as_ref().map_or(paths.len(), |(i, _)| *i);
    let mut list = Vec::with_capacity(readable);
    for read in read_and_parse(&paths[..readable], true, cache) {
        list.push(
            read.map_err(|errors| errors.into_iter().next().expect("an Err holds an error"))?,
        );
    }
    if let Some((_, e)) = duplicate {
        return Err(e);
    }
    Orders::from_list(dir.to_owned(), list)
}

/// Every problem of the work orders in a directory, and the orders that are
/// fine (for `git arbiter lint`).
#[derive(Debug)]
pub struct Checked {
    /// The orders that parsed, dependencies unchecked.
    pub orders: Orders,
    /// Every error found, file by file, then unknown dependencies and cycles.
    pub errors: Vec<Error>,
}

/// Like [`load`], but carry on past errors to report all of them. Only a
/// directory that cannot be read is an `Err`.
pub fn check(dir: &Path) -> Result<Checked, Error> {
    let paths = order_files(dir)?;
    let duplicates = duplicates(&paths, false);
    let mut errors = Vec::new();
    let mut readable = Vec::with_capacity(paths.len());
    let mut next_duplicate = duplicates.into_iter().peekable();
    for (i, path) in paths.iter().enumerate() {
        match next_duplicate.next_if(|(d, _)| *d == i) {
            Some((_, e)) => errors.push(e),
            None => readable.push(path.clone()),
        }
    }
    let mut list = Vec::with_capacity(readable.len());
    for read in read_and_parse(&readable, false, None) {
        match read {
            Ok(wo) => list.push(wo),
            Err(e) => errors.extend(e),
        }
    }
    let orders = Orders::unchecked(dir.to_owned(), list);
    let exists = |id: &str| paths.iter().any(|p| file_stem(p) == id);
    errors.extend(orders.dependency_errors(&exists, false));
    Ok(Checked { orders, errors })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Work orders read through the cache are the files on disk: an edit
    /// that keeps the size is read, a file written just before the read is
    /// not entered, and a garbled cache is no cache.
    #[test]
    fn orders_read_through_the_cache_are_the_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let orders = dir.path().join("work-orders");
        std::fs::create_dir(&orders).expect("mkdir");
        let write = |i: usize, title: &str| {
            std::fs::write(
                orders.join(format!("wo-{i:02}.md")),
                format!("# {title}\n## Files to touch\n- f/{i}.txt\n"),
            )
            .expect("write");
        };
        for i in 0..CACHE_STALE + 1 {
            write(i, "Old");
        }
        let cache = dir.path().join("orders.cache");
        let titles = || -> Vec<String> {
            load_cached(&orders, &cache)
                .expect("load")
                .iter()
                .map(|wo| wo.title.clone())
                .collect()
        };
        assert!(titles().iter().all(|t| t == "Old"));
        let stamp = |i: usize| {
            read_cache::Stamp::of(
                &std::fs::metadata(orders.join(format!("wo-{i:02}.md"))).expect("stat"),
            )
        };
        let cached = |i: usize| {
            read_cache::Files::load(cache.clone())
                .get(&orders.join(format!("wo-{i:02}.md")), &stamp(i))
                .map(str::to_owned)
        };
        assert_eq!(cached(0), None, "files written just now are not entered");

        // A change time cannot be set back: wait for the files to settle.
        std::thread::sleep(read_cache::SETTLED + std::time::Duration::from_millis(200));
        assert!(titles().iter().all(|t| t == "Old"));
        assert!(cached(0).is_some_and(|t| t.starts_with("# Old")));

        write(0, "New");
        assert_eq!(titles()[0], "New", "same size, new stamp: read again");
        assert!(titles()[1..].iter().all(|t| t == "Old"));

        std::fs::write(&cache, b"git-arbiter read cache 1\n\x01").expect("write");
        assert_eq!(titles()[0], "New");
    }

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
    fn without_files_to_touch_an_order_touches_anything() {
        let wo = p("# T\n## Task\nRename things.\n").expect("valid");
        assert!(wo.touches_anything());
        assert!(wo.covers("any/path.rs"));
        let wo = p("# T\n## Files to touch\n- src/a.rs\n").expect("valid");
        assert!(!wo.touches_anything());
        assert!(!wo.covers("any/path.rs"));
    }

    #[test]
    fn an_empty_files_to_touch_is_an_error() {
        for text in [
            "# T\n## Files to touch\n\n## Task\nx\n",
            "# T\n## Files to touch\n<!-- none yet -->\n",
        ] {
            match p(text) {
                Err(Error::Invalid {
                    line,
                    message,
                    hint,
                    ..
                }) => {
                    assert_eq!(line, 2, "{text:?}");
                    assert_eq!(message, "'## Files to touch' declares no files");
                    assert_eq!(
                        hint,
                        "declare an entry, or remove the section to let the order touch anything"
                    );
                }
                other => panic!("{text:?}: expected an error, got {other:?}"),
            }
        }
        // Entries that are refused are reported as such, not as an empty section.
        let err = parse_all(
            "wo-01",
            Path::new("wo-01.md"),
            "# T\n## Files to touch\n- /a\n",
        )
        .unwrap_err();
        assert_eq!(err.len(), 1, "{err:?}");
    }

    #[test]
    fn misspelt_sections_are_errors() {
        let cases = [
            ("## Files to tuoch", "Files to touch"),
            ("## files to touch:", "Files to touch"),
            ("## File to touch", "Files to touch"),
            ("## Files", "Files to touch"),
            ("## Files to edit", "Files to touch"),
            ("## Dependencies", "Depends on"),
            ("## Depends", "Depends on"),
            ("## Deps", "Depends on"),
            ("## Depend on", "Depends on"),
            ("## Dependson", "Depends on"),
            ("## Tasks", "Task"),
            ("## Tsak", "Task"),
        ];
        for (heading, meant) in cases {
            let text = format!("# T\n## Files to touch\n- a\n{heading}\n- wo-02\n");
            match p(&text) {
                Err(Error::Invalid { line, message, .. }) => {
                    assert_eq!(line, 4, "{heading}");
                    assert!(
                        message.ends_with(&format!("did you mean '## {meant}'?")),
                        "{heading}: {message}"
                    );
                }
                other => panic!("{heading}: expected an error, got {other:?}"),
            }
        }
        // Headings further from every section name are task text.
        for heading in [
            "## Notes",
            "## Test",
            "## Tests",
            "## Docs",
            "## Steps",
            "## Context",
            "## Details",
            "## Required reading",
        ] {
            let text = format!("# T\n## Files to touch\n- a\n## Task\nx\n{heading}\ny\n");
            let wo = p(&text).unwrap_or_else(|e| panic!("{heading}: {e}"));
            assert!(wo.task.contains(heading), "{heading}: {:?}", wo.task);
        }
    }

    #[test]
    fn parse_all_reports_every_problem_of_a_file() {
        let text = "# T\n## Dependencies\n- wo-02\n## Files to touch\n- /abs\n- ok.rs\n- a/../b\n## Task\n## Task\n";
        let lines: Vec<usize> = parse_all("wo-01", Path::new("wo-01.md"), text)
            .unwrap_err()
            .iter()
            .map(|e| e.location().1.unwrap_or(0))
            .collect();
        assert_eq!(lines, [2, 5, 7, 9]);
    }

    #[test]
    fn lines_are_kept_for_messages() {
        let wo = p("# T\n## Depends on\n- wo-00\n\n- wo-02\n## Files to touch\n- a\n- b/*\n")
            .expect("valid");
        assert_eq!(wo.lines.deps, [3, 5]);
        assert_eq!(wo.lines.files, [7, 8]);
        assert_eq!(wo.dep_line("wo-02"), 5);
    }

    #[test]
    fn readmes_and_underscore_or_dot_files_are_not_orders() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        write("wo-01.md", "# One\n## Files to touch\n- a\n");
        for name in [
            "README.md",
            "readme.md",
            "_template.md",
            ".draft.md",
            "notes.txt",
        ] {
            write(name, "not an order\n");
        }
        let orders = load(dir.path()).expect("only wo-01 is an order");
        assert_eq!(orders.len(), 1);
        // Any other name is still an order, and a bad one is an error.
        write("Notes.md", "# N\n");
        let err = load(dir.path()).unwrap_err();
        assert!(
            err.to_string()
                .contains("Notes.md:1: id 'Notes' must match"),
            "{err}"
        );
        assert!(
            err.hint()
                .is_some_and(|h| h.contains("start its name with '_'")),
            "{:?}",
            err.hint()
        );
    }

    #[test]
    fn check_reports_every_error_of_every_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        write("a.md", "# A\n## Depends on\n- b\n- gone\n");
        write("b.md", "# B\n## Depends on\n- a\n");
        write("c.md", "# C\n## Files to tuoch\n- x\n## Files to touch\n");
        // Broken, but it exists: depending on it is not an unknown dependency.
        write("e.md", "# E\n## Depends on\n- c\n");
        write("F.md", "# F\n");
        write("f.md", "# F again\n");
        let checked = check(dir.path()).expect("readable");
        let got: Vec<String> = checked
            .errors
            .iter()
            .map(|e| {
                let (path, line) = e.location();
                let name = path.file_name().expect("file").to_string_lossy();
                format!("{name}:{}: {}", line.unwrap_or(0), e.message())
            })
            .collect();
        let first_f = dir.path().join("F.md");
        assert_eq!(
            got,
            [
                format!(
                    "f.md:1: duplicate work-order id 'f' (also {})",
                    first_f.display()
                ),
                "F.md:1: id 'F' must match [a-z0-9][a-z0-9._-]* (lowercase letters, digits, '.', '_', '-')".into(),
                "c.md:2: unknown section '## Files to tuoch': did you mean '## Files to touch'?".into(),
                "c.md:4: '## Files to touch' declares no files".into(),
                "a.md:4: unknown dependency 'gone'".into(),
                "a.md:3: dependency cycle: a -> b -> a".into(),
            ]
        );
        let ids: Vec<&str> = checked.orders.iter().map(|wo| wo.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "e"]);
        // `load` stops at the first error in file order.
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("F.md:1: id 'F'"), "{err}");
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
            allow_empty: false,
            lines: Default::default(),
        }
    }

    #[test]
    fn an_id_is_found_from_its_file_and_misspellings_get_the_nearest() {
        let known = ["globset-test", "globs", "other"];
        for arg in [
            "globset-test",
            "globset-test.md",
            "work-orders/globset-test.md",
            "./a/globset-test.md",
        ] {
            assert_eq!(
                resolve_id(arg, known).as_deref(),
                Some("globset-test"),
                "{arg}"
            );
        }
        assert_eq!(resolve_id("globset-tests", known), None);
        assert_eq!(resolve_id("notes.txt", known), None);
        assert_eq!(closest_ids("globset-tests", known), ["globset-test"]);
        assert_eq!(closest_ids("Globset-test.md", known), ["globset-test"]);
        assert_eq!(closest_ids("glob", known), ["globs"]);
        assert!(closest_ids("something-else", known).is_empty());
    }

    #[test]
    fn files_not_read_as_orders_are_listed_but_not_marked_ones() {
        let dir = tempfile::tempdir().expect("tmp");
        for name in [
            "a.md",
            "notes.txt",
            "b.MD",
            "_draft.md",
            ".hidden",
            "README.txt",
        ] {
            std::fs::write(dir.path().join(name), "# x\n").expect("write");
        }
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        let stray: Vec<String> = stray_files(dir.path())
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(stray, ["b.MD", "notes.txt"]);
    }

    #[test]
    fn cycles_and_unknown_deps() {
        let err = Orders::from_list(
            "w".into(),
            vec![wo("a", &["b"]), wo("b", &["c"]), wo("c", &["a"])],
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "dependency cycle: a -> b -> c -> a");
        let err = Orders::from_list("w".into(), vec![wo("a", &["zz"])]).unwrap_err();
        assert!(err.to_string().contains("unknown dependency 'zz'"), "{err}");
        let ok = Orders::from_list(
            "w".into(),
            vec![wo("b", &["a"]), wo("a", &[]), wo("c", &["a", "b"])],
        )
        .expect("a DAG");
        assert_eq!(
            ok.list.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
    }
}

//! `git arbiter lint`: every problem of the work orders at once. Errors are
//! what every command refuses to run with ([`crate::state::orders`]), all of them
//! rather than the first. Warnings point at what is legal but rarely meant:
//! an order without declared files (it only ever runs alone), a glob that
//! matches no tracked file (a typo, or a glob that matches only directories
//! and so covers nothing inside them), and a dependency on a halted order
//! (it waits until a human clears that order). `batch` lists the same
//! warnings.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use crate::run::reconcile::Row;
use crate::state::context::Context;
use crate::state::orders::{self, Orders, WorkOrder};
use crate::state::scope::Entry;
use crate::sys::error::{Diagnosis, ExitCode, Result};

/// What failed reading the repository for a lint (its findings are no errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading commit {commit}: {source}")]
    ReadCommit {
        commit: gix::ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading the tree of {commit}: {source}")]
    ReadTree {
        commit: gix::ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("listing the files of {commit}: {source}")]
    ListFiles {
        commit: gix::ObjectId,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem, at a line of a work-order file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub path: String,
    pub line: usize,
    pub severity: Severity,
    pub message: String,
    pub hint: Option<String>,
}

impl Finding {
    fn error(e: &orders::Error) -> Finding {
        let (path, line) = e.location();
        Finding {
            path: path.display().to_string(),
            line: line.unwrap_or(1),
            severity: Severity::Error,
            message: e.message(),
            hint: e.hint(),
        }
    }

    fn warning(
        wo: &WorkOrder,
        line: usize,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Finding {
        Finding {
            path: wo.path.display().to_string(),
            line,
            severity: Severity::Warning,
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// `path:line: message`, as `batch` lists its warnings.
    pub fn located(&self) -> String {
        format!("{}:{}: {}", self.path, self.line, self.message)
    }
}

/// `path:line: error|warning: message`, one line.
impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{}:{}: {severity}: {}",
            self.path, self.line, self.message
        )
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub version: u32,
    pub errors: usize,
    pub warnings: usize,
    /// By file, then line.
    pub findings: Vec<Finding>,
}

/// Lint the work orders in `dir` against the integration branch `into`
/// (see [`Context::view_tip`]). Read-only.
pub fn lint(ctx: &Context, dir: &Path, into: Option<&str>) -> Result<Report> {
    let checked = orders::check(dir)?;
    let mut findings: Vec<Finding> = checked.errors.iter().map(Finding::error).collect();
    let table = crate::run::reconcile::current(ctx, &checked.orders, into)?;
    let tip = ctx.view_tip(into)?;
    findings.extend(warnings(ctx, &checked.orders, &table.rows, tip)?);
    for path in orders::stray_files(dir) {
        findings.push(Finding {
            path: path.display().to_string(),
            line: 1,
            severity: Severity::Warning,
            message: "not read as a work order: only '.md' files are".into(),
            hint: Some(
                "rename it to '<id>.md' if it is one; start its name with '_' to keep it here unread"
                    .into(),
            ),
        });
    }
    // Stable: at one line, errors stay before warnings.
    findings.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    Ok(Report {
        version: crate::JSON_VERSION,
        errors,
        warnings: findings.len() - errors,
        findings,
    })
}

/// The warnings about `orders` (with `rows`, their reconcile table, sorted
/// by id): orders without declared files, globs that match no file tracked
/// at `tip` (not checked before the first commit, when nothing is tracked
/// yet), and dependencies on halted orders. By order id, then line: no sort
/// of the whole list, which `batch` pays for on every run.
pub fn warnings(
    ctx: &Context,
    orders: &Orders,
    rows: &[Row],
    tip: Option<gix::ObjectId>,
) -> Result<Vec<Finding>> {
    let has_globs = orders.iter().any(|wo| wo.files.iter().any(Entry::is_glob));
    let tracked = match tip {
        Some(tip) if has_globs => Some(tracked_files(ctx, tip)?),
        _ => None,
    };
    let mut halted: HashMap<&str, Vec<&str>> = HashMap::new();
    for (row, dep) in crate::run::batch::halted_dependencies(rows) {
        halted.entry(row.id.as_str()).or_default().push(dep);
    }
    // Many orders declare the same glob: look each up once.
    let mut known: HashMap<&str, Matches> = HashMap::new();
    let mut found = Vec::new();
    for wo in orders.iter() {
        let first = found.len();
        if wo.touches_anything() {
            found.push(Finding::warning(
                wo,
                1,
                format!(
                    "{} declares no files: it may touch anything, so it only runs alone",
                    wo.id
                ),
                "list what it changes under '## Files to touch' so it can run alongside other orders",
            ));
        }
        if let Some(tracked) = &tracked {
            for (i, entry) in wo.files.iter().enumerate().filter(|(_, e)| e.is_glob()) {
                let glob = entry.as_str();
                let line = wo.lines.files.get(i).copied().unwrap_or(1);
                match *known
                    .entry(glob)
                    .or_insert_with(|| glob_matches(entry, tracked))
                {
                    Matches::Files => {}
                    Matches::DirectoriesOnly => found.push(Finding::warning(
                        wo,
                        line,
                        format!(
                            "glob '{glob}' matches only directories, and a glob covers only the files it matches"
                        ),
                        format!("declare '{}' to cover everything inside them", deep(glob)),
                    )),
                    Matches::Nothing => found.push(Finding::warning(
                        wo,
                        line,
                        format!("glob '{glob}' matches no tracked file"),
                        "fine if the order creates such files; otherwise check the spelling",
                    )),
                }
            }
        }
        for dep in halted.get(wo.id.as_str()).into_iter().flatten() {
            found.push(Finding::warning(
                wo,
                wo.dep_line(dep),
                format!(
                    "{} waits on halted work order {dep}: it cannot run until '{dep}' is cleared",
                    wo.id
                ),
                format!("see why with 'git arbiter log {dep}', then 'git arbiter clear {dep}'"),
            ));
        }
        found[first..].sort_by_key(|f| f.line);
    }
    Ok(found)
}

/// What a glob matches among the tracked files.
#[derive(Clone, Copy)]
enum Matches {
    Files,
    /// Directories only, e.g. `crates/*` where every crate is a directory:
    /// such a glob covers nothing inside them.
    DirectoriesOnly,
    Nothing,
}

/// The glob that covers everything below what `glob` matches: a last `*`
/// segment becomes `**` (`crates/*` → `crates/**`), anything else gets `/**`.
fn deep(glob: &str) -> String {
    match glob.strip_suffix('*') {
        Some(dir) if dir.is_empty() || dir.ends_with('/') => format!("{dir}**"),
        _ => format!("{glob}/**"),
    }
}

/// What `entry` matches among `tracked` (sorted): only the paths below its
/// base directory can match, and they sort as one run.
fn glob_matches(entry: &Entry, tracked: &[String]) -> Matches {
    let base = entry.base();
    let below = if base.is_empty() {
        tracked
    } else {
        let dir = format!("{base}/");
        let start = tracked.partition_point(|p| p.as_str() < dir.as_str());
        let len = tracked[start..].partition_point(|p| p.starts_with(&dir));
        &tracked[start..start + len]
    };
    if below.iter().any(|path| entry.covers(path)) {
        return Matches::Files;
    }
    let matches_a_directory = below.iter().any(|path| {
        path.match_indices('/')
            .any(|(i, _)| i > base.len() && entry.covers(&path[..i]))
    });
    if matches_a_directory {
        Matches::DirectoriesOnly
    } else {
        Matches::Nothing
    }
}

/// The paths of every file (blob, symlink or submodule) in `tip`'s tree,
/// sorted. A name that is not UTF-8 can match no declared entry and is left out.
fn tracked_files(ctx: &Context, tip: gix::ObjectId) -> Result<Vec<String>> {
    let tree = ctx
        .repo
        .find_commit(tip)
        .map_err(|source| Error::ReadCommit {
            commit: tip,
            source,
        })?
        .tree()
        .map_err(|source| Error::ReadTree {
            commit: tip,
            source,
        })?;
    let entries = tree
        .traverse()
        .breadthfirst
        .files()
        .map_err(|source| Error::ListFiles {
            commit: tip,
            source,
        })?;
    let mut paths: Vec<String> = entries
        .into_iter()
        .filter(|e| !e.mode.is_tree())
        .filter_map(|e| String::from_utf8(e.filepath.into()).ok())
        .collect();
    paths.sort_unstable();
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked(paths: &[&str]) -> Vec<String> {
        let mut paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        paths.sort();
        paths
    }

    #[test]
    fn deep_globs() {
        assert_eq!(deep("crates/*"), "crates/**");
        assert_eq!(deep("*"), "**");
        assert_eq!(deep("crates/*/src"), "crates/*/src/**");
        assert_eq!(deep("crates/a*"), "crates/a*/**");
    }

    #[test]
    fn globs_match_files_directories_or_nothing() {
        let files = tracked(&[
            "crates/searcher/src/lib.rs",
            "crates/searcher/Cargo.toml",
            "crates/cli/src/main.rs",
            "docs/a.md",
            "docs-old/b.md",
            "README.md",
        ]);
        for (glob, want) in [
            ("crates/searcher/*", "files"),
            ("crates/*", "directories"),
            ("crates/*/src/*.rs", "files"),
            ("docs/*.txt", "nothing"),
            ("docs/*/x", "nothing"),
            ("*.md", "files"),
            ("crates/*/src", "directories"),
            ("*/src", "nothing"),
            ("nowhere/**", "nothing"),
            ("docs-old/*", "files"),
        ] {
            let got = match glob_matches(&Entry::parse(glob).expect("valid"), &files) {
                Matches::Files => "files",
                Matches::DirectoriesOnly => "directories",
                Matches::Nothing => "nothing",
            };
            assert_eq!(got, want, "{glob}");
        }
    }
}

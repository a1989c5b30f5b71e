//! Declared file entries ("Files to touch") and the two questions asked of
//! them: do two entries overlap (batch selection), and does an entry cover a
//! changed path (drift check). Both use the same segment model, so a batch
//! that the selector calls disjoint can never both cover one path.
//!
//! An entry is a repo-relative, `/`-separated path or glob. A literal path
//! also stands for everything below it (a directory). A glob covers a path
//! when it matches the path or one of its ancestor directories; `*` and `?`
//! never cross `/`, `**` spans any number of segments.

use std::sync::OnceLock;

use globset::{Glob, GlobBuilder, GlobMatcher};

/// Why a declared entry was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryError {
    Empty,
    Absolute,
    ParentComponent,
    GitComponent,
    BadGlob(String),
}

impl std::fmt::Display for EntryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntryError::Empty => f.write_str("empty entry"),
            EntryError::Absolute => {
                f.write_str("absolute path (entries are relative to the repository top)")
            }
            EntryError::ParentComponent => {
                f.write_str("'..' component (entries may not leave the repository)")
            }
            EntryError::GitComponent => {
                f.write_str("'.git' component (git's own files are never declared)")
            }
            EntryError::BadGlob(e) => write!(f, "invalid glob: {e}"),
        }
    }
}

/// A parsed glob whose matcher (a regex) is only compiled when first needed:
/// loading thousands of work orders must not pay for regexes never used.
#[derive(Debug, Clone)]
struct LazyGlob {
    glob: Glob,
    matcher: OnceLock<GlobMatcher>,
}

impl LazyGlob {
    fn is_match(&self, path: &str) -> bool {
        self.matcher
            .get_or_init(|| self.glob.compile_matcher())
            .is_match(path)
    }
}

#[derive(Debug, Clone)]
enum Segment {
    Literal(String),
    /// `**`: any number of segments, including none.
    AnyDepth,
    Pattern(LazyGlob),
}

/// One validated, normalized declared entry.
#[derive(Debug, Clone)]
pub struct Entry {
    text: String,
    /// Whole-entry matcher for globs; `None` for literal paths.
    glob: Option<LazyGlob>,
    /// `None` when the glob cannot be split per segment (a `{…}` group holding
    /// a `/`): such an entry is compared by literal prefix, conservatively.
    segments: Option<Vec<Segment>>,
    /// Leading literal segments (the part before any glob metacharacter).
    literal_prefix: Vec<String>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}
impl Eq for Entry {}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '[', '{', '\\'])
}

fn compile(pattern: &str) -> Result<LazyGlob, EntryError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|glob| LazyGlob {
            glob,
            matcher: OnceLock::new(),
        })
        .map_err(|e| EntryError::BadGlob(e.kind().to_string()))
}

/// Normalize as the drift check and selector expect: strip `./`, collapse `//`,
/// drop `/./` and a trailing `/`.
pub fn normalize(raw: &str) -> String {
    raw.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

impl Entry {
    pub fn parse(raw: &str) -> Result<Entry, EntryError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(EntryError::Empty);
        }
        if raw.starts_with('/') || raw.starts_with('\\') || raw.as_bytes().get(1) == Some(&b':') {
            return Err(EntryError::Absolute);
        }
        let text = normalize(raw);
        if text.is_empty() {
            return Err(EntryError::Empty);
        }
        for component in text.split('/') {
            if component == ".." {
                return Err(EntryError::ParentComponent);
            }
            if component.eq_ignore_ascii_case(".git") {
                return Err(EntryError::GitComponent);
            }
        }
        if !is_glob(&text) {
            let segments: Vec<String> = text.split('/').map(str::to_owned).collect();
            return Ok(Entry {
                segments: Some(segments.iter().cloned().map(Segment::Literal).collect()),
                literal_prefix: segments,
                glob: None,
                text,
            });
        }
        let glob = compile(&text)?;
        let splittable = !brace_group_holds_slash(&text);
        let mut segments = Vec::new();
        let mut literal_prefix = Vec::new();
        let mut still_literal = true;
        for part in text.split('/') {
            let segment = if part == "**" {
                Segment::AnyDepth
            } else if is_glob(part) {
                if splittable {
                    Segment::Pattern(compile(part)?)
                } else {
                    Segment::AnyDepth
                }
            } else {
                Segment::Literal(part.to_owned())
            };
            match &segment {
                Segment::Literal(s) if still_literal => literal_prefix.push(s.clone()),
                _ => still_literal = false,
            }
            segments.push(segment);
        }
        Ok(Entry {
            text,
            glob: Some(glob),
            segments: splittable.then_some(segments),
            literal_prefix,
        })
    }

    /// The normalized text of the entry.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn is_glob(&self) -> bool {
        self.glob.is_some()
    }

    /// Does this entry cover `path` (a repo-relative file path)?
    pub fn covers(&self, path: &str) -> bool {
        match &self.glob {
            None => {
                path == self.text
                    || (path.starts_with(&self.text) && path.as_bytes()[self.text.len()] == b'/')
            }
            Some(glob) => {
                if glob.is_match(path) {
                    return true;
                }
                // A glob that matches an ancestor directory covers what is inside it.
                let mut end = path.len();
                while let Some(slash) = path[..end].rfind('/') {
                    if glob.is_match(&path[..slash]) {
                        return true;
                    }
                    end = slash;
                }
                false
            }
        }
    }

    /// Can some path be covered by both entries? Conservative: `true` when unsure.
    pub fn overlaps(&self, other: &Entry) -> bool {
        match (&self.segments, &other.segments) {
            (Some(a), Some(b)) => segments_overlap(a, b),
            _ => prefixes_overlap(&self.literal_prefix, &other.literal_prefix),
        }
    }
}

fn brace_group_holds_slash(s: &str) -> bool {
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            '/' if depth > 0 => return true,
            _ => {}
        }
    }
    false
}

fn prefixes_overlap(a: &[String], b: &[String]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y)
}

fn segments_overlap(a: &[Segment], b: &[Segment]) -> bool {
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (Segment::AnyDepth, _) | (_, Segment::AnyDepth) => return true,
            (Segment::Literal(x), Segment::Literal(y)) => {
                if x != y {
                    return false;
                }
            }
            (Segment::Literal(l), Segment::Pattern(p))
            | (Segment::Pattern(p), Segment::Literal(l)) => {
                if !p.is_match(l) {
                    return false;
                }
            }
            // Two patterns in one segment: assume some name matches both.
            (Segment::Pattern(_), Segment::Pattern(_)) => {}
        }
    }
    // One ran out first: it names an ancestor directory of what the other can
    // name, and a directory covers everything inside it.
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(s: &str) -> Entry {
        Entry::parse(s).expect("valid entry")
    }

    #[test]
    fn overlap_table() {
        let cases = [
            ("src/a.rs", "src/a.rs", true),
            ("src/a/**", "src/a/x.rs", true),
            ("src/a", "src/a/x.rs", true),
            ("src/a/", "src/a/x.rs", true),
            ("docs/*.md", "docs/guide.md", true),
            ("docs/*.md", "docs/guide.txt", false),
            ("docs/*.md", "docs/sub/guide.md", false),
            ("src/*/mod.rs", "src/x/**", true),
            ("src/*/mod.rs", "src/x/lib.rs", false),
            ("a/b", "a/bc", false),
            ("a/b", "a/b/c", true),
            ("src/**", "tests/a.rs", false),
            ("**/*.rs", "docs/a.md", true),
            ("*.md", "*.rs", true),
            ("docs/*.md", "src/*.md", false),
            ("{src,lib}/a.rs", "lib/a.rs", true),
            ("{src,lib}/a.rs", "tests/a.rs", false),
            ("{src/a,lib}/x", "tests/x", true),
            ("src/{a,b}.rs", "src/c.rs", false),
            ("./src//a.rs", "src/a.rs", true),
        ];
        for (a, b, want) in cases {
            assert_eq!(e(a).overlaps(&e(b)), want, "{a} vs {b}");
            assert_eq!(e(b).overlaps(&e(a)), want, "{b} vs {a} (symmetry)");
        }
    }

    #[test]
    fn covers_table() {
        let cases = [
            ("src/a.rs", "src/a.rs", true),
            ("src/a", "src/a/x.rs", true),
            ("src/a", "src/ab.rs", false),
            ("src/**", "src/a/b/c.rs", true),
            ("src/*", "src/a/b.rs", true),
            ("docs/*.md", "docs/a.md", true),
            ("docs/*.md", "docs/a/b.md", false),
            ("file with space.txt", "file with space.txt", true),
            ("naïve/*", "naïve/x", true),
        ];
        for (entry, path, want) in cases {
            assert_eq!(e(entry).covers(path), want, "{entry} covers {path}");
        }
    }

    #[test]
    fn rejects_unsafe_entries() {
        assert_eq!(Entry::parse("").unwrap_err(), EntryError::Empty);
        assert_eq!(Entry::parse("  ").unwrap_err(), EntryError::Empty);
        assert_eq!(Entry::parse("./").unwrap_err(), EntryError::Empty);
        assert_eq!(
            Entry::parse("/etc/passwd").unwrap_err(),
            EntryError::Absolute
        );
        assert_eq!(Entry::parse("C:/x").unwrap_err(), EntryError::Absolute);
        assert_eq!(
            Entry::parse("a/../b").unwrap_err(),
            EntryError::ParentComponent
        );
        assert_eq!(
            Entry::parse(".git/config").unwrap_err(),
            EntryError::GitComponent
        );
        assert_eq!(
            Entry::parse("sub/.GIT/x").unwrap_err(),
            EntryError::GitComponent
        );
        assert!(matches!(
            Entry::parse("src/[a.rs").unwrap_err(),
            EntryError::BadGlob(_)
        ));
        assert!(Entry::parse(".gitignore").is_ok());
    }

    proptest::proptest! {
        /// Whenever both entries cover one path, the selector must call them overlapping.
        #[test]
        fn covering_one_path_implies_overlap(
            a in "(src|docs|a)(/(x|y|\\*|\\*\\*|m\\.rs|\\*\\.rs)){0,3}",
            b in "(src|docs|a)(/(x|y|\\*|\\*\\*|m\\.rs|\\*\\.rs)){0,3}",
            path in "(src|docs|a)(/(x|y|m\\.rs|q\\.rs)){1,4}",
        ) {
            let (ea, eb) = (e(&a), e(&b));
            if ea.covers(&path) && eb.covers(&path) {
                proptest::prop_assert!(ea.overlaps(&eb), "{} and {} both cover {}", a, b, path);
            }
        }
    }
}

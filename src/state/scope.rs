//! Declared file entries ("Files to touch") and the two questions asked of
//! them: do two entries overlap (batch selection), and does an entry cover a
//! changed path (drift check). Both use the same segment model, so a batch
//! that the selector calls disjoint can never both cover one path.
//!
//! An entry is a repo-relative, `/`-separated path or glob. A literal path
//! also stands for everything below it (a directory). A glob covers the files
//! it matches and nothing else: `src/*` covers `src/main.rs`, not
//! `src/ui/login.rs`, even though it matches the directory `src/ui`. `*` and
//! `?` never cross `/`, `**` spans any number of segments.

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
    /// A control character (a NUL, an escape sequence, a newline): never a
    /// path anyone means, and printed raw it could drive a terminal.
    ControlCharacter(char),
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
            EntryError::ControlCharacter(c) => {
                write!(f, "control character {} in it", c.escape_unicode())
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A literal path (no glob metacharacter anywhere).
    Literal,
    /// A glob that is compared segment by segment.
    Glob,
    /// A glob with a `{…}` group holding a `/`: it cannot be split per
    /// segment and is compared by literal prefix, conservatively.
    UnsplittableGlob,
}

/// The compiled matchers of a glob entry, built on first use: loading
/// thousands of work orders must not pay for parsing and regexes never used.
#[derive(Debug, Clone, Default)]
struct Matchers {
    /// The whole entry (for `covers`).
    whole: OnceLock<GlobMatcher>,
    /// Per segment index, for pattern segments that [`simple_pattern`] cannot
    /// match itself (classes, groups, escapes).
    segments: Vec<OnceLock<GlobMatcher>>,
}

/// One validated, normalized declared entry.
///
/// Compact on purpose: the text, its kind, and matchers compiled lazily. The
/// segment model (literal, `**`, pattern) is derived from the text when asked.
#[derive(Debug, Clone)]
pub struct Entry {
    text: Box<str>,
    kind: Kind,
    /// Globs only; empty until a matcher is needed.
    matchers: OnceLock<Box<Matchers>>,
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

/// Can parsing `pattern` as a glob fail? Only `[`, `{`, `}` and `\` can make
/// globset's parser return an error; a pattern of literal characters, `*` and
/// `?` always parses (see the `simple_patterns_always_parse` test).
fn may_be_invalid(pattern: &str) -> bool {
    pattern.contains(['[', '{', '}', '\\'])
}

/// Patterns made of literal characters, `*` and `?` only: matched by
/// [`simple_match`] without building a regex.
fn simple_pattern(pattern: &str) -> bool {
    !may_be_invalid(pattern)
}

fn builder(pattern: &str) -> Result<Glob, EntryError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| EntryError::BadGlob(e.kind().to_string()))
}

/// Check that `pattern` is a valid glob, as completely as compiling it would.
fn validate(pattern: &str) -> Result<(), EntryError> {
    if may_be_invalid(pattern) {
        builder(pattern)?;
    }
    Ok(())
}

fn compile(pattern: &str) -> GlobMatcher {
    builder(pattern)
        .expect("the pattern was validated when the entry was parsed")
        .compile_matcher()
}

/// Does the simple pattern `pattern` (literal bytes, `*`, `?`; no `/`) match
/// `name`, exactly as globset with `literal_separator` would: `*` is `[^/]*`
/// and `?` is `[^/]`, byte-wise?
fn simple_match(pattern: &[u8], name: &[u8]) -> bool {
    if name.contains(&b'/') {
        // No token of a pattern without `/` matches one.
        return false;
    }
    let (mut p, mut n) = (0, 0);
    // The last `*` seen and the name position it is currently matched up to.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                // Let the last `*` take one more byte and retry from there.
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    p = sp + 1;
                    n = sn + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Normalize as the drift check and selector expect: strip `./`, collapse `//`,
/// drop `/./` and a trailing `/`.
pub fn normalize(raw: &str) -> String {
    if raw.split('/').all(|c| !c.is_empty() && c != ".") {
        return raw.to_owned();
    }
    raw.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// One segment of an entry in the segment model.
#[derive(Clone, Copy)]
enum Segment<'a> {
    Literal(&'a str),
    /// `**`: any number of segments, including none.
    AnyDepth,
    /// A glob pattern segment, with its index in the entry.
    Pattern(usize, &'a str),
}

impl Entry {
    pub fn parse(raw: &str) -> Result<Entry, EntryError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(EntryError::Empty);
        }
        if let Some(c) = raw.chars().find(|c| c.is_control()) {
            return Err(EntryError::ControlCharacter(c));
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
        let kind = if !is_glob(&text) {
            Kind::Literal
        } else {
            // Every glob the matchers will ever be built from is validated
            // now, so a bad one is reported at load with its file and line.
            validate(&text)?;
            if brace_group_holds_slash(&text) {
                Kind::UnsplittableGlob
            } else {
                for part in text.split('/') {
                    if part != "**" && is_glob(part) {
                        validate(part)?;
                    }
                }
                Kind::Glob
            }
        };
        Ok(Entry {
            text: text.into_boxed_str(),
            kind,
            matchers: OnceLock::new(),
        })
    }

    /// The normalized text of the entry.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn is_glob(&self) -> bool {
        self.kind != Kind::Literal
    }

    fn matchers(&self) -> &Matchers {
        self.matchers.get_or_init(|| {
            Box::new(Matchers {
                whole: OnceLock::new(),
                segments: (0..self.text.split('/').count())
                    .map(|_| OnceLock::new())
                    .collect(),
            })
        })
    }

    fn whole_matches(&self, path: &str) -> bool {
        self.matchers()
            .whole
            .get_or_init(|| compile(&self.text))
            .is_match(path)
    }

    /// Does pattern segment `index` (text `pattern`) match the name `literal`?
    fn segment_matches(&self, index: usize, pattern: &str, literal: &str) -> bool {
        if simple_pattern(pattern) {
            return simple_match(pattern.as_bytes(), literal.as_bytes());
        }
        self.matchers().segments[index]
            .get_or_init(|| compile(pattern))
            .is_match(literal)
    }

    /// The segment model of a splittable entry.
    fn segments(&self) -> impl Iterator<Item = Segment<'_>> {
        self.text.split('/').enumerate().map(|(i, part)| {
            if part == "**" {
                Segment::AnyDepth
            } else if is_glob(part) {
                Segment::Pattern(i, part)
            } else {
                Segment::Literal(part)
            }
        })
    }

    /// Leading literal segments (the part before any glob metacharacter).
    fn literal_prefix(&self) -> impl Iterator<Item = &str> {
        self.text.split('/').take_while(|part| !is_glob(part))
    }

    /// The directory every path a glob matches lies below: its leading
    /// literal segments (`src/ui` for `src/ui/*.rs`, empty for `*.md`).
    /// Of a literal entry, the whole text.
    pub fn base(&self) -> &str {
        let len = self
            .literal_prefix()
            .map(|part| part.len() + 1)
            .sum::<usize>();
        &self.text[..len.saturating_sub(1)]
    }

    /// Does this entry cover `path` (a repo-relative file path)?
    pub fn covers(&self, path: &str) -> bool {
        if self.kind == Kind::Literal {
            let text = &*self.text;
            return path == text || (path.starts_with(text) && path.as_bytes()[text.len()] == b'/');
        }
        // Only what the glob matches: a `*` that happens to match a directory
        // must not quietly declare everything inside it.
        self.whole_matches(path)
    }

    /// Can some path be covered by both entries? Conservative: `true` when unsure.
    pub fn overlaps(&self, other: &Entry) -> bool {
        if self.kind == Kind::UnsplittableGlob || other.kind == Kind::UnsplittableGlob {
            return self
                .literal_prefix()
                .zip(other.literal_prefix())
                .all(|(x, y)| x == y);
        }
        for (x, y) in self.segments().zip(other.segments()) {
            match (x, y) {
                (Segment::AnyDepth, _) | (_, Segment::AnyDepth) => return true,
                (Segment::Literal(x), Segment::Literal(y)) => {
                    if x != y {
                        return false;
                    }
                }
                (Segment::Literal(l), Segment::Pattern(i, p)) => {
                    if !other.segment_matches(i, p, l) {
                        return false;
                    }
                }
                (Segment::Pattern(i, p), Segment::Literal(l)) => {
                    if !self.segment_matches(i, p, l) {
                        return false;
                    }
                }
                // Two patterns in one segment: assume some name matches both.
                (Segment::Pattern(..), Segment::Pattern(..)) => {}
            }
        }
        // Equally long, every segment compatible: some path matches both.
        // When one ran out first it names an ancestor of what the other can
        // name. A literal covers everything below it; a glob without `**`
        // covers only paths as deep as itself, and the rest of the other
        // entry needs at least one more segment (a trailing `**` matches one
        // or more), so they share no path.
        let (len_x, len_y) = (self.text.split('/').count(), other.text.split('/').count());
        match len_x.cmp(&len_y) {
            std::cmp::Ordering::Equal => true,
            std::cmp::Ordering::Less => self.kind == Kind::Literal,
            std::cmp::Ordering::Greater => other.kind == Kind::Literal,
        }
    }
}

/// Below this many pairs of literal entries, comparing every pair is cheaper
/// than sorting one side.
const PAIRWISE_LITERALS: usize = 256;

/// Does some entry of `a` overlap some entry of `b`? The same answer as
/// comparing every pair with [`Entry::overlaps`], but literal paths meet
/// literal paths through a sorted list, so two sets of thousands of literal
/// entries cost n·log n, not n². Globs are still compared with every entry.
pub fn sets_overlap(a: &[Entry], b: &[Entry]) -> bool {
    let globs_overlap = a
        .iter()
        .filter(|x| x.is_glob())
        .any(|x| b.iter().any(|y| x.overlaps(y)))
        || b.iter()
            .filter(|y| y.is_glob())
            .any(|y| a.iter().filter(|x| !x.is_glob()).any(|x| x.overlaps(y)));
    if globs_overlap {
        return true;
    }
    if literals(a).count().saturating_mul(literals(b).count()) <= PAIRWISE_LITERALS {
        return literals(a).any(|x| literals(b).any(|y| literal_overlap(x, y)));
    }
    let a: Vec<&str> = literals(a).collect();
    literals_overlap(&a, literals(b).collect())
}

fn literals(set: &[Entry]) -> impl Iterator<Item = &str> {
    set.iter()
        .filter(|e| e.kind == Kind::Literal)
        .map(Entry::as_str)
}

/// [`Entry::overlaps`] for two literal paths: equal, or one is a path
/// ancestor of the other.
pub fn literal_overlap(x: &str, y: &str) -> bool {
    let (short, long) = if x.len() <= y.len() { (x, y) } else { (y, x) };
    long.starts_with(short) && (long.len() == short.len() || long.as_bytes()[short.len()] == b'/')
}

/// Does a path of `a` overlap a path of `b` (all literal)? Each path of `a`
/// looks up itself and its ancestors in the sorted `b`, and its descendants,
/// which sort as one run starting at `<path>/`.
fn literals_overlap(a: &[&str], mut b: Vec<&str>) -> bool {
    b.sort_unstable();
    let declared = |path: &str| b.binary_search(&path).is_ok();
    let mut below = String::new();
    a.iter().any(|&x| {
        below.clear();
        below.push_str(x);
        below.push('/');
        let first_below = b.partition_point(|y| *y < below.as_str());
        declared(x)
            || x.match_indices('/').any(|(i, _)| declared(&x[..i]))
            || b.get(first_below).is_some_and(|y| y.starts_with(&below))
    })
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
            // A glob covers the files it matches, not what lies below them.
            ("a/*", "a/b/c.txt", false),
            ("src/*", "src/a/**", false),
            ("a/*", "a/*/c", false),
            ("a/*", "a/**/c", true),
            ("src/*", "src/**", true),
            // `a/b` may be a file, which `a/*` matches.
            ("a/*", "a/b", true),
            ("a", "a/*/c", true),
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
            ("src/*", "src/a.rs", true),
            // `*` matches the directory `src/a`, but a glob covers only files.
            ("src/*", "src/a/b.rs", false),
            ("src/*/", "src/a/b.rs", false),
            ("src/**", "src/a", true),
            ("**/*.rs", "a.rs", true),
            ("**/*.rs", "a/b/c.rs", true),
            ("src/**/mod.rs", "src/mod.rs", true),
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
    fn base_of_entries() {
        for (entry, base) in [
            ("src/ui/*.rs", "src/ui"),
            ("src/**", "src"),
            ("*.md", ""),
            ("{src/a,lib}/x", ""),
            ("a/{b,c/d}/e", "a"),
            ("src/a.rs", "src/a.rs"),
        ] {
            assert_eq!(e(entry).base(), base, "{entry}");
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

    #[test]
    fn bad_globs_anywhere_are_refused() {
        for bad in [
            "src/[a.rs",
            "src/*/[a",
            "a{b",
            "a*}b",
            "x/y\\",
            "src/[a/b]/x",
            "{a,b}/[z-a]",
            "{a/b,c}/[x",
        ] {
            assert!(
                matches!(Entry::parse(bad), Err(EntryError::BadGlob(_))),
                "{bad}"
            );
        }
        for good in ["a}b", "src/[ab]/x", "{a,b}/c", "{a/b,c}/x", "a\\*b/c"] {
            assert!(Entry::parse(good).is_ok(), "{good}");
        }
    }

    /// The definition [`sets_overlap`] must agree with.
    fn pairwise(a: &[Entry], b: &[Entry]) -> bool {
        a.iter().any(|x| b.iter().any(|y| x.overlaps(y)))
    }

    #[test]
    fn literal_sets_table() {
        let set = |paths: &[&str]| paths.iter().map(|p| e(p)).collect::<Vec<_>>();
        // '-' and '.' sort before '/', so a directory's descendants do not
        // follow it directly in sorted order.
        let b = set(&["a/b-c", "a/b.rs", "a/bc", "x/y/z"]);
        let cases: [(&[&str], bool); 8] = [
            (&["a/b"], false),
            (&["a/b/c"], false),
            (&["a"], true),
            (&["a/b-c/d"], true),
            (&["x/y"], true),
            (&["x/y/z"], true),
            (&["x/y/zz", "x/yy"], false),
            (&["src/**"], false),
        ];
        for (a, want) in cases {
            let a = set(a);
            assert_eq!(pairwise(&a, &b), want, "{a:?}");
            assert_eq!(sets_overlap(&a, &b), want, "{a:?}");
            assert_eq!(sets_overlap(&b, &a), want, "{a:?} (symmetry)");

            assert_eq!(
                literals_overlap(&literals(&a).collect::<Vec<_>>(), literals(&b).collect()),
                want,
                "{a:?}"
            );
        }
    }

    proptest::proptest! {
        /// The sorted lookup of literal paths gives the pairwise answer. `b`
        /// shares no top directory with `a` but for `shared`, so that large
        /// sets do not always overlap, and its names sort next to `a`'s.
        #[test]
        fn literal_lookup_agrees_with_pairwise(
            a in proptest::collection::vec("(a|b)(/(a|b|a-b|a\\.b|c)){0,3}", 0..30),
            mut b in proptest::collection::vec("(a-b|a\\.b|ab|c)(/(a|b|a-b|c)){0,3}", 0..30),
            shared in proptest::option::of("(a|b)(/(a|b|a-b|a\\.b|c)){0,3}"),
        ) {
            b.extend(shared);
            let (ea, eb): (Vec<Entry>, Vec<Entry>) =
                (a.iter().map(|p| e(p)).collect(), b.iter().map(|p| e(p)).collect());
            let want = pairwise(&ea, &eb);
            proptest::prop_assert_eq!(
                literals_overlap(&literals(&ea).collect::<Vec<_>>(), literals(&eb).collect()),
                want,
                "{:?} vs {:?}", a, b
            );
            proptest::prop_assert_eq!(sets_overlap(&ea, &eb), want, "{:?} vs {:?}", a, b);
        }

        /// With globs mixed in, the set check still gives the pairwise answer.
        #[test]
        fn set_overlap_agrees_with_pairwise(
            a in proptest::collection::vec("(src|docs|a)(/(x|y|x-y|\\*|\\*\\*|m\\.rs|\\*\\.rs)){0,3}", 0..30),
            b in proptest::collection::vec("(src|docs|a)(/(x|y|x-y|\\*|\\*\\*|m\\.rs|\\*\\.rs)){0,3}", 0..30),
        ) {
            let (ea, eb): (Vec<Entry>, Vec<Entry>) =
                (a.iter().map(|p| e(p)).collect(), b.iter().map(|p| e(p)).collect());
            proptest::prop_assert_eq!(sets_overlap(&ea, &eb), pairwise(&ea, &eb), "{:?} vs {:?}", a, b);
        }

        /// Validation skips globset only where its parser cannot fail.
        #[test]
        fn simple_patterns_always_parse(pat in r"[a-c*?.,\]/é-]{0,12}") {
            proptest::prop_assume!(!may_be_invalid(&pat));
            proptest::prop_assert!(builder(&pat).is_ok(), "{}", pat);
        }

        /// The regex-free segment matcher agrees with globset.
        #[test]
        fn simple_match_agrees_with_globset(
            pat in "[ab*?.é]{0,8}",
            cand in "[ab.é]{0,8}",
        ) {
            let want = builder(&pat).expect("simple pattern").compile_matcher().is_match(&cand);
            proptest::prop_assert_eq!(simple_match(pat.as_bytes(), cand.as_bytes()), want, "{} vs {}", pat, cand);
        }

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

//! `working-tree-encoding` (gitattributes(5)) as git applies it, for the
//! Unicode encodings gix 0.90 gets wrong.
//!
//! gix converts through `encoding_rs`, whose encoders follow the WHATWG
//! standard: "encoding" to UTF-16 yields UTF-8, so a checkout writes the
//! stored UTF-8 bytes unconverted; it knows no UTF-32 and no `UTF-16LE-BOM`
//! (a checkout leaves those files unconverted too), and it checks no byte
//! order mark. Here the UTF-16 and UTF-32 families are converted as git
//! with glibc's iconv converts them: files are written as `git checkout`
//! writes them, and read back with git's checks of the byte order mark.
//! Other encodings (Shift_JIS, ISO-8859-1, …) are gix's own conversion.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::worktree::stack::state::attributes::Source;

use crate::sys::error::{Diagnosis, ExitCode, InputError, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading .gitattributes: {source}")]
    Attributes {
        #[source]
        source: gix::Error,
    },
    #[error("reading the attributes of {path}: {source}")]
    AttributesAt {
        path: BString,
        #[source]
        source: gix::Error,
    },
    #[error("preparing the filters of .gitattributes: {source}")]
    Filters {
        #[source]
        source: gix::Error,
    },
    #[error("the path '{path}' is not one of this system: {source}")]
    ForeignPath {
        path: BString,
        #[source]
        source: gix::Error,
    },
    /// Converting a worktree file to what git stores.
    #[error("reading {}: {source}", file.display())]
    Convert {
        file: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("writing {}: {source}", file.display())]
    Write {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading a path of the index: {source}")]
    IndexPath {
        #[source]
        source: gix::Error,
    },
    #[error("reading {}: {source}", file.display())]
    Stat {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Which of `attributes` (`ident`, `working-tree-encoding`) could some
/// attributes source set: a `.gitattributes` of `index`, `info/attributes`
/// or `core.attributesFile`? A cheap textual test, each source read once,
/// so that nothing is looked up per file where no rule can apply.
pub fn mentioned<const N: usize>(
    wt: &gix::Repository,
    index: &gix::index::State,
    attributes: [&str; N],
) -> [bool; N] {
    let mut found = [false; N];
    let mut note = |bytes: &[u8]| {
        for (hit, attribute) in found.iter_mut().zip(attributes) {
            *hit |= bytes.find(attribute).is_some();
        }
    };
    for e in index.entries() {
        let path = e.path(index);
        if path == ".gitattributes" || path.ends_with(b"/.gitattributes") {
            if let Ok(blob) = wt.find_blob(e.id) {
                note(&blob.data);
            }
        }
    }
    let global = wt
        .config_snapshot()
        .trusted_path("core.attributesFile")
        .ok()
        .flatten()
        .or_else(default_attributes_file);
    for file in global
        .into_iter()
        .chain([wt.common_dir().join("info/attributes")])
    {
        if let Ok(bytes) = std::fs::read(file) {
            note(&bytes);
        }
    }
    found
}

/// git's `core.attributesFile` when unset: `$XDG_CONFIG_HOME/git/attributes`,
/// else `~/.config/git/attributes`.
fn default_attributes_file() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("git/attributes"))
}

/// The attributes of one path that decide how its bytes differ between
/// git and the worktree beyond what gix gets right.
#[derive(Debug, Default)]
pub struct At {
    pub ident: bool,
    /// A UTF-16 or UTF-32 `working-tree-encoding` and its name as written.
    pub encoding: Option<(Unicode, BString)>,
    /// The `filter` driver, when one is configured under that name.
    pub driver: Option<BString>,
}

impl At {
    /// The Unicode encoding of the file at `path`, refused where gix would
    /// go wrong: a filter driver on it too (git hands the driver the
    /// encoded bytes, gix the UTF-8 ones), or a name gix cannot read back
    /// (`UTF-32`, `UTF-16LE-BOM`: every status of a worktree holding such
    /// a file would fail). An input error, before any build.
    pub fn supported_encoding(&self, path: &BStr) -> Result<Option<Unicode>> {
        let Some((unicode, name)) = &self.encoding else {
            return Ok(None);
        };
        if let Some(driver) = &self.driver {
            return Err(InputError::new(format!(
                "'{path}' has both working-tree-encoding={name} and the filter driver '{driver}', which git-arbiter cannot apply together"
            ))
            .hint("drop one of the two attributes for that path in .gitattributes")
            .into());
        }
        if !Unicode::gix_reads(name.as_bstr()) {
            return Err(InputError::new(format!(
                "'{path}' has working-tree-encoding={name}, which git-arbiter cannot read back into git (gix 0.90 knows no such encoding)"
            ))
            .hint("use UTF-16 (with a byte order mark), UTF-16LE or UTF-16BE for that path in .gitattributes")
            .into());
        }
        Ok(Some(*unicode))
    }
}

/// Looks up [`At`] path by path, reading `.gitattributes` from `source`.
pub struct Attributes<'r> {
    wt: &'r gix::Repository,
    stack: gix::AttributeStack<'r>,
    outcome: gix::attrs::search::Outcome,
}

impl<'r> Attributes<'r> {
    pub fn new(wt: &'r gix::Repository, index: &gix::index::State, source: Source) -> Result<Self> {
        let stack = wt
            .attributes_only(index, source)
            .map_err(|source| Error::Attributes { source })?;
        let outcome =
            stack.selected_attribute_matches(["ident", "working-tree-encoding", "filter"]);
        Ok(Attributes { wt, stack, outcome })
    }

    pub fn at(&mut self, path: &BStr, mode: gix::index::entry::Mode) -> Result<At> {
        use gix::attrs::StateRef;
        let platform =
            self.stack
                .at_entry(path, Some(mode))
                .map_err(|source| Error::AttributesAt {
                    path: path.to_owned(),
                    source,
                })?;
        platform.matching_attributes(&mut self.outcome);
        let mut at = At::default();
        for m in self.outcome.iter_selected() {
            let value = match m.assignment.state {
                StateRef::Value(v) => Some(v.as_bstr()),
                _ => None,
            };
            match m.assignment.name.as_str() {
                "ident" => at.ident = m.assignment.state.is_set(),
                "working-tree-encoding" => {
                    at.encoding = value.and_then(|v| Unicode::named(v).map(|u| (u, v.to_owned())));
                }
                "filter" => {
                    let config = self.wt.config_snapshot();
                    at.driver = value
                        .filter(|name| {
                            ["smudge", "clean", "process"].iter().any(|key| {
                                config
                                    .string(format!("filter.{name}.{key}").as_str())
                                    .is_some()
                            })
                        })
                        .map(|v| v.to_owned());
                }
                _ => {}
            }
        }
        Ok(at)
    }
}

/// What gix's conversion to git must be given for the file `data` at
/// `path` with the attributes `at` so that it stores what git stores:
/// git's checks of a UTF-16 file's byte order mark (an input error, as
/// `git add` fails), its bytes put the way gix reads them.
pub fn for_git<'d>(at: &At, path: &BStr, data: &'d [u8]) -> Result<Cow<'d, [u8]>> {
    let (Some(unicode), Some((_, name))) = (at.supported_encoding(path)?, &at.encoding) else {
        return Ok(Cow::Borrowed(data));
    };
    unicode
        .check(path, name.as_bstr(), data)
        .map_err(|message| {
            InputError::new(message).hint(
                "fix the file or its working-tree-encoding in .gitattributes, as git add would ask",
            )
        })?;
    Ok(unicode.for_gix(data))
}

/// The conversion of worktree files to what git stores: gix's filter
/// pipeline (`.gitattributes` of the worktree, then of the index), with
/// [`for_git`] before it where some attributes file names an encoding.
pub struct ToGit<'r> {
    pub pipeline: gix::filter::Pipeline<'r>,
    attributes: Option<Attributes<'r>>,
}

impl<'r> ToGit<'r> {
    pub fn new(wt: &'r gix::Repository, index: &gix::index::State) -> Result<Self> {
        let stack = wt
            .attributes_only(index, Source::WorktreeThenIdMapping)
            .map_err(|source| Error::Attributes { source })?;
        let pipeline = gix::filter::Pipeline::new(wt, stack.detach())
            .map_err(|source| Error::Filters { source })?;
        let attributes = match mentioned(wt, index, ["working-tree-encoding"]) {
            [true] => Some(Attributes::new(wt, index, Source::WorktreeThenIdMapping)?),
            [false] => None,
        };
        Ok(ToGit {
            pipeline,
            attributes,
        })
    }

    /// Does some file need [`ToGit::blob`] rather than gix's own reading?
    pub fn has_encodings(&self) -> bool {
        self.attributes.is_some()
    }

    /// The blob git would store for the file at `abs` (`path` in `index`);
    /// `None` when it cannot be read.
    pub fn blob(
        &mut self,
        index: &gix::index::State,
        path: &BStr,
        abs: &std::path::Path,
    ) -> Result<Option<Vec<u8>>> {
        use gix::filter::plumbing::pipeline::convert::ToGitOutcome;
        use std::io::Read;
        let Ok(data) = std::fs::read(abs) else {
            return Ok(None);
        };
        let at = match &mut self.attributes {
            Some(attributes) => attributes.at(path, gix::index::entry::Mode::FILE)?,
            None => At::default(),
        };
        let input = for_git(&at, path, &data)?;
        let rel = gix::path::from_bstr(path).map_err(|source| Error::ForeignPath {
            path: path.to_owned(),
            source,
        })?;
        let mut out = Vec::new();
        let read = match self
            .pipeline
            .convert_to_git(input.as_ref(), &rel, index)
            .map_err(|source| Error::Convert {
                file: abs.to_owned(),
                source,
            })? {
            ToGitOutcome::Unchanged(mut bytes) => bytes.read_to_end(&mut out).map(drop),
            ToGitOutcome::Process(mut filtered) => filtered.read_to_end(&mut out).map(drop),
            ToGitOutcome::Buffer(buf) => {
                out.extend_from_slice(buf);
                Ok(())
            }
        };
        Ok(read.is_ok().then_some(out))
    }
}

/// Each file just written into `root` from `index` gets the bytes `git
/// checkout` writes where gix 0.90 writes others: `ident` expanded as git
/// writes it (`$Id: <sha> $`, gix writes `$Id: <sha>$`), and a UTF-16 or
/// UTF-32 `working-tree-encoding` applied (gix writes such files as the
/// stored UTF-8; see [`crate::git::encoding`]). Nothing is looked up unless
/// some attributes file mentions either; for `ident` alone, only files
/// that contain `$Id: ` are. The stat data of a rewritten file's entry is
/// taken again.
pub fn as_git_writes_it(
    wt: &gix::Repository,
    index: &mut gix::index::State,
    root: &Path,
) -> Result<()> {
    use gix::index::entry::Flags;
    let [encodings, ident] = mentioned(wt, index, ["working-tree-encoding", "ident"]);
    if !encodings && !ident {
        return Ok(());
    }
    let mut attributes = None;
    let mut rewritten = Vec::new();
    for (at, entry) in index.entries().iter().enumerate() {
        if entry.flags.contains(Flags::SKIP_WORKTREE)
            || !matches!(
                entry.mode,
                gix::index::entry::Mode::FILE | gix::index::entry::Mode::FILE_EXECUTABLE
            )
        {
            continue;
        }
        let path = entry.path(index);
        let mut attributes_at = |path| -> Result<At> {
            let attributes = match &mut attributes {
                Some(a) => a,
                None => attributes.insert(Attributes::new(
                    wt,
                    index,
                    gix::worktree::stack::state::attributes::Source::IdMapping,
                )?),
            };
            attributes.at(path, entry.mode)
        };
        // Where an encoding may apply, the attributes say whether the file
        // need be read at all; for `ident` alone, its content does first.
        let looked_up = match encodings {
            true => match attributes_at(path)? {
                attrs if !attrs.ident && attrs.encoding.is_none() => continue,
                attrs => Some(attrs),
            },
            false => None,
        };
        let file = root.join(
            gix::path::from_bstr(path).map_err(|source| Error::ForeignPath {
                path: path.to_owned(),
                source,
            })?,
        );
        let Ok(content) = std::fs::read(&file) else {
            continue;
        };
        let ident_form = git_ident_form(&content);
        let attrs = match looked_up {
            Some(attrs) => attrs,
            None if ident_form.is_none() => continue,
            None => attributes_at(path)?,
        };
        let encoding = attrs.supported_encoding(path)?;
        let text = match ident_form {
            Some(fixed) if attrs.ident => Cow::Owned(fixed),
            _ => Cow::Borrowed(content.as_slice()),
        };
        let written = match encoding.and_then(|e| e.to_worktree(&text)) {
            Some(encoded) => Cow::Owned(encoded),
            None => text,
        };
        if written.as_ref() != content.as_slice() {
            std::fs::write(&file, written).map_err(|source| Error::Write {
                file: file.clone(),
                source,
            })?;
            rewritten.push(at);
        }
    }
    take_stats(index, root, rewritten)
}

/// The entries at `rewritten` take the stat data of what their files now hold.
fn take_stats(index: &mut gix::index::State, root: &Path, rewritten: Vec<usize>) -> Result<()> {
    let (entries, paths) = index.entries_mut_and_pathbacking();
    for at in rewritten {
        let entry = &mut entries[at];
        let file = root.join(
            gix::path::from_bstr(entry.path_in(paths))
                .map_err(|source| Error::IndexPath { source })?,
        );
        let meta =
            gix::index::fs::Metadata::from_path_no_follow(&file).map_err(|source| Error::Stat {
                file: file.clone(),
                source,
            })?;
        entry.stat = gix::index::entry::Stat::from_fs(&meta).unwrap_or_default();
    }
    Ok(())
}

/// `content` with each `$Id: <hex>$` written as git writes it, `$Id: <hex> $`;
/// `None` when there is none.
fn git_ident_form(content: &[u8]) -> Option<Vec<u8>> {
    const OPEN: &[u8] = b"$Id: ";
    let mut out = Vec::with_capacity(content.len() + 2);
    let mut rest = content;
    let mut changed = false;
    while let Some(at) = rest.windows(OPEN.len()).position(|w| w == OPEN) {
        let after = &rest[at + OPEN.len()..];
        let hex = after.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        out.extend_from_slice(&rest[..at + OPEN.len() + hex]);
        rest = &after[hex..];
        if (hex == 40 || hex == 64) && rest.first() == Some(&b'$') {
            out.push(b' ');
            changed = true;
        }
    }
    out.extend_from_slice(rest);
    changed.then_some(out)
}

/// A UTF-16 or UTF-32 `working-tree-encoding`, as git spells its forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unicode {
    /// Bytes per code unit: 2 or 4.
    width: usize,
    order: Order,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// `UTF-16`, `UTF-32`: a byte order mark is required; written in the
    /// machine's byte order, as iconv writes it.
    Marked,
    /// `UTF-16LE`, `UTF-32LE`: no byte order mark allowed.
    Little,
    /// `UTF-16BE`, `UTF-32BE`: no byte order mark allowed.
    Big,
    /// `UTF-16LE-BOM`: little-endian, written with a mark, read as `UTF-16`.
    LittleMarked,
    /// `UTF-16BE-BOM`: big-endian, written with a mark, read as `UTF-16`.
    BigMarked,
}

impl Unicode {
    /// The encoding a `working-tree-encoding` value names, compared as git
    /// compares them (`utf16le` is `UTF-16LE`); `None` for any other.
    pub fn named(name: &BStr) -> Option<Unicode> {
        let upper = name.to_ascii_uppercase();
        let rest = upper.strip_prefix(b"UTF")?;
        let rest = rest.strip_prefix(b"-").unwrap_or(rest);
        let (width, order) = match rest {
            b"16" => (2, Order::Marked),
            b"16LE" => (2, Order::Little),
            b"16BE" => (2, Order::Big),
            b"16LE-BOM" => (2, Order::LittleMarked),
            b"16BE-BOM" => (2, Order::BigMarked),
            b"32" => (4, Order::Marked),
            b"32LE" => (4, Order::Little),
            b"32BE" => (4, Order::Big),
            _ => return None,
        };
        Some(Unicode { width, order })
    }

    fn little_endian(self) -> bool {
        match self.order {
            Order::Marked => cfg!(target_endian = "little"),
            Order::Little | Order::LittleMarked => true,
            Order::Big | Order::BigMarked => false,
        }
    }

    fn marked_on_write(self) -> bool {
        matches!(
            self.order,
            Order::Marked | Order::LittleMarked | Order::BigMarked
        )
    }

    /// The byte order mark of this width that `data` starts with:
    /// `Some(true)` little-endian, `Some(false)` big-endian.
    fn mark_of(self, data: &[u8]) -> Option<bool> {
        let (le, be): (&[u8], &[u8]) = match self.width {
            2 => (b"\xff\xfe", b"\xfe\xff"),
            _ => (b"\xff\xfe\0\0", b"\0\0\xfe\xff"),
        };
        if data.starts_with(le) {
            Some(true)
        } else if data.starts_with(be) {
            Some(false)
        } else {
            None
        }
    }

    /// Does gix's own conversion to git read this encoding right (given
    /// the input [`Unicode::for_gix`] makes)? Only the names `encoding_rs`
    /// knows: `UTF-16`, `UTF-16LE`, `UTF-16BE`.
    pub fn gix_reads(name: &BStr) -> bool {
        gix::filter::plumbing::encoding::Encoding::for_label(name).is_some()
    }

    /// What `git checkout` writes for the UTF-8 `text` (after `ident` and
    /// end-of-line conversion): `None` when it writes `text` as it is (an
    /// empty file; text that is not UTF-8, which iconv cannot convert).
    pub fn to_worktree(self, text: &[u8]) -> Option<Vec<u8>> {
        if text.is_empty() {
            return None;
        }
        let text = std::str::from_utf8(text).ok()?;
        let little = self.little_endian();
        let mut out = Vec::with_capacity(text.len() * self.width + self.width);
        let mut unit = |value: u32| match (self.width, little) {
            (2, true) => out.extend_from_slice(&(value as u16).to_le_bytes()),
            (2, false) => out.extend_from_slice(&(value as u16).to_be_bytes()),
            (_, true) => out.extend_from_slice(&value.to_le_bytes()),
            (_, false) => out.extend_from_slice(&value.to_be_bytes()),
        };
        if self.marked_on_write() {
            unit(0xfeff);
        }
        if self.width == 2 {
            text.encode_utf16().for_each(|u| unit(u32::from(u)));
        } else {
            text.chars().for_each(|c| unit(u32::from(c)));
        }
        Some(out)
    }

    /// git's checks of a file `data` at `path` encoded as `name` before it
    /// is read into git: a mark where the name forbids one, none where it
    /// requires one. The message is git's, its advice included.
    pub fn check(self, path: &BStr, name: &BStr, data: &[u8]) -> Result<(), String> {
        if data.is_empty() {
            return Ok(());
        }
        let bits = self.width * 8;
        match (self.order, self.mark_of(data)) {
            (Order::Little | Order::Big, Some(_)) => Err(format!(
                "BOM is prohibited in '{path}' if encoded as {name}; the file contains a byte order mark (BOM): use UTF-{bits} as working-tree-encoding"
            )),
            (Order::Marked, None) => Err(format!(
                "BOM is required in '{path}' if encoded as {name}; the file is missing a byte order mark (BOM): use UTF-{bits}BE or UTF-{bits}LE (depending on the byte order) as working-tree-encoding"
            )),
            _ => Ok(()),
        }
    }

    /// The bytes of a file `data` in this encoding that gix's conversion
    /// to git (for a name it reads, see [`Unicode::gix_reads`]) turns into
    /// the UTF-8 git stores: gix takes `UTF-16` as little-endian after an
    /// optional mark, where git follows the mark; a big-endian file is
    /// given to it little-endian. Call after [`Unicode::check`].
    pub fn for_gix(self, data: &[u8]) -> Cow<'_, [u8]> {
        if self.order != Order::Marked || self.width != 2 || self.mark_of(data) != Some(false) {
            return Cow::Borrowed(data);
        }
        let mut swapped = data.to_vec();
        for pair in swapped.chunks_exact_mut(2) {
            pair.swap(0, 1);
        }
        Cow::Owned(swapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Unicode {
        Unicode::named(name.into()).expect(name)
    }

    #[test]
    fn ident_takes_the_form_git_writes() {
        let sha = "a0749a0c2c0c92aeb7c5f5fa6ace589ef08aceeb";
        assert_eq!(
            super::git_ident_form(format!("/* $Id: {sha}$ */ $Id: {sha}$").as_bytes()),
            Some(format!("/* $Id: {sha} $ */ $Id: {sha} $").into_bytes())
        );
        assert_eq!(
            super::git_ident_form(format!("$Id: {sha} $").as_bytes()),
            None
        );
        assert_eq!(super::git_ident_form(b"$Id$ and $Id: abc$"), None);
    }

    #[test]
    fn names_compare_as_git_compares_them() {
        assert_eq!(named("utf16le"), named("UTF-16LE"));
        assert_eq!(named("Utf-32"), named("UTF32"));
        for other in ["UTF-8", "UTF-16-LE", "SHIFT-JIS", "UTF-32LE-BOM", ""] {
            assert_eq!(Unicode::named(other.into()), None, "{other}");
        }
    }

    #[test]
    fn writes_as_iconv_writes() {
        let le = "h\u{e9}\u{1f600}\n";
        assert_eq!(
            named("UTF-16LE").to_worktree(le.as_bytes()).expect("text"),
            b"h\0\xe9\0\x3d\xd8\x00\xde\n\0"
        );
        assert_eq!(
            named("UTF-16BE-BOM").to_worktree(b"h").expect("text"),
            b"\xfe\xff\0h"
        );
        assert_eq!(
            named("UTF-32BE")
                .to_worktree("\u{1f600}".as_bytes())
                .expect("text"),
            b"\0\x01\xf6\x00"
        );
        assert_eq!(named("UTF-16").to_worktree(b""), None, "empty stays empty");
        assert_eq!(named("UTF-16").to_worktree(b"\xff"), None, "not UTF-8");
    }

    #[test]
    fn marks_are_checked_as_git_checks_them() {
        let path = BStr::new("a.txt");
        let utf16 = named("UTF-16");
        assert!(utf16
            .check(path, "UTF-16".into(), b"h\0")
            .expect_err("required")
            .starts_with("BOM is required in 'a.txt' if encoded as UTF-16"));
        assert!(utf16.check(path, "UTF-16".into(), b"\xfe\xff\0h").is_ok());
        assert!(named("UTF-16LE")
            .check(path, "UTF-16LE".into(), b"\xff\xfeh\0")
            .expect_err("prohibited")
            .starts_with("BOM is prohibited in 'a.txt' if encoded as UTF-16LE"));
        assert!(named("UTF-16LE-BOM")
            .check(path, "UTF-16LE-BOM".into(), b"h\0")
            .is_ok());
        assert_eq!(utf16.for_gix(b"\xfe\xff\0h").as_ref(), b"\xff\xfeh\0");
        assert_eq!(utf16.for_gix(b"\xff\xfeh\0").as_ref(), b"\xff\xfeh\0");
    }
}

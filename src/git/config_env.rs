//! `git -c key=value arbiter …`: git hands `-c` settings to subcommands in
//! `GIT_CONFIG_PARAMETERS`, which gix 0.90 does not read (it reads only
//! `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`). This parses it
//! as git's `parse_config_env_list` does, so the settings can be applied as
//! command-line overrides when the repository is opened.

use gix::bstr::{BStr, BString, ByteSlice, ByteVec};

use crate::sys::error::InputError;

/// The variables git itself sets for a repository (`git rev-parse --local-env-vars`)
/// plus a few more that redirect where git reads or writes.
pub const GIT_ENV: &[&str] = &[
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_QUARANTINE_PATH",
    "GIT_INTERNAL_SUPER_PREFIX",
];

const VARIABLE: &str = "GIT_CONFIG_PARAMETERS";

/// One `-c` setting. `value: None` is `-c key` without `=`: an implicit true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: BString,
    pub value: Option<BString>,
}

/// Why `GIT_CONFIG_PARAMETERS` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("bogus format at byte {at}")]
    Format { at: usize },
    #[error("'{key}' is not a configuration key (section.name)")]
    Key { key: BString },
}

/// The settings in `GIT_CONFIG_PARAMETERS`, as `key=value` overrides for
/// gix (`key` alone for an implicit true), in git's order: a later one wins.
pub fn overrides_from_env() -> Result<Vec<BString>, InputError> {
    let Some(raw) = std::env::var_os(VARIABLE) else {
        return Ok(Vec::new());
    };
    let raw = gix::path::os_str_into_bstr(&raw)
        .map_err(|_| InputError::new(format!("{VARIABLE} is not valid UTF-8")))?;
    let settings = parse(raw).map_err(|e| {
        InputError::new(format!("{VARIABLE} is malformed: {e}")).hint(format!(
            "git sets it from 'git -c key=value'; unset {VARIABLE} or fix its quoting"
        ))
    })?;
    settings.into_iter().map(to_override).collect()
}

/// gix takes an override as one `key=value` string, splitting at the first
/// `=` and trimming both sides: a key holding `=` or a value with outer
/// whitespace would arrive changed, so it is refused rather than bent.
fn to_override(setting: Setting) -> Result<BString, InputError> {
    let Setting { key, value } = setting;
    let refuse = |why: &str| {
        Err(InputError::new(format!("git -c '{key}': {why}"))
            .hint("git-arbiter passes -c settings on to gitoxide, which cannot represent this one"))
    };
    if key.contains(&b'=') {
        return refuse("a key containing '=' is not supported");
    }
    let Some(value) = value else {
        return Ok(key);
    };
    if value.trim().len() != value.len() {
        return refuse("a value with leading or trailing whitespace is not supported");
    }
    let mut out = key;
    out.push(b'=');
    out.push_str(value);
    Ok(out)
}

/// Parse the variable's text: whitespace-separated entries, each `'key=value'`
/// (old style, split at the first `=`), `'key'='value'` or `'key'=` (implicit
/// true), quoted as git's `sq_quote` does (`'\''` for a single quote).
pub fn parse(text: &BStr) -> Result<Vec<Setting>, Malformed> {
    let mut settings = Vec::new();
    // As in git, only the separators between entries are skipped: leading blanks are bogus.
    let mut at = 0;
    while at < text.len() {
        let (first, next) = sq_dequote_step(text, at)?;
        at = next;
        match text.get(at) {
            None => settings.push(old_style(first)?),
            Some(&b) if is_space(b) => settings.push(old_style(first)?),
            Some(b'=') => {
                at += 1;
                let value = match text.get(at) {
                    Some(b'\'') => {
                        let (value, next) = sq_dequote_step(text, at)?;
                        at = next;
                        if text.get(at).is_some_and(|&b| !is_space(b)) {
                            return Err(Malformed::Format { at });
                        }
                        Some(value)
                    }
                    None => None,
                    Some(&b) if is_space(b) => None,
                    Some(_) => return Err(Malformed::Format { at }),
                };
                settings.push(setting(first, value)?);
            }
            Some(_) => return Err(Malformed::Format { at }),
        }
        at = skip_space(text, at);
    }
    Ok(settings)
}

/// `'key=value'` from git before 2.31: split at the first `=`, key trimmed.
fn old_style(entry: BString) -> Result<Setting, Malformed> {
    let trim =
        |key: &[u8]| -> BString { key.trim_with(|c| c.is_ascii() && is_space(c as u8)).into() };
    match entry.find_byte(b'=') {
        Some(eq) => setting(trim(&entry[..eq]), Some(entry[eq + 1..].into())),
        None => setting(trim(&entry), None),
    }
}

/// git requires a section and a name (`config_parse_pair`), and no outer
/// whitespace, which its key check rejects.
fn setting(key: BString, value: Option<BString>) -> Result<Setting, Malformed> {
    match key.rfind_byte(b'.') {
        Some(dot) if dot > 0 && dot + 1 < key.len() && key.trim().len() == key.len() => {
            Ok(Setting { key, value })
        }
        _ => Err(Malformed::Key { key }),
    }
}

/// git's `isspace`, which ends an entry.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Entries are separated by what git's `strspn(cur, " \t\n")` skips.
fn skip_space(text: &BStr, mut at: usize) -> usize {
    while matches!(text.get(at), Some(b' ' | b'\t' | b'\n')) {
        at += 1;
    }
    at
}

/// git's `sq_dequote_step`: one single-quoted word starting at `at`, where
/// `'\''` and `'\!'` resume the quote with a literal `'` or `!`. Returns the
/// word and where it ended.
fn sq_dequote_step(text: &BStr, mut at: usize) -> Result<(BString, usize), Malformed> {
    if text.get(at) != Some(&b'\'') {
        return Err(Malformed::Format { at });
    }
    let mut word = BString::default();
    at += 1;
    loop {
        match text.get(at) {
            None => return Err(Malformed::Format { at }),
            Some(b'\'') => {
                at += 1;
                match (text.get(at), text.get(at + 1), text.get(at + 2)) {
                    (Some(b'\\'), Some(&c @ (b'\'' | b'!')), Some(b'\'')) => {
                        word.push(c);
                        at += 3;
                    }
                    _ => return Ok((word, at)),
                }
            }
            Some(&c) => {
                word.push(c);
                at += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Vec<(String, Option<String>)> {
        parse(text.into())
            .expect("parses")
            .into_iter()
            .map(|s| (s.key.to_string(), s.value.map(|v| v.to_string())))
            .collect()
    }

    fn pair(key: &str, value: Option<&str>) -> (String, Option<String>) {
        (key.into(), value.map(Into::into))
    }

    #[test]
    fn new_style_entries() {
        assert_eq!(
            parsed("'a.b'='x y' 'user.name'='A B'"),
            [pair("a.b", Some("x y")), pair("user.name", Some("A B"))]
        );
    }

    #[test]
    fn old_style_entries_split_at_the_first_equals() {
        assert_eq!(
            parsed("'a.b=x' 'c.d=e=f'  'g.h'"),
            [
                pair("a.b", Some("x")),
                pair("c.d", Some("e=f")),
                pair("g.h", None)
            ]
        );
    }

    #[test]
    fn implicit_true_and_empty_value_differ() {
        assert_eq!(
            parsed("'foo.bar'= 'x.y'=''"),
            [pair("foo.bar", None), pair("x.y", Some(""))]
        );
    }

    #[test]
    fn escaped_single_quotes_and_bangs() {
        assert_eq!(
            parsed(r"'a.b'='it'\''s' 'c.d=don'\''t'\!'' 'e.f'='!x'"),
            [
                pair("a.b", Some("it's")),
                pair("c.d", Some("don't!")),
                pair("e.f", Some("!x"))
            ]
        );
    }

    #[test]
    fn subsections_keep_spaces_and_dots() {
        assert_eq!(
            parsed("'Sub.Sec Tion.v.Key'='v'"),
            [pair("Sub.Sec Tion.v.Key", Some("v"))]
        );
    }

    #[test]
    fn separators_are_blanks_between_and_after_entries() {
        assert_eq!(parsed(""), []);
        assert_eq!(
            parsed("'a.b'='1' \t\n'c.d'"),
            [pair("a.b", Some("1")), pair("c.d", None)]
        );
    }

    #[test]
    fn bogus_texts_are_refused() {
        for bad in [
            "'a.b=1",
            "a.b=1",
            "'a.b'x",
            "'a.b'='x'y",
            "'a.b'=x",
            "'a.b''c.d'",
            "'nodot'='1'",
            "'.b'='1'",
            "'a.'='1'",
            "'a.b '='1'",
            " 'a.b'='1'",
            "   ",
            r"'a.b'='x'\''",
        ] {
            assert!(parse(bad.into()).is_err(), "{bad}");
        }
    }

    #[test]
    fn overrides_keep_what_gix_can_represent() {
        let set = |key: &str, value: Option<&str>| Setting {
            key: key.into(),
            value: value.map(Into::into),
        };
        assert_eq!(
            to_override(set("user.name", Some("A \"B\""))).expect("ok"),
            "user.name=A \"B\""
        );
        assert_eq!(
            to_override(set("core.bare", None)).expect("ok"),
            "core.bare"
        );
        assert_eq!(to_override(set("a.b", Some(""))).expect("ok"), "a.b=");
        assert!(to_override(set("url.x=y.insteadOf", Some("z"))).is_err());
        assert!(to_override(set("a.b", Some(" padded"))).is_err());
        assert!(to_override(set("a.b", Some("padded\u{a0}"))).is_err());
    }
}

//! Signing commits as `git commit -S` does: gix 0.90 writes commits but has
//! no signing, so the configured program is run the way git runs it.
//!
//! - `gpg.format=openpgp` (default) and `x509`: `<program> --status-fd=2
//!   -bsau <key>` with the payload on stdin; the armored signature on stdout,
//!   `[GNUPG:] SIG_CREATED` on the status channel.
//! - `gpg.format=ssh`: `<program> -Y sign -n git -f <key> <file>` writes
//!   `<file>.sig`; a literal public key (`key::…`, `ssh-…`) is signed through
//!   the agent (`-U`).

use std::io::Write as _;
use std::process::{Command, Stdio};

/// The signing program failed, or is not configured.
#[derive(Debug)]
pub struct Error {
    pub program: String,
    pub detail: String,
}

/// The signature of `payload` (a commit without `gpgsig`) for its `gpgsig` header.
pub fn sign(
    config: &gix::config::Snapshot<'_>,
    payload: &[u8],
    committer: &gix::actor::Signature,
) -> Result<String, Error> {
    let format = config
        .string("gpg.format")
        .map(|f| f.to_string())
        .unwrap_or_else(|| "openpgp".into());
    let program_of = |key: &str, default: &str| {
        config
            .string(key)
            .map(|p| p.to_string())
            .unwrap_or_else(|| default.into())
    };
    let key = config.string("user.signingkey").map(|k| k.to_string());
    match format.as_str() {
        "openpgp" => {
            let program = config
                .string("gpg.openpgp.program")
                .or_else(|| config.string("gpg.program"))
                .map(|p| p.to_string())
                .unwrap_or_else(|| "gpg".into());
            gpg(&program, payload, key, committer)
        }
        "x509" => gpg(
            &program_of("gpg.x509.program", "gpgsm"),
            payload,
            key,
            committer,
        ),
        "ssh" => ssh(&program_of("gpg.ssh.program", "ssh-keygen"), payload, key),
        other => Err(Error {
            program: format!("gpg.format={other}"),
            detail: "unknown signature format (git knows openpgp, x509 and ssh)".into(),
        }),
    }
}

fn failed(program: &str, detail: impl Into<String>) -> Error {
    Error {
        program: program.to_owned(),
        detail: detail.into(),
    }
}

/// `gpg`/`gpgsm` as git runs them; the key defaults to the committer identity.
fn gpg(
    program: &str,
    payload: &[u8],
    key: Option<String>,
    committer: &gix::actor::Signature,
) -> Result<String, Error> {
    let key = key.unwrap_or_else(|| format!("{} <{}>", committer.name, committer.email));
    let mut child = Command::new(program)
        .args(["--status-fd=2", "-bsau", &key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(program, format!("cannot run it: {e}")))?;
    let written = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(payload))
        .transpose();
    let out = child
        .wait_with_output()
        .map_err(|e| failed(program, e.to_string()))?;
    let status = String::from_utf8_lossy(&out.stderr);
    let created = status
        .lines()
        .any(|l| l.starts_with("[GNUPG:] SIG_CREATED "));
    if written.is_err() || !out.status.success() || !created {
        return Err(failed(program, last_line(&status, &out.status)));
    }
    signature(program, out.stdout)
}

/// `ssh-keygen -Y sign` as git runs it, through temporary files.
fn ssh(program: &str, payload: &[u8], key: Option<String>) -> Result<String, Error> {
    let key = key.ok_or_else(|| {
        failed(
            program,
            "gpg.format is ssh but user.signingkey is not set (a key file, or a public key for the agent)",
        )
    })?;
    let dir = tempfile::tempdir().map_err(|e| failed(program, e.to_string()))?;
    let buffer = dir.path().join("payload");
    std::fs::write(&buffer, payload).map_err(|e| failed(program, e.to_string()))?;
    let mut cmd = Command::new(program);
    cmd.args(["-Y", "sign", "-n", "git", "-f"]);
    let literal = key
        .strip_prefix("key::")
        .map(str::to_owned)
        .or_else(|| key.starts_with("ssh-").then(|| key.clone()));
    match literal {
        // A public key: the agent holds its private half.
        Some(public) => {
            let file = dir.path().join("key.pub");
            std::fs::write(&file, format!("{public}\n"))
                .map_err(|e| failed(program, e.to_string()))?;
            cmd.arg("-U").arg(&file);
        }
        None => {
            let path = key.strip_prefix("~/").map_or_else(
                || std::path::PathBuf::from(&key),
                |rest| {
                    std::env::var_os("HOME")
                        .map(std::path::PathBuf::from)
                        .unwrap_or_default()
                        .join(rest)
                },
            );
            cmd.arg(path);
        }
    }
    let out = cmd
        .arg(&buffer)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed(program, format!("cannot run it: {e}")))?;
    if !out.status.success() {
        return Err(failed(
            program,
            last_line(&String::from_utf8_lossy(&out.stderr), &out.status),
        ));
    }
    let sig = std::fs::read(dir.path().join("payload.sig"))
        .map_err(|e| failed(program, format!("no signature written: {e}")))?;
    signature(program, sig)
}

fn signature(program: &str, bytes: Vec<u8>) -> Result<String, Error> {
    let text =
        String::from_utf8(bytes).map_err(|_| failed(program, "the signature is not text"))?;
    let text = text.trim_end_matches('\n');
    if text.is_empty() {
        return Err(failed(program, "it wrote no signature"));
    }
    Ok(text.to_owned())
}

/// The last non-status line of a signing program's stderr, else its exit status.
fn last_line(stderr: &str, status: &std::process::ExitStatus) -> String {
    stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("[GNUPG:]"))
        .map_or_else(|| status.to_string(), |l| l.trim().to_owned())
}

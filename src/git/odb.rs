//! Writing and reading objects, below everything that keeps state: commits
//! with the configured identity (a missing one is a typed error, the user's
//! to fix), signed as `git commit -S` signs when `commit.gpgsign` asks (gix
//! runs the configured signer), small loose blobs read without mapping, and
//! objects staged in memory written out only where a tree reaches them.

use gix::hash::ObjectId;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `user.name` / `user.email` (or `GIT_AUTHOR_*`, `GIT_COMMITTER_*`) unset.
    #[error("no {who} identity is configured")]
    MissingIdentity { who: &'static str },
    /// `commit.gpgsign` is set and the signing program failed, or the signing
    /// configuration names none (e.g. an unknown `gpg.format`, ssh without a key).
    #[error("signing the merge commit with {program} failed: {detail}")]
    Signing { program: String, detail: String },
    #[error(transparent)]
    Git(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Error {
    fn from_gix(e: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error::Git(Box::new(e))
    }
}

impl crate::sys::error::Diagnosis for Error {
    fn exit_code(&self) -> crate::sys::error::ExitCode {
        match self {
            Error::MissingIdentity { .. } | Error::Signing { .. } => {
                crate::sys::error::ExitCode::Usage
            }
            Error::Git(_) => crate::sys::error::ExitCode::Fatal,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            Error::MissingIdentity { .. } => {
                Some("set user.name and user.email with 'git config'".into())
            }
            Error::Signing { .. } => Some(
                "check gpg.format, user.signingkey and the signing program with 'git commit -S --allow-empty -m test', or unset commit.gpgsign".into(),
            ),
            Error::Git(_) => None,
        }
    }
}

/// How often an operation that lost a race with git's own maintenance is
/// tried again.
const TRANSIENT_RETRIES: u32 = 10;

/// Run `op`, which writes (or reads) objects, again when it failed the way
/// git's maintenance beside us makes such a failure transient (see
/// [`crate::sys::failure::is_transient_object_error`]). Objects are named by their
/// content: writing one again is harmless.
pub fn retry_transient<T, E>(
    mut op: impl FnMut() -> std::result::Result<T, E>,
) -> std::result::Result<T, E>
where
    E: std::error::Error + 'static,
{
    let mut tries = 0;
    loop {
        match op() {
            Err(e)
                if tries < TRANSIENT_RETRIES
                    && crate::sys::failure::is_transient_object_error(&e) =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(u64::from(tries) * 2));
            }
            done => return done,
        }
    }
}

/// Write `object` as a loose object even when the object database has it
/// already: what gix finds there may sit in a pack that a `git repack -a -d`
/// beside us is about to delete (an object no ref reaches is dropped from
/// it, and gix's view of the packs can be older than the disk). A fresh
/// loose copy outlives that until a ref of ours reaches it. Retried as
/// [`retry_transient`] says.
pub fn write_fresh(
    repo: &gix::Repository,
    object: &dyn gix::objs::WriteTo,
) -> std::result::Result<ObjectId, gix::Error> {
    use gix::objs::Write as _;
    retry_transient(|| repo.objects.write(object))
}

/// [`write_fresh`] for an object given as its kind and encoded bytes.
pub fn write_fresh_buf(
    repo: &gix::Repository,
    kind: gix::objs::Kind,
    data: &[u8],
) -> std::result::Result<ObjectId, gix::Error> {
    use gix::objs::Write as _;
    retry_transient(|| repo.objects.write_buf(kind, data))
}

/// Write each of `ids` again as [`write_fresh`] would have: for objects
/// gix wrote (or found, and did not write) on its own.
pub fn refresh(
    repo: &gix::Repository,
    ids: impl IntoIterator<Item = ObjectId>,
) -> std::result::Result<(), gix::Error> {
    for id in ids {
        let object = repo.find_object(id)?;
        write_fresh_buf(repo, object.kind, &object.data)?;
    }
    Ok(())
}

/// The object database of `repo` as gix's merges and tree editors use it:
/// read through `repo`, written as [`write_fresh`] writes.
pub struct Fresh<'r>(pub &'r gix::Repository);

impl gix::objs::Write for Fresh<'_> {
    fn write(&self, object: &dyn gix::objs::WriteTo) -> gix::Result<ObjectId> {
        write_fresh(self.0, object)
    }

    fn write_buf(&self, kind: gix::objs::Kind, from: &[u8]) -> gix::Result<ObjectId> {
        write_fresh_buf(self.0, kind, from)
    }

    fn write_buf_with_known_id(
        &self,
        kind: gix::objs::Kind,
        from: &[u8],
        _id: ObjectId,
    ) -> gix::Result<ObjectId> {
        write_fresh_buf(self.0, kind, from)
    }

    fn write_stream(
        &self,
        kind: gix::objs::Kind,
        _size: u64,
        from: &mut dyn std::io::Read,
    ) -> gix::Result<ObjectId> {
        let mut data = Vec::new();
        from.read_to_end(&mut data)
            .map_err(gix::Error::from_error)?;
        write_fresh_buf(self.0, kind, &data)
    }

    fn write_stream_with_known_id(
        &self,
        kind: gix::objs::Kind,
        size: u64,
        from: &mut dyn std::io::Read,
        _id: ObjectId,
    ) -> gix::Result<ObjectId> {
        self.write_stream(kind, size, from)
    }
}

impl gix::objs::Find for Fresh<'_> {
    fn try_find<'a>(
        &self,
        id: &gix::hash::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'a>>> {
        gix::objs::Find::try_find(self.0, id, buffer)
    }
}

impl gix::objs::FindHeader for Fresh<'_> {
    fn try_header(&self, id: &gix::hash::oid) -> gix::Result<Option<gix::objs::Header>> {
        gix::objs::FindHeader::try_header(self.0, id)
    }
}

/// Write a commit with the configured author and committer and return its
/// id. `Repository::new_commit` also reads the new commit back from disk to
/// return it decoded, a loose-object read per commit we never look at.
pub fn write_commit(
    repo: &gix::Repository,
    message: &str,
    tree: ObjectId,
    parents: impl IntoIterator<Item = ObjectId>,
) -> Result<ObjectId, Error> {
    let commit = new_commit(repo, message, tree, parents)?;
    write_fresh(repo, &commit).map_err(Error::from_gix)
}

/// [`write_commit`] for a commit `git commit` would sign: when
/// `commit.gpgsign` is set, signed through gix as git signs (`gpg.format`
/// openpgp, x509 or ssh, `user.signingkey` or, for ssh,
/// `gpg.ssh.defaultKeyCommand`, `gpg.program` / `gpg.<format>.program`), so
/// branches that only take signed commits take it. A signer that fails, or
/// signing configuration gix cannot resolve, is [`Error::Signing`].
pub fn write_signed_commit(
    repo: &gix::Repository,
    message: &str,
    tree: ObjectId,
    parents: impl IntoIterator<Item = ObjectId>,
) -> Result<ObjectId, Error> {
    let commit = new_commit(repo, message, tree, parents)?;
    let options = repo.commit_signing_options_if_enabled().map_err(|e| {
        // No signer resolved: name the configuration gix could not resolve,
        // as `gpg.format=<format>`.
        let format = repo
            .config_snapshot()
            .string("gpg.format")
            .map_or_else(|| "openpgp".into(), |f| f.to_string());
        signing_error(&e, format!("gpg.format={format}"))
    })?;
    let commit = match options {
        Some(options) => {
            let program = std::path::Path::new(&options.program).display().to_string();
            commit
                .sign(options)
                .map_err(|e| signing_error(&e, program))?
        }
        None => commit,
    };
    write_fresh(repo, &commit).map_err(Error::from_gix)
}

/// [`Error::Signing`] for what gix reports: the program is the one gix names
/// (the signer, or `gpg.ssh.defaultKeyCommand`), else `fallback`; the
/// detail is the program's stderr (without gpg's `[GNUPG:]` status lines,
/// one line) where gix kept it, else gix's own messages and the exit status.
fn signing_error(e: &gix::Error, fallback: String) -> Error {
    use gix::error::{Message, MetadataValue};
    let values = e.metadata_merged();
    let program = match values.get("program") {
        Some(MetadataValue::Path(path)) => path.display().to_string(),
        Some(other) => other.to_string(),
        None => fallback,
    };
    let stderr = match values.get("stderr") {
        Some(MetadataValue::Bytes(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        Some(MetadataValue::String(text)) => text.clone(),
        _ => String::new(),
    };
    let stderr: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("[GNUPG:]"))
        .collect();
    let detail = if stderr.is_empty() {
        let mut chain: Vec<String> = e
            .iter_errors()
            .map(|e| match e.downcast_ref::<Message>() {
                Some(m) => m.message.to_string(),
                None => e.to_string(),
            })
            .collect();
        chain.dedup();
        if let Some(MetadataValue::String(status)) = values.get("exit_status") {
            chain.push(status.clone());
        }
        chain.join(": ")
    } else {
        stderr.join("; ")
    };
    Error::Signing { program, detail }
}

fn new_commit(
    repo: &gix::Repository,
    message: &str,
    tree: ObjectId,
    parents: impl IntoIterator<Item = ObjectId>,
) -> Result<gix::objs::Commit, Error> {
    fn identity<'a>(
        who: &'static str,
        sig: Option<Result<gix::actor::SignatureRef<'a>, gix::Error>>,
    ) -> Result<gix::actor::SignatureRef<'a>, Error> {
        match sig {
            Some(sig) => sig.map_err(Error::from_gix),
            None => Err(Error::MissingIdentity { who }),
        }
    }
    Ok(gix::objs::Commit {
        message: message.into(),
        tree,
        author: identity("author", repo.author())?.into(),
        committer: identity("committer", repo.committer())?.into(),
        encoding: None,
        parents: parents.into_iter().collect(),
        extra_headers: Default::default(),
    })
}

/// Fail with [`Error::MissingIdentity`] now, before anything is written,
/// when a commit could not be made.
pub fn check_identity(repo: &gix::Repository) -> Result<(), Error> {
    for (who, sig) in [("author", repo.author()), ("committer", repo.committer())] {
        match sig {
            Some(sig) => drop(sig.map_err(Error::from_gix)?),
            None => return Err(Error::MissingIdentity { who }),
        }
    }
    Ok(())
}

/// Write to the object database each object of `staged` that `tree` reaches
/// (`tree` included), fresh (see [`write_fresh`]).
pub fn write_reachable(
    repo: &gix::Repository,
    staged: &gix::odb::memory::Storage,
    tree: ObjectId,
) -> Result<(), Error> {
    let mut pending = vec![tree];
    while let Some(id) = pending.pop() {
        let Some((kind, data)) = staged.get(&id) else {
            continue;
        };
        write_fresh_buf(repo, *kind, data).map_err(Error::from_gix)?;
        if *kind == gix::objs::Kind::Tree {
            for entry in gix::objs::TreeRefIter::from_bytes(data, repo.object_hash()) {
                pending.push(entry.map_err(Error::from_gix)?.oid.to_owned());
            }
        }
    }
    Ok(())
}

/// Reads small loose blobs with plain `read` calls. gix maps every loose
/// object into memory, and thousands of `mmap`/`munmap` pairs cost more than
/// the reading itself, more so from several threads of one process.
#[derive(Default)]
pub struct LooseReader {
    file: Vec<u8>,
    object: Vec<u8>,
    inflate: gix::zlib::Inflate,
}

impl LooseReader {
    /// Largest object read here; anything else is left to gix.
    const MAX_OBJECT: usize = 1 << 20;

    /// The content of blob `id` if it is a loose object in `objects_dir` that
    /// decodes cleanly; `None` (let gix read it, and report any problem) otherwise.
    pub fn read_blob(&mut self, objects_dir: &std::path::Path, id: &ObjectId) -> Option<&[u8]> {
        use std::io::Read;
        let hex = id.to_hex().to_string();
        let path = objects_dir.join(&hex[..2]).join(&hex[2..]);
        let file = std::fs::File::open(path).ok()?;
        self.file.clear();
        file.take(Self::MAX_OBJECT as u64)
            .read_to_end(&mut self.file)
            .ok()?;
        self.object
            .resize((self.file.len() * 8).clamp(4096, Self::MAX_OBJECT), 0);
        self.inflate.reset();
        let (status, consumed, written) = self.inflate.once(&self.file, &mut self.object).ok()?;
        if status != gix::zlib::Status::StreamEnd || consumed == 0 {
            return None;
        }
        let object = &self.object[..written];
        let nul = object.iter().take(32).position(|&b| b == 0)?;
        let size: usize = std::str::from_utf8(object[..nul].strip_prefix(b"blob ")?)
            .ok()?
            .parse()
            .ok()?;
        let body = &object[nul + 1..];
        (body.len() == size).then_some(body)
    }
}

#[cfg(test)]
mod tests {
    use super::{write_signed_commit, Error};
    use crate::testutil::{git, git_command, git_with_input, scratch};
    use std::path::{Path, PathBuf};

    const DATE: &str = "1700000000 +0100";

    /// An object a ref or tree names but the packs do not hold (yet: `git
    /// repack` swapping them) is looked up again; a miss that lasts is
    /// reported after the retries, with gix's error.
    #[test]
    fn a_missing_object_is_looked_up_again_then_reported() {
        let fixture = Fixture::new(&[]);
        let repo = gix::open_opts(&fixture.dir, gix::open::Options::isolated()).expect("open");
        let missing =
            gix::ObjectId::from_hex(b"1111111111111111111111111111111111111111").expect("id");
        let mut tries = 0;
        let found = super::retry_transient(|| {
            tries += 1;
            repo.find_object(if tries < 3 { missing } else { fixture.tree })
                .map(|o| o.id)
        });
        assert_eq!(found.expect("found on the third try"), fixture.tree);
        assert_eq!(tries, 3);
        let mut tries = 0;
        let lasting = super::retry_transient(|| {
            tries += 1;
            repo.find_object(missing).map(|o| o.id)
        });
        assert!(lasting.is_err_and(|e| e.to_string().contains("could not be found")));
        assert_eq!(tries, super::TRANSIENT_RETRIES + 1);
    }

    /// A repository with `config` set, and the empty tree in it.
    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        dir: PathBuf,
        tree: gix::ObjectId,
    }

    impl Fixture {
        fn new(config: &[(&str, &str)]) -> Fixture {
            let (tmp, root) = scratch();
            let dir = crate::testutil::new_repo(&root, "repo");
            for (k, v) in [
                ("user.name", "Arbiter Test"),
                ("user.email", "test@example.com"),
            ]
            .iter()
            .chain(config)
            {
                git(&root, &dir, &["config", k, v]);
            }
            let out = git_with_input(&root, &dir, &["mktree"], b"");
            let tree = String::from_utf8(out.stdout).expect("utf-8");
            let tree = gix::ObjectId::from_hex(tree.trim().as_bytes()).expect("tree id");
            Fixture {
                _tmp: tmp,
                root,
                dir,
                tree,
            }
        }

        /// An executable `name` in the scratch folder running `script`.
        fn script(&self, name: &str, script: &str) -> PathBuf {
            use std::os::unix::fs::PermissionsExt as _;
            let path = self.root.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{script}")).expect("script");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            path
        }

        /// The commit we write, signed as configured, at a fixed date.
        fn ours(&self) -> Result<gix::ObjectId, Error> {
            let repo = gix::open_opts(
                &self.dir,
                gix::open::Options::isolated().config_overrides([
                    format!("gitoxide.commit.authorDate={DATE}"),
                    format!("gitoxide.commit.committerDate={DATE}"),
                ]),
            )
            .expect("open");
            write_signed_commit(&repo, "signed\n", self.tree, None)
        }

        /// The commit `git commit-tree -S` writes at the same date.
        fn gits(&self) -> gix::ObjectId {
            let out = git_command(&self.root, &self.dir)
                .args(["commit-tree", "-S", "-m", "signed"])
                .arg(self.tree.to_string())
                .env("GIT_AUTHOR_DATE", DATE)
                .env("GIT_COMMITTER_DATE", DATE)
                .output()
                .expect("git runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let id = String::from_utf8(out.stdout).expect("utf-8");
            gix::ObjectId::from_hex(id.trim().as_bytes()).expect("commit id")
        }

        /// The signature header of commit `id`, as git reads it.
        fn gpgsig(&self, id: gix::ObjectId) -> String {
            let out = self.git(&["cat-file", "commit", &id.to_string()]);
            let commit = String::from_utf8(out.stdout).expect("utf-8");
            let header = commit.split("\n\n").next().expect("headers");
            header
                .split_once("\ngpgsig ")
                .map(|(_, sig)| sig.to_owned())
                .unwrap_or_default()
        }

        fn git(&self, args: &[&str]) -> std::process::Output {
            git_command(&self.root, &self.dir)
                .args(args)
                .output()
                .expect("git runs")
        }
    }

    fn signing(result: Result<gix::ObjectId, Error>) -> (String, String) {
        match result {
            Err(Error::Signing { program, detail }) => (program, detail),
            other => panic!("not a signing error: {other:?}"),
        }
    }

    /// A stand-in for gpg / gpgsm that signs deterministically, the way the
    /// real ones are driven: payload on stdin, armored signature (CRLF, as on
    /// Windows) on stdout, status lines on stderr; it logs its arguments.
    fn fake_gpg(f: &Fixture, armor: &str) -> PathBuf {
        let log = f.root.join("args.log");
        f.script(
            armor,
            &format!(
                "echo \"$*\" >> '{log}'\n\
                 sum=$(sha256sum | cut -d' ' -f1)\n\
                 printf -- '-----BEGIN {armor}-----\\r\\n\\r\\n%s\\r\\n-----END {armor}-----\\r\\n' \"$sum\"\n\
                 echo '[GNUPG:] KEY_CONSIDERED 0 0' >&2\n\
                 echo '[GNUPG:] SIG_CREATED D 22 8 00 1700000000 0' >&2\n",
                log = log.display()
            ),
        )
    }

    /// OpenPGP (the default format, keyed by the committer identity) and
    /// X.509 (keyed by `user.signingkey`): the signer runs with git's
    /// arguments on git's payload, and the commit is byte for byte git's.
    #[test]
    fn gpg_formats_sign_as_git_signs() {
        for (format, armor, program_key, key) in [
            ("openpgp", "PGP SIGNATURE", "gpg.program", None),
            (
                "x509",
                "SIGNED MESSAGE",
                "gpg.x509.program",
                Some("0xDEADBEEF"),
            ),
        ] {
            let f = Fixture::new(&[("commit.gpgsign", "true"), ("gpg.format", format)]);
            let program = fake_gpg(&f, armor);
            f.git(&["config", program_key, program.to_str().expect("utf-8")]);
            if let Some(key) = key {
                f.git(&["config", "user.signingkey", key]);
            }
            let ours = f.ours().expect("signed");
            let ours_args = std::fs::read_to_string(f.root.join("args.log")).expect("ran");
            std::fs::remove_file(f.root.join("args.log")).expect("log");
            let gits = f.gits();
            let gits_args = std::fs::read_to_string(f.root.join("args.log")).expect("ran");
            assert_eq!(ours, gits, "{format}");
            let sig = f.gpgsig(ours);
            assert!(
                sig.starts_with(&format!("-----BEGIN {armor}-----\n \n "))
                    && sig.ends_with(&format!("\n -----END {armor}-----"))
                    && !sig.contains('\r'),
                "{sig:?}"
            );
            assert_eq!(ours_args, gits_args, "{format}");
            let expected_key = key.unwrap_or("Arbiter Test <test@example.com>");
            assert_eq!(ours_args, format!("--status-fd=2 -bsau {expected_key}\n"));
        }
    }

    /// `ssh-agent -D` on a socket in `root`, ended when dropped.
    struct Agent {
        child: std::process::Child,
        socket: PathBuf,
    }

    impl Agent {
        fn start(root: &Path, key: &Path) -> Agent {
            let socket = root.join("agent.sock");
            let child = std::process::Command::new("ssh-agent")
                .arg("-D")
                .arg("-a")
                .arg(&socket)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("ssh-agent");
            let agent = Agent { child, socket };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while !agent.socket.exists() {
                assert!(std::time::Instant::now() < deadline, "no agent socket");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let added = std::process::Command::new("ssh-add")
                .arg("-q")
                .arg(key)
                .env("SSH_AUTH_SOCK", &agent.socket)
                .output()
                .expect("ssh-add");
            assert!(
                added.status.success(),
                "{}",
                String::from_utf8_lossy(&added.stderr)
            );
            agent
        }
    }

    impl Drop for Agent {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// SSH with a key file, a literal public key (`key::…` and `ssh-…`)
    /// signed by the agent, and a key from `gpg.ssh.defaultKeyCommand`:
    /// Ed25519 signatures are deterministic, so the commit is byte for byte
    /// the one `git commit-tree -S` writes, and `git verify-commit` takes it.
    #[test]
    fn ssh_signs_as_git_signs() {
        let f = Fixture::new(&[("commit.gpgsign", "true"), ("gpg.format", "ssh")]);
        let key = f.root.join("key");
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
            .arg(&key)
            .status()
            .expect("ssh-keygen");
        assert!(made.success());
        let public = key.with_extension("pub");
        let public_text = std::fs::read_to_string(&public).expect("public key");
        let public_text = public_text.trim();
        let allowed = f.root.join("allowed_signers");
        std::fs::write(&allowed, format!("test@example.com {public_text}\n")).expect("allowed");
        f.git(&[
            "config",
            "gpg.ssh.allowedSignersFile",
            allowed.to_str().expect("utf-8"),
        ]);
        let agent = Agent::start(&f.root, &key);
        // The agent is found through the signing program's environment:
        // neither git nor gix gets it from anywhere else.
        let program = f.script(
            "ssh-keygen-agent",
            &format!(
                "SSH_AUTH_SOCK='{}' exec ssh-keygen \"$@\"\n",
                agent.socket.display()
            ),
        );
        f.git(&[
            "config",
            "gpg.ssh.program",
            program.to_str().expect("utf-8"),
        ]);
        let literal = format!("key::{public_text}");
        for (signingkey, default_key_command) in [
            (Some(key.to_str().expect("utf-8")), None),
            (Some(literal.as_str()), None),
            (Some(public_text), None),
            (None, Some(format!("cat {}", public.display()))),
        ] {
            let _ = f.git(&["config", "--unset", "user.signingkey"]);
            let _ = f.git(&["config", "--unset", "gpg.ssh.defaultKeyCommand"]);
            if let Some(signingkey) = signingkey {
                f.git(&["config", "user.signingkey", signingkey]);
            }
            if let Some(command) = &default_key_command {
                f.git(&["config", "gpg.ssh.defaultKeyCommand", command]);
            }
            let ours = f.ours().expect("signed");
            assert_eq!(ours, f.gits(), "{signingkey:?} {default_key_command:?}");
            assert!(
                f.gpgsig(ours)
                    .starts_with("-----BEGIN SSH SIGNATURE-----\n "),
                "{}",
                f.gpgsig(ours)
            );
            let verified = f.git(&["verify-commit", &ours.to_string()]);
            assert!(
                verified.status.success(),
                "{}",
                String::from_utf8_lossy(&verified.stderr)
            );
        }
    }

    /// Whatever stops signing is [`Error::Signing`], naming the program (or
    /// the configuration when none could be resolved) and why.
    #[test]
    fn a_signer_that_fails_is_a_signing_error() {
        let f = Fixture::new(&[("commit.gpgsign", "true")]);
        let program = f.script(
            "gpg",
            "cat > /dev/null\n\
             echo '[GNUPG:] KEY_CONSIDERED 0 0' >&2\n\
             echo 'gpg: skipped \"Arbiter Test <test@example.com>\": No secret key' >&2\n\
             echo 'gpg: signing failed: No secret key' >&2\n\
             exit 2\n",
        );
        f.git(&["config", "gpg.program", program.to_str().expect("utf-8")]);
        let (name, detail) = signing(f.ours());
        assert_eq!(name, program.display().to_string());
        assert_eq!(
            detail,
            "gpg: skipped \"Arbiter Test <test@example.com>\": No secret key; gpg: signing failed: No secret key"
        );

        // A signer that exits 0 without `SIG_CREATED`: gix keeps nothing of
        // its stderr (git shows it).
        let program = f.script("gpg-silent", "cat > /dev/null\necho signature\n");
        f.git(&["config", "gpg.program", program.to_str().expect("utf-8")]);
        let (name, detail) = signing(f.ours());
        assert_eq!(name, program.display().to_string());
        assert!(detail.contains("SIG_CREATED"), "{detail}");

        let missing = f.root.join("no-such-gpg");
        f.git(&["config", "gpg.program", missing.to_str().expect("utf-8")]);
        let (name, detail) = signing(f.ours());
        assert_eq!(name, missing.display().to_string());
        assert!(detail.contains("No such file or directory"), "{detail}");

        f.git(&["config", "gpg.format", "cms"]);
        let (name, detail) = signing(f.ours());
        assert_eq!(name, "gpg.format=cms");
        assert!(detail.contains("Unsupported signature format"), "{detail}");

        f.git(&["config", "gpg.format", "ssh"]);
        let (name, detail) = signing(f.ours());
        assert_eq!(name, "gpg.format=ssh");
        assert!(detail.contains("user.signingKey"), "{detail}");

        f.git(&["config", "gpg.ssh.defaultKeyCommand", "false"]);
        let (name, detail) = signing(f.ours());
        assert_eq!(name, "false");
        assert_eq!(detail, "gpg.ssh.defaultKeyCommand failed: exit status: 1");

        f.git(&["config", "user.signingkey", "/nonexistent/key"]);
        let (name, detail) = signing(f.ours());
        assert_eq!(name, "ssh-keygen");
        assert!(detail.contains("/nonexistent/key"), "{detail}");
    }

    /// Without `commit.gpgsign` the commit is `git commit-tree`'s, unsigned.
    #[test]
    fn unsigned_without_gpgsign() {
        let f = Fixture::new(&[("gpg.program", "/nonexistent/gpg")]);
        let ours = f.ours().expect("written");
        let gits = git_command(&f.root, &f.dir)
            .args(["commit-tree", "-m", "signed"])
            .arg(f.tree.to_string())
            .env("GIT_AUTHOR_DATE", DATE)
            .env("GIT_COMMITTER_DATE", DATE)
            .output()
            .expect("git");
        let gits = String::from_utf8(gits.stdout).expect("utf-8");
        assert_eq!(ours.to_string(), gits.trim());
    }
}

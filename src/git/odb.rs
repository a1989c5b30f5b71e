//! Writing and reading objects, below everything that keeps state: commits
//! with the configured identity (a missing one is a typed error, the user's
//! to fix), small loose blobs read without mapping, and objects staged in
//! memory written out only where a tree reaches them.

use gix::hash::ObjectId;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `user.name` / `user.email` (or `GIT_AUTHOR_*`, `GIT_COMMITTER_*`) unset.
    #[error("no {who} identity is configured")]
    MissingIdentity { who: &'static str },
    /// `commit.gpgsign` is set and the signing program failed.
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

/// [`write_commit`] for a commit `git commit` would sign: signed as git signs
/// when `commit.gpgsign` is set (`gpg.format` openpgp, x509 or ssh,
/// `user.signingkey`, `gpg.program` / `gpg.<format>.program`), so branches
/// that only take signed commits take it.
pub fn write_signed_commit(
    repo: &gix::Repository,
    message: &str,
    tree: ObjectId,
    parents: impl IntoIterator<Item = ObjectId>,
) -> Result<ObjectId, Error> {
    let mut commit = new_commit(repo, message, tree, parents)?;
    let config = repo.config_snapshot();
    if config.boolean("commit.gpgsign") == Some(true) {
        let mut payload = Vec::new();
        gix::objs::WriteTo::write_to(&commit, &mut payload).map_err(Error::from_gix)?;
        let signature =
            crate::git::sign::sign(&config, &payload, &commit.committer).map_err(|e| {
                Error::Signing {
                    program: e.program,
                    detail: e.detail,
                }
            })?;
        commit
            .extra_headers
            .push(("gpgsig".into(), signature.into()));
    }
    write_fresh(repo, &commit).map_err(Error::from_gix)
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

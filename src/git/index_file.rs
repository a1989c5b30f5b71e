//! The index file as git writes it where gix 0.90 does not: a version 4
//! index keeps its compressed paths, and the cache tree (`TREE`) is kept
//! valid across a landing. A user's index then stays as `git merge` leaves
//! it: same version, and a cache tree the next `git commit` uses instead of
//! hashing every tree again (gitformat-index(5)).

use std::collections::{HashMap, HashSet};

use gix::bstr::ByteSlice;
use gix::index::extension::Tree;
use gix::index::{entry, State, Version};
use gix::ObjectId;

use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("serializing the index: {source}")]
    Serialize {
        #[source]
        source: gix::Error,
    },
    #[error("serializing the index's cache tree: {source}")]
    SerializeTree {
        #[source]
        source: std::io::Error,
    },
    #[error("counting the index entries: {source}")]
    Count {
        #[source]
        source: std::num::TryFromIntError,
    },
    #[error("serializing an index entry: {source}")]
    SerializeEntry {
        #[source]
        source: std::io::Error,
    },
    #[error("reading tree {tree}: {source}")]
    ReadTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("reading tree {tree}: {source}")]
    DecodeTree {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// Serialize `index` in its own version with its cache tree, if any, and
/// no other optional extension (as git writes by default: no
/// end-of-index-entry marker), without the trailing checksum.
pub(crate) fn encode(index: &State) -> Result<Vec<u8>> {
    let mut data = Vec::with_capacity(index.entries().len() * 80 + 4096);
    if index.version() != Version::V4 {
        // Version 2, or 3 where an entry needs extended flags, as git.
        let options = gix::index::write::Options {
            extensions: gix::index::write::Extensions::Given {
                tree_cache: true,
                end_of_index_entry: false,
            },
            skip_hash: false,
        };
        index
            .write_to(&mut data, options)
            .map_err(|source| Error::Serialize { source })?;
        return Ok(data);
    }
    encode_v4_entries(index, &mut data)?;
    if let Some(tree) = index.tree() {
        tree.write_to(&mut data)
            .map_err(|source| Error::SerializeTree { source })?;
    }
    if index.is_sparse() {
        // The sparse directory marker: a signature and no content.
        data.extend_from_slice(b"sdir");
        data.extend_from_slice(&0u32.to_be_bytes());
    }
    Ok(data)
}

/// The header and entries of a version 4 index: each entry's path is
/// written as the number of bytes to drop from the end of the previous
/// path and the bytes to add, with no padding (git's `ce_write_entry`).
fn encode_v4_entries(index: &State, out: &mut Vec<u8>) -> Result<()> {
    let live = || {
        index
            .entries()
            .iter()
            .filter(|e| !e.flags.contains(entry::Flags::REMOVE))
    };
    let count = u32::try_from(live().count()).map_err(|source| Error::Count { source })?;
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&4u32.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    let mut previous: &[u8] = b"";
    let mut fixed = Vec::with_capacity(128);
    for e in live() {
        let path = e.path(index).as_bytes();
        // The fixed part is what a version 2 entry has before its path.
        fixed.clear();
        e.write_to(&mut fixed, index)
            .map_err(|source| Error::SerializeEntry { source })?;
        fixed.truncate(fixed.len() - path.len() - 1);
        out.extend_from_slice(&fixed);
        let common = previous
            .iter()
            .zip(path)
            .take_while(|(a, b)| a == b)
            .count();
        encode_varint(previous.len() - common, out);
        out.extend_from_slice(&path[common..]);
        out.push(0);
        previous = path;
    }
    Ok(())
}

/// git's offset varint (`varint.c`): 7 bits a byte, most significant
/// first, each continued byte holding one less.
fn encode_varint(mut value: usize, out: &mut Vec<u8>) {
    let mut bytes = [0u8; 16];
    let mut pos = bytes.len() - 1;
    bytes[pos] = (value & 127) as u8;
    loop {
        value >>= 7;
        if value == 0 {
            break;
        }
        value -= 1;
        pos -= 1;
        bytes[pos] = 128 | (value & 127) as u8;
    }
    out.extend_from_slice(&bytes[pos..]);
}

/// Bring the cache tree of `index` (if it has one) up to date after the
/// entries at `changed` file paths were replaced by those of `tree`. A
/// directory holding no changed path keeps its node as it was (its entries
/// did not change); every other node is taken from `tree` where the index
/// matches it there (valid, as `git merge` leaves it) and is marked invalid
/// where it does not (changes the user staged), for git to compute again.
pub(crate) fn refresh_cache_tree<'a>(
    index: &mut State,
    repo: &gix::Repository,
    tree: ObjectId,
    changed: impl Iterator<Item = &'a [u8]>,
) -> Result<()> {
    let Some(old) = index.tree().cloned() else {
        return Ok(());
    };
    let mut touched: HashSet<&[u8]> = HashSet::from([&b""[..]]);
    for path in changed {
        let mut end = path.len();
        while let Some(slash) = path[..end].rfind_byte(b'/') {
            if !touched.insert(&path[..slash]) {
                break;
            }
            end = slash;
        }
    }
    let fresh = Refresh {
        index,
        repo,
        touched: &touched,
    }
    .node(b"", b"", Some(tree), Some(old))?;
    // gix has no setter for the cache tree, only a view of the one there.
    if let (Some(fresh), Some(slot)) = (fresh, index.tree_mut()) {
        *slot = fresh;
    }
    Ok(())
}

struct Refresh<'r> {
    index: &'r State,
    repo: &'r gix::Repository,
    /// Every directory that holds a changed path ("" is the top).
    touched: &'r HashSet<&'r [u8]>,
}

impl Refresh<'_> {
    /// The node of directory `dir` (named `name`), whose tree in the new
    /// tree is `tree` (`None`: not a directory there), given its old node.
    fn node(
        &self,
        dir: &[u8],
        name: &[u8],
        tree: Option<ObjectId>,
        old: Option<Tree>,
    ) -> Result<Option<Tree>> {
        if !self.touched.contains(dir) {
            return Ok(old);
        }
        let below = self.entries_below(dir);
        let Some(tree) = tree else {
            // Gone from the new tree; what the user staged there is not.
            return Ok((below > 0).then(|| Tree {
                name: name.into(),
                id: ObjectId::null(self.index.object_hash()),
                num_entries: None,
                children: Vec::new(),
            }));
        };
        let mut old_children: HashMap<Vec<u8>, Tree> = old
            .map(|t| t.children)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name.to_vec(), c))
            .collect();
        let object = self
            .repo
            .find_tree(tree)
            .map_err(|source| Error::ReadTree { tree, source })?;
        let mut children = Vec::new();
        let mut valid = true;
        let mut count = 0u32;
        for item in object.iter() {
            let item = item.map_err(|source| Error::DecodeTree { tree, source })?;
            let path = join(dir, item.filename());
            if item.mode().is_tree() {
                let old_child = old_children.remove(item.filename().as_bytes());
                match self.node(
                    &path,
                    item.filename(),
                    Some(item.oid().to_owned()),
                    old_child,
                )? {
                    Some(child) => {
                        match child.num_entries {
                            Some(n) => count = count.saturating_add(n),
                            None => valid = false,
                        }
                        children.push(child);
                    }
                    None => valid = false,
                }
            } else {
                count = count.saturating_add(1);
                let same = self
                    .index
                    .entry_by_path_and_stage(path.as_bstr(), entry::Stage::Unconflicted)
                    .is_some_and(|e| {
                        e.id == item.oid()
                            && e.mode.bits() == u32::from(item.mode().value())
                            && !e.flags.contains(entry::Flags::INTENT_TO_ADD)
                    });
                valid &= same;
            }
        }
        // An entry the user added there, or a conflict, is not in the tree.
        valid &= usize::try_from(count).is_ok_and(|c| c == below);
        // git orders subtrees by name length first, then by bytes.
        children.sort_by(|a, b| (a.name.len(), &a.name).cmp(&(b.name.len(), &b.name)));
        Ok(Some(Tree {
            name: name.into(),
            id: tree,
            num_entries: valid.then_some(count),
            children,
        }))
    }

    /// How many index entries lie below `dir` ("" is the top).
    fn entries_below(&self, dir: &[u8]) -> usize {
        if dir.is_empty() {
            return self.index.entries().len();
        }
        let mut prefix = dir.to_vec();
        prefix.push(b'/');
        self.index
            .prefixed_entries_range(prefix.as_bstr())
            .map_or(0, |range| range.len())
    }
}

fn join(dir: &[u8], name: &gix::bstr::BStr) -> Vec<u8> {
    let mut path = Vec::with_capacity(dir.len() + name.len() + 1);
    if !dir.is_empty() {
        path.extend_from_slice(dir);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

#[cfg(test)]
mod tests {
    use super::encode_varint;
    use crate::testutil::{git, new_repo, scratch};

    /// What git wrote, read by gix and encoded again, is byte for byte
    /// what git wrote: versions 2, 3 (an intent to add) and 4, with a cache
    /// tree valid in part.
    #[test]
    fn an_index_git_wrote_is_encoded_as_git_wrote_it() {
        let (_tmp, root) = scratch();
        for version in ["2", "3", "4"] {
            let dir = new_repo(&root, &format!("v{version}"));
            git(&root, &dir, &["config", "index.version", version]);
            for path in [
                "src/lib/one.rs",
                "src/lib/one_more.rs",
                "src/lib/two.rs",
                "src/main.rs",
                "src2/x",
                "top",
            ] {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
                std::fs::write(file, path).expect("write");
            }
            git(&root, &dir, &["add", "-A"]);
            git(&root, &dir, &["commit", "-q", "-m", "init"]);
            std::fs::write(dir.join("src/lib/two.rs"), "changed").expect("write");
            git(&root, &dir, &["add", "src/lib/two.rs"]);
            if version == "3" {
                std::fs::write(dir.join("new"), "n").expect("write");
                git(&root, &dir, &["add", "-N", "new"]);
            }
            let path = dir.join(".git/index");
            let bytes = std::fs::read(&path).expect("index");
            assert_eq!(
                bytes[7],
                version.parse::<u8>().unwrap(),
                "git wrote v{version}"
            );
            let index =
                gix::index::File::at(&path, gix::hash::Kind::Sha1, false, Default::default())
                    .expect("read");
            let mut ours = super::encode(&index).expect("encode");
            let checksum =
                crate::git::splitindex::checksum_of(gix::hash::Kind::Sha1, &ours).expect("hash");
            ours.extend_from_slice(checksum.as_slice());
            assert!(ours == bytes, "version {version}: the bytes differ");
        }
    }

    #[test]
    fn varints_are_git_s() {
        let enc = |v| {
            let mut out = Vec::new();
            encode_varint(v, &mut out);
            out
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(127), [127]);
        // git: 128 is 0x80 0x00, 16511 is 0xff 0x7f, 16512 is 0x80 0x80 0x00.
        assert_eq!(enc(128), [0x80, 0x00]);
        assert_eq!(enc(16511), [0xff, 0x7f]);
        assert_eq!(enc(16512), [0x80, 0x80, 0x00]);
    }
}

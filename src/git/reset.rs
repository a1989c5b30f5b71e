//! `git reset --hard` and `git read-tree -m -u` as git does them, for a
//! worktree whose files nobody edits (a pooled one between two work orders;
//! the pool decides when), built on the two-way checkout of
//! [`crate::git::checkout`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use gix::bstr::ByteSlice;
use gix::ObjectId;

use crate::git::checkout::{
    apply, apply_from_tree, apply_split_in_place, in_place_options, remove_paths, sparse_patterns,
    write_files,
};
use crate::git::diff::Changed;
use crate::git::index_lock::{clear_our_stale_index_lock, read_index, IndexLock};
use crate::git::index_memo::{holds, remember_holds};
use crate::git::paths::{rel_path, workdir};
use crate::git::splitindex;
use crate::git::stat::stat_suspects;
use crate::git::status::unstaged_changes;
use crate::sys::caches::Caches;
use crate::sys::error::{Diagnosis, ExitCode, Result};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading tree {tree}: {source}")]
    TreeIndex {
        tree: ObjectId,
        #[source]
        source: gix::Error,
    },
    #[error("removing {}: {source}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Diagnosis for Error {
    fn exit_code(&self) -> ExitCode {
        ExitCode::Fatal
    }
}

/// The error of removing `path`, for `map_err`.
fn removing(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Remove {
        path: path.to_owned(),
        source,
    }
}

/// Make the index and tracked files of `wt` hold exactly `tree`, whatever
/// they hold now (`git reset --hard`): a pooled worktree between two work
/// orders, where nobody's edits live (the builder's work is on its branch).
/// Only files that differ from `tree` are written: an entry is skipped when
/// the index has `tree`'s blob there and the file still matches the index.
/// Whatever occupies a path a written file needs (an ignored file or folder)
/// is removed first. Untracked files are the pool's to remove. Returns the
/// index now on disk and its checksum.
pub(crate) fn reset_to(
    caches: &Caches,
    wt: &gix::Repository,
    tree: ObjectId,
) -> Result<(gix::index::File, Option<ObjectId>)> {
    use gix::index::entry::Flags;
    clear_our_stale_index_lock(wt);
    let dir = workdir(wt)?;
    let old_index = read_index(wt).ok().filter(|ix| !ix.is_sparse());
    // The common case: the builder's work is committed, so the index holds
    // `tree` already and only files whose stat data differ need looking at.
    if let Some(index) = &old_index {
        // Entries git treats specially (no file wanted, changes ignored,
        // not yet added) go the whole way: the reset clears their bits.
        let plain = !index.entries().iter().any(|e| {
            e.flags
                .intersects(Flags::SKIP_WORKTREE | Flags::INTENT_TO_ADD | Flags::ASSUME_VALID)
        });
        if plain && holds(caches, wt, index, tree)? {
            return restore_files(wt, index.clone(), &dir);
        }
    }
    // Files that differ from their index entry must be written again.
    let dirty: BTreeSet<Vec<u8>> = match &old_index {
        Some(ix) => unstaged_changes(wt, Some(ix.clone()))?
            .into_iter()
            .map(String::into_bytes)
            .collect(),
        None => BTreeSet::new(),
    };
    let lock = IndexLock::take(wt)?;
    let mut index = wt
        .index_from_tree(&tree)
        .map_err(|source| Error::TreeIndex { tree, source })?;
    if let Some(old) = &old_index {
        remove_paths(
            &dir,
            old.entries()
                .iter()
                .map(|e| e.path(old).as_bytes())
                .filter(|p| index.entry_by_path(p.as_bstr()).is_none()),
        )?;
    }
    let (skipped, written) = keep_unchanged(&mut index, old_index.as_ref(), &dirty);
    clear_the_way(&dir, written.iter().map(Vec::as_slice), |p| {
        index.entry_by_path(p.as_bstr()).is_some()
    })?;
    write_files(wt, &mut index, &dir, in_place_options(wt)?)?;
    let entries = index.entries_mut();
    for i in skipped {
        entries[i].flags.remove(Flags::SKIP_WORKTREE);
    }
    let checksum = lock.commit(&index, &dir)?;
    Ok((index, Some(checksum)))
}

/// Of `index` (built from the new tree), the entries the old index has
/// with the same blob and mode whose file is clean: they take the old stat
/// data and are marked SKIP_WORKTREE so the checkout leaves their files.
/// Returns their positions, and the paths that must be written.
fn keep_unchanged(
    index: &mut gix::index::State,
    old_index: Option<&gix::index::File>,
    dirty: &BTreeSet<Vec<u8>>,
) -> (Vec<usize>, Vec<Vec<u8>>) {
    use gix::index::entry::Flags;
    let mut skipped = Vec::new();
    let mut written = Vec::new();
    {
        let (entries, paths) = index.entries_mut_and_pathbacking();
        for (i, entry) in entries.iter_mut().enumerate() {
            let path = entry.path_in(paths);
            let same = old_index
                .and_then(|ix| ix.entry_by_path(path))
                .filter(|prev| {
                    prev.id == entry.id
                        && prev.mode == entry.mode
                        && !dirty.contains(path.as_bytes())
                });
            match same {
                Some(prev) => {
                    entry.stat = prev.stat;
                    entry.flags.insert(Flags::SKIP_WORKTREE);
                    skipped.push(i);
                }
                None => written.push(path.to_vec()),
            }
        }
    }
    (skipped, written)
}

/// [`reset_to`] for an index that holds the tree already: the files whose
/// stat data differ from their entry (or that may have changed unseen: racy
/// entries) are written again from their blob, and the index is written with
/// their new stat data. Nothing is written when every file matches.
fn restore_files(
    wt: &gix::Repository,
    mut index: gix::index::File,
    dir: &Path,
) -> Result<(gix::index::File, Option<ObjectId>)> {
    use gix::index::entry::{Flags, Stat};
    let suspects: Vec<usize> = stat_suspects(wt, &index, dir)
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    // An index without a checksum (`index.skipHash`) is written once more
    // with one: the pool recognises its own index by it.
    if let (true, Some(checksum)) = (suspects.is_empty(), index.checksum()) {
        return Ok((index, Some(checksum)));
    }
    let lock = IndexLock::take(wt)?;
    let mut writes = gix::index::State::new(wt.object_hash());
    for &i in &suspects {
        let e = &index.entries()[i];
        writes.dangerously_push_entry(
            Stat::default(),
            e.id,
            Flags::empty(),
            e.mode,
            e.path(&index),
        );
    }
    // The checkout reads `.gitattributes` from the index it is given.
    for (i, e) in index.entries().iter().enumerate() {
        let path = e.path(&index);
        if splitindex::is_attributes_file(path) && suspects.binary_search(&i).is_err() {
            writes.dangerously_push_entry(
                e.stat,
                e.id,
                e.flags | Flags::SKIP_WORKTREE,
                e.mode,
                path,
            );
        }
    }
    writes.sort_entries();
    clear_the_way(
        dir,
        suspects
            .iter()
            .map(|&i| index.entries()[i].path(&index).as_bytes()),
        |p| index.entry_by_path(p.as_bstr()).is_some(),
    )?;
    write_files(wt, &mut writes, dir, in_place_options(wt)?)?;
    for e in writes.entries() {
        if e.flags.contains(Flags::SKIP_WORKTREE) {
            continue;
        }
        if let Some(target) = index
            .entry_mut_by_path_and_stage(e.path(&writes), gix::index::entry::Stage::Unconflicted)
        {
            target.stat = e.stat;
        }
    }
    let checksum = lock.commit(&index, dir)?;
    Ok((index, Some(checksum)))
}

/// Switch the pooled worktree `wt`, whose index and files hold `old_tree`
/// (its index is the one git-arbiter wrote), to `new_tree`: only the files
/// of `changed` are written, and a split index only its split file. False,
/// with nothing touched, when its index is sparse or cannot be read (its
/// shared index removed): the caller resets it.
pub(crate) fn switch_clean(
    caches: &Caches,
    wt: &gix::Repository,
    old_tree: ObjectId,
    new_tree: ObjectId,
    changed: &[Changed],
) -> Result<bool> {
    clear_our_stale_index_lock(wt);
    let dir = workdir(wt)?;
    let small = |entries: usize| changed.len() <= entries / 4 + 64;
    let Ok(split) = splitindex::read(wt) else {
        return Ok(false);
    };
    if let Some(split) = split {
        let added = changed
            .iter()
            .map(|c| c.path.as_slice())
            .filter(|p| !split.has(p.as_bstr()));
        clear_the_way(&dir, added, |p| split.has(p.as_bstr()))?;
        let lock = IndexLock::take(wt)?;
        let in_place = sparse_patterns(wt)?.is_none() && small(split.shared.len());
        let done = match in_place {
            true => apply_split_in_place(wt, split, new_tree, changed)?,
            false => None,
        };
        match done {
            Some(split) => remember_holds(caches, lock.commit_split(&split, &dir)?, new_tree),
            None => apply_from_tree(wt, old_tree, new_tree, lock)?,
        }
        crate::sys::crash::point("checkout-index.after");
        return Ok(true);
    }
    let index = match read_index(wt) {
        Ok(index) if !index.is_sparse() => index,
        _ => return Ok(false),
    };
    let added = changed
        .iter()
        .map(|c| c.path.as_slice())
        .filter(|p| index.entry_by_path(p.as_bstr()).is_none());
    clear_the_way(&dir, added, |p| index.entry_by_path(p.as_bstr()).is_some())?;
    apply(caches, wt, old_tree, new_tree, changed, Some(index))?;
    Ok(true)
}

/// Remove what occupies the place of each of `paths` in `dir` (a file, a
/// link, a whole folder) and any ancestor that is not a folder, unless
/// `tracked` says the index already has that path: in a pooled worktree
/// that is ignored content (build caches), never a user's work.
fn clear_the_way<'a>(
    dir: &Path,
    paths: impl Iterator<Item = &'a [u8]>,
    tracked: impl Fn(&[u8]) -> bool,
) -> Result<()> {
    for path in paths {
        let rel = rel_path(path)?;
        for ancestor in rel.ancestors().skip(1) {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            let abs = dir.join(ancestor);
            if std::fs::symlink_metadata(&abs).is_ok_and(|m| !m.is_dir()) {
                std::fs::remove_file(&abs).map_err(removing(&abs))?;
            }
        }
        let abs = dir.join(&rel);
        match std::fs::symlink_metadata(&abs) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&abs).map_err(removing(&abs))?,
            Ok(_) if !tracked(path) => std::fs::remove_file(&abs).map_err(removing(&abs))?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use gix::ObjectId;

    use super::*;
    use crate::testutil::{commit_tree, outcome, random_tree, Entry};
    use crate::testutil::{copy_of, git, new_repo, scratch, Rng};

    /// Both ways of [`crate::git::checkout::apply`] end where `git read-tree -m -u` does, on
    /// random pairs of trees: same index, same files (kinds, modes, contents,
    /// empty folders gone), and an index whose stat data matches the files.
    #[test]
    fn both_checkout_paths_match_git_read_tree() {
        let (_tmp, root) = scratch();
        let mut rng = Rng(0x005e_ed0f_a2b1_7e25);
        let mut in_place = 0;
        let mut split_in_place = 0;
        for case in 0..40 {
            let (old, new) = (random_tree(&mut rng), random_tree(&mut rng));
            let seed = new_repo(&root, &format!("seed-{case}"));
            let old_commit = commit_tree(&root, &seed, &old, "old");
            let new_commit = commit_tree(&root, &seed, &new, "new");
            git(&root, &seed, &["checkout", "-q", "-f", &old_commit]);
            let copies: Vec<PathBuf> = ["git", "in-place", "from-tree", "split"]
                .iter()
                .map(|way| {
                    let copy = copy_of(&root, &seed, &format!("{way}-{case}"));
                    // A copy has new inodes: let the index take their stat data.
                    git(&root, &copy, &["update-index", "-q", "--refresh"]);
                    copy
                })
                .collect();
            git(
                &root,
                &copies[0],
                &["read-tree", "-m", "-u", &old_commit, &new_commit],
            );
            let want = outcome(&root, &copies[0]);
            assert_eq!(want.2, "", "git left stale entries");

            for (k, copy) in copies[1..].iter().enumerate() {
                let Update {
                    wt,
                    old_tree,
                    new_tree,
                    changed,
                } = update_of(copy, &old_commit, &new_commit);
                if k == 2 {
                    // A pooled worktree's way: its index split first, then
                    // switched by writing the split file only.
                    // Never a new shared index for the few entries here.
                    git(
                        &root,
                        copy,
                        &["config", "splitIndex.maxPercentChange", "100"],
                    );
                    let wt = gix::open_opts(copy, gix::open::Options::isolated()).expect("open");
                    crate::git::index_lock::keep_index_split(&wt).expect("split the index");
                    let shared_before = super::splitindex::read(&wt)
                        .expect("read")
                        .expect("split")
                        .shared_checksum();
                    let switched =
                        switch_clean(&Caches::default(), &wt, old_tree, new_tree, &changed);
                    assert!(switched.expect("switch"), "not sparse");
                    let got = outcome(&root, copy);
                    assert_eq!(got, want, "case {case}, split: {old:?} -> {new:?}");
                    let split = super::splitindex::read(&wt).expect("read").expect("split");
                    let shared = std::fs::read_dir(wt.git_dir())
                        .expect("git dir")
                        .flatten()
                        .filter(|e| e.file_name().to_string_lossy().starts_with("sharedindex."))
                        .count();
                    assert_eq!(shared, 1, "case {case}: one shared index");
                    // The same shared index: only the split file was written.
                    if split.shared_checksum() == shared_before {
                        split_in_place += 1;
                    }
                    continue;
                }
                let lock = crate::git::index_lock::IndexLock::take(&wt).expect("lock");
                if k == 0 {
                    let index = crate::git::index_lock::read_index(&wt).expect("index");
                    match crate::git::checkout::apply_in_place(&wt, index, new_tree, &changed)
                        .expect("in place")
                    {
                        crate::git::checkout::InPlace::Done(index) => {
                            in_place += 1;
                            lock.commit(&index, copy).expect("write index");
                        }
                        crate::git::checkout::InPlace::NotApplicable => continue,
                    }
                } else {
                    crate::git::checkout::apply_from_tree(&wt, old_tree, new_tree, lock)
                        .expect("from tree");
                }
                let got = outcome(&root, copy);
                let way = ["in place", "from the tree"][k];
                assert_eq!(got, want, "case {case}, {way}: {old:?} -> {new:?}");
            }
        }
        // Type changes send some cases to the general path; most stay in place.
        assert!(in_place >= 20, "only {in_place} of 40 cases went in place");
        assert!(
            split_in_place >= 20,
            "only {split_in_place} of 40 split indexes took the changes only"
        );
    }

    /// A small random change of `tree`: entries edited, removed, added, a
    /// file turned into a folder, a link.
    fn mutate(rng: &mut Rng, tree: &mut Vec<(String, Entry)>) {
        let clashes = |tree: &[(String, Entry)], path: &str| {
            tree.iter().any(|(p, _)| {
                p == path
                    || p.starts_with(&format!("{path}/"))
                    || path.starts_with(&format!("{p}/"))
            })
        };
        for _ in 0..rng.below(3) + 1 {
            let n = tree.len() as u64;
            match rng.below(5) {
                0 if n > 0 => {
                    tree.remove(rng.below(n) as usize);
                }
                1 if n > 0 => {
                    let i = rng.below(n) as usize;
                    tree[i].1 = Entry::File {
                        text: format!("{}\n", rng.below(1000)),
                        executable: rng.below(4) == 0,
                    };
                }
                2 if n > 0 => {
                    let i = rng.below(n) as usize;
                    let (path, _) = tree.remove(i);
                    let inner = format!("{path}/inner");
                    if !clashes(tree, &inner) {
                        tree.push((
                            inner,
                            Entry::File {
                                text: "in\n".into(),
                                executable: false,
                            },
                        ));
                    }
                }
                3 => {
                    let path = format!(
                        "{}/l{}",
                        ["a", "b", "e/f"][rng.below(3) as usize],
                        rng.below(50)
                    );
                    if !clashes(tree, &path) {
                        tree.push((path, Entry::Link("../a".into())));
                    }
                }
                _ => {
                    let path = format!(
                        "{}/n{}",
                        ["a", "b", "c", "d"][rng.below(4) as usize],
                        rng.below(200)
                    );
                    if !clashes(tree, &path) {
                        tree.push((
                            path,
                            Entry::File {
                                text: format!("{}\n", rng.below(9)),
                                executable: false,
                            },
                        ));
                    }
                }
            }
        }
    }

    /// A pooled worktree's life: its split index switched along a chain of
    /// small random changes, with stock git writing that index between
    /// switches (`git status` refreshes it, `git add -A` rewrites it, and
    /// copies racily clean entries into it), ends every switch where `git
    /// read-tree -m -u` does. Most switches write the split file only; a new
    /// shared index comes when the changes outgrow it.
    #[test]
    fn a_split_index_switched_again_and_again_matches_git_read_tree() {
        let (_tmp, root) = scratch();
        let mut rng = Rng(0x5b11_7a1d_e0c5_0001);
        let seed = new_repo(&root, "seed");
        let mut tree: Vec<(String, Entry)> = (0..40)
            .map(|i| {
                let path = format!("{}/f{i}", ["a", "b", "c", "d"][i % 4]);
                (
                    path,
                    Entry::File {
                        text: format!("{i}\n"),
                        executable: false,
                    },
                )
            })
            .collect();
        let mut commits = vec![commit_tree(&root, &seed, &tree, "0")];
        for k in 1..=30 {
            mutate(&mut rng, &mut tree);
            commits.push(commit_tree(&root, &seed, &tree, &k.to_string()));
        }
        git(&root, &seed, &["checkout", "-q", "-f", &commits[0]]);
        let copies: Vec<PathBuf> = ["git", "split"]
            .iter()
            .map(|way| {
                let copy = copy_of(&root, &seed, way);
                git(&root, &copy, &["update-index", "-q", "--refresh"]);
                copy
            })
            .collect();
        let (by_git, split) = (&copies[0], &copies[1]);
        git(
            &root,
            split,
            &["config", "splitIndex.maxPercentChange", "30"],
        );
        let wt = gix::open_opts(split, gix::open::Options::isolated()).expect("open");
        crate::git::index_lock::keep_index_split(&wt).expect("split the index");
        let (mut in_place, mut shared_anew) = (0, 0);
        for k in 1..commits.len() {
            git(
                &root,
                by_git,
                &["read-tree", "-m", "-u", &commits[k - 1], &commits[k]],
            );
            let Update {
                wt,
                old_tree,
                new_tree,
                changed,
            } = update_of(split, &commits[k - 1], &commits[k]);
            let shared = |wt: &gix::Repository| {
                super::splitindex::read(wt)
                    .expect("read")
                    .expect("split")
                    .shared_checksum()
            };
            let before = shared(&wt);
            let switched = switch_clean(&Caches::default(), &wt, old_tree, new_tree, &changed);
            assert!(switched.expect("switch"), "not sparse");
            git(
                &root,
                split,
                &["update-ref", "--no-deref", "HEAD", &commits[k]],
            );
            assert_eq!(outcome(&root, split), outcome(&root, by_git), "step {k}");
            if shared(&wt) == before {
                in_place += 1;
            } else {
                shared_anew += 1;
            }
            match k % 3 {
                0 => drop(git(&root, split, &["status", "--porcelain"])),
                1 => drop(git(&root, split, &["add", "-A"])),
                _ => {}
            }
        }
        assert!(
            in_place >= 15,
            "{in_place} of 30 switches wrote the split file only"
        );
        assert!(shared_anew >= 1, "no switch outgrew its shared index");
    }

    /// A split index switched in place writes the changed files through the
    /// `.gitattributes` files it keeps (at the top and in a folder), as
    /// `git read-tree -m -u` does: the shared index's attribute files are
    /// found without decoding its entries.
    #[test]
    fn a_split_index_switched_in_place_keeps_applying_its_attributes() {
        let (_tmp, root) = scratch();
        let seed = new_repo(&root, "seed");
        let write = |path: &str, text: &str| {
            let path = seed.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        write(".gitattributes", "*.txt eol=crlf\n");
        write("sub/.gitattributes", "*.txt eol=lf\n");
        write("a.txt", "one\n");
        write("sub/b.txt", "two\n");
        git(&root, &seed, &["add", "-A"]);
        git(&root, &seed, &["commit", "-q", "-m", "old"]);
        let old = git(&root, &seed, &["rev-parse", "HEAD"]).trim().to_owned();
        write("a.txt", "one\nmore\n");
        write("sub/b.txt", "two\nmore\n");
        git(&root, &seed, &["add", "-A"]);
        git(&root, &seed, &["commit", "-q", "-m", "new"]);
        let new = git(&root, &seed, &["rev-parse", "HEAD"]).trim().to_owned();
        git(&root, &seed, &["checkout", "-q", "-f", &old]);
        let by_git = copy_of(&root, &seed, "git");
        let split = copy_of(&root, &seed, "split");
        for copy in [&by_git, &split] {
            git(&root, copy, &["update-index", "-q", "--refresh"]);
        }
        git(&root, &by_git, &["read-tree", "-m", "-u", &old, &new]);
        // Two of four entries change: more than git's 20% would share anew.
        let max = ["config", "splitIndex.maxPercentChange", "100"];
        git(&root, &split, &max);
        let wt = gix::open_opts(&split, gix::open::Options::isolated()).expect("open");
        crate::git::index_lock::keep_index_split(&wt).expect("split the index");
        let shared = |wt: &gix::Repository| {
            super::splitindex::read(wt)
                .expect("read")
                .expect("split")
                .shared_checksum()
        };
        let before = shared(&wt);
        let update = update_of(&split, &old, &new);
        let switched = switch_clean(
            &Caches::default(),
            &wt,
            update.old_tree,
            update.new_tree,
            &update.changed,
        );
        assert!(switched.expect("switch"));
        assert_eq!(shared(&wt), before, "switched in place");
        git(&root, &split, &["update-ref", "--no-deref", "HEAD", &new]);
        assert_eq!(outcome(&root, &split), outcome(&root, &by_git));
        let read = |path: &str| std::fs::read_to_string(split.join(path)).expect("read");
        assert_eq!(read("a.txt"), "one\r\nmore\r\n");
        assert_eq!(read("sub/b.txt"), "two\nmore\n");
    }

    /// A worktree at `dir` opened for an update from `old_commit` to
    /// `new_commit`: its trees and the paths changed between them.
    struct Update {
        wt: gix::Repository,
        old_tree: ObjectId,
        new_tree: ObjectId,
        changed: Vec<crate::git::diff::Changed>,
    }

    fn update_of(dir: &Path, old_commit: &str, new_commit: &str) -> Update {
        let wt = gix::open_opts(dir, gix::open::Options::isolated()).expect("open");
        let tree_of = |commit: &str| -> ObjectId {
            let id = ObjectId::from_hex(commit.as_bytes()).expect("sha");
            wt.find_commit(id)
                .expect("commit")
                .tree_id()
                .expect("tree")
                .detach()
        };
        let (old_tree, new_tree) = (tree_of(old_commit), tree_of(new_commit));
        let changed = crate::git::diff::changed_paths(&wt, old_tree, new_tree).expect("diff");
        Update {
            wt,
            old_tree,
            new_tree,
            changed,
        }
    }
}

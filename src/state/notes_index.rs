//! Which note blob annotates each object, for the notes tree a process read
//! last, brought up to date by a diff of the two trees when the notes ref
//! moves: a read of every record after a transition then costs the notes
//! that changed, not a walk of every fanout subtree (an inflate each) and
//! a lookup of every key in them.
//!
//! The index is also kept on disk (`<git-common-dir>/arbiter/notes-index`),
//! for the next process: a `status` of 10,000 orders otherwise reads some
//! 10,000 fanout trees to find their notes. Derived data, as git's index
//! is: it names the notes tree it describes, and a process that finds
//! another tree diffs the two; a tree that is gone (a `gc`), or a file
//! that is garbled, means a full read.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use gix::bstr::{BStr, BString};
use gix::diff::tree::visit::Change;
use gix::hash::ObjectId;
use gix::objs::TreeRefIter;

/// The index of one process (a [`crate::sys::caches::Caches`] entry).
#[derive(Default)]
pub struct NotesIndex(Mutex<Known>);

#[derive(Default)]
struct Known {
    notes: Option<Indexed>,
    /// Notes changed since the index on disk was written (or read).
    unsaved: usize,
    /// Each work order's key ([`crate::state::key_for`]), a hash of its id:
    /// computed once, not at every read of every record.
    keys: HashMap<String, ObjectId>,
}

struct Indexed {
    tree: ObjectId,
    /// By object id, hashed by its leading bytes (it is a hash already).
    blobs: gix::hashtable::HashMap<ObjectId, ObjectId>,
}

impl NotesIndex {
    /// The key and note blob of each of the work orders `wos` in the notes
    /// tree `tree`, in order.
    pub fn lookup(
        &self,
        repo: &gix::Repository,
        tree: ObjectId,
        wos: &[&str],
    ) -> Result<Vec<(ObjectId, Option<ObjectId>)>, IndexError> {
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Known {
            notes,
            unsaved,
            keys,
        } = &mut *known;
        let disk = crate::git::layout::dir(repo).join(DISK_FILE);
        let current = match notes.take().or_else(|| load(&disk, repo.object_hash())) {
            Some(known) if known.tree == tree => known,
            // A tree read before may be gone (a `gc` after a rewrite of
            // the notes): then the index is made again from nothing.
            Some(mut known) => match apply_diff(repo, known.tree, tree, &mut known.blobs) {
                Ok(changed) => {
                    *unsaved += changed;
                    Indexed { tree, ..known }
                }
                Err(_) => {
                    *unsaved = usize::MAX;
                    full(repo, tree)?
                }
            },
            None => {
                *unsaved = usize::MAX;
                full(repo, tree)?
            }
        };
        if *unsaved >= DISK_STALE {
            save(&disk, &current);
            *unsaved = 0;
        }
        let found = wos
            .iter()
            .map(|wo| {
                let key = match keys.get(*wo) {
                    Some(key) => *key,
                    None => *keys
                        .entry((*wo).to_owned())
                        .or_insert_with(|| crate::state::key_for(wo)),
                };
                (key, current.blobs.get(&key).copied())
            })
            .collect();
        *notes = Some(current);
        Ok(found)
    }
}

pub type IndexError = Box<dyn std::error::Error + Send + Sync>;

fn full(repo: &gix::Repository, tree: ObjectId) -> Result<Indexed, IndexError> {
    let mut blobs = gix::hashtable::HashMap::default();
    apply_diff(
        repo,
        ObjectId::empty_tree(repo.object_hash()),
        tree,
        &mut blobs,
    )?;
    Ok(Indexed { tree, blobs })
}

/// Bring `blobs` (the notes of tree `old`) to the notes of tree `new`;
/// how many notes changed.
fn apply_diff(
    repo: &gix::Repository,
    old: ObjectId,
    new: ObjectId,
    blobs: &mut gix::hashtable::HashMap<ObjectId, ObjectId>,
) -> Result<usize, IndexError> {
    let old = repo.find_tree(old)?;
    let new = repo.find_tree(new)?;
    let mut changes = NoteChanges {
        hash: repo.object_hash(),
        ..NoteChanges::default()
    };
    gix::diff::tree(
        TreeRefIter::from_bytes(&old.data, repo.object_hash()),
        TreeRefIter::from_bytes(&new.data, repo.object_hash()),
        gix::diff::tree::State::default(),
        &repo.objects,
        &mut changes,
    )?;
    // A change of fanout moves a note from one path to another: every
    // removal goes first, so the addition at the new path is what stays.
    for key in &changes.removed {
        blobs.remove(key);
    }
    let changed = changes.removed.len().max(changes.added.len());
    blobs.extend(changes.added);
    Ok(changed)
}

/// The index file's name in the arbiter folder.
const DISK_FILE: &str = "notes-index";

/// The first line of the index file: its format. Any other is not read.
const DISK_MAGIC: &[u8] = b"git-arbiter notes index 1\n";

/// The index on disk is written again once this many notes changed since.
const DISK_STALE: usize = 64;

/// The index in the file at `path`: the tree, then each annotated object
/// with its note blob, sorted. `None` when there is none, or it is not
/// whole.
fn load(path: &std::path::Path, hash: gix::hash::Kind) -> Option<Indexed> {
    let bytes = std::fs::read(path).ok()?;
    let body = bytes.strip_prefix(DISK_MAGIC)?;
    let len = hash.len_in_bytes();
    if body.len() % (2 * len) != len {
        return None;
    }
    let (tree, pairs) = body.split_at(len);
    let mut blobs = gix::hashtable::HashMap::default();
    blobs.reserve(pairs.len() / (2 * len));
    for pair in pairs.chunks_exact(2 * len) {
        let (key, blob) = pair.split_at(len);
        blobs.insert(
            ObjectId::try_from(key).ok()?,
            ObjectId::try_from(blob).ok()?,
        );
    }
    Some(Indexed {
        tree: ObjectId::try_from(tree).ok()?,
        blobs,
    })
}

/// Write `index` to `path`, whole or not at all (best effort: without it
/// the next process reads the notes tree).
fn save(path: &std::path::Path, index: &Indexed) {
    let mut pairs: Vec<(&ObjectId, &ObjectId)> = index.blobs.iter().collect();
    pairs.sort_unstable();
    let mut out = DISK_MAGIC.to_vec();
    out.extend_from_slice(index.tree.as_bytes());
    for (key, blob) in pairs {
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(blob.as_bytes());
    }
    crate::sys::whole_file::save(path, &out);
}

/// The notes a tree diff adds, changes and removes, by the object they
/// annotate: no path is kept once read (a whole notes tree, diffed
/// against the empty tree, is every note).
#[derive(Default)]
struct NoteChanges {
    hash: gix::hash::Kind,
    path: BString,
    /// The paths of trees whose entries come later, in the diff's order.
    queued: VecDeque<BString>,
    removed: Vec<ObjectId>,
    added: Vec<(ObjectId, ObjectId)>,
}

impl NoteChanges {
    fn push(&mut self, component: &BStr) {
        if component.is_empty() {
            return;
        }
        if !self.path.is_empty() {
            self.path.push(b'/');
        }
        self.path.extend_from_slice(component);
    }
}

impl gix::diff::tree::Visit for NoteChanges {
    fn pop_front_tracked_path_and_set_current(&mut self) {
        self.path = self.queued.pop_front().unwrap_or_default();
    }

    fn push_back_tracked_path_component(&mut self, component: &BStr) {
        self.push(component);
        self.queued.push_back(self.path.clone());
    }

    fn push_path_component(&mut self, component: &BStr) {
        self.push(component);
    }

    fn pop_path_component(&mut self) {
        let end = self.path.iter().rposition(|&b| b == b'/').unwrap_or(0);
        self.path.truncate(end);
    }

    fn visit(&mut self, change: Change) -> gix::diff::tree::visit::Action {
        let (removed, added) = match change {
            Change::Deletion { entry_mode, .. } => (entry_mode.is_blob(), None),
            Change::Addition {
                entry_mode, oid, ..
            } => (false, Some(oid).filter(|_| entry_mode.is_blob())),
            Change::Modification {
                previous_entry_mode,
                entry_mode,
                oid,
                ..
            } => (
                previous_entry_mode.is_blob() && !entry_mode.is_blob(),
                Some(oid).filter(|_| entry_mode.is_blob()),
            ),
        };
        if removed || added.is_some() {
            if let Some(key) = note_key(self.path.as_ref(), self.hash) {
                if removed {
                    self.removed.push(key);
                }
                if let Some(blob) = added {
                    self.added.push((key, blob));
                }
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// The object a note at `path` annotates: git's layout is the object's hex
/// name, its leading bytes possibly split off as two-digit folders. Any
/// other path (the `wo-keys/` folder) is not a note.
fn note_key(path: &gix::bstr::BStr, hash: gix::hash::Kind) -> Option<ObjectId> {
    let mut components: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let last = components.pop()?;
    if components.iter().any(|folder| folder.len() != 2) {
        return None;
    }
    let hex: Vec<u8> = components
        .into_iter()
        .flatten()
        .chain(last)
        .copied()
        .collect();
    if hex.len() != hash.len_in_hex() {
        return None;
    }
    ObjectId::from_hex(&hex).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_paths_are_hex_names_with_two_digit_folders() {
        let sha1 = gix::hash::Kind::Sha1;
        let hex = "0123456789abcdef0123456789abcdef01234567";
        let id = ObjectId::from_hex(hex.as_bytes()).expect("hex");
        assert_eq!(note_key(hex.into(), sha1), Some(id));
        assert_eq!(
            note_key(format!("01/{}", &hex[2..]).as_str().into(), sha1),
            Some(id)
        );
        assert_eq!(
            note_key(format!("01/23/{}", &hex[4..]).as_str().into(), sha1),
            Some(id)
        );
        assert_eq!(
            note_key(format!("012/{}", &hex[3..]).as_str().into(), sha1),
            None
        );
        assert_eq!(note_key("wo-keys/wo-1".into(), sha1), None);
        assert_eq!(note_key(hex[1..].into(), sha1), None);
    }

    /// Log `event` on the records of `ids`, in one transition.
    fn log_on(store: &crate::state::Store<'_>, ids: &[String], event: &str) {
        store
            .transact::<_, crate::state::Error>("test", |txn| {
                for wo in ids {
                    let mut record = txn.record(wo, false)?;
                    record.log(event, None);
                    txn.put(record);
                }
                Ok(())
            })
            .expect("transact");
    }

    /// The note of `key` as a fresh read of the notes ref finds it.
    fn looked_up(repo: &gix::Repository, key: &ObjectId) -> Option<ObjectId> {
        let tip = repo
            .find_reference(crate::state::NOTES_REF)
            .expect("notes ref")
            .peel_to_commit()
            .expect("commit");
        let tree = tip.tree_id().expect("tree").detach();
        let mut notes = gix::note::plumbing::State::new(tree, &repo.objects).expect("notes");
        notes.get(key, &repo.objects).expect("lookup")
    }

    /// After every kind of change (records added by the hundred so git's
    /// fanout changes, records edited, a note removed and one added by
    /// stock git, the ref set back), the index answers as a full read.
    #[test]
    fn the_index_follows_every_change_of_the_notes() {
        let test = crate::testutil::TestRepo::new();
        let store = test.store();
        let index = NotesIndex::default();
        let ids: Vec<String> = (0..700).map(|i| format!("wo-{i}")).collect();
        let keys: Vec<ObjectId> = ids.iter().map(|wo| crate::state::key_for(wo)).collect();
        let foreign = ObjectId::from_hex(b"0123456789abcdef0123456789abcdef01234567").expect("hex");
        let mut all = keys.clone();
        all.extend([foreign, test.base]);
        let wos: Vec<&str> = ids.iter().map(String::as_str).collect();
        let check = |what: &str| {
            let repo = gix::open(&test.dir).expect("open");
            let tree = repo
                .find_reference(crate::state::NOTES_REF)
                .expect("ref")
                .peel_to_commit()
                .expect("commit")
                .tree_id()
                .expect("tree")
                .detach();
            let found = index.lookup(&repo, tree, &wos).expect("lookup");
            for (key, (indexed_key, blob)) in keys.iter().zip(found) {
                assert_eq!(*key, indexed_key);
                assert_eq!(blob, looked_up(&repo, key), "{what}: note of {key}");
            }
            // Notes of other objects are in the index too.
            let indexed = index.0.lock().expect("lock");
            let blobs = &indexed.notes.as_ref().expect("indexed").blobs;
            for key in &all {
                assert_eq!(
                    blobs.get(key).copied(),
                    looked_up(&repo, key),
                    "{what}: {key}"
                );
            }
        };
        let put = |range: std::ops::Range<usize>, event: &str| log_on(&store, &ids[range], event);
        put(0..200, "first");
        check("200 records");
        let before_fanout = test
            .ctx
            .repo
            .find_reference(crate::state::NOTES_REF)
            .expect("ref");
        let before_fanout = before_fanout.id().detach().to_string();
        put(200..700, "first");
        let git = |args: &[&str]| crate::testutil::git(&test.root, &test.dir, args);
        let top = git(&["ls-tree", crate::state::NOTES_REF]);
        assert!(
            top.lines().any(|l| l.contains(" tree ")
                && l.ends_with(|c: char| c.is_ascii_hexdigit())
                && l.split('\t').nth(1).is_some_and(|name| name.len() == 2)),
            "no fanout folders at 700 notes:\n{top}"
        );
        check("700 records, in fanout folders");
        put(100..300, "second");
        check("200 edited");
        git(&["notes", "--ref=arbiter", "remove", &keys[5].to_string()]);
        check("one removed by git");
        git(&[
            "notes",
            "--ref=arbiter",
            "add",
            "-m",
            "hand",
            &test.base.to_string(),
        ]);
        check("one added by git");
        git(&["update-ref", crate::state::NOTES_REF, &before_fanout]);
        check("set back");
        // The tree indexed last gone (a `gc` after the notes were set back
        // and moved on): the index is made again from the tree read now.
        let indexed = git(&[
            "rev-parse",
            &format!("{}^{{tree}}", crate::state::NOTES_REF),
        ]);
        put(0..10, "third");
        let hex = indexed.trim();
        let loose = test
            .dir
            .join(".git/objects")
            .join(&hex[..2])
            .join(&hex[2..]);
        std::fs::remove_file(loose).expect("the indexed tree is a loose object");
        check("indexed tree gone");
    }

    /// A process starts from the index an earlier one left on disk, brought
    /// to the notes it reads by a diff; a garbled file, or one naming a
    /// tree that is gone, is read as none.
    #[test]
    fn the_index_on_disk_serves_the_next_process() {
        let test = crate::testutil::TestRepo::new();
        let store = test.store();
        let ids: Vec<String> = (0..300).map(|i| format!("wo-{i}")).collect();
        let keys: Vec<ObjectId> = ids.iter().map(|wo| crate::state::key_for(wo)).collect();
        let wos: Vec<&str> = ids.iter().map(String::as_str).collect();
        let put = |range: std::ops::Range<usize>, event: &str| log_on(&store, &ids[range], event);
        let repo = || gix::open(&test.dir).expect("open");
        let tree = |repo: &gix::Repository| {
            repo.find_reference(crate::state::NOTES_REF)
                .expect("ref")
                .peel_to_commit()
                .expect("commit")
                .tree_id()
                .expect("tree")
                .detach()
        };
        // A new process each time: an index of its own, nothing in memory.
        let found_by_a_new_process = || {
            let repo = repo();
            NotesIndex::default()
                .lookup(&repo, tree(&repo), &wos)
                .expect("lookup")
        };
        let check = |what: &str| {
            let repo = repo();
            for (key, (_, blob)) in keys.iter().zip(found_by_a_new_process()) {
                assert_eq!(blob, looked_up(&repo, key), "{what}: note of {key}");
            }
        };
        let disk = crate::git::layout::dir(&repo()).join(DISK_FILE);
        put(0..300, "first");
        check("the first process reads the tree");
        let written = std::fs::read(&disk).expect("the index is on disk");
        put(0..30, "second");
        check("30 notes changed since");
        assert_eq!(
            std::fs::read(&disk).expect("read"),
            written,
            "fewer changes than DISK_STALE leave the file as it is"
        );
        // What the next process starts from is the file: a note it names
        // that no diff since touched is taken from it.
        let mut forged = written.clone();
        let at = forged
            .windows(20)
            .position(|w| w == keys[200].as_bytes())
            .expect("key in the file");
        forged[at + 20] ^= 1;
        std::fs::write(&disk, &forged).expect("write");
        let (_, blob) = found_by_a_new_process()[200];
        assert_ne!(blob, looked_up(&repo(), &keys[200]), "the file is read");
        std::fs::write(&disk, b"garbled").expect("write");
        check("a garbled file");
        assert!(std::fs::read(&disk).expect("read").starts_with(DISK_MAGIC));
        let mut gone = written;
        let tree_at = DISK_MAGIC.len();
        gone[tree_at..tree_at + 20].copy_from_slice(&[7; 20]);
        std::fs::write(&disk, &gone).expect("write");
        check("a file naming a tree that is gone");
        put(30..300, "third");
        check("270 notes changed since");
        let repo = repo();
        let on_disk = load(&disk, repo.object_hash()).expect("whole");
        assert_eq!(
            on_disk.tree,
            tree(&repo),
            "DISK_STALE changes write it again"
        );
    }
}

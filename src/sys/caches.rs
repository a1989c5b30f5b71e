//! What one process has read or proved and may reuse (objects read, folders
//! stamped, which tree an index holds, worktrees proved settled, the pooled
//! worktrees it holds): one object per process, owned by the repository's
//! context and handed down, never a global. A test makes its own and drops
//! it; two contexts never see each other's.
//!
//! Each kernel keeps its own kind of entry (a type with a `Default`), so
//! this bottom layer names none of them.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex, PoisonError};

/// One entry of each kind, found by its type.
type Entries = Vec<(TypeId, Arc<dyn Any + Send + Sync>)>;

#[derive(Clone, Default)]
pub struct Caches(Arc<Mutex<Entries>>);

impl Caches {
    /// The entry of kind `T`, made empty on first use.
    pub fn get<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let found = all.iter().find(|(id, _)| *id == TypeId::of::<T>());
        let entry = match found {
            Some((_, entry)) => entry.clone(),
            None => {
                let entry: Arc<dyn Any + Send + Sync> = Arc::new(T::default());
                all.push((TypeId::of::<T>(), entry.clone()));
                entry
            }
        };
        entry
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("entries are stored by their TypeId"))
    }
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Caches")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<u32>>);

    #[test]
    fn an_entry_is_shared_by_clones_and_not_by_other_caches() {
        let caches = Caches::default();
        caches.get::<Seen>().0.lock().unwrap().push(1);
        let clone = caches.clone();
        assert_eq!(*clone.get::<Seen>().0.lock().unwrap(), [1]);
        let other = Caches::default();
        assert!(other.get::<Seen>().0.lock().unwrap().is_empty());
    }
}

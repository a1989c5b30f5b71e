//! Liveness by flock: a running process holds an exclusive flock on its file
//! (a conductor's registration, a ref edit's marker) for as long as it
//! lives, and the kernel releases it when the process dies, however it dies.
//! A file is probed with a shared lock, which only an exclusive one blocks; a
//! holder must take its lock before anyone can find the file to probe it.

use std::fs::File;

/// An exclusive flock taken on a file, held while this lives. Dropped, it
/// unlocks the file before closing it: a child another thread forks in
/// that moment holds a copy of the file until it execs, and with the copy
/// the lock (the next taker would wait for, or skip, a lock nobody holds).
#[derive(Debug)]
pub struct Held(File);

impl Held {
    /// Take `file`'s lock, waiting for it.
    pub fn wait(file: File) -> std::io::Result<Held> {
        fs4::FileExt::lock(&file)?;
        Ok(Held(file))
    }

    /// Take `file`'s lock if nobody holds it; `None` when somebody does.
    pub fn try_take(file: File) -> std::io::Result<Option<Held>> {
        Ok(try_lock(&file)?.then_some(Held(file)))
    }

    /// The locked file.
    pub fn file(&self) -> &File {
        &self.0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.0);
    }
}

/// Take `file`'s exclusive lock if nobody holds it: true when taken. The
/// caller releases it ([`Held`], or [`free_now`]).
pub fn try_lock(file: &File) -> std::io::Result<bool> {
    // Explicitly fs4's trait: std's inherent `File::try_lock` (Rust 1.89)
    // would win otherwise, with another error type.
    match fs4::FileExt::try_lock(file) {
        Ok(()) => Ok(true),
        Err(fs4::TryLockError::WouldBlock) => Ok(false),
        Err(fs4::TryLockError::Error(e)) => Err(e),
    }
}

/// Is `file`'s exclusive lock free? Probed by taking it for an instant,
/// released before the caller closes the file (see [`Held`]): a free file
/// must not look held to the next prober because of a forked copy.
pub fn free_now(file: &File) -> std::io::Result<bool> {
    let free = try_lock(file)?;
    if free {
        let _ = fs4::FileExt::unlock(file);
    }
    Ok(free)
}

/// Does a running process hold `file`'s lock? An error says nothing either
/// way; each caller decides what is safe.
pub fn held_by_a_live_process(file: &File) -> std::io::Result<bool> {
    // Shared, so that two processes (or threads) looking at the same dead
    // file at once do not each take the other's look for a live holder.
    match fs4::FileExt::try_lock_shared(file) {
        Ok(()) => Ok(false),
        Err(fs4::TryLockError::WouldBlock) => Ok(true),
        Err(fs4::TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    /// A probe of a free file leaves no lock behind, even while a copy of
    /// the file lives (a child another thread forked in that moment, until
    /// it execs): the next prober must find it free, not held.
    #[test]
    fn a_probed_free_file_stays_free_while_a_copy_of_it_lives() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("slot");
        let probed = std::fs::File::create(&path).expect("create");
        assert!(super::free_now(&probed).expect("probe"));
        let copy = rustix::io::dup(&probed).expect("dup");
        drop(probed);
        let next = std::fs::File::open(&path).expect("open");
        assert!(
            super::free_now(&next).expect("probe"),
            "a probe left the free file locked"
        );
        drop(copy);
    }
}

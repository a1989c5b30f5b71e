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
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => Ok(Some(Held(file))),
            Err(fs4::TryLockError::WouldBlock) => Ok(None),
            Err(fs4::TryLockError::Error(e)) => Err(e),
        }
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

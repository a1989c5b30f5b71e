//! Liveness by flock: a running process holds an exclusive flock on its file
//! (a conductor's registration, a ref edit's marker) for as long as it
//! lives, and the kernel releases it when the process dies, however it dies.
//! A file is probed with a shared lock, which only an exclusive one blocks; a
//! holder must take its lock before anyone can find the file to probe it.

use std::fs::File;

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

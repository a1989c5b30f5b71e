//! Running work: builders in worktrees within the machine-wide slots, the
//! merge queue, the round and the race, and the commands that inspect or
//! repair what runs left.

pub mod batch;
pub mod builder;
pub mod conduct;
pub mod conductor;
pub mod doctor;
pub mod drift;
pub mod exec;
pub mod kept;
pub mod lint;
pub mod merge;
pub mod pool;
pub mod progress;
pub mod queue;
pub mod race;
pub mod reconcile;
pub mod review;
pub mod round;
pub mod slots;
pub mod timeline;
pub mod user_checkout;
pub mod worktree;

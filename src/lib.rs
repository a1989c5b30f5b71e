//! git-arbiter: conduct parallel builders on one git repository.
//!
//! One module per kernel (DESIGN "The kernels"); the CLI in `src/cli/` is a
//! thin layer that parses flags, calls these and renders the result.

pub mod batch;
pub mod builder;
pub mod checkout;
pub mod conductor;
pub mod config_env;
pub mod context;
pub mod crash;
pub mod doctor;
pub mod drift;
pub mod error;
pub mod exec;
pub mod lint;
pub mod merge;
pub mod odb;
pub mod orders;
pub mod pool;
pub mod progress;
pub mod promisor;
pub mod race;
pub mod reconcile;
pub mod refguard;
pub mod review;
pub mod round;
pub mod scope;
pub mod select;
pub mod sign;
pub mod slots;
pub mod state;
pub mod worktree;

pub use error::{Error, ExitCode, Result};

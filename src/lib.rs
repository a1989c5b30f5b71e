//! git-arbiter: conduct parallel builders on one git repository.
//!
//! One module per kernel; the CLI in `src/cli/` is a
//! thin layer that parses flags, calls these and renders the result.
//!
//! The modules form one stack, bottom up; each imports only modules below it
//! (`tests/test_layers.rs` fails on an import cycle):
//!
//! 1. leaves: `scope`, `select`, `sign`, `layout`, `parallel`, `refguard`,
//!    `crash`, `hooks`, `flock`, `failure` (reading why something failed),
//!    `duration`, `history` (what the branch says landed), then `odb` and
//!    `orders`;
//! 2. state and plumbing: `state`, `error`, `exec`, `progress` (its events
//!    carry how a command exited), `config_env`, `context`, `splitindex`,
//!    `stamps`, `encoding` (`working-tree-encoding` and `ident` as git
//!    writes them);
//! 3. services on one repository: `conductor`, `slots`, `promisor`,
//!    `ledger` (the pool's bookkeeping), `worktree`, `builder`, `reconcile`,
//!    `batch`, `drift`, `lint`, `checkout`, `user_checkout` (a checkout of
//!    the integration branch following a landing), `stage` (a builder's
//!    leftovers staged as `git add -A` would), then `pool` (warm worktrees);
//! 4. porcelain: `merge`, `queue` (the merge queue), `kept` (`retry` and
//!    `merge-back` through it), then `round`, `review`, `doctor` and `race`.

pub mod batch;
pub mod builder;
pub mod checkout;
pub mod conductor;
pub mod config_env;
pub mod context;
pub mod crash;
pub mod doctor;
pub mod drift;
pub mod duration;
pub mod encoding;
pub mod error;
pub mod exec;
pub mod failure;
pub mod flock;
pub mod history;
pub mod hooks;
pub mod index_file;
pub mod kept;
pub mod layout;
pub mod ledger;
pub mod lint;
pub mod merge;
pub mod odb;
pub mod orders;
pub mod parallel;
pub mod pool;
pub mod progress;
pub mod promisor;
pub mod queue;
pub mod race;
pub mod reconcile;
pub mod refguard;
pub mod review;
pub mod round;
pub mod scope;
pub mod select;
pub mod sign;
pub mod slots;
pub mod splitindex;
pub mod stage;
pub mod stamps;
pub mod state;
#[cfg(test)]
mod testutil;
pub mod user_checkout;
pub mod worktree;

pub use error::{Error, ExitCode, Result};

/// The version every command's `--json` output carries. 2: a work order is
/// `id` in every output (was `wo_id` in some), and `status` and `show` give
/// its `state` in one vocabulary, `halted` dominating.
pub const JSON_VERSION: u32 = 2;

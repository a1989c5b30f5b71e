//! git-arbiter: conduct parallel builders on one git repository.
//!
//! The library is four layers, each a folder; a module imports only from its
//! own layer or the ones below (`tests/test_layers.rs` fails on an import
//! that climbs, and on any import cycle). The CLI in `src/cli/` (the binary)
//! parses flags, calls the library and renders what it returns.
//!
//! 1. [`sys`]: process and file-system primitives: the error type every
//!    layer returns ([`sys::error`], which names no kernel: a kernel's typed
//!    error converts into it), the clock, durations, kill points for the
//!    crash tests, liveness by flock, the parallel reader, reading why
//!    something failed.
//! 2. [`git`]: git's formats and behaviour through gix: objects and commits
//!    ([`git::odb`]), the index (split index, cache tree, version 4), tree
//!    diffs, two-way checkouts, `git add -A` staging, folder stamps,
//!    attributes (`working-tree-encoding`, `ident`), hooks, `-c` settings,
//!    partial clones, ref edits a killed process cannot wedge, the branch's
//!    landed history, and where git-arbiter keeps its files.
//! 3. [`state`]: what is to be done and what happened: work orders and their
//!    declared files, the records in `refs/notes/arbiter`, the repository's
//!    configuration ([`state::context`]), the pool's ledger, best-of-N
//!    selection.
//! 4. [`run`]: running it: commands in process groups, conductors, slots,
//!    worktrees and the warm pool, builders, batch selection, drift, merges
//!    and the merge queue, checkouts kept in step with a landing, the round,
//!    the race, and the commands that inspect or repair (`review`, `doctor`,
//!    `lint`, `kept`).

pub mod git;
pub mod run;
pub mod state;
pub mod sys;
#[cfg(test)]
mod testutil;

pub use sys::error::{Error, ExitCode, Result};

/// The version every command's `--json` output carries. 2: a work order is
/// `id` in every output (was `wo_id` in some), and `status` and `show` give
/// its `state` in one vocabulary, `halted` dominating.
pub const JSON_VERSION: u32 = 2;

//! Git's formats and behaviour, through gix: objects, the index (split
//! index, cache tree, version 4), checkouts and staging as git does them,
//! attributes, hooks, ref edits, and where git-arbiter keeps its files in a
//! repository. Nothing here knows work orders, records or runs.

pub mod checkout;
pub mod config_env;
pub mod diff;
pub mod encoding;
pub mod history;
pub mod hooks;
pub mod index_file;
pub mod index_lock;
pub mod index_memo;
pub mod layout;
pub mod odb;
pub mod paths;
pub mod promisor;
pub mod refguard;
pub mod reset;
pub mod splitindex;
pub mod stage;
pub mod stamps;
pub mod stat;
pub mod status;
pub mod transport;

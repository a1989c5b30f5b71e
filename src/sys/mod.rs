//! The bottom layer: process and file-system primitives every layer above
//! uses, knowing nothing of git or of work orders.

pub mod caches;
pub mod clock;
pub mod crash;
pub mod duration;
pub mod error;
pub mod failure;
pub mod file_stamp;
pub mod flock;
pub mod parallel;
pub mod whole_file;

//! Where plugins come from: a plugins list ([`list`]: paths, `https://` URLs and OCI
//! references with pins, signatures and settings), fetched and verified by [`distribution`],
//! pulled in the background by [`pulls`]. A plugins directory is `xdst_plugin::dir`'s.

pub mod distribution;
pub mod entry;
pub mod list;
pub mod pulls;

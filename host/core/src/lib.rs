//! The sans-IO core of xdst: everything about the xDS protocol that can be decided
//! without a socket, a clock or a plugin.
//!
//! - [`resource`]: a resource encoded once, shared by every stream, versioned by content;
//! - [`decode`] and [`canonical`]: Envoy's proto3 JSON/YAML to deterministic bytes;
//! - [`snapshot`], [`consistency`] and [`cache`]: per node group resource sets, checked
//!   for dangling references before they are published;
//! - [`sotw`] and [`delta`]: the stream state machines, one per gRPC stream;
//! - [`plan`] and [`rollout`]: make-before-break, per node, gated on its ACKs;
//! - [`wire`]: writing responses straight from the shared bytes;
//! - [`documents`]: YAML and JSON text to values, bounded in depth and size.
//!
//! It does not do gRPC, HTTP or plugins, and reads no files: the `xdst` crate wraps it in
//! those. The one file helper is [`files::write_atomic`], shared by every crate.
//!
//! | Feature                                   | Status    |
//! |-------------------------------------------|-----------|
//! | SotW: ACK/NACK, stale nonces, wildcard    | Supported |
//! | Delta: subscribe/unsubscribe, initial versions, removals | Supported |
//! | ADS and per-type LDS/RDS/CDS/EDS          | Supported |
//! | Any type URL present in the cache (SDS, RTDS, ...) | Supported |
//! | Node groups (cluster, id, metadata key)   | Supported |
//! | Consistency check before publishing       | Supported |
//! | TTL and heartbeats (DELTA-9)              | Planned   |
//! | Resource aliases / on-demand (VHDS)       | Planned   |
//! | Make-before-break push ordering (ORDER-*) | Supported |

pub mod blame;
pub mod cache;
pub mod canonical;
pub mod changes;
pub mod client_status;
pub mod consistency;
pub mod decode;
pub mod delta;
pub mod descriptors;
pub mod documents;
pub mod errors;
pub mod files;
pub mod flow_nesting;
pub mod heap;
pub mod intent;
pub(crate) mod known;
pub mod limits;
pub mod names;
pub mod node;
pub mod node_holds;
pub mod pieces;
pub mod plan;
pub mod re2;
pub mod resource;
pub mod revert;
pub mod rollout;
pub mod small_map;
pub mod snapshot;
pub mod sotw;
pub mod stream;
pub mod types;
pub mod validate;
pub mod wire;
pub mod withheld;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod testutil;

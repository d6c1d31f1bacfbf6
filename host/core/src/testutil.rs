//! Helpers for the state machine tests.

use crate::resource::Resource;
use crate::snapshot::Snapshot;
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
use envoy_types::pb::envoy::config::core::v3::Node;

/// A resource whose body is just its content tag; the state machines never decode bodies.
pub fn res(type_url: &str, name: &str, content: &str) -> Resource {
    Resource::new(type_url, name, content.as_bytes())
}

/// A snapshot from `(type, name, content)` triples.
pub fn snap(items: &[(&str, &str, &str)]) -> Snapshot {
    Snapshot::from_resources(items.iter().map(|(t, n, c)| res(t, n, c))).unwrap()
}

pub fn base() -> Snapshot {
    snap(&[
        (LISTENER, "l1", "1"),
        (ROUTE, "r1", "1"),
        (ROUTE, "r2", "1"),
        (CLUSTER, "c1", "1"),
        (CLUSTER, "c2", "1"),
        (ENDPOINT, "c1", "1"),
        (ENDPOINT, "c2", "1"),
    ])
}

pub fn node() -> Option<Node> {
    Some(Node { id: "n1".into(), cluster: "edge".into(), ..Default::default() })
}

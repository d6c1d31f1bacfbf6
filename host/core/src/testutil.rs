//! Helpers for the state machine tests.

use crate::resource::Resource;
use crate::snapshot::Snapshot;
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
use envoy_types::pb::envoy::config::core::v3::Node;
use prost::encoding::{WireType, encode_key, encode_varint};

/// A small deterministic random source (xorshift) for randomized tests: `next(n)` is in
/// `0..n`, and the same seed gives the same sequence.
pub fn random(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

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

/// An `Any` holding an `Any` ... `levels` deep, as protobuf bytes, built in linear time.
pub fn nested_any(levels: usize) -> Vec<u8> {
    const ANY: &str = "type.googleapis.com/google.protobuf.Any";
    let inner = {
        let mut v = Vec::new();
        let t = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
        encode_key(1, WireType::LengthDelimited, &mut v);
        encode_varint(t.len() as u64, &mut v);
        v.extend_from_slice(t.as_bytes());
        v
    };
    // Headers from the inside out: each is the type URL and the length of all inside it.
    let mut headers = Vec::with_capacity(levels);
    let mut len = inner.len();
    for _ in 0..levels {
        let mut h = Vec::new();
        encode_key(1, WireType::LengthDelimited, &mut h);
        encode_varint(ANY.len() as u64, &mut h);
        h.extend_from_slice(ANY.as_bytes());
        encode_key(2, WireType::LengthDelimited, &mut h);
        encode_varint(len as u64, &mut h);
        len += h.len();
        headers.push(h);
    }
    let mut out = Vec::with_capacity(len);
    for h in headers.iter().rev() {
        out.extend_from_slice(h);
    }
    out.extend_from_slice(&inner);
    out
}

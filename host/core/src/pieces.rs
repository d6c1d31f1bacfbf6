//! A RouteConfiguration of thousands of routes, decoded, checked and encoded canonically
//! route by route, so that a change to one route decodes and checks one route, not all of
//! them (design note 019, step 4).
//!
//! The plugin's bytes are split at the wire level: the configuration without its routes
//! (its "skeleton") goes through [`decode_body`] as a whole, each route on its own, and a
//! route whose bytes were seen before takes its canonical bytes from [`Pieces`]. The
//! canonical encoding writes fields in field-number order and a repeated message field as
//! its elements' encodings in order, so the whole is assembled by putting each virtual
//! host's routes (field 3) back between its fields numbered below and above 3. The result
//! is byte for byte what [`decode_body`] gives the whole (a property test below checks it).
//! Anything this path does not handle (JSON, a group or a malformed field, a skeleton or a
//! route that fails its checks) goes the whole way, so errors are [`decode_body`]'s own,
//! naming the field in the whole.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use prost::encoding::{WireType, decode_varint, encode_key, encode_varint};
use prost_reflect::DynamicMessage;
use sha2::{Digest, Sha256};

use crate::decode::{Body, canonical_body, decode_body, first_unknown_field};
use crate::resource::Resource;
use crate::types::ROUTE;

/// Routes as a plugin wrote them (by the SHA-256 of their bytes), decoded, checked and
/// encoded canonically, with the clusters each names.
pub type Pieces = HashMap<[u8; 32], Piece>;

/// One route, checked: its canonical bytes and the clusters it names (field within the
/// route, cluster), so the configuration's references are the routes' put together instead of
/// the whole configuration decoded again (issue 50, item 4).
#[derive(Debug, Clone)]
pub struct Piece {
    canonical: Bytes,
    clusters: Arc<[(String, String)]>,
}

/// How deep a route sits in a RouteConfiguration: configuration, virtual host, route.
const ROUTE_DEPTH: usize = 2;
/// `RouteConfiguration.virtual_hosts`.
const VIRTUAL_HOSTS: u32 = 2;
/// `VirtualHost.routes`.
const ROUTES: u32 = 3;

/// [`decode_body`], taking the routes of a RouteConfiguration from `known` when their bytes
/// were seen before; every route used goes into `used` (the next call's `known`).
pub fn decode_with_pieces(
    type_url: &str,
    name: &str,
    body: Body<'_>,
    known: &Pieces,
    used: &mut Pieces,
) -> Result<Resource, (Option<String>, String)> {
    if let (ROUTE, Body::Proto(bytes)) = (type_url, &body)
        && let Some(resource) = route_configuration(name, bytes, known, used)
    {
        return Ok(resource);
    }
    decode_body(type_url, name, body)
}

/// One field on the wire: its number, wire type, the bytes of the whole field and (for a
/// length-delimited one) of its payload.
struct Field<'a> {
    number: u32,
    wire_type: WireType,
    raw: &'a [u8],
    payload: &'a [u8],
}

/// The fields of a message, in order; `None` if the bytes are malformed or hold a group.
fn fields(mut bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let start = bytes;
        let key = decode_varint(&mut bytes).ok()?;
        let number = u32::try_from(key >> 3).ok().filter(|n| *n > 0)?;
        let (wire_type, payload) = match key & 7 {
            0 => {
                decode_varint(&mut bytes).ok()?;
                (WireType::Varint, &[][..])
            }
            1 => {
                bytes = bytes.get(8..)?;
                (WireType::SixtyFourBit, &[][..])
            }
            2 => {
                let len = usize::try_from(decode_varint(&mut bytes).ok()?).ok()?;
                let payload = bytes.get(..len)?;
                bytes = &bytes[len..];
                (WireType::LengthDelimited, payload)
            }
            5 => {
                bytes = bytes.get(4..)?;
                (WireType::ThirtyTwoBit, &[][..])
            }
            _ => return None,
        };
        out.push(Field { number, wire_type, raw: &start[..start.len() - bytes.len()], payload });
    }
    Some(out)
}

fn put_message(number: u32, body: &[u8], out: &mut Vec<u8>) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// The RouteConfiguration `bytes` assembled from its checked parts, or `None` to take the
/// whole way.
fn route_configuration(name: &str, bytes: &[u8], known: &Pieces, used: &mut Pieces) -> Option<Resource> {
    // Split: the skeleton (the configuration with its virtual hosts' routes taken out) and
    // each virtual host's routes, in order.
    let mut skeleton = Vec::with_capacity(bytes.len() / 8);
    let mut routes: Vec<Vec<&[u8]>> = Vec::new();
    for field in fields(bytes)? {
        if field.number != VIRTUAL_HOSTS || field.wire_type != WireType::LengthDelimited {
            skeleton.extend_from_slice(field.raw);
            continue;
        }
        let mut host = Vec::new();
        let mut these = Vec::new();
        for f in fields(field.payload)? {
            match (f.number, f.wire_type) {
                (ROUTES, WireType::LengthDelimited) => these.push(f.payload),
                (ROUTES, _) => return None,
                _ => host.extend_from_slice(f.raw),
            }
        }
        put_message(VIRTUAL_HOSTS, &host, &mut skeleton);
        routes.push(these);
    }
    let canonical_skeleton = canonical_body(ROUTE, name, Body::Proto(&skeleton)).ok()?;

    // Each route: known, or decoded, checked and encoded on its own.
    let mut encoded: Vec<Vec<Piece>> = Vec::with_capacity(routes.len());
    for these in &routes {
        let mut host = Vec::with_capacity(these.len());
        for route in these {
            let key: [u8; 32] = Sha256::digest(route).into();
            let piece = match known.get(&key).or_else(|| used.get(&key)) {
                Some(c) => c.clone(),
                None => route_alone(route)?,
            };
            used.insert(key, piece.clone());
            host.push(piece);
        }
        encoded.push(host);
    }

    // Assemble: each virtual host of the canonical skeleton gets its routes back, after its
    // fields numbered below 3 and before those above.
    let mut whole = Vec::with_capacity(bytes.len());
    let mut hosts = encoded.iter();
    for field in fields(&canonical_skeleton)? {
        if field.number != VIRTUAL_HOSTS {
            whole.extend_from_slice(field.raw);
            continue;
        }
        let these = hosts.next()?;
        let mut host =
            Vec::with_capacity(field.payload.len() + these.iter().map(|r| r.canonical.len() + 4).sum::<usize>());
        let mut put = false;
        for f in fields(field.payload)? {
            if f.number > ROUTES && !put {
                these.iter().for_each(|r| put_message(ROUTES, &r.canonical, &mut host));
                put = true;
            }
            host.extend_from_slice(f.raw);
        }
        if !put {
            these.iter().for_each(|r| put_message(ROUTES, &r.canonical, &mut host));
        }
        put_message(VIRTUAL_HOSTS, &host, &mut whole);
    }
    if hosts.next().is_some() {
        return None;
    }
    // What it names: each route's clusters, at the route's place.
    let mut clusters = Vec::new();
    for (i, these) in encoded.iter().enumerate() {
        for (j, piece) in these.iter().enumerate() {
            for (field, cluster) in piece.clusters.iter() {
                clusters.push((format!("virtual_hosts[{i}].routes[{j}].{field}"), cluster.clone()));
            }
        }
    }
    let resource = Resource::new(ROUTE, name, &whole);
    resource.set_references(crate::consistency::References::of_route_clusters(clusters));
    Some(resource)
}

/// One route, checked: its canonical bytes and what it names, if it decodes, knows every
/// field and passes what Envoy checks, as it would inside the whole.
fn route_alone(bytes: &[u8]) -> Option<Piece> {
    let desc = crate::descriptors::pool().get_message_by_name("envoy.config.route.v3.Route")?;
    let msg = DynamicMessage::decode(desc, bytes).ok()?;
    if first_unknown_field(&msg, "").is_some() {
        return None;
    }
    let canonical = crate::canonical::encode_nested(&msg, ROUTE_DEPTH).ok()?;
    crate::validate::check_nested(&msg, ROUTE_DEPTH).ok()?;
    let clusters = crate::consistency::clusters_of_route(&canonical)?;
    Some(Piece { canonical: Bytes::from(canonical), clusters: clusters.into() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A RouteConfiguration with `hosts` virtual hosts of routes built from `routes`, as a
    /// plugin would write it (prost's encoding, not the canonical one).
    fn configuration(hosts: &[Vec<(String, u8)>]) -> Vec<u8> {
        let yaml = serde_json::json!({
            "name": "rc",
            "validate_clusters": false,
            "virtual_hosts": hosts.iter().enumerate().map(|(i, routes)| serde_json::json!({
                "name": format!("vh{i}"),
                "domains": [format!("h{i}.example"), "*.example"],
                "include_request_attempt_count": i % 2 == 0,
                "routes": routes.iter().map(|(path, kind)| match kind % 3 {
                    0 => serde_json::json!({"match": {"prefix": path}, "route": {"cluster": format!("c{kind}"), "timeout": "3s"}}),
                    1 => serde_json::json!({"match": {"path": path, "headers": [{"name": "x", "string_match": {"exact": "y"}}]},
                        "direct_response": {"status": 404}, "request_headers_to_add": [{"header": {"key": "a", "value": "b"}}]}),
                    _ => serde_json::json!({"name": path, "match": {"safe_regex": {"regex": "/r[0-9]+"}},
                        "route": {"weighted_clusters": {"clusters": [{"name": "a", "weight": 1}, {"name": "b", "weight": kind}]}}}),
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        let desc = crate::descriptors::message_for_type_url(ROUTE).unwrap();
        let msg = crate::decode::decode_message(desc, yaml).unwrap();
        prost::Message::encode_to_vec(&msg)
    }

    proptest! {
        #[test]
        fn assembled_from_pieces_is_the_whole_byte_for_byte(
            hosts in proptest::collection::vec(
                proptest::collection::vec(("/[a-z]{1,6}", 0u8..9), 0..6), 0..4),
            again in any::<bool>(),
        ) {
            let bytes = configuration(&hosts);
            let whole = decode_body(ROUTE, "rc", Body::Proto(&bytes)).unwrap();
            let mut used = Pieces::new();
            let first = route_configuration("rc", &bytes, &Pieces::new(), &mut used).expect("the piece path");
            prop_assert_eq!(first.body(), whole.body());
            prop_assert_eq!(first.version(), whole.version());
            // What it names, put together from its routes, is what decoding the whole finds.
            let decoded = crate::consistency::References::of(&whole);
            prop_assert_eq!(first.references(), &decoded);
            if again {
                // The second time every route is known.
                let mut next = Pieces::new();
                let second = route_configuration("rc", &bytes, &used, &mut next).expect("the piece path");
                prop_assert_eq!(second.body(), whole.body());
                prop_assert_eq!(next.len(), used.len());
            }
        }
    }

    #[test]
    fn a_route_envoy_would_refuse_fails_as_the_whole_would() {
        let desc = crate::descriptors::message_for_type_url(ROUTE).unwrap();
        let bad = serde_json::json!({"name": "rc", "virtual_hosts": [{"name": "vh", "domains": ["*"], "routes": [
            {"match": {"prefix": "/"}, "route": {"cluster": "a"}},
            {"match": {"safe_regex": {"regex": "("}}, "route": {"cluster": "a"}},
        ]}]});
        let bytes = prost::Message::encode_to_vec(&crate::decode::decode_message(desc, bad).unwrap());
        let whole = decode_body(ROUTE, "rc", Body::Proto(&bytes)).unwrap_err();
        let mut used = Pieces::new();
        let pieces = decode_with_pieces(ROUTE, "rc", Body::Proto(&bytes), &Pieces::new(), &mut used).unwrap_err();
        assert_eq!(pieces, whole);
        assert_eq!(whole.0.as_deref(), Some("virtual_hosts[0].routes[1].match.safe_regex.regex"), "{whole:?}");
    }

    #[test]
    fn a_known_route_is_not_decoded_again() {
        let bytes = configuration(&[vec![("/a".into(), 0), ("/b".into(), 1)]]);
        let mut used = Pieces::new();
        decode_with_pieces(ROUTE, "rc", Body::Proto(&bytes), &Pieces::new(), &mut used).unwrap();
        assert_eq!(used.len(), 2);
        // A known piece is taken as it is: poison one to see it used.
        let (key, _) = used.iter().next().map(|(k, v)| (*k, v.clone())).unwrap();
        let mut known = used.clone();
        known.insert(key, Piece { canonical: Bytes::from_static(b"\x0a\x01x"), clusters: Arc::from([]) });
        let mut next = Pieces::new();
        let r = decode_with_pieces(ROUTE, "rc", Body::Proto(&bytes), &known, &mut next).unwrap();
        assert!(r.body().windows(3).any(|w| w == b"\x0a\x01x"));
    }
}

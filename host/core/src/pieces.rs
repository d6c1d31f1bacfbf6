//! A RouteConfiguration of thousands of routes, decoded, checked and encoded canonically
//! route by route, so that a change to one route decodes and checks one route, not all of
//! them (design note 019, step 4).
//!
//! The plugin's bytes are split at the wire level: the configuration without its routes
//! (its "skeleton") goes through [`decode_body`] as a whole, each route on its own, and a
//! route whose bytes are those of a route in the configuration's last version takes its
//! canonical bytes from there ([`Pieces`]; bytes compared exactly, no hash to collide). The
//! canonical encoding writes fields in field-number order and a repeated message field as
//! its elements' encodings in order, so the whole is assembled by putting each virtual
//! host's routes (field 3) back between its fields numbered below and above 3. The result
//! is byte for byte what [`decode_body`] gives the whole (a property test below checks it).
//! Anything this path does not handle (JSON, a group or a malformed field, a skeleton or a
//! route that fails its checks) goes the whole way, so errors are [`decode_body`]'s own,
//! naming the field in the whole.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use prost::encoding::{WireType, decode_varint, encode_key, encode_varint};
use prost_reflect::DynamicMessage;

use crate::decode::{Body, canonical_body, decode_body, first_unknown_field};
use crate::resource::Resource;
use crate::types::ROUTE;

/// The routes of one RouteConfiguration as its plugin last wrote it: those bytes, and each
/// route's place in them with its piece, in order (virtual host by virtual host). The next
/// configuration's routes are matched against these by their bytes, compared exactly: lined
/// up in order (`line_up`), the few left over by a map of the old ones not lined up.
#[derive(Debug, Clone, Default)]
pub struct Pieces {
    bytes: Bytes,
    places: Vec<Range<usize>>,
    /// Each route's piece, in order: shared with the configuration's references.
    pieces: Arc<[Piece]>,
}

impl Pieces {
    /// How many routes it holds.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether it holds no route.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }
}

/// One route, checked: its canonical bytes and the clusters it names (field within the
/// route, cluster), so the configuration's references are the routes' put together instead of
/// the whole configuration decoded again (issue 50, item 4). One allocation, so that taking
/// thousands of them into the next version of a configuration touches one count each.
#[derive(Debug, Clone)]
pub struct Piece(Arc<PieceData>);

#[derive(Debug)]
struct PieceData {
    canonical: Bytes,
    clusters: Vec<(String, String)>,
}

impl Piece {
    /// The clusters the route names: (field within the route, cluster).
    pub fn clusters(&self) -> &[(String, String)] {
        &self.0.clusters
    }

    /// Whether `other` is this very piece (the route's bytes did not change in between).
    pub fn same(&self, other: &Piece) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// What tells this piece from every other alive: where it is.
    pub fn id(&self) -> *const () {
        Arc::as_ptr(&self.0).cast()
    }
}

/// How deep a route sits in a RouteConfiguration: configuration, virtual host, route.
const ROUTE_DEPTH: usize = 2;
/// `RouteConfiguration.virtual_hosts`.
const VIRTUAL_HOSTS: u32 = 2;
/// `VirtualHost.routes`.
const ROUTES: u32 = 3;

/// [`decode_body`], taking the routes of a RouteConfiguration from `known` (what the same
/// configuration was the last time) where their bytes are the same; what it used goes into
/// `used` (the next call's `known`).
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

/// Where `part` (a slice of `whole`) sits in `whole`.
fn place(whole: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

/// Lines up a list of `n` with the one of `m` it was made from, in order: for each new
/// element, the old one it is (`same`), stepping over one added or removed element at a time
/// (what adding, removing or moving an element does to a list); and the old elements not
/// lined up. A list changed in one place costs one comparison per element.
pub(crate) fn line_up(n: usize, m: usize, same: impl Fn(usize, usize) -> bool) -> (Vec<Option<usize>>, Vec<usize>) {
    let mut lined = vec![None; n];
    let mut left = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if same(i, j) {
            lined[i] = Some(j);
            (i, j) = (i + 1, j + 1);
        } else if j + 1 < m && same(i, j + 1) {
            left.push(j);
            j += 1;
        } else if i + 1 < n && same(i + 1, j) {
            i += 1;
        } else {
            left.push(j);
            (i, j) = (i + 1, j + 1);
        }
    }
    left.extend(j..m);
    (lined, left)
}

/// The piece of each route in `new` (places in `bytes`): from `known` where the bytes are the
/// same (lined up in order, else found by their bytes among the known routes not lined up: a
/// route moved far, or written twice), else decoded and checked on its own; `None` if one
/// fails.
fn match_routes(bytes: &[u8], new: &[Range<usize>], known: &Pieces) -> Option<Vec<Piece>> {
    let (places, old) = (&known.places, &known.pieces);
    let (lined, left) = line_up(new.len(), old.len(), |i, j| bytes[new[i].clone()] == known.bytes[places[j].clone()]);
    let mut by_bytes: HashMap<&[u8], Piece> = HashMap::new();
    if lined.iter().any(Option::is_none) {
        by_bytes.extend(left.into_iter().map(|j| (&known.bytes[places[j].clone()], old[j].clone())));
    }
    lined
        .into_iter()
        .zip(new)
        .map(|(j, r)| {
            if let Some(j) = j {
                return Some(old[j].clone());
            }
            let route = &bytes[r.clone()];
            if let Some(p) = by_bytes.get(route) {
                return Some(p.clone());
            }
            let p = route_alone(route)?;
            by_bytes.insert(route, p.clone());
            Some(p)
        })
        .collect()
}

/// The RouteConfiguration `bytes` assembled from its checked parts, or `None` to take the
/// whole way.
fn route_configuration(name: &str, bytes: &[u8], known: &Pieces, used: &mut Pieces) -> Option<Resource> {
    // Split: the skeleton (the configuration with its virtual hosts' routes taken out) and
    // where each virtual host's routes are, in order.
    let mut skeleton = Vec::with_capacity(bytes.len() / 8);
    let mut places: Vec<Range<usize>> = Vec::new();
    let mut hosts: Vec<usize> = Vec::new();
    for field in fields(bytes)? {
        if field.number != VIRTUAL_HOSTS || field.wire_type != WireType::LengthDelimited {
            skeleton.extend_from_slice(field.raw);
            continue;
        }
        let mut host = Vec::new();
        let mut these = 0;
        for f in fields(field.payload)? {
            match (f.number, f.wire_type) {
                (ROUTES, WireType::LengthDelimited) => {
                    places.push(place(bytes, f.payload));
                    these += 1;
                }
                (ROUTES, _) => return None,
                _ => host.extend_from_slice(f.raw),
            }
        }
        put_message(VIRTUAL_HOSTS, &host, &mut skeleton);
        hosts.push(these);
    }
    let canonical_skeleton = canonical_body(ROUTE, name, Body::Proto(&skeleton)).ok()?;
    let pieces = match_routes(bytes, &places, known)?;

    // Assemble: each virtual host of the canonical skeleton gets its routes back, after its
    // fields numbered below 3 and before those above.
    let mut whole = Vec::with_capacity(bytes.len());
    let mut counts = hosts.iter();
    let mut rest = &pieces[..];
    for field in fields(&canonical_skeleton)? {
        if field.number != VIRTUAL_HOSTS {
            whole.extend_from_slice(field.raw);
            continue;
        }
        let (these, others) = rest.split_at(*counts.next()?);
        rest = others;
        let mut host =
            Vec::with_capacity(field.payload.len() + these.iter().map(|r| r.0.canonical.len() + 4).sum::<usize>());
        let mut put = false;
        for f in fields(field.payload)? {
            if f.number > ROUTES && !put {
                these.iter().for_each(|r| put_message(ROUTES, &r.0.canonical, &mut host));
                put = true;
            }
            host.extend_from_slice(f.raw);
        }
        if !put {
            these.iter().for_each(|r| put_message(ROUTES, &r.0.canonical, &mut host));
        }
        put_message(VIRTUAL_HOSTS, &host, &mut whole);
    }
    if counts.next().is_some() {
        return None;
    }
    // What it names: each route's clusters, at the route's place (written out only for an
    // error: a configuration of thousands of routes is put together on every change to one).
    let pieces: Arc<[Piece]> = pieces.into();
    let hosts: Vec<u32> = hosts.into_iter().map(|n| n as u32).collect();
    let resource = Resource::new(ROUTE, name, &whole);
    resource.set_references(crate::consistency::References::of_routes(hosts, pieces.clone()));
    let bytes = Bytes::copy_from_slice(bytes);
    *used = Pieces { bytes, places, pieces };
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
    Some(Piece(Arc::new(PieceData { canonical: Bytes::from(canonical), clusters })))
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
            let mut used = Pieces::default();
            let first = route_configuration("rc", &bytes, &Pieces::default(), &mut used).expect("the piece path");
            prop_assert_eq!(first.body(), whole.body());
            prop_assert_eq!(first.version(), whole.version());
            // What it names, put together from its routes, is what decoding the whole finds.
            let decoded = crate::consistency::References::of(&whole);
            prop_assert_eq!(first.references(), &decoded);
            if again {
                // The second time every route is known.
                let mut next = Pieces::default();
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
        let mut used = Pieces::default();
        let pieces = decode_with_pieces(ROUTE, "rc", Body::Proto(&bytes), &Pieces::default(), &mut used).unwrap_err();
        assert_eq!(pieces, whole);
        assert_eq!(whole.0.as_deref(), Some("virtual_hosts[0].routes[1].match.safe_regex.regex"), "{whole:?}");
    }

    #[test]
    fn a_known_route_is_not_decoded_again() {
        let bytes = configuration(&[vec![("/a".into(), 0), ("/b".into(), 1)]]);
        let mut used = Pieces::default();
        decode_with_pieces(ROUTE, "rc", Body::Proto(&bytes), &Pieces::default(), &mut used).unwrap();
        assert_eq!(used.len(), 2);
        // A known piece is taken as it is: poison one to see it used, whether it is found by
        // its place (the same configuration) or by its bytes (the other route changed first).
        let mut known = used.clone();
        let poisoned = Piece(Arc::new(PieceData { canonical: Bytes::from_static(b"\x0a\x01x"), clusters: vec![] }));
        known.pieces = Arc::from([known.pieces[0].clone(), poisoned]);
        let mut next = Pieces::default();
        let r = decode_with_pieces(ROUTE, "rc", Body::Proto(&bytes), &known, &mut next).unwrap();
        assert!(r.body().windows(3).any(|w| w == b"\x0a\x01x"));
        let moved = configuration(&[vec![("/b".into(), 1), ("/c".into(), 0)]]);
        let r = decode_with_pieces(ROUTE, "rc", Body::Proto(&moved), &known, &mut next).unwrap();
        assert!(r.body().windows(3).any(|w| w == b"\x0a\x01x"));
    }

    /// One edit of a configuration's routes: (host, position, what), `what` 0 removes the
    /// route there, 1 changes it, 2 adds one before it, 3 moves it to the front of the first
    /// host, 4 writes it twice, 5 swaps it with the first route of the first host.
    fn edited(hosts: &mut [Vec<(String, u8)>], (h, at, what): (usize, usize, u8), n: usize) {
        if hosts.is_empty() {
            return;
        }
        let h = h % hosts.len();
        let at = if hosts[h].is_empty() { 0 } else { at % hosts[h].len() };
        let fresh = (format!("/n{n}"), (n % 9) as u8);
        match (what % 6, hosts[h].is_empty()) {
            (_, true) | (2, _) => hosts[h].insert(at, fresh),
            (0, _) => drop(hosts[h].remove(at)),
            (1, _) => hosts[h][at] = fresh,
            (3, _) => {
                let r = hosts[h].remove(at);
                hosts[0].insert(0, r);
            }
            (4, _) => {
                let r = hosts[h][at].clone();
                hosts[h].insert(at, r);
            }
            _ => {
                let first = hosts[0].first().cloned().unwrap_or(fresh);
                let r = std::mem::replace(&mut hosts[h][at], first);
                if let Some(first) = hosts[0].first_mut() {
                    *first = r;
                }
            }
        }
    }

    proptest! {
        /// Routes matched by place and by bytes against the configuration's last version give
        /// what decoding the whole gives, however the routes were edited in between.
        #[test]
        fn a_configuration_edited_in_steps_is_the_whole_at_every_step(
            mut hosts in proptest::collection::vec(
                proptest::collection::vec(("/[a-z]{1,3}", 0u8..9), 0..8), 1..4),
            edits in proptest::collection::vec(
                proptest::collection::vec((0usize..4, 0usize..8, 0u8..6), 1..4), 1..12),
        ) {
            let mut known = Pieces::default();
            for (n, step) in edits.iter().enumerate() {
                for &edit in step {
                    edited(&mut hosts, edit, n);
                }
                let bytes = configuration(&hosts);
                let whole = decode_body(ROUTE, "rc", Body::Proto(&bytes)).unwrap();
                let mut used = Pieces::default();
                let made = route_configuration("rc", &bytes, &known, &mut used).expect("the piece path");
                prop_assert_eq!(made.body(), whole.body());
                prop_assert_eq!(made.references(), &crate::consistency::References::of(&whole));
                prop_assert_eq!(used.len(), hosts.iter().map(Vec::len).sum::<usize>());
                known = used;
            }
        }
    }

    /// After a change, the consistency check looks at the routes whose bytes changed (and
    /// finds what one of them names that is missing, with the whole field); the routes a
    /// change left, or only moved, keep their piece and are not looked at again.
    #[test]
    fn a_change_is_checked_where_its_routes_changed() {
        use crate::consistency::{check, check_since};
        use crate::snapshot::Snapshot;
        use crate::types::CLUSTER;
        use envoy_types::pb::envoy::config::cluster::v3::Cluster;
        let clusters = (0..9).map(|k| format!("c{k}")).chain(["a".into(), "b".into()]).map(|name| {
            let body = prost::Message::encode_to_vec(&Cluster { name: name.clone(), ..Default::default() });
            Resource::new(CLUSTER, name, &body)
        });
        let step = |hosts: &[Vec<(String, u8)>], known: &Pieces| {
            let mut used = Pieces::default();
            let r = route_configuration("rc", &configuration(hosts), known, &mut used).unwrap();
            (r, used)
        };
        let routes = |list: &[(&str, u8)]| vec![list.iter().map(|(p, k)| ((*p).to_owned(), *k)).collect::<Vec<_>>()];
        let (first, known) = step(&routes(&[("/a", 0), ("/b", 3), ("/c", 6)]), &Pieces::default());
        let good = Snapshot::from_resources(clusters.chain([first.clone()])).unwrap();
        check(&good).unwrap();

        // The middle route now names c9, which does not exist.
        let (second, _) = step(&routes(&[("/a", 0), ("/b", 9), ("/c", 6)]), &known);
        let listed = |r: &Resource| -> Vec<(String, String)> {
            r.references()
                .all_but_shared(Some(first.references()))
                .map(|(at, _, n)| (at.to_string(), n.into()))
                .collect()
        };
        assert_eq!(listed(&second), [("virtual_hosts[0].routes[1].route.cluster".to_owned(), "c9".to_owned())]);
        let replace = || [(Arc::from(ROUTE), Arc::from("rc"))];
        let bad = good.apply(replace(), [second]).unwrap();
        let errs = check_since(&bad, &good).unwrap_err();
        let text = errs[0].to_string();
        assert!(text.contains("virtual_hosts[0].routes[1].route.cluster") && text.contains("\"c9\""), "{errs:?}");

        // Routes moved and one removed: every piece is shared, nothing is looked at again.
        let (third, _) = step(&routes(&[("/c", 6), ("/a", 0)]), &known);
        assert_eq!(listed(&third), []);
        check_since(&good.apply(replace(), [third]).unwrap(), &good).unwrap();
    }
}

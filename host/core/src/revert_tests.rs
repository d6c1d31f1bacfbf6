//! Tests of [`super`]: RouteConfigurations (and one Listener) written as JSON, encoded as xdst
//! encodes resources, composed, and read back.

use std::collections::BTreeSet;
use std::time::Instant;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use proptest::prelude::*;
use prost::Message as _;
use serde_json::{Value as Json, json};

use super::*;
use crate::types::{LISTENER, ROUTE};

const GW: &str = "Gateway/infra/gw";
const A: &str = "HTTPRoute/team-a/a";
const B: &str = "HTTPRoute/team-b/b";
const C: &str = "HTTPRoute/team-c/c";

fn marked(doc: &str) -> Json {
    json!({"filter_metadata": {"xdst": {"document": doc}}})
}

/// A route named `name` (none when empty) matching `prefix`, marked with `doc` if given.
fn route(name: &str, prefix: &str, doc: Option<&str>) -> Json {
    let mut r = json!({"match": {"prefix": prefix}, "direct_response": {"status": 200}});
    if !name.is_empty() {
        r["name"] = name.into();
    }
    if let Some(doc) = doc {
        r["metadata"] = marked(doc);
    }
    r
}

/// A RouteConfiguration of virtual hosts: (name, routes).
fn rc(hosts: &[(&str, Vec<Json>)]) -> Json {
    let hosts: Vec<Json> = hosts
        .iter()
        .map(|(name, routes)| json!({"name": name, "domains": [format!("{name}.example")], "routes": routes}))
        .collect();
    json!({"name": "gw", "virtual_hosts": hosts})
}

/// A resource written as JSON, decoded and encoded as xdst serves it.
fn encode(type_url: &str, json: &Json) -> Vec<u8> {
    let desc = crate::descriptors::message_for_type_url(type_url).unwrap();
    crate::canonical::encode(&crate::decode::decode_message(desc, json.clone()).unwrap()).unwrap()
}

fn set(docs: &[&str]) -> BTreeSet<String> {
    docs.iter().map(|d| d.to_string()).collect()
}

fn body(result: Option<Reverted>) -> Vec<u8> {
    match result {
        Some(Reverted::Body(body)) => body,
        other => panic!("not a body: {other:?}"),
    }
}

/// [`revert`] of RouteConfigurations owned by [`GW`].
fn reverted(now: &Json, base: Option<&Json>, docs: &[&str]) -> Vec<u8> {
    let base = base.map(|b| encode(ROUTE, b));
    body(revert(ROUTE, &encode(ROUTE, now), base.as_deref(), Some(GW), &set(docs)))
}

fn prefix(r: &Route) -> &str {
    match r.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) {
        Some(PathSpecifier::Prefix(p)) => p,
        _ => "",
    }
}

/// Each virtual host's routes, as `name:prefix`.
fn routes(body: &[u8]) -> Vec<(String, Vec<String>)> {
    let hosts = RouteConfiguration::decode(body).unwrap().virtual_hosts;
    hosts
        .into_iter()
        .map(|vh| (vh.name, vh.routes.iter().map(|r| format!("{}:{}", r.name, prefix(r))).collect()))
        .collect()
}

fn host(name: &str, routes: &[&str]) -> (String, Vec<String>) {
    (name.to_owned(), routes.iter().map(|r| r.to_string()).collect())
}

/// A's changed route goes back to its accepted form after the route it followed then, its new
/// route is left out and its deleted one is back after its old predecessor; B's changed and
/// new routes and the owner's route stay as the target has them, in the target's order.
#[test]
fn a_reverted_documents_routes_are_as_the_node_accepted_them() {
    let base = rc(&[(
        "any",
        vec![
            route("u0", "/u0", None),
            route("a1", "/a1", Some(A)),
            route("x1", "/x1", Some(B)),
            route("a2", "/a2", Some(A)),
            route("u", "/u", None),
        ],
    )]);
    let now = rc(&[(
        "any",
        vec![
            route("u0", "/u0", None),
            route("xn", "/xn", Some(B)),
            route("a1", "/a1-changed", Some(A)),
            route("x1", "/x1-changed", Some(B)),
            route("an", "/an", Some(A)),
            route("u", "/u", None),
        ],
    )]);
    assert_eq!(
        routes(&reverted(&now, Some(&base), &[A])),
        [host("any", &["u0:/u0", "a1:/a1", "xn:/xn", "x1:/x1-changed", "a2:/a2", "u:/u"])]
    );
    // B reverted instead: B's new route goes, its changed one comes back; A's changes stay.
    assert_eq!(
        routes(&reverted(&now, Some(&base), &[B])),
        [host("any", &["u0:/u0", "a1:/a1-changed", "x1:/x1", "an:/an", "u:/u"])]
    );
    // Unnamed routes are found as equal messages: the changed x1 is not found, so a2 goes
    // after what was last found before it, A's a1.
    let unnamed = |json: &Json| {
        let mut json = json.clone();
        for r in json["virtual_hosts"][0]["routes"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("name");
        }
        json
    };
    assert_eq!(
        routes(&reverted(&unnamed(&now), Some(&unnamed(&base)), &[A])),
        [host("any", &[":/u0", ":/a1", ":/a2", ":/xn", ":/x1-changed", ":/u"])]
    );
}

/// Two documents reverted at once each get their accepted routes, before the route they
/// preceded; a third keeps its change.
#[test]
fn two_documents_reverted_at_once() {
    let base = rc(&[("v", vec![route("a", "/a", Some(A)), route("b", "/b", Some(B)), route("c", "/c", Some(C))])]);
    let now = rc(&[("v", vec![route("c", "/c2", Some(C)), route("b", "/b2", Some(B)), route("a", "/a2", Some(A))])]);
    assert_eq!(routes(&reverted(&now, Some(&base), &[A, B])), [host("v", &["a:/a", "b:/b", "c:/c2"])]);
}

/// A route put back needs its virtual host: where the host is gone, so is the route.
#[test]
fn a_route_whose_virtual_host_is_gone_is_dropped() {
    let base = rc(&[
        ("v1", vec![route("a1", "/a1", Some(A))]),
        ("v2", vec![route("a2", "/a2", Some(A)), route("x", "/x", Some(B))]),
    ]);
    let now = rc(&[("v2", vec![route("x", "/x", Some(B))]), ("v3", vec![route("a3", "/a3", Some(A))])]);
    assert_eq!(routes(&reverted(&now, Some(&base), &[A])), [host("v2", &["a2:/a2", "x:/x"]), host("v3", &[])]);
    // A node that holds none of this name gets the target without A's parts.
    assert_eq!(routes(&reverted(&now, None, &[A])), [host("v2", &["x:/x"]), host("v3", &[])]);
}

/// The owner's skeleton holds every part: reverting the owner serves the accepted form, or
/// nothing when the node held none. The root's own mark names the owner before the argument.
#[test]
fn a_reverted_owner_gives_the_accepted_form_or_nothing() {
    let base = rc(&[("v", vec![route("a", "/a", Some(A))])]);
    let now = rc(&[("v", vec![route("a", "/a2", Some(A)), route("b", "/b", Some(B))])]);
    let (now_b, base_b) = (encode(ROUTE, &now), encode(ROUTE, &base));
    assert_eq!(revert(ROUTE, &now_b, Some(&base_b), Some(GW), &set(&[GW, B])), Some(Reverted::Body(base_b.clone())));
    assert_eq!(revert(ROUTE, &now_b, None, Some(GW), &set(&[GW])), Some(Reverted::Absent));
    let mut own = now.clone();
    own["metadata"] = marked("Gateway/infra/other");
    let own = encode(ROUTE, &own);
    let other = set(&["Gateway/infra/other"]);
    assert_eq!(revert(ROUTE, &own, Some(&base_b), Some(GW), &other), Some(Reverted::Body(base_b.clone())));
    assert_ne!(revert(ROUTE, &own, Some(&base_b), Some(GW), &set(&[GW])), Some(Reverted::Body(base_b)));
    assert_eq!(revert(ROUTE, b"\xff\xff", None, Some(GW), &set(&[A])), None, "does not decode");
    assert_eq!(revert(ROUTE, &now_b, Some(b"\xff\xff"), Some(GW), &set(&[A])), None, "base does not decode");
}

/// Reverting documents that are in neither form changes nothing: the target's canonical bytes.
#[test]
fn no_document_present_gives_the_targets_bytes() {
    let base = rc(&[("v", vec![route("a", "/a", Some(A))])]);
    let mut now = rc(&[("v", vec![route("a", "/a2", Some(A)), route("u", "/u", None)])]);
    now["virtual_hosts"][0]["typed_per_filter_config"] = json!({
        "z": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
        "a": {"@type": "type.googleapis.com/envoy.config.route.v3.Route", "name": "in-any", "metadata": marked(B)},
    });
    let now_b = encode(ROUTE, &now);
    for docs in [set(&[]), set(&["HTTPRoute/nobody/here"]), set(&[C])] {
        let base_b = encode(ROUTE, &base);
        assert_eq!(body(revert(ROUTE, &now_b, Some(&base_b), Some(GW), &docs)), now_b, "{docs:?}");
        assert_eq!(body(revert(ROUTE, &now_b, None, Some(GW), &docs)), now_b, "{docs:?}");
    }
}

/// A Listener with an inline route configuration in its HTTP connection manager (an `Any`).
fn listener(routes: Vec<Json>) -> Json {
    json!({
        "name": "l",
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": 8080}},
        "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "in",
            "route_config": {"name": "inline", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": routes}]},
            "http_filters": [{"name": "envoy.filters.http.router",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]
        }}]}]
    })
}

/// Marked parts inside an `Any` are reverted as anywhere else, and the `Any` packed again.
#[test]
fn marked_parts_inside_an_any_are_reverted() {
    let base = encode(LISTENER, &listener(vec![route("a", "/a", Some(A)), route("x", "/x", Some(B))]));
    let now = encode(LISTENER, &listener(vec![route("x", "/x2", Some(B)), route("a", "/a2", Some(A))]));
    let out = body(revert(LISTENER, &now, Some(&base), Some("Gateway/infra/l"), &set(&[A])));
    let l = Listener::decode(out.as_slice()).unwrap();
    let any = l.filter_chains[0].filters[0].config_type.clone().unwrap();
    let envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(any) = any else { panic!() };
    let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
    let Some(RouteSpecifier::RouteConfig(rc)) = hcm.route_specifier else { panic!() };
    let got: Vec<_> = rc.virtual_hosts[0].routes.iter().map(|r| format!("{}:{}", r.name, prefix(r))).collect();
    assert_eq!(got, ["a:/a", "x:/x2"], "a went first when the node accepted it");
    let digests = |b: &[u8]| part_digests(LISTENER, b, Some("Gateway/infra/l")).unwrap();
    assert_eq!(digests(&out)[A], digests(&base)[A]);
    assert_eq!(digests(&out)[B], digests(&now)[B]);
    let desc = crate::descriptors::message_for_type_url(LISTENER).unwrap();
    assert_eq!(crate::canonical::encode(&DynamicMessage::decode(desc, out.as_slice()).unwrap()).unwrap(), out);
}

/// A part of another document keeps the target's form while a reverted part inside it goes
/// back; a reverted part keeps the target's form of another document's part inside it.
#[test]
fn parts_inside_another_documents_part() {
    let vhost = |domain: &str, a: &str, b: &str| {
        json!({"name": "v", "domains": [domain], "metadata": marked(B),
            "routes": [route("a", a, Some(A)), route("b", b, None)]})
    };
    let base = json!({"name": "gw", "virtual_hosts": [vhost("one.example", "/a", "/b")]});
    let now = json!({"name": "gw", "virtual_hosts": [vhost("two.example", "/a2", "/b2")]});
    let domains = |b: &[u8]| RouteConfiguration::decode(b).unwrap().virtual_hosts[0].domains.clone();
    let a = reverted(&now, Some(&base), &[A]);
    assert_eq!((routes(&a), domains(&a)), (vec![host("v", &["a:/a", "b:/b2"])], vec!["two.example".to_owned()]));
    let b = reverted(&now, Some(&base), &[B]);
    assert_eq!((routes(&b), domains(&b)), (vec![host("v", &["a:/a2", "b:/b"])], vec!["one.example".to_owned()]));
}

/// Parts in a map (here routes packed in `typed_per_filter_config`, which nothing else marks)
/// are put back by key, and a document's digest does not depend on the map's order in memory.
#[test]
fn parts_in_a_map_are_put_back_by_key_and_digest_the_same_every_time() {
    let with = |prefixes: &[(&str, &str, &str)]| {
        let mut json = rc(&[("v", vec![])]);
        let map: serde_json::Map<String, Json> = prefixes
            .iter()
            .map(|(key, p, doc)| {
                let r = json!({"@type": "type.googleapis.com/envoy.config.route.v3.Route", "name": p, "metadata": marked(doc)});
                (key.to_string(), r)
            })
            .collect();
        json["virtual_hosts"][0]["typed_per_filter_config"] = Json::Object(map);
        encode(ROUTE, &json)
    };
    let base = with(&[("k1", "/1", A), ("k2", "/2", A), ("k3", "/3", B), ("k5", "/5", A)]);
    let now = with(&[("k1", "/1b", A), ("k3", "/3b", B), ("k4", "/4", A), ("k5", "/5", B)]);
    let out = body(revert(ROUTE, &now, Some(&base), Some(GW), &set(&[A])));
    assert_eq!(out, with(&[("k1", "/1", A), ("k2", "/2", A), ("k3", "/3b", B), ("k5", "/5", A)]), "k5 was A's");
    let first = part_digests(ROUTE, &base, Some(GW)).unwrap();
    for _ in 0..20 {
        assert_eq!(part_digests(ROUTE, &base, Some(GW)).unwrap(), first);
    }
}

/// Equal parts, equal digests; a changed route changes its document's digest only; a change
/// no mark covers is the owner's.
#[test]
fn part_digests_change_with_their_documents_parts() {
    let base = rc(&[("v", vec![route("a", "/a", Some(A)), route("b", "/b", Some(B)), route("u", "/u", None)])]);
    let digests = |json: &Json| part_digests(ROUTE, &encode(ROUTE, json), Some(GW)).unwrap();
    let d = digests(&base);
    assert_eq!(d.keys().collect::<Vec<_>>(), [GW, A, B]);
    assert_eq!(digests(&base.clone()), d);
    let mut route_changed = base.clone();
    route_changed["virtual_hosts"][0]["routes"][0]["match"]["prefix"] = "/a2".into();
    let c = digests(&route_changed);
    assert!(c[A] != d[A] && c[B] == d[B] && c[GW] == d[GW]);
    let mut unmarked = base.clone();
    unmarked["virtual_hosts"][0]["routes"][2]["match"]["prefix"] = "/u2".into();
    let u = digests(&unmarked);
    assert!(u[A] == d[A] && u[B] == d[B] && u[GW] != d[GW]);
    let mut domain = base.clone();
    domain["virtual_hosts"][0]["domains"][0] = "other.example".into();
    assert!(digests(&domain)[GW] != d[GW]);
    let mut order = base.clone();
    order["virtual_hosts"][0]["routes"] = json!([route("b", "/b", Some(B)), route("a", "/a", Some(A))]);
    assert!(digests(&order)[A] == d[A], "one part each: moving it is not a change of its own");
    assert_eq!(part_digests(ROUTE, b"\xff\xff", Some(GW)), None);
}

// ---- property: random targets derived from random accepted forms ----

const DOCS: [&str; 3] = [A, B, C];

/// A route of the model: name (empty: none), prefix, document (`None`: the owner's).
#[derive(Debug, Clone)]
struct R {
    name: String,
    prefix: String,
    doc: Option<usize>,
}

type Hosts = Vec<(String, Vec<R>)>;

fn any_route() -> impl Strategy<Value = R> {
    ("(r[0-9])?", "/[a-c]{1,2}", prop::option::weighted(0.8, 0..DOCS.len())).prop_map(|(name, prefix, doc)| R {
        name,
        prefix,
        doc,
    })
}

#[derive(Debug, Clone)]
enum Edit {
    Change(usize, usize, String),
    Add(usize, usize, R),
    Delete(usize, usize),
    Move(usize, usize, usize),
    AddHost(usize, Vec<R>),
    RemoveHost(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let i = || 0..16usize;
    prop_oneof![
        3 => (i(), i(), "/[a-c]{1,2}").prop_map(|(h, r, p)| Edit::Change(h, r, p)),
        3 => (i(), i(), any_route()).prop_map(|(h, at, r)| Edit::Add(h, at, r)),
        3 => (i(), i()).prop_map(|(h, r)| Edit::Delete(h, r)),
        2 => (i(), i(), i()).prop_map(|(h, from, to)| Edit::Move(h, from, to)),
        1 => (i(), prop::collection::vec(any_route(), 0..3)).prop_map(|(at, rs)| Edit::AddHost(at, rs)),
        1 => i().prop_map(Edit::RemoveHost),
    ]
}

/// The routes of the `h`th virtual host (modulo their number), if there is one.
fn routes_at(hosts: &mut Hosts, h: usize) -> Option<&mut Vec<R>> {
    let hs = hosts.len();
    (hs > 0).then(move || &mut hosts[h % hs].1)
}

fn apply(hosts: &mut Hosts, edits: &[Edit]) {
    for (n, e) in edits.iter().enumerate() {
        let hs = hosts.len();
        match e.clone() {
            Edit::Change(h, r, p) => {
                if let Some(rs) = routes_at(hosts, h).filter(|rs| !rs.is_empty()) {
                    let len = rs.len();
                    rs[r % len].prefix = p;
                }
            }
            Edit::Add(h, at, route) => {
                if let Some(rs) = routes_at(hosts, h) {
                    rs.insert(at % (rs.len() + 1), route);
                }
            }
            Edit::Delete(h, r) => {
                if let Some(rs) = routes_at(hosts, h).filter(|rs| !rs.is_empty()) {
                    rs.remove(r % rs.len());
                }
            }
            Edit::Move(h, from, to) => {
                if let Some(rs) = routes_at(hosts, h).filter(|rs| !rs.is_empty()) {
                    let r = rs.remove(from % rs.len());
                    rs.insert(to % (rs.len() + 1), r);
                }
            }
            Edit::AddHost(at, rs) => hosts.insert(at % (hs + 1), (format!("new{n}"), rs)),
            Edit::RemoveHost(h) if hs > 0 => {
                hosts.remove(h % hs);
            }
            Edit::RemoveHost(_) => {}
        }
    }
}

fn model(hosts: &Hosts) -> Vec<u8> {
    let hosts: Vec<(&str, Vec<Json>)> = hosts
        .iter()
        .map(|(name, rs)| {
            (name.as_str(), rs.iter().map(|r| route(&r.name, &r.prefix, r.doc.map(|d| DOCS[d]))).collect())
        })
        .collect();
    encode(ROUTE, &rc(&hosts))
}

fn doc_of(r: &Route) -> Option<String> {
    let s = r.metadata.as_ref()?.filter_metadata.get("xdst")?.fields.get("document")?;
    match &s.kind {
        Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(d)) => Some(d.clone()),
        _ => None,
    }
}

/// Each virtual host's routes that are not of a document in `docs`, in order.
fn staying(body: &[u8], docs: &BTreeSet<String>) -> Vec<(String, Vec<Route>)> {
    let hosts = RouteConfiguration::decode(body).unwrap().virtual_hosts;
    hosts
        .into_iter()
        .map(|vh| (vh.name, vh.routes.into_iter().filter(|r| !doc_of(r).is_some_and(|d| docs.contains(&d))).collect()))
        .collect()
}

proptest! {
    /// Every reverted document's parts are as the node accepted them (but for those whose
    /// virtual host is gone), every other document's and the owner's as the target has them,
    /// each virtual host keeps the target's order of the routes not reverted, and reverting
    /// nothing gives the target's bytes.
    #[test]
    fn reverted_documents_are_as_accepted_and_the_rest_as_the_target(
        base in prop::collection::vec(prop::collection::vec(any_route(), 0..6), 1..4),
        edits in prop::collection::vec(edit(), 0..8),
        reverted in prop::sample::subsequence(DOCS.to_vec(), 0..=3),
        owner_too in prop::bool::weighted(0.1),
    ) {
        let base: Hosts = base.into_iter().enumerate().map(|(i, rs)| (format!("vh{i}"), rs)).collect();
        let mut now = base.clone();
        apply(&mut now, &edits);
        let (base_b, now_b) = (model(&base), model(&now));
        let mut docs: BTreeSet<String> = reverted.iter().map(|d| d.to_string()).collect();
        if owner_too {
            docs.insert(GW.to_owned());
            prop_assert_eq!(revert(ROUTE, &now_b, Some(&base_b), Some(GW), &docs), Some(Reverted::Body(base_b)));
            return Ok(());
        }
        let out = body(revert(ROUTE, &now_b, Some(&base_b), Some(GW), &docs));
        let got = part_digests(ROUTE, &out, Some(GW)).unwrap();
        let target = part_digests(ROUTE, &now_b, Some(GW)).unwrap();
        // The accepted form, without the virtual hosts the target no longer has.
        let kept: Hosts = base.iter().filter(|(name, _)| now.iter().any(|(n, _)| n == name)).cloned().collect();
        let accepted = part_digests(ROUTE, &model(&kept), Some(GW)).unwrap();
        for doc in DOCS.iter().chain([&GW]) {
            let want = if docs.contains(*doc) { &accepted } else { &target };
            prop_assert_eq!(got.get(*doc), want.get(*doc), "{}", doc);
        }
        prop_assert_eq!(staying(&out, &docs), staying(&now_b, &docs));
        prop_assert_eq!(body(revert(ROUTE, &now_b, Some(&base_b), Some(GW), &BTreeSet::new())), now_b.clone());
        prop_assert_eq!(body(revert(ROUTE, &now_b, None, Some(GW), &set(&["HTTPRoute/nobody/z"]))), now_b);
    }
}

/// What composing costs a node holding one document, in a RouteConfiguration of 5,000 routes:
/// `cargo test --release -p xdst-core --lib revert::tests::revert_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run it by name"]
fn revert_cost() {
    let n = 5_000;
    let team = |i: usize| format!("HTTPRoute/team-{}/r{i}", i % 50);
    let config = |changed: &str| {
        let routes: Vec<Json> = (0..n)
            .map(|i| {
                let p = if i == n / 2 { changed.to_owned() } else { format!("/r{i}") };
                let mut r = route(&format!("r{i}"), &p, Some(&team(i)));
                r["route"] = json!({"cluster": format!("c{}", i % 20), "timeout": "3s"});
                r.as_object_mut().unwrap().remove("direct_response");
                r
            })
            .collect();
        encode(ROUTE, &rc(&[("a", routes[..n / 2].to_vec()), ("b", routes[n / 2..].to_vec())]))
    };
    let (base, now) = (config("/old"), config("/new"));
    let docs = set(&[&team(n / 2)]);
    let runs = 20;
    let started = Instant::now();
    for _ in 0..runs {
        assert_eq!(body(revert(ROUTE, &now, Some(&base), Some(GW), &docs)), base);
    }
    let each = started.elapsed() / runs;
    let started = Instant::now();
    let desc = crate::descriptors::message_for_type_url(ROUTE).unwrap();
    for _ in 0..runs {
        crate::canonical::encode(&DynamicMessage::decode(desc.clone(), now.as_slice()).unwrap()).unwrap();
    }
    let alone = started.elapsed() / runs;
    eprintln!(
        "revert, {n} routes ({} KiB), one route reverted: {each:?} a call (decoding and encoding the target alone: {alone:?})",
        now.len() / 1024
    );
}

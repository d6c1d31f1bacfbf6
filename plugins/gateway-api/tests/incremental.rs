//! Incremental equals full (issue 50, item 2; design 020): random sequences of edits of every
//! kind the plugin reads (GatewayClasses, Gateways and their listeners, ListenerSets, HTTP, gRPC
//! and TCP routes, Services, EndpointSlices, ReferenceGrants, BackendTLSPolicies, Namespaces):
//! create, change, delete, rename (one document gone and another made in the same call),
//! several at once, in any order. After every step, what the changes calls built (merged as the
//! host merges them) must be byte for byte what a fresh full call returns: every resource with
//! its node groups and document, every status, every diagnostic.
//!
//! `XDST_PROPTEST_CASES` sets the number of sequences (default 250 of 40 steps: 10,000 steps).

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};
use xdst_guest::{Changes, IntentDocument, TranslateRequest, TranslateResponse, XdsResource};
use xdst_plugin_gateway_api::incremental::{Call, Incremental};

/// Every document slot: kind, namespace (empty: cluster-scoped), name.
const SLOTS: &[(&str, &str, &str)] = &[
    ("GatewayClass", "", "xdst"),
    ("Gateway", "infra", "gw-a"),
    ("Gateway", "infra", "gw-b"),
    ("ListenerSet", "infra", "ls"),
    ("HTTPRoute", "team-a", "r0"),
    ("HTTPRoute", "team-a", "r1"),
    ("HTTPRoute", "team-a", "r2"),
    ("HTTPRoute", "team-a", "r3"),
    ("HTTPRoute", "team-b", "r4"),
    ("HTTPRoute", "team-b", "r5"),
    ("HTTPRoute", "team-b", "r6"),
    ("GRPCRoute", "team-a", "g0"),
    ("GRPCRoute", "team-b", "g1"),
    ("TCPRoute", "team-a", "t0"),
    ("Service", "team-a", "svc-1"),
    ("Service", "team-a", "svc-2"),
    ("Service", "team-b", "svc-1"),
    ("EndpointSlice", "team-a", "svc-1-x"),
    ("EndpointSlice", "team-a", "svc-1-y"),
    ("EndpointSlice", "team-a", "svc-2-x"),
    ("EndpointSlice", "team-b", "svc-1-x"),
    ("ReferenceGrant", "team-b", "allow-a"),
    ("BackendTLSPolicy", "team-a", "tls"),
    ("Namespace", "", "team-a"),
];

/// The document in `slot`, version `v` (any number; each slot has a few shapes).
fn document(slot: usize, v: u32) -> IntentDocument {
    let (kind, ns, name) = SLOTS[slot];
    let group = match kind {
        "Service" | "Namespace" => "v1",
        "EndpointSlice" => "discovery.k8s.io/v1",
        _ => "gateway.networking.k8s.io/v1",
    };
    let mut metadata = json!({"name": name});
    if !ns.is_empty() {
        metadata["namespace"] = json!(ns);
    }
    // Creation times that tie, differ, or are absent: precedence and conflicts follow them.
    match v % 3 {
        1 => metadata["creationTimestamp"] = json!("2026-01-01T00:00:00Z"),
        2 => metadata["creationTimestamp"] = json!(format!("2026-01-0{}T00:00:00Z", 2 + (slot % 5))),
        _ => {}
    }
    let v = v / 3;
    let all = json!({"namespaces": {"from": "All"}});
    let mut body = json!({"apiVersion": group, "kind": kind, "metadata": metadata});
    match kind {
        "GatewayClass" => {
            let controller = if v % 4 == 3 { "example.com/other" } else { "xdst.dev/gateway-controller" };
            body["spec"] = json!({"controllerName": controller});
        }
        "Gateway" => {
            let listeners = match v % 5 {
                0 => json!([{"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": all}]),
                1 => json!([
                    {"name": "star", "port": 80, "protocol": "HTTP", "hostname": "*.example.com", "allowedRoutes": all},
                    {"name": "a", "port": 80, "protocol": "HTTP", "hostname": "a.example.com", "allowedRoutes": all},
                ]),
                2 => json!([
                    {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": all},
                    {"name": "tcp", "port": 9000, "protocol": "TCP", "allowedRoutes": all},
                ]),
                3 => json!([
                    {"name": "http", "port": 80, "protocol": "HTTP",
                     "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"env": "prod"}}}}},
                    {"name": "b", "port": 8080, "protocol": "HTTP", "hostname": "b.example.com", "allowedRoutes": all},
                ]),
                _ => json!([
                    {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": all},
                    {"name": "same", "port": 80, "protocol": "HTTP", "allowedRoutes": all},
                ]),
            };
            // Pinned to routing by host or not: routes without exact hostnames come and go.
            if (v / 10) % 2 == 1 {
                body["metadata"]["annotations"] = json!({"xdst.dev/route-by-host": "true"});
            }
            body["spec"] = json!({
                "gatewayClassName": "xdst",
                "listeners": listeners,
                "allowedListeners": {"namespaces": {"from": if v.is_multiple_of(2) { "Same" } else { "None" }}},
            });
        }
        "ListenerSet" => {
            let hostname = if v.is_multiple_of(2) { "ls.example.com" } else { "a.example.com" };
            body["spec"] = json!({
                "parentRef": {"name": "gw-a", "kind": "Gateway", "group": "gateway.networking.k8s.io"},
                "listeners": [{"name": "ls", "port": 81, "protocol": "HTTP", "hostname": hostname, "allowedRoutes": all}],
            });
        }
        "HTTPRoute" | "GRPCRoute" => {
            let parents = match v % 5 {
                0 => json!([{"name": "gw-a", "namespace": "infra"}]),
                1 => json!([{"name": "gw-b", "namespace": "infra"}]),
                2 => json!([{"name": "gw-a", "namespace": "infra"}, {"name": "gw-b", "namespace": "infra"}]),
                3 => json!([
                    {"name": "gw-a", "namespace": "infra", "sectionName": "star"},
                    {"name": "gw-a", "namespace": "infra", "sectionName": "b"},
                ]),
                _ => json!([
                    {"name": "ls", "namespace": "infra", "kind": "ListenerSet"},
                    {"name": "gw-a", "namespace": "infra", "port": 80},
                ]),
            };
            let hostnames = match (v / 5) % 5 {
                0 => json!([]),
                1 => json!(["a.example.com"]),
                2 => json!(["*.example.com", "b.example.com"]),
                3 => json!(["c.other"]),
                _ => json!(["ls.example.com", "x.example.com"]),
            };
            let backend = |w: u32| match w % 5 {
                0 => json!({"name": "svc-1", "port": 8080}),
                1 => json!({"name": "svc-2", "port": 8080, "weight": 3}),
                2 => json!({"name": "svc-1", "namespace": "team-b", "port": 8080}),
                3 => json!({"name": "svc-9", "port": 8080}),
                _ => json!({"name": "svc-1", "port": 9090}),
            };
            let w = v / 25;
            let rules = if kind == "GRPCRoute" {
                json!([{"matches": [{"method": {"service": "pkg.Echo", "method": format!("M{}", w % 3)}}],
                        "backendRefs": [backend(w)]}])
            } else {
                match w % 4 {
                    0 => json!([{"matches": [{"path": {"type": "PathPrefix", "value": format!("/{name}")}}],
                                 "backendRefs": [backend(w / 4)]}]),
                    1 => json!([
                        {"matches": [{"path": {"type": "Exact", "value": "/x"}, "headers": [{"name": "h", "value": name}]}],
                         "backendRefs": [backend(w / 4), backend(w / 4 + 1)]},
                        {"filters": [{"type": "RequestHeaderModifier",
                                      "requestHeaderModifier": {"add": [{"name": "via", "value": name}]}}],
                         "backendRefs": [backend(w / 4 + 2)]},
                    ]),
                    2 => json!([{"backendRefs": [backend(w / 4)]}]),
                    _ => json!([{"matches": [{"path": {"type": "RegularExpression", "value": "(bad"}}]}]),
                }
            };
            body["spec"] = json!({"parentRefs": parents, "hostnames": hostnames, "rules": rules});
        }
        "TCPRoute" => {
            let service = if v.is_multiple_of(2) { "svc-1" } else { "svc-2" };
            body["apiVersion"] = json!("gateway.networking.k8s.io/v1alpha2");
            body["spec"] = json!({
                "parentRefs": [{"name": "gw-a", "namespace": "infra", "sectionName": "tcp"}],
                "rules": [{"backendRefs": [{"name": service, "port": 8080}]}],
            });
        }
        "Service" => {
            let ports = match v % 3 {
                0 => json!([{"name": "http", "port": 8080}]),
                1 => json!([{"name": "http", "port": 8080, "appProtocol": "kubernetes.io/h2c"}]),
                _ => json!([{"name": "web", "port": 8080}, {"name": "http", "port": 9090}]),
            };
            body["spec"] = json!({"ports": ports});
        }
        "EndpointSlice" => {
            let service = if v % 4 == 3 { "svc-2" } else { name.trim_end_matches("-x").trim_end_matches("-y") };
            body["metadata"]["labels"] = json!({"kubernetes.io/service-name": service});
            body["addressType"] = json!(if v % 7 == 6 { "FQDN" } else { "IPv4" });
            body["ports"] = json!([{"name": if v % 5 == 4 { "web" } else { "http" }, "port": 8000 + (v % 3)}]);
            body["endpoints"] = json!([
                {"addresses": [format!("10.0.{}.{}", slot, v % 250)]},
                {"addresses": [format!("10.1.{}.1", slot)], "conditions": {"ready": v.is_multiple_of(2)}},
            ]);
        }
        "ReferenceGrant" => {
            let from_kind = if v % 3 == 2 { "GRPCRoute" } else { "HTTPRoute" };
            let mut to = json!({"group": "", "kind": "Service"});
            if v % 3 == 1 {
                to["name"] = json!("svc-2");
            }
            body["spec"] = json!({
                "from": [{"group": "gateway.networking.k8s.io", "kind": from_kind, "namespace": "team-a"}],
                "to": [to],
            });
        }
        "BackendTLSPolicy" => {
            let target = if v.is_multiple_of(2) { "svc-2" } else { "svc-1" };
            body["spec"] = json!({
                "targetRefs": [{"group": "", "kind": "Service", "name": target}],
                "validation": {"hostname": format!("{target}.example"), "wellKnownCACertificates": "System"},
            });
        }
        _ => {
            let labels = if v.is_multiple_of(2) { json!({"env": "prod"}) } else { json!({"env": "dev"}) };
            body["metadata"]["labels"] = labels;
        }
    }
    let qualified = if ns.is_empty() { name.to_owned() } else { format!("{ns}/{name}") };
    IntentDocument { kind: kind.into(), name: qualified, origin: "case.yaml".into(), json: body.to_string() }
}

/// What the host holds of a plugin's output: resources by (type, name), statuses by document.
#[derive(Debug, Default, PartialEq)]
struct Held {
    resources: BTreeMap<(String, String), XdsResource>,
    statuses: BTreeMap<String, String>,
    diagnostics: Vec<String>,
}

impl Held {
    /// Takes in an answer as the host does (design 020): a full one replaces everything.
    fn merge(&mut self, answer: TranslateResponse, full: bool, removed_docs: &[String]) {
        if full {
            *self = Held::default();
        }
        for k in &answer.removed {
            self.resources.remove(&(k.type_url.clone(), k.name.clone()));
        }
        for d in removed_docs {
            self.statuses.remove(d);
        }
        for r in answer.resources {
            self.resources.insert((r.type_url.clone(), r.name.clone()), r);
        }
        for s in answer.statuses {
            if s.status.is_empty() {
                self.statuses.remove(&s.document);
            } else {
                self.statuses.insert(s.document, s.status);
            }
        }
        self.diagnostics = answer.diagnostics.iter().map(|d| format!("{:?} {}", d.document, d.message)).collect();
    }
}

fn request(documents: Vec<IntentDocument>, config: &str, removed: Option<Vec<String>>) -> TranslateRequest {
    TranslateRequest {
        node_group: String::new(),
        documents,
        resources: vec![],
        config: config.into(),
        changes: removed.map(|removed| Changes { removed }),
    }
}

/// A RouteConfiguration is put together from encoded parts (`vhosts.rs`): the bytes must be
/// what encoding the decoded message gives, as Envoy and the host's checks read it.
fn canonical(held: &Held) -> Result<(), TestCaseError> {
    use xdst_guest::envoy::envoy::config::route::v3::RouteConfiguration;
    use xdst_guest::prost::Message;
    for r in held.resources.values().filter(|r| r.type_url.ends_with(".RouteConfiguration")) {
        let xdst_guest::Body::Proto(bytes) = &r.body else { panic!("a proto body") };
        let decoded = RouteConfiguration::decode(bytes.as_slice()).unwrap();
        prop_assert!(decoded.encode_to_vec() == *bytes, "{} is not encoded as prost encodes it", r.name);
    }
    Ok(())
}

/// The first difference between two holdings, for the failure message.
fn first_difference(a: &Held, b: &Held) -> String {
    for k in a.resources.keys().chain(b.resources.keys()) {
        if a.resources.get(k) != b.resources.get(k) {
            return format!("resource {k:?}: incremental {:?}\nfull {:?}", a.resources.get(k), b.resources.get(k));
        }
    }
    for k in a.statuses.keys().chain(b.statuses.keys()) {
        if a.statuses.get(k) != b.statuses.get(k) {
            return format!("status of {k}: incremental {:?}\nfull {:?}", a.statuses.get(k), b.statuses.get(k));
        }
    }
    format!("diagnostics: incremental {:?}\nfull {:?}", a.diagnostics, b.diagnostics)
}

/// One edit: a slot and its next version, or none to delete it.
fn edit() -> impl Strategy<Value = (usize, Option<u32>)> {
    (0..SLOTS.len(), prop::option::weighted(0.8, 0u32..600))
}

fn cases() -> u32 {
    std::env::var("XDST_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(250)
}

/// One sequence: what there is at first, the edits of each step, the settings and the order
/// the host sends documents in.
type Sequence = (Vec<Option<u32>>, Vec<Vec<(usize, Option<u32>)>>, bool, u64);

#[test]
fn incremental_equals_full() {
    let sequences = (
        prop::collection::vec(prop::option::weighted(0.85, 0u32..600), SLOTS.len()),
        prop::collection::vec(prop::collection::vec(edit(), 1..4), 40),
        any::<bool>(),
        any::<u64>(),
    );
    let (steps_run, patched) = (std::cell::Cell::new(0usize), std::cell::Cell::new(0usize));
    let scoped = std::cell::Cell::new(0usize);
    let mut runner =
        proptest::test_runner::TestRunner::new(ProptestConfig { cases: cases(), ..ProptestConfig::default() });
    let result = runner.run(&sequences, |(start, steps, per_gateway, shuffle): Sequence| {
        // Ports with two exact hostnames or more route by host over scoped RDS in one of the
        // settings (the default takes 32), so ports change form as routes come and go.
        let config = if per_gateway {
            r#"{"nodes": "per-gateway", "addresses": {"infra/gw-b": "127.0.0.2"}}"#
        } else {
            r#"{"addresses": {"infra/gw-b": "127.0.0.2"}, "routeScopesFrom": 2}"#
        };
        let mut now: BTreeMap<usize, IntentDocument> =
            start.iter().enumerate().filter_map(|(s, v)| Some((s, document(s, (*v)?)))).collect();
        let mut plugin = Incremental::default();
        let mut held = Held::default();
        let first = plugin.call(&request(now.values().cloned().collect(), config, None)).unwrap();
        held.merge(first, true, &[]);
        for (step, edits) in steps.iter().enumerate() {
            let mut changed: BTreeMap<usize, IntentDocument> = BTreeMap::new();
            let mut removed = Vec::new();
            for (slot, version) in edits {
                match version {
                    Some(v) => {
                        let d = document(*slot, *v);
                        if now.get(slot) != Some(&d) {
                            changed.insert(*slot, d.clone());
                        }
                        now.insert(*slot, d);
                    }
                    None => {
                        if let Some(d) = now.remove(slot) {
                            changed.remove(slot);
                            removed.push(d.id());
                        }
                    }
                }
            }
            removed.retain(|id| !now.values().any(|d| &d.id() == id));
            // The host's order is its own: the changed documents in an order of the step's.
            let mut sent: Vec<IntentDocument> = changed.into_values().collect();
            sent.sort_by_key(|d| (d.id().len() as u64 * 7919 + shuffle + step as u64) % 97);
            let answer = plugin.call(&request(sent, config, Some(removed.clone())));
            let mut docs: Vec<IntentDocument> = now.values().cloned().collect();
            docs.reverse();
            let full = Incremental::default().call(&request(docs, config, None));
            match (answer, full) {
                (Ok(answer), Ok(full)) => {
                    steps_run.set(steps_run.get() + 1);
                    patched.set(patched.get() + usize::from(plugin.last() == Some(Call::Patched)));
                    held.merge(answer, false, &removed);
                    let mut expected = Held::default();
                    expected.merge(full, true, &[]);
                    canonical(&expected)?;
                    let scopes = expected.resources.keys().any(|(t, _)| t.ends_with("ScopedRouteConfiguration"));
                    scoped.set(scoped.get() + usize::from(scopes && plugin.last() == Some(Call::Patched)));
                    prop_assert!(held == expected, "step {step} ({edits:?}): {}", first_difference(&held, &expected));
                }
                (Err(a), Err(b)) => {
                    prop_assert_eq!(a.message, b.message);
                    // The host drops the instance and calls a fresh one in full.
                    plugin = Incremental::default();
                    let docs = now.values().cloned().collect();
                    held.merge(plugin.call(&request(docs, config, None)).unwrap(), true, &[]);
                }
                (a, b) => prop_assert!(false, "step {step}: incremental {:?}, full {:?}", a.err(), b.err()),
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The patch is what is under test: it must answer a good share of the steps (routes and
    // EndpointSlices are half the slots), the rest going through the whole translation.
    let (steps_run, patched, scoped) = (steps_run.get(), patched.get(), scoped.get());
    eprintln!("{steps_run} steps, {patched} answered by the patch, {scoped} of them with a port scoped by host");
    assert!(patched * 5 > steps_run, "only {patched} of {steps_run} steps were patched");
    assert!(scoped * 50 > steps_run, "only {scoped} of {steps_run} steps patched a port scoped by host");
}

/// A one-route change answers what the route reaches: its RouteConfiguration and its status,
/// nothing of the other routes, Gateways or clusters.
#[test]
fn a_route_change_answers_what_it_reaches() {
    let config = "{}";
    let slots = [0usize, 1, 4, 5, 8, 14, 16, 17, 21];
    let docs: Vec<IntentDocument> = slots.iter().map(|&s| document(s, 0)).collect();
    let mut plugin = Incremental::default();
    let first = plugin.call(&request(docs, config, None)).unwrap();
    assert!(first.resources.len() >= 4, "{:?}", first.resources.iter().map(|r| &r.name).collect::<Vec<_>>());
    // r1 gets a creation time (version 1): its rules' precedence changes, nothing else.
    let changed = document(5, 1);
    let answer = plugin.call(&request(vec![changed], config, Some(vec![]))).unwrap();
    assert_eq!(plugin.last(), Some(Call::Patched));
    let names: Vec<&str> = answer.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["infra/gw-a/80"], "only the route's RouteConfiguration");
    assert!(answer.removed.is_empty());
    let statuses: Vec<&str> = answer.statuses.iter().map(|s| s.document.as_str()).collect();
    assert!(statuses.iter().all(|s| *s == "HTTPRoute/team-a/r1"), "{statuses:?}");
    let _: Value = serde_json::from_str(&answer.statuses.first().map_or("{}".into(), |s| s.status.clone())).unwrap();
}

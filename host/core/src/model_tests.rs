//! Property tests: a model client talks to each state machine through random sequences of
//! snapshot changes and subscription changes, applying every response the way Envoy does
//! and ACKing it. After each step, once the server has nothing more to say, the client must
//! hold exactly what its subscription entitles it to (SOTW-5/7/8/9/10, DELTA-2/4/5/7).
//!
//! On a step marked late the client applies what comes but answers nothing until the next
//! step that is not: meanwhile a type with a response out gets no other (design 022), and
//! what changed is merged into the response after the answer, so the client still ends
//! holding exactly what it is entitled to.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use proptest::prelude::*;

use crate::delta::DeltaStream;
use crate::snapshot::Snapshot;
use crate::sotw::SotwStream;
use crate::stream::Scope;
use crate::testutil::{node, res};
use crate::types::{self, CLUSTER, ENDPOINT};

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const TYPES: [&str; 2] = [CLUSTER, ENDPOINT];

#[derive(Debug, Clone)]
enum Op {
    /// For each type, which names exist and with which content.
    Snapshot([BTreeMap<&'static str, u8>; 2]),
    Subscribe(usize, Vec<&'static str>),
    Unsubscribe(usize, Vec<&'static str>),
}

fn names() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "d", "*"]), 0..3)
}

fn op() -> impl Strategy<Value = Op> {
    let set = || prop::collection::btree_map(prop::sample::select(NAMES.to_vec()), 0u8..3, 0..4);
    prop_oneof![
        (set(), set()).prop_map(|(a, b)| Op::Snapshot([a, b])),
        (0..2usize, names()).prop_map(|(t, n)| Op::Subscribe(t, n)),
        (0..2usize, names()).prop_map(|(t, n)| Op::Unsubscribe(t, n)),
    ]
}

fn snapshot(sets: &[BTreeMap<&'static str, u8>; 2]) -> Snapshot {
    Snapshot::from_resources(TYPES.iter().zip(sets).flat_map(|(t, m)| m.iter().map(|(n, c)| res(t, n, &c.to_string()))))
        .unwrap()
}

/// What a client subscribed to `names` (with `wildcard`) must hold: name -> version.
fn entitled(snap: &Snapshot, type_url: &str, wildcard: bool, explicit: &BTreeSet<String>) -> BTreeMap<String, String> {
    let Some(set) = snap.get(type_url) else { return BTreeMap::new() };
    set.resources()
        .filter(|r| wildcard || explicit.contains(r.name().as_ref()))
        .map(|r| (r.name().to_string(), r.version().to_string()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn delta_client_converges_to_its_subscription(ops in prop::collection::vec((op(), any::<bool>()), 1..25)) {
        let mut s = DeltaStream::new(Scope::Aggregated);
        let mut snap = Snapshot::default();
        // Per type: wildcard, explicit names, what the client holds.
        let mut wildcard = [false; 2];
        let mut explicit: [BTreeSet<String>; 2] = Default::default();
        let mut held: [BTreeMap<String, String>; 2] = Default::default();
        let mut started = [false; 2];
        let mut unanswered: [Option<String>; 2] = Default::default();
        for (op, late) in ops.into_iter().map(|(op, late)| (Some(op), late)).chain([(None, false)]) {
            match op {
                None => {}
                Some(Op::Snapshot(sets)) => { snap = snapshot(&sets); s.snapshot_changed(SystemTime::now()); }
                Some(Op::Subscribe(t, names)) => {
                    let mut req = DeltaDiscoveryRequest { type_url: TYPES[t].into(), node: node(), ..Default::default() };
                    req.resource_names_subscribe = names.iter().map(|n| n.to_string()).collect();
                    if !started[t] && names.is_empty() && types::is_full_state(TYPES[t]) { wildcard[t] = true; }
                    started[t] = true;
                    for n in &names { if *n == "*" { wildcard[t] = true } else { explicit[t].insert(n.to_string()); } }
                    s.handle_request(&req, SystemTime::now()).unwrap();
                }
                Some(Op::Unsubscribe(t, names)) => {
                    if !started[t] { continue; }
                    let mut req = DeltaDiscoveryRequest { type_url: TYPES[t].into(), node: node(), ..Default::default() };
                    req.resource_names_unsubscribe = names.iter().map(|n| n.to_string()).collect();
                    for n in &names {
                        if *n == "*" {
                            wildcard[t] = false;
                            let keep = explicit[t].clone();
                            held[t].retain(|k, _| keep.contains(k));
                        } else {
                            explicit[t].remove(*n);
                            held[t].remove(*n); // the client drops what it unsubscribed
                        }
                    }
                    s.handle_request(&req, SystemTime::now()).unwrap();
                }
            }
            if !late {
                for (t, nonce) in unanswered.iter_mut().enumerate() {
                    let Some(nonce) = nonce.take() else { continue };
                    let ack = DeltaDiscoveryRequest { type_url: TYPES[t].into(), response_nonce: nonce, ..Default::default() };
                    s.handle_request(&ack, SystemTime::now()).unwrap();
                }
            }
            // Quiesce: apply and ACK until the server has nothing more to send.
            for _ in 0..10 {
                let out = s.poll(&snap);
                if out.is_empty() { break; }
                for r in out {
                    let t = TYPES.iter().position(|t| **t == *r.type_url).unwrap();
                    let names: Vec<_> = r.resources.iter().map(|x| x.name().to_string()).collect();
                    let uniq: BTreeSet<_> = names.iter().collect();
                    prop_assert_eq!(uniq.len(), names.len(), "a response names a resource twice");
                    prop_assert!(unanswered[t].is_none(), "a second response of a type before the first was answered");
                    for x in r.resources.iter() { held[t].insert(x.name().to_string(), x.version().to_string()); }
                    for n in r.removed.iter() { held[t].remove(n.as_ref()); }
                    if late {
                        unanswered[t] = Some(r.nonce.to_string());
                        continue;
                    }
                    let ack = DeltaDiscoveryRequest { type_url: r.type_url.to_string(), response_nonce: r.nonce.to_string(), ..Default::default() };
                    s.handle_request(&ack, SystemTime::now()).unwrap();
                }
            }
            if late {
                continue;
            }
            prop_assert!(s.poll(&snap).is_empty(), "the server keeps sending");
            for t in 0..2 {
                prop_assert_eq!(&held[t], &entitled(&snap, TYPES[t], wildcard[t], &explicit[t]), "type {}", TYPES[t]);
            }
        }
    }

    #[test]
    fn sotw_client_converges_to_its_subscription(ops in prop::collection::vec((op(), any::<bool>()), 1..25)) {
        let mut s = SotwStream::new(Scope::Aggregated);
        let mut snap = Snapshot::default();
        let mut subs: [Option<Vec<String>>; 2] = Default::default();
        let mut named_ever = [false; 2];
        let mut held: [BTreeMap<String, String>; 2] = Default::default();
        let mut last: [Option<(String, String)>; 2] = Default::default(); // (version, nonce)
        // The types with a response the client has not answered.
        let mut unanswered = [false; 2];
        for (op, late) in ops.into_iter().map(|(op, late)| (Some(op), late)).chain([(None, false)]) {
            match op {
                None => {}
                Some(Op::Snapshot(sets)) => { snap = snapshot(&sets); s.snapshot_changed(SystemTime::now()); }
                Some(Op::Subscribe(t, names) | Op::Unsubscribe(t, names)) => {
                    // SotW has no unsubscribe: every request states the whole subscription.
                    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
                    if names.iter().any(|n| n != "*") { named_ever[t] = true; }
                    let (version_info, response_nonce) = last[t].clone().unwrap_or_default();
                    let req = DiscoveryRequest {
                        type_url: TYPES[t].into(),
                        node: node(),
                        resource_names: names.clone(),
                        version_info,
                        response_nonce,
                        ..Default::default()
                    };
                    // The client forgets what it no longer asks for (Envoy drops it).
                    if !types::is_full_state(TYPES[t]) && !names.iter().any(|n| n == "*") {
                        held[t].retain(|k, _| names.contains(k));
                    }
                    subs[t] = Some(names);
                    // It carries the latest nonce: an answer to the response out (SOTW-3).
                    unanswered[t] = false;
                    s.handle_request(&req, SystemTime::now()).unwrap();
                }
            }
            if !late {
                for t in 0..2 {
                    let (Some((version_info, response_nonce)), true) = (last[t].clone(), std::mem::take(&mut unanswered[t])) else { continue };
                    let ack = DiscoveryRequest {
                        type_url: TYPES[t].into(),
                        resource_names: subs[t].clone().unwrap(),
                        version_info,
                        response_nonce,
                        ..Default::default()
                    };
                    s.handle_request(&ack, SystemTime::now()).unwrap();
                }
            }
            for _ in 0..10 {
                let out = s.poll(&snap);
                if out.is_empty() { break; }
                for r in out {
                    let t = TYPES.iter().position(|t| **t == *r.type_url).unwrap();
                    let got: BTreeMap<String, String> = r.resources.iter().map(|x| (x.name().to_string(), x.version().to_string())).collect();
                    prop_assert_eq!(got.len(), r.resources.len());
                    if types::is_full_state(TYPES[t]) {
                        held[t] = got; // SOTW-8: the full state
                    } else {
                        held[t].extend(got); // SOTW-9: merged
                    }
                    prop_assert!(!unanswered[t], "a second response of a type before the first was answered");
                    last[t] = Some((r.version.to_string(), r.nonce.to_string()));
                    if late {
                        unanswered[t] = true;
                        continue;
                    }
                    let ack = DiscoveryRequest {
                        type_url: TYPES[t].into(),
                        resource_names: subs[t].clone().unwrap(),
                        version_info: r.version.to_string(),
                        response_nonce: r.nonce.to_string(),
                        ..Default::default()
                    };
                    s.handle_request(&ack, SystemTime::now()).unwrap();
                }
            }
            if late {
                continue;
            }
            prop_assert!(s.poll(&snap).is_empty(), "the server keeps sending");
            for t in 0..2 {
                let Some(names) = &subs[t] else { continue };
                let star = names.iter().any(|n| n == "*") || (names.is_empty() && !named_ever[t] && types::is_full_state(TYPES[t]));
                let explicit: BTreeSet<String> = names.iter().filter(|n| *n != "*").cloned().collect();
                let want = entitled(&snap, TYPES[t], star, &explicit);
                if types::is_full_state(TYPES[t]) {
                    prop_assert_eq!(&held[t], &want, "full state of {}", TYPES[t]);
                } else {
                    // Subscribed resources that exist are current; others may linger (SOTW-9).
                    for (n, v) in &want { prop_assert_eq!(held[t].get(n), Some(v), "{} {}", TYPES[t], n); }
                }
            }
        }
    }
}

/// Arbitrary requests, well-formed or not, in any order: the machines never panic, every
/// response is well-formed (SOTW-2, SOTW-11, DELTA-1), and errors are only ever returned
/// for the protocol errors they name.
mod arbitrary {
    use super::*;
    use envoy_types::pb::google::rpc::Status;

    fn type_url() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            CLUSTER,
            ENDPOINT,
            types::LISTENER,
            types::ROUTE,
            "",
            "garbage",
            "type.googleapis.com/x.Y",
        ])
        .prop_map(str::to_owned)
    }
    fn name_list() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", "*", "", "zz"]).prop_map(str::to_owned), 0..4)
    }
    fn nonce() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", "1", "2", "3", "7", "junk"]).prop_map(str::to_owned)
    }

    fn snap() -> Snapshot {
        snapshot(&[[("a", 0u8), ("b", 1)].into_iter().collect(), [("a", 2u8)].into_iter().collect()])
    }

    proptest! {
        #[test]
        fn sotw_never_panics_and_responses_are_well_formed(
            reqs in prop::collection::vec((type_url(), name_list(), nonce(), any::<bool>(), any::<bool>(), any::<bool>()), 1..30)
        ) {
            let mut s = SotwStream::new(Scope::Aggregated);
            let snap = snap();
            let mut nonces = BTreeSet::new();
            for (i, (t, names, nonce, with_node, nack, change)) in reqs.into_iter().enumerate() {
                let req = DiscoveryRequest {
                    type_url: t, resource_names: names, response_nonce: nonce, version_info: "v".into(),
                    node: (with_node || i == 0).then(node).flatten(),
                    error_detail: nack.then(|| Status { code: 3, message: "x".into(), details: vec![] }),
                    ..Default::default()
                };
                if s.handle_request(&req, SystemTime::now()).is_err() { continue; }
                if change { s.snapshot_changed(SystemTime::now()); }
                for r in s.poll(&snap) {
                    prop_assert!(nonces.insert(r.nonce.to_string()), "nonce reused");
                    let mut seen = BTreeSet::new();
                    for x in r.resources.iter() {
                        prop_assert_eq!(x.type_url(), &r.type_url);
                        prop_assert!(seen.insert(x.name().clone()), "duplicate resource");
                    }
                }
            }
        }

        #[test]
        fn delta_never_panics_and_responses_are_well_formed(
            reqs in prop::collection::vec((type_url(), name_list(), name_list(), nonce(), any::<bool>(), any::<bool>()), 1..30)
        ) {
            let mut s = DeltaStream::new(Scope::Aggregated);
            let snap = snap();
            let mut nonces = BTreeSet::new();
            for (i, (t, sub, unsub, nonce, with_node, nack)) in reqs.into_iter().enumerate() {
                let req = DeltaDiscoveryRequest {
                    type_url: t, resource_names_subscribe: sub, resource_names_unsubscribe: unsub, response_nonce: nonce,
                    node: (with_node || i == 0).then(node).flatten(),
                    error_detail: nack.then(|| Status { code: 3, message: "x".into(), details: vec![] }),
                    initial_resource_versions: [("a".to_string(), "old".to_string())].into_iter().collect(),
                    ..Default::default()
                };
                if s.handle_request(&req, SystemTime::now()).is_err() { continue; }
                s.snapshot_changed(SystemTime::now());
                for r in s.poll(&snap) {
                    prop_assert!(nonces.insert(r.nonce.to_string()), "nonce reused");
                    let mut seen = BTreeSet::new();
                    for x in r.resources.iter() {
                        prop_assert_eq!(x.type_url(), &r.type_url);
                        prop_assert!(seen.insert(x.name().clone()), "duplicate resource");
                    }
                    for n in r.removed.iter() {
                        prop_assert!(!seen.contains(n), "a name both sent and removed");
                    }
                }
            }
        }
    }
}

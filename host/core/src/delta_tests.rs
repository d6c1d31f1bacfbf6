//! One test (or more) per Delta rule of ../shared/xds-protocol/README.md.

use std::time::SystemTime;

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use envoy_types::pb::google::rpc::Status;

use super::*;
use crate::testutil::*;
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

fn req(type_url: &str, sub: &[&str], unsub: &[&str]) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: type_url.into(),
        resource_names_subscribe: sub.iter().map(|s| s.to_string()).collect(),
        resource_names_unsubscribe: unsub.iter().map(|s| s.to_string()).collect(),
        node: node(),
        ..Default::default()
    }
}

fn ack(r: &DeltaResponse) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest { response_nonce: r.nonce.to_string(), ..req(&r.type_url, &[], &[]) }
}

fn names(r: &DeltaResponse) -> Vec<String> {
    r.resources.iter().map(|r| r.name().to_string()).collect()
}

fn removed(r: &DeltaResponse) -> Vec<String> {
    r.removed.iter().map(|r| r.to_string()).collect()
}

fn send(s: &mut DeltaStream, r: DeltaDiscoveryRequest, snapshot: &Snapshot) -> Vec<DeltaResponse> {
    s.handle_request(&r, SystemTime::now()).unwrap();
    s.poll(snapshot)
}

fn ads() -> DeltaStream {
    DeltaStream::new(Scope::Aggregated)
}

#[test]
fn delta_1_every_response_has_a_unique_nonce_and_acks_nacks_pair_by_it() {
    let mut s = ads();
    let a = send(&mut s, req(CLUSTER, &[], &[]), &base()).remove(0);
    let b = send(&mut s, req(ENDPOINT, &["c1"], &[]), &base()).remove(0);
    assert!(!a.nonce.is_empty() && a.nonce != b.nonce);
    let events = s.handle_request(&ack(&a), SystemTime::now()).unwrap();
    assert!(matches!(events[0], Event::Ack { .. }));
    let mut n = ack(&b);
    n.error_detail = Some(Status { code: 3, message: "no".into(), details: vec![] });
    let events = s.handle_request(&n, SystemTime::now()).unwrap();
    assert!(matches!(&events[0], Event::Nack { message, .. } if message == "no"));
    let eds = s.status().into_iter().find(|t| t.type_url == ENDPOINT).unwrap();
    assert_eq!(eds.last_nack.unwrap().message, "no");
}

#[test]
fn delta_2_subscribe_unsubscribe_star_and_legacy_wildcard() {
    let mut s = ads();
    assert_eq!(names(&send(&mut s, req(CLUSTER, &[], &[]), &base())[0]), ["c1", "c2"], "legacy wildcard");
    let mut s = ads();
    assert_eq!(names(&send(&mut s, req(ROUTE, &["*"], &[]), &base())[0]), ["r1", "r2"], "explicit *");
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &["c1"], &[]), &base());
    assert_eq!(names(&out[0]), ["c1"], "explicit name only");
    s.handle_request(&ack(&out[0]), SystemTime::now()).unwrap();
    let out = send(&mut s, req(CLUSTER, &["c2"], &["c1"]), &base());
    assert_eq!(names(&out[0]), ["c2"]);
    assert!(out[0].removed.is_empty(), "an unsubscribed name is not reported removed");
    // Only names: no legacy wildcard for RDS/EDS either.
    let mut s = ads();
    let out = send(&mut s, req(ENDPOINT, &[], &[]), &base());
    assert!(out.is_empty());
}

#[test]
fn delta_3_initial_resource_versions_are_not_resent() {
    let snapshot = base();
    let c1 = snapshot.resource(CLUSTER, "c1").unwrap().version().to_string();
    let mut r = req(CLUSTER, &[], &[]);
    r.initial_resource_versions =
        [("c1".to_string(), c1), ("c2".to_string(), "stale".to_string()), ("gone".to_string(), "x".to_string())]
            .into_iter()
            .collect();
    let mut s = ads();
    let out = send(&mut s, r, &snapshot);
    assert_eq!(names(&out[0]), ["c2"]);
    assert_eq!(removed(&out[0]), ["gone"]);

    // Everything current: nothing at all is sent, explicit names included.
    let mut r = req(ENDPOINT, &["c1"], &[]);
    r.initial_resource_versions =
        [("c1".to_string(), snapshot.resource(ENDPOINT, "c1").unwrap().version().to_string())].into_iter().collect();
    let mut s = ads();
    assert!(send(&mut s, r, &snapshot).is_empty());
    assert!(s.status()[0].version_acked.is_some(), "what the client holds counts as acknowledged");
}

#[test]
fn delta_4_only_changes_and_removals_are_sent() {
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &[], &[]), &base());
    send(&mut s, ack(&out[0]), &base());
    s.snapshot_changed(SystemTime::now());
    let next = snap(&[(CLUSTER, "c1", "1"), (CLUSTER, "c3", "1"), (ENDPOINT, "c1", "1")]);
    let out = s.poll(&next);
    assert_eq!(names(&out[0]), ["c3"]);
    assert_eq!(removed(&out[0]), ["c2"]);
    // A subscribed name that does not exist is answered in removed_resources, once.
    let out = send(&mut s, req(ENDPOINT, &["nope", "c1"], &[]), &next);
    assert_eq!(names(&out[0]), ["c1"]);
    assert_eq!(removed(&out[0]), ["nope"]);
    s.snapshot_changed(SystemTime::now());
    assert!(s.poll(&next).is_empty());
}

#[test]
fn delta_5_every_subscribed_name_is_answered_even_if_current() {
    let mut s = ads();
    let out = send(&mut s, req(ENDPOINT, &["c1"], &[]), &base());
    send(&mut s, ack(&out[0]), &base());
    let out = send(&mut s, req(ENDPOINT, &["c1"], &[]), &base());
    assert_eq!(names(&out[0]), ["c1"]);
    // Wildcard on and the name subscribed explicitly too: still answered.
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &["*"], &[]), &base());
    s.handle_request(&ack(&out[0]), SystemTime::now()).unwrap();
    let out = send(&mut s, req(CLUSTER, &["c1"], &[]), &base());
    assert_eq!(names(&out[0]), ["c1"]);
}

#[test]
fn delta_6_subscription_changes_are_honoured_with_a_stale_nonce() {
    let mut s = ads();
    let first = send(&mut s, req(ROUTE, &["r1"], &[]), &base()).remove(0);
    s.handle_request(&ack(&first), SystemTime::now()).unwrap();
    let second = send(&mut s, req(ROUTE, &["r2"], &[]), &base()).remove(0);
    let mut r = req(ROUTE, &["later"], &["r1"]);
    r.response_nonce = first.nonce.to_string();
    let events = s.handle_request(&r, SystemTime::now()).unwrap();
    assert!(matches!(events[0], Event::Stale { .. }));
    assert!(s.poll(&base()).is_empty(), "the second response awaits its answer (design 022)");
    let out = send(&mut s, ack(&second), &base());
    assert_eq!(removed(&out[0]), ["later"], "the stale request's new name was answered");
    s.handle_request(&ack(&out[0]), SystemTime::now()).unwrap();
    s.snapshot_changed(SystemTime::now());
    let out = s.poll(&snap(&[(ROUTE, "r1", "2"), (ROUTE, "r2", "1"), (ROUTE, "later", "1")]));
    assert_eq!(names(&out[0]), ["later"], "r1 was unsubscribed by the stale request");
}

#[test]
fn delta_7_unsubscribe_unknown_is_harmless_and_needs_no_response() {
    let mut s = ads();
    let out = send(&mut s, req(ROUTE, &["r1", "r2"], &[]), &base());
    send(&mut s, ack(&out[0]), &base());
    assert!(send(&mut s, req(ROUTE, &[], &["nobody"]), &base()).is_empty());
    assert!(send(&mut s, req(ROUTE, &[], &["r1"]), &base()).is_empty());
}

#[test]
fn delta_7_unsubscribing_a_name_the_wildcard_still_covers_resends_it() {
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &["*", "c1"], &[]), &base());
    send(&mut s, ack(&out[0]), &base());
    let out = send(&mut s, req(CLUSTER, &[], &["c1"]), &base());
    assert_eq!(names(&out[0]), ["c1"]);
}

#[test]
fn delta_8_each_resource_has_its_own_version() {
    let snapshot = base();
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &[], &[]), &snapshot);
    for r in out[0].resources.iter() {
        assert_eq!(r.version(), snapshot.resource(CLUSTER, r.name()).unwrap().version());
    }
    assert_eq!(out[0].system_version, snapshot.get(CLUSTER).unwrap().version().clone());
}

#[test]
fn nack_is_not_answered_by_resending_the_same_bytes() {
    let mut s = ads();
    let out = send(&mut s, req(LISTENER, &[], &[]), &base());
    send(&mut s, ack(&out[0]), &base());
    s.snapshot_changed(SystemTime::now());
    let bad = snap(&[(LISTENER, "l1", "bad")]);
    let pushed = s.poll(&bad);
    let mut n = ack(&pushed[0]);
    n.error_detail = Some(Status { code: 3, message: "rejected".into(), details: vec![] });
    assert!(send(&mut s, n, &bad).is_empty());
    s.snapshot_changed(SystemTime::now());
    assert!(s.poll(&bad).is_empty());
}

#[test]
fn first_wildcard_request_is_answered_even_when_empty() {
    let mut s = ads();
    let out = send(&mut s, req(LISTENER, &[], &[]), &Snapshot::default());
    assert_eq!(out.len(), 1);
    assert!(out[0].resources.is_empty() && out[0].removed.is_empty());
}

#[test]
fn missing_node_and_wrong_type() {
    let mut s = DeltaStream::new(Scope::Single(ENDPOINT));
    let mut r = req(ENDPOINT, &["c1"], &[]);
    r.node = None;
    assert_eq!(s.handle_request(&r, SystemTime::now()), Err(ProtocolError::MissingNode));
    assert!(matches!(
        s.handle_request(&req(CLUSTER, &[], &[]), SystemTime::now()),
        Err(ProtocolError::WrongType { .. })
    ));
}

/// After a NACK the client holds what it held before: a later change that still carries the
/// rejected resource sends it again, with the change, and an unrelated one is not lost.
#[test]
fn after_a_nack_a_change_resends_what_the_client_did_not_apply() {
    let mut s = ads();
    let out = send(&mut s, req(ENDPOINT, &["c1", "c2"], &[]), &base());
    send(&mut s, ack(&out[0]), &base());
    s.snapshot_changed(SystemTime::now());
    let next = snap(&[(ENDPOINT, "c1", "2"), (ENDPOINT, "c2", "2")]);
    let pushed = s.poll(&next);
    assert_eq!(names(&pushed[0]), ["c1", "c2"]);
    let mut n = ack(&pushed[0]);
    n.error_detail = Some(Status { code: 3, message: "rejected".into(), details: vec![] });
    assert!(send(&mut s, n, &next).is_empty(), "the same diff is not sent again");
    // c2 changes again; c1 is still at the version the client rejected, and the client does
    // not have it: both go out.
    s.snapshot_changed(SystemTime::now());
    let fixed = snap(&[(ENDPOINT, "c1", "2"), (ENDPOINT, "c2", "3")]);
    assert_eq!(names(&s.poll(&fixed)[0]), ["c1", "c2"]);
}

/// A held type is not answered, and is once it is no longer held.
#[test]
fn held_types_wait_and_resync_sends_everything_again() {
    let mut s = ads();
    s.handle_request(&req(LISTENER, &[], &[]), SystemTime::now()).unwrap();
    assert!(s.poll_held(&base(), &[LISTENER]).is_empty());
    let out = s.poll_held(&base(), &[]);
    assert_eq!(names(&out[0]), ["l1"]);
    send(&mut s, ack(&out[0]), &base());
    s.resync();
    assert_eq!(names(&s.poll(&base())[0]), ["l1"]);
}

/// ORDER-2 on one stream, as for SotW: clusters, endpoints, routes, then listeners.
#[test]
fn order_2_responses_due_together_go_out_dependencies_first() {
    let mut s = ads();
    for (t, names) in [(LISTENER, &["*"][..]), (ROUTE, &["r1"][..]), (ENDPOINT, &["c1"][..]), (CLUSTER, &["*"][..])] {
        s.handle_request(&req(t, names, &[]), SystemTime::now()).unwrap();
    }
    let out = s.poll(&base());
    let order: Vec<&str> = out.iter().map(|r| r.type_url.as_ref()).collect();
    assert_eq!(order, [CLUSTER, ENDPOINT, ROUTE, LISTENER]);
}

/// What every stream keeps per type it uses stays small: 100,000 streams with four types each
/// hold 400,000 of these (272 bytes when row 7 was measured at 9.3 KB per idle stream).
#[test]
fn a_stream_s_state_per_type_stays_small() {
    assert!(std::mem::size_of::<TypeState>() <= 216, "{} bytes", std::mem::size_of::<TypeState>());
}

/// The walk over the names that changed since the set a client is in step with (`since`,
/// the usual path: one EndpointSlice churned costs the names it touched) works out the same
/// response as the walk over every name in scope, and leaves what the client holds the same:
/// 3,000 random pairs of sets, with a wildcard or names or both, names subscribed that do not
/// exist, and names deleted.
#[test]
fn the_walk_over_what_changed_equals_the_walk_over_everything() {
    use crate::known::{InScope, Known};
    let mut next = crate::testutil::random(0x2b99_2ddf_a232_49d6);
    let random_set = |next: &mut dyn FnMut(u64) -> u64| {
        let mut versions: Vec<(String, String)> = Vec::new();
        for i in 0..40 {
            if next(3) != 0 {
                versions.push((format!("n{i:02}"), next(3).to_string()));
            }
        }
        // A set of no names is no set: keep one beyond the names looked at.
        versions.push(("n99".into(), "1".into()));
        let snap = Snapshot::from_resources(versions.iter().map(|(n, v)| res(CLUSTER, n, v))).unwrap();
        snap.get(CLUSTER).unwrap().clone()
    };
    for step in 0..3_000 {
        let explicit: crate::small_map::SmallSet<Arc<str>> =
            (0..45).filter(|_| next(4) == 0).map(|i| Arc::from(format!("n{i:02}"))).collect();
        let wildcard = next(3) != 0 || explicit.is_empty();
        let scope = InScope { wildcard, explicit: &explicit };
        let was = random_set(&mut next);
        let now = random_set(&mut next);
        // In step with `was`, as the machine leaves a client after a response.
        let mut known = Known::default();
        walk_all(&mut known, scope, Some(&was));
        known.rebase(Some(&was));

        let mut everything = known.clone();
        let all = walk_all(&mut everything, scope, Some(&now));
        everything.rebase(Some(&now));

        let changes = was.changed_entries(&now);
        let mut changed = known.clone();
        let fast = walk_changes(&changed, scope, &changes);
        let sorted = |v: &mut Vec<String>| {
            v.sort();
            v.clone()
        };
        let names =
            |w: &Walked| sorted(&mut w.resources.iter().map(|r| format!("{}@{}", r.name(), r.version())).collect());
        assert_eq!(names(&fast), names(&all), "step {step}: resources");
        let removed = |w: &Walked| sorted(&mut w.removed.iter().map(|n| n.to_string()).collect());
        assert_eq!(removed(&fast), removed(&all), "step {step}: removed");
        let prior = |w: &Walked| {
            let mut p: Vec<String> = w.prior.iter().map(|(n, b)| format!("{n}={b:?}")).collect();
            p.sort();
            p
        };
        assert_eq!(prior(&fast), prior(&all), "step {step}: what the client held before");
        changed.advance(Some(&now), fast.now.into_iter(), fast.sums);
        for i in 0..50 {
            let n = format!("n{i:02}");
            assert_eq!(changed.get(&n, scope), everything.get(&n, scope), "step {step}: what the client holds of {n}");
        }
        assert_eq!(changed.sum(), everything.sum(), "step {step}: sum");
    }
}

/// gRFC A88: a name subscribed to that does not exist is answered in `removed` (DELTA-4) and,
/// with the group's target given, with why in `resource_errors`; a name the plan only holds
/// back is neither.
#[test]
fn a88_a_name_that_does_not_exist_is_removed_with_why() {
    let target = snap(&[(CLUSTER, "c1", "1"), (CLUSTER, "held", "1")]);
    let offer = snap(&[(CLUSTER, "c1", "1")]);
    let mut s = ads();
    s.handle_request(&req(CLUSTER, &["c1", "held", "nope"], &[]), SystemTime::now()).unwrap();
    let r = s.poll_with(&offer, &[], Some(&target)).remove(0);
    assert_eq!(names(&r), ["c1"]);
    assert!(removed(&r).contains(&"nope".to_string()));
    let errors: Vec<&str> = r.errors.iter().map(|e| e.name.as_ref()).collect();
    assert_eq!(errors, ["nope"]);
}

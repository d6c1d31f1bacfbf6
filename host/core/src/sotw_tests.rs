//! One test (or more) per SotW rule of ../shared/xds-protocol/README.md.

use std::time::SystemTime;

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::google::rpc::Status;

use super::*;
use crate::testutil::*;
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

fn req(type_url: &str, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.into(),
        resource_names: names.iter().map(|s| s.to_string()).collect(),
        node: node(),
        ..Default::default()
    }
}

fn ack(r: &SotwResponse, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: r.version.to_string(),
        response_nonce: r.nonce.to_string(),
        ..req(&r.type_url, names)
    }
}

fn nack(r: &SotwResponse, names: &[&str], kept: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: kept.into(),
        error_detail: Some(Status { code: 3, message: "bad listener".into(), details: vec![] }),
        ..ack(r, names)
    }
}

fn names(r: &SotwResponse) -> Vec<String> {
    r.resources.iter().map(|r| r.name().to_string()).collect()
}

fn send(s: &mut SotwStream, r: DiscoveryRequest, snapshot: &Snapshot) -> Vec<SotwResponse> {
    s.handle_request(&r, SystemTime::now()).unwrap();
    s.poll(snapshot)
}

fn ads() -> SotwStream {
    SotwStream::new(Scope::Aggregated)
}

#[test]
fn sotw_1_first_request_must_carry_node_later_ones_need_not() {
    let mut s = ads();
    let mut r = req(CLUSTER, &[]);
    r.node = None;
    assert_eq!(s.handle_request(&r, SystemTime::now()), Err(ProtocolError::MissingNode));
    let out = send(&mut s, req(CLUSTER, &[]), &base());
    assert_eq!(s.node().unwrap().id, "n1");
    let mut a = ack(&out[0], &[]);
    a.node = None;
    assert!(s.handle_request(&a, SystemTime::now()).is_ok());
}

#[test]
fn sotw_2_responses_carry_version_type_and_unique_nonces_versions_per_type() {
    let mut s = ads();
    let snapshot = base();
    let c = send(&mut s, req(CLUSTER, &[]), &snapshot).remove(0);
    let l = send(&mut s, req(LISTENER, &[]), &snapshot).remove(0);
    assert_eq!(&*c.type_url, CLUSTER);
    assert_eq!(c.version, snapshot.get(CLUSTER).unwrap().version().clone());
    assert_eq!(l.version, snapshot.get(LISTENER).unwrap().version().clone());
    assert_ne!(c.version, l.version);
    assert_ne!(c.nonce, l.nonce);
    assert_eq!(names(&c), ["c1", "c2"]);
}

#[test]
fn sotw_3_ack_and_nack_are_told_apart_by_error_detail() {
    let mut s = ads();
    let out = send(&mut s, req(LISTENER, &[]), &base());
    let events = s.handle_request(&ack(&out[0], &[]), SystemTime::now()).unwrap();
    assert!(matches!(&events[0], Event::Ack { version, .. } if *version == *out[0].version));

    let next = snap(&[(LISTENER, "l1", "2")]);
    s.snapshot_changed(SystemTime::now());
    let out2 = s.poll(&next);
    let events = s.handle_request(&nack(&out2[0], &[], &out[0].version), SystemTime::now()).unwrap();
    assert!(matches!(&events[0], Event::Nack { message, .. } if message == "bad listener"));
    let st = &s.status()[0];
    assert_eq!(st.version_acked.as_deref(), Some(&*out[0].version), "a NACK keeps the accepted version");
    assert_eq!(st.last_nack.as_ref().unwrap().nonce, *out2[0].nonce);
}

#[test]
fn sotw_3_5_nack_is_not_answered_by_resending_the_same_bytes() {
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &[]), &base());
    send(&mut s, ack(&out[0], &[]), &base());
    let bad = snap(&[(CLUSTER, "c1", "bad")]);
    s.snapshot_changed(SystemTime::now());
    let pushed = s.poll(&bad);
    assert_eq!(pushed.len(), 1);
    assert!(send(&mut s, nack(&pushed[0], &[], &out[0].version), &bad).is_empty());
    // Something else changes: the client gets the new state.
    s.snapshot_changed(SystemTime::now());
    let fixed = snap(&[(CLUSTER, "c1", "good")]);
    assert_eq!(s.poll(&fixed).len(), 1);
}

#[test]
fn sotw_4_stale_nonce_is_ignored() {
    let mut s = ads();
    let first = send(&mut s, req(ROUTE, &["r1"]), &base()).remove(0);
    let second = send(&mut s, ack(&first, &["r1", "r2"]), &base()).remove(0);
    // SOTW-9: r1, which the client holds as it is, is left out; its version covers both.
    assert_eq!(names(&second), ["r2"]);
    assert_ne!(second.version, first.version);
    // A request still carrying the first nonce asks to drop r2: it is stale.
    let events = s.handle_request(&ack(&first, &["r1"]), SystemTime::now()).unwrap();
    assert!(matches!(events[0], Event::Stale { .. }));
    assert!(s.poll(&base()).is_empty());
    assert_eq!(s.status()[0].subscribed_names, 2);
}

#[test]
fn sotw_5_unchanged_state_is_not_resent() {
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &[]), &base());
    assert!(send(&mut s, ack(&out[0], &[]), &base()).is_empty());
    s.snapshot_changed(SystemTime::now());
    assert!(s.poll(&base()).is_empty(), "same snapshot again");
    // A change elsewhere (a listener) does not resend clusters.
    let mut items = vec![(LISTENER, "l1", "changed")];
    items.extend([(CLUSTER, "c1", "1"), (CLUSTER, "c2", "1")]);
    s.snapshot_changed(SystemTime::now());
    assert!(s.poll(&snap(&items)).is_empty());
}

#[test]
fn sotw_6_newer_request_supersedes_queued_ones() {
    let mut s = ads();
    s.handle_request(&req(ROUTE, &["r1"]), SystemTime::now()).unwrap();
    s.handle_request(&req(ROUTE, &["r2"]), SystemTime::now()).unwrap();
    let out = s.poll(&base());
    assert_eq!(out.len(), 1);
    assert_eq!(names(&out[0]), ["r2"]);
}

#[test]
fn sotw_7_wildcard_forms() {
    // Legacy: a stream that never named a cluster gets all of them.
    let mut s = ads();
    assert_eq!(names(&send(&mut s, req(CLUSTER, &[]), &base())[0]), ["c1", "c2"]);
    // "*" plus a name: wildcard plus that name.
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &["*", "c1"]), &base());
    assert_eq!(names(&out[0]), ["c1", "c2"]);
    // After an explicit name, an empty list means nothing.
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &["c1"]), &base());
    assert_eq!(names(&out[0]), ["c1"]);
    let out = send(&mut s, ack(&out[0], &[]), &base());
    assert_eq!(out.len(), 1);
    assert!(out[0].resources.is_empty());
    // RDS and EDS have no legacy wildcard.
    let mut s = ads();
    assert!(send(&mut s, req(ENDPOINT, &[]), &base()).is_empty());
}

#[test]
fn sotw_8_lds_and_cds_carry_full_state_including_deletions() {
    let mut s = ads();
    let out = send(&mut s, req(CLUSTER, &[]), &base());
    send(&mut s, ack(&out[0], &[]), &base());
    s.snapshot_changed(SystemTime::now());
    let out = s.poll(&snap(&[(CLUSTER, "c2", "1")]));
    assert_eq!(names(&out[0]), ["c2"]);
    s.handle_request(&ack(&out[0], &[]), SystemTime::now()).unwrap();
    s.snapshot_changed(SystemTime::now());
    let out = s.poll(&Snapshot::default());
    assert_eq!(out.len(), 1, "an empty response deletes every cluster");
    assert!(out[0].resources.is_empty());
    // A full-state type asked for by a name that does not exist is answered (empty).
    let mut s = ads();
    let out = send(&mut s, req(LISTENER, &["missing"]), &base());
    assert_eq!(out.len(), 1);
    assert!(out[0].resources.is_empty());
}

#[test]
fn sotw_9_rds_eds_send_requested_and_newly_requested_even_if_unchanged() {
    let mut s = ads();
    let out = send(&mut s, req(ENDPOINT, &["c1"]), &base());
    assert_eq!(names(&out[0]), ["c1"]);
    // A change to a resource nobody asked for sends nothing.
    s.snapshot_changed(SystemTime::now());
    let mut other = base();
    other = Snapshot::from_resources(
        other
            .types()
            .flat_map(|(_, set)| set.resources().map(|r| (**r).clone()).collect::<Vec<_>>())
            .filter(|r| !(r.type_url().as_ref() == ENDPOINT && r.name().as_ref() == "c2"))
            .chain([res(ENDPOINT, "c2", "2")]),
    )
    .unwrap();
    assert!(s.poll(&other).is_empty());
    // Unsubscribe, then subscribe again: the unchanged c1 must be sent again.
    let out2 = send(&mut s, ack(&out[0], &["c2"]), &base());
    assert_eq!(names(&out2[0]), ["c2"]);
    let out3 = send(&mut s, ack(&out2[0], &["c1", "c2"]), &base());
    assert_eq!(names(&out3[0]), ["c1"], "c2 is held as it is: only the newly requested c1 goes");
    send(&mut s, ack(&out3[0], &["c1", "c2"]), &base());
    // A NACK: the next response carries everything subscribed again.
    s.snapshot_changed(SystemTime::now());
    let changed = Snapshot::from_resources([res(ENDPOINT, "c1", "9"), res(ENDPOINT, "c2", "1")]).unwrap();
    let pushed = s.poll(&changed);
    assert_eq!(names(&pushed[0]), ["c1"]);
    assert!(send(&mut s, nack(&pushed[0], &["c1", "c2"], &out3[0].version), &changed).is_empty());
    s.snapshot_changed(SystemTime::now());
    let fixed = Snapshot::from_resources([res(ENDPOINT, "c1", "10"), res(ENDPOINT, "c2", "1")]).unwrap();
    assert_eq!(names(&s.poll(&fixed)[0]), ["c1", "c2"]);
}

#[test]
fn sotw_10_names_that_do_not_exist_yet_are_sent_when_they_appear_without_blocking_others() {
    let mut s = ads();
    let out = send(&mut s, req(ROUTE, &["r1", "later"]), &base());
    assert_eq!(names(&out[0]), ["r1"], "r1 is not held back for `later`");
    send(&mut s, ack(&out[0], &["r1", "later"]), &base());
    s.snapshot_changed(SystemTime::now());
    let with_later = snap(&[(ROUTE, "r1", "1"), (ROUTE, "later", "1")]);
    let out = s.poll(&with_later);
    assert_eq!(names(&out[0]), ["later"], "r1, held as it is, is left out (SOTW-9)");
}

#[test]
fn sotw_11_no_duplicates_and_types_match() {
    let mut s = ads();
    let out = send(&mut s, req(ROUTE, &["r1", "r1", "r2"]), &base());
    assert_eq!(names(&out[0]), ["r1", "r2"]);
    assert!(out[0].resources.iter().all(|r| r.type_url().as_ref() == ROUTE));
    // Per-type streams refuse other types.
    let mut s = SotwStream::new(Scope::Single(CLUSTER));
    let e = s.handle_request(&req(LISTENER, &[]), SystemTime::now()).unwrap_err();
    assert!(matches!(e, ProtocolError::WrongType { .. }));
}

#[test]
fn sotw_12_reconnect_with_current_version_skips_wildcard_resend_only() {
    let snapshot = base();
    let mut s = ads();
    let mut r = req(CLUSTER, &[]);
    r.version_info = snapshot.get(CLUSTER).unwrap().version().to_string();
    assert!(send(&mut s, r, &snapshot).is_empty(), "wildcard CDS already current");
    assert_eq!(s.status()[0].version_acked.as_deref(), Some(&**snapshot.get(CLUSTER).unwrap().version()));
    // A later change is still pushed.
    s.snapshot_changed(SystemTime::now());
    assert_eq!(s.poll(&snap(&[(CLUSTER, "c1", "1")])).len(), 1);
    // An old version gets the current state.
    let mut s = ads();
    let mut r = req(CLUSTER, &[]);
    r.version_info = "old".into();
    assert_eq!(send(&mut s, r, &snapshot).len(), 1);
    // RDS always answers the names of a new stream.
    let mut s = ads();
    let mut r = req(ROUTE, &["r1"]);
    r.version_info = "whatever".into();
    assert_eq!(send(&mut s, r, &snapshot).len(), 1);
}

#[test]
fn per_type_stream_accepts_empty_type_url_and_limits_types() {
    let mut s = SotwStream::new(Scope::Single(CLUSTER));
    let out = send(&mut s, req("", &[]), &base());
    assert_eq!(&*out[0].type_url, CLUSTER);
    let mut s = ads();
    for i in 0..MAX_TYPES_PER_STREAM {
        s.handle_request(&req(&format!("type.googleapis.com/t{i}"), &["x"]), SystemTime::now()).unwrap();
    }
    assert_eq!(
        s.handle_request(&req("type.googleapis.com/one.more", &["x"]), SystemTime::now()),
        Err(ProtocolError::TooManyTypes)
    );
    assert_eq!(s.handle_request(&req("", &["x"]), SystemTime::now()), Err(ProtocolError::MissingTypeUrl));
}

#[test]
fn unknown_type_url_is_remembered_and_served_when_present() {
    let mut s = ads();
    let secret = crate::types::SECRET;
    assert!(send(&mut s, req(secret, &["cert"]), &base()).is_empty());
    s.snapshot_changed(SystemTime::now());
    let out = s.poll(&snap(&[(secret, "cert", "pem")]));
    assert_eq!(names(&out[0]), ["cert"]);
}

/// A held type is not answered (make-before-break), and is once it is no longer held.
#[test]
fn held_types_wait_for_their_step() {
    let mut s = ads();
    s.handle_request(&req(LISTENER, &[]), SystemTime::now()).unwrap();
    assert!(s.poll_held(&base(), &[LISTENER, ROUTE]).is_empty());
    let out = s.poll_held(&base(), &[ROUTE]);
    assert_eq!(names(&out[0]), ["l1"]);
}

/// SOTW-5 for endpoints and routes: a rejected list is not sent again, but the client holds
/// none of it, so a change that leaves part of it as it was sends that part again.
#[test]
fn after_a_nack_a_change_resends_what_the_client_did_not_apply() {
    let mut s = ads();
    let out = send(&mut s, req(ENDPOINT, &["c1", "c2"]), &base());
    send(&mut s, ack(&out[0], &["c1", "c2"]), &base());
    s.snapshot_changed(SystemTime::now());
    let next = snap(&[(ENDPOINT, "c1", "2"), (ENDPOINT, "c2", "2")]);
    let pushed = s.poll(&next);
    assert!(
        send(&mut s, nack(&pushed[0], &["c1", "c2"], &out[0].version), &next).is_empty(),
        "not the same list again"
    );
    s.snapshot_changed(SystemTime::now());
    let fixed = snap(&[(ENDPOINT, "c1", "2"), (ENDPOINT, "c2", "3")]);
    let sent = s.poll(&fixed);
    assert_eq!(names(&sent[0]), ["c1", "c2"], "c1 is sent again with the fix");
    send(&mut s, ack(&sent[0], &["c1", "c2"]), &fixed);
    // And resync sends everything subscribed, even unchanged.
    s.resync();
    assert_eq!(names(&s.poll(&fixed)[0]), ["c1", "c2"]);
}

/// Envoy, replacing an EDS cluster in place, acknowledges the same endpoints response again
/// to ask for it: the new cluster warms (and the CDS ACK waits) until it comes. It is sent
/// again, unchanged; a first ACK is not answered.
#[test]
fn an_endpoints_response_acknowledged_twice_is_sent_again() {
    let mut s = ads();
    let out = send(&mut s, req(ENDPOINT, &["c1"]), &base());
    assert!(send(&mut s, ack(&out[0], &["c1"]), &base()).is_empty(), "a first ACK needs no answer");
    let again = send(&mut s, ack(&out[0], &["c1"]), &base());
    assert_eq!(names(&again[0]), ["c1"]);
    assert_eq!(again[0].version, out[0].version);
    assert!(send(&mut s, ack(&again[0], &["c1"]), &base()).is_empty(), "and its ACK ends it");
}

/// ORDER-2 on one stream: when several types are due at once, what others name is written
/// first (clusters, endpoints, routes, then listeners), so a route configuration sent with a
/// listener is in place when the listener activates (the planner relies on it).
#[test]
fn order_2_responses_due_together_go_out_dependencies_first() {
    let mut s = ads();
    for (t, names) in [(LISTENER, &[][..]), (ROUTE, &["r1"][..]), (ENDPOINT, &["c1"][..]), (CLUSTER, &[][..])] {
        s.handle_request(&req(t, names), SystemTime::now()).unwrap();
    }
    let out = s.poll(&base());
    let order: Vec<&str> = out.iter().map(|r| r.type_url.as_ref()).collect();
    assert_eq!(order, [CLUSTER, ENDPOINT, ROUTE, LISTENER]);
}

/// gRFC A88 (`resource_errors`): a name asked for that the node's group is not served is said
/// not to exist, once, with the response of its type; a name the plan only holds back (in the
/// target, not yet offered) is on its way and is not; when the name appears, it is sent and
/// the error goes. A name of a type with no other change still gets its answer (RDS), and a
/// wildcard subscription is told nothing.
#[test]
fn a88_names_that_do_not_exist_are_said_not_to_exist() {
    let target = snap(&[(CLUSTER, "c1", "1"), (CLUSTER, "held", "1"), (ROUTE, "r1", "1")]);
    let offer = snap(&[(CLUSTER, "c1", "1"), (ROUTE, "r1", "1")]);
    let mut s = ads();
    s.handle_request(&req(CLUSTER, &["c1", "held", "nope"]), SystemTime::now()).unwrap();
    let out = s.poll_with(&offer, &[], Some(&target));
    assert_eq!(names(&out[0]), ["c1"]);
    let errors: Vec<&str> = out[0].errors.iter().map(|e| e.name.as_ref()).collect();
    assert_eq!(errors, ["nope"], "held back is not absent");
    assert!(out[0].errors[0].message.contains("\"nope\""));
    s.handle_request(&ack(&out[0], &["c1", "held", "nope"]), SystemTime::now()).unwrap();
    assert!(s.poll_with(&offer, &[], Some(&target)).is_empty(), "said once");

    // RDS: a name that does not exist, and nothing else new: an answer of the error alone.
    s.handle_request(&req(ROUTE, &["r1"]), SystemTime::now()).unwrap();
    let r = s.poll_with(&offer, &[], Some(&target)).remove(0);
    assert!(r.errors.is_empty());
    s.handle_request(&ack(&r, &["r1"]), SystemTime::now()).unwrap();
    s.handle_request(&req(ROUTE, &["r1", "r9"]), SystemTime::now()).unwrap();
    let r = s.poll_with(&offer, &[], Some(&target)).remove(0);
    assert_eq!(r.errors.iter().map(|e| e.name.as_ref()).collect::<Vec<_>>(), ["r9"]);
    s.handle_request(&ack(&r, &["r1", "r9"]), SystemTime::now()).unwrap();
    // r1 goes away too, and nothing else changes: the answer is the errors alone.
    let less = snap(&[(CLUSTER, "c1", "1")]);
    s.snapshot_changed(SystemTime::now());
    let out = s.poll_with(&less, &[], Some(&less));
    let rds = out.iter().find(|r| r.type_url.as_ref() == ROUTE).unwrap();
    assert!(rds.resources.is_empty());
    assert_eq!(rds.errors.iter().map(|e| e.name.as_ref()).collect::<Vec<_>>(), ["r1", "r9"]);
    for r in &out {
        let names: &[&str] = if r.type_url.as_ref() == ROUTE { &["r1", "r9"] } else { &["c1", "held", "nope"] };
        s.handle_request(&ack(r, names), SystemTime::now()).unwrap();
    }

    // It appears: sent, and no error any more.
    let both = snap(&[
        (CLUSTER, "c1", "1"),
        (CLUSTER, "held", "1"),
        (CLUSTER, "nope", "1"),
        (ROUTE, "r1", "1"),
        (ROUTE, "r9", "1"),
    ]);
    s.snapshot_changed(SystemTime::now());
    let out = s.poll_with(&both, &[], Some(&both));
    let cds = out.iter().find(|r| r.type_url.as_ref() == CLUSTER).unwrap();
    assert_eq!(names(cds), ["c1", "held", "nope"]);
    assert!(cds.errors.is_empty());

    // Wildcard: nothing to say.
    let mut w = ads();
    w.handle_request(&req(CLUSTER, &[]), SystemTime::now()).unwrap();
    assert!(w.poll_with(&offer, &[], Some(&target))[0].errors.is_empty());
}

/// A hostile client that subscribes to 100,000 names that do not exist is told of
/// `MAX_ERRORS_PER_RESPONSE` of them, not sent a message for each.
#[test]
fn a88_a_client_asking_for_many_missing_names_is_told_of_a_bounded_few() {
    let names: Vec<String> = (0..100_000).map(|i| format!("nope-{i}")).collect();
    let asked: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut s = ads();
    s.handle_request(&req(ROUTE, &asked), SystemTime::now()).unwrap();
    let target = base();
    let out = s.poll_with(&target, &[], Some(&target));
    assert_eq!(out[0].errors.len(), stream::MAX_ERRORS_PER_RESPONSE);
}

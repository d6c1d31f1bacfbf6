//! A node's rollout (ORDER-1, ORDER-2): every step driven by a simulated SotW ADS client, and
//! each interruption: a new target midway, a NACK at each step, silence, by-name clients.

use std::collections::BTreeMap;

use super::*;
use crate::plan::tests::{cla, cluster, listener, names, route, snap};
use crate::types::{CLUSTER, ENDPOINT};

const ALL: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];
const GRACE: Duration = Duration::from_secs(5);

/// One SotW ADS stream of a node: what it has been sent per type, and the nonce of each
/// response it has not answered.
struct Client {
    r: Rollout,
    now: Instant,
    nonce: u64,
    sent: BTreeMap<&'static str, Arc<str>>,
    unanswered: BTreeMap<&'static str, Arc<str>>,
    notes: Vec<Note>,
}

fn ty(t: &str) -> Arc<str> {
    Arc::from(t)
}

impl Client {
    fn new(config: RolloutConfig, target: Snapshot) -> Self {
        let now = Instant::now();
        let mut c = Client { r: Rollout::new(config, Arc::new(target), now), now, nonce: 0, sent: BTreeMap::new(), unanswered: BTreeMap::new(), notes: Vec::new() };
        for t in ALL {
            // Envoy: LDS and CDS are wildcards, RDS and EDS by name (not a by-name client).
            let wildcard = types::is_full_state(t);
            let n = c.r.subscribe(0, &ty(t), wildcard, now);
            c.notes.extend(n);
        }
        c
    }

    /// Converged from `before` (the node holds it and is not moving).
    fn holding(before: Snapshot) -> Self {
        let mut c = Client::new(RolloutConfig { grace: GRACE, unordered: false }, before);
        c.settle();
        assert_eq!(c.r.step(), Step::Converged);
        c.notes.clear();
        c
    }

    /// Sends what the offer has for every type not held and not already sent.
    fn push(&mut self) -> Vec<&'static str> {
        let offer = self.r.offer().clone();
        let mut out = Vec::new();
        for t in ALL {
            if offer.hold.contains(&t) {
                continue;
            }
            let set = offer.snapshot.get(t).cloned().unwrap_or_default();
            if self.sent.get(t) == Some(set.version()) {
                continue;
            }
            self.nonce += 1;
            let nonce: Arc<str> = self.nonce.to_string().into();
            self.sent.insert(t, set.version().clone());
            self.r.sent(0, &ty(t), nonce.clone(), Update::Replace(set));
            self.unanswered.insert(t, nonce);
            out.push(t);
        }
        out
    }

    fn answer(&mut self, t: &'static str, nack: Option<&str>) {
        let nonce = self.unanswered.remove(t).unwrap_or_else(|| panic!("nothing sent for {t}"));
        self.now += Duration::from_millis(1);
        let n = self.r.answered(0, &ty(t), &nonce, nack, self.now);
        self.notes.extend(n);
    }

    fn ack(&mut self, t: &'static str) {
        self.answer(t, None);
    }

    /// ACKs what is unanswered, then pushes and ACKs until nothing more is sent.
    fn settle(&mut self) {
        let unanswered: Vec<&'static str> = self.unanswered.keys().copied().collect();
        for t in unanswered {
            self.ack(t);
        }
        for _ in 0..8 {
            let sent = self.push();
            if sent.is_empty() {
                return;
            }
            for t in sent {
                self.ack(t);
            }
        }
        panic!("did not settle");
    }

    fn retarget(&mut self, target: Snapshot) {
        self.now += Duration::from_millis(1);
        let n = self.r.set_target(Arc::new(target), self.now);
        self.notes.extend(n);
    }

    fn offered(&self, t: &str) -> Vec<String> {
        names(&self.r.offer().snapshot, t)
    }
}

fn before() -> Snapshot {
    snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)])
}

/// The route moves from a to b (new endpoints), and a is deleted.
fn moved() -> Snapshot {
    snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081)])
}

/// ORDER-2 for a node with nothing: clusters and endpoints, then listeners, then routes.
#[test]
fn a_new_node_is_walked_through_every_step() {
    let target = before();
    let mut c = Client::new(RolloutConfig::default(), target);
    assert_eq!(c.r.step(), Step::Clusters);
    assert_eq!(c.push(), [CLUSTER, ENDPOINT], "listeners and routes are held");
    c.ack(CLUSTER);
    assert_eq!(c.r.step(), Step::Clusters, "endpoints not acknowledged yet");
    c.ack(ENDPOINT);
    assert_eq!(c.r.step(), Step::Listeners);
    assert_eq!(c.push(), [LISTENER]);
    c.ack(LISTENER);
    assert_eq!(c.r.step(), Step::Routes);
    assert_eq!(c.push(), [ROUTE]);
    c.ack(ROUTE);
    assert_eq!(c.r.step(), Step::Converged);
    assert!(c.push().is_empty());
    assert!(!c.notes.iter().any(|n| matches!(n, Note::Converged(_))), "a first connection is not a change");
}

/// The move of must-show 2a, step by step: b first, the route once b is acknowledged, a last;
/// the convergence time covers the whole plan.
#[test]
fn a_change_converges_through_each_step_and_is_timed() {
    let mut c = Client::holding(before());
    c.retarget(moved());
    assert_eq!(c.r.step(), Step::Clusters);
    assert_eq!(c.push(), [CLUSTER, ENDPOINT]);
    assert_eq!(c.offered(CLUSTER), ["a", "b"], "a is kept while the route names it");
    c.ack(CLUSTER);
    c.ack(ENDPOINT);
    assert_eq!(c.r.step(), Step::Routes, "the listener did not change");
    assert_eq!(c.push(), [ROUTE]);
    c.ack(ROUTE);
    assert_eq!(c.r.step(), Step::Cleanup);
    assert_eq!(c.push(), [CLUSTER, ENDPOINT]);
    assert_eq!(c.offered(CLUSTER), ["b"]);
    c.ack(CLUSTER);
    c.ack(ENDPOINT);
    assert_eq!(c.r.step(), Step::Converged);
    let steps: Vec<Step> = c.notes.iter().filter_map(|n| if let Note::Step(s) = n { Some(*s) } else { None }).collect();
    assert_eq!(steps, [Step::Clusters, Step::Routes, Step::Cleanup, Step::Converged]);
    assert!(c.notes.contains(&Note::Converged(Duration::from_millis(4))), "{:?}", c.notes);
}

/// A new target midway restarts from what the node acknowledged, and is counted.
#[test]
fn a_new_target_midway_restarts_the_plan() {
    let mut c = Client::holding(before());
    c.retarget(moved());
    c.push();
    c.ack(CLUSTER);
    c.ack(ENDPOINT);
    assert_eq!(c.r.step(), Step::Routes);
    // Before the route is sent, r is to split between b and a new c.
    let gen2 = snap(vec![listener("l", 10000, "r"), route("r", &["b", "c"]), cluster("b"), cla("b", 8081), cluster("c"), cla("c", 8082)]);
    c.retarget(gen2);
    assert!(c.notes.contains(&Note::Restarted { step: Step::Routes }));
    assert_eq!(c.r.step(), Step::Clusters, "c must arrive before a route names it");
    assert_eq!(c.push(), [CLUSTER, ENDPOINT], "the route is held again");
    assert_eq!(c.offered(CLUSTER), ["a", "b", "c"]);
    c.settle();
    assert_eq!(c.r.step(), Step::Converged);
    assert_eq!(c.offered(CLUSTER), ["b", "c"]);
    assert_eq!(c.notes.iter().filter(|n| matches!(n, Note::Converged(_))).count(), 1);
}

/// A response sent under the previous target and answered after the restart still counts.
#[test]
fn an_answer_to_a_response_of_the_previous_target_still_counts() {
    let mut c = Client::holding(before());
    c.retarget(moved());
    assert_eq!(c.push(), [CLUSTER, ENDPOINT]);
    let gen2 = snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081), cluster("x"), cla("x", 8083)]);
    c.retarget(gen2);
    c.ack(CLUSTER);
    c.ack(ENDPOINT);
    // a and b are held; x is not yet.
    assert_eq!(c.r.step(), Step::Clusters);
    assert_eq!(c.push(), [CLUSTER, ENDPOINT]);
    assert_eq!(c.offered(CLUSTER), ["a", "b", "x"]);
}

/// A NACK at each step stops the plan there: the offer is frozen, later ACKs and the grace
/// period do not move it, and the next target starts again.
#[test]
fn a_nack_at_any_step_stops_the_plan_until_the_next_target() {
    // (type rejected, step it is rejected at)
    for (rejected, at) in [(CLUSTER, Step::Clusters), (ENDPOINT, Step::Clusters), (ROUTE, Step::Routes), (CLUSTER, Step::Cleanup)] {
        let mut c = Client::holding(before());
        c.retarget(moved());
        while c.r.step() != at {
            for t in c.push() {
                c.ack(t);
            }
        }
        let sent = c.push();
        assert!(sent.contains(&rejected), "{at:?}: {sent:?}");
        let frozen = c.r.offer().clone();
        c.answer(rejected, Some("rejected"));
        assert!(c.notes.iter().any(|n| matches!(n, Note::Stopped { type_url, .. } if type_url.as_ref() == rejected)), "{at:?}");
        for t in sent.into_iter().filter(|t| *t != rejected) {
            c.ack(t);
        }
        assert_eq!(c.r.step(), at, "{at:?}: the plan moved past a NACK");
        assert!(!c.r.offer_differs(&frozen), "{at:?}: the offer changed after a NACK");
        assert_eq!(c.r.deadline(), None, "{at:?}: a NACK is an answer, not silence");
        assert!(c.r.tick(c.now + GRACE * 2).is_empty());
        let status = c.r.status(c.now);
        assert_eq!(status.stopped.as_ref().map(|s| s.message.as_str()), Some("rejected"));
        assert_eq!(status.nack_stops, 1);
        // The fix arrives as the next target (the rejected resources changed): the plan runs
        // again from what was acknowledged.
        let fixed = snap(vec![listener("l", 10000, "r"), route("r", &["b2"]), cluster("b2"), cla("b2", 8082)]);
        c.retarget(fixed);
        assert!(c.r.status(c.now).stopped.is_none());
        c.settle();
        assert_eq!(c.r.step(), Step::Converged, "{at:?}");
        assert_eq!(c.offered(CLUSTER), ["b2"]);
    }
}

/// A NACK of the listener step (a new listener the node rejects).
#[test]
fn a_nack_of_listeners_stops_before_routes() {
    let mut c = Client::holding(before());
    let target = snap(vec![listener("l", 10001, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    c.retarget(target);
    assert_eq!(c.r.step(), Step::Listeners);
    assert_eq!(c.push(), [LISTENER]);
    c.answer(LISTENER, Some("port taken"));
    assert_eq!(c.r.step(), Step::Listeners);
    assert!(c.push().is_empty());
}

/// A client that never answers: each step proceeds after the grace period, and says so.
#[test]
fn silence_proceeds_after_the_grace_period() {
    let mut c = Client::holding(before());
    c.retarget(moved());
    c.push();
    let deadline = c.r.deadline().expect("waiting for clusters");
    assert!(c.r.tick(deadline - Duration::from_millis(1)).is_empty(), "not before the grace period");
    let notes = c.r.tick(deadline);
    assert!(notes.contains(&Note::GraceExpired { step: Step::Clusters }), "{notes:?}");
    assert_eq!(c.r.step(), Step::Routes);
    c.push();
    let notes = c.r.tick(c.r.deadline().unwrap());
    assert!(notes.contains(&Note::GraceExpired { step: Step::Routes }));
    assert_eq!(c.r.step(), Step::Cleanup);
    c.push();
    c.r.tick(c.r.deadline().unwrap());
    assert_eq!(c.r.step(), Step::Converged);
    assert_eq!(c.offered(CLUSTER), ["b"]);
    assert_eq!(c.r.status(c.now).grace_expiries, 3);
}

/// Proxyless gRPC subscribes to its listener by name: it is served the target at once.
#[test]
fn by_name_clients_are_not_gated() {
    let now = Instant::now();
    let mut r = Rollout::new(RolloutConfig::default(), Arc::new(before()), now);
    r.subscribe(0, &ty(LISTENER), false, now);
    assert_eq!(r.mode(), Mode::ByName);
    assert!(r.offer().hold.is_empty());
    r.set_target(Arc::new(moved()), now);
    assert_eq!(names(&r.offer().snapshot, ROUTE), ["r"]);
    assert_eq!(names(&r.offer().snapshot, CLUSTER), ["b"]);
    assert_eq!(r.deadline(), None);
}

/// `--unsafe-unordered-push`: the target at once, for every node.
#[test]
fn unordered_serves_the_target_at_once() {
    let mut c = Client::new(RolloutConfig { grace: GRACE, unordered: true }, before());
    c.settle();
    c.retarget(moved());
    assert_eq!(c.r.mode(), Mode::Unordered);
    assert_eq!(c.push(), [CLUSTER, ENDPOINT, ROUTE], "everything at once, a removed with it");
    assert_eq!(c.offered(CLUSTER), ["b"]);
}

/// A type the node does not subscribe to (here: no LDS/RDS, a CDS-only client) gates nothing.
#[test]
fn types_nobody_subscribes_do_not_gate() {
    let now = Instant::now();
    let mut r = Rollout::new(RolloutConfig::default(), Arc::new(before()), now);
    r.subscribe(0, &ty(CLUSTER), true, now);
    r.subscribe(0, &ty(ENDPOINT), false, now);
    let set = r.offer().snapshot.get(CLUSTER).unwrap().clone();
    r.sent(0, &ty(CLUSTER), "1".into(), Update::Replace(set));
    let set = r.offer().snapshot.get(ENDPOINT).unwrap().clone();
    r.sent(0, &ty(ENDPOINT), "2".into(), Update::Replace(set));
    r.answered(0, &ty(CLUSTER), "1", None, now);
    r.answered(0, &ty(ENDPOINT), "2", None, now);
    assert_eq!(r.step(), Step::Converged);
}

/// Delta: responses are patches; a later answer drops earlier unanswered responses; unknown
/// nonces are ignored.
#[test]
fn delta_patches_move_the_acknowledged_state() {
    let now = Instant::now();
    let mut r = Rollout::new(RolloutConfig::default(), Arc::new(before()), now);
    let cds = ty(CLUSTER);
    r.subscribe(7, &cds, true, now);
    let a = r.offer().snapshot.resource(CLUSTER, "a").unwrap().clone();
    r.sent(7, &cds, "1".into(), Update::Patch { removed: vec![], added: vec![a.clone()] });
    r.answered(7, &cds, "99", None, now);
    assert!(r.acked().get(CLUSTER).is_none(), "an unknown nonce changes nothing");
    r.answered(7, &cds, "1", None, now);
    assert_eq!(names(r.acked(), CLUSTER), ["a"]);
    r.sent(7, &cds, "2".into(), Update::Patch { removed: vec!["a".into()], added: vec![] });
    r.sent(7, &cds, "3".into(), Update::Patch { removed: vec![], added: vec![a] });
    r.answered(7, &cds, "3", None, now);
    assert_eq!(names(r.acked(), CLUSTER), ["a"]);
    assert_eq!(r.status(now).unanswered, 0, "answering 3 settles 2 too");
    r.stream_closed(7, now);
    assert_eq!(r.status(now).unanswered, 0);
}

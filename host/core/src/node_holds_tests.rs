//! A rejection held where it was made (design 016, part 3a), through a node's rollout: one
//! document in play held at the node while the rest of the change goes on, several split in
//! halves, a retry, an author's fix, a node that never acknowledged anything, and what a
//! client's message names steering nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plan::tests::{cla, cluster, listener, one, snap};
use crate::resource::Resource;
use crate::rollout::{Rollout, RolloutConfig, Update};
use crate::snapshot::Snapshot;
use crate::types::{self, CLUSTER, ENDPOINT, LISTENER, ROUTE};

const GATEWAY: &str = "plugin gateway-api from Gateway/infra/gw";
const A: &str = "HTTPRoute/team-a/a";
const B: &str = "HTTPRoute/team-b/b";
const RETRY: Duration = Duration::from_secs(30);

/// A route of `doc` matching `prefix`; a prefix with `bad` in it is one the node refuses.
fn r(doc: &str, prefix: &str) -> String {
    format!(
        "{{name: '{doc}{prefix}', match: {{prefix: '{prefix}'}}, route: {{cluster: c}}, metadata: {{filter_metadata: \
         {{xdst: {{document: '{doc}'}}}}}}}}"
    )
}

/// The Gateway's route configuration `gw` with these routes.
fn rc(routes: &[String]) -> Resource {
    one(&format!(
        "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: gw\nvirtual_hosts: [{{name: \
         all, domains: [\"*\"], routes: [{}]}}]\n",
        routes.join(", ")
    ))
    .with_origin(GATEWAY)
}

fn target(routes: &[String]) -> Snapshot {
    snap(vec![listener("l", 10000, "gw").with_origin(GATEWAY), rc(routes), cluster("c"), cla("c", 8080)])
}

/// An ADS client that refuses any route configuration with a `bad` prefix in it, and accepts
/// everything else.
struct Node {
    r: Rollout,
    now: Instant,
    nonce: u64,
    sent: BTreeMap<&'static str, Arc<str>>,
    /// What it was sent and answered, in order: (type, accepted).
    answers: Vec<(&'static str, bool)>,
    /// Whether it refuses everything (a hostile client).
    refuses_all: bool,
}

const ORDER: [&str; 4] = [CLUSTER, ENDPOINT, ROUTE, LISTENER];

impl Node {
    fn new(first: Snapshot) -> Node {
        let now = Instant::now();
        let config = RolloutConfig { retry: RETRY, ..RolloutConfig::default() };
        let mut n = Node {
            r: Rollout::new(config, Arc::new(first), now),
            now,
            nonce: 0,
            sent: BTreeMap::new(),
            answers: vec![],
            refuses_all: false,
        };
        for t in ORDER {
            n.r.subscribe(0, &Arc::from(t), true, &[], now);
        }
        n
    }

    fn refuses(&self, t: &str, update: &Update) -> Option<String> {
        let bad = self.refuses_all
            || crate::rollout::update_resources(update)
                .into_iter()
                .any(|r| t == ROUTE && r.body().windows(3).any(|w| w == b"bad"));
        // The message names other teams' resources, as a hostile or confused client might:
        // blame comes from xdst's own diff, never from it.
        bad.then(|| "route 'gw': invalid header value; see cluster c and listener l".to_owned())
    }

    /// Sends what the offer has that the node was not sent, and answers it; until nothing more
    /// goes out.
    fn settle(&mut self) {
        for _ in 0..32 {
            let offer = self.r.offer().clone();
            let mut any = false;
            for t in ORDER {
                if offer.hold.contains(&t) {
                    continue;
                }
                let set = offer.snapshot.get(t).cloned().unwrap_or_default();
                if self.sent.get(t) == Some(set.version()) {
                    continue;
                }
                any = true;
                self.sent.insert(t, set.version().clone());
                self.nonce += 1;
                let nonce: Arc<str> = self.nonce.to_string().into();
                let update = Update::Replace(set);
                let nack = self.refuses(t, &update);
                self.r.sent(0, &Arc::from(t), nonce.clone(), update);
                self.now += Duration::from_millis(1);
                self.answers.push((t, nack.is_none()));
                let _ = self.r.answered(0, &Arc::from(t), &nonce, nack.as_deref(), self.now);
            }
            if !any {
                return;
            }
        }
        panic!("never settled: {:?}", self.answers);
    }

    fn retarget(&mut self, t: Snapshot) {
        self.now += Duration::from_millis(1);
        let _ = self.r.set_target(Arc::new(t), self.now);
        self.settle();
    }

    /// The prefixes of the route configuration the node holds.
    fn holds(&self) -> Vec<String> {
        let rc = self.r.acked().resource(ROUTE, "gw").expect("the node holds gw");
        let json = crate::decode::to_json(ROUTE, rc.body()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["virtual_hosts"][0]["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["match"]["prefix"].as_str().unwrap().to_owned())
            .collect()
    }

    fn held_at_node(&self) -> Vec<String> {
        self.r.node_holds().held().map(|(d, _)| d.to_string()).collect()
    }
}

fn converged(routes: &[String]) -> Node {
    let mut n = Node::new(target(routes));
    n.settle();
    assert!(n.r.holds_target(), "{:?}", n.answers);
    n
}

/// One document in play: held at this node at what it accepted; the rest of the change, in
/// the same RouteConfiguration, goes on to it, and it holds the group's target but for that
/// document.
#[test]
fn one_document_in_play_is_held_at_the_node_and_the_rest_goes_on() {
    let mut n = converged(&[r(A, "/a"), r(B, "/b0")]);
    n.retarget(target(&[r(A, "/a-bad"), r(B, "/b0")]));
    assert_eq!(n.held_at_node(), [A]);
    assert_eq!(n.holds(), ["/a", "/b0"], "the node keeps what it accepted");
    // team-b ships while team-a's route is still bad: it reaches the node.
    n.retarget(target(&[r(A, "/a-bad"), r(B, "/b0"), r(B, "/b1")]));
    assert_eq!(n.holds(), ["/a", "/b0", "/b1"]);
    assert!(n.r.holds_target(), "it holds what it is moved to");
    let synced = n.r.synced().expect("synced");
    assert!(Arc::ptr_eq(&synced.target, n.r.group_target()), "the group's target, but for");
    assert_eq!(synced.held_back.iter().map(|d| d.to_string()).collect::<Vec<_>>(), [A]);
    // CSDS: the route configuration stays rejected, with the node's message.
    let states = n.r.resource_states();
    let gw = states.iter().find(|s| s.type_url.as_ref() == ROUTE).unwrap();
    assert!(
        matches!(&gw.state, crate::client_status::State::Nacked { message, .. } if message.contains("invalid header"))
    );
}

/// Issue 48, point 3: team-a's bad edit and team-b's new route in one response. The parts are
/// tried in halves: team-b's route is acknowledged, team-a's alone is held.
#[test]
fn several_in_play_are_tried_in_halves_and_only_what_is_rejected_alone_is_held() {
    let mut n = converged(&[r(A, "/a"), r(B, "/b0")]);
    n.retarget(target(&[r(A, "/a-bad"), r(B, "/b0"), r(B, "/b1")]));
    assert_eq!(n.held_at_node(), [A]);
    assert_eq!(n.holds(), ["/a", "/b0", "/b1"]);
    assert_eq!(n.r.node_holds().suspects().count(), 0, "the trial is over");
    let rejected = n.answers.iter().filter(|(_, ok)| !ok).count();
    assert!(rejected <= 3, "a few round trips, not one per route: {:?}", n.answers);
}

/// The author fixes the document: the new version is tried at once, and served.
#[test]
fn a_hold_at_the_node_ends_when_the_document_changes() {
    let mut n = converged(&[r(A, "/a"), r(B, "/b0")]);
    n.retarget(target(&[r(A, "/a-bad"), r(B, "/b0")]));
    assert_eq!(n.held_at_node(), [A]);
    n.retarget(target(&[r(A, "/a2"), r(B, "/b0")]));
    assert!(n.held_at_node().is_empty());
    assert_eq!(n.holds(), ["/a2", "/b0"]);
}

/// At its retry time a held document is sent again (a port freed on the node's host is taken
/// up so); rejected again, it waits twice as long.
#[test]
fn a_held_document_is_retried_and_each_repeated_rejection_doubles_the_wait() {
    let mut n = converged(&[r(A, "/a"), r(B, "/b0")]);
    n.retarget(target(&[r(A, "/a-bad"), r(B, "/b0")]));
    let retry_at = |n: &Node| n.r.node_holds().held().next().map(|(_, h)| h.retry_at).unwrap();
    let first = retry_at(&n);
    let wait = first.duration_since(n.now);
    assert!(wait <= RETRY && wait > RETRY - Duration::from_millis(10), "{wait:?}");
    assert_eq!(n.r.deadline(), Some(first));
    n.now = first;
    let _ = n.r.tick(n.now);
    let before = n.answers.len();
    n.settle();
    // Sent again, alone, and rejected again (then what it holds is what it is offered again).
    assert_eq!(n.answers[before..].iter().filter(|(_, ok)| !ok).count(), 1, "{:?}", &n.answers[before..]);
    assert_eq!(n.answers[before], (ROUTE, false));
    let second = retry_at(&n);
    assert!(second.duration_since(n.now) >= 2 * RETRY - Duration::from_millis(10), "doubled");
}

/// Issue 48, point 1: a node that never acknowledged anything has nothing to keep; nothing is
/// held, its plan stops, and it is not acted on.
#[test]
fn a_node_that_never_acknowledged_anything_is_not_acted_on() {
    let mut n = Node::new(target(&[r(A, "/a"), r(B, "/b0")]));
    n.refuses_all = true;
    n.settle();
    n.retarget(target(&[r(A, "/a"), r(B, "/b0"), r(B, "/b1")]));
    assert!(n.r.node_holds().is_empty());
    let status = n.r.status(n.now);
    assert!(status.last_analysis.as_deref().is_some_and(|a| a.contains("never acknowledged")), "{status:?}");
}

/// With `--on-nack stop` nothing is held at the node: the plan stops, as before.
#[test]
fn with_on_nack_stop_a_rejection_only_stops_the_plan() {
    let mut n = converged(&[r(A, "/a"), r(B, "/b0")]);
    n.r = {
        let config = RolloutConfig { hold_at_node: false, ..RolloutConfig::default() };
        let mut r = Rollout::new(config, Arc::new(target(&[r(A, "/a"), r(B, "/b0")])), n.now);
        for t in ORDER {
            r.subscribe(0, &Arc::from(t), true, &[], n.now);
        }
        r
    };
    n.sent.clear();
    n.settle();
    n.retarget(target(&[r(A, "/a-bad"), r(B, "/b0"), r(B, "/b1")]));
    assert!(n.r.node_holds().is_empty());
    assert_eq!(n.holds(), ["/a", "/b0"], "team-b waits too");
    assert!(n.r.status(n.now).stopped.is_some());
}

/// A route that moved to a cluster the group no longer has, held back: the node keeps the
/// cluster it names, so what it holds stays whole.
#[test]
fn what_a_held_part_names_is_kept_with_it() {
    let route = |cluster: &str, prefix: &str| {
        format!(
            "{{name: a, match: {{prefix: '{prefix}'}}, route: {{cluster: {cluster}}}, metadata: {{filter_metadata: \
             {{xdst: {{document: '{A}'}}}}}}}}"
        )
    };
    let with = |cluster: &str, prefix: &str| {
        snap(vec![
            listener("l", 10000, "gw").with_origin(GATEWAY),
            rc(&[route(cluster, prefix)]),
            crate::plan::tests::cluster(cluster),
            cla(cluster, 8080),
        ])
    };
    let mut n = Node::new(with("old", "/a"));
    n.settle();
    n.retarget(with("new", "/a-bad"));
    assert_eq!(n.held_at_node(), [A]);
    assert!(n.r.target().resource(CLUSTER, "old").is_some(), "the held route's cluster stays");
    assert_eq!(types::short_name(CLUSTER), "cds");
}

/// Every node of a group rejecting the same thing composes it once: the result is shared
/// through the group target's memo.
#[test]
fn a_fleet_rejecting_the_same_thing_shares_what_it_costs() {
    let group = Arc::new(target(&[r(A, "/a-bad"), r(B, "/b0")]));
    let mut nodes: Vec<Node> = (0..3).map(|_| converged(&[r(A, "/a"), r(B, "/b0")])).collect();
    for n in &mut nodes {
        n.now += Duration::from_millis(1);
        let _ = n.r.set_target(group.clone(), n.now);
        n.settle();
    }
    let composed: Vec<&Arc<Resource>> = nodes.iter().map(|n| n.r.target().resource(ROUTE, "gw").unwrap()).collect();
    assert!(composed.windows(2).all(|w| w[0].version() == w[1].version()));
    assert!(nodes.iter().all(|n| n.held_at_node() == [A]));
}

/// Issue 48, point 3: team-a rewrites its route over and over with values the node refuses,
/// each time with team-b's next route in the same response. Every one of team-b's routes
/// reaches the node at once; team-a's new versions are tried alone, less and less often, and
/// what that costs in analyses stays small.
#[test]
fn a_document_rewritten_over_and_over_is_tried_alone_and_never_takes_others_with_it() {
    let mut n = converged(&[r(A, "/a"), r(B, "/b0")]);
    let mut team_b = vec![r(B, "/b0")];
    let mut analyses = 0;
    for i in 1..=40 {
        team_b.push(r(B, &format!("/b{i}")));
        let mut routes = vec![r(A, &format!("/a-bad-{i}"))];
        routes.extend(team_b.iter().cloned());
        n.now += Duration::from_millis(20);
        n.retarget(target(&routes));
        assert!(n.holds().contains(&format!("/b{i}")), "team-b's /b{i} reached the node: {:?}", n.holds());
        assert_eq!(n.holds()[0], "/a", "team-a's route stays as the node accepted it");
        analyses = n.answers.iter().filter(|(_, ok)| !ok).count();
    }
    // 40 versions in 0.8 s: the first ones tried at once, then every 50, 100, 200 ... ms.
    assert!(analyses <= 12, "{analyses} rejections for 40 versions");
    // team-a fixes it: tried (alone) once due, and served.
    n.now += RETRY;
    let mut routes = vec![r(A, "/a-fixed")];
    routes.extend(team_b.iter().cloned());
    n.retarget(target(&routes));
    let _ = n.r.tick(n.now);
    n.settle();
    assert_eq!(n.holds()[0], "/a-fixed");
    assert!(n.held_at_node().is_empty());
}

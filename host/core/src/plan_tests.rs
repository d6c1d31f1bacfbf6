//! The make-before-break planner (ORDER-1, ORDER-2): each step, interruptions, and a property
//! test over random changes and random acknowledgements.

use proptest::prelude::*;

use super::*;
use crate::decode::decode_file;
use crate::resource::Resource;

pub(crate) fn one(yaml: &str) -> Resource {
    decode_file("t.yaml", yaml).unwrap().remove(0)
}

pub(crate) fn cluster(name: &str) -> Resource {
    one(&format!(
        "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: {name}\ntype: EDS\nconnect_timeout: 1s\
            \neds_cluster_config: {{eds_config: {{ads: {{}}}}}}\n"
    ))
}

pub(crate) fn cla(name: &str, port: u16) -> Resource {
    one(&format!(
        "\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: {name}\n\
            endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: \
            {port}}}}}}}}}]}}]\n"
    ))
}

pub(crate) fn route(name: &str, clusters: &[&str]) -> Resource {
    let action = match clusters {
        [one] => format!("{{cluster: {one}}}"),
        many => format!(
            "{{weighted_clusters: {{clusters: [{}]}}}}",
            many.iter().map(|c| format!("{{name: {c}, weight: 1}}")).collect::<Vec<_>>().join(", ")
        ),
    };
    one(&format!(
        "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: {name}\nvirtual_hosts: \
            [{{name: all, domains: [\"*\"], routes: [{{match: {{prefix: /}}, route: {action}}}]}}]\n"
    ))
}

pub(crate) fn listener(name: &str, port: u16, route: &str) -> Resource {
    one(&format!(
        r#""@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: {name}
address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: in
      rds: {{route_config_name: {route}, config_source: {{ads: {{}}}}}}
      http_filters: [{{name: router, typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}}}]
"#
    ))
}

pub(crate) fn snap(rs: Vec<Resource>) -> Snapshot {
    Snapshot::from_resources(rs).unwrap()
}

pub(crate) fn names(s: &Snapshot, ty: &str) -> Vec<String> {
    s.get(ty).map(|t| t.resources().map(|r| r.name().to_string()).collect()).unwrap_or_default()
}

/// The node acknowledges what it was sent of `types` (what a SotW ACK of each means). Held
/// types are not sent, so there is nothing new to acknowledge for them. Like Envoy, the node
/// drops route configurations no listener names and endpoints of clusters it no longer has.
fn ack(acked: &Snapshot, p: &Plan, types: &[&str]) -> Snapshot {
    let mut out = acked.clone();
    for ty in types {
        if p.hold.contains(ty) {
            continue;
        }
        let set = p.offer.get(ty).cloned().unwrap_or_default();
        out = out.with_set(Arc::from(*ty), set);
    }
    let keep = |out: &Snapshot, ty: &str, names: BTreeSet<String>| -> Snapshot {
        match out.get(ty) {
            Some(s) => out.with_set(
                Arc::from(ty),
                Arc::new(TypeSet::from_shared(s.resources().filter(|r| names.contains(r.name().as_ref())).cloned())),
            ),
            None => out.clone(),
        }
    };
    let routes = referenced(out.get(LISTENER), ROUTE);
    out = keep(&out, ROUTE, routes);
    let clusters: BTreeSet<String> = names(&out, CLUSTER).into_iter().collect();
    keep(&out, ENDPOINT, clusters)
}

const ALL: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];

/// ORDER-2 from nothing: clusters and endpoints, then listeners, then routes.
#[test]
fn a_new_node_gets_clusters_then_listeners_then_routes() {
    let target = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let p = plan(&target, &Snapshot::default(), true);
    assert_eq!(p.step, Step::Clusters);
    assert_eq!((names(&p.offer, CLUSTER), names(&p.offer, ENDPOINT)), (vec!["a".into()], vec!["a".into()]));
    assert_eq!(p.hold, [LISTENER, ROUTE], "listeners and routes wait");

    // Only CDS acknowledged: endpoints are still missing, nothing moves on.
    let acked = ack(&Snapshot::default(), &p, &[CLUSTER]);
    assert_eq!(plan(&target, &acked, true).step, Step::Clusters);

    let acked = ack(&acked, &p, &[ENDPOINT]);
    let p = plan(&target, &acked, true);
    assert_eq!(p.step, Step::Listeners);
    assert_eq!(names(&p.offer, LISTENER), vec!["l".to_owned()]);
    assert_eq!(p.hold, [ROUTE], "routes wait for the listener ACK");

    let acked = ack(&acked, &p, &[LISTENER]);
    let p = plan(&target, &acked, true);
    assert_eq!(p.step, Step::Routes);
    assert_eq!(names(&p.offer, ROUTE), vec!["r".to_owned()]);
    assert!(p.hold.is_empty());

    let acked = ack(&acked, &p, &[ROUTE]);
    let p = plan(&target, &acked, true);
    assert_eq!(p.step, Step::Converged);
    assert_eq!(p.offer.version(), target.version());
}

/// A route moves from cluster a to a new cluster b, and a is deleted: b first, the route after
/// b is acknowledged, a last.
#[test]
fn moving_a_route_adds_the_new_cluster_first_and_removes_the_old_one_last() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let target = snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081)]);
    let p = plan(&target, &before, true);
    assert_eq!(p.step, Step::Clusters);
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned()], "a is kept while r names it");
    assert!(p.hold.contains(&ROUTE), "the route waits for b");

    let acked = ack(&before, &p, &[CLUSTER, ENDPOINT]);
    let p = plan(&target, &acked, true);
    // The listener did not change: straight to routes.
    assert_eq!(p.step, Step::Routes);
    assert_eq!(p.offer.resource(ROUTE, "r").unwrap().version(), target.resource(ROUTE, "r").unwrap().version());
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned()]);

    let acked = ack(&acked, &p, &[ROUTE]);
    let p = plan(&target, &acked, true);
    assert_eq!(p.step, Step::Cleanup);
    assert_eq!(names(&p.offer, CLUSTER), vec!["b".to_owned()], "a goes once nothing the node holds names it");
    let acked = ack(&acked, &p, &[CLUSTER, ENDPOINT]);
    assert_eq!(plan(&target, &acked, true).step, Step::Converged);
}

/// A new generation midway restarts from what the node acknowledged.
#[test]
fn a_new_generation_midway_restarts_from_what_was_acknowledged() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let gen1 = snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081)]);
    let p = plan(&gen1, &before, true);
    let acked = ack(&before, &p, &[CLUSTER, ENDPOINT]);
    assert_eq!(plan(&gen1, &acked, true).step, Step::Routes);
    // Before the route goes out, the target changes again: r now splits between b and c.
    let gen2 = snap(vec![
        listener("l", 10000, "r"),
        route("r", &["b", "c"]),
        cluster("b"),
        cla("b", 8081),
        cluster("c"),
        cla("c", 8082),
    ]);
    let p = plan(&gen2, &acked, true);
    assert_eq!(p.step, Step::Clusters, "c must arrive before a route names it");
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]);
    assert!(p.hold.contains(&ROUTE), "the route waits for c");
}

/// A NACK leaves the acknowledged state where it was: the plan offers the same again, and never
/// moves past the rejected step.
#[test]
fn a_nack_holds_the_plan_at_its_step() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let target = snap(vec![listener("l", 10001, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let p1 = plan(&target, &before, true);
    assert_eq!(p1.step, Step::Listeners);
    // The node rejects the listener: nothing it acknowledged changes.
    let p2 = plan(&target, &before, true);
    assert_eq!((p2.step, p2.offer.version()), (p1.step, p1.offer.version()));
}

/// A listener or route response still unanswered keeps what it names: no cleanup until it is.
#[test]
fn cleanup_waits_for_responses_in_flight() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let target = snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081)]);
    let acked = ack(&before, &plan(&target, &before, true), &[CLUSTER, ENDPOINT]);
    let acked = ack(&acked, &plan(&target, &acked, true), &[ROUTE]);
    let p = plan(&target, &acked, false);
    assert_eq!(p.step, Step::Routes);
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(plan(&target, &acked, true).step, Step::Cleanup);
}

fn universe_target(routes: &[(usize, Vec<usize>)], extra_clusters: &[usize], ports: &[u16; 4]) -> Snapshot {
    let cl = |i: usize| format!("c{i}");
    let mut used: BTreeSet<usize> = extra_clusters.iter().copied().collect();
    let mut rs = Vec::new();
    for (i, (l, cs)) in routes.iter().enumerate() {
        let cs: Vec<String> = cs.iter().map(|c| cl(*c)).collect();
        let refs: Vec<&str> = cs.iter().map(String::as_str).collect();
        rs.push(route(&format!("r{i}"), &refs));
        rs.push(listener(&format!("l{l}"), 10000 + *l as u16, &format!("r{i}")));
        used.extend(routes[i].1.iter().copied());
    }
    for c in used {
        rs.push(cluster(&cl(c)));
        rs.push(cla(&cl(c), ports[c]));
    }
    snap(rs)
}

pub(crate) fn clusters_named(s: &Snapshot, routes: impl Iterator<Item = String>) -> BTreeSet<String> {
    routes
        .filter_map(|r| {
            s.resource(ROUTE, &r).map(|r| r.references().names(CLUSTER).map(str::to_owned).collect::<Vec<_>>())
        })
        .flatten()
        .collect()
}

pub(crate) fn arb_target() -> impl Strategy<Value = Snapshot> {
    (
        // Up to two listeners, each with its own route naming 1-2 of four clusters.
        proptest::collection::btree_map(0usize..2, proptest::collection::btree_set(0usize..4, 1..3), 0..3),
        proptest::collection::vec(0usize..4, 0..2),
        proptest::array::uniform4(8080u16..8083),
    )
        .prop_map(|(ls, extra, ports)| {
            let routes: Vec<(usize, Vec<usize>)> =
                ls.into_iter().map(|(l, cs)| (l, cs.into_iter().collect())).collect();
            universe_target(&routes, &extra, &ports)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Over random targets and random acknowledgements (any subset of types, in any order;
    /// a type left out is a NACK or silence), the node is never offered a route naming a
    /// cluster it does not hold with its endpoints, and is never offered a cluster set that
    /// drops a cluster a route it holds (reachable from its listeners) still names. And when
    /// the node keeps acknowledging, it converges.
    #[test]
    fn never_a_route_before_its_cluster_nor_a_cluster_removed_under_a_route(
        targets in proptest::collection::vec(arb_target(), 1..4),
        acks in proptest::collection::vec(proptest::collection::vec(0usize..4, 0..4), 1..24),
    ) {
        let mut acked = Snapshot::default();
        let mut ti = 0;
        for (step, types) in acks.iter().enumerate() {
            if step % 6 == 5 && ti + 1 < targets.len() {
                ti += 1;
            }
            let target = &targets[ti];
            let p = plan(target, &acked, true);
            // Routes offered name only clusters the node already holds, with endpoints.
            let held_routes: Vec<String> = names(&acked, ROUTE);
            let sent_routes = if p.hold.contains(&ROUTE) { Vec::new() } else { names(&p.offer, ROUTE) };
            for r in sent_routes {
                let same_as_held = held_routes.contains(&r)
                    && acked.resource(ROUTE, &r).map(|x| x.version().clone()) == p.offer.resource(ROUTE, &r).map(|x| x.version().clone());
                if same_as_held {
                    continue;
                }
                for c in clusters_named(&p.offer, std::iter::once(r.clone())) {
                    prop_assert!(acked.resource(CLUSTER, &c).is_some(), "route {r} offered naming cluster {c} the node does not hold");
                    prop_assert!(acked.resource(ENDPOINT, &c).is_some(), "route {r} offered naming cluster {c} whose \
                        endpoints the node does not hold");
                }
            }
            // Clusters offered include every cluster a route the node holds (and its listeners
            // reach) names, unless the node's listeners and routes are already the target's.
            let reachable: Vec<String> = acked
                .get(LISTENER)
                .into_iter()
                .flat_map(|s| s.resources())
                .flat_map(|l| l.references().names(ROUTE).map(str::to_owned).collect::<Vec<_>>())
                .collect();
            for c in clusters_named(&acked, reachable.into_iter()) {
                prop_assert!(p.offer.resource(CLUSTER, &c).is_some(), "cluster {c} removed while a held route names it (step {:?})", p.step);
            }
            let types: Vec<&str> = types.iter().copied().collect::<BTreeSet<usize>>().into_iter().map(|i| ALL[i]).collect();
            acked = ack(&acked, &p, &types);
        }
        // Then acknowledge everything until it converges (at most four rounds).
        let target = &targets[ti];
        for _ in 0..4 {
            let p = plan(target, &acked, true);
            acked = ack(&acked, &p, &ALL);
        }
        prop_assert_eq!(plan(target, &acked, true).step, Step::Converged);
    }
}

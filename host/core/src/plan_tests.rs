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
    cluster_v(name, 1)
}

/// A cluster whose content varies with `timeout` (its connect_timeout in seconds).
pub(crate) fn cluster_v(name: &str, timeout: u32) -> Resource {
    one(&format!(
        "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: {name}\ntype: EDS\nconnect_timeout: \
            {timeout}s\neds_cluster_config: {{eds_config: {{ads: {{}}}}}}\n"
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
    route_v(name, clusters, 0)
}

/// A route configuration whose content varies with `tag` (its virtual host's name).
pub(crate) fn route_v(name: &str, clusters: &[&str], tag: u32) -> Resource {
    let action = match clusters {
        [one] => format!("{{cluster: {one}}}"),
        many => format!(
            "{{weighted_clusters: {{clusters: [{}]}}}}",
            many.iter().map(|c| format!("{{name: {c}, weight: 1}}")).collect::<Vec<_>>().join(", ")
        ),
    };
    one(&format!(
        "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: {name}\nvirtual_hosts: \
            [{{name: all{tag}, domains: [\"*\"], routes: [{{match: {{prefix: /}}, route: {action}}}]}}]\n"
    ))
}

pub(crate) fn listener(name: &str, port: u16, route: &str) -> Resource {
    listener_v(name, port, route, 0)
}

/// A listener whose content varies with `tag` (its stat_prefix).
pub(crate) fn listener_v(name: &str, port: u16, route: &str, tag: u32) -> Resource {
    http_listener(name, port, tag, &format!("rds: {{route_config_name: {route}, config_source: {{ads: {{}}}}}}"))
}

/// A listener on `port` whose connection manager routes as `routing` (its YAML, indented to
/// sit among the manager's fields) says.
fn http_listener(name: &str, port: u16, tag: u32, routing: &str) -> Resource {
    one(&format!(
        r#""@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: {name}
address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: in{tag}
      {routing}
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

/// The plan for a node that holds `acked`, with nothing in flight and nothing draining; its
/// listeners and routes on one stream (`together`: ADS) or not.
pub(crate) fn plan_for(target: &Snapshot, acked: &Snapshot, together: bool) -> Plan {
    let named = names_held(acked);
    let keep = |c: &str| named.contains(c);
    plan(
        target,
        &Node {
            held: acked,
            maybe: acked,
            maybe_route: &|_| false,
            keep: &keep,
            together,
            settled: true,
            scopes_draining: false,
        },
    )
}

/// [`plan_for`] on one stream.
fn ads(target: &Snapshot, acked: &Snapshot) -> Plan {
    plan_for(target, acked, true)
}

/// The node acknowledges what it was sent of `types` (what a SotW ACK of each means). Held
/// types are not sent, so there is nothing new to acknowledge for them. Like Envoy once its
/// listeners have drained, the node drops route configurations no listener names and
/// endpoints of clusters it no longer has.
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

/// ORDER-2 from nothing: clusters and endpoints first; the listener, and its route
/// configuration, once they are usable. No empty listener response before that.
#[test]
fn a_new_node_gets_clusters_then_its_listener_and_route() {
    let target = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    for together in [true, false] {
        let p = plan_for(&target, &Snapshot::default(), together);
        assert_eq!(p.step, Step::Clusters);
        assert_eq!((names(&p.offer, CLUSTER), names(&p.offer, ENDPOINT)), (vec!["a".into()], vec!["a".into()]));
        assert_eq!(p.hold, [LISTENER], "no listener response until one can go");
        assert!(names(&p.offer, ROUTE).is_empty(), "the route waits for a");

        // Only CDS acknowledged: endpoints are still missing, nothing moves on.
        let acked = ack(&Snapshot::default(), &p, &[CLUSTER]);
        assert_eq!(plan_for(&target, &acked, together).step, Step::Clusters);

        let acked = ack(&acked, &p, &[ENDPOINT]);
        let p = plan_for(&target, &acked, together);
        assert_eq!(p.step, Step::Acks);
        assert_eq!((names(&p.offer, LISTENER), names(&p.offer, ROUTE)), (vec!["l".into()], vec!["r".into()]));
        assert!(p.hold.is_empty());

        let acked = ack(&acked, &p, &[LISTENER, ROUTE]);
        let p = plan_for(&target, &acked, together);
        assert_eq!(p.step, Step::Converged);
        assert_eq!(p.offer.version(), target.version());
    }
}

/// A route moves from cluster a to a new cluster b, and a is deleted: b first, the route after
/// b is acknowledged, a last.
#[test]
fn moving_a_route_adds_the_new_cluster_first_and_removes_the_old_one_last() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let target = snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081)]);
    let p = ads(&target, &before);
    assert_eq!(p.step, Step::Clusters);
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned()], "a is kept while r names it");
    assert_eq!(p.offer.resource(ROUTE, "r").unwrap().version(), before.resource(ROUTE, "r").unwrap().version());

    let acked = ack(&before, &p, &[CLUSTER, ENDPOINT]);
    let p = ads(&target, &acked);
    assert_eq!(p.step, Step::Acks);
    assert_eq!(p.offer.resource(ROUTE, "r").unwrap().version(), target.resource(ROUTE, "r").unwrap().version());
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned()]);

    let acked = ack(&acked, &p, &[ROUTE]);
    let p = ads(&target, &acked);
    assert_eq!(p.step, Step::Cleanup);
    assert_eq!(names(&p.offer, CLUSTER), vec!["b".to_owned()], "a goes once nothing the node holds names it");
    let acked = ack(&acked, &p, &[CLUSTER, ENDPOINT]);
    assert_eq!(ads(&target, &acked).step, Step::Converged);
}

/// A new generation midway restarts from what the node acknowledged.
#[test]
fn a_new_generation_midway_restarts_from_what_was_acknowledged() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let gen1 = snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081)]);
    let p = ads(&gen1, &before);
    let acked = ack(&before, &p, &[CLUSTER, ENDPOINT]);
    assert_eq!(ads(&gen1, &acked).step, Step::Acks);
    // Before the route goes out, the target changes again: r now splits between b and c.
    let gen2 = snap(vec![
        listener("l", 10000, "r"),
        route("r", &["b", "c"]),
        cluster("b"),
        cla("b", 8081),
        cluster("c"),
        cla("c", 8082),
    ]);
    let p = ads(&gen2, &acked);
    assert_eq!(p.step, Step::Clusters, "c must arrive before a route names it");
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]);
    assert_eq!(p.offer.resource(ROUTE, "r").unwrap().version(), before.resource(ROUTE, "r").unwrap().version());
}

/// The change of the issue-16 benchmark: a listener's stat_prefix, a route's virtual host, a
/// cluster's connect_timeout and an endpoint's port. It names nothing new, so on one stream
/// it all goes out at once and one round of ACKs converges.
#[test]
fn a_change_naming_nothing_new_goes_out_in_one_round_trip() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let target = snap(vec![listener_v("l", 10000, "r", 1), route_v("r", &["a"], 1), cluster_v("a", 2), cla("a", 8081)]);
    let p = ads(&target, &before);
    assert_eq!(p.step, Step::Acks);
    assert!(p.hold.is_empty());
    assert!(p.offer.same_content(&target), "everything at once");
    assert_eq!(ads(&target, &ack(&before, &p, &ALL)).step, Step::Converged);

    // On separate streams nothing orders the route before the listener: the listener, which
    // would activate at once with the route configuration the node holds, waits for its ACK.
    let p = plan_for(&target, &before, false);
    assert_eq!(p.step, Step::Routes);
    assert_eq!(p.offer.resource(LISTENER, "l").unwrap().version(), before.resource(LISTENER, "l").unwrap().version());
    assert_eq!(p.offer.resource(ROUTE, "r").unwrap().version(), target.resource(ROUTE, "r").unwrap().version());
    assert_eq!(p.offer.resource(CLUSTER, "a").unwrap().version(), target.resource(CLUSTER, "a").unwrap().version());
    let acked = ack(&before, &p, &ALL);
    let p = plan_for(&target, &acked, false);
    assert!(p.offer.same_content(&target));
}

/// Issue 16's first hole: a listener removed and added back while the node still holds (for
/// the draining old listener) the route configuration of the same name in its old form. The
/// re-added listener would activate at once with that form, so the new one goes first.
#[test]
fn a_readded_listener_never_activates_with_the_old_form_of_its_route() {
    // The node drains the removed l: it holds r (naming a) and a, but no listener; b, which
    // the new r names, it holds already.
    let draining = snap(vec![route("r", &["a"]), cluster("a"), cla("a", 8080), cluster("b"), cla("b", 8081)]);
    let target = snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081)]);
    let p = plan_for(&target, &draining, false);
    assert_eq!(p.step, Step::Routes, "separate streams: the listener waits for the new route's ACK");
    assert!(names(&p.offer, LISTENER).is_empty());
    assert_eq!(p.offer.resource(ROUTE, "r").unwrap().version(), target.resource(ROUTE, "r").unwrap().version());
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned()], "the old r still names a");
    let acked = ack(&draining, &p, &[ROUTE]);
    assert_eq!(names(&plan_for(&target, &acked, false).offer, LISTENER), vec!["l".to_owned()]);

    let p = ads(&target, &draining);
    assert_eq!(p.step, Step::Acks, "one stream: the route goes out ahead of the listener");
    assert_eq!((names(&p.offer, LISTENER), names(&p.offer, ROUTE)), (vec!["l".into()], vec!["r".into()]));
    assert_eq!(p.offer.resource(ROUTE, "r").unwrap().version(), target.resource(ROUTE, "r").unwrap().version());

    // If the new route names a cluster the node does not hold, both wait for it.
    let without_b = snap(vec![route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let p = ads(&target, &without_b);
    assert_eq!(p.step, Step::Clusters);
    assert!(names(&p.offer, LISTENER).is_empty());
    assert_eq!(p.offer.resource(ROUTE, "r").unwrap().version(), without_b.resource(ROUTE, "r").unwrap().version());

    // A route configuration of that name in a response still in flight counts as held.
    let no_r = snap(vec![cluster("a"), cla("a", 8080), cluster("b"), cla("b", 8081)]);
    let in_flight = Node {
        held: &no_r,
        maybe: &no_r,
        maybe_route: &|r| r == "r",
        keep: &|_| false,
        together: false,
        settled: false,
        scopes_draining: false,
    };
    assert!(names(&plan(&target, &in_flight).offer, LISTENER).is_empty(), "r may arrive in its old form");
    let none = Node { maybe_route: &|_| false, ..in_flight };
    assert_eq!(names(&plan(&target, &none).offer, LISTENER), vec!["l".to_owned()], "l warms until r arrives");
}

/// A NACK leaves the acknowledged state where it was: the plan offers the same again.
#[test]
fn a_nack_holds_the_plan_at_its_step() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let target = snap(vec![listener("l", 10001, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let p1 = ads(&target, &before);
    assert_eq!(p1.step, Step::Acks);
    // The node rejects the listener: nothing it acknowledged changes.
    let p2 = ads(&target, &before);
    assert_eq!((p2.step, p2.offer.version()), (p1.step, p1.offer.version()));
}

/// A cluster a response in flight (or a draining listener) may still use stays, and the
/// plan waits for the answers before it calls the node converged.
#[test]
fn clusters_still_in_use_stay_until_nothing_names_them() {
    let before = snap(vec![listener("l", 10000, "r"), route("r", &["a"]), cluster("a"), cla("a", 8080)]);
    let target = snap(vec![listener("l", 10000, "r"), route("r", &["b"]), cluster("b"), cla("b", 8081)]);
    let acked = ack(&before, &ads(&target, &before), &[CLUSTER, ENDPOINT]);
    let acked = ack(&acked, &ads(&target, &acked), &[ROUTE]);
    let in_use = Node {
        held: &acked,
        maybe: &acked,
        maybe_route: &|_| false,
        keep: &|c| c == "a",
        together: true,
        settled: false,
        scopes_draining: false,
    };
    let p = plan(&target, &in_use);
    assert_eq!(p.step, Step::Acks);
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(names(&p.offer, ENDPOINT), vec!["a".to_owned(), "b".to_owned()], "with its endpoints");
    // Kept for a draining listener once everything is answered: the node is converged.
    let p = plan(&target, &Node { settled: true, ..in_use });
    assert_eq!(p.step, Step::Converged);
    assert_eq!(names(&p.offer, CLUSTER), vec!["a".to_owned(), "b".to_owned()]);
    assert_eq!(ads(&target, &acked).step, Step::Cleanup);
}

/// A target over a small universe: listeners l0-l1, each with its own route configuration
/// naming some of clusters c0-c3, plus clusters nothing names. `v` varies the content without
/// changing what anything names: endpoint ports, and the tags of listeners, routes and
/// clusters.
fn universe_target(routes: &[(usize, Vec<usize>)], extra_clusters: &[usize], v: &Variant) -> Snapshot {
    let cl = |i: usize| format!("c{i}");
    let mut used: BTreeSet<usize> = extra_clusters.iter().copied().collect();
    let mut rs = Vec::new();
    for (i, (l, cs)) in routes.iter().enumerate() {
        let cs: Vec<String> = cs.iter().map(|c| cl(*c)).collect();
        let refs: Vec<&str> = cs.iter().map(String::as_str).collect();
        rs.push(route_v(&format!("r{i}"), &refs, v.tags[1]));
        rs.push(listener_v(&format!("l{l}"), 10000 + *l as u16, &format!("r{i}"), v.tags[0]));
        used.extend(routes[i].1.iter().copied());
    }
    for c in used {
        rs.push(cluster_v(&cl(c), v.tags[2]));
        rs.push(cla(&cl(c), v.ports[c]));
    }
    snap(rs)
}

/// Content that can change without changing what names what.
#[derive(Debug, Clone)]
pub(crate) struct Variant {
    ports: [u16; 4],
    tags: [u32; 3],
}

fn arb_variant() -> impl Strategy<Value = Variant> {
    (proptest::array::uniform4(8080u16..8083), proptest::array::uniform3(1u32..3))
        .prop_map(|(ports, tags)| Variant { ports, tags })
}

type Shape = (Vec<(usize, Vec<usize>)>, Vec<usize>);

fn arb_shape() -> impl Strategy<Value = Shape> {
    (
        // Up to two listeners, each with its own route naming 1-2 of four clusters.
        proptest::collection::btree_map(0usize..2, proptest::collection::btree_set(0usize..4, 1..3), 0..3),
        proptest::collection::vec(0usize..4, 0..2),
    )
        .prop_map(|(ls, extra)| (ls.into_iter().map(|(l, cs)| (l, cs.into_iter().collect())).collect(), extra))
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
    (arb_shape(), arb_variant()).prop_map(|((routes, extra), v)| universe_target(&routes, &extra, &v))
}

fn version_of(s: &Snapshot, ty: &str, name: &str) -> Option<Arc<str>> {
    s.resource(ty, name).map(|r| r.version().clone())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Over random targets and random acknowledgements (any subset of types, in any order;
    /// a type left out is a NACK or silence), on one stream or several:
    /// - the node is never offered a route naming a cluster it does not hold with its
    ///   endpoints;
    /// - never offered a cluster set that drops a cluster a route it holds (reachable from
    ///   its listeners) still names;
    /// - never offered a listener, new or changed, naming a route configuration it holds in
    ///   another form than the target's, unless that form goes out ahead of it on the same
    ///   stream;
    /// - and when the node keeps acknowledging, it converges.
    #[test]
    fn never_a_route_before_its_cluster_nor_a_cluster_removed_under_a_route(
        targets in proptest::collection::vec(arb_target(), 1..4),
        acks in proptest::collection::vec(proptest::collection::vec(0usize..4, 0..4), 1..24),
        together in any::<bool>(),
    ) {
        let mut acked = Snapshot::default();
        let mut ti = 0;
        for (step, types) in acks.iter().enumerate() {
            if step % 6 == 5 && ti + 1 < targets.len() {
                ti += 1;
            }
            let target = &targets[ti];
            let p = plan_for(target, &acked, together);
            // Routes offered name only clusters the node already holds, with endpoints.
            let sent_routes = if p.hold.contains(&ROUTE) { Vec::new() } else { names(&p.offer, ROUTE) };
            for r in sent_routes {
                if version_of(&acked, ROUTE, &r) == version_of(&p.offer, ROUTE, &r) {
                    continue;
                }
                for c in clusters_named(&p.offer, std::iter::once(r.clone())) {
                    prop_assert!(acked.resource(CLUSTER, &c).is_some(), "route {r} offered naming cluster {c} the node does not hold");
                    prop_assert!(acked.resource(ENDPOINT, &c).is_some(), "route {r} offered naming cluster {c} whose \
                        endpoints the node does not hold");
                }
            }
            // Clusters offered include every cluster a route the node holds (and its listeners
            // reach) names.
            let reachable: Vec<String> = acked
                .get(LISTENER)
                .into_iter()
                .flat_map(|s| s.resources())
                .flat_map(|l| l.references().names(ROUTE).map(str::to_owned).collect::<Vec<_>>())
                .collect();
            for c in clusters_named(&acked, reachable.into_iter()) {
                prop_assert!(p.offer.resource(CLUSTER, &c).is_some(), "cluster {c} removed while a held route names it (step {:?})", p.step);
            }
            // A listener offered new or changed activates with the route configuration the
            // node holds under the name it gives, if any: that must be the target's form.
            let sent_listeners = if p.hold.contains(&LISTENER) { Vec::new() } else { names(&p.offer, LISTENER) };
            for l in sent_listeners {
                if version_of(&acked, LISTENER, &l) == version_of(&p.offer, LISTENER, &l) {
                    continue;
                }
                let offered = p.offer.resource(LISTENER, &l).unwrap();
                for r in offered.references().names(ROUTE) {
                    let Some(held) = version_of(&acked, ROUTE, r) else { continue };
                    let new = version_of(target, ROUTE, r);
                    let ahead = together && version_of(&p.offer, ROUTE, r) == new;
                    prop_assert!(Some(&held) == new.as_ref() || ahead,
                        "listener {l} offered while the node holds route {r} in an old form (together: {together})");
                }
            }
            let types: Vec<&str> = types.iter().copied().collect::<BTreeSet<usize>>().into_iter().map(|i| ALL[i]).collect();
            acked = ack(&acked, &p, &types);
        }
        // Then acknowledge everything until it converges (at most four rounds).
        let target = &targets[ti];
        for _ in 0..4 {
            let p = plan_for(target, &acked, together);
            acked = ack(&acked, &p, &ALL);
        }
        prop_assert_eq!(plan_for(target, &acked, together).step, Step::Converged);
    }

    /// Issue 16: a change that names nothing new to the node (any listener, route, cluster
    /// and endpoint content may change, nothing names anything it did not) goes out in one
    /// round trip on one stream: the whole target is offered at once, and one round of ACKs
    /// converges.
    #[test]
    fn a_change_with_no_new_references_takes_one_round_trip(
        (routes, extra) in arb_shape(),
        before in arb_variant(),
        after in arb_variant(),
    ) {
        let old = universe_target(&routes, &extra, &before);
        let new = universe_target(&routes, &extra, &after);
        let p = ads(&new, &old);
        prop_assert!(p.hold.is_empty(), "held: {:?}", p.hold);
        prop_assert!(p.offer.same_content(&new), "step {:?}: not everything offered at once", p.step);
        let acked = ack(&old, &p, &ALL);
        prop_assert_eq!(ads(&new, &acked).step, Step::Converged);
    }
}

/// A listener on `port` routing by scope (scoped RDS over ADS).
fn scoped_listener(name: &str, port: u16) -> Resource {
    http_listener(
        name,
        port,
        0,
        "scoped_routes:\n        name: s\n        scope_key_builder: {fragments: [{header_value_extractor: {name: \":authority\", \
         index: 0}}]}\n        rds_config_source: {ads: {}}\n        scoped_rds: {scoped_rds_config_source: {ads: {}}}",
    )
}

fn scope(name: &str, routes: &str) -> Resource {
    one(&format!(
        "\"@type\": type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration\nname: {name}\n\
         route_configuration_name: {routes}\nkey: {{fragments: [{{string_key: {name}}}]}}\n"
    ))
}

/// Scoped RDS is full state: a scope missing from a response is gone at once. A scope the
/// target drops under an unchanged listener goes; the scopes of a listener that the target
/// changes to route otherwise (or drops) stay until the node holds the new listener and, with
/// `scopes_draining`, until the old one drained: requests on its connections meanwhile still
/// find their scope.
#[test]
fn scopes_stay_while_a_listener_leaves_them() {
    let base = [route("r1", &["a"]), route("r2", &["a"]), cluster("a"), cla("a", 8080)];
    let with = |mut rs: Vec<Resource>| {
        rs.extend(base.iter().cloned());
        snap(rs)
    };
    let held = with(vec![scoped_listener("l", 10000), scope("s1", "r1"), scope("s2", "r2")]);
    assert!(held.resource(LISTENER, "l").unwrap().references().routes_by_scope());
    // The listener stays scoped; s2 goes.
    let target = with(vec![scoped_listener("l", 10000), scope("s1", "r1")]);
    assert_eq!(names(&plan_for(&target, &held, true).offer, SCOPED_ROUTE), ["s1"]);
    // The listener routes by one configuration now: both scopes stay while the node holds
    // the scoped one, and go once it holds the new one.
    let target = with(vec![listener("l", 10000, "r1")]);
    assert_eq!(names(&plan_for(&target, &held, true).offer, SCOPED_ROUTE), ["s1", "s2"]);
    let moved = with(vec![listener("l", 10000, "r1"), scope("s1", "r1"), scope("s2", "r2")]);
    assert!(names(&plan_for(&target, &moved, true).offer, SCOPED_ROUTE).is_empty());
    // ... unless the scoped listener still drains.
    let keep = |_: &str| true;
    let draining = Node {
        held: &moved,
        maybe: &moved,
        maybe_route: &|_| false,
        keep: &keep,
        together: true,
        settled: true,
        scopes_draining: true,
    };
    assert_eq!(names(&plan(&target, &draining).offer, SCOPED_ROUTE), ["s1", "s2"]);
    // What routes by scope names the route configurations of its scopes: the node asks for them.
    let wanted = Wanted::of(&with(vec![scoped_listener("l", 10000), scope("s1", "r1")]));
    assert_eq!(wanted.routes.into_iter().collect::<Vec<_>>(), ["r1"]);
}

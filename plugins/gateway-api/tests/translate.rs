//! The plugin called natively on small documents: what it emits and the conditions it gives.

mod common;

use common::run;

const CASE: &str = "
apiVersion: v1
kind: Namespace
metadata: {name: infra, labels: {team: a}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: xdst
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: infra}
spec: {ports: [{name: first, port: 8080, targetPort: 3000}, {name: h2, port: 8081, appProtocol: kubernetes.io/h2c}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: infra, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [127.0.0.1]}, {addresses: [127.0.0.2], conditions: {ready: false}}]
ports: [{name: first, port: 40001}, {name: h2, port: 40002}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: infra}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs: [{name: web, port: 8080}]
  - matches: [{path: {type: Exact, value: /bad}}]
    backendRefs: [{name: nope, port: 8080}]
";

#[test]
fn a_route_reaches_its_service_and_a_bad_backend_is_a_condition() {
    let (out, statuses) = run(CASE, r#"{"portOffset": 10000}"#);
    let names: Vec<(&str, &str)> =
        out.resources.iter().map(|r| (r.type_url.rsplit('.').next().unwrap(), r.name.as_str())).collect();
    assert_eq!(
        names,
        [
            ("Listener", "infra/gw/80"),
            ("RouteConfiguration", "infra/gw/80"),
            ("Cluster", "infra/web:8080"),
            ("ClusterLoadAssignment", "infra/web:8080"),
        ]
    );
    let parents = &statuses["HTTPRoute/infra/r"]["parents"][0];
    let conditions: Vec<(&str, &str, &str)> = parents["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap(), c["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(conditions, [("Accepted", "True", "Accepted"), ("ResolvedRefs", "False", "BackendNotFound")]);
    assert_eq!(statuses["Gateway/infra/gw"]["listeners"][0]["attachedRoutes"], 1);
    assert!(out.diagnostics.iter().any(|d| d.document.as_deref() == Some("HTTPRoute/infra/r")));
}

#[test]
fn routes_from_other_namespaces_need_the_listener_to_allow_them() {
    let other = CASE
        .replace(
            "kind: HTTPRoute\nmetadata: {name: r, namespace: infra}",
            "kind: HTTPRoute\nmetadata: {name: r, namespace: apps}",
        )
        .replace("parentRefs: [{name: gw}]", "parentRefs: [{name: gw, namespace: infra}]");
    let (out, statuses) = run(&other, "");
    let accepted = &statuses["HTTPRoute/apps/r"]["parents"][0]["conditions"][0];
    assert_eq!(
        (accepted["status"].as_str(), accepted["reason"].as_str()),
        (Some("False"), Some("NotAllowedByListeners"))
    );
    assert!(!out.resources.iter().any(|r| r.type_url.ends_with("Cluster")), "nothing routes to web");
}

#[test]
fn gateways_of_other_classes_are_left_alone() {
    let (out, statuses) = run(&CASE.replace("gatewayClassName: xdst", "gatewayClassName: other"), "");
    assert!(out.resources.is_empty());
    assert!(statuses.is_empty());
}

/// The Host header reaches the backend as the client sent it (`foo.com:8080`): nothing strips
/// its port, and virtual hosts match without it. A redirect that keeps the request's host and
/// leaves the port out of the URL gets a twin, first, for Hosts that carry a port, naming the
/// scheme's port so Envoy does not copy the Host's into the URL.
#[test]
fn the_host_keeps_its_port_and_routes_match_without_it() {
    use prost::Message as _;
    use xdst_guest::Body;
    use xdst_guest::envoy::envoy::config::listener::v3::Listener;
    use xdst_guest::envoy::envoy::config::route::v3::{RouteConfiguration, route::Action};
    use xdst_guest::envoy::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

    let case = CASE.replace(
        "  - matches: [{path: {type: Exact, value: /bad}}]",
        "  - matches: [{path: {type: Exact, value: /secure}}]\n    \
         filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]\n  \
         - matches: [{path: {type: Exact, value: /bad}}]",
    );
    let (out, _) = run(&case, "");
    let proto = |kind: &str| {
        let r = out.resources.iter().find(|r| r.type_url.ends_with(kind)).unwrap();
        let Body::Proto(bytes) = &r.body else { panic!("{kind} in protobuf") };
        bytes.clone()
    };
    let listener = Listener::decode(&proto("listener.v3.Listener")[..]).unwrap();
    let hcm = listener.filter_chains[0].filters[0].config_type.clone().unwrap();
    let xdst_guest::envoy::envoy::config::listener::v3::filter::ConfigType::TypedConfig(any) = hcm else {
        panic!("a typed HttpConnectionManager")
    };
    let hcm = HttpConnectionManager::decode(&any.value[..]).unwrap();
    assert!(hcm.strip_port_mode.is_none(), "the Host header keeps its port: {:?}", hcm.strip_port_mode);
    assert!(!hcm.strip_matching_host_port);

    let config = RouteConfiguration::decode(&proto("RouteConfiguration")[..]).unwrap();
    assert!(config.ignore_port_in_host_matching);
    let routes = &config.virtual_hosts[0].routes;
    let redirects: Vec<(u32, Vec<&str>)> = routes
        .iter()
        .filter_map(|r| match &r.action {
            Some(Action::Redirect(d)) => {
                Some((d.port_redirect, r.r#match.as_ref().unwrap().headers.iter().map(|h| h.name.as_str()).collect()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(redirects, [(443, vec![":authority"]), (0, vec![])], "{routes:#?}");
}

/// Issue 36, item 6 (in part): a document's `metadata.generation` comes back as
/// `observedGeneration` on every condition of its status (a route's per parent, a Gateway's
/// and its listeners'); without one, conditions carry none.
#[test]
fn conditions_carry_the_generation_they_were_worked_out_for() {
    let case = CASE
        .replace("metadata: {name: r, namespace: infra}", "metadata: {name: r, namespace: infra, generation: 7}")
        .replace("metadata: {name: gw, namespace: infra}", "metadata: {name: gw, namespace: infra, generation: 2}");
    let (_, statuses) = run(&case, "null");
    let generations = |list: &serde_json::Value| -> Vec<i64> {
        list.as_array().unwrap().iter().map(|c| c["observedGeneration"].as_i64().unwrap_or(-1)).collect()
    };
    assert_eq!(generations(&statuses["HTTPRoute/infra/r"]["parents"][0]["conditions"]), [7, 7]);
    let gw = &statuses["Gateway/infra/gw"];
    assert!(generations(&gw["conditions"]).iter().all(|g| *g == 2), "{gw}");
    assert!(generations(&gw["listeners"][0]["conditions"]).iter().all(|g| *g == 2), "{gw}");
    let (_, statuses) = run(CASE, "null");
    assert!(statuses["HTTPRoute/infra/r"]["parents"][0]["conditions"][0].get("observedGeneration").is_none());
}

/// Issue 36, item 6 (in part), as the upstream `GatewayInvalidRouteKind` test reads it: a
/// listener's `supportedKinds` are its protocol's route kinds narrowed to `allowedRoutes.kinds`,
/// and a kind it cannot take is `ResolvedRefs: False`, `InvalidRouteKinds`; the GatewayClass of
/// this controller is `Accepted` and `SupportedVersion`; a Gateway says where it is served.
#[test]
fn listeners_say_which_route_kinds_they_take_and_classes_are_accepted() {
    let gateway = |name: &str, kinds: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: infra}}\n\
             spec:\n  gatewayClassName: xdst\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, allowedRoutes: \
             {{namespaces: {{from: All}}{kinds}}}}}\n---\n"
        )
    };
    let case = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: xdst}}\nspec: \
         {{controllerName: xdst.dev/gateway-controller}}\n---\n{}{}{}",
        gateway("only-invalid", ", kinds: [{kind: InvalidRoute}]"),
        gateway("invalid-and-http", ", kinds: [{kind: InvalidRoute}, {kind: HTTPRoute}]"),
        gateway("default", ""),
    );
    let (_, statuses) = run(&case, "null");
    let listener = |gw: &str| statuses[&format!("Gateway/infra/{gw}")]["listeners"][0].clone();
    let kinds = |gw: &str| -> Vec<String> {
        let l = listener(gw);
        l["supportedKinds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| format!("{}/{}", k["group"].as_str().unwrap(), k["kind"].as_str().unwrap()))
            .collect()
    };
    let resolved = |gw: &str| {
        let l = listener(gw);
        common::conditions(&l["conditions"]).into_iter().find(|(t, _, _)| t == "ResolvedRefs").unwrap()
    };
    assert!(kinds("only-invalid").is_empty());
    assert_eq!(kinds("invalid-and-http"), ["gateway.networking.k8s.io/HTTPRoute"]);
    assert_eq!(kinds("default"), ["gateway.networking.k8s.io/HTTPRoute", "gateway.networking.k8s.io/GRPCRoute"]);
    for gw in ["only-invalid", "invalid-and-http"] {
        assert_eq!(resolved(gw), ("ResolvedRefs".into(), "False".into(), "InvalidRouteKinds".into()), "{gw}");
        assert_eq!(listener(gw)["attachedRoutes"], 0);
    }
    assert_eq!(resolved("default").1, "True");
    let class = common::conditions(&statuses["GatewayClass/xdst"]["conditions"]);
    assert_eq!(
        class,
        [
            ("Accepted".into(), "True".into(), "Accepted".into()),
            ("SupportedVersion".into(), "True".into(), "SupportedVersion".into())
        ]
    );
    assert_eq!(statuses["Gateway/infra/default"]["addresses"][0]["type"], "IPAddress");
}

/// Contract 0.3.0 with `nodes: per-gateway`: each Gateway's listener and routes name its node
/// group, and a Service's cluster and endpoints name the groups of every Gateway whose routes
/// use it; with `nodes: all` nothing names a group (every group gets everything).
#[test]
fn per_gateway_resources_name_their_node_groups() {
    let two = format!(
        "{CASE}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw2, namespace: infra}}
spec:
  gatewayClassName: xdst
  listeners: [{{name: http, port: 81, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r2, namespace: infra}}
spec:
  parentRefs: [{{name: gw2}}]
  rules: [{{backendRefs: [{{name: web, port: 8080}}, {{name: web, port: 8081}}]}}]
"
    );
    let tagged = |config: &str| -> Vec<(String, Vec<String>)> {
        let (out, _) = run(&two, config);
        out.resources
            .iter()
            .map(|r| (format!("{} {}", r.type_url.rsplit('.').next().unwrap(), r.name), r.node_groups.clone()))
            .collect()
    };
    let g = |groups: &[&str]| groups.iter().map(|g| g.to_string()).collect::<Vec<_>>();
    let per_gateway = tagged(r#"{"nodes": "per-gateway"}"#);
    let expect = [
        ("Listener infra/gw/80", g(&["infra/gw"])),
        ("RouteConfiguration infra/gw/80", g(&["infra/gw"])),
        ("Listener infra/gw2/81", g(&["infra/gw2"])),
        ("RouteConfiguration infra/gw2/81", g(&["infra/gw2"])),
        ("Cluster infra/web:8080", g(&["infra/gw", "infra/gw2"])),
        ("ClusterLoadAssignment infra/web:8080", g(&["infra/gw", "infra/gw2"])),
        ("Cluster infra/web:8081", g(&["infra/gw2"])),
        ("ClusterLoadAssignment infra/web:8081", g(&["infra/gw2"])),
    ];
    let expect: Vec<(String, Vec<String>)> = expect.into_iter().map(|(n, g)| (n.to_owned(), g)).collect();
    assert_eq!(per_gateway, expect);
    let all = tagged("null");
    assert_eq!(all.len(), expect.len());
    assert!(all.iter().all(|(_, groups)| groups.is_empty()), "{all:?}");
}

/// Design 021, "Hostile teams": a Gateway annotated `xdst.dev/route-by-host: "true"` routes its
/// plain HTTP port by exact host however few hostnames it has, and a route that would need a
/// wildcard virtual host there (no hostname, or a wildcard one) is not accepted, with a status
/// that says why, instead of changing the port's form (and so its Listener) for everyone.
#[test]
fn a_gateway_that_routes_by_host_keeps_its_form_whatever_a_team_adds() {
    let pinned = CASE.replace(
        "kind: Gateway\nmetadata: {name: gw, namespace: infra}",
        "kind: Gateway\nmetadata: {name: gw, namespace: infra, annotations: {xdst.dev/route-by-host: \"true\"}}",
    );
    let exact = pinned.replace("  parentRefs: [{name: gw}]", "  parentRefs: [{name: gw}]\n  hostnames: [a.example]");
    let listener = |out: &xdst_guest::TranslateResponse| {
        let l = out.resources.iter().find(|r| r.type_url.ends_with("listener.v3.Listener")).unwrap();
        format!("{:?}", l.body)
    };
    let names = |out: &xdst_guest::TranslateResponse| -> Vec<String> {
        out.resources.iter().map(|r| format!("{} {}", r.type_url.rsplit('.').next().unwrap(), r.name)).collect()
    };

    // One exact hostname is enough (the platform's threshold is 32): the port is scoped.
    let (out, statuses) = run(&exact, "");
    let scoped = names(&out);
    assert!(scoped.contains(&"ScopedRouteConfiguration infra/gw/80/a.example".to_owned()), "{scoped:?}");
    assert!(scoped.contains(&"RouteConfiguration infra/gw/80/a.example".to_owned()), "{scoped:?}");
    assert!(!scoped.contains(&"RouteConfiguration infra/gw/80".to_owned()), "{scoped:?}");
    assert_eq!(common::conditions(&statuses["HTTPRoute/infra/r"]["parents"][0]["conditions"])[0].2, "Accepted");
    let form = listener(&out);

    // A team adds a route with no hostname, and one with a wildcard: neither is accepted, the
    // Listener is byte for byte the same, and the exact route still serves.
    let hostile = format!(
        "{exact}---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: any, namespace: infra}}\n\
         spec:\n  parentRefs: [{{name: gw}}]\n  rules: [{{backendRefs: [{{name: web, port: 8080}}]}}]\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: star, namespace: infra}}\n\
         spec:\n  parentRefs: [{{name: gw}}]\n  hostnames: ['*.example']\n  rules: [{{backendRefs: [{{name: web, port: 8080}}]}}]\n"
    );
    let (out, statuses) = run(&hostile, "");
    assert_eq!(listener(&out), form, "the port changed form");
    assert_eq!(names(&out), scoped);
    for (route, why) in [("any", "names no hostname"), ("star", "\"*.example\", a wildcard")] {
        let parent = &statuses[&format!("HTTPRoute/infra/{route}")]["parents"][0]["conditions"][0];
        assert_eq!((parent["status"].as_str(), parent["reason"].as_str()), (Some("False"), Some("UnsupportedValue")));
        let message = parent["message"].as_str().unwrap();
        assert!(message.contains("xdst.dev/route-by-host") && message.contains(why), "{message}");
    }
    assert_eq!(statuses["Gateway/infra/gw"]["listeners"][0]["attachedRoutes"], 1);

    // With the last exact route gone, the port keeps its form (no scope: every host 404s).
    let (out, _) = run(&pinned.replace("  parentRefs: [{name: gw}]", "  parentRefs: [{name: nobody}]"), "");
    assert_eq!(listener(&out), form, "the port changed form with no route");
    assert!(!names(&out).iter().any(|n| n.starts_with("RouteConfiguration")), "{:?}", names(&out));

    // Without the annotation the same routes are accepted and the port is one configuration.
    let (out, statuses) =
        run(&hostile.replace(", annotations: {xdst.dev/route-by-host: \"true\"}", ""), r#"{"routeScopesFrom": 1}"#);
    assert!(names(&out).contains(&"RouteConfiguration infra/gw/80".to_owned()), "{:?}", names(&out));
    assert_ne!(listener(&out), form);
    assert_eq!(common::conditions(&statuses["HTTPRoute/infra/any"]["parents"][0]["conditions"])[0].2, "Accepted");
}

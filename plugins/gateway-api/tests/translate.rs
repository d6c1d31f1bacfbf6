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

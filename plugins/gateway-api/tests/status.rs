//! The status conditions of the upstream conformance cases that assert them, worked out by the
//! plugin (called natively) on each case's manifests as shipped, `{GATEWAY_CLASS_NAME}`
//! replaced by `xdst`. The expected conditions are those of the upstream Go tests of the same
//! names (`conformance/tests/<case>.go` at 4564255).

use std::collections::BTreeMap;
use std::path::PathBuf;

mod common;

use serde_json::Value;

fn statuses(case: &str) -> BTreeMap<String, Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/gateway-api-conformance").join(case);
    let text = std::fs::read_to_string(dir.join("manifests.yaml"))
        .unwrap_or_else(|e| panic!("{}: {e} (is ../shared/gateway-api-conformance there?)", dir.display()))
        .replace("{GATEWAY_CLASS_NAME}", "xdst");
    common::run(&text, "null").1
}

/// `(type, status, reason)` of a route's conditions toward its first parent.
fn route(case: &str, id: &str) -> Vec<(String, String, String)> {
    let all = statuses(case);
    let status = all.get(id).unwrap_or_else(|| panic!("{case}: no status for {id}: {:?}", all.keys()));
    common::conditions(&status["parents"][0]["conditions"])
}

fn has(conditions: &[(String, String, String)], kind: &str, status: &str, reason: &str) -> bool {
    conditions.iter().any(|(k, s, r)| k == kind && s == status && r == reason)
}

/// Routes attached to each listener of a Gateway.
fn attached(case: &str, gateway: &str) -> Vec<u64> {
    statuses(case)[gateway]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["attachedRoutes"].as_u64().unwrap())
        .collect()
}

const INFRA: &str = "gateway-conformance-infra";

#[test]
fn invalid_backend_refs_are_resolved_refs_false_with_the_upstream_reason() {
    for (case, route_name, reason) in [
        ("httproute-invalid-nonexistent-backendref", "invalid-nonexistent-backend-ref", "BackendNotFound"),
        ("httproute-invalid-backendref-unknown-kind", "invalid-backend-ref-unknown-kind", "InvalidKind"),
        ("httproute-invalid-cross-namespace-backend-ref", "invalid-cross-namespace-backend-ref", "RefNotPermitted"),
        ("httproute-invalid-reference-grant", "reference-grant", "RefNotPermitted"),
        ("httproute-partially-invalid-via-invalid-reference-grant", "invalid-reference-grant", "RefNotPermitted"),
    ] {
        let c = route(case, &format!("HTTPRoute/{INFRA}/{route_name}"));
        assert!(has(&c, "ResolvedRefs", "False", reason), "{case}: {c:?}");
        assert!(
            has(&c, "Accepted", "True", "Accepted"),
            "{case}: an invalid reference does not unaccept the route: {c:?}"
        );
    }
}

#[test]
fn parent_refs_that_match_no_listener_are_not_accepted_and_attach_nothing() {
    for (case, id, gateway, reason) in [
        (
            "httproute-invalid-parentref-not-matching-listener-port",
            "httproute-listener-not-matching-route-port",
            "same-namespace",
            "NoMatchingParent",
        ),
        (
            "httproute-invalid-parentref-not-matching-section-name",
            "httproute-listener-not-matching-section-name",
            "same-namespace",
            "NoMatchingParent",
        ),
        (
            "httproute-invalid-parentref-section-name-not-matching-port",
            "httproute-listener-section-name-not-matching-port",
            "gateway-with-one-not-matching-port-and-section-name-route",
            "NoMatchingParent",
        ),
    ] {
        let c = route(case, &format!("HTTPRoute/{INFRA}/{id}"));
        assert!(has(&c, "Accepted", "False", reason), "{case}: {c:?}");
        assert!(attached(case, &format!("Gateway/{INFRA}/{gateway}")).iter().all(|n| *n == 0), "{case}");
    }
    let case = "httproute-invalid-cross-namespace-parent-ref";
    let c = route(case, "HTTPRoute/gateway-conformance-web-backend/invalid-cross-namespace-parent-ref");
    assert!(has(&c, "Accepted", "False", "NotAllowedByListeners"), "{case}: {c:?}");
    assert!(attached(case, &format!("Gateway/{INFRA}/same-namespace")).iter().all(|n| *n == 0), "{case}");
}

#[test]
fn attached_routes_count_only_routes_whose_hostnames_intersect() {
    let case = "httproute-hostname-intersection";
    assert_eq!(attached(case, &format!("Gateway/{INFRA}/httproute-hostname-intersection")), [2, 1, 1]);
}

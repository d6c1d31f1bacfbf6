//! Issue 49, item 2: the shared address's ports are the platform's to claim. A Gateway xdst
//! marks as a team's (`xdst.dev/written-by: team`) does not bind the shared address, and
//! never wins a port over the platform's Gateway, however old it says it is; the plugin's
//! `sharedAddressNamespaces` lets a namespace's Gateways claim like the platform's.

mod common;

use std::collections::BTreeMap;

use serde_json::Value;

/// The platform's Gateway `infra/gw` (created now) and team-a's `team-a/squat` (marked a
/// team's, "created" long before) on the same port; `squat_address` gives team-a's a
/// `spec.addresses` entry.
fn gateways(squat_address: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra, creationTimestamp: '2026-12-06T10:00:00Z'}}
spec:
  gatewayClassName: xdst
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: squat
  namespace: team-a
  creationTimestamp: '2001-01-01T00:00:00Z'
  annotations: {{xdst.dev/written-by: team}}
spec:
  gatewayClassName: xdst
  listeners: [{{name: http, port: 80, protocol: HTTP}}]{squat_address}
"
    )
}

/// `(Accepted status, its reason, its message)` of a Gateway's first listener.
fn accepted(statuses: &BTreeMap<String, Value>, gateway: &str) -> (String, String, String) {
    let conditions = &statuses[gateway]["listeners"][0]["conditions"];
    let c = conditions.as_array().unwrap().iter().find(|c| c["type"] == "Accepted").unwrap();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    (s("status"), s("reason"), s("message"))
}

#[test]
fn a_team_s_gateway_does_not_take_the_shared_address() {
    let config = r#"{"address": "127.0.0.1"}"#;
    let (_, statuses) = common::run(&gateways(""), config);
    assert_eq!(accepted(&statuses, "Gateway/infra/gw").0, "True");
    let (status, reason, message) = accepted(&statuses, "Gateway/team-a/squat");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "PortUnavailable"), "{message}");
    assert!(message.contains("sharedAddressNamespaces"), "{message}");

    // Through spec.addresses: the shared address is still the shared address, and the
    // platform's Gateway comes first wherever two want one address and port.
    let (_, statuses) = common::run(&gateways("\n  addresses: [{value: 127.0.0.1}]"), config);
    assert_eq!(accepted(&statuses, "Gateway/infra/gw").0, "True");
    assert_eq!(accepted(&statuses, "Gateway/team-a/squat").1, "PortUnavailable");
    let config = r#"{"address": "fromSpec"}"#;
    let yaml = gateways("\n  addresses: [{value: 127.0.0.9}]").replace(
        "listeners: [{name: http, port: 80, protocol: HTTP}]\n---",
        "listeners: [{name: http, port: 80, protocol: HTTP}]\n  addresses: [{value: 127.0.0.9}]\n---",
    );
    let (_, statuses) = common::run(&yaml, config);
    assert_eq!(accepted(&statuses, "Gateway/infra/gw").0, "True", "the platform's comes first");
    let (_, reason, message) = accepted(&statuses, "Gateway/team-a/squat");
    assert_eq!(reason, "PortUnavailable");
    assert!(message.contains("is taken by Gateway/infra/gw"), "{message}");

    // An address of its own: served.
    let (_, statuses) = common::run(&gateways("\n  addresses: [{value: 127.0.0.7}]"), r#"{"address": "127.0.0.1"}"#);
    assert_eq!(accepted(&statuses, "Gateway/team-a/squat").0, "True");
}

#[test]
fn shared_address_namespaces_let_a_team_claim_by_age() {
    let config = r#"{"address": "127.0.0.1", "sharedAddressNamespaces": ["team-a"]}"#;
    let (_, statuses) = common::run(&gateways(""), config);
    assert_eq!(accepted(&statuses, "Gateway/team-a/squat").0, "True", "allowed, and older");
    assert_eq!(accepted(&statuses, "Gateway/infra/gw").1, "PortUnavailable");
    let (_, statuses) = common::run(&gateways(""), r#"{"address": "127.0.0.1", "sharedAddressNamespaces": ["*"]}"#);
    assert_eq!(accepted(&statuses, "Gateway/team-a/squat").0, "True");
}

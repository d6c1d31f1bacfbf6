//! HTTPS listeners: what each kind of bad `certificateRefs` entry makes of the listener's
//! conditions, and what a good one becomes (an SDS Secret, a filter chain per listener).

mod common;

use serde_json::Value;
use xdst_guest::Body;

/// A certificate and key as a `kubernetes.io/tls` Secret carries them (base64 of PEM). The
/// plugin checks the shape only; Envoy checks the key.
const CRT: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
const KEY: &str = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUIKLS0tLS1FTkQgUFJJVkFURSBLRVktLS0tLQo=";

fn gateway(refs: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: xdst
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    tls: {{certificateRefs: [{refs}]}}
  - name: named
    port: 443
    hostname: a.example.org
    protocol: HTTPS
    tls: {{certificateRefs: [{{name: good}}]}}
---
apiVersion: v1
kind: Secret
metadata: {{name: good, namespace: infra}}
type: kubernetes.io/tls
data: {{tls.crt: {CRT}, tls.key: {KEY}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: opaque, namespace: infra}}
type: Opaque
data: {{tls.crt: {CRT}, tls.key: {KEY}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: elsewhere, namespace: other}}
type: kubernetes.io/tls
data: {{tls.crt: {CRT}, tls.key: {KEY}}}
"
    )
}

/// `(type, status, reason)` of the first listener's conditions.
fn first_listener(statuses: &std::collections::BTreeMap<String, Value>) -> Vec<(String, String, String)> {
    common::conditions(&statuses["Gateway/infra/gw"]["listeners"][0]["conditions"])
}

#[test]
fn bad_certificate_refs_are_listener_conditions_and_the_other_listener_still_serves() {
    let grant = "---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}]
  to: [{group: '', kind: Secret}]
";
    for (refs, extra, reason) in [
        ("{name: missing}", "", "InvalidCertificateRef"),
        ("{name: opaque}", "", "InvalidCertificateRef"),
        ("{group: example.com, kind: Vault, name: good}", "", "InvalidCertificateRef"),
        ("{name: elsewhere, namespace: other}", "", "RefNotPermitted"),
        ("{name: elsewhere, namespace: other}", grant, "ResolvedRefs"),
        ("{name: good}", "", "ResolvedRefs"),
    ] {
        let yaml = gateway(refs) + extra;
        let (out, statuses) = common::run(&yaml, "null");
        let c = first_listener(&statuses);
        let ok = reason == "ResolvedRefs";
        let want = (String::from("ResolvedRefs"), String::from(if ok { "True" } else { "False" }), reason.to_owned());
        assert!(c.contains(&want), "{refs}: {c:?}");
        let programmed = c.iter().any(|(k, s, _)| k == "Programmed" && s == "True");
        assert_eq!(programmed, ok, "{refs}: {c:?}");

        // The second listener keeps its chain; the first has one only when its certificate
        // resolves. Secrets are served once each, by name.
        let listener = out.resources.iter().find(|r| r.type_url.ends_with("listener.v3.Listener")).unwrap();
        let Body::Proto(bytes) = &listener.body else { panic!("a listener in protobuf") };
        let chains = <xdst_guest::envoy::envoy::config::listener::v3::Listener as prost::Message>::decode(&bytes[..])
            .unwrap()
            .filter_chains;
        let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
        let mut want = vec!["infra/gw/443/named"];
        if ok {
            want.insert(0, "infra/gw/443/https");
        }
        assert_eq!(names, want, "{refs}");
        let secrets: Vec<&str> =
            out.resources.iter().filter(|r| r.type_url.ends_with("tls.v3.Secret")).map(|r| r.name.as_str()).collect();
        let mut want = vec!["infra/good"];
        if ok && refs.contains("elsewhere") {
            want.push("other/elsewhere");
        }
        assert_eq!(secrets, want, "{refs}");
    }
}

#[test]
fn a_port_serves_one_protocol() {
    let yaml = gateway("{name: good}").replace(
        "  - name: named\n    port: 443\n    hostname: a.example.org\n    protocol: HTTPS",
        "  - name: named\n    port: 443\n    hostname: a.example.org\n    protocol: HTTP",
    );
    let (_, statuses) = common::run(&yaml, "null");
    let second = &statuses["Gateway/infra/gw"]["listeners"][1]["conditions"];
    let reasons: Vec<&str> = second.as_array().unwrap().iter().map(|c| c["reason"].as_str().unwrap()).collect();
    assert!(reasons.contains(&"ProtocolConflict"), "{second}");
}

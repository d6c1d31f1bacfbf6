//! Does what the request's `config` says: `"ok"` returns one cluster, and the rest misbehave
//! the ways the sandbox must survive: `"loop"`, `"bomb"`, `"big"`, `"panic"`, `"error"`,
//! `"chatty"`, and `"badjson"` returns a resource with a wrongly typed field. With a number:
//! `"deep-any-proto:N"` and `"deep-any-json:N"` return a cluster whose transport socket holds
//! an `Any` holding an `Any` ... N deep (as protobuf bytes, or as JSON), `"huge-error:N"` fails
//! with an N-byte message, `"diagnostics:N"` succeeds with N diagnostics of 1 KiB, and
//! `"alias:N"` returns N resources whose bodies alias one 1 MiB string. `"status-ok"`,
//! `"status-array"` and `"status-trailing"` return a status for the first document: a JSON
//! object, an array, an object followed by another. `"by-document"` lets each document say:
//! one with `spec.mode: loop` (or `bomb`) loops (or grows its memory) forever, and every other
//! one gets a cluster named after it (`<namespace>-<name>`): a plugin that misbehaves on one
//! team's document only.

use xdst_guest::*;

struct Adversary;

impl Translator for Adversary {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "adversary".into(),
            version: "0.1.0".into(),
            kinds: vec!["Adversary".into()],
            phase: Phase::Translate,
            granularity: Granularity::WholeSet,
            incremental: false,
        }
    }

    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        let ok =
            |resources| Ok(TranslateResponse { removed: vec![], resources, diagnostics: vec![], statuses: vec![] });
        let mode = request.config.trim().trim_matches('"').to_owned();
        if let Some((what, n)) = mode.split_once(':') {
            let n: usize = n.parse().unwrap_or(0);
            let cluster = |body| XdsResource {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "c1".into(),
                body,
                document: request.documents.first().map(|d| format!("{}/{}", d.kind, d.name)),
                node_groups: vec![],
            };
            return match what {
                "deep-any-proto" => ok(vec![cluster(Body::Proto(deep_cluster_proto(n)))]),
                "deep-any-json" => ok(vec![cluster(Body::Json(deep_cluster_json(n)))]),
                // N resources whose JSON bodies are one 1 MiB string: the result names the same
                // bytes N times (lowered as N pointers to them), so copying it naively would take
                // N MiB. The strings are never freed: the host stops the call before.
                "alias" => {
                    let mut one = std::mem::ManuallyDrop::new("x".repeat(1 << 20));
                    let (ptr, len, cap) = (one.as_mut_ptr(), one.len(), one.capacity());
                    let resources = (0..n)
                        // SAFETY: deliberately aliased, never dropped (see above).
                        .map(|_| cluster(Body::Json(unsafe { String::from_raw_parts(ptr, len, cap) })))
                        .collect();
                    ok(resources)
                }
                "huge-error" => Err(PluginError { message: "e".repeat(n), document: None, field: None }),
                "diagnostics" => Ok(TranslateResponse {
                    removed: vec![],
                    resources: vec![cluster(Body::Json(r#"{"name": "c1", "connect_timeout": "1s"}"#.into()))],
                    diagnostics: (0..n)
                        .map(|i| Diagnostic {
                            severity: Severity::Warning,
                            message: format!("diagnostic {i} {}", "d".repeat(1024)),
                            document: None,
                            field: None,
                        })
                        .collect(),
                    statuses: vec![],
                }),
                other => Err(PluginError { message: format!("unknown mode {other:?}"), document: None, field: None }),
            };
        }
        match mode.as_str() {
            "by-document" => {
                let mut resources = Vec::new();
                for d in &request.documents {
                    if d.json.contains(r#""mode":"loop""#) {
                        let mut x: u64 = 0;
                        loop {
                            x = std::hint::black_box(x.wrapping_add(1));
                        }
                    }
                    if d.json.contains(r#""mode":"bomb""#) {
                        let mut hoard: Vec<Vec<u8>> = Vec::new();
                        loop {
                            hoard.push(vec![1u8; 1 << 20]);
                            std::hint::black_box(&hoard);
                        }
                    }
                    let name = d.name.replace('/', "-");
                    resources.push(XdsResource {
                        type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                        name: name.clone(),
                        body: Body::Json(format!(r#"{{"name": "{name}", "connect_timeout": "1s"}}"#)),
                        document: Some(format!("{}/{}", d.kind, d.name)),
                        node_groups: vec![],
                    });
                }
                ok(resources)
            }
            "ok" => ok(vec![XdsResource {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "c1".into(),
                body: Body::Json(r#"{"name": "c1", "connect_timeout": "1s"}"#.into()),
                document: request.documents.first().map(|d| format!("{}/{}", d.kind, d.name)),
                node_groups: vec![],
            }]),
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "big" => ok(vec![XdsResource {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "big".into(),
                body: Body::Json("x".repeat(4 << 20)),
                document: None,
                node_groups: vec![],
            }]),
            "badjson" => ok(vec![XdsResource {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "c1".into(),
                body: Body::Json(r#"{"name": "c1", "connect_timeout": 5}"#.into()),
                document: Some("Adversary/one".into()),
                node_groups: vec![],
            }]),
            "panic" => panic!("the adversary panics"),
            "error" => Err(PluginError {
                message: "spec.port must be a number".into(),
                document: Some("Adversary/one".into()),
                field: Some("spec.port".into()),
            }),
            // Contract 0.3.0: a cluster for every group, one for the group "blue" only, and
            // one named after the node group the request was for.
            "groups" => {
                let named = |name: &str, groups: &[&str]| XdsResource {
                    type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                    name: name.into(),
                    body: Body::Json(format!(r#"{{"name": "{name}", "connect_timeout": "1s"}}"#)),
                    document: None,
                    node_groups: groups.iter().map(|g| g.to_string()).collect(),
                };
                let asked = if request.node_group.is_empty() { "all" } else { &request.node_group };
                ok(vec![named("c-all", &[]), named("c-blue", &["blue"]), named(&format!("asked-{asked}"), &[])])
            }
            // A status for the first document: a JSON object, then two that are not.
            "status-ok" | "status-array" | "status-trailing" => Ok(TranslateResponse {
                removed: vec![],
                resources: vec![],
                diagnostics: vec![],
                statuses: request
                    .documents
                    .first()
                    .map(|d| DocumentStatus {
                        document: format!("{}/{}", d.kind, d.name),
                        status: match mode.as_str() {
                            "status-ok" => r#" {"conditions": [{"type": "Accepted"}]}"#,
                            "status-array" => "[1]",
                            _ => r#"{"a": 1} {"b": 2}"#,
                        }
                        .into(),
                    })
                    .into_iter()
                    .collect(),
            }),
            "chatty" => {
                for i in 0..1000 {
                    log(Level::Info, &format!("line {i}"));
                }
                ok(vec![])
            }
            other => Err(PluginError { message: format!("unknown mode {other:?}"), document: None, field: None }),
        }
    }
}

const ANY: &str = "type.googleapis.com/google.protobuf.Any";
const ROUTER: &str = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";

fn key(field: u64, out: &mut Vec<u8>) {
    varint(field << 3 | 2, out);
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes_field(field: u64, bytes: &[u8], out: &mut Vec<u8>) {
    key(field, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// A Cluster `c1` whose `transport_socket.typed_config` is an `Any` holding an `Any` ...
/// `levels` deep, as protobuf bytes; built from the inside out in linear time.
fn deep_cluster_proto(levels: usize) -> Vec<u8> {
    let mut inner = Vec::new();
    bytes_field(1, ROUTER.as_bytes(), &mut inner);
    let mut headers = Vec::with_capacity(levels);
    let mut len = inner.len();
    for _ in 0..levels {
        let mut h = Vec::new();
        bytes_field(1, ANY.as_bytes(), &mut h);
        key(2, &mut h);
        varint(len as u64, &mut h);
        len += h.len();
        headers.push(h);
    }
    let mut any = Vec::with_capacity(len);
    for h in headers.iter().rev() {
        any.extend_from_slice(h);
    }
    any.extend_from_slice(&inner);
    // TransportSocket { name: 1, typed_config: 3 }; Cluster { name: 1, transport_socket: 24 }.
    let mut socket = Vec::new();
    bytes_field(1, b"tls", &mut socket);
    bytes_field(3, &any, &mut socket);
    let mut cluster = Vec::new();
    bytes_field(1, b"c1", &mut cluster);
    bytes_field(24, &socket, &mut cluster);
    cluster
}

/// The same cluster as proto3 JSON: an `Any` holding an `Any` is `{"@type": ..Any, "value": ..}`.
fn deep_cluster_json(levels: usize) -> String {
    let mut s = String::from(r#"{"name": "c1", "transport_socket": {"name": "tls", "typed_config": "#);
    for _ in 0..levels {
        s.push_str(&format!(r#"{{"@type": "{ANY}", "value": "#));
    }
    s.push_str(&format!(r#"{{"@type": "{ROUTER}"}}"#));
    for _ in 0..levels {
        s.push('}');
    }
    s.push_str("}}");
    s
}

export_translator!(Adversary);

//! Fuzz targets, as property tests on the stable toolchain: hostile input from clients,
//! plugins and files must give an error or an answer, never a panic or a stack overflow.
//!
//! Each target first replays its committed corpus (`fuzz/corpus/<target>/`: the inputs that
//! once crashed xdst, and seeds that reach deep code), then runs random cases: 256 each by
//! default, `PROPTEST_CASES=N` for longer runs (see `docs/FUZZING.md`). A failing case is
//! shrunk and saved by proptest under `host/core/proptest-regressions/`; commit it, and add the
//! input to the corpus.

use std::path::PathBuf;
use std::time::SystemTime;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use envoy_types::pb::google::rpc::Status;
use proptest::prelude::*;
use prost::encoding::{WireType, encode_key, encode_varint};

use crate::decode::{Body, decode_body, decode_file};
use crate::delta::DeltaStream;
use crate::snapshot::Snapshot;
use crate::sotw::SotwStream;
use crate::stream::Scope;
use crate::testutil::{nested_any, res};
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

/// The files of `fuzz/corpus/<target>`, with their names.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: an empty corpus", dir.display());
    files
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect()
}

// ---- the SotW and Delta stream machines: random request sequences ----

/// A type URL a client may send: the core types, another real one, or made up.
fn type_url() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![LISTENER, ROUTE, CLUSTER, ENDPOINT]).prop_map(str::to_owned),
        1 => Just("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret".to_owned()),
        1 => "[ -~]{0,40}",
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![4 => prop::sample::select(vec!["a", "b", "c", "*", ""]).prop_map(str::to_owned), 1 => "[ -~]{0,20}"]
}

fn names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(name(), 0..4)
}

/// A nonce or version: one the server sent, or anything.
fn echo() -> impl Strategy<Value = Option<String>> {
    prop_oneof![2 => Just(None), 1 => "[ -~]{0,12}".prop_map(Some)]
}

#[derive(Debug, Clone)]
enum Step {
    Sotw {
        type_url: String,
        names: Vec<String>,
        version: Option<String>,
        nonce: Option<String>,
        nack: bool,
    },
    Delta {
        type_url: String,
        subscribe: Vec<String>,
        unsubscribe: Vec<String>,
        nonce: Option<String>,
        nack: bool,
    },
    /// The served set changes: which of a few resources exist, per core type.
    Snapshot(Vec<(usize, String, u8)>),
    /// Answer the last response of this kind correctly (ACK or NACK).
    AnswerLast {
        nack: bool,
    },
    Poll,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (type_url(), names(), echo(), echo(), any::<bool>()).prop_map(|(type_url, names, version, nonce, nack)| {
            Step::Sotw { type_url, names, version, nonce, nack }
        }),
        3 => (type_url(), names(), names(), echo(), any::<bool>()).prop_map(|(type_url, subscribe, unsubscribe, nonce, nack)| {
            Step::Delta { type_url, subscribe, unsubscribe, nonce, nack }
        }),
        2 => prop::collection::vec((0..4usize, prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_owned), 0u8..3), 0..6)
            .prop_map(Step::Snapshot),
        2 => any::<bool>().prop_map(|nack| Step::AnswerLast { nack }),
        3 => Just(Step::Poll),
    ]
}

fn node() -> Option<Node> {
    Some(Node { id: "fuzz".into(), cluster: "fuzz".into(), ..Default::default() })
}

fn error(nack: bool) -> Option<Status> {
    nack.then(|| Status { code: 3, message: "rejected".into(), details: vec![] })
}

/// Drives one SotW and one Delta machine with `steps`; protocol errors are fine, panics are
/// not, and every response must be of a type the client asked for, with a nonce never used.
fn drive(steps: &[Step]) -> Result<(), TestCaseError> {
    let types = [LISTENER, ROUTE, CLUSTER, ENDPOINT];
    let mut sotw = SotwStream::new(Scope::Aggregated);
    let mut delta = DeltaStream::new(Scope::Aggregated);
    let mut snap = Snapshot::default();
    let mut asked: std::collections::BTreeSet<String> = Default::default();
    let mut nonces: std::collections::BTreeSet<String> = Default::default();
    let mut last_sotw: Option<(String, String, String)> = None;
    let mut last_delta: Option<(String, String)> = None;
    let now = SystemTime::now();
    for step in steps {
        match step.clone() {
            Step::Sotw { type_url, names, version, nonce, nack } => {
                asked.insert(type_url.clone());
                let req = DiscoveryRequest {
                    type_url,
                    resource_names: names,
                    version_info: version.unwrap_or_default(),
                    response_nonce: nonce.unwrap_or_default(),
                    error_detail: error(nack),
                    node: node(),
                    ..Default::default()
                };
                let _ = sotw.handle_request(&req, now);
            }
            Step::Delta { type_url, subscribe, unsubscribe, nonce, nack } => {
                asked.insert(type_url.clone());
                let req = DeltaDiscoveryRequest {
                    type_url,
                    resource_names_subscribe: subscribe,
                    resource_names_unsubscribe: unsubscribe,
                    response_nonce: nonce.unwrap_or_default(),
                    error_detail: error(nack),
                    node: node(),
                    ..Default::default()
                };
                let _ = delta.handle_request(&req, now);
            }
            Step::Snapshot(items) => {
                let mut seen = std::collections::BTreeSet::new();
                let rs = items
                    .iter()
                    .filter(|(t, n, _)| seen.insert((*t, n.clone())))
                    .map(|(t, n, c)| res(types[*t], n, &c.to_string()));
                snap = Snapshot::from_resources(rs).unwrap();
                sotw.snapshot_changed(SystemTime::now());
                delta.snapshot_changed(SystemTime::now());
            }
            Step::AnswerLast { nack } => {
                if let Some((type_url, version, nonce)) = last_sotw.take() {
                    let req = DiscoveryRequest {
                        type_url,
                        version_info: version,
                        response_nonce: nonce,
                        error_detail: error(nack),
                        ..Default::default()
                    };
                    let _ = sotw.handle_request(&req, now);
                }
                if let Some((type_url, nonce)) = last_delta.take() {
                    let req = DeltaDiscoveryRequest {
                        type_url,
                        response_nonce: nonce,
                        error_detail: error(nack),
                        ..Default::default()
                    };
                    let _ = delta.handle_request(&req, now);
                }
            }
            Step::Poll => {
                for r in sotw.poll(&snap) {
                    prop_assert!(asked.contains(&*r.type_url), "SotW sent {} unasked", r.type_url);
                    prop_assert!(nonces.insert(format!("sotw/{}", r.nonce)), "SotW reused nonce {}", r.nonce);
                    last_sotw = Some((r.type_url.to_string(), r.version.to_string(), r.nonce.to_string()));
                }
                for r in delta.poll(&snap) {
                    prop_assert!(asked.contains(&*r.type_url), "Delta sent {} unasked", r.type_url);
                    prop_assert!(nonces.insert(format!("delta/{}", r.nonce)), "Delta reused nonce {}", r.nonce);
                    last_delta = Some((r.type_url.to_string(), r.nonce.to_string()));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn stream_machines_survive_any_request_sequence(steps in prop::collection::vec(step(), 1..40)) {
        drive(&steps)?;
    }
}

/// Corpus files here are request sequences, one request per line: `sotw TYPE NONCE NAMES...`,
/// `delta TYPE NONCE +SUB... -UNSUB...`, `snapshot T:NAME:CONTENT...`, `ack`, `nack`, `poll`.
#[test]
fn stream_machines_corpus() {
    for (file, bytes) in corpus("stream-machines") {
        let text = String::from_utf8(bytes).unwrap();
        let steps: Vec<Step> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| {
                let mut w = l.split_whitespace();
                let kind = w.next().unwrap();
                let mut rest: Vec<String> = w.map(str::to_owned).collect();
                let take = |rest: &mut Vec<String>| if rest.is_empty() { String::new() } else { rest.remove(0) };
                match kind {
                    "sotw" => {
                        let (type_url, nonce) = (take(&mut rest), take(&mut rest));
                        Step::Sotw {
                            type_url,
                            names: rest,
                            version: None,
                            nonce: Some(nonce).filter(|n| n != "-"),
                            nack: false,
                        }
                    }
                    "delta" => {
                        let (type_url, nonce) = (take(&mut rest), take(&mut rest));
                        let sub = rest.iter().filter_map(|n| n.strip_prefix('+')).map(str::to_owned).collect();
                        let unsub = rest.iter().filter_map(|n| n.strip_prefix('-')).map(str::to_owned).collect();
                        Step::Delta {
                            type_url,
                            subscribe: sub,
                            unsubscribe: unsub,
                            nonce: Some(nonce).filter(|n| n != "-"),
                            nack: false,
                        }
                    }
                    "snapshot" => Step::Snapshot(
                        rest.iter()
                            .map(|x| {
                                let mut p = x.splitn(3, ':');
                                let t: usize = p.next().unwrap().parse().unwrap();
                                (
                                    t % 4,
                                    p.next().unwrap_or("a").to_owned(),
                                    p.next().unwrap_or("0").parse().unwrap_or(0),
                                )
                            })
                            .collect(),
                    ),
                    "ack" => Step::AnswerLast { nack: false },
                    "nack" => Step::AnswerLast { nack: true },
                    "poll" => Step::Poll,
                    other => panic!("{file}: unknown step {other:?}"),
                }
            })
            .collect();
        drive(&steps).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

// ---- intent and resources files: random text, and YAML that nests or aliases ----

/// YAML (or JSON) text that nests `depth` levels, as flow or block collections, with anchors
/// and aliases sprinkled in.
fn nested_yaml() -> impl Strategy<Value = String> {
    (1usize..400, any::<bool>(), 0usize..50, "[a-z]{1,8}").prop_map(|(depth, flow, aliases, key)| {
        let mut s = String::from("kind: Service\nmetadata: {name: fuzz}\nspec:\n  base: &b [1, 2, 3]\n  deep: ");
        if flow {
            s.push_str(&"[".repeat(depth));
            s.push_str(&"]".repeat(depth));
        } else {
            s.push_str(&format!("{{{key}: ").repeat(depth));
            s.push('1');
            s.push_str(&"}".repeat(depth));
        }
        s.push_str("\n  refs: [");
        s.push_str(&vec!["*b"; aliases].join(", "));
        s.push_str("]\n");
        s
    })
}

fn parse_any_text(text: &str) {
    let _ = crate::intent::parse_file("fuzz.yaml", text);
    let _ = decode_file("fuzz.yaml", text);
    let _ = decode_file("fuzz.json", text);
}

proptest! {
    #[test]
    fn intent_and_resources_files_never_panic(text in prop_oneof![".{0,400}", nested_yaml()]) {
        parse_any_text(&text);
    }
}

#[test]
fn intent_corpus() {
    for (file, bytes) in corpus("intent") {
        let text = String::from_utf8_lossy(&bytes);
        let started = std::time::Instant::now();
        parse_any_text(&text);
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{file}: took {:?}", started.elapsed());
    }
}

// ---- plugin output: decoding and canonicalisation of random and deeply nested bodies ----

/// One length-delimited field.
fn field(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// A Cluster whose transport socket's typed config is an `Any` holding an `Any` ... `depth`
/// deep, followed by `tail` (random bytes).
fn nested_any_cluster(depth: usize, tail: &[u8]) -> Vec<u8> {
    let mut socket = Vec::new();
    field(1, b"envoy.transport_sockets.tls", &mut socket);
    field(3, &nested_any(depth), &mut socket);
    let mut cluster = Vec::new();
    field(1, b"c1", &mut cluster);
    field(24, &socket, &mut cluster);
    cluster.extend_from_slice(tail);
    cluster
}

fn decode_any_body(bytes: &[u8]) {
    for type_url in [CLUSTER, LISTENER, ROUTE, ENDPOINT] {
        let _ = decode_body(type_url, "c1", Body::Proto(bytes));
        if let Ok(text) = std::str::from_utf8(bytes) {
            let _ = decode_body(type_url, "c1", Body::Json(text));
        }
    }
}

proptest! {
    #[test]
    fn plugin_output_never_panics(
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            (0usize..3000, prop::collection::vec(any::<u8>(), 0..20)).prop_map(|(d, t)| nested_any_cluster(d, &t)),
            (1usize..300).prop_map(|d| format!("{{\"name\": \"c1\", \"metadata\": {{\"filter_metadata\": {{\"x\": {}1{}}}}}}}", "{\"a\": ".repeat(d), "}".repeat(d)).into_bytes()),
        ]
    ) {
        decode_any_body(&body);
    }
}

#[test]
fn plugin_output_corpus() {
    for (_, bytes) in corpus("plugin-output") {
        decode_any_body(&bytes);
    }
}

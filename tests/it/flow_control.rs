//! Issue 51, design 022: one response per type in flight, per stream. A client that has not
//! answered a response of a type is sent no other of that type; what changes meanwhile is
//! merged into the response after its answer: the latest state, never one in between, and
//! never a removal before what replaces it (ORDER-2), in each protocol mode (SotW and Delta,
//! over ADS and over the per-type services). Rule numbers refer to
//! ../shared/xds-protocol/README.md.

use std::collections::{BTreeMap, VecDeque};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use prost::Message as _;
use tokio_stream::wrappers::ReceiverStream;
use xdst_core::types::{CLUSTER, LISTENER, ROUTE};
use xdst_tests::fixtures::{self, basic_dir, write};
use xdst_tests::server::start_in_process;
use xdst_tests::xds::*;

#[derive(Clone, Copy, Debug)]
enum Api {
    Sotw,
    Delta,
}

/// One response, whatever the API: what it puts (name to body) and what it removes.
#[derive(Debug)]
struct Got {
    type_url: String,
    nonce: String,
    version: String,
    put: BTreeMap<String, Vec<u8>>,
    removed: Vec<String>,
}

enum Wire {
    Sotw(Sotw),
    Delta(Delta),
}

/// A client of one node over ADS (one stream) or the per-type services (a stream per type),
/// that answers only when told to.
struct Client {
    node: &'static str,
    /// `""` for the ADS stream, else the type each stream carries.
    streams: Vec<(&'static str, Wire)>,
    ads: bool,
    /// SotW: each type's subscription, repeated in its answers.
    names: BTreeMap<String, Vec<String>>,
    /// Responses read from the ADS stream while waiting for another type's.
    read: VecDeque<Got>,
}

impl Client {
    async fn open(addr: std::net::SocketAddr, api: Api, ads: bool, node: &'static str) -> Client {
        let mut streams = Vec::new();
        if ads {
            streams.push((
                "",
                match api {
                    Api::Sotw => Wire::Sotw(sotw_ads(addr).await),
                    Api::Delta => Wire::Delta(delta_ads(addr).await),
                },
            ));
        } else {
            let ch = channel(addr).await;
            for t in [CLUSTER, LISTENER, ROUTE] {
                streams.push((t, per_type(&ch, api, t).await));
            }
        }
        Client { node, streams, ads, names: BTreeMap::new(), read: VecDeque::new() }
    }

    fn wire(&mut self, type_url: &str) -> &mut Wire {
        let key = if self.ads { "" } else { type_url };
        &mut self.streams.iter_mut().find(|(t, _)| *t == key).expect("a stream for the type").1
    }

    async fn subscribe(&mut self, type_url: &'static str, names: &[&str]) {
        self.names.insert(type_url.into(), names.iter().map(|n| n.to_string()).collect());
        let n = node(self.node, "test");
        match self.wire(type_url) {
            Wire::Sotw(s) => s.send(DiscoveryRequest { node: n, ..sotw_req(type_url, names) }).await,
            Wire::Delta(s) => s.send(DeltaDiscoveryRequest { node: n, ..delta_req(type_url, names, &[]) }).await,
        }
    }

    /// The next response of `type_url` (responses of other types read meanwhile are kept).
    async fn recv(&mut self, type_url: &str) -> Got {
        if let Some(i) = self.read.iter().position(|g| g.type_url == type_url) {
            return self.read.remove(i).unwrap();
        }
        loop {
            let got = match self.wire(type_url) {
                Wire::Sotw(s) => {
                    let r = s.recv().await;
                    let put = r.resources.iter().map(|a| (resource_name(&a.type_url, &a.value), a.value.clone()));
                    Got {
                        type_url: r.type_url.clone(),
                        nonce: r.nonce.clone(),
                        version: r.version_info.clone(),
                        put: put.collect(),
                        removed: Vec::new(),
                    }
                }
                Wire::Delta(s) => {
                    let r = s.recv().await;
                    let put = r.resources.iter().map(|x| (x.name.clone(), x.resource.clone().unwrap().value));
                    Got {
                        type_url: r.type_url.clone(),
                        nonce: r.nonce.clone(),
                        version: r.system_version_info.clone(),
                        put: put.collect(),
                        removed: r.removed_resources.clone(),
                    }
                }
            };
            if got.type_url == type_url || !self.ads {
                return got;
            }
            self.read.push_back(got);
        }
    }

    /// ACKs `got` (SOTW-3, DELTA-1).
    async fn answer(&mut self, got: &Got) {
        let names = self.names.get(&got.type_url).cloned().unwrap_or_default();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        match self.wire(&got.type_url) {
            Wire::Sotw(s) => {
                s.send(DiscoveryRequest {
                    version_info: got.version.clone(),
                    response_nonce: got.nonce.clone(),
                    node: None,
                    ..sotw_req(&got.type_url, &names)
                })
                .await
            }
            Wire::Delta(s) => {
                s.send(DeltaDiscoveryRequest {
                    response_nonce: got.nonce.clone(),
                    node: None,
                    ..delta_req(&got.type_url, &[], &[])
                })
                .await
            }
        }
    }

    /// The first response of `type_url` after subscribing, answered.
    async fn start(&mut self, type_url: &'static str, names: &[&str]) -> Got {
        self.subscribe(type_url, names).await;
        let got = self.recv(type_url).await;
        self.answer(&got).await;
        got
    }
}

async fn per_type(ch: &tonic::transport::Channel, api: Api, type_url: &str) -> Wire {
    use envoy_types::pb::envoy::service::cluster::v3::cluster_discovery_service_client::ClusterDiscoveryServiceClient as C;
    use envoy_types::pb::envoy::service::listener::v3::listener_discovery_service_client::ListenerDiscoveryServiceClient as L;
    use envoy_types::pb::envoy::service::route::v3::route_discovery_service_client::RouteDiscoveryServiceClient as R;
    let (stx, srx) = tokio::sync::mpsc::channel(16);
    let (dtx, drx) = tokio::sync::mpsc::channel(16);
    let (s, d) = (ReceiverStream::new(srx), ReceiverStream::new(drx));
    let ch = ch.clone();
    match (api, type_url) {
        (Api::Sotw, CLUSTER) => {
            Wire::Sotw(XdsStream::new(stx, C::new(ch).stream_clusters(s).await.unwrap().into_inner()))
        }
        (Api::Sotw, LISTENER) => {
            Wire::Sotw(XdsStream::new(stx, L::new(ch).stream_listeners(s).await.unwrap().into_inner()))
        }
        (Api::Sotw, _) => Wire::Sotw(XdsStream::new(stx, R::new(ch).stream_routes(s).await.unwrap().into_inner())),
        (Api::Delta, CLUSTER) => {
            Wire::Delta(XdsStream::new(dtx, C::new(ch).delta_clusters(d).await.unwrap().into_inner()))
        }
        (Api::Delta, LISTENER) => {
            Wire::Delta(XdsStream::new(dtx, L::new(ch).delta_listeners(d).await.unwrap().into_inner()))
        }
        (Api::Delta, _) => Wire::Delta(XdsStream::new(dtx, R::new(ch).delta_routes(d).await.unwrap().into_inner())),
    }
}

fn resource_name(type_url: &str, body: &[u8]) -> String {
    let desc = xdst_core::descriptors::message_for_type_url(type_url).expect("known type");
    let msg = prost_reflect::DynamicMessage::decode(desc, body).expect("decodes");
    xdst_core::decode::resource_name(&msg).unwrap_or_default()
}

/// A cluster's connect timeout in seconds: which of the edits it is.
fn timeout(body: &[u8]) -> i64 {
    Cluster::decode(body).unwrap().connect_timeout.unwrap().seconds
}

/// The cluster a route configuration sends everything to.
fn route_target(body: &[u8]) -> String {
    let rc = RouteConfiguration::decode(body).unwrap();
    match &rc.virtual_hosts[0].routes[0].action {
        Some(Action::Route(a)) => match &a.cluster_specifier {
            Some(ClusterSpecifier::Cluster(c)) => c.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

fn next_cluster(seconds: u32) -> String {
    fixtures::cluster("next", 8081).replace("connect_timeout: 1s", &format!("connect_timeout: {seconds}s"))
}

/// `/debug/nodes` for `node`: its plan's target version and, on the stream that carries
/// clusters, the CDS type's flow control (`merged`, `awaiting_answer`).
async fn cds_flow(admin: std::net::SocketAddr, node: &str) -> (String, serde_json::Value) {
    let (_, body) = http_get(admin, &format!("/debug/nodes?node={node}")).await;
    let nodes: serde_json::Value = serde_json::from_str(&body).unwrap();
    let n = nodes.as_array().unwrap().iter().find(|n| n["id"] == node).cloned().unwrap_or_default();
    let target = n["plan"]["target_version"].as_str().unwrap_or_default().to_owned();
    let cds = n["streams"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["types"].as_array().cloned().unwrap_or_default())
        .find(|t| t["type_url"] == CLUSTER)
        .unwrap_or_default();
    (target, cds)
}

/// Waits until `node`'s CDS type has merged at least `n` changes while awaiting its answer.
async fn merged_at_least(admin: std::net::SocketAddr, node: &str, n: u64) {
    xdst_tests::wait::until_true(format!("{node} to merge {n} changes"), WAIT, async || {
        let (_, cds) = cds_flow(admin, node).await;
        cds["awaiting_answer"] == true && cds["merged"].as_u64().unwrap_or(0) >= n
    })
    .await
    .unwrap();
}

async fn a_late_answer_gets_the_merged_latest_state(api: Api, ads: bool) {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let admin = server.admin_addr;
    let mut c = Client::open(server.xds_addr, api, ads, "late").await;
    let c1 = c.start(CLUSTER, &[]).await;
    assert_eq!(c1.put.keys().collect::<Vec<_>>(), ["backend"]);
    c.start(LISTENER, &[]).await;
    let r1 = c.start(ROUTE, &["local"]).await;
    assert_eq!(route_target(&r1.put["local"]), "backend");

    // A cluster is added: sent, and not answered.
    write(dir.path(), "next.yaml", &next_cluster(1));
    let c2 = c.recv(CLUSTER).await;
    assert_eq!(timeout(&c2.put["next"]), 1, "{c2:?}");
    // Two more edits while the client holds its answer: each reaches the stream and is merged.
    write(dir.path(), "next.yaml", &next_cluster(2));
    merged_at_least(admin, "late", 1).await;
    write(dir.path(), "next.yaml", &next_cluster(3));
    write(dir.path(), "route.yaml", &fixtures::route("local", "next"));
    std::fs::remove_file(dir.path().join("backend.yaml")).unwrap();
    // Once the group is served the last edit and the node's plan has it as its target, the
    // stream has been offered it (the answer below is handled after).
    let group = server.serving.nodes.report(&Default::default())[0].group.clone();
    xdst_tests::wait::until_true("the last edit to be the node's target", WAIT, async || {
        let snap = server.serving.cache.snapshot(&group);
        let done = snap.resource(CLUSTER, "backend").is_none()
            && snap.resource(CLUSTER, "next").is_some_and(|r| timeout(r.body()) == 3)
            && snap.resource(ROUTE, "local").is_some_and(|r| route_target(r.body()) == "next");
        done && cds_flow(admin, "late").await.0 == snap.version()
    })
    .await
    .unwrap();
    let (_, cds) = cds_flow(admin, "late").await;
    assert_eq!(cds["awaiting_answer"], true, "{cds}");
    assert!(cds["owed_since"].is_number(), "the change owed is dated: {cds}");
    // Seen from outside: on /metrics and, for the node's group, on the status page.
    let (_, metrics) = http_get(admin, "/metrics").await;
    let value = |name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name}"));
        line[name.len() + 1..].parse().unwrap()
    };
    assert!(value("xdst_responses_in_flight") >= 1.0, "{metrics}");
    assert!(value("xdst_changes_merged_total") >= 2.0, "{metrics}");
    assert_eq!(value("xdst_streams_owed"), 1.0, "{metrics}");
    assert!(value("xdst_oldest_owed_change_seconds") > 0.0, "{metrics}");
    let (_, summary) = http_get(admin, "/status/summary").await;
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let g = summary["groups"].as_array().unwrap().iter().find(|g| g["group"] == group.as_str()).unwrap();
    assert_eq!(g["streams_owed"], 1, "{g}");
    assert!(g["in_flight"].as_u64().unwrap() >= 1 && g["merged"].as_u64().unwrap() >= 2, "{g}");

    // The answer: the next clusters response is the latest state, not the one in between,
    // and keeps backend, which the route the client holds still names (ORDER-2).
    c.answer(&c2).await;
    let c3 = c.recv(CLUSTER).await;
    assert_eq!(timeout(&c3.put["next"]), 3, "the latest edit, never the one in between: {c3:?}");
    assert!(c3.removed.is_empty(), "nothing removed before the routes move: {c3:?}");
    if let Api::Sotw = api {
        assert!(c3.put.contains_key("backend"), "SOTW-8: the full state still has backend: {c3:?}");
    }
    c.answer(&c3).await;
    // Then the route moves to next, and only once that is answered does backend go.
    let r2 = c.recv(ROUTE).await;
    assert_eq!(route_target(&r2.put["local"]), "next");
    c.answer(&r2).await;
    let c4 = c.recv(CLUSTER).await;
    match api {
        Api::Sotw => assert_eq!(c4.put.keys().collect::<Vec<_>>(), ["next"], "{c4:?}"),
        Api::Delta => assert_eq!((c4.put.len(), c4.removed.as_slice()), (0, &["backend".to_owned()][..]), "{c4:?}"),
    }
    assert_eq!(timeout(&c4.put.get("next").cloned().unwrap_or_else(|| c3.put["next"].clone())), 3);
    server.shutdown().await;
}

#[tokio::test]
async fn sotw_ads_a_late_answer_gets_the_merged_latest_state() {
    a_late_answer_gets_the_merged_latest_state(Api::Sotw, true).await;
}

#[tokio::test]
async fn delta_ads_a_late_answer_gets_the_merged_latest_state() {
    a_late_answer_gets_the_merged_latest_state(Api::Delta, true).await;
}

#[tokio::test]
async fn sotw_per_type_a_late_answer_gets_the_merged_latest_state() {
    a_late_answer_gets_the_merged_latest_state(Api::Sotw, false).await;
}

#[tokio::test]
async fn delta_per_type_a_late_answer_gets_the_merged_latest_state() {
    a_late_answer_gets_the_merged_latest_state(Api::Delta, false).await;
}

/// Clusters in the slow-reader test: with 100-character names, a CDS response is about
/// 45 KiB, and with its load assignments the state is served to every stream at each change.
const SLOW_CLUSTERS: usize = 300;
/// Streams that stop reading (each on a connection of its own, a 64 KiB window never given
/// back), streams that read but never answer, and streams that read and answer.
const STOPPED: usize = 100;
const SILENT: usize = 20;
const POLITE: usize = 5;
/// Edits of one cluster during the churn: each a new state for every stream.
const EDITS: u32 = 100;
/// What xdst's RSS may grow by over the churn, every stream there: the stopped streams' one
/// response each (already counted in the baseline), the generations' garbage, the allocator's
/// slack. Without flow control the silent streams alone would be handed `EDITS` responses each.
const SLOW_READER_GROWTH: u64 = 32 << 20;

fn churn_cluster(seconds: u32) -> String {
    fixtures::cluster("churn", 8081).replace("connect_timeout: 1s", &format!("connect_timeout: {seconds}s"))
}

/// The churn cluster's timeout in a SotW clusters response (each edit sets it to its number).
fn churn_edit(r: &envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse) -> Option<i64> {
    r.resources
        .iter()
        .map(|a| Cluster::decode(a.value.as_slice()).unwrap())
        .find(|c| c.name == "churn")
        .map(|c| c.connect_timeout.unwrap().seconds)
}

/// Issue 51: 100 streams stop reading and 20 read but never answer, while one cluster is
/// edited 100 times. xdst's RSS grows by less than [`SLOW_READER_GROWTH`] over the churn,
/// nothing is reset (one response per type each fits the client's unread budget), the
/// streams that answer stay current, the silent ones are sent nothing after their first
/// response (a probe of another type, answered at once, shows it), and every slow stream,
/// once it reads and answers, gets the latest state in one response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_that_stop_reading_hold_one_response_and_catch_up() -> anyhow::Result<()> {
    use anyhow::ensure;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
    use xdst_tests::operator::metric_sum;
    use xdst_tests::wait;

    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    let docs: Vec<String> =
        (0..SLOW_CLUSTERS).map(|i| fixtures::cluster(&format!("svc-{i:03}-{}", "x".repeat(100)), 9)).collect();
    write(dir.path(), "many.yaml", &docs.join("---\n"));
    write(dir.path(), "churn.yaml", &churn_cluster(1));
    let xdst = xdst_tests::server::Process::start(dir.path(), "127.0.0.1:0", &[]).await?;
    let (xds, admin) = (xdst.xds_addr, xdst.admin_addr);

    let mut stopped = Vec::with_capacity(STOPPED);
    for i in 0..STOPPED {
        let req = DiscoveryRequest { node: node(&format!("stopped-{i}"), "test"), ..sotw_req(CLUSTER, &[]) };
        stopped.push(RawStream::open(xds, 65_535, grpc_frame(&req)).await?);
    }
    let mut silent = Vec::with_capacity(SILENT);
    for i in 0..SILENT {
        let mut s = sotw_ads(xds).await;
        s.send(DiscoveryRequest { node: node(&format!("silent-{i}"), "test"), ..sotw_req(CLUSTER, &[]) }).await;
        let first = s.recv().await;
        ensure!(churn_edit(&first) == Some(1), "the first state");
        silent.push((s, first));
    }
    // Every stream has its first response (the stopped ones' part of it sent, the rest held).
    wait::until_true("every stream's first response", WAIT, async || {
        metric_sum(admin, "xdst_responses_total").await.unwrap_or(0.0) >= (STOPPED + SILENT) as f64
    })
    .await?;
    let baseline = xdst.rss()?;

    // The streams that answer follow the churn to its end.
    let polite: Vec<_> = (0..POLITE)
        .map(|i| {
            tokio::spawn(async move {
                let mut s = delta_ads(xds).await;
                s.send(DeltaDiscoveryRequest {
                    node: node(&format!("polite-{i}"), "test"),
                    ..delta_req(CLUSTER, &[], &[])
                })
                .await;
                let mut responses = 0;
                loop {
                    let r = s.recv().await;
                    responses += 1;
                    s.send(delta_ack(&r)).await;
                    let edit = r.resources.iter().find(|x| x.name == "churn");
                    let edit = edit.map(|x| Cluster::decode(x.resource.as_ref().unwrap().value.as_slice()).unwrap());
                    if edit.is_some_and(|c| c.connect_timeout.unwrap().seconds == i64::from(EDITS)) {
                        return responses;
                    }
                }
            })
        })
        .collect();
    for k in 2..=EDITS {
        write(dir.path(), "churn.yaml", &churn_cluster(k));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for p in polite {
        let responses = wait::within("a stream that answers to be current", WAIT, p).await??;
        eprintln!("[flow] a stream that answers got {responses} responses over the churn");
    }
    let grown = xdst.rss()?.saturating_sub(baseline);
    let (in_flight, owed, merged) = (
        metric_sum(admin, "xdst_responses_in_flight").await?,
        metric_sum(admin, "xdst_streams_owed").await?,
        metric_sum(admin, "xdst_changes_merged_total").await?,
    );
    eprintln!(
        "[flow] {STOPPED} streams stopped and {SILENT} silent over {EDITS} edits: RSS {} MiB, +{} KiB; \
         {in_flight} responses in flight, {owed} streams owed, {merged} changes merged",
        baseline >> 20,
        grown >> 10
    );
    ensure!(grown < SLOW_READER_GROWTH, "xdst's RSS grew by {} KiB over the churn", grown >> 10);
    ensure!(in_flight >= (STOPPED + SILENT) as f64, "{in_flight} responses in flight");
    ensure!(owed >= (STOPPED + SILENT) as f64, "{owed} streams owed a change");
    ensure!(metric_sum(admin, "xdst_refusals_total").await? == 0.0, "a stream was refused or reset");

    // The silent streams were sent nothing more; once they answer, the latest state.
    for (s, first) in &mut silent {
        s.send(sotw_req(ENDPOINT_PROBE.0, &[ENDPOINT_PROBE.1])).await;
        let probe = s
            .expect_nothing_before("a silent stream gets no second response", "the probe's answer", |r| {
                r.type_url == ENDPOINT_PROBE.0
            })
            .await;
        s.send(sotw_ack(&probe, &[ENDPOINT_PROBE.1])).await;
        s.send(sotw_ack(first, &[])).await;
        let latest = s.recv().await;
        ensure!(latest.type_url == CLUSTER && churn_edit(&latest) == Some(i64::from(EDITS)), "not the latest state");
    }
    // The stopped streams read again: their first response, then, once answered, the latest.
    for s in &mut stopped {
        let mut reader = s.reader().await?;
        let first: DiscoveryResponse = reader.next().await?;
        ensure!(churn_edit(&first) == Some(1), "a stopped stream's first response is the first state");
        s.body.send(Ok(hyper::body::Frame::data(grpc_frame(&sotw_ack(&first, &[]))))).await?;
        let latest: DiscoveryResponse = reader.next().await?;
        ensure!(churn_edit(&latest) == Some(i64::from(EDITS)), "a stopped stream caught up with an old state");
    }
    Ok(())
}

/// A probe of another type than the one under test, answered at once: the endpoints of one
/// of the test's clusters.
const ENDPOINT_PROBE: (&str, &str) = (xdst_core::types::ENDPOINT, "churn");

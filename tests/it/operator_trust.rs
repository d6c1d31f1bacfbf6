//! Issue 32: the operator's answers (`xdst wait`, `GET /changes/{id}`, the status page, CSDS)
//! must be true of what the clients hold, proven with real clients:
//!
//! 1. a grace expiry is not an ACK (a grpcio client that never acknowledges);
//! 2. a real Envoy that rejects its first RouteConfiguration is not current;
//! 3. an `api_listener` beside Envoy resources does not stall anyone's plan (two real Envoys
//!    and a proxyless grpcio client in one node group);
//! 4. another client's NACK under the same node id is not blamed on the real Envoy;
//! 5. one huge NACK message is kept and shown once, clipped, not multiplied.
//!
//! The raw client is `tests/clients/ads_client.py` (grpcio and the `xds-protos` stubs; see
//! `xdst_tests::ads_client`); Envoy's acceptance is read from its stats (`update_success`,
//! `update_rejected`: `../shared/REAL-CLIENTS.md`); the status page is read in headless
//! Chromium (`tests/clients/status_page.mjs`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};
use xdst_tests::ads_client::{AdsClient, Mode, Options};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy, Expect, Stats};
use xdst_tests::fixtures;
use xdst_tests::operator::{
    change_report, clip, csds, debug_node, latest_change, metric_sum, next_change, status_page, xdst_wait,
};
use xdst_tests::server::Process;
use xdst_tests::xds::http_get;

/// Every test's node group (the nodes' `node.cluster`, xdst's default group key).
const GROUP: &str = "trust";
const GRACE_METRIC: &str = "xdst_plan_grace_expired_total";

/// A STATIC cluster (Envoy needs no EDS for it) whose only endpoint nothing listens on.
fn static_cluster(name: &str, connect_timeout_s: u32) -> String {
    format!(
        r#""@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: {name}
type: STATIC
connect_timeout: {connect_timeout_s}s
load_assignment:
  cluster_name: {name}
  endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: 9}}}}}}}}]}}]
"#
    )
}

/// An Envoy in [`GROUP`] over SotW ADS.
async fn envoy(xdst: &Process, id: &str) -> anyhow::Result<Envoy> {
    let mut b = Bootstrap::new(ApiType::Sotw, xdst.xds_addr, id);
    b.node_cluster = GROUP.to_owned();
    Envoy::start(&b).await
}

/// `xdst serve --resources DIR` with a quick debounce and `--plan-grace GRACE`.
async fn serve(dir: &Path, grace: &str) -> anyhow::Result<Process> {
    Process::start(dir, "127.0.0.1:0", &["--plan-grace", grace, "--debounce", "20ms"]).await
}

/// Polls until `f` gives `Some`, within `timeout`; `what` names it on timeout
/// ([`xdst_tests::wait::until`]).
async fn until<T, F: std::future::Future<Output = anyhow::Result<Option<T>>>>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> F,
) -> anyhow::Result<T> {
    xdst_tests::wait::until(what, timeout, async || {
        Ok(match f().await? {
            Some(v) => xdst_tests::wait::Seen::Done(v),
            None => xdst_tests::wait::Seen::Not("nothing yet".into()),
        })
    })
    .await
}

/// Waits until xdst's grace expiries (`/metrics`) are more than `before`: proof that the
/// server proceeded without an ACK at least once since.
async fn grace_expired_since(admin: std::net::SocketAddr, before: f64, timeout: Duration) -> anyhow::Result<f64> {
    until("a grace expiry (xdst_plan_grace_expired_total)", timeout, || async move {
        let now = metric_sum(admin, GRACE_METRIC).await?;
        Ok((now > before).then_some(now))
    })
    .await
}

/// The status page's JSON, failing with everything it printed unless it says `ok`.
async fn page_ok(admin: std::net::SocketAddr, shots: &str, args: &[&str]) -> anyhow::Result<Value> {
    let v = status_page(admin, shots, args).await?;
    ensure!(v["ok"] == true, "the status page (headless Chromium) did not show what was expected: {v}");
    ensure!(v["console_errors"].as_array().is_some_and(Vec::is_empty), "console errors: {v}");
    Ok(v)
}

/// (1) A grace expiry is not an ACK. Real client: grpcio (`tests/clients/ads_client.py
/// --types cds --mode never-ack`), a client that takes its clusters and never answers. With
/// `--plan-grace 3s` the plan proceeds without it, but the node does not hold the change:
/// `xdst wait` times out naming it, `/changes/N` counts it pending, a second such client that
/// connects after the change does not hold it either, and the status page (Chromium) agrees.
/// The same node id that does ACK, on a fresh connection, makes the change live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grace_expiry_is_not_an_ack() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "c1.yaml", &static_cluster("c1", 1));
    let xdst = serve(dir.path(), "3s").await?;
    let admin = xdst.admin_addr;
    let client = |id: &str, mode: Mode| Options { mode, node_cluster: GROUP.into(), ..Options::new(xdst.xds_addr, id) };

    let mut hung = AdsClient::spawn(&client("hung-1", Mode::NeverAck)).await?;
    hung.wait_for("its first CDS response", Duration::from_secs(20), |e| e["event"] == "response").await?;
    let before = latest_change(admin).await?;
    let grace_before = metric_sum(admin, GRACE_METRIC).await?;
    fixtures::write(dir.path(), "c2.yaml", &static_cluster("c2", 1));
    let change = next_change(admin, before).await?;

    // The plan waits 3 s for the ACK of the new clusters (SOTW-3: a request with the new
    // version and nonce, which never comes), then proceeds without it: once it has, the server
    // has had every chance to count the node wrongly.
    grace_expired_since(admin, grace_before, Duration::from_secs(20)).await?;
    let (code, text) = xdst_wait(admin, change, "10s", &[]).await?;
    eprintln!("[wait] change {change}: exit {code}\n{text}");
    ensure!(
        code == 1,
        "xdst wait exited {code} for a change its only node never acknowledged (1: time ran out, expected):\n{text}"
    );
    ensure!(text.contains("waiting for hung-1"), "xdst wait does not name the node it waited for:\n{text}");
    let (report, _) = change_report(admin, change, None).await?;
    let g = &report["groups"][GROUP];
    ensure!(report["live"] == false && g["holding"] == 0, "a grace expiry counted as holding the change: {report}");
    ensure!(lists(&g["pending"], "hung-1"), "hung-1 is not pending: {report}");

    // A second client that never answers, connected after the change: its plan, too, runs out
    // of grace (the positive signal), and it holds nothing.
    let grace_before = metric_sum(admin, GRACE_METRIC).await?;
    let mut late = AdsClient::spawn(&client("hung-2", Mode::NeverAck)).await?;
    late.wait_for("its first CDS response", Duration::from_secs(20), |e| e["event"] == "response").await?;
    grace_expired_since(admin, grace_before, Duration::from_secs(20)).await?;
    let (report, _) = change_report(admin, change, None).await?;
    let g = &report["groups"][GROUP];
    ensure!(g["nodes"] == 2, "two nodes are connected: {report}");
    ensure!(
        report["live"] == false && g["holding"] == 0 && g["pending_count"] == 2,
        "a node that connected after the change and never acknowledged it counts as holding it: {report}"
    );

    // The status page, loaded now, says the same: nobody current, both on their way.
    let v = page_ok(
        admin,
        "operator-trust/grace",
        &["--expect-group", &format!("{GROUP}:nodes=2,current=0,pending=2"), "--shot", "grace"],
    )
    .await?;
    eprintln!("[status page] {}", v["groups"]);

    // Positive control: the same node id, ACKing on a fresh connection, holds it.
    hung.close().await?;
    late.close().await?;
    let mut acking = AdsClient::spawn(&client("hung-1", Mode::Ack)).await?;
    acking.wait_for("its ACK", Duration::from_secs(20), |e| e["event"] == "ack").await?;
    let (code, text) = xdst_wait(admin, change, "10s", &[]).await?;
    ensure!(code == 0 && text.contains("1 nodes in 1 groups hold it"), "the ACKing client ({code}):\n{text}");
    acking.close().await?;
    Ok(())
}

/// Resources whose RouteConfiguration `local` Envoy refuses and xdst accepts: two virtual
/// hosts with the domain `*` (Envoy: "Only a single wildcard domain is permitted").
fn refused_route_dir(dir: &Path) {
    fixtures::write(dir, "listener.yaml", &fixtures::listener("http", 0, "local"));
    fixtures::write(
        dir,
        "route.yaml",
        r#""@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: local
virtual_hosts:
- name: one
  domains: ["*"]
  routes: [{match: {prefix: /}, route: {cluster: backend}}]
- name: two
  domains: ["*"]
  routes: [{match: {prefix: /}, route: {cluster: backend}}]
"#,
    );
    fixtures::write(dir, "cluster.yaml", &fixtures::cluster("backend", 9));
}

/// (2) A node that rejects its first config is not current. Real client: Envoy, whose first
/// RouteConfiguration it refuses (two virtual hosts with domain `*`); its NACK is proven by
/// `http.http.rds.local.update_rejected`. `xdst wait` exits 2 naming it, `/changes` counts it
/// rejected and not holding, and the status page (Chromium) shows current 0, rejected 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_rejects_its_first_config_is_not_current() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    refused_route_dir(dir.path());
    let xdst = serve(dir.path(), "3s").await?;
    let admin = xdst.admin_addr;
    let e = envoy(&xdst, "envoy-bad").await?;
    // Envoy NACKs (SOTW-3: error_detail set, version_info left as it was) and counts it here.
    let rejected = "http.http.rds.local.update_rejected";
    let stats = e.wait_for(&Expect::new().at_least(rejected, 1), Duration::from_secs(20)).await?;
    ensure!(
        stats.count("http.http.rds.local.update_success") == 0,
        "Envoy accepted the route:\n{}",
        stats.xds_related()
    );
    let change = latest_change(admin).await?.context("no change")?;

    let (code, text) = xdst_wait(admin, change, "10s", &[]).await?;
    eprintln!("[wait] change {change}: exit {code}\n{text}");
    ensure!(code == 2, "xdst wait exited {code} for a change its only node rejected (2 expected):\n{text}");
    ensure!(
        text.lines().any(|l| l.trim_start().starts_with("envoy-bad") && l.contains("rejected its rds")),
        "xdst wait does not name the rejecting node:\n{text}"
    );
    let (report, _) = change_report(admin, change, None).await?;
    let g = &report["groups"][GROUP];
    ensure!(
        report["live"] == false && g["holding"] == 0 && g["rejected_count"] == 1,
        "the node that rejected its first route configuration: {report}"
    );
    ensure!(g["rejected"][0]["node"] == "envoy-bad", "{report}");

    let v = page_ok(
        admin,
        "operator-trust/first-config",
        &["--expect-group", &format!("{GROUP}:current=0,rejected=1"), "--nacks", "1", "--shot", "rejected"],
    )
    .await?;
    let nacks = v["nacks"].as_array().cloned().unwrap_or_default();
    ensure!(nacks.iter().any(|n| n["node"] == "envoy-bad"), "the page shows no rejection by envoy-bad: {v}");
    Ok(())
}

/// A gRPC backend for `tests/clients/xds_client.py` (`/xdst.test.Echo/Say`, raw bytes; replies
/// `NAME:` + request) that answers its first call at once and holds every later one until
/// released: the client stays connected, retrying, for as long as the test needs it.
struct GatedEcho {
    port: u16,
    answered: Arc<AtomicUsize>,
    open: Arc<AtomicBool>,
    opened: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GatedEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Gate {
    answered: Arc<AtomicUsize>,
    open: Arc<AtomicBool>,
    opened: Arc<tokio::sync::Notify>,
}

impl tonic::server::NamedService for Gate {
    const NAME: &'static str = "xdst.test.Echo";
}

impl tower::Service<http::Request<tonic::body::Body>> for Gate {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let gate = self.clone();
        Box::pin(async move {
            if req.uri().path() != "/xdst.test.Echo/Say" {
                return Ok(tonic::Status::unimplemented(req.uri().path().to_owned()).into_http());
            }
            Ok(tonic::server::Grpc::new(RawCodec).unary(gate, req).await)
        })
    }
}

impl tonic::server::UnaryService<bytes::Bytes> for Gate {
    type Response = bytes::Bytes;
    type Future = futures::future::BoxFuture<'static, Result<tonic::Response<bytes::Bytes>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<bytes::Bytes>) -> Self::Future {
        let gate = self.clone();
        Box::pin(async move {
            loop {
                let opened = gate.opened.notified();
                if gate.answered.load(Ordering::SeqCst) == 0 || gate.open.load(Ordering::SeqCst) {
                    break;
                }
                opened.await;
            }
            gate.answered.fetch_add(1, Ordering::SeqCst);
            let mut reply = b"gated:".to_vec();
            reply.extend_from_slice(request.get_ref());
            Ok(tonic::Response::new(reply.into()))
        })
    }
}

/// Messages as they are: the echo service's requests and replies are raw bytes.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = bytes::Bytes;
    type Decode = bytes::Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = bytes::Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: bytes::Bytes, dst: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), tonic::Status> {
        bytes::BufMut::put(dst, item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = bytes::Bytes;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Option<bytes::Bytes>, tonic::Status> {
        let n = bytes::Buf::remaining(src);
        Ok(Some(bytes::Buf::copy_to_bytes(src, n)))
    }
}

impl GatedEcho {
    async fn start() -> anyhow::Result<GatedEcho> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let gate = Gate {
            answered: Arc::new(AtomicUsize::new(0)),
            open: Arc::new(AtomicBool::new(false)),
            opened: Arc::new(tokio::sync::Notify::new()),
        };
        let (answered, open, opened) = (gate.answered.clone(), gate.open.clone(), gate.opened.clone());
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder().add_service(gate).serve_with_incoming(incoming).await;
        });
        Ok(GatedEcho { port, answered, open, opened, task })
    }

    fn release(&self) {
        self.open.store(true, Ordering::SeqCst);
        self.opened.notify_waiters();
    }
}

/// Envoy resources (listener `http` on port 0 -> route `local` -> cluster `backend`) and, in
/// the same directory, what a proxyless gRPC client of `xds:///echo` needs: Listener `echo`
/// with an `api_listener` naming route `echo-routes` (which no Envoy asks for), cluster
/// `echo-cluster` (EDS, its connect timeout `timeout_s`) with its endpoint on `port`.
fn mixed_dir(dir: &Path, port: u16, timeout_s: u32) {
    fixtures::write(dir, "http.yaml", &fixtures::listener("http", 0, "local"));
    fixtures::write(dir, "local.yaml", &fixtures::route("local", "backend"));
    fixtures::write(dir, "backend.yaml", &fixtures::cluster("backend", 9));
    fixtures::write(dir, "echo-listener.yaml", &fixtures::api_listener("echo", "echo-routes"));
    fixtures::write(dir, "echo-routes.yaml", &fixtures::route("echo-routes", "echo-cluster"));
    echo_cluster(dir, port, timeout_s);
}

fn echo_cluster(dir: &Path, port: u16, timeout_s: u32) {
    let cluster = fixtures::cluster("echo-cluster", port)
        .replace("connect_timeout: 1s", &format!("connect_timeout: {timeout_s}s"));
    fixtures::write(dir, "echo-cluster.yaml", &cluster);
}

/// The counters that say which types an Envoy accepted.
const ACCEPTED: [&str; 3] =
    ["listener_manager.lds.update_success", "cluster_manager.cds.update_success", "http.http.rds.local.update_success"];

/// (3) An `api_listener` beside Envoy resources does not stall plans. Real clients: two
/// Envoys (SotW ADS) and a proxyless grpcio client (`tests/clients/xds_client.py`, calling
/// `xds:///echo` through to a gRPC backend) in one node group, whose listeners include one with
/// an `api_listener` (its route is asked for by the gRPC client only: Envoy ignores it). A
/// change to one cluster reaches all three in one round trip: no grace expiry (a stall would
/// be one: `--plan-grace 30s` turns it into a wait timeout), each Envoy's CDS `update_success`
/// moves by one and LDS and RDS not at all, and `xdst wait` says 3 nodes hold it, promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_listener_beside_envoy_resources_does_not_stall_plans() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let echo = GatedEcho::start().await?;
    let dir = tempfile::tempdir()?;
    mixed_dir(dir.path(), echo.port, 2);
    let xdst = serve(dir.path(), "30s").await?;
    let admin = xdst.admin_addr;
    let a = envoy(&xdst, "envoy-a").await?;
    let b = envoy(&xdst, "envoy-b").await?;
    let bootstrap = json!({
        "xds_servers": [{"server_uri": xdst.xds_addr.to_string(), "channel_creds": [{"type": "insecure"}]}],
        "node": {"id": "grpc-1", "cluster": GROUP, "locality": {"zone": "z1"}},
    });
    // Three calls: the first is answered (the client resolved xds:///echo through xdst), the
    // others wait at the backend until released, so the client stays connected meanwhile.
    let mut cmd = tokio::process::Command::new(xdst_tests::python());
    cmd.arg(xdst_tests::repo_root().join("tests/clients/xds_client.py"));
    // Its deadline only has to outlast the test, on a loaded machine too.
    let grpc = xdst_tests::proxyless_echo_client(cmd, &bootstrap, 3, 300).context("starting xds_client.py")?;
    let grpc = tokio::spawn(grpc.wait_with_output());

    let answered = echo.answered.clone();
    until("the gRPC client's first call through xds:///echo", Duration::from_secs(30), || {
        let answered = answered.clone();
        async move { Ok((answered.load(Ordering::SeqCst) >= 1).then_some(())) }
    })
    .await?;
    let configured = ACCEPTED.iter().fold(Expect::new(), |e, s| e.at_least(*s, 1));
    for e in [&a, &b] {
        e.wait_for(&configured, Duration::from_secs(20)).await?;
    }
    // The first configuration is live on all three before the change.
    let first = latest_change(admin).await?.context("no change")?;
    let (code, text) = xdst_wait(admin, first, "20s", &[]).await?;
    ensure!(code == 0, "the first configuration did not go live within 20 s ({code}):\n{text}");

    let grace_before = metric_sum(admin, GRACE_METRIC).await?;
    let before: Vec<Stats> = vec![a.stats().await?, b.stats().await?];
    echo_cluster(dir.path(), echo.port, 3);
    let change = next_change(admin, Some(first)).await?;
    let started = Instant::now();
    let (code, text) = xdst_wait(admin, change, "20s", &[]).await?;
    let took = started.elapsed();
    eprintln!("[wait] change {change}: exit {code} after {took:?}\n{text}");
    ensure!(code == 0, "a cluster change did not reach every node within 20 s ({code}):\n{text}");
    ensure!(text.contains("3 nodes in 1 groups hold it"), "{text}");

    // It went live without the grace period: no plan proceeded without an ACK.
    let grace = metric_sum(admin, GRACE_METRIC).await?;
    ensure!(grace == grace_before, "{GRACE_METRIC} moved from {grace_before} to {grace}");
    for id in ["envoy-a", "envoy-b", "grpc-1"] {
        let n = debug_node(admin, id).await?.with_context(|| format!("{id} is not in /debug/nodes"))?;
        ensure!(n["plan"]["grace_expiries"] == 0, "{id}'s plan waited out its grace: {}", n["plan"]);
    }
    // Each Envoy accepted the clusters once and was sent no listener or route (SOTW-5: an
    // unchanged set is not sent again): the ACKs `xdst wait` saw were sent after Envoy counted
    // them, so these counts are final.
    for (e, before) in [&a, &b].into_iter().zip(&before) {
        let expect = Expect::new()
            .count(ACCEPTED[1], before.count(ACCEPTED[1]) + 1)
            .unchanged(before, &[ACCEPTED[0], ACCEPTED[2]]);
        e.wait_for(&expect, Duration::from_secs(5)).await?;
    }

    echo.release();
    let out = tokio::time::timeout(Duration::from_secs(60), grpc).await.context("xds_client.py hung")???;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).with_context(|| {
        format!("xds_client.py printed {stdout:?}; stderr: {}", clip(&String::from_utf8_lossy(&out.stderr), 4000))
    })?;
    ensure!(
        result["ok"] == true && result["replies"] == json!(["gated:hello-0", "gated:hello-1", "gated:hello-2"]),
        "the gRPC client's calls: {result}"
    );
    Ok(())
}

/// (4) Another client's NACK is not blamed on the real node. Real clients: an Envoy with node
/// id `envoy-1` and a grpcio clone (`ads_client.py --mode nack`) with the same node id and
/// cluster from the same address, connected after it. After a cluster change the Envoy holds
/// it (its CDS `update_success` moves) and the rejection is the clone's: `xdst wait` names
/// client 2 and never envoy-1 (client 1) as rejecting, `/changes` lists the clone with
/// `"client": 2`, a second change still reaches the Envoy, and the status page (Chromium)
/// shows the Envoy current and the clone's rejection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_nack_is_not_blamed_on_the_real_node() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "listener.yaml", &fixtures::listener("http", 0, "local"));
    fixtures::write(dir.path(), "route.yaml", &fixtures::route("local", "backend"));
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    fixtures::write(dir.path(), "spare.yaml", &static_cluster("spare", 1));
    let xdst = serve(dir.path(), "3s").await?;
    let admin = xdst.admin_addr;
    let e = envoy(&xdst, "envoy-1").await?;
    let configured = ACCEPTED.iter().fold(Expect::new(), |x, s| x.at_least(*s, 1));
    e.wait_for(&configured, Duration::from_secs(20)).await?;
    let first = latest_change(admin).await?.context("no change")?;
    let (code, text) = xdst_wait(admin, first, "20s", &[]).await?;
    ensure!(code == 0, "the Envoy alone did not take its first configuration ({code}):\n{text}");

    // The clone: same node id, same cluster, same address; it rejects every response
    // (SOTW-3), each one once: xdst never sends it the same rejected bytes again.
    let mut clone = AdsClient::spawn(&Options {
        mode: Mode::Nack,
        node_cluster: GROUP.into(),
        ..Options::new(xdst.xds_addr, "envoy-1")
    })
    .await?;
    let nack = clone.wait_for("the clone's first NACK", Duration::from_secs(20), |e| e["event"] == "nack").await?;
    ensure!(clone.errors().is_empty(), "xdst refused the clone's stream: {:?}", clone.errors());
    let mut nacked = nack["version"].clone();

    for (round, timeout_s) in [(1, 2), (2, 3)] {
        let before = e.stats().await?;
        let previous = latest_change(admin).await?;
        fixtures::write(dir.path(), "spare.yaml", &static_cluster("spare", timeout_s));
        let change = next_change(admin, previous).await?;
        // Both got it: the Envoy accepted the clusters, the clone rejected them.
        let cds = "cluster_manager.cds.update_success";
        e.wait_for(&Expect::new().count(cds, before.count(cds) + 1), Duration::from_secs(20))
            .await
            .with_context(|| format!("change {round}: the Envoy did not get the new clusters"))?;
        let stats = e.stats().await?;
        ensure!(stats.count("cluster_manager.cds.update_rejected") == 0, "the Envoy rejected clusters");
        let nack = clone
            .wait_for("the clone's NACK of the change", Duration::from_secs(20), |e| {
                e["event"] == "nack" && e["version"] != nacked
            })
            .await?;
        nacked = nack["version"].clone();

        let (code, text) = xdst_wait(admin, change, "10s", &[]).await?;
        eprintln!("[wait] change {change} (round {round}): exit {code}\n{text}");
        // A line naming envoy-1 that is not the clone's is about the Envoy: as a rejecter (bare,
        // or as client 1) or as waited for, while it holds the change.
        let about_the_envoy = text
            .lines()
            .map(str::trim_start)
            .find(|l| (l.starts_with("envoy-1") || l.starts_with("waiting for envoy-1")) && !l.contains("(client 2"));
        ensure!(
            about_the_envoy.is_none(),
            "round {round}: xdst wait says {about_the_envoy:?} of the Envoy, which holds it:\n{text}"
        );
        ensure!(
            code == 2 && text.contains("client 2") && text.contains("rejected its cds"),
            "round {round}: xdst wait ({code}) does not name the clone (client 2) as the rejecter:\n{text}"
        );
        let (report, _) = change_report(admin, change, None).await?;
        let g = &report["groups"][GROUP];
        ensure!(g["holding"] == 1, "round {round}: the Envoy is not counted as holding the change: {report}");
        let rejected = g["rejected"].as_array().cloned().unwrap_or_default();
        ensure!(
            !rejected.is_empty() && rejected.iter().all(|r| r["node"] == "envoy-1" && r["client"] == 2),
            "round {round}: the rejection is not listed as the clone's (node envoy-1, client 2): {report}"
        );
    }

    let v = page_ok(
        admin,
        "operator-trust/clone",
        &[
            "--expect-group",
            &format!("{GROUP}:current=1,rejected=1"),
            "--node-row",
            "envoy-1",
            "--nacks",
            "1",
            "--shot",
            "clone",
        ],
    )
    .await?;
    let rows = v["node_rows"].as_array().cloned().unwrap_or_default();
    ensure!(rows.iter().any(|r| r["plan"] == "in sync"), "no row of envoy-1 is in sync: {v}");
    let nacks = v["nacks"].as_array().cloned().unwrap_or_default();
    ensure!(
        !nacks.is_empty() && nacks.iter().all(|n| n["text"].as_str().is_some_and(|t| t.contains("client 2"))),
        "the page's rejections are not the clone's (client 2): {v}"
    );
    clone.close().await?;
    Ok(())
}

/// What the operator reads in test 5, and the most any one of them may be.
const MAX_ANSWER: usize = 10 << 20;
const MAX_RSS: u64 = 300 << 20;
/// Past this, xdst is killed rather than left to take the machine (the unclipped server's
/// CSDS answer would need 1,000 copies of each node's 4 MB message).
const RSS_KILL: u64 = 2 << 30;
const CLIENTS: usize = 20;
const NACK_BYTES: usize = 4_190_000;
/// How long test 5 waits for any one answer.
const ASK: Duration = Duration::from_secs(5);

/// (5) One NACK message is not multiplied. Real client: grpcio (`ads_client.py --clients 20
/// --node-id-suffix --types cds --mode nack --nack-message-bytes 4190000`: 20 nodes, each
/// rejecting all of 1,000 clusters with a message just under the 4 MiB request limit). xdst
/// stays under 300 MB; `/status/summary`, `/status/nodes`, `/debug/nodes`, `/changes/N` (and
/// `?group=`) and a CSDS `FetchClientStatus` (`csds_client.py`) each answer in under 10 MB,
/// the message clipped (under 5 KB); `xdst wait` answers (exit 2 naming the rejecters).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_nack_message_is_not_multiplied() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    let clusters: String = (0..1000).map(|i| static_cluster(&format!("c{i:04}"), 1)).collect::<Vec<_>>().join("---\n");
    fixtures::write(dir.path(), "clusters.yaml", &clusters);
    // No plan proceeds on its own during the test: each stops on its NACK. The log goes to a
    // file: an unclipped message would be logged whole, 4 MB a line.
    let logs = tempfile::tempdir()?;
    let log = logs.path().join("xdst.log");
    let args: Vec<std::ffi::OsString> =
        ["--resources".as_ref(), dir.path().as_os_str(), "--plan-grace".as_ref(), "120s".as_ref()]
            .into_iter()
            .map(Into::into)
            .collect();
    let options = xdst_tests::server::Options { log: Some(log.clone()), ..Default::default() };
    let xdst = Process::start_with_options("127.0.0.1:0", &args, &options).await?;
    let admin = xdst.admin_addr;
    let pid = xdst.child.id().context("xdst exited")? as i32;
    let killed = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let killed = killed.clone();
        tokio::spawn(async move {
            loop {
                let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|s| {
                        let kib = s.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
                        kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
                    })
                    .map(|kib| kib << 10);
                let Some(rss) = rss else { break };
                if rss > RSS_KILL {
                    // SAFETY: a plain kill(2) of the xdst this test started, by its pid.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    killed.store(true, Ordering::SeqCst);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    // The change every node is sent (and rejects): the first, read while xdst is idle.
    let change = latest_change(admin).await?.context("no change")?;
    let test_started = Instant::now();
    let mut nackers = AdsClient::spawn(&Options {
        clients: CLIENTS,
        suffix: true,
        mode: Mode::Nack,
        nack_message_bytes: NACK_BYTES,
        node_cluster: "flood".into(),
        ..Options::new(xdst.xds_addr, "nacker")
    })
    .await?;
    // Everything is measured before anything is judged, so that one run shows every failure.
    // Taking a NACK in is cheap unless the whole message is worked on once per resource; a
    // server that does is slow to do anything else, so every question has a time limit.
    let mut failures = Vec::new();
    let intake = test_started + Duration::from_secs(30);
    let sent =
        nackers.wait_each("NACK", intake.saturating_duration_since(Instant::now()), |e| e["event"] == "nack").await;
    ensure!(nackers.errors().is_empty(), "xdst ended NACKing streams: {:?}", nackers.errors());
    match sent {
        Ok(()) => eprintln!("[nacks] every client sent its NACK after {:?}", test_started.elapsed()),
        Err(e) => failures.push(format!("xdst did not send every client its clusters in time: {e:#}")),
    }
    // The server took every NACK in (none refused as too large).
    let mut counted = None;
    while Instant::now() < intake && counted.is_none_or(|n| n < CLIENTS as f64) {
        if let Ok(n) = tokio::time::timeout(ASK, metric_sum(admin, "xdst_nacks_total")).await {
            counted = Some(n?);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("[nacks] {counted:?} counted after {:?}", test_started.elapsed());
    match counted {
        Some(n) if n >= CLIENTS as f64 => {}
        Some(n) => failures.push(format!("xdst took in {n} of {CLIENTS} NACKs in {:?}", test_started.elapsed())),
        None => failures.push(format!(
            "xdst's /metrics never answered within {ASK:?} in the {:?} since the clients started",
            test_started.elapsed()
        )),
    }
    let paths = [
        "/status/summary".to_owned(),
        "/status/nodes?limit=200".to_owned(),
        "/debug/nodes".to_owned(),
        format!("/changes/{change}"),
        format!("/changes/{change}?group=flood"),
    ];
    let mut debug_nodes = String::new();
    for path in &paths {
        let started = Instant::now();
        let Ok((status, body)) = tokio::time::timeout(ASK, http_get(admin, path)).await else {
            failures.push(format!("GET {path} did not answer within {ASK:?}"));
            continue;
        };
        eprintln!("[answer] GET {path}: {status}, {} bytes in {:?}", body.len(), started.elapsed());
        ensure!(status == 200, "GET {path}: {status} {}", clip(&body, 2000));
        if body.len() > MAX_ANSWER {
            failures.push(format!("GET {path} answers {} bytes (at most {MAX_ANSWER})", body.len()));
        }
        if path == "/debug/nodes" {
            debug_nodes = body;
        }
    }
    let longest = serde_json::from_str(&debug_nodes).map_or(0, |v| longest_string(&v));
    if longest > 5000 {
        failures.push(format!("/debug/nodes shows a message of {longest} bytes (a NACK's message, unclipped)"));
    }

    let (code, text) = xdst_wait(admin, change, "10s", &[]).await?;
    eprintln!("[wait] change {change}: exit {code}\n{}", clip(&text, 4000));
    if code != 2 || !text.contains("nacker-") || !text.contains("rejected its cds") {
        failures.push(format!("xdst wait exited {code} (2, naming the rejecters, expected): {}", clip(&text, 2000)));
    }

    // Taking the NACKs in and answering every question above: at most 300 MB at any time.
    let (rss, peak) = (xdst.rss()?, xdst.peak_rss()?);
    eprintln!("[memory] rss {} MB, peak {} MB", rss >> 20, peak >> 20);
    if peak > MAX_RSS {
        failures.push(format!(
            "xdst's peak RSS was {} MB (now {} MB; at most {} MB)",
            peak >> 20,
            rss >> 20,
            MAX_RSS >> 20
        ));
    }

    eprintln!("[csds] asking after {:?}", test_started.elapsed());
    let answer = csds(xdst.xds_addr, &["--sizes", "--max-receive-mb", "64", "--timeout", "10"]).await?;
    eprintln!("[csds] {answer}");
    if killed.load(Ordering::SeqCst) {
        failures.push(format!("xdst's RSS passed {} MB while answering CSDS: killed", RSS_KILL >> 20));
    } else if answer["ok"] != true || answer["bytes"].as_u64().is_none_or(|b| b as usize > MAX_ANSWER) {
        failures.push(format!("CSDS FetchClientStatus: {answer} (at most {MAX_ANSWER} bytes expected)"));
    } else if answer["max_error_bytes"].as_u64().is_none_or(|b| b > 5000) || answer["nacked"] == 0 {
        failures.push(format!("CSDS shows the NACK unclipped or not at all: {answer}"));
    } else if let Ok(after) = xdst.peak_rss()
        && after > MAX_RSS
    {
        failures.push(format!(
            "xdst's peak RSS was {} MB after answering CSDS (at most {} MB)",
            after >> 20,
            MAX_RSS >> 20
        ));
    }
    watchdog.abort();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let longest_line = logged.lines().map(str::len).max().unwrap_or(0);
    eprintln!("[log] {} bytes, the longest line {longest_line} bytes", logged.len());
    if longest_line > 10_000 {
        failures.push(format!("xdst logged a line of {longest_line} bytes (the NACK's message, unclipped)"));
    }
    if !failures.is_empty() {
        bail!("one 4 MB NACK message per node was multiplied:\n- {}", failures.join("\n- "));
    }
    nackers.close().await?;
    Ok(())
}

/// Whether a list of nodes in a change report names node `id`: as the id itself, the id with
/// more after a space (`id (client 2, from ...)`), or an object whose `node` is the id.
fn lists(list: &Value, id: &str) -> bool {
    list.as_array().into_iter().flatten().any(|n| match n {
        Value::String(s) => s == id || s.strip_prefix(id).is_some_and(|rest| rest.starts_with(' ')),
        other => other["node"] == id,
    })
}

/// The length of the longest string anywhere in `v`.
fn longest_string(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(longest_string).max().unwrap_or(0),
        Value::Object(o) => o.values().map(longest_string).max().unwrap_or(0),
        _ => 0,
    }
}

/// Issue 33, item 9: a client with a 2,000,000-byte node id, and one whose node group (read
/// from `--node-group-key metadata:team`) is as long, are refused with INVALID_ARGUMENT naming
/// the limit, before they are reported anywhere. The replica's fleet report keeps being
/// published: a node that connects after them shows in `/debug/nodes?fleet=true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_node_ids_and_groups_are_refused_and_the_fleet_view_keeps_the_replica() -> anyhow::Result<()> {
    use envoy_types::pb::google::protobuf::{Struct, Value as PbValue, value::Kind};
    use xdst_core::types::CLUSTER;
    use xdst_tests::xds::{node, sotw_ads, sotw_req};
    xdst_tests::init_logging();
    let etcd = xdst_tests::etcd::Etcd::start(1).await?;
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("plugins"))?;
    xdst_tests::plugins::install(
        &dir.path().join("plugins"),
        &xdst_tests::plugins::reference()?,
        "reference.wasm",
        None,
    )?;
    std::fs::write(dir.path().join("token"), "t0ken")?;
    let extra = ["--replica-id", "replica-a", "--node-group-key", "metadata:team"];
    let xdst = Process::start_store(
        &etcd.url("/xdst-item9"),
        Some(&dir.path().join("plugins")),
        &dir.path().join("token"),
        &extra,
    )
    .await?;
    let huge = "n".repeat(2_000_000);
    let with_team = |id: &str, team: &str| {
        let mut n = node(id, "").unwrap();
        let fields = [("team".to_owned(), PbValue { kind: Some(Kind::StringValue(team.to_owned())) })];
        n.metadata = Some(Struct { fields: fields.into_iter().collect() });
        n
    };
    for (what, n, field) in [
        ("a 2,000,000-byte node id", with_team(&huge, "a"), "node.id is 2000000 bytes"),
        (
            "a 2,000,000-byte node group",
            with_team("long-group", &huge),
            "the node group (--node-group-key metadata:team) is 2000000 bytes",
        ),
    ] {
        let mut s = sotw_ads(xdst.xds_addr).await;
        s.send(envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest {
            node: Some(n),
            ..sotw_req(CLUSTER, &[])
        })
        .await;
        let status = s.closed_with().await;
        ensure!(
            status.code() == tonic::Code::InvalidArgument && status.message().contains(field),
            "{what}: {status:?}"
        );
    }
    let mut late = sotw_ads(xdst.xds_addr).await;
    late.send(envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest {
        node: Some(with_team("late-node", "a")),
        ..sotw_req(CLUSTER, &[])
    })
    .await;
    late.recv().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = xdst_tests::xds::http_get(xdst.admin_addr, "/debug/nodes?fleet=true").await;
        ensure!(status == 200, "{status} {body}");
        let v: Value = serde_json::from_str(&body)?;
        let ids: Vec<&str> = v["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["replica"] == "replica-a")
            .flat_map(|r| r["nodes"].as_array().into_iter().flatten().filter_map(|n| n["id"].as_str()))
            .collect();
        ensure!(!body.contains(&huge[..4096]), "a refused node is in the fleet view");
        if ids == ["late-node"] {
            break;
        }
        ensure!(Instant::now() < deadline, "the fleet view does not show replica-a's late node: {body:.2000}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

//! Issue 49, items 7 and 8: what a hostile web page or client on the xDS port's own address
//! could hold, against the real `xdst` binary with its default limits.
//!
//! - Item 7 (DNS rebinding): a loopback xDS port answers REST fetch
//!   (`POST /v3/discovery:*`) over HTTP/1 for loopback hosts only, as the admin port does: a
//!   request naming `evil.example` is refused with 421 (naming why), counted in
//!   `xdst_refusals_total{reason="xds_host"}`, while the right Host, grpcio (`:authority
//!   127.0.0.1:PORT`) and a real Envoy (`:authority xds_cluster`) are served.
//! - Item 8a: 1,100 connections from one address, each with an ADS stream that sent part of
//!   a message and never the rest, do not keep the real client of that address out: it is
//!   served while every one of those streams is still open, and they are closed once they
//!   have sent no complete request for 10 s; a client's streams are capped
//!   (`--max-streams-per-client`).
//! - Item 8b: a client that never reads what it is sent (HTTP/2 windows never replenished)
//!   pins no more than `--max-unread-bytes-per-client` in xdst: its streams whose responses
//!   do not move are reset, counted in `xdst_refusals_total{reason="unread_bytes"}`, and a
//!   client of the same address that reads is served meanwhile.

use std::time::{Duration, Instant};

use anyhow::ensure;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use xdst_core::types::CLUSTER;
use xdst_tests::ads_client::{AdsClient, Options};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::fixtures;
use xdst_tests::operator::metric_sum;
use xdst_tests::server::Process;
use xdst_tests::wait::{self, Seen};
use xdst_tests::xds::{RawStream, grpc_frame, http_with, node, sotw_ads, sotw_req};

/// `xdst_refusals_total{reason=...}` on the admin port.
async fn refusals(admin: std::net::SocketAddr, reason: &str) -> anyhow::Result<u64> {
    Ok(metric_sum(admin, &format!("xdst_refusals_total{{reason=\"{reason}\"}}")).await? as u64)
}

/// A REST fetch body for `path` (`endpoints` names the cluster's load assignment).
fn rest_body(path: &str) -> &'static str {
    if path == "endpoints" {
        r#"{"node": {"id": "rest", "cluster": "test"}, "resource_names": ["backend"]}"#
    } else {
        r#"{"node": {"id": "rest", "cluster": "test"}}"#
    }
}

/// Item 7: a page that rebinds its own name to 127.0.0.1 sends that name as Host: refused on
/// every REST path, reads nothing; loopback names are answered, gRPC clients are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_xds_port_answers_rest_fetch_for_loopback_hosts_only() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &[]).await?;
    let (xds, admin) = (xdst.xds_addr, xdst.admin_addr);
    let port = xds.port();
    let paths = ["clusters", "listeners", "routes", "endpoints"];
    let evil_with_port = format!("evil.example:{port}");
    let foreign = ["evil.example", evil_with_port.as_str(), "localhost.evil.example", "10.1.2.3", "127.1"];
    for host in foreign {
        for path in paths {
            let (status, body) =
                http_with(xds, "POST", &format!("/v3/discovery:{path}"), &[("Host", host)], rest_body(path)).await;
            ensure!(
                status == 421 && body.contains("localhost") && !body.contains("backend"),
                "POST /v3/discovery:{path} for Host {host}: {status} {body}"
            );
        }
    }
    for host in
        [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}"), "xdst.localhost".into()]
    {
        let (status, body) =
            http_with(xds, "POST", "/v3/discovery:clusters", &[("Host", &host)], rest_body("clusters")).await;
        ensure!(status == 200 && body.contains("backend"), "Host {host}: {status} {body}");
        let (status, body) =
            http_with(xds, "POST", "/v3/discovery:endpoints", &[("Host", &host)], rest_body("endpoints")).await;
        ensure!(status == 200 && body.contains("backend"), "Host {host}, endpoints: {status} {body}");
    }
    // gRPC over HTTP/2 is no browser's: grpcio's authority is the address it dials, Envoy's
    // the name of its xDS cluster; both are served.
    let mut grpcio = AdsClient::spawn(&Options::new(xds, "grpcio-client")).await?;
    grpcio
        .wait_for("grpcio's clusters", wait::patience(Duration::from_secs(20)), |e| {
            e["event"] == "response" && e["resources"] == 1
        })
        .await?;
    grpcio.close().await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xds, "envoy-rebinding")).await?;
    envoy
        .wait_for_stats("Envoy's clusters", wait::patience(Duration::from_secs(20)), |s| {
            s.count("cluster_manager.cds.update_success") >= 1 && s.count("cluster_manager.active_clusters") >= 2
        })
        .await?;
    // Counted once per refusal: this read comes after all of them.
    let refused = refusals(admin, "xds_host").await?;
    ensure!(refused == (foreign.len() * paths.len()) as u64, "xds_host refusals: {refused}");
    Ok(())
}

/// The attackers of item 8a.
const HALF_OPEN: usize = 1_100;

/// Item 8a: 1,100 connections from 127.0.0.1, each holding an ADS stream that sent 10 bytes
/// of a 64-byte message and nothing more (the connection is never idle: a request is in
/// flight), against the default 1,024 connections per client. The real client of the same
/// address (grpcio) connects and is served while every one of them is still open; then each
/// is closed for sending no complete request within 10 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_that_never_finish_a_request_hold_no_place() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &[]).await?;
    let (xds, admin) = (xdst.xds_addr, xdst.admin_addr);
    let part: bytes::Bytes = [&[0u8, 0, 0, 0, 64][..], &[0x0a; 10]].concat().into();
    let mut attackers = Vec::with_capacity(HALF_OPEN);
    for _ in 0..HALF_OPEN {
        attackers.push(RawStream::open(xds, 1 << 20, part.clone()).await?);
    }
    // The attack is in place once xdst holds a stream on every place the address has.
    wait::until("the half-open streams to hold every place", Duration::from_secs(30), async || {
        let open = metric_sum(admin, "xdst_streams").await?;
        Ok(Seen::holds(open >= 1_000.0, format!("xdst_streams {open}")))
    })
    .await?;
    let started = Instant::now();
    let mut real = AdsClient::spawn(&Options::new(xds, "real-client")).await?;
    let served = real
        .wait_for("the real client's clusters", wait::patience(Duration::from_secs(20)), |e| {
            e["event"] == "response" && e["resources"] == 1
        })
        .await;
    let timed_out = refusals(admin, "first_request").await?;
    let open = attackers.iter().filter(|a| !a.connection_closed()).count();
    eprintln!(
        "[edges] the real client: {:?} after {:?}; {open} of {HALF_OPEN} half-open connections open, {timed_out} \
         streams closed for no first request",
        served.as_ref().map(|_| "served"),
        started.elapsed()
    );
    served?;
    ensure!(timed_out == 0, "the real client was served only after {timed_out} half-open streams timed out");
    // Then the half-open streams are closed: no complete request within 10 s.
    wait::until("the half-open streams to be closed", Duration::from_secs(40), async || {
        let n = refusals(admin, "first_request").await?;
        Ok(Seen::holds(n >= 1_000, format!("first_request refusals {n}")))
    })
    .await?;
    let evicted = refusals(admin, "evicted_connection").await?;
    eprintln!("[edges] {evicted} connections that held nothing but half-open streams made way for new ones");
    ensure!(evicted as usize > HALF_OPEN - 1_024, "evicted connections: {evicted}");
    // The real client's stream outlived all of that and still carries changes.
    fixtures::write(dir.path(), "more.yaml", &fixtures::cluster("more", 9));
    real.wait_for("the change on the real client's stream", wait::patience(Duration::from_secs(20)), |e| {
        e["event"] == "response" && e["resources"] == 2
    })
    .await?;
    real.close().await?;
    Ok(())
}

/// Item 8a: a client's streams across its connections are capped; one past the cap is ended
/// with RESOURCE_EXHAUSTED naming the flag, and a place freed is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_streams_are_capped_across_its_connections() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &["--max-streams-per-client", "3"]).await?;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = sotw_ads(xdst.xds_addr).await;
        s.send(sotw_req(CLUSTER, &[])).await;
        s.recv().await;
        held.push(s);
    }
    let mut over = sotw_ads(xdst.xds_addr).await;
    over.send(sotw_req(CLUSTER, &[])).await;
    let status = over.closed_with().await;
    ensure!(
        status.code() == tonic::Code::ResourceExhausted && status.message().contains("--max-streams-per-client"),
        "the fourth stream: {status:?}"
    );
    ensure!(refusals(xdst.admin_addr, "streams_per_client").await? == 1, "not counted");
    drop(held.pop());
    wait::until("a freed place to be taken", Duration::from_secs(10), async || {
        let mut s = sotw_ads(xdst.xds_addr).await;
        s.send(sotw_req(CLUSTER, &[])).await;
        let first = wait::within("an answer", Duration::from_secs(5), s.next_or_status()).await?;
        Ok(match first {
            Ok(_) => Seen::Done(s),
            Err(status) => Seen::Not(format!("{status:?}")),
        })
    })
    .await?;
    Ok(())
}

/// Clusters in the never-read test: with 200-character names, its CDS response is about
/// 2 MiB.
const BIG_CLUSTERS: usize = 8_000;
/// Streams of the client that never reads.
const NEVER_READ: usize = 100;

/// Item 8b: 100 streams whose client never reads (windows of 64 KiB, never replenished), each
/// asking for a 2 MiB CDS response: xdst pins at most `--max-unread-bytes-per-client` (64 MiB
/// by default) for them, resets the streams whose bytes do not move, and serves a client of the
/// same address that reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_bounded() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    let docs: Vec<String> =
        (0..BIG_CLUSTERS).map(|i| fixtures::cluster(&format!("c{i:05}-{}", "x".repeat(200)), 9)).collect();
    fixtures::write(dir.path(), "many.yaml", &docs.join("---\n"));
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &[]).await?;
    let (xds, admin) = (xdst.xds_addr, xdst.admin_addr);
    let started = Instant::now();
    let mut reader = sotw_ads(xds).await;
    reader.send(sotw_req(CLUSTER, &[])).await;
    let first = reader.recv().await;
    eprintln!("[edges] a client that reads got its clusters in {:?}", started.elapsed());
    let size = prost::Message::encoded_len(&first);
    ensure!(first.resources.len() == BIG_CLUSTERS, "{} clusters", first.resources.len());
    let baseline = xdst.rss()?;
    eprintln!("[edges] one CDS response is {size} bytes; xdst's RSS {} MiB", baseline >> 20);

    let mut never_read = Vec::with_capacity(NEVER_READ);
    for i in 0..NEVER_READ {
        let req = DiscoveryRequest { node: node(&format!("never-reads-{i}"), "test"), ..sotw_req(CLUSTER, &[]) };
        never_read.push(RawStream::open(xds, 65_535, grpc_frame(&req)).await?);
    }
    let closed = wait::until("a stream that does not read to be reset", Duration::from_secs(30), async || {
        let n = refusals(admin, "unread_bytes").await?;
        let sent = metric_sum(admin, "xdst_responses_total").await?;
        let grown = xdst.peak_rss()?.saturating_sub(baseline) >> 20;
        Ok(Seen::when(n > 0, n, format!("unread_bytes refusals {n}, responses sent {sent}, peak RSS +{grown} MiB")))
    })
    .await;
    let grown = xdst.peak_rss()?.saturating_sub(baseline);
    eprintln!(
        "[edges] {NEVER_READ} streams that never read: xdst's peak RSS +{} MiB (+{} KiB a stream)",
        grown >> 20,
        (grown >> 10) / NEVER_READ as u64
    );
    closed?;
    // A client of the same address that reads is served while they are there.
    let started = Instant::now();
    let mut fresh = sotw_ads(xds).await;
    fresh.send(sotw_req(CLUSTER, &[])).await;
    let got = wait::within("the reading client's clusters", Duration::from_secs(30), fresh.next_or_status()).await?;
    ensure!(
        got.as_ref().is_ok_and(|r| r.resources.len() == BIG_CLUSTERS),
        "the reading client: {:?}",
        got.map(|r| r.resources.len())
    );
    eprintln!("[edges] a client that reads was served in {:?}", started.elapsed());
    // Every stream that does not read has had its turn: all but what fits are reset.
    let fits = (64usize << 20) / size;
    wait::until("the streams that do not read to be reset", Duration::from_secs(60), async || {
        let n = refusals(admin, "unread_bytes").await?;
        Ok(Seen::holds(n as usize + fits + 1 >= NEVER_READ, format!("unread_bytes refusals {n}")))
    })
    .await?;
    let grown = xdst.peak_rss()?.saturating_sub(baseline);
    eprintln!("[edges] after every stream had its turn: peak RSS +{} MiB", grown >> 20);
    ensure!(grown < 128 << 20, "xdst's peak RSS grew by {} MiB", grown >> 20);
    // What the client sees, once it looks: the stream was reset (ENHANCE_YOUR_CALM, which gRPC
    // clients report as RESOURCE_EXHAUSTED) or, where a reset could not reach it, its
    // connection closed.
    let ends = futures::future::join_all(never_read.into_iter().map(|s| async move {
        let Ok(Ok(resp)) = s.response.await else { return "no response".to_owned() };
        let mut body = resp.into_body();
        loop {
            let next =
                wait::within("the body's end", Duration::from_secs(2), http_body_util::BodyExt::frame(&mut body));
            match next.await {
                Ok(Some(Ok(_))) => continue,
                Ok(other) => return format!("{other:?}"),
                Err(_) => return "still open".to_owned(),
            }
        }
    }))
    .await;
    let reset = ends.iter().filter(|e| e.contains("ENHANCE_YOUR_CALM")).count();
    eprintln!("[edges] {reset} of {NEVER_READ} streams saw RST_STREAM ENHANCE_YOUR_CALM");
    ensure!(reset > 0, "no stream was reset with ENHANCE_YOUR_CALM");
    let _ = reader;
    Ok(())
}

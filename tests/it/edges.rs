//! Issue 49, items 7 and 8: what a hostile web page or client on the xDS port's own address
//! could hold, against the real `xdst` binary with its default limits.
//!
//! - Item 7 (DNS rebinding): a loopback xDS port answers REST fetch
//!   (`POST /v3/discovery:*`) over HTTP/1 for loopback hosts only, as the admin port does: a
//!   request naming `evil.example` is refused with 421 (naming why), counted in
//!   `xdst_refusals_total{reason="xds_host"}`, while the right Host, grpcio (`:authority
//!   127.0.0.1:PORT`) and a real Envoy (`:authority xds_cluster`) are served.

use std::time::Duration;

use anyhow::ensure;
use xdst_tests::ads_client::{AdsClient, Options};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::fixtures;
use xdst_tests::operator::metric_sum;
use xdst_tests::server::Process;
use xdst_tests::wait;
use xdst_tests::xds::http_with;

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

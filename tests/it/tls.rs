//! Issue 17, "What to build" 1: TLS on the xDS port, and a certificate rotated on disk
//! without a restart.
//!
//! A real Envoy (SotW, then Delta) whose `xds_cluster` speaks TLS (trusting the test's CA and
//! checking `DNS:localhost`) is configured by `xdst serve --tls-cert --tls-key` and proxies to
//! upstream `a`. The server certificate is then replaced on disk by one with another subject:
//! a new handshake (`openssl s_client`) sees the new one, while Envoy's open xDS connection
//! stays up (its connection count to `xds_cluster` does not move) and still carries the next
//! change (the endpoints move to upstream `b`, and Envoy follows). A plaintext gRPC connection
//! to the TLS port gets nothing.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy, Expect};
use xdst_tests::fixtures;
use xdst_tests::pki::Ca;
use xdst_tests::server::Process;
use xdst_tests::upstream::{Upstream, wait_for_body};

const WAIT: Duration = Duration::from_secs(20);
const CONNECTED: &str = "control_plane.connected_state";
const XDS_CONNECTIONS: &str = "cluster.xds_cluster.upstream_cx_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_sotw_over_tls_keeps_its_stream_through_a_certificate_rotation() -> anyhow::Result<()> {
    scenario(ApiType::Sotw).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_delta_over_tls_keeps_its_stream_through_a_certificate_rotation() -> anyhow::Result<()> {
    scenario(ApiType::Delta).await
}

async fn scenario(api: ApiType) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let started = Instant::now();
    let pki = tempfile::Builder::new().prefix("xdst-tls-").tempdir()?;
    let ca = Ca::new(pki.path(), "test-ca")?;
    let first = ca.issue("xdst-first", &["DNS:localhost", "IP:127.0.0.1"])?;
    let (cert, key) = (pki.path().join("server.pem"), pki.path().join("server.key"));
    replace(&first.cert, &cert)?;
    replace(&first.key, &key)?;

    let a = Upstream::start("a").await?;
    let b = Upstream::start("b").await?;
    let res = tempfile::Builder::new().prefix("xdst-tls-res-").tempdir()?;
    let dir = res.path();
    fixtures::write(dir, "listener.yaml", &fixtures::listener("http", 0, "local"));
    fixtures::write(dir, "route.yaml", &fixtures::route("local", "backend"));
    fixtures::write(dir, "backend.yaml", &fixtures::cluster("backend", a.addr.port()));
    let args = ["--tls-cert", &cert.display().to_string(), "--tls-key", &key.display().to_string()];
    let xdst = Process::start(dir, "127.0.0.1:0", &args).await?;

    let node = format!("envoy-tls-{}", api.as_str().to_ascii_lowercase());
    let mut bootstrap = Bootstrap::new(api, xdst.xds_addr, &node);
    bootstrap.tls_ca = Some(ca.cert.clone());
    eprintln!("[{node}] xdst up after {:?}", started.elapsed());
    let envoy = Envoy::start(&bootstrap).await?;
    envoy
        .wait_for(
            &Expect::new()
                .count(CONNECTED, 1)
                .count("listener_manager.total_listeners_active", 1)
                .count("cluster.backend.membership_healthy", 1),
            WAIT,
        )
        .await
        .with_context(|| envoy.log_tail(30))?;
    let port = envoy.listener_port("http").await?.context("envoy has no active listener \"http\"")?;
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_for_body(proxy, "/", "a", WAIT).await?;
    ensure!(served_subject(xdst.xds_addr, pki.path())?.contains("xdst-first"));
    let connections = envoy.stats().await?.count(XDS_CONNECTIONS);
    ensure!(connections == 1, "Envoy opened {connections} connections to xds_cluster, not 1");
    eprintln!("[{node}] configured over TLS and proxying to a after {:?}", started.elapsed());

    // A plaintext client on the TLS port: the handshake fails, nothing is served.
    plaintext_gets_nothing(xdst.xds_addr).await?;

    // Rotate: new files in place (renamed over, as rotation tools do).
    let second = ca.issue("xdst-second", &["DNS:localhost", "IP:127.0.0.1"])?;
    replace(&second.key, &key)?;
    replace(&second.cert, &cert)?;
    let deadline = Instant::now() + WAIT;
    while !served_subject(xdst.xds_addr, pki.path())?.contains("xdst-second") {
        ensure!(Instant::now() < deadline, "new handshakes still get the first certificate after {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("[{node}] rotated: new handshakes get the second certificate after {:?}", started.elapsed());

    // The open stream still carries changes, on the same connection.
    fixtures::write(dir, "backend.yaml", &fixtures::cluster("backend", b.addr.port()));
    wait_for_body(proxy, "/", "b", WAIT).await?;
    let stats = envoy.stats().await?;
    ensure!(stats.count(CONNECTED) == 1, "Envoy lost its xDS stream");
    ensure!(
        stats.count(XDS_CONNECTIONS) == connections,
        "Envoy reconnected to xds_cluster during the rotation ({} connections)",
        stats.count(XDS_CONNECTIONS)
    );
    eprintln!("[{node}] the same connection carried the next change after {:?}", started.elapsed());
    envoy.kill().await?;
    Ok(())
}

/// Copies `from` to a temporary name beside `to`, then renames it over `to`.
fn replace(from: &Path, to: &Path) -> anyhow::Result<()> {
    let tmp = to.with_extension("tmp");
    std::fs::copy(from, &tmp)?;
    std::fs::rename(&tmp, to)?;
    Ok(())
}

/// The subject of the certificate a new TLS handshake with `addr` gets.
fn served_subject(addr: SocketAddr, dir: &Path) -> anyhow::Result<String> {
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-connect", &addr.to_string(), "-servername", "localhost", "-alpn", "h2"])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .context("running openssl s_client")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let subject = text.lines().find(|l| l.starts_with("subject=")).map(str::to_owned);
    subject.with_context(|| format!("no certificate from {addr}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// HTTP/2 prior knowledge in the clear to a TLS port: the server answers no HTTP at all.
async fn plaintext_gets_nothing(addr: SocketAddr) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").await?;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    ensure!(read.is_ok(), "a plaintext client on the TLS port was neither answered nor closed");
    // Nothing, or a TLS alert record (content type 21); an HTTP/2 server would send SETTINGS.
    ensure!(buf.is_empty() || buf[0] == 0x15, "the TLS port answered a plaintext client: {buf:?}");
    Ok(())
}

/// Issue 17, "What to build" 2: without client authentication, listening beyond loopback is
/// warned about at start, naming the port; on loopback it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_beyond_loopback_unauthenticated_is_warned_about() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    let log = dir.path().join("xdst.log");
    let options = xdst_tests::server::Options { env: Vec::new(), log: Some(log.clone()) };
    let args: Vec<std::ffi::OsString> = vec!["--resources".into(), dir.path().into()];
    let wide = Process::start_with_options("0.0.0.0:0", &args, &options).await?;
    drop(wide);
    let text = std::fs::read_to_string(&log)?;
    ensure!(text.contains("the xDS port listens beyond this host and clients are not authenticated"), "{text}");
    ensure!(!text.contains("the admin port listens beyond"), "the loopback admin port was warned about: {text}");

    let narrow = Process::start_with_options("127.0.0.1:0", &args, &options).await?;
    drop(narrow);
    let text = std::fs::read_to_string(&log)?;
    ensure!(!text.contains("listens beyond this host"), "a loopback-only server was warned about: {text}");
    Ok(())
}

/// Issue 17, must-show 4: the server certificate is rotated on disk while 100 Envoy-like
/// clients (one TLS connection and one SotW ADS stream each, distinct node ids, every
/// response acknowledged) are connected. A new handshake then gets the new certificate;
/// every one of the 100 streams stays open and carries the next change (a cluster added,
/// acknowledged), and a client connecting after the rotation is served too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_keeps_100_streams_and_new_connections_get_the_new_certificate() -> anyhow::Result<()> {
    use xdst_core::types::CLUSTER;
    use xdst_tests::pki::tls_channel;
    use xdst_tests::xds::{node, sotw_ack, sotw_ads_on, sotw_req};
    const STREAMS: usize = 100;
    xdst_tests::init_logging();
    let pki = tempfile::Builder::new().prefix("xdst-tls-100-").tempdir()?;
    let ca = Ca::new(pki.path(), "test-ca")?;
    let first = ca.issue("xdst-first", &["DNS:localhost", "IP:127.0.0.1"])?;
    let (cert, key) = (pki.path().join("server.pem"), pki.path().join("server.key"));
    replace(&first.cert, &cert)?;
    replace(&first.key, &key)?;
    let res = tempfile::tempdir()?;
    fixtures::write(res.path(), "backend.yaml", &fixtures::cluster("backend", 8080));
    let xdst = xdst::start(xdst::Settings {
        xds_addr: "127.0.0.1:0".parse()?,
        admin_addr: "127.0.0.1:0".parse()?,
        resources: Some(res.path().to_owned()),
        resync: Duration::from_millis(500),
        shutdown_grace: Duration::from_secs(1),
        tls: xdst::cli::settings::TlsSettings {
            tls_cert: Some(cert.clone()),
            tls_key: Some(key.clone()),
            tls_client_ca: None,
        },
        ..Default::default()
    })
    .await?;
    let request = |i: usize| envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest {
        node: node(&format!("envoy-{i}"), "test"),
        ..sotw_req(CLUSTER, &[])
    };
    let mut streams = Vec::with_capacity(STREAMS);
    let mut versions = Vec::with_capacity(STREAMS);
    for i in 0..STREAMS {
        let mut s = sotw_ads_on(tls_channel(xdst.xds_addr, &ca.cert, None).await?).await;
        s.send(request(i)).await;
        let r = s.recv().await;
        s.send(sotw_ack(&r, &[])).await;
        versions.push(r.version_info.clone());
        streams.push(s);
    }
    ensure!(
        xdst.serving.nodes.report(&xdst.serving.rollouts.report()).len() == STREAMS,
        "not every stream is registered"
    );
    ensure!(served_subject(xdst.xds_addr, pki.path())?.contains("xdst-first"));

    let second = ca.issue("xdst-second", &["DNS:localhost", "IP:127.0.0.1"])?;
    replace(&second.key, &key)?;
    replace(&second.cert, &cert)?;
    let deadline = Instant::now() + WAIT;
    while !served_subject(xdst.xds_addr, pki.path())?.contains("xdst-second") {
        ensure!(Instant::now() < deadline, "new handshakes still get the first certificate after {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Every stream is still open: each gets the next change (a new cluster) and acknowledges it.
    fixtures::write(res.path(), "extra.yaml", &fixtures::cluster("extra", 8081));
    for (s, before) in streams.iter_mut().zip(&versions) {
        let r = s.recv().await;
        ensure!(r.type_url == CLUSTER && r.version_info != *before, "a stream got {r:?} after the rotation");
        s.send(sotw_ack(&r, &[])).await;
    }
    ensure!(
        xdst.serving.nodes.report(&xdst.serving.rollouts.report()).len() == STREAMS,
        "a stream closed during the rotation"
    );
    let mut late = sotw_ads_on(tls_channel(xdst.xds_addr, &ca.cert, None).await?).await;
    late.send(request(STREAMS)).await;
    ensure!(!late.recv().await.resources.is_empty(), "a client connecting after the rotation got nothing");
    xdst.shutdown().await;
    Ok(())
}

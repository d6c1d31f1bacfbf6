//! Issue 17, must-shows 1 and 3: mTLS and node identity, with real Envoys.
//!
//! xdst serves two teams' node groups (`team-a`, `team-b`: subdirectories of the resources
//! directory) over mTLS, with identity rules: `spiffe://test/team-a/*` may use group `team-a`
//! with node ids `a-*`, team B likewise, and `spiffe://test/ops/*` (an operator's tool) any
//! group and node id. Team A's Envoy, presenting its certificate, is configured (SotW and
//! Delta) and proxies to upstream `a`; `/debug/nodes` shows its identity.
//!
//! Then six clients that must get nothing, each a real Envoy, each refused with its exact
//! reason, read from the refused Envoy's own log (the TLS alert, or the gRPC status and
//! message): no client certificate, a certificate from another CA, an expired certificate,
//! team A's certificate asking for team B's group (PERMISSION_DENIED), and (issue 33, item 5)
//! certificates whose subject CN or DNS SAN reads like the operator's SPIFFE ID (no rule
//! matches: a URI pattern matches URI SANs only). Each refused Envoy holds no listener and no
//! cluster but its static `xds_cluster`; xdst counts each refusal; team A's Envoy keeps its
//! versions, its one xDS connection and its traffic throughout.
//!
//! Issue 33, item 6: the operator identity, allowed any node id, takes team A's Envoy's node
//! id, first while the Envoy is connected, then while it restarts. It is served as a client of
//! its own (named apart, with its identity), and team A's Envoy is never locked out: restarted,
//! it is configured on its first connection and resumes its own client.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use xdst_serve::identity::{IdentityPattern, Pattern, Rule};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy, Expect};
use xdst_tests::fixtures;
use xdst_tests::pki::{Ca, Leaf};
use xdst_tests::upstream::{Upstream, wait_for_body};

const WAIT: Duration = Duration::from_secs(20);
const CONNECTED: &str = "control_plane.connected_state";
const XDS_CONNECTIONS: &str = "cluster.xds_cluster.upstream_cx_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_sotw_over_mtls_is_served_its_group_and_every_other_client_is_refused() -> anyhow::Result<()> {
    scenario(ApiType::Sotw, true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_delta_over_mtls_is_served_its_group() -> anyhow::Result<()> {
    scenario(ApiType::Delta, false).await
}

struct Pki {
    ca: Ca,
    team_a: Leaf,
}

fn rule(identity: &str, groups: &[&str], nodes: &[&str]) -> Rule {
    let p = |s: &&str| s.parse::<Pattern>().unwrap();
    Rule {
        identity: identity.parse::<IdentityPattern>().unwrap(),
        groups: groups.iter().map(p).collect(),
        nodes: nodes.iter().map(p).collect(),
        proxy: false,
    }
}

async fn scenario(api: ApiType, refusals: bool) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix("xdst-mtls-").tempdir()?;
    let ca = Ca::new(dir.path(), "test-ca")?;
    let server = ca.issue("xdst", &["DNS:localhost", "IP:127.0.0.1"])?;
    let team_a = ca.issue("envoy-a", &["URI:spiffe://test/team-a/envoy"])?;
    let pki = Pki { ca, team_a };

    let a = Upstream::start("a").await?;
    let res = tempfile::Builder::new().prefix("xdst-mtls-res-").tempdir()?;
    let (team_a_dir, team_b_dir) = (res.path().join("team-a"), res.path().join("team-b"));
    std::fs::create_dir_all(&team_a_dir)?;
    std::fs::create_dir_all(&team_b_dir)?;
    fixtures::write(&team_a_dir, "listener.yaml", &fixtures::listener("http", 0, "local"));
    fixtures::write(&team_a_dir, "route.yaml", &fixtures::route("local", "backend"));
    fixtures::write(&team_a_dir, "backend.yaml", &fixtures::cluster("backend", a.addr.port()));
    fixtures::write(&team_b_dir, "private.yaml", &fixtures::cluster("team-b-private", 9));

    let xdst = xdst::start(xdst::Settings {
        xds_addr: "127.0.0.1:0".parse()?,
        admin_addr: "127.0.0.1:0".parse()?,
        resources: Some(res.path().to_owned()),
        resync: Duration::from_millis(500),
        shutdown_grace: Duration::from_secs(1),
        tls: xdst::cli::settings::TlsSettings {
            tls_cert: Some(server.cert.clone()),
            tls_key: Some(server.key.clone()),
            tls_client_ca: Some(pki.ca.cert.clone()),
        },
        identities: Some(vec![
            rule("spiffe://test/team-a/*", &["team-a"], &["a-*"]),
            rule("spiffe://test/team-b/*", &["team-b"], &["b-*"]),
            rule("spiffe://test/ops/*", &["*"], &["*"]),
        ]),
        ..Default::default()
    })
    .await?;

    let node = format!("a-envoy-{}", api.as_str().to_ascii_lowercase());
    let envoy = Envoy::start(&bootstrap(api, xdst.xds_addr, &node, "team-a", &pki.ca.cert, Some(&pki.team_a))).await?;
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
    let nodes = serde_json::to_value(xdst.serving.nodes.report(&xdst.serving.rollouts.report()))?;
    let streams =
        &nodes.as_array().and_then(|n| n.iter().find(|n| n["id"] == node.as_str())).context("no node")?["streams"];
    ensure!(
        streams
            .as_array()
            .is_some_and(|s| !s.is_empty() && s.iter().all(|s| s["identity"] == "spiffe://test/team-a/envoy")),
        "/debug/nodes does not show the stream's identity: {streams:#}"
    );
    eprintln!("[{node}] configured over mTLS, proxying to a, after {:?}", started.elapsed());
    if !refusals {
        envoy.kill().await?;
        return Ok(());
    }

    let before = envoy.stats().await?;
    let versions = xdst_tests::admin::versions(&before);
    let (ca_cert, team_a) = (&pki.ca.cert, &pki.team_a);
    let rogue_ca = Ca::new(dir.path(), "rogue-ca")?;
    let rogue = rogue_ca.issue("rogue", &["URI:spiffe://test/team-a/envoy"])?;
    let expired = pki.ca.issue_for_days("expired", &["URI:spiffe://test/team-a/envoy"], -1)?;
    let ops = pki.ca.issue("ops", &["URI:spiffe://test/ops/debug"])?;
    let ops_by_cn = pki.ca.issue_with_cn("ops-cn", "spiffe://test/ops/cn", &[])?;
    let ops_by_dns = pki.ca.issue("ops-dns", &["DNS:spiffe://test/ops/dns"])?;
    // Envoy logs a gRPC status message as it came, percent-encoded (gRPC's grpc-message).
    let status =
        |code: u8, message: &str| format!("closed: {code}, {}", message.replace(' ', "%20").replace('"', "%22"));
    let cases: [(&str, Bootstrap, String, &str); 6] = [
        (
            "no client certificate",
            bootstrap(api, xdst.xds_addr, "a-intruder", "team-a", ca_cert, None),
            "CERTIFICATE_REQUIRED".into(),
            "tls_handshake",
        ),
        (
            "a certificate from another CA",
            bootstrap(api, xdst.xds_addr, "a-intruder", "team-a", ca_cert, Some(&rogue)),
            "ALERT_UNKNOWN_CA".into(),
            "tls_handshake",
        ),
        (
            "an expired certificate",
            bootstrap(api, xdst.xds_addr, "a-intruder", "team-a", ca_cert, Some(&expired)),
            "ALERT_CERTIFICATE_EXPIRED".into(),
            "tls_handshake",
        ),
        (
            "team A's certificate asking for team B's group",
            bootstrap(api, xdst.xds_addr, "a-envoy-2", "team-b", ca_cert, Some(team_a)),
            status(7, r#"identity "spiffe://test/team-a/envoy" may not use node group "team-b""#),
            "identity",
        ),
        (
            "a certificate whose subject CN reads like the operator's SPIFFE ID",
            bootstrap(api, xdst.xds_addr, "a-intruder", "team-a", ca_cert, Some(&ops_by_cn)),
            r#"identity%20%22cn:spiffe://test/ops/cn%22"#.into(),
            "identity",
        ),
        (
            "a certificate whose DNS SAN reads like the operator's SPIFFE ID",
            bootstrap(api, xdst.xds_addr, "a-intruder", "team-a", ca_cert, Some(&ops_by_dns)),
            r#"identity%20%22spiffe://test/ops/dns%22"#.into(),
            "identity",
        ),
    ];
    for (what, mut b, expect_log, reason) in cases {
        b.debug_config_log = true;
        let refused_before = refusals_counted(&xdst, reason);
        let intruder = Envoy::start(&b).await?;
        // The positive signal first: the refused Envoy's own log says why, exactly.
        let deadline = Instant::now() + WAIT;
        while !intruder.log_tail(400).contains(&expect_log) {
            ensure!(
                Instant::now() < deadline,
                "{what}: the refused Envoy never logged {expect_log:?}\n{}",
                intruder.log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        ensure!(refusals_counted(&xdst, reason) > refused_before, "{what}: xdst did not count a {reason} refusal");
        let stats = intruder.stats().await?;
        ensure!(
            stats.count(CONNECTED) == 0
                && stats.count("listener_manager.total_listeners_active") == 0
                && stats.count("cluster_manager.active_clusters") == 1
                && stats.count("cluster_manager.cds.update_success") == 0,
            "{what}: the refused Envoy was sent something:\n{}",
            stats.xds_related()
        );
        intruder.kill().await?;
        // Team A's Envoy: same versions, same single xDS connection, traffic as before.
        wait_for_body(proxy, "/", "a", WAIT).await?;
        let now = envoy.stats().await?;
        ensure!(xdst_tests::admin::versions(&now) == versions, "{what}: team A's Envoy's versions changed");
        ensure!(
            now.count(CONNECTED) == 1 && now.count(XDS_CONNECTIONS) == before.count(XDS_CONNECTIONS),
            "{what}: team A's Envoy lost or remade its xDS connection"
        );
        eprintln!("[{node}] refused {what} ({expect_log}) after {:?}", started.elapsed());
    }
    let envoy = squatters_never_lock_out_the_envoy(&xdst, envoy, &node, &pki, &ops).await?;
    envoy.kill().await?;
    Ok(())
}

/// Issue 33, item 6 (see the module docs). Returns team A's (restarted) Envoy.
async fn squatters_never_lock_out_the_envoy(
    xdst: &xdst::Running,
    envoy: Envoy,
    node: &str,
    pki: &Pki,
    ops: &Leaf,
) -> anyhow::Result<Envoy> {
    let configured = Expect::new().count(CONNECTED, 1).count("listener_manager.total_listeners_active", 1);
    let a_identity = r#"identity "spiffe://test/team-a/envoy""#;
    let ops_identity = r#"identity "spiffe://test/ops/debug""#;
    let labels =
        || xdst.serving.rollouts.syncs().into_iter().filter(|s| s.id == node).map(|s| s.label).collect::<Vec<_>>();
    let before = envoy.stats().await?;
    let refused = refusals_counted(xdst, "identity");
    // The squatter arrives while team A's Envoy is connected: it is a client of its own.
    let squatter =
        Envoy::start(&bootstrap(ApiType::Sotw, xdst.xds_addr, node, "team-a", &pki.ca.cert, Some(ops))).await?;
    squatter.wait_for(&configured, WAIT).await.with_context(|| squatter.log_tail(30))?;
    let deadline = Instant::now() + WAIT;
    while !labels().iter().any(|l| l.contains("(client 2") && l.contains(ops_identity)) {
        ensure!(Instant::now() < deadline, "the squatter is not named apart: {:?}", labels());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ensure!(
        labels().iter().any(|l| l.contains("(client 1") && l.contains(a_identity)),
        "team A's Envoy is not named with its identity: {:?}",
        labels()
    );
    let now = envoy.stats().await?;
    ensure!(
        xdst_tests::admin::versions(&now) == xdst_tests::admin::versions(&before)
            && now.count(XDS_CONNECTIONS) == before.count(XDS_CONNECTIONS),
        "the squatter moved team A's Envoy"
    );
    // Team A's Envoy restarts while the squatter holds the node id: it is configured on its
    // first xDS connection (no refusal, no retry) and resumes its own client.
    envoy.kill().await?;
    let envoy =
        Envoy::start(&bootstrap(ApiType::Sotw, xdst.xds_addr, node, "team-a", &pki.ca.cert, Some(&pki.team_a))).await?;
    let stats = envoy.wait_for(&configured, WAIT).await.with_context(|| envoy.log_tail(30))?;
    ensure!(
        stats.count(XDS_CONNECTIONS) == 1,
        "team A's restarted Envoy needed {} xDS connections:\n{}",
        stats.count(XDS_CONNECTIONS),
        envoy.log_tail(30)
    );
    ensure!(refusals_counted(xdst, "identity") == refused, "a stream was refused");
    wait_for_body(proxy_of(&envoy).await?, "/", "a", WAIT).await?;
    ensure!(
        labels().iter().any(|l| l.contains("(client 1") && l.contains(a_identity)),
        "team A's Envoy did not resume its own client: {:?}",
        labels()
    );
    squatter.kill().await?;
    Ok(envoy)
}

async fn proxy_of(envoy: &Envoy) -> anyhow::Result<SocketAddr> {
    let port = envoy.listener_port("http").await?.context("envoy has no active listener \"http\"")?;
    Ok(([127, 0, 0, 1], port).into())
}

fn bootstrap(api: ApiType, xds: SocketAddr, node: &str, group: &str, ca: &Path, client: Option<&Leaf>) -> Bootstrap {
    let mut b = Bootstrap::new(api, xds, node);
    b.node_cluster = group.to_owned();
    b.tls_ca = Some(ca.to_owned());
    b.tls_client = client.map(|l| (l.cert.clone(), l.key.clone()));
    b
}

fn refusals_counted(xdst: &xdst::Running, reason: &'static str) -> u64 {
    xdst.serving.metrics.refusals.get_or_create(&xdst_serve::metrics::label("reason", reason)).get()
}

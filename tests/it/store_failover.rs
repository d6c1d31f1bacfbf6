//! Issue 18, must-show 1: a real 3-member etcd, two `xdst serve --store` replicas, and a real
//! Envoy whose `xds_cluster` lists both. Under 250 requests/s through Envoy, the replica
//! Envoy's ADS stream is on is SIGKILLed. Envoy reconnects to the other replica, which serves
//! the same bytes at the same versions:
//!
//! - no request fails;
//! - every type's `version_text` is unchanged;
//! - nothing is re-applied: Delta re-sends nothing (DELTA-3, Envoy's
//!   `initial_resource_versions` name what it holds), so no type's `update_success` moves;
//!   SotW re-sends nothing for the wildcard LDS and CDS (SOTW-12), while RDS and EDS, which
//!   Envoy asks for by name on the new stream, must be answered (SOTW-9): Envoy finds them
//!   identical and applies nothing (no listener, cluster, route or endpoint change counted).
//!
//! Then a write through the surviving replica reaches Envoy, so the stream is live.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde_json::Value;
use xdst_tests::admin::settled_target;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy, Expect, Stats};
use xdst_tests::etcd::Etcd;
use xdst_tests::plugins;
use xdst_tests::server::Process;
use xdst_tests::traffic::{Allowed, Traffic};
use xdst_tests::upstream::Upstream;
use xdst_tests::wait::{Seen, until, until_true};
use xdst_tests::xds::{http_get, http_with};

const TOKEN: (&str, &str) = ("Authorization", "Bearer f4ilover");
const WAIT: Duration = Duration::from_secs(30);

const LDS_VERSION: &str = "listener_manager.lds.version_text";
const CDS_VERSION: &str = "cluster_manager.cds.version_text";
const RDS_VERSION: &str = "http.web.rds.web.version_text";
const EDS_VERSION: &str = "cluster.backend.version_text";
const VERSIONS: [&str; 4] = [LDS_VERSION, CDS_VERSION, RDS_VERSION, EDS_VERSION];
const UPDATES: [&str; 4] = [
    "listener_manager.lds.update_success",
    "cluster_manager.cds.update_success",
    "http.web.rds.web.update_success",
    "cluster.backend.update_success",
];
/// Counters that rise only when Envoy applies a changed resource.
const APPLIED: [&str; 6] = [
    "listener_manager.listener_added",
    "listener_manager.listener_modified",
    "cluster_manager.cluster_added",
    "cluster_manager.cluster_modified",
    "http.web.rds.web.config_reload",
    "cluster.backend.membership_change",
];

fn service(name: &str, port: u16) -> String {
    format!(
        "kind: Service\nmetadata: {{name: {name}}}\nspec:\n  connectTimeout: 1s\n  endpoints:\n  - {{address: 127.0.0.1, port: {port}}}\n"
    )
}

fn gateway(port: u16, backend: &str) -> String {
    format!(
        "kind: HttpGateway\nmetadata: {{name: web}}\nspec:\n  address: 127.0.0.1\n  port: {port}\n  hosts:\n  - hostnames: [\"*\"]\n    routes:\n    - name: all\n      match: {{pathPrefix: /}}\n      backends: [{{service: {backend}}}]\n"
    )
}

async fn put(admin: SocketAddr, kind: &str, name: &str, body: &str) -> anyhow::Result<i64> {
    let (code, text) = http_with(admin, "PUT", &format!("/intent/{kind}/{name}"), &[TOKEN], body).await;
    ensure!(code == 200, "PUT {kind}/{name}: {code} {text}");
    let v: Value = serde_json::from_str(&text)?;
    v["revision"].as_i64().context("no revision")
}

/// Whether `admin`'s replica has a stream of `node` open.
async fn serves_node(admin: SocketAddr, node: &str) -> bool {
    let (code, body) = http_get(admin, "/debug/nodes").await;
    code == 200 && body.contains(&format!("\"{node}\""))
}

async fn failover(api: ApiType) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let etcd = Etcd::start(3).await?;
    let dir = tempfile::Builder::new().prefix("xdst-failover-").tempdir()?;
    std::fs::create_dir(dir.path().join("plugins"))?;
    plugins::install(&dir.path().join("plugins"), &plugins::reference()?, "reference.wasm", None)?;
    std::fs::write(dir.path().join("token"), "f4ilover")?;
    let (url, plugins, token) = (etcd.url("failover"), dir.path().join("plugins"), dir.path().join("token"));
    let replica = || Process::start_store(&url, Some(&plugins), &token, &[]);
    let mut replicas = [Some(replica().await?), Some(replica().await?)];
    let (a, b) = (Upstream::start("a").await?, Upstream::start("b").await?);
    let admin0 = replicas[0].as_ref().unwrap().admin_addr;
    put(admin0, "Service", "backend", &service("backend", a.addr.port())).await?;
    let listen = xdst_tests::free_port()?;
    let rev = put(admin0, "HttpGateway", "web", &gateway(listen, "backend")).await?;

    let node = format!("failover-{}", api.as_str());
    let mut boot = Bootstrap::new(api, replicas[0].as_ref().unwrap().xds_addr, &node);
    boot.more_xds_addrs = vec![replicas[1].as_ref().unwrap().xds_addr];
    let envoy = Envoy::start(&boot).await?;
    let proxy: SocketAddr = ([127, 0, 0, 1], listen).into();
    xdst_tests::upstream::wait_for_body(proxy, "/", "a", WAIT).await?;

    // Which replica is Envoy's stream on?
    let on = until(format!("a replica to show node {node}"), WAIT, async || {
        let mut on = None;
        for (i, r) in replicas.iter().enumerate() {
            if serves_node(r.as_ref().unwrap().admin_addr, &node).await {
                on = Some(i);
            }
        }
        Ok(match on {
            Some(i) => Seen::Done(i),
            None => Seen::Not("neither replica shows it".into()),
        })
    })
    .await?;
    let other = 1 - on;
    let other_admin = replicas[other].as_ref().unwrap().admin_addr;
    // Both replicas hold the revision Envoy was configured from.
    until(format!("replica {other} to translate revision {rev}"), WAIT, async || {
        let last = xdst_tests::admin::plugins_status(other_admin).await?["last_ok_revision"].as_i64().unwrap_or(0);
        Ok(Seen::holds(last >= rev, format!("last_ok_revision {last}")))
    })
    .await?;
    // Settled: every version present, and the replica Envoy is on says Envoy holds its target
    // (issue 34: its own record, not a pause).
    let before =
        envoy.wait_for(&Expect::new().count("control_plane.connected_state", 1).at_least(UPDATES[3], 1), WAIT).await?;
    settled_target(replicas[on].as_ref().unwrap().admin_addr, &node).await?;
    let before: Stats = {
        let now = envoy.stats().await?;
        ensure!(
            Expect::new().same_text(&before, &VERSIONS).unchanged(&before, &UPDATES).holds(&now),
            "Envoy was still changing before the failover"
        );
        now
    };

    let traffic = Traffic::start_checked(proxy, "/", 250, xdst_tests::traffic::Expect::new(Allowed::answers(&["a"])));
    until("traffic through Envoy before the failover", WAIT, async || {
        let ok = traffic.report().ok;
        Ok(Seen::holds(ok >= 500, format!("{ok} answers")))
    })
    .await?;
    let killed_at = Instant::now();
    replicas[on].take().unwrap().kill().await?;
    eprintln!("[failover {}] replica {on} SIGKILLed; Envoy's stream was on it", api.as_str());
    until_true(format!("Envoy to reconnect to replica {other}"), WAIT, async || serves_node(other_admin, &node).await)
        .await?;
    let reconnected = killed_at.elapsed();
    let mut expect = Expect::new().count("control_plane.connected_state", 1).same_text(&before, &VERSIONS);
    expect = expect.unchanged(&before, &APPLIED);
    expect = match api {
        ApiType::Delta => expect.unchanged(&before, &UPDATES),
        _ => expect.unchanged(&before, &UPDATES[..2]),
    };
    envoy.wait_for(&expect, WAIT).await?;
    // Issue 34: the surviving replica says Envoy holds its target: whatever it sent on the new
    // stream was acknowledged, so counted by Envoy, by then.
    settled_target(other_admin, &node).await?;
    let after = envoy.stats().await?;
    ensure!(expect.holds(&after), "after the failover: {}", expect.diff(&after));
    // A second of traffic after it, counted, before the traffic is judged.
    let answered = traffic.report().ok;
    until("traffic through Envoy after the failover", WAIT, async || {
        let ok = traffic.report().ok;
        Ok(Seen::holds(ok >= answered + 250, format!("{} answers since", ok - answered)))
    })
    .await?;
    let report = traffic.stop().await;
    eprintln!(
        "[failover {}] reconnected to replica {other} after {reconnected:?}; {} requests, {} failed, {} unexpected",
        api.as_str(),
        report.sent,
        report.failed(),
        report.unexpected
    );
    ensure!(report.ok > 500, "too little traffic: {report:?}");
    ensure!(report.failed() == 0 && report.unexpected == 0, "requests failed across the failover: {report:?}");

    // The new stream is live: a write through the surviving replica reaches Envoy.
    put(other_admin, "Service", "backend", &service("backend", b.addr.port())).await?;
    xdst_tests::upstream::wait_for_body(proxy, "/", "b", WAIT).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_envoy_fails_over_between_replicas_without_a_failed_request_or_an_update() -> anyhow::Result<()> {
    failover(ApiType::Delta).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_envoy_fails_over_between_replicas_without_a_failed_request() -> anyhow::Result<()> {
    failover(ApiType::Sotw).await
}

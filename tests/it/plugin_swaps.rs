//! Issue 5, must-show 1: 50 consecutive plugin swaps, each changing routing, under steady
//! traffic through a real Envoy (SotW ADS): zero failed requests, Envoy connected
//! (`control_plane.connected_state` 1) at every swap, and no new connection to xdst
//! (`cluster.xds_cluster.upstream_cx_total` unchanged).
//!
//! The swapped plugin is `tests/plugins/swap`, built once: each version is that build with its
//! routing table rewritten in the data section, so every swap is a new digest (compiled,
//! checked, swapped in) with new weights for the upstreams `u0`..`u5`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use serde_json::Value;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::plugins;
use xdst_tests::server::Process;
use xdst_tests::traffic::Traffic;
use xdst_tests::upstream::{Upstream, http_get};

const SWAPS: usize = 50;
const RPS: u32 = 250;
const WAIT: Duration = Duration::from_secs(30);

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

async fn json(admin: SocketAddr, path: &str) -> anyhow::Result<Value> {
    let (status, body) = http_get(admin, path).await?;
    ensure!(status == 200, "{path}: {status} {body}");
    Ok(serde_json::from_str(&body)?)
}

async fn plan(admin: SocketAddr, node: &str) -> anyhow::Result<Value> {
    let nodes = json(admin, "/debug/nodes").await?;
    Ok(nodes.as_array().and_then(|ns| ns.iter().find(|n| n["id"] == node)).map(|n| n["plan"].clone()).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_plugin_swaps_under_load_drop_nothing_and_keep_the_connection() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let mut ups = Vec::new();
    for i in 0..6 {
        ups.push(Upstream::start(&format!("u{i}")).await?);
    }
    let port = free_port()?;
    let intent = tempfile::tempdir()?;
    let plugin_dir = tempfile::tempdir()?;
    let mut docs: Vec<String> = ups
        .iter()
        .map(|u| format!("kind: Service\nmetadata: {{name: {}}}\nspec:\n  connectTimeout: 1s\n  endpoints:\n  - {{address: 127.0.0.1, port: {}}}\n", u.name, u.addr.port()))
        .collect();
    docs.push(format!("kind: Split\nmetadata: {{name: web}}\nspec: {{port: {port}}}\n"));
    std::fs::write(intent.path().join("intent.yaml"), docs.join("---\n"))?;
    plugins::install(plugin_dir.path(), &plugins::reference()?, "reference.wasm", None)?;
    let swap = std::fs::read(plugins::swap()?)?;
    let install = |bytes: &[u8]| -> anyhow::Result<()> {
        let tmp = plugin_dir.path().join(".swap.wasm.tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, plugin_dir.path().join("swap.wasm"))?;
        Ok(())
    };
    install(&plugins::swap_variant(&swap, [100, 0, 0, 0, 0, 0])?)?;

    let xdst = Process::start_intent(intent.path(), plugin_dir.path(), &["--debounce", "20ms"]).await?;
    let node = "swaps";
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, node)).await?;
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + WAIT;
    while !matches!(http_get(proxy, "/").await, Ok((200, _))) {
        ensure!(Instant::now() < deadline, "Envoy did not proxy within {WAIT:?}:\n{}", envoy.log_tail(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let connections = envoy.stats().await?.count("cluster.xds_cluster.upstream_cx_total");
    let traffic = Traffic::start(proxy, "/", RPS);
    let started = Instant::now();

    let mut seed = 0x5eed_0005_u64;
    let mut previous = [100u16, 0, 0, 0, 0, 0];
    let mut digests = BTreeSet::new();
    let mut times = Vec::new();
    for i in 0..SWAPS {
        // New weights, never all zero and never the last ones: every swap changes routing.
        let weights = loop {
            let mut w = [0u16; 6];
            for slot in w.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *slot = if seed % 3 == 0 { 0 } else { (seed % 100) as u16 + 1 };
            }
            if w.iter().any(|x| *x > 0) && w != previous {
                break w;
            }
        };
        previous = weights;
        let before = plan(xdst.admin_addr, node).await?["target_version"].clone();
        let t0 = Instant::now();
        install(&plugins::swap_variant(&swap, weights)?)?;
        let deadline = Instant::now() + WAIT;
        loop {
            let p = plan(xdst.admin_addr, node).await?;
            if p["target_version"] != before && p["in_sync"] == true && p["step"] == "converged" {
                break;
            }
            if Instant::now() > deadline {
                let status = json(xdst.admin_addr, "/debug/plugins").await?;
                bail!("swap {i}: Envoy did not converge within {WAIT:?}: {p:#}\n/debug/plugins: {status:#}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        let stats = envoy.stats().await?;
        ensure!(stats.count("control_plane.connected_state") == 1, "swap {i}: Envoy is not connected to xdst");
        let status = json(xdst.admin_addr, "/debug/plugins").await?;
        let digest = status["plugins"].as_array().and_then(|ps| ps.iter().find(|p| p["name"] == "swap")).map(|p| p["digest"].clone());
        digests.insert(digest.unwrap_or_default().to_string());
    }
    let report = traffic.stop().await;
    let rate = report.sent as f64 / started.elapsed().as_secs_f64();
    let stats = envoy.stats().await?;
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    eprintln!(
        "[swaps] {SWAPS} swaps in {:?}; swap to Envoy in sync p50 {:.0} ms, max {:.0} ms; traffic {rate:.0}/s: {} sent, {} failed, by upstream {:?}",
        started.elapsed(),
        times[times.len() / 2],
        times[times.len() - 1],
        report.sent,
        report.failed(),
        report.by_body
    );
    ensure!(report.failed() == 0, "{} of {} requests failed: {:?}", report.failed(), report.sent, report.first_failures);
    ensure!(rate >= 200.0, "the load generator fell behind: {rate:.0} requests/s");
    ensure!(digests.len() == SWAPS, "expected {SWAPS} distinct plugin digests, saw {}", digests.len());
    ensure!(
        stats.count("cluster.xds_cluster.upstream_cx_total") == connections,
        "Envoy opened a new connection to xdst: {}",
        stats.matching(&["xds_cluster.upstream_cx"])
    );
    ensure!(report.by_body.len() >= 4, "the swaps should have routed to most upstreams: {:?}", report.by_body);
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

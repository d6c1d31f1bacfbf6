//! `xdst-propagation`: how long an intent change takes to reach a real Envoy (issue 5,
//! must-show 4). Results are in docs/PERFORMANCE.md; `tests/bench/propagation.sh` runs it.
//!
//! It starts `xdst serve --intent --plugins` (the binary in `XDST_BIN`) with the reference
//! plugin and a real Envoy connected over ADS. Then it changes a `Service`'s `connectTimeout`
//! `--changes` times, in two ways:
//!
//! - by writing the intent file (write a hidden file, rename it over the old one);
//! - by `PUT /intent/Service/<name>` on the admin port.
//!
//! Each time it measures from just before the write to Envoy's
//! `cluster_manager.cds.version_text` showing a new version, polling Envoy's admin every
//! millisecond. The time includes:
//!
//! - the file watcher;
//! - xdst's debounce (`--debounce`, default 10 ms);
//! - parsing, the plugin call, checking and publishing;
//! - the make-before-break rollout (a cluster change is one step);
//! - Envoy applying the update.
//!
//! With `--replicas` (issue 18, must-show 2) it instead starts a 3-member etcd and two
//! `xdst serve --store` replicas, connects Envoy to replica A, and writes through replica B's
//! API: the time then also includes the etcd transaction, B's wait for its own watch, and A's
//! watch delivering the change.

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::{Parser, ValueEnum};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::plugins;
use xdst_tests::server::Process;
use xdst_tests::upstream::Upstream;

#[derive(Parser)]
#[command(about = "Time from an intent change (file write or API write) to a real Envoy holding it")]
struct Args {
    /// Changes of each kind (file and API).
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// ADS flavour Envoy uses.
    #[arg(long, value_enum, default_value_t = Api::Sotw)]
    api: Api,
    /// xdst's --debounce.
    #[arg(long, default_value = "10ms")]
    debounce: String,
    /// Two replicas on a 3-member etcd: write through one, Envoy on the other.
    #[arg(long)]
    replicas: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Api {
    Sotw,
    Delta,
}

fn service(name: &str, port: u16, timeout_ms: usize) -> String {
    format!(
        "kind: Service\nmetadata: {{name: {name}}}\nspec:\n  connectTimeout: {timeout_ms}ms\n  endpoints:\n  - {{address: 127.0.0.1, port: {port}}}\n"
    )
}

async fn cds_version(envoy: &Envoy) -> anyhow::Result<String> {
    Ok(envoy.stats().await?.text("cluster_manager.cds.version_text").unwrap_or_default().to_owned())
}

/// Waits until Envoy reports a CDS version other than `old`; returns the time since `t0`.
async fn until_changed(envoy: &Envoy, old: &str, t0: Instant) -> anyhow::Result<f64> {
    let deadline = t0 + Duration::from_secs(30);
    loop {
        if cds_version(envoy).await? != old {
            return Ok(t0.elapsed().as_secs_f64() * 1e3);
        }
        if Instant::now() > deadline {
            bail!("Envoy did not take the change within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((p / 100.0) * (v.len() - 1) as f64).round() as usize]
}

fn api_type(api: Api) -> ApiType {
    match api {
        Api::Sotw => ApiType::Sotw,
        Api::Delta => ApiType::Delta,
    }
}

fn api_name(api: Api) -> &'static str {
    match api {
        Api::Sotw => "sotw",
        Api::Delta => "delta",
    }
}

fn print(api: Api, what: &str, v: &mut [f64]) {
    let (p50, p99, max) = (percentile(v, 50.0), percentile(v, 99.0), percentile(v, 100.0));
    println!(
        "{} {what:>10} -> Envoy version_text: {} changes, p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms",
        api_name(api),
        v.len()
    );
}

/// PUTs `Service/by-api` through `admin`.
async fn put(admin: std::net::SocketAddr, body: &str) -> anyhow::Result<()> {
    let (status, text) =
        xdst_tests::xds::http_with(admin, "PUT", "/intent/Service/by-api", &[("Authorization", "Bearer bench")], body)
            .await;
    ensure!(status == 200, "PUT Service/by-api: {status} {text}");
    Ok(())
}

/// Waits until Envoy has the cluster `by-api`.
async fn wait_for_cluster(envoy: &Envoy) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !envoy.stats().await?.matching(&["cluster.by-api."]).contains("by-api") {
        ensure!(Instant::now() < deadline, "Envoy never got the clusters:\n{}", envoy.log_tail(20));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Two replicas on etcd: each change is written through B; Envoy is connected to A.
async fn replicas(args: &Args) -> anyhow::Result<()> {
    let up = Upstream::start("u").await?;
    let etcd = xdst_tests::etcd::Etcd::start(3).await?;
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("plugins"))?;
    plugins::install(&dir.path().join("plugins"), &plugins::reference()?, "reference.wasm", None)?;
    std::fs::write(dir.path().join("token"), "bench")?;
    let (url, plugins, token) = (etcd.url("bench"), dir.path().join("plugins"), dir.path().join("token"));
    let extra = ["--debounce", args.debounce.as_str()];
    let start = || Process::start_store(&url, Some(&plugins), &token, &extra);
    let (a, b) = (start().await?, start().await?);
    let envoy = Envoy::start(&Bootstrap::new(api_type(args.api), a.xds_addr, "propagation")).await?;
    put(b.admin_addr, &service("by-api", up.addr.port(), 1000)).await?;
    wait_for_cluster(&envoy).await?;
    let mut times = Vec::new();
    for i in 0..args.changes {
        let old = cds_version(&envoy).await?;
        let t0 = Instant::now();
        put(b.admin_addr, &service("by-api", up.addr.port(), 1001 + i)).await?;
        times.push(until_changed(&envoy, &old, t0).await?);
    }
    print(args.api, "write via replica B, Envoy on A", &mut times);
    envoy.kill().await?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::env::var("XDST_BIN")
        .context("set XDST_BIN to the xdst binary to measure (tests/bench/propagation.sh does)")?;
    if args.replicas {
        return replicas(&args).await;
    }
    let up = Upstream::start("u").await?;
    let intent = tempfile::tempdir()?;
    let plugin_dir = tempfile::tempdir()?;
    plugins::install(plugin_dir.path(), &plugins::reference()?, "reference.wasm", None)?;
    let file = intent.path().join("services.yaml");
    std::fs::write(&file, service("by-file", up.addr.port(), 1000))?;
    let token = intent.path().join(".token");
    std::fs::write(&token, "bench")?;
    let xdst = Process::start_intent(
        intent.path(),
        plugin_dir.path(),
        &["--debounce", &args.debounce, "--admin-token-file", token.to_str().unwrap()],
    )
    .await?;
    let envoy = Envoy::start(&Bootstrap::new(api_type(args.api), xdst.xds_addr, "propagation")).await?;
    // The API-owned service, created once.
    put(xdst.admin_addr, &service("by-api", up.addr.port(), 1000)).await?;
    wait_for_cluster(&envoy).await?;

    let (mut by_file, mut by_api) = (Vec::new(), Vec::new());
    for i in 0..args.changes {
        let timeout = 1001 + i; // a new connectTimeout each time
        let old = cds_version(&envoy).await?;
        let t0 = Instant::now();
        xdst_core::files::write_atomic(&file, service("by-file", up.addr.port(), timeout))?;
        by_file.push(until_changed(&envoy, &old, t0).await?);

        let old = cds_version(&envoy).await?;
        let t0 = Instant::now();
        put(xdst.admin_addr, &service("by-api", up.addr.port(), timeout)).await?;
        by_api.push(until_changed(&envoy, &old, t0).await?);
    }
    for (what, v) in [("file write", &mut by_file), ("API write", &mut by_api)] {
        print(args.api, what, v);
    }
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

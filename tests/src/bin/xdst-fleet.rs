//! `xdst-fleet`: xdst serving Gateway API intent to a fleet of Envoy-like streams, measured
//! the way the field compares control planes (issue 37, rows 2, 3, 5 and 6; results in
//! docs/PERFORMANCE.md; `tests/bench/fleet.sh` runs it).
//!
//! It writes the intent (Gateways, HTTPRoutes, and Services each with an EndpointSlice in a
//! file of its own, `svc-<i>.yaml`), starts `xdst serve` (the binary in `XDST_BIN`) with the
//! gateway-api plugin, and runs `xdst-loadgen` (next to this binary) against it with the
//! server's PID, so that the load generator samples the server's memory, open files and CPU
//! while it holds its streams open and rewrites EndpointSlice files (`--churn-*`):
//!
//! - `size` (row 2): R HTTPRoutes over 1,000 Services, 100 streams, 10 EndpointSlices changed
//!   a second for 5 minutes: RSS (peak, steady) and CPU (mean cores).
//! - `churn` (row 5): 1,000 endpoint changes a second over 1,000 Services for 60 s, 10,000
//!   Delta streams: per change, the time until every stream had it; CPU; RSS growth.
//! - `groups` (row 3): G Gateways with `nodes: per-gateway` (a node group each), 10 streams
//!   each; then the same intent and as many streams, all in the group of one Gateway (so each
//!   stream holds as much as before, in one group): RSS per group is the difference over
//!   G - 1. And, through the intent API, the time of a change to one Gateway's
//!   route and of a change every Gateway sees (an EndpointSlice all their routes use) until
//!   `GET /changes/{id}` says it is live on every node.
//! - `soak` (row 6): `size` and `churn` together for 30 minutes, with a plugin swap every
//!   minute (the same plugin with a custom section that changes its digest) and an intent
//!   change every second; RSS and open files sampled every 10 s; generations that failed.

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::{Parser, ValueEnum};
use xdst_tests::bench_intent::{self, gateway, route, service};
use xdst_tests::plugins;
use xdst_tests::server::Process;

#[derive(Parser)]
#[command(about = "xdst with Gateway API intent under a fleet of Envoy-like streams: memory, CPU, churn, node groups")]
struct Args {
    /// What to measure (see the module documentation).
    #[arg(value_enum)]
    row: Row,
    /// HTTPRoutes (size, churn, soak).
    #[arg(long, default_value_t = 1000)]
    routes: usize,
    /// Services, each with an EndpointSlice.
    #[arg(long, default_value_t = 1000)]
    services: usize,
    /// Gateways (groups): one node group each.
    #[arg(long, default_value_t = 1000)]
    gateways: usize,
    /// Streams (default: 100 for size, 10,000 for churn and soak, 10 per Gateway for groups).
    #[arg(long)]
    streams: Option<usize>,
    /// HTTP/2 connections the streams share (default: one per stream up to 100, else 100).
    #[arg(long)]
    connections: Option<usize>,
    /// How long the streams are held (default: 300 s for size, 60 s for churn, 1,800 s for soak).
    #[arg(long, value_name = "SECONDS")]
    secs: Option<u64>,
    /// EndpointSlice changes a second (default: 10 for size, 1,000 for churn and soak).
    #[arg(long)]
    churn: Option<u32>,
    /// Changes of each kind in `groups`.
    #[arg(long, default_value_t = 5)]
    changes: usize,
    /// Route changes made through the intent API during the churn (size, churn), spread
    /// evenly over it: each one's time from the write until `GET /changes/{id}` says every
    /// node holds it (default: 5 for size, 0 otherwise).
    #[arg(long)]
    route_changes: Option<usize>,
    /// The load generator's pause before it reads xdst's memory (size, churn, soak): after the
    /// first convergence (the idle figure), and after the churn, whose first reading is taken
    /// as soon as the last change reached every stream.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    settle_ms: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum Row {
    Size,
    Churn,
    Groups,
    Soak,
}

const TOKEN: &str = "bench";

/// The EndpointSlice file of Service `{i}`, port `{port}`: the load generator's churn template.
fn service_template() -> String {
    service("svc-{i}", &["10.0.0.1", "10.0.0.2"], "{port}")
}

/// The intent directory: Gateways, Services (a file each, port 8080) and routes.
struct Intent {
    dir: tempfile::TempDir,
    template: PathBuf,
    _template_dir: tempfile::TempDir,
}

fn write_intent(args: &Args, gateways: usize, routes_per_gateway: bool) -> anyhow::Result<Intent> {
    let dir = tempfile::Builder::new().prefix("xdst-fleet-").tempdir()?;
    let mut text = String::new();
    for g in 0..gateways {
        // A port each: with `nodes: all` every Gateway's listener is on every node.
        text.push_str("---\n");
        text.push_str(&gateway(&format!("gw-{g}"), 10_000 + g as u16));
    }
    std::fs::write(dir.path().join("gateways.yaml"), text)?;
    let template = service_template();
    for i in 0..args.services {
        let doc = template.replace("{i}", &i.to_string()).replace("{port}", "8080");
        std::fs::write(dir.path().join(format!("svc-{i}.yaml")), doc)?;
    }
    let mut text = String::new();
    if routes_per_gateway {
        // Each Gateway: its own route (a file each, so that a change rewrites one small file),
        // to its own Service and to svc-0 (which every Gateway sees).
        for g in 0..gateways {
            std::fs::write(dir.path().join(format!("route-{g}.yaml")), gateway_route(g, g % args.services))?;
        }
    } else {
        for r in 0..args.routes {
            let svc = format!("svc-{}", r % args.services);
            text.push_str("---\n");
            text.push_str(&route(&format!("r-{r}"), "gw-0", &[(&format!("/r{r}"), &svc)], None));
        }
    }
    std::fs::write(dir.path().join("routes.yaml"), text)?;
    std::fs::write(dir.path().join(".token"), TOKEN)?;
    let template_dir = tempfile::tempdir()?;
    let template_path = template_dir.path().join("svc.yaml.template");
    std::fs::write(&template_path, template)?;
    Ok(Intent { dir, template: template_path, _template_dir: template_dir })
}

/// Gateway `g`'s route: `/own` to `svc-<own>`, `/shared` to svc-0.
fn gateway_route(g: usize, own: usize) -> String {
    route(&format!("r-{g}"), &format!("gw-{g}"), &[("/own", &format!("svc-{own}")), ("/shared", "svc-0")], None)
}

/// The gateway-api plugin installed in a directory of its own with `nodes`.
fn plugin_dir(nodes: &str) -> anyhow::Result<(tempfile::TempDir, Vec<u8>)> {
    let dir = tempfile::tempdir()?;
    let wasm = std::fs::read(plugins::gateway_api()?)?;
    plugins::install_bytes(dir.path(), "gateway-api.wasm", &wasm, Some(&format!("config: {{nodes: {nodes}}}\n")))?;
    Ok((dir, wasm))
}

/// The plugin with a custom section named `xdst-bench-swap` holding `n`: the same code under
/// another digest, so that writing it is a plugin swap.
fn swapped(wasm: &[u8], n: u64) -> Vec<u8> {
    fn leb(mut v: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            out.push(if v == 0 { byte } else { byte | 0x80 });
            if v == 0 {
                break;
            }
        }
    }
    let name = b"xdst-bench-swap";
    let payload = n.to_le_bytes();
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(&payload);
    let mut out = wasm.to_vec();
    out.push(0); // custom section
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

/// xdst with the per-client limits raised: one load generator plays the whole fleet from one
/// address.
async fn start_xdst(intent: &Path, plugins: &Path) -> anyhow::Result<Process> {
    let token = intent.join(".token");
    let args = [
        "--admin-token-file",
        token.to_str().unwrap(),
        "--max-streams-per-client",
        "1000000",
        "--max-unread-bytes-per-client",
        "1048576MiB",
    ];
    Process::start_intent(intent, plugins, &args).await
}

/// The load generator, next to this binary, with its output passed through; the returned
/// channel says when its streams first converged.
fn loadgen(args: &[String]) -> anyhow::Result<(std::process::Child, std::sync::mpsc::Receiver<String>)> {
    let exe = std::env::current_exe()?.with_file_name("xdst-loadgen");
    ensure!(exe.exists(), "{} missing: build it (tests/bench/fleet.sh does)", exe.display());
    let mut child = std::process::Command::new(&exe)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let out = child.stdout.take().context("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            println!("{line}");
            if line.starts_with("  initial") || line.starts_with("RESULT ") {
                let _ = tx.send(line);
            }
        }
    });
    Ok((child, rx))
}

fn loadgen_args(xdst: &Process, streams: usize, connections: usize, hold: u64) -> Vec<String> {
    let pid = xdst.child.id().expect("xdst is running");
    [
        "--addr",
        &xdst.xds_addr.to_string(),
        "--n",
        &streams.to_string(),
        "--connections",
        &connections.to_string(),
        "--api",
        "delta",
        "--changes",
        "0",
        "--server-pid",
        &pid.to_string(),
        "--hold-secs",
        &hold.to_string(),
        "--timeout-secs",
        "600",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn churn_args(intent: &Intent, services: usize, per_second: u32) -> Vec<String> {
    vec![
        "--churn-dir".into(),
        intent.dir.path().display().to_string(),
        "--churn-template".into(),
        intent.template.display().to_string(),
        "--churn-services".into(),
        services.to_string(),
        "--churn-per-second".into(),
        per_second.to_string(),
    ]
}

/// Waits for the load generator's streams to converge (its `initial` line).
fn converged(rx: &std::sync::mpsc::Receiver<String>) -> anyhow::Result<()> {
    match rx.recv_timeout(Duration::from_secs(900)) {
        Ok(line) if line.starts_with("  initial") => Ok(()),
        Ok(line) => bail!("the load generator ended before converging: {line}"),
        Err(_) => bail!("the load generator's streams did not converge"),
    }
}

/// The generations published and failed. An overloaded server (row 5) may take longer than
/// one admin request's timeout to answer while its streams drain: it is asked again for
/// two minutes.
async fn generations(admin: SocketAddr) -> anyhow::Result<(u64, u64)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        match xdst_tests::admin::plugins_status(admin).await {
            Ok(s) => {
                let count = |which: &str| s[which].as_u64().unwrap_or(0);
                return Ok((count("generations_ok"), count("generations_failed")));
            }
            Err(e) if std::time::Instant::now() < deadline => eprintln!("  (asking /debug/plugins again: {e})"),
            Err(e) => return Err(e),
        }
    }
}

fn header(args: &Args) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned()))
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("== xdst-fleet {:?}: cpu {cpu}; load {}", args.row, load.split(' ').take(3).collect::<Vec<_>>().join(" "));
}

/// Rows 2, 5 and 6: R routes on one Gateway, streams held while EndpointSlices churn.
async fn churn_row(args: &Args) -> anyhow::Result<()> {
    let (streams, secs, rate) = match args.row {
        Row::Size => (100, 300, 10),
        Row::Churn => (10_000, 60, 1000),
        _ => (10_000, 1800, 1000),
    };
    let streams = args.streams.unwrap_or(streams);
    let secs = args.secs.unwrap_or(secs);
    let rate = args.churn.unwrap_or(rate);
    let connections = args.connections.unwrap_or(streams.min(100));
    let intent = write_intent(args, 1, false)?;
    let (plugins, wasm) = plugin_dir("all")?;
    let xdst = start_xdst(intent.dir.path(), plugins.path()).await?;
    println!(
        "== {} HTTPRoutes over {} Services, {streams} Delta streams on {connections} connections, {rate} EndpointSlice \
         changes a second for {secs} s; xdst RSS {:.1} MiB before the streams",
        args.routes,
        args.services,
        xdst.rss()? as f64 / (1 << 20) as f64
    );
    let mut lg = loadgen_args(&xdst, streams, connections, secs);
    lg.extend(["--settle-ms".into(), args.settle_ms.to_string()]);
    lg.extend(churn_args(&intent, args.services, rate));
    let (before_ok, before_failed) = generations(xdst.admin_addr).await?;
    let (mut child, rx) = loadgen(&lg)?;
    if args.row == Row::Soak {
        converged(&rx)?;
        // A plugin swap every minute and an intent change (a route rewritten through the API)
        // every second, until the load generator is done.
        let started = Instant::now();
        let (mut swaps, mut writes) = (0u64, 0usize);
        while child.try_wait()?.is_none() {
            let due = started + Duration::from_secs(writes as u64 + 1);
            tokio::time::sleep_until(due.into()).await;
            if child.try_wait()?.is_some() {
                break;
            }
            // A route of the API's own (the files' routes are the files').
            let svc = format!("svc-{}", writes % args.services);
            let doc = route("soak-api", "gw-0", &[("/soak", &svc)], None);
            if let Err(e) = bench_intent::put(xdst.admin_addr, TOKEN, "HTTPRoute", "soak-api", &doc).await {
                eprintln!("xdst-fleet: intent change {writes}: {e:#}");
            }
            writes += 1;
            if started.elapsed() >= Duration::from_secs(60 * (swaps + 1)) {
                swaps += 1;
                plugins::install_bytes(plugins.path(), "gateway-api.wasm", &swapped(&wasm, swaps), None)?;
            }
        }
        println!("  soak      : {swaps} plugin swaps, {writes} intent changes through the API");
    } else {
        let n = args.route_changes.unwrap_or(if args.row == Row::Size { 5 } else { 0 });
        if n > 0 {
            converged(&rx)?;
            let took = route_changes(xdst.admin_addr, n, Duration::from_secs(secs), args.services).await?;
            let show = took
                .iter()
                .map(|(published, live)| format!("{:.0} ({:.0})", ms(*live), ms(*published)))
                .collect::<Vec<_>>()
                .join(", ");
            let worst = took.iter().map(|(_, live)| *live).max().unwrap_or_default();
            println!(
                "  route change during the churn, until every node holds it (in brackets: until a generation \
                 published it), ms: {show}; max {:.0}",
                ms(worst)
            );
        }
    }
    let status = tokio::task::spawn_blocking(move || child.wait()).await??;
    ensure!(status.success(), "xdst-loadgen failed: {status}");
    let (after_ok, after_failed) = generations(xdst.admin_addr).await?;
    println!(
        "  generations: {} published, {} failed during the run",
        after_ok - before_ok,
        after_failed - before_failed
    );
    xdst.kill().await?;
    Ok(())
}

/// `n` route changes through the intent API, spread evenly over the `churn` that began now:
/// each one's time from the write until a generation published it, and until every node
/// holds it. Each change points one route (of the API's own, on gw-0 beside the files' routes)
/// at another Service, so it changes the Gateway's RouteConfiguration, which every stream holds.
async fn route_changes(
    admin: SocketAddr,
    n: usize,
    churn: Duration,
    services: usize,
) -> anyhow::Result<Vec<(Duration, Duration)>> {
    let started = Instant::now();
    let mut took = Vec::new();
    for k in 0..n {
        tokio::time::sleep_until((started + churn * (k as u32 + 1) / (n as u32 + 1)).into()).await;
        let svc = format!("svc-{}", (k * 37 + 1) % services);
        let doc = route("fleet-api", "gw-0", &[("/fleet-api", &svc)], None);
        let t0 = Instant::now();
        let id = bench_intent::put(admin, TOKEN, "HTTPRoute", "fleet-api", &doc).await?;
        let mut published = None;
        loop {
            let (status, body) = xdst_tests::upstream::http_get(admin, &format!("/changes/{id}")).await?;
            if status == 200 {
                let v: serde_json::Value = serde_json::from_str(&body)?;
                if published.is_none() && !v["generation"].is_null() {
                    published = Some(t0.elapsed());
                }
                if v["live"] == true {
                    took.push((published.unwrap_or_else(|| t0.elapsed()), t0.elapsed()));
                    break;
                }
            }
            ensure!(t0.elapsed() < Duration::from_secs(120), "route change {id} not live after 120 s: {body}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(took)
}

/// Polls `GET /changes/{id}` until it says the change is live on every node; the time since `t0`.
async fn until_live(admin: SocketAddr, id: i64, t0: Instant) -> anyhow::Result<Duration> {
    let deadline = t0 + Duration::from_secs(120);
    loop {
        let (status, body) = xdst_tests::upstream::http_get(admin, &format!("/changes/{id}")).await?;
        if status == 200 {
            let v: serde_json::Value = serde_json::from_str(&body)?;
            if v["live"] == true {
                return Ok(t0.elapsed());
            }
        }
        ensure!(Instant::now() < deadline, "change {id} not live after 120 s: {body}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The latest change (`GET /changes`).
async fn latest_change(admin: SocketAddr) -> anyhow::Result<i64> {
    let (status, body) = xdst_tests::upstream::http_get(admin, "/changes").await?;
    ensure!(status == 200, "GET /changes: {status}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    Ok(v["latest"].as_i64().unwrap_or(0))
}

/// Rewrites an intent file (atomically) and waits for the change it makes to be live on
/// every node (`GET /changes/{id}`): the time from the write.
async fn write_until_live(admin: SocketAddr, file: &Path, text: String) -> anyhow::Result<Duration> {
    let before = latest_change(admin).await?;
    let t0 = Instant::now();
    xdst_core::files::write_atomic(file, text)?;
    let id = loop {
        let id = latest_change(admin).await?;
        if id > before {
            break id;
        }
        ensure!(t0.elapsed() < Duration::from_secs(120), "no change after writing {}", file.display());
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    until_live(admin, id, t0).await
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One run of row 3, `nodes: per-gateway`, the streams spread over every Gateway's group or
/// (`one_group`) all in the first Gateway's; returns xdst's RSS (bytes) with every stream idle.
async fn groups_run(args: &Args, one_group: bool, timed: bool) -> anyhow::Result<u64> {
    let g = args.gateways;
    let streams = args.streams.unwrap_or(10 * g);
    let connections = args.connections.unwrap_or(streams.min(100));
    let intent = write_intent(args, g, true)?;
    let (plugins, _) = plugin_dir("per-gateway")?;
    let xdst = start_xdst(intent.dir.path(), plugins.path()).await?;
    let idle = xdst.rss()?;
    let mut lg = loadgen_args(&xdst, streams, connections, 3600);
    let (cluster, groups) = if one_group { ("bench/gw-0", 1) } else { ("bench/gw-", g) };
    lg.extend(["--node-cluster".into(), cluster.into(), "--groups".into(), groups.to_string()]);
    let (mut child, rx) = loadgen(&lg)?;
    converged(&rx)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss = xdst.rss()?;
    println!(
        "  nodes: per-gateway: {g} Gateways, {streams} streams in {groups} node group(s): xdst RSS {:.1} MiB idle, \
         {:.1} MiB with every stream converged",
        idle as f64 / (1 << 20) as f64,
        rss as f64 / (1 << 20) as f64
    );
    if timed {
        let mut one = Vec::new();
        let mut every = Vec::new();
        for k in 0..args.changes {
            // One Gateway's route: its own rule to another Service.
            let gw = (k * 7) % g;
            let file = intent.dir.path().join(format!("route-{gw}.yaml"));
            one.push(write_until_live(xdst.admin_addr, &file, gateway_route(gw, (gw + k + 1) % args.services)).await?);
            // svc-0's endpoints, which every Gateway's /shared rule uses.
            let text = service_template().replace("{i}", "0").replace("{port}", &(9000 + k).to_string());
            let file = intent.dir.path().join("svc-0.yaml");
            every.push(write_until_live(xdst.admin_addr, &file, text).await?);
        }
        let show = |v: &[Duration]| v.iter().map(|d| format!("{:.0}", ms(*d))).collect::<Vec<_>>().join(", ");
        println!("  one Gateway's route file rewritten, until live on every node (ms): {}", show(&one));
        println!("  the EndpointSlice every Gateway uses rewritten, until live on every node (ms): {}", show(&every));
    }
    let _ = child.kill();
    let _ = child.wait();
    xdst.kill().await?;
    Ok(rss)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::env::var("XDST_BIN").context("set XDST_BIN to the xdst binary to measure (tests/bench/fleet.sh does)")?;
    header(&args);
    match args.row {
        Row::Groups => {
            // Streams' own memory is the same in both runs (same count, same connections, one
            // Gateway's configuration each); what differs is what a node group of its own costs.
            let per = groups_run(&args, false, true).await?;
            let one = groups_run(&args, true, false).await?;
            let g = args.gateways.max(2);
            println!(
                "  per node group: ({:.1} - {:.1} MiB) / {} = {:.3} MB a group",
                per as f64 / (1 << 20) as f64,
                one as f64 / (1 << 20) as f64,
                g - 1,
                (per as f64 - one as f64) / (g - 1) as f64 / 1e6
            );
        }
        _ => churn_row(&args).await?,
    }
    Ok(())
}

//! `xdst-first200`: a new HTTPRoute to its first 200 through a real Envoy, the way the field
//! measures Gateway API control planes (issue 37, row 1; results in docs/PERFORMANCE.md;
//! `tests/bench/first200.sh` runs it).
//!
//! For each route count R it starts `xdst serve` (the binary in `XDST_BIN`) with the
//! gateway-api plugin over one Gateway (an HTTP listener on a free loopback port) with R
//! HTTPRoutes (`/r<i>`, to Service `svc-<i mod S>`, S = min(R, 1000), each Service's
//! EndpointSlice naming one of four upstreams that answer with their names), and a real
//! Envoy on ADS. Once Envoy serves the last route:
//!
//! 1. **Additions.** A steady load of `--rate` requests a second (an open-loop generator, a new
//!    connection per request) goes to `/r0`. `--additions` times, a new HTTPRoute with a new
//!    path is written, through the intent API (`PUT`) and, separately, as a file in the intent
//!    directory; a poller sends `GET <new path>` every millisecond until the first 200. Per
//!    addition: the time from just before the write to that 200. Every non-2xx answer the
//!    poller saw while waiting is counted by status (404: Envoy has no route yet; 503: a route
//!    to a cluster Envoy does not have warm, the failure make-before-break prevents), and so is
//!    every non-2xx or misrouted answer of the steady load.
//! 2. **In-place changes.** `--changes` changes of one route, 200 ms apart, under the same load
//!    on that route's path: its backend (alternately one Service and another) or a filter on it
//!    (a response header). After a backend change the poller waits for the new backend; from then
//!    on an answer from the old one is misrouted. Every non-2xx and misrouted answer is counted.
//! 3. **The floor** (`--floor`, issue 50 item 5). The resources xdst serves Envoy at the end are
//!    taken over ADS ([`xdst_tests::floor::capture`]); xdst and its Envoy stop; a new Envoy of the
//!    same binary is fed by the minimal server of [`xdst_tests::floor`] the RouteConfiguration
//!    without the API additions, then, one at a time, the very RouteConfiguration xdst sent with
//!    each addition, each polled to its first 200 as above. The difference from step 1 is what
//!    xdst adds; Envoy's own time to apply each RouteConfiguration (its `update_duration`
//!    histogram for RDS) is printed for both.
//!
//! `--hostnames H` spreads the routes over H hostnames (`h<i mod H>.bench`, every request for
//! a route carrying its host), so that the Gateway's port holds H virtual hosts: from the
//! plugin's `routeScopesFrom` hostnames on (32 by default; `--scopes-from`) a RouteConfiguration
//! per hostname over scoped RDS (design 021), below it one RouteConfiguration.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::{Parser, ValueEnum};
use envoy_types::pb::google::protobuf::Any;
use prost::Message as _;
use xdst_tests::bench_intent;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::floor::{self, Floor};
use xdst_tests::plugins;
use xdst_tests::server::Process;
use xdst_tests::traffic::{Allowed, Expect, Traffic};
use xdst_tests::upstream::{Upstream, http_request};

#[derive(Parser)]
#[command(about = "Time from a new HTTPRoute (API or file) to its first 200 through a real Envoy, under load")]
struct Args {
    /// Route counts already attached, one run each.
    #[arg(long, value_delimiter = ',', default_value = "50,1000,5000")]
    routes: Vec<usize>,
    /// New routes added, through the API and again as files (each).
    #[arg(long, default_value_t = 100)]
    additions: usize,
    /// In-place changes of one route.
    #[arg(long, default_value_t = 10)]
    changes: usize,
    /// The steady load, requests a second.
    #[arg(long, default_value_t = 500)]
    rate: u32,
    /// ADS flavour Envoy uses.
    #[arg(long, value_enum, default_value_t = Api::Sotw)]
    api: Api,
    /// Skip the file additions (the API ones only).
    #[arg(long)]
    api_only: bool,
    /// Hostnames the routes spread over (1: none, every route on every host).
    #[arg(long, default_value_t = 1)]
    hostnames: usize,
    /// Then the same additions from a minimal ADS server fed the RouteConfigurations xdst sent.
    #[arg(long)]
    floor: bool,
    /// With --floor: split each RouteConfiguration by virtual host over scoped RDS (a scope per
    /// hostname), to measure what Envoy takes to apply one host's part.
    #[arg(long, requires = "floor")]
    floor_scoped: bool,
    /// Then this many EndpointSlice writes through the intent API, one after another (each
    /// `PUT` answers once its generation is published): the rate and each write's time.
    #[arg(long, default_value_t = 0)]
    api_writes: usize,
    /// The gateway-api plugin's `routeScopesFrom`: from this many hostnames on a port a
    /// RouteConfiguration per hostname (0: never; default: the plugin's, 32).
    #[arg(long)]
    scopes_from: Option<u32>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Api {
    Sotw,
    Delta,
}

/// Upstreams the Services' endpoints spread over.
const UPSTREAMS: usize = 4;
/// Most Services.
const MAX_SERVICES: usize = 1000;
/// The upstream's name (its answer) a Service's endpoints are on.
fn upstream_of(service: usize) -> String {
    format!("u{}", service % UPSTREAMS)
}

/// A free loopback port for the Gateway's listener.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The hostname of route `i` of `hostnames` (none with one: every host).
fn host_of(i: usize, hostnames: usize) -> Option<String> {
    (hostnames > 1).then(|| format!("h{}.bench", i % hostnames))
}

/// A steady load on `path` for `host` (none: the proxy's address), checked against `expect`.
fn steady(proxy: SocketAddr, host: Option<&str>, path: &str, rate: u32, expect: std::sync::Arc<Expect>) -> Traffic {
    match host {
        Some(h) => Traffic::start_checked_host(proxy, h, path, rate, expect),
        None => Traffic::start_checked(proxy, path, rate, expect),
    }
}

/// What a poller saw: answers by status until the first 200, and the time to it.
struct Poll {
    took: Duration,
    statuses: BTreeMap<String, u64>,
    body: String,
}

/// `GET path` (to `host`, if any) every millisecond until a 200 (or `patience`).
async fn first_200(
    proxy: SocketAddr,
    host: Option<&str>,
    path: &str,
    t0: Instant,
    patience: Duration,
) -> anyhow::Result<Poll> {
    let mut statuses = BTreeMap::new();
    let headers: Vec<(&str, &str)> = host.map(|h| ("Host", h)).into_iter().collect();
    loop {
        match http_request(proxy, path, &headers).await {
            Ok(r) if r.status == 200 => return Ok(Poll { took: t0.elapsed(), statuses, body: r.body }),
            Ok(r) => *statuses.entry(r.status.to_string()).or_default() += 1,
            Err(e) => *statuses.entry(format!("{:?}", e.kind())).or_default() += 1,
        }
        if t0.elapsed() > patience {
            bail!("GET {path}: no 200 within {patience:?}; saw {statuses:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// `PUT /intent/HTTPRoute/bench/<name>`.
async fn put(admin: SocketAddr, name: &str, body: &str) -> anyhow::Result<()> {
    bench_intent::put(admin, "bench", "HTTPRoute", name, body).await.map(drop)
}

/// HTTPRoute `name` on the Gateway for `host` (none: every host): `path` to `svc-<service>`.
fn route(name: &str, host: Option<&str>, path: &str, service: usize, tag: Option<usize>) -> String {
    bench_intent::route_on(name, "gw", host.as_slice(), &[(path, &format!("svc-{service}"))], tag)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Nearest-rank percentile of `v` (sorted here).
fn percentile(v: &mut [Duration], p: f64) -> f64 {
    v.sort_unstable();
    ms(v[((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1])
}

/// What a load saw: sent, non-2xx, errors, misrouted, and the first failures.
fn seen(load: &xdst_tests::traffic::Report) -> String {
    let failures = if load.first_failures.is_empty() { String::new() } else { format!(": {:?}", load.first_failures) };
    format!(
        "{} sent, {} non-2xx, {} errors, {} misrouted{failures}",
        load.sent, load.non_2xx, load.errors, load.unexpected
    )
}

fn merge(into: &mut BTreeMap<String, u64>, from: BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

struct Run<'a> {
    args: &'a Args,
    routes: usize,
    services: usize,
    proxy: SocketAddr,
    admin: SocketAddr,
    /// Each upstream's port (Service `svc-<i>` is on upstream `i mod UPSTREAMS`).
    upstream_ports: Vec<u16>,
}

/// How an addition reaches Envoy.
enum Write<'a> {
    /// `PUT` to xdst's intent API.
    Api,
    /// A file in xdst's intent directory.
    File(&'a Path),
    /// The k-th RouteConfiguration, from the floor server.
    Floor(&'a Floor, &'a [Vec<floor::Named>]),
}

impl Write<'_> {
    fn how(&self) -> &'static str {
        match self {
            Write::Api => "api",
            Write::File(_) => "file",
            Write::Floor(..) => "floor",
        }
    }
}

/// The name of the k-th addition through the API (the floor replays the same ones).
fn added(k: usize) -> String {
    format!("add-api-{k}")
}

impl Run<'_> {
    /// Adds `--additions` routes by `write`; prints the times and what was seen.
    async fn additions(&self, write: Write<'_>) -> anyhow::Result<()> {
        let how = write.how();
        let expect = Expect::new(Allowed::answers(&[&upstream_of(0)]));
        let load = steady(self.proxy, host_of(0, self.args.hostnames).as_deref(), "/r0", self.args.rate, expect);
        let mut times = Vec::new();
        let mut waiting = BTreeMap::new();
        let mut misrouted = 0;
        for k in 0..self.args.additions {
            let name = if let Write::File(_) = write { format!("add-file-{k}") } else { added(k) };
            let (path, svc) = (format!("/{name}"), k % self.services);
            let host = host_of(k + 2, self.args.hostnames);
            let doc = route(&name, host.as_deref(), &path, svc, None);
            let t0 = Instant::now();
            match &write {
                Write::Api => put(self.admin, &name, &doc).await?,
                Write::File(dir) => xdst_core::files::write_atomic(&dir.join(format!("{name}.yaml")), doc)?,
                Write::Floor(floor, configs) => floor.set(floor::ROUTE, configs[k + 1].clone()),
            }
            let poll = first_200(self.proxy, host.as_deref(), &path, t0, Duration::from_secs(60)).await?;
            misrouted += usize::from(poll.body != upstream_of(svc));
            times.push(poll.took);
            merge(&mut waiting, poll.statuses);
        }
        let load = load.stop().await;
        // Whether the time grows with the routes added: the median of the first and last ten.
        let tens = times.len().min(10);
        let first10 = percentile(&mut times[..tens].to_vec(), 50.0);
        let last10 = percentile(&mut times[times.len() - tens..].to_vec(), 50.0);
        let (p50, p99, max) =
            (percentile(&mut times, 50.0), percentile(&mut times, 99.0), percentile(&mut times, 100.0));
        println!(
            "  {how:<4} additions: {} to the first 200: p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms (median of the \
             first ten {first10:.1} ms, of the last ten {last10:.1} ms); poller saw while waiting {waiting:?}; {misrouted} \
             first 200s from the wrong backend",
            times.len()
        );
        println!("             steady load on /r0: {}", seen(&load));
        println!(
            "RESULT {{\"routes\":{},\"phase\":\"add-{how}\",\"n\":{},\"p50_ms\":{p50:.1},\"p99_ms\":{p99:.1},\"max_ms\":{max:.1},\
             \"waiting\":{},\"misrouted_first\":{misrouted},\"load_sent\":{},\"load_failed\":{},\"load_misrouted\":{}}}",
            self.routes,
            times.len(),
            serde_json::to_string(&waiting)?,
            load.sent,
            load.failed(),
            load.unexpected
        );
        Ok(())
    }

    /// `--api-writes` EndpointSlice writes through the intent API, back to back: ten slices of
    /// API's own (`w-<i>`, each an extra slice of a Service whose first is in a file), each
    /// write moving its second endpoint. Prints the rate and each write's time (its `PUT`
    /// answers once the generation is published).
    async fn writes(&self) -> anyhow::Result<()> {
        let n = self.args.api_writes;
        if n == 0 {
            return Ok(());
        }
        let started = Instant::now();
        let mut times = Vec::with_capacity(n);
        for k in 0..n {
            let (slice, service) = (format!("w-{}", k % 10), format!("svc-{}", k % 10 % self.services));
            let port = self.upstream_ports[k % 10 % self.services % UPSTREAMS];
            let body = format!(
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {slice}, namespace: \
                 {ns}, labels: {{kubernetes.io/service-name: {service}}}}}\naddressType: IPv4\nendpoints: \
                 [{{addresses: [127.0.0.1]}}, {{addresses: [127.0.1.{}]}}]\nports: [{{name: http, port: {port}}}]\n",
                k % 250,
                ns = bench_intent::NS,
            );
            let t0 = Instant::now();
            bench_intent::put(self.admin, "bench", "EndpointSlice", &slice, &body).await?;
            times.push(t0.elapsed());
        }
        let secs = started.elapsed().as_secs_f64();
        let (p50, p99) = (percentile(&mut times, 50.0), percentile(&mut times, 99.0));
        println!(
            "  intent API writes: {n} EndpointSlices one after another in {secs:.1} s: {:.0} a second, each p50 \
             {p50:.1} ms, p99 {p99:.1} ms",
            n as f64 / secs
        );
        println!(
            "RESULT {{\"routes\":{},\"phase\":\"api-writes\",\"n\":{n},\"per_second\":{:.1},\"p50_ms\":{p50:.1},\"p99_ms\":{p99:.1}}}",
            self.routes,
            n as f64 / secs
        );
        Ok(())
    }

    /// `--changes` in-place changes of route `r-1`, 200 ms apart, under load on its path.
    async fn changes(&self) -> anyhow::Result<()> {
        let (a, b) = (1 % self.services, 2 % self.services);
        ensure!(upstream_of(a) != upstream_of(b), "the changed route's two backends share an upstream");
        let expect = Expect::new(Allowed::answers(&[&upstream_of(a)]));
        let host = host_of(1, self.args.hostnames);
        let headers: Vec<(&str, &str)> = host.iter().map(|h| ("host", h.as_str())).collect();
        let load = steady(self.proxy, host.as_deref(), "/r1", self.args.rate, expect.clone());
        let mut current = a;
        let mut tag = None;
        let mut poller_failures = BTreeMap::new();
        for k in 0..self.args.changes {
            let t0 = Instant::now();
            let next = if k % 2 == 0 { if current == a { b } else { a } } else { current };
            tag = if k % 2 == 1 { Some(k) } else { tag };
            // Both are allowed from the write until the new backend is seen answering.
            expect.set(Allowed::answers(&[&upstream_of(current), &upstream_of(next)]));
            put(self.admin, "r-1", &route("r-1", host.as_deref(), "/r1", next, tag)).await?;
            if next != current {
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    match http_request(self.proxy, "/r1", &headers).await {
                        Ok(r) if r.status == 200 && r.body == upstream_of(next) => break,
                        Ok(r) if r.status == 200 => {}
                        Ok(r) => *poller_failures.entry(r.status.to_string()).or_default() += 1,
                        Err(e) => *poller_failures.entry(format!("{:?}", e.kind())).or_default() += 1,
                    }
                    ensure!(Instant::now() < deadline, "change {}: the new backend never answered", k + 1);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            expect.set(Allowed::answers(&[&upstream_of(next)]));
            current = next;
            tokio::time::sleep_until((t0 + Duration::from_millis(200)).into()).await;
        }
        let load = load.stop().await;
        println!(
            "  in-place changes: {} (backend and filter, 200 ms apart) under {} requests/s on the route: {}; poller \
             non-2xx {poller_failures:?}",
            self.args.changes,
            self.args.rate,
            seen(&load)
        );
        println!(
            "RESULT {{\"routes\":{},\"phase\":\"in-place\",\"n\":{},\"load_sent\":{},\"load_failed\":{},\"load_misrouted\":{},\
             \"poller_failed\":{}}}",
            self.routes,
            self.args.changes,
            load.sent,
            load.failed(),
            load.unexpected,
            poller_failures.values().sum::<u64>()
        );
        Ok(())
    }
}

async fn run(args: &Args, routes: usize, upstreams: &[Upstream]) -> anyhow::Result<()> {
    let services = routes.clamp(3, MAX_SERVICES);
    let port = free_port()?;
    let intent = tempfile::Builder::new().prefix("xdst-first200-").tempdir()?;
    let mut text = bench_intent::gateway("gw", port);
    for i in 0..services {
        text.push_str("---\n");
        let upstream = upstreams[i % UPSTREAMS].addr.port().to_string();
        text.push_str(&bench_intent::service(&format!("svc-{i}"), &["127.0.0.1"], &upstream));
    }
    std::fs::write(intent.path().join("services.yaml"), text)?;
    let mut text = String::new();
    // r-1 is the route the in-place changes rewrite through the API: it is not in a file.
    for i in (0..routes).filter(|i| *i != 1) {
        text.push_str("---\n");
        let host = host_of(i, args.hostnames);
        text.push_str(&route(&format!("r-{i}"), host.as_deref(), &format!("/r{i}"), i % services, None));
    }
    std::fs::write(intent.path().join("routes.yaml"), text)?;
    let plugin_dir = tempfile::tempdir()?;
    plugins::install(
        plugin_dir.path(),
        &plugins::gateway_api()?,
        "gateway-api.wasm",
        Some(&match args.scopes_from {
            Some(n) => format!("config: {{address: 127.0.0.1, routeScopesFrom: {n}}}\n"),
            None => "config: {address: 127.0.0.1}\n".to_owned(),
        }),
    )?;
    let token = plugin_dir.path().join("token");
    std::fs::write(&token, "bench")?;
    let started = Instant::now();
    let xdst =
        Process::start_intent(intent.path(), plugin_dir.path(), &["--admin-token-file", token.to_str().unwrap()])
            .await?;
    let api = match args.api {
        Api::Sotw => ApiType::Sotw,
        Api::Delta => ApiType::Delta,
    };
    let envoy = Envoy::start(&Bootstrap::new(api, xdst.xds_addr, "first200")).await?;
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    put(xdst.admin_addr, "r-1", &route("r-1", host_of(1, args.hostnames).as_deref(), "/r1", 1 % services, None))
        .await?;
    served_all(&envoy, proxy, routes, args.hostnames).await?;
    println!(
        "== {routes} HTTPRoutes over {services} Services and {} hostnames attached; Envoy served all after {:.1} s; xdst \
         RSS {:.0} MiB",
        args.hostnames,
        started.elapsed().as_secs_f64(),
        xdst.rss()? as f64 / (1 << 20) as f64
    );
    let upstream_ports = upstreams.iter().map(|u| u.addr.port()).collect();
    let r = Run { args, routes, services, proxy, admin: xdst.admin_addr, upstream_ports };
    r.additions(Write::Api).await?;
    if !args.api_only {
        r.additions(Write::File(intent.path())).await?;
    }
    r.changes().await?;
    r.writes().await?;
    report_envoy(&envoy, "xdst").await?;
    let captured =
        if args.floor { Some(floor::capture(xdst.xds_addr, "floor-capture", "envoy-test").await?) } else { None };
    envoy.kill().await?;
    xdst.kill().await?;
    if let Some(captured) = captured {
        run_floor(&r, captured, api).await?;
    }
    Ok(())
}

/// Waits until Envoy serves the last route and `/r1`.
async fn served_all(envoy: &Envoy, proxy: SocketAddr, routes: usize, hostnames: usize) -> anyhow::Result<()> {
    let last = routes - 1;
    let host = host_of(last, hostnames);
    first_200(proxy, host.as_deref(), &format!("/r{last}"), Instant::now(), Duration::from_secs(120))
        .await
        .with_context(|| format!("Envoy never served the last route\n{}", envoy.log_tail(20)))?;
    first_200(proxy, host_of(1, hostnames).as_deref(), "/r1", Instant::now(), Duration::from_secs(30)).await?;
    Ok(())
}

/// The updates Envoy rejected (the sum of its `update_rejected` counters: a NACK each) and its
/// own time to apply each RouteConfiguration (RDS `update_duration`, ms; Envoy computes the
/// quantiles when it flushes its stats, every 5 s).
async fn report_envoy(envoy: &Envoy, fed_by: &str) -> anyhow::Result<()> {
    let rejected: u64 = envoy
        .stats()
        .await?
        .matching(&["update_rejected"])
        .lines()
        .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<u64>().ok())
        .sum();
    println!("  updates Envoy rejected (the sum of its update_rejected counters): {rejected}");
    let stats = envoy.stats().await?;
    let updates = |scoped: bool| -> (u64, usize) {
        let names: Vec<&str> = stats
            .names()
            .filter(|n| n.ends_with(".update_success") && n.contains(".scoped_rds.") == scoped)
            .filter(|n| scoped || n.contains(".rds."))
            .collect();
        (names.iter().map(|n| stats.count(n)).sum(), names.len())
    };
    let ((routes, subscriptions), (scopes, _)) = (updates(false), updates(true));
    println!(
        "  updates Envoy applied: listeners {}, route configurations {routes} (over {subscriptions} subscriptions), \
         scope sets {scopes}",
        stats.count("listener_manager.lds.update_success"),
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    let durations = envoy.admin_get("/stats?filter=rds.*update_duration").await?;
    let lines: Vec<&str> = durations.lines().filter(|l| l.contains("P50") && !l.contains("P50(nan,nan)")).collect();
    // With scoped RDS, one histogram per part: the parts the additions changed apply more than once.
    let mut most: Vec<&str> = lines.clone();
    most.sort_by_key(|l| std::cmp::Reverse(l.len()));
    for line in most.iter().take(3) {
        println!(
            "  Envoy's time to apply a RouteConfiguration fed by {fed_by} (ms, cumulative; {} with values): {line}",
            lines.len()
        );
    }
    Ok(())
}

/// Whether `route` matches `path` exactly or as a prefix of whole segments (how a PathPrefix
/// match is translated).
fn matches_path(route: &envoy_types::pb::envoy::config::route::v3::Route, path: &str) -> bool {
    use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
    let Some(spec) = route.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) else { return false };
    let p = match spec {
        PathSpecifier::Prefix(p) | PathSpecifier::Path(p) | PathSpecifier::PathSeparatedPrefix(p) => p,
        _ => return false,
    };
    p.trim_end_matches('/') == path
}

/// The RouteConfigurations xdst sent with each API addition, k = 0 (none of them) to n (all),
/// taken from the last one by leaving out the later additions' routes.
fn configs_by_addition(last: &[floor::Named], n: usize) -> anyhow::Result<Vec<Vec<floor::Named>>> {
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    let mut out = Vec::new();
    for k in 0..=n {
        let later: Vec<String> = (k..n).map(|j| format!("/{}", added(j))).collect();
        let mut configs = Vec::new();
        for (name, any) in last {
            let mut rc = RouteConfiguration::decode(&any.value[..])?;
            for vhost in &mut rc.virtual_hosts {
                vhost.routes.retain(|r| !later.iter().any(|p| matches_path(r, p)));
            }
            configs.push((name.clone(), Any { type_url: any.type_url.clone(), value: rc.encode_to_vec() }));
        }
        out.push(configs);
    }
    let found = last.iter().map(|(_, a)| a.value.len()).sum::<usize>()
        - out[0].iter().map(|(_, a)| a.value.len()).sum::<usize>();
    ensure!(n == 0 || found > 0, "the captured RouteConfigurations hold none of the additions");
    Ok(out)
}

/// Step 3: the same API additions, each RouteConfiguration xdst sent from the floor server.
async fn run_floor(r: &Run<'_>, mut captured: floor::Resources, api: ApiType) -> anyhow::Result<()> {
    ensure!(matches!(api, ApiType::Sotw), "--floor: the floor server speaks SotW ADS (no --api delta)");
    let last = captured.remove(floor::ROUTE).context("the capture holds no RouteConfiguration")?;
    let configs = configs_by_addition(&last, r.args.additions)?;
    let bytes: usize = last.iter().map(|(_, a)| a.value.len()).sum();
    captured.insert(floor::ROUTE.to_owned(), configs[0].clone());
    let (captured, configs, shape) = if r.args.floor_scoped {
        // Requests without a Host header of their own carry the proxy's address.
        let catch_all = r.proxy.ip().to_string();
        let split = floor::split_by_host(&captured, &catch_all)?;
        let mut parts = Vec::new();
        for c in &configs {
            let (scopes, routes) = floor::split_routes(c, &catch_all)?;
            ensure!(Some(&scopes) == split.get(floor::SCOPE), "an addition made a new scope: not measured here");
            parts.push(routes);
        }
        let n = parts[0].len();
        (split, parts, format!("split over scoped RDS into {n} RouteConfigurations, one per virtual host"))
    } else {
        (captured, configs, "as one RouteConfiguration".to_owned())
    };
    let server = Floor::start(captured).await?;
    let envoy = Envoy::start(&Bootstrap::new(api, server.addr, "first200")).await?;
    served_all(&envoy, r.proxy, r.routes, r.args.hostnames).await?;
    println!(
        "== the floor: the same Envoy fed the same RouteConfigurations ({bytes} bytes), {shape}, by a minimal ADS server"
    );
    r.additions(Write::Floor(&server, &configs)).await?;
    report_envoy(&envoy, "the floor").await?;
    envoy.kill().await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::env::var("XDST_BIN").context("set XDST_BIN to the xdst binary to measure (tests/bench/first200.sh does)")?;
    let mut upstreams = Vec::new();
    for i in 0..UPSTREAMS {
        upstreams.push(Upstream::start(&format!("u{i}")).await?);
    }
    for &routes in &args.routes {
        ensure!(routes >= 3, "--routes: at least 3");
        run(&args, routes, &upstreams).await?;
    }
    Ok(())
}

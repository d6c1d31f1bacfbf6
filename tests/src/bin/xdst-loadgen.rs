//! `xdst-loadgen`: an xDS load generator for benchmarking xdst (or any ADS server).
//!
//! It opens N aggregated (ADS) streams as distinct Envoy-like nodes (unique `node.id`, one
//! shared `node.cluster`), SotW or Delta, multiplexed over C HTTP/2 connections (C = N: one
//! connection per stream). Each stream behaves like Envoy: it subscribes CDS by wildcard,
//! EDS by the names its clusters refer to, and, once every cluster has its endpoints (Envoy's
//! cluster manager is initialized), LDS by wildcard and then RDS by the names its listeners
//! refer to; it ACKs every response. `--startup eager` subscribes CDS and LDS at once instead,
//! which no Envoy does. It measures:
//!
//! 1. initial convergence: from the start until every stream has received and ACKed all four
//!    types;
//! 2. the server's memory per idle stream: `VmRSS` of `--server-pid` before the streams open
//!    and once they are idle;
//! 3. change convergence: it rewrites a file in the server's `--resources` directory
//!    (atomically, write + rename) and measures, per stream, the time from the write until
//!    the stream received the changed resources and ACKed them; `--changes` times.
//!
//! With `--tls-ca` (and `--tls-cert`/`--tls-key`: mTLS) every connection is a TLS one, to
//! `localhost`. It does not do per-type services, NACKs or reconnects: a stream that fails is
//! counted as failed. Timestamps are taken right after the ACK is queued on the stream.
//!
//! ```text
//! xdst-loadgen --addr 127.0.0.1:18000 --n 10000 --api delta --connections 10 \
//!     --server-pid "$(pidof xdst)" --resources /tmp/res --changes 5 --json
//! ```
//! `tests/bench/run.sh` runs it against a fresh server; results are in docs/PERFORMANCE.md.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::core::v3::node::UserAgentVersionType;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use prost::Message;
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::{Service, http};
use tonic::transport::{Channel, Endpoint};
use xdst_core::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

/// The four types every stream converges on, in the order Envoy asks for them.
const TYPES: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];
const CDS: usize = 0;
const EDS: usize = 1;
const LDS: usize = 2;
const RDS: usize = 3;

#[derive(Parser, Debug)]
#[command(
    name = "xdst-loadgen",
    about = "Opens N Envoy-like ADS streams against an xDS server and measures convergence and memory"
)]
struct Args {
    /// The server's xDS address.
    #[arg(long, default_value = "127.0.0.1:18000")]
    addr: String,
    /// Number of streams (each a distinct node).
    #[arg(long, default_value_t = 1000)]
    n: usize,
    /// SotW (StreamAggregatedResources) or Delta (DeltaAggregatedResources).
    #[arg(long, value_enum, default_value_t = Api::Delta)]
    api: Api,
    /// HTTP/2 connections the streams are spread over (round robin); N means one per stream.
    #[arg(long, default_value_t = 10)]
    connections: usize,
    /// Connections being established at once (keeps the server's accept backlog from
    /// overflowing into SYN retransmits, which would measure the kernel, not the server).
    #[arg(long, default_value_t = 256)]
    connect_concurrency: usize,
    /// PID of the server, for its memory (VmRSS) and CPU time.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The server's resources directory; needed for --changes.
    #[arg(long, value_name = "DIR")]
    resources: Option<PathBuf>,
    /// How many changes to make after the initial convergence.
    #[arg(long, default_value_t = 5)]
    changes: usize,
    /// What each change rewrites: `cluster` (one cluster's connect_timeout: CDS),
    /// `endpoint` (one endpoint's port: EDS), `all` (a field of each of the four types).
    #[arg(long, value_enum, default_value_t = Change::Cluster)]
    change: Change,
    /// When a stream subscribes to listeners: `envoy` (once its clusters are warm: every EDS
    /// cluster has its endpoints, as Envoy's start-up does) or `eager` (with clusters, at once).
    #[arg(long, value_enum, default_value_t = Startup::Envoy)]
    startup: Startup,
    /// node.cluster of every stream.
    #[arg(long, default_value = "bench")]
    node_cluster: String,
    /// With G > 1: stream s is of node group --node-cluster followed by s mod G (G node
    /// groups, e.g. `--node-cluster bench/gw- --groups 1000` for Gateways gw-0 .. gw-999).
    #[arg(long, default_value_t = 1)]
    groups: usize,
    /// Pause after the initial convergence before memory is read, and between changes.
    #[arg(long, default_value_t = 2000)]
    settle_ms: u64,
    /// Give up on a phase after this long.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
    /// Tokio worker threads of the load generator.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// The server's admin address: after the changes, with every stream still open, time the
    /// operator's reads (`/changes/{latest}`, `/status/summary`, `/status/nodes`,
    /// `/status/graph`, and `/debug/nodes` next to them), each [`ADMIN_PROBES`] times.
    #[arg(long, value_name = "HOST:PORT")]
    admin: Option<std::net::SocketAddr>,
    /// After the changes: a reconnect storm. Every stream and connection is dropped at once
    /// and opened again within --storm-spread-ms (connection c at spread x c / C); measures
    /// until every stream holds its full configuration again (all four types ACKed), per
    /// stream from its connection's start, and the streams that failed (refused) or never
    /// converged (starved).
    #[arg(long)]
    storm: bool,
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    storm_spread_ms: u64,
    /// After everything else, keep the streams open this long, sampling the server's memory
    /// (VmRSS, VmHWM), open file descriptors and CPU every --sample-secs.
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    hold_secs: u64,
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    sample_secs: u64,
    /// While holding: endpoint churn. Every 1/R s, change number k rewrites
    /// DIR/svc-<k mod --churn-services>.yaml from --churn-template, `{i}` replaced by the
    /// service number and `{port}` by 1024 + k: the port names the change. Each stream that
    /// receives a load assignment notes the change its first endpoint's port names (and the
    /// earlier changes of that service it superseded); a change's latency is the time from
    /// its write until the last stream had it.
    #[arg(long, value_name = "DIR", requires_all = ["churn_template", "churn_services"])]
    churn_dir: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    churn_template: Option<PathBuf>,
    #[arg(long, value_name = "N")]
    churn_services: Option<usize>,
    #[arg(long, default_value_t = 10, value_name = "R")]
    churn_per_second: u32,
    /// How long the churn lasts (at most --hold-secs).
    #[arg(long, value_name = "SECONDS")]
    churn_secs: Option<u64>,
    /// Also print the results as one JSON line (prefixed `RESULT `).
    #[arg(long)]
    json: bool,
    /// Connect over TLS, trusting this CA (the server's certificate must name localhost).
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    /// With --tls-ca: present this client certificate (mTLS).
    #[arg(long, value_name = "FILE", requires_all = ["tls_ca", "tls_key"])]
    tls_cert: Option<std::path::PathBuf>,
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Api {
    Sotw,
    Delta,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Startup {
    Envoy,
    Eager,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Change {
    Cluster,
    Endpoint,
    All,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Sotw => "sotw",
            Api::Delta => "delta",
        }
    }
}

impl Startup {
    fn name(self) -> &'static str {
        match self {
            Startup::Envoy => "envoy",
            Startup::Eager => "eager",
        }
    }
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Cluster => "cluster",
            Change::Endpoint => "endpoint",
            Change::All => "all",
        }
    }
    /// The types whose content each change alters.
    fn types(self) -> &'static [usize] {
        match self {
            Change::Cluster => &[CDS],
            Change::Endpoint => &[EDS],
            Change::All => &[CDS, EDS, LDS, RDS],
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.n == 0 {
        bail!("--n must be at least 1");
    }
    raise_fd_limit(args.n.min(args.connections) + 256);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads.max(1)).enable_all().build()?;
    // The coordinator runs on the workers too: the main thread only waits.
    let result = rt.block_on(async { tokio::spawn(run(args)).await })?;
    // Tearing down tens of thousands of streams one by one is slow and measures nothing.
    match result {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("xdst-loadgen: {e:#}");
            std::process::exit(1)
        }
    }
}

/// How many times each admin read is timed.
const ADMIN_PROBES: usize = 20;

/// Times the operator's reads on the admin port with `n` nodes connected; checks that the
/// latest change is live on all of them (the answer is right, not only fast).
async fn probe_admin(admin: std::net::SocketAddr, n: usize, group: &str) -> anyhow::Result<()> {
    use xdst_tests::upstream::http_get;
    let (_, latest) = http_get(admin, "/changes").await?;
    let latest: serde_json::Value = serde_json::from_str(&latest)?;
    let id = latest["latest"].as_i64().context("GET /changes: no latest change")?;
    let (_, report) = http_get(admin, &format!("/changes/{id}")).await?;
    let report: serde_json::Value = serde_json::from_str(&report)?;
    let holding = report["groups"][group]["holding"].as_u64().unwrap_or(0);
    if report["live"] != true || holding != n as u64 {
        bail!("GET /changes/{id}: {holding} of {n} nodes hold the latest change: {report}");
    }
    let paths = [
        format!("/changes/{id}"),
        "/status/summary".to_owned(),
        "/status/nodes?limit=50".to_owned(),
        format!("/status/graph?group={group}"),
        "/debug/nodes".to_owned(),
    ];
    for path in paths {
        let mut times = Vec::with_capacity(ADMIN_PROBES);
        let mut bytes = 0;
        for _ in 0..ADMIN_PROBES {
            let t = Instant::now();
            let (status, body) = http_get(admin, &path).await?;
            times.push(t.elapsed());
            if status != 200 {
                bail!("GET {path}: {status}");
            }
            bytes = body.len();
        }
        let s = Stats::of(times);
        println!("  admin     : GET {path}: p50 {:.1} ms, max {:.1} ms, {bytes} bytes ({n} nodes)", s.p50, s.max);
    }
    Ok(())
}

/// Raises the soft open-files limit to the hard limit; says so if that is not enough.
fn raise_fd_limit(needed: usize) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    if lim.rlim_cur < needed as libc::rlim_t {
        eprintln!(
            "xdst-loadgen: warning: open-files limit {} is below the {needed} needed; raise it (ulimit -n) first",
            lim.rlim_cur
        );
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let n = args.n;
    let conns = args.connections.clamp(1, n);
    let timeout = Duration::from_secs(args.timeout_secs);
    let settle = Duration::from_millis(args.settle_ms);
    let mut changer = match &args.resources {
        Some(dir) => Some(Changer::new(dir, args.change)?),
        None if args.changes > 0 => bail!("--changes needs --resources DIR (the server's resources directory)"),
        None => None,
    };
    let server = args.server_pid.map(Proc);
    let rss_before = server.as_ref().map(Proc::rss_kb).transpose()?;
    let addr: std::net::SocketAddr =
        args.addr.parse().with_context(|| format!("--addr {:?}: expected IP:PORT", args.addr))?;
    let tls = match &args.tls_ca {
        Some(ca) => {
            let leaf =
                args.tls_cert.clone().zip(args.tls_key.clone()).map(|(cert, key)| xdst_tests::pki::Leaf { cert, key });
            Some(xdst_tests::pki::client_config(ca, leaf.as_ref())?)
        }
        None => None,
    };
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(30))
        // Envoy's defaults are larger still (256 MiB); flow control is not what is measured.
        .initial_connection_window_size(16 << 20)
        .initial_stream_window_size(1 << 20)
        .buffer_size(n.div_ceil(conns).max(64));

    let progress = Arc::new(Progress::new(n));
    let cpu0 = Cpu::now(server.as_ref());
    let t0 = progress.start(&[CDS, EDS, LDS, RDS]);

    let fleet = Fleet {
        n,
        conns,
        addr,
        endpoint,
        tls,
        api: args.api,
        eager: args.startup == Startup::Eager,
        node_cluster: args.node_cluster.clone(),
        groups: args.groups.max(1),
        gate: Arc::new(Semaphore::new(args.connect_concurrency.max(1))),
        progress: progress.clone(),
        connected: Arc::new(Mutex::new(Vec::<Instant>::with_capacity(conns))),
        tasks: Arc::new(Mutex::new(Vec::with_capacity(n))),
    };
    fleet.open(t0, Duration::ZERO);
    let connected = fleet.connected.clone();
    let initial_ok = progress.wait(timeout).await;
    let cpu1 = Cpu::now(server.as_ref());
    let connect_ms = connected.lock().unwrap().iter().max().map(|t| ms(*t - t0));
    let (since_start, since_open) = progress.latencies();
    let initial = Phase {
        converged: since_start.len(),
        failed: progress.failed.load(Ordering::Acquire),
        unexpected: 0,
        lat: Stats::of(since_start),
        cpu: cpu0.spent(&cpu1),
    };
    let per_stream_open = Stats::of(since_open);
    if !initial_ok {
        eprintln!(
            "xdst-loadgen: initial convergence timed out: {} of {n} converged, {} failed",
            initial.converged, initial.failed
        );
    }
    progress.print_errors();

    // Idle: nothing is in flight; let the server's allocator and buffers settle.
    let idle = progress.idle(settle).await;
    let rss_idle = server.as_ref().map(Proc::rss_kb).transpose()?;

    let mut report = Report {
        api: args.api,
        n,
        conns,
        change: args.change,
        startup: args.startup,
        connect_ms,
        initial,
        per_stream_open,
        idle_updates: idle,
        rss_before,
        rss_idle,
        rss_after: None,
        changes: Vec::new(),
        threads: args.threads,
        storm: None,
        hold: None,
    };
    report.print_head();

    if let Some(changer) = changer.as_mut() {
        for k in 0..args.changes {
            let cpu0 = Cpu::now(server.as_ref());
            progress.start(args.change.types());
            changer.apply(k).with_context(|| format!("change {}", k + 1))?;
            let ok = progress.wait(timeout).await;
            let cpu1 = Cpu::now(server.as_ref());
            let (lat, _) = progress.latencies();
            if !ok {
                eprintln!("xdst-loadgen: change {} timed out: {} of {n} converged", k + 1, lat.len());
            }
            report.changes.push(Phase {
                converged: lat.len(),
                failed: progress.failed.load(Ordering::Acquire),
                unexpected: progress.unexpected.load(Ordering::Acquire),
                lat: Stats::of(lat),
                cpu: cpu0.spent(&cpu1),
            });
            report.print_change(k);
            progress.print_errors();
            progress.idle(settle).await;
        }
    }
    if args.storm {
        fleet.drop_all();
        // Until the server has seen every stream go: its gauge of streams reads 0 then, but
        // the load generator cannot read it, so the drop is given the settle time.
        tokio::time::sleep(settle).await;
        progress.reset_failures();
        let cpu0 = Cpu::now(server.as_ref());
        let t0 = progress.start(&[CDS, EDS, LDS, RDS]);
        fleet.open(t0, Duration::from_millis(args.storm_spread_ms));
        let ok = progress.wait(timeout).await;
        let cpu1 = Cpu::now(server.as_ref());
        let (since_start, _, since_began) = progress.latencies_from_began();
        let failed = progress.failed.load(Ordering::Acquire);
        let per_stream = Stats::of(since_began);
        let all = Stats::of(since_start);
        let (server_ms, loadgen_ms, other_ms) = cpu0.spent(&cpu1);
        println!(
            "  storm     : {}/{n} converged again, {failed} failed (refused), {} starved (not converged in {}s); all in {:.0} ms after the drop; per stream from its reconnect p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; CPU: server {server_ms:.0} ms, loadgen {loadgen_ms:.0} ms, other {other_ms:.0} ms",
            per_stream.count,
            n - per_stream.count - failed,
            args.timeout_secs,
            all.max,
            per_stream.p50,
            per_stream.p99,
            per_stream.max,
        );
        if !ok {
            eprintln!("xdst-loadgen: the storm timed out");
        }
        progress.print_errors();
        report.storm = Some(format!(
            r#"{{"spread_ms":{},"converged":{},"failed":{},"starved":{},"all_ms":{:.1},"per_stream":{},"server_cpu_ms":{server_ms:.0},"loadgen_cpu_ms":{loadgen_ms:.0},"other_cpu_ms":{other_ms:.0}}}"#,
            args.storm_spread_ms,
            per_stream.count,
            failed,
            n - per_stream.count - failed,
            all.max,
            per_stream.json()
        ));
    }
    if args.hold_secs > 0 {
        report.hold = Some(hold(&args, &progress, server.as_ref()).await?);
    }
    if let Some(admin) = args.admin {
        probe_admin(admin, n, &args.node_cluster).await?;
    }
    report.rss_after = server.as_ref().map(Proc::rss_kb).transpose()?;
    if let Some(after) = report.rss_after {
        println!("  memory    : server RSS {:.1} MiB after the changes", after as f64 / 1024.0);
    }
    if args.json {
        println!("RESULT {}", report.json());
    }
    Ok(())
}

/// The streams and their connections, opened (and, for a storm, dropped and opened again).
struct Fleet {
    n: usize,
    conns: usize,
    addr: std::net::SocketAddr,
    endpoint: Endpoint,
    tls: Option<tokio_rustls::TlsConnector>,
    api: Api,
    eager: bool,
    node_cluster: String,
    groups: usize,
    /// At most `--connect-concurrency` connections being established at once.
    gate: Arc<Semaphore>,
    progress: Arc<Progress>,
    /// When each connection was up.
    connected: Arc<Mutex<Vec<Instant>>>,
    /// Every stream's task, to drop them all at once.
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Fleet {
    /// Opens C connection tasks, connection `c` starting at `start + spread * c / C`; each
    /// connects (at most --connect-concurrency at once) and then starts its share of the
    /// streams. A stream's time to converge counts from its connection's start.
    fn open(&self, start: Instant, spread: Duration) {
        for c in 0..self.conns {
            let at = start + spread.mul_f64(c as f64 / self.conns as f64);
            let (endpoint, gate, progress) = (self.endpoint.clone(), self.gate.clone(), self.progress.clone());
            let (connected, tasks) = (self.connected.clone(), self.tasks.clone());
            let (api, eager, node_cluster, groups) = (self.api, self.eager, self.node_cluster.clone(), self.groups);
            let connector = Connector(self.addr, self.tls.clone());
            let (n, conns) = (self.n, self.conns);
            let task = tokio::spawn(async move {
                tokio::time::sleep_until(at.into()).await;
                let streams = (c..n).step_by(conns);
                for s in streams.clone() {
                    progress.began(s);
                }
                let channel = {
                    let _permit = gate.acquire().await;
                    endpoint.connect_with_connector(connector).await
                };
                let channel = match channel {
                    Ok(ch) => ch,
                    Err(e) => {
                        let error = format!("connect: {e:?}");
                        for s in streams {
                            progress.failed(s, &error);
                        }
                        return;
                    }
                };
                connected.lock().unwrap().push(Instant::now());
                let mut handles = Vec::new();
                for s in streams {
                    let node = match groups {
                        1 => node(s, &node_cluster),
                        g => node(s, &format!("{node_cluster}{}", s % g)),
                    };
                    let ch = channel.clone();
                    let progress = progress.clone();
                    let stream = tokio::spawn(async move {
                        let result = match api {
                            Api::Sotw => sotw_stream(s, ch, node, eager, &progress).await,
                            Api::Delta => delta_stream(s, ch, node, eager, &progress).await,
                        };
                        let error = match result {
                            Ok(()) => "server closed the stream".to_owned(),
                            Err(e) => format!("{e:#}"),
                        };
                        progress.failed(s, &error);
                    });
                    handles.push(stream.abort_handle());
                }
                tasks.lock().unwrap().extend(handles);
            });
            self.tasks.lock().unwrap().push(task.abort_handle());
        }
    }

    /// Drops every stream and connection at once (as a restart of the server, or a network
    /// partition, would).
    fn drop_all(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
        self.connected.lock().unwrap().clear();
    }
}

/// Connects straight to the socket address: tonic's default connector resolves even an IP
/// literal through getaddrinfo on a blocking thread, a measurable cost per connection.
/// Connects to the address, over TLS with a connector.
#[derive(Clone)]
struct Connector(std::net::SocketAddr, Option<tokio_rustls::TlsConnector>);

/// A plaintext or TLS connection.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

impl Service<http::Uri> for Connector {
    type Response = hyper_util::rt::TokioIo<Box<dyn Io>>;
    type Error = std::io::Error;
    type Future = std::pin::Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let (addr, tls) = (self.0, self.1.clone());
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let io: Box<dyn Io> = match tls {
                Some(c) => Box::new(c.connect("localhost".try_into().expect("a DNS name"), stream).await?),
                None => Box::new(stream),
            };
            Ok(hyper_util::rt::TokioIo::new(io))
        })
    }
}

fn node(i: usize, cluster: &str) -> Node {
    Node {
        id: format!("loadgen-{i}"),
        cluster: cluster.to_owned(),
        user_agent_name: "envoy".into(),
        user_agent_version_type: Some(UserAgentVersionType::UserAgentVersion("1.34.0/xdst-loadgen".into())),
        ..Default::default()
    }
}

fn type_index(type_url: &str) -> Option<usize> {
    TYPES.iter().position(|t| *t == type_url)
}

/// The EDS name an EDS cluster asks for, or `None` for other clusters.
fn eds_name(body: &[u8]) -> Option<String> {
    let c = Cluster::decode(body).ok()?;
    let eds = matches!(c.cluster_discovery_type, Some(ClusterDiscoveryType::Type(t)) if t == DiscoveryType::Eds as i32);
    if !eds {
        return None;
    }
    let service = c.eds_cluster_config.map(|e| e.service_name).filter(|s| !s.is_empty());
    Some(service.unwrap_or(c.name))
}

/// The cluster a ClusterLoadAssignment is for.
fn cla_name(body: &[u8]) -> Option<String> {
    ClusterLoadAssignment::decode(body).ok().map(|c| c.cluster_name)
}

/// The RDS route configuration names a listener's HTTP connection managers ask for.
fn rds_names(body: &[u8], out: &mut BTreeSet<String>) {
    let Ok(l) = Listener::decode(body) else { return };
    for chain in l.filter_chains.iter().chain(l.default_filter_chain.iter()) {
        for f in &chain.filters {
            let Some(ConfigType::TypedConfig(any)) = &f.config_type else { continue };
            if !any.type_url.ends_with(".HttpConnectionManager") {
                continue;
            }
            if let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice())
                && let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier
            {
                out.insert(rds.route_config_name);
            }
        }
    }
}

/// One SotW ADS stream acting like Envoy.
async fn sotw_stream(id: usize, channel: Channel, node: Node, eager: bool, progress: &Progress) -> anyhow::Result<()> {
    #[derive(Default)]
    struct Sub {
        version: String,
        nonce: String,
        names: Vec<String>,
    }
    let (tx, rx) = mpsc::channel::<DiscoveryRequest>(8);
    let mut subs: [Sub; 4] = Default::default();
    let mut warm = Warmup::new(eager);
    // The endpoints held: the names in the last EDS response.
    let mut endpoints = BTreeSet::new();
    tx.send(DiscoveryRequest { node: Some(node), type_url: CLUSTER.into(), ..Default::default() }).await?;
    if warm.listeners_due(false, || true) {
        tx.send(DiscoveryRequest { type_url: LISTENER.into(), ..Default::default() }).await?;
    }
    let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
    progress.opened(id);
    let mut inbound = client.stream_aggregated_resources(ReceiverStream::new(rx)).await?.into_inner();
    while let Some(resp) = inbound.message().await? {
        let Some(ty) = type_index(&resp.type_url) else {
            // Not one of ours: ACK it and move on.
            tx.send(DiscoveryRequest {
                version_info: resp.version_info,
                response_nonce: resp.nonce,
                type_url: resp.type_url,
                ..Default::default()
            })
            .await?;
            continue;
        };
        // The dependent subscription, as Envoy derives it: EDS from clusters, RDS from listeners.
        let dependent = match ty {
            CDS => Some((EDS, resp.resources.iter().filter_map(|a| eds_name(&a.value)).collect::<BTreeSet<_>>())),
            LDS => Some((
                RDS,
                resp.resources.iter().fold(BTreeSet::new(), |mut s, a| {
                    rds_names(&a.value, &mut s);
                    s
                }),
            )),
            _ => None,
        };
        if let Some((d, names)) = dependent {
            let names: Vec<String> = names.into_iter().collect();
            if names != subs[d].names {
                subs[d].names = names;
                let sub = &subs[d];
                tx.send(DiscoveryRequest {
                    version_info: sub.version.clone(),
                    response_nonce: sub.nonce.clone(),
                    type_url: TYPES[d].into(),
                    resource_names: sub.names.clone(),
                    ..Default::default()
                })
                .await?;
            }
        }
        let changed = resp.version_info != subs[ty].version;
        let sub = &mut subs[ty];
        sub.version = resp.version_info;
        sub.nonce = resp.nonce;
        tx.send(DiscoveryRequest {
            version_info: sub.version.clone(),
            response_nonce: sub.nonce.clone(),
            type_url: resp.type_url,
            resource_names: sub.names.clone(),
            ..Default::default()
        })
        .await?;
        if ty == EDS {
            endpoints = resp.resources.iter().filter_map(|a| cla_name(&a.value)).collect();
            if let Some(churn) = progress.churn.get() {
                for a in &resp.resources {
                    churn.seen(id, &a.value);
                }
            }
        }
        if warm.listeners_due(ty == CDS, || subs[EDS].names.iter().all(|n| endpoints.contains(n))) {
            tx.send(DiscoveryRequest { type_url: LISTENER.into(), ..Default::default() }).await?;
        }
        if changed {
            progress.updated(id, ty);
        }
    }
    Ok(())
}

/// When an Envoy-like stream subscribes to listeners: Envoy initializes its cluster manager
/// first (every cluster of the first CDS answer warm, EDS ones with their endpoints) and only
/// then starts LDS.
struct Warmup {
    listeners_asked: bool,
    clusters_answered: bool,
}

impl Warmup {
    fn new(eager: bool) -> Self {
        Warmup { listeners_asked: false, clusters_answered: eager }
    }

    /// Whether to subscribe to listeners now (once): `clusters` says the current answer is a
    /// CDS one, `endpoints_held` whether every EDS name asked for has its endpoints.
    fn listeners_due(&mut self, clusters: bool, endpoints_held: impl FnOnce() -> bool) -> bool {
        self.clusters_answered |= clusters;
        if self.listeners_asked || !self.clusters_answered || !endpoints_held() {
            return false;
        }
        self.listeners_asked = true;
        true
    }
}

/// One Delta ADS stream acting like Envoy.
async fn delta_stream(id: usize, channel: Channel, node: Node, eager: bool, progress: &Progress) -> anyhow::Result<()> {
    let (tx, rx) = mpsc::channel::<DeltaDiscoveryRequest>(8);
    // Per type: name -> version held.
    let mut held: [HashMap<String, String>; 4] = Default::default();
    let mut answered = [false; 4];
    // What each cluster / listener asks for, and what is subscribed because of it.
    let mut cluster_eds: HashMap<String, String> = HashMap::new();
    let mut listener_rds: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut subscribed: [BTreeSet<String>; 4] = Default::default();
    let mut warm = Warmup::new(eager);
    tx.send(DeltaDiscoveryRequest { node: Some(node), type_url: CLUSTER.into(), ..Default::default() }).await?;
    if warm.listeners_due(false, || true) {
        tx.send(DeltaDiscoveryRequest { type_url: LISTENER.into(), ..Default::default() }).await?;
    }
    let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(usize::MAX);
    progress.opened(id);
    let mut inbound = client.delta_aggregated_resources(ReceiverStream::new(rx)).await?.into_inner();
    while let Some(resp) = inbound.message().await? {
        let Some(ty) = type_index(&resp.type_url) else {
            tx.send(DeltaDiscoveryRequest {
                type_url: resp.type_url,
                response_nonce: resp.nonce,
                ..Default::default()
            })
            .await?;
            continue;
        };
        let mut changed = !std::mem::replace(&mut answered[ty], true);
        for r in &resp.resources {
            if held[ty].get(&r.name) != Some(&r.version) {
                changed = true;
                held[ty].insert(r.name.clone(), r.version.clone());
            }
            let body = r.resource.as_ref().map(|a| a.value.as_slice()).unwrap_or_default();
            if ty == EDS
                && let Some(churn) = progress.churn.get()
            {
                churn.seen(id, body);
            }
            match ty {
                CDS => match eds_name(body) {
                    Some(e) => {
                        cluster_eds.insert(r.name.clone(), e);
                    }
                    None => {
                        cluster_eds.remove(&r.name);
                    }
                },
                LDS => {
                    let mut names = BTreeSet::new();
                    rds_names(body, &mut names);
                    listener_rds.insert(r.name.clone(), names);
                }
                _ => {}
            }
        }
        for name in &resp.removed_resources {
            changed |= held[ty].remove(name).is_some();
            cluster_eds.remove(name);
            listener_rds.remove(name);
        }
        let dependent = match ty {
            CDS => Some((EDS, cluster_eds.values().cloned().collect::<BTreeSet<_>>())),
            LDS => Some((RDS, listener_rds.values().flatten().cloned().collect::<BTreeSet<_>>())),
            _ => None,
        };
        if let Some((d, want)) = dependent
            && want != subscribed[d]
        {
            let subscribe: Vec<String> = want.difference(&subscribed[d]).cloned().collect();
            let unsubscribe: Vec<String> = subscribed[d].difference(&want).cloned().collect();
            for n in &unsubscribe {
                held[d].remove(n);
            }
            subscribed[d] = want;
            tx.send(DeltaDiscoveryRequest {
                type_url: TYPES[d].into(),
                resource_names_subscribe: subscribe,
                resource_names_unsubscribe: unsubscribe,
                ..Default::default()
            })
            .await?;
        }
        tx.send(DeltaDiscoveryRequest { type_url: resp.type_url, response_nonce: resp.nonce, ..Default::default() })
            .await?;
        if warm.listeners_due(ty == CDS, || subscribed[EDS].iter().all(|n| held[EDS].contains_key(n))) {
            tx.send(DeltaDiscoveryRequest { type_url: LISTENER.into(), ..Default::default() }).await?;
        }
        if changed {
            progress.updated(id, ty);
        }
    }
    Ok(())
}

/// Per-stream progress through one phase (the initial convergence, or one change), shared
/// by the streams and the coordinator without messages: each stream records its own times
/// and counts itself done; the last one wakes the coordinator. Phases start while idle.
struct Progress {
    base: Instant,
    n: usize,
    phase: AtomicU32,
    /// Bit t: type t must be updated for the phase to be done.
    expected: AtomicU8,
    /// Phase start, in nanoseconds since `base` (all times here are +1 so 0 means never).
    since: AtomicU64,
    done: AtomicUsize,
    failed: AtomicUsize,
    unexpected: AtomicUsize,
    slots: Box<[Slot]>,
    all_done: Notify,
    errors: Mutex<BTreeMap<String, usize>>,
    /// Endpoint churn, once it starts.
    churn: std::sync::OnceLock<Arc<Churn>>,
}

#[derive(Default)]
struct Slot {
    /// When the stream's connection started to connect.
    began: AtomicU64,
    opened: AtomicU64,
    /// When each type last got new content (ACKed).
    updated: [AtomicU64; 4],
    done_phase: AtomicU32,
    done_at: AtomicU64,
    failed: AtomicBool,
}

impl Progress {
    fn new(n: usize) -> Self {
        Progress {
            base: Instant::now(),
            n,
            phase: AtomicU32::new(0),
            expected: AtomicU8::new(0),
            since: AtomicU64::new(u64::MAX),
            done: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            unexpected: AtomicUsize::new(0),
            slots: (0..n).map(|_| Slot::default()).collect(),
            all_done: Notify::new(),
            errors: Mutex::new(BTreeMap::new()),
            churn: std::sync::OnceLock::new(),
        }
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64 + 1
    }

    fn instant(&self, t: u64) -> Instant {
        self.base + Duration::from_nanos(t - 1)
    }

    /// Starts a phase that is done for a stream once each of `types` got new content.
    fn start(&self, types: &[usize]) -> Instant {
        let now = self.now();
        self.expected.store(types.iter().fold(0, |m, t| m | 1 << t), Ordering::Relaxed);
        self.since.store(now, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        self.unexpected.store(0, Ordering::Relaxed);
        self.phase.fetch_add(1, Ordering::Release);
        self.instant(now)
    }

    fn began(&self, s: usize) {
        self.slots[s].began.store(self.now(), Ordering::Relaxed);
    }

    /// Forgets which streams failed (they are opened again).
    fn reset_failures(&self) {
        for slot in self.slots.iter() {
            slot.failed.store(false, Ordering::Relaxed);
        }
        self.failed.store(0, Ordering::Release);
    }

    fn opened(&self, s: usize) {
        self.slots[s].opened.store(self.now(), Ordering::Relaxed);
    }

    /// Stream `s` received new content for type `ty` and ACKed it.
    fn updated(&self, s: usize, ty: usize) {
        let now = self.now();
        let slot = &self.slots[s];
        slot.updated[ty].store(now, Ordering::Relaxed);
        let phase = self.phase.load(Ordering::Acquire);
        let (mask, since) = (self.expected.load(Ordering::Relaxed), self.since.load(Ordering::Relaxed));
        if now < since {
            return;
        }
        if mask & 1 << ty == 0 {
            self.unexpected.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if slot.done_phase.load(Ordering::Relaxed) == phase {
            return;
        }
        let mut last = 0;
        for t in (0..4).filter(|t| mask & 1 << t != 0) {
            let u = slot.updated[t].load(Ordering::Relaxed);
            if u < since {
                return;
            }
            last = last.max(u);
        }
        slot.done_at.store(last, Ordering::Relaxed);
        slot.done_phase.store(phase, Ordering::Release);
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 + self.failed.load(Ordering::Acquire) >= self.n {
            self.all_done.notify_one();
        }
    }

    fn failed(&self, s: usize, error: &str) {
        let slot = &self.slots[s];
        if slot.failed.swap(true, Ordering::AcqRel) {
            return;
        }
        *self.errors.lock().unwrap().entry(error.to_owned()).or_default() += 1;
        if slot.done_phase.load(Ordering::Acquire) == self.phase.load(Ordering::Acquire) {
            self.done.fetch_sub(1, Ordering::AcqRel);
        }
        if self.done.load(Ordering::Acquire) + self.failed.fetch_add(1, Ordering::AcqRel) + 1 >= self.n {
            self.all_done.notify_one();
        }
    }

    fn remaining(&self) -> usize {
        self.n.saturating_sub(self.done.load(Ordering::Acquire) + self.failed.load(Ordering::Acquire))
    }

    /// Until every live stream is done with the phase, or `timeout`. True if all did.
    async fn wait(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.remaining() > 0 {
            // A wake-up sent before we wait is kept (notify_one stores a permit).
            if tokio::time::timeout_at(deadline, self.all_done.notified()).await.is_err() {
                return self.remaining() == 0;
            }
        }
        true
    }

    /// Waits `d`; returns how many updates arrived meanwhile (there should be none).
    async fn idle(&self, d: Duration) -> usize {
        let before = self.unexpected.load(Ordering::Acquire);
        let mask = self.expected.swap(0, Ordering::AcqRel); // every update is now unexpected
        tokio::time::sleep(d).await;
        self.expected.store(mask, Ordering::Release);
        self.unexpected.swap(before, Ordering::AcqRel) - before
    }

    /// For the streams done with the current phase: time from the phase start, and from
    /// the stream's own opening.
    fn latencies(&self) -> (Vec<Duration>, Vec<Duration>) {
        let (from_start, from_open, _) = self.latencies_from_began();
        (from_start, from_open)
    }

    /// [`Progress::latencies`], and the time from the start of each stream's connection.
    fn latencies_from_began(&self) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
        let phase = self.phase.load(Ordering::Acquire);
        let since = self.instant(self.since.load(Ordering::Acquire));
        let mut from_start = Vec::with_capacity(self.n);
        let mut from_open = Vec::with_capacity(self.n);
        let mut from_began = Vec::with_capacity(self.n);
        for slot in self.slots.iter() {
            if slot.done_phase.load(Ordering::Acquire) != phase || slot.failed.load(Ordering::Acquire) {
                continue;
            }
            let done = self.instant(slot.done_at.load(Ordering::Relaxed));
            from_start.push(done - since);
            let opened = slot.opened.load(Ordering::Relaxed);
            if opened != 0 {
                from_open.push(done.saturating_duration_since(self.instant(opened)));
            }
            let began = slot.began.load(Ordering::Relaxed);
            if began != 0 {
                from_began.push(done.saturating_duration_since(self.instant(began)));
            }
        }
        (from_start, from_open, from_began)
    }

    fn print_errors(&self) {
        for (e, count) in std::mem::take(&mut *self.errors.lock().unwrap()) {
            eprintln!("xdst-loadgen: {count} stream(s) failed: {e}");
        }
    }
}

/// The port of change 0; change k's is `CHURN_BASE_PORT + k`.
const CHURN_BASE_PORT: u32 = 1024;
/// Changes tracked: the ports up to 65535.
const CHURN_MAX: usize = 65535 - CHURN_BASE_PORT as usize;

/// Endpoint churn: when each change was written and when each stream had it.
struct Churn {
    base: Instant,
    services: usize,
    streams: usize,
    /// Per change: written at (ns since `base`, +1; 0: not yet).
    written: Box<[AtomicU64]>,
    /// Per change: how many streams had it, and when the last one did.
    arrived: Box<[AtomicU32]>,
    last: Box<[AtomicU64]>,
    /// Per stream and service: the latest change it had (u32::MAX: none yet).
    latest: Box<[AtomicU32]>,
}

impl Churn {
    fn new(streams: usize, services: usize, changes: usize) -> Churn {
        let atomics = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect::<Box<[_]>>();
        Churn {
            base: Instant::now(),
            services,
            streams,
            written: atomics(changes),
            arrived: (0..changes).map(|_| AtomicU32::new(0)).collect(),
            last: atomics(changes),
            latest: (0..streams * services).map(|_| AtomicU32::new(u32::MAX)).collect(),
        }
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64 + 1
    }

    /// Stream `s` received a load assignment: credits the change its port names, and the
    /// earlier changes of the same service it had not had (superseded, so had).
    fn seen(&self, s: usize, cla: &[u8]) {
        let Ok(c) = ClusterLoadAssignment::decode(cla) else { return };
        let port = c.endpoints.iter().flat_map(|l| &l.lb_endpoints).find_map(|e| {
            use envoy_types::pb::envoy::config::core::v3::{address::Address, socket_address::PortSpecifier};
            use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
            let Some(HostIdentifier::Endpoint(ep)) = &e.host_identifier else { return None };
            let Some(Address::SocketAddress(sa)) = ep.address.as_ref()?.address.as_ref() else { return None };
            match sa.port_specifier {
                Some(PortSpecifier::PortValue(p)) => Some(p),
                _ => None,
            }
        });
        let Some(k) = port.and_then(|p| p.checked_sub(CHURN_BASE_PORT)).map(|k| k as usize) else { return };
        if k >= self.written.len() || self.written[k].load(Ordering::Acquire) == 0 {
            return;
        }
        let service = k % self.services;
        let Some(slot) = self.latest.get(s * self.services + service) else { return };
        let prev = slot.load(Ordering::Relaxed);
        if prev != u32::MAX && prev as usize >= k {
            return;
        }
        slot.store(k as u32, Ordering::Relaxed);
        let first = if prev == u32::MAX { service } else { prev as usize + self.services };
        let now = self.now();
        for j in (first..=k).step_by(self.services) {
            self.arrived[j].fetch_add(1, Ordering::Relaxed);
            self.last[j].fetch_max(now, Ordering::Relaxed);
        }
    }

    /// Writes the changes at `per_second` for `secs` (on a thread of its own); returns how
    /// many were written.
    fn write(self: &Arc<Self>, dir: &Path, template: &str, per_second: u32, secs: u64) -> anyhow::Result<usize> {
        let every = Duration::from_secs(1) / per_second.max(1);
        let total = (per_second as u64 * secs) as usize;
        let start = Instant::now();
        let mut k = 0;
        while k < total && start.elapsed() < Duration::from_secs(secs) {
            let due = start + every * k as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let service = k % self.services;
            let port = CHURN_BASE_PORT as usize + k % CHURN_MAX;
            let text = template.replace("{i}", &service.to_string()).replace("{port}", &port.to_string());
            let path = dir.join(format!("svc-{service}.yaml"));
            if k < self.written.len() {
                self.written[k].store(self.now(), Ordering::Release);
            }
            xdst_core::files::write_atomic(&path, text).with_context(|| format!("writing {}", path.display()))?;
            k += 1;
        }
        Ok(k)
    }

    /// Per change that every stream had: time from its write to the last stream having it;
    /// and how many changes some stream never had.
    fn latencies(&self, written: usize) -> (Vec<Duration>, usize) {
        let mut lat = Vec::with_capacity(written);
        let mut missing = 0;
        for k in 0..written.min(self.written.len()) {
            let (w, l) = (self.written[k].load(Ordering::Acquire), self.last[k].load(Ordering::Acquire));
            if self.arrived[k].load(Ordering::Acquire) as usize >= self.streams && l >= w {
                lat.push(Duration::from_nanos(l - w));
            } else {
                missing += 1;
            }
        }
        (lat, missing)
    }
}

/// One sample of the server: RSS, peak RSS (kB), open file descriptors, CPU ms.
fn sample(server: &Proc) -> anyhow::Result<(u64, u64, usize, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.0))?;
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    let fds = std::fs::read_dir(format!("/proc/{}/fd", server.0)).map(|d| d.count()).unwrap_or(0);
    Ok((kb("VmRSS:").unwrap_or(0), kb("VmHWM:").unwrap_or(0), fds, server.cpu_ms().unwrap_or(0.0)))
}

/// Holds the streams open for --hold-secs with the server sampled, and the endpoint churn if
/// asked for; returns the results as JSON.
async fn hold(args: &Args, progress: &Arc<Progress>, server: Option<&Proc>) -> anyhow::Result<String> {
    let server = server.context("--hold-secs needs --server-pid")?;
    let live = args.n - progress.failed.load(Ordering::Acquire);
    let churn = match (&args.churn_dir, &args.churn_template, args.churn_services) {
        (Some(dir), Some(template), Some(services)) => {
            let template = std::fs::read_to_string(template)
                .with_context(|| format!("reading --churn-template {}", template.display()))?;
            let secs = args.churn_secs.unwrap_or(args.hold_secs).min(args.hold_secs);
            let total = (args.churn_per_second as usize * secs as usize).min(CHURN_MAX);
            let churn = Arc::new(Churn::new(args.n, services.max(1), total));
            let _ = progress.churn.set(churn.clone());
            let (c, dir, rate) = (churn.clone(), dir.clone(), args.churn_per_second);
            let writer = std::thread::spawn(move || c.write(&dir, &template, rate, secs));
            Some((churn, writer))
        }
        _ => None,
    };
    let start = Instant::now();
    let cpu0 = server.cpu_ms().unwrap_or(0.0);
    let mut samples = Vec::new();
    let every = Duration::from_secs(args.sample_secs.max(1));
    loop {
        let s = sample(server)?;
        let t = start.elapsed();
        println!(
            "  sample    : {:>5.0} s: server RSS {:.1} MiB (peak {:.1} MiB), {} open files, CPU {:.2} cores since the last",
            t.as_secs_f64(),
            s.0 as f64 / 1024.0,
            s.1 as f64 / 1024.0,
            s.2,
            samples.last().map_or(0.0, |(t0, p): &(Duration, (u64, u64, usize, f64))| (s.3 - p.3)
                / 1000.0
                / (t - *t0).as_secs_f64().max(1e-9))
        );
        samples.push((t, s));
        if t >= Duration::from_secs(args.hold_secs) {
            break;
        }
        tokio::time::sleep(every.min(Duration::from_secs(args.hold_secs) - t)).await;
    }
    let wall = start.elapsed().as_secs_f64();
    let cores = (server.cpu_ms().unwrap_or(0.0) - cpu0) / 1000.0 / wall;
    // Steady: the median RSS of the second half of the samples; the first half is warm-up.
    let mut second: Vec<u64> = samples[samples.len() / 2..].iter().map(|(_, s)| s.0).collect();
    second.sort_unstable();
    let steady = second[second.len() / 2];
    let peak = samples.iter().map(|(_, s)| s.1).max().unwrap_or(0);
    let warm = samples[samples.len() / 2].1;
    let last = samples.last().expect("a sample").1;
    println!(
        "  hold      : {wall:.0} s, {live} streams: server RSS steady {:.1} MiB, peak {:.1} MiB, from the middle sample to \
         the last {:+.1} MiB and {:+} open files; CPU {cores:.3} cores on average",
        steady as f64 / 1024.0,
        peak as f64 / 1024.0,
        (last.0 as f64 - warm.0 as f64) / 1024.0,
        last.2 as i64 - warm.2 as i64
    );
    let mut churn_json = "null".to_owned();
    if let Some((churn, writer)) = churn {
        let written = writer.join().map_err(|_| anyhow::anyhow!("the churn writer panicked"))??;
        // The last writes are still on their way: give them until every stream has every
        // change, or 20 s, so that what is missing then was never delivered, not in flight.
        let end = Instant::now();
        let in_flight = churn.latencies(written).1;
        while churn.latencies(written).1 > 0 && end.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (lat, missing) = churn.latencies(written);
        let drained = end.elapsed();
        let after = sample(server)?;
        tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;
        let settled = sample(server)?;
        println!(
            "  drain     : {in_flight} changes not yet had by every stream when the churn ended; {missing} still not \
             {:.1} s later; server RSS {:.1} MiB then, {:.1} MiB after --settle-ms more",
            drained.as_secs_f64(),
            after.0 as f64 / 1024.0,
            settled.0 as f64 / 1024.0
        );
        let st = Stats::of(lat);
        println!(
            "  churn     : {written} endpoint changes ({}/s over {} services); every stream had {} of them: per change \
             until the last stream had it p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; {missing} not had by every stream",
            args.churn_per_second, churn.services, st.count, st.p50, st.p99, st.max
        );
        churn_json = format!(
            r#"{{"written":{written},"per_second":{},"services":{},"complete":{},"missing":{missing},"latency":{}}}"#,
            args.churn_per_second,
            churn.services,
            st.count,
            st.json()
        );
    }
    let series = samples
        .iter()
        .map(|(t, s)| format!("[{:.0},{},{},{}]", t.as_secs_f64(), s.0, s.1, s.2))
        .collect::<Vec<_>>()
        .join(",");
    Ok(format!(
        r#"{{"secs":{wall:.0},"streams":{live},"rss_kb_steady":{steady},"rss_kb_peak":{peak},"rss_kb_growth_second_half":{},"fds_growth_second_half":{},"cores":{cores:.3},"samples_s_rss_hwm_fds":[{series}],"churn":{churn_json}}}"#,
        last.0 as i64 - warm.0 as i64,
        last.2 as i64 - warm.2 as i64
    ))
}

/// Rewrites a file of the resources directory for each change, atomically (write a hidden
/// temporary file, rename it over the original), as a deployment tool would.
struct Changer {
    dir: PathBuf,
    kind: Change,
    originals: BTreeMap<&'static str, String>,
}

impl Changer {
    /// The quickstart example's files and the fields each change edits.
    const FILES: [&'static str; 3] = ["backend.yaml", "listener.yaml", "routes.yaml"];

    fn new(dir: &Path, kind: Change) -> anyhow::Result<Self> {
        let mut originals = BTreeMap::new();
        for f in Self::FILES {
            let path = dir.join(f);
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!("{}: --change edits the files of examples/quickstart/resources", path.display())
            })?;
            originals.insert(f, text);
        }
        let c = Changer { dir: dir.to_owned(), kind, originals };
        c.edits(0)?; // fail before opening any stream if a field is missing
        Ok(c)
    }

    /// The files change `k` writes; every change gives each edited field a new value.
    fn edits(&self, k: usize) -> anyhow::Result<Vec<(&'static str, String)>> {
        let backend = &self.originals["backend.yaml"];
        let cluster = |t: &str| set_field(t, "connect_timeout", &format!("{}s", 2 + k));
        let endpoint = |t: &str| set_field(t, "port_value", &(8081 + k).to_string());
        Ok(match self.kind {
            Change::Cluster => vec![("backend.yaml", cluster(backend)?)],
            Change::Endpoint => vec![("backend.yaml", endpoint(backend)?)],
            Change::All => vec![
                ("backend.yaml", endpoint(&cluster(backend)?)?),
                ("listener.yaml", set_field(&self.originals["listener.yaml"], "stat_prefix", &format!("ingress_{k}"))?),
                ("routes.yaml", set_field(&self.originals["routes.yaml"], "timeout", &format!("{}s", 6 + k))?),
            ],
        })
    }

    fn apply(&mut self, k: usize) -> anyhow::Result<()> {
        for (f, text) in self.edits(k)? {
            xdst_core::files::write_atomic(&self.dir.join(f), text).with_context(|| format!("writing {f}"))?;
        }
        Ok(())
    }
}

/// Replaces the value of every `key:` in YAML text (block or flow style).
fn set_field(text: &str, key: &str, value: &str) -> anyhow::Result<String> {
    let pat = format!("{key}:");
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    let mut found = false;
    while let Some(i) = rest.find(&pat) {
        let boundary = rest[..i].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let after = i + pat.len();
        out.push_str(&rest[..after]);
        rest = &rest[after..];
        if !boundary {
            continue;
        }
        let end = rest.find([',', '}', '\n']).unwrap_or(rest.len());
        out.push(' ');
        out.push_str(value);
        rest = &rest[end..];
        found = true;
    }
    out.push_str(rest);
    if !found {
        bail!("no {key:?} field to change");
    }
    Ok(out)
}

/// A process whose memory and CPU time are read from /proc.
struct Proc(u32);

impl Proc {
    fn rss_kb(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0))
            .with_context(|| format!("reading /proc/{}/status", self.0))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmRSS in /proc/PID/status")
    }

    /// User + system CPU time in milliseconds.
    fn cpu_ms(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0)).ok()?;
        // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
        // SAFETY: sysconf has no memory-safety preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Some(ticks * 1000.0 / hz)
    }
}

#[derive(Clone, Copy)]
struct Cpu {
    server_ms: f64,
    self_ms: f64,
    /// Busy time of the whole machine (every core), to tell how much else was running.
    machine_ms: f64,
}

impl Cpu {
    fn now(server: Option<&Proc>) -> Cpu {
        let server_ms = server.and_then(Proc::cpu_ms).unwrap_or(0.0);
        Cpu {
            server_ms,
            self_ms: Proc(std::process::id()).cpu_ms().unwrap_or(0.0),
            machine_ms: machine_busy_ms().unwrap_or(0.0),
        }
    }

    /// CPU time spent between `self` and `later`: (server, load generator, everything else).
    fn spent(&self, later: &Cpu) -> (f64, f64, f64) {
        let server = later.server_ms - self.server_ms;
        let me = later.self_ms - self.self_ms;
        (server, me, (later.machine_ms - self.machine_ms - server - me).max(0.0))
    }
}

/// user + nice + system + irq + softirq + steal of all cores, from /proc/stat.
fn machine_busy_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<f64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let busy = f.first()? + f.get(1)? + f.get(2)? + f.get(5)? + f.get(6)? + f.get(7).unwrap_or(&0.0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(busy * 1000.0 / hz)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[derive(Default)]
struct Stats {
    count: usize,
    min: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

impl Stats {
    fn of(mut v: Vec<Duration>) -> Stats {
        if v.is_empty() {
            return Stats::default();
        }
        v.sort_unstable();
        // Nearest rank.
        let rank = |p: f64| ms(v[((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]);
        Stats { count: v.len(), min: ms(v[0]), p50: rank(50.0), p99: rank(99.0), max: ms(v[v.len() - 1]) }
    }
    fn json(&self) -> String {
        format!(
            r#"{{"count":{},"min_ms":{:.1},"p50_ms":{:.1},"p99_ms":{:.1},"max_ms":{:.1}}}"#,
            self.count, self.min, self.p50, self.p99, self.max
        )
    }
}

struct Phase {
    converged: usize,
    failed: usize,
    unexpected: usize,
    lat: Stats,
    /// CPU milliseconds during the phase: server, load generator, other processes.
    cpu: (f64, f64, f64),
}

impl Phase {
    fn json(&self) -> String {
        format!(
            r#"{{"converged":{},"failed":{},"unexpected_updates":{},"latency":{},"server_cpu_ms":{:.0},"loadgen_cpu_ms":{:.0},"other_cpu_ms":{:.0}}}"#,
            self.converged,
            self.failed,
            self.unexpected,
            self.lat.json(),
            self.cpu.0,
            self.cpu.1,
            self.cpu.2
        )
    }
}

struct Report {
    api: Api,
    n: usize,
    conns: usize,
    change: Change,
    startup: Startup,
    connect_ms: Option<f64>,
    initial: Phase,
    per_stream_open: Stats,
    idle_updates: usize,
    rss_before: Option<u64>,
    rss_idle: Option<u64>,
    rss_after: Option<u64>,
    changes: Vec<Phase>,
    threads: usize,
    /// The reconnect storm's results, as JSON.
    storm: Option<String>,
    /// The hold (and churn) results, as JSON.
    hold: Option<String>,
}

impl Report {
    fn per_stream_bytes(&self) -> Option<f64> {
        Some((self.rss_idle? as f64 - self.rss_before? as f64) * 1024.0 / self.n as f64)
    }

    fn print_head(&self) {
        let i = &self.initial;
        println!(
            "xdst-loadgen: {} streams, {}, {} connection(s), start-up: {}, change: {}, loadgen threads: {}",
            self.n,
            self.api.name(),
            self.conns,
            self.startup.name(),
            self.change.name(),
            self.threads
        );
        println!(
            "  initial   : {}/{} converged ({} failed) in {:.0} ms; per stream since start p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; since its own open p50 {:.0} ms, p99 {:.0} ms",
            i.converged,
            self.n,
            i.failed,
            i.lat.max,
            i.lat.p50,
            i.lat.p99,
            i.lat.max,
            self.per_stream_open.p50,
            self.per_stream_open.p99
        );
        println!(
            "              connections up after {:.0} ms; CPU: server {:.0} ms, loadgen {:.0} ms, other processes {:.0} ms",
            self.connect_ms.unwrap_or(f64::NAN),
            i.cpu.0,
            i.cpu.1,
            i.cpu.2
        );
        if self.idle_updates > 0 {
            println!("  warning   : {} updates arrived while idle", self.idle_updates);
        }
        if let (Some(b), Some(idle)) = (self.rss_before, self.rss_idle) {
            println!(
                "  memory    : server RSS {:.1} MiB before, {:.1} MiB idle with {} streams: {:.1} KB per idle stream",
                b as f64 / 1024.0,
                idle as f64 / 1024.0,
                self.n,
                self.per_stream_bytes().unwrap_or(0.0) / 1000.0
            );
        }
    }

    fn print_change(&self, k: usize) {
        let c = &self.changes[k];
        println!(
            "  change {:<2} : {}/{} converged; p50 {:.0} ms, p99 {:.0} ms, all {:.0} ms (first {:.0} ms); CPU: server {:.0} ms, loadgen {:.0} ms, other {:.0} ms{}",
            k + 1,
            c.converged,
            self.n,
            c.lat.p50,
            c.lat.p99,
            c.lat.max,
            c.lat.min,
            c.cpu.0,
            c.cpu.1,
            c.cpu.2,
            if c.unexpected > 0 { format!("; {} unexpected updates", c.unexpected) } else { String::new() }
        );
    }

    fn json(&self) -> String {
        let opt = |v: Option<u64>| v.map_or("null".to_owned(), |v| v.to_string());
        format!(
            r#"{{"api":"{}","n":{},"connections":{},"startup":"{}","change":"{}","loadgen_threads":{},"connect_ms":{},"initial":{},"initial_since_open":{},"idle_updates":{},"rss_kb":{{"before":{},"idle":{},"after_changes":{}}},"bytes_per_idle_stream":{},"changes":[{}],"storm":{},"hold":{}}}"#,
            self.api.name(),
            self.n,
            self.conns,
            self.startup.name(),
            self.change.name(),
            self.threads,
            self.connect_ms.map_or("null".to_owned(), |v| format!("{v:.1}")),
            self.initial.json(),
            self.per_stream_open.json(),
            self.idle_updates,
            opt(self.rss_before),
            opt(self.rss_idle),
            opt(self.rss_after),
            self.per_stream_bytes().map_or("null".to_owned(), |v| format!("{v:.0}")),
            self.changes.iter().map(Phase::json).collect::<Vec<_>>().join(","),
            self.storm.as_deref().unwrap_or("null"),
            self.hold.as_deref().unwrap_or("null")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_field_edits_block_and_flow_yaml() {
        let t = "name: a\nconnect_timeout: 1s\nroute: {cluster: backend, timeout: 5s}\n";
        assert_eq!(
            set_field(t, "connect_timeout", "3s").unwrap(),
            "name: a\nconnect_timeout: 3s\nroute: {cluster: backend, timeout: 5s}\n"
        );
        assert_eq!(
            set_field(t, "timeout", "9s").unwrap(),
            "name: a\nconnect_timeout: 1s\nroute: {cluster: backend, timeout: 9s}\n"
        );
        assert!(set_field(t, "port_value", "1").is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let s = Stats::of((1..=100).map(Duration::from_millis).collect());
        assert_eq!((s.p50, s.p99, s.max, s.min), (50.0, 99.0, 100.0, 1.0));
    }
}

//! `xdst-bench-unordered`: the smallest ADS server (tonic + envoy-types) that serves a
//! resources directory, to measure xdst against in the same run (`tests/bench/run.sh
//! --compare`). It pushes every change at once, every type, in no order, as a control plane
//! without make-before-break does. Not for production: no ordering, validation or limits.
//!
//! ```text
//! xdst-bench-unordered --xds-addr 127.0.0.1:0 --resources DIR --ready-file ready.json
//! ```
//! The directory is read as xdst reads it (YAML or JSON resources, top level only) and polled
//! every 20 ms; the ready file holds `{"xds_addr": "..."}` once it listens.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::Parser;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::Any;
use tokio::sync::{mpsc, watch};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

#[derive(Parser)]
#[command(name = "xdst-bench-unordered", about = "A minimal unordered ADS server, for benchmarks")]
struct Args {
    #[arg(long, default_value = "127.0.0.1:18000")]
    xds_addr: SocketAddr,
    #[arg(long)]
    resources: PathBuf,
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

/// By type URL, by name: the resource's version and body.
type State = BTreeMap<String, BTreeMap<String, (String, Any)>>;

fn load(dir: &Path) -> anyhow::Result<State> {
    let mut state = State::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
        if !path.is_file() || !matches!(ext, "yaml" | "yml" | "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        for r in xdst_core::decode::decode_file(&path.display().to_string(), &text)? {
            let any = Any { type_url: r.type_url().to_string(), value: r.body().to_vec() };
            state
                .entry(r.type_url().to_string())
                .or_default()
                .insert(r.name().to_string(), (r.version().to_string(), any));
        }
    }
    Ok(state)
}

/// The files' names, sizes and modification times: what polling compares.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok().map(|m| (e.path(), m.len(), m.modified().ok())))
        .collect();
    v.sort();
    v
}

/// What a subscription to `names` (`None`: wildcard) of `type_url` holds: name -> (version, body).
fn selected<'a>(
    state: &'a State,
    type_url: &str,
    names: &'a Option<BTreeSet<String>>,
) -> Vec<(&'a String, &'a (String, Any))> {
    let Some(all) = state.get(type_url) else { return Vec::new() };
    all.iter().filter(|(n, _)| names.as_ref().is_none_or(|s| s.contains(*n))).collect()
}

fn subscription(names: &[String]) -> Option<BTreeSet<String>> {
    (!names.is_empty() && !names.iter().any(|n| n == "*")).then(|| names.iter().cloned().collect())
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

struct Ads {
    state: watch::Receiver<Arc<State>>,
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        req: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(sotw(self.state.clone(), req.into_inner(), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        req: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(delta(self.state.clone(), req.into_inner(), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// State of the World: each subscribed type in full whenever what it selects changes.
async fn sotw(
    mut state: watch::Receiver<Arc<State>>,
    mut requests: Streaming<DiscoveryRequest>,
    tx: mpsc::Sender<Result<DiscoveryResponse, Status>>,
) {
    let mut subs: HashMap<String, Option<BTreeSet<String>>> = HashMap::new();
    let mut sent: HashMap<String, String> = HashMap::new();
    let mut nonce = 0u64;
    loop {
        let due: Vec<String> = tokio::select! {
            req = requests.message() => {
                let Ok(Some(req)) = req else { return };
                let names = subscription(&req.resource_names);
                let changed = subs.get(&req.type_url) != Some(&names);
                subs.insert(req.type_url.clone(), names);
                if changed || req.response_nonce.is_empty() { sent.remove(&req.type_url); }
                vec![req.type_url]
            }
            changed = state.changed() => {
                if changed.is_err() { return; }
                subs.keys().cloned().collect()
            }
        };
        // Marked seen only when every subscribed type is evaluated: a state that arrives
        // while a request is answered still wakes the loop for the other types.
        let all = due.len() == subs.len();
        let snapshot = if all { state.borrow_and_update().clone() } else { state.borrow().clone() };
        for type_url in due {
            let items = selected(&snapshot, &type_url, &subs[&type_url]);
            let version = xdst_core::resource::set_version(items.iter().map(|(n, (v, _))| (n.as_str(), v.as_str())));
            if sent.get(&type_url) == Some(&version) {
                continue;
            }
            nonce += 1;
            let resp = DiscoveryResponse {
                version_info: version.clone(),
                resources: items.into_iter().map(|(_, (_, any))| any.clone()).collect(),
                type_url: type_url.clone(),
                nonce: nonce.to_string(),
                ..Default::default()
            };
            sent.insert(type_url, version);
            if tx.send(Ok(resp)).await.is_err() {
                return;
            }
        }
    }
}

/// Delta: what changed of each subscribed type, and what went away.
async fn delta(
    mut state: watch::Receiver<Arc<State>>,
    mut requests: Streaming<DeltaDiscoveryRequest>,
    tx: mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>,
) {
    // By type: the subscription (`None`: wildcard) and what the client was sent (name -> version).
    let mut subs: HashMap<String, Option<BTreeSet<String>>> = HashMap::new();
    let mut sent: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut nonce = 0u64;
    loop {
        let due: Vec<String> = tokio::select! {
            req = requests.message() => {
                let Ok(Some(req)) = req else { return };
                let first = !subs.contains_key(&req.type_url);
                let sub = subs.entry(req.type_url.clone()).or_insert_with(|| {
                    (!req.resource_names_subscribe.is_empty()).then(BTreeSet::new)
                });
                if let Some(names) = sub {
                    names.extend(req.resource_names_subscribe.iter().filter(|n| *n != "*").cloned());
                    for n in &req.resource_names_unsubscribe {
                        names.remove(n);
                        sent.entry(req.type_url.clone()).or_default().remove(n);
                    }
                }
                if !first && req.resource_names_subscribe.is_empty() && req.resource_names_unsubscribe.is_empty() {
                    continue; // an ACK or a NACK
                }
                vec![req.type_url]
            }
            changed = state.changed() => {
                if changed.is_err() { return; }
                subs.keys().cloned().collect()
            }
        };
        // Marked seen only when every subscribed type is evaluated: a state that arrives
        // while a request is answered still wakes the loop for the other types.
        let all = due.len() == subs.len();
        let snapshot = if all { state.borrow_and_update().clone() } else { state.borrow().clone() };
        for type_url in due {
            let items = selected(&snapshot, &type_url, &subs[&type_url]);
            let had = sent.entry(type_url.clone()).or_default();
            let resources: Vec<Resource> = items
                .iter()
                .filter(|(n, (v, _))| had.get(*n) != Some(v))
                .map(|(n, (v, any))| Resource {
                    name: n.to_string(),
                    version: v.clone(),
                    resource: Some(any.clone()),
                    ..Default::default()
                })
                .collect();
            let now: BTreeSet<&String> = items.iter().map(|(n, _)| *n).collect();
            let removed: Vec<String> = had.keys().filter(|n| !now.contains(n)).cloned().collect();
            if resources.is_empty() && removed.is_empty() && !had.is_empty() {
                continue;
            }
            for r in &resources {
                had.insert(r.name.clone(), r.version.clone());
            }
            for n in &removed {
                had.remove(n);
            }
            nonce += 1;
            let resp = DeltaDiscoveryResponse {
                resources,
                removed_resources: removed,
                type_url,
                nonce: nonce.to_string(),
                ..Default::default()
            };
            if tx.send(Ok(resp)).await.is_err() {
                return;
            }
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (state_tx, state) = watch::channel(Arc::new(load(&args.resources)?));
    let dir = args.resources.clone();
    std::thread::spawn(move || {
        let mut seen = fingerprint(&dir);
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let now = fingerprint(&dir);
            if now != seen {
                seen = now;
                match load(&dir) {
                    Ok(s) => drop(state_tx.send(Arc::new(s))),
                    Err(e) => eprintln!("xdst-bench-unordered: {}: {e:#}", dir.display()),
                }
            }
        }
    });
    let listener = tokio::net::TcpListener::bind(args.xds_addr).await?;
    let addr = listener.local_addr()?;
    if let Some(ready) = &args.ready_file {
        xdst_core::files::write_atomic(ready, format!("{{\"xds_addr\":\"{addr}\"}}\n"))?;
    }
    // tonic's own server, with the two settings any server needs to carry hundreds of ADS
    // streams per connection (as xdst sets them too): no cap on concurrent streams (h2's
    // default would refuse past a few hundred), and a connection window large enough that
    // thousands of small pending ACK frames are not taken for abuse.
    tonic::transport::Server::builder()
        .max_concurrent_streams(1 << 20)
        .initial_connection_window_size(64 << 20)
        .add_service(AggregatedDiscoveryServiceServer::new(Ads { state }))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await?;
    Ok(())
}

//! Fleet status: every replica publishes the nodes it serves, and their ACK state, under
//! `<prefix>/replicas/<replica>/<chunk>` on an etcd lease, so `/debug/nodes?fleet=true` on any
//! replica shows every node of every replica, and a replica that dies drops out when its
//! lease expires (`LEASE_TTL`).
//!
//! A report is chunked (at most [`NODES_PER_KEY`] nodes and [`MAX_CHUNK_BYTES`] a key), since
//! etcd refuses a request over 1.5 MiB, and each node's entry is bounded: a NACK message is
//! clipped, node ids and groups are bounded where the stream opens, and an entry still over
//! [`MAX_NODE_ENTRY`] (a client asking for thousands of made-up types) keeps its id and group
//! only.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::PutOptions;
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use super::etcd::Etcd;
use crate::generate::intent::IntentSource;
use xdst_serve::Serving;

/// Where replicas publish, under the prefix.
pub const REPLICAS_DIR: &str = "replicas/";
/// A replica's keys live this long after its last keep-alive.
pub const LEASE_TTL: i64 = 10;
/// How often a replica publishes (and keeps its lease alive).
pub const PUBLISH_EVERY: Duration = Duration::from_secs(2);
/// Nodes per key, at most.
const NODES_PER_KEY: usize = 500;
/// A key's value, at most (etcd's default request limit is 1.5 MiB).
const MAX_CHUNK_BYTES: usize = 1 << 20;
/// One node's entry, at most; past it, its types are left out.
const MAX_NODE_ENTRY: usize = 64 << 10;
/// The most of a NACK's message a fleet entry keeps.
const MAX_NACK_MESSAGE: usize = 512;
/// The largest fleet value read back; larger ones are reported, not parsed.
const MAX_VALUE: usize = 4 << 20;

/// One node as the fleet view shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FleetNode {
    pub id: String,
    pub group: String,
    pub streams: usize,
    /// Per type (short name: `lds`, `cds`, ...): versions sent and acknowledged, and the last
    /// NACK's message.
    pub types: BTreeMap<String, FleetType>,
    /// True when its types were left out, its entry being over [`MAX_NODE_ENTRY`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub types_left_out: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FleetType {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acked: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nack: Option<String>,
}

/// Who a replica is and what it serves: the head of each of its chunks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaHead {
    pub replica: String,
    pub xds_addr: String,
    pub admin_addr: String,
    /// Unix seconds.
    pub at: u64,
    /// The store revision its last good generation translated.
    pub revision: Option<i64>,
    pub version: Option<String>,
}

/// What one key holds: a chunk of one replica's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Chunk {
    #[serde(flatten)]
    pub head: ReplicaHead,
    pub chunk: usize,
    pub chunks: usize,
    pub nodes: Vec<FleetNode>,
}

/// A replica in the fleet view.
#[derive(Debug, Serialize)]
pub struct Replica {
    #[serde(flatten)]
    pub head: ReplicaHead,
    /// False while some of its chunks are missing (a publish in progress).
    pub complete: bool,
    pub nodes: Vec<FleetNode>,
}

#[derive(Debug, Serialize)]
pub struct Fleet {
    pub replicas: Vec<Replica>,
    /// Keys that could not be read (too large, not JSON).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// This replica's nodes, as the fleet sees them.
pub fn nodes(serving: &Serving) -> Vec<FleetNode> {
    serving
        .nodes
        .report(&serving.rollouts.report())
        .into_iter()
        .map(|n| {
            let mut types: BTreeMap<String, FleetType> = BTreeMap::new();
            for s in &n.streams {
                for t in &s.types {
                    let e = types.entry(xdst_core::types::short_name(&t.type_url).to_owned()).or_default();
                    e.sent = t.version_sent.clone().or(e.sent.take());
                    e.acked = t.version_acked.clone().or(e.acked.take());
                    if let Some(nack) = &t.last_nack {
                        e.nack = Some(xdst_plugin::clip(&nack.message, MAX_NACK_MESSAGE));
                    }
                }
            }
            let node = FleetNode { id: n.id, group: n.group, streams: n.streams.len(), types, types_left_out: false };
            if entry_size(&node) > MAX_NODE_ENTRY {
                return FleetNode { types: BTreeMap::new(), types_left_out: true, ..node };
            }
            node
        })
        .collect()
}

fn entry_size(node: &FleetNode) -> usize {
    serde_json::to_vec(node).map(|v| v.len()).unwrap_or(usize::MAX)
}

/// `nodes` in chunks of at most [`NODES_PER_KEY`] nodes and [`MAX_CHUNK_BYTES`] of entries
/// (one chunk, empty, for none).
fn chunked(nodes: &[FleetNode]) -> Vec<&[FleetNode]> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, node) in nodes.iter().enumerate() {
        let size = entry_size(node).min(MAX_NODE_ENTRY) + 1;
        if i > start && (i - start == NODES_PER_KEY || bytes + size > MAX_CHUNK_BYTES) {
            chunks.push(&nodes[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < nodes.len() || chunks.is_empty() {
        chunks.push(&nodes[start..]);
    }
    chunks
}

/// `replica` as a key component: no `/`.
pub fn key_part(replica: &str) -> String {
    replica.replace('/', "_")
}

/// Publishes this replica's report every [`PUBLISH_EVERY`] until shutdown.
pub async fn publish(
    serving: std::sync::Arc<Serving>,
    intent: Option<std::sync::Arc<IntentSource>>,
    etcd: std::sync::Arc<Etcd>,
    replica: String,
    addrs: (std::net::SocketAddr, std::net::SocketAddr),
) {
    let mut shutdown = serving.shutdown.clone();
    let mut client = etcd.client();
    let dir = format!("{}{REPLICAS_DIR}{}/", etcd.prefix(), key_part(&replica));
    let mut lease: Option<(i64, etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream)> = None;
    let mut published = 0usize;
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => {
                if let Some((id, _, _)) = lease.take() {
                    // Drop out of the fleet at once rather than after the TTL.
                    let _ = tokio::time::timeout(Duration::from_secs(1), client.lease_revoke(id)).await;
                }
                return;
            }
        }
        let round = async {
            // Keep the lease alive, or take a new one if it expired (etcd was away too long).
            let alive = match &mut lease {
                Some((_, keeper, stream)) => {
                    keeper.keep_alive().await?;
                    stream.message().await?.is_some_and(|r| r.ttl() > 0)
                }
                None => false,
            };
            if !alive {
                let granted = client.lease_grant(LEASE_TTL, None).await?;
                let (keeper, stream) = client.lease_keep_alive(granted.id()).await?;
                lease = Some((granted.id(), keeper, stream));
                published = 0;
            }
            let id = lease.as_ref().map(|l| l.0).unwrap_or_default();
            let status = intent.as_ref().map(|s| s.status());
            let all = nodes(&serving);
            let chunks = chunked(&all);
            let at =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            for (i, nodes) in chunks.iter().enumerate() {
                let chunk = Chunk {
                    head: ReplicaHead {
                        replica: replica.clone(),
                        xds_addr: addrs.0.to_string(),
                        admin_addr: addrs.1.to_string(),
                        at,
                        revision: status.as_ref().and_then(|s| s.last_ok_revision),
                        version: status.as_ref().and_then(|s| s.last_ok_version.clone()),
                    },
                    chunk: i,
                    chunks: chunks.len(),
                    nodes: nodes.to_vec(),
                };
                let value = serde_json::to_vec(&chunk).unwrap_or_default();
                client.put(format!("{dir}{i}"), value, Some(PutOptions::new().with_lease(id))).await?;
            }
            for stale in chunks.len()..published {
                client.delete(format!("{dir}{stale}"), None).await?;
            }
            published = chunks.len();
            Ok::<_, etcd_client::Error>(())
        };
        match tokio::time::timeout(etcd.timeout(), round).await {
            Ok(Ok(())) => debug!(replica, "fleet status published"),
            Ok(Err(e)) => {
                warn!(replica, error = %e, "could not publish fleet status; retrying");
                lease = None;
            }
            Err(_) => {
                warn!(replica, "publishing fleet status timed out; retrying");
                lease = None;
            }
        }
    }
}

/// Every replica's report, read from the store.
pub async fn read(etcd: &Etcd) -> Result<Fleet, super::StoreError> {
    let (entries, _) = super::Store::list(etcd, REPLICAS_DIR).await?;
    let mut errors = Vec::new();
    let mut by_replica: BTreeMap<String, Vec<Chunk>> = BTreeMap::new();
    for e in entries {
        if e.value.len() > MAX_VALUE {
            errors.push(format!("{}: {} bytes, over {MAX_VALUE}", e.key, e.value.len()));
            continue;
        }
        match serde_json::from_slice::<Chunk>(&e.value) {
            Ok(c) => by_replica.entry(c.head.replica.clone()).or_default().push(c),
            Err(err) => errors.push(format!("{}: {err}", e.key)),
        }
    }
    let replicas = by_replica
        .into_values()
        .map(|mut chunks| {
            chunks.sort_by_key(|c| c.chunk);
            let newest = chunks.iter().map(|c| c.head.at).max().unwrap_or(0);
            let first = &chunks[0];
            let complete = chunks.len() == first.chunks && chunks.iter().all(|c| c.chunks == first.chunks);
            Replica {
                head: ReplicaHead { at: newest, ..first.head.clone() },
                complete,
                nodes: chunks.into_iter().flat_map(|c| c.nodes).collect(),
            }
        })
        .collect();
    Ok(Fleet { replicas, errors })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33, item 9: however long the ids and however many the types, no key's value
    /// comes near etcd's 1.5 MiB request limit.
    #[test]
    fn chunks_stay_under_etcds_request_limit() {
        let long = |i: usize| format!("{i}-{}", "n".repeat(1020));
        let types: BTreeMap<String, FleetType> = (0..6)
            .map(|t| {
                let nack = Some("x".repeat(MAX_NACK_MESSAGE));
                (format!("t{t}"), FleetType { sent: Some("v".repeat(64)), acked: Some("v".repeat(64)), nack })
            })
            .collect();
        let all: Vec<FleetNode> = (0..2_000)
            .map(|i| FleetNode { id: long(i), group: long(i), streams: 1, types: types.clone(), types_left_out: false })
            .collect();
        let chunks = chunked(&all);
        assert!(chunks.len() > all.len() / NODES_PER_KEY, "{} chunks", chunks.len());
        assert_eq!(chunks.iter().map(|c| c.len()).sum::<usize>(), all.len());
        for c in &chunks {
            let bytes: usize = c.iter().map(entry_size).sum();
            assert!(bytes <= MAX_CHUNK_BYTES, "{bytes}");
        }
        assert_eq!(chunked(&[]).len(), 1);
    }

    #[test]
    fn replica_names_cannot_add_key_levels() {
        assert_eq!(key_part("host/a:18000"), "host_a:18000");
    }
}

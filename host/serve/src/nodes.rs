//! Connected streams, for `/debug/nodes`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;
use xdst_core::rollout::RolloutStatus;
use xdst_core::stream::{Flow, NodeInfo, TypeStatus};

/// Read access to a stream's state machine.
pub trait StatusSource: Send + Sync {
    fn node(&self) -> Option<NodeInfo>;
    fn status(&self) -> Vec<TypeStatus>;
    fn flow(&self) -> Flow;
}

impl<M: crate::machine::Machine> StatusSource for Mutex<M> {
    fn node(&self) -> Option<NodeInfo> {
        self.lock().unwrap().node().cloned()
    }
    fn status(&self) -> Vec<TypeStatus> {
        self.lock().unwrap().status()
    }
    fn flow(&self) -> Flow {
        self.lock().unwrap().flow()
    }
}

pub struct StreamEntry {
    pub api: &'static str,
    /// `ads`, or the per-type service (`cds`, ...).
    pub service: &'static str,
    pub group: String,
    /// Which client of its node id the stream belongs to ([`crate::rollouts::NodeRollout::client`]).
    pub client: u32,
    pub connected_at: SystemTime,
    pub peer: Option<std::net::SocketAddr>,
    /// The client certificate's identity (mTLS).
    pub identity: Option<crate::identity::PeerIdentity>,
    pub source: Arc<dyn StatusSource>,
}

#[derive(Default)]
pub struct Registry {
    next: AtomicU64,
    streams: Mutex<HashMap<u64, Arc<StreamEntry>>>,
    /// Streams per node group.
    groups: Mutex<HashMap<String, usize>>,
    /// Woken when a node group gains its first stream or loses its last, so intent can be
    /// translated for exactly the groups that are connected.
    pub groups_changed: tokio::sync::Notify,
}

impl Registry {
    pub fn add(&self, entry: StreamEntry) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let new_group = {
            let mut groups = self.groups.lock().unwrap();
            let n = groups.entry(entry.group.clone()).or_default();
            *n += 1;
            *n == 1
        };
        self.streams.lock().unwrap().insert(id, Arc::new(entry));
        if new_group {
            self.groups_changed.notify_one();
        }
        id
    }
    /// The group of stream `id`, while it is registered.
    pub fn group_of(&self, id: u64) -> Option<String> {
        self.streams.lock().unwrap().get(&id).map(|e| e.group.clone())
    }

    /// Streams open now.
    pub fn stream_count(&self) -> usize {
        self.streams.lock().unwrap().len()
    }

    pub fn remove(&self, id: u64) {
        let Some(gone) = self.streams.lock().unwrap().remove(&id) else { return };
        let last = {
            let mut groups = self.groups.lock().unwrap();
            let n = groups.get_mut(&gone.group).map(|n| {
                *n -= 1;
                *n
            });
            if n == Some(0) {
                groups.remove(&gone.group);
            }
            n == Some(0)
        };
        if last {
            self.groups_changed.notify_one();
        }
    }

    /// The node groups with at least one connected stream.
    /// Whether a stream of `group` is open.
    pub fn has_group(&self, group: &str) -> bool {
        self.groups.lock().unwrap().contains_key(group)
    }

    pub fn groups(&self) -> std::collections::BTreeSet<String> {
        self.groups.lock().unwrap().keys().cloned().collect()
    }

    /// Flow control per node group (design 022): its streams, the responses out awaiting an
    /// answer, the changes merged meanwhile, and the oldest change owed.
    pub fn flow_by_group(&self) -> BTreeMap<String, GroupFlow> {
        let entries: Vec<Arc<StreamEntry>> = self.streams.lock().unwrap().values().cloned().collect();
        let mut out: BTreeMap<String, GroupFlow> = BTreeMap::new();
        for e in entries {
            let f = e.source.flow();
            let g = out.entry(e.group.clone()).or_default();
            g.streams += 1;
            g.owed += usize::from(f.owed_since.is_some());
            g.flow.add(&f);
        }
        out
    }

    /// What each connected node said of itself (id, cluster, user agent), by id.
    pub fn node_infos(&self) -> HashMap<String, NodeInfo> {
        let entries: Vec<Arc<StreamEntry>> = self.streams.lock().unwrap().values().cloned().collect();
        entries.into_iter().filter_map(|e| e.source.node()).map(|n| (n.id.clone(), n)).collect()
    }

    /// Every connected node with its streams and plan; the JSON of `/debug/nodes`.
    pub fn report(&self, plans: &HashMap<(String, String, u32), RolloutStatus>) -> Vec<NodeReport> {
        self.report_where(plans, |_| true)
    }

    /// [`report`](Self::report) for the nodes whose id `keep` accepts.
    pub fn report_where(
        &self,
        plans: &HashMap<(String, String, u32), RolloutStatus>,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<NodeReport> {
        let entries: Vec<(u64, Arc<StreamEntry>)> =
            self.streams.lock().unwrap().iter().map(|(k, v)| (*k, v.clone())).collect();
        let mut nodes: BTreeMap<(String, u32), NodeReport> = BTreeMap::new();
        for (id, e) in entries {
            let info = e.source.node().unwrap_or_default();
            if !keep(&info.id) {
                continue;
            }
            let node = nodes.entry((info.id.clone(), e.client)).or_insert_with(|| NodeReport {
                id: info.id.clone(),
                client: e.client,
                cluster: info.cluster.clone(),
                user_agent: info.user_agent.clone(),
                group: e.group.clone(),
                plan: plans.get(&(e.group.clone(), info.id.clone(), e.client)).cloned(),
                streams: Vec::new(),
            });
            node.streams.push(StreamReport {
                stream: id,
                api: e.api,
                service: e.service,
                peer: e.peer.map(|p| p.to_string()),
                identity: e.identity.as_ref().map(|i| i.to_string()),
                connected_at: e.connected_at.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
                types: e.source.status(),
                flow: e.source.flow(),
            });
        }
        let mut out: Vec<NodeReport> = nodes.into_values().collect();
        for n in &mut out {
            n.streams.sort_by_key(|s| s.stream);
        }
        out
    }
}

/// Flow control over one node group's streams (design 022).
#[derive(Debug, Default, Clone, Copy)]
pub struct GroupFlow {
    pub streams: usize,
    /// Streams owed a change they have not been sent, awaiting an answer.
    pub owed: usize,
    pub flow: Flow,
}

#[derive(Serialize)]
pub struct NodeReport {
    pub id: String,
    /// Which client of the node id (1 unless processes share the id: each has its own plan).
    pub client: u32,
    pub cluster: String,
    pub user_agent: String,
    pub group: String,
    /// The node's make-before-break rollout.
    pub plan: Option<RolloutStatus>,
    pub streams: Vec<StreamReport>,
}

#[derive(Serialize)]
pub struct StreamReport {
    pub stream: u64,
    pub api: &'static str,
    pub service: &'static str,
    pub peer: Option<String>,
    /// The client certificate's identity, with mTLS.
    pub identity: Option<String>,
    /// Unix seconds.
    pub connected_at: u64,
    pub types: Vec<TypeStatus>,
    /// Over its types: responses awaiting an answer, changes merged, the oldest owed.
    pub flow: Flow,
}

//! Every node's make-before-break rollout ([`xdst_core::rollout`]), shared by the node's
//! streams: an ADS stream, or separate LDS/RDS/CDS/EDS streams, feed one [`NodeRollout`] with
//! what they send and what the node answers, and all serve its offer.
//!
//! A node is its group and its id. Its rollout outlives its streams for a while (`LINGER`),
//! so a client that reconnects (a restarted stream, a flapping network) resumes from what it
//! had acknowledged instead of being treated as empty. A node that acknowledged nothing is
//! forgotten when its last stream closes: clients choose node ids, and one making up a new id
//! per stream must not leave state behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;
use tracing::{info, warn};
use xdst_core::plan::Step;
use xdst_core::rollout::{Note, Offer, Rollout, RolloutConfig, RolloutStatus};
use xdst_core::snapshot::Snapshot;
use xdst_core::types;

use crate::metrics::{Metrics, label};

/// How long a node's rollout is kept after its last stream closed.
const LINGER: Duration = Duration::from_secs(300);
/// How many nodes with no stream are kept at most (the longest idle go first): clients choose
/// node ids.
const MAX_LINGERING: usize = 10_000;

pub struct Rollouts {
    config: RolloutConfig,
    nodes: Mutex<Nodes>,
}

struct Nodes {
    by_key: HashMap<(String, String), Arc<NodeRollout>>,
    /// When idle rollouts were last swept out (at most every `LINGER / 10`, so that a fleet
    /// connecting at once does not walk the map on every stream).
    swept: Instant,
    /// Nodes that went idle, oldest first; an entry is stale if the node attached again since.
    lingering: std::collections::VecDeque<(Instant, (String, String))>,
}

pub struct NodeRollout {
    pub group: String,
    pub id: String,
    state: Mutex<NodeState>,
    /// Bumped whenever the offer changes: a stream compares it with the one it serves.
    generation: AtomicU64,
    /// Wakes the node's other streams when one of them changed the offer. A stream that
    /// changed it itself serves the new offer right away, so a node with one stream (every
    /// ADS client) never needs a wake-up.
    changed: Notify,
}

struct NodeState {
    rollout: Option<Rollout>,
    offer: Arc<Offer>,
    /// The rollout's [`Rollout::offer_changes`] when `offer` was taken from it.
    offer_seen: Option<u64>,
    streams: usize,
    idle_since: Option<Instant>,
    /// Who the open streams belong to (see [`Rollouts::attach`]).
    owner: Option<Arc<str>>,
    /// The target the node last converged on (for `/changes`): shared with every node of its
    /// group, so this costs a pointer per node.
    synced: Option<Arc<Snapshot>>,
}

impl Rollouts {
    pub fn new(config: RolloutConfig) -> Self {
        let nodes = Nodes { by_key: HashMap::new(), swept: Instant::now(), lingering: Default::default() };
        Rollouts { config, nodes: Mutex::new(nodes) }
    }

    pub fn config(&self) -> RolloutConfig {
        self.config
    }

    /// The rollout of node `id` in `group`, for a stream of `owner` (its client certificate
    /// identity, or its address without mTLS) that opens; [`detach`](Self::detach) when it
    /// closes. While the node has open streams it belongs to their owner: a stream of
    /// another is refused (the owner it would take the node from is the error), so no
    /// client can answer for, or move, another's rollout. Envoy's reconnects and hot restart
    /// come from the same owner.
    pub fn attach(&self, group: &str, id: &str, owner: &str) -> Result<Arc<NodeRollout>, Arc<str>> {
        let now = Instant::now();
        let mut nodes = self.nodes.lock().unwrap();
        if now.duration_since(nodes.swept) > LINGER / 10 {
            nodes.swept = now;
            nodes.by_key.retain(|_, n| {
                let s = n.state.lock().unwrap();
                s.streams > 0 || s.idle_since.is_none_or(|t| now.duration_since(t) < LINGER)
            });
        }
        let node = nodes
            .by_key
            .entry((group.to_owned(), id.to_owned()))
            .or_insert_with(|| {
                Arc::new(NodeRollout {
                    group: group.to_owned(),
                    id: id.to_owned(),
                    state: Mutex::new(NodeState {
                        rollout: None,
                        offer: Arc::new(Offer {
                            snapshot: Arc::new(Snapshot::default()),
                            hold: &types::CORE_TYPES,
                            resync: 0,
                        }),
                        offer_seen: None,
                        streams: 0,
                        idle_since: None,
                        owner: None,
                        synced: None,
                    }),
                    generation: AtomicU64::new(0),
                    changed: Notify::new(),
                })
            })
            .clone();
        let mut s = node.state.lock().unwrap();
        match &s.owner {
            Some(o) if s.streams > 0 && **o != *owner => return Err(o.clone()),
            Some(o) if **o == *owner => {}
            _ => s.owner = Some(owner.into()),
        }
        s.streams += 1;
        s.idle_since = None;
        drop(s);
        Ok(node)
    }

    pub fn detach(&self, node: &NodeRollout, stream: u64, metrics: &Metrics) {
        node.update(metrics, |r, now| r.stream_closed(stream, now));
        let mut s = node.state.lock().unwrap();
        s.streams -= 1;
        if s.streams > 0 {
            return;
        }
        let now = Instant::now();
        s.idle_since = Some(now);
        // Only what a node acknowledged is worth resuming from: a node that acknowledged
        // nothing (a client that only asked, or a hostile one making up node ids) leaves
        // nothing behind.
        let nothing_acked = s.rollout.as_ref().is_none_or(|r| r.acked().is_empty());
        drop(s);
        let mut nodes = self.nodes.lock().unwrap();
        let key = (node.group.clone(), node.id.clone());
        if nothing_acked {
            // Unless a stream of the same node attached meanwhile.
            if nodes
                .by_key
                .get(&key)
                .is_some_and(|n| std::ptr::eq(Arc::as_ptr(n), node) && n.state.lock().unwrap().streams == 0)
            {
                nodes.by_key.remove(&key);
            }
            return;
        }
        nodes.lingering.push_back((now, key));
        if nodes.lingering.len() > 2 * MAX_LINGERING {
            nodes.forget_longest_idle();
        }
    }

    /// Every node with an open stream, with the version it last converged on and what stopped
    /// its plan, if anything did: what `/changes/{id}` counts.
    pub fn syncs(&self) -> Vec<crate::changes::NodeSync> {
        let now = Instant::now();
        let nodes: Vec<Arc<NodeRollout>> = self.nodes.lock().unwrap().by_key.values().cloned().collect();
        // Nodes of a group converge on the same target: each version is worked out once.
        let mut versions: HashMap<*const Snapshot, Arc<str>> = HashMap::new();
        nodes
            .into_iter()
            .filter_map(|n| {
                let s = n.state.lock().unwrap();
                (s.streams > 0).then(|| crate::changes::NodeSync {
                    group: n.group.clone(),
                    id: n.id.clone(),
                    synced: s
                        .synced
                        .as_ref()
                        .map(|t| versions.entry(Arc::as_ptr(t)).or_insert_with(|| Arc::from(t.version())).clone()),
                    stopped: s.rollout.as_ref().and_then(|r| r.stopped_status(now)),
                })
            })
            .collect()
    }

    /// Every node with an open stream whose id `pick` accepts: its group, id and the state of
    /// each resource it asks for or holds (for CSDS).
    pub fn resource_states(
        &self,
        pick: impl Fn(&str) -> bool,
    ) -> Vec<(String, String, Vec<xdst_core::client_status::ResourceState>)> {
        let nodes: Vec<Arc<NodeRollout>> =
            self.nodes.lock().unwrap().by_key.values().filter(|n| pick(&n.id)).cloned().collect();
        let mut out: Vec<_> = nodes
            .into_iter()
            .filter_map(|n| {
                let s = n.state.lock().unwrap();
                let r = s.rollout.as_ref().filter(|_| s.streams > 0)?;
                Some((n.group.clone(), n.id.clone(), r.resource_states()))
            })
            .collect();
        out.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
        out
    }

    /// Every node's rollout state, by (group, id).
    pub fn report(&self) -> HashMap<(String, String), RolloutStatus> {
        self.report_where(|_| true)
    }

    /// [`report`](Self::report) for the nodes whose id `keep` accepts.
    pub fn report_where(&self, keep: impl Fn(&str) -> bool) -> HashMap<(String, String), RolloutStatus> {
        let now = Instant::now();
        let nodes: Vec<Arc<NodeRollout>> =
            self.nodes.lock().unwrap().by_key.values().filter(|n| keep(&n.id)).cloned().collect();
        nodes
            .into_iter()
            .filter_map(|n| {
                let s = n.state.lock().unwrap();
                Some(((n.group.clone(), n.id.clone()), s.rollout.as_ref()?.status(now)))
            })
            .collect()
    }
}

impl Nodes {
    /// Forgets the nodes idle longest until at most [`MAX_LINGERING`] entries remain.
    fn forget_longest_idle(&mut self) {
        while self.lingering.len() > MAX_LINGERING {
            let Some((since, key)) = self.lingering.pop_front() else { break };
            // Still idle since then (not attached again): forget it.
            let idle = self.by_key.get(&key).is_some_and(|n| {
                let s = n.state.lock().unwrap();
                s.streams == 0 && s.idle_since.is_some_and(|t| t <= since)
            });
            if idle {
                self.by_key.remove(&key);
            }
        }
    }
}

impl NodeRollout {
    /// The node's group has a new state (or this is the first stream): the plan moves on to it.
    pub fn set_target(&self, config: RolloutConfig, target: Arc<Snapshot>, metrics: &Metrics) {
        let mut s = self.state.lock().unwrap();
        let now = Instant::now();
        let notes = match &mut s.rollout {
            Some(r) => r.set_target(target, now),
            None => {
                s.rollout = Some(Rollout::new(config, target, now));
                Vec::new()
            }
        };
        self.after(&mut s, notes, metrics);
    }

    /// Runs `f` on the rollout (if there is one yet), then counts and logs what it noted and
    /// publishes the offer if it changed.
    pub fn update(&self, metrics: &Metrics, f: impl FnOnce(&mut Rollout, Instant) -> Vec<Note>) {
        let mut s = self.state.lock().unwrap();
        if let Some(r) = &mut s.rollout {
            let notes = f(r, Instant::now());
            self.after(&mut s, notes, metrics);
        }
    }

    fn after(&self, s: &mut NodeState, notes: Vec<Note>, m: &Metrics) {
        let Some(r) = &s.rollout else { return };
        // Converged: remember on what (a pointer; its version is worked out when asked).
        if r.step() == Step::Converged && !s.synced.as_ref().is_some_and(|t| Arc::ptr_eq(t, r.target())) {
            s.synced = Some(r.target().clone());
        }
        for note in notes {
            match note {
                Note::Step(step) => {
                    m.plan_steps.get_or_create(&label("step", step.as_str())).inc();
                }
                Note::Converged(d) => {
                    m.plan_convergence_seconds.observe(d.as_secs_f64());
                    info!(node = %self.id, group = %self.group, seconds = d.as_secs_f64(), "node converged on its new resources");
                }
                Note::Restarted { step } => {
                    m.plan_restarts.inc();
                    info!(node = %self.id, step = step.as_str(), "new resources before the node converged: plan restarted from what it acknowledged");
                }
                Note::Stopped { type_url, message } => {
                    m.plan_nack_stops.inc();
                    warn!(
                        node = %self.id,
                        r#type = types::short_name(&type_url),
                        error = %message,
                        step = r.step().as_str(),
                        "node rejected an update: plan stopped, the node keeps its last good state until the next \
                            change"
                    );
                }
                Note::GraceExpired { step } => {
                    m.plan_grace_expired.get_or_create(&label("step", step.as_str())).inc();
                    warn!(
                        node = %self.id,
                        step = step.as_str(),
                        "node did not acknowledge within the grace period (--plan-grace): proceeding without its ACK"
                    );
                }
            }
        }
        // A new rollout's first offer is published whatever its count.
        if s.offer_seen != Some(r.offer_changes()) {
            s.offer_seen = Some(r.offer_changes());
            s.offer = Arc::new(r.offer().clone());
            self.generation.fetch_add(1, Ordering::Release);
            if s.streams > 1 {
                self.changed.notify_waiters();
            }
        }
    }

    /// The offer, and its generation.
    pub fn offer(&self) -> (u64, Arc<Offer>) {
        let s = self.state.lock().unwrap();
        (self.generation.load(Ordering::Acquire), s.offer.clone())
    }

    /// The offer's generation: cheap, for a stream to tell whether it serves the latest.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Resolves when another stream of the node changed the offer.
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    /// When the current step's grace period ends.
    pub fn deadline(&self) -> Option<Instant> {
        self.state.lock().unwrap().rollout.as_ref().and_then(Rollout::deadline)
    }

    pub fn step(&self) -> Option<Step> {
        self.state.lock().unwrap().rollout.as_ref().map(Rollout::step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdst_core::resource::Resource;
    use xdst_core::rollout::Update;
    use xdst_core::types::CLUSTER;

    /// Node `id` connects, acknowledges a cluster, and disconnects.
    fn acked_then_idle(rollouts: &Rollouts, m: &Metrics, id: &str) {
        let node = rollouts.attach("g", id, "127.0.0.1").unwrap();
        let c = Arc::new(Resource::new(CLUSTER, "c1", b"1"));
        node.set_target(rollouts.config(), Arc::new(Snapshot::from_resources([(*c).clone()]).unwrap()), m);
        let t: Arc<str> = CLUSTER.into();
        node.update(m, |r, now| {
            r.sent(1, &t, "n1".into(), Update::Patch { removed: vec![], added: vec![c.clone()] });
            r.answered(1, &t, "n1", None, now)
        });
        rollouts.detach(&node, 1, m);
    }

    #[test]
    fn idle_nodes_are_kept_up_to_a_cap_the_longest_idle_going_first() {
        let (rollouts, m) = (Rollouts::new(RolloutConfig::default()), Metrics::new());
        let n = 2 * MAX_LINGERING + 5;
        for i in 0..n {
            acked_then_idle(&rollouts, &m, &format!("n{i}"));
        }
        let nodes = rollouts.nodes.lock().unwrap();
        assert!(nodes.by_key.len() <= 2 * MAX_LINGERING, "{} idle nodes kept", nodes.by_key.len());
        assert!(!nodes.by_key.contains_key(&("g".to_owned(), "n0".to_owned())), "the longest idle node was kept");
        assert!(
            nodes.by_key.contains_key(&("g".to_owned(), format!("n{}", n - 1))),
            "the latest idle node was forgotten"
        );
    }

    #[test]
    fn a_node_belongs_to_the_owner_of_its_open_streams() {
        let (rollouts, m) = (Rollouts::new(RolloutConfig::default()), Metrics::new());
        let a = "identity \"spiffe://x/a\"";
        let first = rollouts.attach("g", "n", a).unwrap();
        // Envoy reconnecting or hot-restarting: same owner, same rollout.
        let second = rollouts.attach("g", "n", a).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(rollouts.attach("g", "n", "identity \"spiffe://x/b\"").err().as_deref(), Some(a));
        // The same id in another group is another node.
        assert!(rollouts.attach("h", "n", "identity \"spiffe://x/b\"").is_ok());
        rollouts.detach(&first, 1, &m);
        assert!(rollouts.attach("g", "n", "identity \"spiffe://x/b\"").is_err(), "a stream of a is still open");
        rollouts.detach(&second, 2, &m);
        assert!(rollouts.attach("g", "n", "identity \"spiffe://x/b\"").is_ok(), "no stream open: anyone may take it");
    }

    #[test]
    fn a_node_that_acknowledged_nothing_is_forgotten_when_its_stream_closes() {
        let (rollouts, m) = (Rollouts::new(RolloutConfig::default()), Metrics::new());
        let node = rollouts.attach("g", "asked-only", "127.0.0.1").unwrap();
        rollouts.detach(&node, 1, &m);
        assert!(rollouts.nodes.lock().unwrap().by_key.is_empty());
        acked_then_idle(&rollouts, &m, "acked");
        assert_eq!(rollouts.nodes.lock().unwrap().by_key.len(), 1, "a node with acknowledged state lingers");
    }
}

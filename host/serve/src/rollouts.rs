//! Every node's make-before-break rollout ([`xdst_core::rollout`]), shared by the node's
//! streams: an ADS stream, or separate LDS/RDS/CDS/EDS streams, feed one [`NodeRollout`] with
//! what they send and what the node answers, and all serve its offer.
//!
//! A node is its group, its id and which client of that id it is: two processes may share a
//! node id (an Envoy hot restart, a copied bootstrap, a client posing as another). Each
//! process holds its own config, so each gets its own rollout: a stream joins the node's
//! client whose open streams do not already cover what it asks for (an ADS stream covers
//! every type; a per-type stream its own type), else the client that left last, else it is a
//! new client. One client's acknowledgements and rejections never move or stop another's.
//!
//! A node's rollout outlives its streams for a while (`LINGER`),
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
use xdst_core::stream::Scope;
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
    /// Nodes' rejections, as they come: the generation plane holds the documents a rejection
    /// blames (`--on-nack hold`).
    pub rejections: Arc<Rejections>,
    /// `--canaries`: each group's first proxies take each target first.
    canaries: crate::canaries::Canaries<NodeRollout>,
}

/// Rejections, counted and announced: the generation plane looks at the nodes only when the
/// count moved since it last did.
#[derive(Default)]
pub struct Rejections {
    /// Woken at each one.
    pub woken: Notify,
    count: AtomicU64,
}

impl Rejections {
    fn note(&self) {
        self.count.fetch_add(1, Ordering::Release);
        self.woken.notify_one();
    }

    /// How many there have been (read before looking at the nodes).
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }
}

struct Nodes {
    /// (group, id) -> its clients, each with its own rollout.
    by_key: HashMap<(String, String), Vec<Arc<NodeRollout>>>,
    /// When idle rollouts were last swept out (at most every `LINGER / 10`, so that a fleet
    /// connecting at once does not walk the map on every stream).
    swept: Instant,
    /// Nodes that went idle, oldest first, with the client number; an entry is stale if the
    /// node attached again since.
    lingering: std::collections::VecDeque<(Instant, (String, String), u32)>,
}

pub struct NodeRollout {
    pub group: String,
    pub id: String,
    /// Which client of this node id it is: 1 for the first to connect, 2 for a second
    /// process connecting with the same id while the first is connected, ...
    pub client: u32,
    state: Mutex<NodeState>,
    /// Bumped whenever the offer changes: a stream compares it with the one it serves.
    generation: AtomicU64,
    /// Wakes the node's other streams when one of them changed the offer. A stream that
    /// changed it itself serves the new offer right away, so a node with one stream (every
    /// ADS client) never needs a wake-up.
    changed: Arc<Notify>,
    /// The server's [`Rollouts::rejections`].
    rejections: Arc<Rejections>,
}

struct NodeState {
    rollout: Option<Rollout>,
    offer: Arc<Offer>,
    /// The rollout's [`Rollout::offer_changes`] when `offer` was taken from it.
    offer_seen: Option<u64>,
    /// What each open stream covers: an ADS stream every type, a per-type stream its own.
    scopes: Vec<Scope>,
    /// Where the client's first open stream came from.
    peer: Option<std::net::SocketAddr>,
    idle_since: Option<Instant>,
    /// Who the open streams belong to (see [`Rollouts::attach`]).
    owner: Option<Arc<str>>,
    /// Whether the owner is one of the group's proxies (design 016, part 3b).
    proxy: bool,
}

impl Rollouts {
    pub fn new(config: RolloutConfig) -> Self {
        let nodes = Nodes { by_key: HashMap::new(), swept: Instant::now(), lingering: Default::default() };
        Rollouts { config, nodes: Mutex::new(nodes), rejections: Default::default(), canaries: Default::default() }
    }

    /// With `count` canaries per group (`--canaries`).
    pub fn with_canaries(mut self, count: usize) -> Self {
        self.canaries = crate::canaries::Canaries::new(count, self.config.grace);
        self
    }

    /// `node`'s group has a new target (or this is its first stream): it is moved to it, or,
    /// with canaries and while they have not taken it, to what they released.
    pub fn retarget(&self, node: &Arc<NodeRollout>, target: Arc<Snapshot>, metrics: &Metrics) {
        if self.canaries.on() {
            let proxy = node.state.lock().unwrap().proxy;
            self.canaries.attach(node, proxy, &target);
        }
        let to = self.canaries.target_for(node, target);
        node.set_target(self.config, to, metrics);
        self.release(&node.group, metrics);
    }

    /// A node answered, or its grace period ended: with canaries, a canary's answer may release
    /// its group's newest target to the rest.
    pub fn answered(&self, node: &NodeRollout, metrics: &Metrics) {
        if self.canaries.on() && self.canaries.is_canary(node) {
            self.release(&node.group, metrics);
        }
    }

    fn release(&self, group: &str, metrics: &Metrics) {
        if let Some((target, others)) = self.canaries.check(group) {
            info!(
                group,
                nodes = others.len(),
                "the canaries hold the group's new target: every other node is moved to it"
            );
            for n in others {
                n.release(self.config, target.clone(), metrics);
            }
        }
    }

    pub fn config(&self) -> RolloutConfig {
        self.config
    }

    /// The rollout of node `id` in `group`, for a stream of `owner` (its client certificate
    /// identity, or its address without mTLS) covering `scope`, that opens;
    /// [`detach`](Self::detach) when it closes. A stream joins only a client of its own
    /// owner: the first whose open streams do not cover its types, else the one of its owner
    /// idle since last, else it starts a new client. So a stream of another owner using the
    /// same node id (a copied bootstrap, a client posing as another) is a client of its own:
    /// it is never refused for the id and never refuses the node's rightful owner, and its
    /// answers move only its own rollout. Envoy's reconnects and hot restart come from the
    /// same owner and resume the node's client.
    pub fn attach(
        &self,
        group: &str,
        id: &str,
        owner: &str,
        scope: Scope,
        peer: Option<std::net::SocketAddr>,
        proxy: bool,
    ) -> Arc<NodeRollout> {
        let now = Instant::now();
        let mut nodes = self.nodes.lock().unwrap();
        if now.duration_since(nodes.swept) > LINGER / 10 {
            nodes.swept = now;
            nodes.by_key.retain(|_, clients| {
                clients.retain(|n| {
                    let s = n.state.lock().unwrap();
                    !s.scopes.is_empty() || s.idle_since.is_none_or(|t| now.duration_since(t) < LINGER)
                });
                !clients.is_empty()
            });
        }
        let clients = nodes.by_key.entry((group.to_owned(), id.to_owned())).or_default();
        let own = |s: &NodeState| s.owner.as_deref() == Some(owner);
        let joins = |n: &&Arc<NodeRollout>| {
            let s = n.state.lock().unwrap();
            own(&s) && !s.scopes.is_empty() && !s.scopes.iter().any(|open| overlaps(open, &scope))
        };
        let idle_since = |n: &&Arc<NodeRollout>| {
            let s = n.state.lock().unwrap();
            (own(&s) && s.scopes.is_empty()).then_some(s.idle_since).flatten()
        };
        let found = clients
            .iter()
            .find(joins)
            .or_else(|| clients.iter().filter(|n| idle_since(n).is_some()).max_by_key(|n| idle_since(n)))
            .cloned();
        let node = match found {
            Some(n) => n,
            None => {
                let taken: Vec<u32> = clients.iter().map(|n| n.client).collect();
                let client = (1..).find(|c| !taken.contains(c)).expect("a free client number");
                let n = Arc::new(NodeRollout {
                    group: group.to_owned(),
                    id: id.to_owned(),
                    client,
                    state: Mutex::new(NodeState {
                        rollout: None,
                        offer: Arc::new(Offer {
                            snapshot: Arc::new(Snapshot::default()),
                            hold: &types::CORE_TYPES,
                            resync: 0,
                        }),
                        offer_seen: None,
                        scopes: Vec::new(),
                        peer: None,
                        idle_since: None,
                        owner: None,
                        proxy: false,
                    }),
                    generation: AtomicU64::new(0),
                    changed: Arc::new(Notify::new()),
                    rejections: self.rejections.clone(),
                });
                clients.push(n.clone());
                n
            }
        };
        let mut s = node.state.lock().unwrap();
        s.owner = Some(owner.into());
        s.proxy = proxy;
        if s.scopes.is_empty() {
            s.peer = peer;
        }
        s.scopes.push(scope);
        s.idle_since = None;
        drop(s);
        node
    }

    /// A stream of `node` covering `scope` closed.
    pub fn detach(&self, node: &NodeRollout, stream: u64, scope: &Scope, metrics: &Metrics) {
        node.update(metrics, |r, now| r.stream_closed(stream, now));
        let mut s = node.state.lock().unwrap();
        if let Some(i) = s.scopes.iter().position(|open| open == scope) {
            s.scopes.swap_remove(i);
        }
        if !s.scopes.is_empty() {
            return;
        }
        let now = Instant::now();
        s.idle_since = Some(now);
        // Only what a node acknowledged is worth resuming from: a node that acknowledged
        // nothing (a client that only asked, or a hostile one making up node ids) leaves
        // nothing behind.
        let nothing_acked = s.rollout.as_ref().is_none_or(|r| r.acked().is_empty());
        drop(s);
        // A canary gone may be what held its group back.
        self.canaries.detach(node);
        self.release(&node.group, metrics);
        let mut nodes = self.nodes.lock().unwrap();
        let key = (node.group.clone(), node.id.clone());
        let Some(clients) = nodes.by_key.get_mut(&key) else { return };
        let owner = node.state.lock().unwrap().owner.clone();
        // One idle client per node id and owner is kept, the one that left last: the next
        // process of that owner with the id resumes from it (unless a stream of it attached
        // again meanwhile).
        clients.retain(|n| {
            let this = std::ptr::eq(Arc::as_ptr(n), node);
            let s = n.state.lock().unwrap();
            !s.scopes.is_empty() || (this && !nothing_acked) || (!this && s.owner != owner)
        });
        if clients.is_empty() {
            nodes.by_key.remove(&key);
        }
        if nothing_acked {
            return;
        }
        nodes.lingering.push_back((now, key, node.client));
        if nodes.lingering.len() > 2 * MAX_LINGERING {
            nodes.forget_longest_idle();
        }
    }

    /// Every client of every node id with an open stream, with how its label must tell it
    /// apart from the id's other open clients.
    fn connected(&self) -> Vec<(Arc<NodeRollout>, Shared)> {
        let nodes = self.nodes.lock().unwrap();
        let mut by_id: HashMap<&str, Vec<&Arc<NodeRollout>>> = HashMap::new();
        for clients in nodes.by_key.values() {
            for n in clients.iter().filter(|n| !n.state.lock().unwrap().scopes.is_empty()) {
                by_id.entry(n.id.as_str()).or_default().push(n);
            }
        }
        let mut out = Vec::new();
        for open in by_id.into_values() {
            let shared = match open.as_slice() {
                [_] => Shared::No,
                [first, rest @ ..] if rest.iter().all(|n| n.group == first.group) => Shared::InGroup,
                _ => Shared::AcrossGroups,
            };
            out.extend(open.into_iter().map(|n| (n.clone(), shared)));
        }
        out
    }

    /// Whether client `client` of node `id` in `group` has an open stream.
    pub fn is_connected(&self, group: &str, id: &str, client: u32) -> bool {
        let nodes = self.nodes.lock().unwrap();
        let Some(clients) = nodes.by_key.get(&(group.to_owned(), id.to_owned())) else { return false };
        clients.iter().any(|n| n.client == client && !n.state.lock().unwrap().scopes.is_empty())
    }

    /// Every connected node, with the target it holds by its own acknowledgements and the
    /// rejection it is held up by, if any: what `/changes/{id}` and the status page count.
    pub fn syncs(&self) -> Vec<xdst_core::changes::NodeSync> {
        let now = Instant::now();
        self.connected()
            .into_iter()
            .map(|(n, shared)| {
                let s = n.state.lock().unwrap();
                let r = s.rollout.as_ref();
                let rejections = r.map(|r| r.rejection_statuses(now)).unwrap_or_default();
                let synced = r.and_then(|r| r.synced());
                xdst_core::changes::NodeSync {
                    group: n.group.clone(),
                    id: n.id.clone(),
                    client: n.client,
                    label: n.label(shared, s.owner.as_deref(), s.peer),
                    synced: synced.map(|s| s.version.clone()),
                    held_back: synced.map(|s| s.held_back.clone()).unwrap_or_else(|| Arc::new([])),
                    held_at_node: r.map(|r| r.node_holds().status(now)).unwrap_or_default(),
                    proxy: s.proxy,
                    canary: self.canaries.is_canary(&n),
                    acknowledged: r.is_some_and(|r| !r.acked().is_empty()),
                    rejection: rejections.first().cloned(),
                    rejections,
                }
            })
            .collect()
    }

    /// Every connected node whose id `pick` accepts: its group, id, which client of the id
    /// it is, and the state of each resource it asks for or holds (for CSDS).
    pub fn resource_states(
        &self,
        pick: impl Fn(&str) -> bool,
    ) -> Vec<(String, String, u32, Vec<xdst_core::client_status::ResourceState>)> {
        let mut out: Vec<_> = self
            .connected()
            .into_iter()
            .filter(|(n, _)| pick(&n.id))
            .filter_map(|(n, _)| {
                let s = n.state.lock().unwrap();
                let r = s.rollout.as_ref()?;
                Some((n.group.clone(), n.id.clone(), n.client, r.resource_states()))
            })
            .collect();
        out.sort_by(|a, b| (&a.1, a.2, &a.0).cmp(&(&b.1, b.2, &b.0)));
        out
    }

    /// Every node's rollout state, by (group, id, client).
    pub fn report(&self) -> HashMap<(String, String, u32), RolloutStatus> {
        self.report_where(|_| true)
    }

    /// [`report`](Self::report) for the nodes whose id `keep` accepts.
    pub fn report_where(&self, keep: impl Fn(&str) -> bool) -> HashMap<(String, String, u32), RolloutStatus> {
        let now = Instant::now();
        let nodes: Vec<Arc<NodeRollout>> =
            self.nodes.lock().unwrap().by_key.values().flatten().filter(|n| keep(&n.id)).cloned().collect();
        nodes
            .into_iter()
            .filter_map(|n| {
                let s = n.state.lock().unwrap();
                Some(((n.group.clone(), n.id.clone(), n.client), s.rollout.as_ref()?.status(now)))
            })
            .collect()
    }
}

/// Whether a node's id has other open clients (see [`NodeRollout::label`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shared {
    No,
    /// Others in its group.
    InGroup,
    /// Others, some in another group.
    AcrossGroups,
}

/// Whether two streams of one client would ask for the same type: then they are two clients.
fn overlaps(a: &Scope, b: &Scope) -> bool {
    match (a, b) {
        (Scope::Aggregated, Scope::Aggregated) => true,
        (Scope::Single(x), Scope::Single(y)) => x == y,
        // An ADS stream beside a per-type one: Envoy may take one type (EDS, say) elsewhere.
        _ => false,
    }
}

impl Nodes {
    /// Forgets the nodes idle longest until at most [`MAX_LINGERING`] entries remain.
    fn forget_longest_idle(&mut self) {
        while self.lingering.len() > MAX_LINGERING {
            let Some((since, key, client)) = self.lingering.pop_front() else { break };
            let Some(clients) = self.by_key.get_mut(&key) else { continue };
            // Still idle since then (not attached again): forget it.
            clients.retain(|n| {
                let s = n.state.lock().unwrap();
                !(n.client == client && s.scopes.is_empty() && s.idle_since.is_some_and(|t| t <= since))
            });
            if clients.is_empty() {
                self.by_key.remove(&key);
            }
        }
    }
}

impl crate::canaries::Member for NodeRollout {
    fn group(&self) -> &str {
        &self.group
    }
    fn holds_group_target(&self, target: &Arc<Snapshot>) -> bool {
        NodeRollout::holds_group_target(self, target)
    }
    fn silent(&self) -> bool {
        NodeRollout::silent(self)
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

    /// Moves the node to `target` and wakes every one of its streams (the canaries released
    /// it: no stream of the node made the change).
    pub fn release(&self, config: RolloutConfig, target: Arc<Snapshot>, metrics: &Metrics) {
        self.set_target(config, target, metrics);
        self.changed.notify_waiters();
    }

    /// Whether the node holds `target` (its group's), all of it, by its own acknowledgements.
    pub fn holds_group_target(&self, target: &Arc<Snapshot>) -> bool {
        let s = self.state.lock().unwrap();
        s.rollout.as_ref().is_some_and(|r| {
            r.synced().is_some_and(|x| Arc::ptr_eq(&x.target, target) && x.held_back.is_empty())
                && r.node_holds().is_empty()
        })
    }

    /// Whether the node is one of its group's proxies (design 016, part 3b).
    pub fn is_proxy(&self) -> bool {
        self.state.lock().unwrap().proxy
    }

    /// Whether the node has rejected nothing it still holds back or is stopped on.
    pub fn silent(&self) -> bool {
        let s = self.state.lock().unwrap();
        s.rollout.as_ref().is_none_or(|r| r.node_holds().is_empty() && r.rejection_status(Instant::now()).is_none())
    }

    /// The node rejected a response: the generation plane is told
    /// ([`Rollouts::rejections`]), whatever the node's mode.
    pub fn rejected(&self) {
        self.rejections.note();
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
        for note in notes {
            match note {
                Note::Step(step) => {
                    m.plan_step(step).inc();
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
                Note::Analysed { outcome } => {
                    m.nack_analyses.get_or_create(&label("outcome", outcome)).inc();
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
            if s.scopes.len() > 1 {
                self.changed.notify_waiters();
            }
        }
    }

    /// How the node is named to an operator: its id alone while it is the id's only open
    /// client (and the first); else `id (client N, <owner>[, from <address>][, group G])`, so
    /// two processes using one id, of one owner or of two, are never taken for one another.
    pub fn label(&self, shared: Shared, owner: Option<&str>, peer: Option<std::net::SocketAddr>) -> String {
        if shared == Shared::No && self.client == 1 {
            return self.id.clone();
        }
        let mut out = format!("{} (client {}", self.id, self.client);
        match (owner, peer) {
            // Without mTLS the owner is the address, which `from` shows.
            (Some(o), _) if o.starts_with("identity ") => out.push_str(&format!(", {o}")),
            _ => {}
        }
        if let Some(p) = peer {
            out.push_str(&format!(", from {p}"));
        }
        if shared == Shared::AcrossGroups {
            out.push_str(&format!(", group {:?}", self.group));
        }
        out.push(')');
        out
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

    /// Resolves when another stream of the node changed the offer (from now on, polled or
    /// not).
    pub fn changed(&self) -> tokio::sync::futures::OwnedNotified {
        self.changed.clone().notified_owned()
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

    const ADS: Scope = Scope::Aggregated;

    /// Node `id` connects, acknowledges a cluster, and disconnects.
    fn acked_then_idle(rollouts: &Rollouts, m: &Metrics, id: &str) {
        let node = rollouts.attach("g", id, "127.0.0.1", ADS, None, false);
        let c = Arc::new(Resource::new(CLUSTER, "c1", b"1"));
        node.set_target(rollouts.config(), Arc::new(Snapshot::from_resources([(*c).clone()]).unwrap()), m);
        let t: Arc<str> = CLUSTER.into();
        node.update(m, |r, now| {
            r.sent(
                1,
                &t,
                "n1".into(),
                Update::Patch { removed: vec![].into(), added: vec![c.clone()].into(), served: None, from: None },
            );
            r.answered(1, &t, "n1", None, now)
        });
        rollouts.detach(&node, 1, &ADS, m);
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

    /// Issue 33, item 6: a stream of another owner with the same node id is a client of its
    /// own, never refused and never refusing; a returning owner resumes its own client.
    #[test]
    fn a_node_id_used_by_two_owners_is_two_clients() {
        let (rollouts, m) = (Rollouts::new(RolloutConfig::default()), Metrics::new());
        let (a, b) = ("identity \"spiffe://x/a\"", "identity \"spiffe://x/b\"");
        let (lds, cds) = (Scope::Single(types::LISTENER), Scope::Single(CLUSTER));
        let first = rollouts.attach("g", "n", a, lds.clone(), None, false);
        // Envoy's separate LDS and CDS streams: one client, one rollout.
        let second = rollouts.attach("g", "n", a, cds.clone(), None, false);
        assert!(Arc::ptr_eq(&first, &second));
        // A squatter of another identity, while a's streams are open: a client of its own.
        let squatter = rollouts.attach("g", "n", b, ADS, None, false);
        assert!(!Arc::ptr_eq(&first, &squatter));
        assert_eq!((first.client, squatter.client), (1, 2));
        let labels: Vec<String> = rollouts.syncs().into_iter().map(|s| s.label).collect();
        assert!(labels.contains(&format!("n (client 2, {b})")), "{labels:?}");
        // a's Envoy restarts: its streams close and it comes back to its own client, not the
        // squatter's, even though the squatter's is the one that left last.
        let acked = |node: &NodeRollout, stream: u64| {
            let c = Resource::new(CLUSTER, "c1", b"1");
            let target = Arc::new(Snapshot::from_resources([c]).unwrap());
            let t: Arc<str> = CLUSTER.into();
            node.set_target(rollouts.config(), target.clone(), &m);
            node.update(&m, |r, now| {
                let mut notes = r.subscribe(stream, &t, true, &[], now);
                r.sent(stream, &t, "n1".into(), Update::Replace(target.get(CLUSTER).unwrap().clone()));
                notes.extend(r.answered(stream, &t, "n1", None, now));
                notes
            });
        };
        acked(&first, 2);
        acked(&squatter, 3);
        rollouts.detach(&first, 1, &lds, &m);
        rollouts.detach(&second, 2, &cds, &m);
        rollouts.detach(&squatter, 3, &ADS, &m);
        let back = rollouts.attach("g", "n", a, ADS, None, false);
        assert!(Arc::ptr_eq(&back, &first), "a resumes its own client");
        let again = rollouts.attach("g", "n", b, ADS, None, false);
        assert!(Arc::ptr_eq(&again, &squatter), "b resumes its own");
        // The same id in another group, of another owner: labelled with its group.
        let _elsewhere = rollouts.attach("h", "n", b, ADS, None, false);
        let labels: Vec<String> = rollouts.syncs().into_iter().map(|s| s.label).collect();
        assert!(labels.iter().any(|l| l.contains("group \"h\"")), "{labels:?}");
    }

    /// Issue 32, item 4: a second process with the same node id (two ADS streams) is a client
    /// of its own. Its rejection stops only its own plan, and its acknowledgements move only
    /// its own state; reports name it apart.
    #[test]
    fn a_second_client_with_the_same_node_id_has_its_own_rollout() {
        let (rollouts, m) = (Rollouts::new(RolloutConfig::default()), Metrics::new());
        let c = Resource::new(CLUSTER, "c1", b"1");
        let target = Arc::new(Snapshot::from_resources([c]).unwrap());
        let t: Arc<str> = CLUSTER.into();
        let envoy = rollouts.attach("g", "n", "address 127.0.0.1", ADS, None, false);
        let clone = rollouts.attach("g", "n", "address 127.0.0.1", ADS, None, false);
        assert!(!Arc::ptr_eq(&envoy, &clone));
        assert_eq!((envoy.client, clone.client), (1, 2));
        for (node, stream, nack) in [(&envoy, 1, None), (&clone, 2, Some("no"))] {
            node.set_target(rollouts.config(), target.clone(), &m);
            node.update(&m, |r, now| {
                let mut notes = r.subscribe(stream, &t, true, &[], now);
                r.sent(stream, &t, "n1".into(), Update::Replace(target.get(CLUSTER).unwrap().clone()));
                notes.extend(r.answered(stream, &t, "n1", nack, now));
                notes
            });
        }
        let syncs = rollouts.syncs();
        let of = |client: u32| syncs.iter().find(|s| s.client == client).unwrap();
        assert!(of(1).synced.is_some() && of(1).rejection.is_none(), "the Envoy holds it, unhindered");
        assert!(of(2).synced.is_none() && of(2).rejection.is_some(), "the clone rejected it");
        assert_eq!(of(1).label, "n (client 1)");
        assert_eq!(of(2).label, "n (client 2)");
        // Without mTLS the owner is the address, and `from` shows it (when known).
        // The clone leaves: the Envoy is the node id's only client, named by its id alone.
        rollouts.detach(&clone, 2, &ADS, &m);
        assert_eq!(rollouts.syncs().iter().map(|s| s.label.clone()).collect::<Vec<_>>(), ["n"]);
    }

    #[test]
    fn a_node_that_acknowledged_nothing_is_forgotten_when_its_stream_closes() {
        let (rollouts, m) = (Rollouts::new(RolloutConfig::default()), Metrics::new());
        let node = rollouts.attach("g", "asked-only", "127.0.0.1", ADS, None, false);
        rollouts.detach(&node, 1, &ADS, &m);
        assert!(rollouts.nodes.lock().unwrap().by_key.is_empty());
        acked_then_idle(&rollouts, &m, "acked");
        assert_eq!(rollouts.nodes.lock().unwrap().by_key.len(), 1, "a node with acknowledged state lingers");
    }

    fn canary_target(v: &str) -> Arc<Snapshot> {
        Arc::new(Snapshot::from_resources([Resource::new(CLUSTER, "c", v.as_bytes())]).unwrap())
    }

    /// The node is sent its offer of clusters, and answers it.
    fn canary_answer(rollouts: &Rollouts, node: &Arc<NodeRollout>, m: &Metrics, stream: u64, nack: Option<&str>) {
        let t: Arc<str> = CLUSTER.into();
        let (_, offer) = node.offer();
        let set = offer.snapshot.get(CLUSTER).unwrap().clone();
        node.update(m, |r, now| {
            let mut notes = r.subscribe(stream, &t, true, &[], now);
            r.sent(stream, &t, "n".into(), Update::Replace(set));
            notes.extend(r.answered(stream, &t, "n", nack, now));
            notes
        });
        rollouts.answered(node, m);
    }

    fn offered(node: &NodeRollout) -> Arc<str> {
        node.offer().1.snapshot.get(CLUSTER).unwrap().version().clone()
    }

    /// The group's first proxy takes each target first; the others get it once the canary
    /// holds it; a canary that rejects it keeps them where they are; a client that is not a
    /// proxy is never a canary.
    #[test]
    fn a_canary_takes_each_target_first_and_its_rejection_pauses_the_group() {
        let config = RolloutConfig { grace: Duration::from_secs(60), ..RolloutConfig::default() };
        let (rollouts, m) = (Rollouts::new(config).with_canaries(1), Metrics::new());
        let stranger = rollouts.attach("g", "stranger", "address 10.0.0.9", ADS, None, false);
        let canary = rollouts.attach("g", "a", "identity \"a\"", ADS, None, true);
        let other = rollouts.attach("g", "b", "identity \"b\"", ADS, None, true);
        let (t1, t2, t3) = (canary_target("1"), canary_target("2"), canary_target("3"));
        for (i, n) in [&stranger, &canary, &other].into_iter().enumerate() {
            rollouts.retarget(n, t1.clone(), &m);
            canary_answer(&rollouts, n, &m, i as u64 + 1, None);
        }
        let v = |t: &Arc<Snapshot>| t.get(CLUSTER).unwrap().version().clone();
        for n in [&stranger, &canary, &other] {
            rollouts.retarget(n, t2.clone(), &m);
        }
        assert_eq!(offered(&canary), v(&t2), "the canary first");
        assert_eq!((offered(&other), offered(&stranger)), (v(&t1), v(&t1)), "the rest wait");
        assert!(rollouts.syncs().iter().any(|s| s.id == "a" && s.canary));
        assert!(!rollouts.syncs().iter().any(|s| s.id == "stranger" && s.canary), "not a proxy: never a canary");
        canary_answer(&rollouts, &canary, &m, 2, None);
        assert_eq!((offered(&other), offered(&stranger)), (v(&t2), v(&t2)), "released once the canary holds it");
        for n in [&stranger, &other] {
            canary_answer(&rollouts, n, &m, if Arc::ptr_eq(n, &other) { 3 } else { 1 }, None);
        }
        // The canary rejects t3: the group stays at t2.
        for n in [&stranger, &canary, &other] {
            rollouts.retarget(n, t3.clone(), &m);
        }
        canary_answer(&rollouts, &canary, &m, 2, Some("no"));
        assert_eq!(offered(&other), v(&t2), "paused");
        // The canary leaves: the next proxy in line is the canary; it is given the newest target.
        rollouts.detach(&canary, 2, &ADS, &m);
        rollouts.retarget(&other, t3.clone(), &m);
        assert_eq!(offered(&other), v(&t3));
    }
}

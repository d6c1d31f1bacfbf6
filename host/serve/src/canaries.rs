//! Canaries (`--canaries N`, design 016 part 3c): each node group's first N connected proxies
//! take every new target first; the group's other nodes are moved to it once every canary
//! holds it by its own acknowledgements (or has been silent past the plan's grace period
//! without rejecting anything).
//!
//! A canary that rejects a document holds it back at itself (xdst_core::node_holds) and the
//! group stays paused at the target it has; the generation plane then holds the document for
//! the group (a canary speaks for it), and the next target, without it, goes to the canaries
//! and on to everyone. Only proxies are canaries: a client that is not the group's own cannot
//! pause it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use xdst_core::snapshot::Snapshot;

/// A node as the gate sees it (`crate::rollouts::N`).
pub trait Member {
    /// Its node group.
    fn group(&self) -> &str;
    /// Whether it holds `target` (its group's), all of it, by its own acknowledgements.
    fn holds_group_target(&self, target: &Arc<Snapshot>) -> bool;
    /// Whether it has rejected nothing it still holds back or is stopped on.
    fn silent(&self) -> bool;
}

/// Each group's gate.
pub struct Canaries<N> {
    /// How many canaries each group has (0: none, every node takes each target at once).
    pub count: usize,
    /// How long a silent canary holds its group back.
    grace: Duration,
    groups: Mutex<HashMap<String, Gate<N>>>,
}

impl<N> Default for Canaries<N> {
    fn default() -> Self {
        Canaries { count: 0, grace: Duration::ZERO, groups: Mutex::default() }
    }
}

struct Gate<N> {
    /// What the group's other nodes are moved to.
    released: Arc<Snapshot>,
    /// The group's newest target, with the canaries first.
    candidate: Arc<Snapshot>,
    since: Instant,
    /// The group's connected proxies, in the order they connected: the first `count` are its
    /// canaries.
    proxies: Vec<Weak<N>>,
    /// Every connected node of the group.
    members: Vec<Weak<N>>,
}

impl<N: Member> Canaries<N> {
    pub fn new(count: usize, grace: Duration) -> Canaries<N> {
        Canaries { count, grace, groups: Mutex::default() }
    }

    /// Whether groups have canaries at all.
    pub fn on(&self) -> bool {
        self.count > 0
    }

    /// A stream of `node` opened.
    pub fn attach(&self, node: &Arc<N>, proxy: bool, target: &Arc<Snapshot>) {
        if !self.on() {
            return;
        }
        let mut groups = self.groups.lock().unwrap();
        let gate = groups.entry(node.group().to_owned()).or_insert_with(|| Gate {
            released: target.clone(),
            candidate: target.clone(),
            since: Instant::now(),
            proxies: Vec::new(),
            members: Vec::new(),
        });
        let weak = Arc::downgrade(node);
        if !gate.members.iter().any(|m| m.ptr_eq(&weak)) {
            gate.members.push(weak.clone());
        }
        if proxy && !gate.proxies.iter().any(|m| m.ptr_eq(&weak)) {
            gate.proxies.push(weak);
        }
    }

    /// `node`'s last stream closed.
    pub fn detach(&self, node: &N) {
        if !self.on() {
            return;
        }
        let mut groups = self.groups.lock().unwrap();
        let Some(gate) = groups.get_mut(node.group()) else { return };
        let this = |w: &Weak<N>| w.upgrade().is_some_and(|n| !std::ptr::eq(Arc::as_ptr(&n), node));
        gate.members.retain(this);
        gate.proxies.retain(this);
        if gate.members.is_empty() {
            groups.remove(node.group());
        }
    }

    /// Whether `node` is one of its group's canaries.
    pub fn is_canary(&self, node: &N) -> bool {
        self.on() && self.groups.lock().unwrap().get(node.group()).is_some_and(|g| g.is_canary(node, self.count))
    }

    /// What `node` is moved to when its group's target is `target`: the target itself for a
    /// canary, what the canaries released for the others.
    pub fn target_for(&self, node: &N, target: Arc<Snapshot>) -> Arc<Snapshot> {
        if !self.on() {
            return target;
        }
        let mut groups = self.groups.lock().unwrap();
        let Some(gate) = groups.get_mut(node.group()) else { return target };
        if !Arc::ptr_eq(&gate.candidate, &target) && !gate.candidate.same_content(&target) {
            gate.candidate = target;
            gate.since = Instant::now();
        }
        if gate.canaries(self.count).next().is_none() {
            // No canary connected: nothing to wait for.
            gate.released = gate.candidate.clone();
        }
        if gate.is_canary(node, self.count) { gate.candidate.clone() } else { gate.released.clone() }
    }

    /// A canary of `group` answered (or its grace ran out): when every canary holds the
    /// candidate (or was silent past the grace period without rejecting anything), it is
    /// released. The nodes to move, and what to move them to.
    pub fn check(&self, group: &str) -> Option<(Arc<Snapshot>, Vec<Arc<N>>)> {
        if !self.on() {
            return None;
        }
        let mut groups = self.groups.lock().unwrap();
        let gate = groups.get_mut(group)?;
        if Arc::ptr_eq(&gate.released, &gate.candidate) {
            return None;
        }
        let silent_long = gate.since.elapsed() > self.grace;
        let candidate = gate.candidate.clone();
        let ready = gate.canaries(self.count).all(|c| c.holds_group_target(&candidate) || (silent_long && c.silent()));
        if !ready {
            return None;
        }
        gate.released = candidate.clone();
        let canaries: Vec<Arc<N>> = gate.canaries(self.count).collect();
        let others = gate
            .members
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|n| !canaries.iter().any(|c| Arc::ptr_eq(c, n)))
            .collect();
        Some((candidate, others))
    }
}

impl<N> Gate<N> {
    fn canaries(&self, count: usize) -> impl Iterator<Item = Arc<N>> + '_ {
        self.proxies.iter().filter_map(Weak::upgrade).take(count)
    }

    fn is_canary(&self, node: &N, count: usize) -> bool {
        self.canaries(count).any(|c| std::ptr::eq(Arc::as_ptr(&c), node))
    }
}

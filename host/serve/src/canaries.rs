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

use crate::rollouts::NodeRollout;

/// Each group's gate.
#[derive(Default)]
pub struct Canaries {
    /// How many canaries each group has (0: none, every node takes each target at once).
    pub count: usize,
    /// How long a silent canary holds its group back.
    grace: Duration,
    groups: Mutex<HashMap<String, Gate>>,
}

struct Gate {
    /// What the group's other nodes are moved to.
    released: Arc<Snapshot>,
    /// The group's newest target, with the canaries first.
    candidate: Arc<Snapshot>,
    since: Instant,
    /// The group's connected proxies, in the order they connected: the first `count` are its
    /// canaries.
    proxies: Vec<Weak<NodeRollout>>,
    /// Every connected node of the group.
    members: Vec<Weak<NodeRollout>>,
}

impl Canaries {
    pub fn new(count: usize, grace: Duration) -> Canaries {
        Canaries { count, grace, groups: Mutex::default() }
    }

    /// Whether groups have canaries at all.
    pub fn on(&self) -> bool {
        self.count > 0
    }

    /// A stream of `node` opened.
    pub fn attach(&self, node: &Arc<NodeRollout>, proxy: bool, target: &Arc<Snapshot>) {
        if !self.on() {
            return;
        }
        let mut groups = self.groups.lock().unwrap();
        let gate = groups.entry(node.group.clone()).or_insert_with(|| Gate {
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
    pub fn detach(&self, node: &NodeRollout) {
        if !self.on() {
            return;
        }
        let mut groups = self.groups.lock().unwrap();
        let Some(gate) = groups.get_mut(&node.group) else { return };
        let this = |w: &Weak<NodeRollout>| w.upgrade().is_some_and(|n| !std::ptr::eq(Arc::as_ptr(&n), node));
        gate.members.retain(this);
        gate.proxies.retain(this);
        if gate.members.is_empty() {
            groups.remove(&node.group);
        }
    }

    /// Whether `node` is one of its group's canaries.
    pub fn is_canary(&self, node: &NodeRollout) -> bool {
        self.on() && self.groups.lock().unwrap().get(&node.group).is_some_and(|g| g.is_canary(node, self.count))
    }

    /// What `node` is moved to when its group's target is `target`: the target itself for a
    /// canary, what the canaries released for the others.
    pub fn target_for(&self, node: &NodeRollout, target: Arc<Snapshot>) -> Arc<Snapshot> {
        if !self.on() {
            return target;
        }
        let mut groups = self.groups.lock().unwrap();
        let Some(gate) = groups.get_mut(&node.group) else { return target };
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
    pub fn check(&self, group: &str) -> Option<(Arc<Snapshot>, Vec<Arc<NodeRollout>>)> {
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
        let canaries: Vec<Arc<NodeRollout>> = gate.canaries(self.count).collect();
        let others = gate
            .members
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|n| !canaries.iter().any(|c| Arc::ptr_eq(c, n)))
            .collect();
        Some((candidate, others))
    }
}

impl Gate {
    fn canaries(&self, count: usize) -> impl Iterator<Item = Arc<NodeRollout>> + '_ {
        self.proxies.iter().filter_map(Weak::upgrade).take(count)
    }

    fn is_canary(&self, node: &NodeRollout, count: usize) -> bool {
        self.canaries(count).any(|c| std::ptr::eq(Arc::as_ptr(&c), node))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xdst_core::resource::Resource;
    use xdst_core::rollout::{RolloutConfig, Update};
    use xdst_core::snapshot::Snapshot;
    use xdst_core::stream::Scope;
    use xdst_core::types::CLUSTER;

    use crate::metrics::Metrics;
    use crate::rollouts::{NodeRollout, Rollouts};

    fn target(v: &str) -> Arc<Snapshot> {
        Arc::new(Snapshot::from_resources([Resource::new(CLUSTER, "c", v.as_bytes())]).unwrap())
    }

    /// The node is sent its offer of clusters, and answers it.
    fn answer(rollouts: &Rollouts, node: &Arc<NodeRollout>, m: &Metrics, stream: u64, nack: Option<&str>) {
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
        let config = RolloutConfig { grace: std::time::Duration::from_secs(60), ..RolloutConfig::default() };
        let (rollouts, m) = (Rollouts::new(config).with_canaries(1), Metrics::new());
        let stranger = rollouts.attach("g", "stranger", "address 10.0.0.9", Scope::Aggregated, None, false);
        let canary = rollouts.attach("g", "a", "identity \"a\"", Scope::Aggregated, None, true);
        let other = rollouts.attach("g", "b", "identity \"b\"", Scope::Aggregated, None, true);
        let (t1, t2, t3) = (target("1"), target("2"), target("3"));
        for (i, n) in [&stranger, &canary, &other].into_iter().enumerate() {
            rollouts.retarget(n, t1.clone(), &m);
            answer(&rollouts, n, &m, i as u64 + 1, None);
        }
        let v = |t: &Arc<Snapshot>| t.get(CLUSTER).unwrap().version().clone();
        for n in [&stranger, &canary, &other] {
            rollouts.retarget(n, t2.clone(), &m);
        }
        assert_eq!(offered(&canary), v(&t2), "the canary first");
        assert_eq!((offered(&other), offered(&stranger)), (v(&t1), v(&t1)), "the rest wait");
        assert!(rollouts.syncs().iter().any(|s| s.id == "a" && s.canary));
        assert!(!rollouts.syncs().iter().any(|s| s.id == "stranger" && s.canary), "not a proxy: never a canary");
        answer(&rollouts, &canary, &m, 2, None);
        assert_eq!((offered(&other), offered(&stranger)), (v(&t2), v(&t2)), "released once the canary holds it");
        for n in [&stranger, &other] {
            answer(&rollouts, n, &m, if Arc::ptr_eq(n, &other) { 3 } else { 1 }, None);
        }
        // The canary rejects t3: the group stays at t2.
        for n in [&stranger, &canary, &other] {
            rollouts.retarget(n, t3.clone(), &m);
        }
        answer(&rollouts, &canary, &m, 2, Some("no"));
        assert_eq!(offered(&other), v(&t2), "paused");
        // The canary leaves: the next proxy in line is the canary; it is given the newest target.
        rollouts.detach(&canary, 2, &Scope::Aggregated, &m);
        rollouts.retarget(&other, t3.clone(), &m);
        assert_eq!(offered(&other), v(&t3));
    }
}

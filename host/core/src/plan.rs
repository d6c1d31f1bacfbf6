//! Make-before-break (ORDER-1, ORDER-2): what to offer one node now, given what it should end
//! up with and what it has acknowledged.
//!
//! A change is rolled out in steps, each gated on the node's acknowledgements:
//!
//! 1. **Clusters**: new and changed clusters, and their endpoints at once (a cluster warms
//!    until its endpoints arrive, and Envoy may hold the CDS ACK until then). Every cluster
//!    the node holds is kept, so whatever it routes to now keeps working. Listeners and
//!    routes are held: nothing is sent for them.
//! 2. **Listeners**, once every target cluster and its endpoints are acknowledged. Routes
//!    are still held.
//! 3. **Routes**, once the listeners are acknowledged: every cluster they name is there.
//! 4. **Cleanup**, once the routes are acknowledged and no listener or route response is
//!    still unanswered: clusters and endpoints nothing names any more are removed.
//!
//! [`plan`] is a pure function of the target and the acknowledged state, so a new generation
//! arriving midway simply restarts from what the node has acknowledged, and the same inputs
//! always give the same offer. Types other than the four are offered as the target has them.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::snapshot::{Snapshot, TypeSet};
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

/// Where a node is in rolling out its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Waiting for the target's clusters and their endpoints to be acknowledged.
    Clusters,
    /// Waiting for the target's listeners.
    Listeners,
    /// Waiting for the route configurations the target's listeners name (and for every
    /// listener or route response in flight to be answered).
    Routes,
    /// Waiting for the removal of clusters and endpoints nothing names any more.
    Cleanup,
    /// The node has acknowledged its target.
    Converged,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Clusters => "clusters",
            Step::Listeners => "listeners",
            Step::Routes => "routes",
            Step::Cleanup => "cleanup",
            Step::Converged => "converged",
        }
    }
    /// The types whose acknowledgement this step waits for.
    pub fn awaits(self) -> &'static [&'static str] {
        match self {
            Step::Clusters => &[CLUSTER, ENDPOINT],
            Step::Listeners => &[LISTENER],
            Step::Routes => &[ROUTE, LISTENER],
            Step::Cleanup => &[CLUSTER, ENDPOINT],
            Step::Converged => &[],
        }
    }
}

/// What to offer a node now, and why.
#[derive(Debug, Clone)]
pub struct Plan {
    pub step: Step,
    /// What the node's streams serve, for every type not in `hold`.
    pub offer: Snapshot,
    /// Types nothing may be sent for yet: the node keeps what it has.
    pub hold: &'static [&'static str],
}

/// What a node with a target will ask for by name: the EDS names its clusters wait for, the
/// route configurations its listeners name. Anything else in the target is never requested.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    pub endpoints: BTreeSet<String>,
    pub routes: BTreeSet<String>,
}

impl Wanted {
    pub fn of(target: &Snapshot) -> Wanted {
        Wanted { endpoints: referenced(target.get(CLUSTER), ENDPOINT), routes: referenced(target.get(LISTENER), ROUTE) }
    }
}

/// What to offer a node whose target is `target` and which has acknowledged `acked`.
/// `settled` says that every listener and route response sent to the node has been answered;
/// until it is, nothing is removed (a response in flight may still name what would go).
pub fn plan(target: &Snapshot, acked: &Snapshot, settled: bool) -> Plan {
    plan_with(target, &Wanted::of(target), acked, settled)
}

/// [`plan`] with what the target's nodes ask for computed once.
pub fn plan_with(target: &Snapshot, wanted: &Wanted, acked: &Snapshot, settled: bool) -> Plan {
    let (step, hold, offer) = plan_lean(target, wanted, acked, settled);
    Plan { step, offer: offer.unwrap_or_else(|| target.clone()), hold }
}

/// [`plan_with`], with `None` for an offer that is the target itself (no copy).
pub(crate) fn plan_lean(
    target: &Snapshot,
    wanted: &Wanted,
    acked: &Snapshot,
    settled: bool,
) -> (Step, &'static [&'static str], Option<Snapshot>) {
    let t = |ty: &str| target.get(ty);
    let a = |ty: &str| acked.get(ty);
    let (wanted_endpoints, wanted_routes) = (&wanted.endpoints, &wanted.routes);

    let clusters_ready =
        holds_all(a(CLUSTER), t(CLUSTER), None) && holds_all(a(ENDPOINT), t(ENDPOINT), Some(wanted_endpoints));
    let listeners_ready = same(a(LISTENER), t(LISTENER));
    let routes_ready = holds_all(a(ROUTE), t(ROUTE), Some(wanted_routes)) && settled;
    let cleaned = same(a(CLUSTER), t(CLUSTER));

    let step = if !clusters_ready {
        Step::Clusters
    } else if !listeners_ready {
        Step::Listeners
    } else if !routes_ready {
        Step::Routes
    } else if !cleaned {
        Step::Cleanup
    } else {
        Step::Converged
    };
    let hold: &'static [&'static str] = match step {
        Step::Clusters => &[LISTENER, ROUTE],
        Step::Listeners => &[ROUTE],
        _ => &[],
    };
    if step >= Step::Cleanup {
        return (step, hold, None);
    }
    let mut sets = Vec::with_capacity(2);
    for ty in [CLUSTER, ENDPOINT] {
        if let Some(held) = a(ty) {
            let kept = match t(ty) {
                // Nothing held that the target lacks: the target's own set.
                Some(new) if held.resources().all(|r| new.get(r.name()).is_some()) => continue,
                Some(new) => new.overlay(held),
                None => TypeSet::clone(held),
            };
            sets.push((target.type_key(ty), Arc::new(kept)));
        }
    }
    if sets.is_empty() {
        return (step, hold, None);
    }
    (step, hold, Some(target.with_sets(sets)))
}

/// Names of `ty` that the resources in `set` refer to.
fn referenced(set: Option<&Arc<TypeSet>>, ty: &str) -> BTreeSet<String> {
    set.into_iter()
        .flat_map(|s| s.resources())
        .flat_map(|r| r.references().names(ty).map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// Whether `have` holds every resource of `want` (only those in `only`, if given) at the same
/// version.
fn holds_all(have: Option<&Arc<TypeSet>>, want: Option<&Arc<TypeSet>>, only: Option<&BTreeSet<String>>) -> bool {
    let Some(want) = want else { return true };
    want.resources()
        .filter(|r| only.is_none_or(|o| o.contains(r.name().as_ref())))
        .all(|r| have.and_then(|h| h.get(r.name())).is_some_and(|h| h.version() == r.version()))
}

/// Whether two sets hold the same resources at the same versions.
fn same(a: Option<&Arc<TypeSet>>, b: Option<&Arc<TypeSet>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.version() == b.version(),
        (None, None) => true,
        (Some(s), None) | (None, Some(s)) => s.is_empty(),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
pub(crate) mod tests;

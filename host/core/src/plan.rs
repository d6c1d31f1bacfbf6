//! Make-before-break (ORDER-1, ORDER-2): what to offer one node now, given what it should end
//! up with and what it holds.
//!
//! Each resource waits only for what it depends on, and only when the node does not hold it
//! yet:
//!
//! - **Clusters and endpoints** go out at once, new and changed alike (a cluster warms until
//!   its endpoints arrive; a changed one keeps serving until its new form is warm). Every
//!   cluster something the node holds still names is kept, and so are those [`Node::keep`]
//!   says a draining listener or a response in flight may still use.
//! - **A route configuration** goes out once every cluster it names is usable on the node: the
//!   node holds the cluster and its endpoints (routes do not warm, ORDER-1).
//! - **A listener** goes out once every cluster it names is usable and every route
//!   configuration it names can be in place when it activates: either the node does not hold
//!   that name (the listener warms until it arrives, and it is ready to be sent), or the node
//!   holds it in its new form, or the new form goes out with the listener on the same stream,
//!   ahead of it ([`Node::together`]). A listener the node already subscribes a route
//!   configuration for activates at once with what it holds, so the old form must never be
//!   what it activates with.
//! - **Removals** of listeners go out at once; a route configuration the node still asks for
//!   (a listener it drains uses it) stays as it holds it; a cluster goes once nothing the
//!   node holds or may still use names it.
//!
//! A change that names nothing new to the node therefore goes out in one round trip, every
//! type at once. What waits is held back at the version the node holds (or left out when it
//! holds none). [`plan`] is a pure function of the target and the node's state, so a new
//! generation arriving midway simply restarts from what the node holds, and the same inputs
//! always give the same offer. Types other than the four are offered as the target has them.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::resource::Resource;
use crate::snapshot::{Change, Snapshot, TypeSet};
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, SCOPED_ROUTE};

/// What a node's rollout waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// A route configuration or listener waits for clusters (and their endpoints) new to
    /// the node.
    Clusters,
    /// A listener waits for the node to acknowledge the new form of a route configuration it
    /// already holds (separate streams per type: nothing orders one stream after another).
    Routes,
    /// Everything is offered; waiting for the node's acknowledgements.
    Acks,
    /// Waiting for the removal of clusters nothing names any more.
    Cleanup,
    /// The node holds its target (clusters kept for draining listeners aside).
    Converged,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Clusters => "clusters",
            Step::Routes => "routes",
            Step::Acks => "acks",
            Step::Cleanup => "cleanup",
            Step::Converged => "converged",
        }
    }
    /// The types whose acknowledgement this step waits for.
    pub fn awaits(self) -> &'static [&'static str] {
        match self {
            Step::Clusters => &[CLUSTER, ENDPOINT],
            Step::Routes => &[ROUTE],
            Step::Acks => &[CLUSTER, ENDPOINT, LISTENER, ROUTE],
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

/// What an Envoy with a target will ask for by name: the EDS names its clusters wait for, the
/// route configurations its listeners name (not those only an `api_listener` names: Envoy
/// ignores it) and those its routing scopes name. Anything else in the target is never
/// requested.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    pub endpoints: BTreeSet<String>,
    pub routes: BTreeSet<String>,
}

impl Wanted {
    pub fn of(target: &Snapshot) -> Wanted {
        let routes = target
            .get(LISTENER)
            .into_iter()
            .flat_map(|s| s.resources())
            .flat_map(|l| l.references().names_envoy_follows(ROUTE).map(str::to_owned).collect::<Vec<_>>())
            .chain(referenced(target.get(SCOPED_ROUTE), ROUTE))
            .collect();
        Wanted { endpoints: referenced(target.get(CLUSTER), ENDPOINT), routes }
    }
}

/// A plan worked out for a node that holds exactly `from` (the sums of its four types, as
/// acknowledged) of the types it subscribes to (`subscribed`, a bit per core type) with
/// nothing in flight, rejected or draining: that alone decides it, so the group's other nodes
/// in the same state (after a change, usually all of them; while they connect, each step of
/// the same sequence) take it as it is instead of each working out the same plan. Kept with
/// the target, at most [`SHARED_PLANS`] states of it.
#[derive(Clone)]
pub(crate) struct SharedPlan {
    pub from: [u128; 4],
    pub subscribed: u8,
    pub together: bool,
    pub step: Step,
    pub hold: &'static [&'static str],
    /// `None`: the target itself.
    pub offer: Option<Arc<Snapshot>>,
}

/// How many states' plans a target keeps (the first ones worked out): an Envoy connecting
/// subscribes its four types one by one, so a fleet connecting goes through a few states.
pub(crate) const SHARED_PLANS: usize = 8;

/// What the planner knows of a node besides its target.
pub struct Node<'a> {
    /// What the node surely holds: what it acknowledged, less whatever a response still in
    /// flight removes, or, for listeners and route configurations, changes (a cluster or its
    /// endpoints stay usable through a change: only their names are read, and only
    /// [`Node::settled`] says whether one is on its way).
    pub held: &'a Snapshot,
    /// What the node may hold: what it acknowledged, with the latest form of every resource
    /// a response in flight carries. Removals are decided on it: a cluster still on its way
    /// is as much in use as one acknowledged.
    pub maybe: &'a Snapshot,
    /// Whether the node may hold a route configuration of this name that `held` does not
    /// show (one in a response still in flight).
    pub maybe_route: &'a dyn Fn(&str) -> bool,
    /// Whether a cluster the target drops must stay: something the node acknowledged or may
    /// still receive names it, or a listener it is draining did.
    pub keep: &'a dyn Fn(&str) -> bool,
    /// Whether a route configuration and a listener offered at once reach the node in that
    /// order: its listeners and routes come on one stream, which writes routes first.
    pub together: bool,
    /// Whether every listener and route response sent has been answered, and every cluster
    /// or endpoint response that changes what the node holds.
    pub settled: bool,
    /// Whether a listener that routes by scope, changed or removed, is still draining at the
    /// node: the routing scopes it used stay (see [`plan_lean`]).
    pub scopes_draining: bool,
}

/// The clusters the listeners and route configurations of `held` name.
pub fn names_held(held: &Snapshot) -> BTreeSet<String> {
    [LISTENER, ROUTE].into_iter().flat_map(|ty| referenced(held.get(ty), CLUSTER)).collect()
}

/// What to offer a node whose target is `target`, given what it holds.
pub fn plan(target: &Snapshot, node: &Node<'_>) -> Plan {
    plan_with(target, &Wanted::of(target), node)
}

/// [`plan`] with what the target's nodes ask for computed once.
pub fn plan_with(target: &Snapshot, wanted: &Wanted, node: &Node<'_>) -> Plan {
    let (step, hold, offer) = plan_lean(target, wanted, node);
    Plan { step, offer: offer.unwrap_or_else(|| target.clone()), hold }
}

/// [`plan_with`], with `None` for an offer that is the target itself (no copy).
pub(crate) fn plan_lean(
    target: &Snapshot,
    wanted: &Wanted,
    node: &Node<'_>,
) -> (Step, &'static [&'static str], Option<Snapshot>) {
    let held = node.held;
    let (t, h) = (|ty: &str| target.get(ty), |ty: &str| held.get(ty));
    // The target's set of a type, borrowed: the sets are shared by every node of the group,
    // and counting references to them from both worker threads is not free.
    let empty = TypeSet::default();
    let ts = |ty: &str| t(ty).map_or(&empty, |s| s.as_ref());

    // A cluster is usable when the node holds it and the endpoints it waits for. What the
    // target lacks cannot be waited for: a dangling name does not hold anything back. With
    // every cluster and every endpoint of the target held (at any version: the sets' shared
    // parts are skipped), every cluster is usable, and a route configuration of thousands of
    // routes changed in one place is not walked name by name.
    let all_held = |ty: &str| match (t(ty), h(ty)) {
        (None, _) => true,
        (Some(want), Some(have)) => !want.changes_since(have).any(|c| matches!(c, Change::Added(_))),
        (Some(want), None) => want.is_empty(),
    };
    let settled = all_held(CLUSTER) && all_held(ENDPOINT);
    let usable = |c: &str| -> bool {
        if settled || target.resource(CLUSTER, c).is_none() {
            return true;
        }
        let Some(hc) = held.resource(CLUSTER, c) else { return false };
        hc.references()
            .names(ENDPOINT)
            .all(|e| held.resource(ENDPOINT, e).is_some() || target.resource(ENDPOINT, e).is_none())
    };
    let route_ready = |r: &Resource| settled || r.references().names(CLUSTER).all(usable);

    let (routes, route_wait) = gate(t(ROUTE), h(ROUTE), |r| (!route_ready(r)).then_some(Step::Clusters));
    // Route configurations the target dropped that the node still asks for (a listener it
    // drains uses them): they stay as the node holds them. Envoy ignores a Delta removal of
    // one anyway, so sending it would only make xdst believe the node let it go.
    let routes = match h(ROUTE) {
        Some(hr) => {
            let dropped = dropped(ts(ROUTE), hr);
            match (dropped.is_empty(), routes) {
                (true, routes) => routes,
                (false, Some(gated)) => Some(gated.patch(&[], &dropped)),
                (false, None) => Some(ts(ROUTE).patch(&[], &dropped)),
            }
        }
        None => routes,
    };
    // Routing scopes the target drops stay while the node holds a listener that routes by
    // scope which the target changes or drops, or drains one: scoped RDS is full state, and
    // Envoy would take them from under that listener before its replacement is warm, or while
    // its connections drain (the port's requests would find no route meanwhile).
    let scopes =
        h(SCOPED_ROUTE).filter(|_| node.scopes_draining || leaving_scoped(h(LISTENER), ts(LISTENER))).and_then(|hs| {
            let dropped = dropped(ts(SCOPED_ROUTE), hs);
            (!dropped.is_empty()).then(|| ts(SCOPED_ROUTE).patch(&[], &dropped))
        });
    let (listeners, listener_wait) = gate(t(LISTENER), h(LISTENER), |l| {
        if !settled && !l.references().names(CLUSTER).all(usable) {
            return Some(Step::Clusters);
        }
        l.references()
            .names_envoy_follows(ROUTE)
            .filter_map(|name| Some((name, target.resource(ROUTE, name)?)))
            .find_map(|(name, r)| {
                if !route_ready(r) {
                    return Some(Step::Clusters);
                }
                let holds = held.resource(ROUTE, name);
                let in_place = holds.is_some_and(|h| h.version() == r.version())
                    || node.together
                    || (holds.is_none() && !(node.maybe_route)(name));
                (!in_place).then_some(Step::Routes)
            })
    });

    // Clusters: the target's, and those the node holds that something may still use, with
    // their endpoints.
    let mut kept_eds: BTreeSet<String> = BTreeSet::new();
    let mut kept_clusters: Vec<Arc<Resource>> = Vec::new();
    let mut removing = false;
    if let Some(hc) = node.maybe.get(CLUSTER) {
        for change in ts(CLUSTER).changes_since(hc) {
            if let Change::Removed(c) = change {
                if (node.keep)(c.name()) {
                    kept_eds.extend(c.references().names(ENDPOINT).map(str::to_owned));
                    kept_clusters.push(c.clone());
                } else {
                    removing = true;
                }
            }
        }
    }
    let clusters = (!kept_clusters.is_empty()).then(|| ts(CLUSTER).patch(&[], &kept_clusters));
    // (Only the endpoints of kept clusters are kept: none, under endpoint churn, and the
    // walk over every endpoint the node may hold is skipped.)
    let endpoints = node.maybe.get(ENDPOINT).filter(|_| !kept_eds.is_empty()).and_then(|he| {
        let te = ts(ENDPOINT);
        let kept: Vec<Arc<Resource>> = te
            .changes_since(he)
            .filter_map(|c| match c {
                Change::Removed(e) if kept_eds.contains(e.name().as_ref()) => Some(e.clone()),
                _ => None,
            })
            .collect();
        (!kept.is_empty()).then(|| te.patch(&[], &kept))
    });

    let holds_target = || {
        holds_all(h(CLUSTER), t(CLUSTER), None)
            && holds_all(h(ENDPOINT), t(ENDPOINT), Some(&wanted.endpoints))
            && same(h(LISTENER), t(LISTENER))
            && holds_all(h(ROUTE), t(ROUTE), Some(&wanted.routes))
    };
    // (Option's order puts None first: the earliest of the waits that exist.)
    let step = match route_wait.into_iter().chain(listener_wait).min() {
        Some(wait) => wait,
        None if !node.settled || !holds_target() => Step::Acks,
        None if removing => Step::Cleanup,
        None => Step::Converged,
    };
    // A node that holds no listener yet is sent none until one can go: no empty first
    // response for it to apply.
    let hold: &'static [&'static str] = match &listeners {
        Some(l) if l.is_empty() && h(LISTENER).is_none_or(|s| s.is_empty()) => &[LISTENER],
        _ => &[],
    };
    let sets: Vec<(Arc<str>, Arc<TypeSet>)> =
        [(CLUSTER, clusters), (ENDPOINT, endpoints), (ROUTE, routes), (SCOPED_ROUTE, scopes), (LISTENER, listeners)]
            .into_iter()
            .filter_map(|(ty, set)| Some((target.type_key(ty), Arc::new(set?))))
            .collect();
    if sets.is_empty() {
        return (step, hold, None);
    }
    (step, hold, Some(target.with_sets(sets)))
}

/// What `held` has that `target` dropped, as `held` has it.
fn dropped(target: &TypeSet, held: &TypeSet) -> Vec<Arc<Resource>> {
    target
        .changes_since(held)
        .filter_map(|c| match c {
            Change::Removed(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// Whether a listener `held` has that routes by scope is changed or dropped by `target`.
fn leaving_scoped(held: Option<&Arc<TypeSet>>, target: &TypeSet) -> bool {
    let Some(held) = held else { return false };
    held.resources()
        .filter(|l| l.references().routes_by_scope())
        .any(|l| target.get(l.name()).is_none_or(|t| t.version() != l.version()))
}

/// The target's set of one type, with each resource new or changed to the node that `wait`
/// holds back (saying for what) kept at the version the node holds, or left out if it holds
/// none. `None` when nothing is held back: the target's own set goes out.
fn gate(
    target: Option<&Arc<TypeSet>>,
    held: Option<&Arc<TypeSet>>,
    wait: impl Fn(&Resource) -> Option<Step>,
) -> (Option<TypeSet>, Option<Step>) {
    let Some(target) = target else { return (None, None) };
    let empty = TypeSet::default();
    let held = held.map(|h| h.as_ref()).unwrap_or(&empty);
    let (mut back, mut keep, mut first): (Vec<Arc<str>>, Vec<Arc<Resource>>, Option<Step>) = (vec![], vec![], None);
    for change in target.changes_since(held) {
        let r = match change {
            Change::Added(r) | Change::Updated(r) => r,
            Change::Removed(_) => continue,
        };
        if let Some(step) = wait(r) {
            first = Some(first.map_or(step, |f| f.min(step)));
            match held.get(r.name()) {
                Some(old) => keep.push(old.clone()),
                None => back.push(r.name().clone()),
            }
        }
    }
    if first.is_none() {
        return (None, None);
    }
    (Some(target.patch(&back, &keep)), first)
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
/// What differs between the two is looked at, not every resource: what a node acknowledged is
/// usually the target patched, and the parts they share are skipped.
fn holds_all(have: Option<&Arc<TypeSet>>, want: Option<&Arc<TypeSet>>, only: Option<&BTreeSet<String>>) -> bool {
    let Some(want) = want else { return true };
    let wanted = |name: &str| only.is_none_or(|o| o.contains(name));
    let Some(have) = have else { return !want.resources().any(|r| wanted(r.name())) };
    if Arc::ptr_eq(have, want) || (have.len() == want.len() && have.sum() == want.sum()) {
        return true;
    }
    // A name that differs and that `want` has: `have` lacks it or holds another version.
    want.changed_entries(have).into_iter().all(|(n, in_want, _)| in_want.is_none() || !wanted(n))
}

/// Whether two sets hold the same resources at the same versions.
fn same(a: Option<&Arc<TypeSet>>, b: Option<&Arc<TypeSet>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.sum() == b.sum(),
        (None, None) => true,
        (Some(s), None) | (None, Some(s)) => s.is_empty(),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
pub(crate) mod tests;

//! The incremental (Delta) stream state machine (rules DELTA-1..8).
//!
//! Like [`crate::sotw`], it is fed requests and snapshot changes and returns what to
//! write. It tracks, per type, the version of every resource the client holds, so each
//! response carries exactly what changed and what was removed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;

use crate::known::{InScope, Known};
use crate::names::{self, Names};
use crate::resource::Resource;
use crate::small_map::SmallMap;
use crate::snapshot::{Snapshot, TypeSet};
use crate::stream::{
    self, Event, FlowControl, MAX_NAMES_PER_TYPE, MAX_TYPES_PER_STREAM, Nack, NodeInfo, ProtocolError, ResourceError,
    Scope, TypeStatus,
};
use crate::types;

/// A `DeltaDiscoveryResponse` to write.
#[derive(Debug, Clone)]
pub struct DeltaResponse {
    pub type_url: Arc<str>,
    /// For debugging only (DELTA-8); a hash of what the client now holds.
    pub system_version: Arc<str>,
    pub nonce: Arc<str>,
    /// Shared with the node's rollout while the response is unanswered: one reference count
    /// moves per response, not one per resource (each shared by every stream of the group).
    pub resources: Arc<[Arc<Resource>]>,
    pub removed: Arc<[Arc<str>]>,
    /// The set this response was worked out from (not sent): what the client holds once it
    /// applies it, when it subscribes to all of it.
    pub served: Option<Arc<TypeSet>>,
    /// Set when the client held exactly this set before the response and holds exactly
    /// `served` after it (not sent): a rollout that saw it hold this set then knows what it
    /// holds without working it out name by name.
    pub from: Option<Arc<TypeSet>>,
    /// Subscribed names it removes because they do not exist, each with why (gRFC A88: a
    /// client treats these as it treats `removed`, and can say why).
    pub errors: Vec<ResourceError>,
}

/// A name's entry in `known` before a response (`None`: the client did not know the name).
type PriorVersion = Option<Option<u128>>;

#[derive(Debug, Default)]
struct TypeState {
    started: bool,
    wildcard: bool,
    /// Shared with the node's rollout and every stream asking for the same names.
    explicit: Names,
    /// What the client holds: `Some(hash)` of the name and version it holds (as
    /// [`Resource::entry_hash`]: comparing and summing them needs no string, and touches no
    /// reference count shared with every other stream), or `None` when it was told the name
    /// does not exist. Names absent here are unknown to the client.
    known: Known,
    /// The type set `known` was last synced to, since the subscription last changed: an
    /// unchanged type is skipped without walking it (same sum), and a changed one is walked
    /// over the names that changed since ([`TypeSet::changed_entries`]), not every name.
    synced: Option<Arc<TypeSet>>,
    pending: bool,
    /// Answer the first request even when there is nothing to send, so the client's
    /// initial fetch completes.
    answer_empty: bool,
    nonce_sent: Option<Arc<str>>,
    version_sent: Option<Arc<str>>,
    /// Shared with `version_sent`: an ACK allocates nothing.
    version_acked: Option<Arc<str>>,
    /// Boxed: most types are never rejected, and this is per stream and type.
    last_nack: Option<Box<Nack>>,
    /// What `known` held, before the last response, for the names it changed: a NACK puts
    /// them back, since the client applied none of it.
    prior: Vec<(Arc<str>, PriorVersion)>,
    /// A digest of the response the client rejected: the same diff is not sent again.
    rejected: Option<Digest>,
    /// The digest of the last response sent.
    sent_digest: Option<Digest>,
    /// The subscription changed since [`subscription_changes`] last looked.
    sub_changed: bool,
    /// One response in flight at a time (design 022).
    flow: FlowControl,
}

/// A response's digest, stored without `u128`'s 16-byte alignment (kept twice per stream and
/// type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Digest([u8; 16]);

impl Digest {
    fn of(sum: u128) -> Digest {
        Digest(sum.to_le_bytes())
    }
}

/// One Delta stream's state.
#[derive(Debug)]
pub struct DeltaStream {
    scope: Scope,
    node: Option<NodeInfo>,
    types: SmallMap<Arc<str>, TypeState>,
    next_nonce: u64,
}

impl DeltaStream {
    pub fn new(scope: Scope) -> Self {
        DeltaStream { scope, node: None, types: SmallMap::default(), next_nonce: 0 }
    }

    pub fn node(&self) -> Option<&NodeInfo> {
        self.node.as_ref()
    }

    /// Applies one request; responses come from the next [`poll`](Self::poll).
    pub fn handle_request(
        &mut self,
        req: &DeltaDiscoveryRequest,
        now: SystemTime,
    ) -> Result<Vec<Event>, ProtocolError> {
        stream::node_info(&mut self.node, req.node.as_ref())?;
        let type_url = stream::check_type(&self.scope, &req.type_url)?;
        if req.resource_names_subscribe.len() + req.initial_resource_versions.len() > MAX_NAMES_PER_TYPE {
            return Err(ProtocolError::TooManyNames(type_url.to_owned()));
        }
        if !self.types.contains_key(type_url) && self.types.len() >= MAX_TYPES_PER_STREAM {
            return Err(ProtocolError::TooManyTypes);
        }
        let (type_url, t) = self.types.slot(type_url, || types::shared(type_url));
        let type_url = type_url.clone();
        if t.explicit.len() + req.resource_names_subscribe.len() > MAX_NAMES_PER_TYPE {
            return Err(ProtocolError::TooManyNames(type_url.to_string()));
        }
        let mut events = Vec::new();

        // DELTA-1: the nonce pairs an ACK or NACK with a response.
        if !req.response_nonce.is_empty() {
            if t.nonce_sent.as_deref() == Some(req.response_nonce.as_str()) {
                // The answer to the response out: the type may be sent again (design 022).
                t.flow.answered();
                if let Some(status) = &req.error_detail {
                    let nack = Nack {
                        version_kept: t.version_acked.as_deref().unwrap_or_default().to_owned(),
                        nonce: req.response_nonce.clone(),
                        message: stream::nack_message(&status.message),
                        at: now,
                    };
                    events.push(Event::Nack {
                        type_url: type_url.clone(),
                        nonce: nack.nonce.clone(),
                        message: nack.message.clone(),
                    });
                    t.last_nack = Some(Box::new(nack));
                    // The client applied none of it: what it holds is what it held before.
                    for (name, before) in std::mem::take(&mut t.prior) {
                        t.known.set(&name, before, InScope { wildcard: t.wildcard, explicit: &t.explicit });
                    }
                    t.rejected = t.sent_digest.take();
                    t.synced = None;
                } else {
                    // Only a rejection needs what the client held before.
                    t.prior = Vec::new();
                    t.version_acked = t.version_sent.clone();
                    events.push(Event::Ack {
                        type_url: type_url.clone(),
                        version: t.version_acked.as_deref().unwrap_or_default().to_owned(),
                        nonce: req.response_nonce.clone(),
                    });
                }
            } else {
                // DELTA-6: a stale nonce pairs with nothing, but the subscription changes
                // below are honoured all the same.
                events.push(Event::Stale { type_url: type_url.clone(), nonce: req.response_nonce.clone() });
            }
        }

        let first = !t.started;
        t.started = true;
        if first {
            // DELTA-3: what the client already holds (after a reconnect).
            for (name, version) in &req.initial_resource_versions {
                let held = Some(Some(crate::snapshot::pair_hash(name, version)));
                t.known.set(&name.as_str().into(), held, InScope { wildcard: t.wildcard, explicit: &t.explicit });
            }
            if !req.initial_resource_versions.is_empty() {
                let holds = req.initial_resource_versions.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
                events.push(Event::Resumed { type_url: type_url.clone(), holds: stream::Holds::Resources(holds) });
            }
            // DELTA-2: a stream that never subscribed a name is a legacy wildcard.
            if req.resource_names_subscribe.is_empty() && types::is_full_state(&type_url) {
                t.wildcard = true;
            }
        }
        let mut changed = first;
        if !req.resource_names_subscribe.is_empty() || !req.resource_names_unsubscribe.is_empty() {
            // What the base covers is about to change.
            t.known.flatten(InScope { wildcard: t.wildcard, explicit: &t.explicit });
        }
        for name in &req.resource_names_subscribe {
            changed = true;
            if name == "*" {
                t.wildcard = true;
                continue;
            }
            let name: Arc<str> = name.as_str().into();
            // DELTA-5: every subscribed name is answered, even if the client seems current;
            // except, on the first request, what it declared in initial_resource_versions.
            if !(first && req.initial_resource_versions.contains_key(name.as_ref())) {
                t.known.set(&name, None, InScope { wildcard: t.wildcard, explicit: &t.explicit });
            }
            Arc::make_mut(&mut t.explicit).insert(name);
        }
        for name in &req.resource_names_unsubscribe {
            changed = true;
            if name == "*" {
                t.wildcard = false;
                // The client drops what only the wildcard brought; forget it without removals.
                let explicit = &t.explicit;
                t.known.retain(|n, _| explicit.contains(n));
                continue;
            }
            // DELTA-7: unknown names are harmless. With the wildcard still on, the client must
            // learn the resource's state again, so forget it and let the diff answer.
            Arc::make_mut(&mut t.explicit).remove(name.as_str());
            t.known.set(&name.as_str().into(), None, InScope { wildcard: t.wildcard, explicit: &t.explicit });
        }
        if first {
            t.answer_empty = t.wildcard && req.initial_resource_versions.is_empty();
        }
        if changed {
            t.explicit = names::intern(std::mem::replace(&mut t.explicit, names::empty()));
            t.synced = None;
            t.pending = true;
            t.sub_changed = true;
        }
        Ok(events)
    }

    /// Marks every subscribed type for evaluation after the snapshot changed (at `now`); how
    /// many of them await the answer to a response, and will have the change merged into the
    /// next (design 022).
    pub fn snapshot_changed(&mut self, now: SystemTime) -> usize {
        let mut merged = 0;
        for t in self.types.values_mut() {
            t.pending = true;
            merged += usize::from(t.flow.changed(now));
        }
        merged
    }

    /// Flow control over the stream's types (design 022).
    pub fn flow(&self) -> stream::Flow {
        stream::Flow::of(self.types.values().map(|t| &t.flow))
    }

    /// The responses owed now, given what the node's group is served.
    pub fn poll(&mut self, snapshot: &Snapshot) -> Vec<DeltaResponse> {
        self.poll_held(snapshot, &[])
    }

    /// [`poll`](Self::poll), sending nothing for the types in `hold` (make-before-break holds
    /// listeners and routes back until the clusters they need are acknowledged). A held
    /// type stays pending and is evaluated once it is no longer held.
    pub fn poll_held(&mut self, snapshot: &Snapshot, hold: &[&str]) -> Vec<DeltaResponse> {
        self.poll_with(snapshot, hold, None)
    }

    /// [`poll_held`](Self::poll_held), saying why, for each name it removes that the client
    /// subscribed to by name and that exists neither in `snapshot` nor in `target` (what the
    /// node's group is served): gRFC A88's `resource_errors` (DELTA-4 already answers such a
    /// name in `removed`). `None`: say nothing more.
    pub fn poll_with(&mut self, snapshot: &Snapshot, hold: &[&str], target: Option<&Snapshot>) -> Vec<DeltaResponse> {
        let mut out = Vec::new();
        if !self.types.values().any(|t| t.pending) {
            return out; // most answers: nothing to look at, nothing to sort
        }
        // Dependencies first (ORDER-2): see types::send_rank.
        for (type_url, t) in types::in_send_order(self.types.iter_mut()) {
            // A type awaiting the answer to its last response stays pending: what changes
            // meanwhile goes out, merged, once the answer comes (design 022).
            if !t.pending || t.flow.awaiting() || hold.contains(&type_url.as_ref()) {
                continue;
            }
            t.pending = false;
            t.flow.worked_out();
            let set = snapshot.get(type_url.as_ref());
            let only_wildcard = t.wildcard && t.explicit.is_empty();
            if let Some((was, now)) = t.synced.as_ref().zip(set)
                && was.sum() == now.sum()
            {
                // The same content: keep the set now served, so one a rollout has let go of
                // (a node's own gated set) is not kept alive by its streams.
                if !Arc::ptr_eq(was, now) {
                    t.known.same_content(was, now);
                    t.synced = Some(now.clone());
                }
                continue;
            }
            // `known` is `synced` for every name in scope: only the names that changed since
            // need a look, and the walk of what changed brings each one's entry before and after.
            let was = t.synced.clone();
            let since = was.as_ref().zip(set).map(|(was, now)| was.changed_entries(now));
            let scope = InScope { wildcard: t.wildcard, explicit: &t.explicit };
            let (walked, advance) = match &since {
                Some(changes) => (walk_changes(&t.known, scope, changes), true),
                None => (walk_all(&mut t.known, scope, set), false),
            };
            let Walked { resources, removed, prior, now, sums } = walked;
            let digest = (!resources.is_empty() || !removed.is_empty()).then(|| {
                let removals = removed.iter().map(|n| crate::snapshot::pair_hash(n, ""));
                Digest::of(resources.iter().map(|r| r.entry_hash()).chain(removals).fold(0u128, u128::wrapping_add))
            });
            if digest.is_some() && digest == t.rejected {
                // Exactly what the client rejected: it keeps what it has until something changes.
                if !advance {
                    for (name, before) in prior {
                        t.known.set(&name, before, scope);
                    }
                }
                continue;
            }
            // Whether the client held all of `was` (read before `known` moves; only the walk
            // over what changed has left it unmoved so far).
            let whole_before = was.as_ref().filter(|w| advance && w.sum() == t.known.sum()).cloned();
            t.synced = set.cloned();
            // The client now holds the set as it is over its subscription: share it.
            if advance {
                t.known.advance(set, now.into_iter(), sums);
            } else {
                t.known.rebase(set);
            }

            // What the client holds, as one version: its entries are hashed already.
            let system_version = |t: &TypeState| -> Arc<str> {
                match (only_wildcard, set) {
                    (true, Some(s)) => s.version().clone(),
                    _ => crate::snapshot::sum_version(t.known.sum()).into(),
                }
            };
            let answer_empty = std::mem::take(&mut t.answer_empty);
            if resources.is_empty() && removed.is_empty() && !answer_empty {
                if t.version_acked.is_none() && t.nonce_sent.is_none() && !t.known.is_empty(scope) {
                    // DELTA-3: a reconnecting client already held all of this; it is as good
                    // as acknowledged, and /debug/nodes should say so.
                    t.version_acked = Some(system_version(t));
                }
                continue;
            }
            let system_version = system_version(t);
            t.prior = prior;
            t.rejected = None;
            t.sent_digest = digest;
            self.next_nonce += 1;
            let nonce: Arc<str> = self.next_nonce.to_string().into();
            t.nonce_sent = Some(nonce.clone());
            t.flow.sent();
            t.version_sent = Some(system_version.clone());
            let served = set.cloned();
            // Whole before and after (equal sums: what is held of a set's names, and nothing
            // else, sums to the set's sum).
            let from = whole_before.filter(|_| served.as_ref().is_some_and(|s| s.sum() == t.known.sum()));
            let errors = match target {
                Some(target) if !removed.is_empty() => {
                    let explicit = removed.iter().filter(|n| t.explicit.contains(*n));
                    stream::absent(type_url, explicit, set.map(|s| &**s), target.get(type_url).map(|s| &**s)).0
                }
                _ => Vec::new(),
            };
            out.push(DeltaResponse {
                errors,
                type_url: type_url.clone(),
                system_version,
                nonce,
                resources: resources.into(),
                removed: removed.into(),
                served,
                from,
            });
        }
        out
    }

    /// Forgets what the client was sent, so the next poll sends everything subscribed again
    /// (a rollout that waits for an answer the stream would otherwise never prompt).
    pub fn resync(&mut self) {
        for t in self.types.values_mut() {
            t.known.forget_held();
            t.synced = None;
            t.rejected = None;
            t.pending = true;
        }
    }

    /// The subscriptions that changed since the last call: per type, whether it is a
    /// wildcard and the names it asks for.
    pub fn subscription_changes(&mut self) -> Vec<(Arc<str>, bool, Names)> {
        self.types
            .iter_mut()
            .filter_map(|(t, s)| std::mem::take(&mut s.sub_changed).then_some((t, s)))
            .map(|(t, s)| (t.clone(), s.wildcard, s.explicit.clone()))
            .collect()
    }

    /// Per-type state for `/debug/nodes`.
    pub fn status(&self) -> Vec<TypeStatus> {
        self.types
            .iter()
            .map(|(type_url, t)| TypeStatus {
                type_url: type_url.to_string(),
                wildcard: t.wildcard,
                subscribed_names: t.explicit.len(),
                version_sent: t.version_sent.as_deref().map(str::to_owned),
                nonce_sent: t.nonce_sent.as_deref().map(str::to_owned),
                version_acked: t.version_acked.as_deref().map(str::to_owned),
                last_nack: t.last_nack.as_deref().cloned(),
                awaiting_answer: t.flow.awaiting(),
                merged: t.flow.merged(),
                owed_since: t.flow.owed_since(),
            })
            .collect()
    }
}

/// What a walk over a type's names worked out: what to send, and what the client held of
/// each name it changes (a NACK puts that back).
struct Walked<'a> {
    resources: Vec<Arc<Resource>>,
    removed: Vec<Arc<str>>,
    prior: Vec<(Arc<str>, PriorVersion)>,
    /// What the client holds of each name sent, once it applies the response.
    now: Vec<(&'a Arc<str>, Option<Option<u128>>)>,
    /// The hashes it then holds in addition, and no longer holds.
    sums: (u128, u128),
}

/// DELTA-4 over the names whose entries changed between the set the client is in step with
/// and the one served now (`changes`: each name with its entry before and after): the
/// client's `known` is left as it is, for [`Known::advance`] once the response is settled.
fn walk_changes<'a>(known: &Known, scope: InScope, changes: &[crate::snapshot::ChangedEntry<'a>]) -> Walked<'a> {
    // Sized for every change at once: under churn each response carries most of them.
    let n = changes.len();
    let (resources, prior, now) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let mut w = Walked { resources, removed: Vec::new(), prior, now, sums: (0, 0) };
    // Held names no longer in scope (deleted, for a wildcard) go after what is sent.
    let mut gone = Vec::new();
    for &(name, was, want) in changes {
        let before = known.get_beside(name, was, scope);
        let in_scope = (scope.wildcard && want.is_some()) || scope.explicit.contains(name.as_ref());
        let now = in_scope.then(|| want.map(|r| r.entry_hash()));
        if before == now {
            continue;
        }
        if let Some(Some(h)) = before {
            w.sums.1 = w.sums.1.wrapping_add(h);
        }
        if let Some(Some(h)) = now {
            w.sums.0 = w.sums.0.wrapping_add(h);
        }
        w.now.push((name, now));
        if !in_scope {
            gone.push((name, before));
            continue;
        }
        match want {
            Some(r) => w.resources.push(r.clone()),
            // A subscribed name that does not exist: say so (DELTA-4).
            None => w.removed.push(name.clone()),
        }
        w.prior.push((name.clone(), before));
    }
    for (name, before) in gone {
        if let Some(Some(_)) = before {
            w.removed.push(name.clone());
        }
        w.prior.push((name.clone(), before));
    }
    w
}

/// DELTA-4 over every name in scope (the client's first response of the type, or one after
/// its subscription changed): `known` is moved name by name.
fn walk_all<'a>(known: &mut Known, scope: InScope, set: Option<&Arc<TypeSet>>) -> Walked<'a> {
    let in_scope = |n: &str| (scope.wildcard && set.is_some_and(|s| s.get(n).is_some())) || scope.explicit.contains(n);
    // Borrowed: the names are shared by every stream of the group. Only a wildcard with names
    // besides needs merging; usually it is one or the other.
    let desired: Vec<(&Arc<str>, Option<&Arc<Resource>>)> = match (scope.wildcard, scope.explicit.is_empty()) {
        (true, true) => set.into_iter().flat_map(|s| s.resources()).map(|r| (r.name(), Some(r))).collect(),
        (false, _) => scope.explicit.iter().map(|n| (n, set.and_then(|s| s.get(n)))).collect(),
        (true, false) => {
            let mut all: BTreeMap<&str, (&Arc<str>, Option<&Arc<Resource>>)> =
                set.into_iter().flat_map(|s| s.resources()).map(|r| (r.name().as_ref(), (r.name(), Some(r)))).collect();
            for n in scope.explicit.iter() {
                all.entry(n).or_insert_with(|| (n, set.and_then(|s| s.get(n))));
            }
            all.into_values().collect()
        }
    };
    let mut resources = Vec::new();
    let mut removed = Vec::new();
    let mut prior = Vec::new();
    for (name, want) in &desired {
        let now = want.map(|r| r.entry_hash());
        let before = known.get(name, scope);
        if before == Some(now) {
            continue;
        }
        known.set(name, Some(now), scope);
        match want {
            Some(r) => resources.push((*r).clone()),
            // A subscribed name that does not exist: say so (DELTA-4).
            None => removed.push((*name).clone()),
        }
        prior.push(((*name).clone(), before));
    }
    // Held names no longer in scope: after the client reconnected, ones it should no longer
    // hold.
    let gone: Vec<Arc<str>> = known.names(scope).filter(|n| !in_scope(n)).cloned().collect();
    for name in gone {
        let before = known.set(&name, None, scope);
        if let Some(Some(_)) = &before {
            removed.push(name.clone());
        }
        prior.push((name, before));
    }
    Walked { resources, removed, prior, now: Vec::new(), sums: (0, 0) }
}

#[cfg(test)]
#[path = "delta_tests.rs"]
mod tests;

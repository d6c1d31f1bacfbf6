//! The State-of-the-World stream state machine (rules SOTW-1..12).
//!
//! No sockets, no async: the server feeds it requests and snapshot changes and writes
//! out what [`SotwStream::poll`] returns. One instance per gRPC stream, ADS or per-type.
//!
//! ```
//! use xdst_core::{sotw::SotwStream, stream::Scope, snapshot::Snapshot, types};
//! use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
//! use envoy_types::pb::envoy::config::core::v3::Node;
//!
//! let mut s = SotwStream::new(Scope::Aggregated);
//! let req = DiscoveryRequest {
//!     type_url: types::CLUSTER.into(),
//!     node: Some(Node { id: "n1".into(), ..Default::default() }),
//!     ..Default::default()
//! };
//! s.handle_request(&req, std::time::SystemTime::now()).unwrap();
//! let out = s.poll(&Snapshot::default());
//! assert_eq!(out.len(), 1); // wildcard CDS gets the (empty) full state at once
//! ```

use std::sync::Arc;
use std::time::SystemTime;

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;

use crate::names::{self, Names};
use crate::resource::Resource;
use crate::small_map::{SmallMap, SmallSet};
use crate::snapshot::{Snapshot, TypeSet};
use crate::stream::{
    self, Event, FlowControl, MAX_NAMES_PER_TYPE, MAX_TYPES_PER_STREAM, Nack, NodeInfo, ProtocolError, ResourceError,
    Scope, TypeStatus,
};
use crate::types;

/// The resources of one response.
#[derive(Debug, Clone)]
pub enum Resources {
    /// Every resource of the type, shared with the snapshot: no per-stream copy.
    All(Arc<TypeSet>),
    Some(Vec<Arc<Resource>>),
}

impl Resources {
    pub fn iter(&self) -> Box<dyn Iterator<Item = &Arc<Resource>> + '_> {
        match self {
            Resources::All(set) => Box::new(set.resources()),
            Resources::Some(v) => Box::new(v.iter()),
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Resources::All(set) => set.len(),
            Resources::Some(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A `DiscoveryResponse` to write (SOTW-2).
#[derive(Debug, Clone)]
pub struct SotwResponse {
    pub type_url: Arc<str>,
    pub version: Arc<str>,
    pub nonce: Arc<str>,
    pub resources: Resources,
    /// Subscribed names that do not exist (gRFC A88); empty almost always.
    pub errors: Vec<ResourceError>,
}

#[derive(Debug, Default)]
struct TypeState {
    wildcard: bool,
    /// Shared with the node's rollout and every stream asking for the same names.
    names: Names,
    /// SOTW-7: once a stream names a resource, an empty list means "nothing".
    named_ever: bool,
    /// Evaluate this type on the next poll.
    pending: bool,
    /// Respond on the next poll even if nothing changed (first request, or a new
    /// subscription of a full-state type whose answer may be "none of these exist").
    force: bool,
    version_sent: Option<Arc<str>>,
    nonce_sent: Option<Arc<str>>,
    /// For RDS/EDS-like types: the version of each subscribed resource last sent (and
    /// accepted, or not answered yet).
    sent: SmallMap<Arc<str>, Arc<str>>,
    /// For RDS/EDS-like types: the version of the list the client rejected. The client holds
    /// none of it, so what it needs is sent again, but never that same list (SOTW-5).
    rejected: Option<Arc<str>>,
    /// Usually the same `Arc` as `version_sent`: an ACK allocates nothing.
    version_acked: Option<Arc<str>>,
    /// The nonce of the response last acknowledged.
    nonce_acked: Option<Arc<str>>,
    /// Boxed: most types are never rejected, and this is per stream and type.
    last_nack: Option<Box<Nack>>,
    /// The subscription changed since [`subscription_changes`] last looked.
    sub_changed: bool,
    /// One response in flight at a time (design 022).
    flow: FlowControl,
    /// gRFC A88: a digest of the subscribed names last reported absent, 0 for none.
    absent_reported: u64,
}

/// One SotW stream's state.
#[derive(Debug)]
pub struct SotwStream {
    scope: Scope,
    node: Option<NodeInfo>,
    types: SmallMap<Arc<str>, TypeState>,
    next_nonce: u64,
}

impl SotwStream {
    pub fn new(scope: Scope) -> Self {
        SotwStream { scope, node: None, types: SmallMap::default(), next_nonce: 0 }
    }

    pub fn node(&self) -> Option<&NodeInfo> {
        self.node.as_ref()
    }

    /// Applies one request. Responses come from the next [`poll`](Self::poll), so several
    /// queued requests for one type are answered once, for the latest (SOTW-6).
    pub fn handle_request(&mut self, req: &DiscoveryRequest, now: SystemTime) -> Result<Vec<Event>, ProtocolError> {
        stream::node_info(&mut self.node, req.node.as_ref())?; // SOTW-1
        let type_url = stream::check_type(&self.scope, &req.type_url)?;
        if req.resource_names.len() > MAX_NAMES_PER_TYPE {
            return Err(ProtocolError::TooManyNames(type_url.to_owned()));
        }
        if !self.types.contains_key(type_url) && self.types.len() >= MAX_TYPES_PER_STREAM {
            return Err(ProtocolError::TooManyTypes);
        }
        let (type_url, t) = self.types.slot(type_url, || types::shared(type_url));
        let type_url = type_url.clone();
        let full_state = types::is_full_state(&type_url);
        let mut events = Vec::new();

        if !req.response_nonce.is_empty() {
            // SOTW-4: only the latest nonce of this type counts; anything else is stale.
            if t.nonce_sent.as_deref() != Some(req.response_nonce.as_str()) {
                events.push(Event::Stale { type_url, nonce: req.response_nonce.clone() });
                return Ok(events);
            }
            // The answer to the response out: the type may be sent again (design 022).
            t.flow.answered();
            // SOTW-3: error_detail marks a NACK; version_info stays at the last accepted.
            if let Some(status) = &req.error_detail {
                let nack = Nack {
                    version_kept: req.version_info.clone(),
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
                if !full_state {
                    t.sent.clear();
                    t.rejected = t.version_sent.clone();
                }
            } else if t.nonce_acked.as_deref() == Some(req.response_nonce.as_str()) && !full_state {
                // The same response acknowledged again: the client asks for it once more. Envoy
                // does this for endpoints when it replaces a cluster, and the new cluster warms
                // (holding the CDS ACK) until it gets them; so send them again, even unchanged.
                t.sent.clear();
            } else {
                t.version_acked = Some(match &t.version_sent {
                    Some(sent) if **sent == *req.version_info => sent.clone(),
                    _ => req.version_info.as_str().into(),
                });
                t.nonce_acked = t.nonce_sent.clone();
                events.push(Event::Ack {
                    type_url: type_url.clone(),
                    version: req.version_info.clone(),
                    nonce: req.response_nonce.clone(),
                });
            }
        } else {
            // A first request for this type (or a client restarting it). SOTW-12: it reports
            // what it holds; a full-state wildcard already at our version needs nothing.
            t.force = true;
            t.sent.clear();
            if !req.version_info.is_empty() {
                let version: Arc<str> = req.version_info.as_str().into();
                t.version_acked = Some(version.clone());
                t.version_sent = Some(version);
                events.push(Event::Resumed {
                    type_url: type_url.clone(),
                    holds: stream::Holds::Version(req.version_info.clone()),
                });
            }
        }

        // SOTW-7: the subscription this request asks for. Most requests (every ACK) repeat
        // the names already subscribed: tell that without building a set.
        if !t.wildcard && same_names(&req.resource_names, &t.names) {
            t.pending = true;
            return Ok(events);
        }
        let mut wildcard = false;
        let mut names: SmallSet<Arc<str>> = SmallSet::default();
        for n in &req.resource_names {
            if n == "*" {
                wildcard = true;
            } else {
                names.insert(Arc::<str>::from(n.as_str()));
            }
        }
        if req.resource_names.is_empty() && !t.named_ever && full_state {
            wildcard = true; // legacy wildcard: this stream never named a resource
        }
        if !names.is_empty() {
            t.named_ever = true;
        }
        if wildcard != t.wildcard || names != *t.names {
            if full_state {
                t.force = true;
            }
            // SOTW-9: a name subscribed again must be sent again even if unchanged.
            t.sent.retain(|n, _| names.contains(n));
            t.wildcard = wildcard;
            t.names = names::intern(Arc::new(names));
            t.sub_changed = true;
        }
        if !t.wildcard && t.names.is_empty() && t.version_sent.is_none() {
            t.sub_changed = true; // a first request: report even an empty subscription
        }
        t.pending = true;
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
    pub fn poll(&mut self, snapshot: &Snapshot) -> Vec<SotwResponse> {
        self.poll_held(snapshot, &[])
    }

    /// [`poll`](Self::poll), sending nothing for the types in `hold` (make-before-break holds
    /// listeners and routes back until the clusters they need are acknowledged). A held
    /// type stays pending and is evaluated once it is no longer held.
    pub fn poll_held(&mut self, snapshot: &Snapshot, hold: &[&str]) -> Vec<SotwResponse> {
        self.poll_with(snapshot, hold, None)
    }

    /// [`poll_held`](Self::poll_held), telling the client which names it subscribes to exist
    /// neither in `snapshot` nor in `target` (what the node's group is served): gRFC A88's
    /// `resource_errors`, sent when that list changes. `None`: tell nothing.
    pub fn poll_with(&mut self, snapshot: &Snapshot, hold: &[&str], target: Option<&Snapshot>) -> Vec<SotwResponse> {
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
            let force = std::mem::take(&mut t.force);
            let set = snapshot.get(type_url);
            let full_state = types::is_full_state(type_url);
            // What a named subscription finds of its names, and the names the offer lacks: of
            // those, the ones the target lacks too do not exist (gRFC A88).
            let (named, unoffered) = if t.wildcard { (Vec::new(), Vec::new()) } else { pick(&t.names, set) };
            let (errors, absent) = match target {
                Some(target) if !unoffered.is_empty() => {
                    stream::absent(type_url, unoffered.iter(), None, target.get(type_url).map(|s| &**s))
                }
                _ => (Vec::new(), 0),
            };
            let errors_changed = absent != t.absent_reported;
            let (version, resources) = if full_state {
                // SOTW-8: the full state of what is subscribed.
                match (t.wildcard, set) {
                    (true, Some(set)) => (set.version().clone(), Resources::All(set.clone())),
                    (true, None) => (empty_version(), Resources::Some(Vec::new())),
                    (false, _) => (version_of(&named, set), Resources::Some(named)),
                }
            } else {
                // SOTW-9/10: what is subscribed and exists; names that do not exist yet are
                // remembered and sent when they appear, without holding back the others. Only
                // what the client does not hold as it is now goes out (SOTW-9: it keeps a
                // requested resource a response leaves out), so a change to one of many route
                // configurations is one resource on the wire and one for the client to apply;
                // the version is that of everything it then holds.
                let v: Vec<Arc<Resource>> = match (t.wildcard, set) {
                    (true, Some(set)) => set.resources().cloned().collect(),
                    _ => named,
                };
                let fresh: Vec<Arc<Resource>> =
                    v.iter().filter(|r| t.sent.get(r.name()) != Some(r.version())).cloned().collect();
                if fresh.is_empty() && !errors_changed {
                    continue;
                }
                let version = version_of(&v, set);
                if t.rejected.as_ref() == Some(&version) {
                    continue;
                }
                t.rejected = None;
                t.sent = v.iter().map(|r| (r.name().clone(), r.version().clone())).collect();
                (version, Resources::Some(fresh))
            };
            // SOTW-5: an unchanged set is not sent again (this is also what keeps a NACKed
            // set from being re-sent until something changes). For RDS/EDS-like types the
            // per-name comparison above already decided.
            if full_state && t.version_sent.as_ref() == Some(&version) {
                if !force && !errors_changed {
                    continue;
                }
                if t.nonce_sent.is_none() && t.wildcard {
                    // SOTW-12: a reconnecting client already holds exactly this wildcard state.
                    continue;
                }
            }
            self.next_nonce += 1;
            let nonce: Arc<str> = self.next_nonce.to_string().into();
            t.version_sent = Some(version.clone());
            t.nonce_sent = Some(nonce.clone());
            t.flow.sent();
            t.absent_reported = absent;
            out.push(SotwResponse { type_url: type_url.clone(), version, nonce, resources, errors });
        }
        out
    }

    /// Forgets what was sent, so the next poll sends every subscribed type in full again
    /// (a rollout that waits for an answer the stream would otherwise never prompt).
    pub fn resync(&mut self) {
        for t in self.types.values_mut() {
            t.sent.clear();
            t.rejected = None;
            t.version_sent = None;
            t.force = true;
            t.pending = true;
        }
    }

    /// The subscriptions that changed since the last call: per type, whether it is a
    /// wildcard and the names it asks for.
    pub fn subscription_changes(&mut self) -> Vec<(Arc<str>, bool, Names)> {
        self.types
            .iter_mut()
            .filter_map(|(t, s)| std::mem::take(&mut s.sub_changed).then_some((t, s)))
            .map(|(t, s)| (t.clone(), s.wildcard, s.names.clone()))
            .collect()
    }

    /// Per-type state for `/debug/nodes`.
    pub fn status(&self) -> Vec<TypeStatus> {
        self.types
            .iter()
            .map(|(type_url, t)| TypeStatus {
                type_url: type_url.to_string(),
                wildcard: t.wildcard,
                subscribed_names: t.names.len(),
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

/// The resources of `names` that `set` has, and the names it lacks (in one pass).
fn pick(names: &Names, set: Option<&Arc<TypeSet>>) -> (Vec<Arc<Resource>>, Vec<Arc<str>>) {
    let (mut found, mut lacking) = (Vec::new(), Vec::new());
    for n in names.iter() {
        match set.and_then(|s| s.get(n)) {
            Some(r) => found.push(r.clone()),
            None => lacking.push(n.clone()),
        }
    }
    (found, lacking)
}

/// Whether `asked` names exactly `held` (each once): most requests (every ACK) repeat the
/// subscription, and this tells it without building a set or a string (an Envoy's endpoints
/// subscription can be thousands of names, repeated in each ACK).
fn same_names(asked: &[String], held: &SmallSet<Arc<str>>) -> bool {
    if asked.is_empty() || asked.len() != held.len() {
        return false;
    }
    let mut asked: Vec<&str> = asked.iter().map(String::as_str).collect();
    if !asked.is_sorted() {
        asked.sort_unstable();
    }
    asked.iter().copied().eq(held.iter().map(|n| n.as_ref()))
}

/// The version of `v`, resources of `set` with distinct names: the set's own when `v` is
/// all of it (made once for every stream), else worked out.
fn version_of(v: &[Arc<Resource>], set: Option<&Arc<TypeSet>>) -> Arc<str> {
    match set {
        Some(set) if set.len() == v.len() => set.version().clone(),
        _ => list_version(v),
    }
}

fn list_version(v: &[Arc<Resource>]) -> Arc<str> {
    crate::snapshot::list_version(v).into()
}

fn empty_version() -> Arc<str> {
    crate::snapshot::list_version([]).into()
}

#[cfg(test)]
#[path = "sotw_tests.rs"]
mod tests;

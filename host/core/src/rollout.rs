//! One node's rollout: the make-before-break [`plan`](crate::plan::plan) driven by what the
//! node's streams send and what the node answers, shared by all of a node's streams (ADS, or
//! separate LDS/RDS/CDS/EDS streams alike).
//!
//! Sans-IO like the stream machines: the server reports responses sent, ACKs and NACKs,
//! subscriptions and new targets, passes the time in, and serves [`Rollout::offer`].
//!
//! - **ACKs** move the node's acknowledged state: a SotW response is what the node holds of
//!   its type afterwards, a Delta response is applied as a patch.
//! - **A new target** midway restarts the plan from what the node has acknowledged.
//! - **A NACK** stops the plan: nothing more of the four types is sent (the node keeps its
//!   last good state, as it does after rejecting) until a change gives the rejected type
//!   something else to send.
//! - **Silence**: a step that waits longer than the grace period proceeds as if the node had
//!   acknowledged what it was sent, so a client that never ACKs is not stuck forever.
//! - **Clients that subscribe by name** (proxyless gRPC asks for its listener and everything
//!   after it by name) are served the target directly: they fetch a cluster only when a
//!   route names it, so there is nothing to order and waiting would only block them.
//! - A type no stream of the node subscribes to does not gate the plan.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::node_holds::{Analysis, HeldStatus, NodeHolds};
use crate::plan::{Node, SharedPlan, Step, Wanted, names_held, plan_lean};
use crate::resource::Resource;
use crate::small_map::SmallMap;
use crate::snapshot::{Change, Snapshot, TypeSet};
use crate::stream::Holds;
use crate::types::{self, CLUSTER, CORE_TYPES, ENDPOINT, LISTENER, ROUTE};

/// How rollouts behave; one per server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RolloutConfig {
    /// How long a step may wait for an acknowledgement before it proceeds without one.
    pub grace: Duration,
    /// Serve every node its target at once, unordered (for demonstrations and tests).
    pub unordered: bool,
    /// How long clusters that a removed or changed listener named are kept after the node
    /// acknowledges the change: Envoy drains the old listener's connections for its
    /// `--drain-time-s` (600 s by default), serving them with the old routes.
    pub drain: Duration,
    /// `--on-nack hold`: what a node rejects is held back at that node alone and the rest of
    /// the change goes on ([`crate::node_holds`]); otherwise a rejection stops its plan.
    pub hold_at_node: bool,
    /// How long a document held at a node waits before it is sent again (doubling with each
    /// repeated rejection).
    pub retry: Duration,
}

/// `--nack-retry`'s default.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(30);

/// Envoy's default `--drain-time-s`.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(600);

impl Default for RolloutConfig {
    fn default() -> Self {
        RolloutConfig {
            grace: Duration::from_secs(10),
            unordered: false,
            drain: DEFAULT_DRAIN,
            hold_at_node: true,
            retry: DEFAULT_RETRY,
        }
    }
}

/// What a node's streams serve now.
#[derive(Debug, Clone)]
pub struct Offer {
    pub snapshot: Arc<Snapshot>,
    /// Types nothing is sent for until the plan reaches them.
    pub hold: &'static [&'static str],
    /// Raised when the streams should forget what they sent and send the offer again in
    /// full (see [`Rollout::tick`]).
    pub resync: u64,
}

impl Offer {
    fn same(&self, other: &Offer) -> bool {
        self.hold == other.hold
            && self.resync == other.resync
            && (Arc::ptr_eq(&self.snapshot, &other.snapshot) || self.snapshot.same_content(&other.snapshot))
    }
}

/// What a response carried, so its ACK can move the acknowledged state.
#[derive(Debug, Clone)]
pub enum Update {
    /// SotW: after accepting it, the node holds exactly these of the type.
    Replace(Arc<TypeSet>),
    /// The same as a list with its version (as [`crate::snapshot::list_version`] computes
    /// it): the set is only built if it is not one the rollout already has, which it
    /// usually is (the target's).
    List { version: Arc<str>, resources: Vec<Arc<Resource>> },
    /// Delta: the node adds or replaces `added` and drops `removed`. `served` is the set the
    /// response was worked out from: what the node then holds, usually, and shared if so
    /// rather than built again for each node. `from`, when the stream knows it: the node held
    /// exactly this set before and holds exactly `served` after.
    Patch {
        removed: Arc<[Arc<str>]>,
        added: Arc<[Arc<Resource>]>,
        served: Option<Arc<TypeSet>>,
        from: Option<Arc<TypeSet>>,
    },
}

/// Something the server should count or log.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// The plan entered this step.
    Step(Step),
    /// The node reached its target; the time since the change that started the plan.
    Converged(Duration),
    /// A new target arrived before the node reached the previous one.
    Restarted { step: Step },
    /// The node rejected a response; the plan is stopped until a change gives it something
    /// else to send for that type.
    Stopped { type_url: Arc<str>, message: Arc<str> },
    /// A step waited out the grace period and proceeded without an acknowledgement.
    GraceExpired { step: Step },
    /// A rejection was analysed ([`crate::node_holds`]): what it came to, as a metric label.
    Analysed { outcome: &'static str },
}

/// How a node is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Make-before-break, step by step.
    Ordered,
    /// The node subscribes to listeners or clusters by name (proxyless gRPC): served the
    /// target directly.
    ByName,
    /// `--unsafe-unordered-push`.
    Unordered,
}

/// A response the node rejected, with nothing sent for its type since.
#[derive(Debug, Clone)]
pub(crate) struct Rejected {
    /// What it carried: while the offer would send the same again, the stream sends nothing
    /// (the machines never repeat a rejected response) and the plan stays stopped.
    pub(crate) update: Update,
    /// The node's message, clipped where it entered ([`crate::stream::clip_client_text`]) and
    /// kept once: every view that shows it shares it.
    pub(crate) message: Arc<str>,
    pub(crate) at: Instant,
    /// What in it was new to the node, with who made it (at most [`MAX_SUSPECTS`]).
    pub(crate) suspects: Vec<RejectedResource>,
    /// How many resources in it were new to the node.
    pub(crate) suspects_total: usize,
}

/// A resource in a rejected response that the node did not hold (new, or changed since it
/// last acknowledged), and who made it: one of these is what the node rejected.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RejectedResource {
    pub name: String,
    #[serde(flatten)]
    pub attribution: crate::resource::Attribution,
    /// Whether the node's error message names it.
    pub named_in_error: bool,
    /// The intent documents whose content in it is new to the node: the parts their plugin
    /// marked as theirs ([`crate::blame::changed_documents`]), and what no mark covers as
    /// `document`'s. This, not `document` (which may only own its name), is whom the rejection
    /// blames.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content_of: Vec<String>,
}

/// A node's answer rejecting a response.
#[derive(Debug, Clone, Copy)]
pub struct Nack<'a> {
    /// Its error message (clipped where it entered).
    pub message: &'a str,
    /// Whether it may be split into the documents in play (the client is within its
    /// analyses a minute).
    pub analyse: bool,
}

/// A group target the node held by its own acknowledgements, with the documents held back at
/// it then (by their ids).
#[derive(Debug, Clone)]
pub struct Synced {
    pub target: Arc<Snapshot>,
    /// The target's version (worked out once).
    pub version: Arc<str>,
    pub held_back: Arc<[Arc<str>]>,
}

/// What the last rejection's analysis came to, for `/debug/nodes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnalysisNote {
    Done(Analysis),
    /// The node never acknowledged anything: not acted on.
    NeverAcknowledged,
    /// The client's analyses a minute were used up: the plan stopped.
    OverRate,
}

impl AnalysisNote {
    /// A metric label.
    pub fn outcome(&self) -> &'static str {
        match self {
            AnalysisNote::Done(Analysis::Held(_)) => "held",
            AnalysisNote::Done(Analysis::Split(_)) => "split",
            AnalysisNote::Done(Analysis::Nothing) => "nothing",
            AnalysisNote::Done(Analysis::OverCap) => "over_cap",
            AnalysisNote::NeverAcknowledged => "never_acknowledged",
            AnalysisNote::OverRate => "over_rate",
        }
    }

    fn describe(&self) -> String {
        match self {
            AnalysisNote::Done(Analysis::Held(doc)) => format!("held {doc} at this node (rejected alone)"),
            AnalysisNote::Done(Analysis::Split(n)) => {
                format!("{n} documents in play: reverted at this node and tried in halves")
            }
            AnalysisNote::Done(Analysis::Nothing) => {
                "no document's content in play (or too many resources to compare): plan stopped".into()
            }
            AnalysisNote::Done(Analysis::OverCap) => {
                "too many documents held or suspected at this node already: plan stopped".into()
            }
            AnalysisNote::NeverAcknowledged => {
                "the node never acknowledged anything: nothing to keep, not acted on; plan stopped".into()
            }
            AnalysisNote::OverRate => "over its analyses a minute: plan stopped".into(),
        }
    }
}

/// How many resources of a rejected response are named with it (the first the node's message
/// names, then the others); the rest are counted.
pub const MAX_SUSPECTS: usize = 10;

/// How many unanswered responses are remembered per stream and type. Envoy answers each in
/// order, so more than a few means the client is not answering at all.
const MAX_IN_FLIGHT: usize = 16;

/// Responses of one type sent on one stream and not answered yet, oldest first.
type InFlight = smallvec::SmallVec<[(Arc<str>, Update); 1]>;

/// A stream and a type URL: what subscriptions and responses in flight are kept by.
pub(crate) type StreamType = (u64, Arc<str>);

/// One node's rollout state.
#[derive(Debug)]
pub struct Rollout {
    config: RolloutConfig,
    /// What the node's group is served.
    group_target: Arc<Snapshot>,
    /// What the plan moves the node to: the group's target with what the node holds back
    /// composed in ([`NodeHolds::compose`]); the same `Arc` when it holds nothing back.
    pub(crate) target: Arc<Snapshot>,
    /// What the node rejected and keeps out, and the trial of several suspects.
    node_holds: NodeHolds,
    /// The group target the node last held by its own acknowledgements, with the documents
    /// held back at it then.
    synced: Option<Synced>,
    /// What a node with this target asks for by name (computed once per target).
    wanted: Arc<Wanted>,
    pub(crate) acked: Snapshot,
    /// What the node acknowledged on its own streams, or said it holds when it reconnected:
    /// `acked` without what a grace expiry assumed. Usually the same sets as `acked`.
    pub(crate) confirmed: Snapshot,
    /// Whether the node holds its target by its own word: [`Rollout::holds_target`], kept
    /// current as ACKs arrive.
    holds: bool,
    /// (stream, type) -> whether the subscription is a wildcard, and the names it asks for.
    pub(crate) subscriptions: SmallMap<StreamType, (bool, crate::names::Names)>,
    by_name: bool,
    /// (stream, type) -> responses sent and not answered yet, oldest first. A queue answered
    /// in full goes: with one response per type in flight (design 022) an idle stream then
    /// keeps nothing here, and the one response in flight is kept in place (no allocation per
    /// send).
    in_flight: SmallMap<StreamType, InFlight>,
    /// (stream, type) -> the last response a grace expiry assumed held, until the node answers
    /// it: its ACK then confirms it (otherwise, with one response per type in flight, a node
    /// slower than the grace period would never again count as holding its target by its own
    /// word).
    assumed: SmallMap<StreamType, (Arc<str>, Update)>,
    /// (stream, type) -> the last response sent, if the node rejected it.
    pub(crate) rejected: BTreeMap<(u64, Arc<str>), Rejected>,
    /// The last rejection, kept after the plan moves on: (stream, type, what it carried that
    /// was new).
    last_rejection: Option<Box<(u64, Arc<str>, Rejected)>>,
    /// Whether a rejection stops the plan: the offer stays as it was when the node rejected.
    stopped: bool,
    /// What the last rejection's analysis came to.
    last_analysis: Option<AnalysisNote>,
    /// Clusters a listener the node removed or changed named, kept until its connections
    /// have drained: name -> until when.
    draining: BTreeMap<Arc<str>, Instant>,
    /// Until when a listener that routed by scope, changed or removed, drains: the routing
    /// scopes the target dropped stay meanwhile.
    scopes_draining: Option<Instant>,
    step: Step,
    step_since: Instant,
    /// When the target first differed from what the node had reached.
    diverged_since: Option<Instant>,
    offer: Offer,
    /// Bumped whenever `offer` changes.
    offer_changes: u64,
    restarts: u64,
    nack_stops: u64,
    grace_expiries: u64,
    convergences: u64,
    last_convergence: Option<Duration>,
}

impl Rollout {
    /// A node that holds nothing yet, to be moved to `target`. Its first convergence is not
    /// a change and is not timed.
    pub fn new(config: RolloutConfig, target: Arc<Snapshot>, now: Instant) -> Self {
        let mut r = Rollout {
            config,
            offer: Offer { snapshot: target.clone(), hold: &[], resync: 0 },
            offer_changes: 0,
            wanted: target.wanted(),
            group_target: target.clone(),
            target,
            node_holds: NodeHolds::default(),
            synced: None,
            acked: Snapshot::default(),
            confirmed: Snapshot::default(),
            holds: false,
            subscriptions: SmallMap::default(),
            by_name: false,
            in_flight: SmallMap::default(),
            assumed: SmallMap::default(),
            rejected: BTreeMap::new(),
            last_rejection: None,
            stopped: false,
            last_analysis: None,
            draining: BTreeMap::new(),
            scopes_draining: None,
            step: Step::Clusters,
            step_since: now,
            diverged_since: None,
            restarts: 0,
            nack_stops: 0,
            grace_expiries: 0,
            convergences: 0,
            last_convergence: None,
        };
        r.replan(now, &mut Vec::new());
        r
    }

    pub fn mode(&self) -> Mode {
        if self.config.unordered {
            Mode::Unordered
        } else if self.by_name {
            Mode::ByName
        } else {
            Mode::Ordered
        }
    }

    pub fn offer(&self) -> &Offer {
        &self.offer
    }

    pub fn step(&self) -> Step {
        self.step
    }

    pub fn target(&self) -> &Arc<Snapshot> {
        &self.target
    }

    /// What the node has acknowledged, per type.
    pub fn acked(&self) -> &Snapshot {
        &self.acked
    }

    /// The node's group has a new state to reach.
    pub fn set_target(&mut self, target: Arc<Snapshot>, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        if Arc::ptr_eq(&target, &self.group_target) || target.same_content(&self.group_target) {
            return notes;
        }
        self.group_target = target;
        self.node_holds.retarget(&self.group_target, self.group_target.holds_memo(), self.config.retry, now);
        self.move_to(self.planned(), now, &mut notes);
        self.probe(now, &mut notes);
        notes
    }

    /// Starts a probe of a held document that is due, once nothing is on its way to the node
    /// (so that nothing else travels with it).
    fn probe(&mut self, now: Instant, notes: &mut Vec<Note>) {
        if self.node_holds.probe_due(now) && !self.any_in_flight() && self.node_holds.probe(now) {
            let planned = self.planned();
            if planned.same_content(&self.target) {
                // Its parts in the group's target are those the node holds (the group holds it
                // at what the node accepted, say): nothing to try, nothing to hold back.
                self.node_holds.probe_needs_nothing();
                self.check_holds();
            } else {
                self.move_to(planned, now, notes);
            }
        }
    }

    /// The group's target with what the node holds back composed in.
    fn planned(&self) -> Arc<Snapshot> {
        if self.node_holds.is_empty() {
            return self.group_target.clone();
        }
        self.node_holds.compose(&self.group_target, &self.acked, self.group_target.holds_memo())
    }

    /// The plan moves the node to `planned` from what it holds.
    fn move_to(&mut self, planned: Arc<Snapshot>, now: Instant, notes: &mut Vec<Note>) {
        if Arc::ptr_eq(&planned, &self.target) || planned.same_content(&self.target) {
            // The same for the node (only what it holds back changed in the group's): it
            // holds the group's new target with those documents held back, if it held the old.
            self.check_holds();
            return;
        }
        if self.step != Step::Converged {
            self.restarts += 1;
            notes.push(Note::Restarted { step: self.step });
        }
        self.diverged_since.get_or_insert(now);
        self.wanted = planned.wanted();
        self.target = planned;
        self.holds = false;
        self.replan(now, notes);
        self.check_holds();
    }

    /// What the group serves.
    pub fn group_target(&self) -> &Arc<Snapshot> {
        &self.group_target
    }

    /// The group target the node last held by its own acknowledgements, with the documents it
    /// held back then.
    pub fn synced(&self) -> Option<&Synced> {
        self.synced.as_ref()
    }

    /// What the node rejected and keeps out.
    pub fn node_holds(&self) -> &NodeHolds {
        &self.node_holds
    }

    /// A stream of the node subscribed to `type_url` (or changed how): a wildcard, or the
    /// resources named. A resource no stream asks for any more is no longer held (Envoy
    /// drops the endpoints of a cluster it removed, the routes no listener names).
    pub fn subscribe(
        &mut self,
        stream: u64,
        type_url: &Arc<str>,
        wildcard: bool,
        names: &[Arc<str>],
        now: Instant,
    ) -> Vec<Note> {
        self.subscribe_names(stream, type_url, wildcard, crate::names::of(names), now)
    }

    /// [`subscribe`](Self::subscribe) with the stream's own shared names.
    pub fn subscribe_names(
        &mut self,
        stream: u64,
        type_url: &Arc<str>,
        wildcard: bool,
        names: crate::names::Names,
        now: Instant,
    ) -> Vec<Note> {
        let mut notes = Vec::new();
        self.subscriptions.insert((stream, type_url.clone()), (wildcard, names));
        self.by_name = self.any_by_name();
        self.forget_unsubscribed(type_url);
        self.replan(now, &mut notes);
        // What the node asks for changed: it may hold less of it (or, with a name dropped, all).
        self.holds = false;
        self.check_holds();
        notes
    }

    /// Whether an open stream asks for listeners or clusters by name (a proxyless gRPC
    /// client).
    fn any_by_name(&self) -> bool {
        self.subscriptions.iter().any(|((_, t), (wildcard, _))| !wildcard && types::is_full_state(t))
    }

    /// Drops from what the node holds of `type_url` the names none of its streams asks for.
    fn forget_unsubscribed(&mut self, type_url: &Arc<str>) {
        let subs: Vec<&(bool, crate::names::Names)> =
            self.subscriptions.iter().filter(|((_, t), _)| t == type_url).map(|(_, s)| s).collect();
        if subs.is_empty() || subs.iter().any(|(wildcard, _)| *wildcard) {
            return;
        }
        let Some(held) = self.acked.get(type_url) else { return };
        if held.resources().all(|r| subs.iter().any(|(_, names)| names.contains(r.name()))) {
            return;
        }
        let asked = |set: &TypeSet| {
            TypeSet::from_shared(
                set.resources().filter(|r| subs.iter().any(|(_, names)| names.contains(r.name()))).cloned(),
            )
        };
        let kept = Arc::new(asked(held));
        let confirmed = match self.confirmed.get(type_url) {
            Some(c) if c.sum() != held.sum() => Arc::new(asked(c)),
            Some(_) => kept.clone(),
            None => Arc::new(TypeSet::default()),
        };
        self.acked.set(type_url, kept);
        self.confirmed.set(type_url, confirmed);
    }

    /// A stream's client, reconnecting, said what it holds of `type_url` (SOTW-12, DELTA-3):
    /// what of the target it matches is held, as if acknowledged, so a client that already
    /// has its target is not walked through the plan again.
    pub fn resumed(&mut self, stream: u64, type_url: &Arc<str>, holds: &Holds, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        let target = self.target.get(type_url).cloned().unwrap_or_default();
        let matched = match holds {
            Holds::Version(v) => {
                let candidate = match self.subscriptions.get(&(stream, type_url.clone())) {
                    Some((false, names)) if !types::is_full_state(type_url) => {
                        TypeSet::from_shared(target.resources().filter(|r| names.contains(r.name())).cloned())
                    }
                    _ => TypeSet::clone(&target),
                };
                (candidate.version().as_ref() == v).then_some(candidate)
            }
            Holds::Resources(held) => Some(TypeSet::from_shared(
                held.iter().filter_map(|(n, v)| target.get(n).filter(|r| r.version().as_ref() == v).cloned()),
            )),
        };
        if let Some(set) = matched {
            // The client's own word, like an ACK: it counts as confirmed too.
            let set = Arc::new(set);
            self.acked.set(type_url, set.clone());
            self.confirmed.set(type_url, set);
            self.replan(now, &mut notes);
            self.check_holds();
        }
        notes
    }

    /// A stream sent a response.
    pub fn sent(&mut self, stream: u64, type_url: &Arc<str>, nonce: Arc<str>, update: Update) {
        let key = (stream, type_url.clone());
        self.rejected.remove(&key);
        let q = self.in_flight.slot(&key, || key.clone()).1;
        if q.len() == MAX_IN_FLIGHT {
            q.remove(0);
        }
        q.push((nonce, update));
    }

    /// A stream's client answered the response `nonce`: an ACK, or a NACK with its message.
    /// Answers to responses this rollout does not know (already answered, or too old) are
    /// ignored.
    pub fn answered(
        &mut self,
        stream: u64,
        type_url: &Arc<str>,
        nonce: &str,
        nack: Option<&str>,
        now: Instant,
    ) -> Vec<Note> {
        self.answered_with(stream, type_url, nonce, nack.map(|message| Nack { message, analyse: true }), now)
    }

    /// [`answered`](Self::answered), saying whether a rejection may be analysed (split into
    /// the documents in play, [`crate::node_holds`]): the server allows each client so many
    /// analyses a minute, and past that a rejection only stops the plan.
    pub fn answered_with(
        &mut self,
        stream: u64,
        type_url: &Arc<str>,
        nonce: &str,
        nack: Option<Nack<'_>>,
        now: Instant,
    ) -> Vec<Note> {
        let mut notes = Vec::new();
        let mut rehold = false;
        let key = (stream, type_url.clone());
        if self.assumed.get(&key).is_some_and(|(n, _)| n.as_ref() == nonce) {
            // The answer to a response a grace expiry assumed held: what the node holds
            // moved then; only its own word about it is new.
            let (_, update) = self.assumed.remove(&key).expect("just seen");
            if nack.is_none() {
                let was = self.confirmed.get(type_url).cloned().unwrap_or_default();
                let mine = self.after(type_url, &was, &update);
                self.confirmed.set(type_url, mine);
                self.check_holds();
            }
            return notes;
        }
        let Some(q) = self.in_flight.get_mut(&key) else { return notes };
        let Some(i) = q.iter().position(|(n, _)| n.as_ref() == nonce) else { return notes };
        self.assumed.remove(&key);
        let (_, update) = q.drain(..=i).next_back().expect("drained through i");
        let latest = q.is_empty();
        if latest {
            self.in_flight.remove(&key);
        }
        let acked = nack.is_none();
        match nack {
            Some(Nack { message, analyse }) => {
                // A rejection of a response already superseded stops nothing: the newer one
                // is on its way.
                let (suspects, suspects_total) = self.suspects(type_url, &update, message);
                let rejected = Rejected { update, message: message.into(), at: now, suspects, suspects_total };
                self.last_rejection = Some(Box::new((stream, type_url.clone(), rejected.clone())));
                if latest {
                    if self.config.hold_at_node {
                        rehold = self.analyse(type_url, &rejected, analyse, now);
                        if let Some(a) = &self.last_analysis {
                            notes.push(Note::Analysed { outcome: a.outcome() });
                        }
                    }
                    // What the node holds back now stands for the rejection (its target no
                    // longer carries what it rejected); otherwise the plan stops on it.
                    if !rehold {
                        self.rejected.insert(key, rejected);
                    }
                    // A rejection of what the node was sent last: whatever it held, it does not
                    // hold what it was being moved to.
                    self.holds = false;
                }
            }
            None => {
                self.apply(type_url, update, now, true);
                rehold = self.node_holds.acknowledged(&self.acked, &self.target);
            }
        }
        if rehold {
            self.move_to(self.planned(), now, &mut notes);
        } else {
            self.replan(now, &mut notes);
        }
        if acked {
            self.check_holds();
        }
        self.probe(now, &mut notes);
        notes
    }

    /// Splits a rejection into the documents in play and holds (or suspects) them at this
    /// node; whether what it holds back changed. A node that never acknowledged anything has
    /// nothing to keep: everything would be in play, and nothing is done.
    fn analyse(&mut self, type_url: &Arc<str>, rejected: &Rejected, allowed: bool, now: Instant) -> bool {
        if self.confirmed.is_empty() {
            self.last_analysis = Some(AnalysisNote::NeverAcknowledged);
            return false;
        }
        if !allowed {
            self.last_analysis = Some(AnalysisNote::OverRate);
            return false;
        }
        let acked = &self.acked;
        let resources: Vec<Arc<Resource>> = update_resources(&rejected.update)
            .into_iter()
            .filter(|r| acked.resource(type_url, r.name()).is_none_or(|a| a.version() != r.version()))
            .cloned()
            .collect();
        let synced = self.synced.as_ref().map(|s| (&s.version, &s.held_back[..]));
        let analysis = self.node_holds.rejected(
            type_url,
            &resources,
            acked,
            &rejected.message,
            synced,
            self.config.retry,
            self.group_target.holds_memo(),
            now,
        );
        let changed = matches!(analysis, Analysis::Held(_) | Analysis::Split(_));
        self.last_analysis = Some(AnalysisNote::Done(analysis));
        changed
    }

    /// The resources of `update` the node does not hold as they are (what it may have
    /// rejected): the first [`MAX_SUSPECTS`], those the message names first, and how many
    /// there are.
    fn suspects(&self, type_url: &Arc<str>, update: &Update, message: &str) -> (Vec<RejectedResource>, usize) {
        let held = |r: &Resource| self.acked.resource(type_url, r.name()).is_some_and(|a| a.version() == r.version());
        let resources: Vec<Arc<Resource>> = match update {
            Update::Replace(set) => set.resources().cloned().collect(),
            Update::List { resources, .. } => resources.clone(),
            Update::Patch { added, .. } => added.to_vec(),
        };
        let named = |r: &Resource| !r.name().is_empty() && message.contains(r.name().as_ref() as &str);
        let new: Vec<&Arc<Resource>> = resources.iter().filter(|r| !held(r)).collect();
        let total = new.len();
        let (mut first, rest): (Vec<&Arc<Resource>>, Vec<&Arc<Resource>>) = new.into_iter().partition(|r| named(r));
        first.extend(rest);
        let kept = first
            .into_iter()
            .take(MAX_SUSPECTS)
            .map(|r| {
                let attribution = r.attribution();
                let before = self.acked.resource(type_url, r.name());
                let content_of = crate::blame::changed_documents(
                    type_url,
                    r.body(),
                    before.map(|b| b.body().as_ref()),
                    attribution.document.as_deref(),
                );
                RejectedResource { name: r.name().to_string(), attribution, named_in_error: named(r), content_of }
            })
            .collect();
        (kept, total)
    }

    /// The node accepted `update` (`confirmed`: it said so; otherwise a grace expiry assumes
    /// it).
    fn apply(&mut self, type_url: &Arc<str>, update: Update, now: Instant, confirmed: bool) {
        let held = self.acked.get(type_url).cloned().unwrap_or_default();
        let set = self.after(type_url, &held, &update);
        if confirmed {
            let was = self.confirmed.get(type_url).cloned().unwrap_or_default();
            let mine = if was.sum() == held.sum() { set.clone() } else { self.after(type_url, &was, &update) };
            self.confirmed.set(type_url, mine);
        }
        if type_url.as_ref() == LISTENER
            && let Some(old) = self.acked.get(LISTENER)
        {
            self.drain_listeners(old.clone(), &set, now);
        }
        self.acked.set(type_url, set);
    }

    /// Keeps what the listeners of `old` that `new` removes or changes named directly, and
    /// what the route configurations of removed ones name, until their connections have
    /// drained: Envoy serves them with the old forms meanwhile (and a removed listener's
    /// route configuration gets no more updates).
    fn drain_listeners(&mut self, old: Arc<TypeSet>, new: &TypeSet, now: Instant) {
        if self.config.drain.is_zero() {
            return;
        }
        let until = now + self.config.drain;
        for change in new.changes_since(&old) {
            let (l, removed) = match change {
                Change::Removed(l) => (l, true),
                Change::Updated(l) => match old.get(l.name()) {
                    Some(l) => (l, false),
                    None => continue,
                },
                Change::Added(_) => continue,
            };
            if l.references().routes_by_scope() {
                self.scopes_draining = Some(until);
            }
            let mut names: Vec<Arc<str>> = l.references().names(CLUSTER).map(Arc::from).collect();
            if removed {
                for r in l.references().names(ROUTE) {
                    if let Some(rc) = self.acked.resource(ROUTE, r) {
                        names.extend(rc.references().names(CLUSTER).map(Arc::from));
                    }
                }
            }
            for n in names {
                self.draining.insert(n, until);
            }
        }
    }

    /// What the node holds of `type_url` after it applies `update` to `held`. A SotW response
    /// of a type that is not full-state leaves the names it does not carry as they were
    /// (SOTW-9: they go when the node stops asking for them).
    fn after(&self, type_url: &str, held: &Arc<TypeSet>, update: &Update) -> Arc<TypeSet> {
        let list = match update {
            Update::Replace(set) => set.clone(),
            Update::List { version, resources } => self
                .known_set(type_url, |s| s.version() == version)
                .unwrap_or_else(|| Arc::new(TypeSet::from_shared(resources.iter().cloned()))),
            Update::Patch { removed, added, served, from } => {
                // The stream knows the node goes from exactly what it held to exactly the set
                // the response was worked out from: no name needs a look.
                if let (Some(from), Some(s)) = (from, served)
                    && Arc::ptr_eq(from, held)
                {
                    debug_assert_eq!(held.patched_sum(removed, added), s.sum(), "a whole patch of {type_url}");
                    return s.clone();
                }
                // Usually the set the response was worked out from, or the target's by now:
                // share it rather than build a copy per node.
                let sum = held.patched_sum(removed, added);
                if let Some(s) = served.as_ref().filter(|s| s.sum() == sum) {
                    return s.clone();
                }
                return self
                    .known_set(type_url, |s| s.sum() == sum)
                    .unwrap_or_else(|| Arc::new(held.patch(removed, added)));
            }
        };
        if types::is_full_state(type_url) || held.resources().all(|r| list.get(r.name()).is_some()) {
            list
        } else {
            Arc::new(list.overlay(held))
        }
    }

    /// The set of `type_url` among those the rollout holds (target, acked) that `is` picks.
    fn known_set(&self, type_url: &str, is: impl Fn(&TypeSet) -> bool) -> Option<Arc<TypeSet>> {
        [self.target.get(type_url), self.acked.get(type_url)].into_iter().flatten().find(|s| is(s)).cloned()
    }

    /// A stream of the node closed: its subscriptions and unanswered responses go with it.
    pub fn stream_closed(&mut self, stream: u64, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        self.subscriptions.retain(|(s, _), _| *s != stream);
        // A stream that asked by name decided the node's mode only while it was open.
        self.by_name = self.any_by_name();
        self.in_flight.retain(|(s, _), _| *s != stream);
        self.assumed.retain(|(s, _), _| *s != stream);
        self.rejected.retain(|(s, _), _| *s != stream);
        self.replan(now, &mut notes);
        self.holds = false;
        self.check_holds();
        notes
    }

    /// When [`tick`](Self::tick) should next be called: the end of the current step's grace,
    /// or the end of a draining listener's drain time.
    pub fn deadline(&self) -> Option<Instant> {
        [self.grace_deadline(), self.draining.values().min().copied(), self.scopes_draining, self.node_holds.deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    fn grace_deadline(&self) -> Option<Instant> {
        (self.mode() == Mode::Ordered && !self.stopped && self.step != Step::Converged)
            .then(|| self.step_since + self.config.grace)
    }

    /// Lets go of clusters kept for listeners whose drain time is over, and proceeds past a
    /// step that has waited out its grace period, as if the node had acknowledged every
    /// response it was sent of the types the step waits for.
    pub fn tick(&mut self, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        // A held document due to be tried again: it is sent to the node alone.
        self.probe(now, &mut notes);
        if self.draining.values().chain(&self.scopes_draining).any(|until| *until <= now) {
            self.draining.retain(|_, until| *until > now);
            self.scopes_draining = self.scopes_draining.filter(|until| *until > now);
            self.replan(now, &mut notes);
        }
        if self.grace_deadline().is_none_or(|d| d > now) {
            return notes;
        }
        let step = self.step;
        for ty in step.awaits() {
            if self.offer.hold.contains(ty) {
                continue;
            }
            let keys: Vec<(u64, Arc<str>)> =
                self.in_flight.keys().filter(|(_, t)| t.as_ref() == *ty).cloned().collect();
            for key in keys {
                for (nonce, update) in self.in_flight.remove(&key).unwrap_or_default() {
                    self.apply(&key.1, update.clone(), now, false);
                    self.assumed.insert(key.clone(), (nonce, update));
                }
            }
        }
        self.grace_expiries += 1;
        notes.push(Note::GraceExpired { step });
        self.replan(now, &mut notes);
        self.check_holds();
        if self.step == step {
            // Nothing the node answered moves it on: either it does not ask for what the step
            // needs, or the streams hold back a response (one identical to what it rejected
            // earlier, say). Have them send the offer again in full, and restart the clock
            // rather than expiring at every tick.
            self.step_since = now;
            let offer = Offer { resync: self.offer.resync + 1, ..self.offer.clone() };
            self.set_offer(offer);
        }
        notes
    }

    fn replan(&mut self, now: Instant, notes: &mut Vec<Note>) {
        if self.mode() != Mode::Ordered {
            self.stopped = false;
            self.enter(Step::Converged, now, notes);
            self.set_offer(Offer { snapshot: self.target.clone(), hold: &[], resync: self.offer.resync });
            return;
        }
        // The target is offered as it is and listener or route responses are still out: an
        // answer can only add to what the node holds, and holding more never holds anything
        // back, so the offer stays and the node still waits for ACKs. Most answers to a
        // change land here, and skip the plan.
        if self.offers_target_unhindered() && !self.settled() {
            self.enter(Step::Acks, now, notes);
            return;
        }
        // The last answer of a change: the node acknowledged exactly the target and nothing
        // is on its way or kept for a drain, which is what the plan would conclude too.
        if self.offers_target_unhindered()
            && !self.any_in_flight()
            && self.draining.is_empty()
            && self.scopes_draining.is_none()
            && CORE_TYPES.iter().all(|ty| {
                let sum = |s: &Snapshot| s.get(ty).map_or(0, |set| set.sum());
                sum(&self.acked) == sum(&self.target)
            })
        {
            self.enter(Step::Converged, now, notes);
            return;
        }
        let (step, hold, offer) = self.plan_shared();
        // A rejected response stops the plan while the new offer would send the same again
        // (the stream has nothing else to send, so the node keeps its last good state); a
        // change that gives the type something new lets the plan go on.
        let blocking = self.rejected.iter().find(|((stream, t), rj)| {
            self.mode() == Mode::Ordered
                && !hold.contains(&t.as_ref())
                && self.would_repeat(*stream, t, &rj.update, &offer)
        });
        if let Some(((_, t), rj)) = blocking {
            if !self.stopped {
                self.stopped = true;
                self.nack_stops += 1;
                notes.push(Note::Stopped { type_url: t.clone(), message: rj.message.clone() });
            }
            // Nothing more of the four types is sent: the node keeps what it holds.
            let snapshot = self.offer.snapshot.clone();
            self.set_offer(Offer { snapshot, hold: &CORE_TYPES, resync: self.offer.resync });
            return;
        }
        self.stopped = false;
        self.enter(step, now, notes);
        self.set_offer(Offer { snapshot: offer, hold, resync: self.offer.resync });
    }

    /// [`plan_now`](Self::plan_now), taken from the target when another node in the same
    /// settled state worked it out already (see [`SharedPlan`]).
    fn plan_shared(&self) -> (Step, &'static [&'static str], Arc<Snapshot>) {
        let with_target = |offer: Option<Arc<Snapshot>>| offer.unwrap_or_else(|| self.target.clone());
        let Some((from, subscribed)) = self.settled_on() else {
            let (step, hold, offer) = self.plan_now();
            return (step, hold, with_target(offer.map(Arc::new)));
        };
        let together = self.together();
        let memo = self.target.shared_plan();
        let same = |p: &SharedPlan| p.from == from && p.subscribed == subscribed && p.together == together;
        // Read without a lock: every node of a group looks here on every change.
        if let Some(p) = memo.iter().filter_map(|slot| slot.get()).find(|p| same(p)).cloned() {
            #[cfg(debug_assertions)]
            {
                let (step, hold, offer) = self.plan_now();
                debug_assert_eq!((step, hold), (p.step, p.hold), "a shared plan is the node's own");
                debug_assert!(
                    with_target(offer.map(Arc::new)).same_content(&with_target(p.offer.clone())),
                    "a shared plan offers what the node's own would"
                );
            }
            return (p.step, p.hold, with_target(p.offer));
        }
        let (step, hold, offer) = self.plan_now();
        let offer = offer.map(Arc::new);
        // The first free slot takes it (a node working out the same state at once may take
        // another: the same plan twice, harmless).
        let mut plan = Some(SharedPlan { from, subscribed, together, step, hold, offer: offer.clone() });
        for slot in memo {
            match plan.take().map(|p| slot.set(p)) {
                Some(Err(back)) => plan = Some(back),
                _ => break,
            }
        }
        (step, hold, with_target(offer))
    }

    /// The sums of what the node acknowledged, and which core types it subscribes to (a bit
    /// each), when that alone decides its plan: ordered, nothing in flight, rejected, stopped
    /// or draining. A type no stream subscribes to counts as held at the target
    /// ([`surely_held`](Self::surely_held)), whatever was acknowledged of it.
    fn settled_on(&self) -> Option<([u128; 4], u8)> {
        let alone = self.mode() == Mode::Ordered
            && !self.any_in_flight()
            && self.rejected.is_empty()
            && !self.stopped
            && self.draining.is_empty()
            && self.scopes_draining.is_none();
        alone.then(|| {
            let subscribed = |ty: &str| self.subscriptions.keys().any(|(_, t)| t.as_ref() == ty);
            let mask = CORE_TYPES.iter().enumerate().fold(0u8, |m, (i, ty)| m | (u8::from(subscribed(ty)) << i));
            (CORE_TYPES.map(|ty| self.acked.get(ty).map_or(0, |s| s.sum())), mask)
        })
    }

    /// The plan for the node as it stands.
    fn plan_now(&self) -> (Step, &'static [&'static str], Option<Snapshot>) {
        let (held, changing) = self.surely_held();
        let in_flight = || self.in_flight.iter().flat_map(|((_, t), q)| q.iter().map(move |(_, u)| (t, u)));
        let maybe_route = |name: &str| {
            self.acked.resource(ROUTE, name).is_some()
                || in_flight().any(|(t, u)| t.as_ref() == ROUTE && carries(u, name))
        };
        // What the node acknowledged or may still receive names, worked out only if the
        // target drops a cluster the node holds.
        let in_use = std::cell::OnceCell::new();
        let keep = |c: &str| {
            self.draining.contains_key(c)
                || in_use
                    .get_or_init(|| {
                        let mut names = names_held(&self.acked);
                        for (_, u) in in_flight().filter(|(t, _)| t.as_ref() == LISTENER || t.as_ref() == ROUTE) {
                            for r in update_resources(u) {
                                names.extend(r.references().names(CLUSTER).map(str::to_owned));
                            }
                        }
                        names
                    })
                    .contains(c)
        };
        let maybe = self.maybe_held(false);
        let node = Node {
            held: &held,
            maybe: &maybe,
            maybe_route: &maybe_route,
            keep: &keep,
            together: self.together(),
            settled: self.settled() && !changing,
            scopes_draining: self.scopes_draining.is_some(),
        };
        let plan = plan_lean(&self.target, &self.wanted, &node);
        #[cfg(debug_assertions)]
        {
            // The endpoints left as acknowledged change nothing the plan says.
            let all = self.maybe_held(true);
            let plan_all = plan_lean(&self.target, &self.wanted, &Node { maybe: &all, ..node });
            debug_assert_eq!(plan, plan_all, "the plan with every endpoint in flight patched in");
        }
        plan
    }

    /// What the node may hold of clusters and endpoints: what it acknowledged, with the
    /// latest form of every one a response in flight carries.
    ///
    /// The plan reads the endpoints of this only for clusters the target drops that the node
    /// may hold (their endpoints are kept with them), so while the target drops none they are
    /// left as acknowledged: under endpoint churn nearly every node has endpoints in flight,
    /// and patching them in was a tenth of xdst's CPU (docs/PERFORMANCE.md, issue 51).
    fn maybe_held(&self, endpoints_always: bool) -> Cow<'_, Snapshot> {
        let carried =
            |ty: &'static str| self.in_flight.iter().filter(move |((_, t), q)| t.as_ref() == ty && !q.is_empty());
        if [CLUSTER, ENDPOINT].iter().all(|ty| carried(ty).next().is_none()) {
            return Cow::Borrowed(&self.acked);
        }
        let mut maybe = self.acked.clone();
        for ty in [CLUSTER, ENDPOINT] {
            if ty == ENDPOINT && !endpoints_always && !self.drops_a_cluster(maybe.get(CLUSTER)) {
                break;
            }
            let mut set = maybe.get(ty).map(|s| TypeSet::clone(s)).unwrap_or_default();
            for (_, q) in carried(ty) {
                for (_, u) in q {
                    let added: Vec<Arc<Resource>> = update_resources(u).into_iter().cloned().collect();
                    set = set.patch(&[], &added);
                }
            }
            maybe.set(&self.acked.type_key(ty), Arc::new(set));
        }
        Cow::Owned(maybe)
    }

    /// Whether the target lacks a cluster of `clusters` (what the node may hold).
    fn drops_a_cluster(&self, clusters: Option<&Arc<TypeSet>>) -> bool {
        let Some(clusters) = clusters else { return false };
        let target = self.target.get(CLUSTER).cloned().unwrap_or_default();
        target.changes_since(clusters).any(|c| matches!(c, Change::Removed(_)))
    }

    /// Whether the node's listeners and route configurations come on one stream (ADS), which
    /// writes a route configuration before a listener sent with it.
    fn together(&self) -> bool {
        let mut streams =
            self.subscriptions.keys().filter(|(_, t)| t.as_ref() == LISTENER || t.as_ref() == ROUTE).map(|(s, _)| *s);
        let first = streams.next();
        streams.all(|s| Some(s) == first)
    }

    /// What the node surely holds, and whether a cluster or endpoint response in flight may
    /// still change what it holds.
    ///
    /// Listeners and route configurations: what it acknowledged, less whatever a response
    /// still in flight changes or removes (it may be applied before anything sent now, and
    /// the plan waits on their versions). Clusters and endpoints count by name: what it
    /// acknowledged, less whatever a response in flight removes. One that only changes them
    /// leaves them usable whether the node applies it or rejects it: a changed cluster serves
    /// in its old form until its new one is warm, and new endpoints replace the old without
    /// the cluster warming again. (Counted by version, every node with endpoints in flight,
    /// under endpoint churn nearly all of them, held back each route configuration naming
    /// their clusters until a quiet moment: docs/PERFORMANCE.md, issue 51.)
    ///
    /// Every type no stream subscribes to counts as held at the target: it gates nothing.
    fn surely_held(&self) -> (Cow<'_, Snapshot>, bool) {
        let unsubscribed = |ty: &str| !self.subscriptions.keys().any(|(_, t)| t.as_ref() == ty);
        let mut surely: Option<Snapshot> = None;
        let mut changing = false;
        for ((_, ty), q) in self.in_flight.iter().filter(|(_, q)| !q.is_empty()) {
            let held = surely.as_ref().unwrap_or(&self.acked).get(ty).cloned().unwrap_or_default();
            let by_name = ty.as_ref() == CLUSTER || ty.as_ref() == ENDPOINT;
            let (mut less, mut gone): (Option<TypeSet>, Vec<Arc<str>>) = (None, Vec::new());
            for (_, update) in q {
                if let Update::List { version, .. } = update
                    && version == held.version()
                {
                    continue;
                }
                let after = self.after(ty, &held, update);
                if !by_name {
                    less = Some(less.as_ref().unwrap_or(&held).intersect(&after));
                    continue;
                }
                changing |= after.sum() != held.sum();
                match update {
                    Update::Patch { removed, .. } => {
                        gone.extend(removed.iter().filter(|n| held.get(n).is_some() && after.get(n).is_none()).cloned())
                    }
                    _ if types::is_full_state(ty) => gone.extend(after.changes_since(&held).filter_map(|c| match c {
                        Change::Removed(r) => Some(r.name().clone()),
                        _ => None,
                    })),
                    // A response for some names of a type that is not full state removes none.
                    _ => {}
                }
            }
            if !gone.is_empty() {
                less = Some(held.patch(&gone, &[]));
            }
            if let Some(less) = less {
                surely.get_or_insert_with(|| self.acked.clone()).set(ty, Arc::new(less));
            }
        }
        for ty in CORE_TYPES {
            if unsubscribed(ty) {
                let target = self.target.get(ty).cloned().unwrap_or_default();
                surely.get_or_insert_with(|| self.acked.clone()).set(&self.target.type_key(ty), target);
            }
        }
        (surely.map_or(Cow::Borrowed(&self.acked), Cow::Owned), changing)
    }

    /// Whether serving `offer` would send `stream` the rejected `update` again, so that the
    /// stream sends nothing. It may say yes when the stream does send (the machines compare
    /// whole responses): then the send clears the rejection.
    fn would_repeat(&self, stream: u64, type_url: &Arc<str>, update: &Update, offer: &Snapshot) -> bool {
        let set = offer.get(type_url);
        match update {
            Update::Replace(_) | Update::List { .. } => {
                let rejected = match update {
                    Update::Replace(set) => set.version().clone(),
                    Update::List { version, .. } => version.clone(),
                    Update::Patch { .. } => unreachable!(),
                };
                let all = set.cloned().unwrap_or_default();
                let would = match self.subscriptions.get(&(stream, type_url.clone())) {
                    Some((false, names)) if !types::is_full_state(type_url) => {
                        TypeSet::from_shared(all.resources().filter(|r| names.contains(r.name())).cloned())
                    }
                    _ => TypeSet::clone(&all),
                };
                *would.version() == rejected
            }
            Update::Patch { removed, added, .. } => {
                added.iter().all(|r| set.and_then(|s| s.get(r.name())).is_some_and(|o| o.version() == r.version()))
                    && removed.iter().all(|n| set.and_then(|s| s.get(n)).is_none())
            }
        }
    }

    /// Whether every listener and route response sent has been answered.
    fn settled(&self) -> bool {
        !self.in_flight.iter().any(|((_, t), q)| (t.as_ref() == LISTENER || t.as_ref() == ROUTE) && !q.is_empty())
    }

    /// Whether the offer is the target itself, nothing held back, rejected or stopped.
    fn offers_target_unhindered(&self) -> bool {
        self.rejected.is_empty()
            && !self.stopped
            && self.offer.hold.is_empty()
            && Arc::ptr_eq(&self.offer.snapshot, &self.target)
    }

    fn any_in_flight(&self) -> bool {
        self.in_flight.values().any(|q| !q.is_empty())
    }

    fn enter(&mut self, step: Step, now: Instant, notes: &mut Vec<Note>) {
        if step == self.step {
            return;
        }
        self.step = step;
        self.step_since = now;
        notes.push(Note::Step(step));
        if step == Step::Converged
            && let Some(t0) = self.diverged_since.take()
        {
            let d = now.saturating_duration_since(t0);
            self.convergences += 1;
            self.last_convergence = Some(d);
            notes.push(Note::Converged(d));
        }
    }

    fn set_offer(&mut self, offer: Offer) {
        if !self.offer.same(&offer) {
            self.offer = offer;
            self.offer_changes += 1;
        }
    }

    /// The rollout as `/debug/nodes` shows it.
    pub fn status(&self, now: Instant) -> RolloutStatus {
        let short = |t: &str| types::short_name(t).to_owned();
        RolloutStatus {
            mode: self.mode(),
            step: self.step,
            step_seconds: round_ms(now.saturating_duration_since(self.step_since)),
            waiting_for: if self.step == Step::Converged {
                Vec::new()
            } else {
                self.step.awaits().iter().map(|t| short(t)).collect()
            },
            held: self.offer.hold.iter().map(|t| short(t)).collect(),
            target_version: self.group_target.shared_version().to_string(),
            planned_version: (!Arc::ptr_eq(&self.target, &self.group_target)).then(|| self.target.version()),
            offer_version: self.offer.snapshot.version(),
            acked_version: (!self.confirmed.is_empty()).then(|| self.confirmed.version()),
            assumed_version: (!self.acked.same_content(&self.confirmed)).then(|| self.acked.version()),
            unanswered: self.in_flight.values().map(|q| q.len()).sum(),
            stopped: self.stopped_status(now),
            last_rejection: self.last_rejection.as_deref().map(|(stream, t, rj)| rj.status(*stream, t, now)),
            held_at_node: self.node_holds.status(now),
            suspects: self.node_holds.suspects().map(|d| d.to_string()).collect(),
            trying: self.node_holds.trying().map(|d| d.to_string()).collect(),
            last_analysis: self.last_analysis.as_ref().map(AnalysisNote::describe),
            in_sync: self.holds,
            plan_converged: self.in_sync(),
            convergences: self.convergences,
            last_convergence_seconds: self.last_convergence.map(round_ms),
            restarts: self.restarts,
            nack_stops: self.nack_stops,
            grace_expiries: self.grace_expiries,
        }
    }

    /// What stopped the plan, while a rejection stops it.
    pub fn stopped_status(&self, now: Instant) -> Option<StoppedStatus> {
        if !self.stopped {
            return None;
        }
        self.rejection_status(now)
    }

    /// A rejection of the last response of a type on one of the node's streams, with nothing
    /// sent for that type since: what the node rejected and still does not hold. An ordered
    /// plan stops on it ([`stopped_status`](Self::stopped_status)); a node served by name or
    /// unordered is never stopped, and this is how it is known to reject.
    pub fn rejection_status(&self, now: Instant) -> Option<StoppedStatus> {
        self.rejected.iter().next().map(|((stream, t), rj)| rj.status(*stream, t, now))
    }

    /// Every such rejection, one per stream and type ([`rejection_status`](Self::rejection_status)
    /// is the first).
    pub fn rejection_statuses(&self, now: Instant) -> Vec<StoppedStatus> {
        self.rejected.iter().map(|((stream, t), rj)| rj.status(*stream, t, now)).collect()
    }

    /// Whether the node, on its own streams, acknowledged (or said on reconnecting that it
    /// holds) its target of everything it asks for, and asked for everything a node of its
    /// kind will: an Envoy asks for every listener and cluster, the route configurations its
    /// listeners name (an `api_listener`'s excepted: Envoy ignores those) and the endpoints
    /// its EDS clusters wait for; a client that asks by name (proxyless gRPC) holds what it
    /// named. A grace expiry never makes it so, and a rejection of the last response of a
    /// type undoes it until the node acknowledges again.
    pub fn holds_target(&self) -> bool {
        self.holds
    }

    fn check_holds(&mut self) {
        if !self.holds {
            self.holds = self.step == Step::Converged && self.works_out_holds();
        }
        let same = |s: &Synced| {
            Arc::ptr_eq(&s.target, &self.group_target) && s.held_back.iter().eq(self.node_holds.reverted())
        };
        if self.holds && !self.synced.as_ref().is_some_and(same) {
            self.synced = Some(Synced {
                version: self.group_target.shared_version(),
                target: self.group_target.clone(),
                held_back: if self.node_holds.reverted().next().is_none() {
                    nothing_held_back()
                } else {
                    self.node_holds.reverted().cloned().collect()
                },
            });
        }
    }

    fn works_out_holds(&self) -> bool {
        if self.subscriptions.is_empty() || !self.rejected.is_empty() {
            return false;
        }
        // Looked at on every answer that may complete a change: nothing is allocated.
        fn of<'a>(
            subscriptions: &'a SmallMap<StreamType, (bool, crate::names::Names)>,
            ty: &'a str,
        ) -> impl Iterator<Item = &'a (bool, crate::names::Names)> + 'a {
            subscriptions.iter().filter(move |((_, t), _)| t.as_ref() == ty).map(|(_, s)| s)
        }
        let subs = |ty| of(&self.subscriptions, ty);
        let envoy = self.mode() != Mode::ByName;
        let wanted = &self.wanted;
        if envoy {
            let will_ask = [
                (LISTENER, self.target.get(LISTENER).is_some_and(|s| !s.is_empty())),
                (CLUSTER, self.target.get(CLUSTER).is_some_and(|s| !s.is_empty())),
                (ROUTE, !wanted.routes.is_empty()),
                (ENDPOINT, !wanted.endpoints.is_empty()),
            ];
            if will_ask.iter().any(|(ty, will)| *will && subs(ty).next().is_none()) {
                return false;
            }
        }
        // Each type subscribed, once (a handful of keys: the first of each type is looked at).
        let keys = || self.subscriptions.keys().map(|(_, t)| t);
        let mut types = keys().enumerate().filter(|(i, t)| keys().position(|u| u == *t) == Some(*i)).map(|(_, t)| t);
        types.all(|ty| {
            let Some(target) = self.target.get(ty) else { return true };
            let held = self.confirmed.get(ty);
            // Held exactly at the target (the same names at the same versions, so the sums of
            // (name, version) agree): at the target, and nothing extra, without a lookup a
            // resource. What a node acknowledged is usually this, and the lookups were a
            // fifth of the server's CPU with 100 streams and 2,000 resources (issue 37, row 2).
            if held.is_some_and(|h| Arc::ptr_eq(h, target) || (h.len() == target.len() && h.sum() == target.sum())) {
                return true;
            }
            let wildcard = subs(ty).any(|(w, _)| *w);
            let asked = |name: &Arc<str>| {
                (wildcard || subs(ty).any(|(_, names)| names.contains(name)))
                    && (!envoy
                        || match ty.as_ref() {
                            ROUTE => wanted.routes.contains(name.as_ref()),
                            ENDPOINT => wanted.endpoints.contains(name.as_ref()),
                            _ => true,
                        })
            };
            let at_target = target
                .resources()
                .filter(|r| asked(r.name()))
                .all(|r| held.and_then(|h| h.get(r.name())).is_some_and(|h| h.version() == r.version()));
            // Envoy holds no listener the target dropped (clusters may stay for a drain).
            let no_extra = !(envoy && wildcard && ty.as_ref() == LISTENER)
                || held.is_none_or(|h| h.resources().all(|r| target.get(r.name()).is_some()));
            at_target && no_extra
        })
    }

    /// Whether the node has acknowledged its target (whatever the mode): the clusters and
    /// listeners exactly, the endpoints and routes it asks for at their target versions.
    pub fn in_sync(&self) -> bool {
        self.plan_now().0 == Step::Converged
    }

    /// Whether the offer changed since `previous` (the streams then re-evaluate every type).
    /// How many times the offer has changed: a server that published it compares this
    /// number instead of the offers.
    pub fn offer_changes(&self) -> u64 {
        self.offer_changes
    }
}

/// An empty list of documents held back, shared: a node that holds nothing back (nearly
/// every one) records each target it reaches without an allocation.
fn nothing_held_back() -> Arc<[Arc<str>]> {
    static NONE: std::sync::LazyLock<Arc<[Arc<str>]>> = std::sync::LazyLock::new(|| Arc::new([]));
    NONE.clone()
}

/// The resources a response carries.
pub(crate) fn update_resources(u: &Update) -> Vec<&Arc<Resource>> {
    match u {
        Update::Replace(set) => set.resources().collect(),
        Update::List { resources, .. } => resources.iter().collect(),
        Update::Patch { added, .. } => added.iter().collect(),
    }
}

/// Whether a response carries (or removes) the resource `name`.
pub(crate) fn carries(u: &Update, name: &str) -> bool {
    match u {
        Update::Replace(set) => set.get(name).is_some(),
        Update::List { resources, .. } => resources.iter().any(|r| r.name().as_ref() == name),
        Update::Patch { removed, added, .. } => {
            removed.iter().any(|n| n.as_ref() == name) || added.iter().any(|r| r.name().as_ref() == name)
        }
    }
}

/// Seconds, to the microsecond.
fn round_ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e6
}

/// A rollout's state, for `/debug/nodes`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RolloutStatus {
    pub mode: Mode,
    pub step: Step,
    /// Seconds in the current step.
    pub step_seconds: f64,
    /// The types whose acknowledgement the step waits for.
    pub waiting_for: Vec<String>,
    /// The types nothing is sent for yet.
    pub held: Vec<String>,
    /// What the node's group is served.
    pub target_version: String,
    /// What the plan moves the node to, when it holds something back (the group's target
    /// with those documents as the node accepted them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_version: Option<String>,
    pub offer_version: String,
    /// What the node acknowledged on its own streams (none yet: null).
    pub acked_version: Option<String>,
    /// What the plan assumes the node holds, when a grace expiry assumed more than it
    /// acknowledged.
    pub assumed_version: Option<String>,
    /// Responses sent to the node and not answered yet.
    pub unanswered: usize,
    pub stopped: Option<StoppedStatus>,
    /// The last response the node rejected (kept after the plan moves on).
    pub last_rejection: Option<StoppedStatus>,
    /// Documents held back at this node alone: it rejected each alone (design 016, part 3a).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_at_node: Vec<HeldStatus>,
    /// Documents in play in a rejection of several, reverted at this node until cleared.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suspects: Vec<String>,
    /// Those of them sent to the node now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trying: Vec<String>,
    /// What the last rejection's analysis came to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_analysis: Option<String>,
    /// Whether the node holds its target of every type it subscribes to, by its own
    /// acknowledgements ([`Rollout::holds_target`]): what `/changes` and the status page count.
    pub in_sync: bool,
    /// Whether the plan has nothing left to do (a grace expiry may have assumed what the node
    /// never acknowledged: then `in_sync` is false).
    pub plan_converged: bool,
    /// Changes the node has converged on (its first configuration is not counted).
    pub convergences: u64,
    /// How long the last of them took, from the change reaching xdst's cache for the node to
    /// its last step being acknowledged.
    pub last_convergence_seconds: Option<f64>,
    pub restarts: u64,
    pub nack_stops: u64,
    pub grace_expiries: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StoppedStatus {
    pub r#type: String,
    /// The stream (as `/debug/nodes` numbers them) whose client rejected it.
    pub stream: u64,
    /// The node's message, clipped where it entered: shared, not copied, by every view.
    pub message: Arc<str>,
    pub seconds_ago: f64,
    /// The resources of the rejected response the node did not hold, with the plugin (and
    /// intent document) that produced each and the patch plugins that changed it: those the
    /// message names first, at most [`MAX_SUSPECTS`].
    pub resources: Vec<RejectedResource>,
    /// How many resources of the rejected response were new to the node.
    pub resources_count: usize,
}

impl Rejected {
    fn status(&self, stream: u64, type_url: &str, now: Instant) -> StoppedStatus {
        StoppedStatus {
            r#type: types::short_name(type_url).to_owned(),
            stream,
            message: self.message.clone(),
            seconds_ago: round_ms(now.saturating_duration_since(self.at)),
            resources: self.suspects.clone(),
            resources_count: self.suspects_total,
        }
    }
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;

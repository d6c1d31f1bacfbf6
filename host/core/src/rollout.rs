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
//! - **A NACK** stops the plan: the offer is frozen (the node keeps its last good state, as
//!   it does after rejecting), until the next target.
//! - **Silence**: a step that waits longer than the grace period proceeds as if the node had
//!   acknowledged what it was sent, so a client that never ACKs is not stuck forever.
//! - **Clients that subscribe by name** (proxyless gRPC asks for its listener and everything
//!   after it by name) are served the target directly: they fetch a cluster only when a
//!   route names it, so there is nothing to order and waiting would only block them.
//! - A type no stream of the node subscribes to does not gate the plan.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plan::{Step, plan};
use crate::resource::Resource;
use crate::snapshot::{Snapshot, TypeSet};
use crate::types::{self, CORE_TYPES, LISTENER, ROUTE};

/// How rollouts behave; one per server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RolloutConfig {
    /// How long a step may wait for an acknowledgement before it proceeds without one.
    pub grace: Duration,
    /// Serve every node its target at once, unordered (for demonstrations and tests).
    pub unordered: bool,
}

impl Default for RolloutConfig {
    fn default() -> Self {
        RolloutConfig { grace: Duration::from_secs(10), unordered: false }
    }
}

/// What a node's streams serve now.
#[derive(Debug, Clone)]
pub struct Offer {
    pub snapshot: Arc<Snapshot>,
    /// Types nothing is sent for until the plan reaches them.
    pub hold: &'static [&'static str],
}

impl Offer {
    fn same(&self, other: &Offer) -> bool {
        self.hold == other.hold && (Arc::ptr_eq(&self.snapshot, &other.snapshot) || self.snapshot.same_content(&other.snapshot))
    }
}

/// What a response carried, so its ACK can move the acknowledged state.
#[derive(Debug, Clone)]
pub enum Update {
    /// SotW: after accepting it, the node holds exactly these of the type.
    Replace(Arc<TypeSet>),
    /// Delta: the node adds or replaces `added` and drops `removed`.
    Patch { removed: Vec<Arc<str>>, added: Vec<Arc<Resource>> },
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
    /// The node rejected a response; the plan is stopped until the next target.
    Stopped { type_url: Arc<str>, message: String },
    /// A step waited out the grace period and proceeded without an acknowledgement.
    GraceExpired { step: Step },
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

#[derive(Debug, Clone)]
struct Stopped {
    type_url: Arc<str>,
    message: String,
    at: Instant,
}

/// How many unanswered responses are remembered per stream and type. Envoy answers each in
/// order, so more than a few means the client is not answering at all.
const MAX_IN_FLIGHT: usize = 16;

/// One node's rollout state.
#[derive(Debug)]
pub struct Rollout {
    config: RolloutConfig,
    target: Arc<Snapshot>,
    acked: Snapshot,
    /// (stream, type) -> whether the subscription is a wildcard.
    subscriptions: BTreeMap<(u64, Arc<str>), bool>,
    by_name: bool,
    /// (stream, type) -> responses sent and not answered yet, oldest first.
    in_flight: BTreeMap<(u64, Arc<str>), VecDeque<(Arc<str>, Update)>>,
    stopped: Option<Stopped>,
    step: Step,
    step_since: Instant,
    /// When the target first differed from what the node had reached.
    diverged_since: Option<Instant>,
    offer: Offer,
    restarts: u64,
    nack_stops: u64,
    grace_expiries: u64,
}

impl Rollout {
    /// A node that holds nothing yet, to be moved to `target`. Its first convergence is not
    /// a change and is not timed.
    pub fn new(config: RolloutConfig, target: Arc<Snapshot>, now: Instant) -> Self {
        let mut r = Rollout {
            config,
            offer: Offer { snapshot: target.clone(), hold: &[] },
            target,
            acked: Snapshot::default(),
            subscriptions: BTreeMap::new(),
            by_name: false,
            in_flight: BTreeMap::new(),
            stopped: None,
            step: Step::Clusters,
            step_since: now,
            diverged_since: None,
            restarts: 0,
            nack_stops: 0,
            grace_expiries: 0,
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
        if Arc::ptr_eq(&target, &self.target) || target.same_content(&self.target) {
            return notes;
        }
        if self.step != Step::Converged {
            self.restarts += 1;
            notes.push(Note::Restarted { step: self.step });
        }
        self.stopped = None;
        self.diverged_since.get_or_insert(now);
        self.target = target;
        self.replan(now, &mut notes);
        notes
    }

    /// A stream of the node subscribed to `type_url` (or changed how).
    pub fn subscribe(&mut self, stream: u64, type_url: &Arc<str>, wildcard: bool, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        let before = self.subscriptions.insert((stream, type_url.clone()), wildcard);
        if !wildcard && types::is_full_state(type_url) {
            self.by_name = true;
        }
        if before != Some(wildcard) {
            self.replan(now, &mut notes);
        }
        notes
    }

    /// A stream sent a response.
    pub fn sent(&mut self, stream: u64, type_url: &Arc<str>, nonce: Arc<str>, update: Update) {
        let q = self.in_flight.entry((stream, type_url.clone())).or_default();
        if q.len() == MAX_IN_FLIGHT {
            q.pop_front();
        }
        q.push_back((nonce, update));
    }

    /// A stream's client answered the response `nonce`: an ACK, or a NACK with its message.
    /// Answers to responses this rollout does not know (already answered, or too old) are
    /// ignored.
    pub fn answered(&mut self, stream: u64, type_url: &Arc<str>, nonce: &str, nack: Option<&str>, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        let key = (stream, type_url.clone());
        let Some(q) = self.in_flight.get_mut(&key) else { return notes };
        let Some(i) = q.iter().position(|(n, _)| n.as_ref() == nonce) else { return notes };
        let (_, update) = q.drain(..=i).last().expect("drained through i");
        if q.is_empty() {
            self.in_flight.remove(&key);
        }
        match nack {
            Some(message) => {
                if self.mode() == Mode::Ordered && self.step != Step::Converged {
                    self.nack_stops += 1;
                    self.stopped = Some(Stopped { type_url: type_url.clone(), message: message.to_owned(), at: now });
                    notes.push(Note::Stopped { type_url: type_url.clone(), message: message.to_owned() });
                }
            }
            None => {
                let set = match update {
                    Update::Replace(set) => set,
                    Update::Patch { removed, added } => {
                        Arc::new(self.acked.get(type_url).map(|s| s.patch(&removed, &added)).unwrap_or_else(|| TypeSet::default().patch(&removed, &added)))
                    }
                };
                self.acked = self.acked.with_set(type_url.clone(), set);
            }
        }
        self.replan(now, &mut notes);
        notes
    }

    /// A stream of the node closed: its subscriptions and unanswered responses go with it.
    pub fn stream_closed(&mut self, stream: u64, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        self.subscriptions.retain(|(s, _), _| *s != stream);
        self.in_flight.retain(|(s, _), _| *s != stream);
        self.replan(now, &mut notes);
        notes
    }

    /// When [`tick`](Self::tick) should next be called: the end of the current step's grace.
    pub fn deadline(&self) -> Option<Instant> {
        (self.mode() == Mode::Ordered && self.stopped.is_none() && self.step != Step::Converged).then(|| self.step_since + self.config.grace)
    }

    /// Proceeds past a step that has waited out its grace period, as if the node had
    /// acknowledged what it was sent of the types the step waits for.
    pub fn tick(&mut self, now: Instant) -> Vec<Note> {
        let mut notes = Vec::new();
        if !self.deadline().is_some_and(|d| d <= now) {
            return notes;
        }
        let step = self.step;
        for ty in step.awaits() {
            if self.offer.hold.contains(ty) {
                continue;
            }
            let set = self.offer.snapshot.get(ty).cloned().unwrap_or_default();
            self.acked = self.acked.with_set(Arc::from(*ty), set);
            self.in_flight.retain(|(_, t), _| t.as_ref() != *ty);
        }
        self.grace_expiries += 1;
        notes.push(Note::GraceExpired { step });
        self.replan(now, &mut notes);
        if self.step == step {
            // Nothing the node could acknowledge moves it on (it does not subscribe what the
            // step needs): restart the clock rather than expiring at every tick.
            self.step_since = now;
        }
        notes
    }

    fn replan(&mut self, now: Instant, notes: &mut Vec<Note>) {
        if self.mode() != Mode::Ordered {
            self.enter(Step::Converged, now, notes);
            self.set_offer(Offer { snapshot: self.target.clone(), hold: &[] });
            return;
        }
        if self.stopped.is_some() {
            return;
        }
        // A type no stream subscribes to gates nothing: count it as held at the target.
        let mut acked = self.acked.clone();
        for ty in CORE_TYPES {
            if !self.subscriptions.keys().any(|(_, t)| t.as_ref() == ty) {
                acked = acked.with_set(Arc::from(ty), self.target.get(ty).cloned().unwrap_or_default());
            }
        }
        let settled = !self.in_flight.keys().any(|(_, t)| t.as_ref() == LISTENER || t.as_ref() == ROUTE);
        let p = plan(&self.target, &acked, settled);
        self.enter(p.step, now, notes);
        let snapshot = if p.step >= Step::Cleanup { self.target.clone() } else { Arc::new(p.offer) };
        self.set_offer(Offer { snapshot, hold: p.hold });
    }

    fn enter(&mut self, step: Step, now: Instant, notes: &mut Vec<Note>) {
        if step == self.step {
            return;
        }
        self.step = step;
        self.step_since = now;
        notes.push(Note::Step(step));
        if step == Step::Converged {
            if let Some(t0) = self.diverged_since.take() {
                notes.push(Note::Converged(now.saturating_duration_since(t0)));
            }
        }
    }

    fn set_offer(&mut self, offer: Offer) {
        if !self.offer.same(&offer) {
            self.offer = offer;
        }
    }

    /// The rollout as `/debug/nodes` shows it.
    pub fn status(&self, now: Instant) -> RolloutStatus {
        let short = |t: &str| types::short_name(t).to_owned();
        RolloutStatus {
            mode: self.mode(),
            step: self.step,
            step_seconds: round_ms(now.saturating_duration_since(self.step_since)),
            waiting_for: if self.step == Step::Converged { Vec::new() } else { self.step.awaits().iter().map(|t| short(t)).collect() },
            held: self.offer.hold.iter().map(|t| short(t)).collect(),
            target_version: self.target.version(),
            offer_version: self.offer.snapshot.version(),
            acked_version: self.acked.version(),
            unanswered: self.in_flight.values().map(VecDeque::len).sum(),
            stopped: self.stopped.as_ref().map(|s| StoppedStatus {
                r#type: short(&s.type_url),
                message: s.message.clone(),
                seconds_ago: round_ms(now.saturating_duration_since(s.at)),
            }),
            restarts: self.restarts,
            nack_stops: self.nack_stops,
            grace_expiries: self.grace_expiries,
        }
    }

    /// Whether the offer changed since `previous` (the streams then re-evaluate every type).
    pub fn offer_differs(&self, previous: &Offer) -> bool {
        !self.offer.same(previous)
    }
}

fn round_ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
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
    pub target_version: String,
    pub offer_version: String,
    pub acked_version: String,
    /// Responses sent to the node and not answered yet.
    pub unanswered: usize,
    pub stopped: Option<StoppedStatus>,
    pub restarts: u64,
    pub nack_stops: u64,
    pub grace_expiries: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StoppedStatus {
    pub r#type: String,
    pub message: String,
    pub seconds_ago: f64,
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;

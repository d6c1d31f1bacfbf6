//! Holds for a whole node group, on the word of its own proxies (design 016, part 3b;
//! `--on-nack hold`, the default).
//!
//! A node that rejects a response holds back, at that node alone, the document it rejected
//! alone ([`xdst_core::node_holds`], part 3a): it keeps the parts it accepted, and every other
//! change goes on to it and to every other node. This module widens such a hold to the group,
//! so that its nodes are no longer sent what they would all refuse, only when:
//!
//! - **the group's own proxies say so**: nodes whose client identity an `identities:` rule with
//!   `proxy: true` names for the group (or, without mTLS, every node with
//!   `--nack-holds-without-mtls`), that acknowledged something. Anyone else's rejection stays
//!   at its own node;
//! - **together**: `--nack-quorum` of the group's connected proxies hold it back (`all` by
//!   default), or one of its canaries does.
//!
//! The group is then translated with the document as it read in the generation whose target
//! those proxies last held by their own acknowledgements (the last [`KEPT`] generations are
//! remembered, per document, only where they changed). A document they never accepted (a new
//! one) is left out for the group only when every proxy of the group rejected it, or a canary
//! did: a node that could serve it never loses it because another could not. Every other
//! group translates the intent as written.
//!
//! - **Once per rejection, about this version.** A hold at a node that is older than the
//!   document's current version reaching the cache is not about it.
//! - **Only what changed.** A document the proxies accepted as it reads now is not held: what
//!   changed is elsewhere (a plugin, a patch plugin's settings).
//! - **Until it changes**, the plugins change, or none of the proxies that made it is connected.
//! - **Per team.** At most [`MAX_HELD_PER_NAMESPACE`] documents of one namespace are held for
//!   groups at once (cluster-scoped ones count as namespace `""`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::warn;
use xdst_core::changes::NodeSync;
use xdst_core::intent::{IntentDocument, IntentSet};
use xdst_core::node_holds::{HeldStatus, Quorum};

use super::held::HeldReport;

/// The most documents of one namespace held for node groups at once.
pub const MAX_HELD_PER_NAMESPACE: usize = 16;
/// Generations whose documents are remembered, to know what a node accepted.
pub const KEPT: usize = 32;

/// How [`HeldReport::serving`] reads for a document held at what the node accepted.
const ACCEPTED: &str = "what the node accepted";

/// The condition reason on a document held after a rejection.
pub const REASON: &str = "Rejected";

/// A proxy whose rejection made a hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: String,
    pub client: u32,
    pub label: String,
}

/// The holds, and what the last generations published.
pub struct Nacked {
    /// Node group -> document id -> its hold.
    holds: BTreeMap<String, BTreeMap<Arc<str>, Hold>>,
    /// The plugins the holds were made under (set by the first [`Nacked::apply`]).
    plugins: Option<String>,
    history: History,
    quorum: Quorum,
    /// The rollouts' rejection count when the nodes were last looked at: until it moves,
    /// there is nothing new to look at (and no walk over every node each generation).
    looked_at: u64,
}

impl Default for Nacked {
    fn default() -> Self {
        Nacked::new(Quorum::All)
    }
}

struct Hold {
    /// The version the proxies rejected.
    rejected: Arc<IntentDocument>,
    /// What is translated in its place: the version they last accepted, or nothing.
    accepted: Option<Arc<IntentDocument>>,
    error: String,
    voters: Vec<Voter>,
}

/// One published generation: each node group's target version, and what each group's
/// holds put in place of the documents as written.
struct Generation {
    seq: u64,
    at: Instant,
    default: Arc<str>,
    groups: BTreeMap<String, Arc<str>>,
    held: GroupHeld,
}

impl Generation {
    fn version(&self, group: &str) -> &str {
        self.groups.get(group).unwrap_or(&self.default)
    }
}

/// Each document's versions over the last [`KEPT`] generations.
#[derive(Default)]
struct History {
    seq: u64,
    generations: VecDeque<Generation>,
    /// Document id -> (from which generation, its version then, or `None` once gone), oldest
    /// first. A version no longer current is kept compact (its text, not its parsed form):
    /// under EndpointSlice churn these were most of the memory a churn left behind.
    docs: HashMap<Arc<str>, Vec<Version>>,
    /// (generation, id): a document that got a new version (or went) in that generation, for
    /// the versions before it to be let go once no kept generation needs them.
    superseded: VecDeque<(u64, Arc<str>)>,
    /// The documents of the last generation.
    last: IntentSet,
}

/// From which generation on, a document read so (`None`: it was gone).
type Version = (u64, Option<Kept>);

/// What a group's holds put in place of documents: (id, the version translated or nothing).
pub type GroupHeld = BTreeMap<String, Vec<(Arc<str>, Option<Arc<IntentDocument>>)>>;

/// A version of a document: the current one shared with the intent, an older one compact.
enum Kept {
    Current(Arc<IntentDocument>),
    Before(xdst_core::intent::CompactDocument),
}

impl Kept {
    fn text(&self) -> &str {
        match self {
            Kept::Current(d) => &d.text,
            Kept::Before(d) => d.text(),
        }
    }

    fn document(&self) -> Arc<IntentDocument> {
        match self {
            Kept::Current(d) => d.clone(),
            Kept::Before(d) => Arc::new(d.restore()),
        }
    }
}

/// What a generation that changed a document to `next` keeps of its versions.
fn push_version(versions: &mut Vec<Version>, seq: u64, next: Option<Arc<IntentDocument>>) {
    if let Some((_, Some(kept))) = versions.last_mut()
        && let Kept::Current(d) = kept
    {
        *kept = Kept::Before(d.compact());
    }
    versions.push((seq, next.map(Kept::Current)));
}

impl History {
    /// Records a generation; the ids of the documents that changed (added, changed or gone)
    /// since the last one.
    fn record(
        &mut self,
        default: Arc<str>,
        groups: BTreeMap<String, Arc<str>>,
        held: GroupHeld,
        intent: &IntentSet,
        at: Instant,
    ) -> Vec<Arc<str>> {
        self.seq += 1;
        let seq = self.seq;
        let mut changed = Vec::new();
        // Most documents are as they were: the set shares them with the last one, and only
        // the parts that differ are visited.
        for (was, is) in intent.differences(&self.last) {
            match is {
                None => {
                    // Taken out.
                    let gone = was.expect("a difference has a side");
                    let versions = self.docs.entry(gone.id().clone()).or_default();
                    if matches!(versions.last(), Some((_, Some(_)))) {
                        push_version(versions, seq, None);
                        changed.push(gone.id().clone());
                    }
                }
                Some(doc) => {
                    // Added, or the same document, perhaps changed.
                    let versions = self.docs.entry(doc.id().clone()).or_default();
                    match versions.last() {
                        Some((_, Some(Kept::Current(d)))) if Arc::ptr_eq(d, doc) || d.text == doc.text => {}
                        _ => {
                            push_version(versions, seq, Some(doc.clone()));
                            changed.push(doc.id().clone());
                        }
                    }
                }
            }
        }
        for id in &changed {
            if self.docs.get(id).is_some_and(|v| v.len() > 1) {
                self.superseded.push_back((seq, id.clone()));
            }
        }
        self.last = intent.clone();
        self.generations.push_back(Generation { seq, at, default, groups, held });
        while self.generations.len() > KEPT {
            self.generations.pop_front();
        }
        // Of what is older than the oldest kept generation, only the version in force then
        // is kept: looked at for the documents changed since, each once.
        let oldest = self.generations.front().map_or(seq, |g| g.seq);
        while let Some((s, id)) = self.superseded.front()
            && *s <= oldest
        {
            if let Some(versions) = self.docs.get_mut(id) {
                let before = versions.iter().take_while(|(s, _)| *s <= oldest).count();
                versions.drain(..before.saturating_sub(1));
                if matches!(versions.as_slice(), [(s, None)] if *s <= oldest) {
                    self.docs.remove(id);
                }
            }
            self.superseded.pop_front();
        }
        changed
    }

    /// The generation a node of `group` holding target `version` holds.
    fn generation(&self, group: &str, version: &str) -> Option<u64> {
        self.generations.iter().rev().find(|g| g.version(group) == version).map(|g| g.seq)
    }

    /// Document `id` as generation `seq` translated it for `group` (`None`: it had none).
    fn document(&self, id: &str, seq: u64, group: &str) -> Option<Arc<IntentDocument>> {
        let held = self.generations.iter().find(|g| g.seq == seq).and_then(|g| g.held.get(group));
        if let Some((_, d)) = held.into_iter().flatten().find(|(h, _)| h.as_ref() == id) {
            return d.clone();
        }
        let versions = self.docs.get(id)?;
        versions.iter().rev().find(|(s, _)| *s <= seq).and_then(|(_, d)| d.as_ref().map(Kept::document))
    }

    /// When the version of `id` that `doc` is was first published, if it was.
    fn published_at(&self, doc: &IntentDocument) -> Option<Instant> {
        let (seq, _) =
            self.docs.get(doc.id())?.iter().rev().find(|(_, d)| d.as_ref().is_some_and(|d| d.text() == &*doc.text))?;
        self.generations.iter().find(|g| g.seq >= *seq).map(|g| g.at)
    }
}

/// How a node group is named in messages.
fn group_name(group: &str) -> String {
    if group.is_empty() { "the default node group".to_owned() } else { format!("node group {group:?}") }
}

impl Nacked {
    pub fn new(quorum: Quorum) -> Self {
        Nacked { holds: BTreeMap::new(), plugins: None, history: History::default(), quorum, looked_at: 0 }
    }

    /// Whether rejections came since the nodes were last looked at, given the rollouts'
    /// count (read before looking); notes the count as looked at.
    pub fn rejections_since(&mut self, count: u64) -> bool {
        std::mem::replace(&mut self.looked_at, count) != count
    }

    /// Holds for their group the documents its proxies hold back together (see the module's
    /// notes), as `current` reads; how many it newly holds.
    pub fn collect(&mut self, nodes: &[NodeSync], current: &IntentSet) -> usize {
        let now = Instant::now();
        let mut by_group: BTreeMap<&str, Vec<&NodeSync>> = BTreeMap::new();
        for n in nodes.iter().filter(|n| n.proxy && n.acknowledged) {
            by_group.entry(n.group.as_str()).or_default().push(n);
        }
        let mut added = 0;
        for (group, proxies) in by_group {
            let mut votes: BTreeMap<&str, Vec<(&NodeSync, &HeldStatus)>> = BTreeMap::new();
            for p in &proxies {
                for h in &p.held_at_node {
                    votes.entry(h.document.as_str()).or_default().push((p, h));
                }
            }
            for (id, voters) in votes {
                if self.holds.get(group).is_some_and(|h| h.contains_key(id)) {
                    continue;
                }
                let canary = voters.iter().any(|(n, _)| n.canary);
                let every = voters.len() >= proxies.len();
                if !canary && !self.quorum.met(voters.len(), proxies.len()) {
                    continue;
                }
                let Some(doc) = current.by_id(id) else { continue };
                // A hold from before this version reached the cache is not about it.
                let newest = voters.iter().map(|(_, h)| h.seconds_ago).fold(f64::INFINITY, f64::min);
                let at = now.checked_sub(Duration::from_secs_f64(newest.max(0.0)));
                if let (Some(at), Some(published)) = (at, self.history.published_at(doc))
                    && at + Duration::from_millis(2) < published
                {
                    continue;
                }
                let accepted = voters.iter().find_map(|(_, h)| {
                    let seq = self.history.generation(group, h.accepted_in.as_deref()?)?;
                    Some(self.history.document(id, seq, group))
                });
                let accepted = accepted.flatten();
                // A document they never accepted is left out for the group only when every
                // proxy rejected it (or a canary did).
                if accepted.is_none() && !every && !canary {
                    continue;
                }
                if accepted.as_ref().is_some_and(|a| a.text == doc.text) {
                    continue;
                }
                let namespace = doc.namespace.as_deref().unwrap_or("");
                let in_namespace = self
                    .holds
                    .values()
                    .flat_map(|h| h.values())
                    .filter(|h| h.rejected.namespace.as_deref().unwrap_or("") == namespace)
                    .count();
                if in_namespace >= MAX_HELD_PER_NAMESPACE {
                    warn!(document = %id, group, "its group's proxies rejected it, but {MAX_HELD_PER_NAMESPACE} documents of namespace {namespace:?} are held for groups already: held at those nodes only");
                    continue;
                }
                let (_, first) = voters[0];
                let who: Vec<&str> = voters.iter().map(|(n, _)| n.label.as_str()).collect();
                let mut error = format!(
                    "{} of the {} proxies of {} rejected it{}: {} rejected the {} with its content: {}",
                    voters.len(),
                    proxies.len(),
                    group_name(group),
                    if canary { " (a canary among them)" } else { "" },
                    who.join(", "),
                    first.type_url,
                    first.message.trim_end()
                );
                if accepted.is_none() {
                    error.push_str(" (new to them: left out for the group)");
                }
                let voters =
                    voters.iter().map(|(n, _)| Voter { id: n.id.clone(), client: n.client, label: n.label.clone() });
                self.holds.entry(group.to_owned()).or_default().insert(
                    doc.id().clone(),
                    Hold { rejected: doc.clone(), accepted, error, voters: voters.collect() },
                );
                added += 1;
            }
        }
        added
    }

    /// The intent each group with holds translates (each held document's accepted version, or
    /// nothing, in place of the one rejected), and what is held, as reports. A hold whose
    /// document changed or went, made under other plugins, or none of whose proxies is
    /// connected (`connected(group, voter)`) ends.
    pub fn apply(
        &mut self,
        intent: &IntentSet,
        plugins: &str,
        connected: impl Fn(&str, &Voter) -> bool,
    ) -> (BTreeMap<String, IntentSet>, Vec<HeldReport>) {
        if self.plugins.as_deref() != Some(plugins) {
            if self.plugins.is_some() {
                self.holds.clear();
            }
            self.plugins = Some(plugins.to_owned());
        }
        for (group, holds) in &mut self.holds {
            holds.retain(|id, h| {
                intent.by_id(id).is_some_and(|d| d.text == h.rejected.text)
                    && h.voters.iter().any(|v| connected(group, v))
            });
        }
        self.holds.retain(|_, h| !h.is_empty());
        let mut sets = BTreeMap::new();
        let mut reports = Vec::new();
        for (group, holds) in &self.holds {
            let mut set = intent.clone();
            for (id, h) in holds {
                match &h.accepted {
                    Some(a) => set.replace(a.clone()),
                    None => {
                        set.remove_id(id);
                    }
                }
                reports.push(HeldReport {
                    held: id.to_string(),
                    origin: h.rejected.origin.clone(),
                    error: h.error.clone(),
                    plugin: None,
                    serving: if h.accepted.is_some() { ACCEPTED } else { "nothing" },
                    group: group.clone(),
                    caused_by: h.voters.iter().map(|v| v.label.clone()).collect(),
                });
            }
            sets.insert(group.clone(), set);
        }
        (sets, reports)
    }

    /// What each group's holds put in place of documents now (for [`Nacked::record`]).
    pub fn held(&self) -> GroupHeld {
        self.holds
            .iter()
            .map(|(g, holds)| (g.clone(), holds.iter().map(|(id, h)| (id.clone(), h.accepted.clone())).collect()))
            .collect()
    }

    /// A generation translated `intent` (and each group its holds) and published what `cache`
    /// serves now, starting at `at` (before the cache had it: a node may reject it at once);
    /// the ids of the documents that changed since the last one.
    pub fn record(&mut self, cache: &xdst_core::cache::Cache, intent: &IntentSet, at: Instant) -> Vec<Arc<str>> {
        let (default, groups) = cache.sets();
        let groups = groups.iter().map(|(g, s)| (g.clone(), Arc::from(s.version()))).collect();
        let held = self.held();
        self.history.record(Arc::from(default.version()), groups, held, intent, at)
    }
}

#[cfg(test)]
#[path = "nacked_tests.rs"]
mod tests;

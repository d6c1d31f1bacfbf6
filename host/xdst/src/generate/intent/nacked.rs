//! Quarantine after a NACK (issue 35, part 3; `--on-nack hold`, the default).
//!
//! A node rejected a response. Its rollout knows which resources in it were new to the node
//! and, for each, the intent documents whose content in it changed since the node last
//! accepted it ([`xdst_core::blame::changed_documents`]: the parts a plugin marked as a
//! document's, and the rest as the resource's owner's), so a route inside a shared
//! RouteConfiguration blames its HTTPRoute, not the Gateway that owns the name. Each of those
//! documents is held at the version the node last accepted: the one in the generation whose
//! target the node last held by its own acknowledgements (or left out when the node never held
//! one with it), and every other document goes on. A generation then publishes the rest, the
//! rejected type has something else to send, and the node's plan moves on.
//!
//! - **Once per rejection.** A rejection is acted on once; one about a version older than the
//!   document's current one (the author changed it since) is not.
//! - **Only what changed.** A document the node accepted as it reads now is not held: what
//!   changed is elsewhere (a plugin, a patch plugin's settings), and holding it would change
//!   nothing.
//! - **Until it changes.** A hold lasts while the document reads as it did when it was
//!   rejected and the plugins are the same; then the new version is tried.
//! - **Bounded.** At most [`MAX_HELD`] documents are held this way; past that a rejection holds
//!   nothing more and the node's plan stays stopped (as with `--on-nack stop`).
//! - **What a node accepted** is known for the last [`KEPT`] generations published.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::warn;
use xdst_core::changes::NodeSync;
use xdst_core::intent::{IntentDocument, IntentSet};

use super::held::HeldReport;

/// The most documents held after rejections at once.
pub const MAX_HELD: usize = 16;
/// Generations whose documents are remembered, to know what a node accepted.
pub const KEPT: usize = 32;

/// How [`HeldReport::serving`] reads for a document held at what the node accepted.
const ACCEPTED: &str = "what the node accepted";

/// The condition reason on a document held after a rejection.
pub const REASON: &str = "Rejected";

/// The holds, and what the last generations published.
#[derive(Default)]
pub struct Nacked {
    holds: BTreeMap<Arc<str>, Hold>,
    /// The plugins the holds were made under (set by the first [`Nacked::apply`]).
    plugins: Option<String>,
    history: History,
    /// Rejections acted on (by their message's allocation, which a rejection keeps for its
    /// life), while nodes still report them.
    seen: HashSet<usize>,
    /// The rollouts' rejection count when the nodes were last looked at: until it moves,
    /// there is nothing new to look at (and no walk over every node each generation).
    looked_at: u64,
}

struct Hold {
    /// The version a node rejected.
    rejected: Arc<IntentDocument>,
    /// What is translated in its place: the version the node last accepted, or nothing.
    accepted: Option<Arc<IntentDocument>>,
    error: String,
    plugin: Option<String>,
}

/// One published generation: each node group's target version.
struct Generation {
    seq: u64,
    at: Instant,
    default: Arc<str>,
    groups: BTreeMap<String, Arc<str>>,
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
    /// first.
    docs: HashMap<Arc<str>, Vec<Version>>,
    /// The documents of the last generation, in the set's order.
    last: Vec<Arc<IntentDocument>>,
}

/// From which generation on, a document read so (`None`: it was gone).
type Version = (u64, Option<Arc<IntentDocument>>);

impl History {
    fn record(&mut self, default: Arc<str>, groups: BTreeMap<String, Arc<str>>, intent: &IntentSet) {
        self.seq += 1;
        let seq = self.seq;
        // Most documents are as they were: the same allocation (the parse cache keeps it) at
        // the same place in the set's order. Only the others are looked at.
        let now: Vec<&Arc<IntentDocument>> = intent.shared().collect();
        let same_ids = now.len() == self.last.len()
            && now.iter().zip(&self.last).all(|(n, l)| Arc::ptr_eq(n, l) || n.id() == l.id());
        if same_ids {
            for (doc, last) in now.iter().zip(&self.last) {
                if !Arc::ptr_eq(doc, last) && doc.text != last.text {
                    self.docs.entry(doc.id().clone()).or_default().push((seq, Some((*doc).clone())));
                }
            }
        } else {
            for doc in &now {
                let versions = self.docs.entry(doc.id().clone()).or_default();
                match versions.last() {
                    Some((_, Some(d))) if Arc::ptr_eq(d, doc) || d.text == doc.text => {}
                    _ => versions.push((seq, Some((*doc).clone()))),
                }
            }
            for (id, versions) in &mut self.docs {
                if matches!(versions.last(), Some((_, Some(_)))) && intent.by_id(id).is_none() {
                    versions.push((seq, None));
                }
            }
        }
        self.last = now.into_iter().cloned().collect();
        self.generations.push_back(Generation { seq, at: Instant::now(), default, groups });
        while self.generations.len() > KEPT {
            self.generations.pop_front();
        }
        // Every KEPT generations, of what is older than the oldest kept generation only the
        // version in force then is kept.
        if seq.is_multiple_of(KEPT as u64) {
            let oldest = self.generations.front().map_or(seq, |g| g.seq);
            self.docs.retain(|_, versions| {
                let before = versions.iter().take_while(|(s, _)| *s <= oldest).count();
                versions.drain(..before.saturating_sub(1));
                !matches!(versions.as_slice(), [(s, None)] if *s <= oldest)
            });
        }
    }

    /// The generation a node of `group` holding target `version` holds.
    fn generation(&self, group: &str, version: &str) -> Option<u64> {
        self.generations.iter().rev().find(|g| g.version(group) == version).map(|g| g.seq)
    }

    /// Document `id` as generation `seq` translated it (`None`: it had none).
    fn document(&self, id: &str, seq: u64) -> Option<Arc<IntentDocument>> {
        let versions = self.docs.get(id)?;
        versions.iter().rev().find(|(s, _)| *s <= seq).and_then(|(_, d)| d.clone())
    }

    /// When the version of `id` that `doc` is was first published, if it was.
    fn published_at(&self, doc: &IntentDocument) -> Option<Instant> {
        let (seq, _) =
            self.docs.get(doc.id())?.iter().rev().find(|(_, d)| d.as_ref().is_some_and(|d| d.text == doc.text))?;
        self.generations.iter().find(|g| g.seq >= *seq).map(|g| g.at)
    }
}

impl Nacked {
    /// Whether rejections came since the nodes were last looked at, given the rollouts'
    /// count (read before looking); notes the count as looked at.
    pub fn rejections_since(&mut self, count: u64) -> bool {
        std::mem::replace(&mut self.looked_at, count) != count
    }

    /// Takes the rejections `nodes` report that have not been acted on, and holds the
    /// documents each blames; how many it newly holds.
    pub fn collect(&mut self, nodes: &[NodeSync], current: &IntentSet) -> usize {
        let now = Instant::now();
        let reported: HashSet<usize> =
            nodes.iter().flat_map(|n| &n.rejections).map(|r| Arc::as_ptr(&r.message) as *const u8 as usize).collect();
        self.seen.retain(|m| reported.contains(m));
        let mut added = 0;
        for (node, rejection) in nodes.iter().flat_map(|n| n.rejections.iter().map(move |r| (n, r))) {
            if !self.seen.insert(Arc::as_ptr(&rejection.message) as *const u8 as usize) {
                continue;
            }
            let at = now.checked_sub(Duration::from_secs_f64(rejection.seconds_ago.max(0.0)));
            let accepted_in = node.synced.as_deref().map(|v| self.history.generation(&node.group, v));
            for resource in &rejection.resources {
                for id in &resource.content_of {
                    if self.holds.contains_key(id.as_str()) {
                        continue;
                    }
                    let Some(doc) = current.by_id(id) else { continue };
                    // A rejection from before this version reached the cache is not about it.
                    let published = self.history.published_at(doc);
                    if let (Some(at), Some(published)) = (at, published)
                        && at + Duration::from_millis(2) < published
                    {
                        continue;
                    }
                    let (accepted, unknown) = match accepted_in {
                        None => (None, false),
                        Some(Some(seq)) => (self.history.document(id, seq), false),
                        Some(None) => (None, true),
                    };
                    if accepted.as_ref().is_some_and(|a| a.text == doc.text) {
                        continue;
                    }
                    if self.holds.len() >= MAX_HELD {
                        warn!(document = %id, node = %node.label, "a rejection blames it, but {MAX_HELD} documents are held after rejections already: not held");
                        continue;
                    }
                    let mut error = format!(
                        "node {} rejected the {} {:?} that has its content: {}",
                        node.label,
                        rejection.r#type,
                        resource.name,
                        rejection.message.trim_end()
                    );
                    if unknown {
                        error.push_str(" (what the node last accepted is older than the generations kept: left out)");
                    }
                    self.holds.insert(
                        doc.id().clone(),
                        Hold {
                            rejected: doc.clone(),
                            accepted,
                            error,
                            plugin: resource.attribution.produced_by.clone(),
                        },
                    );
                    added += 1;
                }
            }
        }
        added
    }

    /// Puts each held document's accepted version (or nothing) in `intent` in place of the
    /// rejected one; a hold whose document changed or went, or made under other plugins, ends.
    /// What is held, as reports.
    pub fn apply(&mut self, intent: &mut IntentSet, plugins: &str) -> Vec<HeldReport> {
        if self.plugins.as_deref() != Some(plugins) {
            if self.plugins.is_some() {
                self.holds.clear();
            }
            self.plugins = Some(plugins.to_owned());
        }
        self.holds.retain(|id, h| intent.by_id(id).is_some_and(|d| d.text == h.rejected.text));
        self.holds
            .iter()
            .map(|(id, h)| {
                match &h.accepted {
                    Some(a) => intent.replace(a.clone()),
                    None => {
                        intent.remove_id(id);
                    }
                }
                HeldReport {
                    held: id.to_string(),
                    origin: h.rejected.origin.clone(),
                    error: h.error.clone(),
                    plugin: h.plugin.clone(),
                    serving: if h.accepted.is_some() { ACCEPTED } else { "nothing" },
                    group: String::new(),
                }
            })
            .collect()
    }

    /// A generation translated `intent` and published what `cache` serves now.
    pub fn record(&mut self, cache: &xdst_core::cache::Cache, intent: &IntentSet) {
        let (default, groups) = cache.sets();
        let groups = groups.iter().map(|(g, s)| (g.clone(), Arc::from(s.version()))).collect();
        self.history.record(Arc::from(default.version()), groups, intent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdst_core::changes::NodeSync;
    use xdst_core::resource::Attribution;
    use xdst_core::rollout::{RejectedResource, StoppedStatus};

    fn set(docs: &[(&str, &str)]) -> IntentSet {
        let mut s = IntentSet::default();
        for (name, path) in docs {
            let text = format!("kind: Route\nmetadata: {{name: {name}}}\nspec: {{path: {path}}}\n");
            for d in xdst_core::intent::parse_file("routes.yaml", &text).unwrap() {
                s.add(d).unwrap();
            }
        }
        s
    }

    fn node(synced: Option<&str>, message: &Arc<str>, blamed: &[&str]) -> NodeSync {
        NodeSync {
            group: String::new(),
            id: "envoy".into(),
            client: 1,
            label: "envoy".into(),
            synced: synced.map(Arc::from),
            rejection: None,
            rejections: vec![StoppedStatus {
                r#type: "rds".into(),
                stream: 1,
                message: message.clone(),
                seconds_ago: 0.0,
                resources: vec![RejectedResource {
                    name: "gw".into(),
                    attribution: Attribution { produced_by: Some("p".into()), ..Default::default() },
                    named_in_error: false,
                    content_of: blamed.iter().map(|s| s.to_string()).collect(),
                }],
                resources_count: 1,
            }],
        }
    }

    fn path(s: &IntentSet, id: &str) -> Option<String> {
        s.by_id(id).map(|d| d.json["spec"]["path"].as_str().unwrap_or_default().to_owned())
    }

    /// A rejected document is held at what the node accepted (a new one left out), once per
    /// rejection, until it changes; what the node accepted as it reads now is never held.
    #[test]
    fn a_rejected_document_is_held_at_what_the_node_accepted_until_it_changes() {
        let mut n = Nacked::default();
        let v1 = set(&[("a", "/a1"), ("b", "/b1")]);
        n.history.record("g1".into(), BTreeMap::new(), &v1);
        let v2 = set(&[("a", "/a2"), ("b", "/b1"), ("c", "/c1")]);
        n.history.record("g2".into(), BTreeMap::new(), &v2);
        let message: Arc<str> = "bad route".into();
        // Synced at g1, rejected g2: a is held at /a1, c left out, b (unchanged) not held.
        let nodes = [node(Some("g1"), &message, &["Route/a", "Route/b", "Route/c"])];
        assert_eq!(n.collect(&nodes, &v2), 2);
        assert_eq!(n.collect(&nodes, &v2), 0, "a rejection is acted on once");
        let mut served = v2.clone();
        let held = n.apply(&mut served, "plugins");
        assert_eq!(held.iter().map(|h| h.held.as_str()).collect::<Vec<_>>(), ["Route/a", "Route/c"]);
        assert!(held[0].error.contains("bad route") && held[0].serving == ACCEPTED && held[1].serving == "nothing");
        assert_eq!(
            (path(&served, "Route/a"), path(&served, "Route/b"), path(&served, "Route/c")),
            (Some("/a1".into()), Some("/b1".into()), None)
        );
        // The author changes a: its hold ends and the new version is tried.
        let v3 = set(&[("a", "/a3"), ("b", "/b1"), ("c", "/c1")]);
        let mut served = v3.clone();
        assert_eq!(n.apply(&mut served, "plugins").len(), 1);
        assert_eq!(path(&served, "Route/a").as_deref(), Some("/a3"));
        // Other plugins: every hold ends.
        let mut served = v3.clone();
        assert!(n.apply(&mut served, "other plugins").is_empty());
    }

    /// A node that rejected two types at once (served unordered or by name): both are acted on.
    #[test]
    fn every_rejection_of_a_node_is_acted_on() {
        let mut n = Nacked::default();
        let v1 = set(&[("a", "/a1"), ("b", "/b1")]);
        n.history.record("g1".into(), BTreeMap::new(), &v1);
        let v2 = set(&[("a", "/a2"), ("b", "/b2")]);
        n.history.record("g2".into(), BTreeMap::new(), &v2);
        let (m1, m2): (Arc<str>, Arc<str>) = ("rds: no".into(), "lds: no".into());
        let mut both = node(Some("g1"), &m1, &["Route/a"]);
        both.rejections.extend(node(Some("g1"), &m2, &["Route/b"]).rejections);
        assert_eq!(n.collect(&[both], &v2), 2);
    }

    /// What remembering the documents costs a generation (docs/PERFORMANCE.md):
    /// `cargo test --release -p xdst --lib nacked::tests::history_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a benchmark: run it by name"]
    fn history_cost() {
        let n = 10_000;
        let mut intent = set(&(0..n)
            .map(|i| (format!("r{i}"), "/x".to_owned()))
            .collect::<Vec<_>>()
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect::<Vec<_>>());
        let mut h = History::default();
        h.record("g0".into(), BTreeMap::new(), &intent);
        let runs = 200;
        let started = Instant::now();
        for i in 0..runs {
            // One document changes a generation, as a team's edit does.
            let text = format!("kind: Route\nmetadata: {{name: r{}}}\nspec: {{path: /v{i}}}\n", i % n);
            let doc = xdst_core::intent::parse_file("routes.yaml", &text).unwrap().remove(0);
            intent.replace(Arc::new(doc));
            h.record(format!("g{}", i + 1).into(), BTreeMap::new(), &intent);
        }
        let each = started.elapsed() / runs;
        eprintln!("History::record, {n} documents, one changed a generation: {each:?} a generation");
        assert!(h.generations.len() == KEPT);
    }

    /// A node that never held a target has nothing accepted: the document is left out; one
    /// whose target is older than the kept generations too, and the error says why.
    #[test]
    fn what_a_node_accepted_is_known_for_the_kept_generations() {
        let mut n = Nacked::default();
        for i in 0..KEPT + 2 {
            n.history.record(format!("g{i}").into(), BTreeMap::new(), &set(&[("a", &format!("/a{i}"))]));
        }
        let now = set(&[("a", &format!("/a{}", KEPT + 1))]);
        let m1: Arc<str> = "no".into();
        assert_eq!(n.collect(&[node(Some("g0"), &m1, &["Route/a"])], &now), 1);
        let mut served = now.clone();
        let held = n.apply(&mut served, "");
        assert!(held[0].error.contains("older than the generations kept") && path(&served, "Route/a").is_none());
        assert_eq!(
            n.history.document("Route/a", n.history.generation("", "g5").unwrap()).map(|d| d.text.contains("/a5")),
            Some(true)
        );
        assert!(n.history.docs["Route/a"].len() <= 2 * KEPT + 1, "history is bounded");
    }
}

//! "Is my change live?": every good generation is a change with an id, and
//! `GET /changes/{id}` says, per node group, which connected nodes hold it, which do not yet,
//! and which rejected it (with the resources, plugins and documents the rejection points at).
//!
//! - A change's id is the generation's number on this server (1, 2, ...), or with `--store`
//!   the store revision it translated, so every replica answers to the id a write returned.
//!   Ids only grow; a change is held once the node holds the first generation whose id is at
//!   least it (a later generation includes every earlier write).
//! - The ledger keeps, per generation, each group's target version ([`MAX_KEPT`] of them).
//!   A node's rollout records the last target it held by its own acknowledgements
//!   ([`crate::rollout::Rollout::holds_target`]: ACKed on its own streams, for everything
//!   it asks for; never a grace expiry, an attach or another client's stream), so a node holds
//!   change `id` when that target's version is one its group had at a generation at or after
//!   `id`. The bookkeeping per node is a pointer to the group's shared snapshot; answering
//!   works out each distinct target's version once and walks the nodes once with a hash
//!   lookup each.
//! - Answers stay small whatever the fleet: counts per group are whole, and at most
//!   [`MAX_LISTED`] nodes are named in all (waited for, and rejecting), each rejection with
//!   its clipped message and at most a few resources.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::rollout::StoppedStatus;

/// Generations kept: a change older than the oldest is answered with the oldest kept one at
/// or after it, which includes it.
pub const MAX_KEPT: usize = 1024;
/// The most nodes named in one answer, waited for and rejecting together, over every group
/// (the counts are always whole).
pub const MAX_LISTED: usize = 100;
/// The most documents remembered of one change (a change of more is taken as one of every
/// document: any document held anywhere is then one of its).
pub const MAX_DOCUMENTS: usize = 1000;
/// The most holds listed in one answer.
pub const MAX_HELD_OUT: usize = 20;

struct Entry {
    id: i64,
    at: u64,
    /// The version every group without a set of its own gets.
    default: String,
    groups: BTreeMap<String, String>,
    /// The documents the change wrote (added, changed or removed), by id; `None`: more than
    /// [`MAX_DOCUMENTS`].
    documents: Option<Arc<[Arc<str>]>>,
}

impl Entry {
    fn wrote(&self, id: &str) -> bool {
        self.documents.as_ref().is_none_or(|d| d.iter().any(|x| x.as_ref() == id))
    }

    fn version(&self, group: &str) -> &str {
        self.groups.get(group).unwrap_or(&self.default)
    }
}

/// The changes this server published.
#[derive(Default)]
pub struct Ledger {
    entries: Mutex<VecDeque<Entry>>,
}

/// What a node's rollout says for a change report.
pub struct NodeSync {
    pub group: String,
    pub id: String,
    /// Which client of the node id (1 unless processes share it).
    pub client: u32,
    /// How reports name it: the id, or with processes sharing it, which client and from where.
    pub label: String,
    /// The group target version it last held by its own acknowledgements.
    pub synced: Option<std::sync::Arc<str>>,
    /// The documents it held back then (design 016, part 3a): it holds that target but for
    /// them.
    pub held_back: std::sync::Arc<[std::sync::Arc<str>]>,
    /// The documents it holds back now, each rejected alone, with why.
    pub held_at_node: Vec<crate::node_holds::HeldStatus>,
    /// Whether it is one of its group's proxies: its rejections count toward a group's hold.
    pub proxy: bool,
    /// Whether it is one of its group's canaries (it takes each change first).
    pub canary: bool,
    /// Whether it ever acknowledged anything (a node that did not is never acted on).
    pub acknowledged: bool,
    /// The rejection it is held up by (its own streams'), with what it points at.
    pub rejection: Option<StoppedStatus>,
    /// Every rejection it is held up by, one per stream and type (`rejection` is the first):
    /// what the NACK quarantine acts on. Empty for almost every node.
    pub rejections: Vec<StoppedStatus>,
}

/// `GET /changes/{id}`.
#[derive(Debug, Serialize)]
pub struct ChangeReport {
    pub change: i64,
    /// The generation that carries the change, once there is one.
    pub generation: Option<i64>,
    /// Unix seconds it was published.
    pub published_at: Option<u64>,
    /// Every connected node of every group (or of the group asked for) holds it.
    pub live: bool,
    pub groups: BTreeMap<String, GroupReport>,
    /// The documents the change wrote (the first [`MAX_DOCUMENTS`]), when known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub documents: Vec<String>,
    /// Where a document the change wrote is held out: at a node that rejected it (from the
    /// nodes' own reports), for a group, or failing (filled in by the server). Any of them
    /// means the change is not served as written everywhere (`xdst wait` exits 4).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_out: Vec<HeldOut>,
    /// What the newest generation holds out because it fails (documents, files, store keys;
    /// the rest is served): a change to one of them is not served as written, whatever the
    /// nodes hold. Filled in by the server, which knows the generation's state.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
    /// Documents the newest generation's plugins translated, but not as written (a route not
    /// accepted, a slice left out), by id. Filled in by the server.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// A document of a change held out somewhere.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOut {
    pub document: String,
    /// `node` (one node rejected it alone and keeps it out), `group` (its proxies did, for
    /// the group) or `failing` (it does not translate or pass the checks).
    pub scope: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The node, as reports name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why: the node's message, or the failure.
    pub why: String,
}

#[derive(Debug, Default, Serialize)]
pub struct GroupReport {
    pub nodes: usize,
    pub holding: usize,
    /// Nodes that do not hold it yet and have not rejected it (named while the answer has
    /// room: [`MAX_LISTED`] names in all).
    pub pending: Vec<String>,
    pub pending_count: usize,
    /// Nodes held up by their own rejection (named while the answer has room).
    pub rejected: Vec<Rejection>,
    pub rejected_count: usize,
}

#[derive(Debug, Serialize)]
pub struct Rejection {
    pub node: String,
    /// Which client of the node id rejected it (1 unless processes share the id).
    pub client: u32,
    /// The node as reports name it (with the client and its address when the id is shared).
    pub label: String,
    #[serde(flatten)]
    pub status: StoppedStatus,
}

impl Ledger {
    /// Records what `cache` serves now as a change: with `--store`, change `revision` (the
    /// store revision the generation translated); otherwise the next number, and only if
    /// something a node is served changed (a generation that publishes the same again, such
    /// as the one the intent API's own file write sets off, is no new change).
    pub fn record_published(&self, revision: Option<i64>, cache: &crate::cache::Cache, documents: &[Arc<str>]) {
        let (default, groups) = cache.sets();
        let groups: BTreeMap<String, String> = groups.iter().map(|(g, s)| (g.clone(), s.version())).collect();
        let default = default.version();
        let id = match revision {
            Some(r) => r,
            None => {
                let e = self.entries.lock().unwrap();
                match e.back() {
                    Some(last) if last.default == default && last.groups == groups => return,
                    Some(last) => last.id + 1,
                    None => 1,
                }
            }
        };
        let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let documents = (documents.len() <= MAX_DOCUMENTS).then(|| documents.into());
        self.record_with(id, at, default, groups, documents);
    }

    /// Records a good generation: its id and each group's target version.
    pub fn record(&self, id: i64, at: u64, default: String, groups: BTreeMap<String, String>) {
        self.record_with(id, at, default, groups, Some(Arc::new([])));
    }

    fn record_with(
        &self,
        id: i64,
        at: u64,
        default: String,
        groups: BTreeMap<String, String>,
        documents: Option<Arc<[Arc<str>]>>,
    ) {
        let mut e = self.entries.lock().unwrap();
        // A store revision can repeat (a reload translates the same revision again): the
        // newest generation for an id stands for it.
        while e.back().is_some_and(|last| last.id >= id) {
            e.pop_back();
        }
        e.push_back(Entry { id, at, default, groups, documents });
        while e.len() > MAX_KEPT {
            e.pop_front();
        }
    }

    /// Whether any kept generation translated for `group`.
    pub fn knows_group(&self, group: &str) -> bool {
        group.is_empty() || self.entries.lock().unwrap().iter().any(|e| e.groups.contains_key(group))
    }

    /// The id of the newest change.
    pub fn latest(&self) -> Option<i64> {
        self.entries.lock().unwrap().back().map(|e| e.id)
    }

    /// Who holds change `id`, among `nodes`, optionally in `group` only.
    pub fn report(&self, id: i64, nodes: &[NodeSync], group: Option<&str>) -> ChangeReport {
        let entries = self.entries.lock().unwrap();
        let first = entries.iter().position(|e| e.id >= id);
        let carrier = first.map(|i| &entries[i]);
        // Per group: the versions it had from the carrying generation on.
        let mut holds: BTreeMap<&str, HashSet<&str>> = BTreeMap::new();
        let later: Vec<&Entry> = first.map(|i| entries.iter().skip(i).collect()).unwrap_or_default();
        let mut groups: BTreeMap<String, GroupReport> = BTreeMap::new();
        let mut listed = 0;
        let mut held_out = Vec::new();
        for n in nodes.iter().filter(|n| group.is_none_or(|g| g == n.group)) {
            let versions =
                holds.entry(n.group.as_str()).or_insert_with(|| later.iter().map(|e| e.version(&n.group)).collect());
            let g = groups.entry(n.group.clone()).or_default();
            g.nodes += 1;
            // What the node keeps out of what the change wrote (design 016, part 3a).
            let kept_out: Vec<&crate::node_holds::HeldStatus> =
                n.held_at_node.iter().filter(|h| carrier.is_some_and(|c| c.wrote(&h.document))).collect();
            for h in &kept_out {
                if held_out.len() < MAX_HELD_OUT {
                    held_out.push(HeldOut {
                        document: h.document.clone(),
                        scope: "node",
                        group: Some(n.group.clone()),
                        node: Some(n.label.clone()),
                        why: h.message.to_string(),
                    });
                }
            }
            let synced = n.synced.as_deref().is_some_and(|v| versions.contains(v));
            let held_back = n.held_back.iter().any(|d| carrier.is_some_and(|c| c.wrote(d)));
            if synced && !held_back && kept_out.is_empty() {
                g.holding += 1;
            } else if let Some(rejection) = n.rejection.clone().or_else(|| kept_out.first().map(|h| h.as_rejection())) {
                g.rejected_count += 1;
                if listed < MAX_LISTED {
                    listed += 1;
                    g.rejected.push(Rejection {
                        node: n.id.clone(),
                        client: n.client,
                        label: n.label.clone(),
                        status: rejection,
                    });
                }
            } else {
                g.pending_count += 1;
                if listed < MAX_LISTED {
                    listed += 1;
                    g.pending.push(n.label.clone());
                }
            }
        }
        ChangeReport {
            change: id,
            generation: carrier.map(|e| e.id),
            published_at: carrier.map(|e| e.at),
            live: carrier.is_some() && groups.values().all(|g| g.holding == g.nodes),
            groups,
            documents: carrier
                .and_then(|c| c.documents.as_ref())
                .map(|d| d.iter().map(|x| x.to_string()).collect())
                .unwrap_or_default(),
            held_out,
            held: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Whether change `id` wrote document `document` (a change of more than
    /// [`MAX_DOCUMENTS`], or one no longer kept, counts as writing every document).
    pub fn wrote(&self, id: i64, document: &str) -> bool {
        let entries = self.entries.lock().unwrap();
        entries.iter().find(|e| e.id >= id).is_none_or(|e| e.wrote(document))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(group: &str, id: &str, synced: Option<&str>) -> NodeSync {
        NodeSync {
            group: group.into(),
            id: id.into(),
            client: 1,
            label: id.into(),
            synced: synced.map(Into::into),
            held_back: std::sync::Arc::new([]),
            held_at_node: Vec::new(),
            proxy: false,
            canary: false,
            acknowledged: synced.is_some(),
            rejection: None,
            rejections: Vec::new(),
        }
    }

    fn versions(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(g, v)| (g.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_node_holds_a_change_once_it_converged_on_that_generation_or_a_later_one() {
        let l = Ledger::default();
        l.record(1, 10, "d1".into(), versions(&[("edge", "e1")]));
        l.record(2, 20, "d2".into(), versions(&[("edge", "e1")]));
        l.record(3, 30, "d3".into(), versions(&[("edge", "e3")]));
        let nodes = [node("", "a", Some("d2")), node("", "b", Some("d1")), node("edge", "c", Some("e1"))];

        let r = l.report(2, &nodes, None);
        assert_eq!((r.generation, r.published_at, r.live), (Some(2), Some(20), false));
        assert_eq!((r.groups[""].holding, r.groups[""].pending.as_slice()), (1, &["b".to_owned()][..]));
        // The edge group's version did not change in generation 2: its node holds change 2.
        assert_eq!(r.groups["edge"].holding, 1);
        assert!(!l.report(3, &nodes, Some("edge")).live, "e1 is not e3");
        assert!(l.report(1, &nodes, Some("edge")).live);
        // A change no generation carries yet is not live, even with no nodes.
        let r = l.report(4, &[], None);
        assert_eq!((r.generation, r.live), (None, false));
    }

    #[test]
    fn rejecters_are_named_with_what_they_rejected_and_lists_are_bounded() {
        let l = Ledger::default();
        l.record(5, 1, "v".into(), BTreeMap::new());
        let mut nodes: Vec<NodeSync> = (0..MAX_LISTED + 5).map(|i| node("", &format!("n{i}"), None)).collect();
        nodes[0].rejection = Some(StoppedStatus {
            r#type: "lds".into(),
            stream: 3,
            message: "bad listener".into(),
            seconds_ago: 1.0,
            resources: vec![],
            resources_count: 0,
        });
        let r = l.report(5, &nodes, None);
        let g = &r.groups[""];
        assert_eq!((g.rejected_count, g.rejected[0].node.as_str()), (1, "n0"));
        // One list budget for the whole answer: the rejecter, then the first waiting nodes.
        assert_eq!((g.pending_count, g.pending.len()), (MAX_LISTED + 4, MAX_LISTED - 1));
        // Over many groups the budget is still one.
        let many: Vec<NodeSync> = (0..3 * MAX_LISTED).map(|i| node(&format!("g{i}"), &format!("n{i}"), None)).collect();
        let r = l.report(5, &many, None);
        assert_eq!(r.groups.values().map(|g| g.pending.len()).sum::<usize>(), MAX_LISTED);
        assert_eq!(r.groups.values().map(|g| g.pending_count).sum::<usize>(), 3 * MAX_LISTED);
    }

    #[test]
    fn the_ledger_is_bounded_and_an_old_change_is_answered_by_the_oldest_kept() {
        let l = Ledger::default();
        for i in 1..=(MAX_KEPT as i64 + 10) {
            l.record(i, i as u64, format!("v{i}"), BTreeMap::new());
        }
        assert_eq!(l.entries.lock().unwrap().len(), MAX_KEPT);
        assert_eq!(l.report(1, &[], None).generation, Some(11));
        // A revision translated again replaces its entry.
        l.record(MAX_KEPT as i64 + 10, 0, "again".into(), BTreeMap::new());
        assert_eq!(l.latest(), Some(MAX_KEPT as i64 + 10));
    }
}

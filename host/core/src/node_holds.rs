//! What one node keeps out of its target after rejecting it (design 016, part 3a): a
//! rejection is held where it was made.
//!
//! When a node rejects a response, the documents *in play* are those whose parts in it differ
//! from the form the node holds (xdst's own diff, [`crate::blame::changed_documents`]; never
//! the names in the node's message). Then:
//!
//! - **none** (the node never acknowledged anything, or nothing in the response is any
//!   document's): nothing is held, and the node's plan stops as before;
//! - **one**: it is held at this node: the node is offered every resource it is in with its
//!   parts as the node holds them ([`crate::revert`]), and the rest of the change goes on;
//! - **several**: they are suspects, all reverted at the node, then released half at a time
//!   (the *trial*): an acknowledgement clears the half, a rejection narrows the search to it,
//!   and a document rejected alone is held.
//!
//! A held document is tried again *alone* (a *probe*: it alone is released, once nothing else
//! is on its way to the node): when its author changes it (at once the first time; after a
//! wait that doubles with each rejection in a row, so a route rewritten every few
//! milliseconds with values the node refuses is probed a few times a second at most and is
//! never bundled with other teams' changes), and at its retry time (a port freed on the
//! node's host is then taken up), the wait doubling with each repeated rejection. An
//! acknowledged probe ends the hold. Every other node is served the document as written:
//! holding it for a group is the generation plane's decision (part 3b), on the word of the
//! group's own proxies.
//!
//! Sans-IO like the rollout that owns it; what decoding costs is shared by every node of a
//! group through the memo kept with the group's target ([`Memo`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::resource::Resource;
use crate::revert::{Digest, Reverted};
use crate::snapshot::Snapshot;
use crate::types::{CLUSTER, ENDPOINT, ROUTE};

/// The most documents held at one node; a rejection past it stops the node's plan.
pub const MAX_HELD: usize = 32;
/// The most documents suspected at once.
pub const MAX_SUSPECTS: usize = 64;
/// The most resources of one rejected response compared with what the node holds; a
/// response with more new to the node is not split (the plan stops).
pub const MAX_ANALYSED: usize = 256;
/// The longest wait before a held document is tried again, as a multiple of the first.
pub const MAX_BACKOFF: u32 = 16;

/// A resource, by type and name.
pub type Place = (Arc<str>, Arc<str>);

/// One document held at the node.
#[derive(Debug, Clone)]
pub struct DocHold {
    /// The type of the response the node rejected it in.
    pub type_url: Arc<str>,
    /// The node's message (clipped where it entered, shared with the rejection).
    pub message: Arc<str>,
    pub at: Instant,
    /// When it is tried again (alone): its retry, or sooner once its author changed it.
    pub retry_at: Instant,
    /// Whether it is being tried now (released to the node, alone).
    pub probing: bool,
    /// Whether its parts in the group's target are no longer those the node rejected.
    pub changed: bool,
    /// The group target the node last held by its own acknowledgements without this document
    /// changed (what the generation plane holds it at, for a group).
    pub accepted_in: Option<Arc<str>>,
    /// Where its parts are, with the digest of its parts in the form the node rejected (`None`:
    /// it had none there, or the form did not decode).
    rejected: BTreeMap<Place, Option<Digest>>,
    /// Per place, the version of the group's resource last compared with `rejected`.
    compared: BTreeMap<Place, Arc<str>>,
}

/// What repeated rejections of one document have cost it.
#[derive(Debug, Clone, Default)]
struct Strikes {
    count: u32,
    accepted_in: Option<Arc<str>>,
}

/// How long after a rejection a document is tried again: `retry`, doubled with each rejection
/// in a row (up to [`MAX_BACKOFF`] times).
fn retry_wait(retry: Duration, strikes: u32) -> Duration {
    retry.saturating_mul(2u32.saturating_pow(strikes.saturating_sub(1)).min(MAX_BACKOFF))
}

/// The first wait of a held document its author changed, doubled with each rejection in a row
/// after the first (a first rejection's fix is tried at once).
const CHANGED_WAIT: Duration = Duration::from_millis(50);

fn changed_wait(retry: Duration, strikes: u32) -> Duration {
    match strikes {
        0 | 1 => Duration::ZERO,
        n => CHANGED_WAIT.saturating_mul(2u32.saturating_pow(n - 2)).min(retry),
    }
}

/// The node's holds and its trial.
#[derive(Debug, Clone, Default)]
pub struct NodeHolds {
    held: BTreeMap<Arc<str>, DocHold>,
    /// Documents in play in a rejection of several, not cleared yet: reverted unless trying.
    suspects: BTreeSet<Arc<str>>,
    /// The suspects sent to the node now.
    trying: BTreeSet<Arc<str>>,
    /// Where each suspect's parts are in play.
    suspect_places: BTreeMap<Arc<str>, BTreeSet<Place>>,
    strikes: BTreeMap<Arc<str>, Strikes>,
}

/// What a rejection did to the node's holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Analysis {
    /// The one document in play is held at the node.
    Held(Arc<str>),
    /// Several were in play: they are reverted and tried in halves.
    Split(usize),
    /// Nothing is any document's (or the response was too large to compare): the plan stops.
    Nothing,
    /// More than [`MAX_HELD`] held or [`MAX_SUSPECTS`] suspected: the plan stops.
    OverCap,
}

/// What the node holds back, for `/debug/nodes` and the generation plane.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HeldStatus {
    pub document: String,
    #[serde(rename = "type")]
    pub type_url: String,
    pub message: Arc<str>,
    pub seconds_ago: f64,
    pub retry_in_seconds: f64,
    /// Whether it is being tried again now, alone.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub probing: bool,
    /// Whether its author changed it since the node rejected it (the new version waits for
    /// its turn to be tried).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub changed: bool,
    /// The resources it is held back in.
    pub resources: Vec<String>,
    #[serde(skip)]
    pub accepted_in: Option<Arc<str>>,
}

impl HeldStatus {
    /// The hold as a rejection the node is held up by (for `/changes`).
    pub fn as_rejection(&self) -> crate::rollout::StoppedStatus {
        crate::rollout::StoppedStatus {
            r#type: self.type_url.clone(),
            stream: 0,
            message: self.message.clone(),
            seconds_ago: self.seconds_ago,
            resources: Vec::new(),
            resources_count: self.resources.len(),
        }
    }
}

impl NodeHolds {
    /// Whether nothing is held back or suspected.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.suspects.is_empty()
    }

    /// The documents reverted at the node now: held (but the one being probed), and suspects
    /// not on trial.
    pub fn reverted(&self) -> impl Iterator<Item = &Arc<str>> {
        let held = self.held.iter().filter(|(_, h)| !h.probing).map(|(d, _)| d);
        held.chain(self.suspects.iter().filter(|d| !self.trying.contains(*d)))
    }

    /// The documents held at the node (rejected alone).
    pub fn held(&self) -> impl Iterator<Item = (&Arc<str>, &DocHold)> {
        self.held.iter()
    }

    pub fn suspects(&self) -> impl Iterator<Item = &Arc<str>> {
        self.suspects.iter()
    }

    pub fn trying(&self) -> impl Iterator<Item = &Arc<str>> {
        self.trying.iter()
    }

    /// The node rejected `resources` (those of the response new to it) of `type_url`, holding
    /// `acked`; `accepted_in` is the group target it last held by its own acknowledgements
    /// (with the documents it named held back then). Splits or holds what is in play.
    #[allow(clippy::too_many_arguments, reason = "one rejection, as the rollout saw it")]
    pub fn rejected(
        &mut self,
        type_url: &Arc<str>,
        resources: &[Arc<Resource>],
        acked: &Snapshot,
        message: &Arc<str>,
        accepted_in: Option<(&Arc<str>, &[Arc<str>])>,
        retry: Duration,
        memo: &Memo,
        now: Instant,
    ) -> Analysis {
        if resources.len() > MAX_ANALYSED {
            return Analysis::Nothing;
        }
        let mut in_play: BTreeMap<Arc<str>, BTreeSet<Place>> = BTreeMap::new();
        for r in resources {
            let before = acked.resource(type_url, r.name());
            if before.is_some_and(|b| b.version() == r.version()) {
                continue;
            }
            for doc in memo.changed(type_url, r, before).iter() {
                in_play.entry(Arc::from(doc.as_str())).or_default().insert((type_url.clone(), r.name().clone()));
            }
        }
        match in_play.len() {
            0 => Analysis::Nothing,
            1 => {
                let (doc, places) = in_play.into_iter().next().expect("one");
                if !self.held.contains_key(&doc) && self.held.len() >= MAX_HELD {
                    return Analysis::OverCap;
                }
                // A probe rejected, or a new hold: the parts rejected are these.
                self.held.remove(&doc);
                let strikes = self.strikes.entry(doc.clone()).or_default();
                if strikes.accepted_in.is_none() {
                    strikes.accepted_in = accepted_in.filter(|(_, held)| !held.contains(&doc)).map(|(v, _)| v.clone());
                }
                strikes.count += 1;
                let wait = retry_wait(retry, strikes.count);
                let rejected = places
                    .iter()
                    .map(|p| {
                        let form = resources.iter().find(|r| *r.name() == p.1);
                        (p.clone(), form.and_then(|r| memo.digests(r).and_then(|d| d.get(doc.as_ref()).copied())))
                    })
                    .collect();
                let hold = DocHold {
                    type_url: type_url.clone(),
                    message: message.clone(),
                    at: now,
                    retry_at: now + wait,
                    probing: false,
                    changed: false,
                    accepted_in: strikes.accepted_in.clone(),
                    rejected,
                    compared: BTreeMap::new(),
                };
                self.held.insert(doc.clone(), hold);
                self.suspects.remove(&doc);
                self.suspect_places.remove(&doc);
                self.trying.remove(&doc);
                if self.trying.is_empty() {
                    self.trying = half(&self.suspects);
                }
                Analysis::Held(doc)
            }
            n => {
                let fresh = in_play.keys().filter(|d| !self.suspects.contains(*d)).count();
                if self.suspects.len() + fresh > MAX_SUSPECTS {
                    return Analysis::OverCap;
                }
                for (doc, places) in in_play.iter() {
                    self.suspects.insert(doc.clone());
                    self.suspect_places.entry(doc.clone()).or_default().extend(places.iter().cloned());
                }
                let play: BTreeSet<Arc<str>> = in_play.into_keys().collect();
                self.trying = half(&play);
                Analysis::Split(n)
            }
        }
    }

    /// The node acknowledged a response and now holds `acked`; `planned` is what it was being
    /// moved to. When it holds every resource the suspects on trial are in as planned, they are
    /// cleared and the next half goes on trial; a probe it holds so ends its hold. Whether
    /// anything changed.
    pub fn acknowledged(&mut self, acked: &Snapshot, planned: &Snapshot) -> bool {
        let holds = |p: &Place| {
            acked.resource(&p.0, &p.1).map(|r| r.version()) == planned.resource(&p.0, &p.1).map(|r| r.version())
        };
        let mut changed = false;
        let accepted: Vec<Arc<str>> = self
            .held
            .iter()
            .filter(|(_, h)| h.probing && h.rejected.keys().all(holds))
            .map(|(d, _)| d.clone())
            .collect();
        for d in accepted {
            self.held.remove(&d);
            self.strikes.remove(&d);
            changed = true;
        }
        if self.trying.is_empty() {
            return changed;
        }
        let all = self.trying.iter().flat_map(|d| self.suspect_places.get(d).into_iter().flatten()).all(holds);
        if !all {
            return changed;
        }
        for d in std::mem::take(&mut self.trying) {
            self.suspects.remove(&d);
            self.suspect_places.remove(&d);
        }
        self.trying = half(&self.suspects);
        true
    }

    /// The group has a new target. A held document whose parts there differ from those the
    /// node rejected (its author changed it) is due to be tried sooner ([`changed_wait`]); one
    /// gone from every resource it was in is held no more; a probe whose resources changed
    /// stops, to be tried again alone. Whether anything changed.
    pub fn retarget(&mut self, group: &Snapshot, memo: &Memo, retry: Duration, now: Instant) -> bool {
        let mut gone = Vec::new();
        let mut any = false;
        for (doc, hold) in &mut self.held {
            let mut moved = false;
            let mut present = false;
            for (place, rejected) in &hold.rejected {
                let r = group.resource(&place.0, &place.1);
                let version = r.map(|r| r.version().clone()).unwrap_or_else(|| Arc::from(""));
                let parts = r.and_then(|r| memo.digests(r)).and_then(|d| d.get(doc.as_ref()).copied());
                present |= parts.is_some();
                if hold.compared.get(place) == Some(&version) {
                    continue;
                }
                moved = true;
                hold.compared.insert(place.clone(), version);
                if parts != *rejected && !hold.changed {
                    hold.changed = true;
                    let strikes = self.strikes.get(doc).map_or(0, |s| s.count);
                    hold.retry_at = hold.retry_at.min(now + changed_wait(retry, strikes));
                    any = true;
                }
            }
            if !present {
                gone.push(doc.clone());
            } else if moved && hold.probing {
                // What it was probed with is not what the group serves now: probe again.
                hold.probing = false;
                hold.retry_at = hold.retry_at.min(now);
                any = true;
            }
        }
        for doc in &gone {
            self.held.remove(doc);
            self.strikes.remove(doc);
        }
        any || !gone.is_empty()
    }

    /// Starts a probe, if a held document is due and none is being probed or on trial: it is
    /// released to the node alone. The caller starts one only when nothing is on its way to the
    /// node, so nothing else travels with it. Whether one started.
    pub fn probe(&mut self, now: Instant) -> bool {
        if !self.trying.is_empty() || self.held.values().any(|h| h.probing) {
            return false;
        }
        let due = self.held.iter_mut().filter(|(_, h)| h.retry_at <= now).min_by_key(|(_, h)| h.retry_at);
        match due {
            Some((_, h)) => {
                h.probing = true;
                true
            }
            None => false,
        }
    }

    /// The probe would send the node nothing it does not hold: the document it tries is held no
    /// more.
    pub fn probe_needs_nothing(&mut self) {
        let probed: Vec<Arc<str>> = self.held.iter().filter(|(_, h)| h.probing).map(|(d, _)| d.clone()).collect();
        for d in probed {
            self.held.remove(&d);
            self.strikes.remove(&d);
        }
    }

    /// Whether a held document is due to be probed.
    pub fn probe_due(&self, now: Instant) -> bool {
        self.trying.is_empty()
            && !self.held.values().any(|h| h.probing)
            && self.held.values().any(|h| h.retry_at <= now)
    }

    /// When the next held document is due to be probed.
    pub fn deadline(&self) -> Option<Instant> {
        self.held.values().filter(|h| !h.probing).map(|h| h.retry_at).min()
    }

    /// `group` with every reverted document's parts as `acked` has them, in each resource it
    /// is in play in; a resource a composed one names that `group` lacks is taken from `acked`
    /// (a reverted route's old cluster). `group` itself when nothing is reverted.
    pub fn compose(&self, group: &Arc<Snapshot>, acked: &Snapshot, memo: &Memo) -> Arc<Snapshot> {
        let mut by_place: BTreeMap<&Place, BTreeSet<String>> = BTreeMap::new();
        for (doc, hold) in self.held.iter().filter(|(_, h)| !h.probing) {
            for place in hold.rejected.keys() {
                by_place.entry(place).or_default().insert(doc.to_string());
            }
        }
        for doc in self.suspects.iter().filter(|d| !self.trying.contains(*d)) {
            for place in self.suspect_places.get(doc).into_iter().flatten() {
                by_place.entry(place).or_default().insert(doc.to_string());
            }
        }
        let mut remove = Vec::new();
        let mut add: Vec<Resource> = Vec::new();
        for (place, docs) in by_place {
            let Some(now) = group.resource(&place.0, &place.1) else { continue };
            let base = acked.resource(&place.0, &place.1);
            match memo.composed(now, base, &docs) {
                Composed::Same => {}
                Composed::Absent => remove.push(place.clone()),
                Composed::Resource(r) => {
                    remove.push(place.clone());
                    add.push(r);
                }
            }
        }
        if remove.is_empty() {
            return group.clone();
        }
        // What the composed forms name that the group no longer has, as the node holds it.
        let mut needed: Vec<(&'static str, String)> = Vec::new();
        for r in &add {
            for ty in [CLUSTER, ROUTE, ENDPOINT] {
                needed.extend(r.references().names(ty).map(|n| (ty, n.to_owned())));
            }
        }
        let mut extra: Vec<Resource> = Vec::new();
        let mut seen = BTreeSet::new();
        while let Some((ty, name)) = needed.pop() {
            if !seen.insert((ty, name.clone()))
                || group.resource(ty, &name).is_some()
                || add.iter().any(|r| r.type_url().as_ref() == ty && r.name().as_ref() == name)
            {
                continue;
            }
            if let Some(held) = acked.resource(ty, &name) {
                if ty == CLUSTER {
                    needed.extend(held.references().names(ENDPOINT).map(|n| (ENDPOINT, n.to_owned())));
                }
                extra.push(Resource::clone(held));
            }
        }
        add.extend(extra);
        match group.apply(remove, add) {
            Ok(s) => Arc::new(s),
            // Two forms of one name cannot come out of this (each place once); if they did,
            // the group's target is served as it is.
            Err(_) => group.clone(),
        }
    }

    /// The holds, for `/debug/nodes` and the generation plane.
    pub fn status(&self, now: Instant) -> Vec<HeldStatus> {
        self.held
            .iter()
            .map(|(doc, h)| HeldStatus {
                document: doc.to_string(),
                type_url: crate::types::short_name(&h.type_url).to_owned(),
                message: h.message.clone(),
                seconds_ago: secs(now.saturating_duration_since(h.at)),
                retry_in_seconds: secs(h.retry_at.saturating_duration_since(now)),
                probing: h.probing,
                changed: h.changed,
                resources: h.rejected.keys().map(|(_, n)| n.to_string()).collect(),
                accepted_in: h.accepted_in.clone(),
            })
            .collect()
    }

    /// The resources of `type_url` a held document is in, with the hold: what the node is
    /// served as it accepted it (CSDS shows them rejected).
    pub fn places_of(&self, type_url: &str) -> BTreeMap<Arc<str>, &DocHold> {
        let mut out = BTreeMap::new();
        for h in self.held.values() {
            for (t, n) in h.rejected.keys() {
                if t.as_ref() == type_url {
                    out.entry(n.clone()).or_insert(h);
                }
            }
        }
        out
    }
}

/// The first half (rounded up) of `docs`, in order.
fn half(docs: &BTreeSet<Arc<str>>) -> BTreeSet<Arc<str>> {
    docs.iter().take(docs.len().div_ceil(2)).cloned().collect()
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e3).round() / 1e3
}

/// A resource with documents reverted.
#[derive(Clone)]
pub(crate) enum Composed {
    /// Nothing of it changes.
    Same,
    /// The node is not served it.
    Absent,
    Resource(Resource),
}

/// What decoding found in a group target's resources, shared by every node of the group:
/// the documents whose parts changed between two forms, each form's part digests, and
/// composed forms. Bounded: a memo past [`MEMO_ENTRIES`] entries starts again.
#[derive(Default)]
pub struct Memo(Mutex<MemoMaps>);

/// Entries a [`Memo`] keeps of each kind.
pub const MEMO_ENTRIES: usize = 256;

type Versions = (Arc<str>, Arc<str>, Option<Arc<str>>);
/// Each document's part digest in one resource.
type Digests = Arc<BTreeMap<String, Digest>>;

#[derive(Default)]
struct MemoMaps {
    changed: HashMap<Versions, Arc<[String]>>,
    digests: HashMap<(Arc<str>, Arc<str>), Option<Digests>>,
    composed: HashMap<(Versions, BTreeSet<String>), Composed>,
}

fn bounded<K, V>(map: &mut HashMap<K, V>) {
    if map.len() >= MEMO_ENTRIES {
        map.clear();
    }
}

impl Memo {
    fn maps(&self) -> std::sync::MutexGuard<'_, MemoMaps> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// [`crate::blame::changed_documents`] of `now` against `before`.
    pub(crate) fn changed(&self, type_url: &str, now: &Resource, before: Option<&Arc<Resource>>) -> Arc<[String]> {
        let key = (Arc::from(type_url), now.version().clone(), before.map(|b| b.version().clone()));
        if let Some(found) = self.maps().changed.get(&key) {
            return found.clone();
        }
        let owner = now.attribution().document;
        let docs: Arc<[String]> =
            crate::blame::changed_documents(type_url, now.body(), before.map(|b| b.body().as_ref()), owner.as_deref())
                .into();
        let mut maps = self.maps();
        bounded(&mut maps.changed);
        maps.changed.insert(key, docs.clone());
        docs
    }

    /// Each document's part digest in `r` ([`crate::revert::part_digests`]).
    pub(crate) fn digests(&self, r: &Resource) -> Option<Digests> {
        let key = (r.type_url().clone(), r.version().clone());
        if let Some(found) = self.maps().digests.get(&key) {
            return found.clone();
        }
        let owner = r.attribution().document;
        let digests = crate::revert::part_digests(r.type_url(), r.body(), owner.as_deref()).map(Arc::new);
        let mut maps = self.maps();
        bounded(&mut maps.digests);
        maps.digests.insert(key, digests.clone());
        digests
    }

    /// `now` with `docs` reverted to `base` ([`crate::revert::revert`]).
    pub(crate) fn composed(&self, now: &Resource, base: Option<&Arc<Resource>>, docs: &BTreeSet<String>) -> Composed {
        let key = ((now.type_url().clone(), now.version().clone(), base.map(|b| b.version().clone())), docs.clone());
        if let Some(found) = self.maps().composed.get(&key) {
            return found.clone();
        }
        let owner = now.attribution().document;
        let result = match crate::revert::revert(
            now.type_url(),
            now.body(),
            base.map(|b| b.body().as_ref()),
            owner.as_deref(),
            docs,
        ) {
            None => Composed::Same,
            Some(Reverted::Absent) => Composed::Absent,
            Some(Reverted::Body(bytes)) if bytes == now.body().as_ref() => Composed::Same,
            Some(Reverted::Body(bytes)) => {
                let r = Resource::new(now.type_url().clone(), now.name().clone(), &bytes);
                Composed::Resource(match now.origin() {
                    Some(o) => r.with_origin(o),
                    None => r,
                })
            }
        };
        let mut maps = self.maps();
        bounded(&mut maps.composed);
        maps.composed.insert(key, result.clone());
        result
    }
}

/// How many of a group's proxies must hold a document back for it to be held for the group
/// (`--nack-quorum`, design 016 part 3b).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Quorum {
    /// Every one of them.
    #[default]
    All,
    /// At least this many (and never more than there are).
    Count(usize),
    /// At least this share of them, in (0, 1].
    Share(f64),
}

impl Quorum {
    /// Whether `rejecting` of `proxies` is enough.
    pub fn met(self, rejecting: usize, proxies: usize) -> bool {
        if rejecting == 0 || proxies == 0 {
            return false;
        }
        match self {
            Quorum::All => rejecting >= proxies,
            Quorum::Count(n) => rejecting >= n.min(proxies),
            Quorum::Share(p) => rejecting as f64 >= (p * proxies as f64).ceil(),
        }
    }
}

impl std::str::FromStr for Quorum {
    type Err = String;

    /// `all`, a number (at least 1), or a share (`50%`, more than 0 and at most 100). The error
    /// is the text clap or the configuration file's error shows after the flag or field.
    fn from_str(s: &str) -> Result<Quorum, String> {
        let s = s.trim();
        if s == "all" {
            return Ok(Quorum::All);
        }
        if let Some(p) = s.strip_suffix('%') {
            return match p.trim().parse::<f64>() {
                Ok(p) if p > 0.0 && p <= 100.0 => Ok(Quorum::Share(p / 100.0)),
                _ => Err(format!("{s:?}: a share is more than 0% and at most 100%")),
            };
        }
        match s.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Quorum::Count(n)),
            _ => Err(format!("{s:?} is not a quorum: `all`, a number of nodes (1 or more) or a share (50%)")),
        }
    }
}

impl std::fmt::Display for Quorum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Quorum::All => f.write_str("all"),
            Quorum::Count(n) => write!(f, "{n}"),
            Quorum::Share(p) => write!(f, "{}%", p * 100.0),
        }
    }
}

#[cfg(test)]
#[path = "node_holds_tests.rs"]
mod tests;

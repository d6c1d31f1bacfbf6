//! Intent documents: what users write for plugins to translate.
//!
//! Each document is `{apiVersion?, kind, metadata: {name, namespace?, ...}, spec}`, in YAML
//! (several documents per file) or JSON. Its id is `Kind/name`, or `Kind/namespace/name` when
//! it has a namespace. Which plugin translates it is picked by its *claim*: `Kind` for a
//! document without `apiVersion` (every xdst-native kind), `group/Kind` with one
//! (`gateway.networking.k8s.io/HTTPRoute`; the core group of `apiVersion: v1` is `core`). Ids
//! are unique. Every error names the file, the document and the field.
//!
//! Kubernetes objects load as `kubectl get -o yaml` prints them: `status` and the metadata the
//! API server sets (`uid`, `resourceVersion`, `managedFields`, `selfLink`; `generation` is
//! kept) are accepted and dropped (`xdst serve` stamps its own `uid`, `generation` and
//! `creationTimestamp`), a `kind: List` stands for its `items`, and an object with `apiVersion`
//! may carry its body in top-level fields other than `spec` (an EndpointSlice's `endpoints`, a
//! Secret's `data`), which reach the plugin as written.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::decode::DecodeError;

/// One intent document. `Eq`, so that two `Arc`s of one document compare by pointer first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentDocument {
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, if it has one.
    pub namespace: Option<String>,
    /// The API group of its `apiVersion` (`core` for `v1`); `None` without `apiVersion`.
    pub group: Option<String>,
    /// `file#index`, for messages.
    pub origin: String,
    /// The whole document, without what the API server sets (see the module's notes).
    pub json: serde_json::Value,
    /// `json` as compact JSON: what plugins get, and how changes are detected.
    pub text: Arc<str>,
    id: Arc<str>,
}

/// A document without its parsed form: what is kept of versions no longer current (the
/// parsed JSON is most of a document's memory: an object per mapping, a string per key), made
/// whole again from its text when needed.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactDocument(IntentDocument);

impl CompactDocument {
    pub fn text(&self) -> &Arc<str> {
        &self.0.text
    }

    /// The document as it was.
    pub fn restore(&self) -> IntentDocument {
        let mut doc = self.0.clone();
        // `text` is `json` written out (every change to `json` writes it again).
        doc.json = serde_json::from_str(&doc.text).unwrap_or(serde_json::Value::Null);
        doc
    }
}

impl IntentDocument {
    /// This document without its parsed form ([`CompactDocument`]).
    pub fn compact(&self) -> CompactDocument {
        CompactDocument(IntentDocument {
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            group: self.group.clone(),
            origin: self.origin.clone(),
            json: serde_json::Value::Null,
            text: self.text.clone(),
            id: self.id.clone(),
        })
    }

    /// `Kind/name` or `Kind/namespace/name`: how plugins and errors refer to a document.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// The id without its kind: `name` or `namespace/name`. The contract hands plugins this as
    /// the document's name, so a plugin's `Kind/<name>` is the id in every language.
    pub fn qualified_name(&self) -> &str {
        &self.id[self.kind.len() + 1..]
    }

    /// What a plugin claims to translate this document: `Kind`, or `group/Kind`.
    pub fn claim(&self) -> String {
        match &self.group {
            Some(g) => format!("{g}/{}", self.kind),
            None => self.kind.clone(),
        }
    }
}

/// The metadata the Kubernetes API server writes, dropped on load: it changes on every write
/// and means nothing to a translation. `generation` is kept: it moves only when the spec does,
/// and plugins report it back as `observedGeneration`.
const SERVER_METADATA: [&str; 4] = ["uid", "resourceVersion", "managedFields", "selfLink"];

/// The top-level fields every document may have.
const ENVELOPE: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];

fn err(file: &str, document: usize, field: Option<&str>, message: impl Into<String>) -> DecodeError {
    DecodeError {
        file: file.to_owned(),
        document: Some(document),
        field: field.map(str::to_owned),
        message: message.into(),
    }
}

/// The API group of an `apiVersion`: `group/version`, or `version` alone for the core group.
fn group_of(api_version: &str) -> Result<String, &'static str> {
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-.".contains(c));
    match api_version.split_once('/') {
        Some((group, version)) if ok(group) && ok(version) => Ok(group.to_owned()),
        None if ok(api_version) => Ok("core".to_owned()),
        _ => Err("must be `group/version` or `version` (letters, digits, '-' and '.')"),
    }
}

/// Parses every intent document in a file's contents. `file` is used in errors and origins.
pub fn parse_file(file: &str, contents: &str) -> Result<Vec<IntentDocument>, DecodeError> {
    let mut values = Vec::new();
    for v in crate::documents::parse_all(contents, file.ends_with(".json"))
        .map_err(|e| err(file, e.document.unwrap_or(1), e.field.as_deref(), e.message))?
    {
        match v {
            // A JSON file may hold a list of documents.
            serde_json::Value::Array(list) if file.ends_with(".json") => values.extend(list),
            v => values.push(v),
        }
    }
    let mut out = Vec::new();
    for (i, v) in values.into_iter().enumerate() {
        let index = i + 1;
        if v.is_null() {
            continue;
        }
        let is_list = v.get("apiVersion").and_then(|a| a.as_str()) == Some("v1")
            && v.get("kind").and_then(|k| k.as_str()) == Some("List");
        if !is_list {
            out.push(parse_document(file, index, "", format!("{file}#{index}"), v)?);
            continue;
        }
        // `kubectl get -o yaml` of several objects: a v1 List of them.
        let Some(serde_json::Value::Array(items)) = v.get("items") else {
            return Err(err(file, index, Some("items"), "a List must have items, a list of objects"));
        };
        for (j, item) in items.iter().enumerate() {
            let at = format!("items[{j}].");
            out.push(parse_document(file, index, &at, format!("{file}#{index}.items[{j}]"), item.clone())?);
        }
    }
    Ok(out)
}

/// One document; `at` prefixes field paths in errors (`items[2].` inside a List).
fn parse_document(
    file: &str,
    index: usize,
    at: &str,
    origin: String,
    mut v: serde_json::Value,
) -> Result<IntentDocument, DecodeError> {
    let fail = |field: &str, message: String| err(file, index, Some(&format!("{at}{field}")), message);
    let serde_json::Value::Object(map) = &mut v else {
        return Err(err(file, index, None, "an intent document must be a mapping with kind, metadata and spec"));
    };
    let group = match map.get("apiVersion") {
        None => None,
        Some(serde_json::Value::String(a)) => Some(group_of(a).map_err(|m| fail("apiVersion", format!("{a:?}: {m}")))?),
        Some(_) => return Err(fail("apiVersion", "must be a string".into())),
    };
    let kind = match map.get("kind") {
        Some(serde_json::Value::String(k)) if !k.trim().is_empty() => k.clone(),
        Some(_) => return Err(fail("kind", "must be a non-empty string".into())),
        None => return Err(fail("kind", "missing (which plugin should translate this document?)".into())),
    };
    let Some(metadata) = map.get_mut("metadata") else {
        return Err(fail("metadata", "missing (it must carry a name)".into()));
    };
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(fail("metadata", "must be a mapping".into()));
    };
    let name = match metadata.get("name") {
        Some(serde_json::Value::String(n)) => n.clone(),
        Some(_) => return Err(fail("metadata.name", "must be a string".into())),
        None => return Err(fail("metadata.name", "missing".into())),
    };
    if let Some(problem) = name_problem(&name) {
        return Err(fail("metadata.name", format!("{name:?}: {problem}")));
    }
    let namespace = match metadata.get("namespace") {
        None => None,
        Some(serde_json::Value::String(ns)) => {
            if let Some(problem) = name_problem(ns) {
                return Err(fail("metadata.namespace", format!("{ns:?}: {problem}")));
            }
            Some(ns.clone())
        }
        Some(_) => return Err(fail("metadata.namespace", "must be a string".into())),
    };
    if namespace.is_some()
        && let Some(g) = &group
        && cluster_scoped(g, &kind)
    {
        return Err(fail(
            "metadata.namespace",
            format!(
                "{kind} is cluster-scoped: it has no namespace, and only the platform writes it (remove \
                 metadata.namespace)"
            ),
        ));
    }
    for field in SERVER_METADATA {
        metadata.remove(field);
    }
    map.remove("status");
    if let Some(spec) = map.get("spec")
        && !spec.is_object()
    {
        return Err(fail("spec", "must be a mapping".into()));
    }
    if group.is_none()
        && let Some(extra) = map.keys().find(|k| !ENVELOPE.contains(&k.as_str()))
    {
        return Err(fail(
            extra,
            "unknown top-level field (expected kind, metadata, spec; a Kubernetes object with a body outside \
             spec needs its apiVersion)"
                .into(),
        ));
    }
    let id = match &namespace {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    };
    Ok(IntentDocument { id: id.into(), kind, name, namespace, group, origin, text: v.to_string().into(), json: v })
}

/// The annotation xdst puts on every document a team wrote (through a namespace token, a
/// namespace directory or a namespace's store prefix), whatever the document says: plugins
/// read it to keep what is the platform's to claim (the gateway-api plugin's shared address,
/// issue 49, item 2). A document from the platform's sources keeps it as written.
pub const WRITTEN_BY: (&str, &str) = ("xdst.dev/written-by", "team");

/// Marks `doc` (a document's JSON) as a team's ([`WRITTEN_BY`]).
pub fn mark_written_by_team(doc: &mut serde_json::Value) {
    let Some(metadata) = doc.get_mut("metadata").and_then(serde_json::Value::as_object_mut) else { return };
    let annotations = metadata.entry("annotations").or_insert_with(|| serde_json::json!({}));
    if !annotations.is_object() {
        *annotations = serde_json::json!({});
    }
    if let Some(a) = annotations.as_object_mut() {
        a.insert(WRITTEN_BY.0.into(), WRITTEN_BY.1.into());
    }
}

/// `at` as Kubernetes writes `creationTimestamp`: RFC 3339 in UTC, to the second
/// (`2026-12-06T10:00:00Z`). Strings of this form sort as the times they name.
pub fn creation_timestamp(at: std::time::SystemTime) -> String {
    let secs = at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Whether `text` is a `creationTimestamp` as [`creation_timestamp`] writes it, the form
/// plugins compare as text: any other form (an offset, a fraction) would sort wrongly.
pub fn is_creation_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() == 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'Z'
}

/// The Kubernetes kinds xdst's plugins translate that are cluster-scoped: an API server gives
/// them no namespace, and one written with a namespace would let a team's token, directory or
/// store prefix write what is the platform's (issue 49, item 1: `Namespace/team-a/team-c`,
/// `GatewayClass/team-a/shared`).
pub const CLUSTER_SCOPED: [(&str, &str); 2] = [("core", "Namespace"), ("gateway.networking.k8s.io", "GatewayClass")];

/// Whether `group`/`kind` is cluster-scoped ([`CLUSTER_SCOPED`]).
pub fn cluster_scoped(group: &str, kind: &str) -> bool {
    CLUSTER_SCOPED.iter().any(|(g, k)| *g == group && *k == kind)
}

/// Names are what resources get called after: keep them to what every Envoy name field accepts.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("must not be empty");
    }
    if name.len() > 253 {
        return Some("longer than 253 characters");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)) {
        return Some("may contain only letters, digits, '-', '.' and '_'");
    }
    None
}

/// Every intent document, by kind and then qualified name (`name` or `namespace/name`). The maps
/// are persistent (shared structure): a clone costs nothing, and a generation takes the last
/// one's set and changes only what its changed sources define.
#[derive(Debug, Clone)]
pub struct IntentSet {
    by_kind: imbl::OrdMap<String, imbl::OrdMap<String, Arc<IntentDocument>>>,
    /// How many documents there are of each (kind, group): what a claim check walks instead
    /// of every document.
    claims: imbl::OrdMap<(String, Option<String>), usize>,
    /// The ids this set's changes touched, in order, since its log began: what tells a set
    /// from one it was taken from ([`differences`](IntentSet::differences)).
    log: ChangeLog,
}

impl Default for IntentSet {
    fn default() -> Self {
        IntentSet { by_kind: imbl::OrdMap::new(), claims: imbl::OrdMap::new(), log: ChangeLog::new() }
    }
}

impl PartialEq for IntentSet {
    fn eq(&self, other: &Self) -> bool {
        self.by_kind == other.by_kind
    }
}

/// Numbers no two log entries (or logs) share, across every set.
static LOG_NUMBERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn log_number() -> u64 {
    LOG_NUMBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The ids a set's changes touched. Persistent, like the set: a set taken from another and
/// changed shares the other's log and adds to it. Each entry has a number of its own, so
/// that an entry found at the same place in two logs says both logs are one history up to it.
#[derive(Debug, Clone)]
struct ChangeLog {
    /// This log's own number: logs that began apart are never compared.
    origin: u64,
    entries: imbl::Vector<(u64, Arc<str>)>,
}

/// A log longer than this begins again (a set compared with one from before then is compared
/// document by document, once).
const MAX_LOG: usize = 1 << 16;

impl ChangeLog {
    fn new() -> ChangeLog {
        ChangeLog { origin: log_number(), entries: imbl::Vector::new() }
    }

    fn note(&mut self, id: &Arc<str>) {
        if self.entries.len() >= MAX_LOG {
            *self = ChangeLog::new();
        }
        self.entries.push_back((log_number(), id.clone()));
    }

    /// Where this log stands: what a later log is compared with.
    fn mark(&self) -> LogMark {
        LogMark { origin: self.origin, len: self.entries.len(), last: self.entries.last().map(|e| e.0) }
    }

    /// The ids touched since `mark`, if this log is `mark`'s continued.
    fn since(&self, mark: &LogMark) -> Option<BTreeSet<&Arc<str>>> {
        let continued = self.origin == mark.origin
            && self.entries.len() >= mark.len
            && (mark.len == 0 || self.entries.get(mark.len - 1).map(|e| e.0) == mark.last);
        continued
            .then(|| (mark.len..self.entries.len()).filter_map(|i| self.entries.get(i)).map(|(_, id)| id).collect())
    }
}

/// A place in a [`ChangeLog`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LogMark {
    origin: u64,
    len: usize,
    last: Option<u64>,
}

/// Two documents with one id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("duplicate {kind} {name:?}: defined in {first} and again in {second}")]
pub struct DuplicateIntent {
    pub kind: String,
    /// The qualified name: `name` or `namespace/name`.
    pub name: String,
    pub first: String,
    pub second: String,
}

/// A document whose kind no plugin translates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin} field kind: no plugin translates kind {kind:?} (loaded plugins translate: {known})")]
pub struct UnclaimedKind {
    pub origin: String,
    /// What a plugin would have to claim: `Kind`, or `group/Kind`.
    pub kind: String,
    pub known: String,
}

/// See [`IntentSet::ignorable`]; `doc`'s own claim is not in `claimed`, and `groups` are the
/// API groups of the claims.
fn ignorable(doc: &IntentDocument, groups: &BTreeSet<&str>) -> bool {
    match doc.group.as_deref() {
        None => false,
        Some("core") => true,
        Some(group) => !groups.contains(group),
    }
}

/// The documents no plugin claims, sorted in one pass: those for other controllers (kept out
/// of translation) and the rest (held, naming their kind).
#[derive(Debug, Default)]
pub struct Unclaimed<'a> {
    pub ignorable: Vec<&'a Arc<IntentDocument>>,
    pub unclaimed: Vec<(Arc<str>, UnclaimedKind)>,
}

/// A claim's group and kind: `group/Kind`, or a bare `Kind` (documents without `apiVersion`).
fn split_claim(claim: &str) -> (Option<&str>, &str) {
    match claim.rsplit_once('/') {
        Some((group, kind)) => (Some(group), kind),
        None => (None, claim),
    }
}

/// The documents of some claims (`Kind` or `group/Kind`) as one set held them: what a caller
/// keeps to learn from a later set what changed in them ([`IntentSet::changed_since`]). It
/// holds the set itself (persistent: keeping it costs nothing).
#[derive(Debug, Clone, Default)]
pub struct ClaimsView {
    /// Sorted and without repeats.
    claims: Vec<String>,
    set: IntentSet,
}

impl ClaimsView {
    /// The claims it holds the documents of, sorted.
    pub fn claims(&self) -> &[String] {
        &self.claims
    }
}

/// What differs between a [`ClaimsView`] and a set: the documents new or changed, and the ids
/// of those gone, each in the set's order (kind, then qualified name).
#[derive(Debug, Default)]
pub struct ClaimsChanges<'a> {
    pub changed: Vec<&'a Arc<IntentDocument>>,
    pub removed: Vec<Arc<str>>,
}

/// `claims` sorted, without repeats.
pub fn sorted_claims(claims: &[String]) -> Vec<String> {
    let set: BTreeSet<&String> = claims.iter().collect();
    set.into_iter().cloned().collect()
}

impl IntentSet {
    /// The documents of `claims`, as [`ClaimsView`] keeps them.
    pub fn view(&self, claims: &[String]) -> ClaimsView {
        ClaimsView { claims: sorted_claims(claims), set: self.clone() }
    }

    /// Every document of `claims`, in id order.
    pub fn of_claims(&self, claims: &[String]) -> Vec<&Arc<IntentDocument>> {
        let claims = sorted_claims(claims);
        let mut docs: Vec<_> = claims.iter().flat_map(|c| self.of_kind(c)).collect();
        // Each kind's documents come by name: in id order unless two claims share a kind or
        // the claims' order is not their kinds' ('core/Service' before 'discovery.k8s.io/
        // EndpointSlice'), which one pass tells.
        if !docs.is_sorted_by(|a, b| a.id() <= b.id()) {
            docs.sort_by(|a, b| a.id().cmp(b.id()));
        }
        docs
    }

    /// The documents here that `before` does not have (by id), and those it has that are not
    /// here ([`differences`](Self::differences)).
    pub fn came_and_went<'a>(
        &'a self,
        before: &'a IntentSet,
    ) -> (Vec<&'a Arc<IntentDocument>>, Vec<&'a Arc<IntentDocument>>) {
        let (mut came, mut went) = (Vec::new(), Vec::new());
        for (was, is) in self.differences(before) {
            match (was, is) {
                (None, Some(d)) => came.push(d),
                (Some(d), None) => went.push(d),
                _ => {}
            }
        }
        (came, went)
    }

    /// Every document that differs here from `before` (added, taken out, or not equal), as
    /// (before, here), in the set's order (kind, then qualified name). When this set was taken
    /// from `before` and changed (the generations' sets are), only the documents its changes
    /// touched are looked at; else every document of both.
    #[allow(clippy::type_complexity, reason = "pairs of the same document")]
    pub fn differences<'a, 'b>(
        &'a self,
        before: &'b IntentSet,
    ) -> Vec<(Option<&'b Arc<IntentDocument>>, Option<&'a Arc<IntentDocument>>)> {
        let differ = |a: Option<&Arc<IntentDocument>>, b: Option<&Arc<IntentDocument>>| match (a, b) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b) && a != b,
            (a, b) => a.is_some() || b.is_some(),
        };
        if let Some(ids) = self.log.since(&before.log.mark()) {
            let mut out: Vec<_> =
                ids.into_iter().map(|id| (before.by_id(id), self.by_id(id))).filter(|(a, b)| differ(*a, *b)).collect();
            // In the set's order (kind, then qualified name), as the walk below gives them: an
            // id's text sorts otherwise where a kind holds a character before '/' ("A-B/x").
            let key = |p: &(Option<&Arc<IntentDocument>>, Option<&Arc<IntentDocument>>)| {
                let d = p.0.or(p.1).expect("a difference has a side");
                (d.kind.clone(), d.qualified_name().to_owned())
            };
            out.sort_by_cached_key(key);
            return out;
        }
        let mut out = Vec::new();
        let (mut a, mut b) = (before.shared().peekable(), self.shared().peekable());
        loop {
            let order = match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(x), Some(y)) => (x.kind.as_str(), x.qualified_name()).cmp(&(y.kind.as_str(), y.qualified_name())),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
            };
            let pair = match order {
                std::cmp::Ordering::Less => (a.next(), None),
                std::cmp::Ordering::Greater => (None, b.next()),
                std::cmp::Ordering::Equal => (a.next(), b.next()),
            };
            if differ(pair.0, pair.1) {
                out.push(pair);
            }
        }
        out
    }

    /// What changed in the documents of `view`'s claims since `view` was taken: a document
    /// is changed when it is not the same allocation and its text differs. Only the documents
    /// this set's changes since the view touched are looked at ([`differences`](Self::differences)).
    pub fn changed_since<'a>(&'a self, view: &ClaimsView) -> ClaimsChanges<'a> {
        let mut out = ClaimsChanges::default();
        let mine = |d: &IntentDocument| view.claims.iter().any(|c| split_claim(c) == (d.group.as_deref(), &*d.kind));
        for (old, new) in self.differences(&view.set) {
            match (old.filter(|d| mine(d)), new.filter(|d| mine(d))) {
                (Some(old), Some(new)) if old.text != new.text => out.changed.push(new),
                (None, Some(new)) => out.changed.push(new),
                (Some(old), None) => out.removed.push(old.id().clone()),
                _ => {}
            }
        }
        out
    }
}

impl IntentSet {
    pub fn add(&mut self, doc: IntentDocument) -> Result<(), DuplicateIntent> {
        self.add_shared(Arc::new(doc))
    }

    /// Adds a document that may also be held elsewhere (a cache of parsed files): an
    /// unchanged document stays the same allocation from one generation to the next, which
    /// makes telling it apart from a changed one a pointer comparison.
    pub fn add_shared(&mut self, doc: Arc<IntentDocument>) -> Result<(), DuplicateIntent> {
        let docs = self.by_kind.entry(doc.kind.clone()).or_default();
        let name = doc.qualified_name();
        if let Some(prev) = docs.get(name) {
            return Err(DuplicateIntent {
                kind: doc.kind.clone(),
                name: name.to_owned(),
                first: prev.origin.clone(),
                second: doc.origin.clone(),
            });
        }
        let claim = (doc.kind.clone(), doc.group.clone());
        let id = doc.id().clone();
        docs.insert(name.to_owned(), doc);
        *self.claims.entry(claim).or_default() += 1;
        self.log.note(&id);
        Ok(())
    }

    /// Counts `doc` out of [`claims`](Self::claims).
    fn uncount(&mut self, doc: &IntentDocument) {
        let claim = (doc.kind.clone(), doc.group.clone());
        if let Some(n) = self.claims.get_mut(&claim) {
            *n -= 1;
            if *n == 0 {
                self.claims.remove(&claim);
            }
        }
    }

    /// The documents a plugin's claim names (`Kind`, or `group/Kind`), ordered by qualified
    /// name.
    pub fn of_kind<'a>(&'a self, claim: &str) -> impl Iterator<Item = &'a Arc<IntentDocument>> + 'a {
        let (group, kind) = split_claim(claim);
        let group = group.map(str::to_owned);
        self.by_kind.get(kind).into_iter().flat_map(|m| m.values()).filter(move |d| d.group == group)
    }

    /// The document with this id (`Kind/name` or `Kind/namespace/name`).
    pub fn by_id(&self, id: &str) -> Option<&Arc<IntentDocument>> {
        let (kind, name) = id.split_once('/')?;
        self.by_kind.get(kind)?.get(name)
    }

    /// Takes out the document with this id, if there is one.
    pub fn remove_id(&mut self, id: &str) -> Option<Arc<IntentDocument>> {
        let (kind, name) = id.split_once('/')?;
        let docs = self.by_kind.get_mut(kind)?;
        let doc = docs.remove(name);
        if docs.is_empty() {
            self.by_kind.remove(kind);
        }
        if let Some(d) = &doc {
            self.uncount(d);
            self.log.note(d.id());
        }
        doc
    }

    /// Puts `doc` in, in place of any document with its id.
    pub fn replace(&mut self, doc: Arc<IntentDocument>) {
        self.remove_id(doc.id());
        let name = doc.qualified_name().to_owned();
        *self.claims.entry((doc.kind.clone(), doc.group.clone())).or_default() += 1;
        self.log.note(doc.id());
        self.by_kind.entry(doc.kind.clone()).or_default().insert(name, doc);
    }

    /// The document with this kind and qualified name (`name` or `namespace/name`).
    pub fn get(&self, kind: &str, qualified_name: &str) -> Option<&IntentDocument> {
        self.by_kind.get(kind)?.get(qualified_name).map(|d| d.as_ref())
    }

    /// Every document, by kind and then qualified name.
    pub fn documents(&self) -> impl Iterator<Item = &IntentDocument> + Clone {
        self.by_kind.iter().flat_map(|(_, docs)| docs.iter().map(|(_, d)| d.as_ref()))
    }

    /// Every document as the set holds it (shared), by kind and then qualified name.
    pub fn shared(&self) -> impl Iterator<Item = &Arc<IntentDocument>> {
        self.by_kind.values().flat_map(|docs| docs.values())
    }

    pub fn len(&self) -> usize {
        self.by_kind.values().map(imbl::OrdMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The Kubernetes objects no plugin is for, by id: kept out of translation, never a reason
    /// to refuse the intent (manifests carry Deployments, ConfigMaps, ServiceAccounts for
    /// other controllers). An object is one when no plugin claims its kind and its API group is
    /// `core` or one no plugin claims any kind of. A document without `apiVersion`, or of a
    /// group a plugin claims other kinds of (`gateway.networking.k8s.io/BackendLBPolicy` with
    /// a plugin that claims HTTPRoute), is [`unclaimed`](Self::unclaimed): likely a typo or a
    /// kind not translated yet, which the operator should see.
    pub fn ignorable(&self, claimed: &BTreeSet<String>) -> Vec<&Arc<IntentDocument>> {
        self.sort_unclaimed(claimed).ignorable
    }

    /// [`ignorable`](Self::ignorable) and [`unclaimed`](Self::unclaimed) in one pass over the
    /// documents, each document's claim built once.
    pub fn sort_unclaimed(&self, claimed: &BTreeSet<String>) -> Unclaimed<'_> {
        let groups: BTreeSet<&str> = claimed.iter().filter_map(|c| split_claim(c).0).collect();
        let known = || {
            if claimed.is_empty() { "none".to_owned() } else { claimed.iter().cloned().collect::<Vec<_>>().join(", ") }
        };
        let mut out = Unclaimed::default();
        // Each (kind, group) the set holds is looked up once; only the documents of one no
        // plugin claims are walked (a generation asks this, and nearly every document is
        // claimed).
        let unclaimed: BTreeSet<(&str, Option<&str>)> = self
            .claims
            .keys()
            .filter(|(kind, group)| {
                let claim = match group {
                    Some(g) => format!("{g}/{kind}"),
                    None => kind.clone(),
                };
                !claimed.contains(&claim)
            })
            .map(|(kind, group)| (kind.as_str(), group.as_deref()))
            .collect();
        let kinds: BTreeSet<&str> = unclaimed.iter().map(|(kind, _)| *kind).collect();
        let docs = kinds.into_iter().filter_map(|k| self.by_kind.get(k)).flat_map(|m| m.values());
        for doc in docs {
            if !unclaimed.contains(&(doc.kind.as_str(), doc.group.as_deref())) {
                continue;
            }
            let claim = doc.claim();
            if ignorable(doc, &groups) {
                out.ignorable.push(doc);
            } else {
                out.unclaimed.push((
                    doc.id().clone(),
                    UnclaimedKind { origin: doc.origin.clone(), kind: claim, known: known() },
                ));
            }
        }
        out
    }

    /// Fails on the first document whose claim is not in `claimed`.
    pub fn check_claimed(&self, claimed: &BTreeSet<String>) -> Result<(), UnclaimedKind> {
        match self.unclaimed(claimed).into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// Every document whose claim is not in `claimed` and that is not [`ignorable`](Self::ignorable),
    /// by id, with the error naming it.
    pub fn unclaimed(&self, claimed: &BTreeSet<String>) -> Vec<(Arc<str>, UnclaimedKind)> {
        self.sort_unclaimed(claimed).unclaimed
    }
}

#[cfg(test)]
mod tests {
    /// Known instants, a leap day and the form check.
    #[test]
    fn creation_timestamps_are_what_kubernetes_writes() {
        let at = |secs| super::creation_timestamp(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert!(super::is_creation_timestamp(&at(1_700_000_000)));
        for bad in ["2023-11-14T22:13:20+01:00", "2023-11-14T22:13:20.5Z", "2023-11-14 22:13:20Z", "", "yesterday"] {
            assert!(!super::is_creation_timestamp(bad), "{bad}");
        }
    }

    use super::*;

    const TWO: &str = "kind: HttpService\nmetadata: {name: web}\nspec: {port: 80}\n---\nkind: HttpService\nmetadata:\
        \n  name: api\n  team: payments\nspec: {}\n";

    #[test]
    fn multi_document_yaml_and_json() {
        let docs = parse_file("svc.yaml", TWO).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!((docs[1].id().as_ref(), docs[1].origin.as_str()), ("HttpService/api", "svc.yaml#2"));
        assert_eq!(docs[1].json["metadata"]["team"], "payments");
        let json = r#"[{"kind": "HttpService", "metadata": {"name": "web"}, "spec": {"port": 80}}]"#;
        assert_eq!(parse_file("svc.json", json).unwrap()[0].json, docs[0].json);
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let cases = [
            ("metadata: {name: a}\n", "kind"),
            ("kind: X\n", "metadata"),
            ("kind: X\nmetadata: {team: a}\n", "metadata.name"),
            ("kind: X\nmetadata: {name: 'has space'}\n", "metadata.name"),
            ("kind: X\nmetadata: {name: a}\nspec: [1]\n", "spec"),
            ("kind: X\nmetadata: {name: a}\nspecs: {}\n", "specs"),
            ("kind: ''\nmetadata: {name: a}\n", "kind"),
        ];
        for (text, field) in cases {
            let doc = format!("kind: Ok\nmetadata: {{name: fine}}\n---\n{text}");
            let e = parse_file("f.yaml", &doc).unwrap_err();
            assert_eq!((e.document, e.field.as_deref()), (Some(2), Some(field)), "{text}: {e}");
        }
        let e = parse_file("f.yaml", "kind: [\n").unwrap_err();
        assert!(e.message.contains("invalid YAML"), "{e}");
        assert!(parse_file("f.yaml", "- 1\n").unwrap_err().message.contains("mapping"));
    }

    #[test]
    fn duplicates_and_unclaimed_kinds() {
        let mut set = IntentSet::default();
        for d in parse_file("a.yaml", TWO).unwrap() {
            set.add(d).unwrap();
        }
        let dup = parse_file("b.yaml", "kind: HttpService\nmetadata: {name: web}\n").unwrap().remove(0);
        assert_eq!(
            set.add(dup).unwrap_err().to_string(),
            "duplicate HttpService \"web\": defined in a.yaml#1 and again in b.yaml#1"
        );
        assert_eq!(set.of_kind("HttpService").map(|d| d.name.as_str()).collect::<Vec<_>>(), ["api", "web"]);
        let claimed: BTreeSet<String> = ["Gateway".to_string()].into();
        let e = set.check_claimed(&claimed).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.yaml#2 field kind: no plugin translates kind \"HttpService\" (loaded plugins translate: Gateway)"
        );
        set.check_claimed(&["HttpService".to_string()].into()).unwrap();
    }

    const K8S: &str = "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  namespace: gateway-conformance-infra
  labels: {kubernetes.io/service-name: web}
  uid: 6b0c
  resourceVersion: \"4711\"
  generation: 3
  managedFields: [{manager: kubectl}]
  creationTimestamp: \"2026-11-26T00:00:00Z\"
addressType: IPv4
endpoints: [{addresses: [127.0.0.1]}]
ports: [{name: http, port: 3000}]
status: {anything: goes}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: gateway-conformance-infra}
spec: {ports: [{port: 8080}]}
---
kind: Service
metadata: {name: web}
spec: {}
";

    #[test]
    fn kubernetes_objects_load_as_kubectl_prints_them() {
        let docs = parse_file("k8s.yaml", K8S).unwrap();
        let ids: Vec<&str> = docs.iter().map(|d| d.id().as_ref()).collect();
        assert_eq!(
            ids,
            ["EndpointSlice/gateway-conformance-infra/web-abc", "Service/gateway-conformance-infra/web", "Service/web"]
        );
        let slice = &docs[0];
        assert_eq!(
            (slice.claim().as_str(), slice.qualified_name()),
            ("discovery.k8s.io/EndpointSlice", "gateway-conformance-infra/web-abc")
        );
        assert_eq!(slice.json["endpoints"][0]["addresses"][0], "127.0.0.1", "the body outside spec is kept");
        assert_eq!(slice.json["metadata"]["creationTimestamp"], "2026-11-26T00:00:00Z", "kept: it orders routes");
        for dropped in ["uid", "resourceVersion", "managedFields"] {
            assert!(slice.json["metadata"].get(dropped).is_none(), "{dropped} is the API server's");
        }
        assert!(slice.json["metadata"].get("generation").is_some(), "kept: plugins report it as observedGeneration");
        assert!(slice.json.get("status").is_none() && !slice.text.contains("anything"));
        assert_eq!((docs[1].claim(), docs[2].claim()), ("core/Service".to_owned(), "Service".to_owned()));

        // One kind, three claims: each plugin gets only its own.
        let mut set = IntentSet::default();
        docs.into_iter().try_for_each(|d| set.add(d)).unwrap();
        let names = |claim: &str| set.of_kind(claim).map(|d| d.id().to_string()).collect::<Vec<_>>();
        assert_eq!(names("Service"), ["Service/web"]);
        assert_eq!(names("core/Service"), ["Service/gateway-conformance-infra/web"]);
        assert_eq!(names("discovery.k8s.io/EndpointSlice").len(), 1);
        assert!(names("EndpointSlice").is_empty());
        assert_eq!(set.get("Service", "gateway-conformance-infra/web").unwrap().origin, "k8s.yaml#2");
        // A group a plugin claims other kinds of: unclaimed (a typo, or a kind not translated).
        let e = set
            .check_claimed(&["Service".to_owned(), "discovery.k8s.io/EndpointSliceMirror".to_owned()].into())
            .unwrap_err();
        assert_eq!(e.kind, "discovery.k8s.io/EndpointSlice");
        assert_eq!(e.origin, "k8s.yaml#1");
        set.check_claimed(&["Service".into(), "core/Service".into(), "discovery.k8s.io/EndpointSlice".into()].into())
            .unwrap();
        // A group nobody claims, or core: a Kubernetes object for someone else, ignored.
        let claimed: BTreeSet<String> = ["Service".to_owned()].into();
        set.check_claimed(&claimed).unwrap();
        let ignored: Vec<&str> = set.ignorable(&claimed).iter().map(|d| d.id().as_ref()).collect();
        assert_eq!(
            ignored,
            ["EndpointSlice/gateway-conformance-infra/web-abc", "Service/gateway-conformance-infra/web"]
        );
        assert!(set.ignorable(&["core/Service".to_owned()].into()).iter().all(|d| d.kind == "EndpointSlice"));
        let mut plain = IntentSet::default();
        plain.add(parse_file("p.yaml", "kind: Servce\nmetadata: {name: a}\n").unwrap().remove(0)).unwrap();
        assert!(
            plain.ignorable(&claimed).is_empty() && plain.check_claimed(&claimed).is_err(),
            "no apiVersion: a typo"
        );

        // The same kind, namespace and name from two groups is one id: a duplicate.
        let other =
            "apiVersion: example.com/v1\nkind: Service\nmetadata: {name: web, namespace: gateway-conformance-infra}\n";
        let e = set.add(parse_file("o.yaml", other).unwrap().remove(0)).unwrap_err();
        assert_eq!(e.name, "gateway-conformance-infra/web");
    }

    #[test]
    fn a_list_stands_for_its_items_and_kubernetes_errors_name_the_field() {
        let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: a, namespace: n}, \
                    type: kubernetes.io/tls, data: {}}\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n";
        let docs = parse_file("l.yaml", list).unwrap();
        assert_eq!(
            docs.iter().map(|d| d.origin.as_str()).collect::<Vec<_>>(),
            ["l.yaml#1.items[0]", "l.yaml#1.items[1]"]
        );
        assert_eq!(docs[0].json["type"], "kubernetes.io/tls");
        let cases = [
            ("apiVersion: v1\nkind: List\nitems:\n- {kind: X, metadata: {name: 'a b'}}\n", "items[0].metadata.name"),
            ("apiVersion: v1\nkind: List\n", "items"),
            ("apiVersion: a/b/c\nkind: X\nmetadata: {name: a}\n", "apiVersion"),
            ("apiVersion: 1\nkind: X\nmetadata: {name: a}\n", "apiVersion"),
            ("apiVersion: v1\nkind: X\nmetadata: {name: a, namespace: 'x/y'}\n", "metadata.namespace"),
            ("kind: X\nmetadata: {name: a}\ndata: {}\n", "data"),
        ];
        for (text, field) in cases {
            let e = parse_file("f.yaml", text).unwrap_err();
            assert_eq!((e.document, e.field.as_deref()), (Some(1), Some(field)), "{text}: {e}");
        }
        let e = parse_file("f.yaml", "kind: X\nmetadata: {name: a}\ndata: {}\n").unwrap_err();
        assert!(e.message.contains("apiVersion"), "{e}");
        // `status` is what xdst computes: accepted on any document, never passed on.
        let d = parse_file("f.yaml", "kind: X\nmetadata: {name: a}\nstatus: {x: 1}\n").unwrap().remove(0);
        assert_eq!(d.text.as_ref(), r#"{"kind":"X","metadata":{"name":"a"}}"#);
    }

    /// Issue 49, item 1: a cluster-scoped kind written with a namespace is refused naming the
    /// field, so no team's namespace token, directory or store prefix can write one; without a
    /// namespace it is the platform's. A namespaced kind, or an xdst kind, keeps its namespace.
    #[test]
    fn a_cluster_scoped_kind_never_carries_a_namespace() {
        for (api, kind) in [("v1", "Namespace"), ("gateway.networking.k8s.io/v1", "GatewayClass")] {
            let text = format!("apiVersion: {api}\nkind: {kind}\nmetadata: {{name: shared, namespace: team-a}}\n");
            let e = parse_file("team-a/x.yaml", &text).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("metadata.namespace"), "{e}");
            assert!(e.to_string().contains(&format!("{kind} is cluster-scoped")), "{e}");
            let platform = format!("apiVersion: {api}\nkind: {kind}\nmetadata: {{name: shared}}\n");
            assert_eq!(parse_file("x.yaml", &platform).unwrap()[0].id().as_ref(), format!("{kind}/shared"));
        }
        let route =
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: team-a}\n";
        assert_eq!(parse_file("x.yaml", route).unwrap()[0].namespace.as_deref(), Some("team-a"));
        let own = "kind: GatewayClass\nmetadata: {name: g, namespace: team-a}\nspec: {}\n";
        assert_eq!(parse_file("x.yaml", own).unwrap()[0].namespace.as_deref(), Some("team-a"), "an xdst kind");
    }

    /// What `changed_since` tells equals comparing every document of the claims by id, over
    /// random edits: documents added, changed, re-parsed unchanged (a new allocation), moved
    /// to a group the claims do not name and back, removed, and kinds emptied; compared with
    /// a view some steps old, with a set put together anew (a log of its own), and with a view
    /// of another branch (a set taken from an older one and changed otherwise). `came_and_went`
    /// likewise, over every kind. (imbl 6.1's `OrdMap::diff` misses differences in such
    /// sequences: what this test would have caught.)
    #[test]
    fn changes_since_a_view_are_those_of_comparing_every_document() {
        use std::collections::BTreeMap;
        let doc = |api: &str, kind: &str, name: u32, v: u32| {
            let text = format!(
                "apiVersion: {api}\nkind: {kind}\nmetadata: {{name: d{name}, namespace: n}}\nspec: {{v: {v}}}\n"
            );
            Arc::new(parse_file("f.yaml", &text).unwrap().remove(0))
        };
        let claims = vec!["a.io/A".to_owned(), "B".to_owned(), "b.io/B".to_owned()];
        let apis = ["a.io/v1", "c.io/v1", "b.io/v1", ""];
        let mine = |d: &IntentDocument| claims.contains(&d.claim());
        let of_claims = |set: &IntentSet| -> BTreeMap<Arc<str>, Arc<str>> {
            set.shared().filter(|d| mine(d)).map(|d| (d.id().clone(), d.text.clone())).collect()
        };
        let mut seed = 7u64;
        let mut next = |n: u32| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) % u64::from(n)) as u32
        };
        let mut set = IntentSet::default();
        let (mut changes, mut removals) = (0, 0);
        let mut history: Vec<(IntentSet, ClaimsView)> = Vec::new();
        for step in 0..3000 {
            history.push((set.clone(), set.view(&claims)));
            if history.len() > 6 {
                history.remove(0);
            }
            match next(40) {
                // Put together anew: a log of its own.
                0 => {
                    let mut fresh = IntentSet::default();
                    for d in set.shared() {
                        fresh.add_shared(d.clone()).unwrap();
                    }
                    set = fresh;
                }
                // Another branch: an older set, changed otherwise from here on.
                1 => set = history[next(history.len() as u32) as usize].0.clone(),
                _ => {}
            }
            let (before, view) = history[next(history.len() as u32) as usize].clone();
            for _ in 0..=next(3) {
                let (kind, name) = (["A", "B", "C"][next(3) as usize], next(300));
                let api = apis[next(4) as usize];
                let api = if api.is_empty() { None } else { Some(api) };
                let id = format!("{kind}/n/d{name}");
                match (next(4), set.by_id(&id).cloned()) {
                    (0, Some(_)) => {
                        set.remove_id(&id);
                    }
                    // Read again with the same text: a new allocation, no change.
                    (1, Some(d)) => set.replace(Arc::new((*d).clone())),
                    (_, _) => {
                        let d = match api {
                            Some(api) => doc(api, kind, name, next(3)),
                            None => {
                                let text = format!(
                                    "kind: {kind}\nmetadata: {{name: d{name}, namespace: n}}\nspec: {{v: {}}}\n",
                                    next(3)
                                );
                                Arc::new(parse_file("f.yaml", &text).unwrap().remove(0))
                            }
                        };
                        set.replace(d);
                    }
                }
            }
            let (old, new) = (of_claims(&before), of_claims(&set));
            let want_changed: Vec<&Arc<str>> =
                new.iter().filter(|(id, t)| old.get(*id) != Some(*t)).map(|(id, _)| id).collect();
            let want_removed: Vec<&Arc<str>> = old.keys().filter(|id| !new.contains_key(*id)).collect();
            let got = set.changed_since(&view);
            let got_changed: Vec<&Arc<str>> = got.changed.iter().map(|d| d.id()).collect();
            assert_eq!(got_changed, want_changed, "step {step}: changed");
            assert_eq!(got.removed.iter().collect::<Vec<_>>(), want_removed, "step {step}: removed");
            changes += got.changed.len();
            removals += got.removed.len();
            // Every kind: the ids that came and went.
            let ids = |s: &IntentSet| s.shared().map(|d| d.id().clone()).collect::<BTreeSet<_>>();
            let (was, is) = (ids(&before), ids(&set));
            let (came, went) = set.came_and_went(&before);
            let came: BTreeSet<Arc<str>> = came.iter().map(|d| d.id().clone()).collect();
            let went: BTreeSet<Arc<str>> = went.iter().map(|d| d.id().clone()).collect();
            assert_eq!(came, is.difference(&was).cloned().collect(), "step {step}: came");
            assert_eq!(went, was.difference(&is).cloned().collect(), "step {step}: went");
        }
        assert!(changes > 500 && removals > 300, "the edits reach every case: {changes} changes, {removals} removals");
    }
}

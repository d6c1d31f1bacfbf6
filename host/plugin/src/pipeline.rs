//! Intent + plugins -> a validated, canonical resource set for one node group.
//!
//! Each `translate` plugin gets the documents of the kinds it declared; every resource it
//! returns is decoded into its typed Envoy message (unknown fields and wrong types are errors
//! naming the field), re-encoded canonically and attributed to the plugin and intent document
//! that produced it. Two plugins producing one resource, two plugins claiming one kind, and a
//! document no plugin claims are errors that name both sides. The consistency check runs when
//! the result is published to the cache (or by `xdst translate`).
//!
//! A [`Pipeline`] remembers what it translated last time, so a generation re-runs only what
//! changed: a plugin whose documents, configuration and code are unchanged is not called; a
//! `per-document` plugin is called with the changed documents only. A failed generation
//! leaves the remembered state as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use imbl::OrdMap;
use xdst_core::decode::{Body, decode_body};
use xdst_core::intent::{ClaimsView, IntentDocument, IntentSet, UnclaimedKind};
use xdst_core::pieces::{Pieces, decode_with_pieces};
use xdst_core::resource::Resource;
use xdst_core::snapshot::{DuplicateResource, Snapshot};
use xdst_core::types::ROUTE;

use crate::incremental::{Delta, DeltaCall};
use crate::wit::{self, Granularity, Phase, PluginInfo};
use crate::{Plugin, PluginError, Translated};

#[path = "pipeline_blame.rs"]
mod blame;
#[path = "pipeline_delta.rs"]
mod delta;

/// Something that translates: a sandboxed [`Plugin`], or (for benchmarks and tests) the same
/// translator compiled natively.
pub trait Translate: Send + Sync {
    fn info(&self) -> &PluginInfo;
    /// `sha256:<hex>` of the code, so a changed plugin is re-run.
    fn digest(&self) -> &str;
    fn translate(&self, request: &wit::TranslateRequest) -> Result<wit::TranslateResponse, PluginError>;
    /// [`translate`](Self::translate), with the documents' statuses (contract 0.2.0) and the
    /// node groups of each resource (0.3.0).
    fn translate_full(&self, request: &wit::TranslateRequest) -> Result<Translated, PluginError> {
        self.translate(request).map(Translated::of)
    }
    /// Whether its resources name the node groups they are for (contract 0.3.0). A `translate`
    /// plugin that does is called with node group `""`, once for every group a generation
    /// serves ([`CallMemo`]), and each group keeps the resources naming it or naming none.
    fn names_node_groups(&self) -> bool {
        false
    }
    /// For an incremental plugin (contract 0.4.0): what changed since the documents it was
    /// last given (design 020); none when it is not one, and the pipeline calls
    /// [`translate_full`](Self::translate_full) with every document.
    fn translate_delta(&self, call: &DeltaCall<'_>) -> Option<Result<Delta, PluginError>> {
        let _ = call;
        None
    }
    /// Whether it takes [`translate_delta`](Self::translate_delta) calls.
    fn incremental(&self) -> bool {
        false
    }
    /// Whether it must be called for `node_group` even when nothing changed: a periodic check
    /// found its output must be replaced (an incremental plugin).
    fn correction_due(&self, node_group: &str) -> bool {
        let _ = node_group;
        false
    }
}

impl Translate for Plugin {
    fn info(&self) -> &PluginInfo {
        Plugin::info(self)
    }
    fn digest(&self) -> &str {
        Plugin::digest(self)
    }
    fn translate(&self, request: &wit::TranslateRequest) -> Result<wit::TranslateResponse, PluginError> {
        Plugin::translate(self, request)
    }
    fn translate_full(&self, request: &wit::TranslateRequest) -> Result<Translated, PluginError> {
        Plugin::translate_full(self, request)
    }
    fn names_node_groups(&self) -> bool {
        matches!(self.contract(), "0.3.0" | "0.4.0")
    }
    fn translate_delta(&self, call: &DeltaCall<'_>) -> Option<Result<Delta, PluginError>> {
        Plugin::translate_delta(self, call)
    }
    fn incremental(&self) -> bool {
        Plugin::incremental(self)
    }
    fn correction_due(&self, node_group: &str) -> bool {
        Plugin::correction_due(self, node_group)
    }
}

/// A plugin under the name an operator gave it (one plugin can run twice, as two instances
/// with their own configuration and priority).
pub struct Renamed {
    plugin: Arc<Plugin>,
    info: PluginInfo,
}

impl Renamed {
    pub fn new(plugin: Arc<Plugin>, name: &str) -> Self {
        let mut info = plugin.info().clone();
        info.name = name.to_owned();
        Renamed { plugin, info }
    }
}

impl Translate for Renamed {
    fn info(&self) -> &PluginInfo {
        &self.info
    }
    fn digest(&self) -> &str {
        self.plugin.digest()
    }
    fn translate(&self, request: &wit::TranslateRequest) -> Result<wit::TranslateResponse, PluginError> {
        self.translate_full(request).map(|t| t.response)
    }
    fn translate_full(&self, request: &wit::TranslateRequest) -> Result<Translated, PluginError> {
        self.plugin.translate_full(request).map_err(|mut e| {
            e.plugin = self.info.name.clone();
            e
        })
    }
    fn names_node_groups(&self) -> bool {
        Translate::names_node_groups(self.plugin.as_ref())
    }
    fn translate_delta(&self, call: &DeltaCall<'_>) -> Option<Result<Delta, PluginError>> {
        let result = Plugin::translate_delta(&self.plugin, call)?;
        Some(result.map_err(|mut e| {
            e.plugin = self.info.name.clone();
            e
        }))
    }
    fn incremental(&self) -> bool {
        self.plugin.incremental()
    }
    fn correction_due(&self, node_group: &str) -> bool {
        self.plugin.correction_due(node_group)
    }
}

/// A loaded plugin and the operator's settings for it.
#[derive(Clone)]
pub struct Configured {
    pub plugin: Arc<dyn Translate>,
    /// Its configuration, as JSON (`null` when none).
    pub config: String,
    /// Order among `patch` plugins: lower runs first, then by name. Unused for `translate`.
    pub priority: i32,
    /// What a failure of a `patch` plugin does.
    pub failure: FailurePolicy,
}

impl Configured {
    /// Priority 0, fail-closed.
    pub fn new(plugin: Arc<dyn Translate>, config: impl Into<String>) -> Self {
        Configured { plugin, config: config.into(), priority: 0, failure: FailurePolicy::FailClosed }
    }
}

/// What a `patch` plugin's failure does to the generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailurePolicy {
    /// The generation fails, and the last good configuration keeps serving.
    #[default]
    FailClosed,
    /// The plugin's contribution is skipped, with a warning; the rest is served.
    FailOpen,
}

/// One plugin call of a generation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PluginCall {
    pub plugin: String,
    pub documents: usize,
    pub seconds: f64,
}

/// Where the document with an id comes from (`file#index`), for a plugin error naming it.
type Origins<'a> = &'a dyn Fn(&str) -> Option<String>;

/// [`Origins`] among `docs`.
fn origins_in<'a>(docs: &'a [&'a Arc<IntentDocument>]) -> impl Fn(&str) -> Option<String> + 'a {
    |id| docs.iter().find(|d| d.id().as_ref() == id).map(|d| d.origin.clone())
}

/// Document id -> its status (a JSON object), persistent: a generation takes its plugin's map
/// as it is, without a copy of every document's.
pub type Statuses = OrdMap<Arc<str>, Arc<str>>;

/// What one generation produced.
#[derive(Debug, Default)]
pub struct Translation {
    pub snapshot: Snapshot,
    /// (plugin, diagnostic) pairs to show the operator.
    pub diagnostics: Vec<(String, wit::Diagnostic)>,
    /// Plugins called this generation: how many documents each call was given, and how long
    /// it took.
    pub calls: Vec<PluginCall>,
    /// Each document's status, as its plugin computed it (contract 0.2.0), by document id.
    pub statuses: Statuses,
    /// Documents held out of this generation because they failed, by id.
    pub held: BTreeMap<Arc<str>, Held>,
    /// Kubernetes objects no plugin is for ([`IntentSet::ignorable`]), kept out of the
    /// translation: (id, origin), at most [`MAX_IGNORED_LISTED`].
    pub ignored: Vec<(Arc<str>, String)>,
    /// How many there were.
    pub ignored_total: usize,
}

/// The most ignored documents a translation names (the rest are counted).
pub const MAX_IGNORED_LISTED: usize = 20;

/// A document held out of a generation because it failed: its last good version is translated
/// in its place, or nothing when it never had one. It stays held while it reads as it did when
/// it failed; once it changes (or goes), it is tried again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// `Kind/name` or `Kind/namespace/name`.
    pub document: String,
    /// Where it was read: `file#index`, or a store key.
    pub origin: String,
    /// The failure, as the generation would have reported it.
    pub error: String,
    /// The plugin that failed on it, if one did.
    pub plugin: Option<String>,
    /// Whether its last good version is translated in its place (else it is left out).
    pub last_good: bool,
    /// The text that failed.
    #[serde(skip)]
    text: Arc<str>,
}

/// How a generation holds failing documents out ([`Pipeline::run_holding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    /// The most documents one generation newly holds out: each costs another run of the
    /// plugins whose input changed. A generation with more failures fails as a whole, and the
    /// last good resources keep serving.
    pub max_new: usize,
    /// Whether a document of a kind no plugin claims is held out (else it fails the
    /// generation). Only a new one is: a document the last good generation translated whose
    /// plugin is gone fails it, so taking out a plugin by mistake withdraws nothing.
    pub unclaimed: bool,
}

impl Holding {
    /// Nothing held: any failure fails the generation.
    pub const STRICT: Holding = Holding { max_new: 0, unclaimed: false };
    /// What `serve` does once a generation was good: up to 4 new documents a generation.
    pub const SERVE: Holding = Holding { max_new: 4, unclaimed: true };
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("{error}{}", origin.as_ref().map(|o| format!(" (in {o})")).unwrap_or_default())]
    Plugin {
        error: Box<PluginError>,
        /// The file and document the plugin blamed, where it named one.
        origin: Option<String>,
    },
    #[error(transparent)]
    Unclaimed(#[from] UnclaimedKind),
    #[error("kind {kind:?} is claimed by plugin {first:?} and by plugin {second:?}")]
    KindClaimedTwice { kind: String, first: String, second: String },
    #[error(transparent)]
    InvalidResource(Box<InvalidResource>),
    #[error("{} {name:?} is produced by {first} and again by {second}", xdst_core::types::short_name(type_url))]
    Conflict { type_url: String, name: String, first: String, second: String },
    #[error("plugin {plugin:?}: the status of {document:?}: {message}")]
    InvalidStatus { plugin: String, document: String, message: String },
    /// A call that named no document failed with the changes of one namespace, and not
    /// without them (see `pipeline_blame.rs`): those documents are held together.
    #[error(
        "{error} (with the changes of {}: {}, held together)",
        if namespace.is_empty() { "cluster-scoped documents".to_owned() } else { format!("namespace {namespace:?}") },
        some(documents)
    )]
    ChangesOf { error: Box<PipelineError>, namespace: String, documents: Vec<String> },
}

/// The first few of `ids`, and how many more: `1 document, A` or `5 documents, A, B, C and 2
/// more`.
fn some(ids: &[String]) -> String {
    let shown = ids.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    let count = if ids.len() == 1 { "1 document".to_owned() } else { format!("{} documents", ids.len()) };
    match ids.len() {
        0..=3 => format!("{count}, {shown}"),
        n => format!("{count}, {shown} and {} more", n - 3),
    }
}

impl From<PluginError> for PipelineError {
    fn from(error: PluginError) -> Self {
        PipelineError::Plugin { error: Box::new(error), origin: None }
    }
}

impl From<DuplicateResource> for PipelineError {
    fn from(d: DuplicateResource) -> Self {
        PipelineError::Conflict { type_url: d.type_url, name: d.name, first: d.first, second: d.second }
    }
}

/// A resource a plugin returned that is not a valid Envoy resource, or not attributed as the
/// contract requires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "plugin {plugin:?} ({}): {} {name:?}{}{}{}: {message}",
    short(digest),
    xdst_core::types::short_name(type_url),
    document.as_ref().map(|d| format!(" from {d}")).unwrap_or_default(),
    part.as_ref().map(|d| format!(", the part made from {d},")).unwrap_or_default(),
    field.as_ref().map(|f| format!(" field {f}")).unwrap_or_default()
)]
pub struct InvalidResource {
    pub plugin: String,
    pub digest: String,
    pub type_url: String,
    pub name: String,
    pub document: Option<String>,
    /// The document the refused part came from, where the plugin marked it
    /// ([`xdst_core::blame`]) and it is not `document`.
    pub part: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

impl InvalidResource {
    /// `r` was refused (its `body` at `field`): the resource's error, blaming the marked part's
    /// document.
    fn refused(
        p: &Configured,
        r: &wit::XdsResource,
        body: Option<Body<'_>>,
        field: Option<String>,
        message: String,
    ) -> PipelineError {
        let part = field
            .as_deref()
            .zip(body)
            .and_then(|(f, body)| xdst_core::blame::owner_at(&r.type_url, body, f))
            .filter(|d| Some(d) != r.document.as_ref());
        PipelineError::InvalidResource(Box::new(InvalidResource {
            plugin: p.plugin.info().name.clone(),
            digest: p.plugin.digest().to_owned(),
            type_url: r.type_url.clone(),
            name: r.name.clone(),
            document: r.document.clone(),
            part,
            field,
            message,
        }))
    }
}

impl PipelineError {
    /// The plugin at fault, if one is.
    pub fn plugin(&self) -> Option<&str> {
        match self {
            PipelineError::Plugin { error, .. } => Some(&error.plugin),
            PipelineError::InvalidResource(r) => Some(&r.plugin),
            PipelineError::InvalidStatus { plugin, .. } => Some(plugin),
            PipelineError::ChangesOf { error, .. } => error.plugin(),
            _ => None,
        }
    }
}

fn short(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}

/// Translates `intent` for `node_group` from scratch.
pub fn translate(plugins: &[Configured], intent: &IntentSet, node_group: &str) -> Result<Translation, PipelineError> {
    Pipeline::new(node_group).run(plugins, intent)
}

/// The translated state of one node group, kept between generations.
#[derive(Clone, Default)]
pub struct Pipeline {
    node_group: String,
    plugins: BTreeMap<String, Arc<PluginState>>,
    /// The last generation's result: the next one is this with what changed applied.
    snapshot: Option<Snapshot>,
    /// The documents the last generation held out, by id, and the plugins (names, digests,
    /// configurations) it ran: with other plugins, they are tried again.
    held: BTreeMap<Arc<str>, Held>,
    held_under: String,
    /// Whether the documents' statuses are kept (a server serves the default group's only).
    statuses: bool,
}

/// What one plugin was given and returned last time. The maps are persistent: the next
/// generation's state is a copy that shares everything that did not change.
#[derive(Default)]
struct PluginState {
    digest: String,
    config: String,
    granularity: Option<Granularity>,
    /// `Kind/name` -> the document it was given (its last good version).
    inputs: OrdMap<Arc<str>, Arc<IntentDocument>>,
    /// The documents of its kinds as the set it was given held them: what the next call's set
    /// is compared with ([`IntentSet::changed_since`]).
    view: ClaimsView,
    /// Per document (`per-document`), or everything under `""` (`whole-set`).
    outputs: OrdMap<Arc<str>, Arc<[Resource]>>,
    diagnostics: Arc<[wit::Diagnostic]>,
    /// Document id -> its status (JSON), as the plugin last returned it.
    statuses: OrdMap<Arc<str>, Arc<str>>,
    /// The node groups its resources name (contract 0.3.0); for a `per-document` plugin also
    /// those its resources named before (a group named here runs its own pipeline).
    named_groups: Arc<BTreeSet<String>>,
    /// A `whole-set` plugin's last call, decoded: what it returns again byte for byte is
    /// not decoded and checked again.
    decoded: Arc<Decodes>,
}

/// The resources a whole-set call returned, decoded and checked, by [`decode_key`]: a
/// translation of everything returns mostly what it returned before, and decoding a
/// resource (a RouteConfiguration of thousands of routes above all) costs far more than
/// hashing its bytes (design note 019, step 4).
#[derive(Default)]
struct Decodes {
    resources: std::collections::HashMap<[u8; 32], Resource>,
    /// The routes of its RouteConfigurations, by configuration ([`xdst_core::pieces`]).
    pieces: std::collections::HashMap<Arc<str>, Arc<Pieces>>,
}

impl Decodes {
    /// `r` (whose message is `body`) decoded and checked: as this call's predecessor decoded
    /// it when its bytes are the same, else with a RouteConfiguration's routes taken from
    /// the predecessor's where theirs are. What it used goes into `next`.
    fn decode(
        &self,
        r: &wit::XdsResource,
        body: Body<'_>,
        origin: impl FnOnce() -> String,
        next: &mut Decodes,
    ) -> Result<Resource, (Option<String>, String)> {
        let key = decode_key(r);
        let resource = match self.resources.get(&key) {
            Some(same) => {
                if let Some(pieces) = self.pieces.get(same.name()).filter(|_| same.type_url().as_ref() == ROUTE) {
                    next.pieces.insert(same.name().clone(), pieces.clone());
                }
                same.clone()
            }
            None if r.type_url == ROUTE => decode_route(&self.pieces, r, body, &mut next.pieces)?.with_origin(origin()),
            None => decode_body(&r.type_url, &r.name, body)?.with_origin(origin()),
        };
        next.resources.insert(key, resource.clone());
        Ok(resource)
    }
}

/// A RouteConfiguration `r` (whose message is `body`) decoded, its routes taken from `known`
/// (by configuration) where their bytes were seen; the routes it used go into `next`.
fn decode_route(
    known: &std::collections::HashMap<Arc<str>, Arc<Pieces>>,
    r: &wit::XdsResource,
    body: Body<'_>,
    next: &mut std::collections::HashMap<Arc<str>, Arc<Pieces>>,
) -> Result<Resource, (Option<String>, String)> {
    let mut used = Pieces::default();
    let before = known.get(r.name.as_str()).map(|p| &**p);
    let resource = decode_with_pieces(ROUTE, &r.name, body, before.unwrap_or(&Pieces::default()), &mut used);
    next.insert(Arc::from(r.name.as_str()), Arc::new(used));
    resource
}

/// Whether a status a plugin returned is a JSON object, checked without building it (a
/// whole-set plugin returns every document's).
fn is_json_object(status: &str) -> bool {
    status.trim_start().starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(status).is_ok()
}

/// A status the plugin returned, checked: it names a document of the call (`given`, else the
/// error says `not_given`) and is a JSON object; an empty one is `None` where `may_clear`
/// (a changes call clears the document's status with it).
pub(crate) fn checked_status(
    plugin: &str,
    status: &crate::DocumentStatus,
    given: bool,
    not_given: &str,
    may_clear: bool,
) -> Result<(Arc<str>, Option<Arc<str>>), PipelineError> {
    let invalid = |message: &str| PipelineError::InvalidStatus {
        plugin: plugin.to_owned(),
        document: status.document.clone(),
        message: message.to_owned(),
    };
    if !given {
        return Err(invalid(not_given));
    }
    let document = Arc::from(status.document.as_str());
    if may_clear && status.status.is_empty() {
        return Ok((document, None));
    }
    if !is_json_object(&status.status) {
        return Err(invalid("is not a JSON object"));
    }
    Ok((document, Some(Arc::from(status.status.as_str()))))
}

/// A plugin's failure as the pipeline reports it, with the origin of the document it names
/// (`origin_of`, by id).
fn plugin_error(error: PluginError, origin_of: impl Fn(&str) -> Option<String>) -> PipelineError {
    let origin = match &error.failure {
        crate::Failure::Reported { document: Some(doc), .. } => origin_of(doc),
        _ => None,
    };
    PipelineError::Plugin { error: Box::new(error), origin }
}

/// What makes a returned resource decode to the same [`Resource`]: its type, name, the
/// document it names (its origin) and its bytes. SHA-256, so no plugin can make two
/// different resources meet.
fn decode_key(r: &wit::XdsResource) -> [u8; 32] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for part in [r.type_url.as_bytes(), r.name.as_bytes()] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    match &r.document {
        Some(d) => {
            h.update([1]);
            h.update((d.len() as u64).to_le_bytes());
            h.update(d.as_bytes());
        }
        None => h.update([0]),
    }
    match &r.body {
        wit::Body::Json(s) => {
            h.update([0]);
            h.update(s.as_bytes());
        }
        wit::Body::Proto(b) => {
            h.update([1]);
            h.update(b);
        }
    }
    h.finalize().into()
}

/// The plugin calls of one generation, shared by the node groups it translates. A plugin whose
/// resources name their node groups ([`Translate::names_node_groups`]) is called once for given
/// documents: every group's pipeline given the same documents takes that call's result, checked
/// and decoded once, and keeps the resources that are for it. Make one for each attempt at a
/// generation, and give it to every group's [`Pipeline::run_with`].
#[derive(Default)]
pub struct CallMemo {
    calls: std::sync::Mutex<Vec<Memoised>>,
    deltas: delta::DeltaMemo,
}

struct Memoised {
    plugin: String,
    digest: String,
    config: String,
    sent: Vec<Arc<IntentDocument>>,
    result: Result<Arc<Decoded>, PipelineError>,
}

impl CallMemo {
    fn same(m: &Memoised, p: &Configured, sent: &[&Arc<IntentDocument>]) -> bool {
        m.plugin == p.plugin.info().name
            && m.digest == p.plugin.digest()
            && m.config == p.config
            && m.sent.len() == sent.len()
            && m.sent.iter().zip(sent).all(|(a, b)| Arc::ptr_eq(a, b) || (a.id() == b.id() && a.text == b.text))
    }

    fn find(&self, p: &Configured, sent: &[&Arc<IntentDocument>]) -> Option<Result<Arc<Decoded>, PipelineError>> {
        let calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.iter().find(|m| Self::same(m, p, sent)).map(|m| m.result.clone())
    }

    fn keep(&self, p: &Configured, sent: &[&Arc<IntentDocument>], result: Result<Arc<Decoded>, PipelineError>) {
        let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.push(Memoised {
            plugin: p.plugin.info().name.clone(),
            digest: p.plugin.digest().to_owned(),
            config: p.config.clone(),
            sent: sent.iter().map(|d| Arc::clone(d)).collect(),
            result,
        });
    }
}

/// A translate call's result, checked and decoded: what the groups of a generation share.
struct Decoded {
    /// The documents' statuses: (id, JSON object).
    statuses: Vec<(Arc<str>, Arc<str>)>,
    /// The resources by slot (the document each came from for a `per-document` plugin, `""`
    /// for a `whole-set` one), each with the node groups it is for (none: every group).
    fresh: BTreeMap<Arc<str>, Vec<ForGroups>>,
    diagnostics: Vec<wit::Diagnostic>,
    /// Every node group a resource names.
    named: BTreeSet<String>,
    /// The documents of the call, as the pipeline that made it keeps them (`whole-set`).
    inputs: Option<OrdMap<Arc<str>, Arc<IntentDocument>>>,
    /// What it returned, decoded (`whole-set`): the next call's [`Decodes`].
    decoded: Arc<Decodes>,
}

/// A resource and the node groups it is for (none: every group).
type ForGroups = (Resource, Arc<[String]>);

/// Whether every node group's translation with `plugins` is the default group's, but for the
/// resources that name groups: all are `translate` plugins whose resources name their groups
/// (contract 0.3.0). Then a group that nothing names is served the default group's set, and
/// needs no pipeline of its own ([`Pipeline::names_group`]).
pub fn groups_differ_only_by_name(plugins: &[Configured]) -> bool {
    plugins.iter().all(|p| p.plugin.info().phase == Phase::Translate && p.plugin.names_node_groups())
}

/// Whether a resource for `groups` is served to `group`.
fn for_group(groups: &[String], group: &str) -> bool {
    groups.is_empty() || groups.iter().any(|g| g == group)
}

/// What a generation changed: resources to take out (by type and name) and to put in.
#[derive(Default)]
struct Changes {
    remove: Vec<(Arc<str>, Arc<str>)>,
    add: Vec<Resource>,
}

impl Changes {
    fn take_out(&mut self, resources: &[Resource]) {
        self.remove.extend(resources.iter().map(|r| (r.type_url().clone(), r.name().clone())));
    }
    fn take_out_all(&mut self, state: &PluginState) {
        for rs in state.outputs.values() {
            self.take_out(rs);
        }
    }
}

impl Pipeline {
    pub fn new(node_group: &str) -> Self {
        Pipeline {
            node_group: node_group.to_owned(),
            plugins: BTreeMap::new(),
            snapshot: None,
            held: BTreeMap::new(),
            held_under: String::new(),
            statuses: true,
        }
    }

    /// The pipeline, keeping no statuses: for a node group whose statuses nobody reads (a
    /// server serves the default group's), so a thousand groups do not keep a thousand copies.
    pub fn without_statuses(mut self) -> Self {
        self.statuses = false;
        self
    }

    pub fn node_group(&self) -> &str {
        &self.node_group
    }

    /// Whether a resource of the last good generation names node group `group`.
    pub fn names_group(&self, group: &str) -> bool {
        self.plugins.values().any(|s| s.named_groups.contains(group))
    }

    /// Runs one generation. On success the pipeline remembers it; on failure nothing changes.
    /// Any failure fails it: what `xdst translate` and the tests want.
    pub fn run(&mut self, plugins: &[Configured], intent: &IntentSet) -> Result<Translation, PipelineError> {
        self.run_holding(plugins, intent, Holding::STRICT)
    }

    /// [`run_with`](Self::run_with), with calls shared by nothing else.
    pub fn run_holding(
        &mut self,
        plugins: &[Configured],
        intent: &IntentSet,
        how: Holding,
    ) -> Result<Translation, PipelineError> {
        self.run_with(plugins, intent, how, &CallMemo::default())
    }

    /// [`run`](Self::run), holding documents out instead of failing: a failure that names a
    /// document (a plugin's error about it, a resource part it made that Envoy would refuse, a
    /// new document of a kind no plugin claims) holds that document out ([`Held`]) and the
    /// generation is run again without it, up to `how.max_new` times. Documents held before
    /// are held again, without another try, while their text is the one that failed. The
    /// calls of plugins that name node groups are shared through `memo` with the other groups
    /// of the generation.
    pub fn run_with(
        &mut self,
        plugins: &[Configured],
        intent: &IntentSet,
        how: Holding,
        memo: &CallMemo,
    ) -> Result<Translation, PipelineError> {
        let claimed = claims(plugins)?;
        let mut effective = std::borrow::Cow::Borrowed(intent);
        let claims: std::collections::BTreeSet<String> = claimed.keys().cloned().collect();
        let sorted = intent.sort_unclaimed(&claims);
        let ignored_total = sorted.ignorable.len();
        let ignored: Vec<(Arc<str>, String)> =
            sorted.ignorable.iter().take(MAX_IGNORED_LISTED).map(|d| (d.id().clone(), d.origin.clone())).collect();
        let ignorable: Vec<Arc<str>> = sorted.ignorable.iter().map(|d| d.id().clone()).collect();
        for id in ignorable {
            effective.to_mut().remove_id(&id);
        }
        let mut held: BTreeMap<Arc<str>, Held> = BTreeMap::new();
        for (id, e) in sorted.unclaimed {
            let translated_before = self.plugins.values().any(|s| s.inputs.contains_key(&id));
            if !how.unclaimed || translated_before {
                return Err(e.into());
            }
            let doc = intent.by_id(&id).expect("an unclaimed document is in the intent");
            effective.to_mut().remove_id(&id);
            held.insert(id, Held::new(doc, e.to_string(), None, false));
        }
        let under: String = plugins
            .iter()
            .map(|p| format!("{}\u{0}{}\u{0}{}\u{0}", p.plugin.info().name, p.plugin.digest(), p.config))
            .collect();
        let carried = if under == self.held_under { &self.held } else { &BTreeMap::new() };
        for (id, h) in carried {
            if !held.contains_key(id) && intent.by_id(id).is_some_and(|d| d.text == h.text) {
                let last_good = self.hold(effective.to_mut(), id, &h.text);
                held.insert(id.clone(), Held { last_good, ..h.clone() });
            }
        }
        let mut fresh = 0;
        loop {
            let e = match self.run_once(plugins, &effective, memo) {
                Ok(mut t) => {
                    self.held = held.clone();
                    self.held_under = under;
                    t.held = held;
                    (t.ignored, t.ignored_total) = (ignored, ignored_total);
                    return Ok(t);
                }
                Err(e) => e,
            };
            let docs: Vec<&Arc<IntentDocument>> =
                blamed(&e, &claimed).iter().filter_map(|id| intent.by_id(id)).collect();
            // A document already held failing again (its last good version, with what changed
            // around it) is not left out: the blame may be wrong (a part no plugin marked is
            // blamed on the resource's owner), and leaving out a Gateway would take down every
            // route on it. The generation fails instead, and the last good keeps serving.
            if docs.is_empty() || fresh == how.max_new || docs.iter().any(|d| held.contains_key(d.id())) {
                return Err(e);
            }
            // One more run, whether for one document or for one namespace's changes together.
            fresh += 1;
            for doc in docs {
                let id = doc.id().clone();
                tracing::debug!(group = %self.node_group, document = %id, error = %e, "document held out of the generation");
                let last_good = self.hold(effective.to_mut(), &id, &doc.text);
                held.insert(id, Held::new(doc, e.to_string(), e.plugin().map(str::to_owned), last_good));
            }
        }
    }

    /// Puts the last good version of document `id` in `intent` in place of the one whose text
    /// is `failed`, or takes it out when there is none; whether there was one.
    fn hold(&self, intent: &mut IntentSet, id: &str, failed: &Arc<str>) -> bool {
        let good = self.plugins.values().find_map(|s| s.inputs.get(id)).filter(|g| g.text != *failed);
        match good {
            Some(good) => {
                intent.replace(good.clone());
                true
            }
            None => {
                intent.remove_id(id);
                false
            }
        }
    }

    fn run_once(
        &mut self,
        plugins: &[Configured],
        intent: &IntentSet,
        memo: &CallMemo,
    ) -> Result<Translation, PipelineError> {
        let mut patches: Vec<&Configured> = plugins.iter().filter(|p| p.plugin.info().phase == Phase::Patch).collect();
        patches.sort_by(|a, b| (a.priority, &a.plugin.info().name).cmp(&(b.priority, &b.plugin.info().name)));
        let mut plugins: Vec<&Configured> =
            plugins.iter().filter(|p| p.plugin.info().phase == Phase::Translate).collect();
        plugins.sort_by(|a, b| a.plugin.info().name.cmp(&b.plugin.info().name));

        let mut next: BTreeMap<String, Arc<PluginState>> = BTreeMap::new();
        let mut calls = Vec::new();
        let mut changes = Changes::default();
        for (name, old) in &self.plugins {
            if !plugins.iter().any(|p| &p.plugin.info().name == name) {
                changes.take_out_all(old);
            }
        }
        for &p in &plugins {
            let info = p.plugin.info();
            let prev = self.plugins.get(&info.name);
            // (The kinds come with the digest; compared too, as the view of the set is by kind.)
            let reusable = prev.filter(|s| {
                s.digest == p.plugin.digest()
                    && s.config == p.config
                    && s.granularity == Some(info.granularity)
                    && s.view.claims() == xdst_core::intent::sorted_claims(&info.kinds)
            });
            if reusable.is_none()
                && let Some(old) = prev
            {
                // A new version or configuration: everything it produced is replaced.
                changes.take_out_all(old);
            }
            let state = self.run_plugin(p, intent, reusable.map(Arc::as_ref), &mut calls, &mut changes, memo)?;
            next.insert(info.name.clone(), state.map(Arc::new).unwrap_or_else(|| reusable.unwrap().clone()));
        }

        let mut diagnostics = Vec::new();
        let mut statuses = Statuses::new();
        for (name, state) in &next {
            diagnostics.extend(state.diagnostics.iter().map(|d| (name.clone(), d.clone())));
            // Plugins translate kinds of their own, so their statuses' ids never meet; the
            // smaller map goes into the larger (one plugin: its map, shared).
            statuses = statuses.union(state.statuses.clone());
        }
        let snapshot = match &self.snapshot {
            // Apply only what changed, so untouched resources stay the same `Arc`s.
            Some(previous) => previous.apply(changes.remove, changes.add)?,
            None => {
                let mut builder = Snapshot::builder();
                for state in next.values() {
                    for resources in state.outputs.values() {
                        for r in resources.iter() {
                            builder.add(r.clone())?;
                        }
                    }
                }
                builder.build()
            }
        };
        // The patch phase, on top of what the translate plugins produced (which stays the base
        // of the next generation's incremental work).
        let mut served = snapshot.clone();
        for p in patches {
            let name = p.plugin.info().name.clone();
            match self.run_patch(p, intent, &served, &mut calls) {
                Ok((remove, add, diags)) => {
                    served = served.apply(remove, add)?;
                    diagnostics.extend(diags.into_iter().map(|d| (name.clone(), d)));
                }
                Err(e) if p.failure == FailurePolicy::FailOpen => {
                    tracing::warn!(plugin = %name, error = %e, "patch plugin failed; skipped (failure policy fail-open)");
                    diagnostics.push((
                        name,
                        wit::Diagnostic {
                            severity: wit::Severity::Warning,
                            message: format!("skipped (failure policy fail-open): {e}"),
                            document: None,
                            field: None,
                        },
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        check_binds(&plugins, &served, self.snapshot.as_ref())?;
        self.plugins = next;
        self.snapshot = Some(snapshot);
        Ok(Translation {
            snapshot: served,
            diagnostics,
            calls,
            statuses,
            held: BTreeMap::new(),
            ignored: Vec::new(),
            ignored_total: 0,
        })
    }

    /// Calls `p` for `node_group` with the documents `sent` (and, for a patch plugin,
    /// `resources`), counting the call. A plugin error that names a document gets that
    /// document's origin (`origin_of` its id).
    fn call(
        p: &Configured,
        node_group: &str,
        sent: &[&Arc<IntentDocument>],
        origin_of: Origins<'_>,
        resources: Vec<wit::XdsResource>,
        calls: &mut Vec<PluginCall>,
    ) -> Result<Translated, PipelineError> {
        let request = wit::TranslateRequest {
            node_group: node_group.to_owned(),
            documents: sent.iter().map(|d| crate::incremental::wit_document(d)).collect(),
            resources,
            config: p.config.clone(),
        };
        let started = std::time::Instant::now();
        let result = p.plugin.translate_full(&request);
        calls.push(PluginCall {
            plugin: p.plugin.info().name.clone(),
            documents: sent.len(),
            seconds: started.elapsed().as_secs_f64(),
        });
        result.map_err(|error| plugin_error(error, origin_of))
    }

    /// Runs one `patch` plugin over `current`: it gets every document of its kinds and every
    /// resource, and returns the resources it changes (same type and name) or adds. Returns
    /// what to take out, what to put in, and its diagnostics.
    #[allow(clippy::type_complexity, reason = "what to take out, what to put in, diagnostics: used once")]
    fn run_patch(
        &self,
        p: &Configured,
        intent: &IntentSet,
        current: &Snapshot,
        calls: &mut Vec<PluginCall>,
    ) -> Result<(Vec<(Arc<str>, Arc<str>)>, Vec<Resource>, Vec<wit::Diagnostic>), PipelineError> {
        let info = p.plugin.info();
        let docs = intent.of_claims(&info.kinds);
        let resources = current
            .types()
            .flat_map(|(_, set)| set.resources())
            .map(|r| wit::XdsResource {
                type_url: r.type_url().to_string(),
                name: r.name().to_string(),
                // JSON, so a plugin in any language can read and edit it.
                body: match xdst_core::decode::to_json(r.type_url(), r.body()) {
                    Some(json) => wit::Body::Json(json),
                    None => wit::Body::Proto(r.body().to_vec()),
                },
                document: r.attribution().document,
            })
            .collect();
        let response = Self::call(p, &self.node_group, &docs, &origins_in(&docs), resources, calls)?.response;
        let (mut remove, mut add) = (Vec::new(), Vec::new());
        for r in response.resources {
            let body = match &r.body {
                wit::Body::Json(s) => Body::Json(s),
                wit::Body::Proto(b) => Body::Proto(b),
            };
            let resource = decode_body(&r.type_url, &r.name, body.clone())
                .map_err(|(field, message)| InvalidResource::refused(p, &r, Some(body), field, message))?;
            let origin = match current.resource(&r.type_url, &r.name) {
                Some(old) => {
                    remove.push((old.type_url().clone(), old.name().clone()));
                    format!("{}; changed by plugin {}", old.origin().unwrap_or("?"), info.name)
                }
                None => match &r.document {
                    Some(d) => format!("plugin {} from {d}", info.name),
                    None => format!("plugin {}", info.name),
                },
            };
            add.push(resource.with_origin(origin));
        }
        Ok((remove, add, response.diagnostics))
    }

    /// Translates what changed for one plugin, recording in `changes` what its output lost and
    /// gained; `None` when nothing changed.
    fn run_plugin(
        &self,
        p: &Configured,
        intent: &IntentSet,
        prev: Option<&PluginState>,
        calls: &mut Vec<PluginCall>,
        changes: &mut Changes,
        memo: &CallMemo,
    ) -> Result<Option<PluginState>, PipelineError> {
        let info = p.plugin.info();
        let per_document = info.granularity == Granularity::PerDocument;
        // Every document of its kinds, gathered only where a call needs them all.
        let every = || intent.of_claims(&info.kinds);
        let view = intent.view(&info.kinds);

        // What changed since last time: what differs between the set the last call saw and this
        // one, visiting only the parts of the set that changed.
        let mut changed: Vec<&Arc<IntentDocument>>;
        let removed: Vec<Arc<str>>;
        let mut inputs = match prev {
            Some(prev) => {
                let diff = intent.changed_since(&prev.view);
                (changed, removed) = (diff.changed, diff.removed);
                let group = if p.plugin.names_node_groups() { "" } else { self.node_group.as_str() };
                if changed.is_empty() && removed.is_empty() && !p.plugin.correction_due(group) {
                    return Ok(None);
                }
                let mut inputs = prev.inputs.clone();
                for id in &removed {
                    inputs.remove(id);
                }
                for d in &changed {
                    inputs.insert(d.id().clone(), Arc::clone(d));
                }
                inputs
            }
            None => {
                changed = every();
                removed = Vec::new();
                changed.iter().map(|d| (d.id().clone(), Arc::clone(d))).collect()
            }
        };
        if !per_document && p.plugin.incremental() {
            // An incremental plugin is told what changed (`pipeline_delta.rs`).
            return self.run_delta(p, inputs, view, prev, &changed, &removed, &every, calls, changes, memo).map(Some);
        }
        if !per_document {
            // A whole-set plugin gets every document again (`inputs` already holds them all).
            changed = every();
        }

        // Outputs that go: of removed documents, of changed ones, or (whole-set) all of them.
        let mut outputs = match prev {
            Some(prev) if per_document => {
                let mut o = prev.outputs.clone();
                for id in removed.iter().chain(changed.iter().map(|d| d.id())) {
                    if let Some(rs) = o.remove(id) {
                        changes.take_out(&rs);
                    }
                }
                o
            }
            Some(prev) => {
                changes.take_out_all(prev);
                OrdMap::new()
            }
            None => OrdMap::new(),
        };
        let changed_ids: BTreeSet<&str> = changed.iter().map(|d| d.id().as_ref()).collect();
        let old_diagnostics = prev.map(|p| p.diagnostics.clone()).unwrap_or_else(|| Arc::from([]));
        let mut diagnostics: Vec<wit::Diagnostic> = if per_document {
            keep_diagnostics(&old_diagnostics, |d| d.is_none_or(|d| inputs.contains_key(d) && !changed_ids.contains(d)))
                .to_vec()
        } else {
            Vec::new()
        };
        // Statuses that stay: a per-document plugin's, of documents it is not given again.
        let mut statuses = match prev {
            Some(prev) if per_document => {
                let mut s = prev.statuses.clone();
                for id in removed.iter().chain(changed.iter().map(|d| d.id())) {
                    s.remove(id);
                }
                s
            }
            _ => OrdMap::new(),
        };
        let named_before = match prev {
            Some(prev) if per_document => prev.named_groups.clone(),
            _ => Arc::default(),
        };
        let state = |outputs, diagnostics: Vec<wit::Diagnostic>, inputs, statuses, named_groups, decoded| PluginState {
            view: view.clone(),
            digest: p.plugin.digest().to_owned(),
            config: p.config.clone(),
            granularity: Some(info.granularity),
            inputs,
            outputs,
            diagnostics: diagnostics.into(),
            statuses,
            named_groups,
            decoded,
        };
        if changed.is_empty() {
            return Ok(Some(state(outputs, diagnostics, inputs, statuses, named_before, Arc::default())));
        }

        let known = prev.map(|p| &*p.decoded);
        let given = inputs.clone();
        let origin_of = move |id: &str| given.get(id).map(|d| d.origin.clone());
        // A failure that names no document is blamed on one namespace's changes, if it can be.
        let blaming = |group: &str, calls: &mut Vec<PluginCall>, e| {
            Self::whose_changes(p, group, &changed, &every(), prev, per_document, calls, e)
        };
        let decoded = match p.plugin.names_node_groups() {
            false => Arc::new(
                Self::call_decoded(p, &self.node_group, &changed, &origin_of, known, calls)
                    .map_err(|e| blaming(&self.node_group, calls, e))?,
            ),
            true => match memo.find(p, &changed) {
                Some(shared) => shared?,
                None => {
                    let inputs = (!per_document).then(|| inputs.clone());
                    let result = Self::call_decoded(p, "", &changed, &origin_of, known, calls)
                        .map_err(|e| blaming("", calls, e))
                        .map(|d| Arc::new(Decoded { inputs, ..d }));
                    memo.keep(p, &changed, result.clone());
                    result?
                }
            },
        };
        if self.statuses {
            statuses.extend(decoded.statuses.iter().cloned());
        }
        // The inputs of the call this group shares: one map for every group, not one each.
        if let (false, Some(shared)) = (per_document, &decoded.inputs) {
            inputs = shared.clone();
        }
        for (slot, resources) in &decoded.fresh {
            let mine: Vec<Resource> = resources
                .iter()
                .filter(|(_, groups)| for_group(groups, &self.node_group))
                .map(|(r, _)| r.clone())
                .collect();
            changes.add.extend(mine.iter().cloned());
            outputs.insert(slot.clone(), mine.into());
        }
        diagnostics.extend(decoded.diagnostics.iter().cloned());
        let named = match named_before.is_empty() {
            true => Arc::new(decoded.named.clone()),
            false => Arc::new(named_before.iter().chain(&decoded.named).cloned().collect()),
        };
        Ok(Some(state(outputs, diagnostics, inputs, statuses, named, decoded.decoded.clone())))
    }

    /// Calls translate plugin `p` for `node_group` with the documents `changed` (every one
    /// of its kinds is in the set; `origin_of` finds one by id), and checks and decodes what it returned, taking what its
    /// last call returned byte for byte from `known` (`whole-set`).
    fn call_decoded(
        p: &Configured,
        node_group: &str,
        changed: &[&Arc<IntentDocument>],
        origin_of: Origins<'_>,
        known: Option<&Decodes>,
        calls: &mut Vec<PluginCall>,
    ) -> Result<Decoded, PipelineError> {
        let info = p.plugin.info();
        let per_document = info.granularity == Granularity::PerDocument;
        let changed_ids: BTreeSet<&str> = changed.iter().map(|d| d.id().as_ref()).collect();
        let translated = Self::call(p, node_group, changed, origin_of, vec![], calls)?;
        let mut statuses = Vec::with_capacity(translated.statuses.len());
        for s in &translated.statuses {
            let given = changed_ids.contains(s.document.as_str());
            let (document, status) =
                checked_status(&info.name, s, given, "names a document that was not in this request", false)?;
            statuses.push((document, status.expect("only a changes call may clear a status")));
        }

        let mut fresh: BTreeMap<Arc<str>, Vec<ForGroups>> = if per_document {
            changed.iter().map(|d| (d.id().clone(), Vec::new())).collect()
        } else {
            BTreeMap::from([(Arc::from(""), Vec::new())])
        };
        let everyone: Arc<[String]> = Arc::from([]);
        let mut named = BTreeSet::new();
        let mut decoded = Decodes::default();
        let none = Decodes::default();
        let known = known.unwrap_or(&none);
        for (i, r) in translated.response.resources.iter().enumerate() {
            let invalid = |field: Option<String>, message: String| InvalidResource::refused(p, r, None, field, message);
            let slot: Arc<str> = if per_document {
                match &r.document {
                    Some(d) if changed_ids.contains(d.as_str()) => Arc::from(d.as_str()),
                    Some(d) => {
                        return Err(invalid(
                            None,
                            format!(
                                "names document {d:?}, which was not in this request (a per-document plugin must \
                                    attribute each resource to one of the documents it was given)"
                            ),
                        ));
                    }
                    None => {
                        return Err(invalid(
                            None,
                            "names no document (a per-document plugin must attribute each \
                            resource to the document it came from)"
                                .into(),
                        ));
                    }
                }
            } else {
                Arc::from("")
            };
            test_panic_hook(&r.name);
            let body = match &r.body {
                wit::Body::Json(s) => Body::Json(s),
                wit::Body::Proto(b) => Body::Proto(b),
            };
            let origin = || match &r.document {
                Some(d) => format!("plugin {} from {d}", info.name),
                None => format!("plugin {}", info.name),
            };
            let resource = match per_document {
                true => decode_body(&r.type_url, &r.name, body.clone()).map(|r| r.with_origin(origin())),
                false => known.decode(r, body.clone(), origin, &mut decoded),
            }
            .map_err(|(field, message)| InvalidResource::refused(p, r, Some(body), field, message))?;
            let groups = match translated.groups_of(i) {
                [] => everyone.clone(),
                these => {
                    named.extend(these.iter().cloned());
                    Arc::from(these)
                }
            };
            fresh.get_mut(&slot).expect("slot exists").push((resource, groups));
        }
        Ok(Decoded {
            statuses,
            fresh,
            diagnostics: translated.response.diagnostics,
            named,
            inputs: None,
            decoded: Arc::new(decoded),
        })
    }
}

/// Two listeners binding one address: Envoy would refuse the second, so the one new since
/// `previous` is refused here, naming the document it came from.
fn check_binds(plugins: &[&Configured], served: &Snapshot, previous: Option<&Snapshot>) -> Result<(), PipelineError> {
    let Some(listeners) = served.types().find(|(t, _)| t.as_ref() == xdst_core::types::LISTENER).map(|(_, s)| s) else {
        return Ok(());
    };
    let is_new = |r: &Resource| {
        previous.and_then(|p| p.resource(xdst_core::types::LISTENER, r.name())).is_none_or(|old| old.body() != r.body())
    };
    let Some((blamed, kept, address)) = xdst_core::consistency::duplicate_bind(listeners.resources(), is_new) else {
        return Ok(());
    };
    let attribution = blamed.attribution();
    let plugin = attribution.produced_by.unwrap_or_default();
    let digest = plugins
        .iter()
        .find(|p| p.plugin.info().name == plugin)
        .map(|p| p.plugin.digest().to_owned())
        .unwrap_or_default();
    let kept_from = kept.attribution().document.map(|d| format!(" (from {d})")).unwrap_or_default();
    Err(PipelineError::InvalidResource(Box::new(InvalidResource {
        plugin,
        digest,
        type_url: xdst_core::types::LISTENER.to_owned(),
        name: blamed.name().to_string(),
        document: attribution.document,
        part: None,
        field: Some("address".to_owned()),
        message: format!("Envoy would refuse it: listener {:?}{kept_from} already binds {address}", kept.name()),
    })))
}

/// Each kind the plugins translate, with the plugin that claims it; two plugins claiming one
/// kind is an error.
fn claims(plugins: &[Configured]) -> Result<BTreeMap<String, String>, PipelineError> {
    // In the order the plugins run (translate by name, then patch by priority and name), so
    // the error names the first and the second the same way every time.
    let mut ordered: Vec<&Configured> = plugins.iter().collect();
    ordered.sort_by(|a, b| {
        let key = |p: &Configured| {
            let info = p.plugin.info();
            let patch = info.phase == Phase::Patch;
            (patch, if patch { p.priority } else { 0 }, info.name.clone())
        };
        key(a).cmp(&key(b))
    });
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for p in ordered {
        let info = p.plugin.info();
        for kind in &info.kinds {
            if let Some(first) = owner.insert(kind.clone(), info.name.clone()) {
                return Err(PipelineError::KindClaimedTwice { kind: kind.clone(), first, second: info.name.clone() });
            }
        }
    }
    Ok(owner)
}

/// The document a failure is about, when it names one the failing plugin translates: a plugin
/// may blame its own documents only.
fn blamed<'a>(e: &'a PipelineError, claimed: &BTreeMap<String, String>) -> Vec<&'a str> {
    let (plugin, documents): (&str, Vec<&str>) = match e {
        PipelineError::Plugin { error, .. } => match &error.failure {
            crate::Failure::Reported { document: Some(d), .. } => (error.plugin.as_str(), vec![d.as_str()]),
            _ => return Vec::new(),
        },
        PipelineError::InvalidResource(r) => match r.part.as_deref().or(r.document.as_deref()) {
            Some(d) => (r.plugin.as_str(), vec![d]),
            None => return Vec::new(),
        },
        PipelineError::InvalidStatus { plugin, document, .. } => (plugin.as_str(), vec![document.as_str()]),
        PipelineError::ChangesOf { error, documents, .. } => match error.plugin() {
            Some(p) => (p, documents.iter().map(String::as_str).collect()),
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let translates = |document: &str| {
        let kind = document.split('/').next();
        claimed.iter().any(|(claim, p)| p == plugin && claim.rsplit('/').next() == kind)
    };
    if documents.iter().all(|d| translates(d)) { documents } else { Vec::new() }
}

impl Held {
    fn new(doc: &IntentDocument, error: String, plugin: Option<String>, last_good: bool) -> Held {
        Held {
            document: doc.id().to_string(),
            origin: doc.origin.clone(),
            error,
            plugin,
            last_good,
            text: doc.text.clone(),
        }
    }
}

fn keep_diagnostics(all: &Arc<[wit::Diagnostic]>, keep: impl Fn(Option<&str>) -> bool) -> Arc<[wit::Diagnostic]> {
    all.iter().filter(|d| keep(d.document.as_deref())).cloned().collect()
}

/// Test-only: with `XDST_TEST_PANIC_ON_RESOURCE=NAME` in the environment, a translate plugin
/// returning a resource named NAME panics the generation here, so the tests can show that a
/// panic in a plugin-result path is contained (reported, and the next generation serves).
fn test_panic_hook(name: &str) {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let hook = NAME.get_or_init(|| std::env::var("XDST_TEST_PANIC_ON_RESOURCE").ok().filter(|n| !n.is_empty()));
    if hook.as_deref() == Some(name) {
        panic!("test hook: XDST_TEST_PANIC_ON_RESOURCE names resource {name:?}");
    }
}

//! The intent source: `--intent DIR --plugins DIR`.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file under the intent directory (subdirectories
//! included) holds intent documents; every `*.wasm` file in the plugins directory is a plugin
//! (see [`xdst_plugin::dir`]). A generation loads both, translates the intent for the default
//! node group and for every node group with a connected node, and publishes the result.
//! Translation is incremental: only plugins whose documents, configuration or code changed
//! run again, and a `per-document` plugin only on the documents that changed.
//!
//! Any failure (a malformed document, a plugin that traps or runs out of time, an invalid
//! resource, a dangling reference) fails that generation only: the last good resources keep
//! serving, and the error is logged, counted in `/metrics` and shown by `/debug/plugins`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime};

use tracing::{error, info, warn};
use xdst_core::cache::Publication;
use xdst_plugin::dir::{DirError, DirLoader, Entry, Loaded};
use xdst_plugin::pipeline::{CallMemo, Configured, Holding, Pipeline, Translation};

pub mod conditions;
pub mod error;
pub mod generation;
pub mod held;
pub mod input;
pub mod nacked;
pub mod report;
pub mod served;
pub mod watch;

pub use error::{GenerationError, MAX_ERROR_BYTES, explain_publish};
pub use held::HeldReport;
pub use input::{
    HeldSource, IntentInput, Mode, Overlay, ParseCache, Read, read_intent, read_intent_cached, read_mirror,
};
pub use report::{
    DiagnosticReport, ErrorReport, GenerationReport, LimitsReport, PluginReport, PluginTiming, RefusalReport, Status,
};

use crate::generate::plane::Plane;
use crate::generate::store::StoreProblem;
use error::publish_error;
use report::{diagnostic_report, plugin_report};
use xdst_serve::metrics::label;

/// A lock that a panic in an earlier generation may have poisoned: what it guards is either
/// reset after the panic ([`IntentSource::recover`]) or consistent at every step.
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Plugin diagnostics a generation logs and shows in `/debug/plugins`; the rest are counted.
pub const MAX_DIAGNOSTICS_SHOWN: usize = 20;

fn unix_now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The loaded plugins and one pipeline per node group.
pub struct IntentSource {
    input: IntentInput,
    /// With a store: the most documents it may hold.
    max_store_documents: usize,
    /// The largest intent file or store value read (`--max-file-size`).
    max_file_bytes: usize,
    /// `--namespace-dirs`: each directory under the intent directory writes its namespace only.
    namespace_dirs: bool,
    plugins: PluginSet,
    loader: Arc<DirLoader>,
    /// Plugin versions compiling off the generation thread, and their results.
    background: Arc<Mutex<Background>>,
    pipelines: Mutex<BTreeMap<String, Pipeline>>,
    parsed: Mutex<ParseCache>,
    status: Mutex<Status>,
    state: Mutex<PluginState>,
    /// The documents' statuses of the last good generation (default group), by document id.
    statuses: Mutex<Arc<ServedStatuses>>,
    /// `--on-nack hold`: documents a node's rejection blames are held at what it accepted.
    hold_on_nack: bool,
    nacked: Mutex<nacked::Nacked>,
    /// The intent the node-group admission was last told the names of (see `tell_names`).
    named: Mutex<Option<xdst_core::intent::IntentSet>>,
    /// `--store-namespace-keys`: intent API writes of namespaced documents go under their
    /// namespace's prefix.
    namespace_keys: bool,
    /// The generations kept for documents that carry none.
    generations: Mutex<generation::Counter>,
    /// What each node group was served, kept across restarts.
    served: Mutex<served::Served>,
    /// `--full-reread`: how often every intent file is read again whatever its stamp says.
    full_reread: std::time::Duration,
    /// When every file was last read whatever its stamp said (`None`: the next read does).
    read_in_full: Mutex<Option<Instant>>,
    /// The intent files the watcher saw change since the last read (everything while no watcher
    /// is watching): a read looks only at those.
    dirty: Arc<crate::generate::tree::Dirty>,
}

/// Document id -> its status (a JSON object), as the plugins computed it.
pub type Statuses = xdst_plugin::pipeline::Statuses;

/// The statuses served: as the plugins computed them with holds marked (`raw`), and each with
/// the times its conditions last changed (`stamped`, [`conditions::stamped`]).
#[derive(Debug, Default)]
struct ServedStatuses {
    raw: Statuses,
    stamped: Statuses,
}

/// Where the plugins are listed.
#[allow(clippy::large_enum_variant, reason = "one per server, never moved in a hot path")]
pub enum PluginSet {
    /// Every `*.wasm` in a directory, with `NAME.yaml` settings beside it.
    Dir(PathBuf),
    /// The `plugins` list of a configuration file.
    Config(crate::generate::plugins::list::ConfiguredPlugins),
}

/// Plugin versions being compiled in the background, by content key, and those done.
#[derive(Default)]
struct Background {
    compiling: std::collections::HashSet<String>,
    done: std::collections::HashMap<String, Result<Loaded, DirError>>,
}

/// Keep last good, per plugin file.
#[derive(Default)]
struct PluginState {
    /// What each file served in the last good generation.
    good: BTreeMap<PathBuf, Loaded>,
    /// The contents (key) each of those came from.
    good_keys: BTreeMap<PathBuf, String>,
    /// The plugins of the last good generation, in its order.
    good_chosen: Vec<Loaded>,
    /// File contents refused (by digest), with why: used no more until the file changes.
    refused: BTreeMap<PathBuf, Refusal>,
    /// The plugin files (or configuration entries) listed by the last generation.
    listed: std::collections::BTreeSet<PathBuf>,
}

#[derive(Clone)]
struct Refusal {
    digest: String,
    reason: String,
    at: u64,
    /// The documents (id, text) the refusal was about, when the intent was its reason: once
    /// one of them changes or goes, the plugin is tried again.
    about: Vec<(Arc<str>, Arc<str>)>,
    /// How many documents of its kinds nothing translates because it is refused.
    untranslated: usize,
}

impl IntentSource {
    pub fn new(input: IntentInput, plugins: PluginSet, loader: DirLoader) -> Self {
        let status = Status {
            intent_dir: input.describe(),
            plugins_dir: match &plugins {
                PluginSet::Dir(d) => d.display().to_string(),
                PluginSet::Config(c) => c.describe(),
            },
            ..Default::default()
        };
        IntentSource {
            input,
            max_store_documents: crate::generate::store::DEFAULT_MAX_DOCUMENTS,
            max_file_bytes: xdst_core::files::DEFAULT_MAX_TEXT_BYTES,
            namespace_dirs: false,
            plugins,
            loader: Arc::new(loader),
            background: Arc::new(Mutex::new(Background::default())),
            pipelines: Mutex::new(BTreeMap::new()),
            parsed: Mutex::new(ParseCache::new()),
            status: Mutex::new(status),
            state: Mutex::new(PluginState::default()),
            statuses: Mutex::new(Arc::default()),
            hold_on_nack: true,
            nacked: Mutex::new(nacked::Nacked::default()),
            named: Mutex::default(),
            namespace_keys: false,
            generations: Mutex::new(generation::Counter::default()),
            served: Mutex::new(served::Served::default()),
            full_reread: std::time::Duration::from_secs(60),
            read_in_full: Mutex::new(None),
            dirty: Arc::default(),
        }
    }

    /// Where the watcher tells the intent files it sees change.
    pub fn dirty(&self) -> &Arc<crate::generate::tree::Dirty> {
        &self.dirty
    }

    /// `path` (an intent file, in the intent directory's form) was just written or removed by
    /// xdst itself (the intent API): the next read looks at it without waiting for its event.
    pub fn note_written(&self, path: &Path) {
        self.dirty.note(crate::generate::tree::Changes::Paths([path.to_owned()].into()));
    }

    /// `--full-reread`: every intent file is read again at least this often, whatever its
    /// size and times say (0: only when they change, or on reload).
    pub fn with_full_reread(mut self, every: std::time::Duration) -> Self {
        self.full_reread = every;
        self
    }

    /// How often every intent file is read again (0: never on a timer).
    pub fn full_reread(&self) -> std::time::Duration {
        self.full_reread
    }

    /// The next read reads every file, whatever its stamp says (`POST /reload`, SIGHUP).
    pub fn forget_stamps(&self) {
        *locked(&self.read_in_full) = None;
    }

    /// Where what each node group is served is kept across restarts.
    pub fn with_served_file(self, path: Option<PathBuf>) -> Self {
        if let Some(path) = path {
            *locked(&self.served) = served::Served::load(path);
        }
        self
    }

    /// The node groups served something before this start and nothing now (with how many
    /// resources they were served then).
    pub fn emptied_since_start(&self, cache: &xdst_core::cache::Cache) -> Vec<(String, usize)> {
        locked(&self.served).emptied(cache)
    }

    /// Every plugin refusal is forgotten: the next generation tries each file's contents again
    /// (`POST /reload`, SIGHUP).
    pub fn forget_refusals(&self) {
        locked(&self.state).refused.clear();
    }

    /// Where the generations of documents that carry none are kept across restarts.
    pub fn with_generations_file(self, path: Option<PathBuf>) -> Self {
        if let Some(path) = path {
            *locked(&self.generations) = generation::Counter::load(path);
        }
        self
    }

    /// `--store-namespace-keys`: a namespaced document the intent API writes anew goes to
    /// `intent/namespaces/NAMESPACE/KIND/NAME`.
    pub fn with_namespace_keys(mut self, on: bool) -> Self {
        self.namespace_keys = on;
        self
    }

    pub fn namespace_keys(&self) -> bool {
        self.namespace_keys
    }

    /// `--on-nack`: whether the documents a node's rejection blames are held at what the node
    /// accepted (`hold`), or the node's plan just stops until the next change (`stop`).
    pub fn with_hold_on_nack(mut self, hold: bool) -> Self {
        self.hold_on_nack = hold;
        self
    }

    /// `--nack-quorum`: how many of a group's proxies must hold a document back for it to be
    /// held for the group.
    pub fn with_nack_quorum(self, quorum: xdst_core::node_holds::Quorum) -> Self {
        *locked(&self.nacked) = nacked::Nacked::new(quorum);
        self
    }

    /// The status of document `id` in the last good generation, if its plugin gave one.
    pub fn status_of(&self, id: &str) -> Option<Arc<str>> {
        locked(&self.statuses).stamped.get(id).cloned()
    }

    /// With a store: how many documents it may hold.
    pub fn with_max_store_documents(mut self, n: usize) -> Self {
        self.max_store_documents = n;
        self
    }

    /// The largest intent file or store value read (`--max-file-size`).
    pub fn with_max_file_size(mut self, bytes: usize) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// Each directory under the intent directory writes the namespace it is named after only.
    pub fn with_namespace_dirs(mut self, on: bool) -> Self {
        self.namespace_dirs = on;
        self
    }

    /// The intent directory, when intent comes from files.
    pub fn intent_dir(&self) -> Option<&Path> {
        match &self.input {
            IntentInput::Dir(d) => Some(d),
            IntentInput::Store(_) => None,
        }
    }

    /// The store mirror, when intent comes from a store.
    pub fn mirror(&self) -> Option<&Arc<crate::generate::store::Mirror>> {
        match &self.input {
            IntentInput::Store(m) => Some(m),
            IntentInput::Dir(_) => None,
        }
    }

    /// The intent as it is now (on disk, or in the store mirror), through the same parse cache
    /// generations use (only files that changed are parsed again). A file or key that does not
    /// read is held at its last good parse ([`Read::held`]). The directory is walked: a file
    /// written a moment ago is in it even before the watcher has its event.
    pub fn read_current(&self) -> Result<Read, GenerationError> {
        self.read(false)
    }

    /// [`read_current`](Self::read_current), or for a generation (`changed_only`), a read that
    /// looks only at the paths the watcher saw change (a file whose event is still on its way is
    /// read by the generation that event asks for).
    fn read(&self, changed_only: bool) -> Result<Read, GenerationError> {
        let parsed = &mut locked(&self.parsed);
        let counter = Some(&mut *locked(&self.generations));
        match &self.input {
            IntentInput::Dir(d) => {
                // Under the parse cache's lock: what changed is taken by the read that applies it.
                let mut changes = match changed_only {
                    true => self.dirty.take(),
                    false => crate::generate::tree::Changes::Everything,
                };
                let mut full = locked(&self.read_in_full);
                let due = full.is_none_or(|t| !self.full_reread.is_zero() && t.elapsed() >= self.full_reread);
                if due {
                    input::forget_stamps(parsed);
                    changes = crate::generate::tree::Changes::Everything;
                    *full = Some(Instant::now());
                }
                drop(full);
                let mode = if self.namespace_dirs { Mode::HoldingBounded } else { Mode::Holding };
                read_intent_cached(d, parsed, self.max_file_bytes, mode, counter, changes)
            }
            IntentInput::Store(m) => {
                read_mirror(m, None, self.max_store_documents, self.max_file_bytes, parsed, Mode::Holding, counter)
            }
        }
    }

    /// Where the last read found document `kind`/`qualified_name` (its origin, `file#index`),
    /// without reading the intent again: a look through the parse cache. A source changed since
    /// is seen by the next generation (two sources defining one document: the new one is held).
    pub fn last_read_origin(&self, kind: &str, qualified_name: &str) -> Option<String> {
        let parsed = locked(&self.parsed);
        if let Some(set) = parsed.last_set() {
            return set.get(kind, qualified_name).map(|d| d.origin.clone());
        }
        parsed.values().find_map(|p| {
            p.docs().iter().find(|d| d.kind == kind && d.qualified_name() == qualified_name).map(|d| d.origin.clone())
        })
    }

    /// Tells the node-group admission the documents that came and went since it was last told:
    /// what differs between the last set and this one (the parts they share are not visited).
    fn tell_names(&self, plane: &Plane, intent: &xdst_core::intent::IntentSet) {
        let mut named = locked(&self.named);
        let admission = &plane.serving.unlisted_groups;
        let Some(was) = named.take() else {
            admission.set_named(intent.documents().map(|d| d.qualified_name()));
            *named = Some(intent.clone());
            return;
        };
        let (came, went) = intent.came_and_went(&was);
        if !came.is_empty() || !went.is_empty() {
            admission.change_named(came.iter().map(|d| d.qualified_name()), went.iter().map(|d| d.qualified_name()));
        }
        *named = Some(intent.clone());
    }

    /// The directories to watch: the intent directory (files only) and the plugins'.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.intent_dir().map(Path::to_owned).into_iter().collect();
        match &self.plugins {
            PluginSet::Dir(d) => dirs.push(d.clone()),
            PluginSet::Config(c) => dirs.extend(c.dirs()),
        }
        dirs
    }

    pub fn status(&self) -> Status {
        let mut st = locked(&self.status).clone();
        st.store = self.mirror().map(|m| m.state());
        st
    }

    pub fn note_missing(&self, dir: &Path) {
        locked(&self.status).last_error = Some(ErrorReport {
            message: format!("directory {} disappeared", dir.display()),
            plugin: None,
            at: unix_now(),
        });
    }

    /// Runs one generation and publishes it; on failure what was serving stays. A panic is
    /// caught and reported like any failure; it also drops the incremental state (parsed files,
    /// translation memos), so the next generation starts afresh.
    pub fn generate(&self, plane: &Plane) -> Result<(), GenerationError> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.generate_once(plane))) {
            Ok(result) => result,
            Err(payload) => {
                let cause = crate::generate::generations::panic_message(payload.as_ref());
                Err(self.recover(plane, cause))
            }
        }
    }

    /// After a panic: forget what the panic may have left half-updated, and report it.
    fn recover(&self, plane: &Plane, cause: String) -> GenerationError {
        locked(&self.pipelines).clear();
        locked(&self.parsed).clear();
        let e = GenerationError::Panic(cause);
        let mut st = locked(&self.status);
        st.generations_failed += 1;
        st.last_error = Some(ErrorReport { message: e.message(), plugin: None, at: unix_now() });
        plane.metrics.generations.get_or_create(&label("result", "failed")).inc();
        plane.metrics.generation_panics.inc();
        error!(error = %e.message(), "generation panicked; its state was reset and the next generation starts afresh");
        e
    }

    fn generate_once(&self, plane: &Plane) -> Result<(), GenerationError> {
        // Before anything is read: a watcher that finds the directories so needs no generation.
        // The intent directory's part is what its read saw, file by file before reading it
        // (one walk, not two); the plugins' directories are looked at here.
        let plugin_dirs: Vec<Option<crate::generate::tree::Tree>> = self
            .dirs()
            .iter()
            .skip(usize::from(self.intent_dir().is_some()))
            .map(|d| crate::generate::tree::fingerprint(d))
            .collect();
        let started = Instant::now();
        let mut groups: Vec<String> = vec![String::new()];
        groups.extend(plane.serving.nodes.groups().into_iter().filter(|g| !g.is_empty()));
        let mut calls = BTreeMap::new();
        let mut documents = 0;
        let mut report_plugins = None;
        let mut store_revision = None;
        let mut held_sources = Vec::new();
        let mut held_nacked = Vec::new();
        // Where the generation's time went, for its log line: each phase's end, from `started`.
        let phases = std::cell::RefCell::new(Vec::<(&str, f64)>::new());
        let phase = |name: &'static str| phases.borrow_mut().push((name, started.elapsed().as_secs_f64() * 1e3));
        let result = (|| -> Result<_, GenerationError> {
            let revision = self.mirror().map(|m| m.revision());
            let Read { set: intent, held, seen, .. } = self.read(true)?;
            if self.intent_dir().is_none() || seen.is_some() {
                plane.note_read(seen.into_iter().map(Some).chain(plugin_dirs).collect());
            }
            phase("read");
            held_sources = held;
            self.retry_refusals_about_changed(&intent);
            phase("retry");
            self.tell_names(plane, &intent);
            phase("names");
            store_revision = revision;
            documents = intent.len();
            let chosen = self.choose_plugins(plane)?;
            phase("plugins");
            report_plugins = Some(chosen.iter().map(|c| plugin_report(&c.loaded)).collect::<Vec<_>>());
            let mut intent = Intents { all: intent, groups: BTreeMap::new() };
            if self.hold_on_nack {
                let plugins = chosen.iter().map(|c| c.key.as_str()).collect::<Vec<_>>().join(" ");
                let mut nacked = locked(&self.nacked);
                if nacked.rejections_since(plane.serving.rollouts.rejections.count()) {
                    nacked.collect(&plane.serving.rollouts.syncs(), &intent.all);
                }
                let rollouts = &plane.serving.rollouts;
                let connected = |group: &str, v: &nacked::Voter| rollouts.is_connected(group, &v.id, v.client);
                (intent.groups, held_nacked) = nacked.apply(&intent.all, &plugins, connected);
            }
            // A plugin that changed since the last good generation and makes it fail, or makes
            // it hold documents out, is refused if the generation does better with its previous
            // version (or, for a new plugin, without it). Otherwise the failure is not the
            // plugin's: the documents' (held), or the generation's. Only with such a plugin is
            // the translation checked before publishing (publishing checks it anyway).
            let candidates: Vec<usize> =
                chosen.iter().enumerate().filter(|(_, c)| c.candidate).map(|(i, _)| i).collect();
            let check = !candidates.is_empty();
            phase("holds");
            let first = self.attempt(plane, &groups, &chosen, &intent, &mut calls, Holding::SERVE, check);
            phase("translate");
            let named = |name: &str| candidates.iter().copied().find(|&i| chosen[i].loaded.name == name);
            // A plugin is refused for what is its own fault (issue 48, point 6): an error it is
            // blamed for, new or not; a failure nobody is blamed for when it is the one plugin
            // new since a good generation (a second plugin claiming a kind). Documents held count
            // against a changed plugin only (one with a good version to compare with): a new
            // plugin, as every plugin is at start, holds documents exactly as it would while
            // running, and is never refused for them.
            let has_good = |i: usize| locked(&self.state).good.contains_key(&chosen[i].file);
            // Once a generation was good, the one plugin new since is what broke it.
            let was_good = !locked(&self.state).good.is_empty();
            let suspect = match &first {
                Err(e) => e.plugin().and_then(|p| named(&p)).or_else(|| {
                    (candidates.len() == 1 && (was_good || has_good(candidates[0]))).then(|| candidates[0])
                }),
                Ok(t) => t.held.iter().find_map(|h| h.plugin.as_deref().and_then(named).filter(|&i| has_good(i))),
            };
            let Some(i) = suspect else {
                let attempt = first?;
                let out = self.publish(plane, attempt, &intent, &held_nacked)?;
                phase("publish");
                self.accept(&chosen);
                return Ok(out);
            };
            let mut without = chosen.clone();
            let bad = without.remove(i);
            if let Some(good) = locked(&self.state).good.get(&bad.file).cloned() {
                without
                    .insert(i, Choice { file: bad.file.clone(), key: bad.key.clone(), loaded: good, candidate: false });
            }
            let held_by =
                |t: &Attempt| t.held.iter().filter(|h| h.plugin.as_deref() == Some(&*bad.loaded.name)).count();
            let saved = locked(&self.pipelines).clone();
            let mut retry_calls = BTreeMap::new();
            // Without the plugin its documents are nobody's: they fail, rather than be held out.
            let strict_kinds = Holding { unclaimed: false, ..Holding::SERVE };
            let retry = self.attempt(plane, &groups, &without, &intent, &mut retry_calls, strict_kinds, true);
            let better = match (&first, &retry) {
                (_, Err(_)) => false,
                (Err(_), Ok(_)) => true,
                (Ok(t1), Ok(t2)) => held_by(t2) < held_by(t1),
            };
            if !better {
                *locked(&self.pipelines) = saved;
                let attempt = first?;
                let out = self.publish(plane, attempt, &intent, &held_nacked)?;
                self.accept(&chosen);
                return Ok(out);
            }
            let why = match &first {
                Err(e) => e.message(),
                Ok(t) => t.held.iter().map(|h| format!("{}: {}", h.held, h.error)).collect::<Vec<_>>().join("; "),
            };
            let about: Vec<(Arc<str>, Arc<str>)> = match &first {
                Err(_) => Vec::new(),
                Ok(t) => t
                    .held
                    .iter()
                    .filter_map(|h| intent.all.by_id(&h.held))
                    .map(|d| (d.id().clone(), d.text.clone()))
                    .collect(),
            };
            let out = self.publish(plane, retry?, &intent, &held_nacked)?;
            let untranslated = if locked(&self.state).good.contains_key(&bad.file) {
                0
            } else {
                let others: std::collections::BTreeSet<&String> =
                    without.iter().flat_map(|c| &c.loaded.plugin.info().kinds).collect();
                let kinds: Vec<&String> =
                    bad.loaded.plugin.info().kinds.iter().filter(|k| !others.contains(k)).collect();
                intent.all.documents().filter(|d| kinds.contains(&&d.claim())).count()
            };
            self.refuse_about(plane, &bad.file, &bad.key, &format!("fails on the current intent: {why}"), about);
            if let Some(r) = locked(&self.state).refused.get_mut(&bad.file) {
                r.untranslated = untranslated;
            }
            report_plugins = Some(without.iter().map(|c| plugin_report(&c.loaded)).collect::<Vec<_>>());
            calls = retry_calls;
            self.accept(&without);
            Ok(out)
        })();
        let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        plane.metrics.generation_seconds.observe(started.elapsed().as_secs_f64());
        let refused = self.refusal_reports();
        // Of the generation's time, the plugin calls' (for its log line).
        let plugin_seconds: f64 = calls.values().flatten().map(|c| c.seconds).sum();
        let mut st = locked(&self.status);
        if let Some(p) = report_plugins {
            st.plugins = p;
        }
        st.refused = refused;
        for cs in calls.values() {
            for call in cs {
                let plugin = [("plugin", call.plugin.clone().into())];
                plane.metrics.plugin_calls.get_or_create(&plugin).inc();
                plane.metrics.plugin_seconds.get_or_create(&plugin).observe(call.seconds);
                let t = st.timings.entry(call.plugin.clone()).or_default();
                let ms = call.seconds * 1e3;
                t.calls += 1;
                t.total_ms += ms;
                t.last_ms = ms;
                t.max_ms = t.max_ms.max(ms);
            }
        }
        match result {
            Ok((report, counts, resources, version, diagnostics, statuses, held_documents, changed)) => {
                let mut served = locked(&self.statuses);
                let now = xdst_core::intent::creation_timestamp(SystemTime::now());
                let stamped = conditions::stamped(&statuses, &served.raw, &served.stamped, &now);
                *served = Arc::new(ServedStatuses { raw: statuses, stamped });
                drop(served);
                let held: Vec<HeldReport> =
                    held_sources.iter().map(HeldReport::source).chain(held_documents).chain(held_nacked).collect();
                // Logged once, when it is first held (or its failure changes); documents held for
                // one failure (one namespace's changes, held together) in one line.
                let mut new: BTreeMap<&str, Vec<&HeldReport>> = BTreeMap::new();
                for h in held.iter().filter(|h| !st.held.contains(h)) {
                    new.entry(h.error.as_str()).or_default().push(h);
                }
                for (error, hs) in new {
                    let h = hs[0];
                    match hs.len() {
                        1 => {
                            warn!(held = %h.held, origin = %h.origin, serving = h.serving, error, "held out of the generation; the rest is served")
                        }
                        n => {
                            warn!(held = %h.held, more = n - 1, origin = %h.origin, error, "held out of the generation with {} more for the same failure; the rest is served", n - 1)
                        }
                    }
                }
                st.held = held;
                plane.metrics.held.set(st.held.len() as i64);
                st.generations_ok += 1;
                st.last_ok_at = Some(unix_now());
                // The change this generation is: the store revision it translated, or the next
                // number on this server if it changed what is served.
                plane.changes.record_published(store_revision, &plane.serving.cache, &changed);
                st.last_ok_version = Some(version.clone());
                st.last_ok_revision = store_revision;
                st.last_error = None;
                // Each call's diagnostics are bounded; a generation makes many calls.
                let shown = &diagnostics[..diagnostics.len().min(MAX_DIAGNOSTICS_SHOWN)];
                for (plugin, d) in shown {
                    warn!(plugin, document = ?d.document, field = ?d.field, "{}", d.message);
                }
                if diagnostics.len() > shown.len() {
                    warn!(
                        total = diagnostics.len(),
                        "{} more plugin diagnostics not shown",
                        diagnostics.len() - shown.len()
                    );
                }
                if calls.values().any(|c| !c.is_empty()) {
                    st.last_calls = Some(calls.clone());
                }
                st.last_generation = Some(GenerationReport {
                    ok: true,
                    elapsed_ms,
                    documents,
                    groups: groups.clone(),
                    calls,
                    resources,
                    diagnostics: shown.iter().map(diagnostic_report).collect(),
                    diagnostics_total: diagnostics.len(),
                });
                plane.metrics.generations.get_or_create(&label("result", "ok")).inc();
                for (t, n) in counts {
                    plane.metrics.resources.get_or_create(&xdst_serve::metrics::by_type(&t)).set(n as i64);
                }
                info!(
                    documents,
                    resources,
                    version,
                    store_revision,
                    changed_groups = ?report.changed_groups,
                    elapsed_ms = elapsed_ms as u64,
                    plugin_ms = format!("{:.1}", (plugin_seconds * 1e3).abs()),
                    phases_ms = %phases.borrow().iter().map(|(p, ms)| format!("{p}={ms:.1}")).collect::<Vec<_>>().join(" "),
                    "intent translated and published"
                );
                Ok(())
            }
            Err(e) => {
                let plugin = e.plugin();
                st.generations_failed += 1;
                st.last_error = Some(ErrorReport { message: e.message(), plugin: plugin.clone(), at: unix_now() });
                st.last_generation = Some(GenerationReport {
                    ok: false,
                    elapsed_ms,
                    documents,
                    groups,
                    calls,
                    resources: 0,
                    diagnostics: vec![],
                    diagnostics_total: 0,
                });
                plane.metrics.generations.get_or_create(&label("result", "failed")).inc();
                if let Some(p) = &plugin {
                    plane.metrics.plugin_failures.get_or_create(&[("plugin", p.clone().into())]).inc();
                }
                error!(error = %e.message(), plugin = ?plugin, "generation refused; the last good resources keep serving");
                Err(e)
            }
        }
    }
}

/// A plugin chosen for a generation: the file's current contents, or its last good version.
#[derive(Clone)]
struct Choice {
    file: PathBuf,
    /// The file's contents (the module and its settings), hashed.
    key: String,
    loaded: Loaded,
    /// Whether this is new since the last good generation (and so may be refused).
    candidate: bool,
}

/// A translation checked and ready to publish.
struct Attempt {
    publication: Publication,
    diagnostics: Vec<(String, xdst_plugin::wit::Diagnostic)>,
    statuses: Statuses,
    held: Vec<HeldReport>,
    /// The default group's Kubernetes objects no plugin is for: (id, origin), and how many.
    ignored: (Vec<(Arc<str>, String)>, usize),
}

type Published = (
    xdst_core::cache::PublishReport,
    Vec<(String, usize)>,
    usize,
    String,
    Vec<(String, xdst_plugin::wit::Diagnostic)>,
    Statuses,
    Vec<HeldReport>,
    Vec<Arc<str>>,
);

/// The intent a generation translates: as written, and for each node group with holds of
/// its own (design 016, part 3b) with them.
struct Intents {
    all: xdst_core::intent::IntentSet,
    groups: BTreeMap<String, xdst_core::intent::IntentSet>,
}

impl IntentSource {
    /// What each plugin file contributes: its current contents unless they were refused (then
    /// its last good version, or nothing). A file that fails to load is refused the same way,
    /// except before the first good generation, when there is nothing to fall back to.
    fn choose_plugins(&self, plane: &Plane) -> Result<Vec<Choice>, GenerationError> {
        let first = locked(&self.state).good.is_empty();
        let entries: Vec<Entry> = match &self.plugins {
            PluginSet::Dir(d) => self.loader.files(d)?.iter().map(|f| Entry::file(f)).collect(),
            PluginSet::Config(c) => {
                // Remote sources are fetched in the background, except while nothing serves.
                let rescan = plane.rescan.clone();
                let reloads = plane.reloads.load(std::sync::atomic::Ordering::SeqCst);
                let entries = c.entries(reloads, first, move || rescan.notify_one());
                locked(&self.status).sources = c.reports();
                entries?
            }
        };
        locked(&self.state).listed = entries.iter().map(|e| e.id.clone()).collect();
        let mut chosen: Vec<Choice> = Vec::new();
        for entry in entries {
            let file = entry.id.clone();
            let key = entry.key()?;
            let (refused, good, unchanged) = {
                let st = locked(&self.state);
                (
                    st.refused.get(&file).is_some_and(|r| r.digest == key),
                    st.good.get(&file).cloned(),
                    st.good_keys.get(&file) == Some(&key),
                )
            };
            if unchanged && let Some(good) = good {
                chosen.push(Choice { file, key, loaded: good, candidate: false });
                continue;
            }
            if refused {
                if let Some(good) = good {
                    chosen.push(Choice { file, key, loaded: good, candidate: false });
                }
                continue;
            }
            // A new version of a plugin that has a good one compiles off this thread: the good
            // one keeps translating meanwhile, and the finished compile starts a generation.
            if let Some(g) = &good {
                let mut bg = locked(&self.background);
                match bg.done.remove(&key) {
                    Some(Ok(loaded)) => {
                        let candidate = g.plugin.digest() != loaded.plugin.digest() || g.config != loaded.config;
                        chosen.push(Choice { file, key, loaded, candidate });
                        continue;
                    }
                    Some(Err(e)) => {
                        drop(bg);
                        self.refuse(plane, &file, &key, &xdst_plugin::clip(&e.to_string(), MAX_ERROR_BYTES));
                        chosen.push(Choice { file, key, loaded: g.clone(), candidate: false });
                        continue;
                    }
                    None if !self.loader.is_entry_loaded(&entry) => {
                        if bg.compiling.insert(key.clone()) {
                            let (loader, background, rescan, entry, key) = (
                                self.loader.clone(),
                                self.background.clone(),
                                plane.rescan.clone(),
                                entry.clone(),
                                key.clone(),
                            );
                            info!(
                                file = %file.display(),
                                source = %entry.source,
                                "plugin changed: compiling it in the background; the previous version keeps serving"
                            );
                            std::thread::spawn(move || {
                                let result = loader.load_entry(&entry);
                                let mut bg = locked(&background);
                                bg.compiling.remove(&key);
                                bg.done.insert(key, result);
                                drop(bg);
                                rescan.notify_one();
                            });
                        }
                        chosen.push(Choice { file, key, loaded: g.clone(), candidate: false });
                        continue;
                    }
                    None => {}
                }
            }
            match self.loader.load_entry(&entry) {
                Ok(loaded) => {
                    let candidate = good
                        .as_ref()
                        .is_none_or(|g| g.plugin.digest() != loaded.plugin.digest() || g.config != loaded.config);
                    chosen.push(Choice { file, key, loaded, candidate });
                }
                Err(e) if first => return Err(e.into()),
                Err(e) => {
                    self.refuse(plane, &file, &key, &xdst_plugin::clip(&e.to_string(), MAX_ERROR_BYTES));
                    if let Some(good) = good {
                        chosen.push(Choice { file, key, loaded: good, candidate: false });
                    }
                }
            }
        }
        // Two files with one plugin name: the newcomer is refused.
        let mut i = 0;
        while i < chosen.len() {
            let name = chosen[i].loaded.name.clone();
            if let Some(j) = (0..chosen.len()).find(|&j| j != i && chosen[j].loaded.name == name) {
                let newcomer = if chosen[i].candidate {
                    i
                } else if chosen[j].candidate {
                    j
                } else {
                    i.max(j)
                };
                if first || !chosen[newcomer].candidate {
                    let (a, b) = (chosen[i.min(j)].file.clone(), chosen[i.max(j)].file.clone());
                    return Err(DirError::DuplicateName { name, first: a, second: b }.into());
                }
                let other = chosen[if newcomer == i { j } else { i }].file.display().to_string();
                let bad = chosen.remove(newcomer);
                self.refuse(plane, &bad.file, &bad.key, &format!("plugin name {name:?} is already used by {other}"));
                i = 0;
                continue;
            }
            i += 1;
        }
        Ok(chosen)
    }

    fn refuse(&self, plane: &Plane, file: &Path, key: &str, reason: &str) {
        self.refuse_about(plane, file, key, reason, Vec::new());
    }

    /// A plugin refused until one of the documents `about` (id, text) changes, or its file
    /// does.
    fn refuse_about(&self, plane: &Plane, file: &Path, key: &str, reason: &str, about: Vec<(Arc<str>, Arc<str>)>) {
        let mut st = locked(&self.state);
        let serving = st.good.get(file).map(|g| g.plugin.digest().to_owned());
        warn!(file = %file.display(), reason, serving = ?serving, "plugin refused; its previous version (if any) keeps serving");
        let label = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        plane.metrics.plugin_refusals.get_or_create(&[("file", label.into())]).inc();
        st.refused.insert(
            file.to_owned(),
            Refusal { digest: key.to_owned(), reason: reason.to_owned(), at: unix_now(), about, untranslated: 0 },
        );
    }

    /// A plugin refused because of documents that changed or went since is tried again.
    fn retry_refusals_about_changed(&self, intent: &xdst_core::intent::IntentSet) {
        let mut st = locked(&self.state);
        st.refused.retain(|file, r| {
            let stands = r.about.iter().all(|(id, text)| intent.by_id(id).is_some_and(|d| d.text == *text));
            if !stands {
                info!(file = %file.display(), "a document the plugin's refusal was about changed: trying it again");
            }
            stands
        });
    }

    /// A good generation ran with `chosen`: they are the new last good; refusals of files now
    /// fixed or gone are dropped.
    fn accept(&self, chosen: &[Choice]) {
        let mut st = locked(&self.state);
        st.good = chosen.iter().map(|c| (c.file.clone(), c.loaded.clone())).collect();
        st.good_chosen = chosen.iter().map(|c| c.loaded.clone()).collect();
        // A file kept at its last good version (its new contents refused or still compiling)
        // keeps the key that version came from.
        let previous = std::mem::take(&mut st.good_keys);
        st.good_keys = chosen
            .iter()
            .filter_map(|c| {
                let key = if c.candidate || !previous.contains_key(&c.file) {
                    Some(c.key.clone())
                } else {
                    previous.get(&c.file).cloned()
                };
                key.map(|k| (c.file.clone(), k))
            })
            .collect();
        // A refusal stands while the file holds the refused contents: not once the file (or
        // configuration entry) is gone, or its (new) contents were taken.
        let listed = std::mem::take(&mut st.listed);
        st.refused.retain(|f, r| {
            listed.contains(f)
                && match chosen.iter().find(|c| c.file == *f) {
                    Some(c) => !c.candidate && c.key == r.digest,
                    None => true,
                }
        });
        st.listed = listed;
        self.loader.keep_only(st.good.values());
        // Results of compiles that are no longer any file's contents.
        let keys: std::collections::HashSet<&str> = chosen.iter().map(|c| c.key.as_str()).collect();
        locked(&self.background).done.retain(|k, _| keys.contains(k.as_str()));
    }

    /// Translates `intent` with `chosen` for every group, holding out failing documents as
    /// `how` says, and (with `check`) checks the result as publishing would; nothing is
    /// published.
    #[allow(clippy::too_many_arguments, reason = "the two attempts of one generation, side by side")]
    fn attempt(
        &self,
        plane: &Plane,
        groups: &[String],
        chosen: &[Choice],
        intent: &Intents,
        calls: &mut BTreeMap<String, Vec<xdst_plugin::pipeline::PluginCall>>,
        how: Holding,
        check: bool,
    ) -> Result<Attempt, GenerationError> {
        let configured: Vec<Configured> = chosen.iter().map(|c| c.loaded.configured()).collect();
        let attempt = self.translate(groups, &configured, intent, calls, how)?;
        if check {
            plane.serving.cache.check(&attempt.publication).map_err(|e| publish_error(e, &attempt.publication))?;
        }
        Ok(attempt)
    }

    /// Publishes what an [`attempt`](Self::attempt) translated from `intent`, and remembers
    /// which documents it was made of (what a node accepts from now on may be it).
    fn publish(
        &self,
        plane: &Plane,
        mut a: Attempt,
        intent: &Intents,
        nacked: &[HeldReport],
    ) -> Result<Published, GenerationError> {
        let counts: Vec<(String, usize)> =
            a.publication.default.types().map(|(t, s)| (t.to_string(), s.len())).collect();
        let resources = a.publication.default.len();
        let version = a.publication.default.version();
        let check = a.publication.clone();
        // Nodes may reject what is published the moment the cache has it: its time is taken first.
        let published_at = Instant::now();
        let report = plane.serving.cache.publish(a.publication).map_err(|e| publish_error(e, &check))?;
        let (ignored, ignored_total) = a.ignored;
        let mut st = locked(&self.status);
        st.ignored = ignored
            .into_iter()
            .map(|(id, origin)| report::IgnoredReport { document: id.to_string(), origin })
            .collect();
        st.ignored_total = ignored_total;
        drop(st);
        let changed = locked(&self.nacked).record(&plane.serving.cache, &intent.all, published_at);
        locked(&self.served).published(&plane.serving.cache);
        let nacked = nacked.iter().map(|h| (h.held.as_str(), h.error.as_str(), nacked::REASON));
        conditions::mark_held(&mut a.statuses, &intent.all, nacked);
        Ok((report, counts, resources, version, a.diagnostics, a.statuses, a.held, changed))
    }

    /// Whether `intent` would translate and pass the checks with the plugins of the last good
    /// generation, for every group served: what a store write is checked with before it is
    /// committed. Nothing is published.
    pub fn check_candidate(&self, plane: &Plane, overlay: Overlay<'_>) -> Result<(), GenerationError> {
        let Some(mirror) = self.mirror() else {
            return Err(StoreProblem::NotAStore.into());
        };
        let read = read_mirror(
            mirror,
            Some(overlay),
            self.max_store_documents,
            self.max_file_bytes,
            &mut locked(&self.parsed),
            Mode::Holding,
            None,
        )?;
        // The write answers for its own key only: other keys' problems are theirs.
        if let Some(h) = read.held.iter().find(|h| h.source == overlay.0) {
            return Err(GenerationError::Held { held: h.source.clone(), error: h.error.clone() });
        }
        let intent = read.set;
        let configured: Vec<Configured> = {
            let st = locked(&self.state);
            if st.good_chosen.is_empty() {
                return Err(StoreProblem::NothingToCheckAgainst.into());
            }
            st.good_chosen.iter().map(Loaded::configured).collect()
        };
        let mut groups: Vec<String> = vec![String::new()];
        groups.extend(plane.serving.nodes.groups().into_iter().filter(|g| !g.is_empty()));
        let intent = Intents { all: intent, groups: BTreeMap::new() };
        let Attempt { publication, held, .. } =
            self.translate(&groups, &configured, &intent, &mut BTreeMap::new(), Holding::SERVE)?;
        let key = std::path::Path::new(overlay.0);
        if let Some(h) = held.iter().find(|h| std::path::Path::new(input::key_of(&h.origin)) == key) {
            return Err(GenerationError::Held { held: h.held.clone(), error: h.error.clone() });
        }
        plane.serving.cache.check(&publication).map_err(|e| publish_error(e, &publication))
    }

    /// Translates `intent` for every group, holding out the documents that fail: the
    /// publication, the default group's plugin diagnostics and document statuses (a held
    /// document's saying so), what every group held, and what the default group ignored.
    fn translate(
        &self,
        groups: &[String],
        configured: &[Configured],
        intents: &Intents,
        calls: &mut BTreeMap<String, Vec<xdst_plugin::pipeline::PluginCall>>,
        how: Holding,
    ) -> Result<Attempt, GenerationError> {
        // Pipelines are memos of past translations: keep them even if publishing fails.
        let mut pipelines = locked(&self.pipelines);
        let mut translations: BTreeMap<String, Translation> = BTreeMap::new();
        let mut kept = BTreeMap::new();
        // A plugin whose resources name their node groups is called once for all of them; and
        // when every plugin is such a plugin, a group that nothing names is served the default
        // group's set, with no pipeline of its own (the default group is translated first).
        let memo = CallMemo::default();
        let by_name = xdst_plugin::pipeline::groups_differ_only_by_name(configured);
        for g in groups {
            // A group with holds of its own translates the intent with them.
            let intent = intents.groups.get(g).unwrap_or(&intents.all);
            let own = intents.groups.contains_key(g);
            if by_name && !own && !g.is_empty() && kept.get("").is_some_and(|d: &Pipeline| !d.names_group(g)) {
                pipelines.remove(g);
                continue;
            }
            // Only the default group's statuses are served.
            let mut p = pipelines.remove(g).unwrap_or_else(|| match g.is_empty() {
                true => Pipeline::new(g),
                false => Pipeline::new(g).without_statuses(),
            });
            let out = p.run_with(configured, intent, how, &memo);
            kept.insert(g.clone(), p);
            let out = match out {
                Ok(out) => out,
                Err(error) => {
                    kept.extend(std::mem::take(&mut *pipelines));
                    *pipelines = kept;
                    return Err(GenerationError::Pipeline { group: g.clone(), error });
                }
            };
            calls.insert(g.clone(), out.calls.clone());
            translations.insert(g.clone(), out);
        }
        *pipelines = kept;
        drop(pipelines);
        // What a group holds as the default group does is listed once, under the default.
        let mut held: Vec<HeldReport> = Vec::new();
        let default_held = &translations[""].held;
        for (g, t) in &translations {
            let own = t.held.values().filter(|h| g.is_empty() || default_held.get(h.document.as_str()) != Some(*h));
            held.extend(own.map(|h| HeldReport::document(g, h)));
        }
        let default = translations.remove("").expect("the default group is always translated");
        let mut statuses = default.statuses;
        conditions::mark_held(&mut statuses, &intents.all, held::translation_holds(&default.held));
        let mut publication = Publication { default: default.snapshot, groups: BTreeMap::new() };
        for (g, t) in translations {
            if !t.snapshot.same_content(&publication.default) {
                publication.groups.insert(g, t.snapshot);
            }
        }
        Ok(Attempt {
            publication,
            diagnostics: default.diagnostics,
            statuses,
            held,
            ignored: (default.ignored, default.ignored_total),
        })
    }

    /// Refusals, for `/debug/plugins`.
    fn refusal_reports(&self) -> Vec<RefusalReport> {
        let st = locked(&self.state);
        st.refused
            .iter()
            .map(|(f, r)| RefusalReport {
                file: f.display().to_string(),
                digest: format!("sha256:{}", r.digest.trim_start_matches("sha256:")),
                reason: r.reason.clone(),
                at: r.at,
                serving: st.good.get(f).map(|g| g.plugin.digest().to_owned()),
                untranslated: r.untranslated,
            })
            .collect()
    }
}

//! The `plugins` list of the configuration file (`xdst serve --config xdst.yaml`, read with
//! [`crate::cli::settings::Settings`]) or of the store: each plugin from a path, an `https://`
//! URL or an OCI registry, with its digest pin, limits, capabilities, configuration, priority
//! and failure policy ([`super::entry::PluginEntry`]).
//!
//! Paths in the file are relative to the file's directory. The `plugins` list is live: an edit
//! of the file, `POST /reload` or SIGHUP reads it again and resolves every remote source again
//! (a tag is resolved to a digest then, and only then), off the generation thread
//! ([`crate::generate::plugins::pulls`]). Everything else is read at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use tracing::{info, warn};
use xdst_plugin::dir::{Entry, SettingsFrom};

use crate::generate::plugins::distribution::{Fetcher, Resolved, Source};
use crate::generate::plugins::pulls::{Pulls, Signature};

use crate::cli::settings::Settings;
use crate::generate::plugins::entry::settings_of;
pub use crate::generate::plugins::entry::{ConfigError, PluginEntry};

/// What `/debug/plugins` says about each configured plugin's source.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SourceReport {
    pub name: String,
    pub source: String,
    /// What it resolved to (`oci://...@sha256:...`, a URL and its digest, or a path).
    pub resolved: Option<String>,
    pub digest: Option<String>,
    /// The last attempt to resolve it failed (the previous resolution, if any, is used).
    pub error: Option<String>,
    /// A fetch of it is running, for this long; the resolution above serves meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetching_seconds: Option<f64>,
}

/// The `plugins` list of a configuration file, resolved: read again when the file changes,
/// remote sources resolved again only then and on reload, off the generation thread (see
/// [`crate::generate::plugins::pulls`]).
pub struct ConfiguredPlugins {
    origin: ListOrigin,
    pulls: Pulls,
    state: Mutex<State>,
    /// The largest configuration file read (`--max-file-size`).
    max_file_bytes: usize,
}

/// Where a plugins list is read from.
pub enum ListOrigin {
    /// A configuration file's `plugins` list (relative paths are relative to its directory).
    File(PathBuf),
    /// A list held elsewhere (the plugin set a store's leader resolved): `name` in errors, and
    /// `read` giving its text (a configuration file's `plugins:` section) or why there is none.
    Held { name: String, read: Box<dyn Fn() -> Result<String, Box<dyn std::error::Error + Send + Sync>> + Send + Sync> },
}

#[derive(Default)]
struct State {
    /// The file's text when last read.
    text: Option<String>,
    /// The reload count when remote sources were last resolved.
    reloads: Option<u64>,
    entries: Vec<(PluginEntry, String)>,
    /// By plugin name: the source, what it resolved to, and its signature (fetched then).
    resolved: BTreeMap<String, (String, Resolved, Option<Signature>)>,
    reports: Vec<SourceReport>,
}

/// How a remote source stands in one generation.
enum Remote {
    /// Resolved now, or as before (then `error` says why not now, if it failed).
    Use {
        r: Resolved,
        signature: Option<Signature>,
        error: Option<String>,
    },
    /// Being fetched, with nothing to use meanwhile.
    Pending(Duration),
    Failed(String),
}

impl ConfiguredPlugins {
    pub fn new(origin: ListOrigin, fetcher: Fetcher) -> Self {
        ConfiguredPlugins {
            origin,
            pulls: Pulls::new(fetcher),
            state: Mutex::new(State::default()),
            max_file_bytes: xdst_core::files::DEFAULT_MAX_TEXT_BYTES,
        }
    }

    /// The largest configuration file read (`--max-file-size`).
    pub fn with_max_file_size(mut self, bytes: usize) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// The file, or what holds the list.
    pub fn describe(&self) -> String {
        match &self.origin {
            ListOrigin::File(f) => f.display().to_string(),
            ListOrigin::Held { name, .. } => name.clone(),
        }
    }

    /// What relative paths are relative to, and errors name.
    fn anchor(&self) -> PathBuf {
        match &self.origin {
            ListOrigin::File(f) => f.clone(),
            ListOrigin::Held { name, .. } => PathBuf::from(name),
        }
    }

    /// Directories to watch: the file's, and those of plugins given by path (none for a held
    /// list: whoever holds it asks for a generation when it changes).
    pub fn dirs(&self) -> Vec<PathBuf> {
        let ListOrigin::File(file) = &self.origin else {
            return Vec::new();
        };
        let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut dirs = vec![if base.as_os_str().is_empty() { PathBuf::from(".") } else { base.clone() }];
        if let Ok(c) = Settings::read_file(file) {
            for e in c.plugin_list.unwrap_or_default() {
                if let Ok(Source::Path(p)) = Source::parse(&e.source, &base)
                    && let Some(d) = p.parent()
                    && !dirs.iter().any(|x| x == d)
                {
                    dirs.push(d.to_owned());
                }
            }
        }
        dirs
    }

    pub fn reports(&self) -> Vec<SourceReport> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).reports.clone()
    }

    /// The plugins to load now. `reloads` counts explicit reloads: when it moved (or the file
    /// changed), remote sources are fetched again, in the background unless `wait` (at start,
    /// when nothing serves yet); `wake` is called when a background fetch finishes, so that a
    /// generation takes its result. Meanwhile a source keeps its previous resolution. A remote
    /// source that cannot be resolved keeps its previous resolution (or the one remembered on
    /// disk from an earlier run), with a warning; with neither, it is an error naming the plugin
    /// and the source.
    pub fn entries(
        &self,
        reloads: u64,
        wait: bool,
        wake: impl Fn() + Clone + Send + 'static,
    ) -> Result<Vec<Entry>, ConfigError> {
        let file = self.anchor();
        let text = match &self.origin {
            ListOrigin::File(f) => xdst_core::files::read_text(f, self.max_file_bytes).map_err(|e| e.to_string()),
            ListOrigin::Held { read, .. } => read().map_err(|e| e.to_string()),
        }
        .map_err(|message| ConfigError { file: file.display().to_string(), field: None, message })?;
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = st.text.as_deref() != Some(text.as_str());
        let refresh = changed || st.reloads != Some(reloads);
        if changed {
            let c = Settings::parse_file(&file, &text)?;
            let value = xdst_core::documents::parse_one(&text).unwrap_or_default();
            let entries = c.plugin_list.unwrap_or_default();
            st.entries = entries.into_iter().enumerate().map(|(i, e)| (e, value["plugins"][i].to_string())).collect();
            st.text = Some(text);
            if st.reloads.is_some() {
                info!(file = %file.display(), plugins = st.entries.len(), "the plugins list changed: plugins read again");
            }
        }
        let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut out = Vec::new();
        let mut reports = Vec::new();
        let mut resolved = BTreeMap::new();
        for (i, (e, settings_text)) in st.entries.iter().enumerate() {
            let source = Source::parse(&e.source, &base).expect("checked when read");
            let err = |field: String, message: String| ConfigError {
                file: file.display().to_string(),
                field: Some(field),
                message,
            };
            if !source.is_remote() && matches!(self.origin, ListOrigin::Held { .. }) {
                return Err(err(
                    format!("plugins[{i}].source"),
                    format!("plugin {:?}: {source} is a path; a held list takes only remote sources", e.name),
                ));
            }
            let (r, remote_sig, error, fetching) = match &source {
                Source::Path(p) => {
                    let r = Resolved {
                        path: p.clone(),
                        digest: String::new(),
                        manifest: None,
                        pinned: p.display().to_string(),
                    };
                    (r, None, None, None)
                }
                remote => {
                    // A held list moves a plugin from one pinned digest to the next: the one
                    // running keeps serving while the next is fetched. A file's edited source
                    // starts afresh.
                    let held = matches!(self.origin, ListOrigin::Held { .. });
                    let previous = st.resolved.get(&e.name).filter(|(s, _, _)| *s == e.source || held);
                    let previous = previous.map(|(_, r, sig)| (r.clone(), sig.clone()));
                    match self.remote(e, remote, previous, refresh, wait, wake.clone()) {
                        Remote::Use { r, signature, error } => {
                            let fetching = self.pulls.running_for(&pull_key(e)).map(|d| d.as_secs_f64());
                            (r, signature, error, fetching)
                        }
                        Remote::Pending(d) => {
                            return Err(err(
                                format!("plugins[{i}].source"),
                                format!(
                                    "plugin {:?}: {source} is being fetched (for {:.1} s); a generation runs when \
                                     it arrives",
                                    e.name,
                                    d.as_secs_f64()
                                ),
                            ));
                        }
                        Remote::Failed(message) => {
                            return Err(err(
                                format!("plugins[{i}].source"),
                                format!("plugin {:?}: cannot get {source}: {message}", e.name),
                            ));
                        }
                    }
                }
            };
            reports.push(SourceReport {
                name: e.name.clone(),
                source: e.source.clone(),
                resolved: Some(r.pinned.clone()),
                digest: (!r.digest.is_empty()).then(|| r.digest.clone()),
                error,
                fetching_seconds: fetching,
            });
            let signature = match &e.signature {
                None => None,
                Some(s) => {
                    let key = xdst_plugin::dir::SignatureCheck::read_key(&s.public_key)
                        .map_err(|message| err(format!("plugins[{i}].signature.publicKey"), message))?;
                    // A path's signature is read with the file, every time; a remote one is
                    // fetched with the source.
                    let signature = match (&source, &remote_sig) {
                        (Source::Path(p), _) => self
                            .pulls
                            .fetcher()
                            .signature(&source, &std::fs::read(p).map(|b| xdst_plugin::digest(&b)).unwrap_or_default())
                            .map_err(|e| e.to_string()),
                        (_, Some(sig)) => sig.clone().map_err(|e| e.to_string()),
                        (_, None) => Err(format!("no signature was fetched for {source}")),
                    };
                    Some(xdst_plugin::dir::SignatureCheck {
                        key_file: s.public_key.display().to_string(),
                        key,
                        signature,
                    })
                }
            };
            out.push(Entry {
                signature,
                id: PathBuf::from(format!("{} plugins[{}]", file.display(), e.name)),
                wasm: r.path.clone(),
                source: r.pinned.clone(),
                name: Some(e.name.clone()),
                settings: SettingsFrom::Inline(settings_of(e), settings_text.clone()),
            });
            if source.is_remote() {
                resolved.insert(e.name.clone(), (e.source.clone(), r, remote_sig));
            }
        }
        st.resolved = resolved;
        st.reports = reports;
        st.reloads = Some(reloads);
        Ok(out)
    }

    /// Where a remote source stands: a finished pull's result, its previous resolution, or a
    /// pull started (or, with `wait`, made) now.
    fn remote(
        &self,
        e: &PluginEntry,
        source: &Source,
        previous: Option<(Resolved, Option<Signature>)>,
        refresh: bool,
        wait: bool,
        wake: impl Fn() + Send + 'static,
    ) -> Remote {
        let key = pull_key(e);
        let with_signature = e.signature.is_some();
        let pulled = match self.pulls.take(&key) {
            Some(p) => p,
            None if !refresh && let Some((r, signature)) = previous => {
                return Remote::Use { r, signature, error: None };
            }
            None if wait => self.pulls.pull_now(source, with_signature),
            None => {
                self.pulls.start(&key, source, with_signature, wake);
                return match previous {
                    Some((r, signature)) => {
                        // A signature asked for since: the one cached beside the code, if any.
                        let signature = signature.or_else(|| {
                            with_signature
                                .then(|| self.pulls.fetcher().cached_signature(&r.digest).map_err(std::sync::Arc::new))
                        });
                        Remote::Use { r, signature, error: None }
                    }
                    None => Remote::Pending(self.pulls.running_for(&key).unwrap_or_default()),
                };
            }
        };
        match pulled.result {
            Ok(r) => {
                if previous.as_ref().is_some_and(|(p, _)| p.digest != r.digest) {
                    info!(plugin = %e.name, source = %source, digest = %r.digest, "plugin source resolved to new code");
                }
                Remote::Use { r, signature: pulled.signature, error: None }
            }
            Err((err, fallback)) => {
                // What it resolved to before, and that resolution's signature (cached beside it).
                let keep = previous.or_else(|| {
                    fallback.map(|r| {
                        let sig = with_signature
                            .then(|| self.pulls.fetcher().cached_signature(&r.digest).map_err(std::sync::Arc::new));
                        (r, sig)
                    })
                });
                match keep {
                    Some((r, signature)) => {
                        warn!(
                            plugin = %e.name,
                            source = %source,
                            error = %err,
                            digest = %r.digest,
                            "cannot resolve the plugin's source; the digest it last resolved to (cached) is used"
                        );
                        Remote::Use { r, signature, error: Some(err.to_string()) }
                    }
                    None => Remote::Failed(err.to_string()),
                }
            }
        }
    }
}

/// A pull is for one plugin's one source: a changed source is a new pull.
fn pull_key(e: &PluginEntry) -> String {
    format!("{}\0{}", e.name, e.source)
}

//! The configuration file (`xdst serve --config xdst.yaml`): every `serve` flag, and the
//! plugins to run, each from a path, an `https://` URL or an OCI registry, with its digest pin,
//! limits, capabilities, configuration, priority and failure policy. `examples/xdst.yaml` is a
//! complete, commented example.
//!
//! Flags given on the command line (or through their environment variables) win over the file.
//! Paths in the file are relative to the file's directory. The `plugins` list is live: an edit
//! of the file, `POST /reload` or SIGHUP reads it again and resolves every remote source again
//! (a tag is resolved to a digest then, and only then), off the generation thread
//! ([`crate::generate::plugins::pulls`]). Everything else is read at start.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use tracing::{info, warn};
use xdst_core::node::GroupKey;
use xdst_plugin::dir::{Entry, LimitSettings, Settings, SettingsFrom};
use xdst_plugin::pipeline::FailurePolicy;

use crate::generate::plugins::distribution::{Fetcher, Resolved, Source};
use crate::generate::plugins::pulls::{Pulls, Signature};

/// A problem with the configuration file, naming the file and the field.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}{}: {message}", field.as_ref().map(|f| format!(" field {f}")).unwrap_or_default())]
pub struct ConfigError {
    pub file: String,
    pub field: Option<String>,
    pub message: String,
}

/// `xdst.yaml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileConfig {
    pub xds_addr: Option<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    pub resources: Option<PathBuf>,
    pub intent: Option<PathBuf>,
    /// A plugins directory, instead of `plugins`.
    pub plugins_dir: Option<PathBuf>,
    pub plugins: Option<Vec<PluginEntry>>,
    pub plugin_cache: Option<PathBuf>,
    pub fuel: Option<bool>,
    #[serde(default, deserialize_with = "crate::units::group_key")]
    pub node_group_key: Option<GroupKey>,
    #[serde(default, deserialize_with = "crate::units::duration")]
    pub debounce: Option<Duration>,
    #[serde(default, deserialize_with = "crate::units::duration")]
    pub resync: Option<Duration>,
    #[serde(default, deserialize_with = "crate::units::duration")]
    pub shutdown_grace: Option<Duration>,
    #[serde(default, deserialize_with = "crate::units::duration")]
    pub plan_grace: Option<Duration>,
    #[serde(default, deserialize_with = "crate::units::duration")]
    pub drain_time: Option<Duration>,
    pub unsafe_unordered_push: Option<bool>,
    #[serde(default, deserialize_with = "crate::units::size")]
    pub max_file_size: Option<usize>,
    #[serde(default, deserialize_with = "crate::units::size")]
    pub max_request_size: Option<usize>,
    pub max_streams_per_connection: Option<u32>,
    pub max_connections_per_client: Option<usize>,
    #[serde(default, deserialize_with = "crate::units::duration")]
    pub idle_connection_timeout: Option<Duration>,
    pub max_requests_per_second: Option<u32>,
    pub node_groups: Option<Vec<xdst_serve::identity::Pattern>>,
    pub max_unlisted_node_groups: Option<usize>,
    #[serde(default, deserialize_with = "crate::units::size")]
    pub max_plugin_message: Option<usize>,
    pub max_plugin_diagnostics: Option<usize>,
    pub max_plugin_log_lines: Option<usize>,
    #[serde(default, deserialize_with = "crate::units::size")]
    pub max_plugin_stdio: Option<usize>,
    pub admin_token_file: Option<PathBuf>,
    pub ready_file: Option<PathBuf>,
    /// Registries (`host:port`) spoken to over plain HTTP (loopback ones always are).
    #[serde(default)]
    pub insecure_registries: Vec<String>,
    /// PEM certificates trusted for `https://` sources and registries instead of the built-in
    /// web roots.
    pub ca_file: Option<PathBuf>,
    /// TLS on the xDS and admin ports.
    pub tls: Option<TlsSettings>,
    /// Intent in etcd instead of `intent` (see `--store`).
    pub store: Option<StoreSettings>,
    /// With `tls.clientCa`: which certificate identities may use which node groups and ids.
    pub identities: Option<Vec<xdst_serve::identity::Rule>>,
    /// A file holding the bearer token admin reads must carry (`/debug/*`, `GET /intent`,
    /// `/metrics`).
    pub admin_read_token_file: Option<PathBuf>,
    /// Client certificate identities allowed admin reads without a token.
    #[serde(default)]
    pub admin_read_identities: Vec<xdst_serve::identity::IdentityPattern>,
    /// Serve `/metrics` without a read token or certificate.
    pub open_metrics: Option<bool>,
}

/// `tls:` in `xdst.yaml`: the server certificate (chain) and key, PEM files re-read when they
/// change.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TlsSettings {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// PEM certificates of the CA that signs client certificates: with it, xDS clients must
    /// present a certificate it signed (mTLS), and `identities` says what each may use.
    pub client_ca: Option<PathBuf>,
}

/// `store:` in `xdst.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StoreSettings {
    /// `etcd://HOST:PORT[,HOST:PORT...]/PREFIX`.
    pub url: String,
    /// TLS towards etcd: `{ca: FILE, cert: FILE, key: FILE}` (a client certificate if etcd
    /// wants one).
    pub tls: Option<crate::generate::store::StoreTls>,
    pub max_documents: Option<usize>,
}

/// One plugin of the `plugins` list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginEntry {
    /// The instance's name: what errors, attribution and `/debug/plugins` call it.
    pub name: String,
    /// A path, an `https://` URL, or `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:...`).
    pub source: String,
    /// The SHA-256 the plugin's bytes must have.
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    #[serde(default)]
    pub limits: LimitSettings,
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Require a detached ed25519 signature over the plugin's digest.
    #[serde(default)]
    pub signature: Option<SignatureSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SignatureSettings {
    /// The signer's public key (PEM). The signature is `<path>.sig` or `<url>.sig` beside the
    /// plugin, or the registry's `sha256-<hex>.sig` tag for an OCI source.
    pub public_key: PathBuf,
}

/// Reads and checks a configuration file; relative paths become relative to its directory.
pub fn read(file: &Path) -> Result<FileConfig, ConfigError> {
    let text = xdst_core::files::read_text(file).map_err(|e| ConfigError {
        file: file.display().to_string(),
        field: None,
        message: e.to_string(),
    })?;
    parse(file, &text)
}

/// Parses a configuration file's text (`file` names it in errors and anchors relative paths).
pub fn parse(file: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    let err = |field: Option<String>, message: String| ConfigError { file: file.display().to_string(), field, message };
    let value = xdst_core::documents::parse_one(text).map_err(|e| err(e.field, e.message))?;
    if value.is_null() {
        return Ok(FileConfig::default());
    }
    let mut c: FileConfig = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        err((path != ".").then_some(path), e.into_inner().to_string())
    })?;
    let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
    for p in [
        &mut c.resources,
        &mut c.intent,
        &mut c.plugins_dir,
        &mut c.plugin_cache,
        &mut c.admin_token_file,
        &mut c.ready_file,
        &mut c.ca_file,
        &mut c.admin_read_token_file,
    ]
    .into_iter()
    .flatten()
    .chain(
        c.tls
            .iter_mut()
            .flat_map(|t| [Some(&mut t.cert), Some(&mut t.key), t.client_ca.as_mut()].into_iter().flatten()),
    )
    .chain(
        c.store
            .iter_mut()
            .filter_map(|s| s.tls.as_mut())
            .flat_map(|t| [Some(&mut t.ca), t.cert.as_mut(), t.key.as_mut()].into_iter().flatten()),
    ) {
        *p = base.join(&*p);
    }
    for e in c.plugins.iter_mut().flatten() {
        if let Some(s) = &mut e.signature {
            s.public_key = base.join(&s.public_key);
        }
    }
    if c.plugins.is_some() && c.plugins_dir.is_some() {
        return Err(err(
            Some("plugins".into()),
            "give either `plugins` (a list) or `pluginsDir` (a directory), not both".into(),
        ));
    }
    if let Some(st) = &c.store {
        if c.intent.is_some() {
            return Err(err(
                Some("store".into()),
                "intent comes from one place: `intent` (a directory) or `store`".into(),
            ));
        }
        crate::generate::store::StoreConfig::parse(&st.url)
            .map_err(|e| err(Some("store.url".into()), e.to_string()))?;
        if let Some(t) = &st.tls
            && t.cert.is_some() != t.key.is_some()
        {
            return Err(err(Some("store.tls".into()), "a client certificate needs both `cert` and `key`".into()));
        }
    }
    if c.resources.is_some() && (c.intent.is_some() || c.plugins.is_some() || c.plugins_dir.is_some()) {
        return Err(err(Some("resources".into()), "serve one source: `resources`, or `intent` with `plugins`".into()));
    }
    match (c.tls.as_ref().and_then(|t| t.client_ca.as_ref()), &c.identities) {
        (Some(_), None) => {
            return Err(err(
                Some("identities".into()),
                "`tls.clientCa` needs `identities` rules saying which node groups each client certificate may use \
                 (`- {identity: '*', groups: ['*']}` lets every certificate the CA signed read every group)"
                    .into(),
            ));
        }
        (None, Some(_)) => {
            return Err(err(
                Some("identities".into()),
                "`identities` rules need `tls.clientCa` (clients have no certificate identity without it)".into(),
            ));
        }
        _ => {}
    }
    check_plugins(c.plugins.as_deref().unwrap_or_default(), &base)
        .map_err(|(field, message)| err(Some(field), message))?;
    Ok(c)
}

fn check_plugins(entries: &[PluginEntry], base: &Path) -> Result<(), (String, String)> {
    let mut names = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        let ok = !e.name.is_empty()
            && e.name.len() <= 64
            && e.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !e.name.starts_with('-');
        if !ok {
            return Err((
                format!("plugins[{i}].name"),
                format!("{:?} is not a plugin name (lowercase letters, digits and dashes)", e.name),
            ));
        }
        if let Some(j) = names.insert(e.name.clone(), i) {
            return Err((format!("plugins[{i}].name"), format!("{:?} is also the name of plugins[{j}]", e.name)));
        }
        Source::parse(&e.source, base).map_err(|m| (format!("plugins[{i}].source"), m.to_string()))?;
        let settings = settings_of(e);
        settings.limits().map_err(|(f, m)| (format!("plugins[{i}].{f}"), m))?;
        settings.pin().map_err(|m| (format!("plugins[{i}].sha256"), m))?;
    }
    Ok(())
}

fn settings_of(e: &PluginEntry) -> Settings {
    Settings {
        config: e.config.clone(),
        priority: e.priority,
        failure_policy: e.failure_policy,
        limits: e.limits.clone(),
        capabilities: e.capabilities.clone(),
        sha256: e.sha256.clone(),
    }
}

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
        ConfiguredPlugins { origin, pulls: Pulls::new(fetcher), state: Mutex::new(State::default()) }
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
        if let Ok(c) = read(file) {
            for e in c.plugins.unwrap_or_default() {
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
            ListOrigin::File(f) => xdst_core::files::read_text(f).map_err(|e| e.to_string()),
            ListOrigin::Held { read, .. } => read().map_err(|e| e.to_string()),
        }
        .map_err(|message| ConfigError { file: file.display().to_string(), field: None, message })?;
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = st.text.as_deref() != Some(text.as_str());
        let refresh = changed || st.reloads != Some(reloads);
        if changed {
            let c = parse(&file, &text)?;
            let value = xdst_core::documents::parse_one(&text).unwrap_or_default();
            let entries = c.plugins.unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(Path::new("/etc/xdst/xdst.yaml"), text).unwrap_err().to_string()
    }

    #[test]
    fn tls_files_are_relative_to_the_file_and_both_are_needed() {
        let c =
            parse(Path::new("/etc/xdst/xdst.yaml"), "tls: {cert: certs/server.pem, key: /keys/server.key}").unwrap();
        let t = c.tls.unwrap();
        assert_eq!(t.cert, Path::new("/etc/xdst/certs/server.pem"));
        assert_eq!(t.key, Path::new("/keys/server.key"));
        assert!(err("tls: {cert: a.pem}").contains("missing field `key`"), "{}", err("tls: {cert: a.pem}"));
        let c = parse(
            Path::new("/etc/xdst/xdst.yaml"),
            "tls: {cert: s.pem, key: s.key, clientCa: ca.pem}\nidentities: [{identity: 'spiffe://x/a/*', groups: [a]}]",
        )
        .unwrap();
        assert_eq!(c.tls.unwrap().client_ca.unwrap(), Path::new("/etc/xdst/ca.pem"));
        assert_eq!(c.identities.unwrap()[0].nodes[0].to_string(), "*");
        let e = err("tls: {cert: a.pem, key: a.key, clientCa: ca.pem}");
        assert!(e.contains("field identities") && e.contains("groups"), "{e}");
        let e = err("identities: [{identity: 'a*b', groups: [a]}]");
        assert!(e.contains("identities[0].identity") && e.contains("may only end"), "{e}");
        let e = err("identities: [{identity: 'a', groups: [a]}]");
        assert!(e.contains("need `tls.clientCa`"), "{e}");
        let e = err("tls: {cert: a.pem, key: a.key, ca: ca.pem}");
        assert!(e.contains("tls") && e.contains("unknown field `ca`"), "{e}");
    }

    #[test]
    fn a_full_file_parses_and_paths_are_relative_to_it() {
        let c = parse(
            Path::new("/etc/xdst/xdst.yaml"),
            "xdsAddr: 0.0.0.0:18000\nintent: intent\nplanGrace: 3s\nnodeGroupKey: metadata:team\nplugins:\n- name: gw\
                \n  source: plugins/gw.wasm\n  sha256: \
                sha256:0000000000000000000000000000000000000000000000000000000000000000\n  limits: {deadlineMs: 500}\
                \n  capabilities: [clocks]\n  failurePolicy: fail-open\n  priority: 3\n  config: {a: 1}\n",
        )
        .unwrap();
        assert_eq!(c.intent.as_deref(), Some(Path::new("/etc/xdst/intent")));
        assert_eq!(c.plan_grace, Some(Duration::from_secs(3)));
        let p = &c.plugins.unwrap()[0];
        assert_eq!((p.priority, p.failure_policy), (3, FailurePolicy::FailOpen));
    }

    #[test]
    fn the_example_is_a_valid_and_complete_configuration() {
        let text = include_str!("../../../../../examples/xdst.yaml");
        let c = parse(Path::new("/etc/xdst/xdst.yaml"), text).unwrap();
        let plugins = c.plugins.as_deref().unwrap();
        assert_eq!(plugins.len(), 4);
        assert!(c.xds_addr.is_some() && c.admin_addr.is_some() && c.plan_grace.is_some() && c.node_group_key.is_some());
        let sources: Vec<Source> =
            plugins.iter().map(|p| Source::parse(&p.source, Path::new("/etc/xdst")).unwrap()).collect();
        assert!(
            matches!(sources[0], Source::Path(_))
                && matches!(sources[1], Source::Oci(_))
                && matches!(sources[3], Source::Https(_))
        );
        // Every key of the file is shown in the example (commented or not).
        for key in [
            "xdsAddr",
            "adminAddr",
            "resources",
            "intent",
            "pluginsDir",
            "plugins",
            "pluginCache",
            "fuel",
            "nodeGroupKey",
            "debounce",
            "resync",
            "shutdownGrace",
            "planGrace",
            "drainTime",
            "unsafeUnorderedPush",
            "maxFileSize",
            "maxRequestSize",
            "maxPluginMessage",
            "maxPluginDiagnostics",
            "maxPluginLogLines",
            "maxPluginStdio",
            "adminTokenFile",
            "readyFile",
            "insecureRegistries",
            "caFile",
            "tls",
            "store",
            "identities",
            "adminReadTokenFile",
            "adminReadIdentities",
            "openMetrics",
            "maxStreamsPerConnection",
            "maxConnectionsPerClient",
            "maxRequestsPerSecond",
            "nodeGroups",
            "maxUnlistedNodeGroups",
        ] {
            assert!(text.contains(&format!("{key}:")), "examples/xdst.yaml does not show {key}");
        }
        for key in [
            "name",
            "source",
            "sha256",
            "config",
            "priority",
            "failurePolicy",
            "limits",
            "capabilities",
            "deadlineMs",
            "memoryMiB",
            "outputMiB",
            "fuel",
        ] {
            assert!(text.contains(&format!(" {key}:")), "examples/xdst.yaml does not show plugins[].{key}");
        }
    }

    #[test]
    fn mistakes_name_the_file_and_field() {
        assert!(
            err("xdsAdr: 1")
                .contains("/etc/xdst/xdst.yaml field xdsAdr: unknown field `xdsAdr`, expected one of `xdsAddr`"),
            "{}",
            err("xdsAdr: 1")
        );
        assert!(err("planGrace: soon").contains("field planGrace: invalid duration"));
        assert!(
            err("plugins:\n- {name: a, source: a.wasm, sha256: abc}")
                .contains("field plugins[0].sha256: \"abc\" is not a SHA-256 digest")
        );
        assert!(
            err("plugins:\n- {name: a, source: a.wasm, capabilities: [network]}")
                .contains("field plugins[0].capabilities[0]: unknown capability \"network\"")
        );
        assert!(
            err("plugins:\n- {name: a, source: a.wasm}\n- {name: a, source: b.wasm}")
                .contains("field plugins[1].name: \"a\" is also the name of plugins[0]")
        );
        assert!(err("plugins:\n- {name: A, source: a.wasm}").contains("field plugins[0].name"));
        assert!(
            err("plugins:\n- {name: a, source: \"oci://r.io/Bad:1\"}")
                .contains("field plugins[0].source: oci://r.io/Bad:1")
        );
        assert!(
            err("plugins:\n- {name: a, source: a.wasm, failurePolicy: maybe}")
                .contains("field plugins[0].failurePolicy: unknown variant `maybe`")
        );
        assert!(err("plugins: []\npluginsDir: p").contains("not both"));
        assert!(err("resources: r\nintent: i").contains("serve one source"));
    }
}

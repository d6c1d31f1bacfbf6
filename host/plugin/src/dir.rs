//! A plugins directory: `--plugins DIR`.
//!
//! Every `*.wasm` file in DIR is a plugin: a component of the `xdst:plugin@0.1.0` world, or
//! the core module a guest toolchain produced (it is wrapped into a component on load). Beside
//! `NAME.wasm`, an optional `NAME.yaml` (or `NAME.json`) holds the operator's settings:
//!
//! ```yaml
//! config: {defaultTimeout: 15s}   # handed to the plugin as JSON on every call
//! priority: 0                     # patch plugins: lower runs first, then by name
//! failurePolicy: fail-closed      # patch plugins: fail-closed (the generation fails and the
//!                                 # last good config serves) or fail-open (skipped, a warning)
//! limits:                         # each is optional; these are the defaults
//!   deadlineMs: 2000
//!   memoryMiB: 256
//!   outputMiB: 64
//!   fuel: null                    # only with `serve --fuel`
//! capabilities: []                # clocks, random: none by default
//! sha256: null                    # the digest the .wasm must have
//! ```
//!
//! A configuration file (`serve --config`) lists [`Entry`]s with the same settings inline.
//!
//! Plugins are loaded in file-name order. A file that is not a plugin, a settings file with an
//! unknown field, or a plugin that cannot be loaded is an error naming the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;

use crate::pipeline::{Configured, FailurePolicy};
use crate::{Limits, Plugin, PluginError, Runtime};

/// A plugin loaded from a directory or a configuration file's entry.
#[derive(Clone)]
pub struct Loaded {
    /// What names it in errors and keeps its last good version: the `.wasm` file, or the
    /// configuration's entry (`xdst.yaml plugins[route-policy]`).
    pub file: PathBuf,
    /// The name the pipeline knows it by: the configuration entry's `name`, else the name the
    /// plugin declares.
    pub name: String,
    /// Where its code came from (a path, or `oci://...@sha256:...`).
    pub source: String,
    pub plugin: Arc<Plugin>,
    pub config: String,
    pub priority: i32,
    pub failure: FailurePolicy,
}

impl Loaded {
    pub fn configured(&self) -> Configured {
        let plugin: Arc<dyn crate::pipeline::Translate> = if self.name == self.plugin.info().name {
            self.plugin.clone()
        } else {
            Arc::new(crate::pipeline::Renamed::new(self.plugin.clone(), &self.name))
        };
        Configured { plugin, config: self.config.clone(), priority: self.priority, failure: self.failure }
    }
}

/// The last key of each plugin file, with what vouches for it.
static KEYS: std::sync::LazyLock<Mutex<HashMap<PathBuf, KnownKey>>> = std::sync::LazyLock::new(Default::default);

/// Most plugin files whose keys are remembered (a configuration may list many; past this the
/// memory starts again).
const MAX_KEYS: usize = 1024;

struct KnownKey {
    /// The code file's stamp, taken just before it was read for the key.
    stamp: xdst_core::files::Stamp,
    /// The settings, name and signature it was computed with.
    rest: Vec<u8>,
    key: String,
}

/// A plugin to load: its code and the operator's settings for it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// What names it (see [`Loaded::file`]).
    pub id: PathBuf,
    /// The `.wasm` file holding its code (for a pulled plugin, the cached artifact).
    pub wasm: PathBuf,
    /// Where the code came from, for reports.
    pub source: String,
    /// The instance name (else the plugin's own).
    pub name: Option<String>,
    pub settings: SettingsFrom,
    /// A signature the code must carry.
    pub signature: Option<SignatureCheck>,
}

/// A detached ed25519 signature over the plugin's digest (the ASCII text `sha256:<hex>`), and
/// the public key it must verify with.
#[derive(Debug, Clone)]
pub struct SignatureCheck {
    /// The public key file (PEM, as `openssl pkey -pubout` writes it), for messages.
    pub key_file: String,
    pub key: ed25519_dalek::VerifyingKey,
    /// The signature (raw 64 bytes, or base64 text), or why there is none.
    pub signature: Result<Vec<u8>, String>,
}

impl SignatureCheck {
    /// Reads a public key file; the error says what is wrong with it.
    pub fn read_key(path: &Path) -> Result<ed25519_dalek::VerifyingKey, String> {
        use ed25519_dalek::pkcs8::DecodePublicKey;
        let pem = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        ed25519_dalek::VerifyingKey::from_public_key_pem(&pem).map_err(|e| {
            format!("{}: not an ed25519 public key in PEM (openssl pkey -pubout writes one): {e}", path.display())
        })
    }

    /// Whether the signature verifies for `digest` (`sha256:<hex>`).
    pub fn verify(&self, digest: &str) -> Result<(), String> {
        let raw = self.signature.as_ref().map_err(|e| format!("no signature: {e}"))?;
        let bytes = if raw.len() == 64 {
            raw.clone()
        } else {
            use base64::Engine as _;
            let text = String::from_utf8_lossy(raw);
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|_| "the signature is neither 64 raw bytes nor base64".to_owned())?
        };
        let sig = ed25519_dalek::Signature::from_slice(&bytes)
            .map_err(|_| format!("the signature is {} bytes, not 64", bytes.len()))?;
        self.key
            .verify_strict(digest.as_bytes(), &sig)
            .map_err(|_| format!("the signature does not verify with the key {} for {digest}", self.key_file))
    }
}

/// Where an entry's settings are.
#[derive(Debug, Clone)]
pub enum SettingsFrom {
    /// `NAME.yaml` (or `.yml`, `.json`) beside `NAME.wasm`, if there is one.
    Beside,
    /// Given inline (a configuration file's entry), with their text for change detection.
    Inline(Settings, String),
}

impl Entry {
    /// A `.wasm` file of a plugins directory.
    pub fn file(wasm: &Path) -> Entry {
        Entry {
            id: wasm.to_owned(),
            wasm: wasm.to_owned(),
            source: wasm.display().to_string(),
            name: None,
            settings: SettingsFrom::Beside,
            signature: None,
        }
    }

    /// A digest of everything that makes this plugin what it is: the code and the settings.
    ///
    /// A generation asks this of every plugin. The code (megabytes) is read and hashed again only
    /// when its file's stamp moved or has not settled ([`xdst_core::files::Stamp`]); the settings, name and
    /// signature (small) are read every time.
    pub fn key(&self) -> Result<String, DirError> {
        let mut rest = Vec::new();
        match &self.settings {
            SettingsFrom::Beside => rest.extend(std::fs::read(self.wasm.with_extension("yaml")).unwrap_or_default()),
            SettingsFrom::Inline(_, text) => rest.extend(text.as_bytes()),
        }
        if let Some(n) = &self.name {
            rest.extend(n.as_bytes());
        }
        if let Some(s) = &self.signature {
            rest.extend(s.key.as_bytes());
            rest.extend(s.signature.as_ref().map(Vec::as_slice).unwrap_or(b"-"));
        }
        let stamp = xdst_core::files::Stamp::now(&self.wasm);
        let keys = KEYS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let (Some(now), Some(known)) = (stamp, keys.get(&self.wasm))
            && known.stamp.vouches(&now)
            && known.rest == rest
        {
            return Ok(known.key.clone());
        }
        drop(keys);
        let mut bytes = std::fs::read(&self.wasm).map_err(|e| DirError::Read(self.wasm.clone(), e))?;
        bytes.extend(&rest);
        let key = crate::runtime::digest(&bytes);
        if let Some(stamp) = stamp {
            let mut keys = KEYS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if keys.len() >= MAX_KEYS {
                keys.clear();
            }
            keys.insert(self.wasm.clone(), KnownKey { stamp, rest, key: key.clone() });
        }
        Ok(key)
    }

    fn read_settings(&self) -> Result<Settings, DirError> {
        match &self.settings {
            SettingsFrom::Beside => read_settings(&self.wasm),
            SettingsFrom::Inline(s, _) => Ok(s.clone()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("plugins directory {0}: {1}")]
    Dir(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("{file}{}: {message}", field.as_ref().map(|f| format!(" field {f}")).unwrap_or_default())]
    Settings { file: PathBuf, field: Option<String>, message: String },
    #[error("{file}: {error}")]
    Load { file: PathBuf, error: Box<PluginError> },
    #[error("{file}: not a WebAssembly module or component: {message}")]
    NotWasm { file: PathBuf, message: String },
    #[error("plugin name {name:?} is used by {first} and by {second}")]
    DuplicateName { name: String, first: PathBuf, second: PathBuf },
    #[error("{file}: sha256 mismatch: the settings pin {expected}, but {origin} is {actual}")]
    Digest { file: PathBuf, origin: String, expected: String, actual: String },
    #[error("{file}: signature refused: {message} ({origin})")]
    Signature { file: PathBuf, origin: String, message: String },
}

/// The operator's settings for one plugin (`NAME.yaml`, or a configuration file's entry).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Settings {
    /// Handed to the plugin, as JSON, on every call.
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    #[serde(default)]
    pub limits: LimitSettings,
    /// Granted capabilities (see [`crate::Capabilities`]); none by default.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// The SHA-256 the code must have (`sha256:<hex>` or `<hex>`).
    #[serde(default)]
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitSettings {
    pub deadline_ms: Option<u64>,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<usize>,
    #[serde(rename = "outputMiB")]
    pub output_mib: Option<usize>,
    pub fuel: Option<u64>,
}

impl Settings {
    /// The limits and capabilities these settings give; an unknown capability is an error
    /// naming its index.
    pub fn limits(&self) -> Result<Limits, (String, String)> {
        let mut limits = Limits::default();
        if let Some(ms) = self.limits.deadline_ms {
            limits.deadline = Duration::from_millis(ms);
        }
        if let Some(m) = self.limits.memory_mib {
            limits.memory_bytes = m << 20;
        }
        if let Some(m) = self.limits.output_mib {
            limits.output_bytes = m << 20;
        }
        limits.fuel = self.limits.fuel;
        for (i, c) in self.capabilities.iter().enumerate() {
            limits.capabilities.grant(c).map_err(|m| (format!("capabilities[{i}]"), m))?;
        }
        Ok(limits)
    }

    /// The pinned digest, as `sha256:<hex>`; a malformed pin is an error.
    pub fn pin(&self) -> Result<Option<String>, String> {
        let Some(p) = &self.sha256 else { return Ok(None) };
        let hex = p.strip_prefix("sha256:").unwrap_or(p).to_ascii_lowercase();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("{p:?} is not a SHA-256 digest (64 hex digits, optionally after \"sha256:\")"));
        }
        Ok(Some(format!("sha256:{hex}")))
    }
}

/// Loads plugin directories, keeping what it compiled so an unchanged file is not loaded twice.
pub struct DirLoader {
    runtime: Runtime,
    loaded: Mutex<HashMap<(String, LimitsKey), Arc<Plugin>>>,
}

type LimitsKey = (u128, usize, usize, Option<u64>, crate::Capabilities);

fn key(l: &Limits) -> LimitsKey {
    (l.deadline.as_nanos(), l.memory_bytes, l.output_bytes, l.fuel, l.capabilities)
}

impl DirLoader {
    pub fn new(runtime: Runtime) -> Self {
        DirLoader { runtime, loaded: Mutex::new(HashMap::new()) }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Loads every plugin in `dir`, in file-name order.
    /// The plugin files of `dir` (`*.wasm`, not hidden), sorted.
    pub fn files(&self, dir: &Path) -> Result<Vec<PathBuf>, DirError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| DirError::Dir(dir.to_owned(), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "wasm") && p.is_file())
            .filter(|p| !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')))
            .collect();
        files.sort();
        Ok(files)
    }

    pub fn load(&self, dir: &Path) -> Result<Vec<Loaded>, DirError> {
        let files = self.files(dir)?;
        let mut out: Vec<Loaded> = Vec::new();
        let mut seen: HashMap<String, PathBuf> = HashMap::new();
        let mut keep = std::collections::HashSet::new();
        for file in files {
            let loaded = self.load_file(&file)?;
            let name = loaded.name.clone();
            if let Some(first) = seen.insert(name.clone(), file.clone()) {
                return Err(DirError::DuplicateName { name, first, second: file });
            }
            keep.insert((loaded.plugin.digest().to_owned(), key(&loaded.plugin.limits())));
            out.push(loaded);
        }
        self.loaded.lock().unwrap().retain(|k, _| keep.contains(k));
        Ok(out)
    }

    /// Drops compiled plugins from memory except those of `kept`.
    pub fn keep_only<'a>(&self, kept: impl IntoIterator<Item = &'a Loaded>) {
        let keep: std::collections::HashSet<_> =
            kept.into_iter().map(|l| (l.plugin.digest().to_owned(), key(&l.plugin.limits()))).collect();
        self.loaded.lock().unwrap().retain(|k, _| keep.contains(k));
    }

    /// Whether `file`'s current contents (with its settings' limits) are compiled already.
    pub fn is_loaded(&self, file: &Path) -> bool {
        self.is_entry_loaded(&Entry::file(file))
    }

    /// Whether the entry's current code (with its settings' limits) is compiled already.
    pub fn is_entry_loaded(&self, entry: &Entry) -> bool {
        let Ok(bytes) = std::fs::read(&entry.wasm) else { return false };
        let Ok(Ok(limits)) = entry.read_settings().map(|s| s.limits()) else { return false };
        self.loaded.lock().unwrap().contains_key(&(crate::runtime::digest(&bytes), key(&limits)))
    }

    /// Loads one plugin file and its settings.
    pub fn load_file(&self, file: &Path) -> Result<Loaded, DirError> {
        self.load_entry(&Entry::file(file))
    }

    /// Loads one entry: its settings, then its code, checked against the pinned digest.
    pub fn load_entry(&self, entry: &Entry) -> Result<Loaded, DirError> {
        let file = &entry.id;
        let settings = entry.read_settings()?;
        let settings_file = match &entry.settings {
            SettingsFrom::Beside => entry.wasm.with_extension("yaml"),
            SettingsFrom::Inline(..) => file.clone(),
        };
        let limits = settings.limits().map_err(|(field, message)| DirError::Settings {
            file: settings_file.clone(),
            field: Some(field),
            message,
        })?;
        let pin = settings.pin().map_err(|message| DirError::Settings {
            file: settings_file.clone(),
            field: Some("sha256".into()),
            message,
        })?;
        let config = settings.config.map(|c| c.to_string()).unwrap_or_else(|| "null".into());
        let (priority, failure) = (settings.priority, settings.failure_policy);

        let bytes = std::fs::read(&entry.wasm).map_err(|e| DirError::Read(entry.wasm.clone(), e))?;
        let digest = crate::runtime::digest(&bytes);
        if let Some(expected) = pin
            && expected != digest
        {
            return Err(DirError::Digest {
                file: file.clone(),
                origin: entry.source.clone(),
                expected,
                actual: digest,
            });
        }
        if let Some(check) = &entry.signature {
            check.verify(&digest).map_err(|message| DirError::Signature {
                file: file.clone(),
                origin: entry.source.clone(),
                message,
            })?;
        }
        let done = |plugin: Arc<Plugin>| {
            let name = entry.name.clone().unwrap_or_else(|| plugin.info().name.clone());
            Loaded {
                file: file.clone(),
                name,
                source: entry.source.clone(),
                plugin,
                config: config.clone(),
                priority,
                failure,
            }
        };
        if let Some(p) = self.loaded.lock().unwrap().get(&(digest.clone(), key(&limits))) {
            return Ok(done(p.clone()));
        }
        let label = match &entry.name {
            Some(n) => n.clone(),
            None => file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        };
        let plugin = self.runtime.load_any(&label, &bytes, limits).map_err(|error| match error.failure {
            crate::Failure::Compile(message) if !bytes.starts_with(b"\0asm") => {
                DirError::NotWasm { file: file.clone(), message }
            }
            _ => DirError::Load { file: file.clone(), error: Box::new(error) },
        })?;
        let plugin = Arc::new(plugin);
        self.loaded.lock().unwrap().insert((digest, key(&limits)), plugin.clone());
        Ok(done(plugin))
    }
}

fn read_settings(wasm: &Path) -> Result<Settings, DirError> {
    for ext in ["yaml", "yml", "json"] {
        let path = wasm.with_extension(ext);
        // A settings file is small: the default bound on one file holds it.
        let text = match xdst_core::files::read_text(&path, xdst_core::files::DEFAULT_MAX_TEXT_BYTES) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(DirError::Read(path, e)),
        };
        let settings_err =
            |field: Option<String>, message: String| DirError::Settings { file: path.clone(), field, message };
        let value = xdst_core::documents::parse_one(&text).map_err(|e| settings_err(e.field, e.message))?;
        if value.is_null() {
            return Ok(Settings::default());
        }
        return serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            settings_err((path != ".").then_some(path), e.into_inner().to_string())
        });
    }
    Ok(Settings::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plugin's key is remembered while its code file is settled and unchanged, and computed
    /// again when anything moved: a same-size rewrite with its modification time set back (the
    /// change time moves), a settings change, or a file too fresh to vouch for.
    #[test]
    fn a_plugin_key_is_remembered_only_while_nothing_could_have_changed() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        std::fs::write(&wasm, b"code-one").unwrap();
        let entry = Entry::file(&wasm);
        let first = entry.key().unwrap();
        // Too fresh to vouch for: read again (the same key, as the code is the same).
        assert_eq!(entry.key().unwrap(), first);
        // Settled: the remembered key is the answer (a sentinel shows it was not computed).
        let settle = |key: &str| {
            let mut keys = KEYS.lock().unwrap();
            let known = keys.get_mut(&wasm).unwrap();
            known.stamp = known.stamp.later(Duration::from_secs(10));
            known.key = key.to_owned();
        };
        settle("remembered");
        assert_eq!(entry.key().unwrap(), "remembered");
        // New settings beside it: computed again.
        std::fs::write(wasm.with_extension("yaml"), "config: {a: 1}\n").unwrap();
        assert_ne!(entry.key().unwrap(), "remembered");
        settle("remembered");
        assert_eq!(entry.key().unwrap(), "remembered");
        // The same size, its modification time set back: the change time still moved.
        let modified = std::fs::metadata(&wasm).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&wasm, b"code-two").unwrap();
        std::fs::File::options().write(true).open(&wasm).unwrap().set_modified(modified).unwrap();
        let second = entry.key().unwrap();
        assert_ne!(second, "remembered");
        assert_ne!(second, first);
    }
}

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
//! ```
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

/// A plugin loaded from a directory.
#[derive(Clone)]
pub struct Loaded {
    pub file: PathBuf,
    pub plugin: Arc<Plugin>,
    pub config: String,
    pub priority: i32,
    pub failure: FailurePolicy,
}

impl Loaded {
    pub fn configured(&self) -> Configured {
        Configured { plugin: self.plugin.clone(), config: self.config.clone(), priority: self.priority, failure: self.failure }
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
    Load { file: PathBuf, error: PluginError },
    #[error("{file}: not a WebAssembly module or component: {message}")]
    NotWasm { file: PathBuf, message: String },
    #[error("plugin name {name:?} is used by {first} and by {second}")]
    DuplicateName { name: String, first: PathBuf, second: PathBuf },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    config: Option<serde_json::Value>,
    #[serde(default)]
    priority: i32,
    #[serde(default, rename = "failurePolicy")]
    failure_policy: FailurePolicy,
    #[serde(default)]
    limits: LimitSettings,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LimitSettings {
    deadline_ms: Option<u64>,
    #[serde(rename = "memoryMiB")]
    memory_mib: Option<usize>,
    #[serde(rename = "outputMiB")]
    output_mib: Option<usize>,
    fuel: Option<u64>,
}

/// Loads plugin directories, keeping what it compiled so an unchanged file is not loaded twice.
pub struct DirLoader {
    runtime: Runtime,
    loaded: Mutex<HashMap<(String, LimitsKey), Arc<Plugin>>>,
}

type LimitsKey = (u128, usize, usize, Option<u64>);

fn key(l: &Limits) -> LimitsKey {
    (l.deadline.as_nanos(), l.memory_bytes, l.output_bytes, l.fuel)
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
            let name = loaded.plugin.info().name.clone();
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
        let keep: std::collections::HashSet<_> = kept.into_iter().map(|l| (l.plugin.digest().to_owned(), key(&l.plugin.limits()))).collect();
        self.loaded.lock().unwrap().retain(|k, _| keep.contains(k));
    }

    /// Whether `file`'s current contents (with its settings' limits) are compiled already.
    pub fn is_loaded(&self, file: &Path) -> bool {
        let Ok(bytes) = std::fs::read(file) else { return false };
        let Ok(settings) = read_settings(file) else { return false };
        let limits = limits_of(&settings);
        self.loaded.lock().unwrap().contains_key(&(crate::runtime::digest(&bytes), key(&limits)))
    }

    /// Loads one plugin file and its settings.
    pub fn load_file(&self, file: &Path) -> Result<Loaded, DirError> {
        let settings = read_settings(file)?;
        let limits = limits_of(&settings);
        let config = settings.config.map(|c| c.to_string()).unwrap_or_else(|| "null".into());
        let (priority, failure) = (settings.priority, settings.failure_policy);

        let bytes = std::fs::read(file).map_err(|e| DirError::Read(file.to_owned(), e))?;
        let digest = crate::runtime::digest(&bytes);
        if let Some(p) = self.loaded.lock().unwrap().get(&(digest.clone(), key(&limits))) {
            return Ok(Loaded { file: file.to_owned(), plugin: p.clone(), config, priority, failure });
        }
        let label = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let plugin = self
            .runtime
            .load_any(&label, &bytes, limits)
            .map_err(|error| match error.failure {
                crate::Failure::Compile(message) if !bytes.starts_with(b"\0asm") => {
                    DirError::NotWasm { file: file.to_owned(), message }
                }
                _ => DirError::Load { file: file.to_owned(), error },
            })?;
        let plugin = Arc::new(plugin);
        self.loaded.lock().unwrap().insert((digest, key(&limits)), plugin.clone());
        Ok(Loaded { file: file.to_owned(), plugin, config, priority, failure })
    }
}

fn limits_of(settings: &Settings) -> Limits {
    let mut limits = Limits::default();
    if let Some(ms) = settings.limits.deadline_ms {
        limits.deadline = Duration::from_millis(ms);
    }
    if let Some(m) = settings.limits.memory_mib {
        limits.memory_bytes = m << 20;
    }
    if let Some(m) = settings.limits.output_mib {
        limits.output_bytes = m << 20;
    }
    limits.fuel = settings.limits.fuel;
    limits
}

fn read_settings(wasm: &Path) -> Result<Settings, DirError> {
    for ext in ["yaml", "yml", "json"] {
        let path = wasm.with_extension(ext);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(DirError::Read(path, e)),
        };
        let settings_err = |field: Option<String>, message: String| DirError::Settings { file: path.clone(), field, message };
        let value: serde_json::Value = if ext == "json" {
            serde_json::from_str(&text).map_err(|e| settings_err(None, e.to_string()))?
        } else {
            serde_yaml_ng::from_str(&text).map_err(|e| settings_err(None, e.to_string()))?
        };
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

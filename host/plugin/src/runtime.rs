//! The engine, compiled-component cache and sandboxed calls.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tracing::{debug, info, warn};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};

use crate::error::{Failure, PluginError};
use crate::wit::{self, PluginInfo, TranslateRequest, TranslateResponse};

/// How often the engine's epoch advances; deadlines are rounded up to it.
const TICK: Duration = Duration::from_millis(5);
/// Log lines a plugin may write per call, and bytes per line.
const MAX_LOG_LINES: usize = 100;
const MAX_LOG_BYTES: usize = 4096;

/// What a plugin may import: the contract's log function, and its types (an interface with
/// no functions, imported by every component that uses them).
/// The version of the `xdst:plugin` contract (`proto/wit`) this host implements.
pub const CONTRACT: &str = "0.1.0";
const GRANTED: [&str; 2] = ["xdst:plugin/log@0.1.0", "xdst:plugin/types@0.1.0"];

/// Per-plugin sandbox limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for one call.
    pub deadline: Duration,
    /// Linear memory, all memories together.
    pub memory_bytes: usize,
    /// Total bytes of strings and byte lists a call may return.
    pub output_bytes: usize,
    /// Fuel per call, if the runtime was created with fuel metering.
    pub fuel: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(2),
            memory_bytes: 256 << 20,
            output_bytes: 64 << 20,
            fuel: None,
        }
    }
}

/// Engine-wide settings.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Where compiled components are cached, by SHA-256 (none: compile on every load).
    pub cache_dir: Option<PathBuf>,
    /// Meter fuel (slower; deterministic budgets for plugins that set `Limits::fuel`).
    pub fuel: bool,
}

/// Compiles and runs plugins. One per process; cheap to share.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    config: RuntimeConfig,
    linker: Arc<Linker<CallState>>,
    _ticker: Arc<Ticker>,
}

struct Ticker(Arc<AtomicBool>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Result<Self, PluginError> {
        let host = |e: wasmtime::Error| PluginError {
            plugin: "(runtime)".into(),
            digest: String::new(),
            failure: Failure::Host(e.to_string()),
        };
        let mut c = Config::new();
        c.wasm_component_model(true)
            .epoch_interruption(true)
            .consume_fuel(config.fuel);
        let engine = Engine::new(&c).map_err(host)?;
        let stop = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("xdst-plugin-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| host(e.into()))?;
        }
        let mut linker = Linker::new(&engine);
        wit::xdst::plugin::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(host)?;
        Ok(Runtime {
            engine,
            config,
            linker: Arc::new(linker),
            _ticker: Arc::new(Ticker(stop)),
        })
    }

    /// Like [`Runtime::load`], but also takes the core module a guest toolchain produced
    /// (`cargo build --target wasm32-unknown-unknown`, with the WIT embedded by the bindings
    /// generator) and wraps it into a component first. The digest is that of `bytes` as given.
    pub fn load_any(&self, label: &str, bytes: &[u8], limits: Limits) -> Result<Plugin, PluginError> {
        if bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0] {
            let component = wit_component::ComponentEncoder::default()
                .module(bytes)
                .and_then(|e| e.validate(true).encode())
                .map_err(|e| PluginError {
                    plugin: label.to_owned(),
                    digest: digest(bytes),
                    failure: Failure::Incompatible(format!(
                        "a core module that cannot be made into an xdst:plugin component (was it built with an xdst SDK?): {e:#}"
                    )),
                })?;
            return self.load_with_digest(label, &component, digest(bytes), limits);
        }
        self.load(label, bytes, limits)
    }

    /// Compiles (or loads from the cache), links and describes a plugin. `label` names it in
    /// errors until `describe` has told its name.
    pub fn load(&self, label: &str, bytes: &[u8], limits: Limits) -> Result<Plugin, PluginError> {
        self.load_with_digest(label, bytes, digest(bytes), limits)
    }

    /// Loads the component `bytes`, known to users by `digest` (that of the file they gave).
    fn load_with_digest(&self, label: &str, bytes: &[u8], digest: String, limits: Limits) -> Result<Plugin, PluginError> {
        let err = |failure| PluginError {
            plugin: label.to_owned(),
            digest: digest.clone(),
            failure,
        };
        let component = self.compile(bytes, &digest).map_err(|f| err(f))?;
        // Every import must be one we provide: anything else (WASI) was not granted. A plugin
        // built against another version of the contract is told so first.
        let ty = component.component_type();
        for (name, _) in ty.imports(&self.engine) {
            if let Some(v) = name.strip_prefix("xdst:plugin/").and_then(|n| n.split_once('@')).map(|(_, v)| v)
                && v != CONTRACT
            {
                return Err(err(Failure::Incompatible(format!(
                    "speaks version {v} of the xdst:plugin contract ({name}); this xdst speaks {CONTRACT} (see proto/README.md)"
                ))));
            }
        }
        for (name, _) in ty.imports(&self.engine) {
            if !GRANTED.contains(&name) {
                return Err(err(Failure::Incompatible(format!(
                    "imports {name}, which is not granted (a plugin may import only {})",
                    GRANTED.join(" and ")
                ))));
            }
        }
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| err(Failure::Incompatible(format!("{e:#}"))))?;
        let pre = wit::PluginPre::new(pre).map_err(|e| {
            err(Failure::Incompatible(format!(
                "does not implement the xdst:plugin@0.1.0 world: {e:#}"
            )))
        })?;
        let mut plugin = Plugin {
            name: label.to_owned(),
            digest,
            info: PluginInfo {
                name: label.to_owned(),
                version: String::new(),
                kinds: vec![],
                phase: wit::Phase::Translate,
                granularity: wit::Granularity::WholeSet,
            },
            pre,
            engine: self.engine.clone(),
            limits,
            fuel_enabled: self.config.fuel,
        };
        let info = plugin.call(|p, store| p.call_describe(store))?;
        plugin.name = info.name.clone();
        plugin.info = info;
        info!(plugin = %plugin.name, version = %plugin.info.version, digest = %plugin.digest, kinds = ?plugin.info.kinds, "plugin loaded");
        Ok(plugin)
    }

    fn compile(&self, bytes: &[u8], digest: &str) -> Result<Component, Failure> {
        let Some(dir) = &self.config.cache_dir else {
            return Component::new(&self.engine, bytes)
                .map_err(|e| Failure::Compile(format!("{e:#}")));
        };
        let compat = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            self.engine.precompile_compatibility_hash().hash(&mut h);
            h.finish()
        };
        let path = dir.join(format!(
            "{}-{compat:016x}.cwasm",
            digest.trim_start_matches("sha256:")
        ));
        if path.exists() {
            // SAFETY: the file was written by `Component::serialize` of this engine
            // configuration (its compatibility hash is in the name) into our own cache dir.
            match unsafe { Component::deserialize_file(&self.engine, &path) } {
                Ok(c) => {
                    debug!(%digest, path = %path.display(), "compiled plugin from cache");
                    return Ok(c);
                }
                Err(e) => warn!(%digest, error = %e, "cached artifact unusable; recompiling"),
            }
        }
        let component =
            Component::new(&self.engine, bytes).map_err(|e| Failure::Compile(format!("{e:#}")))?;
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let data = component.serialize().map_err(std::io::Error::other)?;
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, data)?;
            std::fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            warn!(%digest, dir = %dir.display(), error = %e, "cannot cache the compiled plugin");
        }
        Ok(component)
    }
}

/// A loaded plugin: compiled, linked, described. Calls are independent: each gets a fresh
/// store, so nothing leaks from one call to the next and swapping plugins is safe.
pub struct Plugin {
    name: String,
    digest: String,
    info: PluginInfo,
    pre: wit::PluginPre<CallState>,
    engine: Engine,
    limits: Limits,
    fuel_enabled: bool,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Plugin {
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }
    /// `sha256:<hex>` of the component.
    pub fn digest(&self) -> &str {
        &self.digest
    }
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Translates under the plugin's limits.
    pub fn translate(&self, request: &TranslateRequest) -> Result<TranslateResponse, PluginError> {
        let result = self.call(|p, store| p.call_translate(store, request))?;
        let response = result.map_err(|e| {
            self.error(Failure::Reported {
                message: e.message,
                document: e.document,
                field: e.field,
            })
        })?;
        let bytes = output_size(&response);
        if bytes > self.limits.output_bytes {
            return Err(self.error(Failure::OutputTooLarge {
                bytes,
                limit_bytes: self.limits.output_bytes,
            }));
        }
        Ok(response)
    }

    fn error(&self, failure: Failure) -> PluginError {
        PluginError {
            plugin: self.name.clone(),
            digest: self.digest.clone(),
            failure,
        }
    }

    fn call<T>(
        &self,
        f: impl FnOnce(&wit::Plugin, &mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, PluginError> {
        let mut store = Store::new(
            &self.engine,
            CallState {
                plugin: self.name.clone(),
                memory_cap: self.limits.memory_bytes,
                memory_hit: false,
                logs: 0,
            },
        );
        store.limiter(|s| s as &mut dyn ResourceLimiter);
        let ticks = self
            .limits
            .deadline
            .as_micros()
            .div_ceil(TICK.as_micros())
            .max(1) as u64;
        store.set_epoch_deadline(ticks + 1);
        store.epoch_deadline_trap();
        if self.fuel_enabled {
            let fuel = self.limits.fuel.unwrap_or(u64::MAX);
            store
                .set_fuel(fuel)
                .map_err(|e| self.error(Failure::Host(e.to_string())))?;
        }
        let outcome = self
            .pre
            .instantiate(&mut store)
            .and_then(|instance| f(&instance, &mut store));
        outcome.map_err(|e| self.classify(e, &store))
    }

    fn classify(&self, e: wasmtime::Error, store: &Store<CallState>) -> PluginError {
        let failure = match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => Failure::Deadline {
                limit_ms: self.limits.deadline.as_millis() as u64,
            },
            Some(Trap::OutOfFuel) => Failure::Fuel {
                limit: self.limits.fuel.unwrap_or(0),
            },
            _ if store.data().memory_hit => Failure::Memory {
                limit_bytes: self.limits.memory_bytes,
            },
            Some(trap) => Failure::Trap(format!("{trap}: {e:#}")),
            None => Failure::Trap(format!("{e:#}")),
        };
        self.error(failure)
    }
}

/// Bytes of strings and byte lists in a response.
fn output_size(r: &TranslateResponse) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let res: usize = r
        .resources
        .iter()
        .map(|x| {
            x.type_url.len()
                + x.name.len()
                + opt(&x.document)
                + match &x.body {
                    wit::Body::Json(s) => s.len(),
                    wit::Body::Proto(b) => b.len(),
                }
        })
        .sum();
    let diag: usize = r
        .diagnostics
        .iter()
        .map(|d| d.message.len() + opt(&d.document) + opt(&d.field))
        .sum();
    res + diag
}

/// The state of one call.
pub struct CallState {
    plugin: String,
    memory_cap: usize,
    memory_hit: bool,
    logs: usize,
}

impl ResourceLimiter for CallState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.memory_hit = true;
            return Ok(false);
        }
        Ok(true)
    }
    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
    fn instances(&self) -> usize {
        64
    }
    fn tables(&self) -> usize {
        64
    }
    fn memories(&self) -> usize {
        64
    }
}

impl wit::xdst::plugin::log::Host for CallState {
    fn log(&mut self, level: wit::xdst::plugin::log::Level, message: String) {
        use wit::xdst::plugin::log::Level;
        self.logs += 1;
        if self.logs > MAX_LOG_LINES {
            if self.logs == MAX_LOG_LINES + 1 {
                warn!(plugin = %self.plugin, "plugin log limit reached; further lines dropped");
            }
            return;
        }
        let mut message = message;
        if message.len() > MAX_LOG_BYTES {
            let mut cut = MAX_LOG_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str("…");
        }
        match level {
            Level::Debug => debug!(plugin = %self.plugin, "{message}"),
            Level::Info => info!(plugin = %self.plugin, "{message}"),
            Level::Warn => warn!(plugin = %self.plugin, "{message}"),
            Level::Error => tracing::error!(plugin = %self.plugin, "{message}"),
        }
    }
}

/// `sha256:<hex>` of a plugin file.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

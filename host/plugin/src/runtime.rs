//! The engine, compiled-component cache and sandboxed calls.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tracing::{debug, info, warn};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};

use crate::core_abi::{self, CallError, CorePre, Shape};
use crate::error::{Failure, PluginError};
use crate::lift;
use crate::stdio::CappedPipe;
use crate::wit::{self, PluginInfo, TranslateRequest, TranslateResponse};
use crate::{wit2, wit3, wit4};

mod ticker;
mod waits;

use ticker::{TICK, Ticker};
/// Log lines a plugin may write per call, and bytes per line.
/// Plugin log lines dropped over the per-call limit, since start.
pub static DROPPED_LOG_LINES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The newest version of the `xdst:plugin` contract (`proto/wit`) this host implements.
pub const CONTRACT: &str = "0.4.0";
/// Every version of the contract this host loads.
pub const CONTRACTS: [&str; 4] = ["0.1.0", "0.2.0", "0.3.0", "0.4.0"];
/// What a component may import: the contract's log function, and its types (an interface with
/// no functions, imported by every component that uses them), in each version.
const GRANTED: [&str; 8] = [
    "xdst:plugin/log@0.1.0",
    "xdst:plugin/types@0.1.0",
    "xdst:plugin/log@0.2.0",
    "xdst:plugin/types@0.2.0",
    "xdst:plugin/log@0.3.0",
    "xdst:plugin/types@0.3.0",
    "xdst:plugin/log@0.4.0",
    "xdst:plugin/types@0.4.0",
];
/// WASI packages a component may import. They are linked to an empty WASI: no files, no
/// environment or arguments, no network, stdin empty; stdout and stderr are captured into the
/// plugin's log. Interpreters (JavaScript, Python) and libc-based toolchains import these even
/// when the plugin never uses them.
const EMPTY_WASI: [&str; 6] =
    ["wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/", "wasi:filesystem/", "wasi:sockets/"];

/// How a plugin's code talks to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abi {
    /// A component of the `xdst:plugin` WIT world (or a core module with the world embedded,
    /// which the host made into a component).
    Component,
    /// A core module speaking the JSON core-module ABI (`proto/core-abi`).
    CoreModule,
}

impl std::fmt::Display for Abi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Abi::Component => "component",
            Abi::CoreModule => "core module",
        })
    }
}

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
    /// What the plugin may see beyond its input. Nothing by default.
    pub capabilities: Capabilities,
}

/// Capabilities an operator can grant a plugin. Without them a plugin that imports WASI sees a
/// clock stopped at the Unix epoch and random bytes that are the same on every call, so its
/// output depends on its input only (which is what lets the pipeline skip unchanged work).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// `clocks`: the real wall and monotonic clocks.
    pub clocks: bool,
    /// `random`: real random bytes.
    pub random: bool,
}

impl Capabilities {
    /// The names, as settings spell them.
    pub const NAMES: [&str; 2] = ["clocks", "random"];

    /// Grants the capability `name`; an unknown name is an error listing the known ones.
    pub fn grant(&mut self, name: &str) -> Result<(), String> {
        match name {
            "clocks" => self.clocks = true,
            "random" => self.random = true,
            other => {
                return Err(format!("unknown capability {other:?}: the capabilities are {}", Self::NAMES.join(", ")));
            }
        }
        Ok(())
    }

    /// The granted ones, by name.
    pub fn names(&self) -> Vec<&'static str> {
        [(self.clocks, "clocks"), (self.random, "random")].into_iter().filter(|(on, _)| *on).map(|(_, n)| n).collect()
    }
}

/// The clocks of a plugin without the `clocks` capability: stopped, the wall clock at the Unix
/// epoch and the monotonic clock at 1 ns (Go's runtime refuses to start on a monotonic clock
/// that reads zero).
struct StoppedClock;

impl wasmtime_wasi::HostWallClock for StoppedClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl wasmtime_wasi::HostMonotonicClock for StoppedClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        1
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(2),
            memory_bytes: 256 << 20,
            output_bytes: 64 << 20,
            fuel: None,
            capabilities: Capabilities::default(),
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
    /// How much of a plugin's own text is kept (`xdst serve --max-plugin-message`, ...).
    pub text: crate::TextLimits,
    /// An incremental plugin's calls between two full ones (`--full-translation-every`; design
    /// 020); 0 means the default.
    pub full_translation_every: u32,
    /// The least time between two of them (`--full-translation-spacing`; 0: no floor).
    pub full_translation_spacing: Duration,
    /// Called when a periodic full check, run off the generation's path, found that an
    /// incremental plugin's output must be replaced: the caller runs a generation, whose call
    /// of that plugin is then a full one.
    pub wake: Wake,
}

/// See [`RuntimeConfig::wake`].
#[derive(Clone, Default)]
pub struct Wake(pub Option<Arc<dyn Fn() + Send + Sync>>);

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Wake(set)" } else { "Wake(none)" })
    }
}

/// Compiles and runs plugins. One per process; cheap to share.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    config: RuntimeConfig,
    linker: Arc<Linker<CallState>>,
    core_linker: Arc<wasmtime::Linker<CallState>>,
    ticker: Arc<Ticker>,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Result<Self, PluginError> {
        let host = |e: wasmtime::Error| PluginError {
            plugin: "(runtime)".into(),
            digest: String::new(),
            failure: Failure::Host(e.to_string()),
        };
        let mut c = Config::new();
        c.wasm_component_model(true).epoch_interruption(true).consume_fuel(config.fuel);
        let engine = Engine::new(&c).map_err(host)?;
        let ticker = Ticker::start(engine.clone()).map_err(|e| host(e.into()))?;
        let mut linker = Linker::new(&engine);
        wit::xdst::plugin::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(host)?;
        wit2::xdst::plugin::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(host)?;
        wit3::xdst::plugin::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(host)?;
        wit4::xdst::plugin::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(host)?;
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(host)?;
        waits::bound_component_waits(&mut linker).map_err(host)?;
        let mut core_linker = wasmtime::Linker::new(&engine);
        core_abi::add_to_linker(&mut core_linker).map_err(host)?;
        waits::bound_core_waits(&mut core_linker).map_err(host)?;
        Ok(Runtime {
            engine,
            config,
            linker: Arc::new(linker),
            core_linker: Arc::new(core_linker),
            ticker: Arc::new(ticker),
        })
    }

    /// Loads any kind of plugin file: a component; a core module speaking the core-module ABI
    /// (`proto/core-abi`); or the core module a component toolchain produced (`cargo build
    /// --target wasm32-unknown-unknown`, `wit-bindgen c`: the WIT world embedded by the bindings
    /// generator), which is made into a component first. The digest is that of `bytes` as given.
    pub fn load_any(&self, label: &str, bytes: &[u8], limits: Limits) -> Result<Plugin, PluginError> {
        if is_core_module(bytes) {
            let err = |failure| PluginError { plugin: label.to_owned(), digest: digest(bytes), failure };
            match core_abi::shape(bytes)
                .map_err(|e| err(Failure::Compile(format!("a core module that is not valid WebAssembly: {e}"))))?
            {
                Shape::CoreAbi => return self.load_core(label, bytes, limits),
                Shape::OtherVersion(v) => {
                    return Err(err(Failure::Incompatible(format!(
                        "speaks version {v} of the core-module ABI (exports xdst_plugin_abi_{}); this xdst speaks \
                            {} (see proto/core-abi/README.md)",
                        v.replace('.', "_"),
                        core_abi::VERSION
                    ))));
                }
                Shape::NoMarker => {}
            }
            let component = wit_component::ComponentEncoder::default()
                .module(bytes)
                .and_then(|e| e.validate(true).encode())
                .map_err(|e| PluginError {
                    plugin: label.to_owned(),
                    digest: digest(bytes),
                    failure: Failure::Incompatible(format!(
                        "a core module that neither exports {} (the core-module ABI) nor embeds the xdst:plugin WIT \
                            world (was it built with an xdst SDK?): {e:#}",
                        core_abi::MARKER
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
    fn load_with_digest(
        &self,
        label: &str,
        bytes: &[u8],
        digest: String,
        limits: Limits,
    ) -> Result<Plugin, PluginError> {
        let err = |failure| PluginError { plugin: label.to_owned(), digest: digest.clone(), failure };
        // Refuse what imports something not granted before paying for the compile (most of a
        // minute for an interpreter component), then again on the compiled type.
        check_imports(top_level_imports(bytes).iter().map(String::as_str)).map_err(&err)?;
        let component = self.compile(bytes, &digest).map_err(&err)?;
        let ty = component.component_type();
        let imports: Vec<String> = ty.imports(&self.engine).map(|(n, _)| n.to_owned()).collect();
        check_imports(imports.iter().map(String::as_str)).map_err(&err)?;
        let pre = self.linker.instantiate_pre(&component).map_err(|e| err(Failure::Incompatible(format!("{e:#}"))))?;
        // The version its imports name; one that imports nothing of the contract is tried as
        // each version in turn (their exports' types differ).
        let named = |v: &str| imports.iter().any(|n| n.starts_with("xdst:plugin/") && n.ends_with(&format!("@{v}")));
        let code = if named("0.4.0") {
            wit4::PluginPre::new(pre).map(Code::Component4).map_err(|e| e.to_string())
        } else if named("0.3.0") {
            wit3::PluginPre::new(pre).map(Code::Component3).map_err(|e| e.to_string())
        } else if named("0.2.0") {
            wit2::PluginPre::new(pre).map(Code::Component2).map_err(|e| e.to_string())
        } else {
            wit::PluginPre::new(pre.clone())
                .map(Code::Component)
                .or_else(|e1| {
                    wit2::PluginPre::new(pre.clone()).map(Code::Component2).map_err(|e2| format!("{e1:#}; {e2:#}"))
                })
                .or_else(|e| {
                    wit3::PluginPre::new(pre.clone()).map(Code::Component3).map_err(|e3| format!("{e}; {e3:#}"))
                })
                .or_else(|e| wit4::PluginPre::new(pre).map(Code::Component4).map_err(|e4| format!("{e}; {e4:#}")))
        }
        .map_err(|e| {
            err(Failure::Incompatible(format!(
                "does not implement the xdst:plugin world (versions {}): {e}",
                CONTRACTS.join(", ")
            )))
        })?;
        self.describe(label, digest, code, imports, limits)
    }

    /// Loads a core module that speaks the core-module ABI.
    fn load_core(&self, label: &str, bytes: &[u8], limits: Limits) -> Result<Plugin, PluginError> {
        let digest = digest(bytes);
        let err = |failure| PluginError { plugin: label.to_owned(), digest: digest.clone(), failure };
        let module = self.compile_module(bytes, &digest).map_err(&err)?;
        core_abi::check_imports(&module, &self.core_linker, &self.engine).map_err(&err)?;
        let pre =
            self.core_linker.instantiate_pre(&module).map_err(|e| err(Failure::Incompatible(format!("{e:#}"))))?;
        let imports = module.imports().map(|i| format!("{}.{}", i.module(), i.name())).collect();
        self.describe(label, digest, Code::Core(CorePre { pre }), imports, limits)
    }

    /// Asks a linked plugin who it is.
    fn describe(
        &self,
        label: &str,
        digest: String,
        code: Code,
        imports: Vec<String>,
        limits: Limits,
    ) -> Result<Plugin, PluginError> {
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
            code,
            imports,
            ticker: self.ticker.clone(),
            engine: self.engine.clone(),
            limits,
            fuel_enabled: self.config.fuel,
            text: self.config.text,
            incremental: false,
            kept: Default::default(),
            full_every: Arc::new(crate::incremental::FullChecks::new(
                match self.config.full_translation_every {
                    0 => crate::incremental::DEFAULT_FULL_EVERY,
                    n => n,
                },
                self.config.full_translation_spacing,
            )),
            wake: self.config.wake.clone(),
        };
        let version = plugin.contract();
        let mut incremental = false;
        let info = plugin.call(
            |instance, store| {
                if version == "0.2.0" {
                    let p = wit2::Plugin::new(&mut *store, instance).map_err(CallError::Wasm)?;
                    return p.call_describe(store).map(info_from_v2).map_err(CallError::Wasm);
                }
                if version == "0.3.0" {
                    let p = wit3::Plugin::new(&mut *store, instance).map_err(CallError::Wasm)?;
                    return p.call_describe(store).map(info_from_v3).map_err(CallError::Wasm);
                }
                if version == "0.4.0" {
                    let p = wit4::Plugin::new(&mut *store, instance).map_err(CallError::Wasm)?;
                    return p
                        .call_describe(store)
                        .map(|i| {
                            incremental = i.incremental;
                            info_from_v4(i)
                        })
                        .map_err(CallError::Wasm);
                }
                let p = wit::Plugin::new(&mut *store, instance).map_err(CallError::Wasm)?;
                p.call_describe(store).map_err(CallError::Wasm)
            },
            |c, store| c.describe(store, limits.output_bytes),
        )?;
        crate::names::check(&info).map_err(|e| plugin.error(Failure::Incompatible(e.to_string())))?;
        if incremental && (info.phase != wit::Phase::Translate || info.granularity != wit::Granularity::WholeSet) {
            let why = "says it is incremental, which only a whole-set translate plugin may be (design 020)";
            return Err(plugin.error(Failure::Incompatible(why.into())));
        }
        plugin.incremental = incremental;
        plugin.name = info.name.clone();
        plugin.info = info;
        info!(
            plugin = %plugin.name,
            version = %plugin.info.version,
            abi = %plugin.abi(),
            digest = %plugin.digest,
            kinds = ?plugin.info.kinds,
            "plugin loaded"
        );
        Ok(plugin)
    }

    fn compile(&self, bytes: &[u8], digest: &str) -> Result<Component, Failure> {
        self.compile_cached(
            digest,
            "",
            || Component::new(&self.engine, bytes),
            // SAFETY: see `compile_cached`.
            |path| unsafe { Component::deserialize_file(&self.engine, path) },
            |c| c.serialize(),
        )
    }

    fn compile_module(&self, bytes: &[u8], digest: &str) -> Result<wasmtime::Module, Failure> {
        self.compile_cached(
            digest,
            "-core",
            || wasmtime::Module::new(&self.engine, bytes),
            // SAFETY: see `compile_cached`.
            |path| unsafe { wasmtime::Module::deserialize_file(&self.engine, path) },
            |m| m.serialize(),
        )
    }

    /// Compiles, or loads the artifact cached for `digest`. `deserialize` must only be given
    /// files this function wrote: they are written by `serialize` of this engine configuration
    /// (its compatibility hash is in the name) into our own cache directory.
    fn compile_cached<T>(
        &self,
        digest: &str,
        suffix: &str,
        compile: impl FnOnce() -> wasmtime::Result<T>,
        deserialize: impl FnOnce(&std::path::Path) -> wasmtime::Result<T>,
        serialize: impl FnOnce(&T) -> wasmtime::Result<Vec<u8>>,
    ) -> Result<T, Failure> {
        // Cranelift compiles on several threads, and what they allocated stays with their
        // allocator arenas (tens of MB for a large plugin) unless it is handed back.
        let compile = || {
            let compiled = compile();
            xdst_core::heap::return_free_pages();
            compiled
        };
        let Some(dir) = &self.config.cache_dir else {
            return compile().map_err(|e| Failure::Compile(format!("{e:#}")));
        };
        let compat = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            self.engine.precompile_compatibility_hash().hash(&mut h);
            h.finish()
        };
        let path = dir.join(format!("{}-{compat:016x}{suffix}.cwasm", digest.trim_start_matches("sha256:")));
        if path.exists() {
            match deserialize(&path) {
                Ok(c) => {
                    debug!(%digest, path = %path.display(), "compiled plugin from cache");
                    return Ok(c);
                }
                Err(e) => warn!(%digest, error = %e, "cached artifact unusable; recompiling"),
            }
        }
        let component = compile().map_err(|e| Failure::Compile(format!("{e:#}")))?;
        let write = || -> std::io::Result<()> {
            let data = serialize(&component).map_err(std::io::Error::other)?;
            xdst_core::files::write_atomic(&path, data)
        };
        if let Err(e) = write() {
            warn!(%digest, dir = %dir.display(), error = %e, "cannot cache the compiled plugin");
        }
        Ok(component)
    }
}

enum Code {
    Component(wit::PluginPre<CallState>),
    /// A component of contract 0.2.0.
    Component2(wit2::PluginPre<CallState>),
    /// A component of contract 0.3.0.
    Component3(wit3::PluginPre<CallState>),
    /// A component of contract 0.4.0.
    Component4(wit4::PluginPre<CallState>),
    Core(CorePre),
}

/// A later version's plugin description in the host's (0.1.0) types: the record is the same
/// in every version, and only the generated types differ.
macro_rules! info_from {
    ($name:ident, $($types:ident)::+) => {
        fn $name(i: $($types)::+::PluginInfo) -> PluginInfo {
            use $($types)::+::{Granularity as G, Phase as P};
            PluginInfo {
                name: i.name,
                version: i.version,
                kinds: i.kinds,
                phase: match i.phase {
                    P::Translate => wit::Phase::Translate,
                    P::Patch => wit::Phase::Patch,
                },
                granularity: match i.granularity {
                    G::PerDocument => wit::Granularity::PerDocument,
                    G::WholeSet => wit::Granularity::WholeSet,
                },
            }
        }
    };
}
info_from!(info_from_v2, wit2::xdst::plugin::types);
info_from!(info_from_v3, wit3::xdst::plugin::types);
info_from!(info_from_v4, wit4::xdst::plugin::types);

/// A plugin's instance kept between the calls of one pipeline (contract 0.4.0, design 020): its
/// store (its memories and globals, what it kept) and the instance, for the plugin of `digest`
/// only. Made by a full call of [`Plugin::translate_kept`], dropped by any failure.
pub struct Kept {
    store: Store<CallState>,
    instance: wasmtime::component::Instance,
    digest: String,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept").field("digest", &self.digest).finish_non_exhaustive()
    }
}

/// The status a plugin gave a document (contract 0.2.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentStatus {
    /// The document's id.
    pub document: String,
    /// A JSON object, as the plugin returned it.
    pub status: String,
}

/// What a translation returned: the 0.1.0 response, the statuses 0.2.0 added (none from a
/// 0.1.0 plugin), and the node groups 0.3.0 added.
#[derive(Debug, Clone)]
pub struct Translated {
    pub response: TranslateResponse,
    pub statuses: Vec<DocumentStatus>,
    /// The node groups each of `response.resources` is for, in their order (contract 0.3.0):
    /// empty when no resource names any (every resource is for every group).
    pub node_groups: Vec<Vec<String>>,
    /// On a changes call (contract 0.4.0), the resources gone since the last call: (type URL,
    /// name).
    pub removed: Vec<(String, String)>,
}

impl Translated {
    /// A response with no statuses and no node groups (contract 0.1.0).
    pub fn of(response: TranslateResponse) -> Self {
        Translated { response, statuses: Vec::new(), node_groups: Vec::new(), removed: Vec::new() }
    }

    /// The node groups resource `i` is for; empty: every group.
    pub fn groups_of(&self, i: usize) -> &[String] {
        self.node_groups.get(i).map_or(&[], Vec::as_slice)
    }
}

/// A loaded plugin: compiled, linked, described. Calls are independent: each gets a fresh
/// store, so nothing leaks from one call to the next and swapping plugins is safe.
pub struct Plugin {
    name: String,
    digest: String,
    info: PluginInfo,
    code: Code,
    imports: Vec<String>,
    /// Advances the epoch (deadlines) while the plugin runs, even if its runtime is gone.
    ticker: Arc<Ticker>,
    engine: Engine,
    limits: Limits,
    fuel_enabled: bool,
    /// How much of its own text is kept.
    text: crate::TextLimits,
    /// It takes changes calls in an instance the host keeps (contract 0.4.0, design 020).
    incremental: bool,
    /// What the host keeps of it between calls when it does, per node group it is called for
    /// (one, `""`, for a plugin called once per generation: every 0.3.0 and later translate
    /// plugin unless a group holds documents of its own).
    kept: std::sync::Mutex<crate::incremental::States>,
    /// When it gets a full call to check its output (shared with the plugin's checkers).
    full_every: Arc<crate::incremental::FullChecks>,
    /// Told when a check in the background found its output must be replaced.
    wake: Wake,
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
    /// Whether it takes changes calls in an instance the host keeps (contract 0.4.0).
    pub fn incremental(&self) -> bool {
        self.incremental
    }
    /// Whether it is a component or a core-ABI module.
    pub fn abi(&self) -> Abi {
        match self.code {
            Code::Component(_) | Code::Component2(_) | Code::Component3(_) | Code::Component4(_) => Abi::Component,
            Code::Core(_) => Abi::CoreModule,
        }
    }
    /// The version of the contract it speaks.
    pub fn contract(&self) -> &'static str {
        match self.code {
            Code::Component2(_) => "0.2.0",
            Code::Component3(_) => "0.3.0",
            Code::Component4(_) => "0.4.0",
            Code::Component(_) | Code::Core(_) => "0.1.0",
        }
    }
    /// What it imports (`xdst:plugin/log@0.1.0`, `wasi:cli/environment@0.2.6`, `xdst.log`).
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// Translates under the plugin's limits.
    pub fn translate(&self, request: &TranslateRequest) -> Result<TranslateResponse, PluginError> {
        self.translate_full(request).map(|t| t.response)
    }

    /// For an incremental plugin (contract 0.4.0), what changed since the documents the caller
    /// last gave it ([`crate::incremental::State::translate_delta`]); none for any other plugin.
    pub fn translate_delta(
        &self,
        call: &crate::incremental::DeltaCall<'_>,
    ) -> Option<Result<crate::incremental::Delta, PluginError>> {
        if !self.incremental {
            return None;
        }
        let mut states = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let result =
            states.of(call.node_group).translate_delta(&self.name, &self.full_every, call, |kept, r, removed| {
                self.translate_kept(kept, r, removed)
            });
        drop(states);
        Some(result.map(|mut delta| {
            if let Some(check) = delta.check.take() {
                self.check_in_background(check);
            }
            delta
        }))
    }

    /// Whether a periodic check found that the output kept for `node_group` must be replaced:
    /// the pipeline then calls, even with nothing changed ([`crate::incremental::State::correction_due`]).
    pub fn correction_due(&self, node_group: &str) -> bool {
        self.incremental
            && self
                .kept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(node_group)
                .is_some_and(crate::incremental::State::correction_due)
    }

    /// Runs a periodic check ([`crate::incremental::Check`]) on a thread of its own, in a fresh
    /// instance of a copy of this plugin (the same compiled code, limits and engine), so that
    /// the generation that made it due publishes without waiting; when it finds the output must
    /// be replaced, [`RuntimeConfig::wake`] is told, and the next call is a full one.
    fn check_in_background(&self, check: crate::incremental::Check) {
        let outcome = check.outcome();
        let Code::Component4(pre) = &self.code else { return };
        let checker = Plugin {
            name: self.name.clone(),
            digest: self.digest.clone(),
            info: self.info.clone(),
            code: Code::Component4(pre.clone()),
            imports: self.imports.clone(),
            ticker: self.ticker.clone(),
            engine: self.engine.clone(),
            limits: self.limits,
            fuel_enabled: self.fuel_enabled,
            text: self.text,
            incremental: true,
            kept: Default::default(),
            full_every: self.full_every.clone(),
            wake: Wake::default(),
        };
        let wake = self.wake.clone();
        let spawned = std::thread::Builder::new().name("xdst-full-check".into()).spawn(move || {
            if check.run(|kept, r, removed| checker.translate_kept(kept, r, removed))
                && let Some(wake) = &wake.0
            {
                wake();
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(plugin = %self.name, error = %e, "cannot start the periodic full check: the next call is full");
            *outcome.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(true);
        }
    }

    /// Translates under the plugin's limits, keeping the statuses a 0.2.0 plugin returns. An
    /// incremental plugin (0.4.0) is sent only what changed since its last call, in the instance
    /// kept from it ([`crate::incremental`]); what comes back is the whole output all the same.
    pub fn translate_full(&self, request: &TranslateRequest) -> Result<Translated, PluginError> {
        if self.incremental {
            let mut states = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            return states.of(&request.node_group).translate(
                &self.name,
                &self.full_every,
                request,
                |kept, r, removed| self.translate_kept(kept, r, removed),
            );
        }
        let cap = self.limits.output_bytes;
        let version = self.contract();
        let result = self.call(
            |instance, store| match version {
                "0.2.0" => translate_bounded::<_, lift::TranslateResponse2>(instance, store, request, cap),
                "0.3.0" => {
                    translate_bounded::<_, lift::TranslateResponse3>(instance, store, &lift::request_v3(request), cap)
                }
                "0.4.0" => translate_bounded::<_, lift::TranslateResponse4>(
                    instance,
                    store,
                    &lift::request_v4(request, None),
                    cap,
                ),
                _ => translate_bounded::<_, lift::TranslateResponse>(instance, store, request, cap),
            },
            |c, store| c.translate(store, request, cap).map(|r| r.map(Translated::of)),
        )?;
        let mut translated = result
            .map_err(|e| self.error(Failure::Reported { message: e.message, document: e.document, field: e.field }))?;
        let bytes = output_size(&translated);
        if bytes > self.limits.output_bytes {
            return Err(self.error(Failure::OutputTooLarge { bytes, limit_bytes: self.limits.output_bytes }));
        }
        crate::error::bound_diagnostics(&mut translated.response.diagnostics, self.text);
        Ok(translated)
    }

    /// A failure of this plugin, its text bounded: whatever the plugin said goes into logs,
    /// status pages and API answers.
    fn error(&self, failure: Failure) -> PluginError {
        match failure {
            Failure::OutputTooLarge { .. } => xdst_core::limits::Limit::PluginOutput.hit(),
            Failure::Memory { .. } => xdst_core::limits::Limit::PluginMemory.hit(),
            _ => {}
        }
        PluginError { plugin: self.name.clone(), digest: self.digest.clone(), failure: failure.clipped(self.text) }
    }

    /// A fresh store for a call, its limits set.
    fn fresh_store(&self) -> Result<Store<CallState>, PluginError> {
        let mut store = Store::new(
            &self.engine,
            CallState {
                plugin: self.name.clone(),
                memory_cap: self.limits.memory_bytes,
                memory_total: 0,
                memory_hit: false,
                logs: 0,
                wasi: None,
                wasi_p1: None,
                capabilities: self.limits.capabilities,
                deadline: std::time::Instant::now() + self.limits.deadline,
                unsupported: Default::default(),
                text: self.text,
            },
        );
        store.limiter(|s| s as &mut dyn ResourceLimiter);
        store.epoch_deadline_trap();
        self.limit_call(&mut store)?;
        Ok(store)
    }

    /// Sets one call's limits on `store`: its deadline and fuel, and its log lines counted
    /// afresh (a kept instance's memory stays counted: its bound is the instance's).
    fn limit_call(&self, store: &mut Store<CallState>) -> Result<(), PluginError> {
        let state = store.data_mut();
        state.deadline = std::time::Instant::now() + self.limits.deadline;
        state.logs = 0;
        state.memory_hit = false;
        let ticks = self.limits.deadline.as_micros().div_ceil(TICK.as_micros()).max(1) as u64;
        store.set_epoch_deadline(ticks + 1);
        if self.fuel_enabled {
            let fuel = self.limits.fuel.unwrap_or(u64::MAX);
            store.set_fuel(fuel).map_err(|e| self.error(Failure::Host(e.to_string())))?;
        }
        Ok(())
    }

    /// Translates with the instance kept in `kept` (contract 0.4.0, design 020): a changes call
    /// (`removed` given: the ids gone since its last call; `request` holds the documents new or
    /// changed) in the kept instance, or a full call (`removed` none) in a fresh instance, which
    /// is kept afterwards. Any failure drops the instance: the next call must be a full one.
    pub fn translate_kept(
        &self,
        kept: &mut Option<Kept>,
        request: &TranslateRequest,
        removed: Option<Vec<String>>,
    ) -> Result<Translated, PluginError> {
        let _running = self.ticker.running();
        let previous = kept.take();
        let Code::Component4(pre) = &self.code else {
            return Err(self.error(Failure::Host("a kept instance is for contract 0.4.0 plugins only".into())));
        };
        let (mut store, instance) = match (removed.is_some(), previous) {
            (true, Some(k)) if k.digest == self.digest => (k.store, k.instance),
            (true, _) => return Err(self.error(Failure::Host("a changes call with no kept instance".into()))),
            (false, _) => {
                let mut store = self.fresh_store()?;
                let instance = pre.instance_pre().instantiate(&mut store).map_err(|e| self.classify(e, &store))?;
                (store, instance)
            }
        };
        self.limit_call(&mut store)?;
        let cap = self.limits.output_bytes;
        let request = lift::request_v4(request, removed);
        let outcome = translate_bounded::<_, lift::TranslateResponse4>(&instance, &mut store, &request, cap);
        store.data_mut().flush_stdio();
        let result = outcome.map_err(|e| match e {
            CallError::Wasm(e) => self.classify(e, &store),
            CallError::Malformed(m) => self.error(Failure::Malformed(m)),
            CallError::TooLarge(bytes) => self.error(Failure::OutputTooLarge { bytes, limit_bytes: cap }),
        })?;
        let mut translated = result
            .map_err(|e| self.error(Failure::Reported { message: e.message, document: e.document, field: e.field }))?;
        let bytes = output_size(&translated);
        if bytes > cap {
            return Err(self.error(Failure::OutputTooLarge { bytes, limit_bytes: cap }));
        }
        crate::error::bound_diagnostics(&mut translated.response.diagnostics, self.text);
        *kept = Some(Kept { store, instance, digest: self.digest.clone() });
        Ok(translated)
    }

    /// Runs one call in a fresh store: `component` or `core`, by the plugin's kind.
    fn call<T>(
        &self,
        component: impl FnOnce(&wasmtime::component::Instance, &mut Store<CallState>) -> Result<T, CallError>,
        core: impl FnOnce(&CorePre, &mut Store<CallState>) -> Result<T, CallError>,
    ) -> Result<T, PluginError> {
        let _running = self.ticker.running();
        let mut store = self.fresh_store()?;
        let instance_pre = match &self.code {
            Code::Component(pre) => Ok(pre.instance_pre()),
            Code::Component2(pre) => Ok(pre.instance_pre()),
            Code::Component3(pre) => Ok(pre.instance_pre()),
            Code::Component4(pre) => Ok(pre.instance_pre()),
            Code::Core(pre) => Err(pre),
        };
        let outcome = match instance_pre {
            Ok(pre) => pre
                .instantiate(&mut store)
                .map_err(CallError::Wasm)
                .and_then(|instance| component(&instance, &mut store)),
            Err(pre) => core(pre, &mut store),
        };
        store.data_mut().flush_stdio();
        outcome.map_err(|e| match e {
            CallError::Wasm(e) => self.classify(e, &store),
            CallError::Malformed(m) => self.error(Failure::Malformed(m)),
            CallError::TooLarge(bytes) => {
                self.error(Failure::OutputTooLarge { bytes, limit_bytes: self.limits.output_bytes })
            }
        })
    }

    fn classify(&self, e: wasmtime::Error, store: &Store<CallState>) -> PluginError {
        let failure = match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => Failure::Deadline { limit_ms: self.limits.deadline.as_millis() as u64 },
            Some(Trap::OutOfFuel) => Failure::Fuel { limit: self.limits.fuel.unwrap_or(0) },
            _ if store.data().memory_hit => Failure::Memory { limit_bytes: self.limits.memory_bytes },
            Some(trap) => Failure::Trap(format!("{trap}: {e:#}")),
            None => Failure::Trap(format!("{e:#}")),
        };
        self.error(failure)
    }
}

/// Calls a component's `translate` with `request` (`Q`: the request of the plugin's contract
/// version), copying its result (`R`: the response of that version) under the output cap `cap`
/// (see [`crate::lift`]): aliased strings cannot make the copy larger than the cap.
fn translate_bounded<Q, R>(
    instance: &wasmtime::component::Instance,
    store: &mut Store<CallState>,
    request: &Q,
    cap: usize,
) -> Result<Result<Translated, wit::PluginError>, CallError>
where
    Q: wasmtime::component::ComponentType + wasmtime::component::Lower + Sync,
    R: wasmtime::component::ComponentType + wasmtime::component::Lift + Into<Translated> + Send + Sync + 'static,
{
    type Returns<R> = (Result<R, lift::PluginError>,);
    let f = instance.get_typed_func::<(&Q,), Returns<R>>(&mut *store, "translate").map_err(CallError::Wasm)?;
    let (result,) = lift::bounded(cap, || f.call(&mut *store, (request,))).map_err(|e| match e
        .downcast_ref::<lift::OutputCapExceeded>()
    {
        Some(over) => CallError::TooLarge(over.bytes),
        None => CallError::Wasm(e),
    })?;
    Ok(result.map(Into::into).map_err(Into::into))
}

/// Bytes of strings and byte lists in a response.
fn output_size(t: &Translated) -> usize {
    let r = &t.response;
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
    let diag: usize = r.diagnostics.iter().map(|d| d.message.len() + opt(&d.document) + opt(&d.field)).sum();
    let statuses: usize = t.statuses.iter().map(|s| s.document.len() + s.status.len()).sum();
    let groups: usize = t.node_groups.iter().flatten().map(String::len).sum();
    res + diag + statuses + groups
}

/// The state of one call.
pub struct CallState {
    plugin: String,
    memory_cap: usize,
    /// Bytes of linear memory the call's memories hold together.
    memory_total: usize,
    memory_hit: bool,
    logs: usize,
    /// The empty WASI, made on first use (only plugins that import WASI pay for it).
    wasi: Option<Wasi>,
    /// The same for a core module importing `wasi_snapshot_preview1` (Go's wasip1 runtime).
    wasi_p1: Option<WasiP1>,
    capabilities: Capabilities,
    /// When the call must end: host waits end by then too (`waits`).
    deadline: std::time::Instant,
    /// The WASI functions xdst does not provide that the plugin called (`waits`).
    unsupported: waits::Unsupported,
    /// How much of the plugin's own text is kept.
    text: crate::TextLimits,
}

struct Wasi {
    ctx: wasmtime_wasi::WasiCtx,
    table: wasmtime::component::ResourceTable,
    stdout: CappedPipe,
    stderr: CappedPipe,
}

struct WasiP1 {
    ctx: wasmtime_wasi::p1::WasiP1Ctx,
    stdout: CappedPipe,
    stderr: CappedPipe,
}

/// The WASI a plugin gets: nothing granted (no preopened directories, environment, arguments
/// or network: the builder's defaults), stdin empty, stdout and stderr to capped pipes the
/// host logs; a stopped clock and fixed random bytes unless `capabilities` grant the real ones.
fn empty_wasi(capabilities: &Capabilities, cap: usize) -> (wasmtime_wasi::WasiCtxBuilder, CappedPipe, CappedPipe) {
    let stdout = CappedPipe::new(cap);
    let stderr = CappedPipe::new(cap);
    let mut builder = wasmtime_wasi::WasiCtxBuilder::new();
    builder.stdout(stdout.clone()).stderr(stderr.clone());
    if !capabilities.clocks {
        builder.wall_clock(StoppedClock).monotonic_clock(StoppedClock);
    }
    if !capabilities.random {
        let bytes: Vec<u8> = (0..=255u8).collect();
        builder
            .secure_random(wasmtime_wasi::Deterministic::new(bytes.clone()))
            .insecure_random(wasmtime_wasi::Deterministic::new(bytes))
            .insecure_random_seed(0);
    }
    (builder, stdout, stderr)
}

impl wasmtime_wasi::WasiView for CallState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        let wasi = self.wasi.get_or_insert_with(|| {
            let (mut builder, stdout, stderr) = empty_wasi(&self.capabilities, self.text.stdio_bytes);
            Wasi { ctx: builder.build(), table: Default::default(), stdout, stderr }
        });
        wasmtime_wasi::WasiCtxView { ctx: &mut wasi.ctx, table: &mut wasi.table }
    }
}

impl CallState {
    /// A state for looking at a linker, not for a call.
    pub(crate) fn bare() -> CallState {
        CallState {
            plugin: String::new(),
            memory_cap: 0,
            memory_total: 0,
            memory_hit: false,
            logs: 0,
            wasi: None,
            wasi_p1: None,
            capabilities: Capabilities::default(),
            deadline: std::time::Instant::now(),
            unsupported: Default::default(),
            text: Default::default(),
        }
    }

    /// The empty WASI of a core module (`wasi_snapshot_preview1`), made on first use.
    pub(crate) fn wasi_p1(&mut self) -> &mut wasmtime_wasi::p1::WasiP1Ctx {
        let (capabilities, text) = (self.capabilities, self.text);
        &mut self
            .wasi_p1
            .get_or_insert_with(|| {
                let (mut builder, stdout, stderr) = empty_wasi(&capabilities, text.stdio_bytes);
                WasiP1 { ctx: builder.build_p1(), stdout, stderr }
            })
            .ctx
    }
}

impl CallState {
    /// Writes a line to the host's log, tagged with the plugin, within the per-call limits.
    pub(crate) fn write_log(&mut self, level: wit::xdst::plugin::log::Level, message: String) {
        use wit::xdst::plugin::log::Level;
        self.logs += 1;
        let limits = self.text;
        if self.logs > limits.log_lines {
            if self.logs == limits.log_lines + 1 {
                xdst_core::limits::Limit::PluginLogLines.hit();
                warn!(plugin = %self.plugin, "plugin log limit reached; further lines dropped");
            }
            DROPPED_LOG_LINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let mut message = message;
        let max = limits.message_bytes.max(crate::text_limits::MIN_MESSAGE_BYTES);
        if message.len() > max {
            let mut cut = max;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        match level {
            Level::Debug => debug!(plugin = %self.plugin, "{message}"),
            Level::Info => info!(plugin = %self.plugin, "{message}"),
            Level::Warn => warn!(plugin = %self.plugin, "{message}"),
            Level::Error => tracing::error!(plugin = %self.plugin, "{message}"),
        }
    }

    /// Logs what the plugin wrote to stdout (info) and stderr (warn), line by line.
    fn flush_stdio(&mut self) {
        let mut pipes = Vec::new();
        if let Some(w) = self.wasi.take() {
            pipes.push((w.stdout, w.stderr));
        }
        if let Some(w) = self.wasi_p1.take() {
            pipes.push((w.stdout, w.stderr));
        }
        for (stdout, stderr) in &pipes {
            self.flush_pipes(stdout, stderr);
        }
    }

    /// One WASI's stdout and stderr, as [`flush_stdio`](Self::flush_stdio) says.
    fn flush_pipes(&mut self, stdout: &CappedPipe, stderr: &CappedPipe) {
        use wit::xdst::plugin::log::Level;
        for (pipe, level, name) in [(stdout, Level::Info, "stdout"), (stderr, Level::Warn, "stderr")] {
            let (bytes, dropped) = pipe.contents();
            for line in String::from_utf8_lossy(&bytes).lines().filter(|l| !l.trim().is_empty()) {
                self.write_log(level, line.to_owned());
            }
            if dropped > 0 {
                xdst_core::limits::Limit::PluginStdio.hit();
                warn!(plugin = %self.plugin, dropped_bytes = dropped, "plugin wrote more than {} bytes to {name} in one call; the rest was dropped", self.text.stdio_bytes);
            }
        }
    }
}

impl ResourceLimiter for CallState {
    /// The cap holds for all of a call's memories together (a component may have several).
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let total = self.memory_total.saturating_sub(current).saturating_add(desired);
        if total > self.memory_cap {
            self.memory_hit = true;
            return Ok(false);
        }
        self.memory_total = total;
        Ok(true)
    }
    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
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
        self.write_log(level, message);
    }
}

/// A later version's `log`, written as 0.1.0's: the levels are the same in every version.
macro_rules! log_host {
    ($($log:ident)::+) => {
        impl $($log)::+::Host for CallState {
            fn log(&mut self, level: $($log)::+::Level, message: String) {
                use $($log)::+::Level as Later;
                use wit::xdst::plugin::log::Level as L;
                let level = match level {
                    Later::Debug => L::Debug,
                    Later::Info => L::Info,
                    Later::Warn => L::Warn,
                    Later::Error => L::Error,
                };
                self.write_log(level, message);
            }
        }
    };
}
log_host!(wit2::xdst::plugin::log);
log_host!(wit3::xdst::plugin::log);
log_host!(wit4::xdst::plugin::log);

/// The versions of the contract this host speaks, for people: `0.1.0, 0.2.0 and 0.3.0`.
fn spoken() -> String {
    match CONTRACTS.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => CONTRACTS.join(""),
    }
}

/// Every import must be one we provide: anything else was not granted. A plugin built
/// against another version of the contract is told so first.
fn check_imports<'a>(names: impl Iterator<Item = &'a str> + Clone) -> Result<(), Failure> {
    for name in names.clone() {
        if let Some(v) = name.strip_prefix("xdst:plugin/").and_then(|n| n.split_once('@')).map(|(_, v)| v)
            && !CONTRACTS.contains(&v)
        {
            return Err(Failure::Incompatible(format!(
                "speaks version {v} of the xdst:plugin contract ({name}); this xdst speaks {} (see proto/README.md)",
                spoken()
            )));
        }
    }
    for name in names {
        if !GRANTED.contains(&name) && !EMPTY_WASI.iter().any(|p| name.starts_with(p)) {
            return Err(Failure::Incompatible(format!(
                "imports {name}, which is not granted (a plugin may import only {}, and WASI's {} interfaces, which are empty)",
                GRANTED.join(" and "),
                EMPTY_WASI.map(|p| p.trim_end_matches('/')).join(", ")
            )));
        }
    }
    Ok(())
}

/// The names a component imports at its top level (not those of components nested in it),
/// read without compiling; empty if the bytes do not parse (the compile then says why).
fn top_level_imports(bytes: &[u8]) -> Vec<String> {
    let mut depth = 0usize;
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload {
            Ok(wasmparser::Payload::Version { .. }) => depth += 1,
            Ok(wasmparser::Payload::End(_)) => depth = depth.saturating_sub(1),
            Ok(wasmparser::Payload::ComponentImportSection(section)) if depth == 1 => {
                // Interfaces and functions; type imports (the world's `use`d types) are not
                // capabilities.
                out.extend(
                    section
                        .into_iter()
                        .flatten()
                        .filter(|i| {
                            matches!(
                                i.ty,
                                wasmparser::ComponentTypeRef::Instance(_) | wasmparser::ComponentTypeRef::Func(_)
                            )
                        })
                        .map(|i| i.name.name.to_owned()),
                );
            }
            Ok(_) => {}
            Err(_) => return Vec::new(),
        }
    }
    out
}

fn is_core_module(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0]
}

/// Makes a core module that embeds the WIT world (what `wit-bindgen` toolchains produce) into
/// a component file. `Ok(None)` for anything else: a component, or a core-ABI module.
pub fn componentize_embedded(bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    if !is_core_module(bytes) || !matches!(core_abi::shape(bytes)?, Shape::NoMarker) {
        return Ok(None);
    }
    wit_component::ComponentEncoder::default().module(bytes).and_then(|e| e.validate(true).encode()).map(Some).map_err(
        |e| {
            format!(
                "a core module that neither exports {} nor embeds the xdst:plugin WIT world: {e:#}",
                core_abi::MARKER
            )
        },
    )
}

/// `sha256:<hex>` of a plugin file.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

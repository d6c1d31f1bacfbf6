//! The plugin host: loads WebAssembly plugins and calls them in a sandbox. A plugin is a
//! component of the `xdst:plugin@0.1.0`, `@0.2.0`, `@0.3.0` or `@0.4.0` world (`proto/wit`), or a core
//! module speaking the 0.1.0 contract as JSON through memory (`proto/core-abi`); all become one
//! [`Plugin`], whose calls use the 0.1.0 types ([`wit`]) plus what later versions added (the
//! statuses of 0.2.0, the node groups of 0.3.0: [`Translated`]).
//!
//! - No ambient authority: a plugin gets `log`; a component may import WASI (preview 2) and a
//!   core module WASI preview 1 (`wasi_snapshot_preview1`, which Go's, Zig's and C's WASI
//!   targets import), both linked to an empty WASI (no files, environment, arguments or
//!   network; stdout and stderr go to the log; host waits end at the call's deadline). Any
//!   other import is refused at load, naming it.
//! - Every call runs in a fresh store from a pre-instantiated component, under a wall-clock
//!   deadline (epoch interruption), a memory cap and an output size cap; fuel is optional.
//! - Components are compiled once per SHA-256 and the compiled artifact is cached on disk.
//! - Failures keep the plugin's own errors ([`Failure::Reported`]) apart from traps and
//!   limits, and every one names the plugin, its digest and whose fault it is.
//!
//! It does not know about Envoy: validating what a plugin returns is the pipeline's job.
//!
//! ```no_run
//! use xdst_plugin::{Limits, Runtime};
//! let runtime = Runtime::new(Default::default())?;
//! let plugin = runtime.load("gateway.wasm", &std::fs::read("gateway.wasm")?, Limits::default())?;
//! println!("{} {} translates {:?}", plugin.info().name, plugin.info().version, plugin.info().kinds);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod core_abi;
pub mod dir;
pub mod error;
pub mod incremental;
mod lift;
pub mod names;
pub mod pipeline;
mod runtime;
pub mod stdio;
pub mod text_limits;

pub use error::{Failure, Fault, PluginError, clip};
pub use runtime::{
    Abi, CONTRACT, CONTRACTS, Capabilities, DROPPED_LOG_LINES, DocumentStatus, Kept, Limits, Plugin, Runtime,
    RuntimeConfig, Translated, Wake, componentize_embedded, digest,
};
pub use text_limits::TextLimits;

/// The types of the WIT contract, as generated for the host.
pub mod wit {
    wasmtime::component::bindgen!({
        path: "../../proto/wit/xdst-plugin-0.1.0",
        world: "plugin",
    });
    pub use self::xdst::plugin::types::*;
}

/// The types of contract 0.2.0, for components built against it. The host converts them to
/// [`wit`]'s, which 0.2.0 extends only with statuses.
pub mod wit2 {
    wasmtime::component::bindgen!({
        path: "../../proto/wit/xdst-plugin-0.2.0",
        world: "plugin",
    });
}

/// The types of contract 0.3.0, for components built against it: 0.2.0's, and the node groups
/// of each resource.
pub mod wit3 {
    wasmtime::component::bindgen!({
        path: "../../proto/wit/xdst-plugin-0.3.0",
        world: "plugin",
    });
}

/// The types of contract 0.4.0, for components built against it: 0.3.0's, and incremental
/// translation (design 020).
pub mod wit4 {
    wasmtime::component::bindgen!({
        path: "../../proto/wit/xdst-plugin-0.4.0",
        world: "plugin",
    });
}

//! The Rust SDK for xdst plugins: the `xdst:plugin@0.4.0` contract (`proto/wit`) as Rust
//! types (a plugin may return each document's `statuses`, and say which node groups each
//! resource is for with [`XdsResource::for_node_groups`]; the host loads 0.1.0 and 0.2.0
//! plugins too), [`export_translator!`] to export an implementation, typed builders for the Envoy
//! resources a translator usually emits ([`build`]), and helpers that read an intent
//! document's `spec` into your own serde types with errors that name the document and field
//! ([`IntentDocument::spec`]).
//!
//! What it does not do: validate Envoy semantics beyond what the builders' types express (the
//! host decodes every returned resource against Envoy's descriptors and checks references
//! between them), or produce proto3 JSON (resources are emitted as protobuf bytes, which the
//! host re-encodes canonically).
//!
//! ```no_run
//! use std::time::Duration;
//! use serde::Deserialize;
//! use xdst_guest::{build, resource, Granularity, Phase, PluginError, PluginInfo};
//! use xdst_guest::{TranslateRequest, TranslateResponse, Translator};
//!
//! #[derive(Deserialize)]
//! #[serde(deny_unknown_fields, rename_all = "camelCase")]
//! struct Backend {
//!     address: String,
//!     port: u16,
//! }
//!
//! struct Backends;
//!
//! impl Translator for Backends {
//!     fn describe() -> PluginInfo {
//!         PluginInfo {
//!             name: "backends".into(),
//!             version: env!("CARGO_PKG_VERSION").into(),
//!             kinds: vec!["Backend".into()],
//!             phase: Phase::Translate,
//!             granularity: Granularity::PerDocument,
//!             incremental: false,
//!         }
//!     }
//!
//!     fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
//!         let mut resources = Vec::new();
//!         for doc in &request.documents {
//!             // The host shows errors as `Backend/web field spec.port: ... (in web.yaml#1)`.
//!             let spec: Backend = doc.spec()?;
//!             if spec.port == 0 {
//!                 return Err(doc.error("spec.port", "must be between 1 and 65535"));
//!             }
//!             let cluster = build::EdsCluster::new(&doc.name)
//!                 .connect_timeout(Duration::from_secs(1))
//!                 .build();
//!             let endpoints = build::LoadAssignment::new(&doc.name)
//!                 .endpoint(build::Endpoint::new(&spec.address, spec.port))
//!                 .build();
//!             let id = doc.id();
//!             resources.push(resource(&cluster, Some(id.clone())));
//!             resources.push(resource(&endpoints, Some(id)));
//!         }
//!         Ok(TranslateResponse { removed: vec![], resources, diagnostics: vec![], statuses: vec![] })
//!     }
//! }
//!
//! #[cfg(target_arch = "wasm32")]
//! xdst_guest::export_translator!(Backends);
//! ```
//!
//! Build with `cargo build --release --target wasm32-unknown-unknown -p <crate>`; the host turns
//! the core module into a component itself. The same crate also builds natively (as an `rlib`)
//! for unit tests and benchmarks: call your `Translator::translate` directly. `plugins/reference`
//! is a complete translator written with this SDK.

pub mod build;
mod intent;
mod resource;
pub mod world;

pub use resource::{MARK_KEY, Resource, made_from, pack, resource, resource_named};

/// Envoy's API as prost messages (the `xds-api` crate): `envoy::envoy::config::cluster::v3::Cluster`,
/// `envoy::google::protobuf::Any`, ... Encode them with [`prost::Message`].
pub use xds_api::pb as envoy;

/// The prost version [`envoy`]'s messages implement (`prost::Message::decode`, `encode_to_vec`).
pub use prost;

#[doc(hidden)]
#[allow(clippy::too_many_arguments, reason = "generated bindings")]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../proto/wit/xdst-plugin-0.4.0",
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "xdst_guest::bindings",
        additional_derives: [PartialEq],
    });
}

pub use bindings::Guest as Translator;
pub use bindings::xdst::plugin::log::Level;
pub use bindings::xdst::plugin::types::{
    Body, Changes, Diagnostic, DocumentStatus, Granularity, IntentDocument, Phase, PluginError, PluginInfo,
    ResourceKey, Severity, TranslateRequest, TranslateResponse, XdsResource,
};

/// Writes to the host's log, tagged with the plugin's name (rate- and size-limited there).
/// Compiled natively (tests, benchmarks), warnings and errors go to stderr and the rest is
/// dropped.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    bindings::xdst::plugin::log::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    if matches!(level, Level::Warn | Level::Error) {
        eprintln!("{level:?}: {message}");
    }
}

/// Exports a type implementing [`Translator`] as the plugin's `describe` and `translate`.
///
/// A crate that is also linked natively (an `rlib` for tests or benchmarks) can put this behind
/// `#[cfg(target_arch = "wasm32")]` so the native library exports no unmangled symbols.
#[macro_export]
macro_rules! export_translator {
    ($t:ident) => {
        $crate::bindings::__export_plugin!($t with_types_in $crate::bindings);
    };
}

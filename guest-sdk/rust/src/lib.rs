//! The Rust SDK for xdst plugins: the `xdst:plugin@0.1.0` contract (`proto/wit`) as Rust
//! types, and [`export_translator!`] to export an implementation.
//!
//! ```ignore
//! use xdst_guest::{Translator, PluginInfo, Phase, TranslateRequest, TranslateResponse, PluginError};
//!
//! struct Gateway;
//! impl Translator for Gateway {
//!     fn describe() -> PluginInfo { /* name, version, kinds, phase */ }
//!     fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> { /* ... */ }
//! }
//! xdst_guest::export_translator!(Gateway);
//! ```
//!
//! Build with `cargo build --target wasm32-unknown-unknown --release` and turn the module into
//! a component (the host's tests show how, with the `wit-component` crate). Typed builders for
//! Envoy resources come next (issue 3).

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../proto/wit/xdst-plugin-0.1.0",
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "xdst_guest::bindings",
    });
}

pub use bindings::Guest as Translator;
pub use bindings::xdst::plugin::log::{Level, log};
pub use bindings::xdst::plugin::types::{
    Body, Diagnostic, IntentDocument, Phase, PluginError, PluginInfo, Severity, TranslateRequest, TranslateResponse,
    XdsResource,
};

/// Exports a type implementing [`Translator`] as the plugin's `describe` and `translate`.
#[macro_export]
macro_rules! export_translator {
    ($t:ident) => {
        $crate::bindings::__export_plugin!($t with_types_in $crate::bindings);
    };
}

//! The reference translator: three intent kinds a platform team can adopt as they are.
//!
//! | kind | produces (each named `metadata.name`) |
//! |---|---|
//! | `Service` | an EDS `Cluster` and its `ClusterLoadAssignment` |
//! | `HttpGateway` | a `Listener` (HTTP, RDS over ADS) and its `RouteConfiguration` |
//! | `GrpcService` | an `api_listener` `Listener` for `xds:///<name>` and its `RouteConfiguration` |
//!
//! Each document translates on its own (`per-document`): routes name Services by name, and the
//! host's consistency check, not this plugin, refuses a route to a Service that does not exist.
//! Output is protobuf, in document order, and deterministic. Every input error names the
//! document (`Kind/name`), the field (`spec.hosts[0].routes[1].backends`) and its origin.
//! `README.md` documents the schema.
//!
//! What it does not do: TLS (listener or upstream), rate limits, CORS, redirects, outlier
//! detection, or anything across documents (such as checking that a backend Service exists).
//!
//! Built for `wasm32-unknown-unknown` it is the plugin; built natively it is a library whose
//! [`Reference`] can be called directly (`<Reference as Translator>::translate`).

mod check;
mod duration;
mod gateway;
mod grpc;
mod routing;
mod schema;
mod service;

use xdst_guest::{Granularity, Phase, PluginError, PluginInfo, TranslateRequest, TranslateResponse, Translator};

/// The intent kinds this plugin translates.
pub const KINDS: [&str; 3] = ["Service", "HttpGateway", "GrpcService"];

/// The translator.
pub struct Reference;

impl Translator for Reference {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "reference".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kinds: KINDS.iter().map(|&k| k.to_owned()).collect(),
            phase: Phase::Translate,
            granularity: Granularity::PerDocument,
            incremental: false,
        }
    }

    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        check_config(&request.config)?;
        let mut out = TranslateResponse {
            removed: vec![],
            resources: Vec::with_capacity(request.documents.len() * 2),
            diagnostics: Vec::new(),
            statuses: Vec::new(),
        };
        for doc in &request.documents {
            match doc.kind.as_str() {
                "Service" => service::translate(doc, &mut out)?,
                "HttpGateway" => gateway::translate(doc, &mut out)?,
                "GrpcService" => grpc::translate(doc, &mut out)?,
                other => {
                    return Err(doc.error_here(format!(
                        "the reference plugin does not translate kind {other:?} (it translates {})",
                        KINDS.join(", ")
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// The plugin takes no configuration yet: `null` or `{}`.
fn check_config(config: &str) -> Result<(), PluginError> {
    let config = config.trim();
    if config.is_empty() || config == "null" {
        return Ok(());
    }
    serde_json::from_str::<schema::Config>(config)
        .map(drop)
        .map_err(|e| PluginError::new(format!("plugin configuration: {e} (the reference plugin takes none)")))
}

#[cfg(target_arch = "wasm32")]
xdst_guest::export_translator!(Reference);

#[cfg(test)]
mod tests;

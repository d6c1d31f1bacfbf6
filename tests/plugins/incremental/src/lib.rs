//! A whole-set `translate` plugin of contract 0.4.0 that says it is `incremental` (design 020),
//! written against the WIT directly. Each `Counted` document (`spec.port`) becomes a STATIC
//! cluster of its name on 127.0.0.1 at that port. It keeps the documents it was given: a
//! changes call translates only the documents sent and removes the clusters of the ids
//! removed. Its one diagnostic says what the last call was (`full call: 3 documents`,
//! `changes call: 1 document(s), 1 removed`), so a test can see which calls the host made.
//!
//! With the settings `{"stale": true}` it forgets to remove anything on a changes call: a
//! cache gone stale, which the host's periodic full call must find and correct.

use std::cell::RefCell;
use std::collections::BTreeMap;

#[allow(clippy::too_many_arguments, reason = "generated bindings")]
mod bindings {
    wit_bindgen::generate!({
        path: "../../../proto/wit/xdst-plugin-0.4.0",
        world: "plugin",
    });
}
use bindings::{Guest, PluginError, PluginInfo, TranslateRequest, TranslateResponse, export};

use bindings::xdst::plugin::types::{
    Body, Diagnostic, DocumentStatus, Granularity, Phase, ResourceKey, Severity, XdsResource,
};

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

thread_local! {
    /// The documents this instance was given: id -> port.
    static KEPT: RefCell<BTreeMap<String, u64>> = const { RefCell::new(BTreeMap::new()) };
}

fn cluster(id: &str, port: u64) -> XdsResource {
    let name = id.trim_start_matches("Counted/").replace('/', "-");
    let json = serde_json::json!({
        "@type": CLUSTER,
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {"address":
            {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]},
    });
    XdsResource {
        type_url: CLUSTER.into(),
        name,
        body: Body::Json(json.to_string()),
        document: Some(id.into()),
        node_groups: vec![],
    }
}

fn error(message: String, document: Option<String>) -> PluginError {
    PluginError { message, document, field: None }
}

struct Incremental;

impl Guest for Incremental {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "incremental".into(),
            version: "0.1.0".into(),
            kinds: vec!["Counted".into()],
            phase: Phase::Translate,
            granularity: Granularity::WholeSet,
            incremental: true,
        }
    }

    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        let stale = serde_json::from_str::<serde_json::Value>(&request.config)
            .ok()
            .and_then(|c| c.get("stale").and_then(serde_json::Value::as_bool))
            .unwrap_or(false);
        let mut given = Vec::new();
        for d in &request.documents {
            let id = format!("{}/{}", d.kind, d.name);
            let doc: serde_json::Value =
                serde_json::from_str(&d.json).map_err(|e| error(e.to_string(), Some(id.clone())))?;
            let port = doc["spec"]["port"]
                .as_u64()
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| error("spec.port must be a port number".into(), Some(id.clone())))?;
            given.push((id, port));
        }
        KEPT.with_borrow_mut(|kept| {
            let mut removed = Vec::new();
            let what = match &request.changes {
                None => {
                    kept.clear();
                    format!("full call: {} documents", given.len())
                }
                Some(changes) => {
                    for id in &changes.removed {
                        if kept.remove(id).is_some() && !stale {
                            let name = cluster(id, 1).name;
                            removed.push(ResourceKey { type_url: CLUSTER.into(), name });
                        }
                    }
                    format!("changes call: {} document(s), {} removed", given.len(), changes.removed.len())
                }
            };
            let resources = given.iter().map(|(id, port)| cluster(id, *port)).collect();
            let statuses = given
                .iter()
                .map(|(id, port)| DocumentStatus { document: id.clone(), status: format!("{{\"port\":{port}}}") })
                .collect();
            kept.extend(given);
            Ok(TranslateResponse {
                resources,
                diagnostics: vec![Diagnostic { severity: Severity::Info, message: what, document: None, field: None }],
                statuses,
                removed,
            })
        })
    }
}

export!(Incremental with_types_in bindings);

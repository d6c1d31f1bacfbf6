//! {{name}}: translates `{{kind}}` intent documents into Envoy clusters, incrementally.
//!
//! A `{{kind}}` names one upstream address; each becomes a STATIC cluster of the same name:
//!
//! ```yaml
//! kind: {{kind}}
//! metadata: {name: web}
//! spec: {address: 10.0.0.1, port: 8080}
//! ```
//!
//! Contract 0.4.0, incremental (design 020 in the xdst repository): the plugin says
//! `incremental: true`, and xdst keeps this instance between calls. The first call, and any
//! call after a failure, a settings or plugin change, a restart or xdst's periodic check, is a
//! *full* call (`changes` is `None`: every document, and whatever was kept is stale). Every
//! other call is a *changes* call: `documents` holds only the documents new or changed since
//! this instance's last successful call, `changes.removed` the ids of those gone, and the
//! answer holds only the resources new or changed and the keys of those removed. A change to
//! one document of thousands then costs one document's work. xdst checks itself: every so often
//! it makes a full call in a fresh instance and compares; a difference is logged and counted
//! (`xdst_incremental_mismatches_total`) and the full result is served.
//!
//! What to keep: enough to answer for what changed. Here each resource comes from one
//! document, so the document ids and the names of their clusters are enough. A plugin whose
//! resources read several documents (a route that names a Service) keeps, besides, which
//! documents each resource reads, and on a changes call makes again every resource that a
//! changed or removed document reaches.

wit_bindgen::generate!({ path: "wit", world: "plugin" });

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::{Value, json};
use xdst::plugin::log::{Level, log};
use xdst::plugin::types::*;

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

thread_local! {
    /// What this instance keeps between calls: each document's cluster name, by document id.
    static KEPT: RefCell<BTreeMap<String, String>> = const { RefCell::new(BTreeMap::new()) };
}

struct Plugin;

impl Guest for Plugin {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kinds: vec!["{{kind}}".into()],
            phase: Phase::Translate,
            // Incremental plugins get whole-set calls: every document on a full call.
            granularity: Granularity::WholeSet,
            incremental: true,
        }
    }

    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        KEPT.with_borrow_mut(|kept| {
            let mut removed = Vec::new();
            match &request.changes {
                // A full call: every document is here; what was kept is stale.
                None => kept.clear(),
                // A changes call: these documents are gone, and so are their clusters.
                Some(changes) => {
                    for id in &changes.removed {
                        if let Some(name) = kept.remove(id) {
                            removed.push(ResourceKey { type_url: CLUSTER.into(), name });
                        }
                    }
                }
            }
            // New or changed documents (every document on a full call). An error fails the
            // call; xdst drops this instance with it, and its next call is a full one.
            let mut resources = Vec::new();
            for doc in &request.documents {
                let resource = cluster(doc)?;
                kept.insert(format!("{}/{}", doc.kind, doc.name), resource.name.clone());
                resources.push(resource);
            }
            let how = if request.changes.is_some() { "changes" } else { "full" };
            log(Level::Debug, &format!("{how} call: {} documents, {} removed", request.documents.len(), removed.len()));
            Ok(TranslateResponse { resources, diagnostics: vec![], statuses: vec![], removed })
        })
    }
}

/// One document to one cluster; a bad field is an error naming the document and the field.
fn cluster(doc: &IntentDocument) -> Result<XdsResource, PluginError> {
    let id = format!("{}/{}", doc.kind, doc.name);
    let error = |field: &str, message: &str| PluginError {
        message: message.into(),
        document: Some(id.clone()),
        field: Some(field.into()),
    };
    let value: Value = serde_json::from_str(&doc.json).map_err(|e| error("", &e.to_string()))?;
    let spec = &value["spec"];
    let address = spec["address"].as_str().ok_or_else(|| error("spec.address", "required: an IP address"))?;
    let port = spec["port"]
        .as_u64()
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| error("spec.port", "required: a port number from 1 to 65535"))?;
    let body = json!({
        "name": doc.name,
        "type": "STATIC",
        "load_assignment": {
            "cluster_name": doc.name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": address, "port_value": port}}}}]}],
        },
    });
    Ok(XdsResource {
        type_url: CLUSTER.into(),
        name: doc.name.clone(),
        body: Body::Json(body.to_string()),
        document: Some(id),
        node_groups: vec![],
    })
}

export!(Plugin);

//! {{name}}: translates `{{kind}}` intent documents into Envoy clusters.
//!
//! A `{{kind}}` names one upstream address; each becomes a STATIC cluster of the same name:
//!
//! ```yaml
//! kind: {{kind}}
//! metadata: {name: web}
//! spec: {address: 10.0.0.1, port: 8080}
//! ```

wit_bindgen::generate!({ path: "wit", world: "plugin" });

use serde_json::{Value, json};
use xdst::plugin::log::{Level, log};
use xdst::plugin::types::*;

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

struct Plugin;

impl Guest for Plugin {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kinds: vec!["{{kind}}".into()],
            phase: Phase::Translate,
            granularity: Granularity::PerDocument,
        }
    }

    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        let mut resources = Vec::new();
        for doc in &request.documents {
            resources.push(cluster(doc)?);
        }
        log(Level::Debug, &format!("translated {} documents", request.documents.len()));
        Ok(TranslateResponse { resources, diagnostics: vec![] })
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
    Ok(XdsResource { type_url: CLUSTER.into(), name: doc.name.clone(), body: Body::Json(body.to_string()), document: Some(id) })
}

export!(Plugin);

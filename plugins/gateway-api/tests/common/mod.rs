//! What the plugin's integration tests share: documents as the host hands them over.

use std::collections::BTreeMap;

use serde_json::Value;
use xdst_guest::{IntentDocument, TranslateRequest, TranslateResponse};

/// The documents of a YAML text, parsed as the host parses intent, in the host's order.
pub fn docs(yaml: &str) -> Vec<IntentDocument> {
    let mut docs: Vec<IntentDocument> = xdst_core::intent::parse_file("case.yaml", yaml)
        .unwrap()
        .into_iter()
        .map(|d| IntentDocument {
            kind: d.kind.clone(),
            name: d.qualified_name().to_owned(),
            origin: d.origin.clone(),
            json: d.text.to_string(),
        })
        .collect();
    docs.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    docs
}

/// Translates `yaml` with the plugin called natively: its response and the documents' statuses.
pub fn run(yaml: &str, config: &str) -> (TranslateResponse, BTreeMap<String, Value>) {
    let request = TranslateRequest {
        node_group: String::new(),
        documents: docs(yaml),
        resources: vec![],
        config: config.into(),
        changes: None,
    };
    xdst_plugin_gateway_api::translate(&request).unwrap()
}

/// `(type, status, reason)` of each condition in a status's `conditions` array.
#[allow(dead_code, reason = "each test binary uses some of the shared helpers")]
pub fn conditions(list: &Value) -> Vec<(String, String, String)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap().to_owned();
            (s("type"), s("status"), s("reason"))
        })
        .collect()
}

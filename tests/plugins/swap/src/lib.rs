//! Translates `Split` documents (`spec.port`) into an HTTP listener whose one route splits
//! traffic between the clusters `u0`..`u5` by the weights in [`TABLE`].
//!
//! The table sits in the module's data section behind a marker, so a test can turn one build
//! of this plugin into many versions (each with its own digest and its own routing) by
//! rewriting those bytes: `XDST-SWAP:`, six weights of three digits each, then five digits of
//! "spin": how many million rounds of busy work each translation does first (a slow version,
//! for tests of a swap while a translation is in flight). Five digits, because a test scales
//! the spin to take a wall time it chooses, and a fast machine needs thousands of millions of
//! rounds for a second. An optional `spec.tag` names the route, so a test can tell which
//! intent a route came from.

use xdst_guest::*;

/// `XDST-SWAP:`, six three-digit weights for `u0` to `u5`, and five digits of spin.
static TABLE: [u8; 33] = *b"XDST-SWAP:10000000000000000000000";

fn weights() -> Result<Vec<(String, u32)>, PluginError> {
    // Read through black_box so the compiler keeps the bytes in memory instead of folding
    // the constant into the code: patching the data section must change what runs.
    let table = core::hint::black_box(&TABLE);
    let digits = &table[10..28];
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(PluginError { message: "the weight table is corrupt".into(), document: None, field: None });
    }
    Ok((0..6)
        .map(|i| {
            let w = digits[i * 3..i * 3 + 3].iter().fold(0u32, |acc, d| acc * 10 + (d - b'0') as u32);
            (format!("u{i}"), w)
        })
        .filter(|(_, w)| *w > 0)
        .collect())
}

struct Swap;

impl Translator for Swap {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "swap".into(),
            version: "0.1.0".into(),
            kinds: vec!["Split".into()],
            phase: Phase::Translate,
            granularity: Granularity::PerDocument,
            incremental: false,
        }
    }

    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        let table = core::hint::black_box(&TABLE);
        let spin = table[28..33].iter().fold(0u64, |acc, d| acc * 10 + d.wrapping_sub(b'0') as u64 % 10);
        let mut x = 0u64;
        for _ in 0..spin * 1_000_000 {
            x = core::hint::black_box(x.wrapping_add(1));
        }
        let mut resources = Vec::new();
        for doc in &request.documents {
            let spec: serde_json::Value = serde_json::from_str(&doc.json).map_err(|e| PluginError {
                message: e.to_string(),
                document: Some(format!("{}/{}", doc.kind, doc.name)),
                field: None,
            })?;
            let port = spec["spec"]["port"].as_u64().ok_or_else(|| PluginError {
                message: "spec.port must be a number".into(),
                document: Some(format!("{}/{}", doc.kind, doc.name)),
                field: Some("spec.port".into()),
            })?;
            let name = &doc.name;
            let clusters: Vec<serde_json::Value> =
                weights()?.into_iter().map(|(c, w)| serde_json::json!({"name": c, "weight": w})).collect();
            let tag = spec["spec"]["tag"].as_str().unwrap_or("all");
            let route = serde_json::json!({
                "name": name,
                "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{
                    "name": tag,
                    "match": {"prefix": "/"},
                    "route": {"weighted_clusters": {"clusters": clusters}}
                }]}]
            });
            let listener = serde_json::json!({
                "name": name,
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": name,
                        "rds": {"route_config_name": name, "config_source": {"ads": {}, "resource_api_version": "V3"}},
                        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
                        }}]
                    }
                }]}]
            });
            let document = Some(format!("{}/{}", doc.kind, doc.name));
            resources.push(XdsResource {
                type_url: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration".into(),
                name: name.clone(),
                body: Body::Json(route.to_string()),
                document: document.clone(),
                node_groups: vec![],
            });
            resources.push(XdsResource {
                type_url: "type.googleapis.com/envoy.config.listener.v3.Listener".into(),
                name: name.clone(),
                body: Body::Json(listener.to_string()),
                document,
                node_groups: vec![],
            });
        }
        Ok(TranslateResponse { removed: vec![], resources, diagnostics: vec![], statuses: vec![] })
    }
}

export_translator!(Swap);

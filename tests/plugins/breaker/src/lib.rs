//! A `patch` plugin that breaks the translate plugins' output in the one way its `config`
//! names, as a buggy Gateway API implementation would, so a test can show that a conformance
//! check catches exactly that bug (issue 52: each check shown failing on a plugin broken on
//! purpose, then passing). `config`:
//!
//! - `{"break": "sni"}`: clusters that originate TLS send no server name (SNI); with
//!   `"to": NAME`, every one sends NAME (as a gateway that applied the wrong policy would).
//! - `{"break": "client-certificates"}`: listeners that ask clients for a certificate stop
//!   asking (and stop validating one).
//! - `{"break": "catch-all"}`: a listener that routes TLS connections by server name passes a
//!   connection whose name matches no route to the first route's backend, instead of closing it.
//! - `{"break": "unresolved-to", "address": "IP:PORT"}`: a backend that does not resolve (a
//!   cluster named `.../unresolved`) is sent to `address` instead of nowhere.
//! - `{"break": "extra-route", "host": HOST, "path": PATH}`: the virtual host of HOST also
//!   routes PATH, to the backend of its first route (as a route a listener must not take
//!   would be served there).

use serde_json::Value;
use xdst_guest::*;

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const ROUTES: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const MODES: [&str; 5] = ["sni", "client-certificates", "catch-all", "unresolved-to", "extra-route"];

struct Breaker;

fn error(message: impl Into<String>) -> PluginError {
    PluginError { message: message.into(), document: None, field: Some("config.break".into()) }
}

/// Every object in `v`, depth first.
fn objects(v: &mut Value, f: &mut impl FnMut(&mut serde_json::Map<String, Value>)) {
    match v {
        Value::Object(o) => {
            f(o);
            for child in o.values_mut() {
                objects(child, f);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|child| objects(child, f)),
        _ => {}
    }
}

/// A TLS context's `@type` ends with this.
fn is(o: &serde_json::Map<String, Value>, kind: &str) -> bool {
    o.get("@type").and_then(Value::as_str).is_some_and(|t| t.ends_with(kind))
}

/// `resource` broken as `mode` says; `None` when it has nothing to break.
fn broken(mode: &str, config: &Value, type_url: &str, name: &str, mut body: Value) -> Option<Value> {
    let mut changed = false;
    match (mode, type_url) {
        ("sni", CLUSTER) => objects(&mut body, &mut |o| {
            if is(o, "UpstreamTlsContext") {
                changed |= match config["to"].as_str() {
                    Some(to) => o.insert("sni".into(), to.into()).is_none_or(|was| was != to),
                    None => o.remove("sni").is_some(),
                };
            }
        }),
        ("client-certificates", LISTENER) => objects(&mut body, &mut |o| {
            if is(o, "DownstreamTlsContext") {
                changed |= o.remove("require_client_certificate").is_some();
                if let Some(Value::Object(common)) = o.get_mut("common_tls_context") {
                    for key in
                        ["validation_context", "validation_context_sds_secret_config", "combined_validation_context"]
                    {
                        changed |= common.remove(key).is_some();
                    }
                }
            }
        }),
        ("catch-all", LISTENER) => {
            let chains = body.get("filter_chains").and_then(Value::as_array).cloned().unwrap_or_default();
            let by_name = chains.iter().any(|c| c.pointer("/filter_chain_match/server_names").is_some());
            if by_name && body.get("default_filter_chain").is_none() {
                let mut first = chains[0].clone();
                if let Some(o) = first.as_object_mut() {
                    o.remove("filter_chain_match");
                    o.insert("name".into(), "broken-on-purpose-catch-all".into());
                }
                body["default_filter_chain"] = first;
                changed = true;
            }
        }
        ("extra-route", ROUTES) => {
            let (host, path) = (config["host"].as_str()?, config["path"].as_str()?);
            for vhost in body.get_mut("virtual_hosts")?.as_array_mut()? {
                let serves = vhost["domains"].as_array().is_some_and(|d| d.iter().any(|d| d == host));
                let Some(action) = vhost.pointer("/routes/0/route").cloned().filter(|_| serves) else { continue };
                let extra =
                    serde_json::json!({"name": "broken-on-purpose", "match": {"prefix": path}, "route": action});
                vhost["routes"].as_array_mut()?.insert(0, extra);
                changed = true;
            }
        }
        ("unresolved-to", ENDPOINTS) if name.ends_with("/unresolved") => {
            let (ip, port) = config["address"].as_str()?.rsplit_once(':')?;
            body["endpoints"] = serde_json::json!([{"lb_endpoints": [{"endpoint": {"address":
                {"socket_address": {"address": ip, "port_value": port.parse::<u32>().ok()?}}}}]}]);
            changed = true;
        }
        _ => {}
    }
    changed.then_some(body)
}

impl Translator for Breaker {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "breaker".into(),
            version: "0.1.0".into(),
            kinds: vec![],
            phase: Phase::Patch,
            granularity: Granularity::WholeSet,
            incremental: false,
        }
    }

    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        let config: Value = serde_json::from_str(&request.config).map_err(|e| error(e.to_string()))?;
        let mode = config["break"].as_str().ok_or_else(|| error("config.break must name what to break"))?;
        if !MODES.contains(&mode) {
            return Err(error(format!("nothing called {mode:?} to break")));
        }
        let mut resources = Vec::new();
        for r in &request.resources {
            let Body::Json(text) = &r.body else { continue };
            let Ok(body) = serde_json::from_str::<Value>(text) else { continue };
            if let Some(body) = broken(mode, &config, &r.type_url, &r.name, body) {
                resources.push(XdsResource { body: Body::Json(body.to_string()), ..r.clone() });
            }
        }
        Ok(TranslateResponse { resources, diagnostics: vec![], statuses: vec![], removed: vec![] })
    }
}

export_translator!(Breaker);

//! `xdst translate`: intent + plugins -> the resources a node group would be served, printed
//! or written as Envoy filesystem-subscription files.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use prost_reflect::{DynamicMessage, SerializeOptions};
use serde_json::{Map, Value, json};
use xdst_core::consistency;
use xdst_core::resource::Resource;
use xdst_core::snapshot::Snapshot;
use xdst_core::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, short_name};
use xdst_plugin::dir::{DirLoader, Loaded};
use xdst_plugin::pipeline::{Configured, Translation, translate};
use xdst_plugin::{Runtime, RuntimeConfig};

/// The order resources are listed and files written in: what Envoy needs first comes first.
const ORDER: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];

/// Translates `intent` with the plugins in `plugins` for `group`, and checks the result as
/// `serve` would before publishing it.
pub fn run(
    intent: &Path,
    plugins: &Path,
    group: &str,
    cache_dir: Option<PathBuf>,
) -> anyhow::Result<(Translation, Vec<Loaded>, usize)> {
    let runtime = Runtime::new(RuntimeConfig { cache_dir, fuel: false, ..Default::default() })?;
    let loaded = DirLoader::new(runtime).load(plugins)?;
    let configured: Vec<Configured> = loaded.iter().map(Loaded::configured).collect();
    let (set, _files) = crate::generate::intent::read_intent(intent)?;
    let out = translate(&configured, &set, group).map_err(anyhow::Error::from)?;
    if let Some(message) = inconsistency(&out.snapshot, group) {
        anyhow::bail!(message);
    }
    Ok((out, loaded, set.len()))
}

/// [`run`] with the plugins of a configuration file (`serve --config`): its `plugins` list
/// (pulled and checked exactly as `serve` would: pins, signatures) or its `pluginsDir`. The
/// intent directory is `intent`, else the file's.
pub fn run_config(
    file: &Path,
    intent: Option<&Path>,
    group: &str,
    cache_dir: Option<PathBuf>,
) -> anyhow::Result<(Translation, Vec<Loaded>, usize)> {
    let c = crate::cli::settings::Settings::read_file(file)?;
    let intent = intent
        .map(Path::to_path_buf)
        .or(c.intent.clone())
        .ok_or_else(|| anyhow::anyhow!("no intent: give --intent DIR or `intent` in {}", file.display()))?;
    let cache_dir = c.plugin_cache.clone().or(cache_dir);
    if let Some(dir) = &c.plugins {
        return run(&intent, dir, group, cache_dir);
    }
    let artifacts =
        cache_dir.as_ref().map(|c| c.join("artifacts")).unwrap_or_else(|| std::env::temp_dir().join("xdst-artifacts"));
    let fetcher = crate::generate::plugins::distribution::Fetcher::new(
        artifacts,
        c.insecure_registries.clone(),
        c.ca_file.as_deref(),
    )?;
    let entries = crate::generate::plugins::list::ConfiguredPlugins::new(
        crate::generate::plugins::list::ListOrigin::File(file.to_owned()),
        fetcher,
    )
    .entries(0, true, || {})?;
    let loader = DirLoader::new(Runtime::new(RuntimeConfig { cache_dir, fuel: false, ..Default::default() })?);
    let loaded = entries.iter().map(|e| loader.load_entry(e)).collect::<Result<Vec<_>, _>>()?;
    let configured: Vec<Configured> = loaded.iter().map(Loaded::configured).collect();
    let (set, _files) = crate::generate::intent::read_intent(&intent)?;
    let out = translate(&configured, &set, group).map_err(anyhow::Error::from)?;
    if let Some(message) = inconsistency(&out.snapshot, group) {
        anyhow::bail!(message);
    }
    Ok((out, loaded, set.len()))
}

/// The check the cache runs before publishing (dangling references), explained; `None` when
/// `snapshot` would publish. So `translate` and `plugin test` succeed exactly when `serve`
/// would publish.
pub fn inconsistency(snapshot: &Snapshot, group: &str) -> Option<String> {
    let errors = consistency::check(snapshot).err()?;
    let e = xdst_core::cache::PublishError { group: (!group.is_empty()).then(|| group.to_owned()), errors };
    Some(crate::generate::intent::explain_publish(&e, snapshot))
}

/// Resources in listing order: clusters, endpoints, listeners, routes, then any other type;
/// by name within a type.
pub fn ordered(snapshot: &Snapshot) -> Vec<&Resource> {
    let mut types: Vec<&str> = snapshot.types().map(|(t, _)| t.as_ref()).collect();
    types.sort_by_key(|t| (ORDER.iter().position(|o| o == t).unwrap_or(ORDER.len()), t.to_string()));
    types.iter().flat_map(|t| snapshot.get(t).unwrap().resources().map(|r| r.as_ref())).collect()
}

/// A resource as canonical proto3 JSON with its `@type`, as Envoy's own config writes it.
pub fn resource_json(r: &Resource) -> Value {
    let body = xdst_core::descriptors::message_for_type_url(r.type_url())
        .and_then(|d| DynamicMessage::decode(d, r.body().as_ref()).ok())
        .and_then(|m| {
            m.serialize_with_options(serde_json::value::Serializer, &SerializeOptions::new().use_proto_field_name(true))
                .ok()
        });
    let mut out = Map::new();
    out.insert("@type".into(), Value::String(r.type_url().to_string()));
    if let Some(Value::Object(fields)) = body {
        out.extend(fields);
    }
    Value::Object(out)
}

/// `{"resources": [...]}`: what `xdst serve --resources` reads back.
pub fn render_json(snapshot: &Snapshot) -> String {
    let resources: Vec<Value> = ordered(snapshot).into_iter().map(resource_json).collect();
    let mut s = serde_json::to_string_pretty(&json!({ "resources": resources })).unwrap();
    s.push('\n');
    s
}

/// One YAML document per resource: also what `xdst serve --resources` reads back.
pub fn render_yaml(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    for r in ordered(snapshot) {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&resource_json(r)).unwrap());
    }
    out
}

/// Each document's status (as its plugin computed it, stamped), by document id: one JSON object, or
/// one YAML document per status (`{document, status}`).
pub fn render_statuses(statuses: &xdst_plugin::pipeline::Statuses, json: bool) -> String {
    let parsed = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
    if json {
        let all: serde_json::Map<String, Value> = statuses.iter().map(|(id, s)| (id.to_string(), parsed(s))).collect();
        let mut s = serde_json::to_string_pretty(&json!({ "statuses": all })).unwrap();
        s.push('\n');
        return s;
    }
    let mut out = String::new();
    for (id, s) in statuses {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&json!({ "document": id.as_ref(), "status": parsed(s) })).unwrap());
    }
    out
}

/// The file a type is written to in `--out-dir`: `cds.json`, `lds.json`, ...
pub fn file_for(type_url: &str) -> String {
    format!("{}.json", short_name(type_url))
}

/// A resource name as a file name: letters, digits, `-`, `_` and `.` stay; anything else
/// (and a leading dot) is percent-encoded.
pub fn file_name(name: &str) -> String {
    let mut out = String::new();
    for (i, b) in name.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Writes Envoy filesystem-subscription files into `dir`, each a DiscoveryResponse in JSON,
/// each replaced by an atomic rename:
///
/// - `cds.json` and `lds.json`: every cluster and every listener (always written, so a
///   bootstrap can name them before they have resources);
/// - `eds/<cluster>.json` and `rds/<route config>.json`: one resource each, because Envoy's
///   file-based EDS and RDS subscriptions expect exactly the resource they name;
/// - `<type>.json` for any other type.
///
/// Resources that subscribe over ADS (`rds.config_source`, `eds_config`) are pointed at their
/// file instead, so Envoy runs from the files with no gRPC at all. Endpoints and routes are
/// written before the clusters and listeners that use them, and files of resources that are
/// gone are removed last.
pub fn write_out_dir(snapshot: &Snapshot, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir.join("eds")).with_context(|| format!("creating --out-dir {}", dir.display()))?;
    std::fs::create_dir_all(dir.join("rds")).with_context(|| format!("creating --out-dir {}", dir.display()))?;
    let dir = dir.canonicalize().with_context(|| format!("resolving --out-dir {}", dir.display()))?;
    let mut written = Vec::new();
    let write = |path: PathBuf,
                 type_url: &str,
                 version: &str,
                 resources: Vec<Value>,
                 written: &mut Vec<PathBuf>|
     -> anyhow::Result<()> {
        let response = json!({ "version_info": version, "type_url": type_url, "resources": resources });
        let mut text = serde_json::to_string_pretty(&response)?;
        text.push('\n');
        xdst_core::files::write_atomic(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    let json_of = |r: &Resource| {
        let mut v = resource_json(r);
        point_at_files(&mut v, None, &dir);
        v
    };
    // One file per load assignment and per route configuration, first.
    let mut keep = std::collections::BTreeSet::new();
    for (t, sub) in [(ENDPOINT, "eds"), (ROUTE, "rds")] {
        if let Some(set) = snapshot.get(t) {
            for r in set.resources() {
                let path = dir.join(sub).join(format!("{}.json", file_name(r.name())));
                write(path.clone(), t, r.version(), vec![json_of(r)], &mut written)?;
                keep.insert(path);
            }
        }
    }
    // Then every other type, clusters before listeners.
    let mut types: Vec<String> = vec![CLUSTER.to_string(), LISTENER.to_string()];
    for (t, _) in snapshot.types() {
        if !types.iter().any(|x| x == t.as_ref()) && t.as_ref() != ENDPOINT && t.as_ref() != ROUTE {
            types.push(t.to_string());
        }
    }
    for t in types {
        let set = snapshot.get(&t);
        let version = set
            .map(|s| s.version().to_string())
            .unwrap_or_else(|| xdst_core::resource::set_version(std::iter::empty()));
        let resources: Vec<Value> = set.map(|s| s.resources().map(|r| json_of(r)).collect()).unwrap_or_default();
        write(dir.join(file_for(&t)), &t, &version, resources, &mut written)?;
    }
    // Last, the files of endpoints and routes that are gone.
    for sub in ["eds", "rds"] {
        for entry in std::fs::read_dir(dir.join(sub))?.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") && !keep.contains(&path) {
                std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            }
        }
    }
    Ok(written)
}

/// Rewrites `{ads: {}}` config sources to path config sources on the files in `dir`: an RDS
/// source to `rds/<route_config_name>.json`, a cluster's EDS source to
/// `eds/<service_name or cluster name>.json`, CDS and LDS sources to `cds.json`, `lds.json`.
fn point_at_files(v: &mut Value, key: Option<&str>, dir: &Path) {
    fn path_source(file: PathBuf) -> Value {
        let watched = file.parent().unwrap().display().to_string();
        json!({ "path": file.display().to_string(), "watched_directory": { "path": watched } })
    }
    let Value::Object(map) = v else {
        if let Value::Array(items) = v {
            for item in items {
                point_at_files(item, key, dir);
            }
        }
        return;
    };
    // A cluster: its EDS source names the load assignment by service_name, else its name.
    if let (Some(name), Some(Value::Object(eds))) =
        (map.get("name").and_then(Value::as_str).map(str::to_owned), map.get_mut("eds_cluster_config"))
    {
        let service = eds.get("service_name").and_then(Value::as_str).map(str::to_owned).unwrap_or(name);
        if let Some(Value::Object(source)) = eds.get_mut("eds_config")
            && source.remove("ads").is_some()
        {
            source.insert(
                "path_config_source".into(),
                path_source(dir.join("eds").join(format!("{}.json", file_name(&service)))),
            );
        }
    }
    // An HTTP connection manager's RDS: the route configuration by name.
    if key == Some("rds") {
        let route = map.get("route_config_name").and_then(Value::as_str).map(str::to_owned);
        if let (Some(route), Some(Value::Object(source))) = (route, map.get_mut("config_source"))
            && source.remove("ads").is_some()
        {
            source.insert(
                "path_config_source".into(),
                path_source(dir.join("rds").join(format!("{}.json", file_name(&route)))),
            );
        }
    }
    for (k, type_url) in [("cds_config", CLUSTER), ("lds_config", LISTENER)] {
        if let Some(Value::Object(source)) = map.get_mut(k)
            && source.remove("ads").is_some()
        {
            source.insert("path_config_source".into(), path_source(dir.join(file_for(type_url))));
        }
    }
    for (k, child) in map.iter_mut() {
        point_at_files(child, Some(k), dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ads_sources_point_at_the_files() {
        let mut v = json!({
            "name": "web",
            "filter_chains": [{"filters": [{"typed_config": {
                "rds": {"config_source": {"ads": {}, "resource_api_version": "V3"}, "route_config_name": "r/1"},
            }}]}],
            "other": {"config_source": {"api_config_source": {}}},
        });
        point_at_files(&mut v, None, Path::new("/x"));
        let rds = &v["filter_chains"][0]["filters"][0]["typed_config"]["rds"]["config_source"];
        assert_eq!(rds["path_config_source"]["path"], "/x/rds/r%2F1.json");
        assert_eq!(rds["path_config_source"]["watched_directory"]["path"], "/x/rds");
        assert_eq!(rds["resource_api_version"], "V3");
        assert!(rds.get("ads").is_none());
        assert!(v["other"]["config_source"].get("path_config_source").is_none());

        let mut c = json!({"name": "api", "eds_cluster_config": {"eds_config": {"ads": {}}}});
        point_at_files(&mut c, None, Path::new("/x"));
        assert_eq!(c["eds_cluster_config"]["eds_config"]["path_config_source"]["path"], "/x/eds/api.json");
        let mut c = json!({"name": "api", "eds_cluster_config": {"service_name": "api-v2", "eds_config": {"ads": {}}}});
        point_at_files(&mut c, None, Path::new("/x"));
        assert_eq!(c["eds_cluster_config"]["eds_config"]["path_config_source"]["path"], "/x/eds/api-v2.json");
    }

    #[test]
    fn file_names_are_safe() {
        assert_eq!(file_name("api-v1.default_x"), "api-v1.default_x");
        assert_eq!(file_name("outbound|80||a/b"), "outbound%7C80%7C%7Ca%2Fb");
        assert_eq!(file_name(".."), "%2E.");
    }
}

//! What a generation held out (issue 35, part 2): the files and store keys that did not read,
//! and the documents a translation failed on. Each is reported on the status page,
//! `/debug/plugins` and `/readyz`, and a held document's status carries the failure.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use xdst_plugin::pipeline::Held;

use super::input::HeldSource;

/// One thing held out of the last generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldReport {
    /// The document (`Kind/namespace/name`), or the file or store key that did not read.
    pub held: String,
    /// Where it was read: `file#index`, a file, or a store key.
    pub origin: String,
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// What is translated in its place: `last good` (its last good version) or `nothing`.
    pub serving: &'static str,
    /// The node group whose translation held a document ("" for the default group).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Who caused it, when nodes' rejections did: the group's proxies that rejected it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub caused_by: Vec<String>,
}

fn serving(last_good: bool) -> &'static str {
    if last_good { "last good" } else { "nothing" }
}

impl HeldReport {
    pub fn source(h: &HeldSource) -> HeldReport {
        HeldReport {
            held: h.source.clone(),
            origin: h.source.clone(),
            error: h.error.clone(),
            plugin: None,
            serving: serving(h.last_good),
            group: String::new(),
            caused_by: Vec::new(),
        }
    }

    pub fn document(group: &str, h: &Held) -> HeldReport {
        HeldReport {
            held: h.document.clone(),
            origin: h.origin.clone(),
            error: h.error.clone(),
            plugin: h.plugin.clone(),
            serving: serving(h.last_good),
            group: group.to_owned(),
            caused_by: Vec::new(),
        }
    }
}

/// The condition a held document's status carries.
pub const CONDITION: &str = "Programmed";

/// The documents a translation held, as [`mark_statuses`] takes them: (id, failure, reason).
pub fn translation_holds(held: &BTreeMap<Arc<str>, Held>) -> impl Iterator<Item = (&str, &str, &'static str)> {
    held.iter().map(|(id, h)| (&**id, h.error.as_str(), if h.last_good { "HeldAtLastGood" } else { "Held" }))
}

/// `statuses` with each held document's status saying so: a `Programmed` condition, `False`,
/// with the failure as its message and the reason given, at the top level and in each of the
/// status's `parents` (where Gateway API routes keep their conditions). What the plugin
/// computed for the version translated in its place, if any, stays beside it.
pub fn mark_statuses<'a>(
    statuses: &mut super::Statuses,
    held: impl IntoIterator<Item = (&'a str, &'a str, &'static str)>,
) {
    for (id, error, reason) in held {
        let mut status = match statuses.get(id).map(|s| serde_json::from_str::<serde_json::Value>(s)) {
            Some(Ok(serde_json::Value::Object(m))) => m,
            _ => serde_json::Map::new(),
        };
        let condition = serde_json::json!({
            "type": CONDITION,
            "status": "False",
            "reason": reason,
            "message": error,
        });
        let with = |conditions: Option<&mut serde_json::Value>| -> serde_json::Value {
            let mut list: Vec<serde_json::Value> = match conditions {
                Some(serde_json::Value::Array(l)) => std::mem::take(l),
                _ => Vec::new(),
            };
            list.retain(|c| c.get("type").and_then(|t| t.as_str()) != Some(CONDITION));
            list.push(condition.clone());
            serde_json::Value::Array(list)
        };
        if let Some(serde_json::Value::Array(parents)) = status.get_mut("parents") {
            for p in parents.iter_mut().filter_map(|p| p.as_object_mut()) {
                let c = with(p.get_mut("conditions"));
                p.insert("conditions".into(), c);
            }
        }
        let c = with(status.get_mut("conditions"));
        status.insert("conditions".into(), c);
        statuses.insert(Arc::from(id), Arc::from(serde_json::Value::Object(status).to_string()));
    }
}

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

/// The documents a translation held, as [`super::conditions::mark_held`] takes them.
pub fn translation_holds(held: &BTreeMap<Arc<str>, Held>) -> impl Iterator<Item = super::conditions::HeldDocument<'_>> {
    held.iter().map(|(id, h)| (&**id, h.error.as_str(), if h.last_good { "HeldAtLastGood" } else { "Held" }))
}

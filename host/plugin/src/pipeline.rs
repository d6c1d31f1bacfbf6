//! Intent + plugins -> validated, canonical resources for one node group.
//!
//! Each `translate` plugin gets the documents of the kinds it declared; every resource it
//! returns is decoded into its typed Envoy message (unknown fields and wrong types are errors
//! naming the field), re-encoded canonically and attributed to the plugin and intent document
//! that produced it. Two plugins producing one resource, two plugins claiming one kind, and a
//! document no plugin claims are errors that name both sides. The consistency check runs when
//! the result is published to the cache.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use xdst_core::decode::{Body, decode_body};
use xdst_core::intent::{IntentSet, UnclaimedKind};
use xdst_core::resource::Resource;

use crate::wit;
use crate::{Plugin, PluginError};

/// A loaded plugin and the operator's configuration for it (JSON).
#[derive(Clone)]
pub struct Configured {
    pub plugin: Arc<Plugin>,
    pub config: String,
}

/// What one translation produced.
#[derive(Debug, Default)]
pub struct Translation {
    pub resources: Vec<Resource>,
    /// (plugin, diagnostic) pairs to show the operator.
    pub diagnostics: Vec<(String, wit::Diagnostic)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Unclaimed(#[from] UnclaimedKind),
    #[error("kind {kind:?} is claimed by plugin {first:?} and by plugin {second:?}")]
    KindClaimedTwice { kind: String, first: String, second: String },
    #[error("plugin {plugin:?} ({}): {} {name:?}{}{}: {message}", short(digest), xdst_core::types::short_name(type_url), document.as_ref().map(|d| format!(" from {d}")).unwrap_or_default(), field.as_ref().map(|f| format!(" field {f}")).unwrap_or_default())]
    InvalidResource {
        plugin: String,
        digest: String,
        type_url: String,
        name: String,
        document: Option<String>,
        field: Option<String>,
        message: String,
    },
    #[error("{} {name:?} is produced by plugin {first:?} and again by plugin {second:?}", xdst_core::types::short_name(type_url))]
    Conflict { type_url: String, name: String, first: String, second: String },
}

fn short(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}

/// Translates `intent` for `node_group` with `plugins` (translate phase, in name order).
pub fn translate(plugins: &[Configured], intent: &IntentSet, node_group: &str) -> Result<Translation, PipelineError> {
    let mut plugins: Vec<&Configured> = plugins.iter().filter(|p| p.plugin.info().phase == wit::Phase::Translate).collect();
    plugins.sort_by(|a, b| a.plugin.info().name.cmp(&b.plugin.info().name));

    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for p in &plugins {
        for kind in &p.plugin.info().kinds {
            if let Some(first) = owner.insert(kind, &p.plugin.info().name) {
                return Err(PipelineError::KindClaimedTwice { kind: kind.clone(), first: first.to_owned(), second: p.plugin.info().name.clone() });
            }
        }
    }
    intent.check_claimed(&owner.keys().map(|k| k.to_string()).collect::<BTreeSet<_>>())?;

    let mut out = Translation::default();
    let mut produced: BTreeMap<(String, String), String> = BTreeMap::new();
    for p in plugins {
        let info = p.plugin.info();
        let mut kinds: Vec<&String> = info.kinds.iter().collect();
        kinds.sort();
        let documents = kinds
            .into_iter()
            .flat_map(|k| intent.of_kind(k))
            .map(|d| wit::IntentDocument { kind: d.kind.clone(), name: d.name.clone(), origin: d.origin.clone(), json: d.json.to_string() })
            .collect();
        let request = wit::TranslateRequest { node_group: node_group.to_owned(), documents, resources: vec![], config: p.config.clone() };
        let response = p.plugin.translate(&request)?;
        for r in response.resources {
            let body = match &r.body {
                wit::Body::Json(s) => Body::Json(s),
                wit::Body::Proto(b) => Body::Proto(b),
            };
            let invalid = |field: Option<String>, message: String| PipelineError::InvalidResource {
                plugin: info.name.clone(),
                digest: p.plugin.digest().to_owned(),
                type_url: r.type_url.clone(),
                name: r.name.clone(),
                document: r.document.clone(),
                field,
                message,
            };
            let resource = decode_body(&r.type_url, &r.name, body).map_err(|(field, message)| invalid(field, message))?;
            let key = (r.type_url.clone(), r.name.clone());
            if let Some(first) = produced.get(&key) {
                if *first == info.name {
                    return Err(invalid(None, "returned twice".into()));
                }
                return Err(PipelineError::Conflict { type_url: r.type_url, name: r.name, first: first.clone(), second: info.name.clone() });
            }
            produced.insert(key, info.name.clone());
            let origin = match &r.document {
                Some(d) => format!("plugin {} from {d}", info.name),
                None => format!("plugin {}", info.name),
            };
            out.resources.push(resource.with_origin(origin));
        }
        out.diagnostics.extend(response.diagnostics.into_iter().map(|d| (info.name.clone(), d)));
    }
    Ok(out)
}

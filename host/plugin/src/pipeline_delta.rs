//! A generation's call of an incremental plugin (contract 0.4.0, design 020; issue 50, item
//! 4): the plugin is told what changed since the documents it was last given, and the pipeline
//! takes back what changed. Each resource of such a plugin has its own slot in the plugin's
//! outputs (`type URL`, NUL, name), so a change replaces the resources it reached and nothing
//! else: only they are decoded and checked, only their statuses are read, and the snapshot is
//! the last one with them applied. The cost of a generation on the host is the cost of what
//! changed, however many documents the plugin holds.
//!
//! A plugin's state may have moved on without this pipeline (another node group's call, a
//! blame call): the kept instance then answers with a full call, and everything it made before
//! is replaced ([`crate::incremental::State::translate_delta`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use imbl::OrdMap;
use xdst_core::decode::{Body, decode_body};
use xdst_core::intent::{ClaimsView, IntentDocument};
use xdst_core::types::ROUTE;

use super::{
    Changes, Configured, Decodes, ForGroups, InvalidResource, Pipeline, PipelineError, PluginCall, PluginState,
    checked_status, decode_route, for_group, plugin_error,
};
use crate::incremental::{DeltaCall, Docs};

/// What a delta call returned, checked and decoded.
pub(super) struct DeltaDecoded {
    /// A full call: what the plugin made before goes.
    full: bool,
    /// The resources new or changed, by slot, each with the node groups it is for.
    fresh: BTreeMap<Arc<str>, Vec<ForGroups>>,
    /// The slots of the resources gone.
    gone: Vec<Arc<str>>,
    /// The statuses that changed: none when the document has none now.
    statuses: Vec<(Arc<str>, Option<Arc<str>>)>,
    diagnostics: Vec<crate::wit::Diagnostic>,
    named: BTreeSet<String>,
    /// The documents of the call: every group that shares it keeps this one map.
    inputs: Docs,
    decoded: Arc<Decodes>,
}

/// The slot of a resource of an incremental plugin.
fn slot(type_url: &str, name: &str) -> Arc<str> {
    Arc::from(format!("{type_url}\u{0}{name}"))
}

/// The delta calls of one generation, shared by the node groups it translates, as
/// [`super::CallMemo`] shares whole calls: the same plugin, settings, documents before and
/// changes make the same call.
#[derive(Default)]
pub(super) struct DeltaMemo {
    calls: std::sync::Mutex<Vec<DeltaMemoised>>,
}

struct DeltaMemoised {
    plugin: String,
    digest: String,
    config: String,
    since: Option<Docs>,
    changed: Vec<Arc<IntentDocument>>,
    removed: Vec<Arc<str>>,
    result: Result<Arc<DeltaDecoded>, PipelineError>,
}

impl DeltaMemo {
    fn same(m: &DeltaMemoised, p: &Configured, call: &DeltaCall<'_>) -> bool {
        m.plugin == p.plugin.info().name
            && m.digest == p.plugin.digest()
            && m.config == p.config
            && match (&m.since, call.since) {
                (Some(a), Some(b)) => a.ptr_eq(b),
                (None, None) => true,
                _ => false,
            }
            && m.removed == call.removed
            && m.changed.len() == call.changed.len()
            && m.changed
                .iter()
                .zip(call.changed)
                .all(|(a, b)| Arc::ptr_eq(a, b) || (a.id() == b.id() && a.text == b.text))
    }

    fn find(&self, p: &Configured, call: &DeltaCall<'_>) -> Option<Result<Arc<DeltaDecoded>, PipelineError>> {
        let calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.iter().find(|m| Self::same(m, p, call)).map(|m| m.result.clone())
    }

    fn keep(&self, p: &Configured, call: &DeltaCall<'_>, result: Result<Arc<DeltaDecoded>, PipelineError>) {
        let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls.push(DeltaMemoised {
            plugin: p.plugin.info().name.clone(),
            digest: p.plugin.digest().to_owned(),
            config: p.config.clone(),
            since: call.since.cloned(),
            changed: call.changed.iter().map(|d| Arc::clone(d)).collect(),
            removed: call.removed.to_vec(),
            result,
        });
    }
}

impl Pipeline {
    /// Runs incremental plugin `p`: `inputs` are its documents now (`view` as the set holds
    /// them), `changed` and `removed` what differs from `prev`'s. `every` gathers every
    /// document (for blame).
    #[allow(clippy::too_many_arguments, reason = "run_plugin's state, for its incremental path")]
    pub(super) fn run_delta<'a>(
        &self,
        p: &Configured,
        inputs: OrdMap<Arc<str>, Arc<IntentDocument>>,
        view: ClaimsView,
        prev: Option<&PluginState>,
        changed: &[&Arc<IntentDocument>],
        removed: &[Arc<str>],
        every: &dyn Fn() -> Vec<&'a Arc<IntentDocument>>,
        calls: &mut Vec<PluginCall>,
        changes: &mut Changes,
        memo: &super::CallMemo,
    ) -> Result<PluginState, PipelineError> {
        let info = p.plugin.info();
        let shared = p.plugin.names_node_groups();
        let node_group = if shared { "" } else { self.node_group.as_str() };
        let call = DeltaCall {
            node_group,
            config: &p.config,
            docs: &inputs,
            since: prev.map(|s| &s.inputs),
            changed,
            removed,
        };
        let known = prev.map(|s| &*s.decoded);
        let made = match shared.then(|| memo.deltas.find(p, &call)).flatten() {
            Some(result) => result,
            None => {
                let result = Self::call_delta(p, &call, known, calls).map(Arc::new);
                if shared {
                    memo.deltas.keep(p, &call, result.clone());
                }
                result
            }
        };
        // A failure is blamed as a whole call's would be: on one namespace's changes, if it can be.
        let made = made.map_err(|e| {
            let docs = every();
            Self::whose_changes(p, node_group, &docs, &docs, prev, false, calls, e)
        })?;

        let mut outputs = match (made.full, prev) {
            (false, Some(prev)) => prev.outputs.clone(),
            (true, Some(prev)) => {
                changes.take_out_all(prev);
                OrdMap::new()
            }
            (_, None) => OrdMap::new(),
        };
        for gone in &made.gone {
            if let Some(rs) = outputs.remove(gone) {
                changes.take_out(&rs);
            }
        }
        for (slot, resources) in &made.fresh {
            if let Some(old) = outputs.remove(slot) {
                changes.take_out(&old);
            }
            let mine: Vec<_> = resources
                .iter()
                .filter(|(_, groups)| for_group(groups, &self.node_group))
                .map(|(r, _)| r.clone())
                .collect();
            if !mine.is_empty() {
                changes.add.extend(mine.iter().cloned());
                outputs.insert(slot.clone(), mine.into());
            }
        }
        let mut statuses = match (made.full, prev) {
            (false, Some(prev)) if self.statuses => prev.statuses.clone(),
            _ => OrdMap::new(),
        };
        if self.statuses {
            for id in removed {
                statuses.remove(id);
            }
            for (id, status) in &made.statuses {
                match status {
                    Some(s) => statuses.insert(id.clone(), s.clone()),
                    None => statuses.remove(id),
                };
            }
        }
        let named = match (made.full, prev) {
            (false, Some(prev)) if !prev.named_groups.is_empty() => {
                Arc::new(prev.named_groups.iter().chain(&made.named).cloned().collect())
            }
            _ => Arc::new(made.named.clone()),
        };
        Ok(PluginState {
            view,
            digest: p.plugin.digest().to_owned(),
            config: p.config.clone(),
            granularity: Some(info.granularity),
            inputs: made.inputs.clone(),
            outputs,
            diagnostics: made.diagnostics.clone().into(),
            statuses,
            named_groups: named,
            decoded: made.decoded.clone(),
        })
    }

    /// Makes the delta call and checks and decodes what it returned: a status must name a
    /// document the plugin has and be a JSON object (or empty: none now); a resource is decoded
    /// as any other (a RouteConfiguration's routes taken from the last call's where they are
    /// the same).
    fn call_delta(
        p: &Configured,
        call: &DeltaCall<'_>,
        known: Option<&Decodes>,
        calls: &mut Vec<PluginCall>,
    ) -> Result<DeltaDecoded, PipelineError> {
        let info = p.plugin.info();
        let started = std::time::Instant::now();
        let result = p.plugin.translate_delta(call).expect("run_delta is for incremental plugins");
        let sent = match &result {
            Ok(d) if !d.full => call.changed.len() + call.removed.len(),
            _ => call.docs.len(),
        };
        calls.push(PluginCall { plugin: info.name.clone(), documents: sent, seconds: started.elapsed().as_secs_f64() });
        let delta = result.map_err(|error| plugin_error(error, |doc| call.docs.get(doc).map(|d| d.origin.clone())))?;
        let translated = delta.translated;
        let mut statuses = Vec::with_capacity(translated.statuses.len());
        for s in &translated.statuses {
            let given = call.docs.contains_key(s.document.as_str());
            statuses.push(checked_status(
                &info.name,
                s,
                given,
                "names a document the plugin was not given",
                !delta.full,
            )?);
        }
        let none = Decodes::default();
        let known = known.unwrap_or(&none);
        let mut decoded = Decodes::default();
        if !delta.full {
            decoded.pieces = known.pieces.clone();
        }
        let mut gone = Vec::new();
        for (type_url, name) in &translated.removed {
            gone.push(slot(type_url, name));
            if type_url == ROUTE {
                decoded.pieces.remove(name.as_str());
            }
        }
        let everyone: Arc<[String]> = Arc::from([]);
        let mut named = BTreeSet::new();
        let mut fresh: BTreeMap<Arc<str>, Vec<ForGroups>> = BTreeMap::new();
        for (i, r) in translated.response.resources.iter().enumerate() {
            super::test_panic_hook(&r.name);
            let body = match &r.body {
                crate::wit::Body::Json(s) => Body::Json(s),
                crate::wit::Body::Proto(b) => Body::Proto(b),
            };
            let origin = match &r.document {
                Some(d) => format!("plugin {} from {d}", info.name),
                None => format!("plugin {}", info.name),
            };
            let resource = if r.type_url == ROUTE {
                decode_route(&known.pieces, r, body.clone(), &mut decoded.pieces)
            } else {
                decode_body(&r.type_url, &r.name, body.clone())
            }
            .map(|resource| resource.with_origin(origin))
            .map_err(|(field, message)| InvalidResource::refused(p, r, Some(body), field, message))?;
            let groups = match translated.groups_of(i) {
                [] => everyone.clone(),
                these => {
                    named.extend(these.iter().cloned());
                    Arc::from(these)
                }
            };
            fresh.entry(slot(&r.type_url, &r.name)).or_default().push((resource, groups));
        }
        Ok(DeltaDecoded {
            full: delta.full,
            fresh,
            gone,
            statuses,
            diagnostics: translated.response.diagnostics,
            named,
            inputs: call.docs.clone(),
            decoded: Arc::new(decoded),
        })
    }
}

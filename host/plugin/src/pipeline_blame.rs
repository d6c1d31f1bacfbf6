//! Whose change broke a plugin call that names no document (issue 49, items 9 and 10).
//!
//! A call stopped at its deadline, at its memory cap, for its output size or fuel, or one that
//! trapped or failed without naming a document, says nothing of which document made it fail.
//! Failing the generation for it would stop every team's edits while one team's document
//! exists. Instead the documents the call was given that are new or changed since its last
//! good call are grouped by namespace (cluster-scoped ones are the platform's, `""`), and:
//!
//! - each namespace's changes are left out in turn (its documents as they were in the last
//!   good call, or not at all when new), at most [`MAX_TRIES`] namespaces: the first without
//!   whose changes the call succeeds is blamed;
//! - when the call fails without any one of them (a plugin that fails whatever it is given,
//!   or two teams each breaking it), nobody's changes are blamed: the failure stays the
//!   plugin's, and the generation fails (or the plugin, if new, is refused).
//!
//! The blamed documents are held together ([`PipelineError::ChangesOf`]): each at its last
//! good version or left out, and the generation runs again without them. So a team whose file
//! of 29,000 routes takes a whole-set plugin past its memory cap holds back its own routes,
//! not everyone's edits, and a document a per-document plugin sleeps on is that document's
//! team's. The tries cost calls only when a call fails this way.

use std::collections::BTreeMap;
use std::sync::Arc;

use xdst_core::intent::IntentDocument;

use super::{Configured, Pipeline, PipelineError, PluginCall, PluginState};
use crate::Failure;

/// The most namespaces whose changes are left out in turn to find whose broke a call.
pub const MAX_TRIES: usize = 8;

/// Whether `e` is a failure of the plugin's call that names no document of the intent.
fn names_no_document(e: &PipelineError) -> bool {
    let PipelineError::Plugin { error, .. } = e else { return false };
    match &error.failure {
        Failure::Reported { document, .. } => document.is_none(),
        Failure::Deadline { .. }
        | Failure::Memory { .. }
        | Failure::Fuel { .. }
        | Failure::OutputTooLarge { .. }
        | Failure::Trap(_)
        | Failure::Malformed(_) => true,
        Failure::Compile(_) | Failure::Incompatible(_) | Failure::Host(_) => false,
    }
}

impl Pipeline {
    /// `error`, blamed on one namespace's changes when it names no document (see the module's
    /// notes). `changed` and `docs` are what the failed call was given; `prev` its last good
    /// state.
    #[allow(clippy::too_many_arguments, reason = "the failed call, as run_plugin made it")]
    pub(super) fn whose_changes(
        p: &Configured,
        node_group: &str,
        changed: &[&Arc<IntentDocument>],
        docs: &[&Arc<IntentDocument>],
        prev: Option<&PluginState>,
        per_document: bool,
        calls: &mut Vec<PluginCall>,
        error: PipelineError,
    ) -> PipelineError {
        if !names_no_document(&error) {
            return error;
        }
        let was = |d: &Arc<IntentDocument>| prev.and_then(|s| s.inputs.get(d.id())).cloned();
        let unchanged = |d: &Arc<IntentDocument>| was(d).is_some_and(|o| Arc::ptr_eq(&o, d) || o.text == d.text);
        let mut by_namespace: BTreeMap<&str, Vec<&Arc<IntentDocument>>> = BTreeMap::new();
        for d in changed.iter().copied().filter(|d| !unchanged(d)) {
            by_namespace.entry(d.namespace.as_deref().unwrap_or("")).or_default().push(d);
        }
        let culprit = match by_namespace.len() {
            0 => None,
            n if n > MAX_TRIES => None,
            _ => by_namespace.into_iter().find(|(_, group)| {
                let left_out = |d: &&Arc<IntentDocument>| group.iter().any(|g| Arc::ptr_eq(g, d));
                let sent: Vec<Arc<IntentDocument>> = if per_document {
                    changed.iter().filter(|d| !left_out(d)).map(|d| Arc::clone(d)).collect()
                } else {
                    // Every document as the call had it, this namespace's changes as they were.
                    docs.iter().filter_map(|d| if left_out(d) { was(d) } else { Some(Arc::clone(d)) }).collect()
                };
                // Called even with nothing to send: a plugin that fails on nothing is at fault.
                let sent: Vec<&Arc<IntentDocument>> = sent.iter().collect();
                Self::call(p, node_group, &sent, &super::origins_in(docs), vec![], calls).is_ok()
            }),
        };
        match culprit {
            Some((namespace, group)) => PipelineError::ChangesOf {
                error: Box::new(error),
                namespace: namespace.to_owned(),
                documents: group.iter().map(|d| d.id().to_string()).collect(),
            },
            None => error,
        }
    }
}

//! The one reload path: `POST /reload` and SIGHUP both call [`reload`], which does what an
//! operator's "look again now" means and answers with the outcome of the generation (or the
//! resources load) it ran:
//!
//! 1. a store that went back in time is taken as it is now (design 010);
//! 2. with the plugin set in the store, its leader resolves it again (registry tags, URLs),
//!    for every replica;
//! 3. plugin lists resolve their remote sources again at the next generation, and the
//!    watched directories are rescanned (their watches armed again);
//! 4. a generation runs on the generation thread (or the resources directory is loaded) and
//!    its outcome is the answer;
//! 5. before it, every plugin refusal is forgotten, so a refused plugin's contents are tried
//!    again (design 016, part 5), and every intent file is read again, whatever its size and
//!    times say (issue 49, item 5).

use std::time::Duration;

use serde::Serialize;
use tracing::{info, warn};

use crate::generate::Generating;
use crate::generate::store::mirror::Mirror;

/// How long a reload waits for a held store to be listed, and for the plugin set's leader.
const WITHIN: Duration = Duration::from_secs(30);

/// What a reload did.
#[derive(Debug, Serialize)]
pub struct ReloadReport {
    /// `intent` or `resources`.
    pub source: &'static str,
    /// `ok` or `refused` (the last good set keeps serving).
    pub result: &'static str,
    pub error: Option<String>,
    /// With the plugin set in the store: the replica that resolved it for this reload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugins_resolved_by: Option<String>,
}

/// Why a reload could not run its generation.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the store that went back in time was not listed within {WITHIN:?}; see /readyz")]
    StoreNotListed,
    #[error("the plugin set was not resolved again: {0}")]
    PluginSet(String),
    #[error("the generation thread is not running (the server is shutting down)")]
    NotServing,
}

/// Reloads now (see the module docs); `who` names the caller in the log.
pub async fn reload(generating: &Generating, who: &'static str) -> Result<ReloadReport, ReloadError> {
    info!(by = who, "reloading");
    for held in confirm_rewinds(generating) {
        warn!(by = who, "taking the store as it is now, after it went back in time");
        if !held.wait_until(|m| !m.is_held(), WITHIN).await {
            return Err(ReloadError::StoreNotListed);
        }
    }
    let plugins_resolved_by = match &generating.plugin_set {
        Some(held) => Some(held.reload(WITHIN).await.map_err(|e| ReloadError::PluginSet(e.to_string()))?.leader),
        None => None,
    };
    generating.plane.reloads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    // 5. Refused plugins are tried again.
    if let Some(s) = &generating.intent {
        s.forget_refusals();
        s.forget_stamps();
    }
    generating.plane.rescan.notify_one();
    let (source, error) = match &generating.intent {
        Some(s) => {
            let generations = generating.generations.get().ok_or(ReloadError::NotServing)?;
            let (c, s) = (generating.plane.clone(), s.clone());
            match generations.run(move || s.generate(&c).map_err(|e| e.message())).await {
                Some(outcome) => ("intent", outcome.err()),
                None => return Err(ReloadError::NotServing),
            }
        }
        None => {
            let dir = generating.source.get().directory.map(std::path::PathBuf::from);
            let error = dir.and_then(|d| {
                crate::generate::source::reload(&generating.plane, &generating.source, &d).err().map(|e| e.to_string())
            });
            ("resources", error)
        }
    };
    match &error {
        None => info!(by = who, source, "reloaded"),
        Some(e) => warn!(by = who, source, error = %e, "reloaded: refused, the last good set keeps serving"),
    }
    let result = if error.is_some() { "refused" } else { "ok" };
    Ok(ReloadReport { source, result, error, plugins_resolved_by })
}

/// A store that went back in time is taken as it is now: every held mirror (the intent's,
/// the plugin set's) lists it again and lets go. The mirrors that were held.
fn confirm_rewinds(generating: &Generating) -> Vec<std::sync::Arc<Mirror>> {
    let intent = generating.intent.as_ref().and_then(|s| s.mirror().cloned());
    let plugins = generating.plugin_set.as_ref().map(|p| p.mirror.clone());
    intent.into_iter().chain(plugins).filter(|m| m.confirm()).collect()
}

//! What every task of the generation plane shares: where it publishes (the serving plane),
//! its metrics, the change ledger, and the triggers from outside (rescan, reload).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use xdst_core::changes::Ledger;
use xdst_serve::Serving;

use crate::generate::tree::{Changes, Tree, subtree};

use crate::generate::metrics::GenerationMetrics;

pub struct Plane {
    /// The serving plane: its cache is where resources are published, its nodes say which
    /// node groups to translate for.
    pub serving: Arc<Serving>,
    pub metrics: GenerationMetrics,
    /// Every good generation as a change, for `/changes/{id}`.
    pub changes: Ledger,
    /// Quiet window that merges a burst of file changes into one load.
    pub debounce: Duration,
    /// Rescan the watched directories now (`POST /reload`, SIGHUP), whatever the watcher saw.
    pub rescan: Arc<tokio::sync::Notify>,
    /// Explicit reloads (`POST /reload`, SIGHUP) so far: a plugin configuration resolves its
    /// remote sources (registry tags, URLs) again when this moves, and only then.
    pub reloads: AtomicU64,
    /// The largest resources, intent or configuration file read (`--max-file-size`).
    pub max_file_bytes: usize,
    /// What the watched directories looked like (`generate::tree::fingerprint`) when
    /// the last generation began reading them: a watcher that finds them so needs no generation
    /// of its own (the intent API's write generates at once, and its file's event would
    /// otherwise translate the same intent again).
    pub read_saw: std::sync::Mutex<Option<Fingerprints>>,
}

/// Each watched directory's tree (`None`: gone).
pub type Fingerprints = Vec<Option<Tree>>;

impl Plane {
    /// Notes that a generation begins reading the watched directories, which look like `saw`.
    pub fn note_read(&self, saw: Fingerprints) {
        *self.read_saw.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(saw);
    }

    /// Whether the last generation began reading the directories as they are `now`, at the
    /// paths `changed` names (each with what is under it), or everywhere.
    pub fn read_as(&self, now: &Fingerprints, changed: &Changes) -> bool {
        let saw = self.read_saw.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(saw) = saw.as_ref() else { return false };
        let Changes::Paths(paths) = changed else { return saw == now };
        saw.len() == now.len()
            && saw.iter().zip(now).all(|(saw, now)| match (saw, now) {
                (Some(saw), Some(now)) => paths.iter().all(|p| subtree(saw, p).eq(subtree(now, p))),
                (saw, now) => saw.is_none() && now.is_none(),
            })
    }
}

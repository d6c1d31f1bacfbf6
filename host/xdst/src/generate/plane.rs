//! What every task of the generation plane shares: where it publishes (the serving plane),
//! its metrics, the change ledger, and the triggers from outside (rescan, reload).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use xdst_core::changes::Ledger;
use xdst_serve::Serving;

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
}

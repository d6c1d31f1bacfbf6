//! Watching what a generation reads: the intent and plugin directories, the node groups
//! connected, and the nodes' rejections.

use std::sync::Arc;

use super::IntentSource;
use crate::generate::plane::Plane;

/// Watches both directories and connected node groups, and runs a generation on each change.
/// `request` asks the generation thread for a generation.
pub async fn watch(
    plane: Arc<Plane>,
    source: Arc<IntentSource>,
    resync: std::time::Duration,
    request: Arc<dyn Fn() + Send + Sync>,
) {
    let wake = Arc::new(tokio::sync::Notify::new());
    // Forward the node registry's group changes (the serving plane's) and forced
    // rescans (`POST /reload`, SIGHUP).
    {
        let plane = plane.clone();
        let wake = wake.clone();
        let mut shutdown = plane.serving.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = plane.serving.nodes.groups_changed.notified() => wake.notify_one(),
                    _ = plane.rescan.notified() => wake.notify_one(),
                    // A node rejected a response: with `--on-nack hold` the next generation
                    // holds the documents it blames.
                    _ = plane.serving.rollouts.rejections.woken.notified() => wake.notify_one(),
                    _ = shutdown.changed() => return,
                }
            }
        });
    }
    // `--full-reread`: a generation reads every intent file again this often (an edit through
    // a shared mmap changes no time a watch or a stamp sees).
    let every = source.full_reread();
    if !every.is_zero() {
        let wake = wake.clone();
        let mut shutdown = plane.serving.shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => wake.notify_one(),
                    _ = shutdown.changed() => return,
                }
            }
        });
    }
    let s2 = source.clone();
    crate::generate::watcher::watch_dirs(
        plane,
        source.dirs(),
        resync,
        Some(wake),
        Some(source.dirty().clone()),
        // The generation thread does the work; this only asks for it.
        request,
        move |d| s2.note_missing(d),
    )
    .await
}

//! The task that keeps a [`Mirror`] equal to the store: list, then watch from the listing's
//! revision; after a disconnect watch again from the mirror's revision (backing off while the
//! store is away); when the store says those revisions were compacted, list everything again.
//! Every change asks for a generation.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tracing::{info, warn};

use super::{Mirror, Store, WatchEvent};

/// The first wait after a failure, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why the mirror lists the store from scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    Start,
    Compacted,
}

/// Lists `dir` (the intent, `intent/`; the plugin set, `plugins/`) into `mirror` at start. A store that is away (etcd electing a leader,
/// restarting, or not up yet) is retried with backoff, with a warning on each try, since
/// nothing can be served before the intent is listed; an answer xdst cannot use is an error.
pub async fn list_at_start(store: &impl Store, dir: &'static str, mirror: &Mirror) -> Result<usize, super::StoreError> {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match store.list(dir).await {
            Ok((entries, revision)) => {
                let n = entries.len();
                mirror.replace(entries, revision);
                mirror.set_connected(true, None);
                return Ok(n);
            }
            Err(e @ super::StoreError::Unreachable { .. }) => {
                warn!(store = %store.describe(), dir, error = %e, retry_in = ?backoff, "cannot list the store yet: nothing is served until it is listed");
                mirror.set_connected(false, Some(e.to_string()));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Runs until `shutdown` flips. `changed` asks for a generation; `reloaded` counts a full
/// listing forced by compaction.
pub async fn run<S: Store>(
    store: Arc<S>,
    dir: &'static str,
    mirror: Arc<Mirror>,
    changed: Arc<dyn Fn() + Send + Sync>,
    reloaded: Arc<dyn Fn(Reload) + Send + Sync>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut backoff = FIRST_BACKOFF;
    // A mirror that holds nothing yet lists first; one that holds a listing watches from it.
    let mut list = mirror.revision() == 0;
    let mut down_logged = false;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let attempt = async {
            if list {
                let before = mirror.revision();
                let differ = {
                    let (entries, revision) = store.list(dir).await?;
                    let differ = mirror.replace(entries, revision);
                    info!(store = %store.describe(), dir, from = before, revision, keys = mirror.state().documents, differ, "listed from the store");
                    differ
                };
                if differ > 0 || before == 0 {
                    changed();
                }
            }
            let watch = store.watch(dir, mirror.revision()).await?;
            Ok::<_, super::StoreError>(watch)
        };
        let mut watch = tokio::select! {
            r = attempt => match r {
                Ok(w) => w,
                Err(e) => {
                    if !down_logged {
                        warn!(store = %store.describe(), dir, error = %e, revision = mirror.revision(), "the store is unreachable: serving the last good config, retrying");
                        down_logged = true;
                    }
                    mirror.set_connected(false, Some(e.to_string()));
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = shutdown.changed() => return,
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        list = false;
        if down_logged {
            info!(store = %store.describe(), revision = mirror.revision(), "the store is back: watching from the last revision held");
            down_logged = false;
        }
        mirror.set_connected(true, None);
        backoff = FIRST_BACKOFF;
        loop {
            let next = tokio::select! {
                n = watch.next() => n,
                _ = shutdown.changed() => return,
            };
            match next {
                Some(Ok(WatchEvent::Changes { changes, revision })) => {
                    mirror.apply(changes, revision);
                    changed();
                }
                Some(Ok(WatchEvent::Compacted { compacted })) => {
                    warn!(
                        store = %store.describe(),
                        held = mirror.revision(),
                        compacted,
                        "the store compacted revisions this replica had not seen: listing every document again"
                    );
                    mirror.note_compacted_reload();
                    reloaded(Reload::Compacted);
                    list = true;
                    break;
                }
                Some(Err(e)) => {
                    warn!(store = %store.describe(), error = %e, revision = mirror.revision(), "the store watch broke: watching again from the last revision held");
                    mirror.set_connected(false, Some(e.to_string()));
                    down_logged = true;
                    break;
                }
                None => {
                    mirror.set_connected(false, Some("the watch ended".into()));
                    break;
                }
            }
        }
    }
}

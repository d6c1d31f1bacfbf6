//! The task that keeps a [`Mirror`] equal to the store: list, then watch from the listing's
//! revision; after a disconnect watch again from the mirror's revision (backing off while the
//! store is away); when the store says those revisions were compacted, or turns out to be
//! another store (behind the revision held: recreated or restored), list everything again.
//! Every change asks for a generation.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tracing::{error, info, warn};

use super::{Mirror, Store, WatchEvent};

/// The first wait after a failure, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why the mirror lists the store from scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    Start,
    Compacted,
    /// The store went back in time (recreated empty, or restored from an older state): the
    /// mirror now holds the new store's listing.
    Rewound,
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
    // Why the next listing happens, when the store gave a reason to doubt it is the same, and
    // whether it is another store for certain (another cluster) or the listing will tell (a
    // revision behind the one held).
    let mut suspect: Option<(String, bool)> = None;
    let mut down_logged = false;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let attempt = async {
            if list {
                let before = mirror.revision();
                let (entries, revision) = store.list(dir).await?;
                let differ = mirror.replace(entries, revision);
                let doubt = suspect.take();
                if revision < before || doubt.as_ref().is_some_and(|(_, certain)| *certain) {
                    // The new store's content is what is served from now on, as any replica
                    // that starts now would serve it; the last good generation keeps serving
                    // until the one of this listing succeeds.
                    let why = match doubt {
                        Some((why, _)) => why,
                        None => format!("a listing at revision {revision}, below revision {before} held"),
                    };
                    error!(
                        store = %store.describe(), dir, held = before, revision, keys = mirror.state().documents, differ, %why,
                        "the store went back in time (recreated, or restored from an older state): this replica now takes its \
                         content as listed; writes acknowledged by the store before are gone from it"
                    );
                    mirror.note_rewound(before, revision, why);
                    reloaded(Reload::Rewound);
                } else {
                    info!(store = %store.describe(), dir, from = before, revision, keys = mirror.state().documents, differ, "listed from the store");
                }
                if differ > 0 || before == 0 || revision < before {
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
                _ = mirror.relist_requested() => {
                    warn!(store = %store.describe(), dir, held = mirror.revision(), "a write found the store behind this replica: listing every document again");
                    suspect = Some(("a write's revision was not above the revision held".into(), false));
                    list = true;
                    break;
                }
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
                Some(Ok(WatchEvent::Replaced { revision, why })) => {
                    warn!(store = %store.describe(), dir, held = mirror.revision(), revision, %why, "the store is not the one this replica watched: listing every document again");
                    // Behind: the listing tells; at or past the revision held: another cluster.
                    suspect = Some((why, revision >= mirror.revision()));
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

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
    /// mirror is held as it was until an operator confirms the store as it is now.
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
                let (mut entries, mut revision) = store.list(dir).await?;
                let doubt = suspect.take();
                let rewound = before > 0 && (revision < before || doubt.as_ref().is_some_and(|(_, certain)| *certain));
                if rewound && !mirror.is_confirmed() {
                    // Another store (recreated empty, or restored from an older state): taking
                    // its content would take every node group's config with it. The mirror is
                    // held as it is (the last good config keeps serving, writes are refused)
                    // until an operator takes the store as it is now (POST /reload, SIGHUP).
                    if !mirror.is_held() {
                        let why = match doubt {
                            Some((why, _)) => why,
                            None => format!("a listing at revision {revision}, below revision {before} held"),
                        };
                        error!(
                            store = %store.describe(), dir, held = before, revision, keys = entries.len(), %why,
                            "the store went back in time (recreated, or restored from an older state): this replica keeps \
                             serving its last good config and refuses writes until an operator takes the store as it is \
                             now (POST /reload or SIGHUP) or restores it"
                        );
                        mirror.hold(before, revision, why);
                        reloaded(Reload::Rewound);
                    }
                    mirror.confirmation().await;
                    (entries, revision) = store.list(dir).await?;
                }
                let differ = mirror.replace(entries, revision);
                if mirror.is_held() {
                    warn!(store = %store.describe(), dir, from = before, revision, keys = mirror.state().documents, differ, "an operator took the store as it is now");
                    mirror.release();
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::{Entry, Expect, Revision, StoreError, Watch};
    use super::*;

    /// A store whose listing the test sets, and whose watches deliver the events queued for
    /// them, then nothing.
    #[derive(Default)]
    struct Fake {
        listing: Mutex<(Vec<Entry>, Revision)>,
        lists: AtomicUsize,
        watches: Mutex<Vec<Vec<WatchEvent>>>,
    }

    impl Store for Fake {
        async fn list(&self, _: &str) -> Result<(Vec<Entry>, Revision), StoreError> {
            self.lists.fetch_add(1, Ordering::SeqCst);
            Ok(self.listing.lock().unwrap().clone())
        }
        async fn watch(&self, _: &str, _: Revision) -> Result<Watch, StoreError> {
            let mut w = self.watches.lock().unwrap();
            let events = if w.is_empty() { Vec::new() } else { w.remove(0) };
            Ok(futures::stream::iter(events.into_iter().map(Ok)).chain(futures::stream::pending()).boxed())
        }
        async fn write(&self, _: &str, _: Option<Vec<u8>>, _: Expect) -> Result<Revision, StoreError> {
            unreachable!("the sync task never writes")
        }
        fn describe(&self) -> String {
            "fake://".into()
        }
    }

    /// Issue 33, item 10: a watch that finds another store, and a write that asks for a
    /// listing, make the task list again; a listing behind the revision held is a rewind
    /// (counted, the mirror takes it), one that is not is an ordinary listing.
    #[tokio::test]
    async fn a_store_that_went_back_in_time_is_listed_again_and_counted() {
        let within = Duration::from_secs(5);
        let fake = Arc::new(Fake::default());
        let mirror = Arc::new(Mirror::new("fake://".into()));
        mirror.replace(vec![Entry::new("intent/A/old", "x", 100)], 128);
        *fake.listing.lock().unwrap() = (vec![Entry::new("intent/A/new", "y", 2)], 2);
        fake.watches.lock().unwrap().push(vec![WatchEvent::Replaced { revision: 1, why: "behind".into() }]);
        let rewound = Arc::new(AtomicUsize::new(0));
        let r = rewound.clone();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(run(
            fake.clone(),
            "intent/",
            mirror.clone(),
            Arc::new(|| {}),
            Arc::new(move |why| {
                if why == Reload::Rewound {
                    r.fetch_add(1, Ordering::SeqCst);
                }
            }),
            stopped,
        ));
        // Held: the mirror keeps what it had until an operator confirms.
        assert!(mirror.wait_until(|m| m.state().rewinds == 1 && m.is_held(), within).await);
        assert_eq!(mirror.revision(), 128);
        assert_eq!(mirror.documents().into_iter().map(|(k, _)| k).collect::<Vec<_>>(), ["intent/A/old"]);
        assert_eq!(mirror.state().rewound.map(|r| (r.from, r.to, r.why)), Some((128, 2, "behind".into())));
        assert_eq!(rewound.load(Ordering::SeqCst), 1);
        // Confirmed: the store as it is now is taken.
        assert!(mirror.confirm());
        assert!(mirror.wait_until(|m| !m.is_held() && m.revision() == 2, within).await);
        assert_eq!(mirror.documents().into_iter().map(|(k, _)| k).collect::<Vec<_>>(), ["intent/A/new"]);
        assert!(!mirror.confirm(), "nothing to confirm any more");

        // A write's request: the store is where the mirror is, so no rewind.
        let lists = fake.lists.load(Ordering::SeqCst);
        mirror.request_relist();
        let deadline = tokio::time::Instant::now() + within;
        while fake.lists.load(Ordering::SeqCst) == lists {
            assert!(tokio::time::Instant::now() < deadline, "no listing after a write's request");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!mirror.is_held(), "the listing at 2 was no rewind");
        // The same store, behind again: a rewind, held again.
        *fake.listing.lock().unwrap() = (vec![], 1);
        mirror.request_relist();
        assert!(mirror.wait_until(|m| m.is_held() && m.state().rewinds >= 2, within).await);
        assert_eq!((mirror.state().rewinds, mirror.revision(), mirror.state().documents), (2, 2, 1));
        assert_eq!(rewound.load(Ordering::SeqCst), 2);
        stop.send(true).unwrap();
        task.await.unwrap();
    }
}

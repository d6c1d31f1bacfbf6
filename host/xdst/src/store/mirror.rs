//! The local copy of the store's intent documents, at a revision.
//!
//! [`super::sync::run`] fills it from the store; generations read it; the intent API reads
//! a document's mod revision from it and waits on it for its own writes. Reading never touches
//! the network.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;

use super::{Change, Entry, Revision};

/// A document as the mirror holds it.
#[derive(Debug, Clone)]
pub struct Held {
    pub value: Arc<[u8]>,
    pub mod_revision: Revision,
}

/// Whether the store can be reached, as the mirror's task last found it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StoreState {
    /// `etcd://HOST:PORT,.../PREFIX`.
    pub store: String,
    /// The mirror holds a listing and its watch is running.
    pub connected: bool,
    /// The store revision the mirror holds (0: nothing listed yet).
    pub revision: Revision,
    pub documents: usize,
    /// Why the store is not connected.
    pub error: Option<String>,
    /// Unix seconds of the last change of `connected`.
    pub since: u64,
    /// Full listings after the first: because the watch's revisions were compacted away.
    pub reloads_compacted: u64,
}

pub struct Mirror {
    docs: Mutex<BTreeMap<String, Held>>,
    state: Mutex<StoreState>,
    revision: watch::Sender<Revision>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl Mirror {
    pub fn new(store: String) -> Mirror {
        Mirror {
            docs: Mutex::new(BTreeMap::new()),
            state: Mutex::new(StoreState { store, since: unix_now(), ..Default::default() }),
            revision: watch::channel(0).0,
        }
    }

    /// Replaces everything with a fresh listing at `revision`; how many keys differ.
    pub fn replace(&self, entries: Vec<Entry>, revision: Revision) -> usize {
        let fresh: BTreeMap<String, Held> = entries
            .into_iter()
            .map(|e| (e.key, Held { value: e.value.into(), mod_revision: e.mod_revision }))
            .collect();
        let mut docs = locked(&self.docs);
        let differ =
            fresh.iter().filter(|(k, v)| docs.get(*k).is_none_or(|old| old.mod_revision != v.mod_revision)).count()
                + docs.keys().filter(|k| !fresh.contains_key(*k)).count();
        *docs = fresh;
        let n = docs.len();
        drop(docs);
        self.advance(revision, n);
        differ
    }

    /// Applies watched changes, up to `revision`.
    pub fn apply(&self, changes: Vec<Change>, revision: Revision) {
        let mut docs = locked(&self.docs);
        for c in changes {
            match c {
                Change::Put(e) => {
                    docs.insert(e.key, Held { value: e.value.into(), mod_revision: e.mod_revision });
                }
                Change::Delete { key, .. } => {
                    docs.remove(&key);
                }
            }
        }
        let n = docs.len();
        drop(docs);
        self.advance(revision, n);
    }

    fn advance(&self, revision: Revision, documents: usize) {
        {
            let mut st = locked(&self.state);
            st.revision = st.revision.max(revision);
            st.documents = documents;
        }
        self.revision.send_if_modified(|r| {
            let moved = revision > *r;
            *r = (*r).max(revision);
            moved
        });
    }

    /// The revision held.
    pub fn revision(&self) -> Revision {
        *self.revision.borrow()
    }

    /// Waits until the mirror holds `revision` (or later); false on timeout.
    pub async fn wait_for(&self, revision: Revision, timeout: Duration) -> bool {
        let mut rx = self.revision.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|r| *r >= revision)).await.is_ok_and(|r| r.is_ok())
    }

    /// Every document, in key order.
    pub fn documents(&self) -> Vec<(String, Held)> {
        locked(&self.docs).iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// A document's mod revision, if the mirror holds it.
    /// The value held for `key`.
    pub fn get(&self, key: &str) -> Option<Held> {
        locked(&self.docs).get(key).cloned()
    }

    /// Sees every revision the mirror moves to.
    pub fn subscribe(&self) -> watch::Receiver<Revision> {
        self.revision.subscribe()
    }

    pub fn mod_revision(&self, key: &str) -> Option<Revision> {
        locked(&self.docs).get(key).map(|h| h.mod_revision)
    }

    pub fn state(&self) -> StoreState {
        locked(&self.state).clone()
    }

    /// Records whether the store is reachable (logged by the caller).
    pub fn set_connected(&self, connected: bool, error: Option<String>) {
        let mut st = locked(&self.state);
        if st.connected != connected {
            st.since = unix_now();
        }
        st.connected = connected;
        st.error = error;
    }

    pub fn note_compacted_reload(&self) {
        locked(&self.state).reloads_compacted += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, value: &str, rev: Revision) -> Entry {
        Entry { key: key.into(), value: value.into(), mod_revision: rev }
    }

    #[tokio::test]
    async fn a_listing_replaces_and_changes_apply_in_order_and_waiters_wake() {
        let m = Arc::new(Mirror::new("etcd://test/x".into()));
        assert_eq!(m.replace(vec![entry("intent/A/a", "1", 3), entry("intent/A/b", "2", 4)], 5), 2);
        assert_eq!(m.revision(), 5);
        let waiter = {
            let m = m.clone();
            tokio::spawn(async move { m.wait_for(7, Duration::from_secs(5)).await })
        };
        m.apply(vec![Change::Put(entry("intent/A/c", "3", 6))], 6);
        m.apply(
            vec![Change::Delete { key: "intent/A/a".into(), revision: 7 }, Change::Put(entry("intent/A/b", "4", 7))],
            7,
        );
        assert!(waiter.await.unwrap(), "a waiter for revision 7 was not woken");
        let docs = m.documents();
        let keys: Vec<_> = docs.iter().map(|(k, h)| (k.as_str(), h.mod_revision)).collect();
        assert_eq!(keys, [("intent/A/b", 7), ("intent/A/c", 6)]);
        assert_eq!(m.mod_revision("intent/A/b"), Some(7));
        // A listing after a compaction: one key changed, one gone, one new.
        let differ = m.replace(vec![entry("intent/A/b", "4", 7), entry("intent/A/d", "5", 9)], 9);
        assert_eq!(differ, 2, "intent/A/c removed and intent/A/d added");
        assert!(!m.wait_for(10, Duration::from_millis(20)).await, "revision 10 was never reached");
        assert_eq!(m.state().documents, 2);
    }
}

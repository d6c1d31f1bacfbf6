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
    pub create_revision: Revision,
}

impl Held {
    fn of(value: Vec<u8>, mod_revision: Revision, create_revision: Revision) -> Held {
        Held { value: value.into(), mod_revision, create_revision }
    }
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
    /// Times the store was found to be another store (recreated, or restored from an older
    /// state: behind the revision held, or another cluster).
    pub rewinds: u64,
    /// The store went back in time and the mirror keeps what it held (the last good config
    /// keeps serving, writes are refused) until an operator confirms the store as it is now
    /// (`POST /reload`, SIGHUP): an etcd recreated empty must not empty every Envoy.
    pub held: bool,
    /// The last time that happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewound: Option<Rewound>,
    /// Keys that are not UTF-8 (escaped): a generation fails naming them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys_not_utf8: Vec<String>,
}

/// The store went back in time: the mirror held `from`, the store's listing was at `to`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Rewound {
    pub from: Revision,
    pub to: Revision,
    pub why: String,
    /// Unix seconds.
    pub at: u64,
}

pub struct Mirror {
    docs: Mutex<BTreeMap<String, Held>>,
    /// The records of when each team key was created ([`super::births`]), mirrored apart.
    births: std::sync::OnceLock<Arc<Mirror>>,
    /// Keys that are not UTF-8, escaped, with their mod revisions: kept apart from `docs` so
    /// that an escaped key never stands for a real one.
    not_utf8: Mutex<BTreeMap<String, Revision>>,
    state: Mutex<StoreState>,
    revision: watch::Sender<Revision>,
    relist: tokio::sync::Notify,
    /// An operator confirmed the store as it is now, while the mirror was held.
    confirmed: std::sync::atomic::AtomicBool,
    confirm: tokio::sync::Notify,
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
            births: std::sync::OnceLock::new(),
            not_utf8: Mutex::new(BTreeMap::new()),
            state: Mutex::new(StoreState { store, since: unix_now(), ..Default::default() }),
            revision: watch::channel(0).0,
            relist: tokio::sync::Notify::new(),
            confirmed: std::sync::atomic::AtomicBool::new(false),
            confirm: tokio::sync::Notify::new(),
        }
    }

    /// Replaces everything with a fresh listing at `revision`; how many keys differ. The
    /// listing is the store as it is: its revision is taken even when it is below the one held
    /// (a store recreated or restored; the caller tells it apart and logs it).
    pub fn replace(&self, entries: Vec<Entry>, revision: Revision) -> usize {
        let (bad, good): (Vec<Entry>, Vec<Entry>) = entries.into_iter().partition(|e| e.not_utf8);
        let fresh: BTreeMap<String, Held> =
            good.into_iter().map(|e| (e.key, Held::of(e.value, e.mod_revision, e.create_revision))).collect();
        let fresh_bad: BTreeMap<String, Revision> = bad.into_iter().map(|e| (e.key, e.mod_revision)).collect();
        let mut docs = locked(&self.docs);
        let mut not_utf8 = locked(&self.not_utf8);
        let differ =
            fresh.iter().filter(|(k, v)| docs.get(*k).is_none_or(|old| old.mod_revision != v.mod_revision)).count()
                + docs.keys().filter(|k| !fresh.contains_key(*k)).count()
                + fresh_bad.iter().filter(|(k, r)| not_utf8.get(*k) != Some(r)).count()
                + not_utf8.keys().filter(|k| !fresh_bad.contains_key(*k)).count();
        *docs = fresh;
        *not_utf8 = fresh_bad;
        let (n, bad) = (docs.len(), not_utf8.keys().cloned().collect());
        drop((docs, not_utf8));
        self.advance(revision, n, bad, true);
        differ
    }

    /// Applies watched changes, up to `revision`.
    pub fn apply(&self, changes: Vec<Change>, revision: Revision) {
        let mut docs = locked(&self.docs);
        let mut not_utf8 = locked(&self.not_utf8);
        for c in changes {
            match c {
                Change::Put(e) if e.not_utf8 => {
                    not_utf8.insert(e.key, e.mod_revision);
                }
                Change::Put(e) => {
                    docs.insert(e.key, Held::of(e.value, e.mod_revision, e.create_revision));
                }
                Change::Delete { key, not_utf8: true, .. } => {
                    not_utf8.remove(&key);
                }
                Change::Delete { key, .. } => {
                    docs.remove(&key);
                }
            }
        }
        let (n, bad) = (docs.len(), not_utf8.keys().cloned().collect());
        drop((docs, not_utf8));
        self.advance(revision, n, bad, false);
    }

    /// Moves to `revision` (a listing's exactly, a watch's only forward).
    fn advance(&self, revision: Revision, documents: usize, not_utf8: Vec<String>, listed: bool) {
        let to = |held: Revision| if listed { revision } else { held.max(revision) };
        {
            let mut st = locked(&self.state);
            st.revision = to(st.revision);
            st.documents = documents;
            st.keys_not_utf8 = not_utf8;
        }
        self.revision.send_if_modified(|r| {
            let moved = to(*r) != *r;
            *r = to(*r);
            moved
        });
    }

    /// Records that the store was found to be another store (the mirror held `from`, the
    /// store listed at `to`) and holds the mirror as it is until [`Mirror::confirm`]. Wakes
    /// whoever waits on the mirror.
    pub fn hold(&self, from: Revision, to: Revision, why: String) {
        {
            let mut st = locked(&self.state);
            st.rewinds += 1;
            st.held = true;
            st.rewound = Some(Rewound { from, to, why, at: unix_now() });
        }
        self.revision.send_modify(|_| {});
    }

    /// Whether the mirror is held after the store went back in time.
    pub fn is_held(&self) -> bool {
        locked(&self.state).held
    }

    /// An operator takes the store as it is now: a held mirror lists it and lets go (false
    /// if the mirror was not held).
    pub fn confirm(&self) -> bool {
        if !self.is_held() {
            return false;
        }
        self.confirmed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.confirm.notify_one();
        true
    }

    /// Whether an operator confirmed the store since the mirror was held.
    pub fn is_confirmed(&self) -> bool {
        self.confirmed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves when an operator confirmed the store (at once if already confirmed).
    pub async fn confirmation(&self) {
        while !self.is_confirmed() {
            self.confirm.notified().await;
        }
    }

    /// The held mirror took the store's listing: no longer held. Wakes whoever waits.
    pub fn release(&self) {
        self.confirmed.store(false, std::sync::atomic::Ordering::SeqCst);
        locked(&self.state).held = false;
        self.revision.send_modify(|_| {});
    }

    /// The keys that are not UTF-8, escaped.
    pub fn keys_not_utf8(&self) -> Vec<String> {
        locked(&self.not_utf8).keys().cloned().collect()
    }

    /// The first key that is not UTF-8, as an error naming it escaped (issue 33, item 11).
    pub fn check_keys(&self) -> Result<(), super::StoreProblem> {
        match locked(&self.not_utf8).keys().next() {
            None => Ok(()),
            Some(key) => Err(super::StoreProblem::KeyNotUtf8 { store: self.state().store, key: key.clone() }),
        }
    }

    /// Asks the task that keeps the mirror to list the store again (an answer of the store
    /// showed it went back in time).
    pub fn request_relist(&self) {
        self.relist.notify_one();
    }

    /// Resolves when [`Mirror::request_relist`] was called.
    pub async fn relist_requested(&self) {
        self.relist.notified().await
    }

    /// Waits until `ready` holds of the mirror (checked at every revision it moves to and
    /// every rewind); false on timeout.
    pub async fn wait_until(&self, ready: impl Fn(&Mirror) -> bool, timeout: Duration) -> bool {
        let mut rx = self.revision.subscribe();
        let wait = async {
            // `ready` reads the mirror, so it runs with no borrow of the channel held.
            while !ready(self) {
                if rx.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        tokio::time::timeout(timeout, wait).await.unwrap_or(false)
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

    /// Gives this (intent) mirror the mirror of the creation records.
    pub fn set_births(&self, births: Arc<Mirror>) {
        let _ = self.births.set(births);
    }

    /// The mirror of the creation records, if this is the intent's.
    pub fn births(&self) -> Option<Arc<Mirror>> {
        self.births.get().cloned()
    }

    /// When the team key `key`, as held now, was created, by the records every replica reads;
    /// `None` for a key not held, or whose creation has no record yet.
    pub fn birth(&self, key: &str) -> Option<String> {
        let held = self.get(key)?;
        super::births::of(self.births.get()?, key, held.create_revision)
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
        Entry::new(key, value, rev)
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
            vec![
                Change::Delete { key: "intent/A/a".into(), revision: 7, not_utf8: false },
                Change::Put(entry("intent/A/b", "4", 7)),
            ],
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

    /// Issue 33, item 11: keys that are not UTF-8 are held apart (escaped) and make
    /// `check_keys` fail naming them, until they are deleted.
    #[test]
    fn keys_that_are_not_utf8_are_held_apart_and_named() {
        let m = Mirror::new("etcd://test/x".into());
        let bad = Entry { not_utf8: true, ..Entry::new("intent/A/w\\xffeb", "x", 3) };
        assert_eq!(m.replace(vec![entry("intent/A/a", "1", 2), bad], 3), 2);
        assert_eq!(m.documents().len(), 1, "the bad key is no document");
        let e = m.check_keys().unwrap_err().to_string();
        assert!(e.contains("etcd://test/x key intent/A/w\\xffeb (escaped): the key is not UTF-8"), "{e}");
        m.apply(vec![Change::Delete { key: "intent/A/w\\xffeb".into(), revision: 4, not_utf8: true }], 4);
        assert!(m.check_keys().is_ok());
        assert_eq!(m.documents().len(), 1);
    }

    /// Issue 33, item 10: a listing below the revision held is taken as it is (once an
    /// operator confirmed the store), and waiters see the hold.
    #[tokio::test]
    async fn a_listing_behind_the_mirror_takes_its_revision() {
        let m = Arc::new(Mirror::new("etcd://test/x".into()));
        m.replace(vec![entry("intent/A/a", "1", 100)], 128);
        let waiter = {
            let m = m.clone();
            tokio::spawn(async move {
                m.wait_until(|m| m.state().rewinds == 1 && m.is_held(), Duration::from_secs(5)).await
            })
        };
        m.hold(128, 2, "test".into());
        assert!(waiter.await.unwrap());
        assert!(m.confirm() && m.is_confirmed());
        m.replace(vec![entry("intent/A/b", "2", 2)], 2);
        m.release();
        assert!(!m.is_held() && !m.is_confirmed());
        assert_eq!((m.revision(), m.state().revision), (2, 2));
        assert_eq!(m.state().rewound.map(|r| (r.from, r.to)), Some((128, 2)));
        m.apply(vec![Change::Put(entry("intent/A/c", "3", 3))], 3);
        assert_eq!(m.revision(), 3);
        m.apply(vec![], 1);
        assert_eq!(m.revision(), 3, "a watch never moves the mirror back");
    }
}

//! When each team's store key was created, the same on every replica (issue 49, item 3).
//!
//! "The oldest wins" reads `creationTimestamp`, which a team must not choose. A document the
//! intent API writes carries the time of its first write in its value; a value a team writes
//! straight into its prefix (`intent/namespaces/<namespace>/`) carries whatever the team
//! wrote. For those, xdst keeps a record under `created/`, where no team's etcd role reaches:
//! `created/<intent key>` holds `{"createRevision": R, "creationTimestamp": T}`, the key's
//! etcd create revision and when a replica first saw it created. The first replica to see a
//! key without a record for its create revision writes one (a compare-and-swap, so exactly one
//! write wins); every replica mirrors the records and stamps what they say. A key deleted and
//! written again has a new create revision, so a new record. A record whose key is gone is
//! deleted by whichever replica sees it first.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use super::{Expect, Mirror, Revision, Store, StoreError};

/// Where the records live under the store's prefix.
pub const BIRTHS_DIR: &str = "created/";

/// One record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Birth {
    pub create_revision: Revision,
    pub creation_timestamp: String,
}

/// The record's key for the intent key `key`.
pub fn record_key(key: &str) -> String {
    format!("{BIRTHS_DIR}{key}")
}

/// The creation time recorded for the intent key `key` created at `create_revision`, if the
/// births mirror holds one for that creation.
pub fn of(births: &Mirror, key: &str, create_revision: Revision) -> Option<String> {
    let held = births.get(&record_key(key))?;
    let birth: Birth = serde_json::from_slice(&held.value).ok()?;
    (birth.create_revision == create_revision && xdst_core::intent::is_creation_timestamp(&birth.creation_timestamp))
        .then_some(birth.creation_timestamp)
}

/// What the records lack: (record key, the write, what the record key must be as) for each team
/// key without a record of its creation, and each record whose key is gone.
fn wanted(intent: &Mirror, births: &Mirror) -> Vec<(String, Option<Vec<u8>>, Expect)> {
    let now = xdst_core::intent::creation_timestamp(std::time::SystemTime::now());
    let docs = intent.documents();
    let mut out = Vec::new();
    for (key, held) in &docs {
        if !super::under_namespace(key) || of(births, key, held.create_revision).is_some() {
            continue;
        }
        let birth = Birth { create_revision: held.create_revision, creation_timestamp: now.clone() };
        let record = record_key(key);
        let expect = Expect::of(births.mod_revision(&record));
        out.push((record, serde_json::to_vec(&birth).ok(), expect));
    }
    for (record, held) in births.documents() {
        let key = record.strip_prefix(BIRTHS_DIR).unwrap_or(&record);
        if !docs.iter().any(|(k, _)| k == key) {
            out.push((record, None, Expect::ModRevision(held.mod_revision)));
        }
    }
    out
}

/// Keeps the records: whenever either mirror moves (and both are connected), writes what
/// [`wanted`] says. Another replica's write first is no error: the mirror brings it.
pub async fn keep<S: Store>(
    store: Arc<S>,
    intent: Arc<Mirror>,
    births: Arc<Mirror>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let (mut a, mut b) = (intent.subscribe(), births.subscribe());
    loop {
        if intent.state().connected && births.state().connected && !intent.is_held() {
            for (record, value, expect) in wanted(&intent, &births) {
                match store.write(&record, value, expect).await {
                    Ok(_) | Err(StoreError::Conflict { .. }) => {}
                    Err(e) => {
                        warn!(store = %store.describe(), record, error = %e, "cannot record when a key was created; trying again on the next change");
                        break;
                    }
                }
            }
        }
        tokio::select! {
            r = a.changed() => if r.is_err() { return },
            r = b.changed() => if r.is_err() { return },
            _ = shutdown.changed() => return,
        }
        debug!("the intent or its creation records moved");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::store::Entry;

    fn entry(key: &str, value: &[u8], rev: Revision, created: Revision) -> Entry {
        Entry { create_revision: created, ..Entry::new(key, value, rev) }
    }

    /// A team key without a record, or with one of an earlier creation, wants one; a platform
    /// key does not; a record whose key is gone is deleted; a good record is left alone.
    #[test]
    fn records_follow_each_team_key_s_creation() {
        let (intent, births) = (Mirror::new("s".into()), Mirror::new("s".into()));
        let old = serde_json::to_vec(&Birth { create_revision: 3, creation_timestamp: "2025-01-01T00:00:00Z".into() })
            .unwrap();
        intent.replace(
            vec![
                entry("intent/namespaces/team-a/Gateway/new", b"x", 9, 9),
                entry("intent/namespaces/team-a/Gateway/again", b"x", 8, 8),
                entry("intent/namespaces/team-a/Gateway/kept", b"x", 7, 5),
                entry("intent/Gateway/infra/gw", b"x", 4, 4),
            ],
            9,
        );
        let kept = serde_json::to_vec(&Birth { create_revision: 5, creation_timestamp: "2026-01-01T00:00:00Z".into() });
        births.replace(
            vec![
                entry("created/intent/namespaces/team-a/Gateway/again", &old, 6, 6),
                entry("created/intent/namespaces/team-a/Gateway/kept", &kept.unwrap(), 6, 6),
                entry("created/intent/namespaces/team-a/Gateway/gone", &old, 2, 2),
            ],
            9,
        );
        let mut w: Vec<(String, bool, Expect)> =
            wanted(&intent, &births).into_iter().map(|(k, v, e)| (k, v.is_some(), e)).collect();
        w.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            w,
            [
                ("created/intent/namespaces/team-a/Gateway/again".into(), true, Expect::ModRevision(6)),
                ("created/intent/namespaces/team-a/Gateway/gone".into(), false, Expect::ModRevision(2)),
                ("created/intent/namespaces/team-a/Gateway/new".into(), true, Expect::Absent),
            ]
        );
        assert_eq!(of(&births, "intent/namespaces/team-a/Gateway/kept", 5).as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(of(&births, "intent/namespaces/team-a/Gateway/again", 8), None, "a record of an earlier creation");
    }
}

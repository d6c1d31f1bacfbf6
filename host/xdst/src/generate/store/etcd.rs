//! [`Store`] on etcd v3 (the `etcd-client` crate): listings paged at one revision, a prefix
//! watch from a revision, and compare-and-swap writes as transactions on `mod_revision`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use futures::StreamExt;

use super::{Change, Entry, Expect, Revision, Store, StoreCause, StoreConfig, StoreError, Watch, WatchEvent};

/// Keys per page of a listing: a page is one gRPC message, bounded by [`MAX_MESSAGE`].
const PAGE: i64 = 256;
/// The largest message taken from etcd.
const MAX_MESSAGE: usize = 64 << 20;

pub struct Etcd {
    client: Client,
    config: StoreConfig,
    /// Per directory listed, the cluster id of its last listing: a watch of a store that
    /// names another cluster watches a different store.
    clusters: Mutex<HashMap<String, u64>>,
}

impl Etcd {
    /// A client for `config`. Connections are made lazily: an etcd that is down now is retried
    /// by every request, so a replica can start while etcd is away.
    pub async fn connect(config: StoreConfig) -> Result<Etcd, StoreError> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(config.timeout)
            .with_keep_alive(Duration::from_secs(2), config.timeout)
            .with_keep_alive_while_idle(true);
        if let Some(tls) = &config.tls {
            let invalid = |file: &std::path::Path, cause: std::io::Error| StoreError::Invalid {
                store: config.url(),
                cause: StoreCause::ReadFile { file: file.to_owned(), cause },
            };
            let ca = std::fs::read(&tls.ca).map_err(|e| invalid(&tls.ca, e))?;
            let mut t = etcd_client::TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(ca));
            if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
                let c = std::fs::read(cert).map_err(|e| invalid(cert, e))?;
                let k = std::fs::read(key).map_err(|e| invalid(key, e))?;
                t = t.identity(etcd_client::Identity::from_pem(c, k));
            }
            options = options.with_tls(t);
        }
        let scheme = if config.tls.is_some() { "https" } else { "http" };
        let endpoints: Vec<String> = config.endpoints.iter().map(|e| format!("{scheme}://{e}")).collect();
        let client = Client::connect(&endpoints, Some(options)).await.map_err(|e| unreachable(&config, e))?;
        Ok(Etcd { client, config, clusters: Mutex::default() })
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.config.prefix)
    }

    /// The key relative to the prefix, and whether it is not UTF-8 (then escaped); etcd
    /// values carry whole keys. A key that is not UTF-8 is no error here: it fails the
    /// generation that reads it, on every replica alike, never a listing (issue 33, item 11).
    fn relative(&self, key: &[u8]) -> Result<(String, bool), StoreError> {
        relative(&self.config.prefix, key).ok_or_else(|| StoreError::Invalid {
            store: self.config.url(),
            cause: StoreCause::OutsidePrefix(super::key_text(key).0.escape_debug().to_string()),
        })
    }

    async fn timed<T>(&self, f: impl Future<Output = Result<T, etcd_client::Error>>) -> Result<T, StoreError> {
        match tokio::time::timeout(self.config.timeout, f).await {
            Ok(r) => r.map_err(|e| unreachable(&self.config, e)),
            Err(_) => Err(StoreError::Unreachable {
                store: self.config.url(),
                cause: StoreCause::Timeout(self.config.timeout),
            }),
        }
    }

    /// The client, for what needs etcd itself (leases).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Every key xdst uses starts with this (`/xdst/`).
    pub fn prefix(&self) -> &str {
        &self.config.prefix
    }

    /// How long one request may take.
    pub fn timeout(&self) -> Duration {
        self.config.timeout
    }
}

/// `key` relative to `prefix` (see [`super::key_text`]); None outside the prefix.
fn relative(prefix: &str, key: &[u8]) -> Option<(String, bool)> {
    key.strip_prefix(prefix.as_bytes()).map(super::key_text)
}

fn unreachable(config: &StoreConfig, e: etcd_client::Error) -> StoreError {
    StoreError::Unreachable { store: config.url(), cause: e.into() }
}

/// Why a watch of a store from `after` (listed from `cluster`) watches another store, by the
/// first answer's revision and cluster id; None when it is the same store.
fn replaced(after: Revision, cluster: Option<u64>, revision: Revision, cluster_id: u64) -> Option<String> {
    if revision < after {
        return Some(format!(
            "the store is at revision {revision}, below revision {after} that this replica holds: \
             it was recreated or restored from an older state"
        ));
    }
    match cluster {
        Some(c) if c != 0 && cluster_id != 0 && c != cluster_id => Some(format!(
            "the store names cluster {cluster_id:x}, not cluster {c:x} that was listed: it is another etcd"
        )),
        _ => None,
    }
}

/// The first key after every key that starts with `prefix`.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

impl Store for Etcd {
    async fn list(&self, dir: &str) -> Result<(Vec<Entry>, Revision), StoreError> {
        let start = self.key(dir);
        let end = prefix_end(&start);
        let mut kv = self.client.kv_client().max_decoding_message_size(MAX_MESSAGE);
        let mut entries = Vec::new();
        let mut from = start.into_bytes();
        let mut revision = 0;
        loop {
            let mut options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
            if revision > 0 {
                // Every page at the first page's revision: one consistent listing.
                options = options.with_revision(revision);
            }
            let page = self.timed(kv.get(from.clone(), Some(options))).await?;
            if revision == 0 {
                revision = page.header().map(|h| h.revision()).unwrap_or(0);
            }
            if let Some(h) = page.header() {
                self.clusters.lock().unwrap_or_else(PoisonError::into_inner).insert(dir.to_owned(), h.cluster_id());
            }
            for item in page.kvs() {
                let (key, not_utf8) = self.relative(item.key())?;
                entries.push(Entry {
                    key,
                    value: item.value().to_vec(),
                    mod_revision: item.mod_revision(),
                    create_revision: item.create_revision(),
                    not_utf8,
                });
            }
            match page.kvs().last() {
                Some(last) if page.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => break,
            }
        }
        Ok((entries, revision))
    }

    async fn watch(&self, dir: &str, after: Revision) -> Result<Watch, StoreError> {
        let options = WatchOptions::new().with_prefix().with_start_revision(after + 1);
        let mut client = self.client.watch_client().max_decoding_message_size(MAX_MESSAGE);
        let stream = self.timed(client.watch(self.key(dir), Some(options))).await?;
        let (url, prefix) = (self.config.url(), self.config.prefix.clone());
        let cluster = self.clusters.lock().unwrap_or_else(PoisonError::into_inner).get(dir).copied();
        // The state: the stream, and whether its first answer was checked.
        let events = futures::stream::unfold(Some((stream, false)), move |state| {
            let (url, prefix) = (url.clone(), prefix.clone());
            async move {
                let (mut stream, mut checked) = state?;
                loop {
                    let message = match stream.message().await {
                        Ok(Some(m)) => m,
                        Ok(None) => {
                            let e = StoreError::Unreachable { store: url, cause: StoreCause::WatchEnded };
                            return Some((Err(e), None));
                        }
                        Err(e) => {
                            let e = StoreError::Unreachable { store: url, cause: e.into() };
                            return Some((Err(e), None));
                        }
                    };
                    // The first answer (the watch created) says which store this is: one
                    // whose revision is below the one this replica holds, or of another
                    // cluster, was recreated or restored; watching it from `after` would be
                    // silent for good (issue 33, item 10).
                    if !checked && let Some(h) = message.header() {
                        checked = true;
                        if let Some(why) = replaced(after, cluster, h.revision(), h.cluster_id()) {
                            let event = WatchEvent::Replaced { revision: h.revision(), why };
                            return Some((Ok(event), None));
                        }
                    }
                    if message.compact_revision() > 0 {
                        let event = WatchEvent::Compacted { compacted: message.compact_revision() };
                        return Some((Ok(event), None));
                    }
                    if message.canceled() {
                        let cause = StoreCause::WatchCancelled(message.cancel_reason().to_owned());
                        return Some((Err(StoreError::Invalid { store: url, cause }), None));
                    }
                    if message.events().is_empty() {
                        continue; // created, or a progress notification
                    }
                    let mut changes = Vec::with_capacity(message.events().len());
                    for event in message.events() {
                        let Some(kv) = event.kv() else { continue };
                        let Some((key, not_utf8)) = relative(&prefix, kv.key()) else { continue };
                        changes.push(match event.event_type() {
                            EventType::Put => Change::Put(Entry {
                                key,
                                value: kv.value().to_vec(),
                                mod_revision: kv.mod_revision(),
                                create_revision: kv.create_revision(),
                                not_utf8,
                            }),
                            EventType::Delete => Change::Delete { key, revision: kv.mod_revision(), not_utf8 },
                        });
                    }
                    let revision = message.header().map(|h| h.revision()).unwrap_or(0);
                    return Some((Ok(WatchEvent::Changes { changes, revision }), Some((stream, checked))));
                }
            }
        });
        Ok(events.boxed())
    }

    async fn write(&self, key: &str, value: Option<Vec<u8>>, expect: Expect) -> Result<Revision, StoreError> {
        let full = self.key(key);
        let compare = match expect {
            Expect::Absent => Compare::version(full.clone(), CompareOp::Equal, 0),
            Expect::ModRevision(r) => Compare::mod_revision(full.clone(), CompareOp::Equal, r),
        };
        let op = match value {
            Some(v) => TxnOp::put(full.clone(), v, None),
            None => TxnOp::delete(full.clone(), None),
        };
        let txn = Txn::new().when([compare]).and_then([op]).or_else([TxnOp::get(full.clone(), None)]);
        let mut kv = self.client.kv_client();
        let answer = self.timed(kv.txn(txn)).await?;
        if answer.succeeded() {
            return Ok(answer.header().map(|h| h.revision()).unwrap_or(0));
        }
        let current = answer.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => Some(g.kvs().first().map(|kv| kv.mod_revision())),
            _ => None,
        });
        Err(StoreError::Conflict { key: key.to_owned(), current: current.flatten() })
    }

    fn describe(&self) -> String {
        self.config.url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_at_the_next_key_that_does_not_start_with_it() {
        assert_eq!(prefix_end("/xdst/intent/"), b"/xdst/intent0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
    }

    /// Issue 33, item 10: a store whose first watch answer is below the revision held, or of
    /// another cluster, is another store.
    #[test]
    fn a_store_behind_the_revision_held_or_of_another_cluster_is_another_store() {
        assert_eq!(replaced(128, Some(7), 128, 7), None, "nothing new since");
        assert_eq!(replaced(128, Some(7), 300, 7), None);
        assert_eq!(replaced(128, None, 300, 9), None, "never listed: nothing to compare");
        let e = replaced(128, Some(7), 1, 7).unwrap();
        assert!(e.contains("revision 1, below revision 128"), "{e}");
        let e = replaced(128, Some(7), 300, 9).unwrap();
        assert!(e.contains("another etcd"), "{e}");
    }

    /// Issue 33, item 11: a key that is not UTF-8 is relative like any other, escaped.
    #[test]
    fn a_key_that_is_not_utf8_is_escaped_not_an_error() {
        assert_eq!(relative("/x/", b"/x/intent/A/a"), Some(("intent/A/a".into(), false)));
        assert_eq!(relative("/x/", b"/x/intent/A/w\xffeb\n"), Some(("intent/A/w\\xffeb\\n".into(), true)));
        assert_eq!(relative("/x/", b"/y/intent/A/a"), None);
    }

    #[test]
    fn keys_are_relative_to_the_prefix() {
        let c = StoreConfig::parse("etcd://127.0.0.1:1/xdst").unwrap();
        assert_eq!(format!("{}{}", c.prefix, super::super::intent_key("Service", "web")), "/xdst/intent/Service/web");
    }
}

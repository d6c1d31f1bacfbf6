//! Intent in a shared store, so that many xdst processes serve one intent
//! (`--store etcd://HOST:PORT[,HOST:PORT...]/PREFIX`).
//!
//! A [`Store`] is what every backend provides: a consistent listing at a revision, a watch from
//! a revision that either delivers every change or says the history is gone, and a
//! compare-and-swap write of one key. etcd ([`etcd::Etcd`]) is the one built; the shape fits a
//! Postgres table with a revision column and a Kubernetes API server's list and watch.
//!
//! The rest of xdst never talks to the store while translating: [`sync::run`] keeps a
//! [`Mirror`] of the intent documents current beside the generation thread, and a generation
//! reads the mirror as it would a directory. See `docs/design/010-replicas-on-etcd.md`.

pub mod births;
pub mod etcd;
pub mod fleet;
pub mod mirror;
pub mod plugins;
pub mod sync;
pub mod transfer;
pub mod writes;

use std::time::Duration;

pub use mirror::Mirror;

/// Where intent documents live under a store's prefix: `<prefix>/intent/<kind>/<name>`.
pub const INTENT_DIR: &str = "intent/";

/// A store revision: etcd's, which counts every change to the whole store.
pub type Revision = i64;

/// One key under the prefix, as listed or watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key relative to the prefix (`intent/Service/web`); a key that is not UTF-8 is
    /// escaped ([`key_text`]) and `not_utf8` says so.
    pub key: String,
    pub value: Vec<u8>,
    /// The revision of the key's last change.
    pub mod_revision: Revision,
    /// The revision the key was created at (etcd's `create_revision`): the same on every
    /// replica, and new when the key is deleted and written again.
    pub create_revision: Revision,
    /// The key's bytes are not UTF-8: it names nothing xdst can serve, and a generation that
    /// reads it fails naming it (issue 33, item 11).
    pub not_utf8: bool,
}

impl Entry {
    pub fn new(key: impl Into<String>, value: impl Into<Vec<u8>>, mod_revision: Revision) -> Entry {
        Entry { key: key.into(), value: value.into(), mod_revision, create_revision: mod_revision, not_utf8: false }
    }
}

/// A key's bytes as text: the key itself when it is UTF-8 (`false`), else its bytes with
/// everything but printable ASCII escaped (`intent/Service/w\xffeb`, `true`).
pub fn key_text(raw: &[u8]) -> (String, bool) {
    match std::str::from_utf8(raw) {
        Ok(k) => (k.to_owned(), false),
        Err(_) => (raw.escape_ascii().to_string(), true),
    }
}

/// A change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Put(Entry),
    Delete { key: String, revision: Revision, not_utf8: bool },
}

/// What a watch delivers: changes up to a revision, the news that the revisions asked for
/// are gone (compacted), or that the store is not the one watched before (its revision is
/// below the one asked for, or it names another cluster: recreated, or restored from an older
/// state). After either of the last two the watcher must list everything again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    Changes { changes: Vec<Change>, revision: Revision },
    Compacted { compacted: Revision },
    Replaced { revision: Revision, why: String },
}

/// What a compare-and-swap write expects of the key before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The key does not exist.
    Absent,
    /// The key's last change was at this revision.
    ModRevision(Revision),
}

impl Expect {
    pub fn of(mod_revision: Option<Revision>) -> Expect {
        match mod_revision {
            Some(r) if r > 0 => Expect::ModRevision(r),
            _ => Expect::Absent,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or did not answer in time.
    #[error("the store {store} is unreachable: {cause}")]
    Unreachable {
        store: String,
        #[source]
        cause: StoreCause,
    },
    /// A compare-and-swap found the key changed: at `current` (None: the key is absent).
    #[error("{key} changed meanwhile: {}", match current { Some(r) => format!("it is at revision {r}"), None => "it no longer exists".to_owned() })]
    Conflict { key: String, current: Option<Revision> },
    /// The store answered, but with something xdst cannot use.
    #[error("the store {store}: {cause}")]
    Invalid {
        store: String,
        #[source]
        cause: StoreCause,
    },
}

/// Why a store is unreachable, or what it answered that xdst cannot use.
#[derive(Debug, thiserror::Error)]
pub enum StoreCause {
    #[error(transparent)]
    Etcd(#[from] etcd_client::Error),
    /// A TLS file for reaching the store cannot be read.
    #[error("{}: {cause}", file.display())]
    ReadFile {
        file: std::path::PathBuf,
        #[source]
        cause: std::io::Error,
    },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the watch ended")]
    WatchEnded,
    /// The store cancelled a watch, for this reason.
    #[error("etcd cancelled the watch: {0}")]
    WatchCancelled(String),
    /// A key (escaped) outside the prefix asked for.
    #[error("key {0} is outside the prefix")]
    OutsidePrefix(String),
}

/// A stream of watch events; `Err` ends it (the watcher reconnects from its revision).
pub type Watch = futures::stream::BoxStream<'static, Result<WatchEvent, StoreError>>;

/// A shared store of intent. Keys are relative to the store's prefix.
pub trait Store: Send + Sync + 'static {
    /// Every key under `dir`, and the store revision they were read at.
    fn list(&self, dir: &str) -> impl Future<Output = Result<(Vec<Entry>, Revision), StoreError>> + Send;
    /// Every change under `dir` after `after`, in order.
    fn watch(&self, dir: &str, after: Revision) -> impl Future<Output = Result<Watch, StoreError>> + Send;
    /// Writes (`Some`) or deletes (`None`) `key` if it is as `expect` says; the revision of
    /// the write.
    fn write(
        &self,
        key: &str,
        value: Option<Vec<u8>>,
        expect: Expect,
    ) -> impl Future<Output = Result<Revision, StoreError>> + Send;
    /// How the store is named in logs and errors (`etcd://127.0.0.1:2379/xdst`).
    fn describe(&self) -> String;
}

/// What is wrong with a `--store` URL (`url` as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreUrlError {
    #[error("{url:?}: a store is etcd://HOST:PORT[,HOST:PORT...]/PREFIX")]
    NoScheme { url: String },
    #[error("{url:?}: the store {scheme:?} is not supported (etcd:// is)")]
    Scheme { url: String, scheme: String },
    #[error("{url:?}: name at least one etcd endpoint (HOST:PORT)")]
    NoEndpoint { url: String },
    #[error("{url:?}: {endpoint:?} is not HOST:PORT")]
    Endpoint { url: String, endpoint: String },
    #[error("{url:?}: name a key prefix (etcd://HOST:PORT/xdst): every key xdst uses goes under it")]
    NoPrefix { url: String },
}

/// `--store`: where the store is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    pub endpoints: Vec<String>,
    /// Every key xdst reads or writes starts with this (`/xdst/`).
    pub prefix: String,
    pub tls: Option<StoreTls>,
    /// How long one request may take before the store counts as unreachable.
    pub timeout: Duration,
    /// The most intent documents the mirror holds; more fail the generation. (A value is
    /// bounded like a file, by `--max-file-size`.)
    pub max_documents: usize,
}

/// TLS towards etcd: the CA that signed its certificate, and a client certificate if etcd
/// wants one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreTls {
    pub ca: std::path::PathBuf,
    pub cert: Option<std::path::PathBuf>,
    pub key: Option<std::path::PathBuf>,
}

/// The default of [`StoreConfig::max_documents`].
pub const DEFAULT_MAX_DOCUMENTS: usize = 100_000;
/// The default of [`StoreConfig::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

impl StoreConfig {
    /// Parses `etcd://HOST:PORT[,HOST:PORT...]/PREFIX` (`etcds://` for TLS, which needs
    /// [`StoreTls`] too).
    pub fn parse(url: &str) -> Result<StoreConfig, StoreUrlError> {
        let given = || url.to_owned();
        let (scheme, rest) = url.split_once("://").ok_or_else(|| StoreUrlError::NoScheme { url: given() })?;
        if scheme != "etcd" {
            return Err(StoreUrlError::Scheme { url: given(), scheme: scheme.to_owned() });
        }
        let (hosts, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let endpoints: Vec<String> = hosts.split(',').filter(|h| !h.is_empty()).map(str::to_owned).collect();
        if endpoints.is_empty() {
            return Err(StoreUrlError::NoEndpoint { url: given() });
        }
        for e in &endpoints {
            let ok = e.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                return Err(StoreUrlError::Endpoint { url: given(), endpoint: e.clone() });
            }
        }
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() {
            return Err(StoreUrlError::NoPrefix { url: given() });
        }
        Ok(StoreConfig {
            endpoints,
            prefix: format!("/{prefix}/"),
            tls: None,
            timeout: DEFAULT_TIMEOUT,
            max_documents: DEFAULT_MAX_DOCUMENTS,
        })
    }

    /// `etcd://HOST:PORT,.../PREFIX`, as given.
    pub fn url(&self) -> String {
        format!("etcd://{}{}", self.endpoints.join(","), self.prefix.trim_end_matches('/'))
    }
}

/// The key of an intent document: `intent/KIND/NAME`, or `intent/KIND/NAMESPACE/NAME` (the
/// qualified name is `namespace/name`).
pub fn intent_key(kind: &str, qualified_name: &str) -> String {
    format!("{INTENT_DIR}{kind}/{qualified_name}")
}

/// Where a namespace's own keys start: `intent/namespaces/NAMESPACE/`. A team whose etcd role
/// may write only under it writes only its own namespace's documents: a key there holding
/// another namespace's document is held out ([`check_document_key`]).
pub fn namespace_dir(namespace: &str) -> String {
    format!("{INTENT_DIR}{NAMESPACES}/{namespace}/")
}

/// The directory under `intent/` that namespaced keys are in (`--store-namespace-keys`).
const NAMESPACES: &str = "namespaces";

/// The key of a namespaced document under its namespace's prefix:
/// `intent/namespaces/NAMESPACE/KIND/NAME`; `None` for a cluster-scoped one (which stays at
/// [`intent_key`]: the platform's).
pub fn namespace_key(kind: &str, qualified_name: &str) -> Option<String> {
    let (namespace, name) = qualified_name.split_once('/')?;
    Some(format!("{}{kind}/{name}", namespace_dir(namespace)))
}

/// The keys a document may be held at: [`intent_key`], and [`namespace_key`] for a namespaced
/// one. Either is read; `prefer_namespace` says which a new document is written to.
pub fn document_keys(kind: &str, qualified_name: &str, prefer_namespace: bool) -> Vec<String> {
    let mut keys = vec![intent_key(kind, qualified_name)];
    if let Some(k) = namespace_key(kind, qualified_name) {
        if prefer_namespace {
            keys.insert(0, k);
        } else {
            keys.push(k);
        }
    }
    keys
}

/// The namespace whose prefix `key` is under, if it is under one.
fn key_namespace(key: &str) -> Option<&str> {
    key.strip_prefix(INTENT_DIR)?.strip_prefix(NAMESPACES)?.strip_prefix('/')?.split('/').next()
}

/// Whether `key` is under a namespace's prefix (`intent/namespaces/NAMESPACE/`): a team's, not
/// the platform's.
pub fn under_namespace(key: &str) -> bool {
    key_namespace(key).is_some()
}

/// The key to write a document at: the one it is held at, if it is, else the preferred one.
pub fn write_key(kind: &str, qualified_name: &str, prefer_namespace: bool, held: impl Fn(&str) -> bool) -> String {
    let keys = document_keys(kind, qualified_name, prefer_namespace);
    keys.iter().find(|k| held(k)).unwrap_or(&keys[0]).clone()
}

/// Why the store's documents cannot be translated as they are: the generation fails naming
/// the store and the key, and the last good config keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum StoreProblem {
    #[error(
        "{store} key {key} (escaped): the key is not UTF-8, so it names no document; delete it \
         (etcdctl del with the key's bytes) and write the document under a UTF-8 key"
    )]
    KeyNotUtf8 { store: String, key: String },
    #[error("{store} key {key}: {bytes} bytes, over the {max}-byte limit (--max-file-size)")]
    ValueTooLarge { store: String, key: String, bytes: usize, max: usize },
    #[error("{store} key {key}: not UTF-8 text")]
    ValueNotText { store: String, key: String },
    #[error("{store}: {count} intent documents, over the limit of {max} (--max-store-documents)")]
    TooManyDocuments { store: String, count: usize, max: usize },
    /// A key holds the one document it names (issue 33, item 12).
    #[error(
        "{store} key {key} holds {held}, which belongs under {named}: a key holds the document it names \
         (write it through PUT /intent/{held}, or to {named}, and delete {key})"
    )]
    MisplacedDocument { store: String, key: String, held: String, named: String },
    /// A key under a namespace's prefix holds another namespace's document, or a
    /// cluster-scoped one (issue 35, part 4).
    #[error(
        "{store} key {key} holds {held}, but keys under intent/namespaces/{namespace}/ hold documents of \
         namespace {namespace} only: it belongs under {named}",
        namespace = key_namespace(.key).unwrap_or_default()
    )]
    OutsideNamespace { store: String, key: String, held: String, named: String },
    #[error("intent does not come from a store")]
    NotAStore,
    #[error("no generation has succeeded yet, so there is nothing to check a write against")]
    NothingToCheckAgainst,
}

/// A key holds the one document it names: `intent/HttpGateway/web2` holding `Service/web2` is
/// refused, naming the key, never taken as `Service/web2` (issue 33, item 12). `store` names
/// the store in the error.
pub fn check_document_key(
    store: &str,
    key: &str,
    documents: &[std::sync::Arc<xdst_core::intent::IntentDocument>],
) -> Result<(), StoreProblem> {
    for doc in documents {
        let keys = document_keys(&doc.kind, doc.qualified_name(), false);
        if !keys.iter().any(|k| k == key) {
            let named = keys.join(" or ");
            if key_namespace(key).is_some() {
                return Err(StoreProblem::OutsideNamespace {
                    store: store.to_owned(),
                    key: key.to_owned(),
                    held: doc.id().to_string(),
                    named,
                });
            }
            return Err(StoreProblem::MisplacedDocument {
                store: store.to_owned(),
                key: key.to_owned(),
                held: doc.id().to_string(),
                named,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(text: &str) -> Vec<std::sync::Arc<xdst_core::intent::IntentDocument>> {
        xdst_core::intent::parse_file("k", text).unwrap().into_iter().map(std::sync::Arc::new).collect()
    }

    /// Issue 35, part 4: a namespaced document may be at its kind's key or under its
    /// namespace's prefix; under another namespace's prefix it is refused naming both.
    #[test]
    fn a_namespace_prefix_holds_its_own_namespace_only() {
        let grant = docs("kind: ReferenceGrant\nmetadata: {name: g, namespace: team-b}\n");
        let check = |key: &str| check_document_key("etcd://s/x", key, &grant);
        assert!(check("intent/ReferenceGrant/team-b/g").is_ok());
        assert!(check("intent/namespaces/team-b/ReferenceGrant/g").is_ok());
        let e = check("intent/namespaces/team-a/ReferenceGrant/g").unwrap_err().to_string();
        assert!(
            e.contains("intent/namespaces/team-a/ReferenceGrant/g holds ReferenceGrant/team-b/g")
                && e.contains("namespace team-a only")
                && e.contains("intent/namespaces/team-b/ReferenceGrant/g"),
            "{e}"
        );
        let e = check("intent/ReferenceGrant/team-a/g").unwrap_err().to_string();
        assert!(e.contains("belongs under"), "{e}");
        let gateway_class = docs("kind: GatewayClass\nmetadata: {name: xdst}\n");
        let e = check_document_key("s", "intent/namespaces/team-a/GatewayClass/xdst", &gateway_class).unwrap_err();
        assert!(e.to_string().contains("namespace team-a only"), "a cluster-scoped document is the platform's: {e}");
        assert_eq!(
            write_key("HTTPRoute", "team-a/r", true, |_| false),
            "intent/namespaces/team-a/HTTPRoute/r",
            "new: under its namespace"
        );
        assert_eq!(
            write_key("HTTPRoute", "team-a/r", true, |k| k == "intent/HTTPRoute/team-a/r"),
            "intent/HTTPRoute/team-a/r",
            "held already: where it is"
        );
        assert_eq!(write_key("GatewayClass", "xdst", true, |_| false), "intent/GatewayClass/xdst");
    }

    #[test]
    fn store_urls_parse_and_mistakes_say_what_is_wrong() {
        let c = StoreConfig::parse("etcd://127.0.0.1:2379,127.0.0.1:22379/xdst/prod").unwrap();
        assert_eq!(c.endpoints, ["127.0.0.1:2379", "127.0.0.1:22379"]);
        assert_eq!(c.prefix, "/xdst/prod/");
        assert_eq!(c.url(), "etcd://127.0.0.1:2379,127.0.0.1:22379/xdst/prod");
        for (bad, says) in [
            ("127.0.0.1:2379/xdst", "etcd://HOST:PORT"),
            ("postgres://db:5432/xdst", "not supported"),
            ("etcd:///xdst", "at least one etcd endpoint"),
            ("etcd://localhost/xdst", "not HOST:PORT"),
            ("etcd://localhost:2379", "name a key prefix"),
            ("etcd://localhost:2379/", "name a key prefix"),
        ] {
            let e = StoreConfig::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}

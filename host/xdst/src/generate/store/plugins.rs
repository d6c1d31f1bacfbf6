//! The plugin set in the store, for replicas that take their plugins from it (`serve --store`
//! with neither `--plugins DIR` nor a `plugins` list in `--config`).
//!
//! Keys under the prefix:
//! - `plugins/list`: the plugins list, as a configuration file's `plugins:` section (YAML),
//!   written by `xdst store import --plugins FILE`. Its sources are remote (`oci://`, `https://`):
//!   a path would name a different file on each replica's machine.
//! - `plugins/reload`: rewritten by a reload asked on any replica (`POST /reload`, SIGHUP).
//! - `plugins/resolved`: what the leader resolved the list to, every source pinned to a digest,
//!   with the revisions of the list and of the reload it answers. Every replica runs this set.
//! - `leader/…`: the election (an etcd lease campaign).
//!
//! Only the leader resolves tags. It writes `plugins/resolved` in one transaction that holds
//! only while its leadership key exists, so a deposed leader cannot write, and a leader that
//! dies before writing leaves the previous set with every replica: replicas never run
//! different digests of a plugin once they have caught up with the store.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, LeaderKey, PutOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::etcd::Etcd;
use super::mirror::Mirror;
use crate::generate::plugins::distribution::{FetchError, Fetcher, Source, SourceError, chain};
use xdst_core::documents::DocumentError;

/// Where the plugin set lives, under the prefix.
pub const PLUGINS_DIR: &str = "plugins/";
pub const LIST_KEY: &str = "plugins/list";
pub const RELOAD_KEY: &str = "plugins/reload";
pub const RESOLVED_KEY: &str = "plugins/resolved";
/// The election's name, under the prefix.
const ELECTION: &str = "leader";
/// A leader that stops keeping its lease alive loses it (and the leadership) this long after.
pub const LEADER_TTL: i64 = 6;
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(2);
/// The largest plugins list taken (import refuses larger; a larger value in the store is an error).
pub const MAX_LIST: usize = 1 << 20;
/// Waits between failed resolutions, doubling.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Why the mirror holds no resolved set to run.
#[derive(Debug, thiserror::Error)]
pub enum ResolvedError {
    /// There is a list, not yet resolved.
    #[error("{store}: no plugin set resolved yet (waiting for the plugin leader to resolve plugins/list)")]
    Waiting { store: String },
    /// There is no list to resolve.
    #[error(
        "{store}: no plugin set resolved yet (there is no plugins/list: `xdst store import --plugins FILE --store URL` \
         writes one)"
    )]
    NoList { store: String },
    #[error("{store}/{RESOLVED_KEY}: {bytes} bytes, over the {limit}-byte limit", limit = 2 * MAX_LIST)]
    TooLarge { store: String, bytes: usize },
    #[error("{store}/{RESOLVED_KEY}: {cause}")]
    NotJson {
        store: String,
        #[source]
        cause: serde_json::Error,
    },
}

/// What is wrong with a plugins list for the store (`origin` names it).
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("{origin}: {bytes} bytes, over the {MAX_LIST}-byte limit of a plugins list")]
    TooLarge { origin: String, bytes: usize },
    #[error("{origin}: {}", .cause.message)]
    Parse {
        origin: String,
        #[source]
        cause: DocumentError,
    },
    #[error(
        "{origin}: field plugins[{index}].signature.publicKey: {key:?} must be an absolute path (each replica reads it \
         from its own disk)"
    )]
    RelativeKey { origin: String, index: usize, key: String },
    #[error("{origin}: {cause}")]
    Config {
        origin: String,
        #[source]
        cause: crate::generate::plugins::list::ConfigError,
    },
    #[error("{origin}: no `plugins:` list")]
    NoList { origin: String },
    #[error("{origin}: field plugins[{index}].source: {cause}")]
    Source {
        origin: String,
        index: usize,
        #[source]
        cause: SourceError,
    },
    #[error(
        "{origin}: field plugins[{index}].source: {given:?} is a path; every replica must run the same bytes, so a \
         plugin in the store comes from a registry (oci://) or https:// (`xdst plugin push` puts it in a registry)"
    )]
    Path { origin: String, index: usize, given: String },
}

/// Why the leader cannot resolve the plugins list now (it tries again).
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    #[error("plugins/list is {0} bytes, over the {MAX_LIST}-byte limit")]
    TooLarge(usize),
    #[error("{}", .0.message)]
    Parse(#[source] DocumentError),
    #[error("no `plugins:` list")]
    NoList,
    #[error("plugins[{index}].source: {cause}")]
    Source {
        index: usize,
        #[source]
        cause: SourceError,
    },
    #[error("plugins[{index}].source: {given:?} is a path, not a registry or https:// source")]
    Path { index: usize, given: String },
    #[error("plugin {name:?}: cannot resolve {given}: {}", chain(cause))]
    Fetch {
        name: String,
        given: String,
        #[source]
        cause: Box<FetchError>,
    },
    #[error(transparent)]
    Yaml(#[from] serde_yaml_ng::Error),
}

/// Why a replica could not start with the store's plugin set.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("listing the plugin set in {store}")]
    List {
        store: String,
        #[source]
        cause: super::StoreError,
    },
    /// There is no plugins list in the store.
    #[error("{cause}; or give --plugins DIR")]
    NoList {
        #[source]
        cause: ResolvedError,
    },
}

/// Why a reload asked on this replica was not answered.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("asking for a reload: the store did not answer within {0:?}")]
    Timeout(Duration),
    #[error("asking for a reload: {0}")]
    Store(#[source] etcd_client::Error),
    #[error("the reload was asked (revision {asked}) but the plugin leader has not answered it within {within:?}")]
    NotAnswered { asked: i64, within: Duration },
}

/// Why a replica stopped leading, or campaigning.
#[derive(Debug, thiserror::Error)]
enum LeadError {
    #[error(transparent)]
    Etcd(#[from] etcd_client::Error),
    #[error("no keep-alive answer within {0:?}")]
    NoKeepAliveAnswer(Duration),
    #[error("the lease expired")]
    LeaseExpired,
    #[error("the campaign answered without a leader key")]
    NoLeaderKey,
    #[error("resolving panicked: {0}")]
    Panicked(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    #[error("writing {RESOLVED_KEY}: no answer within {0:?}")]
    WriteTimeout(Duration),
    #[error("writing {RESOLVED_KEY}: {0}")]
    Write(#[source] etcd_client::Error),
    #[error("the leadership key is gone: another replica leads now")]
    Deposed,
    #[error("the store mirror closed")]
    MirrorClosed,
}

/// The value of `plugins/resolved`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolvedSet {
    /// The mod revision of `plugins/list` this resolves.
    pub list_revision: i64,
    /// The mod revision of `plugins/reload` it answers (0: none asked yet).
    pub reload_revision: i64,
    /// The replica that resolved it.
    pub leader: String,
    /// Unix seconds.
    pub at: u64,
    /// The list with every source pinned to a digest: a configuration file's `plugins:` text.
    pub config: String,
}

/// What the leader must resolve, from what the mirror holds: the list's and the last reload's
/// revisions, when the resolved set answers neither.
fn wanted(mirror: &Mirror) -> Option<(i64, i64)> {
    let list = mirror.get(LIST_KEY)?;
    let reload = mirror.get(RELOAD_KEY).map_or(0, |h| h.mod_revision);
    let have = resolved(mirror).ok().map(|r| (r.list_revision, r.reload_revision));
    let want = (list.mod_revision, reload);
    (have != Some(want)).then_some(want)
}

/// The resolved set the mirror holds.
pub fn resolved(mirror: &Mirror) -> Result<ResolvedSet, ResolvedError> {
    let store = mirror.state().store;
    let Some(held) = mirror.get(RESOLVED_KEY) else {
        return Err(if mirror.get(LIST_KEY).is_some() {
            ResolvedError::Waiting { store }
        } else {
            ResolvedError::NoList { store }
        });
    };
    // A pinned list is the list with digests added: bounded by twice the list's limit.
    if held.value.len() > 2 * MAX_LIST {
        return Err(ResolvedError::TooLarge { store, bytes: held.value.len() });
    }
    serde_json::from_slice(&held.value).map_err(|cause| ResolvedError::NotJson { store, cause })
}

/// Checks a plugins list for the store: a configuration file's `plugins:` section whose sources
/// are all remote and whose signature keys are absolute paths. `origin` names it in errors.
pub fn check_list(origin: &str, text: &str) -> Result<(), ListError> {
    let origin = || origin.to_owned();
    if text.len() > MAX_LIST {
        return Err(ListError::TooLarge { origin: origin(), bytes: text.len() });
    }
    let value = xdst_core::documents::parse_one(text).map_err(|cause| ListError::Parse { origin: origin(), cause })?;
    for (i, p) in value["plugins"].as_array().into_iter().flatten().enumerate() {
        if let Some(key) = p["signature"]["publicKey"].as_str()
            && !key.starts_with('/')
        {
            return Err(ListError::RelativeKey { origin: origin(), index: i, key: key.to_owned() });
        }
    }
    let c = crate::cli::settings::Settings::parse_file(std::path::Path::new("/"), text)
        .map_err(|cause| ListError::Config { origin: origin(), cause })?;
    let plugins = c.plugin_list.unwrap_or_default();
    if plugins.is_empty() {
        return Err(ListError::NoList { origin: origin() });
    }
    for (i, e) in plugins.iter().enumerate() {
        let source = Source::parse(&e.source, std::path::Path::new("/")).map_err(|cause| ListError::Source {
            origin: origin(),
            index: i,
            cause,
        })?;
        if !source.is_remote() {
            return Err(ListError::Path { origin: origin(), index: i, given: e.source.clone() });
        }
    }
    Ok(())
}

/// The list with every remote source resolved now: `oci://` tags become `@sha256:` manifest
/// digests and `https://` sources get their `sha256`. Blocking (registry requests).
fn resolve_list(fetcher: &Fetcher, text: &str) -> Result<String, ResolveError> {
    let mut value = xdst_core::documents::parse_one(text).map_err(ResolveError::Parse)?;
    let Some(plugins) = value.get_mut("plugins").and_then(|p| p.as_array_mut()) else {
        return Err(ResolveError::NoList);
    };
    for (i, p) in plugins.iter_mut().enumerate() {
        let name = p["name"].as_str().unwrap_or_default().to_owned();
        let raw = p["source"].as_str().unwrap_or_default().to_owned();
        let source =
            Source::parse(&raw, std::path::Path::new("/")).map_err(|cause| ResolveError::Source { index: i, cause })?;
        if !source.is_remote() {
            return Err(ResolveError::Path { index: i, given: raw });
        }
        let r = fetcher.resolve(&source).map_err(|(cause, _)| ResolveError::Fetch {
            name,
            given: raw.clone(),
            cause: Box::new(cause),
        })?;
        p["source"] = r.pinned.clone().into();
        if !raw.starts_with("oci://") {
            p["sha256"] = r.digest.clone().into();
        }
    }
    Ok(serde_yaml_ng::to_string(&value)?)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A replica's view of the plugin set in the store: `plugins/` mirrored, and its own name.
pub struct HeldSet {
    pub etcd: Arc<Etcd>,
    pub mirror: Arc<Mirror>,
    pub replica: String,
}

impl HeldSet {
    /// At start, with the plugin set in the store: lists `plugins/`, starts the tasks that keep
    /// it mirrored (`changed` asks for a generation) and campaign for leadership, and waits for a
    /// resolved set.
    pub async fn start(
        etcd: Arc<Etcd>,
        replica: String,
        fetcher: Fetcher,
        changed: Arc<dyn Fn() + Send + Sync>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(Arc<HeldSet>, Vec<tokio::task::JoinHandle<()>>), StartError> {
        let store = super::Store::describe(etcd.as_ref());
        let held = Arc::new(HeldSet { etcd: etcd.clone(), mirror: Arc::new(Mirror::new(store.clone())), replica });
        super::sync::list_at_start(etcd.as_ref(), PLUGINS_DIR, &held.mirror)
            .await
            .map_err(|cause| StartError::List { store, cause })?;
        let tasks = vec![
            tokio::spawn(super::sync::run(
                etcd.clone(),
                PLUGINS_DIR,
                held.mirror.clone(),
                changed,
                Arc::new(|_| {}),
                shutdown.clone(),
            )),
            tokio::spawn(lead(etcd, held.mirror.clone(), fetcher, held.replica.clone(), shutdown)),
        ];
        held.wait_resolved().await?;
        Ok((held, tasks))
    }

    /// Where the replica's plugins list comes from: the resolved set the mirror holds.
    pub fn origin(&self) -> crate::generate::plugins::list::ListOrigin {
        let mirror = self.mirror.clone();
        crate::generate::plugins::list::ListOrigin::Held {
            name: format!("{}/{RESOLVED_KEY}", mirror.state().store),
            read: Box::new(move || resolved(&mirror).map(|r| r.config).map_err(Into::into)),
        }
    }

    /// Asks the leader to resolve the list again (a reload on this replica) and waits up to
    /// `within` for the set that answers it.
    pub async fn reload(&self, within: Duration) -> Result<ResolvedSet, ReloadError> {
        let value = serde_json::json!({"replica": self.replica, "at": unix_now()}).to_string();
        let key = format!("{}{RELOAD_KEY}", self.etcd.prefix());
        let put = tokio::time::timeout(self.etcd.timeout(), self.etcd.client().put(key, value, None))
            .await
            .map_err(|_| ReloadError::Timeout(self.etcd.timeout()))?
            .map_err(ReloadError::Store)?;
        let asked = put.header().map_or(0, |h| h.revision());
        let mut changes = self.mirror.subscribe();
        let wait = async {
            loop {
                if let Ok(r) = resolved(&self.mirror)
                    && r.reload_revision >= asked
                {
                    return r;
                }
                if changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(within, wait).await.map_err(|_| ReloadError::NotAnswered { asked, within })
    }

    /// At start: waits until a resolved set is held (the leader, perhaps this replica, writes
    /// one), logging while it waits. No plugins list at all is an error: nothing would resolve.
    pub async fn wait_resolved(&self) -> Result<(), StartError> {
        let mut changes = self.mirror.subscribe();
        let mut logged: Option<std::time::Instant> = None;
        loop {
            match resolved(&self.mirror) {
                Ok(_) => return Ok(()),
                Err(cause) if self.mirror.get(LIST_KEY).is_none() => return Err(StartError::NoList { cause }),
                Err(e) => {
                    if logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                        info!(replica = %self.replica, "{e}");
                        logged = Some(std::time::Instant::now());
                    }
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
        }
    }
}

/// Campaigns for leadership until shutdown; while leader, keeps `plugins/resolved` answering
/// `plugins/list` and the last reload. `mirror` holds `plugins/` (kept by a sync task).
pub async fn lead(
    etcd: Arc<Etcd>,
    mirror: Arc<Mirror>,
    fetcher: Fetcher,
    replica: String,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut client = etcd.client();
    let mut retry = FIRST_RETRY;
    loop {
        let lease = match tokio::time::timeout(etcd.timeout(), client.lease_grant(LEADER_TTL, None)).await {
            Ok(Ok(l)) => Some(l.id()),
            Ok(Err(e)) => {
                warn!(replica, error = %e, "cannot take a lease to campaign for plugin leadership; retrying");
                None
            }
            Err(_) => {
                warn!(replica, "taking a lease to campaign for plugin leadership timed out; retrying");
                None
            }
        };
        if let Some(lease) = lease {
            let ended = tokio::select! {
                r = hold(&etcd, &mirror, &fetcher, &replica, lease) => Some(r),
                _ = shutdown.changed() => None,
            };
            // Give leadership up at once rather than after the lease's TTL.
            let _ = tokio::time::timeout(Duration::from_secs(1), client.lease_revoke(lease)).await;
            match ended {
                None => return,
                Some(e) => warn!(replica, error = %e, "plugin leadership lost or not won; campaigning again"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(retry) => {}
            _ = shutdown.changed() => return,
        }
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// Keeps `lease` alive, campaigns with it and, once elected, leads; returns why it stopped.
async fn hold(etcd: &Etcd, mirror: &Mirror, fetcher: &Fetcher, replica: &str, lease: i64) -> LeadError {
    let mut client = etcd.client();
    let keep = async {
        let (mut keeper, mut answers) = client.lease_keep_alive(lease).await?;
        loop {
            keeper.keep_alive().await?;
            match tokio::time::timeout(etcd.timeout(), answers.message()).await {
                Ok(Ok(Some(a))) if a.ttl() > 0 => {}
                Ok(Err(e)) => return Err(e.into()),
                Err(_) => return Err(LeadError::NoKeepAliveAnswer(etcd.timeout())),
                _ => return Err::<std::convert::Infallible, LeadError>(LeadError::LeaseExpired),
            }
            tokio::time::sleep(KEEP_ALIVE_EVERY).await;
        }
    };
    let mut campaigner = etcd.client();
    let work = async {
        let name = format!("{}{ELECTION}", etcd.prefix());
        let won = campaigner.campaign(name, replica, lease).await?;
        let key = won.leader().cloned().ok_or(LeadError::NoLeaderKey)?;
        info!(replica, "elected plugin leader: this replica resolves plugin sources for every replica");
        lead_as(etcd, mirror, fetcher, replica, &key).await
    };
    let ended = tokio::select! {
        r = keep => r,
        r = work => r,
    };
    let Err(e) = ended;
    e
}

/// The leader's loop: whenever the list or a reload is newer than the resolved set, resolve
/// and write it, guarded by the leadership key.
async fn lead_as(
    etcd: &Etcd,
    mirror: &Mirror,
    fetcher: &Fetcher,
    replica: &str,
    key: &LeaderKey,
) -> Result<std::convert::Infallible, LeadError> {
    let mut changes = mirror.subscribe();
    let mut retry = FIRST_RETRY;
    loop {
        if let Some((list_revision, reload_revision)) = wanted(mirror) {
            let text = mirror.get(LIST_KEY).map(|h| String::from_utf8_lossy(&h.value).into_owned()).unwrap_or_default();
            info!(replica, list_revision, reload_revision, "resolving the plugins list");
            let f = fetcher.clone();
            let result = if text.len() > MAX_LIST {
                Err(ResolveError::TooLarge(text.len()))
            } else {
                tokio::task::spawn_blocking(move || resolve_list(&f, &text)).await.map_err(LeadError::Panicked)?
            };
            match result {
                Ok(config) => {
                    let set = ResolvedSet {
                        list_revision,
                        reload_revision,
                        leader: replica.to_owned(),
                        at: unix_now(),
                        config,
                    };
                    let revision = write_as_leader(etcd, key, &set).await?;
                    info!(replica, list_revision, reload_revision, revision, "plugin set resolved and written");
                    retry = FIRST_RETRY;
                    // Wait until the mirror holds what was written, so it is not resolved twice.
                    mirror.wait_for(revision, etcd.timeout()).await;
                    continue;
                }
                Err(e) => {
                    warn!(replica, error = %e, retry_in = ?retry, "cannot resolve the plugins list; every replica keeps the set it runs");
                    tokio::select! {
                        _ = tokio::time::sleep(retry) => {}
                        _ = changes.changed() => {}
                    }
                    retry = (retry * 2).min(MAX_RETRY);
                    continue;
                }
            }
        }
        if changes.changed().await.is_err() {
            return Err(LeadError::MirrorClosed);
        }
    }
}

/// Writes the resolved set if `key` still holds the leadership; its revision.
async fn write_as_leader(etcd: &Etcd, key: &LeaderKey, set: &ResolvedSet) -> Result<i64, LeadError> {
    let value = serde_json::to_vec(set)?;
    let txn = Txn::new()
        .when([Compare::create_revision(key.key(), CompareOp::Equal, key.rev())])
        .and_then([TxnOp::put(format!("{}{RESOLVED_KEY}", etcd.prefix()), value, None::<PutOptions>)]);
    let answer = tokio::time::timeout(etcd.timeout(), etcd.client().txn(txn))
        .await
        .map_err(|_| LeadError::WriteTimeout(etcd.timeout()))?
        .map_err(LeadError::Write)?;
    if !answer.succeeded() {
        return Err(LeadError::Deposed);
    }
    Ok(answer.header().map_or(0, |h| h.revision()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_list_refuses_paths_naming_the_field() {
        let e = check_list("plugins.yaml", "plugins:\n- {name: a, source: ./a.wasm}\n").unwrap_err().to_string();
        assert!(e.contains("plugins.yaml: field plugins[0].source") && e.contains("is a path"), "{e}");
        check_list("plugins.yaml", "plugins:\n- {name: a, source: 'oci://localhost:5000/a:v1'}\n").unwrap();
        let e = check_list("x", "pluginsDir: /p\n").unwrap_err().to_string();
        assert!(e.contains("no `plugins:` list"), "{e}");
    }

    #[test]
    fn a_list_over_the_limit_is_refused() {
        let big = format!("plugins: []\n#{}\n", "x".repeat(MAX_LIST));
        let e = check_list("big.yaml", &big).unwrap_err().to_string();
        assert!(e.contains("over the 1048576-byte limit"), "{e}");
    }

    #[test]
    fn a_resolved_set_that_is_too_large_or_not_json_is_an_error_naming_the_key() {
        let m = Mirror::new("etcd://x/p".into());
        let entry = |value: Vec<u8>| super::super::Entry::new(RESOLVED_KEY, value, 2);
        m.replace(vec![entry(vec![b' '; 2 * MAX_LIST + 1])], 2);
        let e = resolved(&m).unwrap_err().to_string();
        assert!(e.contains("etcd://x/p/plugins/resolved") && e.contains("over the 2097152-byte limit"), "{e}");
        m.replace(vec![entry(b"{".to_vec())], 3);
        assert!(resolved(&m).unwrap_err().to_string().contains("plugins/resolved: EOF"));
    }

    #[test]
    fn the_leader_resolves_when_the_list_or_a_reload_is_newer() {
        let m = Mirror::new("etcd://x/p/".into());
        let entry = |key: &str, value: &[u8], rev| super::super::Entry::new(key, value, rev);
        m.replace(vec![entry(LIST_KEY, b"plugins: []", 3)], 3);
        assert_eq!(wanted(&m), Some((3, 0)));
        let set = |l, r| {
            serde_json::to_vec(&ResolvedSet {
                list_revision: l,
                reload_revision: r,
                leader: "a".into(),
                at: 0,
                config: String::new(),
            })
            .unwrap()
        };
        m.replace(vec![entry(LIST_KEY, b"plugins: []", 3), entry(RESOLVED_KEY, &set(3, 0), 4)], 4);
        assert_eq!(wanted(&m), None);
        m.replace(
            vec![entry(LIST_KEY, b"plugins: []", 3), entry(RESOLVED_KEY, &set(3, 0), 4), entry(RELOAD_KEY, b"{}", 5)],
            5,
        );
        assert_eq!(wanted(&m), Some((3, 5)));
    }
}

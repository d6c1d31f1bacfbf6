//! What every server task shares.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use xdst_core::cache::Cache;
use xdst_core::node::GroupKey;

use crate::metrics::Metrics;
use crate::nodes::Registry;
use crate::source::SourceStatus;

pub struct Context {
    pub cache: Cache,
    pub group_key: GroupKey,
    pub metrics: Metrics,
    pub nodes: Registry,
    /// Every node's make-before-break rollout.
    pub rollouts: crate::rollouts::Rollouts,
    pub source: SourceStatus,
    /// Flips to `true` when the server shuts down; every stream ends with UNAVAILABLE.
    pub shutdown: watch::Receiver<bool>,
    pub debounce: Duration,
    /// Rescan the watched directories now (`POST /reload`, SIGHUP), whatever the watcher saw.
    pub rescan: Arc<tokio::sync::Notify>,
    /// Explicit reloads (`POST /reload`, SIGHUP) so far: a plugin configuration resolves its
    /// remote sources (registry tags, URLs) again when this moves, and only then.
    pub reloads: std::sync::atomic::AtomicU64,
    /// The bearer token admin writes (`POST /reload`, the intent API's `PUT` and `DELETE`) must
    /// carry; none: writes are refused.
    pub admin_token: Option<String>,
    /// With mTLS: what each client certificate identity may use (None: no client
    /// certificates, every client may use every group).
    pub identities: Option<crate::identity::Rules>,
    /// Refusals logged at most once a minute per client.
    pub refusal_log: crate::limits::LogOncePerMinute,
    /// Requests a stream may send.
    pub request_rate: crate::limits::RequestRate,
    /// Which node groups are served as their own.
    pub node_groups: NodeGroups,
    /// Unlisted node groups admitted lately.
    pub unlisted_groups: crate::limits::UnlistedGroups,
    /// Who may read the admin port.
    pub admin_read: AdminRead,
    /// The largest gRPC request message and REST request body accepted, in bytes.
    pub max_request_size: usize,
    /// The store intent comes from (`--store`), when not from files.
    pub store: Option<Arc<crate::store::etcd::Etcd>>,
    /// The plugin set in the store (`--store` without --plugins or a plugins list): a reload
    /// asks the store's plugin leader to resolve it again.
    pub plugin_set: Option<Arc<crate::store::plugins::HeldSet>>,
    /// The intent source, when serving `--intent` with `--plugins`.
    pub intent: Option<Arc<crate::intent::IntentSource>>,
    /// The one thread that runs intent generations (set once the context exists).
    pub generations: std::sync::OnceLock<crate::generations::Generations>,
    /// Every good generation as a change, for `/changes/{id}`.
    pub changes: crate::changes::Ledger,
}

pub type Ctx = Arc<Context>;

/// Who may read the admin port (`/debug/*`, `GET /intent`, `/metrics`): open when neither a
/// token nor identities are set.
#[derive(Debug, Default, Clone)]
pub struct AdminRead {
    pub token: Option<String>,
    pub identities: Vec<crate::identity::IdentityPattern>,
    /// `/metrics` is open whatever the above says.
    pub open_metrics: bool,
}

impl AdminRead {
    pub fn is_open(&self) -> bool {
        self.token.is_none() && self.identities.is_empty()
    }
}

/// Which node groups nodes may use as their own (see `--node-groups`).
#[derive(Debug, Default, Clone)]
pub struct NodeGroups {
    /// Listed groups; empty: any group a node names, up to `max_unlisted` at once.
    pub listed: Vec<crate::identity::Pattern>,
    pub max_unlisted: usize,
}

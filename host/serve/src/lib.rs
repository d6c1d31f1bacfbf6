//! xdst's data plane: everything that speaks to xDS clients, and nothing about where the
//! resources come from.
//!
//! - [`xds`], [`codec`], [`requests`], [`machine`]: ADS and the per-type services, SotW and
//!   Delta, over gRPC; [`rest`]: REST fetch; [`csds`]: Client Status Discovery.
//! - [`server`], [`tls`]: the transport (HTTP/2, idle connections) and TLS with certificate
//!   reloading; [`places`]: connections and streams per client; [`unread`]: bytes queued for
//!   a client that does not read; [`identity`]: who a client
//!   certificate is and what it may use; [`admission`]: request and stream rates, node groups,
//!   the refusal log.
//! - [`nodes`], [`rollouts`]: the connected nodes and each node's make-before-break rollout,
//!   gated on its ACKs; [`memory`]: handing freed memory back.
//! - [`metrics`]: the serving metrics, and the registry `/metrics` renders;
//!   [`access`]: who may read what the admin port and CSDS show.
//!
//! Resources arrive by [`xdst_core::cache::Cache::publish`] on [`Serving::cache`]; the
//! `xdst` crate's generation plane publishes there. This crate depends on neither wasmtime,
//! nor etcd, nor an HTTP client (`tests/it/docs.rs` checks it).

pub mod access;
pub mod admission;
pub mod canaries;
pub mod codec;
pub mod csds;
pub mod identity;
pub mod machine;
pub mod memory;
pub mod metrics;
pub mod nodes;
pub mod places;
pub mod requests;
pub mod rest;
pub mod rollouts;
pub mod server;
pub mod tls;
pub mod unread;
pub mod xds;

use std::sync::Arc;

use axum::Router;
use tokio::sync::watch;
use xdst_core::cache::Cache;
use xdst_core::node::GroupKey;

/// The serving plane's state, shared by every stream, connection and admin read.
pub struct Serving {
    pub cache: Cache,
    pub group_key: GroupKey,
    pub metrics: metrics::Metrics,
    pub nodes: nodes::Registry,
    /// Every node's make-before-break rollout.
    pub rollouts: rollouts::Rollouts,
    /// Flips to `true` when the server shuts down; every stream ends with UNAVAILABLE.
    pub shutdown: watch::Receiver<bool>,
    /// With mTLS: what each client certificate identity may use (None: no client
    /// certificates, every client may use every group).
    pub identities: Option<identity::Rules>,
    /// Refusals logged at most once a minute per client.
    pub refusal_log: admission::LogOncePerMinute,
    /// What clients' rejections may cost, and whose count toward a group's holds.
    pub nacks: admission::Nacks,
    /// Requests a stream may send.
    pub request_rate: admission::RequestRate,
    /// The rate new streams are admitted at.
    pub stream_admission: admission::StreamAdmission,
    /// xDS streams per client, and how soon a stream must send its first complete request.
    pub streams: Arc<places::Streams>,
    /// Bytes of responses each client may have unread (`--max-unread-bytes-per-client`).
    pub unread: Arc<unread::Unread>,
    /// Which node groups are served as their own.
    pub node_groups: admission::NodeGroups,
    /// Unlisted node groups admitted lately.
    pub unlisted_groups: admission::UnlistedGroups,
    /// Who may read the admin port and CSDS, and who may write.
    pub access: access::Access,
    /// The largest gRPC request message and REST request body accepted, in bytes.
    pub max_request_size: usize,
    /// Whether resources are translated for each node group (intent and plugins) rather
    /// than read per group (a resources directory): then a group with resources of its own
    /// is no proof the group was asked for.
    pub translated: bool,
}

impl Serving {
    /// Counts a refusal of `client` (its identity, else its address) in
    /// `xdst_refusals_total{reason}`; whether to log it (at most once a minute per client).
    pub fn refused(&self, reason: &'static str, client: &str) -> bool {
        self.metrics.refusals.get_or_create(&metrics::label("reason", reason)).inc();
        self.refusal_log.allow(client)
    }

    /// `/metrics`: the registry, with the flow-control gauges worked out from every stream
    /// now (design 022: one lock per stream, taken only on a scrape).
    pub fn render_metrics(&self) -> String {
        let mut total = xdst_core::stream::Flow::default();
        let mut owed = 0;
        for g in self.nodes.flow_by_group().values() {
            total.add(&g.flow);
            owed += g.owed;
        }
        let oldest = total.owed_since.and_then(|t| t.elapsed().ok()).map_or(0.0, |d| d.as_secs_f64());
        let m = &self.metrics;
        m.responses_in_flight.set(i64::from(total.in_flight));
        m.streams_owed.set(owed as i64);
        m.oldest_owed_change_seconds.set(oldest);
        if let Some(heap) = xdst_core::heap::usage() {
            m.heap_in_use_bytes.set(heap.in_use as i64);
            m.heap_free_bytes.set(heap.free as i64);
        }
        m.render()
    }
}

/// Every route of the xDS port listening on `listening`: the gRPC services, REST fetch, and
/// an answer for the rest.
pub fn routes(serving: &Arc<Serving>, listening: std::net::SocketAddr) -> Router {
    xds::routes(serving).merge(rest::routes(serving, listening)).fallback(unknown_path)
}

/// gRPC clients get UNIMPLEMENTED for methods we do not serve; anything else a 404.
async fn unknown_path(req: axum::extract::Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    let grpc = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if grpc {
        tonic::Status::unimplemented(format!("xdst does not serve {}", req.uri().path()))
            .into_http::<axum::body::Body>()
            .into_response()
    } else {
        (http::StatusCode::NOT_FOUND, format!("no such path: {}\n", req.uri().path())).into_response()
    }
}

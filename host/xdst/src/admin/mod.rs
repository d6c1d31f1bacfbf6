//! The admin HTTP port: health, metrics and what the server is doing.
//!
//! Reads need the read token (`--admin-read-token-file`), the write token, or a client
//! certificate `adminReadIdentities` allows, once a read token or identities are configured;
//! `/healthz` and `/` never do, `/metrics` not with `--open-metrics`.
//!
//! When the admin port listens on a loopback address, every request must name a loopback host
//! (`Host` or the HTTP/2 authority: `localhost`, `*.localhost`, `127.0.0.0/8` or `[::1]`, with
//! any port, or none at all); any other is refused with `421 Misdirected Request` and counted
//! in `xdst_refusals_total{reason="admin_host"}`. A web page an operator opens cannot read the
//! port by pointing a name of its own at 127.0.0.1 (DNS rebinding): its requests carry that name.
//! The check is the xDS port's too ([`xdst_serve::access::refuse_foreign_host`]).
//!
//! - `GET /` from a browser: the status page (nodes, rejections, plugins, the config graph;
//!   see [`crate::admin::status`]); otherwise this list as text.
//! - `GET /healthz`: `ok` once serving.
//! - `GET /metrics`: Prometheus text.
//! - `GET /debug/nodes`: every connected node, its make-before-break plan (mode, step, what
//!   it waits for and since when, what is held back, a NACK that stopped it), its streams
//!   and, per type, the version sent and acknowledged and the last NACK.
//! - `GET /debug/resources`: what each node group is served (`?bodies=true` adds each
//!   resource as proto3 JSON, except Secrets: never a Secret body, from any endpoint), and the
//!   state of the resources directory.
//! - `POST /reload` (needs `Authorization: Bearer <token>`, see `--admin-token-file`): rescan
//!   the resources or intent and plugins directories now, as SIGHUP does, and answer with the
//!   outcome of that load or generation.
//! - `GET /intent`, `GET|PUT|DELETE /intent/{kind}/{name}`: the intent API (writes need the
//!   bearer token; see [`crate::admin::intent_api`]).
//! - `GET /changes/{id}[?group=G]`: whether change `id` (a generation; a write's `change`)
//!   is live: per node group, the connected nodes that hold it, those that do not yet, and
//!   those that rejected it with what they rejected (see [`xdst_core::changes`]).
//! - `GET /debug/plugins`: with `--intent`/`--plugins`, the loaded plugins (name, version,
//!   file, digest, kinds, limits) and the last generation (result, error naming the plugin,
//!   calls made, diagnostics).

pub mod changes;
pub mod intent_api;
pub mod status;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::Query;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use prost_reflect::{DynamicMessage, SerializeOptions};
use serde::{Deserialize, Serialize};
use xdst_core::descriptors;
use xdst_core::snapshot::Snapshot;

use crate::generate::Generating;

/// The admin routes of a port listening on `listening`.
pub fn routes(generating: &Arc<Generating>, listening: std::net::SocketAddr) -> Router {
    let (c1, c2, c3, c4, c5, c6) = (
        generating.clone(),
        generating.clone(),
        generating.clone(),
        generating.clone(),
        generating.clone(),
        generating.clone(),
    );
    let guard = generating.clone();
    Router::new()
        .merge(intent_api::routes(generating))
        .merge(changes::routes(generating))
        .merge(status::routes(generating))
        .route(
            "/reload",
            axum::routing::post(move |headers: http::HeaderMap| async move { reload(&c5, &headers).await }),
        )
        .route("/", get(|headers: http::HeaderMap| async move { status::index(&headers, INDEX) }))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(move || async move { ready(&c6) }))
        .route(
            "/metrics",
            get(move || async move {
                ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], c1.serving().render_metrics())
            }),
        )
        .route(
            "/debug/nodes",
            get(move |q: Query<NodesQuery>| async move {
                if q.fleet { fleet(&c2).await } else { debug_nodes(&c2, &q) }
            }),
        )
        .route(
            "/debug/resources",
            get(move |q: Query<ResourcesQuery>| async move { resources(&c3, q.bodies).into_response() }),
        )
        .route(
            "/debug/plugins",
            get(move || async move {
                match &c4.intent {
                    Some(s) => Json(s.status().with_nodes(&c4.serving().rollouts.syncs())).into_response(),
                    None => {
                        (http::StatusCode::NOT_FOUND, "not serving intent (start with --intent DIR --plugins DIR)\n")
                            .into_response()
                    }
                }
            }),
        )
        .layer(axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
            let generating = guard.clone();
            async move {
                if let Some(refused) =
                    xdst_serve::access::refuse_foreign_host(generating.serving(), "admin", listening, "admin_host", &req)
                {
                    return refused;
                }
                match authorize_read(&generating, &req) {
                    Ok(()) => next.run(req).await,
                    Err(why) => (http::StatusCode::UNAUTHORIZED, why).into_response(),
                }
            }
        }))
}

/// `/readyz`: whether this replica serves config, and the state of its store.
#[derive(Serialize)]
struct Ready {
    ready: bool,
    /// With intent: the version of the last good generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    /// With `--store`: the store revision that generation translated.
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<crate::generate::store::Revision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<StoreReady>,
    /// What the last good generation held out (documents, files, store keys that fail), by
    /// name: everything else is served, so the replica stays ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    degraded: Option<Degraded>,
    /// Why it is not ready, when it serves but not what it should (issue 48, point 6): a plugin
    /// refused with no version of it serving, a node group served nothing that was served
    /// something before this start while something is held.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unready: Vec<String>,
}

/// The names `/readyz` lists of what is held out; the status page has the errors.
const MAX_DEGRADED_NAMED: usize = 20;

#[derive(Serialize)]
struct Degraded {
    held: usize,
    /// The first [`MAX_DEGRADED_NAMED`] of them: documents (`Kind/namespace/name`), files or
    /// store keys.
    names: Vec<String>,
}

/// What `/readyz` (open to probes without a token) says of the store: no error text.
#[derive(Serialize)]
struct StoreReady {
    connected: bool,
    revision: crate::generate::store::Revision,
    /// Unix seconds since `connected` last changed.
    since: u64,
    /// Times the store went back in time (recreated, or restored from an older state) and
    /// this replica took the new store's listing (issue 33, item 10).
    rewinds: u64,
    /// The store went back in time and this replica keeps its last good config, refusing
    /// writes, until an operator takes the store as it is now (`POST /reload`).
    held: bool,
}

/// Ready once a good generation serves (or, serving a resources directory, once it loaded).
/// A replica whose store is unreachable stays ready: it serves its last good config, and
/// taking it out of a load balancer would leave its Envoys with no server at all.
fn ready(generating: &Arc<Generating>) -> axum::response::Response {
    let mut unready = Vec::new();
    let (ready, version, revision, store, degraded) = match &generating.intent {
        Some(s) => {
            let st = s.status();
            let store = st.store.map(|s| StoreReady {
                connected: s.connected,
                revision: s.revision,
                since: s.since,
                rewinds: s.rewinds,
                held: s.held,
            });
            let degraded = (!st.held.is_empty()).then(|| Degraded {
                held: st.held.len(),
                names: st.held.iter().take(MAX_DEGRADED_NAMED).map(|h| h.held.clone()).collect(),
            });
            for r in st.refused.iter().filter(|r| r.leaves_untranslated()) {
                unready.push(format!(
                    "plugin {} is refused and no version of it serves: {} documents of its kinds are not translated: {}",
                    r.file, r.untranslated, r.reason
                ));
            }
            if !st.held.is_empty() || !st.refused.is_empty() {
                for (group, n) in s.emptied_since_start(&generating.serving().cache) {
                    let group = if group.is_empty() {
                        "the default node group".into()
                    } else {
                        format!("node group {group:?}")
                    };
                    unready.push(format!(
                        "{group} is served nothing; it was served {n} resources before this start, and something is \
                         held out (see the status page)"
                    ));
                }
            }
            (
                st.last_ok_version.is_some() && unready.is_empty(),
                st.last_ok_version,
                st.last_ok_revision,
                store,
                degraded,
            )
        }
        None => (true, None, None, None, None),
    };
    let status = if ready { http::StatusCode::OK } else { http::StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(Ready { ready, version, revision, store, degraded, unready })).into_response()
}

/// Whether a request may read: writes pass (their handlers check the write token), and so do
/// the health check and the index; other reads need the read or write token or an allowed
/// client certificate, once either is configured.
fn authorize_read(generating: &Arc<Generating>, req: &axum::extract::Request) -> Result<(), &'static str> {
    let read = &generating.serving().access;
    let path = req.uri().path();
    let is_read = matches!(*req.method(), http::Method::GET | http::Method::HEAD);
    if read.reads_are_open()
        || !is_read
        || path == "/healthz"
        || path == "/readyz"
        || path == "/"
        || (path == "/metrics" && read.open_metrics)
    {
        return Ok(());
    }
    if read.may_read(req.headers(), req.extensions().get::<xdst_serve::identity::PeerIdentity>()) {
        return Ok(());
    }
    generating.serving().metrics.refusals.get_or_create(&xdst_serve::metrics::label("reason", "admin_read")).inc();
    Err(if xdst_serve::access::bearer(req.headers()).is_some() {
        "wrong bearer token for admin reads\n"
    } else {
        "admin reads need Authorization: Bearer <token> (--admin-read-token-file) or a client certificate that \
         adminReadIdentities allows\n"
    })
}

const INDEX: &str = "xdst admin\n  /healthz\n  /readyz\n  /metrics\n  /debug/nodes\n  /debug/resources[?bodies=true]\n  \
    /debug/plugins\n  /changes/{id}[?group=G]\n  /status/summary, /status/nodes, /status/graph\n  POST /reload (Authorization: Bearer <token>)\n  GET /intent, GET|PUT|DELETE \
    /intent/{kind}/{name} (writes: Authorization: Bearer <token>)\n";

/// `POST /reload`: [`crate::generate::reload::reload`], answered with its outcome.
async fn reload(generating: &Arc<Generating>, headers: &http::HeaderMap) -> axum::response::Response {
    if let Err((status, why)) = generating.serving().access.authorize_write(headers) {
        return (status, why).into_response();
    }
    match crate::generate::reload::reload(generating, "POST /reload").await {
        Ok(report) => Json(report).into_response(),
        Err(e) => (http::StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

#[derive(Deserialize)]
struct NodesQuery {
    /// Every node of every replica (needs `--store`).
    #[serde(default)]
    fleet: bool,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

/// The most nodes one `/debug/nodes` answer shows: every text in a node's entry is bounded
/// (messages are clipped where they enter, a rejection names a few resources), so a page is.
pub const MAX_DEBUG_NODES: usize = 500;

/// `/debug/nodes[?offset=N&limit=M]`: one page of connected nodes, by id. When nodes are left
/// out, a last entry says how many and how to ask for the next page.
fn debug_nodes(generating: &Arc<Generating>, q: &NodesQuery) -> axum::response::Response {
    let nodes = generating.serving().nodes.report(&generating.serving().rollouts.report());
    let total = nodes.len();
    let limit = q.limit.unwrap_or(MAX_DEBUG_NODES).min(MAX_DEBUG_NODES);
    let mut page: Vec<serde_json::Value> =
        nodes.into_iter().skip(q.offset).take(limit).map(|n| serde_json::to_value(n).unwrap_or_default()).collect();
    let shown = page.len();
    if q.offset + shown < total {
        page.push(serde_json::json!({
            "left_out": total - shown,
            "total": total,
            "next": format!("/debug/nodes?offset={}&limit={limit}", q.offset + shown),
        }));
    }
    Json(page).into_response()
}

/// `/debug/nodes?fleet=true`: what every replica published.
async fn fleet(generating: &Arc<Generating>) -> axum::response::Response {
    let Some(etcd) = &generating.store else {
        return (http::StatusCode::BAD_REQUEST, "the fleet view needs a store: start xdst with --store\n")
            .into_response();
    };
    match crate::generate::store::fleet::read(etcd).await {
        Ok(f) => Json(f).into_response(),
        Err(e) => (http::StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

#[derive(Deserialize)]
struct ResourcesQuery {
    #[serde(default)]
    bodies: bool,
}

#[derive(Serialize)]
struct ResourcesReport {
    source: crate::generate::source::StatusInner,
    default: BTreeMap<String, TypeReport>,
    groups: BTreeMap<String, BTreeMap<String, TypeReport>>,
}

#[derive(Serialize)]
struct TypeReport {
    type_url: String,
    version: String,
    resources: Vec<ResourceReport>,
}

#[derive(Serialize)]
struct ResourceReport {
    name: String,
    version: String,
    bytes: usize,
    origin: Option<String>,
    /// The origin, structured: produced_by, document, changed_by, file.
    #[serde(flatten)]
    attribution: xdst_core::resource::Attribution,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<serde_json::Value>,
    /// Set (with `?bodies=true`) where the body is withheld: a Secret's is never shown, by any
    /// endpoint; its name, type, size and content hash (`version`) are.
    #[serde(skip_serializing_if = "Option::is_none")]
    withheld: Option<&'static str>,
}

fn resources(generating: &Arc<Generating>, bodies: bool) -> Json<ResourcesReport> {
    let (default, groups) = generating.serving().cache.sets();
    Json(ResourcesReport {
        source: generating.source.get(),
        default: report(&default, bodies),
        groups: groups.iter().map(|(g, s)| (g.clone(), report(s, bodies))).collect(),
    })
}

fn report(s: &Arc<Snapshot>, bodies: bool) -> BTreeMap<String, TypeReport> {
    s.types()
        .map(|(t, set)| {
            let secret = t.as_ref() == xdst_core::types::SECRET;
            let resources = set
                .resources()
                .map(|r| ResourceReport {
                    name: r.name().to_string(),
                    version: r.version().to_string(),
                    bytes: r.body().len(),
                    origin: r.origin().map(str::to_owned),
                    attribution: r.attribution(),
                    body: (bodies && !secret).then(|| body_json(t, r.body())).flatten(),
                    withheld: (bodies && secret).then_some("Secret bodies are never shown"),
                })
                .collect();
            (
                xdst_core::types::short_name(t).to_owned(),
                TypeReport { type_url: t.to_string(), version: set.version().to_string(), resources },
            )
        })
        .collect()
}

fn body_json(type_url: &str, body: &[u8]) -> Option<serde_json::Value> {
    let desc = descriptors::message_for_type_url(type_url)?;
    let msg = DynamicMessage::decode(desc, body).ok()?;
    msg.serialize_with_options(serde_json::value::Serializer, &SerializeOptions::new().use_proto_field_name(true)).ok()
}

//! The admin HTTP port: health, metrics and what the server is doing.
//!
//! - `GET /healthz`: `ok` once serving.
//! - `GET /metrics`: Prometheus text.
//! - `GET /debug/nodes`: every connected node, its make-before-break plan (mode, step, what
//!   it waits for and since when, what is held back, a NACK that stopped it), its streams
//!   and, per type, the version sent and acknowledged and the last NACK.
//! - `GET /debug/resources`: what each node group is served (`?bodies=true` adds each
//!   resource as proto3 JSON), and the state of the resources directory.
//! - `GET /debug/plugins`: with `--intent`/`--plugins`, the loaded plugins (name, version,
//!   file, digest, kinds, limits) and the last generation (result, error naming the plugin,
//!   calls made, diagnostics).

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

use crate::context::Ctx;

pub fn routes(ctx: &Ctx) -> Router {
    let (c1, c2, c3, c4) = (ctx.clone(), ctx.clone(), ctx.clone(), ctx.clone());
    Router::new()
        .route("/", get(|| async { INDEX }))
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || async move {
                ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], c1.metrics.render())
            }),
        )
        .route("/debug/nodes", get(move || async move { Json(c2.nodes.report(&c2.rollouts.report())) }))
        .route("/debug/resources", get(move |q: Query<ResourcesQuery>| async move { resources(&c3, q.bodies).into_response() }))
        .route(
            "/debug/plugins",
            get(move || async move {
                match &c4.intent {
                    Some(s) => Json(s.status()).into_response(),
                    None => (http::StatusCode::NOT_FOUND, "not serving intent (start with --intent DIR --plugins DIR)\n").into_response(),
                }
            }),
        )
}

const INDEX: &str =
    "xdst admin\n  /healthz\n  /metrics\n  /debug/nodes\n  /debug/resources[?bodies=true]\n  /debug/plugins\n";

#[derive(Deserialize)]
struct ResourcesQuery {
    #[serde(default)]
    bodies: bool,
}

#[derive(Serialize)]
struct ResourcesReport {
    source: crate::source::StatusInner,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<serde_json::Value>,
}

fn resources(ctx: &Ctx, bodies: bool) -> Json<ResourcesReport> {
    let (default, groups) = ctx.cache.sets();
    Json(ResourcesReport {
        source: ctx.source.get(),
        default: report(&default, bodies),
        groups: groups
            .iter()
            .map(|(g, s)| (g.clone(), report(s, bodies)))
            .collect(),
    })
}

fn report(s: &Arc<Snapshot>, bodies: bool) -> BTreeMap<String, TypeReport> {
    s.types()
        .map(|(t, set)| {
            let resources = set
                .resources()
                .map(|r| ResourceReport {
                    name: r.name().to_string(),
                    version: r.version().to_string(),
                    bytes: r.body().len(),
                    origin: r.origin().map(str::to_owned),
                    body: bodies.then(|| body_json(t, r.body())).flatten(),
                })
                .collect();
            (
                xdst_core::types::short_name(t).to_owned(),
                TypeReport {
                    type_url: t.to_string(),
                    version: set.version().to_string(),
                    resources,
                },
            )
        })
        .collect()
}

fn body_json(type_url: &str, body: &[u8]) -> Option<serde_json::Value> {
    let desc = descriptors::message_for_type_url(type_url)?;
    let msg = DynamicMessage::decode(desc, body).ok()?;
    msg.serialize_with_options(
        serde_json::value::Serializer,
        &SerializeOptions::new().use_proto_field_name(true),
    )
    .ok()
}

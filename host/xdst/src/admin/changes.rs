//! `GET /changes` and `GET /changes/{id}[?group=G]`: "is my change live?" (see
//! [`xdst_core::changes`]).

use std::sync::Arc;

use axum::extract::{Path, Query};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use crate::generate::Generating;

/// `GET /changes` (the newest change's id) and `GET /changes/{id}[?group=G]`.
pub fn routes(generating: &Arc<Generating>) -> Router {
    let (c1, c2) = (generating.clone(), generating.clone());
    Router::new()
        .route("/changes", get(move || async move { Json(serde_json::json!({"latest": c1.plane.changes.latest()})) }))
        .route(
            "/changes/{id}",
            get(move |Path(id): Path<String>, q: Query<ChangeQuery>| async move {
                let Some(id) = id.parse::<i64>().ok().filter(|id| *id >= 1) else {
                    let why = format!(
                        "change id {id:?} is not a change: ids are whole numbers from 1 (a write's `change`, or \
                         GET /changes)\n"
                    );
                    return (http::StatusCode::BAD_REQUEST, why).into_response();
                };
                let nodes = c2.serving().rollouts.syncs();
                let changes = &c2.plane.changes;
                if let Some(g) = q.group.as_deref()
                    && !changes.knows_group(g)
                    && !nodes.iter().any(|n| n.group == g)
                {
                    let why = format!(
                        "no node group {g:?}: no generation was translated for it and no node of it is connected \
                         (GET /status/summary lists the groups)\n"
                    );
                    return (http::StatusCode::NOT_FOUND, why).into_response();
                }
                let mut report = changes.report(id, &nodes, q.group.as_deref());
                if let Some(source) = &c2.intent {
                    let status = source.status();
                    let mut problems: Vec<String> =
                        status.document_problems().into_iter().filter_map(|d| d.document).collect();
                    problems.dedup();
                    problems.truncate(MAX_HELD_NAMED);
                    report.problems = problems;
                    // What the change wrote that a generation holds out, for a group or failing.
                    for h in status.held.iter().filter(|h| changes.wrote(id, &h.held)) {
                        if report.held_out.len() >= xdst_core::changes::MAX_HELD_OUT {
                            break;
                        }
                        report.held_out.push(xdst_core::changes::HeldOut {
                            document: h.held.clone(),
                            scope: if h.caused_by.is_empty() { "failing" } else { "group" },
                            group: (!h.caused_by.is_empty()).then(|| h.group.clone()),
                            node: None,
                            why: h.error.clone(),
                        });
                    }
                    // A plugin refused with nothing of it serving: none of its documents is.
                    for r in status.refused.iter().filter(|r| r.leaves_untranslated()) {
                        report.held_out.push(xdst_core::changes::HeldOut {
                            document: format!("plugin {}", r.file),
                            scope: "plugin",
                            group: None,
                            node: None,
                            why: r.reason.clone(),
                        });
                    }
                    report.held = status.held.into_iter().map(|h| h.held).take(MAX_HELD_NAMED).collect();
                }
                // Not served as written somewhere: not live, whatever the nodes hold.
                report.live &= report.held_out.is_empty();
                Json(report).into_response()
            }),
        )
}

/// The held-out names a change report lists; the status page has them all, with the errors.
const MAX_HELD_NAMED: usize = 20;

#[derive(Deserialize)]
struct ChangeQuery {
    group: Option<String>,
}

//! The status page on the admin port (`GET /` from a browser: `assets/status.html`, in the
//! binary, no build step) and the JSON it polls, shaped to stay small at 10,000 nodes:
//!
//! - `GET /status/summary`: per node group, how many nodes are connected, hold the group's
//!   current config, are on their way, or stopped on a rejection; the rejections (node,
//!   resource, plugin, document, Envoy's message; at most [`MAX_NACKS`]); the plugins (digest,
//!   kinds, calls and their timings) and refusals; the last generation and change.
//! - `GET /status/nodes?group=G&q=TEXT&offset=N&limit=M`: one page of nodes (at most
//!   [`MAX_PAGE`]) with their streams' versions sent and acknowledged per type, and age.
//! - `GET /status/graph?group=G`: what the group is served as a graph, listener -> route
//!   configuration -> virtual host -> cluster -> endpoints (at most [`MAX_GRAPH`] vertices).
//!
//! Every one of them is an admin read (the read token or identities, when configured).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use axum::extract::Query;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use prost::Message as _;
use serde::{Deserialize, Serialize};
use xdst_core::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

use crate::generate::Generating;

/// Rejections listed in the summary.
pub const MAX_NACKS: usize = 50;
/// Nodes a page may hold.
pub const MAX_PAGE: usize = 200;
/// Vertices a graph may hold; a larger config is cut, and the answer says so.
pub const MAX_GRAPH: usize = 600;

static PAGE: &str = include_str!("../../assets/status.html");

pub fn routes(generating: &Arc<Generating>) -> Router {
    let (c1, c2, c3) = (generating.clone(), generating.clone(), generating.clone());
    Router::new()
        .route("/status/summary", get(move || async move { Json(summary(&c1)) }))
        .route("/status/nodes", get(move |q: Query<NodesQuery>| async move { nodes(&c2, &q).into_response() }))
        .route("/status/graph", get(move |q: Query<GraphQuery>| async move { Json(graph(&c3, &q.group)) }))
}

/// The page, for a browser; the plain index for everything else.
pub fn index(headers: &http::HeaderMap, plain: &'static str) -> axum::response::Response {
    let html = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
    if html {
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], PAGE)
            .into_response()
    } else {
        plain.into_response()
    }
}

#[derive(Serialize)]
struct Summary {
    generation: Option<GenerationSummary>,
    latest_change: Option<i64>,
    groups: Vec<GroupSummary>,
    nacks: Vec<NackSummary>,
    nacks_total: usize,
    plugins: Vec<PluginSummary>,
    refused: Vec<crate::generate::intent::RefusalReport>,
    held: Vec<crate::generate::intent::HeldReport>,
    /// Documents held back at single nodes (each rejected them alone).
    held_at_nodes: Vec<crate::generate::intent::report::HeldAtNodeReport>,
    /// What the plugins reported about documents in the last good generation (warnings that
    /// name one: a route not accepted, a slice left out): translated, but not as written.
    problems: Vec<crate::generate::intent::DiagnosticReport>,
}

#[derive(Serialize)]
struct GenerationSummary {
    ok: u64,
    failed: u64,
    last_ok_at: Option<u64>,
    version: Option<String>,
    error: Option<String>,
    elapsed_ms: Option<f64>,
}

#[derive(Serialize, Default)]
struct GroupSummary {
    group: String,
    nodes: usize,
    /// Hold the group's current config.
    current: usize,
    /// Stopped on a rejection.
    rejected: usize,
    /// The rest: on their way.
    pending: usize,
    /// Flow control (design 022): responses out awaiting an answer, streams owed a change
    /// they get once they answer, the oldest such change's age, and changes merged so far.
    in_flight: u32,
    streams_owed: usize,
    oldest_owed_seconds: f64,
    merged: u64,
}

#[derive(Serialize)]
struct NackSummary {
    /// The node as reports name it (with which client and from where, when processes share
    /// its id).
    node: String,
    id: String,
    client: u32,
    group: String,
    #[serde(flatten)]
    status: xdst_core::rollout::StoppedStatus,
}

#[derive(Serialize)]
struct PluginSummary {
    name: String,
    version: String,
    digest: String,
    kinds: Vec<String>,
    phase: &'static str,
    /// Its calls since the server started, and their time in milliseconds.
    calls: u64,
    mean_ms: f64,
    last_ms: f64,
    max_ms: f64,
}

fn summary(generating: &Arc<Generating>) -> Summary {
    let syncs = generating.serving().rollouts.syncs();
    let mut groups: BTreeMap<String, GroupSummary> = BTreeMap::new();
    let mut current: BTreeMap<String, String> = BTreeMap::new();
    let mut nacks = Vec::new();
    let mut nacks_total = 0;
    let st = generating.intent.as_ref().map(|s| s.status().with_nodes(&syncs));
    for n in syncs {
        let version =
            current.entry(n.group.clone()).or_insert_with(|| generating.serving().cache.snapshot(&n.group).version());
        let g = groups
            .entry(n.group.clone())
            .or_insert_with(|| GroupSummary { group: n.group.clone(), ..Default::default() });
        g.nodes += 1;
        // A node holding a document back is rejecting it, while it serves the rest.
        let held = n.held_at_node.first().map(|h| h.as_rejection());
        if n.synced.as_deref() == Some(version.as_str()) && held.is_none() {
            g.current += 1;
        } else if let Some(status) = n.rejection.or(held) {
            g.rejected += 1;
            nacks_total += 1;
            if nacks.len() < MAX_NACKS {
                nacks.push(NackSummary { node: n.label, id: n.id, client: n.client, group: n.group, status });
            }
        } else {
            g.pending += 1;
        }
    }
    for (group, f) in generating.serving().nodes.flow_by_group() {
        let g = groups.entry(group.clone()).or_insert_with(|| GroupSummary { group, ..Default::default() });
        g.in_flight = f.flow.in_flight;
        g.streams_owed = f.owed;
        g.oldest_owed_seconds = f.flow.owed_since.and_then(|t| t.elapsed().ok()).map_or(0.0, |d| d.as_secs_f64());
        g.merged = f.flow.merged;
    }
    nacks.sort_by(|a: &NackSummary, b| a.status.seconds_ago.total_cmp(&b.status.seconds_ago));
    let plugins = st
        .as_ref()
        .map(|st| {
            st.plugins
                .iter()
                .map(|p| {
                    let t = st.timings.get(&p.name).cloned().unwrap_or_default();
                    PluginSummary {
                        name: p.name.clone(),
                        version: p.version.clone(),
                        digest: p.digest.clone(),
                        kinds: p.kinds.clone(),
                        phase: p.phase,
                        calls: t.calls,
                        mean_ms: if t.calls == 0 { 0.0 } else { t.total_ms / t.calls as f64 },
                        last_ms: t.last_ms,
                        max_ms: t.max_ms,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Summary {
        generation: st.as_ref().map(|st| GenerationSummary {
            ok: st.generations_ok,
            failed: st.generations_failed,
            last_ok_at: st.last_ok_at,
            version: st.last_ok_version.clone(),
            error: st.last_error.as_ref().map(|e| e.message.clone()),
            elapsed_ms: st.last_generation.as_ref().map(|g| g.elapsed_ms),
        }),
        latest_change: generating.plane.changes.latest(),
        groups: groups.into_values().collect(),
        nacks,
        nacks_total,
        plugins,
        held: st.as_ref().map(|st| st.held.clone()).unwrap_or_default(),
        held_at_nodes: st.as_ref().map(|st| st.held_at_nodes.clone()).unwrap_or_default(),
        problems: st.as_ref().map(|st| st.document_problems()).unwrap_or_default(),
        refused: st.map(|st| st.refused).unwrap_or_default(),
    }
}

#[derive(Deserialize)]
struct NodesQuery {
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Serialize)]
struct NodesPage {
    total: usize,
    offset: usize,
    nodes: Vec<xdst_serve::nodes::NodeReport>,
}

fn nodes(generating: &Arc<Generating>, q: &NodesQuery) -> Json<NodesPage> {
    let limit = q.limit.unwrap_or(50).min(MAX_PAGE);
    let mut keys: Vec<(String, u32, String)> = generating
        .serving()
        .rollouts
        .syncs()
        .into_iter()
        .filter(|n| q.group.as_ref().is_none_or(|g| *g == n.group))
        .filter(|n| q.q.as_ref().is_none_or(|t| n.id.contains(t.as_str())))
        .map(|n| (n.id, n.client, n.group))
        .collect();
    keys.sort();
    let total = keys.len();
    let page: HashSet<(String, u32, String)> = keys.into_iter().skip(q.offset).take(limit).collect();
    let ids: HashSet<&str> = page.iter().map(|(id, _, _)| id.as_str()).collect();
    let plans = generating.serving().rollouts.report_where(|id| ids.contains(id));
    let mut nodes = generating.serving().nodes.report_where(&plans, |id| ids.contains(id));
    nodes.retain(|n| page.contains(&(n.id.clone(), n.client, n.group.clone())));
    nodes.sort_by(|a, b| (&a.id, a.client).cmp(&(&b.id, b.client)));
    Json(NodesPage { total, offset: q.offset, nodes })
}

#[derive(Deserialize)]
struct GraphQuery {
    #[serde(default)]
    group: String,
}

#[derive(Serialize, Default)]
pub struct Graph {
    pub group: String,
    /// `(id, kind, label)`; kinds: listener, route, vhost, cluster, endpoints.
    pub vertices: Vec<(String, &'static str, String)>,
    pub edges: Vec<(String, String)>,
    /// Vertices left out past [`MAX_GRAPH`].
    pub truncated: usize,
}

impl Graph {
    fn vertex(&mut self, seen: &mut HashSet<String>, id: String, kind: &'static str, label: String) -> bool {
        if seen.contains(&id) {
            return true;
        }
        if self.vertices.len() >= MAX_GRAPH {
            self.truncated += 1;
            return false;
        }
        seen.insert(id.clone());
        self.vertices.push((id, kind, label));
        true
    }
}

/// What `group` is served, as a graph.
pub fn graph(generating: &Arc<Generating>, group: &str) -> Graph {
    let snapshot = generating.serving().cache.snapshot(group);
    let mut g = Graph { group: group.to_owned(), ..Default::default() };
    let mut seen = HashSet::new();
    let mut clusters_named: Vec<(String, String)> = Vec::new();
    for l in snapshot.get(LISTENER).into_iter().flat_map(|s| s.resources()) {
        let lid = format!("lds/{}", l.name());
        if !g.vertex(&mut seen, lid.clone(), "listener", l.name().to_string()) {
            continue;
        }
        for r in l.references().names(ROUTE) {
            g.edges.push((lid.clone(), format!("rds/{r}")));
        }
        for c in l.references().names(CLUSTER) {
            clusters_named.push((lid.clone(), c.to_owned()));
        }
    }
    for rc in snapshot.get(ROUTE).into_iter().flat_map(|s| s.resources()) {
        let rid = format!("rds/{}", rc.name());
        if !g.vertex(&mut seen, rid.clone(), "route", rc.name().to_string()) {
            continue;
        }
        let Ok(decoded) = RouteConfiguration::decode(rc.body().clone()) else { continue };
        for vh in decoded.virtual_hosts {
            let vid = format!("vh/{}/{}", rc.name(), vh.name);
            let mut label = vh.name.clone();
            if vh.domains.len() > 1 || vh.domains.first() != Some(&vh.name) {
                label = format!("{} ({})", vh.name, vh.domains.iter().take(3).cloned().collect::<Vec<_>>().join(", "));
            }
            if !g.vertex(&mut seen, vid.clone(), "vhost", label) {
                continue;
            }
            g.edges.push((rid.clone(), vid.clone()));
            for r in &vh.routes {
                let Some(route::Action::Route(a)) = &r.action else { continue };
                match &a.cluster_specifier {
                    Some(route_action::ClusterSpecifier::Cluster(c)) => clusters_named.push((vid.clone(), c.clone())),
                    Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
                        clusters_named.extend(w.clusters.iter().map(|c| (vid.clone(), c.name.clone())))
                    }
                    _ => {}
                }
            }
        }
    }
    for c in snapshot.get(CLUSTER).into_iter().flat_map(|s| s.resources()) {
        let cid = format!("cds/{}", c.name());
        if !g.vertex(&mut seen, cid.clone(), "cluster", c.name().to_string()) {
            continue;
        }
        for e in c.references().names(ENDPOINT) {
            let Some(cla) = snapshot.resource(ENDPOINT, e) else { continue };
            let count = ClusterLoadAssignment::decode(cla.body().clone())
                .map(|a| a.endpoints.iter().map(|l| l.lb_endpoints.len()).sum::<usize>())
                .unwrap_or(0);
            let eid = format!("eds/{e}");
            if g.vertex(&mut seen, eid.clone(), "endpoints", format!("{e}: {count} endpoints")) {
                g.edges.push((cid.clone(), eid));
            }
        }
    }
    let mut unique = HashSet::new();
    for (from, c) in clusters_named {
        let to = format!("cds/{c}");
        if unique.insert((from.clone(), to.clone())) {
            g.edges.push((from, to));
        }
    }
    g.edges.retain(|(a, b)| seen.contains(a) && seen.contains(b));
    g
}

//! Kubernetes Gateway API objects as intent: `Gateway`, `ListenerSet`, `HTTPRoute`,
//! `GRPCRoute`, `TLSRoute`, `TCPRoute`, `UDPRoute`, `Service`, `EndpointSlice`,
//! `ReferenceGrant`, `GatewayClass` and `Namespace`, translated into Envoy Listeners,
//! RouteConfigurations, Clusters and ClusterLoadAssignments. TCP, UDP and TLS listeners are
//! `l4.rs`; ListenerSets, which add listeners to a Gateway, `listener_sets.rs`;
//! BackendTLSPolicies, TLS to backends, `backend_tls.rs`.
//!
//! Whole-set granularity: a route attaches to Gateways in other documents, and the rules of
//! every route on a listener merge into one RouteConfiguration. What each object becomes:
//!
//! | object | becomes |
//! |---|---|
//! | Gateway (ours by class) | a Listener and a RouteConfiguration per port, `<ns>/<name>/<port>` |
//! | Gateway listener | virtual hosts for its hostname and its routes' hostnames |
//! | HTTPRoute or GRPCRoute rule | Envoy routes, one per match, ordered by the specification's precedence |
//! | Service port a route uses | a Cluster and a ClusterLoadAssignment, `<ns>/<service>:<port>` |
//! | EndpointSlice | the endpoints of its Service's clusters |
//!
//! With `nodes: per-gateway`, each resource names the node groups it is for (contract 0.3.0):
//! a Gateway's listeners, routes and Secrets its own group `<ns>/<name>`, a cluster and its
//! endpoints the groups of the Gateways whose routes use it. One call serves every group.
//!
//! Conditions (Accepted, ResolvedRefs, Programmed) are worked out for every route parent and
//! Gateway listener (`status.rs`) and returned as the documents' statuses (contract 0.2.0),
//! which `xdst translate --status` prints and `GET /intent/...` serves; those that are False
//! are also warnings naming the document. `CONFORMANCE.md` lists the upstream conformance cases and how each fares.

mod backend_tls;
mod backends;
mod config;
mod cors;
mod extensions;
mod gateway;
mod hostnames;
mod http;
pub mod incremental;
mod l4;
mod listener_sets;
mod model;
mod schema;
mod status;
mod tls;
mod vhosts;
mod world;

use xdst_guest::{
    Diagnostic, Granularity, Phase, PluginError, PluginInfo, Severity, TranslateRequest, TranslateResponse, Translator,
};

pub use config::{Config, DEFAULT_CONTROLLER};

/// What this plugin claims: Gateway API kinds, and the Kubernetes kinds they refer to.
pub const KINDS: [&str; 15] = [
    "gateway.networking.k8s.io/GatewayClass",
    "gateway.networking.k8s.io/Gateway",
    "gateway.networking.k8s.io/ListenerSet",
    "gateway.networking.k8s.io/HTTPRoute",
    "gateway.networking.k8s.io/GRPCRoute",
    "gateway.networking.k8s.io/TCPRoute",
    "gateway.networking.k8s.io/UDPRoute",
    "gateway.networking.k8s.io/TLSRoute",
    "gateway.networking.k8s.io/ReferenceGrant",
    "gateway.networking.k8s.io/BackendTLSPolicy",
    "core/Service",
    "core/Namespace",
    "core/Secret",
    "core/ConfigMap",
    "discovery.k8s.io/EndpointSlice",
];

/// The translator.
pub struct GatewayApi;

impl Translator for GatewayApi {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "gateway-api".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kinds: KINDS.iter().map(|&k| k.to_owned()).collect(),
            phase: Phase::Translate,
            granularity: Granularity::WholeSet,
            incremental: true,
        }
    }

    /// A full call translates everything; a changes call what the change reaches
    /// (`incremental.rs`), from what this instance kept.
    fn translate(request: TranslateRequest) -> Result<TranslateResponse, PluginError> {
        thread_local! {
            static KEPT: std::cell::RefCell<incremental::Incremental> = std::cell::RefCell::default();
        }
        KEPT.with(|kept| kept.borrow_mut().call(&request))
    }
}

/// Translates a request; also returns every document's status (`status` as Kubernetes would
/// show it), by id. The plugin returns them as the contract's `statuses` (0.2.0).
pub fn translate(
    request: &TranslateRequest,
) -> Result<(TranslateResponse, std::collections::BTreeMap<String, serde_json::Value>), PluginError> {
    translate_with_statuses(request).map(|(out, statuses)| (out, statuses.to_json()))
}

fn translate_with_statuses(request: &TranslateRequest) -> Result<(TranslateResponse, status::Statuses), PluginError> {
    let config = Config::parse(&request.config)?;
    let world = world::World::read(&request.documents)?;
    let generations = request.documents.iter().filter_map(|d| Some((d.id(), d.generation()?))).collect();
    let t = Translation::of(&world, &config, generations);
    let mut out = t.out;
    out.diagnostics = diagnostics(&t.said, &t.statuses.problems());
    Ok((out, t.statuses))
}

/// A whole translation: what it returns, every document's status, what a changes call patches
/// (`Frame`) and what the EndpointSlices of each backend say.
pub(crate) struct Translation {
    out: TranslateResponse,
    statuses: status::Statuses,
    frame: gateway::Frame,
    said: std::collections::BTreeMap<backends::Backend, Vec<Diagnostic>>,
}

impl Translation {
    pub(crate) fn of(
        world: &world::World,
        config: &Config,
        generations: std::collections::BTreeMap<String, i64>,
    ) -> Translation {
        let mut out =
            TranslateResponse { removed: vec![], resources: Vec::new(), diagnostics: Vec::new(), statuses: Vec::new() };
        let mut statuses =
            status::Statuses { controller: config.controller_name.clone(), generations, ..Default::default() };
        let frame = gateway::translate(world, config, &mut out, &mut statuses);
        let tls = backend_tls::Policies::read(world, &gateway::ours_set(world, config), &mut statuses);
        let said = backends::emit(world, &frame, &tls, &mut out);
        Translation { out, statuses, frame, said }
    }
}

/// Every diagnostic: what EndpointSlices say, by backend, then every condition that is False,
/// naming its document.
pub(crate) fn diagnostics(
    said: &std::collections::BTreeMap<backends::Backend, Vec<Diagnostic>>,
    problems: &status::Problems,
) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = said.values().flatten().cloned().collect();
    for (id, message) in problems.values().flatten() {
        out.push(Diagnostic {
            severity: Severity::Warning,
            message: message.clone(),
            document: Some(id.clone()),
            field: None,
        });
    }
    out
}

#[cfg(target_arch = "wasm32")]
xdst_guest::export_translator!(GatewayApi);

//! The graph check run before a resource set is published (ORDER-1): every route
//! configuration a listener or a routing scope names exists, every cluster a route, TCP proxy or UDP proxy names exists,
//! every Secret a listener's or a cluster's TLS context fetches over ADS exists, and every EDS cluster has its
//! load assignment. A dangling reference would leave Envoy
//! warming forever or routing to nothing, so the set is refused instead.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{ConfigSource, config_source, transport_socket};
use envoy_types::pb::envoy::config::listener::v3::FilterChain;
use envoy_types::pb::envoy::config::listener::v3::{Filter, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration, ScopedRouteConfiguration, route, route_action,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::envoy::extensions::filters::udp::udp_proxy::v3::{
    Route as UdpRoute, UdpProxyConfig, udp_proxy_config,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{DownstreamTlsContext, UpstreamTlsContext};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::xds::r#type::matcher::v3::{Matcher, matcher};
use prost::Message;

use std::sync::Arc;

use crate::pieces::Piece;
use crate::resource::Resource;
use crate::snapshot::Snapshot;
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, SCOPED_ROUTE, SECRET, short_name};

const HCM: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const TCP_PROXY: &str = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";
const UDP_PROXY: &str = "type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig";
const UDP_ROUTE: &str = "type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.Route";
const UPSTREAM_TLS: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
const DOWNSTREAM_TLS: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";

/// A reference from one resource to another that is not in the set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {from:?} {field} names {} {missing:?}, which does not exist", kind(from_type), kind(missing_type))]
pub struct DanglingReference {
    pub from_type: &'static str,
    pub from: String,
    /// Where in `from` the reference is (`filter_chains[0].filters[0].rds.route_config_name`).
    pub field: String,
    pub missing_type: &'static str,
    pub missing: String,
}

/// A resource whose bytes do not decode as its type (only possible for hand-built sets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsistencyError {
    #[error(transparent)]
    Dangling(#[from] DanglingReference),
    #[error("{} {name:?} does not decode: {reason}", short_name(type_url))]
    Undecodable { type_url: String, name: String, reason: String },
}

fn kind(type_url: &str) -> &'static str {
    match type_url {
        LISTENER => "listener",
        ROUTE => "route configuration",
        CLUSTER => "cluster",
        ENDPOINT => "load assignment",
        SECRET => "secret",
        SCOPED_ROUTE => "routing scope",
        _ => "resource",
    }
}

/// What one resource names: `(field, type, name)` triples, or why it does not decode.
#[derive(Debug, Clone)]
pub struct References {
    refs: Result<Vec<(String, &'static str, String)>, String>,
    /// A RouteConfiguration put together from its routes ([`crate::pieces`]): how many routes
    /// each virtual host has, and each route's piece in order (what it names, field within the
    /// route and cluster), shared with the pieces the next version is matched against; the
    /// whole field is written out only for an error.
    hosts: Vec<u32>,
    routes: Arc<[Piece]>,
    binds: Vec<String>,
    by_scope: bool,
}

/// Where a reference sits in its resource.
#[derive(Debug, Clone, Copy)]
pub enum At<'a> {
    /// A field path from the resource's top.
    Field(&'a str),
    /// A field of the route at (virtual host, route) of a RouteConfiguration.
    Route(u32, u32, &'a str),
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Field(field) => f.write_str(field),
            At::Route(host, route, field) => write!(f, "virtual_hosts[{host}].routes[{route}].{field}"),
        }
    }
}

/// Two lists of what resources name are equal when they name the same things from the same
/// fields, however each was worked out.
impl PartialEq for References {
    fn eq(&self, other: &Self) -> bool {
        let listed = |r: &References| -> Result<Vec<(String, &'static str, String)>, String> {
            r.refs.clone()?;
            Ok(r.all().map(|(at, t, n)| (at.to_string(), t, n.to_owned())).collect())
        };
        (self.binds == other.binds) && (self.by_scope == other.by_scope) && listed(self) == listed(other)
    }
}

impl Eq for References {}

impl References {
    /// A RouteConfiguration's references, from its routes' pieces (`hosts`: how many routes
    /// each virtual host has), as [`of`](Self::of) would find them decoding the whole
    /// ([`crate::pieces`]).
    pub fn of_routes(hosts: Vec<u32>, routes: Arc<[Piece]>) -> References {
        References { refs: Ok(Vec::new()), hosts, routes, binds: Vec::new(), by_scope: false }
    }

    /// Every reference: where it sits, the type it names and the name (none if the resource
    /// does not decode).
    pub fn all(&self) -> impl Iterator<Item = (At<'_>, &'static str, &str)> {
        self.all_but_shared(None)
    }

    /// [`all`](Self::all), less the routes whose piece `before` (what the same resource was)
    /// shares: the bytes of such a route did not change ([`crate::pieces`]), nor what it names.
    pub fn all_but_shared<'a>(
        &'a self,
        before: Option<&References>,
    ) -> impl Iterator<Item = (At<'a>, &'static str, &'a str)> {
        let shared = before.map(|b| self.shared_routes(b)).unwrap_or_default();
        // Each route's place: (virtual host, route within it).
        let places = self.hosts.iter().zip(0u32..).flat_map(|(&n, host)| (0..n).map(move |route| (host, route)));
        let routes = self.routes.iter().zip(places).enumerate();
        let routes = routes.filter(move |(k, _)| !shared.get(*k).copied().unwrap_or(false)).flat_map(
            |(_, (piece, (host, route)))| {
                piece.clusters().iter().map(move |(field, n)| (At::Route(host, route, field), CLUSTER, n.as_str()))
            },
        );
        self.refs.iter().flatten().map(|(field, t, n)| (At::Field(field), *t, n.as_str())).chain(routes)
    }

    /// For each of this configuration's routes, whether `before` holds its very piece: lined
    /// up in order, else found among the pieces of `before` not lined up.
    fn shared_routes(&self, before: &References) -> Vec<bool> {
        let (new, old) = (&self.routes, &before.routes);
        if Arc::ptr_eq(new, old) {
            return vec![true; new.len()];
        }
        let (lined, left) = crate::pieces::line_up(new.len(), old.len(), |i, j| new[i].same(&old[j]));
        let left: std::collections::HashSet<*const ()> = left.into_iter().map(|j| old[j].id()).collect();
        lined.iter().zip(new.iter()).map(|(j, piece)| j.is_some() || left.contains(&piece.id())).collect()
    }

    /// The names of `type_url` this resource refers to (none if it does not decode).
    pub fn names(&self, type_url: &str) -> impl Iterator<Item = &str> {
        self.all().filter(move |(_, t, _)| *t == type_url).map(|(_, _, n)| n)
    }

    /// [`names`](Self::names), less those only an `api_listener` names: Envoy ignores a
    /// listener's `api_listener` when it comes over LDS (only proxyless gRPC clients use one,
    /// and they ask for what it names by name), so an Envoy never asks for them.
    pub fn names_envoy_follows(&self, type_url: &str) -> impl Iterator<Item = &str> {
        self.all()
            .filter(move |(at, t, _)| {
                *t == type_url && !matches!(at, At::Field(field) if field.starts_with(API_LISTENER_FIELD))
            })
            .map(|(_, _, n)| n)
    }

    /// Whether a listener routes some requests by scope (scoped RDS): its routing scopes are
    /// whatever scoped route configurations the node holds, named by none of its fields.
    pub fn routes_by_scope(&self) -> bool {
        self.by_scope
    }

    /// The socket addresses a listener binds (`ip:port/protocol`): none for another resource,
    /// or a listener that binds no port.
    pub fn binds(&self) -> &[String] {
        &self.binds
    }

    /// Decodes `r` and collects the names it refers to.
    pub fn of(r: &Resource) -> References {
        let body = r.body().clone();
        let mut binds = Vec::new();
        let mut by_scope = false;
        let refs = match r.type_url().as_ref() {
            LISTENER => Listener::decode(body).map(|l| {
                binds = listener_binds(&l);
                by_scope = routes_by_scope(&l);
                listener_refs(&l)
                    .into_iter()
                    .map(|(field, rf)| match rf {
                        Ref::Route(n) => (field, ROUTE, n),
                        Ref::Cluster(n) => (field, CLUSTER, n),
                        Ref::Secret(n) => (field, SECRET, n),
                    })
                    .collect()
            }),
            ROUTE => RouteConfiguration::decode(body)
                .map(|rc| route_clusters(&rc, "").into_iter().map(|(field, n)| (field, CLUSTER, n)).collect()),
            // A scope names the route configuration it routes by, or carries one inline.
            SCOPED_ROUTE => ScopedRouteConfiguration::decode(body).map(|scope| match scope.route_configuration {
                Some(rc) => route_clusters(&rc, "route_configuration.")
                    .into_iter()
                    .map(|(field, n)| (field, CLUSTER, n))
                    .collect(),
                None => vec![("route_configuration_name".to_owned(), ROUTE, scope.route_configuration_name)],
            }),
            CLUSTER => Cluster::decode(body).map(|c| {
                let mut refs: Vec<(String, &'static str, String)> = eds_service_name(&c)
                    .map(|s| vec![("eds_cluster_config.service_name".to_owned(), ENDPOINT, s)])
                    .unwrap_or_default();
                refs.extend(upstream_secret_refs(&c).into_iter().map(|(field, n)| (field, SECRET, n)));
                refs
            }),
            _ => Ok(Vec::new()),
        };
        References { refs: refs.map_err(|e| e.to_string()), hosts: Vec::new(), routes: Arc::from([]), binds, by_scope }
    }
}

/// Whether a filter chain of `l` has an HTTP connection manager that routes by scope.
fn routes_by_scope(l: &Listener) -> bool {
    l.filter_chains.iter().chain(&l.default_filter_chain).flat_map(|c| &c.filters).any(|f| match &f.config_type {
        Some(filter::ConfigType::TypedConfig(any)) if any.type_url == HCM => {
            HttpConnectionManager::decode(any.value.as_slice())
                .is_ok_and(|h| matches!(h.route_specifier, Some(RouteSpecifier::ScopedRoutes(_))))
        }
        _ => false,
    })
}

/// The socket addresses `l` binds: its address and additional addresses, unless it binds no
/// port (`bind_to_port: false`).
fn listener_binds(l: &Listener) -> Vec<String> {
    use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
    if l.bind_to_port.as_ref().is_some_and(|b| !b.value) {
        return Vec::new();
    }
    let extra = l.additional_addresses.iter().filter_map(|a| a.address.as_ref());
    l.address
        .iter()
        .chain(extra)
        .filter_map(|a| match &a.address {
            Some(address::Address::SocketAddress(s)) => {
                let port = match s.port_specifier {
                    Some(socket_address::PortSpecifier::PortValue(p)) if p != 0 => p,
                    _ => return None,
                };
                let protocol = if s.protocol == socket_address::Protocol::Udp as i32 { "udp" } else { "tcp" };
                Some(format!("{}:{port}/{protocol}", s.address))
            }
            _ => None,
        })
        .collect()
}

/// Two listeners binding one address: Envoy refuses the second. Returns `(listener, other,
/// address)` for the first such pair, `listener` being one that `is_new` says is new (the
/// one to blame), or the later by name when both or neither are.
pub fn duplicate_bind<'a>(
    listeners: impl Iterator<Item = &'a Arc<Resource>>,
    is_new: impl Fn(&Resource) -> bool,
) -> Option<(Arc<Resource>, Arc<Resource>, String)> {
    let mut bound: std::collections::HashMap<&str, &'a Arc<Resource>> = std::collections::HashMap::new();
    for l in listeners {
        for address in l.references().binds() {
            if let Some(other) = bound.insert(address, l) {
                let (blamed, kept) = if is_new(other) && !is_new(l) { (other, l) } else { (l, other) };
                return Some((blamed.clone(), kept.clone(), address.clone()));
            }
        }
    }
    None
}

/// Checks `snapshot`, knowing that `previous` passed: only resources that are not the very
/// ones `previous` had are looked at, unless something was removed (a removal can leave any
/// reference dangling), in which case everything is.
pub fn check_since(snapshot: &Snapshot, previous: &Snapshot) -> Result<(), Vec<ConsistencyError>> {
    use crate::snapshot::Change;
    let mut changed: Vec<(&Arc<Resource>, Option<&Arc<Resource>>)> = Vec::new();
    for (t, _) in previous.types() {
        if snapshot.get(t).is_none() {
            return check(snapshot);
        }
    }
    for (t, new) in snapshot.types() {
        let Some(old) = previous.get(t) else {
            changed.extend(new.resources().map(|r| (r, None)));
            continue;
        };
        if Arc::ptr_eq(new, old) {
            continue;
        }
        for c in new.changes_since(old) {
            match c {
                Change::Added(r) => changed.push((r, None)),
                Change::Updated(r) => changed.push((r, old.get(r.name()))),
                // A removal can leave any reference dangling.
                Change::Removed(_) => return check(snapshot),
            }
        }
    }
    check_resources(snapshot, changed.into_iter().filter(|(r, _)| refers(r.type_url())))
}

/// Checks every reference in `snapshot`; returns all dangling ones (empty when consistent).
/// Each resource is decoded once in its life (see [`Resource::references`]), so checking a
/// large set again after a small change costs lookups, not decoding.
pub fn check(snapshot: &Snapshot) -> Result<(), Vec<ConsistencyError>> {
    let all = snapshot.types().filter(|(t, _)| refers(t)).flat_map(|(_, set)| set.resources().map(|r| (r, None)));
    check_resources(snapshot, all)
}

/// The types whose resources name others.
pub const REFERRING: [&str; 4] = [LISTENER, SCOPED_ROUTE, ROUTE, CLUSTER];

fn refers(type_url: &str) -> bool {
    REFERRING.contains(&type_url)
}

/// Checks each resource's references; with the resource's version in a set that passed
/// (`before`, nothing removed since), the routes it shares with that version are not
/// looked at again: what they name was there and still is.
fn check_resources<'a>(
    snapshot: &Snapshot,
    resources: impl IntoIterator<Item = (&'a Arc<Resource>, Option<&'a Arc<Resource>>)>,
) -> Result<(), Vec<ConsistencyError>> {
    let mut errors = Vec::new();
    let mut undecodable = Vec::new();
    for (r, before) in resources {
        let from_type = match r.type_url().as_ref() {
            LISTENER => LISTENER,
            ROUTE => ROUTE,
            SCOPED_ROUTE => SCOPED_ROUTE,
            _ => CLUSTER,
        };
        let type_url = r.type_url();
        {
            match &r.references().refs {
                Ok(_) => {
                    let before = before.map(|b| b.references());
                    for (at, missing_type, missing) in r.references().all_but_shared(before) {
                        if snapshot.resource(missing_type, missing).is_none() {
                            errors.push(ConsistencyError::Dangling(DanglingReference {
                                from_type,
                                from: r.name().to_string(),
                                field: at.to_string(),
                                missing_type,
                                missing: missing.to_owned(),
                            }));
                        }
                    }
                }
                Err(reason) => undecodable.push(ConsistencyError::Undecodable {
                    type_url: type_url.to_string(),
                    name: r.name().to_string(),
                    reason: reason.clone(),
                }),
            }
        }
    }
    errors.extend(undecodable);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// Where a listener's `api_listener` configuration sits (reference fields start with it).
const API_LISTENER_FIELD: &str = "api_listener.api_listener";

enum Ref {
    Route(String),
    Cluster(String),
    Secret(String),
}

fn listener_refs(l: &Listener) -> Vec<(String, Ref)> {
    let mut out = Vec::new();
    let chains = l.filter_chains.iter().enumerate().map(|(i, c)| (format!("filter_chains[{i}]"), c));
    let default = l.default_filter_chain.iter().map(|c| ("default_filter_chain".to_string(), c));
    for (at, chain) in chains.chain(default) {
        for (j, f) in chain.filters.iter().enumerate() {
            filter_refs(f, &format!("{at}.filters[{j}]"), &mut out);
        }
        secret_refs(chain, &at, &mut out);
    }
    if let Some(api) = l.api_listener.as_ref().and_then(|a| a.api_listener.as_ref()) {
        any_refs(api, API_LISTENER_FIELD, &mut out);
    }
    for (i, f) in l.listener_filters.iter().enumerate() {
        use envoy_types::pb::envoy::config::listener::v3::listener_filter::ConfigType;
        if let Some(ConfigType::TypedConfig(any)) = &f.config_type
            && any.type_url == UDP_PROXY
            && let Ok(udp) = UdpProxyConfig::decode(any.value.as_slice())
        {
            let at = format!("listener_filters[{i}].typed_config");
            #[allow(deprecated, reason = "Envoy still takes the cluster field: it is checked like the matcher")]
            match udp.route_specifier {
                Some(udp_proxy_config::RouteSpecifier::Cluster(c)) => {
                    out.push((format!("{at}.cluster"), Ref::Cluster(c)))
                }
                Some(udp_proxy_config::RouteSpecifier::Matcher(m)) => {
                    matcher_refs(&m, &format!("{at}.matcher"), &mut out)
                }
                None => {}
            }
        }
    }
    out
}

/// The clusters a UDP proxy's match tree routes to (its `Route` actions), with their fields.
fn matcher_refs(m: &Matcher, at: &str, out: &mut Vec<(String, Ref)>) {
    use envoy_types::pb::xds::r#type::matcher::v3::matcher::{OnMatch, on_match};
    let mut on_match = |o: &OnMatch, at: String| match &o.on_match {
        Some(on_match::OnMatch::Action(a)) => {
            if let Some(any) = a.typed_config.as_ref().filter(|any| any.type_url == UDP_ROUTE)
                && let Ok(r) = UdpRoute::decode(any.value.as_slice())
            {
                out.push((format!("{at}.action.typed_config.cluster"), Ref::Cluster(r.cluster)));
            }
        }
        Some(on_match::OnMatch::Matcher(inner)) => matcher_refs(inner, &format!("{at}.matcher"), out),
        None => {}
    };
    if let Some(o) = &m.on_no_match {
        on_match(o, format!("{at}.on_no_match"));
    }
    match &m.matcher_type {
        Some(matcher::MatcherType::MatcherList(list)) => {
            for (i, fm) in list.matchers.iter().enumerate() {
                if let Some(o) = &fm.on_match {
                    on_match(o, format!("{at}.matcher_list.matchers[{i}].on_match"));
                }
            }
        }
        Some(matcher::MatcherType::MatcherTree(tree)) => {
            use envoy_types::pb::xds::r#type::matcher::v3::matcher::matcher_tree::TreeType;
            if let Some(TreeType::ExactMatchMap(map) | TreeType::PrefixMatchMap(map)) = &tree.tree_type {
                for (key, o) in &map.map {
                    on_match(o, format!("{at}.matcher_tree.map[{key:?}]"));
                }
            }
        }
        None => {}
    }
}

/// The Secrets a filter chain's TLS context fetches over ADS (ones from another source are
/// not this set's to hold).
fn secret_refs(chain: &FilterChain, at: &str, out: &mut Vec<(String, Ref)>) {
    let Some(transport_socket::ConfigType::TypedConfig(any)) =
        chain.transport_socket.as_ref().and_then(|t| t.config_type.as_ref())
    else {
        return;
    };
    if any.type_url != DOWNSTREAM_TLS {
        return;
    }
    let Ok(tls) = DownstreamTlsContext::decode(any.value.as_slice()) else { return };
    let Some(common) = tls.common_tls_context else { return };
    let over_ads = |c: &Option<ConfigSource>| {
        matches!(
            c.as_ref().and_then(|c| c.config_source_specifier.as_ref()),
            Some(config_source::ConfigSourceSpecifier::Ads(_))
        )
    };
    for (i, sds) in common.tls_certificate_sds_secret_configs.into_iter().enumerate() {
        if over_ads(&sds.sds_config) {
            let field =
                format!("{at}.transport_socket.common_tls_context.tls_certificate_sds_secret_configs[{i}].name");
            out.push((field, Ref::Secret(sds.name)));
        }
    }
}

fn filter_refs(f: &Filter, at: &str, out: &mut Vec<(String, Ref)>) {
    if let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type {
        any_refs(any, &format!("{at}.typed_config"), out);
    }
}

fn any_refs(any: &Any, at: &str, out: &mut Vec<(String, Ref)>) {
    match any.type_url.as_str() {
        HCM => {
            let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice()) else { return };
            match hcm.route_specifier {
                Some(RouteSpecifier::Rds(rds)) => {
                    out.push((format!("{at}.rds.route_config_name"), Ref::Route(rds.route_config_name)))
                }
                Some(RouteSpecifier::RouteConfig(rc)) => {
                    for (field, c) in route_clusters(&rc, &format!("{at}.route_config.")) {
                        out.push((field, Ref::Cluster(c)));
                    }
                }
                _ => {}
            }
        }
        TCP_PROXY => {
            let Ok(tcp) = TcpProxy::decode(any.value.as_slice()) else { return };
            match tcp.cluster_specifier {
                Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => out.push((format!("{at}.cluster"), Ref::Cluster(c))),
                Some(tcp_proxy::ClusterSpecifier::WeightedClusters(w)) => {
                    for (i, c) in w.clusters.into_iter().enumerate() {
                        out.push((format!("{at}.weighted_clusters.clusters[{i}].name"), Ref::Cluster(c.name)));
                    }
                }
                None => {}
            }
        }
        _ => {}
    }
}

/// Every cluster named by a route action, with its field path.
fn route_clusters(rc: &RouteConfiguration, prefix: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, vh) in rc.virtual_hosts.iter().enumerate() {
        for (j, r) in vh.routes.iter().enumerate() {
            one_route_clusters(r, &format!("{prefix}virtual_hosts[{i}].routes[{j}]."), &mut out);
        }
    }
    out
}

/// The clusters one route names, each with its field (after `at`).
fn one_route_clusters(r: &Route, at: &str, out: &mut Vec<(String, String)>) {
    let Some(route::Action::Route(action)) = &r.action else { return };
    match &action.cluster_specifier {
        Some(route_action::ClusterSpecifier::Cluster(c)) => out.push((format!("{at}route.cluster"), c.clone())),
        Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
            for (k, c) in w.clusters.iter().enumerate() {
                out.push((format!("{at}route.weighted_clusters.clusters[{k}].name"), c.name.clone()));
            }
        }
        _ => {}
    }
}

/// The clusters a route (its bytes) names, each with its field within the route; none if it
/// does not decode.
pub fn clusters_of_route(bytes: &[u8]) -> Option<Vec<(String, String)>> {
    let r = Route::decode(bytes).ok()?;
    let mut out = Vec::new();
    one_route_clusters(&r, "", &mut out);
    Some(out)
}

/// The Secrets a cluster's upstream TLS context fetches over ADS (a client certificate it
/// presents): a cluster waits for them before it is used.
fn upstream_secret_refs(c: &Cluster) -> Vec<(String, String)> {
    let Some(transport_socket::ConfigType::TypedConfig(any)) =
        c.transport_socket.as_ref().and_then(|t| t.config_type.as_ref())
    else {
        return Vec::new();
    };
    if any.type_url != UPSTREAM_TLS {
        return Vec::new();
    }
    let Ok(tls) = UpstreamTlsContext::decode(any.value.as_slice()) else { return Vec::new() };
    let Some(common) = tls.common_tls_context else { return Vec::new() };
    common
        .tls_certificate_sds_secret_configs
        .into_iter()
        .enumerate()
        .filter(|(_, sds)| {
            matches!(
                sds.sds_config.as_ref().and_then(|c| c.config_source_specifier.as_ref()),
                Some(config_source::ConfigSourceSpecifier::Ads(_))
            )
        })
        .map(|(i, sds)| {
            (format!("transport_socket.common_tls_context.tls_certificate_sds_secret_configs[{i}].name"), sds.name)
        })
        .collect()
}

/// The load assignment name an EDS cluster waits for.
fn eds_service_name(c: &Cluster) -> Option<String> {
    let eds = cluster::DiscoveryType::Eds as i32;
    match c.cluster_discovery_type {
        Some(cluster::ClusterDiscoveryType::Type(t)) if t == eds => {}
        _ => return None,
    }
    let service = c.eds_cluster_config.as_ref().map(|e| e.service_name.as_str()).unwrap_or("");
    Some(if service.is_empty() { c.name.clone() } else { service.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode_file;

    const SET: &str = r#"
"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: http
address: {socket_address: {address: 127.0.0.1, port_value: 10000}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: in
      rds: {route_config_name: routes, config_source: {ads: {}, resource_api_version: V3}}
      http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
  transport_socket:
    name: envoy.transport_sockets.tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
      common_tls_context:
        tls_certificate_sds_secret_configs:
        - {name: cert, sds_config: {ads: {}, resource_api_version: V3}}
        - {name: from-a-file, sds_config: {path_config_source: {path: /etc/envoy/sds.yaml}}}
---
"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: dns
address: {socket_address: {protocol: UDP, address: 127.0.0.1, port_value: 10053}}
listener_filters:
- name: envoy.filters.udp_listener.udp_proxy
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig
    stat_prefix: dns
    matcher:
      on_no_match:
        action:
          name: route
          typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.udp.udp_proxy.v3.Route, cluster: udp}
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: udp
connect_timeout: 1s
transport_socket:
  name: envoy.transport_sockets.tls
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
    common_tls_context:
      tls_certificate_sds_secret_configs:
      - {name: client-cert, sds_config: {ads: {}, resource_api_version: V3}}
---
"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
name: client-cert
tls_certificate: {certificate_chain: {inline_string: c}, private_key: {inline_string: k}}
---
"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
name: cert
tls_certificate: {certificate_chain: {inline_string: c}, private_key: {inline_string: k}}
---
"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: routes
virtual_hosts:
- name: all
  domains: ["*"]
  routes:
  - match: {prefix: /a}
    route: {cluster: web}
  - match: {prefix: /}
    route: {weighted_clusters: {clusters: [{name: web, weight: 1}, {name: api, weight: 1}]}}
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: web
type: EDS
eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: api
type: EDS
eds_cluster_config: {eds_config: {ads: {}}, service_name: api-v2}
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: web
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: api-v2
"#;

    fn snapshot_without(skip: &str) -> Snapshot {
        let rs = decode_file("set.yaml", SET).unwrap();
        Snapshot::from_resources(
            rs.into_iter().filter(|r| format!("{}/{}", short_name(r.type_url()), r.name()) != skip),
        )
        .unwrap()
    }

    fn only_error(skip: &str) -> String {
        let errs = check(&snapshot_without(skip)).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        errs[0].to_string()
    }

    /// `check_since` finds what `check` finds, looking only at what changed.
    #[test]
    fn incremental_check_matches_the_full_one() {
        let good = snapshot_without("");
        check_since(&good, &Snapshot::default()).unwrap();
        check_since(&good, &good).unwrap();
        // Removing the cluster an unchanged route names: caught.
        let gone = good.apply([(Arc::from(CLUSTER), Arc::from("api"))], []).unwrap();
        let errs = check_since(&gone, &good).unwrap_err();
        assert!(errs[0].to_string().contains("names cluster \"api\", which does not exist"), "{errs:?}");
        // A changed route naming a missing cluster: caught; the same route unchanged is fine.
        let bad_route = decode_file(
            "r.yaml",
            "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: routes\nvirtual_hosts: \
                [{name: a, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: ghost}}]}]\n",
        )
        .unwrap();
        let changed = good.apply([(Arc::from(ROUTE), Arc::from("routes"))], bad_route).unwrap();
        assert!(check_since(&changed, &good).is_err());
        // An added cluster with nothing referring to it is fine, and only it is looked at.
        let extra = decode_file(
            "c.yaml",
            "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: extra\nconnect_timeout: 1s\n",
        )
        .unwrap();
        let more = good.apply([], extra).unwrap();
        check_since(&more, &good).unwrap();
        assert!(Arc::ptr_eq(more.get(ROUTE).unwrap(), good.get(ROUTE).unwrap()), "untouched types are shared");
    }

    #[test]
    fn consistent_set_passes() {
        check(&snapshot_without("")).unwrap();
    }

    #[test]
    fn missing_route_configuration() {
        assert_eq!(
            only_error("rds/routes"),
            "listener \"http\" filter_chains[0].filters[0].typed_config.rds.route_config_name names route \
                configuration \"routes\", which does not exist"
        );
    }

    /// A routing scope names the route configuration its requests use: a scope naming one the
    /// set lacks is refused like a listener naming one, and an inline one's clusters count.
    #[test]
    fn a_scope_needs_its_route_configuration() {
        let scope = |rc: &str| {
            decode_file(
                "s.yaml",
                &format!(
                    "\"@type\": type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration\nname: s\n\
                     route_configuration_name: {rc}\nkey: {{fragments: [{{string_key: a.example}}]}}\n"
                ),
            )
            .unwrap()
        };
        let good = snapshot_without("");
        let with = good.apply([], scope("routes")).unwrap();
        check(&with).unwrap();
        check_since(&with, &good).unwrap();
        let dangling = good.apply([], scope("ghost")).unwrap();
        let errs = check_since(&dangling, &good).unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            "routing scope \"s\" route_configuration_name names route configuration \"ghost\", which does not exist"
        );
        assert_eq!(check(&dangling).unwrap_err(), errs);
        let inline = decode_file(
            "s.yaml",
            "\"@type\": type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration\nname: s\n\
             route_configuration: {name: r, virtual_hosts: [{name: a, domains: [a.example], routes: \
             [{match: {prefix: /}, route: {cluster: ghost}}]}]}\nkey: {fragments: [{string_key: a.example}]}\n",
        )
        .unwrap();
        let errs = check(&good.apply([], inline).unwrap()).unwrap_err();
        assert!(errs[0].to_string().contains("names cluster \"ghost\""), "{errs:?}");
    }

    #[test]
    fn missing_cluster_of_a_udp_proxy() {
        assert_eq!(
            only_error("cds/udp"),
            "listener \"dns\" listener_filters[0].typed_config.matcher.on_no_match.action.typed_config.cluster \
                names cluster \"udp\", which does not exist"
        );
    }

    #[test]
    fn a_cluster_needs_the_client_certificate_it_presents() {
        assert_eq!(
            only_error("sds/client-cert"),
            "cluster \"udp\" transport_socket.common_tls_context.tls_certificate_sds_secret_configs[0].name names \
                secret \"client-cert\", which does not exist"
        );
    }

    #[test]
    fn missing_cluster_in_weighted_route() {
        assert_eq!(
            only_error("cds/api"),
            "route configuration \"routes\" virtual_hosts[0].routes[1].route.weighted_clusters.clusters[1].name \
                names cluster \"api\", which does not exist"
        );
    }

    /// A Secret fetched over ADS must be in the set; one from another source is not its to hold.
    #[test]
    fn tls_context_needs_its_secrets_over_ads() {
        assert_eq!(
            only_error("sds/cert"),
            "listener \"http\" filter_chains[0].transport_socket.common_tls_context.\
                tls_certificate_sds_secret_configs[0].name names secret \"cert\", which does not exist"
        );
        let good = snapshot_without("");
        let gone = good.apply([(Arc::from(SECRET), Arc::from("cert"))], []).unwrap();
        assert!(check_since(&gone, &good).is_err(), "removing a Secret a listener uses is caught");
    }

    #[test]
    fn eds_cluster_needs_its_load_assignment_by_service_name() {
        assert_eq!(
            only_error("eds/api-v2"),
            "cluster \"api\" eds_cluster_config.service_name names load assignment \"api-v2\", which does not exist"
        );
    }
}

//! The graph check run before a resource set is published (ORDER-1): every route
//! configuration a listener names exists, every cluster a route or TCP proxy names exists,
//! and every EDS cluster has its load assignment. A dangling reference would leave Envoy
//! warming forever or routing to nothing, so the set is refused instead.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::{Filter, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;

use crate::snapshot::Snapshot;
use crate::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, short_name};

const HCM: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const TCP_PROXY: &str = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";

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
        _ => "resource",
    }
}

/// Checks every reference in `snapshot`; returns all dangling ones (empty when consistent).
pub fn check(snapshot: &Snapshot) -> Result<(), Vec<ConsistencyError>> {
    let mut errors = Vec::new();
    let has = |t: &str, n: &str| snapshot.resource(t, n).is_some();
    let mut dangling = |from_type, from: &str, field: String, missing_type, missing: &str| {
        errors.push(ConsistencyError::Dangling(DanglingReference {
            from_type,
            from: from.to_owned(),
            field,
            missing_type,
            missing: missing.to_owned(),
        }))
    };
    let mut undecodable = Vec::new();

    for (type_url, set) in snapshot.types() {
        for r in set.resources() {
            let name = r.name().as_ref();
            let result = match type_url.as_ref() {
                LISTENER => Listener::decode(r.body().clone()).map(|l| {
                    for (field, refs) in listener_refs(&l) {
                        match refs {
                            Ref::Route(n) if !has(ROUTE, &n) => dangling(LISTENER, name, field, ROUTE, &n),
                            Ref::Cluster(n) if !has(CLUSTER, &n) => dangling(LISTENER, name, field, CLUSTER, &n),
                            _ => {}
                        }
                    }
                }),
                ROUTE => RouteConfiguration::decode(r.body().clone()).map(|rc| {
                    for (field, n) in route_clusters(&rc, "") {
                        if !has(CLUSTER, &n) {
                            dangling(ROUTE, name, field, CLUSTER, &n);
                        }
                    }
                }),
                CLUSTER => Cluster::decode(r.body().clone()).map(|c| {
                    if let Some(service) = eds_service_name(&c) {
                        if !has(ENDPOINT, &service) {
                            dangling(CLUSTER, name, "eds_cluster_config.service_name".into(), ENDPOINT, &service);
                        }
                    }
                }),
                _ => Ok(()),
            };
            if let Err(e) = result {
                undecodable.push(ConsistencyError::Undecodable {
                    type_url: type_url.to_string(),
                    name: name.to_owned(),
                    reason: e.to_string(),
                });
            }
        }
    }
    errors.extend(undecodable);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

enum Ref {
    Route(String),
    Cluster(String),
}

fn listener_refs(l: &Listener) -> Vec<(String, Ref)> {
    let mut out = Vec::new();
    let chains = l.filter_chains.iter().enumerate().map(|(i, c)| (format!("filter_chains[{i}]"), c));
    let default = l.default_filter_chain.iter().map(|c| ("default_filter_chain".to_string(), c));
    for (at, chain) in chains.chain(default) {
        for (j, f) in chain.filters.iter().enumerate() {
            filter_refs(f, &format!("{at}.filters[{j}]"), &mut out);
        }
    }
    if let Some(api) = l.api_listener.as_ref().and_then(|a| a.api_listener.as_ref()) {
        any_refs(api, "api_listener.api_listener", &mut out);
    }
    out
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
            let Some(route::Action::Route(action)) = &r.action else { continue };
            let at = format!("{prefix}virtual_hosts[{i}].routes[{j}].route");
            match &action.cluster_specifier {
                Some(route_action::ClusterSpecifier::Cluster(c)) => out.push((format!("{at}.cluster"), c.clone())),
                Some(route_action::ClusterSpecifier::WeightedClusters(w)) => {
                    for (k, c) in w.clusters.iter().enumerate() {
                        out.push((format!("{at}.weighted_clusters.clusters[{k}].name"), c.name.clone()));
                    }
                }
                _ => {}
            }
        }
    }
    out
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
        Snapshot::from_resources(rs.into_iter().filter(|r| format!("{}/{}", short_name(r.type_url()), r.name()) != skip)).unwrap()
    }

    fn only_error(skip: &str) -> String {
        let errs = check(&snapshot_without(skip)).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        errs[0].to_string()
    }

    #[test]
    fn consistent_set_passes() {
        check(&snapshot_without("")).unwrap();
    }

    #[test]
    fn missing_route_configuration() {
        assert_eq!(
            only_error("rds/routes"),
            "listener \"http\" filter_chains[0].filters[0].typed_config.rds.route_config_name names route configuration \"routes\", which does not exist"
        );
    }

    #[test]
    fn missing_cluster_in_weighted_route() {
        assert_eq!(
            only_error("cds/api"),
            "route configuration \"routes\" virtual_hosts[0].routes[1].route.weighted_clusters.clusters[1].name names cluster \"api\", which does not exist"
        );
    }

    #[test]
    fn eds_cluster_needs_its_load_assignment_by_service_name() {
        assert_eq!(
            only_error("eds/api-v2"),
            "cluster \"api\" eds_cluster_config.service_name names load assignment \"api-v2\", which does not exist"
        );
    }
}

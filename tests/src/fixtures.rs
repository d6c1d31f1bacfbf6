//! Envoy resources as YAML, for tests that write a resources directory.

use std::path::Path;

/// An HTTP listener on `port` whose routes come from RDS `route` over ADS.
pub fn listener(name: &str, port: u16, route: &str) -> String {
    format!(
        r#""@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: {name}
address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: {name}
      rds: {{route_config_name: {route}, config_source: {{ads: {{}}, resource_api_version: V3}}}}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
"#
    )
}

/// A route configuration sending everything to `cluster`.
/// A listener with an `api_listener` (a proxyless gRPC client's), its HTTP connection manager
/// taking route configuration `route` over ADS: Envoy ignores it over LDS.
pub fn api_listener(name: &str, route: &str) -> String {
    format!(
        r#""@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: {name}
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: {name}
    rds: {{route_config_name: {route}, config_source: {{ads: {{}}, resource_api_version: V3}}}}
    http_filters:
    - name: router
      typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
"#
    )
}

pub fn route(name: &str, cluster: &str) -> String {
    format!(
        r#""@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: {name}
virtual_hosts:
- name: all
  domains: ["*"]
  routes:
  - match: {{prefix: /}}
    route: {{cluster: {cluster}, timeout: 5s}}
"#
    )
}

/// An EDS cluster and its load assignment (one endpoint on 127.0.0.1:`port`).
pub fn cluster(name: &str, port: u16) -> String {
    format!(
        r#""@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: {name}
type: EDS
connect_timeout: 1s
eds_cluster_config: {{eds_config: {{ads: {{}}, resource_api_version: V3}}}}
---
{}"#,
        endpoints(name, port)
    )
}

/// A load assignment with one endpoint on 127.0.0.1:`port`, with a locality and weight
/// (proxyless gRPC needs both).
pub fn endpoints(cluster: &str, port: u16) -> String {
    format!(
        r#""@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: {cluster}
endpoints:
- locality: {{zone: z1}}
  load_balancing_weight: 1
  lb_endpoints:
  - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}
"#
    )
}

/// Writes `contents` to `dir/name` atomically (temp file, then rename), as editors and
/// config tooling should.
pub fn write(dir: &Path, name: &str, contents: &str) {
    xdst_core::files::write_atomic(&dir.join(name), contents).unwrap();
}

/// A resources directory holding a listener `http` on `port`, route `local` and cluster
/// `backend` with one endpoint on `upstream_port`.
pub fn basic_dir(port: u16, upstream_port: u16) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "listener.yaml", &listener("http", port, "local"));
    write(dir.path(), "route.yaml", &route("local", "backend"));
    write(dir.path(), "backend.yaml", &cluster("backend", upstream_port));
    dir
}

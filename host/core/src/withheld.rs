//! What a node group is not given (issue 49, item 6): the Secrets that were not made for it.
//!
//! A Secret carries a private key. A plugin that tags its resources with node groups (contract
//! 0.3.0) says which groups each Secret is for; an untagged one is in the default set, and so
//! in every group's. A group the identity rules do not name as one of their proxies' (`proxy:
//! true`) gets none of those: only the Secrets made for it alone (tagged for it, or in its own
//! resources directory), and nothing that cannot stand without the ones it does not get (a
//! listener that terminates TLS with one, a cluster that presents one as its client
//! certificate, a route configuration that sends to such a cluster, a listener that names such
//! a route configuration, ...), so that what it is served is still whole (ORDER-1).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::consistency::References;
use crate::snapshot::Snapshot;
use crate::types::SECRET;

/// `set` without the Secrets it shares (by name) with `default`, and without what then names
/// something it no longer has; `set` itself (the same snapshot) when it shares none.
pub fn untagged_secrets(set: &Snapshot, default: &Snapshot) -> Snapshot {
    let (Some(secrets), Some(shared)) = (set.get(SECRET), default.get(SECRET)) else { return set.clone() };
    let withheld: BTreeSet<Arc<str>> =
        secrets.resources().filter(|r| shared.get(r.name()).is_some()).map(|r| r.name().clone()).collect();
    if withheld.is_empty() {
        return set.clone();
    }
    // What each resource that can name another names (decoded once in a resource's life).
    let referring: Vec<(&'static str, Arc<str>, &References)> = crate::consistency::REFERRING
        .into_iter()
        .flat_map(|t| set.get(t).into_iter().flat_map(move |s| s.resources().map(move |r| (t, r))))
        .map(|(t, r)| (t, r.name().clone(), r.references()))
        .collect();
    let mut gone: BTreeMap<&'static str, BTreeSet<Arc<str>>> = BTreeMap::from([(SECRET, withheld)]);
    loop {
        let mut more = Vec::new();
        for (t, name, refs) in &referring {
            if gone.get(t).is_some_and(|g| g.contains(name)) {
                continue;
            }
            let dangles = gone.iter().any(|(missing, names)| refs.names(missing).any(|n| names.contains(n)));
            if dangles {
                more.push((*t, name.clone()));
            }
        }
        if more.is_empty() {
            break;
        }
        for (t, name) in more {
            gone.entry(t).or_default().insert(name);
        }
    }
    let sets = gone.into_iter().filter_map(|(t, names)| {
        let current = set.get(t)?;
        let names: Vec<Arc<str>> = names.into_iter().collect();
        Some((set.type_key(t), Arc::new(current.patch(&names, &[]))))
    });
    set.with_sets(sets.collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use crate::types::{CLUSTER, LISTENER, ROUTE};

    fn yaml(text: &str) -> Resource {
        crate::decode::decode_file("t.yaml", text).unwrap().remove(0)
    }

    fn names(s: &Snapshot, t: &str) -> Vec<String> {
        s.get(t).map(|set| set.resources().map(|r| r.name().to_string()).collect()).unwrap_or_default()
    }

    const TLS_LISTENER: &str = r#"
"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: https
address: {socket_address: {address: 0.0.0.0, port_value: 443}}
filter_chains:
- transport_socket:
    name: tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
      common_tls_context:
        tls_certificate_sds_secret_configs:
        - {name: gw-cert, sds_config: {ads: {}, resource_api_version: V3}}
  filters:
  - name: tcp
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
      stat_prefix: s
      cluster: plain
"#;

    fn listener(name: &str, port: u32, route: &str) -> String {
        format!(
            r#"
"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: {name}
address: {{socket_address: {{address: 0.0.0.0, port_value: {port}}}}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: s
      rds: {{route_config_name: {route}, config_source: {{ads: {{}}, resource_api_version: V3}}}}
      http_filters: [{{name: envoy.filters.http.router, typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}}}]
"#
        )
    }

    fn route(name: &str, cluster: &str) -> String {
        format!(
            r#"
"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: {name}
virtual_hosts: [{{name: v, domains: ["*"], routes: [{{match: {{prefix: /}}, route: {{cluster: {cluster}}}}}]}}]
"#
        )
    }

    fn cluster(name: &str, client_cert: Option<&str>) -> String {
        let tls = client_cert.map_or(String::new(), |c| {
            format!(
                r#"
transport_socket:
  name: tls
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
    common_tls_context:
      tls_certificate_sds_secret_configs: [{{name: {c}, sds_config: {{ads: {{}}, resource_api_version: V3}}}}]"#
            )
        });
        format!(
            r#"
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: {name}
type: STATIC
load_assignment: {{cluster_name: {name}, endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: 80}}}}}}}}]}}]}}{tls}
"#
        )
    }

    fn secret(name: &str) -> String {
        format!(
            r#"
"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
name: {name}
generic_secret: {{secret: {{inline_string: x}}}}
"#
        )
    }

    /// The Gateway's key and the backend client certificate are the default set's: a group
    /// not given them loses them and all that stands on them (the TLS listener; the cluster
    /// presenting the certificate, the route configuration sending to it, the listener naming
    /// that), and keeps the rest, its own Secret included. The check the cache makes before
    /// publishing passes on what is left.
    #[test]
    fn a_group_loses_the_default_s_secrets_and_what_stands_on_them() {
        let default_only = [
            yaml(TLS_LISTENER),
            yaml(&listener("http", 80, "to-backend")),
            yaml(&route("to-backend", "backend")),
            yaml(&cluster("backend", Some("client-cert"))),
            yaml(&listener("plain-http", 81, "to-plain")),
            yaml(&route("to-plain", "plain")),
            yaml(&cluster("plain", None)),
            yaml(&secret("gw-cert")),
            yaml(&secret("client-cert")),
        ];
        let default = Snapshot::from_resources(default_only.iter().cloned()).unwrap();
        let own = Snapshot::from_resources(default_only.into_iter().chain([yaml(&secret("team-a-cert"))])).unwrap();
        let out = untagged_secrets(&own, &default);
        assert_eq!(names(&out, SECRET), ["team-a-cert"]);
        assert_eq!(names(&out, LISTENER), ["plain-http"]);
        assert_eq!(names(&out, ROUTE), ["to-plain"]);
        assert_eq!(names(&out, CLUSTER), ["plain"]);
        crate::consistency::check(&out).unwrap();
        // Nothing shared: the same set back.
        let no_secrets = default.without(SECRET);
        assert!(untagged_secrets(&no_secrets, &default).same_content(&no_secrets));
    }
}

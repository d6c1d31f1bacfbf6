//! Routes that carry connections and datagrams, not requests: TCPRoute, UDPRoute and
//! TLSRoute, and the Envoy Listener of a Gateway port whose protocol is TCP, UDP or TLS.
//!
//! | Gateway listener | Envoy Listener |
//! |---|---|
//! | TCP | one filter chain, a TCP proxy to the backends of the route it serves |
//! | UDP | a UDP listener whose UDP proxy sends each session to the route's backends |
//! | TLS, `Passthrough` | a TLS inspector reads the server name (SNI); one filter chain per hostname, proxying the still encrypted connection to the backends of the route serving that hostname |
//! | TLS, `Terminate` | the same chains, each ending TLS with the listener's certificates first |
//!
//! Several routes may attach to one listener (each is Accepted and counted in
//! `attachedRoutes`), but a connection carries no request to tell them apart: the oldest route
//! (by `creationTimestamp`, then `namespace/name`, as the specification orders conflicting
//! routes) serves the listener, or, on a TLS listener, each hostname. A rule's backendRefs
//! share the connections by weight; the share of a backendRef that does not resolve goes to a
//! cluster without endpoints, so those connections are closed, and a weight of 0 gets none.

use std::collections::{BTreeMap, BTreeSet};

use xdst_guest::envoy::envoy::config::core::v3::{SocketAddress, address, socket_address};
use xdst_guest::envoy::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter, listener_filter,
};
use xdst_guest::{XdsResource, pack};

use crate::backends::{self, Backend};
use crate::extensions::{
    Matcher, OnMatch, TcpClusterWeight, TcpProxy, TcpWeightedClusters, TypedExtensionConfig, UdpProxyConfig, UdpRoute,
};
use crate::gateway::Attachment;
use crate::model::{GatewaySpec, HttpRouteSpec};
use crate::world::{Doc, Key, RouteKey, World};

/// A Gateway port of protocol TCP, UDP or TLS.
pub struct Port<'a> {
    pub gateway: &'a Doc<GatewaySpec>,
    pub gkey: &'a Key,
    /// The Envoy Listener's name, `<namespace>/<gateway>/<port>`.
    pub name: &'a str,
    pub address: &'a str,
    /// The port Envoy binds.
    pub port: u16,
    pub protocol: &'a str,
    /// The Gateway listeners programmed on the port, with the Secrets of their certificates
    /// (TLS `Terminate` only).
    pub programmed: &'a [(usize, Vec<Key>)],
}

/// What a port becomes: its Listener (none while no route serves it), the clusters made for
/// it (splits, the one without endpoints), and the Service backends it sends to.
pub struct L4 {
    pub listener: Option<Listener>,
    pub clusters: Vec<XdsResource>,
    pub backends: Vec<Backend>,
}

/// A route's share of a listener's traffic: its backend (none: it does not resolve) and weight.
type Share = (Option<Backend>, u32);

/// The Listener of `port` and what it needs.
pub fn listener(world: &World, port: &Port<'_>, attachments: &[Attachment]) -> L4 {
    let mut out = L4 { listener: None, clusters: Vec::new(), backends: Vec::new() };
    // What serves each hostname ("*" on TCP and UDP): the oldest route there, and the
    // listener it attached through.
    let mut served: BTreeMap<String, (&RouteKey, usize)> = BTreeMap::new();
    for (i, _) in port.programmed {
        let mut here: Vec<&Attachment> =
            attachments.iter().filter(|a| &a.gateway == port.gkey && a.listener == *i).collect();
        here.sort_by_key(|a| age(world, &a.route));
        for a in here {
            for h in &a.hostnames {
                served.entry(h.clone()).or_insert((&a.route, *i));
            }
        }
    }
    if served.is_empty() {
        return out;
    }
    let owner = port.gateway.id.clone();
    let mut empty = false;
    let listener = match port.protocol {
        "UDP" => {
            // A UDP port is one listener: the route of its first hostname serves it.
            let (route, _) = served.values().next().copied().expect("not empty");
            let shares = shares(world, route);
            out.backends.extend(shares.iter().filter_map(|(b, _)| b.clone()));
            let live: Vec<&Share> = shares.iter().filter(|(_, w)| *w > 0).collect();
            let cluster = match live.as_slice() {
                [(Some(b), _)] => b.cluster(),
                _ => {
                    let name = format!("{}/split", port.name);
                    backends::emit_split(world, &name, &shares, &owner, &mut out.clusters);
                    name
                }
            };
            udp_listener(port, &cluster)
        }
        _ => {
            let tls = port.protocol == "TLS";
            let mut listener = Listener {
                name: port.name.to_owned(),
                address: Some(socket(port.address, port.port, socket_address::Protocol::Tcp)),
                listener_filters: if tls { vec![crate::tls::inspector()] } else { Vec::new() },
                ..Default::default()
            };
            for (hostname, (route, i)) in &served {
                let shares = shares(world, route);
                out.backends.extend(shares.iter().filter_map(|(b, _)| b.clone()));
                let (proxy, needs_empty) = tcp_proxy(port.name, &shares);
                empty |= needs_empty;
                let mut chain = FilterChain {
                    name: format!("{}/{hostname}", port.name),
                    filters: vec![Filter {
                        name: "envoy.filters.network.tcp_proxy".into(),
                        config_type: Some(filter::ConfigType::TypedConfig(pack(&proxy))),
                    }],
                    ..Default::default()
                };
                if tls && hostname != "*" {
                    chain.filter_chain_match =
                        Some(FilterChainMatch { server_names: vec![hostname.clone()], ..Default::default() });
                }
                let secrets = port.programmed.iter().find(|(l, _)| l == i).map(|(_, s)| s.as_slice()).unwrap_or(&[]);
                if tls && !secrets.is_empty() {
                    chain.transport_socket = Some(crate::tls::terminate(secrets, &[], None));
                }
                listener.filter_chains.push(chain);
                if !tls {
                    // A TCP port is one stream of connections: one route serves it.
                    break;
                }
            }
            listener
        }
    };
    if empty {
        backends::emit_empty(&empty_cluster(port.name), &owner, &mut out.clusters);
    }
    let unique: BTreeSet<Backend> = out.backends.drain(..).collect();
    out.backends = unique.into_iter().collect();
    out.listener = Some(listener);
    out
}

/// A route's age, oldest first: `creationTimestamp` (none counts as oldest), then
/// `namespace/name`, then its kind.
fn age(world: &World, key: &RouteKey) -> (String, String, String, &'static str) {
    let route = &world.routes[key];
    (route.metadata.creation_timestamp.clone().unwrap_or_default(), route.namespace.clone(), route.name.clone(), key.0)
}

/// The backends of a route's first rule (a connection cannot pick a rule), by weight.
fn shares(world: &World, key: &RouteKey) -> Vec<Share> {
    let route: &Doc<HttpRouteSpec> = &world.routes[key];
    let Some(rule) = route.spec.rules.first() else { return Vec::new() };
    rule.backend_refs
        .iter()
        .map(|r| (backends::resolve(world, key.0, &route.namespace, r).ok(), r.weight.unwrap_or(1)))
        .collect()
}

/// The cluster without endpoints of a port, for the shares that do not resolve.
fn empty_cluster(port: &str) -> String {
    format!("{port}/unresolved")
}

/// A TCP proxy sending connections to `shares`; whether it names the port's cluster without
/// endpoints.
fn tcp_proxy(port: &str, shares: &[Share]) -> (TcpProxy, bool) {
    let mut weights: BTreeMap<String, u32> = BTreeMap::new();
    for (b, w) in shares.iter().filter(|(_, w)| *w > 0) {
        let name = b.as_ref().map(Backend::cluster).unwrap_or_else(|| empty_cluster(port));
        *weights.entry(name).or_default() += w;
    }
    if weights.is_empty() {
        weights.insert(empty_cluster(port), 1);
    }
    let empty = weights.contains_key(&empty_cluster(port));
    let mut proxy = TcpProxy { stat_prefix: port.to_owned(), cluster: None, weighted_clusters: None };
    if weights.len() == 1 {
        proxy.cluster = weights.into_keys().next();
    } else {
        proxy.weighted_clusters = Some(TcpWeightedClusters {
            clusters: weights.into_iter().map(|(name, weight)| TcpClusterWeight { name, weight }).collect(),
        });
    }
    (proxy, empty)
}

/// A UDP Listener at `port` whose UDP proxy sends every session to `cluster`.
fn udp_listener(port: &Port<'_>, cluster: &str) -> Listener {
    let route = TypedExtensionConfig {
        name: "route".into(),
        typed_config: Some(pack(&UdpRoute { cluster: cluster.to_owned() })),
    };
    let proxy = UdpProxyConfig {
        stat_prefix: port.name.to_owned(),
        matcher: Some(Matcher { on_no_match: Some(OnMatch { action: Some(route) }) }),
    };
    Listener {
        name: port.name.to_owned(),
        address: Some(socket(port.address, port.port, socket_address::Protocol::Udp)),
        listener_filters: vec![ListenerFilter {
            name: "envoy.filters.udp_listener.udp_proxy".into(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(pack(&proxy))),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn socket(
    ip: &str,
    port: u16,
    protocol: socket_address::Protocol,
) -> xdst_guest::envoy::envoy::config::core::v3::Address {
    xdst_guest::envoy::envoy::config::core::v3::Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            protocol: protocol as i32,
            address: ip.to_owned(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(port))),
            ..Default::default()
        })),
    }
}

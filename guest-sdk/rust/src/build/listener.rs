//! Listeners: an Envoy HTTP listener, and the `api_listener` proxyless gRPC clients read.

use crate::envoy::envoy::config::listener::v3::{self as listener, Filter, FilterChain, Listener};
use crate::envoy::envoy::extensions::filters::http::router::v3::Router;
use crate::envoy::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use crate::envoy::google::protobuf::Any;
use crate::pack;

const HCM_FILTER: &str = "envoy.filters.network.http_connection_manager";
const ROUTER_FILTER: &str = "envoy.filters.http.router";

/// The HttpConnectionManager both listener forms carry: RDS over ADS for `route_config`, the
/// given HTTP filters, then the router (Envoy and gRPC clients both require it last).
#[derive(Debug, Clone)]
struct Hcm {
    stat_prefix: String,
    route_config: String,
    filters: Vec<HttpFilter>,
    strip_any_host_port: bool,
    upgrades: Vec<String>,
    /// Routing scopes by host instead of one route configuration: the scope set's name.
    scoped: Option<String>,
}

impl Hcm {
    fn new(name: &str) -> Self {
        Hcm {
            stat_prefix: name.to_owned(),
            route_config: name.to_owned(),
            filters: Vec::new(),
            strip_any_host_port: false,
            upgrades: Vec::new(),
            scoped: None,
        }
    }

    fn filter(&mut self, name: String, config: Any) {
        self.filters.push(HttpFilter {
            name,
            config_type: Some(http_filter::ConfigType::TypedConfig(config)),
            ..Default::default()
        });
    }

    fn build(mut self) -> Any {
        self.filter(ROUTER_FILTER.to_owned(), pack(&Router::default()));
        pack(&HttpConnectionManager {
            stat_prefix: self.stat_prefix,
            http_filters: self.filters,
            strip_port_mode: self
                .strip_any_host_port
                .then_some(http_connection_manager::StripPortMode::StripAnyHostPort(true)),
            upgrade_configs: self
                .upgrades
                .into_iter()
                .map(|upgrade_type| http_connection_manager::UpgradeConfig { upgrade_type, ..Default::default() })
                .collect(),
            early_header_mutation_extensions: self.scoped.iter().map(|set| super::scope::mark(set)).collect(),
            route_specifier: Some(match self.scoped {
                Some(set) => http_connection_manager::RouteSpecifier::ScopedRoutes(super::scope::by_host(set)),
                None => http_connection_manager::RouteSpecifier::Rds(Rds {
                    config_source: Some(super::ads()),
                    route_config_name: self.route_config,
                }),
            }),
            ..Default::default()
        })
    }
}

/// An Envoy HTTP listener: one filter chain with an HttpConnectionManager that fetches its
/// routes by RDS over ADS. Defaults: address `0.0.0.0`, route configuration and stat prefix
/// named like the listener, codec auto-detected (HTTP/1.1 and HTTP/2).
#[derive(Debug, Clone)]
pub struct HttpListener {
    name: String,
    address: String,
    port: u16,
    hcm: Hcm,
}

impl HttpListener {
    pub fn new(name: impl Into<String>, port: u16) -> Self {
        let name = name.into();
        HttpListener { hcm: Hcm::new(&name), name, address: "0.0.0.0".to_owned(), port }
    }

    /// The IP to bind (`0.0.0.0`, `::`, `127.0.0.1`, ...).
    pub fn address(mut self, ip: impl Into<String>) -> Self {
        self.address = ip.into();
        self
    }

    /// The RouteConfiguration to fetch by RDS (default: the listener's name).
    pub fn route_config(mut self, name: impl Into<String>) -> Self {
        self.hcm.route_config = name.into();
        self
    }

    /// Routes each request by its host over scoped RDS instead of one RouteConfiguration: the
    /// routing scopes of set `set` ([`super::RoutingScope`]), each naming the RouteConfiguration
    /// of one host. A change to one host's routes then re-sends and re-applies that host's
    /// configuration only. A request whose host has no scope gets 404.
    pub fn scoped_by_host(mut self, set: impl Into<String>) -> Self {
        self.hcm.scoped = Some(set.into());
        self
    }

    /// The HttpConnectionManager's stat prefix (default: the listener's name).
    pub fn stat_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.hcm.stat_prefix = prefix.into();
        self
    }

    /// Adds an HTTP filter before the router, in call order (`config` from [`pack`]).
    pub fn http_filter(mut self, name: impl Into<String>, config: Any) -> Self {
        self.hcm.filter(name.into(), config);
        self
    }

    /// Matches virtual host domains against the Host header without its port
    /// (`example.com:8080` matches `example.com`).
    pub fn strip_any_host_port(mut self) -> Self {
        self.hcm.strip_any_host_port = true;
        self
    }

    /// Lets requests upgrade the connection to `upgrade_type` (`websocket`) on every route.
    pub fn upgrade(mut self, upgrade_type: impl Into<String>) -> Self {
        self.hcm.upgrades.push(upgrade_type.into());
        self
    }

    pub fn build(self) -> Listener {
        Listener {
            address: Some(super::socket_address(self.address, self.port)),
            filter_chains: vec![FilterChain {
                filters: vec![Filter {
                    name: HCM_FILTER.to_owned(),
                    config_type: Some(listener::filter::ConfigType::TypedConfig(self.hcm.build())),
                }],
                ..Default::default()
            }],
            name: self.name,
            ..Default::default()
        }
    }
}

/// The Listener a proxyless gRPC client asks for when it dials `xds:///<name>`: no address,
/// an `api_listener` holding an HttpConnectionManager with RDS over ADS and the router filter.
/// The route configuration defaults to the listener's name; its virtual host must match the
/// target (`*` or `<name>`).
#[derive(Debug, Clone)]
pub struct ApiListener {
    name: String,
    hcm: Hcm,
}

impl ApiListener {
    /// `name` is the target as clients dial it: `echo` for `xds:///echo`.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        ApiListener { hcm: Hcm::new(&name), name }
    }

    /// The RouteConfiguration to fetch by RDS (default: the listener's name).
    pub fn route_config(mut self, name: impl Into<String>) -> Self {
        self.hcm.route_config = name.into();
        self
    }

    /// Adds an HTTP filter before the router (gRPC clients support only a few, such as fault
    /// injection and RBAC).
    pub fn http_filter(mut self, name: impl Into<String>, config: Any) -> Self {
        self.hcm.filter(name.into(), config);
        self
    }

    pub fn build(self) -> Listener {
        Listener {
            api_listener: Some(listener::ApiListener { api_listener: Some(self.hcm.build()) }),
            name: self.name,
            ..Default::default()
        }
    }
}

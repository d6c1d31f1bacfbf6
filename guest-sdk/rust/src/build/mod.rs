//! Typed builders for the Envoy resources a translator usually emits, as `xds-api` messages
//! ready for [`resource`](crate::resource()):
//!
//! | builder | produces | for |
//! |---|---|---|
//! | [`HttpListener`] | `Listener` | an Envoy HTTP listener: address, port, HttpConnectionManager with RDS over ADS and the router filter |
//! | [`ApiListener`] | `Listener` | proxyless gRPC (`xds:///name`): `api_listener` with the same HttpConnectionManager |
//! | [`RouteConfig`], [`VirtualHost`], [`Route`], [`HeaderMatch`], [`RetryPolicy`] | `RouteConfiguration` | routing: matches, cluster or weighted clusters, timeouts, retries, rewrites, header mutation |
//! | [`EdsCluster`], [`HealthCheck`], [`CircuitBreakers`] | `Cluster` | an EDS cluster over ADS: lb policy, health checks, circuit breakers, HTTP/2 upstream |
//! | [`LoadAssignment`], [`Locality`], [`Endpoint`] | `ClusterLoadAssignment` | endpoints by locality, with weights and priorities |
//!
//! Every builder takes what is required in `new` and the rest by chained methods, and `build()`
//! returns the message; fields the builders do not cover can be set on the message after
//! `build()` (every message is a plain struct with public fields). Durations are
//! [`std::time::Duration`]s. Nothing here validates intent: check values before building.
//!
//! ```
//! use std::time::Duration;
//! use xdst_guest::build::{EdsCluster, HttpListener, LbPolicy, Route, RouteConfig, VirtualHost};
//!
//! let listener = HttpListener::new("public", 8080).build();
//! let routes = RouteConfig::new("public")
//!     .virtual_host(
//!         VirtualHost::new("shop", ["shop.example.com"])
//!             .route(Route::prefix("/api").to_cluster("api").timeout(Duration::from_secs(5)))
//!             .route(Route::prefix("/").to_weighted_clusters([("web-v1", 90), ("web-v2", 10)])),
//!     )
//!     .build();
//! let cluster = EdsCluster::new("api").lb_policy(LbPolicy::LeastRequest).build();
//! assert_eq!(routes.virtual_hosts[0].routes.len(), 2);
//! # let _ = (listener, cluster);
//! ```

mod cluster;
mod endpoint;
mod listener;
mod route;
mod scope;

pub use cluster::{CircuitBreakers, EdsCluster, HealthCheck, LbPolicy};
pub use endpoint::{Endpoint, LoadAssignment, Locality};
pub use listener::{ApiListener, HttpListener};
pub use route::{HeaderMatch, RetryPolicy, Route, RouteConfig, VirtualHost};
pub use scope::{RoutingScope, SCOPE_HEADER};

use crate::envoy::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, HeaderValue, HeaderValueOption, SocketAddress, address,
    config_source, header_value_option::HeaderAppendAction, socket_address,
};
use crate::envoy::google::protobuf;

/// The largest duration protobuf can carry (10,000 years).
const MAX_SECONDS: u64 = 315_576_000_000;

/// A protobuf `Duration` (clamped to protobuf's 10,000-year maximum).
pub fn duration(d: std::time::Duration) -> protobuf::Duration {
    protobuf::Duration {
        seconds: d.as_secs().min(MAX_SECONDS) as i64,
        nanos: if d.as_secs() > MAX_SECONDS { 0 } else { d.subsec_nanos() as i32 },
    }
}

/// `{ads: {}, resource_api_version: V3}`: fetch over the client's ADS stream, which is how
/// xdst serves everything.
pub fn ads() -> ConfigSource {
    ConfigSource {
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        resource_api_version: ApiVersion::V3 as i32,
        ..Default::default()
    }
}

/// A TCP socket address. Envoy needs an IP literal here (listeners and EDS endpoints are not
/// resolved): check it before building.
pub fn socket_address(ip: impl Into<String>, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: ip.into(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port.into())),
            ..Default::default()
        })),
    }
}

pub(crate) fn u32_value(value: u32) -> protobuf::UInt32Value {
    protobuf::UInt32Value { value }
}

/// One header to add: `overwrite` replaces any value it has (`OVERWRITE_IF_EXISTS_OR_ADD`),
/// otherwise another value is appended (`APPEND_IF_EXISTS_OR_ADD`).
pub(crate) fn header_value(name: String, value: String, overwrite: bool) -> HeaderValueOption {
    let action =
        if overwrite { HeaderAppendAction::OverwriteIfExistsOrAdd } else { HeaderAppendAction::AppendIfExistsOrAdd };
    HeaderValueOption {
        header: Some(HeaderValue { key: name, value, ..Default::default() }),
        append_action: action as i32,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;

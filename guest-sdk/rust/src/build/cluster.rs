//! EDS clusters, their health checks and circuit breakers.

use std::time::Duration;

use super::{duration, u32_value};
use crate::envoy::envoy::config::cluster::v3::{
    self as cluster, Cluster,
    circuit_breakers::Thresholds,
    cluster::ClusterDiscoveryType,
    cluster::DiscoveryType,
    cluster::EdsClusterConfig,
    cluster::common_lb_config::{LocalityConfigSpecifier, LocalityWeightedLbConfig},
};
use crate::envoy::envoy::config::core::v3::{self as core, Http2ProtocolOptions, RoutingPriority, health_check};
use crate::envoy::envoy::r#type::v3::CodecClientType;

/// How a cluster picks an endpoint (`ROUND_ROBIN`, `LEAST_REQUEST`, `RANDOM`, `RING_HASH`,
/// `MAGLEV`, ...). Proxyless gRPC clients support round robin, ring hash and least request.
pub use crate::envoy::envoy::config::cluster::v3::cluster::LbPolicy;

/// A cluster whose endpoints come by EDS over ADS: `type: EDS`,
/// `eds_cluster_config.eds_config = {ads: {}, resource_api_version: V3}`. Its
/// ClusterLoadAssignment must carry the same name (or [`service_name`](Self::service_name)).
///
/// [`http2`](Self::http2) sets the Cluster's `http2_protocol_options`: the `xds-api` crate
/// has no `envoy.extensions.upstreams.http.v3.HttpProtocolOptions` to put in
/// `typed_extension_protocol_options`. Envoy accepts the older field and logs that it is
/// deprecated; proxyless gRPC clients always speak HTTP/2 and ignore it.
#[derive(Debug, Clone)]
pub struct EdsCluster(Cluster);

impl EdsCluster {
    pub fn new(name: impl Into<String>) -> Self {
        EdsCluster(Cluster {
            name: name.into(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            eds_cluster_config: Some(EdsClusterConfig { eds_config: Some(super::ads()), service_name: String::new() }),
            ..Default::default()
        })
    }

    /// The ClusterLoadAssignment to fetch when it is not named like the cluster.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        if let Some(eds) = self.0.eds_cluster_config.as_mut() {
            eds.service_name = name.into();
        }
        self
    }

    /// How long a TCP connection to an endpoint may take (Envoy's default is 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.0.connect_timeout = Some(duration(timeout));
        self
    }

    /// The load balancing policy (default round robin).
    pub fn lb_policy(mut self, policy: LbPolicy) -> Self {
        self.0.lb_policy = policy as i32;
        self
    }

    /// Adds an active health check.
    pub fn health_check(mut self, check: HealthCheck) -> Self {
        self.0.health_checks.push(check.build());
        self
    }

    pub fn circuit_breakers(mut self, breakers: CircuitBreakers) -> Self {
        self.0.circuit_breakers = Some(breakers.build());
        self
    }

    /// Splits traffic between the localities of a priority by their weights
    /// (`common_lb_config.locality_weighted_lb_config`): without it Envoy ignores locality
    /// weights, while proxyless gRPC clients always apply them.
    pub fn locality_weighted(mut self) -> Self {
        let common = self.0.common_lb_config.get_or_insert_with(Default::default);
        common.locality_config_specifier =
            Some(LocalityConfigSpecifier::LocalityWeightedLbConfig(LocalityWeightedLbConfig {}));
        self
    }

    /// Speaks HTTP/2 (prior knowledge, cleartext unless a transport socket is added) to the
    /// endpoints: what gRPC backends behind Envoy need.
    pub fn http2(mut self) -> Self {
        #[allow(deprecated, reason = "the field Envoy and gRPC still read for HTTP/2 upstreams")]
        {
            self.0.http2_protocol_options = Some(Http2ProtocolOptions::default());
        }
        self
    }

    pub fn build(self) -> Cluster {
        self.0
    }
}

/// An active health check: HTTP `GET path` (healthy on 2xx) or the gRPC health checking
/// protocol. Defaults: every 10 s, 1 s timeout, healthy after 1 success, unhealthy after 3
/// failures.
#[derive(Debug, Clone)]
pub struct HealthCheck(core::HealthCheck);

impl HealthCheck {
    fn with(checker: health_check::HealthChecker) -> Self {
        HealthCheck(core::HealthCheck {
            timeout: Some(duration(Duration::from_secs(1))),
            interval: Some(duration(Duration::from_secs(10))),
            healthy_threshold: Some(u32_value(1)),
            unhealthy_threshold: Some(u32_value(3)),
            health_checker: Some(checker),
            ..Default::default()
        })
    }

    /// `GET path` over HTTP/1.1 (see [`http2`](Self::http2)).
    pub fn http(path: impl Into<String>) -> Self {
        Self::with(health_check::HealthChecker::HttpHealthCheck(health_check::HttpHealthCheck {
            path: path.into(),
            ..Default::default()
        }))
    }

    /// The gRPC health checking protocol (`grpc.health.v1.Health/Check`) for `service`
    /// (`""`: the server as a whole). Needs an HTTP/2 cluster.
    pub fn grpc(service: impl Into<String>) -> Self {
        Self::with(health_check::HealthChecker::GrpcHealthCheck(health_check::GrpcHealthCheck {
            service_name: service.into(),
            ..Default::default()
        }))
    }

    /// For an HTTP check: send it over HTTP/2 (for endpoints that speak only HTTP/2).
    pub fn http2(mut self) -> Self {
        if let Some(health_check::HealthChecker::HttpHealthCheck(http)) = self.0.health_checker.as_mut() {
            http.codec_client_type = CodecClientType::Http2 as i32;
        }
        self
    }

    /// For an HTTP check: the `Host` header to send (default: the cluster's name).
    pub fn host(mut self, host: impl Into<String>) -> Self {
        if let Some(health_check::HealthChecker::HttpHealthCheck(http)) = self.0.health_checker.as_mut() {
            http.host = host.into();
        }
        self
    }

    pub fn interval(mut self, interval: Duration) -> Self {
        self.0.interval = Some(duration(interval));
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.0.timeout = Some(duration(timeout));
        self
    }

    /// Consecutive successes before an unhealthy endpoint is healthy again.
    pub fn healthy_threshold(mut self, n: u32) -> Self {
        self.0.healthy_threshold = Some(u32_value(n));
        self
    }

    /// Consecutive failures before an endpoint is unhealthy.
    pub fn unhealthy_threshold(mut self, n: u32) -> Self {
        self.0.unhealthy_threshold = Some(u32_value(n));
        self
    }

    pub fn build(self) -> core::HealthCheck {
        self.0
    }
}

/// Circuit breaker limits for the default priority; unset limits keep Envoy's defaults
/// (1024 each, 3 retries).
#[derive(Debug, Clone, Default)]
pub struct CircuitBreakers(Thresholds);

impl CircuitBreakers {
    pub fn new() -> Self {
        CircuitBreakers(Thresholds { priority: RoutingPriority::Default as i32, ..Default::default() })
    }

    pub fn max_connections(mut self, n: u32) -> Self {
        self.0.max_connections = Some(u32_value(n));
        self
    }

    pub fn max_pending_requests(mut self, n: u32) -> Self {
        self.0.max_pending_requests = Some(u32_value(n));
        self
    }

    pub fn max_requests(mut self, n: u32) -> Self {
        self.0.max_requests = Some(u32_value(n));
        self
    }

    pub fn max_retries(mut self, n: u32) -> Self {
        self.0.max_retries = Some(u32_value(n));
        self
    }

    pub fn build(self) -> cluster::CircuitBreakers {
        cluster::CircuitBreakers { thresholds: vec![self.0], ..Default::default() }
    }
}

//! Cluster load assignments: endpoints grouped by locality.

use super::{socket_address, u32_value};
use crate::envoy::envoy::config::core::v3 as core;
use crate::envoy::envoy::config::endpoint::v3::{
    self as endpoint, ClusterLoadAssignment, LbEndpoint, LocalityLbEndpoints, lb_endpoint::HostIdentifier,
};

/// A `ClusterLoadAssignment`: the endpoints of the cluster named `cluster_name`, by locality.
/// Endpoints added with [`endpoint`](Self::endpoint) go to one unnamed locality (listed first).
#[derive(Debug, Clone)]
pub struct LoadAssignment {
    cla: ClusterLoadAssignment,
    unnamed: Option<Locality>,
}

impl LoadAssignment {
    pub fn new(cluster_name: impl Into<String>) -> Self {
        LoadAssignment {
            cla: ClusterLoadAssignment { cluster_name: cluster_name.into(), ..Default::default() },
            unnamed: None,
        }
    }

    /// Adds an endpoint to the unnamed locality (weight 1, priority 0).
    pub fn endpoint(mut self, endpoint: Endpoint) -> Self {
        let unnamed = self.unnamed.take().unwrap_or_default();
        self.unnamed = Some(unnamed.endpoint(endpoint));
        self
    }

    pub fn locality(mut self, locality: Locality) -> Self {
        self.cla.endpoints.push(locality.build());
        self
    }

    pub fn build(mut self) -> ClusterLoadAssignment {
        if let Some(unnamed) = self.unnamed {
            self.cla.endpoints.insert(0, unnamed.build());
        }
        self.cla
    }
}

/// Endpoints in one locality (region, zone, sub-zone), with the locality's weight (default 1:
/// proxyless gRPC clients ignore localities without one) and priority (0 is the highest; use
/// 0, 1, 2, ... without gaps).
#[derive(Debug, Clone)]
pub struct Locality(LocalityLbEndpoints);

impl Default for Locality {
    /// A locality with no region, zone or sub-zone. The (empty) `locality` field is still
    /// set: proxyless gRPC clients refuse a locality group without one.
    fn default() -> Self {
        Locality(LocalityLbEndpoints {
            load_balancing_weight: Some(u32_value(1)),
            locality: Some(core::Locality::default()),
            ..Default::default()
        })
    }
}

impl Locality {
    /// Empty strings leave a level unset.
    pub fn new(region: impl Into<String>, zone: impl Into<String>, sub_zone: impl Into<String>) -> Self {
        let mut locality = Self::default();
        locality.0.locality =
            Some(core::Locality { region: region.into(), zone: zone.into(), sub_zone: sub_zone.into() });
        locality
    }

    /// The locality's share of traffic relative to others at its priority (at least 1).
    pub fn weight(mut self, weight: u32) -> Self {
        self.0.load_balancing_weight = Some(u32_value(weight));
        self
    }

    pub fn priority(mut self, priority: u32) -> Self {
        self.0.priority = priority;
        self
    }

    pub fn endpoint(mut self, endpoint: Endpoint) -> Self {
        self.0.lb_endpoints.push(endpoint.build());
        self
    }

    /// Adds endpoints in iteration order.
    pub fn endpoints(mut self, endpoints: impl IntoIterator<Item = Endpoint>) -> Self {
        self.0.lb_endpoints.extend(endpoints.into_iter().map(Endpoint::build));
        self
    }

    pub fn build(self) -> LocalityLbEndpoints {
        self.0
    }
}

/// One endpoint: an IP address (EDS endpoints are not resolved) and port, optionally weighted.
#[derive(Debug, Clone)]
pub struct Endpoint(LbEndpoint);

impl Endpoint {
    pub fn new(ip: impl Into<String>, port: u16) -> Self {
        Endpoint(LbEndpoint {
            host_identifier: Some(HostIdentifier::Endpoint(endpoint::Endpoint {
                address: Some(socket_address(ip, port)),
                ..Default::default()
            })),
            ..Default::default()
        })
    }

    /// The endpoint's share of its locality's traffic (at least 1; unset means 1).
    pub fn weight(mut self, weight: u32) -> Self {
        self.0.load_balancing_weight = Some(u32_value(weight));
        self
    }

    /// A hostname shown in Envoy's admin output and used as `Host` by health checks.
    pub fn hostname(mut self, hostname: impl Into<String>) -> Self {
        if let Some(HostIdentifier::Endpoint(e)) = self.0.host_identifier.as_mut() {
            e.hostname = hostname.into();
        }
        self
    }

    pub fn build(self) -> LbEndpoint {
        self.0
    }
}

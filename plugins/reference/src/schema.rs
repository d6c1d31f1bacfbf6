//! The intent schema: what `spec` holds for each kind (README.md documents it for users).
//! Field names are camelCase; unknown fields are errors. Checks serde cannot express
//! (ranges, exclusive choices, references) are in the translating modules.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use crate::duration::Dur;

/// A TCP port, 1 to 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port(pub u16);

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Port;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a port number from 1 to 65535")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Port, E> {
                match u16::try_from(n) {
                    Ok(p) if p > 0 => Ok(Port(p)),
                    _ => Err(E::invalid_value(de::Unexpected::Unsigned(n), &self)),
                }
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Port, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Signed(n), &self)),
                }
            }
        }
        deserializer.deserialize_u64(V)
    }
}

/// `kind: Service`: an upstream service and its endpoints.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(default)]
    pub protocol: Protocol,
    #[serde(default)]
    pub load_balancing: LoadBalancing,
    pub connect_timeout: Option<Dur>,
    /// Endpoints without a locality.
    #[serde(default)]
    pub endpoints: Vec<EndpointSpec>,
    #[serde(default)]
    pub localities: Vec<LocalitySpec>,
    pub health_check: Option<HealthCheckSpec>,
    pub circuit_breakers: Option<CircuitBreakersSpec>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Protocol {
    #[default]
    Http1,
    Http2,
    Grpc,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LoadBalancing {
    #[default]
    RoundRobin,
    LeastRequest,
    Random,
    RingHash,
    Maglev,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointSpec {
    pub address: String,
    pub port: Port,
    pub weight: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LocalitySpec {
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub zone: String,
    #[serde(default)]
    pub sub_zone: String,
    pub weight: Option<u32>,
    #[serde(default)]
    pub priority: u32,
    #[serde(default)]
    pub endpoints: Vec<EndpointSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HealthCheckSpec {
    /// HTTP check: `GET path`.
    pub path: Option<String>,
    /// HTTP check: the `Host` header.
    pub host: Option<String>,
    /// gRPC health checking protocol instead of HTTP.
    pub grpc: Option<GrpcHealthCheckSpec>,
    pub interval: Option<Dur>,
    pub timeout: Option<Dur>,
    pub healthy_threshold: Option<u32>,
    pub unhealthy_threshold: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GrpcHealthCheckSpec {
    #[serde(default)]
    pub service_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CircuitBreakersSpec {
    pub max_connections: Option<u32>,
    pub max_pending_requests: Option<u32>,
    pub max_requests: Option<u32>,
    pub max_retries: Option<u32>,
}

/// `kind: HttpGateway`: an Envoy listener and its routes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GatewaySpec {
    pub address: Option<String>,
    pub port: Port,
    pub hosts: Vec<HostSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostSpec {
    pub name: Option<String>,
    pub hostnames: Option<Vec<String>>,
    pub routes: Vec<HttpRouteSpec>,
    pub request_headers: Option<HeadersSpec>,
    pub response_headers: Option<HeadersSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HttpRouteSpec {
    pub name: Option<String>,
    #[serde(rename = "match")]
    pub matches: Option<MatchSpec>,
    pub backends: Option<Vec<BackendSpec>>,
    pub direct_response: Option<DirectResponseSpec>,
    pub timeout: Option<Dur>,
    pub idle_timeout: Option<Dur>,
    pub retries: Option<RetriesSpec>,
    pub request_headers: Option<HeadersSpec>,
    pub response_headers: Option<HeadersSpec>,
    pub rewrite: Option<RewriteSpec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MatchSpec {
    pub path_prefix: Option<String>,
    pub path: Option<String>,
    pub regex: Option<String>,
    #[serde(default)]
    pub headers: Vec<HeaderMatchSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HeaderMatchSpec {
    pub name: String,
    pub exact: Option<String>,
    pub prefix: Option<String>,
    pub regex: Option<String>,
    pub present: Option<bool>,
    #[serde(default)]
    pub invert: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BackendSpec {
    pub service: String,
    pub weight: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DirectResponseSpec {
    pub status: u16,
    pub body: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetriesSpec {
    pub attempts: Option<u32>,
    pub on: Option<String>,
    pub per_try_timeout: Option<Dur>,
    #[serde(default)]
    pub status_codes: Vec<u16>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HeadersSpec {
    /// Replace the header's value (or add it).
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Add a value, keeping any the header has.
    #[serde(default)]
    pub add: BTreeMap<String, String>,
    #[serde(default)]
    pub remove: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RewriteSpec {
    pub path_prefix: String,
}

/// `kind: GrpcService`: what proxyless gRPC clients dialing `xds:///<name>` get.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GrpcServiceSpec {
    #[serde(default)]
    pub backends: Vec<BackendSpec>,
    pub routes: Option<Vec<GrpcRouteSpec>>,
    pub timeout: Option<Dur>,
    pub retries: Option<GrpcRetriesSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GrpcRouteSpec {
    pub name: Option<String>,
    #[serde(rename = "match")]
    pub matches: Option<MatchSpec>,
    pub backends: Option<Vec<BackendSpec>>,
    pub timeout: Option<Dur>,
    pub retries: Option<GrpcRetriesSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GrpcRetriesSpec {
    pub attempts: Option<u32>,
    pub on: Option<String>,
    pub backoff: Option<BackoffSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BackoffSpec {
    pub base: Dur,
    pub max: Option<Dur>,
}

/// The operator's configuration for this plugin: none yet, so `null` or `{}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {}

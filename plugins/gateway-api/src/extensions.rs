//! Envoy extension messages the `xds-api` crate does not carry (TLS contexts, the TLS
//! inspector, CORS, the TCP and UDP proxies), declared with the fields this
//! plugin sets (field numbers as in Envoy's protos). The host decodes them with Envoy's full
//! descriptors, so a wrong number would show as a refused resource in the tests.

use prost::{Message, Name};
use xdst_guest::envoy::envoy::extensions::transport_sockets::tls::v3::SdsSecretConfig;
use xdst_guest::envoy::envoy::r#type::matcher::v3::StringMatcher;
use xdst_guest::envoy::google::protobuf::BoolValue;

macro_rules! named {
    ($t:ident, $package:literal) => {
        impl Name for $t {
            const NAME: &'static str = stringify!($t);
            const PACKAGE: &'static str = $package;
        }
    };
}

/// `envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext`.
#[derive(Clone, PartialEq, Message)]
pub struct DownstreamTlsContext {
    #[prost(message, optional, tag = "1")]
    pub common_tls_context: Option<CommonTlsContext>,
    /// Whether a client must present a certificate.
    #[prost(message, optional, tag = "2")]
    pub require_client_certificate: Option<BoolValue>,
}
named!(DownstreamTlsContext, "envoy.extensions.transport_sockets.tls.v3");

/// `envoy.extensions.transport_sockets.tls.v3.CommonTlsContext`.
#[derive(Clone, PartialEq, Message)]
pub struct CommonTlsContext {
    /// How a peer's certificate is checked (`validation_context` of its oneof).
    #[prost(message, optional, tag = "3")]
    pub validation_context: Option<CertificateValidationContext>,
    #[prost(string, repeated, tag = "4")]
    pub alpn_protocols: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    pub tls_certificate_sds_secret_configs: Vec<SdsSecretConfig>,
}
named!(CommonTlsContext, "envoy.extensions.transport_sockets.tls.v3");

/// `envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext`: the CAs a peer's
/// certificate must chain to; `trust_chain_verification` 1 (`ACCEPT_UNTRUSTED`) lets a
/// certificate that does not through.
#[derive(Clone, PartialEq, Message)]
pub struct CertificateValidationContext {
    #[prost(message, optional, tag = "1")]
    pub trusted_ca: Option<xdst_guest::envoy::envoy::config::core::v3::DataSource>,
    #[prost(int32, tag = "10")]
    pub trust_chain_verification: i32,
    #[prost(message, repeated, tag = "15")]
    pub match_typed_subject_alt_names: Vec<SubjectAltNameMatcher>,
}

/// `envoy.extensions.transport_sockets.tls.v3.SubjectAltNameMatcher`: `san_type` 2 is DNS,
/// 3 is URI.
#[derive(Clone, PartialEq, Message)]
pub struct SubjectAltNameMatcher {
    #[prost(int32, tag = "1")]
    pub san_type: i32,
    #[prost(message, optional, tag = "2")]
    pub matcher: Option<StringMatcher>,
}

/// `envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`: TLS to a cluster's
/// endpoints, asking for `sni`.
#[derive(Clone, PartialEq, Message)]
pub struct UpstreamTlsContext {
    #[prost(message, optional, tag = "1")]
    pub common_tls_context: Option<CommonTlsContext>,
    #[prost(string, tag = "2")]
    pub sni: String,
}
named!(UpstreamTlsContext, "envoy.extensions.transport_sockets.tls.v3");
named!(CertificateValidationContext, "envoy.extensions.transport_sockets.tls.v3");

/// `envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector`: reads the SNI that
/// picks a filter chain.
#[derive(Clone, PartialEq, Message)]
pub struct TlsInspector {}
named!(TlsInspector, "envoy.extensions.filters.listener.tls_inspector.v3");
/// `envoy.extensions.filters.http.cors.v3.Cors`: the filter, configured per route.
#[derive(Clone, PartialEq, Message)]
pub struct Cors {}
named!(Cors, "envoy.extensions.filters.http.cors.v3");

/// `envoy.extensions.filters.http.cors.v3.CorsPolicy`, a route's CORS settings.
#[derive(Clone, PartialEq, Message)]
pub struct CorsPolicy {
    #[prost(message, repeated, tag = "1")]
    pub allow_origin_string_match: Vec<StringMatcher>,
    #[prost(string, tag = "2")]
    pub allow_methods: String,
    #[prost(string, tag = "3")]
    pub allow_headers: String,
    #[prost(string, tag = "4")]
    pub expose_headers: String,
    #[prost(string, tag = "5")]
    pub max_age: String,
    #[prost(message, optional, tag = "6")]
    pub allow_credentials: Option<BoolValue>,
    #[prost(message, optional, tag = "10")]
    pub forward_not_matching_preflights: Option<BoolValue>,
}
named!(CorsPolicy, "envoy.extensions.filters.http.cors.v3");

/// `envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy`: a connection proxied to one
/// cluster (`cluster`) or split by weight (`weighted_clusters`); set one of the two.
#[derive(Clone, PartialEq, Message)]
pub struct TcpProxy {
    #[prost(string, tag = "1")]
    pub stat_prefix: String,
    #[prost(string, optional, tag = "2")]
    pub cluster: Option<String>,
    #[prost(message, optional, tag = "10")]
    pub weighted_clusters: Option<TcpWeightedClusters>,
}
named!(TcpProxy, "envoy.extensions.filters.network.tcp_proxy.v3");

/// `TcpProxy.WeightedCluster`.
#[derive(Clone, PartialEq, Message)]
pub struct TcpWeightedClusters {
    #[prost(message, repeated, tag = "1")]
    pub clusters: Vec<TcpClusterWeight>,
}

/// `TcpProxy.WeightedCluster.ClusterWeight`: a weight of at least 1.
#[derive(Clone, PartialEq, Message)]
pub struct TcpClusterWeight {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(uint32, tag = "2")]
    pub weight: u32,
}

/// `envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig`: datagrams of a UDP listener
/// proxied to the cluster its `matcher` picks.
#[derive(Clone, PartialEq, Message)]
pub struct UdpProxyConfig {
    #[prost(string, tag = "1")]
    pub stat_prefix: String,
    #[prost(message, optional, tag = "9")]
    pub matcher: Option<Matcher>,
}
named!(UdpProxyConfig, "envoy.extensions.filters.udp.udp_proxy.v3");

/// `envoy.extensions.filters.udp.udp_proxy.v3.Route`: the action of a UDP proxy's matcher.
#[derive(Clone, PartialEq, Message)]
pub struct UdpRoute {
    #[prost(string, tag = "1")]
    pub cluster: String,
}
impl Name for UdpRoute {
    const NAME: &'static str = "Route";
    const PACKAGE: &'static str = "envoy.extensions.filters.udp.udp_proxy.v3";
}

/// `xds.type.matcher.v3.Matcher` with only `on_no_match`: one action for everything.
#[derive(Clone, PartialEq, Message)]
pub struct Matcher {
    #[prost(message, optional, tag = "3")]
    pub on_no_match: Option<OnMatch>,
}

/// `xds.type.matcher.v3.Matcher.OnMatch` with an `action`.
#[derive(Clone, PartialEq, Message)]
pub struct OnMatch {
    #[prost(message, optional, tag = "2")]
    pub action: Option<TypedExtensionConfig>,
}

/// `xds.core.v3.TypedExtensionConfig`.
#[derive(Clone, PartialEq, Message)]
pub struct TypedExtensionConfig {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub typed_config: Option<xdst_guest::envoy::google::protobuf::Any>,
}

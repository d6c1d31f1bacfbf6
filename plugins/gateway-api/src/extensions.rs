//! Envoy extension messages the `xds-api` crate does not carry (TLS contexts, the TLS
//! inspector, CORS), declared with the fields this
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
}
named!(DownstreamTlsContext, "envoy.extensions.transport_sockets.tls.v3");

/// `envoy.extensions.transport_sockets.tls.v3.CommonTlsContext`.
#[derive(Clone, PartialEq, Message)]
pub struct CommonTlsContext {
    #[prost(string, repeated, tag = "4")]
    pub alpn_protocols: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    pub tls_certificate_sds_secret_configs: Vec<SdsSecretConfig>,
}
named!(CommonTlsContext, "envoy.extensions.transport_sockets.tls.v3");

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

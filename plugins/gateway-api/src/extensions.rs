//! Envoy extension messages the `xds-api` crate does not carry, declared with the fields this
//! plugin sets (field numbers as in Envoy's protos). The host decodes them with Envoy's full
//! descriptors, so a wrong number would show as a refused resource in the tests.

use prost::{Message, Name};
use xdst_guest::envoy::envoy::extensions::transport_sockets::tls::v3::SdsSecretConfig;

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

//! Routing scopes by host (scoped RDS): an HTTP listener whose requests each find the
//! RouteConfiguration of their host, so that a change to one host's routes re-sends and
//! re-applies that host's configuration alone.
//!
//! Envoy gives every scoped listener every scope it is sent (scoped RDS is fetched without
//! names), so a scope's key has two parts: the request's host (its `:authority` up to the first
//! `:`) and the name of the listener's scope set, which the listener writes into
//! [`SCOPE_HEADER`] before routing, over whatever the client sent. Two listeners with the same
//! hosts then keep to their own scopes, and no client can reach another listener's routes by
//! sending the header itself. Scope keys match exactly: a request whose host has no scope (or a
//! host in other letter case) gets 404.

use crate::envoy::envoy::config::common::mutation_rules::v3::{HeaderMutation, header_mutation};
use crate::envoy::envoy::config::core::v3::{HeaderValue, HeaderValueOption, TypedExtensionConfig, header_value_option};
use crate::envoy::envoy::config::route::v3::ScopedRouteConfiguration;
use crate::envoy::envoy::config::route::v3::scoped_route_configuration::{Key, key};
use crate::envoy::envoy::extensions::filters::network::http_connection_manager::v3::scoped_routes::scope_key_builder::FragmentBuilder;
use crate::envoy::envoy::extensions::filters::network::http_connection_manager::v3::scoped_routes::scope_key_builder::fragment_builder::{
    HeaderValueExtractor, Type as Fragment, header_value_extractor::ExtractType,
};
use crate::envoy::envoy::extensions::filters::network::http_connection_manager::v3::scoped_routes::{
    ConfigSpecifier, ScopeKeyBuilder,
};
use crate::envoy::envoy::extensions::filters::network::http_connection_manager::v3::{ScopedRds, ScopedRoutes};
use crate::envoy::google::protobuf::Any;
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint};

/// The request header a scoped listener sets to its scope set's name before routing (the
/// second part of every scope key). Route configurations for scopes remove it, so backends
/// never see it.
pub const SCOPE_HEADER: &str = "x-xdst-route-scope";

const EARLY_HEADER_MUTATION: &str =
    "type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation";

/// The early header mutation that writes `set` into [`SCOPE_HEADER`], replacing any value the
/// client sent.
pub(super) fn mark(set: &str) -> TypedExtensionConfig {
    let mutation = HeaderMutation {
        action: Some(header_mutation::Action::Append(HeaderValueOption {
            header: Some(HeaderValue { key: SCOPE_HEADER.to_owned(), value: set.to_owned(), ..Default::default() }),
            append_action: header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
            ..Default::default()
        })),
    };
    // The extension's message is `repeated HeaderMutation mutations = 1`.
    let mut value = Vec::new();
    encode_key(1, WireType::LengthDelimited, &mut value);
    encode_varint(mutation.encoded_len() as u64, &mut value);
    mutation.encode_raw(&mut value);
    TypedExtensionConfig {
        name: "envoy.http.early_header_mutation.header_mutation".to_owned(),
        typed_config: Some(Any { type_url: EARLY_HEADER_MUTATION.to_owned(), value }),
    }
}

fn extract(header: &str, separator: &str) -> FragmentBuilder {
    FragmentBuilder {
        r#type: Some(Fragment::HeaderValueExtractor(HeaderValueExtractor {
            name: header.to_owned(),
            element_separator: separator.to_owned(),
            extract_type: Some(ExtractType::Index(0)),
        })),
    }
}

/// The HttpConnectionManager's routing by scope set `set`: key (host, set), scopes and their
/// route configurations over ADS.
pub(super) fn by_host(set: String) -> ScopedRoutes {
    ScopedRoutes {
        name: set,
        scope_key_builder: Some(ScopeKeyBuilder {
            fragments: vec![extract(":authority", ":"), extract(SCOPE_HEADER, "")],
        }),
        rds_config_source: Some(super::ads()),
        config_specifier: Some(ConfigSpecifier::ScopedRds(ScopedRds {
            scoped_rds_config_source: Some(super::ads()),
            ..Default::default()
        })),
    }
}

/// One routing scope: requests for `host` on the listeners of scope set `set` use the
/// RouteConfiguration `route_configuration`.
#[derive(Debug, Clone)]
pub struct RoutingScope {
    pub name: String,
    pub set: String,
    pub host: String,
    pub route_configuration: String,
}

impl RoutingScope {
    pub fn build(self) -> ScopedRouteConfiguration {
        let fragment = |s: String| key::Fragment { r#type: Some(key::fragment::Type::StringKey(s)) };
        ScopedRouteConfiguration {
            name: self.name,
            route_configuration_name: self.route_configuration,
            key: Some(Key { fragments: vec![fragment(self.host), fragment(self.set)] }),
            ..Default::default()
        }
    }
}

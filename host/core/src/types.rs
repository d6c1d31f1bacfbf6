//! Type URLs of the resources xdst serves, and what the protocol says about each.

/// `type.googleapis.com/envoy.config.listener.v3.Listener`
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// `type.googleapis.com/envoy.config.route.v3.RouteConfiguration`
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// `type.googleapis.com/envoy.config.cluster.v3.Cluster`
pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// `type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment`
pub const ENDPOINT: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// `type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret`
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
/// `type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration`
pub const SCOPED_ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration";
/// `type.googleapis.com/envoy.service.runtime.v3.Runtime`
pub const RUNTIME: &str = "type.googleapis.com/envoy.service.runtime.v3.Runtime";

/// `type.googleapis.com/envoy.config.route.v3.VirtualHost`
pub const VIRTUAL_HOST: &str = "type.googleapis.com/envoy.config.route.v3.VirtualHost";
/// `type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig`
pub const EXTENSION_CONFIG: &str = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig";

const PREFIX: &str = "type.googleapis.com/";

/// The four core types, in make-before-break order (ORDER-2).
pub const CORE_TYPES: [&str; 4] = [CLUSTER, ENDPOINT, LISTENER, ROUTE];

/// The order in which a stream that serves several types writes their responses when more
/// than one is due (ORDER-2): what others name goes first. A client on one stream (ADS)
/// applies responses in the order it reads them, so a route configuration written before the
/// listener that names it is in place when that listener becomes active.
pub fn send_rank(type_url: &str) -> u8 {
    match type_url {
        SECRET => 0,
        CLUSTER => 1,
        ENDPOINT => 2,
        ROUTE => 3,
        VIRTUAL_HOST => 4,
        SCOPED_ROUTE => 5,
        LISTENER => 6,
        _ => 7,
    }
}

/// The types of `keys` in [`send_rank`] order.
pub fn in_send_order<'a, V>(
    keys: impl Iterator<Item = (&'a std::sync::Arc<str>, V)>,
) -> Vec<(&'a std::sync::Arc<str>, V)> {
    let mut v: Vec<_> = keys.collect();
    v.sort_by_key(|(t, _)| send_rank(t));
    v
}

/// SOTW-8: responses for these types carry the full state; a resource missing from a
/// response is deleted by the client. They are also the types for which a stream that
/// never names a resource is a legacy wildcard subscription (SOTW-7, DELTA-2). Scoped route
/// configurations are one too: Envoy asks for them without names and drops a scope that a
/// response leaves out.
pub fn is_full_state(type_url: &str) -> bool {
    type_url == LISTENER || type_url == CLUSTER || type_url == SCOPED_ROUTE
}

/// The protobuf message name inside a type URL (`envoy.config.cluster.v3.Cluster`).
pub fn message_name(type_url: &str) -> Option<&str> {
    let name = type_url.strip_prefix(PREFIX).or_else(|| type_url.rsplit_once('/').map(|(_, n)| n))?;
    (!name.is_empty() && !name.contains('/')).then_some(name)
}

/// A short label for logs and metrics: `lds`, `rds`, `cds`, `eds`, or the message name.
pub fn short_name(type_url: &str) -> &str {
    known_short_name(type_url).unwrap_or_else(|| message_name(type_url).unwrap_or(type_url))
}

/// The short label of a well-known type, without borrowing the type URL.
pub fn known_short_name(type_url: &str) -> Option<&'static str> {
    Some(match type_url {
        LISTENER => "lds",
        ROUTE => "rds",
        CLUSTER => "cds",
        ENDPOINT => "eds",
        SECRET => "sds",
        RUNTIME => "rtds",
        SCOPED_ROUTE => "srds",
        VIRTUAL_HOST => "vhds",
        EXTENSION_CONFIG => "ecds",
        _ => return None,
    })
}

/// `type_url` as an `Arc<str>`: for a well-known type, one shared by every stream (a stream
/// keeps its types' URLs for its whole life: 50-70 bytes each, per stream, if each had its own).
pub fn shared(type_url: &str) -> std::sync::Arc<str> {
    use std::sync::{Arc, LazyLock};
    static KNOWN: LazyLock<Vec<Arc<str>>> = LazyLock::new(|| {
        [LISTENER, ROUTE, CLUSTER, ENDPOINT, SECRET, SCOPED_ROUTE, RUNTIME, VIRTUAL_HOST, EXTENSION_CONFIG]
            .into_iter()
            .map(Arc::from)
            .collect()
    });
    match KNOWN.iter().find(|k| ***k == *type_url) {
        Some(k) => k.clone(),
        None => type_url.into(),
    }
}

/// The type URL for one of the short labels, for REST paths and CLI flags.
pub fn from_short_name(short: &str) -> Option<&'static str> {
    Some(match short {
        "lds" | "listeners" => LISTENER,
        "rds" | "routes" => ROUTE,
        "cds" | "clusters" => CLUSTER,
        "eds" | "endpoints" => ENDPOINT,
        "sds" | "secrets" => SECRET,
        "rtds" | "runtime" => RUNTIME,
        "srds" | "scoped-routes" => SCOPED_ROUTE,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names() {
        assert_eq!(message_name(CLUSTER), Some("envoy.config.cluster.v3.Cluster"));
        assert_eq!(message_name("example.com/foo.Bar"), Some("foo.Bar"));
        assert_eq!(message_name("garbage"), None);
        assert_eq!(message_name("type.googleapis.com/"), None);
    }

    /// A well-known type's URL is one allocation for every stream; any other is the client's own.
    #[test]
    fn well_known_type_urls_are_shared() {
        for t in CORE_TYPES.into_iter().chain([SECRET, SCOPED_ROUTE, RUNTIME]) {
            let copy = String::from(t);
            assert!(std::sync::Arc::ptr_eq(&shared(t), &shared(&copy)), "{t}");
        }
        let other = "type.googleapis.com/example.Unknown";
        assert_eq!(&*shared(other), other);
        assert!(!std::sync::Arc::ptr_eq(&shared(other), &shared(other)));
    }

    #[test]
    fn full_state_types_are_lds_cds_and_srds() {
        assert!(is_full_state(LISTENER) && is_full_state(CLUSTER) && is_full_state(SCOPED_ROUTE));
        assert!(!is_full_state(ROUTE) && !is_full_state(ENDPOINT) && !is_full_state(SECRET));
    }
}

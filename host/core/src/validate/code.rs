//! What Envoy checks in its code rather than in its protos' annotations, with the meaning
//! Envoy gives each check (the wording is ours):
//!
//! - every regular expression (`envoy.type.matcher.v3.RegexMatcher`) must compile with RE2,
//!   and its program must be no larger than Envoy's default limit, [`MAX_PROGRAM_SIZE`]
//!   (Envoy's runtime key `re2.max_program_size.error_level`; an Envoy configured with a
//!   larger limit would accept more, and xdst still enforces the default);
//! - header mutations (`request_headers_to_add`, `..._to_remove`, and the response ones) of
//!   a route configuration, virtual host, route or weighted cluster may not name a
//!   `:`-prefixed header or `host`;
//! - the weights of a weighted cluster must add up to no more than `u32::MAX`;
//! - a duration must convert to nanoseconds in an `i64` (at most 9,223,372,036 seconds);
//! - the endpoints of a ClusterLoadAssignment (EDS) and of a `STATIC` cluster, and the
//!   address of a listener, must be IP addresses (unless a custom resolver is named).

use prost_reflect::{DynamicMessage, ReflectMessage, Value};

/// Envoy's default largest RE2 program a regular expression may compile to.
pub const MAX_PROGRAM_SIZE: u32 = 100;

/// The longest duration Envoy converts to milliseconds: `i64::MAX` nanoseconds.
const MAX_DURATION_SECONDS: i64 = i64::MAX / 1_000_000_000;

type Refusal = (String, String);

fn at(path: &str, field: &str) -> String {
    if path.is_empty() { field.to_owned() } else { format!("{path}.{field}") }
}

fn string(msg: &DynamicMessage, field: &str) -> String {
    msg.get_field_by_name(field).and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

use super::sub;

/// The items of a repeated field, borrowed (none when it is unset).
fn list<'a>(msg: &'a DynamicMessage, field: &str) -> &'a [Value] {
    match msg.get_field_by_name(field) {
        Some(std::borrow::Cow::Borrowed(Value::List(items))) => items,
        _ => &[],
    }
}

/// The checks of one message of the walk, by its type.
pub(super) fn check_message(msg: &DynamicMessage, full_name: &str, path: &str) -> Result<(), Refusal> {
    match full_name {
        "google.protobuf.Duration" => duration(msg, path),
        "envoy.type.matcher.v3.RegexMatcher" => regex(msg, path),
        "envoy.config.route.v3.WeightedCluster" => weights(msg, path),
        "envoy.config.route.v3.RouteConfiguration"
        | "envoy.config.route.v3.VirtualHost"
        | "envoy.config.route.v3.Route"
        | "envoy.config.route.v3.WeightedCluster.ClusterWeight" => header_mutations(msg, path),
        _ => Ok(()),
    }
}

/// The checks of a whole resource, by its type.
pub(super) fn check_resource(msg: &DynamicMessage) -> Result<(), Refusal> {
    match msg.descriptor().full_name() {
        "envoy.config.endpoint.v3.ClusterLoadAssignment" => endpoint_ips(msg, ""),
        "envoy.config.cluster.v3.Cluster" => {
            // STATIC is the default discovery type; a custom cluster type resolves its own.
            let static_type = msg.get_field_by_name("type").and_then(|v| v.as_enum_number()) == Some(0)
                && !msg.has_field_by_name("cluster_type");
            match sub(msg, "load_assignment") {
                Some(cla) if static_type => endpoint_ips(cla, "load_assignment"),
                _ => Ok(()),
            }
        }
        "envoy.config.listener.v3.Listener" => match sub(msg, "address") {
            Some(address) => ip_address(address, "address"),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

fn duration(msg: &DynamicMessage, path: &str) -> Result<(), Refusal> {
    let seconds = msg.get_field_by_name("seconds").and_then(|v| v.as_i64()).unwrap_or(0);
    let nanos = msg.get_field_by_name("nanos").and_then(|v| v.as_i32()).unwrap_or(0);
    if seconds > MAX_DURATION_SECONDS || nanos > 999_999_999 {
        return Err((
            path.to_owned(),
            format!("duration out of range: at most {MAX_DURATION_SECONDS} seconds (about 292 years)"),
        ));
    }
    Ok(())
}

fn regex(msg: &DynamicMessage, path: &str) -> Result<(), Refusal> {
    let pattern = string(msg, "regex");
    // The deprecated per-matcher limit, where set, replaces the default.
    let max = sub(msg, "google_re2")
        .and_then(|g| sub(g, "max_program_size"))
        .and_then(|m| m.get_field_by_name("value").and_then(|v| v.as_u32()))
        .unwrap_or(MAX_PROGRAM_SIZE);
    crate::re2::check(&pattern, max).map_err(|why| (at(path, "regex"), why))
}

fn weights(msg: &DynamicMessage, path: &str) -> Result<(), Refusal> {
    let mut sum: u64 = 0;
    for c in list(msg, "clusters") {
        let Some(c) = c.as_message() else { continue };
        sum += sub(c, "weight").and_then(|w| w.get_field_by_name("value").and_then(|v| v.as_u32())).unwrap_or(0) as u64;
    }
    if sum > u64::from(u32::MAX) {
        return Err((at(path, "clusters"), format!("the weights add up to {sum}, more than {}", u32::MAX)));
    }
    Ok(())
}

/// Envoy's rule for a header a route may add, set or remove: not `:`-prefixed, not `host`.
fn modifiable(name: &str) -> bool {
    !name.starts_with(':') && !name.eq_ignore_ascii_case("host")
}

fn header_mutations(msg: &DynamicMessage, path: &str) -> Result<(), Refusal> {
    for field in ["request_headers_to_add", "response_headers_to_add"] {
        if msg.descriptor().get_field_by_name(field).is_none() {
            continue;
        }
        for (i, option) in list(msg, field).iter().enumerate() {
            let key = option.as_message().and_then(|o| sub(o, "header")).map(|h| string(h, "key")).unwrap_or_default();
            if !modifiable(&key) {
                return Err((
                    at(path, &format!("{field}[{i}].header.key")),
                    format!("{key:?}: :-prefixed or host headers may not be modified"),
                ));
            }
        }
    }
    for field in ["request_headers_to_remove", "response_headers_to_remove"] {
        if msg.descriptor().get_field_by_name(field).is_none() {
            continue;
        }
        for (i, name) in list(msg, field).iter().enumerate() {
            let name = name.as_str().unwrap_or_default();
            if !modifiable(name) {
                return Err((
                    at(path, &format!("{field}[{i}]")),
                    format!("{name:?}: :-prefixed or host headers may not be removed"),
                ));
            }
        }
    }
    Ok(())
}

/// Every endpoint address of a ClusterLoadAssignment is an IP.
fn endpoint_ips(cla: &DynamicMessage, path: &str) -> Result<(), Refusal> {
    for (l, locality) in list(cla, "endpoints").iter().enumerate() {
        let Some(locality) = locality.as_message() else { continue };
        for (e, lb) in list(locality, "lb_endpoints").iter().enumerate() {
            let Some(address) = lb.as_message().and_then(|lb| sub(lb, "endpoint")).and_then(|ep| sub(ep, "address"))
            else {
                continue;
            };
            ip_address(address, &at(path, &format!("endpoints[{l}].lb_endpoints[{e}].endpoint.address")))?;
        }
    }
    Ok(())
}

/// A `core.v3.Address` holding a socket address is an IP, unless it names a resolver.
fn ip_address(address: &DynamicMessage, path: &str) -> Result<(), Refusal> {
    let Some(socket) = sub(address, "socket_address") else { return Ok(()) };
    if !string(socket, "resolver_name").is_empty() {
        return Ok(());
    }
    let ip = string(socket, "address");
    if ip.parse::<std::net::IpAddr>().is_err() {
        return Err((
            at(path, "socket_address.address"),
            format!("{ip:?} is not an IP address (a hostname needs a STRICT_DNS or LOGICAL_DNS cluster)"),
        ));
    }
    Ok(())
}

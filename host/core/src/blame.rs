//! Which intent document a part of a resource came from.
//!
//! A plugin that builds one resource out of many documents (a RouteConfiguration out of a
//! Gateway and the HTTPRoutes attached to it) marks each part it made from another document
//! in the part's Envoy `metadata`:
//!
//! ```yaml
//! metadata: {filter_metadata: {xdst: {document: HTTPRoute/team-a/search}}}
//! ```
//!
//! Any message with a `metadata` field of type `envoy.config.core.v3.Metadata` can carry it
//! (a route, a virtual host, a listener, a filter chain, a cluster, an endpoint). When such a
//! resource is refused at a field, [`owner_at`] walks the field's path from the resource down
//! and answers with the innermost mark on the way: the document whose content was refused,
//! rather than the one that only owns the resource's name. Envoy ignores the mark, and it shows
//! in Envoy's config dump, so an operator can tell from there too which document made a route.

use prost_reflect::{DynamicMessage, MapKey, ReflectMessage, Value};

use crate::decode::Body;

/// The `filter_metadata` key the mark lives under.
pub const METADATA_KEY: &str = "xdst";

/// The document that made the part of the resource at `path` (`virtual_hosts[0].routes[2].match`),
/// as the innermost mark on that path names it; `None` when nothing on the path is marked or
/// the body does not decode.
pub fn owner_at(type_url: &str, body: Body<'_>, path: &str) -> Option<String> {
    let desc = crate::descriptors::message_for_type_url(type_url)?;
    let root = match body {
        Body::Json(text) => {
            let mut value = crate::documents::parse_json_text(text).ok()?;
            if let serde_json::Value::Object(map) = &mut value {
                map.remove("@type");
            }
            crate::decode::decode_message(desc, value).ok()?
        }
        Body::Proto(bytes) => DynamicMessage::decode(desc, bytes).ok()?,
    };
    owner_in(&root, path)
}

/// [`owner_at`] on a decoded message.
pub fn owner_in(root: &DynamicMessage, path: &str) -> Option<String> {
    let mut msg = unpack(root.clone());
    let mut owner = mark(&msg);
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        // The walk ends at a scalar, or where the path leaves the message.
        let Some(next) = step(&msg, segment) else { break };
        msg = unpack(next);
        if let Some(doc) = mark(&msg) {
            owner = Some(doc);
        }
    }
    owner
}

/// The message one path segment (`routes`, `routes[2]`) leads to from `msg`.
fn step(msg: &DynamicMessage, segment: &str) -> Option<DynamicMessage> {
    let (name, index) = match segment.split_once('[') {
        Some((name, rest)) => (name, Some(rest.trim_end_matches(']').parse::<usize>().ok()?)),
        None => (segment, None),
    };
    let field = msg.descriptor().get_field_by_name(name)?;
    let value = msg.get_field(&field);
    match index {
        Some(i) => value.as_list()?.get(i)?.as_message().cloned(),
        None => value.as_message().cloned(),
    }
}

/// The message inside an `Any`, or the message itself.
fn unpack(msg: DynamicMessage) -> DynamicMessage {
    if msg.descriptor().full_name() != "google.protobuf.Any" {
        return msg;
    }
    let type_url = msg.get_field_by_name("type_url").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let value = msg.get_field_by_name("value").and_then(|v| v.as_bytes().cloned()).unwrap_or_default();
    match crate::descriptors::message_for_type_url(&type_url).and_then(|d| DynamicMessage::decode(d, value).ok()) {
        Some(inner) => inner,
        None => msg,
    }
}

/// The document `msg`'s own metadata names, if it is marked.
fn mark(msg: &DynamicMessage) -> Option<String> {
    let field = msg.descriptor().get_field_by_name("metadata")?;
    if !msg.has_field(&field) {
        return None;
    }
    let metadata = msg.get_field(&field);
    let metadata = metadata.as_message()?;
    if metadata.descriptor().full_name() != "envoy.config.core.v3.Metadata" {
        return None;
    }
    let filter = metadata.get_field_by_name("filter_metadata")?;
    let entry = filter.as_map()?.get(&MapKey::String(METADATA_KEY.to_owned()))?.as_message()?.clone();
    let fields = entry.get_field_by_name("fields")?;
    let value = fields.as_map()?.get(&MapKey::String("document".to_owned()))?.as_message()?.clone();
    match value.get_field_by_name("string_value")?.as_ref() {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RC: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

    fn rc() -> String {
        serde_json::json!({
            "name": "gw",
            "virtual_hosts": [{
                "name": "any",
                "domains": ["*"],
                "routes": [
                    {"name": "a", "match": {"prefix": "/a"}, "direct_response": {"status": 200},
                     "metadata": {"filter_metadata": {"xdst": {"document": "HTTPRoute/team-a/a"}}}},
                    {"name": "b", "match": {"prefix": "/b"}, "direct_response": {"status": 200}},
                ]
            }]
        })
        .to_string()
    }

    /// A refusal inside a marked route blames the route's document; outside it, nothing.
    #[test]
    fn the_innermost_mark_on_the_path_is_the_owner() {
        let body = rc();
        let at = |p: &str| owner_at(RC, Body::Json(&body), p);
        assert_eq!(at("virtual_hosts[0].routes[0].match.prefix").as_deref(), Some("HTTPRoute/team-a/a"));
        assert_eq!(at("virtual_hosts[0].routes[0]").as_deref(), Some("HTTPRoute/team-a/a"));
        assert_eq!(at("virtual_hosts[0].routes[1].match"), None);
        assert_eq!(at("virtual_hosts[0].domains[0]"), None);
        assert_eq!(at("virtual_hosts[0].routes[0].name").as_deref(), Some("HTTPRoute/team-a/a"), "ends at a scalar");
        assert_eq!(at("virtual_hosts[3].routes[0]"), None, "a path past the end names nobody");
        assert_eq!(at("no_such_field"), None);
    }
}

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

use prost::Message as _;
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

/// The documents whose content in a resource changed: `body` (its new form, as sent) against
/// `before` (the form the node last accepted, if it had the resource). Each part marked with a
/// document (the innermost mark wins) is that document's content; what no mark covers is the
/// `owner`'s (the document that made the resource, if one did). A document whose parts are
/// not what they were is named, in order; an empty list when nothing decodes or only
/// unowned content changed. This is how a rejection is blamed on the route inside a shared
/// RouteConfiguration that changed, never on the Gateway that only owns its name.
pub fn changed_documents(type_url: &str, body: &[u8], before: Option<&[u8]>, owner: Option<&str>) -> Vec<String> {
    let Some(now) = content(type_url, body, owner) else { return Vec::new() };
    let was = before.and_then(|b| content(type_url, b, owner)).unwrap_or_default();
    now.into_iter().filter(|(doc, parts)| was.get(doc) != Some(parts)).map(|(doc, _)| doc).collect()
}

/// Each document's parts of a resource: its marked parts, and (under `owner`) what is left once
/// they are taken out.
pub(crate) fn content(
    type_url: &str,
    body: &[u8],
    owner: Option<&str>,
) -> Option<std::collections::BTreeMap<String, Vec<DynamicMessage>>> {
    let desc = crate::descriptors::message_for_type_url(type_url)?;
    let mut root = DynamicMessage::decode(desc, body).ok()?;
    let mut out = std::collections::BTreeMap::new();
    let owner = mark(&root).or_else(|| owner.map(str::to_owned));
    take_marked(&mut root, &mut out);
    if let Some(owner) = owner {
        out.entry(owner).or_insert_with(Vec::new).push(root);
    }
    Some(out)
}

/// Takes every marked part out of `msg` (recursively, through `Any`s) into `out`, under the
/// document it names; each part is itself without the marked parts inside it. Map entries are
/// visited in key order.
fn take_marked(msg: &mut DynamicMessage, out: &mut std::collections::BTreeMap<String, Vec<DynamicMessage>>) {
    let fields: Vec<_> = msg.descriptor().fields().filter(|f| f.kind().as_message().is_some()).collect();
    for field in fields {
        if !msg.has_field(&field) {
            continue;
        }
        let clear = match msg.get_field_mut(&field) {
            Value::List(items) => {
                items.retain_mut(|v| !part_taken(v, out));
                items.is_empty()
            }
            Value::Map(map) => {
                // In key order: a document's parts come out in the same order every time.
                let mut keys: Vec<MapKey> = map.keys().cloned().collect();
                keys.sort();
                for key in keys {
                    if map.get_mut(&key).is_some_and(|v| part_taken(v, out)) {
                        map.remove(&key);
                    }
                }
                map.is_empty()
            }
            Value::Message(m) => taken(m, out),
            _ => false,
        };
        if clear {
            msg.clear_field(&field);
        }
    }
}

/// [`taken`] for a list or map entry: only messages are parts.
fn part_taken(v: &mut Value, out: &mut std::collections::BTreeMap<String, Vec<DynamicMessage>>) -> bool {
    match v {
        Value::Message(m) => taken(m, out),
        _ => false,
    }
}

/// Whether `part` is marked (then it went to `out`, whole); otherwise its own marked parts
/// are taken out of it (an `Any`'s packed message included) and it stays.
fn taken(part: &mut DynamicMessage, out: &mut std::collections::BTreeMap<String, Vec<DynamicMessage>>) -> bool {
    if part.descriptor().full_name() == "google.protobuf.Any" {
        let packed = unpack(part.clone());
        if packed.descriptor().full_name() == "google.protobuf.Any" {
            return false;
        }
        let mut inner = packed;
        if let Some(doc) = mark(&inner) {
            take_marked(&mut inner, out);
            out.entry(doc).or_default().push(inner);
            return true;
        }
        take_marked(&mut inner, out);
        part.set_field_by_name("value", Value::Bytes(inner.encode_to_vec().into()));
        return false;
    }
    match mark(part) {
        Some(doc) => {
            take_marked(part, out);
            out.entry(doc).or_default().push(part.clone());
            true
        }
        None => {
            take_marked(part, out);
            false
        }
    }
}

/// The document `msg`'s own metadata names, if it is marked.
pub(crate) fn mark(msg: &DynamicMessage) -> Option<String> {
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
    let entry = filter.as_map()?.get(&MapKey::String(METADATA_KEY.to_owned()))?.as_message()?;
    let fields = entry.get_field_by_name("fields")?;
    let value = fields.as_map()?.get(&MapKey::String("document".to_owned()))?.as_message()?;
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

    fn proto(json: &serde_json::Value) -> Vec<u8> {
        let desc = crate::descriptors::message_for_type_url(RC).unwrap();
        crate::decode::decode_message(desc, json.clone()).unwrap().encode_to_vec()
    }

    /// A rejected RouteConfiguration blames the documents whose parts changed since the node
    /// accepted it: a changed route its HTTPRoute, a changed domain the Gateway that owns it,
    /// a new resource everyone in it; an unchanged one nobody.
    #[test]
    fn a_rejection_blames_the_documents_whose_parts_changed() {
        let before: serde_json::Value = serde_json::from_str(&rc()).unwrap();
        let gw = Some("Gateway/infra/gw");
        let blame = |after: &serde_json::Value, before: Option<&serde_json::Value>| {
            changed_documents(RC, &proto(after), before.map(proto).as_deref(), gw)
        };
        assert!(blame(&before, Some(&before)).is_empty(), "nothing changed");
        let mut route = before.clone();
        route["virtual_hosts"][0]["routes"][0]["match"]["prefix"] = "/a2".into();
        assert_eq!(blame(&route, Some(&before)), ["HTTPRoute/team-a/a"]);
        let mut domain = before.clone();
        domain["virtual_hosts"][0]["domains"][0] = "example.com".into();
        assert_eq!(blame(&domain, Some(&before)), ["Gateway/infra/gw"], "unmarked content is the owner's");
        let mut unmarked_route = before.clone();
        unmarked_route["virtual_hosts"][0]["routes"][1]["match"]["prefix"] = "/b2".into();
        assert_eq!(blame(&unmarked_route, Some(&before)), ["Gateway/infra/gw"]);
        assert_eq!(blame(&before, None), ["Gateway/infra/gw", "HTTPRoute/team-a/a"], "new: everyone in it");
        assert_eq!(changed_documents(RC, &proto(&route), Some(&proto(&before)), None), ["HTTPRoute/team-a/a"]);
        assert!(changed_documents(RC, b"\xff\xff", None, gw).is_empty(), "does not decode: nobody");
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

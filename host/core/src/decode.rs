//! Envoy resources written as canonical proto3 JSON or YAML, as in Envoy's own config
//! files: each document is one resource with an `@type`, or `{resources: [...]}` as in
//! Envoy's filesystem subscription files. Typed `Any` fields (`typed_config`) work.
//! Every error names the file, the document and the field.

use std::fmt;

use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor, ReflectMessage};

use crate::canonical;
use crate::descriptors;
use crate::resource::Resource;

/// Where in a file something went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The file as the user named it.
    pub file: String,
    /// 1-based document index within the file (YAML `---` separated), if known.
    pub document: Option<usize>,
    /// Field path inside the document (`filter_chains[0].filters[0].typed_config.stat_prefix`).
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(d) = self.document {
            write!(f, " document {d}")?;
        }
        if let Some(field) = &self.field {
            write!(f, " field {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for DecodeError {}

/// Decodes every resource in a file's contents. `file` is only used in errors and origins.
pub fn decode_file(file: &str, contents: &str) -> Result<Vec<Resource>, DecodeError> {
    let err = |document: Option<usize>, field: Option<String>, message: String| DecodeError {
        file: file.to_owned(),
        document,
        field,
        message,
    };
    let docs = crate::documents::parse_all(contents, file.ends_with(".json"))
        .map_err(|e| err(e.document, e.field, e.message))?;

    let mut out = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let index = i + 1;
        let origin = format!("{file}#{index}");
        match doc {
            serde_json::Value::Null => continue,
            serde_json::Value::Object(ref map) if !map.contains_key("@type") && map.contains_key("resources") => {
                let Some(list) = map["resources"].as_array() else {
                    return Err(err(Some(index), Some("resources".into()), "must be a list".into()));
                };
                for (j, r) in list.iter().enumerate() {
                    let at = format!("resources[{j}]");
                    let res = decode_resource(r.clone()).map_err(|(f, m)| err(Some(index), Some(join(&at, f)), m))?;
                    out.push(res.with_origin(origin.clone()));
                }
            }
            serde_json::Value::Array(list) => {
                for (j, r) in list.into_iter().enumerate() {
                    let at = format!("[{j}]");
                    let res = decode_resource(r).map_err(|(f, m)| err(Some(index), Some(join(&at, f)), m))?;
                    out.push(res.with_origin(origin.clone()));
                }
            }
            doc => {
                let res = decode_resource(doc).map_err(|(f, m)| err(Some(index), f, m))?;
                out.push(res.with_origin(origin));
            }
        }
    }
    Ok(out)
}

fn join(prefix: &str, field: Option<String>) -> String {
    match field {
        Some(f) if f.starts_with('[') => format!("{prefix}{f}"),
        Some(f) => format!("{prefix}.{f}"),
        None => prefix.to_owned(),
    }
}

/// Decodes one resource value with an `@type`. Errors are (field path, message).
pub fn decode_resource(value: serde_json::Value) -> Result<Resource, (Option<String>, String)> {
    let serde_json::Value::Object(mut map) = value else {
        return Err((None, "expected a resource object with an \"@type\" field".into()));
    };
    let type_url = match map.remove("@type") {
        Some(serde_json::Value::String(t)) => t,
        Some(_) => return Err((Some("@type".into()), "must be a string".into())),
        None => {
            return Err((None, "missing \"@type\" (e.g. type.googleapis.com/envoy.config.cluster.v3.Cluster)".into()));
        }
    };
    let desc = descriptors::message_for_type_url(&type_url)
        .ok_or_else(|| (Some("@type".into()), format!("unknown type {type_url:?}")))?;
    let msg = decode_message(desc, serde_json::Value::Object(map))?;
    let name =
        resource_name(&msg).ok_or_else(|| (Some(name_field(&type_url).into()), "resource has no name".to_string()))?;
    let body = canonical_bytes(&msg)?;
    envoy_checks(&msg)?;
    Ok(Resource::new(type_url, name, &body))
}

/// What Envoy checks when it receives the resource ([`crate::validate`]); an error names the
/// field.
fn envoy_checks(msg: &DynamicMessage) -> Result<(), (Option<String>, String)> {
    crate::validate::check(msg)
        .map_err(|(path, why)| (Some(path).filter(|p| !p.is_empty()), format!("Envoy would refuse it: {why}")))
}

/// The canonical encoding of a decoded resource; an error names the field where it stopped.
fn canonical_bytes(msg: &DynamicMessage) -> Result<Vec<u8>, (Option<String>, String)> {
    canonical::encode(msg).map_err(|e| (Some(e.path().to_owned()).filter(|p| !p.is_empty()), e.reason()))
}

/// Decodes proto3 JSON into a message, refusing unknown fields, with the failing field's path.
pub fn decode_message(
    desc: MessageDescriptor,
    value: serde_json::Value,
) -> Result<DynamicMessage, (Option<String>, String)> {
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(value, &mut track);
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    DynamicMessage::deserialize_with_options(desc, de, &options).map_err(|e| {
        let path = track.path().to_string();
        let path = (path != "." && !path.is_empty()).then_some(path);
        (path, e.to_string())
    })
}

/// A resource's message as a plugin returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body<'a> {
    /// Envoy's canonical proto3 JSON; an `@type`, if present, must match the type URL.
    Json(&'a str),
    /// Protobuf bytes.
    Proto(&'a [u8]),
}

/// Decodes a resource a plugin returned as (type URL, name, body) into its typed Envoy message
/// and re-encodes it canonically, so equal content gives equal bytes whichever language or
/// form produced it. Unknown fields, wrong types and a name that disagrees with the message's
/// own name are errors, with the field path.
pub fn decode_body(type_url: &str, name: &str, body: Body<'_>) -> Result<Resource, (Option<String>, String)> {
    Ok(Resource::new(type_url, name, &canonical_body(type_url, name, body)?))
}

/// [`decode_body`]'s canonical bytes of the message, checked, without the [`Resource`].
pub(crate) fn canonical_body(type_url: &str, name: &str, body: Body<'_>) -> Result<Vec<u8>, (Option<String>, String)> {
    let desc = descriptors::message_for_type_url(type_url)
        .ok_or_else(|| (Some("type_url".to_owned()), format!("unknown type {type_url:?}")))?;
    let msg = match body {
        Body::Json(text) => {
            let mut value = crate::documents::parse_json_text(text).map_err(|e| (e.field, e.message))?;
            if let serde_json::Value::Object(map) = &mut value {
                match map.remove("@type") {
                    Some(serde_json::Value::String(t)) if t == type_url => {}
                    Some(other) => {
                        return Err((
                            Some("@type".into()),
                            format!("{other} does not match the resource's type {type_url:?}"),
                        ));
                    }
                    None => {}
                }
            }
            decode_message(desc, value)?
        }
        Body::Proto(bytes) => {
            let msg = DynamicMessage::decode(desc, bytes).map_err(|e| (None, format!("invalid protobuf: {e}")))?;
            if let Some(field) = first_unknown_field(&msg, "") {
                return Err((Some(field), "unknown field (is the plugin built against a newer Envoy API?)".into()));
            }
            msg
        }
    };
    match resource_name(&msg) {
        Some(n) if n == name => {}
        Some(n) => {
            return Err((
                Some(name_field(type_url).into()),
                format!("is {n:?} but the resource is declared as {name:?}"),
            ));
        }
        None => {
            return Err((Some(name_field(type_url).into()), format!("missing (the resource is declared as {name:?})")));
        }
    }
    let body = canonical_bytes(&msg)?;
    envoy_checks(&msg)?;
    Ok(body)
}

/// The path of the first field, anywhere in `msg`, that its descriptor does not know.
pub(crate) fn first_unknown_field(msg: &DynamicMessage, path: &str) -> Option<String> {
    let join = |name: &str| if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") };
    if let Some(u) = msg.unknown_fields().next() {
        return Some(join(&format!("#{}", u.number())));
    }
    for (field, value) in msg.fields() {
        let at = join(field.name());
        let found = match value {
            prost_reflect::Value::Message(m) => first_unknown_field(m, &at),
            prost_reflect::Value::List(items) => items.iter().enumerate().find_map(|(i, v)| match v {
                prost_reflect::Value::Message(m) => first_unknown_field(m, &format!("{at}[{i}]")),
                _ => None,
            }),
            prost_reflect::Value::Map(entries) => entries.values().find_map(|v| match v {
                prost_reflect::Value::Message(m) => first_unknown_field(m, &at),
                _ => None,
            }),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

fn name_field(type_url: &str) -> &'static str {
    if type_url == crate::types::ENDPOINT { "cluster_name" } else { "name" }
}

/// The name a resource is known by: `name`, or `cluster_name` for a ClusterLoadAssignment.
pub fn resource_name(msg: &DynamicMessage) -> Option<String> {
    let desc = msg.descriptor();
    let field = desc.get_field_by_name("name").or_else(|| desc.get_field_by_name("cluster_name"))?;
    let name = msg.get_field(&field).as_str()?.to_owned();
    (!name.is_empty()).then_some(name)
}

/// A resource's body as canonical proto3 JSON with Envoy's field names (`connect_timeout`),
/// `Any`s expanded with their `@type`: what a plugin that patches resources reads. `None` for a
/// type the descriptor set lacks or bytes that do not decode.
pub fn to_json(type_url: &str, body: &[u8]) -> Option<String> {
    let desc = descriptors::message_for_type_url(type_url)?;
    let message = DynamicMessage::decode(desc, body).ok()?;
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut out);
    message
        .serialize_with_options(&mut ser, &prost_reflect::SerializeOptions::new().use_proto_field_name(true))
        .ok()?;
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types;

    const CLUSTERS: &str = r#"
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: web
type: EDS
connect_timeout: 0.25s
eds_cluster_config: {eds_config: {ads: {}, resource_api_version: V3}}
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: web
endpoints:
- lb_endpoints:
  - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 8080}}}
"#;

    #[test]
    fn multi_document_yaml() {
        let rs = decode_file("c.yaml", CLUSTERS).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!((rs[0].type_url().as_ref(), rs[0].name().as_ref()), (types::CLUSTER, "web"));
        assert_eq!((rs[1].type_url().as_ref(), rs[1].name().as_ref()), (types::ENDPOINT, "web"));
        assert_eq!(rs[1].origin(), Some("c.yaml#2"));
    }

    #[test]
    fn yaml_and_json_give_identical_bytes() {
        let yaml = decode_file("c.yaml", CLUSTERS).unwrap();
        let json = r#"{"resources": [{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "eds_cluster_config": {"eds_config": {"resource_api_version": "V3", "ads": {}}},
            "connectTimeout": "0.250s", "type": "EDS", "name": "web"}]}"#;
        let json = decode_file("c.json", json).unwrap();
        assert_eq!(yaml[0].body(), json[0].body());
        assert_eq!(yaml[0].version(), json[0].version());
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let bad = CLUSTERS.replace("connect_timeout: 0.25s", "connect_timeout: soon");
        let e = decode_file("c.yaml", &bad).unwrap_err();
        assert_eq!((e.file.as_str(), e.document), ("c.yaml", Some(1)));
        assert_eq!(e.field.as_deref(), Some("connect_timeout"), "{e}");

        let bad = CLUSTERS.replace("port_value: 8080", "port_value: 8080, colour: red");
        let e = decode_file("c.yaml", &bad).unwrap_err();
        assert_eq!(e.document, Some(2));
        assert!(
            e.field.as_deref().unwrap().starts_with("endpoints[0].lb_endpoints[0].endpoint.address.socket_address"),
            "{e}"
        );
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn errors_inside_typed_config() {
        let listener = r#"
"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: in
      rds: {route_config_name: r, config_source: {ads: {}}}
      bogus_field: 1
"#;
        let e = decode_file("l.yaml", listener).unwrap_err();
        assert!(e.field.as_deref().unwrap().starts_with("filter_chains[0].filters[0].typed_config"), "{e}");
        assert!(e.to_string().contains("bogus_field"), "{e}");
    }

    #[test]
    fn missing_type_unknown_type_missing_name_and_garbage() {
        let e = decode_file("x.yaml", "name: web\n").unwrap_err();
        assert!(e.message.contains("@type"), "{e}");
        let e = decode_file("x.yaml", "\"@type\": type.googleapis.com/no.Such\nname: a\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("@type"));
        let e = decode_file("x.yaml", "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("name"));
        let e = decode_file("x.yaml", "a: [\n").unwrap_err();
        assert!(e.message.contains("invalid YAML"), "{e}");
        let e = decode_file("x.json", "{\"resources\": [").unwrap_err();
        assert!(e.message.contains("invalid JSON"), "{e}");
        let e = decode_file("x.yaml", "- 1\n- 2\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("[0]"));
    }

    #[test]
    fn plugin_bodies_json_and_proto_give_identical_resources() {
        use prost::Message;
        let json = r#"{"name": "web", "type": "EDS", "connect_timeout": "0.25s", "eds_cluster_config": {"eds_config": {"ads": {}}}}"#;
        let a = decode_body(types::CLUSTER, "web", Body::Json(json)).unwrap();
        let typed = envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(a.body().clone()).unwrap();
        let b = decode_body(types::CLUSTER, "web", Body::Proto(&typed.encode_to_vec())).unwrap();
        assert_eq!(a.body(), b.body());
        assert_eq!(a.version(), b.version());
        let with_type = format!(r#"{{"@type": "{}", {}"#, types::CLUSTER, &json[1..]);
        assert_eq!(decode_body(types::CLUSTER, "web", Body::Json(&with_type)).unwrap().version(), a.version());
    }

    #[test]
    fn plugin_body_errors_name_the_field() {
        let e = decode_body(types::CLUSTER, "web", Body::Json(r#"{"name": "web", "connect_timeout": 5}"#)).unwrap_err();
        assert_eq!(e.0.as_deref(), Some("connect_timeout"), "{e:?}");
        let e = decode_body(types::CLUSTER, "web", Body::Json(r#"{"name": "web", "colour": "red"}"#)).unwrap_err();
        assert!(e.1.contains("colour"), "{e:?}");
        let e = decode_body(types::CLUSTER, "web", Body::Json(r#"{"name": "api"}"#)).unwrap_err();
        assert_eq!(e.0.as_deref(), Some("name"));
        let e = decode_body(
            types::CLUSTER,
            "web",
            Body::Json(r#"{"@type": "type.googleapis.com/envoy.config.listener.v3.Listener", "name": "web"}"#),
        )
        .unwrap_err();
        assert_eq!(e.0.as_deref(), Some("@type"));
        let e = decode_body("type.googleapis.com/nope.Nope", "web", Body::Json("{}")).unwrap_err();
        assert_eq!(e.0.as_deref(), Some("type_url"));
        // Protobuf with a field Envoy's Cluster does not have (number 999, a varint), nested
        // inside eds_cluster_config (field 3).
        let mut bytes = vec![0x0a, 0x03, b'w', b'e', b'b', 0x1a, 0x03, 0xb8, 0x3e, 0x01];
        let e = decode_body(types::CLUSTER, "web", Body::Proto(&bytes)).unwrap_err();
        assert_eq!(e.0.as_deref(), Some("eds_cluster_config.#999"), "{e:?}");
        bytes.truncate(4);
        assert!(decode_body(types::CLUSTER, "web", Body::Proto(&bytes)).unwrap_err().1.contains("invalid protobuf"));
    }

    #[test]
    fn empty_documents_are_skipped() {
        assert!(decode_file("e.yaml", "---\n---\n").unwrap().is_empty());
        assert!(decode_file("e.yaml", "").unwrap().is_empty());
    }
}

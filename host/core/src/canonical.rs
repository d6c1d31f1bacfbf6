//! Deterministic protobuf encoding.
//!
//! `prost-reflect` keeps map fields in a `HashMap` and encodes them in its iteration
//! order, and an `Any` holds whatever bytes its producer wrote. Versions are content
//! hashes, so the same resource must always give the same bytes: this encoder writes
//! fields in field-number order, map entries sorted by key, and re-encodes the message
//! inside every `Any` the same way (recursively). Unknown fields are refused upstream
//! and dropped here.
//!
//! Nesting is bounded: messages inside messages, `Any` inside `Any` included, may go
//! [`MAX_DEPTH`] levels deep. Each `Any` is decoded here, one level at a time, so without one
//! budget across them a plugin's `Any` holding an `Any` ... thousands deep would overflow the
//! stack and abort the server.

use prost::bytes::BufMut;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value};

use crate::descriptors;

/// How deep messages may nest (counting every message, across `Any` boundaries). Envoy's
/// own configuration nests a few dozen levels at most.
pub const MAX_DEPTH: usize = 100;

/// Why a message could not be encoded canonically.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CanonicalError {
    /// An `Any` names a type the Envoy API does not define.
    #[error("{path}: unknown type {type_url:?} in Any")]
    UnknownAnyType { path: String, type_url: String },
    /// An `Any` holds bytes that do not decode as the type it names.
    #[error("{path}: Any of type {type_url:?} does not decode: {reason}")]
    BadAny { path: String, type_url: String, reason: String },
    /// Messages nested deeper than [`MAX_DEPTH`].
    #[error("{path}: messages nested more than {MAX_DEPTH} levels deep")]
    TooDeep { path: String },
}

impl CanonicalError {
    /// The field path where encoding stopped.
    pub fn path(&self) -> &str {
        match self {
            CanonicalError::UnknownAnyType { path, .. }
            | CanonicalError::BadAny { path, .. }
            | CanonicalError::TooDeep { path } => path,
        }
    }

    /// What is wrong there, without the path.
    pub fn reason(&self) -> String {
        let full = self.to_string();
        full.strip_prefix(&format!("{}: ", self.path())).unwrap_or(&full).to_owned()
    }
}

/// Encodes `msg`, found `depth` messages deep in a resource, deterministically: what
/// [`encode`] writes for it inside the whole.
pub(crate) fn encode_nested(msg: &DynamicMessage, depth: usize) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::with_capacity(64);
    encode_message(msg, &mut out, &mut String::new(), depth)?;
    Ok(out)
}

/// Encodes `msg` deterministically.
pub fn encode(msg: &DynamicMessage) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::with_capacity(64);
    encode_message(msg, &mut out, &mut String::new(), 0)?;
    Ok(out)
}

fn encode_message(
    msg: &DynamicMessage,
    out: &mut Vec<u8>,
    path: &mut String,
    depth: usize,
) -> Result<(), CanonicalError> {
    if depth >= MAX_DEPTH {
        crate::limits::Limit::Nesting.hit();
        return Err(CanonicalError::TooDeep { path: path.clone() });
    }
    if msg.descriptor().full_name() == "google.protobuf.Any" {
        return encode_any(msg, out, path, depth);
    }
    let mut fields: Vec<(FieldDescriptor, &Value)> = msg.fields().collect();
    fields.sort_by_key(|(f, _)| f.number());
    for (field, value) in fields {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(field.name());
        encode_field(&field, value, out, path, depth)?;
        path.truncate(len);
    }
    Ok(())
}

fn encode_any(msg: &DynamicMessage, out: &mut Vec<u8>, path: &mut String, depth: usize) -> Result<(), CanonicalError> {
    let type_url = msg.get_field_by_number(1).and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let value = msg.get_field_by_number(2).and_then(|v| v.as_bytes().cloned()).unwrap_or_default();
    if type_url.is_empty() && value.is_empty() {
        return Ok(());
    }
    let desc = descriptors::message_for_type_url(&type_url)
        .ok_or_else(|| CanonicalError::UnknownAnyType { path: path.clone(), type_url: type_url.clone() })?;
    let inner = DynamicMessage::decode(desc, value).map_err(|e| CanonicalError::BadAny {
        path: path.clone(),
        type_url: type_url.clone(),
        reason: e.to_string(),
    })?;
    let mut body = Vec::new();
    encode_message(&inner, &mut body, path, depth + 1)?;
    encode_key(1, WireType::LengthDelimited, out);
    encode_varint(type_url.len() as u64, out);
    out.put_slice(type_url.as_bytes());
    if !body.is_empty() {
        encode_key(2, WireType::LengthDelimited, out);
        encode_varint(body.len() as u64, out);
        out.put_slice(&body);
    }
    Ok(())
}

fn encode_field(
    field: &FieldDescriptor,
    value: &Value,
    out: &mut Vec<u8>,
    path: &mut String,
    depth: usize,
) -> Result<(), CanonicalError> {
    let number = field.number();
    match value {
        Value::List(values) if field.is_packed() && is_packable(&field.kind()) => {
            if values.is_empty() {
                return Ok(());
            }
            let mut body = Vec::new();
            for v in values {
                encode_scalar_raw(&field.kind(), v, &mut body);
            }
            encode_key(number, WireType::LengthDelimited, out);
            encode_varint(body.len() as u64, out);
            out.put_slice(&body);
        }
        Value::List(values) => {
            for (i, v) in values.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                encode_single(number, &field.kind(), v, out, path, depth)?;
                path.truncate(len);
            }
        }
        Value::Map(map) => {
            let Kind::Message(entry) = field.kind() else { return Ok(()) };
            let key_field = entry.get_field(1).expect("map entry has a key");
            let value_field = entry.get_field(2).expect("map entry has a value");
            let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (k, v) in entries {
                let len = path.len();
                path.push_str(&format!("[{}]", map_key_label(k)));
                let mut body = Vec::new();
                encode_single(1, &key_field.kind(), &map_key_value(k), &mut body, path, depth)?;
                encode_single(2, &value_field.kind(), v, &mut body, path, depth)?;
                path.truncate(len);
                encode_key(number, WireType::LengthDelimited, out);
                encode_varint(body.len() as u64, out);
                out.put_slice(&body);
            }
        }
        v => encode_single(number, &field.kind(), v, out, path, depth)?,
    }
    Ok(())
}

fn encode_single(
    number: u32,
    kind: &Kind,
    value: &Value,
    out: &mut Vec<u8>,
    path: &mut String,
    depth: usize,
) -> Result<(), CanonicalError> {
    match (kind, value) {
        (Kind::Message(_), Value::Message(m)) => {
            let mut body = Vec::new();
            encode_message(m, &mut body, path, depth + 1)?;
            encode_key(number, WireType::LengthDelimited, out);
            encode_varint(body.len() as u64, out);
            out.put_slice(&body);
        }
        (Kind::String, Value::String(s)) => {
            encode_key(number, WireType::LengthDelimited, out);
            encode_varint(s.len() as u64, out);
            out.put_slice(s.as_bytes());
        }
        (Kind::Bytes, Value::Bytes(b)) => {
            encode_key(number, WireType::LengthDelimited, out);
            encode_varint(b.len() as u64, out);
            out.put_slice(b);
        }
        (kind, v) => {
            encode_key(number, wire_type(kind), out);
            encode_scalar_raw(kind, v, out);
        }
    }
    Ok(())
}

fn is_packable(kind: &Kind) -> bool {
    !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_))
}

fn wire_type(kind: &Kind) -> WireType {
    match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => WireType::SixtyFourBit,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => WireType::ThirtyTwoBit,
        Kind::String | Kind::Bytes | Kind::Message(_) => WireType::LengthDelimited,
        _ => WireType::Varint,
    }
}

/// Writes a scalar's value without its key.
fn encode_scalar_raw(kind: &Kind, value: &Value, out: &mut Vec<u8>) {
    match (kind, value) {
        (Kind::Double, Value::F64(v)) => out.put_f64_le(*v),
        (Kind::Float, Value::F32(v)) => out.put_f32_le(*v),
        (Kind::Fixed64, Value::U64(v)) => out.put_u64_le(*v),
        (Kind::Sfixed64, Value::I64(v)) => out.put_i64_le(*v),
        (Kind::Fixed32, Value::U32(v)) => out.put_u32_le(*v),
        (Kind::Sfixed32, Value::I32(v)) => out.put_i32_le(*v),
        (Kind::Int32, Value::I32(v)) => encode_varint(*v as i64 as u64, out),
        (Kind::Int64, Value::I64(v)) => encode_varint(*v as u64, out),
        (Kind::Uint32, Value::U32(v)) => encode_varint(u64::from(*v), out),
        (Kind::Uint64, Value::U64(v)) => encode_varint(*v, out),
        (Kind::Sint32, Value::I32(v)) => encode_varint(u64::from(((*v << 1) ^ (*v >> 31)) as u32), out),
        (Kind::Sint64, Value::I64(v)) => encode_varint(((*v << 1) ^ (*v >> 63)) as u64, out),
        (Kind::Bool, Value::Bool(v)) => encode_varint(u64::from(*v), out),
        (Kind::Enum(_), Value::EnumNumber(v)) => encode_varint(*v as i64 as u64, out),
        (kind, value) => unreachable!("prost-reflect checked {value:?} against {kind:?}"),
    }
}

fn map_key_value(k: &MapKey) -> Value {
    match k {
        MapKey::Bool(v) => Value::Bool(*v),
        MapKey::I32(v) => Value::I32(*v),
        MapKey::I64(v) => Value::I64(*v),
        MapKey::U32(v) => Value::U32(*v),
        MapKey::U64(v) => Value::U64(*v),
        MapKey::String(v) => Value::String(v.clone()),
    }
}

fn map_key_label(k: &MapKey) -> String {
    match k {
        MapKey::String(s) => format!("{s:?}"),
        other => format!("{other:?}"),
    }
}

/// The length a varint takes; re-exported for the wire encoder.
pub(crate) fn varint_len(v: u64) -> usize {
    encoded_len_varint(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::nested_any;
    use prost::Message;

    fn listener_json() -> serde_json::Value {
        serde_json::json!({
            "name": "l",
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10000}},
            "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "in",
                "rds": {"route_config_name": "r", "config_source": {"ads": {}, "resource_api_version": "V3"}},
                "http_filters": [{
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
                }]
            }}]}],
            "metadata": {"filter_metadata": {"z": {"a": 1}, "a": {"b": 2}, "m": {}}}
        })
    }

    fn decode(json: &serde_json::Value) -> DynamicMessage {
        let desc = descriptors::message_for_type_url(crate::types::LISTENER).unwrap();
        DynamicMessage::deserialize(desc, json.clone()).unwrap()
    }

    #[test]
    fn same_message_same_bytes_and_equal_to_prost() {
        let a = encode(&decode(&listener_json())).unwrap();
        for _ in 0..20 {
            assert_eq!(encode(&decode(&listener_json())).unwrap(), a);
        }
        // The canonical bytes are a valid Listener with the same content.
        let typed = envoy_types::pb::envoy::config::listener::v3::Listener::decode(a.as_slice()).unwrap();
        assert_eq!(typed.name, "l");
        assert_eq!(typed.metadata.unwrap().filter_metadata.len(), 3);
    }

    #[test]
    fn nested_any_is_bounded_across_any_boundaries() {
        let desc = descriptors::pool().get_message_by_name("google.protobuf.Any").unwrap();
        for levels in [MAX_DEPTH - 2, MAX_DEPTH, 3_000, 100_000] {
            let msg = DynamicMessage::decode(desc.clone(), nested_any(levels).as_slice()).unwrap();
            let got = encode(&msg);
            if levels < MAX_DEPTH {
                assert!(got.is_ok(), "{levels}: {got:?}");
            } else {
                assert_eq!(got, Err(CanonicalError::TooDeep { path: String::new() }), "{levels}");
            }
        }
        // Inside a resource, the error names the field.
        let cluster = descriptors::message_for_type_url(crate::types::CLUSTER).unwrap();
        let mut c = DynamicMessage::new(cluster.clone());
        c.set_field_by_name("name", Value::String("c".into()));
        let ts_field = cluster.get_field_by_name("transport_socket").unwrap();
        let Kind::Message(ts_desc) = ts_field.kind() else { panic!() };
        let mut ts = DynamicMessage::new(ts_desc);
        ts.set_field_by_name(
            "typed_config",
            Value::Message(DynamicMessage::decode(desc, nested_any(3_000).as_slice()).unwrap()),
        );
        c.set_field(&ts_field, Value::Message(ts));
        let e = encode(&c).unwrap_err();
        assert_eq!(e.path(), "transport_socket.typed_config");
        assert_eq!(e.reason(), "messages nested more than 100 levels deep");
    }

    #[test]
    fn unknown_any_type_is_named_with_its_path() {
        let desc = descriptors::pool().get_message_by_name("google.protobuf.Any").unwrap();
        let mut any = DynamicMessage::new(desc);
        any.set_field_by_number(1, Value::String("type.googleapis.com/no.Such".into()));
        let err = encode(&any).unwrap_err();
        assert!(matches!(err, CanonicalError::UnknownAnyType { .. }), "{err}");
    }

    #[test]
    fn varint_len_matches_prost() {
        assert_eq!(varint_len(300), 2);
    }
}

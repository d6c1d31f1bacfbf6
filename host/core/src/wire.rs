//! Writes responses as protobuf straight from the resources' shared bytes: a response to
//! ten thousand streams copies each resource into ten thousand socket buffers, but never
//! re-encodes it and never builds a per-stream message tree.

use bytes::BufMut;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::delta::DeltaResponse;
use crate::sotw::SotwResponse;
use crate::stream::{NOT_FOUND, ResourceError};

fn string_field(number: u32, s: &str, buf: &mut impl BufMut) {
    if s.is_empty() {
        return;
    }
    encode_key(number, WireType::LengthDelimited, buf);
    encode_varint(s.len() as u64, buf);
    buf.put_slice(s.as_bytes());
}

fn bytes_field(number: u32, b: &[u8], buf: &mut impl BufMut) {
    encode_key(number, WireType::LengthDelimited, buf);
    encode_varint(b.len() as u64, buf);
    buf.put_slice(b);
}

fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// `google.rpc.Status` of `NOT_FOUND` with `e`'s message.
fn status_len(e: &ResourceError) -> usize {
    1 + encoded_len_varint(NOT_FOUND as u64) + field_len(e.message.len())
}

/// `envoy.service.discovery.v3.ResourceError`: `resource_name { name }`, `error_detail`.
fn error_len(e: &ResourceError) -> usize {
    field_len(field_len(e.name.len())) + field_len(status_len(e))
}

fn error_field(number: u32, e: &ResourceError, buf: &mut impl BufMut) {
    encode_key(number, WireType::LengthDelimited, buf);
    encode_varint(error_len(e) as u64, buf);
    encode_key(1, WireType::LengthDelimited, buf);
    encode_varint(field_len(e.name.len()) as u64, buf);
    bytes_field(1, e.name.as_bytes(), buf);
    encode_key(2, WireType::LengthDelimited, buf);
    encode_varint(status_len(e) as u64, buf);
    encode_key(1, WireType::Varint, buf);
    encode_varint(NOT_FOUND as u64, buf);
    bytes_field(2, e.message.as_bytes(), buf);
}

/// Encoded size of a `DiscoveryResponse`.
pub fn sotw_len(r: &SotwResponse) -> usize {
    let mut n = field_len(r.version.len()) + field_len(r.type_url.len()) + field_len(r.nonce.len());
    for res in r.resources.iter() {
        n += field_len(res.any_bytes().len());
    }
    n + r.errors.iter().map(|e| field_len(error_len(e))).sum::<usize>()
}

/// Writes `envoy.service.discovery.v3.DiscoveryResponse`.
pub fn encode_sotw(r: &SotwResponse, buf: &mut impl BufMut) {
    string_field(1, &r.version, buf);
    for res in r.resources.iter() {
        bytes_field(2, res.any_bytes(), buf);
    }
    string_field(4, &r.type_url, buf);
    string_field(5, &r.nonce, buf);
    for e in &r.errors {
        error_field(7, e, buf);
    }
}

/// Encoded size of a `DeltaDiscoveryResponse`.
pub fn delta_len(r: &DeltaResponse) -> usize {
    let mut n = field_len(r.system_version.len()) + field_len(r.type_url.len()) + field_len(r.nonce.len());
    n += r.resources.iter().map(|res| field_len(res.delta_bytes().len())).sum::<usize>();
    n += r.removed.iter().map(|name| field_len(name.len())).sum::<usize>();
    n + r.errors.iter().map(|e| field_len(error_len(e))).sum::<usize>()
}

/// Writes `envoy.service.discovery.v3.DeltaDiscoveryResponse`.
pub fn encode_delta(r: &DeltaResponse, buf: &mut impl BufMut) {
    string_field(1, &r.system_version, buf);
    for res in r.resources.iter() {
        bytes_field(2, res.delta_bytes(), buf);
    }
    string_field(4, &r.type_url, buf);
    string_field(5, &r.nonce, buf);
    for name in r.removed.iter() {
        encode_key(6, WireType::LengthDelimited, buf);
        encode_varint(name.len() as u64, buf);
        buf.put_slice(name.as_bytes());
    }
    for e in &r.errors {
        error_field(9, e, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sotw::Resources;
    use crate::testutil::*;
    use crate::types::CLUSTER;
    use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse};
    use prost::Message;
    use std::sync::Arc;

    #[test]
    fn sotw_bytes_decode_with_prost() {
        let s = base();
        let r = SotwResponse {
            type_url: CLUSTER.into(),
            version: "v1".into(),
            nonce: "7".into(),
            resources: Resources::All(s.get(CLUSTER).unwrap().clone()),
            errors: vec![ResourceError { name: "missing".into(), message: "not here".into() }],
        };
        let mut buf = Vec::new();
        encode_sotw(&r, &mut buf);
        assert_eq!(buf.len(), sotw_len(&r));
        let d = DiscoveryResponse::decode(buf.as_slice()).unwrap();
        assert_eq!((d.version_info.as_str(), d.type_url.as_str(), d.nonce.as_str()), ("v1", CLUSTER, "7"));
        assert_eq!(d.resources.len(), 2);
        assert_eq!(d.resources[1].value, b"1");
        let e = &d.resource_errors[0];
        assert_eq!(e.resource_name.as_ref().map(|n| n.name.as_str()), Some("missing"));
        let status = e.error_detail.as_ref().unwrap();
        assert_eq!((status.code, status.message.as_str()), (NOT_FOUND, "not here"));
    }

    #[test]
    fn delta_bytes_decode_with_prost() {
        let s = base();
        let r = DeltaResponse {
            type_url: CLUSTER.into(),
            system_version: "sv".into(),
            nonce: "3".into(),
            resources: vec![s.resource(CLUSTER, "c1").unwrap().clone()].into(),
            removed: vec![Arc::from("gone")].into(),
            served: None,
            from: None,
            errors: vec![ResourceError { name: "gone".into(), message: "why".into() }],
        };
        let mut buf = Vec::new();
        encode_delta(&r, &mut buf);
        assert_eq!(buf.len(), delta_len(&r));
        let d = DeltaDiscoveryResponse::decode(buf.as_slice()).unwrap();
        assert_eq!(d.resources[0].name, "c1");
        assert_eq!(d.resources[0].version, s.resource(CLUSTER, "c1").unwrap().version().as_ref());
        assert_eq!(d.removed_resources, ["gone"]);
        assert_eq!(d.nonce, "3");
        assert_eq!(
            d.resource_errors[0].error_detail.as_ref().map(|s| (s.code, s.message.as_str())),
            Some((NOT_FOUND, "why"))
        );
    }
}

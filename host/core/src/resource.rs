//! One resource, encoded once and shared by reference by every stream that sends it.

use std::fmt;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use prost::encoding::{WireType, encode_key, encode_varint};
use sha2::{Digest, Sha256};

use crate::canonical::varint_len;

/// A resource ready for the wire.
///
/// Its bytes are laid out once as a Delta `Resource` message whose first field is the
/// `Any`; the SotW form is a slice of the same allocation, so a resource costs one
/// buffer however many streams and protocols send it.
#[derive(Clone)]
pub struct Resource {
    type_url: Arc<str>,
    name: Arc<str>,
    version: Arc<str>,
    /// `envoy.service.discovery.v3.Resource` {resource: Any, version, name}.
    delta: Bytes,
    /// The `google.protobuf.Any` inside `delta`.
    any: Bytes,
    /// The message inside `any`.
    body: Bytes,
    origin: Option<Arc<str>>,
    /// 128 bits of a hash of (name, version): what a set's version sums (see
    /// [`crate::snapshot::TypeSet::version`]), hashed once here rather than on every patch.
    entry_hash: u128,
    /// What this resource names (for the consistency check), worked out once and shared by
    /// every clone: a resource that did not change is not decoded again.
    refs: Arc<std::sync::OnceLock<crate::consistency::References>>,
}

impl Resource {
    /// Wraps canonical message bytes; the version is a hash of the type and the bytes,
    /// so equal content gets an equal version on every replica and after every restart.
    pub fn new(type_url: impl Into<Arc<str>>, name: impl Into<Arc<str>>, body: &[u8]) -> Self {
        let type_url = type_url.into();
        let name = name.into();
        let version: Arc<str> = content_version(&type_url, body).into();

        let any_len = 1
            + varint_len(type_url.len() as u64)
            + type_url.len()
            + if body.is_empty() { 0 } else { 1 + varint_len(body.len() as u64) + body.len() };
        let total = 1
            + varint_len(any_len as u64)
            + any_len
            + 1
            + varint_len(version.len() as u64)
            + version.len()
            + 1
            + varint_len(name.len() as u64)
            + name.len();
        let mut buf = BytesMut::with_capacity(total);
        encode_key(2, WireType::LengthDelimited, &mut buf);
        encode_varint(any_len as u64, &mut buf);
        let any_start = buf.len();
        encode_key(1, WireType::LengthDelimited, &mut buf);
        encode_varint(type_url.len() as u64, &mut buf);
        buf.put_slice(type_url.as_bytes());
        if !body.is_empty() {
            encode_key(2, WireType::LengthDelimited, &mut buf);
            encode_varint(body.len() as u64, &mut buf);
        }
        let body_start = buf.len();
        buf.put_slice(body);
        let any_end = buf.len();
        encode_key(1, WireType::LengthDelimited, &mut buf);
        encode_varint(version.len() as u64, &mut buf);
        buf.put_slice(version.as_bytes());
        encode_key(3, WireType::LengthDelimited, &mut buf);
        encode_varint(name.len() as u64, &mut buf);
        buf.put_slice(name.as_bytes());
        debug_assert_eq!(buf.len(), total);
        let delta = buf.freeze();
        let entry_hash = crate::snapshot::pair_hash(&name, &version);
        Resource {
            entry_hash,
            any: delta.slice(any_start..any_end),
            body: delta.slice(body_start..any_end),
            delta,
            type_url,
            name,
            version,
            origin: None,
            refs: Arc::default(),
        }
    }

    /// Records where the resource came from (`file.yaml#2`, a plugin and intent document),
    /// for `/debug/resources` and to attribute NACKs.
    pub fn with_origin(mut self, origin: impl Into<Arc<str>>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    pub fn type_url(&self) -> &Arc<str> {
        &self.type_url
    }
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }
    pub fn version(&self) -> &Arc<str> {
        &self.version
    }
    /// The hash of (name, version) that set versions are summed from.
    pub fn entry_hash(&self) -> u128 {
        self.entry_hash
    }
    /// The encoded message.
    pub fn body(&self) -> &Bytes {
        &self.body
    }
    /// The encoded `google.protobuf.Any` (SotW `resources` element).
    pub fn any_bytes(&self) -> &Bytes {
        &self.any
    }
    /// The encoded `envoy.service.discovery.v3.Resource` (Delta `resources` element).
    pub fn delta_bytes(&self) -> &Bytes {
        &self.delta
    }
    pub fn origin(&self) -> Option<&str> {
        self.origin.as_deref()
    }
    /// Who made it: the origin, read as the plugin pipeline writes it.
    pub fn attribution(&self) -> Attribution {
        Attribution::parse(self.origin().unwrap_or(""))
    }
    /// Sets what this resource names, when it is known without decoding it (a
    /// RouteConfiguration assembled from checked routes, [`crate::pieces`]).
    pub fn set_references(&self, refs: crate::consistency::References) {
        let _ = self.refs.set(refs);
    }

    /// The other resources this one names; decoded on first use, then cached.
    pub fn references(&self) -> &crate::consistency::References {
        self.refs.get_or_init(|| crate::consistency::References::of(self))
    }
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("type", &crate::types::short_name(&self.type_url))
            .field("name", &self.name)
            .field("version", &self.version)
            .field("bytes", &self.body.len())
            .finish()
    }
}

/// Two resources are equal when their type, name and version are: the version is a hash of
/// the content, and what every set, stream and rollout goes by. Their bytes are not compared:
/// sets are diffed resource by resource on every change to every node (an `OrdMap` diff
/// compares each entry of a leaf that differs), and comparing bytes there was a fifth of
/// xdst's CPU under endpoint churn (docs/PERFORMANCE.md, issue 51). Being `Eq` also lets
/// `Arc<Resource>` answer for one resource shared by both sides without a look inside.
impl PartialEq for Resource {
    fn eq(&self, other: &Self) -> bool {
        self.entry_hash == other.entry_hash
            && self.version == other.version
            && self.name == other.name
            && self.type_url == other.type_url
    }
}

impl Eq for Resource {}

/// A resource's version: the first 64 bits of SHA-256 over its type URL and bytes, in hex.
pub fn content_version(type_url: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(type_url.as_bytes());
    h.update([0]);
    h.update(body);
    hex16(&h.finalize())
}

/// A version for a set of (name, version) pairs, independent of how they were produced.
pub fn set_version<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut h = Sha256::new();
    for (name, version) in entries {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(version.as_bytes());
        h.update([0]);
    }
    hex16(&h.finalize())
}

fn hex16(digest: &[u8]) -> String {
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::discovery::v3::Resource as PbResource;
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message;

    #[test]
    fn slices_decode_as_their_messages() {
        let r = Resource::new(crate::types::CLUSTER, "c1", b"\x0a\x02c1");
        let any = Any::decode(r.any_bytes().clone()).unwrap();
        assert_eq!(any.type_url, crate::types::CLUSTER);
        assert_eq!(any.value, b"\x0a\x02c1");
        let d = PbResource::decode(r.delta_bytes().clone()).unwrap();
        assert_eq!((d.name.as_str(), d.version.as_str()), ("c1", r.version().as_ref()));
        assert_eq!(d.resource.unwrap(), any);
        assert_eq!(r.body().as_ref(), b"\x0a\x02c1");
    }

    #[test]
    fn empty_body_still_encodes() {
        let r = Resource::new(crate::types::CLUSTER, "", b"");
        let d = PbResource::decode(r.delta_bytes().clone()).unwrap();
        assert_eq!(d.resource.unwrap().value, b"");
    }

    #[test]
    fn versions_depend_on_content_only() {
        let a = Resource::new(crate::types::CLUSTER, "c", b"abc");
        let b = Resource::new(crate::types::CLUSTER, "c", b"abc");
        let c = Resource::new(crate::types::CLUSTER, "c", b"abd");
        assert_eq!(a.version(), b.version());
        assert_ne!(a.version(), c.version());
        assert_eq!(a.version().len(), 16);
        assert_ne!(set_version([("a", "1")]), set_version([("a", "2")]));
    }
}

/// Who made a resource, from its origin: `plugin P from Kind/name` (a translate plugin and
/// the intent document), then `; changed by plugin Q` for each patch plugin that changed it;
/// or `file#index` for a resource read from a resources directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Attribution {
    /// The plugin that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub produced_by: Option<String>,
    /// The intent document it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<String>,
    /// The patch plugins that changed it, in the order they ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed_by: Vec<String>,
    /// The file (and document index) it was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

impl Attribution {
    pub fn parse(origin: &str) -> Attribution {
        let mut parts = origin.split("; ");
        let first = parts.next().unwrap_or("");
        let mut a = Attribution::default();
        match first.strip_prefix("plugin ") {
            Some(rest) => match rest.split_once(" from ") {
                Some((p, d)) => (a.produced_by, a.document) = (Some(p.to_owned()), Some(d.to_owned())),
                None => a.produced_by = Some(rest.to_owned()),
            },
            None if !first.is_empty() => a.file = Some(first.to_owned()),
            None => {}
        }
        a.changed_by = parts.filter_map(|p| p.strip_prefix("changed by plugin ")).map(str::to_owned).collect();
        a
    }
}

#[cfg(test)]
mod attribution_tests {
    use super::Attribution;

    #[test]
    fn origins_read_back() {
        let a = Attribution::parse(
            "plugin platform from HttpGateway/web; changed by plugin security; changed by plugin edge",
        );
        assert_eq!(a.produced_by.as_deref(), Some("platform"));
        assert_eq!(a.document.as_deref(), Some("HttpGateway/web"));
        assert_eq!(a.changed_by, ["security", "edge"]);
        assert_eq!(Attribution::parse("plugin policy").produced_by.as_deref(), Some("policy"));
        assert_eq!(Attribution::parse("routes.yaml#2").file.as_deref(), Some("routes.yaml#2"));
        assert_eq!(Attribution::parse(""), Attribution::default());
    }
}

//! Envoy messages as the [`XdsResource`]s a plugin returns, and typed `Any` packing.

use prost::{Message, Name};

use crate::envoy::envoy::config::core::v3::Metadata;
use crate::envoy::envoy::config::{
    cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment, listener::v3::Listener, route::v3::RouteConfiguration,
};
use crate::envoy::envoy::extensions::transport_sockets::tls::v3::Secret;
use crate::envoy::google::protobuf::{Any, Struct, Value, value};
use crate::{Body, XdsResource};

/// Type URLs are `type.googleapis.com/<full message name>`, whatever prost's `Name` default is.
const TYPE_URL_PREFIX: &str = "type.googleapis.com/";

fn type_url<M: Name>() -> String {
    let name = M::full_name();
    let mut url = String::with_capacity(TYPE_URL_PREFIX.len() + name.len());
    url.push_str(TYPE_URL_PREFIX);
    url.push_str(&name);
    url
}

/// An Envoy resource type that names itself: the host requires an [`XdsResource`]'s `name` to
/// equal this field (`Listener.name`, `ClusterLoadAssignment.cluster_name`, ...).
pub trait Resource: Message + Name {
    /// The resource's name as xDS clients request it.
    fn resource_name(&self) -> &str;
    /// The kind shown to people (`Cluster`, `Listener`, ...).
    fn kind() -> &'static str {
        Self::NAME
    }
}

impl Resource for Listener {
    fn resource_name(&self) -> &str {
        &self.name
    }
}

impl Resource for RouteConfiguration {
    fn resource_name(&self) -> &str {
        &self.name
    }
}

impl Resource for Cluster {
    fn resource_name(&self) -> &str {
        &self.name
    }
}

impl Resource for ClusterLoadAssignment {
    fn resource_name(&self) -> &str {
        &self.cluster_name
    }
}

impl Resource for Secret {
    fn resource_name(&self) -> &str {
        &self.name
    }
}

/// Encodes `message` as protobuf bytes in an [`XdsResource`] with its full type URL and name.
/// `document` is the `Kind/name` of the intent document it came from
/// ([`IntentDocument::id`](crate::IntentDocument::id)); a `per-document` plugin must set it.
///
/// ```
/// use xdst_guest::{build, resource};
/// let cluster = build::EdsCluster::new("reviews").build();
/// let r = resource(&cluster, Some("Service/reviews".to_owned()));
/// assert_eq!(r.type_url, "type.googleapis.com/envoy.config.cluster.v3.Cluster");
/// assert_eq!(r.name, "reviews");
/// ```
pub fn resource<R: Resource>(message: &R, document: Option<String>) -> XdsResource {
    resource_named(message.resource_name().to_owned(), message, document)
}

/// Like [`resource`], for message types without a [`Resource`] impl: `name` must equal the
/// message's own name field, or the host refuses the resource.
pub fn resource_named<M: Message + Name>(name: String, message: &M, document: Option<String>) -> XdsResource {
    XdsResource {
        type_url: type_url::<M>(),
        name,
        body: Body::Proto(message.encode_to_vec()),
        document,
        node_groups: Vec::new(),
    }
}

impl XdsResource {
    /// The resource, for the node groups `groups` only (contract 0.3.0). A resource that names
    /// none is for every group. A translate plugin is called once for every group (with node
    /// group `""`), and each group is served what names it or names none.
    ///
    /// ```
    /// use xdst_guest::{build, resource};
    /// let cluster = build::EdsCluster::new("infra/gw-a/80").build();
    /// let r = resource(&cluster, None).for_node_groups(["infra/gw-a"]);
    /// assert_eq!(r.node_groups, ["infra/gw-a"]);
    /// ```
    pub fn for_node_groups<S: Into<String>>(mut self, groups: impl IntoIterator<Item = S>) -> Self {
        self.node_groups = groups.into_iter().map(Into::into).collect();
        self
    }
}

/// Packs a message into a `google.protobuf.Any` with its full type URL, for `typed_config`
/// and other extension points.
pub fn pack<M: Message + Name>(message: &M) -> Any {
    Any { type_url: type_url::<M>(), value: message.encode_to_vec() }
}

/// The `filter_metadata` key of [`made_from`]'s mark.
pub const MARK_KEY: &str = "xdst";

/// Envoy `metadata` marking a part of a resource (a route, a virtual host, a filter chain, an
/// endpoint) as made from `document` (`Kind/namespace/name`). When the host refuses the
/// resource at a field inside that part (Envoy would refuse it), it holds out this document
/// rather than the one the whole resource is attributed to, so one team's route does not hold
/// back another team's. Envoy ignores the mark; its config dump shows it.
pub fn made_from(document: &str) -> Metadata {
    let value = Value { kind: Some(value::Kind::StringValue(document.to_owned())) };
    let mark = Struct { fields: [("document".to_owned(), value)].into_iter().collect() };
    Metadata { filter_metadata: [(MARK_KEY.to_owned(), mark)].into_iter().collect(), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envoy::envoy::extensions::filters::http::router::v3::Router;

    #[test]
    fn type_urls_are_full() {
        assert_eq!(type_url::<Listener>(), "type.googleapis.com/envoy.config.listener.v3.Listener");
        assert_eq!(type_url::<RouteConfiguration>(), "type.googleapis.com/envoy.config.route.v3.RouteConfiguration");
        assert_eq!(type_url::<Cluster>(), "type.googleapis.com/envoy.config.cluster.v3.Cluster");
        assert_eq!(
            type_url::<ClusterLoadAssignment>(),
            "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
        );
        assert_eq!(
            pack(&Router::default()).type_url,
            "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
        );
    }

    #[test]
    fn resource_takes_the_message_name_and_encodes_protobuf() {
        let cla = ClusterLoadAssignment { cluster_name: "web".into(), ..Default::default() };
        let r = resource(&cla, Some("Service/web".into()));
        assert_eq!(r.name, "web");
        assert_eq!(r.document.as_deref(), Some("Service/web"));
        let Body::Proto(bytes) = &r.body else { panic!("expected protobuf bytes") };
        assert_eq!(ClusterLoadAssignment::decode(bytes.as_slice()).unwrap(), cla);
        assert_eq!(ClusterLoadAssignment::kind(), "ClusterLoadAssignment");
    }
}

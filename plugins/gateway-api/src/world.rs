//! Every document of a generation, read into typed objects and indexed by namespace and name.
//!
//! A document that does not read (a field of the wrong type) is a plugin error naming the
//! document and the field, like any intent error: the API server would have refused it too.

use std::collections::BTreeMap;

use xdst_guest::{IntentDocument, PluginError};

use crate::model::{
    BackendTlsPolicySpec, ConfigMap, EndpointSlice, GatewayClassSpec, GatewaySpec, GrpcRouteSpec, HttpRouteSpec,
    ListenerSetSpec, Metadata, Object, ReferenceGrantSpec, Secret, ServiceSpec,
};

pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// An object with its document's id (`Kind/namespace/name`) and file order.
#[derive(Debug, Clone)]
pub struct Doc<T> {
    pub id: String,
    pub namespace: String,
    pub name: String,
    pub metadata: Metadata,
    pub spec: T,
    /// The document's position in the request: the tie-break when creation times are equal
    /// or absent.
    pub order: usize,
}

/// `(namespace, name)`.
pub type Key = (String, String);

/// A route: `(kind, namespace, name)`, kind `HTTPRoute`, `GRPCRoute`, `TCPRoute`, `UDPRoute`
/// or `TLSRoute`.
pub type RouteKey = (&'static str, String, String);

#[derive(Debug, Default)]
pub struct World {
    pub classes: BTreeMap<String, Doc<GatewayClassSpec>>,
    pub gateways: BTreeMap<Key, Doc<GatewaySpec>>,
    pub listener_sets: BTreeMap<Key, Doc<ListenerSetSpec>>,
    /// HTTPRoutes, and the other route kinds in the same shape (a gRPC method match is a path
    /// match on `/service/method`; TCP, UDP and TLS routes have only backendRefs).
    pub routes: BTreeMap<RouteKey, Doc<HttpRouteSpec>>,
    pub services: BTreeMap<Key, Doc<ServiceSpec>>,
    /// By the Service they belong to (`kubernetes.io/service-name`).
    pub slices: BTreeMap<Key, Vec<Doc<EndpointSlice>>>,
    pub grants: Vec<Doc<ReferenceGrantSpec>>,
    /// Secrets, for HTTPS listeners' certificates.
    pub secrets: BTreeMap<Key, Doc<Secret>>,
    /// BackendTLSPolicies, in intent order.
    pub backend_tls_policies: Vec<Doc<BackendTlsPolicySpec>>,
    /// ConfigMaps, for CA bundles (`ca.crt`).
    pub config_maps: BTreeMap<Key, Doc<ConfigMap>>,
    /// Namespace labels, for `allowedRoutes.namespaces.selector`.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

/// Where a namespaced object lives: its namespace, or `default` as Kubernetes has it.
fn namespace_of(doc: &IntentDocument) -> String {
    doc.namespace().unwrap_or("default").to_owned()
}

fn read<T: serde::de::DeserializeOwned + Default>(doc: &IntentDocument, order: usize) -> Result<Doc<T>, PluginError> {
    let object: Object<T> = doc.body()?;
    Ok(Doc {
        id: doc.id(),
        namespace: namespace_of(doc),
        name: doc.local_name().to_owned(),
        metadata: object.metadata,
        spec: object.spec.unwrap_or_default(),
        order,
    })
}

impl<T> Doc<T> {
    /// A document with no `spec` (an EndpointSlice, a Secret): the whole body is read as `T`.
    fn whole(doc: &IntentDocument, metadata: Metadata, body: T, order: usize) -> Doc<T> {
        Doc {
            id: doc.id(),
            namespace: namespace_of(doc),
            name: doc.local_name().to_owned(),
            metadata,
            spec: body,
            order,
        }
    }

    /// The same document with another spec.
    fn with_spec<U>(self, spec: U) -> Doc<U> {
        Doc {
            id: self.id,
            namespace: self.namespace,
            name: self.name,
            metadata: self.metadata,
            spec,
            order: self.order,
        }
    }
}

impl World {
    pub fn read(documents: &[IntentDocument]) -> Result<World, PluginError> {
        let mut w = World::default();
        for (order, doc) in documents.iter().enumerate() {
            let key = (namespace_of(doc), doc.local_name().to_owned());
            match doc.kind.as_str() {
                "GatewayClass" => {
                    w.classes.insert(doc.local_name().to_owned(), read(doc, order)?);
                }
                "Gateway" => {
                    w.gateways.insert(key, read(doc, order)?);
                }
                "ListenerSet" => {
                    w.listener_sets.insert(key, read(doc, order)?);
                }
                "HTTPRoute" => {
                    w.routes.insert(("HTTPRoute", key.0, key.1), read(doc, order)?);
                }
                // A TCPRoute, UDPRoute or TLSRoute is parentRefs, hostnames (TLS) and rules
                // of backendRefs: an HTTPRoute without matches or filters.
                "TCPRoute" | "UDPRoute" | "TLSRoute" => {
                    let kind = match doc.kind.as_str() {
                        "TCPRoute" => "TCPRoute",
                        "UDPRoute" => "UDPRoute",
                        _ => "TLSRoute",
                    };
                    w.routes.insert((kind, key.0, key.1), read(doc, order)?);
                }
                "GRPCRoute" => {
                    let grpc: Doc<GrpcRouteSpec> = read(doc, order)?;
                    let spec = grpc.spec.clone().into_http();
                    let route = grpc.with_spec(spec);
                    w.routes.insert(("GRPCRoute", key.0, key.1), route);
                }
                "Service" => {
                    w.services.insert(key, read(doc, order)?);
                }
                "EndpointSlice" => {
                    let slice: EndpointSlice = doc.body()?;
                    let Some(service) = slice.metadata.labels.get("kubernetes.io/service-name").cloned() else {
                        return Err(doc.error(
                            "metadata.labels",
                            "an EndpointSlice needs the label kubernetes.io/service-name naming its Service",
                        ));
                    };
                    let metadata = slice.metadata.clone();
                    let d = Doc::whole(doc, metadata, slice, order);
                    w.slices.entry((key.0, service)).or_default().push(d);
                }
                "ReferenceGrant" => w.grants.push(read(doc, order)?),
                "BackendTLSPolicy" => w.backend_tls_policies.push(read(doc, order)?),
                "Namespace" => {
                    let d: Doc<serde_json::Value> = read(doc, order)?;
                    // A Namespace has no namespace of its own: its name is the namespace.
                    w.namespaces.insert(doc.local_name().to_owned(), d.metadata.labels);
                }
                "ConfigMap" => {
                    let map: ConfigMap = doc.body()?;
                    let metadata = map.metadata.clone();
                    w.config_maps.insert(key, Doc::whole(doc, metadata, map, order));
                }
                "Secret" => {
                    let secret: Secret = doc.body()?;
                    let metadata = secret.metadata.clone();
                    w.secrets.insert(key, Doc::whole(doc, metadata, secret, order));
                }
                _ => {}
            }
        }
        Ok(w)
    }

    /// Whether a ReferenceGrant in `to_namespace` lets `from_kind` objects of `from_namespace`
    /// refer to the `to_kind` object `to_name` (group `to_group`).
    pub fn granted(
        &self,
        from_kind: &str,
        from_namespace: &str,
        to_group: &str,
        to_kind: &str,
        to_namespace: &str,
        to_name: &str,
    ) -> bool {
        self.grants.iter().filter(|g| g.namespace == to_namespace).any(|g| {
            g.spec.from.iter().any(|f| f.group == GATEWAY_GROUP && f.kind == from_kind && f.namespace == from_namespace)
                && g.spec
                    .to
                    .iter()
                    .any(|t| t.group == to_group && t.kind == to_kind && t.name.as_deref().is_none_or(|n| n == to_name))
        })
    }
}

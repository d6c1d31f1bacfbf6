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

/// An object with its document's id (`Kind/namespace/name`). Nothing depends on the order of
/// the documents (ties go by `namespace/name`, as the specification orders them), so a world
/// updated document by document (contract 0.4.0) is the world read whole.
#[derive(Debug, Clone)]
pub struct Doc<T> {
    pub id: String,
    pub namespace: String,
    pub name: String,
    pub metadata: Metadata,
    pub spec: T,
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
    /// The Service each EndpointSlice (by id) is filed under in `slices`.
    pub slice_services: BTreeMap<String, Key>,
}

/// The route kinds, as the `'static` names route keys hold.
fn route_kind(kind: &str) -> &'static str {
    match kind {
        "HTTPRoute" => "HTTPRoute",
        "GRPCRoute" => "GRPCRoute",
        "TCPRoute" => "TCPRoute",
        "UDPRoute" => "UDPRoute",
        _ => "TLSRoute",
    }
}

/// Where a namespaced object lives: its namespace, or `default` as Kubernetes has it.
fn namespace_of(doc: &IntentDocument) -> String {
    doc.namespace().unwrap_or("default").to_owned()
}

fn read<T: serde::de::DeserializeOwned + Default>(doc: &IntentDocument) -> Result<Doc<T>, PluginError> {
    let object: Object<T> = doc.body()?;
    Ok(Doc {
        id: doc.id(),
        namespace: namespace_of(doc),
        name: doc.local_name().to_owned(),
        metadata: object.metadata,
        spec: object.spec.unwrap_or_default(),
    })
}

impl<T> Doc<T> {
    /// A document with no `spec` (an EndpointSlice, a Secret): the whole body is read as `T`.
    fn whole(doc: &IntentDocument, metadata: Metadata, body: T) -> Doc<T> {
        Doc { id: doc.id(), namespace: namespace_of(doc), name: doc.local_name().to_owned(), metadata, spec: body }
    }

    /// The same document with another spec.
    fn with_spec<U>(self, spec: U) -> Doc<U> {
        Doc { id: self.id, namespace: self.namespace, name: self.name, metadata: self.metadata, spec }
    }
}

impl World {
    pub fn read(documents: &[IntentDocument]) -> Result<World, PluginError> {
        let mut w = World::default();
        for doc in documents {
            w.insert(doc)?;
        }
        Ok(w)
    }

    /// Takes in one document (replacing the one of its id, if any).
    pub fn insert(&mut self, doc: &IntentDocument) -> Result<(), PluginError> {
        self.remove(&doc.id());
        let w = self;
        // A document of a kind this plugin does not read is left out, as a full read does.
        let key = (namespace_of(doc), doc.local_name().to_owned());
        match doc.kind.as_str() {
            "GatewayClass" => {
                w.classes.insert(doc.local_name().to_owned(), read(doc)?);
            }
            "Gateway" => {
                w.gateways.insert(key, read(doc)?);
            }
            "ListenerSet" => {
                w.listener_sets.insert(key, read(doc)?);
            }
            "HTTPRoute" => {
                w.routes.insert(("HTTPRoute", key.0, key.1), read(doc)?);
            }
            // A TCPRoute, UDPRoute or TLSRoute is parentRefs, hostnames (TLS) and rules
            // of backendRefs: an HTTPRoute without matches or filters.
            "TCPRoute" | "UDPRoute" | "TLSRoute" => {
                w.routes.insert((route_kind(&doc.kind), key.0, key.1), read(doc)?);
            }
            "GRPCRoute" => {
                let grpc: Doc<GrpcRouteSpec> = read(doc)?;
                let spec = grpc.spec.clone().into_http();
                let route = grpc.with_spec(spec);
                w.routes.insert(("GRPCRoute", key.0, key.1), route);
            }
            "Service" => {
                w.services.insert(key, read(doc)?);
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
                let d = Doc::whole(doc, metadata, slice);
                w.slice_services.insert(d.id.clone(), (key.0.clone(), service.clone()));
                // By id: the same whatever order the documents came in.
                let list = w.slices.entry((key.0, service)).or_default();
                let at = list.partition_point(|s| s.id < d.id);
                list.insert(at, d);
            }
            "ReferenceGrant" => w.grants.push(read(doc)?),
            "BackendTLSPolicy" => w.backend_tls_policies.push(read(doc)?),
            "Namespace" => {
                let d: Doc<serde_json::Value> = read(doc)?;
                // A Namespace has no namespace of its own: its name is the namespace.
                w.namespaces.insert(doc.local_name().to_owned(), d.metadata.labels);
            }
            "ConfigMap" => {
                let map: ConfigMap = doc.body()?;
                let metadata = map.metadata.clone();
                w.config_maps.insert(key, Doc::whole(doc, metadata, map));
            }
            "Secret" => {
                let secret: Secret = doc.body()?;
                let metadata = secret.metadata.clone();
                w.secrets.insert(key, Doc::whole(doc, metadata, secret));
            }
            _ => {}
        }
        Ok(())
    }

    /// Drops the document `id` (`Kind/namespace/name`, `Kind/name`), if it is here.
    pub fn remove(&mut self, id: &str) {
        let Some((kind, name)) = id.split_once('/') else { return };
        let key = match name.split_once('/') {
            Some((ns, n)) => (ns.to_owned(), n.to_owned()),
            None => ("default".to_owned(), name.to_owned()),
        };
        match kind {
            "GatewayClass" => drop(self.classes.remove(name)),
            "Gateway" => drop(self.gateways.remove(&key)),
            "ListenerSet" => drop(self.listener_sets.remove(&key)),
            "HTTPRoute" | "GRPCRoute" | "TCPRoute" | "UDPRoute" | "TLSRoute" => {
                drop(self.routes.remove(&(route_kind(kind), key.0, key.1)));
            }
            "Service" => drop(self.services.remove(&key)),
            "EndpointSlice" => {
                if let Some(service) = self.slice_services.remove(id)
                    && let Some(list) = self.slices.get_mut(&service)
                {
                    list.retain(|s| s.id != id);
                    if list.is_empty() {
                        self.slices.remove(&service);
                    }
                }
            }
            "ReferenceGrant" => self.grants.retain(|g| g.id != id),
            "BackendTLSPolicy" => self.backend_tls_policies.retain(|p| p.id != id),
            "Namespace" => drop(self.namespaces.remove(name)),
            "ConfigMap" => drop(self.config_maps.remove(&key)),
            "Secret" => drop(self.secrets.remove(&key)),
            _ => {}
        }
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

//! Every document of a generation, read into typed objects and indexed by namespace and name.
//!
//! A document that does not read (a field of the wrong type) is a plugin error naming the
//! document and the field, like any intent error: the API server would have refused it too.

use std::collections::BTreeMap;

use xdst_guest::{IntentDocument, PluginError};

use crate::model::{
    EndpointSlice, GatewayClassSpec, GatewaySpec, HttpRouteSpec, Metadata, Object, ReferenceGrantSpec, ServiceSpec,
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

#[derive(Debug, Default)]
pub struct World {
    pub classes: BTreeMap<String, Doc<GatewayClassSpec>>,
    pub gateways: BTreeMap<Key, Doc<GatewaySpec>>,
    pub http_routes: BTreeMap<Key, Doc<HttpRouteSpec>>,
    pub services: BTreeMap<Key, Doc<ServiceSpec>>,
    /// By the Service they belong to (`kubernetes.io/service-name`).
    pub slices: BTreeMap<Key, Vec<Doc<EndpointSlice>>>,
    pub grants: Vec<Doc<ReferenceGrantSpec>>,
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
                "HTTPRoute" => {
                    w.http_routes.insert(key, read(doc, order)?);
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
                    let d = Doc {
                        id: doc.id(),
                        namespace: key.0.clone(),
                        name: key.1.clone(),
                        metadata: slice.metadata.clone(),
                        spec: slice,
                        order,
                    };
                    w.slices.entry((key.0, service)).or_default().push(d);
                }
                "ReferenceGrant" => w.grants.push(read(doc, order)?),
                "Namespace" => {
                    let d: Doc<serde_json::Value> = read(doc, order)?;
                    // A Namespace has no namespace of its own: its name is the namespace.
                    w.namespaces.insert(doc.local_name().to_owned(), d.metadata.labels);
                }
                // Secrets are read where a listener's certificateRefs name them; GRPCRoutes
                // are not translated yet and reported by the caller.
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

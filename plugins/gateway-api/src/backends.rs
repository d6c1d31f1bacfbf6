//! Backends: a backendRef resolved to a Service port, and the Cluster and
//! ClusterLoadAssignment of every Service port a route uses.
//!
//! A Cluster is named `<namespace>/<service>:<port>`. Its endpoints come from the
//! EndpointSlices labelled `kubernetes.io/service-name: <service>`, taking the slice port whose
//! name is the Service port's name, as Kubernetes maps a Service's `targetPort`. Endpoints whose
//! `conditions.ready` is false are left out. A BackendTLSPolicy for the port makes the cluster
//! speak TLS to them (`backend_tls.rs`). `appProtocol: kubernetes.io/h2c`, or a GRPCRoute
//! using the port, makes the cluster speak HTTP/2 without TLS.

use std::collections::BTreeMap;
use std::time::Duration;

use xdst_guest::build::{EdsCluster, Endpoint, LoadAssignment, Locality};
use xdst_guest::{Diagnostic, Severity, TranslateResponse, XdsResource, resource};

use crate::backend_tls::{Outcome, Policies};
use crate::gateway::Usage;
use crate::model::ObjectRef;
use crate::world::World;

/// A Service port a route sends traffic to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Backend {
    pub namespace: String,
    pub service: String,
    pub port: u16,
}

impl Backend {
    pub fn cluster(&self) -> String {
        format!("{}/{}:{}", self.namespace, self.service, self.port)
    }
}

/// Why a backendRef does not resolve: the `ResolvedRefs` reason and a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Unresolved {
    pub reason: &'static str,
    pub message: String,
}

/// Resolves a route's backendRef (`from_kind` in `from_namespace`) to a Service port.
pub fn resolve(world: &World, from_kind: &str, from_namespace: &str, r: &ObjectRef) -> Result<Backend, Unresolved> {
    let group = r.group.as_deref().unwrap_or("");
    let kind = r.kind.as_deref().unwrap_or("Service");
    if !(group.is_empty() || group == "core") || kind != "Service" {
        return Err(Unresolved {
            reason: "InvalidKind",
            message: format!("backendRef {}: kind {group:?}/{kind:?} is not supported (only Service)", r.name),
        });
    }
    let namespace = r.namespace.clone().unwrap_or_else(|| from_namespace.to_owned());
    if namespace != from_namespace && !world.granted(from_kind, from_namespace, "", "Service", &namespace, &r.name) {
        return Err(Unresolved {
            reason: "RefNotPermitted",
            message: format!("backendRef {namespace}/{}: no ReferenceGrant in {namespace} allows it", r.name),
        });
    }
    let Some(service) = world.services.get(&(namespace.clone(), r.name.clone())) else {
        return Err(Unresolved {
            reason: "BackendNotFound",
            message: format!("backendRef {namespace}/{}: no such Service", r.name),
        });
    };
    let Some(port) = r.port else {
        return Err(Unresolved {
            reason: "UnsupportedValue",
            message: format!("backendRef {namespace}/{}: a Service backendRef needs a port", r.name),
        });
    };
    if !service.spec.ports.iter().any(|p| p.port == port) {
        return Err(Unresolved {
            reason: "BackendNotFound",
            message: format!("backendRef {namespace}/{}: the Service has no port {port}", r.name),
        });
    }
    Ok(Backend { namespace, service: r.name.clone(), port })
}

/// The Cluster and ClusterLoadAssignment of each backend the translation uses, named after
/// the Service document; what each says of its EndpointSlices (`endpoints`), by backend.
pub fn emit(
    world: &World,
    frame: &crate::gateway::Frame,
    tls: &Policies,
    out: &mut TranslateResponse,
) -> BTreeMap<Backend, Vec<Diagnostic>> {
    let mut said = BTreeMap::new();
    for b in frame.uses.keys() {
        let Some(usage) = frame.usage(b) else { continue };
        let (resources, diagnostics) = emit_one(world, b, &usage, tls);
        out.resources.extend(resources);
        if !diagnostics.is_empty() {
            said.insert(b.clone(), diagnostics);
        }
    }
    said
}

/// The Cluster and ClusterLoadAssignment of one backend, for the node groups of the Gateways
/// whose routes use it; and what its EndpointSlices say.
pub fn emit_one(world: &World, b: &Backend, usage: &Usage, tls: &Policies) -> ([XdsResource; 2], Vec<Diagnostic>) {
    let key = (b.namespace.clone(), b.service.clone());
    let service = &world.services[&key];
    let port = service.spec.ports.iter().find(|p| p.port == b.port).expect("resolved backends have the port");
    let name = b.cluster();
    let mut cluster = EdsCluster::new(name.as_str()).connect_timeout(Duration::from_secs(2));
    let h2 = usage.grpc || port.app_protocol.as_deref() == Some("kubernetes.io/h2c");
    if h2 {
        cluster = cluster.http2();
    }
    let mut cluster = cluster.build();
    let policy = tls.for_port(&b.namespace, &b.service, port.name.as_deref());
    if let Some(Outcome::Tls(upstream)) = policy {
        let client = usage.client_certificate.as_ref();
        cluster.transport_socket = Some(crate::backend_tls::transport_socket(upstream, h2, client));
    }
    let cluster = resource(&cluster, Some(service.id.clone())).for_node_groups(&usage.groups);

    // A port whose BackendTLSPolicy cannot be applied gets no endpoints: never plaintext.
    let mut diagnostics = Vec::new();
    let endpoints = match policy {
        Some(Outcome::Unusable) => Vec::new(),
        _ => endpoints(world, b, Some(&mut diagnostics)),
    };
    let mut cla = LoadAssignment::new(name.as_str());
    if !endpoints.is_empty() {
        cla = cla.locality(
            Locality::new("", "", "").endpoints(endpoints.into_iter().map(|(ip, port)| Endpoint::new(ip, port))),
        );
    }
    let cla = resource(&cla.build(), Some(service.id.clone())).for_node_groups(&usage.groups);
    ([cluster, cla], diagnostics)
}

/// The ready endpoints (address, port) of a Service port, from its EndpointSlices. A slice
/// that cannot serve is said in `diagnostics`, when given.
pub fn endpoints(world: &World, b: &Backend, mut diagnostics: Option<&mut Vec<Diagnostic>>) -> Vec<(String, u16)> {
    let key = (b.namespace.clone(), b.service.clone());
    let Some(service) = world.services.get(&key) else { return Vec::new() };
    let Some(port) = service.spec.ports.iter().find(|p| p.port == b.port) else { return Vec::new() };
    let mut endpoints = Vec::new();
    for slice in world.slices.get(&key).into_iter().flatten() {
        // An FQDN slice names hosts, not endpoints (Envoy takes only IPs for EDS): it is
        // left out, saying so, and the Service's other slices serve.
        if !matches!(slice.spec.address_type.as_deref(), None | Some("IPv4" | "IPv6")) {
            if let Some(d) = diagnostics.as_deref_mut() {
                d.push(Diagnostic {
                    severity: Severity::Warning,
                    message: format!(
                        "addressType {:?}: only IPv4 and IPv6 slices are endpoints; this one is not used",
                        slice.spec.address_type.as_deref().unwrap_or("")
                    ),
                    document: Some(slice.id.clone()),
                    field: Some("addressType".into()),
                });
            }
            continue;
        }
        let Some(target) = slice
            .spec
            .ports
            .iter()
            .find(|p| p.name.as_deref().unwrap_or("") == port.name.as_deref().unwrap_or(""))
            .and_then(|p| p.port)
        else {
            continue;
        };
        for e in &slice.spec.endpoints {
            if e.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            // Kubernetes checks each address against the slice's type; files are not checked.
            for address in e.addresses.iter().filter(|a| a.parse::<std::net::IpAddr>().is_ok()) {
                endpoints.push((address.clone(), target));
            }
        }
    }
    endpoints.sort();
    endpoints.dedup();
    endpoints
}

/// A cluster named `name` that splits traffic between `shares` (a backend, or none for a
/// backendRef that does not resolve, and its weight) by locality weights: one locality per
/// share. For proxies that take one cluster only (Envoy's UDP proxy). A share that does not
/// resolve is a locality without endpoints, which Envoy leaves out.
pub fn emit_split(
    world: &World,
    name: &str,
    shares: &[(Option<Backend>, u32)],
    owner: &str,
    out: &mut Vec<XdsResource>,
) {
    let cluster = EdsCluster::new(name).connect_timeout(Duration::from_secs(2)).locality_weighted().build();
    out.push(resource(&cluster, Some(owner.to_owned())));
    let mut cla = LoadAssignment::new(name);
    for (i, (backend, weight)) in shares.iter().enumerate().filter(|(_, (_, w))| *w > 0) {
        let found = backend.as_ref().map(|b| endpoints(world, b, None)).unwrap_or_default();
        let zone = backend.as_ref().map(Backend::cluster).unwrap_or_else(|| format!("unresolved-{i}"));
        cla = cla.locality(
            Locality::new("", zone, "")
                .weight(*weight)
                .endpoints(found.into_iter().map(|(ip, port)| Endpoint::new(ip, port))),
        );
    }
    out.push(resource(&cla.build(), Some(owner.to_owned())));
}

/// A cluster with no endpoints, named `name`: where the share of a backendRef that does not
/// resolve goes on a TCP or TLS route, so its connections are closed.
pub fn emit_empty(name: &str, owner: &str, out: &mut Vec<XdsResource>) {
    let cluster = EdsCluster::new(name).connect_timeout(Duration::from_secs(2)).build();
    out.push(resource(&cluster, Some(owner.to_owned())));
    out.push(resource(&LoadAssignment::new(name).build(), Some(owner.to_owned())));
}

//! Gateways and their listeners, routes attached to them, and the Envoy Listener and
//! RouteConfiguration of each Gateway port.
//!
//! A Gateway of ours (its class is named in the configuration, or is a GatewayClass with our
//! controllerName) gets one Envoy Listener per port, named `<namespace>/<gateway>/<port>`, with
//! a RouteConfiguration of the same name. Its Gateway listeners on that port become virtual
//! hosts by hostname, each with the rules of the routes attached to it. A request's host picks
//! the most specific Gateway listener that matches it (listener isolation): a virtual host
//! holds the rules of its own listener's routes only.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use xdst_guest::build::HttpListener;
use xdst_guest::{TranslateResponse, resource, resource_named};

use crate::backends::Backend;
use crate::config::{Config, Nodes};
use crate::hostnames;
use crate::http;
use crate::listener_sets::Expanded;
use crate::model::{GatewaySpec, Listener, ObjectRef};
use crate::status::{Condition, GatewayStatus, ListenerStatus, ParentStatus, Statuses};
use crate::world::{Doc, GATEWAY_GROUP, Key, RouteKey, World};

/// Who uses a backend: a Gateway (by its place oldest first) and the resource of it that
/// does, a RouteConfiguration and virtual host (domain), or an L4 listener (domain empty).
pub type Source = (usize, String, String);

/// How a backend is used, from all its sources: whether a gRPC route sends to it, the node
/// groups of the Gateways that use it, and the client certificate (a Secret) it is presented:
/// the oldest Gateway's that names one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Usage {
    pub grpc: bool,
    pub groups: BTreeSet<String>,
    pub client_certificate: Option<Key>,
}

/// A Gateway of ours as its resources need it: its node groups and the client certificate
/// it presents to backends, by its place oldest first.
#[derive(Debug, Clone)]
pub struct GatewayInfo {
    pub groups: Vec<String>,
    pub client_certificate: Option<Key>,
}

/// The routes attached to each Gateway listener, with the hostnames of each attachment, in the
/// order they attached (by route, then parentRef).
pub type ByListener = BTreeMap<(Key, usize), BTreeMap<RouteKey, Vec<Vec<String>>>>;

/// What a translation leaves for a changes call to patch (contract 0.4.0, `incremental.rs`):
/// where each route attached, each HTTP port's virtual hosts, and who uses each backend.
#[derive(Debug, Default)]
pub struct Frame {
    pub by_listener: ByListener,
    /// Each route's attachments: Gateway, listener and hostnames.
    pub of_route: BTreeMap<RouteKey, Vec<(Key, usize, Vec<String>)>>,
    /// Where each Gateway listener's status is: its document (the Gateway or a ListenerSet)
    /// and its place in that document's listeners.
    pub listener_status_at: BTreeMap<(Key, usize), (String, usize)>,
    /// The HTTP and HTTPS ports programmed, by Gateway and port.
    pub ports: BTreeMap<(Key, u16), HttpPort>,
    /// The port each programmed HTTP listener is on.
    pub port_of: BTreeMap<(Key, usize), u16>,
    pub gateways: Vec<GatewayInfo>,
    pub uses: Uses,
}

/// Who uses each backend, and whether as gRPC.
pub type Uses = BTreeMap<Backend, BTreeMap<Source, bool>>;

/// Records what `source` uses now, replacing what it used `before`.
pub fn set_uses(uses: &mut Uses, source: &Source, before: &BTreeMap<Backend, bool>, now: &BTreeMap<Backend, bool>) {
    for b in before.keys() {
        if let Some(s) = uses.get_mut(b) {
            s.remove(source);
            if s.is_empty() {
                uses.remove(b);
            }
        }
    }
    for (b, grpc) in now {
        uses.entry(b.clone()).or_default().insert(source.clone(), *grpc);
    }
}

impl Frame {
    /// How `b` is used now; none when nothing uses it.
    pub fn usage(&self, b: &Backend) -> Option<Usage> {
        let sources = self.uses.get(b).filter(|s| !s.is_empty())?;
        let mut usage = Usage::default();
        for ((rank, _, _), grpc) in sources {
            let g = &self.gateways[*rank];
            usage.grpc |= grpc;
            usage.groups.extend(g.groups.iter().cloned());
            if usage.client_certificate.is_none() {
                usage.client_certificate.clone_from(&g.client_certificate);
            }
        }
        Some(usage)
    }
}

/// An HTTP or HTTPS Gateway port: its RouteConfigurations (one, or one per listener's filter
/// chain with HTTPS), by virtual host.
#[derive(Debug)]
pub struct HttpPort {
    pub gateway: Key,
    pub gateway_id: String,
    pub rank: usize,
    pub groups: Vec<String>,
    /// The Listener's name, `<namespace>/<gateway>/<port>`.
    pub name: String,
    pub https: bool,
    /// The Gateway listeners programmed here: index, hostname (`*` for none, lower case),
    /// name; and the port they share.
    pub listeners: Vec<(usize, String, String)>,
    pub port: u16,
    /// Every domain a virtual host is made for: each listener's hostname and each attached
    /// route's hostnames, with how many of them name it.
    pub domains: BTreeMap<String, u32>,
    /// Each RouteConfiguration's virtual hosts, by (configuration, domain).
    pub vhosts: BTreeMap<(String, String), crate::vhosts::Vhost>,
    /// Whether requests are routed by host over scoped RDS ([`crate::vhosts::scoped`]).
    pub scoped: bool,
    /// Whether the Gateway pins the port to routing by host ([`crate::model::ROUTE_BY_HOST`]).
    pub by_host: bool,
}

impl HttpPort {
    /// The RouteConfigurations: name, and the listener whose own chain it is (HTTPS).
    pub fn configs(&self) -> Vec<(String, Option<usize>)> {
        if self.https {
            self.listeners.iter().map(|(i, _, name)| (format!("{}/{name}", self.name), Some(*i))).collect()
        } else {
            vec![(self.name.clone(), None)]
        }
    }

    /// The listener a request for `domain` reaches: the most specific one covering it.
    pub fn owner(&self, domain: &str) -> Option<usize> {
        self.listeners
            .iter()
            .filter(|(_, host, _)| hostnames::covers(host, domain))
            .max_by_key(|(_, host, _)| hostnames::specificity(host))
            .map(|(i, _, _)| *i)
    }
}

/// A route attached to one Gateway listener, with the hostnames it serves there.
pub struct Attachment {
    pub route: RouteKey,
    pub gateway: Key,
    pub listener: usize,
    pub hostnames: Vec<String>,
}

/// The Gateway listeners programmed on a port, each with the Secrets of its certificates.
type Programmed = Vec<(usize, Vec<Key>)>;

/// Whether `gateway` is ours to program.
fn ours(world: &World, config: &Config, gateway: &Doc<GatewaySpec>) -> bool {
    let class = &gateway.spec.gateway_class_name;
    config.gateway_class_names.iter().any(|c| c == class)
        || world.classes.get(class).is_some_and(|c| c.spec.controller_name == config.controller_name)
}

/// The Gateways of ours, by key.
pub fn ours_set<'a>(world: &'a World, config: &Config) -> BTreeSet<&'a Key> {
    world.gateways.iter().filter(|(_, g)| ours(world, config, g)).map(|(k, _)| k).collect()
}

/// The port Envoy binds for a Gateway listener's port.
fn envoy_port(config: &Config, port: u16) -> Option<u16> {
    u16::try_from(i32::from(port) + config.port_offset).ok().filter(|p| *p != 0)
}

/// Whether a listener takes routes of `kind` from `namespace`.
/// Whether a listener (declared in `owner`'s namespace: its Gateway's or ListenerSet's)
/// takes routes of `kind` from `namespace`.
fn allows(world: &World, owner: &str, listener: &Listener, kind: &str, namespace: &str) -> bool {
    if !route_kinds(listener).0.contains(&kind) {
        return false;
    }
    let from = listener.allowed_routes.as_ref().and_then(|a| a.namespaces.as_ref());
    crate::listener_sets::namespace_allowed(world, from, "Same", owner, namespace)
}

/// The listener protocols this plugin serves.
fn supported_protocol(listener: &Listener) -> bool {
    matches!(listener.protocol.as_str(), "HTTP" | "HTTPS" | "TCP" | "UDP" | "TLS")
}

/// The route kinds a listener of `protocol` can take.
fn kinds_of(protocol: &str) -> &'static [&'static str] {
    match protocol {
        "HTTP" | "HTTPS" => &["HTTPRoute", "GRPCRoute"],
        "TCP" => &["TCPRoute"],
        "UDP" => &["UDPRoute"],
        "TLS" => &["TLSRoute"],
        _ => &[],
    }
}

/// The route kinds a listener takes (`supportedKinds`): those of its protocol, narrowed to
/// `allowedRoutes.kinds` when it names some; and the kinds it names that its protocol cannot
/// take (`InvalidRouteKinds`), as `group/Kind`.
fn route_kinds(listener: &Listener) -> (Vec<&'static str>, Vec<String>) {
    let served = kinds_of(&listener.protocol);
    let Some(named) = listener.allowed_routes.as_ref().and_then(|a| a.kinds.as_ref()) else {
        return (served.to_vec(), Vec::new());
    };
    let mut supported = Vec::new();
    let mut invalid = Vec::new();
    for k in named {
        let group = k.group.as_deref().unwrap_or(GATEWAY_GROUP);
        match served.iter().find(|s| **s == k.kind && group == GATEWAY_GROUP) {
            Some(s) if !supported.contains(s) => supported.push(*s),
            Some(_) => {}
            None => invalid.push(format!("{group}/{}", k.kind)),
        }
    }
    (supported, invalid)
}

/// A GatewayClass of this controller is accepted, and every version of the API it is given is
/// one the plugin reads.
fn class_conditions() -> Vec<Condition> {
    vec![Condition::yes("Accepted", "Accepted"), Condition::yes("SupportedVersion", "SupportedVersion")]
}

/// The HTTP listener settings every Gateway port shares: websockets pass through (a Service
/// port's `appProtocol: kubernetes.io/ws` says its backend speaks them; HTTP/1.1 clusters carry
/// the upgrade), and the CORS filter serves the routes that have a policy. The Host header is
/// left as the client sent it: the backend must see `foo.com:8080` for a request to
/// `foo.com:8080` (the upstream suite checks it), so virtual hosts ignore the port in their
/// RouteConfiguration (`route_configuration`) instead of the connection manager stripping it.
pub fn http_listener(listener: HttpListener) -> HttpListener {
    listener.upgrade("websocket").http_filter(crate::cors::FILTER, xdst_guest::pack(&crate::extensions::Cors {}))
}

/// The Gateways of ours, each with the listeners of the ListenerSets it takes (their statuses
/// into `statuses`).
pub fn expanded<'a>(world: &'a World, config: &Config, statuses: &mut Statuses) -> BTreeMap<Key, Expanded<'a>> {
    let of_ours: BTreeMap<&Key, &Doc<GatewaySpec>> =
        world.gateways.iter().filter(|(_, g)| ours(world, config, g)).collect();
    crate::listener_sets::expand(world, config, &of_ours, statuses)
}

/// A route's status toward each parent of ours, attaching it (into `attachments`) to the
/// listeners that take it.
pub fn route_status(
    world: &World,
    gateways: &BTreeMap<Key, Expanded<'_>>,
    key: &RouteKey,
    route: &Doc<crate::model::HttpRouteSpec>,
    attachments: &mut Vec<Attachment>,
) -> Vec<ParentStatus> {
    let resolved = resolved_refs(world, key.0, route);
    let checked = crate::schema::route(&route.spec).and_then(|()| {
        route.spec.rules.iter().enumerate().try_for_each(|(i, r)| http::check(r, &format!("spec.rules[{i}]")))
    });
    let mut parents = Vec::new();
    for parent in &route.spec.parent_refs {
        let group = parent.group.as_deref().unwrap_or(GATEWAY_GROUP);
        let kind = parent.kind.as_deref().unwrap_or("Gateway");
        let namespace = parent.namespace.clone().unwrap_or_else(|| route.namespace.clone());
        let pkey = (namespace.clone(), parent.name.clone());
        // The Gateway of ours the parent is or belongs to; and the ListenerSet, if it is one.
        let (gkey, set) = match (group == GATEWAY_GROUP, kind) {
            (true, "Gateway") => (pkey, None),
            (true, "ListenerSet") => {
                let owner = gateways.iter().find(|(_, e)| e.origins.iter().any(|o| o.set.as_ref() == Some(&pkey)));
                let Some((gkey, _)) = owner else { continue };
                (gkey.clone(), Some(pkey))
            }
            // Not a Gateway of ours: its controller writes this parent's status.
            _ => continue,
        };
        let Some(gateway) = gateways.get(&gkey) else { continue };
        let parent_ref = parent_json(parent, &namespace);
        let accepted = match &checked {
            Err((reason, message)) => Condition::no("Accepted", reason, message.clone()),
            Ok(()) => attach(world, gateway, &gkey, set.as_ref(), key, route, parent, attachments),
        };
        parents.push(ParentStatus { parent_ref, conditions: vec![accepted, resolved.clone()] });
    }
    parents
}

/// Translates every Gateway and HTTPRoute; returns what a changes call patches (`Frame`),
/// the backends routes use among it. With `nodes: per-gateway`, each Gateway's resources name
/// its node group, `<namespace>/<name>` (contract 0.3.0: one translation serves every group).
pub fn translate(world: &World, config: &Config, out: &mut TranslateResponse, statuses: &mut Statuses) -> Frame {
    // Each Gateway with the listeners of the ListenerSets it takes.
    let gateways = expanded(world, config, statuses);
    for class in world.classes.values().filter(|c| c.spec.controller_name == config.controller_name) {
        statuses.classes.insert(class.id.clone(), class_conditions());
    }

    // Routes to listeners.
    let mut attachments: Vec<Attachment> = Vec::new();
    for (key, route) in &world.routes {
        let parents = route_status(world, &gateways, key, route, &mut attachments);
        if !parents.is_empty() {
            statuses.routes.insert(route.id.clone(), parents);
        }
    }
    let mut frame = Frame::default();
    for a in &attachments {
        let at = (a.gateway.clone(), a.listener);
        frame.by_listener.entry(at).or_default().entry(a.route.clone()).or_default().push(a.hostnames.clone());
        frame.of_route.entry(a.route.clone()).or_default().push((a.gateway.clone(), a.listener, a.hostnames.clone()));
    }

    // Per Gateway port: the Listener and its RouteConfigurations.
    // Each Secret a listener serves, with the node groups it is served to (none: all).
    let mut secrets_served: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
    // Two Gateways of one Envoy cannot bind one address and port (Envoy refuses the second
    // listener): those that may claim the shared address's ports first (the platform's, and
    // `sharedAddressNamespaces`), then the oldest, keep it; the other's listener is not accepted.
    let mut taken: BTreeMap<(String, u16), String> = BTreeMap::new();
    let claims = |g: &Doc<GatewaySpec>| config.may_claim_shared(&g.namespace, g.metadata.written_by_team());
    let mut oldest_first: Vec<(&Key, &Expanded<'_>)> = gateways.iter().collect();
    oldest_first.sort_by_key(|(k, e)| {
        (!claims(&e.gateway), e.gateway.metadata.creation_timestamp.clone().unwrap_or_default(), (*k).clone())
    });
    for (rank, (gkey, expanded)) in oldest_first.into_iter().enumerate() {
        let gateway = &expanded.gateway;
        // A team's Gateway not allowed the shared address, binding it (issue 49, item 2).
        let shared_refused = !claims(gateway)
            && address(config, gateway) == config.shared_address()
            && !config.addresses.contains_key(&format!("{}/{}", gateway.namespace, gateway.name));
        // The node groups its resources are for: none (every group), or its own.
        let groups: Vec<String> = match config.nodes {
            Nodes::All => Vec::new(),
            Nodes::PerGateway => vec![format!("{}/{}", gateway.namespace, gateway.name)],
        };
        let mut serve_secret = |key: Key| secrets_served.entry(key).or_default().extend(groups.iter().cloned());
        let bound_by = |port: u16| {
            let at = (address(config, gateway), envoy_port(config, port)?);
            taken.get(&at).filter(|owner| **owner != gateway.id).map(|owner| (at, owner.clone()))
        };
        // Per port: its protocol (the first listener's) and the listeners programmed on it,
        // with the Secrets of each.
        let mut ports: BTreeMap<u16, (&str, Programmed)> = BTreeMap::new();
        let mut listener_statuses = Vec::new();
        // The listeners of each ListenerSet attached, by set.
        let mut set_statuses: BTreeMap<&Key, GatewayStatus> = BTreeMap::new();
        // Client certificate validation, by listener; whether any lets invalid ones through.
        let mut validations: BTreeMap<usize, crate::tls::ClientValidation> = BTreeMap::new();
        let mut insecure = false;
        for (i, l) in gateway.spec.listeners.iter().enumerate() {
            let origin = &expanded.origins[i];
            let attached = attachments.iter().filter(|a| &a.gateway == gkey && a.listener == i).count() as u32;
            let (supported_kinds, invalid_kinds) = route_kinds(l);
            let not_accepted = |reason, message: String| {
                vec![
                    Condition::yes("ResolvedRefs", "ResolvedRefs"),
                    Condition::no("Accepted", reason, message),
                    Condition::no("Programmed", "Invalid", "the listener is not accepted"),
                ]
            };
            let port_protocol = ports.get(&l.port).map(|(p, _)| *p);
            let host = |l: &Listener| l.hostname.clone().unwrap_or_else(|| "*".into()).to_ascii_lowercase();
            let same_host = ports.get(&l.port).and_then(|(_, programmed)| {
                programmed.iter().find(|(j, _)| host(&gateway.spec.listeners[*j]) == host(l))
            });
            let from = if origin.set.is_some() { "ListenerSet" } else { "Gateway" };
            let certificates = match l.protocol.as_str() {
                "HTTPS" | "TLS" => crate::tls::certificates(world, (from, &origin.namespace), l).map(Some),
                _ => Ok(None),
            };
            let conflicted = |reason: &'static str, message: String| {
                vec![
                    Condition::yes("ResolvedRefs", "ResolvedRefs"),
                    Condition::no("Accepted", reason, message.clone()),
                    Condition::no("Programmed", reason, message),
                    Condition::yes("Conflicted", reason),
                ]
            };
            let conditions = if !supported_protocol(l) {
                not_accepted(
                    "UnsupportedProtocol",
                    format!("protocol {:?} is not supported (HTTP, HTTPS, TLS, TCP and UDP are)", l.protocol),
                )
            } else if envoy_port(config, l.port).is_none() {
                not_accepted("PortUnavailable", "the port with the configured offset is out of range".into())
            } else if shared_refused {
                not_accepted(
                    "PortUnavailable",
                    format!(
                        "{} is the shared address: a team's Gateway binds it only from a namespace of the plugin's \
                         sharedAddressNamespaces (give this Gateway an address of its own)",
                        config.shared_address()
                    ),
                )
            } else if let Some(((address, port), owner)) = bound_by(l.port) {
                not_accepted(
                    "PortUnavailable",
                    format!(
                        "{address}:{port} is taken by {owner} (the platform's Gateways claim first, then the oldest)"
                    ),
                )
            } else if port_protocol.is_some_and(|p| p != l.protocol) {
                conflicted(
                    "ProtocolConflict",
                    format!("port {} already serves {}", l.port, port_protocol.unwrap_or_default()),
                )
            } else if let Some((j, _)) = same_host {
                conflicted(
                    "HostnameConflict",
                    format!(
                        "listener {} already serves hostname {} on port {}",
                        expanded.origins[*j].name,
                        host(l),
                        l.port
                    ),
                )
            } else {
                match certificates {
                    Err(crate::tls::Refused::Accepted(c)) => {
                        vec![
                            Condition::yes("ResolvedRefs", "ResolvedRefs"),
                            c,
                            Condition::no("Programmed", "Invalid", "the listener is not accepted"),
                        ]
                    }
                    Err(crate::tls::Refused::ResolvedRefs(c)) => vec![
                        c,
                        Condition::yes("Accepted", "Accepted"),
                        Condition::no("Programmed", "Invalid", "the listener's certificates do not resolve"),
                    ],
                    Ok(secrets) => {
                        let validation = match l.protocol.as_str() {
                            "HTTPS" => crate::tls::client_validation(world, gateway, l),
                            _ => Ok(None),
                        };
                        match validation {
                            Err(conditions) => conditions,
                            Ok(validation) => {
                                insecure |= validation.as_ref().is_some_and(|v| v.insecure);
                                validations.extend(validation.map(|v| (i, v)));
                                ports
                                    .entry(l.port)
                                    .or_insert((l.protocol.as_str(), Vec::new()))
                                    .1
                                    .push((i, secrets.unwrap_or_default()));
                                vec![
                                    Condition::yes("ResolvedRefs", "ResolvedRefs"),
                                    Condition::yes("Accepted", "Accepted"),
                                    Condition::yes("Programmed", "Programmed"),
                                ]
                            }
                        }
                    }
                }
            };
            let mut conditions = conditions;
            if !invalid_kinds.is_empty() {
                // The kinds it can take are still served; the others are named.
                conditions.retain(|c| c.kind != "ResolvedRefs");
                conditions.insert(
                    0,
                    Condition::no(
                        "ResolvedRefs",
                        "InvalidRouteKinds",
                        format!(
                            "allowedRoutes.kinds names route kinds this listener cannot take: {}",
                            invalid_kinds.join(", ")
                        ),
                    ),
                );
            }
            let status =
                ListenerStatus { name: origin.name.clone(), attached_routes: attached, supported_kinds, conditions };
            let at = match &origin.set {
                None => {
                    listener_statuses.push(status);
                    (gateway.id.clone(), listener_statuses.len() - 1)
                }
                Some(set) => {
                    let list = &mut set_statuses.entry(set).or_default().listeners;
                    list.push(status);
                    (world.listener_sets[set].id.clone(), list.len() - 1)
                }
            };
            frame.listener_status_at.insert((gkey.clone(), i), at);
        }
        let mut conditions = gateway_conditions(expanded.original, &listener_statuses);
        let statics = static_addresses(config, expanded.original);
        if let Err(refused) = &statics {
            // Not served at an address it asks for: not served at all.
            for c in refused {
                conditions.retain(|have| have.kind != c.kind);
                conditions.push(c.clone());
            }
        }
        // The client certificate it presents to backends over TLS, if it names one.
        let client_certificate = match crate::tls::backend_client_certificate(world, expanded.original) {
            Ok(None) => None,
            Ok(Some(key)) => {
                conditions.push(Condition::yes("ResolvedRefs", "ResolvedRefs"));
                serve_secret(key.clone());
                Some(key)
            }
            Err(c) => {
                conditions.push(c);
                None
            }
        };
        if insecure {
            conditions.push(Condition {
                kind: "InsecureFrontendValidationMode",
                ok: true,
                reason: "ConfigurationChanged",
                message: "a listener lets client certificates that do not validate through (AllowInsecureFallback)"
                    .into(),
            });
        }
        if conditions.iter().any(|c| matches!(c.kind, "Accepted" | "Programmed") && !c.ok) {
            // Not accepted, or not programmed at its addresses: nothing of it is served.
            ports.clear();
        }
        frame.gateways.push(GatewayInfo { groups: groups.clone(), client_certificate: client_certificate.clone() });
        let mut attached_sets = 0;
        for (set, mut status) in set_statuses {
            status.conditions = crate::listener_sets::set_conditions(&status);
            attached_sets += u32::from(status.conditions.iter().any(|c| c.kind == "Accepted" && c.ok));
            statuses.listener_sets.insert(world.listener_sets[set].id.clone(), status);
        }
        statuses.gateways.insert(
            gateway.id.clone(),
            GatewayStatus {
                conditions,
                addresses: match statics {
                    Ok(statics) if !statics.is_empty() => statics,
                    _ => vec![address(config, gateway)],
                },
                listeners: listener_statuses,
                attached_listener_sets: Some(attached_sets),
            },
        );

        for (port, (protocol, programmed)) in ports {
            let name = format!("{}/{}/{}", gateway.namespace, gateway.name, port);
            let listeners: Vec<usize> = programmed.iter().map(|(i, _)| *i).collect();
            let envoy_port = envoy_port(config, port).expect("checked above");
            let address = address(config, gateway);
            taken.insert((address.clone(), envoy_port), gateway.id.clone());
            if !matches!(protocol, "HTTP" | "HTTPS") {
                let port = crate::l4::Port {
                    gateway,
                    gkey,
                    name: &name,
                    address: &address,
                    port: envoy_port,
                    protocol,
                    programmed: &programmed,
                };
                let l4 = crate::l4::listener(world, &port, &attachments);
                let used = l4.backends.iter().map(|b| (b.clone(), false)).collect();
                set_uses(&mut frame.uses, &(rank, name.clone(), String::new()), &BTreeMap::new(), &used);
                programmed.iter().flat_map(|(_, s)| s.iter().cloned()).for_each(&mut serve_secret);
                let listener = l4.listener.map(|l| resource(&l, Some(gateway.id.clone())));
                out.resources.extend(listener.into_iter().chain(l4.clusters).map(|r| r.for_node_groups(&groups)));
                continue;
            }
            let https = protocol == "HTTPS";
            let host = |i: usize| {
                gateway.spec.listeners[i].hostname.clone().unwrap_or_else(|| "*".into()).to_ascii_lowercase()
            };
            let mut here = HttpPort {
                gateway: gkey.clone(),
                gateway_id: gateway.id.clone(),
                rank,
                groups: groups.clone(),
                name: name.clone(),
                https,
                listeners: listeners.iter().map(|&i| (i, host(i), gateway.spec.listeners[i].name.clone())).collect(),
                port,
                domains: BTreeMap::new(),
                vhosts: BTreeMap::new(),
                scoped: false,
                by_host: !https && gateway.metadata.routes_by_host(),
            };
            // Every listener's own hostname is a virtual host, so a request for it never falls
            // through to a less specific listener, even with no route attached.
            for &i in &listeners {
                *here.domains.entry(host(i)).or_default() += 1;
                frame.port_of.insert((gkey.clone(), i), port);
                for attachments in frame.by_listener.get(&(gkey.clone(), i)).into_iter().flat_map(|m| m.values()) {
                    for h in attachments.iter().flatten() {
                        *here.domains.entry(h.clone()).or_default() += 1;
                    }
                }
            }
            crate::vhosts::make_all(world, &mut here, &frame.by_listener);
            here.scoped = crate::vhosts::scoped(&here, config.route_scopes_from);
            let listener = if https {
                // A chain per Gateway listener, each with its own routes: a request whose
                // host belongs to another listener of the port is misdirected (421).
                let mut chains = Vec::new();
                for (i, secrets) in &programmed {
                    chains.push(crate::tls::Chain {
                        name: format!("{name}/{}", gateway.spec.listeners[*i].name),
                        hostname: gateway.spec.listeners[*i].hostname.clone(),
                        secrets: secrets.clone(),
                        validation: validations.get(i).cloned(),
                    });
                    secrets.iter().cloned().for_each(&mut serve_secret);
                }
                crate::tls::https_listener(&name, &address, envoy_port, &chains)
            } else {
                let plain = HttpListener::new(name.as_str(), envoy_port).address(address).route_config(name.as_str());
                http_listener(if here.scoped { plain.scoped_by_host(name.as_str()) } else { plain }).build()
            };
            out.resources.push(resource(&listener, Some(gateway.id.clone())).for_node_groups(&groups));
            if here.scoped {
                for domain in here.domains.keys() {
                    out.resources.extend(crate::vhosts::scope_parts(&here, domain).into_iter().flatten());
                }
            } else {
                for (config, only) in here.configs() {
                    out.resources.push(crate::vhosts::route_configuration(&here, &config, only));
                }
            }
            let vhost_uses: Vec<(Source, BTreeMap<Backend, bool>)> = here
                .vhosts
                .iter()
                .map(|((config, domain), v)| ((rank, config.clone(), domain.clone()), v.backends.clone()))
                .collect();
            for (source, used) in vhost_uses {
                set_uses(&mut frame.uses, &source, &BTreeMap::new(), &used);
            }
            frame.ports.insert((gkey.clone(), port), here);
        }
    }
    for (key, groups) in &secrets_served {
        for (secret, id) in crate::tls::secrets(world, [key]) {
            out.resources.push(resource_named(secret.name.clone(), &secret, Some(id)).for_node_groups(groups));
        }
    }

    frame
}

/// A Gateway's own `Accepted` and `Programmed`: not accepted when it names parameters (xdst
/// takes none, so they cannot be valid) or none of its listeners is accepted; accepted with the
/// reason `ListenersNotValid` when only some are.
fn gateway_conditions(gateway: &Doc<GatewaySpec>, listeners: &[ListenerStatus]) -> Vec<Condition> {
    let not_programmed =
        |why: &str| Condition::no("Programmed", "Invalid", format!("the Gateway is not accepted: {why}"));
    if let Some(p) = gateway.spec.infrastructure.as_ref().and_then(|i| i.parameters_ref.as_ref()) {
        let why = format!("spec.infrastructure.parametersRef names {p}; xdst takes no implementation parameters");
        return vec![Condition::no("Accepted", "InvalidParameters", why.clone()), not_programmed(&why)];
    }
    let accepted = |l: &&ListenerStatus| l.conditions.iter().any(|c| c.kind == "Accepted" && c.ok);
    let invalid: Vec<&str> = listeners.iter().filter(|l| !accepted(l)).map(|l| l.name.as_str()).collect();
    if !listeners.is_empty() && invalid.len() == listeners.len() {
        let why = "no listener is accepted".to_owned();
        return vec![Condition::no("Accepted", "ListenersNotValid", why.clone()), not_programmed(&why)];
    }
    let mut accepted = Condition::yes("Accepted", "Accepted");
    if !invalid.is_empty() {
        accepted.reason = "ListenersNotValid";
        accepted.message = format!("listeners not accepted: {}", invalid.join(", "));
    }
    vec![accepted, Condition::yes("Programmed", "Programmed")]
}

/// `ResolvedRefs`: whether every backendRef of the route (mirrors included) resolves; the
/// first that does not gives the reason.
fn resolved_refs(world: &World, kind: &str, route: &Doc<crate::model::HttpRouteSpec>) -> Condition {
    let refs = route.spec.rules.iter().flat_map(|rule| {
        let mirrors = rule.filters.iter().filter_map(|f| f.request_mirror.as_ref().map(|m| &m.backend_ref));
        rule.backend_refs.iter().chain(mirrors)
    });
    for r in refs {
        if let Err(u) = crate::backends::resolve(world, kind, &route.namespace, r) {
            return Condition::no("ResolvedRefs", u.reason, u.message);
        }
    }
    Condition::yes("ResolvedRefs", "ResolvedRefs")
}

/// The parentRef with its defaults, as status reports it.
fn parent_json(parent: &ObjectRef, namespace: &str) -> serde_json::Value {
    let mut v = json!({
        "group": parent.group.as_deref().unwrap_or(GATEWAY_GROUP),
        "kind": parent.kind.as_deref().unwrap_or("Gateway"),
        "namespace": namespace,
        "name": parent.name,
    });
    if let Some(s) = &parent.section_name {
        v["sectionName"] = json!(s);
    }
    if let Some(p) = parent.port {
        v["port"] = json!(p);
    }
    v
}

/// Attaches `route` to the listeners of `gateway` its parentRef selects; returns the
/// `Accepted` condition.
#[allow(clippy::too_many_arguments, reason = "one call site; the parts of one attachment")]
fn attach(
    world: &World,
    expanded: &Expanded<'_>,
    gkey: &Key,
    set: Option<&Key>,
    rkey: &RouteKey,
    route: &Doc<crate::model::HttpRouteSpec>,
    parent: &ObjectRef,
    attachments: &mut Vec<Attachment>,
) -> Condition {
    // A parentRef to a Gateway reaches its own listeners; to a ListenerSet, that set's.
    let origins = &expanded.origins;
    let candidates: Vec<(usize, &Listener)> = expanded
        .gateway
        .spec
        .listeners
        .iter()
        .enumerate()
        .filter(|(i, _)| origins[*i].set.as_ref() == set)
        .filter(|(i, _)| parent.section_name.as_ref().is_none_or(|s| *s == origins[*i].name))
        .filter(|(_, l)| parent.port.is_none_or(|p| p == l.port))
        .filter(|(_, l)| supported_protocol(l))
        .collect();
    if candidates.is_empty() {
        return Condition::no("Accepted", "NoMatchingParent", "no listener of the Gateway matches the parentRef");
    }
    let allowed: Vec<(usize, &Listener)> = candidates
        .into_iter()
        .filter(|(i, l)| allows(world, &origins[*i].namespace, l, rkey.0, &route.namespace))
        .collect();
    if allowed.is_empty() {
        return Condition::no(
            "Accepted",
            "NotAllowedByListeners",
            "no listener of the Gateway allows routes from this namespace",
        );
    }
    // A Gateway that routes by exact host takes on its plain HTTP listeners only routes whose
    // hostnames there are exact: one that is not would change the port's form for everyone.
    let by_host = expanded.original.metadata.routes_by_host();
    let mut any = false;
    let mut not_exact = None;
    for (i, l) in allowed {
        let hostnames = hostnames::effective(l.hostname.as_deref(), &route.spec.hostnames);
        if hostnames.is_empty() {
            continue;
        }
        if by_host
            && l.protocol == "HTTP"
            && let Some(h) = hostnames.iter().find(|h| h.contains('*'))
        {
            not_exact.get_or_insert_with(|| (origins[i].name.clone(), h.clone()));
            continue;
        }
        any = true;
        attachments.push(Attachment { route: rkey.clone(), gateway: gkey.clone(), listener: i, hostnames });
    }
    if any {
        Condition::yes("Accepted", "Accepted")
    } else if let Some((listener, host)) = not_exact {
        Condition::no("Accepted", "UnsupportedValue", not_exact_message(gkey, &listener, &host))
    } else {
        Condition::no("Accepted", "NoMatchingListenerHostname", "no listener hostname intersects the route's hostnames")
    }
}

/// Why a route is not accepted on a listener of a Gateway that routes by exact host.
fn not_exact_message(gateway: &Key, listener: &str, host: &str) -> String {
    let what = if host == "*" {
        "the route names no hostname there, so it would match every host".to_owned()
    } else {
        format!("the route's hostname there is {host:?}, a wildcard")
    };
    format!(
        "listener {listener:?} of Gateway {}/{} routes by exact host (annotation {}: \"true\"): {what}; \
         give the route exact hostnames",
        gateway.0,
        gateway.1,
        crate::model::ROUTE_BY_HOST
    )
}

/// A Gateway's static addresses (`spec.addresses` with a value): the IP addresses it asks to
/// be served at; `Err` with its conditions when one is of a type xdst does not serve
/// (`UnsupportedAddress`: only `IPAddress` is, an Envoy binds IPs) or not one the Envoys can
/// bind (`AddressNotUsable`, per the configuration's `usableAddresses`).
fn static_addresses(config: &Config, gateway: &Doc<GatewaySpec>) -> Result<Vec<String>, Vec<Condition>> {
    let mut out = Vec::new();
    for (i, a) in gateway.spec.addresses.iter().enumerate().filter(|(_, a)| !a.value.is_empty()) {
        let kind = a.kind.as_deref().unwrap_or("IPAddress");
        if kind != "IPAddress" || a.value.parse::<std::net::IpAddr>().is_err() {
            let why = format!("spec.addresses[{i}]: {kind} {:?} is not an IP address an Envoy can bind", a.value);
            return Err(vec![
                Condition::no("Accepted", "UnsupportedAddress", why.clone()),
                Condition::no("Programmed", "Invalid", why),
            ]);
        }
        if !config.usable_addresses.is_empty() && !config.usable_addresses.contains(&a.value) {
            let why =
                format!("spec.addresses[{i}]: {} is not an address the Envoys can bind (usableAddresses)", a.value);
            return Err(vec![Condition::no("Programmed", "AddressNotUsable", why)]);
        }
        out.push(a.value.clone());
    }
    Ok(out)
}

/// The address a Gateway's Envoy listeners bind: its first static address, else the one the
/// configuration gives it.
fn address(config: &Config, gateway: &Doc<GatewaySpec>) -> String {
    if let Ok(statics) = static_addresses(config, gateway)
        && let Some(a) = statics.first()
    {
        return a.clone();
    }
    if let Some(a) = config.addresses.get(&format!("{}/{}", gateway.namespace, gateway.name)) {
        return a.clone();
    }
    // An address with a type and no value (`GatewayAddressEmpty`) asks for one to be assigned:
    // the shared one.
    if config.address == "fromSpec"
        && let Some(a) = gateway.spec.addresses.iter().find(|a| a.value.parse::<std::net::IpAddr>().is_ok())
    {
        return a.value.clone();
    }
    if config.address == "fromSpec" { "0.0.0.0".to_owned() } else { config.address.clone() }
}

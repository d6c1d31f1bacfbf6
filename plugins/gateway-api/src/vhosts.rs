//! The virtual hosts of an HTTP Gateway port's RouteConfiguration, each made and encoded on
//! its own, so that a change to one route re-makes only the virtual hosts that route is in
//! (contract 0.4.0) and the configuration is the encoded hosts put together.
//!
//! A RouteConfiguration is `name` (field 1), `virtual_hosts` (field 2, repeated) and
//! `ignore_port_in_host_matching`: its encoding is the encoding of the name, each virtual
//! host's field in turn, then the rest, exactly what encoding the whole message gives (a test
//! holds it to that). Both a full translation and a changes call build configurations this way,
//! so they are the same bytes.

use std::collections::{BTreeMap, BTreeSet};

use xdst_guest::envoy::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteConfiguration, RouteMatch, VirtualHost, route, route_match,
};
use xdst_guest::prost::Message;
use xdst_guest::prost::encoding::{WireType, encode_key, encode_varint};
use xdst_guest::{Body, XdsResource, resource_named};

use crate::backends::Backend;
use crate::gateway::{ByListener, HttpPort};
use crate::hostnames;
use crate::http::{self, Owner};
use crate::world::{RouteKey, World};

/// Where an Envoy route sits in its virtual host: its precedence, then where the full
/// translation would have made it (route, attachment, place in its rule's output), which is
/// what a stable sort by precedence keeps.
type SortKey = (http::Precedence, RouteKey, usize, usize);

/// One virtual host, encoded as a RouteConfiguration's field, and the backends its rules use
/// (whether a gRPC route does). Each route's Envoy routes are kept encoded by their place, so
/// a change to one route makes that route's again and puts the host together.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vhost {
    pub chunk: Vec<u8>,
    pub backends: BTreeMap<Backend, bool>,
    /// A host that answers 421 only (another listener's chain): no routes of its own.
    misdirected: bool,
    /// Each Envoy route as a VirtualHost's `routes` field, in order.
    routes: BTreeMap<SortKey, Vec<u8>>,
    /// What each HTTPRoute put here: its places, and its backends.
    of_route: BTreeMap<RouteKey, (Vec<SortKey>, BTreeMap<Backend, bool>)>,
    /// How many routes use each backend, and how many of them as gRPC.
    counts: BTreeMap<Backend, (u32, u32)>,
}

/// `message` as field `tag` of its parent.
fn field(tag: u32, message: &impl Message) -> Vec<u8> {
    let len = message.encoded_len();
    let mut out = Vec::with_capacity(len + 6);
    encode_key(tag, WireType::LengthDelimited, &mut out);
    encode_varint(len as u64, &mut out);
    message.encode_raw(&mut out);
    out
}

/// `host` as a RouteConfiguration's `virtual_hosts` field.
fn chunk(host: &VirtualHost) -> Vec<u8> {
    field(2, host)
}

/// A virtual host that answers every request 421 Misdirected Request: the connection's server
/// name picked another listener than the request's host.
fn misdirected_host(domain: &str) -> Vhost {
    let host = VirtualHost {
        name: domain.to_owned(),
        domains: vec![domain.to_owned()],
        routes: vec![misdirected()],
        ..Default::default()
    };
    Vhost { chunk: chunk(&host), misdirected: true, ..Vhost::default() }
}

/// A route answering 421 Misdirected Request.
fn misdirected() -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(route::Action::DirectResponse(DirectResponseAction { status: 421, body: None })),
        ..Default::default()
    }
}

impl Vhost {
    /// Takes out what `key` put here.
    fn forget(&mut self, key: &RouteKey) {
        let Some((places, backends)) = self.of_route.remove(key) else { return };
        for p in places {
            self.routes.remove(&p);
        }
        for (b, grpc) in backends {
            if let Some((n, g)) = self.counts.get_mut(&b) {
                *n -= 1;
                *g -= u32::from(grpc);
                if *n == 0 {
                    self.counts.remove(&b);
                }
            }
        }
    }

    /// Puts in the Envoy routes of `key`, attached here with `attachments` (the hostnames of
    /// each of its attachments to the listener that owns `domain`).
    fn learn(&mut self, world: &World, port: &HttpPort, domain: &str, key: &RouteKey, attachments: &[Vec<String>]) {
        let route = &world.routes[key];
        let who = Owner {
            kind: key.0,
            namespace: &route.namespace,
            name: &route.name,
            created: route.metadata.creation_timestamp.as_deref().unwrap_or(""),
        };
        let mut places = Vec::new();
        let mut backends: BTreeMap<Backend, bool> = BTreeMap::new();
        for (a, hostnames) in attachments.iter().enumerate() {
            let Some(host) =
                hostnames.iter().filter(|h| hostnames::covers(h, domain)).max_by_key(|h| hostnames::specificity(h))
            else {
                continue;
            };
            for (i, rule) in route.spec.rules.iter().enumerate() {
                let r = http::rule(world, &who, i, rule, hostnames::specificity(host), port.port, port.https);
                for (n, (precedence, envoy)) in r.routes.into_iter().enumerate() {
                    let place = (precedence, key.clone(), a, n);
                    self.routes.insert(place.clone(), field(3, &envoy));
                    places.push(place);
                }
                for (b, grpc) in r.backends {
                    *backends.entry(b).or_insert(false) |= grpc;
                }
            }
        }
        if places.is_empty() && backends.is_empty() {
            return;
        }
        for (b, grpc) in &backends {
            let (n, g) = self.counts.entry(b.clone()).or_default();
            *n += 1;
            *g += u32::from(*grpc);
        }
        self.of_route.insert(key.clone(), (places, backends));
    }

    /// Puts the host together from its routes.
    fn assemble(&mut self, domain: &str) {
        let head = VirtualHost { name: domain.to_owned(), domains: vec![domain.to_owned()], ..Default::default() };
        let len = head.encoded_len() + self.routes.values().map(Vec::len).sum::<usize>();
        let mut out = Vec::with_capacity(len + 6);
        encode_key(2, WireType::LengthDelimited, &mut out);
        encode_varint(len as u64, &mut out);
        head.encode_raw(&mut out);
        for r in self.routes.values() {
            out.extend_from_slice(r);
        }
        self.chunk = out;
        self.backends = self.counts.iter().map(|(b, (_, g))| (b.clone(), *g > 0)).collect();
    }
}

/// The virtual host for `domain` in the configuration of `port` that `only` names (the filter
/// chain of that listener, HTTPS; none: the port's one configuration). None when no listener
/// of the port covers the domain. A request's host reaches the most specific listener covering
/// it (listener isolation): the virtual host holds that listener's routes only, and in another
/// listener's chain it is misdirected. With `before` and `changed`, the routes not in
/// `changed` are taken from `before` as they were.
pub fn virtual_host(
    world: &World,
    port: &HttpPort,
    only: Option<usize>,
    domain: &str,
    attached: &ByListener,
    before: Option<Vhost>,
    changed: Option<&BTreeSet<RouteKey>>,
) -> Option<Vhost> {
    let owner = port.owner(domain)?;
    if only.is_some_and(|i| i != owner) {
        return Some(misdirected_host(domain));
    }
    let here = attached.get(&(port.gateway.clone(), owner));
    let mut v = match (before, changed) {
        (Some(mut v), Some(changed)) if !v.misdirected => {
            for key in changed {
                v.forget(key);
                if let Some(attachments) = here.and_then(|m| m.get(key)) {
                    v.learn(world, port, domain, key, attachments);
                }
            }
            v
        }
        _ => {
            let mut v = Vhost::default();
            for (key, attachments) in here.into_iter().flatten().filter(|(_, a)| reaches(a, domain)) {
                v.learn(world, port, domain, key, attachments);
            }
            v
        }
    };
    v.assemble(domain);
    Some(v)
}

/// Whether a route attached with `attachments` has a hostname covering `domain`.
fn reaches(attachments: &[Vec<String>], domain: &str) -> bool {
    attachments.iter().flatten().any(|h| hostnames::covers(h, domain))
}

/// Makes every virtual host of `port` (a full translation). Each listener's routes are looked
/// up by hostname, so a host is made from the routes whose hostnames cover it, not by asking
/// every route of the listener for every host.
pub fn make_all(world: &World, port: &mut HttpPort, attached: &ByListener) {
    let mut by_host: BTreeMap<usize, BTreeMap<&str, BTreeSet<&RouteKey>>> = BTreeMap::new();
    for (i, _, _) in &port.listeners {
        let index = by_host.entry(*i).or_default();
        for (key, attachments) in attached.get(&(port.gateway.clone(), *i)).into_iter().flatten() {
            for h in attachments.iter().flatten() {
                index.entry(h.as_str()).or_default().insert(key);
            }
        }
    }
    let mut vhosts = BTreeMap::new();
    for (config, only) in port.configs() {
        for domain in port.domains.keys() {
            let Some(owner) = port.owner(domain) else { continue };
            let v = if only.is_some_and(|i| i != owner) {
                misdirected_host(domain)
            } else {
                let keys: BTreeSet<&RouteKey> = by_host[&owner]
                    .iter()
                    .filter(|(h, _)| hostnames::covers(h, domain))
                    .flat_map(|(_, keys)| keys.iter().copied())
                    .collect();
                let mut v = Vhost::default();
                if let Some(here) = attached.get(&(port.gateway.clone(), owner)) {
                    for key in keys {
                        v.learn(world, port, domain, key, &here[key]);
                    }
                }
                v.assemble(domain);
                v
            };
            vhosts.insert((config.clone(), domain.clone()), v);
        }
    }
    port.vhosts = vhosts;
}

/// The RouteConfiguration `config` of `port`, from its virtual hosts. A listener's own chain
/// (HTTPS) owns nothing outside its hostname: without a `*` virtual host, one is added that
/// answers 421. A listener's hostnames name no port, and a request's Host may carry one
/// (`foo.com:8080`): hosts match without it, and the header itself is left alone for the
/// backend.
pub fn route_configuration(port: &HttpPort, config: &str, only: Option<usize>) -> XdsResource {
    let head = RouteConfiguration { name: config.to_owned(), ..Default::default() };
    let tail = RouteConfiguration { ignore_port_in_host_matching: true, ..Default::default() };
    let hosts: Vec<&Vhost> =
        port.domains.keys().filter_map(|d| port.vhosts.get(&(config.to_owned(), d.clone()))).collect();
    let star = (only.is_some() && !port.vhosts.contains_key(&(config.to_owned(), "*".to_owned())))
        .then(|| misdirected_host("*"));
    let len = hosts.iter().chain(&star.as_ref()).map(|h| h.chunk.len()).sum::<usize>();
    let mut bytes = Vec::with_capacity(len + head.encoded_len() + tail.encoded_len());
    head.encode_raw(&mut bytes);
    for h in hosts.iter().copied().chain(&star) {
        bytes.extend_from_slice(&h.chunk);
    }
    tail.encode_raw(&mut bytes);
    let mut r = resource_named(config.to_owned(), &head, Some(port.gateway_id.clone()));
    r.body = Body::Proto(bytes);
    r.for_node_groups(&port.groups)
}

/// Whether `port` routes each request by its host over scoped RDS (design 021): plain HTTP
/// (an HTTPS listener's chain answers 421 for the hosts of others, which a scope cannot say),
/// pinned by its Gateway ([`HttpPort::by_host`]) or with at least `from` hostnames (`from` >
/// 0), and every hostname exact but those whose virtual host has no routes (a request for a
/// host without a scope gets 404, as it gets from an empty virtual host).
pub fn scoped(port: &HttpPort, from: u32) -> bool {
    let exact = |d: &str| !d.contains('*');
    let enough = port.by_host || (from > 0 && port.domains.keys().filter(|d| exact(d)).count() >= from as usize);
    enough && !port.https && port.vhosts.iter().all(|((_, d), v)| exact(d) || (v.routes.is_empty() && !v.misdirected))
}

/// The name of the RouteConfiguration, and of the routing scope, of `domain` on a scoped port.
pub fn scope_name(port: &HttpPort, domain: &str) -> String {
    format!("{}/{domain}", port.name)
}

/// The RouteConfiguration of `domain` on a scoped port, and the routing scope that sends the
/// port's requests for `domain` to it. None for a hostname that has no virtual host or is not
/// exact (its virtual host is empty: see [`scoped`]).
pub fn scope_parts(port: &HttpPort, domain: &str) -> Option<[XdsResource; 2]> {
    use xdst_guest::build::{RoutingScope, SCOPE_HEADER};
    if domain.contains('*') {
        return None;
    }
    let host = port.vhosts.get(&(port.name.clone(), domain.to_owned()))?;
    let name = scope_name(port, domain);
    let head = RouteConfiguration { name: name.clone(), ..Default::default() };
    let tail = RouteConfiguration {
        ignore_port_in_host_matching: true,
        request_headers_to_remove: vec![SCOPE_HEADER.to_owned()],
        ..Default::default()
    };
    let mut bytes = Vec::with_capacity(head.encoded_len() + host.chunk.len() + tail.encoded_len());
    head.encode_raw(&mut bytes);
    bytes.extend_from_slice(&host.chunk);
    tail.encode_raw(&mut bytes);
    let mut routes = resource_named(name.clone(), &head, Some(port.gateway_id.clone()));
    routes.body = Body::Proto(bytes);
    let scope = RoutingScope {
        name: name.clone(),
        set: port.name.clone(),
        host: domain.to_owned(),
        route_configuration: name.clone(),
    }
    .build();
    let scope = resource_named(name, &scope, Some(port.gateway_id.clone()));
    Some([routes.for_node_groups(&port.groups), scope.for_node_groups(&port.groups)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration put together from encoded hosts is the whole message encoded.
    #[test]
    fn a_configuration_put_together_is_the_message_encoded() {
        let hosts: Vec<VirtualHost> = ["a.example", "*"]
            .iter()
            .map(|d| VirtualHost {
                name: (*d).into(),
                domains: vec![(*d).into()],
                routes: vec![misdirected()],
                ..Default::default()
            })
            .collect();
        let whole = RouteConfiguration {
            name: "infra/gw/80".into(),
            virtual_hosts: hosts.clone(),
            ignore_port_in_host_matching: true,
            ..Default::default()
        };
        let mut port = HttpPort {
            gateway: ("infra".into(), "gw".into()),
            gateway_id: "Gateway/infra/gw".into(),
            rank: 0,
            groups: vec![],
            name: "infra/gw/80".into(),
            https: false,
            listeners: vec![(0, "*".into(), "http".into())],
            port: 80,
            domains: BTreeMap::new(),
            vhosts: BTreeMap::new(),
            scoped: false,
            by_host: false,
        };
        for h in &hosts {
            port.domains.insert(h.name.clone(), 1);
            port.vhosts.insert(("infra/gw/80".into(), h.name.clone()), Vhost { chunk: chunk(h), ..Vhost::default() });
        }
        let r = route_configuration(&port, "infra/gw/80", None);
        let Body::Proto(bytes) = r.body else { panic!("a proto body") };
        // The domains in the port's (sorted) order: `*` first.
        let sorted = RouteConfiguration { virtual_hosts: vec![hosts[1].clone(), hosts[0].clone()], ..whole };
        assert_eq!(bytes, sorted.encode_to_vec());

        // Scoped by host: the `*` host has no routes, so one exact host is enough at 1; a
        // host's configuration is its one virtual host encoded, with the scope header removed,
        // and its scope keys (host, the port's scope set).
        assert!(scoped(&port, 1) && !scoped(&port, 2) && !scoped(&port, 0));
        assert!(scope_parts(&port, "*").is_none());
        let [routes, scope] = scope_parts(&port, "a.example").unwrap();
        assert_eq!(routes.name, "infra/gw/80/a.example");
        let Body::Proto(bytes) = routes.body else { panic!("a proto body") };
        let one = RouteConfiguration {
            name: "infra/gw/80/a.example".into(),
            virtual_hosts: vec![hosts[0].clone()],
            ignore_port_in_host_matching: true,
            request_headers_to_remove: vec![xdst_guest::build::SCOPE_HEADER.into()],
            ..Default::default()
        };
        assert_eq!(bytes, one.encode_to_vec());
        let Body::Proto(bytes) = scope.body else { panic!("a proto body") };
        let scope =
            xdst_guest::envoy::envoy::config::route::v3::ScopedRouteConfiguration::decode(bytes.as_slice()).unwrap();
        assert_eq!(scope.route_configuration_name, "infra/gw/80/a.example");
        let keys: Vec<String> = scope.key.unwrap().fragments.into_iter().map(|f| format!("{:?}", f.r#type)).collect();
        assert_eq!(keys, [r#"Some(StringKey("a.example"))"#, r#"Some(StringKey("infra/gw/80"))"#]);
        // A wildcard host with routes keeps the port whole.
        let star = port.vhosts.get_mut(&("infra/gw/80".to_owned(), "*".to_owned())).unwrap();
        star.routes.insert((http::Precedence::default(), ("HTTPRoute", "a".into(), "r".into()), 0, 0), vec![]);
        assert!(!scoped(&port, 1));
    }
}

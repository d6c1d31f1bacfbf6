//! Changes calls (contract 0.4.0, design 020): the plugin keeps the world it was given and what
//! it made of it, and a change re-makes what the change reaches.
//!
//! | what changed | what is made again |
//! |---|---|
//! | HTTPRoutes, GRPCRoutes | each route's status and attachments; the virtual hosts its hostnames (before and after) reach, in the RouteConfigurations of the ports it attaches to; `attachedRoutes` of its listeners; the clusters whose users changed |
//! | EndpointSlices | the ClusterLoadAssignments of their Services' ports that routes use |
//! | anything else (Gateways, ListenerSets, Services, ReferenceGrants, policies, Secrets, ...), or an EndpointSlice of a Service a TCP, UDP or TLS route sends to | everything, as a full call, answering only what differs |
//!
//! Every path builds resources with the same functions (a RouteConfiguration is its virtual
//! hosts put together, `vhosts.rs`), so what a changes call answers is byte for byte what a full
//! call would; `tests/incremental.rs` holds the plugin to it over random edits of every kind.

use std::collections::{BTreeMap, BTreeSet};

use xdst_guest::{
    Diagnostic, DocumentStatus, IntentDocument, PluginError, ResourceKey, TranslateRequest, TranslateResponse,
    XdsResource,
};

use crate::backends::{self, Backend};
use crate::config::Config;
use crate::gateway::{self, Frame};
use crate::status::{Problems, Statuses};
use crate::world::{Key, RouteKey, World};
use crate::{Translation, diagnostics};

const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const ROUTES: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const SCOPES: &str = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration";

/// What an instance keeps between calls; none before its first full call.
#[derive(Default)]
pub struct Incremental {
    kept: Option<Kept>,
    last: Option<Call>,
}

/// How the last call was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// A full call: everything translated.
    Full,
    /// A changes call, answered by making again what the change reaches.
    Patched,
    /// A changes call of a kind the patch does not cover, answered by translating everything
    /// (and answering what differs).
    Rebuilt,
}

struct Kept {
    config_text: String,
    config: Config,
    world: World,
    statuses: Statuses,
    frame: Frame,
    said: BTreeMap<Backend, Vec<Diagnostic>>,
    /// The documents' conditions that are not true, as diagnostics (kept per document: a call
    /// says again only those of the documents whose status it made again).
    problems: Problems,
    /// Every resource as last returned, by (type URL, name).
    held: BTreeMap<(String, String), XdsResource>,
    /// Every status as last returned, by document.
    status_text: BTreeMap<String, String>,
}

/// What a call made again: resources (changed or not), the keys of those that may be gone, and
/// the documents whose status may have changed.
#[derive(Default)]
struct Made {
    resources: Vec<XdsResource>,
    gone: Vec<(String, String)>,
    statuses: BTreeSet<String>,
}

impl Incremental {
    /// Answers a call: a full one (`changes` none) translates everything and keeps it; a
    /// changes call updates what was kept. Whatever fails, nothing is kept: the host then makes
    /// a fresh instance and calls it in full.
    pub fn call(&mut self, request: &TranslateRequest) -> Result<TranslateResponse, PluginError> {
        let kept = self.kept.take();
        self.last = None;
        let (kept, answer) = match (&request.changes, kept) {
            (None, _) => {
                self.last = Some(Call::Full);
                Kept::full(request)?
            }
            (Some(changes), Some(mut kept)) if kept.config_text == request.config => {
                let (answer, call) = kept.changes(request, &changes.removed)?;
                self.last = Some(call);
                (kept, answer)
            }
            (Some(_), _) => {
                return Err(PluginError::new(
                    "a changes call to an instance that has kept nothing (or with other settings): the host must call \
                     in full first",
                ));
            }
        };
        self.kept = Some(kept);
        Ok(answer)
    }

    /// How the last call was answered (none if it failed).
    pub fn last(&self) -> Option<Call> {
        self.last
    }
}

impl Kept {
    fn full(request: &TranslateRequest) -> Result<(Kept, TranslateResponse), PluginError> {
        let config = Config::parse(&request.config)?;
        let world = World::read(&request.documents)?;
        let generations = request.documents.iter().filter_map(|d| Some((d.id(), d.generation()?))).collect();
        let t = Translation::of(&world, &config, generations);
        let mut out = t.out;
        let problems = t.statuses.problems();
        out.diagnostics = diagnostics(&t.said, &problems);
        let status_text: BTreeMap<String, String> = t.statuses.to_strings().into_iter().collect();
        out.statuses =
            status_text.iter().map(|(d, s)| DocumentStatus { document: d.clone(), status: s.clone() }).collect();
        let held = out.resources.iter().map(|r| ((r.type_url.clone(), r.name.clone()), r.clone())).collect();
        let kept = Kept {
            config_text: request.config.clone(),
            config,
            world,
            statuses: t.statuses,
            frame: t.frame,
            said: t.said,
            problems,
            held,
            status_text,
        };
        Ok((kept, out))
    }

    fn changes(
        &mut self,
        request: &TranslateRequest,
        removed: &[String],
    ) -> Result<(TranslateResponse, Call), PluginError> {
        let mut kinds = BTreeSet::new();
        let mut touched = BTreeSet::new();
        // The Services changed routes send to, before and after: a BackendTLSPolicy's status
        // names the Gateways whose routes send to its Services.
        let mut sent_to: BTreeSet<Key> = BTreeSet::new();
        let routes: Vec<RouteKey> = removed
            .iter()
            .cloned()
            .chain(request.documents.iter().map(IntentDocument::id))
            .filter(|id| matches!(kind_of(id), "HTTPRoute" | "GRPCRoute"))
            .map(|id| route_key(&id))
            .collect();
        sent_to.extend(routes.iter().flat_map(|k| self.sends_to(k)));
        // The Services whose EndpointSlices changed, before and after.
        let mut services: BTreeSet<Key> = BTreeSet::new();
        for id in removed {
            kinds.insert(kind_of(id).to_owned());
            services.extend(self.world.slice_services.get(id).cloned());
            self.world.remove(id);
            self.statuses.generations.remove(id);
            touched.insert(id.clone());
        }
        for d in &request.documents {
            let id = d.id();
            services.extend(self.world.slice_services.get(&id).cloned());
            self.world.insert(d)?;
            services.extend(self.world.slice_services.get(&id).cloned());
            match d.generation() {
                Some(g) => self.statuses.generations.insert(id.clone(), g),
                None => self.statuses.generations.remove(&id),
            };
            kinds.insert(d.kind.clone());
            touched.insert(id);
        }
        sent_to.extend(routes.iter().flat_map(|k| self.sends_to(k)));
        let fast = kinds.iter().all(|k| matches!(k.as_str(), "HTTPRoute" | "GRPCRoute" | "EndpointSlice"))
            && !self.l4_reads(&services);
        let mut made = if fast { self.patch(&touched, &services, &sent_to) } else { self.rebuild() };
        made.statuses.extend(touched.iter().filter(|id| !removed.contains(id)).cloned());
        for id in removed {
            // The host drops a removed document's status with it.
            self.status_text.remove(id);
            made.statuses.remove(id);
            self.problems_again(id);
        }
        Ok((self.answer(made), if fast { Call::Patched } else { Call::Rebuilt }))
    }

    /// The Services a route's rules name (`namespace`, `name`).
    fn sends_to(&self, key: &RouteKey) -> Vec<Key> {
        let Some(route) = self.world.routes.get(key) else { return Vec::new() };
        let refs = route.spec.rules.iter().flat_map(|r| {
            let mirrors = r.filters.iter().filter_map(|f| f.request_mirror.as_ref().map(|m| &m.backend_ref));
            r.backend_refs.iter().chain(mirrors)
        });
        refs.map(|b| (b.namespace.clone().unwrap_or_else(|| route.namespace.clone()), b.name.clone())).collect()
    }

    /// Whether a TCP, UDP or TLS route sends to one of `services`: its listener's clusters
    /// carry the Service's endpoints, and only a whole translation makes them.
    fn l4_reads(&self, services: &BTreeSet<Key>) -> bool {
        if services.is_empty() {
            return false;
        }
        ["TCPRoute", "UDPRoute", "TLSRoute"].into_iter().any(|kind| {
            let start: RouteKey = (kind, String::new(), String::new());
            self.world.routes.range(start..).take_while(|(k, _)| k.0 == kind).any(|(_, route)| {
                route.spec.rules.iter().flat_map(|r| &r.backend_refs).any(|b| {
                    let ns = b.namespace.clone().unwrap_or_else(|| route.namespace.clone());
                    services.contains(&(ns, b.name.clone()))
                })
            })
        })
    }

    /// Everything made again, as a full call would (changes the patch does not cover).
    fn rebuild(&mut self) -> Made {
        let generations = std::mem::take(&mut self.statuses.generations);
        let t = Translation::of(&self.world, &self.config, generations);
        let now: BTreeSet<(String, String)> =
            t.out.resources.iter().map(|r| (r.type_url.clone(), r.name.clone())).collect();
        let gone = self.held.keys().filter(|k| !now.contains(*k)).cloned().collect();
        let mut statuses: BTreeSet<String> = self.status_text.keys().cloned().collect();
        statuses.extend(t.statuses.to_strings().into_iter().map(|(id, _)| id));
        self.statuses = t.statuses;
        self.frame = t.frame;
        self.said = t.said;
        Made { resources: t.out.resources, gone, statuses }
    }

    /// Makes again what changed routes and EndpointSlices reach.
    fn patch(&mut self, touched: &BTreeSet<String>, services: &BTreeSet<Key>, sent_to: &BTreeSet<Key>) -> Made {
        let mut made = Made::default();
        let world = &self.world;
        let mut scratch = Statuses::default();
        let gateways = gateway::expanded(world, &self.config, &mut scratch);
        let Frame { by_listener, of_route, listener_status_at, ports, port_of, uses, .. } = &mut self.frame;
        let mut listeners = BTreeSet::new();
        // Per port: the hostnames the changed routes had or have there.
        let mut reached: BTreeMap<(Key, u16), BTreeSet<String>> = BTreeMap::new();
        for id in touched.iter().filter(|id| matches!(kind_of(id), "HTTPRoute" | "GRPCRoute")) {
            let key = route_key(id);
            for (g, l, hosts) in of_route.remove(&key).unwrap_or_default() {
                let at = (g, l);
                if let Some(m) = by_listener.get_mut(&at) {
                    m.remove(&key);
                    if m.is_empty() {
                        by_listener.remove(&at);
                    }
                }
                if let Some(&port) = port_of.get(&at)
                    && let Some(p) = ports.get_mut(&(at.0.clone(), port))
                {
                    for h in hosts {
                        if let Some(n) = p.domains.get_mut(&h) {
                            *n -= 1;
                            if *n == 0 {
                                p.domains.remove(&h);
                            }
                        }
                        reached.entry((at.0.clone(), port)).or_default().insert(h);
                    }
                }
                listeners.insert(at);
            }
            let Some(route) = world.routes.get(&key) else {
                self.statuses.routes.remove(id);
                continue;
            };
            let mut attachments = Vec::new();
            let parents = gateway::route_status(world, &gateways, &key, route, &mut attachments);
            if parents.is_empty() {
                self.statuses.routes.remove(id);
            } else {
                self.statuses.routes.insert(id.clone(), parents);
            }
            for a in attachments {
                let at = (a.gateway, a.listener);
                by_listener.entry(at.clone()).or_default().entry(key.clone()).or_default().push(a.hostnames.clone());
                of_route.entry(key.clone()).or_default().push((at.0.clone(), at.1, a.hostnames.clone()));
                if let Some(&port) = port_of.get(&at)
                    && let Some(p) = ports.get_mut(&(at.0.clone(), port))
                {
                    for h in a.hostnames {
                        *p.domains.entry(h.clone()).or_default() += 1;
                        reached.entry((at.0.clone(), port)).or_default().insert(h);
                    }
                }
                listeners.insert(at);
            }
        }
        // attachedRoutes of the listeners the routes left or joined.
        for at in listeners {
            let count = by_listener.get(&at).map_or(0, |m| m.values().map(Vec::len).sum::<usize>()) as u32;
            if let Some((doc, i)) = listener_status_at.get(&at) {
                let status = match self.statuses.gateways.get_mut(doc) {
                    Some(s) => Some(s),
                    None => self.statuses.listener_sets.get_mut(doc),
                };
                if let Some(l) = status.and_then(|s| s.listeners.get_mut(*i)) {
                    l.attached_routes = count;
                    made.statuses.insert(doc.clone());
                }
            }
        }
        // The virtual hosts those hostnames reach, and the configurations they are in: in
        // each, the changed routes are made again and the others kept.
        let changed: BTreeSet<RouteKey> = touched
            .iter()
            .filter(|id| matches!(kind_of(id), "HTTPRoute" | "GRPCRoute"))
            .map(|id| route_key(id))
            .collect();
        let mut backends: BTreeSet<Backend> = BTreeSet::new();
        let mut flipped = false;
        for (at, hosts) in reached {
            let Some(p) = ports.get_mut(&at) else { continue };
            let mut domains: BTreeSet<String> = hosts.clone();
            domains.extend(p.domains.keys().filter(|d| hosts.iter().any(|h| crate::hostnames::covers(h, d))).cloned());
            let configs = p.configs();
            let domains_reached = domains.clone();
            for d in domains {
                for (config, only) in &configs {
                    let k = (config.clone(), d.clone());
                    let old = p.vhosts.remove(&k);
                    let before = old.as_ref().map(|v| v.backends.clone()).unwrap_or_default();
                    let now = if p.domains.contains_key(&d) {
                        crate::vhosts::virtual_host(world, p, *only, &d, by_listener, old, Some(&changed))
                    } else {
                        None
                    };
                    let after = now.as_ref().map(|v| v.backends.clone()).unwrap_or_default();
                    if before != after {
                        gateway::set_uses(uses, &(p.rank, config.clone(), d.clone()), &before, &after);
                        backends.extend(before.into_keys().chain(after.into_keys()));
                    }
                    if let Some(v) = now {
                        p.vhosts.insert(k, v);
                    }
                }
            }
            // A port whose form changes (scoped by host or not) changes its Listener: made again
            // whole, with everything else, below.
            if crate::vhosts::scoped(p, self.config.route_scopes_from) != p.scoped {
                flipped = true;
            } else if p.scoped {
                for d in &domains_reached {
                    match crate::vhosts::scope_parts(p, d) {
                        Some(parts) => made.resources.extend(parts),
                        None => {
                            let name = crate::vhosts::scope_name(p, d);
                            made.gone.push((ROUTES.to_owned(), name.clone()));
                            made.gone.push((SCOPES.to_owned(), name));
                        }
                    }
                }
            } else {
                for (config, only) in configs {
                    made.resources.push(crate::vhosts::route_configuration(p, &config, only));
                }
            }
        }
        if flipped {
            return self.rebuild();
        }
        // The clusters whose users changed, and the endpoints of the Services whose slices did.
        for (ns, service) in services {
            let from = Backend { namespace: ns.clone(), service: service.clone(), port: 0 };
            let to = Backend { port: u16::MAX, ..from.clone() };
            backends.extend(uses.range(from..=to).map(|(b, _)| b.clone()));
        }
        // A BackendTLSPolicy for a Service a changed route sends to (or sent to): its status
        // names the Gateways whose routes send there.
        let policy_reached = world
            .backend_tls_policies
            .iter()
            .any(|p| p.spec.target_refs.iter().any(|t| sent_to.contains(&(p.namespace.clone(), t.name.clone()))));
        if !backends.is_empty() || policy_reached {
            let mut policies = Statuses::default();
            let tls = crate::backend_tls::Policies::read(world, &gateway::ours_set(world, &self.config), &mut policies);
            if policy_reached {
                made.statuses.extend(self.statuses.policies.keys().chain(policies.policies.keys()).cloned());
                self.statuses.policies = policies.policies;
            }
            for b in backends {
                match self.frame.usage(&b) {
                    None => {
                        made.gone.push((CLUSTER.to_owned(), b.cluster()));
                        made.gone.push((ENDPOINTS.to_owned(), b.cluster()));
                        self.said.remove(&b);
                    }
                    Some(usage) => {
                        let (resources, said) = backends::emit_one(world, &b, &usage, &tls);
                        made.resources.extend(resources);
                        if said.is_empty() {
                            self.said.remove(&b);
                        } else {
                            self.said.insert(b, said);
                        }
                    }
                }
            }
        }
        made
    }

    /// Document `id`'s problems as its status is now (none once it is gone).
    fn problems_again(&mut self, id: &str) {
        for rank in 0..4 {
            self.problems.remove(&(rank, id.to_owned()));
        }
        self.problems.extend(self.statuses.problems_of(id));
    }

    /// What to answer: the resources that differ from what was returned, the keys of those
    /// gone, and the statuses that changed (empty: the document has none now).
    fn answer(&mut self, made: Made) -> TranslateResponse {
        let mut resources = Vec::new();
        let mut removed = Vec::new();
        let kept: BTreeSet<(String, String)> =
            made.resources.iter().map(|r| (r.type_url.clone(), r.name.clone())).collect();
        for key in made.gone.into_iter().filter(|k| !kept.contains(k)) {
            if self.held.remove(&key).is_some() {
                removed.push(ResourceKey { type_url: key.0, name: key.1 });
            }
        }
        for r in made.resources {
            let key = (r.type_url.clone(), r.name.clone());
            if self.held.get(&key) != Some(&r) {
                resources.push(r.clone());
                self.held.insert(key, r);
            }
        }
        let mut statuses = Vec::new();
        for id in made.statuses {
            self.problems_again(&id);
            let now = self.statuses.string_of(&id);
            if self.status_text.get(&id) != now.as_ref() {
                statuses.push(DocumentStatus { document: id.clone(), status: now.clone().unwrap_or_default() });
                match now {
                    Some(s) => self.status_text.insert(id, s),
                    None => self.status_text.remove(&id),
                };
            }
        }
        TranslateResponse { resources, removed, diagnostics: diagnostics(&self.said, &self.problems), statuses }
    }
}

/// A document id's kind: `HTTPRoute` of `HTTPRoute/ns/name`.
fn kind_of(id: &str) -> &str {
    id.split_once('/').map_or(id, |(k, _)| k)
}

/// The route key of a route's document id.
fn route_key(id: &str) -> RouteKey {
    let (kind, rest) = id.split_once('/').unwrap_or((id, ""));
    let (ns, name) = rest.split_once('/').unwrap_or(("default", rest));
    let kind = if kind == "GRPCRoute" { "GRPCRoute" } else { "HTTPRoute" };
    (kind, ns.to_owned(), name.to_owned())
}

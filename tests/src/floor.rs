//! The floor for what a control plane adds to a change (issue 50, item 5): a minimal SotW ADS
//! server that holds a fixed set of resources and, when a type's set is replaced, sends it to
//! every stream that asked for that type, with no translation, checks, ACK gating or rollout.
//! The same Envoy fed the same resources by this server shows what Envoy itself costs.
//!
//! [`capture`] takes the resources a control plane serves a node (every type, ACKing each) so
//! that a benchmark can replay them here.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message as _;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};

pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/// Resources by type, each `(name, resource)`.
pub type Resources = BTreeMap<String, Vec<Named>>;

/// A resource and its name.
pub type Named = (String, Any);

/// Responses of 64 MiB at most, both ways (a 20,000-route configuration is about 12 MB).
const MAX_MESSAGE: usize = 64 << 20;

/// What the server serves: each type's resources and a version that changes with them.
#[derive(Default)]
struct Served {
    types: BTreeMap<String, (u64, Arc<Vec<Named>>)>,
}

/// A running floor server.
pub struct Floor {
    pub addr: SocketAddr,
    served: watch::Sender<Arc<Served>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Floor {
    /// Serves `resources` on a free loopback port.
    pub async fn start(resources: Resources) -> anyhow::Result<Floor> {
        let mut served = Served::default();
        for (t, r) in resources {
            served.types.insert(t, (1, Arc::new(r)));
        }
        let (tx, _) = watch::channel(Arc::new(served));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let service = AggregatedDiscoveryServiceServer::new(Ads { served: tx.clone() })
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await;
        });
        Ok(Floor { addr, served: tx, _task: task })
    }

    /// Replaces the resources of `type_url`; every stream that asked for it is sent the new set.
    pub fn set(&self, type_url: &str, resources: Vec<Named>) {
        self.served.send_modify(|s| {
            let mut next = Served { types: s.types.clone() };
            let version = next.types.get(type_url).map_or(1, |(v, _)| v + 1);
            next.types.insert(type_url.to_owned(), (version, Arc::new(resources)));
            *s = Arc::new(next);
        });
    }
}

struct Ads {
    served: watch::Sender<Arc<Served>>,
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, tonic::Status>> + Send>>;

/// One stream: what it asked for per type (no names: all of them), the version it was sent and,
/// for the types whose responses need not hold every resource (RDS and EDS, SOTW-9), a digest of
/// each resource it was sent, so that a response holds only what changed or was newly asked for.
#[derive(Default)]
struct Asked {
    names: Vec<String>,
    sent: u64,
    digests: HashMap<String, u64>,
}

fn digest(any: &Any) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    any.value.hash(&mut h);
    h.finish()
}

impl Asked {
    /// The response for `version` of `all`, or none when nothing the stream needs changed.
    fn response(&mut self, type_url: &str, version: u64, all: &[Named], nonce: u64) -> Option<DiscoveryResponse> {
        let partial = matches!(type_url, ROUTE | ENDPOINTS);
        let mut resources = Vec::new();
        for (n, a) in all.iter().filter(|(n, _)| self.names.is_empty() || self.names.contains(n)) {
            if partial {
                let d = digest(a);
                if self.digests.insert(n.clone(), d) == Some(d) {
                    continue;
                }
            }
            resources.push(a.clone());
        }
        self.sent = version;
        (!partial || !resources.is_empty()).then(|| DiscoveryResponse {
            version_info: version.to_string(),
            resources,
            type_url: type_url.to_owned(),
            nonce: nonce.to_string(),
            ..Default::default()
        })
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: tonic::Request<tonic::Streaming<DiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::StreamAggregatedResourcesStream>, tonic::Status> {
        let mut requests = request.into_inner();
        let mut served = self.served.subscribe();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut asked: HashMap<String, Asked> = HashMap::new();
            let mut nonce = 0u64;
            loop {
                tokio::select! {
                    req = requests.next() => {
                        let Some(Ok(req)) = req else { return };
                        let a = asked.entry(req.type_url.clone()).or_default();
                        if a.names != req.resource_names {
                            // Names newly asked for are sent even if unchanged (SOTW-9).
                            a.names = req.resource_names;
                            a.sent = 0;
                        }
                        // A request that is not an ACK of the current version is answered.
                        if req.version_info == a.sent.to_string() && a.sent != 0 {
                            continue;
                        }
                    }
                    changed = served.changed() => if changed.is_err() { return },
                }
                let now = served.borrow_and_update().clone();
                for (t, a) in &mut asked {
                    let Some((version, all)) = now.types.get(t) else { continue };
                    if a.sent != *version {
                        nonce += 1;
                        if let Some(r) = a.response(t, *version, all, nonce)
                            && tx.send(Ok(r)).await.is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
        Ok(tonic::Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: tonic::Request<tonic::Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::DeltaAggregatedResourcesStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("the floor server speaks SotW ADS only"))
    }
}

/// The name of a resource of `type_url` (the field every type names it by).
fn name_of(type_url: &str, any: &Any) -> anyhow::Result<String> {
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    let v = &any.value[..];
    Ok(match type_url {
        LISTENER => Listener::decode(v)?.name,
        CLUSTER => Cluster::decode(v)?.name,
        ENDPOINTS => ClusterLoadAssignment::decode(v)?.cluster_name,
        ROUTE => RouteConfiguration::decode(v)?.name,
        SCOPE => envoy_types::pb::envoy::config::route::v3::ScopedRouteConfiguration::decode(v)?.name,
        other => bail!("capture: unexpected type {other}"),
    })
}

/// The RouteConfigurations the listeners' HTTP connection managers name over RDS.
fn route_names(listeners: &[Named]) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for (_, any) in listeners {
        for chain in Listener::decode(&any.value[..])?.filter_chains {
            for filter in chain.filters {
                let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(c)) =
                    filter.config_type
                else {
                    continue;
                };
                if c.type_url.ends_with("HttpConnectionManager")
                    && let Some(RouteSpecifier::Rds(rds)) = HttpConnectionManager::decode(&c.value[..])?.route_specifier
                {
                    names.push(rds.route_config_name);
                }
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Whether a listener's HTTP connection manager routes by scope.
fn routes_by_scope(listeners: &[Named]) -> anyhow::Result<bool> {
    for (_, any) in listeners {
        for chain in Listener::decode(&any.value[..])?.filter_chains {
            for filter in chain.filters {
                if let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(c)) =
                    filter.config_type
                    && c.type_url.ends_with("HttpConnectionManager")
                    && let Some(RouteSpecifier::ScopedRoutes(_)) =
                        HttpConnectionManager::decode(&c.value[..])?.route_specifier
                {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// The RouteConfigurations routing scopes name.
fn scope_routes(scopes: &[Named]) -> anyhow::Result<Vec<String>> {
    use envoy_types::pb::envoy::config::route::v3::ScopedRouteConfiguration;
    scopes
        .iter()
        .map(|(_, any)| Ok(ScopedRouteConfiguration::decode(&any.value[..])?.route_configuration_name))
        .collect()
}

/// The ClusterLoadAssignments the clusters take over EDS.
fn endpoint_names(clusters: &[Named]) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for (name, any) in clusters {
        let c = Cluster::decode(&any.value[..])?;
        if let Some(eds) = c.eds_cluster_config {
            names.push(if eds.service_name.is_empty() { name.clone() } else { eds.service_name });
        }
    }
    Ok(names)
}

/// Everything the control plane at `xds` serves node `node_id` of `node_cluster` over SotW ADS:
/// Listeners and Clusters, then the RouteConfigurations and ClusterLoadAssignments they name.
/// Each response is ACKed, so that a server that gates on ACKs goes on.
pub async fn capture(xds: SocketAddr, node_id: &str, node_cluster: &str) -> anyhow::Result<Resources> {
    let channel = crate::xds::channel(xds).await;
    let mut client = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(MAX_MESSAGE);
    let (tx, rx) = mpsc::channel(16);
    let mut responses = client.stream_aggregated_resources(ReceiverStream::new(rx)).await?.into_inner();
    let node = crate::xds::node(node_id, node_cluster);
    let request = |type_url: &str, names: Vec<String>, version: &str, nonce: &str| DiscoveryRequest {
        type_url: type_url.to_owned(),
        resource_names: names,
        version_info: version.to_owned(),
        response_nonce: nonce.to_owned(),
        node: node.clone(),
        ..Default::default()
    };
    let mut got = Resources::new();
    let mut names: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    // Listeners, Clusters and (for listeners that route by scope) the routing scopes are asked
    // for whole; the RouteConfigurations and ClusterLoadAssignments by the names they name.
    for t in [LISTENER, CLUSTER, SCOPE] {
        tx.send(request(t, vec![], "", "")).await?;
        names.insert(t, vec![]);
    }
    let done = |got: &Resources, names: &BTreeMap<&str, Vec<String>>| -> anyhow::Result<bool> {
        let Some(listeners) = got.get(LISTENER) else { return Ok(false) };
        let scoped = routes_by_scope(listeners)?;
        Ok([CLUSTER, ENDPOINTS, ROUTE].iter().all(|t| got.contains_key(*t))
            && (!scoped || got.contains_key(SCOPE))
            && names.get(ROUTE).is_some_and(|n| {
                let have: Vec<String> = got[ROUTE].iter().map(|(name, _)| name.clone()).collect();
                n.iter().all(|x| have.contains(x))
            }))
    };
    while !done(&got, &names)? {
        let r = tokio::time::timeout(Duration::from_secs(60), responses.message())
            .await
            .context("capture: no response within 60 s")??
            .context("capture: the stream ended")?;
        let mut resources = Vec::new();
        for any in &r.resources {
            resources.push((name_of(&r.type_url, any)?, any.clone()));
        }
        let t = r.type_url.as_str();
        let asked = names.get(t).cloned().unwrap_or_default();
        tx.send(request(t, asked, &r.version_info, &r.nonce)).await?;
        if matches!(t, ROUTE | ENDPOINTS) {
            // SOTW-9: a response carries what changed; the rest is held as it was.
            let held = got.entry(r.type_url.clone()).or_default();
            for (name, any) in resources {
                match held.iter_mut().find(|(n, _)| *n == name) {
                    Some(slot) => slot.1 = any,
                    None => held.push((name, any)),
                }
            }
        } else {
            got.insert(r.type_url.clone(), resources);
        }
        let mut wanted: Vec<(&str, Vec<String>)> = Vec::new();
        if matches!(t, LISTENER | SCOPE) {
            let mut n = route_names(got.get(LISTENER).map(Vec::as_slice).unwrap_or_default())?;
            n.extend(scope_routes(got.get(SCOPE).map(Vec::as_slice).unwrap_or_default())?);
            n.sort();
            n.dedup();
            wanted.push((ROUTE, n));
        }
        if t == CLUSTER {
            wanted.push((ENDPOINTS, endpoint_names(&got[CLUSTER])?));
        }
        for (t2, n) in wanted {
            if names.get(t2) != Some(&n) {
                names.insert(t2, n.clone());
                tx.send(request(t2, n, "", "")).await?;
            }
        }
    }
    Ok(got)
}

pub const SCOPE: &str = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration";

/// Issue 50, item 5: the same resources with each HTTP connection manager's RouteConfiguration
/// split by virtual host over scoped RDS, so that Envoy applies a change to one host as one small
/// RouteConfiguration. A scope's key is the request's `:authority` up to its first `:`, and its
/// RouteConfiguration `<name>/<host>` holds the one virtual host for that host; the catch-all
/// virtual host (`*`) takes the key `catch_all` (scopes match keys exactly: a request for a host
/// with no scope finds no route). Scope keys are each virtual host's first domain.
pub fn split_by_host(resources: &Resources, catch_all: &str) -> anyhow::Result<Resources> {
    use envoy_types::pb::envoy::config::core::v3::{AggregatedConfigSource, ApiVersion, ConfigSource, config_source};
    use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{ScopedRds, ScopedRoutes};
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::scoped_routes::scope_key_builder::fragment_builder::header_value_extractor::ExtractType;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::scoped_routes::scope_key_builder::fragment_builder::{HeaderValueExtractor, Type as FragmentType};
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::scoped_routes::scope_key_builder::FragmentBuilder;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::scoped_routes::{ConfigSpecifier, ScopeKeyBuilder};
    let ads = || ConfigSource {
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        resource_api_version: ApiVersion::V3 as i32,
        ..Default::default()
    };
    let mut out = resources.clone();
    let mut listeners = Vec::new();
    for (name, any) in resources.get(LISTENER).map(Vec::as_slice).unwrap_or_default() {
        let mut l = Listener::decode(&any.value[..])?;
        for chain in &mut l.filter_chains {
            for filter in &mut chain.filters {
                let Some(ConfigType::TypedConfig(c)) = &mut filter.config_type else { continue };
                if !c.type_url.ends_with("HttpConnectionManager") {
                    continue;
                }
                let mut hcm = HttpConnectionManager::decode(&c.value[..])?;
                let Some(RouteSpecifier::Rds(rds)) = &hcm.route_specifier else { continue };
                let authority = HeaderValueExtractor {
                    name: ":authority".into(),
                    element_separator: ":".into(),
                    extract_type: Some(ExtractType::Index(0)),
                };
                hcm.route_specifier = Some(RouteSpecifier::ScopedRoutes(ScopedRoutes {
                    name: rds.route_config_name.clone(),
                    scope_key_builder: Some(ScopeKeyBuilder {
                        fragments: vec![FragmentBuilder {
                            r#type: Some(FragmentType::HeaderValueExtractor(authority)),
                        }],
                    }),
                    rds_config_source: Some(ads()),
                    config_specifier: Some(ConfigSpecifier::ScopedRds(ScopedRds {
                        scoped_rds_config_source: Some(ads()),
                        ..Default::default()
                    })),
                }));
                c.value = hcm.encode_to_vec();
            }
        }
        listeners.push((name.clone(), Any { type_url: any.type_url.clone(), value: l.encode_to_vec() }));
    }
    out.insert(LISTENER.to_owned(), listeners);
    let (scopes, routes) = split_routes(resources.get(ROUTE).map(Vec::as_slice).unwrap_or_default(), catch_all)?;
    out.insert(ROUTE.to_owned(), routes);
    out.insert(SCOPE.to_owned(), scopes);
    Ok(out)
}

/// RouteConfigurations split by virtual host, and the scopes naming them (see [`split_by_host`]).
pub fn split_routes(configs: &[Named], catch_all: &str) -> anyhow::Result<(Vec<Named>, Vec<Named>)> {
    use envoy_types::pb::envoy::config::route::v3::scoped_route_configuration::Key;
    use envoy_types::pb::envoy::config::route::v3::scoped_route_configuration::key::{Fragment, fragment};
    use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, ScopedRouteConfiguration};
    let (mut scopes, mut routes) = (Vec::new(), Vec::new());
    for (name, any) in configs {
        let mut rc = RouteConfiguration::decode(&any.value[..])?;
        let vhosts = std::mem::take(&mut rc.virtual_hosts);
        let template = rc;
        for vhost in &vhosts {
            let first = vhost.domains.first().map(String::as_str).unwrap_or("*");
            let key = if first == "*" { catch_all } else { first.split(':').next().unwrap_or(first) };
            let part = format!("{name}/{key}");
            let one = RouteConfiguration { name: part.clone(), virtual_hosts: vec![vhost.clone()], ..template.clone() };
            routes.push((part.clone(), Any { type_url: ROUTE.into(), value: one.encode_to_vec() }));
            let scope = ScopedRouteConfiguration {
                name: part.clone(),
                route_configuration_name: part.clone(),
                key: Some(Key { fragments: vec![Fragment { r#type: Some(fragment::Type::StringKey(key.into())) }] }),
                ..Default::default()
            };
            scopes.push((part, Any { type_url: SCOPE.into(), value: scope.encode_to_vec() }));
        }
    }
    Ok((scopes, routes))
}

//! CSDS (`envoy.service.status.v3.ClientStatusDiscoveryService`) on the xDS port: for every
//! connected node (or those the request's node matchers pick), each resource it asks for or
//! holds, as the server knows it from the node's rollout ([`xdst_core::client_status`]):
//!
//! | state | `client_status` | `config_status` | `version_info`, `xds_config` |
//! |---|---|---|---|
//! | acknowledged, current | ACKED | SYNCED | the version the node holds |
//! | acknowledged, newer one waiting | ACKED | STALE | the version the node holds |
//! | rejected | NACKED | ERROR | what it kept; `error_state` has Envoy's message, when, and the rejected version |
//! | asked for, not held yet | REQUESTED | NOT_SENT | none |
//! | asked for by name, no such resource | DOES_NOT_EXIST | UNKNOWN | none |
//!
//! A rejection's message is given once per node: with the first resource it marks NACKED,
//! and the others of the same rejection point at that one. Only the resources the node failed
//! on are NACKED (those its message names, else those the response changed), as Envoy's own
//! config dump marks them; the rest stay as the node holds them. An answer is at most
//! [`MAX_ANSWER`] bytes: past it nodes are given without resource bodies, then left out, and a
//! last entry with an empty node id and `client_scope` saying how many were left out marks
//! the cut (ask with node matchers for fewer).
//!
//! A Secret's body is never included. CSDS shows every node's config, so once admin reads are
//! protected (a read token or `adminReadIdentities`) or xDS clients are told apart by
//! certificate, a CSDS client needs what an admin read needs: `authorization: Bearer <token>`
//! metadata or a client certificate `adminReadIdentities` allows.
//!
//! Limits: [`MAX_MATCHERS`] node matchers a request; node ids matched exactly, by prefix,
//! suffix or substring (regex and metadata matchers are refused, naming them); [`RATE`]
//! requests a stream; [`MAX_CONCURRENT`] reports worked out at once; the request size cap of
//! the xDS port.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use envoy_types::pb::envoy::admin::v3::{ClientResourceStatus, UpdateFailureState};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::status::v3::client_config::GenericXdsConfig;
use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_server::{
    ClientStatusDiscoveryService, ClientStatusDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::status::v3::{
    ClientConfig, ClientStatusRequest, ClientStatusResponse, ConfigStatus,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{NodeMatcher, StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::google::protobuf::{Any, Timestamp};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use prost::Message as _;
use tonic::{Request, Response, Status, Streaming};
use xdst_core::client_status::{ResourceState, State};
use xdst_core::resource::Resource;

use crate::Serving;
use crate::admission::{Bucket, RequestRate};

/// The gRPC service path.
pub const SERVICE: &str = "/envoy.service.status.v3.ClientStatusDiscoveryService";
/// Node matchers one request may carry.
pub const MAX_MATCHERS: usize = 64;
/// Requests one stream may send: 2 a second, 10 at once.
pub const RATE: RequestRate = RequestRate { rate: 2, burst: 10 };
/// Reports worked out at once, over every stream and fetch.
pub const MAX_CONCURRENT: usize = 4;
/// The most bytes one answer holds (see the module's documentation for what is cut first).
pub const MAX_ANSWER: usize = 8 << 20;

pub struct Csds {
    serving: Arc<Serving>,
    working: Arc<tokio::sync::Semaphore>,
}

/// The service, for the xDS port's router.
pub fn service(serving: &Arc<Serving>) -> ClientStatusDiscoveryServiceServer<Csds> {
    let csds = Csds { serving: serving.clone(), working: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT)) };
    ClientStatusDiscoveryServiceServer::new(csds)
        .max_decoding_message_size(serving.max_request_size)
        .max_encoding_message_size(usize::MAX)
}

impl Csds {
    fn authorize<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let serving = &self.serving;
        if serving.access.reads_are_open() && serving.identities.is_none() {
            return Ok(());
        }
        let headers = req.metadata().clone().into_headers();
        let identity = req.extensions().get::<crate::identity::PeerIdentity>();
        if serving.access.may_read(&headers, identity) {
            return Ok(());
        }
        serving.metrics.refusals.get_or_create(&crate::metrics::label("reason", "csds_read")).inc();
        Err(Status::permission_denied(
            "CSDS shows every node's config: it needs the admin read token (authorization: Bearer <token>) or a \
             client certificate that adminReadIdentities allows",
        ))
    }

    /// The answer to one request.
    async fn report(&self, req: &ClientStatusRequest) -> Result<ClientStatusResponse, Status> {
        let pick = picker(&req.node_matchers)?;
        let Ok(_permit) = self.working.clone().try_acquire_owned() else {
            self.serving.metrics.refusals.get_or_create(&crate::metrics::label("reason", "csds_busy")).inc();
            return Err(Status::resource_exhausted(format!(
                "{MAX_CONCURRENT} CSDS reports are being worked out already; ask again shortly"
            )));
        };
        let serving = self.serving.clone();
        let bodies = !req.exclude_resource_contents;
        tokio::task::spawn_blocking(move || {
            let infos = serving.nodes.node_infos();
            let nodes = serving.rollouts.resource_states(|id| pick(id));
            let total = nodes.len();
            let (mut config, mut size) = (Vec::new(), 0);
            for (group, id, client, states) in nodes {
                let info = infos.get(&id);
                let entry = |bodies: bool| ClientConfig {
                    node: Some(Node {
                        id: id.clone(),
                        cluster: info.map(|i| i.cluster.clone()).unwrap_or_default(),
                        user_agent_name: info.map(|i| i.user_agent.clone()).unwrap_or_default(),
                        ..Default::default()
                    }),
                    generic_xds_configs: states.iter().map(|s| generic(s, bodies)).collect(),
                    client_scope: if client == 1 { group.clone() } else { format!("{group} (client {client})") },
                    ..Default::default()
                };
                // Bodies go first when the answer runs out of room, then whole nodes.
                let fitting = [bodies, false]
                    .into_iter()
                    .map(|b| {
                        let c = entry(b);
                        (c.encoded_len(), c)
                    })
                    .find(|(len, _)| size + len <= MAX_ANSWER);
                let Some((len, c)) = fitting else { break };
                size += len;
                config.push(c);
            }
            if config.len() < total {
                config.push(ClientConfig {
                    client_scope: format!(
                        "xdst: {} of {total} nodes left out: an answer holds at most {} MiB; ask for fewer with \
                         node_matchers",
                        total - config.len(),
                        MAX_ANSWER >> 20
                    ),
                    ..Default::default()
                });
            }
            ClientStatusResponse { config }
        })
        .await
        .map_err(|e| Status::internal(format!("working out the report failed: {e}")))
    }
}

#[tonic::async_trait]
impl ClientStatusDiscoveryService for Csds {
    type StreamClientStatusStream = BoxStream<'static, Result<ClientStatusResponse, Status>>;

    async fn stream_client_status(
        &self,
        request: Request<Streaming<ClientStatusRequest>>,
    ) -> Result<Response<Self::StreamClientStatusStream>, Status> {
        self.authorize(&request)?;
        let me = Csds { serving: self.serving.clone(), working: self.working.clone() };
        let requests = request.into_inner();
        let stream = futures::stream::unfold(
            (me, requests, Bucket::full(RATE), false),
            |(me, mut requests, mut bucket, done)| async move {
                if done {
                    return None;
                }
                let req = match requests.message().await {
                    Ok(Some(r)) => r,
                    Ok(None) => return None,
                    Err(status) => return Some((Err(status), (me, requests, bucket, true))),
                };
                if !bucket.take(RATE, Instant::now()) {
                    me.serving.metrics.refusals.get_or_create(&crate::metrics::label("reason", "csds_rate")).inc();
                    let status = Status::resource_exhausted(format!(
                        "more than {} CSDS requests a second on this stream (burst {})",
                        RATE.rate, RATE.burst
                    ));
                    return Some((Err(status), (me, requests, bucket, true)));
                }
                let answer = me.report(&req).await;
                let done = answer.is_err();
                Some((answer, (me, requests, bucket, done)))
            },
        );
        Ok(Response::new(stream.boxed()))
    }

    async fn fetch_client_status(
        &self,
        request: Request<ClientStatusRequest>,
    ) -> Result<Response<ClientStatusResponse>, Status> {
        self.authorize(&request)?;
        self.report(request.get_ref()).await.map(Response::new)
    }
}

/// Which node ids the matchers pick (any of them; none: every node).
fn picker(matchers: &[NodeMatcher]) -> Result<impl Fn(&str) -> bool + Send + 'static, Status> {
    if matchers.len() > MAX_MATCHERS {
        return Err(Status::invalid_argument(format!("{} node matchers; at most {MAX_MATCHERS}", matchers.len())));
    }
    let mut ids: Vec<(MatchPattern, bool)> = Vec::new();
    for (i, m) in matchers.iter().enumerate() {
        if !m.node_metadatas.is_empty() {
            return Err(Status::invalid_argument(format!(
                "node_matchers[{i}].node_metadatas: matching on metadata is not supported (match node_id)"
            )));
        }
        let Some(StringMatcher { match_pattern: Some(p), ignore_case }) = &m.node_id else {
            return Err(Status::invalid_argument(format!("node_matchers[{i}] has no node_id matcher")));
        };
        if !matches!(
            p,
            MatchPattern::Exact(_) | MatchPattern::Prefix(_) | MatchPattern::Suffix(_) | MatchPattern::Contains(_)
        ) {
            return Err(Status::invalid_argument(format!(
                "node_matchers[{i}].node_id: only exact, prefix, suffix and contains are supported"
            )));
        }
        ids.push((p.clone(), *ignore_case));
    }
    Ok(move |id: &str| {
        ids.is_empty()
            || ids.iter().any(|(p, ignore_case)| {
                let fold = |s: &str| if *ignore_case { s.to_ascii_lowercase() } else { s.to_owned() };
                let id = fold(id);
                match p {
                    MatchPattern::Exact(s) => id == fold(s),
                    MatchPattern::Prefix(s) => id.starts_with(&fold(s)),
                    MatchPattern::Suffix(s) => id.ends_with(&fold(s)),
                    MatchPattern::Contains(s) => id.contains(&fold(s)),
                    _ => false,
                }
            })
    })
}

/// A resource's body as an `Any`, unless it is a Secret or bodies are not wanted.
fn any(r: &Resource, bodies: bool) -> Option<Any> {
    (bodies && r.type_url().as_ref() != xdst_core::types::SECRET)
        .then(|| Any { type_url: r.type_url().to_string(), value: r.body().to_vec() })
}

fn generic(s: &ResourceState, bodies: bool) -> GenericXdsConfig {
    let (client, config) = match &s.state {
        State::Acked { stale: false } => (ClientResourceStatus::Acked, ConfigStatus::Synced),
        State::Acked { stale: true } => (ClientResourceStatus::Acked, ConfigStatus::Stale),
        State::Nacked { .. } => (ClientResourceStatus::Nacked, ConfigStatus::Error),
        State::Requested => (ClientResourceStatus::Requested, ConfigStatus::NotSent),
        State::DoesNotExist => (ClientResourceStatus::DoesNotExist, ConfigStatus::Unknown),
    };
    let error_state = match &s.state {
        State::Nacked { message, at, rejected, same_as } => Some(UpdateFailureState {
            failed_configuration: rejected.as_deref().and_then(|r| any(r, bodies)),
            last_update_attempt: Some(timestamp(*at)),
            details: match same_as {
                None => message.to_string(),
                Some(first) => format!("rejected in the same response as {first}; the node's message is given there"),
            },
            version_info: rejected.as_ref().map(|r| r.version().to_string()).unwrap_or_default(),
        }),
        _ => None,
    };
    GenericXdsConfig {
        type_url: s.type_url.to_string(),
        name: s.name.to_string(),
        version_info: s.held.as_ref().map(|r| r.version().to_string()).unwrap_or_default(),
        xds_config: s.held.as_deref().and_then(|r| any(r, bodies)),
        config_status: config as i32,
        client_status: client as i32,
        error_state,
        ..Default::default()
    }
}

/// When `at` was, as wall-clock time.
fn timestamp(at: Instant) -> Timestamp {
    let when = SystemTime::now() - Instant::now().saturating_duration_since(at);
    let d = when.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    Timestamp { seconds: d.as_secs() as i64, nanos: d.subsec_nanos() as i32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by(p: MatchPattern) -> NodeMatcher {
        NodeMatcher {
            node_id: Some(StringMatcher { match_pattern: Some(p), ignore_case: false }),
            ..Default::default()
        }
    }

    #[test]
    fn node_matchers_pick_by_id_and_unsupported_ones_are_named() {
        let pick = picker(&[by(MatchPattern::Prefix("edge-".into())), by(MatchPattern::Exact("core".into()))]).unwrap();
        assert!(pick("edge-1") && pick("core") && !pick("core-2") && !pick("x"));
        assert!(picker(&[]).unwrap()("anything"));
        let too_many: Vec<NodeMatcher> = (0..=MAX_MATCHERS).map(|_| by(MatchPattern::Exact("a".into()))).collect();
        let e = picker(&too_many).err().unwrap();
        assert!(e.message().contains("at most 64"), "{e:?}");
        let regex = by(MatchPattern::SafeRegex(Default::default()));
        let e = picker(&[regex]).err().unwrap();
        assert!(e.message().contains("node_matchers[0].node_id"), "{e:?}");
        let e = picker(&[NodeMatcher::default()]).err().unwrap();
        assert!(e.message().contains("no node_id"), "{e:?}");
    }
}

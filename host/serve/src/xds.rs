//! The xDS gRPC services: ADS (SotW and Delta) and the per-type LDS/RDS/CDS/EDS services
//! (Stream, Delta, Fetch). Each stream is one task-free driver: the response stream itself
//! reads requests and snapshot changes, feeds the state machine and yields what it returns,
//! so writes on a stream are ordered by construction.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use axum::Router;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use futures::FutureExt;
use futures::stream::BoxStream;
use tokio::sync::futures::OwnedNotified;
use tokio::sync::watch;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::WatchStream;
use tonic::Status;
use tracing::{debug, info, warn};
use xdst_core::delta::DeltaStream;
use xdst_core::rollout::Offer;
use xdst_core::snapshot::Snapshot;
use xdst_core::sotw::{Resources, SotwResponse, SotwStream};
use xdst_core::stream::{Event, Scope};
use xdst_core::types::{self, CLUSTER, ENDPOINT, LISTENER, ROUTE};

use crate::Serving;
use crate::codec::XdsCodec;
use crate::identity::PeerIdentity;
use crate::machine::{Machine, Sent};
use crate::metrics::{by_api_service, by_type, label};
use crate::nodes::StreamEntry;
use crate::places::{AdmittedStream, ConnectionPlace, HalfOpen, HalfOpenStream};
use crate::rollouts::NodeRollout;

/// The peer of a connection, put in each request's extensions by the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

const ADS: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService";

/// (gRPC service, method suffix, type URL, label)
pub const PER_TYPE: [(&str, &str, &str, &str); 4] = [
    ("/envoy.service.listener.v3.ListenerDiscoveryService", "Listeners", LISTENER, "lds"),
    ("/envoy.service.route.v3.RouteDiscoveryService", "Routes", ROUTE, "rds"),
    ("/envoy.service.cluster.v3.ClusterDiscoveryService", "Clusters", CLUSTER, "cds"),
    ("/envoy.service.endpoint.v3.EndpointDiscoveryService", "Endpoints", ENDPOINT, "eds"),
];

/// Every gRPC route of the xDS port.
pub fn routes(serving: &Arc<Serving>) -> Router {
    let mut r = Router::new()
        .route_service(
            &format!("{ADS}/StreamAggregatedResources"),
            stream_service::<SotwStream>(serving.clone(), Scope::Aggregated, "ads"),
        )
        .route_service(
            &format!("{ADS}/DeltaAggregatedResources"),
            stream_service::<DeltaStream>(serving.clone(), Scope::Aggregated, "ads"),
        );
    for (service, suffix, type_url, label) in PER_TYPE {
        r = r
            .route_service(
                &format!("{service}/Stream{suffix}"),
                stream_service::<SotwStream>(serving.clone(), Scope::Single(type_url), label),
            )
            .route_service(
                &format!("{service}/Delta{suffix}"),
                stream_service::<DeltaStream>(serving.clone(), Scope::Single(type_url), label),
            )
            .route_service(&format!("{service}/Fetch{suffix}"), fetch_service(serving.clone(), type_url));
    }
    let csds = crate::csds::service(serving);
    r.route_service(&format!("{}/StreamClientStatus", crate::csds::SERVICE), csds.clone())
        .route_service(&format!("{}/FetchClientStatus", crate::csds::SERVICE), csds)
}

type HttpRequest = http::Request<axum::body::Body>;

fn stream_service<M: Machine>(
    serving: Arc<Serving>,
    scope: Scope,
    label: &'static str,
) -> impl tower::Service<HttpRequest, Response = http::Response<tonic::body::Body>, Error = Infallible, Future: Send>
+ Clone
+ Send {
    tower::service_fn(move |req: HttpRequest| {
        let serving = serving.clone();
        let scope = scope.clone();
        async move {
            let peer = req.extensions().get::<PeerAddr>().map(|p| p.0);
            let identity = req.extensions().get::<PeerIdentity>().cloned();
            let place = req.extensions().get::<ConnectionPlace>().cloned();
            // Requests through tonic's decoder; responses through our own body (see
            // `codec::ResponseBody`). xdst offers no compression: a client that compresses
            // is told so, as tonic tells it.
            if let Some(encoding) = req.headers().get("grpc-encoding").filter(|e| e.as_bytes() != b"identity") {
                let status = Status::unimplemented(format!(
                    "Content is compressed with `{}` which isn't supported",
                    String::from_utf8_lossy(encoding.as_bytes())
                ));
                return Ok(status.into_http());
            }
            let requests = crate::requests::Requests::new(req.into_body(), serving.max_request_size);
            let client = crate::places::client_key(identity.as_ref(), peer);
            let unread = serving
                .unread
                .stream(&client, place.as_ref().map(|p| p.0.clone()))
                .map(|s| (s, serving.clone() as Arc<dyn crate::unread::Refusals>));
            let driver = Driver::<M>::new(serving, scope, label, (peer, identity, place), requests);
            let messages: BoxStream<'static, Result<M::Response, Status>> =
                Box::pin(futures::stream::unfold(Box::new(driver), Driver::next));
            let body = crate::codec::ResponseBody::new(messages, unread);
            let mut response = http::Response::new(tonic::body::Body::new(body));
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/grpc"));
            Ok(response)
        }
    })
}

fn fetch_service(
    serving: Arc<Serving>,
    type_url: &'static str,
) -> impl tower::Service<HttpRequest, Response = http::Response<tonic::body::Body>, Error = Infallible, Future: Send>
+ Clone
+ Send {
    tower::service_fn(move |req: HttpRequest| {
        let serving = serving.clone();
        async move {
            let limit = serving.max_request_size;
            let identity = req.extensions().get::<PeerIdentity>().cloned();
            let call = tower::service_fn(move |req: tonic::Request<DiscoveryRequest>| {
                let out = fetch(&serving, type_url, identity.as_ref(), req.into_inner()).map(tonic::Response::new);
                std::future::ready(out)
            });
            let mut grpc = tonic::server::Grpc::new(XdsCodec::<DiscoveryRequest, SotwResponse>::default())
                .max_decoding_message_size(limit);
            Ok(grpc.unary(call, req).await)
        }
    })
}

/// A one-shot fetch (gRPC Fetch* and REST): the current resources for the request.
pub fn fetch(
    serving: &Arc<Serving>,
    type_url: &'static str,
    identity: Option<&PeerIdentity>,
    mut req: DiscoveryRequest,
) -> Result<SotwResponse, Status> {
    let group = req.node.as_ref().map(|n| group_of(serving, n)).transpose()?.unwrap_or_default();
    if req.node.is_none() {
        req.node = Some(Node { id: "fetch".into(), ..Default::default() });
    }
    let node_id = req.node.as_ref().map(|n| n.id.as_str()).unwrap_or_default();
    authorize(serving, identity, &group, node_id)?;
    // A fetch is always answered in full: the client's version is compared by the caller.
    req.version_info.clear();
    req.response_nonce.clear();
    req.error_detail = None;
    let mut machine = SotwStream::new(Scope::Single(type_url));
    machine.handle_request(&req, SystemTime::now()).map_err(|e| Status::invalid_argument(e.to_string()))?;
    let snapshot = serving.cache.snapshot(&group);
    // Names asked for that do not exist are said to be so (gRFC A88).
    Ok(machine.poll_with(&snapshot, &[], Some(&snapshot)).pop().unwrap_or_else(|| SotwResponse {
        type_url: type_url.into(),
        version: xdst_core::resource::set_version(std::iter::empty()).into(),
        nonce: "".into(),
        resources: Resources::Some(Vec::new()),
        errors: Vec::new(),
    }))
}

/// The node group `node` names; INVALID_ARGUMENT for one over
/// [`xdst_core::stream::MAX_NODE_NAME`] (read from `--node-group-key`'s metadata field, which
/// the stream's own checks of id and cluster do not cover): it would go into every report.
fn group_of(serving: &Arc<Serving>, node: &Node) -> Result<String, Status> {
    let group = serving.group_key.group_of(node);
    let max = xdst_core::stream::MAX_NODE_NAME;
    if group.len() > max {
        xdst_core::limits::Limit::NodeName.hit();
        return Err(Status::invalid_argument(format!(
            "the node group (--node-group-key {}) is {} bytes; at most {max} are accepted",
            serving.group_key,
            group.len()
        )));
    }
    Ok(group)
}

/// With mTLS, whether `identity` may use `group` and `node`: PERMISSION_DENIED naming the
/// identity, the group and the node if not (counted, and logged at most once a minute per
/// identity).
fn authorize(serving: &Arc<Serving>, identity: Option<&PeerIdentity>, group: &str, node: &str) -> Result<(), Status> {
    let Some(rules) = &serving.identities else { return Ok(()) };
    let refusal = match identity {
        None => "the client certificate names no identity (no URI SAN, DNS SAN or subject CN)".to_owned(),
        Some(id) => match rules.authorize(id, group, node) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        },
    };
    let who = identity.map(|i| i.to_string()).unwrap_or_default();
    serving.metrics.refusals.get_or_create(&label("reason", "identity")).inc();
    if serving.refusal_log.allow(&who) {
        warn!(identity = %who, group, node, error = %refusal, "stream refused (logged once a minute per identity)");
    }
    Err(Status::permission_denied(refusal))
}

/// Whether a client is one of `group`'s proxies, whose rejections count toward holding a
/// document for the group (design 016, part 3b): with mTLS, an identity rule with `proxy: true`
/// says so; without it, every client is with `--nack-holds-without-mtls`, and none otherwise.
fn is_proxy(serving: &Arc<Serving>, identity: Option<&PeerIdentity>, group: &str, node: &str) -> bool {
    match (&serving.identities, identity) {
        (Some(rules), Some(id)) => rules.is_proxy(id, group, node),
        (Some(_), None) => false,
        (None, _) => serving.nacks.holds_without_mtls,
    }
}

/// The node group a stream is served: the one its node names if that is listed
/// (`--node-groups`, the resources directory's own groups, the identity rules), or, without
/// a list, one named after an intent document (a `per-gateway` Gateway's `namespace/name`:
/// always), or one of the first `--max-unlisted-node-groups` named within
/// [`crate::admission::UNLISTED_GROUP_WINDOW`]; else the default set
/// (`""`), counted and logged, so that made-up groups cost no translation.
fn admit_group(serving: &Arc<Serving>, group: String, client: &str) -> String {
    let rules = &serving.node_groups;
    let listed = |g: &str| {
        g.is_empty()
            || rules.listed.iter().any(|p| p.matches(g))
            // With mTLS the rules allowed it already.
            || serving.identities.is_some()
            || (!serving.translated && serving.cache.has_own(g))
    };
    if listed(&group) {
        return group;
    }
    let why = if !rules.listed.is_empty() {
        "it is not in --node-groups"
    } else if serving.nodes.has_group(&group)
        || serving.unlisted_groups.is_named(&group)
        || serving.unlisted_groups.admit(&group, rules.max_unlisted, Instant::now())
    {
        return group;
    } else {
        "--max-unlisted-node-groups other groups were named in the last 10 minutes"
    };
    serving.metrics.refusals.get_or_create(&label("reason", "node_group")).inc();
    if serving.refusal_log.allow(client) {
        warn!(group = %group, client, "node group not served as its own: {why}; the node gets the default set (logged once a minute per client)");
    }
    String::new()
}

struct Driver<M: Machine> {
    serving: Arc<Serving>,
    machine: Arc<Mutex<M>>,
    /// What the stream may carry: every type (ADS) or one.
    scope: Scope,
    label: &'static str,
    peer: Option<std::net::SocketAddr>,
    identity: Option<PeerIdentity>,
    requests: crate::requests::Requests<M::Request>,
    /// The stream's request rate.
    bucket: crate::admission::Bucket,
    /// What the node's group is served: the target of its rollout, and its changes. The
    /// stream's three wake-ups besides its requests (this, the node's offer, shutdown) stay
    /// registered between its wakes: registering and dropping each on every wake was a
    /// twentieth of xdst's CPU with 100,000 streams (docs/PERFORMANCE.md, issue 51).
    watch: Option<GroupWatch>,
    /// The node's offer changed (another stream of the node moved its rollout).
    offer_wake: Option<Pin<Box<OwnedNotified>>>,
    /// The node's rollout, shared with its other streams, and what it offers now.
    rollout: Option<Arc<NodeRollout>>,
    offer: Option<(u64, Arc<Offer>)>,
    /// The offer's `resync` this stream last acted on.
    resynced: u64,
    queue: VecDeque<M::Response>,
    /// The latest response per type and when it went out, for push-to-ACK latency.
    sent_at: Vec<(Arc<str>, Arc<str>, Instant)>,
    registered: Option<u64>,
    node_id: String,
    shutdown: watch::Receiver<bool>,
    shutdown_changes: WatchStream<bool>,
    finished: bool,
    /// The rollout's next deadline.
    timer: Timer,
    /// Whether the stream had its turn under `--max-new-streams-per-second`.
    admitted: bool,
    /// Until its first complete request: the stream's half-open count, on its client's streams
    /// and its connection's place, and when it must have sent it by (set once admitted).
    half_open: Option<(HalfOpenStream, Option<HalfOpen>)>,
    first_request_by: Option<Instant>,
    /// From its first complete request: the stream counted against its client's streams.
    counted: Option<AdmittedStream>,
}

enum Wake<R> {
    Request(Result<Option<R>, Status>),
    /// The node's group has a new state.
    Target,
    /// The node's rollout offers something else.
    Offer,
    /// The rollout's grace period ended.
    Deadline,
    /// No complete first request: in time (`"in time"`), or the client opened too many such
    /// streams and this is the oldest (`"evicted"`).
    NoFirstRequest(&'static str),
    Shutdown,
}

/// What a stream's requests tell its node's rollout ([`Driver::tell_rollout`]).
enum ToRollout {
    Subscribe {
        type_url: Arc<str>,
        wildcard: bool,
        names: xdst_core::names::Names,
    },
    /// An answer to a response; a NACK with its message and whether it may be analysed.
    Answer {
        type_url: Arc<str>,
        nonce: String,
        nack: Option<(String, bool)>,
    },
    Resumed {
        type_url: Arc<str>,
        holds: xdst_core::stream::Holds,
    },
}

impl<M: Machine> Driver<M> {
    fn new(
        serving: Arc<Serving>,
        scope: Scope,
        label: &'static str,
        (peer, identity, place): (Option<std::net::SocketAddr>, Option<PeerIdentity>, Option<ConnectionPlace>),
        requests: crate::requests::Requests<M::Request>,
    ) -> Self {
        serving.metrics.streams.get_or_create(&by_api_service(M::API, label)).inc();
        let shutdown = serving.shutdown.clone();
        let rate = serving.request_rate;
        let half_open =
            (serving.streams.open(&crate::places::client_key(identity.as_ref(), peer)), place.map(|p| p.0.half_open()));
        Driver {
            machine: Arc::new(Mutex::new(M::new(scope.clone()))),
            scope,
            serving,
            label,
            peer,
            identity,
            requests,
            bucket: crate::admission::Bucket::full(rate),
            watch: None,
            offer_wake: None,
            rollout: None,
            offer: None,
            resynced: 0,
            queue: VecDeque::new(),
            sent_at: Vec::new(),
            registered: None,
            node_id: String::new(),
            shutdown_changes: WatchStream::from_changes(shutdown.clone()),
            shutdown,
            finished: false,
            timer: Timer::default(),
            admitted: false,
            half_open: Some(half_open),
            first_request_by: None,
            counted: None,
        }
    }

    /// Waits for the stream's turn under `--max-new-streams-per-second` (or shutdown).
    async fn admit(&mut self) {
        self.admitted = true;
        let wait = self.serving.stream_admission.reserve(Instant::now());
        if wait.is_zero() {
            return;
        }
        let metrics = &self.serving.metrics;
        metrics.admission_waits.inc();
        // Counted down however the wait ends: the client may reset the stream meanwhile,
        // and then this future is dropped.
        struct Waiting<'a>(&'a prometheus_client::metrics::gauge::Gauge);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.dec();
            }
        }
        metrics.admission_waiting.inc();
        let _waiting = Waiting(&metrics.admission_waiting);
        let mut shutdown = self.shutdown.clone();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.wait_for(|down| *down) => {}
        }
    }

    /// The stream's next response. The driver is boxed: `unfold` moves its state in and out
    /// of this future for every response, and a pointer moves for less than the driver.
    async fn next(mut self: Box<Self>) -> Option<(Result<M::Response, Status>, Box<Self>)> {
        if !self.admitted {
            // Boxed, as every wait that is not the idle one: this future lives as long as the
            // stream, sized for its largest wait.
            Box::pin(self.admit()).await;
            // Its time to send a first complete request starts once it had its turn.
            self.first_request_by = Some(Instant::now() + self.serving.streams.first_request);
        }
        loop {
            if let Some(r) = self.queue.pop_front() {
                if self.queue.is_empty() {
                    // Idle streams hold no queue (the next poll brings its own).
                    self.queue = VecDeque::new();
                }
                return Some((Ok(r), self));
            }
            if self.finished {
                return None;
            }
            if *self.shutdown.borrow() {
                self.finished = true;
                return Some((Err(Status::unavailable("xdst is shutting down")), self));
            }
            // Another stream of the node may have moved its rollout while this one was busy
            // (its wake-up then came before this stream waited).
            if let (Some(r), Some((generation, _))) = (&self.rollout, &self.offer)
                && r.generation() != *generation
            {
                self.poll();
                continue;
            }
            self.timer.set(self.rollout.as_ref().and_then(|r| r.deadline()));
            let wake = tokio::select! {
                r = self.shutdown_changes.next() => {
                    if r.is_none() {
                        self.finished = true; // the server is gone
                    }
                    Wake::Shutdown
                }
                msg = self.requests.message() => Wake::Request(msg),
                _ = target_changed(&mut self.watch) => Wake::Target,
                _ = offer_changed(&mut self.offer_wake, &self.rollout) => Wake::Offer,
                _ = self.timer.fired() => Wake::Deadline,
                why = no_first_request(&self.half_open, self.first_request_by) => Wake::NoFirstRequest(why),
            };
            match wake {
                Wake::Shutdown => continue,
                Wake::NoFirstRequest(why) => {
                    self.finished = true;
                    return Some((Err(self.no_first_request(why)), self));
                }
                Wake::Request(Ok(Some(req))) => {
                    if let Err(status) = self.count_stream() {
                        self.finished = true;
                        return Some((Err(status), self));
                    }
                    // SOTW-6: take every request already received before answering, so a
                    // burst for one type is answered once, for the latest. What the burst
                    // tells the node's rollout is applied under one lock, in order, once it
                    // is read (even when a request in it ends the stream).
                    let mut told = Vec::new();
                    let mut ended = self.on_request(req, &mut told).err();
                    while ended.is_none() {
                        match self.requests.message().now_or_never() {
                            Some(Ok(Some(req))) => ended = self.on_request(req, &mut told).err(),
                            Some(Ok(None)) => {
                                self.finished = true;
                                break;
                            }
                            Some(Err(status)) => {
                                self.stream_error("malformed", &status);
                                self.finished = true;
                                break;
                            }
                            None => break,
                        }
                    }
                    self.tell_rollout(told);
                    if let Some(status) = ended {
                        self.finished = true;
                        return Some((Err(status), self));
                    }
                    // A target published as the burst came is taken before it is answered:
                    // an answer (an ACK) gets the latest state, never the one before it.
                    if let Some(w) = &mut self.watch {
                        let latest = w.latest.borrow().clone();
                        if !Arc::ptr_eq(&latest, &w.current) {
                            w.current = latest;
                            self.retarget();
                        }
                    }
                    self.poll();
                }
                Wake::Request(Ok(None)) => {
                    debug!(node = %self.node_id, api = M::API, service = self.label, "client closed the stream");
                    return None;
                }
                Wake::Request(Err(status)) => {
                    self.stream_error("malformed", &status);
                    self.finished = true;
                    return Some((Err(status), self));
                }
                Wake::Target => {
                    self.retarget();
                    // Serve the new offer now rather than on the next wake.
                    self.poll();
                }
                Wake::Offer => self.poll(),
                Wake::Deadline => {
                    if let Some(r) = &self.rollout {
                        r.update(&self.serving.metrics, |r, now| r.tick(now));
                        self.serving.rollouts.answered(r, &self.serving.metrics);
                    }
                    self.poll();
                }
            }
        }
    }

    /// Who the stream belongs to: its client certificate's identity, else its address.
    fn owner(&self) -> String {
        match (&self.identity, &self.peer) {
            (Some(id), _) => format!("identity {:?}", id.to_string()),
            (None, Some(peer)) => format!("address {}", peer.ip()),
            (None, None) => "an unknown client".to_owned(),
        }
    }

    /// The key the stream's client is counted under (see [`crate::places::client_key`]).
    fn client(&self) -> String {
        crate::places::client_key(self.identity.as_ref(), self.peer)
    }

    /// Its first complete request arrived: the stream counts against its client's
    /// `--max-streams-per-client`, or is refused with RESOURCE_EXHAUSTED (counted, logged once a
    /// minute per client) when the client has that many.
    fn count_stream(&mut self) -> Result<(), Status> {
        let Some((stream, _connection)) = self.half_open.take() else { return Ok(()) };
        match stream.admit() {
            Ok(counted) => {
                self.counted = Some(counted);
                Ok(())
            }
            Err(over) => {
                let client = self.client();
                if self.serving.refused("streams_per_client", &client) {
                    warn!(
                        client,
                        max = over.max,
                        api = M::API,
                        service = self.label,
                        "stream refused: its client has as many xDS streams open as --max-streams-per-client allows (logged once a minute per client)"
                    );
                }
                Err(Status::resource_exhausted(format!(
                    "{client} has {} xDS streams open, as many as --max-streams-per-client allows",
                    over.max
                )))
            }
        }
    }

    /// Ends a stream that sent no complete first request (counted, logged once a minute per
    /// client): `why` is `"in time"` or `"evicted"` (see [`Wake::NoFirstRequest`]).
    fn no_first_request(&self, why: &'static str) -> Status {
        let client = self.client();
        let first = self.serving.streams.first_request;
        let (reason, status) = if why == "evicted" {
            (
                "half_open_streams",
                Status::resource_exhausted(format!(
                    "{client} opened more streams without a complete request than --max-streams-per-client \
                     allows; the oldest is closed"
                )),
            )
        } else {
            (
                "first_request",
                Status::deadline_exceeded(format!(
                    "no complete request within {first:?} of the stream opening: a stream holds a place once it \
                     asks for something (--idle-connection-timeout, at most 10s)"
                )),
            )
        };
        if self.serving.refused(reason, &client) {
            warn!(client, api = M::API, service = self.label, peer = ?self.peer, error = %status.message(), "stream closed (logged once a minute per client)");
        }
        status
    }

    fn stream_error(&self, reason: &'static str, status: &Status) {
        self.serving.metrics.stream_errors.get_or_create(&label("reason", reason)).inc();
        warn!(node = %self.node_id, api = M::API, service = self.label, peer = ?self.peer, error = %status.message(), "closing stream");
    }

    /// Handles one request; what it tells the node's rollout goes into `told`
    /// ([`Driver::tell_rollout`]).
    fn on_request(&mut self, req: M::Request, told: &mut Vec<ToRollout>) -> Result<(), Status> {
        let limit = self.serving.request_rate;
        if limit.rate > 0 && !self.bucket.take(limit, Instant::now()) {
            let owner = self.owner();
            self.serving.metrics.refusals.get_or_create(&label("reason", "request_rate")).inc();
            if self.serving.refusal_log.allow(&owner) {
                warn!(node = %self.node_id, client = %owner, "stream ended: over its request rate (logged once a minute per client)");
            }
            return Err(Status::resource_exhausted(format!(
                "more than {} requests a second ({} at once) on one stream (--max-requests-per-second)",
                limit.rate, limit.burst
            )));
        }
        let result = self.machine.lock().unwrap().handle(&req, SystemTime::now());
        let events = match result {
            Ok(events) => events,
            Err(e) => {
                let status = Status::invalid_argument(e.to_string());
                self.stream_error("protocol", &status);
                return Err(status);
            }
        };
        if self.watch.is_none()
            && let Some(node) = M::request_node(&req)
        {
            let group = group_of(&self.serving, node)?;
            // Refused before the stream is attached to anything or sent a resource.
            authorize(&self.serving, self.identity.as_ref(), &group, &node.id)?;
            let owner = self.owner();
            let group = admit_group(&self.serving, group, &owner);
            let proxy = is_proxy(&self.serving, self.identity.as_ref(), &group, &node.id);
            let rollout = self.serving.rollouts.attach(&group, &node.id, &owner, self.scope.clone(), self.peer, proxy);
            let mut rx = self.serving.cache.watch(&group);
            let snapshot = rx.borrow_and_update().clone();
            let latest = rx.clone();
            self.watch = Some(GroupWatch { changes: WatchStream::from_changes(rx), current: snapshot.clone(), latest });
            self.node_id = node.id.clone();
            info!(
                node = %node.id,
                cluster = %node.cluster,
                group = %group,
                api = M::API,
                service = self.label,
                peer = ?self.peer,
                identity = ?self.identity.as_ref().map(|i| i.to_string()),
                "stream opened"
            );
            self.registered = Some(self.serving.nodes.add(StreamEntry {
                api: M::API,
                service: self.label,
                group,
                client: rollout.client,
                connected_at: SystemTime::now(),
                peer: self.peer,
                identity: self.identity.clone(),
                source: self.machine.clone(),
            }));
            self.serving.rollouts.retarget(&rollout, snapshot, &self.serving.metrics);
            let (generation, current) = rollout.offer();
            self.resynced = current.resync;
            self.offer = Some((generation, current));
            self.offer_wake = Some(Box::pin(rollout.changed()));
            self.rollout = Some(rollout);
        }
        if self.rollout.is_some() && self.registered.is_some() {
            let changes = self.machine.lock().unwrap().subscription_changes();
            told.extend(changes.into_iter().map(|(type_url, wildcard, names)| ToRollout::Subscribe {
                type_url,
                wildcard,
                names,
            }));
        }
        let m = &self.serving.metrics;
        for event in events {
            if self.rollout.is_some() && self.registered.is_some() {
                told.push(match &event {
                    Event::Ack { type_url, nonce, .. } => self.answer(type_url, nonce, None),
                    Event::Nack { type_url, nonce, message } => self.answer(type_url, nonce, Some(message)),
                    // An older response answered: it still moved what the client holds.
                    Event::Stale { type_url, nonce } => self.answer(type_url, nonce, M::request_error(&req)),
                    Event::Resumed { type_url, holds } => {
                        ToRollout::Resumed { type_url: type_url.clone(), holds: holds.clone() }
                    }
                });
            }
            match event {
                Event::Ack { type_url, nonce, .. } => {
                    m.ack(&type_url).inc();
                    if let Some(i) = self.sent_at.iter().position(|(t, n, _)| *t == type_url && **n == *nonce) {
                        let (_, _, at) = self.sent_at.swap_remove(i);
                        m.push_ack(&type_url).observe(at.elapsed().as_secs_f64());
                    }
                }
                Event::Nack { type_url, nonce, message } => {
                    let proxy = self.rollout.as_ref().is_some_and(|r| r.is_proxy());
                    m.nacks.get_or_create(&crate::metrics::nack(&type_url, proxy)).inc();
                    if self.serving.nacks.log.allow(&self.owner()) {
                        warn!(node = %self.node_id, r#type = types::short_name(&type_url), nonce, error = %message, "update rejected (logged once a minute per client)");
                    }
                }
                Event::Resumed { type_url, .. } => {
                    debug!(node = %self.node_id, r#type = types::short_name(&type_url), "client resumed with what it holds");
                }
                Event::Stale { type_url, nonce } => {
                    m.stale_requests.get_or_create(&by_type(&type_url)).inc();
                    debug!(node = %self.node_id, r#type = types::short_name(&type_url), nonce, "stale nonce ignored");
                }
            }
        }
        Ok(())
    }

    /// The client answered the response `nonce` of `type_url`: an ACK, or a NACK with its
    /// message. A client's rejections are split into the documents in play so many times a
    /// minute (design 016, part 3a); past that they only stop its plan.
    fn answer(&self, type_url: &Arc<str>, nonce: &str, nack: Option<&str>) -> ToRollout {
        let nack = nack.map(|message| (message.to_owned(), self.serving.nacks.analyse(&self.owner(), Instant::now())));
        ToRollout::Answer { type_url: type_url.clone(), nonce: nonce.to_owned(), nack }
    }

    /// Applies what a burst of requests told the node's rollout, in order, under one lock (an
    /// Envoy answers a change to four types with four requests, usually read at once).
    fn tell_rollout(&self, told: Vec<ToRollout>) {
        let (Some(rollout), Some(stream)) = (&self.rollout, self.registered) else { return };
        if told.is_empty() {
            return;
        }
        let m = &self.serving.metrics;
        let (mut answered, mut rejected) = (false, false);
        rollout.update(m, |r, now| {
            let mut notes = Vec::new();
            for t in told {
                notes.extend(match t {
                    ToRollout::Subscribe { type_url, wildcard, names } => {
                        r.subscribe_names(stream, &type_url, wildcard, names, now)
                    }
                    ToRollout::Answer { type_url, nonce, nack } => {
                        answered = true;
                        rejected |= nack.is_some();
                        let nack = nack
                            .as_ref()
                            .map(|(message, analyse)| xdst_core::rollout::Nack { message, analyse: *analyse });
                        r.answered_with(stream, &type_url, &nonce, nack, now)
                    }
                    ToRollout::Resumed { type_url, holds } => r.resumed(stream, &type_url, &holds, now),
                });
            }
            notes
        });
        if rejected {
            rollout.rejected();
        }
        if answered {
            self.serving.rollouts.answered(rollout, m);
        }
    }

    /// Moves the node's rollout to the group's target as the stream last took it.
    fn retarget(&self) {
        if let (Some(r), Some(w)) = (&self.rollout, &self.watch) {
            self.serving.rollouts.retarget(r, w.current.clone(), &self.serving.metrics);
        }
    }

    fn poll(&mut self) {
        let (Some(rollout), Some((generation, offer))) = (&self.rollout, &mut self.offer) else { return };
        let mut machine = self.machine.lock().unwrap();
        if rollout.generation() != *generation {
            // The rollout moved on (this stream's doing, or another's): serve the latest offer.
            let (g, next) = rollout.offer();
            if next.resync != self.resynced {
                self.resynced = next.resync;
                machine.resync();
            }
            *generation = g;
            *offer = next;
            let merged = machine.snapshot_changed(SystemTime::now());
            self.serving.metrics.changes_merged.inc_by(merged as u64);
        }
        // What the group is served tells a client which names it asked for do not exist
        // (gRFC A88): a name only the plan holds back is on its way.
        let target = self.watch.as_ref().map(|w| &*w.current);
        let out = machine.poll(&offer.snapshot, offer.hold, target);
        drop(machine);
        // Recorded as the responses are queued: the body takes them at once, and frames
        // those ready together.
        self.record_sent(&out);
        if self.queue.is_empty() {
            self.queue = VecDeque::from(out); // takes the vector's buffer, no copy
        } else {
            self.queue.extend(out);
        }
    }

    /// The responses of one poll go out: counted, timed for their ACKs, and reported to the
    /// node's rollout under one lock.
    fn record_sent(&mut self, out: &[M::Response]) {
        if out.is_empty() {
            return;
        }
        let now = Instant::now();
        for r in out {
            self.serving.metrics.response(M::API, r.type_url()).inc();
            debug!(node = %self.node_id, r#type = types::short_name(r.type_url()), nonce = %r.nonce(), resources = r.resource_count(), "response sent");
            let entry = (r.type_url().clone(), r.nonce().clone(), now);
            match self.sent_at.iter_mut().find(|(t, _, _)| t == r.type_url()) {
                Some(slot) => *slot = entry,
                None => self.sent_at.push(entry),
            }
        }
        if let (Some(rollout), Some(stream)) = (&self.rollout, self.registered) {
            rollout.update(&self.serving.metrics, |ro, _| {
                for r in out {
                    ro.sent(stream, r.type_url(), r.nonce().clone(), r.update());
                }
                Vec::new()
            });
        }
    }
}

impl<M: Machine> Drop for Driver<M> {
    fn drop(&mut self) {
        self.serving.metrics.streams.get_or_create(&by_api_service(M::API, self.label)).dec();
        // The stream's watch goes first, so that its group can be released: clients choose
        // their group (the node's cluster, by default), and a group nobody watches any more
        // must not stay behind.
        let group = self.registered.and_then(|id| self.serving.nodes.group_of(id));
        self.watch = None;
        if let Some(group) = group {
            self.serving.cache.release(&group);
        }
        if let Some(id) = self.registered {
            self.serving.nodes.remove(id);
            if let Some(r) = &self.rollout {
                self.serving.rollouts.detach(r, id, &self.scope, &self.serving.metrics);
            }
            debug!(node = %self.node_id, api = M::API, service = self.label, "stream closed");
        }
    }
}

/// What the node's group is served, and its changes.
struct GroupWatch {
    changes: WatchStream<Arc<Snapshot>>,
    /// The target the stream last took into the node's rollout.
    current: Arc<Snapshot>,
    /// The group's latest target, read when a request is answered: a target published just
    /// before the request came may not have woken the stream yet.
    latest: watch::Receiver<Arc<Snapshot>>,
}

/// Waits for the group's target to change and takes it as the stream's current one.
async fn target_changed(watch: &mut Option<GroupWatch>) {
    let Some(GroupWatch { changes, current, .. }) = watch else { return std::future::pending().await };
    match changes.next().await {
        Some(value) => *current = value,
        // The cache and the rollouts outlive every stream; if one is gone the server is going
        // down.
        None => std::future::pending().await,
    }
}

/// Resolves while the stream is half-open: when `by` passes (`"in time"`), or when it is
/// closed to make way for a newer half-open stream of its client (`"evicted"`).
/// The wait is boxed: it is needed only until the first request, and the idle stream's own
/// future would otherwise keep room for its timer for the stream's whole life.
async fn no_first_request(half_open: &Option<(HalfOpenStream, Option<HalfOpen>)>, by: Option<Instant>) -> &'static str {
    let Some((stream, _)) = half_open else { return std::future::pending().await };
    Box::pin(async move {
        let timeout = async {
            match by {
                Some(by) => tokio::time::sleep_until(by.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = timeout => "in time",
            () = stream.closed() => "evicted",
        }
    })
    .await
}

/// Waits for the node's offer to change, and registers for the next change.
async fn offer_changed(wake: &mut Option<Pin<Box<OwnedNotified>>>, rollout: &Option<Arc<NodeRollout>>) {
    let (Some(w), Some(r)) = (wake.as_mut(), rollout) else { return std::future::pending().await };
    w.as_mut().await;
    *wake = Some(Box::pin(r.changed()));
}

/// A timer kept across a driver's waits and moved only when the deadline does: one made and
/// dropped per request cost a timer-wheel insert and removal each, and requests come by the
/// thousand while rollouts have deadlines.
#[derive(Default)]
struct Timer(Option<(std::time::Instant, std::pin::Pin<Box<tokio::time::Sleep>>)>);

impl Timer {
    fn set(&mut self, deadline: Option<std::time::Instant>) {
        match (deadline, &mut self.0) {
            (None, t) => *t = None,
            (Some(d), Some((at, _))) if *at == d => {}
            (Some(d), Some((at, sleep))) => {
                *at = d;
                sleep.as_mut().reset(tokio::time::Instant::from_std(d));
            }
            (Some(d), t @ None) => {
                *t = Some((d, Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(d)))))
            }
        }
    }

    /// Resolves when the deadline passes (once: the next [`set`](Self::set) arms it again).
    async fn fired(&mut self) {
        match &mut self.0 {
            Some((_, sleep)) => {
                sleep.as_mut().await;
                self.0 = None;
            }
            None => std::future::pending().await,
        }
    }
}

//! Serving a router on a TCP listener with HTTP/1.1 and HTTP/2 (prior knowledge, as gRPC
//! clients speak it) on the same port, in the clear or over TLS, tuned for many long-lived
//! streams per connection.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::identity::PeerIdentity;
use crate::places::{Connection, ConnectionPlace, Connections, Opened, Place};
use crate::xds::PeerAddr;

/// Connection settings of a port.
#[derive(Debug, Clone, Copy)]
pub struct H2 {
    /// HTTP/2 streams a connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS):
    /// a client asking for more waits, as the protocol has it.
    pub max_concurrent_streams: u32,
    pub keepalive: Option<Duration>,
    /// Connections one client (its certificate identity, or its address) may have open;
    /// beyond, a new one is closed as soon as it is accepted (or its handshake done).
    pub max_connections_per_client: usize,
    /// A connection with no request in flight for this long is closed, and one must start
    /// its first request within this (at most [`FIRST_REQUEST_TIMEOUT`]): a connection that
    /// never asks for anything must not hold a place under `max_connections_per_client`.
    pub idle_timeout: Duration,
}

/// The default for [`H2::max_concurrent_streams`]: Envoy opens one ADS stream (or one per
/// type), a proxyless gRPC client one per xDS server.
pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 128;
/// The default for [`H2::max_connections_per_client`] (clients behind one NAT address share it).
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: usize = 1024;
/// The default for [`H2::idle_timeout`]. An Envoy's or a gRPC client's xDS connection always
/// carries its stream; Prometheus and browsers reconnect when they need to.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How soon a new connection must start its first request (the same as a TLS handshake's
/// limit, which runs before it).
pub const FIRST_REQUEST_TIMEOUT: Duration = crate::tls::HANDSHAKE_TIMEOUT;

impl Default for H2 {
    fn default() -> Self {
        H2 {
            max_concurrent_streams: DEFAULT_MAX_STREAMS_PER_CONNECTION,
            keepalive: Some(Duration::from_secs(30)),
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// The client a request came from, as connections are counted and refusals logged: its
/// certificate identity, else its address (from what the accept loop put in the request's
/// extensions).
pub fn client_of(extensions: &http::Extensions) -> String {
    crate::places::client_key(extensions.get::<PeerIdentity>(), extensions.get::<PeerAddr>().map(|p| p.0))
}

/// A connection accepted (and its TLS handshake done): who it is from.
struct Accepted<I> {
    io: I,
    peer: std::net::SocketAddr,
    identity: Option<PeerIdentity>,
    /// Its client, for the limits and the refusal log: the identity, else the address.
    client: String,
    /// What it carries, and the signal that closes it (see [`crate::places`]).
    place: Arc<Place>,
}

/// Serves one accepted connection (in the clear or after its TLS handshake) until it ends,
/// until it has been idle for `h2.idle_timeout`, or until it is closed to make way for another
/// of its client's (each counted, and logged once a minute per client).
async fn serve_connection<I>(
    serving: &Arc<crate::Serving>,
    name: &'static str,
    conn: Accepted<I>,
    router: Router,
    builder: &auto::Builder<TokioExecutor>,
    watcher: hyper_util::server::graceful::Watcher,
    h2: &H2,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Accepted { io, peer, identity, client, place } = conn;
    let client = client.as_str();
    let service = tagged(router, peer, identity, place.clone());
    let conn = watcher.watch(builder.serve_connection_with_upgrades(TokioIo::new(io), service).into_owned());
    tokio::select! {
        ended = conn => if let Err(e) = ended {
            debug!(server = name, %peer, error = %e, "connection ended with an error");
        },
        what = place.idle(h2.idle_timeout, FIRST_REQUEST_TIMEOUT) => {
            if serving.refused("idle_connection", client) {
                warn!(
                    server = name,
                    client,
                    %peer,
                    "connection closed: {what} for {:?} (--idle-connection-timeout; logged once a minute per client)",
                    if what == "no request" { h2.idle_timeout.min(FIRST_REQUEST_TIMEOUT) } else { h2.idle_timeout }
                );
            }
        }
        () = place.closed() => {
            if serving.refused("evicted_connection", client) {
                warn!(
                    server = name,
                    client,
                    %peer,
                    "connection closed to make way for a new one of its client: it carried nothing but streams \
                     without a complete request, and the client has as many connections as \
                     --max-connections-per-client allows (logged once a minute per client)"
                );
            }
        }
    }
}

/// The router as a connection's service, tagging each request with the connection's peer
/// and client identity (without re-layering the router per connection).
fn tagged(
    router: Router,
    peer: std::net::SocketAddr,
    identity: Option<PeerIdentity>,
    place: Arc<Place>,
) -> TowerToHyperService<
    impl tower::Service<
        http::Request<hyper::body::Incoming>,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
        Future: Send,
    > + Clone,
> {
    TowerToHyperService::new(tower::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(PeerAddr(peer));
        if let Some(id) = &identity {
            req.extensions_mut().insert(id.clone());
        }
        req.extensions_mut().insert(ConnectionPlace(place.clone()));
        let in_flight = place.begin();
        let response = tower::ServiceExt::oneshot(router.clone(), req);
        // Boxed: hyper runs each stream as a task sized for the largest of this future and
        // the response body's pump, for as long as the stream lives; the router's future is
        // large and needed only until the response starts (about 600 bytes per idle stream).
        Box::pin(async move {
            let response = response.await?;
            // The request is in flight until its response body ends (a gRPC stream's, when
            // the stream does).
            Ok(response.map(|body| {
                axum::body::Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
                    let _in_flight = &in_flight;
                    frame
                }))
            }))
        })
    }))
}

/// Counts a connection of `client` (closing another of its that carries no work, when it has
/// as many as it may); None (refusal counted, logged once a minute per client) when every one
/// it has carries work.
fn counted_connection(
    serving: &Arc<crate::Serving>,
    name: &'static str,
    connections: &Arc<Connections>,
    client: &str,
    place: &Arc<Place>,
) -> Option<Connection> {
    match connections.open(client, place) {
        Opened::Counted { connection, .. } => Some(connection),
        Opened::Refused => {
            if serving.refused("connections_per_client", client) {
                warn!(
                    server = name,
                    client,
                    "connection closed: the client has as many open as --max-connections-per-client allows, each \
                     carrying a request (logged once a minute per client)"
                );
            }
            None
        }
    }
}

/// Serves until `shutdown` turns true, then gives open connections `grace` to finish. With
/// `tls`, every connection is a TLS one: the handshake runs in the connection's own task
/// (never in the accept loop), within [`crate::tls::HANDSHAKE_TIMEOUT`].
pub async fn serve(
    name: &'static str,
    listener: TcpListener,
    router: Router,
    h2: H2,
    tls: Option<Arc<rustls::ServerConfig>>,
    serving: Arc<crate::Serving>,
    grace: Duration,
) {
    let mut shutdown = serving.shutdown.clone();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(h2.max_concurrent_streams)
        // h2 allows half the connection window in unread small DATA frames before it
        // answers GOAWAY ENHANCE_YOUR_CALM ("too_many_data_frames"); with hyper's 1 MiB
        // default that is ~3,000 pending ACKs, fewer than a connection carrying thousands
        // of ADS streams sends at once.
        .initial_connection_window_size(64 << 20)
        .keep_alive_interval(h2.keepalive)
        .keep_alive_timeout(Duration::from_secs(20));
    let builder = Arc::new(builder);
    let connections = Arc::new(Connections::new(h2.max_connections_per_client));
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        warn!(server = name, error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                debug!(server = name, %peer, "connection accepted");
                let (router, builder, watcher) = (router.clone(), builder.clone(), graceful.watcher());
                match &tls {
                    None => {
                        let client = peer.ip().to_string();
                        let place = Place::new();
                        let Some(counted) = counted_connection(&serving, name, &connections, &client, &place) else {
                            continue;
                        };
                        let serving = serving.clone();
                        tokio::spawn(async move {
                            let accepted = Accepted { io: stream, peer, identity: None, client, place };
                            serve_connection(&serving, name, accepted, router, &builder, watcher, &h2).await;
                            drop(counted);
                        });
                    }
                    Some(acceptor) => {
                        let handshake = acceptor.accept(stream);
                        let (serving, connections) = (serving.clone(), connections.clone());
                        tokio::spawn(async move {
                            let stream = match tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, handshake).await {
                                Ok(Ok(s)) => s,
                                Ok(Err(e)) => {
                                    // No client certificate, one from another CA, an expired
                                    // one: the client only sees an alert, so say it here.
                                    serving.metrics.refusals.get_or_create(&crate::metrics::label("reason", "tls_handshake")).inc();
                                    if serving.refusal_log.allow(&peer.ip().to_string()) {
                                        warn!(server = name, %peer, error = %e, "TLS handshake failed (logged once a minute per address)");
                                    }
                                    return;
                                }
                                Err(_) => {
                                    debug!(server = name, %peer, "TLS handshake timed out");
                                    return;
                                }
                            };
                            // A client certificate, when there is one, was verified in the
                            // handshake; what it names goes with every request.
                            let identity = stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|chain| chain.first())
                                .and_then(|leaf| crate::identity::of_certificate(leaf));
                            debug!(server = name, %peer, identity = ?identity.as_ref().map(|i| i.to_string()), "TLS handshake done");
                            let client = match &identity {
                                Some(id) => format!("identity {:?}", id.to_string()),
                                None => peer.ip().to_string(),
                            };
                            let place = Place::new();
                            let Some(counted) = counted_connection(&serving, name, &connections, &client, &place) else {
                                return;
                            };
                            let accepted = Accepted { io: stream, peer, identity, client, place };
                            serve_connection(&serving, name, accepted, router, &builder, watcher, &h2).await;
                            drop(counted);
                        });
                    }
                }
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    info!(server = name, "stopped accepting; draining connections");
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        warn!(server = name, "connections still open after {grace:?}; closing them");
    }
}

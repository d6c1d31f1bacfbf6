//! An echo backend in the manner of the Kubernetes Gateway API conformance suite's
//! `echo-basic`: it answers every request with `200` and a JSON description of the request as
//! it arrived, in the shape the upstream conformance suite reads (`path`, `host`, `method`,
//! `proto`, `headers` as Go's `http.Header`, `namespace`, `pod`). Conformance tests send
//! requests through a real Envoy to these backends and check what reached them.
//!
//! HTTP/1.1 and cleartext HTTP/2 (prior knowledge) are served on the same port. A request
//! header `X-Echo-Set-Header: X-Foo: bar, X-Baz:qux` makes the echo add `X-Foo: bar` and
//! `X-Baz: qux` to its response; a query parameter `delay=1s` (or `250ms`, at most
//! [`MAX_DELAY`]) makes it wait that long before answering, for timeout tests.
//!
//! Retries are simulated as the upstream echo does: a request with `uuid=U&succeedAfter=N`
//! fails its first N attempts (per `U`), with `responseCode` when given and otherwise by
//! dropping the connection, each after `delayRetry` when given. The paths it received are kept
//! ([`Echo::paths`]), so a test can see what a mirror got. A websocket handshake is accepted,
//! and every message is echoed back. Over TLS, the certificates a client presented are in the
//! answer as `tls.peerCertificates` (PEM), and the server name it asked for (SNI) as
//! `tls.serverName`, as upstream's echo reports them.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, Version, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// Request bodies are read up to this many bytes, then the rest is left unread.
const BODY_LIMIT: usize = 1 << 20;
/// The longest `delay` a request may ask for.
pub const MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(10);

/// Paths kept for [`Echo::paths`], and retry simulations tracked, at most.
const KEPT: usize = 10_000;

/// A query parameter's value.
fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// A duration query parameter: `<n>s` or `<n>ms`.
fn duration(query: &str, name: &str) -> Option<std::time::Duration> {
    let value = param(query, name)?;
    let d = match value.strip_suffix("ms") {
        Some(ms) => std::time::Duration::from_millis(ms.parse().ok()?),
        None => std::time::Duration::from_secs(value.strip_suffix('s')?.parse().ok()?),
    };
    Some(d.min(MAX_DELAY))
}

/// What every connection of one echo shares.
struct Shared {
    namespace: String,
    pod: String,
    requests: AtomicU64,
    paths: std::sync::Mutex<std::collections::VecDeque<String>>,
    /// Retry simulations: attempts seen per `uuid`.
    attempts: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

/// A simulated failure that drops the connection.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("retry simulation: connection dropped")
    }
}

impl std::error::Error for Dropped {}

/// An echo server on 127.0.0.1 (a port the OS picked). Stops, with its connections, when dropped.
pub struct Echo {
    pub addr: SocketAddr,
    pub pod: String,
    pub namespace: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Echo {
    /// Binds 127.0.0.1:0 and serves until dropped.
    pub async fn start(namespace: &str, pod: &str) -> io::Result<Echo> {
        Echo::start_with(namespace, pod, None).await
    }

    /// [`start`](Self::start), serving over TLS with `tls` (HTTP/1.1 and HTTP/2 by ALPN).
    pub async fn start_tls(namespace: &str, pod: &str, tls: tokio_rustls::TlsAcceptor) -> io::Result<Echo> {
        Echo::start_with(namespace, pod, Some(tls)).await
    }

    async fn start_with(namespace: &str, pod: &str, tls: Option<tokio_rustls::TlsAcceptor>) -> io::Result<Echo> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            requests: AtomicU64::new(0),
            paths: Default::default(),
            attempts: Default::default(),
        });
        let serving = shared.clone();
        let task = tokio::spawn(async move {
            // Owned by this task, so aborting it also aborts every connection.
            let mut conns = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                while conns.try_join_next().is_some() {}
                let shared = serving.clone();
                let tls = tls.clone();
                conns.spawn(async move {
                    let service = |peer: Option<Arc<Value>>| {
                        service_fn(move |req| {
                            let (shared, peer) = (shared.clone(), peer.clone());
                            async move {
                                let response = echo(req, &shared, peer.as_deref()).await;
                                shared.requests.fetch_add(1, Ordering::Relaxed);
                                response
                            }
                        })
                    };
                    let builder = auto::Builder::new(TokioExecutor::new());
                    match tls {
                        None => {
                            let _ = builder.serve_connection_with_upgrades(TokioIo::new(stream), service(None)).await;
                        }
                        Some(tls) => {
                            let Ok(stream) = tls.accept(stream).await else { return };
                            let session = stream.get_ref().1;
                            let certs: Vec<String> =
                                session.peer_certificates().into_iter().flatten().map(|c| pem(c)).collect();
                            let mut seen = json!({"serverName": session.server_name().unwrap_or_default()});
                            if !certs.is_empty() {
                                seen["peerCertificates"] = json!(certs);
                            }
                            let peer = Some(Arc::new(seen));
                            let _ = builder.serve_connection_with_upgrades(TokioIo::new(stream), service(peer)).await;
                        }
                    }
                });
            }
        });
        Ok(Echo { addr, pod: pod.to_owned(), namespace: namespace.to_owned(), shared, task })
    }

    /// How many requests it has answered.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// The paths (with query) of the requests it received, oldest first (the last [`KEPT`]).
    pub fn paths(&self) -> Vec<String> {
        self.shared.paths.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect()
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A websocket handshake: answered with `101`, then every text and binary message is sent
/// back as it came.
fn websocket(mut req: Request<Incoming>) -> Option<Response<Full<Bytes>>> {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::protocol::Role;
    let wants = req.headers().get(header::UPGRADE).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
    let key = req.headers().get("sec-websocket-key")?.as_bytes().to_owned();
    if !wants {
        return None;
    }
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else { return };
        let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        let (mut tx, mut rx) = ws.split();
        while let Some(Ok(message)) = rx.next().await {
            if message.is_text() || message.is_binary() {
                if tx.send(message).await.is_err() {
                    break;
                }
            } else if message.is_close() {
                break;
            }
        }
    });
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(&key);
    h.insert("sec-websocket-accept", HeaderValue::try_from(accept).ok()?);
    Some(response)
}

/// A certificate (DER) as PEM.
fn pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or("")).collect();
    format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", lines.join("\n"))
}

/// Answers one request; `peer`: over TLS, what the answer says of it (`serverName`, and
/// `peerCertificates`: the certificates the client presented, PEM).
async fn echo(req: Request<Incoming>, shared: &Shared, peer: Option<&Value>) -> Result<Response<Full<Bytes>>, Dropped> {
    if req.headers().contains_key(header::UPGRADE) {
        return Ok(websocket(req).unwrap_or_else(|| {
            let mut r = Response::new(Full::new(Bytes::from_static(b"not a websocket handshake")));
            *r.status_mut() = http::StatusCode::BAD_REQUEST;
            r
        }));
    }
    let (namespace, pod) = (shared.namespace.as_str(), shared.pod.as_str());
    let (parts, mut body) = req.into_parts();
    let query = parts.uri.query().unwrap_or("");
    {
        let mut paths = shared.paths.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if paths.len() == KEPT {
            paths.pop_front();
        }
        paths.push_back(parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned());
    }
    if let (Some(uuid), Some(after)) =
        (param(query, "uuid"), param(query, "succeedAfter").and_then(|n| n.parse::<u32>().ok()))
    {
        let attempt = {
            let mut attempts = shared.attempts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if attempts.len() >= KEPT && !attempts.contains_key(uuid) {
                attempts.clear();
            }
            let n = attempts.entry(uuid.to_owned()).or_insert(0);
            *n += 1;
            *n
        };
        if attempt <= after {
            if let Some(d) = duration(query, "delayRetry") {
                tokio::time::sleep(d).await;
            }
            return match param(query, "responseCode").and_then(|c| http::StatusCode::from_bytes(c.as_bytes()).ok()) {
                Some(code) => {
                    let mut r = Response::new(Full::new(Bytes::from_static(b"retry simulation")));
                    *r.status_mut() = code;
                    Ok(r)
                }
                None => Err(Dropped),
            };
        }
    }
    let mut read = 0;
    while read < BODY_LIMIT {
        match body.frame().await {
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, Bytes::len),
            _ => break,
        }
    }
    if let Some(d) = duration(query, "delay") {
        tokio::time::sleep(d).await;
    }
    let host = match parts.headers.get(header::HOST) {
        Some(h) => String::from_utf8_lossy(h.as_bytes()).into_owned(),
        None => parts.uri.authority().map(|a| a.to_string()).unwrap_or_default(),
    };
    // Go's `http.Header` as its server fills it: the Host header is moved to `host`.
    let mut headers = Map::new();
    for (name, value) in parts.headers.iter().filter(|(name, _)| *name != header::HOST) {
        let values = headers.entry(go_canonical(name.as_str())).or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(values) = values {
            values.push(String::from_utf8_lossy(value.as_bytes()).into());
        }
    }
    let proto = match parts.version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    };
    let mut body = json!({
        "path": parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        "host": host,
        "method": parts.method.as_str(),
        "proto": proto,
        "headers": headers,
        "namespace": namespace,
        "pod": pod,
    });
    if let Some(peer) = peer {
        body["tls"] = peer.clone();
    }
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    let out = response.headers_mut();
    out.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for list in parts.headers.get_all("x-echo-set-header") {
        let Ok(list) = list.to_str() else { continue };
        for pair in list.split(',') {
            let Some((name, value)) = pair.trim().split_once(':') else { continue };
            if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.trim()), HeaderValue::try_from(value.trim())) {
                out.append(name, value);
            }
        }
    }
    Ok(response)
}

/// A header name as Go's `http.CanonicalHeaderKey` writes it: `x-echo-set-header` becomes
/// `X-Echo-Set-Header`.
fn go_canonical(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let c = if upper { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() };
            upper = c == '-';
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Empty;
    use tokio::net::TcpStream;

    async fn send(echo: &Echo, h2: bool, req: Request<Empty<Bytes>>) -> (Response<()>, Value) {
        let io = TokioIo::new(TcpStream::connect(echo.addr).await.unwrap());
        let response = if h2 {
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.unwrap();
            tokio::spawn(conn);
            send.send_request(req).await.unwrap()
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            send.send_request(req).await.unwrap()
        };
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        assert_eq!(parts.headers[header::CONTENT_TYPE], "application/json");
        (Response::from_parts(parts, ()), serde_json::from_slice(&body).unwrap())
    }

    fn request(uri: &str) -> http::request::Builder {
        Request::get(uri)
            .header("x-custom", "one")
            .header("x-custom", "two")
            .header("X-Echo-Set-Header", "X-Foo: bar, X-Baz:qux,malformed")
    }

    fn check(response: &Response<()>, body: &Value) {
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-foo"], "bar");
        assert_eq!(response.headers()["x-baz"], "qux");
        assert_eq!(body["path"], "/foo?a=b");
        assert_eq!(body["method"], "GET");
        assert_eq!(body["headers"]["X-Custom"], json!(["one", "two"]));
        assert_eq!(body["headers"]["X-Echo-Set-Header"], json!(["X-Foo: bar, X-Baz:qux,malformed"]));
        assert_eq!((body["namespace"].as_str(), body["pod"].as_str()), (Some("ns"), Some("pod-1")));
    }

    #[tokio::test]
    async fn http1() {
        let echo = Echo::start("ns", "pod-1").await.unwrap();
        // The Host header as it arrived, port included: the conformance cases check it.
        let req = request("/foo?a=b").header("host", "example.com:8080").body(Empty::new()).unwrap();
        let (response, body) = send(&echo, false, req).await;
        check(&response, &body);
        assert_eq!(body["host"], "example.com:8080");
        assert_eq!(body["proto"], "HTTP/1.1");
        assert!(body["headers"].get("Host").is_none());
        assert_eq!(echo.requests(), 1);
    }

    #[tokio::test]
    async fn http2_prior_knowledge() {
        let echo = Echo::start("ns", "pod-1").await.unwrap();
        let req = request("http://example.com:8080/foo?a=b").version(Version::HTTP_2).body(Empty::new()).unwrap();
        let (response, body) = send(&echo, true, req).await;
        check(&response, &body);
        assert_eq!(body["host"], "example.com:8080");
        assert_eq!(body["proto"], "HTTP/2.0");
        assert_eq!(echo.requests(), 1);
    }

    #[test]
    fn canonical_names() {
        assert_eq!(go_canonical("x-echo-set-header"), "X-Echo-Set-Header");
        assert_eq!(go_canonical("USER-AGENT"), "User-Agent");
    }
}

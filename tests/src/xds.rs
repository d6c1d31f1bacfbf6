//! A test xDS client that can ACK, NACK and send anything, over real gRPC.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// How long a test waits for a response it expects.
pub const WAIT: Duration = Duration::from_secs(5);

pub fn node(id: &str, cluster: &str) -> Option<Node> {
    Some(Node { id: id.into(), cluster: cluster.into(), ..Default::default() })
}

pub async fn channel(addr: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.expect("connecting to xdst")
}

/// One bidirectional stream.
pub struct XdsStream<Req, Resp> {
    tx: mpsc::Sender<Req>,
    rx: tonic::Streaming<Resp>,
}

pub type Sotw = XdsStream<DiscoveryRequest, DiscoveryResponse>;
pub type Delta = XdsStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse>;

impl<Req, Resp> XdsStream<Req, Resp> {
    pub fn new(tx: mpsc::Sender<Req>, rx: tonic::Streaming<Resp>) -> Self {
        XdsStream { tx, rx }
    }

    pub async fn send(&self, req: Req) {
        self.tx.send(req).await.expect("stream is open");
    }

    /// The next response; fails the test after [`WAIT`].
    pub async fn recv(&mut self) -> Resp {
        match crate::wait::within("a response", WAIT, self.rx.message()).await {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => panic!("stream ended while a response was expected"),
            Ok(Err(status)) => panic!("stream failed while a response was expected: {status}"),
            Err(e) => panic!("{e}"),
        }
    }

    /// Issue 34: the next response is `signal`, a response to something the test did after
    /// the moment it checks (a probe request on this stream, a later change): the stream is
    /// ordered, so anything wrong would have arrived first. Fails naming `why` otherwise.
    pub async fn expect_nothing_before(&mut self, why: &str, signal: &str, is_signal: impl Fn(&Resp) -> bool) -> Resp
    where
        Resp: std::fmt::Debug,
    {
        let next = crate::wait::within(signal, WAIT, self.rx.message()).await;
        match next {
            Ok(Ok(Some(r))) if is_signal(&r) => r,
            Ok(Ok(Some(r))) => panic!("a response arrived before {signal} ({why}): {r:?}"),
            Ok(Ok(None)) => panic!("stream ended before {signal} ({why})"),
            Ok(Err(status)) => panic!("stream failed before {signal} ({why}): {status}"),
            Err(e) => panic!("{e} ({why})"),
        }
    }

    /// The next response, or the status the stream ended with (OK when it ended cleanly).
    pub async fn next_or_status(&mut self) -> Result<Resp, tonic::Status> {
        match self.rx.message().await {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(tonic::Status::ok("")),
            Err(status) => Err(status),
        }
    }

    /// The status the server closed the stream with.
    pub async fn closed_with(&mut self) -> tonic::Status {
        loop {
            match crate::wait::within("the stream to close", WAIT, self.rx.message())
                .await
                .unwrap_or_else(|e| panic!("{e}"))
            {
                Ok(Some(_)) => continue,
                Ok(None) => return tonic::Status::ok(""),
                Err(s) => return s,
            }
        }
    }
}

pub async fn sotw_ads(addr: std::net::SocketAddr) -> Sotw {
    sotw_ads_on(channel(addr).await).await
}

/// A SotW ADS stream on `channel` (a TLS one, say).
pub async fn sotw_ads_on(channel: Channel) -> Sotw {
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let (tx, rx) = mpsc::channel(16);
    let resp = client.stream_aggregated_resources(ReceiverStream::new(rx)).await.expect("opening ADS").into_inner();
    XdsStream::new(tx, resp)
}

pub async fn delta_ads(addr: std::net::SocketAddr) -> Delta {
    let mut client = AggregatedDiscoveryServiceClient::new(channel(addr).await);
    let (tx, rx) = mpsc::channel(16);
    let resp =
        client.delta_aggregated_resources(ReceiverStream::new(rx)).await.expect("opening delta ADS").into_inner();
    XdsStream::new(tx, resp)
}

/// A SotW request with a node.
pub fn sotw_req(type_url: &str, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.into(),
        resource_names: names.iter().map(|s| s.to_string()).collect(),
        node: node("test-node", "test"),
        ..Default::default()
    }
}

/// The ACK of `resp`, keeping the subscription `names`.
pub fn sotw_ack(resp: &DiscoveryResponse, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: resp.version_info.clone(),
        response_nonce: resp.nonce.clone(),
        node: None,
        ..sotw_req(&resp.type_url, names)
    }
}

/// A NACK of `resp`, keeping `kept` as the accepted version.
pub fn sotw_nack(resp: &DiscoveryResponse, names: &[&str], kept: &str, message: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: kept.into(),
        error_detail: Some(RpcStatus { code: 3, message: message.into(), details: vec![] }),
        ..sotw_ack(resp, names)
    }
}

pub fn delta_req(type_url: &str, subscribe: &[&str], unsubscribe: &[&str]) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: type_url.into(),
        resource_names_subscribe: subscribe.iter().map(|s| s.to_string()).collect(),
        resource_names_unsubscribe: unsubscribe.iter().map(|s| s.to_string()).collect(),
        node: node("test-node", "test"),
        ..Default::default()
    }
}

pub fn delta_ack(resp: &DeltaDiscoveryResponse) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest { response_nonce: resp.nonce.clone(), node: None, ..delta_req(&resp.type_url, &[], &[]) }
}

/// Names of the resources in a SotW response (decoded from each Any's `name` field).
pub fn sotw_names(resp: &DiscoveryResponse) -> Vec<String> {
    let mut names: Vec<String> = resp.resources.iter().map(|any| resource_name(&any.type_url, &any.value)).collect();
    names.sort();
    names
}

pub fn delta_names(resp: &DeltaDiscoveryResponse) -> Vec<String> {
    let mut names: Vec<String> = resp.resources.iter().map(|r| r.name.clone()).collect();
    names.sort();
    names
}

fn resource_name(type_url: &str, body: &[u8]) -> String {
    let desc = xdst_core::descriptors::message_for_type_url(type_url).expect("known type");
    let msg = prost_reflect::DynamicMessage::decode(desc, body).expect("decodes");
    xdst_core::decode::resource_name(&msg).unwrap_or_default()
}

/// `GET` on the admin port; returns (status, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    http(addr, "GET", path, "").await
}

/// A minimal HTTP/1.1 request with `Connection: close`.
pub async fn http(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    http_with(addr, method, path, &[], body).await
}

/// [`http`] with extra headers; a `Host` among them replaces the address.
pub async fn http_with(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let is_host = |k: &str| k.eq_ignore_ascii_case("host");
    let host = headers.iter().find(|(k, _)| is_host(k)).map_or_else(|| addr.to_string(), |(_, v)| v.to_string());
    let extra: String = headers.iter().filter(|(k, _)| !is_host(k)).map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_owned() };
    (status, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

/// A gRPC message frame: the uncompressed flag, the length, the message.
pub fn grpc_frame(message: &impl prost::Message) -> bytes::Bytes {
    let body = message.encode_to_vec();
    let mut frame = Vec::with_capacity(5 + body.len());
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(body.len()).expect("a small message").to_be_bytes());
    frame.extend_from_slice(&body);
    frame.into()
}

/// What a [`RawStream`]'s request body is sent through; the body stays open while it lives.
pub type RawBody = mpsc::Sender<Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>>;

/// An ADS stream (SotW) on an HTTP/2 connection of its own, spoken with hyper directly so the
/// test controls what a gRPC library would not let it: the request body (part of a message,
/// and never the rest) and flow control (a client that never polls the response body never
/// gives the server more window than `window`, so what it is sent stays queued at the server).
pub struct RawStream {
    /// The request body: frames sent here go to the server as DATA.
    pub body: RawBody,
    /// The response head (its body unread until the test reads it).
    pub response: tokio::task::JoinHandle<Result<http::Response<hyper::body::Incoming>, hyper::Error>>,
    /// The connection's task: finished once the server closed the connection.
    pub connection: tokio::task::JoinHandle<()>,
    /// Keeps the connection's task running while the stream is unread (hyper ends it once
    /// every sender is gone).
    _sender: hyper::client::conn::http2::SendRequest<RawRequestBody>,
}

type RawRequestBody =
    http_body_util::StreamBody<ReceiverStream<Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>>>;

impl RawStream {
    /// Opens the connection (stream and connection windows of `window` bytes) and the stream,
    /// and sends `first` as the start of the request body.
    pub async fn open(addr: std::net::SocketAddr, window: u32, first: bytes::Bytes) -> anyhow::Result<RawStream> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let (mut send, conn) = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(window)
            .initial_connection_window_size(window)
            .adaptive_window(false)
            .handshake(hyper_util::rt::TokioIo::new(tcp))
            .await?;
        let connection = tokio::spawn(async move {
            let _ = conn.await;
        });
        let (body, rx) = mpsc::channel(4);
        body.send(Ok(hyper::body::Frame::data(first))).await.expect("the receiver is here");
        let req = http::Request::post(format!(
            "http://{addr}/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(http_body_util::StreamBody::new(ReceiverStream::new(rx)))?;
        let sender = send.clone();
        let response = tokio::spawn(async move {
            send.ready().await?;
            send.send_request(req).await
        });
        Ok(RawStream { body, response, connection, _sender: sender })
    }

    /// Whether the server has closed the stream's connection.
    pub fn connection_closed(&self) -> bool {
        self.connection.is_finished()
    }

    /// Starts reading the response (its window is given back as it is read).
    pub async fn reader(&mut self) -> anyhow::Result<RawReader> {
        let response = (&mut self.response).await??;
        Ok(RawReader { body: response.into_body(), buf: bytes::BytesMut::new() })
    }
}

/// The messages of a [`RawStream`]'s response, read once the test starts reading.
pub struct RawReader {
    body: hyper::body::Incoming,
    buf: bytes::BytesMut,
}

impl RawReader {
    /// The next gRPC message, decoded; fails after [`WAIT`] or when the body ends.
    pub async fn next<M: prost::Message + Default>(&mut self) -> anyhow::Result<M> {
        use bytes::Buf as _;
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes(self.buf[1..5].try_into().expect("4 bytes")) as usize;
                if self.buf.len() >= 5 + len {
                    self.buf.advance(5);
                    return Ok(M::decode(self.buf.split_to(len).freeze())?);
                }
            }
            let frame = crate::wait::within("a message", WAIT, http_body_util::BodyExt::frame(&mut self.body)).await?;
            match frame {
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => anyhow::bail!("the response body failed: {e}"),
                None => anyhow::bail!("the response body ended"),
            }
        }
    }
}

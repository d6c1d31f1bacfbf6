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

//! A gRPC echo backend and client for the Gateway API GRPCRoute cases, in the manner of the
//! upstream suite's gRPC echo: the service `gateway_api_conformance.echo_basic.grpcecho.GrpcEcho`
//! with the unary methods `Echo`, `EchoTwo` and `EchoThree`, each answering with which method
//! was called, the request metadata it received, and which namespace and pod it is.
//!
//! The messages are this harness's own (the upstream `.proto` is not needed: client and server
//! are both here, and Envoy routes by method path, never by message).

use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;

/// The service every GRPCRoute case routes.
pub const SERVICE: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";
/// Its methods.
pub const METHODS: [&str; 3] = ["Echo", "EchoTwo", "EchoThree"];

#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoResponse {
    /// `/<service>/<method>`, as the server saw the call.
    #[prost(string, tag = "1")]
    pub fully_qualified_method: String,
    /// The request metadata, lowercased keys.
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<Header>,
    #[prost(string, tag = "3")]
    pub namespace: String,
    #[prost(string, tag = "4")]
    pub pod: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Header {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

impl EchoResponse {
    /// The values of a request header the server received, joined with `,`.
    pub fn header(&self, key: &str) -> Option<String> {
        let values: Vec<&str> =
            self.headers.iter().filter(|h| h.key.eq_ignore_ascii_case(key)).map(|h| h.value.as_str()).collect();
        (!values.is_empty()).then(|| values.join(","))
    }
}

/// A gRPC echo server on 127.0.0.1 (h2c); stops when dropped.
pub struct GrpcEcho {
    pub addr: SocketAddr,
    pub pod: String,
    pub namespace: String,
    task: JoinHandle<()>,
}

impl Drop for GrpcEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Who {
    namespace: Arc<str>,
    pod: Arc<str>,
}

impl tonic::server::NamedService for Who {
    const NAME: &'static str = SERVICE;
}

impl tower::Service<http::Request<tonic::body::Body>> for Who {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let path = req.uri().path().to_owned();
        let known = path.strip_prefix(&format!("/{SERVICE}/")).is_some_and(|m| METHODS.contains(&m));
        let who = self.clone();
        Box::pin(async move {
            if !known {
                return Ok(tonic::Status::unimplemented(format!("no method {path}")).into_http());
            }
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<EchoResponse, EchoRequest>::default());
            Ok(grpc.unary(Unary { who, path }, req).await)
        })
    }
}

struct Unary {
    who: Who,
    path: String,
}

impl tonic::server::UnaryService<EchoRequest> for Unary {
    type Response = EchoResponse;
    type Future = BoxFuture<'static, Result<tonic::Response<EchoResponse>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<EchoRequest>) -> Self::Future {
        let headers = request
            .metadata()
            .iter()
            .filter_map(|kv| match kv {
                tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                    Some(Header { key: k.as_str().to_owned(), value: v.to_str().unwrap_or("").to_owned() })
                }
                tonic::metadata::KeyAndValueRef::Binary(..) => None,
            })
            .collect();
        let response = EchoResponse {
            fully_qualified_method: self.path.clone(),
            headers,
            namespace: self.who.namespace.to_string(),
            pod: self.who.pod.to_string(),
        };
        Box::pin(async move { Ok(tonic::Response::new(response)) })
    }
}

/// A connection of the echo over TLS, as tonic's server takes it.
struct TlsConn(tokio_rustls::server::TlsStream<tokio::net::TcpStream>);

impl tokio::io::AsyncRead for TlsConn {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for TlsConn {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl GrpcEcho {
    /// [`start`](Self::start), serving over TLS with `tls` (the upstream suite's gRPC backend
    /// on its port 8443).
    pub async fn start_tls(namespace: &str, pod: &str, tls: tokio_rustls::TlsAcceptor) -> std::io::Result<GrpcEcho> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let who = Who { namespace: namespace.into(), pod: pod.into() };
        let task = tokio::spawn(async move {
            let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<TlsConn>>(16);
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (tls, tx) = (tls.clone(), tx.clone());
                    tokio::spawn(async move {
                        if let Ok(stream) = tls.accept(stream).await {
                            let _ = tx.send(Ok(TlsConn(stream))).await;
                        }
                    });
                }
            });
            let incoming = tokio_stream::wrappers::ReceiverStream::new(rx);
            let _ = tonic::transport::Server::builder().add_service(who).serve_with_incoming(incoming).await;
        });
        Ok(GrpcEcho { addr, pod: pod.to_owned(), namespace: namespace.to_owned(), task })
    }

    pub async fn start(namespace: &str, pod: &str) -> std::io::Result<GrpcEcho> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let who = Who { namespace: namespace.into(), pod: pod.into() };
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder().add_service(who).serve_with_incoming(incoming).await;
        });
        Ok(GrpcEcho { addr, pod: pod.to_owned(), namespace: namespace.to_owned(), task })
    }
}

/// Calls `method` of the echo service through `addr`, with `authority` as the `:authority`
/// (default: the address) and `metadata`, within 5 s.
pub async fn call(
    addr: SocketAddr,
    authority: Option<&str>,
    method: &str,
    metadata: &[(&str, &str)],
) -> anyhow::Result<Result<EchoResponse, tonic::Status>> {
    let exchange = async {
        let authority = authority.map(str::to_owned).unwrap_or_else(|| addr.to_string());
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
            .origin(format!("http://{authority}").parse()?)
            .connect()
            .await?;
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await?;
        let mut request = tonic::Request::new(EchoRequest {});
        for (k, v) in metadata {
            let key: tonic::metadata::MetadataKey<tonic::metadata::Ascii> = k.to_ascii_lowercase().parse()?;
            request.metadata_mut().append(key, v.parse()?);
        }
        let path = http::uri::PathAndQuery::try_from(format!("/{SERVICE}/{method}"))?;
        let codec = tonic_prost::ProstCodec::<EchoRequest, EchoResponse>::default();
        anyhow::Ok(grpc.unary(request, path, codec).await.map(tonic::Response::into_inner))
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), exchange)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within 5 s"))?
}

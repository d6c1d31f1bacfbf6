//! TCP and UDP echo backends in the manner of the Gateway API conformance suite's `echo-basic`
//! (`TCP_ECHO_SERVER`, `UDP_ECHO_SERVER`), and the clients the TCPRoute, UDPRoute and
//! TLSRoute tests talk to them with.
//!
//! - **TCP** ([`TcpEcho`]): on connect the echo sends a welcome line; then it answers line by
//!   line: `PING` with `PONG`, `IS_TLS` with `true` or `false`, `TEST` with a JSON line naming
//!   its namespace and pod and, over TLS, the server name (SNI) and ALPN protocol the client
//!   asked for. Anything else is echoed back. Given a certificate, it serves TLS itself (a
//!   backend behind a TLS passthrough route).
//! - **UDP** ([`UdpEcho`]): every datagram is answered with a JSON datagram naming what it
//!   received, its namespace, Service and pod.
//! - **DNS** ([`Dns`]): a UDP server answering every `A` question with `127.0.0.1` (the
//!   upstream suite's `coredns` backend).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinHandle;

/// The first line a TCP echo sends.
pub const WELCOME: &str = "xdst test TCP echo: PING, IS_TLS, TEST";
/// How long a client waits for an answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Lines longer than this end the connection.
const LINE_LIMIT: usize = 4096;

/// A TCP echo on 127.0.0.1. Stops when dropped.
pub struct TcpEcho {
    pub addr: SocketAddr,
    pub namespace: String,
    pub pod: String,
    task: JoinHandle<()>,
}

impl Drop for TcpEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TcpEcho {
    /// Starts an echo for `pod` in `namespace`; over TLS when given a certificate and key
    /// (PEM files).
    pub async fn start(
        namespace: &str,
        pod: &str,
        tls: Option<(&std::path::Path, &std::path::Path)>,
    ) -> anyhow::Result<TcpEcho> {
        let acceptor = match tls {
            Some((cert, key)) => Some(acceptor(cert, key, None)?),
            None => None,
        };
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let who = Arc::new((namespace.to_owned(), pod.to_owned()));
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let who = who.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        None => {
                            let _ = converse(stream, &who, None).await;
                        }
                        Some(a) => {
                            let Ok(tls) = a.accept(stream).await else { return };
                            let (_, session) = tls.get_ref();
                            let assertion = json!({
                                "serverName": session.server_name().unwrap_or(""),
                                "negotiatedProtocol": session.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_default(),
                            });
                            let _ = converse(tls, &who, Some(assertion)).await;
                        }
                    }
                });
            }
        });
        Ok(TcpEcho { addr, namespace: namespace.to_owned(), pod: pod.to_owned(), task })
    }
}

/// A TLS acceptor serving `cert` and `key`; with `clients`, a CA file, it asks for a client
/// certificate and refuses one that does not chain to it (a client may present none).
pub fn acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
    clients: Option<&std::path::Path>,
) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject as _;
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key)?;
    let builder = rustls::ServerConfig::builder();
    let config = match clients {
        None => builder.with_no_client_auth().with_single_cert(certs, key)?,
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in rustls::pki_types::CertificateDer::pem_file_iter(ca)? {
                roots.add(c?)?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder(Arc::new(roots)).allow_unauthenticated().build()?;
            builder.with_client_cert_verifier(verifier).with_single_cert(certs, key)?
        }
    };
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// One connection of a TCP echo: the welcome line, then an answer per line.
async fn converse<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    who: &(String, String),
    tls: Option<Value>,
) -> std::io::Result<()> {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(tokio::io::AsyncReadExt::take(read, LINE_LIMIT as u64 * 64));
    write.write_all(format!("{WELCOME}\n").as_bytes()).await?;
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 || line.len() > LINE_LIMIT {
            return Ok(());
        }
        let answer = match line.trim_end() {
            "PING" => "PONG".to_owned(),
            "IS_TLS" => tls.is_some().to_string(),
            "TEST" => json!({
                "namespace": who.0,
                "pod": who.1,
                "tlsAssertion": tls.clone().unwrap_or(Value::Null),
            })
            .to_string(),
            other => other.to_owned(),
        };
        write.write_all(format!("{answer}\n").as_bytes()).await?;
    }
}

/// What a TCP echo said about itself.
#[derive(Debug, Clone)]
pub struct TcpAnswer {
    pub namespace: String,
    pub pod: String,
    /// Whether the echo itself ended TLS.
    pub is_tls: bool,
    /// The server name the echo's TLS saw, when it ended TLS.
    pub server_name: Option<String>,
}

/// Connects to `addr` (over TLS with `tls`: a connector and the server name to ask for), and
/// asks the echo there who it is.
pub async fn tcp_ask(addr: SocketAddr, tls: Option<(&tokio_rustls::TlsConnector, &str)>) -> anyhow::Result<TcpAnswer> {
    let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(addr)).await.context("connect timed out")??;
    match tls {
        None => ask(stream).await,
        Some((connector, name)) => {
            let name = rustls::pki_types::ServerName::try_from(name.to_owned())?;
            let tls = tokio::time::timeout(TIMEOUT, connector.connect(name, stream))
                .await
                .context("TLS handshake timed out")??;
            ask(tls).await
        }
    }
}

/// How a TLS connection attempt ended, as upstream's `isConnectionRejected` tells them apart.
#[derive(Debug)]
pub enum TlsAttempt {
    /// The gateway closed the connection (EOF) or reset it during the handshake: what upstream
    /// counts as a rejection.
    Rejected(String),
    /// The handshake completed: something answered (a backend, wrongly passed the connection).
    Connected,
    /// Anything else (refused, a certificate the client does not accept, a timeout): not a
    /// rejection; upstream tries again.
    Other(String),
}

/// Connects to `addr` and starts TLS for `name` with `connector`; how it ended
/// ([`TlsAttempt`]).
pub async fn tls_attempt(addr: SocketAddr, connector: &tokio_rustls::TlsConnector, name: &str) -> TlsAttempt {
    use std::io::ErrorKind;
    let stream = match tokio::time::timeout(TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return TlsAttempt::Other(format!("connecting: {e}")),
        Err(_) => return TlsAttempt::Other("connecting timed out".into()),
    };
    let Ok(server) = rustls::pki_types::ServerName::try_from(name.to_owned()) else {
        return TlsAttempt::Other(format!("{name:?} is not a server name"));
    };
    match tokio::time::timeout(TIMEOUT, connector.connect(server, stream)).await {
        Ok(Ok(_)) => TlsAttempt::Connected,
        Ok(Err(e)) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset) => {
            TlsAttempt::Rejected(e.to_string())
        }
        Ok(Err(e)) => TlsAttempt::Other(format!("{:?}: {e}", e.kind())),
        Err(_) => TlsAttempt::Other("the handshake timed out".into()),
    }
}

async fn ask<S: AsyncRead + AsyncWrite + Unpin>(stream: S) -> anyhow::Result<TcpAnswer> {
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read);
    let mut line = String::new();
    let mut next = async |line: &mut String| -> anyhow::Result<String> {
        line.clear();
        let n = tokio::time::timeout(TIMEOUT, lines.read_line(line)).await.context("no answer")??;
        if n == 0 {
            bail!("the connection was closed");
        }
        Ok(line.trim_end().to_owned())
    };
    let welcome = next(&mut line).await?;
    if welcome != WELCOME {
        bail!("not the echo's welcome: {welcome:?}");
    }
    // Upstream's exchange, step by step: PING, then IS_TLS, then TEST.
    write.write_all(b"PING\n").await?;
    let pong = next(&mut line).await?;
    if pong != "PONG" {
        bail!("PING answered {pong:?}, not PONG");
    }
    write.write_all(b"IS_TLS\n").await?;
    let is_tls = next(&mut line).await? == "true";
    write.write_all(b"TEST\n").await?;
    let v: Value = serde_json::from_str(&next(&mut line).await?)?;
    Ok(TcpAnswer {
        namespace: v["namespace"].as_str().unwrap_or_default().to_owned(),
        pod: v["pod"].as_str().unwrap_or_default().to_owned(),
        is_tls,
        server_name: v["tlsAssertion"]["serverName"].as_str().map(str::to_owned),
    })
}

/// A UDP echo on 127.0.0.1. Stops when dropped.
pub struct UdpEcho {
    pub addr: SocketAddr,
    pub namespace: String,
    pub pod: String,
    task: JoinHandle<()>,
}

impl Drop for UdpEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl UdpEcho {
    /// Starts an echo for `pod` of Service `service` in `namespace`.
    pub async fn start(namespace: &str, service: &str, pod: &str) -> anyhow::Result<UdpEcho> {
        let socket = UdpSocket::bind("127.0.0.1:0").await?;
        let addr = socket.local_addr()?;
        let (ns, svc, p) = (namespace.to_owned(), service.to_owned(), pod.to_owned());
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else { continue };
                let answer = json!({
                    "request": String::from_utf8_lossy(&buf[..n]),
                    "namespace": ns,
                    "service": svc,
                    "pod": p,
                });
                let _ = socket.send_to(answer.to_string().as_bytes(), from).await;
            }
        });
        Ok(UdpEcho { addr, namespace: namespace.to_owned(), pod: pod.to_owned(), task })
    }
}

/// What a UDP echo answered.
#[derive(Debug, Clone)]
pub struct UdpAnswer {
    pub request: String,
    pub namespace: String,
    pub service: String,
    pub pod: String,
}

/// Sends one datagram from a new socket (a new session) to `addr`, and reads the echo's
/// answer.
pub async fn udp_ask(addr: SocketAddr) -> anyhow::Result<UdpAnswer> {
    const PROBE: &str = "xdst-udp-echo-probe";
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.send_to(PROBE.as_bytes(), addr).await?;
    let mut buf = vec![0u8; 2048];
    let (n, _) = tokio::time::timeout(TIMEOUT, socket.recv_from(&mut buf)).await.context("no answer")??;
    let v: Value = serde_json::from_slice(&buf[..n]).context("the answer is not the echo's JSON")?;
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    let answer = UdpAnswer { request: s("request"), namespace: s("namespace"), service: s("service"), pod: s("pod") };
    if answer.request != PROBE {
        bail!("the echo received {:?}, not what was sent", answer.request);
    }
    Ok(answer)
}

/// A DNS server on 127.0.0.1 answering every `A` question with `127.0.0.1`. Stops when dropped.
pub struct Dns {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Dns {
    pub async fn start() -> anyhow::Result<Dns> {
        let socket = UdpSocket::bind("127.0.0.1:0").await?;
        let addr = socket.local_addr()?;
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 512];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else { continue };
                if let Some(answer) = dns_answer(&buf[..n]) {
                    let _ = socket.send_to(&answer, from).await;
                }
            }
        });
        Ok(Dns { addr, task })
    }
}

/// The answer to a query of one question: the question, and for type `A` one record
/// `127.0.0.1` (time to live 60 s); `None` for what is not a query of one question.
fn dns_answer(query: &[u8]) -> Option<Vec<u8>> {
    if query.len() < 12 || query[2] & 0x80 != 0 || u16::from_be_bytes([query[4], query[5]]) != 1 {
        return None;
    }
    // The question: labels up to the empty one, then type and class.
    let mut end = 12;
    while *query.get(end)? != 0 {
        end += 1 + usize::from(query[end]);
    }
    let question = query.get(12..end + 5)?;
    let is_a = question[question.len() - 4..question.len() - 2] == [0, 1];
    let mut out = query[..2].to_vec();
    out.extend_from_slice(&[0x81, 0x80, 0, 1, 0, u8::from(is_a), 0, 0, 0, 0]);
    out.extend_from_slice(question);
    if is_a {
        // A pointer to the question's name, type A, class IN, TTL 60, 4 bytes of address.
        out.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
    }
    Some(out)
}

/// Asks the DNS server at `addr` for `name`'s `A` record; the addresses answered.
pub async fn dns_query(addr: SocketAddr, name: &str) -> anyhow::Result<Vec<std::net::Ipv4Addr>> {
    let id: u16 = 0x5a17;
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(u8::try_from(label.len())?);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.send_to(&q, addr).await?;
    let mut buf = vec![0u8; 512];
    let (n, _) = tokio::time::timeout(TIMEOUT, socket.recv_from(&mut buf)).await.context("no DNS answer")??;
    let r = &buf[..n];
    if r.len() < 12 || r[..2] != id.to_be_bytes() || r[2] & 0x80 == 0 {
        bail!("not an answer to the query");
    }
    let answers = u16::from_be_bytes([r[6], r[7]]);
    // Each of our server's answers ends with its 4-byte address; a general parser is not
    // needed to see that an answer came back.
    let mut out = Vec::new();
    if answers > 0 && r.len() >= q.len() + 16 {
        let a = &r[r.len() - 4..];
        out.push(std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_echoes_answer_their_clients() -> anyhow::Result<()> {
        let tcp = TcpEcho::start("ns", "tcp-backend-0", None).await?;
        let a = tcp_ask(tcp.addr, None).await?;
        assert_eq!((a.namespace.as_str(), a.pod.as_str(), a.is_tls), ("ns", "tcp-backend-0", false));
        let udp = UdpEcho::start("ns", "udp-backend", "udp-backend-0").await?;
        let u = udp_ask(udp.addr).await?;
        assert_eq!((u.namespace.as_str(), u.service.as_str(), u.pod.as_str()), ("ns", "udp-backend", "udp-backend-0"));
        let dns = Dns::start().await?;
        assert_eq!(dns_query(dns.addr, "foo.bar.com.").await?, vec![std::net::Ipv4Addr::LOCALHOST]);
        Ok(())
    }
}

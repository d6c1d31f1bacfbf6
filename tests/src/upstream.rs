//! A tiny HTTP/1.1 upstream that answers every request with its own name, and a minimal
//! HTTP/1.1 GET client. Enough to tell which upstream Envoy routed a request to, and to
//! read Envoy's and xdst's admin pages, without an HTTP stack in the tests.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let a = xdst_tests::upstream::Upstream::start("a").await?;
//! let (status, body) = xdst_tests::upstream::http_get(a.addr, "/").await?;
//! assert_eq!((status, body.as_str()), (200, "a"));
//! # Ok(()) }
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long [`http_get`] waits for a whole response.
pub const GET_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `/slow` requests wait before their answer.
pub const SLOW: Duration = Duration::from_secs(3);

/// An HTTP/1.1 server on 127.0.0.1 (a port the OS picked) answering every request with
/// `200` and its name as the body. Connections are kept alive unless the client asks to
/// close. Stops when dropped.
///
/// Two paths misbehave on purpose, for route timeout and retry tests: a path starting with
/// `/slow` is answered after [`SLOW`]; a path starting with `/flaky` gets `503` on every other
/// request (the first, third, ... of this upstream's `/flaky` requests).
pub struct Upstream {
    pub name: String,
    pub addr: SocketAddr,
    requests: Arc<AtomicU64>,
    flaky: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Upstream {
    pub async fn start(name: &str) -> io::Result<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(AtomicU64::new(0));
        let body: Arc<str> = name.into();
        let counter = requests.clone();
        let flaky = Arc::new(AtomicU64::new(0));
        let flaky2 = flaky.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    continue;
                };
                let (body, counter, flaky) = (body.clone(), counter.clone(), flaky2.clone());
                tokio::spawn(async move {
                    let _ = serve_connection(conn, &body, &counter, &flaky).await;
                });
            }
        });
        Ok(Upstream { name: name.to_owned(), addr, requests, flaky, task })
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// `/flaky` requests received so far.
    pub fn flaky_requests(&self) -> u64 {
        self.flaky.load(Ordering::Relaxed)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_connection(conn: TcpStream, body: &str, counter: &AtomicU64, flaky: &AtomicU64) -> io::Result<()> {
    let (read, mut write) = conn.into_split();
    let mut read = BufReader::new(read);
    loop {
        let Some(head) = read_head(&mut read).await? else {
            return Ok(());
        };
        let mut close = false;
        let mut length = 0usize;
        for (name, value) in &head.headers {
            match name.as_str() {
                "content-length" => length = value.parse().map_err(|_| bad(format!("bad content-length {value:?}")))?,
                "connection" => close = value.eq_ignore_ascii_case("close"),
                // Not needed by any test; refuse rather than misread the stream.
                "transfer-encoding" => return Err(bad("chunked request bodies are not supported")),
                _ => {}
            }
        }
        let mut discard = vec![0; length];
        read.read_exact(&mut discard).await?;
        counter.fetch_add(1, Ordering::Relaxed);
        let path = head.first.split_whitespace().nth(1).unwrap_or("/");
        if path.starts_with("/slow") {
            tokio::time::sleep(SLOW).await;
        }
        let status = if path.starts_with("/flaky") && flaky.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
            "503 Service Unavailable"
        } else {
            "200 OK"
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n{}\r\n{body}",
            body.len(),
            if close { "connection: close\r\n" } else { "" },
        );
        write.write_all(response.as_bytes()).await?;
        if close {
            return Ok(());
        }
    }
}

struct Head {
    /// The request line or status line.
    first: String,
    /// Names lowercased, values trimmed.
    headers: Vec<(String, String)>,
}

/// Reads a request or response head; `None` on a clean EOF before the first byte.
async fn read_head<R: tokio::io::AsyncBufRead + Unpin>(read: &mut R) -> io::Result<Option<Head>> {
    let mut first = String::new();
    if read.read_line(&mut first).await? == 0 {
        return Ok(None);
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Err(bad("connection closed inside an HTTP head"));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| bad(format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    Ok(Some(Head { first: first.trim_end().to_owned(), headers }))
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// A response: status, headers (names lowercased) and body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// `GET path` on a fresh connection (`connection: close`), within [`GET_TIMEOUT`].
/// Returns the status code and the body (chunked and content-length bodies are decoded).
pub async fn http_get(addr: SocketAddr, path: &str) -> io::Result<(u16, String)> {
    let r = http_request(addr, path, &[]).await?;
    Ok((r.status, r.body))
}

/// `GET path` with extra request headers, within [`GET_TIMEOUT`].
pub async fn http_request(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> io::Result<Response> {
    match tokio::time::timeout(GET_TIMEOUT, get(addr, path, headers)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("GET http://{addr}{path}: no response within {GET_TIMEOUT:?}"),
        )),
    }
}

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> io::Result<Response> {
    let mut conn = TcpStream::connect(addr).await?;
    conn.write_all(request(addr, path, headers, true).as_bytes()).await?;
    let mut read = BufReader::new(conn);
    read_response(&mut read).await?.ok_or_else(|| bad("connection closed before a response"))
}

/// The text of `GET path` with extra headers.
fn request(addr: SocketAddr, path: &str, headers: &[(&str, &str)], close: bool) -> String {
    let host = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.to_string())
        .unwrap_or_else(|| addr.to_string());
    let extra: String =
        headers.iter().filter(|(k, _)| !k.eq_ignore_ascii_case("host")).map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let connection = if close { "connection: close\r\n" } else { "" };
    format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nuser-agent: xdst-tests\r\n{extra}{connection}\r\n")
}

/// Reads one response; `None` if the connection closed before it began.
async fn read_response(read: &mut BufReader<TcpStream>) -> io::Result<Option<Response>> {
    let Some(head) = read_head(read).await? else { return Ok(None) };
    let status = head
        .first
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad(format!("bad status line {:?}", head.first)))?;
    let header = |n: &str| head.headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            read.read_line(&mut size).await?;
            let size = size.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size, 16).map_err(|_| bad(format!("bad chunk size {size:?}")))?;
            if size == 0 {
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            read.read_exact(&mut body[start..]).await?;
            let mut crlf = String::new();
            read.read_line(&mut crlf).await?;
        }
    } else if let Some(length) = header("content-length") {
        let length: usize = length.parse().map_err(|_| bad(format!("bad content-length {length:?}")))?;
        body.resize(length, 0);
        read.read_exact(&mut body).await?;
    } else {
        read.read_to_end(&mut body).await?;
    }
    Ok(Some(Response { status, headers: head.headers, body: String::from_utf8_lossy(&body).into_owned() }))
}

/// One kept-alive HTTP/1.1 connection, for requests one after another (what a client with a
/// connection pool does, and what a draining listener keeps serving).
pub struct KeepAlive {
    addr: SocketAddr,
    read: BufReader<TcpStream>,
}

impl KeepAlive {
    pub async fn connect(addr: SocketAddr) -> io::Result<KeepAlive> {
        Ok(KeepAlive { addr, read: BufReader::new(TcpStream::connect(addr).await?) })
    }

    /// `GET path` on this connection, within [`GET_TIMEOUT`]. `Ok(None)`: the server had
    /// closed the connection before answering (a client would retry on a new one).
    pub async fn get(&mut self, path: &str) -> io::Result<Option<Response>> {
        let text = request(self.addr, path, &[], false);
        let exchange = async {
            if self.read.get_mut().write_all(text.as_bytes()).await.is_err() {
                return Ok(None);
            }
            read_response(&mut self.read).await
        };
        match tokio::time::timeout(GET_TIMEOUT, exchange).await {
            Ok(Err(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset
                        | io::ErrorKind::BrokenPipe
                        | io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::UnexpectedEof
                ) =>
            {
                Ok(None)
            }
            Ok(r) => r,
            Err(_) => {
                Err(io::Error::new(io::ErrorKind::TimedOut, format!("GET http://{}{path}: no response", self.addr)))
            }
        }
    }
}

/// Polls `path` on `proxy` (an Envoy listener) until it answers `200 want`, for up to `wait`;
/// on timeout the error shows the last answer.
pub async fn wait_for_body(proxy: SocketAddr, path: &str, want: &str, wait: Duration) -> anyhow::Result<()> {
    crate::wait::until(format!("GET {path} through envoy to answer (200, {want:?})"), wait, async || {
        let got = http_get(proxy, path).await;
        Ok(crate::wait::Seen::holds(matches!(&got, Ok((200, body)) if body == want), format!("{got:?}")))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn upstream_answers_with_its_name_and_keeps_alive() {
        let up = Upstream::start("alpha").await.unwrap();
        assert_eq!(http_get(up.addr, "/x").await.unwrap(), (200, "alpha".to_owned()));

        // Two requests on one connection: keep-alive works.
        let mut conn = TcpStream::connect(up.addr).await.unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\nGET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut all = String::new();
        conn.read_to_string(&mut all).await.unwrap();
        assert_eq!(all.matches("HTTP/1.1 200 OK").count(), 2, "{all}");
        assert_eq!(up.requests(), 3);
    }
}

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

/// An HTTP/1.1 server on 127.0.0.1 (a port the OS picked) answering every request with
/// `200` and its name as the body. Connections are kept alive unless the client asks to
/// close. Stops when dropped.
pub struct Upstream {
    pub name: String,
    pub addr: SocketAddr,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Upstream {
    pub async fn start(name: &str) -> io::Result<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(AtomicU64::new(0));
        let body: Arc<str> = name.into();
        let counter = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else { continue };
                let (body, counter) = (body.clone(), counter.clone());
                tokio::spawn(async move {
                    let _ = serve_connection(conn, &body, &counter).await;
                });
            }
        });
        Ok(Upstream { name: name.to_owned(), addr, requests, task })
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_connection(conn: TcpStream, body: &str, counter: &AtomicU64) -> io::Result<()> {
    let (read, mut write) = conn.into_split();
    let mut read = BufReader::new(read);
    loop {
        let Some(head) = read_head(&mut read).await? else { return Ok(()) };
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
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n{}\r\n{body}",
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

/// `GET path` on a fresh connection (`connection: close`), within [`GET_TIMEOUT`].
/// Returns the status code and the body (chunked and content-length bodies are decoded).
pub async fn http_get(addr: SocketAddr, path: &str) -> io::Result<(u16, String)> {
    match tokio::time::timeout(GET_TIMEOUT, get(addr, path)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("GET http://{addr}{path}: no response within {GET_TIMEOUT:?}"),
        )),
    }
}

async fn get(addr: SocketAddr, path: &str) -> io::Result<(u16, String)> {
    let mut conn = TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nuser-agent: xdst-tests\r\nconnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut read = BufReader::new(conn);
    let head = read_head(&mut read).await?.ok_or_else(|| bad("connection closed before a response"))?;
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
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
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

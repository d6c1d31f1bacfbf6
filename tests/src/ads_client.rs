//! `tests/clients/ads_client.py` as a child process: a raw grpcio ADS client (the `xds-protos`
//! stubs) that opens N streams and ACKs, NACKs or never answers what it is sent, printing one
//! JSON event a line. A test starts it, follows its events as they happen (every client's first
//! NACK, say), and closes it by closing its stdin.
//!
//! It also plays the hostile clients of issue 48: [`Mode::AckOnce`] accepts the first response
//! of each type and rejects every later one, [`Options::nack_names`] makes each rejection name
//! resources of the test's choosing (as Envoy names what it refused), and [`Options::tls`]
//! presents a client certificate (another team's, say) over mTLS.
//!
//! ```no_run
//! # async fn demo(xds: std::net::SocketAddr) -> anyhow::Result<()> {
//! use std::time::Duration;
//! use xdst_tests::ads_client::{AdsClient, Mode, Options};
//! let mut c = AdsClient::spawn(&Options { clients: 2, mode: Mode::Nack, ..Options::new(xds, "n1") }).await?;
//! c.wait_each("a NACK", Duration::from_secs(10), |e| e["event"] == "nack").await?;
//! c.close().await?;
//! # Ok(()) }
//! ```

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::mpsc;

/// How the client answers what it is sent (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ack,
    NeverAck,
    Nack,
    /// ACK the first response of each type, NACK every later one.
    AckOnce,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Ack => "ack",
            Mode::NeverAck => "never-ack",
            Mode::Nack => "nack",
            Mode::AckOnce => "ack-once",
        }
    }
}

/// The script's options.
#[derive(Debug, Clone)]
pub struct Options {
    pub server: SocketAddr,
    pub node_id: String,
    pub node_cluster: String,
    /// Independent streams, each on its own channel.
    pub clients: usize,
    /// Client i is `<node_id>-i` (else every client has the same id).
    pub suffix: bool,
    /// Delta instead of SotW.
    pub delta: bool,
    /// `cds`, `lds`, `eds`, `rds`, `sds`.
    pub types: Vec<&'static str>,
    /// EDS/RDS names to ask for; empty: those learned from clusters and listeners.
    pub names: Vec<String>,
    pub mode: Mode,
    /// The NACK message's size.
    pub nack_message_bytes: usize,
    /// Resource names every NACK message names (`--nack-names`); empty: none.
    pub nack_names: Vec<String>,
    /// TLS to the server (`--ca`, `--cert`, `--key`, `--authority`); `None`: plaintext.
    pub tls: Option<Tls>,
}

/// How the client speaks TLS: the CA it trusts, the client certificate it presents (mTLS), and
/// the name the server's certificate must carry.
#[derive(Debug, Clone)]
pub struct Tls {
    pub ca: std::path::PathBuf,
    /// Certificate and key; `None`: no client certificate.
    pub client: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// `None`: the server address's host.
    pub authority: Option<String>,
}

impl Options {
    /// One SotW stream for CDS that ACKs, node cluster `envoy-test`.
    pub fn new(server: SocketAddr, node_id: &str) -> Options {
        Options {
            server,
            node_id: node_id.to_owned(),
            node_cluster: "envoy-test".to_owned(),
            clients: 1,
            suffix: false,
            delta: false,
            types: vec!["cds"],
            names: Vec::new(),
            mode: Mode::Ack,
            nack_message_bytes: 64,
            nack_names: Vec::new(),
            tls: None,
        }
    }
}

/// A running `ads_client.py`; killed on drop.
pub struct AdsClient {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    events: mpsc::UnboundedReceiver<Value>,
    stderr: tokio::task::JoinHandle<String>,
    /// Every event read so far, in order.
    pub seen: Vec<Value>,
    clients: usize,
}

impl AdsClient {
    pub async fn spawn(o: &Options) -> anyhow::Result<AdsClient> {
        let script = crate::repo_root().join("tests/clients/ads_client.py");
        let mut cmd = tokio::process::Command::new(crate::python());
        cmd.arg(&script)
            .args(["--server", &o.server.to_string(), "--node-id", &o.node_id, "--node-cluster", &o.node_cluster])
            .args(["--clients", &o.clients.to_string(), "--types", &o.types.join(",")])
            .args(["--api", if o.delta { "delta" } else { "sotw" }, "--mode", o.mode.as_str()])
            .args(["--nack-message-bytes", &o.nack_message_bytes.to_string()]);
        if o.suffix {
            cmd.arg("--node-id-suffix");
        }
        if !o.names.is_empty() {
            cmd.args(["--names", &o.names.join(",")]);
        }
        if !o.nack_names.is_empty() {
            cmd.args(["--nack-names", &o.nack_names.join(",")]);
        }
        if let Some(tls) = &o.tls {
            cmd.arg("--ca").arg(&tls.ca);
            if let Some((cert, key)) = &tls.client {
                cmd.arg("--cert").arg(cert).arg("--key").arg(key);
            }
            if let Some(authority) = &tls.authority {
                cmd.args(["--authority", authority]);
            }
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", script.display()))?;
        let (tx, events) = mpsc::unbounded_channel();
        let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let v =
                    serde_json::from_str(&line).unwrap_or_else(|_| serde_json::json!({"event": "text", "line": line}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().context("no stderr")?;
        let stderr = tokio::spawn(async move {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s).await;
            s
        });
        Ok(AdsClient { stdin: child.stdin.take(), child, events, stderr, seen: Vec::new(), clients: o.clients })
    }

    /// The next event, within `timeout`; `None` once the script has exited.
    pub async fn next(&mut self, timeout: Duration) -> anyhow::Result<Option<Value>> {
        match tokio::time::timeout(timeout, self.events.recv()).await {
            Ok(Some(v)) => {
                self.seen.push(v.clone());
                Ok(Some(v))
            }
            Ok(None) => Ok(None),
            Err(_) => bail!("ads_client.py printed nothing within {timeout:?}"),
        }
    }

    /// Reads events until one satisfies `want` (events seen before this call do not count).
    pub async fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        want: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await {
                Ok(Some(v)) if want(&v) => return Ok(v),
                Ok(Some(_)) => {}
                Ok(None) => bail!("ads_client.py exited before {what}: {}", self.describe()),
                Err(_) => bail!("no {what} from ads_client.py within {timeout:?}: {}", self.describe()),
            }
        }
    }

    /// Reads events until every client printed one that satisfies `want` (from now on).
    pub async fn wait_each(
        &mut self,
        what: &str,
        timeout: Duration,
        want: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<()> {
        let mut left: BTreeSet<u64> = (0..self.clients as u64).collect();
        let deadline = Instant::now() + timeout;
        while !left.is_empty() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let v = self
                .wait_for(&format!("{what} from clients {left:?}"), remaining, |v| {
                    want(v) && v["client"].as_u64().is_some_and(|c| left.contains(&c))
                })
                .await?;
            left.remove(&v["client"].as_u64().unwrap_or_default());
        }
        Ok(())
    }

    /// The `error` events seen so far (a stream the server ended).
    pub fn errors(&self) -> Vec<&Value> {
        self.seen.iter().filter(|e| e["event"] == "error").collect()
    }

    /// What it printed, briefly, for an error message.
    fn describe(&self) -> String {
        let tail: Vec<String> = self.seen.iter().rev().take(8).rev().map(Value::to_string).collect();
        format!("{} events, the last: [{}]", self.seen.len(), tail.join(", "))
    }

    /// Closes its stdin (it cancels its streams and exits), waits for it (5 s, then kills it)
    /// and returns every event it printed and its stderr.
    pub async fn close(mut self) -> anyhow::Result<(Vec<Value>, String)> {
        drop(self.stdin.take());
        let status = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        if status.is_err() {
            self.child.kill().await?;
        }
        while let Some(v) = self.events.recv().await {
            self.seen.push(v);
        }
        let stderr = self.stderr.await.unwrap_or_default();
        match status {
            Ok(Ok(s)) if s.success() => Ok((self.seen, stderr)),
            Ok(s) => bail!("ads_client.py exited with {s:?}; stderr:\n{stderr}"),
            Err(_) => bail!("ads_client.py did not exit within 5 s of its stdin closing; stderr:\n{stderr}"),
        }
    }
}

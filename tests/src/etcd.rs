//! A real etcd cluster on loopback: Debian's `etcd-server` (3.4), installed by
//! `tests/setup.sh`, one process per member, each with its own data directory in a temporary
//! directory. Members can be killed (SIGKILL) and started again on the same ports and data, as
//! outages, or the whole cluster recreated empty on the same ports.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

pub struct Member {
    pub name: String,
    pub client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

pub struct Etcd {
    pub members: Vec<Member>,
    dir: tempfile::TempDir,
    tls: Option<Tls>,
}

/// Mutual TLS on the client port: the members' certificate, and what they and the test
/// client trust and present.
pub struct Tls {
    pub ca: PathBuf,
    pub server: crate::pki::Leaf,
    pub client: crate::pki::Leaf,
}

impl Etcd {
    pub fn binary() -> PathBuf {
        std::env::var_os("XDST_ETCD_BIN").map(PathBuf::from).unwrap_or_else(|| "/usr/bin/etcd".into())
    }

    /// Starts an `n`-member cluster and waits until it answers.
    pub async fn start(n: usize) -> anyhow::Result<Etcd> {
        Self::start_with(n, None).await
    }

    /// Starts an `n`-member cluster whose client port wants TLS with a client certificate
    /// (`--client-cert-auth`) signed by `tls.ca`.
    pub async fn start_tls(n: usize, tls: Tls) -> anyhow::Result<Etcd> {
        Self::start_with(n, Some(tls)).await
    }

    async fn start_with(n: usize, tls: Option<Tls>) -> anyhow::Result<Etcd> {
        let bin = Self::binary();
        if !bin.exists() {
            bail!("{} not found: tests/setup.sh installs Debian's etcd-server package", bin.display());
        }
        let dir = tempfile::Builder::new().prefix("xdst-etcd-").tempdir()?;
        let mut members = Vec::new();
        for i in 0..n {
            members.push(Member {
                name: format!("m{i}"),
                client_port: crate::free_port()?,
                peer_port: crate::free_port()?,
                child: None,
            });
        }
        let mut etcd = Etcd { members, dir, tls };
        for i in 0..n {
            etcd.start_member(i, true)?;
        }
        etcd.wait_healthy(Duration::from_secs(30)).await?;
        Ok(etcd)
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn start_member(&mut self, i: usize, new: bool) -> anyhow::Result<()> {
        let cluster = self.initial_cluster();
        let data = self.dir.path().join(&self.members[i].name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", self.members[i].name)))?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut tls_args: Vec<std::ffi::OsString> = Vec::new();
        if let Some(t) = &self.tls {
            tls_args.extend(["--cert-file".into(), t.server.cert.clone().into()]);
            tls_args.extend(["--key-file".into(), t.server.key.clone().into()]);
            tls_args.extend(["--client-cert-auth".into(), "--trusted-ca-file".into(), t.ca.clone().into()]);
        }
        let m = &mut self.members[i];
        let client = format!("{scheme}://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let child = Command::new(Self::binary())
            .args(&tls_args)
            .args(["--name", &m.name, "--data-dir"])
            .arg(&data)
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &cluster, "--initial-cluster-token", "xdst-test"])
            .args(["--initial-cluster-state", if new { "new" } else { "existing" }])
            // Fast elections: a killed member's leadership moves within about a second.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--log-level", "warn", "--logger", "zap"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", Self::binary().display()))?;
        m.child = Some(child);
        Ok(())
    }

    /// `etcd://127.0.0.1:P1,127.0.0.1:P2,.../PREFIX`.
    pub fn url(&self, prefix: &str) -> String {
        let hosts: Vec<String> = self.members.iter().map(|m| format!("127.0.0.1:{}", m.client_port)).collect();
        format!("etcd://{}/{prefix}", hosts.join(","))
    }

    /// The client endpoints (`http://127.0.0.1:P`, or https) of the members running now.
    pub fn endpoints(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        self.members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| format!("{scheme}://127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// A client of the running members (with the client certificate, under TLS).
    pub async fn client(&self) -> anyhow::Result<etcd_client::Client> {
        let options = match &self.tls {
            Some(t) => {
                let pem = |p: &PathBuf| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
                let tls = etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(pem(&t.ca)?))
                    .identity(etcd_client::Identity::from_pem(pem(&t.client.cert)?, pem(&t.client.key)?));
                Some(etcd_client::ConnectOptions::new().with_tls(tls))
            }
            None => None,
        };
        Ok(etcd_client::Client::connect(self.endpoints(), options).await?)
    }

    /// SIGKILL one member.
    pub fn kill(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(mut c) = self.members[i].child.take() {
            c.kill()?;
            c.wait()?;
        }
        Ok(())
    }

    /// Starts a killed member again, on its ports and data.
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.start_member(i, false)
    }

    /// Kills every member, deletes their data and starts a new, empty cluster on the same
    /// ports (and the same names and cluster token): an etcd recreated, or restored from a
    /// backup older than what its clients saw. Its revisions start again from 1. Waits until
    /// it answers.
    pub async fn recreate_empty(&mut self) -> anyhow::Result<()> {
        for i in 0..self.members.len() {
            self.kill(i)?;
            let data = self.dir.path().join(&self.members[i].name);
            if data.exists() {
                std::fs::remove_dir_all(&data).with_context(|| format!("removing {}", data.display()))?;
            }
        }
        for i in 0..self.members.len() {
            self.start_member(i, true)?;
        }
        self.wait_healthy(Duration::from_secs(30)).await
    }

    /// Waits until a majority of the running members answer a read.
    pub async fn wait_healthy(&self, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let ok = match self.client().await {
                Ok(mut c) => tokio::time::timeout(Duration::from_secs(2), c.get("health-probe", None))
                    .await
                    .is_ok_and(|r| r.is_ok()),
                Err(_) => false,
            };
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                let logs: Vec<String> = self
                    .members
                    .iter()
                    .map(|m| {
                        let text = std::fs::read_to_string(self.dir.path().join(format!("{}.log", m.name)))
                            .unwrap_or_default();
                        let tail: Vec<&str> = text.lines().rev().take(10).collect();
                        format!("{}: {}", m.name, tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
                    })
                    .collect();
                bail!("etcd did not answer within {within:?}:\n{}", logs.join("\n"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

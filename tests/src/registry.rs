//! A real OCI registry on loopback: Debian's `docker-registry` (the CNCF distribution
//! registry), installed by `tests/setup.sh`, storing into a temporary directory. It can be
//! stopped and started again on the same port and storage, as a registry outage.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

pub struct Registry {
    /// `127.0.0.1:PORT`.
    pub host: String,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Registry {
    pub fn binary() -> PathBuf {
        std::env::var_os("XDST_REGISTRY_BIN").map(PathBuf::from).unwrap_or_else(|| "/usr/bin/docker-registry".into())
    }

    /// Starts a registry on a free loopback port.
    pub fn start() -> anyhow::Result<Registry> {
        Self::start_with(None)
    }

    /// Starts a registry that wants HTTP Basic credentials (`htpasswd` auth, bcrypt from
    /// apache2-utils' `htpasswd`, which `tests/setup.sh` installs).
    pub fn start_with_login(user: &str, password: &str) -> anyhow::Result<Registry> {
        Self::start_with(Some((user, password)))
    }

    fn start_with(login: Option<(&str, &str)>) -> anyhow::Result<Registry> {
        let port = crate::free_port()?;
        let dir = tempfile::Builder::new().prefix("xdst-registry-").tempdir()?;
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        let mut config = config;
        if let Some((user, password)) = login {
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .context("running htpasswd (apache2-utils)")?;
            if !out.status.success() {
                bail!("htpasswd failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            std::fs::write(dir.path().join("htpasswd"), &out.stdout)?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: xdst-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config)?;
        let mut r = Registry { host: format!("127.0.0.1:{port}"), dir, child: None };
        r.resume()?;
        Ok(r)
    }

    /// Starts it again (same port, same storage) after [`Registry::stop`].
    pub fn resume(&mut self) -> anyhow::Result<()> {
        let bin = Self::binary();
        if !bin.exists() {
            bail!("{} not found: tests/setup.sh installs Debian's docker-registry package", bin.display());
        }
        let child = Command::new(&bin)
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdout(Stdio::null())
            // It logs every 404 (a blob it does not have yet, before each upload) as an error.
            .stderr(std::fs::File::create(self.dir.path().join("registry.log"))?)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut s) = std::net::TcpStream::connect(&self.host) {
                use std::io::{Read, Write};
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let req = format!("GET /v2/ HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.host);
                let mut answer = String::new();
                // 401 is a registry that wants a login: up, too.
                if s.write_all(req.as_bytes()).is_ok()
                    && s.read_to_string(&mut answer).is_ok()
                    && (answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.1 401"))
                {
                    return Ok(());
                }
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("the registry exited: {status}");
            }
            if Instant::now() > deadline {
                bail!("the registry at {} did not answer within 20 s", self.host);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it (a registry outage); [`Registry::resume`] brings it back.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `oci://HOST/REPOSITORY:TAG`.
    pub fn reference(&self, repository_and_tag: &str) -> String {
        format!("oci://{}/{repository_and_tag}", self.host)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A TCP proxy in front of a registry that can be told to stall: it then still accepts
/// connections and reads requests, on new and pooled connections alike, but forwards nothing
/// and never answers, as a registry that hangs does.
pub struct StallingProxy {
    /// `127.0.0.1:PORT`.
    pub host: String,
    stalled: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Bytes of requests swallowed while stalled.
    swallowed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl StallingProxy {
    /// Starts forwarding to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> anyhow::Result<StallingProxy> {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let host = listener.local_addr()?.to_string();
        let stalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swallowed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (upstream, flag, counter) = (upstream.to_owned(), stalled.clone(), swallowed.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (upstream, flag, counter) = (upstream.clone(), flag.clone(), counter.clone());
                std::thread::spawn(move || {
                    let Ok(server) = std::net::TcpStream::connect(&upstream) else { return };
                    let (Ok(mut from_server), Ok(mut to_client)) = (server.try_clone(), client.try_clone()) else {
                        return;
                    };
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from_server, &mut to_client);
                    });
                    let (mut client, mut server) = (client, server);
                    let mut buf = [0u8; 16 << 10];
                    loop {
                        match std::io::Read::read(&mut client, &mut buf) {
                            Ok(0) | Err(_) => return,
                            // Stalled: the request is swallowed and the connection held.
                            Ok(n) if flag.load(Ordering::SeqCst) => {
                                counter.fetch_add(n, Ordering::SeqCst);
                            }
                            Ok(n) => {
                                if std::io::Write::write_all(&mut server, &buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        Ok(StallingProxy { host, stalled, swallowed })
    }

    /// From now on, forward nothing and answer nothing (or, with `false`, forward again).
    pub fn stall(&self, stalled: bool) {
        self.stalled.store(stalled, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many bytes of requests it has swallowed while stalled: a client waiting on it.
    pub fn swallowed(&self) -> usize {
        self.swallowed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `oci://HOST/REPOSITORY:TAG`, through the proxy.
    pub fn reference(&self, repository_and_tag: &str) -> String {
        format!("oci://{}/{repository_and_tag}", self.host)
    }
}

/// `xdst plugin push FILE TARGET`; returns the plugin's sha256 as printed.
pub fn push(file: &Path, target: &str) -> anyhow::Result<String> {
    let out = std::process::Command::new(crate::server::binary()?)
        .args(["plugin", "push"])
        .arg(file)
        .arg(target)
        .env("RUST_LOG", "warn")
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "xdst plugin push failed: {}{}", stdout, String::from_utf8_lossy(&out.stderr));
    let digest = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("sha256"))
        .map(|d| d.trim().to_owned())
        .context("no sha256 line")?;
    ensure!(stdout.contains(&format!(" to {target}")), "push output: {stdout}");
    Ok(digest)
}

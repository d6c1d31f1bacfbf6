//! Another host for a test: a network namespace of its own (`unshare --net`, its loopback
//! brought up with `ip`), where a real Envoy runs and where a test can take a port that is free
//! on the test's own host. Issue 48, point 5: two Envoys of one node group, one of which cannot
//! bind a listener's address on its host while the other can.
//!
//! - [`Netns::new`] makes the namespace (a holder process keeps it alive; each process the test
//!   runs in it enters it with `nsenter`).
//! - [`Netns::take_port`] binds `127.0.0.1:PORT` inside it, in a blocker process, without
//!   `SO_REUSEPORT`: Envoy's listener there fails with "Address already in use" while an Envoy
//!   in the test's namespace binds the same address and port. [`Blocker::free`] kills it.
//! - [`Netns::start_envoy`] runs Envoy inside with the bootstrap of
//!   [`Bootstrap`](crate::envoy::Bootstrap) (its `to_yaml`, with two addresses made Unix
//!   sockets): its `xds_cluster` endpoint is a `pipe` that a [`Relay`] in the test copies to
//!   xdst's xDS port, and its admin listens on a `pipe` that another relay offers on a TCP port
//!   of the test's loopback. The handle has the `stats()`, `admin_get()`, `wait_for()` and
//!   `kill()` of [`Envoy`](crate::envoy::Envoy), with its [`Stats`] and [`Expect`].
//!
//! Unix sockets are files, which every network namespace sees; TCP ports are not. Needs root,
//! or unprivileged user namespaces (then it runs as root of a user namespace of its own);
//! `tests/setup.sh` proves `unshare --net` works (Debian packages `util-linux` and
//! `iproute2`).
//!
//! ```no_run
//! # async fn demo(xds: std::net::SocketAddr) -> anyhow::Result<()> {
//! use std::time::Duration;
//! use xdst_tests::envoy::{ApiType, Bootstrap, Expect};
//! let host = xdst_tests::netns::Netns::new().await?;
//! let taken = host.take_port(10080).await?;
//! let envoy = host.start_envoy(&Bootstrap::new(ApiType::Sotw, xds, "op-b")).await?;
//! envoy.wait_for(&Expect::new().at_least("listener_manager.lds.update_rejected", 1), Duration::from_secs(20)).await?;
//! taken.free().await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use serde_yaml_ng::Value as Yaml;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::envoy::{Bootstrap, Expect, Stats, envoy_bin};
use crate::upstream::http_get;
use crate::wait::Seen;

/// A network namespace with its loopback up, kept alive by a holder process (killed on drop,
/// as is every process the test started in it).
pub struct Netns {
    holder: tokio::process::Child,
    pid: u32,
    /// Not root: the namespace belongs to a user namespace of its own, which `nsenter` enters too.
    user: bool,
}

impl Netns {
    /// Makes the namespace and brings its loopback up; fails within seconds, naming the
    /// packages, when `unshare` or `ip` is missing or not allowed.
    pub async fn new() -> anyhow::Result<Netns> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let user = unsafe { libc::geteuid() } != 0;
        let mut cmd = tokio::process::Command::new("unshare");
        if user {
            cmd.args(["--user", "--map-root-user"]);
        }
        let mut holder = cmd
            .args(["--net", "--", "sh", "-c", "ip link set lo up && echo up && exec sleep 2147483647"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("running unshare (Debian package util-linux; tests/setup.sh proves it works)")?;
        let pid = holder.id().context("unshare exited at once")?;
        let mut out = BufReader::new(holder.stdout.take().context("no stdout")?).lines();
        let said =
            crate::wait::within("a network namespace with its loopback up", Duration::from_secs(10), out.next_line())
                .await?;
        if !matches!(said, Ok(Some(ref l)) if l == "up") {
            let mut err = String::new();
            if let Some(mut e) = holder.stderr.take() {
                let _ = tokio::io::AsyncReadExt::read_to_string(&mut e, &mut err).await;
            }
            bail!(
                "unshare --net sh -c 'ip link set lo up' failed ({said:?}): {err}\n(it needs root or unprivileged user \
                 namespaces, and the Debian packages util-linux and iproute2: run tests/setup.sh)"
            );
        }
        Ok(Netns { holder, pid, user })
    }

    /// A command that runs `program` inside the namespace (`nsenter`, which execs it: its pid
    /// is the program's), killed on drop.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("nsenter");
        cmd.args(["--target", &self.pid.to_string(), "--net"]);
        if self.user {
            cmd.args(["--user", "--preserve-credentials"]);
        }
        cmd.arg("--").arg(program).kill_on_drop(true);
        cmd
    }

    /// Binds `127.0.0.1:port` inside the namespace and listens on it, without `SO_REUSEPORT`
    /// or `SO_REUSEADDR`, until [`Blocker::free`] (or drop).
    pub async fn take_port(&self, port: u16) -> anyhow::Result<Blocker> {
        let script = format!(
            "import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', {port}))\ns.listen(16)\n\
             print('bound', flush=True)\nsys.stdin.read()\n"
        );
        let mut child = self
            .command("python3")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running python3 in the namespace (nsenter: Debian package util-linux)")?;
        let mut out = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        let said = crate::wait::within(
            format!("127.0.0.1:{port} taken in the namespace"),
            Duration::from_secs(10),
            out.next_line(),
        )
        .await?;
        if !matches!(said, Ok(Some(ref l)) if l == "bound") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = tokio::io::AsyncReadExt::read_to_string(&mut e, &mut err).await;
            }
            bail!("taking 127.0.0.1:{port} in the namespace failed ({said:?}): {err}");
        }
        Ok(Blocker { child, port })
    }

    /// Starts Envoy inside the namespace with `bootstrap` (see the module docs); waits (up to
    /// 20 s) for its admin to answer through the relay.
    pub async fn start_envoy(&self, bootstrap: &Bootstrap) -> anyhow::Result<NetnsEnvoy> {
        let dir = tempfile::Builder::new().prefix("xdst-netns-envoy-").tempdir()?;
        let (xds_pipe, admin_pipe) = (dir.path().join("xds.sock"), dir.path().join("admin.sock"));
        let log = dir.path().join("envoy.log");
        let config = dir.path().join("bootstrap.yaml");
        std::fs::write(&config, over_pipes(&bootstrap.to_yaml(), &xds_pipe, &admin_pipe)?)?;
        let xds_relay = Relay::unix_to_tcp(&xds_pipe, bootstrap.xds_addr)?;
        let mut child = self
            .command(envoy_bin())
            .arg("-c")
            .arg(&config)
            .args(["--disable-hot-restart", "--concurrency", "1", "-l", "warning"])
            .arg("--log-path")
            .arg(&log)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting envoy in the namespace")?;
        let admin_relay = Relay::tcp_to_unix(&admin_pipe).await?;
        let admin_addr = admin_relay.addr;
        let up = crate::wait::until(
            format!("envoy {}'s admin in the namespace", bootstrap.node_id),
            Duration::from_secs(20),
            async || {
                if let Some(status) = child.try_wait()? {
                    bail!("envoy exited before its admin was up: {status}\n{}", tail(&log, 30));
                }
                Ok(match http_get(admin_addr, "/ready").await {
                    Ok((status, _)) => Seen::Done(status),
                    Err(e) => Seen::Not(e.to_string()),
                })
            },
        )
        .await;
        if let Err(e) = up {
            bail!("{e:#}\n{}", tail(&log, 30));
        }
        Ok(NetnsEnvoy {
            child,
            admin_addr,
            node_id: bootstrap.node_id.clone(),
            log,
            _relays: [xds_relay, admin_relay],
            _dir: dir,
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = self.holder.start_kill();
    }
}

/// A process holding a port inside a namespace; killed on drop.
pub struct Blocker {
    child: tokio::process::Child,
    pub port: u16,
}

impl Blocker {
    /// Kills it: the port is free in the namespace once this returns.
    pub async fn free(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// The bootstrap `yaml` with the `xds_cluster`'s endpoints replaced by one `pipe` at `xds` and
/// the admin address by a `pipe` at `admin`.
fn over_pipes(yaml: &str, xds: &Path, admin: &Path) -> anyhow::Result<String> {
    let pipe = |path: &Path| -> Yaml {
        let mut p = serde_yaml_ng::Mapping::new();
        p.insert("path".into(), path.display().to_string().into());
        let mut a = serde_yaml_ng::Mapping::new();
        a.insert("pipe".into(), p.into());
        a.into()
    };
    let mut v: Yaml = serde_yaml_ng::from_str(yaml).context("the bootstrap is not YAML")?;
    v["admin"]["address"] = pipe(admin);
    let clusters =
        v["static_resources"]["clusters"].as_sequence_mut().context("the bootstrap has no static clusters")?;
    let xds_cluster =
        clusters.iter_mut().find(|c| c["name"] == "xds_cluster").context("the bootstrap has no xds_cluster")?;
    let endpoints: Yaml = serde_yaml_ng::from_str(&format!(
        "[{{lb_endpoints: [{{endpoint: {{address: {{pipe: {{path: {:?}}}}}}}}}]}}]",
        xds.display().to_string()
    ))?;
    xds_cluster["load_assignment"]["endpoints"] = endpoints;
    ensure!(xds_cluster["type"] == "STATIC", "the xds_cluster is not STATIC: {xds_cluster:?}");
    Ok(serde_yaml_ng::to_string(&v)?)
}

/// A real Envoy in a [`Netns`]; SIGKILLed when dropped, its relays stopped.
pub struct NetnsEnvoy {
    child: tokio::process::Child,
    /// Its admin, through a relay on the test's loopback.
    pub admin_addr: SocketAddr,
    pub node_id: String,
    log: PathBuf,
    _relays: [Relay; 2],
    _dir: tempfile::TempDir,
}

impl NetnsEnvoy {
    /// Every counter, gauge and text readout, as [`Envoy::stats`](crate::envoy::Envoy::stats).
    pub async fn stats(&self) -> anyhow::Result<Stats> {
        Stats::from_json(&self.admin_get("/stats?format=json").await?)
    }

    /// `GET` an admin path; an error unless the status is 200.
    pub async fn admin_get(&self, path: &str) -> anyhow::Result<String> {
        let (status, body) =
            http_get(self.admin_addr, path).await.with_context(|| format!("envoy admin GET {path}"))?;
        ensure!(status == 200, "envoy {} admin GET {path}: status {status}: {body}", self.node_id);
        Ok(body)
    }

    /// Polls the stats until every expectation holds; on timeout, the expected-versus-actual
    /// diff and the end of Envoy's log.
    pub async fn wait_for(&self, expect: &Expect, timeout: Duration) -> anyhow::Result<Stats> {
        let waited = crate::envoy::stats_matching(async || self.stats().await, expect, timeout).await;
        waited.map_err(|e| {
            anyhow::anyhow!("envoy {} (in its namespace): {e:#}\nenvoy log:\n{}", self.node_id, self.log_tail(20))
        })
    }

    /// The last `lines` lines of Envoy's log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// SIGKILL and reap.
    pub async fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("(no log at {}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A stream a relay copies to or from.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// How a relay opens its far side, once per connection.
pub type Connect = Box<dyn Fn() -> Pin<Box<dyn Future<Output = io::Result<Box<dyn Stream>>> + Send>> + Send + Sync>;

/// A task accepting connections and copying each, both ways, to a connection it opens for it;
/// stopped (with every connection it carries) when dropped.
pub struct Relay {
    /// Where it listens, when that is a TCP port.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Listens on a Unix socket at `path`, connecting each to `to` over TCP.
    pub fn unix_to_tcp(path: &Path, to: SocketAddr) -> anyhow::Result<Relay> {
        let listener = UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        let connect: Connect =
            Box::new(move || Box::pin(async move { Ok(Box::new(TcpStream::connect(to).await?) as Box<dyn Stream>) }));
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((conn, _)) = listener.accept().await {
                while conns.try_join_next().is_some() {}
                conns.spawn(carry(Box::new(conn), connect()));
            }
        });
        Ok(Relay { addr: ([0, 0, 0, 0], 0).into(), task })
    }

    /// Listens on a TCP port of 127.0.0.1, connecting each to the Unix socket at `path`.
    pub async fn tcp_to_unix(path: &Path) -> anyhow::Result<Relay> {
        let path = path.to_owned();
        Relay::tcp(Box::new(move || {
            let path = path.clone();
            Box::pin(async move { Ok(Box::new(UnixStream::connect(path).await?) as Box<dyn Stream>) })
        }))
        .await
    }

    /// Listens on a TCP port of 127.0.0.1, connecting each as `connect` says (a TLS client to
    /// a TLS port, say: then the relay is a plaintext door to it).
    pub async fn tcp(connect: Connect) -> anyhow::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((conn, _)) = listener.accept().await {
                while conns.try_join_next().is_some() {}
                conns.spawn(carry(Box::new(conn), connect()));
            }
        });
        Ok(Relay { addr, task })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies between `near` and what `far` opens until either side closes.
async fn carry(mut near: Box<dyn Stream>, far: impl Future<Output = io::Result<Box<dyn Stream>>>) {
    if let Ok(mut far) = far.await {
        let _ = tokio::io::copy_bidirectional(&mut near, &mut far).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bootstrap's xDS endpoint and admin become pipes; the rest is as `Bootstrap` wrote it.
    #[test]
    fn the_bootstrap_goes_over_pipes() {
        let b = Bootstrap::new(crate::envoy::ApiType::Delta, "127.0.0.1:4567".parse().unwrap(), "op-b");
        let yaml = over_pipes(&b.to_yaml(), Path::new("/t/xds.sock"), Path::new("/t/admin.sock")).unwrap();
        let v: Yaml = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(v["admin"]["address"]["pipe"]["path"], "/t/admin.sock");
        let endpoint = &v["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0];
        assert_eq!(endpoint["endpoint"]["address"]["pipe"]["path"], "/t/xds.sock");
        assert_eq!(v["dynamic_resources"]["ads_config"]["api_type"], "DELTA_GRPC");
        assert_eq!(v["node"]["id"], "op-b");
        assert!(!yaml.contains("4567"), "{yaml}");
    }
}

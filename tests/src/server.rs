//! Starting xdst for a test: in-process (fast, and the test can reach its internals) or as
//! the real `xdst` binary (for tests that kill and restart it).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// xdst in this process, on ports the OS picked.
pub async fn start_in_process(resources: Option<&Path>) -> anyhow::Result<xdst::Running> {
    xdst::start(xdst::Settings {
        xds_addr: "127.0.0.1:0".parse()?,
        admin_addr: "127.0.0.1:0".parse()?,
        resources: resources.map(Path::to_owned),
        resync: Duration::from_millis(500),
        shutdown_grace: Duration::from_secs(1),
        ..Default::default()
    })
    .await
    .map_err(anyhow::Error::from)
}

/// The `xdst` binary next to this test's executable, built on demand.
pub fn binary() -> anyhow::Result<PathBuf> {
    // A benchmark names the (release) binary it measures.
    if let Ok(bin) = std::env::var("XDST_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let exe = std::env::current_exe()?;
    // target/<profile>/deps/<test> -> target/<profile>/xdst
    let profile_dir = exe.parent().and_then(Path::parent).context("test executable has no profile dir")?;
    let bin = profile_dir.join("xdst");
    let mut cmd = crate::cargo();
    cmd.args(["build", "-q", "-p", "xdst", "--bin", "xdst"]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    // Always ask cargo: it is a no-op when the binary is current.
    let status = cmd.status().context("running cargo build -p xdst")?;
    if !status.success() {
        bail!("cargo build -p xdst failed");
    }
    Ok(bin)
}

/// How to start a [`Process`] beyond its arguments.
#[derive(Default)]
pub struct Options {
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Where its log (stderr) goes; by default, the test's own stderr.
    pub log: Option<PathBuf>,
}

/// A separate `xdst serve` process; killed (SIGKILL) on drop.
pub struct Process {
    pub child: tokio::process::Child,
    pub xds_addr: std::net::SocketAddr,
    pub admin_addr: std::net::SocketAddr,
}

impl Process {
    /// Starts `xdst serve` with `args` appended (ports default to 0 unless given in args).
    pub async fn start(resources: &Path, xds_addr: &str, extra: &[&str]) -> anyhow::Result<Process> {
        let mut args: Vec<std::ffi::OsString> = vec!["--resources".into(), resources.into()];
        args.extend(extra.iter().map(Into::into));
        Self::start_with(xds_addr, &args).await
    }

    /// Starts `xdst serve --intent INTENT --plugins PLUGINS` with `extra` appended.
    pub async fn start_intent(intent: &Path, plugins: &Path, extra: &[&str]) -> anyhow::Result<Process> {
        let mut args: Vec<std::ffi::OsString> =
            vec!["--intent".into(), intent.into(), "--plugins".into(), plugins.into()];
        args.extend(extra.iter().map(Into::into));
        Self::start_with("127.0.0.1:0", &args).await
    }

    /// Starts a replica: `xdst serve --store URL --admin-token-file TOKEN`, with `--plugins DIR`
    /// when given (else the plugin set is the store's), and `extra`.
    pub async fn start_store(
        url: &str,
        plugins: Option<&Path>,
        token_file: &Path,
        extra: &[&str],
    ) -> anyhow::Result<Process> {
        let mut args: Vec<std::ffi::OsString> =
            vec!["--store".into(), url.into(), "--admin-token-file".into(), token_file.into()];
        if let Some(dir) = plugins {
            args.extend(["--plugins".into(), dir.into()]);
        }
        args.extend(extra.iter().map(Into::into));
        Self::start_with("127.0.0.1:0", &args).await
    }

    /// Starts `xdst serve` on `xds_addr` with `args`.
    pub async fn start_with(xds_addr: &str, args: &[std::ffi::OsString]) -> anyhow::Result<Process> {
        Self::start_with_options(xds_addr, args, &Options::default()).await
    }

    /// Starts `xdst serve` on `xds_addr` with `args`, extra environment and its log in a file.
    pub async fn start_with_options(
        xds_addr: &str,
        args: &[std::ffi::OsString],
        options: &Options,
    ) -> anyhow::Result<Process> {
        let dir = tempfile::tempdir()?;
        let ready = dir.path().join("ready.json");
        let stderr = match &options.log {
            Some(path) => {
                Stdio::from(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?)
            }
            None => Stdio::piped(),
        };
        let mut child = tokio::process::Command::new(binary()?)
            .arg("serve")
            .args(args)
            .args(["--xds-addr", xds_addr, "--admin-addr", "127.0.0.1:0", "--ready-file"])
            .arg(&ready)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .context("spawning xdst")?;
        // Its log goes on to the test's stderr; the last lines are kept for the error if it
        // exits before it is ready (a CI log shows the test's error, not always the stream).
        let tail = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        // A thread, not a task: it must outlive any one runtime, as the process may.
        let forwarding = match child.stderr.take() {
            Some(stderr) => {
                let stderr = std::fs::File::from(stderr.into_owned_fd()?);
                let tail = tail.clone();
                Some(std::thread::spawn(move || {
                    use std::io::BufRead as _;
                    for line in std::io::BufReader::new(stderr).lines() {
                        let Ok(line) = line else { break };
                        eprintln!("{line}");
                        let mut t = tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        if t.len() == 30 {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }))
            }
            None => None,
        };
        // Ready comes after the first generation, which compiles every plugin: an 18 MB Python
        // component takes tens of seconds in a debug build on a busy 2-core machine. An exit
        // is seen at once, so the wait costs nothing when xdst fails.
        let wait = crate::wait::patience(Duration::from_secs(120));
        let deadline = Instant::now() + wait;
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                let v: serde_json::Value = serde_json::from_str(&text)?;
                return Ok(Process {
                    child,
                    xds_addr: v["xds_addr"].as_str().unwrap().parse()?,
                    admin_addr: v["admin_addr"].as_str().unwrap().parse()?,
                });
            }
            if let Some(status) = child.try_wait()? {
                let drained = Instant::now() + Duration::from_secs(2);
                while forwarding.as_ref().is_some_and(|f| !f.is_finished()) && Instant::now() < drained {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let tail = tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
                bail!("xdst exited before it was ready: {status}; the end of its log:\n{}", lines.join("\n"));
            }
            if Instant::now() > deadline {
                bail!("xdst did not become ready within {wait:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The process's peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> anyhow::Result<u64> {
        self.status_bytes("VmHWM")
    }

    /// Its resident memory now, in bytes.
    pub fn rss(&self) -> anyhow::Result<u64> {
        self.status_bytes("VmRSS")
    }

    /// A `kB` field of `/proc/PID/status`, in bytes.
    fn status_bytes(&self, field: &str) -> anyhow::Result<u64> {
        let pid = self.child.id().context("the process has exited")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .with_context(|| format!("no {field} in /proc/PID/status"))?;
        Ok(kib << 10)
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL: no graceful shutdown, as in a crash.
    pub async fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

//! A real Envoy for a test: a bootstrap that takes everything but the `xds_cluster` from an
//! xDS server over ADS (SotW or Delta), the process itself (admin on a port the OS picks,
//! logs in a temp dir, killed on drop), and its admin stats, polled until they match.
//!
//! Acceptance is read from stats, not `/ready` (see `../shared/REAL-CLIENTS.md`):
//! `listener_manager.lds.*`, `cluster_manager.cds.*`, `http.<prefix>.rds.<name>.*`,
//! `cluster.<name>.*` with the suffixes `update_success` (ACK), `update_rejected` (NACK) and
//! `version_text`; plus `control_plane.connected_state`.
//!
//! ```no_run
//! # async fn demo(xds: std::net::SocketAddr) -> anyhow::Result<()> {
//! use std::time::Duration;
//! use xdst_tests::envoy::{ApiType, Bootstrap, Envoy, Expect};
//! let envoy = Envoy::start(&Bootstrap::new(ApiType::Delta, xds, "envoy-1")).await?;
//! let acked = Expect::new()
//!     .count("control_plane.connected_state", 1)
//!     .at_least("listener_manager.lds.update_success", 1);
//! // On timeout: an error with a `-` expected / `+` actual line per unmet stat.
//! envoy.wait_for(&acked, Duration::from_secs(10)).await?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::upstream::http_get;
use crate::wait::Seen;

/// The Envoy binary: `$ENVOY_BIN`, else the one `tests/setup.sh` installs into
/// `cache_dir()/venv/bin/envoy`. Panics, naming `tests/setup.sh`, when neither exists.
pub fn envoy_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ENVOY_BIN").filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "ENVOY_BIN={} does not exist; run tests/setup.sh", bin.display());
        return bin;
    }
    let bin = crate::cache_dir().join("venv/bin/envoy");
    assert!(
        bin.is_file(),
        "no Envoy: ENVOY_BIN is unset and {} does not exist; run tests/setup.sh (it installs Envoy) \
         and then `. ~/.cache/xdst/env.sh`",
        bin.display()
    );
    bin
}

/// `ads_config.api_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiType {
    /// `GRPC`: State of the World.
    Sotw,
    /// `DELTA_GRPC`: incremental.
    Delta,
}

impl ApiType {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiType::Sotw => "GRPC",
            ApiType::Delta => "DELTA_GRPC",
        }
    }
}

/// What the bootstrap says: where the xDS server is and who this Envoy is.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    pub api_type: ApiType,
    pub xds_addr: SocketAddr,
    /// More xDS servers in `xds_cluster` beside `xds_addr` (replicas): Envoy's ADS stream goes
    /// to one, and to another when that one fails.
    pub more_xds_addrs: Vec<SocketAddr>,
    pub node_id: String,
    pub node_cluster: String,
    /// Run from filesystem-subscription files in this directory (`lds.json`, `cds.json`)
    /// instead of xDS over gRPC.
    pub files: Option<PathBuf>,
    /// Speak TLS to the xDS server, trusting this CA and expecting `DNS:localhost`.
    pub tls_ca: Option<PathBuf>,
    /// With `tls_ca`: present this client certificate and key (mTLS).
    pub tls_client: Option<(PathBuf, PathBuf)>,
    /// Log the xDS client (`config`) at debug level: why a stream closed (its gRPC status
    /// or the TLS alert) is only logged at debug level for its first 30 s.
    pub debug_config_log: bool,
}

impl Bootstrap {
    /// LDS and CDS from the files `xdst translate --out-dir DIR` writes; no gRPC at all.
    pub fn files(dir: &std::path::Path, node_id: &str) -> Bootstrap {
        Bootstrap {
            api_type: ApiType::Sotw,
            xds_addr: ([127, 0, 0, 1], 9).into(),
            more_xds_addrs: Vec::new(),
            node_id: node_id.to_owned(),
            node_cluster: "envoy-test".to_owned(),
            files: Some(dir.to_owned()),
            tls_ca: None,
            tls_client: None,
            debug_config_log: false,
        }
    }

    /// Node cluster `envoy-test`.
    pub fn new(api_type: ApiType, xds_addr: SocketAddr, node_id: &str) -> Bootstrap {
        Bootstrap {
            api_type,
            xds_addr,
            more_xds_addrs: Vec::new(),
            node_id: node_id.to_owned(),
            node_cluster: "envoy-test".to_owned(),
            files: None,
            tls_ca: None,
            tls_client: None,
            debug_config_log: false,
        }
    }

    /// The bootstrap YAML: LDS and CDS over ADS, admin on 127.0.0.1 port 0.
    pub fn to_yaml(&self) -> String {
        if let Some(dir) = &self.files {
            let d = dir.display();
            return format!(
                r#"node:
  id: {id:?}
  cluster: {cluster:?}
admin:
  address:
    socket_address: {{address: 127.0.0.1, port_value: 0}}
dynamic_resources:
  cds_config:
    path_config_source: {{path: "{d}/cds.json", watched_directory: {{path: "{d}"}}}}
    resource_api_version: V3
  lds_config:
    path_config_source: {{path: "{d}/lds.json", watched_directory: {{path: "{d}"}}}}
    resource_api_version: V3
"#,
                id = self.node_id,
                cluster = self.node_cluster,
            );
        }
        let transport_socket = match &self.tls_ca {
            None => String::new(),
            Some(ca) => format!(
                r#"    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          alpn_protocols: [h2]
{client}          validation_context:
            trusted_ca: {{filename: "{ca}"}}
            match_typed_subject_alt_names:
            - san_type: DNS
              matcher: {{exact: localhost}}
"#,
                ca = ca.display(),
                client = match &self.tls_client {
                    None => String::new(),
                    Some((cert, key)) => format!(
                        "          tls_certificates:\n          - certificate_chain: {{filename: \"{}\"}}\n            private_key: {{filename: \"{}\"}}\n",
                        cert.display(),
                        key.display()
                    ),
                }
            ),
        };
        format!(
            r#"node:
  id: {id:?}
  cluster: {cluster:?}
admin:
  address:
    socket_address: {{address: 127.0.0.1, port_value: 0}}
dynamic_resources:
  ads_config:
    api_type: {api}
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services:
    - envoy_grpc: {{cluster_name: xds_cluster}}
  cds_config: {{ads: {{}}, resource_api_version: V3}}
  lds_config: {{ads: {{}}, resource_api_version: V3}}
static_resources:
  clusters:
  - name: xds_cluster
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {{}}
    load_assignment:
      cluster_name: xds_cluster
      endpoints:
      - lb_endpoints:
{endpoints}{transport_socket}"#,
            id = self.node_id,
            cluster = self.node_cluster,
            api = self.api_type.as_str(),
            endpoints = std::iter::once(&self.xds_addr)
                .chain(&self.more_xds_addrs)
                .map(|a| format!(
                    "        - endpoint:\n            address:\n              socket_address: {{address: {}, port_value: {}}}\n",
                    a.ip(),
                    a.port()
                ))
                .collect::<String>(),
        )
    }
}

/// A running Envoy; SIGKILLed when dropped, its temp dir (bootstrap, log) removed.
pub struct Envoy {
    child: tokio::process::Child,
    pub admin_addr: SocketAddr,
    pub node_id: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Envoy {
    /// Writes the bootstrap, starts `envoy --disable-hot-restart --concurrency 1 -l warning`
    /// and waits (up to 20 s) for its admin port.
    pub async fn start(bootstrap: &Bootstrap) -> anyhow::Result<Envoy> {
        let dir = tempfile::Builder::new().prefix("xdst-envoy-").tempdir()?;
        let config = dir.path().join("bootstrap.yaml");
        let admin_path = dir.path().join("admin-address");
        let log = dir.path().join("envoy.log");
        std::fs::write(&config, bootstrap.to_yaml())?;
        let mut child = tokio::process::Command::new(envoy_bin())
            .arg("-c")
            .arg(&config)
            .args(["--disable-hot-restart", "--concurrency", "1", "-l", "warning"])
            .args(if bootstrap.debug_config_log { &["--component-log-level", "config:debug"][..] } else { &[] })
            .arg("--admin-address-path")
            .arg(&admin_path)
            .arg("--log-path")
            .arg(&log)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {}", envoy_bin().display()))?;
        let deadline = Instant::now() + crate::wait::patience(Duration::from_secs(20));
        let admin_addr = loop {
            // Envoy writes "127.0.0.1:PORT" once the admin listener is bound.
            if let Ok(text) = std::fs::read_to_string(&admin_path)
                && let Ok(addr) = text.trim().parse::<SocketAddr>()
            {
                break addr;
            }
            if let Some(status) = child.try_wait()? {
                bail!("envoy exited before its admin port was up: {status}\n{}", tail(&log, 30));
            }
            if Instant::now() > deadline {
                bail!("envoy's admin port was not up within 20s\n{}", tail(&log, 30));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Ok(Envoy { child, admin_addr, node_id: bootstrap.node_id.clone(), log, _dir: dir })
    }

    /// Every counter, gauge and text readout (`/stats?format=json`; histograms left out).
    pub async fn stats(&self) -> anyhow::Result<Stats> {
        let body = self.admin_get("/stats?format=json").await?;
        Stats::from_json(&body)
    }

    /// `GET` an admin path; an error unless the status is 200.
    pub async fn admin_get(&self, path: &str) -> anyhow::Result<String> {
        let (status, body) =
            http_get(self.admin_addr, path).await.with_context(|| format!("envoy admin GET {path}"))?;
        if status != 200 {
            bail!("envoy admin GET {path}: status {status}: {body}");
        }
        Ok(body)
    }

    /// The port a listener is bound to (from `/listeners`; it tells the real port of a
    /// listener configured with port 0), or `None` while Envoy has no such active listener.
    pub async fn listener_port(&self, name: &str) -> anyhow::Result<Option<u16>> {
        let v: Value = serde_json::from_str(&self.admin_get("/listeners?format=json").await?)?;
        let port = v["listener_statuses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["name"] == name)
            .and_then(|l| l["local_address"]["socket_address"]["port_value"].as_u64());
        Ok(port.filter(|p| *p != 0).map(|p| p as u16))
    }

    /// Polls the stats until `ready` holds; on timeout, an error describing `what` with the
    /// xDS-related stats and the end of Envoy's log.
    pub async fn wait_for_stats(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&Stats) -> bool,
    ) -> anyhow::Result<Stats> {
        let waited = crate::wait::until(what, timeout, async || {
            let stats = self.stats().await?;
            Ok(if ready(&stats) {
                Seen::Done(stats)
            } else {
                Seen::Not(format!("xDS stats:\n{}", stats.xds_related()))
            })
        })
        .await;
        waited.map_err(|e| anyhow::anyhow!("envoy {}: {e:#}\nenvoy log:\n{}", self.node_id, self.log_tail(20)))
    }

    /// Polls the stats until every expectation holds; on timeout, an error with the
    /// expected-versus-actual diff, the other xDS stats and the end of Envoy's log.
    pub async fn wait_for(&self, expect: &Expect, timeout: Duration) -> anyhow::Result<Stats> {
        let waited = stats_matching(async || self.stats().await, expect, timeout).await;
        waited.map_err(|e| anyhow::anyhow!("envoy {}: {e:#}\nenvoy log:\n{}", self.node_id, self.log_tail(20)))
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

fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("(no log at {}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    if all.is_empty() { "(empty)".to_owned() } else { all[start..].join("\n") }
}

/// One reading of Envoy's stats: name to value (a number, or a string for text readouts
/// such as `version_text`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats(pub BTreeMap<String, Value>);

impl Stats {
    pub fn from_json(body: &str) -> anyhow::Result<Stats> {
        let v: Value = serde_json::from_str(body).context("envoy /stats?format=json is not JSON")?;
        let mut map = BTreeMap::new();
        for s in v["stats"].as_array().context("envoy /stats?format=json has no \"stats\" array")? {
            if let (Some(name), Some(value)) = (s["name"].as_str(), s.get("value")) {
                map.insert(name.to_owned(), value.clone());
            }
        }
        Ok(Stats(map))
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// A counter or gauge; 0 when absent (Envoy creates many stats lazily).
    pub fn count(&self, name: &str) -> u64 {
        self.0.get(name).and_then(Value::as_u64).unwrap_or(0)
    }

    /// A text readout such as `listener_manager.lds.version_text`; `None` when absent.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(Value::as_str)
    }

    /// Every stat's name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Every text readout (`*.version_text`, ...), by name.
    pub fn all_text(&self) -> Vec<(String, String)> {
        self.0.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()
    }

    /// The stats whose names contain any of `parts`, one `name: value` a line.
    pub fn matching(&self, parts: &[&str]) -> String {
        let mut out = String::new();
        for (name, value) in &self.0 {
            if parts.iter().any(|p| name.contains(p)) {
                let _ = writeln!(out, "  {name}: {value}");
            }
        }
        out
    }

    /// What a failing xDS test wants to see: versions, update outcomes, connection state,
    /// listener and cluster counts.
    pub fn xds_related(&self) -> String {
        self.matching(&[
            "version_text",
            ".update_success",
            ".update_rejected",
            ".update_failure",
            ".config_reload",
            "control_plane.connected_state",
            "listener_manager.listener_",
            "listener_manager.total_listeners",
            "cluster_manager.cluster_",
            "cluster_manager.active_clusters",
            "cluster_manager.warming_clusters",
            ".membership_total",
            ".membership_healthy",
        ])
    }
}

/// Polls `stats` until every expectation of `expect` holds; on timeout, the
/// expected-versus-actual diff and the other xDS stats (any Envoy's: here or in a namespace).
pub async fn stats_matching(
    stats: impl AsyncFn() -> anyhow::Result<Stats>,
    expect: &Expect,
    timeout: Duration,
) -> anyhow::Result<Stats> {
    crate::wait::until("the stats to match", timeout, async || {
        let stats = stats().await?;
        Ok(if expect.holds(&stats) {
            Seen::Done(stats)
        } else {
            Seen::Not(format!(
                "(- expected, + actual):\n{}\nxDS stats now:\n{}",
                expect.diff(&stats),
                stats.xds_related()
            ))
        })
    })
    .await
}

/// One expected stat value.
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    /// A text readout equal to this.
    Text(String),
    /// A text readout present and different from this.
    NotText(String),
    /// A counter or gauge equal to this (absent counts as 0).
    Count(u64),
    /// A counter or gauge at least this.
    AtLeast(u64),
}

impl Want {
    fn holds(&self, stats: &Stats, name: &str) -> bool {
        match self {
            Want::Text(t) => stats.text(name) == Some(t.as_str()),
            Want::NotText(t) => stats.text(name).is_some_and(|v| v != t),
            Want::Count(n) => stats.count(name) == *n,
            Want::AtLeast(n) => stats.count(name) >= *n,
        }
    }
}

impl std::fmt::Display for Want {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Want::Text(t) => write!(f, "{t:?}"),
            Want::NotText(t) => write!(f, "anything but {t:?}"),
            Want::Count(n) => write!(f, "{n}"),
            Want::AtLeast(n) => write!(f, ">= {n}"),
        }
    }
}

/// A set of expected stats, checked together.
#[derive(Debug, Clone, Default)]
pub struct Expect(pub Vec<(String, Want)>);

impl Expect {
    pub fn new() -> Expect {
        Expect::default()
    }
    pub fn want(mut self, name: impl Into<String>, want: Want) -> Expect {
        self.0.push((name.into(), want));
        self
    }
    pub fn text(self, name: impl Into<String>, value: impl Into<String>) -> Expect {
        self.want(name, Want::Text(value.into()))
    }
    pub fn not_text(self, name: impl Into<String>, value: impl Into<String>) -> Expect {
        self.want(name, Want::NotText(value.into()))
    }
    pub fn count(self, name: impl Into<String>, n: u64) -> Expect {
        self.want(name, Want::Count(n))
    }
    pub fn at_least(self, name: impl Into<String>, n: u64) -> Expect {
        self.want(name, Want::AtLeast(n))
    }
    /// Each named counter exactly as in `before`: nothing of that kind happened since.
    pub fn unchanged(mut self, before: &Stats, names: &[&str]) -> Expect {
        for n in names {
            self.0.push(((*n).to_owned(), Want::Count(before.count(n))));
        }
        self
    }
    /// Each named text readout exactly as in `before`.
    pub fn same_text(mut self, before: &Stats, names: &[&str]) -> Expect {
        for n in names {
            self.0.push(((*n).to_owned(), Want::Text(before.text(n).unwrap_or("<absent>").to_owned())));
        }
        self
    }

    pub fn holds(&self, stats: &Stats) -> bool {
        self.0.iter().all(|(name, want)| want.holds(stats, name))
    }

    /// One line per expectation: `  name: value` when it holds, a `-`/`+` pair when not.
    pub fn diff(&self, stats: &Stats) -> String {
        let mut out = String::new();
        for (name, want) in &self.0 {
            let actual = stats.get(name).map(Value::to_string).unwrap_or_else(|| "<absent>".to_owned());
            if want.holds(stats, name) {
                let _ = writeln!(out, "  {name}: {actual}");
            } else {
                let _ = writeln!(out, "- {name}: {want}");
                let _ = writeln!(out, "+ {name}: {actual}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_parse_and_diff() {
        let stats = Stats::from_json(
            r#"{"stats":[{"name":"listener_manager.lds.version_text","value":"abc"},
                {"name":"listener_manager.lds.update_success","value":2},
                {"histograms":{"supported_quantiles":[0.5]}}]}"#,
        )
        .unwrap();
        assert_eq!(stats.text("listener_manager.lds.version_text"), Some("abc"));
        assert_eq!(stats.count("listener_manager.lds.update_success"), 2);
        assert_eq!(stats.count("missing"), 0);

        let ok = Expect::new()
            .text("listener_manager.lds.version_text", "abc")
            .at_least("listener_manager.lds.update_success", 1);
        assert!(ok.holds(&stats));
        let bad = Expect::new()
            .not_text("listener_manager.lds.version_text", "abc")
            .count("listener_manager.lds.update_success", 1);
        assert!(!bad.holds(&stats));
        let diff = bad.diff(&stats);
        assert!(
            diff.contains("- listener_manager.lds.update_success: 1\n+ listener_manager.lds.update_success: 2"),
            "{diff}"
        );
        assert!(diff.contains("- listener_manager.lds.version_text: anything but \"abc\""), "{diff}");
    }

    #[test]
    fn bootstrap_names_the_api_and_server() {
        let b = Bootstrap::new(ApiType::Delta, "127.0.0.1:4567".parse().unwrap(), "n1");
        let yaml = b.to_yaml();
        assert!(yaml.contains("api_type: DELTA_GRPC"), "{yaml}");
        assert!(yaml.contains("port_value: 4567"), "{yaml}");
        assert!(yaml.contains("id: \"n1\""), "{yaml}");
    }
}

//! Test harness for xdst's integration tests: an in-process or separate-process xdst,
//! real Envoy processes, local upstreams, and the tools the tests and the load generator
//! share. Servers started in-process bind port 0 and read back the port the OS gave; a port a
//! test must name before the bind comes from [`free_port`], below the kernel's ephemeral range.
//! Everything binds to loopback (the Gateway API harness gives each case's Gateways
//! `127.X.Y.Z` addresses of their own), so tests run in parallel.
//!
//! Tools (Envoy, Python grpcio, Node grpc-js-xds) are installed by `tests/setup.sh`, which
//! the README test command runs first; a test that cannot find one fails and says so.

pub mod admin;
pub mod ads_client;
pub mod bench_intent;
pub mod crd_schema;
pub mod echo;
pub mod envoy;
pub mod etcd;
pub mod fixtures;
pub mod floor;
pub mod gateway_api;
pub mod grpc_echo;
pub mod netns;
pub mod operator;
pub mod pki;
pub mod plugins;
pub mod registry;
pub mod server;
pub mod stream_echo;
pub mod suite_pki;
pub mod teams;
pub mod traffic;
pub mod upstream;
pub mod wait;
pub mod xds;

use std::path::PathBuf;

/// `$XDST_CACHE`, default `~/.cache/xdst`: where `tests/setup.sh` installs tools.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/xdst"))
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// `cargo`, run from the repository root in the environment the test command's own cargo
/// runs in: without the variables cargo sets for a running test (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`). Build scripts watch some of them (ring's watches `CARGO_MANIFEST_DIR`), so
/// with them every build from a test would rebuild TLS and gRPC, and the next `cargo test`
/// would rebuild them back.
pub fn cargo() -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("CARGO_PKG_") || k.starts_with("CARGO_MANIFEST_") || k == "CARGO_CRATE_NAME" {
            cmd.env_remove(&key);
        }
    }
    cmd.current_dir(repo_root());
    cmd
}

/// A loopback port nothing listens on now, for a process (Envoy, xdst, a registry) to bind a
/// moment later.
///
/// A port the kernel handed out for `bind(0)` is in its ephemeral range, which it also hands to
/// other sockets, outgoing connections included: between the choice and the bind, another
/// test's socket could take it ("Address already in use", seen in CI). So the port is chosen
/// below that range, which the kernel never hands out by itself: a counter keeps this
/// process's choices apart, a start derived from the process id makes two processes' choices
/// unlikely to meet, and a trial bind skips a port in use. Where there is no room below the range, `bind(0)` it is.
pub fn free_port() -> anyhow::Result<u16> {
    free_ports(1)
}

/// The first of `n` consecutive ports free on 127.0.0.1 (see [`free_port`]), taken together so
/// that another test's [`free_port`] does not land on the second. Envoy binds its listeners
/// with `SO_REUSEPORT`: two Envoys on one port share its connections without an error.
pub fn free_ports(n: u16) -> anyhow::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = u32::from(n.max(1));
    const LOWEST: u32 = 10_000;
    let ephemeral_low: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768);
    if ephemeral_low > LOWEST + 1_000 {
        let span = ephemeral_low - LOWEST;
        let start = std::process::id().wrapping_mul(7_919) % span;
        for _ in 0..span {
            let first = LOWEST + (start + NEXT.fetch_add(n, Ordering::Relaxed)) % span;
            if first + n > ephemeral_low {
                continue;
            }
            if (first..first + n).all(|p| std::net::TcpListener::bind(("127.0.0.1", p as u16)).is_ok()) {
                return Ok(first as u16);
            }
        }
    }
    anyhow::ensure!(n == 1, "no {n} consecutive free ports below the ephemeral range");
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Logs to the test's output when `RUST_LOG` is set.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// `$XDST_PYTHON`, else the venv `tests/setup.sh` creates.
pub fn python() -> PathBuf {
    tool("XDST_PYTHON", "venv/bin/python")
}

/// Starts a proxyless gRPC client (`cmd`: `tests/clients/xds_client.py` or `.mjs` with its
/// arguments) making `count` calls to `xds:///echo`, each within `timeout_s`, through the xDS
/// server its `bootstrap` names; stdout and stderr piped, killed on drop.
pub fn proxyless_echo_client(
    mut cmd: tokio::process::Command,
    bootstrap: &serde_json::Value,
    count: usize,
    timeout_s: u64,
) -> std::io::Result<tokio::process::Child> {
    cmd.args(["--target", "xds:///echo", "--count", &count.to_string(), "--timeout", &timeout_s.to_string()])
        .env("GRPC_XDS_BOOTSTRAP_CONFIG", bootstrap.to_string())
        .env_remove("GRPC_XDS_BOOTSTRAP")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
}

/// `$XDST_NODE_PATH`, else the node_modules `tests/setup.sh` installs.
pub fn node_path() -> PathBuf {
    tool("XDST_NODE_PATH", "node/node_modules")
}

fn tool(var: &str, under_cache: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let p = cache_dir().join(under_cache);
    assert!(
        p.exists(),
        "{var} is unset and {} does not exist; run tests/setup.sh, then `. ~/.cache/xdst/env.sh`",
        p.display()
    );
    p
}

#[cfg(test)]
mod tests {
    /// The ports `free_port` gives are distinct, free, and outside the kernel's ephemeral range
    /// (where it has room below that range, as on Linux's default 32768-60999).
    #[test]
    fn free_ports_are_distinct_and_below_the_ephemeral_range() {
        let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(32_768);
        let ports: Vec<u16> = (0..500).map(|_| super::free_port().unwrap()).collect();
        let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "a port was given twice");
        if low > 11_000 {
            assert!(ports.iter().all(|p| (10_000..low).contains(p)), "{ports:?}");
        }
        for p in ports.iter().take(20) {
            std::net::TcpListener::bind(("127.0.0.1", *p)).expect("a port free_port gave is in use");
        }
    }
}

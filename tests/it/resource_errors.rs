//! Issue 53, item 2: per-resource errors (gRFC A88, `resource_errors`), with a real proxyless
//! gRPC client. Python grpcio (1.85, as `tests/setup.sh` installs it) reads them behind
//! `GRPC_EXPERIMENTAL_XDS_DATA_ERROR_HANDLING=true`.
//!
//! xdst serves RouteConfiguration `echo-routes` and cluster `echo-cluster`, but no Listener
//! `echo`. (A route naming a cluster that does not exist never reaches a client: xdst's
//! consistency check refuses the set, so the name a client asks for and xdst lacks is the
//! first of its chain.) The client asks for Listener `echo` by name. xdst answers with a
//! `NOT_FOUND` error for the name, and the RPC fails with xdst's message. The client does not
//! wait for its does-not-exist timer (15 s). Without the flag, the same client fails with no
//! word from xdst. The message proves where the failure came from, so the test asserts the
//! message, not a time. The times are printed.

use std::time::Instant;

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};
use xdst_tests::fixtures;

/// What xdst says of the missing cluster (`xdst_core::stream::absent`).
const SAYS: &str = r#"xdst: no lds resource named "echo""#;

/// Runs the Python client against `xdst` (one call, `timeout_s` overall) with the A88 flag on
/// or off; its JSON result and how long it took.
async fn call(xds: std::net::SocketAddr, flag: bool, timeout_s: u64) -> anyhow::Result<(Value, std::time::Duration)> {
    let bootstrap = json!({
        "xds_servers": [{"server_uri": xds.to_string(), "channel_creds": [{"type": "insecure"}]}],
        "node": {"id": format!("grpc-a88-{flag}-{}", std::process::id()), "cluster": "grpc-test",
                 "locality": {"zone": "z1"}},
    });
    let mut cmd = tokio::process::Command::new(xdst_tests::python());
    cmd.arg(xdst_tests::repo_root().join("tests/clients/xds_client.py")).arg("--fail-fast");
    if flag {
        cmd.env("GRPC_EXPERIMENTAL_XDS_DATA_ERROR_HANDLING", "true");
    } else {
        cmd.env_remove("GRPC_EXPERIMENTAL_XDS_DATA_ERROR_HANDLING");
    }
    let started = Instant::now();
    let child = xdst_tests::proxyless_echo_client(cmd, &bootstrap, 1, timeout_s)?;
    let out = child.wait_with_output().await?;
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let result: Value = serde_json::from_str(line).with_context(|| {
        format!(
            "the client's last line is not JSON\nstdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    Ok((result, took))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_client_learns_at_once_that_its_listener_does_not_exist() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let res = tempfile::Builder::new().prefix("xdst-a88-").tempdir()?;
    fixtures::write(res.path(), "echo-routes.yaml", &fixtures::route("echo-routes", "echo-cluster"));
    fixtures::write(res.path(), "echo-cluster.yaml", &fixtures::cluster("echo-cluster", 9));
    let xdst = xdst_tests::server::start_in_process(Some(res.path())).await?;

    let (with_flag, fast) = call(xdst.xds_addr, true, 20).await?;
    let error = with_flag["error"].as_str().unwrap_or_default().to_owned();
    eprintln!("with GRPC_EXPERIMENTAL_XDS_DATA_ERROR_HANDLING: failed after {fast:?}: {error}");
    ensure!(with_flag["ok"] == false, "the call went through to a cluster that does not exist: {with_flag}");
    ensure!(error.contains(SAYS), "the client's error is not xdst's per-resource error ({SAYS}): {with_flag}");

    // The same client without the flag: the failure carries no word from xdst.
    let (without, slow) = call(xdst.xds_addr, false, 5).await?;
    eprintln!("without it: failed after {slow:?}: {}", without["error"]);
    ensure!(without["ok"] == false, "{without}");
    ensure!(!without["error"].as_str().unwrap_or_default().contains("xdst: no"), "{without}");
    xdst.shutdown().await;
    Ok(())
}

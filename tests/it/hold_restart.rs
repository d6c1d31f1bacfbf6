//! Issue 48, point 6 (the readiness half): a restart is ready only when it serves what it
//! should. xdst serves a Gateway and team-b's route; while it is down the Gateway's file is
//! broken (it does not parse); restarted, the file is held out (no last good parse survives a
//! restart), the group it served is served nothing, and `/readyz` answers 503 saying so,
//! where before issue 48 it answered 200 while serving an empty set. Fixed, it is ready again.

use std::time::Duration;

use anyhow::ensure;
use serde_json::Value;
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, gateway, path_route, serves, team};
use xdst_tests::upstream::http_get;
use xdst_tests::wait::{Seen, until};

/// `/readyz`: its status and body.
async fn readyz(admin: std::net::SocketAddr) -> anyhow::Result<(u16, Value)> {
    let (status, body) = http_get(admin, "/readyz").await?;
    Ok((status, serde_json::from_str(&body)?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_serves_a_group_nothing_it_served_before_is_not_ready() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    t.write("team-b.yaml", &format!("{}---\n{}", team("team-b", &t.b), path_route("b0", "team-b", "/b0")))?;
    let args = ["--debounce", "20ms"];
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &args).await?;
    let (status, body) = readyz(xdst.admin_addr).await?;
    ensure!(status == 200, "serving the Gateway: {status} {body}");
    xdst.kill().await?;

    // While it is down, the Gateway's file breaks.
    t.write("infra.yaml", "kind: [this is not\n")?;
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &args).await?;
    let (status, body) = readyz(xdst.admin_addr).await?;
    let unready: Vec<&str> = body["unready"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    ensure!(
        status == 503 && unready.iter().any(|u| u.contains("served nothing") && u.contains("before this start")),
        "restarted with the Gateway's file broken: {status} {body}"
    );
    ensure!(body["degraded"]["names"].to_string().contains("infra.yaml"), "what is held is named: {body}");

    // Fixed: ready, and serving.
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    until("/readyz 200 once the Gateway is back", Duration::from_secs(30), async || {
        let (status, body) = readyz(xdst.admin_addr).await?;
        Ok(Seen::holds(status == 200, format!("{status} {body}")))
    })
    .await?;
    let envoy = xdst_tests::envoy::Envoy::start(&xdst_tests::envoy::Bootstrap::new(
        xdst_tests::envoy::ApiType::Sotw,
        xdst.xds_addr,
        "restarted",
    ))
    .await?;
    serves(t.gateway(), "/b0", "b").await?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

//! Issue 49, items 9 and 10: a plugin call that fails naming no document (its deadline, its
//! memory cap) is the changing team's, not everyone's; through the real path (files, the
//! intent API, xdst, a real Envoy).
//!
//! - [`a_document_a_plugin_sleeps_on_holds_back_its_own_team_only`]: the adversarial plugin
//!   (`by-document`) loops on team-a's document until its 500 ms deadline. Every generation used
//!   to fail while the document existed: team-b's file edits were not served and its API
//!   writes answered 422 with the sleeper's error. Now team-a's changes are held together and
//!   team-b's file edit and API write reach Envoy.
//! - [`a_team_s_file_past_the_plugin_s_memory_cap_holds_back_that_team_only`]: team-a writes a
//!   file of 4,000 HTTPRoutes that takes the gateway-api plugin past its memory cap (16 MiB
//!   here, 256 MiB by default: about 29,000 routes in one file). Every generation used to fail;
//!   now team-a's routes are held and team-b's new route reaches Envoy.

use std::time::Duration;

use anyhow::ensure;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, backend, gateway, path_route, route, serves, team};
use xdst_tests::wait::{Seen, until};
use xdst_tests::xds::http_with;

const WAIT: Duration = Duration::from_secs(60);

/// An `Adversary` document of `ns` named `name`, whose `spec.mode` the plugin reads.
fn adversary(ns: &str, name: &str, mode: &str) -> String {
    format!("kind: Adversary\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{mode: {mode}}}\n")
}

/// Waits until `envoy` holds cluster `name`.
async fn has_cluster(envoy: &Envoy, name: &str) -> anyhow::Result<()> {
    until(format!("cluster {name} in Envoy"), WAIT, async || {
        let stats = envoy.stats().await?;
        let has = stats.0.keys().any(|k| k.starts_with(&format!("cluster.{name}.")));
        Ok(Seen::holds(has, "not yet"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_a_plugin_sleeps_on_holds_back_its_own_team_only() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let intent = tempfile::Builder::new().prefix("xdst-edges-plugins-intent-").tempdir()?;
    let plugins = tempfile::Builder::new().prefix("xdst-edges-plugins-").tempdir()?;
    let secrets = tempfile::Builder::new().prefix("xdst-edges-plugins-token-").tempdir()?;
    let token = secrets.path().join("token");
    std::fs::write(&token, "t0ken")?;
    let settings = "config: by-document\nlimits: {deadlineMs: 500}\n";
    xdst_tests::plugins::install(plugins.path(), &xdst_tests::plugins::adversary()?, "adversary.wasm", Some(settings))?;
    let write = |file: &str, text: &str| xdst_core::files::write_atomic(&intent.path().join(file), text);
    write("team-b-b0.yaml", &adversary("team-b", "b0", "ok"))?;
    let token_arg = token.display().to_string();
    let xdst =
        Process::start_intent(intent.path(), plugins.path(), &["--debounce", "20ms", "--admin-token-file", &token_arg])
            .await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edges-plugins")).await?;
    has_cluster(&envoy, "team-b-b0").await?;

    // team-a's document the plugin loops on until its deadline: held, with team-a's changes.
    write("team-a-sleepy.yaml", &adversary("team-a", "sleepy", "loop"))?;
    let held = xdst_tests::admin::wait_for_held(xdst.admin_addr, "Adversary/team-a/sleepy", "deadline").await?;
    ensure!(held["error"].as_str().is_some_and(|e| e.contains("namespace \"team-a\"")), "{held}");
    // team-b's file edit and API write apply.
    write("team-b-b1.yaml", &adversary("team-b", "b1", "ok"))?;
    has_cluster(&envoy, "team-b-b1").await?;
    let (status, body) = http_with(
        xdst.admin_addr,
        "PUT",
        "/intent/Adversary/team-b/b2",
        &[("Authorization", "Bearer t0ken")],
        &adversary("team-b", "b2", "ok"),
    )
    .await;
    ensure!(status == 200, "team-b's API write: {status} {body}");
    has_cluster(&envoy, "team-b-b2").await?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_s_file_past_the_plugin_s_memory_cap_holds_back_that_team_only() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    // The gateway-api plugin with a memory cap of 16 MiB, which 4,000 routes in one file pass.
    let mut settings = t.settings();
    settings["limits"] = serde_json::json!({"memoryMiB": 16});
    t.install(&settings)?;
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    t.write("team-b.yaml", &format!("{}---\n{}", team("team-b", &t.b), path_route("b0", "team-b", "/b0")))?;
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &["--debounce", "20ms"]).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edges-memory")).await?;
    serves(t.gateway(), "/b0", "b").await?;

    // team-a's file: its Service and 4,000 routes.
    let mut file = team("team-a", &t.a);
    for i in 0..4000 {
        file.push_str("---\n");
        file.push_str(&route(
            &format!("r{i}"),
            "team-a",
            &format!("matches: [{{path: {{value: /a/{i}}}}}]\n    {}", backend("team-a")),
        ));
    }
    t.write("team-a-routes.yaml", &file)?;
    let held = xdst_tests::admin::wait_for_held(xdst.admin_addr, "HTTPRoute/team-a/r0", "memory cap").await?;
    ensure!(held["error"].as_str().is_some_and(|e| e.contains("namespace \"team-a\"")), "{held}");
    // team-b ships: served.
    t.write("team-b-b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    let took = serves(t.gateway(), "/b1", "b").await?;
    eprintln!("team-b's /b1 served {took:?} after its write, team-a's 4,000 routes held");
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

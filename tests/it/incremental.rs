//! Issue 50, items 1 and 3: contract 0.4.0, incremental translation (design 020), through a
//! real Envoy, with plugins in Rust and in JavaScript. The test plugin (`tests/plugins/incremental`) says which call it got in its one
//! diagnostic: the first call is full, an edit or a removal is a changes call carrying only
//! that document or that id, and Envoy gets the same clusters a full translation gives. A
//! plugin whose cache goes stale (it forgets a removal) serves its mistake only until the
//! periodic full call (`--full-translation-every`), which finds it, counts it and serves the
//! full call's output.

use std::net::SocketAddr;

use anyhow::ensure;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::server::Process;
use xdst_tests::teams::{WAIT, admin_json};
use xdst_tests::wait::{Seen, until};

fn counted(name: &str, port: u16) -> String {
    format!("kind: Counted\nmetadata: {{name: {name}}}\nspec: {{port: {port}}}\n")
}

/// Waits until the last generation's diagnostic says `call`.
async fn last_call(admin: SocketAddr, call: &str) -> anyhow::Result<()> {
    until(format!("the plugin's last call: {call}"), WAIT, async || {
        let status = admin_json(admin, "/debug/plugins").await?;
        let said: Vec<String> = status["last_generation"]["diagnostics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["message"].as_str().map(str::to_owned))
            .collect();
        Ok(Seen::holds(said.iter().any(|m| m == call), format!("{said:?}")))
    })
    .await
}

/// Waits until Envoy's clusters (besides the xDS one) are exactly `want`, each `name:port`.
async fn envoy_clusters(envoy: &Envoy, want: &[&str]) -> anyhow::Result<()> {
    until(format!("Envoy's clusters are {want:?}"), WAIT, async || {
        let text = envoy.admin_get("/clusters").await?;
        let mut have: Vec<String> = text
            .lines()
            .filter(|l| l.contains("::127.0.0.1:") && !l.starts_with("xds_cluster"))
            .filter_map(|l| {
                let (name, rest) = l.split_once("::127.0.0.1:")?;
                Some(format!("{name}:{}", rest.split("::").next()?))
            })
            .collect();
        have.sort();
        have.dedup();
        Ok(Seen::holds(have == want, format!("{have:?}")))
    })
    .await
}

async fn start(
    wasm: &std::path::Path,
    settings: &str,
    every: &str,
) -> anyhow::Result<(tempfile::TempDir, tempfile::TempDir, Process, Envoy)> {
    xdst_tests::init_logging();
    let intent = tempfile::tempdir()?;
    let plugins = tempfile::tempdir()?;
    xdst_tests::plugins::install(plugins.path(), wasm, "incremental.wasm", Some(settings))?;
    std::fs::write(intent.path().join("a.yaml"), counted("a", 9001))?;
    std::fs::write(intent.path().join("b.yaml"), counted("b", 9002))?;
    std::fs::write(intent.path().join("c.yaml"), counted("c", 9003))?;
    // The periodic full call after every `every` changes calls, whenever they come.
    let args = ["--debounce", "20ms", "--full-translation-every", every, "--full-translation-spacing", "0s"];
    let xdst = Process::start_intent(intent.path(), plugins.path(), &args).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "incremental")).await?;
    Ok((intent, plugins, xdst, envoy))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_calls_carry_what_changed_and_envoy_gets_what_a_full_call_gives() -> anyhow::Result<()> {
    changes_calls(&xdst_tests::plugins::incremental()?).await
}

/// The same, with the plugin written in JavaScript (`tests/plugins/incremental-js`): its
/// module-level Map lives in the instance the host keeps (issue 50, item 3: a second language,
/// end to end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_plugin_keeps_its_state_between_changes_calls() -> anyhow::Result<()> {
    changes_calls(&xdst_tests::plugins::incremental_js()?).await
}

/// Edits, a removal and a refused document through `wasm` (either test plugin): which call
/// each made, and what Envoy got.
async fn changes_calls(wasm: &std::path::Path) -> anyhow::Result<()> {
    let (intent, _plugins, xdst, envoy) = start(wasm, "config: {}\n", "100").await?;
    last_call(xdst.admin_addr, "full call: 3 documents").await?;
    envoy_clusters(&envoy, &["a:9001", "b:9002", "c:9003"]).await?;

    xdst_core::files::write_atomic(&intent.path().join("b.yaml"), counted("b", 9012))?;
    last_call(xdst.admin_addr, "changes call: 1 document(s), 0 removed").await?;
    envoy_clusters(&envoy, &["a:9001", "b:9012", "c:9003"]).await?;

    std::fs::remove_file(intent.path().join("c.yaml"))?;
    last_call(xdst.admin_addr, "changes call: 0 document(s), 1 removed").await?;
    envoy_clusters(&envoy, &["a:9001", "b:9012"]).await?;

    // A bad document fails the call: the instance is dropped with it (the generation without
    // the document, held out, needs no call: nothing else changed), and the next call, the
    // fix, is a full one in a fresh instance.
    std::fs::write(intent.path().join("d.yaml"), "kind: Counted\nmetadata: {name: d}\nspec: {port: 0}\n")?;
    xdst_tests::admin::wait_for_held(xdst.admin_addr, "Counted/d", "spec.port").await?;
    xdst_core::files::write_atomic(&intent.path().join("d.yaml"), counted("d", 9004))?;
    last_call(xdst.admin_addr, "full call: 3 documents").await?;
    envoy_clusters(&envoy, &["a:9001", "b:9012", "d:9004"]).await?;
    let mismatches = xdst_tests::operator::metric_sum(xdst.admin_addr, "xdst_incremental_mismatches_total").await?;
    ensure!(mismatches == 0.0, "an honest plugin's output was found to differ: {mismatches}");
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_cache_is_found_by_the_periodic_full_call_and_corrected() -> anyhow::Result<()> {
    stale_cache(&xdst_tests::plugins::incremental()?).await
}

/// The same, with the plugin written in JavaScript: the check does not depend on the language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_plugin_s_stale_cache_is_found_and_corrected() -> anyhow::Result<()> {
    stale_cache(&xdst_tests::plugins::incremental_js()?).await
}

/// `wasm` (either test plugin) with `stale: true` forgets a removal; the periodic full call
/// finds it.
async fn stale_cache(wasm: &std::path::Path) -> anyhow::Result<()> {
    let (intent, _plugins, xdst, envoy) = start(wasm, "config: {stale: true}\n", "3").await?;
    last_call(xdst.admin_addr, "full call: 3 documents").await?;
    envoy_clusters(&envoy, &["a:9001", "b:9002", "c:9003"]).await?;
    // The plugin forgets to remove c's cluster: its mistake is served, for now.
    std::fs::remove_file(intent.path().join("c.yaml"))?;
    last_call(xdst.admin_addr, "changes call: 0 document(s), 1 removed").await?;
    xdst_core::files::write_atomic(&intent.path().join("a.yaml"), counted("a", 9011))?;
    last_call(xdst.admin_addr, "changes call: 1 document(s), 0 removed").await?;
    envoy_clusters(&envoy, &["a:9011", "b:9002", "c:9003"]).await?;
    // The third changes call is checked by a full call of the same documents, on a thread of
    // its own (off the generation's path): it finds c's cluster, counts it, and wakes a
    // generation whose call is full, so c's cluster goes.
    xdst_core::files::write_atomic(&intent.path().join("a.yaml"), counted("a", 9021))?;
    last_call(xdst.admin_addr, "full call: 2 documents").await?;
    envoy_clusters(&envoy, &["a:9021", "b:9002"]).await?;
    let mismatches = xdst_tests::operator::metric_sum(xdst.admin_addr, "xdst_incremental_mismatches_total").await?;
    ensure!(mismatches == 1.0, "the stale cache was counted {mismatches} times, not once");
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

/// Issue 50, must-show: `xdst plugin new --lang LANG --incremental` makes a plugin of the
/// incremental form that builds, passes its golden case, says so in `inspect`, and under
/// `xdst serve` gets changes calls carrying only what changed (`last_generation.calls`: one
/// document for an edit, one for a removal), with Envoy getting what a full call gives and the
/// periodic full check (every second call here) finding nothing to correct.
async fn template_s_incremental_form_takes_changes_calls(lang: &str, entry: &str) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let work = tempfile::Builder::new().prefix("xdst-new-incremental-").tempdir()?;
    let run = |args: &[&str]| -> anyhow::Result<String> {
        let o = std::process::Command::new(xdst_tests::server::binary()?)
            .args(args)
            .current_dir(work.path())
            .env("RUST_LOG", "warn")
            .output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        ensure!(o.status.success(), "xdst {args:?}: {text}");
        Ok(text)
    };
    run(&["plugin", "new", "--lang", lang, "--incremental", "--kind", "Counted", "team-inc"])?;
    let code = std::fs::read_to_string(work.path().join("team-inc").join(entry))?;
    let says = ["incremental: true", "incremental=True"].iter().any(|s| code.contains(s));
    ensure!(says && code.contains("request.changes"), "not the incremental form: {code}");
    run(&["plugin", "build", "team-inc"])?;
    let wasm = work.path().join("team-inc/build/team-inc.wasm");
    let tested = run(&["plugin", "test", wasm.to_str().unwrap(), "--cases", "team-inc/cases"])?;
    ensure!(tested.contains("1 passed, 0 failed"), "{tested}");
    let info: serde_json::Value =
        serde_json::from_str(&run(&["plugin", "inspect", wasm.to_str().unwrap(), "--json"])?)?;
    ensure!(info["incremental"] == true && info["contract"].as_str().is_some_and(|c| c.contains("0.4.0")), "{info:#}");
    // A language whose toolchain speaks the core-module ABI has no incremental form, and says so.
    let refused = run(&["plugin", "new", "--lang", "zig", "--incremental", "team-zig"])
        .err()
        .ok_or_else(|| anyhow::anyhow!("zig has no incremental template: `new --incremental` must say so"))?;
    ensure!(refused.to_string().contains("core-module ABI"), "{refused}");

    let intent = tempfile::tempdir()?;
    let plugins = tempfile::tempdir()?;
    xdst_tests::plugins::install(plugins.path(), &wasm, "team-inc.wasm", None)?;
    let doc = |name: &str, port: u16| {
        format!("kind: Counted\nmetadata: {{name: {name}}}\nspec: {{address: 127.0.0.1, port: {port}}}\n")
    };
    for (name, port) in [("a", 9001), ("b", 9002), ("c", 9003)] {
        std::fs::write(intent.path().join(format!("{name}.yaml")), doc(name, port))?;
    }
    let args = ["--debounce", "20ms", "--full-translation-every", "2", "--full-translation-spacing", "0s"];
    let xdst = Process::start_intent(intent.path(), plugins.path(), &args).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "incremental-template")).await?;
    envoy_clusters(&envoy, &["a:9001", "b:9002", "c:9003"]).await?;
    // What the plugin was given in the last generation that called it: documents, per call
    // (a later generation may find nothing changed, a second burst of events for one write).
    let given = async || -> anyhow::Result<Vec<u64>> {
        let status = admin_json(xdst.admin_addr, "/debug/plugins").await?;
        Ok(status["last_calls"]
            .as_object()
            .into_iter()
            .flat_map(|groups| groups.values())
            .flat_map(|calls| calls.as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["documents"].as_u64())
            .collect())
    };
    xdst_core::files::write_atomic(&intent.path().join("b.yaml"), doc("b", 9012))?;
    envoy_clusters(&envoy, &["a:9001", "b:9012", "c:9003"]).await?;
    ensure!(given().await? == [1], "an edit of b: the call carried {:?} documents, not b alone", given().await?);
    std::fs::remove_file(intent.path().join("c.yaml"))?;
    envoy_clusters(&envoy, &["a:9001", "b:9012"]).await?;
    ensure!(given().await? == [1], "c removed: the call carried {:?}, not c's id alone", given().await?);
    xdst_core::files::write_atomic(&intent.path().join("a.yaml"), doc("a", 9011))?;
    envoy_clusters(&envoy, &["a:9011", "b:9012"]).await?;
    let mismatches = xdst_tests::operator::metric_sum(xdst.admin_addr, "xdst_incremental_mismatches_total").await?;
    ensure!(mismatches == 0.0, "the template's changes calls differ from a full call: {mismatches}");
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_template_s_incremental_form_takes_changes_calls() -> anyhow::Result<()> {
    template_s_incremental_form_takes_changes_calls("rust", "src/lib.rs").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_js_template_s_incremental_form_takes_changes_calls() -> anyhow::Result<()> {
    template_s_incremental_form_takes_changes_calls("js", "src/index.js").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_template_s_incremental_form_takes_changes_calls() -> anyhow::Result<()> {
    template_s_incremental_form_takes_changes_calls("python", "app.py").await
}

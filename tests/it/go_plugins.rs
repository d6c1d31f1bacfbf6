//! Issue 21: Go plugins (`guest-sdk/go`), built with the real Go toolchain for `GOOS=wasip1`.
//!
//! Go's wasip1 runtime imports `wasi_snapshot_preview1`; xdst gives core modules the same empty
//! WASI components get. `tests/plugins/go-probe` tries to read a file, list `/`, read the
//! environment and arguments, the clock and random bytes, and reports what it found: nothing
//! real without capabilities (an error for the file, no environment, the clock stopped at the
//! Unix epoch, the same bytes on every call), and the real clock and randomness when the
//! operator grants `clocks` and `random`. Files and the environment stay closed either way.

use anyhow::{Context as _, ensure};
use serde_json::Value;
use xdst_plugin::wit::TranslateRequest;
use xdst_plugin::{Capabilities, Limits, Runtime, RuntimeConfig};

fn probe(capabilities: Capabilities) -> anyhow::Result<(Value, Value)> {
    xdst_tests::init_logging();
    let wasm = xdst_tests::plugins::go_probe()?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let limits = Limits { capabilities, ..Limits::default() };
    let plugin = runtime.load_any("go-probe.wasm", &std::fs::read(&wasm)?, limits)?;
    ensure!(plugin.info().name == "go-probe", "{:?}", plugin.info());
    let request =
        TranslateRequest { node_group: String::new(), documents: vec![], resources: vec![], config: "null".into() };
    let mut found = Vec::new();
    for _ in 0..2 {
        let out = plugin.translate(&request)?;
        let message = &out.diagnostics.first().context("the probe reported nothing")?.message;
        found.push(serde_json::from_str::<Value>(message)?);
    }
    let second = found.pop().unwrap();
    Ok((found.pop().unwrap(), second))
}

#[test]
fn a_go_plugin_gets_nothing_real_without_capabilities() -> anyhow::Result<()> {
    let (first, second) = probe(Capabilities::default())?;
    eprintln!("[go-probe, no capabilities] {first}");
    ensure!(first["file"].as_str().is_some_and(|f| f.starts_with("error:")), "a file was read: {first}");
    ensure!(first["root"].as_str().is_some_and(|f| f.starts_with("error:")), "/ was listed: {first}");
    ensure!(first["env"].as_array().is_some_and(Vec::is_empty) && first["home"] == "", "environment: {first}");
    ensure!(first["args"].as_array().is_some_and(Vec::is_empty), "arguments: {first}");
    ensure!(first["unix_nanos"] == 0, "the clock is not stopped at the epoch: {first}");
    ensure!(first["random"].as_str().is_some_and(|r| r.len() == 32), "{first}");
    ensure!(first["random"] == second["random"], "random bytes differ between calls: {first} {second}");
    Ok(())
}

#[test]
fn a_go_plugin_granted_clocks_and_random_gets_the_real_ones_and_still_no_files() -> anyhow::Result<()> {
    let (first, second) = probe(Capabilities { clocks: true, random: true })?;
    eprintln!("[go-probe, clocks and random] {first}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() as i64;
    let seen = first["unix_nanos"].as_i64().context("no clock reading")?;
    ensure!((now - seen).abs() < 60_000_000_000, "the clock says {seen}, now is {now}");
    ensure!(first["random"] != second["random"], "random bytes repeat with `random` granted: {first} {second}");
    ensure!(first["file"].as_str().is_some_and(|f| f.starts_with("error:")), "a file was read: {first}");
    ensure!(first["env"].as_array().is_some_and(Vec::is_empty), "environment: {first}");
    Ok(())
}

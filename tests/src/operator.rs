//! The operator's tools against a running xdst, as an operator runs them: `xdst wait`, the
//! change reports of the admin port, a real CSDS client (`tests/clients/csds_client.py`) and
//! the status page in headless Chromium (`tests/clients/status_page.mjs`).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use serde_json::Value;

use crate::xds::http_get;

/// `xdst wait --change CHANGE --timeout TIMEOUT` against the admin port `admin`, with `extra`
/// arguments (`--group G`): its exit code and everything it printed.
pub async fn xdst_wait(admin: SocketAddr, change: i64, timeout: &str, extra: &[&str]) -> anyhow::Result<(i32, String)> {
    let out = tokio::process::Command::new(crate::server::binary()?)
        .args(["wait", "--change", &change.to_string(), "--timeout", timeout, "--admin"])
        .arg(format!("http://{admin}"))
        .args(extra)
        .output()
        .await
        .context("running xdst wait")?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.code().unwrap_or(-1), text))
}

/// The newest change's id (`GET /changes`), if there is one.
pub async fn latest_change(admin: SocketAddr) -> anyhow::Result<Option<i64>> {
    let (status, body) = http_get(admin, "/changes").await;
    ensure!(status == 200, "GET /changes: {status} {body}");
    let v: Value = serde_json::from_str(&body).with_context(|| format!("GET /changes: {body}"))?;
    Ok(v["latest"].as_i64())
}

/// Waits (up to 30 s) for a change newer than `after`: what an edit of the resources
/// directory became.
pub async fn next_change(admin: SocketAddr, after: Option<i64>) -> anyhow::Result<i64> {
    let what = format!("a change after {after:?} (did the edit load? see /debug/resources)");
    crate::wait::until(what, Duration::from_secs(30), async || {
        Ok(match latest_change(admin).await? {
            Some(id) if after.is_none_or(|a| id > a) => crate::wait::Seen::Done(id),
            latest => crate::wait::Seen::Not(format!("latest change {latest:?}")),
        })
    })
    .await
}

/// `GET /changes/{id}[?group=G]`, parsed, and the size of the answer in bytes.
pub async fn change_report(admin: SocketAddr, id: i64, group: Option<&str>) -> anyhow::Result<(Value, usize)> {
    let path = match group {
        Some(g) => format!("/changes/{id}?group={g}"),
        None => format!("/changes/{id}"),
    };
    let (status, body) = http_get(admin, &path).await;
    ensure!(status == 200, "GET {path}: {status} {}", clip(&body, 2000));
    let v = serde_json::from_str(&body).with_context(|| format!("GET {path}: {}", clip(&body, 2000)))?;
    Ok((v, body.len()))
}

/// `/debug/nodes`' entry for node `id` (the first, if a report lists it more than once).
pub async fn debug_node(admin: SocketAddr, id: &str) -> anyhow::Result<Option<Value>> {
    let (status, body) = http_get(admin, "/debug/nodes").await;
    ensure!(status == 200, "GET /debug/nodes: {status}");
    let v: Value = serde_json::from_str(&body)?;
    Ok(v.as_array().into_iter().flatten().find(|n| n["id"] == id).cloned())
}

/// The sum of every series of the counter `name` in `/metrics` (0 when it has none yet).
pub async fn metric_sum(admin: SocketAddr, name: &str) -> anyhow::Result<f64> {
    let (status, body) = http_get(admin, "/metrics").await;
    ensure!(status == 200, "GET /metrics: {status}");
    Ok(body
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// `tests/clients/csds_client.py` against the xDS port, with `args`: what it printed (one
/// JSON line; `{"ok": false, "code", "error"}` on an RPC error).
pub async fn csds(xds: SocketAddr, args: &[&str]) -> anyhow::Result<Value> {
    let script = crate::repo_root().join("tests/clients/csds_client.py");
    let out = tokio::process::Command::new(crate::python())
        .arg(script)
        .args(["--server", &xds.to_string()])
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .context("running csds_client.py")?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).with_context(|| {
        format!("csds_client.py printed {:?}; stderr: {}", clip(&text, 2000), String::from_utf8_lossy(&out.stderr))
    })
}

/// Where a test keeps what it made for people to look at (screenshots):
/// `$CARGO_TARGET_DIR/test-artifacts/<name>`, else `target/test-artifacts/<name>`.
pub fn artifacts(name: &str) -> anyhow::Result<std::path::PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join("target"));
    let dir = target.join("test-artifacts").join(name);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The status page of `admin` in headless Chromium (`tests/clients/status_page.mjs` with
/// `args`, screenshots to `artifacts(shots)`): the JSON line it printed, whatever its `ok`.
pub async fn status_page(admin: SocketAddr, shots: &str, args: &[&str]) -> anyhow::Result<Value> {
    let out = artifacts(shots)?;
    let script = crate::repo_root().join("tests/clients/status_page.mjs");
    let run = tokio::process::Command::new("node")
        .arg(script)
        .args(["--url", &format!("http://{admin}/"), "--out"])
        .arg(&out)
        .args(args)
        .arg("--node-path")
        .arg(crate::node_path())
        .kill_on_drop(true)
        .output();
    let run = tokio::time::timeout(Duration::from_secs(90), run).await.context("the browser run hung")??;
    let text = String::from_utf8_lossy(&run.stdout);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .with_context(|| format!("status_page.mjs printed {text:?}; stderr: {}", String::from_utf8_lossy(&run.stderr)))
}

/// At most `n` bytes of `s` (on a character boundary), for error messages.
pub fn clip(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes in all)", &s[..end], s.len())
}

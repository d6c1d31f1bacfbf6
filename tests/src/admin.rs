//! Reading a running xdst's admin port the way an operator would, and what tests ask of it:
//! the plugin status, generations that failed or succeeded, what Envoy holds.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use serde_json::Value;

use crate::envoy::Stats;
use crate::upstream::http_get;

/// How long a test waits for a generation it caused.
pub const WAIT: Duration = Duration::from_secs(30);

/// `GET /debug/plugins`, parsed, with the size of its body.
pub async fn plugins_status_sized(admin: SocketAddr) -> anyhow::Result<(Value, usize)> {
    let (status, body) = http_get(admin, "/debug/plugins").await?;
    ensure!(status == 200, "/debug/plugins: {status} {body}");
    Ok((serde_json::from_str(&body)?, body.len()))
}

/// `GET /debug/plugins`, parsed.
pub async fn plugins_status(admin: SocketAddr) -> anyhow::Result<Value> {
    Ok(plugins_status_sized(admin).await?.0)
}

/// A counter of `/debug/plugins` (`generations_ok`, `generations_failed`).
pub async fn generations(admin: SocketAddr, which: &str) -> anyhow::Result<u64> {
    Ok(plugins_status(admin).await?[which].as_u64().unwrap_or(0))
}

/// Waits until a generation fails after `failed_before` failures, and returns its error.
pub async fn wait_for_failure(admin: SocketAddr, failed_before: u64) -> anyhow::Result<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = plugins_status(admin).await?;
        if s["generations_failed"].as_u64().unwrap_or(0) > failed_before {
            return Ok(s["last_error"].clone());
        }
        if Instant::now() > deadline {
            bail!("no failed generation within {WAIT:?}: {s:#}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until a generation succeeds after `ok_before` successes with no error standing, and
/// returns the status.
pub async fn wait_for_ok(admin: SocketAddr, ok_before: u64) -> anyhow::Result<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = plugins_status(admin).await?;
        if s["generations_ok"].as_u64().unwrap_or(0) > ok_before && s["last_error"].is_null() {
            return Ok(s);
        }
        if Instant::now() > deadline {
            bail!("no good generation within {WAIT:?}: {s:#}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The make-before-break plan of `node_id` in `/debug/nodes` (`Null` before it connects).
pub async fn node_plan(admin: SocketAddr, node_id: &str) -> anyhow::Result<Value> {
    let (status, body) = http_get(admin, "/debug/nodes").await?;
    ensure!(status == 200, "/debug/nodes: {status} {body}");
    let nodes: Value = serde_json::from_str(&body)?;
    let node = nodes.as_array().into_iter().flatten().find(|n| n["id"] == node_id);
    Ok(node.map(|n| n["plan"].clone()).unwrap_or(Value::Null))
}

/// Waits until `node_id` holds a target other than `previous` of every type it subscribes to,
/// and returns that target's version: the positive signal that a change is live on the node.
pub async fn wait_in_sync(admin: SocketAddr, node_id: &str, previous: &str) -> anyhow::Result<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        let plan = node_plan(admin, node_id).await?;
        let target = plan["target_version"].as_str().unwrap_or_default();
        if plan["in_sync"] == true && target != previous {
            return Ok(target.to_owned());
        }
        ensure!(Instant::now() < deadline, "{node_id} did not reach a new target within {WAIT:?}: {plan:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every `version_text` Envoy reports, sorted: what it has accepted of each type.
pub fn versions(stats: &Stats) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> =
        stats.all_text().into_iter().filter(|(k, _)| k.ends_with("version_text")).collect();
    v.sort();
    v
}

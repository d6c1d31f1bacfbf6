//! Reading a running xdst's admin port the way an operator would, and what tests ask of it:
//! the plugin status, generations that failed or succeeded, what Envoy holds.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::ensure;
use serde_json::Value;

use crate::envoy::Stats;
use crate::upstream::http_get;
use crate::wait::Seen;

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
    crate::wait::until("a failed generation", WAIT, async || {
        let s = plugins_status(admin).await?;
        Ok(Seen::when(s["generations_failed"].as_u64().unwrap_or(0) > failed_before, s["last_error"].clone(), &s))
    })
    .await
}

/// Waits until the last good generation holds out `name` (a document `Kind/namespace/name`, a
/// file of the intent directory, or a store key: issue 35) with an error that contains `says`,
/// and returns what it reports: its error as `message`, and `plugin`, `serving` (`last good`
/// or `nothing`) and `origin`.
pub async fn wait_for_held(admin: SocketAddr, name: &str, says: &str) -> anyhow::Result<Value> {
    crate::wait::until(format!("{name} held out of the generation, saying {says:?}"), WAIT, async || {
        let s = plugins_status(admin).await?;
        let held = s["held"]
            .as_array()
            .and_then(|h| h.iter().find(|h| h["held"] == name && h["error"].as_str().is_some_and(|e| e.contains(says))))
            .cloned();
        let seen = format!("held: {}; last error: {}", s["held"], s["last_error"]);
        Ok(match held {
            Some(mut h) => {
                h["message"] = h["error"].clone();
                Seen::Done(h)
            }
            None => Seen::Not(seen),
        })
    })
    .await
}

/// Waits until the plugin file `file` is listed as refused for a reason that contains `says`,
/// and returns the refusal (`file`, `digest`, `reason`, `serving`).
pub async fn wait_for_refusal(admin: SocketAddr, file: &str, says: &str) -> anyhow::Result<Value> {
    crate::wait::until(format!("{file} to be refused saying {says:?}"), WAIT, async || {
        let s = plugins_status(admin).await?;
        let found = s["refused"].as_array().and_then(|rs| {
            rs.iter().find(|r| {
                r["file"].as_str().is_some_and(|f| f.ends_with(file))
                    && r["reason"].as_str().is_some_and(|m| m.contains(says))
            })
        });
        Ok(match found {
            Some(r) => Seen::Done(r.clone()),
            None => Seen::Not(s.to_string()),
        })
    })
    .await
}

/// Waits until a generation succeeds after `ok_before` successes with no error standing, and
/// returns the status.
pub async fn wait_for_ok(admin: SocketAddr, ok_before: u64) -> anyhow::Result<Value> {
    crate::wait::until("a good generation", WAIT, async || {
        let s = plugins_status(admin).await?;
        let ok = s["generations_ok"].as_u64().unwrap_or(0) > ok_before && s["last_error"].is_null();
        let seen = s.to_string();
        Ok(Seen::when(ok, s, seen))
    })
    .await
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
    crate::wait::until(format!("{node_id} to reach a new target"), WAIT, async || {
        let plan = node_plan(admin, node_id).await?;
        let target = plan["target_version"].as_str().unwrap_or_default().to_owned();
        Ok(Seen::when(plan["in_sync"] == true && target != previous, target, &plan))
    })
    .await
}

/// Issue 34: the target version of `node_id` once it holds it (`in_sync`), waiting for that.
/// After the counter of a generation or load under test has moved, an unchanged target shows
/// that nothing was pushed: a push would have moved it before the counter.
pub async fn settled_target(admin: SocketAddr, node_id: &str) -> anyhow::Result<String> {
    crate::wait::until(format!("{node_id} to hold its target"), WAIT, async || {
        let plan = node_plan(admin, node_id).await?;
        let target = plan["target_version"].as_str().unwrap_or_default().to_owned();
        Ok(Seen::when(plan["in_sync"] == true && !target.is_empty(), target, &plan))
    })
    .await
}

/// What an Envoy holds at one moment: its versions, and xdst's target for it once it holds
/// that target.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub versions: Vec<(String, String)>,
    pub target: String,
}

/// What `envoy` holds now, once it holds xdst's target for it.
pub async fn held(admin: SocketAddr, envoy: &crate::envoy::Envoy) -> anyhow::Result<Held> {
    let target = settled_target(admin, &envoy.node_id).await?;
    Ok(Held { versions: versions(&envoy.stats().await?), target })
}

/// Issue 34: `envoy` still holds `before`. Call it once the counter of the generation or load
/// under test has moved: a push from it would have moved xdst's target for the node first,
/// so no sleep is needed to give a wrong push time to arrive.
pub async fn ensure_unchanged(
    admin: SocketAddr,
    envoy: &crate::envoy::Envoy,
    before: &Held,
    what: &str,
) -> anyhow::Result<()> {
    let now = held(admin, envoy).await?;
    ensure!(now.target == before.target, "{what}: xdst's target for {} moved: {before:?} -> {now:?}", envoy.node_id);
    ensure!(now.versions == before.versions, "{what}: Envoy's versions changed: {before:?} -> {now:?}");
    Ok(())
}

/// Every `version_text` Envoy reports, sorted: what it has accepted of each type.
pub fn versions(stats: &Stats) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> =
        stats.all_text().into_iter().filter(|(k, _)| k.ends_with("version_text")).collect();
    v.sort();
    v
}

//! Issue 49, item 3, with replicas: a document team-a writes straight into its store prefix
//! carries whatever `creationTimestamp` team-a chose. xdst stamps the time the key was first
//! seen created instead, from a record under `created/` (which no team's prefix reaches) that
//! the first replica to see the key writes and every replica reads: two replicas, and one of
//! them after a restart, give the document the same creation time, never team-a's.

use anyhow::{Context as _, ensure};
use serde_json::Value;
use xdst_tests::etcd::Etcd;
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, WAIT, admin_json, gateway_on};
use xdst_tests::wait::{Seen, until};

const PREFIX: &str = "births";

/// The document `id`'s `creationTimestamp` on a replica, once it serves it.
async fn created_on(admin: std::net::SocketAddr, id: &str) -> anyhow::Result<String> {
    until(format!("{id} served with a creationTimestamp"), WAIT, async || {
        Ok(match admin_json(admin, &format!("/intent/{id}")).await {
            Ok(doc) => match doc["metadata"]["creationTimestamp"].as_str() {
                Some(t) => Seen::Done(t.to_owned()),
                None => Seen::Not(format!("{doc}")),
            },
            Err(e) => Seen::Not(format!("{e:#}")),
        })
    })
    .await
}

/// Waits until both replicas give `id` one creation time; returns it.
async fn agreed(a: std::net::SocketAddr, b: std::net::SocketAddr, id: &str) -> anyhow::Result<String> {
    until(format!("both replicas give {id} one creation time"), WAIT, async || {
        let (x, y) = (created_on(a, id).await?, created_on(b, id).await?);
        Ok(if x == y { Seen::Done(x) } else { Seen::Not(format!("{x} and {y}")) })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_agree_on_when_a_team_s_key_was_created() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let etcd = Etcd::start(1).await?;
    let t = Teams::start().await?;
    let secrets = tempfile::tempdir()?;
    std::fs::write(secrets.path().join("admin"), "admin-t0ken")?;
    let token = secrets.path().join("admin");
    let url = etcd.url(PREFIX);
    let start = async || {
        Process::start_store(&url, Some(t.plugins.path()), &token, &["--store-namespace-keys", "--debounce", "20ms"])
            .await
    };
    let (a, b) = (start().await?, start().await?);
    let mut client = etcd.client().await?;
    // Straight into team-a's prefix, saying it is older than anything.
    let gateway = gateway_on("team-a", "gw", 80)
        .replace("namespace: team-a}", "namespace: team-a, creationTimestamp: '2001-01-01T00:00:00Z'}");
    let key = "intent/namespaces/team-a/Gateway/gw";
    client.put(format!("/{PREFIX}/{key}"), gateway.as_str(), None).await?;
    let id = "Gateway/team-a/gw";
    let created = agreed(a.admin_addr, b.admin_addr, id).await?;
    ensure!(created != "2001-01-01T00:00:00Z", "team-a chose its creation time: {created}");
    let record = client.get(format!("/{PREFIX}/created/{key}"), None).await?;
    let record: Value = serde_json::from_slice(record.kvs().first().context("no record under created/")?.value())?;
    ensure!(record["creationTimestamp"] == created.as_str(), "the record says {record}, the replicas {created}");

    // A rewrite keeps it; a restart reads it back.
    client.put(format!("/{PREFIX}/{key}"), gateway.replace("port: 80", "port: 81"), None).await?;
    a.kill().await?;
    let a = start().await?;
    until("the rewrite served", WAIT, async || {
        let doc = admin_json(a.admin_addr, &format!("/intent/{id}")).await?;
        Ok(Seen::holds(doc["spec"]["listeners"][0]["port"] == 81, format!("{doc}")))
    })
    .await?;
    ensure!(agreed(a.admin_addr, b.admin_addr, id).await? == created, "the creation time moved");

    // Deleted and written again: a new creation, later, still the same on both.
    client.delete(format!("/{PREFIX}/{key}"), None).await?;
    until("the deletion served", WAIT, async || {
        let (status, _) = xdst_tests::upstream::http_get(a.admin_addr, &format!("/intent/{id}")).await?;
        Ok(Seen::holds(status == 404, format!("GET answers {status}")))
    })
    .await?;
    xdst_tests::gateway_api::past(&created).await;
    client.put(format!("/{PREFIX}/{key}"), gateway.as_str(), None).await?;
    let again = agreed(a.admin_addr, b.admin_addr, id).await?;
    ensure!(again > created, "made again at {again}, first made at {created}");
    a.kill().await?;
    b.kill().await?;
    Ok(())
}

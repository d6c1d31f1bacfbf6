//! Issue 18, point 2 and must-show 5: the plugin set in etcd, resolved by an elected leader.
//!
//! A real etcd, a real OCI registry (Debian's `docker-registry`) behind a proxy that can be
//! told to hang, and three `xdst serve --store` replicas that take their plugins from the store
//! (`xdst store import --plugins FILE` wrote the list):
//!
//! - every replica runs the digest the leader resolved the tag to;
//! - the tag moves and a reload through a replica that is not the leader: every replica
//!   switches to the same new digest, and the reload's answer names the leader;
//! - the tag moves again and the leader is killed (`kill -9`) while its registry request hangs:
//!   no replica ever runs a third digest, the next leader resolves the reload once its
//!   predecessor's lease is gone, and both survivors end on the same new digest.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde_json::Value;
use xdst_tests::etcd::Etcd;
use xdst_tests::plugins;
use xdst_tests::registry::{Registry, StallingProxy, push};
use xdst_tests::server::{Process, binary};
use xdst_tests::upstream::http_get;
use xdst_tests::xds::http_with;

const TOKEN: &str = "p1ugins";
const PREFIX: &str = "plugin-set";
const WAIT: Duration = Duration::from_secs(60);

/// The digest of plugin `name` a replica runs, from `/debug/plugins`.
async fn running(admin: SocketAddr, name: &str) -> anyhow::Result<String> {
    let (code, body) = http_get(admin, "/debug/plugins").await?;
    ensure!(code == 200, "/debug/plugins: {code} {body}");
    let v: Value = serde_json::from_str(&body)?;
    Ok(v["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .and_then(|p| p["digest"].as_str())
        .unwrap_or_default()
        .to_owned())
}

/// Waits until every replica in `admins` runs `digest` of the split plugin.
async fn all_run(admins: &[SocketAddr], digest: &str, what: &str) -> anyhow::Result<()> {
    xdst_tests::wait::until(format!("{what}: every replica to run {digest}"), WAIT, async || {
        let mut now = Vec::new();
        for a in admins {
            now.push(running(*a, "split").await?);
        }
        Ok(xdst_tests::wait::Seen::holds(now.iter().all(|d| d == digest), format!("replicas run {now:?}")))
    })
    .await
}

/// The resolved set in etcd: (leader, the split plugin's pinned source).
async fn resolved(etcd: &Etcd) -> anyhow::Result<Value> {
    let mut c = etcd.client().await?;
    let got = c.get(format!("/{PREFIX}/plugins/resolved"), None).await?;
    let kv = got.kvs().first().context("no plugins/resolved key")?;
    Ok(serde_json::from_slice(kv.value())?)
}

async fn reload(admin: SocketAddr) -> (u16, String) {
    http_with(admin, "POST", "/reload", &[("Authorization", &format!("Bearer {TOKEN}"))], "").await
}

fn import(url: &str, plugins_file: &Path, intent: &Path) -> anyhow::Result<String> {
    let out = std::process::Command::new(binary()?)
        .args(["store", "import"])
        .arg(intent)
        .arg("--plugins")
        .arg(plugins_file)
        .args(["--store", url])
        .env("RUST_LOG", "warn")
        .output()?;
    ensure!(out.status.success(), "xdst store import: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_run_the_digest_their_leader_resolved_through_a_tag_move_and_the_leaders_death() -> anyhow::Result<()>
{
    xdst_tests::init_logging();
    let registry = Registry::start()?;
    let proxy = StallingProxy::start(&registry.host)?;
    let etcd = Etcd::start(1).await?;
    let url = etcd.url(PREFIX);
    let work = tempfile::Builder::new().prefix("xdst-store-plugins-").tempdir()?;
    let dir = work.path();
    std::fs::write(dir.join("token"), TOKEN)?;

    // The plugins: the reference plugin and the split plugin, both from the registry.
    let platform = proxy.reference("team/platform:v1");
    push(&plugins::reference()?, &platform)?;
    let swap = std::fs::read(plugins::swap()?)?;
    let version = |weights: [u16; 6], name: &str| plugins::write_swap_variant(&swap, weights, dir.join(name));
    let tag = proxy.reference("team/split:stable");
    let v1 = push(&version([100, 0, 0, 0, 0, 0], "v1.wasm")?, &tag)?;

    // A list with a path is refused by the import, naming the field.
    std::fs::write(dir.join("local.yaml"), "plugins:\n- name: split\n  source: v1.wasm\n")?;
    std::fs::create_dir(dir.join("intent"))?;
    let services: Vec<String> = (0..2)
        .map(|i| {
            format!(
                "kind: Service\nmetadata: {{name: u{i}}}\nspec:\n  connectTimeout: 1s\n  endpoints:\n  - {{address: \
                 127.0.0.1, port: {}}}\n",
                9200 + i
            )
        })
        .collect();
    let split = "kind: Split\nmetadata: {name: split}\nspec: {port: 10997, tag: one}\n";
    std::fs::write(dir.join("intent/intent.yaml"), format!("{}---\n{split}", services.join("---\n")))?;
    let err = import(&url, &dir.join("local.yaml"), &dir.join("intent")).unwrap_err().to_string();
    ensure!(err.contains("field plugins[0].source") && err.contains("is a path"), "a path in the list: {err}");

    std::fs::write(
        dir.join("plugins.yaml"),
        format!("plugins:\n- name: platform\n  source: {platform}\n- name: split\n  source: {tag}\n"),
    )?;
    let said = import(&url, &dir.join("plugins.yaml"), &dir.join("intent"))?;
    ensure!(said.contains("3 documents imported") && said.contains("plugins list of"), "import: {said}");
    // Export gives the list back.
    let out = std::process::Command::new(binary()?)
        .args(["store", "export", "--plugins"])
        .arg(dir.join("exported.yaml"))
        .args(["--store", &url])
        .output()?;
    ensure!(out.status.success(), "export --plugins: {}", String::from_utf8_lossy(&out.stderr));
    let exported = std::fs::read_to_string(dir.join("exported.yaml"))?;
    ensure!(exported.contains(&tag) && exported.contains(&platform), "exported list: {exported}");

    // Three replicas, each with its own plugin cache, all taking the store's plugin set.
    let mut replicas = Vec::new();
    for i in 0..3 {
        let cache = dir.join(format!("cache-{i}"));
        let id = format!("r{i}");
        let args = ["--replica-id", id.as_str(), "--plugin-cache", cache.to_str().unwrap()];
        replicas.push(Some(Process::start_store(&url, None, &dir.join("token"), &args).await?));
    }
    let admins =
        |replicas: &[Option<Process>]| -> Vec<SocketAddr> { replicas.iter().flatten().map(|p| p.admin_addr).collect() };
    all_run(&admins(&replicas), &v1, "every replica on v1").await?;
    let set = resolved(&etcd).await?;
    let leader = set["leader"].as_str().context("no leader in the resolved set")?.to_owned();
    ensure!(
        set["config"].as_str().is_some_and(|c| c.contains("team/split@sha256:")),
        "the resolved set pins the tag to a manifest digest: {set:#}"
    );
    eprintln!("[plugins] every replica runs {v1}; resolved by {leader}");

    // The tag moves; a reload through a replica that is not the leader.
    let v2 = push(&version([0, 100, 0, 0, 0, 0], "v2.wasm")?, &tag)?;
    let follower = (0..3).find(|i| format!("r{i}") != leader).context("no follower")?;
    let (code, body) = reload(replicas[follower].as_ref().unwrap().admin_addr).await;
    ensure!(code == 200, "POST /reload on r{follower}: {code} {body}");
    let answer: Value = serde_json::from_str(&body)?;
    ensure!(answer["plugins_resolved_by"] == leader.as_str(), "the reload names the leader: {answer}");
    all_run(&admins(&replicas), &v2, "every replica on v2 after the reload").await?;
    eprintln!("[plugins] tag moved, reloaded through r{follower}: every replica runs {v2}");

    // The tag moves again; the leader's registry request hangs and the leader is killed then.
    let v3 = push(&version([50, 50, 0, 0, 0, 0], "v3.wasm")?, &tag)?;
    proxy.stall(true);
    let ask = replicas[follower].as_ref().unwrap().admin_addr;
    let pending = tokio::spawn(async move { reload(ask).await });
    let deadline = Instant::now() + WAIT;
    while proxy.swallowed() == 0 {
        ensure!(Instant::now() < deadline, "the leader never asked the registry");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let l: usize = leader.trim_start_matches('r').parse()?;
    replicas[l].take().unwrap().kill().await?;
    proxy.stall(false);
    eprintln!("[plugins] killed the leader {leader} while its registry request hung");

    // Until both survivors run v3, each runs v2 or v3 and nothing else.
    let survivors = admins(&replicas);
    let deadline = Instant::now() + WAIT;
    loop {
        let mut now = Vec::new();
        for a in &survivors {
            now.push(running(*a, "split").await?);
        }
        ensure!(now.iter().all(|d| *d == v2 || *d == v3), "a replica on another digest: {now:?}");
        if now.iter().all(|d| *d == v3) {
            break;
        }
        ensure!(Instant::now() < deadline, "survivors did not reach v3: {now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let set = resolved(&etcd).await?;
    let next = set["leader"].as_str().unwrap_or_default().to_owned();
    ensure!(!next.is_empty() && next != leader, "a new leader resolved the reload: {set:#}");
    let (code, body) = pending.await?;
    ensure!(code == 200 && body.contains(&next), "the pending reload is answered by {next}: {code} {body}");
    eprintln!("[plugins] {next} took over and resolved the reload: both survivors run {v3}");
    Ok(())
}

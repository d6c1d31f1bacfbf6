//! Issue 48: what a node group's own proxies reject together is held for the group ("the same
//! rejection from every node of a group (or from the canaries) holds the document for the
//! group, as today"), through real Envoys over mTLS whose identities the `identities:` rules
//! name as the group's proxies (`proxy: true`).
//!
//! - `every_proxy_of_a_group_rejecting_a_document_holds_it_for_the_group`: two Envoys of
//!   group `edge` (one SotW, one Delta) both reject team-a's route (a header value only Envoy
//!   refuses). The route is held for the group at the version they accepted (`/a0` keeps
//!   answering), naming both as its cause, with `Programmed: False` on its status;
//!   `xdst wait` on team-a's change exits 4 (held out, naming the group), on team-b's next
//!   change 0; 300 requests/s to team-b through the Envoys see no failure.
//! - `a_canary_s_rejection_holds_the_document_for_the_group_before_the_others_see_it`: with
//!   `--canaries 1`, the first Envoy takes each change first. It rejects team-a's route, which
//!   is then held for the group: the second Envoy is never sent it (its RouteConfiguration
//!   rejections stay 0, after a later change of team-b's reached it: the positive signal).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::ensure;
use serde_json::Value;
use xdst_tests::admin::wait_for_held;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::netns::Relay;
use xdst_tests::operator::{latest_change, next_change, xdst_wait};
use xdst_tests::pki::{Ca, Leaf};
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, WAIT, admin_json, gateway, not_a_command, path_route, route, serves, team};
use xdst_tests::traffic::{Allowed, Expect, Traffic};
use xdst_tests::wait::{Seen, until};

const GROUP: &str = "edge";
const A0: &str = "HTTPRoute/team-a/a0";
const TEAM_A_ROUTE: &str = "team-a-route.yaml";
const RPS: u32 = 300;

/// xdst over mTLS whose `identities:` make every `spiffe://test/edge/*` identity a proxy of
/// group `edge`; the Envoys' certificates; a plaintext door to the admin port.
struct Proxies {
    _pki: tempfile::TempDir,
    ca: PathBuf,
    envoys: Vec<Leaf>,
    xdst: Process,
    admin: SocketAddr,
    _door: Relay,
}

impl Proxies {
    async fn start(t: &Teams, extra: &[&str]) -> anyhow::Result<Proxies> {
        let pki = tempfile::Builder::new().prefix("xdst-hold-group-pki-").tempdir()?;
        let ca = Ca::new(pki.path(), "ca")?;
        let server = ca.issue("xdst", &["DNS:localhost", "IP:127.0.0.1"])?;
        let envoys = (1..=2)
            .map(|i| ca.issue(&format!("edge-{i}"), &[&format!("URI:spiffe://test/edge/{i}")]))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let config = pki.path().join("xdst.yaml");
        std::fs::write(
            &config,
            format!(
                "tls: {{cert: {}, key: {}, clientCa: {}}}\nidentities:\n- {{identity: 'spiffe://test/edge/*', \
                 groups: [{GROUP}], proxy: true}}\n",
                server.cert.display(),
                server.key.display(),
                ca.cert.display()
            ),
        )?;
        let config = config.display().to_string();
        let mut args = vec!["--debounce", "20ms", "--config", &config];
        args.extend(extra);
        let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &args).await?;
        let door = xdst_tests::teams::admin_door(xdst.admin_addr, &ca.cert).await?;
        Ok(Proxies { admin: door.addr, _door: door, ca: ca.cert.clone(), envoys, xdst, _pki: pki })
    }

    /// Envoy `i` (1 or 2) of the group, presenting its certificate.
    async fn envoy(&self, i: usize, api: ApiType) -> anyhow::Result<Envoy> {
        let mut b = Bootstrap::new(api, self.xdst.xds_addr, &format!("edge-{i}"));
        b.node_cluster = GROUP.into();
        b.tls_ca = Some(self.ca.clone());
        let leaf = &self.envoys[i - 1];
        b.tls_client = Some((leaf.cert.clone(), leaf.key.clone()));
        Envoy::start(&b).await
    }
}

/// The Gateway, team-a's route `/a0` (a file of its own) and team-b's `/b0`.
fn intent(t: &Teams) -> anyhow::Result<()> {
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    t.write("team-a.yaml", &team("team-a", &t.a))?;
    t.write(TEAM_A_ROUTE, &path_route("a0", "team-a", "/a0"))?;
    t.write("team-b.yaml", &format!("{}---\n{}", team("team-b", &t.b), path_route("b0", "team-b", "/b0")))
}

/// team-a's route `/a0` with a header value only Envoy refuses.
fn bad_a0() -> String {
    route(
        "a0",
        "team-a",
        &format!(
            "matches: [{{path: {{value: /a0}}}}]\n    {}{}",
            not_a_command(1),
            xdst_tests::teams::backend("team-a")
        ),
    )
}

/// How many RouteConfiguration updates `envoy` rejected.
async fn rds_rejected(envoy: &Envoy) -> anyhow::Result<u64> {
    let stats = envoy.stats().await?;
    Ok(stats.0.keys().filter(|k| k.contains(".rds.") && k.ends_with("update_rejected")).map(|k| stats.count(k)).sum())
}

/// Waits until `envoy`'s config holds a route named for `route` (`team-b/b1`).
async fn holds_route(envoy: &Envoy, route: &str) -> anyhow::Result<()> {
    until(format!("{route} in {}'s config", envoy.node_id), WAIT, async || {
        let dump = envoy.admin_get("/config_dump").await?;
        Ok(Seen::holds(dump.contains(&format!("\"{route}/rule0/match0\"")), "not yet"))
    })
    .await
}

/// The first change after `before` whose documents (`/changes/{id}`) include `doc`.
async fn change_writing(admin: SocketAddr, before: Option<i64>, doc: &str) -> anyhow::Result<i64> {
    let latest = next_change(admin, before).await?;
    for id in before.map_or(1, |b| b + 1)..=latest {
        let report = admin_json(admin, &format!("/changes/{id}")).await?;
        if report["documents"].as_array().is_some_and(|d| d.iter().any(|d| d == doc)) {
            return Ok(id);
        }
    }
    anyhow::bail!("no change after {before:?} up to {latest} wrote {doc}")
}

/// The document's status has `Programmed: False`, reason `Rejected`, saying `says`, where its
/// kind keeps conditions: a route in each of its parents, anything else at the top.
fn programmed_false(doc: &Value, says: &str) -> bool {
    let conditions = match doc["status"]["parents"].as_array() {
        Some(parents) if doc["status"].get("conditions").is_none() => {
            parents.iter().flat_map(|p| p["conditions"].as_array().into_iter().flatten()).collect::<Vec<_>>()
        }
        _ => doc["status"]["conditions"].as_array().into_iter().flatten().collect(),
    };
    !conditions.is_empty()
        && conditions.into_iter().any(|c| {
            c["type"] == "Programmed"
                && c["status"] == "False"
                && c["reason"] == "Rejected"
                && c["message"].as_str().is_some_and(|m| m.contains(says))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_proxy_of_a_group_rejecting_a_document_holds_it_for_the_group() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    intent(&t)?;
    let p = Proxies::start(&t, &[]).await?;
    let (e1, e2) = (p.envoy(1, ApiType::Sotw).await?, p.envoy(2, ApiType::Delta).await?);
    let gw = t.gateway();
    serves(gw, "/b0", "b").await?;
    serves(gw, "/a0", "a").await?;
    let traffic = Traffic::start_checked(gw, "/b0", RPS, Expect::new(Allowed::answers(&["b"])));

    let before = latest_change(p.admin).await?;
    t.write(TEAM_A_ROUTE, &bad_a0())?;
    let held = wait_for_held(p.admin, A0, "NOT_A_COMMAND").await?;
    // The change that wrote it (the hold is a change of its own, after it, that wrote nothing).
    let bad_change = change_writing(p.admin, before, A0).await?;
    let caused_by: Vec<&str> = held["caused_by"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    ensure!(
        held["group"] == GROUP && caused_by.contains(&"edge-1") && caused_by.contains(&"edge-2"),
        "held for the group by both proxies: {held}"
    );
    ensure!(held["serving"] == "what the node accepted", "{held}");
    ensure!(rds_rejected(&e1).await? > 0 && rds_rejected(&e2).await? > 0, "both Envoys rejected it");
    // Held at what they accepted: /a0 keeps answering.
    serves(gw, "/a0", "a").await?;
    let doc = admin_json(p.admin, &format!("/intent/{A0}")).await?;
    ensure!(programmed_false(&doc, "NOT_A_COMMAND"), "{A0}'s status: {}", doc["status"]);
    xdst_tests::crd_schema::ensure_kept(&doc)?;
    let (code, out) = xdst_wait(p.admin, bad_change, "20s", &[]).await?;
    ensure!(
        code == 4 && out.contains(A0) && out.contains("held for node group"),
        "team-a's change: {code}: {out}\n{}",
        admin_json(p.admin, "/debug/nodes").await?
    );

    // team-b ships: live everywhere.
    let before = latest_change(p.admin).await?;
    t.write("team-b-b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    serves(gw, "/b1", "b").await?;
    let change = next_change(p.admin, before).await?;
    let (code, out) = xdst_wait(p.admin, change, "20s", &[]).await?;
    ensure!(code == 0, "team-b's change: {code}: {out}");
    eprintln!("every proxy: {A0} held for group {GROUP} by {caused_by:?}; team-b's change live");

    let report = traffic.stop().await;
    ensure!(report.failed() == 0 && report.unexpected == 0 && report.ok > report.sent / 2, "{report:?}");
    e1.kill().await?;
    e2.kill().await?;
    p.xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_s_rejection_holds_the_document_for_the_group_before_the_others_see_it() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    intent(&t)?;
    let p = Proxies::start(&t, &["--canaries", "1"]).await?;
    // edge-1 connects first: the group's canary.
    let canary = p.envoy(1, ApiType::Sotw).await?;
    let gw = t.gateway();
    serves(gw, "/b0", "b").await?;
    until("edge-1 connected (before edge-2: the canary)", WAIT, async || {
        let nodes = admin_json(p.admin, "/debug/nodes").await?;
        Ok(Seen::holds(nodes.to_string().contains("edge-1"), "not yet"))
    })
    .await?;
    let other = p.envoy(2, ApiType::Sotw).await?;
    holds_route(&other, "team-b/b0").await?;
    let traffic = Traffic::start_checked(gw, "/b0", RPS, Expect::new(Allowed::answers(&["b"])));

    t.write(TEAM_A_ROUTE, &bad_a0())?;
    let held = wait_for_held(p.admin, A0, "NOT_A_COMMAND").await?;
    let caused_by: Vec<&str> = held["caused_by"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    ensure!(held["group"] == GROUP && caused_by == ["edge-1"], "held for the group by the canary: {held}");
    ensure!(held["error"].as_str().is_some_and(|e| e.contains("canary")), "{held}");
    // A later change of team-b's reaches both (the positive signal); the other Envoy never
    // rejected anything: it was never sent team-a's bad route.
    t.write("team-b-b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    holds_route(&canary, "team-b/b1").await?;
    holds_route(&other, "team-b/b1").await?;
    ensure!(rds_rejected(&canary).await? > 0, "the canary rejected team-a's route");
    ensure!(rds_rejected(&other).await? == 0, "the other Envoy was sent team-a's route and rejected it");
    serves(gw, "/a0", "a").await?;
    eprintln!("canary: {A0} held for group {GROUP} by the canary alone; the other Envoy never saw it");

    let report = traffic.stop().await;
    ensure!(report.failed() == 0 && report.unexpected == 0 && report.ok > report.sent / 2, "{report:?}");
    canary.kill().await?;
    other.kill().await?;
    p.xdst.kill().await?;
    Ok(())
}

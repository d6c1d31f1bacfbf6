//! Issue 48: a hold never takes down what it does not own. Each test reproduces one of the
//! issue's six points with real parts (the `xdst` binary, the gateway-api plugin, real Envoys,
//! the raw grpcio ADS client `tests/clients/ads_client.py` as the hostile client) and asserts
//! what the issue asks for, so it fails on the code the issue was filed against.
//!
//! The scene (see [`Scene`]): a platform Gateway `infra/gw` taking routes from every namespace;
//! team-a and team-b each with a Service, an EndpointSlice and a route (`/a0`, `/b0`); xdst
//! started with [`ARGS`]; a real Envoy of node group [`EDGE`]; 300 requests/s to team-b's
//! `/b0` through it for the whole test, of which none may fail. A hostile client has a node
//! group of its own. "Held for a real Envoy" is a hold of `/debug/plugins` `held` whose group
//! is the real Envoy's (or none: every group's), or one of `held_at_nodes` at a real Envoy.
//!
//! - **Point 1**, one plain client takes a Gateway down
//!   ([`point_1_a_plain_client_nacking_from_its_first_response_holds_nothing_for_envoy`]). A
//!   client with no certificate NACKs every response from its first. Nothing is held for the
//!   real Envoy (before and after the client leaves), its listeners stay, team-b's new route
//!   (written after the NACKs were seen) reaches it, and the client's rejection shows at its own
//!   node in `/debug/nodes` and is counted as a node's (`xdst_nacks_total{scope="node"}`).
//! - **Point 2**, one client freezes one team
//!   ([`point_2_a_client_that_acks_once_then_nacks_freezes_no_team`]). A client ACKs the first
//!   response of each type and NACKs every later one; each of team-b's new routes, written one
//!   at a time, reaches the real Envoy and none is held, then or after the client leaves.
//! - **Point 3**, a team steers the blame
//!   ([`point_3_a_team_rewriting_a_bad_route_does_not_steer_the_blame`], a Delta Envoy).
//!   team-a rewrites its route every 20 ms for 3 s with a header value only Envoy refuses, while
//!   team-b adds five routes, each written just after one of team-a's versions (the same
//!   generation: the same RouteConfiguration response Envoy rejects): each of team-b's routes
//!   reaches the real Envoy with no hold of it for the Envoy's group, and after team-a stops
//!   none of team-b's documents is held anywhere.
//! - **Point 4**, the hold cap filled on purpose ([`point_4_a_client_cannot_fill_the_hold_cap`]).
//!   Sixteen teams' Services arrive while a client that ACKed once NACKs, naming the sixteen
//!   teams' clusters; every team serves through the real Envoy and nothing is held for it; then
//!   the real Envoy's own rejection of team-a's route is isolated: team-a's route is kept at
//!   what Envoy accepted, team-b's next route reaches Envoy, and `xdst wait --group edge` on it
//!   exits 0 without blaming the platform's Gateway.
//! - **Points 1 and 2 with another team's certificate**
//!   ([`points_1_and_2_with_another_team_s_certificate_hold_nothing_for_envoy`]). Over mTLS the
//!   point-1 client (SotW) and the point-2 client (Delta) present team-c's certificate, whose
//!   identity may use any group; the same assertions as points 1 and 2.
//! - **Point 5**, one node vetoes the fleet
//!   ([`point_5_one_node_does_not_veto_a_listener_for_its_group`]). `op-a` (here) and `op-b`
//!   (another host: a network namespace, `xdst_tests::netns`) in one node group; a new Gateway
//!   on a port taken on op-b's host. op-a serves it under load with 0 failures; op-b keeps its
//!   earlier listener, its stats show the LDS rejection and CSDS shows it `NACKED` with Envoy's
//!   message (after a later change both took); `xdst wait --change N` for the Gateway's change
//!   gives a definite non-zero answer naming op-b (not 0 live, 1 timed out or 3 not asked);
//!   once the port is freed on op-b's host, op-b's listener for it becomes active.
//! - **Point 6**, a restart turns one held document into an empty configuration
//!   ([`point_6_a_first_start_with_a_route_re2_refuses_serves_the_rest`],
//!   [`point_6_a_restart_with_a_held_route_keeps_serving`]). With an HTTPRoute whose regex RE2
//!   refuses, at first start and at a restart (same intent, same plugin cache; the second with
//!   Envoy serving under load across it): the other routes serve, the bad route is listed as
//!   held, the gateway-api plugin is not refused, `/readyz` answers 200 only while xdst serves
//!   the Gateway's listener and both teams' clusters, and a later edit is served.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::Value;
use xdst_tests::ads_client::{AdsClient, Mode, Options, Tls};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy, Expect as EnvoyExpect};
use xdst_tests::netns::{Netns, Relay};
use xdst_tests::operator::{latest_change, next_change, xdst_wait};
use xdst_tests::server::Process;
use xdst_tests::teams::{
    Teams, WAIT, admin_json, backend, gateway, gateway_on, not_a_command, path_route, route, route_on, team,
};
use xdst_tests::traffic::{Allowed, Expect, Report, Traffic};
use xdst_tests::upstream::{Upstream, http_get};
use xdst_tests::wait::{Seen, until};

/// xdst's arguments in every test here (after `--intent`, `--plugins`): settings the fix adds
/// go here, once.
const ARGS: &[&str] = &["--debounce", "20ms"];
/// Requests a second to team-b's route through the real Envoy.
const RPS: u32 = 300;
/// The real Envoys' node group.
const EDGE: &str = "edge";
/// The real Envoy's node id.
const REAL: &str = "edge-1";
/// The file of team-a's route `a0` in a [`Scene`].
const TEAM_A_ROUTE: &str = "team-a-route.yaml";
/// What Envoy's stats say of its listeners.
const LISTENERS: &str = "listener_manager.total_listeners_active";
/// The teams and the intent every test starts from: the Gateway `infra/gw`, team-a's Service
/// and route `/a0` (in [`TEAM_A_ROUTE`], a file of its own, which points 3 and 4 rewrite),
/// team-b's Service and route `/b0`.
async fn base_intent() -> anyhow::Result<Teams> {
    let t = Teams::start().await?;
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    t.write("team-a.yaml", &team("team-a", &t.a))?;
    t.write(TEAM_A_ROUTE, &path_route("a0", "team-a", "/a0"))?;
    t.write("team-b.yaml", &format!("{}---\n{}", team("team-b", &t.b), path_route("b0", "team-b", "/b0")))?;
    Ok(t)
}

/// A test's xdst, its teams, its real Envoy and the traffic through it.
struct Scene {
    t: Teams,
    xdst: Process,
    /// xdst's admin port as the test reads it (a plaintext relay to it under mTLS).
    admin: SocketAddr,
    envoy: Envoy,
    traffic: Traffic,
    /// The Envoy's active listeners once it served both teams.
    listeners: u64,
    _admin_relay: Option<Relay>,
}

/// How a scene's xdst and Envoy speak: plaintext, or mTLS with these files.
struct Mtls {
    args: Vec<String>,
    ca: std::path::PathBuf,
    envoy: xdst_tests::pki::Leaf,
}

impl Scene {
    async fn start(api: ApiType, mtls: Option<&Mtls>) -> anyhow::Result<Scene> {
        xdst_tests::init_logging();
        let t = base_intent().await?;
        let mut args: Vec<&str> = ARGS.to_vec();
        if let Some(m) = mtls {
            args.extend(m.args.iter().map(String::as_str));
        }
        let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &args).await?;
        let mut bootstrap = Bootstrap::new(api, xdst.xds_addr, REAL);
        bootstrap.node_cluster = EDGE.into();
        let (admin, relay) = match mtls {
            None => (xdst.admin_addr, None),
            Some(m) => {
                bootstrap.tls_ca = Some(m.ca.clone());
                bootstrap.tls_client = Some((m.envoy.cert.clone(), m.envoy.key.clone()));
                let relay = xdst_tests::teams::admin_door(xdst.admin_addr, &m.ca).await?;
                (relay.addr, Some(relay))
            }
        };
        let envoy = Envoy::start(&bootstrap).await?;
        let gw = t.gateway();
        xdst_tests::teams::serves(gw, "/b0", "b").await?;
        xdst_tests::teams::serves(gw, "/a0", "a").await?;
        let listeners = envoy.stats().await?.count(LISTENERS);
        let traffic = Traffic::start_checked(gw, "/b0", RPS, Expect::new(Allowed::answers(&["b"])));
        Ok(Scene { t, xdst, admin, envoy, traffic, listeners, _admin_relay: relay })
    }

    /// Writes team-b's route `name` on `path` (its own file).
    fn team_b_route(&self, name: &str, path: &str) -> anyhow::Result<()> {
        self.t.write(&format!("team-b-{name}.yaml"), &path_route(name, "team-b", path))
    }

    /// Waits until the real Envoy answers `path` from `body`; fails at once, naming it, when a
    /// hold for the real Envoy shows that `allowed` does not name.
    async fn reaches(&self, path: &str, body: &str, allowed: &[&str]) -> anyhow::Result<Duration> {
        self.reaches_watching(path, body, allowed, true).await
    }

    /// [`Scene::reaches`], watching holds at the real Envoy's node too (`at_node`) or only
    /// those of its group: while the Envoy itself rejects something, what its node holds back
    /// during the search for it is the search's business; the route must reach it all the same.
    async fn reaches_watching(
        &self,
        path: &str,
        body: &str,
        allowed: &[&str],
        at_node: bool,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let gw = self.t.gateway();
        until(format!("{path} answered by {body} through the real Envoy"), WAIT, async || {
            let held = held_for_real(self.admin, allowed, at_node).await?;
            ensure!(
                held.is_empty(),
                "waiting for {path} to reach the real Envoy, a hold for it showed:\n  {}\n(Envoy: {} listeners \
                 active)",
                held.join("\n  "),
                self.envoy.stats().await.map(|s| s.count(LISTENERS)).unwrap_or_default()
            );
            Ok(match http_get(gw, path).await {
                Ok((200, b)) if b == body => Seen::Done(()),
                other => Seen::Not(format!("{other:?}")),
            })
        })
        .await?;
        Ok(started.elapsed())
    }

    /// Nothing is held for the real Envoy but what `allowed` names.
    async fn nothing_held_for_envoy(&self, when: &str, allowed: &[&str]) -> anyhow::Result<()> {
        let held = held_for_real(self.admin, allowed, true).await?;
        ensure!(held.is_empty(), "{when}: held for the real Envoy:\n  {}", held.join("\n  "));
        Ok(())
    }

    /// The traffic had no failure and the Envoy kept its listeners; stops everything.
    async fn finish(self) -> anyhow::Result<Report> {
        let report = self.traffic.stop().await;
        let listeners = self.envoy.stats().await?.count(LISTENERS);
        ensure!(
            listeners == self.listeners,
            "the real Envoy's active listeners went {} -> {listeners}",
            self.listeners
        );
        traffic_clean(&report, "team-b's /b0 through the real Envoy")?;
        self.envoy.kill().await?;
        self.xdst.kill().await?;
        Ok(report)
    }
}

/// No request failed or was answered by the wrong upstream, and enough were answered to tell.
fn traffic_clean(report: &Report, what: &str) -> anyhow::Result<()> {
    ensure!(report.failed() == 0 && report.unexpected == 0, "{what}: {report:?}");
    ensure!(report.ok > report.sent / 2, "{what}: too few answers to tell anything: {report:?}");
    Ok(())
}

/// What `/debug/plugins` lists as held for the real Envoy's group and (`at_node`) at its node
/// (see the module docs), but the documents `allowed` names: one line each, clipped.
async fn held_for_real(admin: SocketAddr, allowed: &[&str], at_node: bool) -> anyhow::Result<Vec<String>> {
    let status = admin_json(admin, "/debug/plugins").await?;
    let nodes: &[&str] = if at_node { &[REAL] } else { &[] };
    Ok(held_for(&status, EDGE, nodes)
        .into_iter()
        .filter(|h| !allowed.contains(&h.document.as_str()))
        .map(|h| xdst_tests::operator::clip(&h.entry, 400))
        .collect())
}

/// One hold a `/debug/plugins` answer lists: for a node group (`held`; no group: every
/// group's) or at a node (`held_at_nodes`).
struct Hold {
    document: String,
    group: String,
    node: Option<String>,
    /// The whole entry.
    entry: String,
}

/// Every hold of a `/debug/plugins` answer.
fn holds(status: &Value) -> Vec<Hold> {
    let of = |h: &Value, keys: &[&str]| keys.iter().find_map(|k| h[*k].as_str()).map(str::to_owned);
    ["held", "held_at_nodes"]
        .iter()
        .flat_map(|key| status[*key].as_array().cloned().unwrap_or_default().into_iter().map(move |h| (*key, h)))
        .map(|(key, h)| Hold {
            document: of(&h, &["held", "document"]).unwrap_or_default(),
            group: of(&h, &["group"]).unwrap_or_default(),
            node: if key == "held" { None } else { of(&h, &["node", "id"]) },
            entry: h.to_string(),
        })
        .collect()
}

/// The holds of a `/debug/plugins` answer that act on node group `group` or on one of `nodes`.
fn held_for(status: &Value, group: &str, nodes: &[&str]) -> Vec<Hold> {
    holds(status)
        .into_iter()
        .filter(|h| match &h.node {
            None => h.group.is_empty() || h.group == group,
            Some(node) => nodes.contains(&node.as_str()),
        })
        .collect()
}

/// Reads the client's events until it answered a response of each of `types` (`cds`, `lds`,
/// `rds`, `eds`) with `answer` (`ack` or `nack`).
async fn answered(client: &mut AdsClient, answer: &str, types: &[&str]) -> anyhow::Result<()> {
    let mut left: Vec<&str> = types.to_vec();
    while !left.is_empty() {
        let e = client
            .wait_for(&format!("{answer}s of {left:?}"), xdst_tests::wait::patience(WAIT), |e| e["event"] == answer)
            .await?;
        let t = e["type"].as_str().unwrap_or_default();
        left.retain(|short| !t.ends_with(type_suffix(short)));
    }
    Ok(())
}

fn type_suffix(short: &str) -> &'static str {
    match short {
        "cds" => ".Cluster",
        "lds" => ".Listener",
        "rds" => ".RouteConfiguration",
        _ => ".ClusterLoadAssignment",
    }
}

/// Waits until the node `id`'s entry in `/debug/nodes` says `says` (`what` it shows).
async fn node_shows(admin: SocketAddr, id: &str, what: &str, says: &str) -> anyhow::Result<()> {
    until(format!("{what} shown at node {id} in /debug/nodes ({says:?})"), WAIT, async || {
        let nodes = admin_json(admin, "/debug/nodes").await?;
        let node = nodes.as_array().into_iter().flatten().find(|n| n["id"] == id);
        let shown = node.is_some_and(|n| n.to_string().contains(says));
        Ok(Seen::holds(shown, format!("{node:?}")))
    })
    .await
}

/// The sum of the series of the counter `name` whose labels contain `label` (`scope="node"`).
async fn metric_with(admin: SocketAddr, name: &str, label: &str) -> anyhow::Result<f64> {
    let (status, body) = http_get(admin, "/metrics").await?;
    ensure!(status == 200, "GET /metrics: {status}");
    Ok(body
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b))
}

/// A hostile client of a node group of its own (`node`), with no certificate unless `tls`.
fn hostile(xds: SocketAddr, node: &str, mode: Mode, types: Vec<&'static str>, tls: Option<Tls>) -> Options {
    Options { mode, types, node_cluster: node.into(), tls, ..Options::new(xds, node) }
}

/// Point 1 on a running scene: the client NACKs from its first response; nothing is held for
/// the real Envoy; team-b's route `name` written after the NACKs reaches it; the rejection is
/// the client's own; after it leaves nothing is held (team-b's `<name>-after` reaches Envoy).
async fn plain_client_nacks(s: &Scene, node: &str, options: Options, name: &str) -> anyhow::Result<()> {
    let mut client = AdsClient::spawn(&options).await?;
    // Its first response is the first it rejects (CDS comes first).
    client.wait_for("its first NACK", xdst_tests::wait::patience(WAIT), |e| e["event"] == "nack").await?;
    // Its rejection is shown as its own.
    node_shows(s.admin, node, "its rejection", "rejected by test client").await?;
    if options.tls.as_ref().is_some_and(|t| t.client.is_some()) {
        node_shows(s.admin, node, "the identity of the certificate it presented", "spiffe://test/team-c/").await?;
    }
    s.team_b_route(name, &format!("/{name}"))?;
    let took = s.reaches(&format!("/{name}"), "b", &[]).await?;
    s.nothing_held_for_envoy(&format!("after {node}'s NACKs and team-b's /{name}"), &[]).await?;
    let listeners = s.envoy.stats().await?.count(LISTENERS);
    ensure!(listeners == s.listeners, "the real Envoy's active listeners went {} -> {listeners}", s.listeners);
    eprintln!("point 1 ({node}): team-b's /{name} reached the real Envoy {took:?} after its write; nothing held");
    client.close().await?;
    let after = format!("{name}-after");
    s.team_b_route(&after, &format!("/{after}"))?;
    s.reaches(&format!("/{after}"), "b", &[]).await?;
    s.nothing_held_for_envoy(&format!("after {node} left"), &[]).await?;
    Ok(())
}

/// Point 2 on a running scene: the client ACKs once, then NACKs every later response; team-b
/// writes `count` routes one at a time, each of which the client rejects and the real Envoy
/// serves; nothing is held for it, then or after the client leaves.
async fn ack_once_client(s: &Scene, node: &str, options: Options, prefix: &str, count: usize) -> anyhow::Result<()> {
    let mut client = AdsClient::spawn(&options).await?;
    answered(&mut client, "ack", &["cds", "lds", "rds"]).await?;
    // Each route reaching Envoy is the positive signal that what the client's rejection of the
    // one before could have held is held by now: then every earlier one still serves, and
    // nothing is held.
    let still_serve = async |upto: usize, when: &str| -> anyhow::Result<()> {
        for j in 1..=upto {
            s.reaches(&format!("/{prefix}{j}"), "b", &[]).await?;
        }
        s.nothing_held_for_envoy(when, &[]).await
    };
    for i in 1..=count {
        let name = format!("{prefix}{i}");
        s.team_b_route(&name, &format!("/{name}"))?;
        // The client saw it and rejected it.
        answered(&mut client, "nack", &["rds"]).await?;
        let took = s.reaches(&format!("/{name}"), "b", &[]).await?;
        eprintln!("point 2 ({node}): team-b's /{name} reached the real Envoy {took:?} after its write");
        still_serve(i, &format!("after {node}'s NACK of /{name}")).await?;
    }
    client.close().await?;
    let after = format!("{prefix}-after");
    s.team_b_route(&after, &format!("/{after}"))?;
    s.reaches(&format!("/{after}"), "b", &[]).await?;
    still_serve(count, &format!("after {node} left")).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_1_a_plain_client_nacking_from_its_first_response_holds_nothing_for_envoy() -> anyhow::Result<()> {
    let s = Scene::start(ApiType::Sotw, None).await?;
    let node = "hostile-1";
    // Listeners, clusters, and the Gateway's routes by name: everything it is sent is "new".
    let options = Options {
        names: vec!["infra/gw/80".into()],
        ..hostile(s.xdst.xds_addr, node, Mode::Nack, vec!["cds", "lds", "rds"], None)
    };
    plain_client_nacks(&s, node, options, "b1").await?;
    let counted = metric_with(s.admin, "xdst_nacks_total", "scope=\"node\"").await?;
    ensure!(
        counted > 0.0,
        "the client's rejections are not counted as a node's: xdst_nacks_total{{scope=\"node\"}} = {counted}"
    );
    s.finish().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_2_a_client_that_acks_once_then_nacks_freezes_no_team() -> anyhow::Result<()> {
    let s = Scene::start(ApiType::Sotw, None).await?;
    let node = "hostile-2";
    let options = hostile(s.xdst.xds_addr, node, Mode::AckOnce, vec!["cds", "lds", "rds", "eds"], None);
    ack_once_client(&s, node, options, "b", 3).await?;
    s.finish().await?;
    Ok(())
}

/// The routes team-b adds while team-a rewrites its own (point 3).
const TEAM_B_ROUTES: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_3_a_team_rewriting_a_bad_route_does_not_steer_the_blame() -> anyhow::Result<()> {
    let s = Scene::start(ApiType::Delta, None).await?;
    let rejected = async || -> anyhow::Result<u64> {
        let stats = s.envoy.stats().await?;
        Ok(stats
            .0
            .keys()
            .filter(|k| k.contains(".rds.") && k.ends_with(".update_rejected"))
            .map(|k| stats.count(k))
            .sum())
    };
    let a0 = |i: usize| {
        route(
            "a0",
            "team-a",
            &format!("matches: [{{path: {{value: /a0}}}}]\n    {}{}", not_a_command(i), backend("team-a")),
        )
    };
    // team-a rewrites its route every 20 ms for 3 s, each version one only Envoy refuses, and
    // says when it wrote one.
    let (wrote, mut written) = tokio::sync::watch::channel(0usize);
    let writer = {
        let path = s.t.intent.path().join(TEAM_A_ROUTE);
        tokio::spawn(async move {
            let started = Instant::now();
            let mut i = 0;
            while started.elapsed() < Duration::from_secs(3) {
                i += 1;
                xdst_core::files::write_atomic(&path, a0(i)).context("writing team-a's route")?;
                let _ = wrote.send(i);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            anyhow::Ok(i)
        })
    };
    // The real Envoy rejects team-a's route (the positive signal that it is under way).
    until("the real Envoy rejecting team-a's route", WAIT, async || {
        let n = rejected().await?;
        Ok(Seen::holds(n > 0, format!("rds update_rejected = {n}")))
    })
    .await?;
    // Meanwhile team-b adds routes to the same RouteConfiguration, each written just after one
    // of team-a's versions (within the debounce: the same generation, the same response): each
    // reaches the real Envoy, with no hold of it for the Envoy's group.
    let team_a = ["HTTPRoute/team-a/a0"];
    for i in 1..=TEAM_B_ROUTES {
        let name = format!("b{i}");
        written.changed().await.context("team-a's writer stopped early")?;
        s.team_b_route(&name, &format!("/{name}"))?;
        let took = s.reaches_watching(&format!("/{name}"), "b", &team_a, false).await?;
        eprintln!("point 3: team-b's /{name} reached the real Envoy {took:?} after its write, team-a rewriting");
    }
    let writes = writer.await??;
    ensure!(rejected().await? > 0, "the real Envoy never rejected team-a's route");
    // team-a stopped: team-b's next route reaches Envoy (the positive signal), and none of
    // team-b's documents is held; team-b's earlier routes serve.
    let last = format!("b{}", TEAM_B_ROUTES + 1);
    s.team_b_route(&last, &format!("/{last}"))?;
    s.reaches(&format!("/{last}"), "b", &team_a).await?;
    for i in 1..=TEAM_B_ROUTES {
        s.reaches(&format!("/b{i}"), "b", &team_a).await?;
    }
    let status = admin_json(s.admin, "/debug/plugins").await?;
    let team_b: Vec<String> =
        holds(&status).into_iter().filter(|h| h.document.contains("/team-b/")).map(|h| h.entry).collect();
    ensure!(team_b.is_empty(), "after team-a stopped ({writes} writes), team-b's documents are held: {team_b:#?}");
    eprintln!(
        "point 3: team-a wrote {writes} versions; team-b's {} routes served; none of team-b's documents held",
        TEAM_B_ROUTES + 1
    );
    s.finish().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_4_a_client_cannot_fill_the_hold_cap() -> anyhow::Result<()> {
    let s = Scene::start(ApiType::Sotw, None).await?;
    let teams: Vec<String> = (1..=16).map(|i| format!("t{i:02}")).collect();
    let clusters: Vec<String> = teams.iter().map(|t| format!("{t}/svc:80")).collect();
    let node = "hostile-4";
    let options = Options {
        nack_names: clusters.clone(),
        ..hostile(s.xdst.xds_addr, node, Mode::AckOnce, vec!["cds", "lds", "rds", "eds"], None)
    };
    let mut client = AdsClient::spawn(&options).await?;
    answered(&mut client, "ack", &["cds", "lds", "rds"]).await?;
    // Sixteen teams arrive; the client rejects what carries them, naming their clusters.
    let mut upstreams = Vec::new();
    let mut text = String::new();
    for t in &teams {
        let up = Upstream::start(t).await?;
        text.push_str(&format!("{}---\n{}---\n", team(t, &up), path_route("r", t, &format!("/{t}"))));
        upstreams.push(up);
    }
    s.t.write("sixteen-teams.yaml", &text)?;
    answered(&mut client, "nack", &["cds"]).await?;
    for t in &teams {
        s.reaches(&format!("/{t}"), t, &[]).await.with_context(|| format!("team {t}, after {node}'s NACKs"))?;
    }
    s.nothing_held_for_envoy(&format!("after {node}'s NACKs naming 16 teams' clusters"), &[]).await?;
    eprintln!("point 4: the 16 teams serve through the real Envoy after {node}'s NACKs naming their clusters");

    // The real Envoy's own rejection of team-a's route is isolated.
    let rejected = async || -> anyhow::Result<u64> {
        let stats = s.envoy.stats().await?;
        Ok(stats.0.keys().filter(|k| k.ends_with(".update_rejected")).map(|k| stats.count(k)).sum())
    };
    let before = rejected().await?;
    let bad = route(
        "a0",
        "team-a",
        &format!("matches: [{{path: {{value: /a0}}}}]\n    {}{}", not_a_command(0), backend("team-a")),
    );
    s.t.write(TEAM_A_ROUTE, &bad)?;
    until("the real Envoy rejecting team-a's route", WAIT, async || {
        let n = rejected().await?;
        Ok(Seen::holds(n > before, format!("update_rejected = {n}")))
    })
    .await?;
    let latest = latest_change(s.admin).await?;
    s.team_b_route("b1", "/b1")?;
    let took = s.reaches("/b1", "b", &["HTTPRoute/team-a/a0"]).await?;
    // team-a's route is kept at what the real Envoy accepted.
    xdst_tests::teams::serves(s.t.gateway(), "/a0", "a").await?;
    let change = next_change(s.admin, latest).await?;
    let (code, out) = xdst_wait(s.admin, change, "30s", &["--group", EDGE]).await?;
    ensure!(code == 0, "xdst wait --change {change} --group {EDGE} (team-b's /b1) exited {code}: {out}");
    ensure!(!out.contains("Gateway/infra/gw"), "xdst wait blames the platform's Gateway: {out}");
    eprintln!(
        "point 4: team-a's rejected route isolated; team-b's /b1 reached the real Envoy {took:?} after its write"
    );
    client.close().await?;
    s.finish().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_1_and_2_with_another_team_s_certificate_hold_nothing_for_envoy() -> anyhow::Result<()> {
    use xdst_tests::pki::Ca;
    let pki = tempfile::Builder::new().prefix("xdst-hold-scope-pki-").tempdir()?;
    let ca = Ca::new(pki.path(), "ca")?;
    let server = ca.issue("xdst", &["DNS:localhost", "IP:127.0.0.1"])?;
    let envoy = ca.issue("edge", &["URI:spiffe://test/infra/edge"])?;
    let team_c = ca.issue("team-c", &["URI:spiffe://test/team-c/client"])?;
    let config = pki.path().join("xdst.yaml");
    // TLS on both ports with client certificates required on the xDS port (the file's `tls`:
    // xdst checks `identities` against the file's own `tls.clientCa`); the real Envoy's
    // identity is its group's proxy (its own rejections would count for the group), team-c's
    // may use any group but is no group's proxy.
    std::fs::write(
        &config,
        format!(
            "tls: {{cert: {}, key: {}, clientCa: {}}}\nidentities:\n- {{identity: 'spiffe://test/infra/*', groups: \
             ['{EDGE}'], proxy: true}}\n- {{identity: 'spiffe://test/team-c/*', groups: ['*']}}\n",
            server.cert.display(),
            server.key.display(),
            ca.cert.display()
        ),
    )?;
    let mtls = Mtls { args: vec!["--config".into(), config.display().to_string()], ca: ca.cert.clone(), envoy };
    let s = Scene::start(ApiType::Sotw, Some(&mtls)).await?;
    let tls = Tls {
        ca: ca.cert.clone(),
        client: Some((team_c.cert.clone(), team_c.key.clone())),
        authority: Some("localhost".into()),
    };
    let node = "team-c-1";
    let options = Options {
        names: vec!["infra/gw/80".into()],
        ..hostile(s.xdst.xds_addr, node, Mode::Nack, vec!["cds", "lds", "rds"], Some(tls.clone()))
    };
    plain_client_nacks(&s, node, options, "c1").await?;
    let node = "team-c-2";
    let options = Options {
        delta: true,
        ..hostile(s.xdst.xds_addr, node, Mode::AckOnce, vec!["cds", "lds", "rds", "eds"], Some(tls))
    };
    ack_once_client(&s, node, options, "c2-", 2).await?;
    s.finish().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_5_one_node_does_not_veto_a_listener_for_its_group() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = base_intent().await?;
    // A document held back at one node is tried there again after 2 s (doubling), so op-b takes
    // up the listener soon after its port is freed.
    let args: Vec<&str> = ARGS.iter().copied().chain(["--nack-retry", "2s"]).collect();
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &args).await?;
    let group = "ops";
    let boot = |id: &str| {
        let mut b = Bootstrap::new(ApiType::Sotw, xdst.xds_addr, id);
        b.node_cluster = group.into();
        b
    };
    let op_a = Envoy::start(&boot("op-a")).await?;
    let host_b = Netns::new().await?;
    let op_b = host_b.start_envoy(&boot("op-b")).await?;
    xdst_tests::teams::serves(t.gateway(), "/b0", "b").await?;
    let configured = EnvoyExpect::new().count(LISTENERS, 1).at_least("listener_manager.lds.update_success", 1);
    op_b.wait_for(&configured, WAIT).await?;
    let traffic = Traffic::start_checked(t.gateway(), "/b0", RPS, Expect::new(Allowed::answers(&["b"])));

    // A new Gateway on a port free here and taken on op-b's host.
    let (port, new_addr) = (81..400u16)
        .map(|p| (p, t.listener(p)))
        .find(|(_, a)| std::net::TcpListener::bind(a).is_ok())
        .context("no port for the new Gateway")?;
    let taken = host_b.take_port(new_addr.port()).await?;
    let before = latest_change(xdst.admin_addr).await?;
    t.write(
        "infra-gw2.yaml",
        &format!("{}---\n{}", gateway_on("infra", "gw2", port), route_on("gw2", "b-gw2", "team-b", &backend("team-b"))),
    )?;
    let change = next_change(xdst.admin_addr, before).await?;
    // op-b rejects it: its host cannot bind the address.
    let rejected = op_b
        .wait_for(&configured.clone().at_least("listener_manager.lds.update_rejected", 1), WAIT)
        .await
        .context("op-b rejecting the new Gateway's listener")?;
    // op-a serves it, under load.
    xdst_tests::teams::serves(new_addr, "/", "b").await.context("op-a serving the new Gateway")?;
    let new_traffic = Traffic::start_checked(new_addr, "/", RPS, Expect::new(Allowed::answers(&["b"])));
    // A later change reaches both (the positive signal): op-a serves it, op-b took its routes.
    let rds_ok = |s: &xdst_tests::envoy::Stats| -> u64 {
        s.0.keys()
            .filter(|k| k.contains(".rds.infra/gw/80.") && k.ends_with("update_success"))
            .map(|k| s.count(k))
            .sum()
    };
    let b_rds = rds_ok(&rejected);
    t.write("team-b-b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    xdst_tests::teams::serves(t.gateway(), "/b1", "b").await?;
    until("op-b taking team-b's /b1", WAIT, async || {
        let n = rds_ok(&op_b.stats().await?);
        Ok(Seen::holds(n > b_rds, format!("op-b's rds update_success = {n}")))
    })
    .await?;
    // op-a still serves the new Gateway; nothing is held for the group or for op-a.
    xdst_tests::teams::serves(new_addr, "/", "b").await?;
    let status = admin_json(xdst.admin_addr, "/debug/plugins").await?;
    let held: Vec<String> = held_for(&status, group, &["op-a"])
        .into_iter()
        .filter(|h| h.document.contains("gw2"))
        .map(|h| h.entry)
        .collect();
    ensure!(held.is_empty(), "op-b's rejection holds the new Gateway for its group or for op-a: {held:#?}");
    // op-b keeps its earlier listener, and shows its rejection: stats and CSDS.
    let stats = op_b.stats().await?;
    ensure!(stats.count(LISTENERS) == 1, "op-b's listeners:\n{}", stats.xds_related());
    let nacked_listener = |v: &Value| -> Option<String> {
        let node = v["nodes"].as_array()?.iter().find(|n| n["id"] == "op-b")?;
        let r = node["resources"]
            .as_array()?
            .iter()
            .find(|r| r["type"].as_str().is_some_and(|t| t.ends_with("Listener")) && r["client_status"] == "NACKED")?;
        Some(r["error"].as_str().unwrap_or_default().to_owned())
    };
    let csds = xdst_tests::operator::csds(xdst.xds_addr, &["--node-prefix", "op-"]).await?;
    let error =
        nacked_listener(&csds).with_context(|| format!("CSDS does not show op-b NACKED for a Listener: {csds}"))?;
    ensure!(error.contains("ddress already in use"), "op-b's NACK in CSDS: {error:?}");
    // `xdst wait` on the Gateway's change: a definite answer, not live, naming op-b.
    let (code, out) = xdst_wait(xdst.admin_addr, change, "20s", &[]).await?;
    ensure!(
        code == 4 && out.contains("op-b") && out.contains("ddress already in use"),
        "xdst wait --change {change} (the new Gateway) should exit 4 (held out), naming op-b and why: {code}: {out}"
    );
    eprintln!("point 5: op-a serves the new Gateway; op-b NACKED ({error}); xdst wait exited {code}");

    // The port is freed on op-b's host: both converge.
    taken.free().await?;
    op_b.wait_for(&EnvoyExpect::new().count(LISTENERS, 2), Duration::from_secs(120))
        .await
        .context("op-b taking up the new Gateway's listener once its port is free")?;
    xdst_tests::teams::serves(new_addr, "/", "b").await?;
    let (report, new_report) = (traffic.stop().await, new_traffic.stop().await);
    traffic_clean(&report, "/b0 through op-a")?;
    traffic_clean(&new_report, "the new Gateway through op-a")?;
    op_a.kill().await?;
    op_b.kill().await?;
    xdst.kill().await?;
    Ok(())
}

/// A route whose path regex RE2 refuses (its repetition count is past 1000).
const BAD_ROUTE: &str = "HTTPRoute/team-a/bad";
fn bad_route() -> String {
    route(
        "bad",
        "team-a",
        &format!("matches: [{{path: {{type: RegularExpression, value: '/a{{1001}}'}}}}]\n    {}", backend("team-a")),
    )
}

/// xdst on a fixed xDS port (so a restart is found by its Envoys), with its own plugin cache.
struct Restartable {
    xds: String,
    args: Vec<std::ffi::OsString>,
    _cache: tempfile::TempDir,
}

impl Restartable {
    fn new(t: &Teams) -> anyhow::Result<Restartable> {
        let cache = tempfile::Builder::new().prefix("xdst-hold-scope-cache-").tempdir()?;
        let mut args: Vec<std::ffi::OsString> =
            vec!["--intent".into(), t.intent.path().into(), "--plugins".into(), t.plugins.path().into()];
        args.extend(ARGS.iter().map(Into::into));
        args.extend(["--plugin-cache".into(), cache.path().join("plugins").into()]);
        Ok(Restartable { xds: format!("127.0.0.1:{}", xdst_tests::free_port()?), args, _cache: cache })
    }

    async fn start(&self) -> anyhow::Result<Process> {
        Process::start_with(&self.xds, &self.args).await
    }
}

/// What xdst serves in its default set (`/debug/resources`): whether it has the Gateway's
/// listener and both teams' clusters, and what it has.
async fn serves_the_good_routes(admin: SocketAddr) -> anyhow::Result<(bool, String)> {
    let v = admin_json(admin, "/debug/resources").await?;
    let names = |t: &str| -> Vec<String> {
        v["default"][t]["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(str::to_owned))
            .collect()
    };
    let (lds, cds) = (names("lds"), names("cds"));
    let good = lds.iter().any(|n| n == "infra/gw/80")
        && ["team-a/svc:80", "team-b/svc:80"].iter().all(|c| cds.iter().any(|n| n == c));
    Ok((good, format!("lds {lds:?}, cds {cds:?}")))
}

/// After a (re)start with the bad route in the intent: `/readyz` answers 200 only while xdst
/// serves the good routes, which the Envoy serves; the bad route is listed as held, and the
/// gateway-api plugin is not refused.
async fn started_like_running(xdst: &Process, gw: SocketAddr, when: &str) -> anyhow::Result<()> {
    let admin = xdst.admin_addr;
    until(format!("{when}: the good routes served through Envoy"), WAIT, async || {
        let (status, body) = http_get(admin, "/readyz").await?;
        if status == 200 {
            let (good, what) = serves_the_good_routes(admin).await?;
            if !good {
                let plugins = admin_json(admin, "/debug/plugins").await?;
                bail!(
                    "{when}: /readyz answers 200 ({body}) while xdst serves {what}; /debug/plugins: refused {}, held {}",
                    plugins["refused"],
                    plugins["held"]
                );
            }
        }
        let (a, b) = (http_get(gw, "/a0").await, http_get(gw, "/b0").await);
        Ok(match (&a, &b) {
            (Ok((200, x)), Ok((200, y))) if x == "a" && y == "b" && status == 200 => Seen::Done(()),
            _ => Seen::Not(format!("/readyz {status} {body}; /a0 {a:?}; /b0 {b:?}")),
        })
    })
    .await?;
    let status = admin_json(admin, "/debug/plugins").await?;
    let refused = status["refused"].as_array().cloned().unwrap_or_default();
    ensure!(refused.is_empty(), "{when}: plugins refused: {refused:#?}");
    let held = status["held"].as_array().cloned().unwrap_or_default();
    ensure!(
        held.iter().any(|h| h["held"] == BAD_ROUTE && h["error"].as_str().is_some_and(|e| e.contains("repetition"))),
        "{when}: {BAD_ROUTE} is not listed as held: {held:#?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_6_a_first_start_with_a_route_re2_refuses_serves_the_rest() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = base_intent().await?;
    t.write("team-a-bad.yaml", &bad_route())?;
    let x = Restartable::new(&t)?;
    let xdst = x.start().await?;
    let mut bootstrap = Bootstrap::new(ApiType::Sotw, x.xds.parse()?, REAL);
    bootstrap.node_cluster = EDGE.into();
    let envoy = Envoy::start(&bootstrap).await?;
    started_like_running(&xdst, t.gateway(), "at first start").await?;

    xdst.kill().await?;
    let xdst = x.start().await?;
    started_like_running(&xdst, t.gateway(), "after a restart").await?;
    t.write("team-b-b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    xdst_tests::teams::serves(t.gateway(), "/b1", "b").await.context("a later edit after the restart")?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_6_a_restart_with_a_held_route_keeps_serving() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = base_intent().await?;
    let x = Restartable::new(&t)?;
    let xdst = x.start().await?;
    let mut bootstrap = Bootstrap::new(ApiType::Sotw, x.xds.parse()?, REAL);
    bootstrap.node_cluster = EDGE.into();
    let envoy = Envoy::start(&bootstrap).await?;
    let gw = t.gateway();
    xdst_tests::teams::serves(gw, "/b0", "b").await?;
    xdst_tests::teams::serves(gw, "/a0", "a").await?;
    let traffic = Traffic::start_checked(gw, "/b0", RPS, Expect::new(Allowed::answers(&["b"])));
    // While running: the bad route is held, the rest serves.
    t.write("team-a-bad.yaml", &bad_route())?;
    xdst_tests::admin::wait_for_held(xdst.admin_addr, BAD_ROUTE, "repetition").await?;
    started_like_running(&xdst, gw, "while running").await?;

    // A restart on the same intent and plugin cache: as running, and Envoy keeps serving.
    xdst.kill().await?;
    let restarted = Instant::now();
    let connections = envoy.stats().await?.count("cluster.xds_cluster.upstream_cx_total");
    let xdst = x.start().await?;
    started_like_running(&xdst, gw, "after a restart").await?;
    // Envoy is back on the restarted xdst (the positive signal), then a later edit is served.
    envoy
        .wait_for(
            &EnvoyExpect::new()
                .count("control_plane.connected_state", 1)
                .at_least("cluster.xds_cluster.upstream_cx_total", connections + 1),
            WAIT,
        )
        .await
        .context("Envoy reconnecting to the restarted xdst")?;
    t.write("team-b-b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    let took = xdst_tests::teams::serves(gw, "/b1", "b").await.context("a later edit after the restart")?;
    let report = traffic.stop().await;
    traffic_clean(&report, "/b0 through Envoy across the restart")?;
    eprintln!("point 6: restarted in {:?}; team-b's /b1 served {took:?} after its write", restarted.elapsed());
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

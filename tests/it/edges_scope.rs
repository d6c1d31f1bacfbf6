//! Issue 49, items 1 and 2: what is the platform's cannot be taken through the namespace
//! boundaries.
//!
//! Item 1: cluster-scoped kinds cannot cross the namespace boundaries. team-a writes
//! `GatewayClass/team-a/xdst` (the platform's class name, another controller): the
//! gateway-api plugin keys classes by name alone, so it used to take the platform's Gateway
//! away from every team. It is now refused wherever it enters, naming `metadata.namespace`, and
//! the platform's Gateway keeps serving team-b through a real Envoy:
//!
//! - a file under `team-a/` with `--namespace-dirs`: held out;
//! - the intent API with team-a's `--namespace-token`: 400 naming the field, nothing written;
//! - a key under team-a's store prefix (`--store-namespace-keys`), written straight into etcd:
//!   held out.
//!
//! Item 2: team-a's Gateway on the platform Gateway's port, saying it is older
//! (`creationTimestamp: 2001-...`), with a route of team-a's on team-b's path. It used to take the
//! port (a missing or older timestamp counted as oldest): the platform's listener went
//! `PortUnavailable` and team-b's path was answered by team-a's backend. Now xdst marks what a
//! team writes (`xdst.dev/written-by: team`) and stamps its creation time, and the gateway-api
//! plugin keeps the shared address's ports for the platform (`sharedAddressNamespaces`), through
//! a namespace directory, team-a's token and team-a's store prefix alike; a port the platform
//! has not used yet cannot be squatted either.

use std::net::SocketAddr;

use anyhow::ensure;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::etcd::Etcd;
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, admin_json, gateway, gateway_on, path_route, route_on, serves, team};
use xdst_tests::xds::http_with;

/// team-a's class: the platform's name, another controller, in team-a's namespace.
const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: xdst, namespace: \
                     team-a}\nspec: {controllerName: example.com/not-xdst}\n";

/// team-a's Gateway `team-a/<name>` on `port`, saying it is older than anything, and its route
/// to team-a's Service on `path`.
fn squat(name: &str, port: u16, path: &str) -> String {
    let gateway = gateway_on("team-a", name, port)
        .replace("namespace: team-a}", "namespace: team-a, creationTimestamp: '2001-01-01T00:00:00Z'}");
    let route = route_on(
        name,
        &format!("{name}-route"),
        "team-a",
        &format!(
            "matches: [{{path: {{value: {path}}}}}]\n    backendRefs: [{{name: svc, namespace: team-a, port: 80}}]"
        ),
    )
    .replace("namespace: infra}]", "namespace: team-a}]");
    format!("{gateway}---\n{route}")
}

/// Waits until the Gateway `id`'s first listener is not accepted for `PortUnavailable`: the
/// generation that holds it has run.
async fn port_refused(admin: SocketAddr, id: &str) -> anyhow::Result<String> {
    xdst_tests::wait::until(format!("{id}'s listener refused its port"), xdst_tests::teams::WAIT, async || {
        let doc = match admin_json(admin, &format!("/intent/{id}")).await {
            Ok(d) => d,
            Err(e) => return Ok(xdst_tests::wait::Seen::Not(format!("{e:#}"))),
        };
        let conditions = doc["status"]["listeners"][0]["conditions"].as_array().cloned().unwrap_or_default();
        let refused = conditions.iter().find(|c| c["type"] == "Accepted" && c["reason"] == "PortUnavailable");
        Ok(match refused {
            Some(c) => xdst_tests::wait::Seen::Done(c["message"].as_str().unwrap_or_default().to_owned()),
            None => xdst_tests::wait::Seen::Not(format!("status: {}", doc["status"])),
        })
    })
    .await
}

/// A 1-member etcd and an xdst on it under `prefix` (`--store-namespace-keys`), into which the
/// admin token wrote the platform's Gateway, each team's Service and slice, and team-b's route
/// `/b0` (and the admin token's directory, to keep).
async fn platform_in_store(prefix: &str) -> anyhow::Result<(Etcd, Teams, Process, tempfile::TempDir)> {
    xdst_tests::init_logging();
    let etcd = Etcd::start(1).await?;
    let t = Teams::start().await?;
    let secrets = tempfile::tempdir()?;
    let (admin_token, _) = tokens(secrets.path())?;
    let xdst = Process::start_store(
        &etcd.url(prefix),
        Some(t.plugins.path()),
        std::path::Path::new(&admin_token),
        &["--store-namespace-keys", "--debounce", "20ms"],
    )
    .await?;
    let mut writes = vec![("/intent/Gateway/infra/gw".to_owned(), gateway("infra", "gw"))];
    for (ns, upstream) in [("team-a", &t.a), ("team-b", &t.b)] {
        let mut docs = team(ns, upstream).split("---\n").map(str::to_owned).collect::<Vec<_>>().into_iter();
        writes.push((format!("/intent/Service/{ns}/svc"), docs.next().unwrap_or_default()));
        writes.push((format!("/intent/EndpointSlice/{ns}/svc-1"), docs.next().unwrap_or_default()));
    }
    writes.push(("/intent/HTTPRoute/team-b/b0".into(), path_route("b0", "team-b", "/b0")));
    for (path, text) in &writes {
        let (status, body) =
            http_with(xdst.admin_addr, "PUT", path, &[("Authorization", "Bearer admin-t0ken")], text).await;
        ensure!(status == 200, "PUT {path}: {status} {body}");
    }
    Ok((etcd, t, xdst, secrets))
}

/// team-b's new route `/b1`, written through the intent API with the admin token, is served
/// at `gw`: what a store test ends on.
async fn team_b_writes_and_is_served(admin: SocketAddr, gw: SocketAddr) -> anyhow::Result<()> {
    let auth = ("Authorization", "Bearer admin-t0ken");
    let (status, body) =
        http_with(admin, "PUT", "/intent/HTTPRoute/team-b/b1", &[auth], &path_route("b1", "team-b", "/b1")).await;
    ensure!(status == 200, "team-b's write: {status} {body}");
    serves(gw, "/b1", "b").await?;
    Ok(())
}

/// Team tokens in `dir`: the admin's and team-a's.
fn tokens(dir: &std::path::Path) -> anyhow::Result<(String, String)> {
    std::fs::write(dir.join("admin"), "admin-t0ken")?;
    std::fs::write(dir.join("team-a"), "team-a-t0ken")?;
    Ok((dir.join("admin").display().to_string(), format!("team-a={}", dir.join("team-a").display())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_scoped_kind_with_a_namespace_is_refused_by_files_and_the_api() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    t.write("team-b/app.yaml", &format!("{}---\n{}", team("team-b", &t.b), path_route("b0", "team-b", "/b0")))?;
    let secrets = tempfile::tempdir()?;
    let (admin_token, team_a) = tokens(secrets.path())?;
    let args =
        ["--debounce", "20ms", "--namespace-dirs", "--admin-token-file", &admin_token, "--namespace-token", &team_a];
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &args).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edges-scope")).await?;
    let gw = t.gateway();
    serves(gw, "/b0", "b").await?;

    // A file under team-a/: held out, naming the field.
    t.write("team-a/class.yaml", CLASS)?;
    let held = xdst_tests::admin::wait_for_held(xdst.admin_addr, "team-a/class.yaml", "cluster-scoped").await?;
    ensure!(held["error"].as_str().is_some_and(|e| e.contains("metadata.namespace")), "{held}");
    // The platform's Gateway still serves team-b, a new route included.
    t.write("team-b/b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    serves(gw, "/b1", "b").await?;
    serves(gw, "/b0", "b").await?;

    // The intent API with team-a's token: refused, nothing written.
    let (status, body) = http_with(
        xdst.admin_addr,
        "PUT",
        "/intent/GatewayClass/team-a/xdst",
        &[("Authorization", "Bearer team-a-t0ken")],
        CLASS,
    )
    .await;
    ensure!(status == 400 && body.contains("cluster-scoped"), "PUT with team-a's token: {status} {body}");
    let (status, _) = xdst_tests::upstream::http_get(xdst.admin_addr, "/intent/GatewayClass/team-a/xdst").await?;
    ensure!(status == 404, "the refused class was written: {status}");
    serves(gw, "/b1", "b").await?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_scoped_kind_under_a_team_s_store_prefix_is_refused() -> anyhow::Result<()> {
    const PREFIX: &str = "edges";
    let (etcd, t, xdst, _secrets) = platform_in_store(PREFIX).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edges-scope-store")).await?;
    let gw = t.gateway();
    serves(gw, "/b0", "b").await?;
    // Straight into etcd, under team-a's prefix: held out, naming the field.
    let key = "intent/namespaces/team-a/GatewayClass/xdst";
    etcd.client().await?.put(format!("/{PREFIX}/{key}"), CLASS, None).await?;
    let held = xdst_tests::admin::wait_for_held(xdst.admin_addr, key, "cluster-scoped").await?;
    ensure!(held["error"].as_str().is_some_and(|e| e.contains("metadata.namespace")), "{held}");
    team_b_writes_and_is_served(xdst.admin_addr, gw).await?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_s_gateway_takes_no_platform_port_through_files_or_the_api() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    t.write("infra.yaml", &gateway("infra", "gw"))?;
    let (a, b) = (team("team-a", &t.a), team("team-b", &t.b));
    t.write("team-a/app.yaml", &a)?;
    t.write("team-b/app.yaml", &format!("{b}---\n{}", path_route("b0", "team-b", "/b0")))?;
    // A port the platform does not use yet (81) cannot be squatted for later either.
    t.write("team-a/early.yaml", &squat("early", 81, "/b81"))?;
    let secrets = tempfile::tempdir()?;
    let (admin_token, team_a) = tokens(secrets.path())?;
    let args =
        ["--debounce", "20ms", "--namespace-dirs", "--admin-token-file", &admin_token, "--namespace-token", &team_a];
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &args).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edges-claims")).await?;
    serves(t.gateway(), "/b0", "b").await?;
    let said = port_refused(xdst.admin_addr, "Gateway/team-a/early").await?;
    ensure!(said.contains("shared address"), "{said}");

    // A file under team-a/: the port stays the platform's, and so does team-b's path.
    t.write("team-a/squat.yaml", &squat("squat", 80, "/b0"))?;
    let said = port_refused(xdst.admin_addr, "Gateway/team-a/squat").await?;
    ensure!(said.contains("sharedAddressNamespaces"), "{said}");
    t.write("team-b/b1.yaml", &path_route("b1", "team-b", "/b1"))?;
    serves(t.gateway(), "/b1", "b").await?;
    serves(t.gateway(), "/b0", "b").await?;

    // team-a's token: the same.
    let auth = [("Authorization", "Bearer team-a-t0ken")];
    for (i, doc) in squat("api", 80, "/b0").split("---\n").enumerate() {
        let path = if i == 0 { "/intent/Gateway/team-a/api" } else { "/intent/HTTPRoute/team-a/api-route" };
        let (status, body) = http_with(xdst.admin_addr, "PUT", path, &auth, doc).await;
        ensure!(status == 200, "PUT {path} with team-a's token: {status} {body}");
    }
    port_refused(xdst.admin_addr, "Gateway/team-a/api").await?;
    let written = admin_json(xdst.admin_addr, "/intent/Gateway/team-a/api").await?;
    ensure!(written["metadata"]["creationTimestamp"] != "2001-01-01T00:00:00Z", "team-a chose its age: {written}");
    t.write("team-b/b2.yaml", &path_route("b2", "team-b", "/b2"))?;
    serves(t.gateway(), "/b2", "b").await?;
    serves(t.gateway(), "/b0", "b").await?;

    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_s_gateway_takes_no_platform_port_through_its_store_prefix() -> anyhow::Result<()> {
    const PREFIX: &str = "claims";
    let (etcd, t, xdst, _secrets) = platform_in_store(PREFIX).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edges-claims-store")).await?;
    serves(t.gateway(), "/b0", "b").await?;
    // Straight into etcd, under team-a's prefix.
    let mut client = etcd.client().await?;
    let text = squat("squat", 80, "/b0");
    let mut docs = text.split("---\n");
    for key in ["intent/namespaces/team-a/Gateway/squat", "intent/namespaces/team-a/HTTPRoute/squat-route"] {
        client.put(format!("/{PREFIX}/{key}"), docs.next().unwrap_or_default(), None).await?;
    }
    let said = port_refused(xdst.admin_addr, "Gateway/team-a/squat").await?;
    ensure!(said.contains("sharedAddressNamespaces"), "{said}");
    team_b_writes_and_is_served(xdst.admin_addr, t.gateway()).await?;
    serves(t.gateway(), "/b0", "b").await?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

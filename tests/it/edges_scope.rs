//! Issue 49, item 1: cluster-scoped kinds cannot cross the namespace boundaries. team-a writes
//! `GatewayClass/team-a/xdst` (the platform's class name, another controller): the
//! gateway-api plugin keys classes by name alone, so it used to take the platform's Gateway
//! away from every team. It is now refused wherever it enters, naming `metadata.namespace`, and
//! the platform's Gateway keeps serving team-b through a real Envoy:
//!
//! - a file under `team-a/` with `--namespace-dirs`: held out;
//! - the intent API with team-a's `--namespace-token`: 400 naming the field, nothing written;
//! - a key under team-a's store prefix (`--store-namespace-keys`), written straight into etcd:
//!   held out.

use anyhow::ensure;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::etcd::Etcd;
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, gateway, path_route, serves, team};
use xdst_tests::xds::http_with;

/// team-a's class: the platform's name, another controller, in team-a's namespace.
const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: xdst, namespace: \
                     team-a}\nspec: {controllerName: example.com/not-xdst}\n";

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
    xdst_tests::init_logging();
    let etcd = Etcd::start(1).await?;
    let t = Teams::start().await?;
    let secrets = tempfile::tempdir()?;
    let (admin_token, _) = tokens(secrets.path())?;
    let xdst = Process::start_store(
        &etcd.url(PREFIX),
        Some(t.plugins.path()),
        std::path::Path::new(&admin_token),
        &["--store-namespace-keys", "--debounce", "20ms"],
    )
    .await?;
    let admin = ("Authorization", "Bearer admin-t0ken");
    for (path, text) in [
        ("/intent/Gateway/infra/gw", gateway("infra", "gw")),
        ("/intent/Service/team-b/svc", team("team-b", &t.b).split("---\n").next().unwrap_or_default().to_owned()),
        (
            "/intent/EndpointSlice/team-b/svc-1",
            team("team-b", &t.b).split("---\n").nth(1).unwrap_or_default().to_owned(),
        ),
        ("/intent/HTTPRoute/team-b/b0", path_route("b0", "team-b", "/b0")),
    ] {
        let (status, body) = http_with(xdst.admin_addr, "PUT", path, &[admin], &text).await;
        ensure!(status == 200, "PUT {path}: {status} {body}");
    }
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edges-scope-store")).await?;
    let gw = t.gateway();
    serves(gw, "/b0", "b").await?;
    // Straight into etcd, under team-a's prefix: held out, naming the field.
    let key = "intent/namespaces/team-a/GatewayClass/xdst";
    etcd.client().await?.put(format!("/{PREFIX}/{key}"), CLASS, None).await?;
    let held = xdst_tests::admin::wait_for_held(xdst.admin_addr, key, "cluster-scoped").await?;
    ensure!(held["error"].as_str().is_some_and(|e| e.contains("metadata.namespace")), "{held}");
    let (status, body) =
        http_with(xdst.admin_addr, "PUT", "/intent/HTTPRoute/team-b/b1", &[admin], &path_route("b1", "team-b", "/b1"))
            .await;
    ensure!(status == 200, "team-b's write: {status} {body}");
    serves(gw, "/b1", "b").await?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

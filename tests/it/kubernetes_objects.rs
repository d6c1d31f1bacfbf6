//! Issue 36, items 5 and 6 (in part): manifests as a platform team applies them carry objects
//! for other controllers. Through a real Envoy:
//!
//! - a Deployment, a PodDisruptionBudget and a ServiceAccount beside a Gateway and its route
//!   are ignored (listed in `/debug/plugins` as `ignored`), never held and never a failed
//!   generation, and the route serves;
//! - a kind of a group a plugin claims other kinds of (a `BackendLBPolicy`, which no plugin
//!   translates yet) is still held, naming the kind: a typo or a kind not translated shows;
//! - the route's `metadata.generation` comes back as `observedGeneration` on its conditions;
//!   the GatewayClass is `Accepted` and `SupportedVersion`; the listener lists its
//!   `supportedKinds`; the Gateway its address; the Gateway, whose file carries no generation,
//!   gets one from xdst that moves with its spec.

use anyhow::ensure;
use serde_json::Value;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::server::Process;
use xdst_tests::upstream::{Upstream, http_get};
use xdst_tests::wait::{Seen, until};

const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

fn manifests(port: u16, upstream: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: xdst, generation: 2}}\nspec: \
         {{controllerName: xdst.dev/gateway-controller}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: app}}\nspec:\n  \
         gatewayClassName: xdst\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: app}}\nspec: {{ports: [{{port: 80}}]}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: web-1, namespace: app, labels: \
         {{kubernetes.io/service-name: web}}}}\naddressType: IPv4\nendpoints: [{{addresses: [127.0.0.1]}}]\nports: \
         [{{port: {upstream}}}]\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: web, namespace: app, generation: \
         4}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: app}}\nspec:\n  replicas: 2\n  \
         selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec: \
         {{containers: [{{name: web, image: 'example/web:1', ports: [{{containerPort: {port}}}]}}]}}\n---\n\
         apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web, namespace: app}}\nspec: {{minAvailable: 1, \
         selector: {{matchLabels: {{app: web}}}}}}\n---\n\
         apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: web, namespace: app}}\n"
    )
}

async fn admin_json(admin: std::net::SocketAddr, path: &str) -> anyhow::Result<Value> {
    let (status, body) = http_get(admin, path).await?;
    ensure!(status == 200, "GET {path}: {status} {body}");
    Ok(serde_json::from_str(&body)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_for_other_controllers_are_ignored_and_generations_come_back() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let web = Upstream::start("web").await?;
    let port = xdst_tests::free_port()?;
    let intent = tempfile::Builder::new().prefix("xdst-k8s-objects-").tempdir()?;
    let plugins = tempfile::Builder::new().prefix("xdst-k8s-objects-plugins-").tempdir()?;
    let settings =
        serde_json::json!({"config": {"address": "127.0.0.1", "portOffset": i32::from(port) - 80}}).to_string();
    xdst_tests::plugins::install(
        plugins.path(),
        &xdst_tests::plugins::gateway_api()?,
        "gateway-api.wasm",
        Some(&settings),
    )?;
    let write = |file: &str, text: &str| xdst_core::files::write_atomic(&intent.path().join(file), text);
    write("app.yaml", &manifests(8080, web.addr.port()))?;
    let xdst = Process::start_intent(intent.path(), plugins.path(), &["--debounce", "20ms"]).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "k8s-objects")).await?;
    let gw: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    until("the route served", WAIT, async || {
        Ok(match http_get(gw, "/").await {
            Ok((200, b)) if b == "web" => Seen::Done(()),
            other => Seen::Not(format!("{other:?}")),
        })
    })
    .await?;

    let status = admin_json(xdst.admin_addr, "/debug/plugins").await?;
    let ignored: Vec<&str> =
        status["ignored"].as_array().into_iter().flatten().filter_map(|i| i["document"].as_str()).collect();
    ensure!(
        ignored == ["Deployment/app/web", "PodDisruptionBudget/app/web", "ServiceAccount/app/web"],
        "ignored: {ignored:?} ({status})"
    );
    ensure!(status["ignored_total"] == 3 && status["ignored"][0]["origin"] == "app.yaml#6", "{status}");
    ensure!(
        status["held"].as_array().is_some_and(Vec::is_empty) && status["last_error"].is_null(),
        "nothing is held or failed: {status}"
    );
    let route = admin_json(xdst.admin_addr, "/intent/HTTPRoute/app/web").await?;
    let conditions = route["status"]["parents"][0]["conditions"].as_array().cloned().unwrap_or_default();
    ensure!(
        !conditions.is_empty() && conditions.iter().all(|c| c["observedGeneration"] == 4),
        "the route's conditions: {conditions:?}"
    );

    // The status as the upstream suite reads it: the class accepted, at its generation; the
    // listener's route kinds; the Gateway's address.
    let class = admin_json(xdst.admin_addr, "/intent/GatewayClass/xdst").await?;
    let conditions = class["status"]["conditions"].to_string();
    ensure!(
        conditions.contains("\"SupportedVersion\"") && conditions.contains("\"observedGeneration\":2"),
        "the GatewayClass's status: {conditions}"
    );
    let gateway = admin_json(xdst.admin_addr, "/intent/Gateway/app/gw").await?;
    let kinds: Vec<&str> = gateway["status"]["listeners"][0]["supportedKinds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["kind"].as_str())
        .collect();
    ensure!(kinds == ["HTTPRoute", "GRPCRoute"], "the listener's supportedKinds: {}", gateway["status"]);
    ensure!(gateway["status"]["addresses"][0]["value"] == "127.0.0.1", "{}", gateway["status"]);
    // The Gateway's file carries no generation: xdst keeps one, 1 until its spec changes.
    ensure!(gateway["metadata"]["generation"] == 1, "{gateway}");
    write("app.yaml", &manifests(8080, web.addr.port()).replace("name: http, port: 80", "name: web, port: 80"))?;
    until("the Gateway's generation moves with its spec", WAIT, async || {
        let gateway = admin_json(xdst.admin_addr, "/intent/Gateway/app/gw").await?;
        let observed = &gateway["status"]["listeners"][0]["conditions"][0]["observedGeneration"];
        Ok(Seen::holds(gateway["metadata"]["generation"] == 2 && *observed == 2, gateway.to_string()))
    })
    .await?;

    // A Gateway API kind no plugin translates is not ignored: it is held, naming the kind.
    write(
        "lb.yaml",
        "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: BackendLBPolicy\nmetadata: {name: db, namespace: app}\nspec:\n  \
         targetRefs: [{group: \"\", kind: Service, name: web}]\n  sessionPersistence: {sessionName: db}\n",
    )?;
    let held = xdst_tests::admin::wait_for_held(
        xdst.admin_addr,
        "BackendLBPolicy/app/db",
        "no plugin translates kind \"gateway.networking.k8s.io/BackendLBPolicy\"",
    )
    .await?;
    ensure!(held["serving"] == "nothing", "{held}");
    let (code, body) = http_get(gw, "/").await?;
    ensure!(code == 200 && body == "web", "the route still serves: {code} {body}");
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

//! Issue 20: the operator's view, with real Envoys.
//!
//! - `xdst wait --change ID` against two Envoys in two node groups (one Gateway each, the
//!   `gateway-api` plugin with `nodes: per-gateway`): a write that gives one Gateway an address
//!   Envoy refuses makes that Envoy NACK (its `listener_manager.lds.update_rejected` moves,
//!   the other's does not), and `xdst wait` exits 2 naming that node, the plugin and the
//!   document; the write that fixes it is a change `xdst wait` sees live (exit 0).
//! - CSDS read by a real client (`tests/clients/csds_client.py`, the generated stubs of the
//!   `xds-protos` package): the Envoy's listener is ACKED after a change, NACKED with Envoy's
//!   own error after a bad one, and ACKED again after the fix; a token protects it once admin
//!   reads are protected.

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::{Context as _, ensure};
use serde_json::Value;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::plugins;
use xdst_tests::server::Process;
use xdst_tests::xds::{http_get, http_with};

const TOKEN: (&str, &str) = ("Authorization", "Bearer op-t0ken");
const NS: &str = "infra";

/// An address Envoy refuses for gw-b and xdst cannot know it will: its port is taken there
/// ([`Fleet`] holds it), so Envoy NACKs the listener. (An address that is not an IP, such as
/// `300.1.1.1`, xdst refuses before Envoy: issue 35.)
const NACKED_ADDRESS: &str = "127.0.0.2";

fn gateway(name: &str, address: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  gatewayClassName: xdst\n  addresses: [{{value: \"{address}\"}}]\n  \
         listeners: [{{name: http, port: {port}, protocol: HTTP}}]\n"
    )
}

/// A Service `web` with one endpoint and an HTTPRoute to it on gw-a: (kind, name, YAML).
fn backend() -> Vec<(&'static str, &'static str, String)> {
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {NS}}}\n\
         spec:\n  ports: [{{name: http, port: 8080, targetPort: 8080}}]\n"
    );
    let slice = format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: web-1, namespace: {NS}, labels: {{kubernetes.io/service-name: web}}}}\n\
         addressType: IPv4\nendpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]\n\
         ports: [{{name: http, port: 8080}}]\n"
    );
    let route = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: web, namespace: {NS}}}\n\
         spec:\n  parentRefs: [{{name: gw-a}}]\n  hostnames: [web.example.com]\n  \
         rules: [{{backendRefs: [{{name: web, port: 8080}}]}}]\n"
    );
    vec![("Service", "web", service), ("EndpointSlice", "web-1", slice), ("HTTPRoute", "web", route)]
}

/// Two Gateways, each served to its own node group, and an Envoy in each group.
struct Fleet {
    xdst: Process,
    a: Envoy,
    b: Envoy,
    ports: (u16, u16),
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    /// gw-b's port on [`NACKED_ADDRESS`], taken.
    _taken: std::net::TcpListener,
}

impl Fleet {
    async fn start() -> anyhow::Result<Fleet> {
        Self::start_with(&[]).await
    }

    async fn start_with(extra: &[&str]) -> anyhow::Result<Fleet> {
        let intent = tempfile::tempdir()?;
        let plugin_dir = tempfile::tempdir()?;
        let settings = r#"{"config": {"nodes": "per-gateway", "address": "fromSpec"}}"#;
        plugins::install(plugin_dir.path(), &plugins::gateway_api()?, "gateway-api.wasm", Some(settings))?;
        let token = intent.path().join(".token");
        std::fs::write(&token, "op-t0ken")?;
        // These tests watch how a rejection shows while it lasts: with `--on-nack hold` (the
        // default) xdst holds gw-b's rejected version and the node moves on (tests/it/quarantine.rs).
        let mut args = vec!["--admin-token-file", token.to_str().unwrap(), "--debounce", "20ms", "--on-nack", "stop"];
        args.extend_from_slice(extra);
        let xdst = Process::start_intent(intent.path(), plugin_dir.path(), &args).await?;
        let ports = (xdst_tests::free_port()?, xdst_tests::free_port()?);
        let taken = std::net::TcpListener::bind((NACKED_ADDRESS, ports.1))?;
        let fleet_ports = ports;
        let mut envoys = Vec::new();
        for (name, port) in [("gw-a", fleet_ports.0), ("gw-b", fleet_ports.1)] {
            let (status, body) = put(xdst.admin_addr, name, &gateway(name, "127.0.0.1", port)).await?;
            ensure!(status == 200, "PUT {name}: {status} {body}");
            let mut b = Bootstrap::new(ApiType::Sotw, xdst.xds_addr, &format!("envoy-{name}"));
            b.node_cluster = format!("{NS}/{name}");
            envoys.push(Envoy::start(&b).await?);
        }
        // A route on gw-a, so its graph runs from listener to endpoints.
        for (kind, name, body) in backend() {
            let (status, text) =
                http_with(xdst.admin_addr, "PUT", &format!("/intent/{kind}/{NS}/{name}"), &[TOKEN], &body).await;
            ensure!(status == 200, "PUT {kind}/{name}: {status} {text}");
        }
        let b = envoys.pop().unwrap();
        let a = envoys.pop().unwrap();
        Ok(Fleet { xdst, a, b, ports, _dirs: (intent, plugin_dir), _taken: taken })
    }

    /// What a real CSDS client reads from this server (`FetchClientStatus`, or one request
    /// on `StreamClientStatus`), for nodes whose id starts with `prefix`.
    async fn csds(&self, prefix: &str, stream: bool, token: Option<&str>) -> anyhow::Result<Value> {
        self.csds_with(prefix, stream, token, &[]).await
    }

    async fn csds_with(
        &self,
        prefix: &str,
        stream: bool,
        token: Option<&str>,
        extra: &[&str],
    ) -> anyhow::Result<Value> {
        let script = xdst_tests::repo_root().join("tests/clients/csds_client.py");
        let mut cmd = tokio::process::Command::new(xdst_tests::python());
        cmd.arg(script).args(["--server", &self.xdst.xds_addr.to_string(), "--node-prefix", prefix]);
        if stream {
            cmd.arg("--stream");
        }
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        cmd.args(extra);
        let out = cmd.output().await.context("running csds_client.py")?;
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.trim()).with_context(|| {
            format!("csds_client.py printed {text:?}; stderr: {}", String::from_utf8_lossy(&out.stderr))
        })
    }

    /// `xdst wait` against this server: exit code and what it printed.
    async fn wait(&self, change: i64, timeout: &str) -> anyhow::Result<(i32, String)> {
        self.wait_with(change, timeout, &[]).await
    }

    async fn wait_with(&self, change: i64, timeout: &str, extra: &[&str]) -> anyhow::Result<(i32, String)> {
        xdst_tests::operator::xdst_wait(self.xdst.admin_addr, change, timeout, extra).await
    }
}

async fn put(admin: SocketAddr, name: &str, body: &str) -> anyhow::Result<(u16, String)> {
    Ok(http_with(admin, "PUT", &format!("/intent/Gateway/{NS}/{name}"), &[TOKEN], body).await)
}

/// The change id a write's answer carries.
fn change_of(body: &str) -> anyhow::Result<i64> {
    let v: Value = serde_json::from_str(body)?;
    v["change"].as_i64().with_context(|| format!("no change id in the write's answer: {body}"))
}

async fn latest(admin: SocketAddr) -> anyhow::Result<i64> {
    let (_, body) = http_get(admin, "/changes").await;
    let v: Value = serde_json::from_str(&body)?;
    v["latest"].as_i64().with_context(|| format!("GET /changes: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xdst_wait_names_the_node_that_rejected_a_change_and_the_plugin_then_sees_the_fix_live() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let f = Fleet::start().await?;

    // Both Envoys converge on what they were given: the latest change is live.
    let (code, text) = f.wait(latest(f.xdst.admin_addr).await?, "30s").await?;
    ensure!(code == 0, "the first change is not live ({code}): {text}");
    ensure!(text.contains("2 nodes in 2 groups hold it"), "{text}");
    let rejected = |e: &Envoy| {
        let e = e.admin_addr;
        async move {
            let (_, body) = http_get(e, "/stats?format=json&filter=listener_manager.lds.update_rejected").await;
            let stats = xdst_tests::envoy::Stats::from_json(&body)?;
            anyhow::Ok(stats.count("listener_manager.lds.update_rejected"))
        }
    };
    ensure!(rejected(&f.a).await? == 0 && rejected(&f.b).await? == 0, "a NACK before the bad change");

    // gw-b gets an address Envoy refuses: the write is accepted (it translates), Envoy B NACKs.
    let (status, body) = put(f.xdst.admin_addr, "gw-b", &gateway("gw-b", NACKED_ADDRESS, f.ports.1)).await?;
    ensure!(status == 200, "PUT: {status} {body}");
    let bad = change_of(&body)?;
    let started = Instant::now();
    let (code, text) = f.wait(bad, "30s").await?;
    eprintln!("[wait] bad change {bad}: exit {code} after {:?}\n{text}", started.elapsed());
    ensure!(code == 2, "xdst wait on a rejected change exited {code}: {text}");
    for want in [
        "envoy-gw-b rejected its lds",
        "plugin gateway-api",
        &format!("document Gateway/{NS}/gw-b"),
        &format!("group {NS}/gw-a: 1 of 1 nodes hold it"),
    ] {
        ensure!(text.contains(want), "{want:?} not in: {text}");
    }
    ensure!(rejected(&f.b).await? >= 1, "Envoy B did not NACK (its update_rejected did not move)");
    ensure!(rejected(&f.a).await? == 0, "Envoy A NACKed a change that did not touch its group");

    // The fix is a new change; once Envoy B holds it, it is live everywhere.
    let (status, body) = put(f.xdst.admin_addr, "gw-b", &gateway("gw-b", "127.0.0.1", f.ports.1)).await?;
    ensure!(status == 200, "PUT: {status} {body}");
    let fixed = change_of(&body)?;
    ensure!(fixed > bad, "change ids grow: {bad} then {fixed}");
    let (code, text) = f.wait(fixed, "30s").await?;
    ensure!(code == 0, "the fix is not live ({code}): {text}");

    // A change nobody can hold yet (no generation carries it): not live, and said so.
    let (code, text) = f.wait(fixed + 1000, "1s").await?;
    ensure!(code == 1 && text.contains("no generation carries it yet"), "({code}) {text}");
    Ok(())
}

/// The CSDS entry for envoy-gw-b's listener, once `want` holds for it.
async fn listener_status(f: &Fleet, stream: bool, want: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let v = f.csds("envoy-gw-b", stream, None).await?;
        ensure!(v["ok"] == true, "CSDS refused: {v}");
        let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
        ensure!(nodes.len() <= 1 && nodes.iter().all(|n| n["id"] == "envoy-gw-b"), "the prefix matcher: {v}");
        let listener = nodes
            .first()
            .and_then(|n| n["resources"].as_array())
            .and_then(|r| r.iter().find(|r| r["type"].as_str().is_some_and(|t| t.ends_with("Listener"))).cloned())
            .unwrap_or_default();
        if want(&listener) {
            return Ok(listener);
        }
        ensure!(Instant::now() < deadline, "CSDS never showed what was expected; last: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csds_client_reads_acked_then_nacked_with_envoys_error_then_acked() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let f = Fleet::start().await?;
    let acked = |l: &Value| l["client_status"] == "ACKED" && l["config_status"] == "SYNCED";
    let l = listener_status(&f, false, acked).await?;
    ensure!(l["name"] == format!("{NS}/gw-b/{}", f.ports.1) && l["has_config"] == true, "{l}");
    let version = l["version"].clone();

    // The bad address: Envoy NACKs, and CSDS says so with Envoy's own words (streamed this time).
    let (status, body) = put(f.xdst.admin_addr, "gw-b", &gateway("gw-b", NACKED_ADDRESS, f.ports.1)).await?;
    ensure!(status == 200, "PUT: {status} {body}");
    let l = listener_status(&f, true, |l| l["client_status"] == "NACKED").await?;
    ensure!(l["config_status"] == "ERROR", "{l}");
    ensure!(l["error"].as_str().is_some_and(|e| e.contains(NACKED_ADDRESS)), "{l}");
    ensure!(l["version"] == version, "the node keeps the version it had: {l}");
    ensure!(l["failed_version"].as_str().is_some_and(|v| !v.is_empty() && *v != version), "{l}");
    // The other node is untouched.
    let a = f.csds("envoy-gw-a", false, None).await?;
    let a_listener = &a["nodes"][0]["resources"].as_array().cloned().unwrap_or_default();
    ensure!(a_listener.iter().all(|r| r["client_status"] == "ACKED"), "envoy-gw-a: {a}");

    // Fixed: ACKED again.
    let (status, _) = put(f.xdst.admin_addr, "gw-b", &gateway("gw-b", "127.0.0.1", f.ports.1)).await?;
    ensure!(status == 200);
    listener_status(&f, false, acked).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csds_needs_the_admin_read_token_once_admin_reads_are_protected() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = tempfile::tempdir()?;
    let read = dir.path().join("read-token");
    std::fs::write(&read, "r34d")?;
    let f = Fleet::start_with(&["--admin-read-token-file", read.to_str().unwrap()]).await?;
    let refused = f.csds("", false, None).await?;
    ensure!(refused["ok"] == false && refused["code"] == "PERMISSION_DENIED", "{refused}");
    ensure!(refused["error"].as_str().is_some_and(|e| e.contains("admin read token")), "{refused}");
    let wrong = f.csds("", false, Some("nope")).await?;
    ensure!(wrong["code"] == "PERMISSION_DENIED", "{wrong}");
    // With the token: both nodes (positive signal that the refusals were about the token).
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let v = f.csds("", false, Some("r34d")).await?;
        if v["nodes"].as_array().is_some_and(|n| n.len() == 2) {
            break;
        }
        ensure!(Instant::now() < deadline, "{v}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}

/// CSDS limits: a stream asking faster than 2 a second past a burst of 10 is ended with
/// RESOURCE_EXHAUSTED naming the rate; one within it is answered every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csds_stream_over_its_rate_is_ended_with_the_limit_named() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let f = Fleet::start().await?;
    let within = f.csds_with("", true, None, &["--repeat", "10"]).await?;
    ensure!(within["ok"] == true, "10 at once is within the burst: {within}");
    let over = f.csds_with("", true, None, &["--repeat", "30"]).await?;
    ensure!(over["ok"] == false && over["code"] == "RESOURCE_EXHAUSTED", "{over}");
    ensure!(over["error"].as_str().is_some_and(|e| e.contains("CSDS requests a second")), "{over}");
    Ok(())
}

/// Where this test run keeps what it made for people to look at (the status page's
/// screenshots): `$CARGO_TARGET_DIR/test-artifacts/<name>`, else `target/test-artifacts/<name>`.
fn artifacts(name: &str) -> anyhow::Result<std::path::PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| xdst_tests::repo_root().join("target"));
    let dir = target.join("test-artifacts").join(name);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The status page in a real headless Chromium (playwright-core): no console errors, the
/// nodes of two running Envoys, the config graph of a group drawn, and a rejection on the page
/// within 2 s of the write that caused it. Screenshots: `test-artifacts/status-page/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_nodes_the_graph_and_a_nack_in_a_real_browser() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let f = Fleet::start().await?;
    let out = artifacts("status-page")?;
    let body = out.join("bad-gateway.yaml");
    std::fs::write(&body, gateway("gw-b", NACKED_ADDRESS, f.ports.1))?;
    let admin = f.xdst.admin_addr;
    let script = xdst_tests::repo_root().join("tests/clients/status_page.mjs");
    let run = tokio::process::Command::new("node")
        .arg(script)
        .args(["--url", &format!("http://{admin}/"), "--out"])
        .arg(&out)
        .args(["--expect-nodes", "envoy-gw-a,envoy-gw-b", "--graph-group", &format!("{NS}/gw-a")])
        .args(["--nack-node", "envoy-gw-b", "--put", &format!("http://{admin}/intent/Gateway/{NS}/gw-b")])
        .arg("--put-body")
        .arg(&body)
        .args(["--token", "op-t0ken", "--node-path"])
        .arg(xdst_tests::node_path())
        .output();
    let run =
        tokio::time::timeout(std::time::Duration::from_secs(120), run).await.context("the browser run hung")??;
    let text = String::from_utf8_lossy(&run.stdout);
    let v: Value = serde_json::from_str(text.lines().last().unwrap_or("")).with_context(|| {
        format!("status_page.mjs printed {text:?}; stderr: {}", String::from_utf8_lossy(&run.stderr))
    })?;
    eprintln!("[status page] {v}\n[status page] screenshots in {}", out.display());
    ensure!(v["ok"] == true, "{v}");
    ensure!(v["console_errors"].as_array().is_some_and(Vec::is_empty), "console errors: {v}");
    // listener, route configuration, two virtual hosts (web.example.com and the listener's
    // own), cluster, endpoints.
    ensure!(v["graph_vertices"].as_u64().is_some_and(|n| n >= 6), "the graph is not drawn whole: {v}");
    let nack_ms = v["nack_ms"].as_u64().context("no NACK time")?;
    ensure!(nack_ms <= 2000, "the NACK showed {nack_ms} ms after the write (at most 2,000)");
    ensure!(v["nack_text"].as_str().is_some_and(|t| t.contains(NACKED_ADDRESS) && t.contains("gateway-api")), "{v}");
    for shot in ["nodes.png", "graph.png", "nack.png"] {
        ensure!(std::fs::metadata(out.join(shot)).is_ok_and(|m| m.len() > 1000), "no screenshot {shot}");
    }
    Ok(())
}

/// Every metric `examples/grafana/xdst-dashboard.json` queries is one xdst serves (by family
/// name: `_bucket`, `_total` and the like are the families' own series): in a running
/// server's `/metrics`, or registered and waiting for its first series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grafana_dashboard_queries_only_metrics_xdst_serves() -> anyhow::Result<()> {
    let f = Fleet::start().await?;
    let (_, metrics) = http_get(f.xdst.admin_addr, "/metrics").await;
    let mut served: std::collections::BTreeSet<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect();
    // A family with no series yet (no NACK so far) is not in /metrics: the names registered
    // by each plane's metrics count too.
    for file in ["host/serve/src/metrics.rs", "host/xdst/src/generate/metrics.rs"] {
        let source = std::fs::read_to_string(xdst_tests::repo_root().join(file))?;
        for part in source.split("register(").skip(1) {
            if let Some(name) = part.trim_start().strip_prefix('"').and_then(|r| r.split('"').next()) {
                served.insert(format!("xdst_{name}"));
            }
        }
    }
    let dashboard = std::fs::read_to_string(xdst_tests::repo_root().join("examples/grafana/xdst-dashboard.json"))?;
    let v: Value = serde_json::from_str(&dashboard)?;
    let mut queried = std::collections::BTreeSet::new();
    for panel in v["panels"].as_array().context("no panels")? {
        for t in panel["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or("");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("xdst_") {
                    queried.insert(word.to_owned());
                }
            }
        }
    }
    ensure!(queried.len() >= 10, "the dashboard queries few metrics: {queried:?}");
    for m in &queried {
        let family =
            ["_bucket", "_total", "_sum", "_count"].iter().fold(m.as_str(), |m, s| m.strip_suffix(s).unwrap_or(m));
        ensure!(served.contains(family), "the dashboard queries {m}, and xdst has no family {family}: {served:?}");
    }
    Ok(())
}

/// Issue 32, item 8, with two real Envoys: a change id below 1 is refused, not "live"; `xdst
/// wait --group` with a group nobody serves exits 3 at once naming it (it used to exit 0, "no
/// node is connected"); one intent API write is one change (the generation its own file write
/// sets off publishes the same again and is no new change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_ids_below_one_and_unknown_groups_are_refused_and_one_write_is_one_change() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let f = Fleet::start().await?;
    for bad in ["0", "-3"] {
        let (status, body) = http_get(f.xdst.admin_addr, &format!("/changes/{bad}")).await;
        ensure!(status == 400 && body.contains("ids are whole numbers from 1"), "/changes/{bad}: {status} {body}");
    }
    let latest_id = latest(f.xdst.admin_addr).await?;
    let started = Instant::now();
    let (code, text) = f.wait_with(latest_id, "20s", &["--group", "infra/gw-typo"]).await?;
    ensure!(code == 3 && text.contains("infra/gw-typo"), "xdst wait --group typo: ({code}) {text}");
    ensure!(started.elapsed() < std::time::Duration::from_secs(10), "the refusal waited for the timeout");
    // A real group still answers.
    let (code, text) = f.wait_with(latest_id, "30s", &["--group", &format!("{NS}/gw-a")]).await?;
    ensure!(code == 0, "({code}) {text}");

    // Two writes that change what gw-a serves, each waited for: consecutive change ids.
    let mut ids = Vec::new();
    for host in ["one.example.com", "two.example.com"] {
        let route = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: web, namespace: {NS}}}\n\
             spec:\n  parentRefs: [{{name: gw-a}}]\n  hostnames: [{host}]\n  \
             rules: [{{backendRefs: [{{name: web, port: 8080}}]}}]\n"
        );
        let (status, body) =
            http_with(f.xdst.admin_addr, "PUT", &format!("/intent/HTTPRoute/{NS}/web"), &[TOKEN], &route).await;
        ensure!(status == 200, "PUT: {status} {body}");
        let id = change_of(&body)?;
        let (code, text) = f.wait(id, "30s").await?;
        ensure!(code == 0, "change {id} ({code}): {text}");
        ids.push(id);
    }
    ensure!(ids[1] == ids[0] + 1, "one write, one change: the writes were changes {ids:?}");
    ensure!(latest(f.xdst.admin_addr).await? == ids[1], "a change after the last write");
    Ok(())
}

/// Issue 33, item 8: made-up node groups use up `--max-unlisted-node-groups` (100 short
/// streams, each naming a group of its own), yet a `per-gateway` Envoy of a Gateway the intent
/// defines, started after, is served its Gateway's group: its listener comes up. A made-up
/// group past the quota is still refused its own set (counted), so the quota was full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_groups_never_crowd_out_a_group_the_intent_defines() -> anyhow::Result<()> {
    use xdst_core::types::CLUSTER;
    xdst_tests::init_logging();
    let f = Fleet::start().await?;
    let admin = f.xdst.admin_addr;
    let channel = xdst_tests::xds::channel(f.xdst.xds_addr).await;
    let made_up = |i: usize| {
        let mut req = xdst_tests::xds::sotw_req(CLUSTER, &[]);
        req.node = xdst_tests::xds::node(&format!("squatter-{i}"), &format!("made-up-{i}"));
        req
    };
    for i in 0..100 {
        let mut stream = xdst_tests::xds::sotw_ads_on(channel.clone()).await;
        stream.send(made_up(i)).await;
        stream.recv().await;
    }
    let refused = xdst_tests::operator::metric_sum(admin, "xdst_refusals_total").await?;
    let mut stream = xdst_tests::xds::sotw_ads_on(channel.clone()).await;
    stream.send(made_up(100)).await;
    stream.recv().await;
    ensure!(
        xdst_tests::operator::metric_sum(admin, "xdst_refusals_total").await? > refused,
        "the 101st made-up group was not refused: the quota was not full"
    );
    // A third Gateway, and its Envoy, after the quota is used up.
    let port = xdst_tests::free_port()?;
    let (status, body) = put(admin, "gw-c", &gateway("gw-c", "127.0.0.1", port)).await?;
    ensure!(status == 200, "PUT gw-c: {status} {body}");
    let mut b = Bootstrap::new(ApiType::Sotw, f.xdst.xds_addr, "envoy-gw-c");
    b.node_cluster = format!("{NS}/gw-c");
    let c = Envoy::start(&b).await?;
    c.wait_for(
        &xdst_tests::envoy::Expect::new().count("listener_manager.total_listeners_active", 1),
        xdst_tests::admin::WAIT,
    )
    .await
    .with_context(|| c.log_tail(30))?;
    c.kill().await?;
    Ok(())
}

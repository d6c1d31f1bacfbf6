//! Must-show 4 of issue 2: proxyless gRPC clients (Python `grpcio`, Node
//! `@grpc/grpc-js-xds`) resolve `xds:///echo` through xdst and complete RPCs to a local gRPC
//! server (`tests/clients/echo_server.py`).
//!
//! Each test starts xdst in-process on an empty resources directory, then the client: it
//! subscribes to Listener `echo` by name (SotW ADS), which does not exist yet, so it waits.
//! While it waits, `/debug/nodes` must list its node id (the client is still connected).
//! Then the resources are written: Listener `echo` (an `api_listener` HttpConnectionManager
//! with RDS over ADS and the router filter), RouteConfiguration `echo-routes` (virtual host
//! for domain `echo`), EDS Cluster `echo-cluster` and its ClusterLoadAssignment (locality
//! and `load_balancing_weight`, both required by gRPC). xdst delivers the name it was asked
//! for as soon as it appears (SOTW-10), the client follows the chain LDS -> RDS -> CDS -> EDS
//! (SOTW-9: each newly requested name is sent) and every call reaches the echo server.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use xdst_tests::fixtures;
use xdst_tests::upstream::http_get;

const CALLS: usize = 5;
/// The clients' own overall deadline (`--timeout`); the test waits a little longer.
const CLIENT_TIMEOUT_S: u64 = 30;
const WAIT: Duration = Duration::from_secs(20);
const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_resolves_xds_target_through_xdst() -> anyhow::Result<()> {
    resolve_echo(Client::Python, false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_grpc_js_xds_resolves_xds_target_through_xdst() -> anyhow::Result<()> {
    resolve_echo(Client::Node, false).await
}

/// Issue 17, must-show 2: the same, with Python grpcio speaking mTLS to xdst (the bootstrap's
/// `tls` channel credentials with a CA, a client certificate and its key, gRFC A65). xdst
/// requires the certificate, and its identity rules allow it only the client's group;
/// `/debug/nodes` shows the identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_resolves_xds_target_through_xdst_over_mtls() -> anyhow::Result<()> {
    resolve_echo(Client::Python, true).await
}

// Node's @grpc/grpc-js-xds (1.14.1, the version tests/setup.sh installs) accepts only
// `google_default` and `insecure` channel credentials for its xDS server: it can speak
// neither TLS nor mTLS to xdst (or to any xDS server), so it has no TLS test here.

#[derive(Debug, Clone, Copy)]
enum Client {
    Python,
    Node,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::Python => "py",
            Client::Node => "node",
        }
    }

    fn command(self) -> tokio::process::Command {
        let clients = xdst_tests::repo_root().join("tests/clients");
        match self {
            Client::Python => {
                let mut cmd = tokio::process::Command::new(xdst_tests::python());
                cmd.arg(clients.join("xds_client.py"));
                cmd
            }
            Client::Node => {
                let mut cmd = tokio::process::Command::new("node");
                cmd.arg(clients.join("xds_client.mjs")).arg("--node-path").arg(xdst_tests::node_path());
                cmd
            }
        }
    }
}

async fn resolve_echo(client: Client, mtls: bool) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let started = Instant::now();
    let echo = EchoServer::start("a").await?;
    let res = tempfile::Builder::new().prefix("xdst-clients-res-").tempdir()?;
    let pki = tempfile::Builder::new().prefix("xdst-clients-pki-").tempdir()?;
    let identity = "spiffe://test/grpc/client";
    let (xdst, server_uri, channel_creds) = if mtls {
        let ca = xdst_tests::pki::Ca::new(pki.path(), "ca")?;
        let server = ca.issue("xdst", &["DNS:localhost"])?;
        let me = ca.issue("client", &[&format!("URI:{identity}")])?;
        let xdst = xdst::start(xdst::Settings {
            xds_addr: "127.0.0.1:0".parse()?,
            admin_addr: "127.0.0.1:0".parse()?,
            resources: Some(res.path().to_owned()),
            resync: Duration::from_millis(500),
            shutdown_grace: Duration::from_secs(1),
            tls: xdst::cli::settings::TlsSettings {
                tls_cert: Some(server.cert),
                tls_key: Some(server.key),
                tls_client_ca: Some(ca.cert.clone()),
            },
            identities: Some(vec![xdst_serve::identity::Rule {
                identity: identity.parse().map_err(anyhow::Error::msg)?,
                groups: vec!["grpc-test".parse().map_err(anyhow::Error::msg)?],
                nodes: vec!["grpc-*".parse().map_err(anyhow::Error::msg)?],
                proxy: false,
            }]),
            ..Default::default()
        })
        .await?;
        let creds = json!([{"type": "tls", "config": {
            "ca_certificate_file": ca.cert,
            "certificate_file": me.cert,
            "private_key_file": me.key,
        }}]);
        let uri = format!("localhost:{}", xdst.xds_addr.port());
        (xdst, uri, creds)
    } else {
        let xdst = xdst_tests::server::start_in_process(Some(res.path())).await?;
        let uri = xdst.xds_addr.to_string();
        (xdst, uri, json!([{"type": "insecure"}]))
    };
    let node_id = format!("grpc-{}-{}", client.name(), std::process::id());
    let bootstrap = json!({
        "xds_servers": [{"server_uri": server_uri, "channel_creds": channel_creds}],
        // grpc-js-xds needs a locality to pick an endpoint.
        "node": {"id": node_id, "cluster": "grpc-test", "locality": {"zone": "z1"}},
    });
    let mut child = xdst_tests::proxyless_echo_client(client.command(), &bootstrap, CALLS, CLIENT_TIMEOUT_S)
        .with_context(|| format!("starting the {client:?} client"))?;
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out_task = tokio::spawn(read_all(stdout));
    let err_task = tokio::spawn(read_all(stderr));

    // The client asks for Listener `echo` by name (not wildcard) and waits for it.
    let node =
        wait_for_node(&xdst, mtls, &node_id, |n| {
            n["streams"].as_array().into_iter().flatten().any(|s| {
                s["types"].as_array().into_iter().flatten().any(|t| {
                    t["type_url"] == LDS && t["wildcard"] == false && t["subscribed_names"].as_u64() >= Some(1)
                })
            })
        })
        .await;
    let node = match node {
        Ok(n) => n,
        Err(e) => {
            let _ = child.start_kill();
            bail!("{e:#}\nclient stderr:\n{}", err_task.await?);
        }
    };
    ensure!(node["cluster"] == "grpc-test", "/debug/nodes has the wrong cluster for {node_id}: {node:#}");
    if mtls {
        ensure!(node["streams"][0]["identity"] == identity, "/debug/nodes does not show the identity: {node:#}");
    }
    // It asks for its listener by name: served its resources directly, not through the
    // make-before-break steps (it fetches a cluster only once a route names it).
    ensure!(node["plan"]["mode"] == "by_name", "a proxyless gRPC client must not be gated: {:#}", node["plan"]);
    eprintln!("[{node_id}] subscribed to Listener echo after {:?}", started.elapsed());

    write_echo_resources(res.path(), echo.port);

    let status = tokio::time::timeout(Duration::from_secs(CLIENT_TIMEOUT_S + 10), child.wait()).await;
    if status.is_err() {
        child.kill().await?;
    }
    let stdout = out_task.await?;
    let stderr = err_task.await?;
    let status = match status {
        Ok(s) => s?,
        Err(_) => bail!(
            "the {client:?} client did not exit within {}s\nstdout:\n{stdout}\nstderr:\n{stderr}",
            CLIENT_TIMEOUT_S + 10
        ),
    };
    let line = stdout.lines().last().unwrap_or_default();
    let result: Value = serde_json::from_str(line).with_context(|| {
        format!("the {client:?} client's last line is not JSON\nstdout:\n{stdout}\nstderr:\n{stderr}")
    })?;
    let want: Vec<String> = (0..CALLS).map(|i| format!("a:hello-{i}")).collect();
    ensure!(
        result["ok"] == true && result["replies"] == json!(want) && status.success(),
        "the {client:?} client failed ({status}): {result}\nwant replies {want:?}\nstderr:\n{stderr}"
    );
    eprintln!("[{node_id}] {CALLS} RPCs through xds:///echo after {:?}", started.elapsed());

    xdst.shutdown().await;
    echo.stop().await?;
    Ok(())
}

/// Listener `echo` (api_listener, RDS over ADS), route `echo-routes` for domain `echo`, EDS
/// cluster `echo-cluster` with one endpoint in locality z1, weight 1.
fn write_echo_resources(dir: &Path, port: u16) {
    fixtures::write(dir, "echo-listener.yaml", &fixtures::api_listener("echo", "echo-routes"));
    fixtures::write(
        dir,
        "echo-routes.yaml",
        r#""@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: echo-routes
virtual_hosts:
- name: echo
  domains: [echo]
  routes:
  - match: {prefix: ""}
    route: {cluster: echo-cluster}
"#,
    );
    // An EDS cluster and its ClusterLoadAssignment (locality z1, load_balancing_weight 1).
    let cluster = fixtures::cluster("echo-cluster", port);
    assert!(cluster.contains("load_balancing_weight: 1") && cluster.contains("locality"), "{cluster}");
    fixtures::write(dir, "echo-cluster.yaml", &cluster);
}

/// Polls xdst's `/debug/nodes` until `node_id` is there and `ready` holds for it.
/// Polls `/debug/nodes` (over TLS, where the plain HTTP client cannot go, the same report
/// read in-process) until node `node_id` is `ready`.
async fn wait_for_node(
    xdst: &xdst::Running,
    tls: bool,
    node_id: &str,
    ready: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let nodes: Value = if tls {
            serde_json::to_value(xdst.serving.nodes.report(&xdst.serving.rollouts.report()))?
        } else {
            let (status, body) = http_get(xdst.admin_addr, "/debug/nodes").await?;
            ensure!(status == 200, "xdst /debug/nodes: status {status}: {body}");
            serde_json::from_str(&body)?
        };
        if let Some(n) = nodes.as_array().into_iter().flatten().find(|n| n["id"] == node_id)
            && ready(n)
        {
            return Ok(n.clone());
        }
        if Instant::now() > deadline {
            bail!("xdst /debug/nodes: no node {node_id} subscribed to Listener echo within {WAIT:?}:\n{nodes:#}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn read_all(r: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut lines = BufReader::new(r).lines();
    let mut out = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `tests/clients/echo_server.py` on 127.0.0.1, a port it picked; killed on drop.
struct EchoServer {
    child: tokio::process::Child,
    port: u16,
}

impl EchoServer {
    async fn start(name: &str) -> anyhow::Result<EchoServer> {
        let script = xdst_tests::repo_root().join("tests/clients/echo_server.py");
        let mut child = tokio::process::Command::new(xdst_tests::python())
            .arg(&script)
            .args(["--port", "0", "--name", name])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", script.display()))?;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // It prints "ready <port>" once serving.
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .context("echo_server.py did not print \"ready <port>\" within 20s")??
            .context("echo_server.py exited before it was ready")?;
        let port = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .with_context(|| format!("echo_server.py printed {line:?}, not \"ready <port>\""))?;
        Ok(EchoServer { child, port })
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// Issue 3, must-show 3: a Python grpcio client reaches a gRPC service declared in intent
/// (`GrpcService` + `Service`), translated by the reference plugin built from source and
/// served by `xdst serve --intent --plugins` (in-process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_reaches_a_grpc_service_declared_in_intent() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let echo = EchoServer::start("intent").await?;
    let intent = tempfile::Builder::new().prefix("xdst-clients-intent-").tempdir()?;
    let plugin_dir = tempfile::Builder::new().prefix("xdst-clients-plugins-").tempdir()?;
    xdst_tests::plugins::install(plugin_dir.path(), &xdst_tests::plugins::reference()?, "reference.wasm", None)?;
    std::fs::write(
        intent.path().join("echo.yaml"),
        format!(
            "kind: GrpcService\nmetadata: {{name: echo}}\nspec:\n  backends: [{{service: echo-backend}}]\n  timeout: 10s\n\
             ---\nkind: Service\nmetadata: {{name: echo-backend}}\nspec:\n  protocol: grpc\n  endpoints:\n  - {{address: 127.0.0.1, port: {}}}\n",
            echo.port
        ),
    )?;
    let xdst = xdst::start(xdst::Settings {
        xds_addr: "127.0.0.1:0".parse()?,
        admin_addr: "127.0.0.1:0".parse()?,
        intent: Some(intent.path().to_owned()),
        plugins: Some(plugin_dir.path().to_owned()),
        plugin_cache: Some(xdst_tests::cache_dir().join("test-plugin-cache")),
        ..Default::default()
    })
    .await?;
    let node_id = format!("grpc-py-intent-{}", std::process::id());
    let bootstrap = json!({
        "xds_servers": [{"server_uri": xdst.xds_addr.to_string(), "channel_creds": [{"type": "insecure"}]}],
        "node": {"id": node_id, "cluster": "grpc-test", "locality": {"zone": "z1"}},
    });
    let child = Client::Python
        .command()
        .args(["--target", "xds:///echo", "--count", &CALLS.to_string(), "--timeout", &CLIENT_TIMEOUT_S.to_string()])
        .env("GRPC_XDS_BOOTSTRAP_CONFIG", bootstrap.to_string())
        .env_remove("GRPC_XDS_BOOTSTRAP")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(CLIENT_TIMEOUT_S + 10), child)
        .await
        .context("the Python client did not exit in time")??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout.lines().last().unwrap_or_default();
    let result: Value = serde_json::from_str(line)
        .with_context(|| format!("the client's last line is not JSON\nstdout:\n{stdout}\nstderr:\n{stderr}"))?;
    let want: Vec<String> = (0..CALLS).map(|i| format!("intent:hello-{i}")).collect();
    ensure!(
        result["ok"] == true && result["replies"] == json!(want) && out.status.success(),
        "the Python client failed ({}): {result}\nwant replies {want:?}\nstderr:\n{stderr}",
        out.status
    );
    xdst.shutdown().await;
    echo.stop().await?;
    Ok(())
}

//! Issue 17, must-show 5 (second half): no admin endpoint ever returns a Secret's body.
//!
//! xdst serves a resources directory holding an SDS Secret whose private key and certificate
//! carry marker strings. Every admin read endpoint is fetched (with `?bodies=true` where it
//! exists) and searched for the markers, raw and base64-encoded (proto3 JSON writes `bytes`
//! fields in base64). A positive check comes first: `/debug/resources` does list the Secret,
//! by name, with its content hash, so the search runs against a server that loaded it.

use anyhow::ensure;
use base64::Engine as _;
use xdst_tests::fixtures;
use xdst_tests::plugins;
use xdst_tests::server::Process;
use xdst_tests::upstream::{http_get, http_request};
use xdst_tests::xds::http_with;

const KEY_MARKER: &str = "KEY-MARKER-6d1f0c9a-never-shown";
const CERT_MARKER: &str = "CERT-MARKER-0b7e42d1-never-shown";

/// Every admin read endpoint that takes no parameters: each is searched for Secret material.
const ADMIN_READS: &[&str] = &[
    "/",
    "/healthz",
    "/readyz",
    "/metrics",
    "/debug/nodes",
    "/debug/resources",
    "/debug/resources?bodies=true",
    "/debug/plugins",
    "/intent",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_admin_endpoint_returns_a_secret_body() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    let secret = format!(
        r#""@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
name: team-a-cert
tls_certificate:
  certificate_chain: {{inline_string: "{CERT_MARKER}"}}
  private_key: {{inline_bytes: "{}"}}
"#,
        base64::engine::general_purpose::STANDARD.encode(KEY_MARKER)
    );
    fixtures::write(dir.path(), "secret.yaml", &secret);
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &[]).await?;

    // Positive signal: the Secret is loaded and listed.
    let (status, listed) = http_get(xdst.admin_addr, "/debug/resources?bodies=true").await?;
    ensure!(status == 200, "{status} {listed}");
    let v: serde_json::Value = serde_json::from_str(&listed)?;
    let sds = &v["default"]["sds"]["resources"][0];
    ensure!(sds["name"] == "team-a-cert", "the Secret is not listed: {listed}");
    ensure!(sds["version"].as_str().is_some_and(|h| !h.is_empty()), "no content hash: {sds}");
    ensure!(sds.get("body").is_none() && sds["withheld"].is_string(), "{sds}");
    ensure!(v["default"]["cds"]["resources"][0]["body"].is_object(), "other bodies are still shown: {listed}");

    let needles: Vec<String> = [KEY_MARKER, CERT_MARKER]
        .iter()
        .flat_map(|m| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(m);
            // A marker's middle, in case an encoding shifts its ends.
            [m.to_string(), m[4..m.len() - 4].to_string(), b64[4..b64.len() - 4].to_string()]
        })
        .collect();
    for path in ADMIN_READS {
        let (status, body) = http_get(xdst.admin_addr, path).await?;
        for n in &needles {
            ensure!(!body.contains(n.as_str()), "{path} ({status}) shows Secret material {n:?}: {body}");
        }
    }
    Ok(())
}

/// Every admin read endpoint (what `/` lists, and `GET /intent`).
const READS: [&str; 5] = ["/metrics", "/debug/nodes", "/debug/resources", "/debug/plugins", "/intent"];

/// Issue 17, must-show 5 (first half): with a read token configured, admin reads without it
/// (or with a wrong one) are refused with 401 and say what is needed; the read token and the
/// write token both read; the health check and the index stay open; `--open-metrics` opens
/// `/metrics` alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reads_need_the_read_token() -> anyhow::Result<()> {
    use xdst_tests::upstream::http_request;
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    let tokens = tempfile::tempdir()?;
    let (read, write) = (tokens.path().join("read"), tokens.path().join("write"));
    std::fs::write(&read, "read-token-5f2a\n")?;
    std::fs::write(&write, "write-token-91c3\n")?;
    let (read_arg, write_arg) = (read.display().to_string(), write.display().to_string());
    let args = ["--admin-read-token-file", read_arg.as_str(), "--admin-token-file", write_arg.as_str()];
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &args).await?;
    let get = async |path: &str, token: Option<&str>| -> anyhow::Result<(u16, String)> {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
        let r = http_request(xdst.admin_addr, path, &headers).await?;
        Ok((r.status, r.body))
    };
    for path in READS {
        let (status, body) = get(path, None).await?;
        ensure!(status == 401 && body.contains("--admin-read-token-file"), "{path} without a token: {status} {body}");
        let (status, body) = get(path, Some("guess")).await?;
        ensure!(status == 401 && body.contains("wrong bearer token"), "{path} with a wrong token: {status} {body}");
        for token in ["read-token-5f2a", "write-token-91c3"] {
            let (status, body) = get(path, Some(token)).await?;
            // /debug/plugins and /intent answer 404 when not serving intent: past the guard.
            ensure!(status == 200 || status == 404 && !body.contains("token"), "{path} with {token}: {status} {body}");
        }
    }
    let (status, body) = get("/debug/resources", Some("read-token-5f2a")).await?;
    ensure!(status == 200 && body.contains("backend"), "the read token does not read: {status} {body}");
    for path in ["/healthz", "/"] {
        let (status, _) = get(path, None).await?;
        ensure!(status == 200, "{path} needs a token ({status})");
    }
    // A write with the read token is still refused.
    let (status, body) = xdst_tests::xds::http_with(
        xdst.admin_addr,
        "POST",
        "/reload",
        &[("authorization", "Bearer read-token-5f2a")],
        "",
    )
    .await;
    ensure!(status == 401 && body.contains("wrong bearer token"), "POST /reload with the read token: {status} {body}");
    drop(xdst);

    let mut args = args.to_vec();
    args.push("--open-metrics");
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &args).await?;
    let (status, body) = http_get(xdst.admin_addr, "/metrics").await?;
    ensure!(status == 200 && body.contains("xdst_"), "--open-metrics: {status}");
    let (status, _) = http_get(xdst.admin_addr, "/debug/nodes").await?;
    ensure!(status == 401, "--open-metrics opened /debug/nodes too ({status})");
    Ok(())
}

/// Issue 17, "What to build" 4: with mTLS, a client certificate `adminReadIdentities` allows
/// reads without a token (curl over TLS, presenting it); another certificate of the same CA,
/// or none, needs the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reads_with_an_allowed_client_certificate() -> anyhow::Result<()> {
    use xdst_tests::pki::Ca;
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    let pki = tempfile::tempdir()?;
    let ca = Ca::new(pki.path(), "ca")?;
    // xdst.pem and xdst.key, which the configuration names.
    ca.issue("xdst", &["DNS:localhost", "IP:127.0.0.1"])?;
    let ops = ca.issue("ops", &["URI:spiffe://test/ops/oncall"])?;
    let team = ca.issue("team-a", &["URI:spiffe://test/team-a/envoy"])?;
    std::fs::write(pki.path().join("read"), "read-token-77\n")?;
    let config = pki.path().join("xdst.yaml");
    std::fs::write(
        &config,
        format!(
            "resources: {}\ntls: {{cert: xdst.pem, key: xdst.key, clientCa: ca.pem}}\n\
             identities: [{{identity: '*', groups: ['*']}}]\n\
             adminReadIdentities: ['spiffe://test/ops/*']\nadminReadTokenFile: read\n",
            dir.path().display()
        ),
    )?;
    let xdst = Process::start_with("127.0.0.1:0", &["--config".into(), config.clone().into()]).await?;
    let url = format!("https://127.0.0.1:{}/debug/resources", xdst.admin_addr.port());
    let curl = |cert: Option<&xdst_tests::pki::Leaf>, token: Option<&str>| -> anyhow::Result<(u16, String)> {
        let mut c = std::process::Command::new("curl");
        c.args(["-sS", "-w", "\n%{http_code}", "--cacert"]).arg(&ca.cert);
        if let Some(l) = cert {
            c.arg("--cert").arg(&l.cert).arg("--key").arg(&l.key);
        }
        if let Some(t) = token {
            c.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        let out = c.arg(&url).output()?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        ensure!(out.status.success(), "curl failed: {}", String::from_utf8_lossy(&out.stderr));
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        Ok((code.trim().parse()?, body.to_owned()))
    };
    let (status, body) = curl(Some(&ops), None)?;
    ensure!(status == 200 && body.contains("backend"), "the ops certificate cannot read: {status} {body}");
    let (status, body) = curl(Some(&team), None)?;
    ensure!(status == 401, "a certificate adminReadIdentities does not name reads: {status} {body}");
    let (status, body) = curl(None, None)?;
    ensure!(status == 401, "no certificate, no token reads: {status} {body}");
    let (status, body) = curl(None, Some("read-token-77"))?;
    ensure!(status == 200 && body.contains("backend"), "the token over TLS without a certificate: {status} {body}");
    Ok(())
}

const INTENT_KEY_MARKER: &str = "INTENT-KEY-MARKER-3a94e7b2-never-shown";
const INTENT_CERT_MARKER: &str = "INTENT-CERT-MARKER-c05d8f61-never-shown";
const API_MARKER: &str = "API-STRINGDATA-MARKER-72be19d0-never-shown";

/// What a Secret's bytes look like in any answer: raw, and the middle of their base64 (a
/// Kubernetes Secret's `data` is base64; an encoding may shift a marker's ends).
fn needles(markers: &[&str]) -> Vec<String> {
    markers
        .iter()
        .flat_map(|m| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(m);
            [m.to_string(), m[4..m.len() - 4].to_string(), b64[4..b64.len() - 4].to_string()]
        })
        .collect()
}

/// Issue 33, item 3: no admin endpoint returns the bytes of an intent Secret's `data` or
/// `stringData`, with reads open (the default) or closed, with no token, the read token or the
/// write token. A `kubernetes.io/tls` Secret (with kubectl's last-applied annotation, a copy
/// of its data) comes from a file; another, of `stringData`, is written through the API. Each
/// is first read as positive proof: its metadata, and per key `withheld` and a content hash.
/// Then every admin read endpoint (the status page's and the intent API's included) is
/// grepped for the markers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_admin_endpoint_returns_an_intent_secrets_data() -> anyhow::Result<()> {
    let intent = tempfile::tempdir()?;
    let plugin_dir = tempfile::tempdir()?;
    plugins::install(plugin_dir.path(), &plugins::gateway_api()?, "gateway-api.wasm", None)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let (crt, key) = (
        b64(&format!("-----BEGIN CERTIFICATE-----\n{INTENT_CERT_MARKER}\n-----END CERTIFICATE-----\n")),
        b64(&format!("-----BEGIN PRIVATE KEY-----\n{INTENT_KEY_MARKER}\n-----END PRIVATE KEY-----\n")),
    );
    let applied = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "data": {"tls.crt": crt, "tls.key": key}});
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "tls", "namespace": "infra", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": applied.to_string(), "team": "infra"}},
        "data": {"tls.crt": crt, "tls.key": key},
    });
    std::fs::write(intent.path().join("secret.json"), secret.to_string())?;
    let tokens = tempfile::tempdir()?;
    let (read, write) = (tokens.path().join("read"), tokens.path().join("write"));
    std::fs::write(&read, "read-token-33\n")?;
    std::fs::write(&write, "write-token-33\n")?;
    let (read_arg, write_arg) = (read.display().to_string(), write.display().to_string());
    let needles = needles(&[INTENT_KEY_MARKER, INTENT_CERT_MARKER, API_MARKER]);
    let shows = |path: &str, status: u16, body: &str| -> anyhow::Result<()> {
        for n in &needles {
            ensure!(!body.contains(n.as_str()), "{path} ({status}) shows Secret material {n:?}: {body}");
        }
        Ok(())
    };

    for open in [true, false] {
        let mut args = vec!["--admin-token-file", write_arg.as_str()];
        if !open {
            args.extend(["--admin-read-token-file", read_arg.as_str()]);
        }
        let xdst = Process::start_intent(intent.path(), plugin_dir.path(), &args).await?;
        let admin = xdst.admin_addr;
        let write_auth = ("authorization", "Bearer write-token-33");
        let api_secret = format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: api-made, namespace: infra}}\ntype: Opaque\n\
             stringData: {{password: {API_MARKER}}}\n"
        );
        let (status, body) = http_with(admin, "PUT", "/intent/Secret/infra/api-made", &[write_auth], &api_secret).await;
        ensure!(status == 200, "PUT a Secret: {status} {body}");
        shows("PUT /intent/Secret/infra/api-made", status, &body)?;

        // Positive: both Secrets are there, shown by their keys and hashes.
        let r = http_request(admin, "/intent/Secret/infra/tls", &[write_auth]).await?;
        ensure!(r.status == 200, "{} {}", r.status, r.body);
        let doc: serde_json::Value = serde_json::from_str(&r.body)?;
        ensure!(doc["metadata"]["name"] == "tls" && doc["type"] == "kubernetes.io/tls", "{doc}");
        ensure!(doc["metadata"]["annotations"]["team"] == "infra", "other metadata is still shown: {doc}");
        for k in ["tls.crt", "tls.key"] {
            let v = &doc["data"][k];
            ensure!(v["withheld"].is_string() && v["hash"].as_str().is_some_and(|h| h.len() == 16), "{k}: {doc}");
        }
        let r = http_request(admin, "/intent/Secret/infra/api-made", &[write_auth]).await?;
        let doc: serde_json::Value = serde_json::from_str(&r.body)?;
        ensure!(doc["stringData"]["password"]["withheld"].is_string(), "{} {doc}", r.status);
        let latest = http_request(admin, "/changes", &[write_auth]).await?;
        let latest: serde_json::Value = serde_json::from_str(&latest.body).unwrap_or_default();
        let change = format!("/changes/{}", latest["latest"].as_i64().unwrap_or(1));

        let reads: Vec<&str> = ADMIN_READS
            .iter()
            .copied()
            .chain([
                "/intent/Secret/infra/tls",
                "/intent/Secret/infra/api-made",
                "/changes",
                change.as_str(),
                "/status/summary",
                "/status/nodes",
                "/status/graph",
            ])
            .collect();
        let tokens: &[Option<&str>] =
            if open { &[None, Some("write-token-33")] } else { &[None, Some("read-token-33"), Some("write-token-33")] };
        let mut read_ok = 0;
        for token in tokens {
            let auth = token.map(|t| format!("Bearer {t}"));
            let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
            for &path in &reads {
                let r = http_request(admin, path, &headers).await?;
                read_ok += usize::from(r.status == 200);
                shows(path, r.status, &r.body)?;
            }
            // The status page as a browser asks for it.
            let mut html = headers.clone();
            html.push(("accept", "text/html"));
            let r = http_request(admin, "/", &html).await?;
            ensure!(r.status == 200, "the status page: {}", r.status);
            shows("/ (text/html)", r.status, &r.body)?;
        }
        ensure!(read_ok >= reads.len() * 2, "too few reads answered ({read_ok}): the search proved little");
        xdst.kill().await?;
        std::fs::remove_dir_all(intent.path().join("_api"))?;
    }
    Ok(())
}

/// Issue 33, item 3 (DNS rebinding): an admin port listening on 127.0.0.1 answers requests
/// for loopback names only. One for another host (a page whose name was rebound to
/// 127.0.0.1 sends its own) is refused with 421, reads and writes alike, and counted in
/// `xdst_refusals_total{reason="admin_host"}`; `localhost`, `*.localhost`, `127.0.0.0/8` and
/// `[::1]` with any port are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_admin_port_refuses_other_hosts() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fixtures::write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9));
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &[]).await?;
    let admin = xdst.admin_addr;
    ensure!(admin.ip().is_loopback(), "{admin}");
    let port = admin.port();
    let evil_with_port = format!("evil.example:{port}");
    let foreign = ["evil.example", evil_with_port.as_str(), "localhost.evil.example", "10.1.2.3", "127.1"];
    for host in foreign {
        for path in ["/debug/resources", "/intent", "/metrics", "/"] {
            let r = http_request(admin, path, &[("host", host)]).await?;
            ensure!(
                r.status == 421 && r.body.contains("localhost") && !r.body.contains("backend"),
                "{path} for Host {host}: {} {}",
                r.status,
                r.body
            );
        }
    }
    let (status, body) = http_with(admin, "POST", "/reload", &[], "").await;
    ensure!(status != 421, "POST /reload for 127.0.0.1: {status} {body}");
    let req = "POST /reload HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    let mut conn = tokio::net::TcpStream::connect(admin).await?;
    tokio::io::AsyncWriteExt::write_all(&mut conn, req.as_bytes()).await?;
    let mut answer = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut conn, &mut answer).await?;
    ensure!(answer.starts_with("HTTP/1.1 421"), "POST /reload for evil.example: {answer}");

    for host in [
        format!("localhost:{port}"),
        "localhost".into(),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("xdst.localhost:{port}"),
    ] {
        let r = http_request(admin, "/debug/resources", &[("host", &host)]).await?;
        ensure!(r.status == 200 && r.body.contains("backend"), "Host {host}: {} {}", r.status, r.body);
    }
    // Counted, once per refusal: this read comes after all of them.
    let (_, metrics) = http_get(admin, "/metrics").await?;
    let want = format!("xdst_refusals_total{{reason=\"admin_host\"}} {}", foreign.len() * 4 + 1);
    ensure!(metrics.contains(&want), "want {want}:\n{metrics}");
    Ok(())
}

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
use xdst_tests::server::Process;
use xdst_tests::upstream::http_get;

const KEY_MARKER: &str = "KEY-MARKER-6d1f0c9a-never-shown";
const CERT_MARKER: &str = "CERT-MARKER-0b7e42d1-never-shown";

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
    for path in [
        "/",
        "/healthz",
        "/readyz",
        "/metrics",
        "/debug/nodes",
        "/debug/resources",
        "/debug/resources?bodies=true",
        "/debug/plugins",
        "/intent",
    ] {
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

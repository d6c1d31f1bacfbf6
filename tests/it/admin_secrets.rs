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

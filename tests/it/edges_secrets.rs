//! Issue 49, item 6: with the gateway-api plugin's `nodes: all` and mTLS identity rules, a
//! team-a certificate allowed only node group `team-a` used to receive the platform Gateway's
//! TLS key over SDS (every untagged resource is every group's). Now the Secrets of the default
//! set go only to the groups the rules name as their proxies' (`proxy: true`): team-a's real
//! Envoy gets the platform's HTTP listener but not its HTTPS one, holds no Secret, and a client
//! with team-a's certificate asking for the key by name gets nothing; the platform's own Envoy
//! (group `edge`, `proxy: true`) serves HTTPS with the key.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use base64::Engine as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use xdst_tests::ads_client::{AdsClient, Options, Tls};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::netns::Netns;
use xdst_tests::pki::{Ca, Leaf};
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, WAIT, admin_json, gateway_on, path_route, serves, team};

/// The platform's Gateway: HTTP on 80, HTTPS on 443 with the Secret `infra/gw-cert`.
fn gateway_with_tls(cert: &Leaf) -> anyhow::Result<String> {
    let b64 = |p: &Path| -> anyhow::Result<String> {
        Ok(base64::engine::general_purpose::STANDARD.encode(std::fs::read(p)?))
    };
    Ok(format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: infra}}\nspec:\n  \
         gatewayClassName: xdst\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, allowedRoutes: \
         {{namespaces: {{from: All}}}}}}\n  - {{name: https, port: 443, protocol: HTTPS, tls: {{certificateRefs: \
         [{{name: gw-cert}}]}}, allowedRoutes: {{namespaces: {{from: All}}}}}}\n---\napiVersion: v1\nkind: Secret\n\
         metadata: {{name: gw-cert, namespace: infra}}\ntype: kubernetes.io/tls\ndata: {{tls.crt: {}, tls.key: {}}}\n",
        b64(&cert.cert)?,
        b64(&cert.key)?
    ))
}

/// `GET path` over TLS (server name `host`, trusting `ca`) on `addr`: the status and body.
async fn https_get(addr: SocketAddr, ca: &Path, host: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let connector = xdst_tests::pki::client_config_alpn(ca, None, b"http/1.1")?;
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls_pki_types::ServerName::try_from(host.to_owned())?;
    let mut tls = connector.connect(name, tcp).await?;
    tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await?;
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).context("no status line")?;
    Ok((status, answer.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_s_identity_is_never_handed_the_platform_s_keys() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let pki = tempfile::Builder::new().prefix("xdst-edges-secrets-pki-").tempdir()?;
    let ca = Ca::new(pki.path(), "ca")?;
    let server = ca.issue("xdst", &["DNS:localhost", "IP:127.0.0.1"])?;
    let edge = ca.issue("edge", &["URI:spiffe://test/infra/edge"])?;
    let team_a = ca.issue("team-a", &["URI:spiffe://test/team-a/client"])?;
    let gw_cert = ca.issue("gw", &["DNS:gw.example"])?;
    let config = pki.path().join("xdst.yaml");
    std::fs::write(
        &config,
        format!(
            "tls: {{cert: {}, key: {}, clientCa: {}}}\nidentities:\n- {{identity: 'spiffe://test/infra/*', groups: \
             [edge], proxy: true}}\n- {{identity: 'spiffe://test/team-a/*', groups: [team-a]}}\n",
            server.cert.display(),
            server.key.display(),
            ca.cert.display()
        ),
    )?;
    let t = Teams::start().await?;
    t.write("infra.yaml", &gateway_with_tls(&gw_cert)?)?;
    t.write("team-b.yaml", &format!("{}---\n{}", team("team-b", &t.b), path_route("b0", "team-b", "/b0")))?;
    let config_arg = config.display().to_string();
    let xdst =
        Process::start_intent(t.intent.path(), t.plugins.path(), &["--debounce", "20ms", "--config", &config_arg])
            .await?;
    // The admin port speaks TLS too: read it through a plaintext door.
    let door = xdst_tests::teams::admin_door(xdst.admin_addr, &ca.cert).await?;
    let admin = door.addr;
    let boot = |node: &str, group: &str, leaf: &Leaf| {
        let mut b = Bootstrap::new(ApiType::Sotw, xdst.xds_addr, node);
        b.node_cluster = group.into();
        b.tls_ca = Some(ca.cert.clone());
        b.tls_client = Some((leaf.cert.clone(), leaf.key.clone()));
        b
    };
    // The platform's proxy serves HTTPS with the Gateway's key.
    let edge_envoy = Envoy::start(&boot("edge-1", "edge", &edge)).await?;
    serves(t.gateway(), "/b0", "b").await?;
    let https = t.listener(443);
    xdst_tests::wait::until("HTTPS on the platform's proxy", WAIT, async || {
        Ok(match https_get(https, &ca.cert, "gw.example", "/b0").await {
            Ok((200, body)) if body == "b" => xdst_tests::wait::Seen::Done(()),
            other => xdst_tests::wait::Seen::Not(format!("{other:?}")),
        })
    })
    .await?;
    let secret_name = {
        let listed = admin_json(admin, "/debug/resources").await?;
        let name = listed["default"]["sds"]["resources"][0]["name"].as_str().map(str::to_owned);
        name.with_context(|| format!("the default set holds the Gateway's Secret: {listed}"))?
    };

    // team-a's real Envoy (its own host, so it can bind the same ports), and a client with
    // team-a's certificate asking for the key by name.
    let host_a = Netns::new().await?;
    let team_envoy = host_a.start_envoy(&boot("team-a-1", "team-a", &team_a)).await?;
    let listeners = async |want: &'static str| {
        xdst_tests::wait::until(format!("team-a's Envoy lists {want}"), WAIT, async || {
            let listed = team_envoy.admin_get("/listeners").await?;
            Ok(xdst_tests::wait::Seen::holds(listed.contains(want), listed))
        })
        .await
    };
    listeners("infra/gw/80::").await?;
    let mut client = AdsClient::spawn(&Options {
        node_cluster: "team-a".into(),
        types: vec!["lds", "sds"],
        names: vec![secret_name.clone()],
        tls: Some(Tls {
            ca: ca.cert.clone(),
            client: Some((team_a.cert.clone(), team_a.key.clone())),
            authority: Some("localhost".into()),
        }),
        ..Options::new(xdst.xds_addr, "team-a-2")
    })
    .await?;
    let lds =
        |e: &serde_json::Value| e["event"] == "ack" && e["type"].as_str().is_some_and(|t| t.ends_with("Listener"));
    client.wait_for("team-a's client acknowledges the listeners", Duration::from_secs(30), lds).await?;

    // A later change to the listeners reaches both (the positive signal); by then neither was
    // handed the key, nor the listener that needs it.
    t.write("infra-82.yaml", &gateway_on("infra", "gw82", 82))?;
    listeners("infra/gw82/82::").await?;
    client.wait_for("team-a's client acknowledges the new listener", Duration::from_secs(30), lds).await?;
    let listed = team_envoy.admin_get("/listeners").await?;
    ensure!(!listed.contains("infra/gw/443"), "team-a's Envoy has the HTTPS listener: {listed}");
    for dump in ["dynamic_active_secrets", "dynamic_warming_secrets"] {
        let secrets = team_envoy.admin_get(&format!("/config_dump?resource={dump}")).await?;
        ensure!(!secrets.contains(&secret_name), "team-a's Envoy holds {secret_name} ({dump}): {secrets}");
    }
    let (events, _) = client.close().await?;
    // A response of no Secret may come: the name it asked for is not served to its group
    // (gRFC A88's NOT_FOUND, the same answer as for a name nobody has).
    let secrets: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "response" && e["type"].as_str().is_some_and(|t| t.ends_with("Secret")))
        .filter(|e| e["resources"].as_u64() != Some(0))
        .collect();
    ensure!(secrets.is_empty(), "team-a's client was sent Secrets: {secrets:?}");
    // What it was told of the name is what it would be told of a name nobody has: nothing of
    // the platform's group, its Secret or its content.
    let told: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"].as_str().is_some_and(|t| t.ends_with("Secret")))
        .flat_map(|e| e["errors"].as_array().into_iter().flatten())
        .collect();
    let generic = format!("xdst: no sds resource named {secret_name:?} is served to this node's group");
    ensure!(
        !told.is_empty() && told.iter().all(|e| e["code"] == 5 && e["message"] == generic.as_str()),
        "team-a's client was told more than that {secret_name} is not its: {told:?}"
    );
    let served = admin_json(admin, "/debug/resources").await?;
    ensure!(
        served["groups"]["team-a"]["sds"]["resources"].as_array().is_none_or(Vec::is_empty),
        "xdst serves team-a a Secret: {}",
        served["groups"]["team-a"]
    );

    // The platform's proxy still serves HTTPS.
    let (status, body) = https_get(https, &ca.cert, "gw.example", "/b0").await?;
    ensure!(status == 200 && body == "b", "HTTPS on the platform's proxy after: {status} {body}");
    team_envoy.kill().await?;
    edge_envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

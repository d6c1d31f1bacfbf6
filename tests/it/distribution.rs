//! Issue 7, must-show 1: plugins shared through a real OCI registry (Debian's
//! `docker-registry`, the CNCF distribution registry, on loopback) and a configuration file.
//!
//! - `xdst plugin push` puts a plugin in the registry as a wasm artifact; `xdst serve --config`
//!   pulls it by tag, resolves the tag to a digest once, and runs that digest.
//! - A `sha256` pin that the artifact does not match is refused at start, showing both digests.
//! - A tag moved to a new digest is not picked up by the periodic rescans, only by a reload
//!   (`POST /reload`); the new code then goes through the same checks as a file plugin: a good
//!   one is served, a broken one is refused while the previous digest keeps serving.
//! - With the registry down, a restart serves the digest cached from the last resolution (with
//!   the error shown in `/debug/plugins`); with nothing cached it fails, naming the plugin and
//!   the source.
//! - A plugin from an `https://` URL is downloaded over TLS (a certificate trusted through
//!   `caFile`) and checked against its pin.
//! - A registry that hangs during a reload holds up no intent edit (issue 15, must-show 6).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::Value;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::pki::openssl;
use xdst_tests::plugins;
use xdst_tests::registry::{Registry, StallingProxy, push};
use xdst_tests::server::{Process, binary};
use xdst_tests::upstream::http_get;
use xdst_tests::xds::http_with;

const WAIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "t0ken";

/// `xdst serve --config FILE`, expected to fail: its stderr.
fn serve_fails(config: &Path) -> anyhow::Result<String> {
    let mut child = std::process::Command::new(binary()?)
        .args(["serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .env("RUST_BACKTRACE", "0")
        .env_remove("XDST_PLUGIN_CACHE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + WAIT;
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("xdst serve started with {} (still running after {WAIT:?})", config.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output()?;
    ensure!(!out.status.success(), "xdst serve exited 0 with {}", config.display());
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

async fn status(admin: std::net::SocketAddr) -> anyhow::Result<Value> {
    let (code, body) = http_get(admin, "/debug/plugins").await?;
    ensure!(code == 200, "/debug/plugins: {code} {body}");
    Ok(serde_json::from_str(&body)?)
}

/// The clusters the `split` route sends traffic to (weight > 0), from `/debug/resources`.
async fn split_targets(admin: std::net::SocketAddr) -> anyhow::Result<Vec<String>> {
    let (_, body) = http_get(admin, "/debug/resources?bodies=true").await?;
    let v: Value = serde_json::from_str(&body)?;
    let rc = v["default"]["rds"]["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == "split"))
        .with_context(|| format!("no RouteConfiguration split: {v:#}"))?;
    let weighted = &rc["body"]["virtual_hosts"][0]["routes"][0]["route"]["weighted_clusters"]["clusters"];
    Ok(weighted
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["weight"].as_u64().unwrap_or(0) > 0)
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect())
}

async fn wait_for(
    admin: std::net::SocketAddr,
    what: &str,
    mut ok: impl FnMut(&Value, &[String]) -> bool,
) -> anyhow::Result<(Value, Vec<String>)> {
    xdst_tests::wait::until(what, WAIT, async || {
        let s = status(admin).await?;
        let t = split_targets(admin).await?;
        Ok(if ok(&s, &t) {
            xdst_tests::wait::Seen::Done((s, t))
        } else {
            xdst_tests::wait::Seen::Not(format!("targets {t:?}, status {s:#}"))
        })
    })
    .await
}

async fn reload(admin: std::net::SocketAddr) -> anyhow::Result<String> {
    let (code, body) = http_with(admin, "POST", "/reload", &[("Authorization", &format!("Bearer {TOKEN}"))], "").await;
    ensure!(code == 200, "POST /reload: {code} {body}");
    Ok(body)
}

fn plugin_digest(s: &Value, name: &str) -> String {
    s["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .and_then(|p| p["digest"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn write_config(dir: &Path, cache: &Path, split_source: &str, pin: Option<&str>) -> anyhow::Result<std::path::PathBuf> {
    let pin = pin.map(|p| format!("  sha256: {p}\n")).unwrap_or_default();
    let text = format!(
        "# written by tests/it/distribution.rs\nintent: intent\npluginCache: {}\nresync: 100ms\nadminTokenFile: token\nplugins:\n- name: platform\n  source: reference.wasm\n- name: split\n  source: {split_source}\n{pin}",
        cache.display()
    );
    let path = dir.join("xdst.yaml");
    std::fs::write(&path, text)?;
    Ok(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_from_a_registry_run_by_digest_tags_move_on_reload_and_an_outage_is_survived() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let mut registry = Registry::start()?;
    let work = tempfile::Builder::new().prefix("xdst-dist-").tempdir()?;
    let dir = work.path();
    // Caches outside the watched directory (the configuration file's).
    let caches = tempfile::Builder::new().prefix("xdst-dist-cache-").tempdir()?;
    std::fs::create_dir(dir.join("intent"))?;
    let split_doc = |tag: &str| format!("kind: Split\nmetadata: {{name: split}}\nspec: {{port: 10998, tag: {tag}}}\n");
    let services: Vec<String> = (0..2).map(|i| format!("kind: Service\nmetadata: {{name: u{i}}}\nspec:\n  connectTimeout: 1s\n  endpoints:\n  - {{address: 127.0.0.1, port: {}}}\n", 9100 + i)).collect();
    let write_intent = |tag: &str| {
        std::fs::write(dir.join("intent/intent.yaml"), format!("{}---\n{}", services.join("---\n"), split_doc(tag)))
    };
    write_intent("one")?;
    std::fs::copy(plugins::reference()?, dir.join("reference.wasm"))?;
    std::fs::write(dir.join("token"), TOKEN)?;
    let swap = std::fs::read(plugins::swap()?)?;
    let version = |weights: [u16; 6], name: &str| plugins::write_swap_variant(&swap, weights, dir.join(name));
    let tag = registry.reference("team/split:stable");

    // v1 (all traffic to u0) pushed with the real CLI.
    let v1 = push(&version([100, 0, 0, 0, 0, 0], "v1.wasm")?, &tag)?;
    let v2_file = version([0, 100, 0, 0, 0, 0], "v2.wasm")?;
    let v2_digest = xdst_plugin::digest(&std::fs::read(&v2_file)?);

    // A pin the artifact does not match: refused at start, with both digests.
    let cache = caches.path().join("cache");
    let config = write_config(dir, &cache, &tag, Some(&v2_digest))?;
    let err = serve_fails(&config)?;
    ensure!(
        err.contains("sha256 mismatch")
            && err.contains(&v2_digest)
            && err.contains(&v1)
            && err.contains("plugins[split]"),
        "pin mismatch error: {err}"
    );
    eprintln!("[dist] a wrong sha256 is refused: {}", err.lines().last().unwrap_or_default());

    // The right pin: `xdst translate --config` shows what would be served, and serve serves it.
    write_config(dir, &cache, &tag, Some(&v1))?;
    let out = std::process::Command::new(binary()?)
        .args(["translate", "--format", "json", "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .output()?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    ensure!(
        out.status.success() && stderr.contains("plugins (platform 0.1.0, split 0.1.0)"),
        "translate --config: {stderr}"
    );
    let printed: Value = serde_json::from_str(&stdout)?;
    let weighted = printed["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == "split" && r["virtual_hosts"].is_array())
        .map(|r| r["virtual_hosts"][0]["routes"][0]["route"]["weighted_clusters"].to_string())
        .unwrap_or_default();
    ensure!(weighted.contains("\"u0\"") && weighted.contains("100"), "translate --config routes: {weighted}");
    let xdst = Process::start_with("127.0.0.1:0", &["--config".into(), config.clone().into()]).await?;
    let (s, targets) =
        wait_for(xdst.admin_addr, "v1 served", |s, t| plugin_digest(s, "split") == v1 && t == ["u0"]).await?;
    let source =
        s["sources"].as_array().and_then(|a| a.iter().find(|x| x["name"] == "split")).cloned().unwrap_or_default();
    ensure!(
        source["resolved"].as_str().is_some_and(|r| r.contains("team/split@sha256:")),
        "resolved to a manifest digest: {source:#}"
    );
    let (_, res) = http_get(xdst.admin_addr, "/debug/resources").await?;
    ensure!(res.contains("plugin split from Split/split"), "attribution to the configured plugin name: {res}");
    eprintln!("[dist] pulled by tag, running {v1}: routes to {targets:?}");

    // Unpinned from here on (the edit of the file is a reload of the list: wait for it to be
    // taken before moving the tag).
    let ok_before = status(xdst.admin_addr).await?["generations_ok"].as_u64().unwrap_or(0);
    write_config(dir, &cache, &tag, None)?;
    wait_for(xdst.admin_addr, "the unpinned configuration read", |s, _| {
        s["generations_ok"].as_u64().unwrap_or(0) > ok_before
    })
    .await?;
    // The tag moves to v2. Generations (an intent edit) and rescans do not pick it up.
    let pushed_v2 = push(&v2_file, &tag)?;
    ensure!(pushed_v2 == v2_digest);
    let ok_before = status(xdst.admin_addr).await?["generations_ok"].as_u64().unwrap_or(0);
    write_intent("two")?;
    wait_for(xdst.admin_addr, "a generation after the tag moved", |s, _| {
        s["generations_ok"].as_u64().unwrap_or(0) > ok_before
    })
    .await?;
    // Issue 34: the generation after the move is the signal; the source is still resolved to
    // what it was and v1 serves (no second of watching).
    let s = status(xdst.admin_addr).await?;
    let now =
        s["sources"].as_array().and_then(|a| a.iter().find(|x| x["name"] == "split")).cloned().unwrap_or_default();
    ensure!(
        plugin_digest(&s, "split") == v1 && now["resolved"] == source["resolved"],
        "the moved tag was picked up without a reload: {s:#}"
    );
    ensure!(split_targets(xdst.admin_addr).await? == ["u0"]);
    eprintln!("[dist] the tag moved; an intent edit later, still serving {v1}");

    // A reload resolves the tag again: v2 is compiled, checked and served.
    reload(xdst.admin_addr).await?;
    wait_for(xdst.admin_addr, "v2 served after reload", |s, t| plugin_digest(s, "split") == v2_digest && t == ["u1"])
        .await?;
    eprintln!("[dist] after POST /reload: {v2_digest}, routes to u1");

    // Registry outage: a restart serves the cached digest, and says why.
    drop(xdst);
    registry.stop();
    let xdst = Process::start_with("127.0.0.1:0", &["--config".into(), config.clone().into()]).await?;
    let (s, _) = wait_for(xdst.admin_addr, "cached v2 served with the registry down", |s, t| {
        plugin_digest(s, "split") == v2_digest && t == ["u1"]
    })
    .await?;
    let source =
        s["sources"].as_array().and_then(|a| a.iter().find(|x| x["name"] == "split")).cloned().unwrap_or_default();
    ensure!(
        source["error"].as_str().is_some_and(|e| e.contains("Connection refused") || e.contains("connect")),
        "the outage is shown: {source:#}"
    );
    // A reload while it is down keeps the digest too.
    let body = reload(xdst.admin_addr).await?;
    ensure!(body.contains("\"ok\""), "reload with the registry down: {body}");
    ensure!(plugin_digest(&status(xdst.admin_addr).await?, "split") == v2_digest);
    eprintln!("[dist] registry down: started from the cached {v2_digest}");
    // Nothing cached (a fresh cache): fatal, naming the plugin and the source.
    let fresh = write_config(dir, &caches.path().join("fresh"), &tag, None)?;
    let err = serve_fails(&fresh)?;
    ensure!(
        err.contains("plugins[1].source") && err.contains("\"split\"") && err.contains(&tag),
        "no cache, registry down: {err}"
    );
    write_config(dir, &cache, &tag, None)?;
    eprintln!("[dist] registry down, nothing cached: {}", err.lines().last().unwrap_or_default());

    // Back up; the tag moves to a broken build (its weight table corrupt, so every translation
    // fails). The reload refuses it, naming the plugin, and v2 keeps serving.
    registry.resume()?;
    let mut broken = plugins::swap_variant(&swap, [0, 0, 100, 0, 0, 0])?;
    let at = broken.windows(10).position(|w| w == b"XDST-SWAP:").context("marker")? + 10;
    broken[at] = b'x';
    std::fs::write(dir.join("broken.wasm"), &broken)?;
    let broken_digest = push(&dir.join("broken.wasm"), &tag)?;
    reload(xdst.admin_addr).await?;
    let (s, t) = wait_for(xdst.admin_addr, "the broken tag refused", |s, _| {
        s["refused"].as_array().is_some_and(|r| {
            r.iter().any(|r| {
                r["digest"].as_str().is_some_and(|d| !d.is_empty())
                    && r["file"].as_str().is_some_and(|f| f.ends_with("plugins[split]"))
            })
        })
    })
    .await?;
    let refusal = s["refused"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["file"].as_str().is_some_and(|f| f.ends_with("plugins[split]"))))
        .cloned()
        .unwrap_or_default();
    ensure!(refusal["reason"].as_str().is_some_and(|r| r.contains("weight table is corrupt")), "refusal: {refusal:#}");
    ensure!(
        refusal["serving"] == v2_digest.as_str() && plugin_digest(&s, "split") == v2_digest && t == ["u1"],
        "v2 keeps serving: {s:#}"
    );
    eprintln!("[dist] the tag moved to a broken build ({broken_digest}): refused, {v2_digest} keeps serving");
    Ok(())
}

/// `https://` sources: downloaded over TLS from a server whose certificate `caFile` trusts,
/// verified against the pin, and refused when it does not match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_from_an_https_url_is_checked_against_its_pin() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let work = tempfile::Builder::new().prefix("xdst-https-").tempdir()?;
    let dir = work.path();
    let www = dir.join("www");
    std::fs::create_dir_all(www.join("plugins"))?;
    std::fs::create_dir(dir.join("intent"))?;
    std::fs::write(
        dir.join("intent/web.yaml"),
        "kind: Service\nmetadata: {name: web}\nspec:\n  endpoints:\n  - {address: 127.0.0.1, port: 9100}\n",
    )?;
    let reference = std::fs::read(plugins::reference()?)?;
    std::fs::write(www.join("plugins/reference.wasm"), &reference)?;
    let digest = xdst_plugin::digest(&reference);

    // A test CA (`ca.pem`, which `caFile` names), a certificate for 127.0.0.1 it signs, and a
    // Python HTTPS server with it.
    let ca = xdst_tests::pki::Ca::new(dir, "ca")?;
    let leaf = ca.issue("server", &["IP:127.0.0.1"])?;
    let port = xdst_tests::free_port()?;
    let script = format!(
        "import http.server, ssl, functools\nh = functools.partial(http.server.SimpleHTTPRequestHandler, directory={www:?})\ns = http.server.ThreadingHTTPServer(('127.0.0.1', {port}), h)\nc = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\nc.load_cert_chain({cert:?}, {key:?})\ns.socket = c.wrap_socket(s.socket, server_side=True)\ns.serve_forever()\n",
        www = www.display().to_string(),
        cert = leaf.cert.display().to_string(),
        key = leaf.key.display().to_string(),
    );
    let mut server = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(s) = server.try_wait()? {
            bail!("the HTTPS server exited: {s}");
        }
        ensure!(Instant::now() < deadline, "the HTTPS server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = format!("https://127.0.0.1:{port}/plugins/reference.wasm");
    let config = |pin: &str, ca: bool| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.join("xdst.yaml");
        let ca = if ca { "caFile: ca.pem\n" } else { "" };
        std::fs::write(
            &path,
            format!(
                "intent: intent\npluginCache: cache\n{ca}plugins:\n- name: platform\n  source: {url}\n  sha256: {pin}\n"
            ),
        )?;
        Ok(path)
    };

    // Without trusting the certificate: refused, saying so.
    let err = serve_fails(&config(&digest, false)?)?;
    ensure!(
        err.contains(&url) && (err.contains("certificate") || err.contains("UnknownIssuer")),
        "untrusted certificate: {err}"
    );
    // A wrong pin: refused, with both digests.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let err = serve_fails(&config(&wrong, true)?)?;
    ensure!(err.contains("sha256 mismatch") && err.contains(&wrong) && err.contains(&digest), "wrong pin: {err}");
    // The right pin: served.
    let xdst = Process::start_with("127.0.0.1:0", &["--config".into(), config(&digest, true)?.into()]).await?;
    let s = status(xdst.admin_addr).await?;
    ensure!(
        plugin_digest(&s, "platform") == digest
            && s["plugins"][0]["source"].as_str().is_some_and(|x| x.starts_with(&url)),
        "{s:#}"
    );
    let (_, res) = http_get(xdst.admin_addr, "/debug/resources").await?;
    ensure!(res.contains("plugin platform from Service/web"), "{res}");
    eprintln!("[https] {url} verified against {digest} and served");
    Ok(())
}

/// Signatures: ed25519 over the plugin's digest, made by `xdst plugin push --sign` (stored in
/// the registry beside the plugin) or by `openssl pkeyutl` (a `.sig` file beside a path
/// source), verified against the key the configuration names; a wrong key, a missing
/// signature and a signature of other code are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_plugins_are_verified_against_the_configured_key() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let registry = Registry::start()?;
    let work = tempfile::Builder::new().prefix("xdst-sig-").tempdir()?;
    let dir = work.path();
    let caches = tempfile::Builder::new().prefix("xdst-sig-cache-").tempdir()?;
    for who in ["team", "other"] {
        openssl(dir, &["genpkey", "-algorithm", "ed25519", "-out", &format!("{who}.key")]).run()?;
        openssl(dir, &["pkey", "-in", &format!("{who}.key"), "-pubout", "-out", &format!("{who}.pub")]).run()?;
    }
    std::fs::create_dir(dir.join("intent"))?;
    std::fs::write(
        dir.join("intent/intent.yaml"),
        "kind: Service\nmetadata: {name: u0}\nspec:\n  endpoints:\n  - {address: 127.0.0.1, port: 9100}\n---\nkind: Split\nmetadata: {name: split}\nspec: {port: 10997}\n",
    )?;
    let reference = std::fs::read(plugins::reference()?)?;
    std::fs::write(dir.join("reference.wasm"), &reference)?;
    let sign_file = |digest: &str, out: &str| -> anyhow::Result<()> {
        std::fs::write(dir.join("digest.txt"), digest)?;
        openssl(dir, &["pkeyutl", "-sign", "-rawin", "-inkey", "team.key", "-in", "digest.txt", "-out", out]).run()
    };
    sign_file(&xdst_plugin::digest(&reference), "reference.wasm.sig")?;
    let swap = std::fs::read(plugins::swap()?)?;
    std::fs::write(dir.join("split.wasm"), plugins::swap_variant(&swap, [100, 0, 0, 0, 0, 0])?)?;
    let signed_tag = registry.reference("team/split:signed");
    let out = std::process::Command::new(binary()?)
        .args(["plugin", "push"])
        .arg(dir.join("split.wasm"))
        .arg(&signed_tag)
        .arg("--sign")
        .arg(dir.join("team.key"))
        .env("RUST_LOG", "warn")
        .output()?;
    ensure!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("signed   oci://"),
        "push --sign: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Other code (its own digest), pushed without a signature.
    std::fs::write(dir.join("unsigned.wasm"), plugins::swap_variant(&swap, [0, 100, 0, 0, 0, 0])?)?;
    let unsigned_tag = registry.reference("team/split:unsigned");
    push(&dir.join("unsigned.wasm"), &unsigned_tag)?;

    let config = |split: &str, key: &str| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.join("xdst.yaml");
        std::fs::write(
            &path,
            format!(
                "intent: intent\npluginCache: {}\nplugins:\n- name: platform\n  source: reference.wasm\n  signature: {{publicKey: team.pub}}\n- name: split\n  source: {split}\n  signature: {{publicKey: {key}}}\n",
                caches.path().display()
            ),
        )?;
        Ok(path)
    };
    let err = serve_fails(&config(&signed_tag, "other.pub")?)?;
    ensure!(
        err.contains("plugins[split]: signature refused: the signature does not verify with the key")
            && err.contains("other.pub"),
        "wrong key: {err}"
    );
    let err = serve_fails(&config(&unsigned_tag, "team.pub")?)?;
    ensure!(
        err.contains("signature refused: no signature") && err.contains("no signature in the registry"),
        "unsigned: {err}"
    );
    eprintln!("[sig] a wrong key and a missing signature are refused");

    let xdst =
        Process::start_with("127.0.0.1:0", &["--config".into(), config(&signed_tag, "team.pub")?.into()]).await?;
    let s = status(xdst.admin_addr).await?;
    let names: Vec<&str> = s["plugins"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    ensure!(names == ["platform", "split"], "{s:#}");
    eprintln!("[sig] signed by xdst (in the registry) and by openssl (a .sig file): both verified and served");

    // The .sig file replaced by a signature of other code: refused, the last good keeps serving.
    sign_file(&format!("sha256:{}", "1".repeat(64)), "reference.wasm.sig")?;
    let deadline = Instant::now() + WAIT;
    loop {
        let s = status(xdst.admin_addr).await?;
        if let Some(r) = s["refused"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["file"].as_str().is_some_and(|f| f.ends_with("plugins[platform]"))))
        {
            ensure!(
                r["reason"].as_str().is_some_and(|x| x.contains("does not verify"))
                    && r["serving"] == xdst_plugin::digest(&reference).as_str(),
                "{r:#}"
            );
            break;
        }
        ensure!(Instant::now() < deadline, "a bad signature was not refused: {s:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("[sig] a signature of other code is refused live; the verified version keeps serving");
    Ok(())
}

/// A registry that wants a login: without credentials the push and the pull are refused with
/// a message that says where credentials go; with them in a docker config file
/// (`$DOCKER_CONFIG/config.json`, as `docker login` writes it), both work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_wants_a_login_gets_the_docker_config_credentials() -> anyhow::Result<()> {
    use base64::Engine as _;
    xdst_tests::init_logging();
    let registry = Registry::start_with_login("team", "s3cret")?;
    let work = tempfile::Builder::new().prefix("xdst-login-").tempdir()?;
    let dir = work.path();
    let swap = std::fs::read(plugins::swap()?)?;
    std::fs::write(dir.join("split.wasm"), plugins::swap_variant(&swap, [100, 0, 0, 0, 0, 0])?)?;
    let tag = registry.reference("team/split:1");
    let push = |docker_config: &Path| {
        std::process::Command::new(binary()?)
            .args(["plugin", "push"])
            .arg(dir.join("split.wasm"))
            .arg(&tag)
            .env("DOCKER_CONFIG", docker_config)
            .env("RUST_LOG", "warn")
            .env("RUST_BACKTRACE", "0")
            .output()
            .map_err(anyhow::Error::from)
    };

    let nobody = dir.join("nobody");
    std::fs::create_dir(&nobody)?;
    let out = push(&nobody)?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        !out.status.success() && err.contains("the registry wants credentials") && err.contains("docker login"),
        "push without credentials: {err}"
    );

    let docker = dir.join("docker");
    std::fs::create_dir(&docker)?;
    let auth = base64::engine::general_purpose::STANDARD.encode("team:s3cret");
    std::fs::write(
        docker.join("config.json"),
        format!("{{\"auths\": {{\"{}\": {{\"auth\": \"{auth}\"}}}}}}", registry.host),
    )?;
    let out = push(&docker)?;
    ensure!(out.status.success(), "push with credentials: {}", String::from_utf8_lossy(&out.stderr));

    // Pull: `xdst translate --config` with and without the credentials.
    std::fs::create_dir(dir.join("intent"))?;
    std::fs::write(dir.join("intent/split.yaml"), "kind: Split\nmetadata: {name: split}\nspec: {port: 10996}\n")?;
    std::fs::copy(plugins::reference()?, dir.join("reference.wasm"))?;
    std::fs::write(
        dir.join("intent/u0.yaml"),
        "kind: Service\nmetadata: {name: u0}\nspec:\n  endpoints:\n  - {address: 127.0.0.1, port: 9100}\n",
    )?;
    std::fs::write(
        dir.join("xdst.yaml"),
        format!(
            "intent: intent\npluginCache: cache\nplugins:\n- name: platform\n  source: reference.wasm\n- name: split\n  source: {tag}\n"
        ),
    )?;
    let translate = |docker_config: &Path| {
        std::process::Command::new(binary()?)
            .args(["translate", "--config"])
            .arg(dir.join("xdst.yaml"))
            .env("DOCKER_CONFIG", docker_config)
            .env("RUST_LOG", "warn")
            .env("RUST_BACKTRACE", "0")
            .output()
            .map_err(anyhow::Error::from)
    };
    let out = translate(&nobody)?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        !out.status.success() && err.contains("plugins[1].source") && err.contains("the registry wants credentials"),
        "pull without credentials: {err}"
    );
    let out = translate(&docker)?;
    ensure!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("name: split"),
        "pull with credentials: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("[login] refused without credentials; pushed and pulled with the docker config's");
    Ok(())
}

/// Issue 15, must-show 6: a registry that accepts connections and never answers, during a
/// reload, holds up no generation. The reload answers at once (the source keeps its previous
/// resolution while the fetch runs in the background), and intent edits reach a real Envoy in
/// about the time they took before the registry hung.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_never_answers_does_not_hold_up_intent_edits() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let registry = Registry::start()?;
    let proxy = StallingProxy::start(&registry.host)?;
    let work = tempfile::Builder::new().prefix("xdst-stall-").tempdir()?;
    let dir = work.path();
    let caches = tempfile::Builder::new().prefix("xdst-stall-cache-").tempdir()?;
    std::fs::create_dir(dir.join("intent"))?;
    let port = xdst_tests::free_port()?;
    // `n` Services u0..u(n-1) and the Split routing to u0.
    let write_intent = |n: usize| {
        let mut docs: Vec<String> = (0..n)
            .map(|i| format!("kind: Service\nmetadata: {{name: u{i}}}\nspec:\n  connectTimeout: 1s\n  endpoints:\n  - {{address: 127.0.0.1, port: {}}}\n", 9100 + i))
            .collect();
        docs.push(format!("kind: Split\nmetadata: {{name: split}}\nspec: {{port: {port}, tag: one}}\n"));
        xdst_core::files::write_atomic(&dir.join("intent/intent.yaml"), docs.join("---\n"))
    };
    write_intent(2)?;
    std::fs::copy(plugins::reference()?, dir.join("reference.wasm"))?;
    std::fs::write(dir.join("token"), TOKEN)?;
    let v1_file = dir.join("v1.wasm");
    std::fs::write(&v1_file, plugins::swap_variant(&std::fs::read(plugins::swap()?)?, [100, 0, 0, 0, 0, 0])?)?;
    let v1 = push(&v1_file, &registry.reference("team/split:stable"))?;
    let config = write_config(dir, &caches.path().join("cache"), &proxy.reference("team/split:stable"), None)?;
    let xdst = Process::start_with("127.0.0.1:0", &["--config".into(), config.into()]).await?;
    let admin = xdst.admin_addr;
    wait_for(admin, "v1 served", |s, t| plugin_digest(s, "split") == v1 && t == ["u0"]).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "stalled-registry")).await?;
    let has_cluster = |n: usize| format!("cluster.u{}.membership_total", n - 1);
    let reaches_envoy = |n: usize| {
        let envoy = &envoy;
        let stat = has_cluster(n);
        async move {
            let t = Instant::now();
            write_intent(n)?;
            let deadline = t + WAIT;
            while envoy.stats().await?.get(&stat).is_none() {
                ensure!(Instant::now() < deadline, "{stat}: not in Envoy within {WAIT:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            anyhow::Ok(t.elapsed())
        }
    };
    // The usual time, with the registry answering.
    let usual = reaches_envoy(3).await?;

    proxy.stall(true);
    let t = Instant::now();
    let body = reload(admin).await?;
    let reload_took = t.elapsed();
    ensure!(body.contains("\"ok\"") && reload_took < Duration::from_secs(10), "reload: {body} after {reload_took:?}");
    let (s, _) = wait_for(admin, "the fetch shown as running", |s, _| {
        s["sources"].as_array().into_iter().flatten().any(|x| x["name"] == "split" && x["fetching_seconds"].is_number())
    })
    .await?;
    ensure!(plugin_digest(&s, "split") == v1, "the previous resolution keeps serving: {s:#}");
    let mut stalled = Vec::new();
    for n in 4..7 {
        let took = reaches_envoy(n).await?;
        ensure!(
            took < usual + Duration::from_secs(5),
            "an edit took {took:?} with the registry hung (usually {usual:?})"
        );
        stalled.push(took);
    }
    ensure!(plugin_digest(&status(admin).await?, "split") == v1);
    eprintln!(
        "[dist] registry hung: reload answered in {reload_took:?}; edits reached Envoy in {stalled:?} (usually {usual:?})"
    );
    Ok(())
}

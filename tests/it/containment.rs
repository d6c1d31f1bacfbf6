//! Issue 15: no plugin or input can crash, flood or wedge the server. Each case runs against
//! the real `xdst serve` with a real Envoy connected, and checks what an operator would: the
//! process is still up, Envoy keeps every `version_text` and its traffic, the error names the
//! field, and the log and `/debug/plugins` stay small.
//!
//! - must-show 1: an `Any` holding an `Any` ... 3,000 and 100,000 deep, from a plugin as
//!   protobuf bytes and as JSON, and in a resources file;
//! - must-show 2: a 50 MB plugin error and 20,000 diagnostics (log, `/debug/plugins`, the
//!   intent API's answer each under 64 KiB);
//! - must-show 4: a panic in a plugin-result path (the test-only hook
//!   `XDST_TEST_PANIC_ON_RESOURCE`) is reported, and the next generation serves;
//! - must-show 3: 10,000 streams with client-chosen type URLs, clusters and user agents
//!   (`/metrics` under 1 MiB, memory back to its baseline; no Envoy needed);
//! - must-show 7: a 253-character API document name; YAML alias bombs and oversized files
//!   refused quickly with bounded memory, naming the file.
//!
//! Issue 33, items 1 and 2 (plugins written in WAT, `tests/plugins/wat/`): a plugin sleeping on
//! a host clock (WASI p1 `poll_oneoff`; a component through `wasi:io/poll`) is stopped at its
//! deadline while edits keep applying, and at start lets `serve` open its ports; a million
//! unimplemented WASI calls leave the log small and name the plugin.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use tonic::transport::Channel;
use xdst_tests::admin::{
    Held, WAIT, ensure_unchanged, generations, held, node_plan, plugins_status, plugins_status_sized, wait_for_failure,
    wait_for_held, wait_for_ok, wait_in_sync,
};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::free_port;
use xdst_tests::plugins;
use xdst_tests::server::{Options, Process};
use xdst_tests::upstream::{Upstream, http_get};
use xdst_tests::xds::http_with;

/// What every report of one hostile input must stay under.
const SMALL: usize = 64 << 10;
const TOKEN: &str = "t0ken";

/// A Service `a` and a gateway routing everything to it.
fn intent(up: &Upstream, port: u16) -> String {
    format!(
        "kind: Service\nmetadata: {{name: a}}\nspec:\n  endpoints:\n  - {{address: 127.0.0.1, port: {}}}\n---\n\
         kind: HttpGateway\nmetadata: {{name: web}}\nspec:\n  address: 127.0.0.1\n  port: {port}\n  hosts:\n  \
         - hostnames: [\"*\"]\n    routes:\n    - match: {{pathPrefix: /}}\n      backends: [{{service: a}}]\n",
        up.addr.port()
    )
}

/// The node id of the Envoy of [`Setup`].
const NODE: &str = "containment";

/// xdst serving intent through the reference plugin, its log in a file, and an Envoy routing
/// through it.
struct Setup {
    xdst: Process,
    envoy: Envoy,
    proxy: SocketAddr,
    log: PathBuf,
    intent: tempfile::TempDir,
    plugins: tempfile::TempDir,
    up: Upstream,
}

impl Setup {
    async fn start(env: &[(&str, &str)]) -> anyhow::Result<Setup> {
        Setup::start_with(env, &[]).await
    }

    /// With more `xdst serve` arguments.
    async fn start_with(env: &[(&str, &str)], extra: &[&str]) -> anyhow::Result<Setup> {
        let up = Upstream::start("a").await?;
        let port = free_port()?;
        let intent = tempfile::Builder::new().prefix("xdst-intent-").tempdir()?;
        let plugin_dir = tempfile::Builder::new().prefix("xdst-plugins-").tempdir()?;
        std::fs::write(intent.path().join("web.yaml"), self::intent(&up, port))?;
        plugins::install(plugin_dir.path(), &plugins::reference()?, "reference.wasm", None)?;
        let token = intent.path().join(".token");
        std::fs::write(&token, TOKEN)?;
        let log = intent.path().join(".xdst.log");
        let mut args: Vec<std::ffi::OsString> = vec![
            "--intent".into(),
            intent.path().into(),
            "--plugins".into(),
            plugin_dir.path().into(),
            "--debounce".into(),
            "20ms".into(),
            "--admin-token-file".into(),
            token.into(),
        ];
        args.extend(extra.iter().map(Into::into));
        let options =
            Options { env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), log: Some(log.clone()) };
        let xdst = Process::start_with_options("127.0.0.1:0", &args, &options).await?;
        let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, NODE)).await?;
        let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + WAIT;
        while !matches!(http_get(proxy, "/").await, Ok((200, ref b)) if b == "a") {
            ensure!(Instant::now() < deadline, "Envoy did not route to a within {WAIT:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Setup { xdst, envoy, proxy, log, intent, plugins: plugin_dir, up })
    }

    fn log_len(&self) -> u64 {
        std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0)
    }

    /// What Envoy holds now.
    async fn served(&self) -> anyhow::Result<Held> {
        held(self.xdst.admin_addr, &self.envoy).await
    }

    /// xdst is up, Envoy holds exactly `served` and still routes to `a`. Called once the
    /// counter of the generation under test moved: a push from it would have moved xdst's
    /// target for the node before that (issue 34: no sleep to give a wrong push time).
    async fn still_serving(&mut self, served: &Held, what: &str) -> anyhow::Result<()> {
        ensure!(self.xdst.alive(), "{what}: xdst exited; its log ends:\n{}", tail(&self.log));
        ensure_unchanged(self.xdst.admin_addr, &self.envoy, served, what).await?;
        let stats = self.envoy.stats().await?;
        ensure!(stats.count("control_plane.connected_state") == 1, "{what}: Envoy is not connected");
        let (status, body) = http_get(self.proxy, "/").await?;
        ensure!(status == 200 && body == "a", "{what}: traffic broke: {status} {body}");
        Ok(())
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let start = text.len().saturating_sub(4000);
    text[text.floor_char_boundary(start)..].to_owned()
}

/// Must-show 1 and 2, from plugins: each hostile output fails its generation with a bounded
/// error naming the field; nothing else changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugin_output_is_refused_bounded_and_changes_nothing() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let mut s = Setup::start(&[]).await?;
    let admin = s.xdst.admin_addr;
    let served = s.served().await?;
    ensure!(served.versions.len() >= 4, "expected version_text stats for every type: {:?}", served.versions);
    let adversary = plugins::adversary()?;
    std::fs::write(s.intent.path().join("adversary.yaml"), "kind: Adversary\nmetadata: {name: one}\nspec: {}\n")?;
    // First, the plugin's first version fails with a 50 MB error naming no document: with no
    // version to fall back on, the generation fails, and the error is cut wherever it shows.
    // Then versions whose output breaks the bounds at a document: the document is held out
    // (issue 35), and nothing else changes.
    let cases = [
        ("huge-error:50000000", "[cut: 50000000 bytes in all]"),
        ("deep-any-proto:3000", "field transport_socket.typed_config: messages nested more than 100 levels deep"),
        ("deep-any-proto:100000", "field transport_socket.typed_config: messages nested more than 100 levels deep"),
        ("deep-any-json:3000", "field transport_socket.typed_config.value.value"),
        ("deep-any-json:100000", "field transport_socket.typed_config.value.value"),
    ];
    for (mode, want) in cases {
        let failed = generations(admin, "generations_failed").await?;
        let log_before = s.log_len();
        plugins::install(s.plugins.path(), &adversary, "adversary.wasm", Some(&format!("config: \"{mode}\"\n")))?;
        let huge = mode.starts_with("huge-error");
        let error = match huge {
            true => wait_for_failure(admin, failed).await?,
            false => wait_for_held(admin, "Adversary/one", want).await?,
        };
        let message = error["message"].as_str().unwrap_or_default();
        ensure!(message.contains("plugin \"adversary\" (sha256:") && message.contains(want), "{mode}: {error:#}");
        s.still_serving(&served, mode).await?;
        let (_, size) = plugins_status_sized(admin).await?;
        let logged = s.log_len() - log_before;
        ensure!(size < SMALL && (logged as usize) < SMALL, "{mode}: /debug/plugins {size} bytes, log +{logged} bytes");
        eprintln!(
            "[containment] {mode}: refused ({} bytes of error); /debug/plugins {size} B, log +{logged} B",
            message.len()
        );
        if huge {
            // The intent API's answer for a write that the 50 MB error refuses.
            let (status, body) = http_with(
                admin,
                "PUT",
                "/intent/Adversary/two",
                &[("Authorization", &format!("Bearer {TOKEN}"))],
                "kind: Adversary\nmetadata: {name: two}\nspec: {}\n",
            )
            .await;
            ensure!(
                status == 422 && body.len() < SMALL && body.contains("[cut: 50000000"),
                "PUT: {status}, {} bytes",
                body.len()
            );
            s.still_serving(&served, "API write").await?;
        }
    }

    // 20,000 diagnostics of 1 KiB: the generation succeeds; 20 are kept and the rest counted.
    let ok = generations(admin, "generations_ok").await?;
    let log_before = s.log_len();
    plugins::install(s.plugins.path(), &adversary, "adversary.wasm", Some("config: \"diagnostics:20000\"\n"))?;
    let status = wait_for_ok(admin, ok).await?;
    let report = &status["last_generation"];
    ensure!(report["diagnostics_total"] == 21, "diagnostics: {report:#}");
    let (_, size) = plugins_status_sized(admin).await?;
    let logged = s.log_len() - log_before;
    ensure!(size < SMALL && (logged as usize) < SMALL, "diagnostics: /debug/plugins {size} bytes, log +{logged} bytes");
    ensure!(s.xdst.alive(), "xdst exited");
    eprintln!("[containment] 20,000 diagnostics: /debug/plugins {size} B, log +{logged} B");

    // Each bound reached is counted for operators.
    let (_, metrics) = http_get(admin, "/metrics").await?;
    for limit in ["nesting", "text", "diagnostics"] {
        let hits = metrics
            .lines()
            .find(|l| l.starts_with(&format!("xdst_limit_hits_total{{limit=\"{limit}\"}}")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0);
        ensure!(hits > 0.0, "xdst_limit_hits_total{{limit={limit:?}}} is {hits}");
    }
    Ok(())
}

/// The bounds on a plugin's text are flags: with `--max-plugin-diagnostics 5` and
/// `--max-plugin-message 1KiB`, 100 diagnostics of 1 KiB keep 5 (and one saying how many
/// more), each cut to 1 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_text_bounds_are_set_by_flags() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let s = Setup::start_with(&[], &["--max-plugin-diagnostics", "5", "--max-plugin-message", "1KiB"]).await?;
    let admin = s.xdst.admin_addr;
    std::fs::write(s.intent.path().join("adversary.yaml"), "kind: Adversary\nmetadata: {name: one}\nspec: {}\n")?;
    let ok = generations(admin, "generations_ok").await?;
    let adversary = plugins::adversary()?;
    plugins::install(s.plugins.path(), &adversary, "adversary.wasm", Some("config: \"diagnostics:100\"\n"))?;
    // A good generation that ran the adversary: one already under way when the file was
    // written (a node group connecting) may finish first, without it.
    let mut ok = ok;
    let status = loop {
        let status = wait_for_ok(admin, ok).await?;
        if status["last_generation"]["calls"].to_string().contains("\"adversary\"") {
            break status;
        }
        ok = status["generations_ok"].as_u64().unwrap_or(ok + 1);
    };
    let report = &status["last_generation"];
    ensure!(report["diagnostics_total"] == 6, "diagnostics: {report:#}");
    let diagnostics = report["diagnostics"].as_array().cloned().unwrap_or_default();
    ensure!(!diagnostics.is_empty(), "no diagnostics shown: {report:#}");
    for d in &diagnostics {
        let message = d["message"].as_str().unwrap_or_default();
        ensure!(message.len() < 1100, "a diagnostic of {} bytes: {d:#}", message.len());
        ensure!(message.contains("[cut: ") || message.contains("more diagnostics not kept"), "not cut: {d:#}");
    }
    Ok(())
}

/// Must-show 4: a panic in a generation (the test-only hook) is reported with its cause and
/// counted; the next generation translates and serves as if nothing happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_generation_is_reported_and_the_next_one_serves() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let mut s = Setup::start(&[("XDST_TEST_PANIC_ON_RESOURCE", "boom")]).await?;
    let admin = s.xdst.admin_addr;
    let served = s.served().await?;
    let service = |name: &str| {
        format!("kind: Service\nmetadata: {{name: {name}}}\nspec:\n  endpoints: [{{address: 127.0.0.1, port: 9}}]\n")
    };

    let failed = generations(admin, "generations_failed").await?;
    std::fs::write(s.intent.path().join("boom.yaml"), service("boom"))?;
    let error = wait_for_failure(admin, failed).await?;
    let message = error["message"].as_str().unwrap_or_default();
    ensure!(
        message.contains("the generation panicked") && message.contains("XDST_TEST_PANIC_ON_RESOURCE"),
        "{error:#}"
    );
    s.still_serving(&served, "panic").await?;
    let (_, metrics) = http_get(admin, "/metrics").await?;
    ensure!(metrics.contains("xdst_generation_panics_total 1"), "the panic is not counted");

    // The next generation: a healthy edit is translated and reaches Envoy.
    let ok = generations(admin, "generations_ok").await?;
    std::fs::remove_file(s.intent.path().join("boom.yaml"))?;
    std::fs::write(s.intent.path().join("fine.yaml"), service("fine"))?;
    wait_for_ok(admin, ok).await?;
    let deadline = Instant::now() + WAIT;
    while !s.envoy.stats().await?.all_text().iter().any(|(k, _)| k.starts_with("cluster.fine.")) {
        ensure!(Instant::now() < deadline, "cluster fine never reached Envoy");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ensure!(s.xdst.alive(), "xdst exited");
    Ok(())
}

/// Must-show 7: the longest name the API accepts is written (it used to answer `500 File name
/// too long`); YAML that expands without bound and files over the size limit are refused
/// quickly, naming the file, with xdst's memory bounded, and what serves stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_names_alias_bombs_and_huge_files_are_handled() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let mut s = Setup::start(&[]).await?;
    let admin = s.xdst.admin_addr;
    let auth = format!("Bearer {TOKEN}");

    let name = "n".repeat(253);
    let doc =
        format!("kind: Service\nmetadata: {{name: {name}}}\nspec:\n  endpoints: [{{address: 127.0.0.1, port: 9}}]\n");
    let before = node_plan(admin, NODE).await?["target_version"].as_str().unwrap_or_default().to_owned();
    let (status, body) =
        http_with(admin, "PUT", &format!("/intent/Service/{name}"), &[("Authorization", &auth)], &doc).await;
    ensure!(status == 200, "a 253-character name: {status} {body}");
    // Envoy holds the change before anything else is tried.
    wait_in_sync(admin, NODE, &before).await?;
    let served = s.served().await?;
    s.still_serving(&served, "long name").await?;

    // 10,000 aliases to a 10,000-element list: 100 million values from 60 KB.
    let mut bomb = String::from("kind: Service\nmetadata: {name: bomb}\nspec:\n  base: &l [");
    bomb.push_str(&vec!["1"; 10_000].join(","));
    bomb.push_str("]\n  refs:\n");
    for _ in 0..10_000 {
        bomb.push_str("  - *l\n");
    }
    let rss_before = s.xdst.peak_rss()?;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("bomb.yaml", bomb.into_bytes(), "aliases expand to more than"),
        ("big.yaml", huge_intent(47 << 20), "over the limit of 8388608 bytes"),
        ("bigger.yaml", huge_intent(198 << 20), "over the limit of 8388608 bytes"),
    ];
    for (file, bytes, want) in cases {
        let t = Instant::now();
        xdst_core::files::write_atomic(&s.intent.path().join(file), &bytes)?;
        // The file alone is held out (issue 35); everything else keeps serving.
        let error = wait_for_held(admin, file, want).await?;
        let took = t.elapsed();
        let message = error["message"].as_str().unwrap_or_default();
        ensure!(message.contains(file) && message.contains(want), "{file}: {error:#}");
        s.still_serving(&served, file).await?;
        let grew = s.xdst.peak_rss()?.saturating_sub(rss_before);
        ensure!(grew < 256 << 20, "{file}: xdst's peak memory grew by {} MiB", grew >> 20);
        ensure!(took < Duration::from_secs(10), "{file}: refused only after {took:?}");
        std::fs::remove_file(s.intent.path().join(file))?;
        eprintln!("[containment] {file}: refused in {took:?}; peak RSS +{} MiB", grew >> 20);
    }
    let status = plugins_status(admin).await?;
    ensure!(status["generations_ok"].as_u64().unwrap_or(0) > 0, "{status:#}");
    Ok(())
}

/// A valid intent file of about `bytes`: Services, one after another.
fn huge_intent(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 200);
    let mut i = 0;
    while out.len() < bytes {
        out.extend_from_slice(
            format!(
                "---\nkind: Service\nmetadata: {{name: s{i}}}\nspec:\n  endpoints: [{{address: 127.0.0.1, port: 9}}]\n"
            )
            .as_bytes(),
        );
        i += 1;
    }
    out
}

/// Must-show 1, from a resources file: a cluster nested 3,000 and 100,000 levels deep is
/// refused with the field path; xdst stays up and Envoy keeps its versions and traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deeply_nested_resources_file_is_refused_with_its_field_path() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let up = Upstream::start("a").await?;
    let port = free_port()?;
    let dir = xdst_tests::fixtures::basic_dir(port, up.addr.port());
    let mut xdst = Process::start(dir.path(), "127.0.0.1:0", &["--debounce", "20ms"]).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "deep-files")).await?;
    let proxy: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + WAIT;
    while !matches!(http_get(proxy, "/").await, Ok((200, _))) {
        ensure!(Instant::now() < deadline, "Envoy did not proxy within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let served = held(xdst.admin_addr, &envoy).await?;
    for levels in [3_000, 100_000] {
        let mut text = String::from(
            r#"{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "deep", "transport_socket": {"name": "tls", "typed_config": "#,
        );
        for _ in 0..levels {
            text.push_str(r#"{"@type": "type.googleapis.com/google.protobuf.Any", "value": "#);
        }
        text.push_str(&format!(
            r#"{{"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}{}}}}}"#,
            "}".repeat(levels)
        ));
        let refused_before = source_status(xdst.admin_addr).await?["loads_refused"].as_u64().unwrap_or(0);
        xdst_core::files::write_atomic(&dir.path().join("deep.json"), &text)?;
        let deadline = Instant::now() + WAIT;
        let error = loop {
            let st = source_status(xdst.admin_addr).await?;
            if st["loads_refused"].as_u64().unwrap_or(0) > refused_before {
                break st["last_error"].as_str().unwrap_or_default().to_owned();
            }
            if Instant::now() > deadline {
                bail!("deep.json ({levels} levels) was not refused: {st:#}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        ensure!(
            error.contains("deep.json") && error.contains("field transport_socket.typed_config.value.value"),
            "{levels} levels: {error}"
        );
        // Issue 34: the refusal was counted; a push from that load would have moved the target.
        ensure!(xdst.alive(), "xdst exited");
        ensure_unchanged(xdst.admin_addr, &envoy, &served, &format!("{levels} levels")).await?;
        let (status, _) = http_get(proxy, "/").await?;
        ensure!(status == 200, "{levels} levels: traffic broke: {status}");
        eprintln!("[containment] resources file nested {levels} levels: {}", &error[..error.len().min(200)]);
    }
    Ok(())
}

async fn source_status(admin: SocketAddr) -> anyhow::Result<serde_json::Value> {
    let (code, body) = http_get(admin, "/debug/resources").await?;
    ensure!(code == 200, "/debug/resources: {code}");
    Ok(serde_json::from_str::<serde_json::Value>(&body)?["source"].clone())
}

/// Must-show 5: 50 concurrent intent API writes interleaved with file edits. Every write is
/// answered 200, and what is served in the end is exactly the final intent: every document,
/// from the API and from files, with the endpoint it was last given; nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_api_writes_and_file_edits_lose_nothing() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let s = Setup::start(&[]).await?;
    let admin = s.xdst.admin_addr;
    let auth = format!("Bearer {TOKEN}");
    let service = |name: &str, port: u16| {
        format!(
            "kind: Service\nmetadata: {{name: {name}}}\nspec:\n  endpoints: [{{address: 127.0.0.1, port: {port}}}]\n"
        )
    };
    let writes = (0..50u16).map(|i| {
        let (auth, doc) = (auth.clone(), service(&format!("api-{i}"), 1000 + i));
        async move {
            let path = format!("/intent/Service/api-{i}");
            http_with(admin, "PUT", &path, &[("Authorization", auth.as_str())], &doc).await
        }
    });
    let dir = s.intent.path().to_owned();
    let edits = async move {
        for round in 0..3u16 {
            for j in 0..10u16 {
                xdst_core::files::write_atomic(
                    &dir.join(format!("f{j}.yaml")),
                    service(&format!("file-{j}"), 2000 + round * 100 + j),
                )?;
                tokio::time::sleep(Duration::from_millis(7)).await;
            }
        }
        anyhow::Ok(())
    };
    let (answers, edited) = tokio::join!(futures::future::join_all(writes), edits);
    edited?;
    for (i, (status, body)) in answers.iter().enumerate() {
        ensure!(*status == 200 && body.contains(r#""result":"ok""#), "write {i}: {status} {body}");
    }
    let mut want: std::collections::BTreeMap<String, u64> = (0..50).map(|i| (format!("api-{i}"), 1000 + i)).collect();
    want.extend((0..10).map(|j| (format!("file-{j}"), 2200 + j)));
    want.insert("a".into(), u64::from(s.up.addr.port()));
    let deadline = Instant::now() + WAIT;
    loop {
        let served = served_endpoints(admin).await?;
        if served == want {
            break;
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = want.iter().filter(|(k, v)| served.get(*k) != Some(v)).collect();
            let extra: Vec<_> = served.iter().filter(|(k, _)| !want.contains_key(*k)).collect();
            bail!("served differs from the final intent: missing or stale {missing:?}, extra {extra:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The default group's load assignments: cluster name -> the port of its first endpoint.
async fn served_endpoints(admin: SocketAddr) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
    let (code, body) = http_get(admin, "/debug/resources?bodies=true").await?;
    ensure!(code == 200, "/debug/resources: {code}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    let mut out = std::collections::BTreeMap::new();
    for r in v["default"]["eds"]["resources"].as_array().into_iter().flatten() {
        let port = &r["body"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]["port_value"];
        out.insert(r["name"].as_str().unwrap_or_default().to_owned(), port.as_u64().unwrap_or(0));
    }
    Ok(out)
}

/// Must-show 3: 10,000 ADS streams, each with its own made-up type URL, node cluster and user
/// agent, each sending a stale nonce. `/metrics` stays under 1 MiB and holds none of those
/// strings, and once the streams close xdst's resident memory comes back to within 10% of
/// what it was after a warm-up round of the same streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_chosen_strings_grow_neither_metrics_nor_memory() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let dir = xdst_tests::fixtures::basic_dir(free_port()?, 9);
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &[]).await?;
    let admin = xdst.admin_addr;
    let channels: Vec<Channel> =
        futures::future::join_all((0..8).map(|_| xdst_tests::xds::channel(xdst.xds_addr))).await;

    // The warm-up round sizes xdst's pools (allocator, runtime, gRPC) as the real round will.
    let warm_up = 1_000;
    hostile_streams(&channels, admin, 0..warm_up).await?;
    wait_for_no_nodes(admin).await?;
    let baseline = xdst.rss()?;

    let started = Instant::now();
    hostile_streams(&channels, admin, warm_up..warm_up + 10_000).await?;
    let (_, metrics) = http_get(admin, "/metrics").await?;
    ensure!(metrics.len() < 1 << 20, "/metrics is {} bytes after 10,000 hostile streams", metrics.len());
    ensure!(!metrics.contains("chosen-by-client"), "a client's string reached /metrics");
    wait_for_no_nodes(admin).await?;

    // Memory is handed back to the system lazily: give it a few seconds.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut rss = xdst.rss()?;
    while rss > baseline + baseline / 10 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        rss = xdst.rss()?;
    }
    eprintln!(
        "[containment] 10,000 hostile streams in {:?}: /metrics {} B; RSS {} MiB after, baseline {} MiB",
        started.elapsed(),
        metrics.len(),
        rss >> 20,
        baseline >> 20
    );
    ensure!(
        rss <= baseline + baseline / 10,
        "RSS {} KiB did not return to within 10% of {} KiB",
        rss >> 10,
        baseline >> 10
    );
    Ok(())
}

/// Streams `ids`, 500 at a time: each subscribes to a made-up type as a node with a made-up
/// cluster and user agent, then sends a stale nonce, and closes once xdst has counted it.
async fn hostile_streams(channels: &[Channel], admin: SocketAddr, ids: std::ops::Range<usize>) -> anyhow::Result<()> {
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;

    let ids: Vec<usize> = ids.collect();
    for batch in ids.chunks(500) {
        let stale_before = stale_requests(admin).await?;
        let mut open = Vec::new();
        for &i in batch {
            // Distinct per stream, and long: 1,000 characters of type URL.
            let chosen = format!("chosen-by-client-{i}-{}", "x".repeat(950));
            let type_url = format!("type.googleapis.com/{chosen}");
            let node = Node {
                id: format!("hostile-{i}"),
                cluster: chosen.clone(),
                user_agent_name: chosen.clone(),
                ..Default::default()
            };
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            tx.send(DiscoveryRequest { type_url: type_url.clone(), node: Some(node), ..Default::default() }).await?;
            tx.send(DiscoveryRequest {
                type_url,
                version_info: "v0".into(),
                response_nonce: format!("stale-{i}"),
                ..Default::default()
            })
            .await?;
            let mut client = AggregatedDiscoveryServiceClient::new(channels[i % channels.len()].clone());
            let call = tokio::spawn(async move {
                client.stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx)).await
            });
            open.push((tx, call));
        }
        // Positive signal: every stale nonce of the batch was seen.
        let deadline = Instant::now() + WAIT;
        while stale_requests(admin).await? < stale_before + batch.len() as u64 {
            ensure!(Instant::now() < deadline, "xdst did not see the batch's stale nonces within {WAIT:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for (tx, call) in open {
            drop(tx);
            if let Ok(Ok(resp)) = call.await {
                drop(resp);
            }
        }
    }
    Ok(())
}

/// `xdst_stale_requests_total` summed over its labels.
async fn stale_requests(admin: SocketAddr) -> anyhow::Result<u64> {
    let (status, body) = http_get(admin, "/metrics").await?;
    ensure!(status == 200, "/metrics: {status}");
    Ok(body
        .lines()
        .filter(|l| l.starts_with("xdst_stale_requests_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

/// Waits until `/debug/nodes` lists no node: every stream is gone.
async fn wait_for_no_nodes(admin: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, body) = http_get(admin, "/debug/nodes").await?;
        let nodes: serde_json::Value = serde_json::from_str(&body)?;
        let left = nodes.as_array().map_or(0, Vec::len);
        if left == 0 {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "{left} nodes still listed after {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `kind: KIND` named `nap`.
fn nap(kind: &str) -> String {
    format!("kind: {kind}\nmetadata: {{name: nap}}\nspec: {{}}\n")
}

/// A short deadline, so that the tests wait for it and not for the default 2 s.
const SLEEPER_SETTINGS: &str = "limits: {deadlineMs: 500}\n";

/// A sleeper of issue 33, item 1: (what, plugin name, kind, a version that translates at once,
/// a version that sleeps for ever).
type Sleeper = (&'static str, &'static str, &'static str, Vec<u8>, Vec<u8>);

/// The sleepers: a core module and a component.
fn sleepers() -> anyhow::Result<Vec<Sleeper>> {
    Ok(vec![
        (
            "WASI p1 poll_oneoff",
            "sleeper-p1",
            "SleeperP1",
            plugins::waiter_core("sleeper-p1", "SleeperP1", "")?,
            plugins::waiter_core("sleeper-p1", "SleeperP1", "(call $sleep_forever)")?,
        ),
        (
            "a component through wasi:io/poll",
            "sleeper-p2",
            "SleeperP2",
            plugins::waiter_component("sleeper-p2", "SleeperP2", "")?,
            plugins::waiter_component("sleeper-p2", "SleeperP2", "(call $block_forever)")?,
        ),
    ])
}

/// Issue 33, item 1: a plugin that sleeps on a host clock (WASI p1 `poll_oneoff` for
/// `u64::MAX` ns; a component blocked on a `wasi:clocks` pollable through `wasi:io/poll`)
/// fails its call at its deadline: the new version is refused naming the plugin and the
/// deadline, counted, and logged with the plugin's name; the previous version keeps serving,
/// and file edits and API writes of other documents keep applying and reach Envoy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_sleeps_is_stopped_at_its_deadline_and_edits_keep_applying() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let mut s = Setup::start(&[]).await?;
    let admin = s.xdst.admin_addr;
    // The intent's documents: web.yaml's two, then per sleeper its document and two services.
    let mut documents = 2;
    for (what, name, kind, calm, sleepy) in sleepers()? {
        documents += 1;
        let file = format!("{name}.wasm");
        // The calm version serves, with a document of its kind.
        let ok = generations(admin, "generations_ok").await?;
        plugins::install_bytes(s.plugins.path(), &file, &calm, Some(SLEEPER_SETTINGS))?;
        std::fs::write(s.intent.path().join(format!("{name}.yaml")), nap(kind))?;
        let deadline = Instant::now() + WAIT;
        loop {
            let status = wait_for_ok(admin, ok).await?;
            if status["plugins"].as_array().is_some_and(|ps| ps.iter().any(|p| p["name"] == name))
                && status["last_generation"]["documents"].as_u64() == Some(documents)
            {
                break;
            }
            ensure!(Instant::now() < deadline, "{what}: the calm version never served: {status:#}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // The sleeping version: refused at the deadline, naming the plugin.
        let started = Instant::now();
        plugins::install_bytes(s.plugins.path(), &file, &sleepy, Some(SLEEPER_SETTINGS))?;
        let refused = wait_for_refusal(admin, &file, "stopped after its 500 ms deadline").await?;
        let took = started.elapsed();
        let reason = refused["reason"].as_str().unwrap_or_default();
        ensure!(reason.contains(&format!("plugin \"{name}\"")), "{what}: {refused:#}");
        ensure!(took >= Duration::from_millis(500), "{what}: refused after {took:?}, before its deadline");

        // Other documents' edits keep applying: a file edit and an API write reach Envoy.
        let service = |n: &str, port: u16| {
            format!(
                "kind: Service\nmetadata: {{name: {n}}}\nspec:\n  endpoints: [{{address: 127.0.0.1, port: {port}}}]\n"
            )
        };
        let edited = format!("edited-{}", name.to_lowercase());
        let written = format!("written-{}", name.to_lowercase());
        std::fs::write(s.intent.path().join(format!("{edited}.yaml")), service(&edited, 9))?;
        let (status, body) = http_with(
            admin,
            "PUT",
            &format!("/intent/Service/{written}"),
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            &service(&written, 9),
        )
        .await;
        ensure!(status == 200, "{what}: the API write answered {status}: {body}");
        documents += 2;
        let deadline = Instant::now() + WAIT;
        loop {
            let stats = s.envoy.stats().await?.all_text();
            let has = |c: &str| stats.iter().any(|(k, _)| k.starts_with(&format!("cluster.{c}.")));
            if has(&edited) && has(&written) {
                break;
            }
            ensure!(Instant::now() < deadline, "{what}: the edit and the API write never reached Envoy");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (_, metrics) = http_get(admin, "/metrics").await?;
        ensure!(
            metrics.lines().any(|l| l.starts_with(&format!("xdst_plugin_refusals_total{{file=\"{file}\"}} "))),
            "{what}: the refusal is not counted"
        );
        let log = std::fs::read_to_string(&s.log)?;
        ensure!(
            log.lines().any(|l| l.contains(name) && l.contains("waiting on the host at its deadline")),
            "{what}: no log line names the plugin stopped at its deadline:\n{}",
            tail(&s.log)
        );
        eprintln!("[containment] {what}: stopped and refused after {took:?}; edits and API writes kept applying");
    }
    ensure!(s.xdst.alive(), "xdst exited");
    Ok(())
}

/// The refusal of plugin `file` whose reason contains `want`.
async fn wait_for_refusal(admin: SocketAddr, file: &str, want: &str) -> anyhow::Result<serde_json::Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let s = plugins_status(admin).await?;
        let found = s["refused"].as_array().and_then(|rs| {
            rs.iter()
                .find(|r| {
                    r["file"].as_str().is_some_and(|f| f.ends_with(file))
                        && r["reason"].as_str().is_some_and(|m| m.contains(want))
                })
                .cloned()
        });
        if let Some(r) = found {
            return Ok(r);
        }
        ensure!(Instant::now() < deadline, "{file} was not refused with {want:?} within {WAIT:?}: {s:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 33, item 1: with a sleeping plugin and its document present at start, `serve` no
/// longer waits for ever in its first generation: the call fails at its deadline, the error
/// names the plugin and its deadline, and `serve` opens its ports all the same, not ready
/// (`/readyz` 503) until a good generation. Removing the sleeping document is then served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_opens_its_ports_with_a_sleeping_plugin_present_at_start() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    for (what, name, kind, _, sleepy) in sleepers()? {
        let intent = tempfile::Builder::new().prefix("xdst-intent-").tempdir()?;
        let plugin_dir = tempfile::Builder::new().prefix("xdst-plugins-").tempdir()?;
        std::fs::write(intent.path().join("nap.yaml"), nap(kind))?;
        plugins::install_bytes(plugin_dir.path(), &format!("{name}.wasm"), &sleepy, Some(SLEEPER_SETTINGS))?;
        let started = Instant::now();
        let xdst = Process::start_intent(intent.path(), plugin_dir.path(), &["--debounce", "20ms"]).await?;
        let (status, body) = http_get(xdst.admin_addr, "/readyz").await?;
        ensure!(status == 503 && body.contains("\"ready\":false"), "{what}: /readyz {status} {body}");
        let s = plugins_status(xdst.admin_addr).await?;
        let e = s["last_error"]["message"].as_str().unwrap_or_default();
        ensure!(
            e.contains(&format!("plugin \"{name}\"")) && e.contains("stopped after its 500 ms deadline"),
            "{what}: {s}"
        );
        eprintln!("[containment] {what}: serve opened its ports after {:?}", started.elapsed());
        // The fix applies: without the sleeping document the generation is good.
        let ok = generations(xdst.admin_addr, "generations_ok").await?;
        std::fs::remove_file(intent.path().join("nap.yaml"))?;
        wait_for_ok(xdst.admin_addr, ok).await?;
        let (status, body) = http_get(xdst.admin_addr, "/readyz").await?;
        ensure!(status == 200, "{what}: /readyz after the fix: {status} {body}");
    }
    Ok(())
}

/// Issue 33, item 2: a plugin calling WASI's `sock_accept` a million times (which wasmtime-wasi
/// logged once per call, naming no plugin) translates; xdst's log stays small, names the
/// plugin, and the calls not logged are counted as dropped log lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_looping_on_an_unimplemented_wasi_call_keeps_the_log_small() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let intent = tempfile::Builder::new().prefix("xdst-intent-").tempdir()?;
    let plugin_dir = tempfile::Builder::new().prefix("xdst-plugins-").tempdir()?;
    let log = intent.path().join(".xdst.log");
    std::fs::write(intent.path().join("sockets.yaml"), nap("Sockets"))?;
    let looper = plugins::waiter_core("sockets", "Sockets", "(call $sock_accept_loop)")?;
    plugins::install_bytes(plugin_dir.path(), "sockets.wasm", &looper, None)?;
    let args: Vec<std::ffi::OsString> =
        vec!["--intent".into(), intent.path().into(), "--plugins".into(), plugin_dir.path().into()];
    let options = Options { env: vec![], log: Some(log.clone()) };
    let xdst = Process::start_with_options("127.0.0.1:0", &args, &options).await?;
    let s = plugins_status(xdst.admin_addr).await?;
    ensure!(s["last_generation"]["ok"] == true, "the generation failed: {s:#}");
    let text = std::fs::read_to_string(&log)?;
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("sock_accept")).collect();
    ensure!(text.len() < SMALL, "the log grew to {} bytes", text.len());
    ensure!(
        !lines.is_empty() && lines.len() <= 3 && lines.iter().all(|l| l.contains("sockets")),
        "sock_accept lines: {lines:#?}"
    );
    let (_, metrics) = http_get(xdst.admin_addr, "/metrics").await?;
    let dropped = metrics
        .lines()
        .find(|l| l.starts_with("xdst_plugin_output_dropped_total{what=\"log_lines\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    ensure!(dropped >= 999_999.0, "dropped log lines counted: {dropped}");
    eprintln!("[containment] a million sock_accept calls: log {} bytes, {dropped} lines dropped", text.len());
    Ok(())
}

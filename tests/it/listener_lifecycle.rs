//! Issue 16, must-show 1: the two holes make-before-break had, closed, through a real Envoy
//! under at least 500 requests/s, over SotW and Delta ADS (ORDER-1, ORDER-2).
//!
//! - **Re-added listener.** The `HttpGateway` `web2` is removed (with its Service) and added
//!   back with the same name and port, 20 times, pointing at a different Service each time.
//!   Envoy drains the removed listener (for its `--drain-time-s`), which keeps the route
//!   configuration of the same name subscribed in its old form; a re-added listener that
//!   reused it would activate at once with routes to a Service that is gone (503, or 404) or
//!   to another one (a misrouted 200). Every answer is checked against what the intent
//!   allowed while the request was out: before the add, a refused connection; after it,
//!   only the new Service's upstream.
//! - **Draining listener.** Clients hold kept-alive connections to `web2` when it is
//!   removed. Envoy keeps serving them with the old routes while it drains, so the old
//!   Service's cluster must stay: no 503 from a missing cluster.
//!
//! Each upstream answers with its name, and consecutive Services use different upstreams,
//! so a stale route shows up as an answer from the wrong one.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use xdst_tests::admin::{node_plan, wait_in_sync};
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy};
use xdst_tests::plugins;
use xdst_tests::server::Process;
use xdst_tests::traffic::{Allowed, Expect, KeepAliveTraffic, Traffic};
use xdst_tests::upstream::{Upstream, http_get};
use xdst_tests::wait::{Seen, until};

/// Requests per second to the gateway that comes and goes.
const RPS: u32 = 500;
const READDS: usize = 20;
const UPSTREAMS: usize = 4;
const WAIT: Duration = Duration::from_secs(30);

/// One Envoy at a time: they share two cores with xdst and the traffic.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The intent: a gateway `web` that stays (on Service `base`), and `web2` on Service
/// `s{i}` (upstream `i % UPSTREAMS`) when `web2` is `Some(i)`.
fn intent_text(ups: &[Upstream], ports: (u16, u16), web2: Option<usize>) -> String {
    let service = |name: &str, up: &Upstream| {
        format!(
            "kind: Service\nmetadata: {{name: {name}}}\nspec:\n  endpoints:\n  - {{address: 127.0.0.1, port: {}}}\n",
            up.addr.port()
        )
    };
    let gateway = |name: &str, port: u16, service: &str| {
        format!(
            "kind: HttpGateway\nmetadata: {{name: {name}}}\nspec:\n  address: 127.0.0.1\n  port: {port}\n  hosts:\n  - hostnames: [\"*\"]\n    routes:\n    - name: all\n      match: {{pathPrefix: /}}\n      backends: [{{service: {service}}}]\n"
        )
    };
    let mut docs = vec![service("base", &ups[0]), gateway("web", ports.0, "base")];
    if let Some(i) = web2 {
        let name = format!("s{i}");
        docs.push(service(&name, &ups[i % UPSTREAMS]));
        docs.push(gateway("web2", ports.1, &name));
    }
    docs.join("---\n")
}

fn write_intent(dir: &Path, text: &str) -> anyhow::Result<()> {
    xdst_core::files::write_atomic(&dir.join("intent.yaml"), text)?;
    Ok(())
}

struct Run {
    node: String,
    xdst: Process,
    envoy: Envoy,
    intent: tempfile::TempDir,
    _plugins: tempfile::TempDir,
    ups: Vec<Upstream>,
    ports: (u16, u16),
    version: String,
}

impl Run {
    async fn start(api: ApiType, web2: Option<usize>, extra: &[&str]) -> anyhow::Result<Run> {
        let mut ups = Vec::new();
        for i in 0..UPSTREAMS {
            ups.push(Upstream::start(&format!("u{i}")).await?);
        }
        let intent = tempfile::Builder::new().prefix("xdst-lifecycle-intent-").tempdir()?;
        let plugin_dir = tempfile::Builder::new().prefix("xdst-lifecycle-plugins-").tempdir()?;
        plugins::install(plugin_dir.path(), &plugins::reference()?, "reference.wasm", None)?;
        let ports = (xdst_tests::free_port()?, xdst_tests::free_port()?);
        write_intent(intent.path(), &intent_text(&ups, ports, web2))?;
        let mut args = vec!["--debounce", "10ms"];
        args.extend_from_slice(extra);
        let xdst = Process::start_intent(intent.path(), plugin_dir.path(), &args).await?;
        let node = format!("lifecycle-{}", if api == ApiType::Sotw { "sotw" } else { "delta" });
        let envoy = Envoy::start(&Bootstrap::new(api, xdst.xds_addr, &node)).await?;
        let mut run = Run { node, xdst, envoy, intent, _plugins: plugin_dir, ups, ports, version: String::new() };
        run.version = wait_in_sync(run.xdst.admin_addr, &run.node, "").await?;
        let expected = web2.map(|i| run.ups[i % UPSTREAMS].name.clone());
        if let Some(body) = expected {
            run.wait_for(run.ports.1, &body).await?;
        }
        Ok(run)
    }

    /// Writes the intent with `web2` as given, and waits until Envoy acknowledged all of it.
    async fn set(&mut self, web2: Option<usize>) -> anyhow::Result<()> {
        write_intent(self.intent.path(), &intent_text(&self.ups, self.ports, web2))?;
        self.version = wait_in_sync(self.xdst.admin_addr, &self.node, &self.version).await?;
        Ok(())
    }

    /// Waits until a connection to `port` is refused: Envoy's worker stopped the listener.
    async fn wait_refused(&self, port: u16) -> anyhow::Result<()> {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        until("the removed listener refusing connections", WAIT, async || {
            let refused = tokio::net::TcpStream::connect(addr).await.is_err();
            Ok(Seen::holds(refused, if refused { "refused" } else { "still accepting" }))
        })
        .await?;
        Ok(())
    }

    /// Waits until `port` answers with `body`.
    async fn wait_for(&self, port: u16, body: &str) -> anyhow::Result<()> {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok((200, b)) = http_get(addr, "/").await
                && b == body
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{addr} never answered {body:?}:\n{}", self.envoy.log_tail(30));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The re-added listener: 20 removals and re-adds under checked traffic.
async fn readd(api: ApiType) -> anyhow::Result<()> {
    let _one = SERIAL.lock().await;
    xdst_tests::init_logging();
    let mut run = Run::start(api, Some(0), &[]).await?;
    let web2: SocketAddr = ([127, 0, 0, 1], run.ports.1).into();
    let body = |i: usize| format!("u{}", i % UPSTREAMS);
    let expect = Expect::new(Allowed::answers(&[&body(0)]));
    let traffic = Traffic::start_checked(web2, "/", RPS, expect.clone());
    let started = Instant::now();
    // Traffic is answered before the first removal (issue 34: a count, not a pause).
    until("the first answers through web2", WAIT, async || {
        let ok = traffic.report().ok;
        Ok(Seen::holds(ok >= 20, format!("{ok} answered")))
    })
    .await?;
    for i in 1..=READDS {
        // Removed: the old Service's answers until Envoy has it, then refusals.
        expect.set(Allowed::answers(&[&body(i - 1)]).or_refused());
        run.set(None).await?;
        // Envoy acknowledges the removal on its main thread and stops the listener on its
        // worker a moment later, so the old Service may answer until a connection is refused.
        run.wait_refused(run.ports.1).await?;
        expect.set(Allowed::default().or_refused());
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Back, on Service s{i}: refusals until the listener is up, then only s{i}'s upstream.
        expect.set(Allowed::answers(&[&body(i)]).or_refused());
        run.set(Some(i)).await?;
        run.wait_for(run.ports.1, &body(i)).await?;
        expect.set(Allowed::answers(&[&body(i)]));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let report = traffic.stop().await;
    let rate = report.sent as f64 / started.elapsed().as_secs_f64();
    let plan = node_plan(run.xdst.admin_addr, &run.node).await?;
    eprintln!(
        "[{api:?}] re-added listener x{READDS}: {rate:.0} requests/s, {} sent, {} answered ({:?}), {} refused while \
         allowed, {} failed, {} unexpected: {:?}; plan: {} convergences, {} grace expiries",
        report.sent,
        report.ok,
        report.by_body,
        report.not_listening_yet,
        report.failed(),
        report.unexpected,
        report.first_failures,
        plan["convergences"],
        plan["grace_expiries"],
    );
    ensure!(rate >= RPS as f64 * 0.9, "the load generator fell behind: {rate:.0} requests/s");
    ensure!(report.ok > report.sent / 2, "too few answers to tell anything: {report:?}");
    ensure!(
        report.failed() == 0 && report.unexpected == 0,
        "{api:?}: {} failed and {} misrouted or refused of {} requests: {:?}\n{}",
        report.failed(),
        report.unexpected,
        report.sent,
        report.first_failures,
        run.envoy.log_tail(20)
    );
    ensure!(plan["grace_expiries"] == 0, "no step should have waited out its grace period: {plan:#}");
    run.envoy.kill().await?;
    run.xdst.kill().await?;
    Ok(())
}

/// The draining listener: kept-alive connections to a gateway that is removed.
/// Returns what the kept-alive connections saw; with `unordered`, does not judge it.
async fn drain(api: ApiType, unordered: bool) -> anyhow::Result<xdst_tests::traffic::Report> {
    let _one = SERIAL.lock().await;
    xdst_tests::init_logging();
    let extra: &[&str] = if unordered { &["--unsafe-unordered-push"] } else { &[] };
    let mut run = Run::start(api, Some(1), extra).await?;
    let web2: SocketAddr = ([127, 0, 0, 1], run.ports.1).into();
    let traffic = KeepAliveTraffic::start(web2, "/", 8, RPS).await?;
    let started = Instant::now();
    until("kept-alive traffic answered before the removal", WAIT, async || {
        let r = traffic.report();
        Ok(Seen::holds(r.ok >= 50 || r.failed() > 0, format!("{r:?}")))
    })
    .await?;
    let before = traffic.report();
    ensure!(before.ok > 0 && before.failed() == 0, "kept-alive traffic before the removal: {before:?}");
    run.set(None).await?;
    let removed = traffic.report();
    // Envoy drains the listener: its open connections keep being served, with the old
    // routes, to the old Service.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = traffic.stop().await;
    let during = report.ok - removed.ok;
    let rate = report.sent as f64 / started.elapsed().as_secs_f64();
    let plan = node_plan(run.xdst.admin_addr, &run.node).await?;
    eprintln!(
        "[{api:?}] draining listener: {rate:.0} requests/s on 8 kept-alive connections, {} sent, {} answered ({} after \
         the removal was acknowledged), {} connections closed by Envoy, {} failed: {:?}; plan step {}",
        report.sent,
        report.ok,
        during,
        report.closed,
        report.failed(),
        report.first_failures,
        plan["step"],
    );
    ensure!(during + report.failed() > 0, "nothing was answered while the listener drained: {report:?}");
    if unordered {
        run.envoy.kill().await?;
        run.xdst.kill().await?;
        return Ok(report);
    }
    ensure!(
        report.failed() == 0,
        "{api:?}: {} of {} requests on draining connections failed: {:?}\n{}",
        report.failed(),
        report.sent,
        report.first_failures,
        run.envoy.log_tail(20)
    );
    ensure!(report.by_body.keys().all(|b| b == "u1"), "answers from the old Service only: {:?}", report.by_body);
    run.envoy.kill().await?;
    run.xdst.kill().await?;
    Ok(report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readded_listener_never_serves_stale_routes_sotw() -> anyhow::Result<()> {
    readd(ApiType::Sotw).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readded_listener_never_serves_stale_routes_delta() -> anyhow::Result<()> {
    readd(ApiType::Delta).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_listener_keeps_its_clusters_sotw() -> anyhow::Result<()> {
    drain(ApiType::Sotw, false).await.map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_listener_keeps_its_clusters_delta() -> anyhow::Result<()> {
    drain(ApiType::Delta, false).await.map(drop)
}

/// The check can fail: pushed unordered, the old Service's cluster goes with the gateway,
/// and the draining connections get 503s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unordered_push_fails_requests_on_a_draining_listener() -> anyhow::Result<()> {
    let report = drain(ApiType::Sotw, true).await?;
    ensure!(report.non_2xx > 0, "expected 503s without make-before-break: {report:?}");
    Ok(())
}

//! Issue 50, item 5 (design 021): an HTTP Gateway port with many exact hostnames routes each
//! request by its host over scoped RDS, a RouteConfiguration per hostname. Through a real Envoy
//! (SotW and Delta ADS) with the gateway-api plugin set to scope a port from two hostnames:
//!
//! - two ports of one Gateway serve the same hostname from different backends, each keeping to
//!   its own scopes (Envoy gives every scoped listener every scope; the key's second part is the
//!   port's scope set, which the listener writes into `x-xdst-route-scope` before routing);
//! - a hostile client that sends `x-xdst-route-scope` naming the other port's set reaches
//!   nothing of that port, and backends never see the header;
//! - a route added to one hostname re-sends that hostname's RouteConfiguration only: Envoy's
//!   RDS stats show the other hostname's configuration untouched;
//! - a new hostname gets its scope and serves; a port that drops below the threshold goes back
//!   to one RouteConfiguration and returns to scopes, with 300 requests a second to a hostname of
//!   it through every change and none failing or misrouted;
//! - Envoy rejects nothing (no LDS, RDS or scoped-RDS update rejected);
//! - a hostile team cannot change the form of a port whose Gateway is pinned to routing by
//!   host (`xdst.dev/route-by-host: "true"`): its routes without an exact hostname are not
//!   accepted (the status says why) and Envoy's Listener is never touched.

use std::net::SocketAddr;

use anyhow::{Context as _, ensure};
use xdst_tests::echo::Echo;
use xdst_tests::envoy::{ApiType, Bootstrap, Envoy, Stats};
use xdst_tests::server::Process;
use xdst_tests::teams::{Teams, WAIT, admin_json, team};
use xdst_tests::traffic::{Allowed, Expect, Traffic};
use xdst_tests::upstream::http_request;
use xdst_tests::wait::{Seen, until};

/// The header a scoped listener writes (the SDK's `SCOPE_HEADER`).
const SCOPE_HEADER: &str = "x-xdst-route-scope";

/// A Gateway `infra/gw` with two HTTP listeners, `http` on 80 and `alt` on 81, no hostnames.
const GATEWAY: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: infra}\n\
spec:\n  gatewayClassName: xdst\n  listeners:\n  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: \
{from: All}}}\n  - {name: alt, port: 81, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}\n";

/// An HTTPRoute `ns/name` on the listener `section` for `host`, path prefix `path`, to the
/// Service `svc` of namespace `to`.
fn host_route(name: &str, ns: &str, section: &str, host: &str, path: &str, to: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  parentRefs: [{{name: gw, namespace: infra, sectionName: {section}}}]\n  hostnames: [{host}]\n  \
         rules:\n  - matches: [{{path: {{value: {path}}}}}]\n    backendRefs: [{{name: svc, namespace: {to}, port: 80}}]\n"
    )
}

/// `GET path` for `host` with extra headers: status and body.
async fn get(addr: SocketAddr, host: &str, path: &str, extra: &[(&str, &str)]) -> anyhow::Result<(u16, String)> {
    let mut headers = vec![("host", host)];
    headers.extend_from_slice(extra);
    let r = http_request(addr, path, &headers).await.with_context(|| format!("GET http://{host}{path}"))?;
    Ok((r.status, r.body))
}

/// Waits until `GET host path` on `addr` answers `status`, with a body starting with `body`.
async fn answers(addr: SocketAddr, host: &str, path: &str, status: u16, body: &str) -> anyhow::Result<()> {
    until(format!("http://{host}{path} on {addr} to answer {status} {body}"), WAIT, async || {
        Ok(match get(addr, host, path, &[]).await {
            Ok((s, b)) if s == status && b.starts_with(body) => Seen::Done(()),
            other => Seen::Not(format!("{other:?}")),
        })
    })
    .await
}

/// The stats of Envoy's RDS subscription to RouteConfiguration `name` (`...rds.<name>.<stat>`).
fn rds(stats: &Stats, name: &str, stat: &str) -> u64 {
    let wanted = format!(".rds.{name}.{stat}");
    let n: u64 = stats.names().filter(|k| k.ends_with(&wanted)).map(|k| stats.count(k)).max().unwrap_or(0);
    n
}

/// No update of Envoy's was rejected: listeners, route configurations, scopes.
fn nothing_rejected(stats: &Stats) -> anyhow::Result<()> {
    let rejected: Vec<String> =
        stats.names().filter(|k| k.ends_with(".update_rejected") && stats.count(k) > 0).map(str::to_owned).collect();
    ensure!(rejected.is_empty(), "Envoy rejected updates: {rejected:?}\n{}", stats.xds_related());
    Ok(())
}

async fn scoped_ports(api: ApiType) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    // The plugin scopes a port from two exact hostnames on (the default is 32).
    let mut settings = t.settings();
    settings["config"]["routeScopesFrom"] = serde_json::json!(2);
    t.install(&settings)?;
    let echo = Echo::start("team-e", "echo-0").await?;
    t.write("infra.yaml", GATEWAY)?;
    t.write("team-a.yaml", &team("team-a", &t.a))?;
    t.write("team-b.yaml", &team("team-b", &t.b))?;
    t.write(
        "team-e.yaml",
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: svc, namespace: team-e}}\nspec:\n  ports: [{{port: 80}}]\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-1\n  namespace: team-e\n  \
             labels: {{kubernetes.io/service-name: svc}}\naddressType: IPv4\nendpoints: [{{addresses: [127.0.0.1]}}]\n\
             ports: [{{port: {}}}]\n",
            echo.addr.port()
        ),
    )?;
    // Port 80: a.example (team-a), e.example (the echo). Port 81: a.example (team-b),
    // b.example (team-b).
    t.write("a80.yaml", &host_route("a80", "team-a", "http", "a.example", "/", "team-a"))?;
    t.write("e80.yaml", &host_route("e80", "team-e", "http", "e.example", "/", "team-e"))?;
    t.write("a81.yaml", &host_route("a81", "team-b", "alt", "a.example", "/", "team-b"))?;
    t.write("b81.yaml", &host_route("b81", "team-b", "alt", "b.example", "/", "team-b"))?;
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &["--debounce", "20ms"]).await?;
    let envoy = Envoy::start(&Bootstrap::new(api, xdst.xds_addr, "edge-1")).await?;
    let (p80, p81) = (t.listener(80), t.listener(81));
    answers(p80, "a.example", "/", 200, "a").await?;
    answers(p81, "a.example", "/", 200, "b").await?;
    answers(p81, "b.example", "/", 200, "b").await?;
    answers(p80, "e.example", "/", 200, "{").await?;
    let stats = envoy.stats().await?;
    ensure!(
        stats.names().any(|k| k.contains("scoped_rds")),
        "Envoy routes by scope on neither port:\n{}",
        stats.xds_related()
    );
    let traffic = Traffic::start_checked_host(p80, "a.example", "/", 300, Expect::new(Allowed::answers(&["a"])));

    // Each port keeps to its own scopes: b.example is port 81's alone, and an unknown host
    // (or the address) has no scope.
    ensure!(get(p80, "b.example", "/", &[]).await?.0 == 404, "b.example answered on port 80");
    ensure!(get(p80, "nowhere.example", "/", &[]).await?.0 == 404, "an unknown host answered on port 80");
    // A client naming port 81's scope set reaches none of port 81's routes from port 80, and
    // gets its own port's routes where its host has them.
    let evil = [(SCOPE_HEADER, "infra/gw/81")];
    let (status, body) = get(p80, "b.example", "/", &evil).await?;
    ensure!(status == 404, "port 80 with {SCOPE_HEADER}: infra/gw/81 reached b.example: {status} {body}");
    let (status, body) = get(p80, "a.example", "/", &evil).await?;
    ensure!((status, body.as_str()) == (200, "a"), "port 80, a.example, with the header: {status} {body}");
    // The echo never sees the header, sent or not.
    for extra in [&[][..], &evil[..]] {
        let (status, body) = get(p80, "e.example", "/", extra).await?;
        ensure!(status == 200, "the echo: {status} {body}");
        ensure!(!body.to_ascii_lowercase().contains(SCOPE_HEADER), "the backend saw {SCOPE_HEADER}: {body}");
    }

    // A route added to a.example re-sends a.example's configuration, not e.example's.
    let before = envoy.stats().await?;
    t.write("a80-two.yaml", &host_route("a80-two", "team-b", "http", "a.example", "/two", "team-b"))?;
    answers(p80, "a.example", "/two", 200, "b").await?;
    let after = envoy.stats().await?;
    let (a, e) = ("infra/gw/80/a.example", "infra/gw/80/e.example");
    ensure!(
        rds(&after, a, "config_reload") > rds(&before, a, "config_reload"),
        "{a} was not reloaded:\n{}",
        after.matching(&[".rds."])
    );
    ensure!(
        rds(&after, e, "config_reload") == rds(&before, e, "config_reload") && rds(&before, e, "config_reload") > 0,
        "{e} was reloaded for a route of a.example:\n{}",
        after.matching(&[".rds."])
    );

    // A new hostname gets its scope; removing its route takes it away.
    t.write("c80.yaml", &host_route("c80", "team-b", "http", "c.example", "/", "team-b"))?;
    answers(p80, "c.example", "/", 200, "b").await?;
    t.remove("c80.yaml")?;
    answers(p80, "c.example", "/", 404, "").await?;

    // Below two hostnames port 80 is one RouteConfiguration again (e.example gone), then scoped
    // again; a.example serves all along.
    t.remove("e80.yaml")?;
    answers(p80, "e.example", "/", 404, "").await?;
    until("port 80 to take one RouteConfiguration", WAIT, async || {
        let stats = envoy.stats().await?;
        Ok(Seen::holds(rds(&stats, "infra/gw/80", "config_reload") > 0, stats.matching(&[".rds."])))
    })
    .await?;
    answers(p80, "a.example", "/two", 200, "b").await?;
    t.write("e80.yaml", &host_route("e80", "team-e", "http", "e.example", "/", "team-e"))?;
    answers(p80, "e.example", "/", 200, "{").await?;
    ensure!(get(p80, "b.example", "/", &evil).await?.0 == 404, "b.example answered on port 80 after the return");
    answers(p81, "a.example", "/", 200, "b").await?;

    let report = traffic.stop().await;
    ensure!(report.failed() == 0 && report.unexpected == 0, "a.example on port 80 through every change: {report:?}");
    ensure!(report.ok > report.sent / 2, "too few answers to tell: {report:?}");
    nothing_rejected(&envoy.stats().await?)?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_ports_over_sotw() -> anyhow::Result<()> {
    scoped_ports(ApiType::Sotw).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_ports_over_delta() -> anyhow::Result<()> {
    scoped_ports(ApiType::Delta).await
}

/// The Gateway of [`GATEWAY`], port 80 only, pinned to routing by host.
const PINNED: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: infra, \
annotations: {xdst.dev/route-by-host: 'true'}}\nspec:\n  gatewayClassName: xdst\n  listeners:\n  - {name: http, port: 80, \
protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}\n";

/// Design 021, "Hostile teams": with the platform's default threshold (32 hostnames), a
/// Gateway pinned to routing by host is scoped from its first hostname, and team-b's routes
/// with no hostname or a wildcard one (each would otherwise turn the port into one
/// RouteConfiguration and renew every connection on it) are not accepted, with a status naming
/// the annotation; Envoy gets no Listener update at all, through team-b's exact route that
/// follows (the positive signal) and after the last route is gone; team-a's hostname answers
/// under 300 requests a second throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_cannot_change_the_form_of_a_port_pinned_to_hosts() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let t = Teams::start().await?;
    t.install(&t.settings())?;
    t.write("infra.yaml", PINNED)?;
    t.write("team-a.yaml", &team("team-a", &t.a))?;
    t.write("team-b.yaml", &team("team-b", &t.b))?;
    t.write("a80.yaml", &host_route("a80", "team-a", "http", "a.example", "/", "team-a"))?;
    let xdst = Process::start_intent(t.intent.path(), t.plugins.path(), &["--debounce", "20ms"]).await?;
    let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, "edge-1")).await?;
    let p80 = t.listener(80);
    answers(p80, "a.example", "/", 200, "a").await?;
    let before = envoy.stats().await?;
    ensure!(before.names().any(|k| k.contains("scoped_rds")), "port 80 is not scoped:\n{}", before.xds_related());
    let traffic = Traffic::start_checked_host(p80, "a.example", "/", 300, Expect::new(Allowed::answers(&["a"])));

    // Team-b's route for every host, and one for a wildcard.
    let any_host = host_route("any", "team-b", "http", "x", "/", "team-b").replace("  hostnames: [x]\n", "");
    t.write("any.yaml", &any_host)?;
    t.write("star.yaml", &host_route("star", "team-b", "http", "'*.example'", "/", "team-b"))?;
    for (route, why) in [("any", "names no hostname"), ("star", "\"*.example\", a wildcard")] {
        until(format!("HTTPRoute team-b/{route} not accepted, saying why"), WAIT, async || {
            let doc = admin_json(xdst.admin_addr, &format!("/intent/HTTPRoute/team-b/{route}")).await?;
            let accepted = &doc["status"]["parents"][0]["conditions"][0];
            let message = accepted["message"].as_str().unwrap_or_default();
            Ok(Seen::holds(
                accepted["status"] == "False"
                    && accepted["reason"] == "UnsupportedValue"
                    && message.contains("xdst.dev/route-by-host")
                    && message.contains(why),
                doc["status"].to_string(),
            ))
        })
        .await?;
    }
    // A later change of team-b's, exact, is served: everything before it has been worked out.
    t.write("b80.yaml", &host_route("b80", "team-b", "http", "b.example", "/", "team-b"))?;
    answers(p80, "b.example", "/", 200, "b").await?;
    ensure!(get(p80, "other.example", "/", &[]).await?.0 == 404, "a host with no exact route answered");
    let report = traffic.stop().await;
    ensure!(report.failed() == 0 && report.unexpected == 0, "a.example through team-b's routes: {report:?}");
    ensure!(report.ok > report.sent / 2, "too few answers to tell: {report:?}");

    // Every route gone: no host answers, and the port still has its form.
    for file in ["a80.yaml", "b80.yaml", "any.yaml", "star.yaml"] {
        t.remove(file)?;
    }
    answers(p80, "a.example", "/", 404, "").await?;
    answers(p80, "b.example", "/", 404, "").await?;
    let after = envoy.stats().await?;
    for stat in ["listener_manager.lds.update_success", "listener_manager.listener_modified"] {
        ensure!(
            after.count(stat) == before.count(stat),
            "{stat} went from {} to {}: the port changed form\n{}",
            before.count(stat),
            after.count(stat),
            after.xds_related()
        );
    }
    nothing_rejected(&after)?;
    envoy.kill().await?;
    xdst.kill().await?;
    Ok(())
}

//! Teams sharing one xdst, as the quarantine tests set them up (issues 35 and 48): the
//! gateway-api plugin, a platform Gateway that takes HTTPRoutes from every namespace, and
//! per team a Service with an EndpointSlice on the team's [`Upstream`] and routes to it.
//! The intent is written as files; the Gateways listen on 127.0.0.1 at [`Teams::port`] for
//! their port 80 (the plugin's `portOffset`), each Gateway port `p` at `Teams::port + p - 80`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use xdst_tests::teams::{Teams, backend, gateway, route, team};
//! let t = Teams::start().await?;
//! t.write("infra.yaml", &gateway("infra", "gw"))?;
//! t.write("team-b.yaml", &format!("{}---\n{}", team("team-b", &t.b), route("b0", "team-b", &backend("team-b"))))?;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde_json::Value;

use crate::upstream::{Upstream, http_get};
use crate::wait::{Seen, until};

/// How long a test waits for something a write caused (stretched by `$XDST_TEST_PATIENCE`).
pub const WAIT: Duration = Duration::from_secs(30);

/// An HTTPRoute `ns/name` on `infra/gw` with one rule (`rule`: its YAML after `- `).
pub fn route(name: &str, ns: &str, rule: &str) -> String {
    route_on("gw", name, ns, rule)
}

/// An HTTPRoute `ns/name` on the Gateway `infra/<gateway>` with one rule.
pub fn route_on(gateway: &str, name: &str, ns: &str, rule: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  \
         parentRefs: [{{name: {gateway}, namespace: infra}}]\n  rules:\n  - {rule}\n"
    )
}

/// A rule's `backendRefs` to the team's Service `svc`, port 80.
pub fn backend(ns: &str) -> String {
    format!("backendRefs: [{{name: svc, namespace: {ns}, port: 80}}]")
}

/// An HTTPRoute `ns/name` matching the path prefix `path`, to the team's Service.
pub fn path_route(name: &str, ns: &str, path: &str) -> String {
    route(name, ns, &format!("matches: [{{path: {{value: {path}}}}}]\n    {}", backend(ns)))
}

/// The team's Service `svc` (port 80) and its EndpointSlice on `upstream`.
pub fn team(ns: &str, upstream: &Upstream) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: svc, namespace: {ns}}}\nspec:\n  ports: [{{port: 80}}]\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-1\n  namespace: {ns}\n  labels: \
         {{kubernetes.io/service-name: svc}}\naddressType: IPv4\nendpoints: [{{addresses: [127.0.0.1]}}]\nports: \
         [{{port: {}}}]\n",
        upstream.addr.port()
    )
}

/// A Gateway `ns/name` with one HTTP listener on port 80 taking routes from every namespace.
pub fn gateway(ns: &str, name: &str) -> String {
    gateway_on(ns, name, 80)
}

/// A Gateway `ns/name` with one HTTP listener on `port` taking routes from every namespace.
pub fn gateway_on(ns: &str, name: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  \
         gatewayClassName: xdst\n  listeners:\n  - name: http\n    port: {port}\n    protocol: HTTP\n    allowedRoutes: \
         {{namespaces: {{from: All}}}}\n"
    )
}

/// Each team's upstream, an intent directory, and the gateway-api plugin whose Gateways listen
/// on 127.0.0.1 at `port` for their port 80.
pub struct Teams {
    pub a: Upstream,
    pub b: Upstream,
    pub port: u16,
    pub intent: tempfile::TempDir,
    pub plugins: tempfile::TempDir,
}

impl Teams {
    pub async fn start() -> anyhow::Result<Teams> {
        let (a, b) = (Upstream::start("a").await?, Upstream::start("b").await?);
        // Port 80 and 81 of the Gateways (`listener`), both kept from other tests.
        let port = crate::free_ports(2)?;
        let intent = tempfile::Builder::new().prefix("xdst-quarantine-intent-").tempdir()?;
        let plugins = tempfile::Builder::new().prefix("xdst-quarantine-plugins-").tempdir()?;
        let teams = Teams { a, b, port, intent, plugins };
        teams.install(&teams.settings())?;
        Ok(teams)
    }

    /// The gateway-api plugin's settings here: its Gateways on 127.0.0.1, port 80 at
    /// [`Teams::port`]. A test adds its own and [`install`](Self::install)s them.
    pub fn settings(&self) -> serde_json::Value {
        serde_json::json!({"config": {"address": "127.0.0.1", "portOffset": i32::from(self.port) - 80}})
    }

    /// Installs the gateway-api plugin with `settings` (before xdst starts, or as a change).
    pub fn install(&self, settings: &serde_json::Value) -> anyhow::Result<()> {
        let wasm = crate::plugins::gateway_api()?;
        crate::plugins::install(self.plugins.path(), &wasm, "gateway-api.wasm", Some(&settings.to_string()))
    }

    /// Writes `text` to `file` of the intent directory (its directory made if need be).
    pub fn write(&self, file: &str, text: &str) -> anyhow::Result<()> {
        let path = self.intent.path().join(file);
        std::fs::create_dir_all(path.parent().expect("a file in the intent directory"))?;
        Ok(xdst_core::files::write_atomic(&path, text)?)
    }

    /// Removes `file` of the intent directory.
    pub fn remove(&self, file: &str) -> anyhow::Result<()> {
        Ok(std::fs::remove_file(self.intent.path().join(file))?)
    }

    /// Where the Gateways' port 80 listens.
    pub fn gateway(&self) -> SocketAddr {
        self.listener(80)
    }

    /// Where a Gateway's `port` listens.
    pub fn listener(&self, port: u16) -> SocketAddr {
        ([127, 0, 0, 1], self.port + port - 80).into()
    }
}

/// `GET path` on the admin port, as JSON; an error unless it answers 200.
pub async fn admin_json(admin: SocketAddr, path: &str) -> anyhow::Result<Value> {
    let (status, body) = http_get(admin, path).await?;
    ensure!(status == 200, "GET {path}: {status} {body}");
    serde_json::from_str(&body).with_context(|| format!("GET {path}: {body}"))
}

/// Waits until `addr` answers `path` with 200 from `body`; how long it took.
pub async fn serves(addr: SocketAddr, path: &str, body: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    until(format!("{path} answered by {body}"), WAIT, async || {
        Ok(match http_get(addr, path).await {
            Ok((200, b)) if b == body => Seen::Done(()),
            other => Seen::Not(format!("{other:?}")),
        })
    })
    .await?;
    Ok(started.elapsed())
}

/// A plaintext door (on the test's loopback) to xdst's admin port, which serves TLS when the
/// xDS port does (mTLS): the tests' HTTP helpers and `xdst wait` speak to it.
pub async fn admin_door(admin: SocketAddr, ca: &std::path::Path) -> anyhow::Result<crate::netns::Relay> {
    use crate::netns::{Connect, Relay, Stream};
    let connector = crate::pki::client_config_alpn(ca, None, b"http/1.1")?;
    let connect: Connect = Box::new(move || {
        let connector = connector.clone();
        Box::pin(async move {
            let tcp = tokio::net::TcpStream::connect(admin).await?;
            let name = rustls_pki_types::ServerName::try_from("localhost").expect("a DNS name");
            Ok(Box::new(connector.connect(name, tcp).await?) as Box<dyn Stream>)
        })
    });
    Relay::tcp(connect).await
}

/// A header value only Envoy refuses (xdst does not parse Envoy's format strings), as a rule's
/// `filters` line: `i` makes each version its own.
pub fn not_a_command(i: usize) -> String {
    format!(
        "filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: X-Tag, value: \
         '%NOT_A_COMMAND%-{i}'}}]}}}}]\n    "
    )
}

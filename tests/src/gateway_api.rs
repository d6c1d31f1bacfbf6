//! The Gateway API conformance harness: one upstream conformance case
//! (`<cases>/<case>/manifests.yaml`) served by `xdst serve` with the `gateway-api` plugin to a
//! real Envoy, with a backend for every Service.
//!
//! The upstream cases are an input from outside the repository (issue 34, item 5): they are
//! read from `$XDST_GATEWAY_API_CASES`, else from `../shared/gateway-api-suite` beside the
//! clone (all 139 upstream tests), else `../shared/gateway-api-conformance` (63 of them). When
//! none is there, [`upstream_cases`] says why and every test that needs
//! them ([`skip_without_upstream_cases!`](crate::skip_without_upstream_cases)) prints one
//! line saying it skipped them and passes; `tests/run.sh` says up front which it will be.
//!
//! - The manifests load as shipped, `{GATEWAY_CLASS_NAME}` replaced by `xdst` and
//!   `{GATEWAY_CONTROLLER_NAME}` by the plugin's default controller name.
//! - Every Service gets a backend and an EndpointSlice naming it for each of the Service's
//!   ports: a TCP or UDP echo ([`crate::stream_echo`]) when the case's Deployment of that
//!   name runs one (`TCP_ECHO_SERVER`, `UDP_ECHO_SERVER`) or the Service is the suite's
//!   `tcp-backend`, a DNS server for `coredns`, a gRPC echo for `grpc-...`, else an HTTP
//!   [`Echo`]. The echo's pod is `<app>-0`, after the Service's `selector.app` (the Deployment the
//!   upstream suite runs), or after the Service's name. A Service the case gives EndpointSlices
//!   of its own has no selector: the upstream test fills them with `infra-backend-v1`'s pods,
//!   so its echo is `infra-backend-v1-0` and the case's IPv4 slices point at it.
//! - Each Gateway binds its own loopback address (`127.X.Y.Z`, random per case; the plugin is
//!   told these are the addresses Envoy can bind, `usableAddresses`), and every
//!   Gateway port is offset by [`PORT_OFFSET`], so cases run in parallel and bind no
//!   privileged port.
//! - The self-signed certificates upstream makes at run time, `tls-validity-checks-certificate`
//!   and `gateway-conformance-web-backend/certificate`, are made here when a listener names
//!   them and the case does not ship them: a `kubernetes.io/tls` Secret with a certificate for
//!   `*.wildcard.org` and the `.org` names the cases ask for, signed by a CA of the case's own
//!   ([`Case::ca`]), which requests over TLS trust. (Upstream's is self-signed for `*`, `*.org`
//!   and `*.wildcard.org`; rustls takes neither `*` nor a wildcard over one label.) The other
//!   certificates and CA bundles upstream makes in code are [`crate::suite_pki`]'s.
//! - [`Case::expect`] sends a request and waits until the answer is what the upstream test
//!   expects three times in a row (the suite's "eventually consistent" check), or fails with
//!   the last answer after [`WAIT`]. A request that names no host carries the one upstream's
//!   client would send to the Gateway's port: its address, with the port unless it is the
//!   scheme's own (80, or 443 over TLS); the port is the Gateway's, not the offset one.
//! - As upstream's `ExpectedRequest`, what reached the backend defaults to what was sent:
//!   a request that names a host must reach the backend with that Host, port included.
//!
//! The expectations are the upstream Go tests' (`conformance/tests/<case>.go`), written again
//! as Rust tables in `tests/it/gateway_api.rs`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use http_body_util::{BodyExt as _, Empty};
use serde_json::Value;

use crate::echo::Echo;
use crate::envoy::{ApiType, Bootstrap, Envoy};
use crate::grpc_echo::GrpcEcho;
use crate::server::Process;

/// The controller name the suite's `{GATEWAY_CONTROLLER_NAME}` stands for: the plugin's own.
pub const CONTROLLER: &str = "xdst.dev/gateway-controller";

/// Added to every Gateway listener port (the plugin's `portOffset`).
pub const PORT_OFFSET: u16 = 10_000;
/// The address gateway-static-addresses names as one the implementation cannot use: in
/// TEST-NET-2 (RFC 5737), which nothing here binds.
pub const UNUSABLE_ADDRESS: &str = "198.51.100.77";

/// How long a request may take to be answered as expected.
pub const WAIT: Duration = Duration::from_secs(30);

/// How long a check on a case broken on purpose waits before it fails
/// ([`Case::start_broken`]): long enough for the config to be live, since the breakage comes
/// with it and the test first sees something that works.
pub const BROKEN_WAIT: Duration = Duration::from_secs(8);
/// Answers in a row that must match, as the upstream suite requires.
const IN_A_ROW: usize = 3;

/// The environment variable naming the folder of the upstream conformance cases.
pub const CASES_ENV: &str = "XDST_GATEWAY_API_CASES";

/// Why the upstream conformance cases cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoCases {
    /// Neither `$XDST_GATEWAY_API_CASES` nor `../shared/gateway-api-suite` (or
    /// `-conformance`): the tests that need them are skipped.
    Absent(PathBuf),
    /// `$XDST_GATEWAY_API_CASES` names a folder that is not there: a mistake, not a skip.
    Missing(PathBuf),
}

impl std::fmt::Display for NoCases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoCases::Absent(default) => write!(
                f,
                "the upstream Gateway API conformance cases are not here ({} does not exist and {CASES_ENV} \
                 is not set)",
                default.display()
            ),
            NoCases::Missing(dir) => write!(f, "{CASES_ENV}={}: no such directory", dir.display()),
        }
    }
}

impl std::error::Error for NoCases {}

/// The folder of the upstream conformance cases: `$XDST_GATEWAY_API_CASES`, else
/// `../shared/gateway-api-suite` beside the repository (all 139 upstream tests), else
/// `../shared/gateway-api-conformance` (the 63 HTTP and gRPC ones, in the same form).
pub fn upstream_cases() -> Result<PathBuf, NoCases> {
    match std::env::var_os(CASES_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_dir() { Ok(dir) } else { Err(NoCases::Missing(dir)) }
        }
        None => {
            let root = crate::repo_root();
            let shared = root.parent().unwrap_or(&root).join("shared");
            let suite = shared.join("gateway-api-suite");
            if suite.is_dir() {
                return Ok(suite);
            }
            let dir = shared.join("gateway-api-conformance");
            if dir.is_dir() { Ok(dir) } else { Err(NoCases::Absent(suite)) }
        }
    }
}

/// Whether the calling test `test` may run: `Ok(true)` with the upstream cases, `Ok(false)`
/// (after one line on stderr saying it skipped them and why) without them, an error when
/// `$XDST_GATEWAY_API_CASES` names a folder that is not there. The line is written past the
/// test harness's capture, so it shows in the test command's output.
pub fn upstream_cases_or_skip(test: &str) -> anyhow::Result<bool> {
    match upstream_cases() {
        Ok(_) => Ok(true),
        Err(why @ NoCases::Absent(_)) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "skipped {test}: {why}");
            Ok(false)
        }
        Err(why @ NoCases::Missing(_)) => Err(why.into()),
    }
}

/// Returns `Ok(())` from the calling test after one line naming it and saying it skipped, when
/// the upstream conformance cases are absent (see [`upstream_cases_or_skip`]).
#[macro_export]
macro_rules! skip_without_upstream_cases {
    () => {{
        fn here() {}
        fn name_of<T>(_: T) -> &'static str {
            std::any::type_name::<T>()
        }
        let test = name_of(here).trim_end_matches("::here").trim_end_matches("::{{closure}}");
        if !$crate::gateway_api::upstream_cases_or_skip(test)? {
            return Ok(());
        }
    }};
}

/// The folder of the upstream conformance inputs (see [`upstream_cases`]).
pub fn cases_dir() -> anyhow::Result<PathBuf> {
    Ok(upstream_cases()?)
}

/// What serves a Service's pods: an HTTP or gRPC echo, a TCP echo, a UDP echo (with the
/// Service name it reports) or a DNS server.
#[derive(Debug, Clone)]
enum Server {
    Http,
    Grpc,
    Tcp,
    Udp(String),
    Dns,
}

/// A running case.
pub struct Case {
    pub name: String,
    /// Each Gateway's (`namespace/name`) loopback address.
    pub gateways: BTreeMap<String, IpAddr>,
    pub echoes: Vec<Echo>,
    /// The gRPC echoes, for Services whose app is `grpc-...` (the GRPCRoute cases).
    pub grpc_echoes: Vec<GrpcEcho>,
    /// The TCP echoes (Deployments with `TCP_ECHO_SERVER`, and `tcp-backend`).
    pub tcp_echoes: Vec<crate::stream_echo::TcpEcho>,
    /// The UDP echoes (Deployments with `UDP_ECHO_SERVER`).
    pub udp_echoes: Vec<crate::stream_echo::UdpEcho>,
    /// The DNS servers (`coredns`).
    pub dns: Vec<crate::stream_echo::Dns>,
    /// The certificates and CAs the upstream suite makes in code.
    pub suite: crate::suite_pki::SuitePki,
    pub xdst: Process,
    pub envoy: Envoy,
    /// The CA of the certificates made for the case's Secrets, for requests over TLS.
    pub ca: Option<PathBuf>,
    /// How long a check waits for what it expects ([`WAIT`]; shorter for a case broken on
    /// purpose, whose checks are meant to fail).
    pub wait: Duration,
    _pki: tempfile::TempDir,
    _intent: tempfile::TempDir,
    _plugins: tempfile::TempDir,
}

/// The admin token of a case's xdst (`XDST_ADMIN_TOKEN`), for writes through the intent API.
const ADMIN_TOKEN: &str = "gateway-api-case";

fn admin_token() -> crate::server::Options {
    crate::server::Options { env: vec![("XDST_ADMIN_TOKEN".into(), ADMIN_TOKEN.into())], ..Default::default() }
}

/// `xdst serve`'s arguments for a case.
fn xdst_args(intent: &std::path::Path, plugins: &std::path::Path) -> Vec<std::ffi::OsString> {
    ["--intent".into(), intent.into(), "--plugins".into(), plugins.into(), "--debounce".into(), "20ms".into()].into()
}

/// A request as the upstream tests write it.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub method: Option<&'static str>,
    pub host: Option<&'static str>,
    pub path: &'static str,
    pub headers: Vec<(&'static str, &'static str)>,
    /// Response headers the echo backend is asked to set (`X-Echo-Set-Header`).
    pub backend_sets: Vec<(&'static str, &'static str)>,
    /// HTTP/2 instead of HTTP/1.1: with prior knowledge over TCP (h2c), by ALPN over TLS.
    pub h2: bool,
    /// Over TLS with this server name (SNI), trusting the case's CA (see [`Case::start`]).
    pub sni: Option<&'static str>,
    /// Over TLS, presenting this client certificate and key (PEM files).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// What must come back.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    pub status: u16,
    /// Other statuses that are as good (upstream's `StatusCodes`).
    pub or_statuses: &'static [u16],
    /// The pod name must start with this (the Service's name).
    pub backend: Option<&'static str>,
    pub namespace: Option<&'static str>,
    /// What the backend must have received, where it differs from what was sent (the host
    /// defaults to the request's, when it names one, port and all, as upstream's does).
    pub backend_path: Option<&'static str>,
    pub backend_host: Option<&'static str>,
    pub backend_headers: Vec<(&'static str, &'static str)>,
    pub backend_absent_headers: Vec<&'static str>,
    pub response_headers: Vec<(&'static str, &'static str)>,
    pub response_absent_headers: Vec<&'static str>,
    /// Response headers that must have one of these values, whitespace ignored (upstream's
    /// `ValidHeaderValues` with `IgnoreWhitespace`).
    pub response_one_of: Vec<(&'static str, &'static [&'static str])>,
    /// For a redirect: what the `Location` header must say.
    pub redirect: Option<Redirect>,
    /// The answer must be the gateway's own, not a backend's (upstream expects an empty
    /// captured request: no echo body). A CORS preflight, a 404 or a 500 are Envoy's to give.
    pub by_gateway: bool,
    /// The method the backend must have received: by default the one sent (`GET` when the
    /// request names none), as upstream's `ExpectedRequest.Method`.
    pub backend_method: Option<&'static str>,
    /// The upstream test gives an `ExpectedRequest` without headers: the headers sent need not
    /// reach the backend as they were. Without it (and with no `backend_headers` or
    /// `backend_absent_headers`, which stand for one), every header sent must reach the
    /// backend unchanged, as upstream compares them.
    pub expected_request: bool,
    /// The server name (SNI) the backend saw over TLS (upstream's `ExpectedRequest.SNI`).
    pub backend_sni: Option<&'static str>,
}

/// A redirect's target, as the upstream suite checks it: an absent scheme, host or path must
/// be the request's; the port must be exactly this (absent: none in the URL).
#[derive(Debug, Clone, Default)]
pub struct Redirect {
    pub scheme: Option<&'static str>,
    pub host: Option<&'static str>,
    pub port: Option<&'static str>,
    pub path: Option<&'static str>,
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    /// Every value of a header, joined with `,`, as Go's client reads them.
    pub fn header(&self, name: &str) -> Option<String> {
        let values: Vec<&str> =
            self.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect();
        (!values.is_empty()).then(|| values.join(","))
    }
}

/// A random `127.X.Y.0` block for one case's Gateways.
fn loopback_block() -> [u8; 3] {
    let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos()
        ^ std::process::id().rotate_left(16);
    [127, (n >> 8) as u8 | 1, (n >> 16) as u8]
}

/// A Service of the case: namespace, name, and per port its name, protocol and target port.
struct Service {
    namespace: String,
    name: String,
    ports: Vec<(Option<String>, String, u16)>,
    /// `spec.selector.app`: which Deployment's pods serve it upstream.
    app: Option<String>,
}

impl Case {
    /// Loads `case`, starts its echoes, xdst with the plugin, and an Envoy (SotW ADS).
    pub async fn start(case: &str) -> anyhow::Result<Case> {
        Case::start_configured(case, |_| {}).await
    }

    /// [`start`](Self::start), with the plugin's `config` (`portOffset`, `addresses`,
    /// `usableAddresses`) changed by `configure` first.
    pub async fn start_configured(case: &str, configure: impl FnOnce(&mut Value)) -> anyhow::Result<Case> {
        Case::start_inner(case, configure, None).await
    }

    /// [`start`](Self::start) with the plugin broken on purpose: the `breaker` test plugin
    /// (`tests/plugins/breaker`) patches its output as `breakage` (its `config`) says, so a test
    /// can show that a check catches that bug.
    pub async fn start_broken(case: &str, breakage: Value) -> anyhow::Result<Case> {
        Case::start_inner(case, |_| {}, Some(breakage)).await
    }

    async fn start_inner(
        case: &str,
        configure: impl FnOnce(&mut Value),
        breakage: Option<Value>,
    ) -> anyhow::Result<Case> {
        let file = cases_dir()?.join(case).join("manifests.yaml");
        let text = std::fs::read_to_string(&file)
            .with_context(|| {
                format!(
                    "reading {} (the whole upstream suite, 139 cases, is ../shared/gateway-api-suite)",
                    file.display()
                )
            })?
            .replace("{GATEWAY_CLASS_NAME}", "xdst")
            .replace("{GATEWAY_CONTROLLER_NAME}", CONTROLLER);
        let docs = xdst_core::intent::parse_file("manifests.yaml", &text)?;
        let mut services = Vec::new();
        let mut gateways = BTreeMap::new();
        let block = loopback_block();
        for d in &docs {
            let ns = d.namespace.clone().unwrap_or_else(|| "default".into());
            match (d.group.as_deref(), d.kind.as_str()) {
                (Some("core"), "Service") => services.push(Service {
                    namespace: ns,
                    name: d.name.clone(),
                    ports: d.json["spec"]["ports"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|p| {
                            let port = p["port"].as_u64().unwrap_or(0);
                            let target = p["targetPort"].as_u64().unwrap_or(port);
                            (
                                p["name"].as_str().map(str::to_owned),
                                p["protocol"].as_str().unwrap_or("TCP").to_owned(),
                                u16::try_from(target).unwrap_or(0),
                            )
                        })
                        .collect(),
                    app: d.json["spec"]["selector"]["app"].as_str().map(str::to_owned),
                }),
                (Some("gateway.networking.k8s.io"), "Gateway") => {
                    let ip = Ipv4Addr::new(block[0], block[1], block[2], 10 + gateways.len() as u8);
                    gateways.insert(format!("{ns}/{}", d.name), IpAddr::V4(ip));
                }
                _ => {}
            }
        }

        // The case's own EndpointSlices, by Service: they get the echo's address.
        let mut own_slices: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
        for d in &docs {
            if d.kind == "EndpointSlice"
                && let Some(service) = d.json["metadata"]["labels"]["kubernetes.io/service-name"].as_str()
            {
                let ns = d.namespace.clone().unwrap_or_else(|| "default".into());
                own_slices.entry((ns, service.to_owned())).or_default().push(d.json.clone());
            }
        }
        // What each Deployment of the case runs: a TCP or UDP echo (with its SERVICE_NAME).
        let mut servers: BTreeMap<(String, String), Server> = BTreeMap::new();
        for d in docs.iter().filter(|d| d.kind == "Deployment") {
            let ns = d.namespace.clone().unwrap_or_else(|| "default".into());
            let env = &d.json["spec"]["template"]["spec"]["containers"][0]["env"];
            let var = |name: &str| {
                env.as_array()?.iter().find(|e| e["name"] == name).and_then(|e| e["value"].as_str()).map(str::to_owned)
            };
            if var("TCP_ECHO_SERVER").is_some() {
                servers.insert((ns, d.name.clone()), Server::Tcp);
            } else if var("UDP_ECHO_SERVER").is_some() {
                servers.insert((ns, d.name.clone()), Server::Udp(var("SERVICE_NAME").unwrap_or_default()));
            }
        }
        let pki = tempfile::Builder::new().prefix("xdst-gwapi-pki-").tempdir()?;
        let mut suite = crate::suite_pki::SuitePki::new(pki.path());
        let mut echoes = Vec::new();
        let mut grpc_echoes = Vec::new();
        let mut tcp_echoes = Vec::new();
        let mut udp_echoes = Vec::new();
        let mut dns = Vec::new();
        let mut extra = String::new();
        for s in &services {
            let own = own_slices.contains_key(&(s.namespace.clone(), s.name.clone()));
            let app = match (&s.app, own) {
                (Some(app), _) => app.clone(),
                (None, true) => "infra-backend-v1".to_owned(),
                (None, false) => s.name.clone(),
            };
            let pod = format!("{app}-0");
            let server = match servers.get(&(s.namespace.clone(), app.clone())) {
                Some(server) => server.clone(),
                None if app == "tcp-backend" => Server::Tcp,
                // The suite's coredns Deployment: its Service selects `app: udp`.
                None if s.name == "coredns" => Server::Dns,
                None if app.starts_with("grpc-") => Server::Grpc,
                None => Server::Http,
            };
            // One server per kind of port: a Service port whose target is 8443 is the
            // backend's TLS port (the suite's `tls-backend` and `tcp-backend` serve TLS there).
            let mut started: BTreeMap<bool, u16> = BTreeMap::new();
            let mut ports: Vec<Value> = Vec::new();
            for (name, protocol, target) in &s.ports {
                let tls = *target == 8443 && matches!(server, Server::Tcp | Server::Http | Server::Grpc);
                let port = match started.get(&tls) {
                    Some(port) => *port,
                    None => {
                        let port = match &server {
                            Server::Grpc => {
                                let echo = if tls {
                                    let (cert, key) = suite.leaf("tls-checks-certificate")?;
                                    let acceptor = crate::stream_echo::acceptor(&cert, &key, None)?;
                                    GrpcEcho::start_tls(&s.namespace, &pod, acceptor).await?
                                } else {
                                    GrpcEcho::start(&s.namespace, &pod).await?
                                };
                                let port = echo.addr.port();
                                grpc_echoes.push(echo);
                                port
                            }
                            Server::Tcp => {
                                let cert = match tls {
                                    true => Some(suite.leaf("tls-passthrough-checks-certificate")?),
                                    false => None,
                                };
                                let cert = cert.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
                                let echo = crate::stream_echo::TcpEcho::start(&s.namespace, &pod, cert).await?;
                                let port = echo.addr.port();
                                tcp_echoes.push(echo);
                                port
                            }
                            Server::Udp(service) => {
                                let echo = crate::stream_echo::UdpEcho::start(&s.namespace, service, &pod).await?;
                                let port = echo.addr.port();
                                udp_echoes.push(echo);
                                port
                            }
                            Server::Dns => {
                                let server = crate::stream_echo::Dns::start().await?;
                                let port = server.addr.port();
                                dns.push(server);
                                port
                            }
                            Server::Http => {
                                let echo = if tls {
                                    let leaf = if s.namespace == "gateway-conformance-app-backend" {
                                        "tls-passthrough-checks-certificate"
                                    } else {
                                        "tls-checks-certificate"
                                    };
                                    let (cert, key) = suite.leaf(leaf)?;
                                    // It checks the client certificates presented against CA C.
                                    let clients = match app.as_str() {
                                        "tls-backend-with-client-cert-validation" => {
                                            Some(suite.ca_of("tls-checks-ca-certificate")?)
                                        }
                                        _ => None,
                                    };
                                    let acceptor = crate::stream_echo::acceptor(&cert, &key, clients.as_deref())?;
                                    Echo::start_tls(&s.namespace, &pod, acceptor).await?
                                } else {
                                    Echo::start(&s.namespace, &pod).await?
                                };
                                let port = echo.addr.port();
                                echoes.push((s.name.clone(), echo));
                                port
                            }
                        };
                        started.insert(tls, port);
                        port
                    }
                };
                ports.push(match name {
                    Some(n) => serde_json::json!({"name": n, "port": port, "protocol": protocol}),
                    None => serde_json::json!({"port": port, "protocol": protocol}),
                });
            }
            let slice = serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": format!("{}-xdst-test", s.name),
                    "namespace": s.namespace,
                    "labels": {"kubernetes.io/service-name": s.name},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
                "ports": ports,
            });
            if !own {
                extra.push_str(&format!("---\n{slice}\n"));
            }
        }
        // The case's own slices: the IPv4 ones point at the echo, keeping the case's port
        // names; the others stay empty (the echo has no IPv6 address).
        for ((ns, service), slices) in &own_slices {
            let Some((_, echo)) = echoes.iter().find(|(name, e)| e.namespace == *ns && name == service) else {
                continue;
            };
            for s in slices {
                let mut s = s.clone();
                if s["addressType"] == "IPv4" {
                    s["endpoints"] = serde_json::json!([{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]);
                    for p in s["ports"].as_array_mut().into_iter().flatten() {
                        p["port"] = serde_json::json!(echo.addr.port());
                    }
                }
                // Written beside the case's file, replacing its slice of the same name.
                s["metadata"]["name"] =
                    serde_json::json!(format!("{}-xdst-test", s["metadata"]["name"].as_str().unwrap_or("")));
                extra.push_str(&format!("---\n{s}\n"));
            }
        }
        let text = remove_documents(&text, |d| d.kind == "EndpointSlice");
        // gateway-static-addresses: the address it can use is its own loopback one, the one
        // it cannot an address of the documentation range that no Envoy here binds.
        let text = match gateways.get("gateway-conformance-infra/gateway-static-addresses") {
            Some(ip) => text
                .replace("PLACEHOLDER_USABLE_ADDRS", &ip.to_string())
                .replace("PLACEHOLDER_UNUSABLE_ADDRS", UNUSABLE_ADDRESS),
            None => text,
        };
        let ca = certificate_secrets(&docs, pki.path(), &mut extra)?;
        let shipped = docs.iter().map(|d| d.id().to_string()).collect();
        extra.push_str(&suite.objects_for(&text, &shipped)?);

        let intent = tempfile::Builder::new().prefix("xdst-gwapi-intent-").tempdir()?;
        std::fs::write(intent.path().join("manifests.yaml"), text)?;
        std::fs::write(intent.path().join("endpoints.yaml"), extra)?;
        let plugins = tempfile::Builder::new().prefix("xdst-gwapi-plugins-").tempdir()?;
        let addresses: BTreeMap<&String, String> = gateways.iter().map(|(k, v)| (k, v.to_string())).collect();
        // Envoy here can bind every Gateway's loopback address, and nothing else.
        let usable: Vec<&String> = addresses.values().collect();
        let mut config =
            serde_json::json!({"portOffset": PORT_OFFSET, "addresses": addresses, "usableAddresses": usable});
        configure(&mut config);
        let settings = serde_json::json!({ "config": config }).to_string();
        crate::plugins::install(plugins.path(), &crate::plugins::gateway_api()?, "gateway-api.wasm", Some(&settings))?;
        let broken = breakage.is_some();
        if let Some(breakage) = breakage {
            let settings = serde_json::json!({ "config": breakage }).to_string();
            crate::plugins::install(plugins.path(), &crate::plugins::breaker()?, "breaker.wasm", Some(&settings))?;
        }
        let xdst =
            Process::start_with_options("127.0.0.1:0", &xdst_args(intent.path(), plugins.path()), &admin_token())
                .await?;
        let envoy = Envoy::start(&Bootstrap::new(ApiType::Sotw, xdst.xds_addr, &format!("gwapi-{case}"))).await?;
        let echoes = echoes.into_iter().map(|(_, e)| e).collect();
        // A check on a case broken on purpose is meant to fail: it need not wait as long.
        let wait = if broken { BROKEN_WAIT } else { WAIT };
        Ok(Case {
            wait,
            name: case.to_owned(),
            gateways,
            echoes,
            grpc_echoes,
            tcp_echoes,
            udp_echoes,
            dns,
            suite,
            xdst,
            envoy,
            ca,
            _pki: pki,
            _intent: intent,
            _plugins: plugins,
        })
    }

    /// Calls `method` of the gRPC echo service through `gateway`'s `port` until the answer
    /// meets `want` [`IN_A_ROW`] times in a row, as [`expect`](Self::expect) does for HTTP.
    pub async fn expect_grpc(
        &self,
        gateway: &str,
        port: u16,
        call: &GrpcCall,
        want: &GrpcExpect,
    ) -> anyhow::Result<()> {
        let addr = self.addr(gateway, port);
        let what = || format!("gRPC {} {:?}", call.method, call.authority);
        self.converge(what, || async {
            match crate::grpc_echo::call(addr, call.authority, call.method, &call.metadata).await {
                Ok(result) => check_grpc(&result, call, want).err(),
                Err(e) => Some(format!("{e:#}")),
            }
        })
        .await
    }

    /// Connects to `gateway`'s TCP (or TLS, with `tls`: a connector and server name) `port`
    /// until the echo answering is `backend`'s (a pod name prefix) in `namespace`
    /// [`IN_A_ROW`] times in a row, as upstream's `MakeTCPRequestAndExpectEventuallyValidResponse`.
    pub async fn expect_tcp(
        &self,
        gateway: &str,
        port: u16,
        tls: Option<(&tokio_rustls::TlsConnector, &str)>,
        backend: &str,
        namespace: &str,
    ) -> anyhow::Result<crate::stream_echo::TcpAnswer> {
        let addr = self.addr(gateway, port);
        let last = std::cell::RefCell::new(None);
        self.converge(
            || format!("TCP to {gateway}:{port} for {backend}"),
            || async {
                match crate::stream_echo::tcp_ask(addr, tls).await {
                    Ok(a) if a.pod.starts_with(&format!("{backend}-")) && a.namespace == namespace => {
                        *last.borrow_mut() = Some(a);
                        None
                    }
                    Ok(a) => Some(format!("answered by {}/{}", a.namespace, a.pod)),
                    Err(e) => Some(format!("{e:#}")),
                }
            },
        )
        .await?;
        Ok(last.into_inner().expect("converged"))
    }

    /// Sends datagrams to `gateway`'s UDP `port` until the echo answering is `service`'s in
    /// `namespace` [`IN_A_ROW`] times in a row, as upstream's `ExpectEchoResponseFromBackend`.
    pub async fn expect_udp(&self, gateway: &str, port: u16, service: &str, namespace: &str) -> anyhow::Result<()> {
        let addr = self.addr(gateway, port);
        self.converge(
            || format!("UDP to {gateway}:{port} for {service}"),
            || async {
                match crate::stream_echo::udp_ask(addr).await {
                    Ok(a) if a.service == service && a.namespace == namespace => None,
                    Ok(a) => Some(format!("answered by {}/{} of {}", a.namespace, a.pod, a.service)),
                    Err(e) => Some(format!("{e:#}")),
                }
            },
        )
        .await
    }

    /// The statuses of the documents `ids`, as the admin API serves them.
    pub async fn statuses(&self, ids: &[String]) -> anyhow::Result<Vec<Value>> {
        let mut out = Vec::new();
        for id in ids {
            out.push(self.document(id).await?["status"].clone());
        }
        Ok(out)
    }

    /// Envoy holds xdst's target for it and has rejected no listener or cluster update: after
    /// a change, the sign that Envoy took what it was sent.
    pub async fn no_nack(&self) -> anyhow::Result<()> {
        crate::admin::settled_target(self.xdst.admin_addr, &self.envoy.node_id).await?;
        let stats = self.envoy.stats().await?;
        for name in ["listener_manager.lds.update_rejected", "cluster_manager.cds.update_rejected"] {
            anyhow::ensure!(stats.count(name) == 0, "Envoy rejected an update: {name} = {}", stats.count(name));
        }
        Ok(())
    }

    /// Waits until Envoy has the Listener of `gateway`'s `port` active: the positive signal a
    /// check that connections are refused waits for first, so a refusal is the proxy's, not
    /// a listener not there yet.
    pub async fn listening(&self, gateway: &str, port: u16) -> anyhow::Result<()> {
        let name = format!("{gateway}/{port}");
        self.eventually(&format!("Envoy listens for {name}"), || async {
            match self.envoy.listener_port(&name).await? {
                Some(_) => Ok(()),
                None => anyhow::bail!("no active listener {name}"),
            }
        })
        .await
    }

    /// Waits until the document `id` (as `GET /intent/{id}` serves it, status and all) passes
    /// `check` [`IN_A_ROW`] times in a row; fails with what `check` said last.
    pub async fn expect_status(&self, id: &str, check: impl Fn(&Value) -> Result<(), String>) -> anyhow::Result<()> {
        self.converge(
            || format!("status of {id}"),
            || async {
                match self.document(id).await {
                    Ok(doc) => check(&doc).err().map(|why| format!("{why}: {}", doc["status"])),
                    Err(e) => Some(format!("{e:#}")),
                }
            },
        )
        .await
    }

    /// Waits until `probe` succeeds [`IN_A_ROW`] times in a row (see [`converge`](Self::converge)).
    pub async fn eventually<F, Fut>(&self, what: &str, mut probe: F) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>>,
    {
        self.converge(
            || what.to_owned(),
            || {
                let f = probe();
                async move { f.await.err().map(|e| format!("{e:#}")) }
            },
        )
        .await
    }

    /// Rewrites the case's manifests without the document `id` (`Kind/namespace/name`), as the
    /// upstream tests delete an object mid-test.
    pub fn remove(&self, id: &str) -> anyhow::Result<()> {
        let file = self._intent.path().join("manifests.yaml");
        let text = std::fs::read_to_string(&file)?;
        let after = remove_documents(&text, |d| d.id().as_ref() == id);
        anyhow::ensure!(after != text, "case {} has no document {id}", self.name);
        xdst_core::files::write_atomic(&file, after)?;
        Ok(())
    }

    /// Changes the document `id` (`Kind/namespace/name`) in the case's manifests in place, as the
    /// upstream tests patch an object mid-test: `change` edits it as JSON.
    pub fn patch(&self, id: &str, change: impl FnOnce(&mut Value)) -> anyhow::Result<()> {
        let file = self._intent.path().join("manifests.yaml");
        let text = std::fs::read_to_string(&file)?;
        let mut change = Some(change);
        let parts: Vec<String> = text
            .split("\n---")
            .map(|part| {
                let Ok(docs) = xdst_core::intent::parse_file("part.yaml", part) else { return part.to_owned() };
                match docs.iter().find(|d| d.id().as_ref() == id) {
                    Some(d) if docs.len() == 1 => {
                        let mut json = d.json.clone();
                        if let Some(f) = change.take() {
                            f(&mut json);
                        }
                        format!("\n{json}\n")
                    }
                    _ => part.to_owned(),
                }
            })
            .collect();
        anyhow::ensure!(change.is_none(), "case {} has no document {id}", self.name);
        xdst_core::files::write_atomic(&file, parts.join("\n---"))?;
        Ok(())
    }

    /// Stops xdst (SIGKILL) and starts it again on the same xDS address, with the same intent,
    /// plugins and cache; returns once the new process says its config is live at Envoy
    /// (`xdst wait` on its latest change: Envoy has acknowledged what it serves).
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        let xds = self.xdst.xds_addr.to_string();
        let _ = self.xdst.child.kill().await;
        let args = xdst_args(self._intent.path(), self._plugins.path());
        self.xdst = Process::start_with_options(&xds, &args, &admin_token()).await?;
        let admin = self.xdst.admin_addr;
        let change = crate::operator::next_change(admin, None).await?;
        let (code, out) = crate::operator::xdst_wait(admin, change, "30s", &[]).await?;
        anyhow::ensure!(code == 0, "after the restart, change {change} is not live at Envoy: {out}");
        Ok(())
    }

    /// The case's intent directory.
    pub fn intent_dir(&self) -> &std::path::Path {
        self._intent.path()
    }

    /// Writes `yaml` through the intent API (`PUT /intent/{id}`, `id` as `Kind/namespace/name`),
    /// with the admin token.
    pub async fn put(&self, id: &str, yaml: &str) -> anyhow::Result<()> {
        let path = format!("/intent/{id}");
        let auth = [("Authorization", format!("Bearer {ADMIN_TOKEN}"))];
        let auth: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, body) = crate::xds::http_with(self.xdst.admin_addr, "PUT", &path, &auth, yaml).await;
        anyhow::ensure!(status == 200, "PUT {path}: {status} {body}");
        Ok(())
    }

    /// Adds `yaml` to the case's intent as the file `name`.
    pub fn add(&self, name: &str, yaml: &str) -> anyhow::Result<()> {
        xdst_core::files::write_atomic(&self._intent.path().join(name), yaml)?;
        Ok(())
    }

    /// A document as the admin API serves it (`GET /intent/{kind}/{namespace}/{name}`), with
    /// its status.
    pub async fn document(&self, path: &str) -> anyhow::Result<Value> {
        let (status, body) = crate::upstream::http_get(self.xdst.admin_addr, &format!("/intent/{path}")).await?;
        anyhow::ensure!(status == 200, "GET /intent/{path}: {status} {body}");
        Ok(serde_json::from_str(&body)?)
    }

    /// Where a Gateway (`namespace/name`) listens for its port `port`.
    pub fn addr(&self, gateway: &str, port: u16) -> SocketAddr {
        let ip = self.gateways.get(gateway).unwrap_or_else(|| panic!("case {} has no Gateway {gateway}", self.name));
        SocketAddr::new(*ip, port + PORT_OFFSET)
    }

    /// Sends `req` to `gateway`'s `port` until the answer meets `want` [`IN_A_ROW`] times in a
    /// row; fails naming the last difference after [`WAIT`].
    pub async fn expect(&self, gateway: &str, port: u16, req: &Request, want: &Expect) -> anyhow::Result<()> {
        let addr = self.addr(gateway, port);
        let what = || format!("{} {} {:?}", req.method.unwrap_or("GET"), req.path, req.host);
        let (tls, asked) = self.tls_for(req)?.unzip();
        let default_host = upstream_default_host(addr.ip(), port, tls.is_some());
        self.converge(&what, || async {
            match send_over(addr, req, tls.as_ref(), Some(&default_host)).await {
                Ok(answer) => check(&answer, req, want).err(),
                Err(e) => Some(format!("{e:#}")),
            }
        })
        .await?;
        self.client_certificate_asked(&what(), req, asked)
    }

    /// As upstream after a TLS request with a client certificate: the gateway asked for it in
    /// a handshake ("client certificate was not presented during the handshake").
    fn client_certificate_asked(
        &self,
        what: &str,
        req: &Request,
        asked: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> anyhow::Result<()> {
        let asked = asked.is_some_and(|a| a.load(std::sync::atomic::Ordering::Relaxed));
        if req.client_cert.is_some() && !asked {
            bail!(
                "case {}: {what}: the gateway never asked for a client certificate (upstream: \"client certificate \
                 was not presented during the handshake\")",
                self.name
            );
        }
        Ok(())
    }

    /// The TLS client a request over TLS is sent with: trusting the case's CA, presenting the
    /// request's client certificate if it names one (and noting whether the gateway asked).
    #[allow(clippy::type_complexity, reason = "a connector and its one flag, used together")]
    fn tls_for(
        &self,
        req: &Request,
    ) -> anyhow::Result<Option<(tokio_rustls::TlsConnector, std::sync::Arc<std::sync::atomic::AtomicBool>)>> {
        let client =
            req.client_cert.as_ref().map(|(cert, key)| crate::pki::Leaf { cert: cert.clone(), key: key.clone() });
        match (req.sni, &self.ca) {
            (Some(_), Some(ca)) => {
                let alpn: &[u8] = if req.h2 { b"h2" } else { b"http/1.1" };
                Ok(Some(crate::pki::client_config_asked(ca, client.as_ref(), alpn)?))
            }
            (Some(_), None) => bail!("case {}: a request over TLS, but the case has no certificates", self.name),
            (None, _) => Ok(None),
        }
    }

    /// Sends `req` to `gateway`'s `port` until it fails (no answer: the connection or the TLS
    /// handshake is refused) [`IN_A_ROW`] times in a row, as upstream's
    /// `MakeTLSRequestAndExpectEventuallyConsistentFailureResponse`.
    pub async fn expect_refused(&self, gateway: &str, port: u16, req: &Request) -> anyhow::Result<()> {
        let addr = self.addr(gateway, port);
        let (tls, asked) = self.tls_for(req)?.unzip();
        let default_host = upstream_default_host(addr.ip(), port, tls.is_some());
        let what = || format!("{} {:?} refused", req.path, req.host);
        self.converge(&what, || async {
            match send_over(addr, req, tls.as_ref(), Some(&default_host)).await {
                Ok(answer) => Some(format!("answered {}", answer.status)),
                Err(_) => None,
            }
        })
        .await?;
        self.client_certificate_asked(&what(), req, asked)
    }

    /// Probes until `probe` finds nothing wrong [`IN_A_ROW`] times in a row; after [`WAIT`],
    /// fails naming `what` and the last problem.
    async fn converge<F, Fut>(&self, what: impl Fn() -> String, mut probe: F) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<String>>,
    {
        let deadline = Instant::now() + self.wait;
        let mut in_a_row = 0;
        loop {
            match probe().await {
                None => {
                    in_a_row += 1;
                    if in_a_row == IN_A_ROW {
                        return Ok(());
                    }
                }
                Some(p) => {
                    in_a_row = 0;
                    if Instant::now() > deadline {
                        bail!("case {}: {}: {p}", self.name, what());
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}

/// A gRPC call as the upstream GRPCRoute tests make it.
#[derive(Debug, Clone, Default)]
pub struct GrpcCall {
    /// `Echo`, `EchoTwo` or `EchoThree`.
    pub method: &'static str,
    pub authority: Option<&'static str>,
    pub metadata: Vec<(&'static str, &'static str)>,
}

/// What a gRPC call must give: a status code other than OK, or the pod (by prefix) and
/// namespace that answered and request headers it received.
#[derive(Debug, Clone, Default)]
pub struct GrpcExpect {
    pub code: Option<tonic::Code>,
    pub backend: Option<&'static str>,
    pub namespace: Option<&'static str>,
    pub received: Vec<(&'static str, &'static str)>,
    pub absent: Vec<&'static str>,
}

/// Why a gRPC answer is not what `want` says, if it is not.
fn check_grpc(
    result: &Result<crate::grpc_echo::EchoResponse, tonic::Status>,
    call: &GrpcCall,
    want: &GrpcExpect,
) -> Result<(), String> {
    let r = match (result, want.code) {
        (Err(status), Some(code)) if status.code() == code => return Ok(()),
        (Err(status), _) => return Err(format!("status {:?}: {}", status.code(), status.message())),
        (Ok(_), Some(code)) => return Err(format!("answered OK, want {code:?}")),
        (Ok(r), None) => r,
    };
    let method = format!("/{}/{}", crate::grpc_echo::SERVICE, call.method);
    if r.fully_qualified_method != method {
        return Err(format!("the backend saw {} (want {method})", r.fully_qualified_method));
    }
    if let Some(b) = want.backend
        && !r.pod.starts_with(b)
    {
        return Err(format!("reached pod {:?} (want {b})", r.pod));
    }
    if let Some(ns) = want.namespace
        && r.namespace != ns
    {
        return Err(format!("reached namespace {:?} (want {ns})", r.namespace));
    }
    for (k, v) in &want.received {
        if r.header(k).as_deref() != Some(*v) {
            return Err(format!("the backend got {k}: {:?} (want {v:?})", r.header(k)));
        }
    }
    for k in &want.absent {
        if let Some(v) = r.header(k) {
            return Err(format!("the backend got {k}: {v:?} (want it absent)"));
        }
    }
    Ok(())
}

/// `text` without the YAML documents `drop` picks.
fn remove_documents(text: &str, drop: impl Fn(&xdst_core::intent::IntentDocument) -> bool) -> String {
    text.split("\n---")
        .filter(|part| match xdst_core::intent::parse_file("part.yaml", part) {
            Ok(docs) => !docs.iter().any(&drop),
            Err(_) => true,
        })
        .collect::<Vec<_>>()
        .join("\n---")
}

/// The Secrets the case's Gateways name and the case does not ship, as YAML added to
/// `extra`, with one certificate (see the module's notes) made in `dir`; the CA's path, if any
/// was needed.
pub fn certificate_secrets(
    docs: &[xdst_core::intent::IntentDocument],
    dir: &std::path::Path,
    extra: &mut String,
) -> anyhow::Result<Option<PathBuf>> {
    let shipped: std::collections::BTreeSet<String> =
        docs.iter().filter(|d| d.kind == "Secret").map(|d| d.id().to_string()).collect();
    let mut wanted = std::collections::BTreeSet::new();
    for d in docs.iter().filter(|d| d.kind == "Gateway") {
        let gateway_ns = d.namespace.clone().unwrap_or_else(|| "default".into());
        for l in d.json["spec"]["listeners"].as_array().into_iter().flatten() {
            for r in l["tls"]["certificateRefs"].as_array().into_iter().flatten() {
                let ns = r["namespace"].as_str().unwrap_or(&gateway_ns).to_owned();
                let name = r["name"].as_str().unwrap_or_default().to_owned();
                // Only the certificates upstream makes in code: a Secret a case names and
                // neither ships nor makes (`nonexistent-certificate`) stays missing.
                let made = name == "tls-validity-checks-certificate"
                    || (ns == "gateway-conformance-web-backend" && name == "certificate");
                if made && !shipped.contains(&format!("Secret/{ns}/{name}")) {
                    wanted.insert((ns, name));
                }
            }
        }
    }
    if wanted.is_empty() {
        return Ok(None);
    }
    let ca = crate::pki::Ca::new(dir, "gateway-conformance-ca")?;
    // Upstream names `*`, `*.org` and `*.wildcard.org`; rustls takes no wildcard over a
    // single label, so the `.org` names the cases use are listed one by one.
    let sans = [
        "DNS:*.org",
        "DNS:*.wildcard.org",
        "DNS:example.org",
        "DNS:second-example.org",
        "DNS:unknown-example.org",
        "DNS:https-listener.org",
    ];
    let leaf = ca.issue("gateway-conformance", &sans)?;
    let b64 = |p: &std::path::Path| -> anyhow::Result<String> {
        use base64::Engine as _;
        Ok(base64::engine::general_purpose::STANDARD.encode(std::fs::read(p)?))
    };
    let (crt, key) = (b64(&leaf.cert)?, b64(&leaf.key)?);
    for (ns, name) in wanted {
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": ns},
            "data": {"tls.crt": crt, "tls.key": key},
        });
        extra.push_str(&format!("---\n{secret}\n"));
    }
    Ok(Some(ca.cert))
}

/// One request on a fresh connection (HTTP/1.1, or h2c when the request says so), within 5 s.
/// A request that names no host is for `addr` as it is.
pub async fn send(addr: SocketAddr, req: &Request) -> anyhow::Result<Answer> {
    send_over(addr, req, None, None).await
}

/// The Host upstream's client sends when a test names none (its `CalculateHost`): the
/// Gateway's address, with the Gateway's `port` unless the scheme implies it.
fn upstream_default_host(ip: IpAddr, port: u16, tls: bool) -> String {
    let ip = match ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    };
    let implied = if tls { 443 } else { 80 };
    if port == implied { ip } else { format!("{ip}:{port}") }
}

/// [`send`], over TLS with the request's server name when `tls` is given, with
/// `default_host` (else `addr`) as the host when the request names none.
async fn send_over(
    addr: SocketAddr,
    req: &Request,
    tls: Option<&tokio_rustls::TlsConnector>,
    default_host: Option<&str>,
) -> anyhow::Result<Answer> {
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
        let stream: Box<dyn Io> = match (tls, req.sni) {
            (Some(tls), Some(sni)) => {
                let name = rustls_pki_types::ServerName::try_from(sni)?.to_owned();
                Box::new(tls.connect(name, stream).await.with_context(|| format!("TLS to {addr} as {sni}"))?)
            }
            _ => Box::new(stream),
        };
        let io = hyper_util::rt::TokioIo::new(stream);
        let host = req.host.or(default_host).map_or_else(|| addr.to_string(), str::to_owned);
        let mut builder = http::Request::builder().method(req.method.unwrap_or("GET"));
        if req.h2 {
            // HTTP/2 carries the host as the URI's authority.
            let scheme = if tls.is_some() { "https" } else { "http" };
            builder = builder.uri(format!("{scheme}://{host}{}", req.path));
        } else {
            builder = builder.uri(req.path).header("host", host);
        }
        for (k, v) in &req.headers {
            builder = builder.header(*k, *v);
        }
        if !req.backend_sets.is_empty() {
            let pairs: Vec<String> = req.backend_sets.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            builder = builder.header("X-Echo-Set-Header", pairs.join(","));
        }
        let request = builder.body(Empty::<bytes::Bytes>::new())?;
        let response = if req.h2 {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await?;
            tokio::spawn(conn);
            sender.send_request(request).await?
        } else {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(conn);
            sender.send_request(request).await?
        };
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::Ok(Answer { status, headers, body: String::from_utf8_lossy(&body).into_owned() })
    };
    tokio::time::timeout(Duration::from_secs(5), exchange).await.context("no answer within 5 s")?
}

/// A connection, plain or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The pod of the echo backend that gave `answer`, if one did: the echo's body is JSON naming
/// its pod and namespace; Envoy's own answers never are.
fn echo_pod(answer: &Answer) -> Option<String> {
    let body: Value = serde_json::from_str(&answer.body).ok()?;
    body.get("namespace")?.as_str()?;
    Some(body.get("pod")?.as_str()?.to_owned())
}

/// Why `answer` is not what `want` says, if it is not.
pub fn check(answer: &Answer, req: &Request, want: &Expect) -> Result<(), String> {
    if answer.status != want.status && !want.or_statuses.contains(&answer.status) {
        return Err(format!(
            "status {} (want {}): {}",
            answer.status,
            want.status,
            answer.body.chars().take(200).collect::<String>()
        ));
    }
    for (k, v) in &want.response_headers {
        if answer.header(k).as_deref() != Some(*v) {
            return Err(format!("response header {k}: {:?} (want {v:?})", answer.header(k)));
        }
    }
    for k in &want.response_absent_headers {
        if answer.header(k).is_some() {
            return Err(format!("response header {k} is present: {:?}", answer.header(k)));
        }
    }
    let bare = |v: &str| v.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    for (k, options) in &want.response_one_of {
        let got = answer.header(k);
        if !got.as_deref().is_some_and(|v| options.iter().any(|o| bare(o) == bare(v))) {
            return Err(format!("response header {k}: {got:?} (want one of {options:?})"));
        }
    }
    if let Some(r) = &want.redirect {
        let location = answer.header("location").unwrap_or_default();
        let (scheme, rest) = location.split_once("://").unwrap_or(("", &location));
        let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => (h, p),
            _ => (authority, ""),
        };
        let sent_host = req.host.unwrap_or("").split(':').next().unwrap_or("");
        let want_host = r.host.unwrap_or(if sent_host.is_empty() { host } else { sent_host });
        // As upstream: with no port expected, the scheme's own port may still be written.
        let port = match (r.port, scheme, port) {
            (None, "http", "80") | (None, "https", "443") => "",
            _ => port,
        };
        let want = (r.scheme.unwrap_or("http"), want_host, r.port.unwrap_or(""), r.path.unwrap_or(req.path));
        if (scheme, host, port, path) != want {
            return Err(format!("location {location:?}: (scheme, host, port, path) want {want:?}"));
        }
    }
    if want.by_gateway
        && let Some(pod) = echo_pod(answer)
    {
        return Err(format!(
            "answered by the backend (pod {pod:?}), not by the gateway: status {}, {}",
            answer.status,
            answer.body.chars().take(200).collect::<String>()
        ));
    }
    if want.backend.is_none() && want.namespace.is_none() {
        return Ok(());
    }
    let echo: Value =
        serde_json::from_str(&answer.body).map_err(|e| format!("not an echo answer ({e}): {}", answer.body))?;
    let field = |k: &str| echo[k].as_str().unwrap_or("").to_owned();
    if let Some(b) = want.backend
        && !field("pod").starts_with(b)
    {
        return Err(format!("reached pod {:?} (want {b})", field("pod")));
    }
    if let Some(ns) = want.namespace
        && field("namespace") != ns
    {
        return Err(format!("reached namespace {:?} (want {ns})", field("namespace")));
    }
    let path = want.backend_path.unwrap_or(req.path);
    if field("path") != path {
        return Err(format!("the backend got path {:?} (want {path:?})", field("path")));
    }
    // As upstream: the Host that reached the backend is the one sent, unless the test says
    // otherwise; it compares them exactly, so a port the gateway dropped is a difference.
    if let Some(host) = want.backend_host.or(req.host)
        && field("host") != host
    {
        return Err(format!("the backend got host {:?} (want {host:?})", field("host")));
    }
    let header = |name: &str| -> Option<String> {
        let map = echo["headers"].as_object()?;
        let (_, values) = map.iter().find(|(k, _)| k.eq_ignore_ascii_case(name))?;
        Some(values.as_array()?.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","))
    };
    // As upstream: a 200 or 204 compares the method, and the headers sent unless the test
    // says what must arrive instead.
    if matches!(answer.status, 200 | 204) {
        let method = want.backend_method.or(req.method).unwrap_or("GET");
        if field("method") != method {
            return Err(format!("the backend got method {:?} (want {method:?})", field("method")));
        }
        let named = !want.backend_headers.is_empty() || !want.backend_absent_headers.is_empty();
        if !named && !want.expected_request {
            for (k, v) in &req.headers {
                if header(k).as_deref() != Some(*v) {
                    return Err(format!("the backend got header {k}: {:?} (sent {v:?})", header(k)));
                }
            }
        }
    }
    if let Some(sni) = want.backend_sni {
        let seen = echo["tls"]["serverName"].as_str();
        if seen != Some(sni) {
            return Err(format!("the backend saw server name {seen:?} (want {sni:?})"));
        }
    }
    for (k, v) in &want.backend_headers {
        if header(k).as_deref() != Some(*v) {
            return Err(format!("the backend got header {k}: {:?} (want {v:?})", header(k)));
        }
    }
    for k in &want.backend_absent_headers {
        if let Some(v) = header(k) {
            return Err(format!("the backend got header {k}: {v:?} (want it absent)"));
        }
    }
    Ok(())
}

/// Now as Kubernetes writes `creationTimestamp` (RFC 3339, seconds, UTC): what the API server
/// stamps on an object a test creates mid-test.
pub fn creation_timestamp_now() -> String {
    xdst_core::intent::creation_timestamp(std::time::SystemTime::now())
}

/// Waits until the clock, to the second, is past `stamp` (a `creationTimestamp`): an object
/// made from then on is newer than one stamped `stamp`, as upstream's Go test sleeps a second.
pub async fn past(stamp: &str) {
    while creation_timestamp_now().as_str() <= stamp {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An object newer than the case's: `kind` of `api_version`, in `namespace`, with `spec` (YAML,
/// indented two spaces), and the `creationTimestamp` of a second from now. xdst stamps the
/// case's objects when it first sees them, to the second, so an object stamped now could tie
/// with them (and a tie goes by name); upstream's Go test sleeps a second instead.
pub fn newer_object(api_version: &str, kind: &str, namespace: &str, name: &str, spec: &str) -> String {
    let created = xdst_core::intent::creation_timestamp(std::time::SystemTime::now() + Duration::from_secs(1));
    format!(
        "apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: {name}, namespace: {namespace}, creationTimestamp: \
         \"{created}\"}}\nspec:\n{spec}"
    )
}

/// Checks a route's status toward the Gateway `gateway` (its name): the condition `kind` is
/// `status` (`True`/`False`) with `reason` (any, when empty), as upstream's
/// `*RouteMustHaveCondition`.
pub fn route_condition(
    gateway: &'static str,
    kind: &'static str,
    status: &'static str,
    reason: &'static str,
) -> impl Fn(&Value) -> Result<(), String> {
    move |doc: &Value| {
        let parents = doc["status"]["parents"].as_array().ok_or("no parents")?;
        let parent =
            parents.iter().find(|p| p["parentRef"]["name"] == gateway).ok_or(format!("no parent {gateway}"))?;
        if has_condition(&parent["conditions"], (kind, status, reason)) {
            Ok(())
        } else {
            Err(format!("want {kind} {status} ({reason}) toward {gateway}"))
        }
    }
}

/// Whether `conditions` has one of type `kind` with `status` and `reason` (any, when empty).
fn has_condition(conditions: &Value, (kind, status, reason): (&str, &str, &str)) -> bool {
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == status && (reason.is_empty() || c["reason"] == reason))
}

/// Every condition of the document (its own, its listeners', its parents') carries its
/// `metadata.generation` as `observedGeneration` (upstream's `*MustHaveLatestConditions`).
pub fn latest_conditions(doc: &Value) -> Result<(), String> {
    let generation = doc["metadata"]["generation"].as_i64().ok_or("no metadata.generation")?;
    let status = &doc["status"];
    let mut lists = vec![&status["conditions"]];
    lists.extend(status["parents"].as_array().into_iter().flatten().map(|p| &p["conditions"]));
    if lists.iter().all(|l| l.as_array().is_none_or(|l| l.is_empty())) {
        return Err("no conditions yet".into());
    }
    for c in lists.into_iter().filter_map(Value::as_array).flatten() {
        if c["observedGeneration"].as_i64() != Some(generation) {
            return Err(format!(
                "{} has observedGeneration {} (generation {generation})",
                c["type"], c["observedGeneration"]
            ));
        }
    }
    Ok(())
}

/// One listener's status as an upstream test expects it: its name, its `supportedKinds`
/// (empty: none), `attachedRoutes`, and conditions `(type, status, reason)` (reason empty:
/// any).
pub struct ListenerWant {
    pub name: &'static str,
    pub kinds: &'static [&'static str],
    pub attached: u64,
    pub conditions: &'static [(&'static str, &'static str, &'static str)],
}

/// Accepted and Programmed, as a listener that serves has them.
pub const SERVING: &[(&str, &str, &str)] = &[("Accepted", "True", "Accepted"), ("Programmed", "True", "Programmed")];

/// Checks a Gateway's listeners as upstream's `GatewayStatusMustHaveListeners` does: the
/// Gateway's conditions are of its latest generation, it has exactly the listeners wanted,
/// each with the kinds wanted (none when none), the routes attached, and the conditions.
pub fn listeners(want: &[ListenerWant]) -> impl Fn(&Value) -> Result<(), String> + '_ {
    move |doc: &Value| {
        latest_conditions(doc)?;
        let actual = doc["status"]["listeners"].as_array().cloned().unwrap_or_default();
        if actual.len() != want.len() {
            return Err(format!("{} listeners in the status, want {}", actual.len(), want.len()));
        }
        for w in want {
            let l = actual.iter().find(|l| l["name"] == w.name).ok_or(format!("no listener {}", w.name))?;
            let kinds: Vec<&str> =
                l["supportedKinds"].as_array().into_iter().flatten().filter_map(|k| k["kind"].as_str()).collect();
            if w.kinds.is_empty() && !kinds.is_empty() || w.kinds.iter().any(|k| !kinds.contains(k)) {
                return Err(format!("listener {}: supportedKinds {kinds:?}, want {:?}", w.name, w.kinds));
            }
            if l["attachedRoutes"] != w.attached {
                return Err(format!(
                    "listener {}: attachedRoutes {} (want {})",
                    w.name, l["attachedRoutes"], w.attached
                ));
            }
            for c in w.conditions {
                if !has_condition(&l["conditions"], *c) {
                    return Err(format!("listener {}: want {} {} ({})", w.name, c.0, c.1, c.2));
                }
            }
        }
        Ok(())
    }
}

/// The document's own condition `kind` is `status` with `reason` (any when empty), of its
/// latest generation (upstream's `GatewayMustHaveCondition`).
pub fn own_condition(
    kind: &'static str,
    status: &'static str,
    reason: &'static str,
) -> impl Fn(&Value) -> Result<(), String> {
    move |doc: &Value| {
        latest_conditions(doc)?;
        if has_condition(&doc["status"]["conditions"], (kind, status, reason)) {
            Ok(())
        } else {
            Err(format!("want {kind} {status} ({reason})"))
        }
    }
}

/// Each named listener of the document has `conditions` (upstream's
/// `ListenerSetListenersMustHaveConditions` and `GatewayListenersMustHaveConditions`).
pub fn listener_conditions<'a>(
    names: &'a [&'a str],
    conditions: &'a [(&'a str, &'a str, &'a str)],
) -> impl Fn(&Value) -> Result<(), String> + 'a {
    move |doc| {
        latest_conditions(doc)?;
        for name in names {
            let l = doc["status"]["listeners"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|l| l["name"] == *name)
                .ok_or(format!("no listener {name}"))?;
            for (kind, status, reason) in conditions {
                let found = l["conditions"].as_array().into_iter().flatten().any(|c| {
                    c["type"] == *kind && c["status"] == *status && (reason.is_empty() || c["reason"] == *reason)
                });
                if !found {
                    return Err(format!("listener {name}: want {kind} {status} ({reason})"));
                }
            }
        }
        Ok(())
    }
}

/// Checks that no listener of a Gateway has a route attached (upstream's
/// `GatewayMustHaveZeroRoutes`).
pub fn no_routes(doc: &Value) -> Result<(), String> {
    let s = &doc["status"];
    if s["listeners"].as_array().is_none_or(|l| l.is_empty()) {
        return Err("no listener statuses".into());
    }
    let attached: u64 =
        s["listeners"].as_array().into_iter().flatten().filter_map(|l| l["attachedRoutes"].as_u64()).sum();
    if attached == 0 { Ok(()) } else { Err(format!("{attached} routes attached (want 0)")) }
}

/// No parent of the route has `Accepted: True` (upstream's `*RouteMustHaveNoAcceptedParents`).
pub fn no_accepted_parent(doc: &Value) -> Result<(), String> {
    let accepted = doc["status"]["parents"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| has_condition(&p["conditions"], ("Accepted", "True", "")));
    if accepted { Err("a parent accepted the route".into()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(pod: &str, path: &str) -> Answer {
        let body = serde_json::json!({
            "path": path, "host": "h", "method": "GET", "proto": "HTTP/1.1", "namespace": "ns", "pod": pod,
            "headers": {"X-A": ["1", "2"]},
        });
        Answer {
            status: 200,
            headers: vec![("location".into(), "https://example.org:8083/p".into())],
            body: body.to_string(),
        }
    }

    #[test]
    fn checks_fail_on_every_difference() {
        let req = Request { path: "/x", ..Default::default() };
        let good = Expect { status: 200, backend: Some("v1"), namespace: Some("ns"), ..Default::default() };
        assert_eq!(check(&echo("v1-0", "/x"), &req, &good), Ok(()));
        assert!(check(&echo("v2-0", "/x"), &req, &good).unwrap_err().contains("pod"));
        assert!(check(&echo("v1-0", "/y"), &req, &good).unwrap_err().contains("path"));
        let mut a = echo("v1-0", "/x");
        a.status = 404;
        assert!(check(&a, &req, &good).unwrap_err().contains("status"));
        let headers = Expect { backend_headers: vec![("x-a", "1,2")], ..good.clone() };
        assert_eq!(check(&echo("v1-0", "/x"), &req, &headers), Ok(()));
        let absent = Expect { backend_absent_headers: vec!["X-A"], ..good.clone() };
        assert!(check(&echo("v1-0", "/x"), &req, &absent).is_err());
        let redirect = |port| Expect {
            status: 200,
            redirect: Some(Redirect { scheme: Some("https"), host: Some("example.org"), port, path: Some("/p") }),
            ..Default::default()
        };
        assert_eq!(check(&echo("v1-0", "/x"), &req, &redirect(Some("8083"))), Ok(()));
        assert!(check(&echo("v1-0", "/x"), &req, &redirect(None)).is_err(), "a port the test did not expect");
    }

    #[test]
    fn the_backend_must_get_the_host_that_was_sent_port_and_all() {
        // The echo says it got "h".
        let sent = |host| Request { path: "/x", host: Some(host), ..Default::default() };
        let good = Expect { status: 200, backend: Some("v1"), namespace: Some("ns"), ..Default::default() };
        assert_eq!(check(&echo("v1-0", "/x"), &sent("h"), &good), Ok(()));
        let err = check(&echo("v1-0", "/x"), &sent("h:8080"), &good).unwrap_err();
        assert!(err.contains(r#"host "h" (want "h:8080")"#), "{err}");
        // A rewrite says what the backend gets instead.
        let rewritten = Expect { backend_host: Some("h"), ..good.clone() };
        assert_eq!(check(&echo("v1-0", "/x"), &sent("other:8080"), &rewritten), Ok(()));
        // With no host named, upstream checks none.
        assert_eq!(check(&echo("v1-0", "/x"), &Request { path: "/x", ..Default::default() }, &good), Ok(()));
    }

    #[test]
    fn an_answer_the_gateway_must_give_is_not_a_backends() {
        let req = Request { path: "/x", method: Some("OPTIONS"), ..Default::default() };
        let want = Expect { status: 200, by_gateway: true, ..Default::default() };
        let err = check(&echo("v1-0", "/x"), &req, &want).unwrap_err();
        assert!(err.contains("answered by the backend"), "{err}");
        let envoy = Answer { status: 200, headers: vec![], body: String::new() };
        assert_eq!(check(&envoy, &req, &want), Ok(()));
        let not_found = Answer { status: 200, headers: vec![], body: "not found".into() };
        assert_eq!(check(&not_found, &req, &want), Ok(()));
    }

    #[test]
    fn the_default_host_is_upstreams() {
        let ip: IpAddr = "127.1.2.10".parse().unwrap();
        assert_eq!(upstream_default_host(ip, 80, false), "127.1.2.10");
        assert_eq!(upstream_default_host(ip, 8080, false), "127.1.2.10:8080");
        assert_eq!(upstream_default_host(ip, 443, true), "127.1.2.10");
        assert_eq!(upstream_default_host(ip, 80, true), "127.1.2.10:80");
        assert_eq!(upstream_default_host("::1".parse().unwrap(), 8080, false), "[::1]:8080");
    }
}

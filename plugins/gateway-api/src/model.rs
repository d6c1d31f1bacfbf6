//! The Gateway API and Kubernetes objects this plugin reads, as serde types.
//!
//! Lenient by design: Kubernetes objects carry many fields a translation does not need
//! (`selector`, `clusterIP`, `sessionPersistence`, ...), and the upstream API server has
//! validated them, so unknown fields are ignored rather than refused. Defaults follow the
//! specification (a path match defaults to `PathPrefix /`, a header match to `Exact`, ...).

use std::collections::BTreeMap;

use serde::Deserialize;

/// The Gateway annotation that keeps its plain HTTP ports routing by exact host over scoped
/// RDS whatever routes come and go (design 021, "Hostile teams"): a route that would need a
/// wildcard virtual host there is not accepted on such a listener, instead of changing the
/// port's form, and so its Listener, for everyone on it.
pub const ROUTE_BY_HOST: &str = "xdst.dev/route-by-host";

/// `metadata`, the parts a translation reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub creation_timestamp: Option<String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl Metadata {
    /// Whether xdst marked the object as a team's (written through a namespace token, a
    /// namespace directory or a namespace's store prefix), not the platform's.
    pub fn written_by_team(&self) -> bool {
        self.annotations.get("xdst.dev/written-by").is_some_and(|v| v == "team")
    }

    /// Whether a Gateway's owner pinned its plain HTTP ports to routing by exact host
    /// ([`ROUTE_BY_HOST`]`: "true"`).
    pub fn routes_by_host(&self) -> bool {
        self.annotations.get(ROUTE_BY_HOST).is_some_and(|v| v == "true")
    }
}

/// Any object: its metadata and `spec`.
#[derive(Debug, Clone, Deserialize)]
pub struct Object<S> {
    pub metadata: Metadata,
    #[serde(default = "Option::default")]
    pub spec: Option<S>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    #[serde(default)]
    pub controller_name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    #[serde(default)]
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    #[serde(default)]
    pub addresses: Vec<GatewayAddress>,
    #[serde(default)]
    pub infrastructure: Option<Infrastructure>,
    /// Which ListenerSets may add listeners to it (none by default).
    #[serde(default)]
    pub allowed_listeners: Option<AllowedListeners>,
    /// TLS settings of the whole Gateway: client certificate validation on its HTTPS
    /// listeners (`frontend`).
    #[serde(default)]
    pub tls: Option<GatewayTls>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayTls {
    #[serde(default)]
    pub frontend: Option<FrontendTls>,
    #[serde(default)]
    pub backend: Option<BackendTlsSettings>,
}

/// `tls.backend`: the client certificate the Gateway presents to backends it reaches over TLS.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsSettings {
    #[serde(default)]
    pub client_certificate_ref: Option<SecretRef>,
}

/// Client certificate validation: a `default` for every HTTPS listener, and `perPort`
/// settings that replace it on their port.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrontendTls {
    #[serde(default)]
    pub default: Option<TlsSettings>,
    #[serde(default)]
    pub per_port: Vec<PortTls>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortTls {
    pub port: u16,
    #[serde(default)]
    pub tls: TlsSettings,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsSettings {
    #[serde(default)]
    pub validation: Option<ClientValidation>,
}

/// `validation`: the CA bundles a client certificate must chain to, and `mode`
/// (`AllowValidOnly`, the default, or `AllowInsecureFallback`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientValidation {
    #[serde(default)]
    pub ca_certificate_refs: Vec<SecretRef>,
    #[serde(default)]
    pub mode: Option<String>,
}

/// A core `ConfigMap`: its `data` (a CA bundle is PEM under `ca.crt`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    #[serde(default)]
    pub metadata: Metadata,
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

/// A Gateway's `allowedListeners`: the namespaces whose ListenerSets it takes (`from`:
/// `None`, the default, `Same`, `All` or `Selector`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedListeners {
    #[serde(default)]
    pub namespaces: Option<RouteNamespaces>,
}

/// A ListenerSet: listeners added to its parent Gateway.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSetSpec {
    #[serde(default)]
    pub parent_ref: ObjectRef,
    #[serde(default)]
    pub listeners: Vec<Listener>,
}

/// A Gateway's `infrastructure`: labels and annotations for what an implementation creates
/// (xdst creates nothing), and `parametersRef`, implementation parameters (xdst takes none).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Infrastructure {
    #[serde(default)]
    pub parameters_ref: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayAddress {
    /// `IPAddress` (the default), `Hostname`, or an implementation's own.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Empty: the implementation picks one (`GatewayAddressEmpty`).
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    #[serde(default)]
    pub hostname: Option<String>,
    pub port: u16,
    pub protocol: String,
    #[serde(default)]
    pub allowed_routes: Option<AllowedRoutes>,
    /// For HTTPS: how TLS ends and with which certificates.
    #[serde(default)]
    pub tls: Option<ListenerTls>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// `Terminate` (the default) or `Passthrough`.
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub certificate_refs: Vec<SecretRef>,
}

/// A listener's `certificateRefs` entry: a Secret by default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A core `Secret`: its `type` and base64 `data`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    #[serde(default)]
    pub metadata: Metadata,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoutes {
    #[serde(default)]
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default)]
    pub kinds: Option<Vec<RouteGroupKind>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteNamespaces {
    /// `Same` (the default), `All` or `Selector`.
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelExpression>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelExpression {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    #[serde(default)]
    pub group: Option<String>,
    pub kind: String,
}

/// A reference to another object: a parent or a backend.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub section_name: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub weight: Option<u32>,
    /// A backendRef's own filters.
    #[serde(default)]
    pub filters: Vec<Filter>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ObjectRef>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<HttpRouteRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRule {
    #[serde(default)]
    pub matches: Vec<HttpRouteMatch>,
    #[serde(default)]
    pub filters: Vec<Filter>,
    #[serde(default)]
    pub backend_refs: Vec<ObjectRef>,
    #[serde(default)]
    pub timeouts: Option<Timeouts>,
    #[serde(default)]
    pub retry: Option<Retry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteMatch {
    #[serde(default)]
    pub path: Option<PathMatch>,
    #[serde(default)]
    pub headers: Vec<ValueMatch>,
    #[serde(default)]
    pub query_params: Vec<ValueMatch>,
    #[serde(default)]
    pub method: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathMatch {
    /// `Exact`, `PathPrefix` (the default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
}

/// A header or query parameter match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValueMatch {
    /// `Exact` (the default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Filter {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub request_header_modifier: Option<HeaderModifier>,
    #[serde(default)]
    pub response_header_modifier: Option<HeaderModifier>,
    #[serde(default)]
    pub request_redirect: Option<Redirect>,
    #[serde(default)]
    pub url_rewrite: Option<UrlRewrite>,
    #[serde(default)]
    pub request_mirror: Option<Mirror>,
    #[serde(default)]
    pub cors: Option<Cors>,
}

/// An `HTTPCORSFilter`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cors {
    #[serde(default)]
    pub allow_origins: Vec<String>,
    #[serde(default)]
    pub allow_methods: Vec<String>,
    #[serde(default)]
    pub allow_headers: Vec<String>,
    #[serde(default)]
    pub expose_headers: Vec<String>,
    #[serde(default)]
    pub allow_credentials: Option<bool>,
    #[serde(default)]
    pub max_age: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderModifier {
    #[serde(default)]
    pub set: Vec<Header>,
    #[serde(default)]
    pub add: Vec<Header>,
    #[serde(default)]
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Redirect {
    #[serde(default)]
    pub scheme: Option<String>,
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub path: Option<PathModifier>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub status_code: Option<u16>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlRewrite {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub path: Option<PathModifier>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathModifier {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub replace_full_path: Option<String>,
    #[serde(default)]
    pub replace_prefix_match: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirror {
    pub backend_ref: ObjectRef,
    #[serde(default)]
    pub percent: Option<u32>,
    #[serde(default)]
    pub fraction: Option<Fraction>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Fraction {
    pub numerator: u32,
    #[serde(default)]
    pub denominator: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeouts {
    #[serde(default)]
    pub request: Option<String>,
    #[serde(default)]
    pub backend_request: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    #[serde(default)]
    pub codes: Vec<u32>,
    #[serde(default)]
    pub attempts: Option<u32>,
    #[serde(default)]
    pub backoff: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(default)]
    pub ports: Vec<ServicePort>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    #[serde(default)]
    pub name: Option<String>,
    pub port: u16,
    #[serde(default)]
    pub app_protocol: Option<String>,
}

/// An EndpointSlice: its body is outside `spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    pub metadata: Metadata,
    /// `IPv4`, `IPv6` or `FQDN`: only addresses of the first two are endpoints.
    #[serde(default)]
    pub address_type: Option<String>,
    #[serde(default)]
    pub endpoints: Vec<SliceEndpoint>,
    #[serde(default)]
    pub ports: Vec<SlicePort>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SliceEndpoint {
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub conditions: Option<Conditions>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Conditions {
    #[serde(default)]
    pub ready: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct SlicePort {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReferenceGrantSpec {
    #[serde(default)]
    pub from: Vec<GrantFrom>,
    #[serde(default)]
    pub to: Vec<GrantTo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GrantFrom {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GrantTo {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ObjectRef>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<GrpcRouteRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteRule {
    #[serde(default)]
    pub matches: Vec<GrpcRouteMatch>,
    #[serde(default)]
    pub filters: Vec<Filter>,
    #[serde(default)]
    pub backend_refs: Vec<ObjectRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteMatch {
    #[serde(default)]
    pub method: Option<GrpcMethodMatch>,
    #[serde(default)]
    pub headers: Vec<ValueMatch>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GrpcMethodMatch {
    /// `Exact` (the default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub service: Option<String>,
    #[serde(default)]
    pub method: Option<String>,
}

impl GrpcRouteSpec {
    /// The route as an HTTPRoute: a gRPC call is a POST to `/<service>/<method>`, so a method
    /// match is a path match, and the rest (headers, filters, backends) is the same.
    pub fn into_http(self) -> HttpRouteSpec {
        let rules = self
            .rules
            .into_iter()
            .map(|r| HttpRouteRule {
                matches: r
                    .matches
                    .into_iter()
                    .map(|m| HttpRouteMatch {
                        path: m.method.map(|method| method.into_path()),
                        headers: m.headers,
                        ..Default::default()
                    })
                    .collect(),
                filters: r.filters,
                backend_refs: r.backend_refs,
                ..Default::default()
            })
            .collect();
        HttpRouteSpec { parent_refs: self.parent_refs, hostnames: self.hostnames, rules }
    }
}

impl GrpcMethodMatch {
    fn into_path(self) -> PathMatch {
        let path = |kind: &str, value: String| PathMatch { kind: Some(kind.to_owned()), value: Some(value) };
        let regex = self.kind.as_deref() == Some("RegularExpression");
        match (regex, self.service, self.method) {
            (false, Some(s), Some(m)) => path("Exact", format!("/{s}/{m}")),
            (false, Some(s), None) => path("PathPrefix", format!("/{s}")),
            (false, None, Some(m)) => path("RegularExpression", format!("/[^/]+/{}", literal(&m))),
            (true, s, m) => path(
                "RegularExpression",
                format!("/{}/{}", s.unwrap_or_else(|| "[^/]+".into()), m.unwrap_or_else(|| "[^/]+".into())),
            ),
            (false, None, None) => path("PathPrefix", "/".into()),
        }
    }
}

/// `s` as an RE2 literal.
pub fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A BackendTLSPolicy: TLS from the gateway to the Services it targets.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsPolicySpec {
    #[serde(default)]
    pub target_refs: Vec<ObjectRef>,
    #[serde(default)]
    pub validation: BackendValidation,
}

/// How a backend's certificate is checked: the CA bundles it must chain to, the server name
/// to ask for (`hostname`, also the name checked when no `subjectAltNames` are given), and
/// the names the certificate must carry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendValidation {
    #[serde(default)]
    pub ca_certificate_refs: Vec<SecretRef>,
    #[serde(default)]
    pub well_known_ca_certificates: Option<String>,
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub subject_alt_names: Vec<SubjectAltName>,
}

/// One name a backend's certificate must carry: `Hostname` (a DNS name) or `URI`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubjectAltName {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub uri: Option<String>,
}

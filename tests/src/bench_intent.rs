//! Gateway API intent for the fleet benchmarks (`xdst-first200`, `xdst-fleet`; issue 37): one
//! namespace, `bench`, Gateways with one HTTP listener, Services with one EndpointSlice each,
//! and HTTPRoutes of path-prefix rules.

/// The namespace of every object.
pub const NS: &str = "bench";

/// A Gateway of class `xdst` with one HTTP listener on `port`.
pub fn gateway(name: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  \
         gatewayClassName: xdst\n  listeners: [{{name: http, port: {port}, protocol: HTTP}}]\n"
    )
}

/// Service `name` (port 80, `http`) and its EndpointSlice: `addresses` on `port`. `name` and
/// `port` are text, so that a template can hold placeholders.
pub fn service(name: &str, addresses: &[&str], port: &str) -> String {
    let endpoints = addresses.iter().map(|a| format!("{{addresses: [{a}]}}")).collect::<Vec<_>>().join(", ");
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  ports: [{{name: http, \
         port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}, namespace: \
         {NS}, labels: {{kubernetes.io/service-name: {name}}}}}\naddressType: IPv4\nendpoints: [{endpoints}]\nports: \
         [{{name: http, port: {port}}}]\n"
    )
}

/// HTTPRoute `name` on Gateway `gateway`: a rule per `(path prefix, Service)`, each with a
/// response header `x-change: <tag>` when `tag` is set.
pub fn route(name: &str, gateway: &str, rules: &[(&str, &str)], tag: Option<usize>) -> String {
    route_on(name, gateway, &[], rules, tag)
}

/// [`route`] for `hostnames` (none: every host).
pub fn route_on(name: &str, gateway: &str, hostnames: &[&str], rules: &[(&str, &str)], tag: Option<usize>) -> String {
    let filter = match tag {
        Some(t) => format!(
            "\n    filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: x-change, value: \
             \"{t}\"}}]}}}}]"
        ),
        None => String::new(),
    };
    let rules: String = rules
        .iter()
        .map(|(path, service)| {
            format!(
                "\n  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n    backendRefs: [{{name: {service}, \
                 port: 80}}]{filter}"
            )
        })
        .collect();
    let hostnames = match hostnames {
        [] => String::new(),
        h => format!("\n  hostnames: [{}]", h.join(", ")),
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  \
         parentRefs: [{{name: {gateway}}}]{hostnames}\n  rules:{rules}\n"
    )
}

/// `PUT /intent/<kind>/bench/<name>` on `admin` with the bearer `token`; the change id the
/// write carries (`GET /changes/{id}`).
pub async fn put(admin: std::net::SocketAddr, token: &str, kind: &str, name: &str, body: &str) -> anyhow::Result<i64> {
    let path = format!("/intent/{kind}/{NS}/{name}");
    let auth = format!("Bearer {token}");
    let (status, text) = crate::xds::http_with(admin, "PUT", &path, &[("Authorization", &auth)], body).await;
    anyhow::ensure!(status == 200, "PUT {path}: {status} {text}");
    let v: serde_json::Value = serde_json::from_str(&text)?;
    Ok(v["change"].as_i64().unwrap_or(0))
}

//! The translator called directly, as the host would: documents in, decoded messages checked.

use serde_json::{Value, json};
use xdst_guest::envoy::envoy::config::cluster::v3::{Cluster, cluster::LbPolicy};
use xdst_guest::envoy::envoy::config::core::v3::{address, health_check::HealthChecker, socket_address::PortSpecifier};
use xdst_guest::envoy::envoy::config::endpoint::v3::ClusterLoadAssignment;
use xdst_guest::envoy::envoy::config::listener::v3::{Listener, filter::ConfigType};
use xdst_guest::envoy::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, header_matcher::HeaderMatchSpecifier, route::Action,
    route_action::ClusterSpecifier, route_match::PathSpecifier,
};
use xdst_guest::envoy::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use xdst_guest::prost::Message;
use xdst_guest::{
    Body, Granularity, IntentDocument, Phase, PluginError, Severity, TranslateRequest, TranslateResponse, Translator,
    XdsResource,
};

use crate::Reference;

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const ROUTES: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

fn doc(kind: &str, name: &str, spec: Value) -> IntentDocument {
    IntentDocument {
        kind: kind.into(),
        name: name.into(),
        origin: format!("intent.yaml#{name}"),
        json: json!({"kind": kind, "metadata": {"name": name}, "spec": spec}).to_string(),
    }
}

fn run(docs: Vec<IntentDocument>) -> Result<TranslateResponse, PluginError> {
    Reference::translate(TranslateRequest {
        changes: None,
        node_group: String::new(),
        documents: docs,
        resources: vec![],
        config: "null".into(),
    })
}

fn ok(kind: &str, name: &str, spec: Value) -> TranslateResponse {
    run(vec![doc(kind, name, spec)]).unwrap_or_else(|e| panic!("{e:?}"))
}

fn err(kind: &str, name: &str, spec: Value) -> PluginError {
    run(vec![doc(kind, name, spec)]).expect_err("expected an error")
}

/// Decodes a resource, checking its envelope.
fn decode<M: Message + Default>(r: &XdsResource, type_url: &str, name: &str, document: &str) -> M {
    assert_eq!(r.type_url, type_url);
    assert_eq!(r.name, name);
    assert_eq!(r.document.as_deref(), Some(document));
    let Body::Proto(bytes) = &r.body else { panic!("expected protobuf") };
    M::decode(bytes.as_slice()).expect("decodes")
}

fn action(route: &Route) -> &RouteAction {
    match &route.action {
        Some(Action::Route(a)) => a,
        other => panic!("expected a route action, got {other:?}"),
    }
}

fn split(action: &RouteAction) -> Vec<(&str, u32)> {
    match &action.cluster_specifier {
        Some(ClusterSpecifier::Cluster(c)) => vec![(c.as_str(), 1)],
        Some(ClusterSpecifier::WeightedClusters(w)) => {
            w.clusters.iter().map(|c| (c.name.as_str(), c.weight.unwrap().value)).collect()
        }
        other => panic!("no destination: {other:?}"),
    }
}

#[test]
fn describe() {
    let info = Reference::describe();
    assert_eq!(info.name, "reference");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(info.kinds, ["Service", "HttpGateway", "GrpcService"]);
    assert_eq!(info.phase, Phase::Translate);
    assert_eq!(info.granularity, Granularity::PerDocument);
}

#[test]
fn service_with_localities_and_health_check() {
    let out = ok(
        "Service",
        "reviews",
        json!({
            "protocol": "grpc",
            "loadBalancing": "leastRequest",
            "connectTimeout": "250ms",
            "healthCheck": {"path": "/healthz", "interval": "5s", "unhealthyThreshold": 2},
            "circuitBreakers": {"maxRequests": 500},
            "localities": [
                {"region": "eu", "zone": "eu-a", "weight": 3, "endpoints": [
                    {"address": "10.0.0.1", "port": 8080, "weight": 2},
                    {"address": "10.0.0.2", "port": 8080}
                ]},
                {"region": "us", "priority": 1, "endpoints": [{"address": "::1", "port": 9090}]}
            ]
        }),
    );
    assert_eq!(out.resources.len(), 2);
    assert!(out.diagnostics.is_empty());
    let c: Cluster = decode(&out.resources[0], CLUSTER, "reviews", "Service/reviews");
    assert_eq!(c.lb_policy, LbPolicy::LeastRequest as i32);
    assert_eq!(c.connect_timeout.unwrap().nanos, 250_000_000);
    #[allow(deprecated, reason = "checks the deprecated field Envoy still reads")]
    let h2 = c.http2_protocol_options.is_some();
    assert!(h2, "grpc means an HTTP/2 upstream");
    assert!(
        c.common_lb_config.as_ref().unwrap().locality_config_specifier.is_some(),
        "locality weights honoured by Envoy too"
    );
    let hc = &c.health_checks[0];
    assert_eq!(hc.interval.unwrap().seconds, 5);
    assert_eq!(hc.unhealthy_threshold.unwrap().value, 2);
    assert_eq!(hc.healthy_threshold.unwrap().value, 1, "default");
    let Some(HealthChecker::HttpHealthCheck(http)) = &hc.health_checker else { panic!() };
    assert_eq!((http.path.as_str(), http.codec_client_type), ("/healthz", 1));
    let t = &c.circuit_breakers.unwrap().thresholds[0];
    assert_eq!(t.max_requests.unwrap().value, 500);

    let cla: ClusterLoadAssignment = decode(&out.resources[1], ENDPOINTS, "reviews", "Service/reviews");
    assert_eq!(cla.cluster_name, "reviews");
    let eu = &cla.endpoints[0];
    assert_eq!(eu.locality.as_ref().unwrap().zone, "eu-a");
    assert_eq!(eu.load_balancing_weight.unwrap().value, 3);
    assert_eq!(eu.lb_endpoints.len(), 2);
    assert_eq!(eu.lb_endpoints[0].load_balancing_weight.unwrap().value, 2);
    assert!(eu.lb_endpoints[1].load_balancing_weight.is_none());
    assert_eq!(cla.endpoints[1].priority, 1);
}

#[test]
fn service_defaults_and_empty_warning() {
    let out = ok("Service", "web", json!({"endpoints": [{"address": "127.0.0.1", "port": 8080}]}));
    let c: Cluster = decode(&out.resources[0], CLUSTER, "web", "Service/web");
    assert_eq!(c.lb_policy, LbPolicy::RoundRobin as i32);
    assert!(c.connect_timeout.is_none() && c.health_checks.is_empty());
    assert!(c.common_lb_config.is_none());
    let cla: ClusterLoadAssignment = decode(&out.resources[1], ENDPOINTS, "web", "Service/web");
    assert_eq!(cla.endpoints.len(), 1);
    assert_eq!(cla.endpoints[0].load_balancing_weight.unwrap().value, 1, "gRPC clients need a locality weight");

    let out = ok("Service", "idle", json!({}));
    assert_eq!(out.resources.len(), 2);
    let d = &out.diagnostics[0];
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.document.as_deref(), Some("Service/idle"));
    assert!(d.message.contains("no endpoints"));
}

fn gateway_spec() -> Value {
    json!({
        "port": 8080,
        "hosts": [{
            "hostnames": ["shop.example.com"],
            "responseHeaders": {"set": {"x-frame-options": "DENY"}},
            "routes": [
                {
                    "name": "api",
                    "match": {"pathPrefix": "/api/", "headers": [
                        {"name": "x-canary", "exact": "1"},
                        {"name": "x-debug", "present": false}
                    ]},
                    "backends": [{"service": "api-v1", "weight": 90}, {"service": "api-v2", "weight": 10}],
                    "timeout": "5s",
                    "retries": {"attempts": 3, "perTryTimeout": "1s", "statusCodes": [503]},
                    "rewrite": {"pathPrefix": "/"},
                    "requestHeaders": {"set": {"x-b": "2", "x-a": "1"}, "add": {"x-via": "gw"}, "remove": ["cookie"]}
                },
                {"match": {"regex": "^/v[0-9]+/.*"}, "backends": [{"service": "legacy"}]},
                {"match": {"path": "/healthz"}, "directResponse": {"status": 200, "body": "ok"}}
            ]
        }, {
            "name": "fallback",
            "routes": [{"backends": [{"service": "web"}]}]
        }]
    })
}

#[test]
fn http_gateway() {
    let out = ok("HttpGateway", "public", gateway_spec());
    assert_eq!(out.resources.len(), 2);
    let l: Listener = decode(&out.resources[0], LISTENER, "public", "HttpGateway/public");
    let Some(address::Address::SocketAddress(sa)) = l.address.unwrap().address else { panic!() };
    assert_eq!(sa.address, "0.0.0.0");
    assert_eq!(sa.port_specifier, Some(PortSpecifier::PortValue(8080)));
    let Some(ConfigType::TypedConfig(any)) = &l.filter_chains[0].filters[0].config_type else { panic!() };
    let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
    let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier else { panic!() };
    assert_eq!(rds.route_config_name, "public");

    let rc: RouteConfiguration = decode(&out.resources[1], ROUTES, "public", "HttpGateway/public");
    assert_eq!(rc.virtual_hosts.len(), 2);
    let shop = &rc.virtual_hosts[0];
    assert_eq!(shop.name, "shop.example.com", "named after its first hostname");
    assert_eq!(shop.response_headers_to_add[0].header.as_ref().unwrap().key, "x-frame-options");
    let fallback = &rc.virtual_hosts[1];
    assert_eq!((fallback.name.as_str(), fallback.domains.as_slice()), ("fallback", &["*".to_owned()][..]));

    let api = &shop.routes[0];
    assert_eq!(api.name, "api");
    let m = api.r#match.as_ref().unwrap();
    assert_eq!(m.path_specifier, Some(PathSpecifier::Prefix("/api/".into())));
    assert!(matches!(m.headers[0].header_match_specifier, Some(HeaderMatchSpecifier::StringMatch(_))));
    assert_eq!(m.headers[1].header_match_specifier, Some(HeaderMatchSpecifier::PresentMatch(true)));
    assert!(m.headers[1].invert_match, "present: false matches an absent header");
    let a = action(api);
    assert_eq!(split(a), [("api-v1", 90), ("api-v2", 10)]);
    assert_eq!(a.timeout.unwrap().seconds, 5);
    assert_eq!(a.prefix_rewrite, "/");
    let retry = a.retry_policy.as_ref().unwrap();
    assert_eq!(retry.retry_on, "5xx,connect-failure,reset,retriable-status-codes");
    assert_eq!(retry.num_retries.unwrap().value, 3);
    assert_eq!(retry.retriable_status_codes, [503]);
    let set: Vec<_> = api.request_headers_to_add.iter().map(|h| h.header.as_ref().unwrap().key.as_str()).collect();
    assert_eq!(set, ["x-a", "x-b", "x-via"], "set in name order, then add");
    assert_eq!(api.request_headers_to_remove, ["cookie"]);

    let legacy = &shop.routes[1];
    assert!(matches!(legacy.r#match.as_ref().unwrap().path_specifier, Some(PathSpecifier::SafeRegex(_))));
    assert_eq!(split(action(legacy)), [("legacy", 1)]);
    assert!(matches!(shop.routes[2].action, Some(Action::DirectResponse(_))));
    let catch_all = &fallback.routes[0];
    assert_eq!(catch_all.r#match.as_ref().unwrap().path_specifier, Some(PathSpecifier::Prefix("/".into())));
}

#[test]
fn grpc_service_defaults_to_one_route() {
    let out = ok(
        "GrpcService",
        "echo",
        json!({
            "backends": [{"service": "echo-v1", "weight": 80}, {"service": "echo-v2", "weight": 20}],
            "timeout": "3s",
            "retries": {"attempts": 2, "on": "unavailable,cancelled"}
        }),
    );
    let l: Listener = decode(&out.resources[0], LISTENER, "echo", "GrpcService/echo");
    assert!(l.address.is_none());
    let any = l.api_listener.unwrap().api_listener.unwrap();
    let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
    assert_eq!(hcm.http_filters.last().unwrap().name, "envoy.filters.http.router");
    let rc: RouteConfiguration = decode(&out.resources[1], ROUTES, "echo", "GrpcService/echo");
    let vh = &rc.virtual_hosts[0];
    assert_eq!(vh.domains, ["*"]);
    assert_eq!(vh.routes.len(), 1);
    let a = action(&vh.routes[0]);
    assert_eq!(split(a), [("echo-v1", 80), ("echo-v2", 20)]);
    let msd = a.max_stream_duration.as_ref().unwrap();
    assert_eq!(msd.max_stream_duration.unwrap().seconds, 3);
    assert!(a.timeout.is_none());
    let retry = a.retry_policy.as_ref().unwrap();
    assert_eq!(retry.retry_on, "unavailable,cancelled");
    assert_eq!(retry.num_retries.unwrap().value, 2);
}

#[test]
fn grpc_service_routes_inherit_backends_and_retries() {
    let out = ok(
        "GrpcService",
        "echo",
        json!({
            "backends": [{"service": "echo"}],
            "retries": {},
            "routes": [
                {"match": {"path": "/echo.Echo/Stream"}, "backends": [{"service": "echo-stream"}], "timeout": "1m"},
                {"match": {"pathPrefix": "/echo.Echo/"}}
            ]
        }),
    );
    let rc: RouteConfiguration = decode(&out.resources[1], ROUTES, "echo", "GrpcService/echo");
    let routes = &rc.virtual_hosts[0].routes;
    assert_eq!(split(action(&routes[0])), [("echo-stream", 1)]);
    assert_eq!(split(action(&routes[1])), [("echo", 1)]);
    for r in routes {
        assert_eq!(action(r).retry_policy.as_ref().unwrap().retry_on, "unavailable");
    }
    assert!(action(&routes[1]).max_stream_duration.is_none());
}

#[test]
fn output_is_deterministic_and_in_document_order() {
    let docs = || {
        vec![
            doc("Service", "b", json!({"endpoints": [{"address": "10.0.0.1", "port": 1}]})),
            doc("HttpGateway", "a", gateway_spec()),
            doc("GrpcService", "c", json!({"backends": [{"service": "b"}]})),
        ]
    };
    let first = run(docs()).unwrap();
    assert_eq!(first, run(docs()).unwrap());
    let order: Vec<_> = first
        .resources
        .iter()
        .map(|r| (r.document.as_deref().unwrap(), r.type_url.rsplit('.').next().unwrap()))
        .collect();
    assert_eq!(
        order,
        [
            ("Service/b", "Cluster"),
            ("Service/b", "ClusterLoadAssignment"),
            ("HttpGateway/a", "Listener"),
            ("HttpGateway/a", "RouteConfiguration"),
            ("GrpcService/c", "Listener"),
            ("GrpcService/c", "RouteConfiguration"),
        ]
    );
}

/// The error's document, field and a fragment of its message.
fn assert_error(e: &PluginError, document: &str, field: &str, fragment: &str) {
    assert_eq!(e.document.as_deref(), Some(document), "{e:?}");
    assert_eq!(e.field.as_deref(), Some(field), "{e:?}");
    assert!(e.message.contains(fragment), "{:?} lacks {fragment:?}", e.message);
}

#[test]
fn errors_name_document_and_field() {
    let mut bad = gateway_spec();
    bad["hosts"][0]["routes"][1]["tiemout"] = json!("1s");
    let e = err("HttpGateway", "public", bad);
    assert_error(&e, "HttpGateway/public", "spec.hosts[0].routes[1].tiemout", "unknown field `tiemout`");
    assert!(!e.message.contains("intent.yaml"), "the host adds the origin: {}", e.message);

    let mut bad = gateway_spec();
    bad["hosts"][0]["routes"][0]["timeout"] = json!("5 seconds");
    let e = err("HttpGateway", "public", bad);
    assert_error(&e, "HttpGateway/public", "spec.hosts[0].routes[0].timeout", "invalid duration");

    let mut bad = gateway_spec();
    bad["hosts"][0]["routes"][0]["backends"][1]["weight"] = json!(0);
    let e = err("HttpGateway", "public", bad);
    assert_error(&e, "HttpGateway/public", "spec.hosts[0].routes[0].backends[1].weight", "at least 1");

    let mut bad = gateway_spec();
    bad["hosts"][1]["routes"][0]["backends"] = json!([]);
    let e = err("HttpGateway", "public", bad);
    assert_error(&e, "HttpGateway/public", "spec.hosts[1].routes[0].backends", "at least one backend");

    let e = err("GrpcService", "echo", json!({"backends": []}));
    assert_error(&e, "GrpcService/echo", "spec.backends", "at least one backend");

    let e = err("GrpcService", "echo", json!({"routes": [{"match": {"pathPrefix": "/a/"}}]}));
    assert_error(&e, "GrpcService/echo", "spec.routes[0].backends", "missing");

    let e = err("GrpcService", "echo", json!({"backends": [{"service": "e"}], "retries": {"on": "5xx"}}));
    assert_error(&e, "GrpcService/echo", "spec.retries.on", "unknown retry condition");
}

#[test]
fn more_validation() {
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        ("HttpGateway", json!({"port": 0, "hosts": []}), "spec.port", "expected a port number from 1 to 65535"),
        ("HttpGateway", json!({"port": 70000, "hosts": []}), "spec.port", "expected a port number"),
        ("HttpGateway", json!({"port": -1, "hosts": []}), "spec.port", "expected a port number"),
        ("HttpGateway", json!({"port": "80", "hosts": []}), "spec.port", "expected a port number"),
        ("HttpGateway", json!({"hosts": []}), "spec", "missing field `port`"),
        ("HttpGateway", json!({"port": 80, "address": "localhost", "hosts": []}), "spec.address", "not an IP"),
        ("HttpGateway", json!({"port": 80, "hosts": []}), "spec.hosts", "at least one host"),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"backends": [{"service": "a"}]}]}, {"routes": [{"backends": [{"service": "a"}]}]}]}),
            "spec.hosts[1].hostnames[0]",
            "more than once",
        ),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"match": {"regex": "a(b"}, "backends": [{"service": "a"}]}]}]}),
            "spec.hosts[0].routes[0].match.regex",
            "invalid regex",
        ),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"match": {"path": "/a", "pathPrefix": "/"}, "backends": [{"service": "a"}]}]}]}),
            "spec.hosts[0].routes[0].match",
            "one of pathPrefix",
        ),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"match": {"regex": "/a.*"}, "rewrite": {"pathPrefix": "/"}, "backends": [{"service": "a"}]}]}]}),
            "spec.hosts[0].routes[0].rewrite.pathPrefix",
            "not a regex",
        ),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"backends": [{"service": "a"}, {"service": "a"}]}]}]}),
            "spec.hosts[0].routes[0].backends[1].service",
            "listed twice",
        ),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"backends": [{"service": "a/b"}]}]}]}),
            "spec.hosts[0].routes[0].backends[0].service",
            "may contain only",
        ),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"backends": [{"service": "a"}], "requestHeaders": {"set": {"host": "x"}}}]}]}),
            "spec.hosts[0].routes[0].requestHeaders.set",
            "off limits",
        ),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"match": {"headers": [{"name": "x", "exact": "1", "prefix": "1"}]}, "backends": [{"service": "a"}]}]}]}),
            "spec.hosts[0].routes[0].match.headers[0]",
            "exactly one",
        ),
        (
            "HttpGateway",
            json!({"port": 80, "hosts": [{"routes": [{"backends": [{"service": "a"}], "directResponse": {"status": 404}}]}]}),
            "spec.hosts[0].routes[0].directResponse",
            "not both",
        ),
        ("Service", json!({"connectTimeout": "0s"}), "spec.connectTimeout", "longer than 0s"),
        ("Service", json!({"loadBalancing": "fastest"}), "spec.loadBalancing", "unknown variant"),
        (
            "Service",
            json!({"endpoints": [{"address": "10.0.0.1", "port": 1}, {"address": "10.0.0.1", "port": 1}]}),
            "spec.endpoints[1]",
            "listed twice",
        ),
        (
            "Service",
            json!({"endpoints": [{"address": "10.0.0.1", "port": 1, "weight": 0}]}),
            "spec.endpoints[0].weight",
            "at least 1",
        ),
        ("Service", json!({"localities": [{"weight": 0}]}), "spec.localities[0].weight", "at least 1"),
        (
            "Service",
            json!({"localities": [{"zone": "a"}, {"zone": "b", "priority": 2}]}),
            "spec.localities[1].priority",
            "no locality has priority 1",
        ),
        ("Service", json!({"healthCheck": {"interval": "1s"}}), "spec.healthCheck", "set path"),
        ("Service", json!({"healthCheck": {"grpc": {}}}), "spec.healthCheck.grpc", "http2 or grpc"),
        ("GrpcService", json!({"backends": [{"service": "e"}], "routes": []}), "spec.routes", "at least one route"),
        (
            "GrpcService",
            json!({"backends": [{"service": "e"}], "routes": [{"requestHeaders": {}}]}),
            "spec.routes[0].requestHeaders",
            "unknown field",
        ),
    ];
    for (kind, spec, field, fragment) in cases {
        let e = err(kind, "x", spec.clone());
        assert_error(&e, &format!("{kind}/x"), field, fragment);
    }
}

#[test]
fn unknown_kind_and_config_are_refused() {
    let e = err("Gateway", "x", json!({}));
    assert_eq!(e.document.as_deref(), Some("Gateway/x"));
    assert!(e.message.contains("does not translate kind \"Gateway\""));

    let e = Reference::translate(TranslateRequest {
        changes: None,
        node_group: String::new(),
        documents: vec![],
        resources: vec![],
        config: r#"{"strict": true}"#.into(),
    })
    .unwrap_err();
    assert!(e.message.contains("unknown field `strict`"), "{}", e.message);
}

/// `cargo test --release -p xdst-plugin-reference -- --ignored --nocapture`: the benchmark's
/// load (10,000 Services and 10,000 GrpcServices), natively.
#[test]
#[ignore]
fn twenty_thousand_documents() {
    let mut docs = Vec::with_capacity(20_000);
    for i in 0..10_000 {
        docs.push(doc(
            "Service",
            &format!("svc-{i}"),
            json!({"protocol": "grpc", "endpoints": [
                {"address": "10.0.0.1", "port": 8080 + (i % 100)},
                {"address": "10.0.0.2", "port": 8080 + (i % 100)}
            ]}),
        ));
    }
    for i in 0..10_000 {
        docs.push(doc(
            "GrpcService",
            &format!("svc-{i}"),
            json!({"backends": [{"service": format!("svc-{i}")}], "timeout": "1s"}),
        ));
    }
    let start = std::time::Instant::now();
    let out = run(docs).unwrap();
    eprintln!("{} resources in {:?}", out.resources.len(), start.elapsed());
    assert_eq!(out.resources.len(), 40_000);
}

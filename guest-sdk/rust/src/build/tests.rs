//! Each builder's message goes through [`resource`] (protobuf bytes) and is decoded back.

use std::time::Duration;

use prost::Message;

use super::*;
use crate::envoy::envoy::config::cluster::v3::{Cluster, cluster::ClusterDiscoveryType};
use crate::envoy::envoy::config::core::v3::{
    address, config_source::ConfigSourceSpecifier, header_value_option::HeaderAppendAction,
    health_check::HealthChecker, socket_address::PortSpecifier,
};
use crate::envoy::envoy::config::endpoint::v3::{ClusterLoadAssignment, lb_endpoint::HostIdentifier};
use crate::envoy::envoy::config::listener::v3::{Listener, filter::ConfigType};
use crate::envoy::envoy::config::route::v3::{
    RouteConfiguration, header_matcher::HeaderMatchSpecifier, route::Action, route_action::ClusterSpecifier,
    route_match::PathSpecifier,
};
use crate::envoy::envoy::extensions::filters::http::router::v3::Router;
use crate::envoy::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier, http_filter,
};
use crate::envoy::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use crate::envoy::google::protobuf::Any;
use crate::{Body, Resource, resource};

/// Encodes as a plugin would, checks the envelope, decodes the bytes back.
fn round_trip<R: Resource + Default>(message: &R, type_url: &str, name: &str) -> R {
    let r = resource(message, Some("Test/doc".into()));
    assert_eq!(r.type_url, type_url);
    assert_eq!(r.name, name);
    assert_eq!(r.document.as_deref(), Some("Test/doc"));
    let Body::Proto(bytes) = r.body else { panic!("expected protobuf") };
    R::decode(bytes.as_slice()).expect("decodes")
}

fn unpack<M: Message + Default>(any: &Any, type_url: &str) -> M {
    assert_eq!(any.type_url, type_url);
    M::decode(any.value.as_slice()).expect("Any decodes")
}

const HCM_URL: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

/// RDS over ADS for `route_config`, router filter last.
fn check_hcm(any: &Any, route_config: &str) -> HttpConnectionManager {
    let hcm: HttpConnectionManager = unpack(any, HCM_URL);
    let Some(RouteSpecifier::Rds(rds)) = &hcm.route_specifier else { panic!("expected RDS") };
    assert_eq!(rds.route_config_name, route_config);
    let source = rds.config_source.as_ref().unwrap();
    assert!(matches!(source.config_source_specifier, Some(ConfigSourceSpecifier::Ads(_))));
    assert_eq!(source.resource_api_version, 2, "V3");
    let router = hcm.http_filters.last().unwrap();
    assert_eq!(router.name, "envoy.filters.http.router");
    let Some(http_filter::ConfigType::TypedConfig(cfg)) = &router.config_type else {
        panic!("router without typed_config")
    };
    let _: Router = unpack(cfg, "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router");
    hcm
}

#[test]
fn http_listener() {
    let l = HttpListener::new("public", 8080).address("127.0.0.1").route_config("public-routes").build();
    let l = round_trip(&l, "type.googleapis.com/envoy.config.listener.v3.Listener", "public");
    let Some(address::Address::SocketAddress(sa)) = l.address.unwrap().address else {
        panic!("expected a socket address")
    };
    assert_eq!(sa.address, "127.0.0.1");
    assert_eq!(sa.port_specifier, Some(PortSpecifier::PortValue(8080)));
    let filter = &l.filter_chains[0].filters[0];
    assert_eq!(filter.name, "envoy.filters.network.http_connection_manager");
    let Some(ConfigType::TypedConfig(any)) = &filter.config_type else { panic!("HCM without typed_config") };
    let hcm = check_hcm(any, "public-routes");
    assert_eq!(hcm.stat_prefix, "public");
    assert_eq!(hcm.http_filters.len(), 1);
}

#[test]
fn api_listener_for_proxyless_grpc() {
    let l: Listener = ApiListener::new("echo").build();
    let l = round_trip(&l, "type.googleapis.com/envoy.config.listener.v3.Listener", "echo");
    assert!(l.address.is_none() && l.filter_chains.is_empty());
    let any = l.api_listener.unwrap().api_listener.unwrap();
    check_hcm(&any, "echo");
}

#[test]
fn route_configuration() {
    let rc: RouteConfiguration = RouteConfig::new("public")
        .virtual_host(
            VirtualHost::new("shop", ["shop.example.com", "*.shop.example.com"])
                .set_request_header("x-env", "prod")
                .remove_response_header("server")
                .route(
                    Route::prefix("/api")
                        .header(HeaderMatch::exact("x-canary", "1"))
                        .header(HeaderMatch::present("x-debug").invert())
                        .to_weighted_clusters([("api-v1", 90), ("api-v2", 10)])
                        .timeout(Duration::from_millis(2500))
                        .retry_policy(
                            RetryPolicy::new("5xx,reset")
                                .num_retries(2)
                                .per_try_timeout(Duration::from_secs(1))
                                .retriable_status_codes([503]),
                        )
                        .prefix_rewrite("/")
                        .add_request_header("x-via", "xdst")
                        .remove_request_header("cookie"),
                )
                .route(
                    Route::regex("^/v[0-9]+/.*")
                        .header(HeaderMatch::regex("user-agent", ".*curl.*"))
                        .header(HeaderMatch::prefix("x-team", "pay"))
                        .to_cluster("legacy")
                        .idle_timeout(Duration::from_secs(60)),
                )
                .route(Route::path("/healthz").direct_response(200, Some("ok".into()))),
        )
        .build();
    let rc = round_trip(&rc, "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", "public");
    let vh = &rc.virtual_hosts[0];
    assert_eq!(vh.domains, ["shop.example.com", "*.shop.example.com"]);
    let set = &vh.request_headers_to_add[0];
    assert_eq!(set.header.as_ref().unwrap().key, "x-env");
    assert_eq!(set.append_action, HeaderAppendAction::OverwriteIfExistsOrAdd as i32);
    assert_eq!(vh.response_headers_to_remove, ["server"]);

    let api = &vh.routes[0];
    let m = api.r#match.as_ref().unwrap();
    assert_eq!(m.path_specifier, Some(PathSpecifier::Prefix("/api".into())));
    let Some(HeaderMatchSpecifier::StringMatch(sm)) = &m.headers[0].header_match_specifier else {
        panic!("expected string_match")
    };
    assert_eq!(sm.match_pattern, Some(MatchPattern::Exact("1".into())));
    assert_eq!(m.headers[1].header_match_specifier, Some(HeaderMatchSpecifier::PresentMatch(true)));
    assert!(m.headers[1].invert_match);
    let Some(Action::Route(action)) = &api.action else { panic!("expected a route action") };
    let Some(ClusterSpecifier::WeightedClusters(wc)) = &action.cluster_specifier else {
        panic!("expected weighted clusters")
    };
    let split: Vec<_> = wc.clusters.iter().map(|c| (c.name.as_str(), c.weight.as_ref().unwrap().value)).collect();
    assert_eq!(split, [("api-v1", 90), ("api-v2", 10)]);
    #[allow(deprecated, reason = "checks the deprecated field stays unset")]
    let total = &wc.total_weight;
    assert!(total.is_none(), "total_weight is deprecated: Envoy sums the weights");
    let timeout = action.timeout.as_ref().unwrap();
    assert_eq!((timeout.seconds, timeout.nanos), (2, 500_000_000));
    let retry = action.retry_policy.as_ref().unwrap();
    assert_eq!(retry.retry_on, "5xx,reset");
    assert_eq!(retry.num_retries.as_ref().unwrap().value, 2);
    assert_eq!(retry.per_try_timeout.as_ref().unwrap().seconds, 1);
    assert_eq!(retry.retriable_status_codes, [503]);
    assert_eq!(action.prefix_rewrite, "/");
    assert_eq!(api.request_headers_to_add[0].append_action, HeaderAppendAction::AppendIfExistsOrAdd as i32);
    assert_eq!(api.request_headers_to_remove, ["cookie"]);

    let legacy = &vh.routes[1];
    let Some(PathSpecifier::SafeRegex(re)) = &legacy.r#match.as_ref().unwrap().path_specifier else {
        panic!("expected safe_regex")
    };
    assert_eq!(re.regex, "^/v[0-9]+/.*");
    assert!(re.engine_type.is_none(), "engine left to the RE2 default");
    let Some(Action::Route(action)) = &legacy.action else { panic!() };
    assert_eq!(action.cluster_specifier, Some(ClusterSpecifier::Cluster("legacy".into())));
    assert_eq!(action.idle_timeout.as_ref().unwrap().seconds, 60);

    let Some(Action::DirectResponse(direct)) = &vh.routes[2].action else { panic!("expected a direct response") };
    assert_eq!(direct.status, 200);
}

#[test]
fn grpc_route_settings() {
    let r = Route::prefix("")
        .to_cluster("echo")
        .max_stream_duration(Duration::from_secs(3))
        .retry_policy(
            RetryPolicy::new("unavailable,cancelled").back_off(Duration::from_millis(100), Duration::from_secs(1)),
        )
        .build();
    let Some(Action::Route(action)) = r.action else { panic!() };
    let msd = action.max_stream_duration.unwrap();
    assert_eq!(msd.max_stream_duration.unwrap().seconds, 3);
    let backoff = action.retry_policy.unwrap().retry_back_off.unwrap();
    assert_eq!(backoff.base_interval.unwrap().nanos, 100_000_000);
}

#[test]
fn eds_cluster() {
    let c: Cluster = EdsCluster::new("reviews")
        .connect_timeout(Duration::from_millis(250))
        .lb_policy(LbPolicy::RingHash)
        .health_check(
            HealthCheck::http("/healthz")
                .http2()
                .interval(Duration::from_secs(5))
                .timeout(Duration::from_secs(2))
                .healthy_threshold(2)
                .unhealthy_threshold(4),
        )
        .circuit_breakers(CircuitBreakers::new().max_connections(100).max_retries(5))
        .http2()
        .locality_weighted()
        .build();
    let c = round_trip(&c, "type.googleapis.com/envoy.config.cluster.v3.Cluster", "reviews");
    assert_eq!(c.cluster_discovery_type, Some(ClusterDiscoveryType::Type(3)));
    let eds = c.eds_cluster_config.as_ref().unwrap().eds_config.as_ref().unwrap();
    assert!(matches!(eds.config_source_specifier, Some(ConfigSourceSpecifier::Ads(_))));
    assert_eq!(eds.resource_api_version, 2);
    assert_eq!(c.connect_timeout.unwrap().nanos, 250_000_000);
    assert_eq!(c.lb_policy, LbPolicy::RingHash as i32);
    let hc = &c.health_checks[0];
    assert_eq!(hc.interval.unwrap().seconds, 5);
    assert_eq!(hc.timeout.unwrap().seconds, 2);
    assert_eq!(hc.healthy_threshold.unwrap().value, 2);
    assert_eq!(hc.unhealthy_threshold.unwrap().value, 4);
    let Some(HealthChecker::HttpHealthCheck(http)) = &hc.health_checker else { panic!("expected an HTTP check") };
    assert_eq!(http.path, "/healthz");
    assert_eq!(http.codec_client_type, 1, "HTTP2");
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(t.max_connections.unwrap().value, 100);
    assert_eq!(t.max_retries.unwrap().value, 5);
    assert!(t.max_requests.is_none());
    #[allow(deprecated, reason = "checks the deprecated field stays unset")]
    let h2 = c.http2_protocol_options.is_some();
    assert!(h2);
    assert!(c.common_lb_config.unwrap().locality_config_specifier.is_some());

    let plain = EdsCluster::new("plain").build();
    assert_eq!(plain.lb_policy, LbPolicy::RoundRobin as i32);
    assert!(plain.connect_timeout.is_none() && plain.health_checks.is_empty());
    let grpc = HealthCheck::grpc("echo.Echo").build();
    assert!(matches!(
        grpc.health_checker,
        Some(HealthChecker::GrpcHealthCheck(ref g)) if g.service_name == "echo.Echo"
    ));
}

#[test]
fn load_assignment() {
    let cla: ClusterLoadAssignment = LoadAssignment::new("reviews")
        .endpoint(Endpoint::new("10.0.0.9", 9000))
        .locality(
            Locality::new("eu-west1", "eu-west1-b", "")
                .weight(3)
                .endpoint(Endpoint::new("10.0.0.1", 8080).weight(2))
                .endpoints([Endpoint::new("10.0.0.2", 8080)]),
        )
        .locality(Locality::new("us-east1", "", "").priority(1).endpoint(Endpoint::new("::1", 8080)))
        .build();
    let cla = round_trip(&cla, "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", "reviews");
    assert_eq!(cla.endpoints.len(), 3);
    let unnamed = &cla.endpoints[0];
    // Set but empty: proxyless gRPC clients refuse a locality group without one.
    assert_eq!(unnamed.locality, Some(Default::default()));
    assert_eq!(unnamed.load_balancing_weight.unwrap().value, 1);
    let eu = &cla.endpoints[1];
    let loc = eu.locality.as_ref().unwrap();
    assert_eq!((loc.region.as_str(), loc.zone.as_str()), ("eu-west1", "eu-west1-b"));
    assert_eq!(eu.load_balancing_weight.unwrap().value, 3);
    assert_eq!(eu.priority, 0);
    assert_eq!(eu.lb_endpoints.len(), 2);
    let first = &eu.lb_endpoints[0];
    assert_eq!(first.load_balancing_weight.unwrap().value, 2);
    let Some(HostIdentifier::Endpoint(e)) = &first.host_identifier else { panic!() };
    let Some(address::Address::SocketAddress(sa)) = &e.address.as_ref().unwrap().address else { panic!() };
    assert_eq!(sa.address, "10.0.0.1");
    assert_eq!(sa.port_specifier, Some(PortSpecifier::PortValue(8080)));
    assert_eq!(cla.endpoints[2].priority, 1);
}

#[test]
fn durations() {
    let d = duration(Duration::from_millis(1500));
    assert_eq!((d.seconds, d.nanos), (1, 500_000_000));
    let max = duration(Duration::MAX);
    assert_eq!((max.seconds, max.nanos), (315_576_000_000, 0));
}

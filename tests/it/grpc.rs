//! In-process gRPC tests: a real xdst server on 127.0.0.1:0 and a test client that can
//! ACK, NACK and misbehave. Rule numbers refer to ../shared/xds-protocol/README.md.

use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use xdst_core::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
use xdst_tests::fixtures::{self, basic_dir, write};
use xdst_tests::server::start_in_process;
use xdst_tests::xds::*;

/// Polls `f` until it returns true, for up to [`WAIT`].
async fn eventually(what: &str, f: impl AsyncFnMut() -> bool) {
    xdst_tests::wait::until_true(what, WAIT, f).await.unwrap();
}

/// Issue 34: a probe on a SotW ADS stream that is answered at once (a first request for the
/// endpoints of "backend", which exist), to send after the request under test: its answer
/// arriving first shows that nothing else was sent in between.
const PROBE: &str = "the answer to a probe for backend's endpoints";

fn probe_req() -> DiscoveryRequest {
    sotw_req(ENDPOINT, &["backend"])
}

fn is_probe_answer(r: &envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse) -> bool {
    r.type_url == ENDPOINT && sotw_names(r) == ["backend"]
}

/// Issue 34: a type no one serves: a request for it is remembered and answered with nothing.
const PROBE_TYPE: &str = "type.googleapis.com/no.such.Probe";

/// Issue 34: the types of the first node's first stream on /debug/nodes, once they include
/// [`PROBE_TYPE`]. Requests on a stream are handled in order, each answered before the next,
/// so by then the server has answered whatever was sent before the probe.
async fn shown_types(admin: std::net::SocketAddr) -> Vec<serde_json::Value> {
    xdst_tests::wait::until("the probe request to be handled", WAIT, async || {
        let (_, body) = http_get(admin, "/debug/nodes").await;
        let nodes: serde_json::Value = serde_json::from_str(&body)?;
        let types = nodes[0]["streams"][0]["types"].as_array().cloned().unwrap_or_default();
        Ok(if types.iter().any(|t| t["type_url"] == PROBE_TYPE) {
            xdst_tests::wait::Seen::Done(types)
        } else {
            xdst_tests::wait::Seen::Not(body)
        })
    })
    .await
    .unwrap()
}

/// Issue 34: the same on a Delta stream: a name that does not exist, answered in
/// removed_resources (DELTA-4).
fn delta_probe_req(type_url: &str) -> envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest {
    delta_req(type_url, &["probe"], &[])
}

fn is_delta_probe_answer(r: &envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse) -> bool {
    r.resources.is_empty() && r.removed_resources == ["probe"]
}

#[tokio::test]
async fn sotw_ads_wildcard_then_explicit_names_with_acks() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = sotw_ads(server.xds_addr).await;

    // SOTW-7: a CDS stream that never named a cluster is a wildcard subscription.
    s.send(sotw_req(CLUSTER, &[])).await;
    let cds = s.recv().await;
    assert_eq!(cds.type_url, CLUSTER);
    assert_eq!(sotw_names(&cds), ["backend"]);
    assert!(!cds.nonce.is_empty() && !cds.version_info.is_empty());
    s.send(sotw_ack(&cds, &[])).await;

    // SOTW-9: EDS by name.
    s.send(sotw_req(ENDPOINT, &["backend"])).await;
    let eds = s.recv().await;
    assert_eq!(sotw_names(&eds), ["backend"]);
    s.send(sotw_ack(&eds, &["backend"])).await;

    s.send(sotw_req(LISTENER, &[])).await;
    let lds = s.recv().await;
    assert_eq!(sotw_names(&lds), ["http"]);
    s.send(sotw_ack(&lds, &[])).await;
    s.send(sotw_req(ROUTE, &["local"])).await;
    let rds = s.recv().await;
    assert_eq!(sotw_names(&rds), ["local"]);
    assert_ne!(rds.nonce, lds.nonce, "SOTW-2: nonces are unique on a stream");
    s.send(sotw_ack(&rds, &["local"])).await;
    // SOTW-5: nothing changed, nothing more is sent: the next response is an edit's.
    write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 8081));
    let eds2 = s
        .expect_nothing_before("SOTW-5: all types acknowledged and unchanged", "the edit", |r| r.type_url == ENDPOINT)
        .await;
    assert_eq!(eds2.type_url, ENDPOINT, "only the changed load assignment is pushed");
    assert_ne!(eds2.version_info, eds.version_info);
    server.shutdown().await;
}

#[tokio::test]
async fn sotw_nack_is_recorded_and_not_answered_by_resending_the_same_bytes() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(sotw_req(CLUSTER, &[])).await;
    let first = s.recv().await;
    s.send(sotw_ack(&first, &[])).await;

    write(
        dir.path(),
        "backend.yaml",
        &fixtures::cluster("backend", 8080).replace("connect_timeout: 1s", "connect_timeout: 2s"),
    );
    let second = s.recv().await;
    assert_eq!(second.type_url, CLUSTER);
    // SOTW-3: the NACK keeps the previous version and carries error_detail.
    s.send(sotw_nack(&second, &[], &first.version_info, "cluster backend: rejected by test")).await;
    // Issue 34: a later request, handled after the NACK was answered or not; once the server
    // shows it, its own record says it sent nothing more.
    s.send(sotw_req(PROBE_TYPE, &["x"])).await;
    let types = shown_types(server.admin_addr).await;
    let cds = types.iter().find(|t| t["type_url"] == CLUSTER).unwrap().clone();
    assert_eq!(cds["last_nack"]["message"], "cluster backend: rejected by test", "{cds}");
    assert_eq!(cds["version_acked"], first.version_info.as_str());
    assert_eq!(cds["version_sent"], second.version_info.as_str());
    assert_eq!(cds["nonce_sent"], second.nonce.as_str(), "a NACK must not be answered with the same bytes");
    let (_, metrics) = http_get(server.admin_addr, "/metrics").await;
    assert!(metrics.contains("xdst_nacks_total{type=\"cds\",scope=\"node\"} 1"), "{metrics}");

    // A fix is pushed.
    write(
        dir.path(),
        "backend.yaml",
        &fixtures::cluster("backend", 8080).replace("connect_timeout: 1s", "connect_timeout: 3s"),
    );
    let third = s.recv().await;
    assert_ne!(third.version_info, second.version_info);
    server.shutdown().await;
}

#[tokio::test]
async fn sotw_stale_nonce_is_ignored() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(sotw_req(CLUSTER, &[])).await;
    let first = s.recv().await;
    s.send(sotw_ack(&first, &[])).await;
    write(dir.path(), "more.yaml", &fixtures::cluster("more", 8081));
    let second = s.recv().await;
    assert_eq!(sotw_names(&second), ["backend", "more"]);
    // SOTW-4: a request answering the old nonce (asking for "backend" only) is stale.
    s.send(sotw_ack(&first, &["backend"])).await;
    s.send(probe_req()).await;
    let probe = s.expect_nothing_before("stale nonce", PROBE, is_probe_answer).await;
    s.send(sotw_ack(&probe, &["backend"])).await;
    s.send(sotw_ack(&second, &[])).await;
    s.send(probe_req()).await;
    s.expect_nothing_before("ack", PROBE, is_probe_answer).await;
    server.shutdown().await;
}

#[tokio::test]
async fn delta_subscription_changes_are_honoured_with_a_stale_nonce() {
    let dir = basic_dir(10000, 8080);
    write(dir.path(), "more.yaml", &fixtures::cluster("more", 8081));
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = delta_ads(server.xds_addr).await;
    s.send(delta_req(ENDPOINT, &["backend"], &[])).await;
    let first = s.recv().await;
    assert_eq!(delta_names(&first), ["backend"]);
    s.send(delta_ack(&first)).await;
    s.send(delta_req(ENDPOINT, &["more"], &[])).await;
    let second = s.recv().await;
    assert_eq!(delta_names(&second), ["more"]);
    // DELTA-6: this request carries the first (stale) nonce; its subscription still counts.
    let mut stale = delta_req(ENDPOINT, &["missing"], &["backend"]);
    stale.response_nonce = first.nonce.clone();
    stale.node = None;
    s.send(stale).await;
    // Design 022: the second response is not answered yet, so its type gets nothing more; a
    // probe of another type, answered at once, shows it.
    s.send(delta_probe_req(CLUSTER)).await;
    let probe = s
        .expect_nothing_before("the second response awaits its answer", "a probe's answer", is_delta_probe_answer)
        .await;
    s.send(delta_ack(&probe)).await;
    s.send(delta_ack(&second)).await;
    let third = s.recv().await;
    assert_eq!(third.removed_resources, ["missing"], "DELTA-4: a subscribed name that does not exist is reported");
    s.send(delta_ack(&third)).await;
    // backend was unsubscribed: its change is not sent, more's is.
    // Whether or not the two edits make one generation, a push of backend would come first
    // or with more's.
    write(dir.path(), "backend.yaml", &fixtures::cluster("backend", 9090));
    write(dir.path(), "more.yaml", &fixtures::cluster("more", 9091));
    let more = s.expect_nothing_before("backend was unsubscribed", "more's change", |r| !r.resources.is_empty()).await;
    assert_eq!(delta_names(&more), ["more"]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_name_subscribed_before_it_exists_is_delivered_when_it_appears() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut sotw = sotw_ads(server.xds_addr).await;
    let mut delta = delta_ads(server.xds_addr).await;
    // SOTW-10: nothing to send yet, but the name is remembered. gRFC A88: the client is told
    // it does not exist (a response with no resource, and a NOT_FOUND error for the name).
    sotw.send(sotw_req(ENDPOINT, &["later"])).await;
    let told = sotw.recv().await;
    assert!(told.resources.is_empty(), "{told:?}");
    let not_found: Vec<(&str, i32)> = told
        .resource_errors
        .iter()
        .map(|e| {
            (e.resource_name.as_ref().map_or("", |n| n.name.as_str()), e.error_detail.as_ref().map_or(0, |s| s.code))
        })
        .collect();
    assert_eq!(not_found, [("later", 5)]);
    sotw.send(sotw_ack(&told, &["later"])).await;
    delta.send(delta_req(ENDPOINT, &["later"], &[])).await;
    let absent = delta.recv().await;
    assert_eq!(absent.removed_resources, ["later"]);
    assert_eq!(absent.resource_errors.len(), 1, "{absent:?}");
    delta.send(delta_ack(&absent)).await;

    write(dir.path(), "later.yaml", &fixtures::cluster("later", 8082));
    sotw.expect_nothing_before("later did not exist", "later's endpoints", |r| sotw_names(r) == ["later"]).await;
    assert_eq!(delta_names(&delta.recv().await), ["later"]);
    server.shutdown().await;
}

#[tokio::test]
async fn delta_reconnect_with_initial_resource_versions_resends_nothing_unchanged() {
    let dir = basic_dir(10000, 8080);
    write(dir.path(), "more.yaml", &fixtures::cluster("more", 8081));
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = delta_ads(server.xds_addr).await;
    s.send(delta_req(CLUSTER, &[], &[])).await;
    let first = s.recv().await;
    assert_eq!(delta_names(&first), ["backend", "more"]);
    let held: std::collections::HashMap<String, String> =
        first.resources.iter().map(|r| (r.name.clone(), r.version.clone())).collect();
    drop(s);

    // While disconnected, "more" changes.
    write(dir.path(), "more.yaml", &fixtures::cluster("more", 8081).replace("1s", "2s"));
    let more_v2 = {
        let mut probe = sotw_ads(server.xds_addr).await;
        probe.send(sotw_req(CLUSTER, &["more"])).await;
        probe.recv().await.version_info
    };
    assert!(!more_v2.is_empty());

    // DELTA-3: the new stream says what it holds; only the changed cluster comes back.
    let mut s = delta_ads(server.xds_addr).await;
    let mut req = delta_req(CLUSTER, &[], &[]);
    req.initial_resource_versions = held.clone();
    s.send(req).await;
    let resumed = s.recv().await;
    assert_eq!(delta_names(&resumed), ["more"]);
    assert!(resumed.removed_resources.is_empty());
    s.send(delta_ack(&resumed)).await;
    s.send(delta_probe_req(ENDPOINT)).await;
    s.expect_nothing_before("everything is current", "a probe's answer", is_delta_probe_answer).await;

    // Nothing changed at all: nothing is sent.
    let mut s2 = delta_ads(server.xds_addr).await;
    let mut req = delta_req(CLUSTER, &[], &[]);
    req.initial_resource_versions = resumed
        .resources
        .iter()
        .map(|r| (r.name.clone(), r.version.clone()))
        .chain(held.iter().filter(|(n, _)| *n == "backend").map(|(n, v)| (n.clone(), v.clone())))
        .collect();
    s2.send(req).await;
    s2.send(delta_probe_req(ENDPOINT)).await;
    s2.expect_nothing_before("the client already holds every resource", "a probe's answer", is_delta_probe_answer)
        .await;
    server.shutdown().await;
}

#[tokio::test]
async fn sotw_reconnect_with_current_version_resends_nothing_for_wildcard() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(sotw_req(CLUSTER, &[])).await;
    let first = s.recv().await;
    drop(s);
    // SOTW-12: a new stream reporting the current version of a wildcard CDS gets nothing.
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(DiscoveryRequest { version_info: first.version_info.clone(), ..sotw_req(CLUSTER, &[]) }).await;
    s.send(probe_req()).await;
    s.expect_nothing_before("already current", PROBE, is_probe_answer).await;
    // An outdated version gets the current state.
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(DiscoveryRequest { version_info: "0000000000000000".into(), ..sotw_req(CLUSTER, &[]) }).await;
    assert_eq!(s.recv().await.version_info, first.version_info);
    server.shutdown().await;
}

#[tokio::test]
async fn per_type_services_stream_delta_and_fetch() {
    use envoy_types::pb::envoy::service::cluster::v3::cluster_discovery_service_client::ClusterDiscoveryServiceClient;
    use envoy_types::pb::envoy::service::endpoint::v3::endpoint_discovery_service_client::EndpointDiscoveryServiceClient;
    use envoy_types::pb::envoy::service::listener::v3::listener_discovery_service_client::ListenerDiscoveryServiceClient;
    use envoy_types::pb::envoy::service::route::v3::route_discovery_service_client::RouteDiscoveryServiceClient;
    use tokio_stream::wrappers::ReceiverStream;

    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let ch = channel(server.xds_addr).await;

    // CDS over its own service (SotW), empty type_url allowed on a per-type stream.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let resp = ClusterDiscoveryServiceClient::new(ch.clone())
        .stream_clusters(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let mut cds = XdsStream::new(tx, resp);
    cds.send(sotw_req("", &[])).await;
    assert_eq!(sotw_names(&cds.recv().await), ["backend"]);
    // A per-type stream refuses another type.
    cds.send(sotw_req(LISTENER, &[])).await;
    let status = cds.closed_with().await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");

    // EDS over Delta.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let resp = EndpointDiscoveryServiceClient::new(ch.clone())
        .delta_endpoints(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let mut eds = XdsStream::new(tx, resp);
    eds.send(delta_req(ENDPOINT, &["backend"], &[])).await;
    let endpoints = eds.recv().await;
    assert_eq!(delta_names(&endpoints), ["backend"]);

    // RDS over its own stream. The node's streams share one make-before-break plan (ORDER-2):
    // its routes wait until the endpoints they lead to are acknowledged, on whichever stream
    // they came.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let resp =
        RouteDiscoveryServiceClient::new(ch.clone()).stream_routes(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let mut rds = XdsStream::new(tx, resp);
    rds.send(sotw_req(ROUTE, &["local"])).await;
    // Issue 34: a second request on the stream, handled after the first was answered or held;
    // once the server shows it, its record of what it sent on that stream says "nothing".
    rds.send(sotw_req(ROUTE, &["local", "probe"])).await;
    let routes = xdst_tests::wait::until("the second route request to be handled", WAIT, || async {
        let (_, body) = http_get(server.admin_addr, "/debug/nodes").await;
        let nodes: serde_json::Value = serde_json::from_str(&body)?;
        let routes = nodes[0]["streams"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["types"].as_array().into_iter().flatten())
            .find(|t| t["type_url"] == ROUTE && t["subscribed_names"] == 2)
            .cloned();
        Ok(match routes {
            Some(t) => xdst_tests::wait::Seen::Done(t),
            None => xdst_tests::wait::Seen::Not(body),
        })
    })
    .await
    .unwrap();
    // `probe` does not exist, and the client is told so at once (gRFC A88); `local` is held
    // until the EDS response is acknowledged: what went out carried no route.
    let told = rds.recv().await;
    assert!(told.resources.is_empty(), "routes are held until the EDS response is acknowledged: {routes} {told:?}");
    let absent: Vec<&str> =
        told.resource_errors.iter().filter_map(|e| e.resource_name.as_ref().map(|n| n.name.as_str())).collect();
    assert_eq!(absent, ["probe"], "{told:?}");
    rds.send(sotw_ack(&told, &["local", "probe"])).await;
    eds.send(delta_ack(&endpoints)).await;
    assert_eq!(sotw_names(&rds.recv().await), ["local"]);

    // LDS fetch: one-shot, not gated.
    let fetched = ListenerDiscoveryServiceClient::new(ch.clone())
        .fetch_listeners(sotw_req(LISTENER, &[]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(sotw_names(&fetched), ["http"]);
    assert_eq!(fetched.type_url, LISTENER);
    server.shutdown().await;
}

#[tokio::test]
async fn rest_fetch_takes_and_returns_proto3_json() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let body = r#"{"node": {"id": "rest-client", "cluster": "test"}, "resource_names": ["backend"], "type_url": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"}"#;
    let (status, text) = http(server.xds_addr, "POST", "/v3/discovery:endpoints", body).await;
    assert_eq!(status, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["resources"][0]["@type"], ENDPOINT);
    assert_eq!(v["resources"][0]["cluster_name"], "backend");
    assert_eq!(
        v["resources"][0]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]["port_value"],
        8080
    );
    let version = v["version_info"].as_str().unwrap().to_owned();

    // Already current: 304.
    let body = format!(r#"{{"version_info": "{version}", "resource_names": ["backend"]}}"#);
    let (status, _) = http(server.xds_addr, "POST", "/v3/discovery:endpoints", &body).await;
    assert_eq!(status, 304);
    // Clusters, wildcard.
    let (status, text) = http(server.xds_addr, "POST", "/v3/discovery:clusters", "{}").await;
    assert_eq!(status, 200);
    assert!(text.contains("\"name\":\"backend\""), "{text}");
    // Garbage gets a 400 naming the problem.
    let (status, text) = http(server.xds_addr, "POST", "/v3/discovery:clusters", "{\"resource_names\": 7}").await;
    assert_eq!(status, 400);
    assert!(text.contains("resource_names"), "{text}");
    let (status, _) = http(server.xds_addr, "POST", "/v3/discovery:clusters", "not json").await;
    assert_eq!(status, 400);
    server.shutdown().await;
}

/// Issue 15: `node.metadata` nested 1 to 200 levels deep gets 200 or 400, never a panic
/// (34 to 57 levels used to panic the handler when prost refused the re-encoded request).
#[tokio::test]
async fn rest_fetch_refuses_deep_metadata_without_panicking() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for depth in 1..=200 {
        let metadata = format!("{}1{}", "{\"a\": ".repeat(depth), "}".repeat(depth));
        let body = format!(r#"{{"node": {{"id": "deep", "metadata": {metadata}}}, "resource_names": ["backend"]}}"#);
        let (status, text) = http(server.xds_addr, "POST", "/v3/discovery:clusters", &body).await;
        assert!(status == 200 || status == 400, "depth {depth}: {status} {text}");
        *seen.entry(status).or_insert(0) += 1;
    }
    // Both answers occur: shallow metadata is served, deep metadata refused.
    assert!(seen.len() == 2, "{seen:?}");
    server.shutdown().await;
}

/// Issue 15: a request past the size limit (`--max-request-size`, 4 MiB by default, for a gRPC
/// message and a REST body) is refused; other streams and later requests are not disturbed.
#[tokio::test]
async fn oversized_requests_are_refused_and_disturb_nothing() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut healthy = sotw_ads(server.xds_addr).await;
    healthy.send(sotw_req(CLUSTER, &[])).await;
    let first = healthy.recv().await;

    let mut big = sotw_ads(server.xds_addr).await;
    big.send(DiscoveryRequest { resource_names: vec!["x".repeat(5 << 20)], ..sotw_req(CLUSTER, &[]) }).await;
    let status = big.closed_with().await;
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
    assert!(status.message().contains("too large"), "{status:?}");

    let body = format!(r#"{{"node": {{"id": "n"}}, "resource_names": ["{}"]}}"#, "x".repeat(5 << 20));
    let (status, _) = http(server.xds_addr, "POST", "/v3/discovery:clusters", &body).await;
    assert_eq!(status, 413);

    // The healthy stream answers an ACK with silence, and new streams are served.
    healthy.send(sotw_ack(&first, &[])).await;
    healthy.send(probe_req()).await;
    healthy.expect_nothing_before("an ACK after another stream's oversized request", PROBE, is_probe_answer).await;
    let mut again = sotw_ads(server.xds_addr).await;
    again.send(sotw_req(CLUSTER, &[])).await;
    assert_eq!(sotw_names(&again.recv().await), ["backend"]);
    server.shutdown().await;

    // A smaller limit (`--max-request-size 64KiB`) holds the same way.
    let server = xdst::start(xdst::Settings {
        xds_addr: "127.0.0.1:0".parse().unwrap(),
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        resources: Some(dir.path().to_owned()),
        max_request_size: 64 << 10,
        ..Default::default()
    })
    .await
    .unwrap();
    for (size, refused) in [(10 << 10, false), (100 << 10, true)] {
        let mut s = sotw_ads(server.xds_addr).await;
        s.send(DiscoveryRequest { resource_names: vec!["x".repeat(size)], ..sotw_req(CLUSTER, &[]) }).await;
        if refused {
            assert_eq!(s.closed_with().await.code(), tonic::Code::OutOfRange, "{size} bytes");
        } else {
            assert_eq!(s.recv().await.type_url, CLUSTER, "{size} bytes");
        }
        let body = format!(r#"{{"node": {{"id": "n"}}, "resource_names": ["{}"]}}"#, "x".repeat(size));
        let (status, _) = http(server.xds_addr, "POST", "/v3/discovery:clusters", &body).await;
        assert_eq!(status == 413, refused, "REST, {size} bytes: {status}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn node_groups_get_their_own_resources() {
    let dir = basic_dir(10000, 8080);
    std::fs::create_dir(dir.path().join("blue")).unwrap();
    write(&dir.path().join("blue"), "extra.yaml", &fixtures::cluster("blue-only", 8090));
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut blue = sotw_ads(server.xds_addr).await;
    blue.send(DiscoveryRequest { node: node("b1", "blue"), ..sotw_req(CLUSTER, &[]) }).await;
    assert_eq!(sotw_names(&blue.recv().await), ["backend", "blue-only"]);
    let mut other = sotw_ads(server.xds_addr).await;
    other.send(DiscoveryRequest { node: node("g1", "green"), ..sotw_req(CLUSTER, &[]) }).await;
    assert_eq!(sotw_names(&other.recv().await), ["backend"]);
    server.shutdown().await;
}

// ---- bad input: none of it may hurt another stream or the server ----

#[tokio::test]
async fn garbage_and_truncated_grpc_frames_close_only_that_stream() {
    use http_body_util::BodyExt;
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut healthy = sotw_ads(server.xds_addr).await;
    healthy.send(sotw_req(CLUSTER, &[])).await;
    let first = healthy.recv().await;
    healthy.send(sotw_ack(&first, &[])).await;

    let path = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
    for (what, frame) in [
        ("garbage protobuf", vec![0u8, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        ("truncated frame", vec![0u8, 0, 0, 0, 100, 0x0a, 0x01]),
        ("bad compression flag", vec![7u8, 0, 0, 0, 1, 0]),
    ] {
        let tcp = tokio::net::TcpStream::connect(server.xds_addr).await.unwrap();
        let (mut send, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .unwrap();
        tokio::spawn(conn);
        let req = http::Request::post(format!("http://{}{path}", server.xds_addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(http_body_util::Full::new(bytes::Bytes::from(frame)))
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        let collected = resp.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned().unwrap_or_default();
        let code = trailers.get("grpc-status").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        assert!(!code.is_empty() && code != "0", "{what}: expected a gRPC error status, got {trailers:?}");
    }
    // The healthy stream still gets pushes; the server still serves new streams.
    write(dir.path(), "more.yaml", &fixtures::cluster("more", 8081));
    assert_eq!(sotw_names(&healthy.recv().await), ["backend", "more"]);
    let mut fresh = sotw_ads(server.xds_addr).await;
    fresh.send(sotw_req(CLUSTER, &[])).await;
    assert_eq!(sotw_names(&fresh.recv().await), ["backend", "more"]);
    let (_, metrics) = http_get(server.admin_addr, "/metrics").await;
    assert!(metrics.contains("xdst_stream_errors_total{reason=\"malformed\"}"), "{metrics}");
    server.shutdown().await;
}

#[tokio::test]
async fn requests_without_node_or_type_are_refused_unknown_types_are_harmless() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(DiscoveryRequest { node: None, ..sotw_req(CLUSTER, &[]) }).await;
    let status = s.closed_with().await;
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("node"), "{status}");

    let mut s = delta_ads(server.xds_addr).await;
    s.send(delta_req("", &[], &[])).await;
    assert_eq!(s.closed_with().await.code(), tonic::Code::InvalidArgument);

    // An unknown type URL is remembered (it may appear later), answered with nothing,
    // and the stream goes on serving known types.
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(sotw_req("type.googleapis.com/no.such.Type", &["x"])).await;
    s.send(sotw_req(CLUSTER, &[])).await;
    let cds = s.expect_nothing_before("nothing of that type exists", "the clusters", |r| r.type_url == CLUSTER).await;
    assert_eq!(sotw_names(&cds), ["backend"]);

    // An unknown gRPC method gets UNIMPLEMENTED.
    let mut grpc = tonic::client::Grpc::new(channel(server.xds_addr).await);
    grpc.ready().await.unwrap();
    let err = grpc
        .unary::<DiscoveryRequest, DiscoveryRequest, _>(
            tonic::Request::new(DiscoveryRequest::default()),
            http::uri::PathAndQuery::from_static("/envoy.service.discovery.v3.Nope/Nope"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    server.shutdown().await;
}

#[tokio::test]
async fn bad_resource_files_are_refused_and_the_last_good_set_keeps_serving() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(sotw_req(CLUSTER, &[])).await;
    let good = s.recv().await;
    s.send(sotw_ack(&good, &[])).await;

    let last_error = async || -> String {
        let (_, body) = http_get(server.admin_addr, "/debug/resources").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["source"]["last_error"].as_str().unwrap_or_default().to_owned()
    };

    // A malformed field: the error names the file, the document and the field.
    write(
        dir.path(),
        "bad.yaml",
        &format!(
            "{}---\n{}",
            fixtures::route("r2", "backend"),
            fixtures::cluster("c2", 1).replace("connect_timeout: 1s", "connect_timeout: soon")
        ),
    );
    eventually("the malformed file to be reported", async || {
        last_error().await.contains("bad.yaml document 2 field connect_timeout")
    })
    .await;
    // A duplicate name.
    write(dir.path(), "bad.yaml", &fixtures::cluster("backend", 9999));
    eventually("the duplicate to be reported", async || last_error().await.contains("duplicate cds \"backend\"")).await;
    // A dangling reference.
    write(dir.path(), "bad.yaml", &fixtures::route("r2", "nowhere"));
    eventually("the dangling reference to be reported", async || {
        last_error().await.contains("cluster \"nowhere\", which does not exist")
    })
    .await;
    let (_, metrics) = http_get(server.admin_addr, "/metrics").await;
    assert!(metrics.contains("xdst_resource_loads_total{result=\"refused\"} 3"), "{metrics}");

    // The fix applies without a restart.
    std::fs::remove_file(dir.path().join("bad.yaml")).unwrap();
    write(dir.path(), "more.yaml", &fixtures::cluster("more", 8081));
    let fixed = s.expect_nothing_before("nothing that was serving changed", "the fix", |r| r.type_url == CLUSTER).await;
    assert_eq!(sotw_names(&fixed), ["backend", "more"]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_resources_directory_that_disappears_keeps_serving_and_recovers() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("resources");
    std::fs::create_dir(&dir).unwrap();
    write(&dir, "listener.yaml", &fixtures::listener("http", 10000, "local"));
    write(&dir, "route.yaml", &fixtures::route("local", "backend"));
    write(&dir, "backend.yaml", &fixtures::cluster("backend", 8080));
    let server = start_in_process(Some(&dir)).await.unwrap();
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(sotw_req(CLUSTER, &[])).await;
    let good = s.recv().await;
    s.send(sotw_ack(&good, &[])).await;

    std::fs::remove_dir_all(&dir).unwrap();
    eventually("the loss to be reported", async || {
        let (_, body) = http_get(server.admin_addr, "/debug/resources").await;
        body.contains("disappeared")
    })
    .await;
    let mut fresh = sotw_ads(server.xds_addr).await;
    fresh.send(sotw_req(CLUSTER, &[])).await;
    assert_eq!(fresh.recv().await.version_info, good.version_info);

    // It comes back with a change: applied.
    std::fs::create_dir(&dir).unwrap();
    write(&dir, "listener.yaml", &fixtures::listener("http", 10000, "local"));
    write(&dir, "route.yaml", &fixtures::route("local", "backend"));
    write(&dir, "backend.yaml", &fixtures::cluster("backend", 8080));
    write(&dir, "more.yaml", &fixtures::cluster("more", 8081));
    let back =
        s.expect_nothing_before("the last good set keeps serving", "the change", |r| r.type_url == CLUSTER).await;
    assert_eq!(sotw_names(&back), ["backend", "more"]);
    server.shutdown().await;
}

/// Design 022: a client that does not answer gets no second response of the type (what
/// changes meanwhile is merged), delays nobody else, and gets the latest state once it answers.
#[tokio::test]
async fn a_client_that_never_acks_blocks_nobody() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut silent = sotw_ads(server.xds_addr).await;
    silent.send(sotw_req(CLUSTER, &[])).await;
    let never_acked = silent.recv().await;
    let mut polite = delta_ads(server.xds_addr).await;
    polite.send(delta_req(CLUSTER, &[], &[])).await;
    let first = polite.recv().await;
    polite.send(delta_ack(&first)).await;

    write(dir.path(), "more.yaml", &fixtures::cluster("more", 8081));
    let more = polite.recv().await;
    assert_eq!(delta_names(&more), ["more"]);
    polite.send(delta_ack(&more)).await;
    write(dir.path(), "most.yaml", &fixtures::cluster("most", 8082));
    assert_eq!(delta_names(&polite.recv().await), ["most"]);
    // The silent client was sent neither change (a probe of another type, answered at once,
    // shows it)...
    silent.send(probe_req()).await;
    let probe = silent.expect_nothing_before("no answer, no second response", PROBE, is_probe_answer).await;
    silent.send(sotw_ack(&probe, &["backend"])).await;
    // ...and, once it answers, gets the latest state in one response, never the one between.
    silent.send(sotw_ack(&never_acked, &[])).await;
    assert_eq!(sotw_names(&silent.recv().await), ["backend", "more", "most"]);
    server.shutdown().await;
}

#[tokio::test]
async fn admin_endpoints_report_streams_and_resources() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let (status, body) = http_get(server.admin_addr, "/healthz").await;
    assert_eq!((status, body.trim()), (200, "ok"));
    let mut s = delta_ads(server.xds_addr).await;
    s.send(delta_req(CLUSTER, &[], &[])).await;
    let r = s.recv().await;
    s.send(delta_ack(&r)).await;
    eventually("the ACK to be counted", async || {
        http_get(server.admin_addr, "/metrics").await.1.contains("xdst_acks_total{type=\"cds\"} 1")
    })
    .await;
    let (_, metrics) = http_get(server.admin_addr, "/metrics").await;
    for needle in [
        "xdst_streams{api=\"delta\",service=\"ads\"} 1",
        "xdst_responses_total{api=\"delta\",type=\"cds\"} 1",
        "xdst_push_ack_seconds_count{type=\"cds\"} 1",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    let (_, nodes) = http_get(server.admin_addr, "/debug/nodes").await;
    let nodes: serde_json::Value = serde_json::from_str(&nodes).unwrap();
    assert_eq!(nodes[0]["id"], "test-node");
    assert_eq!(nodes[0]["cluster"], "test");
    assert_eq!(nodes[0]["streams"][0]["api"], "delta");
    assert_eq!(nodes[0]["streams"][0]["types"][0]["version_acked"], r.system_version_info.as_str());
    let (_, res) = http_get(server.admin_addr, "/debug/resources?bodies=true").await;
    let res: serde_json::Value = serde_json::from_str(&res).unwrap();
    assert_eq!(res["default"]["cds"]["resources"][0]["name"], "backend");
    assert_eq!(res["default"]["cds"]["resources"][0]["origin"], "backend.yaml#1");
    assert_eq!(res["default"]["cds"]["resources"][0]["body"]["connect_timeout"], "1s");
    drop(s);
    eventually("the stream to be gone", async || http_get(server.admin_addr, "/debug/nodes").await.1 == "[]").await;
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_ends_streams_with_unavailable() {
    let dir = basic_dir(10000, 8080);
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(sotw_req(CLUSTER, &[])).await;
    s.recv().await;
    let stopping = tokio::spawn(server.shutdown());
    assert_eq!(s.closed_with().await.code(), tonic::Code::Unavailable);
    stopping.await.unwrap();
}

#[tokio::test]
async fn any_type_in_the_cache_is_served_over_ads() {
    let dir = basic_dir(10000, 8080);
    write(
        dir.path(),
        "secret.yaml",
        "\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\nname: cert\ngeneric_secret: {secret: {inline_string: hunter2}}\n",
    );
    let server = start_in_process(Some(dir.path())).await.unwrap();
    let mut s = delta_ads(server.xds_addr).await;
    s.send(delta_req(xdst_core::types::SECRET, &["cert"], &[])).await;
    let r = s.recv().await;
    assert_eq!(delta_names(&r), ["cert"]);
    assert_eq!(r.resources[0].resource.as_ref().unwrap().type_url, xdst_core::types::SECRET);
    server.shutdown().await;
}

/// ORDER-2 with a client that never acknowledges: its listeners are held back while it is
/// silent about the clusters, then sent once the grace period is over, which is logged and
/// counted (xdst_plan_grace_expired_total) and shown on /debug/nodes.
#[tokio::test]
async fn a_silent_client_gets_its_listeners_after_the_grace_period() {
    let dir = basic_dir(10000, 8080);
    let server = xdst::start(xdst::Settings {
        xds_addr: "127.0.0.1:0".parse().unwrap(),
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        resources: Some(dir.path().to_owned()),
        plan_grace: Duration::from_millis(800),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut s = sotw_ads(server.xds_addr).await;
    s.send(sotw_req(CLUSTER, &[])).await;
    assert_eq!(sotw_names(&s.recv().await), ["backend"]);
    // No ACK. The listeners wait for the clusters to be acknowledged...
    s.send(sotw_req(LISTENER, &[])).await;
    s.send(probe_req()).await;
    let probe =
        s.expect_nothing_before("listeners are held until the clusters are acknowledged", PROBE, is_probe_answer).await;
    s.send(sotw_ack(&probe, &["backend"])).await;
    // ...until the grace period ends.
    let listeners = s.recv().await;
    assert_eq!(listeners.type_url, LISTENER);
    assert_eq!(sotw_names(&listeners), ["http"]);
    let (_, metrics) = http_get(server.admin_addr, "/metrics").await;
    assert!(metrics.contains("xdst_plan_grace_expired_total{step=\"clusters\"} 1"), "{metrics}");
    let (_, nodes) = http_get(server.admin_addr, "/debug/nodes").await;
    let nodes: serde_json::Value = serde_json::from_str(&nodes).unwrap();
    assert_eq!(nodes[0]["plan"]["grace_expiries"], 1, "{nodes:#}");
    assert_eq!(nodes[0]["plan"]["mode"], "ordered", "{nodes:#}");
    server.shutdown().await;
}

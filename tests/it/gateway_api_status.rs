//! The upstream Gateway, GatewayClass and generation conformance tests
//! (kubernetes-sigs/gateway-api at 4564255, `conformance/tests/gateway-*.go`,
//! `gatewayclass-observed-generation-bump.go`, `httproute-disallowed-kind.go`,
//! `httproute-observed-generation-bump.go`): statuses as the Go tests read them, through
//! `xdst serve` with a real Envoy connected. Objects the Go tests patch are changed in the
//! case's file, and the generation that comes back is xdst's own count of spec changes (the
//! files carry none). The inputs are the upstream manifests in `../shared/gateway-api-suite`
//! (skipped, saying so, without them).

use serde_json::{Value, json};
use xdst_tests::gateway_api::{
    Case, ListenerWant, latest_conditions, listeners, no_accepted_parent, no_routes, own_condition, route_condition,
};

const NS: &str = "gateway-conformance-infra";
/// Accepted and ResolvedRefs True, for any reason.
const RESOLVED: &[(&str, &str, &str)] = &[("Accepted", "True", ""), ("ResolvedRefs", "True", "")];
const HTTP: &[&str] = &["HTTPRoute"];

fn gw(name: &str) -> String {
    format!("Gateway/{NS}/{name}")
}

/// The document's `metadata.generation`.
async fn generation(c: &Case, id: &str) -> anyhow::Result<i64> {
    c.document(id).await?["metadata"]["generation"]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("{id} has no metadata.generation"))
}

/// Patches `id` with `change`, then waits for its conditions to be of the new generation,
/// which must differ from the one before (upstream's "observedGeneration should increment").
async fn bump(c: &Case, id: &str, change: impl FnOnce(&mut Value)) -> anyhow::Result<()> {
    c.expect_status(id, latest_conditions).await?;
    let before = generation(c, id).await?;
    c.patch(id, change)?;
    c.expect_status(id, |doc| match doc["metadata"]["generation"].as_i64() {
        Some(g) if g != before => latest_conditions(doc),
        _ => Err(format!("generation still {before}")),
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_invalid_listeners_unsupported_protocol() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-invalid-listeners-unsupported-protocol").await?;
    const INVALID: ListenerWant = ListenerWant {
        name: "invalid",
        kinds: &[],
        attached: 0,
        conditions: &[("Accepted", "False", "UnsupportedProtocol")],
    };
    let only = gw("gateway-only-unsupported-protocols");
    c.expect_status(&only, own_condition("Accepted", "False", "ListenersNotValid")).await?;
    c.expect_status(&only, listeners(&[INVALID])).await?;
    let some = gw("gateway-supported-and-unsupported-protocols");
    c.expect_status(&some, own_condition("Accepted", "True", "ListenersNotValid")).await?;
    c.expect_status(
        &some,
        listeners(&[
            ListenerWant { name: "http", kinds: HTTP, attached: 0, conditions: &[("Accepted", "True", "Accepted")] },
            INVALID,
        ]),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_invalid_parameters_ref() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-invalid-parameters-ref").await?;
    c.expect_status(&gw("gateway-invalid-parameters-ref"), own_condition("Accepted", "False", "InvalidParameters"))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_invalid_route_kind() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-invalid-route-kind").await?;
    const INVALID_KINDS: &[(&str, &str, &str)] = &[("ResolvedRefs", "False", "InvalidRouteKinds")];
    c.expect_status(
        &gw("gateway-only-invalid-route-kind"),
        listeners(&[ListenerWant { name: "http", kinds: &[], attached: 0, conditions: INVALID_KINDS }]),
    )
    .await?;
    c.expect_status(
        &gw("gateway-supported-and-invalid-route-kind"),
        listeners(&[ListenerWant { name: "http", kinds: HTTP, attached: 0, conditions: INVALID_KINDS }]),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_invalid_tls_configuration() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-invalid-tls-configuration").await?;
    for name in [
        "gateway-certificate-nonexistent-secret",
        "gateway-certificate-unsupported-group",
        "gateway-certificate-unsupported-kind",
        "gateway-certificate-malformed-secret",
    ] {
        c.expect_status(
            &gw(name),
            listeners(&[ListenerWant {
                name: "https",
                kinds: HTTP,
                attached: 0,
                conditions: &[("ResolvedRefs", "False", "InvalidCertificateRef")],
            }]),
        )
        .await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_modify_listeners() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-modify-listeners").await?;
    let add = gw("gateway-add-listener");
    bump(&c, &add, |g| {
        g["spec"]["listeners"].as_array_mut().expect("listeners").push(json!({
            "name": "http", "port": 80, "protocol": "HTTP", "hostname": "data.test.com",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }))
    })
    .await?;
    c.expect_status(
        &add,
        listeners(&[
            ListenerWant { name: "https", kinds: HTTP, attached: 1, conditions: RESOLVED },
            ListenerWant { name: "http", kinds: HTTP, attached: 1, conditions: RESOLVED },
        ]),
    )
    .await?;
    let remove = gw("gateway-remove-listener");
    bump(&c, &remove, |g| g["spec"]["listeners"].as_array_mut().expect("listeners").retain(|l| l["name"] != "https"))
        .await?;
    c.expect_status(
        &remove,
        listeners(&[ListenerWant { name: "http", kinds: HTTP, attached: 1, conditions: RESOLVED }]),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_name_maximum_length() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-name-maximum-length").await?;
    let name = c.gateways.keys().next().ok_or_else(|| anyhow::anyhow!("no Gateway"))?.clone();
    anyhow::ensure!(name.len() == NS.len() + 1 + 253, "the Gateway's name is not 253 characters: {name}");
    c.expect_status(&format!("Gateway/{name}"), own_condition("Accepted", "True", "")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_observed_generation_bump() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-observed-generation-bump").await?;
    bump(&c, &gw("gateway-observed-generation-bump"), |g| {
        g["spec"]["listeners"].as_array_mut().expect("listeners").push(json!({
            "name": "alternate", "hostname": "foo.com", "port": 80, "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_optional_address_value() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-optional-address-value").await?;
    c.expect_status(&gw("gateway-without-address-value"), |doc| {
        latest_conditions(doc)?;
        let addresses = doc["status"]["addresses"].as_array().cloned().unwrap_or_default();
        if addresses.iter().any(|a| a["value"].as_str().is_some_and(|v| !v.is_empty())) {
            Ok(())
        } else {
            Err("no address assigned".into())
        }
    })
    .await
}

/// The `https` listener of `gateway` has `conditions`.
async fn https_listener(
    c: &Case,
    gateway: &str,
    conditions: &'static [(&'static str, &'static str, &'static str)],
) -> anyhow::Result<()> {
    let want = [ListenerWant { name: "https", kinds: HTTP, attached: 0, conditions }];
    c.expect_status(&gw(gateway), listeners(&want)).await
}

const REF_NOT_PERMITTED: &[(&str, &str, &str)] = &[("ResolvedRefs", "False", "RefNotPermitted")];
const PROGRAMMED: &[(&str, &str, &str)] = &[("Programmed", "True", "Programmed"), ("ResolvedRefs", "True", "")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_secret_invalid_reference_grant() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-secret-invalid-reference-grant").await?;
    https_listener(&c, "gateway-secret-invalid-reference-grant", REF_NOT_PERMITTED).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_secret_missing_reference_grant() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-secret-missing-reference-grant").await?;
    https_listener(&c, "gateway-secret-missing-reference-grant", REF_NOT_PERMITTED).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_secret_reference_grant_all_in_namespace() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-secret-reference-grant-all-in-namespace").await?;
    https_listener(&c, "gateway-secret-reference-grant-all-in-namespace", PROGRAMMED).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_secret_reference_grant_specific() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-secret-reference-grant-specific").await?;
    https_listener(&c, "gateway-secret-reference-grant-specific", PROGRAMMED).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_with_attached_routes() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-with-attached-routes").await?;
    c.expect_status(
        &gw("gateway-with-one-attached-route"),
        listeners(&[ListenerWant { name: "http", kinds: HTTP, attached: 1, conditions: RESOLVED }]),
    )
    .await?;
    let two = "gateway-with-two-attached-routes";
    c.expect_status(
        &gw(two),
        listeners(&[ListenerWant { name: "http", kinds: HTTP, attached: 2, conditions: RESOLVED }]),
    )
    .await?;
    c.expect_status(
        &format!("HTTPRoute/{NS}/http-route-not-accepted"),
        route_condition(two, "Accepted", "False", "NoMatchingListenerHostname"),
    )
    .await?;
    let unresolved = "unresolved-gateway-with-one-attached-unresolved-route";
    c.expect_status(
        &gw(unresolved),
        listeners(&[ListenerWant {
            name: "tls",
            kinds: HTTP,
            attached: 1,
            conditions: &[("Programmed", "False", ""), ("ResolvedRefs", "False", "")],
        }]),
    )
    .await?;
    c.expect_status(&format!("HTTPRoute/{NS}/http-route-4"), route_condition(unresolved, "ResolvedRefs", "False", ""))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_with_attached_routes_with_port_8080() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-with-attached-routes-with-port-8080").await?;
    c.expect_status(
        &gw("gateway-with-two-listeners-and-one-attached-route"),
        listeners(&[
            ListenerWant { name: "http-unattached", kinds: HTTP, attached: 0, conditions: RESOLVED },
            ListenerWant { name: "http", kinds: HTTP, attached: 1, conditions: RESOLVED },
        ]),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gatewayclass_observed_generation_bump() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gatewayclass-observed-generation-bump").await?;
    let class = "GatewayClass/gatewayclass-observed-generation-bump";
    c.expect_status(class, own_condition("Accepted", "True", "")).await?;
    bump(&c, class, |g| g["spec"]["description"] = json!("new")).await?;
    c.expect_status(class, own_condition("Accepted", "True", "")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_disallowed_kind() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("httproute-disallowed-kind").await?;
    let route = format!("HTTPRoute/{NS}/disallowed-kind");
    let gateway = "tlsroutes-only";
    c.expect_status(&route, route_condition(gateway, "ResolvedRefs", "True", "ResolvedRefs")).await?;
    c.expect_status(&route, route_condition(gateway, "Accepted", "False", "NotAllowedByListeners")).await?;
    c.expect_status(&route, no_accepted_parent).await?;
    c.expect_status(&gw(gateway), no_routes).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_observed_generation_bump() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("httproute-observed-generation-bump").await?;
    let route = format!("HTTPRoute/{NS}/observed-generation-bump");
    c.expect_status(&route, route_condition("same-namespace", "Accepted", "True", "")).await?;
    c.expect_status(&route, route_condition("same-namespace", "ResolvedRefs", "True", "ResolvedRefs")).await?;
    bump(&c, &route, |r| r["spec"]["rules"][0]["backendRefs"][0]["name"] = json!("infra-backend-v2")).await?;
    c.expect_status(&route, route_condition("same-namespace", "ResolvedRefs", "True", "ResolvedRefs")).await
}

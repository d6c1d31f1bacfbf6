//! Issue 19: upstream Gateway API conformance cases through a real Envoy.
//!
//! Each test loads one case of `../shared/gateway-api-conformance` as shipped (only
//! `{GATEWAY_CLASS_NAME}` substituted), serves it with `xdst serve` and the `gateway-api`
//! plugin to a real Envoy, and sends the requests of the upstream Go test of the same name
//! (`conformance/tests/<case>.go` at 4564255), expecting the same answers: status, which
//! Service's pod answered, and what reached it. See `xdst_tests::gateway_api` for the harness.

use xdst_tests::gateway_api::{Case, Expect, Request};

const NS: &str = "gateway-conformance-infra";
const SAME: &str = "gateway-conformance-infra/same-namespace";
const V1: &str = "infra-backend-v1";
const V2: &str = "infra-backend-v2";
const V3: &str = "infra-backend-v3";

/// A request for `path` that must reach `backend` in the infrastructure namespace.
fn to(path: &'static str, backend: &'static str) -> (Request, Expect) {
    (
        Request { path, ..Default::default() },
        Expect { status: 200, backend: Some(backend), namespace: Some(NS), ..Default::default() },
    )
}

/// A request for `path` that must be answered with `status` by Envoy itself.
fn status(path: &'static str, status: u16) -> (Request, Expect) {
    (Request { path, ..Default::default() }, Expect { status, ..Default::default() })
}

/// The same request with headers.
fn with(mut c: (Request, Expect), headers: &[(&'static str, &'static str)]) -> (Request, Expect) {
    c.0.headers.extend_from_slice(headers);
    c
}

/// Runs `table` against `gateway`'s port 80 in `case`.
async fn run(case: &str, gateway: &str, table: Vec<(Request, Expect)>) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let c = Case::start(case).await?;
    for (req, want) in &table {
        c.expect(gateway, 80, req, want).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_simple_same_namespace() -> anyhow::Result<()> {
    run("httproute-simple-same-namespace", SAME, vec![to("/", V1)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_matching() -> anyhow::Result<()> {
    let table = vec![
        to("/", V1),
        to("/example", V1),
        with(to("/", V1), &[("Version", "one")]),
        to("/v2", V2),
        to("/v2/example", V2),
        with(to("/", V2), &[("Version", "two")]),
        to("/v2/", V2),
        to("/v2example", V1),
        to("/foo/v2/example", V1),
    ];
    run("httproute-matching", SAME, table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_exact_path_matching() -> anyhow::Result<()> {
    let table = vec![
        to("/one", V1),
        to("/two", V2),
        status("/", 404),
        status("/one/example", 404),
        status("/two/", 404),
        status("/Two", 404),
    ];
    run("httproute-exact-path-matching", SAME, table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_header_matching() -> anyhow::Result<()> {
    let table = vec![
        with(to("/", V1), &[("Version", "one")]),
        with(to("/", V2), &[("Version", "two")]),
        with(to("/", V1), &[("Version", "two"), ("Color", "orange")]),
        with(to("/", V2), &[("Version", "two"), ("Color", "blue")]),
        with(status("/", 404), &[("Color", "orange")]),
        with(status("/", 404), &[("Some-Other-Header", "one")]),
        with(to("/", V1), &[("Color", "blue")]),
        with(to("/", V1), &[("Color", "green")]),
        with(to("/", V2), &[("Color", "red")]),
        with(to("/", V2), &[("Color", "yellow")]),
        with(status("/", 404), &[("Color", "purple")]),
    ];
    run("httproute-header-matching", SAME, table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_multiple_gateways() -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let c = Case::start("httproute-multiple-gateways").await?;
    for (gateway, dedicated) in [(SAME, V2), ("gateway-conformance-infra/all-namespaces", V3)] {
        for (req, want) in [to("/shared", V1), to("/", dedicated)] {
            c.expect(gateway, 80, &req, &want).await?;
        }
    }
    Ok(())
}

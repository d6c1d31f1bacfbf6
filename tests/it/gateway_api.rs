//! Issue 19: upstream Gateway API conformance cases through a real Envoy.
//!
//! Each test loads one case of the upstream conformance suite as shipped (only
//! `{GATEWAY_CLASS_NAME}` substituted), serves it with `xdst serve` and the `gateway-api`
//! plugin to a real Envoy, and sends the requests of the upstream Go test of the same name
//! (`conformance/tests/<case>.go` at 4564255), expecting the same answers: status, which
//! Service's pod answered, and what reached it. See `xdst_tests::gateway_api` for the harness.
//!
//! The cases are read from `$XDST_GATEWAY_API_CASES`, else `../shared/gateway-api-suite`:
//! an input from outside the repository. Without them, every test that needs them prints one
//! line saying it skipped them and why, and passes (issue 34, item 5).

use xdst_tests::gateway_api::{Case, Expect, Redirect, Request};

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

/// A request for `path` that must be answered with `status` by Envoy itself (an answer from a
/// backend, whatever its status, is a failure).
fn status(path: &'static str, status: u16) -> (Request, Expect) {
    (Request { path, ..Default::default() }, Expect { status, by_gateway: true, ..Default::default() })
}

/// The same request with headers.
fn with(mut c: (Request, Expect), headers: &[(&'static str, &'static str)]) -> (Request, Expect) {
    c.0.headers.extend_from_slice(headers);
    c
}

/// The same request for another host.
fn host(mut c: (Request, Expect), host: &'static str) -> (Request, Expect) {
    c.0.host = Some(host);
    c
}

/// The same request with another method.
fn method(mut c: (Request, Expect), method: &'static str) -> (Request, Expect) {
    c.0.method = Some(method);
    c
}

/// The same request, expecting the backend to receive these headers and not those.
fn received(
    mut c: (Request, Expect),
    headers: &[(&'static str, &'static str)],
    absent: &[&'static str],
) -> (Request, Expect) {
    c.1.backend_headers.extend_from_slice(headers);
    c.1.backend_absent_headers.extend_from_slice(absent);
    c
}

/// Upstream's "...-and-modify-headers" requests: they send `X-Header-Remove` and
/// `X-Header-Add-Append` (and `extra`), and the rule's header filter must have removed,
/// appended and set.
fn modify_headers(c: (Request, Expect), extra: &[(&'static str, &'static str)]) -> (Request, Expect) {
    let mut sent = vec![("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1")];
    sent.extend_from_slice(extra);
    received(
        with(c, &sent),
        &[
            ("X-Header-Add", "header-val-1"),
            ("X-Header-Add-Append", "append-val-1,header-val-2"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &["X-Header-Remove"],
    )
}

/// A request for `path` answered with a redirect `code` to `to`.
fn redirect(path: &'static str, code: u16, to: Redirect) -> (Request, Expect) {
    (Request { path, ..Default::default() }, Expect { status: code, redirect: Some(to), ..Default::default() })
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
    xdst_tests::skip_without_upstream_cases!();
    run("httproute-simple-same-namespace", SAME, vec![to("/", V1)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_matching() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
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
    xdst_tests::skip_without_upstream_cases!();
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
    xdst_tests::skip_without_upstream_cases!();
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
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-multiple-gateways").await?;
    for (gateway, dedicated) in [(SAME, V2), ("gateway-conformance-infra/all-namespaces", V3)] {
        for (req, want) in [to("/shared", V1), to("/", dedicated)] {
            c.expect(gateway, 80, &req, &want).await?;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_query_param_matching() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![
        to("/?animal=whale", V1),
        to("/?animal=dolphin", V2),
        to("/?animal=dolphin&color=blue", V3),
        to("/?ANIMAL=Whale", V3),
        to("/?animal=whale&otherparam=irrelevant", V1),
        to("/?animal=dolphin&color=yellow", V2),
        status("/?color=blue", 404),
        status("/?animal=dog", 404),
        status("/?animal=whaledolphin", 404),
        status("/", 404),
        to("/path1?animal=whale", V1),
        with(to("/?animal=whale", V2), &[("version", "one")]),
        with(to("/path2?animal=whale", V3), &[("version", "two")]),
        to("/path3?animal=shark", V1),
        with(to("/path4?animal=kraken", V1), &[("version", "three")]),
        status("/?animal=shark", 404),
        status("/path4?animal=kraken", 404),
        to("/path5?animal=hydra", V1),
        with(to("/?animal=hydra", V3), &[("version", "four")]),
    ];
    run("httproute-query-param-matching", SAME, table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_method_matching() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![method(to("/", V1), "POST"), method(to("/", V2), "GET"), method(status("/", 404), "HEAD")];
    run("httproute-method-matching", SAME, table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_path_match_order() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![
        to("/match/exact/one", V3),
        to("/match/exact", V2),
        to("/match", V1),
        to("/match/prefix/one/any", V2),
        to("/match/prefix/any", V1),
        to("/match/any", V3),
    ];
    run("httproute-path-match-order", SAME, table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_listener_hostname_matching() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![
        host(to("/", V1), "bar.com"),
        host(to("/", V2), "foo.bar.com"),
        host(to("/", V3), "baz.bar.com"),
        host(to("/", V3), "boo.bar.com"),
        host(to("/", V3), "multiple.prefixes.bar.com"),
        host(to("/", V3), "multiple.prefixes.foo.com"),
        host(status("/", 404), "foo.com"),
        host(status("/", 404), "no.matching.host"),
    ];
    run("httproute-listener-hostname-matching", "gateway-conformance-infra/httproute-listener-hostname-matching", table)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_hostname_intersection() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![
        host(to("/s1", V1), "very.specific.com"),
        host(to("/s1", V1), "very.specific.com:1234"),
        host(status("/s1", 404), "non.matching.com"),
        host(status("/s1", 404), "foo.nonmatchingwildcard.io"),
        host(status("/s1", 404), "foo.wildcard.io"),
        host(status("/non-matching-prefix", 404), "very.specific.com"),
        host(to("/s2", V2), "foo.wildcard.io"),
        host(to("/s2", V2), "bar.wildcard.io"),
        host(to("/s2", V2), "foo.bar.wildcard.io"),
        host(status("/s2", 404), "non.matching.com"),
        host(status("/s2", 404), "wildcard.io"),
        host(status("/s2", 404), "very.specific.com"),
        host(status("/non-matching-prefix", 404), "foo.wildcard.io"),
        host(to("/s3", V3), "very.specific.com"),
        host(status("/s3", 404), "non.matching.com"),
        host(status("/s3", 404), "foo.specific.com"),
        host(status("/s3", 404), "foo.wildcard.io"),
        host(to("/s4", V1), "foo.anotherwildcard.io"),
        host(to("/s4", V1), "bar.anotherwildcard.io"),
        host(to("/s4", V1), "foo.bar.anotherwildcard.io"),
        host(status("/s4", 404), "anotherwildcard.io"),
        host(status("/s4", 404), "foo.wildcard.io"),
        host(status("/s4", 404), "very.specific.com"),
        host(status("/non-matching-prefix", 404), "foo.anotherwildcard.io"),
        host(status("/s5", 404), "specific.but.wrong.com"),
        host(status("/s5", 404), "wildcard.io"),
    ];
    xdst_tests::init_logging();
    let c = Case::start("httproute-hostname-intersection").await?;
    for (req, want) in &table {
        c.expect("gateway-conformance-infra/httproute-hostname-intersection", 80, req, want).await?;
    }
    let all = "gateway-conformance-infra/httproute-hostname-intersection-all";
    for (req, want) in [
        host(to("/", V2), "first.com"),
        host(to("/", V2), "sub.first.com"),
        host(to("/", V2), "second.com"),
        host(to("/", V2), "sub.second.com"),
        host(status("/", 404), "third.com"),
        host(status("/", 404), "sub.third.com"),
    ] {
        c.expect(all, 80, &req, &want).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_matching_across_routes() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![
        host(to("/", V1), "example.com"),
        host(to("/example", V1), "example.com"),
        host(to("/example", V1), "example.net"),
        with(host(to("/example", V1), "example.com"), &[("Version", "one")]),
        host(to("/v2", V2), "example.com"),
        // v2 matches are limited to example.com.
        host(to("/v2", V1), "example.net"),
        host(to("/v2/example", V2), "example.com"),
        with(host(to("/", V2), "example.com"), &[("Version", "two")]),
    ];
    run("httproute-matching-across-routes", SAME, table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_listener_port_matching() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-listener-port-matching").await?;
    let gw = "gateway-conformance-infra/httproute-listener-port-matching";
    c.expect(gw, 80, &host(to("/", V1), "foo.com").0, &to("/", V1).1).await?;
    for (port, (req, want)) in [
        (8080, host(to("/", V2), "foo.com:8080")),
        (8080, host(to("/", V2), "bar.com:8080")),
        (8090, host(to("/", V3), "foo.com:8090")),
        (8090, host(status("/", 404), "bar.com:8090")),
    ] {
        c.expect(gw, port, &req, &want).await?;
    }
    Ok(())
}

/// The requests of upstream's `HTTPRouteRequestHeaderModifier`, which its backend variant
/// shares.
fn request_header_table() -> Vec<(Request, Expect)> {
    vec![
        received(
            with(to("/set", V1), &[("Some-Other-Header", "val")]),
            &[("Some-Other-Header", "val"), ("X-Header-Set", "set-overwrites-values")],
            &[],
        ),
        received(
            with(to("/set", V1), &[("Some-Other-Header", "val"), ("X-Header-Set", "some-other-value")]),
            &[("Some-Other-Header", "val"), ("X-Header-Set", "set-overwrites-values")],
            &[],
        ),
        received(
            with(to("/add", V1), &[("Some-Other-Header", "val")]),
            &[("Some-Other-Header", "val"), ("X-Header-Add", "add-appends-values")],
            &[],
        ),
        received(
            with(to("/add", V1), &[("Some-Other-Header", "val"), ("X-Header-Add", "some-other-value")]),
            &[("Some-Other-Header", "val"), ("X-Header-Add", "some-other-value,add-appends-values")],
            &[],
        ),
        received(with(to("/remove", V1), &[("X-Header-Remove", "val")]), &[], &["X-Header-Remove"]),
        received(
            with(
                to("/multiple", V1),
                &[
                    ("X-Header-Set-2", "set-val-2"),
                    ("X-Header-Add-2", "add-val-2"),
                    ("X-Header-Remove-2", "remove-val-2"),
                    ("Another-Header", "another-header-val"),
                ],
            ),
            &[
                ("X-Header-Set-1", "header-set-1"),
                ("X-Header-Set-2", "header-set-2"),
                ("X-Header-Add-1", "header-add-1"),
                ("X-Header-Add-2", "add-val-2,header-add-2"),
                ("X-Header-Add-3", "header-add-3"),
                ("Another-Header", "another-header-val"),
            ],
            &["X-Header-Remove-1", "X-Header-Remove-2"],
        ),
        received(
            with(
                to("/case-insensitivity", V1),
                &[
                    ("x-header-set", "original-val-set"),
                    ("x-header-add", "original-val-add"),
                    ("x-header-remove", "original-val-remove"),
                    ("Another-Header", "another-header-val"),
                ],
            ),
            &[
                ("X-Header-Set", "header-set"),
                ("X-Header-Add", "original-val-add,header-add"),
                ("Another-Header", "another-header-val"),
            ],
            &["x-header-remove", "X-Header-Remove"],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_request_header_modifier() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    run("httproute-request-header-modifier", SAME, request_header_table()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_backend_request_header_modifier() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    run("httproute-backend-request-header-modifier", SAME, request_header_table()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_request_header_modifier_backend_weights() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-request-header-modifier-backend-weights").await?;
    let req = Request { path: "/", ..Default::default() };
    c.expect(SAME, 80, &req, &Expect { status: 200, namespace: Some(NS), ..Default::default() }).await?;
    // Each backend's share carries the header its own filter sets, naming that backend.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..100 {
        let answer = xdst_tests::gateway_api::send(c.addr(SAME, 80), &req).await?;
        let echo: serde_json::Value = serde_json::from_str(&answer.body)?;
        let backend = echo["headers"]["Backend"].as_array().cloned().unwrap_or_default();
        anyhow::ensure!(backend.len() == 1, "want one Backend header, got {backend:?}");
        let (pod, named) = (echo["pod"].as_str().unwrap_or(""), backend[0].as_str().unwrap_or(""));
        anyhow::ensure!(pod.starts_with(named), "pod {pod} got Backend: {named}");
        seen.insert(named.to_owned());
    }
    anyhow::ensure!(seen.len() == 2, "both backends should have had requests: {seen:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_backend_url_rewrite_and_redirect() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let mut full = to("/full/original", V1);
    full.1.backend_path = Some("/rewritten-full");
    let mut prefix = to("/prefix/original", V1);
    prefix.1.backend_path = Some("/rewritten-prefix/original");
    run("httproute-backend-url-rewrite", SAME, vec![full, prefix]).await?;
    let to_path = |path| Redirect { path: Some(path), ..Default::default() };
    run(
        "httproute-backend-request-redirect",
        SAME,
        vec![
            redirect("/full/original", 302, to_path("/redirected-full")),
            redirect("/prefix/original", 302, to_path("/redirected-prefix/original")),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_response_header_modifier() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let sets = |mut c: (Request, Expect),
                sets: &[(&'static str, &'static str)],
                want: &[(&'static str, &'static str)],
                absent: &[&'static str]| {
        c.0.backend_sets.extend_from_slice(sets);
        c.1.response_headers.extend_from_slice(want);
        c.1.response_absent_headers.extend_from_slice(absent);
        c
    };
    let table = vec![
        sets(
            to("/set", V1),
            &[("Some-Other-Header", "val")],
            &[("Some-Other-Header", "val"), ("X-Header-Set", "set-overwrites-values")],
            &[],
        ),
        sets(
            to("/set", V1),
            &[("Some-Other-Header", "val"), ("X-Header-Set", "some-other-value")],
            &[("Some-Other-Header", "val"), ("X-Header-Set", "set-overwrites-values")],
            &[],
        ),
        sets(
            to("/add", V1),
            &[("Some-Other-Header", "val")],
            &[("Some-Other-Header", "val"), ("X-Header-Add", "add-appends-values")],
            &[],
        ),
        sets(
            to("/add", V1),
            &[("Some-Other-Header", "val"), ("X-Header-Add", "some-other-value")],
            &[("Some-Other-Header", "val"), ("X-Header-Add", "some-other-value,add-appends-values")],
            &[],
        ),
        sets(to("/remove", V1), &[("X-Header-Remove", "val")], &[], &["X-Header-Remove"]),
        sets(
            to("/multiple", V1),
            &[
                ("X-Header-Set-2", "set-val-2"),
                ("X-Header-Add-2", "add-val-2"),
                ("X-Header-Remove-2", "remove-val-2"),
                ("Another-Header", "another-header-val"),
                ("X-Header-Remove-1", "val"),
            ],
            &[
                ("X-Header-Set-1", "header-set-1"),
                ("X-Header-Set-2", "header-set-2"),
                ("X-Header-Add-1", "header-add-1"),
                ("X-Header-Add-2", "add-val-2,header-add-2"),
                ("X-Header-Add-3", "header-add-3"),
                ("Another-Header", "another-header-val"),
            ],
            &["X-Header-Remove-1", "X-Header-Remove-2"],
        ),
        sets(
            to("/case-insensitivity", V1),
            &[
                ("x-header-set", "original-val-set"),
                ("x-header-add", "original-val-add"),
                ("x-header-remove", "original-val-remove"),
                ("Another-Header", "another-header-val"),
            ],
            &[
                ("X-Header-Set", "header-set"),
                ("X-Header-Add", "original-val-add,header-add"),
                ("X-Lowercase-Add", "lowercase-add"),
                ("X-Mixedcase-Add-1", "mixedcase-add-1"),
                ("X-Mixedcase-Add-2", "mixedcase-add-2"),
                ("X-Uppercase-Add", "uppercase-add"),
                ("Another-Header", "another-header-val"),
            ],
            &["x-header-remove", "X-Header-Remove"],
        ),
        received(
            modify_headers(
                sets(
                    to("/response-and-request-header-modifiers", V1),
                    &[
                        ("X-Header-Set-2", "set-val-2"),
                        ("X-Header-Add-2", "add-val-2"),
                        ("X-Header-Remove-2", "remove-val-2"),
                        ("Another-Header", "another-header-val"),
                        ("X-Header-Remove-1", "remove-val-1"),
                        ("X-Header-Echo", "echo"),
                    ],
                    &[
                        ("X-Header-Set-1", "header-set-1"),
                        ("X-Header-Set-2", "header-set-2"),
                        ("X-Header-Add-1", "header-add-1"),
                        ("X-Header-Add-2", "add-val-2,header-add-2"),
                        ("Another-Header", "another-header-val"),
                        ("X-Header-Echo", "echo"),
                    ],
                    &["X-Header-Remove-1", "X-Header-Remove-2"],
                ),
                &[("X-Header-Echo", "echo")],
            ),
            &[("X-Header-Echo", "echo")],
            &[],
        ),
    ];
    run("httproute-response-header-modifier", SAME, table).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_invalid_backend_refs_answer_500() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    run("httproute-invalid-nonexistent-backendref", SAME, vec![status("/", 500)]).await?;
    run("httproute-invalid-backendref-unknown-kind", SAME, vec![status("/v2", 500)]).await?;
    run("httproute-invalid-cross-namespace-backend-ref", SAME, vec![status("/", 500)]).await?;
    run("httproute-invalid-reference-grant", SAME, vec![status("/", 500)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_omitted_backendrefs() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![to("/forward", V1), status("/omitted-no-forward", 500), status("/empty-no-forward", 500)];
    run("httproute-omitted-backendrefs", SAME, table).await
}

const WEB: &str = "gateway-conformance-web-backend";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_cross_namespace() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-cross-namespace").await?;
    let want = Expect { status: 200, backend: Some("web-backend"), namespace: Some(WEB), ..Default::default() };
    c.expect("gateway-conformance-infra/backend-namespaces", 80, &Request { path: "/", ..Default::default() }, &want)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_reference_grant_and_its_removal() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-reference-grant").await?;
    let req = Request { path: "/", ..Default::default() };
    let want = Expect { status: 200, backend: Some("web-backend"), namespace: Some(WEB), ..Default::default() };
    c.expect(SAME, 80, &req, &want).await?;
    // Without the grant the reference is no longer permitted.
    c.remove(&format!("ReferenceGrant/{WEB}/reference-grant"))?;
    c.expect(SAME, 80, &req, &status("/", 500).1).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_partially_invalid_via_invalid_reference_grant() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-partially-invalid-via-invalid-reference-grant").await?;
    c.expect(SAME, 80, &status("/v2", 500).0, &status("/v2", 500).1).await?;
    let want = Expect { status: 200, backend: Some("app-backend-v1"), ..Default::default() };
    c.expect(SAME, 80, &Request { path: "/", ..Default::default() }, &want).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_redirects() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let r = |scheme, host, port, path| Redirect { scheme, host, port, path };
    run(
        "httproute-redirect-path",
        SAME,
        vec![
            redirect("/original-prefix/lemon", 302, r(None, None, None, Some("/replacement-prefix/lemon"))),
            redirect("/full/path/original", 302, r(None, None, None, Some("/full-path-replacement"))),
            redirect("/path-and-host", 302, r(None, Some("example.org"), None, Some("/replacement-prefix"))),
            redirect("/path-and-status", 301, r(None, None, None, Some("/replacement-prefix"))),
            redirect("/full-path-and-host", 302, r(None, Some("example.org"), None, Some("/replacement-full"))),
            redirect("/full-path-and-status", 301, r(None, None, None, Some("/replacement-full"))),
        ],
    )
    .await?;
    run(
        "httproute-redirect-host-and-status",
        SAME,
        vec![
            redirect("/hostname-redirect", 302, r(None, Some("example.org"), None, None)),
            redirect("/host-and-status", 301, r(None, Some("example.org"), None, None)),
        ],
    )
    .await?;
    run(
        "httproute-redirect-scheme",
        SAME,
        vec![
            redirect("/scheme", 302, r(Some("https"), None, None, None)),
            redirect("/scheme-and-host", 302, r(Some("https"), Some("example.org"), None, None)),
            redirect("/scheme-and-status", 301, r(Some("https"), None, None, None)),
            redirect("/scheme-and-host-and-status", 302, r(Some("https"), Some("example.org"), None, None)),
            // Not upstream's: a Host with a port, which a redirect to the scheme's own port
            // must not copy into the URL (https://example.org, not https://example.org:8080).
            host(redirect("/scheme", 302, r(Some("https"), None, None, None)), "example.org:8080"),
        ],
    )
    .await?;
    run(
        "httproute-redirect-port",
        SAME,
        vec![
            redirect("/port", 302, r(None, None, Some("8083"), None)),
            redirect("/port-and-host", 302, r(None, Some("example.org"), Some("8083"), None)),
            redirect("/port-and-status", 301, r(None, None, Some("8083"), None)),
            redirect("/port-and-host-and-status", 302, r(None, Some("example.org"), Some("8083"), None)),
        ],
    )
    .await?;
    run("httproute-303-redirect", SAME, vec![method(redirect("/see-other", 303, r(None, None, None, None)), "POST")])
        .await?;
    run("httproute-307-redirect", SAME, vec![redirect("/temporary", 307, r(None, None, None, None))]).await?;
    run("httproute-308-redirect", SAME, vec![redirect("/permanent", 308, r(None, None, None, None))]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_rewrite_path_and_host() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let at = |mut c: (Request, Expect), path: &'static str| {
        c.1.backend_path = Some(path);
        c
    };
    run(
        "httproute-rewrite-path",
        SAME,
        vec![
            at(to("/prefix/one/two", V1), "/one/two"),
            at(to("/strip-prefix/three", V1), "/three"),
            at(to("/strip-prefix", V1), "/"),
            at(to("/full/one/two", V1), "/one"),
            modify_headers(
                at(to("/full/rewrite-path-and-modify-headers/test", V1), "/test"),
                &[("X-Header-Set", "set-val")],
            ),
            modify_headers(
                at(to("/prefix/rewrite-path-and-modify-headers/one", V1), "/prefix/one"),
                &[("X-Header-Set", "set-val")],
            ),
        ],
    )
    .await?;
    let rewritten = |mut c: (Request, Expect), h: &'static str| {
        c.1.backend_host = Some(h);
        c
    };
    run(
        "httproute-rewrite-host",
        SAME,
        vec![
            rewritten(host(to("/one", V1), "rewrite.example"), "one.example.org"),
            rewritten(host(to("/two", V2), "rewrite.example"), "example.org"),
            modify_headers(
                rewritten(host(to("/rewrite-host-and-modify-headers", V2), "rewrite.example"), "test.example.org"),
                &[],
            ),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_named_rule() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let ok = |path| {
        (Request { path, ..Default::default() }, Expect { status: 200, namespace: Some(NS), ..Default::default() })
    };
    run("httproute-named-rule", SAME, vec![ok("/named"), ok("/unnamed")]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_backend_protocol_h2c() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let (mut req, want) = to("/", V1);
    req.h2 = true;
    run("httproute-backend-protocol-h2c", SAME, vec![(req, want)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_service_types() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = ["/manual-endpointslices", "/headless", "/headless-manual-endpointslices"].map(|p| to(p, V1));
    run("httproute-service-types", SAME, table.to_vec()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_http_listener_isolation() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![
        host(to("/empty-hostname", V1), "bar.com"),
        host(status("/wildcard-example-com", 404), "bar.com"),
        host(status("/wildcard-foo-example-com", 404), "bar.com"),
        host(status("/abc-foo-example-com", 404), "bar.com"),
        host(status("/empty-hostname", 404), "bar.example.com"),
        host(to("/wildcard-example-com", V1), "bar.example.com"),
        host(status("/wildcard-foo-example-com", 404), "bar.example.com"),
        host(status("/abc-foo-example-com", 404), "bar.example.com"),
        host(status("/empty-hostname", 404), "bar.foo.example.com"),
        host(status("/wildcard-example-com", 404), "bar.foo.example.com"),
        host(to("/wildcard-foo-example-com", V1), "bar.foo.example.com"),
        host(status("/abc-foo-example-com", 404), "bar.foo.example.com"),
        host(status("/empty-hostname", 404), "abc.foo.example.com"),
        host(status("/wildcard-example-com", 404), "abc.foo.example.com"),
        host(status("/wildcard-foo-example-com", 404), "abc.foo.example.com"),
        host(to("/abc-foo-example-com", V1), "abc.foo.example.com"),
    ];
    xdst_tests::init_logging();
    let c = Case::start("gateway-http-listener-isolation").await?;
    for gateway in ["http-listener-isolation", "http-listener-isolation-with-hostname-intersection"] {
        for (req, want) in &table {
            c.expect(&format!("{NS}/{gateway}"), 80, req, want).await?;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_timeouts() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let ok = |path| {
        (Request { path, ..Default::default() }, Expect { status: 200, namespace: Some(NS), ..Default::default() })
    };
    run(
        "httproute-timeout-request",
        SAME,
        vec![ok("/request-timeout"), status("/request-timeout?delay=1s", 504), ok("/disable-request-timeout?delay=1s")],
    )
    .await?;
    run(
        "httproute-timeout-backend-request",
        SAME,
        vec![ok("/backend-timeout"), status("/backend-timeout?delay=1s", 504), ok("/disable-backend-timeout?delay=1s")],
    )
    .await
}

/// The Service a pod belongs to: its name without the `-N` the harness adds.
pub(crate) fn backend_of(pod: &str) -> String {
    pod.rsplit_once('-').map_or(pod, |(b, _)| b).to_owned()
}

/// Upstream's weighted-routing check (`conformance/utils/weight`), as its tests run it: 500
/// requests (`sample` sends one and names the backend that answered), every answer from a
/// backend of `want`, traffic at exactly the backends of non-zero weight, and each backend's
/// share within 0.05 of its weight; tried again up to 10 times (upstream's `MaxTestRetries`).
pub(crate) async fn weighted_distribution(
    mut sample: impl AsyncFnMut() -> anyhow::Result<String>,
    want: &[(&str, f64)],
) -> anyhow::Result<()> {
    const REQUESTS: u32 = 500;
    const TOLERANCE: f64 = 0.05;
    const TRIES: u32 = 10;
    let mut failures = Vec::new();
    for _ in 0..TRIES {
        let mut seen = std::collections::BTreeMap::<String, u32>::new();
        for _ in 0..REQUESTS {
            let backend = sample().await?;
            anyhow::ensure!(want.iter().any(|(w, _)| *w == backend), "answered by {backend:?}, which no rule names");
            *seen.entry(backend).or_default() += 1;
        }
        let wrong: Vec<String> = want
            .iter()
            .filter_map(|(backend, weight)| {
                let share = f64::from(*seen.get(*backend).unwrap_or(&0)) / f64::from(REQUESTS);
                let ok = if *weight == 0.0 { share == 0.0 } else { share > 0.0 && (share - weight).abs() <= TOLERANCE };
                (!ok).then(|| format!("{backend}: {share:.3}, want {weight:.2} +- {TOLERANCE}"))
            })
            .collect();
        if wrong.is_empty() {
            return Ok(());
        }
        failures.push(format!("{} ({seen:?})", wrong.join(", ")));
    }
    anyhow::bail!("{TRIES} tries of {REQUESTS} requests each out of tolerance: {}", failures.join("; "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_weight() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-weight").await?;
    let req = Request { path: "/", ..Default::default() };
    c.expect(SAME, 80, &req, &Expect { status: 200, namespace: Some(NS), ..Default::default() }).await?;
    // The upstream test's weights, 70/30/0, as upstream checks them.
    let sample = async || {
        let answer = xdst_tests::gateway_api::send(c.addr(SAME, 80), &req).await?;
        anyhow::ensure!(answer.status == 200, "status {}: {}", answer.status, answer.body);
        let echo: serde_json::Value = serde_json::from_str(&answer.body)?;
        Ok(backend_of(echo["pod"].as_str().unwrap_or("")))
    };
    weighted_distribution(sample, &[(V1, 0.7), (V2, 0.3), (V3, 0.0)]).await
}

/// Must-show 3: a route with a bad backend reference next to a good one, added to a case that
/// serves. The good one serves, the bad one answers 500 and its status says ResolvedRefs False
/// with the upstream reason, and the route that served before keeps serving, its own status
/// untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_backend_ref_is_a_condition_on_its_route_and_nothing_else_changes() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-simple-same-namespace").await?;
    c.expect(SAME, 80, &to("/", V1).0, &to("/", V1).1).await?;
    let route = "HTTPRoute/gateway-conformance-infra/gateway-conformance-infra-test";
    let before = c.document(route).await?;
    c.add(
        "bad-ref.yaml",
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mixed, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /good}}]
    backendRefs: [{name: infra-backend-v1, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /bad}}]
    backendRefs: [{name: no-such-service, port: 8080}]
",
    )?;
    c.expect(SAME, 80, &to("/good", V1).0, &to("/good", V1).1).await?;
    c.expect(SAME, 80, &status("/bad", 500).0, &status("/bad", 500).1).await?;
    c.expect(SAME, 80, &to("/", V1).0, &to("/", V1).1).await?;
    let mixed = c.document("HTTPRoute/gateway-conformance-infra/mixed").await?;
    let conditions = &mixed["status"]["parents"][0]["conditions"];
    let find = |t: &str| conditions.as_array().into_iter().flatten().find(|c| c["type"] == t).cloned();
    let resolved = find("ResolvedRefs").ok_or_else(|| anyhow::anyhow!("no ResolvedRefs in {mixed}"))?;
    anyhow::ensure!(
        resolved["status"] == "False" && resolved["reason"] == "BackendNotFound",
        "ResolvedRefs should be False with BackendNotFound: {resolved}"
    );
    anyhow::ensure!(find("Accepted").is_some_and(|a| a["status"] == "True"), "the route is still Accepted: {mixed}");
    let after = c.document(route).await?;
    anyhow::ensure!(before["status"] == after["status"], "the other route's status changed: {before} -> {after}");
    anyhow::ensure!(
        after["status"]["parents"][0]["conditions"].as_array().is_some_and(|c| !c.is_empty()),
        "the other route has a status: {after}"
    );
    Ok(())
}

/// Must-show 2: `xdst translate` works on every case's folder with the manifests exactly as
/// shipped (only `{GATEWAY_CLASS_NAME}` replaced), and `--status` prints the conditions.
#[test]
fn xdst_translate_takes_every_case_as_shipped_and_prints_statuses() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let xdst = xdst_tests::server::binary()?;
    let plugins = tempfile::tempdir()?;
    xdst_tests::plugins::install(plugins.path(), &xdst_tests::plugins::gateway_api()?, "gateway-api.wasm", None)?;
    let mut cases: Vec<_> = std::fs::read_dir(xdst_tests::gateway_api::cases_dir()?)?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("manifests.yaml").exists())
        .collect();
    cases.sort_by_key(|e| e.file_name());
    // The whole suite (139 tests, a manifest each), or its 63 HTTP and gRPC cases.
    anyhow::ensure!(
        [63, 139].contains(&cases.len()),
        "{} cases, want the 139 of the upstream suite (or its 63 HTTP ones)",
        cases.len()
    );
    for case in &cases {
        let intent = tempfile::tempdir()?;
        let text = std::fs::read_to_string(case.path().join("manifests.yaml"))?.replace("{GATEWAY_CLASS_NAME}", "xdst");
        std::fs::write(intent.path().join("manifests.yaml"), text)?;
        let status = case.file_name() == "httproute-invalid-nonexistent-backendref";
        let mut cmd = std::process::Command::new(&xdst);
        cmd.arg("translate").arg("--intent").arg(intent.path()).arg("--plugins").arg(plugins.path());
        if status {
            cmd.args(["--status", "--format", "json"]);
        }
        let out = cmd.output()?;
        anyhow::ensure!(
            out.status.success(),
            "xdst translate on {}: {}",
            case.file_name().to_string_lossy(),
            String::from_utf8_lossy(&out.stderr)
        );
        if status {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            let route = &v["statuses"]["HTTPRoute/gateway-conformance-infra/invalid-nonexistent-backend-ref"];
            let conditions = route["parents"][0]["conditions"].as_array().cloned().unwrap_or_default();
            anyhow::ensure!(
                conditions
                    .iter()
                    .any(|c| c["type"] == "ResolvedRefs" && c["status"] == "False" && c["reason"] == "BackendNotFound"),
                "--status: {v}"
            );
        }
    }
    Ok(())
}

/// The mirror Service's echo.
fn echo<'a>(c: &'a Case, backend: &str) -> anyhow::Result<&'a xdst_tests::echo::Echo> {
    c.echoes.iter().find(|e| e.pod.starts_with(backend)).ok_or_else(|| anyhow::anyhow!("no echo for {backend}"))
}

/// Upstream's mirror cases' "...-and-modify-headers" request for `path`.
fn modified_headers(path: &'static str) -> (Request, Expect) {
    modify_headers(to(path, V1), &[])
}

/// Sends each request until it is answered as expected, then waits (up to 10 s) for every
/// mirror to have received a request for its path.
async fn mirrored(case: &str, table: Vec<((Request, Expect), Vec<&str>)>) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let c = Case::start(case).await?;
    for ((req, want), mirrors) in &table {
        c.expect(SAME, 80, req, want).await?;
        for m in mirrors {
            let e = echo(&c, m)?;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !e.paths().iter().any(|p| p == req.path) {
                anyhow::ensure!(std::time::Instant::now() < deadline, "{case}: {m} got no mirror of {}", req.path);
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_request_mirror() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    mirrored(
        "httproute-request-mirror",
        vec![(to("/mirror", V1), vec![V2]), (modified_headers("/mirror-and-modify-headers"), vec![V2])],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_request_multiple_mirrors() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    mirrored(
        "httproute-request-multiple-mirrors",
        vec![
            (to("/multi-mirror", V1), vec![V2, V3]),
            (modified_headers("/multi-mirror-and-modify-request-headers"), vec![V2, V3]),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_request_percentage_mirror() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-request-percentage-mirror").await?;
    let mirror = echo(&c, V2)?;
    for ((req, want), percent) in [
        (to("/percent-mirror", V1), 20.0),
        (to("/percent-mirror-fraction", V1), 50.0),
        (modified_headers("/percent-mirror-and-modify-headers"), 35.0),
    ] {
        c.expect(SAME, 80, &req, &want).await?;
        let seen = |e: &xdst_tests::echo::Echo| e.paths().iter().filter(|p| *p == req.path).count();
        let (before, n) = (seen(mirror), 300usize);
        for _ in 0..n {
            let answer = xdst_tests::gateway_api::send(c.addr(SAME, 80), &req).await?;
            anyhow::ensure!(answer.status == 200, "{}: {}", req.path, answer.status);
        }
        // Mirrors are sent after the answer: give the last ones a moment.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let got = (seen(mirror) - before) as f64;
        // Upstream's band: three binomial standard deviations around the percentage.
        let (p, total) = (percent / 100.0, n as f64);
        let margin = 3.0 * (total * p * (1.0 - p)).sqrt();
        anyhow::ensure!(
            (total * p - margin..=total * p + margin).contains(&got),
            "{}: {got} of {n} mirrored, want {percent}% +- {margin:.0}",
            req.path
        );
    }
    Ok(())
}

/// Upstream's retry cases: each probe gets a fresh `uuid`, so the echo counts its attempts
/// afresh; `succeedAfter` attempts fail first.
async fn retries(case: &str, table: &[(&str, &str, u16)]) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let c = Case::start(case).await?;
    let mut probe = 0u32;
    for (path, params, want) in table {
        let deadline = std::time::Instant::now() + xdst_tests::gateway_api::WAIT;
        loop {
            probe += 1;
            let full: &'static str = Box::leak(format!("{path}?{params}&uuid={case}-{probe}").into_boxed_str());
            let answer =
                xdst_tests::gateway_api::send(c.addr(SAME, 80), &Request { path: full, ..Default::default() }).await;
            let status = answer.as_ref().map(|a| a.status).unwrap_or(0);
            // Connection errors may end as 500 or 503, as upstream allows.
            let ok = status == *want || (*want == 503 && status == 500);
            if ok {
                break;
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "{case}: {full}: status {status}, want {want}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_retry() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let a3 = "/retry/code-500-attempts-3";
    let all2 = "/retry/code-all-attempts-2";
    retries(
        "httproute-retry",
        &[
            (a3, "responseCode=500&succeedAfter=2", 200),
            (a3, "responseCode=500&succeedAfter=4", 500),
            (a3, "responseCode=503&succeedAfter=2", 503),
            (all2, "responseCode=500&succeedAfter=1", 200),
            (all2, "responseCode=500&succeedAfter=3", 500),
            (all2, "responseCode=502&succeedAfter=1", 200),
            (all2, "responseCode=502&succeedAfter=3", 502),
            (all2, "responseCode=503&succeedAfter=1", 200),
            (all2, "responseCode=503&succeedAfter=3", 503),
            (all2, "responseCode=504&succeedAfter=1", 200),
            (all2, "responseCode=504&succeedAfter=3", 504),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_retry_connection_error() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let path = "/retry/no-status-code-attempts-3";
    retries("httproute-retry-connection-error", &[(path, "succeedAfter=2", 200), (path, "succeedAfter=4", 503)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_retry_with_timeouts() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let backend = "/retry/backend-request-timeout-200ms";
    let request = "/retry/request-timeout-200ms";
    retries(
        "httproute-retry-with-timeouts",
        &[
            (backend, "responseCode=500&succeedAfter=2&delayRetry=300ms", 200),
            (backend, "responseCode=500&succeedAfter=3&delayRetry=300ms", 504),
            (request, "responseCode=500&succeedAfter=1", 200),
            (request, "responseCode=500&succeedAfter=4&delayRetry=100ms", 504),
        ],
    )
    .await
}

/// Issue 19, point 1: namespaced documents through the intent API. `PUT`, `GET` and `DELETE`
/// of `/intent/{kind}/{namespace}/{name}`; the document is stored as
/// `_api/KIND/NAMESPACE/NAME.yaml`; a body whose namespace differs from the path is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_documents_through_the_intent_api() -> anyhow::Result<()> {
    use xdst_tests::xds::http_with;
    xdst_tests::init_logging();
    let intent = tempfile::tempdir()?;
    let plugins = tempfile::tempdir()?;
    xdst_tests::plugins::install(plugins.path(), &xdst_tests::plugins::gateway_api()?, "gateway-api.wasm", None)?;
    std::fs::copy(
        xdst_tests::repo_root().join("examples/quickstart/gateway-api/gateway-api.yaml"),
        intent.path().join("gateway-api.yaml"),
    )?;
    let token = intent.path().join(".token");
    std::fs::write(&token, "t0ken")?;
    let xdst = xdst_tests::server::Process::start_intent(
        intent.path(),
        plugins.path(),
        &["--admin-token-file", token.to_str().unwrap()],
    )
    .await?;
    let auth = [("Authorization", "Bearer t0ken")];
    let route = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: api, namespace: demo}
spec:
  parentRefs: [{name: demo}]
  rules: [{matches: [{path: {type: PathPrefix, value: /api}}], backendRefs: [{name: backend-a, port: 80}]}]
";
    let (status, body) = http_with(xdst.admin_addr, "PUT", "/intent/HTTPRoute/demo/api", &auth, route).await;
    anyhow::ensure!(status == 200, "PUT: {status} {body}");
    anyhow::ensure!(intent.path().join("_api/HTTPRoute/demo/api.yaml").exists(), "stored where? {body}");
    let (status, body) = http_with(xdst.admin_addr, "GET", "/intent/HTTPRoute/demo/api", &[], "").await;
    let doc: serde_json::Value = serde_json::from_str(&body)?;
    anyhow::ensure!(status == 200 && doc["metadata"]["namespace"] == "demo", "GET: {status} {body}");
    anyhow::ensure!(doc["status"]["parents"][0]["conditions"].is_array(), "GET has no status: {body}");
    // The listing names the namespace.
    let (_, list) = http_with(xdst.admin_addr, "GET", "/intent", &[], "").await;
    let list: serde_json::Value = serde_json::from_str(&list)?;
    anyhow::ensure!(
        list.as_array()
            .into_iter()
            .flatten()
            .any(|d| d["kind"] == "HTTPRoute" && d["namespace"] == "demo" && d["name"] == "api"),
        "GET /intent: {list}"
    );
    // The path names another namespace than the body.
    let (status, body) = http_with(xdst.admin_addr, "PUT", "/intent/HTTPRoute/other/api", &auth, route).await;
    anyhow::ensure!(status == 400 && body.contains("HTTPRoute/demo/api"), "mismatched namespace: {status} {body}");
    let (status, body) = http_with(xdst.admin_addr, "DELETE", "/intent/HTTPRoute/demo/api", &auth, "").await;
    anyhow::ensure!(status == 200, "DELETE: {status} {body}");
    let (status, _) = http_with(xdst.admin_addr, "GET", "/intent/HTTPRoute/demo/api", &[], "").await;
    anyhow::ensure!(status == 404, "after DELETE: {status}");
    Ok(())
}

mod grpc {
    //! The GRPCRoute cases, with a real gRPC client and gRPC echo backends.

    use tonic::Code;
    use xdst_tests::gateway_api::{Case, GrpcCall, GrpcExpect};

    use super::{NS, SAME};

    const G1: &str = "grpc-infra-backend-v1";
    const G2: &str = "grpc-infra-backend-v2";
    const G3: &str = "grpc-infra-backend-v3";

    fn call(method: &'static str) -> GrpcCall {
        GrpcCall { method, ..Default::default() }
    }

    fn meta(method: &'static str, metadata: &[(&'static str, &'static str)]) -> GrpcCall {
        GrpcCall { method, metadata: metadata.to_vec(), ..Default::default() }
    }

    fn reaches(backend: &'static str) -> GrpcExpect {
        GrpcExpect { backend: Some(backend), namespace: Some(NS), ..Default::default() }
    }

    fn fails(code: Code) -> GrpcExpect {
        GrpcExpect { code: Some(code), ..Default::default() }
    }

    async fn run(case: &str, gateway: &str, table: Vec<(GrpcCall, GrpcExpect)>) -> anyhow::Result<()> {
        xdst_tests::init_logging();
        let c = Case::start(case).await?;
        for (call, want) in &table {
            c.expect_grpc(gateway, 80, call, want).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grpcroute_exact_method_matching() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let table = vec![
            (call("Echo"), reaches(G1)),
            (call("EchoTwo"), reaches(G2)),
            (call("EchoThree"), fails(Code::Unimplemented)),
        ];
        run("grpcroute-exact-method-matching", SAME, table).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grpcroute_named_rule() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        run("grpcroute-named-rule", SAME, vec![(call("Echo"), reaches(G1)), (call("EchoTwo"), reaches(G2))]).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grpcroute_header_matching() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let table = vec![
            (meta("Echo", &[("Version", "one")]), reaches(G1)),
            (meta("Echo", &[("Version", "two")]), reaches(G2)),
            (meta("Echo", &[("Version", "two"), ("Color", "orange")]), reaches(G1)),
            (meta("Echo", &[("Version", "two"), ("Color", "blue")]), reaches(G2)),
            (meta("Echo", &[("Color", "orange")]), fails(Code::Unimplemented)),
            (meta("Echo", &[("Some-Other-Header", "one")]), fails(Code::Unimplemented)),
            (meta("Echo", &[("Color", "blue")]), reaches(G1)),
            (meta("Echo", &[("Color", "green")]), reaches(G1)),
            (meta("Echo", &[("Color", "red")]), reaches(G2)),
            (meta("Echo", &[("Color", "yellow")]), reaches(G2)),
            (meta("Echo", &[("Color", "purple")]), fails(Code::Unimplemented)),
        ];
        run("grpcroute-header-matching", SAME, table).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grpcroute_listener_hostname_matching() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let at =
            |authority: &'static str| GrpcCall { method: "Echo", authority: Some(authority), ..Default::default() };
        let table = vec![
            (at("bar.com"), reaches(G1)),
            (at("foo.bar.com"), reaches(G2)),
            (at("baz.bar.com"), reaches(G3)),
            (at("boo.bar.com"), reaches(G3)),
            (at("multiple.prefixes.bar.com"), reaches(G3)),
            (at("multiple.prefixes.foo.com"), reaches(G3)),
            (at("foo.com"), fails(Code::Unimplemented)),
            (at("no.matching.host"), fails(Code::Unimplemented)),
        ];
        run("grpcroute-listener-hostname-matching", &format!("{NS}/grpcroute-listener-hostname-matching"), table).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grpcroute_request_header_modifier() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let authority = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";
        let with = |method, metadata: &[(&'static str, &'static str)]| GrpcCall {
            method,
            authority: Some(authority),
            metadata: metadata.to_vec(),
        };
        let got = |backend, received: &[(&'static str, &'static str)], absent: &[&'static str]| GrpcExpect {
            received: received.to_vec(),
            absent: absent.to_vec(),
            ..reaches(backend)
        };
        let table = vec![
            (
                with("Echo", &[("Some-Other-Header", "this-header-should-be-set")]),
                got(
                    G1,
                    &[("some-other-header", "this-header-should-be-set"), ("x-header-set", "set-overwrites-values")],
                    &[],
                ),
            ),
            (
                with(
                    "Echo",
                    &[
                        ("Some-Other-Header", "this-header-should-be-set"),
                        ("X-Header-Set", "this-value-should-be-overwritten"),
                    ],
                ),
                got(G1, &[("x-header-set", "set-overwrites-values")], &[]),
            ),
            // The case's add and remove rules match `Echo` exactly as its set rule does, which
            // comes first and wins; upstream checks only where these calls land.
            (with("Echo", &[("Some-Other-Header", "this-header-should-be-set")]), reaches(G1)),
            (
                with(
                    "Echo",
                    &[
                        ("Some-Other-Header", "this-header-should-be-set"),
                        ("X-Header-Add", "this-value-should-be-appended"),
                    ],
                ),
                reaches(G1),
            ),
            (with("Echo", &[("X-Header-Remove", "this-should-be-removed")]), reaches(G1)),
            (
                with(
                    "EchoTwo",
                    &[
                        ("X-Header-Set-2", "set-header-2"),
                        ("X-Header-Add-2", "add-header-2"),
                        ("X-Header-Remove-2", "should-be-removed-2"),
                        ("Some-Other-Header", "another-header-val"),
                    ],
                ),
                got(
                    G2,
                    &[
                        ("x-header-set-1", "header-set-1"),
                        ("x-header-set-2", "header-set-2"),
                        ("x-header-add-1", "header-add-1"),
                    ],
                    &["x-header-remove-2"],
                ),
            ),
            (
                with(
                    "EchoTwo",
                    &[
                        ("x-header-set-1", "original-set-1"),
                        ("x-header-add-1", "existing-add-1"),
                        ("x-header-remove-1", "should-be-removed-1"),
                    ],
                ),
                got(G2, &[], &["x-header-remove-1"]),
            ),
        ];
        run("grpcroute-request-header-modifier", SAME, table).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grpcroute_weight() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        xdst_tests::init_logging();
        let c = Case::start("grpcroute-weight").await?;
        c.expect_grpc(SAME, 80, &call("Echo"), &GrpcExpect { namespace: Some(NS), ..Default::default() }).await?;
        // 70/30/0, as upstream checks them.
        let sample = async || {
            let r = xdst_tests::grpc_echo::call(c.addr(SAME, 80), None, "Echo", &[]).await??;
            Ok(super::backend_of(&r.pod))
        };
        super::weighted_distribution(sample, &[(G1, 0.7), (G2, 0.3), (G3, 0.0)]).await
    }
}

/// Upstream's websocket case: a websocket through the Gateway to a backend whose Service port
/// says `appProtocol: kubernetes.io/ws`; a text and a binary message come back as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_backend_protocol_websocket() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    xdst_tests::init_logging();
    let c = Case::start("httproute-backend-protocol-websocket").await?;
    let addr = c.addr(SAME, 80);
    let round_trip = || async {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let mut request = format!("ws://{addr}/ws").into_client_request()?;
        request.headers_mut().insert("Origin", "ws://gateway/websocket".parse()?);
        let (mut ws, _) = tokio_tungstenite::client_async(request, stream).await?;
        let mut replies = Vec::new();
        for message in [Message::text("Websocket Support!"), Message::binary(vec![1u8, 2, 3, 4, 5, 6, 7])] {
            ws.send(message.clone()).await?;
            let reply = ws.next().await.ok_or_else(|| anyhow::anyhow!("closed"))??;
            replies.push((message, reply));
        }
        anyhow::Ok(replies)
    };
    let deadline = std::time::Instant::now() + xdst_tests::gateway_api::WAIT;
    loop {
        let last = match tokio::time::timeout(std::time::Duration::from_secs(5), round_trip()).await {
            Ok(Ok(replies)) if replies.iter().all(|(sent, got)| sent == got) => return Ok(()),
            Ok(Ok(replies)) => format!("replies differ: {replies:?}"),
            Ok(Err(e)) => format!("{e:#}"),
            Err(_) => "no answer within 5 s".to_owned(),
        };
        anyhow::ensure!(std::time::Instant::now() < deadline, "websocket through the Gateway: {last}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

const HTTPS: &str = "gateway-conformance-infra/same-namespace-with-https-listener";

/// A request over TLS for `host` with server name `sni`, over HTTP/2 as upstream's
/// misdirected-request case sends it, or HTTP/1.1.
fn tls(mut c: (Request, Expect), sni: &'static str, host: &'static str, h2: bool) -> (Request, Expect) {
    c.0.sni = Some(sni);
    c.0.host = Some(host);
    c.0.h2 = h2;
    c
}

/// Runs `table` against `gateway`'s port 443 in `case`.
async fn run_https(case: &str, table: Vec<(Request, Expect)>) -> anyhow::Result<()> {
    xdst_tests::init_logging();
    let c = Case::start(case).await?;
    for (req, want) in &table {
        c.expect(HTTPS, 443, req, want).await?;
    }
    Ok(())
}

/// Upstream's HTTPS listener case: the certificate comes from the Secret over SDS, and the
/// server name picks the listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_https_listener() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let table = vec![
        tls(to("/", V1), "example.org", "example.org", false),
        tls(status("/", 404), "unknown-example.org", "unknown-example.org", false),
        tls(to("/", V2), "second-example.org", "second-example.org", false),
    ];
    run_https("httproute-https-listener", table).await
}

/// Upstream's misdirected-request case: over HTTP/2, a host that belongs to another listener
/// of the port than the one the server name picked is answered 421.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_https_listener_detect_misdirected_requests() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let p = "/detect-misdirected-requests";
    let ok = |sni, host, backend| tls(to(p, backend), sni, host, true);
    let no = |sni, host, code| tls(status(p, code), sni, host, true);
    let table = vec![
        ok("example.org", "example.org", V1),
        no("example.org", "second-example.org", 421),
        no("example.org", "unknown-example.org", 404),
        ok("second-example.org", "second-example.org", V2),
        no("second-example.org", "example.org", 421),
        no("second-example.org", "unknown-example.org", 421),
        ok("third-example.wildcard.org", "third-example.wildcard.org", V3),
        ok("third-example.wildcard.org", "fith-example.wildcard.org", V3),
        no("third-example.wildcard.org", "fourth-example.wildcard.org", 421),
        no("third-example.wildcard.org", "second-example.org", 421),
        no("third-example.wildcard.org", "unknown-example.org", 421),
        ok("fourth-example.wildcard.org", "fourth-example.wildcard.org", V1),
        no("fourth-example.wildcard.org", "fith-example.wildcard.org", 421),
        ok("unknown-example.org", "example.org", V1),
        no("unknown-example.org", "unknown-example.org", 404),
    ];
    run_https("httproute-https-listener-detect-misdirected-requests", table).await
}

/// Upstream's redirect port-and-scheme case, on the HTTP listeners at 80 and 8080 and the
/// HTTPS listener at 443: a port the filter leaves out is the scheme's own, or the listener's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_redirect_port_and_scheme() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    xdst_tests::init_logging();
    let c = Case::start("httproute-redirect-port-and-scheme").await?;
    let r = |scheme, port| Redirect { scheme: Some(scheme), host: Some("example.org"), port, path: None };
    let on_80 = vec![
        redirect("/scheme-nil-and-port-nil", 302, r("http", None)),
        redirect("/scheme-nil-and-port-80", 302, r("http", None)),
        redirect("/scheme-nil-and-port-8080", 302, r("http", Some("8080"))),
        redirect("/scheme-https-and-port-nil", 302, r("https", None)),
        redirect("/scheme-https-and-port-443", 302, r("https", None)),
        redirect("/scheme-https-and-port-8443", 302, r("https", Some("8443"))),
    ];
    for (req, want) in &on_80 {
        c.expect(SAME, 80, req, want).await?;
    }
    let on_8080 = vec![
        redirect("/scheme-nil-and-port-nil", 302, r("http", Some("8080"))),
        redirect("/scheme-nil-and-port-80", 302, r("http", None)),
        redirect("/scheme-https-and-port-nil", 302, r("https", None)),
    ];
    for (req, want) in &on_8080 {
        c.expect("gateway-conformance-infra/same-namespace-with-http-listener-on-8080", 8080, req, want).await?;
    }
    let on_443 = vec![
        redirect("/scheme-nil-and-port-nil", 302, r("https", None)),
        redirect("/scheme-nil-and-port-443", 302, r("https", None)),
        redirect("/scheme-nil-and-port-8443", 302, r("https", Some("8443"))),
        redirect("/scheme-http-and-port-nil", 302, r("http", None)),
        redirect("/scheme-http-and-port-80", 302, r("http", None)),
        redirect("/scheme-http-and-port-8080", 302, r("http", Some("8080"))),
    ];
    for (req, want) in on_443 {
        let (req, want) = tls((req, want), "example.org", "example.org", false);
        c.expect(HTTPS, 443, &req, &want).await?;
    }
    Ok(())
}

/// A CORS request: `method` on `path` from `origin`, with these request headers; the answer
/// must carry the headers in `one_of` (each one of its values) and none of `absent`. A
/// preflight (`OPTIONS`) must be answered by Envoy itself (200 or 204), never forwarded to the
/// backend, whether its origin is allowed or not; others reach the backend.
fn cors(
    method: &'static str,
    path: &'static str,
    origin: &'static str,
    headers: &[(&'static str, &'static str)],
    one_of: &[(&'static str, &'static [&'static str])],
    absent: &[&'static str],
) -> (Request, Expect) {
    let mut sent = vec![("Origin", origin)];
    sent.extend_from_slice(headers);
    let preflight = method == "OPTIONS";
    let (mut req, mut want) = if preflight { status(path, 200) } else { to(path, V1) };
    req.method = Some(method);
    want.backend = None;
    if preflight {
        want.or_statuses = &[204];
    }
    want.response_one_of = one_of.to_vec();
    want.response_absent_headers = absent.to_vec();
    with((req, want), &sent)
}

/// Upstream's CORS case: preflights and simple requests against exact, wildcard-host and `*`
/// origins, with and without credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproute_cors() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    const ORIGIN: &str = "access-control-allow-origin";
    const METHODS: &str = "access-control-allow-methods";
    const HEADERS: &str = "access-control-allow-headers";
    const CREDENTIALS: &str = "access-control-allow-credentials";
    let ask = [("access-control-request-method", "GET"), ("access-control-request-headers", "x-header-1, x-header-2")];
    let put = [("access-control-request-method", "PUT"), ("access-control-request-headers", "x-header-1, x-header-2")];
    let post = [("access-control-request-method", "POST")];
    let full = |origin: &'static [&'static str]| {
        vec![
            (ORIGIN, origin),
            (METHODS, &["GET, OPTIONS", "OPTIONS, GET"][..]),
            (HEADERS, &["x-header-1, x-header-2", "x-header-2, x-header-1"][..]),
            ("access-control-expose-headers", &["x-header-3, x-header-4", "x-header-4, x-header-3"][..]),
            ("access-control-max-age", &["3600"][..]),
            (CREDENTIALS, &["true"][..]),
        ]
    };
    let table = vec![
        cors("OPTIONS", "/cors-1", "https://www.foo.com", &ask, &full(&["https://www.foo.com"]), &[]),
        cors("OPTIONS", "/cors-1", "https://www.bar.com", &ask, &full(&["https://www.bar.com"]), &[]),
        cors("OPTIONS", "/cors-1", "https://xpto.www.bar.com", &ask, &full(&["https://xpto.www.bar.com"]), &[]),
        // An origin the policy does not allow: the gateway answers the preflight itself,
        // without access-control-allow-origin (upstream: 200, 204 or 403, and no echo body).
        {
            let mut c = cors("OPTIONS", "/cors-1", "https://foobar.com", &ask[..1], &[], &[ORIGIN]);
            c.1.or_statuses = &[204, 403];
            c
        },
        cors("GET", "/cors-1", "https://www.foo.com", &ask, &[(ORIGIN, &["https://www.foo.com"])], &[]),
        cors("GET", "/cors-1", "https://www.bar.com", &ask, &[(ORIGIN, &["https://www.bar.com"])], &[]),
        cors("GET", "/cors-1", "https://foobar.com", &ask[..1], &[], &[ORIGIN]),
        cors(
            "OPTIONS",
            "/cors-2",
            "https://www.foo.com",
            &post,
            &[(METHODS, &["POST", "*"]), (ORIGIN, &["https://www.foo.com"])],
            &[CREDENTIALS],
        ),
        cors(
            "OPTIONS",
            "/cors-wildcard-origin",
            "https://foobar.com",
            &put[..1],
            &[(ORIGIN, &["https://foobar.com", "*"]), (METHODS, &["PUT"])],
            &[CREDENTIALS],
        ),
        cors(
            "OPTIONS",
            "/cors-wildcard-origin",
            "https://foobar.com:12345",
            &put[..1],
            &[(ORIGIN, &["https://foobar.com:12345", "*"]), (METHODS, &["PUT"])],
            &[CREDENTIALS],
        ),
        cors(
            "PUT",
            "/cors-wildcard-origin",
            "https://foobar.com:12345",
            &[],
            &[(ORIGIN, &["https://foobar.com:12345", "*"])],
            &[],
        ),
        cors(
            "PUT",
            "/cors-wildcard-origin",
            "https://foobar.com",
            &[],
            &[(ORIGIN, &["https://foobar.com", "*"])],
            &[CREDENTIALS],
        ),
        cors(
            "OPTIONS",
            "/cors-wildcard-methods-headers",
            "https://other.foo.com",
            &put,
            &[
                (ORIGIN, &["https://other.foo.com"]),
                (METHODS, &["PUT"]),
                (HEADERS, &["x-header-1, x-header-2", "x-header-2, x-header-1"]),
                (CREDENTIALS, &["true"]),
            ],
            &[],
        ),
        cors(
            "OPTIONS",
            "/cors-wildcard-methods-headers-unauth",
            "https://other.foo.com",
            &put,
            &[
                (ORIGIN, &["https://other.foo.com", "*"]),
                (METHODS, &["PUT", "*"]),
                (HEADERS, &["x-header-1, x-header-2", "x-header-2, x-header-1", "*"]),
            ],
            &[CREDENTIALS],
        ),
        cors(
            "GET",
            "/cors-wildcard-methods-headers",
            "https://other.foo.com",
            &[],
            &[(ORIGIN, &["https://other.foo.com"]), (CREDENTIALS, &["true"])],
            &[],
        ),
        cors(
            "GET",
            "/cors-wildcard-methods-headers-unauth",
            "https://other.foo.com",
            &[],
            &[(ORIGIN, &["https://other.foo.com", "*"])],
            &[CREDENTIALS],
        ),
    ];
    run("httproute-cors", SAME, table).await
}

//! The upstream BackendTLSPolicy conformance tests (kubernetes-sigs/gateway-api at 4564255,
//! `conformance/tests/backendtlspolicy*.go`), through `xdst serve` and a real Envoy: requests
//! through the Gateway reach backends that serve TLS with the suite's certificates when the
//! policy's CA, server name and subject alternative names fit, fail when they do not, and the
//! policies' status per ancestor is what the Go tests assert. The inputs are the upstream
//! manifests in `../shared/gateway-api-suite` (skipped, saying so, without them).

use serde_json::{Value, json};
use xdst_tests::gateway_api::{Case, Expect, Request};

const NS: &str = "gateway-conformance-infra";
const GATEWAY: &str = "same-namespace";

/// The policy's condition `kind` toward the Gateway `gateway` is `status` with `reason` (any
/// when empty), as upstream's `BackendTLSPolicyMustHaveCondition`.
fn policy_condition(
    gateway: &'static str,
    kind: &'static str,
    status: &'static str,
    reason: &'static str,
) -> impl Fn(&Value) -> Result<(), String> {
    move |doc| {
        let ancestors = doc["status"]["ancestors"].as_array().ok_or("no ancestors")?;
        let a =
            ancestors.iter().find(|a| a["ancestorRef"]["name"] == gateway).ok_or(format!("no ancestor {gateway}"))?;
        let found = a["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == kind && c["status"] == status && (reason.is_empty() || c["reason"] == reason));
        if found { Ok(()) } else { Err(format!("want {kind} {status} ({reason}) toward {gateway}")) }
    }
}

async fn policy(
    c: &Case,
    name: &str,
    kind: &'static str,
    status: &'static str,
    reason: &'static str,
) -> anyhow::Result<()> {
    c.expect_status(&format!("BackendTLSPolicy/{NS}/{name}"), policy_condition(GATEWAY, kind, status, reason)).await
}

async fn accepted(c: &Case, name: &str) -> anyhow::Result<()> {
    policy(c, name, "Accepted", "True", "Accepted").await?;
    policy(c, name, "ResolvedRefs", "True", "ResolvedRefs").await
}

/// A request for `path` with the host `abc.example.com` through the Gateway's port 80.
fn get(path: &'static str) -> Request {
    Request { path, host: Some("abc.example.com"), ..Default::default() }
}

/// Upstream's usual server name: the one most policies give (`validation.hostname`).
const SNI: &str = "abc.example.com";

/// Answered 200 by the TLS backend (which only speaks TLS: the gateway re-encrypted), which
/// saw the server name `sni` (upstream's `ExpectedRequest.SNI`: which policy applied).
async fn served(c: &Case, path: &'static str, sni: &'static str) -> anyhow::Result<()> {
    c.expect(&format!("{NS}/{GATEWAY}"), 80, &get(path), &by_tls_backend(sni)).await
}

/// A 200 from the TLS backend, which saw the server name `sni`.
fn by_tls_backend(sni: &'static str) -> Expect {
    Expect {
        status: 200,
        backend: Some("tls-backend"),
        namespace: Some(NS),
        backend_sni: Some(sni),
        ..Default::default()
    }
}

/// Answered with an error by the gateway: the backend's certificate did not pass, or the
/// policy cannot be applied.
async fn refused(c: &Case, path: &'static str) -> anyhow::Result<()> {
    let want = Expect { status: 503, or_statuses: &[500, 502], by_gateway: true, ..Default::default() };
    c.expect(&format!("{NS}/{GATEWAY}"), 80, &get(path), &want).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("backendtlspolicy").await?;
    accepted(&c, "normative-test").await?;
    served(&c, "/backendtlspolicy", SNI).await?;
    // Re-encrypted from an HTTPS listener too.
    c.expect_status(
        &format!("BackendTLSPolicy/{NS}/normative-test"),
        policy_condition("same-namespace-with-https-listener", "Accepted", "True", "Accepted"),
    )
    .await?;
    let https = Request {
        path: "/backendtlspolicy",
        host: Some("https-listener.org"),
        sni: Some("https-listener.org"),
        ..Default::default()
    };
    c.expect(&format!("{NS}/same-namespace-with-https-listener"), 443, &https, &by_tls_backend(SNI)).await?;
    // A server name the certificate does not carry, and a CA that did not sign it. (Upstream
    // sends the first with the host `abc.example.org`, which no route serves; the route's own
    // host shows that the backend's certificate is what fails.)
    for (name, path) in
        [("host-mismatch", "/backendtlspolicy-host-mismatch"), ("cert-mismatch", "/backendtlspolicy-cert-mismatch")]
    {
        accepted(&c, name).await?;
        refused(&c, path).await?;
    }
    // The CA bundle is followed as it changes: a ConfigMap not there yet, then there, then
    // emptied, then filled again.
    let policy_id = format!("BackendTLSPolicy/{NS}/reconcile-test");
    accepted(&c, "reconcile-test").await?;
    c.patch(&policy_id, |p| {
        p["spec"]["validation"]["caCertificateRefs"] =
            json!([{"group": "", "kind": "ConfigMap", "name": "tls-checks-ca-certificate-reconcile-test"}])
    })?;
    let invalid = || async {
        policy(&c, "reconcile-test", "Accepted", "False", "NoValidCACertificate").await?;
        policy(&c, "reconcile-test", "ResolvedRefs", "False", "InvalidCACertificateRef").await
    };
    invalid().await?;
    let ca = c.document(&format!("ConfigMap/{NS}/tls-checks-ca-certificate")).await?["data"]["ca.crt"].clone();
    let write = |pem: &Value| {
        let map = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "tls-checks-ca-certificate-reconcile-test", "namespace": NS},
            "data": {"ca.crt": pem},
        });
        c.add("reconcile-test-ca.yaml", &map.to_string())
    };
    write(&ca)?;
    accepted(&c, "reconcile-test").await?;
    write(&json!(""))?;
    invalid().await?;
    write(&ca)?;
    accepted(&c, "reconcile-test").await?;
    served(&c, "/backendtlspolicy-reconcile-test", SNI).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy_conflict_resolution() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("backendtlspolicy-conflict-resolution").await?;
    for (older, newer, path) in [
        (
            "conflicted-without-section-name-1",
            "conflicted-without-section-name-2",
            "/backendtlspolicy-conflicted-without-section-name",
        ),
        (
            "conflicted-with-section-name-1",
            "conflicted-with-section-name-2",
            "/backendtlspolicy-conflicted-with-section-name",
        ),
    ] {
        policy(&c, older, "Accepted", "True", "Accepted").await?;
        policy(&c, newer, "Accepted", "False", "Conflicted").await?;
        // The older policy's server name: the one that applies.
        served(&c, path, "other.example.com").await?;
    }
    for name in ["not-conflicted-with-section-name", "not-conflicted-without-section-name"] {
        policy(&c, name, "Accepted", "True", "Accepted").await?;
    }
    served(&c, "/backendtlspolicy-not-conflicted-with-section-name", "other.example.com").await?;
    served(&c, "/backendtlspolicy-not-conflicted-without-section-name", SNI).await
}

/// Issue 52, the check shown failing on purpose: a gateway that applies the newer of two
/// conflicting policies (the `breaker` test plugin sends every backend the newer policies'
/// server name, `abc.example.com`) still reaches the backend with 200, and only the server
/// name the backend saw tells: upstream's `ExpectedRequest.SNI`, which `served` checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy_conflict_resolution_fails_when_the_newer_policy_applies() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let breakage = json!({"break": "sni", "to": SNI});
    let c = Case::start_broken("backendtlspolicy-conflict-resolution", breakage).await?;
    // What works still works (the breakage is live with it).
    served(&c, "/backendtlspolicy-not-conflicted-without-section-name", SNI).await?;
    let err = served(&c, "/backendtlspolicy-conflicted-without-section-name", "other.example.com")
        .await
        .expect_err("the check passed on a gateway that applied the newer policy");
    anyhow::ensure!(
        format!("{err:#}").contains("the backend saw server name Some(\"abc.example.com\")"),
        "failed for another reason: {err:#}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy_san() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("backendtlspolicy-san").await?;
    for (name, path, ok) in [
        ("san-dns", "/backendtlspolicy-san-dns", true),
        ("san-dns-mismatch", "/backendtlspolicy-san-dns-mismatch", false),
        ("san-uri", "/backendtlspolicy-san-uri", true),
        ("san-uri-mismatch", "/backendtlspolicy-san-uri-mismatch", false),
        ("multiple-sans", "/backendtlspolicy-multiple-sans", true),
        ("multiple-mismatch-sans", "/backendtlspolicy-multiple-mismatch-sans", false),
    ] {
        policy(&c, name, "Accepted", "True", "Accepted").await?;
        if ok { served(&c, path, SNI).await? } else { refused(&c, path).await? }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy_invalid_ca_certificate_ref() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("backendtlspolicy-invalid-ca-certificate-ref").await?;
    for (name, path) in [
        ("nonexistent-ca-certificate-ref", "/backendtlspolicy-nonexistent-ca-certificate-ref"),
        ("malformed-ca-certificate-ref", "/backendtlspolicy-malformed-ca-certificate-ref"),
    ] {
        policy(&c, name, "Accepted", "False", "NoValidCACertificate").await?;
        policy(&c, name, "ResolvedRefs", "False", "InvalidCACertificateRef").await?;
        refused(&c, path).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy_invalid_kind() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("backendtlspolicy-invalid-kind").await?;
    policy(&c, "invalid-kind", "Accepted", "False", "NoValidCACertificate").await?;
    policy(&c, "invalid-kind", "ResolvedRefs", "False", "InvalidKind").await?;
    refused(&c, "/backendtlspolicy-invalid-kind").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy_observed_generation_bump() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("backendtlspolicy-observed-generation-bump").await?;
    let id = format!("BackendTLSPolicy/{NS}/observed-generation-bump");
    let latest = |doc: &Value| -> Result<(), String> {
        policy_condition(GATEWAY, "Accepted", "True", "")(doc)?;
        let generation = doc["metadata"]["generation"].as_i64();
        let stale = doc["status"]["ancestors"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|a| a["conditions"].as_array().cloned().unwrap_or_default())
            .any(|c| c["observedGeneration"].as_i64() != generation);
        if stale { Err(format!("a condition is not of generation {generation:?}")) } else { Ok(()) }
    };
    c.expect_status(&id, latest).await?;
    let before = c.document(&id).await?["metadata"]["generation"].as_i64();
    c.patch(&id, |p| p["spec"]["validation"]["hostname"] = json!("foo.example.com"))?;
    c.expect_status(&id, |doc| {
        if doc["metadata"]["generation"].as_i64() == before {
            return Err("the generation did not move".into());
        }
        latest(doc)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy_tlsroute_terminate() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let mut c = Case::start("backendtlspolicy-tlsroute-terminate").await?;
    let ca = c.suite.ca_of("tls-checks-ca-certificate")?;
    let tls = xdst_tests::pki::client_config(&ca, None)?;
    let gateway = "gateway-btls-tlsroute-terminate";
    c.expect_status(
        &format!("BackendTLSPolicy/{NS}/btls-tlsroute-terminate-test"),
        policy_condition(gateway, "ResolvedRefs", "True", "ResolvedRefs"),
    )
    .await?;
    // Terminated at the Gateway, then TLS again to the backend, which sees the policy's
    // server name.
    let a = c.expect_tcp(&format!("{NS}/{gateway}"), 8443, Some((&tls, "tls.example.com")), "tcp-backend", NS).await?;
    anyhow::ensure!(a.is_tls && a.server_name.as_deref() == Some("abc.example.com"), "{a:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_tls_backend_client_certificate() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let mut c = Case::start("gateway-tls-backend-client-certificate").await?;
    let name = "gateway-tls-backend-client-certificate";
    c.expect_status(
        &format!("Gateway/{NS}/{name}"),
        xdst_tests::gateway_api::own_condition("ResolvedRefs", "True", "ResolvedRefs"),
    )
    .await?;
    c.expect_status(
        &format!("BackendTLSPolicy/{NS}/gateway-tls-backend-client-certificate-test"),
        policy_condition(name, "Accepted", "True", "Accepted"),
    )
    .await?;
    // The backend checks client certificates against the suite's CA C and says which one it
    // got: it must be the Secret the Gateway names.
    let (cert, _) = c.suite.leaf("tls-checks-client-certificate")?;
    let want: String = std::fs::read_to_string(cert)?.split_whitespace().collect();
    let addr = c.addr(&format!("{NS}/{name}"), 80);
    let req = get("/");
    c.eventually("the backend got the Gateway's client certificate", || async {
        let answer = xdst_tests::gateway_api::send(addr, &req).await?;
        anyhow::ensure!(answer.status == 200, "status {}: {}", answer.status, answer.body);
        let body: Value = serde_json::from_str(&answer.body)?;
        let got: String = body["tls"]["peerCertificates"][0].as_str().unwrap_or_default().split_whitespace().collect();
        anyhow::ensure!(got == want, "the backend got {:?}", body["tls"]);
        // And the policy's server name (upstream's `ExpectedRequest.SNI`).
        anyhow::ensure!(body["tls"]["serverName"] == SNI, "the backend saw {:?}", body["tls"]);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_invalid_tls_backend_configuration() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("gateway-invalid-tls-backend-configuration").await?;
    for (name, reason) in [
        ("gateway-client-certificate-nonexistent-secret", "InvalidClientCertificateRef"),
        ("gateway-client-certificate-unsupported-group", "InvalidClientCertificateRef"),
        ("gateway-client-certificate-unsupported-kind", "InvalidClientCertificateRef"),
        ("gateway-client-certificate-malformed-secret", "InvalidClientCertificateRef"),
        ("gateway-client-certificate-missing-reference-grant", "RefNotPermitted"),
    ] {
        let id = format!("Gateway/{NS}/{name}");
        c.expect_status(&id, xdst_tests::gateway_api::own_condition("ResolvedRefs", "False", reason)).await?;
        c.expect_status(&id, xdst_tests::gateway_api::own_condition("Accepted", "True", "Accepted")).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backendtlspolicy_grpcroute() -> anyhow::Result<()> {
    use xdst_tests::gateway_api::{GrpcCall, GrpcExpect};
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("backendtlspolicy-grpcroute").await?;
    for name in ["grpc-normative-test", "grpc-host-mismatch", "grpc-cert-mismatch"] {
        accepted(&c, name).await?;
    }
    let gateway = format!("{NS}/{GATEWAY}");
    // Over TLS (HTTP/2 by ALPN) to the gRPC backend, which speaks only TLS on that port.
    let call = |method, authority| GrpcCall { method, authority: Some(authority), ..Default::default() };
    let served = GrpcExpect { backend: Some("grpc-infra-backend-v1"), namespace: Some(NS), ..Default::default() };
    c.expect_grpc(&gateway, 80, &call("Echo", "abc.example.com"), &served).await?;
    // A server name the certificate lacks, and a CA that did not sign it: the call fails.
    let unavailable = GrpcExpect { code: Some(tonic::Code::Unavailable), ..Default::default() };
    c.expect_grpc(&gateway, 80, &call("EchoTwo", "abc.example.com"), &unavailable).await?;
    c.expect_grpc(&gateway, 80, &call("Echo", "cert-mismatch.example.com"), &unavailable).await
}

/// Must-show: a BackendTLSPolicy that conflicts with an older one is a condition on it alone:
/// `Conflicted`, the older policy keeps applying, the other policies keep their status, their
/// backends keep serving, and Envoy rejects nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_backendtlspolicy_is_a_condition_on_it_alone() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let c = Case::start("backendtlspolicy-san").await?;
    let names = ["san-dns", "san-uri", "multiple-sans"];
    for (name, path) in
        names.iter().zip(["/backendtlspolicy-san-dns", "/backendtlspolicy-san-uri", "/backendtlspolicy-multiple-sans"])
    {
        accepted_or_any(&c, name).await?;
        served(&c, path, SNI).await?;
    }
    let ids: Vec<String> = names.iter().map(|n| format!("BackendTLSPolicy/{NS}/{n}")).collect();
    let before = c.statuses(&ids).await?;
    // Newer, for the same Service port as san-dns, with a server name its certificate lacks.
    c.add(
        "conflicting.yaml",
        &xdst_tests::gateway_api::newer_object(
            "gateway.networking.k8s.io/v1",
            "BackendTLSPolicy",
            NS,
            "conflicting",
            "  targetRefs: [{group: \"\", kind: Service, name: backendtlspolicy-san-dns-test, sectionName: btls}]\n  \
             validation:\n    caCertificateRefs: [{group: \"\", kind: ConfigMap, name: tls-checks-ca-certificate}]\n    \
             hostname: nowhere.example.com\n",
        ),
    )?;
    policy(&c, "conflicting", "Accepted", "False", "Conflicted").await?;
    c.no_nack().await?;
    anyhow::ensure!(c.statuses(&ids).await? == before, "another policy's status changed");
    served(&c, "/backendtlspolicy-san-dns", SNI).await?;
    served(&c, "/backendtlspolicy-multiple-sans", SNI).await
}

/// `Accepted` True toward the Gateway (any reason).
async fn accepted_or_any(c: &Case, name: &str) -> anyhow::Result<()> {
    policy(c, name, "Accepted", "True", "").await
}

//! The upstream TCPRoute and UDPRoute conformance tests (kubernetes-sigs/gateway-api at
//! 4564255, `conformance/tests/tcproute-*.go` and `udproute-*.go`), through a real Envoy:
//! connections and datagrams to the Gateway reach the echo the upstream test expects, and
//! statuses say what the Go test asserts. The inputs are the upstream manifests in
//! `../shared/gateway-api-suite` (skipped, saying so, without them).

use anyhow::Context as _;

use crate::gateway_api::{backend_of, weighted_distribution};
use xdst_tests::gateway_api::{Case, ListenerWant, listeners, no_accepted_parent, no_routes, route_condition};
use xdst_tests::stream_echo::{dns_query, tcp_ask, udp_ask};

const NS: &str = "gateway-conformance-infra";
/// A listener's `Accepted: True` with the reason `Accepted`.
const ACCEPTED: &[(&str, &str, &str)] = &[("Accepted", "True", "Accepted")];
/// `Accepted` and `Programmed` True, for any reason.
const ANY_TRUE: &[(&str, &str, &str)] = &[("Accepted", "True", ""), ("Programmed", "True", "")];

fn gw(name: &str) -> String {
    format!("{NS}/{name}")
}

/// A route (`kind`) of the infra namespace is Accepted by Gateway `gateway`.
async fn accepted(c: &Case, kind: &str, route: &str, gateway: &'static str) -> anyhow::Result<()> {
    c.expect_status(&format!("{kind}/{NS}/{route}"), route_condition(gateway, "Accepted", "True", "Accepted")).await
}

/// A newer route (created a second after the case's objects, as the upstream test does)
/// attached to the same listener as an older one: both are Accepted, the listener counts two,
/// and every connection or datagram reaches the older one's backend.
///
/// Neither route carries a `creationTimestamp`, as a user writes them: xdst stamps when it
/// first saw each (issue 49, item 3; before, a route without one counted as oldest, and the
/// newer one took the traffic). The newer route comes through a file, then (after a restart,
/// which must keep both times) through the intent API.
async fn only_the_oldest_serves(kind: &str, proto: &str, port: u16, backend_port: u16) -> anyhow::Result<()> {
    let (case, gateway, listener) = match kind {
        "TCPRoute" => ("tcproute-multiple-routes-attachment", "tcp-multi-route-attach-gateway", "tcp"),
        _ => ("udproute-multiple-routes-attachment", "udp-multi-route-attach-gateway", "udp"),
    };
    let mut c = Case::start(case).await?;
    let older = format!("{proto}route-attach-older");
    let newer = format!("{proto}route-attach-newer");
    accepted(&c, kind, &older, gateway).await?;
    // Upstream creates the newer route 1 s later, so that its time (to the second) is newer:
    // here, once the clock is past the time xdst stamped on the older one.
    let stamped = c.document(&format!("{kind}/{NS}/{older}")).await?["metadata"]["creationTimestamp"].clone();
    let stamped = stamped.as_str().context("xdst stamps the older route's creationTimestamp")?;
    xdst_tests::gateway_api::past(stamped).await;
    let route = format!(
        "apiVersion: gateway.networking.k8s.io/v1alpha2
kind: {kind}
metadata: {{name: {newer}, namespace: {NS}}}
spec:
  parentRefs: [{{name: {gateway}, sectionName: {listener}}}]
  rules:
  - backendRefs: [{{name: {proto}-attach-backend-2, port: {backend_port}}}]
"
    );
    c.add("newer.yaml", &route)?;
    the_older_serves(&c, kind, proto, port, gateway).await.context("the newer route written to a file")?;
    c.restart().await?;
    the_older_serves(&c, kind, proto, port, gateway).await.context("after a restart")?;
    std::fs::remove_file(c.intent_dir().join("newer.yaml"))?;
    c.expect_status(&format!("Gateway/{}", gw(gateway)), listener_attached(kind, listener, 1)).await?;
    // Made again, through the API: a new route, so a new creation time.
    c.put(&format!("{kind}/{NS}/{newer}"), &route).await?;
    the_older_serves(&c, kind, proto, port, gateway).await.context("the newer route written through the intent API")
}

/// The listener `listener` of a case's Gateway has `attached` routes of `kind`.
fn listener_attached(kind: &str, listener: &str, attached: i64) -> impl Fn(&serde_json::Value) -> Result<(), String> {
    let (kind, listener) = (kind.to_owned(), listener.to_owned());
    move |doc| {
        let got = doc["status"]["listeners"]
            .as_array()
            .and_then(|ls| ls.iter().find(|l| l["name"] == listener.as_str()))
            .and_then(|l| l["attachedRoutes"].as_i64());
        match got {
            Some(n) if n == attached => Ok(()),
            other => Err(format!("listener {listener} has {other:?} attached {kind}s, want {attached}")),
        }
    }
}

/// Both routes are Accepted, the listener counts two, and 100 connections or datagrams in a
/// row reach the older route's backend.
async fn the_older_serves(c: &Case, kind: &str, proto: &str, port: u16, gateway: &'static str) -> anyhow::Result<()> {
    for route in [format!("{proto}route-attach-older"), format!("{proto}route-attach-newer")] {
        accepted(c, kind, &route, gateway).await?;
    }
    let want: &'static [ListenerWant] = if kind == "TCPRoute" {
        &[ListenerWant { name: "tcp", kinds: &["TCPRoute"], attached: 2, conditions: ACCEPTED }]
    } else {
        &[ListenerWant { name: "udp", kinds: &["UDPRoute"], attached: 2, conditions: ACCEPTED }]
    };
    c.expect_status(&format!("Gateway/{}", gw(gateway)), listeners(want)).await?;
    let addr = c.addr(&gw(gateway), port);
    let first = format!("{proto}-attach-backend-1");
    // The listener is served again after a restart before the first answer.
    c.listening(&gw(gateway), port).await?;
    for i in 0..100 {
        let pod = if kind == "TCPRoute" { tcp_ask(addr, None).await?.pod } else { udp_ask(addr).await?.pod };
        anyhow::ensure!(backend_of(&pod) == first, "answer {i} came from {pod}; only {first} may answer");
    }
    Ok(())
}

mod tcp {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tcproute_invalid_backendref_nonexistent() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tcproute-invalid-backendref-nonexistent").await?;
        let route = format!("TCPRoute/{NS}/tcp-route-invalid-backend-ref-nonexistent");
        c.expect_status(
            &route,
            route_condition("tcp-gateway-invalid-backend", "ResolvedRefs", "False", "BackendNotFound"),
        )
        .await?;
        // Its connections are closed, not sent anywhere.
        c.listening(&gw("tcp-gateway-invalid-backend"), 9300).await?;
        let addr = c.addr(&gw("tcp-gateway-invalid-backend"), 9300);
        c.eventually("a connection to the route with no backend is closed", || async {
            match tcp_ask(addr, None).await {
                Ok(a) => anyhow::bail!("answered by {}", a.pod),
                Err(_) => Ok(()),
            }
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tcproute_invalid_cross_namespace_backend_ref() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tcproute-invalid-cross-namespace-backend-ref").await?;
        let gateway = "tcp-invalid-cross-namespace-backend-ref-gateway";
        let route = format!("TCPRoute/{NS}/tcp-invalid-cross-namespace-backend-ref");
        c.expect_status(&route, route_condition(gateway, "Accepted", "True", "Accepted")).await?;
        c.expect_status(&route, route_condition(gateway, "ResolvedRefs", "False", "RefNotPermitted")).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tcproute_invalid_non_tcp_listener() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tcproute-invalid-non-tcp-listener").await?;
        let gateway = "tcp-mixed-protocol-gateway";
        c.expect_status(
            &format!("TCPRoute/{NS}/tcp-route"),
            route_condition(gateway, "Accepted", "False", "NotAllowedByListeners"),
        )
        .await?;
        c.expect_status(&format!("Gateway/{}", gw(gateway)), no_routes).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tcproute_multiple_routes_attachment() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        only_the_oldest_serves("TCPRoute", "tcp", 9310, 3000).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tcproute_parentref_attach_all() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tcproute-parentref-attach-all").await?;
        accepted(&c, "TCPRoute", "tcp-route-attach-all", "tcp-attach-all-gateway").await?;
        for port in [9310, 9311, 9312, 9313] {
            c.expect_tcp(&gw("tcp-attach-all-gateway"), port, None, "tcp-echo-attach-all", NS).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tcproute_parentref_port_and_section_name() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tcproute-parentref-port-and-section-name").await?;
        let gateway = "tcp-multi-listener-gateway";
        for (route, port, backend) in [
            ("tcp-route-by-port", 9300, "tcp-echo-one"),
            ("tcp-route-by-section", 9301, "tcp-echo-two"),
            ("tcp-route-by-section-and-port", 9302, "tcp-echo-three"),
        ] {
            accepted(&c, "TCPRoute", route, gateway).await?;
            c.expect_tcp(&gw(gateway), port, None, backend, NS).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tcproute_reference_grant() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tcproute-reference-grant").await?;
        let gateway = "tcp-reference-grant-gateway";
        accepted(&c, "TCPRoute", "tcp-reference-grant", gateway).await?;
        let web = "gateway-conformance-web-backend";
        c.expect_tcp(&gw(gateway), 9320, None, "tcp-reference-grant-backend", web).await?;
        c.remove(&format!("ReferenceGrant/{web}/tcp-reference-grant"))?;
        let route = format!("TCPRoute/{NS}/tcp-reference-grant");
        c.expect_status(&route, route_condition(gateway, "ResolvedRefs", "False", "RefNotPermitted")).await?;
        // And the backend is no longer reached.
        let addr = c.addr(&gw(gateway), 9320);
        c.eventually("the backend is no longer reached", || async {
            match tcp_ask(addr, None).await {
                Ok(a) => anyhow::bail!("answered by {}", a.pod),
                Err(_) => Ok(()),
            }
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tcproute_weighted_routing() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tcproute-weighted-routing").await?;
        let gateway = "tcp-weighted-gateway";
        accepted(&c, "TCPRoute", "tcp-weighted-route", gateway).await?;
        let addr = c.addr(&gw(gateway), 9300);
        c.eventually("a TCP echo answers", || async { tcp_ask(addr, None).await.map(|_| ()) }).await?;
        let sample = async || Ok(backend_of(&tcp_ask(addr, None).await?.pod));
        weighted_distribution(sample, &[("tcp-backend-v1", 0.7), ("tcp-backend-v2", 0.3), ("tcp-backend-v3", 0.0)])
            .await
    }
}

mod udp {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_invalid_backendref_nonexistent() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-invalid-backendref-nonexistent").await?;
        c.expect_status(
            &format!("UDPRoute/{NS}/udp-route-invalid-backend-ref-nonexistent"),
            route_condition("udp-gateway-invalid-backend", "ResolvedRefs", "False", "BackendNotFound"),
        )
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_invalid_cross_namespace_backend_ref() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-invalid-cross-namespace-backend-ref").await?;
        let gateway = "udp-gateway-invalid-cross-namespace-backend-ref";
        let route = format!("UDPRoute/{NS}/udp-route-invalid-cross-namespace-backend-ref");
        c.expect_status(&route, route_condition(gateway, "ResolvedRefs", "False", "RefNotPermitted")).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_multiple_routes_attachment() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        only_the_oldest_serves("UDPRoute", "udp", 5301, 8080).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_not_allowed_by_listeners() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-not-allowed-by-listeners").await?;
        let gateway = "udproute-tls-only-gateway";
        let route = format!("UDPRoute/{NS}/udproute-not-allowed-by-listeners");
        c.expect_status(&route, route_condition(gateway, "Accepted", "False", "NotAllowedByListeners")).await?;
        c.expect_status(&format!("Gateway/{}", gw(gateway)), no_routes).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_parentref_attach_all_listeners() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-parentref-attach-all-listeners").await?;
        let gateway = "udp-attach-all-listeners-gateway";
        accepted(&c, "UDPRoute", "udp-route-attach-all", gateway).await?;
        c.expect_status(
            &format!("Gateway/{}", gw(gateway)),
            listeners(&[
                ListenerWant { name: "udp-1", kinds: &["UDPRoute"], attached: 1, conditions: ANY_TRUE },
                ListenerWant { name: "udp-2", kinds: &["UDPRoute"], attached: 1, conditions: ANY_TRUE },
                ListenerWant { name: "udp-3", kinds: &["UDPRoute"], attached: 1, conditions: ANY_TRUE },
            ]),
        )
        .await?;
        for port in [5310, 5311, 5312] {
            c.expect_udp(&gw(gateway), port, "udp-echo-attach-all", NS).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_parentref_port_and_section_name() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-parentref-port-and-section-name").await?;
        let gateway = "udp-multi-listener-gateway";
        for (route, port, backend) in [
            ("udp-route-by-port", 5300, "udp-echo-by-port"),
            ("udp-route-by-section", 5301, "udp-echo-by-section"),
            ("udp-route-by-section-and-port", 5302, "udp-echo-by-section-and-port"),
        ] {
            accepted(&c, "UDPRoute", route, gateway).await?;
            c.expect_udp(&gw(gateway), port, backend, NS).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_reference_grant() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-reference-grant").await?;
        let gateway = "udp-gateway-reference-grant";
        let route = format!("UDPRoute/{NS}/udp-route-reference-grant");
        accepted(&c, "UDPRoute", "udp-route-reference-grant", gateway).await?;
        c.expect_status(&route, route_condition(gateway, "ResolvedRefs", "True", "ResolvedRefs")).await?;
        let app = "gateway-conformance-app-backend";
        c.expect_udp(&gw(gateway), 5300, "udp-echo-reference-grant", app).await?;
        c.remove(&format!("ReferenceGrant/{app}/udp-reference-grant"))?;
        c.expect_status(&route, route_condition(gateway, "ResolvedRefs", "False", "RefNotPermitted")).await?;
        let addr = c.addr(&gw(gateway), 5300);
        c.eventually("the backend is no longer reached", || async {
            match udp_ask(addr).await {
                Ok(a) => anyhow::bail!("answered by {}", a.pod),
                Err(_) => Ok(()),
            }
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_simple() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-simple").await?;
        accepted(&c, "UDPRoute", "udp-coredns", "udp-gateway").await?;
        let addr = c.addr(&gw("udp-gateway"), 5300);
        c.eventually("a DNS answer for foo.bar.com. through the Gateway", || async {
            let answers = dns_query(addr, "foo.bar.com.").await?;
            anyhow::ensure!(!answers.is_empty(), "no A record");
            Ok(())
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn udproute_weighted_routing() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-weighted-routing").await?;
        let gateway = "udp-weighted-gateway";
        accepted(&c, "UDPRoute", "udp-weighted-route", gateway).await?;
        let addr = c.addr(&gw(gateway), 5300);
        c.eventually("a UDP echo answers", || async { udp_ask(addr).await.map(|_| ()) }).await?;
        let sample = async || Ok(udp_ask(addr).await?.service);
        weighted_distribution(sample, &[("udp-backend-v1", 0.7), ("udp-backend-v2", 0.3), ("udp-backend-v3", 0.0)])
            .await
    }
}

mod tls {
    use super::*;
    use xdst_tests::gateway_api::{Expect, Request};

    /// A client trusting the suite's CA C (`tls-checks-ca-certificate`), which signs the
    /// TLSRoute cases' certificates, the backends' and the Gateway's.
    fn trusting_ca_c(c: &mut Case) -> anyhow::Result<tokio_rustls::TlsConnector> {
        let ca = c.suite.ca_of("tls-checks-ca-certificate")?;
        c.ca = Some(ca.clone());
        xdst_tests::pki::client_config(&ca, None)
    }

    /// A TLS connection for `server_name` is closed or reset during its handshake (upstream's
    /// `MakeTLSConnectionAndExpectEventuallyConnectionRejection`, which counts EOF and
    /// ECONNRESET only). A handshake that completes, or fails any other way (a refused
    /// connection, a certificate the client does not take: a backend answered), is not one.
    pub(crate) async fn rejected(
        c: &Case,
        gateway: &str,
        port: u16,
        tls: &tokio_rustls::TlsConnector,
        name: &str,
    ) -> anyhow::Result<()> {
        use xdst_tests::stream_echo::{TlsAttempt, tls_attempt};
        c.listening(gateway, port).await?;
        let addr = c.addr(gateway, port);
        c.eventually(&format!("a TLS connection for {name} is rejected"), || async {
            match tls_attempt(addr, tls, name).await {
                TlsAttempt::Rejected(_) => Ok(()),
                TlsAttempt::Connected => anyhow::bail!("the TLS handshake completed: something answered"),
                TlsAttempt::Other(e) => anyhow::bail!("not closed or reset: {e}"),
            }
        })
        .await
    }

    /// An HTTPS request through a passthrough listener, answered by `pod`'s echo with the
    /// host that was sent.
    async fn https_reaches(c: &Case, gateway: &str, host: &'static str, pod: &'static str) -> anyhow::Result<()> {
        let req = Request { path: "/", host: Some(host), sni: Some(host), ..Default::default() };
        let want = Expect { status: 200, backend: Some(pod), namespace: Some(NS), ..Default::default() };
        c.expect(gateway, 443, &req, &want).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_simple_same_namespace() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let mut c = Case::start("tlsroute-simple-same-namespace").await?;
        let tls = trusting_ca_c(&mut c)?;
        accepted(&c, "TLSRoute", "gateway-conformance-infra-test", "gateway-tlsroute").await?;
        // Passthrough: the backend itself ends TLS, and sees the server name asked for.
        let a = c.expect_tcp(&gw("gateway-tlsroute"), 443, Some((&tls, "abc.example.com")), "tcp-backend", NS).await?;
        anyhow::ensure!(a.is_tls && a.server_name.as_deref() == Some("abc.example.com"), "{a:?}");
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_terminate_simple_same_namespace() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let mut c = Case::start("tlsroute-terminate-simple-same-namespace").await?;
        let tls = trusting_ca_c(&mut c)?;
        let gateway = "gateway-tlsroute-terminate";
        accepted(&c, "TLSRoute", "tlsroute-terminated-test", gateway).await?;
        // Terminated at the Gateway: the backend gets plain TCP.
        let a = c.expect_tcp(&gw(gateway), 8443, Some((&tls, "tls.example.com")), "tcp-backend", NS).await?;
        anyhow::ensure!(!a.is_tls, "the backend saw TLS: {a:?}");
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_mixed_termination_same_namespace() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let mut c = Case::start("tlsroute-mixed-termination-same-namespace").await?;
        let tls = trusting_ca_c(&mut c)?;
        let gateway = "gateway-tlsroute-mixed-termination";
        for route in ["gateway-conformance-mixed-passthroughroute", "gateway-conformance-mixed-terminateroute"] {
            accepted(&c, "TLSRoute", route, gateway).await?;
        }
        c.expect_status(
            &format!("Gateway/{}", gw(gateway)),
            listeners(&[
                ListenerWant { name: "tls-terminate", kinds: &["TLSRoute"], attached: 1, conditions: ACCEPTED },
                ListenerWant { name: "tls-passthrough", kinds: &["TLSRoute"], attached: 1, conditions: ACCEPTED },
            ]),
        )
        .await?;
        let terminated = c.expect_tcp(&gw(gateway), 8883, Some((&tls, "tls.example.com")), "tcp-backend", NS).await?;
        anyhow::ensure!(!terminated.is_tls, "{terminated:?}");
        let passed = c.expect_tcp(&gw(gateway), 8883, Some((&tls, "abc.example.com")), "tcp-backend", NS).await?;
        anyhow::ensure!(passed.is_tls && passed.server_name.as_deref() == Some("abc.example.com"), "{passed:?}");
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_hostname_intersection() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let mut c = Case::start("tlsroute-hostname-intersection").await?;
        let tls = trusting_ca_c(&mut c)?;
        let table: [(&str, &[&str], &str); 4] = [
            ("gw-tlsroute-exact-hostname-x-1", &["tlsroute-more-specific-wc-hostname-x-1"], "non.matching.com"),
            (
                "gw-tlsroute-more-specific-wc-hostname-x-2",
                &["tlsroute-exact-hostname-x-2", "tlsroute-less-specific-wc-hostname-x-2"],
                "non.matching.com",
            ),
            (
                "gw-tlsroute-less-specific-wc-hostname-x-3",
                &["tlsroute-exact-hostname-x-3", "tlsroute-more-specific-wc-hostname-x-3"],
                "non.matching.com",
            ),
            (
                "gw-tlsroute-empty-hostname-x-4",
                &["tlsroute-exact-hostname-x-4", "tlsroute-less-specific-wc-hostname-x-4"],
                "non.matching.org",
            ),
        ];
        for (gateway, routes, unmatched) in table {
            for route in routes {
                let id = format!("TLSRoute/{NS}/{route}");
                let gateway: &'static str = Box::leak(gateway.to_owned().into_boxed_str());
                c.expect_status(&id, route_condition(gateway, "Accepted", "True", "Accepted")).await?;
                c.expect_status(&id, route_condition(gateway, "ResolvedRefs", "True", "ResolvedRefs")).await?;
            }
            let g = gw(gateway);
            https_reaches(&c, &g, "abc.example.com", "tls-backend-0").await?;
            if routes.len() == 2 {
                https_reaches(&c, &g, "other.example.com", "tls-backend-2-0").await?;
            }
            rejected(&c, &g, 443, &tls, unmatched).await?;
        }
        Ok(())
    }

    /// Upstream's two `*-not-supported` TLSRoute tests return at once for an implementation
    /// that supports the mode, as xdst does, and upstream's suite records them as passed. Here
    /// the listeners they would find not accepted elsewhere are accepted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_listener_modes_other_implementations_lack_are_accepted() -> anyhow::Result<()> {
        use xdst_tests::gateway_api::listener_conditions;
        xdst_tests::skip_without_upstream_cases!();
        let accepted: &[(&str, &str, &str)] = &[("Accepted", "True", "")];
        let cases: [(&str, &str, &[&str]); 2] = [
            ("tlsroute-listener-terminate-not-supported", "gateway-tlsroute-terminate-unsupported", &["tls-terminate"]),
            (
                "tlsroute-listener-mixed-termination-not-supported",
                "gateway-tlsroute-mixed-termination-not-supported",
                &["tls-terminate", "tls-passthrough"],
            ),
        ];
        for (case, gateway, names) in cases {
            let c = Case::start(case).await?;
            c.expect_status(&format!("Gateway/{}", gw(gateway)), listener_conditions(names, accepted)).await?;
        }
        Ok(())
    }

    /// What a gateway broken on purpose does with a connection `rejected` must see closed:
    /// `rejected` fails, and the attempt ends in an error that is not a close or a reset (the
    /// harness used to count any error as a refusal, and so passed such a gateway).
    async fn not_rejected(
        c: &Case,
        gateway: &str,
        tls: &tokio_rustls::TlsConnector,
        name: &str,
    ) -> anyhow::Result<xdst_tests::stream_echo::TlsAttempt> {
        use xdst_tests::stream_echo::{TlsAttempt, tls_attempt};
        let err =
            rejected(c, gateway, 443, tls, name).await.expect_err("a connection wrongly passed on counted as refused");
        anyhow::ensure!(format!("{err:#}").contains("not closed or reset"), "failed for another reason: {err:#}");
        let attempt = tls_attempt(c.addr(gateway, 443), tls, name).await;
        anyhow::ensure!(matches!(attempt, TlsAttempt::Other(_)), "{attempt:?}");
        Ok(attempt)
    }

    /// Issue 52, the check shown failing on purpose: a gateway that passes a connection whose
    /// server name matches no route to the first route's backend (the `breaker` test plugin's
    /// `catch-all`). The handshake reaches the backend and fails on its certificate, which is
    /// not named for the server name asked: an error, but no refusal.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_hostname_intersection_fails_on_a_gateway_that_passes_any_name() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let breakage = serde_json::json!({"break": "catch-all"});
        let mut c = Case::start_broken("tlsroute-hostname-intersection", breakage).await?;
        let tls = trusting_ca_c(&mut c)?;
        let g = gw("gw-tlsroute-exact-hostname-x-1");
        https_reaches(&c, &g, "abc.example.com", "tls-backend-0").await?;
        let attempt = not_rejected(&c, &g, &tls, "non.matching.com").await?;
        anyhow::ensure!(format!("{attempt:?}").contains("certificate"), "{attempt:?}");
        Ok(())
    }

    /// Issue 52, the check shown failing on purpose: a gateway that sends a route whose backend
    /// does not resolve to some other backend (the `breaker` test plugin's `unresolved-to`, here
    /// a plain TCP echo), for both TLSRoute cases of an unresolved backend.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_invalid_backendrefs_fail_on_a_gateway_that_sends_them_elsewhere() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let elsewhere = xdst_tests::stream_echo::TcpEcho::start("elsewhere", "elsewhere-0", None).await?;
        for (case, gateway) in [
            ("tlsroute-invalid-backendref-nonexistent", "gateway-tlsroute-invalid-backend-ref-nonexistent"),
            ("tlsroute-invalid-backendref-unknown-kind", "gateway-tlsroute-invalid-backend-ref-unknown-kind"),
        ] {
            let breakage = serde_json::json!({"break": "unresolved-to", "address": elsewhere.addr.to_string()});
            let mut c = Case::start_broken(case, breakage).await?;
            let tls = trusting_ca_c(&mut c)?;
            let attempt = not_rejected(&c, &gw(gateway), &tls, "example.com").await.context(case)?;
            // The TCP echo's welcome line, read as TLS.
            anyhow::ensure!(format!("{attempt:?}").contains("InvalidData"), "{case}: {attempt:?}");
        }
        Ok(())
    }

    /// A route whose only backend does not resolve: a condition with the upstream reason, and
    /// its connections are rejected.
    async fn unresolved(case: &str, gateway: &'static str, route: &str, reason: &'static str) -> anyhow::Result<()> {
        let mut c = Case::start(case).await?;
        let tls = trusting_ca_c(&mut c)?;
        let id = format!("TLSRoute/{NS}/{route}");
        c.expect_status(&id, route_condition(gateway, "Accepted", "True", "Accepted")).await?;
        c.expect_status(&id, route_condition(gateway, "ResolvedRefs", "False", reason)).await?;
        rejected(&c, &gw(gateway), 443, &tls, "example.com").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_invalid_backendref_nonexistent() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        unresolved(
            "tlsroute-invalid-backendref-nonexistent",
            "gateway-tlsroute-invalid-backend-ref-nonexistent",
            "invalid-backend-ref-nonexistent",
            "BackendNotFound",
        )
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_invalid_backendref_unknown_kind() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        unresolved(
            "tlsroute-invalid-backendref-unknown-kind",
            "gateway-tlsroute-invalid-backend-ref-unknown-kind",
            "invalid-backend-ref-unknown-kind",
            "InvalidKind",
        )
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_invalid_reference_grant() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tlsroute-invalid-reference-grant").await?;
        let gateway = "gateway-tlsroute-referencegrant";
        let id = format!("TLSRoute/{NS}/gateway-conformance-infra-test");
        c.expect_status(&id, route_condition(gateway, "Accepted", "True", "Accepted")).await?;
        c.expect_status(&id, route_condition(gateway, "ResolvedRefs", "False", "RefNotPermitted")).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_invalid_no_matching_listener() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tlsroute-invalid-no-matching-listener").await?;
        for (route, gateway, reason) in [
            ("tlsroute-not-allowed-protocol-http", "gateway-tlsroute-http-only", "NotAllowedByListeners"),
            ("tlsroute-not-allowed-protocol-https", "gateway-tlsroute-https-only", "NotAllowedByListeners"),
            ("tlsroute-no-matching-section-name", "gateway-tlsroute-tls-passthrough-only", "NoMatchingParent"),
        ] {
            let id = format!("TLSRoute/{NS}/{route}");
            c.expect_status(&id, route_condition(gateway, "Accepted", "False", reason)).await?;
            c.expect_status(&id, no_accepted_parent).await?;
        }
        for gateway in ["gateway-tlsroute-http-only", "gateway-tlsroute-https-only"] {
            c.expect_status(&format!("Gateway/{}", gw(gateway)), no_routes).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_invalid_no_matching_listener_hostname() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tlsroute-invalid-no-matching-listener-hostname").await?;
        for (route, gateway) in [
            ("tlsroute-hostname-mismatch-1", "gateway-tls-exact-hostname"),
            ("tlsroute-hostname-mismatch-2", "gateway-tls-wildcard-hostname"),
        ] {
            let id = format!("TLSRoute/{NS}/{route}");
            c.expect_status(&id, route_condition(gateway, "Accepted", "False", "NoMatchingListenerHostname")).await?;
            c.expect_status(&id, no_accepted_parent).await?;
            c.expect_status(&format!("Gateway/{}", gw(gateway)), no_routes).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_listener_passthrough_supported_kinds() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tlsroute-listener-passthrough-supported-kinds").await?;
        c.expect_status(&format!("Gateway/{}", gw("gateway-tlsroute-passthrough-supported-kind")), |doc| {
            let l = &doc["status"]["listeners"][0];
            let kinds: Vec<&str> =
                l["supportedKinds"].as_array().into_iter().flatten().filter_map(|k| k["kind"].as_str()).collect();
            let resolved = l["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "ResolvedRefs");
            match resolved {
                Some(r) if kinds == ["TLSRoute"] && r["status"] == "False" && r["reason"] == "InvalidRouteKinds" => {
                    Ok(())
                }
                _ => Err("want supportedKinds [TLSRoute] and ResolvedRefs False (InvalidRouteKinds)".into()),
            }
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tlsroute_listener_terminate_supported_kinds() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tlsroute-listener-terminate-supported-kinds").await?;
        c.expect_status(
            &format!("Gateway/{}", gw("gateway-tlsroute-terminate-supported")),
            listeners(&[ListenerWant {
                name: "tls-terminate",
                kinds: &["TLSRoute"],
                attached: 0,
                conditions: ACCEPTED,
            }]),
        )
        .await
    }
}

/// Must-show: a bad object of each new kind is a condition on that object only. After it is
/// added, its status says what is wrong, every other route's status is what it was, their
/// traffic still reaches their backends, and Envoy, holding xdst's target for it, rejected
/// no update.
mod bad_objects {
    use super::*;

    fn newer(kind: &str, name: &str, spec: &str) -> String {
        xdst_tests::gateway_api::newer_object("gateway.networking.k8s.io/v1alpha2", kind, NS, name, spec)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tcproute_to_a_missing_backend() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("tcproute-parentref-port-and-section-name").await?;
        let gateway = "tcp-multi-listener-gateway";
        let served = [(9300, "tcp-echo-one"), (9301, "tcp-echo-two"), (9302, "tcp-echo-three")];
        for (port, backend) in served {
            c.expect_tcp(&gw(gateway), port, None, backend, NS).await?;
        }
        let others: Vec<String> = ["tcp-route-by-port", "tcp-route-by-section", "tcp-route-by-section-and-port"]
            .iter()
            .map(|r| format!("TCPRoute/{NS}/{r}"))
            .collect();
        let before = c.statuses(&others).await?;
        c.add(
            "bad.yaml",
            &newer(
                "TCPRoute",
                "bad",
                &format!("  parentRefs: [{{name: {gateway}, sectionName: one}}]\n  rules: [{{backendRefs: [{{name: nowhere, port: 3000}}]}}]\n"),
            ),
        )?;
        c.expect_status(
            &format!("TCPRoute/{NS}/bad"),
            route_condition(gateway, "ResolvedRefs", "False", "BackendNotFound"),
        )
        .await?;
        c.no_nack().await?;
        anyhow::ensure!(c.statuses(&others).await? == before, "another route's status changed");
        for (port, backend) in served {
            c.expect_tcp(&gw(gateway), port, None, backend, NS).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_udproute_to_a_missing_backend() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let c = Case::start("udproute-parentref-port-and-section-name").await?;
        let gateway = "udp-multi-listener-gateway";
        let served =
            [(5300, "udp-echo-by-port"), (5301, "udp-echo-by-section"), (5302, "udp-echo-by-section-and-port")];
        for (port, backend) in served {
            c.expect_udp(&gw(gateway), port, backend, NS).await?;
        }
        let others: Vec<String> = ["udp-route-by-port", "udp-route-by-section", "udp-route-by-section-and-port"]
            .iter()
            .map(|r| format!("UDPRoute/{NS}/{r}"))
            .collect();
        let before = c.statuses(&others).await?;
        c.add(
            "bad.yaml",
            &newer(
                "UDPRoute",
                "bad",
                &format!("  parentRefs: [{{name: {gateway}, sectionName: by-section}}]\n  rules: [{{backendRefs: [{{name: nowhere, port: 8080}}]}}]\n"),
            ),
        )?;
        c.expect_status(
            &format!("UDPRoute/{NS}/bad"),
            route_condition(gateway, "ResolvedRefs", "False", "BackendNotFound"),
        )
        .await?;
        c.no_nack().await?;
        anyhow::ensure!(c.statuses(&others).await? == before, "another route's status changed");
        for (port, backend) in served {
            c.expect_udp(&gw(gateway), port, backend, NS).await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tlsroute_whose_hostname_intersects_nothing() -> anyhow::Result<()> {
        xdst_tests::skip_without_upstream_cases!();
        let mut c = Case::start("tlsroute-mixed-termination-same-namespace").await?;
        let ca = c.suite.ca_of("tls-checks-ca-certificate")?;
        let tls = xdst_tests::pki::client_config(&ca, None)?;
        let gateway = "gateway-tlsroute-mixed-termination";
        let probe = async |c: &Case| -> anyhow::Result<()> {
            let t = c.expect_tcp(&gw(gateway), 8883, Some((&tls, "tls.example.com")), "tcp-backend", NS).await?;
            let p = c.expect_tcp(&gw(gateway), 8883, Some((&tls, "abc.example.com")), "tcp-backend", NS).await?;
            anyhow::ensure!(!t.is_tls && p.is_tls, "terminated {t:?}, passed through {p:?}");
            Ok(())
        };
        probe(&c).await?;
        let others: Vec<String> =
            ["gateway-conformance-mixed-passthroughroute", "gateway-conformance-mixed-terminateroute"]
                .iter()
                .map(|r| format!("TLSRoute/{NS}/{r}"))
                .collect();
        let before = c.statuses(&others).await?;
        c.add(
            "bad.yaml",
            &newer(
                "TLSRoute",
                "bad",
                &format!("  parentRefs: [{{name: {gateway}}}]\n  hostnames: [nothing.example.org]\n  rules: [{{backendRefs: [{{name: tcp-backend, port: 8443}}]}}]\n"),
            ),
        )?;
        c.expect_status(
            &format!("TLSRoute/{NS}/bad"),
            route_condition(gateway, "Accepted", "False", "NoMatchingListenerHostname"),
        )
        .await?;
        c.no_nack().await?;
        anyhow::ensure!(c.statuses(&others).await? == before, "another route's status changed");
        probe(&c).await
    }
}

//! REST fetch: `POST /v3/discovery:{listeners,routes,clusters,endpoints}` with a proto3
//! JSON `DiscoveryRequest` body, answered with a proto3 JSON `DiscoveryResponse`
//! (or 304 Not Modified when the request's `version_info` is already current).
//!
//! On a port listening on loopback, an HTTP/1 request must name a loopback host, as on the
//! admin port ([`crate::access::refuse_foreign_host`]): a web page that rebinds its name to
//! 127.0.0.1 would otherwise read every node group's resources (issue 49, item 7); it is
//! answered 421 and counted in `xdst_refusals_total{reason="xds_host"}`. HTTP/2 is left
//! alone: browsers speak it over TLS only, where a rebound name fails the certificate, and
//! Envoy's `:authority` is the name of its xDS cluster. Envoy's own REST client sends that name
//! as `Host` too: over HTTP/1 to a loopback xdst, name the cluster under `.localhost`
//! (`xds.localhost`).

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use prost::Message;
use prost_reflect::{DynamicMessage, SerializeOptions};
use std::sync::Arc;
use xdst_core::descriptors;
use xdst_core::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

use crate::Serving;
use crate::identity::PeerIdentity;
use crate::xds::fetch;

/// The REST routes of the xDS port listening on `listening`.
pub fn routes(serving: &Arc<Serving>, listening: std::net::SocketAddr) -> Router {
    let mut r = Router::new();
    for (path, type_url) in [("listeners", LISTENER), ("routes", ROUTE), ("clusters", CLUSTER), ("endpoints", ENDPOINT)]
    {
        let serving = serving.clone();
        r = r.route(
            &format!("/v3/discovery:{path}"),
            post(move |identity: Option<axum::Extension<PeerIdentity>>, body: Bytes| async move {
                handle(&serving, type_url, identity.as_ref().map(|i| &i.0), &body)
            }),
        );
    }
    // A body over the limit is answered 413 before it is read whole.
    let serving = serving.clone();
    r.layer(axum::extract::DefaultBodyLimit::max(serving.max_request_size)).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let serving = serving.clone();
            async move {
                if req.version() <= http::Version::HTTP_11
                    && let Some(refused) =
                        crate::access::refuse_foreign_host(&serving, "xDS", listening, "xds_host", &req)
                {
                    return refused;
                }
                next.run(req).await
            }
        },
    ))
}

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

/// A REST request body (proto3 JSON of a `DiscoveryRequest`) to the request; what it cannot
/// be is a message for a `400`.
fn decode_request(body: &[u8]) -> Result<DiscoveryRequest, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("request body is not JSON: {e}"))?;
    let desc =
        descriptors::pool().get_message_by_name("envoy.service.discovery.v3.DiscoveryRequest").expect("in the pool");
    let msg = xdst_core::decode::decode_message(desc, value).map_err(|(field, e)| match field {
        Some(f) => format!("DiscoveryRequest field {f}: {e}"),
        None => format!("DiscoveryRequest: {e}"),
    })?;
    // prost refuses what nests past its recursion limit (a deep `node.metadata`): a bad
    // request, like any other.
    DiscoveryRequest::decode(msg.encode_to_vec().as_slice()).map_err(|e| format!("DiscoveryRequest: {e}"))
}

fn handle(serving: &Arc<Serving>, type_url: &'static str, identity: Option<&PeerIdentity>, body: &[u8]) -> Response {
    let req = match decode_request(body) {
        Ok(r) => r,
        Err(message) => return bad_request(message),
    };
    let client_version = req.version_info.clone();
    let resp = match fetch(serving, type_url, identity, req) {
        Ok(r) => r,
        Err(status) if status.code() == tonic::Code::PermissionDenied => {
            return (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({ "error": status.message() })))
                .into_response();
        }
        Err(status) => return bad_request(status.message().to_owned()),
    };
    if !client_version.is_empty() && client_version == *resp.version {
        return StatusCode::NOT_MODIFIED.into_response();
    }
    let mut bytes = Vec::with_capacity(xdst_core::wire::sotw_len(&resp));
    xdst_core::wire::encode_sotw(&resp, &mut bytes);
    let desc =
        descriptors::pool().get_message_by_name("envoy.service.discovery.v3.DiscoveryResponse").expect("in the pool");
    let msg = match DynamicMessage::decode(desc, bytes.as_slice()) {
        Ok(m) => m,
        Err(e) => {
            return (StatusCode::INTERNAL_SERVER_ERROR, format!("decoding the response for JSON: {e}")).into_response();
        }
    };
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut out);
    if let Err(e) = msg.serialize_with_options(&mut ser, &SerializeOptions::new().use_proto_field_name(true)) {
        return (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding the response as JSON: {e}")).into_response();
    }
    ([(axum::http::header::CONTENT_TYPE, "application/json")], out).into_response()
}

/// Fuzz target (see `docs/FUZZING.md`): REST request bodies, from the committed corpus and at
/// random, decode to a request or an error, never a panic.
#[cfg(test)]
mod fuzz {
    use super::decode_request;
    use proptest::prelude::*;

    /// JSON nested `depth` levels inside `node.metadata`, with `leaf` at the bottom.
    fn deep_metadata(depth: usize, leaf: String) -> Vec<u8> {
        format!(
            r#"{{"node": {{"id": "n", "metadata": {}{leaf}{}}}, "resource_names": []}}"#,
            r#"{"a": "#.repeat(depth),
            "}".repeat(depth)
        )
        .into_bytes()
    }

    proptest! {
        #[test]
        fn rest_request_bodies_never_panic(
            body in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..200),
                "[ -~]{0,200}".prop_map(String::into_bytes),
                (1usize..300, prop_oneof![Just("1".to_owned()), Just("[]".to_owned()), "\"[ -~]{0,10}\""])
                    .prop_map(|(d, leaf)| deep_metadata(d, leaf)),
            ]
        ) {
            let _ = decode_request(&body);
        }
    }

    #[test]
    fn rest_corpus() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rest");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let _ = decode_request(&std::fs::read(&path).unwrap());
            n += 1;
        }
        assert!(n > 0, "{}: an empty corpus", dir.display());
        // The depths that once panicked the handler (34 to 57) are refused or accepted cleanly.
        for depth in 1..=200 {
            let _ = decode_request(&deep_metadata(depth, "1".into()));
        }
    }
}

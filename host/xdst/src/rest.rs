//! REST fetch: `POST /v3/discovery:{listeners,routes,clusters,endpoints}` with a proto3
//! JSON `DiscoveryRequest` body, answered with a proto3 JSON `DiscoveryResponse`
//! (or 304 Not Modified when the request's `version_info` is already current).

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use prost::Message;
use prost_reflect::{DynamicMessage, SerializeOptions};
use xdst_core::descriptors;
use xdst_core::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

use crate::context::Ctx;
use crate::xds::fetch;

pub fn routes(ctx: &Ctx) -> Router {
    let mut r = Router::new();
    for (path, type_url) in [("listeners", LISTENER), ("routes", ROUTE), ("clusters", CLUSTER), ("endpoints", ENDPOINT)]
    {
        let ctx = ctx.clone();
        r = r.route(
            &format!("/v3/discovery:{path}"),
            post(move |body: Bytes| async move { handle(&ctx, type_url, &body) }),
        );
    }
    r
}

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

fn handle(ctx: &Ctx, type_url: &'static str, body: &[u8]) -> Response {
    let value: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad_request(format!("request body is not JSON: {e}")),
    };
    let desc =
        descriptors::pool().get_message_by_name("envoy.service.discovery.v3.DiscoveryRequest").expect("in the pool");
    let msg = match xdst_core::decode::decode_message(desc, value) {
        Ok(m) => m,
        Err((field, e)) => {
            return bad_request(match field {
                Some(f) => format!("DiscoveryRequest field {f}: {e}"),
                None => format!("DiscoveryRequest: {e}"),
            });
        }
    };
    // prost refuses what nests past its recursion limit (a deep `node.metadata`): a bad
    // request, like any other.
    let req = match DiscoveryRequest::decode(msg.encode_to_vec().as_slice()) {
        Ok(r) => r,
        Err(e) => return bad_request(format!("DiscoveryRequest: {e}")),
    };
    let client_version = req.version_info.clone();
    let resp = match fetch(ctx, type_url, req) {
        Ok(r) => r,
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

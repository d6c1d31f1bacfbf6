//! The intent API on the admin port, for teams that do not manage files:
//!
//! - `GET /intent`: every intent document, with where it comes from;
//! - `GET /intent/{kind}/{name}`, or `/intent/{kind}/{namespace}/{name}` for a namespaced
//!   document: one document, with the `status` its plugin computed in the last good
//!   generation (plugins of contract 0.2.0);
//! - `PUT` (body: the document, YAML or JSON) and `DELETE` of the same paths: need
//!   `Authorization: Bearer <token>`.
//!
//! **How API intent and file intent combine.** A document written through the API is stored
//! as a file, `<intent dir>/_api/<kind>/[<namespace>/]<name>.yaml`, beside the files people write. It is then
//! part of the same intent set: it is translated with the others, `xdst translate --intent`
//! sees it, and it survives restarts. A document id belongs to one side only. A `PUT` or
//! `DELETE` of a document defined in a file of its own is refused, naming that file. A file
//! that later defines a document the API already holds fails its generation as a duplicate,
//! naming both files.
//!
//! **Validated before accepted.** A write is applied, translated with the current plugins and
//! checked as every generation is. Only then is it published. A write that fails is undone
//! (the file is restored or removed), and the answer carries the error. What was serving
//! keeps serving. Writes are serialised.

use axum::Json;
use axum::Router;
use axum::extract::Path as UrlPath;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderMap, StatusCode};
use serde::Serialize;

use crate::context::Ctx;
use crate::intent::IntentSource;

/// The subdirectory of the intent directory that API documents live in.
pub const API_DIR: &str = "_api";

pub fn routes(ctx: &Ctx) -> Router {
    let c = ctx.clone();
    Router::new()
        .route("/intent", get(move || async move { list(&c) }))
        .route(
            "/intent/{kind}/{name}",
            one_document(ctx, |UrlPath((kind, name)): UrlPath<(String, String)>| (kind, name)),
        )
        .route(
            "/intent/{kind}/{namespace}/{name}",
            one_document(ctx, |UrlPath((kind, ns, name)): UrlPath<(String, String, String)>| {
                (kind, format!("{ns}/{name}"))
            }),
        )
}

/// `GET`, `PUT` and `DELETE` of one document, whose path `id` turns into its kind and
/// qualified name (`name`, or `namespace/name`).
fn one_document<P>(ctx: &Ctx, id: fn(P) -> (String, String)) -> axum::routing::MethodRouter
where
    P: axum::extract::FromRequestParts<()> + Send + 'static,
{
    let (c1, c2, c3) = (ctx.clone(), ctx.clone(), ctx.clone());
    get(move |path: P| async move {
        let (kind, name) = id(path);
        one(&c1, &kind, &name)
    })
    .put(move |path: P, headers: HeaderMap, body: String| async move {
        let (kind, name) = id(path);
        write(&c2, &headers, kind, name, Some(body)).await
    })
    .delete(move |path: P, headers: HeaderMap| async move {
        let (kind, name) = id(path);
        write(&c3, &headers, kind, name, None).await
    })
}

#[derive(Serialize)]
struct Listed {
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    name: String,
    /// `file#index`, relative to the intent directory; with a store, `key#index`.
    origin: String,
    /// `api`, `file` or `store`.
    source: &'static str,
    /// With a store: the document's revision (what `If-Match` takes).
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<crate::store::Revision>,
}

fn source_of(origin: &str) -> &'static str {
    if origin.starts_with(&format!("{API_DIR}/")) { "api" } else { "file" }
}

/// The store key an origin (`key#index`) names.
fn key_of(origin: &str) -> &str {
    origin.rsplit_once('#').map_or(origin, |(k, _)| k)
}

fn not_serving() -> Response {
    (StatusCode::NOT_FOUND, "not serving intent (start with --intent DIR --plugins DIR)\n").into_response()
}

fn list(ctx: &Ctx) -> Response {
    let Some(source) = &ctx.intent else { return not_serving() };
    match source.read_current() {
        Ok(set) => {
            let mirror = source.mirror();
            let docs: Vec<Listed> = set
                .documents()
                .map(|d| Listed {
                    kind: d.kind.clone(),
                    namespace: d.namespace.clone(),
                    name: d.name.clone(),
                    origin: d.origin.clone(),
                    source: if mirror.is_some() { "store" } else { source_of(&d.origin) },
                    revision: mirror.and_then(|m| m.mod_revision(key_of(&d.origin))),
                })
                .collect();
            Json(docs).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

fn one(ctx: &Ctx, kind: &str, name: &str) -> Response {
    let Some(source) = &ctx.intent else { return not_serving() };
    match source.read_current() {
        Ok(set) => match set.get(kind, name) {
            Some(d) => {
                // The document with the status its plugin computed in the last good generation.
                let mut doc = d.json.clone();
                if let Some(status) = source.status_of(d.id())
                    && let Ok(status) = serde_json::from_str::<serde_json::Value>(&status)
                {
                    doc["status"] = status;
                }
                match source.mirror().and_then(|m| m.mod_revision(key_of(&d.origin))) {
                    Some(rev) => ([(http::header::ETAG, format!("\"{rev}\""))], Json(doc)).into_response(),
                    None => Json(doc).into_response(),
                }
            }
            None => (StatusCode::NOT_FOUND, format!("no {kind}/{name}\n")).into_response(),
        },
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

#[derive(Serialize)]
struct Written {
    kind: String,
    /// `name`, or `namespace/name`.
    name: String,
    /// `ok`, or `refused` (nothing changed).
    result: &'static str,
    /// The file the document is stored in, relative to the intent directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    /// With a store: the store revision of the write.
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<crate::store::Revision>,
    /// The change that carries the write, for `GET /changes/{id}` and `xdst wait --change`:
    /// the generation that applied it, or with a store its revision (every replica's
    /// generation that translates that revision or a later one carries it).
    #[serde(skip_serializing_if = "Option::is_none")]
    change: Option<i64>,
    error: Option<String>,
}

/// Kinds, namespaces and names become path components: keep them to what cannot escape or hide.
fn valid_part(s: &str, what: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && !s.starts_with('.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!("{what} {s:?} must be 1-253 letters, digits, '-', '_' or '.', not starting with '.'"))
    }
}

async fn write(ctx: &Ctx, headers: &HeaderMap, kind: String, name: String, body: Option<String>) -> Response {
    if let Err((status, why)) = crate::admin::authorize(ctx, headers) {
        return (status, why).into_response();
    }
    let Some(source) = ctx.intent.clone() else { return not_serving() };
    let (namespace, plain) = match name.split_once('/') {
        Some((ns, n)) => (Some(ns), n),
        None => (None, name.as_str()),
    };
    let valid = valid_part(&kind, "kind")
        .and_then(|_| namespace.map_or(Ok(()), |ns| valid_part(ns, "namespace")))
        .and_then(|_| valid_part(plain, "name"));
    if let Err(e) = valid {
        return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response();
    }
    if let Err(e) = check_body(&kind, &name, body.as_deref()) {
        return (StatusCode::BAD_REQUEST, Json(Written::refused(&kind, &name, e))).into_response();
    }
    if let Some(store) = ctx.store.clone() {
        let o = crate::store::writes::write(ctx, store, source, headers, &kind, &name, body).await;
        let result = if o.status.is_success() { "ok" } else { "refused" };
        let change = o.revision.filter(|_| o.status.is_success());
        let written = Written { kind, name, result, file: None, revision: o.revision, change, error: o.error };
        return (o.status, Json(written)).into_response();
    }
    let Some(generations) = ctx.generations.get() else { return not_serving() };
    // On the generation thread: no other generation runs between the write and its outcome.
    let c = ctx.clone();
    match generations.run(move || apply(&c, &source, &kind, &name, body.as_deref())).await {
        Some((status, written)) => (status, Json(written)).into_response(),
        None => (StatusCode::INTERNAL_SERVER_ERROR, "internal error (see the log)\n").into_response(),
    }
}

/// Where the API keeps a document: `_api/<kind>/[<namespace>/]<name>.yaml`; when that file name
/// would pass the 255-byte limit of common file systems (names may have 253 characters), the
/// name's first 200 characters and a digest of the whole name.
fn api_file(kind: &str, qualified_name: &str) -> String {
    const MAX_FILE_NAME: usize = 255;
    let (dir, name) = match qualified_name.split_once('/') {
        Some((ns, name)) => (format!("{API_DIR}/{kind}/{ns}"), name),
        None => (format!("{API_DIR}/{kind}"), qualified_name),
    };
    if name.len() + ".yaml".len() <= MAX_FILE_NAME {
        return format!("{dir}/{name}.yaml");
    }
    // Names are ASCII (see `valid_part`), so any byte index is a character boundary.
    let digest = xdst_core::resource::content_version("xdst.api/name", name.as_bytes());
    format!("{dir}/{}-{digest}.yaml", &name[..200])
}

impl Written {
    fn refused(kind: &str, name: &str, error: String) -> Written {
        Written {
            kind: kind.to_owned(),
            name: name.to_owned(),
            result: "refused",
            file: None,
            revision: None,
            change: None,
            error: Some(xdst_plugin::clip(&error, crate::intent::MAX_ERROR_BYTES)),
        }
    }
}

/// A body must hold one document, of the kind and name the path says.
fn check_body(kind: &str, name: &str, body: Option<&str>) -> Result<(), String> {
    let Some(text) = body else { return Ok(()) };
    let docs = xdst_core::intent::parse_file(&format!("{kind}/{name}"), text).map_err(|e| e.to_string())?;
    match docs.as_slice() {
        [d] if d.kind == kind && d.qualified_name() == name => Ok(()),
        [d] => Err(format!("the body is {}, but the path says {kind}/{name}", d.id())),
        _ => Err(format!("the body holds {} documents; PUT one", docs.len())),
    }
}

/// Writes (or removes) the document, runs a generation, and undoes the write if it fails.
fn apply(ctx: &Ctx, source: &IntentSource, kind: &str, name: &str, body: Option<&str>) -> (StatusCode, Written) {
    let refused = |status: StatusCode, error: String| (status, Written::refused(kind, name, error));
    let Some(root) = source.intent_dir() else {
        return refused(StatusCode::INTERNAL_SERVER_ERROR, "intent does not come from a directory".into());
    };
    let rel = api_file(kind, name);
    let path = root.join(&rel);

    // The document must not belong to a file of its own.
    let current = match source.read_current() {
        Ok(set) => set,
        Err(e) => {
            return refused(
                StatusCode::CONFLICT,
                format!("the intent directory does not load as it is, so nothing was written: {e}"),
            );
        }
    };
    if let Some(d) = current.get(kind, name)
        && source_of(&d.origin) == "file"
    {
        return refused(StatusCode::CONFLICT, format!("{kind}/{name} is defined in {}: change it there", d.origin));
    }

    let previous = std::fs::read_to_string(&path).ok();
    match body {
        Some(text) => {
            // The body was checked (one document, of this kind and name) before this.
            if let Err(e) = xdst_core::files::write_atomic(&path, text) {
                return refused(StatusCode::INTERNAL_SERVER_ERROR, format!("writing {rel}: {e}"));
            }
        }
        None => {
            if previous.is_none() {
                return refused(StatusCode::NOT_FOUND, format!("no {kind}/{name} was written through the API"));
            }
            if let Err(e) = std::fs::remove_file(&path) {
                return refused(StatusCode::INTERNAL_SERVER_ERROR, format!("removing {rel}: {e}"));
            }
        }
    }
    match source.generate(ctx) {
        Ok(()) => {
            tracing::info!(kind, name, deleted = body.is_none(), "intent written through the API");
            let file = body.map(|_| rel);
            let (kind, name) = (kind.to_owned(), name.to_owned());
            let change = ctx.changes.latest();
            (StatusCode::OK, Written { kind, name, result: "ok", file, revision: None, change, error: None })
        }
        Err(e) => {
            // Undo: what was there before, or nothing.
            let undone = match &previous {
                Some(text) => xdst_core::files::write_atomic(&path, text),
                None => std::fs::remove_file(&path),
            };
            if let Err(u) = undone {
                tracing::error!(file = %path.display(), error = %u, "could not undo a refused intent write");
            }
            refused(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accepted_name_has_a_file_name_that_fits_and_is_its_own() {
        let short = api_file("Service", "web");
        assert_eq!(short, "_api/Service/web.yaml");
        assert_eq!(api_file("HTTPRoute", "infra/web"), "_api/HTTPRoute/infra/web.yaml");
        let at_limit = "n".repeat(250);
        assert_eq!(api_file("Service", &at_limit), format!("_api/Service/{at_limit}.yaml"));
        let a = format!("{}a", "n".repeat(252));
        let b = format!("{}b", "n".repeat(252));
        let (fa, fb) = (api_file("Service", &a), api_file("Service", &b));
        assert_ne!(fa, fb, "two long names share a file");
        for f in [fa, fb] {
            let file_name = f.rsplit('/').next().unwrap();
            assert!(file_name.len() <= 255, "{file_name} is {} bytes", file_name.len());
        }
    }
}

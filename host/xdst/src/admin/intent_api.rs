//! The intent API on the admin port, for teams that do not manage files:
//!
//! - `GET /intent`: every intent document, with where it comes from;
//! - `GET /intent/{kind}/{name}`, or `/intent/{kind}/{namespace}/{name}` for a namespaced
//!   document: one document, with the `status` its plugin computed in the last good
//!   generation (plugins of contract 0.2.0 and later);
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
//!
//! **Names are Kubernetes names.** A write's namespace must be a DNS-1123 label and its name a
//! DNS-1123 subdomain (lowercase letters, digits, `-`, and `.` between labels); anything else is
//! refused with `422`, naming the field. Namespace directories then hold no `.`, and every
//! document file ends in `.yaml`, so no two accepted ids share a path on disk.
//!
//! **A Secret's body is never shown.** A document of kind `Secret` is read (alone or listed)
//! with its metadata; each key of `data`, `stringData` (and of any other body field) shows
//! only `withheld` and a content hash, as `/debug/resources` shows SDS Secrets. So does the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation, which holds a copy.

use axum::Json;
use axum::Router;
use axum::extract::Path as UrlPath;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderMap, StatusCode};
use serde::Serialize;
use std::sync::Arc;

use crate::generate::Generating;
use crate::generate::intent::IntentSource;
use crate::generate::intent::input::key_of;

/// The subdirectory of the intent directory that API documents live in.
pub const API_DIR: &str = "_api";

pub fn routes(generating: &Arc<Generating>) -> Router {
    let c = generating.clone();
    Router::new()
        .route("/intent", get(move || async move { list(&c) }))
        .route(
            "/intent/{kind}/{name}",
            one_document(generating, |UrlPath((kind, name)): UrlPath<(String, String)>| (kind, name)),
        )
        .route(
            "/intent/{kind}/{namespace}/{name}",
            one_document(generating, |UrlPath((kind, ns, name)): UrlPath<(String, String, String)>| {
                (kind, format!("{ns}/{name}"))
            }),
        )
}

/// `GET`, `PUT` and `DELETE` of one document, whose path `id` turns into its kind and
/// qualified name (`name`, or `namespace/name`).
fn one_document<P>(generating: &Arc<Generating>, id: fn(P) -> (String, String)) -> axum::routing::MethodRouter
where
    P: axum::extract::FromRequestParts<()> + Send + 'static,
{
    let (c1, c2, c3) = (generating.clone(), generating.clone(), generating.clone());
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
    revision: Option<crate::generate::store::Revision>,
}

fn source_of(origin: &str) -> &'static str {
    if origin.starts_with(&format!("{API_DIR}/")) { "api" } else { "file" }
}

fn not_serving() -> Response {
    (StatusCode::NOT_FOUND, "not serving intent (start with --intent DIR --plugins DIR)\n").into_response()
}

fn list(generating: &Arc<Generating>) -> Response {
    let Some(source) = &generating.intent else { return not_serving() };
    match source.read_current().map(|read| read.set) {
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

fn one(generating: &Arc<Generating>, kind: &str, name: &str) -> Response {
    let Some(source) = &generating.intent else { return not_serving() };
    match source.read_current().map(|read| read.set) {
        Ok(set) => match set.get(kind, name) {
            Some(d) => {
                // The document with the status its plugin computed in the last good generation.
                let mut doc = d.json.clone();
                if let Some(status) = source.status_of(d.id())
                    && let Ok(status) = serde_json::from_str::<serde_json::Value>(&status)
                {
                    doc["status"] = status;
                }
                if d.kind == "Secret" {
                    withhold_secret(&mut doc);
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
    revision: Option<crate::generate::store::Revision>,
    /// The change that carries the write, for `GET /changes/{id}` and `xdst wait --change`:
    /// the generation that applied it, or with a store its revision (every replica's
    /// generation that translates that revision or a later one carries it).
    #[serde(skip_serializing_if = "Option::is_none")]
    change: Option<i64>,
    error: Option<String>,
}

/// Kinds become directory names: keep them to what cannot escape or hide. The error is the
/// text the client is sent (with `400`).
fn valid_kind(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && !s.starts_with('.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!("kind {s:?} must be 1-253 letters, digits, '-', '_' or '.', not starting with '.'"))
    }
}

/// Lowercase letters, digits and `-`, starting and ending with a letter or digit.
fn is_dns_part(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    s.bytes().all(|b| alnum(b) || b == b'-')
        && s.bytes().next().is_some_and(alnum)
        && s.bytes().last().is_some_and(alnum)
}

/// A DNS-1123 label: 1-63 of [`is_dns_part`]'s characters (a Kubernetes namespace).
fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_dns_part(s)
}

/// A DNS-1123 subdomain as Kubernetes checks an object name: at most 253 characters, parts
/// joined by `.` (Kubernetes does not limit a part to 63 here, and neither does xdst).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_part)
}

/// Namespaces and names become path components: Kubernetes' own rules, under which a
/// namespace directory (no `.`) never shares a path with a document file (`<name>.yaml`).
/// The error is the text the client is sent (with `400`).
fn valid_name(namespace: Option<&str>, name: &str) -> Result<(), String> {
    if let Some(ns) = namespace
        && !is_dns_label(ns)
    {
        return Err(format!(
            "metadata.namespace {:?} is not a DNS-1123 label (1-63 lowercase letters, digits and '-', starting and \
             ending with a letter or digit)",
            xdst_plugin::clip(ns, 300)
        ));
    }
    if !is_dns_subdomain(name) {
        return Err(format!(
            "metadata.name {:?} is not a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and '.', each \
             '.'-separated part starting and ending with a letter or digit)",
            xdst_plugin::clip(name, 300)
        ));
    }
    Ok(())
}

async fn write(
    generating: &Arc<Generating>,
    headers: &HeaderMap,
    kind: String,
    name: String,
    body: Option<String>,
) -> Response {
    let writer = match generating.serving().access.authorize_intent_write(headers) {
        Ok(w) => w,
        Err((status, why)) => return (status, why).into_response(),
    };
    let Some(source) = generating.intent.clone() else { return not_serving() };
    let (namespace, plain) = match name.split_once('/') {
        Some((ns, n)) => (Some(ns), n),
        None => (None, name.as_str()),
    };
    // Namespaces as write boundaries: a namespace token writes its namespace only.
    if let xdst_serve::access::Writer::Namespace(own) = &writer
        && namespace != Some(own.as_str())
    {
        let whose = match namespace {
            Some(ns) => format!("is in namespace {ns}"),
            None => "is cluster-scoped".to_owned(),
        };
        let why = format!("this token writes namespace {own} only (--namespace-token); {kind}/{name} {whose}");
        return (StatusCode::FORBIDDEN, Json(Written::refused(&kind, &name, why))).into_response();
    }
    if let Err(e) = valid_kind(&kind) {
        return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response();
    }
    if let Err(e) = valid_name(namespace, plain) {
        return (StatusCode::UNPROCESSABLE_ENTITY, Json(Written::refused(&kind, &name, e))).into_response();
    }
    if let Err(e) = check_body(&kind, &name, body.as_deref()) {
        return (StatusCode::BAD_REQUEST, Json(Written::refused(&kind, &name, e))).into_response();
    }
    // A creation time the body carries is the platform's to give (issue 49, item 3).
    let platform = matches!(writer, xdst_serve::access::Writer::Admin);
    if let Some(store) = generating.store.clone() {
        let body = body.map(|text| crate::generate::store::writes::Body { text, platform });
        let o = crate::generate::store::writes::write(generating, store, source, headers, &kind, &name, body).await;
        let result = if o.status.is_success() { "ok" } else { "refused" };
        let change = o.revision.filter(|_| o.status.is_success());
        let written = Written { kind, name, result, file: None, revision: o.revision, change, error: o.error };
        return (o.status, Json(written)).into_response();
    }
    let Some(generations) = generating.generations.get() else { return not_serving() };
    // On the generation thread: no other generation runs between the write and its outcome.
    let c = generating.clone();
    match generations.run(move || apply(&c, &source, &kind, &name, body.as_deref(), platform)).await {
        Some((status, written)) => (status, Json(written)).into_response(),
        None => (StatusCode::INTERNAL_SERVER_ERROR, "internal error (see the log)\n").into_response(),
    }
}

/// Where the API keeps a document: `_api/<kind>/[<namespace>/]<name>.yaml`; when that file name
/// would pass the 255-byte limit of common file systems (names may have 253 characters), the
/// name's first 200 characters, `_` (which no name holds) and a digest of the whole name.
fn api_file(kind: &str, qualified_name: &str) -> String {
    const MAX_FILE_NAME: usize = 255;
    let (dir, name) = match qualified_name.split_once('/') {
        Some((ns, name)) => (format!("{API_DIR}/{kind}/{ns}"), name),
        None => (format!("{API_DIR}/{kind}"), qualified_name),
    };
    if name.len() + ".yaml".len() <= MAX_FILE_NAME {
        return format!("{dir}/{name}.yaml");
    }
    // Names are ASCII (see `valid_name`), so any byte index is a character boundary.
    let digest = xdst_core::resource::content_version("xdst.api/name", name.as_bytes());
    format!("{dir}/{}_{digest}.yaml", &name[..200])
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
            error: Some(xdst_plugin::clip(&error, crate::generate::intent::MAX_ERROR_BYTES)),
        }
    }
}

/// A body must hold one document, of the kind and name the path says. The error is the text
/// the client is sent (with `400`).
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
fn apply(
    generating: &Arc<Generating>,
    source: &IntentSource,
    kind: &str,
    name: &str,
    body: Option<&str>,
    platform: bool,
) -> (StatusCode, Written) {
    let refused = |status: StatusCode, error: String| (status, Written::refused(kind, name, error));
    let Some(root) = source.intent_dir() else {
        return refused(StatusCode::INTERNAL_SERVER_ERROR, "intent does not come from a directory".into());
    };
    let rel = api_file(kind, name);
    let path = root.join(&rel);

    // The document must not belong to a file of its own. The last read says where it is
    // without reading every file again (issue 50, item 4); a file that defines it since is
    // caught by the generation below, which holds the newer of two sources of one document.
    if let Some(origin) = source.last_read_origin(kind, name)
        && source_of(&origin) == "file"
    {
        return refused(StatusCode::CONFLICT, format!("{kind}/{name} is defined in {origin}: change it there"));
    }

    let previous = std::fs::read_to_string(&path).ok();
    match body {
        Some(text) => {
            // The body was checked (one document, of this kind and name) before this.
            let text = match crate::generate::intent::generation::stamp(previous.as_deref(), text, platform) {
                Ok(t) => t,
                Err(e) => return refused(StatusCode::BAD_REQUEST, e),
            };
            if let Err(e) = xdst_core::files::write_atomic(&path, &text) {
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
    // The read looks at the file now, not when its event arrives.
    source.note_written(&path);
    // The write answers for its own document: held out (it does not read, or its translation
    // fails), it is refused; another document held out is that document's problem.
    let id = format!("{kind}/{name}");
    let result = source.generate(&generating.plane).and_then(|()| {
        match source.status().held.into_iter().find(|h| h.held == id || key_of(&h.origin) == rel) {
            Some(h) if body.is_some() => {
                Err(crate::generate::intent::GenerationError::Held { held: h.held, error: h.error })
            }
            _ => Ok(()),
        }
    });
    match result {
        Ok(()) => {
            tracing::info!(kind, name, deleted = body.is_none(), "intent written through the API");
            let file = body.map(|_| rel);
            let (kind, name) = (kind.to_owned(), name.to_owned());
            let change = generating.plane.changes.latest();
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
            source.note_written(&path);
            if matches!(e, crate::generate::intent::GenerationError::Held { .. }) {
                // The refused document was served held; it serves as it was again.
                let _ = source.generate(&generating.plane);
            }
            refused(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
    }
}

/// What a Secret's document shows of a withheld value.
const WITHHELD: &str = "Secret data is never shown";

/// The annotation `kubectl apply` writes: a copy of the whole object, Secret data included.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A Secret document as the API shows it: `apiVersion`, `kind`, `metadata`, `type`,
/// `immutable` and `status` as they are; every key of every other field (`data`,
/// `stringData`, a `spec`) with only `withheld` and a content hash of its value; the same for
/// the last-applied annotation.
fn withhold_secret(doc: &mut serde_json::Value) {
    use serde_json::Value;
    let Some(fields) = doc.as_object_mut() else { return };
    for (field, value) in fields.iter_mut() {
        if matches!(field.as_str(), "apiVersion" | "kind" | "metadata" | "type" | "immutable" | "status") {
            continue;
        }
        *value = match &*value {
            Value::Object(keys) => Value::Object(keys.iter().map(|(k, v)| (k.clone(), withheld(v))).collect()),
            other => withheld(other),
        };
    }
    if let Some(v) = fields
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(|a| a.as_object_mut())
        .and_then(|a| a.get_mut(LAST_APPLIED))
    {
        *v = withheld(v);
    }
}

fn withheld(value: &serde_json::Value) -> serde_json::Value {
    let hash = xdst_core::resource::content_version("xdst.intent/secret-value", value.to_string().as_bytes());
    serde_json::json!({"withheld": WITHHELD, "hash": hash})
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

    /// Issue 33, item 12: after `PUT /intent/Service/x.yaml/y`, `PUT /intent/Service/x`
    /// answered 500 "Is a directory". Namespaces with a `.` are refused now, and no accepted
    /// namespace directory is ever an accepted document's file.
    #[test]
    fn accepted_names_never_share_a_path() {
        assert!(valid_name(Some("x.yaml"), "y").unwrap_err().starts_with("metadata.namespace \"x.yaml\""));
        let longest = "n".repeat(253);
        for (ns, name) in
            [(Some("infra"), "web"), (None, "x"), (None, "x.yaml"), (Some("a-1"), "b.c-d.e"), (None, longest.as_str())]
        {
            assert_eq!(valid_name(ns, name), Ok(()), "{ns:?}/{name}");
        }
        for name in ["X", "a_b", "-a", "a-", "a..b", ".a", "a.", "", "a/b", "..", &"n".repeat(254)] {
            assert!(valid_name(None, name).unwrap_err().starts_with("metadata.name"), "{name:?}");
        }
        for ns in ["X", "a.b", "a_b", "-a", "", &"n".repeat(64)] {
            assert!(valid_name(Some(ns), "x").unwrap_err().starts_with("metadata.namespace"), "{ns:?}");
        }
        // Every file of a name holds a '.' (its ".yaml"); a namespace directory holds none.
        let (file, in_ns) = (api_file("Service", "x"), api_file("Service", "x/y"));
        let dir = in_ns.rsplit_once('/').unwrap().0;
        assert_eq!((file.as_str(), dir), ("_api/Service/x.yaml", "_api/Service/x"));
        // A long name's file is never the file of a name of its own (names hold no '_').
        let long = api_file("Service", &"n".repeat(253));
        let stem = long.rsplit('/').next().unwrap().trim_end_matches(".yaml");
        assert!(stem.contains('_') && !is_dns_subdomain(stem), "{stem}");
    }

    /// Issue 33, item 3: a Secret read through the API shows its metadata and, for each key,
    /// only that it is withheld and a content hash.
    #[test]
    fn a_secret_shows_keys_and_hashes_only() {
        let mut doc = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "tls", "namespace": "infra", "annotations": {
                LAST_APPLIED: "{\"data\":{\"tls.key\":\"S0VZ\"}}", "team": "a"}},
            "data": {"tls.crt": "Q0VSVA==", "tls.key": "S0VZ"},
            "stringData": {"password": "hunter2"},
        });
        withhold_secret(&mut doc);
        let text = doc.to_string();
        for secret in ["S0VZ", "Q0VSVA==", "hunter2"] {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
        assert_eq!(doc["data"]["tls.key"]["withheld"], WITHHELD);
        assert_eq!(doc["data"]["tls.key"]["hash"].as_str().map(str::len), Some(16));
        assert_ne!(doc["data"]["tls.key"]["hash"], doc["data"]["tls.crt"]["hash"]);
        assert_eq!(doc["stringData"]["password"]["withheld"], WITHHELD);
        assert_eq!(doc["metadata"]["annotations"][LAST_APPLIED]["withheld"], WITHHELD);
        assert_eq!((&doc["metadata"]["name"], &doc["metadata"]["annotations"]["team"]), (&"tls".into(), &"a".into()));
        assert_eq!(doc["type"], "kubernetes.io/tls");
    }
}

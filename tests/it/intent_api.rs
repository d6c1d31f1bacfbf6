//! Issue 5, build 3: the intent API on the admin port. Writes need the bearer token, are
//! translated and checked before they are accepted, and a refused write changes nothing: not
//! what is served, not the files. API documents live in `<intent>/_api/` beside the files,
//! and a document defined in a file cannot be written through the API.

use std::net::SocketAddr;

use serde_json::Value;
use xdst_tests::plugins;
use xdst_tests::server::Process;
use xdst_tests::xds::{http_get, http_with};

const TOKEN: (&str, &str) = ("Authorization", "Bearer api-t0ken");

fn service(name: &str, port: u16) -> String {
    format!(
        "kind: Service\nmetadata: {{name: {name}}}\nspec:\n  connectTimeout: 1s\n  endpoints:\n  - {{address: 127.0.0.1, port: {port}}}\n"
    )
}

fn gateway(backend: &str) -> String {
    format!(
        "kind: HttpGateway\nmetadata: {{name: web}}\nspec:\n  address: 127.0.0.1\n  port: 10080\n  hosts:\n  - hostnames: [\"*\"]\n    routes:\n    - name: all\n      match: {{pathPrefix: /}}\n      backends: [{{service: {backend}}}]\n"
    )
}

async fn clusters(admin: SocketAddr) -> Vec<String> {
    let (_, body) = http_get(admin, "/debug/resources").await;
    let v: Value = serde_json::from_str(&body).unwrap();
    let mut names: Vec<String> = v["default"]["cds"]["resources"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// `xdst serve` with the reference plugin, intent `files` and the write token `api-t0ken`:
/// the intent directory, the plugins directory (kept for the server's life) and the server.
async fn serve(files: &[(&str, String)]) -> (tempfile::TempDir, tempfile::TempDir, Process) {
    let intent = tempfile::tempdir().unwrap();
    let plugin_dir = tempfile::tempdir().unwrap();
    plugins::install(plugin_dir.path(), &plugins::reference().unwrap(), "reference.wasm", None).unwrap();
    for (name, body) in files {
        std::fs::write(intent.path().join(name), body).unwrap();
    }
    let token = intent.path().join(".token");
    std::fs::write(&token, "api-t0ken").unwrap();
    let xdst =
        Process::start_intent(intent.path(), plugin_dir.path(), &["--admin-token-file", token.to_str().unwrap()])
            .await
            .unwrap();
    (intent, plugin_dir, xdst)
}

#[tokio::test]
async fn writes_are_authenticated_validated_and_undone_when_refused() {
    let (intent, _plugins, xdst) =
        serve(&[("services.yaml", service("a", 8081)), ("gateway.yaml", gateway("a"))]).await;
    let admin = xdst.admin_addr;
    assert_eq!(clusters(admin).await, ["a"]);

    // The list shows where each document comes from.
    let (status, body) = http_get(admin, "/intent").await;
    assert_eq!(status, 200, "{body}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    assert!(
        listed.as_array().unwrap().iter().any(|d| d["kind"] == "Service" && d["name"] == "a" && d["source"] == "file"),
        "{listed}"
    );

    // No token: refused, nothing written.
    let (status, _) = http_with(admin, "PUT", "/intent/Service/b", &[], &service("b", 8082)).await;
    assert_eq!(status, 401);
    assert!(!intent.path().join("_api").exists());

    // A good write is translated, served, stored under _api/ and listed as API intent.
    let (status, body) = http_with(admin, "PUT", "/intent/Service/b", &[TOKEN], &service("b", 8082)).await;
    assert_eq!(status, 200, "{body}");
    let written: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (written["result"].as_str(), written["file"].as_str()),
        (Some("ok"), Some("_api/Service/b.yaml")),
        "{written}"
    );
    assert_eq!(clusters(admin).await, ["a", "b"]);
    assert!(intent.path().join("_api/Service/b.yaml").exists());
    let (_, body) = http_get(admin, "/intent/Service/b").await;
    assert!(body.contains("8082"), "{body}");

    // A file that defines what the API holds is held out as a duplicate naming both (issue 35:
    // the file, not everything); what serves stays.
    std::fs::write(intent.path().join("dup.yaml"), service("b", 8099)).unwrap();
    let held = xdst_tests::admin::wait_for_held(admin, "dup.yaml", "_api/Service/b.yaml").await.unwrap();
    assert_eq!(held["serving"], "nothing", "{held}");
    assert_eq!(clusters(admin).await, ["a", "b"]);
    let (_, body) = http_get(admin, "/intent/Service/b").await;
    assert!(body.contains("8082"), "the API's document stands: {body}");
    std::fs::remove_file(intent.path().join("dup.yaml")).unwrap();
    xdst_tests::wait::until("nothing held once the duplicate is gone", xdst_tests::admin::WAIT, async || {
        let s = xdst_tests::admin::plugins_status(admin).await?;
        Ok(xdst_tests::wait::Seen::holds(s["held"].as_array().is_some_and(Vec::is_empty), &s["held"]))
    })
    .await
    .unwrap();

    // A write the plugin refuses: the error names the field; nothing changes.
    let bad = service("b", 8082).replace("connectTimeout: 1s", "connectTimeout: soon");
    let (status, body) = http_with(admin, "PUT", "/intent/Service/b", &[TOKEN], &bad).await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("connectTimeout"), "{body}");
    assert!(
        std::fs::read_to_string(intent.path().join("_api/Service/b.yaml")).unwrap().contains("connectTimeout: 1s"),
        "the refused write was not undone"
    );
    assert_eq!(clusters(admin).await, ["a", "b"]);

    // A body that is not the document the path names, or that names a file's document.
    let (status, body) = http_with(admin, "PUT", "/intent/Service/c", &[TOKEN], &service("b", 8082)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("the path says Service/c"), "{body}");
    let (status, body) = http_with(admin, "PUT", "/intent/Service/a", &[TOKEN], &service("a", 9999)).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("services.yaml"), "{body}");
    let (status, _) = http_with(admin, "PUT", "/intent/Service/..%2Fescape", &[TOKEN], &service("x", 1)).await;
    assert!(matches!(status, 400 | 404 | 422), "a path-like name must be refused, got {status}");

    // Deleting what a route still names is refused by the consistency check; the file stays.
    std::fs::write(intent.path().join("gateway.yaml"), gateway("b")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, body) = http_get(admin, "/debug/resources").await;
        if body.contains("\"b\"") && !http_get(admin, "/debug/plugins").await.1.contains("\"last_error\":{") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the gateway edit was not picked up");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (status, body) = http_with(admin, "DELETE", "/intent/Service/b", &[TOKEN], "").await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("\"b\""), "{body}");
    assert!(intent.path().join("_api/Service/b.yaml").exists(), "the refused delete was not undone");

    // Once nothing names it, it goes.
    std::fs::write(intent.path().join("gateway.yaml"), gateway("a")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, body) = http_with(admin, "DELETE", "/intent/Service/b", &[TOKEN], "").await;
        if status == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "DELETE kept failing: {status} {body}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(clusters(admin).await, ["a"]);
    assert!(!intent.path().join("_api/Service/b.yaml").exists());
    let (status, _) = http_with(admin, "DELETE", "/intent/Service/b", &[TOKEN], "").await;
    assert_eq!(status, 404);
    xdst.kill().await.unwrap();
}

/// Issue 33, item 12: names that the intent API accepts never collide on disk. The
/// reproducer: after `PUT /intent/Service/x.yaml/y` (stored as `_api/Service/x.yaml/y.yaml`),
/// `PUT /intent/Service/x` answered 500 "Is a directory". A namespace must be a DNS-1123
/// label and a name a DNS-1123 subdomain, as in Kubernetes; others are refused with 422
/// naming the field, and write nothing.
#[tokio::test]
async fn names_that_would_collide_on_disk_are_refused() {
    let (intent, _plugins, xdst) = serve(&[("services.yaml", service("a", 8081))]).await;
    let admin = xdst.admin_addr;
    let namespaced =
        "kind: Service\nmetadata: {name: y, namespace: x.yaml}\nspec:\n  endpoints: [{address: 127.0.0.1, port: 9}]\n";
    let (status, body) = http_with(admin, "PUT", "/intent/Service/x.yaml/y", &[TOKEN], namespaced).await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("metadata.namespace") && body.contains("DNS-1123 label"), "{body}");
    assert!(!intent.path().join("_api/Service/x.yaml").exists(), "a refused write left a directory");
    let (status, body) = http_with(admin, "PUT", "/intent/Service/x", &[TOKEN], &service("x", 8082)).await;
    assert_eq!(status, 200, "{body}");
    assert!(intent.path().join("_api/Service/x.yaml").is_file());
    for (path, field) in [
        ("/intent/Service/Upper", "metadata.name"),
        ("/intent/Service/under_score", "metadata.name"),
        ("/intent/Service/x.", "metadata.name"),
        ("/intent/Service/Infra/web", "metadata.namespace"),
        ("/intent/Service/a.b/web", "metadata.namespace"),
    ] {
        let (status, body) = http_with(admin, "PUT", path, &[TOKEN], &service("whatever", 1)).await;
        assert_eq!(status, 422, "{path}: {body}");
        assert!(body.contains(field), "{path}: {body}");
    }
    // The accepted write serves, and nothing else was written.
    assert_eq!(clusters(admin).await, ["a", "x"]);
    let mut written: Vec<String> = std::fs::read_dir(intent.path().join("_api/Service"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["x.yaml"]);
}

/// Issue 36, item 6: what the API stores carries `metadata.generation` as the Kubernetes API
/// server keeps it: 1 at creation (whatever the client sent), one more when the spec changes,
/// the same when only metadata changes; it is in the stored file, so a restart keeps it.
#[tokio::test]
async fn the_api_keeps_a_generation_that_follows_the_spec() {
    let (intent, plugins, xdst) = serve(&[("gateway.yaml", gateway("a"))]).await;
    let admin = xdst.admin_addr;
    let put = async |body: &str| {
        let (status, text) = http_with(admin, "PUT", "/intent/Service/a", &[TOKEN], body).await;
        assert_eq!(status, 200, "{text}");
    };
    let generation = async || -> i64 {
        let (status, body) = http_get(admin, "/intent/Service/a").await;
        assert_eq!(status, 200, "{body}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        doc["metadata"]["generation"].as_i64().unwrap_or_else(|| panic!("no generation: {doc}"))
    };
    put(&service("a", 8081).replace("{name: a}", "{name: a, generation: 9}")).await;
    assert_eq!(generation().await, 1, "created: 1, not what the client sent");
    put(&service("a", 8081).replace("{name: a}", "{name: a, labels: {team: x}}")).await;
    assert_eq!(generation().await, 1, "metadata only");
    put(&service("a", 8082)).await;
    assert_eq!(generation().await, 2, "the spec changed");
    let stored = std::fs::read_to_string(intent.path().join("_api/Service/a.yaml")).unwrap();
    assert!(stored.contains("generation: 2"), "{stored}");
    // A restart reads it back from the file.
    drop(xdst);
    let token = intent.path().join(".token");
    let xdst = Process::start_intent(intent.path(), plugins.path(), &["--admin-token-file", token.to_str().unwrap()])
        .await
        .unwrap();
    let (_, body) = http_get(xdst.admin_addr, "/intent/Service/a").await;
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["metadata"]["generation"], 2, "{doc}");
}

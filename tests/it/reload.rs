//! Issue 5, build 4: `POST /reload` (with the admin bearer token) and SIGHUP rescan the watched
//! directories at once, whatever the watcher saw, and `POST /reload` answers with the outcome.
//! Writes without the token, with a wrong one, or on a server started without one are refused.

use std::time::Duration;

use serde_json::Value;
use xdst_tests::fixtures::{self, basic_dir, write};
use xdst_tests::server::Process;
use xdst_tests::xds::{http_get, http_with};

async fn loads(admin: std::net::SocketAddr) -> u64 {
    let (_, body) = http_get(admin, "/debug/resources").await;
    let v: Value = serde_json::from_str(&body).unwrap();
    v["source"]["loads_ok"].as_u64().unwrap() + v["source"]["loads_refused"].as_u64().unwrap()
}

#[tokio::test]
async fn reload_and_sighup_rescan_now_and_writes_need_the_token() {
    let dir = basic_dir(10000, 8080);
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("token");
    std::fs::write(&token_file, "s3cret\n").unwrap();
    // A one-minute resync: within this test only a forced rescan (or a file event) reloads.
    let xdst = Process::start(
        dir.path(),
        "127.0.0.1:0",
        &["--admin-token-file", token_file.to_str().unwrap(), "--resync", "1m"],
    )
    .await
    .unwrap();
    let admin = xdst.admin_addr;

    let (status, body) = http_with(admin, "POST", "/reload", &[], "").await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("missing Authorization"), "{body}");
    let (status, body) = http_with(admin, "POST", "/reload", &[("Authorization", "Bearer guess")], "").await;
    assert_eq!((status, body.as_str()), (401, "wrong bearer token\n"));

    let before = loads(admin).await;
    let (status, body) = http_with(admin, "POST", "/reload", &[("Authorization", "Bearer s3cret")], "").await;
    assert_eq!(status, 200, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((report["source"].as_str(), report["result"].as_str()), (Some("resources"), Some("ok")), "{report}");
    assert!(loads(admin).await > before, "POST /reload did not rescan");

    // A bad edit: the reload answers with the refusal, naming the file.
    write(dir.path(), "route.yaml", &fixtures::route("local", "nowhere"));
    let (_, body) = http_with(admin, "POST", "/reload", &[("Authorization", "Bearer s3cret")], "").await;
    let report: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(report["result"], "refused", "{report}");
    assert!(report["error"].as_str().unwrap().contains("cluster \"nowhere\""), "{report}");
    write(dir.path(), "route.yaml", &fixtures::route("local", "backend"));

    // SIGHUP: the same rescan, from the process's supervisor.
    // The restore is loaded before the count is taken (issue 34: a positive signal, not a pause).
    xdst_tests::wait::until("the restored route.yaml to load", Duration::from_secs(5), async || {
        let (_, body) = http_get(admin, "/debug/resources").await;
        let v: Value = serde_json::from_str(&body)?;
        Ok(xdst_tests::wait::Seen::holds(v["source"]["last_error"].is_null(), &v["source"]))
    })
    .await
    .unwrap();
    let before = loads(admin).await;
    let pid = xdst.child.id().unwrap() as i32;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    xdst_tests::wait::until_true("SIGHUP to rescan", Duration::from_secs(5), async || loads(admin).await > before)
        .await
        .unwrap();
    xdst.kill().await.unwrap();

    // Without a token configured, admin writes are off.
    let xdst = Process::start(dir.path(), "127.0.0.1:0", &[]).await.unwrap();
    let (status, body) = http_with(xdst.admin_addr, "POST", "/reload", &[("Authorization", "Bearer s3cret")], "").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("--admin-token-file"), "{body}");
    xdst.kill().await.unwrap();
}

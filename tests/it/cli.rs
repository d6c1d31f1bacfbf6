//! The `xdst` command line: help that answers questions, `validate`, and `serve`'s errors.

use std::process::Command;

use xdst_tests::fixtures::{self, basic_dir, write};

fn xdst() -> Command {
    Command::new(xdst_tests::server::binary().unwrap())
}

#[test]
fn serve_help_explains_every_flag_and_the_directory_format() {
    let out = xdst().args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "--xds-addr",
        "127.0.0.1:18000",
        "--admin-addr",
        "127.0.0.1:19000",
        "--resources",
        "--node-group-key",
        "--debounce",
        "@type",
        "DELTA_GRPC",
        "RUST_LOG",
    ] {
        assert!(help.contains(needle), "`xdst serve --help` does not mention {needle}:\n{help}");
    }
}

#[test]
fn validate_accepts_a_good_directory_and_names_the_problem_in_a_bad_one() {
    let dir = basic_dir(10000, 8080);
    let out = xdst().arg("validate").arg("--resources").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("4 resources"));

    write(dir.path(), "route.yaml", &fixtures::route("local", "nowhere"));
    let out = xdst().arg("validate").arg("--resources").arg(dir.path()).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("route configuration \"local\"") && err.contains("cluster \"nowhere\""), "{err}");

    write(
        dir.path(),
        "route.yaml",
        "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: local\nvirtual_hosts: 3\n",
    );
    let out = xdst().arg("validate").arg("--resources").arg(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("route.yaml document 1 field virtual_hosts"), "{err}");
}

#[test]
fn serve_refuses_a_bad_directory_and_a_busy_port_with_clear_errors() {
    let missing = tempfile::tempdir().unwrap().path().join("nope");
    let out = xdst()
        .args(["serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--resources"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"), "{}", String::from_utf8_lossy(&out.stderr));

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let out = xdst().args(["serve", "--xds-addr", &addr, "--admin-addr", "127.0.0.1:0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("binding --xds-addr {addr}")),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

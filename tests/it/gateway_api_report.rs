//! Issue 36, item 8: the Gateway API conformance report in the upstream format
//! (`plugins/gateway-api/conformance/report.yaml`, a `ConformanceReport`), computed the way
//! the upstream suite computes one (`conformance/utils/suite/reports.go` at 4564255) from
//! what the harness measured: the result of every case in `plugins/gateway-api/CONFORMANCE.md`,
//! and each upstream test's features and profiles (`conformance/upstream-tests.json`, written
//! by `conformance/extract-upstream.py` from the upstream sources).
//!
//! - A test passes when its case passes; it is **not supported** (not counted, its features
//!   listed as unsupported) when it needs a feature xdst does not claim ([`UNSUPPORTED`]); a
//!   case that is not yet run counts as **skipped**, as upstream's `--skip-tests` makes it; and
//!   a not-applicable case whose upstream test skips itself for xdst's features is skipped.
//! - A test counts in every profile whose core and extended features hold all of its
//!   features, as extended when one of them is not core.
//!
//! The test fails when the committed report differs from the computed one; run it with
//! `XDST_WRITE_CONFORMANCE_REPORT=1` to write the report. It also checks that every case the
//! table says passes is named by a test in `tests/it`, so the report never claims a case the
//! test command does not run (the integration tests, or the plugin's status tests for cases
//! whose upstream test asserts conditions only).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// Features xdst does not claim: tests that need one are not run for xdst (upstream's
/// `NOT_SUPPORTED`). Each is an issue 36 item or a reason in CONFORMANCE.md.
const UNSUPPORTED: &[&str] = &[
    // xdst makes no Kubernetes objects for a Gateway to label (CONFORMANCE.md, n/a).
    "GatewayInfrastructurePropagation",
    // Mesh profiles are not a gateway's.
    "Mesh",
];

/// The profiles reported: every Gateway profile.
const PROFILES: &[&str] = &["GATEWAY-GRPC", "GATEWAY-HTTP", "GATEWAY-TCP", "GATEWAY-TLS", "GATEWAY-UDP"];

fn read(path: &str) -> String {
    std::fs::read_to_string(xdst_tests::repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Each case's result in CONFORMANCE.md: `pass`, `pass (status)`, `n/a` or `not yet`.
fn table() -> BTreeMap<String, String> {
    read("plugins/gateway-api/CONFORMANCE.md")
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Case"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].to_owned(), cells[1].to_owned())
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Succeeded,
    Skipped,
    NotSupported,
}

/// The report, as upstream's suite would write it for these results (without its date).
fn report() -> Value {
    let upstream: Value = serde_json::from_str(&read("plugins/gateway-api/conformance/upstream-tests.json")).unwrap();
    let results = table();
    let profiles = &upstream["profiles"];
    let features_of = |p: &str, which: &str| -> BTreeSet<String> {
        profiles[p][which].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_owned()).collect()
    };
    let mut stats: BTreeMap<&str, [BTreeMap<&str, Vec<String>>; 2]> = BTreeMap::new();
    let mut provisional = Vec::new();
    for test in upstream["tests"].as_array().unwrap() {
        let name = test["name"].as_str().unwrap().to_owned();
        let features: Vec<&str> = test["features"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        let case = test["cases"][0].as_str().unwrap();
        let result = results.get(case).unwrap_or_else(|| panic!("CONFORMANCE.md has no row for {case} ({name})"));
        let outcome = if features.iter().any(|f| UNSUPPORTED.iter().any(|u| f.starts_with(u))) {
            Outcome::NotSupported
        } else if result.starts_with("pass") {
            Outcome::Succeeded
        } else {
            Outcome::Skipped
        };
        if outcome == Outcome::NotSupported {
            continue;
        }
        if outcome == Outcome::Succeeded && test["provisional"] == true {
            provisional.push(name.clone());
        }
        for p in PROFILES {
            let (core, extended) = (features_of(p, "core"), features_of(p, "extended"));
            if !features.iter().all(|f| core.contains(*f) || extended.contains(*f)) {
                continue;
            }
            let is_extended = features.iter().any(|f| !core.contains(*f));
            let bucket = &mut stats.entry(p).or_default()[usize::from(is_extended)];
            let key = if outcome == Outcome::Succeeded { "passed" } else { "skipped" };
            bucket.entry(key).or_default().push(name.clone());
        }
    }
    let status = |b: &BTreeMap<&str, Vec<String>>| -> Value {
        let passed = b.get("passed").map_or(0, Vec::len);
        let skipped = b.get("skipped").cloned().unwrap_or_default();
        let result = if skipped.is_empty() { "success" } else { "partial" };
        let mut s = json!({"result": result, "statistics": {"Failed": 0, "Passed": passed, "Skipped": skipped.len()}});
        if !skipped.is_empty() {
            s["skippedTests"] = json!(skipped);
        }
        s
    };
    let summary = |s: &Value| match s["result"].as_str() {
        Some("success") => "succeeded".to_owned(),
        _ => format!("partially succeeded with {} test skips", s["statistics"]["Skipped"]),
    };
    let mut out = Vec::new();
    for p in PROFILES {
        let Some([core, extended]) = stats.get(p) else { continue };
        let core = status(core);
        let mut text = format!("Core tests {}.", summary(&core));
        let mut profile = json!({"name": p, "core": core});
        let features = features_of(p, "extended");
        let supported: Vec<&String> =
            features.iter().filter(|f| !UNSUPPORTED.iter().any(|u| f.starts_with(u))).collect();
        let unsupported: Vec<&String> =
            features.iter().filter(|f| UNSUPPORTED.iter().any(|u| f.starts_with(u))).collect();
        if !extended.is_empty() || !supported.is_empty() {
            let mut e = status(extended);
            text = format!("Core tests {}. Extended tests {}.", summary(&profile["core"]), summary(&e));
            if !supported.is_empty() {
                e["supportedFeatures"] = json!(supported);
            }
            if !unsupported.is_empty() {
                e["unsupportedFeatures"] = json!(unsupported);
            }
            profile["extended"] = e;
        }
        profile["summary"] = json!(text);
        out.push(profile);
    }
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    let mut report = json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "ConformanceReport",
        "implementation": {
            "organization": "xdst",
            "project": "xdst gateway-api plugin",
            "url": "plugins/gateway-api/README.md in the xdst repository",
            "version": version,
            "contact": ["the xdst repository's issues"],
        },
        "gatewayAPIVersion": format!("{} (after v1.6.1)", upstream["source"].as_str().unwrap()),
        "gatewayAPIChannel": "experimental",
        "mode": "default",
        "profiles": out,
    });
    if !provisional.is_empty() {
        report["succeededProvisionalTests"] = json!(provisional);
    }
    report
}

/// The date of the run the table was written from (`Written from the run of YYYY-MM-DD`).
fn run_date() -> String {
    let text = read("plugins/gateway-api/CONFORMANCE.md");
    let at = text.find("Written from the run of ").expect("CONFORMANCE.md says when it was written") + 24;
    text[at..at + 10].to_owned()
}

#[test]
fn the_conformance_report_is_what_the_harness_measured() {
    let mut want = report();
    want["date"] = json!(run_date());
    let path = xdst_tests::repo_root().join("plugins/gateway-api/conformance/report.yaml");
    let header = "# The Gateway API conformance report of the gateway-api plugin, in the upstream format.\n\
                  # Computed from plugins/gateway-api/CONFORMANCE.md and conformance/upstream-tests.json by\n\
                  # XDST_WRITE_CONFORMANCE_REPORT=1 cargo test -p xdst-tests --test it -- gateway_api_report\n";
    let text = format!("{header}{}", serde_yaml_ng::to_string(&want).unwrap());
    if std::env::var_os("XDST_WRITE_CONFORMANCE_REPORT").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is not what CONFORMANCE.md says the harness measured; write it with \
         XDST_WRITE_CONFORMANCE_REPORT=1 cargo test -p xdst-tests --test it -- gateway_api_report",
        path.display()
    );
}

/// Every case CONFORMANCE.md says passes is named by a test of the suite, so the report
/// claims nothing the test command does not run.
#[test]
fn every_passing_case_is_run_by_a_test() {
    // The integration tests, and the plugin's own status tests (cases whose upstream test
    // asserts conditions only).
    let root = xdst_tests::repo_root();
    let mut sources = String::new();
    for dir in ["tests/it", "plugins/gateway-api/tests"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            if name.ends_with(".rs") && (dir != "tests/it" || name.starts_with("gateway_api")) {
                sources.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let missing: Vec<String> = table()
        .into_iter()
        .filter(|(case, result)| result.starts_with("pass") && !sources.contains(&format!("\"{case}\"")))
        .map(|(case, _)| case)
        .collect();
    assert!(
        missing.is_empty(),
        "CONFORMANCE.md says these pass, but no test in tests/it/gateway_api*.rs names them: {missing:?}"
    );
}

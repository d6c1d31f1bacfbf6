//! Issue 52: every status xdst writes for a Gateway API object is one a Kubernetes API server
//! would keep: checked against the upstream CRDs' `status` schemas
//! (`../shared/gateway-api-crds`, experimental channel at the suite's commit; skipped, saying
//! so, without them) by `xdst_tests::crd_schema`. Passing and failing objects: every status of
//! every upstream case, here; held and quarantined ones: every document of every case held as
//! the host marks it, here too (with the host's own code; the check fails on 710 of them when
//! routes keep held conditions at the top, as before: tried). Held and quarantined objects
//! with a real Envoy: the rows of `quarantine.rs` and `hold_group.rs` check their documents'
//! statuses with the same schemas.

use std::collections::BTreeMap;

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};
use xdst_tests::crd_schema::{Schemas, crds_dir};
use xdst_tests::gateway_api::{CONTROLLER, UNUSABLE_ADDRESS, cases_dir, certificate_secrets};

/// The schemas, or `None` after a line saying the test skipped and why.
fn schemas_or_skip(test: &str) -> anyhow::Result<Option<Schemas>> {
    match crds_dir() {
        Some(dir) => Ok(Some(Schemas::load(&dir)?)),
        None => {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipped {test}: no Gateway API CRDs (../shared/gateway-api-crds, or $XDST_GATEWAY_API_CRDS)"
            );
            Ok(None)
        }
    }
}

/// A condition as the schema wants it.
fn condition(kind: &str, status: &str, reason: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": "",
           "lastTransitionTime": "2026-12-07T10:00:00Z"})
}

/// The check itself fails on what an API server would drop or refuse: a route's top-level
/// `conditions` (what xdst wrote for a held route before issue 52), a condition without its
/// `lastTransitionTime` (what every plugin status lacked), two conditions of one type, a
/// reason outside the schema's pattern, and an IP address that is not one. A status as
/// upstream writes it passes.
#[test]
fn the_check_finds_what_an_api_server_would_drop_or_refuse() -> anyhow::Result<()> {
    let Some(schemas) = schemas_or_skip("the_check_finds_what_an_api_server_would_drop_or_refuse")? else {
        return Ok(());
    };
    let parent = |conditions: Vec<Value>| {
        json!({"parentRef": {"name": "gw", "namespace": "infra"}, "controllerName": CONTROLLER,
               "conditions": conditions})
    };
    let route = "gateway.networking.k8s.io/HTTPRoute";
    let good = json!({"parents": [parent(vec![condition("Accepted", "True", "Accepted")])]});
    ensure!(schemas.problems(route, &good).is_empty(), "{:?}", schemas.problems(route, &good));
    let mut no_time = condition("Accepted", "True", "Accepted");
    no_time.as_object_mut().unwrap().remove("lastTransitionTime");
    let bad: [(&str, &str, Value, &str); 6] = [
        (
            "top-level conditions on a route",
            route,
            json!({"conditions": [condition("Programmed", "False", "Held")],
                   "parents": [parent(vec![condition("Accepted", "True", "Accepted")])]}),
            "status.conditions: not in the schema",
        ),
        ("no lastTransitionTime", route, json!({"parents": [parent(vec![no_time])]}), "lastTransitionTime: required"),
        (
            "two conditions of one type",
            route,
            json!({"parents": [parent(vec![condition("Accepted", "True", "A"), condition("Accepted", "False", "B")])]}),
            "two entries with type",
        ),
        (
            "a reason with a space",
            route,
            json!({"parents": [parent(vec![condition("Accepted", "True", "Not Accepted")])]}),
            "does not match",
        ),
        (
            "an IPAddress that is not one",
            "gateway.networking.k8s.io/Gateway",
            json!({"addresses": [{"type": "IPAddress", "value": "fake address teehee!"}],
                   "conditions": [condition("Accepted", "True", "Accepted")]}),
            "oneOf",
        ),
        (
            "a status for a kind whose schema has none",
            "gateway.networking.k8s.io/ReferenceGrant",
            json!({"conditions": [condition("Accepted", "True", "Accepted")]}),
            "has no status",
        ),
    ];
    for (what, claim, status, says) in bad {
        let problems = schemas.problems(claim, &status);
        ensure!(problems.iter().any(|p| p.contains(says)), "{what}: want a problem saying {says:?}, got {problems:?}");
    }
    Ok(())
}

/// Every status `xdst translate --status` gives for every upstream case (the manifests as the
/// harness writes them, with the Secrets and ConfigMaps the suite makes in code) passes the
/// schema of its kind, and no object of a kind whose schema has no status gets one. Every kind
/// with a status in its schema is seen at least once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_status_of_every_upstream_case_is_one_the_api_server_keeps() -> anyhow::Result<()> {
    xdst_tests::skip_without_upstream_cases!();
    let Some(schemas) = schemas_or_skip("every_status_of_every_upstream_case_is_one_the_api_server_keeps")? else {
        return Ok(());
    };
    let xdst = xdst_tests::server::binary()?;
    let plugins = tempfile::tempdir()?;
    xdst_tests::plugins::install(plugins.path(), &xdst_tests::plugins::gateway_api()?, "gateway-api.wasm", None)?;
    let mut cases: Vec<_> = std::fs::read_dir(cases_dir()?)?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("manifests.yaml").exists())
        .collect();
    cases.sort_by_key(|e| e.file_name());
    let mut problems = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut held_seen: BTreeMap<String, usize> = BTreeMap::new();
    for case in &cases {
        let name = case.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(case.path().join("manifests.yaml"))?
            .replace("{GATEWAY_CLASS_NAME}", "xdst")
            .replace("{GATEWAY_CONTROLLER_NAME}", CONTROLLER)
            .replace("PLACEHOLDER_USABLE_ADDRS", "127.0.0.1")
            .replace("PLACEHOLDER_UNUSABLE_ADDRS", UNUSABLE_ADDRESS);
        let docs = xdst_core::intent::parse_file("manifests.yaml", &text)?;
        let pki = tempfile::tempdir()?;
        let mut extra = String::new();
        certificate_secrets(&docs, pki.path(), &mut extra)?;
        let shipped = docs.iter().map(|d| d.id().to_string()).collect();
        extra.push_str(&xdst_tests::suite_pki::SuitePki::new(pki.path()).objects_for(&text, &shipped)?);
        let intent = tempfile::tempdir()?;
        std::fs::write(intent.path().join("manifests.yaml"), &text)?;
        std::fs::write(intent.path().join("extra.yaml"), &extra)?;
        let claims: BTreeMap<String, String> = docs
            .iter()
            .chain(&xdst_core::intent::parse_file("extra.yaml", &extra)?)
            .map(|d| (d.id().to_string(), d.claim()))
            .collect();
        let out = std::process::Command::new(&xdst)
            .arg("translate")
            .arg("--intent")
            .arg(intent.path())
            .arg("--plugins")
            .arg(plugins.path())
            .args(["--status", "--format", "json"])
            .output()?;
        ensure!(out.status.success(), "xdst translate on {name}: {}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).with_context(|| format!("{name}: --status output"))?;
        for (id, status) in v["statuses"].as_object().into_iter().flatten() {
            let claim = claims.get(id).with_context(|| format!("{name}: a status for {id}, which is no document"))?;
            *seen.entry(claim.clone()).or_default() += 1;
            problems.extend(schemas.problems(claim, status).into_iter().map(|p| format!("{name}: {id}: {p}")));
        }
        // Every document of the case held, as the host marks it (with the status of its last
        // good version, and, for routes, with none), and quarantined (a node's rejection).
        let docs: Vec<_> = docs.into_iter().chain(xdst_core::intent::parse_file("extra.yaml", &extra)?).collect();
        for (id, status) in held_statuses(&v["statuses"], &docs)? {
            let claim = &claims[&id];
            *held_seen.entry(claim.clone()).or_default() += 1;
            problems.extend(schemas.problems(claim, &status).into_iter().map(|p| format!("{name}: held {id}: {p}")));
        }
    }
    eprintln!(
        "held and quarantined: {} statuses of {} kinds checked",
        held_seen.values().sum::<usize>(),
        held_seen.len()
    );
    let with_status: Vec<&str> =
        schemas.kinds().filter(|k| !schemas.problems(k, &json!({})).iter().any(|p| p.contains("no status"))).collect();
    let unseen: Vec<&&str> = with_status.iter().filter(|k| !seen.contains_key(**k)).collect();
    eprintln!(
        "{} statuses of {} kinds over {} cases checked against the CRDs ({} CEL rules passed by unchecked)",
        seen.values().sum::<usize>(),
        seen.len(),
        cases.len(),
        schemas.cel_rules()
    );
    ensure!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    ensure!(cases.len() < 139 || unseen.is_empty(), "no status seen for {unseen:?}");
    let unheld: Vec<&&str> = with_status.iter().filter(|k| !held_seen.contains_key(**k)).collect();
    ensure!(cases.len() < 139 || unheld.is_empty(), "no held status seen for {unheld:?}");
    Ok(())
}

/// The statuses the host serves when it holds every document of a case whose plugin computed
/// `statuses` (`xdst translate --status`'s `statuses`): held at their last good version (the
/// plugin's status beside the hold), quarantined (a node's rejection, reason `Rejected`), and
/// every route held with no status of its own (never translated). Marked and stamped by the
/// host's own code (`xdst::generate::intent::conditions`), with a failure longer than the
/// schema keeps.
fn held_statuses(statuses: &Value, docs: &[xdst_core::intent::IntentDocument]) -> anyhow::Result<Vec<(String, Value)>> {
    use std::sync::Arc;
    use xdst::generate::intent::conditions::{mark_held, stamped};
    let mut intent = xdst_core::intent::IntentSet::default();
    for d in docs {
        intent.add(d.clone()).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    let computed: xdst_plugin::pipeline::Statuses = statuses
        .as_object()
        .into_iter()
        .flatten()
        .map(|(id, s)| (Arc::from(id.as_str()), Arc::from(s.to_string())))
        .collect();
    let ids: Vec<String> = docs.iter().map(|d| d.id().to_string()).collect();
    let failure = format!("Envoy would refuse it: {}", "a very long reason ".repeat(2_000));
    let is_route = |id: &str| id.split('/').next().is_some_and(|k| k.ends_with("Route"));
    let mut out = Vec::new();
    for (reason, without_own) in [("HeldAtLastGood", false), ("Rejected", false), ("Held", true)] {
        let mut marked: xdst_plugin::pipeline::Statuses = computed
            .iter()
            .filter(|(id, _)| !(without_own && is_route(id)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let held: Vec<&String> = ids.iter().filter(|id| !without_own || is_route(id)).collect();
        mark_held(&mut marked, &intent, held.iter().map(|id| (id.as_str(), failure.as_str(), reason)));
        let none = xdst_plugin::pipeline::Statuses::new();
        let served = stamped(&marked, &none, &none, "2026-12-07T10:00:00Z");
        for id in held {
            if let Some(s) = served.get(id.as_str()) {
                out.push((id.clone(), serde_json::from_str(s)?));
            }
        }
    }
    Ok(out)
}

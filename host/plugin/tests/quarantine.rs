//! Issue 35, part 2: a document that fails is held out of the generation (at its last good
//! version, or left out) and every other document is translated. The translator here is a
//! native stand-in (a unit test of the pipeline's bookkeeping); the same path runs with real
//! plugins and a real Envoy in `tests/it/quarantine.rs`.

use std::sync::Arc;

use xdst_core::intent::{IntentSet, parse_file};
use xdst_plugin::pipeline::{Configured, Holding, Pipeline, PipelineError, Translate};
use xdst_plugin::wit::{self, Granularity, Phase, PluginInfo};
use xdst_plugin::{Failure, PluginError};

/// Translates every `Route` into one route of the RouteConfiguration `rc`, marked with the
/// route's document; `spec.header` becomes a header match (an empty one is refused by
/// Envoy's rules), and `spec.fail` makes the plugin report an error naming the document.
struct Routes {
    info: PluginInfo,
}

impl Routes {
    fn configured(granularity: Granularity) -> Configured {
        let info = PluginInfo {
            name: "routes".into(),
            version: "0.1.0".into(),
            kinds: vec!["Route".into()],
            phase: Phase::Translate,
            granularity,
        };
        Configured::new(Arc::new(Routes { info }), "null")
    }
}

impl Translate for Routes {
    fn info(&self) -> &PluginInfo {
        &self.info
    }
    fn digest(&self) -> &str {
        "sha256:routes"
    }
    fn translate(&self, request: &wit::TranslateRequest) -> Result<wit::TranslateResponse, PluginError> {
        let mut routes = Vec::new();
        for d in &request.documents {
            let doc: serde_json::Value = serde_json::from_str(&d.json).unwrap();
            let id = format!("{}/{}", d.kind, d.name);
            // A document that takes the plugin past its memory cap: the failure names none.
            if doc["spec"]["huge"] == true {
                return Err(PluginError {
                    plugin: self.info.name.clone(),
                    digest: self.digest().into(),
                    failure: Failure::Memory { limit_bytes: 256 << 20 },
                });
            }
            if doc["spec"]["fail"] == true {
                return Err(PluginError {
                    plugin: self.info.name.clone(),
                    digest: self.digest().into(),
                    failure: Failure::Reported {
                        message: "spec.fail is set".into(),
                        document: Some(id),
                        field: Some("spec.fail".into()),
                    },
                });
            }
            let mut m = serde_json::json!({"prefix": format!("/{}", d.name)});
            if let Some(h) = doc["spec"]["header"].as_str() {
                m["headers"] = serde_json::json!([{"name": h, "present_match": true}]);
            }
            routes.push(serde_json::json!({
                "name": d.name, "match": m, "direct_response": {"status": 200},
                "metadata": {"filter_metadata": {"xdst": {"document": id}}}
            }));
        }
        let rc = |name: &str, routes: &[serde_json::Value]| {
            let rc = serde_json::json!({"name": name, "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": routes}]});
            wit::XdsResource {
                type_url: xdst_core::types::ROUTE.into(),
                name: name.into(),
                body: wit::Body::Json(rc.to_string()),
                document: None,
            }
        };
        let resources = match self.info.granularity {
            // One for all, attributed to a document that only owns its name.
            Granularity::WholeSet => {
                vec![wit::XdsResource { document: Some("Gateway/shared".into()), ..rc("rc", &routes) }]
            }
            Granularity::PerDocument => request
                .documents
                .iter()
                .zip(&routes)
                .map(|(d, r)| wit::XdsResource {
                    document: Some(format!("{}/{}", d.kind, d.name)),
                    ..rc(&format!("rc-{}", d.name), std::slice::from_ref(r))
                })
                .collect(),
        };
        Ok(wit::TranslateResponse { resources, diagnostics: vec![] })
    }
}

fn intent(docs: &[(&str, &str)]) -> IntentSet {
    let mut set = IntentSet::default();
    for (name, spec) in docs {
        let text = format!("kind: Route\nmetadata: {{name: {name}}}\nspec: {spec}\n");
        for d in parse_file(&format!("{name}.yaml"), &text).unwrap() {
            set.add(d).unwrap();
        }
    }
    set
}

/// The routes `rc` holds, by name.
fn routes(t: &xdst_plugin::pipeline::Translation) -> Vec<String> {
    let rc = t.snapshot.resource(xdst_core::types::ROUTE, "rc").expect("rc");
    let json: serde_json::Value =
        serde_json::from_str(&xdst_core::decode::to_json(rc.type_url(), rc.body()).unwrap()).unwrap();
    json["virtual_hosts"][0]["routes"]
        .as_array()
        .map(|rs| rs.iter().map(|r| r["name"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn up_to(max_new: usize) -> Holding {
    Holding { max_new, ..Holding::SERVE }
}

const GOOD: &str = "{header: x-team}";
const BAD: &str = "{header: \"\"}";

/// A route Envoy would refuse, inside a resource attributed to another document, is blamed on
/// the route's own document (its mark), held out, and the other teams' routes are translated.
#[test]
fn a_refused_part_holds_out_its_own_document_only() {
    let plugins = [Routes::configured(Granularity::WholeSet)];
    let mut p = Pipeline::new("");
    // Strict: the whole generation fails, naming the part's document.
    let e = p.run(&plugins, &intent(&[("a", GOOD), ("b", BAD)])).unwrap_err();
    let PipelineError::InvalidResource(r) = &e else { panic!("{e}") };
    assert_eq!(r.part.as_deref(), Some("Route/b"), "{e}");
    assert!(e.to_string().contains("rds \"rc\" from Gateway/shared, the part made from Route/b, field"), "{e}");

    let t = p.run_holding(&plugins, &intent(&[("a", GOOD), ("b", BAD)]), up_to(4)).unwrap();
    assert_eq!(routes(&t), ["a"]);
    let held = &t.held["Route/b"];
    assert!(!held.last_good, "b never translated");
    assert!(held.error.contains("Envoy would refuse it"), "{}", held.error);
    assert_eq!((held.origin.as_str(), held.plugin.as_deref()), ("b.yaml#1", Some("routes")));

    // Unchanged, it stays held without another try; fixed, it is translated.
    let again = p.run_holding(&plugins, &intent(&[("a", GOOD), ("b", BAD)]), up_to(0)).unwrap();
    assert!(again.held.contains_key("Route/b") && again.calls.is_empty(), "{:?}", again.calls);
    let fixed = p.run_holding(&plugins, &intent(&[("a", GOOD), ("b", GOOD)]), up_to(4)).unwrap();
    assert!(fixed.held.is_empty());
    assert_eq!(routes(&fixed), ["a", "b"]);

    // Broken after it was good: its last good version stays, beside a new team's route.
    let t = p.run_holding(&plugins, &intent(&[("a", GOOD), ("b", BAD), ("c", GOOD)]), up_to(4)).unwrap();
    assert_eq!(routes(&t), ["a", "b", "c"]);
    assert!(t.held["Route/b"].last_good);
}

/// A plugin's error naming a document holds that document, for per-document plugins too.
#[test]
fn a_plugin_error_naming_a_document_holds_that_document() {
    for g in [Granularity::WholeSet, Granularity::PerDocument] {
        let plugins = [Routes::configured(g)];
        let mut p = Pipeline::new("");
        let t = p.run_holding(&plugins, &intent(&[("a", GOOD), ("b", "{fail: true}")]), up_to(4)).unwrap();
        assert_eq!(t.held.keys().map(|k| k.as_ref()).collect::<Vec<_>>(), ["Route/b"], "{g:?}");
        assert!(t.held["Route/b"].error.contains("spec.fail is set"), "{:?}", t.held);
    }
}

/// A document no plugin translates is held; the rest is translated.
#[test]
fn an_unclaimed_kind_is_held() {
    let plugins = [Routes::configured(Granularity::WholeSet)];
    let mut set = intent(&[("a", GOOD)]);
    for d in parse_file("x.yaml", "kind: Mystery\nmetadata: {name: m}\n").unwrap() {
        set.add(d).unwrap();
    }
    let t = Pipeline::new("").run_holding(&plugins, &set, up_to(4)).unwrap();
    assert_eq!(routes(&t), ["a"]);
    assert!(t.held["Mystery/m"].error.contains("no plugin translates kind \"Mystery\""), "{:?}", t.held);
    assert!(Pipeline::new("").run(&plugins, &set).is_err(), "strict");
}

/// More new failures than the bound fail the generation, and the pipeline is left as it was.
#[test]
fn more_failures_than_the_bound_fail_the_generation() {
    let plugins = [Routes::configured(Granularity::WholeSet)];
    let mut p = Pipeline::new("");
    p.run_holding(&plugins, &intent(&[("a", GOOD)]), up_to(4)).unwrap();
    let bad = intent(&[("a", GOOD), ("b", BAD), ("c", BAD), ("d", BAD)]);
    assert!(p.run_holding(&plugins, &bad, up_to(2)).is_err());
    let t = p.run_holding(&plugins, &bad, up_to(3)).unwrap();
    assert_eq!(routes(&t), ["a"]);
    assert_eq!(t.held.len(), 3);
}

fn team_intent(docs: &[(&str, &str, &str)]) -> IntentSet {
    let mut set = IntentSet::default();
    for (ns, name, spec) in docs {
        let text = format!("kind: Route\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n");
        for d in parse_file(&format!("{ns}-{name}.yaml"), &text).unwrap() {
            set.add(d).unwrap();
        }
    }
    set
}

/// Issue 49, items 9 and 10: a call that fails naming no document (a memory cap, a deadline)
/// is blamed on the namespace without whose changes it succeeds; that namespace's changed
/// documents are held together, and every other team's edits apply. When both teams' changes
/// fail alone, nobody is blamed and the generation fails.
#[test]
fn a_failure_naming_no_document_is_the_changing_team_s() {
    const HUGE: &str = "{huge: true}";
    for g in [Granularity::WholeSet, Granularity::PerDocument] {
        let plugins = [Routes::configured(g)];
        let mut p = Pipeline::new("");
        p.run_holding(&plugins, &team_intent(&[("team-a", "a", GOOD), ("team-b", "b", GOOD)]), up_to(4)).unwrap();
        // team-a adds a route that breaks the call and another, team-b one route, at once.
        let both = team_intent(&[
            ("team-a", "a", GOOD),
            ("team-a", "a2", HUGE),
            ("team-a", "a3", GOOD),
            ("team-b", "b", GOOD),
            ("team-b", "b2", GOOD),
        ]);
        let t = p.run_holding(&plugins, &both, up_to(4)).unwrap();
        let held: Vec<&str> = t.held.keys().map(|k| k.as_ref()).collect();
        assert_eq!(held, ["Route/team-a/a2", "Route/team-a/a3"], "{g:?}: team-a's changes, together");
        let error = &t.held["Route/team-a/a2"].error;
        assert!(
            error.contains("memory cap")
                && error.contains("namespace \"team-a\": 2 documents, Route/team-a/a2, Route/team-a/a3, held together"),
            "{g:?}: {error}"
        );
        let served = t.snapshot.get(xdst_core::types::ROUTE).map(|s| s.len()).unwrap_or(0);
        assert!(served > 0, "{g:?}: team-b's edit applies");
        if g == Granularity::WholeSet {
            assert_eq!(routes(&t), ["team-a/a", "team-b/b", "team-b/b2"], "team-b's new route served");
        }
        // Both teams break it at once: nobody's changes alone are to blame; the generation fails.
        let mut p = Pipeline::new("");
        p.run_holding(&plugins, &team_intent(&[("team-a", "a", GOOD), ("team-b", "b", GOOD)]), up_to(4)).unwrap();
        let worse = team_intent(&[("team-a", "a", HUGE), ("team-b", "b", HUGE)]);
        assert!(p.run_holding(&plugins, &worse, up_to(4)).is_err(), "{g:?}");
    }
}

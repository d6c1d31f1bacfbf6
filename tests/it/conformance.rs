//! Issue 6, must-show 1: the cross-language conformance suite (`tests/conformance/cases`).
//!
//! Every port of the reference translator (C, JavaScript, Python, AssemblyScript, Go, Zig),
//! built from source with its own toolchain, must translate every case to exactly the
//! resources the Rust original does: the same (type, name) set and, for each resource, the
//! same bytes after the host's deterministic re-encoding. The `error-*` cases must fail at the
//! same document and field. A difference is reported naming the case, the language and the
//! resource, with a diff of the two resources as canonical YAML.
//!
//! The Rust plugin itself is checked against the committed expectations (`expected.yaml`,
//! `expected-error.yaml`), so the cases cannot drift from what it does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use xdst::cli::plugin_tool;
use xdst_core::intent::IntentSet;
use xdst_plugin::pipeline::{Configured, PipelineError, translate};
use xdst_plugin::{Failure, Limits, Plugin, Runtime, RuntimeConfig};
use xdst_tests::plugins;

fn cases_dir() -> PathBuf {
    xdst_tests::repo_root().join("tests/conformance/cases")
}

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // xdst's own default cache, so a port compiled here is not compiled again by the
        // `xdst serve` of the Envoy test (a Python component takes most of a minute).
        let cache = xdst_tests::cache_dir().join("plugins");
        Runtime::new(RuntimeConfig { cache_dir: Some(cache), fuel: false, ..Default::default() }).unwrap()
    })
}

fn load(path: &Path) -> anyhow::Result<Arc<Plugin>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Arc::new(runtime().load_any(&path.file_name().unwrap().to_string_lossy(), &bytes, Limits::default())?))
}

fn cases() -> anyhow::Result<Vec<(String, IntentSet)>> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir())?.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let work = tempfile::tempdir()?;
        std::fs::copy(dir.join("intent.yaml"), work.path().join("intent.yaml"))?;
        let (set, _) = xdst::generate::intent::read_intent(work.path())?;
        out.push((dir.file_name().unwrap().to_string_lossy().into_owned(), set));
    }
    anyhow::ensure!(out.len() >= 10, "only {} conformance cases", out.len());
    Ok(out)
}

/// What a plugin made of a case: resources by `Type name` (canonical bytes and YAML), or
/// the (document, field) of its error.
enum Outcome {
    Resources(BTreeMap<String, (Vec<u8>, String)>),
    Error(Option<String>, Option<String>, String),
}

fn run(plugin: &Arc<Plugin>, set: &IntentSet) -> Outcome {
    let configured = [Configured::new(plugin.clone(), "null")];
    match translate(&configured, set, "") {
        Ok(out) => {
            let mut map = BTreeMap::new();
            for (ty, resources) in out.snapshot.types() {
                for r in resources.resources() {
                    let yaml = pretty_json(&xdst::cli::translate::resource_json(r));
                    map.insert(format!("{} {}", plugin_tool::message_name(ty), r.name()), (r.body().to_vec(), yaml));
                }
            }
            Outcome::Resources(map)
        }
        Err(PipelineError::Plugin { error, .. }) => match error.failure {
            Failure::Reported { document, field, message } => Outcome::Error(document, field, message),
            other => Outcome::Error(None, None, format!("{other:?}")),
        },
        Err(e) => Outcome::Error(None, None, e.to_string()),
    }
}

/// JSON is YAML, so `plugin_tool::diff_resources` reads it; the tests crate has no YAML
/// dependency of its own.
fn pretty_json(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// The differences between the Rust plugin's outcome and a port's, one line per problem.
fn compare(case: &str, lang: &str, want: &Outcome, got: &Outcome) -> Vec<String> {
    let mut problems = Vec::new();
    match (want, got) {
        (Outcome::Resources(w), Outcome::Resources(g)) => {
            for (key, (bytes, yaml)) in w {
                match g.get(key) {
                    None => problems.push(format!("case {case}, {lang}: missing {key}")),
                    Some((b, y)) if b != bytes => {
                        let diff = plugin_tool::diff_resources(&format!("---\n{yaml}\n"), &format!("---\n{y}\n")).unwrap_or_else(|| {
                            format!("  the same canonical JSON, different bytes:\n    rust {bytes:02x?}\n    {lang} {b:02x?}\n")
                        });
                        problems.push(format!(
                            "case {case}, {lang}: {key} differs from the Rust plugin's (- rust, + {lang}):\n{diff}"
                        ));
                    }
                    Some(_) => {}
                }
            }
            for key in g.keys().filter(|k| !w.contains_key(*k)) {
                problems.push(format!("case {case}, {lang}: {key} is not produced by the Rust plugin"));
            }
        }
        (Outcome::Error(wd, wf, wm), Outcome::Error(gd, gf, gm)) => {
            if (wd, wf) != (gd, gf) {
                problems.push(format!(
                    "case {case}, {lang}: fails at {gd:?} field {gf:?} ({gm}); the Rust plugin at {wd:?} field {wf:?} ({wm})"
                ));
            }
        }
        (Outcome::Resources(_), Outcome::Error(d, f, m)) => problems
            .push(format!("case {case}, {lang}: fails ({d:?} field {f:?}: {m}) where the Rust plugin translates")),
        (Outcome::Error(d, f, m), Outcome::Resources(_)) => problems
            .push(format!("case {case}, {lang}: translates where the Rust plugin fails ({d:?} field {f:?}: {m})")),
    }
    problems
}

fn rust_outcomes() -> anyhow::Result<&'static Vec<(String, IntentSet, Outcome)>> {
    static OUT: OnceLock<Vec<(String, IntentSet, Outcome)>> = OnceLock::new();
    if let Some(o) = OUT.get() {
        return Ok(o);
    }
    let rust = load(&plugins::reference()?)?;
    let out = cases()?.into_iter().map(|(name, set)| {
        let o = run(&rust, &set);
        (name, set, o)
    });
    Ok(OUT.get_or_init(|| out.collect()))
}

fn conforms(lang: &str) -> anyhow::Result<()> {
    let wasm = plugins::port(lang)?;
    let port = load(&wasm)?;
    assert_eq!(port.info().name, format!("reference-{lang}"));
    assert_eq!(port.info().kinds, ["Service", "HttpGateway"]);
    let mut problems = Vec::new();
    let outcomes = rust_outcomes()?;
    for (case, set, want) in outcomes {
        problems.extend(compare(case, lang, want, &run(&port, set)));
    }
    assert!(problems.is_empty(), "{} differences between {lang} and Rust:\n{}", problems.len(), problems.join("\n"));
    eprintln!("[conformance] {lang}: {} cases identical to the Rust plugin ({})", outcomes.len(), port.abi());
    Ok(())
}

#[test]
fn c_conforms() -> anyhow::Result<()> {
    conforms("c")
}

#[test]
fn javascript_conforms() -> anyhow::Result<()> {
    conforms("js")
}

#[test]
fn python_conforms() -> anyhow::Result<()> {
    conforms("python")
}

#[test]
fn assemblyscript_conforms() -> anyhow::Result<()> {
    conforms("assemblyscript")
}

#[test]
fn go_conforms() -> anyhow::Result<()> {
    conforms("go")
}

#[test]
fn zig_conforms() -> anyhow::Result<()> {
    conforms("zig")
}

/// The committed expectations are what the Rust plugin does (through `xdst plugin test`, the
/// same code users run).
#[test]
fn the_rust_plugin_matches_the_committed_expectations() -> anyhow::Result<()> {
    let rust = load(&plugins::reference()?)?;
    let results = plugin_tool::test_with(rust, &cases_dir(), false)?;
    let failed: Vec<String> =
        results.iter().filter_map(|r| r.failure.as_ref().map(|f| format!("{}: {f}", r.case))).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}

/// The comparison can fail: a resource with one changed field is reported naming the case,
/// the language and the resource.
#[test]
fn a_difference_is_reported_naming_case_language_and_resource() {
    let resource = |timeout: &str| {
        let yaml = format!(
            "'@type': type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: web\nconnect_timeout: {timeout}\n"
        );
        Outcome::Resources(BTreeMap::from([("Cluster web".to_owned(), (timeout.as_bytes().to_vec(), yaml))]))
    };
    let problems = compare("service-options", "python", &resource("1s"), &resource("2s"));
    assert_eq!(problems.len(), 1);
    let p = &problems[0];
    assert!(p.starts_with("case service-options, python: Cluster web differs"), "{p}");
    assert!(p.contains("- connect_timeout: 1s") && p.contains("+ connect_timeout: 2s"), "{p}");
    let err = Outcome::Error(Some("Service/web".into()), Some("spec.port".into()), "bad".into());
    let other = Outcome::Error(Some("Service/web".into()), Some("spec.address".into()), "bad".into());
    assert!(
        compare("error-bad-port", "c", &err, &other)[0]
            .contains("fails at Some(\"Service/web\") field Some(\"spec.address\")")
    );
    assert!(compare("x", "js", &resource("1s"), &err)[0].contains("where the Rust plugin translates"));
}

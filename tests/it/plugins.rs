//! Issue 3, must-show 1 and 5: the reference plugin, built from source, against its golden
//! cases; and determinism of translation within a process and across processes.
//!
//! Golden cases live in `plugins/reference/golden/<case>/`: `intent.yaml` goes in; a case
//! whose name starts with `error-` must fail and its error is compared with
//! `expected-error.txt`, any other must succeed and its resources (as `xdst translate
//! --format yaml` prints them) are compared with `expected.yaml`. To re-bless after an
//! intended change, run
//!
//!     XDST_BLESS=1 cargo test -p xdst-tests --test it plugins::golden
//!
//! and review the diff of the expected files.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail, ensure};
use xdst_tests::plugins;

fn plugins_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("xdst-plugins-").tempdir()?;
    plugins::install(dir.path(), &plugins::reference()?, "reference.wasm", None)?;
    Ok(dir)
}

fn plugin_cache() -> PathBuf {
    xdst_tests::cache_dir().join("test-plugin-cache")
}

/// Error messages name the plugin's digest, which changes with every edit of the plugin:
/// golden files keep only its prefix.
fn normalise(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(i) = rest.find("sha256:") {
        out.push_str(&rest[..i + 7]);
        rest = &rest[i + 7..];
        let hex = rest.chars().take_while(|c| c.is_ascii_hexdigit()).count();
        out.push('…');
        rest = &rest[hex..];
    }
    out.push_str(rest);
    out
}

fn translate_case(intent: &Path, plugins: &Path) -> Result<String, String> {
    match xdst::cli::translate::run(intent, plugins, "", Some(plugin_cache())) {
        Ok((out, _, _)) => Ok(xdst::cli::translate::render_yaml(&out.snapshot)),
        Err(e) => Err(normalise(&format!("{e:#}"))),
    }
}

#[test]
fn golden_cases_of_the_reference_plugin() -> anyhow::Result<()> {
    let bless = std::env::var_os("XDST_BLESS").is_some();
    let plugins = plugins_dir()?;
    let root = xdst_tests::repo_root().join("plugins/reference/golden");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("intent.yaml").is_file())
        .collect();
    cases.sort();
    ensure!(cases.len() >= 6, "expected at least 6 golden cases in {}, found {}", root.display(), cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let intent = tempfile::tempdir()?;
        std::fs::copy(case.join("intent.yaml"), intent.path().join("intent.yaml"))?;
        let result = translate_case(intent.path(), plugins.path());
        let want_error = name.starts_with("error-");
        let (file, actual) = match (&result, want_error) {
            (Ok(text), false) => ("expected.yaml", text.clone()),
            (Err(e), true) => ("expected-error.txt", format!("{e}\n")),
            (Ok(_), true) => {
                failures.push(format!("{name}: expected an error, but translation succeeded"));
                continue;
            }
            (Err(e), false) => {
                failures.push(format!("{name}: translation failed: {e}"));
                continue;
            }
        };
        let path = case.join(file);
        if bless {
            std::fs::write(&path, &actual)?;
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{name}: {} differs (re-bless with XDST_BLESS=1 if intended)\n--- expected\n{expected}\n--- actual\n{actual}",
                path.display()
            ));
        }
    }
    if !failures.is_empty() {
        bail!("{} of {} golden cases failed:\n\n{}", failures.len(), cases.len(), failures.join("\n\n"));
    }
    Ok(())
}

/// Golden case errors name the document and the field, not just "invalid".
#[test]
fn golden_errors_name_the_document_and_field() -> anyhow::Result<()> {
    let root = xdst_tests::repo_root().join("plugins/reference/golden");
    let mut checked = 0;
    for entry in std::fs::read_dir(&root)? {
        let case = entry?.path();
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("error-") {
            continue;
        }
        let text = std::fs::read_to_string(case.join("expected-error.txt"))
            .with_context(|| format!("{name}: no expected-error.txt (run the golden test with XDST_BLESS=1)"))?;
        ensure!(text.contains("plugin \"reference\""), "{name}: the error does not name the plugin: {text}");
        ensure!(text.contains("intent.yaml#"), "{name}: the error does not name the file and document: {text}");
        ensure!(text.contains("field spec"), "{name}: the error does not name the field: {text}");
        checked += 1;
    }
    ensure!(checked >= 4, "expected at least 4 error cases, found {checked}");
    Ok(())
}

const DETERMINISM_INTENT: &str = "plugins/reference/golden";

/// Every golden intent at once, so the determinism checks cover every kind and feature.
fn all_intent() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let root = xdst_tests::repo_root().join(DETERMINISM_INTENT);
    for entry in std::fs::read_dir(&root)? {
        let case = entry?.path();
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("error-") || !case.join("intent.yaml").is_file() {
            continue;
        }
        std::fs::copy(case.join("intent.yaml"), dir.path().join(format!("{name}.yaml")))?;
    }
    Ok(dir)
}

#[test]
fn translating_twice_in_one_process_gives_identical_bytes() -> anyhow::Result<()> {
    let plugins = plugins_dir()?;
    let intent = all_intent()?;
    // Separate runtimes and a cold compile the second time: nothing may carry over.
    let cold = tempfile::tempdir()?;
    let (a, _, docs) = xdst::cli::translate::run(intent.path(), plugins.path(), "", Some(plugin_cache()))?;
    let (b, _, _) = xdst::cli::translate::run(intent.path(), plugins.path(), "", Some(cold.path().to_owned()))?;
    ensure!(
        docs >= 3 && a.snapshot.len() >= 8,
        "too little to compare: {docs} documents, {} resources",
        a.snapshot.len()
    );
    ensure!(a.snapshot.version() == b.snapshot.version(), "versions differ");
    let bytes = |s: &xdst_core::snapshot::Snapshot| -> Vec<(String, String, Vec<u8>)> {
        xdst::cli::translate::ordered(s)
            .into_iter()
            .map(|r| (r.type_url().to_string(), r.name().to_string(), r.delta_bytes().to_vec()))
            .collect()
    };
    ensure!(bytes(&a.snapshot) == bytes(&b.snapshot), "resource bytes differ between two translations");
    Ok(())
}

#[test]
fn translating_in_two_processes_gives_identical_bytes() -> anyhow::Result<()> {
    let bin = xdst_tests::server::binary()?;
    let plugins = plugins_dir()?;
    let intent = all_intent()?;
    let run = |cache: &Path, out: Option<&Path>| -> anyhow::Result<Vec<u8>> {
        let mut cmd = std::process::Command::new(&bin);
        cmd.arg("translate").arg("--intent").arg(intent.path()).arg("--plugins").arg(plugins.path());
        cmd.arg("--plugin-cache").arg(cache).args(["--format", "json"]);
        if let Some(o) = out {
            cmd.arg("--out-dir").arg(o);
        }
        let output = cmd.output()?;
        ensure!(output.status.success(), "xdst translate failed: {}", String::from_utf8_lossy(&output.stderr));
        Ok(output.stdout)
    };
    let (c1, c2) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let first = run(c1.path(), None)?;
    let second = run(c2.path(), None)?;
    ensure!(!first.is_empty() && first == second, "two processes printed different resources");
    // And the in-process translation prints the same.
    let (inproc, _, _) = xdst::cli::translate::run(intent.path(), plugins.path(), "", Some(plugin_cache()))?;
    ensure!(
        xdst::cli::translate::render_json(&inproc.snapshot).as_bytes() == first.as_slice(),
        "in-process output differs"
    );

    // Filesystem-subscription files: identical too.
    let (o1, o2) = (tempfile::tempdir()?, tempfile::tempdir()?);
    run(c1.path(), Some(o1.path()))?;
    run(c2.path(), Some(o2.path()))?;
    let mut files = vec!["cds.json".to_owned(), "lds.json".to_owned()];
    for sub in ["eds", "rds"] {
        let mut names: Vec<String> = std::fs::read_dir(o1.path().join(sub))?
            .map(|e| Ok(format!("{sub}/{}", e?.file_name().to_string_lossy())))
            .collect::<anyhow::Result<_>>()?;
        ensure!(!names.is_empty(), "no files in {sub}/");
        names.sort();
        files.extend(names);
    }
    for f in &files {
        let a = std::fs::read_to_string(o1.path().join(f))?;
        let b = std::fs::read_to_string(o2.path().join(f))?;
        // The files point config sources at their own directory; compare without it.
        let a = a.replace(&o1.path().canonicalize()?.display().to_string(), "DIR");
        let b = b.replace(&o2.path().canonicalize()?.display().to_string(), "DIR");
        ensure!(a == b, "{f} differs between two processes");
        ensure!(a.contains("version_info") && a.contains("type_url"), "{f} is not a DiscoveryResponse: {a}");
    }
    Ok(())
}

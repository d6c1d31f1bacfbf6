//! Issue 6, must-show 2, and issue 21 (Go, Zig; a new user in seven languages): for each
//! language, `xdst plugin new`, then `xdst plugin build`, then `xdst plugin test` succeed in a
//! fresh directory outside the repository with an **empty toolchain directory**, as for a new
//! user (the real binary, the real toolchains, installed by the recipe; the time from `new` to
//! a passing test is printed, and the README quotes it); and `inspect` says what was built.
//! The bad paths too: a changed expectation fails with a diff naming the case and the
//! resource, `--bless` rewrites it, a bad name is refused, and a build error is reported as
//! the language's own error.

use std::path::Path;
use std::process::{Command, Output};

use anyhow::ensure;
use serde_json::Value;

fn xdst(dir: &Path, args: &[&str]) -> anyhow::Result<Output> {
    xdst_with(dir, args, None)
}

/// Runs xdst in `dir`; `toolchains` is its `XDST_TOOLCHAINS` (else the shared default, and
/// this process's environment).
fn xdst_with(dir: &Path, args: &[&str], toolchains: Option<&Path>) -> anyhow::Result<Output> {
    let mut command = Command::new(xdst_tests::server::binary()?);
    command.args(args).current_dir(dir).env("RUST_LOG", "warn").env("RUST_BACKTRACE", "0");
    if let Some(t) = toolchains {
        // A new user's: no shared cargo target directory either (this test's would be warm).
        command.env("XDST_TOOLCHAINS", t).env_remove("CARGO_TARGET_DIR");
    }
    Ok(command.output()?)
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// new -> build -> test as a new user (outside the repository, an empty toolchain directory),
/// timed; then the bad paths and `inspect`. Returns `inspect --json` and the directory holding
/// the plugin (`team-<lang>`).
fn scaffold_build_test(lang: &str) -> anyhow::Result<(Value, tempfile::TempDir)> {
    let dir = tempfile::Builder::new().prefix(&format!("xdst-new-{lang}-")).tempdir()?;
    let toolchains = tempfile::Builder::new().prefix(&format!("xdst-toolchains-{lang}-")).tempdir()?;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().canonicalize()?;
    ensure!(!dir.path().canonicalize()?.starts_with(&repo), "{} is inside the repository", dir.path().display());
    let name = format!("team-{lang}");
    let started = std::time::Instant::now();
    let o = xdst(dir.path(), &["plugin", "new", "--lang", lang, &name])?;
    ensure!(o.status.success(), "new --lang {lang}: {}", text(&o));
    ensure!(dir.path().join(&name).join("xdst-plugin.yaml").exists(), "no xdst-plugin.yaml");

    let o = xdst_with(dir.path(), &["plugin", "build", &name], Some(toolchains.path()))?;
    ensure!(o.status.success(), "build ({lang}): {}", text(&o));
    ensure!(text(&o).contains("==> "), "build ({lang}) shows no progress: {}", text(&o));
    let built = started.elapsed().as_secs_f64();
    // The recipe set its toolchain up in the empty directory (Rust's is rustup's target alone).
    ensure!(
        lang == "rust" || toolchains.path().join(lang).is_dir(),
        "build ({lang}) left {} empty: {}",
        toolchains.path().display(),
        text(&o)
    );
    let wasm = format!("{name}/build/{name}.wasm");
    ensure!(dir.path().join(&wasm).exists(), "build ({lang}) wrote no {wasm}");

    let cases = format!("{name}/cases");
    let o = xdst(dir.path(), &["plugin", "test", &wasm, "--cases", &cases])?;
    ensure!(o.status.success() && text(&o).contains("1 passed, 0 failed"), "test ({lang}): {}", text(&o));
    eprintln!(
        "[new user] {lang}: plugin new, build (empty toolchain directory: installs included) and test pass in {:.1}s (built at {built:.1}s)",
        started.elapsed().as_secs_f64()
    );
    drop(toolchains);

    // Break the expectation: the test fails, naming the case and the resource, with the line.
    let expected = dir.path().join(&cases).join("basic/expected.yaml");
    let good = std::fs::read_to_string(&expected)?;
    ensure!(good.contains("port_value: 8080"), "{lang} template case: {good}");
    std::fs::write(&expected, good.replace("port_value: 8080", "port_value: 9090"))?;
    let o = xdst(dir.path(), &["plugin", "test", &wasm, "--cases", &cases])?;
    let t = text(&o);
    ensure!(!o.status.success(), "a wrong expectation passed ({lang}): {t}");
    ensure!(
        t.contains("FAILED  basic")
            && t.contains("Cluster ")
            && t.contains(" differs (- expected, + actual)")
            && t.contains("- ")
            && t.contains("port_value: 9090")
            && t.contains("+ "),
        "{lang}: {t}"
    );
    // --bless rewrites it, and the test passes again.
    let o = xdst(dir.path(), &["plugin", "test", &wasm, "--cases", &cases, "--bless"])?;
    ensure!(o.status.success(), "bless ({lang}): {}", text(&o));
    ensure!(std::fs::read_to_string(&expected)? == good, "bless did not restore the expectation ({lang})");

    // An error case: a missing port names the document and field; bless writes it.
    let bad = dir.path().join(&cases).join("missing-port");
    std::fs::create_dir_all(&bad)?;
    let kind: String = name.split('-').map(|p| p[..1].to_uppercase() + &p[1..]).collect();
    std::fs::write(
        bad.join("intent.yaml"),
        format!("kind: {kind}\nmetadata: {{name: web}}\nspec: {{address: 10.0.0.1}}\n"),
    )?;
    let o = xdst(dir.path(), &["plugin", "test", &wasm, "--cases", &cases, "--bless"])?;
    ensure!(o.status.success(), "bless an error case ({lang}): {}", text(&o));
    let err = std::fs::read_to_string(bad.join("expected-error.yaml"))?;
    ensure!(err.contains(&format!("document: {kind}/web")) && err.contains("field: spec.port"), "{lang}: {err}");
    let o = xdst(dir.path(), &["plugin", "test", &wasm, "--cases", &cases])?;
    ensure!(o.status.success() && text(&o).contains("2 passed, 0 failed"), "{lang}: {}", text(&o));

    let o = xdst(dir.path(), &["plugin", "inspect", &wasm, "--json"])?;
    ensure!(o.status.success(), "inspect ({lang}): {}", text(&o));
    let info: Value = serde_json::from_slice(&o.stdout)?;
    ensure!(
        info["name"] == name.as_str() && info["kinds"] == serde_json::json!([kind]) && info["phase"] == "translate",
        "{lang}: {info:#}"
    );
    ensure!(
        info["sha256"].as_str().is_some_and(|s| s.len() == 64) && info["size"].as_u64().is_some_and(|s| s > 0),
        "{info:#}"
    );
    Ok((info, dir))
}

#[test]
fn rust() -> anyhow::Result<()> {
    let (info, _) = scaffold_build_test("rust")?;
    assert_eq!(info["module"], "component");
    assert!(
        info["imports"].as_array().unwrap().iter().all(|i| i.as_str().unwrap().starts_with("xdst:plugin/")),
        "{info:#}"
    );
    Ok(())
}

#[test]
fn c() -> anyhow::Result<()> {
    let (info, _) = scaffold_build_test("c")?;
    assert_eq!(info["module"], "component");
    Ok(())
}

#[test]
fn javascript() -> anyhow::Result<()> {
    let (info, _) = scaffold_build_test("js")?;
    assert_eq!(info["module"], "component");
    Ok(())
}

#[test]
fn python() -> anyhow::Result<()> {
    let (info, _) = scaffold_build_test("python")?;
    assert_eq!(info["module"], "component");
    Ok(())
}

#[test]
fn assemblyscript() -> anyhow::Result<()> {
    let (info, _) = scaffold_build_test("assemblyscript")?;
    assert_eq!(info["module"], "core module (core-module ABI)");
    // The core-module ABI's only import.
    assert_eq!(info["imports"], serde_json::json!(["xdst.log"]));
    Ok(())
}

#[test]
fn go() -> anyhow::Result<()> {
    let (info, dir) = scaffold_build_test("go")?;
    assert_eq!(info["module"], "core module (core-module ABI)");
    // Go's wasip1 runtime imports WASI preview 1, and the SDK xdst.log; nothing else.
    let imports: Vec<&str> = info["imports"].as_array().unwrap().iter().map(|i| i.as_str().unwrap()).collect();
    assert!(imports.iter().any(|i| i.starts_with("wasi_snapshot_preview1.")), "{imports:?}");
    assert!(imports.iter().all(|i| *i == "xdst.log" || i.starts_with("wasi_snapshot_preview1.")), "{imports:?}");
    // The SDK's Decode names the field of a document of the wrong shape (encoding/json's type
    // error path; the unknown field found in the document by the struct's fields).
    decode_errors_name_the_field(
        dir.path(),
        "go",
        &[
            ("port-type", "{address: 10.0.0.1, port: x}", "spec.port", "invalid type: string, expected an integer"),
            ("typo", "{adress: 10.0.0.1, port: 8080}", "spec.adress", "unknown field `adress`"),
        ],
    )?;
    Ok(())
}

/// For the `team-<lang>` plugin in `dir`: each (case, spec, field, message) is blessed as an
/// error at document `Team<Lang>/web`, that field, with a message holding that text.
fn decode_errors_name_the_field(dir: &Path, lang: &str, cases: &[(&str, &str, &str, &str)]) -> anyhow::Result<()> {
    let name = format!("team-{lang}");
    let kind = format!("Team{}{}", lang[..1].to_uppercase(), &lang[1..]);
    let (wasm, dir_cases) = (format!("{name}/build/{name}.wasm"), format!("{name}/cases"));
    for (case, spec, field, message) in cases {
        let at = dir.join(&dir_cases).join(case);
        std::fs::create_dir_all(&at)?;
        std::fs::write(at.join("intent.yaml"), format!("kind: {kind}\nmetadata: {{name: web}}\nspec: {spec}\n"))?;
        let o = xdst(dir, &["plugin", "test", &wasm, "--cases", &dir_cases, "--bless"])?;
        ensure!(o.status.success(), "{}", text(&o));
        let err = std::fs::read_to_string(at.join("expected-error.yaml"))?;
        ensure!(
            err.contains(&format!("document: {kind}/web"))
                && err.contains(&format!("field: {field}"))
                && err.contains(message),
            "{lang}, {case}: {err}"
        );
    }
    Ok(())
}

#[test]
fn zig() -> anyhow::Result<()> {
    let (info, dir) = scaffold_build_test("zig")?;
    assert_eq!(info["module"], "core module (core-module ABI)");
    // wasm32-freestanding: no WASI at all, only the SDK's log.
    assert_eq!(info["imports"], serde_json::json!(["xdst.log"]));
    // The SDK's decoder names the field of a document of the wrong shape.
    decode_errors_name_the_field(
        dir.path(),
        "zig",
        &[
            ("port-type", "{address: 10.0.0.1, port: x}", "spec.port", "invalid type: string \"x\""),
            ("typo", "{adress: 10.0.0.1, port: 8080}", "spec.adress", "unknown field `adress`"),
        ],
    )?;
    Ok(())
}

#[test]
fn bad_names_and_existing_directories_are_refused() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let o = xdst(dir.path(), &["plugin", "new", "--lang", "rust", "Team_Gateway"])?;
    ensure!(!o.status.success() && text(&o).contains("lowercase letters, digits and dashes"), "{}", text(&o));
    std::fs::create_dir(dir.path().join("taken"))?;
    std::fs::write(dir.path().join("taken/file"), "x")?;
    let o = xdst(dir.path(), &["plugin", "new", "--lang", "rust", "taken"])?;
    ensure!(!o.status.success() && text(&o).contains("already exists and is not empty"), "{}", text(&o));
    let o = xdst(dir.path(), &["plugin", "new", "--lang", "cobol", "x"])?;
    ensure!(
        !o.status.success() && text(&o).contains("possible values: rust, c, js, python, assemblyscript, go, zig"),
        "{}",
        text(&o)
    );
    let o = xdst(dir.path(), &["plugin", "build", "nowhere"])?;
    ensure!(!o.status.success() && text(&o).contains("xdst-plugin.yaml"), "{}", text(&o));
    Ok(())
}

#[test]
fn a_build_error_is_the_language_s_own_message() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let o = xdst(dir.path(), &["plugin", "new", "--lang", "assemblyscript", "broken"])?;
    ensure!(o.status.success(), "{}", text(&o));
    let src = dir.path().join("broken/src/index.ts");
    let code = std::fs::read_to_string(&src)?;
    std::fs::write(&src, format!("{code}\nlet oops: i32 = \"not a number\";\n"))?;
    let o = xdst(dir.path(), &["plugin", "build", "broken"])?;
    let t = text(&o);
    ensure!(!o.status.success() && t.contains("the assemblyscript build of broken failed"), "{t}");
    ensure!(
        t.contains("not a number") || t.contains("TS2322") || t.contains("ERROR"),
        "the compiler's message is not shown: {t}"
    );
    Ok(())
}

//! Plugins built from source for the tests: the reference translator and the adversarial
//! plugin, compiled for `wasm32-unknown-unknown` (release) once per test process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use xdst_core::files::write_atomic;

use anyhow::{Context as _, bail};

/// Builds `package` for wasm32 and returns the core module's path. The host wraps a core
/// module into a component itself, so this file is what users copy into `--plugins`.
pub fn build(package: &str) -> anyhow::Result<PathBuf> {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap();
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(p) = built.get(package) {
        return Ok(p.clone());
    }
    let root = crate::repo_root();
    let status = crate::cargo()
        .args(["build", "-q", "--release", "--target", "wasm32-unknown-unknown", "-p", package])
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!(
            "building plugin {package} failed (is the wasm32-unknown-unknown target installed? tests/setup.sh adds it)"
        );
    }
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join("target"));
    let path = target.join("wasm32-unknown-unknown/release").join(format!("{}.wasm", package.replace('-', "_")));
    if !path.exists() {
        bail!("{} was not produced", path.display());
    }
    built.insert(package.to_owned(), path.clone());
    Ok(path)
}

/// The reference translator (`plugins/reference`).
pub fn reference() -> anyhow::Result<PathBuf> {
    build("xdst-plugin-reference")
}

/// The Gateway API translator (`plugins/gateway-api`).
pub fn gateway_api() -> anyhow::Result<PathBuf> {
    build("xdst-plugin-gateway-api")
}

/// The adversarial test plugin (`tests/plugins/adversarial`): its `config` picks how it
/// misbehaves.
pub fn adversary() -> anyhow::Result<PathBuf> {
    build("xdst-test-plugin-adversarial")
}

/// The breaker test plugin (`tests/plugins/breaker`, phase `patch`): its `config` names one
/// way to break the translate plugins' output, to show a conformance check catches it.
pub fn breaker() -> anyhow::Result<PathBuf> {
    build("xdst-test-plugin-breaker")
}

/// The incremental test plugin (`tests/plugins/incremental`, contract 0.4.0): `Counted`
/// documents to clusters, through changes calls; `{"stale": true}` forgets removals.
pub fn incremental() -> anyhow::Result<PathBuf> {
    build("xdst-test-plugin-incremental")
}

/// The swap test plugin (`tests/plugins/swap`): `Split` documents routed by a weight table
/// in its data section (see [`swap_variant`]).
pub fn swap() -> anyhow::Result<PathBuf> {
    build("xdst-test-plugin-swap")
}

/// [`swap_variant`] written to `path`; returns `path`.
pub fn write_swap_variant(wasm: &[u8], weights: [u16; 6], path: PathBuf) -> anyhow::Result<PathBuf> {
    std::fs::write(&path, swap_variant(wasm, weights)?)?;
    Ok(path)
}

/// The swap plugin's bytes with its weight table for `u0`..`u5` replaced: a distinct plugin
/// (its own digest) that routes differently.
pub fn swap_variant(wasm: &[u8], weights: [u16; 6]) -> anyhow::Result<Vec<u8>> {
    swap_variant_slow(wasm, weights, 0)
}

/// The most [`swap_variant_slow`] can spin: the table has five digits for it.
pub const SWAP_MAX_SPIN: u32 = 99_999;

/// [`swap_variant`] that also spins `spin` million rounds per translation (a slow version);
/// at most [`SWAP_MAX_SPIN`]. How long a round takes depends on the machine: a test that needs
/// a slow version measures it (see `tests/it/plugin_swaps.rs`).
pub fn swap_variant_slow(wasm: &[u8], weights: [u16; 6], spin: u32) -> anyhow::Result<Vec<u8>> {
    const MARKER: &[u8] = b"XDST-SWAP:";
    if spin > SWAP_MAX_SPIN {
        bail!("the swap plugin spins at most {SWAP_MAX_SPIN} million rounds, not {spin}");
    }
    let at = wasm.windows(MARKER.len()).position(|w| w == MARKER).context("the swap plugin has no XDST-SWAP: table")?;
    let mut digits: String = weights.iter().map(|w| format!("{:03}", w.min(&999))).collect();
    digits.push_str(&format!("{spin:05}"));
    let mut out = wasm.to_vec();
    out[at + MARKER.len()..at + MARKER.len() + digits.len()].copy_from_slice(digits.as_bytes());
    Ok(out)
}

/// Copies a plugin into `dir` as `file` (`NAME.wasm`), with `settings` (YAML) beside it.
pub fn install(dir: &Path, wasm: &Path, file: &str, settings: Option<&str>) -> anyhow::Result<()> {
    let dest = dir.join(file);
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    if let Some(s) = settings {
        // Atomically: a generation that read a half-written file would fail for the wrong
        // reason (a plugin run with no configuration).
        write_atomic(&dest.with_extension("yaml"), s)?;
    }
    write_atomic(&dest, bytes)?;
    Ok(())
}

/// The languages the reference translator is ported to (`plugins/reference-<lang>`), beside
/// the Rust original.
pub const PORTS: [&str; 6] = ["c", "js", "python", "assemblyscript", "go", "zig"];

/// Builds the port of the reference translator to `lang` with its own build script (which
/// installs the language's toolchain under ~/.cache/xdst/toolchains when missing), once per
/// test process, and returns the plugin file.
pub fn port(lang: &str) -> anyhow::Result<PathBuf> {
    build_script(&format!("reference-{lang}"))
}

/// The route-policy patch plugin (`plugins/route-policy-js`, JavaScript).
pub fn route_policy() -> anyhow::Result<PathBuf> {
    build_script("route-policy-js")
}

/// The incremental test plugin in JavaScript (`tests/plugins/incremental-js`, contract 0.4.0).
pub fn incremental_js() -> anyhow::Result<PathBuf> {
    build_script("../tests/plugins/incremental-js")
}

/// The Go probe (`tests/plugins/go-probe`): reports what it could read of files, environment,
/// clock and random bytes.
pub fn go_probe() -> anyhow::Result<PathBuf> {
    build_script("../tests/plugins/go-probe")
}

/// Builds `plugins/<dir>` with its `build.sh`, once per test process.
fn build_script(dir: &str) -> anyhow::Result<PathBuf> {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    if let Some(p) = BUILT.lock().unwrap().get_or_insert_with(HashMap::new).get(dir) {
        return Ok(p.clone());
    }
    let root = crate::repo_root();
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join("target"));
    let file = Path::new(dir).file_name().map_or_else(|| dir.to_owned(), |f| f.to_string_lossy().into_owned());
    let out = target.join("xdst-ports").join(format!("{file}.wasm"));
    let script = root.join(format!("plugins/{dir}/build.sh"));
    let started = std::time::Instant::now();
    let status = std::process::Command::new("bash")
        .arg(&script)
        .arg(&out)
        .current_dir(&root)
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!("{} failed ({status}); its output is above", script.display());
    }
    if !out.exists() {
        bail!("{} succeeded but wrote no {}", script.display(), out.display());
    }
    eprintln!("[plugins] built {dir} in {:.1}s", started.elapsed().as_secs_f64());
    BUILT.lock().unwrap().get_or_insert_with(HashMap::new).insert(dir.to_owned(), out.clone());
    Ok(out)
}

/// A core-module plugin (`tests/plugins/wat/waiter-core.wat`) named `name`, claiming `kind`,
/// whose `xdst_translate` runs `wait` (WAT: `(call $sleep_forever)`, `(call $sock_accept_loop)`,
/// ..., or nothing) and returns no resources.
pub fn waiter_core(name: &str, kind: &str, wait: &str) -> anyhow::Result<Vec<u8>> {
    let describe = format!(
        r#"{{"name": "{name}", "version": "0.1.0", "kinds": ["{kind}"], "phase": "translate", "granularity": "whole-set"}}"#
    );
    let wat = include_str!("../plugins/wat/waiter-core.wat")
        .replace("@DESCRIBE_LEN@", &describe.len().to_string())
        .replace("@DESCRIBE@", &describe.replace('"', "\\\""))
        .replace("@WAIT@", wait);
    Ok(wat::parse_str(wat)?)
}

/// A component of the `xdst:plugin@0.1.0` world (`tests/plugins/wat/waiter-component.wat`)
/// named `name`, claiming `kind`, whose `translate` runs `wait` (WAT: `(call $block_forever)`,
/// `(call $poll_30s)`, or nothing) through `wasi:io/poll` and returns no resources.
pub fn waiter_component(name: &str, kind: &str, wait: &str) -> anyhow::Result<Vec<u8>> {
    let wat = include_str!("../plugins/wat/waiter-component.wat")
        .replace("@NAME_LEN@", &name.len().to_string())
        .replace("@NAME@", name)
        .replace("@KIND_LEN@", &kind.len().to_string())
        .replace("@KIND@", kind)
        .replace("@WAIT@", wait);
    Ok(wat::parse_str(wat)?)
}

/// Writes plugin `bytes` into `dir` as `file`, with `settings` (its `NAME.yaml`) first, each
/// atomically, as [`install`] does for a built plugin.
pub fn install_bytes(dir: &Path, file: &str, bytes: &[u8], settings: Option<&str>) -> anyhow::Result<()> {
    let dest = dir.join(file);
    if let Some(s) = settings {
        write_atomic(&dest.with_extension("yaml"), s)?;
    }
    write_atomic(&dest, bytes)?;
    Ok(())
}

//! Issue 6, must-show 5: what each language costs the host.
//!
//! For the Rust reference translator and each port (C, JavaScript, Python, AssemblyScript, Go),
//! built from source:
//! - **admission**: compiling the plugin (Cranelift, no cache) and describing it, as xdst
//!   does when a new digest arrives (median of `--compiles` runs);
//! - **per call**: one sandboxed call (a fresh instance + `translate`) per conformance case
//!   (`tests/conformance/cases`, the translating ones), repeated `--rounds` times: the median
//!   and p99 of one call, and the mean per case.
//!
//!     cargo run --release -p xdst-tests --bin xdst-plugin-bench [-- --rounds 200 --compiles 3]
//!
//! Prints a Markdown table (the one in docs/PERFORMANCE.md).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use xdst_plugin::pipeline::{Configured, translate};
use xdst_plugin::{Limits, Plugin, Runtime, RuntimeConfig};
use xdst_tests::plugins;

#[derive(Parser)]
struct Args {
    /// Calls per case per language.
    #[arg(long, default_value_t = 200)]
    rounds: usize,
    /// Compilations per language (the median is reported).
    #[arg(long, default_value_t = 3)]
    compiles: usize,
    /// Only these languages (rust, c, js, python, assemblyscript, go).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = xdst_tests::repo_root();
    let mut cases = Vec::new();
    let mut dirs: Vec<_> =
        std::fs::read_dir(root.join("tests/conformance/cases"))?.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs.iter().filter(|d| d.join("expected.yaml").exists()) {
        let work = tempfile::tempdir()?;
        std::fs::copy(dir.join("intent.yaml"), work.path().join("intent.yaml"))?;
        cases.push(xdst::intent::read_intent(work.path())?.0);
    }
    let docs: usize = cases.iter().map(|c| c.len()).sum();
    let mut langs = vec!["rust"];
    langs.extend(plugins::PORTS);
    langs.retain(|l| args.only.is_empty() || args.only.iter().any(|o| o == l));
    let mut rows = Vec::new();
    for lang in langs {
        let path = if lang == "rust" { plugins::reference()? } else { plugins::port(lang)? };
        let bytes = std::fs::read(&path)?;
        let (compile, plugin) = admission(&path, &bytes, args.compiles)?;
        let plugin = Arc::new(plugin);
        let configured = [Configured::new(plugin.clone(), "null")];
        // Warm up, then time every call.
        for set in &cases {
            translate(&configured, set, "").map_err(|e| anyhow::anyhow!("{lang}: {e}"))?;
        }
        let mut calls = Vec::with_capacity(args.rounds * cases.len());
        for _ in 0..args.rounds {
            for set in &cases {
                let t = Instant::now();
                // A fresh pipeline each time: no result is reused, the plugin is called.
                translate(&configured, set, "").unwrap();
                calls.push(t.elapsed());
            }
        }
        calls.sort();
        let pct = |p: f64| calls[((calls.len() - 1) as f64 * p) as usize];
        let mean = calls.iter().sum::<Duration>() / calls.len() as u32;
        eprintln!("{lang}: compile {compile:?}, call p50 {:?}", pct(0.5));
        rows.push(format!(
            "| {lang} | {} | {} | {} | {} | {} | {} |",
            plugin.abi(),
            size(bytes.len()),
            ms(compile),
            us(pct(0.5)),
            us(pct(0.99)),
            us(mean),
        ));
    }
    println!(
        "{} translating cases ({docs} documents), {} rounds; one call = a fresh instance + translate + the host's decoding and re-encoding of the result.\n",
        cases.len(),
        args.rounds
    );
    println!("| language | module | size | compile at admission | call p50 | call p99 | call mean |");
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    Ok(())
}

/// Compiles (no cache) and describes `compiles` times; the median time and the last plugin.
fn admission(path: &Path, bytes: &[u8], compiles: usize) -> anyhow::Result<(Duration, Plugin)> {
    let runtime = Runtime::new(RuntimeConfig { cache_dir: None, fuel: false })?;
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..compiles.max(1) {
        let t = Instant::now();
        let p = runtime.load_any(&path.file_name().unwrap().to_string_lossy(), bytes, Limits::default())?;
        times.push(t.elapsed());
        last = Some(p);
    }
    times.sort();
    Ok((times[times.len() / 2], last.unwrap()))
}

fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

fn ms(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{:.0} ms", d.as_secs_f64() * 1e3)
    }
}

fn us(d: Duration) -> String {
    if d >= Duration::from_millis(1) {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.0} µs", d.as_secs_f64() * 1e6)
    }
}

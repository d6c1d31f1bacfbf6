//! Issue 6, must-show 5: what each language costs the host.
//!
//! For the Rust reference translator and each port (C, JavaScript, Python, AssemblyScript, Go,
//! Zig), built from source:
//! - **admission**: compiling the plugin (Cranelift, no cache) and describing it, as xdst
//!   does when a new digest arrives (median of `--compiles` runs);
//! - **per call**: one sandboxed call (a fresh instance + `translate`) per conformance case
//!   (`tests/conformance/cases`, the translating ones), repeated `--rounds` times: the median
//!   and p99 of one call, and the mean per case;
//! - **N services**: a full translation of `--services` `Service` documents (two endpoints
//!   each: a Cluster and a ClusterLoadAssignment per service) through the pipeline, as xdst
//!   does at start: one call holding every document, then the host's decoding, canonical
//!   encoding and consistency check (median of `--service-runs`).
//!
//!     cargo run --release -p xdst-tests --bin xdst-plugin-bench [-- --rounds 200 --compiles 3 --services 10000]
//!
//! Prints a Markdown table (the one in docs/PERFORMANCE.md).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use xdst_core::intent::{IntentSet, parse_file};
use xdst_plugin::pipeline::{Configured, Pipeline, translate};
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
    /// Only these languages (rust, c, js, python, assemblyscript, go, zig).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Services in the full translation (0: leave it out).
    #[arg(long, default_value_t = 10_000)]
    services: usize,
    /// Full translations of the services per language (the median is reported).
    #[arg(long, default_value_t = 3)]
    service_runs: usize,
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
        cases.push(xdst::generate::intent::read_intent(work.path())?.0);
    }
    let docs: usize = cases.iter().map(|c| c.len()).sum();
    let services = services(args.services)?;
    let mut langs = vec!["rust"];
    langs.extend(plugins::PORTS);
    langs.retain(|l| args.only.is_empty() || args.only.iter().any(|o| o == l));
    let mut rows = Vec::new();
    let mut resources_seen = None;
    let mut langs_done = Vec::new();
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
        let full = match &services {
            Some(set) => {
                let (time, resources) = translate_all(&path, &bytes, set, args.service_runs)
                    .map_err(|e| anyhow::anyhow!("{lang}, {} services: {e}", args.services))?;
                eprintln!("{lang}: {} services in {time:?} ({resources} resources)", args.services);
                if *resources_seen.get_or_insert(resources) != resources {
                    anyhow::bail!(
                        "{lang} made {resources} resources of the services, {} did not",
                        langs_done.join(", ")
                    );
                }
                ms(time)
            }
            None => "-".into(),
        };
        rows.push(format!(
            "| {lang} | {} | {} | {} | {} | {} | {} | {full} |",
            plugin.abi(),
            size(bytes.len()),
            ms(compile),
            us(pct(0.5)),
            us(pct(0.99)),
            us(mean),
        ));
        langs_done.push(lang);
    }
    println!(
        "{} translating cases ({docs} documents), {} rounds; one call = a fresh instance + translate + the host's decoding and re-encoding of the result.\n",
        cases.len(),
        args.rounds
    );
    println!(
        "| language | module | size | compile at admission | call p50 | call p99 | call mean | {} services, full translation |",
        args.services
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    Ok(())
}

/// `n` Services with two endpoints each (None for 0).
fn services(n: usize) -> anyhow::Result<Option<IntentSet>> {
    if n == 0 {
        return Ok(None);
    }
    let mut text = String::new();
    for i in 0..n {
        let (a, b) = ((i / 250) % 250, i % 250);
        text.push_str(&format!(
            "---\nkind: Service\nmetadata: {{name: svc-{i}}}\nspec:\n  connectTimeout: 1s\n  endpoints:\n  - {{address: 10.{a}.{b}.1, port: 8080}}\n  - {{address: 10.{a}.{b}.2, port: 8080}}\n"
        ));
    }
    let mut set = IntentSet::default();
    for d in parse_file("services.yaml", &text)? {
        set.add(d)?;
    }
    Ok(Some(set))
}

/// The median time of `runs` full translations of `set` (a fresh pipeline each, limits wide
/// enough for one call with every document), and the number of resources.
fn translate_all(path: &Path, bytes: &[u8], set: &IntentSet, runs: usize) -> anyhow::Result<(Duration, usize)> {
    let runtime = Runtime::new(RuntimeConfig { cache_dir: None, fuel: false, ..Default::default() })?;
    let limits = Limits {
        deadline: Duration::from_secs(120),
        memory_bytes: 4 << 30,
        output_bytes: 1 << 30,
        ..Limits::default()
    };
    let plugin = runtime.load_any(&path.file_name().unwrap().to_string_lossy(), bytes, limits)?;
    let configured = [Configured::new(Arc::new(plugin), "null")];
    let mut times = Vec::new();
    let mut resources = 0;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let out = Pipeline::new("").run(&configured, set).map_err(|e| anyhow::anyhow!("{e}"))?;
        xdst_core::consistency::check(&out.snapshot).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        times.push(t.elapsed());
        resources = out.snapshot.len();
    }
    times.sort();
    Ok((times[times.len() / 2], resources))
}

/// Compiles (no cache) and describes `compiles` times; the median time and the last plugin.
fn admission(path: &Path, bytes: &[u8], compiles: usize) -> anyhow::Result<(Duration, Plugin)> {
    let runtime = Runtime::new(RuntimeConfig { cache_dir: None, fuel: false, ..Default::default() })?;
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

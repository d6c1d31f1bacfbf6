//! Issue 3, must-show 6: N services (a `Service` and a `GrpcService` each: four resources per
//! service) through the reference plugin: a full translation (plugin, decoding, canonical
//! encoding, snapshot, consistency check), then single-service changes through the
//! incremental pipeline. The same translator compiled natively is the baseline.
//!
//!     tests/bench/translate.sh [--services 10000] [--runs 5] [--changes 20]
//!
//! (the script builds the plugin for wasm32 and this binary in release, then runs it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use xdst_core::intent::{IntentSet, parse_file};
use xdst_plugin::pipeline::{Configured, Pipeline, Translate};
use xdst_plugin::{Limits, PluginError, Runtime, RuntimeConfig, wit};

/// The reference translator compiled into this binary, behind the host's `Translate` trait.
struct Native {
    info: wit::PluginInfo,
}

impl Native {
    fn new() -> Self {
        use xdst_guest::Translator;
        let i = xdst_plugin_reference::Reference::describe();
        Native {
            info: wit::PluginInfo {
                name: i.name,
                version: i.version,
                kinds: i.kinds,
                phase: wit::Phase::Translate,
                granularity: match i.granularity {
                    xdst_guest::Granularity::PerDocument => wit::Granularity::PerDocument,
                    xdst_guest::Granularity::WholeSet => wit::Granularity::WholeSet,
                },
            },
        }
    }
}

impl Translate for Native {
    fn info(&self) -> &wit::PluginInfo {
        &self.info
    }
    fn digest(&self) -> &str {
        "native"
    }
    fn translate(&self, r: &wit::TranslateRequest) -> Result<wit::TranslateResponse, PluginError> {
        use xdst_guest::Translator;
        // The conversions stand in for the copies the component model makes.
        let request = xdst_guest::TranslateRequest {
            node_group: r.node_group.clone(),
            documents: r
                .documents
                .iter()
                .map(|d| xdst_guest::IntentDocument {
                    kind: d.kind.clone(),
                    name: d.name.clone(),
                    origin: d.origin.clone(),
                    json: d.json.clone(),
                })
                .collect(),
            resources: vec![],
            config: r.config.clone(),
        };
        let response = xdst_plugin_reference::Reference::translate(request).map_err(|e| PluginError {
            plugin: "reference".into(),
            digest: "native".into(),
            failure: xdst_plugin::Failure::Reported { message: e.message, document: e.document, field: e.field },
        })?;
        Ok(wit::TranslateResponse {
            resources: response
                .resources
                .into_iter()
                .map(|x| wit::XdsResource {
                    type_url: x.type_url,
                    name: x.name,
                    body: match x.body {
                        xdst_guest::Body::Json(s) => wit::Body::Json(s),
                        xdst_guest::Body::Proto(b) => wit::Body::Proto(b),
                    },
                    document: x.document,
                })
                .collect(),
            diagnostics: vec![],
        })
    }
}

fn service(i: usize, port: u16) -> String {
    format!(
        "kind: Service\nmetadata: {{name: svc-{i}}}\nspec:\n  protocol: grpc\n  connectTimeout: 1s\n  endpoints:\n  - {{address: 10.{}.{}.1, port: {port}}}\n  - {{address: 10.{}.{}.2, port: {port}}}\n",
        (i / 250) % 250,
        i % 250,
        (i / 250) % 250,
        i % 250
    )
}

fn grpc_service(i: usize) -> String {
    format!(
        "kind: GrpcService\nmetadata: {{name: grpc-{i}}}\nspec:\n  backends:\n  - {{service: svc-{i}}}\n  timeout: 5s\n"
    )
}

fn intent(n: usize, changed: Option<(usize, u16)>) -> anyhow::Result<IntentSet> {
    let mut text = String::new();
    for i in 0..n {
        let port = match changed {
            Some((c, p)) if c == i => p,
            _ => 8080,
        };
        text.push_str("---\n");
        text.push_str(&service(i, port));
        text.push_str("---\n");
        text.push_str(&grpc_service(i));
    }
    let mut set = IntentSet::default();
    for d in parse_file("bench.yaml", &text)? {
        set.add(d)?;
    }
    Ok(set)
}

struct Measured {
    full: Vec<Duration>,
    change: Vec<Duration>,
    resources: usize,
    /// `xdst_core::validate::check` over every resource of one full translation (part of
    /// `full`: the pipeline runs it on each resource it decodes).
    validate: Duration,
}

/// The time `xdst_core::validate::check` takes over every resource of `snapshot`, decoded
/// beforehand (the decoding is not what is measured).
fn validate_time(snapshot: &xdst_core::snapshot::Snapshot) -> anyhow::Result<Duration> {
    let mut messages = Vec::new();
    for (type_url, set) in snapshot.types() {
        let desc = xdst_core::descriptors::message_for_type_url(type_url).context("a known type")?;
        for r in set.resources() {
            messages.push(prost_reflect::DynamicMessage::decode(desc.clone(), r.body().clone())?);
        }
    }
    let t = Instant::now();
    for m in &messages {
        xdst_core::validate::check(m).map_err(|(at, why)| anyhow::anyhow!("{at}: {why}"))?;
    }
    Ok(t.elapsed())
}

fn run(plugin: Arc<dyn Translate>, n: usize, runs: usize, changes: usize) -> anyhow::Result<Measured> {
    let plugins = [Configured::new(plugin, "null")];
    let base = intent(n, None)?;
    let mut full = Vec::new();
    let mut resources = 0;
    let mut pipeline = Pipeline::new("");
    let mut previous = xdst_core::snapshot::Snapshot::default();
    for _ in 0..runs {
        let mut p = Pipeline::new("");
        let t = Instant::now();
        let out = p.run(&plugins, &base).map_err(|e| anyhow::anyhow!("{e}"))?;
        xdst_core::consistency::check(&out.snapshot).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        full.push(t.elapsed());
        resources = out.snapshot.len();
        previous = out.snapshot;
        pipeline = p;
    }
    // Prepare the changed intents first: parsing 20,000 documents is not what is measured.
    let mut variants = Vec::new();
    for k in 0..changes {
        variants.push(intent(n, Some(((k * 7919) % n, 9000 + k as u16)))?);
    }
    let validate = validate_time(&previous)?;
    let mut change = Vec::new();
    let mut checks = Vec::new();
    for v in &variants {
        let t = Instant::now();
        let out = pipeline.run(&plugins, v).map_err(|e| anyhow::anyhow!("{e}"))?;
        let c = Instant::now();
        // What the cache does on publish: check what changed since the last good set.
        xdst_core::consistency::check_since(&out.snapshot, &previous).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        checks.push(c.elapsed());
        previous = out.snapshot;
        change.push(t.elapsed());
        if out.calls.iter().map(|c| c.documents).sum::<usize>() > 2 {
            bail!("a single-service change re-translated {:?} documents", out.calls);
        }
    }
    eprintln!("  single change: of which consistency check {} (median)", ms(median(&checks)));
    Ok(Measured { full, change, resources, validate })
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut n = 10_000;
    let mut runs = 5;
    let mut changes = 20;
    let mut wasm_path = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--services" => n = args.next().context("--services N")?.parse()?,
            "--runs" => runs = args.next().context("--runs N")?.parse()?,
            "--changes" => changes = args.next().context("--changes N")?.parse()?,
            "--wasm" => wasm_path = Some(args.next().context("--wasm FILE")?),
            "-h" | "--help" => {
                println!("xdst-bench-translate --wasm FILE [--services N] [--runs R] [--changes C]");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    let wasm_path =
        wasm_path.context("--wasm FILE: the reference plugin built for wasm32 (tests/bench/translate.sh builds it)")?;
    let bytes = std::fs::read(&wasm_path).with_context(|| format!("reading {wasm_path}"))?;
    let runtime = Runtime::new(RuntimeConfig { cache_dir: None, fuel: false, ..Default::default() })?;
    let t = Instant::now();
    let limits =
        Limits { deadline: Duration::from_secs(60), memory_bytes: 4 << 30, output_bytes: 1 << 30, ..Limits::default() };
    let wasm = runtime.load_any("reference.wasm", &bytes, limits)?;
    eprintln!("compiled the plugin ({} bytes) in {}", bytes.len(), ms(t.elapsed()));

    eprintln!("{n} services ({} documents): {runs} full runs and {changes} single-service changes each", 2 * n);
    let native = run(Arc::new(Native::new()), n, runs, changes)?;
    let wasm = run(Arc::new(wasm), n, runs, changes)?;
    let (wf, nf) = (median(&wasm.full), median(&native.full));
    let (wc, nc) = (median(&wasm.change), median(&native.change));
    println!("| | wasm | native | wasm / native |");
    println!("|---|---|---|---|");
    println!(
        "| full translation, {} resources (median of {runs}) | {} | {} | {:.2} |",
        wasm.resources,
        ms(wf),
        ms(nf),
        wf.as_secs_f64() / nf.as_secs_f64()
    );
    println!(
        "| single-service change (median of {changes}) | {} | {} | {:.2} |",
        ms(wc),
        ms(nc),
        wc.as_secs_f64() / nc.as_secs_f64()
    );
    println!(
        "| of a full translation: checking what Envoy validates, {} resources | {} | {} | |",
        wasm.resources,
        ms(wasm.validate),
        ms(native.validate)
    );
    println!(
        "| full: min / max | {} / {} | {} / {} | |",
        ms(*wasm.full.iter().min().unwrap()),
        ms(*wasm.full.iter().max().unwrap()),
        ms(*native.full.iter().min().unwrap()),
        ms(*native.full.iter().max().unwrap())
    );
    println!(
        "| change: max | {} | {} | |",
        ms(*wasm.change.iter().max().unwrap()),
        ms(*native.change.iter().max().unwrap())
    );
    if native.resources != wasm.resources {
        bail!("wasm produced {} resources, native {}", wasm.resources, native.resources);
    }
    Ok(())
}

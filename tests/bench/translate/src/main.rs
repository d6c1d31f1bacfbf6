//! Issue 3, must-show 6: N services (a `Service` and a `GrpcService` each: four resources per
//! service) through the reference plugin: a full translation (plugin, decoding, canonical
//! encoding, snapshot, consistency check), then single-service changes through the
//! incremental pipeline. The same translator compiled natively is the baseline.
//!
//! Issue 36: with `--gateway-api`, the gateway-api plugin instead: one Gateway, R HTTPRoutes
//! (a path each) over S Services with an EndpointSlice each, on one hostname or spread over H
//! (`--hostnames H`); a change is one route's path.
//!
//!     tests/bench/translate.sh [--services 10000] [--runs 5] [--changes 20]
//!     tests/bench/translate.sh --gateway-api [--routes 5000] [--services 1000]
//!
//! (the script builds the plugin for wasm32 and this binary in release, then runs it).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use xdst_core::intent::{IntentSet, parse_file};
use xdst_plugin::pipeline::{Configured, Pipeline, Translate};
use xdst_plugin::{Limits, PluginError, Runtime, RuntimeConfig, wit};

/// A translator compiled into this binary, behind the host's `Translate` trait.
struct Native<T> {
    info: wit::PluginInfo,
    translator: PhantomData<T>,
}

impl<T: xdst_guest::Translator> Native<T> {
    fn new() -> Self {
        let i = T::describe();
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
            translator: PhantomData,
        }
    }
}

impl<T: xdst_guest::Translator + Send + Sync> Translate for Native<T> {
    fn info(&self) -> &wit::PluginInfo {
        &self.info
    }
    fn digest(&self) -> &str {
        "native"
    }
    fn translate(&self, r: &wit::TranslateRequest) -> Result<wit::TranslateResponse, PluginError> {
        self.translate_full(r).map(|t| t.response)
    }
    fn names_node_groups(&self) -> bool {
        // The guest SDK speaks contract 0.3.0.
        true
    }
    fn translate_full(&self, r: &wit::TranslateRequest) -> Result<xdst_plugin::Translated, PluginError> {
        // The conversions stand in for the copies the component model makes.
        let request = xdst_guest::TranslateRequest {
            changes: None,
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
        let response = T::translate(request).map_err(|e| PluginError {
            plugin: self.info.name.clone(),
            digest: "native".into(),
            failure: xdst_plugin::Failure::Reported { message: e.message, document: e.document, field: e.field },
        })?;
        let mut node_groups = Vec::new();
        let response = wit::TranslateResponse {
            resources: response
                .resources
                .into_iter()
                .map(|mut x| {
                    node_groups.push(std::mem::take(&mut x.node_groups));
                    x
                })
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
        };
        if node_groups.iter().all(Vec::is_empty) {
            node_groups.clear();
        }
        Ok(xdst_plugin::Translated { response, statuses: vec![], node_groups, removed: vec![] })
    }
}

/// What is translated: the reference kinds, or Gateway API objects.
#[derive(Debug, Clone, Copy)]
enum Workload {
    /// N services: a `Service` and a `GrpcService` each.
    Reference { services: usize },
    /// One Gateway, `routes` HTTPRoutes over `services` Services with an EndpointSlice each.
    GatewayApi { routes: usize, services: usize, hostnames: usize },
}

impl Workload {
    /// The intent, with the `changed` item (a service's port, a route's path) changed to
    /// variant `v`.
    fn intent(self, changed: Option<(usize, u16)>) -> anyhow::Result<IntentSet> {
        let text = match self {
            Workload::Reference { services } => reference_intent(services, changed),
            Workload::GatewayApi { routes, services, hostnames } => {
                gateway_api_intent(routes, services, hostnames, changed)
            }
        };
        let mut set = IntentSet::default();
        for d in parse_file("bench.yaml", &text)? {
            set.add(d)?;
        }
        Ok(set)
    }

    /// The one document that change `(item, variant)` makes, as it reads after the change.
    fn changed(self, change: (usize, u16)) -> anyhow::Result<Arc<xdst_core::intent::IntentDocument>> {
        let text = match self {
            Workload::Reference { .. } => service(change.0, change.1),
            Workload::GatewayApi { services, hostnames, .. } => {
                gateway_api_route(change.0, services, hostnames, Some(change))
            }
        };
        let mut docs = parse_file("bench.yaml", &text)?;
        anyhow::ensure!(docs.len() == 1, "one changed document");
        Ok(Arc::new(docs.remove(0)))
    }

    /// How many items a change picks from.
    fn items(self) -> usize {
        match self {
            Workload::Reference { services } => services,
            Workload::GatewayApi { routes, .. } => routes,
        }
    }

    /// How many documents one change may send to the plugin: the changed ones for the
    /// per-document reference plugin; every one for the whole-set gateway-api plugin.
    fn documents_per_change(self) -> usize {
        match self {
            Workload::Reference { .. } => 2,
            Workload::GatewayApi { routes, services, .. } => 1 + routes + 2 * services,
        }
    }
}

/// One Gateway, `routes` HTTPRoutes (`/r<i>`, to Service `svc-<i mod services>`, for hostname
/// `h<i mod hostnames>.example.com`, or every hostname with `hostnames` 0), and the Services
/// with their EndpointSlices (two endpoints each).
fn gateway_api_intent(routes: usize, services: usize, hostnames: usize, changed: Option<(usize, u16)>) -> String {
    let mut text = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: bench}\nspec:\n  \
         gatewayClassName: xdst\n  listeners: [{name: http, port: 8080, protocol: HTTP}]\n",
    );
    for i in 0..services {
        let (a, b) = ((i / 250) % 250, i % 250);
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: svc-{i}, namespace: bench}}\nspec:\n  ports: [{{name: \
             http, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: svc-{i}, \
             namespace: bench, labels: {{kubernetes.io/service-name: svc-{i}}}}}\naddressType: IPv4\nendpoints: \
             [{{addresses: [10.{a}.{b}.1]}}, {{addresses: [10.{a}.{b}.2]}}]\nports: [{{name: http, port: 8080}}]\n"
        ));
    }
    for i in 0..routes {
        text.push_str("---\n");
        text.push_str(&gateway_api_route(i, services, hostnames, changed));
    }
    text
}

/// HTTPRoute `r-<i>` of [`gateway_api_intent`].
fn gateway_api_route(i: usize, services: usize, hostnames: usize, changed: Option<(usize, u16)>) -> String {
    let path = match changed {
        Some((c, v)) if c == i => format!("/r{i}-v{v}"),
        _ => format!("/r{i}"),
    };
    let hostnames = match hostnames {
        0 => String::new(),
        h => format!("\n  hostnames: [h{}.example.com]", i % h),
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r-{i}, namespace: bench}}\n\
         spec:\n  parentRefs: [{{name: gw}}]{hostnames}\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]\n    \
         backendRefs: [{{name: svc-{}, port: 80}}]\n",
        i % services
    )
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

fn reference_intent(n: usize, changed: Option<(usize, u16)>) -> String {
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
    text
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

fn run(plugin: Arc<dyn Translate>, work: Workload, runs: usize, changes: usize) -> anyhow::Result<Measured> {
    let plugins = [Configured::new(plugin, "null")];
    let base = work.intent(None)?;
    let n = work.items();
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
    // Prepare the changed intents first: parsing is not what is measured. The documents that
    // did not change are the same `Arc`s, as the server's parse cache keeps them for files that
    // did not change (one document per file, or the intent API).
    // Each is the one before with one more change, as a server's generations are.
    let mut variants: Vec<IntentSet> = Vec::new();
    for k in 0..changes {
        let changed = work.changed(((k * 7919) % n, 9000 + k as u16))?;
        let mut variant = variants.last().unwrap_or(&base).clone();
        variant.remove_id(changed.id());
        variant.add_shared(changed)?;
        variants.push(variant);
    }
    let validate = validate_time(&previous)?;
    let mut change = Vec::new();
    let mut checks = Vec::new();
    let mut calls = Vec::new();
    for v in &variants {
        let t = Instant::now();
        let out = pipeline.run(&plugins, v).map_err(|e| anyhow::anyhow!("{e}"))?;
        let c = Instant::now();
        // What the cache does on publish: check what changed since the last good set.
        xdst_core::consistency::check_since(&out.snapshot, &previous).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        checks.push(c.elapsed());
        calls.push(Duration::from_secs_f64(out.calls.iter().map(|c| c.seconds).sum()));
        previous = out.snapshot;
        change.push(t.elapsed());
        if out.calls.iter().map(|c| c.documents).sum::<usize>() > work.documents_per_change() {
            bail!("a single change re-translated {:?} documents", out.calls);
        }
    }
    eprintln!(
        "  single change: of which the plugin call {}, the consistency check {} (medians)",
        ms(median(&calls)),
        ms(median(&checks))
    );
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
    let n = 10_000;
    let mut runs = 5;
    let mut changes = 20;
    let mut wasm_path = None;
    let mut gateway_api = false;
    let mut wasm_only = false;
    let mut routes = 5_000;
    let mut hostnames = 0;
    let mut services = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--services" => services = Some(args.next().context("--services N")?.parse()?),
            "--gateway-api" => gateway_api = true,
            "--wasm-only" => wasm_only = true,
            "--routes" => routes = args.next().context("--routes N")?.parse()?,
            "--hostnames" => hostnames = args.next().context("--hostnames N")?.parse()?,
            "--runs" => runs = args.next().context("--runs N")?.parse()?,
            "--changes" => changes = args.next().context("--changes N")?.parse()?,
            "--wasm" => wasm_path = Some(args.next().context("--wasm FILE")?),
            "-h" | "--help" => {
                println!(
                    "xdst-bench-translate --wasm FILE [--services N] [--runs R] [--changes C] [--wasm-only]\n\
                     xdst-bench-translate --gateway-api --wasm FILE [--routes R] [--hostnames H] [--services S] [--runs R] [--changes C] [--wasm-only]\n\n\
                     --wasm-only: no native baseline (for profiling the host's part of a change)"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    let work = if gateway_api {
        Workload::GatewayApi { routes, services: services.unwrap_or(1_000), hostnames }
    } else {
        Workload::Reference { services: services.unwrap_or(n) }
    };
    let wasm_path =
        wasm_path.context("--wasm FILE: the plugin built for wasm32 (tests/bench/translate.sh builds it)")?;
    let bytes = std::fs::read(&wasm_path).with_context(|| format!("reading {wasm_path}"))?;
    let runtime = Runtime::new(RuntimeConfig { cache_dir: None, fuel: false, ..Default::default() })?;
    let t = Instant::now();
    let limits =
        Limits { deadline: Duration::from_secs(60), memory_bytes: 4 << 30, output_bytes: 1 << 30, ..Limits::default() };
    let wasm = runtime.load_any("plugin.wasm", &bytes, limits)?;
    eprintln!("compiled the plugin ({} bytes) in {}", bytes.len(), ms(t.elapsed()));

    eprintln!("{work:?}: {runs} full runs and {changes} single changes each");
    let native: Arc<dyn Translate> = match work {
        Workload::Reference { .. } => Arc::new(Native::<xdst_plugin_reference::Reference>::new()),
        Workload::GatewayApi { .. } => Arc::new(Native::<xdst_plugin_gateway_api::GatewayApi>::new()),
    };
    if wasm_only {
        let wasm = run(Arc::new(wasm), work, runs, changes)?;
        println!(
            "wasm only: full translation {} ({} resources), single change {} (medians)",
            ms(median(&wasm.full)),
            wasm.resources,
            ms(median(&wasm.change))
        );
        return Ok(());
    }
    let native = run(native, work, runs, changes)?;
    let wasm = run(Arc::new(wasm), work, runs, changes)?;
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
        "| single change (median of {changes}) | {} | {} | {:.2} |",
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

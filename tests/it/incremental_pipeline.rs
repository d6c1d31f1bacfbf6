//! Issue 50, items 2 and 4: incremental equals full through the host. The gateway-api plugin,
//! built for wasm, runs in two pipelines over the same random edit sequences (routes created,
//! changed, renamed and deleted, their hostnames and backends; Services; EndpointSlices; the
//! Gateway's listeners; a document the plugin refuses): one pipeline kept from step to step,
//! whose plugin instance gets changes calls and whose snapshot is the last one with the
//! changes applied (`pipeline_delta.rs`), and a fresh pipeline each step with a plugin of its
//! own, which translates everything. After every step the two snapshots must hold the same
//! resources byte for byte and the same statuses, and most steps must have been changes calls;
//! the periodic full check (every third call here) must never find a difference.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use xdst_core::intent::{IntentSet, parse_file};
use xdst_plugin::pipeline::{Configured, Pipeline, Translate};
use xdst_plugin::{Limits, Runtime, RuntimeConfig};

/// A small deterministic generator (xorshift), so a failure names its seed and replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Document `slot` in version `v`: slot 0 is the Gateway, 1-4 Services, 5-8 EndpointSlices,
/// 9-24 HTTPRoutes.
fn document(slot: u64, v: u64) -> String {
    match slot {
        0 => {
            let listeners = match v % 3 {
                0 => "[{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]",
                1 => {
                    "[{name: a, port: 80, protocol: HTTP, hostname: a.example.com, allowedRoutes: {namespaces: {from: All}}}, \
                      {name: any, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]"
                }
                _ => {
                    "[{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}, \
                      {name: other, port: 8080, protocol: HTTP, hostname: b.example.com, allowedRoutes: {namespaces: {from: All}}}]"
                }
            };
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: infra}}\n\
                 spec: {{gatewayClassName: xdst, listeners: {listeners}}}\n"
            )
        }
        1..=4 => {
            let app = if v % 3 == 2 { ", appProtocol: kubernetes.io/h2c" } else { "" };
            format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{slot}, namespace: team}}\n\
                 spec: {{ports: [{{name: http, port: 80{app}}}]}}\n"
            )
        }
        5..=8 => {
            // Version 7 forgets the label naming its Service: the plugin refuses the document.
            let labels = if v % 17 == 7 {
                String::new()
            } else {
                format!("labels: {{kubernetes.io/service-name: svc-{}}}", slot - 4)
            };
            format!(
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: slice-{slot}, namespace: team, {labels}}}\n\
                 addressType: IPv4\nendpoints: [{{addresses: [10.0.{slot}.{}]}}]\nports: [{{name: http, port: 8080}}]\n",
                v % 200
            )
        }
        _ => {
            let hostnames = match v % 4 {
                0 => "[]",
                1 => "[a.example.com]",
                2 => "[b.example.com, c.example.com]",
                _ => "['*.example.com']",
            };
            let service = 1 + (v / 4) % 5;
            let created = if v.is_multiple_of(5) { "" } else { ", creationTimestamp: '2026-01-01T00:00:00Z'" };
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{slot}, namespace: team{created}}}\n\
                 spec:\n  parentRefs: [{{name: gw, namespace: infra}}]\n  hostnames: {hostnames}\n  rules:\n  \
                 - matches: [{{path: {{type: PathPrefix, value: /p{}}}}}]\n    backendRefs: [{{name: svc-{service}, port: 80}}]\n",
                v % 7
            )
        }
    }
}

fn intent(docs: &BTreeMap<u64, String>) -> anyhow::Result<IntentSet> {
    let text: Vec<&str> = docs.values().map(String::as_str).collect();
    let mut set = IntentSet::default();
    for d in parse_file("case.yaml", &text.join("---\n"))? {
        set.add(d)?;
    }
    Ok(set)
}

/// Every resource of a translation: (type, name) -> (version, bytes).
fn resources(t: &xdst_plugin::pipeline::Translation) -> BTreeMap<(String, String), (String, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for (type_url, set) in t.snapshot.types() {
        for r in set.resources() {
            out.insert((type_url.to_string(), r.name().to_string()), (r.version().to_string(), r.body().to_vec()));
        }
    }
    out
}

#[test]
fn incremental_equals_full_through_the_host() -> anyhow::Result<()> {
    let wasm = std::fs::read(xdst_tests::plugins::gateway_api()?)?;
    // A full call checks the changes calls every third one (the periodic check): an honest
    // plugin must never be counted.
    let runtime = Runtime::new(RuntimeConfig { cache_dir: None, full_translation_every: 3, ..Default::default() })?;
    let mismatches = xdst_plugin::incremental::MISMATCHES.load(std::sync::atomic::Ordering::Relaxed);
    let limits = Limits { deadline: Duration::from_secs(30), ..Limits::default() };
    let load = || -> anyhow::Result<Configured> {
        let plugin: Arc<dyn Translate> = Arc::new(runtime.load_any("gateway-api.wasm", &wasm, limits)?);
        Ok(Configured::new(plugin, "null"))
    };
    let (kept_plugin, full_plugin) = ([load()?], [load()?]);
    let (mut steps, mut changes_calls) = (0, 0);
    for seed in [0x9e37_79b9_7f4a_7c15_u64, 0x2545_f491_4f6c_dd1d, 0xdead_beef_cafe_f00d] {
        let mut rng = Rng(seed);
        let mut docs: BTreeMap<u64, String> = (0..25).map(|s| (s, document(s, rng.next(1000)))).collect();
        // Keep the first version clean, so the kept pipeline starts from a good generation.
        for s in 5..=8 {
            docs.insert(s, document(s, 0));
        }
        let mut kept = Pipeline::new("");
        kept.run(&kept_plugin, &intent(&docs)?).map_err(|e| anyhow::anyhow!("{e}"))?;
        for step in 0..40 {
            for _ in 0..=rng.next(2) {
                let slot = rng.next(25);
                if slot > 0 && rng.next(6) == 0 {
                    docs.remove(&slot);
                } else {
                    docs.insert(slot, document(slot, rng.next(1000)));
                }
            }
            let set = intent(&docs)?;
            let incremental = kept.run(&kept_plugin, &set);
            let full = Pipeline::new("").run(&full_plugin, &set);
            let at = format!("seed {seed:#x}, step {step}");
            match (incremental, full) {
                (Ok(a), Ok(b)) => {
                    steps += 1;
                    let sent: usize = a.calls.iter().map(|c| c.documents).sum();
                    changes_calls += usize::from(sent < set.len());
                    let (ra, rb) = (resources(&a), resources(&b));
                    for key in ra.keys().chain(rb.keys()) {
                        anyhow::ensure!(
                            ra.get(key) == rb.get(key),
                            "{at}: resource {key:?} differs (kept pipeline {:?}, full {:?})",
                            ra.get(key).map(|r| &r.0),
                            rb.get(key).map(|r| &r.0)
                        );
                    }
                    anyhow::ensure!(a.statuses == b.statuses, "{at}: statuses differ");
                    let diagnostics = |t: &xdst_plugin::pipeline::Translation| {
                        t.diagnostics.iter().map(|(_, d)| d.message.clone()).collect::<Vec<_>>()
                    };
                    anyhow::ensure!(diagnostics(&a) == diagnostics(&b), "{at}: diagnostics differ");
                }
                (Err(a), Err(b)) => anyhow::ensure!(a.to_string() == b.to_string(), "{at}: {a} / {b}"),
                (a, b) => anyhow::bail!("{at}: kept pipeline {:?}, full {:?}", a.err(), b.err()),
            }
        }
    }
    eprintln!("{steps} good steps, {changes_calls} of them changes calls");
    let counted = xdst_plugin::incremental::MISMATCHES.load(std::sync::atomic::Ordering::Relaxed) - mismatches;
    anyhow::ensure!(counted == 0, "the periodic full check counted an honest plugin {counted} times");
    anyhow::ensure!(changes_calls * 2 > steps, "only {changes_calls} of {steps} steps were changes calls");
    Ok(())
}

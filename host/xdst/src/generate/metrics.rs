//! The generation plane's metrics, registered beside the serving plane's
//! ([`xdst_serve::metrics::Metrics::registry_mut`]) and rendered with them on `/metrics`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use xdst_serve::metrics::{Labels1, histogram, label};

/// Loads, generations, plugins, the store and the bounds on input.
#[derive(Clone)]
pub struct GenerationMetrics {
    /// Resource set loads by result (`ok`, `refused`).
    pub loads: Family<Labels1, Counter>,
    /// Resources served in the default group, by type.
    pub resources: Family<Labels1, Gauge>,
    /// Intent generations by result (`ok`, `failed`).
    pub generations: Family<Labels1, Counter>,
    /// Seconds per generation (load, translate, validate, publish).
    pub generation_seconds: Histogram,
    /// Generations that panicked (a bug, contained: reported, and the next one starts afresh).
    pub generation_panics: Counter,
    /// Documents, files and store keys the last good generation held out (issue 35).
    pub held: Gauge,
    /// Plugin calls by plugin.
    pub plugin_calls: Family<Labels1, Counter>,
    /// Seconds each plugin call took, by plugin.
    pub plugin_seconds: Family<Labels1, Histogram>,
    /// Generations failed by a plugin, by plugin.
    pub plugin_failures: Family<Labels1, Counter>,
    /// Plugin files whose new contents were refused (the previous version kept), by file.
    pub plugin_refusals: Family<Labels1, Counter>,
    /// Plugin output over its caps, by what (`stdio_bytes`, `log_lines`).
    pub plugin_output_dropped: Family<Labels1, Counter>,
    /// Bounds on untrusted input reached, by limit.
    pub limit_hits: Family<Labels1, Counter>,
    /// Full listings of the store after the first, by reason (`compacted`).
    pub store_reloads: Family<Labels1, Counter>,
    /// Periodic full calls of an incremental plugin that found its changes calls had built
    /// other output (design 020).
    pub incremental_mismatches: Counter,
    /// One copy of the process-wide counters at a time.
    sync: Arc<Mutex<()>>,
}

impl GenerationMetrics {
    /// Registers every metric of this plane in `serving`'s registry, and brings the plugin
    /// host's and the input bounds' process-wide counters over before each render.
    pub fn register(serving: &mut xdst_serve::metrics::Metrics) -> GenerationMetrics {
        let m = GenerationMetrics {
            loads: Family::default(),
            resources: Family::default(),
            generations: Family::default(),
            generation_seconds: histogram(),
            generation_panics: Counter::default(),
            held: Gauge::default(),
            plugin_calls: Family::default(),
            plugin_seconds: Family::new_with_constructor(histogram as fn() -> Histogram),
            plugin_failures: Family::default(),
            plugin_refusals: Family::default(),
            plugin_output_dropped: Family::default(),
            limit_hits: Family::default(),
            store_reloads: Family::default(),
            incremental_mismatches: Counter::default(),
            sync: Arc::default(),
        };
        let r = serving.registry_mut();
        r.register(
            "generation_panics",
            "Generations that panicked (contained and reported; the next starts afresh)",
            m.generation_panics.clone(),
        );
        r.register(
            "plugin_refusals",
            "Plugin files whose new contents were refused, by file",
            m.plugin_refusals.clone(),
        );
        r.register("generations", "Intent generations by result", m.generations.clone());
        r.register(
            "held",
            "Documents, files and store keys the last good generation held out (failing; the rest is served)",
            m.held.clone(),
        );
        r.register(
            "store_reloads",
            "Full listings of the intent store after the first, by reason (compacted: the watch missed revisions)",
            m.store_reloads.clone(),
        );
        r.register(
            "incremental_mismatches",
            "Periodic full calls of an incremental plugin that found its changes calls had built other output (the \
             plugin is named in the log; the full output is served)",
            m.incremental_mismatches.clone(),
        );
        r.register(
            "limit_hits",
            "Times a bound on untrusted input was reached, by limit (see the README's Limits)",
            m.limit_hits.clone(),
        );
        r.register(
            "plugin_output_dropped",
            "Plugin output dropped over its per-call caps: stdout and stderr bytes, log lines",
            m.plugin_output_dropped.clone(),
        );
        r.register(
            "generation_seconds",
            "Time to load, translate, validate and publish intent",
            m.generation_seconds.clone(),
        );
        r.register("plugin_calls", "Plugin translate calls by plugin", m.plugin_calls.clone());
        r.register("plugin_seconds", "Seconds a plugin call took, by plugin", m.plugin_seconds.clone());
        r.register("plugin_failures", "Generations failed by a plugin, by plugin", m.plugin_failures.clone());
        r.register("resource_loads", "Resource set loads by result", m.loads.clone());
        r.register("resources", "Resources in the default node group by type", m.resources.clone());
        let synced = m.clone();
        serving.before_render(move || synced.sync_process_counters());
        m
    }

    /// The plugin host and the bounds on input count in process-wide atomics; bring them over.
    fn sync_process_counters(&self) {
        let _one_at_a_time = self.sync.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (what, total) in [
            ("stdio_bytes", xdst_plugin::stdio::DROPPED_BYTES.load(Ordering::Relaxed)),
            ("log_lines", xdst_plugin::DROPPED_LOG_LINES.load(Ordering::Relaxed)),
        ] {
            let c = self.plugin_output_dropped.get_or_create(&label("what", what));
            c.inc_by(total.saturating_sub(c.get()));
        }
        let mismatches = xdst_plugin::incremental::MISMATCHES.load(Ordering::Relaxed);
        self.incremental_mismatches.inc_by(mismatches.saturating_sub(self.incremental_mismatches.get()));
        for limit in xdst_core::limits::Limit::ALL {
            let c = self.limit_hits.get_or_create(&label("limit", limit.name()));
            c.inc_by(limit.hits().saturating_sub(c.get()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33, item 4: a plugin named `m"} 1\nxdst_injected_total{x="1` (or a file named so)
    /// stays inside its label value: escaped, on its own series' line, adding no series.
    #[test]
    fn plugin_and_file_names_are_escaped() {
        let mut serving = xdst_serve::metrics::Metrics::new();
        let m = GenerationMetrics::register(&mut serving);
        let name = "m\"} 1\nxdst_injected_total{x=\"1\\";
        m.plugin_calls.get_or_create(&[("plugin", name.to_owned().into())]).inc();
        m.plugin_refusals.get_or_create(&[("file", format!("{name}.wasm").into())]).inc();
        let text = serving.render();
        assert!(!text.lines().any(|l| l.starts_with("xdst_injected")), "a series was injected:\n{text}");
        assert!(text.contains(r#"xdst_plugin_calls_total{plugin="m\"} 1\nxdst_injected_total{x=\"1\\"} 1"#), "{text}");
        assert!(text.contains(r#"xdst_plugin_refusals_total{file="m\"} 1\nxdst_injected_total{x=\"1\\.wasm"} 1"#));
    }
}

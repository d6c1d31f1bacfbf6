//! Prometheus metrics, served as text on the admin port's `/metrics`.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

// Label values borrow static strings where they can: metrics are touched on every response
// and ACK of every stream.
type Labels2 = [(&'static str, LabelValue); 2];
type Labels1 = [(&'static str, LabelValue); 1];

/// A label value, escaped when written (`\\`, `\"`, `\n`, as the Prometheus text format
/// says): a value that carries a plugin's name or a file's name cannot end its series early
/// and start one of its own. `prometheus-client` writes label values as they are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LabelValue(Cow<'static, str>);

impl EncodeLabelValue for LabelValue {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        use std::fmt::Write as _;
        let s: &str = &self.0;
        if !s.contains(['\\', '"', '\n']) {
            return encoder.write_str(s);
        }
        for c in s.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

impl From<&'static str> for LabelValue {
    fn from(s: &'static str) -> Self {
        LabelValue(Cow::Borrowed(s))
    }
}

impl From<String> for LabelValue {
    fn from(s: String) -> Self {
        LabelValue(Cow::Owned(s))
    }
}

impl From<Cow<'static, str>> for LabelValue {
    fn from(s: Cow<'static, str>) -> Self {
        LabelValue(s)
    }
}

pub struct Metrics {
    registry: Registry,
    /// Connected streams by API (`sotw`/`delta`) and service (`ads`, `lds`, ...).
    pub streams: Family<Labels2, Gauge>,
    /// Responses sent by API and type (`lds`, `cds`, ...).
    pub responses: Family<Labels2, Counter>,
    pub acks: Family<Labels1, Counter>,
    pub nacks: Family<Labels1, Counter>,
    /// Requests ignored for carrying an old nonce (SOTW-4).
    pub stale_requests: Family<Labels1, Counter>,
    /// Seconds from a response being handed to the transport to its ACK.
    pub push_ack_seconds: Family<Labels1, Histogram>,
    /// Streams closed for a protocol error, by reason.
    pub stream_errors: Family<Labels1, Counter>,
    /// Clients refused or cut off at a limit, by reason (a fixed set, never client-chosen).
    pub refusals: Family<Labels1, Counter>,
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
    /// Plugin calls by plugin.
    pub plugin_calls: Family<Labels1, Counter>,
    /// Seconds each plugin call took, by plugin.
    pub plugin_seconds: Family<Labels1, Histogram>,
    /// Generations failed by a plugin, by plugin.
    pub plugin_failures: Family<Labels1, Counter>,
    /// Plugin files whose new contents were refused (the previous version kept), by file.
    pub plugin_refusals: Family<Labels1, Counter>,
    /// Seconds from a change reaching a node to the node acknowledging its last step.
    pub plan_convergence_seconds: Histogram,
    /// Make-before-break steps entered, by step.
    pub plan_steps: Family<Labels1, Counter>,
    /// Plans restarted by a new change before the node converged.
    pub plan_restarts: Counter,
    /// Plans stopped by a NACK.
    pub plan_nack_stops: Counter,
    /// Steps that proceeded without an ACK after the grace period, by step.
    pub plan_grace_expired: Family<Labels1, Counter>,
    /// Plugin output over its caps, by what (`stdio_bytes`, `log_lines`).
    pub plugin_output_dropped: Family<Labels1, Counter>,
    /// Bounds on untrusted input reached, by limit.
    pub limit_hits: Family<Labels1, Counter>,
    /// Full listings of the store after the first, by reason (`compacted`).
    pub store_reloads: Family<Labels1, Counter>,
    sync: Mutex<()>,
    /// Series of the per-response and per-ACK families, by type label, made on first use:
    /// those paths then skip the family's hashed, locked lookup.
    hot: HotSeries,
}

/// Every value [`type_label`] gives.
const TYPE_LABELS: [&str; 10] = ["lds", "rds", "cds", "eds", "sds", "rtds", "srds", "vhds", "ecds", "other"];

#[derive(Default)]
struct HotSeries {
    acks: [OnceLock<Counter>; TYPE_LABELS.len()],
    push_ack_seconds: [OnceLock<Histogram>; TYPE_LABELS.len()],
    /// SotW, Delta.
    responses: [[OnceLock<Counter>; TYPE_LABELS.len()]; 2],
}

fn histogram() -> Histogram {
    Histogram::new([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("xdst");
        let streams = Family::<Labels2, Gauge>::default();
        let responses = Family::<Labels2, Counter>::default();
        let acks = Family::<Labels1, Counter>::default();
        let nacks = Family::<Labels1, Counter>::default();
        let stale_requests = Family::<Labels1, Counter>::default();
        let push_ack_seconds = Family::<Labels1, Histogram>::new_with_constructor(histogram as fn() -> Histogram);
        let stream_errors = Family::<Labels1, Counter>::default();
        let refusals = Family::<Labels1, Counter>::default();
        let loads = Family::<Labels1, Counter>::default();
        let resources = Family::<Labels1, Gauge>::default();
        let generations = Family::<Labels1, Counter>::default();
        let generation_seconds = histogram();
        let generation_panics = Counter::default();
        registry.register(
            "generation_panics",
            "Generations that panicked (contained and reported; the next starts afresh)",
            generation_panics.clone(),
        );
        let plugin_calls = Family::<Labels1, Counter>::default();
        let plugin_seconds = Family::<Labels1, Histogram>::new_with_constructor(histogram as fn() -> Histogram);
        let plugin_failures = Family::<Labels1, Counter>::default();
        let plugin_refusals = Family::<Labels1, Counter>::default();
        registry.register(
            "plugin_refusals",
            "Plugin files whose new contents were refused, by file",
            plugin_refusals.clone(),
        );
        let plan_convergence_seconds = histogram();
        let plan_steps = Family::<Labels1, Counter>::default();
        let plan_restarts = Counter::default();
        let plan_nack_stops = Counter::default();
        let plan_grace_expired = Family::<Labels1, Counter>::default();
        registry.register(
            "plan_convergence_seconds",
            "Time from a change reaching a node to the node acknowledging the last make-before-break step",
            plan_convergence_seconds.clone(),
        );
        registry.register("plan_steps", "Make-before-break steps entered by step", plan_steps.clone());
        registry.register(
            "plan_restarts",
            "Plans restarted by a change before the node converged",
            plan_restarts.clone(),
        );
        registry.register(
            "plan_nack_stops",
            "Plans stopped because the node rejected an update",
            plan_nack_stops.clone(),
        );
        registry.register(
            "plan_grace_expired",
            "Steps that proceeded without an ACK after the grace period by step",
            plan_grace_expired.clone(),
        );
        registry.register("generations", "Intent generations by result", generations.clone());
        let plugin_output_dropped = Family::<Labels1, Counter>::default();
        let limit_hits = Family::<Labels1, Counter>::default();
        let store_reloads = Family::<Labels1, Counter>::default();
        registry.register(
            "store_reloads",
            "Full listings of the intent store after the first, by reason (compacted: the watch missed revisions)",
            store_reloads.clone(),
        );
        registry.register(
            "limit_hits",
            "Times a bound on untrusted input was reached, by limit (see the README's Limits)",
            limit_hits.clone(),
        );
        registry.register(
            "plugin_output_dropped",
            "Plugin output dropped over its per-call caps: stdout and stderr bytes, log lines",
            plugin_output_dropped.clone(),
        );
        registry.register(
            "generation_seconds",
            "Time to load, translate, validate and publish intent",
            generation_seconds.clone(),
        );
        registry.register("plugin_calls", "Plugin translate calls by plugin", plugin_calls.clone());
        registry.register("plugin_seconds", "Seconds a plugin call took, by plugin", plugin_seconds.clone());
        registry.register("plugin_failures", "Generations failed by a plugin, by plugin", plugin_failures.clone());
        registry.register("streams", "Connected xDS streams by api and service", streams.clone());
        registry.register("responses", "Discovery responses sent by api and type", responses.clone());
        registry.register("acks", "Responses acknowledged by type", acks.clone());
        registry.register("nacks", "Responses rejected by type", nacks.clone());
        registry.register("stale_requests", "Requests ignored for a stale nonce by type", stale_requests.clone());
        registry.register(
            "push_ack_seconds",
            "Time from sending a response to its ACK by type",
            push_ack_seconds.clone(),
        );
        registry.register("stream_errors", "Streams closed for a protocol error by reason", stream_errors.clone());
        registry.register(
            "refusals",
            "Clients refused (identity, node ownership) or cut off at a limit, by reason",
            refusals.clone(),
        );
        registry.register("resource_loads", "Resource set loads by result", loads.clone());
        registry.register("resources", "Resources in the default node group by type", resources.clone());
        Metrics {
            registry,
            streams,
            responses,
            acks,
            nacks,
            stale_requests,
            push_ack_seconds,
            stream_errors,
            refusals,
            loads,
            resources,
            generations,
            generation_seconds,
            generation_panics,
            plugin_calls,
            plugin_seconds,
            plugin_failures,
            plugin_refusals,
            plan_convergence_seconds,
            plan_steps,
            plan_restarts,
            plan_nack_stops,
            plan_grace_expired,
            plugin_output_dropped,
            limit_hits,
            store_reloads,
            sync: Mutex::new(()),
            hot: HotSeries::default(),
        }
    }

    pub fn render(&self) -> String {
        self.sync_plugin_counters();
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

impl Metrics {
    /// `acks{type}`.
    pub fn ack(&self, type_url: &str) -> &Counter {
        let i = type_index(type_url);
        self.hot.acks[i].get_or_init(|| self.acks.get_or_create(&by_type(type_url)).clone())
    }

    /// `push_ack_seconds{type}`.
    pub fn push_ack(&self, type_url: &str) -> &Histogram {
        let i = type_index(type_url);
        self.hot.push_ack_seconds[i].get_or_init(|| self.push_ack_seconds.get_or_create(&by_type(type_url)).clone())
    }

    /// `responses{api, type}`, for the two stream APIs (`sotw`, `delta`).
    pub fn response(&self, api: &'static str, type_url: &str) -> &Counter {
        debug_assert!(api == "sotw" || api == "delta", "api {api}");
        let (a, i) = (usize::from(api != "sotw"), type_index(type_url));
        self.hot.responses[a][i].get_or_init(|| self.responses.get_or_create(&by_api_type(api, type_url)).clone())
    }

    /// The plugin host and the bounds on input count in process-wide atomics; bring them over.
    fn sync_plugin_counters(&self) {
        let _one_at_a_time = self.sync.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (what, total) in [
            ("stdio_bytes", xdst_plugin::stdio::DROPPED_BYTES.load(Ordering::Relaxed)),
            ("log_lines", xdst_plugin::DROPPED_LOG_LINES.load(Ordering::Relaxed)),
        ] {
            let c = self.plugin_output_dropped.get_or_create(&label("what", what));
            c.inc_by(total.saturating_sub(c.get()));
        }
        for limit in xdst_core::limits::Limit::ALL {
            let c = self.limit_hits.get_or_create(&label("limit", limit.name()));
            c.inc_by(limit.hits().saturating_sub(c.get()));
        }
    }
}

/// A type URL as a label: one of a fixed set (`lds`, `cds`, ..., or `other`). Clients choose
/// type URLs, and a label value a client chooses would let it grow `/metrics` without bound.
fn type_label(type_url: &str) -> Cow<'static, str> {
    Cow::Borrowed(xdst_core::types::known_short_name(type_url).unwrap_or("other"))
}

fn type_index(type_url: &str) -> usize {
    let label = type_label(type_url);
    TYPE_LABELS.iter().position(|l| *l == label).expect("type_label gives one of TYPE_LABELS")
}

/// `[("type", "cds")]`
pub fn by_type(type_url: &str) -> Labels1 {
    [("type", type_label(type_url).into())]
}

pub fn by_api_type(api: &'static str, type_url: &str) -> Labels2 {
    [("api", api.into()), ("type", type_label(type_url).into())]
}

/// `[("api", "sotw"), ("service", "ads")]`
pub fn by_api_service(api: &'static str, service: &'static str) -> Labels2 {
    [("api", api.into()), ("service", service.into())]
}

/// `[(key, value)]` for a static value.
pub fn label(key: &'static str, value: &'static str) -> Labels1 {
    [(key, value.into())]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33, item 4: a plugin named `m"} 1\nxdst_injected_total{x="1` (or a file named so)
    /// stays inside its label value: escaped, on its own series' line, adding no series.
    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        let name = "m\"} 1\nxdst_injected_total{x=\"1\\";
        m.plugin_calls.get_or_create(&[("plugin", name.to_owned().into())]).inc();
        m.plugin_refusals.get_or_create(&[("file", format!("{name}.wasm").into())]).inc();
        let text = m.render();
        assert!(!text.lines().any(|l| l.starts_with("xdst_injected")), "a series was injected:\n{text}");
        assert!(text.contains(r#"xdst_plugin_calls_total{plugin="m\"} 1\nxdst_injected_total{x=\"1\\"} 1"#), "{text}");
        assert!(text.contains(r#"xdst_plugin_refusals_total{file="m\"} 1\nxdst_injected_total{x=\"1\\.wasm"} 1"#));
        // Plain values are written as they are.
        m.refusals.get_or_create(&label("reason", "admin_host")).inc();
        assert!(m.render().contains("xdst_refusals_total{reason=\"admin_host\"} 1"));
    }
}

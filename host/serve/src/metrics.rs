//! Prometheus metrics, served as text on the admin port's `/metrics`.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use std::borrow::Cow;
use std::sync::OnceLock;

// Label values borrow static strings where they can: metrics are touched on every response
// and ACK of every stream.
pub type Labels2 = [(&'static str, LabelValue); 2];
pub type Labels1 = [(&'static str, LabelValue); 1];

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
    /// Run before each render: other planes bring their process-wide counters over.
    before_render: Vec<Box<dyn Fn() + Send + Sync>>,
    /// Connected streams by API (`sotw`/`delta`) and service (`ads`, `lds`, ...).
    pub streams: Family<Labels2, Gauge>,
    /// Responses sent by API and type (`lds`, `cds`, ...).
    pub responses: Family<Labels2, Counter>,
    pub acks: Family<Labels1, Counter>,
    pub nacks: Family<Labels2, Counter>,
    /// Requests ignored for carrying an old nonce (SOTW-4).
    pub stale_requests: Family<Labels1, Counter>,
    /// Seconds from a response being handed to the transport to its ACK.
    pub push_ack_seconds: Family<Labels1, Histogram>,
    /// Streams closed for a protocol error, by reason.
    pub stream_errors: Family<Labels1, Counter>,
    /// Clients refused or cut off at a limit, by reason (a fixed set, never client-chosen).
    pub refusals: Family<Labels1, Counter>,
    /// New streams that waited for their turn under `--max-new-streams-per-second`.
    pub admission_waits: Counter,
    /// Streams waiting for their turn now.
    pub admission_waiting: Gauge,
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
    /// Rejections analysed at the node that made them, by outcome (design 016, part 3a).
    pub nack_analyses: Family<Labels1, Counter>,
    /// Flow control (design 022): responses out awaiting their answer, set on each scrape.
    pub responses_in_flight: Gauge,
    /// Streams owed a change they are not sent until they answer, set on each scrape.
    pub streams_owed: Gauge,
    /// The age of the oldest change owed to any stream, set on each scrape.
    pub oldest_owed_change_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Changes merged into a later response because one of the type awaited its answer.
    pub changes_merged: Counter,
    /// The allocator's bytes in use and kept free, set on each scrape.
    pub heap_in_use_bytes: Gauge,
    pub heap_free_bytes: Gauge,
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
    /// By [`Step`](xdst_core::plan::Step), in its order (`Converged` is the last).
    plan_steps: [OnceLock<Counter>; xdst_core::plan::Step::Converged as usize + 1],
}

/// The buckets every xdst histogram uses, in seconds.
pub fn histogram() -> Histogram {
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
        let nacks = Family::<Labels2, Counter>::default();
        let stale_requests = Family::<Labels1, Counter>::default();
        let push_ack_seconds = Family::<Labels1, Histogram>::new_with_constructor(histogram as fn() -> Histogram);
        let stream_errors = Family::<Labels1, Counter>::default();
        let refusals = Family::<Labels1, Counter>::default();
        let admission_waits = Counter::default();
        let admission_waiting = Gauge::default();
        let plan_convergence_seconds = histogram();
        let plan_steps = Family::<Labels1, Counter>::default();
        let plan_restarts = Counter::default();
        let plan_nack_stops = Counter::default();
        let plan_grace_expired = Family::<Labels1, Counter>::default();
        let nack_analyses = Family::<Labels1, Counter>::default();
        let responses_in_flight = Gauge::default();
        let streams_owed = Gauge::default();
        let oldest_owed_change_seconds = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        let changes_merged = Counter::default();
        let heap_in_use_bytes = Gauge::default();
        let heap_free_bytes = Gauge::default();
        registry.register(
            "heap_in_use_bytes",
            "Bytes the allocator has given out and not had back (resident memory is this, the free bytes it keeps, \
             stacks and code)",
            heap_in_use_bytes.clone(),
        );
        registry.register(
            "heap_free_bytes",
            "Bytes freed that the allocator keeps for reuse instead of handing them back to the system",
            heap_free_bytes.clone(),
        );
        registry.register(
            "responses_in_flight",
            "Responses sent whose ACK or NACK has not come; at most one per type and stream (design 022)",
            responses_in_flight.clone(),
        );
        registry.register(
            "streams_owed",
            "Streams owed a change they are sent once they answer the response they have",
            streams_owed.clone(),
        );
        registry.register(
            "oldest_owed_change_seconds",
            "Age of the oldest change owed to any stream while it has not answered its last response",
            oldest_owed_change_seconds.clone(),
        );
        registry.register(
            "changes_merged",
            "Changes merged into a stream's next response because it had not answered the last of the type",
            changes_merged.clone(),
        );
        registry.register(
            "nack_analyses",
            "Rejections analysed at the node that made them, by outcome: held (a document held back at that node), \
             split (several in play, tried in halves), nothing, over_cap, never_acknowledged, over_rate",
            nack_analyses.clone(),
        );
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
        registry.register("streams", "Connected xDS streams by api and service", streams.clone());
        registry.register("responses", "Discovery responses sent by api and type", responses.clone());
        registry.register("acks", "Responses acknowledged by type", acks.clone());
        registry.register(
            "nacks",
            "Responses rejected by type and scope: node (the client is not its group's proxy: its rejections are its \
             own) or proxy (they count toward holding a document for its group)",
            nacks.clone(),
        );
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
        registry.register(
            "stream_admission_waits",
            "New streams that waited for their turn under --max-new-streams-per-second",
            admission_waits.clone(),
        );
        registry.register(
            "stream_admission_waiting",
            "Streams waiting for their turn under --max-new-streams-per-second now",
            admission_waiting.clone(),
        );
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
            admission_waits,
            admission_waiting,
            plan_convergence_seconds,
            plan_steps,
            plan_restarts,
            plan_nack_stops,
            plan_grace_expired,
            nack_analyses,
            responses_in_flight,
            streams_owed,
            oldest_owed_change_seconds,
            changes_merged,
            heap_in_use_bytes,
            heap_free_bytes,
            before_render: Vec::new(),
            hot: HotSeries::default(),
        }
    }

    /// The registry, for another plane's metrics to register in at start.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Runs `f` before each render (to bring process-wide counters over).
    pub fn before_render(&mut self, f: impl Fn() + Send + Sync + 'static) {
        self.before_render.push(Box::new(f));
    }

    /// Every registered metric in the Prometheus text format.
    pub fn render(&self) -> String {
        for f in &self.before_render {
            f();
        }
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

    /// `plan_steps{step}`: counted on nearly every change of every node.
    pub fn plan_step(&self, step: xdst_core::plan::Step) -> &Counter {
        self.hot.plan_steps[step as usize]
            .get_or_init(|| self.plan_steps.get_or_create(&label("step", step.as_str())).clone())
    }

    /// `responses{api, type}`, for the two stream APIs (`sotw`, `delta`).
    pub fn response(&self, api: &'static str, type_url: &str) -> &Counter {
        debug_assert!(api == "sotw" || api == "delta", "api {api}");
        let (a, i) = (usize::from(api != "sotw"), type_index(type_url));
        self.hot.responses[a][i].get_or_init(|| self.responses.get_or_create(&by_api_type(api, type_url)).clone())
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

/// `[("type", "cds"), ("scope", scope)]`: a rejection, and whose it is.
pub fn nack(type_url: &str, proxy: bool) -> Labels2 {
    [("type", type_label(type_url).into()), ("scope", if proxy { "proxy" } else { "node" }.into())]
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

    /// Issue 33, item 4: a label value carrying a plugin's or a file's name, such as
    /// `m"} 1\nxdst_injected_total{x="1`, stays inside its value: escaped, on its own
    /// series' line, adding no series.
    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        let name = "m\"} 1\nxdst_injected_total{x=\"1\\";
        m.refusals.get_or_create(&[("reason", name.to_owned().into())]).inc();
        let text = m.render();
        assert!(!text.lines().any(|l| l.starts_with("xdst_injected")), "a series was injected:\n{text}");
        assert!(text.contains(r#"xdst_refusals_total{reason="m\"} 1\nxdst_injected_total{x=\"1\\"} 1"#), "{text}");
        // Plain values are written as they are.
        m.refusals.get_or_create(&label("reason", "admin_host")).inc();
        assert!(m.render().contains("xdst_refusals_total{reason=\"admin_host\"} 1"));
    }
}

//! What `/debug/plugins` shows of the plugins and the last generation.

use std::collections::BTreeMap;

use serde::Serialize;
use xdst_plugin::dir::Loaded;

/// What `/debug/plugins` shows.
#[derive(Default, Clone, Serialize)]
pub struct Status {
    pub intent_dir: String,
    /// The plugins directory, or the configuration file listing the plugins.
    pub plugins_dir: String,
    pub plugins: Vec<PluginReport>,
    /// With a configuration file: each plugin's source and what it resolved to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<crate::generate::plugins::list::SourceReport>,
    pub generations_ok: u64,
    pub generations_failed: u64,
    /// Unix seconds of the last good generation.
    pub last_ok_at: Option<u64>,
    pub last_ok_version: Option<String>,
    /// With `--store`: the store revision the last good generation translated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_ok_revision: Option<crate::generate::store::Revision>,
    /// With `--store`: whether it is reachable, and the revision the mirror holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::generate::store::mirror::StoreState>,
    pub last_error: Option<ErrorReport>,
    pub last_generation: Option<GenerationReport>,
    /// The plugin calls of the last good generation that called any plugin, per node group:
    /// a generation that finds nothing changed for any plugin (a second burst of events for
    /// one write) calls none, and `last_generation` then shows none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_calls: Option<BTreeMap<String, Vec<xdst_plugin::pipeline::PluginCall>>>,
    /// Every plugin's calls since the server started: how many, and how long they took.
    pub timings: BTreeMap<String, PluginTiming>,
    /// Plugin files whose current contents were refused; the previous version of each (if it
    /// had one) keeps serving until the file is fixed.
    pub refused: Vec<RefusalReport>,
    /// What the last good generation held out: files and store keys that did not read, and
    /// documents whose translation failed. Everything else is served.
    pub held: Vec<super::held::HeldReport>,
    /// Documents held back at single nodes that rejected them alone (design 016, part 3a):
    /// the node keeps what it accepted of them, every other node is served them as written.
    /// The first [`MAX_HELD_AT_NODES`], read from the nodes when asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_at_nodes: Vec<HeldAtNodeReport>,
    #[serde(skip_serializing_if = "is_zero")]
    pub held_at_nodes_total: usize,
    /// Kubernetes objects no plugin is for (a Deployment, a ConfigMap), kept out of the last
    /// good generation: the first few, and how many.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<IgnoredReport>,
    #[serde(skip_serializing_if = "is_zero")]
    pub ignored_total: usize,
}

/// The holds at nodes `/debug/plugins` lists.
pub const MAX_HELD_AT_NODES: usize = 100;

/// A document held back at one node.
#[derive(Debug, Clone, Serialize)]
pub struct HeldAtNodeReport {
    pub held: String,
    /// The node, as reports name it.
    pub node: String,
    pub group: String,
    /// Whether the node is one of its group's proxies (its rejections count toward a hold for
    /// the group).
    pub proxy: bool,
    #[serde(rename = "type")]
    pub type_url: String,
    /// The node's message.
    pub error: String,
    pub seconds_ago: f64,
    /// When it is sent to the node again.
    pub retry_in_seconds: f64,
    pub serving: &'static str,
}

impl Status {
    /// With the holds at `nodes` filled in.
    pub fn with_nodes(mut self, nodes: &[xdst_core::changes::NodeSync]) -> Self {
        let all = nodes.iter().flat_map(|n| n.held_at_node.iter().map(move |h| (n, h)));
        self.held_at_nodes_total = all.clone().count();
        self.held_at_nodes = all
            .take(MAX_HELD_AT_NODES)
            .map(|(n, h)| HeldAtNodeReport {
                held: h.document.clone(),
                node: n.label.clone(),
                group: n.group.clone(),
                proxy: n.proxy,
                type_url: h.type_url.clone(),
                error: h.message.to_string(),
                seconds_ago: h.seconds_ago,
                retry_in_seconds: h.retry_in_seconds,
                serving: "what the node accepted",
            })
            .collect();
        self
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A document ignored: no plugin is for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IgnoredReport {
    pub document: String,
    /// Where it was read.
    pub origin: String,
}

impl Status {
    /// The last good generation's warnings that name a document: what the plugins did not
    /// translate as written (a route not accepted, a slice left out).
    pub fn document_problems(&self) -> Vec<DiagnosticReport> {
        let diagnostics = self.last_generation.iter().filter(|g| g.ok).flat_map(|g| &g.diagnostics);
        diagnostics.filter(|d| d.severity == "warning" && d.document.is_some()).cloned().collect()
    }
}

/// A plugin's calls: how many, and their time in milliseconds.
#[derive(Clone, Default, Serialize)]
pub struct PluginTiming {
    pub calls: u64,
    pub total_ms: f64,
    pub last_ms: f64,
    pub max_ms: f64,
}

#[derive(Clone, Serialize)]
pub struct RefusalReport {
    pub file: String,
    /// The refused contents.
    pub digest: String,
    pub reason: String,
    /// Unix seconds.
    pub at: u64,
    /// The digest still serving in its place, if the file had a good version.
    pub serving: Option<String>,
    /// With nothing of it serving: how many documents of its kinds nothing translates.
    #[serde(skip_serializing_if = "is_zero")]
    pub untranslated: usize,
}

impl RefusalReport {
    /// Whether documents go untranslated because of it: nothing of it serves, and no other
    /// plugin takes its kinds.
    pub fn leaves_untranslated(&self) -> bool {
        self.serving.is_none() && self.untranslated > 0
    }
}

#[derive(Clone, Serialize)]
pub struct PluginReport {
    pub name: String,
    pub version: String,
    pub file: String,
    /// Where its code came from: the path, or the registry reference with its digest.
    pub source: String,
    pub digest: String,
    pub kinds: Vec<String>,
    pub phase: &'static str,
    pub granularity: &'static str,
    pub limits: LimitsReport,
    pub config: serde_json::Value,
}

#[derive(Clone, Serialize)]
pub struct LimitsReport {
    pub deadline_ms: u64,
    pub memory_bytes: usize,
    pub output_bytes: usize,
    pub fuel: Option<u64>,
    pub capabilities: Vec<&'static str>,
}

#[derive(Clone, Serialize)]
pub struct ErrorReport {
    pub message: String,
    pub plugin: Option<String>,
    /// Unix seconds.
    pub at: u64,
}

#[derive(Clone, Serialize)]
pub struct GenerationReport {
    pub ok: bool,
    pub elapsed_ms: f64,
    pub documents: usize,
    pub groups: Vec<String>,
    /// Plugins called, with how many documents each was given (per group).
    pub calls: BTreeMap<String, Vec<xdst_plugin::pipeline::PluginCall>>,
    pub resources: usize,
    /// The first [`super::MAX_DIAGNOSTICS_SHOWN`].
    pub diagnostics: Vec<DiagnosticReport>,
    /// How many the generation's plugins reported in all.
    pub diagnostics_total: usize,
}

#[derive(Clone, Serialize)]
pub struct DiagnosticReport {
    pub plugin: String,
    pub severity: &'static str,
    pub message: String,
    pub document: Option<String>,
    pub field: Option<String>,
}

pub(super) fn plugin_report(l: &Loaded) -> PluginReport {
    let info = l.plugin.info();
    let limits = l.plugin.limits();
    PluginReport {
        name: l.name.clone(),
        version: info.version.clone(),
        file: l.file.display().to_string(),
        source: l.source.clone(),
        digest: l.plugin.digest().to_owned(),
        kinds: info.kinds.clone(),
        phase: match info.phase {
            xdst_plugin::wit::Phase::Translate => "translate",
            xdst_plugin::wit::Phase::Patch => "patch",
        },
        granularity: match info.granularity {
            xdst_plugin::wit::Granularity::PerDocument => "per-document",
            xdst_plugin::wit::Granularity::WholeSet => "whole-set",
        },
        limits: LimitsReport {
            deadline_ms: limits.deadline.as_millis() as u64,
            memory_bytes: limits.memory_bytes,
            output_bytes: limits.output_bytes,
            fuel: limits.fuel,
            capabilities: limits.capabilities.names(),
        },
        config: serde_json::from_str(&l.config).unwrap_or(serde_json::Value::Null),
    }
}

pub(super) fn diagnostic_report((plugin, d): &(String, xdst_plugin::wit::Diagnostic)) -> DiagnosticReport {
    DiagnosticReport {
        plugin: plugin.clone(),
        severity: match d.severity {
            xdst_plugin::wit::Severity::Info => "info",
            xdst_plugin::wit::Severity::Warning => "warning",
        },
        message: d.message.clone(),
        document: d.document.clone(),
        field: d.field.clone(),
    }
}

//! Why a generation failed, and how a refused publication is explained.

use std::path::PathBuf;

use xdst_core::cache::Publication;
use xdst_core::decode::DecodeError;
use xdst_core::intent::DuplicateIntent;
use xdst_core::snapshot::Snapshot;
use xdst_plugin::dir::DirError;
use xdst_plugin::pipeline::PipelineError;

/// Why a generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerationError {
    #[error("intent directory {0}: {1}")]
    Dir(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Duplicate(#[from] DuplicateIntent),
    #[error(transparent)]
    Plugins(#[from] DirError),
    #[error("{}{error}", group_prefix(group))]
    Pipeline { group: String, error: PipelineError },
    /// The cache refused the publication (a dangling reference): `explained` names the
    /// documents and plugins behind it.
    #[error("{explained}")]
    Publish {
        explained: String,
        #[source]
        cause: xdst_core::cache::PublishError,
    },
    /// A document in the store that cannot be used (too large, not text, too many).
    #[error(transparent)]
    Store(#[from] crate::generate::store::StoreProblem),
    #[error(transparent)]
    Config(#[from] crate::generate::plugins::list::ConfigError),
    /// A file writes outside the namespace of its directory (`--namespace-dirs`).
    #[error("{0}")]
    Boundary(String),
    /// What a write checked is held out: it does not read, or its translation fails.
    #[error("{error}")]
    Held { held: String, error: String },
    /// A bug: the generation panicked. Its incremental state was dropped; the next one starts
    /// afresh.
    #[error("internal error: the generation panicked ({0}); the last good resources keep serving")]
    Panic(String),
}

/// The most of a generation error's text that the log, `/debug/plugins` and API answers show.
pub const MAX_ERROR_BYTES: usize = 16 << 10;

impl GenerationError {
    /// The error's text, bounded by [`MAX_ERROR_BYTES`]: what every report of it shows.
    pub fn message(&self) -> String {
        xdst_plugin::clip(&self.to_string(), MAX_ERROR_BYTES)
    }

    /// Whether the operator's own setup is at fault (the intent directory, the plugins
    /// directory, the plugin list: a pin, a signature, a source), rather than a document, a
    /// store key or what a plugin made of them. At start the first is fatal, as a bad flag is;
    /// the second leaves `serve` running, not ready, until a good generation.
    pub fn is_setup(&self) -> bool {
        matches!(self, GenerationError::Dir(..) | GenerationError::Plugins(_) | GenerationError::Config(_))
    }

    /// The plugin at fault, if one is.
    pub fn plugin(&self) -> Option<String> {
        match self {
            GenerationError::Pipeline { error, .. } => error.plugin().map(str::to_owned),
            GenerationError::Plugins(DirError::Load { error, .. }) => Some(error.plugin.clone()),
            _ => None,
        }
    }
}

fn group_prefix(group: &str) -> String {
    if group.is_empty() { String::new() } else { format!("node group {group:?}: ") }
}

/// Consistency problems an error lists; the rest are counted.
const MAX_PROBLEMS_SHOWN: usize = 20;

/// Adds, to a publish error, which plugin and intent document produced each resource named.
pub fn explain_publish(e: &xdst_core::cache::PublishError, snapshot: &Snapshot) -> String {
    let mut parts = Vec::new();
    for err in &e.errors {
        let mut s = err.to_string();
        if let xdst_core::consistency::ConsistencyError::Dangling(d) = err
            && let Some(origin) = snapshot.resource(d.from_type, &d.from).and_then(|r| r.origin().map(str::to_owned))
        {
            s.push_str(&format!(" ({origin})"));
        }
        parts.push(s);
    }
    let group = match &e.group {
        Some(g) => format!("node group {g:?}: "),
        None => String::new(),
    };
    let more = parts.len().saturating_sub(MAX_PROBLEMS_SHOWN);
    parts.truncate(MAX_PROBLEMS_SHOWN);
    if more > 0 {
        parts.push(format!("and {more} more"));
    }
    format!("{group}refused by the consistency check: {}", parts.join("; "))
}

/// A refused publication, explained with the authors of what it names.
pub(super) fn publish_error(e: xdst_core::cache::PublishError, p: &Publication) -> GenerationError {
    let snap = match &e.group {
        Some(g) => p.groups.get(g).unwrap_or(&p.default),
        None => &p.default,
    };
    GenerationError::Publish { explained: explain_publish(&e, snap), cause: e }
}

//! Every bound on untrusted input counts the times it was reached, so that an operator can
//! see it in `/metrics` (`xdst_limit_hits_total{limit}`) and not only in the error it caused.

use std::sync::atomic::{AtomicU64, Ordering};

/// A bound on untrusted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// A file over `--max-file-size`.
    FileSize,
    /// Nesting past the depth budget (YAML, JSON, protobuf `Any`).
    Nesting,
    /// YAML aliases expanding past the file's budget.
    YamlAliases,
    /// Text (an error, a diagnostic, a name) cut to its limit.
    Text,
    /// Plugin diagnostics past the number kept.
    Diagnostics,
    /// A plugin call's output past its cap.
    PluginOutput,
    /// A plugin call's memory past its cap.
    PluginMemory,
    /// A plugin call's log lines past the number kept.
    PluginLogLines,
    /// A plugin call's stdout or stderr past the bytes kept.
    PluginStdio,
    /// Text an xDS client sent (a NACK message, a user agent) cut to its limit.
    ClientText,
    /// A node id or cluster past its length: the stream is refused (clipping would make it
    /// another node's name).
    NodeName,
}

impl Limit {
    pub const ALL: [Limit; 11] = [
        Limit::FileSize,
        Limit::Nesting,
        Limit::YamlAliases,
        Limit::Text,
        Limit::Diagnostics,
        Limit::PluginOutput,
        Limit::PluginMemory,
        Limit::PluginLogLines,
        Limit::PluginStdio,
        Limit::ClientText,
        Limit::NodeName,
    ];

    /// Its label in `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            Limit::FileSize => "file_size",
            Limit::Nesting => "nesting",
            Limit::YamlAliases => "yaml_aliases",
            Limit::Text => "text",
            Limit::Diagnostics => "diagnostics",
            Limit::PluginOutput => "plugin_output",
            Limit::PluginMemory => "plugin_memory",
            Limit::PluginLogLines => "plugin_log_lines",
            Limit::PluginStdio => "plugin_stdio",
            Limit::ClientText => "client_text",
            Limit::NodeName => "node_name",
        }
    }

    /// Counts one more time the bound was reached.
    pub fn hit(self) {
        HITS[self as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The times it was reached since start.
    pub fn hits(self) -> u64 {
        HITS[self as usize].load(Ordering::Relaxed)
    }
}

static HITS: [AtomicU64; Limit::ALL.len()] = [const { AtomicU64::new(0) }; Limit::ALL.len()];

/// `s` cut to at most `max` bytes (at a character boundary) with its full length noted,
/// counting a hit of `limit` when it had to be cut.
pub fn clip(s: &str, max: usize, limit: Limit) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    limit.hit();
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [cut: {} bytes in all]", &s[..cut], s.len())
}

#[cfg(test)]
mod tests {
    use super::Limit;

    #[test]
    fn each_limit_counts_on_its_own() {
        for (i, l) in Limit::ALL.into_iter().enumerate() {
            assert_eq!(l as usize, i, "ALL is in declaration order");
        }
        let before = (Limit::Nesting.hits(), Limit::PluginStdio.hits());
        Limit::PluginStdio.hit();
        assert!(Limit::PluginStdio.hits() > before.1);
        assert!(Limit::Nesting.hits() >= before.0);
    }
}

//! How much of a plugin's own text is kept: each error or diagnostic message, the diagnostics
//! of one call, the log lines of one call, and its stdout and stderr. Part of a runtime's
//! settings (`RuntimeConfig::text`; `xdst serve --max-plugin-message`, ...); what goes past is
//! cut or dropped, noted, and counted (`xdst_limit_hits_total`).

/// The bounds on a plugin's own text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextLimits {
    /// Bytes of one error, diagnostic or log message.
    pub message_bytes: usize,
    /// Diagnostics kept from one call.
    pub diagnostics: usize,
    /// Log lines kept from one call.
    pub log_lines: usize,
    /// Bytes of stdout, and of stderr, kept from one call.
    pub stdio_bytes: usize,
}

impl Default for TextLimits {
    fn default() -> Self {
        TextLimits { message_bytes: 4096, diagnostics: 20, log_lines: 100, stdio_bytes: 64 << 10 }
    }
}

/// The least of a message kept, whatever `message_bytes` says: enough to tell what it was.
pub const MIN_MESSAGE_BYTES: usize = 64;

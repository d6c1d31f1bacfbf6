//! How much of a plugin's own text is kept: each error or diagnostic message, the diagnostics
//! of one call, the log lines of one call, and its stdout and stderr. Set once at start
//! (`xdst serve --max-plugin-message`, ...); what goes past is cut or dropped, noted, and
//! counted (`xdst_limit_hits_total`).

use std::sync::atomic::{AtomicUsize, Ordering};

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

static MESSAGE_BYTES: AtomicUsize = AtomicUsize::new(4096);
static DIAGNOSTICS: AtomicUsize = AtomicUsize::new(20);
static LOG_LINES: AtomicUsize = AtomicUsize::new(100);
static STDIO_BYTES: AtomicUsize = AtomicUsize::new(64 << 10);

/// Sets the bounds for every plugin call from now on.
pub fn set(limits: TextLimits) {
    MESSAGE_BYTES.store(limits.message_bytes.max(64), Ordering::Relaxed);
    DIAGNOSTICS.store(limits.diagnostics, Ordering::Relaxed);
    LOG_LINES.store(limits.log_lines, Ordering::Relaxed);
    STDIO_BYTES.store(limits.stdio_bytes, Ordering::Relaxed);
}

/// The bounds in force.
pub fn get() -> TextLimits {
    TextLimits {
        message_bytes: MESSAGE_BYTES.load(Ordering::Relaxed),
        diagnostics: DIAGNOSTICS.load(Ordering::Relaxed),
        log_lines: LOG_LINES.load(Ordering::Relaxed),
        stdio_bytes: STDIO_BYTES.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_defaults_are_in_force_until_set() {
        assert_eq!(super::get(), super::TextLimits::default());
    }
}

//! Plugin failures, attributed.

use std::fmt;

/// A plugin's own text (an error message, a diagnostic, a trap) reaches the log,
/// `/debug/plugins` and API answers cut to its runtime's `TextLimits::message_bytes`, noting how long
/// it was. The same for the short strings a plugin names things with (a document id, a field path).
pub const MAX_NAME_BYTES: usize = 512;

/// `s` if it fits in `max` bytes, else its first `max` bytes (at a character boundary) and a
/// note of its full length.
pub fn clip(s: &str, max: usize) -> String {
    xdst_core::limits::clip(s, max, xdst_core::limits::Limit::Text)
}

fn clip_opt(s: Option<String>) -> Option<String> {
    s.map(|s| if s.len() > MAX_NAME_BYTES { clip(&s, MAX_NAME_BYTES) } else { s })
}

fn clip_owned(s: String, max: usize) -> String {
    let max = max.max(crate::text_limits::MIN_MESSAGE_BYTES);
    if s.len() > max { clip(&s, max) } else { s }
}

impl Failure {
    /// The failure with its text bounded (`text`, [`MAX_NAME_BYTES`]).
    pub fn clipped(self, text: crate::TextLimits) -> Failure {
        let clip_owned = |m| clip_owned(m, text.message_bytes);
        match self {
            Failure::Compile(m) => Failure::Compile(clip_owned(m)),
            Failure::Incompatible(m) => Failure::Incompatible(clip_owned(m)),
            Failure::Reported { message, document, field } => {
                Failure::Reported { message: clip_owned(message), document: clip_opt(document), field: clip_opt(field) }
            }
            Failure::Trap(m) => Failure::Trap(clip_owned(m)),
            Failure::Malformed(m) => Failure::Malformed(clip_owned(m)),
            Failure::Host(m) => Failure::Host(clip_owned(m)),
            other => other,
        }
    }
}

/// Bounds a response's diagnostics: at most `text.diagnostics`, each clipped, and one more
/// saying how many were dropped.
pub fn bound_diagnostics(diagnostics: &mut Vec<crate::wit::Diagnostic>, text: crate::TextLimits) {
    let total = diagnostics.len();
    let kept = text.diagnostics;
    diagnostics.truncate(kept);
    for d in diagnostics.iter_mut() {
        d.message = clip_owned(std::mem::take(&mut d.message), text.message_bytes);
        d.document = clip_opt(d.document.take());
        d.field = clip_opt(d.field.take());
    }
    if total > kept {
        xdst_core::limits::Limit::Diagnostics.hit();
        diagnostics.push(crate::wit::Diagnostic {
            severity: crate::wit::Severity::Warning,
            message: format!("{} more diagnostics not kept ({total} in all; xdst keeps {kept} per call)", total - kept),
            document: None,
            field: None,
        });
    }
}

/// Whose fault a failure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The plugin (or the intent it was given): the operator must fix the plugin or intent.
    Guest,
    /// xdst itself (an I/O error on the cache, an engine error).
    Host,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Not a valid component, or compiling it failed.
    Compile(String),
    /// The plugin implements neither the `xdst:plugin@0.1.0` nor the `@0.2.0` world (nor,
    /// for a core module, the core-module ABI), or imports something it was not granted.
    Incompatible(String),
    /// The plugin returned an error of its own (usually about the intent).
    Reported { message: String, document: Option<String>, field: Option<String> },
    /// The call ran past its wall-clock deadline.
    Deadline { limit_ms: u64 },
    /// The plugin tried to grow its memory past the cap.
    Memory { limit_bytes: usize },
    /// The call used up its fuel.
    Fuel { limit: u64 },
    /// The plugin returned more than the output cap.
    OutputTooLarge { bytes: usize, limit_bytes: usize },
    /// The plugin trapped (a panic, `unreachable`, an out-of-bounds access).
    Trap(String),
    /// A core-module plugin broke the core-module ABI: a pointer outside its memory, a
    /// response that is not the contract's JSON.
    Malformed(String),
    /// The host failed (cache I/O, engine setup).
    Host(String),
}

/// A plugin failure, naming the plugin and its digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PluginError {
    /// The plugin's name (from `describe`, or the file it was loaded from).
    pub plugin: String,
    /// `sha256:<hex>` of the component.
    pub digest: String,
    pub failure: Failure,
}

impl PluginError {
    pub fn fault(&self) -> Fault {
        match self.failure {
            Failure::Host(_) => Fault::Host,
            _ => Fault::Guest,
        }
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = self.digest.get(..19).unwrap_or(&self.digest);
        write!(f, "plugin {:?} ({short}): ", self.plugin)?;
        match &self.failure {
            Failure::Compile(e) => write!(f, "not a loadable plugin: {e}"),
            Failure::Incompatible(e) => write!(f, "{e}"),
            Failure::Reported { message, document, field } => {
                match (document, field) {
                    (Some(d), Some(fl)) => write!(f, "{d} field {fl}: ")?,
                    (Some(d), None) => write!(f, "{d}: ")?,
                    (None, Some(fl)) => write!(f, "field {fl}: ")?,
                    (None, None) => {}
                }
                write!(f, "{message}")
            }
            Failure::Deadline { limit_ms } => write!(f, "stopped after its {limit_ms} ms deadline"),
            Failure::Memory { limit_bytes } => write!(f, "stopped at its memory cap of {} MiB", limit_bytes >> 20),
            Failure::Fuel { limit } => write!(f, "ran out of fuel ({limit})"),
            Failure::OutputTooLarge { bytes, limit_bytes } => {
                write!(f, "returned {bytes} bytes, over its output cap of {limit_bytes}")
            }
            Failure::Trap(e) => write!(f, "trapped: {e}"),
            Failure::Malformed(e) => write!(f, "broke the core-module ABI: {e}"),
            Failure::Host(e) => write!(f, "host error (not the plugin's fault): {e}"),
        }
    }
}

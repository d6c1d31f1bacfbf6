//! Plugin failures, attributed.

use std::fmt;

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
    /// The component does not implement the `xdst:plugin@0.1.0` world, or imports
    /// something it was not granted.
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

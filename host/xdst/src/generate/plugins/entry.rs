//! One plugin of a `plugins` list (the configuration file's, or the store's) and the checks
//! every entry passes when the list is read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use xdst_plugin::dir::{LimitSettings, Settings};
use xdst_plugin::pipeline::FailurePolicy;

use crate::generate::plugins::distribution::Source;

/// A problem with the configuration file, naming the file and the field.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}{}: {message}", field.as_ref().map(|f| format!(" field {f}")).unwrap_or_default())]
pub struct ConfigError {
    pub file: String,
    pub field: Option<String>,
    pub message: String,
}

/// One plugin of the `plugins` list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginEntry {
    /// The instance's name: what errors, attribution and `/debug/plugins` call it.
    pub name: String,
    /// A path, an `https://` URL, or `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:...`).
    pub source: String,
    /// The SHA-256 the plugin's bytes must have.
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    #[serde(default)]
    pub limits: LimitSettings,
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Require a detached ed25519 signature over the plugin's digest.
    #[serde(default)]
    pub signature: Option<SignatureSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SignatureSettings {
    /// The signer's public key (PEM). The signature is `<path>.sig` or `<url>.sig` beside the
    /// plugin, or the registry's `sha256-<hex>.sig` tag for an OCI source.
    pub public_key: PathBuf,
}

/// Checks every entry: names, sources, limits, pins. The error names the field.
pub fn check_plugins(entries: &[PluginEntry], base: &Path) -> Result<(), (String, String)> {
    let mut names = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        let ok = !e.name.is_empty()
            && e.name.len() <= 64
            && e.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !e.name.starts_with('-');
        if !ok {
            return Err((
                format!("plugins[{i}].name"),
                format!("{:?} is not a plugin name (lowercase letters, digits and dashes)", e.name),
            ));
        }
        if let Some(j) = names.insert(e.name.clone(), i) {
            return Err((format!("plugins[{i}].name"), format!("{:?} is also the name of plugins[{j}]", e.name)));
        }
        Source::parse(&e.source, base).map_err(|m| (format!("plugins[{i}].source"), m.to_string()))?;
        let settings = settings_of(e);
        settings.limits().map_err(|(f, m)| (format!("plugins[{i}].{f}"), m))?;
        settings.pin().map_err(|m| (format!("plugins[{i}].sha256"), m))?;
    }
    Ok(())
}

/// The plugin host's settings of an entry.
pub fn settings_of(e: &PluginEntry) -> Settings {
    Settings {
        config: e.config.clone(),
        priority: e.priority,
        failure_policy: e.failure_policy,
        limits: e.limits.clone(),
        capabilities: e.capabilities.clone(),
        sha256: e.sha256.clone(),
    }
}

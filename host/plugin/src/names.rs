//! What a plugin may call itself. A plugin's name, version and kinds reach logs, `/metrics`
//! labels, `/debug/plugins`, the status page and error messages, so each must be a plain
//! identifier: a plugin whose description says otherwise is refused at load, naming the field.
//!
//! - `name`: 1 to [`MAX_NAME`] ASCII letters, digits, `-`, `_` or `.`, starting with a letter
//!   or digit (`gateway-api`).
//! - `version`: empty, or up to [`MAX_VERSION`] ASCII letters, digits, `-`, `_`, `.` or `+`,
//!   starting with a letter or digit (`1.2.0-rc.1+build.5`).
//! - each of `kinds`: a `Kind`, or `group/Kind` as Kubernetes spells them
//!   (`gateway.networking.k8s.io/HTTPRoute`, `core/Service`): a group of lowercase letters,
//!   digits, `-` and `.`; a kind of letters, digits, `-`, `_` and `.`, starting with a letter;
//!   at most [`MAX_KIND`] bytes in all.

use crate::wit::PluginInfo;

/// The longest plugin name.
pub const MAX_NAME: usize = 63;
/// The longest plugin version.
pub const MAX_VERSION: usize = 64;
/// The longest kind, group included.
pub const MAX_KIND: usize = 253;

/// A field of a plugin's description that is not a plain identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("describe: field {field}: {value:?} is not a plain identifier ({rule})")]
pub struct BadName {
    /// `name`, `version` or `kinds[i]`.
    pub field: String,
    /// The value, clipped.
    pub value: String,
    /// What the field may hold.
    pub rule: &'static str,
}

const NAME_RULE: &str = "1-63 ASCII letters, digits, '-', '_' or '.', starting with a letter or digit";
const VERSION_RULE: &str = "up to 64 ASCII letters, digits, '-', '_', '.' or '+', starting with a letter or digit";
const KIND_RULE: &str = "Kind or group/Kind: a group of lowercase letters, digits, '-' and '.', a kind of letters, \
                         digits, '-', '_' and '.' starting with a letter; 253 bytes at most";

/// Checks a plugin's description: its name, version and every kind.
pub fn check(info: &PluginInfo) -> Result<(), BadName> {
    let bad = |field: String, value: &str, rule| BadName { field, value: crate::error::clip(value, 64), rule };
    if !is_name(&info.name) {
        return Err(bad("name".into(), &info.name, NAME_RULE));
    }
    if !is_version(&info.version) {
        return Err(bad("version".into(), &info.version, VERSION_RULE));
    }
    for (i, kind) in info.kinds.iter().enumerate() {
        if !is_kind(kind) {
            return Err(bad(format!("kinds[{i}]"), kind, KIND_RULE));
        }
    }
    Ok(())
}

fn starts_alphanumeric(s: &str) -> bool {
    s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// A plugin name: see the module's documentation.
pub fn is_name(s: &str) -> bool {
    s.len() <= MAX_NAME
        && starts_alphanumeric(s)
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_version(s: &str) -> bool {
    s.is_empty()
        || s.len() <= MAX_VERSION
            && starts_alphanumeric(s)
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'+'))
}

fn is_kind(s: &str) -> bool {
    let (group, kind) = match s.split_once('/') {
        Some((g, k)) => (Some(g), k),
        None => (None, s),
    };
    let group_ok = group.is_none_or(|g| {
        starts_alphanumeric(g)
            && g.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    });
    s.len() <= MAX_KIND
        && group_ok
        && kind.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wit::{Granularity, Phase};

    fn info(name: &str, version: &str, kinds: &[&str]) -> PluginInfo {
        PluginInfo {
            name: name.into(),
            version: version.into(),
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            phase: Phase::Translate,
            granularity: Granularity::WholeSet,
        }
    }

    /// Issue 33, item 4: the names, versions and kinds this repository's plugins use load.
    #[test]
    fn plain_identifiers_pass() {
        let kinds = ["Service", "HttpGateway", "gateway.networking.k8s.io/HTTPRoute", "core/Secret", "Split"];
        assert_eq!(check(&info("gateway-api", "0.3.1", &kinds)), Ok(()));
        assert_eq!(check(&info("core-adversary", "1.2.0-rc.1+build.5", &[])), Ok(()));
        assert_eq!(check(&info("x", "", &[])), Ok(()));
        assert_eq!(check(&info(&"n".repeat(MAX_NAME), "1", &[])), Ok(()));
    }

    /// Issue 33, item 4: a name, version or kind that is not a plain identifier is refused,
    /// naming the field.
    #[test]
    fn anything_else_is_refused_naming_the_field() {
        let injected = "m\"} 1\nxdst_injected_total{x=\"1";
        for (i, field) in [
            (info(injected, "1", &[]), "name"),
            (info("<img src=x onerror=alert(1)>", "1", &[]), "name"),
            (info("", "1", &[]), "name"),
            (info("-x", "1", &[]), "name"),
            (info(&"n".repeat(MAX_NAME + 1), "1", &[]), "name"),
            (info("ok", "1.0 <b>", &[]), "version"),
            (info("ok", "1\n", &[]), "version"),
            (info("ok", "1", &["Service", "Bad Kind"]), "kinds[1]"),
            (info("ok", "1", &["Gateway.Networking/HTTPRoute"]), "kinds[0]"),
            (info("ok", "1", &["core/"]), "kinds[0]"),
            (info("ok", "1", &["a/b/C"]), "kinds[0]"),
            (info("ok", "1", &[&format!("g/{}", "K".repeat(MAX_KIND))]), "kinds[0]"),
        ] {
            let e = check(&i).expect_err(field);
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().starts_with(&format!("describe: field {field}: ")), "{e}");
            assert!(!e.to_string().contains('\n'), "the value is quoted: {e}");
        }
    }
}

//! Value checks serde cannot express; each returns what is wrong, for the caller to attach to
//! a document and field.

use std::net::IpAddr;

/// What Envoy's `retry_on` accepts for HTTP routes (gRPC conditions included).
pub const HTTP_RETRY_ON: &[&str] = &[
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// What proxyless gRPC clients accept in `retry_on`.
pub const GRPC_RETRY_ON: &[&str] = &["cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"];

/// A reference to another document's name (a Service): the same rules the host applies to
/// `metadata.name`.
pub fn name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > 253 {
        return Err(format!("{name:?} is longer than 253 characters"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)) {
        return Err(format!("{name:?} may contain only letters, digits, '-', '.' and '_'"));
    }
    Ok(())
}

/// Listener and EDS endpoint addresses are IP literals: Envoy does not resolve them.
pub fn ip(address: &str) -> Result<IpAddr, String> {
    address.parse().map_err(|_| format!("{address:?} is not an IP address (Envoy does not resolve names here)"))
}

/// A weight in a split or a locality: at least 1.
pub fn weight(weight: u32) -> Result<(), String> {
    if weight == 0 {
        return Err("must be at least 1 (remove the entry to send it nothing)".into());
    }
    Ok(())
}

/// A virtual host domain: `example.com`, `example.com:8080`, `*`, or one wildcard at either end
/// (`*.example.com`, `example.*`).
pub fn domain(domain: &str) -> Result<(), String> {
    if domain.is_empty() {
        return Err("must not be empty".into());
    }
    if domain.chars().any(|c| c.is_whitespace() || c.is_control() || c == '/') {
        return Err(format!("{domain:?} is not a hostname"));
    }
    let stars = domain.matches('*').count();
    if stars > 1 || (stars == 1 && !domain.starts_with('*') && !domain.ends_with('*')) {
        return Err(format!("{domain:?}: a wildcard must be the first or last character, once (*.example.com)"));
    }
    Ok(())
}

/// A header name in a matcher (pseudo-headers such as `:method` allowed) or in a mutation
/// (`mutation`: Envoy refuses to add or remove pseudo-headers and `host`).
pub fn header_name(name: &str, mutation: bool) -> Result<(), String> {
    let token = name.strip_prefix(':').unwrap_or(name);
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
        return Err(format!("{name:?} is not a valid header name"));
    }
    if mutation && (name.starts_with(':') || name.eq_ignore_ascii_case("host")) {
        return Err(format!("{name:?} cannot be changed here (pseudo-headers and host are off limits)"));
    }
    Ok(())
}

/// A count that must be at least 1 (health check thresholds).
pub fn at_least_one(n: u32) -> Result<(), String> {
    if n == 0 {
        return Err("must be at least 1".into());
    }
    Ok(())
}

pub fn header_value(value: &str) -> Result<(), String> {
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err("must not contain CR, LF or NUL".into());
    }
    Ok(())
}

/// A path prefix or exact path: starts with `/`.
pub fn path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("{path:?} must start with '/'"));
    }
    Ok(())
}

/// RE2 syntax, checked with Rust's regex parser (the two agree on syntax; neither has
/// look-around or back-references).
pub fn regex(re: &str) -> Result<(), String> {
    if re.is_empty() {
        return Err("must not be empty".into());
    }
    regex_syntax::ast::parse::Parser::new()
        .parse(re)
        .map(|_| ())
        .map_err(|e| format!("invalid regex {re:?}: {}", e.kind()))
}

/// Normalises a comma-separated `retry_on` list (trimmed, no empty items) and checks each
/// condition against `allowed`.
pub fn retry_on(on: &str, allowed: &[&str]) -> Result<String, String> {
    let mut out = String::with_capacity(on.len());
    for condition in on.split(',').map(str::trim) {
        if !allowed.contains(&condition) {
            return Err(format!("unknown retry condition {condition:?} (one of: {})", allowed.join(", ")));
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(condition);
    }
    Ok(out)
}

pub fn positive(d: std::time::Duration) -> Result<(), String> {
    if d.is_zero() {
        return Err("must be longer than 0s".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        for ok in ["*", "example.com", "*.example.com", "example.*", "a.b:8080"] {
            assert!(domain(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a.*.com", "*.*", "a b", "a/b"] {
            assert!(domain(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn header_names() {
        assert!(header_name(":method", false).is_ok());
        assert!(header_name(":method", true).is_err());
        assert!(header_name("Host", true).is_err());
        assert!(header_name("x-env", true).is_ok());
        assert!(header_name("bad header", false).is_err());
        assert!(header_name("", false).is_err());
    }

    #[test]
    fn regexes() {
        assert!(regex("^/v[0-9]+/.*").is_ok());
        assert!(regex("(?P<id>[a-z]+)").is_ok());
        assert!(regex("a(b").is_err());
        assert!(regex("[z-a]").is_err());
        assert!(regex("*a").is_err());
    }

    #[test]
    fn retry_conditions() {
        assert_eq!(retry_on(" 5xx, reset ", HTTP_RETRY_ON).as_deref(), Ok("5xx,reset"));
        assert!(retry_on("5xx,", HTTP_RETRY_ON).is_err());
        assert!(retry_on("5xx", GRPC_RETRY_ON).is_err());
        assert!(retry_on("unavailable,cancelled", GRPC_RETRY_ON).is_ok());
    }
}

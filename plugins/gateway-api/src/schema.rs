//! What the Gateway API CRDs' own schema refuses at admission (limits, patterns, ranges and
//! the CEL rules of the standard channel), checked here because files and the intent API have
//! no Kubernetes API server in front of them. A route that breaks one is not Accepted
//! (`UnsupportedValue`, naming the field), and none of it is translated.

use crate::model::{Filter, HttpRouteMatch, HttpRouteRule, HttpRouteSpec};

type Refusal = (&'static str, String);

fn refuse(at: String, why: impl std::fmt::Display) -> Result<(), Refusal> {
    Err(("UnsupportedValue", format!("{at}: {why} (the Gateway API schema refuses it)")))
}

fn max_items<T>(items: &[T], max: usize, at: &str) -> Result<(), Refusal> {
    if items.len() > max {
        return refuse(at.to_owned(), format_args!("{} items, at most {max}", items.len()));
    }
    Ok(())
}

/// A DNS label of RFC 1123: lowercase letters, digits and `-`, not starting or ending with `-`.
fn label(l: &str) -> bool {
    !l.is_empty()
        && l.len() <= 63
        && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !l.starts_with('-')
        && !l.ends_with('-')
}

/// `Hostname`: at most 253 characters of RFC 1123 labels, optionally prefixed with `*.`.
fn hostname(h: &str, wildcard: bool) -> bool {
    let rest = match h.strip_prefix("*.") {
        Some(rest) if wildcard => rest,
        _ => h,
    };
    !h.is_empty() && h.len() <= 253 && rest.split('.').all(label)
}

/// An HTTP header name (a token of RFC 7230), at most 256 characters.
fn header_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= 256 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The CEL rules on an `Exact` or `PathPrefix` path value.
fn path_problem(p: &str) -> Option<&'static str> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@%".contains(&b);
    if !p.starts_with('/') {
        return Some("must be an absolute path starting with /");
    }
    if p.len() > 1024 {
        return Some("longer than 1024 characters");
    }
    if !p.bytes().all(allowed) {
        return Some("may contain only the characters of a URL path (no ?, # or spaces)");
    }
    let lower = p.to_ascii_lowercase();
    for bad in ["//", "/./", "/../", "%2f"] {
        if lower.contains(bad) {
            return Some("must not contain //, /./, /../ or %2f");
        }
    }
    if p.ends_with("/..") || p.ends_with("/.") {
        return Some("must not end with /. or /..");
    }
    None
}

/// `Duration`: one to four `<1-5 digits><h|m|s|ms>` parts.
fn duration(d: &str) -> bool {
    let mut parts = 0;
    let mut rest = d;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if !(1..=5).contains(&digits) {
            return false;
        }
        rest = &rest[digits..];
        rest = if let Some(r) = rest.strip_prefix("ms") {
            r
        } else if let Some(r) = rest.strip_prefix(['h', 'm', 's']) {
            r
        } else {
            return false;
        };
        parts += 1;
    }
    (1..=4).contains(&parts)
}

/// The first thing in `spec` the CRD's schema refuses.
pub fn route(spec: &HttpRouteSpec) -> Result<(), Refusal> {
    max_items(&spec.parent_refs, 32, "spec.parentRefs")?;
    max_items(&spec.hostnames, 16, "spec.hostnames")?;
    for (i, h) in spec.hostnames.iter().enumerate() {
        if !hostname(h, true) {
            return refuse(format!("spec.hostnames[{i}] {h:?}"), "not a hostname of at most 253 characters (RFC 1123)");
        }
    }
    max_items(&spec.rules, 16, "spec.rules")?;
    for (r, rule) in spec.rules.iter().enumerate() {
        rule_schema(rule, &format!("spec.rules[{r}]"))?;
    }
    Ok(())
}

fn rule_schema(rule: &HttpRouteRule, at: &str) -> Result<(), Refusal> {
    max_items(&rule.matches, 64, &format!("{at}.matches"))?;
    for (m, mat) in rule.matches.iter().enumerate() {
        match_schema(mat, &format!("{at}.matches[{m}]"))?;
    }
    max_items(&rule.filters, 16, &format!("{at}.filters"))?;
    max_items(&rule.backend_refs, 16, &format!("{at}.backendRefs"))?;
    for (f, filter) in rule.filters.iter().enumerate() {
        filter_schema(filter, &format!("{at}.filters[{f}]"))?;
    }
    for (b, backend) in rule.backend_refs.iter().enumerate() {
        let at = format!("{at}.backendRefs[{b}]");
        if backend.port == Some(0) {
            return refuse(format!("{at}.port"), "must be between 1 and 65535");
        }
        if backend.weight.is_some_and(|w| w > 1_000_000) {
            return refuse(format!("{at}.weight"), "must be between 0 and 1000000");
        }
        max_items(&backend.filters, 16, &format!("{at}.filters"))?;
        for (f, filter) in backend.filters.iter().enumerate() {
            filter_schema(filter, &format!("{at}.filters[{f}]"))?;
        }
    }
    if let Some(t) = &rule.timeouts {
        for (name, value) in [("request", &t.request), ("backendRequest", &t.backend_request)] {
            if let Some(v) = value
                && !duration(v)
            {
                return refuse(format!("{at}.timeouts.{name} {v:?}"), "not a duration like 1h30m (1-5 digits a part)");
            }
        }
    }
    Ok(())
}

fn match_schema(mat: &HttpRouteMatch, at: &str) -> Result<(), Refusal> {
    if let Some(p) = &mat.path {
        let kind = p.kind.as_deref().unwrap_or("PathPrefix");
        let value = p.value.as_deref().unwrap_or("/");
        if matches!(kind, "Exact" | "PathPrefix")
            && let Some(why) = path_problem(value)
        {
            return refuse(format!("{at}.path.value {value:?}"), why);
        }
    }
    max_items(&mat.headers, 16, &format!("{at}.headers"))?;
    max_items(&mat.query_params, 16, &format!("{at}.queryParams"))?;
    for (i, h) in mat.headers.iter().enumerate() {
        if !header_name(&h.name) {
            return refuse(format!("{at}.headers[{i}].name {:?}", h.name), "not an HTTP header name");
        }
        if h.value.is_empty() || h.value.len() > 4096 {
            return refuse(format!("{at}.headers[{i}].value"), "must be 1 to 4096 characters");
        }
    }
    Ok(())
}

fn filter_schema(filter: &Filter, at: &str) -> Result<(), Refusal> {
    for (name, modifier) in [
        ("requestHeaderModifier", &filter.request_header_modifier),
        ("responseHeaderModifier", &filter.response_header_modifier),
    ] {
        let Some(m) = modifier else { continue };
        let at = format!("{at}.{name}");
        for (list, headers) in [("set", &m.set), ("add", &m.add)] {
            max_items(headers, 16, &format!("{at}.{list}"))?;
            for (i, h) in headers.iter().enumerate() {
                if !header_name(&h.name) {
                    return refuse(format!("{at}.{list}[{i}].name {:?}", h.name), "not an HTTP header name");
                }
                if h.value.is_empty() || h.value.len() > 4096 {
                    return refuse(format!("{at}.{list}[{i}].value"), "must be 1 to 4096 characters");
                }
            }
        }
        max_items(&m.remove, 16, &format!("{at}.remove"))?;
    }
    if let Some(r) = &filter.request_redirect {
        let at = format!("{at}.requestRedirect");
        if r.port == Some(0) {
            return refuse(format!("{at}.port"), "must be between 1 and 65535");
        }
        if let Some(h) = &r.hostname
            && !hostname(h, false)
        {
            return refuse(format!("{at}.hostname {h:?}"), "not a hostname of at most 253 characters (RFC 1123)");
        }
        if let Some(code) = r.status_code
            && ![301, 302, 303, 307, 308].contains(&code)
        {
            return refuse(format!("{at}.statusCode"), "must be 301, 302, 303, 307 or 308");
        }
    }
    if let Some(h) = filter.url_rewrite.as_ref().and_then(|u| u.hostname.as_ref())
        && !hostname(h, false)
    {
        return refuse(
            format!("{at}.urlRewrite.hostname {h:?}"),
            "not a hostname of at most 253 characters (RFC 1123)",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> HttpRouteSpec {
        serde_json::from_value(json).unwrap()
    }

    /// Issue 35: what the same runs accepted and served, and the rows the CRD refuses first.
    #[test]
    fn what_admission_would_refuse_is_refused() {
        let refused = |j: serde_json::Value| route(&spec(j)).unwrap_err().1;
        let e = refused(
            serde_json::json!({"rules": [{"filters": [{"type": "RequestRedirect", "requestRedirect": {"port": 0}}]}]}),
        );
        assert!(e.contains("spec.rules[0].filters[0].requestRedirect.port"), "{e}");
        let e = refused(serde_json::json!({"hostnames": ["a".repeat(300)]}));
        assert!(e.contains("spec.hostnames[0]"), "{e}");
        let many: Vec<_> = (0..20_000).map(|_| serde_json::json!({"path": {"value": "/"}})).collect();
        let e = refused(serde_json::json!({"rules": [{"matches": many}]}));
        assert!(e.contains("spec.rules[0].matches: 20000 items, at most 64"), "{e}");
        let e = refused(serde_json::json!({"rules": [{"matches": [{"path": {"value": "/search?q"}}]}]}));
        assert!(e.contains("spec.rules[0].matches[0].path.value"), "{e}");
        let e = refused(serde_json::json!({"rules": [{"timeouts": {"request": "3000000h"}}]}));
        assert!(e.contains("timeouts.request"), "{e}");
        let e = refused(serde_json::json!({"hostnames": ["web\n.example"]}));
        assert!(e.contains("spec.hostnames[0]"), "{e}");
        let e = refused(serde_json::json!({"rules": [{"matches": [{"headers": [{"name": "", "value": "x"}]}]}]}));
        assert!(e.contains("headers[0].name"), "{e}");
    }

    #[test]
    fn what_admission_takes_passes() {
        let ok = spec(serde_json::json!({
            "hostnames": ["*.example.com", "web.example.com"],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/v2/items"}, "headers": [{"name": "X-Team", "value": "a"}]}],
                "filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "example.org", "port": 8443, "statusCode": 301}}],
                "backendRefs": [{"name": "svc", "port": 80, "weight": 10}],
                "timeouts": {"request": "10s", "backendRequest": "1m30s"},
            }],
        }));
        assert_eq!(route(&ok), Ok(()));
        assert!(duration("500ms") && duration("1h2m3s4ms") && !duration("1h2m3s4ms5s") && !duration("s"));
    }
}

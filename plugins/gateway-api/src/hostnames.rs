//! Hostnames as the Gateway API matches them: exact (`foo.example.com`) or a wildcard of one
//! leading label (`*.example.com`, which matches `a.example.com` and `a.b.example.com`, never
//! `example.com`).

/// Whether `pattern` (exact or wildcard) matches the exact `host`.
pub fn matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => host.len() > suffix.len() && host.ends_with(suffix),
        None => pattern.eq_ignore_ascii_case(host),
    }
}

/// Whether every host `inner` matches is also matched by `outer`.
pub fn covers(outer: &str, inner: &str) -> bool {
    match (outer.strip_prefix('*'), inner.strip_prefix('*')) {
        (Some(o), Some(i)) => i.len() >= o.len() && i.ends_with(o),
        (Some(_), None) => matches(outer, inner),
        (None, Some(_)) => false,
        (None, None) => outer.eq_ignore_ascii_case(inner),
    }
}

/// The hosts both a listener's hostname and a route's hostname match, as one hostname (the
/// more specific of the two), or `None` when they match no host in common.
pub fn intersect(listener: &str, route: &str) -> Option<String> {
    if covers(listener, route) {
        Some(route.to_ascii_lowercase())
    } else if covers(route, listener) {
        Some(listener.to_ascii_lowercase())
    } else {
        None
    }
}

/// How specific a hostname is, greater is more specific: exact names first, then wildcards
/// by length, then `*`.
pub fn specificity(host: &str) -> (bool, usize) {
    (!host.starts_with('*'), host.len())
}

/// The hostnames a route serves on a listener: the intersections of both sides' hostnames,
/// deduplicated, in the route's order. An absent side matches every host. Empty when they
/// have none in common.
pub fn effective(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let listener = listener.unwrap_or("*");
    let mut out: Vec<String> = Vec::new();
    if route.is_empty() {
        out.push(listener.to_ascii_lowercase());
    }
    for r in route {
        if let Some(h) = intersect(listener, r)
            && !out.contains(&h)
        {
            out.push(h);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_one_or_more_leading_labels() {
        assert!(matches("*.example.com", "a.example.com"));
        assert!(matches("*.example.com", "a.b.example.com"));
        assert!(!matches("*.example.com", "example.com"));
        assert!(matches("*", "anything"));
        assert!(matches("Foo.example.com", "foo.example.com"));
    }

    #[test]
    fn intersections_keep_the_more_specific_side() {
        assert_eq!(intersect("*.example.com", "foo.example.com").as_deref(), Some("foo.example.com"));
        assert_eq!(intersect("foo.example.com", "*.example.com").as_deref(), Some("foo.example.com"));
        assert_eq!(intersect("*.example.com", "*.foo.example.com").as_deref(), Some("*.foo.example.com"));
        assert_eq!(intersect("*.foo.example.com", "*.example.com").as_deref(), Some("*.foo.example.com"));
        assert_eq!(intersect("*", "a.b"), Some("a.b".into()));
        assert_eq!(intersect("foo.example.com", "bar.example.com"), None);
        assert_eq!(intersect("*.example.com", "example.com"), None);
        assert_eq!(effective(None, &[]), ["*"]);
        assert_eq!(effective(Some("*.example.com"), &["a.example.com".into(), "a.org".into()]), ["a.example.com"]);
        assert!(effective(Some("a.org"), &["b.org".into()]).is_empty());
    }
}

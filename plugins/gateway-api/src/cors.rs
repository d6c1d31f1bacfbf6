//! The `CORS` filter: Envoy's CORS HTTP filter sits in every Gateway listener (it does
//! nothing on a route without a policy), and a rule's filter becomes its routes' policy.

use xdst_guest::envoy::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher::MatchPattern};
use xdst_guest::envoy::google::protobuf::BoolValue;

use crate::extensions::CorsPolicy;
use crate::model::Cors;

/// The HTTP filter's name, which a route's `typed_per_filter_config` is keyed by.
pub const FILTER: &str = "envoy.filters.http.cors";

/// A rule's CORS filter as Envoy's per-route policy.
pub fn policy(c: &Cors) -> CorsPolicy {
    CorsPolicy {
        allow_origin_string_match: c.allow_origins.iter().map(|o| origin(o)).collect(),
        allow_methods: c.allow_methods.join(","),
        allow_headers: c.allow_headers.join(","),
        expose_headers: c.expose_headers.join(","),
        max_age: c.max_age.map(|s| s.to_string()).unwrap_or_default(),
        allow_credentials: c.allow_credentials.map(|value| BoolValue { value }),
        // A preflight from an origin the policy does not allow is answered by the gateway
        // itself, without `access-control-allow-origin`, as the upstream conformance suite
        // expects: the route's CORS filter owns preflights, and Envoy's default would forward
        // this one to the backend, whose answer (and its CORS headers, if any) would decide.
        forward_not_matching_preflights: Some(BoolValue { value: false }),
    }
}

/// An `allowOrigins` entry as a matcher: `*` matches every origin, and a `*` in the host
/// (`https://*.example.com`) one or more labels; otherwise the origin exactly.
fn origin(pattern: &str) -> StringMatcher {
    if !pattern.contains('*') {
        return StringMatcher { match_pattern: Some(MatchPattern::Exact(pattern.to_owned())), ..Default::default() };
    }
    let regex = if pattern == "*" {
        ".+".to_owned()
    } else {
        pattern.split('*').map(crate::model::literal).collect::<Vec<_>>().join("[^/:]+")
    };
    StringMatcher {
        match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher { regex, ..Default::default() })),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regex(m: &StringMatcher) -> &str {
        match &m.match_pattern {
            Some(MatchPattern::SafeRegex(r)) => &r.regex,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn origins_become_exact_or_anchored_regexes() {
        assert_eq!(
            origin("https://www.foo.com").match_pattern,
            Some(MatchPattern::Exact("https://www.foo.com".into()))
        );
        assert_eq!(regex(&origin("https://*.bar.com")), r"https://[^/:]+\.bar\.com");
        assert_eq!(regex(&origin("*")), ".+");
        let p = policy(&Cors {
            allow_methods: vec!["GET".into(), "OPTIONS".into()],
            max_age: Some(3600),
            allow_credentials: Some(true),
            ..Default::default()
        });
        assert_eq!((p.allow_methods.as_str(), p.max_age.as_str()), ("GET,OPTIONS", "3600"));
        assert_eq!(p.allow_credentials, Some(BoolValue { value: true }));
        assert_eq!(p.forward_not_matching_preflights, Some(BoolValue { value: false }), "the gateway answers them");
    }
}

//! HTTPRoute rules to Envoy routes: one Envoy route per match, its action from the rule's
//! filters and backendRefs, and the key that orders it among every rule of a virtual host as
//! the specification's precedence says.

use std::collections::BTreeMap;

use xdst_guest::envoy::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, RuntimeFractionalPercent, header_value_option::HeaderAppendAction,
};
use xdst_guest::envoy::envoy::config::route::v3::{
    self as route, DirectResponseAction, HeaderMatcher, QueryParameterMatcher, RedirectAction, RouteAction, RouteMatch,
    WeightedCluster, header_matcher::HeaderMatchSpecifier, query_parameter_matcher::QueryParameterMatchSpecifier,
    redirect_action, route_action, route_match::PathSpecifier, weighted_cluster::ClusterWeight,
};
use xdst_guest::envoy::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher::MatchPattern};
use xdst_guest::envoy::envoy::r#type::v3::{FractionalPercent, fractional_percent::DenominatorType};
use xdst_guest::envoy::google::protobuf::UInt32Value;

use crate::backends::{self, Backend};
use crate::model::{Filter, HeaderModifier, HttpRouteMatch, HttpRouteRule, PathModifier, ValueMatch};
use crate::world::World;

/// Where a route sits among the routes of a virtual host: smaller first.
pub type Precedence = (
    // The route's hostname: exact before wildcard, longer first.
    std::cmp::Reverse<(bool, usize)>,
    // Exact path, then prefix (longer first), then regular expression.
    u8,
    std::cmp::Reverse<usize>,
    // With a method before without; more headers, then more query parameters, first.
    std::cmp::Reverse<(bool, usize, usize)>,
    // The oldest route, then by namespace/name (then kind), then rule and match order.
    (String, String, &'static str, usize, usize),
);

/// A translated rule: its Envoy routes with their precedence, and the backends it uses.
#[derive(Default)]
pub struct Rule {
    pub routes: Vec<(Precedence, route::Route)>,
    /// The backends it uses, and whether a gRPC route does (they then speak HTTP/2).
    pub backends: BTreeMap<Backend, bool>,
}

/// What a rule's owner is: for precedence and ReferenceGrants.
pub struct Owner<'a> {
    pub kind: &'static str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub created: &'a str,
}

/// Whether a rule can be translated at all: a bad regular expression or an unknown filter
/// makes the whole route not Accepted. `Err` has the reason and message.
pub fn check(rule: &HttpRouteRule, at: &str) -> Result<(), (&'static str, String)> {
    for (m, mat) in rule.matches.iter().enumerate() {
        let path = mat.path.as_ref();
        if let Some(p) = path {
            let kind = p.kind.as_deref().unwrap_or("PathPrefix");
            let value = p.value.as_deref().unwrap_or("/");
            match kind {
                "Exact" | "PathPrefix" if !value.starts_with('/') => {
                    return Err((
                        "UnsupportedValue",
                        format!("{at}.matches[{m}].path.value {value:?} must start with /"),
                    ));
                }
                "RegularExpression" => {
                    regex(value).map_err(|e| ("UnsupportedValue", format!("{at}.matches[{m}].path: {e}")))?
                }
                "Exact" | "PathPrefix" => {}
                other => {
                    return Err((
                        "UnsupportedValue",
                        format!("{at}.matches[{m}].path.type {other:?} is not supported"),
                    ));
                }
            }
        }
        for (i, v) in mat.headers.iter().chain(&mat.query_params).enumerate() {
            if v.kind.as_deref() == Some("RegularExpression") {
                regex(&v.value).map_err(|e| ("UnsupportedValue", format!("{at}.matches[{m}] match {i}: {e}")))?;
            }
        }
    }
    for f in rule.filters.iter().chain(rule.backend_refs.iter().flat_map(|b| &b.filters)) {
        if !SUPPORTED_FILTERS.contains(&f.kind.as_str()) {
            return Err(("UnsupportedValue", format!("{at}.filters: type {:?} is not supported", f.kind)));
        }
    }
    Ok(())
}

const SUPPORTED_FILTERS: [&str; 6] =
    ["RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect", "URLRewrite", "RequestMirror", "CORS"];

fn regex(re: &str) -> Result<(), String> {
    regex_syntax::ast::parse::Parser::new()
        .parse(re)
        .map(drop)
        .map_err(|e| format!("invalid regex {re:?}: {}", e.kind()))
}

/// Translates one rule (already [`check`]ed) for a virtual host whose route hostname has
/// `host_specificity`. `listener_port` is the Gateway listener's port and `https` whether it
/// ends TLS, for redirects.
pub fn rule(
    world: &World,
    owner: &Owner<'_>,
    index: usize,
    rule: &HttpRouteRule,
    host_specificity: (bool, usize),
    listener_port: u16,
    https: bool,
) -> Rule {
    let mut out = Rule::default();
    // A rule with one backend: that backend's filters apply to all its traffic, as the rule's
    // own would. With several, each backend's request header changes apply to its share.
    let lifted;
    let rule = match rule.backend_refs.as_slice() {
        [only] if !only.filters.is_empty() => {
            let mut r = rule.clone();
            let filters = std::mem::take(&mut r.backend_refs[0].filters);
            r.filters.extend(filters);
            lifted = r;
            &lifted
        }
        _ => rule,
    };
    let action = action(world, owner, rule, listener_port, https, &mut out);
    let default_match = [HttpRouteMatch::default()];
    let matches = if rule.matches.is_empty() { &default_match[..] } else { &rule.matches };
    for (m, mat) in matches.iter().enumerate() {
        let (path_rank, path_len, path) = path_specifier(mat);
        let mut headers: Vec<HeaderMatcher> = mat.headers.iter().map(header_matcher).collect();
        if let Some(method) = &mat.method {
            headers.push(HeaderMatcher {
                name: ":method".into(),
                header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(exact(method))),
                ..Default::default()
            });
        }
        let query_parameters = mat
            .query_params
            .iter()
            .map(|q| QueryParameterMatcher {
                name: q.name.clone(),
                query_parameter_match_specifier: Some(QueryParameterMatchSpecifier::StringMatch(string_matcher(q))),
            })
            .collect();
        let mut r = route::Route {
            name: format!("{}/{}/rule{index}/match{m}", owner.namespace, owner.name),
            r#match: Some(RouteMatch { path_specifier: Some(path), headers, query_parameters, ..Default::default() }),
            action: Some(action.clone()),
            // The route's own document, so a refusal inside it holds out that route alone.
            metadata: Some(xdst_guest::made_from(&format!("{}/{}/{}", owner.kind, owner.namespace, owner.name))),
            ..Default::default()
        };
        for f in &rule.filters {
            if let Some(h) = &f.request_header_modifier
                && f.kind == "RequestHeaderModifier"
            {
                modify(h, &mut r.request_headers_to_add, &mut r.request_headers_to_remove);
            }
            if let Some(h) = &f.response_header_modifier
                && f.kind == "ResponseHeaderModifier"
            {
                modify(h, &mut r.response_headers_to_add, &mut r.response_headers_to_remove);
            }
            if let Some(c) = &f.cors
                && f.kind == "CORS"
            {
                r.typed_per_filter_config
                    .insert(crate::cors::FILTER.to_owned(), xdst_guest::pack(&crate::cors::policy(c)));
            }
        }
        rewrite_for_match(&mut r, rule, mat);
        let precedence = (
            std::cmp::Reverse(host_specificity),
            path_rank,
            std::cmp::Reverse(path_len),
            std::cmp::Reverse((mat.method.is_some(), mat.headers.len(), mat.query_params.len())),
            (owner.created.to_owned(), format!("{}/{}", owner.namespace, owner.name), owner.kind, index, m),
        );
        if let Some(port) = redirect_port_for_hosts_with_one(&action, https) {
            // Same precedence, pushed first: the virtual host's stable sort keeps it just
            // before its twin.
            out.routes.push((precedence.clone(), with_port_in_host(&r, port)));
        }
        out.routes.push((precedence, r));
    }
    out
}

/// The port a redirect must name for a request whose Host carries a port, when it keeps the
/// request's host and leaves its port out of the URL (the scheme's well-known one): Envoy
/// copies the Host's port into such a URL, so `foo.com:8080` redirected to https would go to
/// `https://foo.com:8080`. Naming the port makes Envoy drop the Host's.
fn redirect_port_for_hosts_with_one(action: &route::route::Action, https: bool) -> Option<u32> {
    let route::route::Action::Redirect(r) = action else { return None };
    if !r.host_redirect.is_empty() || r.port_redirect != 0 {
        return None;
    }
    let scheme = match &r.scheme_rewrite_specifier {
        Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(s)) => s.as_str(),
        _ if https => "https",
        _ => "http",
    };
    Some(if scheme.eq_ignore_ascii_case("https") { 443 } else { 80 })
}

/// `r` for requests whose Host carries a port (`:authority` ends in `:<digits>`; an IPv6
/// literal's last `:` sits inside its brackets), redirecting to `port`.
fn with_port_in_host(r: &route::Route, port: u32) -> route::Route {
    let mut twin = r.clone();
    twin.name.push_str("/host-with-port");
    if let Some(route::route::Action::Redirect(redirect)) = &mut twin.action {
        redirect.port_redirect = port;
    }
    if let Some(m) = &mut twin.r#match {
        m.headers.push(HeaderMatcher {
            name: ":authority".into(),
            header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
                    regex: ".*:[0-9]+".into(),
                    ..Default::default()
                })),
                ..Default::default()
            })),
            ..Default::default()
        });
    }
    twin
}

fn exact(value: &str) -> StringMatcher {
    StringMatcher { match_pattern: Some(MatchPattern::Exact(value.to_owned())), ..Default::default() }
}

fn string_matcher(v: &ValueMatch) -> StringMatcher {
    match v.kind.as_deref() {
        Some("RegularExpression") => StringMatcher {
            match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher { regex: v.value.clone(), ..Default::default() })),
            ..Default::default()
        },
        _ => exact(&v.value),
    }
}

fn header_matcher(v: &ValueMatch) -> HeaderMatcher {
    HeaderMatcher {
        name: v.name.to_ascii_lowercase(),
        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(string_matcher(v))),
        ..Default::default()
    }
}

/// The Envoy path match, with its rank and length for precedence.
fn path_specifier(m: &HttpRouteMatch) -> (u8, usize, PathSpecifier) {
    let kind = m.path.as_ref().and_then(|p| p.kind.as_deref()).unwrap_or("PathPrefix");
    let value = m.path.as_ref().and_then(|p| p.value.clone()).unwrap_or_else(|| "/".into());
    match kind {
        "Exact" => (0, value.len(), PathSpecifier::Path(value)),
        "RegularExpression" => {
            (2, value.len(), PathSpecifier::SafeRegex(RegexMatcher { regex: value, ..Default::default() }))
        }
        _ => {
            // `/abc` matches `/abc`, `/abc/` and `/abc/d`, never `/abcd`; a trailing `/` is
            // not significant.
            let trimmed = value.trim_end_matches('/');
            if trimmed.is_empty() {
                (1, 1, PathSpecifier::Prefix("/".into()))
            } else {
                (1, trimmed.len(), PathSpecifier::PathSeparatedPrefix(trimmed.to_owned()))
            }
        }
    }
}

fn modify(h: &HeaderModifier, add: &mut Vec<HeaderValueOption>, remove: &mut Vec<String>) {
    let option = |name: &str, value: &str, action: HeaderAppendAction| HeaderValueOption {
        header: Some(HeaderValue { key: name.to_ascii_lowercase(), value: value.to_owned(), ..Default::default() }),
        append_action: action as i32,
        ..Default::default()
    };
    add.extend(h.set.iter().map(|x| option(&x.name, &x.value, HeaderAppendAction::OverwriteIfExistsOrAdd)));
    add.extend(h.add.iter().map(|x| option(&x.name, &x.value, HeaderAppendAction::AppendIfExistsOrAdd)));
    remove.extend(h.remove.iter().map(|n| n.to_ascii_lowercase()));
}

fn filter<'a>(rule: &'a HttpRouteRule, kind: &str) -> Option<&'a Filter> {
    rule.filters.iter().find(|f| f.kind == kind)
}

/// The rule's action: a redirect, its backends, or 500 when none resolves.
fn action(
    world: &World,
    owner: &Owner<'_>,
    rule: &HttpRouteRule,
    listener_port: u16,
    https: bool,
    out: &mut Rule,
) -> route::route::Action {
    if let Some(r) = filter(rule, "RequestRedirect").and_then(|f| f.request_redirect.as_ref()) {
        let mut redirect = RedirectAction {
            host_redirect: r.hostname.clone().unwrap_or_default(),
            response_code: match r.status_code.unwrap_or(302) {
                301 => redirect_action::RedirectResponseCode::MovedPermanently,
                303 => redirect_action::RedirectResponseCode::SeeOther,
                307 => redirect_action::RedirectResponseCode::TemporaryRedirect,
                308 => redirect_action::RedirectResponseCode::PermanentRedirect,
                _ => redirect_action::RedirectResponseCode::Found,
            } as i32,
            ..Default::default()
        };
        if let Some(scheme) = &r.scheme {
            redirect.scheme_rewrite_specifier =
                Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(scheme.clone()));
        }
        // The port: as given; else the scheme's well-known one (left out of the URL) when the
        // scheme changes; else the listener's.
        // A well-known port (80 for http, 443 for https) is left out of the URL, unless the
        // request's Host names a port ([`redirect_port_for_hosts_with_one`]).
        let well_known = if https { 443 } else { 80 };
        redirect.port_redirect = match (r.port, r.scheme.as_deref()) {
            (Some(443), Some("https")) => 0,
            (Some(80), Some("http")) => 0,
            (Some(p), _) => u32::from(p),
            (None, Some(_)) => 0,
            (None, None) if listener_port == well_known => 0,
            (None, None) => u32::from(listener_port),
        };
        if let Some(p) = &r.path {
            redirect.path_rewrite_specifier = Some(match p.kind.as_str() {
                "ReplaceFullPath" => redirect_action::PathRewriteSpecifier::PathRedirect(
                    p.replace_full_path.clone().unwrap_or_else(|| "/".into()),
                ),
                _ => redirect_action::PathRewriteSpecifier::PrefixRewrite(
                    p.replace_prefix_match.clone().unwrap_or_else(|| "/".into()),
                ),
            });
        }
        return route::route::Action::Redirect(redirect);
    }

    let mut clusters = Vec::new();
    for r in &rule.backend_refs {
        // One that does not resolve is reported as ResolvedRefs on the route; no traffic goes
        // to it.
        if let Ok(b) = backends::resolve(world, owner.kind, owner.namespace, r) {
            let weight = r.weight.unwrap_or(1);
            if weight > 0 {
                let mut weighted = ClusterWeight {
                    name: b.cluster(),
                    weight: Some(UInt32Value { value: weight }),
                    ..Default::default()
                };
                for h in r.filters.iter().filter(|f| f.kind == "RequestHeaderModifier") {
                    if let Some(h) = &h.request_header_modifier {
                        modify(h, &mut weighted.request_headers_to_add, &mut weighted.request_headers_to_remove);
                    }
                }
                clusters.push(weighted);
            }
            out.backends.insert(b, owner.kind == "GRPCRoute");
        }
    }
    if clusters.is_empty() {
        // No backend to send to: the specification asks for a 500.
        return route::route::Action::DirectResponse(DirectResponseAction { status: 500, ..Default::default() });
    }
    let plain = |c: &ClusterWeight| c.request_headers_to_add.is_empty() && c.request_headers_to_remove.is_empty();
    let mut action = RouteAction {
        cluster_specifier: Some(if clusters.len() == 1 && plain(&clusters[0]) {
            route_action::ClusterSpecifier::Cluster(clusters.remove(0).name)
        } else {
            route_action::ClusterSpecifier::WeightedClusters(WeightedCluster { clusters, ..Default::default() })
        }),
        ..Default::default()
    };
    if let Some(h) = filter(rule, "URLRewrite").and_then(|f| f.url_rewrite.as_ref()).and_then(|u| u.hostname.clone()) {
        action.host_rewrite_specifier = Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(h));
    }
    for f in rule.filters.iter().filter(|f| f.kind == "RequestMirror") {
        let Some(m) = &f.request_mirror else { continue };
        if let Ok(b) = backends::resolve(world, owner.kind, owner.namespace, &m.backend_ref) {
            let (numerator, denominator) = match (&m.fraction, m.percent) {
                (Some(f), _) => (f.numerator, f.denominator.unwrap_or(100)),
                (None, Some(p)) => (p, 100),
                (None, None) => (100, 100),
            };
            // Envoy takes a fraction of a hundred, ten thousand or a million.
            let per_million = (u64::from(numerator) * 1_000_000 / u64::from(denominator.max(1))).min(1_000_000) as u32;
            action.request_mirror_policies.push(route_action::RequestMirrorPolicy {
                cluster: b.cluster(),
                runtime_fraction: Some(RuntimeFractionalPercent {
                    default_value: Some(FractionalPercent {
                        numerator: per_million,
                        denominator: DenominatorType::Million as i32,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            });
            out.backends.insert(b, owner.kind == "GRPCRoute");
        }
    }
    // `request` bounds the whole request, retries included; `backendRequest` each attempt.
    // `0s` means no timeout, as it does for Envoy.
    let per_try = rule.timeouts.as_ref().and_then(|t| t.backend_request.as_deref()).and_then(duration);
    if let Some(request) = rule.timeouts.as_ref().and_then(|t| t.request.as_deref()).and_then(duration) {
        action.timeout = Some(xdst_guest::build::duration(request));
    }
    if rule.retry.is_some() || per_try.is_some() {
        let policy = action.retry_policy.get_or_insert_with(Default::default);
        let mut on = vec!["connect-failure", "reset"];
        policy.num_retries = Some(UInt32Value { value: 0 });
        if let Some(r) = &rule.retry {
            if !r.codes.is_empty() {
                on.push("retriable-status-codes");
            }
            policy.retriable_status_codes = r.codes.clone();
            policy.num_retries = Some(UInt32Value { value: r.attempts.unwrap_or(1) });
            if let Some(b) = r.backoff.as_deref().and_then(duration) {
                policy.retry_back_off = Some(route::retry_policy::RetryBackOff {
                    base_interval: Some(xdst_guest::build::duration(b)),
                    ..Default::default()
                });
            }
        }
        if let Some(t) = per_try.filter(|t| !t.is_zero()) {
            policy.per_try_timeout = Some(xdst_guest::build::duration(t));
            on.push("per-try-timeout");
        }
        policy.retry_on = on.join(",");
    }
    route::route::Action::Route(action)
}

/// A Gateway API duration (GEP-2257): `<number><unit>` terms, units `h`, `m`, `s`, `ms`.
pub fn duration(s: &str) -> Option<std::time::Duration> {
    let mut total = std::time::Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (std::time::Duration::from_millis(1), 2)
        } else if rest.starts_with('h') {
            (std::time::Duration::from_secs(3600), 1)
        } else if rest.starts_with('m') {
            (std::time::Duration::from_secs(60), 1)
        } else if rest.starts_with('s') {
            (std::time::Duration::from_secs(1), 1)
        } else {
            return None;
        };
        total += unit * u32::try_from(n).ok()?;
        rest = &rest[len..];
    }
    Some(total)
}

/// A URLRewrite's path depends on the match it rewrites: a prefix replaced after a prefix
/// match, or the whole path.
fn rewrite_for_match(r: &mut route::Route, rule: &HttpRouteRule, m: &HttpRouteMatch) {
    let Some(PathModifier { kind, replace_full_path, replace_prefix_match }) =
        filter(rule, "URLRewrite").and_then(|f| f.url_rewrite.as_ref()).and_then(|u| u.path.as_ref())
    else {
        return;
    };
    let Some(route::route::Action::Route(action)) = &mut r.action else { return };
    let full = |to: &str| xdst_guest::envoy::envoy::r#type::matcher::v3::RegexMatchAndSubstitute {
        pattern: Some(RegexMatcher { regex: "^/.*$".into(), ..Default::default() }),
        substitution: to.to_owned(),
    };
    match kind.as_str() {
        "ReplaceFullPath" => action.regex_rewrite = Some(full(replace_full_path.as_deref().unwrap_or("/"))),
        _ => {
            let to = replace_prefix_match.as_deref().unwrap_or("/");
            let prefix = m.path.as_ref().and_then(|p| p.value.as_deref()).unwrap_or("/").trim_end_matches('/');
            // `/prefix` then the rest of the path; an empty rest becomes the replacement alone,
            // and a replacement `/` never doubles the slash that follows it.
            let to = to.trim_end_matches('/');
            let (regex, substitution) = if to.is_empty() {
                (format!("^{}/*(.*)$", crate::model::literal(prefix)), "/\\1".to_owned())
            } else {
                (format!("^{}(/.*)?$", crate::model::literal(prefix)), format!("{to}\\1"))
            };
            action.regex_rewrite = Some(xdst_guest::envoy::envoy::r#type::matcher::v3::RegexMatchAndSubstitute {
                pattern: Some(RegexMatcher { regex, ..Default::default() }),
                substitution,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_as_the_gateway_api_writes_them() {
        use std::time::Duration;
        assert_eq!(super::duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(super::duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(super::duration("0s"), Some(Duration::ZERO));
        assert_eq!(super::duration("1.5s"), None);
        assert_eq!(super::duration(""), None);
    }
}

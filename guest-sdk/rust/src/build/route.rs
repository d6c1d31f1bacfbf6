//! Route configurations: virtual hosts, routes, header matchers and retry policies.

use std::time::Duration;

use super::{duration, header_value, u32_value};
use crate::envoy::envoy::config::core::v3::{DataSource, data_source};
use crate::envoy::envoy::config::route::v3::{
    self as route, DirectResponseAction, HeaderMatcher, RouteAction, RouteConfiguration, RouteMatch, WeightedCluster,
    header_matcher::HeaderMatchSpecifier, route_action, route_match::PathSpecifier, weighted_cluster::ClusterWeight,
};
use crate::envoy::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher::MatchPattern};

/// A regex matcher with the engine left unset, which Envoy and gRPC read as Google RE2.
fn regex(re: String) -> RegexMatcher {
    RegexMatcher { regex: re, engine_type: None }
}

/// A `RouteConfiguration`: virtual hosts in order, plus headers every route adds or removes.
#[derive(Debug, Clone)]
pub struct RouteConfig(RouteConfiguration);

impl RouteConfig {
    pub fn new(name: impl Into<String>) -> Self {
        RouteConfig(RouteConfiguration { name: name.into(), ..Default::default() })
    }

    pub fn virtual_host(mut self, host: VirtualHost) -> Self {
        self.0.virtual_hosts.push(host.build());
        self
    }

    /// Adds virtual hosts in iteration order.
    pub fn virtual_hosts(mut self, hosts: impl IntoIterator<Item = VirtualHost>) -> Self {
        self.0.virtual_hosts.extend(hosts.into_iter().map(VirtualHost::build));
        self
    }

    pub fn build(self) -> RouteConfiguration {
        self.0
    }
}

/// Header mutation methods shared by [`VirtualHost`] and [`Route`], whose messages have the
/// same four fields.
macro_rules! header_mutations {
    ($($field:ident).+) => {
        /// Sets a request header, replacing any value it has.
        pub fn set_request_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.$($field).+.request_headers_to_add.push(header_value(name.into(), value.into(), true));
            self
        }

        /// Adds a request header value, keeping any it has.
        pub fn add_request_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.$($field).+.request_headers_to_add.push(header_value(name.into(), value.into(), false));
            self
        }

        /// Removes a request header before the request goes upstream.
        pub fn remove_request_header(mut self, name: impl Into<String>) -> Self {
            self.$($field).+.request_headers_to_remove.push(name.into());
            self
        }

        /// Sets a response header, replacing any value it has.
        pub fn set_response_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.$($field).+.response_headers_to_add.push(header_value(name.into(), value.into(), true));
            self
        }

        /// Adds a response header value, keeping any it has.
        pub fn add_response_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.$($field).+.response_headers_to_add.push(header_value(name.into(), value.into(), false));
            self
        }

        /// Removes a response header before the response goes downstream.
        pub fn remove_response_header(mut self, name: impl Into<String>) -> Self {
            self.$($field).+.response_headers_to_remove.push(name.into());
            self
        }
    };
}

/// A virtual host: the domains it answers for (`*` for all, `*.example.com`, `example.com:8080`)
/// and its routes, tried in order.
#[derive(Debug, Clone)]
pub struct VirtualHost {
    host: route::VirtualHost,
}

impl VirtualHost {
    /// `name` must be unique within the route configuration.
    pub fn new<D: Into<String>>(name: impl Into<String>, domains: impl IntoIterator<Item = D>) -> Self {
        VirtualHost {
            host: route::VirtualHost {
                name: name.into(),
                domains: domains.into_iter().map(Into::into).collect(),
                ..Default::default()
            },
        }
    }

    pub fn route(mut self, route: Route) -> Self {
        self.host.routes.push(route.build());
        self
    }

    /// Adds routes in iteration order.
    pub fn routes(mut self, routes: impl IntoIterator<Item = Route>) -> Self {
        self.host.routes.extend(routes.into_iter().map(Route::build));
        self
    }

    /// The retry policy of routes that have none of their own.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.host.retry_policy = Some(policy.build());
        self
    }

    header_mutations!(host);

    pub fn build(self) -> route::VirtualHost {
        self.host
    }
}

/// One route: a match (path prefix, exact path or regex, plus header matchers) and where it
/// goes (a cluster, weighted clusters, or a direct response).
///
/// Set a destination ([`to_cluster`](Self::to_cluster),
/// [`to_weighted_clusters`](Self::to_weighted_clusters) or
/// [`direct_response`](Self::direct_response)): a route without one is refused by Envoy.
/// The action settings (timeout, retries, rewrite) apply to cluster destinations only.
#[derive(Debug, Clone)]
pub struct Route {
    route: route::Route,
    action: RouteAction,
    direct: Option<DirectResponseAction>,
}

impl Route {
    fn matching(path: PathSpecifier) -> Self {
        Route {
            route: route::Route {
                r#match: Some(RouteMatch { path_specifier: Some(path), ..Default::default() }),
                ..Default::default()
            },
            action: RouteAction::default(),
            direct: None,
        }
    }

    /// Matches paths starting with `prefix` (`/` or `` matches everything; gRPC methods look
    /// like `/package.Service/Method`).
    pub fn prefix(prefix: impl Into<String>) -> Self {
        Self::matching(PathSpecifier::Prefix(prefix.into()))
    }

    /// Matches exactly this path (without the query string).
    pub fn path(path: impl Into<String>) -> Self {
        Self::matching(PathSpecifier::Path(path.into()))
    }

    /// Matches the whole path against an RE2 regular expression.
    pub fn regex(re: impl Into<String>) -> Self {
        Self::matching(PathSpecifier::SafeRegex(regex(re.into())))
    }

    /// A name for the route, shown in Envoy's stats and config dumps.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.route.name = name.into();
        self
    }

    /// Also requires a header to match; all header matchers must match.
    pub fn header(mut self, header: HeaderMatch) -> Self {
        if let Some(m) = self.route.r#match.as_mut() {
            m.headers.push(header.build());
        }
        self
    }

    /// Sends matching requests to one cluster.
    pub fn to_cluster(mut self, cluster: impl Into<String>) -> Self {
        self.action.cluster_specifier = Some(route_action::ClusterSpecifier::Cluster(cluster.into()));
        self
    }

    /// Splits matching requests between clusters in proportion to their weights (each at
    /// least 1), in the order given.
    pub fn to_weighted_clusters<C: Into<String>>(mut self, clusters: impl IntoIterator<Item = (C, u32)>) -> Self {
        let clusters = clusters
            .into_iter()
            .map(|(name, weight)| ClusterWeight {
                name: name.into(),
                weight: Some(u32_value(weight)),
                ..Default::default()
            })
            .collect();
        self.action.cluster_specifier =
            Some(route_action::ClusterSpecifier::WeightedClusters(WeightedCluster { clusters, ..Default::default() }));
        self
    }

    /// Answers matching requests itself with `status` and an optional body.
    pub fn direct_response(mut self, status: u32, body: Option<String>) -> Self {
        self.direct = Some(DirectResponseAction {
            status,
            body: body
                .map(|b| DataSource { specifier: Some(data_source::Specifier::InlineString(b)), ..Default::default() }),
        });
        self
    }

    /// The whole request's upstream timeout (Envoy's default is 15 s; zero disables it).
    /// Proxyless gRPC clients ignore it: use [`max_stream_duration`](Self::max_stream_duration).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.action.timeout = Some(duration(timeout));
        self
    }

    /// How long a stream may go without activity.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.action.idle_timeout = Some(duration(timeout));
        self
    }

    /// The longest a stream may last: the timeout gRPC clients honour (and Envoy too).
    pub fn max_stream_duration(mut self, limit: Duration) -> Self {
        self.action.max_stream_duration =
            Some(route_action::MaxStreamDuration { max_stream_duration: Some(duration(limit)), ..Default::default() });
        self
    }

    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.action.retry_policy = Some(policy.build());
        self
    }

    /// Replaces the matched path prefix (or the whole matched path) before forwarding.
    pub fn prefix_rewrite(mut self, prefix: impl Into<String>) -> Self {
        self.action.prefix_rewrite = prefix.into();
        self
    }

    header_mutations!(route);

    pub fn build(self) -> route::Route {
        let mut out = self.route;
        out.action = Some(match self.direct {
            Some(direct) => route::route::Action::DirectResponse(direct),
            None => route::route::Action::Route(self.action),
        });
        out
    }
}

/// A header a route requires: by exact value, prefix, RE2 regex, or presence; optionally
/// inverted.
#[derive(Debug, Clone)]
pub struct HeaderMatch(HeaderMatcher);

impl HeaderMatch {
    fn with(name: String, specifier: HeaderMatchSpecifier) -> Self {
        HeaderMatch(HeaderMatcher { name, header_match_specifier: Some(specifier), ..Default::default() })
    }

    fn string(name: String, pattern: MatchPattern) -> Self {
        Self::with(
            name,
            HeaderMatchSpecifier::StringMatch(StringMatcher { match_pattern: Some(pattern), ignore_case: false }),
        )
    }

    pub fn exact(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self::string(name.into(), MatchPattern::Exact(value.into()))
    }

    pub fn prefix(name: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self::string(name.into(), MatchPattern::Prefix(prefix.into()))
    }

    /// The whole header value must match the RE2 regular expression.
    pub fn regex(name: impl Into<String>, re: impl Into<String>) -> Self {
        Self::string(name.into(), MatchPattern::SafeRegex(regex(re.into())))
    }

    /// Matches when the header is present, whatever its value.
    pub fn present(name: impl Into<String>) -> Self {
        Self::with(name.into(), HeaderMatchSpecifier::PresentMatch(true))
    }

    /// Matches when the condition does not hold (for `present`: when the header is absent).
    pub fn invert(mut self) -> Self {
        self.0.invert_match = true;
        self
    }

    pub fn build(self) -> HeaderMatcher {
        self.0
    }
}

/// When and how often to retry: Envoy's `retry_on` conditions (`5xx,connect-failure,reset`;
/// for gRPC `unavailable,cancelled`, ...), how many times, and per-try timeout.
#[derive(Debug, Clone)]
pub struct RetryPolicy(route::RetryPolicy);

impl RetryPolicy {
    /// `retry_on`: comma-separated conditions.
    pub fn new(retry_on: impl Into<String>) -> Self {
        RetryPolicy(route::RetryPolicy { retry_on: retry_on.into(), ..Default::default() })
    }

    /// How many retries at most (Envoy's default is 1).
    pub fn num_retries(mut self, retries: u32) -> Self {
        self.0.num_retries = Some(u32_value(retries));
        self
    }

    /// The timeout of each attempt (not honoured by proxyless gRPC clients).
    pub fn per_try_timeout(mut self, timeout: Duration) -> Self {
        self.0.per_try_timeout = Some(duration(timeout));
        self
    }

    /// Status codes `retriable-status-codes` retries on.
    pub fn retriable_status_codes(mut self, codes: impl IntoIterator<Item = u32>) -> Self {
        self.0.retriable_status_codes.extend(codes);
        self
    }

    /// Exponential back-off between attempts, from `base` up to `max`.
    pub fn back_off(mut self, base: Duration, max: Duration) -> Self {
        self.0.retry_back_off = Some(route::retry_policy::RetryBackOff {
            base_interval: Some(duration(base)),
            max_interval: Some(duration(max)),
        });
        self
    }

    pub fn build(self) -> route::RetryPolicy {
        self.0
    }
}

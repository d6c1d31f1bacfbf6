//! Envoy resources as canonical proto3 JSON, shaped as the Rust SDK's builders shape them:
//! structs written by std.json.Stringify, null optional fields left out. Field presence
//! matters, key order does not: the host re-encodes each resource.

const type_url = "type.googleapis.com/";
pub const cluster_type = type_url ++ "envoy.config.cluster.v3.Cluster";
pub const load_assignment_type = type_url ++ "envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const listener_type = type_url ++ "envoy.config.listener.v3.Listener";
pub const route_config_type = type_url ++ "envoy.config.route.v3.RouteConfiguration";
const hcm_type = type_url ++ "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const router_type = type_url ++ "envoy.extensions.filters.http.router.v3.Router";

const Str = []const u8;
const Empty = struct {};

/// Fetch over the client's ADS stream.
pub const Ads = struct {
    ads: Empty = .{},
    resource_api_version: Str = "V3",
};

pub const SocketAddress = struct {
    socket_address: struct { address: Str, port_value: u32 },

    pub fn of(ip: Str, port: u32) SocketAddress {
        return .{ .socket_address = .{ .address = ip, .port_value = port } };
    }
};

/// Endpoints by EDS over ADS, in a ClusterLoadAssignment of its name.
pub const Cluster = struct {
    name: Str,
    type: Str = "EDS",
    eds_cluster_config: struct { eds_config: Ads = .{} } = .{},
    lb_policy: Str = "ROUND_ROBIN",
    connect_timeout: ?Str = null,
    http2_protocol_options: ?Empty = null,
    common_lb_config: ?struct { locality_weighted_lb_config: Empty = .{} } = null,
    health_checks: ?[]const HealthCheck = null,
    circuit_breakers: ?struct { thresholds: []const Thresholds } = null,
};

/// Every 10s, 1s timeout, healthy after 1, unhealthy after 3, and the checker.
pub const HealthCheck = struct {
    timeout: Str = "1s",
    interval: Str = "10s",
    healthy_threshold: u32 = 1,
    unhealthy_threshold: u32 = 3,
    http_health_check: ?struct { path: Str, codec_client_type: ?Str = null, host: ?Str = null } = null,
    grpc_health_check: ?struct { service_name: Str } = null,
};

/// Circuit breaker limits for the default priority; unset ones keep Envoy's.
pub const Thresholds = struct {
    max_connections: ?u32 = null,
    max_pending_requests: ?u32 = null,
    max_requests: ?u32 = null,
    max_retries: ?u32 = null,
};

pub const ClusterLoadAssignment = struct {
    cluster_name: Str,
    endpoints: []const LocalityLbEndpoints,
};

/// The (possibly empty) locality is always set.
pub const LocalityLbEndpoints = struct {
    locality: struct { region: Str, zone: Str, sub_zone: Str },
    load_balancing_weight: u32,
    priority: u32,
    lb_endpoints: []const LbEndpoint,
};

pub const LbEndpoint = struct {
    endpoint: struct { address: SocketAddress },
    load_balancing_weight: ?u32 = null,
};

/// One filter chain with an HttpConnectionManager fetching its routes by RDS over ADS (route
/// configuration and stat prefix named like the listener) and the router.
pub const Listener = struct {
    name: Str,
    address: SocketAddress,
    filter_chains: [1]FilterChain,

    const FilterChain = struct { filters: [1]Filter };
    const Filter = struct { name: Str = "envoy.filters.network.http_connection_manager", typed_config: Hcm };
    const Hcm = struct {
        @"@type": Str = hcm_type,
        stat_prefix: Str,
        rds: struct { config_source: Ads = .{}, route_config_name: Str },
        http_filters: [1]HttpFilter = .{.{}},
    };
    const HttpFilter = struct { name: Str = "envoy.filters.http.router", typed_config: struct { @"@type": Str = router_type } = .{} };

    pub fn http(name: Str, address: Str, port: u32) Listener {
        return .{
            .name = name,
            .address = SocketAddress.of(address, port),
            .filter_chains = .{.{ .filters = .{.{ .typed_config = .{ .stat_prefix = name, .rds = .{ .route_config_name = name } } }} }},
        };
    }
};

pub const RouteConfiguration = struct {
    name: Str,
    virtual_hosts: []const VirtualHost,
};

pub const HeaderValueOption = struct {
    header: struct { key: Str, value: Str },
    append_action: Str,

    pub fn of(key: Str, value: Str, overwrite: bool) HeaderValueOption {
        return .{ .header = .{ .key = key, .value = value }, .append_action = if (overwrite) "OVERWRITE_IF_EXISTS_OR_ADD" else "APPEND_IF_EXISTS_OR_ADD" };
    }
};

pub const VirtualHost = struct {
    name: Str,
    domains: []const Str,
    routes: []const Route = &.{},
    request_headers_to_add: ?[]const HeaderValueOption = null,
    request_headers_to_remove: ?[]const Str = null,
    response_headers_to_add: ?[]const HeaderValueOption = null,
    response_headers_to_remove: ?[]const Str = null,
};

pub const Route = struct {
    name: ?Str = null,
    match: RouteMatch,
    route: ?RouteAction = null,
    direct_response: ?DirectResponse = null,
    request_headers_to_add: ?[]const HeaderValueOption = null,
    request_headers_to_remove: ?[]const Str = null,
    response_headers_to_add: ?[]const HeaderValueOption = null,
    response_headers_to_remove: ?[]const Str = null,
};

pub const Regex = struct { regex: Str };

pub const RouteMatch = struct {
    prefix: ?Str = null,
    path: ?Str = null,
    safe_regex: ?Regex = null,
    headers: ?[]const HeaderMatcher = null,
};

pub const HeaderMatcher = struct {
    name: Str,
    string_match: ?struct { exact: ?Str = null, prefix: ?Str = null, safe_regex: ?Regex = null } = null,
    present_match: ?bool = null,
    invert_match: ?bool = null,
};

pub const WeightedCluster = struct { name: Str, weight: u32 };

pub const RouteAction = struct {
    cluster: ?Str = null,
    weighted_clusters: ?struct { clusters: []const WeightedCluster } = null,
    timeout: ?Str = null,
    idle_timeout: ?Str = null,
    retry_policy: ?RetryPolicy = null,
    prefix_rewrite: ?Str = null,
};

pub const RetryPolicy = struct {
    retry_on: Str,
    num_retries: u32,
    per_try_timeout: ?Str = null,
    retriable_status_codes: ?[]const u16 = null,
};

pub const DirectResponse = struct {
    status: u32,
    body: ?struct { inline_string: Str } = null,
};

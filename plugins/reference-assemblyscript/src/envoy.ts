// Envoy messages as canonical proto3 JSON, shaped exactly as the Rust SDK's builders shape
// them (guest-sdk/rust/src/build): the same fields set, and a field left out wherever protobuf
// would leave it out (empty strings, zero numbers, empty lists), while empty messages that are
// set (`ads: {}`, `locality: {}`) stay. Wrapper types (UInt32Value) are plain numbers and
// durations strings (`0.250s`).

import { Value } from "./json";
import { Dur } from "./duration";

export const CLUSTER = "envoy.config.cluster.v3.Cluster";
export const LOAD_ASSIGNMENT = "envoy.config.endpoint.v3.ClusterLoadAssignment";
export const LISTENER = "envoy.config.listener.v3.Listener";
export const ROUTE_CONFIGURATION = "envoy.config.route.v3.RouteConfiguration";

const HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";

/** `{ads: {}, resource_api_version: V3}`: everything comes over the client's ADS stream. */
export function ads(): Value {
  return Value.object().set("ads", Value.object()).setString("resource_api_version", "V3");
}

export function duration(d: Dur): Value {
  return Value.string(d.toJson());
}

/** An `Address` with a TCP socket address (the IP checked by the caller). */
export function socketAddress(ip: string, port: i64): Value {
  return Value.object().set(
    "socket_address",
    Value.object().setString("address", ip).setInteger("port_value", port),
  );
}

/** Sets `key` to a string unless it is empty (protobuf's default). */
function setNonEmpty(v: Value, key: string, s: string): void {
  if (s.length) v.setString(key, s);
}

/** Sets `key` to a list unless it is empty. */
function setList(v: Value, key: string, items: Array<Value>): void {
  if (items.length == 0) return;
  const list = Value.array();
  for (let i = 0; i < items.length; i++) list.push(items[i]);
  v.set(key, list);
}

function setStrings(v: Value, key: string, items: Array<string>): void {
  if (items.length == 0) return;
  const list = Value.array();
  for (let i = 0; i < items.length; i++) list.push(Value.string(items[i]));
  v.set(key, list);
}

// --- clusters --------------------------------------------------------------------------------

/** A cluster whose endpoints come by EDS over ADS. */
export class EdsCluster {
  /** `LEAST_REQUEST`, ...; "" for round robin (the default). */
  lbPolicy: string = "";
  connectTimeout: Dur | null = null;
  http2: bool = false;
  localityWeighted: bool = false;
  healthChecks: Array<Value> = [];
  circuitBreakers: Value | null = null;

  constructor(public name: string) {}

  build(): Value {
    const c = Value.object();
    setNonEmpty(c, "name", this.name);
    c.setString("type", "EDS");
    c.set("eds_cluster_config", Value.object().set("eds_config", ads()));
    setNonEmpty(c, "lb_policy", this.lbPolicy);
    const timeout = this.connectTimeout;
    if (timeout !== null) c.set("connect_timeout", duration(timeout));
    if (this.http2) c.set("http2_protocol_options", Value.object());
    if (this.localityWeighted) {
      c.set("common_lb_config", Value.object().set("locality_weighted_lb_config", Value.object()));
    }
    setList(c, "health_checks", this.healthChecks);
    const cb = this.circuitBreakers;
    if (cb !== null) c.set("circuit_breakers", cb);
    return c;
  }
}

/** An active health check: HTTP `GET path` or the gRPC health checking protocol. */
export class HealthCheck {
  timeout: Dur = new Dur(1, 0);
  interval: Dur = new Dur(10, 0);
  healthyThreshold: i64 = 1;
  unhealthyThreshold: i64 = 3;
  /** The HTTP check's path, or null for a gRPC check. */
  httpPath: string | null = null;
  httpHost: string = "";
  http2: bool = false;
  grpcService: string = "";

  static http(path: string): HealthCheck {
    const h = new HealthCheck();
    h.httpPath = path;
    return h;
  }

  static grpc(service: string): HealthCheck {
    const h = new HealthCheck();
    h.grpcService = service;
    return h;
  }

  build(): Value {
    const h = Value.object()
      .set("timeout", duration(this.timeout))
      .set("interval", duration(this.interval))
      .setInteger("healthy_threshold", this.healthyThreshold)
      .setInteger("unhealthy_threshold", this.unhealthyThreshold);
    const path = this.httpPath;
    if (path !== null) {
      const http = Value.object();
      setNonEmpty(http, "path", path);
      setNonEmpty(http, "host", this.httpHost);
      if (this.http2) http.setString("codec_client_type", "HTTP2");
      h.set("http_health_check", http);
    } else {
      const grpc = Value.object();
      setNonEmpty(grpc, "service_name", this.grpcService);
      h.set("grpc_health_check", grpc);
    }
    return h;
  }
}

/** Circuit breaker thresholds for the default priority; -1 leaves a limit at Envoy's default. */
export function circuitBreakers(
  maxConnections: i64,
  maxPendingRequests: i64,
  maxRequests: i64,
  maxRetries: i64,
): Value {
  const t = Value.object();
  if (maxConnections >= 0) t.setInteger("max_connections", maxConnections);
  if (maxPendingRequests >= 0) t.setInteger("max_pending_requests", maxPendingRequests);
  if (maxRequests >= 0) t.setInteger("max_requests", maxRequests);
  if (maxRetries >= 0) t.setInteger("max_retries", maxRetries);
  return Value.object().set("thresholds", Value.array().push(t));
}

// --- endpoints -------------------------------------------------------------------------------

/** One endpoint; `weight` -1 leaves it unset. */
export function lbEndpoint(ip: string, port: i64, weight: i64): Value {
  const e = Value.object().set("endpoint", Value.object().set("address", socketAddress(ip, port)));
  if (weight >= 0) e.setInteger("load_balancing_weight", weight);
  return e;
}

/** Endpoints in one locality; the (possibly empty) `locality` is always set. */
export class Locality {
  weight: i64 = 1;
  priority: i64 = 0;
  endpoints: Array<Value> = [];

  constructor(
    public region: string,
    public zone: string,
    public subZone: string,
  ) {}

  build(): Value {
    const where = Value.object();
    setNonEmpty(where, "region", this.region);
    setNonEmpty(where, "zone", this.zone);
    setNonEmpty(where, "sub_zone", this.subZone);
    const l = Value.object().set("locality", where).setInteger("load_balancing_weight", this.weight);
    setList(l, "lb_endpoints", this.endpoints);
    if (this.priority != 0) l.setInteger("priority", this.priority);
    return l;
  }
}

export function loadAssignment(clusterName: string, localities: Array<Value>): Value {
  const cla = Value.object();
  setNonEmpty(cla, "cluster_name", clusterName);
  setList(cla, "endpoints", localities);
  return cla;
}

// --- listeners -------------------------------------------------------------------------------

/** An HTTP listener: one filter chain, an HttpConnectionManager with RDS over ADS and the router. */
export function httpListener(name: string, ip: string, port: i64): Value {
  const hcm = Value.object()
    .setString("@type", HCM)
    .setString("stat_prefix", name)
    .set(
      "http_filters",
      Value.array().push(
        Value.object()
          .setString("name", "envoy.filters.http.router")
          .set("typed_config", Value.object().setString("@type", ROUTER)),
      ),
    )
    .set("rds", Value.object().set("config_source", ads()).setString("route_config_name", name));
  const filter = Value.object()
    .setString("name", "envoy.filters.network.http_connection_manager")
    .set("typed_config", hcm);
  const l = Value.object();
  setNonEmpty(l, "name", name);
  l.set("address", socketAddress(ip, port));
  l.set("filter_chains", Value.array().push(Value.object().set("filters", Value.array().push(filter))));
  return l;
}

// --- routes ----------------------------------------------------------------------------------

/** Request and response header changes, as a VirtualHost or a Route carries them. */
export class HeaderMutations {
  requestAdd: Array<Value> = [];
  requestRemove: Array<string> = [];
  responseAdd: Array<Value> = [];
  responseRemove: Array<string> = [];

  /** `overwrite`: replace any value (`set`); otherwise append one (`add`). */
  add(request: bool, name: string, value: string, overwrite: bool): void {
    const header = Value.object().setString("key", name);
    setNonEmpty(header, "value", value);
    const option = Value.object().set("header", header);
    if (overwrite) option.setString("append_action", "OVERWRITE_IF_EXISTS_OR_ADD");
    if (request) this.requestAdd.push(option);
    else this.responseAdd.push(option);
  }

  remove(request: bool, name: string): void {
    if (request) this.requestRemove.push(name);
    else this.responseRemove.push(name);
  }

  writeTo(v: Value): void {
    setList(v, "request_headers_to_add", this.requestAdd);
    setStrings(v, "request_headers_to_remove", this.requestRemove);
    setList(v, "response_headers_to_add", this.responseAdd);
    setStrings(v, "response_headers_to_remove", this.responseRemove);
  }
}

/** A regex matcher with the engine left unset (Google RE2). */
function regexMatcher(re: string): Value {
  const m = Value.object();
  setNonEmpty(m, "regex", re);
  return m;
}

/** A header matcher: `kind` is `exact`, `prefix`, `regex` or `present`. */
export function headerMatcher(name: string, kind: string, value: string, invert: bool): Value {
  const h = Value.object();
  setNonEmpty(h, "name", name);
  if (kind == "present") h.setBool("present_match", true);
  else if (kind == "regex") h.set("string_match", Value.object().set("safe_regex", regexMatcher(value)));
  else h.set("string_match", Value.object().setString(kind, value));
  if (invert) h.setBool("invert_match", true);
  return h;
}

/** A route: its match, and a cluster, weighted clusters or a direct response. */
export class Route {
  name: string = "";
  /** `prefix`, `path` or `safe_regex`. */
  pathKind: string;
  pathValue: string;
  headers: Array<Value> = [];
  /** The RouteAction (null with a direct response). */
  action: Value | null = Value.object();
  direct: Value | null = null;
  mutations: HeaderMutations = new HeaderMutations();

  constructor(pathKind: string, pathValue: string) {
    this.pathKind = pathKind;
    this.pathValue = pathValue;
  }

  toCluster(cluster: string): void {
    setNonEmpty(this.action!, "cluster", cluster);
  }

  toWeightedClusters(names: Array<string>, weights: Array<i64>): void {
    const clusters = Value.array();
    for (let i = 0; i < names.length; i++) {
      const c = Value.object();
      setNonEmpty(c, "name", names[i]);
      c.setInteger("weight", weights[i]);
      clusters.push(c);
    }
    this.action!.set("weighted_clusters", Value.object().set("clusters", clusters));
  }

  directResponse(status: i64, body: string | null): void {
    const d = Value.object();
    if (status != 0) d.setInteger("status", status);
    if (body !== null) d.set("body", Value.object().setString("inline_string", body));
    this.direct = d;
  }

  build(): Value {
    const m = Value.object();
    if (this.pathKind == "safe_regex") m.set("safe_regex", regexMatcher(this.pathValue));
    else m.setString(this.pathKind, this.pathValue);
    setList(m, "headers", this.headers);
    const r = Value.object();
    setNonEmpty(r, "name", this.name);
    r.set("match", m);
    const direct = this.direct;
    if (direct !== null) r.set("direct_response", direct);
    else r.set("route", this.action!);
    this.mutations.writeTo(r);
    return r;
  }
}

/** A retry policy: `retry_on`, how many retries, per-try timeout, retriable status codes. */
export function retryPolicy(on: string, numRetries: i64, perTry: Dur | null, codes: Array<i64>): Value {
  const p = Value.object();
  setNonEmpty(p, "retry_on", on);
  p.setInteger("num_retries", numRetries);
  if (perTry !== null) p.set("per_try_timeout", duration(perTry));
  if (codes.length) {
    const list = Value.array();
    for (let i = 0; i < codes.length; i++) list.push(Value.integer(codes[i]));
    p.set("retriable_status_codes", list);
  }
  return p;
}

export class VirtualHost {
  routes: Array<Value> = [];
  mutations: HeaderMutations = new HeaderMutations();

  constructor(
    public name: string,
    public domains: Array<string>,
  ) {}

  build(): Value {
    const v = Value.object();
    setNonEmpty(v, "name", this.name);
    setStrings(v, "domains", this.domains);
    setList(v, "routes", this.routes);
    this.mutations.writeTo(v);
    return v;
  }
}

export function routeConfiguration(name: string, hosts: Array<Value>): Value {
  const r = Value.object();
  setNonEmpty(r, "name", name);
  setList(r, "virtual_hosts", hosts);
  return r;
}

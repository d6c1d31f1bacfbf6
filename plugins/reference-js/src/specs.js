// The intent schema of the two kinds this port translates: what `spec` holds, field by field,
// as in plugins/reference/src/schema.rs (README.md there documents it for users). Field names
// are camelCase; unknown fields are errors. Checks a schema cannot express (ranges, exclusive
// choices) are in service.js, gateway.js and routing.js.

import {
  bool,
  duration,
  list,
  map,
  oneOfStrings,
  optional,
  port,
  required,
  string,
  struct,
  u16,
  u32,
  withDefault,
} from "./schema.js";

const empty = () => [];

const endpoint = struct("EndpointSpec", {
  address: required(string),
  port: required(port),
  weight: optional(u32),
});

const locality = struct("LocalitySpec", {
  region: withDefault(string, () => ""),
  zone: withDefault(string, () => ""),
  subZone: withDefault(string, () => ""),
  weight: optional(u32),
  priority: withDefault(u32, () => 0),
  endpoints: withDefault(list(endpoint), empty),
});

const healthCheck = struct("HealthCheckSpec", {
  path: optional(string),
  host: optional(string),
  grpc: optional(struct("GrpcHealthCheckSpec", { serviceName: withDefault(string, () => "") })),
  interval: optional(duration),
  timeout: optional(duration),
  healthyThreshold: optional(u32),
  unhealthyThreshold: optional(u32),
});

const circuitBreakers = struct("CircuitBreakersSpec", {
  maxConnections: optional(u32),
  maxPendingRequests: optional(u32),
  maxRequests: optional(u32),
  maxRetries: optional(u32),
});

/** `kind: Service`: an upstream service and its endpoints. */
export const serviceSpec = struct("ServiceSpec", {
  protocol: withDefault(oneOfStrings(["http1", "http2", "grpc"]), () => "http1"),
  loadBalancing: withDefault(
    oneOfStrings(["roundRobin", "leastRequest", "random", "ringHash", "maglev"]),
    () => "roundRobin",
  ),
  connectTimeout: optional(duration),
  endpoints: withDefault(list(endpoint), empty),
  localities: withDefault(list(locality), empty),
  healthCheck: optional(healthCheck),
  circuitBreakers: optional(circuitBreakers),
});

const headerMatch = struct("HeaderMatchSpec", {
  name: required(string),
  exact: optional(string),
  prefix: optional(string),
  regex: optional(string),
  present: optional(bool),
  invert: withDefault(bool, () => false),
});

const routeMatch = struct("MatchSpec", {
  pathPrefix: optional(string),
  path: optional(string),
  regex: optional(string),
  headers: withDefault(list(headerMatch), empty),
});

const backend = struct("BackendSpec", {
  service: required(string),
  weight: optional(u32),
});

const headers = struct("HeadersSpec", {
  set: withDefault(map(string), empty),
  add: withDefault(map(string), empty),
  remove: withDefault(list(string), empty),
});

const route = struct("HttpRouteSpec", {
  name: optional(string),
  match: optional(routeMatch),
  backends: optional(list(backend)),
  directResponse: optional(struct("DirectResponseSpec", { status: required(u16), body: optional(string) })),
  timeout: optional(duration),
  idleTimeout: optional(duration),
  retries: optional(
    struct("RetriesSpec", {
      attempts: optional(u32),
      on: optional(string),
      perTryTimeout: optional(duration),
      statusCodes: withDefault(list(u16), empty),
    }),
  ),
  requestHeaders: optional(headers),
  responseHeaders: optional(headers),
  rewrite: optional(struct("RewriteSpec", { pathPrefix: required(string) })),
});

const host = struct("HostSpec", {
  name: optional(string),
  hostnames: optional(list(string)),
  routes: required(list(route)),
  requestHeaders: optional(headers),
  responseHeaders: optional(headers),
});

/** `kind: HttpGateway`: an Envoy listener and its routes. */
export const gatewaySpec = struct("GatewaySpec", {
  address: optional(string),
  port: required(port),
  hosts: required(list(host)),
});

/** The operator's configuration for this plugin: none, so `null` or `{}`. */
export const configSpec = struct("Config", {});

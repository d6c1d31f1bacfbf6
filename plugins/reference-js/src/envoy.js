// Envoy resources as canonical proto3 JSON, shaped as the Rust SDK's builders
// (guest-sdk/rust/src/build) shape them. Field presence matters, key order does not: the host
// decodes each resource against Envoy's descriptors and re-encodes it deterministically.
// Durations are BigInt nanoseconds here and strings (`"0.250s"`) in the JSON.

import { formatDuration } from "./duration.js";

const TYPE_URL = "type.googleapis.com/";
export const CLUSTER = `${TYPE_URL}envoy.config.cluster.v3.Cluster`;
export const LOAD_ASSIGNMENT = `${TYPE_URL}envoy.config.endpoint.v3.ClusterLoadAssignment`;
export const LISTENER = `${TYPE_URL}envoy.config.listener.v3.Listener`;
export const ROUTE_CONFIGURATION = `${TYPE_URL}envoy.config.route.v3.RouteConfiguration`;
const HCM = `${TYPE_URL}envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`;
const ROUTER = `${TYPE_URL}envoy.extensions.filters.http.router.v3.Router`;

/** An xds-resource with a JSON body, attributed to the document `Kind/name`. */
export function resource(typeUrl, name, message, document) {
  return { typeUrl, name, body: { tag: "json", val: JSON.stringify(message) }, document };
}

export const duration = formatDuration;

/** `{ads: {}, resource_api_version: V3}`: fetch over the client's ADS stream. */
function ads() {
  return { ads: {}, resource_api_version: "V3" };
}

function socketAddress(ip, port) {
  return { socket_address: { address: ip, port_value: port } };
}

/** A cluster whose endpoints come by EDS over ADS, in a ClusterLoadAssignment of its name. */
export function edsCluster(name) {
  return { name, type: "EDS", eds_cluster_config: { eds_config: ads() } };
}

/** An active health check; defaults: every 10s, 1s timeout, healthy after 1, unhealthy after 3. */
export function healthCheck(checker) {
  return {
    timeout: "1s",
    interval: "10s",
    healthy_threshold: 1,
    unhealthy_threshold: 3,
    ...checker,
  };
}

/** One endpoint; `weight` optional. */
export function lbEndpoint(ip, port, weight) {
  const e = { endpoint: { address: socketAddress(ip, port) } };
  if (weight !== undefined) e.load_balancing_weight = weight;
  return e;
}

/** Endpoints in one locality. The (possibly empty) `locality` is always set. */
export function localityEndpoints({ region = "", zone = "", subZone = "", weight = 1, priority = 0 }, endpoints) {
  return {
    locality: { region, zone, sub_zone: subZone },
    load_balancing_weight: weight,
    priority,
    lb_endpoints: endpoints,
  };
}

/**
 * An HTTP listener: one filter chain with an HttpConnectionManager that fetches its routes by
 * RDS over ADS (route configuration and stat prefix named like the listener) and the router.
 */
export function httpListener(name, address, port) {
  const hcm = {
    "@type": HCM,
    stat_prefix: name,
    rds: { config_source: ads(), route_config_name: name },
    http_filters: [{ name: "envoy.filters.http.router", typed_config: { "@type": ROUTER } }],
  };
  return {
    name,
    address: socketAddress(address, port),
    filter_chains: [{ filters: [{ name: "envoy.filters.network.http_connection_manager", typed_config: hcm }] }],
  };
}

/** A header to add: `overwrite` replaces any value, otherwise another value is appended. */
export function headerValueOption(key, value, overwrite) {
  return {
    header: { key, value },
    append_action: overwrite ? "OVERWRITE_IF_EXISTS_OR_ADD" : "APPEND_IF_EXISTS_OR_ADD",
  };
}

/** A regex matcher (the engine left unset: Google RE2). */
export function regexMatcher(regex) {
  return { regex };
}

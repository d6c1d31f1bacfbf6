// `Service` -> an EDS Cluster and its ClusterLoadAssignment, both named after the document.

import * as check from "./check.js";
import { parseIp } from "./ip.js";
import { serviceSpec } from "./specs.js";
import {
  CLUSTER,
  LOAD_ASSIGNMENT,
  duration,
  edsCluster,
  healthCheck,
  lbEndpoint,
  localityEndpoints,
  resource,
} from "./envoy.js";

const LB_POLICY = {
  roundRobin: "ROUND_ROBIN",
  leastRequest: "LEAST_REQUEST",
  random: "RANDOM",
  ringHash: "RING_HASH",
  maglev: "MAGLEV",
};

export function translateService(doc, out) {
  const spec = doc.spec(serviceSpec);
  const http2 = spec.protocol === "http2" || spec.protocol === "grpc";

  const cluster = edsCluster(doc.name);
  cluster.lb_policy = LB_POLICY[spec.loadBalancing];
  if (spec.connectTimeout !== undefined) {
    doc.expect("spec.connectTimeout", check.positive(spec.connectTimeout));
    cluster.connect_timeout = duration(spec.connectTimeout);
  }
  if (http2) cluster.http2_protocol_options = {};
  // Locality weights mean the same to Envoy as to gRPC clients.
  if (spec.localities.length > 0) cluster.common_lb_config = { locality_weighted_lb_config: {} };
  if (spec.healthCheck !== undefined) cluster.health_checks = [healthCheckOf(doc, spec.healthCheck, http2)];
  if (spec.circuitBreakers !== undefined) cluster.circuit_breakers = { thresholds: [thresholds(spec.circuitBreakers)] };

  const endpoints = loadAssignment(doc, spec.endpoints, spec.localities, out);
  out.resources.push(resource(CLUSTER, doc.name, cluster, doc.id));
  out.resources.push(resource(LOAD_ASSIGNMENT, doc.name, endpoints, doc.id));
}

function loadAssignment(doc, endpoints, localities, out) {
  if (endpoints.length > 0 && localities.length > 0) {
    throw doc.error("spec.localities", "put endpoints either in spec.endpoints or in spec.localities, not both");
  }
  const seen = new Set();
  const cla = { cluster_name: doc.name, endpoints: [] };
  let count = endpoints.length;
  if (endpoints.length > 0) {
    const lbEndpoints = endpoints.map((e, i) => endpoint(doc, e, seen, `spec.endpoints[${i}]`));
    cla.endpoints.push(localityEndpoints({}, lbEndpoints));
  }

  const places = new Set();
  const priorities = new Set();
  localities.forEach((loc, l) => {
    const at = `spec.localities[${l}]`;
    const place = JSON.stringify([loc.region, loc.zone, loc.subZone]);
    if (places.has(place)) throw doc.error(at, "another locality has the same region, zone and subZone");
    places.add(place);
    const weight = loc.weight ?? 1;
    doc.expect(`${at}.weight`, check.weight(weight));
    priorities.add(loc.priority);
    count += loc.endpoints.length;
    const lbEndpoints = loc.endpoints.map((e, i) => endpoint(doc, e, seen, `${at}.endpoints[${i}]`));
    cla.endpoints.push(localityEndpoints({ ...loc, weight }, lbEndpoints));
  });
  // Priorities must run 0, 1, 2, ... without gaps.
  const missing = [...priorities].sort((a, b) => a - b).findIndex((p, i) => p !== i);
  if (missing >= 0) {
    const l = Math.max(0, localities.findIndex((loc) => loc.priority > missing));
    throw doc.error(
      `spec.localities[${l}].priority`,
      `priorities must run 0, 1, 2, ... without gaps, and no locality has priority ${missing}`,
    );
  }
  if (count === 0) {
    out.diagnostics.push(doc.warning("spec.endpoints", "no endpoints: requests to this service fail until it has some"));
  }
  return cla;
}

function endpoint(doc, e, seen, at) {
  const ip = parseIp(e.address);
  doc.expect(`${at}.address`, check.ip(e.address));
  const key = `${ip}|${e.port}`;
  if (seen.has(key)) throw doc.error(at, `${e.address}:${e.port} is listed twice`);
  seen.add(key);
  if (e.weight !== undefined) doc.expect(`${at}.weight`, check.weight(e.weight));
  return lbEndpoint(e.address, e.port, e.weight);
}

function healthCheckOf(doc, spec, http2) {
  const at = "spec.healthCheck";
  let checker;
  if (spec.path !== undefined && spec.grpc === undefined) {
    doc.expect(`${at}.path`, check.path(spec.path));
    const http = { path: spec.path };
    if (http2) http.codec_client_type = "HTTP2";
    if (spec.host !== undefined) {
      doc.expect(`${at}.host`, check.domain(spec.host));
      http.host = spec.host;
    }
    checker = { http_health_check: http };
  } else if (spec.path === undefined && spec.grpc !== undefined) {
    if (!http2) throw doc.error(`${at}.grpc`, "gRPC health checks need protocol http2 or grpc");
    if (spec.host !== undefined) throw doc.error(`${at}.host`, "applies to HTTP checks (path) only");
    checker = { grpc_health_check: { service_name: spec.grpc.serviceName } };
  } else {
    throw doc.error(at, "set path (an HTTP check) or grpc (the gRPC health checking protocol), one of them");
  }
  const hc = healthCheck(checker);
  if (spec.interval !== undefined) {
    doc.expect(`${at}.interval`, check.positive(spec.interval));
    hc.interval = duration(spec.interval);
  }
  if (spec.timeout !== undefined) {
    doc.expect(`${at}.timeout`, check.positive(spec.timeout));
    hc.timeout = duration(spec.timeout);
  }
  if (spec.healthyThreshold !== undefined) {
    doc.expect(`${at}.healthyThreshold`, check.atLeastOne(spec.healthyThreshold));
    hc.healthy_threshold = spec.healthyThreshold;
  }
  if (spec.unhealthyThreshold !== undefined) {
    doc.expect(`${at}.unhealthyThreshold`, check.atLeastOne(spec.unhealthyThreshold));
    hc.unhealthy_threshold = spec.unhealthyThreshold;
  }
  return hc;
}

/** Circuit breaker limits for the default priority; unset limits keep Envoy's defaults. */
function thresholds(spec) {
  const t = {};
  if (spec.maxConnections !== undefined) t.max_connections = spec.maxConnections;
  if (spec.maxPendingRequests !== undefined) t.max_pending_requests = spec.maxPendingRequests;
  if (spec.maxRequests !== undefined) t.max_requests = spec.maxRequests;
  if (spec.maxRetries !== undefined) t.max_retries = spec.maxRetries;
  return t;
}

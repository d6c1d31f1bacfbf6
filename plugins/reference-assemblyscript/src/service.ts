// `Service` -> an EDS Cluster and its ClusterLoadAssignment, both named after the document.
// Mirrors plugins/reference/src/service.rs.

import { Value } from "./json";
import { Doc, fail, failed, resource, warning } from "./plugin";
import * as check from "./check";
import {
  CLUSTER,
  EdsCluster,
  HealthCheck,
  LOAD_ASSIGNMENT,
  Locality,
  circuitBreakers,
  lbEndpoint,
  loadAssignment,
} from "./envoy";
import { EndpointSpec, HealthCheckSpec, LocalitySpec, readServiceSpec, specOf } from "./schema";

const LB_POLICIES: Array<string> = ["", "LEAST_REQUEST", "RANDOM", "RING_HASH", "MAGLEV"];

/** Appends the Service's resources to `resources` and any warning to `diagnostics`. */
export function translateService(doc: Doc, resources: Array<Value>, diagnostics: Array<Value>): void {
  const specJson = specOf(doc);
  if (specJson === null) return;
  const spec = readServiceSpec(doc, "spec", specJson);
  if (spec === null) return;
  const http2 = spec.protocol != 0; // http2 or grpc

  const cluster = new EdsCluster(doc.name);
  cluster.lbPolicy = LB_POLICIES[spec.loadBalancing];
  const timeout = spec.connectTimeout;
  if (timeout !== null) {
    const why = check.positive(timeout);
    if (why.length) {
      fail(doc, "spec.connectTimeout", why);
      return;
    }
    cluster.connectTimeout = timeout;
  }
  cluster.http2 = http2;
  // Locality weights mean the same to Envoy as to gRPC clients.
  cluster.localityWeighted = spec.localities.length > 0;
  const hcSpec = spec.healthCheck;
  if (hcSpec !== null) {
    const hc = healthCheck(doc, hcSpec, http2);
    if (hc === null) return;
    cluster.healthChecks.push(hc.build());
  }
  const cb = spec.circuitBreakers;
  if (cb !== null) {
    cluster.circuitBreakers = circuitBreakers(cb.maxConnections, cb.maxPendingRequests, cb.maxRequests, cb.maxRetries);
  }

  const cla = assignment(doc, spec.endpoints, spec.localities, diagnostics);
  if (cla === null) return;
  resources.push(resource(CLUSTER, doc.name, doc, cluster.build()));
  resources.push(resource(LOAD_ASSIGNMENT, doc.name, doc, cla));
}

function assignment(
  doc: Doc,
  endpoints: Array<EndpointSpec>,
  localities: Array<LocalitySpec>,
  diagnostics: Array<Value>,
): Value | null {
  if (endpoints.length > 0 && localities.length > 0) {
    fail(doc, "spec.localities", "put endpoints either in spec.endpoints or in spec.localities, not both");
    return null;
  }
  const seen = new Set<string>();
  const groups = new Array<Value>();
  let count = endpoints.length;
  if (endpoints.length > 0) {
    // Endpoints without a locality: one unnamed locality, weight 1, listed first.
    const unnamed = new Locality("", "", "");
    for (let i = 0; i < endpoints.length; i++) {
      const e = endpoint(doc, endpoints[i], seen, "spec.endpoints[" + i.toString() + "]");
      if (e === null) return null;
      unnamed.endpoints.push(e);
    }
    groups.push(unnamed.build());
  }

  const priorities = new Set<i64>();
  const places = new Set<string>();
  const localityPriorities = new Array<i64>();
  for (let l = 0; l < localities.length; l++) {
    const loc = localities[l];
    const at = "spec.localities[" + l.toString() + "]";
    // The three strings joined with a separator no string can hold unescaped.
    const place = loc.region.replaceAll("\\", "\\\\").replaceAll("\u0000", "\\0") + "\u0000" +
      loc.zone.replaceAll("\\", "\\\\").replaceAll("\u0000", "\\0") + "\u0000" +
      loc.subZone.replaceAll("\\", "\\\\").replaceAll("\u0000", "\\0");
    if (places.has(place)) {
      fail(doc, at, "another locality has the same region, zone and subZone");
      return null;
    }
    places.add(place);
    const weight = loc.weight < 0 ? 1 : loc.weight;
    const why = check.weight(weight);
    if (why.length) {
      fail(doc, at + ".weight", why);
      return null;
    }
    priorities.add(loc.priority);
    localityPriorities.push(loc.priority);
    count += loc.endpoints.length;
    const locality = new Locality(loc.region, loc.zone, loc.subZone);
    locality.weight = weight;
    locality.priority = loc.priority;
    for (let i = 0; i < loc.endpoints.length; i++) {
      const e = endpoint(doc, loc.endpoints[i], seen, at + ".endpoints[" + i.toString() + "]");
      if (e === null) return null;
      locality.endpoints.push(e);
    }
    groups.push(locality.build());
  }
  // Priorities must run 0, 1, 2, ... without gaps.
  const sorted = priorities.values();
  sorted.sort((a: i64, b: i64): i32 => (a < b ? -1 : a > b ? 1 : 0));
  for (let want = 0; want < sorted.length; want++) {
    if (sorted[want] == <i64>want) continue;
    let l = 0;
    for (let k = 0; k < localityPriorities.length; k++) {
      if (localityPriorities[k] > <i64>want) {
        l = k;
        break;
      }
    }
    fail(
      doc,
      "spec.localities[" + l.toString() + "].priority",
      "priorities must run 0, 1, 2, ... without gaps, and no locality has priority " + want.toString(),
    );
    return null;
  }
  if (count == 0) {
    diagnostics.push(warning(doc, "spec.endpoints", "no endpoints: requests to this service fail until it has some"));
  }
  return loadAssignment(doc.name, groups);
}

function endpoint(doc: Doc, e: EndpointSpec, seen: Set<string>, at: string): Value | null {
  const ip = check.ip(e.address);
  if (ip.length == 0) {
    fail(doc, at + ".address", check.ipError);
    return null;
  }
  const key = ip + "/" + e.port.toString();
  if (seen.has(key)) {
    fail(doc, at, e.address + ":" + e.port.toString() + " is listed twice");
    return null;
  }
  seen.add(key);
  if (e.weight >= 0) {
    const why = check.weight(e.weight);
    if (why.length) {
      fail(doc, at + ".weight", why);
      return null;
    }
  }
  return lbEndpoint(e.address, e.port, e.weight);
}

function healthCheck(doc: Doc, spec: HealthCheckSpec, http2: bool): HealthCheck | null {
  const at = "spec.healthCheck";
  let hc: HealthCheck;
  const path = spec.path;
  const grpc = spec.grpc;
  if (path !== null && grpc === null) {
    const why = check.path(path);
    if (why.length) {
      fail(doc, at + ".path", why);
      return null;
    }
    hc = HealthCheck.http(path);
    hc.http2 = http2;
    const host = spec.host;
    if (host !== null) {
      const bad = check.domain(host);
      if (bad.length) {
        fail(doc, at + ".host", bad);
        return null;
      }
      hc.httpHost = host;
    }
  } else if (path === null && grpc !== null) {
    if (!http2) {
      fail(doc, at + ".grpc", "gRPC health checks need protocol http2 or grpc");
      return null;
    }
    if (spec.host !== null) {
      fail(doc, at + ".host", "applies to HTTP checks (path) only");
      return null;
    }
    hc = HealthCheck.grpc(grpc);
  } else {
    fail(doc, at, "set path (an HTTP check) or grpc (the gRPC health checking protocol), one of them");
    return null;
  }
  const interval = spec.interval;
  if (interval !== null) {
    const why = check.positive(interval);
    if (why.length) {
      fail(doc, at + ".interval", why);
      return null;
    }
    hc.interval = interval;
  }
  const timeout = spec.timeout;
  if (timeout !== null) {
    const why = check.positive(timeout);
    if (why.length) {
      fail(doc, at + ".timeout", why);
      return null;
    }
    hc.timeout = timeout;
  }
  if (spec.healthyThreshold >= 0) {
    const why = check.atLeastOne(spec.healthyThreshold);
    if (why.length) {
      fail(doc, at + ".healthyThreshold", why);
      return null;
    }
    hc.healthyThreshold = spec.healthyThreshold;
  }
  if (spec.unhealthyThreshold >= 0) {
    const why = check.atLeastOne(spec.unhealthyThreshold);
    if (why.length) {
      fail(doc, at + ".unhealthyThreshold", why);
      return null;
    }
    hc.unhealthyThreshold = spec.unhealthyThreshold;
  }
  return failed() ? null : hc;
}

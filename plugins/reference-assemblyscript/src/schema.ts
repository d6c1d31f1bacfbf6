// The intent schema: what `spec` holds for each kind, read with serde's rules (fields in the
// order written, unknown fields are errors, missing required fields reported after the rest).
// Mirrors plugins/reference/src/schema.rs; checks serde cannot express are in service.ts,
// gateway.ts and routing.ts. README.md documents the schema for users.

import { Kind, Value } from "./json";
import { Doc, failDocument, failed } from "./plugin";
import {
  StringMap,
  expectSeq,
  expectStruct,
  missingField,
  readBool,
  readEnum,
  readOptDur,
  readOptString,
  readOptU32,
  readPort,
  readString,
  readStringMap,
  readStrings,
  readU16,
  readU16s,
  readU32,
  unexpected,
  unknownField,
} from "./de";
import { Dur } from "./duration";

type Reader<T> = (doc: Doc, path: string, v: Value) => T | null;

/** A `Vec<T>` of structs; the items read so far when one fails. */
function readList<T>(doc: Doc, path: string, v: Value, read: Reader<T>): Array<T> {
  const out = new Array<T>();
  if (!expectSeq(doc, path, v)) return out;
  for (let i = 0; i < v.items.length; i++) {
    const item = read(doc, path + "[" + i.toString() + "]", v.items[i]);
    if (item === null || failed()) break;
    out.push(item);
  }
  return out;
}

/** An `Option<Vec<T>>`: null when absent or null. */
function readOptList<T>(doc: Doc, path: string, v: Value, read: Reader<T>): Array<T> | null {
  if (v.kind == Kind.Null) return null;
  return readList<T>(doc, path, v, read);
}

/** An `Option<Vec<String>>`. */
function readOptStrings(doc: Doc, path: string, v: Value): Array<string> | null {
  if (v.kind == Kind.Null) return null;
  return readStrings(doc, path, v);
}

// --- Service ---------------------------------------------------------------------------------

export const PROTOCOLS: Array<string> = ["http1", "http2", "grpc"];
export const LOAD_BALANCING: Array<string> = ["roundRobin", "leastRequest", "random", "ringHash", "maglev"];

export class ServiceSpec {
  /** An index into PROTOCOLS. */
  protocol: i32 = 0;
  /** An index into LOAD_BALANCING. */
  loadBalancing: i32 = 0;
  connectTimeout: Dur | null = null;
  endpoints: Array<EndpointSpec> = [];
  localities: Array<LocalitySpec> = [];
  healthCheck: HealthCheckSpec | null = null;
  circuitBreakers: CircuitBreakersSpec | null = null;
}

const SERVICE_FIELDS: Array<string> = [
  "protocol",
  "loadBalancing",
  "connectTimeout",
  "endpoints",
  "localities",
  "healthCheck",
  "circuitBreakers",
];

export function readServiceSpec(doc: Doc, path: string, v: Value): ServiceSpec | null {
  if (!expectStruct(doc, path, v, "ServiceSpec")) return null;
  const s = new ServiceSpec();
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "protocol") s.protocol = readEnum(doc, p, x, "Protocol", PROTOCOLS);
    else if (k == "loadBalancing") s.loadBalancing = readEnum(doc, p, x, "LoadBalancing", LOAD_BALANCING);
    else if (k == "connectTimeout") s.connectTimeout = readOptDur(doc, p, x);
    else if (k == "endpoints") s.endpoints = readList<EndpointSpec>(doc, p, x, readEndpoint);
    else if (k == "localities") s.localities = readList<LocalitySpec>(doc, p, x, readLocality);
    else if (k == "healthCheck") s.healthCheck = x.kind == Kind.Null ? null : readHealthCheck(doc, p, x);
    else if (k == "circuitBreakers") s.circuitBreakers = x.kind == Kind.Null ? null : readCircuitBreakers(doc, p, x);
    else unknownField(doc, p, k, SERVICE_FIELDS);
    if (failed()) return null;
  }
  return s;
}

export class EndpointSpec {
  address: string = "";
  port: i64 = 0;
  /** -1 when absent. */
  weight: i64 = -1;
}

const ENDPOINT_FIELDS: Array<string> = ["address", "port", "weight"];

function readEndpoint(doc: Doc, path: string, v: Value): EndpointSpec | null {
  if (!expectStruct(doc, path, v, "EndpointSpec")) return null;
  const s = new EndpointSpec();
  let address = false;
  let port = false;
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "address") {
      s.address = readString(doc, p, x);
      address = true;
    } else if (k == "port") {
      s.port = readPort(doc, p, x);
      port = true;
    } else if (k == "weight") s.weight = readOptU32(doc, p, x);
    else unknownField(doc, p, k, ENDPOINT_FIELDS);
    if (failed()) return null;
  }
  if (!address) missingField(doc, path, "address");
  else if (!port) missingField(doc, path, "port");
  return failed() ? null : s;
}

export class LocalitySpec {
  region: string = "";
  zone: string = "";
  subZone: string = "";
  /** -1 when absent. */
  weight: i64 = -1;
  priority: i64 = 0;
  endpoints: Array<EndpointSpec> = [];
}

const LOCALITY_FIELDS: Array<string> = ["region", "zone", "subZone", "weight", "priority", "endpoints"];

function readLocality(doc: Doc, path: string, v: Value): LocalitySpec | null {
  if (!expectStruct(doc, path, v, "LocalitySpec")) return null;
  const s = new LocalitySpec();
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "region") s.region = readString(doc, p, x);
    else if (k == "zone") s.zone = readString(doc, p, x);
    else if (k == "subZone") s.subZone = readString(doc, p, x);
    else if (k == "weight") s.weight = readOptU32(doc, p, x);
    else if (k == "priority") s.priority = readU32(doc, p, x);
    else if (k == "endpoints") s.endpoints = readList<EndpointSpec>(doc, p, x, readEndpoint);
    else unknownField(doc, p, k, LOCALITY_FIELDS);
    if (failed()) return null;
  }
  return s;
}

export class HealthCheckSpec {
  path: string | null = null;
  host: string | null = null;
  /** The gRPC check's service name; null when `grpc` is absent. */
  grpc: string | null = null;
  interval: Dur | null = null;
  timeout: Dur | null = null;
  healthyThreshold: i64 = -1;
  unhealthyThreshold: i64 = -1;
}

const HEALTH_CHECK_FIELDS: Array<string> = [
  "path",
  "host",
  "grpc",
  "interval",
  "timeout",
  "healthyThreshold",
  "unhealthyThreshold",
];

function readHealthCheck(doc: Doc, path: string, v: Value): HealthCheckSpec | null {
  if (!expectStruct(doc, path, v, "HealthCheckSpec")) return null;
  const s = new HealthCheckSpec();
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "path") s.path = readOptString(doc, p, x);
    else if (k == "host") s.host = readOptString(doc, p, x);
    else if (k == "grpc") s.grpc = x.kind == Kind.Null ? null : readGrpcHealthCheck(doc, p, x);
    else if (k == "interval") s.interval = readOptDur(doc, p, x);
    else if (k == "timeout") s.timeout = readOptDur(doc, p, x);
    else if (k == "healthyThreshold") s.healthyThreshold = readOptU32(doc, p, x);
    else if (k == "unhealthyThreshold") s.unhealthyThreshold = readOptU32(doc, p, x);
    else unknownField(doc, p, k, HEALTH_CHECK_FIELDS);
    if (failed()) return null;
  }
  return s;
}

/** `grpc: {serviceName}`: returns the service name ("" by default). */
function readGrpcHealthCheck(doc: Doc, path: string, v: Value): string | null {
  if (!expectStruct(doc, path, v, "GrpcHealthCheckSpec")) return null;
  let serviceName = "";
  for (let i = 0; i < v.items.length; i++) {
    const k = v.items[i].key;
    const p = path + "." + k;
    if (k == "serviceName") serviceName = readString(doc, p, v.items[i]);
    else unknownField(doc, p, k, ["serviceName"]);
    if (failed()) return null;
  }
  return serviceName;
}

export class CircuitBreakersSpec {
  maxConnections: i64 = -1;
  maxPendingRequests: i64 = -1;
  maxRequests: i64 = -1;
  maxRetries: i64 = -1;
}

const CIRCUIT_BREAKER_FIELDS: Array<string> = ["maxConnections", "maxPendingRequests", "maxRequests", "maxRetries"];

function readCircuitBreakers(doc: Doc, path: string, v: Value): CircuitBreakersSpec | null {
  if (!expectStruct(doc, path, v, "CircuitBreakersSpec")) return null;
  const s = new CircuitBreakersSpec();
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "maxConnections") s.maxConnections = readOptU32(doc, p, x);
    else if (k == "maxPendingRequests") s.maxPendingRequests = readOptU32(doc, p, x);
    else if (k == "maxRequests") s.maxRequests = readOptU32(doc, p, x);
    else if (k == "maxRetries") s.maxRetries = readOptU32(doc, p, x);
    else unknownField(doc, p, k, CIRCUIT_BREAKER_FIELDS);
    if (failed()) return null;
  }
  return s;
}

// --- HttpGateway -----------------------------------------------------------------------------

export class GatewaySpec {
  address: string | null = null;
  port: i64 = 0;
  hosts: Array<HostSpec> = [];
}

const GATEWAY_FIELDS: Array<string> = ["address", "port", "hosts"];

export function readGatewaySpec(doc: Doc, path: string, v: Value): GatewaySpec | null {
  if (!expectStruct(doc, path, v, "GatewaySpec")) return null;
  const s = new GatewaySpec();
  let port = false;
  let hosts = false;
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "address") s.address = readOptString(doc, p, x);
    else if (k == "port") {
      s.port = readPort(doc, p, x);
      port = true;
    } else if (k == "hosts") {
      s.hosts = readList<HostSpec>(doc, p, x, readHost);
      hosts = true;
    } else unknownField(doc, p, k, GATEWAY_FIELDS);
    if (failed()) return null;
  }
  if (!port) missingField(doc, path, "port");
  else if (!hosts) missingField(doc, path, "hosts");
  return failed() ? null : s;
}

export class HostSpec {
  name: string | null = null;
  hostnames: Array<string> | null = null;
  routes: Array<HttpRouteSpec> = [];
  requestHeaders: HeadersSpec | null = null;
  responseHeaders: HeadersSpec | null = null;
}

const HOST_FIELDS: Array<string> = ["name", "hostnames", "routes", "requestHeaders", "responseHeaders"];

function readHost(doc: Doc, path: string, v: Value): HostSpec | null {
  if (!expectStruct(doc, path, v, "HostSpec")) return null;
  const s = new HostSpec();
  let routes = false;
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "name") s.name = readOptString(doc, p, x);
    else if (k == "hostnames") s.hostnames = readOptStrings(doc, p, x);
    else if (k == "routes") {
      s.routes = readList<HttpRouteSpec>(doc, p, x, readRoute);
      routes = true;
    } else if (k == "requestHeaders") s.requestHeaders = readOptHeaders(doc, p, x);
    else if (k == "responseHeaders") s.responseHeaders = readOptHeaders(doc, p, x);
    else unknownField(doc, p, k, HOST_FIELDS);
    if (failed()) return null;
  }
  if (!routes) missingField(doc, path, "routes");
  return failed() ? null : s;
}

export class HttpRouteSpec {
  name: string | null = null;
  matches: MatchSpec | null = null;
  backends: Array<BackendSpec> | null = null;
  directResponse: DirectResponseSpec | null = null;
  timeout: Dur | null = null;
  idleTimeout: Dur | null = null;
  retries: RetriesSpec | null = null;
  requestHeaders: HeadersSpec | null = null;
  responseHeaders: HeadersSpec | null = null;
  rewrite: string | null = null;
}

const ROUTE_FIELDS: Array<string> = [
  "name",
  "match",
  "backends",
  "directResponse",
  "timeout",
  "idleTimeout",
  "retries",
  "requestHeaders",
  "responseHeaders",
  "rewrite",
];

function readRoute(doc: Doc, path: string, v: Value): HttpRouteSpec | null {
  if (!expectStruct(doc, path, v, "HttpRouteSpec")) return null;
  const s = new HttpRouteSpec();
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "name") s.name = readOptString(doc, p, x);
    else if (k == "match") s.matches = x.kind == Kind.Null ? null : readMatch(doc, p, x);
    else if (k == "backends") s.backends = readOptList<BackendSpec>(doc, p, x, readBackend);
    else if (k == "directResponse") s.directResponse = x.kind == Kind.Null ? null : readDirectResponse(doc, p, x);
    else if (k == "timeout") s.timeout = readOptDur(doc, p, x);
    else if (k == "idleTimeout") s.idleTimeout = readOptDur(doc, p, x);
    else if (k == "retries") s.retries = x.kind == Kind.Null ? null : readRetries(doc, p, x);
    else if (k == "requestHeaders") s.requestHeaders = readOptHeaders(doc, p, x);
    else if (k == "responseHeaders") s.responseHeaders = readOptHeaders(doc, p, x);
    else if (k == "rewrite") s.rewrite = x.kind == Kind.Null ? null : readRewrite(doc, p, x);
    else unknownField(doc, p, k, ROUTE_FIELDS);
    if (failed()) return null;
  }
  return s;
}

export class MatchSpec {
  pathPrefix: string | null = null;
  path: string | null = null;
  regex: string | null = null;
  headers: Array<HeaderMatchSpec> = [];
}

const MATCH_FIELDS: Array<string> = ["pathPrefix", "path", "regex", "headers"];

function readMatch(doc: Doc, path: string, v: Value): MatchSpec | null {
  if (!expectStruct(doc, path, v, "MatchSpec")) return null;
  const s = new MatchSpec();
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "pathPrefix") s.pathPrefix = readOptString(doc, p, x);
    else if (k == "path") s.path = readOptString(doc, p, x);
    else if (k == "regex") s.regex = readOptString(doc, p, x);
    else if (k == "headers") s.headers = readList<HeaderMatchSpec>(doc, p, x, readHeaderMatch);
    else unknownField(doc, p, k, MATCH_FIELDS);
    if (failed()) return null;
  }
  return s;
}

export class HeaderMatchSpec {
  name: string = "";
  exact: string | null = null;
  prefix: string | null = null;
  regex: string | null = null;
  /** -1 absent, 0 false, 1 true. */
  present: i32 = -1;
  invert: bool = false;
}

const HEADER_MATCH_FIELDS: Array<string> = ["name", "exact", "prefix", "regex", "present", "invert"];

function readHeaderMatch(doc: Doc, path: string, v: Value): HeaderMatchSpec | null {
  if (!expectStruct(doc, path, v, "HeaderMatchSpec")) return null;
  const s = new HeaderMatchSpec();
  let name = false;
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "name") {
      s.name = readString(doc, p, x);
      name = true;
    } else if (k == "exact") s.exact = readOptString(doc, p, x);
    else if (k == "prefix") s.prefix = readOptString(doc, p, x);
    else if (k == "regex") s.regex = readOptString(doc, p, x);
    else if (k == "present") s.present = x.kind == Kind.Null ? -1 : readBool(doc, p, x) ? 1 : 0;
    else if (k == "invert") s.invert = readBool(doc, p, x);
    else unknownField(doc, p, k, HEADER_MATCH_FIELDS);
    if (failed()) return null;
  }
  if (!name) missingField(doc, path, "name");
  return failed() ? null : s;
}

export class BackendSpec {
  service: string = "";
  /** -1 when absent. */
  weight: i64 = -1;
}

const BACKEND_FIELDS: Array<string> = ["service", "weight"];

function readBackend(doc: Doc, path: string, v: Value): BackendSpec | null {
  if (!expectStruct(doc, path, v, "BackendSpec")) return null;
  const s = new BackendSpec();
  let service = false;
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "service") {
      s.service = readString(doc, p, x);
      service = true;
    } else if (k == "weight") s.weight = readOptU32(doc, p, x);
    else unknownField(doc, p, k, BACKEND_FIELDS);
    if (failed()) return null;
  }
  if (!service) missingField(doc, path, "service");
  return failed() ? null : s;
}

export class DirectResponseSpec {
  status: i64 = 0;
  body: string | null = null;
}

function readDirectResponse(doc: Doc, path: string, v: Value): DirectResponseSpec | null {
  if (!expectStruct(doc, path, v, "DirectResponseSpec")) return null;
  const s = new DirectResponseSpec();
  let status = false;
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "status") {
      s.status = readU16(doc, p, x);
      status = true;
    } else if (k == "body") s.body = readOptString(doc, p, x);
    else unknownField(doc, p, k, ["status", "body"]);
    if (failed()) return null;
  }
  if (!status) missingField(doc, path, "status");
  return failed() ? null : s;
}

export class RetriesSpec {
  attempts: i64 = -1;
  on: string | null = null;
  perTryTimeout: Dur | null = null;
  statusCodes: Array<i64> = [];
}

const RETRIES_FIELDS: Array<string> = ["attempts", "on", "perTryTimeout", "statusCodes"];

function readRetries(doc: Doc, path: string, v: Value): RetriesSpec | null {
  if (!expectStruct(doc, path, v, "RetriesSpec")) return null;
  const s = new RetriesSpec();
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "attempts") s.attempts = readOptU32(doc, p, x);
    else if (k == "on") s.on = readOptString(doc, p, x);
    else if (k == "perTryTimeout") s.perTryTimeout = readOptDur(doc, p, x);
    else if (k == "statusCodes") s.statusCodes = readU16s(doc, p, x);
    else unknownField(doc, p, k, RETRIES_FIELDS);
    if (failed()) return null;
  }
  return s;
}

export class HeadersSpec {
  /** `set`: replace the header's value (or add it). */
  replace: StringMap = new StringMap();
  /** `add`: add a value, keeping any the header has. */
  append: StringMap = new StringMap();
  remove: Array<string> = [];
}

function readOptHeaders(doc: Doc, path: string, v: Value): HeadersSpec | null {
  if (v.kind == Kind.Null) return null;
  if (!expectStruct(doc, path, v, "HeadersSpec")) return null;
  const s = new HeadersSpec();
  for (let i = 0; i < v.items.length; i++) {
    const x = v.items[i];
    const k = x.key;
    const p = path + "." + k;
    if (k == "set") s.replace = readStringMap(doc, p, x);
    else if (k == "add") s.append = readStringMap(doc, p, x);
    else if (k == "remove") s.remove = readStrings(doc, p, x);
    else unknownField(doc, p, k, ["set", "add", "remove"]);
    if (failed()) return null;
  }
  return s;
}

/** `rewrite: {pathPrefix}`: returns the prefix. */
function readRewrite(doc: Doc, path: string, v: Value): string | null {
  if (!expectStruct(doc, path, v, "RewriteSpec")) return null;
  let prefix: string | null = null;
  for (let i = 0; i < v.items.length; i++) {
    const k = v.items[i].key;
    const p = path + "." + k;
    if (k == "pathPrefix") prefix = readString(doc, p, v.items[i]);
    else unknownField(doc, p, k, ["pathPrefix"]);
    if (failed()) return null;
  }
  if (prefix === null) missingField(doc, path, "pathPrefix");
  return prefix;
}

// --- the envelope ----------------------------------------------------------------------------

/** The document's `spec`; absent or null reads as `{}`. Null after recording an error. */
export function specOf(doc: Doc): Value | null {
  const json = doc.json;
  if (json.kind != Kind.Object) {
    failDocument(doc, "invalid type: " + unexpected(json) + ", expected struct Envelope");
    return null;
  }
  const spec = json.get("spec");
  if (spec === null || spec.kind == Kind.Null) return Value.object();
  return spec;
}

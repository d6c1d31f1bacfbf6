// `HttpGateway` -> a Listener (RDS over ADS) and its RouteConfiguration, both named after the
// document. Mirrors plugins/reference/src/gateway.rs.

import { Value } from "./json";
import { Doc, fail, resource } from "./plugin";
import * as check from "./check";
import { LISTENER, ROUTE_CONFIGURATION, Route, VirtualHost, duration, httpListener, retryPolicy, routeConfiguration } from "./envoy";
import { HttpRouteSpec, RetriesSpec, readGatewaySpec, specOf } from "./schema";
import { mutate, ok, routeMatch, toBackends } from "./routing";
import { asciiLower, quote } from "./text";

const DEFAULT_RETRY_ON = "5xx,connect-failure,reset";

export function translateGateway(doc: Doc, resources: Array<Value>): void {
  const specJson = specOf(doc);
  if (specJson === null) return;
  const spec = readGatewaySpec(doc, "spec", specJson);
  if (spec === null) return;
  const given = spec.address;
  const address = given !== null ? given : "0.0.0.0";
  if (check.ip(address).length == 0) {
    fail(doc, "spec.address", check.ipError);
    return;
  }
  if (spec.hosts.length == 0) {
    fail(doc, "spec.hosts", "list at least one host");
    return;
  }

  const domains = new Set<string>();
  const names = new Set<string>();
  const vhosts = new Array<Value>();
  for (let h = 0; h < spec.hosts.length; h++) {
    const host = spec.hosts[h];
    const at = "spec.hosts[" + h.toString() + "]";
    const listed = host.hostnames;
    const hostnames = listed !== null ? listed : ["*"];
    if (hostnames.length == 0) {
      fail(doc, at + ".hostnames", "list at least one hostname (or leave hostnames out to match any)");
      return;
    }
    for (let i = 0; i < hostnames.length; i++) {
      const d = hostnames[i];
      const field = at + ".hostnames[" + i.toString() + "]";
      if (!ok(doc, field, check.domain(d))) return;
      const key = asciiLower(d);
      if (domains.has(key)) {
        fail(doc, field, quote(d) + " is listed more than once in this gateway");
        return;
      }
      domains.add(key);
    }
    let name: string;
    const given = host.name;
    if (given !== null) {
      if (!ok(doc, at + ".name", check.name(given))) return;
      name = given;
    } else name = hostnames[0];
    if (names.has(name)) {
      fail(doc, at + ".name", "another host is already named " + quote(name));
      return;
    }
    names.add(name);
    if (host.routes.length == 0) {
      fail(doc, at + ".routes", "list at least one route");
      return;
    }
    const vhost = new VirtualHost(name, hostnames);
    if (!mutate(doc, vhost.mutations, host.requestHeaders, true, at + ".requestHeaders")) return;
    if (!mutate(doc, vhost.mutations, host.responseHeaders, false, at + ".responseHeaders")) return;
    for (let r = 0; r < host.routes.length; r++) {
      const route = httpRoute(doc, host.routes[r], at + ".routes[" + r.toString() + "]");
      if (route === null) return;
      vhost.routes.push(route.build());
    }
    vhosts.push(vhost.build());
  }

  resources.push(resource(LISTENER, doc.name, doc, httpListener(doc.name, address, spec.port)));
  resources.push(resource(ROUTE_CONFIGURATION, doc.name, doc, routeConfiguration(doc.name, vhosts)));
}

function httpRoute(doc: Doc, spec: HttpRouteSpec, at: string): Route | null {
  const matched = routeMatch(doc, spec.matches, at);
  if (matched === null) return null;
  const route = matched.route;
  const name = spec.name;
  if (name !== null) route.name = name;
  const backends = spec.backends;
  const direct = spec.directResponse;
  if (backends !== null && direct !== null) {
    fail(doc, at + ".directResponse", "set backends or directResponse, not both");
    return null;
  }
  if (backends === null && direct === null) {
    fail(doc, at + ".backends", "missing: the services to send requests to (or a directResponse)");
    return null;
  }
  if (backends !== null) {
    if (!toBackends(doc, route, backends, at + ".backends")) return null;
  } else if (direct !== null) {
    if (direct.status < 200 || direct.status > 599) {
      fail(doc, at + ".directResponse.status", "must be an HTTP status between 200 and 599");
      return null;
    }
    if (spec.timeout !== null || spec.idleTimeout !== null || spec.retries !== null || spec.rewrite !== null) {
      fail(
        doc,
        at + ".directResponse",
        "timeout, idleTimeout, retries and rewrite apply to backends, not to a directResponse",
      );
      return null;
    }
    route.directResponse(direct.status, direct.body);
  }
  const action = route.action!;
  const timeout = spec.timeout;
  if (timeout !== null) action.set("timeout", duration(timeout));
  const idle = spec.idleTimeout;
  if (idle !== null) action.set("idle_timeout", duration(idle));
  const retries = spec.retries;
  if (retries !== null) {
    const policy = httpRetries(doc, retries, at + ".retries");
    if (policy === null) return null;
    action.set("retry_policy", policy);
  }
  const rewrite = spec.rewrite;
  if (rewrite !== null) {
    if (matched.isRegex) {
      fail(doc, at + ".rewrite.pathPrefix", "needs a pathPrefix or path match, not a regex");
      return null;
    }
    if (!ok(doc, at + ".rewrite.pathPrefix", check.path(rewrite))) return null;
    if (rewrite.length) action.setString("prefix_rewrite", rewrite);
  }
  if (!mutate(doc, route.mutations, spec.requestHeaders, true, at + ".requestHeaders")) return null;
  if (!mutate(doc, route.mutations, spec.responseHeaders, false, at + ".responseHeaders")) return null;
  return route;
}

function httpRetries(doc: Doc, spec: RetriesSpec, at: string): Value | null {
  const attempts = spec.attempts < 0 ? 1 : spec.attempts;
  if (attempts == 0) {
    fail(doc, at + ".attempts", "must be at least 1 (leave retries out for none)");
    return null;
  }
  const given = spec.on;
  if (!ok(doc, at + ".on", check.retryOn(given !== null ? given : DEFAULT_RETRY_ON, check.HTTP_RETRY_ON))) {
    return null;
  }
  let on = check.normalisedRetryOn;
  for (let i = 0; i < spec.statusCodes.length; i++) {
    const code = spec.statusCodes[i];
    if (code < 100 || code > 599) {
      fail(doc, at + ".statusCodes[" + i.toString() + "]", "must be an HTTP status between 100 and 599");
      return null;
    }
  }
  if (spec.statusCodes.length > 0 && !on.split(",").includes("retriable-status-codes")) {
    on += ",retriable-status-codes";
  }
  const perTry = spec.perTryTimeout;
  if (perTry !== null && !ok(doc, at + ".perTryTimeout", check.positive(perTry))) return null;
  return retryPolicy(on, attempts, perTry, spec.statusCodes);
}

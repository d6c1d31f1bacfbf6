// `HttpGateway` -> a Listener (RDS over ADS) and its RouteConfiguration, both named after the
// document.

import * as check from "./check.js";
import { LISTENER, ROUTE_CONFIGURATION, duration, httpListener, resource } from "./envoy.js";
import { mutate, routeMatch, toBackends } from "./routing.js";
import { gatewaySpec } from "./specs.js";
import { asciiLowercase, debug } from "./text.js";

const DEFAULT_RETRY_ON = "5xx,connect-failure,reset";

export function translateGateway(doc, out) {
  const spec = doc.spec(gatewaySpec);
  const address = spec.address ?? "0.0.0.0";
  doc.expect("spec.address", check.ip(address));
  if (spec.hosts.length === 0) throw doc.error("spec.hosts", "list at least one host");

  const domains = new Set();
  const names = new Set();
  const virtualHosts = spec.hosts.map((host, h) => {
    const at = `spec.hosts[${h}]`;
    const hostnames = host.hostnames ?? ["*"];
    if (hostnames.length === 0) {
      throw doc.error(`${at}.hostnames`, "list at least one hostname (or leave hostnames out to match any)");
    }
    hostnames.forEach((d, i) => {
      doc.expect(`${at}.hostnames[${i}]`, check.domain(d));
      if (domains.has(asciiLowercase(d))) {
        throw doc.error(`${at}.hostnames[${i}]`, `${debug(d)} is listed more than once in this gateway`);
      }
      domains.add(asciiLowercase(d));
    });
    if (host.name !== undefined) doc.expect(`${at}.name`, check.name(host.name));
    const name = host.name ?? hostnames[0];
    if (names.has(name)) throw doc.error(`${at}.name`, `another host is already named ${debug(name)}`);
    names.add(name);
    if (host.routes.length === 0) throw doc.error(`${at}.routes`, "list at least one route");
    const vhost = { name, domains: hostnames };
    mutate(doc, vhost, host.requestHeaders, true, `${at}.requestHeaders`);
    mutate(doc, vhost, host.responseHeaders, false, `${at}.responseHeaders`);
    vhost.routes = host.routes.map((route, r) => httpRoute(doc, route, `${at}.routes[${r}]`));
    return vhost;
  });

  const listener = httpListener(doc.name, address, spec.port);
  const routes = { name: doc.name, virtual_hosts: virtualHosts };
  out.resources.push(resource(LISTENER, doc.name, listener, doc.id));
  out.resources.push(resource(ROUTE_CONFIGURATION, doc.name, routes, doc.id));
}

function httpRoute(doc, spec, at) {
  const { match, isRegex } = routeMatch(doc, spec.match, at);
  const route = { match };
  if (spec.name !== undefined) route.name = spec.name;
  let action;
  if (spec.backends !== undefined && spec.directResponse !== undefined) {
    throw doc.error(`${at}.directResponse`, "set backends or directResponse, not both");
  } else if (spec.backends === undefined && spec.directResponse === undefined) {
    throw doc.error(`${at}.backends`, "missing: the services to send requests to (or a directResponse)");
  } else if (spec.backends !== undefined) {
    action = toBackends(doc, spec.backends, `${at}.backends`);
  } else {
    route.direct_response = directResponse(doc, spec, at);
  }
  if (action !== undefined) {
    if (spec.timeout !== undefined) action.timeout = duration(spec.timeout);
    if (spec.idleTimeout !== undefined) action.idle_timeout = duration(spec.idleTimeout);
    if (spec.retries !== undefined) action.retry_policy = httpRetries(doc, spec.retries, `${at}.retries`);
    if (spec.rewrite !== undefined) {
      if (isRegex) throw doc.error(`${at}.rewrite.pathPrefix`, "needs a pathPrefix or path match, not a regex");
      doc.expect(`${at}.rewrite.pathPrefix`, check.path(spec.rewrite.pathPrefix));
      action.prefix_rewrite = spec.rewrite.pathPrefix;
    }
    route.route = action;
  }
  mutate(doc, route, spec.requestHeaders, true, `${at}.requestHeaders`);
  mutate(doc, route, spec.responseHeaders, false, `${at}.responseHeaders`);
  return route;
}

function directResponse(doc, spec, at) {
  const { status, body } = spec.directResponse;
  if (status < 200 || status > 599) {
    throw doc.error(`${at}.directResponse.status`, "must be an HTTP status between 200 and 599");
  }
  if (spec.timeout !== undefined || spec.idleTimeout !== undefined || spec.retries !== undefined || spec.rewrite !== undefined) {
    throw doc.error(
      `${at}.directResponse`,
      "timeout, idleTimeout, retries and rewrite apply to backends, not to a directResponse",
    );
  }
  const direct = { status };
  if (body !== undefined) direct.body = { inline_string: body };
  return direct;
}

function httpRetries(doc, spec, at) {
  const attempts = spec.attempts ?? 1;
  if (attempts === 0) throw doc.error(`${at}.attempts`, "must be at least 1 (leave retries out for none)");
  const { on, problem } = check.retryOn(spec.on ?? DEFAULT_RETRY_ON, check.HTTP_RETRY_ON);
  doc.expect(`${at}.on`, problem);
  spec.statusCodes.forEach((code, i) => {
    if (code < 100 || code > 599) throw doc.error(`${at}.statusCodes[${i}]`, "must be an HTTP status between 100 and 599");
  });
  const policy = { retry_on: on, num_retries: attempts };
  if (spec.statusCodes.length > 0 && !on.split(",").includes("retriable-status-codes")) {
    policy.retry_on = `${on},retriable-status-codes`;
  }
  if (spec.perTryTimeout !== undefined) {
    doc.expect(`${at}.perTryTimeout`, check.positive(spec.perTryTimeout));
    policy.per_try_timeout = duration(spec.perTryTimeout);
  }
  if (spec.statusCodes.length > 0) policy.retriable_status_codes = spec.statusCodes;
  return policy;
}

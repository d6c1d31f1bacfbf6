// route-policy: a patch plugin (a security or platform team's overlay). It runs after the
// translate plugins and applies one policy to every route of every RouteConfiguration:
//
//   config:                                   # in route-policy.yaml beside the .wasm
//     retries: {attempts: 2, on: "5xx,reset"} # set on every route that forwards (not direct responses)
//     responseHeaders: {x-policy: edge}       # added to every virtual host's responses
//
// It returns only the route configurations it changed. A bad configuration is a plugin error
// naming the field of the configuration.

import { log } from "xdst:plugin/log@0.1.0";

const ROUTES = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

export function describe() {
  return { name: "route-policy", version: "0.1.0", kinds: [], phase: "patch", granularity: "whole-set" };
}

function fail(field, message) {
  // A plain object: a thrown Error traps (see guest-sdk/js/README.md).
  throw { message, document: null, field };
}

function readConfig(text) {
  const config = JSON.parse(text) ?? {};
  for (const key of Object.keys(config)) {
    if (key !== "retries" && key !== "responseHeaders") fail(`config.${key}`, `unknown field \`${key}\`, expected one of \`retries\`, \`responseHeaders\``);
  }
  const { retries, responseHeaders } = config;
  if (retries !== undefined) {
    if (!Number.isInteger(retries.attempts) || retries.attempts < 1) fail("config.retries.attempts", "must be an integer of at least 1");
    if (retries.on !== undefined && typeof retries.on !== "string") fail("config.retries.on", "must be a string such as \"5xx,reset\"");
  }
  for (const [name, value] of Object.entries(responseHeaders ?? {})) {
    if (typeof value !== "string") fail(`config.responseHeaders.${name}`, "must be a string");
  }
  return { retries, responseHeaders: responseHeaders ?? {} };
}

function patchRouteConfiguration(rc, policy) {
  for (const vhost of rc.virtual_hosts ?? []) {
    const headers = Object.entries(policy.responseHeaders).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    if (headers.length > 0) {
      vhost.response_headers_to_add = [
        ...(vhost.response_headers_to_add ?? []),
        ...headers.map(([key, value]) => ({ header: { key, value }, append_action: "OVERWRITE_IF_EXISTS_OR_ADD" })),
      ];
    }
    if (policy.retries) {
      for (const route of vhost.routes ?? []) {
        if (!route.route) continue; // direct responses have nothing to retry
        route.route.retry_policy = { retry_on: policy.retries.on ?? "5xx,connect-failure,reset", num_retries: policy.retries.attempts };
      }
    }
  }
  return rc;
}

export function translate(request) {
  const policy = readConfig(request.config);
  const resources = [];
  for (const r of request.resources) {
    if (r.typeUrl !== ROUTES || r.body.tag !== "json") continue;
    const rc = patchRouteConfiguration(JSON.parse(r.body.val), policy);
    resources.push({ typeUrl: r.typeUrl, name: r.name, body: { tag: "json", val: JSON.stringify(rc) }, document: r.document });
  }
  log("info", `route policy applied to ${resources.length} route configurations`);
  return { resources, diagnostics: [] };
}

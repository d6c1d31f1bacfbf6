// What HttpGateway routes are made of: matches, backends, header mutation. Routes are built
// as RouteConfiguration JSON: {match, route | direct_response, headers to add and remove}.

import * as check from "./check.js";
import { headerValueOption, regexMatcher } from "./envoy.js";
import { debug } from "./text.js";

/**
 * A route's match: one of `pathPrefix`, `path` or `regex` (default `pathPrefix: /`), and header
 * matchers. `at` is the route's field path. Returns {match, isRegex}.
 */
export function routeMatch(doc, spec, at) {
  const m = spec ?? { headers: [] };
  const set = [m.pathPrefix, m.path, m.regex].filter((o) => o !== undefined).length;
  if (set > 1) throw doc.error(`${at}.match`, "set one of pathPrefix, path or regex, not several");
  let match;
  if (m.pathPrefix !== undefined) {
    doc.expect(`${at}.match.pathPrefix`, check.path(m.pathPrefix));
    match = { prefix: m.pathPrefix };
  } else if (m.path !== undefined) {
    doc.expect(`${at}.match.path`, check.path(m.path));
    match = { path: m.path };
  } else if (m.regex !== undefined) {
    doc.expect(`${at}.match.regex`, check.regex(m.regex));
    match = { safe_regex: regexMatcher(m.regex) };
  } else {
    match = { prefix: "/" };
  }
  if (m.headers.length > 0) match.headers = m.headers.map((h, i) => headerMatch(doc, h, `${at}.match.headers[${i}]`));
  return { match, isRegex: m.regex !== undefined };
}

function headerMatch(doc, h, at) {
  doc.expect(`${at}.name`, check.headerName(h.name, false));
  const set = [h.exact, h.prefix, h.regex, h.present].filter((o) => o !== undefined).length;
  if (set !== 1) throw doc.error(at, "set exactly one of exact, prefix, regex or present");
  let invert = h.invert;
  const m = { name: h.name };
  if (h.exact !== undefined) {
    doc.expect(`${at}.exact`, check.headerValue(h.exact));
    m.string_match = { exact: h.exact };
  } else if (h.prefix !== undefined) {
    doc.expect(`${at}.prefix`, check.headerValue(h.prefix));
    m.string_match = { prefix: h.prefix };
  } else if (h.regex !== undefined) {
    doc.expect(`${at}.regex`, check.regex(h.regex));
    m.string_match = { safe_regex: regexMatcher(h.regex) };
  } else {
    // `present: false` matches requests without the header.
    invert = invert !== (h.present === false);
    m.present_match = true;
  }
  if (invert) m.invert_match = true;
  return m;
}

/** Checks a backends list: not empty, valid service names listed once, weights at least 1. */
function checkBackends(doc, backends, at) {
  if (backends.length === 0) throw doc.error(at, "list at least one backend service");
  let total = 0;
  const seen = new Set();
  backends.forEach((b, i) => {
    doc.expect(`${at}[${i}].service`, check.name(b.service));
    if (backends.length > 1 && seen.has(b.service)) throw doc.error(`${at}[${i}].service`, `${debug(b.service)} is listed twice`);
    seen.add(b.service);
    const weight = b.weight ?? 1;
    doc.expect(`${at}[${i}].weight`, check.weight(weight));
    total += weight;
  });
  if (total > 0xffff_ffff) throw doc.error(at, "the weights add up to more than 4294967295");
}

/**
 * Checks `backends` and returns the route action's destination: one backend is a plain
 * cluster, several a weighted split. `at` is the path of the list.
 */
export function toBackends(doc, backends, at) {
  checkBackends(doc, backends, at);
  if (backends.length === 1) return { cluster: backends[0].service };
  return { weighted_clusters: { clusters: backends.map((b) => ({ name: b.service, weight: b.weight ?? 1 })) } };
}

/**
 * Applies `requestHeaders` (`request`) or `responseHeaders` to a route or virtual host
 * (`target`, which has the same four fields for both): `set`, then `add` (each in name order),
 * then `remove`. `at` is the path of the headers block.
 */
export function mutate(doc, target, spec, request, at) {
  if (spec === undefined) return;
  const side = request ? "request" : "response";
  const toAdd = (option) => (target[`${side}_headers_to_add`] ??= []).push(option);
  for (const [name, value] of spec.set) {
    doc.expect(`${at}.set`, check.headerName(name, true));
    doc.expect(`${at}.set.${name}`, check.headerValue(value));
    toAdd(headerValueOption(name, value, true));
  }
  for (const [name, value] of spec.add) {
    doc.expect(`${at}.add`, check.headerName(name, true));
    doc.expect(`${at}.add.${name}`, check.headerValue(value));
    toAdd(headerValueOption(name, value, false));
  }
  spec.remove.forEach((name, i) => {
    doc.expect(`${at}.remove[${i}]`, check.headerName(name, true));
    (target[`${side}_headers_to_remove`] ??= []).push(name);
  });
}

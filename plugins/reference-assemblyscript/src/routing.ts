// What HttpGateway routes are made of: matches, backends, header mutation.
// Mirrors plugins/reference/src/routing.rs.

import { Value } from "./json";
import { Doc, fail } from "./plugin";
import * as check from "./check";
import { HeaderMutations, Route, headerMatcher } from "./envoy";
import { BackendSpec, HeaderMatchSpec, HeadersSpec, MatchSpec } from "./schema";
import { quote } from "./text";

/** Attaches a check's message (if any) to `field`; returns whether the value passed. */
export function ok(doc: Doc, field: string, why: string): bool {
  if (why.length == 0) return true;
  fail(doc, field, why);
  return false;
}

/** A route with its match set, and whether that match is a regex. */
export class Matched {
  constructor(
    public route: Route,
    public isRegex: bool,
  ) {}
}

/**
 * A route's match: one of `pathPrefix`, `path` or `regex` (default `pathPrefix: /`), and header
 * matchers. `at` is the route's field path.
 */
export function routeMatch(doc: Doc, spec: MatchSpec | null, at: string): Matched | null {
  const m = spec !== null ? spec : new MatchSpec();
  let set = 0;
  if (m.pathPrefix !== null) set++;
  if (m.path !== null) set++;
  if (m.regex !== null) set++;
  if (set > 1) {
    fail(doc, at + ".match", "set one of pathPrefix, path or regex, not several");
    return null;
  }
  let route: Route;
  let isRegex = false;
  const prefix = m.pathPrefix;
  const path = m.path;
  const regex = m.regex;
  if (prefix !== null) {
    if (!ok(doc, at + ".match.pathPrefix", check.path(prefix))) return null;
    route = new Route("prefix", prefix);
  } else if (path !== null) {
    if (!ok(doc, at + ".match.path", check.path(path))) return null;
    route = new Route("path", path);
  } else if (regex !== null) {
    if (!ok(doc, at + ".match.regex", check.regex(regex))) return null;
    route = new Route("safe_regex", regex);
    isRegex = true;
  } else {
    route = new Route("prefix", "/");
  }
  for (let i = 0; i < m.headers.length; i++) {
    const h = headerMatch(doc, m.headers[i], at + ".match.headers[" + i.toString() + "]");
    if (h === null) return null;
    route.headers.push(h);
  }
  return new Matched(route, isRegex);
}

function headerMatch(doc: Doc, h: HeaderMatchSpec, at: string): Value | null {
  if (!ok(doc, at + ".name", check.headerName(h.name, false))) return null;
  let set = 0;
  if (h.exact !== null) set++;
  if (h.prefix !== null) set++;
  if (h.regex !== null) set++;
  if (h.present >= 0) set++;
  if (set != 1) {
    fail(doc, at, "set exactly one of exact, prefix, regex or present");
    return null;
  }
  let invert = h.invert;
  const exact = h.exact;
  const prefix = h.prefix;
  const regex = h.regex;
  if (exact !== null) {
    if (!ok(doc, at + ".exact", check.headerValue(exact))) return null;
    return headerMatcher(h.name, "exact", exact, invert);
  }
  if (prefix !== null) {
    if (!ok(doc, at + ".prefix", check.headerValue(prefix))) return null;
    return headerMatcher(h.name, "prefix", prefix, invert);
  }
  if (regex !== null) {
    if (!ok(doc, at + ".regex", check.regex(regex))) return null;
    return headerMatcher(h.name, "regex", regex, invert);
  }
  // `present: false` matches requests without the header.
  if (h.present == 0) invert = !invert;
  return headerMatcher(h.name, "present", "", invert);
}

/**
 * Checks a backends list (not empty, valid service names listed once, weights at least 1) and
 * sends the route to it: one backend is a plain cluster, several a weighted split. `at` is the
 * path of the list.
 */
export function toBackends(doc: Doc, route: Route, backends: Array<BackendSpec>, at: string): bool {
  if (backends.length == 0) return fail(doc, at, "list at least one backend service");
  let total: i64 = 0;
  const seen = new Set<string>();
  const names = new Array<string>();
  const weights = new Array<i64>();
  for (let i = 0; i < backends.length; i++) {
    const b = backends[i];
    const item = at + "[" + i.toString() + "]";
    if (!ok(doc, item + ".service", check.name(b.service))) return false;
    if (backends.length > 1) {
      if (seen.has(b.service)) return fail(doc, item + ".service", quote(b.service) + " is listed twice");
      seen.add(b.service);
    }
    const weight = b.weight < 0 ? 1 : b.weight;
    if (!ok(doc, item + ".weight", check.weight(weight))) return false;
    total += weight;
    names.push(b.service);
    weights.push(weight);
  }
  if (total > 0xffffffff) return fail(doc, at, "the weights add up to more than 4294967295");
  if (backends.length == 1) route.toCluster(names[0]);
  else route.toWeightedClusters(names, weights);
  return true;
}

/**
 * Applies `requestHeaders` (`request`) or `responseHeaders`: `set`, then `add` (each in name
 * order), then `remove`. `at` is the path of the headers block.
 */
export function mutate(doc: Doc, target: HeaderMutations, spec: HeadersSpec | null, request: bool, at: string): bool {
  if (spec === null) return true;
  for (let i = 0; i < spec.replace.keys.length; i++) {
    const name = spec.replace.keys[i];
    const value = spec.replace.values[i];
    if (!ok(doc, at + ".set", check.headerName(name, true))) return false;
    if (!ok(doc, at + ".set." + name, check.headerValue(value))) return false;
    target.add(request, name, value, true);
  }
  for (let i = 0; i < spec.append.keys.length; i++) {
    const name = spec.append.keys[i];
    const value = spec.append.values[i];
    if (!ok(doc, at + ".add", check.headerName(name, true))) return false;
    if (!ok(doc, at + ".add." + name, check.headerValue(value))) return false;
    target.add(request, name, value, false);
  }
  for (let i = 0; i < spec.remove.length; i++) {
    if (!ok(doc, at + ".remove[" + i.toString() + "]", check.headerName(spec.remove[i], true))) return false;
    target.remove(request, spec.remove[i]);
  }
  return true;
}

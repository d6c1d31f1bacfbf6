// Value checks the schema cannot express. Each returns what is wrong (a message), or undefined
// when the value is fine; the caller names the document and field (IntentDocument.expect).

import { parseIp } from "./ip.js";
import { re2SyntaxError } from "./re2.js";
import { debug, utf8Length } from "./text.js";

/** What Envoy's `retry_on` accepts for HTTP routes (gRPC conditions included). */
export const HTTP_RETRY_ON = [
  "5xx",
  "gateway-error",
  "reset",
  "reset-before-request",
  "connect-failure",
  "envoy-ratelimited",
  "retriable-4xx",
  "refused-stream",
  "retriable-status-codes",
  "retriable-headers",
  "http3-post-connect-failure",
  "cancelled",
  "deadline-exceeded",
  "internal",
  "resource-exhausted",
  "unavailable",
];

/** A reference to another document's name (a Service): the rules the host applies to names. */
export function name(s) {
  if (s === "") return "must not be empty";
  if (utf8Length(s) > 253) return `${debug(s)} is longer than 253 characters`;
  if (!/^[A-Za-z0-9._-]*$/.test(s)) return `${debug(s)} may contain only letters, digits, '-', '.' and '_'`;
  return undefined;
}

/** Listener and EDS endpoint addresses are IP literals: Envoy does not resolve them. */
export function ip(address) {
  if (parseIp(address) === null) return `${debug(address)} is not an IP address (Envoy does not resolve names here)`;
  return undefined;
}

/** A weight in a split or a locality: at least 1. */
export function weight(w) {
  return w === 0 ? "must be at least 1 (remove the entry to send it nothing)" : undefined;
}

/** A count that must be at least 1 (health check thresholds). */
export function atLeastOne(n) {
  return n === 0 ? "must be at least 1" : undefined;
}

/** A duration (BigInt nanoseconds) that must not be zero. */
export function positive(nanos) {
  return nanos === 0n ? "must be longer than 0s" : undefined;
}

/**
 * A virtual host domain: `example.com`, `example.com:8080`, `*`, or one wildcard at either end
 * (`*.example.com`, `example.*`).
 */
export function domain(d) {
  if (d === "") return "must not be empty";
  if (/[\p{White_Space}\p{Cc}/]/u.test(d)) return `${debug(d)} is not a hostname`;
  const stars = d.split("*").length - 1;
  if (stars > 1 || (stars === 1 && !d.startsWith("*") && !d.endsWith("*"))) {
    return `${debug(d)}: a wildcard must be the first or last character, once (*.example.com)`;
  }
  return undefined;
}

/**
 * A header name in a matcher (pseudo-headers such as `:method` allowed) or in a mutation
 * (`mutation`: Envoy refuses to add or remove pseudo-headers and `host`).
 */
export function headerName(n, mutation) {
  const token = n.startsWith(":") ? n.slice(1) : n;
  if (!/^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/.test(token)) return `${debug(n)} is not a valid header name`;
  if (mutation && (n.startsWith(":") || n.toLowerCase() === "host")) {
    return `${debug(n)} cannot be changed here (pseudo-headers and host are off limits)`;
  }
  return undefined;
}

export function headerValue(v) {
  return /[\r\n\0]/.test(v) ? "must not contain CR, LF or NUL" : undefined;
}

/** A path prefix or exact path: starts with `/`. */
export function path(p) {
  return p.startsWith("/") ? undefined : `${debug(p)} must start with '/'`;
}

/** RE2 syntax, checked as the reference checks it (re2.js). */
export function regex(re) {
  if (re === "") return "must not be empty";
  const problem = re2SyntaxError(re);
  return problem === undefined ? undefined : `invalid regex ${debug(re)}: ${problem}`;
}

/**
 * Normalises a comma-separated `retry_on` list (items trimmed) and checks each condition
 * against `allowed`. Returns {on} or {problem}.
 */
export function retryOn(on, allowed) {
  const conditions = on.split(",").map((c) => c.replace(/^\p{White_Space}+|\p{White_Space}+$/gu, ""));
  const unknown = conditions.find((c) => !allowed.includes(c));
  if (unknown !== undefined) {
    return { problem: `unknown retry condition ${debug(unknown)} (one of: ${allowed.join(", ")})` };
  }
  return { on: conditions.join(",") };
}

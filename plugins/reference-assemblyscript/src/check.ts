// Value checks serde cannot express; each returns what is wrong ("" when nothing is), for the
// caller to attach to a document and field. Mirrors plugins/reference/src/check.rs.

import { parseIp } from "./ip";
import { regexError } from "./regex";
import { asciiLower, contains, isAsciiAlphanumeric, isControl, isWhitespace, quote, trim } from "./text";
import { Dur } from "./duration";

/** What Envoy's `retry_on` accepts for HTTP routes (gRPC conditions included). */
export const HTTP_RETRY_ON: Array<string> = [
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

/** A reference to another document's name (a Service). */
export function name(n: string): string {
  if (n.length == 0) return "must not be empty";
  if (String.UTF8.byteLength(n) > 253) return quote(n) + " is longer than 253 characters";
  for (let i = 0; i < n.length; i++) {
    const c = n.charCodeAt(i);
    if (!(isAsciiAlphanumeric(c) || c == 0x2d || c == 0x2e || c == 0x5f)) {
      return quote(n) + " may contain only letters, digits, '-', '.' and '_'";
    }
  }
  return "";
}

/**
 * Listener and endpoint addresses are IP literals. Returns the address's comparable key, or ""
 * with `ipError` set.
 */
export function ip(address: string): string {
  const key = parseIp(address);
  ipError = key.length ? "" : quote(address) + " is not an IP address (Envoy does not resolve names here)";
  return key;
}

export let ipError: string = "";

/** A weight in a split or a locality: at least 1. */
export function weight(w: i64): string {
  return w == 0 ? "must be at least 1 (remove the entry to send it nothing)" : "";
}

/** A virtual host domain: `example.com`, `example.com:8080`, `*`, `*.example.com`, `example.*`. */
export function domain(d: string): string {
  if (d.length == 0) return "must not be empty";
  let stars = 0;
  for (let i = 0; i < d.length; i++) {
    const c = d.charCodeAt(i);
    if (isWhitespace(c) || isControl(c) || c == 0x2f) return quote(d) + " is not a hostname";
  }
  for (let i = 0; i < d.length; i++) if (d.charCodeAt(i) == 0x2a) stars++;
  if (stars > 1 || (stars == 1 && !d.startsWith("*") && !d.endsWith("*"))) {
    return quote(d) + ": a wildcard must be the first or last character, once (*.example.com)";
  }
  return "";
}

const TOKEN_PUNCTUATION = "!#$%&'*+-.^_`|~";

/** A header name in a matcher (pseudo-headers allowed) or in a mutation (`mutation`). */
export function headerName(n: string, mutation: bool): string {
  const token = n.startsWith(":") ? n.substring(1) : n;
  let ok = token.length > 0;
  for (let i = 0; ok && i < token.length; i++) {
    const c = token.charCodeAt(i);
    ok = isAsciiAlphanumeric(c) || (c < 0x80 && TOKEN_PUNCTUATION.indexOf(String.fromCharCode(c)) >= 0);
  }
  if (!ok) return quote(n) + " is not a valid header name";
  if (mutation && (n.startsWith(":") || asciiLower(n) == "host")) {
    return quote(n) + " cannot be changed here (pseudo-headers and host are off limits)";
  }
  return "";
}

/** A count that must be at least 1 (health check thresholds). */
export function atLeastOne(n: i64): string {
  return n == 0 ? "must be at least 1" : "";
}

export function headerValue(v: string): string {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c == 0x0d || c == 0x0a || c == 0) return "must not contain CR, LF or NUL";
  }
  return "";
}

/** A path prefix or exact path: starts with `/`. */
export function path(p: string): string {
  return p.startsWith("/") ? "" : quote(p) + " must start with '/'";
}

/** RE2 syntax, with regex-syntax's rules. */
export function regex(re: string): string {
  if (re.length == 0) return "must not be empty";
  const why = regexError(re);
  return why.length ? "invalid regex " + quote(re) + ": " + why : "";
}

/** Why a `retry_on` list is wrong, or ""; the normalised list is left in `retryOn`. */
export function retryOn(on: string, allowed: Array<string>): string {
  const parts = on.split(",");
  const out = new Array<string>();
  for (let i = 0; i < parts.length; i++) {
    const condition = trim(parts[i]);
    if (!contains(allowed, condition)) {
      return "unknown retry condition " + quote(condition) + " (one of: " + allowed.join(", ") + ")";
    }
    out.push(condition);
  }
  normalisedRetryOn = out.join(",");
  return "";
}

export let normalisedRetryOn: string = "";

export function positive(d: Dur): string {
  return d.isZero() ? "must be longer than 0s" : "";
}

// Durations as people write them: `250ms`, `1s`, `1.5s`, `1m30s`, `2h` (units h, m, s, ms,
// us, ns; a number may have a fraction). Mirrors plugins/reference/src/duration.rs.

import { isAsciiDigit, quote } from "./text";

/** The largest duration protobuf can carry, in seconds. */
const MAX_SECONDS: i64 = 315_576_000_000;
const NANOS: i64 = 1_000_000_000;

export class Dur {
  constructor(
    public seconds: i64,
    public nanos: i64,
  ) {}

  isZero(): bool {
    return this.seconds == 0 && this.nanos == 0;
  }

  /** Proto3 JSON: `1s`, `0.250s`, `1.000001s`. */
  toJson(): string {
    if (this.nanos == 0) return this.seconds.toString() + "s";
    let digits = 9;
    let frac = this.nanos;
    while (digits > 3 && frac % 1000 == 0) {
      frac /= 1000;
      digits -= 3;
    }
    let f = frac.toString();
    while (f.length < digits) f = "0" + f;
    return this.seconds.toString() + "." + f + "s";
  }
}

/** Why the last `parseDuration` failed. */
export let durationError: string = "";

function bad(s: string, why: string): Dur | null {
  durationError = "invalid duration " + quote(s) + ": " + why + "; write for example 250ms, 1s or 1m30s";
  return null;
}

function isNumberChar(c: i32): bool {
  return isAsciiDigit(c) || c == 0x2e;
}

/** The value of a string of at most 18 ASCII digits. */
function digits(d: string): i64 {
  let n: i64 = 0;
  for (let i = 0; i < d.length; i++) n = n * 10 + <i64>(d.charCodeAt(i) - 0x30);
  return n;
}

/** Parses a duration; on failure returns null and sets `durationError`. */
export function parseDuration(s: string): Dur | null {
  if (s.length == 0) return bad(s, "empty");
  if (s.startsWith("-")) return bad(s, "must not be negative");
  let seconds: i64 = 0;
  let nanos: i64 = 0;
  let i = 0;
  while (i < s.length) {
    let j = i;
    while (j < s.length && isNumberChar(s.charCodeAt(j))) j++;
    if (j == i) return bad(s, "expected a number");
    const number = s.substring(i, j);
    let k = j;
    while (k < s.length && !isNumberChar(s.charCodeAt(k))) k++;
    const unit = s.substring(j, k);
    i = k;

    // The unit as whole seconds plus nanoseconds (one of them is zero).
    let unitSeconds: i64 = 0;
    let unitNanos: i64 = 0;
    if (unit == "h") unitSeconds = 3600;
    else if (unit == "m") unitSeconds = 60;
    else if (unit == "s") unitSeconds = 1;
    else if (unit == "ms") unitNanos = 1_000_000;
    else if (unit == "us" || unit == "\u00b5s") unitNanos = 1_000;
    else if (unit == "ns") unitNanos = 1;
    else if (unit.length == 0) return bad(s, "missing unit (h, m, s, ms, us or ns)");
    else return bad(s, "unknown unit (use h, m, s, ms, us or ns)");

    const dot = number.indexOf(".");
    let whole = dot < 0 ? number : number.substring(0, dot);
    const fraction = dot < 0 ? "" : number.substring(dot + 1);
    if ((whole.length == 0 && fraction.length == 0) || fraction.indexOf(".") >= 0) {
      return bad(s, "malformed number");
    }
    let z = 0;
    while (z < whole.length && whole.charCodeAt(z) == 0x30) z++;
    whole = whole.substring(z);
    // 10^25 ns is already beyond MAX_SECONDS.
    if (whole.length > 25) return bad(s, "too large");

    let termSeconds: i64 = 0;
    let termNanos: i64 = 0;
    if (unitSeconds > 0) {
      if (whole.length > 12) return bad(s, "too large");
      const w = whole.length ? digits(whole) : 0;
      termSeconds = w * unitSeconds;
    } else {
      // whole = hi * 10^9 + lo
      const cut = whole.length > 9 ? whole.length - 9 : 0;
      const hi: i64 = cut > 0 ? digits(whole.substring(0, cut)) : 0;
      const lo: i64 = whole.length > cut ? digits(whole.substring(cut)) : 0;
      if (hi > MAX_SECONDS) return bad(s, "too large");
      termSeconds = hi * unitNanos + (lo * unitNanos) / NANOS;
      termNanos = (lo * unitNanos) % NANOS;
    }
    // Digits of the fraction past nanosecond precision are dropped.
    let scale: i64 = unitSeconds * NANOS + unitNanos;
    let frac: i64 = 0;
    for (let f = 0; f < fraction.length; f++) {
      scale /= 10;
      frac += <i64>(fraction.charCodeAt(f) - 0x30) * scale;
    }
    termNanos += frac;
    seconds += termSeconds + termNanos / NANOS;
    nanos += termNanos % NANOS;
    seconds += nanos / NANOS;
    nanos %= NANOS;
    if (seconds > MAX_SECONDS) return bad(s, "too large");
  }
  return new Dur(seconds, nanos);
}

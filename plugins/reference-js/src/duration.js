// Durations as people write them (`250ms`, `1s`, `1.5s`, `1m30s`, `2h`), held as BigInt
// nanoseconds, and written as protobuf JSON Durations (`"0.250s"`).

import { debug } from "./text.js";

/** The largest duration protobuf can carry, in seconds. */
const MAX_SECONDS = 315_576_000_000n;
const U128_MAX = (1n << 128n) - 1n;
const NANOS_PER_UNIT = new Map([
  ["h", 3_600_000_000_000n],
  ["m", 60_000_000_000n],
  ["s", 1_000_000_000n],
  ["ms", 1_000_000n],
  ["us", 1_000n],
  ["µs", 1_000n],
  ["ns", 1n],
]);

/**
 * Parses one or more `<number><unit>` terms (units h, m, s, ms, us, ns; the number may have a
 * fraction) into nanoseconds. Throws an Error saying what is wrong.
 */
export function parseDuration(s) {
  const bad = (why) => {
    throw new Error(`invalid duration ${debug(s)}: ${why}; write for example 250ms, 1s or 1m30s`);
  };
  if (s === "") bad("empty");
  if (s.startsWith("-")) bad("must not be negative");
  let total = 0n;
  let rest = s;
  while (rest !== "") {
    const digits = firstIndex(rest, (c) => !isNumberChar(c));
    if (digits === 0) bad("expected a number");
    const number = rest.slice(0, digits);
    let after = rest.slice(digits);
    const unitLength = firstIndex(after, isNumberChar);
    const unit = after.slice(0, unitLength);
    after = after.slice(unitLength);
    const perUnit = NANOS_PER_UNIT.get(unit);
    if (unit === "") bad("missing unit (h, m, s, ms, us or ns)");
    if (perUnit === undefined) bad("unknown unit (use h, m, s, ms, us or ns)");
    const dot = number.indexOf(".");
    const whole = dot < 0 ? number : number.slice(0, dot);
    const fraction = dot < 0 ? "" : number.slice(dot + 1);
    if ((whole === "" && fraction === "") || fraction.includes(".")) bad("malformed number");
    let term = (whole === "" ? 0n : BigInt(whole)) * perUnit;
    // Digits of the fraction past nanosecond precision are dropped.
    let scale = perUnit;
    for (const d of fraction) {
      scale /= 10n;
      term += BigInt(d) * scale;
    }
    total += term;
    if (term > U128_MAX || total / 1_000_000_000n > MAX_SECONDS) bad("too large");
    rest = after;
  }
  return total;
}

/** A protobuf JSON Duration: `"5s"`, `"0.250s"`, `"1.000000001s"`. */
export function formatDuration(nanos) {
  const seconds = nanos / 1_000_000_000n;
  const rest = nanos % 1_000_000_000n;
  if (rest === 0n) return `${seconds}s`;
  let fraction = rest.toString().padStart(9, "0");
  while (fraction.endsWith("000")) fraction = fraction.slice(0, -3);
  return `${seconds}.${fraction}s`;
}

function isNumberChar(c) {
  return (c >= "0" && c <= "9") || c === ".";
}

function firstIndex(s, predicate) {
  for (let i = 0; i < s.length; i++) if (predicate(s[i])) return i;
  return s.length;
}

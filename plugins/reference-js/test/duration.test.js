import assert from "node:assert/strict";
import { test } from "node:test";

import { formatDuration, parseDuration } from "../src/duration.js";

const ms = (n) => BigInt(n) * 1_000_000n;

test("valid durations", () => {
  for (const [s, nanos] of [
    ["250ms", ms(250)],
    ["1s", ms(1000)],
    ["1.5s", ms(1500)],
    [".5s", ms(500)],
    ["1m", ms(60_000)],
    ["1m30s", ms(90_000)],
    ["2h", ms(7_200_000)],
    ["0s", 0n],
    ["10us", 10_000n],
    ["10µs", 10_000n],
    ["7ns", 7n],
    ["0.0000000019s", 1n],
  ]) {
    assert.equal(parseDuration(s), nanos, s);
  }
});

test("invalid durations say why", () => {
  for (const [s, why] of [
    ["", "empty"],
    ["5", "missing unit"],
    ["5 s", "unknown unit"],
    ["5x", "unknown unit"],
    ["-1s", "negative"],
    ["s", "expected a number"],
    ["1..2s", "malformed"],
    [".s", "malformed"],
    ["99999999999999999999999999999999999999999h", "too large"],
    ["100000000h", "too large"],
  ]) {
    assert.throws(() => parseDuration(s), (e) => e.message.includes(why), s);
  }
  assert.throws(() => parseDuration("250"), {
    message: 'invalid duration "250": missing unit (h, m, s, ms, us or ns); write for example 250ms, 1s or 1m30s',
  });
});

test("protobuf JSON form", () => {
  assert.equal(formatDuration(ms(250)), "0.250s");
  assert.equal(formatDuration(ms(90_000)), "90s");
  assert.equal(formatDuration(0n), "0s");
  assert.equal(formatDuration(1_000_001_000n), "1.000001s");
  assert.equal(formatDuration(1_000_000_001n), "1.000000001s");
});

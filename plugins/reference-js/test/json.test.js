import assert from "node:assert/strict";
import { test } from "node:test";

import { JsonError, parseJson } from "../src/json.js";

const int = (v) => ({ t: "int", v });
const float = (v) => ({ t: "float", v });
const str = (v) => ({ t: "str", v });

test("numbers keep their kind, as serde_json reads them", () => {
  assert.deepEqual(parseJson("[1, -2, 1.0, 1e3, -0, 18446744073709551615, 18446744073709551616, -9223372036854775809]"), {
    t: "seq",
    v: [int(1n), int(-2n), float(1), float(1000), float(-0), int(18446744073709551615n), float(18446744073709551616), float(-9223372036854775809)],
  });
  assert.deepEqual(parseJson('{"a": 9007199254740993}').v[0][1], int(9007199254740993n));
});

test("keys stay in the order written, integer-like ones too", () => {
  assert.deepEqual(parseJson('{"b": 1, "10": 2, "a": "1.5s", "2": null}').v.map(([k]) => k), ["b", "10", "a", "2"]);
  assert.deepEqual(parseJson('{"\\u0031": true, "a": false}').v.map(([k]) => k), ["1", "a"]);
});

test("strings that look like numbers do not leave the fast path wrong", () => {
  assert.deepEqual(parseJson('{"d": "1.5e3", "n": 2, "s": "\\"3\\": 4"}'), {
    t: "map",
    v: [["d", str("1.5e3")], ["n", int(2n)], ["s", str('"3": 4')]],
  });
});

test("malformed JSON says where", () => {
  for (const bad of ["", "{", '{"a" 1}', "[1,]", "01", '"\\x"', "nul", "[1] 2"]) {
    assert.throws(() => parseJson(bad), JsonError, bad);
  }
});

import assert from "node:assert/strict";
import { test } from "node:test";

import * as check from "../src/check.js";
import { parseIp } from "../src/ip.js";

test("domains", () => {
  for (const ok of ["*", "example.com", "*.example.com", "example.*", "a.b:8080"]) {
    assert.equal(check.domain(ok), undefined, ok);
  }
  for (const bad of ["", "a.*.com", "*.*", "a b", "a/b", "a\u0085b"]) {
    assert.notEqual(check.domain(bad), undefined, bad);
  }
});

test("header names", () => {
  assert.equal(check.headerName(":method", false), undefined);
  assert.notEqual(check.headerName(":method", true), undefined);
  assert.notEqual(check.headerName("Host", true), undefined);
  assert.equal(check.headerName("x-env", true), undefined);
  assert.notEqual(check.headerName("bad header", false), undefined);
  assert.notEqual(check.headerName("", false), undefined);
  assert.notEqual(check.headerName(":", false), undefined);
});

test("IP addresses as Rust reads them", () => {
  for (const ok of ["10.0.0.1", "0.0.0.0", "255.255.255.255", "::", "::1", "1::", "fe80::1", "1:2:3:4:5:6:7:8",
    "1:2:3:4:5:6:7::", "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "::1.2.3.4", "ABCD::ef"]) {
    assert.notEqual(parseIp(ok), null, ok);
  }
  for (const bad of ["", "web", "10.0.0.01", "256.0.0.1", "1.2.3", "1.2.3.4.5", "1.2.3.4:80", "[::1]", "fe80::1%eth0",
    "1::2::3", "1:2:3:4:5:6:7:8:9", "1.2.3.4::", "12345::", ":1", "1:2:3:4:5:6:7:1.2.3.4", " 1.2.3.4"]) {
    assert.equal(parseIp(bad), null, bad);
  }
  assert.equal(parseIp("::1"), parseIp("0:0:0:0:0:0:0:1"));
  assert.notEqual(parseIp("::ffff:1.2.3.4"), parseIp("1.2.3.4"));
});

test("RE2 syntax as regex-syntax parses it", () => {
  for (const ok of ["^/v[0-9]+/.*", "(?P<id>[a-z]+)", "(?<id>x)", "(?i)abc", "(?i:a)b", "a{2}", "a{2,}", "a{2,5}?", "a{ 2 , 5 }",
    "\\pL\\p{Greek}\\PN", "[[:alpha:]]", "[a-z&&[^aeiou]]", "[]a]", "[^]a]", "[-a]", "\\b{start}x", "\\x{10FFFF}", "\\x41",
    "(?x) a b # comment\n c", "a|b|(c|d)", "[\\d-]", "\\<\\>", "\\%"]) {
    assert.equal(check.regex(ok), undefined, ok);
  }
  for (const [bad, why] of [
    ["a(b", "unclosed group"],
    ["a)b", "unopened group"],
    ["[z-a]", "invalid character class range"],
    ["*a", "repetition operator missing expression"],
    ["(?)", "repetition operator missing expression"],
    ["(?i)*", "repetition operator missing expression"],
    ["a{2,1}", "invalid repetition count range"],
    ["a{", "unclosed counted repetition"],
    ["a{x}", "repetition quantifier expects a valid decimal"],
    ["a{,5}", "repetition quantifier expects a valid decimal"],
    ["(?=a)", "look-around"],
    ["\\1", "backreferences are not supported"],
    ["\\e", "unrecognized escape sequence"],
    ["\\", "incomplete escape sequence"],
    ["[a", "unclosed character class"],
    ["[a-\\d]", "invalid range boundary"],
    ["[\\d-z]", "invalid range boundary"],
    ["[\\A]", "invalid escape sequence found in character class"],
    ["(?P<n>a)(?P<n>b)", "duplicate capture group name"],
    ["(?P<>a)", "empty capture group name"],
    ["(?P<1>a)", "invalid capture group character"],
    ["(?z)", "unrecognized flag"],
    ["(?ii)", "duplicate flag"],
    ["(?i-)", "dangling flag negation operator"],
    ["\\x{110000}", "not a Unicode scalar value"],
    ["\\xZZ", "invalid hexadecimal digit"],
    ["\\b{bogus}", "unrecognized special word boundary"],
    ["(".repeat(300) + ")".repeat(300), "nested parentheses"],
  ]) {
    const problem = check.regex(bad);
    assert.ok(problem?.includes(why), `${bad}: ${problem}`);
  }
  assert.equal(check.regex(""), "must not be empty");
});

test("retry conditions", () => {
  assert.deepEqual(check.retryOn(" 5xx, reset ", check.HTTP_RETRY_ON), { on: "5xx,reset" });
  assert.ok(check.retryOn("5xx,", check.HTTP_RETRY_ON).problem.startsWith('unknown retry condition ""'));
});

test("names", () => {
  assert.equal(check.name("api-v1.x_y"), undefined);
  assert.equal(check.name(""), "must not be empty");
  assert.equal(check.name("a b"), `"a b" may contain only letters, digits, '-', '.' and '_'`);
  assert.equal(check.name("x".repeat(254)), `"${"x".repeat(254)}" is longer than 253 characters`);
});

package main

// Value checks the schema cannot express. Each returns what is wrong, or "" when the value is
// fine; the caller names the document and field (doc.expect).

import (
	"net/netip"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
)

// httpRetryOn is what Envoy's `retry_on` accepts for HTTP routes (gRPC conditions included).
var httpRetryOn = []string{
	"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "envoy-ratelimited",
	"retriable-4xx", "refused-stream", "retriable-status-codes", "retriable-headers",
	"http3-post-connect-failure", "cancelled", "deadline-exceeded", "internal", "resource-exhausted",
	"unavailable",
}

var nameChars = regexp.MustCompile(`^[A-Za-z0-9._-]*$`)

// checkName: a reference to another document's name (a Service).
func checkName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > 253:
		return debug(s) + " is longer than 253 characters"
	case !nameChars.MatchString(s):
		return debug(s) + " may contain only letters, digits, '-', '.' and '_'"
	}
	return ""
}

// parseIP reads an IP literal as Rust's IpAddr::from_str does (no zone, no brackets).
func parseIP(s string) (netip.Addr, bool) {
	if strings.Contains(s, "%") {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	return a, err == nil
}

// checkIP: listener and EDS endpoint addresses are IP literals: Envoy does not resolve them.
func checkIP(address string) string {
	if _, ok := parseIP(address); !ok {
		return debug(address) + " is not an IP address (Envoy does not resolve names here)"
	}
	return ""
}

func checkWeight(w uint64) string {
	if w == 0 {
		return "must be at least 1 (remove the entry to send it nothing)"
	}
	return ""
}

func checkAtLeastOne(n uint64) string {
	if n == 0 {
		return "must be at least 1"
	}
	return ""
}

func checkPositive(nanos any) string {
	if d, ok := nanos.(interface{ Sign() int }); ok && d.Sign() == 0 {
		return "must be longer than 0s"
	}
	return ""
}

// checkDomain: `example.com`, `example.com:8080`, `*`, or one wildcard at either end.
func checkDomain(d string) string {
	if d == "" {
		return "must not be empty"
	}
	for _, c := range d {
		if unicode.IsSpace(c) || unicode.IsControl(c) || c == '/' {
			return debug(d) + " is not a hostname"
		}
	}
	stars := strings.Count(d, "*")
	if stars > 1 || (stars == 1 && !strings.HasPrefix(d, "*") && !strings.HasSuffix(d, "*")) {
		return debug(d) + ": a wildcard must be the first or last character, once (*.example.com)"
	}
	return ""
}

var tokenChars = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+\\-.^_`|~]+$")

// checkHeaderName: in a matcher pseudo-headers such as `:method` are allowed; in a mutation
// Envoy refuses pseudo-headers and `host`.
func checkHeaderName(n string, mutation bool) string {
	token := strings.TrimPrefix(n, ":")
	if !tokenChars.MatchString(token) {
		return debug(n) + " is not a valid header name"
	}
	if mutation && (strings.HasPrefix(n, ":") || strings.ToLower(n) == "host") {
		return debug(n) + " cannot be changed here (pseudo-headers and host are off limits)"
	}
	return ""
}

func checkHeaderValue(v string) string {
	if strings.ContainsAny(v, "\r\n\x00") {
		return "must not contain CR, LF or NUL"
	}
	return ""
}

func checkPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return ""
	}
	return debug(p) + " must start with '/'"
}

// checkRegex: RE2 syntax (Go's regexp is RE2).
func checkRegex(re string) string {
	if re == "" {
		return "must not be empty"
	}
	if _, err := syntax.Parse(re, syntax.Perl); err != nil {
		return "invalid regex " + debug(re) + ": " + err.Error()
	}
	return ""
}

// retryOn normalises a comma-separated list (items trimmed) and checks each condition.
func retryOn(on string, allowed []string) (string, string) {
	conditions := strings.Split(on, ",")
	for i, c := range conditions {
		conditions[i] = strings.TrimFunc(c, unicode.IsSpace)
	}
	for _, c := range conditions {
		known := false
		for _, a := range allowed {
			known = known || a == c
		}
		if !known {
			return "", "unknown retry condition " + debug(c) + " (one of: " + strings.Join(allowed, ", ") + ")"
		}
	}
	return strings.Join(conditions, ","), ""
}

package main

// Durations as people write them (`250ms`, `1s`, `1.5s`, `1m30s`, `2h`), held as nanoseconds
// (math/big: the largest protobuf Duration does not fit 64 bits of nanoseconds), and written
// as protobuf JSON Durations (`"0.250s"`).

import (
	"errors"
	"math/big"
	"strings"
)

var (
	maxSeconds   = big.NewInt(315_576_000_000)
	billion      = big.NewInt(1_000_000_000)
	u128Max      = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))
	nanosPerUnit = map[string]int64{"h": 3_600_000_000_000, "m": 60_000_000_000, "s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "µs": 1_000, "ns": 1}
)

func isNumberChar(c byte) bool { return (c >= '0' && c <= '9') || c == '.' }

// parseDuration reads one or more `<number><unit>` terms into nanoseconds.
func parseDuration(s string) (*big.Int, error) {
	bad := func(why string) (*big.Int, error) {
		return nil, errors.New("invalid duration " + debug(s) + ": " + why + "; write for example 250ms, 1s or 1m30s")
	}
	if s == "" {
		return bad("empty")
	}
	if strings.HasPrefix(s, "-") {
		return bad("must not be negative")
	}
	total := new(big.Int)
	rest := s
	for rest != "" {
		digits := 0
		for digits < len(rest) && isNumberChar(rest[digits]) {
			digits++
		}
		if digits == 0 {
			return bad("expected a number")
		}
		number, after := rest[:digits], rest[digits:]
		unitLength := 0
		for unitLength < len(after) && !isNumberChar(after[unitLength]) {
			unitLength++
		}
		unit := after[:unitLength]
		after = after[unitLength:]
		if unit == "" {
			return bad("missing unit (h, m, s, ms, us or ns)")
		}
		per, ok := nanosPerUnit[unit]
		if !ok {
			return bad("unknown unit (use h, m, s, ms, us or ns)")
		}
		whole, fraction, hasDot := strings.Cut(number, ".")
		if (whole == "" && fraction == "") || strings.Contains(fraction, ".") {
			return bad("malformed number")
		}
		_ = hasDot
		perUnit := big.NewInt(per)
		term := new(big.Int)
		if whole != "" {
			term.SetString(whole, 10)
		}
		term.Mul(term, perUnit)
		// Digits of the fraction past nanosecond precision are dropped.
		scale := new(big.Int).Set(perUnit)
		for _, d := range fraction {
			scale.Quo(scale, big.NewInt(10))
			term.Add(term, new(big.Int).Mul(big.NewInt(int64(d-'0')), scale))
		}
		total.Add(total, term)
		if term.Cmp(u128Max) > 0 || new(big.Int).Quo(total, billion).Cmp(maxSeconds) > 0 {
			return bad("too large")
		}
		rest = after
	}
	return total, nil
}

// formatDuration: `"5s"`, `"0.250s"`, `"1.000000001s"`.
func formatDuration(nanos *big.Int) string {
	seconds, rest := new(big.Int).QuoRem(nanos, billion, new(big.Int))
	if rest.Sign() == 0 {
		return seconds.String() + "s"
	}
	fraction := rest.String()
	fraction = strings.Repeat("0", 9-len(fraction)) + fraction
	for strings.HasSuffix(fraction, "000") {
		fraction = fraction[:len(fraction)-3]
	}
	return seconds.String() + "." + fraction + "s"
}

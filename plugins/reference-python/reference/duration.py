"""Durations as people write them: `250ms`, `1s`, `1.5s`, `1m30s`, `2h` (mirrors duration.rs).

A duration is kept as an int of nanoseconds.
"""

from __future__ import annotations

from .text import debug

# The largest duration protobuf can carry (10,000 years).
MAX_SECONDS = 315_576_000_000
_U128_MAX = (1 << 128) - 1

_NANOS_PER_UNIT = {
    "h": 3_600_000_000_000,
    "m": 60_000_000_000,
    "s": 1_000_000_000,
    "ms": 1_000_000,
    "us": 1_000,
    "µs": 1_000,
    "ns": 1,
}


class DurationError(ValueError):
    pass


def _is_number_char(c: str) -> bool:
    return c in "0123456789."


def parse(s: str) -> int:
    """Parses one or more `<number><unit>` terms into nanoseconds; raises DurationError."""

    def bad(why: str) -> DurationError:
        return DurationError(
            f"invalid duration {debug(s)}: {why}; write for example 250ms, 1s or 1m30s"
        )

    if not s:
        raise bad("empty")
    if s.startswith("-"):
        raise bad("must not be negative")
    total = 0
    rest = s
    while rest:
        digits = next((i for i, c in enumerate(rest) if not _is_number_char(c)), len(rest))
        if digits == 0:
            raise bad("expected a number")
        number, after = rest[:digits], rest[digits:]
        unit_len = next((i for i, c in enumerate(after) if _is_number_char(c)), len(after))
        unit, rest = after[:unit_len], after[unit_len:]
        if unit == "":
            raise bad("missing unit (h, m, s, ms, us or ns)")
        per_unit = _NANOS_PER_UNIT.get(unit)
        if per_unit is None:
            raise bad("unknown unit (use h, m, s, ms, us or ns)")
        whole, _, fraction = number.partition(".")
        if (not whole and not fraction) or "." in fraction:
            raise bad("malformed number")
        whole_value = int(whole) if whole else 0
        if whole_value > _U128_MAX:
            raise bad("too large")
        term = whole_value * per_unit
        # Digits of the fraction past nanosecond precision are dropped.
        scale = per_unit
        for d in fraction:
            scale //= 10
            term += int(d) * scale
        total += term
        if term > _U128_MAX or total // 1_000_000_000 > MAX_SECONDS:
            raise bad("too large")
    return total


def to_proto_json(nanos: int) -> str:
    """A protobuf Duration in canonical proto3 JSON ("0.250s", "90s"), clamped to its maximum."""
    seconds, frac = divmod(nanos, 1_000_000_000)
    if seconds > MAX_SECONDS:
        seconds, frac = MAX_SECONDS, 0
    if frac == 0:
        return f"{seconds}s"
    digits = f"{frac:09d}"
    while digits.endswith("000"):
        digits = digits[:-3]
    return f"{seconds}.{digits}s"

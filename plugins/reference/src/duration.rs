//! Durations as people write them: `250ms`, `1s`, `1.5s`, `1m30s`, `2h`.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// The largest duration protobuf can carry.
const MAX_SECONDS: u64 = 315_576_000_000;

/// A duration in the intent: one or more `<number><unit>` terms, units `h`, `m`, `s`, `ms`,
/// `us`, `ns`; the number may have a fraction (`1.5s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

/// Parses a duration string; the error says what is wrong with it.
pub fn parse(s: &str) -> Result<Duration, String> {
    let bad = |why: &str| Err(format!("invalid duration {s:?}: {why}; write for example 250ms, 1s or 1m30s"));
    if s.is_empty() {
        return bad("empty");
    }
    if s.starts_with('-') {
        return bad("must not be negative");
    }
    let mut total: u128 = 0; // nanoseconds
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if digits == 0 {
            return bad("expected a number");
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "h" => 3_600_000_000_000,
            "m" => 60_000_000_000,
            "s" => 1_000_000_000,
            "ms" => 1_000_000,
            "us" | "µs" => 1_000,
            "ns" => 1,
            "" => return bad("missing unit (h, m, s, ms, us or ns)"),
            _ => return bad("unknown unit (use h, m, s, ms, us or ns)"),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return bad("malformed number");
        }
        let Ok(whole) = (if whole.is_empty() { Ok(0) } else { whole.parse::<u128>() }) else {
            return bad("too large");
        };
        let mut term = whole.checked_mul(nanos_per_unit);
        // Digits of the fraction past nanosecond precision are dropped.
        let mut scale = nanos_per_unit;
        for d in fraction.bytes() {
            scale /= 10;
            term = term.map(|t| t + u128::from(d - b'0') * scale);
        }
        total = match term.and_then(|t| total.checked_add(t)) {
            Some(t) if t / 1_000_000_000 <= u128::from(MAX_SECONDS) => t,
            _ => return bad("too large"),
        };
        rest = after;
    }
    Ok(Duration::new((total / 1_000_000_000) as u64, (total % 1_000_000_000) as u32))
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string such as 250ms, 1s or 1m30s")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Dur, E> {
                parse(s).map(Dur).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid() {
        let ms = Duration::from_millis;
        for (s, d) in [
            ("250ms", ms(250)),
            ("1s", ms(1000)),
            ("1.5s", ms(1500)),
            (".5s", ms(500)),
            ("1m", ms(60_000)),
            ("1m30s", ms(90_000)),
            ("2h", ms(7_200_000)),
            ("0s", ms(0)),
            ("10us", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            ("0.0000000019s", Duration::from_nanos(1)),
        ] {
            assert_eq!(parse(s), Ok(d), "{s}");
        }
    }

    #[test]
    fn invalid() {
        for (s, why) in [
            ("", "empty"),
            ("5", "missing unit"),
            ("5 s", "unknown unit"),
            ("5x", "unknown unit"),
            ("-1s", "negative"),
            ("s", "expected a number"),
            ("1..2s", "malformed"),
            (".s", "malformed"),
            ("99999999999999999999999999999999999999999h", "too large"),
            ("100000000h", "too large"),
        ] {
            let e = parse(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }
}

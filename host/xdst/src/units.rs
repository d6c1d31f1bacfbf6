//! Durations (`10ms`, `2s`, `1m`) and sizes (`8MiB`) as flags and configuration values take them.

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use xdst_core::node::GroupKey;

/// A duration in a configuration file (see [`parse_duration`]).
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

/// A node group key in a configuration file (`cluster`, `id`, `metadata:KEY`).
pub fn group_key<'de, D: Deserializer<'de>>(d: D) -> Result<GroupKey, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

/// A configuration value written as a number or a string, as text; `what` names what it must
/// be when it is neither.
fn number_or_text<'de, D: Deserializer<'de>>(d: D, what: &str) -> Result<String, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => Ok(n.to_string()),
        serde_json::Value::String(s) => Ok(s),
        _ => Err(serde::de::Error::custom(what)),
    }
}

/// `--nack-quorum` in a configuration file (`all`, a number, or a share `50%`).
pub fn quorum<'de, D: Deserializer<'de>>(d: D) -> Result<xdst_core::node_holds::Quorum, D::Error> {
    let s = number_or_text(d, "a quorum: `all`, a number of nodes or a share (50%)")?;
    parse_quorum(&s).map_err(serde::de::Error::custom)
}

/// `all`, `2`, `50%` (see [`xdst_core::node_holds::Quorum`]).
pub fn parse_quorum(s: &str) -> Result<xdst_core::node_holds::Quorum, String> {
    s.parse()
}

/// A size: bytes, or a number with KiB, MiB or GiB.
pub fn size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let s = number_or_text(d, "a size: bytes, or a number with KiB, MiB or GiB")?;
    parse_size(&s).map_err(serde::de::Error::custom)
}

/// A size that may be 0 (no limit) in a configuration file (see [`parse_size_or_off`]).
pub fn size_or_off<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let s = number_or_text(d, "a size: bytes, or a number with KiB, MiB or GiB; 0 for no limit")?;
    parse_size_or_off(&s).map_err(serde::de::Error::custom)
}

/// [`parse_size`], or `0`: a limit turned off.
pub fn parse_size_or_off(s: &str) -> Result<usize, String> {
    if s.trim() == "0" { Ok(0) } else { parse_size(s) }
}

/// `1048576`, `512KiB`, `8MiB`, `1GiB` -> bytes. The error is the text clap or the
/// configuration file's error shows, after the flag or the field it names.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: usize = digits.parse().map_err(|_| format!("{s:?} is not a size (e.g. 8MiB, 512KiB, 1048576)"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        other => return Err(format!("{s:?}: unknown unit {other:?} (B, KiB, MiB or GiB)")),
    };
    n.checked_mul(1 << shift).filter(|&b| b > 0).ok_or_else(|| format!("{s:?} is not a usable size"))
}

/// `10ms`, `2s`, `1m`, or a number of seconds. The error is the text clap or the
/// configuration file's error shows, after the flag or the field it names.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map(|i| s.split_at(i)).unwrap_or((s, "s"));
    let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}: expected e.g. 10ms, 2s, 1m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("invalid duration unit in {s:?}: use ms, s or m")),
    };
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_a_limit_turned_off() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert!(parse_size("0").is_err(), "a size of nothing bounds nothing usable");
        assert_eq!(parse_size_or_off("0"), Ok(0));
        assert_eq!(parse_size_or_off("1GiB"), Ok(1 << 30));
        assert!(parse_size_or_off("0MiB").is_err() && parse_size_or_off("x").is_err());
    }
}

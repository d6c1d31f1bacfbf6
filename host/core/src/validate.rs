//! The checks Envoy makes on a resource when it receives one: the protoc-gen-validate rules
//! annotated in Envoy's own protos (`(validate.rules)` on fields, `(validate.required)` on
//! oneofs, `(validate.disabled)` on messages). Envoy refuses (NACKs) a resource that breaks
//! one; xdst is to refuse it before it is served, naming the field. Not yet called on every
//! decoded resource: at 18-22 µs a resource it would double a full translation
//! (`docs/design/016-one-teams-mistake.md`, "Where it stands").
//!
//! Implemented, with protoc-gen-validate's meaning: string lengths (characters and bytes),
//! `pattern`, `prefix`, `suffix`, `contains`, `not_contains`, `in`, `not_in`, the header
//! name and value rules (`well_known_regex`, strict or not); numeric `const`, `lt`, `lte`,
//! `gt`, `gte` (an exclusive range when `lt` < `gt`), `in`, `not_in`; enums `defined_only`,
//! `in`, `not_in`; required messages, `Any`s and oneofs; repeated `min_items`, `max_items`
//! and rules on each item; map `min_pairs`, `max_pairs`; duration bounds. `ignore_empty`
//! holds everywhere. A rule not listed here is not checked (so it is never a false refusal):
//! Envoy still checks it.
//!
//! Messages inside `Any` are checked with their own rules, as Envoy does when it builds the
//! extension. The walk is bounded by the depth [`crate::canonical::encode`] already allowed.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use prost_reflect::{DynamicMessage, ExtensionDescriptor, FieldDescriptor, Kind, ReflectMessage, Value};

/// The first rule `msg` breaks: the field's path (`virtual_hosts[0].routes[1].match.prefix`)
/// and what is wrong.
pub fn check(msg: &DynamicMessage) -> Result<(), (String, String)> {
    let Some(ext) = Extensions::get() else { return Ok(()) };
    let mut path = String::new();
    check_message(ext, msg, &mut path, 0)
}

/// Deeper than this the walk stops (the canonical encoder refuses deeper messages first).
const MAX_DEPTH: usize = 200;

struct Extensions {
    rules: ExtensionDescriptor,
    required: ExtensionDescriptor,
    disabled: ExtensionDescriptor,
    ignored: ExtensionDescriptor,
}

impl Extensions {
    fn get() -> Option<&'static Extensions> {
        static EXT: OnceLock<Option<Extensions>> = OnceLock::new();
        EXT.get_or_init(|| {
            let pool = crate::descriptors::pool();
            Some(Extensions {
                rules: pool.get_extension_by_name("validate.rules")?,
                required: pool.get_extension_by_name("validate.required")?,
                disabled: pool.get_extension_by_name("validate.disabled")?,
                ignored: pool.get_extension_by_name("validate.ignored")?,
            })
        })
        .as_ref()
    }
}

/// A message type's rules, read from its descriptor's options once.
struct MessageRules {
    /// `(validate.disabled)` or `(validate.ignored)`.
    skip: bool,
    /// The oneofs with `(validate.required)`, by name.
    required_oneofs: Vec<String>,
    /// Each field's `(validate.rules)`, in `desc.fields()` order.
    fields: Vec<Option<DynamicMessage>>,
}

fn rules_of(ext: &Extensions, desc: &prost_reflect::MessageDescriptor) -> std::sync::Arc<MessageRules> {
    static CACHE: OnceLock<Mutex<HashMap<String, std::sync::Arc<MessageRules>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(r) = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(desc.full_name()) {
        return r.clone();
    }
    let options = desc.options();
    let rules = std::sync::Arc::new(MessageRules {
        skip: flag(&options, &ext.disabled) || flag(&options, &ext.ignored),
        required_oneofs: desc
            .oneofs()
            .filter(|o| flag(&o.options(), &ext.required))
            .map(|o| o.name().to_owned())
            .collect(),
        fields: desc
            .fields()
            .map(|f| {
                let options = f.options();
                options
                    .has_extension(&ext.rules)
                    .then(|| options.get_extension(&ext.rules).as_message().cloned())
                    .flatten()
            })
            .collect(),
    });
    cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(desc.full_name().to_owned(), rules.clone());
    rules
}

fn flag(options: &DynamicMessage, ext: &ExtensionDescriptor) -> bool {
    options.has_extension(ext) && options.get_extension(ext).as_bool() == Some(true)
}

fn push(path: &mut String, name: &str) -> usize {
    let len = path.len();
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(name);
    len
}

fn check_message(
    ext: &Extensions,
    msg: &DynamicMessage,
    path: &mut String,
    depth: usize,
) -> Result<(), (String, String)> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let desc = msg.descriptor();
    if desc.full_name() == "google.protobuf.Any" {
        return check_any(ext, msg, path, depth);
    }
    let rules = rules_of(ext, &desc);
    if rules.skip {
        return Ok(());
    }
    for oneof in desc.oneofs().filter(|o| rules.required_oneofs.iter().any(|n| n == o.name())) {
        if !oneof.fields().any(|f| msg.has_field(&f)) {
            let names: Vec<String> = oneof.fields().map(|f| f.name().to_owned()).collect();
            let at = if path.is_empty() { oneof.name().to_owned() } else { format!("{path}.{}", oneof.name()) };
            return Err((at, format!("one of {} is required", names.join(", "))));
        }
    }
    for (field, field_rules) in desc.fields().zip(&rules.fields) {
        let len = push(path, field.name());
        let result = check_field(ext, msg, &field, field_rules.as_ref(), path, depth);
        path.truncate(len);
        result?;
    }
    Ok(())
}

fn check_any(ext: &Extensions, msg: &DynamicMessage, path: &mut String, depth: usize) -> Result<(), (String, String)> {
    let type_url = msg.get_field_by_name("type_url").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let value = msg.get_field_by_name("value").and_then(|v| v.as_bytes().cloned()).unwrap_or_default();
    let Some(desc) = crate::descriptors::message_for_type_url(&type_url) else { return Ok(()) };
    match DynamicMessage::decode(desc, value) {
        Ok(inner) => check_message(ext, &inner, path, depth + 1),
        Err(_) => Ok(()),
    }
}

fn check_field(
    ext: &Extensions,
    msg: &DynamicMessage,
    field: &FieldDescriptor,
    rules: Option<&DynamicMessage>,
    path: &mut String,
    depth: usize,
) -> Result<(), (String, String)> {
    let set = msg.has_field(field);
    // A member of a oneof is checked only when it is the one set.
    if field.containing_oneof().is_some() && !set {
        return Ok(());
    }
    let holds_messages = matches!(field.kind(), Kind::Message(_));
    // Nothing to check: a field without rules that holds no messages, or one that holds
    // messages but is unset.
    if rules.is_none() && (!holds_messages || !set) {
        return Ok(());
    }
    if let Some(rules) = rules {
        if let Some(m) = sub(rules, "message") {
            if bool_of(m, "skip") {
                return Ok(());
            }
            if bool_of(m, "required") && !set {
                return Err((path.clone(), "value is required".into()));
            }
        }
        for required in ["any", "duration", "timestamp"] {
            if let Some(r) = sub(rules, required)
                && bool_of(r, "required")
                && !set
            {
                return Err((path.clone(), "value is required".into()));
            }
        }
    }
    let value = msg.get_field(field);
    if field.is_list() {
        let items = value.as_list().unwrap_or_default();
        if let Some(r) = rules.and_then(|r| sub(r, "repeated")) {
            if !(items.is_empty() && bool_of(r, "ignore_empty")) {
                if let Some(min) = uint_of(r, "min_items")
                    && (items.len() as u64) < min
                {
                    return Err((path.clone(), format!("value must contain at least {min} item(s)")));
                }
                if let Some(max) = uint_of(r, "max_items")
                    && items.len() as u64 > max
                {
                    return Err((path.clone(), format!("value must contain no more than {max} item(s)")));
                }
            }
            let item_rules = sub(r, "items");
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                let _ = write!(path, "[{i}]");
                let result = check_value(ext, field, item, item_rules, path, depth);
                path.truncate(len);
                result?;
            }
            return Ok(());
        }
        for (i, item) in items.iter().enumerate() {
            let len = path.len();
            let _ = write!(path, "[{i}]");
            let result = check_value(ext, field, item, None, path, depth);
            path.truncate(len);
            result?;
        }
        return Ok(());
    }
    if field.is_map() {
        let pairs = value.as_map().map(|m| m.len()).unwrap_or(0) as u64;
        if let Some(r) = rules.and_then(|r| sub(r, "map"))
            && !(pairs == 0 && bool_of(r, "ignore_empty"))
        {
            if let Some(min) = uint_of(r, "min_pairs")
                && pairs < min
            {
                return Err((path.clone(), format!("value must contain at least {min} pair(s)")));
            }
            if let Some(max) = uint_of(r, "max_pairs")
                && pairs > max
            {
                return Err((path.clone(), format!("value must contain no more than {max} pair(s)")));
            }
        }
        if let (Some(map), Kind::Message(entry)) = (value.as_map(), field.kind()) {
            let value_field = entry.map_entry_value_field();
            if matches!(value_field.kind(), Kind::Message(_)) {
                for (key, v) in map {
                    let len = path.len();
                    path.push_str(&format!("[{key:?}]"));
                    let result = match v.as_message() {
                        Some(m) => check_message(ext, m, path, depth + 1),
                        None => Ok(()),
                    };
                    path.truncate(len);
                    result?;
                }
            }
        }
        return Ok(());
    }
    // A singular field: a message is checked only when set; a scalar always (proto3's unset is
    // its default value, which the rules apply to, as protoc-gen-validate's code does).
    if holds_messages && !set {
        return Ok(());
    }
    check_value(ext, field, &value, rules, path, depth)
}

/// One value (a singular field's, or a repeated field's item) against `rules`.
fn check_value(
    ext: &Extensions,
    field: &FieldDescriptor,
    value: &Value,
    rules: Option<&DynamicMessage>,
    path: &mut String,
    depth: usize,
) -> Result<(), (String, String)> {
    let fail = |why: String| Err((path.clone(), why));
    match value {
        Value::String(s) => {
            if let Some(r) = rules.and_then(|r| sub(r, "string"))
                && let Some(why) = string_problem(s, r)
            {
                return fail(why);
            }
        }
        Value::I32(_) | Value::I64(_) | Value::U32(_) | Value::U64(_) => {
            let kind = match field.kind() {
                Kind::Int32 => "int32",
                Kind::Int64 => "int64",
                Kind::Uint32 => "uint32",
                Kind::Uint64 => "uint64",
                Kind::Sint32 => "sint32",
                Kind::Sint64 => "sint64",
                Kind::Fixed32 => "fixed32",
                Kind::Fixed64 => "fixed64",
                Kind::Sfixed32 => "sfixed32",
                Kind::Sfixed64 => "sfixed64",
                _ => return Ok(()),
            };
            let n = int_of(value).unwrap_or(0);
            return int_rule(rules, kind, n).map_or(Ok(()), fail);
        }
        Value::F64(x) => return float_rule(rules, "double", *x).map_or(Ok(()), fail),
        Value::F32(x) => return float_rule(rules, "float", f64::from(*x)).map_or(Ok(()), fail),
        Value::EnumNumber(n) => {
            if let Some(r) = rules.and_then(|r| sub(r, "enum")) {
                if bool_of(r, "defined_only")
                    && let Kind::Enum(e) = field.kind()
                    && e.get_value(*n).is_none()
                {
                    return fail(format!("value must be one of the defined enum values, not {n}"));
                }
                if let Some(why) = in_lists(r, &Value::I32(*n)) {
                    return fail(why);
                }
            }
        }
        Value::Message(m) => {
            let name = m.descriptor().full_name().to_owned();
            if name == "google.protobuf.Duration"
                && let Some(r) = rules.and_then(|r| sub(r, "duration"))
                && let Some(why) = duration_problem(m, r)
            {
                return fail(why);
            }
            if let Some(r) = rules.and_then(|r| sub(r, "message"))
                && bool_of(r, "skip")
            {
                return Ok(());
            }
            return check_message(ext, m, path, depth + 1);
        }
        _ => {}
    }
    Ok(())
}

fn sub<'a>(m: &'a DynamicMessage, name: &str) -> Option<&'a DynamicMessage> {
    if !m.has_field_by_name(name) {
        return None;
    }
    match m.get_field_by_name(name)? {
        std::borrow::Cow::Borrowed(Value::Message(sub)) => Some(sub),
        _ => None,
    }
}

fn bool_of(m: &DynamicMessage, name: &str) -> bool {
    m.has_field_by_name(name) && m.get_field_by_name(name).and_then(|v| v.as_bool()) == Some(true)
}

fn uint_of(m: &DynamicMessage, name: &str) -> Option<u64> {
    if !m.has_field_by_name(name) {
        return None;
    }
    match m.get_field_by_name(name)?.as_ref() {
        Value::U64(n) => Some(*n),
        Value::U32(n) => Some(u64::from(*n)),
        Value::I64(n) => u64::try_from(*n).ok(),
        Value::I32(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

fn int_of(v: &Value) -> Option<i128> {
    match v {
        Value::U64(n) => Some(*n as i128),
        Value::U32(n) => Some(*n as i128),
        Value::I64(n) => Some(*n as i128),
        Value::I32(n) => Some(*n as i128),
        _ => None,
    }
}

fn opt_int(m: &DynamicMessage, name: &str) -> Option<i128> {
    if !m.has_field_by_name(name) {
        return None;
    }
    int_of(m.get_field_by_name(name)?.as_ref())
}

fn opt_float(m: &DynamicMessage, name: &str) -> Option<f64> {
    if !m.has_field_by_name(name) {
        return None;
    }
    match m.get_field_by_name(name)?.as_ref() {
        Value::F64(x) => Some(*x),
        Value::F32(x) => Some(f64::from(*x)),
        _ => None,
    }
}

/// `const`, `lt`, `lte`, `gt`, `gte` over ordered values, as protoc-gen-validate means them: with
/// both a lower and an upper bound and the upper below the lower, the value must lie outside.
fn range_problem<T: PartialOrd + std::fmt::Display + Copy>(
    value: T,
    constant: Option<T>,
    lt: Option<T>,
    lte: Option<T>,
    gt: Option<T>,
    gte: Option<T>,
) -> Option<String> {
    if let Some(c) = constant
        && value != c
    {
        return Some(format!("value must equal {c}"));
    }
    let upper = lt.map(|u| (u, false)).or(lte.map(|u| (u, true)));
    let lower = gt.map(|l| (l, false)).or(gte.map(|l| (l, true)));
    let below = |(u, inclusive): (T, bool)| if inclusive { value <= u } else { value < u };
    let above = |(l, inclusive): (T, bool)| if inclusive { value >= l } else { value > l };
    let show_upper = |(u, inclusive): (T, bool)| format!("{} {u}", if inclusive { "<=" } else { "<" });
    let show_lower = |(l, inclusive): (T, bool)| format!("{} {l}", if inclusive { ">=" } else { ">" });
    match (lower, upper) {
        (Some(l), Some(u)) if u.0 < l.0 => {
            (!(below(u) || above(l))).then(|| format!("value must be {} or {}", show_upper(u), show_lower(l)))
        }
        (Some(l), Some(u)) => {
            (!(below(u) && above(l))).then(|| format!("value must be {} and {}", show_lower(l), show_upper(u)))
        }
        (Some(l), None) => (!above(l)).then(|| format!("value must be {}", show_lower(l))),
        (None, Some(u)) => (!below(u)).then(|| format!("value must be {}", show_upper(u))),
        (None, None) => None,
    }
}

fn int_rule(rules: Option<&DynamicMessage>, kind: &str, value: i128) -> Option<String> {
    let r = sub(rules?, kind)?;
    if value == 0 && bool_of(r, "ignore_empty") {
        return None;
    }
    let (c, lt, lte, gt, gte) =
        (opt_int(r, "const"), opt_int(r, "lt"), opt_int(r, "lte"), opt_int(r, "gt"), opt_int(r, "gte"));
    range_problem(value, c, lt, lte, gt, gte).or_else(|| in_lists(r, &Value::I64(value as i64)))
}

fn float_rule(rules: Option<&DynamicMessage>, kind: &str, value: f64) -> Option<String> {
    let r = sub(rules?, kind)?;
    if value == 0.0 && bool_of(r, "ignore_empty") {
        return None;
    }
    let (c, lt, lte, gt, gte) =
        (opt_float(r, "const"), opt_float(r, "lt"), opt_float(r, "lte"), opt_float(r, "gt"), opt_float(r, "gte"));
    range_problem(value, c, lt, lte, gt, gte)
}

/// `in` and `not_in` of numeric or enum rules.
fn in_lists(r: &DynamicMessage, value: &Value) -> Option<String> {
    let v = int_of(value)?;
    let list = |name: &str| -> Vec<i128> {
        r.get_field_by_name(name)
            .and_then(|l| l.as_list().map(|l| l.iter().filter_map(int_of).collect()))
            .unwrap_or_default()
    };
    let allowed = list("in");
    if !allowed.is_empty() && !allowed.contains(&v) {
        return Some(format!("value must be one of {allowed:?}"));
    }
    if list("not_in").contains(&v) {
        return Some(format!("value must not be {v}"));
    }
    None
}

fn duration_problem(d: &DynamicMessage, r: &DynamicMessage) -> Option<String> {
    let nanos_of = |m: &DynamicMessage| -> i128 {
        let s = m.get_field_by_name("seconds").and_then(|v| int_of(&v)).unwrap_or(0);
        let n = m.get_field_by_name("nanos").and_then(|v| int_of(&v)).unwrap_or(0);
        s * 1_000_000_000 + n
    };
    let bound = |name: &str| sub(r, name).map(&nanos_of);
    let show = |n: i128| format!("{}s", n as f64 / 1e9);
    let problem = range_problem(nanos_of(d), bound("const"), bound("lt"), bound("lte"), bound("gt"), bound("gte"))?;
    // Say the bounds in seconds rather than nanoseconds.
    let mut shown = problem;
    for name in ["const", "lt", "lte", "gt", "gte"] {
        if let Some(n) = bound(name) {
            shown = shown.replace(&n.to_string(), &show(n));
        }
    }
    Some(shown.replace("value", "duration"))
}

fn string_problem(s: &str, r: &DynamicMessage) -> Option<String> {
    if s.is_empty() && bool_of(r, "ignore_empty") {
        return None;
    }
    let chars = s.chars().count() as u64;
    let bytes = s.len() as u64;
    if let Some(n) = uint_of(r, "len")
        && chars != n
    {
        return Some(format!("value length must be {n} characters"));
    }
    if let Some(n) = uint_of(r, "min_len")
        && chars < n
    {
        return Some(format!("value length must be at least {n} characters"));
    }
    if let Some(n) = uint_of(r, "max_len")
        && chars > n
    {
        return Some(format!("value length must be at most {n} characters"));
    }
    if let Some(n) = uint_of(r, "min_bytes")
        && bytes < n
    {
        return Some(format!("value length must be at least {n} bytes"));
    }
    if let Some(n) = uint_of(r, "max_bytes")
        && bytes > n
    {
        return Some(format!("value length must be at most {n} bytes"));
    }
    let text = |name: &str| -> Option<String> {
        if !r.has_field_by_name(name) {
            return None;
        }
        r.get_field_by_name(name).and_then(|v| v.as_str().map(str::to_owned))
    };
    if let Some(p) = text("prefix")
        && !s.starts_with(&p)
    {
        return Some(format!("value does not have prefix {p:?}"));
    }
    if let Some(p) = text("suffix")
        && !s.ends_with(&p)
    {
        return Some(format!("value does not have suffix {p:?}"));
    }
    if let Some(p) = text("contains")
        && !s.contains(&p)
    {
        return Some(format!("value does not contain {p:?}"));
    }
    if let Some(p) = text("not_contains")
        && s.contains(&p)
    {
        return Some(format!("value contains {p:?}"));
    }
    let list = |name: &str| -> Vec<String> {
        r.get_field_by_name(name)
            .and_then(|l| l.as_list().map(|l| l.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()))
            .unwrap_or_default()
    };
    let allowed = list("in");
    if !allowed.is_empty() && !allowed.iter().any(|a| a == s) {
        return Some(format!("value must be one of {allowed:?}"));
    }
    if list("not_in").iter().any(|a| a == s) {
        return Some(format!("value must not be {s:?}"));
    }
    if let Some(p) = text("pattern")
        && !matches(&p, s)?
    {
        return Some(format!("value does not match regex pattern {p:?}"));
    }
    if r.has_field_by_name("well_known_regex") {
        let strict = !r.has_field_by_name("strict") || bool_of(r, "strict");
        let which = r.get_field_by_name("well_known_regex").and_then(|v| v.as_enum_number()).unwrap_or(0);
        // validate.KnownRegex: 1 HTTP_HEADER_NAME, 2 HTTP_HEADER_VALUE.
        let pattern = match (which, strict) {
            (1, true) => r"^:?[0-9a-zA-Z!#$%&'*+\-.^_|~`]+$",
            (2, true) => "^[^\u{0}\u{a}\u{d}]*$",
            (1 | 2, false) => "^[^\u{0}\u{a}\u{d}]*$",
            _ => return None,
        };
        if !matches(pattern, s)? {
            let what = if which == 1 { "an HTTP header name" } else { "an HTTP header value" };
            return Some(format!("value is not {what} ({s:?})"));
        }
    }
    None
}

/// Whether `s` matches `pattern`; `None` (no verdict) for a pattern this engine cannot compile.
fn matches(pattern: &str, s: &str) -> Option<bool> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<regex::Regex>>>> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let re = cache.entry(pattern.to_owned()).or_insert_with(|| regex::Regex::new(pattern).ok());
    re.as_ref().map(|re| re.is_match(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route_config(yaml: &str) -> DynamicMessage {
        let desc = crate::descriptors::message_for_type_url(crate::types::ROUTE).unwrap();
        let value: serde_json::Value = serde_yaml_ng::from_str(yaml).unwrap();
        crate::decode::decode_message(desc, value).unwrap()
    }

    fn problem(yaml: &str) -> Option<(String, String)> {
        check(&route_config(yaml)).err()
    }

    const OK: &str = "name: r\nvirtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  - match: {prefix: /}\n    route: {cluster: c}\n";

    #[test]
    fn a_good_route_configuration_passes() {
        assert_eq!(problem(OK), None);
    }

    /// Issue 35: what Envoy NACKs with a validation error is refused first, naming the field.
    #[test]
    fn what_envoy_validates_is_refused_naming_the_field() {
        let cases = [
            // A header match with an empty name, or a NUL in it.
            (
                OK.replace("match: {prefix: /}", "match: {prefix: /, headers: [{name: '', exact_match: x}]}"),
                "virtual_hosts[0].routes[0].match.headers[0].name",
                "at least 1",
            ),
            (
                OK.replace("match: {prefix: /}", "match: {prefix: /, headers: [{name: \"a\\0b\", exact_match: x}]}"),
                "virtual_hosts[0].routes[0].match.headers[0].name",
                "HTTP header name",
            ),
            // A response header value with a newline.
            (
                OK.replace(
                    "route: {cluster: c}",
                    "route: {cluster: c}\n    response_headers_to_add: [{header: {key: x, value: \"a\\nb\"}}]",
                ),
                "virtual_hosts[0].routes[0].response_headers_to_add[0].header.value",
                "HTTP header value",
            ),
            // A hostname with a newline.
            (OK.replace("domains: ['*']", "domains: [\"a\\nb\"]"), "virtual_hosts[0].domains[0]", "header value"),
            // A path-separated prefix with a query.
            (
                OK.replace("match: {prefix: /}", "match: {path_separated_prefix: /search?q}"),
                "virtual_hosts[0].routes[0].match.path_separated_prefix",
                "regex pattern",
            ),
            // No domains at all.
            (OK.replace("domains: ['*']", "domains: []"), "virtual_hosts[0].domains", "at least 1 item"),
            // A route with no action (a oneof Envoy requires).
            (OK.replace("    route: {cluster: c}\n", ""), "virtual_hosts[0].routes[0].action", "is required"),
        ];
        for (yaml, field, says) in cases {
            let (at, why) = problem(&yaml).unwrap_or_else(|| panic!("not refused:\n{yaml}"));
            assert_eq!(at, field, "{why}");
            assert!(why.contains(says), "{at}: {why}");
        }
    }

    #[test]
    fn numbers_and_durations_are_bounded_as_envoy_bounds_them() {
        let desc = crate::descriptors::message_for_type_url(crate::types::CLUSTER).unwrap();
        let cluster = |extra: &str| {
            let yaml = format!("name: c\n{extra}");
            crate::decode::decode_message(desc.clone(), serde_yaml_ng::from_str(&yaml).unwrap()).unwrap()
        };
        assert_eq!(check(&cluster("connect_timeout: 1s")).err(), None);
        let (at, why) = check(&cluster("connect_timeout: 0s")).unwrap_err();
        assert_eq!(at, "connect_timeout");
        assert!(why.contains("duration must be > 0s"), "{why}");
        let port = "load_assignment: {cluster_name: c, endpoints: [{lb_endpoints: [{endpoint: {address: \
                    {socket_address: {address: 1.2.3.4, port_value: 70000}}}}]}]}";
        let (at, why) = check(&cluster(port)).unwrap_err();
        assert_eq!(at, "load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value");
        assert!(why.contains("<= 65535"), "{why}");
    }
}

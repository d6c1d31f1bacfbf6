//! The checks Envoy makes on a resource when it receives one: the protoc-gen-validate rules
//! annotated in Envoy's own protos (`(validate.rules)` on fields, `(validate.required)` on
//! oneofs, `(validate.disabled)` on messages). Envoy refuses (NACKs) a resource that breaks
//! one; xdst refuses it before it is served, naming the field: decoding
//! ([`crate::decode`]) runs [`check`] on every resource. Each message type's rules are read
//! from its descriptor once and compiled into plain values, so a check costs a few
//! microseconds a resource (`docs/PERFORMANCE.md`).
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
//!
//! Beside the annotations, what Envoy checks in code ([`code`]): regular expressions through
//! RE2 with its default program-size limit, header mutations, weight sums, durations it can
//! convert, and addresses that must be IPs.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use prost_reflect::{DynamicMessage, ExtensionDescriptor, FieldDescriptor, Kind, ReflectMessage, Value};

mod code;

/// The first rule `msg` breaks: the field's path (`virtual_hosts[0].routes[1].match.prefix`)
/// and what is wrong.
pub fn check(msg: &DynamicMessage) -> Result<(), (String, String)> {
    let Some(ext) = Extensions::get() else { return Ok(()) };
    let mut path = String::new();
    check_message(ext, msg, &mut path, 0)?;
    code::check_resource(msg)
}

/// The rules of `msg`, found `depth` messages deep in a resource, and of what it holds: what
/// [`check`] checks of it inside the whole (whole-resource checks aside).
pub(crate) fn check_nested(msg: &DynamicMessage, depth: usize) -> Result<(), (String, String)> {
    let Some(ext) = Extensions::get() else { return Ok(()) };
    check_message(ext, msg, &mut String::new(), depth)
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
    /// The oneofs with `(validate.required)`.
    required_oneofs: Vec<prost_reflect::OneofDescriptor>,
    /// The fields with rules or that hold messages (nothing else is checked), with their
    /// rules compiled.
    fields: Vec<FieldPlan>,
}

struct FieldPlan {
    field: FieldDescriptor,
    spec: Option<FieldSpec>,
    holds_messages: bool,
    in_oneof: bool,
}

/// One field's rules, compiled: what is checked is read once, not looked up by name at
/// every check.
#[derive(Default)]
struct FieldSpec {
    /// `message: {required: true}`, or `required` of `any`, `duration` or `timestamp`.
    required: bool,
    /// `message: {skip: true}`.
    skip: bool,
    spec: Spec,
}

#[derive(Default)]
enum Spec {
    #[default]
    None,
    String(Box<StringSpec>),
    Int(NumSpec<i128>),
    Float(NumSpec<f64>),
    Enum {
        defined_only: bool,
        allowed: Vec<i128>,
        refused: Vec<i128>,
    },
    Repeated {
        min: Option<u64>,
        max: Option<u64>,
        ignore_empty: bool,
        items: Option<Box<FieldSpec>>,
    },
    Map {
        min: Option<u64>,
        max: Option<u64>,
        ignore_empty: bool,
    },
    /// Bounds in nanoseconds.
    Duration(NumSpec<i128>),
}

struct NumSpec<T> {
    constant: Option<T>,
    lt: Option<T>,
    lte: Option<T>,
    gt: Option<T>,
    gte: Option<T>,
    allowed: Vec<i128>,
    refused: Vec<i128>,
    ignore_empty: bool,
}

#[derive(Default)]
struct StringSpec {
    len: Option<u64>,
    min_len: Option<u64>,
    max_len: Option<u64>,
    min_bytes: Option<u64>,
    max_bytes: Option<u64>,
    prefix: Option<String>,
    suffix: Option<String>,
    contains: Option<String>,
    not_contains: Option<String>,
    allowed: Vec<String>,
    refused: Vec<String>,
    /// The pattern, compiled (a pattern this engine cannot compile is not checked).
    pattern: Option<(String, regex::Regex)>,
    /// A header name (`true`) or value (`false`) rule, with its pattern.
    header: Option<(bool, regex::Regex)>,
    ignore_empty: bool,
}

fn rules_of(ext: &Extensions, desc: &prost_reflect::MessageDescriptor) -> std::sync::Arc<MessageRules> {
    type Cache = HashMap<String, std::sync::Arc<MessageRules>>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(r) = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(desc.full_name()) {
        return r.clone();
    }
    let options = desc.options();
    let rules = std::sync::Arc::new(MessageRules {
        skip: flag(&options, &ext.disabled) || flag(&options, &ext.ignored),
        required_oneofs: desc.oneofs().filter(|o| flag(&o.options(), &ext.required)).collect(),
        fields: desc
            .fields()
            .filter_map(|field| {
                let options = field.options();
                let spec = options
                    .has_extension(&ext.rules)
                    .then(|| options.get_extension(&ext.rules).as_message().map(compile))
                    .flatten();
                let holds_messages = matches!(field.kind(), Kind::Message(_));
                let in_oneof = field.containing_oneof().is_some();
                (spec.is_some() || holds_messages).then_some(FieldPlan { field, spec, holds_messages, in_oneof })
            })
            .collect(),
    });
    cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(desc.full_name().to_owned(), rules.clone());
    rules
}

/// A `validate.FieldRules` as plain values.
fn compile(rules: &DynamicMessage) -> FieldSpec {
    let mut f = FieldSpec::default();
    if let Some(m) = sub(rules, "message") {
        f.skip = bool_of(m, "skip");
        f.required = bool_of(m, "required");
    }
    for name in ["any", "duration", "timestamp"] {
        if sub(rules, name).is_some_and(|r| bool_of(r, "required")) {
            f.required = true;
        }
    }
    let num = |r: &DynamicMessage| NumSpec {
        constant: opt_int(r, "const"),
        lt: opt_int(r, "lt"),
        lte: opt_int(r, "lte"),
        gt: opt_int(r, "gt"),
        gte: opt_int(r, "gte"),
        allowed: int_list(r, "in"),
        refused: int_list(r, "not_in"),
        ignore_empty: bool_of(r, "ignore_empty"),
    };
    for name in ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64"]
    {
        if let Some(r) = sub(rules, name) {
            f.spec = Spec::Int(num(r));
        }
    }
    for name in ["float", "double"] {
        if let Some(r) = sub(rules, name) {
            f.spec = Spec::Float(NumSpec {
                constant: opt_float(r, "const"),
                lt: opt_float(r, "lt"),
                lte: opt_float(r, "lte"),
                gt: opt_float(r, "gt"),
                gte: opt_float(r, "gte"),
                allowed: Vec::new(),
                refused: Vec::new(),
                ignore_empty: bool_of(r, "ignore_empty"),
            });
        }
    }
    if let Some(r) = sub(rules, "enum") {
        f.spec = Spec::Enum {
            defined_only: bool_of(r, "defined_only"),
            allowed: int_list(r, "in"),
            refused: int_list(r, "not_in"),
        };
    }
    if let Some(r) = sub(rules, "repeated") {
        f.spec = Spec::Repeated {
            min: uint_of(r, "min_items"),
            max: uint_of(r, "max_items"),
            ignore_empty: bool_of(r, "ignore_empty"),
            items: sub(r, "items").map(|i| Box::new(compile(i))),
        };
    }
    if let Some(r) = sub(rules, "map") {
        f.spec = Spec::Map {
            min: uint_of(r, "min_pairs"),
            max: uint_of(r, "max_pairs"),
            ignore_empty: bool_of(r, "ignore_empty"),
        };
    }
    if let Some(r) = sub(rules, "duration") {
        let bound = |name: &str| sub(r, name).map(nanos_of);
        f.spec = Spec::Duration(NumSpec {
            constant: bound("const"),
            lt: bound("lt"),
            lte: bound("lte"),
            gt: bound("gt"),
            gte: bound("gte"),
            allowed: Vec::new(),
            refused: Vec::new(),
            ignore_empty: false,
        });
    }
    if let Some(r) = sub(rules, "string") {
        let text = |name: &str| -> Option<String> {
            if !r.has_field_by_name(name) {
                return None;
            }
            r.get_field_by_name(name).and_then(|v| v.as_str().map(str::to_owned))
        };
        let list = |name: &str| -> Vec<String> {
            r.get_field_by_name(name)
                .and_then(|l| l.as_list().map(|l| l.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()))
                .unwrap_or_default()
        };
        let header = if r.has_field_by_name("well_known_regex") {
            let strict = !r.has_field_by_name("strict") || bool_of(r, "strict");
            let which = r.get_field_by_name("well_known_regex").and_then(|v| v.as_enum_number()).unwrap_or(0);
            // validate.KnownRegex: 1 HTTP_HEADER_NAME, 2 HTTP_HEADER_VALUE.
            let pattern = match (which, strict) {
                (1, true) => Some(r"^:?[0-9a-zA-Z!#$%&'*+\-.^_|~`]+$"),
                (1 | 2, _) => Some("^[^\u{0}\u{a}\u{d}]*$"),
                _ => None,
            };
            pattern.and_then(|p| regex::Regex::new(p).ok()).map(|re| (which == 1, re))
        } else {
            None
        };
        f.spec = Spec::String(Box::new(StringSpec {
            len: uint_of(r, "len"),
            min_len: uint_of(r, "min_len"),
            max_len: uint_of(r, "max_len"),
            min_bytes: uint_of(r, "min_bytes"),
            max_bytes: uint_of(r, "max_bytes"),
            prefix: text("prefix"),
            suffix: text("suffix"),
            contains: text("contains"),
            not_contains: text("not_contains"),
            allowed: list("in"),
            refused: list("not_in"),
            pattern: text("pattern").and_then(|p| regex::Regex::new(&p).ok().map(|re| (p, re))),
            header,
            ignore_empty: bool_of(r, "ignore_empty"),
        }));
    }
    f
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
    code::check_message(msg, desc.full_name(), path)?;
    let rules = rules_of(ext, &desc);
    if rules.skip {
        return Ok(());
    }
    for oneof in &rules.required_oneofs {
        if !oneof.fields().any(|f| msg.has_field(&f)) {
            let names: Vec<String> = oneof.fields().map(|f| f.name().to_owned()).collect();
            let at = if path.is_empty() { oneof.name().to_owned() } else { format!("{path}.{}", oneof.name()) };
            return Err((at, format!("one of {} is required", names.join(", "))));
        }
    }
    for plan in &rules.fields {
        let (field, spec) = (&plan.field, plan.spec.as_ref());
        let set = msg.has_field(field);
        // Unset: a member of a oneof is checked only when it is the one set, a field holding
        // messages only when required.
        let singular_message = plan.holds_messages && !plan.field.is_list() && !plan.field.is_map();
        if !set && (plan.in_oneof || spec.is_none() || (singular_message && !spec.is_some_and(|s| s.required))) {
            continue;
        }
        let len = push(path, field.name());
        let result = check_field(ext, msg, field, spec, set, path, depth);
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
    spec: Option<&FieldSpec>,
    set: bool,
    path: &mut String,
    depth: usize,
) -> Result<(), (String, String)> {
    if let Some(spec) = spec {
        if spec.skip {
            return Ok(());
        }
        if spec.required && !set {
            return Err((path.clone(), "value is required".into()));
        }
    }
    let value = msg.get_field(field);
    if field.is_list() {
        let items = value.as_list().unwrap_or_default();
        let mut item_spec = None;
        if let Some(Spec::Repeated { min, max, ignore_empty, items: each }) = spec.map(|s| &s.spec) {
            if !(items.is_empty() && *ignore_empty) {
                if let Some(min) = min
                    && (items.len() as u64) < *min
                {
                    return Err((path.clone(), format!("value must contain at least {min} item(s)")));
                }
                if let Some(max) = max
                    && items.len() as u64 > *max
                {
                    return Err((path.clone(), format!("value must contain no more than {max} item(s)")));
                }
            }
            item_spec = each.as_deref();
        }
        for (i, item) in items.iter().enumerate() {
            let len = path.len();
            let _ = write!(path, "[{i}]");
            let result = check_value(ext, field, item, item_spec, path, depth);
            path.truncate(len);
            result?;
        }
        return Ok(());
    }
    if field.is_map() {
        let pairs = value.as_map().map(|m| m.len()).unwrap_or(0) as u64;
        if let Some(Spec::Map { min, max, ignore_empty }) = spec.map(|s| &s.spec)
            && !(pairs == 0 && *ignore_empty)
        {
            if let Some(min) = min
                && pairs < *min
            {
                return Err((path.clone(), format!("value must contain at least {min} pair(s)")));
            }
            if let Some(max) = max
                && pairs > *max
            {
                return Err((path.clone(), format!("value must contain no more than {max} pair(s)")));
            }
        }
        if let (Some(map), Kind::Message(entry)) = (value.as_map(), field.kind()) {
            let value_field = entry.map_entry_value_field();
            if matches!(value_field.kind(), Kind::Message(_)) {
                for (key, v) in map {
                    let len = path.len();
                    let _ = write!(path, "[{key:?}]");
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
    if !set && matches!(field.kind(), Kind::Message(_)) {
        return Ok(());
    }
    check_value(ext, field, &value, spec, path, depth)
}

/// One value (a singular field's, or a repeated field's item) against `spec`.
fn check_value(
    ext: &Extensions,
    field: &FieldDescriptor,
    value: &Value,
    spec: Option<&FieldSpec>,
    path: &mut String,
    depth: usize,
) -> Result<(), (String, String)> {
    let fail = |why: String| Err((path.clone(), why));
    let spec = spec.map(|s| &s.spec);
    match (value, spec) {
        (Value::String(s), Some(Spec::String(r))) => {
            if let Some(why) = string_problem(s, r) {
                return fail(why);
            }
        }
        (Value::I32(_) | Value::I64(_) | Value::U32(_) | Value::U64(_), Some(Spec::Int(r))) => {
            let n = int_of(value).unwrap_or(0);
            if !(n == 0 && r.ignore_empty)
                && let Some(why) = range_problem(n, r.constant, r.lt, r.lte, r.gt, r.gte)
                    .or_else(|| in_lists(n, &r.allowed, &r.refused))
            {
                return fail(why);
            }
        }
        (Value::F64(_) | Value::F32(_), Some(Spec::Float(r))) => {
            let x = match value {
                Value::F64(x) => *x,
                Value::F32(x) => f64::from(*x),
                _ => 0.0,
            };
            if !(x == 0.0 && r.ignore_empty)
                && let Some(why) = range_problem(x, r.constant, r.lt, r.lte, r.gt, r.gte)
            {
                return fail(why);
            }
        }
        (Value::EnumNumber(n), Some(Spec::Enum { defined_only, allowed, refused })) => {
            if *defined_only
                && let Kind::Enum(e) = field.kind()
                && e.get_value(*n).is_none()
            {
                return fail(format!("value must be one of the defined enum values, not {n}"));
            }
            if let Some(why) = in_lists(i128::from(*n), allowed, refused) {
                return fail(why);
            }
        }
        (Value::Message(m), spec) => {
            if let Some(Spec::Duration(r)) = spec
                && m.descriptor().full_name() == "google.protobuf.Duration"
                && let Some(why) = duration_problem(m, r)
            {
                return fail(why);
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

fn int_list(r: &DynamicMessage, name: &str) -> Vec<i128> {
    r.get_field_by_name(name)
        .and_then(|l| l.as_list().map(|l| l.iter().filter_map(int_of).collect()))
        .unwrap_or_default()
}

fn nanos_of(m: &DynamicMessage) -> i128 {
    let s = m.get_field_by_name("seconds").and_then(|v| int_of(&v)).unwrap_or(0);
    let n = m.get_field_by_name("nanos").and_then(|v| int_of(&v)).unwrap_or(0);
    s * 1_000_000_000 + n
}

/// `in` and `not_in` of numeric or enum rules.
fn in_lists(v: i128, allowed: &[i128], refused: &[i128]) -> Option<String> {
    if !allowed.is_empty() && !allowed.contains(&v) {
        return Some(format!("value must be one of {allowed:?}"));
    }
    if refused.contains(&v) {
        return Some(format!("value must not be {v}"));
    }
    None
}

fn duration_problem(d: &DynamicMessage, r: &NumSpec<i128>) -> Option<String> {
    let show = |n: i128| format!("{}s", n as f64 / 1e9);
    let problem = range_problem(nanos_of(d), r.constant, r.lt, r.lte, r.gt, r.gte)?;
    // Say the bounds in seconds rather than nanoseconds.
    let mut shown = problem;
    for n in [r.constant, r.lt, r.lte, r.gt, r.gte].into_iter().flatten() {
        shown = shown.replace(&n.to_string(), &show(n));
    }
    Some(shown.replace("value", "duration"))
}

fn string_problem(s: &str, r: &StringSpec) -> Option<String> {
    if s.is_empty() && r.ignore_empty {
        return None;
    }
    let chars = || s.chars().count() as u64;
    let bytes = s.len() as u64;
    if let Some(n) = r.len
        && chars() != n
    {
        return Some(format!("value length must be {n} characters"));
    }
    if let Some(n) = r.min_len
        && chars() < n
    {
        return Some(format!("value length must be at least {n} characters"));
    }
    if let Some(n) = r.max_len
        && chars() > n
    {
        return Some(format!("value length must be at most {n} characters"));
    }
    if let Some(n) = r.min_bytes
        && bytes < n
    {
        return Some(format!("value length must be at least {n} bytes"));
    }
    if let Some(n) = r.max_bytes
        && bytes > n
    {
        return Some(format!("value length must be at most {n} bytes"));
    }
    if let Some(p) = &r.prefix
        && !s.starts_with(p.as_str())
    {
        return Some(format!("value does not have prefix {p:?}"));
    }
    if let Some(p) = &r.suffix
        && !s.ends_with(p.as_str())
    {
        return Some(format!("value does not have suffix {p:?}"));
    }
    if let Some(p) = &r.contains
        && !s.contains(p.as_str())
    {
        return Some(format!("value does not contain {p:?}"));
    }
    if let Some(p) = &r.not_contains
        && s.contains(p.as_str())
    {
        return Some(format!("value contains {p:?}"));
    }
    if !r.allowed.is_empty() && !r.allowed.iter().any(|a| a == s) {
        return Some(format!("value must be one of {:?}", r.allowed));
    }
    if r.refused.iter().any(|a| a == s) {
        return Some(format!("value must not be {s:?}"));
    }
    if let Some((p, re)) = &r.pattern
        && !re.is_match(s)
    {
        return Some(format!("value does not match regex pattern {p:?}"));
    }
    if let Some((name, re)) = &r.header
        && !re.is_match(s)
    {
        let what = if *name { "an HTTP header name" } else { "an HTTP header value" };
        return Some(format!("value is not {what} ({s:?})"));
    }
    None
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
            // No domains at all, written empty or left out.
            (OK.replace("domains: ['*']", "domains: []"), "virtual_hosts[0].domains", "at least 1 item"),
            (OK.replace("  domains: ['*']\n", ""), "virtual_hosts[0].domains", "at least 1 item"),
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

/// What Envoy checks in code ([`code`]), each refused naming the field.
#[cfg(test)]
mod code_tests {
    use super::*;

    fn problem(type_url: &str, yaml: &str) -> Option<(String, String)> {
        let desc = crate::descriptors::message_for_type_url(type_url).unwrap();
        let value: serde_json::Value = serde_yaml_ng::from_str(yaml).unwrap();
        check(&crate::decode::decode_message(desc, value).unwrap()).err()
    }

    fn route(route: &str) -> Option<(String, String)> {
        let yaml = format!("name: r\nvirtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  - {route}\n");
        problem(crate::types::ROUTE, &yaml)
    }

    #[test]
    fn regexes_go_through_re2_with_envoys_program_size_limit() {
        let (field, why) = route("{match: {safe_regex: {regex: '/a{1001}'}}, route: {cluster: c}}").unwrap();
        assert_eq!(field, "virtual_hosts[0].routes[0].match.safe_regex.regex");
        assert!(why.contains("invalid repetition size"), "{why}");
        let big = "^/(users|orders|items|carts|payments|invoices)/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
        let (_, why) = route(&format!("{{match: {{safe_regex: {{regex: '{big}'}}}}, route: {{cluster: c}}}}")).unwrap();
        assert!(why.contains("> max program size of 100"), "{why}");
        assert!(route("{match: {safe_regex: {regex: '^/v[0-9]+/'}}, route: {cluster: c}}").is_none());
    }

    #[test]
    fn host_and_pseudo_headers_may_not_be_modified() {
        let add = |key: &str| {
            route(&format!(
                "{{match: {{prefix: /}}, route: {{cluster: c}}, request_headers_to_add: [{{header: {{key: '{key}', value: v}}}}]}}"
            ))
        };
        let (field, why) = add("Host").unwrap();
        assert_eq!(field, "virtual_hosts[0].routes[0].request_headers_to_add[0].header.key");
        assert!(why.contains("may not be modified"), "{why}");
        assert!(add(":path").is_some());
        assert!(add("x-team").is_none());
        let removed = route("{match: {prefix: /}, route: {cluster: c}, response_headers_to_remove: [':status']}");
        assert!(removed.unwrap().1.contains("may not be removed"));
    }

    #[test]
    fn weights_sum_within_u32_and_durations_within_envoys_range() {
        let w = |a: u64, b: u64| {
            route(&format!(
                "{{match: {{prefix: /}}, route: {{weighted_clusters: {{clusters: [{{name: a, weight: {a}}}, {{name: b, weight: {b}}}]}}}}}}"
            ))
        };
        let (field, why) = w(2147483648, 2147483648).unwrap();
        assert_eq!(field, "virtual_hosts[0].routes[0].route.weighted_clusters.clusters");
        assert!(why.contains("4294967296"), "{why}");
        assert!(w(2147483648, 2147483647).is_none());
        let t = |d: &str| route(&format!("{{match: {{prefix: /}}, route: {{cluster: c, timeout: {d}}}}}"));
        let (field, _) = t("10800000000s").unwrap();
        assert_eq!(field, "virtual_hosts[0].routes[0].route.timeout");
        assert!(t("9223372036s").is_none());
    }

    #[test]
    fn endpoints_of_eds_and_static_clusters_are_ips() {
        let cla = |address: &str| {
            problem(
                crate::types::ENDPOINT,
                &format!(
                    "cluster_name: c\nendpoints:\n- lb_endpoints:\n  - endpoint: {{address: {{socket_address: {{address: '{address}', port_value: 80}}}}}}\n"
                ),
            )
        };
        let (field, why) = cla("web.example").unwrap();
        assert_eq!(field, "endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address");
        assert!(why.contains("not an IP address"), "{why}");
        assert!(cla("10.0.0.1").is_none() && cla("::1").is_none());
        let cluster = |kind: &str| {
            problem(
                crate::types::CLUSTER,
                &format!(
                    "name: c\n{kind}connect_timeout: 1s\nload_assignment:\n  cluster_name: c\n  endpoints:\n  - lb_endpoints:\n    - endpoint: {{address: {{socket_address: {{address: web.example, port_value: 80}}}}}}\n"
                ),
            )
        };
        assert!(cluster("").is_some(), "STATIC is the default");
        assert!(cluster("type: STRICT_DNS\n").is_none());
    }
}

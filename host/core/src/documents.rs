//! YAML and JSON text to JSON values: the one parser for every document xdst reads
//! (resources, intent, configuration files, plugin settings, test cases).
//!
//! The text is untrusted, so parsing is bounded: nesting deeper than [`MAX_DEPTH`] is refused,
//! and so is a file whose YAML aliases expand to more values than the file has bytes (plus
//! [`SLACK_NODES`]): a 50 KB file of aliases to a long list would otherwise become gigabytes.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Nesting deeper than this (mappings and lists inside each other) is refused.
pub const MAX_DEPTH: usize = 100;
/// Values a file may hold beyond one per byte of text: room for short files whose aliases
/// repeat a few small mappings.
pub const SLACK_NODES: usize = 65_536;

/// Why a text is not documents: which document (1-based) and field, if known, and what is
/// wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentError {
    pub document: Option<usize>,
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = self.document {
            write!(f, "document {d}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field {field}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for DocumentError {}

/// Every document of a file: one JSON value when `json` is true, else YAML documents
/// separated by `---` (empty ones are `null`).
pub fn parse_all(contents: &str, json: bool) -> Result<Vec<Value>, DocumentError> {
    let budget = Budget::for_text(contents);
    if json {
        return parse_json(contents, &budget).map(|v| vec![v]);
    }
    flow_nesting_within_limit(contents)?;
    let mut out = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(contents).enumerate() {
        let v = budget.seed().deserialize(doc).map_err(|e| budget.yaml_error(Some(i + 1), &e))?;
        out.push(v);
    }
    Ok(out)
}

/// One document: YAML (of which JSON is a subset); an empty text is `null`.
pub fn parse_one(contents: &str) -> Result<Value, DocumentError> {
    flow_nesting_within_limit(contents)?;
    let budget = Budget::for_text(contents);
    budget.seed().deserialize(serde_yaml_ng::Deserializer::from_str(contents)).map_err(|e| budget.yaml_error(None, &e))
}

/// Refuses YAML whose flow collections nest past [`MAX_DEPTH`] before the parser sees it (the
/// parser's time grows with the square of that nesting: see [`crate::flow_nesting`]).
fn flow_nesting_within_limit(contents: &str) -> Result<(), DocumentError> {
    match crate::flow_nesting::too_deep(contents, MAX_DEPTH) {
        None => Ok(()),
        Some(line) => Err({
            crate::limits::Limit::Nesting.hit();
            DocumentError {
                document: None,
                field: None,
                message: format!(
                    "line {line}: flow collections ([...], {{...}}) nested more than {MAX_DEPTH} levels deep"
                ),
            }
        }),
    }
}

/// One JSON value, bounded like the rest.
pub fn parse_json_text(contents: &str) -> Result<Value, DocumentError> {
    parse_json(contents, &Budget::for_text(contents))
}

fn parse_json(contents: &str, budget: &Budget) -> Result<Value, DocumentError> {
    let mut de = serde_json::Deserializer::from_str(contents);
    budget
        .seed()
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|_| v))
        .map_err(|e| budget.error(Some(1), || format!("invalid JSON at line {} column {}: {e}", e.line(), e.column())))
}

/// How many values a text may still become, shared by all its documents; and where it went
/// too deep, if it did.
struct Budget {
    left: Cell<usize>,
    limit: usize,
    bytes: usize,
    exhausted: Cell<bool>,
    /// The path at which nesting went past [`MAX_DEPTH`].
    too_deep_at: Cell<Option<String>>,
}

impl Budget {
    fn for_text(text: &str) -> Budget {
        let limit = text.len().saturating_add(SLACK_NODES);
        Budget {
            left: Cell::new(limit),
            limit,
            bytes: text.len(),
            exhausted: Cell::new(false),
            too_deep_at: Cell::new(None),
        }
    }

    fn seed(&self) -> Seed<'_> {
        Seed { budget: self, depth: 0, path: None }
    }

    /// The error for a failed parse: one of ours (too deep, too many values), else the
    /// parser's own (`otherwise`).
    fn error(&self, document: Option<usize>, otherwise: impl FnOnce() -> String) -> DocumentError {
        if let Some(at) = self.too_deep_at.take() {
            let field = (!at.is_empty()).then_some(at);
            crate::limits::Limit::Nesting.hit();
            return DocumentError { document, field, message: format!("nested more than {MAX_DEPTH} levels deep") };
        }
        if self.exhausted.get() {
            crate::limits::Limit::YamlAliases.hit();
            let message = format!(
                "its YAML aliases expand to more than {} values (the text has {} bytes); refused",
                self.limit, self.bytes
            );
            return DocumentError { document, field: None, message };
        }
        DocumentError { document, field: None, message: otherwise() }
    }

    fn yaml_error(&self, document: Option<usize>, e: &serde_yaml_ng::Error) -> DocumentError {
        self.error(document, || {
            let at = e.location().map(|l| format!(" at line {} column {}", l.line(), l.column())).unwrap_or_default();
            format!("invalid YAML{at}: {e}")
        })
    }

    fn take<E: serde::de::Error>(&self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(l) => {
                self.left.set(l);
                Ok(())
            }
            None => {
                self.exhausted.set(true);
                Err(E::custom(format!("more than {} values", self.limit)))
            }
        }
    }
}

/// Deserializes a `serde_json::Value`, counting every value against the budget and every
/// level of nesting against [`MAX_DEPTH`]. `path` is where it is: kept on the stack, and
/// rendered only for an error.
#[derive(Clone, Copy)]
struct Seed<'a> {
    budget: &'a Budget,
    depth: usize,
    path: Option<&'a Segment<'a>>,
}

/// One step of a path, a mapping key or a list index, and the step before it.
struct Segment<'a> {
    parent: Option<&'a Segment<'a>>,
    key: Option<&'a str>,
    index: usize,
}

/// `a.b[2].c`, shortened in the middle when long.
fn render(path: Option<&Segment<'_>>) -> String {
    let mut parts = Vec::new();
    let mut at = path;
    while let Some(s) = at {
        parts.push(match s.key {
            Some(k) => format!(".{k}"),
            None => format!("[{}]", s.index),
        });
        at = s.parent;
    }
    parts.reverse();
    let joined = |p: &[String]| p.concat().trim_start_matches('.').to_owned();
    if parts.len() <= 12 {
        return joined(&parts);
    }
    format!("{}…{} ({} levels)", joined(&parts[..8]), parts[parts.len() - 3..].concat(), parts.len())
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.budget.take()?;
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML or JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.check_depth()?;
        let mut out = Vec::new();
        loop {
            let at = Segment { parent: self.path, key: None, index: out.len() };
            match seq.next_element_seed(self.child(&at))? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.check_depth()?;
        let mut out = Map::new();
        while let Some(k) = map.next_key::<Key>()? {
            let at = Segment { parent: self.path, key: Some(&k.0), index: 0 };
            let v = map.next_value_seed(self.child(&at))?;
            out.insert(k.0, v);
        }
        Ok(Value::Object(out))
    }
}

impl<'a> Seed<'a> {
    fn check_depth<E: serde::de::Error>(&self) -> Result<(), E> {
        if self.depth < MAX_DEPTH {
            return Ok(());
        }
        self.budget.too_deep_at.set(Some(render(self.path)));
        Err(E::custom(format!("nested more than {MAX_DEPTH} levels deep")))
    }

    fn child<'b>(&self, at: &'b Segment<'b>) -> Seed<'b>
    where
        'a: 'b,
    {
        Seed { budget: self.budget, depth: self.depth + 1, path: Some(at) }
    }
}

/// A mapping key: a string, or a scalar written as one (YAML `80: x` has the key `"80"`).
struct Key(String);

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, number or boolean key")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Key, E> {
                Ok(Key(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Key, E> {
                Err(E::custom("a mapping key must not be null"))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_and_json_documents() {
        let docs = parse_all("a: 1\n---\n---\nb: [x, 2.5, true, ~]\n80: port\n", false).unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), Value::Null, json!({"b": ["x", 2.5, true, null], "80": "port"})]);
        assert_eq!(parse_all(r#"[{"a": 1}]"#, true).unwrap(), vec![json!([{"a": 1}])]);
        assert_eq!(parse_one("").unwrap(), Value::Null);
        assert_eq!(parse_one("{x: {y: z}}").unwrap(), json!({"x": {"y": "z"}}));
    }

    #[test]
    fn errors_name_the_document_and_line() {
        let e = parse_all("a: 1\n---\nb: [1,\n", false).unwrap_err();
        assert_eq!(e.document, Some(2));
        assert!(e.message.starts_with("invalid YAML at line"), "{e}");
        let e = parse_all("{\"a\": }", true).unwrap_err();
        assert!(e.message.starts_with("invalid JSON at line 1 column"), "{e}");
        let e = parse_all("{\"a\": 1} x", true).unwrap_err();
        assert!(e.message.contains("trailing"), "{e}");
    }

    #[test]
    fn nesting_is_bounded() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse_one(&ok).is_ok());
        for text in ["[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1), "[".repeat(100_000)] {
            let e = parse_all(&text, true).unwrap_err();
            assert_eq!(e.message, "nested more than 100 levels deep", "{e}");
            let e = parse_one(&text).unwrap_err();
            assert!(e.message.contains("nested more than") || e.message.contains("recursion limit"), "{e}");
        }
        // The error names where, shortening a long path in the middle.
        let deep = "{\"a\": ".repeat(3_000) + "1" + &"}".repeat(3_000);
        let e = parse_json_text(&deep).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("a.a.a.a.a.a.a.a….a.a.a (100 levels)"), "{e}");
        let e = parse_one(&("x:\n".to_owned() + &"- ".repeat(150) + "1")).unwrap_err();
        assert!(e.field.as_deref().is_some_and(|f| f.starts_with("x[0][0]")), "{e}");
    }

    #[test]
    fn alias_expansion_is_bounded() {
        // 10,000 aliases to a 10,000-element list: 100 million values from 60 KB of text.
        let mut text = String::from("base: &l [");
        text.push_str(&vec!["1"; 10_000].join(","));
        text.push_str("]\nrefs:\n");
        for _ in 0..10_000 {
            text.push_str("- *l\n");
        }
        let started = std::time::Instant::now();
        let e = parse_one(&text).unwrap_err();
        assert!(e.message.contains("aliases expand to more than"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
        // A few aliases, as people use them, are fine.
        let v = parse_one("d: &d {timeout: 1s}\na: *d\nb: *d\n").unwrap();
        assert_eq!(v["b"]["timeout"], "1s");
    }
}

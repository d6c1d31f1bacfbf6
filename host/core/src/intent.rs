//! Intent documents: what users write for plugins to translate.
//!
//! Each document is `{kind, metadata: {name, ...}, spec}`, in YAML (several documents per
//! file) or JSON. `kind` picks the plugin that translates it; `(kind, name)` is unique. Every
//! error names the file, the document and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::decode::DecodeError;

/// One intent document.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentDocument {
    pub kind: String,
    pub name: String,
    /// `file#index`, for messages.
    pub origin: String,
    /// The whole document.
    pub json: serde_json::Value,
    /// The whole document as compact JSON: what plugins get, and how changes are detected.
    pub text: Arc<str>,
    id: Arc<str>,
}

impl IntentDocument {
    /// `Kind/name`, how plugins and errors refer to a document.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }
}

fn err(file: &str, document: usize, field: Option<&str>, message: impl Into<String>) -> DecodeError {
    DecodeError {
        file: file.to_owned(),
        document: Some(document),
        field: field.map(str::to_owned),
        message: message.into(),
    }
}

/// Parses every intent document in a file's contents. `file` is used in errors and origins.
pub fn parse_file(file: &str, contents: &str) -> Result<Vec<IntentDocument>, DecodeError> {
    let mut values = Vec::new();
    for v in crate::documents::parse_all(contents, file.ends_with(".json"))
        .map_err(|e| err(file, e.document.unwrap_or(1), e.field.as_deref(), e.message))?
    {
        match v {
            // A JSON file may hold a list of documents.
            serde_json::Value::Array(list) if file.ends_with(".json") => values.extend(list),
            v => values.push(v),
        }
    }
    let mut out = Vec::new();
    for (i, v) in values.into_iter().enumerate() {
        let index = i + 1;
        if v.is_null() {
            continue;
        }
        let serde_json::Value::Object(map) = &v else {
            return Err(err(file, index, None, "an intent document must be a mapping with kind, metadata and spec"));
        };
        let kind = match map.get("kind") {
            Some(serde_json::Value::String(k)) if !k.trim().is_empty() => k.clone(),
            Some(_) => return Err(err(file, index, Some("kind"), "must be a non-empty string")),
            None => {
                return Err(err(file, index, Some("kind"), "missing (which plugin should translate this document?)"));
            }
        };
        let name = match map.get("metadata").map(|m| m.get("name")) {
            Some(Some(serde_json::Value::String(n))) => n.clone(),
            Some(Some(_)) => {
                return Err(err(file, index, Some("metadata.name"), "must be a string"));
            }
            Some(None) => return Err(err(file, index, Some("metadata.name"), "missing")),
            None => {
                return Err(err(file, index, Some("metadata"), "missing (it must carry a name)"));
            }
        };
        if let Some(problem) = name_problem(&name) {
            return Err(err(file, index, Some("metadata.name"), format!("{name:?}: {problem}")));
        }
        if let Some(spec) = map.get("spec")
            && !spec.is_object()
        {
            return Err(err(file, index, Some("spec"), "must be a mapping"));
        }
        if let Some(extra) = map.keys().find(|k| !["kind", "metadata", "spec", "apiVersion"].contains(&k.as_str())) {
            return Err(err(file, index, Some(extra), "unknown top-level field (expected kind, metadata, spec)"));
        }
        out.push(IntentDocument {
            id: format!("{kind}/{name}").into(),
            kind,
            name,
            origin: format!("{file}#{index}"),
            text: v.to_string().into(),
            json: v,
        });
    }
    Ok(out)
}

/// Names are what resources get called after: keep them to what every Envoy name field accepts.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("must not be empty");
    }
    if name.len() > 253 {
        return Some("longer than 253 characters");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)) {
        return Some("may contain only letters, digits, '-', '.' and '_'");
    }
    None
}

/// Every intent document, by kind and name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntentSet {
    by_kind: BTreeMap<String, BTreeMap<String, Arc<IntentDocument>>>,
}

/// Two documents with one kind and name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("duplicate {kind} {name:?}: defined in {first} and again in {second}")]
pub struct DuplicateIntent {
    pub kind: String,
    pub name: String,
    pub first: String,
    pub second: String,
}

/// A document whose kind no plugin translates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin} field kind: no plugin translates kind {kind:?} (loaded plugins translate: {known})")]
pub struct UnclaimedKind {
    pub origin: String,
    pub kind: String,
    pub known: String,
}

impl IntentSet {
    pub fn add(&mut self, doc: IntentDocument) -> Result<(), DuplicateIntent> {
        self.add_shared(Arc::new(doc))
    }

    /// Adds a document that may also be held elsewhere (a cache of parsed files): an
    /// unchanged document stays the same allocation from one generation to the next, which
    /// makes telling it apart from a changed one a pointer comparison.
    pub fn add_shared(&mut self, doc: Arc<IntentDocument>) -> Result<(), DuplicateIntent> {
        let docs = self.by_kind.entry(doc.kind.clone()).or_default();
        if let Some(prev) = docs.get(&doc.name) {
            return Err(DuplicateIntent {
                kind: doc.kind.clone(),
                name: doc.name.clone(),
                first: prev.origin.clone(),
                second: doc.origin.clone(),
            });
        }
        docs.insert(doc.name.clone(), doc);
        Ok(())
    }

    /// The documents of one kind, ordered by name.
    pub fn of_kind(&self, kind: &str) -> impl Iterator<Item = &IntentDocument> {
        self.by_kind.get(kind).into_iter().flat_map(|m| m.values().map(|d| d.as_ref()))
    }

    /// Every document, by kind and then name.
    pub fn documents(&self) -> impl Iterator<Item = &IntentDocument> {
        self.by_kind.values().flat_map(|docs| docs.values().map(|d| d.as_ref()))
    }

    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.by_kind.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.by_kind.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fails on the first document whose kind is not in `claimed`.
    pub fn check_claimed(&self, claimed: &BTreeSet<String>) -> Result<(), UnclaimedKind> {
        for (kind, docs) in &self.by_kind {
            if !claimed.contains(kind) {
                let first = docs.values().next().expect("kinds are never empty");
                let known = if claimed.is_empty() {
                    "none".to_owned()
                } else {
                    claimed.iter().cloned().collect::<Vec<_>>().join(", ")
                };
                return Err(UnclaimedKind { origin: first.origin.clone(), kind: kind.clone(), known });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "kind: HttpService\nmetadata: {name: web}\nspec: {port: 80}\n---\nkind: HttpService\nmetadata:\
        \n  name: api\n  team: payments\nspec: {}\n";

    #[test]
    fn multi_document_yaml_and_json() {
        let docs = parse_file("svc.yaml", TWO).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!((docs[1].id().as_ref(), docs[1].origin.as_str()), ("HttpService/api", "svc.yaml#2"));
        assert_eq!(docs[1].json["metadata"]["team"], "payments");
        let json = r#"[{"kind": "HttpService", "metadata": {"name": "web"}, "spec": {"port": 80}}]"#;
        assert_eq!(parse_file("svc.json", json).unwrap()[0].json, docs[0].json);
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let cases = [
            ("metadata: {name: a}\n", "kind"),
            ("kind: X\n", "metadata"),
            ("kind: X\nmetadata: {team: a}\n", "metadata.name"),
            ("kind: X\nmetadata: {name: 'has space'}\n", "metadata.name"),
            ("kind: X\nmetadata: {name: a}\nspec: [1]\n", "spec"),
            ("kind: X\nmetadata: {name: a}\nspecs: {}\n", "specs"),
            ("kind: ''\nmetadata: {name: a}\n", "kind"),
        ];
        for (text, field) in cases {
            let doc = format!("kind: Ok\nmetadata: {{name: fine}}\n---\n{text}");
            let e = parse_file("f.yaml", &doc).unwrap_err();
            assert_eq!((e.document, e.field.as_deref()), (Some(2), Some(field)), "{text}: {e}");
        }
        let e = parse_file("f.yaml", "kind: [\n").unwrap_err();
        assert!(e.message.contains("invalid YAML"), "{e}");
        assert!(parse_file("f.yaml", "- 1\n").unwrap_err().message.contains("mapping"));
    }

    #[test]
    fn duplicates_and_unclaimed_kinds() {
        let mut set = IntentSet::default();
        for d in parse_file("a.yaml", TWO).unwrap() {
            set.add(d).unwrap();
        }
        let dup = parse_file("b.yaml", "kind: HttpService\nmetadata: {name: web}\n").unwrap().remove(0);
        assert_eq!(
            set.add(dup).unwrap_err().to_string(),
            "duplicate HttpService \"web\": defined in a.yaml#1 and again in b.yaml#1"
        );
        assert_eq!(set.of_kind("HttpService").map(|d| d.name.as_str()).collect::<Vec<_>>(), ["api", "web"]);
        let claimed: BTreeSet<String> = ["Gateway".to_string()].into();
        let e = set.check_claimed(&claimed).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.yaml#2 field kind: no plugin translates kind \"HttpService\" (loaded plugins translate: Gateway)"
        );
        set.check_claimed(&["HttpService".to_string()].into()).unwrap();
    }
}

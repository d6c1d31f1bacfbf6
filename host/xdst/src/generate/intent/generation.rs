//! `metadata.generation` for what the intent API stores (issue 36, item 6), as the Kubernetes
//! API server keeps it: 1 when a document is created, one more each time a write changes
//! anything but its `metadata` and `status`, unchanged otherwise; a generation the client sends
//! is replaced. It is written into the stored document (the `_api/` file, or the store key's
//! value), so it survives restarts and every replica reads the same one. Plugins report it
//! back as `observedGeneration`. A document written by hand keeps the generation it carries
//! (or has none).

use serde_json::Value;

/// `body` (one document, checked) as it is stored: with `metadata.generation` following
/// `previous` (the stored text it replaces, if any). The text is YAML as xdst prints it; the
/// body's comments and layout are not kept.
pub fn stamp(previous: Option<&str>, body: &str) -> Result<String, String> {
    let mut doc = xdst_core::documents::parse_one(body).map_err(|e| e.to_string())?;
    let before = previous.and_then(|p| xdst_core::documents::parse_one(p).ok());
    let generation = match &before {
        Some(old) if content(old) == content(&doc) => generation(old).unwrap_or(1),
        Some(old) => generation(old).unwrap_or(0) + 1,
        None => 1,
    };
    let Some(metadata) = doc.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err("metadata must be a mapping".into());
    };
    metadata.insert("generation".into(), generation.into());
    serde_yaml_ng::to_string(&doc).map_err(|e| e.to_string())
}

/// What a generation counts changes of: everything but `metadata` and `status`.
fn content(doc: &Value) -> Value {
    let mut c = doc.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    c
}

fn generation(doc: &Value) -> Option<i64> {
    doc.get("metadata")?.get("generation")?.as_i64()
}

#[cfg(test)]
mod tests {
    use super::stamp;

    fn generation_of(text: &str) -> i64 {
        let doc = xdst_core::documents::parse_one(text).unwrap();
        doc["metadata"]["generation"].as_i64().unwrap()
    }

    /// Created at 1; a spec change adds one; a label change or the same again does not; a
    /// generation the client sends is replaced.
    #[test]
    fn the_generation_moves_with_the_spec_only() {
        let v1 = stamp(None, "kind: S\nmetadata: {name: a, generation: 40}\nspec: {port: 1}\n").unwrap();
        assert_eq!(generation_of(&v1), 1);
        let same = stamp(Some(&v1), "kind: S\nmetadata: {name: a}\nspec: {port: 1}\n").unwrap();
        assert_eq!(generation_of(&same), 1);
        let labelled = stamp(Some(&same), "kind: S\nmetadata: {name: a, labels: {x: y}}\nspec: {port: 1}\n").unwrap();
        assert_eq!(generation_of(&labelled), 1);
        let v2 = stamp(Some(&labelled), "kind: S\nmetadata: {name: a}\nspec: {port: 2}\n").unwrap();
        assert_eq!(generation_of(&v2), 2);
        let body = stamp(Some(&v2), "apiVersion: v1\nkind: S\nmetadata: {name: a}\ndata: {k: v}\n").unwrap();
        assert_eq!(generation_of(&body), 3, "a body outside spec counts too");
        assert_eq!(generation_of(&stamp(Some("not: [yaml"), "kind: S\nmetadata: {name: a}\n").unwrap()), 1);
    }
}

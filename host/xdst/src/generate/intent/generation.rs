//! `metadata.generation` for what the intent API stores (issue 36, item 6), as the Kubernetes
//! API server keeps it: 1 when a document is created, one more each time a write changes
//! anything but its `metadata` and `status`, unchanged otherwise; a generation the client sends
//! is replaced. It is written into the stored document (the `_api/` file, or the store key's
//! value), so it survives restarts and every replica reads the same one. Plugins report it
//! back as `observedGeneration`. A document written by hand keeps the generation it carries;
//! one without gets it from a [`Counter`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use xdst_core::intent::IntentDocument;

/// The generations xdst keeps for documents that carry none (files written by hand, store
/// values written straight into etcd): one per document id, one more each time its content
/// (everything but `metadata` and `status`) reads differently when its file or key is parsed
/// again. Kept in a JSON file (beside the plugin cache, one per intent source), so a restart
/// continues from it. Each replica keeps its own: replicas that parsed different histories of
/// a document may count differently (the intent API stamps what it writes, which every
/// replica reads alike). A document that goes is forgotten: made again, it starts at 1.
#[derive(Debug, Default)]
pub struct Counter {
    path: Option<PathBuf>,
    /// id -> (a version of its content, its generation).
    table: BTreeMap<String, (String, i64)>,
    dirty: bool,
}

impl Counter {
    /// The counter kept at `path` (read if it is there; a file that does not read starts
    /// afresh, with a warning).
    pub fn load(path: PathBuf) -> Counter {
        let table = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(file = %path.display(), error = %e, "document generations do not read: counting afresh");
                BTreeMap::new()
            }),
            Err(_) => BTreeMap::new(),
        };
        Counter { path: Some(path), table, dirty: false }
    }

    /// Gives `doc` its generation if it carries none.
    pub fn stamp(&mut self, doc: &mut IntentDocument) {
        if doc.json.get("metadata").and_then(|m| m.get("generation")).is_some() {
            return;
        }
        let content = serde_json::to_vec(&content(&doc.json)).unwrap_or_default();
        let version = xdst_core::resource::content_version("xdst.generation", &content);
        let generation = match self.table.get(doc.id().as_ref()) {
            Some((v, g)) if *v == version => *g,
            Some((_, g)) => g + 1,
            None => 1,
        };
        if self.table.get(doc.id().as_ref()) != Some(&(version.clone(), generation)) {
            self.table.insert(doc.id().to_string(), (version, generation));
            self.dirty = true;
        }
        if let Some(m) = doc.json.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("generation".into(), generation.into());
            doc.text = doc.json.to_string().into();
        }
    }

    /// Forgets documents not in `ids`, and writes the table if it changed.
    pub fn keep_only<'a>(&mut self, ids: impl Iterator<Item = &'a str>) {
        let ids: std::collections::BTreeSet<&str> = ids.collect();
        let before = self.table.len();
        self.table.retain(|id, _| ids.contains(id.as_str()));
        self.dirty |= self.table.len() != before;
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        let Some(path) = &self.path else { return };
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
            xdst_core::files::write_atomic(path, serde_json::to_string(&self.table).unwrap_or_default())
        });
        if let Err(e) = written {
            tracing::warn!(file = %path.display(), error = %e, "cannot keep document generations: a restart counts afresh");
        }
    }
}

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
    use super::{Counter, stamp};

    /// A document without a generation gets 1, then one more per content change, kept across
    /// a reload of the table; one that carries a generation keeps it.
    #[test]
    fn the_counter_follows_content_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g/x.json");
        let doc = |spec: &str, extra: &str| {
            let text = format!("kind: S\nmetadata: {{name: a{extra}}}\nspec: {spec}\n");
            xdst_core::intent::parse_file("f.yaml", &text).unwrap().remove(0)
        };
        let generation = |d: &xdst_core::intent::IntentDocument| d.json["metadata"]["generation"].as_i64().unwrap();
        let mut c = Counter::load(path.clone());
        let mut d = doc("{port: 1}", "");
        c.stamp(&mut d);
        assert_eq!(generation(&d), 1);
        assert!(d.text.contains("\"generation\":1"), "the text plugins get carries it");
        let mut d = doc("{port: 2}", ", labels: {x: y}");
        c.stamp(&mut d);
        assert_eq!(generation(&d), 2);
        c.keep_only(["S/a"].into_iter());
        let mut c = Counter::load(path.clone());
        let mut d = doc("{port: 2}", "");
        c.stamp(&mut d);
        assert_eq!(generation(&d), 2, "read back after a restart; labels are metadata");
        let mut d = doc("{port: 3}", ", generation: 7");
        c.stamp(&mut d);
        assert_eq!(generation(&d), 7, "a document's own generation stands");
        c.keep_only(std::iter::empty());
        let mut c = Counter::load(path);
        let mut d = doc("{port: 2}", "");
        c.stamp(&mut d);
        assert_eq!(generation(&d), 1, "gone, then made again: 1");
    }

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

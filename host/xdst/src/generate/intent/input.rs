//! Reading intent: the files of an intent directory, or the documents a store mirror holds,
//! each bounded and parsed once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use xdst_core::intent::{IntentSet, parse_file};

use super::error::GenerationError;
use crate::generate::store::StoreProblem;

/// Parsed intent files, by path, with the text they were parsed from: a file that did not
/// change is not parsed again, and its documents stay the same allocations.
pub type ParseCache = std::collections::HashMap<PathBuf, (String, Vec<Arc<xdst_core::intent::IntentDocument>>)>;

/// Reads every intent document under `dir`, in path order, each file bounded by the default
/// `--max-file-size`. Labels are paths relative to `dir`.
pub fn read_intent(dir: &Path) -> Result<(IntentSet, usize), GenerationError> {
    read_intent_cached(dir, &mut ParseCache::new(), xdst_core::files::DEFAULT_MAX_TEXT_BYTES)
}

/// [`read_intent`], reusing (and refreshing) `cache`, each file at most `max_file_bytes`.
pub fn read_intent_cached(
    dir: &Path,
    cache: &mut ParseCache,
    max_file_bytes: usize,
) -> Result<(IntentSet, usize), GenerationError> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| GenerationError::Dir(d.clone(), e))? {
            let entry = entry.map_err(|e| GenerationError::Dir(d.clone(), e))?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if crate::generate::source::is_resource_file(&path) {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut set = IntentSet::default();
    let mut fresh = ParseCache::new();
    for f in &files {
        let text = xdst_core::files::read_text(f, max_file_bytes).map_err(|e| GenerationError::Read(f.clone(), e))?;
        let docs = match cache.remove(f) {
            Some((old, docs)) if old == text => docs,
            _ => {
                let label = f.strip_prefix(dir).unwrap_or(f).to_string_lossy().into_owned();
                parse_file(&label, &text)?.into_iter().map(Arc::new).collect()
            }
        };
        for doc in &docs {
            set.add_shared(doc.clone())?;
        }
        fresh.insert(f.clone(), (text, docs));
    }
    *cache = fresh;
    Ok((set, files.len()))
}

/// Where intent documents come from.
pub enum IntentInput {
    /// Every `*.yaml|*.yml|*.json` file under a directory.
    Dir(PathBuf),
    /// The mirror of a shared store (`--store`).
    Store(Arc<crate::generate::store::Mirror>),
}

impl IntentInput {
    /// How logs and `/debug/plugins` name it.
    pub fn describe(&self) -> String {
        match self {
            IntentInput::Dir(d) => d.display().to_string(),
            IntentInput::Store(m) => m.state().store,
        }
    }
}

/// A change to one store document, checked before it is written: the key and its new text
/// (None: deleted).
pub type Overlay<'a> = (&'a str, Option<&'a str>);

/// Reads the intent documents a store mirror holds (with `overlay` applied), in key order.
/// Labels are the keys (`intent/Service/web`), the same in every replica.
pub fn read_mirror(
    mirror: &crate::generate::store::Mirror,
    overlay: Option<Overlay<'_>>,
    max_documents: usize,
    max_file_bytes: usize,
    cache: &mut ParseCache,
) -> Result<IntentSet, GenerationError> {
    let held = mirror.documents();
    let mut docs: BTreeMap<String, std::borrow::Cow<'_, str>> = BTreeMap::new();
    let max = max_file_bytes;
    let store = mirror.state().store;
    mirror.check_keys()?;
    for (key, h) in &held {
        if h.value.len() > max {
            let (store, key, bytes) = (store.clone(), key.clone(), h.value.len());
            return Err(StoreProblem::ValueTooLarge { store, key, bytes, max }.into());
        }
        let text = std::str::from_utf8(&h.value)
            .map_err(|_| StoreProblem::ValueNotText { store: store.clone(), key: key.clone() })?;
        docs.insert(key.clone(), text.into());
    }
    if let Some((key, text)) = overlay {
        match text {
            Some(t) => docs.insert(key.to_owned(), t.into()),
            None => docs.remove(key),
        };
    }
    if docs.len() > max_documents {
        return Err(StoreProblem::TooManyDocuments { store, count: docs.len(), max: max_documents }.into());
    }
    let mut set = IntentSet::default();
    let mut fresh = ParseCache::new();
    for (key, text) in docs {
        let path = PathBuf::from(&key);
        let parsed = match cache.get(&path) {
            Some((old, parsed)) if *old == *text => parsed.clone(),
            _ => parse_file(&key, &text)?.into_iter().map(Arc::new).collect(),
        };
        crate::generate::store::check_document_key(&store, &key, &parsed)?;
        for doc in &parsed {
            set.add_shared(doc.clone())?;
        }
        fresh.insert(path, (text.into_owned(), parsed));
    }
    // The overlay's parse is a candidate's: keep the cache to what the mirror holds.
    if overlay.is_none() {
        *cache = fresh;
    }
    Ok(set)
}

//! Reading intent: the files of an intent directory, or the documents a store mirror holds,
//! each bounded and parsed once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use xdst_core::intent::{DuplicateIntent, IntentDocument, IntentSet, parse_file};

use super::error::GenerationError;
use crate::generate::store::StoreProblem;

/// Parsed intent files, by path, with the text they were parsed from: a file that did not
/// change is not parsed again, and its documents stay the same allocations.
pub type ParseCache = std::collections::HashMap<PathBuf, (String, Vec<Arc<xdst_core::intent::IntentDocument>>)>;

/// Reads every intent document under `dir`, in path order, each file bounded by the default
/// `--max-file-size`. Labels are paths relative to `dir`. Any file that does not read fails
/// the whole read (what `xdst translate` wants).
pub fn read_intent(dir: &Path) -> Result<(IntentSet, usize), GenerationError> {
    let read =
        read_intent_cached(dir, &mut ParseCache::new(), xdst_core::files::DEFAULT_MAX_TEXT_BYTES, Mode::Strict, None)?;
    Ok((read.set, read.files))
}

/// Whether a source that does not read fails the whole read, or is held out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Strict,
    /// Each file or store key that does not read is held at its last good parse (or left
    /// out), and the rest is read: what `serve` does.
    Holding,
    /// [`Holding`](Mode::Holding), and each directory directly under the intent directory may
    /// hold documents of the namespace it is named after only (`--namespace-dirs`).
    HoldingBounded,
}

/// The intent read, and the sources held out of it.
#[derive(Debug, Default)]
pub struct Read {
    pub set: IntentSet,
    /// Files (or store keys) read.
    pub files: usize,
    pub held: Vec<HeldSource>,
}

/// A file or store key that does not read (too large, not UTF-8, not YAML, a document that
/// another source already defines): its last good parse is used in its place, or nothing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeldSource {
    /// The file (relative to the intent directory) or the store key.
    pub source: String,
    pub error: String,
    /// Whether its last good parse is used in its place (else it is left out).
    pub last_good: bool,
}

/// [`read_intent`], reusing (and refreshing) `cache`, each file at most `max_file_bytes`.
pub fn read_intent_cached(
    dir: &Path,
    cache: &mut ParseCache,
    max_file_bytes: usize,
    mode: Mode,
    counter: Option<&mut super::generation::Counter>,
) -> Result<Read, GenerationError> {
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
    let sources = files.iter().map(|f| {
        let label = f.strip_prefix(dir).unwrap_or(f).to_string_lossy().into_owned();
        let text = xdst_core::files::read_text(f, max_file_bytes).map_err(|e| GenerationError::Read(f.clone(), e));
        Source { path: f.clone(), label, text: text.map(std::borrow::Cow::Owned) }
    });
    let count = files.len();
    let bounded = mode == Mode::HoldingBounded;
    let check = |label: &str, docs: &[Arc<IntentDocument>]| match bounded {
        true => namespace_bound(label, docs),
        false => Ok(()),
    };
    let (set, fresh, held) = assemble(sources, cache, mode, check, counter)?;
    *cache = fresh;
    Ok(Read { set, files: count, held })
}

/// One file or store key to read.
struct Source<'a> {
    path: PathBuf,
    label: String,
    text: Result<std::borrow::Cow<'a, str>, GenerationError>,
}

/// Parses `sources` (through `cache`) into one set. In [`Mode::Holding`] a source that does not
/// read, or defines a document another one already does, is held at its last good parse (or
/// left out); sources that did not change are added first, so a new or changed source is the
/// one held when two define one document. `check` is asked about each source's documents.
#[allow(clippy::type_complexity, reason = "the set, the next cache and what was held: used twice")]
fn assemble<'a>(
    sources: impl Iterator<Item = Source<'a>>,
    cache: &ParseCache,
    mode: Mode,
    check: impl Fn(&str, &[Arc<IntentDocument>]) -> Result<(), GenerationError>,
    mut counter: Option<&mut super::generation::Counter>,
) -> Result<(IntentSet, ParseCache, Vec<HeldSource>), GenerationError> {
    let mut held = Vec::new();
    let mut fresh = ParseCache::new();
    // (path, label, text, documents, whether they are new since the last read)
    let mut parsed = Vec::new();
    for source in sources {
        let last = cache.get(&source.path);
        let result = source.text.and_then(|text| {
            let docs = match last {
                Some((old, docs)) if *old == *text => return Ok((text.into_owned(), docs.clone(), false)),
                _ => parse_file(&source.label, &text)?
                    .into_iter()
                    .map(|mut d| {
                        // A document without a generation gets the one xdst keeps for it.
                        if let Some(c) = counter.as_deref_mut() {
                            c.stamp(&mut d);
                        }
                        Arc::new(d)
                    })
                    .collect::<Vec<_>>(),
            };
            check(&source.label, &docs)?;
            Ok((text.into_owned(), docs, true))
        });
        match result {
            Ok((text, docs, new)) => parsed.push((source.path, source.label, text, docs, new)),
            Err(e) if mode == Mode::Strict => return Err(e),
            Err(e) => {
                held.push(HeldSource { source: source.label.clone(), error: e.message(), last_good: last.is_some() });
                if let Some((old, docs)) = last {
                    parsed.push((source.path, source.label, old.clone(), docs.clone(), false));
                }
            }
        }
    }
    let mut set = IntentSet::default();
    for new in [false, true] {
        for (path, label, text, docs, _) in parsed.iter().filter(|p| p.4 == new) {
            match add_all(&mut set, docs) {
                Ok(()) => {
                    fresh.insert(path.clone(), (text.clone(), docs.clone()));
                }
                Err(e) if mode == Mode::Strict => return Err(e.into()),
                Err(e) => {
                    let last = cache.get(path).filter(|_| new).filter(|(_, docs)| add_all(&mut set, docs).is_ok());
                    held.push(HeldSource { source: label.clone(), error: e.to_string(), last_good: last.is_some() });
                    if let Some(last) = last {
                        fresh.insert(path.clone(), last.clone());
                    }
                }
            }
        }
    }
    held.sort_by(|a, b| a.source.cmp(&b.source));
    // Only a source parsed again, or one gone, can have taken a document away.
    let changed = parsed.iter().any(|p| p.4) || fresh.len() != cache.len();
    if let Some(c) = counter.filter(|_| changed) {
        c.keep_only(set.documents().map(|d| d.id().as_ref()));
    }
    Ok((set, fresh, held))
}

/// The directory the intent API writes its documents to, checked by token instead.
const API_DIR: &str = "_api";

/// `--namespace-dirs`: a file under `<namespace>/` of the intent directory holds documents of
/// that namespace only; a file directly in the intent directory (the platform's), or under
/// the intent API's directory, any.
fn namespace_bound(label: &str, docs: &[Arc<IntentDocument>]) -> Result<(), GenerationError> {
    let mut parts = Path::new(label).components();
    let (Some(first), Some(_)) = (parts.next(), parts.next()) else { return Ok(()) };
    let dir = first.as_os_str().to_string_lossy();
    if dir == API_DIR {
        return Ok(());
    }
    for doc in docs {
        if doc.namespace.as_deref() != Some(&*dir) {
            let whose = match &doc.namespace {
                Some(ns) => format!("is in namespace {ns}"),
                None => "is cluster-scoped (only files directly in the intent directory may hold one)".to_owned(),
            };
            return Err(GenerationError::Boundary(format!(
                "{label}: {} {whose}, but files under {dir}/ write namespace {dir} only (--namespace-dirs)",
                doc.id()
            )));
        }
    }
    Ok(())
}

/// Adds every one of `docs` to `set`, or none of them.
fn add_all(set: &mut IntentSet, docs: &[Arc<IntentDocument>]) -> Result<(), DuplicateIntent> {
    for (i, doc) in docs.iter().enumerate() {
        if let Err(e) = set.add_shared(doc.clone()) {
            for added in &docs[..i] {
                set.remove_id(added.id());
            }
            return Err(e);
        }
    }
    Ok(())
}

/// The file or store key an origin (`key#index`) names.
pub fn key_of(origin: &str) -> &str {
    origin.rsplit_once('#').map_or(origin, |(k, _)| k)
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
    mode: Mode,
    counter: Option<&mut super::generation::Counter>,
) -> Result<Read, GenerationError> {
    let values = mirror.documents();
    let mut docs: BTreeMap<String, Result<std::borrow::Cow<'_, str>, GenerationError>> = BTreeMap::new();
    let max = max_file_bytes;
    let store = mirror.state().store;
    if mode == Mode::Strict {
        mirror.check_keys()?;
    }
    for (key, h) in &values {
        let text = if h.value.len() > max {
            let (store, key, bytes) = (store.clone(), key.clone(), h.value.len());
            Err(StoreProblem::ValueTooLarge { store, key, bytes, max }.into())
        } else {
            std::str::from_utf8(&h.value)
                .map(std::borrow::Cow::Borrowed)
                .map_err(|_| StoreProblem::ValueNotText { store: store.clone(), key: key.clone() }.into())
        };
        docs.insert(key.clone(), text);
    }
    if let Some((key, text)) = overlay {
        match text {
            Some(t) => docs.insert(key.to_owned(), Ok(t.into())),
            None => docs.remove(key),
        };
    }
    if docs.len() > max_documents {
        return Err(StoreProblem::TooManyDocuments { store, count: docs.len(), max: max_documents }.into());
    }
    let count = docs.len();
    let sources = docs.into_iter().map(|(key, text)| Source { path: PathBuf::from(&key), label: key, text });
    let check = |key: &str, parsed: &[Arc<IntentDocument>]| {
        crate::generate::store::check_document_key(&store, key, parsed).map_err(GenerationError::from)
    };
    let (set, fresh, mut held) = assemble(sources, cache, mode, check, counter)?;
    for key in mirror.keys_not_utf8() {
        let error = StoreProblem::KeyNotUtf8 { store: store.clone(), key: key.clone() }.to_string();
        held.push(HeldSource { source: key, error, last_good: false });
    }
    // The overlay's parse is a candidate's: keep the cache to what the mirror holds.
    if overlay.is_none() {
        *cache = fresh;
    }
    Ok(Read { set, files: count, held })
}

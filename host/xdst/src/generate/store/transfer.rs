//! `xdst store import DIR` and `xdst store export DIR`: move a files setup's intent into a
//! store and back.
//!
//! Import reads DIR exactly as `serve --intent DIR` would (a file that does not parse, or two
//! documents with one id, stops it before anything is written) and writes each document to
//! `<prefix>/intent/<kind>/[<namespace>/]<name>` as YAML, skipping those already there with the
//! same content. Export writes every document of the store to
//! `DIR/<kind>/[<namespace>/]<name>.yaml`.
//!
//! With `--plugins FILE`, import also writes the `plugins:` list of the configuration file
//! FILE to `<prefix>/plugins/list` (checked first: remote sources only, see
//! [`super::plugins`]), and export writes the stored list to FILE.

use std::path::Path;

use super::{Expect, Store, StoreError, write_key};

/// Why an import or an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The directory's intent does not read.
    #[error(transparent)]
    Intent(#[from] crate::generate::intent::GenerationError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Yaml(#[from] serde_yaml_ng::Error),
    /// A document whose kind, namespace or name cannot be part of a key.
    #[error("{origin}: {id} cannot be a store key (kind, namespace and name: letters, digits, '-', '_', '.')")]
    UnsafeDocument { origin: String, id: String },
    /// A document (from `origin`, or the plugins list when None) changed in the store meanwhile.
    #[error("{}{cause}; run the import again", origin.as_ref().map(|o| format!("{o}: ")).unwrap_or_default())]
    Conflict {
        origin: Option<String>,
        #[source]
        cause: StoreError,
    },
    #[error("store key {0} is not intent/KIND/NAME or intent/KIND/NAMESPACE/NAME")]
    KeyShape(String),
    #[error("store key {0} cannot be a file name")]
    KeyNotFileName(String),
    /// The configuration file given for its plugins list cannot be read.
    #[error("{origin}: {cause}")]
    Read {
        origin: String,
        #[source]
        cause: std::io::Error,
    },
    #[error("{origin}: {}", .cause.message)]
    Parse {
        origin: String,
        #[source]
        cause: xdst_core::documents::DocumentError,
    },
    #[error(transparent)]
    List(#[from] super::plugins::ListError),
    /// The store (named) holds no plugins list to export.
    #[error("{0} holds no plugins list")]
    NoList(String),
}

/// What an import or export did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moved {
    pub written: usize,
    pub unchanged: usize,
}

/// Kinds, namespaces and names become keys and file names: keep them to what cannot escape a
/// directory.
fn safe(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with('.')
        && part.len() <= 253
        && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

pub async fn import(store: &impl Store, dir: &Path) -> Result<Moved, TransferError> {
    let (set, files) = crate::generate::intent::read_intent(dir)?;
    let (held, _) = store.list(super::INTENT_DIR).await?;
    let mut moved = Moved::default();
    for doc in set.documents() {
        if !(safe(&doc.kind) && doc.qualified_name().split('/').all(safe)) {
            return Err(TransferError::UnsafeDocument { origin: doc.origin.to_string(), id: doc.id().to_string() });
        }
        // Where the store holds it already (either key), else its kind's key.
        let key = write_key(&doc.kind, doc.qualified_name(), false, |k| held.iter().any(|e| e.key == k));
        let text = serde_yaml_ng::to_string(&doc.json)?;
        let current = held.iter().find(|e| e.key == key);
        if current.is_some_and(|e| e.value == text.as_bytes()) {
            moved.unchanged += 1;
            continue;
        }
        let expect = Expect::of(current.map(|e| e.mod_revision));
        match store.write(&key, Some(text.into_bytes()), expect).await {
            Ok(_) => moved.written += 1,
            Err(cause @ StoreError::Conflict { .. }) => {
                return Err(TransferError::Conflict { origin: Some(doc.origin.to_string()), cause });
            }
            Err(e) => return Err(e.into()),
        }
    }
    tracing::info!(files, documents = set.len(), written = moved.written, unchanged = moved.unchanged, store = %store.describe(), "intent imported");
    Ok(moved)
}

pub async fn export(store: &impl Store, dir: &Path) -> Result<Moved, TransferError> {
    let (entries, revision) = store.list(super::INTENT_DIR).await?;
    let mut moved = Moved::default();
    for e in entries {
        let rel = e.key.strip_prefix(super::INTENT_DIR).unwrap_or(&e.key);
        let parts: Vec<&str> = rel.split('/').collect();
        // KIND/NAME, KIND/NAMESPACE/NAME, or namespaces/NAMESPACE/KIND/NAME.
        if !((2..=3).contains(&parts.len()) || (parts.len() == 4 && parts[0] == "namespaces")) {
            return Err(TransferError::KeyShape(e.key));
        }
        if !parts.iter().all(|p| safe(p)) {
            return Err(TransferError::KeyNotFileName(e.key));
        }
        let (name, dirs) = parts.split_last().expect("two or three parts");
        let path = dirs.iter().fold(dir.to_owned(), |p, d| p.join(d)).join(format!("{name}.yaml"));
        std::fs::create_dir_all(path.parent().expect("has a parent"))?;
        if std::fs::read(&path).is_ok_and(|old| old == e.value) {
            moved.unchanged += 1;
            continue;
        }
        xdst_core::files::write_atomic(&path, &e.value)?;
        moved.written += 1;
    }
    tracing::info!(revision, written = moved.written, unchanged = moved.unchanged, dir = %dir.display(), "intent exported");
    Ok(moved)
}

/// The `plugins:` list of the configuration file `file`, as the store holds it, checked.
pub fn read_plugins_list(file: &Path) -> Result<String, TransferError> {
    let origin = file.display().to_string();
    let text = xdst_core::files::read_text(file, xdst_core::files::DEFAULT_MAX_TEXT_BYTES)
        .map_err(|cause| TransferError::Read { origin: origin.clone(), cause })?;
    let value = xdst_core::documents::parse_one(&text)
        .map_err(|cause| TransferError::Parse { origin: origin.clone(), cause })?;
    let list = serde_yaml_ng::to_string(&serde_json::json!({"plugins": value["plugins"]}))?;
    super::plugins::check_list(&origin, &list)?;
    Ok(list)
}

/// Writes a plugins list (from [`read_plugins_list`]) to the store; whether it changed.
pub async fn import_plugins(store: &impl Store, list: String) -> Result<bool, TransferError> {
    use super::plugins::LIST_KEY;
    let (held, _) = store.list(super::plugins::PLUGINS_DIR).await?;
    let current = held.iter().find(|e| e.key == LIST_KEY);
    if current.is_some_and(|e| e.value == list.as_bytes()) {
        return Ok(false);
    }
    match store.write(LIST_KEY, Some(list.into_bytes()), Expect::of(current.map(|e| e.mod_revision))).await {
        Ok(_) => Ok(true),
        Err(cause @ StoreError::Conflict { .. }) => Err(TransferError::Conflict { origin: None, cause }),
        Err(e) => Err(e.into()),
    }
}

/// Writes the store's plugins list to `file` (a configuration file with only `plugins:`).
pub async fn export_plugins(store: &impl Store, file: &Path) -> Result<(), TransferError> {
    let (held, _) = store.list(super::plugins::PLUGINS_DIR).await?;
    let list = held
        .into_iter()
        .find(|e| e.key == super::plugins::LIST_KEY)
        .ok_or_else(|| TransferError::NoList(store.describe()))?;
    xdst_core::files::write_atomic(file, &list.value)?;
    Ok(())
}

//! The resources directory source: `--resources DIR`.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file directly in DIR is served to every node group.
//! A subdirectory `DIR/<group>/` adds resources for the nodes of that group only (with the
//! default grouping, nodes whose `node.cluster` is `<group>`). Hidden files and editor
//! backups are ignored. The directory is watched; bursts of edits are merged and applied
//! after a short quiet window. A file that does not parse, a duplicate, or a set with a
//! dangling reference is reported (file, document, field) and changes nothing that was
//! serving. If the directory disappears, the last good set keeps serving until it returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tracing::{error, info};
use xdst_core::cache::Publication;
use xdst_core::decode::{DecodeError, decode_file};
use xdst_core::snapshot::{DuplicateResource, Snapshot};

use crate::generate::plane::Plane;
use crate::generate::tree::is_resource_file;
use xdst_serve::metrics::{by_type, label};

/// Why a load failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("resources directory {0}: {1}")]
    Dir(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Duplicate(#[from] DuplicateResource),
    #[error(transparent)]
    Publish(#[from] xdst_core::cache::PublishError),
}

/// The outcome of the latest load, for `/debug/resources` and logs.
#[derive(Default)]
pub struct SourceStatus {
    inner: Mutex<StatusInner>,
}

#[derive(Default, Clone, Serialize)]
pub struct StatusInner {
    pub directory: Option<String>,
    pub loads_ok: u64,
    pub loads_refused: u64,
    /// Unix seconds of the last good load.
    pub last_ok_at: Option<u64>,
    pub last_error: Option<String>,
    pub files: usize,
    pub resources: usize,
}

impl SourceStatus {
    pub fn get(&self) -> StatusInner {
        self.inner.lock().unwrap().clone()
    }
}

/// A node group's name and its subdirectory.
type Groups = Vec<(String, PathBuf)>;

fn list(dir: &Path) -> Result<(Vec<PathBuf>, Groups), LoadError> {
    let mut files = Vec::new();
    let mut groups = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| LoadError::Dir(dir.to_owned(), e))? {
        let entry = entry.map_err(|e| LoadError::Dir(dir.to_owned(), e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') {
                groups.push((name, path));
            }
        } else if is_resource_file(&path) {
            files.push(path);
        }
    }
    files.sort();
    groups.sort();
    Ok((files, groups))
}

fn decode_files(
    root: &Path,
    files: &[PathBuf],
    max_file_bytes: usize,
) -> Result<Vec<xdst_core::resource::Resource>, LoadError> {
    let mut out = Vec::new();
    for f in files {
        let text = xdst_core::files::read_text(f, max_file_bytes).map_err(|e| LoadError::Read(f.clone(), e))?;
        let label = f.strip_prefix(root).unwrap_or(f).to_string_lossy().into_owned();
        out.extend(decode_file(&label, &text)?);
    }
    Ok(out)
}

/// Loads a resources directory into a publication (not yet checked for consistency).
/// Each file is at most `max_file_bytes` (`--max-file-size`).
pub fn load(dir: &Path, max_file_bytes: usize) -> Result<(Publication, usize), LoadError> {
    let (files, groups) = list(dir)?;
    let shared = decode_files(dir, &files, max_file_bytes)?;
    let mut count = files.len();
    let default = Snapshot::from_resources(shared.iter().cloned())?;
    let mut by_group = BTreeMap::new();
    for (name, path) in groups {
        let (group_files, _) = list(&path)?;
        count += group_files.len();
        let own = decode_files(dir, &group_files, max_file_bytes)?;
        let snapshot = Snapshot::from_resources(shared.iter().cloned().chain(own))?;
        by_group.insert(name, snapshot);
    }
    Ok((Publication { default, groups: by_group }, count))
}

/// Loads and publishes once; on failure the previous set keeps serving.
pub fn reload(plane: &Plane, status: &SourceStatus, dir: &Path) -> Result<(), LoadError> {
    let started = Instant::now();
    // What the directory looks like as this load begins: where the watcher starts from, so a
    // change made after this and before the watcher's first look is still a change to it.
    plane.note_read(vec![crate::generate::tree::fingerprint(dir)]);
    let result = load(dir, plane.max_file_bytes).and_then(|(p, files)| {
        let resources = p.default.len();
        let counts: Vec<(String, usize)> = p.default.types().map(|(t, s)| (t.to_string(), s.len())).collect();
        let report = plane.serving.cache.publish(p)?;
        Ok((report, files, resources, counts))
    });
    let mut st = status.inner.lock().unwrap();
    st.directory = Some(dir.display().to_string());
    match result {
        Ok((report, files, resources, counts)) => {
            st.loads_ok += 1;
            plane.changes.record_published(None, &plane.serving.cache, &[]);
            st.last_ok_at = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).ok().map(|d| d.as_secs());
            st.last_error = None;
            st.files = files;
            st.resources = resources;
            plane.metrics.loads.get_or_create(&label("result", "ok")).inc();
            for (t, n) in counts {
                plane.metrics.resources.get_or_create(&by_type(&t)).set(n as i64);
            }
            info!(
                dir = %dir.display(),
                files,
                resources,
                changed_groups = ?report.changed_groups,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "resources loaded"
            );
            Ok(())
        }
        Err(e) => {
            st.loads_refused += 1;
            st.last_error = Some(e.to_string());
            plane.metrics.loads.get_or_create(&label("result", "refused")).inc();
            error!(dir = %dir.display(), error = %e, "resources refused; the last good set keeps serving");
            Err(e)
        }
    }
}

/// Watches the directory and reloads after each burst of changes. Also rescans every
/// `resync` interval, which recovers from lost watches (a directory deleted and created
/// again, filesystems without inotify).
pub async fn watch(plane: Arc<Plane>, status: Arc<SourceStatus>, dir: PathBuf, resync: Duration) {
    let (c, s) = (plane.clone(), status.clone());
    let d = dir.clone();
    let missing = {
        move |gone: &Path| {
            status.inner.lock().unwrap().last_error =
                Some(format!("resources directory {} disappeared", gone.display()))
        }
    };
    let rescan = plane.rescan.clone();
    crate::generate::watcher::watch_dirs(
        plane,
        vec![dir],
        resync,
        Some(rescan),
        None,
        std::sync::Arc::new(move || {
            let _ = reload(&c, &s, &d);
        }),
        missing,
    )
    .await
}

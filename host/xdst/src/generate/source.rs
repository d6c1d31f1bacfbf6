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

use notify::Watcher;
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::{error, info, warn};
use xdst_core::cache::Publication;
use xdst_core::decode::{DecodeError, decode_file};
use xdst_core::snapshot::{DuplicateResource, Snapshot};

use crate::generate::plane::Plane;
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

pub(crate) fn is_resource_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name.starts_with('.') || name.ends_with('~') {
        return false;
    }
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
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

/// A cheap fingerprint of a directory tree: names, sizes, modification and change times of the
/// files that matter (resources, intent, plugins, their settings, signatures and keys). `None`
/// if it is gone. The change time is the kernel's: a tool that sets a modification time back
/// (`touch -d`, `cp -p`) cannot set it back, so a same-size rewrite always shows.
pub fn fingerprint(dir: &Path) -> Option<crate::generate::plane::Fingerprint> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                if !entry.file_name().to_string_lossy().starts_with('.') {
                    stack.push(path.clone());
                }
                out.push((path, 0, None, (0, 0)));
            } else if fingerprinted(&path) {
                use std::os::unix::fs::MetadataExt;
                out.push((path, meta.len(), meta.modified().ok(), (meta.ctime(), meta.ctime_nsec())));
            }
        }
    }
    out.sort();
    Some(out)
}

/// Whether a file counts in a directory's fingerprint: intent and resources, plugins, their
/// settings, signatures and keys.
pub(crate) fn fingerprinted(path: &Path) -> bool {
    is_resource_file(path) || path.extension().is_some_and(|e| e == "wasm" || e == "sig" || e == "pem" || e == "pub")
}

/// However busy the directory, a change is applied at most this long after it was seen.
const MAX_DEBOUNCE: Duration = Duration::from_secs(1);

/// After a first event: waits until `quiet` passes without another one, or until `max`
/// after the first, merging the burst into one reload. False if the channel closed.
async fn debounce(rx: &mut mpsc::UnboundedReceiver<()>, quiet: Duration, max: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let wait = quiet.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        tokio::select! {
            more = rx.recv() => if more.is_none() { return false },
            _ = tokio::time::sleep(wait) => return true,
        }
        if tokio::time::Instant::now() >= deadline {
            return true;
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
    watch_dirs(
        plane,
        vec![dir],
        resync,
        Some(rescan),
        std::sync::Arc::new(move || {
            let _ = reload(&c, &s, &d);
        }),
        missing,
    )
    .await
}

/// Watches directories and calls `reload` (on a blocking thread) after each burst of changes
/// to any of them, on every `resync` tick that finds a change, and whenever `wake` fires.
/// While a directory is missing, `missing` is told once and nothing reloads.
pub async fn watch_dirs(
    plane: Arc<Plane>,
    dirs: Vec<PathBuf>,
    resync: Duration,
    wake: Option<std::sync::Arc<tokio::sync::Notify>>,
    reload: std::sync::Arc<dyn Fn() + Send + Sync>,
    missing: impl Fn(&Path),
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let make_watcher = || -> Option<notify::RecommendedWatcher> {
        let tx = tx.clone();
        let mut w = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            // Opening a file or the directory (as our own rescan does) is not a change;
            // counting it would rescan forever.
            if ev.is_ok_and(|ev| !matches!(ev.kind, notify::EventKind::Access(_))) {
                let _ = tx.send(());
            }
        })
        .ok()?;
        for dir in &dirs {
            w.watch(dir, notify::RecursiveMode::Recursive).ok()?;
        }
        Some(w)
    };
    let fingerprints = || dirs.iter().map(|d| fingerprint(d)).collect::<Vec<_>>();
    let mut watcher = make_watcher();
    if watcher.is_none() {
        warn!(dirs = ?dirs, "cannot watch the directories; rescanning every {resync:?}");
    }
    let mut last = fingerprints();
    let mut missing_reported = false;
    let mut tick = tokio::time::interval(resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = plane.serving.shutdown.clone();
    let never = tokio::sync::Notify::new();
    loop {
        let mut woken = false;
        tokio::select! {
            ev = rx.recv() => {
                if ev.is_none() || !debounce(&mut rx, plane.debounce, MAX_DEBOUNCE).await {
                    return;
                }
            }
            _ = tick.tick() => {}
            _ = wake.as_deref().unwrap_or(&never).notified() => woken = true,
            _ = shutdown.changed() => return,
        }
        let now = fingerprints();
        if now == last && !woken {
            continue;
        }
        // The last generation began reading the directories as they are now (the intent API's
        // write generates at once): no second generation of the same intent.
        if !woken && plane.read_as(&now) {
            last = now;
            continue;
        }
        if let Some(i) = now.iter().position(Option::is_none) {
            if !missing_reported {
                error!(dir = %dirs[i].display(), "directory disappeared; the last good set keeps serving");
                missing(&dirs[i]);
                missing_reported = true;
            }
            watcher = None;
        } else {
            if missing_reported || watcher.is_none() {
                info!(dirs = ?dirs, "watching again");
                watcher = make_watcher();
                missing_reported = false;
            }
            let reload = reload.clone();
            // Decoding and translating is CPU work: keep it off the async workers.
            let _ = tokio::task::spawn_blocking(move || reload()).await;
        }
        last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn a_burst_is_merged_until_a_quiet_window() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let start = Instant::now();
        tokio::spawn(async move {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                tx.send(()).unwrap();
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        assert!(debounce(&mut rx, Duration::from_millis(10), MAX_DEBOUNCE).await);
        // Events at 5, 10 and 15 ms; quiet from 15 ms to 25 ms.
        assert_eq!(start.elapsed(), Duration::from_millis(25));
        assert!(rx.try_recv().is_err(), "the burst was consumed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_never_ending_burst_still_applies_within_the_maximum() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let start = Instant::now();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
        assert!(debounce(&mut rx, Duration::from_millis(10), Duration::from_secs(1)).await);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_channel_stops_the_watcher() {
        let (tx, mut rx) = mpsc::unbounded_channel::<()>();
        drop(tx);
        assert!(!debounce(&mut rx, Duration::from_millis(10), MAX_DEBOUNCE).await);
    }

    /// A hostile edit that keeps a file's size and sets its modification time back still changes
    /// the fingerprint (its change time moves): a watcher that skips a generation because the
    /// last one read the directory as it is now cannot be fooled into skipping it.
    #[test]
    fn a_same_size_rewrite_with_its_time_set_back_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.yaml");
        std::fs::write(&f, "kind: A\n").unwrap();
        let modified = std::fs::metadata(&f).unwrap().modified().unwrap();
        let before = fingerprint(dir.path()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&f, "kind: B\n").unwrap();
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(modified).unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().modified().unwrap(), modified, "the time was set back");
        assert_ne!(fingerprint(dir.path()).unwrap(), before);
    }

    #[test]
    fn resource_files_and_the_rest() {
        for ok in ["a.yaml", "b.yml", "c.json"] {
            assert!(is_resource_file(Path::new(ok)), "{ok}");
        }
        for skip in [".a.yaml.swp", ".hidden.yaml", "a.yaml~", "notes.txt", "a.yaml.tmp"] {
            assert!(!is_resource_file(Path::new(skip)), "{skip}");
        }
    }
}

//! Watching directories: events merged into bursts, each burst's paths looked at one by one
//! (a full walk only on a rescan, a lost event, a watch made again or the resync tick), and a
//! reload asked for when what they hold differs from what the last generation read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use crate::generate::plane::{Fingerprints, Plane};
use crate::generate::tree::{Changes, Dirty, fingerprint, refresh};

/// However busy the directory, a change is applied at most this long after it was seen.
pub const MAX_DEBOUNCE: Duration = Duration::from_secs(1);

/// After a first event: waits until `quiet` passes without another one, or until `max` after
/// the first, merging the burst's changes into `burst`. False if the channel closed.
async fn debounce(
    rx: &mut mpsc::UnboundedReceiver<Changes>,
    burst: &mut Changes,
    quiet: Duration,
    max: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let wait = quiet.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        tokio::select! {
            more = rx.recv() => match more {
                None => return false,
                Some(more) => burst.add(more),
            },
            _ = tokio::time::sleep(wait) => return true,
        }
        if tokio::time::Instant::now() >= deadline {
            return true;
        }
    }
}

/// The watched directories, each as given and as the watcher names paths under it (absolute):
/// an event's path is turned back into the form a walk of the directory gives.
struct Roots(Vec<(PathBuf, PathBuf)>);

impl Roots {
    fn new(dirs: &[PathBuf]) -> Roots {
        let cwd = std::env::current_dir().unwrap_or_default();
        Roots(dirs.iter().map(|d| (d.clone(), cwd.join(d))).collect())
    }

    /// What an event says changed: its paths, each under the directory it is in; everything
    /// when the watcher asks for a rescan (lost events) or names a path under none of them.
    fn changes(&self, ev: &notify::Event) -> Changes {
        if ev.need_rescan() || ev.paths.is_empty() {
            return Changes::Everything;
        }
        let mut paths = std::collections::BTreeSet::new();
        for p in &ev.paths {
            let under = self.0.iter().find_map(|(given, abs)| p.strip_prefix(abs).ok().map(|rel| given.join(rel)));
            match under {
                Some(path) => paths.insert(path),
                None => return Changes::Everything,
            };
        }
        Changes::Paths(paths)
    }
}

/// Each directory's tree brought up to date with `changes`; whether any entry changed.
fn bring_up_to_date(trees: &mut Fingerprints, dirs: &[PathBuf], changes: &Changes) -> bool {
    let paths = match changes {
        Changes::Paths(paths) => paths,
        Changes::Everything => {
            let now: Fingerprints = dirs.iter().map(|d| fingerprint(d)).collect();
            return std::mem::replace(trees, now) != *trees;
        }
    };
    let mut changed = false;
    for (dir, tree) in dirs.iter().zip(trees.iter_mut()) {
        // A directory removed whole: its files' events may come before (or without) its own.
        if tree.is_some() && paths.iter().any(|p| p.starts_with(dir)) && !dir.is_dir() {
            *tree = None;
            changed = true;
        }
    }
    for path in paths {
        for (dir, tree) in dirs.iter().zip(trees.iter_mut()) {
            if !path.starts_with(dir) || tree.is_none() {
                continue;
            }
            match tree.as_mut().and_then(|t| refresh(t, dir, path)) {
                Some(r) => changed |= !r.changed.is_empty(),
                None => {
                    let now = fingerprint(dir);
                    changed |= now != *tree;
                    *tree = now;
                }
            }
        }
    }
    changed
}

/// Watches directories and calls `reload` (on a blocking thread) after each burst of changes
/// to any of them, on every `resync` tick that finds a change, and whenever `wake` fires.
/// While a directory is missing, `missing` is told once and nothing reloads. `dirty`, when
/// given, is told every path the watcher sees change (and "everything" whenever it may have
/// missed one), for a reader that looks only at those.
pub async fn watch_dirs(
    plane: Arc<Plane>,
    dirs: Vec<PathBuf>,
    resync: Duration,
    wake: Option<Arc<tokio::sync::Notify>>,
    dirty: Option<Arc<Dirty>>,
    reload: Arc<dyn Fn() + Send + Sync>,
    missing: impl Fn(&Path),
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Changes>();
    let roots = Arc::new(Roots::new(&dirs));
    let make_watcher = || -> Option<notify::RecommendedWatcher> {
        let (tx, roots, told) = (tx.clone(), roots.clone(), dirty.clone());
        let mut w = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            let changes = match ev {
                // Opening a file or the directory (as our own rescan does) is not a change;
                // counting it would rescan forever.
                Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) => return,
                Ok(ev) => roots.changes(&ev),
                // The watcher failed: it may have missed something.
                Err(_) => Changes::Everything,
            };
            if let Some(d) = &told {
                d.note(changes.clone());
            }
            let _ = tx.send(changes);
        })
        .ok()?;
        for dir in &dirs {
            w.watch(dir, notify::RecursiveMode::Recursive).ok()?;
        }
        // From now on every change has an event; the next read walks once more to start from.
        if let Some(d) = &dirty {
            d.watching(true);
        }
        Some(w)
    };
    let mut watcher = make_watcher();
    if watcher.is_none() {
        warn!(dirs = ?dirs, "cannot watch the directories; rescanning every {resync:?}");
    }
    let walk = |dirs: Vec<PathBuf>| async move {
        tokio::task::spawn_blocking(move || dirs.iter().map(|d| fingerprint(d)).collect::<Fingerprints>())
            .await
            .unwrap_or_default()
    };
    // Where to start from: what the last read saw as it began (a change since is a change to
    // it, whether its event comes after the watch or it came before and only the tick sees it),
    // or, when nothing was read yet, the directories now.
    let saw = plane.read_saw.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let mut last = match saw.filter(|s| s.len() == dirs.len()) {
        Some(saw) => saw,
        None => walk(dirs.clone()).await,
    };
    let mut missing_reported = false;
    let mut tick = tokio::time::interval(resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = plane.serving.shutdown.clone();
    let never = tokio::sync::Notify::new();
    loop {
        let mut woken = false;
        let mut burst = Changes::none();
        tokio::select! {
            ev = rx.recv() => {
                let Some(first) = ev else { return };
                burst.add(first);
                if !debounce(&mut rx, &mut burst, plane.debounce, MAX_DEBOUNCE).await {
                    return;
                }
            }
            _ = tick.tick() => burst = Changes::Everything,
            _ = wake.as_deref().unwrap_or(&never).notified() => woken = true,
            _ = shutdown.changed() => return,
        }
        // Looking at what changed is file system work: off the async workers.
        let (d, b) = (dirs.clone(), burst.clone());
        let (now, changed) = tokio::task::spawn_blocking(move || {
            let changed = bring_up_to_date(&mut last, &d, &b);
            (last, changed)
        })
        .await
        .unwrap_or_else(|_| (dirs.iter().map(|d| fingerprint(d)).collect(), true));
        last = now;
        if !changed && !woken {
            continue;
        }
        // The last generation began reading the directories as they are now (the intent API's
        // write generates at once): no second generation of the same intent.
        // (A directory gone is reported whatever the last read saw.)
        if !woken && last.iter().all(Option::is_some) && plane.read_as(&last, &burst) {
            continue;
        }
        if let Some(d) = dirty.as_ref().filter(|_| burst == Changes::Everything) {
            // A change a walk found (the resync tick): an event was missed.
            d.note(Changes::Everything);
        }
        if let Some(i) = last.iter().position(Option::is_none) {
            if !missing_reported {
                error!(dir = %dirs[i].display(), "directory disappeared; the last good set keeps serving");
                missing(&dirs[i]);
                missing_reported = true;
            }
            watcher = None;
            if let Some(d) = &dirty {
                d.watching(false);
            }
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    fn one(path: &str) -> Changes {
        Changes::Paths([PathBuf::from(path)].into())
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_is_merged_until_a_quiet_window() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let start = Instant::now();
        tokio::spawn(async move {
            for i in 0..3 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                tx.send(one(&format!("{i}.yaml"))).unwrap();
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let mut burst = Changes::none();
        assert!(debounce(&mut rx, &mut burst, Duration::from_millis(10), MAX_DEBOUNCE).await);
        // Events at 5, 10 and 15 ms; quiet from 15 ms to 25 ms.
        assert_eq!(start.elapsed(), Duration::from_millis(25));
        assert!(rx.try_recv().is_err(), "the burst was consumed");
        assert_eq!(burst, Changes::Paths(["0.yaml", "1.yaml", "2.yaml"].map(PathBuf::from).into()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_never_ending_burst_still_applies_within_the_maximum() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let start = Instant::now();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                if tx.send(one("a.yaml")).is_err() {
                    return;
                }
            }
        });
        let mut burst = Changes::none();
        assert!(debounce(&mut rx, &mut burst, Duration::from_millis(10), Duration::from_secs(1)).await);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_channel_stops_the_watcher() {
        let (tx, mut rx) = mpsc::unbounded_channel::<Changes>();
        drop(tx);
        assert!(!debounce(&mut rx, &mut Changes::none(), Duration::from_millis(10), MAX_DEBOUNCE).await);
    }

    /// An event's absolute paths come back in the form the directory was given in; one under
    /// no watched directory, or a rescan, is "everything".
    #[test]
    fn event_paths_in_the_directories_form() {
        let roots = Roots::new(&[PathBuf::from("intent"), PathBuf::from("/abs/plugins")]);
        let cwd = std::env::current_dir().unwrap();
        let ev = |paths: Vec<PathBuf>| notify::Event { paths, ..notify::Event::new(notify::EventKind::Any) };
        assert_eq!(
            roots.changes(&ev(vec![cwd.join("intent/a/b.yaml"), PathBuf::from("/abs/plugins/p.wasm")])),
            Changes::Paths(["intent/a/b.yaml", "/abs/plugins/p.wasm"].map(PathBuf::from).into())
        );
        assert_eq!(roots.changes(&ev(vec![PathBuf::from("/elsewhere/x.yaml")])), Changes::Everything);
        assert_eq!(roots.changes(&ev(vec![])), Changes::Everything);
        let rescan = notify::Event::new(notify::EventKind::Other).set_flag(notify::event::Flag::Rescan);
        assert_eq!(roots.changes(&rescan), Changes::Everything);
    }

    /// A hostile edit that keeps a file's size and sets its modification time back still changes
    /// the tree (its change time moves): a watcher that skips a generation because the last one
    /// read the directory as it is now cannot be fooled into skipping it.
    #[test]
    fn a_same_size_rewrite_with_its_time_set_back_changes_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.yaml");
        std::fs::write(&f, "kind: A\n").unwrap();
        let modified = std::fs::metadata(&f).unwrap().modified().unwrap();
        let dirs = vec![dir.path().to_owned()];
        let mut trees: Fingerprints = vec![fingerprint(dir.path())];
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&f, "kind: B\n").unwrap();
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(modified).unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().modified().unwrap(), modified, "the time was set back");
        let before = trees.clone();
        assert!(bring_up_to_date(&mut trees, &dirs, &Changes::Paths([f.clone()].into())));
        assert_ne!(trees, before);
        assert_eq!(trees, vec![fingerprint(dir.path())], "as a walk finds it");
        assert!(!bring_up_to_date(&mut trees, &dirs, &Changes::Everything), "a walk finds nothing more");
        // Removed whole, and only its file's event seen: the directory is gone all the same.
        std::fs::remove_dir_all(dir.path()).unwrap();
        assert!(bring_up_to_date(&mut trees, &dirs, &Changes::Paths([f].into())));
        assert_eq!(trees, vec![None]);
    }
}

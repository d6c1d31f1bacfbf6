//! What a watched directory holds, as the watcher and the intent read compare it: each file that
//! matters with its size and times, and each directory. Taken whole by a walk, and kept current
//! path by path from what the watcher saw change ([`refresh`]), so a change to one file costs a
//! `stat` of that file, not a walk of every file (issue 50, item 4).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// A file's size, modification time and change time; a directory's is [`DIR`].
pub type Mark = (u64, Option<SystemTime>, (i64, i64));

/// A directory tree's entries that matter, by path (persistent: a copy costs nothing).
pub type Tree = imbl::OrdMap<PathBuf, Mark>;

/// A directory's mark: it is there.
pub const DIR: Mark = (0, None, (0, 0));

/// Whether a file is read as resources or intent: `*.yaml`, `*.yml` or `*.json`, not hidden,
/// not an editor's backup.
pub fn is_resource_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name.starts_with('.') || name.ends_with('~') {
        return false;
    }
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Whether a file counts in a directory's tree: intent and resources, plugins, their settings,
/// signatures and keys.
pub fn fingerprinted(path: &Path) -> bool {
    is_resource_file(path) || path.extension().is_some_and(|e| e == "wasm" || e == "sig" || e == "pem" || e == "pub")
}

/// The mark of a file of `meta` (its own, a link not followed). The change time is the
/// kernel's: a tool that sets a modification time back (`touch -d`, `cp -p`) cannot set it back,
/// so a same-size rewrite always shows.
pub fn mark(meta: &std::fs::Metadata) -> Mark {
    use std::os::unix::fs::MetadataExt;
    (meta.len(), meta.modified().ok(), (meta.ctime(), meta.ctime_nsec()))
}

/// Whether a name is hidden (`.name`): such a directory is listed but not entered.
pub fn hidden(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().starts_with('.')
}

/// The tree of `dir`: names, sizes, modification and change times of the files that matter,
/// and every directory (a hidden one listed, not entered; a link not followed). `None` if it
/// is gone or cannot be listed.
pub fn fingerprint(dir: &Path) -> Option<Tree> {
    let mut tree = Tree::new();
    walk_into(&mut tree, dir, &mut false).ok()?;
    Some(tree)
}

/// Adds what is under `dir` (not `dir` itself) to `tree`; `links` is set when a symbolic link
/// is among them.
pub fn walk_into(tree: &mut Tree, dir: &Path, links: &mut bool) -> std::io::Result<()> {
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)?.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            *links |= meta.file_type().is_symlink();
            if meta.is_dir() {
                if !hidden(&entry.file_name()) {
                    stack.push(path.clone());
                }
                tree.insert(path, DIR);
            } else if fingerprinted(&path) {
                tree.insert(path, mark(&meta));
            }
        }
    }
    Ok(())
}

/// `path` and every entry under it, in `tree`.
pub fn subtree<'a>(tree: &'a Tree, path: &'a Path) -> impl Iterator<Item = (&'a PathBuf, &'a Mark)> + 'a {
    tree.range(path.to_owned()..).take_while(move |(p, _)| p.starts_with(path))
}

/// What [`refresh`] changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// The entries added, changed or gone, in path order.
    pub changed: Vec<PathBuf>,
    /// A symbolic link is among what was looked at: what it points to changes without an
    /// event here, so a reader that trusts events must walk everything instead.
    pub links: bool,
}

/// Brings `tree` (of `root`) up to date at `path`, one the watcher saw change: its entry and,
/// for a directory, everything under it (walked: what was created in a new directory before
/// the watcher watched it has no event of its own). A path whose parent directory the tree
/// does not hold yet is refreshed from its first such ancestor. `None` when `path` is not
/// under `root`, is `root` itself, or cannot be listed: walk everything instead.
pub fn refresh(tree: &mut Tree, root: &Path, path: &Path) -> Option<Refreshed> {
    let rel = path.strip_prefix(root).ok()?;
    let mut parts = rel.components().collect::<Vec<_>>();
    if parts.is_empty() {
        return None;
    }
    // A hidden directory is listed, not entered: a path under one refreshes its entry.
    if let Some(i) = parts.iter().position(|c| hidden(c.as_os_str())) {
        parts.truncate(i + 1);
    }
    // The first ancestor the tree does not hold (a directory made with what it holds).
    let mut at = root.to_owned();
    for part in &parts {
        at.push(part);
        if !tree.contains_key(&at) {
            break;
        }
    }
    let mut now = Tree::new();
    let mut links = false;
    match std::fs::symlink_metadata(&at) {
        Ok(meta) if meta.is_dir() => {
            now.insert(at.clone(), DIR);
            if !at.file_name().is_some_and(hidden) {
                walk_into(&mut now, &at, &mut links).ok()?;
            }
        }
        Ok(meta) => {
            links |= meta.file_type().is_symlink();
            if fingerprinted(&at) {
                now.insert(at.clone(), mark(&meta));
            }
        }
        // Gone (or not to be looked at): nothing there.
        Err(_) => {}
    }
    let was: Vec<(PathBuf, Mark)> = subtree(tree, &at).map(|(p, m)| (p.clone(), *m)).collect();
    let mut changed = BTreeSet::new();
    for (p, m) in &was {
        if now.get(p) != Some(m) {
            changed.insert(p.clone());
            tree.remove(p);
        }
    }
    for (p, m) in now {
        if tree.get(&p) != Some(&m) {
            changed.insert(p.clone());
            tree.insert(p, m);
        }
    }
    Some(Refreshed { changed: changed.into_iter().collect(), links })
}

/// The most paths kept as changed before they count as "everything": past it, a burst of
/// changes (a checkout, a copy of thousands of files) costs one walk, not a set growing without
/// bound.
pub const MAX_CHANGED_PATHS: usize = 4096;

/// What changed since a reader last looked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// Anything may have: walk everything.
    Everything,
    /// These paths (in the form the tree keys them), and nothing else.
    Paths(BTreeSet<PathBuf>),
}

impl Changes {
    /// Adds what `more` says changed, counting as everything past [`MAX_CHANGED_PATHS`].
    pub fn add(&mut self, more: Changes) {
        match (&mut *self, more) {
            (Changes::Everything, _) => {}
            (this, Changes::Everything) => *this = Changes::Everything,
            (Changes::Paths(paths), Changes::Paths(more)) => {
                paths.extend(more);
                if paths.len() > MAX_CHANGED_PATHS {
                    *self = Changes::Everything;
                }
            }
        }
    }

    pub fn none() -> Changes {
        Changes::Paths(BTreeSet::new())
    }
}

/// The paths changed since the intent read last looked, as the watcher saw them: shared by the
/// watcher (which adds) and the read (which takes). It says "everything" until a watcher is
/// watching, and whenever the watcher may have missed something (lost events, a watch made
/// again, a change only a rescan found), so a read without a watcher behind it walks everything.
#[derive(Debug)]
pub struct Dirty {
    inner: Mutex<(Changes, bool)>,
}

impl Default for Dirty {
    fn default() -> Self {
        Dirty { inner: Mutex::new((Changes::Everything, false)) }
    }
}

impl Dirty {
    fn locked(&self) -> std::sync::MutexGuard<'_, (Changes, bool)> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds what changed.
    pub fn note(&self, changes: Changes) {
        self.locked().0.add(changes);
    }

    /// Whether a watcher is watching (from before the next read walks everything): while none
    /// is, every read walks everything.
    pub fn watching(&self, on: bool) {
        let mut inner = self.locked();
        inner.0 = Changes::Everything;
        inner.1 = on;
    }

    /// What changed since the last take (everything while no watcher is watching).
    pub fn take(&self) -> Changes {
        let mut inner = self.locked();
        match inner.1 {
            true => std::mem::replace(&mut inner.0, Changes::none()),
            false => Changes::Everything,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Refreshing the paths a change touched gives the tree a walk gives, whatever the change:
    /// a file written, grown, removed; a directory made with files already in it (no event of
    /// their own), removed with its files, renamed; a hidden directory; a file that does not
    /// count.
    #[test]
    fn refreshing_what_changed_gives_what_a_walk_gives() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("a.yaml"), "a");
        write(&root.join("ns/b.yaml"), "b");
        let mut tree = fingerprint(root).unwrap();
        type Step<'a> = (Box<dyn Fn() + 'a>, Vec<&'static str>);
        let steps: Vec<Step> = vec![
            (Box::new(|| write(&root.join("a.yaml"), "a longer")), vec!["a.yaml"]),
            (Box::new(|| write(&root.join("new/deep/c.yaml"), "c")), vec!["new/deep/c.yaml"]),
            (Box::new(|| write(&root.join("made/d.yaml"), "d")), vec!["made"]),
            (Box::new(|| std::fs::remove_dir_all(root.join("ns")).unwrap()), vec!["ns"]),
            (Box::new(|| std::fs::rename(root.join("made"), root.join("moved")).unwrap()), vec!["made", "moved"]),
            (Box::new(|| write(&root.join(".git/e.yaml"), "e")), vec![".git/e.yaml", ".git"]),
            (Box::new(|| write(&root.join("notes.txt"), "n")), vec!["notes.txt"]),
            (Box::new(|| std::fs::remove_file(root.join("a.yaml")).unwrap()), vec!["a.yaml"]),
        ];
        for (i, (change, paths)) in steps.iter().enumerate() {
            let before = tree.clone();
            change();
            let mut changed = BTreeSet::new();
            for p in paths {
                let r = refresh(&mut tree, root, &root.join(p)).unwrap();
                assert!(!r.links);
                changed.extend(r.changed);
            }
            let walked = fingerprint(root).unwrap();
            assert_eq!(tree, walked, "step {i}: {paths:?}");
            let differ: BTreeSet<PathBuf> =
                before.keys().chain(walked.keys()).filter(|p| before.get(*p) != walked.get(*p)).cloned().collect();
            assert_eq!(changed, differ, "step {i}: what it says changed");
        }
        assert_eq!(refresh(&mut tree, root, root), None, "the root itself: walk everything");
        assert_eq!(refresh(&mut tree, root, Path::new("/elsewhere/x.yaml")), None);
    }

    #[test]
    fn a_link_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut tree = fingerprint(root).unwrap();
        write(&dir.path().join("target/a.yaml"), "a");
        std::os::unix::fs::symlink(root.join("target/a.yaml"), root.join("link.yaml")).unwrap();
        assert!(refresh(&mut tree, root, &root.join("link.yaml")).unwrap().links);
    }

    /// However many paths a hostile burst names, what is kept stays bounded: past the cap it is
    /// "everything" (one walk).
    #[test]
    fn too_many_changed_paths_count_as_everything() {
        let dirty = Dirty::default();
        assert_eq!(dirty.take(), Changes::Everything, "no watcher yet");
        dirty.watching(true);
        assert_eq!(dirty.take(), Changes::Everything, "the first read after a watch is made");
        assert_eq!(dirty.take(), Changes::none());
        dirty.note(Changes::Paths([PathBuf::from("a.yaml")].into()));
        assert_eq!(dirty.take(), Changes::Paths([PathBuf::from("a.yaml")].into()));
        for i in 0..=MAX_CHANGED_PATHS {
            dirty.note(Changes::Paths([PathBuf::from(format!("{i}.yaml"))].into()));
        }
        assert_eq!(dirty.take(), Changes::Everything);
        dirty.watching(false);
        dirty.note(Changes::none());
        assert_eq!(dirty.take(), Changes::Everything, "no watcher: every read walks");
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

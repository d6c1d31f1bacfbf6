//! What each node group was served, kept across restarts (issue 48, point 6; design 016,
//! part 5): a restart that comes up serving a group nothing, where it served that group
//! something before, while something is held or a plugin refused, is not ready.
//!
//! After each good generation the number of resources each group is served is written to a
//! small JSON file beside the plugin cache (`<cache>/../served/<source digest>.json`), when it
//! changes from empty to not or back (not at every generation). At start the file is read
//! once: that is what the groups were served before.

use std::collections::BTreeMap;
use std::path::PathBuf;

use xdst_core::cache::Cache;

/// Node group (`""`: the default) -> how many resources it was served.
type Counts = BTreeMap<String, usize>;

#[derive(Debug, Default)]
pub struct Served {
    path: Option<PathBuf>,
    /// What the file said at start.
    before: Counts,
    /// What it says now (only whether each count is zero matters for rewriting it).
    written: Counts,
}

impl Served {
    /// Reads `path` (if it is there; a file that does not read is taken as nothing served,
    /// with a warning).
    pub fn load(path: PathBuf) -> Served {
        let before: Counts = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(file = %path.display(), error = %e, "what groups were served before does not read");
                Counts::new()
            }),
            Err(_) => Counts::new(),
        };
        Served { path: Some(path), written: before.clone(), before }
    }

    /// A generation published what `cache` serves: the file is written when a group goes from
    /// served nothing to something, or back, or appears.
    pub fn published(&mut self, cache: &Cache) {
        let now = counts(cache);
        let shape = |c: &Counts| c.iter().map(|(g, n)| (g.clone(), *n > 0)).collect::<BTreeMap<_, _>>();
        if shape(&now) == shape(&self.written) {
            return;
        }
        self.written = now;
        let Some(path) = &self.path else { return };
        let text = serde_json::to_string(&self.written).unwrap_or_default();
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| xdst_core::files::write_atomic(path, text));
        if let Err(e) = written {
            tracing::warn!(file = %path.display(), error = %e, "cannot keep what groups are served: a restart will not know");
        }
    }

    /// The groups served something before this start and nothing now, with what they were
    /// served then.
    pub fn emptied(&self, cache: &Cache) -> Vec<(String, usize)> {
        let (default, groups) = cache.sets();
        self.before
            .iter()
            .filter(|(_, n)| **n > 0)
            .filter(|(g, _)| groups.get(g.as_str()).unwrap_or(&default).is_empty())
            .map(|(g, n)| (g.clone(), *n))
            .collect()
    }
}

fn counts(cache: &Cache) -> Counts {
    let (default, groups) = cache.sets();
    let mut out: Counts = groups.iter().map(|(g, s)| (g.clone(), s.len())).collect();
    out.insert(String::new(), default.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdst_core::cache::Publication;
    use xdst_core::snapshot::Snapshot;

    fn publish(cache: &Cache, n: usize) {
        let resources = (0..n).map(|i| {
            // A Listener with nothing set but its name (field 1).
            let name = format!("l{i}");
            let mut body = vec![10, name.len() as u8];
            body.extend(name.as_bytes());
            xdst_core::resource::Resource::new(xdst_core::types::LISTENER, name, &body)
        });
        let default = Snapshot::from_resources(resources).unwrap();
        cache.publish(Publication { default, groups: BTreeMap::new() }).unwrap();
    }

    /// A restart that serves nothing where it served something is told; one that serves
    /// something is not; the file is kept across the restart.
    #[test]
    fn a_group_emptied_since_the_restart_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("served/x.json");
        let cache = Cache::default();
        let mut before = Served::load(path.clone());
        publish(&cache, 2);
        before.published(&cache);
        assert!(before.emptied(&cache).is_empty(), "nothing before this start");
        // Restarted: the first generation serves nothing.
        let after = Served::load(path.clone());
        let fresh = Cache::default();
        publish(&fresh, 0);
        assert_eq!(after.emptied(&fresh), [(String::new(), 2)]);
        publish(&fresh, 1);
        assert!(after.emptied(&fresh).is_empty());
    }
}

//! `metadata.generation` and `metadata.creationTimestamp` for the documents xdst reads, as the
//! Kubernetes API server keeps them (issue 36, item 6; issue 49, item 3).
//!
//! The generation is 1 when a document is created, one more each time a write changes anything
//! but its `metadata` and `status`, unchanged otherwise; a generation the client sends is
//! replaced. The creation time is when xdst first saw the document: "the oldest wins" (Gateway
//! ports, TCPRoutes and UDPRoutes on one listener, TLSRoute hostnames, BackendTLSPolicies,
//! ListenerSets, HTTPRoute rule precedence) reads it, so a document written without one must not
//! count as oldest, and one written with one must not be able to say it is older than it is.
//!
//! A document also gets a `metadata.uid`, derived from its id and creation time.
//!
//! The intent API writes both into the stored document (the `_api/` file, or the store key's
//! value), so they survive restarts and every replica reads the same ones. A document written by
//! hand keeps the generation it carries; one without gets it from a [`Counter`]. Its creation
//! time is the [`Counter`]'s record, unless it comes from the platform's sources (files directly
//! in the intent directory, or anywhere without `--namespace-dirs`; store keys outside
//! `intent/namespaces/`; the intent API with the admin token) and carries one of its own.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use xdst_core::intent::{IntentDocument, creation_timestamp, is_creation_timestamp};

/// What the [`Counter`] keeps of one document.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum Kept {
    /// A version of its content, its generation and when xdst first saw it.
    Now(String, i64, String),
    /// As kept before creation times were (read, then written in the form above).
    Before(String, i64),
}

impl Kept {
    fn version(&self) -> &str {
        match self {
            Kept::Now(v, ..) | Kept::Before(v, _) => v,
        }
    }

    fn generation(&self) -> i64 {
        match self {
            Kept::Now(_, g, _) | Kept::Before(_, g) => *g,
        }
    }

    fn created(&self) -> Option<&str> {
        match self {
            Kept::Now(.., c) => Some(c),
            Kept::Before(..) => None,
        }
    }
}

/// The generations and creation times xdst keeps for the documents it reads (files written by
/// hand, store values written straight into etcd): one of each per document id. The generation
/// moves each time its content (everything but `metadata` and `status`) reads differently when
/// its file or key is parsed again; the creation time is when it was first seen. Kept in a JSON
/// file (beside the plugin cache, one per intent source), so a restart continues from it. Each
/// replica keeps its own: replicas that parsed different histories of a document may count
/// differently (the intent API stamps what it writes, which every replica reads alike; a team's
/// store key takes its creation time from the record every replica reads,
/// [`crate::generate::store::births`]). A document that goes is forgotten: made again, it
/// starts at 1, created anew.
///
/// What changes is appended to a journal beside the table (`<table>.log`, one JSON line a
/// change, synced before the generation goes on), so a change costs in proportion to itself; the
/// table is written whole again once the journal holds as many lines as the table has entries
/// (and at least [`MIN_JOURNAL`]), and the journal emptied.
#[derive(Debug, Default)]
pub struct Counter {
    path: Option<PathBuf>,
    table: BTreeMap<String, Kept>,
    dirty: bool,
    /// Changes not written yet: an id and what is kept of it now (`None`: forgotten).
    pending: Vec<(String, Option<Kept>)>,
    /// Lines in the journal since the table was last written whole.
    journaled: usize,
    /// The next write is of the whole table: the journal cannot be trusted to hold every change
    /// (a line cut by a crash, a write that failed).
    fold: bool,
}

/// The journal is folded into the table no sooner than this many lines.
const MIN_JOURNAL: usize = 256;

/// One journal line.
#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    id: String,
    kept: Option<Kept>,
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
        let mut c = Counter { path: Some(path), table, ..Default::default() };
        c.replay();
        if c.fold {
            c.dirty = true;
            c.write();
        }
        c
    }

    /// The journal beside the table at `path`.
    fn journal(path: &std::path::Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".log");
        PathBuf::from(name)
    }

    /// Applies the journal's lines to the table just read. A line that does not read (the last
    /// one, cut by a crash as it was written) ends the replay, with a warning.
    fn replay(&mut self) {
        let Some(path) = &self.path else { return };
        let journal = Self::journal(path);
        let Ok(text) = std::fs::read_to_string(&journal) else { return };
        for (n, line) in text.lines().enumerate() {
            match serde_json::from_str::<Entry>(line) {
                Ok(Entry { id, kept: Some(k) }) => drop(self.table.insert(id, k)),
                Ok(Entry { id, kept: None }) => drop(self.table.remove(&id)),
                Err(e) => {
                    tracing::warn!(file = %journal.display(), line = n + 1, error = %e, "a document generations journal line does not read: the rest is ignored");
                    self.fold = true;
                    break;
                }
            }
            self.journaled += 1;
        }
    }

    /// Gives `doc` its generation if it carries none, and its creation time: its own when it
    /// comes from one of the platform's sources (`platform`) and carries one, else the time xdst
    /// first saw it. A team's document is marked as one ([`xdst_core::intent::WRITTEN_BY`]).
    /// `known`: its creation time as a record every replica reads says (a team's store key,
    /// [`crate::generate::store::births`]), which stands over this table's.
    pub fn stamp(&mut self, doc: &mut IntentDocument, platform: bool, known: Option<&str>) {
        let metadata = doc.json.get("metadata");
        let carried = metadata.and_then(|m| m.get("generation")).and_then(Value::as_i64);
        let supplied = metadata
            .and_then(|m| m.get("creationTimestamp"))
            .and_then(Value::as_str)
            .filter(|t| platform && is_creation_timestamp(t))
            .map(str::to_owned);
        let content = serde_json::to_vec(&content(&doc.json)).unwrap_or_default();
        let version = xdst_core::resource::content_version("xdst.generation", &content);
        let kept = self.table.get(doc.id().as_ref());
        let generation = match kept {
            Some(k) if k.version() == version => k.generation(),
            Some(k) => k.generation() + 1,
            None => 1,
        };
        let created = supplied
            .or_else(|| known.map(str::to_owned))
            .or_else(|| kept.and_then(Kept::created).map(str::to_owned))
            .unwrap_or_else(|| creation_timestamp(std::time::SystemTime::now()));
        let now = Kept::Now(version, generation, created.clone());
        if kept != Some(&now) {
            self.table.insert(doc.id().to_string(), now.clone());
            self.pending.push((doc.id().to_string(), Some(now)));
            self.dirty = true;
        }
        let uid = uid(doc.id(), &created);
        if let Some(m) = doc.json.get_mut("metadata").and_then(Value::as_object_mut) {
            if carried.is_none() {
                m.insert("generation".into(), generation.into());
            }
            m.insert("uid".into(), uid.into());
            m.insert("creationTimestamp".into(), created.into());
        }
        if !platform {
            xdst_core::intent::mark_written_by_team(&mut doc.json);
        }
        doc.text = doc.json.to_string().into();
    }

    /// Forgets documents not in `ids`, and writes the table if it changed.
    pub fn keep_only<'a>(&mut self, ids: impl Iterator<Item = &'a str>) {
        let ids: std::collections::HashSet<&str> = ids.collect();
        let gone: Vec<String> = self.table.keys().filter(|id| !ids.contains(id.as_str())).cloned().collect();
        self.forget(gone.iter().map(String::as_str));
    }

    /// Forgets each of `gone` (documents that are no longer in the intent), and writes the table
    /// if it changed: [`keep_only`](Self::keep_only) for a read that knows what went, in
    /// proportion to it.
    pub fn forget<'a>(&mut self, gone: impl Iterator<Item = &'a str>) {
        for id in gone {
            if self.table.remove(id).is_some() {
                self.pending.push((id.to_owned(), None));
                self.dirty = true;
            }
        }
        self.write();
    }

    /// Writes what changed: appended to the journal, or the table whole when the journal has
    /// grown as large as the table.
    fn write(&mut self) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let Some(path) = &self.path else { return };
        let journal = Self::journal(path);
        let whole = self.fold || self.journaled + pending.len() >= self.table.len().max(MIN_JOURNAL);
        let written = if whole {
            path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
                xdst_core::files::write_atomic(path, serde_json::to_string(&self.table).unwrap_or_default())?;
                match std::fs::remove_file(&journal) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                }
            })
        } else {
            let mut lines = String::new();
            for (id, kept) in pending.iter() {
                let line = serde_json::to_string(&Entry { id: id.clone(), kept: kept.clone() }).unwrap_or_default();
                lines.push_str(&line);
                lines.push('\n');
            }
            path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
                use std::io::Write as _;
                let mut f = std::fs::File::options().create(true).append(true).open(&journal)?;
                f.write_all(lines.as_bytes())?;
                f.sync_data()
            })
        };
        match written {
            Ok(()) if whole => (self.journaled, self.fold) = (0, false),
            Ok(()) => self.journaled += pending.len(),
            Err(e) => {
                // The table in memory is right; the next write puts it down whole.
                (self.fold, self.dirty) = (true, true);
                tracing::warn!(file = %path.display(), error = %e, "cannot keep document generations: a restart counts afresh");
            }
        }
    }
}

/// A document's `metadata.uid`, as an API server gives each object it creates one: derived from
/// its id and creation time, so every replica and every restart gives the same, and a document
/// made again (created anew) another. (Two made within one second under one id share it.)
fn uid(id: &str, created: &str) -> String {
    let a = xdst_core::resource::content_version("xdst.uid", format!("{id}\0{created}").as_bytes());
    let b = xdst_core::resource::content_version("xdst.uid/2", format!("{id}\0{created}").as_bytes());
    format!("{}-{}-{}-{}-{}", &a[..8], &a[8..12], &a[12..16], &b[..4], &b[4..16])
}

/// `body` (one document, checked) as it is stored: with `metadata.generation` following
/// `previous` (the stored text it replaces, if any), and `metadata.creationTimestamp` kept from
/// `previous`, else now; a creation time the body carries is kept only from the platform
/// (`platform`: the admin token) on a document's first write; a team's document is marked as
/// one ([`xdst_core::intent::WRITTEN_BY`]). The text is YAML as xdst prints
/// it; the body's comments and layout are not kept.
pub fn stamp(previous: Option<&str>, body: &str, platform: bool) -> Result<String, String> {
    let mut doc = xdst_core::documents::parse_one(body).map_err(|e| e.to_string())?;
    let before = previous.and_then(|p| xdst_core::documents::parse_one(p).ok());
    let generation = match &before {
        Some(old) if content(old) == content(&doc) => generation(old).unwrap_or(1),
        Some(old) => generation(old).unwrap_or(0) + 1,
        None => 1,
    };
    let created_of = |d: &Value| {
        d.get("metadata")?.get("creationTimestamp")?.as_str().filter(|t| is_creation_timestamp(t)).map(str::to_owned)
    };
    let created = match &before {
        Some(old) => created_of(old),
        None => created_of(&doc).filter(|_| platform),
    }
    .unwrap_or_else(|| creation_timestamp(std::time::SystemTime::now()));
    let Some(metadata) = doc.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err("metadata must be a mapping".into());
    };
    metadata.insert("generation".into(), generation.into());
    metadata.insert("creationTimestamp".into(), created.into());
    if !platform {
        xdst_core::intent::mark_written_by_team(&mut doc);
    }
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
    use super::{Counter, MIN_JOURNAL, stamp};
    use std::io::Write as _;

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
        c.stamp(&mut d, false, None);
        assert_eq!(generation(&d), 1);
        assert!(d.text.contains("\"generation\":1"), "the text plugins get carries it");
        let mut d = doc("{port: 2}", ", labels: {x: y}");
        c.stamp(&mut d, false, None);
        assert_eq!(generation(&d), 2);
        c.keep_only(["S/a"].into_iter());
        let mut c = Counter::load(path.clone());
        let mut d = doc("{port: 2}", "");
        c.stamp(&mut d, false, None);
        assert_eq!(generation(&d), 2, "read back after a restart; labels are metadata");
        let mut d = doc("{port: 3}", ", generation: 7");
        c.stamp(&mut d, false, None);
        assert_eq!(generation(&d), 7, "a document's own generation stands");
        c.keep_only(std::iter::empty());
        let mut c = Counter::load(path);
        let mut d = doc("{port: 2}", "");
        c.stamp(&mut d, false, None);
        assert_eq!(generation(&d), 1, "gone, then made again: 1");
    }

    /// Issue 50, item 4: a change is appended to the journal (the table is not written whole
    /// for each), a restart reads table and journal back, the journal is folded into the table
    /// once it is as large, and a line cut by a crash loses that line only, and never a later one.
    #[test]
    fn the_counter_journals_changes_and_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g/x.json");
        let journal = Counter::journal(&path);
        let doc = |name: &str, port: u16| {
            let text = format!("kind: S\nmetadata: {{name: {name}}}\nspec: {{port: {port}}}\n");
            xdst_core::intent::parse_file("f.yaml", &text).unwrap().remove(0)
        };
        let stamp = |c: &mut Counter, name: &str, port: u16| {
            let mut d = doc(name, port);
            c.stamp(&mut d, false, None);
            d.json["metadata"]["generation"].as_i64().unwrap()
        };
        let mut c = Counter::load(path.clone());
        for i in 0..10 {
            stamp(&mut c, &format!("d{i}"), 1);
        }
        c.keep_only((0..10).map(|i| format!("S/d{i}")).collect::<Vec<_>>().iter().map(String::as_str));
        assert!(!path.exists() || std::fs::read_to_string(&path).unwrap() == "{}", "not written whole");
        assert_eq!(std::fs::read_to_string(&journal).unwrap().lines().count(), 10);
        assert_eq!(stamp(&mut c, "d3", 2), 2);
        c.forget(["S/d9"].into_iter());
        // A restart reads both back.
        let mut c = Counter::load(path.clone());
        assert_eq!((stamp(&mut c, "d3", 2), stamp(&mut c, "d4", 1), stamp(&mut c, "d9", 5)), (2, 1, 1));
        // A line cut by a crash: that change is lost, the table is written whole at once, and
        // later changes are kept.
        std::fs::OpenOptions::new().append(true).open(&journal).unwrap().write_all(b"{\"id\":\"S/d5\",\"ke").unwrap();
        let mut c = Counter::load(path.clone());
        assert!(!journal.exists(), "folded into the table");
        assert_eq!(stamp(&mut c, "d5", 7), 2);
        c.forget(std::iter::empty());
        let mut c = Counter::load(path.clone());
        assert_eq!(stamp(&mut c, "d5", 7), 2, "a change after the cut line is kept");
        // Enough lines fold the journal into the table.
        for i in 0..MIN_JOURNAL {
            stamp(&mut c, &format!("e{i}"), 1);
        }
        c.forget(std::iter::empty());
        assert!(journal.exists(), "not yet as large as the table");
        for i in 0..MIN_JOURNAL {
            stamp(&mut c, &format!("e{i}"), 2);
        }
        c.forget(std::iter::empty());
        assert!(!journal.exists(), "folded once as large as the table");
        let mut c = Counter::load(path);
        assert_eq!(stamp(&mut c, "e7", 2), 2);
        assert_eq!(stamp(&mut c, "d3", 2), 2);
    }

    fn generation_of(text: &str) -> i64 {
        let doc = xdst_core::documents::parse_one(text).unwrap();
        doc["metadata"]["generation"].as_i64().unwrap()
    }

    /// Created at 1; a spec change adds one; a label change or the same again does not; a
    /// generation the client sends is replaced.
    #[test]
    fn the_generation_moves_with_the_spec_only() {
        let v1 = stamp(None, "kind: S\nmetadata: {name: a, generation: 40}\nspec: {port: 1}\n", false).unwrap();
        assert_eq!(generation_of(&v1), 1);
        let same = stamp(Some(&v1), "kind: S\nmetadata: {name: a}\nspec: {port: 1}\n", false).unwrap();
        assert_eq!(generation_of(&same), 1);
        let labelled =
            stamp(Some(&same), "kind: S\nmetadata: {name: a, labels: {x: y}}\nspec: {port: 1}\n", false).unwrap();
        assert_eq!(generation_of(&labelled), 1);
        let v2 = stamp(Some(&labelled), "kind: S\nmetadata: {name: a}\nspec: {port: 2}\n", false).unwrap();
        assert_eq!(generation_of(&v2), 2);
        let body = stamp(Some(&v2), "apiVersion: v1\nkind: S\nmetadata: {name: a}\ndata: {k: v}\n", false).unwrap();
        assert_eq!(generation_of(&body), 3, "a body outside spec counts too");
        assert_eq!(generation_of(&stamp(Some("not: [yaml"), "kind: S\nmetadata: {name: a}\n", false).unwrap()), 1);
    }

    fn created(d: &xdst_core::intent::IntentDocument) -> String {
        d.json["metadata"]["creationTimestamp"].as_str().unwrap().to_owned()
    }

    /// Issue 49, item 3: a document without a creation time gets the one xdst first saw it at,
    /// kept across changes and restarts; a team's own creation time is replaced, the platform's
    /// kept; gone and made again, it is created anew.
    #[test]
    fn the_counter_stamps_creation_times_a_team_cannot_choose() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.json");
        let doc = |spec: &str, meta: &str| {
            let text = format!("kind: S\nmetadata: {{name: a{meta}}}\nspec: {spec}\n");
            xdst_core::intent::parse_file("f.yaml", &text).unwrap().remove(0)
        };
        let old = ", creationTimestamp: '2001-01-01T00:00:00Z'";
        let mut c = Counter::load(path.clone());
        let mut d = doc("{port: 1}", old);
        c.stamp(&mut d, false, None);
        let first = created(&d);
        assert_ne!(first, "2001-01-01T00:00:00Z", "a team's own creation time is replaced");
        assert_eq!(d.json["metadata"]["annotations"]["xdst.dev/written-by"], "team", "and it is marked a team's");
        assert!(xdst_core::intent::is_creation_timestamp(&first));
        assert!(d.text.contains(&first), "the text plugins get carries it");
        let uid = d.json["metadata"]["uid"].as_str().unwrap().to_owned();
        assert_eq!(uid.len(), 36, "{uid}");
        let mut d = doc("{port: 2}", "");
        c.stamp(&mut d, false, None);
        assert_eq!(created(&d), first, "a change keeps the creation time");
        assert_eq!(d.json["metadata"]["uid"], uid.as_str(), "and the uid");
        c.keep_only(["S/a"].into_iter());

        let mut c = Counter::load(path.clone());
        let mut d = doc("{port: 2}", old);
        c.stamp(&mut d, false, None);
        assert_eq!(created(&d), first, "read back after a restart");
        let mut d = doc("{port: 2}", old);
        c.stamp(&mut d, false, Some("2026-02-02T00:00:00Z"));
        assert_eq!(created(&d), "2026-02-02T00:00:00Z", "a record every replica reads stands over the table");
        let mut d = doc("{port: 2}", "");
        c.stamp(&mut d, false, None);
        assert_eq!(created(&d), "2026-02-02T00:00:00Z", "and is kept");
        c.stamp(&mut doc("{port: 2}", ""), false, Some(&first));
        let mut d = doc("{port: 2}", old);
        c.stamp(&mut d, true, None);
        assert_eq!(created(&d), "2001-01-01T00:00:00Z", "the platform's own creation time stands");
        assert!(d.json["metadata"]["annotations"].is_null(), "the platform's is not marked");
        let mut d = doc("{port: 2}", ", creationTimestamp: 'last week'");
        c.stamp(&mut d, true, None);
        assert_eq!(created(&d), "2001-01-01T00:00:00Z", "one that does not sort as a time is not taken");
        c.keep_only(std::iter::empty());
        let mut d = doc("{port: 2}", "");
        c.stamp(&mut d, false, None);
        assert_ne!(created(&d), "2001-01-01T00:00:00Z", "gone, then made again: created anew");
    }

    /// A table kept before creation times were reads, keeping its generations.
    #[test]
    fn a_table_without_creation_times_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.json");
        let mut d = xdst_core::intent::parse_file("f.yaml", "kind: S\nmetadata: {name: a}\nspec: {port: 1}\n")
            .unwrap()
            .remove(0);
        let version = xdst_core::resource::content_version("xdst.generation", br#"{"kind":"S","spec":{"port":1}}"#);
        std::fs::write(&path, format!(r#"{{"S/a": ["{version}", 5]}}"#)).unwrap();
        let mut c = Counter::load(path);
        c.stamp(&mut d, false, None);
        assert_eq!(d.json["metadata"]["generation"], 5);
        assert!(xdst_core::intent::is_creation_timestamp(&created(&d)));
    }

    fn created_of(text: &str) -> String {
        let doc = xdst_core::documents::parse_one(text).unwrap();
        doc["metadata"]["creationTimestamp"].as_str().unwrap().to_owned()
    }

    /// The intent API stamps the creation time of a document's first write, keeps it on every
    /// later one whatever the body says, and takes one from the body on a first write by the
    /// platform only.
    #[test]
    fn the_api_keeps_the_first_write_s_creation_time() {
        let old = "kind: S\nmetadata: {name: a, creationTimestamp: '2001-01-01T00:00:00Z'}\nspec: {port: 1}\n";
        let team = stamp(None, old, false).unwrap();
        assert_ne!(created_of(&team), "2001-01-01T00:00:00Z");
        let again = stamp(Some(&team), old, true).unwrap();
        assert_eq!(created_of(&again), created_of(&team), "kept from the first write, even against the admin");
        assert_eq!(created_of(&stamp(None, old, true).unwrap()), "2001-01-01T00:00:00Z");
        let marked = |text: &str| xdst_core::documents::parse_one(text).unwrap()["metadata"]["annotations"].clone();
        assert_eq!(marked(&team)["xdst.dev/written-by"], "team", "a team's write is marked");
        assert!(marked(&stamp(None, old, true).unwrap()).is_null());
    }
}

//! Reading intent: the files of an intent directory, or the documents a store mirror holds,
//! each bounded and parsed once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use xdst_core::intent::{DuplicateIntent, IntentDocument, IntentSet, parse_file};

use crate::generate::tree::{Changes, Tree, hidden, refresh};

use super::error::GenerationError;
use crate::generate::store::StoreProblem;

/// Parsed intent files, by path, with the text they were parsed from: a file that did not
/// change is not parsed again, and its documents stay the same allocations. It also keeps the
/// set the last read put together from them, which the next
/// read changes where sources changed instead of putting every document together again; any
/// change to the files through [`DerefMut`](std::ops::DerefMut) drops it.
#[derive(Debug, Default, Clone)]
pub struct ParseCache {
    files: std::collections::HashMap<PathBuf, Parsed>,
    last: Option<IntentSet>,
    /// Whether the read that made this cache started from the last set.
    from_last: bool,
    /// The intent directory as the last read listed it (none for a store).
    listing: Option<Listing>,
    /// What the last read held out: a read that looks only at what changed needs none.
    held: Vec<HeldSource>,
}

impl ParseCache {
    pub fn new() -> ParseCache {
        ParseCache::default()
    }

    pub fn clear(&mut self) {
        self.files.clear();
        self.last = None;
        self.listing = None;
        self.held.clear();
    }

    /// The set the last read put together from these files, if it is still theirs.
    pub fn last_set(&self) -> Option<&IntentSet> {
        self.last.as_ref()
    }
}

impl std::ops::Deref for ParseCache {
    type Target = std::collections::HashMap<PathBuf, Parsed>;
    fn deref(&self) -> &Self::Target {
        &self.files
    }
}

impl std::ops::DerefMut for ParseCache {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.last = None;
        &mut self.files
    }
}

impl<const N: usize> From<[(PathBuf, Parsed); N]> for ParseCache {
    fn from(files: [(PathBuf, Parsed); N]) -> ParseCache {
        ParseCache { files: files.into(), ..ParseCache::default() }
    }
}

/// One file's (or store key's) last parse.
#[derive(Debug, Clone)]
pub struct Parsed {
    text: Arc<str>,
    /// Shared: the cache a read makes carries each unchanged file's documents over as they are.
    docs: Arc<[Arc<IntentDocument>]>,
    /// What the file system said of the file when it was read, if that can vouch for it
    /// next time ([`Stamp::vouches`]); none for a store key or a source held out.
    stamp: Option<Stamp>,
    /// The creation time its documents were stamped with from a record every replica reads
    /// (a team's store key: [`crate::generate::store::births`]); parsed again when it moves.
    created: Option<String>,
}

impl Parsed {
    /// The documents it holds.
    pub fn docs(&self) -> &[Arc<IntentDocument>] {
        &self.docs
    }
}

use xdst_core::files::Stamp;

/// Every cached file is read again next time, whatever its stamp says: an edit through a
/// shared `mmap` moves neither its modification nor its change time (issue 49, item 5), so
/// `--full-reread` and `POST /reload` read every file again.
pub fn forget_stamps(cache: &mut ParseCache) {
    for parsed in cache.values_mut() {
        parsed.stamp = None;
    }
}

/// Reads every intent document under `dir`, in path order, each file bounded by the default
/// `--max-file-size`. Labels are paths relative to `dir`. Any file that does not read fails
/// the whole read (what `xdst translate` wants).
pub fn read_intent(dir: &Path) -> Result<(IntentSet, usize), GenerationError> {
    let max = xdst_core::files::DEFAULT_MAX_TEXT_BYTES;
    let read = read_intent_cached(dir, &mut ParseCache::new(), max, Mode::Strict, None, Changes::Everything)?;
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
    /// The intent directory as the read found it, before reading each file: the fingerprint
    /// the watcher compares with (none for a store).
    pub seen: Option<Tree>,
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
/// `changes`: what the watcher saw change since the last read. Only those paths are looked at
/// (a `stat` each, and a read of those that changed) when the cache holds the last read's
/// listing; otherwise, or for [`Changes::Everything`], the whole directory is walked and every
/// file's stamp taken.
pub fn read_intent_cached(
    dir: &Path,
    cache: &mut ParseCache,
    max_file_bytes: usize,
    mode: Mode,
    mut counter: Option<&mut super::generation::Counter>,
    changes: Changes,
) -> Result<Read, GenerationError> {
    if let Changes::Paths(paths) = &changes
        && let Some(read) = read_changed(dir, cache, paths, max_file_bytes, mode, counter.as_deref_mut())?
    {
        return Ok(read);
    }
    read_walked(dir, cache, max_file_bytes, mode, counter)
}

/// The intent directory as the last read listed it.
#[derive(Debug, Clone)]
struct Listing {
    /// What the watcher compares with ([`crate::generate::tree::fingerprint`]'s, entry for entry).
    tree: Tree,
    /// Intent files in it.
    files: usize,
    /// A symbolic link is in it: what a link points to changes without an event in the
    /// directory, so every read walks and stats everything.
    links: bool,
}

/// Whether a file under `dir` is read as intent: an intent file's name, and no hidden name on
/// the way (a hidden directory is not entered).
fn readable(dir: &Path, path: &Path) -> bool {
    crate::generate::tree::is_resource_file(path)
        && path.strip_prefix(dir).is_ok_and(|rel| !rel.components().any(|c| hidden(c.as_os_str())))
}

/// The read that looks only at `paths` (what the watcher saw change): each one's entry in the
/// last listing refreshed, the intent files that changed read and parsed, and the last set
/// changed where they changed it. `None` when this read must walk instead: no listing, a link
/// in it, a path it cannot place.
fn read_changed(
    dir: &Path,
    cache: &mut ParseCache,
    paths: &std::collections::BTreeSet<PathBuf>,
    max_file_bytes: usize,
    mode: Mode,
    mut counter: Option<&mut super::generation::Counter>,
) -> Result<Option<Read>, GenerationError> {
    let Some(mut listing) = cache.listing.clone().filter(|l| !l.links) else { return Ok(None) };
    let mut changed = std::collections::BTreeSet::new();
    for path in paths.iter().filter(|p| p.starts_with(dir)) {
        match refresh(&mut listing.tree, dir, path) {
            Some(r) if !r.links => changed.extend(r.changed.into_iter().filter(|p| readable(dir, p))),
            _ => return Ok(None),
        }
    }
    let was = cache.listing.as_ref().map(|l| &l.tree);
    for path in &changed {
        let before = was.is_some_and(|t| t.contains_key(path));
        match (before, listing.tree.contains_key(path)) {
            (false, true) => listing.files += 1,
            (true, false) => listing.files -= 1,
            _ => {}
        }
    }
    let bounded = mode == Mode::HoldingBounded;
    let check = bound_check(bounded);
    let (present, gone): (Vec<PathBuf>, Vec<PathBuf>) =
        changed.iter().cloned().partition(|p| listing.tree.contains_key(p));
    if mode != Mode::Strict && cache.held.is_empty() {
        let sources = present.iter().map(|f| source(dir, f, Stamp::now(f), cache, max_file_bytes, bounded)).collect();
        if let Some(set) = assemble_changed(sources, &gone, cache, check, counter.as_deref_mut())? {
            let seen = Some(listing.tree.clone());
            let files = listing.files;
            cache.listing = Some(listing);
            return Ok(Some(Read { set, files, held: Vec::new(), seen }));
        }
    }
    // Put every listed source together (a source held now or before decides with all of them);
    // the ones the watcher saw no change to keep their stamps, and are not opened again.
    let files: Vec<PathBuf> = listing.tree.keys().filter(|p| readable(dir, p)).cloned().collect();
    let sources = files.iter().map(|f| {
        let kept = cache.get(f).and_then(|p| p.stamp).filter(|_| !changed.contains(f));
        source(dir, f, kept.or_else(|| Stamp::now(f)), cache, max_file_bytes, bounded)
    });
    let (set, mut fresh, held) = assemble(sources, cache, mode, check, counter)?;
    let seen = Some(listing.tree.clone());
    fresh.held = held.clone();
    fresh.listing = Some(listing);
    *cache = fresh;
    Ok(Some(Read { set, files: files.len(), held, seen }))
}

/// One file to read: its cached text when `stamp` (taken now, before it is read) vouches for
/// it, else what it holds now.
fn source<'a>(
    dir: &Path,
    f: &Path,
    stamp: Option<Stamp>,
    cache: &ParseCache,
    max_file_bytes: usize,
    bounded: bool,
) -> Source<'a> {
    let label = f.strip_prefix(dir).unwrap_or(f).to_string_lossy().into_owned();
    // A file its stamp vouches for is not opened again.
    let cached = cache.get(f).filter(|p| p.stamp.zip(stamp).is_some_and(|(was, now)| was.vouches(&now)));
    let text = match cached {
        Some(p) => Ok(Text::Unchanged(p.text.clone())),
        None => xdst_core::files::read_text(f, max_file_bytes)
            .map(|t| Text::Read(std::borrow::Cow::Owned(t)))
            .map_err(|e| GenerationError::Read(f.to_owned(), e)),
    };
    // A file that changed while it was read is stamped by what was read first: it is read
    // again next time, as its times differ.
    let platform = !(bounded && namespace_dir(&label).is_some());
    Source { path: f.to_owned(), label, text, stamp, platform, created: None }
}

/// The read that walks the whole directory: lists the files to read, stats each (its stamp,
/// taken before it is read), and makes the listing the watcher compares with, in one walk.
fn read_walked(
    dir: &Path,
    cache: &mut ParseCache,
    max_file_bytes: usize,
    mode: Mode,
    counter: Option<&mut super::generation::Counter>,
) -> Result<Read, GenerationError> {
    let mut files = Vec::new();
    let mut seen = Tree::new();
    let mut links = false;
    let mut stats: std::collections::HashMap<PathBuf, (std::fs::Metadata, std::time::SystemTime)> =
        std::collections::HashMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| GenerationError::Dir(d.clone(), e))? {
            let entry = entry.map_err(|e| GenerationError::Dir(d.clone(), e))?;
            let path = entry.path();
            let dot = hidden(&entry.file_name());
            let read_at = std::time::SystemTime::now();
            // As `tree::fingerprint` lists it (the entry itself, a link not followed).
            if let Ok(meta) = entry.metadata() {
                links |= meta.file_type().is_symlink();
                if meta.is_dir() {
                    seen.insert(path.clone(), crate::generate::tree::DIR);
                } else if crate::generate::tree::fingerprinted(&path) {
                    seen.insert(path.clone(), crate::generate::tree::mark(&meta));
                }
                if meta.is_file() {
                    stats.insert(path.clone(), (meta, read_at));
                }
            }
            if dot {
                continue;
            }
            // The directory entry's type, without a `stat`; a link is followed.
            let is_dir = match entry.file_type() {
                Ok(t) if !t.is_symlink() => t.is_dir(),
                _ => path.is_dir(),
            };
            if is_dir {
                stack.push(path);
            } else if crate::generate::tree::is_resource_file(&path) {
                files.push(path);
            }
        }
    }
    files.sort();
    let bounded = mode == Mode::HoldingBounded;
    let sources = files.iter().map(|f| {
        // The walk's stat of a plain file; a link is followed now.
        let stamp = match stats.remove(f) {
            Some((meta, read_at)) => Some(Stamp::of(&meta, read_at)),
            None => Stamp::now(f),
        };
        source(dir, f, stamp, cache, max_file_bytes, bounded)
    });
    let count = files.len();
    let check = bound_check(bounded);
    let (set, mut fresh, held) = assemble(sources, cache, mode, check, counter)?;
    fresh.held = held.clone();
    fresh.listing = Some(Listing { tree: seen.clone(), files: count, links });
    *cache = fresh;
    Ok(Read { set, files: count, held, seen: Some(seen) })
}

/// One file or store key to read.
struct Source<'a> {
    path: PathBuf,
    label: String,
    text: Result<Text<'a>, GenerationError>,
    /// The file's stamp, taken before it was read.
    stamp: Option<Stamp>,
    /// Whether it is one of the platform's sources, whose documents may carry their own
    /// creation time ([`super::generation`]).
    platform: bool,
    /// Its documents' creation time, as a record every replica reads says (a team's store key).
    created: Option<String>,
}

/// A source's text: read now, or the cached text its stamp vouches for.
enum Text<'a> {
    Read(std::borrow::Cow<'a, str>),
    Unchanged(Arc<str>),
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
    // (path, label, its parse, whether it is new since the last read)
    let mut parsed = Vec::new();
    for mut source in sources {
        let last = cache.get(&source.path);
        let result = parse_source(&mut source, last, &check, counter.as_deref_mut());
        match result {
            Ok((parse, new)) => parsed.push((source.path, source.label, parse, new)),
            Err(e) if mode == Mode::Strict => return Err(e),
            Err(e) => {
                held.push(HeldSource { source: source.label.clone(), error: e.message(), last_good: last.is_some() });
                if let Some(last) = last {
                    // Read again next time: it is the file as it is now that is held out.
                    parsed.push((source.path, source.label, Parsed { stamp: None, ..last.clone() }, false));
                }
            }
        }
    }
    // The last read's set, with what changed sources (and gone ones) defined taken out and what
    // they define now put in: what putting every source together gives (unchanged sources
    // first, then the changed ones; a source that does not read is an unchanged one at its last
    // good parse). A changed source defining what another does falls back to putting every
    // source together, which decides which to hold.
    let quick = (mode != Mode::Strict)
        .then_some(cache.last.as_ref())
        .flatten()
        .and_then(|last| changed_from(last, cache, &parsed));
    if let Some(set) = quick {
        for (path, _, parse, _) in &parsed {
            fresh.files.insert(path.clone(), parse.clone());
        }
        fresh.last = Some(set.clone());
        fresh.from_last = true;
        return finish(set, fresh, held, cache, &parsed, counter);
    }
    let mut set = IntentSet::default();
    for new in [false, true] {
        for (path, label, parse, _) in parsed.iter().filter(|p| p.3 == new) {
            match add_all(&mut set, &parse.docs) {
                Ok(()) => {
                    fresh.insert(path.clone(), parse.clone());
                }
                Err(e) if mode == Mode::Strict => return Err(e.into()),
                Err(e) => {
                    let last = cache.get(path).filter(|_| new).filter(|last| add_all(&mut set, &last.docs).is_ok());
                    held.push(HeldSource { source: label.clone(), error: e.to_string(), last_good: last.is_some() });
                    if let Some(last) = last {
                        fresh.insert(path.clone(), Parsed { stamp: None, ..last.clone() });
                    }
                }
            }
        }
    }
    held.sort_by(|a, b| a.source.cmp(&b.source));
    fresh.last = Some(set.clone());
    finish(set, fresh, held, cache, &parsed, counter)
}

/// A source's parse: its last one when its text is the same (with the stamp it has now), else
/// its text parsed (each document stamped with its generation) and checked; and whether it is
/// new since the last read.
fn parse_source(
    source: &mut Source<'_>,
    last: Option<&Parsed>,
    check: &impl Fn(&str, &[Arc<IntentDocument>]) -> Result<(), GenerationError>,
    counter: Option<&mut super::generation::Counter>,
) -> Result<(Parsed, bool), GenerationError> {
    let (stamp, platform, created) = (source.stamp, source.platform, source.created.clone());
    let text = std::mem::replace(&mut source.text, Ok(Text::Unchanged(Arc::from(""))))?;
    let text = match (text, last) {
        (Text::Unchanged(_), Some(last)) if last.created == created => return Ok((last.clone(), false)),
        (Text::Read(text), Some(last)) if *last.text == *text && last.created == created => {
            return Ok((Parsed { stamp, ..last.clone() }, false));
        }
        (Text::Unchanged(text), _) => text,
        (Text::Read(text), _) => Arc::<str>::from(text),
    };
    let mut counter = counter;
    let docs = parse_file(&source.label, &text)?
        .into_iter()
        .map(|mut d| {
            // A document without a generation gets the one xdst keeps for it.
            if let Some(c) = counter.as_deref_mut() {
                c.stamp(&mut d, platform, created.as_deref());
            }
            Arc::new(d)
        })
        .collect::<Vec<_>>();
    check(&source.label, &docs)?;
    Ok((Parsed { text, docs: docs.into(), stamp, created }, true))
}

/// [`assemble`] for a read that knows which sources changed: `sources` (read again) and `gone`;
/// every other cached source is as it was. The last set with the documents of the sources
/// changed or gone taken out and what they define now put in; the cache updated in place.
/// `None` (the cache untouched) when that alone cannot decide: no last set, a source that does
/// not read or defines what another one does (putting every source together decides which
/// to hold).
fn assemble_changed(
    sources: Vec<Source<'_>>,
    gone: &[PathBuf],
    cache: &mut ParseCache,
    check: impl Fn(&str, &[Arc<IntentDocument>]) -> Result<(), GenerationError>,
    mut counter: Option<&mut super::generation::Counter>,
) -> Result<Option<IntentSet>, GenerationError> {
    let Some(last) = cache.last.as_ref() else { return Ok(None) };
    let mut parsed = Vec::new();
    for mut source in sources {
        let last = cache.get(&source.path);
        match parse_source(&mut source, last, &check, counter.as_deref_mut()) {
            Ok((parse, new)) => parsed.push((source.path, parse, new)),
            Err(_) => return Ok(None),
        }
    }
    let out: Vec<(&PathBuf, &Parsed)> =
        gone.iter().chain(parsed.iter().filter(|p| p.2).map(|p| &p.0)).filter_map(|p| cache.get_key_value(p)).collect();
    let Some(set) = swapped(last, out.iter().copied(), parsed.iter().filter(|p| p.2).map(|p| &p.1)) else {
        return Ok(None);
    };
    let went: Vec<Arc<str>> = out.iter().flat_map(|(_, was)| was.docs.iter().map(|d| d.id().clone())).collect();
    let reparsed = parsed.iter().any(|p| p.2);
    for path in gone {
        cache.files.remove(path);
    }
    for (path, parse, _) in parsed {
        cache.files.insert(path, parse);
    }
    cache.last = Some(set.clone());
    cache.from_last = true;
    // Only the documents of a source parsed again or gone can have gone.
    if let Some(c) = counter.filter(|_| reparsed || !gone.is_empty()) {
        c.forget(went.iter().map(|id| id.as_ref()).filter(|id| set.by_id(id).is_none()));
    }
    Ok(Some(set))
}

/// `last` (what `cache` put together) with the documents of the sources `parsed` anew or no
/// longer has taken out, and those parsed anew put in; none when one of them defines a document
/// another source already does (the whole assembly decides which to hold).
fn changed_from(last: &IntentSet, cache: &ParseCache, parsed: &[(PathBuf, String, Parsed, bool)]) -> Option<IntentSet> {
    let now: std::collections::HashSet<&PathBuf> = parsed.iter().filter(|p| !p.3).map(|p| &p.0).collect();
    let out = cache.iter().filter(|(path, _)| !now.contains(path));
    swapped(last, out, parsed.iter().filter(|p| p.3).map(|p| &p.2))
}

/// `last` with the documents of the sources `out` (as the last read parsed them) taken out and
/// those of `into` put in; none when `last` does not hold one of `out`'s documents as parsed
/// (its set and cache disagree) or one of `into`'s defines what another source does.
fn swapped<'a>(
    last: &IntentSet,
    out: impl Iterator<Item = (&'a PathBuf, &'a Parsed)>,
    into: impl Iterator<Item = &'a Parsed>,
) -> Option<IntentSet> {
    let mut set = last.clone();
    for (path, was) in out {
        for doc in was.docs.iter() {
            if set.by_id(doc.id()).is_some_and(|d| Arc::ptr_eq(d, doc)) {
                set.remove_id(doc.id());
            } else {
                // Not what the last read put in: its set and cache disagree; put it all together.
                tracing::debug!(path = %path.display(), "the last intent set does not hold a cached source");
                return None;
            }
        }
    }
    for parse in into {
        add_all(&mut set, &parse.docs).ok()?;
    }
    Some(set)
}

/// The end of [`assemble`]: the generation counter forgets what went.
#[allow(clippy::type_complexity, reason = "assemble's own result")]
fn finish(
    set: IntentSet,
    fresh: ParseCache,
    held: Vec<HeldSource>,
    cache: &ParseCache,
    parsed: &[(PathBuf, String, Parsed, bool)],
    counter: Option<&mut super::generation::Counter>,
) -> Result<(IntentSet, ParseCache, Vec<HeldSource>), GenerationError> {
    // Only a source parsed again, or one gone, can have taken a document away.
    let changed = parsed.iter().any(|p| p.3) || fresh.len() != cache.len();
    if let Some(c) = counter.filter(|_| changed) {
        if cache.is_empty() {
            // The first read: the table (kept across restarts) may name anything.
            c.keep_only(set.documents().map(|d| d.id().as_ref()));
        } else {
            // Only the documents of a source parsed again or gone can have gone (or, parsed
            // now, been stamped and then held out).
            let reparsed: std::collections::HashSet<&PathBuf> = parsed.iter().filter(|p| p.3).map(|p| &p.0).collect();
            let was = cache
                .iter()
                .filter(|(path, _)| reparsed.contains(path) || !fresh.contains_key(*path))
                .flat_map(|(_, last)| last.docs.iter());
            let now = parsed.iter().filter(|p| p.3).flat_map(|p| p.2.docs.iter());
            let gone = was.chain(now).map(|d| d.id().as_ref()).filter(|id| set.by_id(id).is_none());
            c.forget(gone);
        }
    }
    Ok((set, fresh, held))
}

/// The directory the intent API writes its documents to, checked by token instead.
const API_DIR: &str = "_api";

/// What is asked of each source's documents: with `--namespace-dirs` (`bounded`),
/// [`namespace_bound`]; else nothing.
fn bound_check(bounded: bool) -> impl Fn(&str, &[Arc<IntentDocument>]) -> Result<(), GenerationError> + Copy {
    move |label, docs| match bounded {
        true => namespace_bound(label, docs),
        false => Ok(()),
    }
}

/// `--namespace-dirs`: a file under `<namespace>/` of the intent directory holds documents of
/// that namespace only; a file directly in the intent directory (the platform's), or under
/// the intent API's directory, any.
fn namespace_bound(label: &str, docs: &[Arc<IntentDocument>]) -> Result<(), GenerationError> {
    let Some(dir) = namespace_dir(label) else { return Ok(()) };
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

/// The namespace directory (`--namespace-dirs`) a file (`label`, relative to the intent
/// directory) is under: its first directory, unless that is the intent API's.
fn namespace_dir(label: &str) -> Option<std::borrow::Cow<'_, str>> {
    let mut parts = Path::new(label).components();
    let (Some(first), Some(_)) = (parts.next(), parts.next()) else { return None };
    Some(first.as_os_str().to_string_lossy()).filter(|dir| dir != API_DIR)
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
    let sources = docs.into_iter().map(|(key, text)| Source {
        platform: !crate::generate::store::under_namespace(&key),
        created: crate::generate::store::under_namespace(&key).then(|| mirror.birth(&key)).flatten(),
        path: PathBuf::from(&key),
        label: key,
        text: text.map(Text::Read),
        stamp: None,
    });
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
    Ok(Read { set, files: count, held, seen: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str, port: u16) -> String {
        format!("kind: Service\nmetadata: {{name: {name}}}\nspec: {{port: {port}}}\n")
    }

    fn read(dir: &Path, cache: &mut ParseCache) -> IntentSet {
        read_intent_cached(dir, cache, 1 << 20, Mode::Holding, None, Changes::Everything).unwrap().set
    }

    fn port_of(set: &IntentSet, name: &str) -> String {
        let doc = set.documents().find(|d| d.name == name).unwrap();
        doc.json["spec"]["port"].to_string()
    }

    /// A small deterministic random source: `next(n)` is in `0..n`.
    fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }

    /// As if `secs` had passed since the last read: every file read then has settled.
    fn later(cache: &mut ParseCache, secs: i64) {
        // Stamps only: the set the cache keeps stays.
        for p in cache.files.values_mut() {
            if let Some(s) = &mut p.stamp {
                *s = s.later(std::time::Duration::from_secs(secs as u64));
            }
        }
    }

    /// Issue 50, item 4: the counter forgets only what went, found from the sources parsed
    /// again, not from every document: a document taken out of a file that keeps others, then
    /// made again, starts at generation 1; one left alone keeps its count.
    #[test]
    fn a_document_taken_out_of_a_file_is_forgotten_and_the_rest_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.yaml");
        let mut cache = ParseCache::new();
        let mut counter = super::super::generation::Counter::default();
        let mut read = |text: String| {
            std::fs::write(&a, text).unwrap();
            let set = read_intent_cached(
                dir.path(),
                &mut cache,
                1 << 20,
                Mode::Holding,
                Some(&mut counter),
                Changes::Everything,
            )
            .unwrap()
            .set;
            let generation = |name: &str| {
                set.documents().find(|d| d.name == name).map(|d| d.json["metadata"]["generation"].as_i64().unwrap())
            };
            (generation("x"), generation("y"))
        };
        let both = |x: u16, y: u16| format!("{}---\n{}", service("x", x), service("y", y));
        assert_eq!(read(both(1, 1)), (Some(1), Some(1)));
        assert_eq!(read(both(2, 1)), (Some(2), Some(1)));
        assert_eq!(read(service("y", 2)), (None, Some(2)));
        assert_eq!(read(both(1, 2)), (Some(1), Some(2)), "x made again starts afresh; y keeps its count");
    }

    /// Issue 50, item 4: a read that starts from the last read's set (taking out what changed
    /// sources defined and putting in what they define now) gives what putting every source
    /// together gives, held sources included, over random edits: files written with services
    /// from a small pool (so two files sometimes define one), emptied, broken and removed.
    #[test]
    fn a_read_from_the_last_set_equals_one_from_every_source() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = ParseCache::new();
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut quick, mut steps) = (0, 0);
        for step in 0..400 {
            let file = dir.path().join(format!("f{}.yaml", next(6)));
            match next(20) {
                0 => {
                    let _ = std::fs::remove_file(&file);
                }
                1 => std::fs::write(&file, "kind: [unclosed").unwrap(),
                2 => std::fs::write(&file, "").unwrap(),
                _ => {
                    let docs: Vec<String> =
                        (0..1 + next(3)).map(|_| service(&format!("s{}", next(40)), step)).collect();
                    std::fs::write(&file, docs.join("---\n")).unwrap();
                }
            }
            later(&mut cache, 10);
            let mut full = cache.clone();
            full.last = None;
            let a =
                read_intent_cached(dir.path(), &mut cache, 1 << 20, Mode::Holding, None, Changes::Everything).unwrap();
            let b =
                read_intent_cached(dir.path(), &mut full, 1 << 20, Mode::Holding, None, Changes::Everything).unwrap();
            assert_eq!(a.set, b.set, "step {step}");
            assert_eq!(a.held, b.held, "step {step}");
            let files = |c: &ParseCache| {
                let mut v: Vec<(PathBuf, usize)> = c.iter().map(|(p, x)| (p.clone(), x.docs.len())).collect();
                v.sort();
                v
            };
            assert_eq!(files(&cache), files(&full), "step {step}");
            steps += 1;
            assert!(!full.from_last);
            quick += usize::from(cache.from_last);
        }
        eprintln!("{quick} of {steps} reads started from the last set");
        assert!(quick * 4 > steps, "only {quick} of {steps} reads started from the last set");
    }

    /// Issue 50, item 4: a read told which paths changed (what the watcher saw) gives what a
    /// read that walks every file gives, over random edits: files written (sometimes defining
    /// what another file does, sometimes broken), removed, moved; directories made with files
    /// already in them (only the directory named), removed with their files, renamed; hidden
    /// directories; files that are not intent. Each read is told the paths of one to three steps,
    /// and compared with a read of the same history that walks everything.
    #[test]
    fn a_read_told_what_changed_equals_one_that_walks_everything() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut cache = ParseCache::new();
        read_intent_cached(root, &mut cache, 1 << 20, Mode::Holding, None, Changes::Everything).unwrap();
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let (mut told, mut changed_reads) = (std::collections::BTreeSet::new(), 0);
        for step in 0..600u64 {
            let sub = ["", "a", "b/deep", ".hidden"][next(4) as usize];
            let file = root.join(sub).join(format!("f{}.{}", next(5), ["yaml", "yml", "txt"][next(3) as usize]));
            // Mostly names of their own; now and then one another file may define too.
            let docs = |next: &mut dyn FnMut(u64) -> u64| -> String {
                let name = |next: &mut dyn FnMut(u64) -> u64, i| match next(40) {
                    0 => format!("shared{}", next(4)),
                    _ => format!("s{step}-{}-{i}", next(1 << 30)),
                };
                (0..1 + next(3)).map(|i| service(&name(next, i), step as u16)).collect::<Vec<_>>().join("---\n")
            };
            match next(64) {
                16..=23 => {
                    let _ = std::fs::remove_file(&file);
                    told.insert(file);
                }
                1 => {
                    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                    std::fs::write(&file, "kind: [unclosed").unwrap();
                    told.insert(file);
                }
                2..=5 => {
                    // A directory made with files in it: only the directory is named.
                    let made = root.join(format!("made{}", next(3)));
                    if !made.exists() {
                        std::fs::create_dir_all(made.join("x")).unwrap();
                        std::fs::write(made.join("x/g.yaml"), docs(&mut next)).unwrap();
                        std::fs::write(made.join("h.yaml"), docs(&mut next)).unwrap();
                        told.insert(made);
                    }
                }
                6 | 7 => {
                    let gone = root.join(["a", "b", "made0", "made1"][next(4) as usize]);
                    let _ = std::fs::remove_dir_all(&gone);
                    told.insert(gone);
                }
                8..=11 => {
                    let (from, to) = (root.join(format!("made{}", next(3))), root.join(format!("moved{}", next(2))));
                    if from.exists() && !to.exists() {
                        std::fs::rename(&from, &to).unwrap();
                        told.extend([from, to]);
                    }
                }
                12..=15 => {
                    let to = root.join(format!("renamed{}.yaml", next(3)));
                    if file.exists() && !to.exists() {
                        std::fs::rename(&file, &to).unwrap();
                        told.extend([file, to]);
                    }
                }
                _ => {
                    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                    std::fs::write(&file, docs(&mut next)).unwrap();
                    told.insert(file);
                }
            }
            if next(3) != 0 {
                continue;
            }
            later(&mut cache, 10);
            // The same history (which of two sources of one document came first decides which
            // is held), read by a walk of everything.
            let mut walked = cache.clone();
            (walked.last, walked.listing) = (None, None);
            let changes = Changes::Paths(std::mem::take(&mut told));
            let none_held = cache.held.is_empty();
            let a = read_intent_cached(root, &mut cache, 1 << 20, Mode::Holding, None, changes).unwrap();
            let b = read_intent_cached(root, &mut walked, 1 << 20, Mode::Holding, None, Changes::Everything).unwrap();
            assert_eq!(a.set, b.set, "step {step}");
            assert_eq!(a.held, b.held, "step {step}");
            assert_eq!(a.files, b.files, "step {step}");
            assert_eq!(a.seen, b.seen, "step {step}: the listing the watcher compares with");
            changed_reads += usize::from(none_held && cache.from_last);
        }
        eprintln!("{changed_reads} reads");
        assert!(changed_reads > 40, "only {changed_reads} reads changed the last set in place");
    }

    /// The read's walk makes the fingerprint the watcher compares with, entry for entry: a
    /// generation that read the directory as it is now is not followed by another.
    #[test]
    fn a_read_sees_the_directory_as_the_watcher_fingerprints_it() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["team-a", ".hidden", "team-a/deep"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::write(d.join("a.yaml"), service("a", 1)).unwrap();
        std::fs::write(d.join("team-a/b.yml"), service("b", 2)).unwrap();
        std::fs::write(d.join("team-a/deep/c.json"), r#"{"kind": "Service", "metadata": {"name": "c"}}"#).unwrap();
        std::fs::write(d.join(".hidden/d.yaml"), service("d", 4)).unwrap();
        std::fs::write(d.join(".e.yaml"), service("e", 5)).unwrap();
        std::fs::write(d.join("notes.txt"), "not intent").unwrap();
        std::fs::write(d.join("p.wasm"), b"\0asm").unwrap();
        std::os::unix::fs::symlink(d.join("a.yaml"), d.join("link.yaml")).unwrap();
        let read =
            read_intent_cached(d, &mut ParseCache::new(), 1 << 20, Mode::Holding, None, Changes::Everything).unwrap();
        assert_eq!(read.seen, crate::generate::tree::fingerprint(d));
        assert_eq!(read.files, 4, "a, b, c and the link; nothing hidden");
    }

    #[test]
    fn a_settled_file_is_not_read_again_and_a_changed_one_always_is() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, service("a", 1000)).unwrap();
        std::fs::write(&b, service("b", 2000)).unwrap();
        let mut cache = ParseCache::new();
        read(dir.path(), &mut cache);

        // Just written: a stamp does not vouch for a file that changed within `SETTLED` of
        // its read, so both are read (and compared) again.
        let stamp = cache[&a].stamp.unwrap();
        let now = Stamp::of(&std::fs::metadata(&a).unwrap(), std::time::SystemTime::now());
        assert!(!stamp.vouches(&now));

        later(&mut cache, 10);
        // Settled: `a` is not opened again. Its cached parse (changed here behind its back to
        // define `b` instead) is what the next read serves, which shows the file was not read.
        let mut fake = cache[&a].clone();
        fake.docs = cache[&b].docs.clone();
        let mut faked = ParseCache::from([(a.clone(), fake)]);
        let set =
            read_intent_cached(dir.path(), &mut faked, 1 << 20, Mode::Holding, None, Changes::Everything).unwrap();
        assert_eq!(set.held.len(), 1, "b defined twice: the cached parse of a was used, not the file");

        // Rewritten in place with the same size and its old modification time put back
        // (what `cp -p` or `rsync -t` do): the change time differs, so it is read again.
        later(&mut cache, 10);
        let mtime = std::fs::metadata(&a).unwrap().modified().unwrap();
        std::fs::write(&a, service("a", 1001)).unwrap();
        std::fs::File::options().write(true).open(&a).unwrap().set_modified(mtime).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().modified().unwrap(), mtime);
        let set = read(dir.path(), &mut cache);
        assert_eq!(port_of(&set, "a"), "1001");
        assert_eq!(port_of(&set, "b"), "2000");
    }
}

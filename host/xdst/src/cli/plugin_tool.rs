//! `xdst plugin`: scaffold, build, test and inspect plugins in any supported language.
//!
//! - `new` copies a language's template (`guest-sdk/<lang>/template`, embedded in the binary)
//!   and writes `xdst-plugin.yaml` (name and language) beside it.
//! - `build` runs the language's recipe (`guest-sdk/<lang>/build.sh`, also embedded), which
//!   installs its toolchain into a cache directory when missing; a core module that embeds the
//!   WIT world is then made into a component, and the result is loaded to prove it works.
//! - `test` translates golden cases (`<case>/intent.yaml` in, `expected.yaml` or
//!   `expected-error.yaml` out) exactly as `xdst translate` would, and prints a diff per
//!   resource; `--bless` rewrites the expectations.
//! - `inspect` says what a `.wasm` is: component or core module, contract, name, kinds,
//!   imports, size, sha256.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use xdst_plugin::pipeline::{Configured, PipelineError, translate};
use xdst_plugin::{Failure, Limits, Plugin, Runtime, RuntimeConfig};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/languages.rs"));
}

/// The languages `new` and `build` support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Rust,
    C,
    Js,
    Python,
    Assemblyscript,
    Go,
    Zig,
}

impl Lang {
    pub fn id(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::C => "c",
            Lang::Js => "js",
            Lang::Python => "python",
            Lang::Assemblyscript => "assemblyscript",
            Lang::Go => "go",
            Lang::Zig => "zig",
        }
    }

    /// (recipe, template, the recipe's own files)
    fn embedded(self) -> anyhow::Result<(&'static str, embedded::Files, embedded::Files)> {
        self.all().map(|(recipe, template, beside, _)| (recipe, template, beside))
    }

    /// (recipe, template, the recipe's own files, the incremental template)
    fn all(self) -> anyhow::Result<(&'static str, embedded::Files, embedded::Files, embedded::Files)> {
        embedded::LANGUAGES
            .iter()
            .find(|(id, _, _, _, _)| *id == self.id())
            .map(|(_, recipe, template, beside, incremental)| (*recipe, *template, *beside, *incremental))
            .with_context(|| {
                format!("this xdst was built without the {} template (guest-sdk/{}/)", self.id(), self.id())
            })
    }
}

/// `xdst-plugin.yaml`: what `new` wrote and `build` reads.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    pub lang: Lang,
}

pub const MANIFEST: &str = "xdst-plugin.yaml";

/// Scaffolds plugin `name` in `dir` (default `./name`), in its incremental form (contract 0.4.0)
/// with `incremental`; returns the directory.
pub fn new(
    lang: Lang,
    name: &str,
    kind: Option<&str>,
    dir: Option<&Path>,
    incremental: bool,
) -> anyhow::Result<PathBuf> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if !valid {
        bail!(
            "plugin name {name:?}: use lowercase letters, digits and dashes, starting with a letter (e.g. team-gateway)"
        );
    }
    let kind = kind.map(str::to_owned).unwrap_or_else(|| pascal(name));
    if !kind.chars().next().is_some_and(|c| c.is_ascii_uppercase()) || !kind.chars().all(|c| c.is_ascii_alphanumeric())
    {
        bail!("kind {kind:?}: use PascalCase letters and digits (e.g. TeamGateway)");
    }
    let dir = dir.map(Path::to_owned).unwrap_or_else(|| PathBuf::from(name));
    if dir.exists() && std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} already exists and is not empty; pick another name or --dir", dir.display());
    }
    let (_, plain, _, incremental_files) = lang.all()?;
    // The incremental form is the template with the files of `template-incremental` over it.
    let files: Vec<(&str, &[u8])> = match incremental {
        false => plain.to_vec(),
        true if incremental_files.is_empty() => bail!(
            "there is no incremental template for {} (rust, js and python have one): its toolchain builds against the \
             core-module ABI, which has no changes call; a plugin in {} is called in full, as guest-sdk/README.md says",
            lang.id(),
            lang.id()
        ),
        true => {
            let over = |rel: &str| incremental_files.iter().any(|(r, _)| *r == rel);
            plain.iter().filter(|(rel, _)| !over(rel)).chain(incremental_files).copied().collect()
        }
    };
    for (rel, contents) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).with_context(|| format!("creating {}", path.display()))?;
        let contents = match std::str::from_utf8(contents) {
            Ok(text) => text.replace("{{name}}", name).replace("{{kind}}", &kind).into_bytes(),
            Err(_) => contents.to_vec(),
        };
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        #[cfg(unix)]
        if rel.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    if lang == Lang::Rust || incremental {
        // The contract the plugin builds against: wit-bindgen reads it from the crate, and
        // `build` hands it to the other recipes (the embedded 0.1.0 without one).
        let wit = dir.join("wit/plugin.wit");
        std::fs::create_dir_all(wit.parent().unwrap())?;
        std::fs::write(&wit, if incremental { embedded::WIT_INCREMENTAL } else { embedded::WIT })?;
    }
    let manifest = format!(
        "# Written by `xdst plugin new`; `xdst plugin build` reads it.\n{}",
        serde_yaml_ng::to_string(&Manifest { name: name.to_owned(), lang })?
    );
    std::fs::write(dir.join(MANIFEST), manifest)?;
    Ok(dir)
}

fn pascal(name: &str) -> String {
    name.split('-')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// Where toolchains are installed: `$XDST_TOOLCHAINS`, else `~/.cache/xdst/toolchains`.
pub fn toolchains_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDST_TOOLCHAINS") {
        return d.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("xdst/toolchains")
}

/// Builds the plugin in `dir` into `out` (default `dir/build/<name>.wasm`); returns the file.
pub fn build(dir: &Path, out: Option<&Path>, cache_dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let manifest_path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest_path).with_context(|| {
        format!("reading {} (made by `xdst plugin new`; it names the plugin and its language)", manifest_path.display())
    })?;
    let manifest: Manifest = serde_yaml_ng::from_str(&text).with_context(|| format!("{}", manifest_path.display()))?;
    let out = out.map(Path::to_owned).unwrap_or_else(|| dir.join("build").join(format!("{}.wasm", manifest.name)));
    let out = std::path::absolute(&out)?;
    let (recipe, _, beside) = manifest.lang.embedded()?;
    let work = tempdir("xdst-build")?;
    let recipe_path = work.join("build.sh");
    std::fs::write(&recipe_path, recipe)?;
    for (rel, contents) in beside {
        let path = work.join(rel);
        std::fs::create_dir_all(path.parent().unwrap())?;
        std::fs::write(&path, contents)?;
    }
    // The plugin's own contract (`wit/plugin.wit`, which `new` writes for the incremental
    // form), else 0.1.0.
    let own = std::path::absolute(dir.join("wit"))?;
    let wit = if own.join("plugin.wit").is_file() {
        own
    } else {
        let wit = work.join("wit");
        std::fs::create_dir_all(&wit)?;
        std::fs::write(wit.join("plugin.wit"), embedded::WIT)?;
        wit
    };
    let toolchains = toolchains_dir();
    eprintln!(
        "==> building {} ({}) with guest-sdk/{}/build.sh; toolchains in {}",
        manifest.name,
        manifest.lang.id(),
        manifest.lang.id(),
        toolchains.display()
    );
    let start = Instant::now();
    let status = std::process::Command::new("bash")
        .arg(&recipe_path)
        .arg(dir)
        .arg(&out)
        .env("XDST_WIT", &wit)
        .env("XDST_TOOLCHAINS", &toolchains)
        .status()
        .context("running bash")?;
    let _ = std::fs::remove_dir_all(&work);
    if !status.success() {
        bail!("the {} build of {} failed ({status}); its output is above", manifest.lang.id(), dir.display());
    }
    let bytes = std::fs::read(&out).with_context(|| format!("the build succeeded but wrote no {}", out.display()))?;
    if let Some(component) = xdst_plugin::componentize_embedded(&bytes).map_err(anyhow::Error::msg)? {
        std::fs::write(&out, component)?;
        eprintln!("==> made the core module a component");
    }
    let plugin = load(&out, cache_dir)?;
    eprintln!(
        "==> built {} in {:.1}s: {} {} ({}), kinds {}",
        out.display(),
        start.elapsed().as_secs_f64(),
        plugin.info().name,
        plugin.info().version,
        plugin.abi(),
        plugin.info().kinds.join(", ")
    );
    Ok(out)
}

fn tempdir(prefix: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn load(file: &Path, cache_dir: Option<PathBuf>) -> anyhow::Result<Plugin> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let runtime = Runtime::new(RuntimeConfig { cache_dir, fuel: false, ..Default::default() })?;
    let label = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(runtime.load_any(&label, &bytes, Limits::default())?)
}

/// What `inspect` reports.
#[derive(Debug, Serialize)]
pub struct Inspection {
    pub file: PathBuf,
    /// `component`, `core module (core-module ABI)`, or `core module (WIT world embedded)`.
    pub module: String,
    pub contract: String,
    pub name: String,
    pub version: String,
    pub kinds: Vec<String>,
    pub phase: String,
    pub granularity: String,
    /// It takes changes calls (contract 0.4.0, design 020).
    pub incremental: bool,
    pub imports: Vec<String>,
    pub size: usize,
    pub sha256: String,
}

/// What `xdst plugin push` did.
pub struct Pushed {
    pub name: String,
    pub target: String,
    /// The manifest's digest (what the tag now points at).
    pub manifest: String,
    /// The plugin's own digest (the layer): what `sha256:` pins.
    pub digest: String,
    /// The reference by digest.
    pub pinned: String,
    /// Where the signature went, if signed.
    pub signature: Option<String>,
}

/// Loads the plugin (so only plugins reach the registry) and pushes it as a wasm OCI artifact.
pub fn push(
    file: &Path,
    target: &str,
    insecure: Vec<String>,
    sign: Option<&Path>,
    cache_dir: Option<PathBuf>,
) -> anyhow::Result<Pushed> {
    use crate::generate::plugins::distribution::{Fetcher, OciRef, PushInfo};
    let oci = OciRef::parse(
        target
            .strip_prefix("oci://")
            .ok_or_else(|| anyhow::anyhow!("{target:?}: the target is oci://REGISTRY/REPOSITORY:TAG"))?,
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let plugin = load(file, cache_dir.clone())?;
    let info = PushInfo {
        name: plugin.info().name.clone(),
        version: plugin.info().version.clone(),
        component: !bytes.starts_with(b"\0asm\x01\0\0\0"),
        contract: plugin.contract(),
    };
    let artifacts =
        cache_dir.map(|c| c.join("artifacts")).unwrap_or_else(|| std::env::temp_dir().join("xdst-artifacts"));
    let fetcher = Fetcher::new(artifacts, insecure, None)?;
    // Sign first: a bad key fails before anything is pushed.
    let sig = sign.map(|key| crate::generate::plugins::distribution::sign(key, plugin.digest())).transpose()?;
    let manifest = fetcher.push(&oci, &bytes, &info).with_context(|| format!("pushing {} to {oci}", file.display()))?;
    let signature = match sig {
        Some(sig) => Some(
            fetcher
                .push_signature(&oci, plugin.digest(), format!("{sig}\n").as_bytes())
                .context("pushing the signature")?,
        ),
        None => None,
    };
    Ok(Pushed {
        name: info.name,
        target: oci.to_string(),
        pinned: oci.at(&manifest).to_string(),
        manifest,
        digest: plugin.digest().to_owned(),
        signature,
    })
}

pub fn inspect(file: &Path, cache_dir: Option<PathBuf>) -> anyhow::Result<Inspection> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let plugin = load(file, cache_dir)?;
    let core = bytes.get(4..8) == Some(&[1, 0, 0, 0]);
    let version = plugin.contract();
    let (module, contract) = match (core, plugin.abi()) {
        (false, _) => ("component", format!("xdst:plugin@{version} (WIT)")),
        (true, xdst_plugin::Abi::CoreModule) => {
            ("core module (core-module ABI)", format!("xdst_plugin_abi_{} (proto/core-abi)", version.replace('.', "_")))
        }
        (true, _) => (
            "core module with the WIT world embedded (made a component at load)",
            format!("xdst:plugin@{version} (WIT)"),
        ),
    };
    let info = plugin.info();
    Ok(Inspection {
        file: file.to_owned(),
        module: module.into(),
        contract,
        name: info.name.clone(),
        version: info.version.clone(),
        kinds: info.kinds.clone(),
        phase: match info.phase {
            xdst_plugin::wit::Phase::Translate => "translate".into(),
            xdst_plugin::wit::Phase::Patch => "patch".into(),
        },
        granularity: match info.granularity {
            xdst_plugin::wit::Granularity::PerDocument => "per-document".into(),
            xdst_plugin::wit::Granularity::WholeSet => "whole-set".into(),
        },
        incremental: plugin.incremental(),
        imports: plugin.imports().to_vec(),
        size: bytes.len(),
        sha256: plugin.digest().trim_start_matches("sha256:").to_owned(),
    })
}

impl std::fmt::Display for Inspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = if self.size >= 1 << 20 {
            format!("{:.1} MiB", self.size as f64 / (1 << 20) as f64)
        } else {
            format!("{:.1} KiB", self.size as f64 / 1024.0)
        };
        writeln!(f, "file:        {}", self.file.display())?;
        writeln!(f, "module:      {}", self.module)?;
        writeln!(f, "contract:    {}", self.contract)?;
        writeln!(f, "name:        {}", self.name)?;
        writeln!(f, "version:     {}", self.version)?;
        writeln!(f, "kinds:       {}", self.kinds.join(", "))?;
        writeln!(f, "phase:       {}", self.phase)?;
        writeln!(f, "granularity: {}", self.granularity)?;
        writeln!(f, "incremental: {}", if self.incremental { "yes (changes calls)" } else { "no" })?;
        writeln!(f, "imports:     {}", if self.imports.is_empty() { "none".into() } else { self.imports.join(", ") })?;
        writeln!(f, "size:        {size} ({} bytes)", self.size)?;
        writeln!(f, "sha256:      {}", self.sha256)
    }
}

/// One golden case's outcome.
#[derive(Debug)]
pub struct CaseResult {
    pub case: String,
    /// `None` when it passed (or was blessed); else what differs, readable.
    pub failure: Option<String>,
}

/// `expected-error.yaml`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct ExpectedError {
    document: Option<String>,
    field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// Runs every case under `cases` (each a directory with `intent.yaml`, or other intent files)
/// through `plugin`, as `xdst translate` would.
pub fn test(plugin: &Path, cases: &Path, bless: bool, cache_dir: Option<PathBuf>) -> anyhow::Result<Vec<CaseResult>> {
    let loaded = Arc::new(load(plugin, cache_dir)?);
    test_with(loaded, cases, bless)
}

/// [`test`] with a plugin already loaded.
pub fn test_with(plugin: Arc<Plugin>, cases: &Path, bless: bool) -> anyhow::Result<Vec<CaseResult>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases)
        .with_context(|| format!("reading the cases directory {}", cases.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        bail!("{} has no cases (one directory per case, each with intent.yaml and expected.yaml)", cases.display());
    }
    let configured = [Configured::new(plugin, "null")];
    let mut results = Vec::new();
    for dir in dirs {
        let case = dir.file_name().unwrap().to_string_lossy().into_owned();
        let failure = run_case(&configured, &dir, bless).with_context(|| format!("case {case}"))?;
        results.push(CaseResult { case, failure });
    }
    Ok(results)
}

fn run_case(plugins: &[Configured], dir: &Path, bless: bool) -> anyhow::Result<Option<String>> {
    // The intent: every YAML or JSON file but the expectations.
    let work = tempdir("xdst-case")?;
    let mut n = 0;
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("expected")
            && (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"))
        {
            std::fs::copy(e.path(), work.join(&name))?;
            n += 1;
        }
    }
    let outcome = (|| {
        if n == 0 {
            bail!("{} has no intent file (intent.yaml)", dir.display());
        }
        let (set, _) = crate::generate::intent::read_intent(&work)?;
        Ok(match translate(plugins, &set, "") {
            Ok(out) => match crate::cli::translate::inconsistency(&out.snapshot, "") {
                None => Ok(crate::cli::translate::render_yaml(&out.snapshot)),
                Some(message) => Err(ExpectedError { document: None, field: None, message: Some(message) }),
            },
            Err(e) => Err(expected_error(&e)),
        })
    })();
    let _ = std::fs::remove_dir_all(&work);
    let actual = outcome?;
    let (ok_file, err_file) = (dir.join("expected.yaml"), dir.join("expected-error.yaml"));
    if bless {
        let _ = std::fs::remove_file(&ok_file);
        let _ = std::fs::remove_file(&err_file);
        match &actual {
            Ok(text) => std::fs::write(&ok_file, text)?,
            Err(e) => std::fs::write(&err_file, serde_yaml_ng::to_string(e)?)?,
        }
        return Ok(None);
    }
    if ok_file.exists() {
        let expected = std::fs::read_to_string(&ok_file)?;
        return Ok(match actual {
            Ok(text) => diff_resources(&expected, &text),
            Err(e) => Some(format!("expected resources, but the translation failed: {}", describe_error(&e))),
        });
    }
    if err_file.exists() {
        let want: ExpectedError = serde_yaml_ng::from_str(&std::fs::read_to_string(&err_file)?)
            .with_context(|| format!("{}", err_file.display()))?;
        return Ok(match actual {
            Ok(_) => Some(format!("expected the translation to fail ({}), but it succeeded", describe_error(&want))),
            Err(got) => {
                let same = got.document == want.document
                    && got.field == want.field
                    && want.message.as_ref().is_none_or(|m| got.message.as_ref() == Some(m));
                (!same).then(|| {
                    format!("expected the failure {}\n  but got {}", describe_error(&want), describe_error(&got))
                })
            }
        });
    }
    bail!("{} has neither expected.yaml nor expected-error.yaml (run with --bless to write them)", dir.display())
}

fn expected_error(e: &PipelineError) -> ExpectedError {
    match e {
        PipelineError::Plugin { error, .. } => match &error.failure {
            Failure::Reported { message, document, field } => {
                ExpectedError { document: document.clone(), field: field.clone(), message: Some(message.clone()) }
            }
            _ => ExpectedError { document: None, field: None, message: Some(error.to_string()) },
        },
        PipelineError::InvalidResource(r) => {
            ExpectedError { document: r.document.clone(), field: r.field.clone(), message: Some(e.to_string()) }
        }
        other => ExpectedError { document: None, field: None, message: Some(other.to_string()) },
    }
}

fn describe_error(e: &ExpectedError) -> String {
    let mut s = String::new();
    if let Some(d) = &e.document {
        write!(s, "at {d}").unwrap();
    }
    if let Some(f) = &e.field {
        write!(s, " field {f}").unwrap();
    }
    if let Some(m) = &e.message {
        write!(s, "{}{m}", if s.is_empty() { "" } else { ": " }).unwrap();
    }
    s
}

/// Compares two renderings resource by resource; `None` when equal.
pub fn diff_resources(expected: &str, actual: &str) -> Option<String> {
    if expected == actual {
        return None;
    }
    let (want, got) = (split_resources(expected), split_resources(actual));
    let mut out = String::new();
    for (key, text) in &want {
        match got.get(key) {
            None => writeln!(out, "  missing {key}").unwrap(),
            Some(other) if other != text => {
                writeln!(out, "  {key} differs (- expected, + actual):").unwrap();
                out.push_str(&line_diff(text, other));
            }
            Some(_) => {}
        }
    }
    for key in got.keys().filter(|k| !want.contains_key(*k)) {
        writeln!(out, "  unexpected {key}").unwrap();
    }
    if out.is_empty() {
        out.push_str("  the same resources, in another order or layout\n");
    }
    Some(out)
}

/// `type.googleapis.com/envoy.config.cluster.v3.Cluster` -> `Cluster`.
pub fn message_name(type_url: &str) -> &str {
    type_url.rsplit('.').next().unwrap_or(type_url)
}

/// `Cluster web` -> its YAML.
fn split_resources(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for doc in text.split("---\n").filter(|d| !d.trim().is_empty()) {
        let value = xdst_core::documents::parse_one(doc).unwrap_or_default();
        let ty = value.get("@type").and_then(|v| v.as_str()).unwrap_or("?");
        let name = value.get("name").or_else(|| value.get("cluster_name")).and_then(|v| v.as_str()).unwrap_or("?");
        out.insert(format!("{} {name}", message_name(ty)), doc.to_owned());
    }
    out
}

/// A unified-style diff of two short texts (longest common subsequence of lines), with two
/// lines of context.
fn line_diff(a: &str, b: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    let near = |k: usize| ops[k.saturating_sub(2)..(k + 3).min(ops.len())].iter().any(|(c, _)| *c != ' ');
    let mut out = String::new();
    let mut skipped = false;
    for (k, (c, line)) in ops.iter().enumerate() {
        if near(k) {
            if skipped {
                out.push_str("    ...\n");
                skipped = false;
            }
            writeln!(out, "    {c} {line}").unwrap();
        } else {
            skipped = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_name_the_resource_and_show_the_changed_lines() {
        let a = "---\n'@type': type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: web\ntype: EDS\n---\n\
            '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: gone\n";
        let b = "---\n'@type': type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: web\ntype: STATIC\n---\n\
            '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: new\n";
        let d = diff_resources(a, b).unwrap();
        assert!(d.contains("Cluster web differs"), "{d}");
        assert!(d.contains("- type: EDS") && d.contains("+ type: STATIC"), "{d}");
        assert!(d.contains("missing Cluster gone") && d.contains("unexpected Cluster new"), "{d}");
        assert_eq!(diff_resources(a, a), None);
    }

    #[test]
    fn names_and_kinds_are_checked() {
        assert_eq!(pascal("team-gateway"), "TeamGateway");
        let dir = std::env::temp_dir().join(format!("xdst-new-{}", std::process::id()));
        for bad in ["Team", "9lives", "a_b", "x-"] {
            assert!(
                new(Lang::Rust, bad, None, Some(&dir), false).unwrap_err().to_string().contains("lowercase letters"),
                "{bad}"
            );
        }
        assert!(
            new(Lang::Rust, "ok", Some("lower"), Some(&dir), false).unwrap_err().to_string().contains("PascalCase")
        );
    }
}

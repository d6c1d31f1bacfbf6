//! Where plugins come from: a path, an `https://` URL, or an OCI registry
//! (`oci://registry/repository:tag` or `@sha256:...`), and pushing plugins to a registry.
//!
//! A plugin in a registry is a wasm OCI artifact: an image manifest whose config has the media
//! type `application/vnd.wasm.config.v0+json` and whose one layer, `application/wasm`, is the
//! plugin's bytes (the layout Istio's WasmPlugin and the wasm OCI artifact guidance use).
//!
//! Everything fetched is verified against its digest and cached by it under `DIR/blobs/`; what a
//! tag or URL last resolved to is remembered under `DIR/refs/`, so a registry that is down
//! when xdst starts is not fatal when the digest it last named is cached. Registries on a
//! loopback address, and those listed as insecure, are spoken to over plain HTTP; others over
//! HTTPS. Credentials come from `~/.docker/config.json` (`auths.<registry>.auth`), as `docker
//! login` and `oras login` write them; anonymous bearer tokens are fetched as registries ask.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// A detached ed25519 signature over a plugin's digest, stored in the plugin's repository at
/// the tag `sha256-<hex>.sig` (cosign's tag convention, with our own payload).
pub const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.dev.xdst.signature.ed25519";
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The largest plugin or manifest fetched.
const MAX_BYTES: u64 = 512 << 20;

type Result<T, E = FetchError> = std::result::Result<T, E>;

/// Why a plugin source cannot be taken (before anything is fetched).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// `http://` to a host that is not loopback.
    #[error("{0:?}: plain http:// is only allowed for loopback hosts; use https://")]
    PlainHttp(String),
    #[error("{0:?}: unknown scheme (a source is a path, an https:// URL or an oci:// reference)")]
    UnknownScheme(String),
    /// An OCI reference (`reference` without `oci://`) that does not parse.
    #[error(
        "oci://{reference}: {problem} (expected oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST)"
    )]
    Oci { reference: String, problem: OciProblem },
}

/// What is wrong with an OCI reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OciProblem {
    #[error("no repository")]
    NoRepository,
    #[error("no registry")]
    NoRegistry,
    #[error("the digest is not sha256: and 64 lowercase hex digits")]
    Digest,
    #[error("the repository must be lowercase letters, digits, '.', '_', '-' and '/'")]
    Repository,
    #[error("a tag is up to 128 letters, digits, '.', '_' and '-'")]
    Tag,
}

/// Why a fetch, a push or signing failed: what was being done (`GET URL`, `reading FILE`),
/// down to the cause (an HTTP, I/O or JSON error), or what a registry, a server or a file got
/// wrong.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// `doing` failed because of `cause`.
    #[error("{doing}")]
    Doing {
        doing: String,
        #[source]
        cause: Box<FetchError>,
    },
    #[error(transparent)]
    Http(Box<ureq::Error>),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A refusal, or an answer or a file that cannot be used: the text says which.
    #[error("{0}")]
    Refused(String),
    /// A signing key that is not an ed25519 private key in PEM.
    #[error(
        "{}: not an ed25519 private key in PEM (openssl genpkey -algorithm ed25519 writes one): {cause}",
        file.display()
    )]
    Key {
        file: PathBuf,
        #[source]
        cause: ed25519_dalek::pkcs8::Error,
    },
}

impl From<ureq::Error> for FetchError {
    fn from(e: ureq::Error) -> FetchError {
        FetchError::Http(Box::new(e))
    }
}

/// Says what was being done when an error happened, as anyhow's `with_context` does.
trait Doing<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<FetchError>> Doing<T> for std::result::Result<T, E> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| FetchError::Doing { doing: what(), cause: Box::new(e.into()) })
    }
}

/// Why a plugin's signature cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// A path source's `<path>.sig` cannot be read.
    #[error("{}: {cause}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        cause: std::io::Error,
    },
    /// None was fetched for `digest` (`file` is where it would be cached).
    #[error("no signature fetched for {digest} ({}: {cause})", file.display())]
    NotCached {
        digest: String,
        file: PathBuf,
        #[source]
        cause: std::io::Error,
    },
    /// Fetching it failed, and none is cached.
    #[error("{}", chain(.0))]
    Fetch(#[source] FetchError),
}

pub use xdst_core::errors::chain;

/// Where a plugin's code is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Path(PathBuf),
    Https(String),
    Oci(OciRef),
}

impl Source {
    /// Parses `oci://...`, `https://...` (or `http://` for loopback hosts), or a path (relative
    /// to `base`).
    pub fn parse(s: &str, base: &Path) -> Result<Source, SourceError> {
        if let Some(rest) = s.strip_prefix("oci://") {
            return OciRef::parse(rest).map(Source::Oci);
        }
        if s.starts_with("https://") || s.starts_with("http://") {
            if s.starts_with("http://") && !is_loopback(host_of(&s["http://".len()..])) {
                return Err(SourceError::PlainHttp(s.to_owned()));
            }
            return Ok(Source::Https(s.to_owned()));
        }
        if s.contains("://") {
            return Err(SourceError::UnknownScheme(s.to_owned()));
        }
        Ok(Source::Path(base.join(s)))
    }

    /// Whether the code is fetched (at admission and on reload) rather than read each time.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Source::Path(_))
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Path(p) => write!(f, "{}", p.display()),
            Source::Https(u) => f.write_str(u),
            Source::Oci(r) => write!(f, "{r}"),
        }
    }
}

/// `registry/repository:tag` or `registry/repository@sha256:<hex>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    pub registry: String,
    pub repository: String,
    /// A tag, or a manifest digest (`sha256:<hex>`).
    pub reference: String,
}

impl OciRef {
    pub fn parse(s: &str) -> Result<OciRef, SourceError> {
        let bad = |problem| SourceError::Oci { reference: s.to_owned(), problem };
        let (registry, rest) = s.split_once('/').ok_or_else(|| bad(OciProblem::NoRepository))?;
        if registry.is_empty() {
            return Err(bad(OciProblem::NoRegistry));
        }
        let (repository, reference) = if let Some((repo, digest)) = rest.split_once('@') {
            if !is_digest(digest) {
                return Err(bad(OciProblem::Digest));
            }
            (repo, digest.to_owned())
        } else {
            match rest.rsplit_once(':') {
                Some((repo, tag)) if !tag.contains('/') => (repo, tag.to_owned()),
                _ => (rest, "latest".to_owned()),
            }
        };
        let repo_ok = !repository.is_empty()
            && repository.split('/').all(|part| {
                !part.is_empty()
                    && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            });
        if !repo_ok {
            return Err(bad(OciProblem::Repository));
        }
        let tag_ok = reference.starts_with("sha256:")
            || (!reference.is_empty()
                && reference.len() <= 128
                && reference.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)));
        if !tag_ok {
            return Err(bad(OciProblem::Tag));
        }
        Ok(OciRef { registry: registry.to_owned(), repository: repository.to_owned(), reference })
    }

    pub fn by_digest(&self) -> bool {
        self.reference.starts_with("sha256:")
    }

    /// The same repository at `digest`.
    pub fn at(&self, digest: &str) -> OciRef {
        OciRef { reference: digest.to_owned(), ..self.clone() }
    }
}

impl std::fmt::Display for OciRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if self.by_digest() { '@' } else { ':' };
        write!(f, "oci://{}/{}{sep}{}", self.registry, self.repository, self.reference)
    }
}

fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

fn host_of(authority_and_path: &str) -> &str {
    let authority = authority_and_path.split('/').next().unwrap_or("");
    match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map(|(h, _)| h).unwrap_or(authority),
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// What a source resolved to: the code, cached by digest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Resolved {
    /// The plugin's bytes, in the cache.
    pub path: PathBuf,
    /// `sha256:<hex>` of those bytes.
    pub digest: String,
    /// For OCI, the manifest's digest (what the tag pointed at).
    pub manifest: Option<String>,
    /// Where it was resolved from, with the digest: `oci://r/p@sha256:...` or the URL.
    pub pinned: String,
}

/// Fetches and pushes plugins, with a cache by digest.
#[derive(Clone)]
pub struct Fetcher {
    dir: PathBuf,
    agent: ureq::Agent,
    insecure: Vec<String>,
    auths: std::collections::BTreeMap<String, String>,
}

/// A remembered resolution to fall back to, beside a fetch that failed.
pub struct Fallback {
    pub resolved: Resolved,
}

impl Fetcher {
    /// `dir` holds `blobs/` and `refs/`; `insecure` registries (`host:port`) are spoken to over
    /// plain HTTP; `ca_file` (PEM) replaces the built-in web roots for HTTPS.
    pub fn new(dir: PathBuf, insecure: Vec<String>, ca_file: Option<&Path>) -> Result<Fetcher> {
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(ca) = ca_file {
            let pem = std::fs::read(ca).doing(|| format!("reading caFile {}", ca.display()))?;
            let certs: Vec<_> = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<Result<_, _>>()
                .doing(|| format!("caFile {}: not PEM", ca.display()))?;
            if certs.is_empty() {
                return Err(FetchError::Refused(format!("caFile {}: no certificates in it", ca.display())));
            }
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(Duration::from_secs(300)))
            .tls_config(tls.build())
            .user_agent(concat!("xdst/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Ok(Fetcher { dir, agent, insecure, auths: docker_auths() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Resolves `source` now: a path is taken as it is; a URL or OCI reference is fetched
    /// (unless its digest is cached) and remembered. If the fetch fails and the source was
    /// resolved before, the error comes with that resolution to fall back to.
    pub fn resolve(&self, source: &Source) -> Result<Resolved, (FetchError, Option<Box<Fallback>>)> {
        let remembered = |e: FetchError| (e, self.remembered(source).map(|resolved| Box::new(Fallback { resolved })));
        match source {
            Source::Path(p) => {
                let bytes = std::fs::read(p).doing(|| format!("reading {}", p.display())).map_err(|e| (e, None))?;
                Ok(Resolved {
                    path: p.clone(),
                    digest: xdst_plugin::digest(&bytes),
                    manifest: None,
                    pinned: p.display().to_string(),
                })
            }
            Source::Https(url) => {
                let r = self.download(url).map_err(remembered)?;
                self.remember(source, &r);
                Ok(r)
            }
            Source::Oci(oci) => {
                let r = self.pull(oci).map_err(remembered)?;
                self.remember(source, &r);
                Ok(r)
            }
        }
    }

    fn ref_file(&self, source: &Source) -> PathBuf {
        let key = xdst_plugin::digest(source.to_string().as_bytes());
        self.dir.join("refs").join(format!("{}.json", key.trim_start_matches("sha256:")))
    }

    /// What `source` resolved to last, if its bytes are still cached.
    pub fn remembered(&self, source: &Source) -> Option<Resolved> {
        let text = std::fs::read(self.ref_file(source)).ok()?;
        let r: Resolved = serde_json::from_slice(&text).ok()?;
        let bytes = std::fs::read(&r.path).ok()?;
        (xdst_plugin::digest(&bytes) == r.digest).then_some(r)
    }

    fn remember(&self, source: &Source, r: &Resolved) {
        let path = self.ref_file(source);
        let body = serde_json::to_vec_pretty(r).expect("serializable");
        if let Err(e) = xdst_core::files::write_atomic(&path, &body) {
            tracing::warn!(file = %path.display(), error = %e, "could not remember what a plugin source resolved to");
        }
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        self.dir.join("blobs").join(format!("{}.wasm", digest.trim_start_matches("sha256:")))
    }

    /// The cached blob with `digest`, if it is there and intact.
    fn cached(&self, digest: &str) -> Option<PathBuf> {
        let path = self.blob_path(digest);
        let bytes = std::fs::read(&path).ok()?;
        (xdst_plugin::digest(&bytes) == digest).then_some(path)
    }

    fn store(&self, bytes: &[u8]) -> Result<(PathBuf, String)> {
        let digest = xdst_plugin::digest(bytes);
        let path = self.blob_path(&digest);
        xdst_core::files::write_atomic(&path, bytes).doing(|| format!("writing {}", path.display()))?;
        Ok((path, digest))
    }

    fn download(&self, url: &str) -> Result<Resolved> {
        let mut resp = self.agent.get(url).call().doing(|| format!("fetching {url}"))?;
        if resp.status() != 200 {
            return Err(FetchError::Refused(format!("fetching {url}: HTTP {}", resp.status())));
        }
        let bytes = resp.body_mut().with_config().limit(MAX_BYTES).read_to_vec().doing(|| format!("reading {url}"))?;
        let (path, digest) = self.store(&bytes)?;
        Ok(Resolved { path, pinned: format!("{url} ({digest})"), digest, manifest: None })
    }

    fn base(&self, registry: &str) -> String {
        let plain = is_loopback(host_of(registry)) || self.insecure.iter().any(|r| r == registry);
        format!("{}://{registry}", if plain { "http" } else { "https" })
    }

    /// A registry request, answering a `401` with the credentials or token it asks for.
    fn send(
        &self,
        oci: &OciRef,
        scope: &str,
        make: &dyn Fn(Option<&str>) -> ureq::RequestBuilder<ureq::typestate::WithBody>,
        body: &[u8],
    ) -> Result<http::Response<ureq::Body>> {
        let resp = make(None).send(body)?;
        if resp.status() != 401 {
            return Ok(resp);
        }
        let challenge = resp.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let auth = self.authorize(oci, scope, &challenge)?;
        Ok(make(Some(&auth)).send(body)?)
    }

    fn authorize(&self, oci: &OciRef, scope: &str, challenge: &str) -> Result<String> {
        let basic = self.auths.get(&oci.registry);
        let lower = challenge.to_ascii_lowercase();
        if lower.starts_with("basic") {
            return basic.map(|b| format!("Basic {b}")).ok_or_else(|| {
                FetchError::Refused(format!(
                    "{}: the registry wants credentials \
                (add them to ~/.docker/config.json, e.g. with `docker login {}`)",
                    oci.registry, oci.registry
                ))
            });
        }
        if !lower.starts_with("bearer") {
            return Err(FetchError::Refused(format!(
                "{}: unsupported authentication challenge {challenge:?}",
                oci.registry
            )));
        }
        let param = |name: &str| {
            challenge.split(',').find_map(|p| {
                let p = p.trim().trim_start_matches("Bearer ").trim_start_matches("bearer ");
                p.strip_prefix(name).and_then(|v| v.strip_prefix('=')).map(|v| v.trim_matches('"').to_owned())
            })
        };
        let realm = param("realm")
            .ok_or_else(|| FetchError::Refused(format!("{}: a bearer challenge without a realm", oci.registry)))?;
        let mut req = self.agent.get(&realm).query("scope", format!("repository:{}:{scope}", oci.repository));
        if let Some(service) = param("service") {
            req = req.query("service", service);
        }
        if let Some(b) = basic {
            req = req.header("authorization", format!("Basic {b}"));
        }
        let mut resp = req.call().doing(|| format!("getting a token from {realm}"))?;
        if resp.status() != 200 {
            return Err(FetchError::Refused(format!(
                "{}: the token service {realm} answered HTTP {}",
                oci.registry,
                resp.status()
            )));
        }
        #[derive(Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let t: Token = resp.body_mut().read_json().doing(|| format!("reading the token from {realm}"))?;
        t.token
            .or(t.access_token)
            .map(|t| format!("Bearer {t}"))
            .ok_or_else(|| FetchError::Refused(format!("{realm}: no token in the answer")))
    }

    fn get(&self, oci: &OciRef, path: &str, accept: &str) -> Result<http::Response<ureq::Body>> {
        let url = format!("{}/v2/{}/{path}", self.base(&oci.registry), oci.repository);
        let make = |auth: Option<&str>| {
            let mut r = self.agent.get(&url).header("accept", accept).force_send_body();
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            r
        };
        self.send(oci, "pull", &make, &[]).doing(|| format!("GET {url}"))
    }

    /// Pulls a wasm artifact: resolves the reference to a manifest digest, checks the layout,
    /// and fetches the layer unless it is cached.
    pub fn pull(&self, oci: &OciRef) -> Result<Resolved> {
        let mut resp = self.get(oci, &format!("manifests/{}", oci.reference), MANIFEST_MEDIA_TYPE)?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Err(FetchError::Refused(format!("{oci}: no such manifest in the registry"))),
            s => return Err(FetchError::Refused(format!("{oci}: the registry answered HTTP {s} for the manifest"))),
        }
        let body = resp.body_mut().with_config().limit(4 << 20).read_to_vec()?;
        let manifest_digest = xdst_plugin::digest(&body);
        if oci.by_digest() && manifest_digest != oci.reference {
            return Err(FetchError::Refused(format!(
                "{oci}: the registry sent a manifest whose digest is {manifest_digest}"
            )));
        }
        let manifest: Manifest =
            serde_json::from_slice(&body).doing(|| format!("{oci}: the manifest is not an OCI image manifest"))?;
        if manifest.config.media_type != CONFIG_MEDIA_TYPE {
            return Err(FetchError::Refused(format!(
                "{oci}: not a wasm artifact: its config's media type is {:?}, not {CONFIG_MEDIA_TYPE:?}",
                manifest.config.media_type
            )));
        }
        let wasm: Vec<&Descriptor> = manifest.layers.iter().filter(|l| l.media_type == LAYER_MEDIA_TYPE).collect();
        if manifest.layers.len() != 1 || wasm.len() != 1 {
            return Err(FetchError::Refused(format!(
                "{oci}: a wasm artifact has exactly one layer, of media type {LAYER_MEDIA_TYPE:?}; this one has {}",
                manifest.layers.iter().map(|l| l.media_type.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        let layer = wasm[0];
        if !is_digest(&layer.digest) {
            return Err(FetchError::Refused(format!(
                "{oci}: the layer's digest {:?} is not a sha256 digest",
                layer.digest
            )));
        }
        let pinned = oci.at(&manifest_digest).to_string();
        if let Some(path) = self.cached(&layer.digest) {
            return Ok(Resolved { path, digest: layer.digest.clone(), manifest: Some(manifest_digest), pinned });
        }
        if layer.size > MAX_BYTES {
            return Err(FetchError::Refused(format!(
                "{oci}: the layer is {} bytes; the limit is {MAX_BYTES}",
                layer.size
            )));
        }
        let mut resp = self.get(oci, &format!("blobs/{}", layer.digest), "*/*")?;
        if resp.status() != 200 {
            return Err(FetchError::Refused(format!(
                "{oci}: the registry answered HTTP {} for the layer {}",
                resp.status(),
                layer.digest
            )));
        }
        let bytes = resp.body_mut().with_config().limit(MAX_BYTES).read_to_vec()?;
        let got = xdst_plugin::digest(&bytes);
        if got != layer.digest {
            return Err(FetchError::Refused(format!(
                "{oci}: the layer's bytes have digest {got}, but the manifest says {}",
                layer.digest
            )));
        }
        let (path, digest) = self.store(&bytes)?;
        Ok(Resolved { path, digest, manifest: Some(manifest_digest), pinned })
    }

    /// The signature of the plugin with `digest` from `source`: `<path>.sig`, `<url>.sig`, or
    /// the registry's `sha256-<hex>.sig` tag. Fetched ones are cached beside the plugin, and the
    /// cached one is used when the fetch fails (a registry outage).
    pub fn signature(&self, source: &Source, digest: &str) -> Result<Vec<u8>, SignatureError> {
        if let Source::Path(p) = source {
            let file = PathBuf::from(format!("{}.sig", p.display()));
            return std::fs::read(&file).map_err(|cause| SignatureError::Read { file, cause });
        }
        let cached = self.blob_path(digest).with_extension("sig");
        self.fetch_signature(source, digest, &cached)
            .or_else(|e| std::fs::read(&cached).map_err(|_| SignatureError::Fetch(e)))
    }

    /// The signature fetched earlier for `digest`, from the cache.
    pub fn cached_signature(&self, digest: &str) -> Result<Vec<u8>, SignatureError> {
        let file = self.blob_path(digest).with_extension("sig");
        std::fs::read(&file).map_err(|cause| SignatureError::NotCached { digest: digest.to_owned(), file, cause })
    }

    fn fetch_signature(&self, source: &Source, digest: &str, cached: &Path) -> Result<Vec<u8>> {
        match source {
            Source::Path(_) => unreachable!("read directly"),
            Source::Https(url) => {
                let url = format!("{url}.sig");
                let mut resp = self.agent.get(&url).call().doing(|| format!("fetching {url}"))?;
                if resp.status() != 200 {
                    return Err(FetchError::Refused(format!("fetching {url}: HTTP {}", resp.status())));
                }
                let bytes =
                    resp.body_mut().with_config().limit(4096).read_to_vec().doing(|| format!("reading {url}"))?;
                let _ = xdst_core::files::write_atomic(cached, &bytes);
                Ok(bytes)
            }
            Source::Oci(oci) => {
                let tag = oci.at(&signature_tag(digest));
                let bytes = self.pull_signature(&tag)?;
                let _ = xdst_core::files::write_atomic(cached, &bytes);
                Ok(bytes)
            }
        }
    }

    fn pull_signature(&self, tag: &OciRef) -> Result<Vec<u8>> {
        let mut resp = self.get(tag, &format!("manifests/{}", tag.reference), MANIFEST_MEDIA_TYPE)?;
        match resp.status().as_u16() {
            200 => {}
            404 => {
                return Err(FetchError::Refused(format!(
                    "{tag}: no signature in the registry (push one with `xdst plugin push --sign KEY`)"
                )));
            }
            s => return Err(FetchError::Refused(format!("{tag}: HTTP {s}"))),
        }
        let manifest: Manifest = serde_json::from_slice(&resp.body_mut().with_config().limit(1 << 20).read_to_vec()?)?;
        let layer = manifest
            .layers
            .iter()
            .find(|l| l.media_type == SIGNATURE_MEDIA_TYPE)
            .ok_or_else(|| FetchError::Refused(format!("{tag}: no {SIGNATURE_MEDIA_TYPE} layer")))?;
        let mut resp = self.get(tag, &format!("blobs/{}", layer.digest), "*/*")?;
        if resp.status() != 200 {
            return Err(FetchError::Refused(format!("{tag}: HTTP {} for the signature blob", resp.status())));
        }
        let bytes = resp.body_mut().with_config().limit(4096).read_to_vec()?;
        if xdst_plugin::digest(&bytes) != layer.digest {
            return Err(FetchError::Refused(format!("{tag}: the signature blob does not match its digest")));
        }
        Ok(bytes)
    }

    /// Pushes a signature of the plugin with `digest` to `oci`'s repository.
    pub fn push_signature(&self, oci: &OciRef, digest: &str, signature: &[u8]) -> Result<String> {
        let tag = oci.at(&signature_tag(digest));
        let empty = b"{}";
        let config_digest = self.upload(oci, empty)?;
        let sig_digest = self.upload(oci, signature)?;
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            config: Descriptor {
                media_type: EMPTY_MEDIA_TYPE.into(),
                digest: config_digest,
                size: empty.len() as u64,
                annotations: None,
            },
            layers: vec![Descriptor {
                media_type: SIGNATURE_MEDIA_TYPE.into(),
                digest: sig_digest,
                size: signature.len() as u64,
                annotations: None,
            }],
            annotations: Some([("dev.xdst.signature.subject".to_owned(), digest.to_owned())].into()),
        };
        self.put_manifest(&tag, &serde_json::to_vec(&manifest)?)?;
        Ok(tag.to_string())
    }

    fn put_manifest(&self, oci: &OciRef, body: &[u8]) -> Result<()> {
        let url = format!("{}/v2/{}/manifests/{}", self.base(&oci.registry), oci.repository, oci.reference);
        let make = |auth: Option<&str>| {
            let mut r = self.agent.put(&url).header("content-type", MANIFEST_MEDIA_TYPE);
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            r
        };
        let mut resp = self.send(oci, "pull,push", &make, body).doing(|| format!("PUT {url}"))?;
        if resp.status() != 201 {
            let text = resp.body_mut().read_to_string().unwrap_or_default();
            return Err(FetchError::Refused(format!(
                "{oci}: the registry refused the manifest: HTTP {}: {}",
                resp.status(),
                text.trim()
            )));
        }
        Ok(())
    }

    /// Pushes `wasm` (a plugin; `info` from loading it) as a wasm OCI artifact, and returns the
    /// manifest's digest.
    pub fn push(&self, oci: &OciRef, wasm: &[u8], info: &PushInfo) -> Result<String> {
        if oci.by_digest() {
            return Err(FetchError::Refused(format!(
                "{oci}: push to a tag (oci://REGISTRY/REPOSITORY:TAG), not to a digest"
            )));
        }
        let layer_digest = xdst_plugin::digest(wasm);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "wasm",
            "os": if info.component { "wasip2" } else { "wasip1" },
            "layerDigests": [layer_digest],
        }))?;
        let config_digest = self.upload(oci, &config)?;
        let uploaded = self.upload(oci, wasm)?;
        debug_assert_eq!(uploaded, layer_digest);
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            config: Descriptor {
                media_type: CONFIG_MEDIA_TYPE.into(),
                digest: config_digest,
                size: config.len() as u64,
                annotations: None,
            },
            layers: vec![Descriptor {
                media_type: LAYER_MEDIA_TYPE.into(),
                digest: layer_digest,
                size: wasm.len() as u64,
                annotations: Some(
                    [("org.opencontainers.image.title".to_owned(), format!("{}.wasm", info.name))].into(),
                ),
            }],
            annotations: Some(
                [
                    ("org.opencontainers.image.title".to_owned(), info.name.clone()),
                    ("org.opencontainers.image.version".to_owned(), info.version.clone()),
                    ("dev.xdst.plugin.contract".to_owned(), info.contract.to_owned()),
                ]
                .into(),
            ),
        };
        let body = serde_json::to_vec(&manifest)?;
        self.put_manifest(oci, &body)?;
        Ok(xdst_plugin::digest(&body))
    }

    /// Uploads a blob unless the registry has it; returns its digest.
    fn upload(&self, oci: &OciRef, bytes: &[u8]) -> Result<String> {
        let digest = xdst_plugin::digest(bytes);
        let base = self.base(&oci.registry);
        let head = format!("{base}/v2/{}/blobs/{digest}", oci.repository);
        let make = |auth: Option<&str>| {
            let mut r = self.agent.head(&head).force_send_body();
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            r
        };
        if self.send(oci, "pull,push", &make, &[]).doing(|| format!("HEAD {head}"))?.status() == 200 {
            return Ok(digest);
        }
        let start = format!("{base}/v2/{}/blobs/uploads/", oci.repository);
        let make = |auth: Option<&str>| {
            let mut r = self.agent.post(&start);
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            r
        };
        let resp = self.send(oci, "pull,push", &make, &[]).doing(|| format!("POST {start}"))?;
        if resp.status() != 202 {
            return Err(FetchError::Refused(format!(
                "{oci}: the registry refused to start an upload: HTTP {}",
                resp.status()
            )));
        }
        let location = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| FetchError::Refused(format!("{oci}: an upload without a Location")))?;
        let mut url = if location.starts_with('/') { format!("{base}{location}") } else { location.to_owned() };
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&format!("digest={digest}"));
        let make = |auth: Option<&str>| {
            let mut r = self.agent.put(&url).header("content-type", "application/octet-stream");
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            r
        };
        let resp = self.send(oci, "pull,push", &make, bytes).doing(|| "uploading a blob".into())?;
        if resp.status() != 201 {
            return Err(FetchError::Refused(format!(
                "{oci}: the registry refused the blob {digest}: HTTP {}",
                resp.status()
            )));
        }
        Ok(digest)
    }
}

/// The tag a plugin's signature is stored at: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> String {
    format!("sha256-{}.sig", digest.trim_start_matches("sha256:"))
}

/// Signs a plugin's digest (`sha256:<hex>`) with an ed25519 private key (PKCS#8 PEM, as
/// `openssl genpkey -algorithm ed25519` writes it); returns the signature as base64.
pub fn sign(key_file: &Path, digest: &str) -> Result<String> {
    use base64::Engine as _;
    use ed25519_dalek::Signer as _;
    use ed25519_dalek::pkcs8::DecodePrivateKey;
    let pem = std::fs::read_to_string(key_file).doing(|| format!("reading {}", key_file.display()))?;
    let key = ed25519_dalek::SigningKey::from_pkcs8_pem(&pem)
        .map_err(|cause| FetchError::Key { file: key_file.to_owned(), cause })?;
    Ok(base64::engine::general_purpose::STANDARD.encode(key.sign(digest.as_bytes()).to_bytes()))
}

/// What a pushed artifact says about its plugin.
pub struct PushInfo {
    pub name: String,
    pub version: String,
    /// A component (else a core module).
    pub component: bool,
    /// The version of the contract it speaks.
    pub contract: &'static str,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    config: Descriptor,
    layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// `auths.<registry>.auth` of `$DOCKER_CONFIG/config.json` (default `~/.docker`).
fn docker_auths() -> std::collections::BTreeMap<String, String> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")));
    let Some(text) = dir.and_then(|d| std::fs::read(d.join("config.json")).ok()) else { return Default::default() };
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        auths: std::collections::BTreeMap<String, Auth>,
    }
    #[derive(Deserialize)]
    struct Auth {
        auth: Option<String>,
    }
    serde_json::from_slice::<File>(&text)
        .map(|f| {
            f.auths
                .into_iter()
                .filter_map(|(k, a)| {
                    a.auth.map(|v| (k.trim_start_matches("https://").trim_start_matches("http://").to_owned(), v))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        let r = OciRef::parse("localhost:5000/team/policy:1.2").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.reference.as_str()),
            ("localhost:5000", "team/policy", "1.2")
        );
        assert_eq!(r.to_string(), "oci://localhost:5000/team/policy:1.2");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = OciRef::parse(&format!("ghcr.io/x/y@{d}")).unwrap();
        assert!(r.by_digest());
        assert_eq!(r.to_string(), format!("oci://ghcr.io/x/y@{d}"));
        assert_eq!(OciRef::parse("r.io/x").unwrap().reference, "latest");
        for bad in ["", "r.io", "r.io/", "r.io/Upper:1", "r.io/x@sha256:12", "r.io/x:bad tag", "/x:1"] {
            assert!(OciRef::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn sources() {
        let base = Path::new("/etc/xdst");
        assert_eq!(Source::parse("p/a.wasm", base).unwrap(), Source::Path("/etc/xdst/p/a.wasm".into()));
        assert!(matches!(Source::parse("https://x.io/a.wasm", base).unwrap(), Source::Https(_)));
        assert!(matches!(Source::parse("http://127.0.0.1:8080/a.wasm", base).unwrap(), Source::Https(_)));
        assert!(Source::parse("http://x.io/a.wasm", base).unwrap_err().to_string().contains("loopback"));
        assert!(Source::parse("ftp://x.io/a.wasm", base).unwrap_err().to_string().contains("unknown scheme"));
        assert!(
            is_loopback(host_of("127.0.0.1:5000"))
                && is_loopback(host_of("localhost:5000"))
                && is_loopback(host_of("[::1]:5000"))
        );
        assert!(!is_loopback(host_of("registry.example:5000")));
    }
}

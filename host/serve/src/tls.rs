//! TLS on xdst's ports (rustls): a server certificate and key from PEM files, re-read when
//! they change on disk. New handshakes get the newest pair; open connections keep the one
//! they started with. A pair that does not load (a half-written file, a key that does not
//! match the certificate) is logged, naming the file, and the previous one stays in use.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;
use tracing::{info, warn};

/// Why a certificate, a key or a CA file cannot be used; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the client CA {}", file.display())]
    ReadClientCa {
        file: PathBuf,
        #[source]
        cause: rustls_pki_types::pem::Error,
    },
    #[error("the client CA file {} holds no usable CA certificate ({ignored} unparsable)", file.display())]
    NoClientCa { file: PathBuf, ignored: usize },
    #[error("reading the TLS certificate {}", file.display())]
    ReadCert {
        file: PathBuf,
        #[source]
        cause: rustls_pki_types::pem::Error,
    },
    #[error("the TLS certificate file {} holds no CERTIFICATE block", file.display())]
    NoCert { file: PathBuf },
    #[error("reading the TLS key {} (PKCS#8, PKCS#1 or SEC1 PEM)", file.display())]
    ReadKey {
        file: PathBuf,
        #[source]
        cause: rustls_pki_types::pem::Error,
    },
    #[error("the TLS key {} is not an RSA, ECDSA or Ed25519 key rustls can use", file.display())]
    UnusableKey {
        file: PathBuf,
        #[source]
        cause: rustls::Error,
    },
    #[error("the TLS key {} does not belong to the certificate {}", key.display(), cert.display())]
    KeyMismatch {
        key: PathBuf,
        cert: PathBuf,
        #[source]
        cause: rustls::Error,
    },
}

/// Where the server certificate chain and its key are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA that signs client certificates (mTLS), read at start.
    pub client_ca: Option<PathBuf>,
}

/// Whether a port asks for client certificates.
#[derive(Debug, Clone)]
pub enum ClientAuth {
    None,
    /// Every client must present a certificate these roots signed (the xDS port with mTLS).
    Required(Arc<rustls::RootCertStore>),
    /// A client may present one (the admin port with mTLS: tokens work too); one it presents
    /// must verify.
    Optional(Arc<rustls::RootCertStore>),
}

/// The client CA's certificates; an error names the file.
pub fn client_roots(file: &Path) -> Result<Arc<rustls::RootCertStore>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|cause| TlsError::ReadClientCa { file: file.to_owned(), cause })?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsError::NoClientCa { file: file.to_owned(), ignored });
    }
    Ok(Arc::new(roots))
}

/// How often the files are looked at for a change (their size, modification time and, when
/// those change, content). Rotation tools replace files by renaming; polling sees that.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// A handshake that has not finished after this long is dropped (a client that connects and
/// sends nothing holds no task for ever).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The current certificate, swapped when the files change.
#[derive(Debug)]
pub struct Reloading {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap().clone())
    }
}

impl Reloading {
    /// Loads the pair; an error names the file at fault.
    pub fn load(files: TlsFiles) -> Result<Arc<Reloading>, TlsError> {
        let key = load_pair(&files)?;
        Ok(Arc::new(Reloading { files, current: RwLock::new(Arc::new(key)) }))
    }

    /// The certificate new handshakes get.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.read().unwrap().clone()
    }

    /// Watches the files until `shutdown`, swapping in each pair that loads.
    pub async fn watch(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut seen = stamp(&self.files);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(RELOAD_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
            let now = stamp(&self.files);
            if now == seen {
                continue;
            }
            seen = now;
            match load_pair(&self.files) {
                Ok(key) => {
                    let changed = key.cert != self.current().cert;
                    *self.current.write().unwrap() = Arc::new(key);
                    if changed {
                        info!(cert = %self.files.cert.display(), "TLS certificate reloaded: new handshakes get it");
                    }
                }
                Err(e) => {
                    warn!(error = %xdst_core::errors::chain(&e), "TLS certificate not reloaded; the previous one stays in use")
                }
            }
        }
    }
}

/// A rustls server configuration serving `resolver`'s certificate, offering HTTP/2 and
/// HTTP/1.1 (gRPC clients ask for `h2`; REST clients may speak either).
pub fn server_config(resolver: Arc<Reloading>, clients: ClientAuth) -> Arc<rustls::ServerConfig> {
    use rustls::server::WebPkiClientVerifier;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let builder = match clients {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Required(roots) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(roots, provider)
                .build()
                .expect("client_roots holds at least one CA certificate"),
        ),
        ClientAuth::Optional(roots) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(roots, provider)
                .allow_unauthenticated()
                .build()
                .expect("client_roots holds at least one CA certificate"),
        ),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

fn load_pair(files: &TlsFiles) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|cause| TlsError::ReadCert { file: files.cert.clone(), cause })?;
    if chain.is_empty() {
        return Err(TlsError::NoCert { file: files.cert.clone() });
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|cause| TlsError::ReadKey { file: files.key.clone(), cause })?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|cause| TlsError::UnusableKey { file: files.key.clone(), cause })?;
    let pair = CertifiedKey::new(chain, signer);
    pair.keys_match().map_err(|cause| TlsError::KeyMismatch {
        key: files.key.clone(),
        cause,
        cert: files.cert.clone(),
    })?;
    Ok(pair)
}

/// What tells a rewritten file: length and modification time of both (None: unreadable).
fn stamp(files: &TlsFiles) -> [Option<(u64, SystemTime)>; 2] {
    let one = |p: &Path| std::fs::metadata(p).ok().and_then(|m| Some((m.len(), m.modified().ok()?)));
    [one(&files.cert), one(&files.key)]
}

//! Test certificates made with the `openssl` command (tests/setup.sh installs it): a CA and
//! leaf certificates it signs, EC P-256 keys in PKCS#8 PEM, valid for a day.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, ensure};

/// A certificate authority whose files live in `dir`.
pub struct Ca {
    dir: PathBuf,
    pub cert: PathBuf,
    key: PathBuf,
}

/// A leaf certificate and its key.
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    /// A new self-signed CA `CN=<name>`, its files `<name>.pem` and `<name>.key` in `dir`.
    pub fn new(dir: &Path, name: &str) -> anyhow::Result<Ca> {
        let (cert, key) = (format!("{name}.pem"), format!("{name}.key"));
        openssl(dir, &["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"])
            .args(["-keyout", &key, "-out", &cert, "-days", "1", "-subj", &format!("/CN={name}")])
            .args(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"])
            .run()?;
        Ok(Ca { dir: dir.to_owned(), cert: dir.join(cert), key: dir.join(key) })
    }

    /// A leaf `CN=<name>` with these subject alternative names (`DNS:localhost`,
    /// `IP:127.0.0.1`, `URI:spiffe://...`), for servers and clients both; its files
    /// `<name>.pem` and `<name>.key`.
    pub fn issue(&self, name: &str, sans: &[&str]) -> anyhow::Result<Leaf> {
        self.issue_for_days(name, sans, 1)
    }

    /// [`issue`](Self::issue) valid for `days` from now; `-1` makes one that expired a day
    /// ago.
    pub fn issue_for_days(&self, name: &str, sans: &[&str], days: i32) -> anyhow::Result<Leaf> {
        self.issue_as(name, name, sans, days)
    }

    /// A leaf whose subject CN is `cn` (any text, a SPIFFE ID say), in files named `name`.
    pub fn issue_with_cn(&self, name: &str, cn: &str, sans: &[&str]) -> anyhow::Result<Leaf> {
        self.issue_as(name, cn, sans, 1)
    }

    fn issue_as(&self, name: &str, cn: &str, sans: &[&str], days: i32) -> anyhow::Result<Leaf> {
        let dir = &self.dir;
        let (cert, key, csr, ext) =
            (format!("{name}.pem"), format!("{name}.key"), format!("{name}.csr"), format!("{name}.ext"));
        openssl(dir, &["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"])
            .args(["-keyout", &key, "-out", &csr, "-subj", &format!("/CN={}", cn.replace('/', "\\/"))])
            .run()?;
        let mut extensions = String::from("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n");
        if !sans.is_empty() {
            extensions.push_str(&format!("subjectAltName={}\n", sans.join(",")));
        }
        std::fs::write(dir.join(&ext), extensions)?;
        let (ca_cert, ca_key) = (self.cert.display().to_string(), self.key.display().to_string());
        openssl(dir, &["x509", "-req", "-in", &csr, "-CA", &ca_cert, "-CAkey", &ca_key, "-CAcreateserial"])
            .args(["-days", &days.to_string(), "-extfile", &ext, "-out", &cert])
            .run()?;
        Ok(Leaf { cert: dir.join(cert), key: dir.join(key) })
    }
}

/// An `openssl` command run in `dir`.
pub fn openssl(dir: &Path, args: &[&str]) -> Openssl {
    let mut c = std::process::Command::new("openssl");
    c.args(args).current_dir(dir);
    Openssl(c)
}

pub struct Openssl(std::process::Command);

impl Openssl {
    pub fn args<const N: usize>(mut self, args: [&str; N]) -> Openssl {
        self.0.args(args);
        self
    }

    /// Runs it; a failure shows openssl's own message.
    pub fn run(mut self) -> anyhow::Result<()> {
        let out = self.0.output().context("running openssl (tests/setup.sh installs it)")?;
        ensure!(out.status.success(), "{:?} failed: {}", self.0, String::from_utf8_lossy(&out.stderr).trim());
        Ok(())
    }
}

/// A gRPC channel to `addr` over TLS, trusting `ca` and expecting `DNS:localhost`, presenting
/// `client` when given (mTLS); HTTP/2 by ALPN, as Envoy and gRPC clients connect.
pub async fn tls_channel(
    addr: std::net::SocketAddr,
    ca: &Path,
    client: Option<&Leaf>,
) -> anyhow::Result<tonic::transport::Channel> {
    use rustls_pki_types::ServerName;
    let connector = client_config(ca, client)?;
    let connect = tower::service_fn(move |_: http::Uri| {
        let connector = connector.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            let tls = connector.connect(ServerName::try_from("localhost").expect("a DNS name"), tcp).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    // `http://`: the connector above does TLS itself; tonic, built with its own TLS (etcd's
    // client asks for it), refuses an `https://` endpoint without its TLS configuration.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://localhost:{}", addr.port()))?
        .connect_with_connector(connect)
        .await
        .with_context(|| format!("connecting to {addr} over TLS"))?;
    Ok(channel)
}

/// A TLS client trusting `ca`, presenting `client` when given, offering only `h2`.
pub fn client_config(ca: &Path, client: Option<&Leaf>) -> anyhow::Result<tokio_rustls::TlsConnector> {
    client_config_alpn(ca, client, b"h2")
}

/// [`client_config`] offering `alpn` (`h2`, `http/1.1`).
pub fn client_config_alpn(ca: &Path, client: Option<&Leaf>, alpn: &[u8]) -> anyhow::Result<tokio_rustls::TlsConnector> {
    Ok(client_config_asked(ca, client, alpn)?.0)
}

/// [`client_config_alpn`], and whether a server ever asked the client for its certificate
/// (a TLS `CertificateRequest`: only then does the client present one), as upstream's
/// `GetClientCertificateHook` records it.
pub fn client_config_asked(
    ca: &Path,
    client: Option<&Leaf>,
    alpn: &[u8],
) -> anyhow::Result<(tokio_rustls::TlsConnector, std::sync::Arc<std::sync::atomic::AtomicBool>)> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut config = match client {
        Some(leaf) => {
            let certs = CertificateDer::pem_file_iter(&leaf.cert)?.collect::<Result<_, _>>()?;
            let key = provider.key_provider.load_private_key(PrivateKeyDer::from_pem_file(&leaf.key)?)?;
            let key = std::sync::Arc::new(rustls::sign::CertifiedKey::new(certs, key));
            builder.with_client_cert_resolver(std::sync::Arc::new(Asked { key, asked: asked.clone() }))
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok((tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)), asked))
}

/// A client certificate that notes when a server asks for it.
#[derive(Debug)]
struct Asked {
    key: std::sync::Arc<rustls::sign::CertifiedKey>,
    asked: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl rustls::client::ResolvesClientCert for Asked {
    fn resolve(
        &self,
        _hints: &[&[u8]],
        _schemes: &[rustls::SignatureScheme],
    ) -> Option<std::sync::Arc<rustls::sign::CertifiedKey>> {
        self.asked.store(true, std::sync::atomic::Ordering::Relaxed);
        Some(self.key.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

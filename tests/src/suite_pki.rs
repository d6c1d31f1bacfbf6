//! The certificates and CA bundles the upstream Gateway API suite makes in code, never in a
//! manifest (the table "Objects the suite creates in code" in
//! `../shared/gateway-api-suite/README.md`): CAs as ConfigMaps with `ca.crt`, leaves as
//! `kubernetes.io/tls` Secrets. Made with [`crate::pki`] (EC P-256, not upstream's RSA: what
//! is checked is who signed what, for which names).
//!
//! Each is made when a case needs it: its name appears in the case's manifests (a
//! `certificateRefs`, a `caCertificateRefs`, a `clientCertificateRef`), or a backend serves
//! with it ([`SuitePki::leaf`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::pki::{Ca, Leaf};

/// One object of the table: its kind, namespace, name, the CA that signs it (or that it
/// holds, for a ConfigMap), and a leaf's subject alternative names.
struct Made {
    kind: &'static str,
    namespace: &'static str,
    name: &'static str,
    ca: &'static str,
    sans: &'static [&'static str],
}

const INFRA: &str = "gateway-conformance-infra";
const APP: &str = "gateway-conformance-app-backend";
const WEB: &str = "gateway-conformance-web-backend";
const CLIENT: &[&str] = &["DNS:client.example.com"];

/// The README's table. CA A signs the frontend client certificates, CA B the per-port ones,
/// CA C the backend and TLSRoute certificates; two CAs sign nothing.
const OBJECTS: &[Made] = &[
    Made { kind: "ConfigMap", namespace: INFRA, name: "tls-validity-checks-ca-certificate", ca: "a", sans: &[] },
    Made { kind: "Secret", namespace: INFRA, name: "tls-validity-checks-client-certificate", ca: "a", sans: CLIENT },
    Made {
        kind: "ConfigMap",
        namespace: INFRA,
        name: "tls-validity-checks-per-port-ca-certificate",
        ca: "b",
        sans: &[],
    },
    Made {
        kind: "Secret",
        namespace: INFRA,
        name: "tls-validity-checks-per-port-client-certificate",
        ca: "b",
        sans: CLIENT,
    },
    Made { kind: "ConfigMap", namespace: INFRA, name: "tls-checks-ca-certificate", ca: "c", sans: &[] },
    Made {
        kind: "Secret",
        namespace: INFRA,
        name: "tls-checks-certificate",
        ca: "c",
        sans: &["DNS:abc.example.com", "DNS:other.example.com", "URI:spiffe://abc.example.com/test-identity"],
    },
    Made { kind: "Secret", namespace: INFRA, name: "tls-checks-client-certificate", ca: "c", sans: CLIENT },
    Made {
        kind: "Secret",
        namespace: INFRA,
        name: "tls-passthrough-checks-certificate",
        ca: "c",
        sans: &["DNS:abc.example.com"],
    },
    Made {
        kind: "Secret",
        namespace: APP,
        name: "tls-passthrough-checks-certificate",
        ca: "c",
        sans: &["DNS:abc.example.com"],
    },
    Made {
        kind: "Secret",
        namespace: INFRA,
        name: "tls-terminate-checks-certificate",
        ca: "c",
        sans: &["DNS:tls.example.com"],
    },
    Made { kind: "ConfigMap", namespace: WEB, name: "web-backend-cm", ca: "web", sans: &[] },
    Made { kind: "ConfigMap", namespace: INFRA, name: "mismatch-ca-certificate", ca: "mismatch", sans: &[] },
];

/// The CAs and leaves of one case, made on first use in its directory.
pub struct SuitePki {
    dir: PathBuf,
    cas: BTreeMap<&'static str, Ca>,
    leaves: BTreeMap<&'static str, Leaf>,
}

impl SuitePki {
    pub fn new(dir: &Path) -> SuitePki {
        SuitePki { dir: dir.to_owned(), cas: BTreeMap::new(), leaves: BTreeMap::new() }
    }

    fn ca(&mut self, name: &'static str) -> anyhow::Result<&Ca> {
        if !self.cas.contains_key(name) {
            let ca = Ca::new(&self.dir, &format!("suite-ca-{name}"))?;
            self.cas.insert(name, ca);
        }
        Ok(&self.cas[name])
    }

    /// The PEM file of the CA a ConfigMap of the table holds (`tls-checks-ca-certificate`).
    pub fn ca_of(&mut self, configmap: &str) -> anyhow::Result<PathBuf> {
        let o = OBJECTS
            .iter()
            .find(|o| o.kind == "ConfigMap" && o.name == configmap)
            .ok_or_else(|| anyhow::anyhow!("the suite makes no ConfigMap {configmap}"))?;
        Ok(self.ca(o.ca)?.cert.clone())
    }

    /// The certificate and key of the table's Secret `name`.
    pub fn leaf(&mut self, name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        let o = OBJECTS
            .iter()
            .find(|o| o.kind == "Secret" && o.name == name)
            .ok_or_else(|| anyhow::anyhow!("the suite makes no Secret {name}"))?;
        if !self.leaves.contains_key(o.name) {
            let leaf = self.ca(o.ca)?.issue(o.name, o.sans)?;
            self.leaves.insert(o.name, leaf);
        }
        let leaf = &self.leaves[o.name];
        Ok((leaf.cert.clone(), leaf.key.clone()))
    }

    /// The table's objects whose names appear in `manifests` and that it does not ship
    /// (`shipped`: ids `Kind/namespace/name`), as YAML documents.
    pub fn objects_for(
        &mut self,
        manifests: &str,
        shipped: &std::collections::BTreeSet<String>,
    ) -> anyhow::Result<String> {
        use base64::Engine as _;
        let b64 = |p: &Path| -> anyhow::Result<String> {
            Ok(base64::engine::general_purpose::STANDARD.encode(std::fs::read(p)?))
        };
        let mut out = String::new();
        for o in OBJECTS {
            if !manifests.contains(o.name) || shipped.contains(&format!("{}/{}/{}", o.kind, o.namespace, o.name)) {
                continue;
            }
            let doc = if o.kind == "ConfigMap" {
                let ca = std::fs::read_to_string(self.ca_of(o.name)?)?;
                serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": o.name, "namespace": o.namespace},
                    "data": {"ca.crt": ca},
                })
            } else {
                let (cert, key) = self.leaf(o.name)?;
                serde_json::json!({
                    "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                    "metadata": {"name": o.name, "namespace": o.namespace},
                    "data": {"tls.crt": b64(&cert)?, "tls.key": b64(&key)?},
                })
            };
            out.push_str(&format!("---\n{doc}\n"));
        }
        Ok(out)
    }
}

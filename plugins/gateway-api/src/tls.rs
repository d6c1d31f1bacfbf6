//! HTTPS listeners: `certificateRefs` resolved to Secrets, which Envoy fetches over SDS (the
//! private key never sits in a Listener), and the Listener of an HTTPS port: one filter chain
//! per Gateway listener, picked by the TLS server name (SNI).

use std::collections::BTreeSet;

use base64::Engine as _;
use xdst_guest::build::{HttpListener, ads};
use xdst_guest::envoy::envoy::config::core::v3::{DataSource, TransportSocket, data_source, transport_socket};
use xdst_guest::envoy::envoy::config::listener::v3::{FilterChainMatch, Listener, ListenerFilter, listener_filter};
use xdst_guest::envoy::envoy::extensions::transport_sockets::tls::v3::{
    SdsSecretConfig, Secret, TlsCertificate, secret,
};
use xdst_guest::pack;

use crate::extensions::{CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, TlsInspector};
use crate::model::{Listener as GatewayListener, SecretRef};
use crate::status::Condition;
use crate::world::{Key, World};
use xdst_guest::envoy::google::protobuf::BoolValue;

/// The SDS name of a Secret: `<namespace>/<name>`.
pub fn secret_name(key: &Key) -> String {
    format!("{}/{}", key.0, key.1)
}

/// Why a listener's certificates cannot be used: `Accepted` or `ResolvedRefs` False.
pub enum Refused {
    Accepted(Condition),
    ResolvedRefs(Condition),
}

/// The Secrets an HTTPS listener's (or a terminating TLS listener's) `certificateRefs` name, checked: every one must be a
/// `kubernetes.io/tls` Secret with a PEM certificate and key, in the namespace of what declared
/// the listener (`from`: a Gateway or a ListenerSet, and its namespace) or granted to it by a
/// ReferenceGrant. The first that fails gives the condition.
pub fn certificates(world: &World, from: (&str, &str), listener: &GatewayListener) -> Result<Vec<Key>, Refused> {
    let (from_kind, from_namespace) = from;
    let tls = listener.tls.as_ref();
    let passthrough = tls.and_then(|t| t.mode.as_deref()) == Some("Passthrough");
    if listener.protocol == "TLS" && passthrough {
        // The backends end TLS: the listener holds no certificate.
        return Ok(Vec::new());
    }
    if listener.protocol == "HTTPS" && tls.and_then(|t| t.mode.as_deref()).is_some_and(|m| m != "Terminate") {
        return Err(Refused::Accepted(Condition::no(
            "Accepted",
            "UnsupportedValue",
            "an HTTPS listener terminates TLS: tls.mode must be Terminate",
        )));
    }
    let refs = tls.map(|t| t.certificate_refs.as_slice()).unwrap_or_default();
    if refs.is_empty() {
        return Err(Refused::ResolvedRefs(Condition::no(
            "ResolvedRefs",
            "InvalidCertificateRef",
            format!("a {} listener that terminates TLS needs tls.certificateRefs", listener.protocol),
        )));
    }
    let mut keys = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let key = tls_secret(world, (from_kind, from_namespace), r, &format!("tls.certificateRefs[{i}]")).map_err(
            |(reason, why)| {
                let reason = if reason == "RefNotPermitted" { reason } else { "InvalidCertificateRef" };
                Refused::ResolvedRefs(Condition::no("ResolvedRefs", reason, why))
            },
        )?;
        keys.push(key);
    }
    Ok(keys)
}

/// The `kubernetes.io/tls` Secret a reference at `at` names (a Gateway's or ListenerSet's:
/// `from`, its kind and namespace), checked: a core Secret, in that namespace or granted by a
/// ReferenceGrant, holding a PEM certificate and key. `Err`: `RefNotPermitted`, or
/// `Invalid` for the rest, with the reason in words.
fn tls_secret(world: &World, from: (&str, &str), r: &SecretRef, at: &str) -> Result<Key, (&'static str, String)> {
    let (from_kind, from_namespace) = from;
    let (group, kind) = (r.group.as_deref().unwrap_or(""), r.kind.as_deref().unwrap_or("Secret"));
    if !(group.is_empty() || group == "core") || kind != "Secret" {
        return Err(("Invalid", format!("{at} names a {group}/{kind}; only core Secrets hold certificates")));
    }
    let namespace = r.namespace.clone().unwrap_or_else(|| from_namespace.to_owned());
    if namespace != from_namespace && !world.granted(from_kind, from_namespace, "", "Secret", &namespace, &r.name) {
        return Err((
            "RefNotPermitted",
            format!("{at}: no ReferenceGrant in {namespace:?} lets this {from_kind} use Secret {:?}", r.name),
        ));
    }
    let key = (namespace, r.name.clone());
    let Some(secret) = world.secrets.get(&key) else {
        return Err(("Invalid", format!("{at}: Secret {}/{} does not exist", key.0, key.1)));
    };
    pem_pair(&secret.spec).map_err(|why| ("Invalid", format!("{at}: Secret {}/{}: {why}", key.0, key.1)))?;
    Ok(key)
}

/// A `kubernetes.io/tls` Secret's certificate and key, decoded.
fn pem_pair(secret: &crate::model::Secret) -> Result<(Vec<u8>, Vec<u8>), String> {
    if secret.kind.as_deref().is_some_and(|t| t != "kubernetes.io/tls") {
        return Err(format!("type {:?} is not kubernetes.io/tls", secret.kind.as_deref().unwrap_or("")));
    }
    let field = |name: &str, marker: &str| -> Result<Vec<u8>, String> {
        let text = secret.data.get(name).ok_or_else(|| format!("data has no {name:?}"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("data.{name} is not base64: {e}"))?;
        let pem = String::from_utf8_lossy(&bytes);
        if !pem.contains("-----BEGIN ") || !pem.contains(marker) {
            return Err(format!("data.{name} is not a PEM {}", marker.trim_matches('-')));
        }
        Ok(bytes)
    };
    Ok((field("tls.crt", "CERTIFICATE-----")?, field("tls.key", "PRIVATE KEY-----")?))
}

/// A listener's client certificate validation, resolved: the CA bundle (PEM) a client
/// certificate must chain to, and whether one that does not (or none) is let through
/// (`AllowInsecureFallback`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientValidation {
    pub ca: Vec<u8>,
    pub insecure: bool,
}

/// The client certificate validation of an HTTPS listener of `gateway` (its port's
/// `perPort` setting, else the `default`), resolved; none when it has none. A reference that
/// does not resolve gives the listener's conditions: `ResolvedRefs` False with the reason,
/// `Accepted` False (`NoValidCACertificate`).
pub fn client_validation(
    world: &World,
    gateway: &crate::world::Doc<crate::model::GatewaySpec>,
    listener: &GatewayListener,
) -> Result<Option<ClientValidation>, Vec<Condition>> {
    let Some(frontend) = gateway.spec.tls.as_ref().and_then(|t| t.frontend.as_ref()) else { return Ok(None) };
    let (setting, at) = match frontend.per_port.iter().position(|p| p.port == listener.port) {
        Some(i) => (frontend.per_port[i].tls.validation.as_ref(), format!("spec.tls.frontend.perPort[{i}]")),
        None => (frontend.default.as_ref().and_then(|d| d.validation.as_ref()), "spec.tls.frontend.default".to_owned()),
    };
    let Some(validation) = setting else { return Ok(None) };
    let refuse = |reason: &'static str, why: String| {
        vec![
            Condition::no("ResolvedRefs", reason, why.clone()),
            Condition::no("Accepted", "NoValidCACertificate", why),
            Condition::no("Programmed", "Invalid", "the listener's client certificate validation does not resolve"),
        ]
    };
    let mut ca = Vec::new();
    for (i, r) in validation.ca_certificate_refs.iter().enumerate() {
        let at = format!("{at}.validation.caCertificateRefs[{i}]");
        let (group, kind) = (r.group.as_deref().unwrap_or(""), r.kind.as_deref().unwrap_or("ConfigMap"));
        if !(group.is_empty() || group == "core") || kind != "ConfigMap" {
            return Err(refuse(
                "InvalidCACertificateKind",
                format!("{at} names a {group}/{kind}; CA bundles are ConfigMaps"),
            ));
        }
        let namespace = r.namespace.clone().unwrap_or_else(|| gateway.namespace.clone());
        if namespace != gateway.namespace
            && !world.granted("Gateway", &gateway.namespace, "", "ConfigMap", &namespace, &r.name)
        {
            return Err(refuse(
                "RefNotPermitted",
                format!("{at}: no ReferenceGrant in {namespace:?} lets this Gateway use ConfigMap {:?}", r.name),
            ));
        }
        let pem = world.config_maps.get(&(namespace.clone(), r.name.clone())).and_then(|m| m.spec.data.get("ca.crt"));
        match pem {
            Some(p) if p.contains("-----BEGIN CERTIFICATE-----") => ca.extend_from_slice(p.as_bytes()),
            Some(_) => {
                return Err(refuse(
                    "InvalidCACertificateRef",
                    format!("{at}: ConfigMap {namespace}/{}: ca.crt holds no PEM certificate", r.name),
                ));
            }
            None => {
                return Err(refuse(
                    "InvalidCACertificateRef",
                    format!("{at}: ConfigMap {namespace}/{} with ca.crt does not exist", r.name),
                ));
            }
        }
    }
    if ca.is_empty() {
        return Err(refuse("InvalidCACertificateRef", format!("{at}.validation names no CA bundle")));
    }
    let insecure = validation.mode.as_deref() == Some("AllowInsecureFallback");
    Ok(Some(ClientValidation { ca, insecure }))
}

/// The Secret a Gateway presents to backends as its client certificate
/// (`spec.tls.backend.clientCertificateRef`), checked as a listener's certificates are; none
/// when it names none. A reference that does not resolve gives the Gateway's `ResolvedRefs`
/// False (`InvalidClientCertificateRef`, `RefNotPermitted`).
pub fn backend_client_certificate(
    world: &World,
    gateway: &crate::world::Doc<crate::model::GatewaySpec>,
) -> Result<Option<Key>, Condition> {
    let Some(r) =
        gateway.spec.tls.as_ref().and_then(|t| t.backend.as_ref()).and_then(|b| b.client_certificate_ref.as_ref())
    else {
        return Ok(None);
    };
    let from = ("Gateway", gateway.namespace.as_str());
    tls_secret(world, from, r, "spec.tls.backend.clientCertificateRef").map(Some).map_err(|(reason, why)| {
        let reason = if reason == "RefNotPermitted" { reason } else { "InvalidClientCertificateRef" };
        Condition::no("ResolvedRefs", reason, why)
    })
}

/// The SDS Secret resources for `keys` (each once).
pub fn secrets<'a>(world: &World, keys: impl IntoIterator<Item = &'a Key>) -> Vec<(Secret, String)> {
    let unique: BTreeSet<&Key> = keys.into_iter().collect();
    let inline =
        |b: Vec<u8>| Some(DataSource { specifier: Some(data_source::Specifier::InlineBytes(b)), ..Default::default() });
    unique
        .into_iter()
        .filter_map(|key| {
            let doc = world.secrets.get(key)?;
            let (cert, private_key) = pem_pair(&doc.spec).ok()?;
            let tls = TlsCertificate {
                certificate_chain: inline(cert),
                private_key: inline(private_key),
                ..Default::default()
            };
            Some((Secret { name: secret_name(key), r#type: Some(secret::Type::TlsCertificate(tls)) }, doc.id.clone()))
        })
        .collect()
}

/// One Gateway listener's filter chain on an HTTPS port.
pub struct Chain {
    /// `<namespace>/<gateway>/<port>/<listener>`: the chain's name and its routes' name.
    pub name: String,
    /// The listener's hostname; none: the chain for every other server name.
    pub hostname: Option<String>,
    pub secrets: Vec<Key>,
    /// How client certificates are checked, if they are.
    pub validation: Option<ClientValidation>,
}

/// The Listener of an HTTPS port: a TLS inspector reads the SNI, which picks the chain of the
/// Gateway listener whose hostname matches it (Envoy prefers exact names, then the longest
/// wildcard); the listener without a hostname takes the rest. Each chain ends TLS with its
/// listener's certificates and fetches its own RouteConfiguration.
pub fn https_listener(name: &str, address: &str, port: u16, chains: &[Chain]) -> Listener {
    let mut listener = Listener { name: name.to_owned(), listener_filters: vec![inspector()], ..Default::default() };
    for c in chains {
        let http = crate::gateway::http_listener(HttpListener::new(c.name.as_str(), port).address(address)).build();
        listener.address = http.address;
        let mut chain = http.filter_chains.into_iter().next().unwrap_or_default();
        chain.name = c.name.clone();
        chain.filter_chain_match = c
            .hostname
            .as_ref()
            .map(|h| FilterChainMatch { server_names: vec![h.to_ascii_lowercase()], ..Default::default() });
        chain.transport_socket = Some(terminate(&c.secrets, &["h2", "http/1.1"], c.validation.as_ref()));
        listener.filter_chains.push(chain);
    }
    listener
}

/// The transport socket of a filter chain that ends TLS with the certificates of `secrets`
/// (fetched over SDS), offering `alpn`, and checking client certificates with `validation`:
/// required and checked against its CAs, or with `AllowInsecureFallback` asked for and let
/// through whatever they are.
pub fn terminate(secrets: &[Key], alpn: &[&str], validation: Option<&ClientValidation>) -> TransportSocket {
    let context = DownstreamTlsContext {
        require_client_certificate: validation.map(|v| BoolValue { value: !v.insecure }),
        common_tls_context: Some(CommonTlsContext {
            validation_context: validation.map(|v| CertificateValidationContext {
                trusted_ca: Some(DataSource {
                    specifier: Some(data_source::Specifier::InlineBytes(v.ca.clone())),
                    ..Default::default()
                }),
                trust_chain_verification: i32::from(v.insecure),
                match_typed_subject_alt_names: Vec::new(),
            }),
            alpn_protocols: alpn.iter().map(|&a| a.to_owned()).collect(),
            tls_certificate_sds_secret_configs: secrets
                .iter()
                .map(|k| SdsSecretConfig { name: secret_name(k), sds_config: Some(ads()) })
                .collect(),
        }),
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(pack(&context))),
    }
}

/// The TLS inspector, which reads a connection's server name (SNI) for filter chain matches.
pub fn inspector() -> ListenerFilter {
    ListenerFilter {
        name: "envoy.filters.listener.tls_inspector".into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(pack(&TlsInspector {}))),
        ..Default::default()
    }
}

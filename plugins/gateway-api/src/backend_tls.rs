//! BackendTLSPolicy: TLS from the gateway to a Service's pods.
//!
//! A policy targets Services (a `sectionName` narrows it to one port). Its CA bundles come from
//! ConfigMaps (`ca.crt`) or Secrets (`ca.crt`) in its namespace; Envoy asks for
//! `validation.hostname` as the server name (SNI) and checks the certificate chains to those
//! CAs and carries the `subjectAltNames` (the hostname when none are given).
//!
//! Two policies for the same Service port conflict: the older one (by `creationTimestamp`, then
//! `namespace/name`) applies, the other is `Accepted` False (`Conflicted`); one for a port
//! (`sectionName`) and one for the whole Service do not conflict, the port's applies there. A
//! policy whose CA bundles do not resolve is `Accepted` False (`NoValidCACertificate`), and the
//! ports it targets are not sent plaintext instead: their clusters get no endpoints, so
//! requests to them are answered 503. Status is per ancestor: each Gateway of ours whose
//! routes send to a targeted Service.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde_json::json;

use crate::model::{BackendTlsPolicySpec, SecretRef};
use crate::status::{Condition, ParentStatus, Statuses};
use crate::world::{Doc, GATEWAY_GROUP, Key, World};

/// TLS to a backend, as a policy asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    /// The CA bundle (PEM) the backend's certificate must chain to.
    pub ca: Vec<u8>,
    /// The server name to ask for.
    pub sni: String,
    /// The names the certificate must carry: (`2` DNS or `3` URI, the name).
    pub names: Vec<(i32, String)>,
}

/// What applies to a Service port.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Tls(Upstream),
    /// A policy targets it but cannot be applied: the port is not used at all.
    Unusable,
}

/// The policies in force, by target `(namespace, service, sectionName)`.
#[derive(Debug, Default)]
pub struct Policies {
    by_target: BTreeMap<(String, String, Option<String>), Outcome>,
}

impl Policies {
    /// What applies to port `port_name` of the Service `(namespace, service)`: its own
    /// policy, else the whole Service's.
    pub fn for_port(&self, namespace: &str, service: &str, port_name: Option<&str>) -> Option<&Outcome> {
        let key = |section: Option<&str>| (namespace.to_owned(), service.to_owned(), section.map(str::to_owned));
        port_name.and_then(|p| self.by_target.get(&key(Some(p)))).or_else(|| self.by_target.get(&key(None)))
    }

    /// Reads every policy, working out conflicts and statuses (into `statuses`), toward the
    /// Gateways of ours in `gateways`.
    pub fn read(world: &World, gateways: &BTreeSet<&Key>, statuses: &mut Statuses) -> Policies {
        let mut out = Policies::default();
        let mut ordered: Vec<&Doc<BackendTlsPolicySpec>> = world.backend_tls_policies.iter().collect();
        ordered.sort_by_key(|p| {
            (p.metadata.creation_timestamp.clone().unwrap_or_default(), p.namespace.clone(), p.name.clone())
        });
        for policy in ordered {
            let targets: Vec<(String, String, Option<String>)> = policy
                .spec
                .target_refs
                .iter()
                .filter(|t| t.group.as_deref().unwrap_or("").is_empty() && t.kind.as_deref() == Some("Service"))
                .map(|t| (policy.namespace.clone(), t.name.clone(), t.section_name.clone()))
                .collect();
            let conditions = match upstream(world, policy) {
                Err(conditions) => {
                    for t in &targets {
                        out.by_target.entry(t.clone()).or_insert(Outcome::Unusable);
                    }
                    conditions
                }
                Ok(tls) => match targets.iter().find(|t| out.by_target.contains_key(*t)) {
                    Some((_, service, section)) => vec![Condition::no(
                        "Accepted",
                        "Conflicted",
                        format!(
                            "an older BackendTLSPolicy already applies to Service {service}{}",
                            section.as_ref().map(|s| format!(" port {s}")).unwrap_or_default()
                        ),
                    )],
                    None => {
                        for t in &targets {
                            out.by_target.insert(t.clone(), Outcome::Tls(tls.clone()));
                        }
                        vec![Condition::yes("Accepted", "Accepted"), Condition::yes("ResolvedRefs", "ResolvedRefs")]
                    }
                },
            };
            let ancestors: Vec<ParentStatus> = ancestors(world, gateways, &targets)
                .into_iter()
                .map(|(namespace, name)| ParentStatus {
                    parent_ref: json!({"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": namespace, "name": name}),
                    conditions: conditions.clone(),
                })
                .collect();
            if !ancestors.is_empty() {
                statuses.policies.insert(policy.id.clone(), ancestors);
            }
        }
        out
    }
}

/// The Gateways of ours whose routes send to a Service among `targets`.
fn ancestors(world: &World, gateways: &BTreeSet<&Key>, targets: &[(String, String, Option<String>)]) -> BTreeSet<Key> {
    let mut out = BTreeSet::new();
    for ((kind, _, _), route) in &world.routes {
        let sends_there = route.spec.rules.iter().flat_map(|r| &r.backend_refs).any(|b| {
            crate::backends::resolve(world, kind, &route.namespace, b)
                .is_ok_and(|b| targets.iter().any(|(ns, svc, _)| *ns == b.namespace && *svc == b.service))
        });
        if !sends_there {
            continue;
        }
        for p in &route.spec.parent_refs {
            let key = (p.namespace.clone().unwrap_or_else(|| route.namespace.clone()), p.name.clone());
            if p.kind.as_deref().unwrap_or("Gateway") == "Gateway" && gateways.contains(&key) {
                out.insert(key);
            }
        }
    }
    out
}

/// The TLS a policy asks for, or the conditions saying why it cannot be applied.
fn upstream(world: &World, policy: &Doc<BackendTlsPolicySpec>) -> Result<Upstream, Vec<Condition>> {
    let v = &policy.spec.validation;
    let refuse = |reason: &'static str, why: String| {
        vec![Condition::no("Accepted", "NoValidCACertificate", why.clone()), Condition::no("ResolvedRefs", reason, why)]
    };
    if v.ca_certificate_refs.is_empty() {
        let why = match &v.well_known_ca_certificates {
            Some(w) => format!("wellKnownCACertificates {w:?} is not supported; name a CA bundle in caCertificateRefs"),
            None => "validation.caCertificateRefs names no CA bundle".to_owned(),
        };
        return Err(refuse("InvalidCACertificateRef", why));
    }
    let mut ca = Vec::new();
    for (i, r) in v.ca_certificate_refs.iter().enumerate() {
        let at = format!("spec.validation.caCertificateRefs[{i}]");
        ca.extend(bundle(world, &policy.namespace, r).map_err(|(reason, why)| refuse(reason, format!("{at}: {why}")))?);
    }
    let names = if v.subject_alt_names.is_empty() {
        vec![(2, v.hostname.clone())]
    } else {
        v.subject_alt_names
            .iter()
            .filter_map(|s| match s.kind.as_str() {
                "Hostname" => Some((2, s.hostname.clone()?)),
                "URI" => Some((3, s.uri.clone()?)),
                _ => None,
            })
            .collect()
    };
    Ok(Upstream { ca, sni: v.hostname.clone(), names })
}

/// The PEM CA bundle a reference names: `ca.crt` of a ConfigMap or a Secret in `namespace`.
fn bundle(world: &World, namespace: &str, r: &SecretRef) -> Result<Vec<u8>, (&'static str, String)> {
    let (group, kind) = (r.group.as_deref().unwrap_or(""), r.kind.as_deref().unwrap_or("ConfigMap"));
    let key = (namespace.to_owned(), r.name.clone());
    let pem = match (group, kind) {
        ("" | "core", "ConfigMap") => world.config_maps.get(&key).and_then(|m| m.spec.data.get("ca.crt").cloned()),
        ("" | "core", "Secret") => world
            .secrets
            .get(&key)
            .and_then(|s| s.spec.data.get("ca.crt"))
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b.trim()).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        _ => return Err(("InvalidKind", format!("names a {group}/{kind}; CA bundles are ConfigMaps or Secrets"))),
    };
    match pem {
        Some(p) if p.contains("-----BEGIN CERTIFICATE-----") => Ok(p.into_bytes()),
        Some(_) => {
            Err(("InvalidCACertificateRef", format!("{kind} {namespace}/{}: ca.crt holds no PEM certificate", r.name)))
        }
        None => Err(("InvalidCACertificateRef", format!("{kind} {namespace}/{} with ca.crt does not exist", r.name))),
    }
}

/// The transport socket of a cluster whose endpoints are reached over TLS as `tls` says,
/// offering HTTP/2 by ALPN when the cluster speaks it (`h2`), and presenting the client
/// certificate of the Secret `client` (over SDS) when a Gateway names one.
pub fn transport_socket(
    tls: &Upstream,
    h2: bool,
    client: Option<&Key>,
) -> xdst_guest::envoy::envoy::config::core::v3::TransportSocket {
    use xdst_guest::envoy::envoy::config::core::v3::{DataSource, TransportSocket, data_source, transport_socket};
    use xdst_guest::envoy::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};

    use crate::extensions::{
        CertificateValidationContext, CommonTlsContext, SubjectAltNameMatcher, UpstreamTlsContext,
    };
    let context = UpstreamTlsContext {
        sni: tls.sni.clone(),
        common_tls_context: Some(CommonTlsContext {
            validation_context: Some(CertificateValidationContext {
                trusted_ca: Some(DataSource {
                    specifier: Some(data_source::Specifier::InlineBytes(tls.ca.clone())),
                    ..Default::default()
                }),
                trust_chain_verification: 0,
                match_typed_subject_alt_names: tls
                    .names
                    .iter()
                    .map(|(san_type, name)| SubjectAltNameMatcher {
                        san_type: *san_type,
                        matcher: Some(StringMatcher {
                            match_pattern: Some(string_matcher::MatchPattern::Exact(name.clone())),
                            ..Default::default()
                        }),
                    })
                    .collect(),
            }),
            alpn_protocols: if h2 { vec!["h2".to_owned()] } else { Vec::new() },
            tls_certificate_sds_secret_configs: client
                .map(|k| xdst_guest::envoy::envoy::extensions::transport_sockets::tls::v3::SdsSecretConfig {
                    name: crate::tls::secret_name(k),
                    sds_config: Some(xdst_guest::build::ads()),
                })
                .into_iter()
                .collect(),
        }),
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(xdst_guest::pack(&context))),
    }
}

//! Client identity (mTLS) and what each identity may use. A client certificate's identity is
//! its first URI SAN (a SPIFFE ID, say), else its first DNS SAN, else its subject CN, and it
//! keeps that type: a pattern matches identities of one type only (an identity pattern with
//! `://` in it is for URI SANs, any other for DNS SANs, `cn:` for subject CNs; `uri:` and
//! `dns:` say so explicitly), so a certificate whose CN or DNS name reads like a SPIFFE ID is
//! not taken for one. The `identities:` rules of the configuration file map identity patterns
//! to the node groups and node ids an identity may use; a stream naming anything else is
//! refused before it is attached to a rollout or sent a resource.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

/// Where in its certificate an identity was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdentityKind {
    /// A URI subject alternative name (a SPIFFE ID).
    Uri,
    /// A DNS subject alternative name.
    Dns,
    /// The subject's common name.
    Cn,
}

/// The identity of a connection's client certificate, put in each request's extensions by the
/// accept loop. Shown as its name, a CN as `cn:<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerIdentity {
    pub kind: IdentityKind,
    pub name: Arc<str>,
}

impl PeerIdentity {
    pub fn new(kind: IdentityKind, name: &str) -> Self {
        PeerIdentity { kind, name: name.into() }
    }
}

impl IdentityKind {
    /// What it is, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            IdentityKind::Uri => "URI SAN",
            IdentityKind::Dns => "DNS SAN",
            IdentityKind::Cn => "subject CN",
        }
    }
}

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            IdentityKind::Uri | IdentityKind::Dns => f.write_str(&self.name),
            IdentityKind::Cn => write!(f, "cn:{}", self.name),
        }
    }
}

/// The identity a DER certificate names (see the module docs); None when it names none or
/// does not parse (a verified chain always parses).
pub fn of_certificate(der: &[u8]) -> Option<PeerIdentity> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let names =
        cert.subject_alternative_name().ok().flatten().map(|s| s.value.general_names.clone()).unwrap_or_default();
    let uri = names.iter().find_map(|n| match n {
        GeneralName::URI(u) => Some((IdentityKind::Uri, *u)),
        _ => None,
    });
    let dns = || {
        names.iter().find_map(|n| match n {
            GeneralName::DNSName(d) => Some((IdentityKind::Dns, *d)),
            _ => None,
        })
    };
    let cn = || cert.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok()).map(|c| (IdentityKind::Cn, c));
    let (kind, name) = uri.or_else(dns).or_else(cn)?;
    (!name.is_empty()).then(|| PeerIdentity::new(kind, name))
}

/// A pattern of identities: a [`Pattern`] over names of one [`IdentityKind`] (`*` alone:
/// every identity of every kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityPattern {
    /// None only for `*`.
    pub kind: Option<IdentityKind>,
    pub name: Pattern,
}

impl IdentityPattern {
    pub fn matches(&self, id: &PeerIdentity) -> bool {
        self.kind.is_none_or(|k| k == id.kind) && self.name.matches(&id.name)
    }
}

impl std::str::FromStr for IdentityPattern {
    type Err = String;

    /// The error is the message a configuration error shows for the field (through serde).
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "*" {
            return Ok(IdentityPattern { kind: None, name: Pattern::Prefix(String::new()) });
        }
        let (kind, name) = if let Some(rest) = s.strip_prefix("uri:") {
            (IdentityKind::Uri, rest)
        } else if let Some(rest) = s.strip_prefix("dns:") {
            (IdentityKind::Dns, rest)
        } else if let Some(rest) = s.strip_prefix("cn:") {
            (IdentityKind::Cn, rest)
        } else if s.contains("://") {
            (IdentityKind::Uri, s)
        } else {
            (IdentityKind::Dns, s)
        };
        Ok(IdentityPattern { kind: Some(kind), name: name.parse().map_err(|e| format!("identity {s:?}: {e}"))? })
    }
}

impl fmt::Display for IdentityPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            None => f.write_str("*"),
            Some(IdentityKind::Uri) if self.name.to_string().contains("://") => write!(f, "{}", self.name),
            Some(IdentityKind::Uri) => write!(f, "uri:{}", self.name),
            Some(IdentityKind::Dns) => write!(f, "dns:{}", self.name),
            Some(IdentityKind::Cn) => write!(f, "cn:{}", self.name),
        }
    }
}

impl<'de> Deserialize<'de> for IdentityPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// An exact name, or a prefix followed by `*` (`*` alone matches everything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    Exact(String),
    Prefix(String),
}

impl Pattern {
    pub fn matches(&self, s: &str) -> bool {
        match self {
            Pattern::Exact(e) => e == s,
            Pattern::Prefix(p) => s.starts_with(p.as_str()),
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;

    /// The error is the message a configuration error shows for the field (through serde).
    fn from_str(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("an empty pattern matches nothing; use \"*\" for anything".into());
        }
        match s.strip_suffix('*') {
            Some(prefix) if prefix.contains('*') => Err(format!("{s:?}: `*` may only end a pattern")),
            Some(prefix) => Ok(Pattern::Prefix(prefix.into())),
            None if s.contains('*') => Err(format!("{s:?}: `*` may only end a pattern")),
            None => Ok(Pattern::Exact(s.into())),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Exact(e) => f.write_str(e),
            Pattern::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// One entry of `identities:`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Which certificate identities the rule is for.
    pub identity: IdentityPattern,
    /// The node groups they may use.
    pub groups: Vec<Pattern>,
    /// The node ids they may use (any, when left out).
    #[serde(default = "any")]
    pub nodes: Vec<Pattern>,
    /// Whether these identities are the groups' own proxies: their rejections (NACKs) count
    /// toward holding a document for the group, and they may be its canaries (design 016,
    /// part 3b). Off when left out: anyone else's rejection is held at its own node only.
    #[serde(default)]
    pub proxy: bool,
}

fn any() -> Vec<Pattern> {
    vec![Pattern::Prefix(String::new())]
}

/// The rules, in file order; an identity may use what any rule matching it allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules(pub Vec<Rule>);

impl Rules {
    /// Whether `identity` may use `group` with node id `node`; the refusal says what is
    /// missing, naming the identity, the group and the node. The error is the text the client
    /// is sent (`PERMISSION_DENIED`).
    pub fn authorize(&self, identity: &PeerIdentity, group: &str, node: &str) -> Result<(), String> {
        let mut matching = self.0.iter().filter(|r| r.identity.matches(identity)).peekable();
        if matching.peek().is_none() {
            return Err(format!(
                "no identity rule matches the client certificate's identity {:?} (a {})",
                identity.to_string(),
                identity.kind.describe()
            ));
        }
        let mut group_ok = false;
        for rule in matching {
            if rule.groups.iter().any(|g| g.matches(group)) {
                group_ok = true;
                if rule.nodes.iter().any(|n| n.matches(node)) {
                    return Ok(());
                }
            }
        }
        Err(if group_ok {
            format!("identity {:?} may not use node id {node:?} (in node group {group:?})", identity.to_string())
        } else {
            format!("identity {:?} may not use node group {group:?}", identity.to_string())
        })
    }

    /// Whether `identity`, using `group` as node `node`, is one of the group's proxies: a rule
    /// with `proxy: true` matches it and allows both.
    pub fn is_proxy(&self, identity: &PeerIdentity, group: &str, node: &str) -> bool {
        self.0.iter().any(|r| {
            r.proxy
                && r.identity.matches(identity)
                && r.groups.iter().any(|g| g.matches(group))
                && r.nodes.iter().any(|n| n.matches(node))
        })
    }

    /// Whether `group` is given the Secrets that are not made for one group alone (a plugin's
    /// untagged ones, the default set's): some rule with `proxy: true` allows it. Every other
    /// group gets only its own (issue 49, item 6): an identity the rules confine to a team's
    /// group is never handed the keys of the platform's Gateways.
    pub fn gives_secrets(&self, group: &str) -> bool {
        self.0.iter().any(|r| r.proxy && r.groups.iter().any(|g| g.matches(group)))
    }

    /// Whether some rule names `group` exactly (a group the rules define).
    pub fn defines_group(&self, group: &str) -> bool {
        self.0.iter().flat_map(|r| &r.groups).any(|g| *g == Pattern::Exact(group.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(yaml: &str) -> Rules {
        Rules(serde_yaml_ng::from_str(yaml).unwrap())
    }

    #[test]
    fn patterns_are_exact_or_end_in_a_star() {
        let p: Pattern = "spiffe://example.org/team-a/*".parse().unwrap();
        assert!(p.matches("spiffe://example.org/team-a/envoy"));
        assert!(!p.matches("spiffe://example.org/team-b/envoy"));
        let e: Pattern = "team-a".parse().unwrap();
        assert!(e.matches("team-a") && !e.matches("team-ab"));
        assert!("*".parse::<Pattern>().unwrap().matches(""));
        assert!("a*b".parse::<Pattern>().unwrap_err().contains("may only end"));
        assert!("*a*".parse::<Pattern>().unwrap_err().contains("may only end"));
        assert!("".parse::<Pattern>().is_err());
    }

    fn uri(s: &str) -> PeerIdentity {
        PeerIdentity::new(IdentityKind::Uri, s)
    }

    #[test]
    fn an_identity_may_use_what_one_of_its_rules_allows() {
        let r = rules(
            "- {identity: 'spiffe://x/team-a/*', groups: [team-a], nodes: ['a-*']}\n\
             - {identity: 'spiffe://x/team-a/admin', groups: [team-a-canary]}\n\
             - {identity: ops.example.org, groups: ['*']}",
        );
        assert_eq!(r.authorize(&uri("spiffe://x/team-a/envoy"), "team-a", "a-1"), Ok(()));
        let e = r.authorize(&uri("spiffe://x/team-a/envoy"), "team-b", "a-1").unwrap_err();
        assert!(e.contains("\"spiffe://x/team-a/envoy\"") && e.contains("node group \"team-b\""), "{e}");
        let e = r.authorize(&uri("spiffe://x/team-a/envoy"), "team-a", "b-1").unwrap_err();
        assert!(e.contains("node id \"b-1\""), "{e}");
        // Two rules match the admin identity; the second allows any node id in the canary group.
        assert_eq!(r.authorize(&uri("spiffe://x/team-a/admin"), "team-a-canary", "b-1"), Ok(()));
        assert_eq!(r.authorize(&PeerIdentity::new(IdentityKind::Dns, "ops.example.org"), "team-b", "anything"), Ok(()));
        let e = r.authorize(&uri("spiffe://x/team-c/envoy"), "team-a", "a-1").unwrap_err();
        assert!(e.contains("no identity rule matches"), "{e}");
        assert!(r.defines_group("team-a") && r.defines_group("team-a-canary") && !r.defines_group("team-b"));
        assert!(!r.is_proxy(&uri("spiffe://x/team-a/envoy"), "team-a", "a-1"), "no rule says proxy");
        let p = rules(
            "- {identity: 'spiffe://x/gw/*', groups: [gw], nodes: ['gw-*'], proxy: true}\n\
             - {identity: 'spiffe://x/team-c/*', groups: ['*']}",
        );
        assert!(p.is_proxy(&uri("spiffe://x/gw/envoy"), "gw", "gw-1"));
        assert!(!p.is_proxy(&uri("spiffe://x/gw/envoy"), "other", "gw-1"), "a group its rule does not allow");
        assert!(!p.is_proxy(&uri("spiffe://x/gw/envoy"), "gw", "x-1"), "a node id its rule does not allow");
        assert!(!p.is_proxy(&uri("spiffe://x/team-c/envoy"), "gw", "gw-1"), "allowed the group, not its proxy");
    }

    /// Issue 33, item 5: a CN or DNS name that reads like a SPIFFE ID is not one.
    #[test]
    fn a_pattern_matches_identities_of_its_own_kind_only() {
        let r = rules(
            "- {identity: 'spiffe://example.org/ops/*', groups: ['*']}\n\
             - {identity: 'cn:legacy-*', groups: [legacy]}\n\
             - {identity: 'dns:edge.example.org', groups: [edge]}\n\
             - {identity: 'uri:urn:team:*', groups: [urn]}",
        );
        let as_cn = PeerIdentity::new(IdentityKind::Cn, "spiffe://example.org/ops/cn");
        let as_dns = PeerIdentity::new(IdentityKind::Dns, "spiffe://example.org/ops/cn");
        for forged in [&as_cn, &as_dns] {
            let e = r.authorize(forged, "team-a", "n").unwrap_err();
            assert!(e.contains("no identity rule matches"), "{forged:?}: {e}");
        }
        assert!(r.authorize(&as_cn, "team-a", "n").unwrap_err().contains("cn:spiffe://example.org/ops/cn"));
        assert_eq!(r.authorize(&uri("spiffe://example.org/ops/cn"), "team-a", "n"), Ok(()));
        assert_eq!(r.authorize(&PeerIdentity::new(IdentityKind::Cn, "legacy-1"), "legacy", "n"), Ok(()));
        assert!(r.authorize(&PeerIdentity::new(IdentityKind::Dns, "legacy-1"), "legacy", "n").is_err());
        assert_eq!(r.authorize(&PeerIdentity::new(IdentityKind::Dns, "edge.example.org"), "edge", "n"), Ok(()));
        assert!(r.authorize(&PeerIdentity::new(IdentityKind::Cn, "edge.example.org"), "edge", "n").is_err());
        assert_eq!(r.authorize(&uri("urn:team:a"), "urn", "n"), Ok(()));
        let any: IdentityPattern = "*".parse().unwrap();
        assert!(any.matches(&as_cn) && any.matches(&as_dns) && any.matches(&uri("x:y")));
        for s in ["spiffe://x/*", "uri:urn:x", "dns:a.example", "cn:a*", "*"] {
            assert_eq!(s.parse::<IdentityPattern>().unwrap().to_string(), s);
        }
        assert_eq!("a.example".parse::<IdentityPattern>().unwrap().to_string(), "dns:a.example");
        assert!("cn:".parse::<IdentityPattern>().is_err());
    }

    #[test]
    fn a_certificate_names_its_uri_san_then_dns_san_then_cn() {
        let dir = tempfile::tempdir().unwrap();
        let make = |name: &str, ext: Option<&str>| {
            let key = dir.path().join(format!("{name}.key"));
            let crt = dir.path().join(format!("{name}.der"));
            let mut cmd = std::process::Command::new("openssl");
            cmd.args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
                .args(["-subj", &format!("/CN={name}"), "-outform", "DER", "-keyout"])
                .arg(&key)
                .arg("-out")
                .arg(&crt);
            if let Some(ext) = ext {
                cmd.args(["-addext", ext]);
            }
            assert!(cmd.output().unwrap().status.success());
            std::fs::read(&crt).unwrap()
        };
        let id = |der: Vec<u8>| of_certificate(&der).map(|i| i.to_string());
        assert_eq!(
            id(make("a", Some("subjectAltName=DNS:a.example,URI:spiffe://x/a,URI:spiffe://x/b"))).as_deref(),
            Some("spiffe://x/a")
        );
        assert_eq!(id(make("b", Some("subjectAltName=DNS:b.example,DNS:c.example"))).as_deref(), Some("b.example"));
        assert_eq!(id(make("cn-only", None)).as_deref(), Some("cn:cn-only"));
        let b = of_certificate(&make("b2", Some("subjectAltName=DNS:b.example"))).unwrap();
        assert_eq!(b.kind, IdentityKind::Dns);
        assert_eq!(of_certificate(b"not a certificate"), None);
    }
}

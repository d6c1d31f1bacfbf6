//! Client identity (mTLS) and what each identity may use. A client certificate's identity is
//! its first URI SAN (a SPIFFE ID, say), else its first DNS SAN, else its subject CN. The
//! `identities:` rules of the configuration file map identity patterns to the node groups and
//! node ids an identity may use; a stream naming anything else is refused before it is
//! attached to a rollout or sent a resource.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

/// The identity of a connection's client certificate, put in each request's extensions by the
/// accept loop.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerIdentity(pub Arc<str>);

impl fmt::Display for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
        GeneralName::URI(u) => Some(*u),
        _ => None,
    });
    let dns = || {
        names.iter().find_map(|n| match n {
            GeneralName::DNSName(d) => Some(*d),
            _ => None,
        })
    };
    let cn = || cert.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok());
    let id = uri.or_else(dns).or_else(cn)?;
    (!id.is_empty()).then(|| PeerIdentity(id.into()))
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
    pub identity: Pattern,
    /// The node groups they may use.
    pub groups: Vec<Pattern>,
    /// The node ids they may use (any, when left out).
    #[serde(default = "any")]
    pub nodes: Vec<Pattern>,
}

fn any() -> Vec<Pattern> {
    vec![Pattern::Prefix(String::new())]
}

/// The rules, in file order; an identity may use what any rule matching it allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules(pub Vec<Rule>);

impl Rules {
    /// Whether `identity` may use `group` with node id `node`; the refusal says what is
    /// missing, naming the identity, the group and the node.
    pub fn authorize(&self, identity: &str, group: &str, node: &str) -> Result<(), String> {
        let mut matching = self.0.iter().filter(|r| r.identity.matches(identity)).peekable();
        if matching.peek().is_none() {
            return Err(format!("no identity rule matches the client certificate's identity {identity:?}"));
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
            format!("identity {identity:?} may not use node id {node:?} (in node group {group:?})")
        } else {
            format!("identity {identity:?} may not use node group {group:?}")
        })
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

    #[test]
    fn an_identity_may_use_what_one_of_its_rules_allows() {
        let r = rules(
            "- {identity: 'spiffe://x/team-a/*', groups: [team-a], nodes: ['a-*']}\n\
             - {identity: 'spiffe://x/team-a/admin', groups: [team-a-canary]}\n\
             - {identity: ops.example.org, groups: ['*']}",
        );
        assert_eq!(r.authorize("spiffe://x/team-a/envoy", "team-a", "a-1"), Ok(()));
        let e = r.authorize("spiffe://x/team-a/envoy", "team-b", "a-1").unwrap_err();
        assert!(e.contains("\"spiffe://x/team-a/envoy\"") && e.contains("node group \"team-b\""), "{e}");
        let e = r.authorize("spiffe://x/team-a/envoy", "team-a", "b-1").unwrap_err();
        assert!(e.contains("node id \"b-1\""), "{e}");
        // Two rules match the admin identity; the second allows any node id in the canary group.
        assert_eq!(r.authorize("spiffe://x/team-a/admin", "team-a-canary", "b-1"), Ok(()));
        assert_eq!(r.authorize("ops.example.org", "team-b", "anything"), Ok(()));
        let e = r.authorize("spiffe://x/team-c/envoy", "team-a", "a-1").unwrap_err();
        assert!(e.contains("no identity rule matches"), "{e}");
        assert!(r.defines_group("team-a") && r.defines_group("team-a-canary") && !r.defines_group("team-b"));
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
        let id = |der: Vec<u8>| of_certificate(&der).map(|i| i.0.to_string());
        assert_eq!(
            id(make("a", Some("subjectAltName=DNS:a.example,URI:spiffe://x/a,URI:spiffe://x/b"))).as_deref(),
            Some("spiffe://x/a")
        );
        assert_eq!(id(make("b", Some("subjectAltName=DNS:b.example,DNS:c.example"))).as_deref(), Some("b.example"));
        assert_eq!(id(make("cn-only", None)).as_deref(), Some("cn-only"));
        assert_eq!(of_certificate(b"not a certificate"), None);
    }
}

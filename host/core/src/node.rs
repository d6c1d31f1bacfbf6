//! Node groups: which resource set a connecting node is served.

use std::fmt;
use std::str::FromStr;

use envoy_types::pb::envoy::config::core::v3::Node;

/// How a node's group is derived. Nodes in one group share one resource set, translated
/// once. The default, `cluster`, groups Envoys by `--service-cluster` / `node.cluster`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GroupKey {
    #[default]
    Cluster,
    Id,
    /// A string field of `node.metadata`.
    Metadata(String),
}

impl GroupKey {
    /// The group a node belongs to; `""` (the default group) when the field is unset.
    pub fn group_of(&self, node: &Node) -> String {
        match self {
            GroupKey::Cluster => node.cluster.clone(),
            GroupKey::Id => node.id.clone(),
            GroupKey::Metadata(key) => node
                .metadata
                .as_ref()
                .and_then(|m| m.fields.get(key))
                .and_then(|v| match &v.kind {
                    Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default(),
        }
    }
}

impl FromStr for GroupKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cluster" => Ok(GroupKey::Cluster),
            "id" => Ok(GroupKey::Id),
            _ => match s.strip_prefix("metadata:") {
                Some(k) if !k.is_empty() => Ok(GroupKey::Metadata(k.to_owned())),
                _ => Err(format!("unknown node group key {s:?}: expected cluster, id or metadata:<key>")),
            },
        }
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupKey::Cluster => f.write_str("cluster"),
            GroupKey::Id => f.write_str("id"),
            GroupKey::Metadata(k) => write!(f, "metadata:{k}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};

    #[test]
    fn keys() {
        let mut node = Node { id: "n1".into(), cluster: "edge".into(), ..Default::default() };
        node.metadata = Some(Struct {
            fields: [("fleet".to_string(), Value { kind: Some(Kind::StringValue("blue".into())) })]
                .into_iter()
                .collect(),
        });
        assert_eq!(GroupKey::Cluster.group_of(&node), "edge");
        assert_eq!(GroupKey::Id.group_of(&node), "n1");
        assert_eq!("metadata:fleet".parse::<GroupKey>().unwrap().group_of(&node), "blue");
        assert_eq!("metadata:none".parse::<GroupKey>().unwrap().group_of(&node), "");
        assert!("metadata:".parse::<GroupKey>().is_err());
        assert!("zone".parse::<GroupKey>().is_err());
    }
}

//! What SotW and Delta streams share: the stream's scope, protocol errors, the events a
//! request produces, and the per-type status shown on `/debug/nodes`.

use std::sync::Arc;
use std::time::SystemTime;

use envoy_types::pb::envoy::config::core::v3::Node;

/// Which types a stream may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// An aggregated (ADS) stream: any type URL.
    Aggregated,
    /// A per-type service stream (`StreamClusters`, `DeltaListeners`, ...).
    Single(&'static str),
}

/// Limits that keep one client from exhausting the server.
pub const MAX_TYPES_PER_STREAM: usize = 64;
pub const MAX_NAMES_PER_TYPE: usize = 100_000;

/// A request the protocol does not allow; the stream is closed with this error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("the first request on a stream must carry a node")]
    MissingNode,
    #[error("request has no type_url")]
    MissingTypeUrl,
    #[error("type_url {got:?} on a stream for {expected:?}")]
    WrongType { expected: &'static str, got: String },
    #[error("more than {MAX_TYPES_PER_STREAM} types on one stream")]
    TooManyTypes,
    #[error("more than {MAX_NAMES_PER_TYPE} resource names for {0}")]
    TooManyNames(String),
    #[error("{field} is {len} bytes; at most {MAX_NODE_NAME} are accepted")]
    NodeNameTooLong { field: &'static str, len: usize },
}

/// What a request meant, for metrics and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The client accepted the response with this nonce.
    Ack { type_url: Arc<str>, version: String, nonce: String },
    /// The client rejected the response with this nonce (SOTW-3, DELTA-1).
    Nack { type_url: Arc<str>, nonce: String, message: String },
    /// A SotW request whose nonce is not the latest for its type; ignored (SOTW-4).
    Stale { type_url: Arc<str>, nonce: String },
    /// A client (re)starting a type said what it already holds (SOTW-12, DELTA-3).
    Resumed { type_url: Arc<str>, holds: Holds },
}

/// What a reconnecting client says it holds of a type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holds {
    /// SotW: the version of the last response it accepted.
    Version(String),
    /// Delta: the version of every resource it holds.
    Resources(Vec<(String, String)>),
}

/// The last rejection of a type by the client.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Nack {
    /// The version the client kept (SotW `version_info`), if it said.
    pub version_kept: String,
    pub nonce: String,
    pub message: String,
    #[serde(serialize_with = "serialize_time")]
    pub at: SystemTime,
}

fn serialize_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    s.serialize_f64((secs * 1000.0).round() / 1000.0)
}

/// Flow control of one type on one stream (design 022): once a response of the type is out,
/// no other goes until the client answers that one (SOTW-3, DELTA-1); what changes meanwhile
/// is merged into the response after the answer, which the machines work out from the latest
/// state. So a stream holds at most one response per type however fast things change, and a
/// client that never answers stops getting that type and costs nothing more.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlowControl {
    /// A response is out and its answer has not come.
    awaiting: bool,
    /// Changes that came while a response awaited its answer (each merged into the next).
    merged: u32,
    /// When the oldest change not yet worked out came, while a response awaited its answer.
    owed_since: Option<SystemTime>,
}

impl FlowControl {
    /// A response of the type went out.
    pub fn sent(&mut self) {
        self.awaiting = true;
    }

    /// The client answered the response out (ACK or NACK): the next may go.
    pub fn answered(&mut self) {
        self.awaiting = false;
    }

    pub fn awaiting(&self) -> bool {
        self.awaiting
    }

    /// The state the type is served changed: merged into the next response if one awaits its
    /// answer (then true).
    pub fn changed(&mut self, now: SystemTime) -> bool {
        if self.awaiting {
            self.merged = self.merged.saturating_add(1);
            self.owed_since.get_or_insert(now);
        }
        self.awaiting
    }

    /// The type was worked out against the latest state: nothing is owed any more.
    pub fn worked_out(&mut self) {
        self.owed_since = None;
    }

    pub fn merged(&self) -> u32 {
        self.merged
    }

    pub fn owed_since(&self) -> Option<SystemTime> {
        self.owed_since
    }
}

fn serialize_opt_time<S: serde::Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => serialize_time(t, s),
        None => s.serialize_none(),
    }
}

/// Flow control over a stream's types (design 022), for `/debug/nodes`, the status page and
/// `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Flow {
    /// Responses out whose answer has not come (at most one per type).
    pub in_flight: u32,
    /// Changes merged into a later response while one awaited its answer, since the stream
    /// opened.
    pub merged: u64,
    /// When the oldest change the stream is owed came.
    #[serde(serialize_with = "serialize_opt_time")]
    pub owed_since: Option<SystemTime>,
}

impl Flow {
    pub fn of<'a>(types: impl IntoIterator<Item = &'a FlowControl>) -> Flow {
        types.into_iter().fold(Flow::default(), |mut f, t| {
            f.add(&Flow { in_flight: u32::from(t.awaiting), merged: u64::from(t.merged), owed_since: t.owed_since });
            f
        })
    }

    /// Adds `other` in: the counts summed, the older of the two owed changes.
    pub fn add(&mut self, other: &Flow) {
        self.in_flight += other.in_flight;
        self.merged += other.merged;
        self.owed_since = match (self.owed_since, other.owed_since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// A subscribed name the client is told does not exist (gRFC A88 and xRFC TP3:
/// `resource_errors`, status `NOT_FOUND`), so a client need not wait for its does-not-exist
/// timer (15 s in gRPC). Envoy 1.40 ignores the field; gRPC reads it behind
/// `GRPC_EXPERIMENTAL_XDS_DATA_ERROR_HANDLING`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceError {
    pub name: Arc<str>,
    pub message: String,
}

/// `google.rpc.Code.NOT_FOUND`.
pub const NOT_FOUND: i32 = 5;

/// The most names one response says do not exist. A client asking for more missing names
/// (up to [`MAX_NAMES_PER_TYPE`]) learns of the rest from its own timer: errors cost a message
/// each, and a hostile client must not turn its subscription into megabytes of them.
pub const MAX_ERRORS_PER_RESPONSE: usize = 100;

/// The names of `names` that are in neither `offered` (what the node is offered now) nor
/// `target` (what its group is served, the rollout's target), each as a [`ResourceError`],
/// and a digest of them (0 for none) to tell whether they changed. A name the plan holds back
/// is in the target, so it is on its way, not absent.
pub(crate) fn absent<'a>(
    type_url: &str,
    names: impl Iterator<Item = &'a Arc<str>>,
    offered: Option<&crate::snapshot::TypeSet>,
    target: Option<&crate::snapshot::TypeSet>,
) -> (Vec<ResourceError>, u64) {
    let mut digest = 0u64;
    let mut out = Vec::new();
    for name in names {
        if offered.is_some_and(|s| s.get(name).is_some()) || target.is_some_and(|s| s.get(name).is_some()) {
            continue;
        }
        if out.len() == MAX_ERRORS_PER_RESPONSE {
            break;
        }
        let h = crate::snapshot::pair_hash(name, "absent") as u64;
        digest = digest.wrapping_add(h | 1);
        let what = crate::types::short_name(type_url);
        out.push(ResourceError {
            name: name.clone(),
            message: format!("xdst: no {what} resource named {name:?} is served to this node's group"),
        });
    }
    (out, digest)
}

/// One type's state on one stream, as `/debug/nodes` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TypeStatus {
    pub type_url: String,
    pub wildcard: bool,
    pub subscribed_names: usize,
    pub version_sent: Option<String>,
    pub nonce_sent: Option<String>,
    pub version_acked: Option<String>,
    pub last_nack: Option<Nack>,
    /// A response of the type is out and its answer has not come (design 022).
    pub awaiting_answer: bool,
    /// Changes merged into a later response while one awaited its answer.
    pub merged: u32,
    /// When the oldest change the stream has not been sent came (while a response awaited
    /// its answer).
    #[serde(serialize_with = "serialize_opt_time")]
    pub owed_since: Option<SystemTime>,
}

/// The identity a stream learnt from its first request. Only these fields are kept:
/// Envoy's `node.extensions` alone runs to tens of kilobytes per stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeInfo {
    pub id: String,
    pub cluster: String,
    pub user_agent: String,
}

pub(crate) fn check_type<'a>(scope: &Scope, type_url: &'a str) -> Result<&'a str, ProtocolError> {
    match scope {
        Scope::Single(expected) if type_url.is_empty() => Ok(expected),
        Scope::Single(expected) if type_url != *expected => {
            Err(ProtocolError::WrongType { expected, got: type_url.to_owned() })
        }
        Scope::Aggregated if type_url.is_empty() => Err(ProtocolError::MissingTypeUrl),
        _ => Ok(type_url),
    }
}

/// The most of a client's NACK message that is kept (Envoy cuts its own to 4 KiB): the rest
/// is dropped where it enters, and every view shows the cut message.
pub const MAX_NACK_MESSAGE: usize = 4096;
/// The most of a node's user agent (name and version) that is kept.
pub const MAX_USER_AGENT: usize = 256;
/// The longest node id or cluster accepted: they name and group nodes, so one that is too
/// long is refused rather than cut (a cut name could be another node's).
pub const MAX_NODE_NAME: usize = 1024;

/// A client's NACK message as it is kept.
pub(crate) fn nack_message(message: &str) -> String {
    crate::limits::clip(message, MAX_NACK_MESSAGE, crate::limits::Limit::ClientText)
}

pub(crate) fn node_info(current: &mut Option<NodeInfo>, node: Option<&Node>) -> Result<(), ProtocolError> {
    match (current.as_ref(), node) {
        (None, None) => Err(ProtocolError::MissingNode),
        (None, Some(n)) => {
            for (field, value) in [("node.id", &n.id), ("node.cluster", &n.cluster)] {
                if value.len() > MAX_NODE_NAME {
                    crate::limits::Limit::NodeName.hit();
                    return Err(ProtocolError::NodeNameTooLong { field, len: value.len() });
                }
            }
            use envoy_types::pb::envoy::config::core::v3::node::UserAgentVersionType;
            let agent = match &n.user_agent_version_type {
                Some(UserAgentVersionType::UserAgentVersion(v)) => format!("{} {}", n.user_agent_name, v),
                Some(UserAgentVersionType::UserAgentBuildVersion(b)) => match &b.version {
                    Some(v) => format!("{} {}.{}.{}", n.user_agent_name, v.major_number, v.minor_number, v.patch),
                    None => n.user_agent_name.clone(),
                },
                None => n.user_agent_name.clone(),
            };
            let user_agent = crate::limits::clip(&agent, MAX_USER_AGENT, crate::limits::Limit::ClientText);
            *current = Some(NodeInfo { id: n.id.clone(), cluster: n.cluster.clone(), user_agent });
            Ok(())
        }
        _ => Ok(()),
    }
}

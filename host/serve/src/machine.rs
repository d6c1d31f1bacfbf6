//! One trait over the SotW and Delta state machines, so one driver serves both.

use std::sync::Arc;
use std::time::SystemTime;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use xdst_core::delta::{DeltaResponse, DeltaStream};
use xdst_core::names::Names;
use xdst_core::rollout::Update;
use xdst_core::snapshot::Snapshot;
use xdst_core::sotw::{Resources, SotwResponse, SotwStream};
use xdst_core::stream::{Event, Flow, NodeInfo, ProtocolError, Scope, TypeStatus};

use crate::codec::Outgoing;

pub trait Machine: Send + 'static {
    type Request: prost::Message + Default + Send + 'static;
    type Response: Outgoing + Sent;
    const API: &'static str;

    fn new(scope: Scope) -> Self;
    fn request_node(req: &Self::Request) -> Option<&Node>;
    fn handle(&mut self, req: &Self::Request, now: SystemTime) -> Result<Vec<Event>, ProtocolError>;
    /// The snapshot changed; how many of its types await an answer, so have it merged.
    fn snapshot_changed(&mut self, now: SystemTime) -> usize;
    /// What to send now, given the node's offer; nothing for the types in `hold`. With
    /// `target` (what the node's group is served), names asked for that exist in neither are
    /// said not to exist (gRFC A88).
    fn poll(&mut self, snapshot: &Snapshot, hold: &[&str], target: Option<&Snapshot>) -> Vec<Self::Response>;
    /// Forget what was sent: the next poll sends every subscribed type in full.
    fn resync(&mut self);
    /// The subscriptions that changed since the last call: type, wildcard, names.
    fn subscription_changes(&mut self) -> Vec<(Arc<str>, bool, Names)>;
    /// A NACK's message, if the request carries one.
    fn request_error(req: &Self::Request) -> Option<&str>;
    fn node(&self) -> Option<&NodeInfo>;
    fn status(&self) -> Vec<TypeStatus>;
    fn flow(&self) -> Flow;
}

/// What a response says about itself, for metrics.
pub trait Sent {
    fn type_url(&self) -> &Arc<str>;
    fn nonce(&self) -> &Arc<str>;
    fn resource_count(&self) -> usize;
    /// What the client holds of the type once it accepts this response.
    fn update(&self) -> Update;
}

impl Sent for SotwResponse {
    fn type_url(&self) -> &Arc<str> {
        &self.type_url
    }
    fn nonce(&self) -> &Arc<str> {
        &self.nonce
    }
    fn resource_count(&self) -> usize {
        self.resources.len()
    }
    fn update(&self) -> Update {
        match &self.resources {
            Resources::All(set) => Update::Replace(set.clone()),
            Resources::Some(v) => Update::List { version: self.version.clone(), resources: v.clone() },
        }
    }
}

impl Sent for DeltaResponse {
    fn type_url(&self) -> &Arc<str> {
        &self.type_url
    }
    fn nonce(&self) -> &Arc<str> {
        &self.nonce
    }
    fn resource_count(&self) -> usize {
        self.resources.len() + self.removed.len()
    }
    fn update(&self) -> Update {
        Update::Patch {
            removed: self.removed.clone(),
            added: self.resources.clone(),
            served: self.served.clone(),
            from: self.from.clone(),
        }
    }
}

impl Machine for SotwStream {
    type Request = DiscoveryRequest;
    type Response = SotwResponse;
    const API: &'static str = "sotw";

    fn new(scope: Scope) -> Self {
        SotwStream::new(scope)
    }
    fn request_node(req: &DiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    fn request_error(req: &DiscoveryRequest) -> Option<&str> {
        req.error_detail.as_ref().map(|s| s.message.as_str())
    }
    fn handle(&mut self, req: &DiscoveryRequest, now: SystemTime) -> Result<Vec<Event>, ProtocolError> {
        self.handle_request(req, now)
    }
    fn snapshot_changed(&mut self, now: SystemTime) -> usize {
        SotwStream::snapshot_changed(self, now)
    }
    fn poll(&mut self, snapshot: &Snapshot, hold: &[&str], target: Option<&Snapshot>) -> Vec<SotwResponse> {
        SotwStream::poll_with(self, snapshot, hold, target)
    }
    fn subscription_changes(&mut self) -> Vec<(Arc<str>, bool, Names)> {
        SotwStream::subscription_changes(self)
    }
    fn resync(&mut self) {
        SotwStream::resync(self)
    }
    fn node(&self) -> Option<&NodeInfo> {
        SotwStream::node(self)
    }
    fn status(&self) -> Vec<TypeStatus> {
        SotwStream::status(self)
    }
    fn flow(&self) -> Flow {
        SotwStream::flow(self)
    }
}

impl Machine for DeltaStream {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaResponse;
    const API: &'static str = "delta";

    fn new(scope: Scope) -> Self {
        DeltaStream::new(scope)
    }
    fn request_node(req: &DeltaDiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    fn request_error(req: &DeltaDiscoveryRequest) -> Option<&str> {
        req.error_detail.as_ref().map(|s| s.message.as_str())
    }
    fn handle(&mut self, req: &DeltaDiscoveryRequest, now: SystemTime) -> Result<Vec<Event>, ProtocolError> {
        self.handle_request(req, now)
    }
    fn snapshot_changed(&mut self, now: SystemTime) -> usize {
        DeltaStream::snapshot_changed(self, now)
    }
    fn poll(&mut self, snapshot: &Snapshot, hold: &[&str], target: Option<&Snapshot>) -> Vec<DeltaResponse> {
        DeltaStream::poll_with(self, snapshot, hold, target)
    }
    fn subscription_changes(&mut self) -> Vec<(Arc<str>, bool, Names)> {
        DeltaStream::subscription_changes(self)
    }
    fn resync(&mut self) {
        DeltaStream::resync(self)
    }
    fn node(&self) -> Option<&NodeInfo> {
        DeltaStream::node(self)
    }
    fn status(&self) -> Vec<TypeStatus> {
        DeltaStream::status(self)
    }
    fn flow(&self) -> Flow {
        DeltaStream::flow(self)
    }
}

//! One trait over the SotW and Delta state machines, so one driver serves both.

use std::sync::Arc;
use std::time::SystemTime;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use xdst_core::delta::{DeltaResponse, DeltaStream};
use xdst_core::snapshot::Snapshot;
use xdst_core::sotw::{SotwResponse, SotwStream};
use xdst_core::stream::{Event, NodeInfo, ProtocolError, Scope, TypeStatus};

use crate::codec::Outgoing;

pub trait Machine: Send + 'static {
    type Request: prost::Message + Default + Send + 'static;
    type Response: Outgoing + Sent;
    const API: &'static str;

    fn new(scope: Scope) -> Self;
    fn request_node(req: &Self::Request) -> Option<&Node>;
    fn handle(&mut self, req: &Self::Request, now: SystemTime) -> Result<Vec<Event>, ProtocolError>;
    fn snapshot_changed(&mut self);
    fn poll(&mut self, snapshot: &Snapshot) -> Vec<Self::Response>;
    fn node(&self) -> Option<&NodeInfo>;
    fn status(&self) -> Vec<TypeStatus>;
}

/// What a response says about itself, for metrics.
pub trait Sent {
    fn type_url(&self) -> &Arc<str>;
    fn nonce(&self) -> &Arc<str>;
    fn resource_count(&self) -> usize;
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
    fn handle(&mut self, req: &DiscoveryRequest, now: SystemTime) -> Result<Vec<Event>, ProtocolError> {
        self.handle_request(req, now)
    }
    fn snapshot_changed(&mut self) {
        SotwStream::snapshot_changed(self)
    }
    fn poll(&mut self, snapshot: &Snapshot) -> Vec<SotwResponse> {
        SotwStream::poll(self, snapshot)
    }
    fn node(&self) -> Option<&NodeInfo> {
        SotwStream::node(self)
    }
    fn status(&self) -> Vec<TypeStatus> {
        SotwStream::status(self)
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
    fn handle(&mut self, req: &DeltaDiscoveryRequest, now: SystemTime) -> Result<Vec<Event>, ProtocolError> {
        self.handle_request(req, now)
    }
    fn snapshot_changed(&mut self) {
        DeltaStream::snapshot_changed(self)
    }
    fn poll(&mut self, snapshot: &Snapshot) -> Vec<DeltaResponse> {
        DeltaStream::poll(self, snapshot)
    }
    fn node(&self) -> Option<&NodeInfo> {
        DeltaStream::node(self)
    }
    fn status(&self) -> Vec<TypeStatus> {
        DeltaStream::status(self)
    }
}

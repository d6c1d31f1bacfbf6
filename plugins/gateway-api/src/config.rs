//! The plugin's configuration (its settings file in the plugins directory): which Gateways
//! are ours and how they are deployed.

use std::collections::BTreeMap;

use serde::Deserialize;
use xdst_guest::PluginError;

/// Which nodes get which Gateway.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Nodes {
    /// Every Gateway to every node: one Envoy serves them all.
    #[default]
    All,
    /// A Gateway's resources only to the node group `<namespace>/<name>`.
    PerGateway,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// GatewayClasses with this `controllerName` are ours.
    #[serde(default = "default_controller")]
    pub controller_name: String,
    /// Gateways of these class names are ours even with no GatewayClass document (the
    /// conformance manifests ship none).
    #[serde(default = "default_classes")]
    pub gateway_class_names: Vec<String>,
    #[serde(default)]
    pub nodes: Nodes,
    /// The address listeners bind: an IP, or `fromSpec` for the Gateway's first
    /// `spec.addresses` IP (`0.0.0.0` when its addresses give a type and no value: one is
    /// assigned, `GatewayAddressEmpty`).
    #[serde(default = "default_address")]
    pub address: String,
    /// Per Gateway (`<namespace>/<name>`), the address its listeners bind instead.
    #[serde(default)]
    pub addresses: BTreeMap<String, String>,
    /// The IP addresses the Envoys serving these Gateways can bind. A Gateway's static address
    /// (`spec.addresses`) outside them is not usable: the Gateway is not programmed. Empty:
    /// any address is.
    #[serde(default)]
    pub usable_addresses: Vec<String>,
    /// Added to every Gateway listener port, so tests need not bind 80 and 443.
    #[serde(default)]
    pub port_offset: i32,
    /// The namespaces whose Gateways may claim the shared address's ports (and so the hostnames
    /// served on them), besides the platform's (`"*"`: every namespace). The shared address is
    /// `address` (`0.0.0.0` with `fromSpec`). A Gateway xdst marks as a team's
    /// (`xdst.dev/written-by: team`: written through a namespace token, a namespace directory or
    /// a namespace's store prefix) from another namespace does not bind it: its listeners there
    /// are not accepted (`PortUnavailable`), and it serves only on an address of its own
    /// (`addresses`, or `spec.addresses`). Wherever two Gateways want one address and port,
    /// those allowed here come before the rest, then the older first.
    #[serde(default)]
    pub shared_address_namespaces: Vec<String>,
    /// An HTTP port (not HTTPS) with at least this many hostnames, each exact, routes every
    /// request by its host over scoped RDS: a RouteConfiguration per hostname, so that a change
    /// to one hostname's routes re-sends and re-applies that hostname's part alone (design
    /// 021). A port with a wildcard hostname that has routes, or routes for every host, keeps
    /// one RouteConfiguration. 0: never. Scope keys match exactly: a Host in other letter case
    /// than the route's hostname finds no route on a scoped port.
    #[serde(default = "default_route_scopes_from")]
    pub route_scopes_from: u32,
}

pub const DEFAULT_CONTROLLER: &str = "xdst.dev/gateway-controller";

fn default_controller() -> String {
    DEFAULT_CONTROLLER.to_owned()
}

fn default_classes() -> Vec<String> {
    vec!["xdst".to_owned()]
}

fn default_route_scopes_from() -> u32 {
    32
}

fn default_address() -> String {
    "0.0.0.0".to_owned()
}

impl Default for Config {
    fn default() -> Config {
        serde_json::from_str("{}").expect("every field has a default")
    }
}

impl Config {
    /// Whether the Gateway `namespace` (a team's when `by_team`) may claim the shared address's
    /// ports ([`Config::shared_address_namespaces`]).
    pub fn may_claim_shared(&self, namespace: &str, by_team: bool) -> bool {
        !by_team || self.shared_address_namespaces.iter().any(|n| n == "*" || n == namespace)
    }

    /// The address every Gateway without one of its own binds.
    pub fn shared_address(&self) -> &str {
        if self.address == "fromSpec" { "0.0.0.0" } else { &self.address }
    }

    pub fn parse(text: &str) -> Result<Config, PluginError> {
        let text = text.trim();
        if text.is_empty() || text == "null" {
            return Ok(Config::default());
        }
        let config: Config =
            serde_json::from_str(text).map_err(|e| PluginError::new(format!("plugin configuration: {e}")))?;
        if !(-65535..=65535).contains(&config.port_offset) {
            return Err(PluginError::new("plugin configuration: portOffset must be within -65535..65535"));
        }
        Ok(config)
    }
}

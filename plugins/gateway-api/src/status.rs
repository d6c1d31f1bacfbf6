//! The status the specification defines for each route and gateway, worked out with the
//! translation: conditions per parent (routes) and per listener (gateways).
//!
//! An invalid reference is a condition on the route that holds it, never a failed
//! translation: everything else keeps working, as the specification requires.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// One condition: `type`, `True`/`False`, a reason from the specification and a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub kind: &'static str,
    pub ok: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Condition {
    pub fn yes(kind: &'static str, reason: &'static str) -> Condition {
        Condition { kind, ok: true, reason, message: String::new() }
    }

    pub fn no(kind: &'static str, reason: &'static str, message: impl Into<String>) -> Condition {
        Condition { kind, ok: false, reason, message: message.into() }
    }

    /// As Kubernetes shows it; with the document's `metadata.generation`, as
    /// `observedGeneration` (the generation this condition was worked out for).
    fn to_json(&self, generation: Option<i64>) -> Value {
        let mut c = json!({
            "type": self.kind,
            "status": if self.ok { "True" } else { "False" },
            "reason": self.reason,
            "message": self.message,
        });
        if let Some(g) = generation {
            c["observedGeneration"] = g.into();
        }
        c
    }
}

/// A route's status toward one parent.
#[derive(Debug, Clone)]
pub struct ParentStatus {
    /// The parentRef as the route wrote it, with defaults filled in.
    pub parent_ref: Value,
    pub conditions: Vec<Condition>,
}

/// A Gateway listener's status.
#[derive(Debug, Clone)]
pub struct ListenerStatus {
    pub name: String,
    pub attached_routes: u32,
    /// The route kinds (of the Gateway API group) it takes.
    pub supported_kinds: Vec<&'static str>,
    pub conditions: Vec<Condition>,
}

/// A Gateway's own status: its conditions, the addresses it is served at, its listeners.
#[derive(Debug, Clone, Default)]
pub struct GatewayStatus {
    pub conditions: Vec<Condition>,
    pub addresses: Vec<String>,
    pub listeners: Vec<ListenerStatus>,
    /// How many ListenerSets are attached (Gateways only).
    pub attached_listener_sets: Option<u32>,
}

/// Every document's status, by id.
#[derive(Debug, Default)]
pub struct Statuses {
    pub routes: BTreeMap<String, Vec<ParentStatus>>,
    pub gateways: BTreeMap<String, GatewayStatus>,
    /// BackendTLSPolicies: their conditions per ancestor (a Gateway), by id.
    pub policies: BTreeMap<String, Vec<ParentStatus>>,
    /// ListenerSets of our Gateways: their conditions and listeners (no addresses).
    pub listener_sets: BTreeMap<String, GatewayStatus>,
    /// GatewayClasses of this controller: their conditions, by id.
    pub classes: BTreeMap<String, Vec<Condition>>,
    pub controller: String,
    /// Each document's `metadata.generation`, where it has one, by id.
    pub generations: BTreeMap<String, i64>,
}

impl Statuses {
    /// The `status` of each document, as Kubernetes would show it.
    pub fn to_json(&self) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        for (id, parents) in &self.routes {
            let generation = self.generations.get(id).copied();
            let parents: Vec<Value> = parents
                .iter()
                .map(|p| {
                    json!({
                        "parentRef": p.parent_ref,
                        "controllerName": self.controller,
                        "conditions": p.conditions.iter().map(|c| c.to_json(generation)).collect::<Vec<_>>(),
                    })
                })
                .collect();
            out.insert(id.clone(), json!({ "parents": parents }));
        }
        for (id, ancestors) in &self.policies {
            let generation = self.generations.get(id).copied();
            let ancestors: Vec<Value> = ancestors
                .iter()
                .map(|a| {
                    json!({
                        "ancestorRef": a.parent_ref,
                        "controllerName": self.controller,
                        "conditions": a.conditions.iter().map(|c| c.to_json(generation)).collect::<Vec<_>>(),
                    })
                })
                .collect();
            out.insert(id.clone(), json!({ "ancestors": ancestors }));
        }
        for (id, gateway) in self.gateways.iter().chain(&self.listener_sets) {
            let generation = self.generations.get(id).copied();
            let conditions = |list: &[Condition]| list.iter().map(|c| c.to_json(generation)).collect::<Vec<_>>();
            let listeners: Vec<Value> = gateway
                .listeners
                .iter()
                .map(|l| {
                    let kinds: Vec<Value> = l
                        .supported_kinds
                        .iter()
                        .map(|k| json!({"group": crate::world::GATEWAY_GROUP, "kind": k}))
                        .collect();
                    json!({
                        "name": l.name,
                        "supportedKinds": kinds,
                        "attachedRoutes": l.attached_routes,
                        "conditions": conditions(&l.conditions),
                    })
                })
                .collect();
            let addresses: Vec<Value> = gateway
                .addresses
                .iter()
                .map(|a| {
                    let kind = if a.parse::<std::net::IpAddr>().is_ok() { "IPAddress" } else { "Hostname" };
                    json!({"type": kind, "value": a})
                })
                .collect();
            let mut status = json!({
                "conditions": conditions(&gateway.conditions),
                "listeners": listeners,
            });
            if self.gateways.contains_key(id) {
                status["addresses"] = json!(addresses);
            }
            if let Some(n) = gateway.attached_listener_sets {
                status["attachedListenerSets"] = json!(n);
            }
            out.insert(id.clone(), status);
        }
        for (id, list) in &self.classes {
            let generation = self.generations.get(id).copied();
            out.insert(
                id.clone(),
                json!({"conditions": list.iter().map(|c| c.to_json(generation)).collect::<Vec<_>>()}),
            );
        }
        out
    }

    /// Every condition that is `False`, with the document it is on, for diagnostics.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (id, parents) in self.routes.iter().chain(&self.policies) {
            for p in parents {
                for c in p.conditions.iter().filter(|c| !c.ok) {
                    let parent = p.parent_ref["name"].as_str().unwrap_or("?");
                    out.push((id.clone(), format!("parent {parent}: {} False ({}): {}", c.kind, c.reason, c.message)));
                }
            }
        }
        for (id, gateway) in self.gateways.iter().chain(&self.listener_sets) {
            for c in gateway.conditions.iter().filter(|c| !c.ok) {
                out.push((id.clone(), format!("{} False ({}): {}", c.kind, c.reason, c.message)));
            }
            for l in &gateway.listeners {
                for c in l.conditions.iter().filter(|c| !c.ok) {
                    out.push((
                        id.clone(),
                        format!("listener {}: {} False ({}): {}", l.name, c.kind, c.reason, c.message),
                    ));
                }
            }
        }
        out
    }
}

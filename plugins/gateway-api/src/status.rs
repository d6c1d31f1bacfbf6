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
    pub conditions: Vec<Condition>,
}

/// Every document's status, by id.
#[derive(Debug, Default)]
pub struct Statuses {
    pub routes: BTreeMap<String, Vec<ParentStatus>>,
    pub gateways: BTreeMap<String, (Vec<Condition>, Vec<ListenerStatus>)>,
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
        for (id, (conditions, listeners)) in &self.gateways {
            let generation = self.generations.get(id).copied();
            let listeners: Vec<Value> = listeners
                .iter()
                .map(|l| {
                    json!({
                        "name": l.name,
                        "attachedRoutes": l.attached_routes,
                        "conditions": l.conditions.iter().map(|c| c.to_json(generation)).collect::<Vec<_>>(),
                    })
                })
                .collect();
            out.insert(
                id.clone(),
                json!({
                    "conditions": conditions.iter().map(|c| c.to_json(generation)).collect::<Vec<_>>(),
                    "listeners": listeners,
                }),
            );
        }
        out
    }

    /// Every condition that is `False`, with the document it is on, for diagnostics.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (id, parents) in &self.routes {
            for p in parents {
                for c in p.conditions.iter().filter(|c| !c.ok) {
                    let parent = p.parent_ref["name"].as_str().unwrap_or("?");
                    out.push((id.clone(), format!("parent {parent}: {} False ({}): {}", c.kind, c.reason, c.message)));
                }
            }
        }
        for (id, (conditions, listeners)) in &self.gateways {
            for c in conditions.iter().filter(|c| !c.ok) {
                out.push((id.clone(), format!("{} False ({}): {}", c.kind, c.reason, c.message)));
            }
            for l in listeners {
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

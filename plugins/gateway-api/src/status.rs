//! The status the specification defines for each route and gateway, worked out with the
//! translation: conditions per parent (routes) and per listener (gateways).
//!
//! An invalid reference is a condition on the route that holds it, never a failed
//! translation: everything else keeps working, as the specification requires.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

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
    fn shown(&self, generation: Option<i64>) -> Shown<'_> {
        Shown {
            message: &self.message,
            observed_generation: generation,
            reason: self.reason,
            status: if self.ok { "True" } else { "False" },
            kind: self.kind,
        }
    }
}

// What a status looks like, field by field. Each struct's fields are in the order of their
// JSON names, the order a `serde_json::Value` object keeps: a status printed from these is
// byte for byte the one printed from its `Value` (`to_json`), without building the `Value`.

#[derive(Serialize)]
struct Shown<'a> {
    message: &'a str,
    #[serde(rename = "observedGeneration", skip_serializing_if = "Option::is_none")]
    observed_generation: Option<i64>,
    reason: &'a str,
    status: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
}

fn conditions(list: &[Condition], generation: Option<i64>) -> Vec<Shown<'_>> {
    list.iter().map(|c| c.shown(generation)).collect()
}

/// One document's status: the shape of its kind.
#[derive(Serialize)]
#[serde(untagged)]
enum StatusShown<'a> {
    Route(RouteShown<'a>),
    Policy(PolicyShown<'a>),
    Gateway(GatewayShown<'a>),
    Class(ClassShown<'a>),
}

#[derive(Serialize)]
struct RouteShown<'a> {
    parents: Vec<ParentShown<'a>>,
}

#[derive(Serialize)]
struct ParentShown<'a> {
    conditions: Vec<Shown<'a>>,
    #[serde(rename = "controllerName")]
    controller_name: &'a str,
    #[serde(rename = "parentRef")]
    parent_ref: &'a Value,
}

#[derive(Serialize)]
struct PolicyShown<'a> {
    ancestors: Vec<AncestorShown<'a>>,
}

#[derive(Serialize)]
struct AncestorShown<'a> {
    #[serde(rename = "ancestorRef")]
    ancestor_ref: &'a Value,
    conditions: Vec<Shown<'a>>,
    #[serde(rename = "controllerName")]
    controller_name: &'a str,
}

#[derive(Serialize)]
struct GatewayShown<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    addresses: Option<Vec<AddressShown<'a>>>,
    #[serde(rename = "attachedListenerSets", skip_serializing_if = "Option::is_none")]
    attached_listener_sets: Option<u32>,
    conditions: Vec<Shown<'a>>,
    listeners: Vec<ListenerShown<'a>>,
}

#[derive(Serialize)]
struct AddressShown<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    value: &'a str,
}

#[derive(Serialize)]
struct ListenerShown<'a> {
    #[serde(rename = "attachedRoutes")]
    attached_routes: u32,
    conditions: Vec<Shown<'a>>,
    name: &'a str,
    #[serde(rename = "supportedKinds")]
    supported_kinds: Vec<KindShown>,
}

#[derive(Serialize)]
struct KindShown {
    group: &'static str,
    kind: &'static str,
}

#[derive(Serialize)]
struct ClassShown<'a> {
    conditions: Vec<Shown<'a>>,
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
/// Where a document's problems come among all of them: routes, policies, Gateways, ListenerSets
/// (0 to 3), then by id.
pub type ProblemKey = (u8, String);

/// Every document's problems ([`Statuses::problems`]), in the order diagnostics list them.
pub type Problems = BTreeMap<ProblemKey, Vec<(String, String)>>;

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
        self.each(|id, shown| {
            out.insert(id.to_owned(), serde_json::to_value(shown).expect("a status is JSON"));
        });
        out
    }

    /// The same statuses printed as JSON, as the contract returns them (`to_json`, printed,
    /// without building each `Value` first).
    pub fn to_strings(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        self.each(|id, shown| out.push((id.to_owned(), serde_json::to_string(shown).expect("a status is JSON"))));
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Each document's status, by id.
    fn each(&self, mut f: impl FnMut(&str, &StatusShown<'_>)) {
        let ids = self.routes.keys().chain(self.policies.keys()).chain(self.gateways.keys());
        for id in ids.chain(self.listener_sets.keys()).chain(self.classes.keys()) {
            if let Some(shown) = self.shown(id) {
                f(id, &shown);
            }
        }
    }

    /// The status of the document `id`, printed as the contract returns it; none when it has
    /// none.
    pub fn string_of(&self, id: &str) -> Option<String> {
        self.shown(id).map(|shown| serde_json::to_string(&shown).expect("a status is JSON"))
    }

    /// The status of the document `id`, as its kind shows it.
    fn shown(&self, id: &str) -> Option<StatusShown<'_>> {
        let g = self.generations.get(id).copied();
        if let Some(parents) = self.routes.get(id) {
            let parents = parents
                .iter()
                .map(|p| ParentShown {
                    conditions: conditions(&p.conditions, g),
                    controller_name: &self.controller,
                    parent_ref: &p.parent_ref,
                })
                .collect();
            return Some(StatusShown::Route(RouteShown { parents }));
        }
        if let Some(ancestors) = self.policies.get(id) {
            let ancestors = ancestors
                .iter()
                .map(|a| AncestorShown {
                    ancestor_ref: &a.parent_ref,
                    conditions: conditions(&a.conditions, g),
                    controller_name: &self.controller,
                })
                .collect();
            return Some(StatusShown::Policy(PolicyShown { ancestors }));
        }
        if let Some(gateway) = self.gateways.get(id).or_else(|| self.listener_sets.get(id)) {
            let listeners = gateway
                .listeners
                .iter()
                .map(|l| ListenerShown {
                    attached_routes: l.attached_routes,
                    conditions: conditions(&l.conditions, g),
                    name: &l.name,
                    supported_kinds: l
                        .supported_kinds
                        .iter()
                        .map(|&kind| KindShown { group: crate::world::GATEWAY_GROUP, kind })
                        .collect(),
                })
                .collect();
            let addresses = self.gateways.contains_key(id).then(|| {
                gateway
                    .addresses
                    .iter()
                    .map(|a| {
                        let kind = if a.parse::<std::net::IpAddr>().is_ok() { "IPAddress" } else { "Hostname" };
                        AddressShown { kind, value: a }
                    })
                    .collect()
            });
            return Some(StatusShown::Gateway(GatewayShown {
                addresses,
                attached_listener_sets: gateway.attached_listener_sets,
                conditions: conditions(&gateway.conditions, g),
                listeners,
            }));
        }
        let list = self.classes.get(id)?;
        Some(StatusShown::Class(ClassShown { conditions: conditions(list, g) }))
    }

    /// Each document's conditions that are not true, by [`ProblemKey`], as diagnostics say them
    /// (`(document, message)`): the routes' and policies' per parent, then the Gateways' and
    /// ListenerSets' and their listeners'.
    pub fn problems(&self) -> Problems {
        let ids =
            self.routes.keys().chain(self.policies.keys()).chain(self.gateways.keys()).chain(self.listener_sets.keys());
        ids.filter_map(|id| self.problems_of(id)).collect()
    }

    /// [`problems`](Self::problems) of one document; none when all its conditions are true.
    pub fn problems_of(&self, id: &str) -> Option<(ProblemKey, Vec<(String, String)>)> {
        let mut out = Vec::new();
        let (rank, parents) = match (self.routes.get(id), self.policies.get(id)) {
            (Some(p), _) => (0, Some(p)),
            (None, Some(p)) => (1, Some(p)),
            (None, None) => (2, None),
        };
        for p in parents.into_iter().flatten() {
            for c in p.conditions.iter().filter(|c| !c.ok) {
                let parent = p.parent_ref["name"].as_str().unwrap_or("?");
                out.push((id.to_owned(), format!("parent {parent}: {} False ({}): {}", c.kind, c.reason, c.message)));
            }
        }
        let (rank, gateway) = match (self.gateways.get(id), self.listener_sets.get(id)) {
            (Some(g), _) => (2, Some(g)),
            (None, Some(g)) => (3, Some(g)),
            (None, None) => (rank, None),
        };
        if let Some(gateway) = gateway {
            for c in gateway.conditions.iter().filter(|c| !c.ok) {
                out.push((id.to_owned(), format!("{} False ({}): {}", c.kind, c.reason, c.message)));
            }
            for l in &gateway.listeners {
                for c in l.conditions.iter().filter(|c| !c.ok) {
                    out.push((
                        id.to_owned(),
                        format!("listener {}: {} False ({}): {}", l.name, c.kind, c.reason, c.message),
                    ));
                }
            }
        }
        (!out.is_empty()).then(|| ((rank, id.to_owned()), out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shape of status, printed directly, is byte for byte its `Value` printed: the
    /// fields of each shape are declared in the order a `Value` object sorts them.
    #[test]
    fn printed_statuses_are_their_values_printed() {
        let parent = serde_json::json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw", "namespace": "ns"});
        let mixed = vec![
            Condition::yes("Accepted", "Accepted"),
            Condition::no("ResolvedRefs", "BackendNotFound", "no \"svc\""),
        ];
        let mut s = Statuses { controller: "xdst.io/gateway".into(), ..Default::default() };
        s.routes.insert(
            "HTTPRoute/ns/r".into(),
            vec![ParentStatus { parent_ref: parent.clone(), conditions: mixed.clone() }],
        );
        s.policies.insert(
            "BackendTLSPolicy/ns/p".into(),
            vec![ParentStatus { parent_ref: parent, conditions: mixed.clone() }],
        );
        let listener = ListenerStatus {
            name: "http".into(),
            attached_routes: 3,
            supported_kinds: vec!["HTTPRoute", "GRPCRoute"],
            conditions: mixed.clone(),
        };
        let gateway = GatewayStatus {
            conditions: mixed.clone(),
            addresses: vec!["10.0.0.1".into(), "gw.example".into()],
            listeners: vec![listener],
            attached_listener_sets: Some(1),
        };
        s.gateways.insert("Gateway/ns/gw".into(), gateway.clone());
        s.listener_sets.insert("ListenerSet/ns/ls".into(), GatewayStatus { attached_listener_sets: None, ..gateway });
        s.classes.insert("GatewayClass/xdst".into(), mixed);
        s.generations.insert("HTTPRoute/ns/r".into(), 7);
        s.generations.insert("Gateway/ns/gw".into(), 2);
        let values = s.to_json();
        let printed = s.to_strings();
        assert_eq!(printed.len(), 5);
        for (id, text) in &printed {
            assert_eq!(text, &serde_json::to_string(&values[id]).unwrap(), "{id}");
        }
        assert!(printed.iter().any(|(_, t)| t.contains(r#""observedGeneration":7"#)));
        assert!(!printed.iter().any(|(id, t)| id.starts_with("ListenerSet") && t.contains("addresses")));
    }
}

//! ListenerSets: listeners declared apart from their Gateway, by a team that may not own it.
//!
//! A ListenerSet attaches to its parent Gateway (ours) when the Gateway's `allowedListeners`
//! takes its namespace (`None` by default: a Gateway takes no ListenerSet until it says so).
//! Its listeners are then the Gateway's too, after the Gateway's own and after those of older
//! ListenerSets (by `creationTimestamp`, then `namespace/name`): they share the Gateway's
//! ports and Envoy Listeners, and one that conflicts with an earlier listener on its port (a
//! protocol or hostname already taken) is not accepted, while the others serve. A route
//! attaches to a ListenerSet's listeners with a parentRef of kind `ListenerSet`; a parentRef
//! to the Gateway reaches the Gateway's own listeners only.

use std::collections::BTreeMap;

use crate::model::{GatewaySpec, RouteNamespaces};
use crate::status::{Condition, GatewayStatus, Statuses};
use crate::world::{Doc, GATEWAY_GROUP, Key, World};

/// Where a listener of an expanded Gateway comes from.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The ListenerSet that declared it; none: the Gateway itself.
    pub set: Option<Key>,
    /// Its name as declared (a sectionName names it so).
    pub name: String,
    /// The namespace of what declared it: `allowedRoutes` `Same` and ReferenceGrants are
    /// judged from here.
    pub namespace: String,
}

/// A Gateway with the listeners of the ListenerSets attached to it appended (each renamed
/// `<namespace>/<set>/<name>`, unique in the Gateway), and where each listener comes from.
pub struct Expanded<'a> {
    pub original: &'a Doc<GatewaySpec>,
    pub gateway: Doc<GatewaySpec>,
    pub origins: Vec<Origin>,
}

/// Whether `namespace` is taken by `from` (`Same`: `own`'s namespace; `Selector`: by the
/// namespace's labels, `kubernetes.io/metadata.name` included, as Kubernetes sets it).
pub fn namespace_allowed(
    world: &World,
    from: Option<&RouteNamespaces>,
    default: &str,
    own: &str,
    namespace: &str,
) -> bool {
    match from.and_then(|f| f.from.as_deref()).unwrap_or(default) {
        "All" => true,
        "Same" => own == namespace,
        "Selector" => {
            let Some(selector) = from.and_then(|f| f.selector.as_ref()) else { return false };
            let mut labels = world.namespaces.get(namespace).cloned().unwrap_or_default();
            labels.insert("kubernetes.io/metadata.name".to_owned(), namespace.to_owned());
            selector.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
                && selector.match_expressions.iter().all(|e| match e.operator.as_str() {
                    "In" => labels.get(&e.key).is_some_and(|v| e.values.contains(v)),
                    "NotIn" => labels.get(&e.key).is_none_or(|v| !e.values.contains(v)),
                    "Exists" => labels.contains_key(&e.key),
                    "DoesNotExist" => !labels.contains_key(&e.key),
                    _ => false,
                })
        }
        _ => false,
    }
}

/// Every Gateway of ours with the ListenerSets it takes. A ListenerSet whose Gateway of ours
/// does not take it gets `Accepted` and `Programmed` False (`NotAllowed`) in `statuses`.
pub fn expand<'a>(
    world: &World,
    config: &crate::config::Config,
    gateways: &BTreeMap<&'a Key, &'a Doc<GatewaySpec>>,
    statuses: &mut Statuses,
) -> BTreeMap<Key, Expanded<'a>> {
    let mut out: BTreeMap<Key, Expanded<'a>> = gateways
        .iter()
        .map(|(key, g)| {
            let origins = g
                .spec
                .listeners
                .iter()
                .map(|l| Origin { set: None, name: l.name.clone(), namespace: g.namespace.clone() })
                .collect();
            ((*key).clone(), Expanded { original: g, gateway: (*g).clone(), origins })
        })
        .collect();
    let mut sets: Vec<(&Key, &Doc<crate::model::ListenerSetSpec>)> = world.listener_sets.iter().collect();
    // The platform's first (as for Gateways' ports: `sharedAddressNamespaces`), then the oldest.
    sets.sort_by_key(|(k, s)| {
        let claims = config.may_claim_shared(&s.namespace, s.metadata.written_by_team());
        (!claims, s.metadata.creation_timestamp.clone().unwrap_or_default(), (*k).clone())
    });
    for (key, set) in sets {
        let parent = &set.spec.parent_ref;
        if parent.group.as_deref().unwrap_or(GATEWAY_GROUP) != GATEWAY_GROUP
            || parent.kind.as_deref().unwrap_or("Gateway") != "Gateway"
        {
            continue;
        }
        let gkey = (parent.namespace.clone().unwrap_or_else(|| set.namespace.clone()), parent.name.clone());
        let Some(expanded) = out.get_mut(&gkey) else {
            // Not a Gateway of ours: its controller writes this ListenerSet's status.
            continue;
        };
        let from = expanded.original.spec.allowed_listeners.as_ref().and_then(|a| a.namespaces.as_ref());
        if !namespace_allowed(world, from, "None", &expanded.original.namespace, &set.namespace) {
            let why = format!(
                "Gateway {}/{} does not allow ListenerSets from namespace {} (spec.allowedListeners)",
                gkey.0, gkey.1, set.namespace
            );
            let conditions = vec![
                Condition::no("Accepted", "NotAllowed", why.clone()),
                Condition::no("Programmed", "NotAllowed", why),
            ];
            statuses.listener_sets.insert(set.id.clone(), GatewayStatus { conditions, ..Default::default() });
            continue;
        }
        for l in &set.spec.listeners {
            let mut renamed = l.clone();
            renamed.name = format!("{}/{}/{}", set.namespace, set.name, l.name);
            expanded.gateway.spec.listeners.push(renamed);
            expanded.origins.push(Origin {
                set: Some(key.clone()),
                name: l.name.clone(),
                namespace: set.namespace.clone(),
            });
        }
    }
    out
}

/// A ListenerSet's own conditions from its listeners': accepted and programmed while any
/// listener is programmed (accepted, its references resolved); otherwise `ListenersNotValid`.
pub fn set_conditions(status: &GatewayStatus) -> Vec<Condition> {
    let accepted = status.listeners.iter().any(|l| l.conditions.iter().any(|c| c.kind == "Programmed" && c.ok));
    if accepted {
        vec![Condition::yes("Accepted", "Accepted"), Condition::yes("Programmed", "Programmed")]
    } else {
        let why = "no listener of the ListenerSet is accepted";
        vec![Condition::no("Accepted", "ListenersNotValid", why), Condition::no("Programmed", "ListenersNotValid", why)]
    }
}

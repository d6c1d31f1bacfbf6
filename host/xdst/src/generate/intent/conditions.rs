//! A document's conditions where its kind's schema keeps them, stamped with when each last
//! changed (issue 52; design 024). What a Kubernetes API server would keep of a status is what
//! its kind's schema names: a route's conditions live in each of its `parents`, a policy's in
//! each of its `ancestors`, a Gateway's at the top, and Kubernetes' own objects (Services,
//! EndpointSlices, Secrets) carry no status of xdst's at all. Every condition needs a
//! `lastTransitionTime`, which plugins cannot write (they have no clock): the host stamps it.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use xdst_core::intent::{IntentDocument, IntentSet};

use super::Statuses;

/// The condition a held document's status carries.
pub const HELD: &str = "Programmed";

/// The longest condition message the schema keeps (`metav1.Condition.message`).
pub const MAX_MESSAGE: usize = 32_768;

/// The Gateway API's groups (standard and experimental).
const GATEWAY_API: [&str; 2] = ["gateway.networking.k8s.io", "gateway.networking.x-k8s.io"];

/// Where a kind keeps its conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `status.conditions`: a Gateway, a GatewayClass, a ListenerSet, xdst's own kinds, and
    /// the kinds of groups this host knows nothing of (the Kubernetes convention).
    Own,
    /// `status.parents[].conditions`: the Gateway API's routes.
    Parents,
    /// `status.ancestors[].conditions`: the Gateway API's policies.
    Ancestors,
    /// No status of xdst's: a ReferenceGrant (its schema has none), and Kubernetes' own
    /// objects, whose status is another controller's.
    Nowhere,
}

/// Where documents of `group`/`kind` keep their conditions.
pub fn place_of(group: Option<&str>, kind: &str) -> Place {
    match group {
        None => Place::Own,
        Some(g) if GATEWAY_API.contains(&g) => match kind {
            "ReferenceGrant" => Place::Nowhere,
            k if k.ends_with("Route") => Place::Parents,
            k if k.ends_with("Policy") => Place::Ancestors,
            _ => Place::Own,
        },
        // `core`, `apps`, `discovery.k8s.io`, ...: Kubernetes' own.
        Some(g) if g == "core" || !g.contains('.') || g.ends_with(".k8s.io") => Place::Nowhere,
        Some(_) => Place::Own,
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn at_most(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `list` with `condition` in place of any of its type.
fn with_condition(list: Option<&mut Value>, condition: &Value) -> Value {
    let mut list: Vec<Value> = match list {
        Some(Value::Array(l)) => std::mem::take(l),
        _ => Vec::new(),
    };
    list.retain(|c| c.get("type") != condition.get("type"));
    list.push(condition.clone());
    Value::Array(list)
}

/// The controller name the plugins write in route and policy statuses, read from any of them.
fn controller_name(statuses: &Statuses) -> Option<String> {
    statuses.values().find_map(|s| {
        let v: Value = serde_json::from_str(s).ok()?;
        ["parents", "ancestors"]
            .iter()
            .flat_map(|k| v.get(*k).and_then(Value::as_array).into_iter().flatten())
            .find_map(|p| p.get("controllerName")?.as_str().map(str::to_owned))
    })
}

/// The parents a route held with no status of its own is reported in: each `spec.parentRefs`
/// entry whose Gateway (or ListenerSet) has a status here, that is, one this control plane
/// serves. Another controller's Gateway is not xdst's to write about.
fn parents_of(doc: &Value, namespace: Option<&str>, statuses: &Statuses, controller: &str) -> Vec<Value> {
    let refs = doc.pointer("/spec/parentRefs").and_then(Value::as_array).into_iter().flatten();
    refs.filter(|r| {
        let group = r.get("group").and_then(Value::as_str).unwrap_or(GATEWAY_API[0]);
        let kind = r.get("kind").and_then(Value::as_str).unwrap_or("Gateway");
        let Some(name) = r.get("name").and_then(Value::as_str) else { return false };
        let ns = r.get("namespace").and_then(Value::as_str).or(namespace).unwrap_or("default");
        GATEWAY_API.contains(&group) && statuses.contains_key(format!("{kind}/{ns}/{name}").as_str())
    })
    .map(|r| json!({"parentRef": r, "controllerName": controller, "conditions": []}))
    .collect()
}

/// The documents held out, as [`mark_held`] takes them: (id, failure, reason).
pub type HeldDocument<'a> = (&'a str, &'a str, &'static str);

/// `statuses` with each held document's status saying so, where its kind keeps conditions
/// ([`place_of`]): a `Programmed` condition, `False`, with the failure as its message (cut to
/// what the schema keeps) and the reason given. What the plugin computed for the version
/// translated in its place, if any, stays beside it. A route with no status of its own is
/// reported in each parent this control plane serves; a kind with no place for conditions
/// gets none (the status page, `/readyz` and `/debug/plugins` name it all the same).
pub fn mark_held<'a>(statuses: &mut Statuses, intent: &IntentSet, held: impl IntoIterator<Item = HeldDocument<'a>>) {
    let mut controller: Option<Option<String>> = None;
    for (id, error, reason) in held {
        let Some(doc) = intent.by_id(id) else { continue };
        let place = place_of(doc.group.as_deref(), &doc.kind);
        if place == Place::Nowhere {
            continue;
        }
        let json = parsed(doc);
        let mut status = match statuses.get(id).map(|s| serde_json::from_str::<Value>(s)) {
            Some(Ok(Value::Object(m))) => m,
            _ => Map::new(),
        };
        let mut condition = json!({
            "type": HELD,
            "status": "False",
            "reason": reason,
            "message": at_most(error, MAX_MESSAGE),
        });
        if let Some(g) = json.pointer("/metadata/generation").and_then(Value::as_i64).filter(|g| *g >= 0) {
            condition["observedGeneration"] = g.into();
        }
        match place {
            Place::Own => {
                let c = with_condition(status.get_mut("conditions"), &condition);
                status.insert("conditions".into(), c);
            }
            Place::Parents | Place::Ancestors => {
                let key = if place == Place::Parents { "parents" } else { "ancestors" };
                let empty = status.get(key).and_then(Value::as_array).is_none_or(Vec::is_empty);
                if empty && place == Place::Parents {
                    let controller = controller.get_or_insert_with(|| controller_name(statuses));
                    let Some(name) = controller else { continue };
                    let parents = parents_of(&json, doc.namespace.as_deref(), statuses, name);
                    if parents.is_empty() {
                        continue;
                    }
                    status.insert(key.into(), Value::Array(parents));
                }
                let Some(Value::Array(entries)) = status.get_mut(key) else { continue };
                for p in entries.iter_mut().filter_map(Value::as_object_mut) {
                    let c = with_condition(p.get_mut("conditions"), &condition);
                    p.insert("conditions".into(), c);
                }
            }
            Place::Nowhere => {}
        }
        statuses.insert(Arc::from(id), Arc::from(Value::Object(status).to_string()));
    }
}

/// The document's JSON (a document kept compact has only its text).
fn parsed(doc: &IntentDocument) -> std::borrow::Cow<'_, Value> {
    match &doc.json {
        Value::Null => std::borrow::Cow::Owned(serde_json::from_str(&doc.text).unwrap_or(Value::Null)),
        json => std::borrow::Cow::Borrowed(json),
    }
}

/// What identifies an entry of a status list across generations: a route parent by its
/// reference and controller, a listener by its name; anything else by its place.
fn identity(entry: &Value) -> Option<Value> {
    let o = entry.as_object()?;
    let keys = ["parentRef", "ancestorRef", "controllerName", "name"];
    let id: Map<String, Value> = keys.iter().filter_map(|k| o.get(*k).map(|v| ((*k).to_owned(), v.clone()))).collect();
    (!id.is_empty()).then_some(Value::Object(id))
}

/// Every condition in `status` given a `lastTransitionTime`: the one it had in `before` (the
/// document's status as last served) when a condition of its type was there with the same
/// `status`, `now` otherwise. One a plugin wrote itself is kept.
pub fn stamp(status: &mut Value, before: Option<&Value>, now: &str) {
    match status {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                let old = before.and_then(|b| b.get(key));
                if key == "conditions"
                    && let Value::Array(list) = value
                {
                    for c in list.iter_mut().filter_map(Value::as_object_mut) {
                        if c.contains_key("lastTransitionTime") {
                            continue;
                        }
                        let kept = old
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .find(|o| o.get("type") == c.get("type") && o.get("status") == c.get("status"));
                        let at = kept.and_then(|o| o.get("lastTransitionTime")).cloned();
                        c.insert("lastTransitionTime".into(), at.unwrap_or_else(|| now.into()));
                    }
                } else {
                    stamp(value, old, now);
                }
            }
        }
        Value::Array(list) => {
            let old = before.and_then(Value::as_array);
            for (i, entry) in list.iter_mut().enumerate() {
                let id = identity(entry);
                let prior = old.and_then(|o| match &id {
                    Some(id) => o.iter().find(|p| identity(p).as_ref() == Some(id)),
                    None => o.get(i),
                });
                stamp(entry, prior, now);
            }
        }
        _ => {}
    }
}

/// The statuses to serve: `raw` (what the plugins computed, with holds marked) stamped, each
/// against the one served before. A document whose raw status did not change keeps what was
/// served, unparsed: a generation pays for the statuses that changed.
pub fn stamped(raw: &Statuses, before_raw: &Statuses, before: &Statuses, now: &str) -> Statuses {
    let mut out = Statuses::new();
    for (id, status) in raw {
        let same = before_raw.get(id).is_some_and(|b| Arc::ptr_eq(b, status) || b == status);
        if same && let Some(kept) = before.get(id) {
            out.insert(id.clone(), kept.clone());
            continue;
        }
        let Ok(mut value) = serde_json::from_str::<Value>(status) else {
            out.insert(id.clone(), status.clone());
            continue;
        };
        let prior = before.get(id).and_then(|s| serde_json::from_str::<Value>(s).ok());
        stamp(&mut value, prior.as_ref(), now);
        out.insert(id.clone(), Arc::from(value.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_follow_the_schemas() {
        let gw = Some("gateway.networking.k8s.io");
        assert_eq!(place_of(gw, "HTTPRoute"), Place::Parents);
        assert_eq!(place_of(Some("gateway.networking.x-k8s.io"), "XListenerSet"), Place::Own);
        assert_eq!(place_of(gw, "BackendTLSPolicy"), Place::Ancestors);
        assert_eq!(place_of(gw, "ReferenceGrant"), Place::Nowhere);
        assert_eq!(place_of(gw, "Gateway"), Place::Own);
        assert_eq!(place_of(Some("core"), "Service"), Place::Nowhere);
        assert_eq!(place_of(Some("discovery.k8s.io"), "EndpointSlice"), Place::Nowhere);
        assert_eq!(place_of(Some("apps"), "Deployment"), Place::Nowhere);
        assert_eq!(place_of(None, "HttpService"), Place::Own);
        assert_eq!(place_of(Some("example.com"), "Widget"), Place::Own);
    }

    #[test]
    fn a_condition_keeps_its_time_until_its_status_changes() {
        let before = json!({"parents": [
            {"parentRef": {"name": "a"}, "controllerName": "x.dev/c", "conditions": [
                {"type": "Accepted", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "ResolvedRefs", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
            {"parentRef": {"name": "b"}, "controllerName": "x.dev/c", "conditions": [
                {"type": "Accepted", "status": "True", "lastTransitionTime": "2026-01-02T00:00:00Z"}]}]});
        // The parents in the other order; `a`'s ResolvedRefs turned False.
        let mut now = json!({"parents": [
            {"parentRef": {"name": "b"}, "controllerName": "x.dev/c", "conditions": [
                {"type": "Accepted", "status": "True"}]},
            {"parentRef": {"name": "a"}, "controllerName": "x.dev/c", "conditions": [
                {"type": "Accepted", "status": "True"}, {"type": "ResolvedRefs", "status": "False"}]}]});
        stamp(&mut now, Some(&before), "2026-12-07T00:00:00Z");
        let at = |p: usize, c: usize| now["parents"][p]["conditions"][c]["lastTransitionTime"].clone();
        assert_eq!(at(0, 0), "2026-01-02T00:00:00Z");
        assert_eq!(at(1, 0), "2026-01-01T00:00:00Z");
        assert_eq!(at(1, 1), "2026-12-07T00:00:00Z");
    }

    fn intent(text: &str) -> IntentSet {
        let mut set = IntentSet::default();
        for d in xdst_core::intent::parse_file("t.yaml", text).unwrap() {
            set.add(d).unwrap();
        }
        set
    }

    /// A route held before it was ever translated is reported in the parent this control plane
    /// serves, never in another controller's Gateway (its spec may name any), and never at the
    /// top, where the schema keeps no conditions. A Service held is not xdst's to write about.
    #[test]
    fn a_new_route_held_is_reported_in_the_parents_served_here_only() {
        let set = intent(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: a, generation: 3}\n\
             spec: {parentRefs: [{name: ours, namespace: infra}, {name: theirs, namespace: infra}, {name: local}]}\n\
             ---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: a}\nspec: {}\n",
        );
        let parent =
            json!({"parents": [{"parentRef": {"name": "ours"}, "controllerName": "x.dev/c", "conditions": []}]});
        let mut statuses = Statuses::new();
        statuses.insert("Gateway/infra/ours".into(), r#"{"conditions": []}"#.into());
        statuses.insert("HTTPRoute/infra/other".into(), Arc::from(parent.to_string()));
        mark_held(&mut statuses, &set, [("HTTPRoute/a/r", "bad regex", "Held"), ("Service/a/s", "bad", "Held")]);
        let status: Value = serde_json::from_str(&statuses["HTTPRoute/a/r"]).unwrap();
        assert!(status.get("conditions").is_none(), "{status}");
        let parents = status["parents"].as_array().unwrap();
        assert_eq!(parents.len(), 1, "{status}");
        assert_eq!(parents[0]["parentRef"], json!({"name": "ours", "namespace": "infra"}));
        assert_eq!(parents[0]["controllerName"], "x.dev/c");
        let c = &parents[0]["conditions"][0];
        assert_eq!(
            (c["type"].as_str(), c["reason"].as_str(), c["observedGeneration"].as_i64()),
            (Some(HELD), Some("Held"), Some(3))
        );
        assert!(!statuses.contains_key("Service/a/s"));
    }

    #[test]
    fn a_long_failure_is_cut_on_a_character_boundary() {
        let text = "é".repeat(MAX_MESSAGE);
        let cut = at_most(&text, MAX_MESSAGE);
        assert!(cut.len() <= MAX_MESSAGE && cut.len() > MAX_MESSAGE - 2);
    }
}

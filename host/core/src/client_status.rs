//! What a node holds, resource by resource, as a client status service (CSDS) reports it:
//! acknowledged (and whether a newer version waits), rejected with the node's error, asked
//! for and not held yet, or asked for by name and not existing.
//!
//! Worked out from the node's rollout: its subscriptions (every stream's), what it has
//! acknowledged, its target, and the responses it rejected.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use crate::resource::Resource;
use crate::rollout::Rollout;

/// One resource's state on a node.
#[derive(Debug, Clone)]
pub struct ResourceState {
    pub type_url: Arc<str>,
    pub name: Arc<str>,
    pub state: State,
    /// The version the node holds, when it holds one.
    pub held: Option<Arc<Resource>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// The node acknowledged `held`; `stale`: the server has a newer version for it (in
    /// flight, or held back by the make-before-break plan).
    Acked { stale: bool },
    /// The node rejected the response that carried it: its error, when, and the version it
    /// rejected. `held` is what it kept. One rejection's message is shared by its resources,
    /// never copied: `same_as` names the resource of the same rejection that the message is
    /// reported with (`None`: this one).
    Nacked { message: Arc<str>, at: Instant, rejected: Option<Arc<Resource>>, same_as: Option<Arc<str>> },
    /// Asked for, not held yet.
    Requested,
    /// Asked for by name; the server has no such resource.
    DoesNotExist,
}

impl Rollout {
    /// Every resource the node asks for or holds, by type and name.
    pub fn resource_states(&self) -> Vec<ResourceState> {
        let mut out = Vec::new();
        let types: BTreeSet<&Arc<str>> = self.subscriptions.keys().map(|(_, t)| t).collect();
        for type_url in types {
            let subs = self.subscriptions.iter().filter(|((_, t), _)| t == type_url).map(|(_, s)| s);
            let mut wildcard = false;
            let mut names: BTreeSet<Arc<str>> = BTreeSet::new();
            for (w, named) in subs {
                wildcard |= *w;
                names.extend(named.iter().cloned());
            }
            if wildcard {
                for set in [self.target.get(type_url), self.acked.get(type_url)].into_iter().flatten() {
                    names.extend(set.resources().map(|r| r.name().clone()));
                }
            }
            let rejected = self.rejected.iter().find(|((_, t), _)| t == type_url).map(|(_, r)| r);
            // What the node failed on: the resources of the rejected response it did not hold
            // that its message names, else all it did not hold (one of them it refused), else
            // all the response carried. Envoy's own config dump marks the one it failed on;
            // the rest of a SotW response stays as the node holds it.
            let failed: BTreeSet<Arc<str>> = rejected.map(|r| self.failed_on(type_url, r)).unwrap_or_default();
            // What the node keeps out after rejecting it alone (design 016, part 3a): it is
            // served the form it accepted (or nothing, for a new one), and stays rejected with
            // its message.
            let held_back = self.node_holds().places_of(type_url);
            if wildcard {
                names.extend(held_back.keys().cloned());
            }
            let mut reported: Option<Arc<str>> = None;
            for name in names {
                let target = self.target.resource(type_url, &name);
                let held = self.acked.resource(type_url, &name).cloned();
                let rejection = rejected.filter(|_| failed.contains(&name));
                let state = match (rejection, &held, target) {
                    (None, _, _) if held_back.contains_key(&name) => {
                        let hold = held_back[&name];
                        State::Nacked { message: hold.message.clone(), at: hold.at, rejected: None, same_as: None }
                    }
                    (Some(r), _, _) => State::Nacked {
                        message: r.message.clone(),
                        at: r.at,
                        rejected: crate::rollout::update_resources(&r.update)
                            .into_iter()
                            .find(|x| *x.name() == name)
                            .cloned(),
                        same_as: match &reported {
                            Some(first) => Some(first.clone()),
                            None => {
                                reported = Some(name.clone());
                                None
                            }
                        },
                    },
                    (None, Some(h), t) => State::Acked { stale: t.is_some_and(|t| t.version() != h.version()) },
                    (None, None, Some(_)) => State::Requested,
                    (None, None, None) => State::DoesNotExist,
                };
                out.push(ResourceState { type_url: type_url.clone(), name, state, held });
            }
        }
        out
    }

    /// The names in a rejected response of `type_url` that the node failed on.
    fn failed_on(&self, type_url: &str, r: &crate::rollout::Rejected) -> BTreeSet<Arc<str>> {
        let carried = crate::rollout::update_resources(&r.update);
        let new: Vec<&Arc<Resource>> = carried
            .iter()
            .copied()
            .filter(|x| self.acked.resource(type_url, x.name()).is_none_or(|h| h.version() != x.version()))
            .collect();
        let named: BTreeSet<Arc<str>> = new
            .iter()
            .filter(|x| !x.name().is_empty() && r.message.contains(x.name().as_ref() as &str))
            .map(|x| x.name().clone())
            .collect();
        if !named.is_empty() {
            return named;
        }
        let pick = if new.is_empty() { carried } else { new };
        pick.into_iter().map(|x| x.name().clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::{cla, cluster, snap};
    use crate::rollout::{RolloutConfig, Update};
    use crate::types::{CLUSTER, ENDPOINT};

    fn states(r: &Rollout) -> Vec<(String, String, State)> {
        r.resource_states().into_iter().map(|s| (s.type_url.to_string(), s.name.to_string(), s.state)).collect()
    }

    /// Acked, stale, rejected with the error, requested, and named but missing.
    #[test]
    fn each_resource_gets_its_own_state() {
        let now = Instant::now();
        let v1 = snap(vec![cluster("a"), cla("a", 1)]);
        let mut r = Rollout::new(RolloutConfig::default(), Arc::new(v1.clone()), now);
        let (c, e) = (Arc::<str>::from(CLUSTER), Arc::<str>::from(ENDPOINT));
        r.subscribe(0, &c, true, &[], now);
        r.subscribe(0, &e, false, &["a".into(), "ghost".into()], now);
        // Nothing answered yet: what exists is requested; what does not, does not exist.
        let s = states(&r);
        assert!(s.contains(&(CLUSTER.into(), "a".into(), State::Requested)), "{s:?}");
        assert!(s.contains(&(ENDPOINT.into(), "ghost".into(), State::DoesNotExist)), "{s:?}");

        r.sent(0, &c, "n1".into(), Update::Replace(v1.get(CLUSTER).unwrap().clone()));
        r.answered(0, &c, "n1", None, now);
        assert!(states(&r).contains(&(CLUSTER.into(), "a".into(), State::Acked { stale: false })));

        // A new version of the cluster, rejected: NACKED with the message; the node keeps a.
        let mut changed = cluster("a");
        changed = Resource::new(changed.type_url().clone(), "a", &[changed.body().as_ref(), &[0x30, 0x01]].concat());
        let v2 = snap(vec![changed, cla("a", 1)]);
        r.set_target(Arc::new(v2.clone()), now);
        assert!(states(&r).contains(&(CLUSTER.into(), "a".into(), State::Acked { stale: true })));
        r.sent(0, &c, "n2".into(), Update::Replace(v2.get(CLUSTER).unwrap().clone()));
        r.answered(0, &c, "n2", Some("bad cluster"), now);
        let a = r.resource_states().into_iter().find(|s| s.type_url.as_ref() == CLUSTER).unwrap();
        match &a.state {
            State::Nacked { message, rejected, .. } => {
                assert_eq!(message.as_ref(), "bad cluster");
                assert_eq!(
                    rejected.as_ref().map(|x| x.version().clone()),
                    v2.resource(CLUSTER, "a").map(|x| x.version().clone())
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(a.held.map(|h| h.version().clone()), v1.resource(CLUSTER, "a").map(|x| x.version().clone()));
    }

    /// Issue 32, item 8: a rejected SotW response of two listeners, the node's message naming
    /// one. Only that one is NACKED (Envoy's own config dump marks the one it failed on), and
    /// the message is given once per rejection, the other resources pointing at it.
    #[test]
    fn only_what_the_node_failed_on_is_nacked_and_the_message_is_given_once() {
        use crate::plan::tests::{listener, listener_v, route};
        use crate::types::{LISTENER, ROUTE};
        let now = Instant::now();
        let v1 = snap(vec![listener("good", 1, "r"), listener("bad", 2, "r"), route("r", &["c"])]);
        let mut r = Rollout::new(RolloutConfig::default(), Arc::new(v1.clone()), now);
        let l = Arc::<str>::from(LISTENER);
        r.subscribe(0, &l, true, &[], now);
        r.subscribe(0, &Arc::from(ROUTE), false, &["r".into()], now);
        r.sent(0, &l, "n1".into(), Update::Replace(v1.get(LISTENER).unwrap().clone()));
        r.answered(0, &l, "n1", None, now);
        // Both change; the node refuses the whole response, naming "bad".
        let v2 = snap(vec![listener_v("good", 1, "r", 7), listener_v("bad", 2, "r", 7), route("r", &["c"])]);
        r.set_target(Arc::new(v2.clone()), now);
        r.sent(0, &l, "n2".into(), Update::Replace(v2.get(LISTENER).unwrap().clone()));
        r.answered(0, &l, "n2", Some("Error adding/updating listener(s) bad: no"), now);
        let s = states(&r);
        assert!(s.iter().any(|(_, n, st)| n == "good" && *st == State::Acked { stale: true }), "{s:?}");
        assert!(s.iter().any(|(_, n, st)| n == "bad" && matches!(st, State::Nacked { same_as: None, .. })), "{s:?}");

        // A message naming neither: both are NACKED, the message shared, given with the first.
        let v3 = snap(vec![listener_v("good", 1, "r", 8), listener_v("bad", 2, "r", 8), route("r", &["c"])]);
        r.set_target(Arc::new(v3.clone()), now);
        r.sent(0, &l, "n3".into(), Update::Replace(v3.get(LISTENER).unwrap().clone()));
        r.answered(0, &l, "n3", Some("rejected"), now);
        let nacked: Vec<(String, Option<Arc<str>>)> = r
            .resource_states()
            .into_iter()
            .filter_map(|s| match s.state {
                State::Nacked { same_as, .. } => Some((s.name.to_string(), same_as)),
                _ => None,
            })
            .collect();
        assert_eq!(nacked, [("bad".to_owned(), None), ("good".to_owned(), Some(Arc::from("bad")))]);
    }
}

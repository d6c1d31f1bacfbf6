//! The cache: the published resource set of every node group, and a watch per group
//! that streams wait on. Publishing is all-or-nothing: every set is checked first, and
//! one inconsistent set refuses the whole publication, leaving what was serving in place.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::consistency::{self, ConsistencyError};
use crate::snapshot::Snapshot;

/// A complete state to serve: the default set, and sets for named node groups.
#[derive(Debug, Clone, Default)]
pub struct Publication {
    /// Served to every node whose group has no set of its own.
    pub default: Snapshot,
    pub groups: BTreeMap<String, Snapshot>,
}

/// Why a publication was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} refused: {}", group_label(group), errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
pub struct PublishError {
    /// `None` for the default set.
    pub group: Option<String>,
    pub errors: Vec<ConsistencyError>,
}

fn group_label(g: &Option<String>) -> String {
    match g {
        None => "resource set".into(),
        Some(g) => format!("resource set for node group {g:?}"),
    }
}

/// What a successful publication changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PublishReport {
    /// Groups whose served set changed (`""` is the default group).
    pub changed_groups: Vec<String>,
}

struct Group {
    own: Option<Arc<Snapshot>>,
    tx: watch::Sender<Arc<Snapshot>>,
}

/// Whether a node group is given the Secrets of the default set ([`Cache::give_secrets_to`]).
type Keyed = Arc<dyn Fn(&str) -> bool + Send + Sync>;

struct Inner {
    default: Arc<Snapshot>,
    groups: HashMap<String, Group>,
    /// `None`: every group is.
    keyed: Option<Keyed>,
    /// The default set as a group not given its Secrets is served it: made when first needed
    /// after each publication.
    withheld_default: Option<Arc<Snapshot>>,
}

impl Inner {
    /// What group `name` is served, with `own` its own set (if it has one): that, or the
    /// default, less the default's Secrets and what stands on them unless the group is given
    /// them (`crate::withheld`, issue 49, item 6).
    fn served(&mut self, name: &str, own: Option<&Arc<Snapshot>>) -> Arc<Snapshot> {
        let keyed = self.keyed.as_ref().is_none_or(|k| k(name));
        match (own, keyed) {
            (Some(own), true) => own.clone(),
            (None, true) => self.default.clone(),
            (Some(own), false) => Arc::new(crate::withheld::untagged_secrets(own, &self.default)),
            (None, false) => {
                let default = self.default.clone();
                self.withheld_default
                    .get_or_insert_with(|| Arc::new(crate::withheld::untagged_secrets(&default, &default)))
                    .clone()
            }
        }
    }
}

/// Shared by the sources that publish and by every stream that serves.
pub struct Cache {
    inner: Mutex<Inner>,
}

impl Default for Cache {
    fn default() -> Self {
        Self::new()
    }
}

impl Cache {
    pub fn new() -> Self {
        Cache {
            inner: Mutex::new(Inner {
                default: Arc::new(Snapshot::default()),
                groups: HashMap::new(),
                keyed: None,
                withheld_default: None,
            }),
        }
    }

    /// Gives the Secrets of the default set only to the node groups `keyed` says (the groups
    /// the identity rules name as their proxies'); every other group gets only the Secrets
    /// made for it alone, and what can stand without the rest. Set before anything is watched.
    pub fn give_secrets_to(&self, keyed: impl Fn(&str) -> bool + Send + Sync + 'static) {
        let mut inner = self.inner.lock().unwrap();
        inner.keyed = Some(Arc::new(keyed));
        inner.withheld_default = None;
    }

    /// Checks and publishes a complete state. Unchanged groups are not woken.
    pub fn publish(&self, p: Publication) -> Result<PublishReport, PublishError> {
        self.check(&p)?;
        let mut inner = self.inner.lock().unwrap();
        let mut report = PublishReport::default();
        let default = Arc::new(p.default);
        if !inner.default.same_content(&default) {
            report.changed_groups.push(String::new());
        }
        inner.default = default.clone();
        inner.withheld_default = None;
        let mut own: HashMap<String, Arc<Snapshot>> = p.groups.into_iter().map(|(g, s)| (g, Arc::new(s))).collect();
        // Drop groups nobody watches and that no longer have a set of their own.
        inner.groups.retain(|g, e| own.contains_key(g) || e.tx.receiver_count() > 0);
        for g in own.keys() {
            if !inner.groups.contains_key(g) {
                let (tx, _) = watch::channel(default.clone());
                inner.groups.insert(g.clone(), Group { own: None, tx });
            }
        }
        let names: Vec<String> = inner.groups.keys().cloned().collect();
        for name in names {
            let mine = own.remove(&name);
            let next = inner.served(&name, mine.as_ref());
            let Some(group) = inner.groups.get_mut(&name) else { continue };
            group.own = mine;
            let changed = group.tx.send_if_modified(|cur| {
                if cur.same_content(&next) {
                    false
                } else {
                    *cur = next;
                    true
                }
            });
            if changed && !name.is_empty() {
                report.changed_groups.push(name.clone());
            }
        }
        report.changed_groups.sort();
        report.changed_groups.dedup();
        Ok(report)
    }

    /// The checks [`Cache::publish`] makes, without publishing: what a publication would be
    /// refused for.
    pub fn check(&self, p: &Publication) -> Result<(), PublishError> {
        let previous = self.inner.lock().unwrap().default.clone();
        consistency::check_since(&p.default, &previous).map_err(|errors| PublishError { group: None, errors })?;
        for (g, s) in &p.groups {
            consistency::check(s).map_err(|errors| PublishError { group: Some(g.clone()), errors })?;
        }
        Ok(())
    }

    /// A watch on what `group` is served. Groups without a set of their own follow the default.
    pub fn watch(&self, group: &str) -> watch::Receiver<Arc<Snapshot>> {
        let mut inner = self.inner.lock().unwrap();
        if let Some(g) = inner.groups.get(group) {
            return g.tx.subscribe();
        }
        let served = inner.served(group, None);
        let tx = watch::channel(served).0;
        let rx = tx.subscribe();
        inner.groups.insert(group.to_owned(), Group { own: None, tx });
        rx
    }

    /// Forgets `group` if nobody watches it and it has no set of its own (a stream of it
    /// closed); a later watch of it starts from the default set again.
    pub fn release(&self, group: &str) {
        let mut inner = self.inner.lock().unwrap();
        if inner.groups.get(group).is_some_and(|g| g.own.is_none() && g.tx.receiver_count() == 0) {
            inner.groups.remove(group);
        }
    }

    /// Whether `group` has a set of its own (not the default's).
    pub fn has_own(&self, group: &str) -> bool {
        self.inner.lock().unwrap().groups.get(group).is_some_and(|g| g.own.is_some())
    }

    /// What `group` is served now.
    pub fn snapshot(&self, group: &str) -> Arc<Snapshot> {
        let mut inner = self.inner.lock().unwrap();
        match inner.groups.get(group) {
            Some(g) => g.tx.borrow().clone(),
            None => inner.served(group, None),
        }
    }

    /// The default set and every group with a set of its own, for `/debug/resources`.
    /// A group not given the default set's Secrets is listed with what it is served, whether
    /// or not it has a set of its own. Each is what its watchers were last sent: nothing is
    /// computed again here.
    pub fn sets(&self) -> (Arc<Snapshot>, BTreeMap<String, Arc<Snapshot>>) {
        let inner = self.inner.lock().unwrap();
        let groups = inner
            .groups
            .iter()
            .filter(|(g, e)| e.own.is_some() || inner.keyed.as_ref().is_some_and(|k| !k(g)))
            .map(|(g, e)| (g.clone(), e.tx.borrow().clone()))
            .collect();
        (inner.default.clone(), groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use crate::types::{CLUSTER, ENDPOINT};
    use prost::Message;

    fn eds_cluster(name: &str) -> Resource {
        use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
        let c = Cluster {
            name: name.into(),
            cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(cluster::DiscoveryType::Eds as i32)),
            ..Default::default()
        };
        Resource::new(CLUSTER, name, &c.encode_to_vec())
    }

    fn cla(name: &str) -> Resource {
        use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
        Resource::new(
            ENDPOINT,
            name,
            &ClusterLoadAssignment { cluster_name: name.into(), ..Default::default() }.encode_to_vec(),
        )
    }

    fn publication(rs: Vec<Resource>) -> Publication {
        Publication { default: Snapshot::from_resources(rs).unwrap(), groups: BTreeMap::new() }
    }

    /// Issue 49, item 6: a group not given the default set's Secrets never sees them, from its
    /// first watch on (a node of it connecting before or after a publication); a group given
    /// them, and one with a Secret of its own, see theirs.
    #[test]
    fn a_group_not_given_secrets_never_sees_the_default_s() {
        use crate::types::SECRET;
        let secret = |n: &str| Resource::new(SECRET, n, b"key");
        let cache = Cache::new();
        cache.give_secrets_to(|g| g == "edge");
        let early = cache.watch("team-a");
        let mut p = publication(vec![secret("gw-cert"), eds_cluster("c"), cla("c")]);
        let own = Snapshot::from_resources(vec![secret("gw-cert"), secret("team-b-cert"), eds_cluster("c"), cla("c")]);
        p.groups.insert("team-b".into(), own.unwrap());
        cache.publish(p).unwrap();
        let secrets = |s: &Snapshot| -> Vec<String> {
            s.get(SECRET).map(|t| t.resources().map(|r| r.name().to_string()).collect()).unwrap_or_default()
        };
        assert!(secrets(&early.borrow()).is_empty());
        assert_eq!(early.borrow().get(CLUSTER).map(|t| t.len()), Some(1), "the rest is served");
        assert!(secrets(&cache.watch("team-c").borrow()).is_empty(), "a later watch too");
        assert_eq!(secrets(&cache.snapshot("team-b")), ["team-b-cert"]);
        assert_eq!(secrets(&cache.watch("edge").borrow()), ["gw-cert"]);
        assert!(cache.sets().1.get("team-a").is_some_and(|s| secrets(s).is_empty()), "and /debug/resources says so");
    }

    #[test]
    fn a_group_nobody_watches_any_more_is_released() {
        let cache = Cache::new();
        let groups = |c: &Cache| c.inner.lock().unwrap().groups.len();
        let (a, b) = (cache.watch("made-up-1"), cache.watch("made-up-2"));
        let _c = cache.watch("made-up-2");
        assert_eq!(groups(&cache), 2);
        drop((a, b));
        cache.release("made-up-1");
        cache.release("made-up-2");
        // made-up-2 still has a watcher.
        assert_eq!(groups(&cache), 1);
        // A group with a set of its own stays, watched or not.
        let mut p = publication(vec![]);
        p.groups.insert("own".into(), Snapshot::default());
        cache.publish(p).unwrap();
        cache.release("own");
        assert!(cache.inner.lock().unwrap().groups.contains_key("own"));
    }

    #[test]
    fn inconsistent_set_is_refused_and_previous_keeps_serving() {
        let cache = Cache::new();
        let rx = cache.watch("edge");
        cache.publish(publication(vec![eds_cluster("a"), cla("a")])).unwrap();
        let good = cache.snapshot("edge");
        assert_eq!(good.len(), 2);
        let err = cache.publish(publication(vec![eds_cluster("a"), eds_cluster("b"), cla("a")])).unwrap_err();
        assert!(err.to_string().contains("load assignment \"b\""), "{err}");
        assert_eq!(*cache.snapshot("edge"), *good);
        assert_eq!(**rx.borrow(), *good);
    }

    #[test]
    fn groups_get_their_own_sets_and_unchanged_groups_are_not_woken() {
        let cache = Cache::new();
        let mut edge = cache.watch("edge");
        let mut other = cache.watch("other");
        let mut p = publication(vec![eds_cluster("a"), cla("a")]);
        p.groups.insert("edge".into(), Snapshot::from_resources([eds_cluster("e"), cla("e")]).unwrap());
        let report = cache.publish(p.clone()).unwrap();
        assert_eq!(report.changed_groups, ["", "edge", "other"]);
        assert!(edge.has_changed().unwrap() && other.has_changed().unwrap());
        assert!(edge.borrow_and_update().resource(CLUSTER, "e").is_some());
        assert!(other.borrow_and_update().resource(CLUSTER, "a").is_some());
        // Same content again: nobody is woken.
        assert!(cache.publish(p).unwrap().changed_groups.is_empty());
        assert!(!edge.has_changed().unwrap() && !other.has_changed().unwrap());
    }
}

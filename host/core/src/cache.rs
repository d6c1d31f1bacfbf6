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

struct Inner {
    default: Arc<Snapshot>,
    groups: HashMap<String, Group>,
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
        Cache { inner: Mutex::new(Inner { default: Arc::new(Snapshot::default()), groups: HashMap::new() }) }
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
        let mut own: HashMap<String, Arc<Snapshot>> = p.groups.into_iter().map(|(g, s)| (g, Arc::new(s))).collect();
        // Drop groups nobody watches and that no longer have a set of their own.
        inner.groups.retain(|g, e| own.contains_key(g) || e.tx.receiver_count() > 0);
        for g in own.keys() {
            if !inner.groups.contains_key(g) {
                let (tx, _) = watch::channel(default.clone());
                inner.groups.insert(g.clone(), Group { own: None, tx });
            }
        }
        for (name, group) in inner.groups.iter_mut() {
            group.own = own.remove(name);
            let next = group.own.clone().unwrap_or_else(|| default.clone());
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
        let default = inner.default.clone();
        inner
            .groups
            .entry(group.to_owned())
            .or_insert_with(|| Group { own: None, tx: watch::channel(default).0 })
            .tx
            .subscribe()
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
        let inner = self.inner.lock().unwrap();
        inner.groups.get(group).and_then(|g| g.own.clone()).unwrap_or_else(|| inner.default.clone())
    }

    /// The default set and every group with a set of its own, for `/debug/resources`.
    pub fn sets(&self) -> (Arc<Snapshot>, BTreeMap<String, Arc<Snapshot>>) {
        let inner = self.inner.lock().unwrap();
        let groups = inner.groups.iter().filter_map(|(g, e)| Some((g.clone(), e.own.clone()?))).collect();
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

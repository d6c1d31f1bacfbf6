//! Immutable resource sets: what one node group is served.

use std::collections::BTreeMap;
use std::sync::Arc;

use imbl::OrdMap;

use sha2::{Digest, Sha256};

use crate::resource::{Resource, set_version};
use crate::small_map::SmallMap;

/// A name whose entry differs between two sets, with its entry in each (`None` where a set
/// lacks it).
pub type ChangedEntry<'a> = (&'a Arc<str>, Option<&'a Arc<Resource>>, Option<&'a Arc<Resource>>);

/// All resources of one type, by name, with a version derived from their contents.
#[derive(Debug, Clone)]
pub struct TypeSet {
    /// Made from `sum` when first asked for: most sets a rollout builds on the way (what a
    /// node surely holds, a gated offer) are compared by sum and never need it.
    version: std::sync::OnceLock<Arc<str>>,
    /// A persistent map: cloning is O(1) and a changed copy shares every untouched node, so a
    /// small change to a large set costs O(changes · log n).
    resources: OrdMap<Arc<str>, Arc<Resource>>,
    /// The wrapping sum of [`Resource::entry_hash`] over the set: what the version is made from.
    sum: u128,
}

/// The version of any list of resources of one type, computed as a [`TypeSet`]'s is: a list
/// holding every resource of a type gets the type's version.
pub fn list_version<'a>(resources: impl IntoIterator<Item = &'a Arc<Resource>>) -> String {
    sum_version(resources.into_iter().fold(0u128, |acc, r| acc.wrapping_add(r.entry_hash())))
}

/// 128 bits of SHA-256 over a resource's name and version.
pub(crate) fn pair_hash(name: &str, version: &str) -> u128 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([0]);
    h.update(version.as_bytes());
    let d = h.finalize();
    u128::from_le_bytes(d[..16].try_into().expect("SHA-256 has 32 bytes"))
}

pub(crate) fn sum_version(sum: u128) -> String {
    let folded = (sum as u64) ^ ((sum >> 64) as u64);
    // 16 lowercase hex digits, as `format!("{folded:016x}")` writes them, without the
    // formatting machinery: every set's version is made here.
    (0..16).rev().map(|i| char::from(b"0123456789abcdef"[((folded >> (4 * i)) & 0xf) as usize])).collect()
}

/// How one resource differs between two sets of a type.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    Added(&'a Arc<Resource>),
    Updated(&'a Arc<Resource>),
    Removed(&'a Arc<Resource>),
}

impl PartialEq for TypeSet {
    fn eq(&self, other: &Self) -> bool {
        self.sum == other.sum && self.resources == other.resources
    }
}

impl Default for TypeSet {
    fn default() -> Self {
        TypeSet::new(OrdMap::new())
    }
}

impl TypeSet {
    fn new(resources: OrdMap<Arc<str>, Arc<Resource>>) -> Self {
        let sum = resources.values().fold(0u128, |acc, r| acc.wrapping_add(r.entry_hash()));
        Self::with_sum(resources, sum)
    }
    fn with_sum(resources: OrdMap<Arc<str>, Arc<Resource>>, sum: u128) -> Self {
        TypeSet { version: std::sync::OnceLock::new(), sum, resources }
    }
    /// The type's version: derived from every (name, version) pair, so equal sets get equal
    /// versions on every replica and after every restart. It is a sum of per-entry hashes,
    /// so a change to one resource updates it without hashing the others.
    pub fn version(&self) -> &Arc<str> {
        self.version.get_or_init(|| sum_version(self.sum).into())
    }
    pub fn get(&self, name: &str) -> Option<&Arc<Resource>> {
        self.resources.get(name)
    }
    /// The names whose resource differs between `self` and `other` (added, changed or gone),
    /// in order, each with its entry here and there (`None` where a set lacks it). The maps
    /// are persistent: what two sets share is not visited, so a set and the one a small change
    /// made of it compare in O(changes · log n).
    pub fn changed_entries<'a>(&'a self, other: &'a TypeSet) -> Vec<ChangedEntry<'a>> {
        use imbl::ordmap::DiffItem;
        self.resources
            .diff(&other.resources)
            .filter_map(|d| match d {
                DiffItem::Add(k, r) => Some((k, None, Some(r))),
                DiffItem::Remove(k, r) => Some((k, Some(r), None)),
                DiffItem::Update { old: (k, a), new: (_, b) } => {
                    (!Arc::ptr_eq(a, b) && a.entry_hash() != b.entry_hash()).then_some((k, Some(a), Some(b)))
                }
            })
            .collect()
    }
    pub fn resources(&self) -> impl ExactSizeIterator<Item = &Arc<Resource>> + Clone {
        self.resources.iter().map(|(_, r)| r)
    }
    /// What changed from `old` to this set; parts the two share are skipped without a look.
    pub fn changes_since<'a>(&'a self, old: &'a TypeSet) -> impl Iterator<Item = Change<'a>> {
        old.resources.diff(&self.resources).map(|d| match d {
            imbl::ordmap::DiffItem::Add(_, r) => Change::Added(r),
            imbl::ordmap::DiffItem::Update { new: (_, r), .. } => Change::Updated(r),
            imbl::ordmap::DiffItem::Remove(_, r) => Change::Removed(r),
        })
    }
    pub fn len(&self) -> usize {
        self.resources.len()
    }
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    /// A set of the given resources (the last of two with one name wins).
    pub fn from_shared(resources: impl IntoIterator<Item = Arc<Resource>>) -> TypeSet {
        TypeSet::new(resources.into_iter().map(|r| (r.name().clone(), r)).collect())
    }

    /// This set with every resource of `old` it has no name for: what a node holds while it
    /// is moved from `old` to this set. Shared parts of the two are skipped without a look.
    pub fn overlay(&self, old: &TypeSet) -> TypeSet {
        let (mut map, mut sum) = (self.resources.clone(), self.sum);
        for d in old.resources.diff(&self.resources) {
            if let imbl::ordmap::DiffItem::Remove(name, r) = d {
                sum = sum.wrapping_add(r.entry_hash());
                map.insert(name.clone(), r.clone());
            }
        }
        TypeSet::with_sum(map, sum)
    }

    /// The resources this set and `other` hold at the same version.
    pub fn intersect(&self, other: &TypeSet) -> TypeSet {
        let (mut map, mut sum) = (self.resources.clone(), self.sum);
        for d in self.resources.diff(&other.resources) {
            let gone = match d {
                imbl::ordmap::DiffItem::Remove(_, r) | imbl::ordmap::DiffItem::Update { old: (_, r), .. } => r,
                imbl::ordmap::DiffItem::Add(..) => continue,
            };
            map.remove(gone.name());
            sum = sum.wrapping_sub(gone.entry_hash());
        }
        TypeSet::with_sum(map, sum)
    }

    /// This set with `removed` taken out and `added` put in (replacing any of the same name):
    /// what a Delta client holds after it applied a response.
    pub fn patch(&self, removed: &[Arc<str>], added: &[Arc<Resource>]) -> TypeSet {
        let (mut map, mut sum) = (self.resources.clone(), self.sum);
        for name in removed.iter().map(|n| n.as_ref()).chain(added.iter().map(|r| r.name().as_ref())) {
            if let Some(gone) = map.remove(name) {
                sum = sum.wrapping_sub(gone.entry_hash());
            }
        }
        for r in added {
            sum = sum.wrapping_add(r.entry_hash());
            // Only a second resource of one name in `added` replaces anything here.
            if let Some(earlier) = map.insert(r.name().clone(), r.clone()) {
                sum = sum.wrapping_sub(earlier.entry_hash());
            }
        }
        TypeSet::with_sum(map, sum)
    }

    /// The [`sum`](Self::sum) of `self.patch(removed, added)`, without building it: enough to
    /// tell which set a node holds after a Delta response when it is one already built.
    pub fn patched_sum(&self, removed: &[Arc<str>], added: &[Arc<Resource>]) -> u128 {
        let names = || removed.iter().map(|n| n.as_ref()).chain(added.iter().map(|r| r.name().as_ref()));
        let mut sum = self.sum;
        if removed.len() + added.len() <= 16 {
            // A response's usual few: compare pairwise rather than allocate.
            for (i, n) in names().enumerate() {
                if !names().take(i).any(|m| m == n)
                    && let Some(gone) = self.resources.get(n)
                {
                    sum = sum.wrapping_sub(gone.entry_hash());
                }
            }
            // Of two added resources with one name, the last stays.
            for (i, r) in added.iter().enumerate() {
                if !added[i + 1..].iter().any(|later| later.name() == r.name()) {
                    sum = sum.wrapping_add(r.entry_hash());
                }
            }
            return sum;
        }
        let gone: std::collections::BTreeSet<&str> = names().collect();
        for r in gone.into_iter().filter_map(|n| self.resources.get(n)) {
            sum = sum.wrapping_sub(r.entry_hash());
        }
        let last: BTreeMap<&str, &Arc<Resource>> = added.iter().map(|r| (r.name().as_ref(), r)).collect();
        last.values().fold(sum, |sum, r| sum.wrapping_add(r.entry_hash()))
    }

    /// The wrapping sum of the entries' hashes the version is made from: equal sets have
    /// equal sums (and different ones, different sums, but for a 2^-128 chance).
    pub fn sum(&self) -> u128 {
        self.sum
    }
}

/// A complete set of resources of every type, as published for a node group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// A handful of types: a vector, not a tree (every node keeps the snapshot it
    /// acknowledged).
    types: SmallMap<Arc<str>, Arc<TypeSet>>,
    /// What nodes served this snapshot ask for by name, and a plan for nodes moved to it,
    /// computed once for all of them.
    derived: Derived,
}

/// Values computed from a snapshot on first use and shared by all its clones (those made before
/// too: the pipeline keeps a clone of what it publishes, and the next snapshot is made from
/// that clone, carrying what still holds). Not part of the snapshot's identity: equal
/// snapshots are equal whatever has been computed. The values are made on first use: the
/// snapshots nodes acknowledged (one per node) never need them.
#[derive(Clone, Default)]
struct Derived(Arc<std::sync::OnceLock<Arc<DerivedValues>>>);

impl Derived {
    fn values(&self) -> &DerivedValues {
        self.0.get_or_init(Default::default)
    }

    /// What a snapshot of `now`'s sets, made from one of `was`'s with these values, keeps of
    /// them: the names its nodes ask for, when the listeners, clusters and scoped routes they
    /// are read from are the same sets (an endpoint or route change costs no walk of every
    /// cluster and listener). Nothing else: a plan and holds are the target's own.
    fn carried(&self, was: &SmallMap<Arc<str>, Arc<TypeSet>>, now: &SmallMap<Arc<str>, Arc<TypeSet>>) -> Derived {
        use crate::types::{CLUSTER, LISTENER, SCOPED_ROUTE};
        let Some(wanted) = self.0.get().and_then(|v| v.wanted.get()) else { return Derived::default() };
        let same = [LISTENER, CLUSTER, SCOPED_ROUTE].iter().all(|t| match (was.get(*t), now.get(*t)) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        });
        if !same {
            return Derived::default();
        }
        let values = DerivedValues::default();
        let _ = values.wanted.set(wanted.clone());
        Derived(Arc::new(std::sync::OnceLock::from(Arc::new(values))))
    }
}

#[derive(Default)]
struct DerivedValues {
    wanted: std::sync::OnceLock<Arc<crate::plan::Wanted>>,
    /// The plans of the first nodes moved to this snapshot from each settled state, for the
    /// group's other nodes in the same state (at most [`crate::plan::SHARED_PLANS`]).
    plan: [std::sync::OnceLock<crate::plan::SharedPlan>; crate::plan::SHARED_PLANS],
    /// What rejections of this target's resources decoded and composed, for every node.
    holds: crate::node_holds::Memo,
    /// The snapshot's version, for a target every node of a group compares against.
    version: std::sync::OnceLock<Arc<str>>,
}

impl PartialEq for Derived {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("..")
    }
}

/// Two resources of one type with one name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("duplicate {} {name:?}: defined in {first} and again in {second}", crate::types::short_name(type_url))]
pub struct DuplicateResource {
    pub type_url: String,
    pub name: String,
    pub first: String,
    pub second: String,
}

impl Snapshot {
    pub fn builder() -> SnapshotBuilder {
        SnapshotBuilder::default()
    }
    /// Builds a snapshot, refusing duplicate (type, name) pairs.
    pub fn from_resources(resources: impl IntoIterator<Item = Resource>) -> Result<Self, DuplicateResource> {
        let mut b = Self::builder();
        for r in resources {
            b.add(r)?;
        }
        Ok(b.build())
    }
    pub fn get(&self, type_url: &str) -> Option<&Arc<TypeSet>> {
        self.types.get(type_url)
    }
    pub fn resource(&self, type_url: &str, name: &str) -> Option<&Arc<Resource>> {
        self.types.get(type_url)?.get(name)
    }
    pub fn types(&self) -> impl Iterator<Item = (&Arc<str>, &Arc<TypeSet>)> {
        self.types.iter()
    }
    pub fn len(&self) -> usize {
        self.types.values().map(|t| t.len()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether two snapshots serve the same content: the same types with the same versions.
    /// Versions are content hashes, so this compares a few strings instead of every byte.
    pub fn same_content(&self, other: &Snapshot) -> bool {
        self.types.len() == other.types.len()
            && self.types.iter().zip(other.types.iter()).all(|((ta, a), (tb, b))| ta == tb && a.sum() == b.sum())
    }

    /// This snapshot with `remove` taken out and `add` put in. Types nothing touches keep
    /// their sets (and versions) as they are, and every untouched resource stays the same
    /// `Arc`, so a small change to a large set costs little, here and in the consistency
    /// check. A resource added under a name still present is a duplicate.
    pub fn apply(
        &self,
        remove: impl IntoIterator<Item = (Arc<str>, Arc<str>)>,
        add: impl IntoIterator<Item = Resource>,
    ) -> Result<Snapshot, DuplicateResource> {
        type Map = (OrdMap<Arc<str>, Arc<Resource>>, u128);
        fn open<'a>(
            touched: &'a mut BTreeMap<Arc<str>, Map>,
            types: &SmallMap<Arc<str>, Arc<TypeSet>>,
            t: &Arc<str>,
        ) -> &'a mut Map {
            touched
                .entry(t.clone())
                .or_insert_with(|| types.get(t).map(|s| (s.resources.clone(), s.sum)).unwrap_or_default())
        }
        let mut touched: BTreeMap<Arc<str>, Map> = BTreeMap::new();
        for (t, name) in remove {
            let (map, sum) = open(&mut touched, &self.types, &t);
            if let Some(gone) = map.remove(&name) {
                *sum = sum.wrapping_sub(gone.entry_hash());
            }
        }
        for r in add {
            let (map, sum) = open(&mut touched, &self.types, r.type_url());
            if let Some(prev) = map.get(r.name().as_ref()) {
                return Err(DuplicateResource {
                    type_url: r.type_url().to_string(),
                    name: r.name().to_string(),
                    first: prev.origin().unwrap_or("(unknown)").to_owned(),
                    second: r.origin().unwrap_or("(unknown)").to_owned(),
                });
            }
            *sum = sum.wrapping_add(r.entry_hash());
            map.insert(r.name().clone(), Arc::new(r));
        }
        let mut types = self.types.clone();
        for (t, (map, sum)) in touched {
            if map.is_empty() {
                types.remove(&t);
            } else {
                types.insert(t, Arc::new(TypeSet::with_sum(map, sum)));
            }
        }
        let derived = self.derived.carried(&self.types, &types);
        Ok(Snapshot { types, derived })
    }

    /// This snapshot with the set of `type_url` replaced by `set` (kept even when empty: an
    /// empty set is not the same as no set).
    pub fn with_set(&self, type_url: Arc<str>, set: Arc<TypeSet>) -> Snapshot {
        self.with_sets([(type_url, set)])
    }

    /// Replaces the set of `type_url` in place, as [`with_set`](Self::with_set) without the
    /// copy of the type map: for the snapshots a node's rollout keeps of what the node
    /// holds, which move on every ACK and never need the derived values. Those are made
    /// afresh if anything was computed or shared (never wrong: they are made on first use),
    /// else the empty memo is kept.
    pub fn set(&mut self, type_url: &Arc<str>, set: Arc<TypeSet>) {
        match self.types.get_mut(type_url.as_ref()) {
            Some(slot) => *slot = set,
            None => {
                self.types.insert(type_url.clone(), set);
            }
        }
        if Arc::get_mut(&mut self.derived.0).is_none_or(|values| values.get().is_some()) {
            self.derived = Derived::default();
        }
    }

    /// This snapshot with several sets replaced at once (one copy of the type map).
    pub fn with_sets(&self, sets: impl IntoIterator<Item = (Arc<str>, Arc<TypeSet>)>) -> Snapshot {
        let mut types = self.types.clone();
        for (t, set) in sets {
            types.insert(t, set);
        }
        let derived = self.derived.carried(&self.types, &types);
        Snapshot { types, derived }
    }

    /// The shared key of `type_url` if this snapshot has that type, else a new one: saves an
    /// allocation per call on hot paths that name types by `&'static str`.
    pub fn type_key(&self, type_url: &str) -> Arc<str> {
        match self.types.get_key_value(type_url) {
            Some((k, _)) => k.clone(),
            None => Arc::from(type_url),
        }
    }

    /// This snapshot without any set for `type_url`.
    pub fn without(&self, type_url: &str) -> Snapshot {
        let mut types = self.types.clone();
        types.remove(type_url);
        let derived = self.derived.carried(&self.types, &types);
        Snapshot { types, derived }
    }

    /// The EDS names this snapshot's clusters wait for and the route configurations its
    /// listeners name: what a node served it asks for. Computed once, shared by clones.
    pub fn wanted(&self) -> Arc<crate::plan::Wanted> {
        self.derived.values().wanted.get_or_init(|| Arc::new(crate::plan::Wanted::of(self))).clone()
    }

    /// Where a plan for moving settled nodes to this snapshot is kept (see
    /// [`crate::plan::SharedPlan`]).
    pub(crate) fn shared_plan(&self) -> &[std::sync::OnceLock<crate::plan::SharedPlan>; crate::plan::SHARED_PLANS] {
        &self.derived.values().plan
    }

    /// Where what holding back rejected documents decodes and composes is kept for every
    /// node of the group (see [`crate::node_holds::Memo`]).
    pub(crate) fn holds_memo(&self) -> &crate::node_holds::Memo {
        &self.derived.values().holds
    }

    /// A version over every type, for logs.
    pub fn version(&self) -> String {
        set_version(self.types.iter().map(|(t, s)| (t.as_ref(), s.version().as_ref())))
    }

    /// [`version`](Self::version), worked out once for this snapshot and its clones: for a
    /// group's target, which each of its nodes reads on every change (not for the snapshots
    /// nodes acknowledged, one per node, which would each keep the memo).
    pub fn shared_version(&self) -> Arc<str> {
        self.derived.values().version.get_or_init(|| self.version().into()).clone()
    }
}

#[derive(Debug, Default)]
pub struct SnapshotBuilder {
    types: BTreeMap<Arc<str>, BTreeMap<Arc<str>, Arc<Resource>>>,
}

impl SnapshotBuilder {
    pub fn add(&mut self, r: Resource) -> Result<&mut Self, DuplicateResource> {
        let by_name = self.types.entry(r.type_url().clone()).or_default();
        if let Some(prev) = by_name.get(r.name().as_ref()) {
            return Err(DuplicateResource {
                type_url: r.type_url().to_string(),
                name: r.name().to_string(),
                first: prev.origin().unwrap_or("(unknown)").to_owned(),
                second: r.origin().unwrap_or("(unknown)").to_owned(),
            });
        }
        by_name.insert(r.name().clone(), Arc::new(r));
        Ok(self)
    }
    pub fn build(self) -> Snapshot {
        Snapshot {
            types: self.types.into_iter().map(|(t, m)| (t, Arc::new(TypeSet::new(m.into_iter().collect())))).collect(),
            derived: Derived::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names nodes ask for are carried to a snapshot made from one that computed them only
    /// while the sets they are read from are the same; whatever the change, they are what
    /// computing them afresh gives.
    #[test]
    fn what_nodes_ask_for_is_carried_only_while_its_sources_stay() {
        use crate::plan::tests::{cla, cluster};
        use crate::types::CLUSTER;
        let first = Snapshot::from_resources([cluster("a"), cla("a", 1)]).unwrap();
        // A clone made before they were computed shares them (what the pipeline keeps).
        let kept = first.clone();
        let wanted = first.wanted();
        assert!(Arc::ptr_eq(&kept.wanted(), &wanted));
        let endpoints = first.apply([(Arc::from(crate::types::ENDPOINT), Arc::from("a"))], [cla("a", 2)]).unwrap();
        assert!(Arc::ptr_eq(&endpoints.wanted(), &wanted), "an endpoint change keeps them");
        assert_eq!(endpoints.wanted().endpoints, crate::plan::Wanted::of(&endpoints).endpoints);
        let clusters = endpoints.apply([], [cluster("b")]).unwrap();
        assert!(!Arc::ptr_eq(&clusters.wanted(), &wanted), "a cluster change computes them again");
        assert_eq!(clusters.wanted().endpoints, ["a", "b"].map(String::from).into());
        let without = clusters.without(CLUSTER);
        assert!(without.wanted().endpoints.is_empty());
        let fresh = Snapshot::from_resources([cla("a", 1)]).unwrap();
        assert!(fresh.with_sets([]).wanted().endpoints.is_empty());
    }

    /// A set replaced in place is what `with_set` gives; a clone made before, which shares
    /// the memo, keeps its own sets and values, and the changed snapshot computes its own.
    #[test]
    fn a_set_replaced_in_place_leaves_clones_and_their_memo_alone() {
        use crate::plan::tests::{cla, cluster};
        let first = Snapshot::from_resources([cluster("a"), cla("a", 1)]).unwrap();
        let mut held = first.clone();
        let wanted = first.wanted();
        let clusters = Snapshot::from_resources([cluster("a"), cluster("b")]).unwrap();
        let set = clusters.get(CLUSTER).unwrap().clone();
        let key: Arc<str> = Arc::from(CLUSTER);
        held.set(&key, set.clone());
        assert_eq!(held, first.with_set(key.clone(), set.clone()));
        assert_eq!(first.get(CLUSTER).unwrap().len(), 1, "the clone keeps its set");
        assert!(Arc::ptr_eq(&first.wanted(), &wanted));
        assert_eq!(held.wanted().endpoints, ["a", "b"].map(String::from).into(), "computed afresh");
        // Again, now that its memo is its own and computed: made afresh once more.
        held.set(&key, first.get(CLUSTER).unwrap().clone());
        assert_eq!(held.wanted().endpoints, ["a"].map(String::from).into());
        // A type it did not have is added.
        let mut empty = Snapshot::default();
        empty.set(&key, set);
        assert_eq!(empty.get(CLUSTER).unwrap().len(), 2);
    }
    use crate::types::CLUSTER;

    #[test]
    fn duplicates_name_both_origins() {
        let a = Resource::new(CLUSTER, "c", b"1").with_origin("a.yaml#1");
        let b = Resource::new(CLUSTER, "c", b"2").with_origin("b.yaml#3");
        let e = Snapshot::from_resources([a, b]).unwrap_err();
        assert_eq!(e.to_string(), "duplicate cds \"c\": defined in a.yaml#1 and again in b.yaml#3");
    }

    #[test]
    fn same_content_compares_versions() {
        let a = Snapshot::from_resources([Resource::new(CLUSTER, "a", b"1")]).unwrap();
        let b = Snapshot::from_resources([Resource::new(CLUSTER, "a", b"1")]).unwrap();
        let c = Snapshot::from_resources([Resource::new(CLUSTER, "a", b"2")]).unwrap();
        assert!(a.same_content(&b));
        assert!(!a.same_content(&c));
        assert!(!a.same_content(&Snapshot::default()));
    }

    #[test]
    fn type_version_is_order_independent() {
        let a = || Resource::new(CLUSTER, "a", b"1");
        let b = || Resource::new(CLUSTER, "b", b"2");
        let s1 = Snapshot::from_resources([a(), b()]).unwrap();
        let s2 = Snapshot::from_resources([b(), a()]).unwrap();
        assert_eq!(s1.get(CLUSTER).unwrap().version(), s2.get(CLUSTER).unwrap().version());
        assert_eq!(s1, s2);
    }

    /// What the serving path learns from comparing two sets (the names that changed, the
    /// changes, the overlay and intersection rollouts build) is what comparing every
    /// resource tells, over sets of thousands changed a few resources at a time and compared
    /// with one some steps old. imbl 6.1's `OrdMap::diff`, on which these rest, dropped about
    /// one update in eight after shared nodes (imbl#160/#161, fixed in 7.0.2): this fails
    /// with it.
    #[test]
    fn comparing_sets_finds_every_change() {
        use std::collections::BTreeSet;
        let mut seed = 11u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let r = |i: u64, v: u64| Arc::new(Resource::new(CLUSTER, format!("c-{i}").as_str(), v.to_string().as_bytes()));
        let naive = |a: &TypeSet, b: &TypeSet| -> Vec<Arc<str>> {
            let names: BTreeSet<&Arc<str>> = a.resources.keys().chain(b.resources.keys()).collect();
            let body = |s: &TypeSet, n: &str| s.get(n).map(|r| r.body().clone());
            names.into_iter().filter(|n| body(a, n) != body(b, n)).cloned().collect()
        };
        let mut set = TypeSet::from_shared((0..3000).map(|i| r(i, 0)));
        let mut history = vec![set.clone()];
        for step in 0..400 {
            let (mut removed, mut added) = (Vec::new(), Vec::new());
            for _ in 0..=next(3) {
                let i = next(3500);
                match next(3) {
                    0 => removed.push(Arc::from(format!("c-{i}"))),
                    _ => added.push(r(i, step + 1)),
                }
            }
            set = set.patch(&removed, &added);
            let old = &history[next(history.len() as u64) as usize];
            let want = naive(old, &set);
            for (name, was, now) in old.changed_entries(&set) {
                assert_eq!(was, old.get(name), "step {step}: changed_entries, before");
                assert_eq!(now, set.get(name), "step {step}: changed_entries, after");
            }
            let names: Vec<Arc<str>> = old.changed_entries(&set).into_iter().map(|(n, ..)| n.clone()).collect();
            assert_eq!(names, want, "step {step}: changed_entries");
            let changes: Vec<Arc<str>> = set
                .changes_since(old)
                .map(|c| match c {
                    Change::Added(r) | Change::Updated(r) | Change::Removed(r) => r.name().clone(),
                })
                .collect();
            assert_eq!(changes, want, "step {step}: changes_since");
            let overlay = set.overlay(old);
            for n in old.resources.keys().filter(|n| set.get(n).is_none()) {
                assert!(overlay.get(n).is_some(), "step {step}: overlay keeps {n}");
            }
            let both = set.intersect(old);
            let same = |n: &Arc<str>| old.get(n).zip(set.get(n)).is_some_and(|(a, b)| a.body() == b.body());
            let want_both: Vec<&Arc<str>> = set.resources.keys().filter(|n| same(n)).collect();
            assert_eq!(both.resources.keys().collect::<Vec<_>>(), want_both, "step {step}: intersect");
            history.push(set.clone());
            if history.len() > 5 {
                history.remove(0);
            }
        }
    }

    /// Applying changes gives exactly the snapshot (and versions) a fresh build would.
    #[test]
    fn apply_matches_a_fresh_build() {
        let r = |n: &str, body: &[u8]| Resource::new(CLUSTER, n, body);
        let base = Snapshot::from_resources([r("a", b"1"), r("b", b"1"), r("c", b"1")]).unwrap();
        let changed = base
            .apply(
                [(Arc::from(CLUSTER), Arc::from("b")), (Arc::from(CLUSTER), Arc::from("c"))],
                [r("c", b"2"), r("d", b"1")],
            )
            .unwrap();
        let fresh = Snapshot::from_resources([r("a", b"1"), r("c", b"2"), r("d", b"1")]).unwrap();
        assert_eq!(changed.get(CLUSTER).unwrap().version(), fresh.get(CLUSTER).unwrap().version());
        assert!(changed.same_content(&fresh));
        assert_ne!(changed.get(CLUSTER).unwrap().version(), base.get(CLUSTER).unwrap().version());
        // Back again: the original version.
        let back = changed
            .apply(
                [(Arc::from(CLUSTER), Arc::from("c")), (Arc::from(CLUSTER), Arc::from("d"))],
                [r("b", b"1"), r("c", b"1")],
            )
            .unwrap();
        assert_eq!(back.get(CLUSTER).unwrap().version(), base.get(CLUSTER).unwrap().version());
        // A name still present is a duplicate.
        assert!(base.apply([], [r("a", b"9")]).is_err());
        // Emptying a type removes it.
        let none = base.apply(["a", "b", "c"].map(|n| (Arc::from(CLUSTER), Arc::from(n))), []).unwrap();
        assert!(none.get(CLUSTER).is_none());
    }

    proptest::proptest! {
        /// The sum a patch would have, worked out without building it, is the built set's,
        /// and the built set is what a fresh build of the same resources is; the version is
        /// the 16 hex digits of the folded sum.
        #[test]
        fn patched_sum_is_the_patched_sets(
            base in proptest::collection::vec((0u8..6, 0u8..3), 0..6),
            removed in proptest::collection::vec(0u8..12, 0..12),
            added in proptest::collection::vec((0u8..12, 0u8..3), 0..12),
        ) {
            let r = |(n, v): (u8, u8)| Arc::new(Resource::new(CLUSTER, format!("c{n}"), &[v]));
            // Up to 24 names: both the pairwise path (16 or fewer) and the other.
            let set = TypeSet::from_shared(base.into_iter().map(r));
            let removed: Vec<Arc<str>> = removed.iter().map(|n| Arc::from(format!("c{n}"))).collect();
            let added: Vec<Arc<Resource>> = added.into_iter().map(r).collect();
            let patched = set.patch(&removed, &added);
            proptest::prop_assert_eq!(set.patched_sum(&removed, &added), patched.sum());
            let fresh = TypeSet::from_shared(patched.resources().cloned());
            proptest::prop_assert_eq!(fresh.sum(), patched.sum());
            let folded = (patched.sum() as u64) ^ ((patched.sum() >> 64) as u64);
            proptest::prop_assert_eq!(patched.version().as_ref(), format!("{folded:016x}"));
        }
    }
}

//! What a Delta client holds of one type, kept as the group's own set plus what differs from
//! it (issue 51, item 2).
//!
//! Once a stream is in step with its group, what its client holds of a type is exactly the
//! group's set as served, over the names it subscribes to: the set is shared by every stream of
//! the group, so the stream keeps a reference to it (`base`) and, apart from it, only the
//! names where the client differs (a name it was told does not exist, one it was sent
//! another version of, one it must learn again). An idle stream then holds a pointer per type,
//! not an entry per resource; a change costs the names it touches.
//!
//! `base` covers the names in the stream's subscription ([`InScope`]): the machine makes the
//! map flat ([`Known::flatten`]) before its subscription changes, and puts a base back under
//! it once the client is in step again ([`Known::rebase`]).

use std::sync::Arc;

use crate::resource::Resource;
use crate::small_map::{SmallMap, SmallSet};
use crate::snapshot::TypeSet;

/// The names a base set covers: those the stream subscribes to.
#[derive(Clone, Copy)]
pub(crate) struct InScope<'a> {
    pub wildcard: bool,
    pub explicit: &'a SmallSet<Arc<str>>,
}

impl InScope<'_> {
    fn covers(&self, name: &str) -> bool {
        self.wildcard || self.explicit.contains(name)
    }
}

/// Where a name's entry differs from the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// The client holds this version (as [`crate::resource::Resource::entry_hash`]).
    Holds(u128),
    /// The client was told the name does not exist.
    Missing,
    /// The client does not know the name, whatever the base says.
    Unknown,
}

impl Entry {
    fn of(known: Option<Option<u128>>) -> Entry {
        match known {
            Some(Some(h)) => Entry::Holds(h),
            Some(None) => Entry::Missing,
            None => Entry::Unknown,
        }
    }

    fn known(self) -> Option<Option<u128>> {
        match self {
            Entry::Holds(h) => Some(Some(h)),
            Entry::Missing => Some(None),
            Entry::Unknown => None,
        }
    }
}

/// What a client holds of one type: for each name, `Some(hash)` of the name and version it
/// holds, `None` when it was told the name does not exist, nothing when it does not know the
/// name; with the sum of what it holds kept as it changes (its version, without a walk).
#[derive(Debug, Default, Clone)]
pub(crate) struct Known {
    base: Option<Arc<TypeSet>>,
    entries: SmallMap<Arc<str>, Entry>,
    /// A `u128` kept as two halves: without `u128`'s 16-byte alignment, every stream's
    /// per-type state is 16 bytes smaller.
    sum: [u64; 2],
}

impl Known {
    fn in_base(&self, name: &str, scope: InScope) -> Option<u128> {
        let r = self.base.as_ref()?.get(name)?;
        scope.covers(name).then(|| r.entry_hash())
    }

    /// What the client holds of `name`.
    pub fn get(&self, name: &str, scope: InScope) -> Option<Option<u128>> {
        match self.entries.get(name) {
            Some(e) => e.known(),
            None => self.in_base(name, scope).map(Some),
        }
    }

    /// Sets what the client holds of `name` (`None`: it does not know it); what it held.
    pub fn set(&mut self, name: &Arc<str>, to: Option<Option<u128>>, scope: InScope) -> Option<Option<u128>> {
        let was = self.get(name, scope);
        if let Some(Some(h)) = was {
            self.set_sum(self.sum().wrapping_sub(h));
        }
        if let Some(Some(h)) = to {
            self.set_sum(self.sum().wrapping_add(h));
        }
        let base = self.in_base(name, scope).map(Some);
        if to == base {
            self.entries.remove(name.as_ref());
        } else {
            match self.entries.get_mut(name.as_ref()) {
                Some(e) => *e = Entry::of(to),
                None => {
                    self.entries.insert(name.clone(), Entry::of(to));
                }
            }
        }
        was
    }

    /// What the client holds of `name`, given the base's entry for it (`base`, looked up
    /// already by whoever walks the base's changes).
    pub fn get_beside(&self, name: &str, base: Option<&Arc<Resource>>, scope: InScope) -> Option<Option<u128>> {
        debug_assert_eq!(
            base.map(|r| r.entry_hash()),
            self.base.as_ref().and_then(|b| b.get(name)).map(|r| r.entry_hash()),
            "the base's entry for {name}"
        );
        match self.entries.get(name) {
            Some(e) => e.known(),
            None => base.filter(|_| scope.covers(name)).map(|r| Some(r.entry_hash())),
        }
    }

    /// The client now holds `set` over the names in scope, having been sent what `changed`
    /// lists (each name with what it now holds of it: `Some(None)` told it does not exist,
    /// `None` forgotten), and its sum moved by `add` less `sub`: [`Known::set`] for each
    /// name, then [`Known::rebase`], without the entries made only to be dropped.
    pub fn advance<'n>(
        &mut self,
        set: Option<&Arc<TypeSet>>,
        changed: impl Iterator<Item = (&'n Arc<str>, Option<Option<u128>>)>,
        (add, sub): (u128, u128),
    ) {
        for (name, now) in changed {
            if now == Some(None) {
                self.entries.insert(name.clone(), Entry::Missing);
            } else {
                self.entries.remove(name.as_ref());
            }
        }
        self.set_sum(self.sum().wrapping_add(add).wrapping_sub(sub));
        self.rebase(set);
    }

    /// Every name the client knows (held, or known not to exist).
    pub fn names<'a>(&'a self, scope: InScope<'a>) -> impl Iterator<Item = &'a Arc<str>> + 'a {
        let in_base = self
            .base
            .iter()
            .flat_map(|b| b.resources())
            .map(|r| r.name())
            .filter(move |n| scope.covers(n) && self.entries.get(n.as_ref()).is_none());
        let own = self.entries.iter().filter(|(_, e)| **e != Entry::Unknown).map(|(n, _)| n);
        in_base.chain(own)
    }

    pub fn is_empty(&self, scope: InScope) -> bool {
        self.names(scope).next().is_none()
    }

    /// The sum of what the client holds (a name known not to exist counts nothing).
    pub fn sum(&self) -> u128 {
        (u128::from(self.sum[1]) << 64) | u128::from(self.sum[0])
    }

    /// Writes the base's names out as entries and drops it: before the subscription changes,
    /// which would change what the base covers.
    pub fn flatten(&mut self, scope: InScope) {
        let Some(base) = self.base.take() else { return };
        for r in base.resources().filter(|r| scope.covers(r.name())) {
            if self.entries.get(r.name().as_ref()).is_none() {
                self.entries.insert(r.name().clone(), Entry::Holds(r.entry_hash()));
            }
        }
        self.entries.retain(|_, e| *e != Entry::Unknown);
    }

    /// Keeps the entries `keep` accepts (the map must be flat); the sum follows.
    pub fn retain(&mut self, mut keep: impl FnMut(&Arc<str>, Option<u128>) -> bool) {
        debug_assert!(self.base.is_none(), "retain on a map with a base");
        let mut sum = self.sum();
        self.entries.retain(|name, e| {
            let Some(held) = e.known() else { return false };
            let kept = keep(name, held);
            if let (false, Some(h)) = (kept, held) {
                sum = sum.wrapping_sub(h);
            }
            kept
        });
        self.set_sum(sum);
    }

    fn set_sum(&mut self, sum: u128) {
        self.sum = [sum as u64, (sum >> 64) as u64];
    }

    /// The client now holds exactly `set` over the names in scope, and is known not to have
    /// the subscribed names `set` lacks: `set` becomes the base, and only those names stay
    /// entries.
    pub fn rebase(&mut self, set: Option<&Arc<TypeSet>>) {
        self.entries.retain(|_, e| *e == Entry::Missing);
        self.base = set.cloned();
    }

    /// Forgets everything the client holds, keeping only the names it was told do not
    /// exist.
    pub fn forget_held(&mut self) {
        self.rebase(None);
        self.sum = [0; 2];
    }

    /// The group's set was replaced by one of the same content: share that one instead.
    pub fn same_content(&mut self, was: &Arc<TypeSet>, now: &Arc<TypeSet>) {
        if self.base.as_ref().is_some_and(|b| Arc::ptr_eq(b, was)) {
            self.base = Some(now.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::res;
    use crate::types::CLUSTER;

    fn set(entries: &[(&str, &str)]) -> Arc<TypeSet> {
        let snap = crate::snapshot::Snapshot::from_resources(entries.iter().map(|(n, v)| res(CLUSTER, n, v))).unwrap();
        snap.get(CLUSTER).unwrap().clone()
    }

    /// The base answers for the names in scope, entries over it, and the sum follows every
    /// change as if the map were flat.
    #[test]
    fn a_base_and_its_differences_read_as_the_flat_map() {
        let explicit: SmallSet<Arc<str>> = ["a", "b", "z"].iter().map(|n| Arc::<str>::from(*n)).collect();
        let scope = InScope { wildcard: false, explicit: &explicit };
        let s = set(&[("a", "1"), ("b", "1"), ("c", "1")]);
        let mut k = Known::default();
        for r in s.resources() {
            if scope.covers(r.name()) {
                k.set(r.name(), Some(Some(r.entry_hash())), scope);
            }
        }
        k.set(&"z".into(), Some(None), scope);
        let flat_sum = k.sum();
        k.rebase(Some(&s));
        assert_eq!(k.entries.len(), 1, "only the missing name stays an entry");
        assert_eq!(k.sum(), flat_sum);
        assert_eq!(k.get("a", scope), Some(Some(s.get("a").unwrap().entry_hash())));
        assert_eq!(k.get("c", scope), None, "c is not subscribed");
        assert_eq!(k.get("z", scope), Some(None));
        let mut names: Vec<_> = k.names(scope).map(|n| n.to_string()).collect();
        names.sort();
        assert_eq!(names, ["a", "b", "z"]);
        // Forgetting a name of the base masks it; holding another version overrides it.
        assert_eq!(k.set(&"a".into(), None, scope), Some(Some(s.get("a").unwrap().entry_hash())));
        assert_eq!(k.get("a", scope), None);
        k.set(&"b".into(), Some(Some(7)), scope);
        assert_eq!(
            k.sum(),
            s.get("a")
                .unwrap()
                .entry_hash()
                .wrapping_neg()
                .wrapping_add(flat_sum)
                .wrapping_add(7)
                .wrapping_sub(s.get("b").unwrap().entry_hash())
        );
        // Flat again: the same content.
        k.flatten(scope);
        assert!(k.base.is_none());
        assert_eq!(k.get("a", scope), None);
        assert_eq!(k.get("b", scope), Some(Some(7)));
        assert_eq!(k.get("z", scope), Some(None));
    }

    /// The sum kept of what a client holds equals the sum walked over every name it holds,
    /// whatever the order of changes, retains, bases put under it and flattenings (the
    /// version a Delta response carries for explicit subscriptions is that sum).
    #[test]
    fn the_kept_sum_of_what_a_client_holds_is_the_walked_one() {
        let explicit: SmallSet<Arc<str>> = (0..50).filter(|i| i % 3 != 0).map(|i| Arc::from(format!("n{i}"))).collect();
        let mut k = Known::default();
        let mut next = crate::testutil::random(0x51_7cc1_b727_220a);
        for step in 0..5_000 {
            let scope = InScope { wildcard: step % 1000 < 500, explicit: &explicit };
            if step % 500 == 0 {
                k.flatten(InScope { wildcard: !scope.wildcard, explicit: &explicit });
            }
            let name: Arc<str> = format!("n{}", next(50)).into();
            let entry = (next(4) != 0).then(|| u128::from(next(u64::MAX)) << 40 | u128::from(next(1 << 20)));
            match next(6) {
                0..=2 => {
                    k.set(&name, Some(entry), scope);
                }
                3 => {
                    k.set(&name, None, scope);
                }
                4 => {
                    let cut = next(50);
                    k.flatten(scope);
                    k.retain(|n, _| n[1..].parse::<u64>().unwrap() % 7 != cut % 7);
                }
                _ => {
                    // In step with a new set: what is in scope is the set's, the rest is gone.
                    let mut versions: Vec<(String, String)> = Vec::new();
                    for i in 0..50 {
                        if next(3) != 0 {
                            versions.push((format!("n{i}"), next(3).to_string()));
                        }
                    }
                    let pairs: Vec<(&str, &str)> = versions.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
                    let s = set(&pairs);
                    // As the machine sees it: a name is in scope if the wildcard brings it or
                    // it is subscribed by name (then known not to exist if the set lacks it).
                    let in_scope = |n: &str| (scope.wildcard && s.get(n).is_some()) || explicit.contains(n);
                    let held: Vec<Arc<str>> = k.names(scope).cloned().collect();
                    for n in held.iter().filter(|n| !in_scope(n)) {
                        k.set(n, None, scope);
                    }
                    for n in explicit.iter().filter(|n| s.get(n).is_none()) {
                        k.set(n, Some(None), scope);
                    }
                    for r in s.resources().filter(|r| in_scope(r.name())) {
                        k.set(r.name(), Some(Some(r.entry_hash())), scope);
                    }
                    let before: Vec<_> = (0..50).map(|i| k.get(&format!("n{i}"), scope)).collect();
                    k.rebase(Some(&s));
                    let after: Vec<_> = (0..50).map(|i| k.get(&format!("n{i}"), scope)).collect();
                    assert_eq!(before, after, "step {step}: a base changes nothing the client holds");
                }
            }
            let walked = k.names(scope).filter_map(|n| k.get(n, scope).flatten()).fold(0u128, u128::wrapping_add);
            assert_eq!(k.sum(), walked, "step {step}");
        }
    }
}

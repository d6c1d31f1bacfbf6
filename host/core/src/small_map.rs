//! A map that is small most of the time, kept as a sorted vector until it grows.
//!
//! A stream holds a handful of types (four for an Envoy on ADS, one per separate stream), a
//! node's rollout a handful of (stream, type) pairs, and a stream's per-type name maps a few
//! names, but a `BTreeMap` leaf has room for eleven entries: with the machines' per-type state
//! (a few hundred bytes) that was kilobytes per stream, most of it empty. Up to [`SPILL`]
//! entries this keeps exactly what is there, in key order (lookups are binary searches;
//! inserts shift, which is nothing at these sizes); past it, it moves into a `BTreeMap`, so a
//! wildcard subscription to ten thousand clusters still inserts in logarithmic time. Either
//! way iteration is in key order, as a `BTreeMap`'s.

use std::borrow::Borrow;
use std::collections::{BTreeMap, btree_map};
use std::ops::Bound;

use either::Either;

/// Entries kept in the vector; one more moves them into a tree.
pub const SPILL: usize = 32;

#[derive(Debug, Clone)]
pub enum SmallMap<K, V> {
    Small(Vec<(K, V)>),
    Large(BTreeMap<K, V>),
}

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap::Small(Vec::new())
    }
}

impl<K: Ord, V> SmallMap<K, V> {
    pub fn len(&self) -> usize {
        match self {
            SmallMap::Small(v) => v.len(),
            SmallMap::Large(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.get(key).is_some()
    }

    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        match self {
            SmallMap::Small(v) => lookup(v, key).map(|i| &v[i].1),
            SmallMap::Large(m) => m.get(key),
        }
    }

    pub fn get_key_value<Q: Ord + ?Sized>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
    {
        match self {
            SmallMap::Small(v) => lookup(v, key).map(|i| (&v[i].0, &v[i].1)),
            SmallMap::Large(m) => m.get_key_value(key),
        }
    }

    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        match self {
            SmallMap::Small(v) => lookup(v, key).map(|i| &mut v[i].1),
            SmallMap::Large(m) => m.get_mut(key),
        }
    }

    /// Sets `key` to `value`; the previous value, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self {
            SmallMap::Small(v) => match find(v, &key) {
                Ok(i) => Some(std::mem::replace(&mut v[i].1, value)),
                Err(i) if v.len() < SPILL => {
                    v.insert(i, (key, value));
                    None
                }
                Err(_) => {
                    let mut m: BTreeMap<K, V> = std::mem::take(v).into_iter().collect();
                    m.insert(key, value);
                    *self = SmallMap::Large(m);
                    None
                }
            },
            SmallMap::Large(m) => m.insert(key, value),
        }
    }

    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let removed = match self {
            SmallMap::Small(v) => find(v, key).ok().map(|i| v.remove(i).1),
            SmallMap::Large(m) => m.remove(key),
        };
        self.release_if_empty();
        removed
    }

    /// The entry of `key`, made with `V::default()` and the key `make` gives if there is none
    /// (so a borrowed key is turned into an owned one only when it is new).
    pub fn slot<Q: Ord + ?Sized>(&mut self, key: &Q, make: impl FnOnce() -> K) -> (&K, &mut V)
    where
        K: Borrow<Q>,
        V: Default,
    {
        if let SmallMap::Small(v) = self
            && v.len() >= SPILL
            && find(v, key).is_err()
        {
            *self = SmallMap::Large(std::mem::take(v).into_iter().collect());
        }
        match self {
            SmallMap::Small(v) => {
                let i = find(v, key).unwrap_or_else(|i| {
                    v.insert(i, (make(), V::default()));
                    i
                });
                let (k, v) = &mut v[i];
                (k, v)
            }
            SmallMap::Large(m) => {
                if !m.contains_key(key) {
                    m.insert(make(), V::default());
                }
                let bounds = (Bound::Included(key), Bound::Included(key));
                m.range_mut::<Q, _>(bounds).next().expect("present")
            }
        }
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        match self {
            SmallMap::Small(v) => v.retain_mut(|(k, v)| keep(k, v)),
            SmallMap::Large(m) => m.retain(|k, v| keep(k, v)),
        }
        self.release_if_empty();
    }

    pub fn clear(&mut self) {
        *self = SmallMap::default();
    }

    /// An emptied map gives its memory back (it is per stream, and most stay idle).
    fn release_if_empty(&mut self) {
        if self.is_empty() {
            *self = SmallMap::default();
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        match self {
            SmallMap::Small(v) => Either::Left(v.iter().map(|(k, v)| (k, v))),
            SmallMap::Large(m) => Either::Right(m.iter()),
        }
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        match self {
            SmallMap::Small(v) => Either::Left(v.iter_mut().map(|(k, v)| (&*k, v))),
            SmallMap::Large(m) => Either::Right(m.iter_mut()),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.iter_mut().map(|(_, v)| v)
    }
}

/// Equal when they hold the same entries, whichever way each keeps them.
impl<K: Ord, V: PartialEq> PartialEq for SmallMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SmallMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = SmallMap::default();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

fn find<K: Borrow<Q>, V, Q: Ord + ?Sized>(v: &[(K, V)], key: &Q) -> Result<usize, usize> {
    v.binary_search_by(|(k, _)| k.borrow().cmp(key))
}

/// Where `key` is, if it is there. A few entries are scanned for equality: the keys that are
/// looked up most (type URLs, which share their first 26 bytes) mostly differ in length,
/// which `==` on strings checks first, while ordering them compares bytes.
fn lookup<K: Borrow<Q>, V, Q: Ord + ?Sized>(v: &[(K, V)], key: &Q) -> Option<usize> {
    if v.len() <= 8 { v.iter().position(|(k, _)| k.borrow() == key) } else { find(v, key).ok() }
}

/// A set on [`SmallMap`]: a handful of names in a vector, many in a tree.
#[derive(Debug, Clone)]
pub struct SmallSet<K>(SmallMap<K, ()>);

impl<K> Default for SmallSet<K> {
    fn default() -> Self {
        SmallSet(SmallMap::default())
    }
}

impl<K: Ord> SmallSet<K> {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn contains<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.0.contains_key(key)
    }
    /// Whether `key` was new.
    pub fn insert(&mut self, key: K) -> bool {
        self.0.insert(key, ()).is_none()
    }
    /// Whether `key` was there.
    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.0.remove(key).is_some()
    }
    pub fn iter(&self) -> impl Iterator<Item = &K> {
        self.into_iter()
    }
}

impl<K: Ord> PartialEq for SmallSet<K> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<K: Ord> FromIterator<K> for SmallSet<K> {
    fn from_iter<I: IntoIterator<Item = K>>(iter: I) -> Self {
        let mut s = SmallSet::default();
        for k in iter {
            s.insert(k);
        }
        s
    }
}

type Key<'a, K> = fn(&'a (K, ())) -> &'a K;

impl<'a, K: Ord> IntoIterator for &'a SmallSet<K> {
    type Item = &'a K;
    type IntoIter = Either<std::iter::Map<std::slice::Iter<'a, (K, ())>, Key<'a, K>>, btree_map::Keys<'a, K, ()>>;
    fn into_iter(self) -> Self::IntoIter {
        match &self.0 {
            SmallMap::Small(v) => Either::Left(v.iter().map((|(k, _)| k) as Key<'a, K>)),
            SmallMap::Large(m) => Either::Right(m.keys()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    proptest::proptest! {
        /// Whatever is done to it, it holds what a BTreeMap would, in the same order, below
        /// [`SPILL`] entries and past it (the key space is twice as large, and the
        /// operations insert more often than they remove).
        #[test]
        fn behaves_as_a_btree_map(ops in proptest::collection::vec((0u8..6, 0u8..(2 * SPILL as u8), 0u32..100), 0..300)) {
            let (mut small, mut big) = (SmallMap::<Arc<str>, u32>::default(), BTreeMap::<Arc<str>, u32>::new());
            for (op, k, v) in ops {
                let key: Arc<str> = format!("k{k}").into();
                match op {
                    0 | 4 => proptest::prop_assert_eq!(small.insert(key.clone(), v), big.insert(key, v)),
                    1 => proptest::prop_assert_eq!(small.remove(key.as_ref()), big.remove(key.as_ref())),
                    2 | 5 => {
                        *small.slot(key.as_ref(), || key.clone()).1 += v;
                        *big.entry(key).or_default() += v;
                    }
                    _ => {
                        small.retain(|_, x| *x % 3 != v % 3);
                        big.retain(|_, x| *x % 3 != v % 3);
                        for x in small.values_mut() {
                            *x += 1;
                        }
                        for x in big.values_mut() {
                            *x += 1;
                        }
                    }
                }
                let a: Vec<(Arc<str>, u32)> = small.iter().map(|(k, v)| (k.clone(), *v)).collect();
                let b: Vec<(Arc<str>, u32)> = big.iter().map(|(k, v)| (k.clone(), *v)).collect();
                proptest::prop_assert_eq!(a, b);
                proptest::prop_assert_eq!(small.len(), big.len());
                let probe = format!("k{k}");
                proptest::prop_assert_eq!(small.get(probe.as_str()), big.get(probe.as_str()));
                proptest::prop_assert!(small.len() <= SPILL || matches!(small, SmallMap::Large(_)));
            }
        }

        /// The set holds what a BTreeSet would, in the same order.
        #[test]
        fn the_set_behaves_as_a_btree_set(ops in proptest::collection::vec((proptest::bool::weighted(0.7), 0u8..(2 * SPILL as u8)), 0..200)) {
            let (mut small, mut big) = (SmallSet::<u8>::default(), std::collections::BTreeSet::<u8>::new());
            for (add, k) in ops {
                if add {
                    proptest::prop_assert_eq!(small.insert(k), big.insert(k));
                } else {
                    proptest::prop_assert_eq!(small.remove(&k), big.remove(&k));
                }
                proptest::prop_assert_eq!(small.iter().copied().collect::<Vec<_>>(), big.iter().copied().collect::<Vec<_>>());
                proptest::prop_assert_eq!(small.contains(&k), big.contains(&k));
            }
        }
    }
}

//! A map of a few entries, kept as a sorted vector.
//!
//! A stream holds a handful of types (four for an Envoy on ADS, one per separate stream), and
//! a node's rollout a handful of (stream, type) pairs, but a `BTreeMap` leaf has room for
//! eleven entries: with the machines' per-type state (a few hundred bytes) that was kilobytes
//! per stream, most of it empty. This keeps exactly what is there, in key order, so iteration
//! order is a `BTreeMap`'s. Lookups are binary searches; inserts shift, which is nothing at
//! these sizes.

use std::borrow::Borrow;

#[derive(Debug, Clone)]
pub struct SmallMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap { entries: Vec::new() }
    }
}

impl<K: Ord, V> SmallMap<K, V> {
    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_ok()
    }

    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    /// Sets `key` to `value`; the previous value, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// The entry of `key`, made with `V::default()` and the key `make` gives if there is none
    /// (so a borrowed key is turned into an owned one only when it is new).
    pub fn slot<Q: Ord + ?Sized>(&mut self, key: &Q, make: impl FnOnce() -> K) -> (&K, &mut V)
    where
        K: Borrow<Q>,
        V: Default,
    {
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (make(), V::default()));
                i
            }
        };
        let (k, v) = &mut self.entries[i];
        (k, v)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    proptest::proptest! {
        /// Whatever is done to it, it holds what a BTreeMap would, in the same order.
        #[test]
        fn behaves_as_a_btree_map(ops in proptest::collection::vec((0u8..4, 0u8..6, 0u32..100), 0..40)) {
            let (mut small, mut big) = (SmallMap::<Arc<str>, u32>::default(), BTreeMap::<Arc<str>, u32>::new());
            for (op, k, v) in ops {
                let key: Arc<str> = format!("k{k}").into();
                match op {
                    0 => proptest::prop_assert_eq!(small.insert(key.clone(), v), big.insert(key, v)),
                    1 => proptest::prop_assert_eq!(small.remove(key.as_ref()), big.remove(key.as_ref())),
                    2 => {
                        *small.slot(key.as_ref(), || key.clone()).1 += v;
                        *big.entry(key).or_default() += v;
                    }
                    _ => {
                        small.retain(|_, x| *x % 3 != v % 3);
                        big.retain(|_, x| *x % 3 != v % 3);
                    }
                }
                let a: Vec<(Arc<str>, u32)> = small.iter().map(|(k, v)| (k.clone(), *v)).collect();
                let b: Vec<(Arc<str>, u32)> = big.iter().map(|(k, v)| (k.clone(), *v)).collect();
                proptest::prop_assert_eq!(a, b);
                proptest::prop_assert_eq!(small.len(), big.len());
            }
        }
    }
}

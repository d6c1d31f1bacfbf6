//! Per-type state of one stream, by type URL.
//!
//! A stream holds a handful of types (four for an Envoy on ADS, one per separate stream), but
//! a `BTreeMap` leaf has room for eleven: with the machines' per-type state (a few hundred
//! bytes) that was kilobytes per stream, most of it empty. This keeps exactly what is there,
//! sorted by type URL, so iteration order is the map's.

use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct TypeMap<V> {
    entries: Vec<(Arc<str>, V)>,
}

impl<V> Default for TypeMap<V> {
    fn default() -> Self {
        TypeMap { entries: Vec::new() }
    }
}

impl<V> TypeMap<V> {
    fn find(&self, type_url: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_ref().cmp(type_url))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains_key(&self, type_url: &str) -> bool {
        self.find(type_url).is_ok()
    }

    pub fn get(&self, type_url: &str) -> Option<&V> {
        self.find(type_url).ok().map(|i| &self.entries[i].1)
    }

    /// The entry of `type_url`, made with `V::default()` if there is none.
    pub fn entry_or_default(&mut self, type_url: &str) -> (&Arc<str>, &mut V)
    where
        V: Default,
    {
        let i = match self.find(type_url) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (type_url.into(), V::default()));
                i
            }
        };
        let (k, v) = &mut self.entries[i];
        (k, v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Arc<str>, &mut V)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
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

    #[test]
    fn keeps_entries_sorted_and_finds_them() {
        let mut m: TypeMap<u32> = TypeMap::default();
        for (t, v) in [("c", 3), ("a", 1), ("b", 2), ("a", 9)] {
            let (k, slot) = m.entry_or_default(t);
            assert_eq!(k.as_ref(), t);
            *slot += v;
        }
        assert_eq!(m.len(), 3);
        assert_eq!(
            m.iter().map(|(k, v)| (k.to_string(), *v)).collect::<Vec<_>>(),
            [("a".to_string(), 10), ("b".to_string(), 2), ("c".to_string(), 3)]
        );
        assert_eq!(m.get("b"), Some(&2));
        assert!(m.get("d").is_none() && !m.contains_key("d") && m.contains_key("c"));
    }
}

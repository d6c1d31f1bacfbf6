//! Subscriptions shared (issue 51, item 2): the set of names a stream subscribes to, kept
//! once however many streams and rollouts hold it.
//!
//! The Envoys of a fleet ask for the same names (every cluster's endpoints, the same route
//! configurations): a thousand names are tens of KiB, twice per stream (its machine and its
//! node's rollout) and once more for the strings. Here a subscription is an `Arc` of its
//! set, and an identical set anywhere in the process is the same `Arc` ([`intern`]): a fleet
//! of streams asking for the same names holds them once.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::small_map::SmallSet;

/// The names of one subscription, shared.
pub type Names = Arc<SmallSet<Arc<str>>>;

#[derive(Default)]
struct Interned {
    /// By hash of the names: the sets with those names (a collision keeps several).
    sets: HashMap<u64, Vec<Weak<SmallSet<Arc<str>>>>>,
    /// Entries after the last sweep of dead ones: the next sweep comes at twice as many.
    swept: usize,
}

fn interned() -> &'static Mutex<Interned> {
    static INTERNED: OnceLock<Mutex<Interned>> = OnceLock::new();
    INTERNED.get_or_init(Default::default)
}

/// The empty subscription, shared.
pub fn empty() -> Names {
    static EMPTY: OnceLock<Names> = OnceLock::new();
    EMPTY.get_or_init(Default::default).clone()
}

/// The shared set with the names of `names`: one already held elsewhere if there is one,
/// else `names` itself, now findable. O(names) per call: made once per subscription change.
pub fn intern(names: Names) -> Names {
    if names.is_empty() {
        return empty();
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    names.len().hash(&mut h);
    for n in names.iter() {
        n.hash(&mut h);
    }
    let key = h.finish();
    let mut i = interned().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let bucket = i.sets.entry(key).or_default();
    bucket.retain(|w| w.strong_count() > 0);
    if let Some(same) = bucket.iter().filter_map(Weak::upgrade).find(|s| Arc::ptr_eq(s, &names) || **s == *names) {
        return same;
    }
    bucket.push(Arc::downgrade(&names));
    let len = i.sets.len();
    if len > 2 * i.swept + 64 {
        i.sets.retain(|_, b| {
            b.retain(|w| w.strong_count() > 0);
            !b.is_empty()
        });
        i.swept = i.sets.len();
    }
    names
}

/// [`intern`] for names given one by one.
pub fn of<'a>(names: impl IntoIterator<Item = &'a Arc<str>>) -> Names {
    intern(Arc::new(names.into_iter().cloned().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> Names {
        Arc::new(names.iter().map(|n| Arc::<str>::from(*n)).collect())
    }

    /// The same names are one set wherever they come from; other names are another; a set
    /// nobody holds any more is not kept.
    #[test]
    fn the_same_names_are_one_set() {
        let a = intern(set(&["x-intern", "y-intern"]));
        let b = intern(set(&["y-intern", "x-intern"]));
        assert!(Arc::ptr_eq(&a, &b));
        let c = intern(set(&["x-intern"]));
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(Arc::ptr_eq(&intern(set(&[])), &empty()));
        let weak = Arc::downgrade(&a);
        drop((a, b));
        assert!(weak.upgrade().is_none(), "the interner keeps no strong reference");
        let d = intern(set(&["x-intern", "y-intern"]));
        assert_eq!(d.len(), 2);
    }
}

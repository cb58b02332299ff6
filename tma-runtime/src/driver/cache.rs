//! A map that shares live values and keeps none alive: the loaded-module cache.
//!
//! Every cudarc module holds an `Arc<CudaContext>`, so a cache of strong module handles keeps
//! each context it ever saw alive for the life of the process. This one holds `Weak`s: a value
//! lives exactly as long as someone outside the cache holds it, and a later lookup finds it
//! only while it does. Generic over the key and value so that its keying and eviction are
//! tested without a GPU.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

/// Key -> the value shared under it while any `Arc` of it lives elsewhere.
pub(crate) struct WeakCache<K, V> {
    map: Mutex<HashMap<K, Weak<V>>>,
}

impl<K: Eq + Hash, V> WeakCache<K, V> {
    pub(crate) fn new() -> Self {
        WeakCache {
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The map, also after a panic elsewhere while it was held: every state it can be left
    /// in is consistent (a dead entry is only a miss).
    fn map(&self) -> MutexGuard<'_, HashMap<K, Weak<V>>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live value under `key`.
    pub(crate) fn get(&self, key: &K) -> Option<Arc<V>> {
        self.map().get(key)?.upgrade()
    }

    /// The live value under `key`, else `make()`'s, shared from now on. `make` runs without
    /// the lock held (it may load a module: milliseconds); when two threads race, the first
    /// value stored wins and the other is dropped. Dead entries are dropped on every store,
    /// so the map holds at most the live values plus the ones that died since the last store.
    pub(crate) fn get_or_try_insert_with<E>(
        &self,
        key: K,
        make: impl FnOnce() -> Result<Arc<V>, E>,
    ) -> Result<Arc<V>, E> {
        if let Some(hit) = self.get(&key) {
            return Ok(hit);
        }
        let made = make()?;
        let mut map = self.map();
        map.retain(|_, w| w.strong_count() > 0);
        if let Some(raced) = map.get(&key).and_then(Weak::upgrade) {
            return Ok(raced);
        }
        map.insert(key, Arc::downgrade(&made));
        Ok(made)
    }

    /// Entries, live or not yet swept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module cache's key: (context, compile key).
    type Key = (usize, &'static str);
    type Cache = WeakCache<Key, String>;

    fn make(v: &str) -> impl FnOnce() -> Result<Arc<String>, ()> + '_ {
        move || Ok(Arc::new(v.to_string()))
    }

    #[test]
    fn a_live_value_is_shared_under_its_key_only() -> Result<(), ()> {
        let cache = Cache::new();
        let a = cache.get_or_try_insert_with((1, "k"), make("a"))?;
        let again = cache.get_or_try_insert_with((1, "k"), || Err(()))?;
        assert!(Arc::ptr_eq(&a, &again));
        // Another context, or another compile, is another entry.
        let other_ctx = cache.get_or_try_insert_with((2, "k"), make("b"))?;
        let other_key = cache.get_or_try_insert_with((1, "j"), make("c"))?;
        assert_eq!((other_ctx.as_str(), other_key.as_str()), ("b", "c"));
        assert_eq!(cache.len(), 3);
        Ok(())
    }

    #[test]
    fn the_cache_keeps_nothing_alive() -> Result<(), ()> {
        let cache = Cache::new();
        let a = cache.get_or_try_insert_with((1, "k"), make("a"))?;
        let weak = Arc::downgrade(&a);
        drop(a);
        // Only the caller held it: it is gone, and its key misses.
        assert!(weak.upgrade().is_none());
        assert!(cache.get(&(1, "k")).is_none());
        // A new context at the dead one's address gets a new value, never the dead one.
        let fresh = cache.get_or_try_insert_with((1, "k"), make("fresh"))?;
        assert_eq!(fresh.as_str(), "fresh");
        Ok(())
    }

    #[test]
    fn dead_entries_are_swept_on_store() -> Result<(), ()> {
        let cache = Cache::new();
        for k in ["a", "b", "c"] {
            cache.get_or_try_insert_with((1, k), make(k))?;
        }
        let kept = cache.get_or_try_insert_with((1, "d"), make("d"))?;
        assert_eq!(cache.len(), 1, "a, b, c died before d was stored");
        drop(kept);
        let _e = cache.get_or_try_insert_with((1, "e"), make("e"))?;
        assert_eq!(cache.len(), 1);
        Ok(())
    }

    #[test]
    fn a_failed_make_stores_nothing() {
        let cache = Cache::new();
        assert_eq!(cache.get_or_try_insert_with((1, "k"), || Err(7)), Err(7));
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn racing_stores_share_the_first_value() -> Result<(), ()> {
        let cache = Cache::new();
        let winner = Arc::new("winner".to_string());
        let got = cache.get_or_try_insert_with((1, "k"), || {
            // Another thread stores its value while this one makes its own (and `make` runs
            // without the lock, or this would deadlock).
            cache.get_or_try_insert_with((1, "k"), || Ok(winner.clone()))?;
            Ok(Arc::new("loser".to_string()))
        })?;
        assert!(Arc::ptr_eq(&got, &winner));
        assert_eq!(cache.len(), 1);
        Ok(())
    }
}

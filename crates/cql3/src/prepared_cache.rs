//! The prepared statement cache: a node-wide LRU of a bounded number of
//! statements, and in front of it, on each thread that executes, a map of
//! the statements that thread has run.
//!
//! Every EXECUTE looks its statement up. Through the LRU alone that was a
//! lock taken by every event loop in turn, a hash of the id and a move of
//! the entry to the front of the list: 3.5% of a write's time under latte
//! (perf, 2026-12-06). A thread's own map is read without a lock, hashed by
//! the id's first bytes (an MD5 digest, already uniform). It never holds a
//! statement the LRU has let go: anything that leaves the LRU (an
//! eviction, a clear after a schema change) moves the cache's epoch, and a
//! thread whose map is of an older epoch empties it before looking. Hits
//! in a thread's map are passed on to the LRU now and then, so a statement
//! in use keeps its place there. A thread hands out counts of its own on
//! a statement (an `Arc` of the shared one): the statement's own count is
//! not written from every event loop twice a request.

use bytes::Bytes;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Statements a thread keeps in front of the LRU; past it, it starts over.
const LOCAL_MAX: usize = 4096;
/// One hit in this many in a thread's map refreshes the statement's place
/// in the LRU.
const TOUCH_EVERY: u32 = 1024;

/// Hashes an id by folding its bytes eight at a time (ids are MD5
/// digests: their bits are already mixed).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 =
                (self.0.rotate_left(5) ^ u64::from_le_bytes(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, _len: usize) {
        // the length `Hash for [u8]` writes first: every id has the same
    }
}

type IdMap<V> = HashMap<Bytes, V, BuildHasherDefault<IdHasher>>;

/// Caches of different nodes in one process (tests) are told apart.
static NEXT_CACHE: AtomicU64 = AtomicU64::new(0);

struct Local {
    cache: u64,
    epoch: u64,
    hits: u32,
    /// `Arc<Arc<T>>`s, of the cache's `T`.
    map: IdMap<Arc<dyn std::any::Any + Send + Sync>>,
}

thread_local! {
    static LOCAL: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

pub struct PreparedCache<T> {
    id: u64,
    lru: Mutex<lru::LruCache<Bytes, Arc<T>>>,
    /// Moves whenever a statement leaves the LRU.
    epoch: AtomicU64,
}

impl<T: Send + Sync + 'static> PreparedCache<T> {
    pub fn new(capacity: usize) -> Self {
        PreparedCache {
            id: NEXT_CACHE.fetch_add(1, Ordering::Relaxed),
            lru: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            )),
            epoch: AtomicU64::new(0),
        }
    }

    /// The statement of `id`, from the thread's map when it has it.
    pub fn get(&self, id: &Bytes) -> Option<Arc<Arc<T>>> {
        // read before the LRU is: a statement that leaves it after this
        // read is not kept under this epoch
        let epoch = self.epoch.load(Ordering::Acquire);
        let touch = LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            let local = match l.iter().position(|x| x.cache == self.id) {
                Some(i) => &mut l[i],
                None => {
                    l.push(Local {
                        cache: self.id,
                        epoch,
                        hits: 0,
                        map: IdMap::default(),
                    });
                    l.last_mut()?
                }
            };
            if local.epoch != epoch {
                local.map.clear();
                local.epoch = epoch;
            }
            let p = local.map.get(id)?.clone();
            local.hits = local.hits.wrapping_add(1);
            Some((p, local.hits % TOUCH_EVERY == 0))
        });
        if let Some((p, touch)) = touch {
            if touch {
                self.lru.lock().get(id);
            }
            return p.downcast::<Arc<T>>().ok();
        }
        let p = Arc::new(self.lru.lock().get(id).cloned()?);
        let keep: Arc<dyn std::any::Any + Send + Sync> = p.clone();
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            if let Some(local) = l.iter_mut().find(|x| x.cache == self.id) {
                if local.epoch == epoch {
                    if local.map.len() >= LOCAL_MAX {
                        local.map.clear();
                    }
                    local.map.insert(id.clone(), keep);
                }
            }
        });
        Some(p)
    }

    /// The statement of `id` in the LRU (a PREPARE asking again).
    pub fn get_shared(&self, id: &Bytes) -> Option<Arc<T>> {
        self.lru.lock().get(id).cloned()
    }

    /// Caches `p` under `id`; true when the LRU let another statement go
    /// to make room.
    pub fn put(&self, id: Bytes, p: Arc<T>) -> bool {
        let mut lru = self.lru.lock();
        let evicts = lru.len() == lru.cap().get() && !lru.contains(&id);
        lru.put(id, p);
        if evicts {
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
        evicts
    }

    /// Forgets every statement.
    pub fn clear(&self) {
        let mut lru = self.lru.lock();
        lru.clear();
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub fn len(&self) -> usize {
        self.lru.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(i: u8) -> Bytes {
        Bytes::from(vec![i; 16])
    }

    #[test]
    fn a_statement_is_found_until_it_leaves_the_lru() {
        let c = PreparedCache::<String>::new(2);
        assert!(c.get(&id(1)).is_none());
        assert!(!c.put(id(1), Arc::new("one".into())));
        assert_eq!(c.get(&id(1)).as_deref().map(|s| s.as_str()), Some("one"));
        // now in this thread's map too; cleared from the LRU, it is gone here
        c.clear();
        assert!(c.get(&id(1)).is_none());
        assert!(c.is_empty());
    }

    #[test]
    fn an_eviction_reaches_the_threads_maps() {
        let c = PreparedCache::<u8>::new(2);
        c.put(id(1), Arc::new(1));
        c.put(id(2), Arc::new(2));
        assert_eq!(c.get(&id(1)).map(|p| **p), Some(1));
        assert_eq!(c.get(&id(2)).map(|p| **p), Some(2));
        // 1 is the least recently used in the LRU: it goes
        c.get_shared(&id(2));
        assert!(c.put(id(3), Arc::new(3)));
        assert!(
            c.get(&id(1)).is_none(),
            "evicted, not served from the thread's map"
        );
        assert_eq!(c.get(&id(2)).map(|p| **p), Some(2));
        assert_eq!(c.get(&id(3)).map(|p| **p), Some(3));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn two_caches_on_one_thread_are_kept_apart() {
        let a = PreparedCache::<u8>::new(4);
        let b = PreparedCache::<u8>::new(4);
        a.put(id(1), Arc::new(10));
        b.put(id(1), Arc::new(20));
        assert_eq!(a.get(&id(1)).map(|p| **p), Some(10));
        assert_eq!(b.get(&id(1)).map(|p| **p), Some(20));
        b.clear();
        assert_eq!(a.get(&id(1)).map(|p| **p), Some(10));
        assert!(b.get(&id(1)).is_none());
    }

    #[test]
    fn a_clear_reaches_a_thread_that_has_the_statement() {
        let c = PreparedCache::<u8>::new(4);
        c.put(id(1), Arc::new(1));
        let (cached_tx, cached_rx) = std::sync::mpsc::channel::<()>();
        let (cleared_tx, cleared_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let c = &c;
            s.spawn(move || {
                assert_eq!(c.get(&id(1)).map(|p| **p), Some(1));
                cached_tx.send(()).expect("main waits");
                cleared_rx.recv().expect("main clears");
                assert!(c.get(&id(1)).is_none());
            });
            cached_rx.recv().expect("the thread looked");
            c.clear();
            cleared_tx.send(()).expect("the thread waits");
        });
    }

    #[test]
    fn ids_hash_apart() {
        use std::hash::BuildHasher;
        let h = BuildHasherDefault::<IdHasher>::default();
        let a = h.hash_one(id(1));
        let b = h.hash_one(id(2));
        assert_ne!(a, b);
        assert_ne!(a & 0xff, b & 0xff, "low bits differ too");
    }
}

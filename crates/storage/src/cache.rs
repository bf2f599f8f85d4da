//! The key cache and the row cache (Cassandra's `CacheService`), both bounded
//! by bytes, least recently used evicted first. A table's `caching` option
//! says which it uses: `keys: ALL` the key cache (the partition index entry
//! of a key in one SSTable, so a read skips the index lookup), and
//! `rows_per_partition` other than `NONE` the row cache (whole partitions
//! merged from every source, kept until the next write to the partition).
//!
//! The row cache caches a partition only when it holds at most
//! `rows_per_partition` rows (all of them with `ALL`); Cassandra would keep
//! the first rows of a larger one.

use crate::data::Partition;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Hit and request counts of a cache.
#[derive(Default)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub requests: AtomicU64,
}

impl CacheStats {
    fn request(&self, hit: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if hit {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Where a partition's index entry is in one SSTable.
#[derive(Debug, Clone)]
pub struct KeyEntry {
    pub offset: u64,
    pub intra: u32,
    pub row_index: Bytes,
}

struct Bounded<K: std::hash::Hash + Eq, V> {
    lru: lru::LruCache<K, (V, usize)>,
    used: usize,
}

impl<K: std::hash::Hash + Eq, V> Bounded<K, V> {
    fn new() -> Self {
        Bounded {
            lru: lru::LruCache::unbounded(),
            used: 0,
        }
    }

    fn put(&mut self, k: K, v: V, size: usize, capacity: usize) {
        self.used += size;
        if let Some((_, old)) = self.lru.put(k, (v, size)) {
            self.used -= old;
        }
        while self.used > capacity {
            match self.lru.pop_lru() {
                Some((_, (_, s))) => self.used -= s,
                None => break,
            }
        }
    }

    fn remove(&mut self, k: &K) {
        if let Some((_, s)) = self.lru.pop(k) {
            self.used -= s;
        }
    }

    fn clear(&mut self) {
        self.lru.clear();
        self.used = 0;
    }
}

/// Partition index entries by (SSTable, key).
pub struct KeyCache {
    inner: Mutex<Bounded<(u64, Bytes), KeyEntry>>,
    capacity: AtomicU64,
    pub stats: CacheStats,
}

impl KeyCache {
    pub fn new(capacity_bytes: u64) -> Arc<Self> {
        Arc::new(KeyCache {
            inner: Mutex::new(Bounded::new()),
            capacity: AtomicU64::new(capacity_bytes),
            stats: CacheStats::default(),
        })
    }

    pub fn enabled(&self) -> bool {
        self.capacity.load(Ordering::Relaxed) > 0
    }

    pub fn get(&self, sstable: u64, key: &Bytes) -> Option<KeyEntry> {
        let hit = self
            .inner
            .lock()
            .lru
            .get(&(sstable, key.clone()))
            .map(|(e, _)| e.clone());
        self.stats.request(hit.is_some());
        hit
    }

    pub fn put(&self, sstable: u64, key: Bytes, e: KeyEntry) {
        let size = key.len() + e.row_index.len() + 96;
        let cap = self.capacity.load(Ordering::Relaxed) as usize;
        self.inner.lock().put((sstable, key), e, size, cap);
    }

    /// (entries, bytes used, capacity).
    pub fn usage(&self) -> (usize, usize, u64) {
        let g = self.inner.lock();
        (g.lru.len(), g.used, self.capacity.load(Ordering::Relaxed))
    }

    /// Empties the cache (`nodetool invalidatekeycache`).
    pub fn clear(&self) {
        self.inner.lock().clear();
    }

    pub fn set_capacity(&self, bytes: u64) {
        self.capacity.store(bytes, Ordering::Relaxed);
        let mut g = self.inner.lock();
        while g.used > bytes as usize {
            match g.lru.pop_lru() {
                Some((_, (_, s))) => g.used -= s,
                None => break,
            }
        }
    }
}

#[derive(Clone)]
enum Slot {
    /// A reader is filling this entry; a write in between removes it, so
    /// the reader never publishes what it read before the write.
    Sentinel(u64),
    Data(Arc<Partition>),
}

/// What a row cache lookup found.
pub enum RowLookup {
    Hit(Arc<Partition>),
    /// Not cached; the caller reads and then calls [`RowCache::fill`] with
    /// this ticket.
    Miss(u64),
    /// Another reader is filling it: read without the cache.
    Busy,
}

/// Whole partitions by (table, key).
pub struct RowCache {
    inner: Mutex<Bounded<(uuid::Uuid, Bytes), Slot>>,
    capacity: AtomicU64,
    tickets: AtomicU64,
    pub stats: CacheStats,
}

impl RowCache {
    pub fn new(capacity_bytes: u64) -> Arc<Self> {
        Arc::new(RowCache {
            inner: Mutex::new(Bounded::new()),
            capacity: AtomicU64::new(capacity_bytes),
            tickets: AtomicU64::new(1),
            stats: CacheStats::default(),
        })
    }

    pub fn enabled(&self) -> bool {
        self.capacity.load(Ordering::Relaxed) > 0
    }

    pub fn lookup(&self, table: uuid::Uuid, key: &Bytes) -> RowLookup {
        let mut g = self.inner.lock();
        let k = (table, key.clone());
        let found = g.lru.get(&k).map(|(s, _)| s.clone());
        let r = match found {
            Some(Slot::Data(p)) => RowLookup::Hit(p),
            Some(Slot::Sentinel(_)) => RowLookup::Busy,
            None => {
                let t = self.tickets.fetch_add(1, Ordering::Relaxed);
                let cap = self.capacity.load(Ordering::Relaxed) as usize;
                g.put(k, Slot::Sentinel(t), 64, cap);
                RowLookup::Miss(t)
            }
        };
        self.stats.request(matches!(r, RowLookup::Hit(_)));
        r
    }

    /// Publishes what a reader read, unless a write removed its sentinel;
    /// `None` (nothing to cache) just removes the sentinel.
    pub fn fill(&self, table: uuid::Uuid, key: &Bytes, ticket: u64, p: Option<Arc<Partition>>) {
        let mut g = self.inner.lock();
        let k = (table, key.clone());
        let ours = matches!(g.lru.peek(&k), Some((Slot::Sentinel(t), _)) if *t == ticket);
        if !ours {
            return;
        }
        match p {
            Some(p) => {
                let size = p.memory_size() + key.len() + 64;
                let cap = self.capacity.load(Ordering::Relaxed) as usize;
                g.put(k, Slot::Data(p), size, cap);
            }
            None => g.remove(&k),
        }
    }

    /// A write to the partition: the cached copy is stale.
    pub fn invalidate(&self, table: uuid::Uuid, key: &Bytes) {
        self.inner.lock().remove(&(table, key.clone()));
    }

    /// Every partition of a table (truncate, drop, a schema change).
    pub fn invalidate_table(&self, table: uuid::Uuid) {
        let mut g = self.inner.lock();
        let keys: Vec<(uuid::Uuid, Bytes)> = g
            .lru
            .iter()
            .filter(|(k, _)| k.0 == table)
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            g.remove(&k);
        }
    }

    /// Empties the cache (`nodetool invalidaterowcache`).
    pub fn clear(&self) {
        self.inner.lock().clear();
    }

    /// (entries, bytes used, capacity).
    pub fn usage(&self) -> (usize, usize, u64) {
        let g = self.inner.lock();
        (g.lru.len(), g.used, self.capacity.load(Ordering::Relaxed))
    }
}

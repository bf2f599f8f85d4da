//! The memtable: a concurrent sorted map of partitions, merged in place with
//! per-cell reconciliation. Flushing to SSTables reads it in token order.

use crate::clustering::Bound;
use crate::data::{DecoratedKey, Mutation, Partition};
use crossbeam_skiplist::SkipMap;
use parking_lot::Mutex;
use std::ops::Bound as RangeBound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// An in-memory, sorted write buffer of one table.
#[derive(Default)]
pub struct Memtable {
    partitions: SkipMap<DecoratedKey, Mutex<Partition>>,
    live_bytes: AtomicUsize,
    operations: AtomicUsize,
    /// The memory accounting shared by the memtables of all tables.
    pool: Arc<MemtablePool>,
    /// Switched out, being written to an SSTable.
    flushing: AtomicBool,
}

/// The memory of all memtables of a node (Cassandra's `MemtablePool`): what
/// the live memtables hold and what those being flushed still hold, kept as
/// writes come and memtables go, so the write path never adds them up.
#[derive(Default, Debug)]
pub struct MemtablePool {
    live: AtomicUsize,
    flushing: AtomicUsize,
}

impl MemtablePool {
    /// Bytes of the live memtables and of those being flushed.
    pub fn usage(&self) -> (usize, usize) {
        (
            self.live.load(Ordering::Relaxed),
            self.flushing.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Memtable {
    fn drop(&mut self) {
        let b = self.live_bytes.load(Ordering::Relaxed);
        let counter = if self.flushing.load(Ordering::Relaxed) {
            &self.pool.flushing
        } else {
            &self.pool.live
        };
        counter.fetch_sub(b, Ordering::Relaxed);
    }
}

/// Memory a new partition costs in a memtable beyond its data: the skip
/// list node with the partition inline (about 256 bytes) and its locks.
const PARTITION_OVERHEAD_BYTES: usize = 300;

/// A clustering slice `[start, end]` given by bounds.
pub type Slice = (Bound, Bound);

impl Memtable {
    pub fn new() -> Self {
        Self::default()
    }

    /// A memtable whose memory counts in `pool`.
    pub fn in_pool(pool: Arc<MemtablePool>) -> Self {
        Memtable {
            partitions: SkipMap::new(),
            live_bytes: AtomicUsize::new(0),
            operations: AtomicUsize::new(0),
            pool,
            flushing: AtomicBool::new(false),
        }
    }

    /// Marks the memtable switched out for flushing: its bytes move from the
    /// pool's live to its flushing share. No write may be applied after.
    pub fn mark_flushing(&self) {
        if !self.flushing.swap(true, Ordering::AcqRel) {
            let b = self.live_bytes.load(Ordering::Relaxed);
            self.pool.live.fetch_sub(b, Ordering::Relaxed);
            self.pool.flushing.fetch_add(b, Ordering::Relaxed);
        }
    }

    /// Merges a mutation in.
    pub fn apply(&self, m: Mutation, now: i32) {
        let mut size = m.update.memory_size() + m.key.key.len() + 16;
        let mut created = false;
        let entry = self.partitions.get_or_insert_with(m.key, || {
            created = true;
            Mutex::new(Partition::new())
        });
        if created {
            size += PARTITION_OVERHEAD_BYTES;
        }
        entry.value().lock().merge(m.update, now);
        self.live_bytes.fetch_add(size, Ordering::Relaxed);
        let counter = if self.flushing.load(Ordering::Relaxed) {
            &self.pool.flushing
        } else {
            &self.pool.live
        };
        counter.fetch_add(size, Ordering::Relaxed);
        self.operations.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes of data held (an estimate, for the flush threshold).
    pub fn live_bytes(&self) -> usize {
        self.live_bytes.load(Ordering::Relaxed)
    }

    pub fn operations(&self) -> usize {
        self.operations.load(Ordering::Relaxed)
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    /// The part of a partition inside the slices (all of it when `slices` is
    /// `None`), unresolved: tombstones are kept so other sources can be shadowed.
    pub fn read(&self, key: &DecoratedKey, slices: Option<&[Slice]>) -> Option<Partition> {
        let entry = self.partitions.get(key)?;
        let p = entry.value().lock();
        Some(slice_partition(&p, slices))
    }

    /// Keys in token order after `after` (exclusive) or from `start_token`
    /// (inclusive) up to `end_token` (inclusive), at most `limit`.
    pub fn keys(
        &self,
        after: Option<&DecoratedKey>,
        start_token: i64,
        end_token: i64,
        limit: usize,
    ) -> Vec<DecoratedKey> {
        let lower = match after {
            Some(k) => RangeBound::Excluded(k.clone()),
            None => RangeBound::Included(DecoratedKey {
                token: start_token,
                key: bytes::Bytes::new(),
            }),
        };
        let mut out = Vec::new();
        for e in self.partitions.range((lower, RangeBound::Unbounded)) {
            if e.key().token > end_token || out.len() >= limit {
                break;
            }
            out.push(e.key().clone());
        }
        out
    }
}

/// Copies the parts of `p` that fall in `slices`.
pub fn slice_partition(p: &Partition, slices: Option<&[Slice]>) -> Partition {
    let Some(slices) = slices else {
        return p.clone();
    };
    let mut out = Partition {
        deletion: p.deletion,
        static_row: p.static_row.clone(),
        rows: Default::default(),
        range_tombstones: Vec::new(),
    };
    for (start, end) in slices {
        if start > end {
            continue;
        }
        for (ck, row) in p.rows.range(start, end) {
            out.rows.insert(ck.clone(), row.clone());
        }
        for rt in &p.range_tombstones {
            if !(rt.end < *start || rt.start > *end) && !out.range_tombstones.contains(rt) {
                out.range_tombstones.push(rt.clone());
            }
        }
    }
    out
}

impl Memtable {
    /// Visits every partition in token order (the flush).
    pub fn for_each(
        &self,
        mut f: impl FnMut(&DecoratedKey, &Partition) -> Result<(), crate::StorageError>,
    ) -> Result<(), crate::StorageError> {
        for e in self.partitions.iter() {
            let p = e.value().lock();
            f(e.key(), &p)?;
        }
        Ok(())
    }
}

impl Memtable {
    pub fn contains(&self, key: &DecoratedKey) -> bool {
        self.partitions.contains_key(key)
    }
}

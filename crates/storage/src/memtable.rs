//! The memtable: a sorted map of partitions, merged in place with per-cell
//! reconciliation. Flushing to SSTables reads it in token order.
//!
//! Partitions live in shards, one per 1/64 of the token range, each behind
//! its own lock, so two writers rarely meet. A shard is a hash table from
//! token to slot (point writes and reads), a B-tree from token to slot
//! (token order, for flushes and ranges), and an arena (slab) of slots,
//! each holding the partitions of one token, nearly always one, in key
//! order. With the partitions inline in the tree nodes (176 bytes an
//! entry, 2 KB a node) every level of the tree was a miss, and an insert
//! shifted a kilobyte of its leaf; with the tree alone (twelve-byte
//! entries) a write still stalled on its walk and on the slot. The table's
//! place of a token is known from the token, so a write asks for that line
//! when it starts ([`Memtable::prefetch_token`]) and for its slot's before
//! its commit log append ([`Memtable::prefetch`]): by the apply both are
//! in the cache. Iterating the shards in order gives token order.

use crate::clustering::Bound;
use crate::data::{DecoratedKey, Mutation, Partition};
use bytes::Bytes;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;

/// An in-memory, sorted write buffer of one table.
pub struct Memtable {
    shards: [RwLock<Shard>; SHARDS],
    hints: [TableHint; SHARDS],
    partitions: AtomicUsize,
    /// Signed, as the pool's counters: see [`MemtablePool`].
    live_bytes: AtomicIsize,
    /// What this memtable counts in its pool's live share now: all of
    /// `live_bytes` until it is switched out, then what writes begun
    /// before that added to the live share after it.
    in_live: AtomicIsize,
    operations: AtomicUsize,
    /// The memory accounting shared by the memtables of all tables.
    pool: Arc<MemtablePool>,
    /// Switched out, being written to an SSTable.
    flushing: AtomicBool,
    /// Writes logged for this memtable but not yet applied (they wait for
    /// their commit log sync first): a flush waits for them.
    pending_writes: AtomicUsize,
    writes_done: tokio::sync::Notify,
}

/// The memory of all memtables of a node (Cassandra's `MemtablePool`): what
/// the live memtables hold and what those being flushed still hold, kept as
/// writes come and memtables go, so the write path never adds them up.
/// Signed: an overwrite's change may be negative, and a write racing its
/// memtable's switch may count in either share; each reads as at least 0
/// and each is exact once the memtables are gone.
#[derive(Default, Debug)]
pub struct MemtablePool {
    live: AtomicIsize,
    flushing: AtomicIsize,
}

impl MemtablePool {
    /// Bytes of the live memtables and of those being flushed.
    pub fn usage(&self) -> (usize, usize) {
        (
            self.live.load(Ordering::Relaxed).max(0) as usize,
            self.flushing.load(Ordering::Relaxed).max(0) as usize,
        )
    }
}

impl Default for Memtable {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Memtable {
    fn drop(&mut self) {
        let b = self.live_bytes.load(Ordering::Relaxed);
        let live = self.in_live.load(Ordering::Relaxed);
        self.pool.live.fetch_sub(live, Ordering::Relaxed);
        self.pool.flushing.fetch_sub(b - live, Ordering::Relaxed);
    }
}

/// The partitions of one token, in key order (nearly always one, held in
/// the B-tree node itself: no allocation per partition, and no pointer to
/// follow, a cache miss, on every write and read of it).
type SameToken = smallvec::SmallVec<[(MemKey, Partition); 1]>;

/// Longest partition key held inline.
const INLINE_KEY: usize = 23;

/// A partition key as the memtable holds it: up to [`INLINE_KEY`] bytes in
/// place (most keys are a few bytes: every write and read compares them
/// where the tree node already is, instead of following a pointer to the
/// bytes, a cache miss), longer ones shared. As large as a `Bytes`.
#[derive(Clone)]
enum MemKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Shared(Bytes),
}

impl MemKey {
    fn new(key: Bytes) -> Self {
        if key.len() <= INLINE_KEY {
            let mut bytes = [0; INLINE_KEY];
            bytes[..key.len()].copy_from_slice(&key);
            MemKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            MemKey::Shared(key)
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            MemKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            MemKey::Shared(b) => b,
        }
    }

    fn to_bytes(&self) -> Bytes {
        match self {
            MemKey::Inline { .. } => Bytes::copy_from_slice(self.as_slice()),
            MemKey::Shared(b) => b.clone(),
        }
    }
}

/// Memory a new partition costs in a memtable beyond its data: its slot
/// (about 250 bytes), its B-tree entry in nodes partly full and its token
/// table bucket (16 bytes, the table at most half full).
const PARTITION_OVERHEAD_BYTES: usize = 300;

/// Where `key` is (or would go) among the partitions of its token.
fn position(same: &SameToken, key: &[u8]) -> Result<usize, usize> {
    same.binary_search_by(|(k, _)| k.as_slice().cmp(key))
}

/// The partitions of a 1/64 of the token range: a B-tree from token to
/// slot (their order, for flushes and ranges), a hash table from token to
/// slot (point writes and reads: one probe, whose place the token alone
/// gives, so a write asks for it long before it applies), and the slots in
/// an arena that never moves them.
#[derive(Default)]
struct Shard {
    index: BTreeMap<i64, u32>,
    table: TokenTable,
    slots: Slab,
}

impl Shard {
    fn get(&self, token: &i64) -> Option<&SameToken> {
        self.table.get(*token).map(|s| self.slots.get(s))
    }

    /// The slot of `token`, made empty if it has none; true when the token
    /// table was reallocated.
    fn entry(&mut self, token: i64) -> (&mut SameToken, bool) {
        let (slot, grew) = match self.table.get(token) {
            Some(s) => (s, false),
            None => {
                let s = self.slots.push();
                self.index.insert(token, s);
                (s, self.table.insert(token, s))
            }
        };
        (self.slots.get_mut(slot), grew)
    }

    /// Tokens from `from` (inclusive) on, in order, with their partitions.
    fn range(&self, from: i64) -> impl Iterator<Item = (i64, &SameToken)> + '_ {
        self.index
            .range(from..)
            .map(|(&t, &s)| (t, self.slots.get(s)))
    }
}

/// A token's slot in a [`TokenTable`]; `slot` is [`NO_SLOT`] in an empty one.
#[derive(Clone, Copy)]
struct Bucket {
    token: i64,
    slot: u32,
}

const NO_SLOT: u32 = u32::MAX;

/// Token to slot by open addressing (linear probing), at most half full; a
/// power of two of buckets. Partitions never leave a memtable: nothing is
/// ever removed.
#[derive(Default)]
struct TokenTable {
    buckets: Vec<Bucket>,
    len: usize,
}

/// Fibonacci hashing: the token's bits spread over the high half (tokens
/// of one shard share their top bits; other partitioners' need not be
/// uniform at all).
fn home(token: i64, mask: usize) -> usize {
    (((token as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) >> 32) as usize & mask
}

impl TokenTable {
    fn get(&self, token: i64) -> Option<u32> {
        let mask = self.buckets.len().checked_sub(1)?;
        let mut i = home(token, mask);
        loop {
            let b = self.buckets[i];
            if b.slot == NO_SLOT {
                return None;
            }
            if b.token == token {
                return Some(b.slot);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds a token not yet here; true when the buckets were reallocated.
    fn insert(&mut self, token: i64, slot: u32) -> bool {
        let grow = (self.len + 1) * 2 > self.buckets.len();
        if grow {
            let cap = (self.buckets.len() * 2).max(16);
            let old = std::mem::replace(
                &mut self.buckets,
                vec![
                    Bucket {
                        token: 0,
                        slot: NO_SLOT
                    };
                    cap
                ],
            );
            for b in old.into_iter().filter(|b| b.slot != NO_SLOT) {
                self.place(b);
            }
        }
        self.place(Bucket { token, slot });
        self.len += 1;
        grow
    }

    fn place(&mut self, b: Bucket) {
        let mask = self.buckets.len() - 1;
        let mut i = home(b.token, mask);
        while self.buckets[i].slot != NO_SLOT {
            i = (i + 1) & mask;
        }
        self.buckets[i] = b;
    }
}

/// Where a shard's token table is, read without its lock by
/// [`Memtable::prefetch_token`]: written under the lock when the table
/// moves, read racily (a prefetch of a stale place is only a wasted hint).
#[derive(Default)]
struct TableHint {
    buckets: std::sync::atomic::AtomicPtr<Bucket>,
    mask: AtomicUsize,
}

/// Slots in chunks that are never reallocated (a growing `Vec` would copy
/// every partition under the shard's lock), each chunk twice the one before
/// up to [`SLAB_CHUNK_MAX`]: a shard of a small table holds a few slots, not
/// a large chunk. A slot's number is its chunk in the high bits and its
/// place in the chunk in the low [`SLAB_OFFSET_BITS`].
#[derive(Default)]
struct Slab {
    chunks: Vec<Vec<SameToken>>,
}

const SLAB_OFFSET_BITS: u32 = 20;
const SLAB_CHUNK_MIN: usize = 8;
const SLAB_CHUNK_MAX: usize = 1 << 14;

impl Slab {
    /// A slot's chunk and place in it.
    fn place(slot: u32) -> (usize, usize) {
        (
            (slot >> SLAB_OFFSET_BITS) as usize,
            (slot & ((1 << SLAB_OFFSET_BITS) - 1)) as usize,
        )
    }

    fn get(&self, slot: u32) -> &SameToken {
        let (chunk, i) = Self::place(slot);
        &self.chunks[chunk][i]
    }

    fn get_mut(&mut self, slot: u32) -> &mut SameToken {
        let (chunk, i) = Self::place(slot);
        &mut self.chunks[chunk][i]
    }

    /// A new empty slot.
    fn push(&mut self) -> u32 {
        let full = self.chunks.last().is_none_or(|c| c.len() == c.capacity());
        if full {
            let cap = (SLAB_CHUNK_MIN << self.chunks.len().min(16)).min(SLAB_CHUNK_MAX);
            self.chunks.push(Vec::with_capacity(cap));
        }
        let chunk = self.chunks.len() - 1;
        let c = &mut self.chunks[chunk];
        c.push(SameToken::new());
        ((chunk as u32) << SLAB_OFFSET_BITS) | (c.len() - 1) as u32
    }
}

/// Shards of the token range (a power of two).
const SHARDS: usize = 64;

/// The shard of a token: shards cover consecutive token ranges.
fn shard_of(token: i64) -> usize {
    (((token as u64) ^ (1 << 63)) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// Values whose cache lines a read asks for ahead ([`prefetch_values`]).
const PREFETCHED_VALUES: usize = 4;
/// Bytes of a value whose cache lines are asked for.
const PREFETCHED_VALUE_BYTES: usize = 256;

/// Asks the CPU for the cache lines (up to [`PREFETCHED_VALUE_BYTES`]) of
/// each of the first few values of `p`, read out of a memtable. Nearly
/// every read of a large memtable misses on its value, which the response
/// copies much later; fetched now, the miss overlaps the work in between
/// (the statement's row building, the metrics) instead of stalling the
/// copy.
fn prefetch_values(p: &Partition) {
    use crate::data::ColumnData;
    let values = p
        .static_row
        .as_deref()
        .into_iter()
        .chain(p.rows.values())
        .flat_map(|r| r.cells.values())
        .filter_map(|d| match d {
            ColumnData::Simple(c) => c.value.as_ref(),
            _ => None,
        })
        .take(PREFETCHED_VALUES);
    for v in values {
        // every line of a small value (a 100-byte one spans two or three)
        let (p, n) = (v.as_ptr(), v.len().min(PREFETCHED_VALUE_BYTES));
        for off in (0..n).step_by(64) {
            crate::prefetch::prefetch(p.wrapping_add(off));
        }
        if n > 0 {
            crate::prefetch::prefetch(p.wrapping_add(n - 1));
        }
    }
}

/// A clustering slice `[start, end]` given by bounds.
pub type Slice = (Bound, Bound);

impl Memtable {
    pub fn new() -> Self {
        Self::in_pool(Arc::default())
    }

    /// A memtable whose memory counts in `pool`.
    pub fn in_pool(pool: Arc<MemtablePool>) -> Self {
        Memtable {
            shards: std::array::from_fn(|_| RwLock::new(Shard::default())),
            hints: std::array::from_fn(|_| TableHint::default()),
            partitions: AtomicUsize::new(0),
            live_bytes: AtomicIsize::new(0),
            in_live: AtomicIsize::new(0),
            operations: AtomicUsize::new(0),
            pool,
            flushing: AtomicBool::new(false),
            pending_writes: AtomicUsize::new(0),
            writes_done: tokio::sync::Notify::new(),
        }
    }

    /// A write was logged for this memtable and will be applied to it.
    pub fn begin_write(&self) {
        self.pending_writes.fetch_add(1, Ordering::AcqRel);
    }

    /// A write begun with [`begin_write`](Self::begin_write) was applied (or
    /// given up).
    pub fn end_write(&self) {
        if self.pending_writes.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.writes_done.notify_waiters();
        }
    }

    /// Writes begun and not yet ended.
    pub fn pending_writes(&self) -> usize {
        self.pending_writes.load(Ordering::Acquire)
    }

    /// Waits until every begun write has ended.
    pub async fn wait_for_writes(&self) {
        loop {
            let done = self.writes_done.notified();
            if self.pending_writes.load(Ordering::Acquire) == 0 {
                return;
            }
            done.await;
        }
    }

    /// Marks the memtable switched out for flushing: its bytes move from the
    /// pool's live to its flushing share. No new write may begin after (those
    /// begun before are applied, and waited for, before it is written).
    pub fn mark_flushing(&self) {
        if !self.flushing.swap(true, Ordering::AcqRel) {
            // a write that saw the memtable live adds to the live share
            // (and to `in_live`) even after this
            let b = self.in_live.swap(0, Ordering::AcqRel);
            self.pool.live.fetch_sub(b, Ordering::Relaxed);
            self.pool.flushing.fetch_add(b, Ordering::Relaxed);
        }
    }

    /// Merges a mutation in. The memtable's size (and its pool's) changes by
    /// what the partition's memory did ([`Partition::merge_sized`]): a new
    /// partition counts whole, an overwrite the difference of the values.
    pub fn apply(&self, m: Mutation, now: i32) {
        let n = shard_of(m.key.token);
        let mut shard = self.shards[n].write();
        // one search of the table whether the partition is new or not
        let (same, grew) = shard.entry(m.key.token);
        let delta = match position(same, &m.key.key) {
            Ok(i) => same[i].1.merge_sized(m.update, now),
            Err(i) => {
                let size = m.key.key.len() + 16 + PARTITION_OVERHEAD_BYTES;
                let mut p = Partition::new();
                let d = p.merge_sized(m.update, now) + size as isize;
                same.insert(i, (MemKey::new(m.key.key), p));
                self.partitions.fetch_add(1, Ordering::Relaxed);
                if grew {
                    let b = &shard.table.buckets;
                    let hint = &self.hints[n];
                    hint.buckets.store(b.as_ptr().cast_mut(), Ordering::Relaxed);
                    hint.mask.store(b.len() - 1, Ordering::Relaxed);
                }
                d
            }
        };
        // counted under the shard's lock: what a write adds to a partition
        // is counted before a later write to it takes any of it off
        self.live_bytes.fetch_add(delta, Ordering::Relaxed);
        if self.flushing.load(Ordering::Acquire) {
            self.pool.flushing.fetch_add(delta, Ordering::Relaxed);
        } else {
            self.in_live.fetch_add(delta, Ordering::AcqRel);
            self.pool.live.fetch_add(delta, Ordering::Relaxed);
        }
        drop(shard);
        self.operations.fetch_add(1, Ordering::Relaxed);
    }

    /// Asks the CPU for the cache line of `token`'s place in its shard's
    /// token table, without a lock: a write calls it when it starts, so
    /// that [`prefetch`](Self::prefetch) finds the line there.
    pub fn prefetch_token(&self, token: i64) {
        let hint = &self.hints[shard_of(token)];
        let b = hint.buckets.load(Ordering::Relaxed);
        if !b.is_null() {
            let at = b.wrapping_add(home(token, hint.mask.load(Ordering::Relaxed)));
            crate::prefetch::prefetch(at.cast());
        }
    }

    /// Asks the CPU for the cache lines of `key`'s slot, when the partition
    /// is here: a write calls it before its commit log append, so the miss
    /// its [`apply`](Self::apply) would stall on (the slot, one of tens of
    /// thousands) overlaps the append instead.
    pub fn prefetch(&self, key: &DecoratedKey) {
        let shard = self.shards[shard_of(key.token)].read();
        if let Some(same) = shard.get(&key.token) {
            let (p, n) = (
                (same as *const SameToken).cast::<u8>(),
                std::mem::size_of::<SameToken>(),
            );
            for off in (0..n).step_by(64).chain([n - 1]) {
                crate::prefetch::prefetch(p.wrapping_add(off));
            }
        }
    }

    /// Bytes of data held (an estimate, for the flush threshold).
    pub fn live_bytes(&self) -> usize {
        self.live_bytes.load(Ordering::Relaxed).max(0) as usize
    }

    pub fn operations(&self) -> usize {
        self.operations.load(Ordering::Relaxed)
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.load(Ordering::Relaxed)
    }

    /// The part of a partition inside the slices (all of it when `slices` is
    /// `None`), unresolved: tombstones are kept so other sources can be shadowed.
    pub fn read(&self, key: &DecoratedKey, slices: Option<&[Slice]>) -> Option<Partition> {
        let shard = self.shards[shard_of(key.token)].read();
        let same = shard.get(&key.token)?;
        let i = position(same, &key.key).ok()?;
        let p = same[i].1.sliced(slices);
        prefetch_values(&p);
        Some(p)
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
        // from this token on; of the first token, the keys after this one
        let (from, after_key) = match after {
            Some(k) => (k.token, Some(&k.key)),
            None => (start_token, None),
        };
        let mut out = Vec::new();
        for shard in &self.shards[shard_of(from)..] {
            for (token, same) in shard.read().range(from) {
                for (k, _) in same {
                    if token > end_token || out.len() >= limit {
                        return out;
                    }
                    if token == from && after_key.is_some_and(|a| k.as_slice() <= a.as_ref()) {
                        continue;
                    }
                    out.push(DecoratedKey {
                        token,
                        key: k.to_bytes(),
                    });
                }
            }
        }
        out
    }
}

impl Memtable {
    /// Visits every partition in token order (the flush).
    pub fn for_each(
        &self,
        mut f: impl FnMut(&DecoratedKey, &Partition) -> Result<(), crate::StorageError>,
    ) -> Result<(), crate::StorageError> {
        for shard in &self.shards {
            for (token, same) in shard.read().range(i64::MIN) {
                for (k, p) in same {
                    let key = DecoratedKey {
                        token,
                        key: k.to_bytes(),
                    };
                    f(&key, p)?;
                }
            }
        }
        Ok(())
    }
}

impl Memtable {
    pub fn contains(&self, key: &DecoratedKey) -> bool {
        self.shards[shard_of(key.token)]
            .read()
            .get(&key.token)
            .is_some_and(|same| position(same, &key.key).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn key(i: u32) -> DecoratedKey {
        DecoratedKey::new(Bytes::from(i.to_be_bytes().to_vec()))
    }

    #[test]
    fn shards_keep_token_order_for_flush_and_range_reads() {
        let m = Memtable::new();
        for i in 0..5000u32 {
            m.apply(
                Mutation {
                    table_id: uuid::Uuid::nil(),
                    key: key(i),
                    update: Partition::new(),
                },
                0,
            );
        }
        m.apply(
            Mutation {
                table_id: uuid::Uuid::nil(),
                key: key(7),
                update: Partition::new(),
            },
            0,
        );
        assert_eq!(m.partition_count(), 5000);
        let mut all = Vec::new();
        m.for_each(|k, _| {
            all.push(k.clone());
            Ok(())
        })
        .expect("iterate");
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(all, sorted, "flush order is token order");
        assert_eq!(all.len(), 5000);
        // pages of a range read, across shard boundaries
        let mut paged = Vec::new();
        let mut after: Option<DecoratedKey> = None;
        loop {
            let page = m.keys(after.as_ref(), i64::MIN, i64::MAX, 333);
            if page.is_empty() {
                break;
            }
            after = page.last().cloned();
            paged.extend(page);
        }
        assert_eq!(paged, all);
        // a token range in the middle
        let (lo, hi) = (all[1000].token, all[3999].token);
        assert_eq!(m.keys(None, lo, hi, usize::MAX), all[1000..4000].to_vec());
        assert!(m.contains(&all[4321]) && m.read(&all[4321], None).is_some());
    }

    fn write(m: &Memtable, k: u32, ts: i64, value: &[u8]) {
        let mut row = crate::data::Row::default();
        row.cells.insert(
            "v",
            crate::data::ColumnData::Simple(crate::data::Cell::live(
                ts,
                Bytes::copy_from_slice(value),
            )),
        );
        let mut update = Partition::new();
        update.rows.insert(
            crate::clustering::ClusteringKey::row(
                vec![],
                crate::clustering::ClusteringComparator::new(vec![]),
            ),
            row,
        );
        m.apply(
            Mutation {
                table_id: uuid::Uuid::nil(),
                key: key(k),
                update,
            },
            0,
        );
    }

    /// A memtable is as large as what it holds: overwriting the same rows
    /// with values as long leaves its size (and its pool's) where the first
    /// writes put it; longer values grow it by the difference. The pool's
    /// shares come back to nothing once the memtables are gone, also when a
    /// write lands after its memtable was switched out.
    #[test]
    fn overwrites_count_what_they_change_not_what_they_write() {
        let pool = Arc::new(MemtablePool::default());
        let m = Memtable::in_pool(pool.clone());
        for k in 0..100 {
            write(&m, k, 1, &[1; 100]);
        }
        let first = m.live_bytes();
        assert!(first > 100 * 100, "{first}");
        assert_eq!(pool.usage(), (first, 0));
        for ts in 2..12 {
            for k in 0..100 {
                write(&m, k, ts, &[ts as u8; 100]);
            }
        }
        assert_eq!(m.live_bytes(), first, "ten overwrites of every row");
        assert_eq!(m.operations(), 1100);
        for k in 0..100 {
            write(&m, k, 20, &[2; 150]);
        }
        assert_eq!(m.live_bytes(), first + 100 * 50);
        assert_eq!(pool.usage(), (first + 100 * 50, 0));
        // switched out: its bytes are the flushing share; a late write (one
        // begun before the switch) and a new memtable's count where they land
        m.mark_flushing();
        assert_eq!(pool.usage(), (0, first + 100 * 50));
        write(&m, 1000, 1, &[1; 100]);
        let next = Memtable::in_pool(pool.clone());
        write(&next, 1, 30, &[3; 100]);
        let (live, flushing) = pool.usage();
        assert_eq!(live, next.live_bytes());
        assert_eq!(flushing, m.live_bytes());
        drop(m);
        assert_eq!(pool.usage(), (next.live_bytes(), 0));
        drop(next);
        assert_eq!(pool.usage(), (0, 0));
    }

    #[test]
    fn the_token_table_finds_every_token_across_growth_and_collisions() {
        let mut t = TokenTable::default();
        assert_eq!(t.get(5), None, "an empty table has no buckets");
        // tokens alike in their low bits and in their high bits, and the
        // extremes: each found, its neighbours not
        let tokens: Vec<i64> = (0..3000i64)
            .map(|i| i << 40)
            .chain((0..3000).map(|i| i64::MIN + i))
            .chain([i64::MAX, -1, 0x7fff_0000])
            .collect();
        let mut grew = 0;
        for (s, &tok) in tokens.iter().enumerate() {
            if t.get(tok).is_none() {
                grew += usize::from(t.insert(tok, s as u32));
            }
        }
        assert!(grew >= 9, "reallocated as it filled: {grew}");
        assert!(t.len * 2 <= t.buckets.len(), "at most half full");
        for (s, &tok) in tokens.iter().enumerate() {
            let first = tokens.iter().position(|&x| x == tok).expect("present") as u32;
            assert_eq!(t.get(tok), Some(first), "token {tok} (slot {s})");
        }
        assert_eq!(t.get(1 << 39), None);
        assert_eq!(t.get(i64::MIN + 3000), None);
    }

    #[test]
    fn a_prefetch_of_any_token_is_harmless_and_a_write_after_it_lands() {
        let m = Memtable::new();
        // no table yet in any shard, then tables that grow under the hints
        for i in 0..2000u32 {
            m.prefetch_token(key(i).token);
            m.prefetch(&key(i));
            m.apply(
                Mutation {
                    table_id: uuid::Uuid::nil(),
                    key: key(i),
                    update: Partition::new(),
                },
                0,
            );
        }
        for i in 0..2000u32 {
            m.prefetch_token(key(i).token);
            assert!(m.read(&key(i), None).is_some(), "partition {i}");
        }
        assert!(m.read(&key(2000), None).is_none());
        assert_eq!(m.partition_count(), 2000);
    }

    #[test]
    fn slab_slots_keep_their_partitions_across_chunks() {
        let mut slab = Slab::default();
        // past the growing chunks (8 + 16 + ... + 8192) into full-size ones
        let slots: Vec<u32> = (0..50_000u32)
            .map(|i| {
                let s = slab.push();
                slab.get_mut(s).push((
                    MemKey::new(Bytes::copy_from_slice(&i.to_be_bytes())),
                    Partition::new(),
                ));
                s
            })
            .collect();
        let mut unique = slots.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), slots.len(), "every slot its own");
        for (i, s) in slots.iter().enumerate() {
            assert_eq!(slab.get(*s)[0].0.as_slice(), &(i as u32).to_be_bytes());
        }
        assert!(slab.chunks.iter().all(|c| c.capacity() <= SLAB_CHUNK_MAX));
        assert!(slab.chunks.len() > 12, "full-size chunks were reached");
    }

    #[test]
    fn partitions_of_one_token_keep_key_order() {
        let m = Memtable::new();
        let at = |token: i64, k: &'static [u8]| DecoratedKey {
            token,
            key: Bytes::from_static(k),
        };
        for (t, k) in [
            (5, &b"b"[..]),
            (5, b"a"),
            (9, b"z"),
            (5, b"c"),
            (-3, b"q"),
            (5, b"a"),
        ] {
            m.apply(
                Mutation {
                    table_id: uuid::Uuid::nil(),
                    key: at(t, k),
                    update: Partition::new(),
                },
                0,
            );
        }
        assert_eq!(m.partition_count(), 5);
        let mut all = Vec::new();
        m.for_each(|k, _| {
            all.push(k.clone());
            Ok(())
        })
        .expect("iterate");
        let want = vec![
            at(-3, b"q"),
            at(5, b"a"),
            at(5, b"b"),
            at(5, b"c"),
            at(9, b"z"),
        ];
        assert_eq!(all, want);
        // paging from a key in the middle of a token's partitions
        assert_eq!(
            m.keys(Some(&at(5, b"a")), i64::MIN, i64::MAX, 10),
            want[2..].to_vec()
        );
        assert_eq!(
            m.keys(Some(&at(5, b"c")), i64::MIN, i64::MAX, 10),
            want[4..].to_vec()
        );
        assert_eq!(m.keys(None, 5, 5, 10), want[1..4].to_vec());
        assert_eq!(m.keys(None, 5, 9, 2), want[1..3].to_vec());
        assert!(m.contains(&at(5, b"b")) && !m.contains(&at(5, b"d")) && !m.contains(&at(6, b"b")));
        assert!(m.read(&at(5, b"c"), None).is_some() && m.read(&at(9, b"a"), None).is_none());
    }

    #[test]
    fn keys_held_inline_or_shared_read_back_the_same() {
        assert_eq!(
            std::mem::size_of::<MemKey>(),
            std::mem::size_of::<Bytes>(),
            "an inline key costs no more room than a shared one"
        );
        let m = Memtable::new();
        // on both sides of the inline length, and empty; one token for all,
        // so they are ordered by their bytes
        let keys: Vec<Bytes> = [0usize, 1, 22, 23, 24, 40]
            .iter()
            .map(|&n| Bytes::from(vec![b'k'; n]))
            .collect();
        for k in keys.iter().rev() {
            m.apply(
                Mutation {
                    table_id: uuid::Uuid::nil(),
                    key: DecoratedKey {
                        token: 7,
                        key: k.clone(),
                    },
                    update: Partition::new(),
                },
                0,
            );
        }
        let mut all = Vec::new();
        m.for_each(|k, _| {
            all.push(k.key.clone());
            Ok(())
        })
        .expect("iterate");
        assert_eq!(all, keys, "key order, inline and shared keys alike");
        for k in &keys {
            let dk = DecoratedKey {
                token: 7,
                key: k.clone(),
            };
            assert!(m.contains(&dk) && m.read(&dk, None).is_some());
        }
        let after = DecoratedKey {
            token: 7,
            key: keys[3].clone(),
        };
        let rest: Vec<Bytes> = m
            .keys(Some(&after), i64::MIN, i64::MAX, 10)
            .into_iter()
            .map(|k| k.key)
            .collect();
        assert_eq!(rest, keys[4..].to_vec());
        assert!(!m.contains(&DecoratedKey {
            token: 7,
            key: Bytes::from(vec![b'k'; 2]),
        }));
    }
}

//! Tables' stores (memtable, memtables being flushed, SSTables) and the
//! engine that ties them to the commit log: write path, flush, replay and
//! commit log recycling.

use crate::background::{self, Priority};
use crate::cache::{KeyCache, RowCache, RowLookup};
use crate::clustering::ClusteringComparator;
use crate::commitlog::{self, CommitLog, Entry, ReplayStats, SyncMode};
use crate::data::{DecoratedKey, Mutation, Partition};
use crate::memtable::{Memtable, MemtablePool, Slice};
use crate::serde::{decode_mutation, encode_mutation};
use crate::sstable::{list_generations, ChunkCache, RepairState, SSTableReader, SSTableWriter};
use crate::{now_in_seconds, StorageError};
use parking_lot::{Mutex, RwLock};
use sibyl_types::fast_map::FastHashMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Per-table storage options (from the table's schema; ALTER TABLE updates them).
#[derive(Debug, Clone)]
pub struct TableOptions {
    pub compression: crate::sstable::Compression,
    pub chunk_length_bytes: usize,
    pub bloom_filter_fp_chance: f64,
    pub gc_grace_seconds: i32,
    pub strategy: crate::compaction::Strategy,
    /// Background compaction enabled (`'enabled': 'false'` in the compaction map disables it).
    pub auto_compaction: bool,
    /// Written into every SSTable's statistics.
    pub header: crate::sstable::SerializationHeader,
    /// Dropped columns and when (micros): their cells written at or before
    /// that time are never read again, and compaction purges them.
    pub dropped_columns: Vec<(String, i64)>,
    /// `caching = {'keys': 'ALL'}`: reads use the key cache.
    pub cache_keys: bool,
    /// The regular columns of a table whose rows a read by name may
    /// complete before looking at every SSTable (Cassandra's
    /// `queryMemtableAndSSTablesInTimestampOrder`): every column simple, no
    /// static or counter column, not COMPACT STORAGE. `None`: every source
    /// is always read.
    pub timestamp_ordered: Option<Arc<[String]>>,
    /// `caching = {'rows_per_partition': ...}`: `None` for NONE, `u64::MAX`
    /// for ALL; partitions of at most this many rows go in the row cache.
    pub rows_per_partition: Option<u64>,
    /// `tombstone_gc`'s mode: when compaction may purge a tombstone.
    pub tombstone_gc: crate::repaired::TombstoneGc,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            compression: crate::sstable::Compression::Lz4,
            chunk_length_bytes: 16 * 1024,
            bloom_filter_fp_chance: 0.01,
            gc_grace_seconds: 864000,
            strategy: Default::default(),
            auto_compaction: true,
            header: Default::default(),
            dropped_columns: Vec::new(),
            cache_keys: true,
            timestamp_ordered: None,
            rows_per_partition: None,
            tombstone_gc: Default::default(),
        }
    }
}

/// One finished compaction, for `nodetool compactionhistory`.
#[derive(Debug, Clone)]
pub struct CompactionRecord {
    pub table_id: uuid::Uuid,
    pub finished_at_millis: i64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub input_partitions: u64,
    pub output_partitions: u64,
    pub inputs: usize,
}

/// A compaction in progress, for `nodetool compactionstats` and
/// `system_views.sstable_tasks`.
#[derive(Debug, Clone)]
pub struct CompactionProgress {
    pub table_id: uuid::Uuid,
    pub id: uuid::Uuid,
    /// Cassandra's `OperationType` name: "Compaction", "Major compaction",
    /// "Cleanup".
    pub kind: &'static str,
    /// The input SSTables, and the directory the output goes to.
    pub sstables: usize,
    pub target_directory: std::path::PathBuf,
    pub done_partitions: u64,
    pub total_partitions: u64,
    /// The inputs' data bytes.
    pub total_bytes: u64,
}

impl CompactionProgress {
    /// The input bytes compacted so far (Cassandra counts compaction
    /// progress in bytes read), from the partitions merged at the inputs'
    /// average partition size.
    pub fn completed_bytes(&self) -> u64 {
        if self.total_partitions == 0 {
            return 0;
        }
        (self.total_bytes as u128 * self.done_partitions.min(self.total_partitions) as u128
            / self.total_partitions as u128) as u64
    }
}

/// Why a memtable is flushed, as Cassandra's `FlushReason` names it in
/// "Enqueuing flush of ks.t, Reason: …".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushReason {
    CommitlogDirty,
    MemtableLimit,
    IndexBuildCompleted,
    InternallyForced,
    UserForced,
    Drain,
    Snapshot,
    Truncate,
    StreamsReceived,
    Anticompaction,
}

impl FlushReason {
    pub fn name(self) -> &'static str {
        match self {
            FlushReason::CommitlogDirty => "COMMITLOG_DIRTY",
            FlushReason::MemtableLimit => "MEMTABLE_LIMIT",
            FlushReason::IndexBuildCompleted => "INDEX_BUILD_COMPLETED",
            FlushReason::InternallyForced => "INTERNALLY_FORCED",
            FlushReason::UserForced => "USER_FORCED",
            FlushReason::Drain => "DRAIN",
            FlushReason::Snapshot => "SNAPSHOT",
            FlushReason::Truncate => "TRUNCATE",
            FlushReason::StreamsReceived => "STREAMS_RECEIVED",
            FlushReason::Anticompaction => "ANTICOMPACTION",
        }
    }
}

/// What a read sees of a table: its memtables or not, and its SSTables or
/// those `sstables` keeps (incremental repair and streaming read one repair
/// set at a time).
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    pub memtables: bool,
    pub sstables: Option<&'a dyn Fn(&SSTableReader) -> bool>,
}

impl Sources<'_> {
    /// Everything: what a query reads.
    pub const ALL: Sources<'static> = Sources {
        memtables: true,
        sstables: None,
    };
}

/// `disk_failure_policy`, Cassandra's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFailurePolicy {
    /// Exit the process.
    Die,
    /// Like `stop`, also for errors at start-up.
    StopParanoid,
    /// A commit log or disk error stops serving clients; the node stays up
    /// for inspection. A corrupt SSTable fails the reads that meet it.
    Stop,
    /// Reads that meet a corrupt SSTable fail; at start-up an unreadable
    /// SSTable is set aside in `quarantine/` and the rest is served.
    BestEffort,
    /// Fail the request and carry on.
    Ignore,
}

/// `commit_failure_policy`, Cassandra's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitFailurePolicy {
    Die,
    Stop,
    /// Writes fail; reads go on.
    StopCommit,
    Ignore,
}

/// Applies the failure policies; `stop` tells the node to stop its transports.
pub struct FailureHandler {
    pub disk: DiskFailurePolicy,
    pub commit: CommitFailurePolicy,
    pub stop: tokio::sync::watch::Sender<bool>,
    /// Corrupt SSTables met and commit log failures since start (Cassandra's
    /// `Storage` metric `Exceptions`).
    pub exceptions: crate::metrics::Counter,
}

impl FailureHandler {
    /// A corrupt SSTable was read while serving. As Cassandra's
    /// `handleCorruptSSTable`: the read that met it fails, always (answering
    /// without it would be answering wrong); `stop`, `best_effort` and
    /// `ignore` keep serving everything else, `stop_paranoid` stops the
    /// transports, `die` exits.
    fn corrupt_sstable(&self, e: StorageError) -> StorageError {
        self.exceptions.inc();
        tracing::error!("{e} (disk_failure_policy: {:?})", self.disk);
        match self.disk {
            DiskFailurePolicy::Stop | DiskFailurePolicy::BestEffort | DiskFailurePolicy::Ignore => {
                e
            }
            DiskFailurePolicy::StopParanoid => {
                tracing::error!("Stopping transports as disk_failure_policy is stop_paranoid");
                let _ = self.stop.send(true);
                e
            }
            DiskFailurePolicy::Die => {
                tracing::error!("disk_failure_policy is die: exiting");
                std::process::exit(3);
            }
        }
    }

    /// The commit log failed: writes cannot be made durable.
    fn commit_failed(&self, e: StorageError) -> StorageError {
        self.exceptions.inc();
        if e.is_disk_full() {
            // not a broken log (a partial entry was cut off): writes fail
            // with the reason and go on once space is freed
            tracing::error!("commit log: {e}; writes fail until space is freed");
            return e;
        }
        tracing::error!(
            "commit log failure: {e} (commit_failure_policy: {:?})",
            self.commit
        );
        match self.commit {
            CommitFailurePolicy::Stop => {
                let _ = self.stop.send(true);
            }
            CommitFailurePolicy::Die => {
                tracing::error!("commit_failure_policy is die: exiting");
                std::process::exit(3);
            }
            CommitFailurePolicy::StopCommit | CommitFailurePolicy::Ignore => {}
        }
        e
    }
}

/// SSTables in the order a read takes them: newest data first.
fn newest_first(sstables: &[Arc<SSTableReader>]) -> Arc<[Arc<SSTableReader>]> {
    let mut v = sstables.to_vec();
    v.sort_by_key(|s| std::cmp::Reverse(s.stats.max_timestamp));
    v.into()
}

/// The data of one table on this node (Cassandra's `ColumnFamilyStore`).
pub struct ColumnFamilyStore {
    pub table_id: uuid::Uuid,
    pub comparator: Arc<ClusteringComparator>,
    pub dir: PathBuf,
    pub options: RwLock<TableOptions>,
    /// Loaded by every write and read without a lock (see the engine's
    /// `tables`); switched under the engine's barrier.
    memtable: arc_swap::ArcSwap<Memtable>,
    flushing: RwLock<Vec<Arc<Memtable>>>,
    /// The live SSTables, oldest first; changed only through
    /// [`edit_sstables`](Self::edit_sstables).
    sstables: RwLock<Vec<Arc<SSTableReader>>>,
    /// The same SSTables as a read takes them, newest data first (by maximum
    /// timestamp): one shared list, replaced whole when the set changes
    /// (Cassandra's `View`), so that a read clones one pointer, not every
    /// SSTable's, and neither allocates nor sorts.
    newest_first: RwLock<Arc<[Arc<SSTableReader>]>>,
    next_generation: AtomicU64,
    /// Commit log entries of this table ending at or before this position are
    /// already in SSTables (or were truncated away).
    pub replay_after: AtomicU64,
    flush_lock: tokio::sync::Mutex<()>,
    compaction_lock: tokio::sync::Mutex<()>,
    /// Memtables flushed (Cassandra's `MemtableSwitchCount`) and the bytes
    /// their SSTables took (`BytesFlushed`).
    pub flushes: AtomicU64,
    pub bytes_flushed: crate::metrics::Counter,
    /// Bytes compactions of this table wrote (`CompactionBytesWritten`).
    pub compaction_bytes_written: crate::metrics::Counter,
    /// How many SSTables each read looked into (past the bloom filter and
    /// bounds: `nodetool tablehistograms`, `SSTablesPerReadHistogram`).
    pub sstables_per_read: crate::metrics::Histogram,
    /// Local read and write latencies in microseconds (a write: the memtable
    /// apply, as Cassandra's table metric); their counts are the table's
    /// local reads and writes.
    pub read_latency: crate::metrics::Timer,
    pub write_latency: crate::metrics::Timer,
    /// Partition range reads served by this replica (`RangeLatency`).
    pub range_latency: crate::metrics::Timer,
    /// Live rows and tombstones each read went through
    /// (`LiveScannedHistogram`, `TombstoneScannedHistogram`).
    pub live_scanned: crate::metrics::Histogram,
    pub tombstones_scanned: crate::metrics::Histogram,
    key_cache: Arc<KeyCache>,
    row_cache: Arc<RowCache>,
    /// Leveled compaction: the last token pushed down from each level.
    last_compacted: Mutex<HashMap<u32, i64>>,
    /// Memtables whose flush failed (with the commit log position they
    /// cover), written again before any newer one.
    failed_flushes: Mutex<Vec<(Arc<Memtable>, u64)>>,
    failures: Arc<FailureHandler>,
    pool: Arc<MemtablePool>,
    /// When each range was last repaired (`tombstone_gc` mode `repair`).
    repaired: Mutex<crate::repaired::RepairedRanges>,
    /// An index's store while the index is built from its base table's
    /// data (it is not listed in `system."IndexInfo"` until done).
    pub building: std::sync::atomic::AtomicBool,
}

impl ColumnFamilyStore {
    fn open(
        table_id: uuid::Uuid,
        comparator: Arc<ClusteringComparator>,
        dir: PathBuf,
        cache: Arc<ChunkCache>,
        caches: (Arc<KeyCache>, Arc<RowCache>),
        failures: Arc<FailureHandler>,
        pool: Arc<MemtablePool>,
    ) -> Result<Self, StorageError> {
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        let mut sstables = Vec::new();
        let mut replay_after = read_truncation(&dir);
        crate::lifecycle::recover(&dir)?;
        let gens = list_generations(&dir)?;
        for g in &gens {
            match SSTableReader::open(&dir, *g, comparator.clone(), cache.clone()) {
                Ok(r) => {
                    replay_after = replay_after.max(r.stats.commitlog_position);
                    // no incremental repair session outlives a restart of its
                    // participant: what it had set aside is unrepaired again
                    // (the safe side; Cassandra fails such sessions too), so
                    // compaction takes it again
                    if let RepairState::Pending(session) = r.repair_state() {
                        tracing::info!(
                            "SSTable {} was pending in repair session {session}, which did not finish: unrepaired again",
                            r.generation
                        );
                        r.set_repair_state(RepairState::Unrepaired)?;
                    }
                    sstables.push(Arc::new(r));
                }
                Err(e @ StorageError::CorruptSSTable { .. })
                    if failures.disk == DiskFailurePolicy::BestEffort
                        || failures.disk == DiskFailurePolicy::Ignore =>
                {
                    // never silently: the error names the file; the SSTable is set aside
                    tracing::error!(
                        "{e}; not loading it (disk_failure_policy: {:?})",
                        failures.disk
                    );
                    let q = dir.join("quarantine");
                    let _ = std::fs::create_dir_all(&q);
                    for c in [
                        "TOC.txt",
                        "Data.db",
                        "Index.db",
                        "Filter.db",
                        "Statistics.db",
                    ] {
                        let _ = std::fs::rename(
                            crate::sstable::component_path(&dir, *g, c),
                            crate::sstable::component_path(&q, *g, c),
                        );
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(ColumnFamilyStore {
            table_id,
            comparator,
            options: RwLock::new(TableOptions::default()),
            memtable: arc_swap::ArcSwap::from_pointee(Memtable::in_pool(pool.clone())),
            flushing: RwLock::new(Vec::new()),
            newest_first: RwLock::new(newest_first(&sstables)),
            sstables: RwLock::new(sstables),
            next_generation: AtomicU64::new(gens.last().copied().unwrap_or(0) + 1),
            replay_after: AtomicU64::new(replay_after),
            flush_lock: tokio::sync::Mutex::new(()),
            compaction_lock: tokio::sync::Mutex::new(()),
            flushes: AtomicU64::new(0),
            bytes_flushed: Default::default(),
            compaction_bytes_written: Default::default(),
            sstables_per_read: Default::default(),
            read_latency: Default::default(),
            write_latency: Default::default(),
            range_latency: Default::default(),
            live_scanned: Default::default(),
            tombstones_scanned: Default::default(),
            key_cache: caches.0,
            row_cache: caches.1,
            last_compacted: Mutex::new(HashMap::new()),
            failed_flushes: Mutex::new(Vec::new()),
            failures,
            pool,
            repaired: Mutex::new(crate::repaired::RepairedRanges::load(&dir)),
            building: std::sync::atomic::AtomicBool::new(false),
            dir,
        })
    }

    /// Records that a repair which started at `at` (seconds) has made
    /// `ranges` (`(start, end]`) consistent across the replicas: tombstones
    /// deleted before `at` in them may be purged under `tombstone_gc`
    /// mode `repair`.
    pub fn mark_repaired(&self, ranges: &[(i64, i64)], at: i32) -> Result<(), StorageError> {
        self.repaired
            .lock()
            .mark(&self.dir, ranges, at)
            .map_err(|e| StorageError::Io {
                path: self.dir.display().to_string(),
                source: e,
            })
    }

    /// The `gc_before` of a partition at `token`: tombstones deleted before
    /// it may be purged (by `tombstone_gc`'s mode; `now` in seconds).
    pub fn gc_before(&self, opts: &TableOptions, now: i32, token: Option<i64>) -> i32 {
        use crate::repaired::TombstoneGc;
        match opts.tombstone_gc {
            TombstoneGc::Timeout => now.saturating_sub(opts.gc_grace_seconds),
            TombstoneGc::Disabled => i32::MIN,
            TombstoneGc::Immediate => now.saturating_add(1),
            TombstoneGc::Repair => {
                let r = self.repaired.lock();
                match token {
                    Some(t) => r.repaired_at(t),
                    None => r.repaired_everywhere_at(),
                }
            }
        }
    }

    fn apply(&self, m: Mutation, now: i32) {
        self.apply_to(&self.memtable.load(), m, now);
    }

    /// Applies to `mt`: the memtable that was current when the write was
    /// logged, which a flush waits for (see `Memtable::begin_write`).
    fn apply_to(&self, mt: &Memtable, m: Mutation, now: i32) {
        let started = sibyl_metrics::Instant::now();
        let key = self.row_cache.enabled().then(|| m.key.key.clone());
        mt.apply(m, now);
        if let Some(k) = key {
            // after the memtable has the write, so a reader never caches older data
            self.row_cache.invalidate(self.table_id, &k);
        }
        self.write_latency.record_elapsed(started);
    }

    /// The partition fragment merged from every source, unresolved (call
    /// `Partition::resolve` to apply tombstones and expiry).
    ///
    /// Memtables are read first, then SSTables from the newest data down.
    /// An SSTable is skipped when its clustering bounds miss every slice, or
    /// when everything in it is older than a partition deletion already seen
    /// (Cassandra's early stop).
    pub fn read(
        &self,
        key: &DecoratedKey,
        slices: Option<&[Slice]>,
    ) -> Result<Option<Partition>, StorageError> {
        let started = sibyl_metrics::Instant::now();
        let rows_per_partition = self.options.read().rows_per_partition;
        let r = match rows_per_partition {
            Some(limit) if self.row_cache.enabled() => {
                self.read_through_row_cache(key, slices, limit)
            }
            _ => self.read_sources(key, slices),
        };
        self.read_latency.record_elapsed(started);
        r
    }

    /// A read served by the row cache, or one that fills it with the whole
    /// partition (when it has at most `limit` rows).
    fn read_through_row_cache(
        &self,
        key: &DecoratedKey,
        slices: Option<&[Slice]>,
        limit: u64,
    ) -> Result<Option<Partition>, StorageError> {
        let sliced = |p: &Partition| {
            let mut out = p.sliced(slices);
            let dropped = &self.options.read().dropped_columns;
            if !dropped.is_empty() {
                out.purge_dropped(dropped);
            }
            out
        };
        match self.row_cache.lookup(self.table_id, &key.key) {
            RowLookup::Hit(p) => {
                sibyl_tracing::trace(|| "Row cache hit");
                Ok(Some(sliced(&p)))
            }
            RowLookup::Busy => self.read_sources(key, slices),
            RowLookup::Miss(ticket) => {
                sibyl_tracing::trace(|| "Row cache miss");
                let whole = self.read_sources(key, None);
                let keep = match &whole {
                    Ok(Some(p)) if p.rows.len() as u64 <= limit => Some(Arc::new(p.clone())),
                    _ => None,
                };
                self.row_cache.fill(self.table_id, &key.key, ticket, keep);
                Ok(whole?.map(|p| sliced(&p)))
            }
        }
    }

    fn read_sources(
        &self,
        key: &DecoratedKey,
        slices: Option<&[Slice]>,
    ) -> Result<Option<Partition>, StorageError> {
        self.read_from(key, slices, Sources::ALL)
    }

    /// A partition as `sources` hold it (a repair set, for incremental
    /// repair and streaming; everything, for a read).
    pub fn read_from(
        &self,
        key: &DecoratedKey,
        slices: Option<&[Slice]>,
        sources: Sources,
    ) -> Result<Option<Partition>, StorageError> {
        // the clock is read when a second source is merged in: a read that
        // finds one source (the memtable, most often) does not need it
        let now = std::cell::OnceCell::new();
        let mut out: Option<Partition> = None;
        let merge = |p: Partition, out: &mut Option<Partition>| match out {
            Some(o) => o.merge(p, *now.get_or_init(now_in_seconds)),
            None => *out = Some(p),
        };
        if sources.memtables {
            if let Some(p) = self.memtable.load().read(key, slices) {
                merge(p, &mut out);
            }
            for m in self.flushing.read().iter() {
                if let Some(p) = m.read(key, slices) {
                    merge(p, &mut out);
                }
            }
        }
        sibyl_tracing::trace(|| "Acquiring sstable references");
        // rows named by their whole clustering: Cassandra reads those in
        // timestamp order, and its trace says so (looked at only when traced)
        let whole_names = |sl: &[Slice]| {
            !sl.is_empty()
                && sl.iter().all(|(a, b)| {
                    a.values.len() == self.comparator.types.len() && a.values == b.values
                })
        };
        let by_name = sibyl_tracing::is_tracing() && slices.is_some_and(whole_names);
        if by_name {
            sibyl_tracing::trace(|| "Merging memtable contents");
        }
        let newest_first = self.newest_first.read().clone();
        let sstables = newest_first
            .iter()
            .filter(|s| sources.sstables.is_none_or(|keep| keep(s)));
        let mut touched = 0u64;
        let mut skipped = 0usize;
        // (the options' lock is not held across the SSTable reads)
        let (cache_keys, timestamp_ordered) = {
            let o = self.options.read();
            (o.cache_keys, o.timestamp_ordered.clone())
        };
        let kc = cache_keys
            .then_some(self.key_cache.as_ref())
            .filter(|k| k.enabled());
        // a read of whole rows by name, of every source: done once the rows
        // found are newer, row marker and every column, than anything left
        let names = timestamp_ordered.as_deref().filter(|_| {
            sources.sstables.is_none()
                && match slices {
                    None => self.comparator.types.is_empty(),
                    Some(sl) => whole_names(sl),
                }
        });
        for s in sstables {
            let deleted_at = out
                .as_ref()
                .map(|p| p.deletion.marked_for_delete_at)
                .unwrap_or(i64::MIN);
            if s.stats.max_timestamp < deleted_at {
                // this and every later SSTable hold only data the deletion shadows
                break;
            }
            if let (Some(columns), Some(p)) = (names, &out) {
                let wanted = slices.map_or(1, |sl| sl.len());
                if p.rows.len() == wanted
                    && p.rows
                        .values()
                        .all(|r| newer_than(r, columns, s.stats.max_timestamp))
                {
                    // this and every later SSTable hold only older data
                    break;
                }
            }
            if let Some(sl) = slices {
                if !s.intersects(sl) {
                    skipped += 1;
                    continue;
                }
            }
            if !s.may_contain(key) {
                sibyl_tracing::trace(|| {
                    format!("Bloom filter allows skipping sstable {}", s.generation)
                });
                continue;
            }
            touched += 1;
            match s.read_filtered(key, slices, kc) {
                Ok(Some(p)) => merge(p, &mut out),
                Ok(None) => {}
                Err(e @ StorageError::CorruptSSTable { .. }) => {
                    return Err(self.failures.corrupt_sstable(e));
                }
                Err(e) => return Err(e),
            }
        }
        self.sstables_per_read.record(touched);
        if !by_name {
            sibyl_tracing::trace(|| {
                format!(
                    "Skipped {skipped}/{} non-slice-intersecting sstables, included 0 due to tombstones",
                    newest_first
                        .iter()
                        .filter(|s| sources.sstables.is_none_or(|keep| keep(s)))
                        .count()
                )
            });
            sibyl_tracing::trace(|| format!("Merged data from memtables and {touched} sstables"));
        }
        let dropped = &self.options.read().dropped_columns;
        if let (Some(p), false) = (&mut out, dropped.is_empty()) {
            p.purge_dropped(dropped);
        }
        Ok(out)
    }

    /// Partition keys in token order after `after` (or from `start_token`), up
    /// to `end_token`, at most `limit`, merged over every source.
    pub fn keys(
        &self,
        after: Option<&DecoratedKey>,
        start_token: i64,
        end_token: i64,
        limit: usize,
    ) -> Result<Vec<DecoratedKey>, StorageError> {
        self.keys_from(after, start_token, end_token, limit, Sources::ALL)
    }

    /// [`Self::keys`] of `sources` only.
    pub fn keys_from(
        &self,
        after: Option<&DecoratedKey>,
        start_token: i64,
        end_token: i64,
        limit: usize,
        sources: Sources,
    ) -> Result<Vec<DecoratedKey>, StorageError> {
        let mut all = Vec::new();
        if sources.memtables {
            all = self
                .memtable
                .load()
                .keys(after, start_token, end_token, limit);
            for m in self.flushing.read().iter() {
                all.extend(m.keys(after, start_token, end_token, limit));
            }
        }
        // the list is copied: reading the index blocks under the lock would
        // hold back a flush or compaction publishing its SSTables, and every
        // read queued behind that
        for s in self.sstables().iter() {
            if sources.sstables.is_none_or(|keep| keep(s)) {
                all.extend(s.keys(after, start_token, end_token, limit)?);
            }
        }
        all.sort();
        all.dedup();
        all.truncate(limit);
        Ok(all)
    }

    /// Memtables switched out and not yet written to SSTables.
    pub fn pending_flushes(&self) -> usize {
        self.flushing.read().len()
    }

    pub fn memtable_bytes(&self) -> usize {
        self.memtable.load().live_bytes()
    }

    /// Partitions in the SSTables and memtables (an estimate: a partition in
    /// several of them counts once per each).
    pub fn estimated_partitions(&self) -> u64 {
        let on_disk: u64 = self
            .sstables
            .read()
            .iter()
            .map(|s| s.stats.partitions)
            .sum();
        let flushing: usize = self
            .flushing
            .read()
            .iter()
            .map(|m| m.partition_count())
            .sum();
        on_disk + (flushing + self.memtable.load().partition_count()) as u64
    }

    /// The keyspace and table names, from the table's directory
    /// (`<keyspace>/<table>-<id>`), for log lines.
    pub fn names(&self) -> (String, String) {
        let name = |p: Option<&Path>| {
            p.and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let dir = name(Some(&self.dir));
        let table = dir
            .rsplit_once('-')
            .map(|(t, _)| t.to_string())
            .unwrap_or(dir);
        (name(self.dir.parent()), table)
    }

    pub fn sstable_count(&self) -> usize {
        self.sstables.read().len()
    }

    pub fn live_disk_bytes(&self) -> u64 {
        self.sstables.read().iter().map(|s| s.size_bytes()).sum()
    }

    /// The SSTables, oldest first.
    pub fn sstables(&self) -> Vec<Arc<SSTableReader>> {
        self.sstables.read().clone()
    }

    /// Changes the set of live SSTables, and the reads' view of it with it
    /// (under the same lock: a read never sees one without the other).
    fn edit_sstables<R>(&self, f: impl FnOnce(&mut Vec<Arc<SSTableReader>>) -> R) -> R {
        let mut ss = self.sstables.write();
        let r = f(&mut ss);
        *self.newest_first.write() = newest_first(&ss);
        r
    }

    /// Publishes what a compaction (or a rewrite) wrote in place of its
    /// inputs, and deletes the inputs' files.
    fn replace_sstables(&self, inputs: &[Arc<SSTableReader>], outputs: Vec<SSTableReader>) {
        let gone: std::collections::HashSet<u64> = inputs.iter().map(|s| s.generation).collect();
        self.edit_sstables(|ss| {
            ss.retain(|s| !gone.contains(&s.generation));
            ss.extend(outputs.into_iter().map(Arc::new));
            ss.sort_by_key(|s| s.generation);
        });
        for s in inputs {
            s.delete_files();
        }
    }

    /// The SSTables of one repair set.
    pub fn sstables_in(&self, state: RepairState) -> Vec<Arc<SSTableReader>> {
        self.sstables
            .read()
            .iter()
            .filter(|s| s.repair_state() == state)
            .cloned()
            .collect()
    }

    /// The data bytes of the repaired, unrepaired and pending SSTables
    /// (Cassandra's `BytesRepaired`, `BytesUnrepaired`, `BytesPendingRepair`).
    pub fn repair_bytes(&self) -> (u64, u64, u64) {
        let (mut repaired, mut unrepaired, mut pending) = (0, 0, 0);
        for s in self.sstables.read().iter() {
            *match s.repair_state() {
                RepairState::Repaired(_) => &mut repaired,
                RepairState::Pending(_) => &mut pending,
                RepairState::Unrepaired => &mut unrepaired,
            } += s.stats.data_bytes;
        }
        (repaired, unrepaired, pending)
    }

    /// The share of the SSTables' data that is repaired, in percent
    /// (Cassandra's `PercentRepaired`: 100 for a table with no data).
    pub fn percent_repaired(&self) -> f64 {
        let (repaired, unrepaired, pending) = self.repair_bytes();
        match repaired + unrepaired + pending {
            0 => 100.0,
            total => repaired as f64 * 100.0 / total as f64,
        }
    }

    /// Hard-links the current SSTables into `snapshots/<tag>/`.
    pub fn snapshot(&self, tag: &str) -> Result<usize, StorageError> {
        check_snapshot_name(tag).map_err(StorageError::Invalid)?;
        let target = self.dir.join("snapshots").join(tag);
        let ss = self.sstables();
        for s in &ss {
            s.link_into(&target)?;
        }
        std::fs::create_dir_all(&target).map_err(|e| StorageError::Io {
            path: target.display().to_string(),
            source: e,
        })?;
        Ok(ss.len())
    }

    /// Snapshot tags with their sizes (bytes of all files, bytes no longer in the live set).
    pub fn snapshots(&self) -> Vec<(String, u64, u64)> {
        let mut out = Vec::new();
        let live: std::collections::HashSet<u64> =
            self.sstables().iter().map(|s| s.generation).collect();
        let Ok(rd) = std::fs::read_dir(self.dir.join("snapshots")) else {
            return out;
        };
        for e in rd.flatten() {
            let tag = e.file_name().to_string_lossy().to_string();
            let (mut total, mut true_size) = (0, 0);
            if let Ok(files) = std::fs::read_dir(e.path()) {
                for f in files.flatten() {
                    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                    total += len;
                    let name = f.file_name().to_string_lossy().to_string();
                    let gen: Option<u64> = name
                        .strip_prefix("sb-")
                        .and_then(|r| r.split('-').next())
                        .and_then(|g| g.parse().ok());
                    if !gen.map(|g| live.contains(&g)).unwrap_or(false) {
                        true_size += len;
                    }
                }
            }
            out.push((tag, total, true_size));
        }
        out.sort();
        out
    }

    /// Removes one snapshot, or all when `tag` is None. The tag is looked up
    /// among the snapshots on disk, never joined into a path as given (`..`
    /// would name the table's own directory).
    pub fn clear_snapshot(&self, tag: Option<&str>) -> usize {
        let base = self.dir.join("snapshots");
        self.snapshots()
            .into_iter()
            .map(|s| s.0)
            .filter(|t| tag.is_none_or(|want| want == t))
            .filter(|t| std::fs::remove_dir_all(base.join(t)).is_ok())
            .count()
    }
}

/// Whether `row` is newer than `timestamp` in everything a read by name
/// looks at (Cassandra's `canRemoveRow`): its row marker and every one of
/// `columns`, so that no data written at or before `timestamp` can change it.
fn newer_than(row: &sibyl_db::Row, columns: &[String], timestamp: i64) -> bool {
    row.liveness.is_some_and(|l| l.timestamp > timestamp)
        && columns.iter().all(|c| {
            matches!(row.cells.get(c), Some(sibyl_db::ColumnData::Simple(cell)) if cell.timestamp > timestamp)
        })
}

/// A snapshot name becomes a directory: refused as Cassandra 5.0.4 refuses
/// it (empty, or with a `/`), and `.`/`..`, which name directories that
/// already exist.
pub fn check_snapshot_name(tag: &str) -> Result<(), String> {
    if tag.is_empty() {
        return Err("You must supply a snapshot name.".into());
    }
    if tag.contains('/') {
        return Err("Snapshot name cannot contain /".into());
    }
    if tag == "." || tag == ".." || tag.contains('\0') {
        return Err(format!("Snapshot {tag} already exists."));
    }
    Ok(())
}

fn read_truncation(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("truncated_at"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Pending compactions of a table past which its compactions stop giving
/// way to requests (see `StorageEngine::compaction_priority`): with
/// size-tiered's threshold of 4, some 20 SSTables.
pub(crate) const COMPACTION_BACKLOG_PRESSING: usize = 4;

/// Storage settings from the node configuration.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    pub data_directories: Vec<PathBuf>,
    pub commitlog_directory: PathBuf,
    pub sync: SyncMode,
    pub segment_size_bytes: u64,
    /// Memory for all memtables (`memtable_heap_space`): writers wait while
    /// the memtables, flushing ones included, hold more.
    pub memtable_space_bytes: usize,
    /// The largest memtable is flushed when all live memtables together hold
    /// this much (Cassandra's `memtable_cleanup_threshold` of the space).
    pub memtable_flush_threshold_bytes: usize,
    /// All tables are flushed when the commit log holds this much.
    pub commitlog_total_space_bytes: u64,
    /// Bound of the cache of decompressed SSTable chunks.
    pub chunk_cache_bytes: usize,
    /// Bounds of the key cache and the row cache (0 disables).
    pub key_cache_bytes: u64,
    pub row_cache_bytes: u64,
    pub disk_failure_policy: DiskFailurePolicy,
    pub commit_failure_policy: CommitFailurePolicy,
    /// Snapshot a table before TRUNCATE and DROP (`auto_snapshot`).
    pub auto_snapshot: bool,
    /// Pass over damaged commit log entries at start-up, loudly
    /// (`-Dcassandra.commitlog.ignorereplayerrors=true`).
    pub ignore_replay_errors: bool,
    /// Background flushes of a table wait while it has more pending
    /// compactions than this: memtables then fill, and writes are held back
    /// and refused as Overloaded with the reason, instead of SSTables (and
    /// open files) piling up without bound. 0 turns it off.
    pub compaction_backlog_limit: usize,
    /// Compactions running at once across all tables.
    pub concurrent_compactors: usize,
    /// `compaction_throughput` in bytes per second (0: unthrottled).
    pub compaction_throughput_bytes: u64,
}

impl StorageConfig {
    /// A small engine under `dir` (data in `dir/data`, commit log in
    /// `dir/commitlog`), synced per write, without caches or snapshots: what
    /// tests that run several nodes in one process use.
    pub fn small(dir: &std::path::Path) -> StorageConfig {
        StorageConfig {
            data_directories: vec![dir.join("data")],
            commitlog_directory: dir.join("commitlog"),
            sync: SyncMode::Batch,
            segment_size_bytes: 1 << 20,
            memtable_space_bytes: 64 << 20,
            memtable_flush_threshold_bytes: 16 << 20,
            commitlog_total_space_bytes: 64 << 20,
            chunk_cache_bytes: 1 << 20,
            key_cache_bytes: 0,
            row_cache_bytes: 0,
            disk_failure_policy: DiskFailurePolicy::Stop,
            commit_failure_policy: CommitFailurePolicy::Stop,
            auto_snapshot: false,
            ignore_replay_errors: false,
            compaction_backlog_limit: 64,
            concurrent_compactors: 1,
            compaction_throughput_bytes: 0,
        }
    }
}

/// That a write now would not wait ([`StorageEngine::applies_at_once`]).
#[derive(Debug, Clone, Copy)]
pub struct AtOnce(());

/// A write logged for a memtable and not yet applied to it; ended when
/// dropped, even when the write's future is (a flush waits for it).
struct PendingWrite(Arc<Memtable>);

impl Drop for PendingWrite {
    fn drop(&mut self) {
        self.0.end_write();
    }
}

/// A flush that failed: its error, when, and whether a flush has succeeded
/// since.
struct FlushFailure {
    error: String,
    at: std::time::Instant,
    recovered: bool,
}

thread_local! {
    /// A mutation encoded for the commit log, the buffer kept by the
    /// thread for the next one (every write encodes one).
    static ENCODED: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(256));
}

/// Capacity beyond which [`ENCODED`] is not kept (one large mutation must
/// not hold its size for the thread's life).
const ENCODED_KEPT_BYTES: usize = 1 << 20;

fn log_not_started() -> StorageError {
    StorageError::CommitLogStopped("commit log not started".into())
}

/// All tables of the node and the commit log in front of them.
pub struct StorageEngine {
    pub config: StorageConfig,
    /// The commit log and the tables are read by every write on every
    /// event loop: loaded without a lock or a count on a cache line both
    /// cores write (arc-swap); a change of the tables replaces the map
    /// with a changed copy (`rcu`).
    commitlog: arc_swap::ArcSwapOption<CommitLog>,
    tables: arc_swap::ArcSwap<FastHashMap<uuid::Uuid, Arc<ColumnFamilyStore>>>,
    /// Held for reading across "append to the log, apply to the memtable";
    /// a memtable switch holds it for writing, so the position it records
    /// splits the log exactly between the old and the new memtable.
    barrier: RwLock<()>,
    /// Why background flushes are being held (a compaction backlog).
    stall: Mutex<Option<String>>,
    /// The memory of every table's memtables.
    pool: Arc<MemtablePool>,
    cache: Arc<ChunkCache>,
    pub key_cache: Arc<KeyCache>,
    pub row_cache: Arc<RowCache>,
    flush_pending: AtomicBool,
    /// Signalled when a background flush ends (writers waiting on memory).
    flushed: tokio::sync::Notify,
    /// The last flush failure, and when; kept after a flush succeeds (then
    /// `recovered`): a write held back past its deadline names a failure
    /// that happened during its wait.
    flush_failure: Mutex<Option<FlushFailure>>,
    /// Tables dropped: their commit log entries are never needed again.
    dropped: Mutex<std::collections::HashSet<uuid::Uuid>>,
    pub compaction_history: Mutex<std::collections::VecDeque<CompactionRecord>>,
    pub compactions_running: Mutex<Vec<CompactionProgress>>,
    /// Bytes compactions read, compactions finished and compactions that
    /// failed for lack of disk space since start (Cassandra's `Compaction` metrics
    /// `BytesCompacted`, `TotalCompactionsCompleted` and
    /// `CompactionsAborted`).
    pub bytes_compacted: crate::metrics::Counter,
    pub compactions_completed: crate::metrics::Meter,
    pub compactions_aborted: crate::metrics::Counter,
    /// `compaction_throughput` in bytes per second (0: unthrottled).
    pub compaction_throughput_bytes: AtomicU64,
    failures: Arc<FailureHandler>,
    compactors: tokio::sync::Semaphore,
    /// Becomes true when a failure policy says to stop serving clients.
    pub stopped: tokio::sync::watch::Receiver<bool>,
    /// The runtime the engine was made on (the node's): flushes and
    /// compactions a write starts run there, not on the client connection's
    /// event loop that happened to trigger them.
    background: Option<tokio::runtime::Handle>,
}

impl StorageEngine {
    /// Runs `f` on the engine's runtime.
    fn spawn_background<F>(&self, f: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        match &self.background {
            Some(h) => {
                h.spawn(f);
            }
            None => {
                tokio::spawn(f);
            }
        }
    }

    pub fn new(config: StorageConfig) -> Result<Arc<Self>, StorageError> {
        for d in &config.data_directories {
            std::fs::create_dir_all(d).map_err(|e| StorageError::Io {
                path: d.display().to_string(),
                source: e,
            })?;
        }
        let cache = ChunkCache::new(config.chunk_cache_bytes);
        let (key_cache, row_cache) = (
            KeyCache::new(config.key_cache_bytes),
            RowCache::new(config.row_cache_bytes),
        );
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let failures = Arc::new(FailureHandler {
            disk: config.disk_failure_policy,
            commit: config.commit_failure_policy,
            stop,
            exceptions: Default::default(),
        });
        Ok(Arc::new(StorageEngine {
            compactors: tokio::sync::Semaphore::new(config.concurrent_compactors.max(1)),
            compaction_throughput_bytes: AtomicU64::new(config.compaction_throughput_bytes),
            failures,
            stopped,
            background: tokio::runtime::Handle::try_current().ok(),
            config,
            commitlog: arc_swap::ArcSwapOption::empty(),
            tables: arc_swap::ArcSwap::from_pointee(FastHashMap::default()),
            barrier: RwLock::new(()),
            stall: Mutex::new(None),
            pool: Arc::new(MemtablePool::default()),
            cache,
            key_cache,
            row_cache,
            flush_pending: AtomicBool::new(false),
            flushed: tokio::sync::Notify::new(),
            flush_failure: Mutex::new(None),
            dropped: Mutex::new(Default::default()),
            compaction_history: Mutex::new(Default::default()),
            compactions_running: Mutex::new(Vec::new()),
            bytes_compacted: Default::default(),
            compactions_completed: Default::default(),
            compactions_aborted: Default::default(),
        }))
    }

    pub fn data_directory(&self) -> &Path {
        self.config
            .data_directories
            .first()
            .map(|p| p.as_path())
            .unwrap_or(Path::new("data"))
    }

    /// Registers a table (at startup or on CREATE TABLE) and opens its SSTables.
    pub fn add_table(
        &self,
        table_id: uuid::Uuid,
        comparator: Arc<ClusteringComparator>,
        dir: PathBuf,
    ) -> Result<Arc<ColumnFamilyStore>, StorageError> {
        if let Some(t) = self.tables.load().get(&table_id) {
            return Ok(t.clone());
        }
        let caches = (self.key_cache.clone(), self.row_cache.clone());
        let cfs = Arc::new(ColumnFamilyStore::open(
            table_id,
            comparator,
            dir,
            self.cache.clone(),
            caches,
            self.failures.clone(),
            self.pool.clone(),
        )?);
        // an id can come back (an index dropped and created again under its name)
        self.dropped.lock().remove(&table_id);
        let mut t = cfs.clone();
        self.tables.rcu(|tables| {
            let mut tables = FastHashMap::clone(tables);
            // one registered meanwhile by another caller wins
            t = tables
                .entry(table_id)
                .or_insert_with(|| cfs.clone())
                .clone();
            tables
        });
        Ok(t)
    }

    /// Forgets a table and deletes its files (DROP TABLE); with
    /// `auto_snapshot` its SSTables are kept in a snapshot first.
    pub fn drop_table(&self, table_id: uuid::Uuid) {
        self.row_cache.invalidate_table(table_id);
        // removed first, on a line of its own: the map's write guard would
        // otherwise live through the snapshot and the file deletions below,
        // and every read and write of every table waits on that map
        let mut removed = None;
        self.tables.rcu(|tables| {
            let mut tables = FastHashMap::clone(tables);
            removed = tables.remove(&table_id);
            tables
        });
        if let Some(t) = removed {
            if self.config.auto_snapshot {
                let tag = format!(
                    "dropped-{}",
                    sibyl_types::timeuuid::timestamp_micros_now() / 1000
                );
                if let Err(e) = t.snapshot(&tag) {
                    tracing::error!("auto snapshot before DROP failed: {e}");
                }
            }
            for s in t.sstables().iter() {
                s.delete_files();
            }
            let _ = std::fs::remove_file(t.dir.join("truncated_at"));
        }
        self.dropped.lock().insert(table_id);
    }

    pub fn table(&self, table_id: uuid::Uuid) -> Option<Arc<ColumnFamilyStore>> {
        self.tables.load().get(&table_id).cloned()
    }

    pub fn tables(&self) -> Vec<Arc<ColumnFamilyStore>> {
        self.tables.load().values().cloned().collect()
    }

    /// Replays the commit log into the memtables of the registered tables for
    /// which `only` holds, skipping what their SSTables already hold.
    pub fn replay_commitlog(
        &self,
        only: &dyn Fn(uuid::Uuid) -> bool,
    ) -> Result<(ReplayStats, Vec<(u64, uuid::Uuid)>), StorageError> {
        let dir = self.config.commitlog_directory.clone();
        let now = now_in_seconds();
        let mut dirty = Vec::new();
        let stats = commitlog::replay(&dir, self.config.ignore_replay_errors, |pos, entry| {
            match entry {
                Entry::Mutation(bytes) => {
                    let wanted = |id: uuid::Uuid| {
                        if !only(id) {
                            return None;
                        }
                        let t = self.table(id)?;
                        (pos > t.replay_after.load(Ordering::Relaxed)).then(|| t.comparator.clone())
                    };
                    if let Some(m) = decode_mutation(&bytes, &wanted)? {
                        if let Some(t) = self.table(m.table_id) {
                            dirty.push((commitlog::segment_of(pos), m.table_id));
                            t.apply(m, now);
                        }
                    }
                }
                Entry::Truncate { table_id, .. } => {
                    let table_id = sibyl_db::table_ids::canonical(table_id);
                    if only(table_id) {
                        if let Some(t) = self.table(table_id) {
                            if pos > t.replay_after.load(Ordering::Relaxed) {
                                t.memtable
                                    .store(Arc::new(Memtable::in_pool(t.pool.clone())));
                            }
                        }
                    }
                }
            }
            Ok(())
        })?;
        dirty.sort();
        dirty.dedup();
        Ok((stats, dirty))
    }

    /// Opens the commit log for new writes (after replay); `dirty` says which
    /// replayed segments hold unflushed data of which tables.
    pub fn start_commitlog(&self, dirty: &[(u64, uuid::Uuid)]) -> Result<(), StorageError> {
        let log = CommitLog::open(
            &self.config.commitlog_directory,
            self.config.sync,
            self.config.segment_size_bytes,
        )?;
        for (seg, t) in dirty {
            log.mark_dirty(*seg, *t);
        }
        self.commitlog.store(Some(log));
        Ok(())
    }

    fn log(&self) -> Result<Arc<CommitLog>, StorageError> {
        self.commitlog.load_full().ok_or_else(log_not_started)
    }

    /// Applies mutations durably: commit log, then memtables; waits for the
    /// sync the commit log mode requires, and flushes when memory says so.
    pub async fn apply(self: &Arc<Self>, mutations: Vec<Mutation>) -> Result<(), StorageError> {
        self.apply_admitted(mutations, None).await
    }

    /// [`apply`](Self::apply), refusing the write as overloaded when memtable
    /// memory holds it back for longer than `admission_timeout`.
    pub async fn apply_within(
        self: &Arc<Self>,
        mutations: Vec<Mutation>,
        admission_timeout: std::time::Duration,
    ) -> Result<(), StorageError> {
        self.apply_admitted(mutations, Some(admission_timeout))
            .await
    }

    async fn apply_admitted(
        self: &Arc<Self>,
        mutations: Vec<Mutation>,
        admission_timeout: Option<std::time::Duration>,
    ) -> Result<(), StorageError> {
        let log = self.log()?;
        self.admit(admission_timeout).await?;
        let now = now_in_seconds();
        let (last, held) = self.log_and_apply(&log, mutations, now)?;
        // the entries reached the OS as they were appended (a mapped
        // segment): acknowledged once durable as the sync mode says, at
        // once in periodic mode
        let durable = log.wait_durable(last).await;
        for (m, t, pending) in held {
            if durable.is_ok() {
                t.apply_to(&pending.0, m, now);
            }
        }
        durable.map_err(|e| self.failures.commit_failed(e))?;
        self.maybe_flush(&log);
        Ok(())
    }

    /// Whether a write now would be done at its first step, with nothing
    /// to wait for: the commit log is periodic (a write is acknowledged
    /// once appended) and the memtables have room ([`admit`](Self::admit)
    /// would not hold it back). Its proof is what
    /// [`apply_now`](Self::apply_now) takes.
    pub fn applies_at_once(&self) -> Option<AtOnce> {
        (matches!(self.config.sync, SyncMode::Periodic(_))
            && self.memtables_held_bytes() <= self.config.memtable_space_bytes)
            .then_some(AtOnce(()))
    }

    /// What the memtables hold, flushing ones included: past the memtable
    /// space a write is held back ([`admit`](Self::admit)).
    fn memtables_held_bytes(&self) -> usize {
        let (live, flushing) = self.memtable_usage();
        live + flushing
    }

    /// Asks the CPU for the memtable's cache line of each mutation's
    /// partition ([`Memtable::prefetch_token`]): a write's first step, so
    /// the miss overlaps the coordinator's work before the append.
    pub fn prefetch(&self, mutations: &[Mutation]) {
        let tables = self.tables.load();
        for m in mutations {
            if let Some(t) = tables.get(&m.table_id) {
                t.memtable.load().prefetch_token(m.key.token);
            }
        }
    }

    /// [`apply`](Self::apply) of a write [`applies_at_once`](Self::applies_at_once)
    /// said would not wait, done here: no future is made, moved into its
    /// callers' and polled (the nested futures of a local write were a
    /// tenth of its time, most of it copying them).
    pub fn apply_now(
        self: &Arc<Self>,
        mutations: Vec<Mutation>,
        _: AtOnce,
    ) -> Result<(), StorageError> {
        // loaded, not counted: the write is done before this returns
        let loaded = self.commitlog.load();
        let log = loaded.as_deref().ok_or_else(log_not_started)?;
        let (_, held) = self.log_and_apply(log, mutations, now_in_seconds())?;
        // periodic: nothing waits for a sync
        debug_assert!(held.is_empty());
        self.maybe_flush(log);
        Ok(())
    }

    /// Appends the mutations to the commit log, then applies them to their
    /// memtables; the last entry's position, and, with a synced commit log
    /// (batch, group), the writes still to apply once it is durable.
    fn log_and_apply(
        &self,
        log: &CommitLog,
        mutations: Vec<Mutation>,
        now: i32,
    ) -> Result<(u64, Vec<(Mutation, Arc<ColumnFamilyStore>, PendingWrite)>), StorageError> {
        let mut last = 0;
        // With a synced commit log (batch, group) a write becomes visible
        // only once durable, as in Cassandra: a reader must never see what
        // a crash then loses (at QUORUM, a stale read after the crash). It
        // goes to the memtable that was current when it was logged, and a
        // flush of that memtable waits for it.
        let visible_after_sync = !matches!(self.config.sync, SyncMode::Periodic(_));
        let mut held = Vec::new();
        let _g = self.barrier.read();
        // borrowed from the loaded map: no count taken on each table
        let tables = self.tables.load();
        // (nearly always one mutation: no allocation for its table)
        // (each table with its memtable: the barrier held, no memtable is
        // switched until the writes are applied)
        let mut targets = smallvec::SmallVec::<[_; 2]>::with_capacity(mutations.len());
        for m in &mutations {
            let t = tables
                .get(&m.table_id)
                .ok_or(StorageError::UnknownTable(m.table_id))?;
            let mt = t.memtable.load();
            // the memtable's miss on the partition overlaps the append
            mt.prefetch(&m.key);
            last = ENCODED
                .with(|buf| {
                    let mut buf = buf.borrow_mut();
                    buf.clear();
                    encode_mutation(m, &mut buf);
                    let appended = log.append_mutation(&buf, Some(m.table_id));
                    if buf.capacity() > ENCODED_KEPT_BYTES {
                        *buf = Vec::with_capacity(256);
                    }
                    appended
                })
                .map_err(|e| self.failures.commit_failed(e))?;
            targets.push((t, mt));
        }
        for (mut m, (t, mt)) in mutations.into_iter().zip(targets) {
            m.detach();
            if visible_after_sync {
                let mt = arc_swap::Guard::into_inner(mt);
                mt.begin_write();
                held.push((m, t.clone(), PendingWrite(mt)));
            } else {
                t.apply_to(&mt, m, now);
            }
        }
        Ok((last, held))
    }

    /// Applies mutations to memtables only (data regenerated at every start,
    /// such as the schema of the system keyspaces).
    pub fn apply_unlogged(&self, mutations: Vec<Mutation>) {
        let now = now_in_seconds();
        let _g = self.barrier.read();
        for m in mutations {
            if let Some(t) = self.table(m.table_id) {
                t.apply(m, now);
            }
        }
    }

    /// Bytes of the live memtables of all tables, and of those being flushed.
    fn memtable_usage(&self) -> (usize, usize) {
        self.pool.usage()
    }

    /// `bytes` of memtable as Cassandra's `MemoryUsage` prints them
    /// (memtables are on the heap in Cassandra's terms: nothing off-heap).
    fn memory_usage(&self, bytes: usize) -> String {
        let ratio = bytes as f64 / self.config.memtable_space_bytes.max(1) as f64;
        format!(
            "{} ({}%) on-heap, 0B (0%) off-heap",
            sibyl_types::pretty::memory(bytes as i64),
            sibyl_types::pretty::java_fixed(ratio * 100.0, 0)
        )
    }

    /// Cassandra's policy: when the live memtables together reach the cleanup
    /// threshold, the largest is flushed; when the commit log is over its
    /// space, every table with data is. A writer waits (back-pressure) while
    /// live and flushing memtables hold more than the whole memtable space.
    /// (`log`: the commit log the write went to, loaded already.)
    fn maybe_flush(self: &Arc<Self>, log: &CommitLog) {
        let (live, _) = self.memtable_usage();
        let log_full = log.total_bytes() > self.config.commitlog_total_space_bytes;
        if live >= self.config.memtable_flush_threshold_bytes || log_full {
            self.start_flush(log_full);
        }
    }

    /// Back-pressure before a write: waits while the memtables, flushing
    /// ones included, hold more than their space. When flushing fails (a
    /// full disk), the write is refused with the reason instead.
    async fn admit(
        self: &Arc<Self>,
        timeout: Option<std::time::Duration>,
    ) -> Result<(), StorageError> {
        let mut started: Option<std::time::Instant> = None;
        loop {
            let flushed = self.flushed.notified();
            let held = self.memtables_held_bytes();
            if held <= self.config.memtable_space_bytes {
                return Ok(());
            }
            let waited = started
                .get_or_insert_with(std::time::Instant::now)
                .elapsed();
            // a failing flush is the reason, whenever the wait ends: it is
            // looked at before the deadline (a late wake-up past the deadline
            // must not turn "the disk is full" into "still flushing")
            let failing = self.flush_error();
            if let Some((e, _)) = failing {
                // try again (at most every second): space may have been
                // freed; a write that may wait gives that retry its chance
                // (the error may be from before space was freed)
                self.start_flush(false);
                if timeout.is_none_or(|t| waited + std::time::Duration::from_millis(100) >= t) {
                    return Err(StorageError::WritesBlocked(format!(
                        "Cannot accept writes: memtables are full ({held} bytes) and cannot be flushed: {e}"
                    )));
                }
            }
            if let Some(t) = timeout.filter(|t| waited >= *t) {
                let failed_meanwhile = self
                    .flush_failure
                    .lock()
                    .as_ref()
                    .filter(|f| f.at.elapsed() <= waited)
                    .map(|f| format!("a flush failed meanwhile: {}", f.error));
                let why = self
                    .stall
                    .lock()
                    .clone()
                    .or(failed_meanwhile)
                    .unwrap_or_else(|| "are still flushing".into());
                return Err(StorageError::Overloaded(format!(
                    "Write held back for {} ms: memtables hold {} bytes, more than memtable_heap_space ({} bytes); {why}",
                    t.as_millis(),
                    held,
                    self.config.memtable_space_bytes
                )));
            }
            self.start_flush(false);
            let _ = tokio::time::timeout(std::time::Duration::from_millis(100), flushed).await;
        }
    }

    /// The last flush failure and when, unless a flush has succeeded since.
    fn flush_error(&self) -> Option<(String, std::time::Instant)> {
        self.flush_failure
            .lock()
            .as_ref()
            .filter(|f| !f.recovered)
            .map(|f| (f.error.clone(), f.at))
    }

    /// Flushes in the background the largest memtable (every non-empty one
    /// when the commit log is full), unless such a flush is already running.
    fn start_flush(self: &Arc<Self>, log_full: bool) {
        let failed_recently = self
            .flush_error()
            .is_some_and(|(_, at)| at.elapsed() < std::time::Duration::from_secs(1));
        if failed_recently {
            return;
        }
        if self.flush_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        self.spawn_background(async move {
            let tables: Vec<Arc<ColumnFamilyStore>> = if log_full {
                me.tables()
                    .into_iter()
                    .filter(|t| t.memtable_bytes() > 0 || !t.failed_flushes.lock().is_empty())
                    .collect()
            } else {
                let failed: Vec<_> = me
                    .tables()
                    .into_iter()
                    .filter(|t| !t.failed_flushes.lock().is_empty())
                    .collect();
                if failed.is_empty() {
                    me.tables()
                        .into_iter()
                        .max_by_key(|t| t.memtable_bytes())
                        .into_iter()
                        .collect()
                } else {
                    failed
                }
            };
            let reason = if log_full {
                FlushReason::CommitlogDirty
            } else {
                FlushReason::MemtableLimit
            };
            for t in tables {
                me.wait_for_compaction_backlog(&t).await;
                if let Err(e) = me.flush(&t, reason).await {
                    tracing::error!("flush of table {} failed: {e}", t.table_id);
                }
            }
            me.flush_pending.store(false, Ordering::Release);
            me.flushed.notify_waiters();
        });
    }

    /// Flushes a table's memtable to a new SSTable, then recycles the commit
    /// log segments nothing needs any more.
    pub async fn flush(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        reason: FlushReason,
    ) -> Result<Option<u64>, StorageError> {
        let _one = t.flush_lock.lock().await;
        // memtables whose flush failed go first, oldest first: the commit log
        // position a table is flushed to only ever covers written memtables
        loop {
            let failed = t.failed_flushes.lock().first().cloned();
            let Some((mt, position)) = failed else { break };
            self.write_memtable(t, &mt, position, RepairState::Unrepaired)
                .await?;
            t.failed_flushes.lock().remove(0);
        }
        let (old, position) = {
            let _g = self.barrier.write();
            let old = t.memtable.load_full();
            if old.partition_count() == 0 && old.pending_writes() == 0 {
                return Ok(None);
            }
            let position = self.log().map(|l| l.current_position()).unwrap_or(0);
            let (keyspace, table) = t.names();
            tracing::info!(
                "Enqueuing flush of {keyspace}.{table}, Reason: {}, Usage: {}",
                reason.name(),
                self.memory_usage(old.live_bytes())
            );
            old.mark_flushing();
            t.flushing.write().push(old.clone());
            t.memtable
                .store(Arc::new(Memtable::in_pool(t.pool.clone())));
            (old, position)
        };
        old.wait_for_writes().await;
        match self
            .write_memtable(t, &old, position, RepairState::Unrepaired)
            .await
        {
            Ok(g) => {
                // freeing a large memtable takes a while: not on a request thread
                tokio::task::spawn_blocking(move || drop(old));
                Ok(Some(g))
            }
            Err(e) => {
                // the memtable keeps serving reads and is written again by the
                // next flush; the commit log keeps its data until then
                t.failed_flushes.lock().push((old, position));
                Err(e)
            }
        }
    }

    /// Writes a switched-out memtable to a new SSTable and publishes it.
    async fn write_memtable(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        old: &Arc<Memtable>,
        position: u64,
        state: RepairState,
    ) -> Result<u64, StorageError> {
        let _running = crate::metrics::stages::MEMTABLE_FLUSH.start();
        let generation = t.next_generation.fetch_add(1, Ordering::Relaxed);
        let dir = t.dir.clone();
        let opts = t.options.read().clone();
        let cmp = t.comparator.clone();
        let cache = self.cache.clone();
        let mt = old.clone();
        let (keyspace, table) = t.names();
        // the node's own keyspaces are on Cassandra's LocalPartitioner,
        // whose range has no bounds to print
        let range = if matches!(keyspace.as_str(), "system" | "system_schema") {
            "[null, null)".to_string()
        } else {
            format!("[min({}), max({}))", i64::MIN, i64::MAX)
        };
        tracing::info!(
            "Writing Memtable-{table}@{}({} serialized bytes, {} ops, {}), flushed range = {range}",
            // an identity, as Java's hashCode
            (Arc::as_ptr(old) as usize >> 4) as u32 & 0x7fff_ffff,
            sibyl_types::pretty::memory(old.live_bytes() as i64),
            old.operations(),
            self.memory_usage(old.live_bytes())
        );
        let reader = tokio::task::spawn_blocking(move || -> Result<SSTableReader, StorageError> {
            let written = SSTableWriter::create_with_header(
                &dir,
                generation,
                opts.chunk_length_bytes,
                opts.compression,
                opts.bloom_filter_fp_chance,
                opts.header.clone(),
            )
            .and_then(|mut w| {
                w.set_repair_state(state);
                mt.for_each(|k, p| w.append(k, p))?;
                w.finish(position)
            });
            if let Err(e) = written {
                crate::sstable::remove_unfinished(&dir, generation);
                return Err(e);
            }
            SSTableReader::open(&dir, generation, cmp, cache)
        })
        .await
        .map_err(|e| StorageError::Decode(format!("flush task failed: {e}")))?;
        let reader = match reader {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("flush of table {} failed: {e}", t.table_id);
                *self.flush_failure.lock() = Some(FlushFailure {
                    error: e.to_string(),
                    at: std::time::Instant::now(),
                    recovered: false,
                });
                return Err(e);
            }
        };
        if let Some(f) = self.flush_failure.lock().as_mut() {
            f.recovered = true;
        }
        let data = crate::sstable::component_path(&t.dir, generation, "Data.db");
        tracing::info!(
            "Completed flushing {} ({}) for commitlog position CommitLogPosition(segmentId={}, position={})",
            data.display(),
            sibyl_types::pretty::memory(std::fs::metadata(&data).map(|m| m.len()).unwrap_or(0) as i64),
            position >> 32,
            position & 0xffff_ffff
        );
        t.bytes_flushed.add(reader.size_bytes());
        // the SSTable is readable before its memtable leaves the reads
        t.edit_sstables(|ss| {
            ss.push(Arc::new(reader));
            t.flushing.write().retain(|m| !Arc::ptr_eq(m, old));
        });
        t.replay_after.fetch_max(position, Ordering::AcqRel);
        t.flushes.fetch_add(1, Ordering::Relaxed);
        self.discard_segments();
        if t.options.read().auto_compaction {
            let me = self.clone();
            let t2 = t.clone();
            self.spawn_background(async move {
                while let Ok(Some(_)) = me.compact(&t2, false).await {}
            });
        }
        Ok(generation)
    }

    /// The strategy's next compaction (or all SSTables, for a major compaction).
    fn compaction_task(
        t: &ColumnFamilyStore,
        major: bool,
    ) -> Option<crate::compaction::CompactionTask> {
        Self::major_or_next_task(t, major, 2, None)
    }

    /// A major compaction of at least `min_inputs` SSTables of the repaired
    /// or unrepaired set, or the strategy's next task in one of them (the
    /// unrepaired first; `None`: either).
    fn major_or_next_task(
        t: &ColumnFamilyStore,
        major: bool,
        min_inputs: usize,
        set: Option<bool>,
    ) -> Option<crate::compaction::CompactionTask> {
        let all = t.sstables();
        let of_set = |repaired: bool| -> Vec<Arc<SSTableReader>> {
            all.iter()
                .filter(|s| match s.repair_state() {
                    RepairState::Pending(_) => false,
                    st => st.is_repaired() == repaired,
                })
                .cloned()
                .collect()
        };
        match set {
            Some(repaired) => Self::task_in(t, of_set(repaired), major, min_inputs),
            None => Self::task_in(t, of_set(false), major, min_inputs)
                .or_else(|| Self::task_in(t, of_set(true), major, min_inputs)),
        }
    }

    fn task_in(
        t: &ColumnFamilyStore,
        ss: Vec<Arc<SSTableReader>>,
        major: bool,
        min_inputs: usize,
    ) -> Option<crate::compaction::CompactionTask> {
        let strategy = t.options.read().strategy.clone();
        if major {
            if ss.len() < min_inputs.max(1) {
                return None;
            }
            let (level, max) = match strategy {
                crate::compaction::Strategy::Leveled {
                    sstable_size_bytes, ..
                } => (1, sstable_size_bytes),
                _ => (0, u64::MAX),
            };
            return Some(crate::compaction::CompactionTask {
                inputs: ss,
                output_level: level,
                max_output_bytes: max,
                split_output: false,
            });
        }
        let last = t.last_compacted.lock().clone();
        crate::compaction::next_task_after(&strategy, &ss, &|level| last.get(&level).copied())
            .filter(|t| t.inputs.len() >= 2 || t.output_level > 0)
    }

    /// This node's storage metrics under Cassandra's names: every table's
    /// (`name_of` gives a table id's keyspace and name; tables it does not
    /// know are left out), the commit log's, compaction's and `Storage`'s.
    pub fn collect_metrics(
        &self,
        c: &mut crate::metrics::Collection,
        name_of: &dyn Fn(uuid::Uuid) -> Option<(String, String)>,
    ) {
        use crate::metrics::{Histogram, MetricName};
        let mut load = 0;
        for t in self.tables() {
            let ss = t.sstables();
            let live: u64 = ss.iter().map(|s| s.size_bytes()).sum();
            load += live;
            let Some((ks, table)) = name_of(t.table_id) else {
                continue;
            };
            let n = |name: &str| MetricName::table(&ks, &table, name);
            let (sizes, cells) = (Histogram::default(), Histogram::default());
            for s in &ss {
                sizes.add_counts(&s.stats.partition_sizes);
                cells.add_counts(&s.stats.cell_counts);
            }
            c.timer(n("ReadLatency"), &t.read_latency);
            c.timer(n("WriteLatency"), &t.write_latency);
            c.timer(n("RangeLatency"), &t.range_latency);
            c.histogram(n("LiveScannedHistogram"), &t.live_scanned);
            c.histogram(n("TombstoneScannedHistogram"), &t.tombstones_scanned);
            c.histogram(n("SSTablesPerReadHistogram"), &t.sstables_per_read);
            c.histogram(n("EstimatedPartitionSizeHistogram"), &sizes);
            c.histogram(n("EstimatedColumnCountHistogram"), &cells);
            let partitions: u64 = ss.iter().map(|s| s.stats.partitions).sum();
            c.gauge(n("EstimatedPartitionCount"), partitions as f64);
            c.gauge(n("LiveSSTableCount"), ss.len() as f64);
            // compacted SSTables are deleted as soon as no read holds them
            c.gauge(n("LiveDiskSpaceUsed"), live as f64);
            c.gauge(n("TotalDiskSpaceUsed"), live as f64);
            c.gauge(n("MemtableLiveDataSize"), t.memtable_bytes() as f64);
            c.gauge(n("MemtableOnHeapSize"), t.memtable_bytes() as f64);
            c.counter(n("MemtableSwitchCount"), t.flushes.load(Ordering::Relaxed));
            c.gauge(n("PendingFlushes"), t.pending_flushes() as f64);
            c.counter(n("BytesFlushed"), t.bytes_flushed.get());
            c.counter(
                n("CompactionBytesWritten"),
                t.compaction_bytes_written.get(),
            );
            c.gauge(
                n("PendingCompactions"),
                Self::pending_compactions_of(&t) as f64,
            );
            c.gauge(n("MaxPartitionSize"), sizes.max() as f64);
            c.gauge(n("MeanPartitionSize"), sizes.mean().round());
            c.gauge(n("MinPartitionSize"), sizes.min() as f64);
            let fp: u64 = ss
                .iter()
                .map(|s| s.bloom_false_positives.load(Ordering::Relaxed))
                .sum();
            c.counter(n("BloomFilterFalsePositives"), fp);
            let filters: u64 = ss
                .iter()
                .filter_map(|s| {
                    std::fs::metadata(crate::sstable::component_path(
                        &s.dir,
                        s.generation,
                        "Filter.db",
                    ))
                    .ok()
                })
                .map(|m| m.len())
                .sum();
            c.gauge(n("BloomFilterDiskSpaceUsed"), filters as f64);
            // the repaired share of the data on disk; 100% without any, as
            // Cassandra computes it
            c.gauge(n("PercentRepaired"), t.percent_repaired());
            let snapshots: u64 = t.snapshots().iter().map(|s| s.2).sum();
            c.gauge(n("SnapshotsSize"), snapshots as f64);
        }
        let s = |name: &str| MetricName::new("Storage", name);
        c.gauge(s("Load"), load as f64);
        c.counter(s("Exceptions"), self.failures.exceptions.get());
        let cm = |name: &str| MetricName::new("Compaction", name);
        c.counter(cm("BytesCompacted"), self.bytes_compacted.get());
        c.counter(cm("CompletedTasks"), self.compactions_completed.count());
        c.counter(
            cm("TotalCompactionsCompleted"),
            self.compactions_completed.count(),
        );
        c.counter(cm("CompactionsAborted"), self.compactions_aborted.get());
        // Sibyl never narrows a compaction for lack of disk space
        c.counter(cm("CompactionsReduced"), 0);
        c.counter(cm("SSTablesDroppedFromCompaction"), 0);
        if let Some(log) = self.commitlog.load_full() {
            let l = |name: &str| MetricName::new("CommitLog", name);
            c.counter(l("CompletedTasks"), log.completed.get());
            c.gauge(l("PendingTasks"), log.waiting.get().max(0) as f64);
            c.gauge(l("TotalCommitLogSize"), log.total_bytes() as f64);
            c.timer(l("WaitingOnCommit"), &log.waiting_on_commit);
            c.timer(
                l("WaitingOnSegmentAllocation"),
                &log.waiting_on_segment_allocation,
            );
        }
    }

    /// Pending compactions, counted as Cassandra's `PendingTasks`: per
    /// table, what the strategy would still do, plus those running.
    pub fn pending_compactions(&self) -> usize {
        self.pending_compactions_by_table()
            .iter()
            .map(|p| p.1)
            .sum()
    }

    /// The tables with pending or running compactions, with their count
    /// (Cassandra's `PendingTasksByTableName`).
    pub fn pending_compactions_by_table(&self) -> Vec<(uuid::Uuid, usize)> {
        let running = self.compactions_running.lock().clone();
        self.tables()
            .iter()
            .map(|t| {
                let active = running.iter().filter(|p| p.table_id == t.table_id).count();
                (t.table_id, Self::pending_compactions_of(t) + active)
            })
            .filter(|p| p.1 > 0)
            .collect()
    }

    fn pending_compactions_of(t: &ColumnFamilyStore) -> usize {
        match Self::compaction_task(t, false) {
            None => 0,
            Some(task) => {
                1 + t.sstable_count().saturating_sub(task.inputs.len())
                    / t.options.read().strategy.min_threshold().max(2)
            }
        }
    }

    /// A compaction runs behind the requests (as Cassandra's compaction
    /// threads, made at `Thread.MIN_PRIORITY`), unless its table's backlog
    /// is past [`COMPACTION_BACKLOG_PRESSING`]: then it has fallen behind
    /// the writes, reads pay for every SSTable it leaves, and it runs as the
    /// requests do until it catches up (the starvation guard; decided per
    /// compaction, when it starts).
    fn compaction_priority(&self, t: &ColumnFamilyStore) -> Priority {
        if Self::pending_compactions_of(t) > COMPACTION_BACKLOG_PRESSING {
            Priority::Normal
        } else {
            Priority::Background
        }
    }

    /// Holds a background flush of `t` while its compaction backlog is over
    /// the limit (and compaction can shrink it), with the reason where
    /// held-back writes report it.
    async fn wait_for_compaction_backlog(&self, t: &Arc<ColumnFamilyStore>) {
        let limit = self.config.compaction_backlog_limit;
        if limit == 0 {
            return;
        }
        let mut logged = false;
        loop {
            let pending = Self::pending_compactions_of(t);
            if pending <= limit || !t.options.read().auto_compaction {
                break;
            }
            let reason = format!(
                "table {} has {pending} pending compactions ({} SSTables), more than \
                 compaction_backlog_limit ({limit}): flushing waits for compaction to catch up",
                t.dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                t.sstable_count()
            );
            if !logged {
                tracing::warn!("{reason}");
                logged = true;
            }
            *self.stall.lock() = Some(reason);
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        *self.stall.lock() = None;
    }

    /// Drops SSTables whose data all expired before gc_grace (and shadow nothing).
    fn drop_fully_expired(&self, t: &ColumnFamilyStore, gc_before: i32) -> usize {
        let ss = t.sstables();
        let dead = crate::compaction::fully_expired(&ss, gc_before);
        if dead.is_empty() {
            return 0;
        }
        let gens: std::collections::HashSet<u64> = dead.iter().map(|s| s.generation).collect();
        t.edit_sstables(|ss| ss.retain(|s| !gens.contains(&s.generation)));
        for s in &dead {
            tracing::info!("dropping fully expired SSTable {}", s.generation);
            s.delete_files();
        }
        dead.len()
    }

    /// Runs one compaction of a table (the strategy's choice, or all its
    /// SSTables for a major compaction). Returns the new generation, if any.
    pub async fn compact(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        major: bool,
    ) -> Result<Option<u64>, StorageError> {
        self.compact_with(t, major, false).await
    }

    /// [`Self::compact`]; a major compaction of a size-tiered table may split
    /// its output (`nodetool compact -s`).
    pub async fn compact_with(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        major: bool,
        split_output: bool,
    ) -> Result<Option<u64>, StorageError> {
        self.compact_filtered(t, major, split_output, None).await
    }

    /// `nodetool cleanup`: flushes the table and rewrites all its SSTables
    /// without the partitions whose token `keep` refuses (the ranges this
    /// node no longer replicates). Returns the live bytes before and after.
    pub async fn cleanup(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        keep: Arc<dyn Fn(i64) -> bool + Send + Sync>,
    ) -> Result<(u64, u64), StorageError> {
        self.flush(t, FlushReason::InternallyForced).await?;
        let before = t.live_disk_bytes();
        self.compact_filtered(t, true, false, Some(keep)).await?;
        Ok((before, t.live_disk_bytes()))
    }

    /// A major compaction (and cleanup) compacts the unrepaired and the
    /// repaired SSTables each on their own, as Cassandra does; SSTables
    /// pending in an incremental repair are left alone.
    async fn compact_filtered(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        major: bool,
        split_output: bool,
        keep: Option<Arc<dyn Fn(i64) -> bool + Send + Sync>>,
    ) -> Result<Option<u64>, StorageError> {
        if !major {
            return self.compact_set(t, false, false, keep, None).await;
        }
        let mut last = None;
        for repaired in [false, true] {
            if let Some(g) = self
                .compact_set(t, true, split_output, keep.clone(), Some(repaired))
                .await?
            {
                last = Some(g);
            }
        }
        Ok(last)
    }

    /// One compaction of the repaired (`Some(true)`) or unrepaired SSTables,
    /// or of whichever set the strategy finds work in (`None`).
    async fn compact_set(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        major: bool,
        split_output: bool,
        keep: Option<Arc<dyn Fn(i64) -> bool + Send + Sync>>,
        set: Option<bool>,
    ) -> Result<Option<u64>, StorageError> {
        let queued = crate::metrics::stages::COMPACTION.enqueue();
        let _one = t.compaction_lock.lock().await;
        let _slot = self
            .compactors
            .acquire()
            .await
            .map_err(|_| StorageError::Decode("compaction stopped".into()))?;
        let opts = t.options.read().clone();
        let now = now_in_seconds();
        // (what holds for every partition: whole SSTables are dropped by it)
        let gc_before = t.gc_before(&opts, now, None);
        let dropped = self.drop_fully_expired(t, gc_before);
        // cleanup rewrites even a single SSTable
        let min_inputs = if keep.is_some() { 1 } else { 2 };
        let Some(mut task) = Self::major_or_next_task(t, major, min_inputs, set) else {
            return Ok(if dropped > 0 { Some(0) } else { None });
        };
        let _running = queued.start();
        task.split_output = major && split_output && task.max_output_bytes == u64::MAX;
        let inputs = task.inputs.clone();
        let output_level = task.output_level;
        let generation = t.next_generation.load(Ordering::Relaxed);
        // time-based, as Cassandra's compaction ids
        let progress_id = sibyl_types::timeuuid::now_timeuuid();
        let total_partitions: u64 = inputs.iter().map(|s| s.stats.partitions).sum();
        let total_bytes: u64 = inputs.iter().map(|s| s.stats.data_bytes).sum();
        self.compactions_running.lock().push(CompactionProgress {
            table_id: t.table_id,
            id: progress_id,
            kind: match (keep.is_some(), major) {
                (true, _) => "Cleanup",
                (false, true) => "Major compaction",
                (false, false) => "Compaction",
            },
            sstables: inputs.len(),
            target_directory: t.dir.clone(),
            done_partitions: 0,
            total_partitions,
            total_bytes,
        });
        let began = std::time::Instant::now();
        let me = self.clone();
        let t2 = t.clone();
        let ins = inputs.clone();
        let dir = t.dir.clone();
        let throughput = self.compaction_throughput_bytes.load(Ordering::Relaxed);
        let t3 = t.clone();
        let input_gens: Vec<u64> = inputs.iter().map(|s| s.generation).collect();
        // repaired inputs make repaired outputs, as of the oldest repair
        let output_state = inputs
            .iter()
            .map(|s| match s.repair_state() {
                RepairState::Repaired(at) => Some(at),
                _ => None,
            })
            .min()
            .flatten()
            .map_or(RepairState::Unrepaired, RepairState::Repaired);
        let priority = self.compaction_priority(t);
        let result = background::run("CompactionExecutor", priority, move || {
            let log =
                std::cell::RefCell::new(crate::lifecycle::CompactionLog::begin(&dir, &input_gens)?);
            let mut new_writer = || -> Result<SSTableWriter, StorageError> {
                let g = t3.next_generation.fetch_add(1, Ordering::Relaxed);
                log.borrow_mut().add(g)?;
                let mut w = SSTableWriter::create_with_header(
                    &dir,
                    g,
                    opts.chunk_length_bytes,
                    opts.compression,
                    opts.bloom_filter_fp_chance,
                    opts.header.clone(),
                )?;
                w.set_level(task.output_level);
                w.set_repair_state(output_state);
                Ok(w)
            };
            let in_gens: std::collections::HashSet<u64> =
                ins.iter().map(|s| s.generation).collect();
            let outside = |k: &DecoratedKey| {
                t2.sstables()
                    .iter()
                    .any(|s| !in_gens.contains(&s.generation) && s.may_contain(k))
                    || t2.memtable.load().contains(k)
                    || t2.flushing.read().iter().any(|m| m.contains(k))
            };
            let started = std::time::Instant::now();
            let avg = total_bytes.checked_div(total_partitions).unwrap_or(0);
            let progress = |done: u64| {
                if done.is_multiple_of(256) {
                    if let Some(p) = me
                        .compactions_running
                        .lock()
                        .iter_mut()
                        .find(|p| p.id == progress_id)
                    {
                        p.done_partitions = done;
                    }
                    // throttle to compaction_throughput
                    if throughput > 0 {
                        let expected = std::time::Duration::from_secs_f64(
                            (done * avg) as f64 / throughput as f64,
                        );
                        if let Some(wait) = expected.checked_sub(started.elapsed()) {
                            std::thread::sleep(wait.min(std::time::Duration::from_millis(100)));
                        }
                    }
                }
            };
            let written = crate::compaction::compact(
                &ins,
                &mut new_writer,
                &|i| crate::compaction::output_limit(&task, total_bytes, i),
                now,
                &|k: &DecoratedKey| t2.gc_before(&opts, now, Some(k.token)),
                &opts.dropped_columns,
                &outside,
                &|k: &DecoratedKey| keep.as_ref().is_none_or(|f| f(k.token)),
                &progress,
            )
            .and_then(|(r, gens)| {
                let mut readers = Vec::new();
                for g in gens {
                    readers.push(SSTableReader::open(
                        &dir,
                        g,
                        t2.comparator.clone(),
                        me.cache.clone(),
                    )?);
                }
                Ok((r, readers))
            });
            let mut log = log.into_inner();
            match written.and_then(|w| log.commit().map(|_| w)) {
                Ok((r, readers)) => Ok::<_, StorageError>((r, readers, log)),
                Err(e) => {
                    log.abort();
                    Err(e)
                }
            }
        })
        .await;
        self.compactions_running
            .lock()
            .retain(|p| p.id != progress_id);
        let (result, readers, log) = match result.and_then(|r| r) {
            Ok(done) => done,
            Err(e) => {
                // Cassandra counts the compactions that failed for lack of
                // disk space
                if e.is_disk_full() {
                    self.compactions_aborted.inc();
                }
                return Err(e);
            }
        };
        if output_level >= 2 {
            let from = output_level - 1;
            if let Some(end) = inputs
                .iter()
                .filter(|s| s.stats.level == from)
                .map(|s| s.stats.max_token)
                .max()
            {
                t.last_compacted.lock().insert(from, end);
            }
        }
        let outputs: String = readers
            .iter()
            .map(|r| {
                format!(
                    "{},",
                    crate::sstable::base_path(&t.dir, r.generation).display()
                )
            })
            .collect();
        t.replace_sstables(&inputs, readers);
        log.finish();
        t.compaction_bytes_written.add(result.output_bytes);
        self.bytes_compacted.add(result.input_bytes);
        self.compactions_completed.mark();
        let mut h = self.compaction_history.lock();
        h.push_back(CompactionRecord {
            table_id: t.table_id,
            finished_at_millis: sibyl_types::timeuuid::timestamp_micros_now() / 1000,
            input_bytes: result.input_bytes,
            output_bytes: result.output_bytes,
            input_partitions: result.input_partitions,
            output_partitions: result.output_partitions,
            inputs: inputs.len(),
        });
        while h.len() > 1000 {
            h.pop_front();
        }
        let nanos = began.elapsed().as_nanos().max(1) as u64;
        let merges: String = result
            .merge_counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| format!("{}:{n}, ", i + 1))
            .collect();
        use sibyl_types::pretty::{memory, memory_per_second, thousands};
        tracing::info!(
            "Compacted ({progress_id}) {} sstables to [{outputs}] to level={output_level}.  {} to {} (~{}% of original) in {}ms.  \
             Read Throughput = {}, Write Throughput = {}, Row Throughput = ~{}/s.  {} total partitions merged to {}.  \
             Partition merge counts were {{{merges}}}. Time spent writing keys = {}ms",
            inputs.len(),
            memory(result.input_bytes as i64),
            memory(result.output_bytes as i64),
            (result.output_bytes as f64 / result.input_bytes.max(1) as f64 * 100.0) as i32,
            thousands((nanos / 1_000_000) as i64),
            memory_per_second(result.input_bytes, nanos),
            memory_per_second(result.output_bytes, nanos),
            thousands((result.input_rows / (nanos / 1_000_000_000 + 1)) as i64),
            thousands(result.input_partitions as i64),
            thousands(result.output_partitions as i64),
            thousands((nanos / 1_000_000) as i64),
        );
        Ok(Some(generation))
    }

    /// Writes partitions a stream received into an SSTable of a repair set
    /// (an incremental repair session's pending set, or the repaired set)
    /// without the commit log: the SSTable is synced before the stream
    /// session reports success.
    pub async fn write_received(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        received: Arc<Memtable>,
        state: RepairState,
    ) -> Result<Option<u64>, StorageError> {
        if received.partition_count() == 0 {
            return Ok(None);
        }
        self.write_memtable(t, &received, 0, state).await.map(Some)
    }

    /// Incremental repair's preparation (Cassandra's anticompaction): flushes
    /// the table, then puts what its unrepaired SSTables hold of `ranges`
    /// (`(start, end]`) into the session's pending set. An SSTable inside
    /// the ranges is moved whole; one that straddles them is split into the
    /// part inside (pending) and the rest (unrepaired). Returns the
    /// SSTables moved and split.
    pub async fn anticompact(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        ranges: &[(i64, i64)],
        session: uuid::Uuid,
    ) -> Result<(usize, usize), StorageError> {
        self.flush(t, FlushReason::Anticompaction).await?;
        let _one = t.compaction_lock.lock().await;
        let pending = RepairState::Pending(session);
        let (mut moved, mut split) = (0, 0);
        for s in t.sstables() {
            if s.repair_state() != RepairState::Unrepaired {
                continue;
            }
            let (lo, hi) = (s.stats.min_token, s.stats.max_token);
            if !ranges.iter().any(|r| overlaps(*r, lo, hi)) {
                continue;
            }
            if ranges.iter().any(|r| within(*r, lo, hi)) {
                s.set_repair_state(pending)?;
                moved += 1;
                continue;
            }
            self.split_for_repair(t, s, ranges.to_vec(), session)
                .await?;
            split += 1;
        }
        if moved + split > 0 {
            let (keyspace, table) = t.names();
            tracing::info!(
                "[repair #{session}] Starting anticompaction for {keyspace}.{table} on {} sstables: {moved} moved whole, {split} split",
                moved + split
            );
        }
        Ok((moved, split))
    }

    /// Rewrites one SSTable as its part inside `ranges` (pending in
    /// `session`) and the rest (unrepaired).
    async fn split_for_repair(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        input: Arc<SSTableReader>,
        ranges: Vec<(i64, i64)>,
        session: uuid::Uuid,
    ) -> Result<(), StorageError> {
        let route = move |token: i64| {
            if ranges.iter().any(|r| contains(*r, token)) {
                RepairState::Pending(session)
            } else {
                RepairState::Unrepaired
            }
        };
        self.rewrite(t, input, "Anticompaction after repair", route)
            .await
    }

    /// `nodetool upgradesstables`: rewrites each SSTable of an older format
    /// version (every one with `all`, Cassandra's `-a`) in the current
    /// format, keeping its level and repair set. Returns how many.
    pub async fn upgrade_sstables(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        all: bool,
    ) -> Result<usize, StorageError> {
        let _one = t.compaction_lock.lock().await;
        let mut n = 0;
        for s in t.sstables() {
            if !all && s.stats.version >= crate::sstable::FORMAT_VERSION {
                continue;
            }
            let state = s.repair_state();
            self.rewrite(t, s, "Upgrade sstables", move |_| state)
                .await?;
            n += 1;
        }
        Ok(n)
    }

    /// Rewrites one SSTable partition by partition into new ones in the
    /// current format, each partition into the repair set `route` gives its
    /// token, under a compaction transaction (a crash leaves the input or
    /// the outputs), with its progress in `compactionstats`.
    async fn rewrite(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        input: Arc<SSTableReader>,
        kind: &'static str,
        route: impl Fn(i64) -> RepairState + Send + 'static,
    ) -> Result<(), StorageError> {
        let opts = t.options.read().clone();
        let (t2, me, inp) = (t.clone(), self.clone(), input.clone());
        let progress_id = sibyl_types::timeuuid::now_timeuuid();
        self.compactions_running.lock().push(CompactionProgress {
            table_id: t.table_id,
            id: progress_id,
            kind,
            sstables: 1,
            target_directory: t.dir.clone(),
            done_partitions: 0,
            total_partitions: input.stats.partitions,
            total_bytes: input.stats.data_bytes,
        });
        let priority = self.compaction_priority(t);
        let result = background::run(kind, priority, move || {
            let dir = t2.dir.clone();
            let mut log = crate::lifecycle::CompactionLog::begin(&dir, &[inp.generation])?;
            let mut outputs: Vec<(RepairState, SSTableWriter)> = Vec::new();
            let mut done = 0u64;
            let written = (|| -> Result<Vec<u64>, StorageError> {
                for item in inp.scanner()? {
                    let (k, p) = item?;
                    let state = route(k.token);
                    let i = match outputs.iter().position(|(s, _)| *s == state) {
                        Some(i) => i,
                        None => {
                            let g = t2.next_generation.fetch_add(1, Ordering::Relaxed);
                            log.add(g)?;
                            let mut w = SSTableWriter::create_with_header(
                                &dir,
                                g,
                                opts.chunk_length_bytes,
                                opts.compression,
                                opts.bloom_filter_fp_chance,
                                opts.header.clone(),
                            )?;
                            w.set_level(inp.stats.level);
                            w.set_repair_state(state);
                            outputs.push((state, w));
                            outputs.len() - 1
                        }
                    };
                    outputs[i].1.append(&k, &p)?;
                    done += 1;
                    if done.is_multiple_of(256) {
                        if let Some(p) = me
                            .compactions_running
                            .lock()
                            .iter_mut()
                            .find(|p| p.id == progress_id)
                        {
                            p.done_partitions = done;
                        }
                    }
                }
                let mut gens = Vec::new();
                for (_, w) in outputs {
                    gens.push(w.finish(inp.stats.commitlog_position)?);
                }
                Ok(gens)
            })();
            let readers = written.and_then(|gens| {
                gens.into_iter()
                    .map(|g| SSTableReader::open(&dir, g, t2.comparator.clone(), me.cache.clone()))
                    .collect::<Result<Vec<_>, _>>()
            });
            match readers.and_then(|r| log.commit().map(|_| r)) {
                Ok(r) => Ok((r, log)),
                Err(e) => {
                    log.abort();
                    Err(e)
                }
            }
        })
        .await;
        self.compactions_running
            .lock()
            .retain(|p| p.id != progress_id);
        let (readers, log) = result??;
        t.replace_sstables(std::slice::from_ref(&input), readers);
        log.finish();
        Ok(())
    }

    /// Ends an incremental repair session on this node: its pending
    /// SSTables become repaired as of `repaired_at` (ms), or unrepaired
    /// again when the session failed (`None`). Returns how many moved.
    pub fn finish_pending(
        self: &Arc<Self>,
        t: &Arc<ColumnFamilyStore>,
        session: uuid::Uuid,
        repaired_at: Option<i64>,
    ) -> Result<usize, StorageError> {
        let to = repaired_at.map_or(RepairState::Unrepaired, RepairState::Repaired);
        let mut n = 0;
        for s in t.sstables() {
            if s.repair_state() == RepairState::Pending(session) {
                s.set_repair_state(to)?;
                n += 1;
            }
        }
        if n > 0 && t.options.read().auto_compaction {
            let (me, t2) = (self.clone(), t.clone());
            self.spawn_background(async move {
                while let Ok(Some(_)) = me.compact(&t2, false).await {}
            });
        }
        Ok(n)
    }

    /// Flushes every table (nodetool drain, shutdown).
    pub async fn flush_all(self: &Arc<Self>) -> Result<(), StorageError> {
        for t in self.tables() {
            self.flush(&t, FlushReason::Drain).await?;
        }
        Ok(())
    }

    fn discard_segments(&self) {
        let Ok(log) = self.log() else { return };
        let dropped = self.dropped.lock().clone();
        let removed = log.discard_flushed(&|id| {
            if dropped.contains(&id) {
                return u64::MAX;
            }
            self.table(id)
                .map(|t| t.replay_after.load(Ordering::Acquire))
                .unwrap_or(u64::MAX)
        });
        if !removed.is_empty() {
            tracing::debug!("recycled commit log segments {removed:?}");
        }
    }

    /// Truncates a table durably: nothing written before is seen again.
    pub async fn truncate(
        self: &Arc<Self>,
        table_id: uuid::Uuid,
        truncated_at_micros: i64,
    ) -> Result<(), StorageError> {
        let log = self.log()?;
        let Some(t) = self.table(table_id) else {
            return Ok(());
        };
        if self.config.auto_snapshot {
            // as Cassandra: flush, then keep what is about to go in a snapshot
            self.flush(&t, FlushReason::Truncate).await?;
            t.snapshot(&format!("truncated-{}", truncated_at_micros / 1000))?;
        }
        let _one = t.flush_lock.lock().await;
        let (pos, old_memtables) = {
            let _g = self.barrier.write();
            let pos = log.append(
                &Entry::Truncate {
                    table_id,
                    truncated_at_micros,
                },
                None,
            )?;
            let fresh = Arc::new(Memtable::in_pool(t.pool.clone()));
            let mut old = std::mem::take(&mut *t.flushing.write());
            old.push(t.memtable.swap(fresh));
            t.failed_flushes.lock().clear();
            (pos, old)
        };
        // what follows blocks (freeing the memtables, an fsync, the files):
        // not on the thread of the request, which serves other connections too
        let (me, t2, log2) = (self.clone(), t.clone(), log.clone());
        tokio::task::spawn_blocking(move || {
            drop(old_memtables);
            log2.sync()
        })
        .await
        .map_err(|e| StorageError::Decode(format!("truncate task failed: {e}")))??;
        log.wait_durable(pos).await?;
        tokio::task::spawn_blocking(move || me.truncate_files(&t2, pos))
            .await
            .map_err(|e| StorageError::Decode(format!("truncate task failed: {e}")))?
    }

    /// Truncate's file work, once its log entry is durable: records the point
    /// before which the table's log entries are void, then drops the files.
    fn truncate_files(&self, t: &ColumnFamilyStore, pos: u64) -> Result<(), StorageError> {
        let p = t.dir.join("truncated_at");
        let tmp = t.dir.join("truncated_at.tmp");
        std::fs::write(&tmp, pos.to_string()).map_err(|e| StorageError::Io {
            path: tmp.display().to_string(),
            source: e,
        })?;
        if let Ok(f) = std::fs::File::open(&tmp) {
            let _ = f.sync_all();
        }
        std::fs::rename(&tmp, &p).map_err(|e| StorageError::Io {
            path: p.display().to_string(),
            source: e,
        })?;
        let old: Vec<Arc<SSTableReader>> = t.edit_sstables(std::mem::take);
        self.row_cache.invalidate_table(t.table_id);
        for s in old {
            s.delete_files();
        }
        t.replay_after.fetch_max(pos, Ordering::AcqRel);
        self.discard_segments();
        Ok(())
    }

    /// Flushes everything, syncs and closes the commit log.
    pub async fn shutdown(self: &Arc<Self>) {
        if let Err(e) = self.flush_all().await {
            tracing::error!("flush at shutdown failed: {e}");
        }
        if let Some(l) = self.commitlog.swap(None) {
            l.shutdown();
        }
    }

    /// Chunk cache hit and miss counts.
    pub fn cache_stats(&self) -> (u64, u64) {
        (
            self.cache.hits.load(Ordering::Relaxed),
            self.cache.misses.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sibyl_db::{Cell, ColumnData, Partition, Row, RowCells};
    use std::time::Duration;

    fn write(table_id: uuid::Uuid, key: &DecoratedKey) -> Mutation {
        let mut p = Partition::new();
        let mut cells = RowCells::new();
        cells.insert(
            "v",
            ColumnData::Simple(Cell::live(1, Bytes::from_static(b"x"))),
        );
        p.rows.insert(
            sibyl_db::ClusteringKey::row(Vec::new(), sibyl_db::no_clustering()),
            Row {
                liveness: None,
                deletion: None,
                cells,
            },
        );
        Mutation {
            table_id,
            key: key.clone(),
            update: p,
        }
    }

    /// With a synced commit log a write was applied to the memtable before
    /// its sync: a reader saw what a crash could still lose.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_synced_write_is_visible_only_once_durable_and_a_flush_waits_for_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut cfg = StorageConfig::small(dir.path());
        cfg.sync = SyncMode::Group(Duration::from_millis(400));
        let engine = StorageEngine::new(cfg).expect("engine");
        let id = uuid::Uuid::new_v4();
        let t = engine
            .add_table(id, sibyl_db::no_clustering(), dir.path().join("data/ks/t"))
            .expect("table");
        engine.start_commitlog(&[]).expect("log");
        let key = DecoratedKey::new(Bytes::from_static(b"k"));
        let e = engine.clone();
        let m = write(id, &key);
        let pending = tokio::spawn(async move { e.apply(vec![m]).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!pending.is_finished(), "the group window holds the write");
        assert!(
            t.read(&key, None).expect("read").is_none(),
            "visible before durable"
        );
        // a flush switches the memtable now, and waits for the write logged for it
        let flushed = engine
            .flush(&t, FlushReason::UserForced)
            .await
            .expect("flush");
        assert!(flushed.is_some(), "the flushed memtable held the write");
        assert_eq!(t.sstables().len(), 1);
        pending.await.expect("join").expect("apply");
        // the memtable in use now is empty: the write is in the SSTable
        assert_eq!(t.memtable.load().partition_count(), 0);
        assert!(t.read(&key, None).expect("read").is_some());
    }

    /// A row of `columns` written at `ts`, with a row marker when `marker`.
    fn row_at(
        id: uuid::Uuid,
        key: &DecoratedKey,
        ts: i64,
        columns: &[&str],
        marker: bool,
    ) -> Mutation {
        let mut cells = RowCells::new();
        for c in columns {
            let v = format!("{c}@{ts}");
            cells.insert(*c, ColumnData::Simple(Cell::live(ts, Bytes::from(v))));
        }
        let mut p = Partition::new();
        p.rows.insert(
            sibyl_db::ClusteringKey::row(Vec::new(), sibyl_db::no_clustering()),
            Row {
                liveness: marker.then_some(sibyl_db::LivenessInfo {
                    timestamp: ts,
                    ttl: 0,
                    local_expiration_time: i32::MAX,
                }),
                deletion: None,
                cells,
            },
        );
        Mutation {
            table_id: id,
            key: key.clone(),
            update: p,
        }
    }

    /// Cassandra's reads in timestamp order: a read by name stops at the
    /// first SSTable older than the whole rows found, and reads on when a
    /// column, or the row marker, may still be older.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_by_name_skips_the_sstables_older_than_the_rows_found() {
        let dir = tempfile::tempdir().expect("tmp");
        let engine = StorageEngine::new(StorageConfig::small(dir.path())).expect("engine");
        let id = uuid::Uuid::new_v4();
        let t = engine
            .add_table(id, sibyl_db::no_clustering(), dir.path().join("data/ks/t"))
            .expect("table");
        engine.start_commitlog(&[]).expect("log");
        t.options.write().timestamp_ordered = Some(vec!["a".to_string(), "b".to_string()].into());
        let key = DecoratedKey::new(Bytes::from_static(b"k"));
        let value =
            |p: &Partition, c: &str| match p.rows.values().next().and_then(|r| r.cells.get(c)) {
                Some(ColumnData::Simple(cell)) => cell.value.clone(),
                _ => None,
            };
        // the oldest SSTable has a and b; the next only a
        engine
            .apply(vec![row_at(id, &key, 10, &["a", "b"], true)])
            .await
            .expect("apply");
        engine
            .flush(&t, FlushReason::UserForced)
            .await
            .expect("flush");
        engine
            .apply(vec![row_at(id, &key, 20, &["a"], false)])
            .await
            .expect("apply");
        engine
            .flush(&t, FlushReason::UserForced)
            .await
            .expect("flush");
        assert_eq!(t.sstables().len(), 2);
        // the memtable has a only: both SSTables are read (b, and the marker)
        engine
            .apply(vec![row_at(id, &key, 30, &["a"], false)])
            .await
            .expect("apply");
        let before = t.sstables_per_read.counts();
        let p = t.read(&key, None).expect("read").expect("found");
        assert_eq!(value(&p, "a").as_deref(), Some(&b"a@30"[..]));
        assert_eq!(value(&p, "b").as_deref(), Some(&b"b@10"[..]));
        let touched = |before: &[u64], after: &[u64]| {
            (0..after.len()).find(|&i| after[i] > before.get(i).copied().unwrap_or(0))
        };
        let after = t.sstables_per_read.counts();
        let bucket_of = |n: u64| {
            let h = crate::metrics::Histogram::default();
            h.record(n);
            h.counts().iter().position(|&c| c > 0)
        };
        assert_eq!(touched(&before, &after), bucket_of(2));
        // a and b and the marker, newer than every SSTable: none is read
        engine
            .apply(vec![row_at(id, &key, 40, &["a", "b"], true)])
            .await
            .expect("apply");
        let before = t.sstables_per_read.counts();
        let p = t.read(&key, None).expect("read").expect("found");
        assert_eq!(value(&p, "b").as_deref(), Some(&b"b@40"[..]));
        assert_eq!(
            touched(&before, &t.sstables_per_read.counts()),
            bucket_of(0)
        );
        // without the option every source is read, as before
        t.options.write().timestamp_ordered = None;
        let before = t.sstables_per_read.counts();
        let p = t.read(&key, None).expect("read").expect("found");
        assert_eq!(value(&p, "b").as_deref(), Some(&b"b@40"[..]));
        assert_eq!(
            touched(&before, &t.sstables_per_read.counts()),
            bucket_of(2)
        );
    }

    /// Writes the partition `key` (as big-endian bytes) and flushes it into
    /// an SSTable of its own.
    async fn one_more_sstable(
        engine: &Arc<StorageEngine>,
        t: &Arc<ColumnFamilyStore>,
        id: uuid::Uuid,
        key: u32,
    ) {
        let k = DecoratedKey::new(Bytes::from(key.to_be_bytes().to_vec()));
        engine.apply(vec![write(id, &k)]).await.expect("apply");
        engine
            .flush(t, FlushReason::UserForced)
            .await
            .expect("flush");
    }

    /// A table in `dir/data/ks/t` with `n` partitions in its memtable.
    async fn table_with_keys(
        n: u32,
    ) -> (
        tempfile::TempDir,
        Arc<StorageEngine>,
        uuid::Uuid,
        Arc<ColumnFamilyStore>,
        Vec<DecoratedKey>,
    ) {
        let dir = tempfile::tempdir().expect("tmp");
        let engine = StorageEngine::new(StorageConfig::small(dir.path())).expect("engine");
        let id = uuid::Uuid::new_v4();
        let t = engine
            .add_table(id, sibyl_db::no_clustering(), dir.path().join("data/ks/t"))
            .expect("table");
        engine.start_commitlog(&[]).expect("log");
        let keys: Vec<DecoratedKey> = (0..n)
            .map(|i| DecoratedKey::new(Bytes::from(i.to_be_bytes().to_vec())))
            .collect();
        engine
            .apply(keys.iter().map(|k| write(id, k)).collect())
            .await
            .expect("apply");
        (dir, engine, id, t, keys)
    }

    /// The starvation guard: a table's compactions give way to requests
    /// while its backlog is small, and stop giving way once it has fallen
    /// behind (past `COMPACTION_BACKLOG_PRESSING` pending compactions).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compactions_give_way_to_requests_until_their_backlog_presses() {
        let (_dir, engine, id, t, _keys) = table_with_keys(10).await;
        t.options.write().auto_compaction = false;
        engine
            .flush(&t, FlushReason::UserForced)
            .await
            .expect("flush");
        assert_eq!(engine.compaction_priority(&t), Priority::Background);
        let mut round = 0u32;
        while StorageEngine::pending_compactions_of(&t) <= COMPACTION_BACKLOG_PRESSING {
            assert_eq!(engine.compaction_priority(&t), Priority::Background);
            one_more_sstable(&engine, &t, id, 1000 + round).await;
            round += 1;
            assert!(round < 200, "the backlog never grew: {}", t.sstable_count());
        }
        assert_eq!(engine.compaction_priority(&t), Priority::Normal);
        // a major compaction (whatever its priority) clears the backlog
        engine.compact(&t, true).await.expect("compact");
        assert_eq!(t.sstable_count(), 1);
        assert_eq!(engine.compaction_priority(&t), Priority::Background);
    }

    /// Incremental repair's sets: anticompaction splits an SSTable at the
    /// repaired ranges, the pending part is what the session sees, finishing
    /// makes it repaired (on disk too), and compaction never mixes sets.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn anticompaction_sets_a_range_aside_and_compaction_keeps_sets_apart() {
        let (_dir, engine, id, t, keys) = table_with_keys(200).await;
        let tdir = t.dir.clone();
        // the ring's upper half, (0, MAX]
        let session = uuid::Uuid::new_v4();
        let (moved, split) = engine
            .anticompact(&t, &[(0, i64::MAX)], session)
            .await
            .expect("anticompact");
        assert_eq!((moved, split), (0, 1), "the flushed SSTable straddles 0");
        let pending = t.sstables_in(RepairState::Pending(session));
        let unrepaired = t.sstables_in(RepairState::Unrepaired);
        assert_eq!((pending.len(), unrepaired.len()), (1, 1));
        assert!(pending[0].stats.min_token > 0);
        assert!(unrepaired[0].stats.max_token <= 0);
        let upper = keys.iter().filter(|k| k.token > 0).count();
        let in_session = |s: &SSTableReader| s.repair_state() == RepairState::Pending(session);
        let only_pending = Sources {
            memtables: false,
            sstables: Some(&in_session),
        };
        let seen = t
            .keys_from(None, i64::MIN, i64::MAX, 1000, only_pending)
            .expect("keys");
        assert_eq!(seen.len(), upper);
        assert!(t
            .read_from(&seen[0], None, only_pending)
            .expect("read")
            .is_some());
        let lower = keys.iter().find(|k| k.token <= 0).expect("a key below 0");
        assert!(t
            .read_from(lower, None, only_pending)
            .expect("read")
            .is_none());
        // a node that restarts mid-session gets its pending SSTables back as
        // unrepaired (another engine opens the same directory)
        {
            let other = tempfile::tempdir().expect("tmp");
            let e2 = StorageEngine::new(StorageConfig::small(other.path())).expect("engine");
            let copy = other.path().join("copy");
            std::fs::create_dir_all(&copy).expect("dir");
            for f in std::fs::read_dir(&tdir).expect("ls") {
                let f = f.expect("entry").path();
                if f.is_file() {
                    std::fs::copy(&f, copy.join(f.file_name().expect("name"))).expect("copy");
                }
            }
            let t2 = e2
                .add_table(id, sibyl_db::no_clustering(), copy)
                .expect("table");
            assert!(t2.sstables_in(RepairState::Pending(session)).is_empty());
            assert_eq!(t2.sstables_in(RepairState::Unrepaired).len(), 2);
        }
        // every key is still read through the table
        for k in &keys {
            assert!(t.read(k, None).expect("read").is_some());
        }
        // finished: repaired, also after the table is opened again
        assert_eq!(
            engine
                .finish_pending(&t, session, Some(1_700_000_000_000))
                .expect("finish"),
            1
        );
        assert_eq!(
            t.sstables_in(RepairState::Repaired(1_700_000_000_000))
                .len(),
            1
        );
        let pct = t.percent_repaired();
        assert!(pct > 0.0 && pct < 100.0, "{pct}");
        // more unrepaired SSTables: compaction merges them, never with the repaired one
        for round in 0..3u32 {
            one_more_sstable(&engine, &t, id, 1000 + round).await;
        }
        while engine.compact(&t, true).await.expect("compact").is_some() {
            if t.sstable_count() <= 2 {
                break;
            }
        }
        let states: Vec<RepairState> = t.sstables().iter().map(|s| s.repair_state()).collect();
        assert_eq!(states.len(), 2, "{states:?}");
        assert!(states.contains(&RepairState::Repaired(1_700_000_000_000)));
        assert!(states.contains(&RepairState::Unrepaired));
        let reopened = crate::sstable::SSTableReader::open(
            &tdir,
            t.sstables_in(RepairState::Repaired(1_700_000_000_000))[0].generation,
            t.comparator.clone(),
            crate::sstable::ChunkCache::new(1 << 20),
        )
        .expect("open");
        assert_eq!(
            reopened.repair_state(),
            RepairState::Repaired(1_700_000_000_000)
        );
    }

    /// `nodetool upgradesstables`: an SSTable of format 1 is rewritten in
    /// the current format with the same data and repair set; current ones
    /// only with `-a`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn upgradesstables_rewrites_old_formats_only() {
        let (_dir, engine, id, t, keys) = table_with_keys(50).await;
        let tdir = t.dir.clone();
        let g = engine
            .flush(&t, FlushReason::UserForced)
            .await
            .expect("flush")
            .expect("written");
        t.sstables()[0]
            .set_repair_state(RepairState::Repaired(7))
            .expect("mark");
        // the table as a node of the old format left it, opened by a node
        // of this build
        crate::sstable::rewrite_as_format_1(&tdir, g);
        let other = tempfile::tempdir().expect("tmp");
        let engine = StorageEngine::new(StorageConfig::small(other.path())).expect("engine");
        let t = engine
            .add_table(id, sibyl_db::no_clustering(), tdir.clone())
            .expect("table");
        engine.start_commitlog(&[]).expect("log");
        assert_eq!(t.sstables()[0].stats.version, 1);
        assert_eq!(
            engine.upgrade_sstables(&t, false).await.expect("upgrade"),
            1
        );
        let ss = t.sstables();
        assert_eq!(ss.len(), 1);
        assert_eq!(ss[0].stats.version, crate::sstable::FORMAT_VERSION);
        assert_eq!(ss[0].repair_state(), RepairState::Repaired(7));
        assert!(!crate::sstable::component_path(&tdir, g, "Data.db").exists());
        for k in &keys {
            assert!(t.read(k, None).expect("read").is_some());
        }
        // nothing old is left; -a rewrites the current ones too
        assert_eq!(
            engine.upgrade_sstables(&t, false).await.expect("upgrade"),
            0
        );
        assert_eq!(engine.upgrade_sstables(&t, true).await.expect("upgrade"), 1);
    }
}

/// The ring range `(start, end]` (wrapping; `start == end` is the whole
/// ring) as inclusive token intervals.
fn inclusive(start: i64, end: i64) -> Vec<(i128, i128)> {
    let (s, e) = (i128::from(start), i128::from(end));
    let (min, max) = (i128::from(i64::MIN), i128::from(i64::MAX));
    if s < e {
        vec![(s + 1, e)]
    } else if s > e {
        vec![(s + 1, max), (min, e)]
    } else {
        vec![(min, max)]
    }
}

/// Whether `token` is in `(start, end]`.
fn contains((start, end): (i64, i64), token: i64) -> bool {
    let t = i128::from(token);
    inclusive(start, end).iter().any(|&(a, b)| a <= t && t <= b)
}

/// Whether all of `[lo, hi]` is in `(start, end]`.
fn within((start, end): (i64, i64), lo: i64, hi: i64) -> bool {
    let (lo, hi) = (i128::from(lo), i128::from(hi));
    inclusive(start, end)
        .iter()
        .any(|&(a, b)| a <= lo && hi <= b)
}

/// Whether `(start, end]` and `[lo, hi]` share a token.
fn overlaps((start, end): (i64, i64), lo: i64, hi: i64) -> bool {
    let (lo, hi) = (i128::from(lo), i128::from(hi));
    inclusive(start, end)
        .iter()
        .any(|&(a, b)| a <= hi && lo <= b)
}

#[cfg(test)]
mod range_tests {
    use super::*;

    #[test]
    fn ring_ranges_hold_their_tokens() {
        assert!(contains((0, 10), 10) && !contains((0, 10), 0));
        assert!(contains((10, -10), 11) && contains((10, -10), -10) && !contains((10, -10), 0));
        assert!(contains((5, 5), 42));
        assert!(within((0, 10), 1, 10));
        assert!(within((10, -10), 11, 100));
        assert!(within((10, -10), -100, -10));
        assert!(!within((10, -10), -100, 100));
        assert!(
            overlaps((0, 10), 5, 20) && !overlaps((0, 10), 11, 20) && !overlaps((0, 10), -5, 0)
        );
        assert!(
            overlaps((10, -10), 0, 11)
                && overlaps((10, -10), -20, -10)
                && !overlaps((10, -10), -9, 10)
        );
    }
}

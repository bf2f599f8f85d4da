//! Streaming: moving the partitions of token ranges between nodes, for
//! bootstrap, decommission, removenode, rebuild and repair; and repair's
//! validation (hashes of a table's data over token ranges).
//!
//! A session is driven by the node that receives: it pulls pages of
//! partitions from the source (`STREAM_PAGE_REQ`, about 1 MiB each) range by
//! range, applies them through its write path, and flushes the tables it
//! received into SSTables before the session reports success, so that what
//! it received is durable. A page that fails is asked for again from the
//! last partition received (a session resumes where it stopped, up to
//! three times per page). The source paces its pages at
//! `stream_throughput_outbound` (shared by all the sessions it serves), and
//! pages to a node of another data center also at
//! `inter_dc_stream_throughput_outbound`, as Cassandra throttles on the
//! sending side.
//!
//! Partitions travel whole, with their tombstones, as mutations: the
//! receiver reconciles them with what it has, cell by cell, so streaming the
//! same range twice changes nothing.

use crate::proxy::StorageProxy;
use parking_lot::Mutex;
use sibyl_cluster::messaging::{ReplicaFailure, Request, Response, StreamPlan, StreamSet};
use sibyl_db::{DecoratedKey, Mutation};
use sibyl_storage::sstable::{RepairState, SSTableReader};
use sibyl_storage::Sources;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes a page carries at most (one partition may exceed it).
pub const PAGE_BYTES: u32 = 1 << 20;

/// How long a receiver waits for one page.
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Tries per page before the session fails.
const PAGE_TRIES: usize = 3;

/// Sessions kept for `nodetool netstats` after they end.
const FINISHED_KEPT: usize = 32;

/// Paces bytes at a rate (0: unlimited).
#[derive(Debug)]
pub struct Throttle {
    bytes_per_second: AtomicU64,
    next: Mutex<Instant>,
}

impl Throttle {
    pub fn new(bytes_per_second: u64) -> Throttle {
        Throttle {
            bytes_per_second: AtomicU64::new(bytes_per_second),
            next: Mutex::new(Instant::now()),
        }
    }

    pub fn rate(&self) -> u64 {
        self.bytes_per_second.load(Ordering::Relaxed)
    }

    pub fn set_rate(&self, bytes_per_second: u64) {
        self.bytes_per_second
            .store(bytes_per_second, Ordering::Relaxed);
    }

    /// Waits for `bytes` to be due at the rate: callers in turn, each
    /// after the bytes of those before it.
    pub async fn acquire(&self, bytes: u64) {
        let rate = self.rate();
        if rate == 0 {
            return;
        }
        let wait = {
            let mut next = self.next.lock();
            let now = Instant::now();
            if *next < now {
                *next = now;
            }
            let start = *next;
            *next += Duration::from_secs_f64(bytes as f64 / rate as f64);
            start.saturating_duration_since(now)
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// One stream session as `nodetool netstats` shows it.
#[derive(Debug)]
pub struct SessionState {
    pub id: uuid::Uuid,
    pub operation: String,
    pub peer: IpAddr,
    /// Receiving (this node pulls) or sending (this node serves).
    pub receiving: bool,
    pub ranges_total: usize,
    pub ranges_done: AtomicUsize,
    pub partitions: AtomicU64,
    pub bytes: AtomicU64,
    pub started: Instant,
    pub finished: AtomicBool,
    pub error: Mutex<Option<String>>,
}

/// What a finished session moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamSummary {
    pub ranges: usize,
    pub partitions: u64,
    pub bytes: u64,
}

/// The node's streams: the outbound throttle, the sessions it receives,
/// and the bytes it has sent to each peer.
#[derive(Debug)]
pub struct StreamManager {
    pub outbound: Throttle,
    /// What goes to nodes of other data centers, on top of `outbound`.
    pub inter_dc: Throttle,
    sessions: Mutex<VecDeque<Arc<SessionState>>>,
    sent: Mutex<HashMap<IpAddr, (u64, u64)>>,
}

impl Default for StreamManager {
    fn default() -> Self {
        // Cassandra's default `stream_throughput_outbound`: 24 MiB/s
        StreamManager {
            outbound: Throttle::new(24 * 1024 * 1024),
            // and its `inter_dc_stream_throughput_outbound`
            inter_dc: Throttle::new(24 * 1024 * 1024),
            sessions: Mutex::new(VecDeque::new()),
            sent: Mutex::new(HashMap::new()),
        }
    }
}

impl StreamManager {
    /// Every session, oldest first.
    pub fn sessions(&self) -> Vec<Arc<SessionState>> {
        self.sessions.lock().iter().cloned().collect()
    }

    /// Partitions and bytes served to each peer.
    pub fn sent(&self) -> Vec<(IpAddr, u64, u64)> {
        let mut v: Vec<_> = self
            .sent
            .lock()
            .iter()
            .map(|(a, (p, b))| (*a, *p, *b))
            .collect();
        v.sort();
        v
    }

    fn register(&self, s: Arc<SessionState>) {
        let mut all = self.sessions.lock();
        all.push_back(s);
        while all.len() > FINISHED_KEPT {
            match all.iter().position(|s| s.finished.load(Ordering::Relaxed)) {
                Some(i) => {
                    all.remove(i);
                }
                None => break,
            }
        }
    }
}

/// The token ranges `(start, end]` of a ring as inclusive ranges a scan
/// understands: `start + 1 ..= end`, a range that wraps cut in two.
pub fn inclusive_ranges(start: i64, end: i64) -> Vec<(i64, i64)> {
    if start < end {
        vec![(start + 1, end)]
    } else if start == end {
        // the whole ring (one token)
        vec![(i64::MIN, i64::MAX)]
    } else {
        let mut v = Vec::new();
        if start < i64::MAX {
            v.push((start + 1, i64::MAX));
        }
        v.push((i64::MIN, end));
        v
    }
}

/// What a stream page or a validation reads of a table: one of its repair
/// sets, or everything.
struct View {
    cfs: Arc<sibyl_storage::ColumnFamilyStore>,
    set: StreamSet,
}

impl View {
    fn new(cfs: Arc<sibyl_storage::ColumnFamilyStore>, set: StreamSet) -> View {
        View { cfs, set }
    }

    /// Whether an SSTable is in the set.
    fn keeps(&self, s: &SSTableReader) -> bool {
        match self.set {
            StreamSet::All => true,
            StreamSet::Pending(id) => s.repair_state() == RepairState::Pending(id),
            StreamSet::Repaired => s.repair_state().is_repaired(),
            StreamSet::NotRepaired => !s.repair_state().is_repaired(),
        }
    }

    /// The set as the storage engine reads it.
    fn with_sources<R>(&self, f: impl FnOnce(Sources) -> R) -> R {
        let keep = |s: &SSTableReader| self.keeps(s);
        f(Sources {
            memtables: matches!(self.set, StreamSet::All | StreamSet::NotRepaired),
            sstables: (self.set != StreamSet::All)
                .then_some(&keep as &dyn Fn(&SSTableReader) -> bool),
        })
    }

    fn keys(
        &self,
        after: Option<&DecoratedKey>,
        lo: i64,
        hi: i64,
        limit: usize,
    ) -> Result<Vec<DecoratedKey>, sibyl_storage::StorageError> {
        self.with_sources(|src| self.cfs.keys_from(after, lo, hi, limit, src))
    }

    fn read(
        &self,
        key: &DecoratedKey,
    ) -> Result<Option<sibyl_db::Partition>, sibyl_storage::StorageError> {
        match self.set {
            // (through the caches, as a query)
            StreamSet::All => self.cfs.read(key, None),
            _ => self.with_sources(|src| self.cfs.read_from(key, None, src)),
        }
    }

    /// Of the repaired set, its oldest repair (ms): what the receiver's
    /// copy is repaired as of.
    fn repaired_at(&self) -> Option<i64> {
        (self.set == StreamSet::Repaired).then(|| {
            self.cfs
                .sstables()
                .iter()
                .filter_map(|s| match s.repair_state() {
                    RepairState::Repaired(at) => Some(at),
                    _ => None,
                })
                .min()
                .unwrap_or(1)
        })
    }
}

/// Partitions a stream writes into a repair set (pending or repaired) go
/// into SSTables of at most about this many bytes.
const RECEIVED_MEMTABLE_BYTES: usize = 64 << 20;

/// What a stream has received for a repair set and not yet written.
#[derive(Default)]
struct Received {
    memtable: Arc<sibyl_storage::memtable::Memtable>,
    /// The oldest repair of the repaired pages among it (ms).
    repaired_at: Option<i64>,
}

impl Received {
    fn add(&mut self, mutations: Vec<sibyl_db::Mutation>, repaired_at: Option<i64>) {
        let now = sibyl_storage::now_in_seconds();
        for m in mutations {
            self.memtable.apply(m, now);
        }
        if let Some(at) = repaired_at {
            self.repaired_at = Some(self.repaired_at.map_or(at, |r| r.min(at)));
        }
    }

    fn bytes(&self) -> usize {
        self.memtable.live_bytes()
    }
}

impl StorageProxy {
    /// The stream sessions of this node.
    pub fn streams(&self) -> &StreamManager {
        &self.streams
    }

    /// One page of a range's partitions (the source's side of a session),
    /// paced by the outbound throttle.
    pub(crate) async fn serve_stream_page(
        &self,
        from: IpAddr,
        table_id: uuid::Uuid,
        range: (i64, i64),
        after: Option<bytes::Bytes>,
        max_bytes: u32,
        set: StreamSet,
    ) -> Response {
        let Some(cfs) = self.replica.storage.table(table_id) else {
            return Response::Failure(ReplicaFailure::UnknownTable(table_id));
        };
        let cfs = View::new(cfs, set);
        let mut cursor = after.map(DecoratedKey::new);
        let mut mutations = Vec::new();
        let mut bytes = 0usize;
        let mut buf = Vec::new();
        let more = loop {
            let keys = match cfs.keys(cursor.as_ref(), range.0, range.1, 128) {
                Ok(k) => k,
                Err(e) => return Response::Failure(ReplicaFailure::Error(e.to_string())),
            };
            let exhausted = keys.len() < 128;
            let mut full = false;
            for k in keys {
                cursor = Some(k.clone());
                let p = match cfs.read(&k) {
                    Ok(Some(p)) if !p.is_empty() => p,
                    Ok(_) => continue,
                    Err(e) => return Response::Failure(ReplicaFailure::Error(e.to_string())),
                };
                let m = Mutation {
                    table_id,
                    key: k,
                    update: p,
                };
                buf.clear();
                sibyl_db::serde::encode_mutation(&m, &mut buf);
                bytes += buf.len();
                mutations.push(m);
                if bytes >= max_bytes as usize {
                    full = true;
                    break;
                }
            }
            if full {
                // more unless this was the range's last key
                break cfs
                    .keys(cursor.as_ref(), range.0, range.1, 1)
                    .map(|k| !k.is_empty())
                    .unwrap_or(true);
            }
            if exhausted {
                break false;
            }
        };
        self.streams.outbound.acquire(bytes as u64).await;
        if self
            .datacenter_of(from)
            .is_some_and(|dc| dc != self.local_dc())
        {
            self.streams.inter_dc.acquire(bytes as u64).await;
        }
        {
            let mut sent = self.streams.sent.lock();
            let e = sent.entry(from).or_default();
            e.0 += mutations.len() as u64;
            e.1 += bytes as u64;
        }
        Response::StreamPage {
            mutations,
            more,
            repaired_at: cfs.repaired_at(),
        }
    }

    /// Runs a session on this node, the receiver: pulls every range of the
    /// plan from its source, applies it, and flushes the tables it wrote.
    pub async fn run_stream_session(&self, plan: StreamPlan) -> Result<StreamSummary, String> {
        let state = Arc::new(SessionState {
            id: plan.id,
            operation: plan.operation.clone(),
            peer: plan.source,
            receiving: true,
            ranges_total: plan.tables.iter().map(|(_, r)| r.len()).sum(),
            ranges_done: AtomicUsize::new(0),
            partitions: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            started: Instant::now(),
            finished: AtomicBool::new(false),
            error: Mutex::new(None),
        });
        self.streams.register(state.clone());
        tracing::info!(
            "[Stream #{}] {} session with {}: receiving {} ranges of {} tables",
            plan.id,
            plan.operation,
            plan.source,
            state.ranges_total,
            plan.tables.len()
        );
        let r = self.pull(&plan, &state).await;
        state.finished.store(true, Ordering::Relaxed);
        let summary = StreamSummary {
            ranges: state.ranges_done.load(Ordering::Relaxed),
            partitions: state.partitions.load(Ordering::Relaxed),
            bytes: state.bytes.load(Ordering::Relaxed),
        };
        match &r {
            Ok(()) => tracing::info!(
                "[Stream #{}] {} session with {} complete: {} ranges, {} partitions, {} bytes in {:.1} s",
                plan.id,
                plan.operation,
                plan.source,
                summary.ranges,
                summary.partitions,
                summary.bytes,
                state.started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                *state.error.lock() = Some(e.clone());
                tracing::warn!(
                    "[Stream #{}] {} session with {} failed: {e}",
                    plan.id,
                    plan.operation,
                    plan.source
                );
            }
        }
        r.map(|_| summary)
    }

    async fn pull(&self, plan: &StreamPlan, state: &SessionState) -> Result<(), String> {
        let mut written = Vec::new();
        for (table_id, ranges) in &plan.tables {
            let Some(cfs) = self.replica.storage.table(*table_id) else {
                // dropped since the plan was made
                state.ranges_done.fetch_add(ranges.len(), Ordering::Relaxed);
                continue;
            };
            written.push(*table_id);
            // What arrives keeps its repair set, as in Cassandra: an
            // incremental repair's into its pending set; otherwise, from a
            // source that speaks version 3, the repaired data into repaired
            // SSTables and the rest through the write path. A table with
            // indexes takes everything through the write path, which keeps
            // its index entries (the data is unrepaired then).
            let indexed = self
                .schema()
                .table_by_id(*table_id)
                .is_some_and(|t| !t.indexes.is_empty());
            let by_set = !indexed
                && self.messaging.messaging_version(plan.source)
                    >= sibyl_cluster::net::codec::MESSAGING_VERSION_INCREMENTAL_REPAIR;
            let passes = match plan.pending {
                Some(session) => vec![StreamSet::Pending(session)],
                None if by_set => vec![StreamSet::Repaired, StreamSet::NotRepaired],
                None => vec![StreamSet::All],
            };
            for set in passes {
                let into_set = match set {
                    StreamSet::Pending(_) | StreamSet::Repaired => !indexed,
                    _ => false,
                };
                let mut received = Received::default();
                for range in ranges {
                    let mut after: Option<bytes::Bytes> = None;
                    loop {
                        let (mutations, more, repaired_at) = self
                            .page(plan, *table_id, *range, after.clone(), set)
                            .await?;
                        if let Some(last) = mutations.last() {
                            after = Some(last.key.key.clone());
                        }
                        let mut size = 0u64;
                        let mut buf = Vec::new();
                        for m in &mutations {
                            buf.clear();
                            sibyl_db::serde::encode_mutation(m, &mut buf);
                            size += buf.len() as u64;
                        }
                        let n = mutations.len() as u64;
                        if into_set {
                            received.add(mutations, repaired_at);
                            if received.bytes() >= RECEIVED_MEMTABLE_BYTES {
                                self.write_received(&cfs, &mut received, set).await?;
                            }
                        } else if !mutations.is_empty() {
                            self.replica
                                .apply(mutations)
                                .await
                                .map_err(|f| format!("applying streamed partitions: {f:?}"))?;
                        }
                        state.partitions.fetch_add(n, Ordering::Relaxed);
                        state.bytes.fetch_add(size, Ordering::Relaxed);
                        if !more {
                            break;
                        }
                    }
                    if set != StreamSet::Repaired {
                        state.ranges_done.fetch_add(1, Ordering::Relaxed);
                    }
                }
                self.write_received(&cfs, &mut received, set).await?;
            }
        }
        // durable before success: what was received is in SSTables
        for id in written {
            if let Some(t) = self.replica.storage.table(id) {
                self.replica
                    .storage
                    .flush(&t, sibyl_storage::store::FlushReason::StreamsReceived)
                    .await
                    .map_err(|e| format!("flushing streamed data: {e}"))?;
            }
        }
        Ok(())
    }

    /// One page of a range of a set from the plan's source, asked again
    /// (from the last partition received) when it fails.
    async fn page(
        &self,
        plan: &StreamPlan,
        table_id: uuid::Uuid,
        range: (i64, i64),
        after: Option<bytes::Bytes>,
        set: StreamSet,
    ) -> Result<(Vec<sibyl_db::Mutation>, bool, Option<i64>), String> {
        let mut tries = 0;
        loop {
            tries += 1;
            let answer = if plan.source == self.local_address() {
                Some(
                    self.serve_stream_page(
                        plan.source,
                        table_id,
                        range,
                        after.clone(),
                        PAGE_BYTES,
                        set,
                    )
                    .await,
                )
            } else {
                let request = Request::StreamPage {
                    table_id,
                    range,
                    after: after.clone(),
                    max_bytes: PAGE_BYTES,
                    set,
                };
                self.messaging
                    .send_and_receive(plan.source, request, PAGE_TIMEOUT)
                    .await
                    .ok()
            };
            match answer {
                Some(Response::StreamPage {
                    mutations,
                    more,
                    repaired_at,
                }) => return Ok((mutations, more, repaired_at)),
                Some(Response::Failure(ReplicaFailure::UnknownTable(_))) => {
                    return Ok((Vec::new(), false, None))
                }
                other if tries >= PAGE_TRIES => {
                    return Err(format!(
                        "no page of range ({}, {}] from {} after {tries} tries: {other:?}",
                        range.0.saturating_sub(1),
                        range.1,
                        plan.source
                    ))
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// Writes what a stream received for a repair set (an incremental
    /// session's pending set, or the repaired set) into SSTables of that set.
    async fn write_received(
        &self,
        cfs: &Arc<sibyl_storage::ColumnFamilyStore>,
        received: &mut Received,
        set: StreamSet,
    ) -> Result<(), String> {
        let state = match set {
            StreamSet::Pending(session) => RepairState::Pending(session),
            StreamSet::Repaired => RepairState::Repaired(received.repaired_at.unwrap_or(1)),
            _ => return Ok(()),
        };
        let full = std::mem::take(received);
        self.replica
            .storage
            .write_received(cfs, full.memtable, state)
            .await
            .map(|_| ())
            .map_err(|e| format!("writing streamed partitions: {e}"))
    }

    /// Repair's validation: one MD5 per range over the table's partitions
    /// in token order (each partition's key and reconciled content); an
    /// incremental repair hashes its session's pending SSTables only.
    pub(crate) fn validate(
        &self,
        table_id: uuid::Uuid,
        ranges: &[(i64, i64)],
        pending: Option<uuid::Uuid>,
    ) -> Result<Vec<[u8; 16]>, ReplicaFailure> {
        use md5::Digest;
        let cfs = self.store_of(table_id)?;
        let cfs = View::new(cfs, pending.map_or(StreamSet::All, StreamSet::Pending));
        let err = |e: sibyl_storage::StorageError| ReplicaFailure::Error(e.to_string());
        let mut hashers: Vec<md5::Md5> = ranges.iter().map(|_| md5::Md5::new()).collect();
        // the ranges in token order, scanned in runs of touching ranges: one
        // scan per run rather than one per range (a range of many leaves)
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|i| ranges[*i]);
        let mut run_start = 0;
        while run_start < order.len() {
            let mut run_end = run_start + 1;
            while run_end < order.len() {
                let (_, prev_hi) = ranges[order[run_end - 1]];
                let (lo, _) = ranges[order[run_end]];
                if prev_hi == i64::MAX || prev_hi + 1 != lo {
                    break;
                }
                run_end += 1;
            }
            let run = &order[run_start..run_end];
            let lo = ranges[run[0]].0;
            let hi = ranges[run[run.len() - 1]].1;
            let mut leaf = 0;
            let mut cursor: Option<DecoratedKey> = None;
            loop {
                let keys = cfs.keys(cursor.as_ref(), lo, hi, 256).map_err(err)?;
                for k in &keys {
                    while leaf + 1 < run.len() && k.token > ranges[run[leaf]].1 {
                        leaf += 1;
                    }
                    if let Some(p) = cfs.read(k).map_err(err)? {
                        if !p.is_empty() {
                            hashers[run[leaf]].update(sibyl_db::read::digest(&[(k.clone(), p)]));
                        }
                    }
                }
                if keys.len() < 256 {
                    break;
                }
                cursor = keys.last().cloned();
            }
            run_start = run_end;
        }
        Ok(hashers.into_iter().map(|h| h.finalize().into()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_ranges_become_inclusive_scans() {
        assert_eq!(inclusive_ranges(5, 10), vec![(6, 10)]);
        assert_eq!(inclusive_ranges(10, 5), vec![(11, i64::MAX), (i64::MIN, 5)]);
        assert_eq!(inclusive_ranges(3, 3), vec![(i64::MIN, i64::MAX)]);
        assert_eq!(inclusive_ranges(i64::MAX, 0), vec![(i64::MIN, 0)]);
    }

    #[tokio::test]
    async fn the_throttle_paces_bytes() {
        let t = Throttle::new(1_000_000);
        let started = Instant::now();
        for _ in 0..5 {
            t.acquire(100_000).await;
        }
        // the first goes at once, four more take 0.4 s
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(380), "{took:?}");
        assert!(took < Duration::from_millis(900), "{took:?}");
        let free = Throttle::new(0);
        let started = Instant::now();
        free.acquire(u64::MAX).await;
        assert!(started.elapsed() < Duration::from_millis(50));
    }
}

//! Anti-entropy repair (`nodetool repair`): for every range this node
//! replicates (or only its primary ranges, or a sub-range), each replica
//! hashes its data over the range's leaves (`VALIDATION_REQ`); leaves whose
//! hashes differ are streamed between the replicas that disagree, each one
//! pulling the leaf from every replica whose hash differs from its own.
//!
//! Cassandra builds a Merkle tree per range and compares it top-down; the
//! leaves are what decides what streams, and here they are compared
//! directly. A range is cut into about one leaf per partition (a power of
//! two, 32 to 65,536: [`leaves_for`]), as Cassandra sizes its trees, so
//! that what streams is close to what differs.
//!
//! Incremental repair (the default, as in Cassandra 4+; `-full` is the
//! other): every participant first sets what its unrepaired SSTables hold
//! of the ranges aside as the session's pending set (`PREPARE_CONSISTENT_REQ`:
//! flush, anticompaction); validation hashes only pending SSTables, streams
//! serve only them and write into the receiver's pending set; when every
//! range succeeded the pending sets become repaired (`FINALIZE_COMMIT_MSG`),
//! else unrepaired again. Data repaired once is never validated again.
//! It needs every participant at messaging version 3; otherwise the repair
//! runs as a full one and says so.

use crate::proxy::StorageProxy;
use crate::streaming::inclusive_ranges;
use crate::topology::{primary_ranges, replicated_ranges};
use sibyl_cluster::messaging::{ReplicaFailure, Request, Response, StreamPlan};
use sibyl_schema::schema_tables::{inet, text, uuid};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// Leaves per range, at least (a range with fewer partitions).
pub const LEAVES: u64 = 32;

/// Leaves per range, at most: 16 bytes each in a validation answer (1 MiB),
/// as Cassandra bounds its Merkle trees (depth 20 at most).
pub const MAX_LEAVES: u64 = 1 << 16;

/// How many leaves a range of a table gets: about one per partition (from
/// this node's estimate of the table's partitions and the range's share of
/// the ring), as Cassandra sizes its Merkle trees, so that a few missed
/// writes make a few leaves differ, and only those stream.
pub fn leaves_for(partitions: u64, range: (i64, i64)) -> u64 {
    let width: u128 = if range.0 == range.1 {
        1u128 << 64
    } else {
        range.1.wrapping_sub(range.0) as u64 as u128
    };
    let share = (partitions as u128).saturating_mul(width) >> 64;
    (share.min(u128::from(MAX_LEAVES)) as u64)
        .next_power_of_two()
        .clamp(LEAVES, MAX_LEAVES)
}

/// How long a replica may take to hash a range.
const VALIDATION_TIMEOUT: Duration = Duration::from_secs(600);

/// What to repair.
#[derive(Debug, Clone, Default)]
pub struct RepairOptions {
    pub keyspace: String,
    /// Tables (all of the keyspace's when empty).
    pub tables: Vec<String>,
    /// `-pr`: only the ranges this node is the primary replica of.
    pub primary_range: bool,
    /// `-st` / `-et`: only the part of the ranges inside `(start, end]`.
    pub sub_range: Option<(i64, i64)>,
    /// `--in-local-dc`: only replicas of this node's data center.
    pub local_dc_only: bool,
    /// The repair command's number on this node (`Starting repair command #N`).
    pub command: u64,
    /// The internode port (`repair_history`'s `coordinator_port`).
    pub storage_port: u16,
    /// Incremental (the default of `nodetool repair`), or full (`-full`).
    pub incremental: bool,
    /// `-j`: tables validated at once (1 to 4).
    pub job_threads: usize,
}

/// Cassandra's bound on `-j` (`RepairOption.MAX_JOB_THREADS`).
pub const MAX_JOB_THREADS: usize = 4;

/// What a repair did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairSummary {
    pub ranges: usize,
    pub leaves_checked: usize,
    pub leaves_out_of_sync: usize,
    pub streams: usize,
    pub partitions_streamed: u64,
    pub bytes_streamed: u64,
}

/// `(start, end]` cut into `n` leaves of equal token width (the last one
/// ends at `end`).
pub fn leaves(start: i64, end: i64, n: u64) -> Vec<(i64, i64)> {
    let width: u128 = if start == end {
        1u128 << 64
    } else {
        end.wrapping_sub(start) as u64 as u128
    };
    let n = (n as u128).min(width).max(1);
    let mut out = Vec::with_capacity(n as usize);
    let mut lo = start;
    for i in 1..=n {
        let hi = if i == n {
            end
        } else {
            start.wrapping_add((width * i / n) as u64 as i64)
        };
        out.push((lo, hi));
        lo = hi;
    }
    out
}

/// The part of `(a, b]` inside `(s, e]` (neither wrapping), if any.
fn intersect(piece: (i64, i64), sub: (i64, i64)) -> Vec<(i64, i64)> {
    let unwrap = |(x, y): (i64, i64)| -> Vec<(i128, i128)> {
        let (x, y) = (x as i128, y as i128);
        if x < y {
            vec![(x, y)]
        } else {
            vec![(x, i64::MAX as i128), (i64::MIN as i128 - 1, y)]
        }
    };
    let mut out = Vec::new();
    for (a, b) in unwrap(piece) {
        for (s, e) in unwrap(sub) {
            let (lo, hi) = (a.max(s), b.min(e));
            if lo < hi {
                let lo = if lo < i64::MIN as i128 {
                    i64::MAX
                } else {
                    lo as i64
                };
                out.push((lo, hi as i64));
            }
        }
    }
    out
}

/// The hash of a leaf without partitions.
fn empty_leaf() -> [u8; 16] {
    use md5::Digest;
    md5::Md5::new().finalize().into()
}

/// The leaves a replica with hashes `mine` pulls from one with `theirs`:
/// those that differ, and between two of them the leaves the source has
/// nothing in (they cost nothing and join the two into one range to
/// stream: one page request instead of many).
fn leaves_to_pull(
    leaves: &[(i64, i64)],
    mine: &[[u8; 16]],
    theirs: &[[u8; 16]],
) -> Vec<(i64, i64)> {
    let empty = empty_leaf();
    let mut out = Vec::new();
    let mut bridge = Vec::new();
    let mut open = false;
    for (i, leaf) in leaves.iter().enumerate() {
        if mine[i] != theirs[i] {
            out.append(&mut bridge);
            out.push(*leaf);
            open = true;
        } else if open && theirs[i] == empty {
            bridge.push(*leaf);
        } else {
            open = false;
            bridge.clear();
        }
    }
    out
}

/// `(start,end]` as Cassandra's `Range.toString` writes it.
fn range_text((start, end): (i64, i64)) -> String {
    format!("({start},{end}]")
}

fn timestamp_now() -> bytes::Bytes {
    let ms = sibyl_types::timeuuid::timestamp_micros_now() / 1000;
    bytes::Bytes::copy_from_slice(&ms.to_be_bytes())
}

fn set_of(items: impl IntoIterator<Item = bytes::Bytes>) -> bytes::Bytes {
    let mut v: Vec<bytes::Bytes> = items.into_iter().collect();
    v.sort();
    v.dedup();
    sibyl_types::value::serialize_collection(&v)
}

/// The incremental repair sessions this node takes part in (Cassandra's
/// `LocalSessions`): the tables each prepared and when, so that a session
/// whose coordinator never finishes it (it died, or its message was lost)
/// is failed after `repair_fail_timeout`, and its pending SSTables become
/// unrepaired again instead of staying out of compaction for good.
pub struct LocalSessions {
    prepared: parking_lot::Mutex<BTreeMap<uuid::Uuid, (std::time::Instant, Vec<uuid::Uuid>)>>,
    timeout: parking_lot::Mutex<Duration>,
}

impl Default for LocalSessions {
    fn default() -> Self {
        LocalSessions {
            prepared: parking_lot::Mutex::new(BTreeMap::new()),
            // Cassandra's -Dcassandra.repair_fail_timeout_seconds default: a day
            timeout: parking_lot::Mutex::new(Duration::from_secs(24 * 3600)),
        }
    }
}

impl LocalSessions {
    pub fn set_timeout(&self, timeout: Duration) {
        *self.timeout.lock() = timeout;
    }

    fn prepared(&self, session: uuid::Uuid, table_id: uuid::Uuid) {
        let mut all = self.prepared.lock();
        let e = all
            .entry(session)
            .or_insert_with(|| (std::time::Instant::now(), Vec::new()));
        e.1.push(table_id);
    }

    fn finished(&self, session: uuid::Uuid, table_id: uuid::Uuid) {
        let mut all = self.prepared.lock();
        if let Some(e) = all.get_mut(&session) {
            e.1.retain(|t| *t != table_id);
            if e.1.is_empty() {
                all.remove(&session);
            }
        }
    }

    /// Sessions prepared longer ago than the timeout, with their tables.
    fn timed_out(&self) -> Vec<(uuid::Uuid, Vec<uuid::Uuid>)> {
        let timeout = *self.timeout.lock();
        self.prepared
            .lock()
            .iter()
            .filter(|(_, (at, _))| at.elapsed() >= timeout)
            .map(|(s, (_, tables))| (*s, tables.clone()))
            .collect()
    }
}

/// How the ranges of one repair command run.
#[derive(Debug, Clone, Copy)]
struct RunOptions {
    /// The incremental session whose pending SSTables are compared.
    pending: Option<uuid::Uuid>,
    job_threads: usize,
}

/// Each participant of `work` with the ranges it replicates.
fn ranges_by_participant(work: &[((i64, i64), Vec<IpAddr>)]) -> BTreeMap<IpAddr, Vec<(i64, i64)>> {
    let mut by: BTreeMap<IpAddr, Vec<(i64, i64)>> = BTreeMap::new();
    for (range, replicas) in work {
        if replicas.len() < 2 {
            continue;
        }
        for a in replicas {
            by.entry(*a).or_default().push(*range);
        }
    }
    by
}

impl StorageProxy {
    /// A table's store on this node, or the failure that names the table.
    pub(crate) fn store_of(
        &self,
        table_id: uuid::Uuid,
    ) -> Result<Arc<sibyl_storage::ColumnFamilyStore>, ReplicaFailure> {
        self.replica
            .storage
            .table(table_id)
            .ok_or(ReplicaFailure::UnknownTable(table_id))
    }

    /// What a node does with `REPAIR_SYNCED_REQ`, `PREPARE_CONSISTENT_REQ`
    /// and `FINALIZE_COMMIT_MSG`, from a peer or from itself.
    pub(crate) async fn carry_out_repair_message(
        &self,
        request: Request,
    ) -> Result<(), ReplicaFailure> {
        match request {
            Request::RepairPrepare {
                session,
                table_id,
                ranges,
            } => self.prepare_pending(session, table_id, &ranges).await,
            Request::RepairFinish {
                session,
                table_id,
                repaired_at,
            } => self.finish_pending(session, table_id, repaired_at),
            Request::RepairSynced {
                table_id,
                ranges,
                repaired_at,
            } => self.mark_repaired(table_id, &ranges, repaired_at),
            other => Err(ReplicaFailure::Error(format!(
                "{} is not a repair message",
                other.verb().name()
            ))),
        }
    }

    /// A repair message answered `Done`, to another node or carried out
    /// here when `to` is this node.
    async fn ask(&self, to: IpAddr, request: Request, timeout: Duration) -> Result<(), String> {
        if to == self.local_address() {
            return self
                .carry_out_repair_message(request)
                .await
                .map_err(|f| format!("{f:?}"));
        }
        match self.messaging.send_and_receive(to, request, timeout).await {
            Ok(Response::Done) => Ok(()),
            Ok(other) => Err(format!("{other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `PREPARE_CONSISTENT_REQ` (and the coordinator's own part): flush the
    /// table and set its unrepaired data of `ranges` aside for `session`.
    async fn prepare_pending(
        &self,
        session: uuid::Uuid,
        table_id: uuid::Uuid,
        ranges: &[(i64, i64)],
    ) -> Result<(), ReplicaFailure> {
        let cfs = self.store_of(table_id)?;
        self.repair_sessions.prepared(session, table_id);
        self.replica
            .storage
            .anticompact(&cfs, ranges, session)
            .await
            .map(|_| ())
            .map_err(|e| ReplicaFailure::Error(e.to_string()))
    }

    /// `FINALIZE_COMMIT_MSG` (and the coordinator's own part): the
    /// session's pending SSTables become repaired as of `repaired_at` (ms),
    /// or unrepaired again (0).
    fn finish_pending(
        &self,
        session: uuid::Uuid,
        table_id: uuid::Uuid,
        repaired_at: i64,
    ) -> Result<(), ReplicaFailure> {
        self.repair_sessions.finished(session, table_id);
        let cfs = self.store_of(table_id)?;
        let n = self
            .replica
            .storage
            .finish_pending(&cfs, session, (repaired_at > 0).then_some(repaired_at))
            .map_err(|e| ReplicaFailure::Error(e.to_string()))?;
        if n > 0 {
            let (ks, t) = cfs.names();
            tracing::info!(
                "[repair #{session}] {} {n} sstables of {ks}.{t}",
                if repaired_at > 0 {
                    "Marked repaired"
                } else {
                    "Released"
                }
            );
        }
        Ok(())
    }

    /// Fails the sessions this node prepared that nobody finished within
    /// the timeout (their pending SSTables become unrepaired again).
    pub fn fail_timed_out_repair_sessions(&self) {
        for (session, tables) in self.repair_sessions.timed_out() {
            tracing::info!("Auto failing timed out repair session {session}");
            for table_id in tables {
                if let Err(e) = self.finish_pending(session, table_id, 0) {
                    tracing::warn!("[repair #{session}] could not release its SSTables: {e:?}");
                }
            }
        }
    }

    /// Every participant prepares its pending set of every table.
    async fn prepare_session(
        &self,
        session: uuid::Uuid,
        work: &[((i64, i64), Vec<IpAddr>)],
        tables: &[(String, uuid::Uuid)],
    ) -> Result<(), String> {
        for (participant, ranges) in ranges_by_participant(work) {
            for (name, table_id) in tables {
                let request = Request::RepairPrepare {
                    session,
                    table_id: *table_id,
                    ranges: ranges.clone(),
                };
                let outcome = self.ask(participant, request, VALIDATION_TIMEOUT).await;
                outcome.map_err(|e| {
                    format!("Prepare phase for incremental repair of {name} failed on /{participant}: {e}")
                })?;
            }
        }
        Ok(())
    }

    /// Every participant ends the session: repaired as of `repaired_at`
    /// (ms), or unrepaired again (`None`). A participant that does not hear
    /// it fails the session itself after `repair_fail_timeout`
    /// ([`LocalSessions`]); its data stays readable meanwhile.
    async fn finish_session(
        &self,
        session: uuid::Uuid,
        work: &[((i64, i64), Vec<IpAddr>)],
        tables: &[(String, uuid::Uuid)],
        repaired_at: Option<i64>,
    ) {
        let at = repaired_at.unwrap_or(0);
        for participant in ranges_by_participant(work).into_keys() {
            for (_, table_id) in tables {
                let request = Request::RepairFinish {
                    session,
                    table_id: *table_id,
                    repaired_at: at,
                };
                let outcome = self
                    .ask(participant, request, Duration::from_secs(60))
                    .await;
                if let Err(e) = outcome {
                    tracing::warn!(
                        "[repair #{session}] could not finish the session on /{participant}: {e}"
                    );
                }
            }
        }
    }

    /// `REPAIR_SYNCED_REQ` (and the coordinator's own replica): the table's
    /// `ranges` are consistent as of `repaired_at`.
    fn mark_repaired(
        &self,
        table_id: uuid::Uuid,
        ranges: &[(i64, i64)],
        repaired_at: i32,
    ) -> Result<(), ReplicaFailure> {
        let cfs = self.store_of(table_id)?;
        cfs.mark_repaired(ranges, repaired_at)
            .map_err(|e| ReplicaFailure::Error(e.to_string()))
    }

    /// Tells every replica of a range that a repair which started at
    /// `started` made it consistent (each records it for `tombstone_gc`
    /// mode `repair`); a replica that does not hear it keeps its
    /// tombstones longer, the safe side.
    async fn announce_repaired(
        &self,
        range: (i64, i64),
        replicas: &[IpAddr],
        tables: &[(String, uuid::Uuid)],
        started: i32,
    ) {
        for (_, table_id) in tables {
            for a in replicas {
                let request = Request::RepairSynced {
                    table_id: *table_id,
                    ranges: vec![range],
                    repaired_at: started,
                };
                let outcome = self.ask(*a, request, Duration::from_secs(10)).await;
                if let Err(e) = outcome {
                    tracing::warn!(
                        "could not record the repair of ({}, {}] on /{a}: {e}",
                        range.0,
                        range.1
                    );
                }
            }
        }
    }

    /// One row of a `system_distributed` table, written at ONE with the
    /// table's default TTL, as Cassandra's `SystemDistributedKeyspace` does
    /// (`processSilent`: a failure is logged, never the repair's).
    async fn record_history(
        &self,
        table: &str,
        pk: &[bytes::Bytes],
        ck: &[bytes::Bytes],
        cols: &[(&str, Option<bytes::Bytes>)],
    ) {
        let schema = self.schema();
        let Some(t) = schema
            .keyspace("system_distributed")
            .and_then(|k| k.tables.get(table))
            .cloned()
        else {
            return;
        };
        let wp = sibyl_db::cells::WriteParams {
            timestamp: sibyl_types::timeuuid::timestamp_micros_now(),
            ttl: t.params.default_time_to_live,
            now: sibyl_storage::now_in_seconds(),
        };
        let m = sibyl_schema::schema_tables::row_mutation(&t, pk, ck, cols, &wp);
        if let Err(e) = self.mutate(vec![m], sibyl_protocol::Consistency::One).await {
            tracing::debug!("could not record repair history in system_distributed.{table}: {e}");
        }
    }

    /// Repairs a keyspace's tables; `progress` gets one line per finished
    /// range (Cassandra's progress notifications). The repair and each of
    /// its range sessions are recorded in `system_distributed`'s
    /// `parent_repair_history` and `repair_history`.
    pub async fn repair(
        &self,
        options: &RepairOptions,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<RepairSummary, String> {
        let schema = self.schema();
        let ks = schema
            .keyspace(&options.keyspace)
            .cloned()
            .ok_or_else(|| format!("Keyspace [{}] does not exist.", options.keyspace))?;
        let mut tables = Vec::new();
        if options.tables.is_empty() {
            tables.extend(ks.tables.values().map(|t| (t.name.clone(), t.id)));
        } else {
            for name in &options.tables {
                let t = ks
                    .tables
                    .get(name)
                    .ok_or_else(|| format!("Unknown keyspace/cf pair ({}.{name})", ks.name))?;
                tables.push((t.name.clone(), t.id));
            }
        }
        let me = self.local_address();
        let ring = sibyl_cluster::TokenMetadata::clone(&self.ring.load());
        let strategy = ks.replication.strategy.clone();
        let dc_of = |a: &IpAddr| {
            ring.endpoint_of(*a)
                .map(|i| ring.endpoints[i].datacenter.clone())
                .unwrap_or_default()
        };
        let primary = primary_ranges(&ring, me);
        let mut work: Vec<((i64, i64), Vec<IpAddr>)> = Vec::new();
        for (range, replicas) in replicated_ranges(&ring, &strategy) {
            if !replicas.contains(&me) {
                continue;
            }
            if options.primary_range && !primary.contains(&range) {
                continue;
            }
            let replicas: Vec<IpAddr> = replicas
                .into_iter()
                .filter(|a| !options.local_dc_only || dc_of(a) == self.local_dc())
                .collect();
            match options.sub_range {
                Some(sub) => {
                    for part in intersect(range, sub) {
                        work.push((part, replicas.clone()));
                    }
                }
                None => work.push((range, replicas)),
            }
        }
        if options.job_threads > MAX_JOB_THREADS {
            return Err(format!("Too many job threads. Max is {MAX_JOB_THREADS}"));
        }
        let job_threads = options.job_threads.max(1);
        // incremental repair needs every participant to know its verbs, and
        // a repaired set that holds on every replica (not one DC's)
        let mut incremental = options.incremental;
        if incremental {
            let mut participants: Vec<IpAddr> =
                work.iter().flat_map(|(_, r)| r.iter().copied()).collect();
            participants.sort();
            participants.dedup();
            let version = sibyl_cluster::net::codec::MESSAGING_VERSION_INCREMENTAL_REPAIR;
            if let Some(old) = participants
                .iter()
                .find(|a| self.messaging.messaging_version(**a) < version)
            {
                progress(format!(
                    "/{old} speaks messaging version {}, older than incremental repair needs ({version}): running a full repair",
                    self.messaging.messaging_version(*old)
                ));
                incremental = false;
            } else if options.local_dc_only {
                progress(
                    "Incremental repair of one data center cannot mark data repaired on every replica: running a full repair"
                        .to_string(),
                );
                incremental = false;
            }
        }
        progress(format!(
            "Starting repair command #{} ({}), repairing keyspace {} with repair options (parallelism: parallel, \
             primary range: {}, incremental: {incremental}, job threads: {job_threads}, ColumnFamilies: [{}], dataCenters: [{}], hosts: [], \
             previewKind: NONE, # of ranges: {}, pull repair: false, force repair: false, optimise streams: false, \
             ignore unreplicated keyspaces: false, repairPaxos: true, paxosOnly: false)",
            options.command,
            uuid::Uuid::new_v4(),
            ks.name,
            options.primary_range,
            tables.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
            if options.local_dc_only { self.local_dc() } else { "" },
            work.len()
        ));
        let mut summary = RepairSummary {
            ranges: work.len(),
            ..Default::default()
        };
        if work.iter().all(|(_, r)| r.len() < 2) {
            // nothing to compare: a keyspace of replication factor 1
            return Ok(summary);
        }
        let parent = sibyl_types::timeuuid::now_timeuuid();
        let table_names = || set_of(tables.iter().map(|(n, _)| text(n)));
        let mut repair_options = BTreeMap::new();
        repair_options.insert("parallelism", "parallel".to_string());
        repair_options.insert("primaryRange", options.primary_range.to_string());
        repair_options.insert("incremental", incremental.to_string());
        repair_options.insert("jobThreads", job_threads.to_string());
        repair_options.insert(
            "dataCenters",
            if options.local_dc_only {
                self.local_dc().to_string()
            } else {
                String::new()
            },
        );
        repair_options.insert("hosts", String::new());
        repair_options.insert("previewKind", "NONE".to_string());
        repair_options.insert("pullRepair", "false".to_string());
        repair_options.insert("forceRepair", "false".to_string());
        repair_options.insert("optimiseStreams", "false".to_string());
        repair_options.insert("trace", "false".to_string());
        repair_options.insert("subRangeRepair", options.sub_range.is_some().to_string());
        let options_map: Vec<(bytes::Bytes, bytes::Bytes)> = repair_options
            .iter()
            .map(|(k, v)| (text(k), text(v)))
            .collect();
        self.record_history(
            "parent_repair_history",
            &[uuid(parent)],
            &[],
            &[
                ("keyspace_name", Some(text(&ks.name))),
                ("columnfamily_names", Some(table_names())),
                (
                    "requested_ranges",
                    Some(set_of(work.iter().map(|(r, _)| text(&range_text(*r))))),
                ),
                ("started_at", Some(timestamp_now())),
                (
                    "options",
                    Some(sibyl_types::value::serialize_map(&options_map)),
                ),
            ],
        )
        .await;
        // incremental: the parent session's pending sets, prepared first
        let pending = if incremental {
            match self.prepare_session(parent, &work, &tables).await {
                Ok(()) => Some(parent),
                Err(e) => {
                    self.finish_session(parent, &work, &tables, None).await;
                    return Err(e);
                }
            }
        } else {
            None
        };
        let outcome = self
            .repair_ranges(
                &work,
                &tables,
                &ks.name,
                parent,
                options.storage_port,
                // only a repair of every replica lets tombstones go
                !options.local_dc_only,
                RunOptions {
                    pending,
                    job_threads,
                },
                &mut summary,
                progress,
            )
            .await;
        if let Some(session) = pending {
            let repaired_at = outcome
                .is_ok()
                .then(|| sibyl_types::timeuuid::timestamp_micros_now() / 1000);
            self.finish_session(session, &work, &tables, repaired_at)
                .await;
        }
        let mut end = vec![("finished_at", Some(timestamp_now()))];
        match &outcome {
            Ok(done) => end.push((
                "successful_ranges",
                Some(set_of(done.iter().map(|r| text(&range_text(*r))))),
            )),
            Err(e) => {
                end.push(("exception_message", Some(text(e))));
                end.push(("exception_stacktrace", Some(text(e))));
            }
        }
        self.record_history("parent_repair_history", &[uuid(parent)], &[], &end)
            .await;
        outcome.map(|_| summary)
    }

    /// Repairs each range of `work` in turn, recording each range session in
    /// `system_distributed.repair_history`; the ranges repaired.
    async fn repair_ranges(
        &self,
        work: &[((i64, i64), Vec<IpAddr>)],
        tables: &[(String, uuid::Uuid)],
        keyspace: &str,
        parent: uuid::Uuid,
        port: u16,
        every_replica: bool,
        run: RunOptions,
        summary: &mut RepairSummary,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<Vec<(i64, i64)>, String> {
        let me = self.local_address();
        let mut done = Vec::new();
        for (range, replicas) in work {
            if let Some(down) = replicas.iter().find(|a| !self.is_alive(**a)) {
                return Err(format!("Endpoint not alive: /{down}"));
            }
            if replicas.len() < 2 {
                continue;
            }
            let session = sibyl_types::timeuuid::now_timeuuid();
            for (name, _) in tables {
                self.record_history(
                    "repair_history",
                    &[text(keyspace), text(name)],
                    &[uuid(session)],
                    &[
                        ("parent_id", Some(uuid(parent))),
                        ("range_begin", Some(text(&range.0.to_string()))),
                        ("range_end", Some(text(&range.1.to_string()))),
                        ("coordinator", Some(inet(me))),
                        (
                            "coordinator_port",
                            Some(sibyl_schema::schema_tables::int(i32::from(port))),
                        ),
                        (
                            "participants",
                            Some(set_of(replicas.iter().map(|a| inet(*a)))),
                        ),
                        (
                            "participants_v2",
                            Some(set_of(replicas.iter().map(|a| {
                                text(&std::net::SocketAddr::new(*a, port).to_string())
                            }))),
                        ),
                        ("status", Some(text("STARTED"))),
                        ("started_at", Some(timestamp_now())),
                    ],
                )
                .await;
            }
            // (a tombstone older than the session's start is on every
            // replica once it succeeds)
            let started = sibyl_storage::now_in_seconds();
            let result = self
                .repair_range(*range, replicas, tables, run, summary)
                .await;
            if result.is_ok() && every_replica {
                self.announce_repaired(*range, replicas, tables, started)
                    .await;
            }
            for (name, _) in tables {
                let mut cols = vec![
                    (
                        "status",
                        Some(text(if result.is_ok() { "SUCCESS" } else { "FAILED" })),
                    ),
                    ("finished_at", Some(timestamp_now())),
                ];
                if let Err(e) = &result {
                    cols.push(("exception_message", Some(text(e))));
                    cols.push(("exception_stacktrace", Some(text(e))));
                }
                self.record_history(
                    "repair_history",
                    &[text(keyspace), text(name)],
                    &[uuid(session)],
                    &cols,
                )
                .await;
            }
            result?;
            done.push(*range);
            progress(format!(
                "Repair session for range ({}, {}] with {} finished",
                range.0,
                range.1,
                replicas
                    .iter()
                    .map(|a| format!("/{a}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(done)
    }

    /// One range: each replica hashes its leaves of every table, and the
    /// leaves that differ are streamed between the replicas that disagree.
    async fn repair_range(
        &self,
        range: (i64, i64),
        replicas: &[IpAddr],
        tables: &[(String, uuid::Uuid)],
        run: RunOptions,
        summary: &mut RepairSummary,
    ) -> Result<(), String> {
        {
            let mut plans: BTreeMap<(IpAddr, IpAddr), BTreeMap<uuid::Uuid, Vec<(i64, i64)>>> =
                BTreeMap::new();
            // the tables' validations, `-j` of them at a time
            let mut validated = Vec::new();
            for chunk in tables.chunks(run.job_threads) {
                let jobs = chunk.iter().map(|(_, table_id)| async move {
                    let partitions = self
                        .replica
                        .storage
                        .table(*table_id)
                        .map_or(0, |t| t.estimated_partitions());
                    let leaves: Vec<(i64, i64)> =
                        leaves(range.0, range.1, leaves_for(partitions, range))
                            .into_iter()
                            .flat_map(|(a, b)| inclusive_ranges(a, b))
                            .collect();
                    let hashes = self
                        .validations(*table_id, &leaves, replicas, run.pending)
                        .await?;
                    Ok::<_, String>((*table_id, leaves, hashes))
                });
                for r in futures::future::join_all(jobs).await {
                    validated.push(r?);
                }
            }
            for (table_id, leaves, hashes) in validated {
                let table_id = &table_id;
                summary.leaves_checked += leaves.len();
                summary.leaves_out_of_sync += (0..leaves.len())
                    .filter(|i| hashes.iter().any(|(_, h)| h[*i] != hashes[0].1[*i]))
                    .count();
                for (a, ha) in &hashes {
                    for (b, hb) in &hashes {
                        if a == b {
                            continue;
                        }
                        let pulled = leaves_to_pull(&leaves, ha, hb);
                        if !pulled.is_empty() {
                            plans
                                .entry((*a, *b))
                                .or_default()
                                .entry(*table_id)
                                .or_default()
                                .extend(pulled);
                        }
                    }
                }
            }
            for ((target, source), tables) in plans {
                let plan = StreamPlan {
                    // time-based, as Cassandra's stream plan ids
                    id: sibyl_types::timeuuid::now_timeuuid(),
                    operation: "Repair".into(),
                    source,
                    pending: run.pending,
                    // neighbouring leaves in one piece: fewer pages
                    tables: tables
                        .into_iter()
                        .map(|(t, mut r)| {
                            r.sort_unstable();
                            (t, crate::topology::merge_adjacent(r))
                        })
                        .collect(),
                };
                let (p, b) = self.stream_to(target, plan).await?;
                summary.streams += 1;
                summary.partitions_streamed += p;
                summary.bytes_streamed += b;
            }
        }
        Ok(())
    }

    /// Each replica's hashes of `leaves`.
    async fn validations(
        &self,
        table_id: uuid::Uuid,
        leaves: &[(i64, i64)],
        replicas: &[IpAddr],
        pending: Option<uuid::Uuid>,
    ) -> Result<Vec<(IpAddr, Vec<[u8; 16]>)>, String> {
        let me = self.local_address();
        let mut tasks = tokio::task::JoinSet::new();
        for r in replicas {
            let (r, messaging) = (*r, self.messaging.clone());
            let request = Request::Validation {
                table_id,
                ranges: leaves.to_vec(),
                pending,
            };
            if r == me {
                continue;
            }
            tasks.spawn(async move {
                (
                    r,
                    messaging
                        .send_and_receive(r, request, VALIDATION_TIMEOUT)
                        .await,
                )
            });
        }
        let mut out = Vec::new();
        if replicas.contains(&me) {
            out.push((
                me,
                self.validate(table_id, leaves, pending)
                    .map_err(|f| format!("{f:?}"))?,
            ));
        }
        while let Some(r) = tasks.join_next().await {
            match r {
                Ok((a, Ok(Response::Validation(h)))) if h.len() == leaves.len() => out.push((a, h)),
                Ok((a, Ok(Response::Failure(ReplicaFailure::UnknownTable(_))))) => {
                    return Err(format!("/{a} does not know table {table_id}"))
                }
                Ok((a, other)) => return Err(format!("validation failed on /{a}: {other:?}")),
                Err(e) => return Err(e.to_string()),
            }
        }
        out.sort_by_key(|(a, _)| *a);
        Ok(out)
    }

    /// Runs a stream session on `target` (this node or another); returns
    /// the partitions and bytes it received.
    pub async fn stream_to(&self, target: IpAddr, plan: StreamPlan) -> Result<(u64, u64), String> {
        if target == self.local_address() {
            return self
                .run_stream_session(plan)
                .await
                .map(|s| (s.partitions, s.bytes));
        }
        match self
            .messaging
            .send_and_receive(
                target,
                Request::StreamSession(plan),
                Duration::from_secs(6 * 3600),
            )
            .await
        {
            Ok(Response::Streamed { partitions, bytes }) => Ok((partitions, bytes)),
            Ok(Response::Done) => Ok((0, 0)),
            Ok(Response::Failure(f)) => Err(format!("stream to /{target} failed: {f:?}")),
            Ok(other) => Err(format!("stream to /{target}: unexpected {other:?}")),
            Err(e) => Err(format!("stream to /{target}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differing_leaves_are_pulled_with_the_empty_ones_between() {
        let e = empty_leaf();
        let (x, y) = ([1u8; 16], [2u8; 16]);
        let leaves: Vec<(i64, i64)> = (0..6).map(|i| (i * 10 + 1, i * 10 + 10)).collect();
        // differs, empty at both, differs, same data, empty, differs
        let mine = [e, e, e, y, e, e];
        let theirs = [x, e, x, y, e, x];
        assert_eq!(
            leaves_to_pull(&leaves, &mine, &theirs),
            vec![(1, 10), (11, 20), (21, 30), (51, 60)]
        );
        // nothing differs: nothing pulled
        assert!(leaves_to_pull(&leaves, &theirs, &theirs).is_empty());
    }

    #[test]
    fn a_range_gets_about_one_leaf_per_partition() {
        let half = (0, i64::MIN);
        // 10,000 partitions, half of them in the range: 8,192 leaves
        assert_eq!(leaves_for(10_000, half), 8192);
        assert_eq!(leaves_for(0, half), LEAVES);
        assert_eq!(leaves_for(u64::MAX, (5, 5)), MAX_LEAVES);
        // a thin range of a big table
        assert_eq!(leaves_for(1 << 40, (0, 1 << 30)), 64);
    }

    #[test]
    fn ranges_cut_into_leaves_cover_them_exactly() {
        assert_eq!(
            leaves(0, 100, 4),
            vec![(0, 25), (25, 50), (50, 75), (75, 100)]
        );
        // a wrapping range
        let l = leaves(i64::MAX - 9, i64::MIN + 10, 2);
        assert_eq!(l, vec![(i64::MAX - 9, i64::MIN), (i64::MIN, i64::MIN + 10)]);
        // a tiny range has at most one leaf per token
        assert_eq!(leaves(5, 7, 32), vec![(5, 6), (6, 7)]);
        // the whole ring
        let l = leaves(3, 3, 2);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].0, 3);
        assert_eq!(l[1].1, 3);
    }

    #[test]
    fn sub_ranges_intersect_ring_pieces() {
        assert_eq!(intersect((0, 100), (50, 200)), vec![(50, 100)]);
        assert_eq!(intersect((0, 100), (200, 300)), vec![]);
        assert_eq!(intersect((100, -100), (150, 160)), vec![(150, 160)]);
        assert_eq!(intersect((100, -100), (-200, -150)), vec![(-200, -150)]);
    }
}

//! The replica side (Cassandra's verb handlers and `Keyspace.apply`): what a
//! node does when a coordinator, local or remote, asks it to apply
//! mutations, serve a read as data or digest, truncate a table, or take a
//! schema change. Index maintenance runs here, on each replica, in the same
//! commit-log batch as the base write.

use crate::index;
use sibyl_cluster::messaging::{BoxFuture, ReplicaFailure, Request, Response, VerbHandler};
use sibyl_cluster::Clock;
use sibyl_db::{
    BoundKind, ClusteringKey, DecoratedKey, KeyBound, Mutation, Partition, ReadCommand, ReadKind,
    ReadResponse,
};
use sibyl_schema::schema::{ColumnKind, Schema, TableMetadata};
use sibyl_storage::{ColumnFamilyStore, StorageEngine, StorageError};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// The node's current schema, shared by the coordinator, the replica side
/// and the statement layer. Every request reads it, several times, on
/// every event loop: it is loaded without a lock and without a count on
/// the schema's own `Arc` (arc-swap's per-thread debts), either of which
/// was a cache line written by both cores on each read.
pub type SharedSchema = Arc<arc_swap::ArcSwap<Schema>>;

/// A loaded schema: derefs to `Arc<Schema>`; short-lived (an owned
/// `Arc<Schema>` is `SchemaGuard::into_inner`).
pub type SchemaGuard = arc_swap::Guard<Arc<Schema>>;

/// A holder of `schema`.
pub fn shared_schema(schema: Schema) -> SharedSchema {
    Arc::new(arc_swap::ArcSwap::from_pointee(schema))
}

/// Serves the coordinator's verbs from local storage.
pub struct Replica {
    pub(crate) storage: Arc<StorageEngine>,
    schema: SharedSchema,
    pub(crate) clock: Arc<dyn Clock>,
    /// Stripes of the locks that make each partition's Paxos state change
    /// atomically.
    pub(crate) paxos_locks: Vec<tokio::sync::Mutex<()>>,
    /// How long a write may wait for memtable memory before it is refused
    /// as overloaded (the write timeout).
    admission_timeout: Duration,
    /// Tombstones one read goes through before it is warned about
    /// (`tombstone_warn_threshold`).
    pub tombstone_warn_threshold: std::sync::atomic::AtomicU64,
}

/// Traces the memtables a traced write was added to.
fn traced_memtables(tables: Vec<String>) {
    for t in tables {
        sibyl_tracing::trace(|| format!("Adding to {t} memtable"));
    }
}

fn failure(e: StorageError) -> ReplicaFailure {
    match e {
        StorageError::Overloaded(m) => ReplicaFailure::Overloaded(m),
        StorageError::UnknownTable(id) => ReplicaFailure::UnknownTable(id),
        e => ReplicaFailure::Error(e.to_string()),
    }
}

impl Replica {
    pub fn new(
        storage: Arc<StorageEngine>,
        schema: SharedSchema,
        clock: Arc<dyn Clock>,
        admission_timeout: Duration,
    ) -> Self {
        Replica {
            storage,
            schema,
            clock,
            admission_timeout,
            tombstone_warn_threshold: std::sync::atomic::AtomicU64::new(1000),
            paxos_locks: (0..crate::paxos::LOCK_STRIPES)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }

    pub fn schema(&self) -> SchemaGuard {
        self.schema.load()
    }

    /// The node's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Applies mutations durably, with the index entries they make, in one
    /// commit-log batch (`MUTATION_REQ`).
    pub async fn apply(&self, mutations: Vec<Mutation>) -> Result<(), ReplicaFailure> {
        let (mutations, tables) = self.with_index_entries(mutations);
        self.storage
            .apply_within(mutations, self.admission_timeout)
            .await
            .map_err(failure)?;
        traced_memtables(tables);
        Ok(())
    }

    /// See `StorageEngine::prefetch`: the memtables asked for the partitions.
    pub fn prefetch(&self, mutations: &[Mutation]) {
        self.storage.prefetch(mutations);
    }

    /// [`apply`](Self::apply) done here when nothing would make it wait
    /// (`StorageEngine::applies_at_once`: a periodic commit log, room in
    /// the memtables), as nearly every write: no future for it. The
    /// mutations come back, untouched, when it would wait.
    pub fn try_apply_now(
        &self,
        mutations: Vec<Mutation>,
    ) -> std::result::Result<Result<(), ReplicaFailure>, Vec<Mutation>> {
        let Some(at_once) = self.storage.applies_at_once() else {
            return Err(mutations);
        };
        let (mutations, tables) = self.with_index_entries(mutations);
        Ok(self
            .storage
            .apply_now(mutations, at_once)
            .map_err(failure)
            .map(|()| traced_memtables(tables)))
    }

    /// The mutations with their secondary indexes' entries, and, when the
    /// request is traced, the names of the tables they go to (traced
    /// once applied).
    fn with_index_entries(&self, mut mutations: Vec<Mutation>) -> (Vec<Mutation>, Vec<String>) {
        let schema = self.schema();
        let entries = index::index_mutations(&schema, &mutations, || self.clock.now_seconds());
        mutations.extend(entries);
        let tables: Vec<String> = if sibyl_tracing::is_tracing() {
            sibyl_tracing::trace(|| "Appending to commitlog");
            let mut names: Vec<String> = mutations
                .iter()
                .filter_map(|m| schema.table_by_id(m.table_id).map(|t| t.name.clone()))
                .collect();
            names.dedup();
            names
        } else {
            Vec::new()
        };
        (mutations, tables)
    }

    /// Serves a read command (`READ_REQ`, `RANGE_REQ`).
    pub fn read(&self, cmd: &ReadCommand) -> Result<ReadResponse, ReplicaFailure> {
        let data = self.read_data(cmd).map_err(failure)?;
        Ok(if cmd.digest {
            ReadResponse::Digest(sibyl_db::read::digest(&data))
        } else {
            ReadResponse::Data(data)
        })
    }

    fn read_data(&self, cmd: &ReadCommand) -> Result<Vec<(DecoratedKey, Partition)>, StorageError> {
        let cfs = self
            .storage
            .table(cmd.table_id)
            .ok_or(StorageError::UnknownTable(cmd.table_id))?;
        // a scan's latency is the replica's to time (a partition's read is
        // timed by its table): the clock is read for scans only
        let started =
            matches!(cmd.kind, ReadKind::PartitionRange { .. }).then(sibyl_metrics::Instant::now);
        if sibyl_tracing::is_tracing() {
            let schema = self.schema();
            let (ks, name) = schema
                .table_by_id(cmd.table_id)
                .map_or(("", ""), |t| (t.keyspace.as_str(), t.name.as_str()));
            sibyl_tracing::trace(|| match &cmd.kind {
                ReadKind::SinglePartition { .. } => {
                    format!("Executing single-partition query on {name}")
                }
                ReadKind::PartitionRange {
                    start_token,
                    end_token,
                    ..
                } => format!(
                    "Executing seq scan across {} sstables for {}",
                    cfs.sstables().len(),
                    token_range(*start_token, *end_token)
                ),
                ReadKind::Index { index, .. } => {
                    format!("Executing read on {ks}.{name} using index {index}")
                }
            });
        }
        let data = self.read_from(&cfs, cmd)?;
        // what the command went through, once per command (Cassandra's
        // `ReadCommand.MetricRecording`)
        let (live, tombstones) = data.iter().fold((0, 0), |(l, t), (_, p)| {
            let (pl, pt) = p.scanned(cmd.now);
            (l + pl, t + pt)
        });
        cfs.live_scanned.record(live);
        cfs.tombstones_scanned.record(tombstones);
        let threshold = self
            .tombstone_warn_threshold
            .load(std::sync::atomic::Ordering::Relaxed);
        // the node's own tables are not held to the thresholds (and the
        // schema is looked at only past one)
        let schema = (tombstones > threshold).then(|| self.schema());
        let table = schema
            .as_ref()
            .and_then(|s| s.table_by_id(cmd.table_id))
            .filter(|t| t.keyspace != "system");
        let over = table.is_some();
        if over {
            if let (Some(t), Some((key, _))) = (table, data.last()) {
                let msg = format!(
                    "Read {live} live rows and {tombstones} tombstone cells for query {:.512}; token {} (see tombstone_warn_threshold)",
                    read_cql(t, cmd),
                    key.token
                );
                tracing::warn!("{msg}");
                crate::client_warn::warn(msg);
            }
        }
        sibyl_tracing::trace(|| {
            format!(
                "Read {live} live rows and {tombstones} tombstone cells{}",
                if over {
                    " (see tombstone_warn_threshold)"
                } else {
                    ""
                }
            )
        });
        if let Some(started) = started {
            cfs.range_latency.record_elapsed(started);
        }
        Ok(data)
    }

    fn read_from(
        &self,
        cfs: &ColumnFamilyStore,
        cmd: &ReadCommand,
    ) -> Result<Vec<(DecoratedKey, Partition)>, StorageError> {
        let slices = cmd.slices.as_deref();
        let one = |key: &DecoratedKey| -> Result<Option<(DecoratedKey, Partition)>, StorageError> {
            Ok(cfs
                .read(key, slices)?
                .filter(|p| !p.is_empty())
                .map(|p| (key.clone(), p)))
        };
        match &cmd.kind {
            ReadKind::SinglePartition { key } => Ok(one(key)?.into_iter().collect()),
            ReadKind::PartitionRange {
                start,
                start_token,
                end_token,
                limit,
            } => {
                let mut out = Vec::new();
                let mut cursor: Option<DecoratedKey> = None;
                if let Some(KeyBound { key, inclusive }) = start {
                    if *inclusive && key.token >= *start_token && key.token <= *end_token {
                        out.extend(one(key)?);
                    }
                    cursor = Some(key.clone());
                }
                // a key whose data is all shadowed reads as nothing: keep going
                const BATCH: usize = 256;
                while out.len() < *limit {
                    let keys = cfs.keys(cursor.as_ref(), *start_token, *end_token, BATCH)?;
                    for k in &keys {
                        if out.len() >= *limit {
                            break;
                        }
                        out.extend(one(k)?);
                    }
                    if keys.len() < BATCH {
                        break;
                    }
                    cursor = keys.last().cloned();
                }
                Ok(out)
            }
            ReadKind::Index {
                index: name,
                value,
                start,
                limit,
            } => {
                let schema = self.schema();
                let table = schema
                    .table_by_id(cmd.table_id)
                    .cloned()
                    .ok_or(StorageError::UnknownTable(cmd.table_id))?;
                let ix = table
                    .indexes
                    .iter()
                    .find(|ix| &ix.name == name)
                    .cloned()
                    .ok_or_else(|| StorageError::Decode(format!("unknown index {name}")))?;
                let store = self
                    .storage
                    .table(ix.store_id(&table))
                    .ok_or(StorageError::UnknownTable(ix.store_id(&table)))?;
                self.index_read(&table, &ix, cfs, &store, value, start.as_ref(), cmd, *limit)
            }
        }
    }

    /// An index search: the partitions (and, for row-level indexes, the
    /// rows) the index lists for `value`, each checked against the data;
    /// entries the data no longer backs are deleted, as Cassandra's
    /// `CassandraIndexSearcher` does.
    #[allow(clippy::too_many_arguments)]
    fn index_read(
        &self,
        table: &TableMetadata,
        ix: &sibyl_schema::index::IndexMetadata,
        cfs: &ColumnFamilyStore,
        store: &ColumnFamilyStore,
        value: &bytes::Bytes,
        start: Option<&KeyBound>,
        cmd: &ReadCommand,
        limit: usize,
    ) -> Result<Vec<(DecoratedKey, Partition)>, StorageError> {
        let now = cmd.now;
        let mut hits = index::lookup(table, ix, store, value, start.map(|b| &b.key), now)?;
        if let Some(b) = start.filter(|b| !b.inclusive) {
            hits.retain(|h| h.key != b.key);
        }
        let mut out = Vec::new();
        let mut stale = Vec::new();
        while let Some(h) = hits.pop_front() {
            if out.len() >= limit {
                break;
            }
            let key = h.key;
            let exact: Option<Vec<(ClusteringKey, ClusteringKey)>> = h.rows.as_ref().map(|rows| {
                rows.iter()
                    .map(|(ck, _)| {
                        (
                            ClusteringKey::bound(
                                ck.values.clone(),
                                BoundKind::StartInclusive,
                                ck.comparator.clone(),
                            ),
                            ClusteringKey::bound(
                                ck.values.clone(),
                                BoundKind::EndInclusive,
                                ck.comparator.clone(),
                            ),
                        )
                    })
                    .collect()
            });
            let read = cfs.read(&key, exact.as_deref().or(cmd.slices.as_deref()))?;
            let resolved = read.clone().map(|mut p| {
                p.resolve(now);
                p
            });
            match &h.rows {
                Some(rows) => {
                    for (ck, ts) in rows {
                        let row = resolved.as_ref().and_then(|p| p.rows.get(ck));
                        if !row.is_some_and(|row| {
                            index::row_has_value(ix, table, &key, Some(ck), row, value, now)
                        }) {
                            stale.push(index::stale_entry_deletion(
                                table,
                                ix,
                                value,
                                &key,
                                Some(ck),
                                *ts,
                                now,
                            ));
                        }
                    }
                }
                None => {
                    let sr = resolved.as_ref().and_then(|p| p.static_row.as_ref());
                    let live = match table.column(&ix.column).map(|c| c.kind) {
                        Some(ColumnKind::Static) => sr.is_some_and(|row| {
                            index::row_has_value(ix, table, &key, None, row, value, now)
                        }),
                        _ => resolved
                            .as_ref()
                            .is_some_and(|p| !p.rows.is_empty() || p.static_row.is_some()),
                    };
                    if !live {
                        stale.push(index::stale_entry_deletion(
                            table,
                            ix,
                            value,
                            &key,
                            None,
                            h.timestamp,
                            now,
                        ));
                    }
                }
            }
            let Some(mut part) = read else { continue };
            if let (Some(_), Some(sl)) = (&h.rows, &cmd.slices) {
                part.rows
                    .retain(|ck, _| sl.iter().any(|(a, b)| a <= ck && ck <= b));
            }
            if !part.is_empty() {
                out.push((key, part));
            }
        }
        if !stale.is_empty() {
            // index entries are local to this replica: no commit log (they are
            // checked again at every read until compaction drops them)
            self.storage.apply_unlogged(stale);
        }
        Ok(out)
    }

    /// Truncates a table on this node (`TRUNCATE_REQ`).
    pub async fn truncate(
        &self,
        table_id: uuid::Uuid,
        timestamp_micros: i64,
    ) -> Result<(), ReplicaFailure> {
        self.storage
            .truncate(table_id, timestamp_micros)
            .await
            .map_err(failure)
    }

    /// Takes a schema change: stores the `system_schema` mutations, opens the
    /// stores of new tables and indexes, drops those of removed ones, makes
    /// `next` the current schema, and builds the index `build`, if any.
    pub async fn apply_schema_change(
        &self,
        mutations: Vec<Mutation>,
        next: Schema,
        build: Option<(TableMetadata, sibyl_schema::index::IndexMetadata)>,
    ) -> Result<Arc<Schema>, StorageError> {
        self.storage.apply(mutations).await?;
        let old = self.schema();
        for ks in old.keyspaces.values() {
            for t in ks.tables.values() {
                let now = next.table_by_id(t.id);
                match now {
                    None => crate::stores::drop_stores(&self.storage, t),
                    Some(nt) => {
                        for ix in t
                            .indexes
                            .iter()
                            .filter(|ix| !nt.indexes.iter().any(|x| x.name == ix.name))
                        {
                            self.storage.drop_table(ix.store_id(t));
                        }
                    }
                }
            }
        }
        for ks in next.keyspaces.values() {
            if ks.is_virtual {
                continue;
            }
            for t in ks.tables.values() {
                let unchanged = old.table_by_id(t.id).is_some_and(|o| Arc::ptr_eq(o, t));
                if !unchanged {
                    crate::stores::open_store(&self.storage, t)?;
                }
            }
        }
        let next = Arc::new(next);
        self.schema.store(next.clone());
        if let Some((t, ix)) = build {
            index::build(&self.storage, &t, &ix).await?;
        }
        Ok(next)
    }

    /// Takes a schema change committed to the cluster metadata log: the
    /// `system_schema` mutations planned against the schema `base`. If this
    /// node's schema is no longer `base` (another change came first in the
    /// log), nothing is applied and the answer is `None`: every node sees the
    /// same log, so every node decides alike. Otherwise the mutations are
    /// stored and the schema is read back from `system_schema`, as at
    /// start-up, so that every node derives the same schema from the same
    /// rows; indexes the change added are built from local data.
    pub async fn apply_schema_mutations(
        &self,
        base: uuid::Uuid,
        mutations: Vec<Mutation>,
    ) -> Result<Option<Arc<Schema>>, StorageError> {
        let old = self.schema();
        if old.version != base {
            return Ok(None);
        }
        self.storage.apply(mutations).await?;
        let now = self.clock.now_seconds();
        let mut next = Schema::default();
        for (name, ks) in &old.keyspaces {
            if ks.is_system || ks.is_virtual {
                next.keyspaces.insert(name.clone(), ks.clone());
            }
        }
        sibyl_schema::schema_tables::apply_system_keyspace_params(
            &mut next,
            &crate::stores::LocalSchema(&self.storage),
            now,
        )
        .map_err(StorageError::Decode)?;
        let keyspaces = sibyl_schema::schema_tables::read_user_keyspaces(
            &crate::stores::LocalSchema(&self.storage),
            now,
        )
        .map_err(StorageError::Decode)?;
        for mut ks in keyspaces {
            // a table whose definition did not change keeps its metadata
            // (and so its open store)
            if let Some(old_ks) = old.keyspaces.get(&ks.name) {
                for (name, t) in ks.tables.iter_mut() {
                    if let Some(o) = old_ks.tables.get(name) {
                        if format!("{o:?}") == format!("{t:?}") {
                            *t = o.clone();
                        }
                    }
                }
            }
            next.keyspaces.insert(ks.name.clone(), Arc::new(ks));
        }
        next.compute_version();
        let mut builds = Vec::new();
        for ks in next.keyspaces.values() {
            for t in ks.tables.values() {
                let before = old.table_by_id(t.id);
                for ix in &t.indexes {
                    if !before.is_some_and(|b| b.indexes.iter().any(|x| x.name == ix.name)) {
                        builds.push(((**t).clone(), ix.clone()));
                    }
                }
            }
        }
        let mut builds = builds.into_iter();
        let mut applied = self
            .apply_schema_change(Vec::new(), next, builds.next())
            .await?;
        for (t, ix) in builds {
            index::build(&self.storage, &t, &ix).await?;
            applied = SchemaGuard::into_inner(self.schema());
        }
        Ok(Some(applied))
    }

    /// Serves one request (the verb handlers). The rare verbs are boxed:
    /// the future of every request is as large as its largest arm.
    pub async fn handle(&self, request: Request) -> Response {
        let r = match request {
            Request::Mutation(m) => self.apply(m).await.map(|_| Response::Done),
            Request::Read(cmd) => self.read(&cmd).map(Response::Read),
            Request::Truncate {
                table_id,
                timestamp_micros,
            } => Box::pin(self.truncate(table_id, timestamp_micros))
                .await
                .map(|_| Response::Done),
            Request::Hint(m) => self.apply(m).await.map(|_| Response::Done),
            Request::PaxosPrepare {
                ballot,
                table_id,
                key,
            } => Box::pin(self.paxos_prepare(ballot, table_id, key))
                .await
                .map(|p| Response::Promise(Box::new(p))),
            Request::PaxosPropose(c) => Box::pin(self.paxos_propose(c))
                .await
                .map(Response::Accepted),
            Request::PaxosCommit(c) => Box::pin(self.paxos_commit(c)).await.map(|_| Response::Done),
            Request::BatchStore { id, mutations } => Box::pin(self.batchlog_store(id, &mutations))
                .await
                .map(|_| Response::Done),
            Request::BatchRemove(id) => Box::pin(self.batchlog_remove(id))
                .await
                .map(|_| Response::Done),
            Request::Gossip(_)
            | Request::Metadata(_)
            | Request::MetadataCatchUp(_)
            | Request::CounterMutation { .. }
            | Request::StreamPage { .. }
            | Request::StreamSession(_)
            | Request::Validation { .. }
            | Request::RepairSynced { .. }
            | Request::RepairPrepare { .. }
            | Request::RepairFinish { .. } => Err(ReplicaFailure::Error(format!(
                "{} is not a replica verb",
                request.verb().name()
            ))),
        };
        r.unwrap_or_else(Response::Failure)
    }
}

/// The replica as the messaging service delivers requests to it.
pub struct ReplicaVerbs(pub Arc<Replica>);

impl VerbHandler for ReplicaVerbs {
    fn handle(&self, _from: IpAddr, request: Request) -> BoxFuture<Response> {
        let replica = self.0.clone();
        Box::pin(async move { replica.handle(request).await })
    }
}

/// A token range as Cassandra's traces show a key range: `(min(t), max(t)]`
/// bounds, the whole ring as `(min(-9223372036854775808), min(-9223372036854775808)]`.
fn token_range(start: i64, end: i64) -> String {
    if start == i64::MIN && end == i64::MAX {
        return format!("(min({}), min({})]", i64::MIN, i64::MIN);
    }
    let low = match start {
        i64::MIN => format!("min({})", i64::MIN),
        s => format!("max({})", s - 1),
    };
    format!("({low}, max({end})]")
}

/// A read command as CQL, as Cassandra's `ReadCommand.toCQLString` prints it
/// in warnings: every column, the partition key or token range, `ALLOW
/// FILTERING` (the clustering filter and limits are left out).
fn read_cql(t: &TableMetadata, cmd: &ReadCommand) -> String {
    use sibyl_types::ident::maybe_quote;
    let pk = t.partition_key();
    let restriction = match &cmd.kind {
        ReadKind::SinglePartition { key } => {
            let values = sibyl_db::cells::split_partition_key(&key.key, pk.len());
            pk.iter()
                .zip(values)
                .map(|(c, v)| format!("{} = {}", maybe_quote(&c.name), c.typ.to_cql_literal(&v)))
                .collect::<Vec<_>>()
                .join(" AND ")
        }
        ReadKind::PartitionRange {
            start_token,
            end_token,
            ..
        } => {
            let names: Vec<String> = pk.iter().map(|c| maybe_quote(&c.name)).collect();
            format!(
                "token({names}) > {} AND token({names}) <= {end_token}",
                start_token.saturating_sub(1),
                names = names.join(", ")
            )
        }
        ReadKind::Index { index, .. } => format!("{} = ?", maybe_quote(index)),
    };
    format!(
        "SELECT * FROM {}.{} WHERE {restriction} ALLOW FILTERING",
        maybe_quote(&t.keyspace),
        maybe_quote(&t.name)
    )
}

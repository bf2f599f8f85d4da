//! Tables' stores and the engine that ties them to the commit log.

use crate::clustering::ClusteringComparator;
use crate::commitlog::{self, CommitLog, Entry, ReplayStats, SyncMode};
use crate::data::{DecoratedKey, Mutation, Partition};
use crate::memtable::{Memtable, Slice};
use crate::serde::{decode_mutation, encode_mutation};
use crate::{now_in_seconds, StorageError};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The data of one table on this node (Cassandra's `ColumnFamilyStore`).
pub struct ColumnFamilyStore {
    pub table_id: uuid::Uuid,
    pub comparator: Arc<ClusteringComparator>,
    memtable: RwLock<Arc<Memtable>>,
    pub writes: AtomicU64,
    pub reads: AtomicU64,
}

impl ColumnFamilyStore {
    pub fn new(table_id: uuid::Uuid, comparator: Arc<ClusteringComparator>) -> Self {
        ColumnFamilyStore {
            table_id,
            comparator,
            memtable: RwLock::new(Arc::new(Memtable::new())),
            writes: AtomicU64::new(0),
            reads: AtomicU64::new(0),
        }
    }

    fn apply(&self, m: Mutation, now: i32) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.memtable.read().apply(m, now);
    }

    /// The partition fragment merged from every source, unresolved (call
    /// `Partition::resolve` to apply tombstones and expiry).
    pub fn read(&self, key: &DecoratedKey, slices: Option<&[Slice]>) -> Option<Partition> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mt = self.memtable.read().clone();
        mt.read(key, slices)
    }

    /// Partition keys in token order (see `Memtable::keys`), merged over sources.
    pub fn keys(&self, after: Option<&DecoratedKey>, start_token: i64, end_token: i64, limit: usize) -> Vec<DecoratedKey> {
        let mt = self.memtable.read().clone();
        mt.keys(after, start_token, end_token, limit)
    }

    /// Drops all data (TRUNCATE).
    pub fn truncate(&self) {
        *self.memtable.write() = Arc::new(Memtable::new());
    }

    pub fn memtable_bytes(&self) -> usize {
        self.memtable.read().live_bytes()
    }

    pub fn partition_count(&self) -> usize {
        self.memtable.read().partition_count()
    }
}

/// Storage settings from the node configuration.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    pub data_directories: Vec<PathBuf>,
    pub commitlog_directory: PathBuf,
    pub sync: SyncMode,
    pub segment_size_bytes: u64,
}

/// All tables of the node and the commit log in front of them.
pub struct StorageEngine {
    pub config: StorageConfig,
    commitlog: RwLock<Option<Arc<CommitLog>>>,
    tables: RwLock<HashMap<uuid::Uuid, Arc<ColumnFamilyStore>>>,
}

impl StorageEngine {
    pub fn new(config: StorageConfig) -> Result<Arc<Self>, StorageError> {
        for d in &config.data_directories {
            std::fs::create_dir_all(d).map_err(|e| StorageError::Io { path: d.display().to_string(), source: e })?;
        }
        Ok(Arc::new(StorageEngine { config, commitlog: RwLock::new(None), tables: RwLock::new(HashMap::new()) }))
    }

    /// Registers a table (at startup or on CREATE TABLE).
    pub fn add_table(&self, table_id: uuid::Uuid, comparator: Arc<ClusteringComparator>) -> Arc<ColumnFamilyStore> {
        self.tables
            .write()
            .entry(table_id)
            .or_insert_with(|| Arc::new(ColumnFamilyStore::new(table_id, comparator)))
            .clone()
    }

    pub fn drop_table(&self, table_id: uuid::Uuid) {
        self.tables.write().remove(&table_id);
    }

    pub fn table(&self, table_id: uuid::Uuid) -> Option<Arc<ColumnFamilyStore>> {
        self.tables.read().get(&table_id).cloned()
    }

    /// Replays the commit log into the memtables of the registered tables.
    /// Mutations of tables that are not registered are handed to `unknown`
    /// (the schema tables are registered first; user tables appear once the
    /// schema is read, so replay runs in two passes).
    pub fn replay_commitlog(&self, only: &dyn Fn(uuid::Uuid) -> bool) -> Result<ReplayStats, StorageError> {
        let dir = self.config.commitlog_directory.clone();
        let now = now_in_seconds();
        commitlog::replay(&dir, |entry| {
            match entry {
                Entry::Mutation(bytes) => {
                    let m = decode_mutation(&bytes, &|id| if only(id) { self.table(id).map(|t| t.comparator.clone()) } else { None })?;
                    if let Some(m) = m {
                        if let Some(t) = self.table(m.table_id) {
                            t.apply(m, now);
                        }
                    }
                }
                Entry::Truncate { table_id, .. } => {
                    if only(table_id) {
                        if let Some(t) = self.table(table_id) {
                            t.truncate();
                        }
                    }
                }
            }
            Ok(())
        })
    }

    /// Opens the commit log for new writes (after replay).
    pub fn start_commitlog(&self) -> Result<(), StorageError> {
        let log = CommitLog::open(&self.config.commitlog_directory, self.config.sync, self.config.segment_size_bytes)?;
        *self.commitlog.write() = Some(log);
        Ok(())
    }

    fn log(&self) -> Result<Arc<CommitLog>, StorageError> {
        self.commitlog.read().clone().ok_or_else(|| StorageError::CommitLogStopped("commit log not started".into()))
    }

    /// Applies mutations durably: commit log first, then memtables.
    pub async fn apply(&self, mutations: Vec<Mutation>) -> Result<(), StorageError> {
        let log = self.log()?;
        let mut last = 0;
        let mut buf = Vec::with_capacity(256);
        for m in &mutations {
            buf.clear();
            encode_mutation(m, &mut buf);
            last = log.append(&Entry::Mutation(std::mem::take(&mut buf)))?;
        }
        log.wait_durable(last).await?;
        let now = now_in_seconds();
        for mut m in mutations {
            m.detach();
            match self.table(m.table_id) {
                Some(t) => t.apply(m, now),
                None => return Err(StorageError::UnknownTable(m.table_id)),
            }
        }
        Ok(())
    }

    /// Applies mutations to memtables only (data regenerated at every start,
    /// such as the schema of the system keyspaces).
    pub fn apply_unlogged(&self, mutations: Vec<Mutation>) {
        let now = now_in_seconds();
        for m in mutations {
            if let Some(t) = self.table(m.table_id) {
                t.apply(m, now);
            }
        }
    }

    /// Truncates a table durably.
    pub async fn truncate(&self, table_id: uuid::Uuid, truncated_at_micros: i64) -> Result<(), StorageError> {
        let log = self.log()?;
        let pos = log.append(&Entry::Truncate { table_id, truncated_at_micros })?;
        log.sync()?;
        log.wait_durable(pos).await?;
        if let Some(t) = self.table(table_id) {
            t.truncate();
        }
        Ok(())
    }

    /// Syncs and closes the commit log.
    pub fn shutdown(&self) {
        if let Some(l) = self.commitlog.write().take() {
            l.shutdown();
        }
    }

    pub fn data_directory(&self) -> &Path {
        self.config.data_directories.first().map(|p| p.as_path()).unwrap_or(Path::new("data"))
    }
}

//! The local storage engine: the partition data model with Cassandra's per-cell
//! reconciliation, mutations, the commit log and memtables.
//!
//! Counterpart of Cassandra's `db` package. SSTables and compaction plug in
//! behind [`ColumnFamilyStore`] as further [`PartitionSource`]s.

mod background;
pub mod cache;
pub mod commitlog;
pub mod compaction;
pub mod lifecycle;
mod mapped;
pub mod memtable;
mod prefetch;
pub mod repaired;
pub use sibyl_metrics as metrics;
pub mod sstable;
pub mod store;

// The data model lives in `sibyl-db`; the engine keeps its module paths.
pub use sibyl_db::data::*;
pub use sibyl_db::{clustering, counter, data, rows, serde};
pub use sibyl_db::{now_in_seconds, Bound, BoundKind, ClusteringComparator, ClusteringKey};
pub use store::{ColumnFamilyStore, Sources, StorageEngine};

/// Errors from the storage engine.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("corrupt commit log segment {path} at position {position}: {reason}")]
    CorruptCommitLog {
        path: String,
        position: u64,
        reason: String,
    },
    #[error("corrupt SSTable {path} at position {position}: {reason}")]
    CorruptSSTable {
        path: String,
        position: u64,
        reason: String,
    },
    #[error("cannot decode: {0}")]
    Decode(String),
    #[error("unknown table {0}")]
    UnknownTable(uuid::Uuid),
    #[error("commit log is stopped: {0}")]
    CommitLogStopped(String),
    /// Back-pressure that cannot be waited out (flushing fails).
    #[error("{0}")]
    WritesBlocked(String),
    /// A write held back by memtable memory for longer than it may wait.
    #[error("{0}")]
    Overloaded(String),
    /// A request the storage refuses (a bad snapshot name).
    #[error("{0}")]
    Invalid(String),
}

impl StorageError {
    /// An I/O error because the disk is full (ENOSPC, or EDQUOT).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StorageError::Io { source, .. } if matches!(source.raw_os_error(), Some(28) | Some(122)))
    }
}

impl From<sibyl_db::DecodeError> for StorageError {
    fn from(e: sibyl_db::DecodeError) -> Self {
        StorageError::Decode(e.0)
    }
}

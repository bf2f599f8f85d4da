//! The local storage engine: the partition data model with Cassandra's per-cell
//! reconciliation, mutations, the commit log and memtables.
//!
//! Counterpart of Cassandra's `db` package. SSTables and compaction plug in
//! behind [`ColumnFamilyStore`] as further [`PartitionSource`]s.

pub mod cache;
pub mod clustering;
pub mod commitlog;
pub mod compaction;
pub mod counter;
pub mod data;
pub mod lifecycle;
pub mod memtable;
pub mod metrics;
pub mod rows;
pub mod serde;
pub mod sstable;
pub mod store;

pub use clustering::{Bound, BoundKind, ClusteringComparator, ClusteringKey};
pub use data::*;
pub use store::{ColumnFamilyStore, StorageEngine};

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
}

impl StorageError {
    /// An I/O error because the disk is full (ENOSPC, or EDQUOT).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StorageError::Io { source, .. } if matches!(source.raw_os_error(), Some(28) | Some(122)))
    }
}

/// Seconds since the epoch, as Cassandra's `nowInSec`.
pub fn now_in_seconds() -> i32 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    d.as_secs().min(i32::MAX as u64) as i32
}

//! The data model shared by the storage engine, the coordinator and the
//! statement layer: partitions with Cassandra's per-cell reconciliation, rows,
//! cells, mutations, clustering keys, counter contexts, read commands, and the
//! versioned binary encoding used by the commit log, SSTables and messaging.
//!
//! Counterpart of Cassandra's `db`, `db.rows` and `db.partitions` packages;
//! it holds no engine (no files, no memtables), so crates that plan and
//! post-process reads and writes can depend on it without reaching storage.

pub mod cells;
pub mod clustering;
pub mod compaction_params;
pub mod counter;
pub mod data;
pub mod paxos;
pub mod read;
pub mod rows;
pub mod serde;
pub mod table_ids;

pub use clustering::{Bound, BoundKind, ClusteringComparator, ClusteringKey};
pub use data::*;
pub use read::{KeyBound, ReadCommand, ReadKind, ReadResponse};

/// Bytes that do not decode as the format says (from a disk or a peer).
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot decode: {0}")]
pub struct DecodeError(pub String);

/// Seconds since the epoch, as Cassandra's `nowInSec`: from the kernel's
/// coarse real-time clock (the time of its last tick, a few milliseconds
/// behind at most), which costs 3 ns to read against 30 for the precise
/// one, and a write reads it on every replica's apply.
pub fn now_in_seconds() -> i32 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    t.tv_sec.clamp(0, i32::MAX as i64) as i32
}

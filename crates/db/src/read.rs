//! Read commands and their responses (Cassandra's `ReadCommand`,
//! `SinglePartitionReadCommand`, `PartitionRangeReadCommand` and
//! `ReadResponse`).
//!
//! The statement layer builds a command; the coordinator sends it to replicas;
//! each replica's read handler serves it from its local storage, as the data
//! or as a digest of the data. Partitions travel unresolved (tombstones and
//! timestamps kept), so that the coordinator can reconcile replicas' answers
//! cell by cell.

use crate::clustering::ClusteringKey;
use crate::data::{DecoratedKey, Partition};
use bytes::Bytes;

/// A clustering slice `[start, end]`, both bounds inclusive of what they
/// include (see [`crate::BoundKind`]).
pub type Slice = (ClusteringKey, ClusteringKey);

/// What to read of one table.
#[derive(Debug, Clone)]
pub struct ReadCommand {
    pub table_id: uuid::Uuid,
    pub kind: ReadKind,
    /// Clustering slices to read (all rows when `None`).
    pub slices: Option<Vec<Slice>>,
    /// The time of the read (Cassandra's `nowInSec`): expiry is judged
    /// against it, on every replica alike.
    pub now: i32,
    /// Answer with a digest of the data instead of the data.
    pub digest: bool,
}

/// Which partitions a command reads.
#[derive(Debug, Clone)]
pub enum ReadKind {
    /// One partition.
    SinglePartition { key: DecoratedKey },
    /// Partitions in token order from `start` (from `start_token` when
    /// `None`) up to `end_token` inclusive, at most `limit` partitions.
    /// Paging resumes from the last partition key seen.
    PartitionRange {
        start: Option<KeyBound>,
        start_token: i64,
        end_token: i64,
        limit: usize,
    },
    /// Partitions found through a secondary index of the table: those whose
    /// indexed column holds `value`, in token order from `start`, at most
    /// `limit` partitions. Each replica searches its own index, checks each
    /// hit against its data (removing entries the data no longer backs), and
    /// answers with the matching rows only.
    Index {
        index: String,
        value: Bytes,
        start: Option<KeyBound>,
        limit: usize,
    },
}

/// Where a partition scan starts: at a key, with or without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBound {
    pub key: DecoratedKey,
    pub inclusive: bool,
}

/// A replica's answer to a [`ReadCommand`].
#[derive(Debug, Clone)]
pub enum ReadResponse {
    /// Partitions in token order (an empty partition is never sent).
    Data(Vec<(DecoratedKey, Partition)>),
    /// MD5 of the encoded data (see [`digest`]).
    Digest([u8; 16]),
}

impl ReadCommand {
    /// A command for one partition.
    pub fn single(table_id: uuid::Uuid, key: DecoratedKey, now: i32) -> Self {
        ReadCommand {
            table_id,
            kind: ReadKind::SinglePartition { key },
            slices: None,
            now,
            digest: false,
        }
    }

    /// The same command asking for a digest.
    pub fn as_digest(&self) -> Self {
        ReadCommand {
            digest: true,
            ..self.clone()
        }
    }

    /// The token the command's replicas are chosen by, for single-partition
    /// commands.
    pub fn token(&self) -> Option<i64> {
        match &self.kind {
            ReadKind::SinglePartition { key } => Some(key.token),
            _ => None,
        }
    }
}

/// The digest of a replica's data for a command: equal data gives equal
/// digests on every replica (partitions are encoded in token order, with
/// their timestamps and tombstones).
pub fn digest(data: &[(DecoratedKey, Partition)]) -> [u8; 16] {
    use md5::Digest;
    let mut h = md5::Md5::new();
    let mut buf = Vec::new();
    for (k, p) in data {
        buf.clear();
        buf.extend_from_slice(&(k.key.len() as u32).to_be_bytes());
        buf.extend_from_slice(&k.key);
        crate::serde::encode_partition(p, &mut buf);
        h.update(&buf);
    }
    h.finalize().into()
}

impl ReadResponse {
    /// The digest of this response (computed from the data when it is data).
    pub fn digest(&self) -> [u8; 16] {
        match self {
            ReadResponse::Data(d) => digest(d),
            ReadResponse::Digest(d) => *d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::no_clustering;
    use crate::data::{Cell, ColumnData, Row};

    fn partition(ts: i64) -> Partition {
        let mut p = Partition::new();
        let mut row = Row::default();
        row.cells.insert(
            crate::data::ColumnName::new("v"),
            ColumnData::Simple(Cell::live(ts, Bytes::from_static(b"x"))),
        );
        p.rows
            .insert(ClusteringKey::row(Vec::new(), no_clustering()), row);
        p
    }

    #[test]
    fn digests_agree_on_equal_data_and_differ_on_a_newer_timestamp() {
        let k = DecoratedKey::new(Bytes::from_static(b"k"));
        let a = ReadResponse::Data(vec![(k.clone(), partition(1))]);
        let b = ReadResponse::Data(vec![(k.clone(), partition(1))]);
        let c = ReadResponse::Data(vec![(k, partition(2))]);
        assert_eq!(a.digest(), b.digest());
        assert_ne!(a.digest(), c.digest());
        assert_eq!(ReadResponse::Digest(a.digest()).digest(), a.digest());
    }
}

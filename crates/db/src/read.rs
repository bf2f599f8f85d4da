//! Read commands and their responses (Cassandra's `ReadCommand`,
//! `SinglePartitionReadCommand`, `PartitionRangeReadCommand` and
//! `ReadResponse`).
//!
//! The statement layer builds a command; the coordinator sends it to replicas;
//! each replica's read handler serves it from its local storage, as the data
//! or as a digest of the data. Partitions travel unresolved (tombstones and
//! timestamps kept), so that the coordinator can reconcile replicas' answers
//! cell by cell.

use crate::clustering::{ClusteringComparator, ClusteringKey};
use crate::data::{DecoratedKey, Partition};
use crate::serde::Reader;
use crate::DecodeError;
use bytes::Bytes;
use std::sync::Arc;

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

// ---- encoding, for internode messages (version carried by the message header)

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

fn put_key_bound(out: &mut Vec<u8>, b: &Option<KeyBound>) {
    match b {
        None => out.push(0),
        Some(b) => {
            out.push(1 + b.inclusive as u8);
            put_bytes(out, &b.key.key);
        }
    }
}

fn get_key_bound(r: &mut Reader) -> Result<Option<KeyBound>, DecodeError> {
    Ok(match r.u8()? {
        0 => None,
        f @ (1 | 2) => Some(KeyBound {
            key: DecoratedKey::new(r.bytes()?),
            inclusive: f == 2,
        }),
        f => return Err(DecodeError(format!("unknown key bound flag {f}"))),
    })
}

fn get_limit(r: &mut Reader) -> Result<usize, DecodeError> {
    Ok(r.u32()? as usize)
}

impl ReadCommand {
    /// Appends the command's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.table_id.as_bytes());
        out.extend_from_slice(&self.now.to_be_bytes());
        out.push(self.digest as u8);
        match &self.kind {
            ReadKind::SinglePartition { key } => {
                out.push(0);
                put_bytes(out, &key.key);
            }
            ReadKind::PartitionRange {
                start,
                start_token,
                end_token,
                limit,
            } => {
                out.push(1);
                put_key_bound(out, start);
                out.extend_from_slice(&start_token.to_be_bytes());
                out.extend_from_slice(&end_token.to_be_bytes());
                out.extend_from_slice(&((*limit).min(u32::MAX as usize) as u32).to_be_bytes());
            }
            ReadKind::Index {
                index,
                value,
                start,
                limit,
            } => {
                out.push(2);
                put_bytes(out, index.as_bytes());
                put_bytes(out, value);
                put_key_bound(out, start);
                out.extend_from_slice(&((*limit).min(u32::MAX as usize) as u32).to_be_bytes());
            }
        }
        match &self.slices {
            None => out.push(0),
            Some(slices) => {
                out.push(1);
                out.extend_from_slice(&(slices.len() as u32).to_be_bytes());
                for (a, b) in slices {
                    crate::serde::encode_clustering(a, out);
                    crate::serde::encode_clustering(b, out);
                }
            }
        }
    }

    /// Decodes a command; `Ok(None)` when `comparator_of` does not know its
    /// table (the receiver answers that the table is unknown).
    pub fn decode(
        buf: &[u8],
        comparator_of: &dyn Fn(uuid::Uuid) -> Option<Arc<ClusteringComparator>>,
    ) -> Result<Result<ReadCommand, uuid::Uuid>, DecodeError> {
        let mut r = Reader::new(buf);
        let mut id = [0u8; 16];
        id.copy_from_slice(r.take(16)?);
        let table_id = crate::table_ids::canonical(uuid::Uuid::from_bytes(id));
        let now = r.i32()?;
        let digest = match r.u8()? {
            0 => false,
            1 => true,
            f => return Err(DecodeError(format!("unknown digest flag {f}"))),
        };
        let kind = match r.u8()? {
            0 => ReadKind::SinglePartition {
                key: DecoratedKey::new(r.bytes()?),
            },
            1 => {
                let start = get_key_bound(&mut r)?;
                let start_token = r.i64()?;
                let end_token = r.i64()?;
                ReadKind::PartitionRange {
                    start,
                    start_token,
                    end_token,
                    limit: get_limit(&mut r)?,
                }
            }
            2 => {
                let index = String::from_utf8(r.bytes()?.to_vec())
                    .map_err(|_| DecodeError("index name is not UTF-8".into()))?;
                let value = r.bytes()?;
                let start = get_key_bound(&mut r)?;
                ReadKind::Index {
                    index,
                    value,
                    start,
                    limit: get_limit(&mut r)?,
                }
            }
            k => return Err(DecodeError(format!("unknown read kind {k}"))),
        };
        let Some(cmp) = comparator_of(table_id) else {
            return Ok(Err(table_id));
        };
        let slices = match r.u8()? {
            0 => None,
            1 => {
                let n = r.count()?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let a = crate::serde::read_clustering(&mut r, &cmp)?;
                    let b = crate::serde::read_clustering(&mut r, &cmp)?;
                    v.push((a, b));
                }
                Some(v)
            }
            f => return Err(DecodeError(format!("unknown slices flag {f}"))),
        };
        if !r.is_empty() {
            return Err(DecodeError("trailing bytes after a read command".into()));
        }
        Ok(Ok(ReadCommand {
            table_id,
            kind,
            slices,
            now,
            digest,
        }))
    }
}

impl ReadResponse {
    /// Appends the response's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            ReadResponse::Digest(d) => {
                out.push(1);
                out.extend_from_slice(d);
            }
            ReadResponse::Data(parts) => {
                out.push(0);
                out.extend_from_slice(&(parts.len() as u32).to_be_bytes());
                for (k, p) in parts {
                    put_bytes(out, &k.key);
                    crate::serde::encode_partition(p, out);
                }
            }
        }
    }

    /// Decodes a response to a command on a table whose clustering
    /// comparator is `cmp`.
    pub fn decode(buf: &[u8], cmp: &Arc<ClusteringComparator>) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let out = match r.u8()? {
            1 => {
                let mut d = [0u8; 16];
                d.copy_from_slice(r.take(16)?);
                ReadResponse::Digest(d)
            }
            0 => {
                let n = r.count()?;
                let mut parts = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = DecoratedKey::new(r.bytes()?);
                    parts.push((key, crate::serde::read_partition(&mut r, cmp)?));
                }
                ReadResponse::Data(parts)
            }
            k => return Err(DecodeError(format!("unknown read response kind {k}"))),
        };
        if !r.is_empty() {
            return Err(DecodeError("trailing bytes after a read response".into()));
        }
        Ok(out)
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

    #[test]
    fn commands_and_responses_round_trip_and_bad_bytes_are_errors() {
        use crate::clustering::{BoundKind, ClusteringComparator};
        use sibyl_types::CqlType;
        let cmp = ClusteringComparator::new(vec![(CqlType::Int, false)]);
        let id = uuid::Uuid::from_u128(7);
        let ck = |v: i32, kind| ClusteringKey {
            values: vec![Bytes::copy_from_slice(&v.to_be_bytes())],
            kind,
            comparator: cmp.clone(),
        };
        let key = DecoratedKey::new(Bytes::from_static(b"k"));
        let commands = [
            ReadCommand {
                slices: Some(vec![(
                    ck(1, BoundKind::StartInclusive),
                    ck(5, BoundKind::EndExclusive),
                )]),
                ..ReadCommand::single(id, key.clone(), 99)
            },
            ReadCommand {
                table_id: id,
                kind: ReadKind::PartitionRange {
                    start: Some(KeyBound {
                        key: key.clone(),
                        inclusive: false,
                    }),
                    start_token: -5,
                    end_token: i64::MAX,
                    limit: 256,
                },
                slices: None,
                now: 1,
                digest: true,
            },
            ReadCommand {
                table_id: id,
                kind: ReadKind::Index {
                    index: "t_v".into(),
                    value: Bytes::from_static(b"v"),
                    start: None,
                    limit: 10,
                },
                slices: None,
                now: 1,
                digest: false,
            },
        ];
        let known = |t: uuid::Uuid| (t == id).then(|| cmp.clone());
        for c in &commands {
            let mut buf = Vec::new();
            c.encode(&mut buf);
            let back = ReadCommand::decode(&buf, &known)
                .expect("decodes")
                .expect("known table");
            assert_eq!(format!("{back:?}"), format!("{c:?}"));
            assert!(matches!(ReadCommand::decode(&buf, &|_| None), Ok(Err(t)) if t == id));
            for cut in 0..buf.len() {
                assert!(ReadCommand::decode(&buf[..cut], &known).is_err());
            }
        }
        for r in [
            ReadResponse::Data(vec![(key.clone(), partition(3))]),
            ReadResponse::Digest([7; 16]),
        ] {
            let mut buf = Vec::new();
            r.encode(&mut buf);
            let back = ReadResponse::decode(&buf, &cmp).expect("decodes");
            assert_eq!(back.digest(), r.digest());
            for cut in 0..buf.len() {
                assert!(ReadResponse::decode(&buf[..cut], &cmp).is_err());
            }
        }
    }
}

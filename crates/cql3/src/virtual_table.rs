//! Virtual tables (Cassandra's `db.virtual` package): the tables of
//! `system_views`, whose rows the node makes when they are read. They are
//! local to the node answering, ordered by their partition key's values
//! (Cassandra's `LocalPartitioner`), read-only, and need no `ALLOW
//! FILTERING`.

use crate::error::{Error, Result};
use bytes::Bytes;
use sibyl_db::cells::split_partition_key;
use sibyl_db::{DecoratedKey, Mutation, Partition, ReadCommand, ReadKind};
use sibyl_schema::schema::TableMetadata;
use std::cmp::Ordering;

/// The node's side: every row of a virtual table, made now.
pub trait VirtualTables: Send + Sync {
    /// The rows of `table`, as mutations (any number of rows each).
    fn rows(&self, table: &TableMetadata, now: i32) -> Vec<Mutation>;
}

/// A virtual table's partitions for one statement, in the order of their
/// keys' values; each key carries its rank as its token, so that the
/// statement's token-ordered scan and paging see that order.
pub struct VirtualRows {
    partitions: Vec<(DecoratedKey, Partition)>,
}

/// The order of two partition keys by their columns' values.
pub fn compare_partition_keys(table: &TableMetadata, a: &Bytes, b: &Bytes) -> Ordering {
    let types: Vec<_> = table.partition_key().iter().map(|c| &c.typ).collect();
    if types.len() == 1 {
        return types[0].compare(a, b);
    }
    let (ca, cb) = (
        split_partition_key(a, types.len()),
        split_partition_key(b, types.len()),
    );
    for (i, t) in types.iter().enumerate() {
        let o = t.compare(&ca[i], &cb[i]);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

impl VirtualRows {
    pub fn new(table: &TableMetadata, rows: Vec<Mutation>, now: i32) -> VirtualRows {
        let mut by_key: Vec<(bytes::Bytes, Partition)> = Vec::new();
        let mut sorted: Vec<Mutation> = rows;
        sorted.sort_by(|a, b| compare_partition_keys(table, &a.key.key, &b.key.key));
        for m in sorted {
            match by_key.last_mut() {
                Some((k, p)) if *k == m.key.key => p.merge(m.update, now),
                _ => by_key.push((m.key.key, m.update)),
            }
        }
        let partitions = by_key
            .into_iter()
            .enumerate()
            .map(|(rank, (key, p))| {
                (
                    DecoratedKey {
                        token: i64::MIN + 1 + rank as i64,
                        key,
                    },
                    p,
                )
            })
            .collect();
        VirtualRows { partitions }
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        self.partitions.iter().position(|(k, _)| k.key == key)
    }

    /// What `cmd` selects, as a replica would answer it.
    pub fn read(&self, cmd: &ReadCommand) -> Result<Vec<(DecoratedKey, Partition)>> {
        let slices = cmd.slices.as_deref();
        match &cmd.kind {
            ReadKind::SinglePartition { key } => Ok(self
                .position(&key.key)
                .map(|i| {
                    let (k, p) = &self.partitions[i];
                    (k.clone(), p.sliced(slices))
                })
                .into_iter()
                .collect()),
            ReadKind::PartitionRange { start, limit, .. } => {
                // a resumed page starts at its key, known by its value
                let first = match start {
                    None => 0,
                    Some(b) => match self.position(&b.key.key) {
                        Some(i) if b.inclusive => i,
                        Some(i) => i + 1,
                        None => self.partitions.len(),
                    },
                };
                Ok(self.partitions[first.min(self.partitions.len())..]
                    .iter()
                    .take(*limit)
                    .map(|(k, p)| (k.clone(), p.sliced(slices)))
                    .collect())
            }
            ReadKind::Index { .. } => Err(Error::Invalid(
                "Secondary indexes are not supported on virtual tables".into(),
            )),
        }
    }
}

//! The batchlog on the replica (Cassandra's `BatchlogManager` storage side):
//! a logged batch's mutations kept in `system.batches` under the batch's
//! time-based id until its coordinator removes it, and read back for replay
//! when the coordinator never did.

use crate::replica::Replica;
use bytes::Bytes;
use sibyl_cluster::messaging::ReplicaFailure;
use sibyl_db::cells::WriteParams;
use sibyl_db::serde::{decode_mutation, encode_mutation};
use sibyl_db::{
    ColumnData, DecoratedKey, Mutation, Partition, ReadCommand, ReadKind, ReadResponse,
};
use sibyl_schema::schema::TableMetadata;
use sibyl_schema::schema_tables::{int, row_mutation};
use std::sync::Arc;

/// The format version of a stored batch's mutations.
pub const BATCH_FORMAT_VERSION: i32 = 1;

/// A batch found in the batchlog.
#[derive(Debug)]
pub struct StoredBatch {
    pub id: uuid::Uuid,
    /// The mutations of tables that still exist.
    pub mutations: Vec<Mutation>,
}

impl Replica {
    fn batches_table(&self) -> Result<Arc<TableMetadata>, ReplicaFailure> {
        self.schema()
            .table("system", "batches")
            .cloned()
            .ok_or_else(|| ReplicaFailure::Error("system.batches is missing".into()))
    }

    /// Stores a batch (`BATCH_STORE_REQ`).
    pub async fn batchlog_store(
        &self,
        id: uuid::Uuid,
        mutations: &[Mutation],
    ) -> Result<(), ReplicaFailure> {
        let t = self.batches_table()?;
        let blobs: Vec<Bytes> = mutations
            .iter()
            .map(|m| {
                let mut out = Vec::new();
                encode_mutation(m, &mut out);
                Bytes::from(out)
            })
            .collect();
        let wp = WriteParams {
            timestamp: sibyl_types::timeuuid::timeuuid_timestamp_millis(id.as_bytes()) * 1000,
            ttl: 0,
            now: self.clock.now_seconds(),
        };
        let m = row_mutation(
            &t,
            &[Bytes::copy_from_slice(id.as_bytes())],
            &[],
            &[
                (
                    "mutations",
                    Some(sibyl_types::value::serialize_collection(&blobs)),
                ),
                ("version", Some(int(BATCH_FORMAT_VERSION))),
            ],
            &wp,
        );
        self.apply(vec![m]).await
    }

    /// Removes a batch (`BATCH_REMOVE_REQ`).
    pub async fn batchlog_remove(&self, id: uuid::Uuid) -> Result<(), ReplicaFailure> {
        let t = self.batches_table()?;
        let mut p = Partition::new();
        p.deletion = sibyl_db::DeletionTime {
            marked_for_delete_at: self.clock.now_micros(),
            local_deletion_time: self.clock.now_seconds(),
        };
        self.apply(vec![Mutation {
            table_id: t.id,
            key: DecoratedKey::new(Bytes::copy_from_slice(id.as_bytes())),
            update: p,
        }])
        .await
    }

    /// The batches this node keeps, oldest first.
    pub fn batchlog_batches(&self) -> Result<Vec<StoredBatch>, ReplicaFailure> {
        let t = self.batches_table()?;
        let now = self.clock.now_seconds();
        let cmd = ReadCommand {
            table_id: t.id,
            kind: ReadKind::PartitionRange {
                start: None,
                start_token: i64::MIN,
                end_token: i64::MAX,
                limit: usize::MAX,
            },
            slices: None,
            now,
            digest: false,
        };
        let ReadResponse::Data(data) = self.read(&cmd)? else {
            return Ok(Vec::new());
        };
        let schema = self.schema();
        let comparator = |id| schema.table_by_id(id).map(|t| t.comparator.clone());
        let mut out = Vec::new();
        for (key, mut p) in data {
            p.resolve(now);
            let Ok(id) = <[u8; 16]>::try_from(key.key.as_ref()) else {
                continue;
            };
            let Some(row) = p.rows.values().next() else {
                continue;
            };
            let mut mutations = Vec::new();
            if let Some(ColumnData::Complex { cells, .. }) = row.cells.get("mutations") {
                for c in cells.values().filter(|c| c.is_live(now)) {
                    let Some(v) = &c.value else { continue };
                    match decode_mutation(v, &comparator) {
                        Ok(Some(m)) => mutations.push(m),
                        // a table dropped since: nothing to replay there
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!("skipping an unreadable mutation of batch: {e:?}")
                        }
                    }
                }
            }
            out.push(StoredBatch {
                id: uuid::Uuid::from_bytes(id),
                mutations,
            });
        }
        out.sort_by_key(|b| sibyl_types::timeuuid::timeuuid_ticks(b.id.as_bytes()));
        Ok(out)
    }
}

//! `system.peers` and `system.peers_v2`: one row per other node of the
//! cluster, from the metadata log's directory (address, data center, rack,
//! host id, tokens) and gossip (the schema version it announced). Drivers
//! read them right after connecting to find the other nodes and route by
//! token.

use crate::cluster::{Directory, GossipDriver, NodeRecord};
use crate::RELEASE_VERSION;
use bytes::Bytes;
use sibyl_db::cells::WriteParams;
use sibyl_schema::schema::TableMetadata;
use sibyl_schema::schema_tables::inet;
use sibyl_schema::schema_tables::{int, row_mutation, text};
use sibyl_storage::{StorageEngine, StorageError};
use std::sync::Arc;

fn write_params() -> WriteParams {
    WriteParams {
        timestamp: sibyl_types::timeuuid::timestamp_micros_now(),
        ttl: 0,
        now: sibyl_storage::now_in_seconds(),
    }
}

/// The node's storage and its two peers tables.
#[derive(Clone)]
pub struct Peers {
    pub storage: Arc<StorageEngine>,
    pub peers: Arc<TableMetadata>,
    pub peers_v2: Arc<TableMetadata>,
}

/// Rewrites the rows of one peer.
pub async fn write_peer(
    t: &Peers,
    rec: &NodeRecord,
    schema_version: Option<uuid::Uuid>,
) -> Result<(), StorageError> {
    let (peers, peers_v2) = (&t.peers, &t.peers_v2);
    let mut toks: Vec<Bytes> = rec.tokens.iter().map(|t| text(&t.to_string())).collect();
    toks.sort();
    let tokens = sibyl_types::value::serialize_collection(&toks);
    let host = Bytes::copy_from_slice(rec.host_id.as_bytes());
    let schema_version = schema_version.map(|v| Bytes::copy_from_slice(v.as_bytes()));
    let wp = write_params();
    let v1 = row_mutation(
        peers,
        &[inet(rec.address)],
        &[],
        &[
            ("data_center", Some(text(&rec.datacenter))),
            ("host_id", Some(host.clone())),
            ("preferred_ip", None),
            ("rack", Some(text(&rec.rack))),
            ("release_version", Some(text(RELEASE_VERSION))),
            ("rpc_address", Some(inet(rec.native_address.ip()))),
            ("schema_version", schema_version.clone()),
            ("tokens", Some(tokens.clone())),
        ],
        &wp,
    );
    let v2 = row_mutation(
        peers_v2,
        &[inet(rec.address)],
        &[int(rec.storage_port as i32)],
        &[
            ("data_center", Some(text(&rec.datacenter))),
            ("host_id", Some(host)),
            ("native_address", Some(inet(rec.native_address.ip()))),
            ("native_port", Some(int(rec.native_address.port() as i32))),
            ("preferred_ip", None),
            ("preferred_port", None),
            ("rack", Some(text(&rec.rack))),
            ("release_version", Some(text(&rec.release_version))),
            ("schema_version", schema_version),
            ("tokens", Some(tokens)),
        ],
        &wp,
    );
    t.storage.apply(vec![v1, v2]).await
}

/// Deletes the rows of peers that are no longer in `directory` (they left
/// the ring: decommissioned, removed, assassinated or replaced at another
/// address), as Cassandra's `SystemKeyspace.removeEndpoint` does, so that
/// drivers stop looking for them.
async fn prune(t: &Peers, directory: &Directory, local: uuid::Uuid) -> Result<(), StorageError> {
    let keep: std::collections::BTreeSet<Bytes> = directory
        .nodes
        .values()
        .filter(|n| n.host_id != local)
        .map(|n| inet(n.address))
        .collect();
    let wp = write_params();
    let mut deletions = Vec::new();
    for table in [&t.peers, &t.peers_v2] {
        let Some(cfs) = t.storage.table(table.id) else {
            continue;
        };
        for key in cfs.keys(None, i64::MIN, i64::MAX, 100_000)? {
            if keep.contains(&key.key) {
                continue;
            }
            let mut p = sibyl_db::Partition::new();
            p.deletion = sibyl_db::DeletionTime {
                marked_for_delete_at: wp.timestamp,
                local_deletion_time: wp.now,
            };
            deletions.push(sibyl_db::Mutation {
                table_id: table.id,
                key,
                update: p,
            });
        }
    }
    if deletions.is_empty() {
        return Ok(());
    }
    t.storage.apply(deletions).await
}

/// Writes the rows of every node of `directory` but this one, and deletes
/// those of nodes that left it.
pub async fn write_all(
    t: &Peers,
    directory: &Directory,
    local: uuid::Uuid,
    gossip: &GossipDriver,
) -> Result<(), StorageError> {
    for rec in directory.nodes.values().filter(|n| n.host_id != local) {
        let v = gossip.schema_version_of(rec.address);
        write_peer(t, rec, v).await?;
    }
    prune(t, directory, local).await
}

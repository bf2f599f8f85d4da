//! Three nodes in one process over the in-process messaging: a ring of
//! three, a keyspace with replication factor 3, and the coordinator code the
//! server runs (StorageProxy and the replica verb handlers over real storage
//! engines in temporary directories).

use bytes::Bytes;
use sibyl_cluster::messaging::{LocalNetwork, Verb};
use sibyl_cluster::{Endpoint, SystemClock, TokenMetadata};
use sibyl_db::{
    Cell, ClusteringKey, ColumnData, DecoratedKey, LivenessInfo, Mutation, Partition, ReadCommand,
    ReadKind, Row, NO_DELETION_TIME,
};
use sibyl_protocol::Consistency;
use sibyl_schema::schema::{
    ColumnKind, ColumnMetadata, KeyspaceMetadata, Schema, TableMetadata, TableParams,
};
use sibyl_service::error::{ServiceError, WriteType};
use sibyl_service::proxy::{StorageProxy, Timeouts};
use sibyl_service::replica::{Replica, ReplicaVerbs, SharedSchema};
use sibyl_storage::store::StorageConfig;
use sibyl_storage::StorageEngine;
use sibyl_types::CqlType;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

fn ip(i: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, i])
}

fn schema() -> (Schema, Arc<TableMetadata>) {
    let col = |name: &str, typ: CqlType, kind: ColumnKind, position: i32| ColumnMetadata {
        name: name.into(),
        typ,
        kind,
        position,
        reversed: false,
    };
    let table = Arc::new(TableMetadata::new(
        "ks",
        "t",
        uuid::Uuid::from_u128(42),
        vec![
            col("k", CqlType::Int, ColumnKind::PartitionKey, 0),
            col("v", CqlType::Text, ColumnKind::Regular, -1),
        ],
        TableParams::default(),
    ));
    let replication: BTreeMap<String, String> = [
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "3"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let ks = KeyspaceMetadata {
        name: "ks".into(),
        replication: replication.into(),
        durable_writes: true,
        tables: [("t".to_string(), table.clone())].into_iter().collect(),
        types: BTreeMap::new(),
        is_system: false,
        is_virtual: false,
    };
    let mut s = Schema::default();
    s.keyspaces.insert("ks".into(), Arc::new(ks));
    (s, table)
}

struct Node {
    proxy: StorageProxy,
    storage: Arc<StorageEngine>,
    _dir: tempfile::TempDir,
}

/// Three nodes, each with its storage, replica and coordinator, on one
/// in-process network; tokens interleave around the ring.
fn cluster(net: &Arc<LocalNetwork>) -> (Vec<Node>, Arc<TableMetadata>) {
    let (schema, table) = schema();
    let mut ring = TokenMetadata::new();
    for i in 1..=3u8 {
        let tokens: Vec<i64> = (0..4)
            .map(|v| (i64::MIN as i128 + (v * 3 + i as i128) * (u64::MAX as i128 / 13)) as i64)
            .collect();
        ring.add(
            Endpoint {
                host_id: uuid::Uuid::from_u128(i as u128),
                address: ip(i),
                datacenter: "datacenter1".into(),
                rack: "rack1".into(),
            },
            &tokens,
        );
    }
    let timeouts = Timeouts {
        read: Duration::from_millis(300),
        range: Duration::from_millis(300),
        write: Duration::from_millis(300),
        ..Timeouts::default()
    };
    let nodes = (1..=3u8)
        .map(|i| {
            let dir = tempfile::tempdir().expect("temp dir");
            let storage = StorageEngine::new(StorageConfig::small(dir.path())).expect("storage");
            sibyl_service::stores::open_store(&storage, &table).expect("store");
            storage.start_commitlog(&[]).expect("commit log");
            let shared: SharedSchema = sibyl_service::replica::shared_schema(schema.clone());
            let replica = Arc::new(Replica::new(
                storage.clone(),
                shared.clone(),
                Arc::new(SystemClock),
                timeouts.write,
            ));
            net.register(ip(i), Arc::new(ReplicaVerbs(replica.clone())));
            let proxy = StorageProxy::new(
                replica,
                net.endpoint(ip(i)),
                Arc::new(SystemClock),
                shared,
                "datacenter1".into(),
                timeouts,
            );
            proxy.ring.store(Arc::new(ring.clone()));
            Node {
                proxy,
                storage,
                _dir: dir,
            }
        })
        .collect();
    (nodes, table)
}

fn key(k: i32) -> DecoratedKey {
    DecoratedKey::new(Bytes::copy_from_slice(&k.to_be_bytes()))
}

fn write(t: &TableMetadata, k: i32, v: &str, ts: i64) -> Mutation {
    let mut row = Row {
        liveness: Some(LivenessInfo {
            timestamp: ts,
            ttl: 0,
            local_expiration_time: NO_DELETION_TIME,
        }),
        ..Row::default()
    };
    row.cells.insert(
        "v",
        ColumnData::Simple(Cell::live(ts, Bytes::copy_from_slice(v.as_bytes()))),
    );
    let mut update = Partition::new();
    update
        .rows
        .insert(ClusteringKey::row(Vec::new(), t.comparator.clone()), row);
    Mutation {
        table_id: t.id,
        key: key(k),
        update,
    }
}

/// The value of `v` read through `proxy` at `cl`.
async fn read(
    proxy: &StorageProxy,
    t: &TableMetadata,
    k: i32,
    cl: Consistency,
) -> Result<Option<String>, ServiceError> {
    let now = sibyl_db::now_in_seconds();
    let mut data = proxy
        .read(ReadCommand::single(t.id, key(k), now), cl)
        .await?;
    Ok(data.pop().and_then(|(_, mut p)| {
        p.resolve(now);
        let row = p.rows.values().next()?;
        match row.cells.get("v")? {
            ColumnData::Simple(c) => c
                .value
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }))
}

/// What one node's own storage holds for `k`.
fn local_value(node: &Node, t: &TableMetadata, k: i32) -> Option<String> {
    let p = node.storage.table(t.id)?.read(&key(k), None).ok()??;
    let row = p.rows.values().next()?;
    match row.cells.get("v")? {
        ColumnData::Simple(c) => c
            .value
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_writes_and_reads_survive_one_lost_replica_and_all_does_not() {
    let net = LocalNetwork::new();
    let (nodes, t) = cluster(&net);

    // a QUORUM write through node 1 reaches every replica; a QUORUM read
    // through node 2 sees it
    nodes[0]
        .proxy
        .mutate(vec![write(&t, 1, "one", 10)], Consistency::Quorum)
        .await
        .expect("quorum write");
    assert_eq!(
        read(&nodes[1].proxy, &t, 1, Consistency::Quorum)
            .await
            .expect("quorum read"),
        Some("one".into())
    );
    // the write went to all three replicas (the last acknowledgements
    // arrive after the coordinator answered)
    tokio::time::sleep(Duration::from_millis(50)).await;
    for n in &nodes {
        assert_eq!(local_value(n, &t, 1), Some("one".into()));
    }

    // node 3 is cut off from node 1: QUORUM still succeeds through node 1
    net.partition(&[ip(1)], &[ip(3)]);
    nodes[0]
        .proxy
        .mutate(vec![write(&t, 2, "two", 20)], Consistency::Quorum)
        .await
        .expect("quorum write with one replica lost");
    assert_eq!(
        read(&nodes[0].proxy, &t, 2, Consistency::Quorum)
            .await
            .expect("quorum read"),
        Some("two".into())
    );
    assert_eq!(local_value(&nodes[2], &t, 2), None, "node 3 never got it");
    assert!(net.dropped(Verb::Mutation) >= 1);

    // ALL cannot be met: a write timeout with Cassandra's fields
    match nodes[0]
        .proxy
        .mutate(vec![write(&t, 3, "three", 30)], Consistency::All)
        .await
    {
        Err(ServiceError::WriteTimeout {
            consistency,
            received,
            block_for,
            write_type,
        }) => {
            assert_eq!(consistency, Consistency::All);
            assert_eq!(block_for, 3);
            assert_eq!(received, 2);
            assert_eq!(write_type, WriteType::Simple);
        }
        other => panic!("expected a write timeout, got {other:?}"),
    }
    match read(&nodes[0].proxy, &t, 2, Consistency::All).await {
        Err(ServiceError::ReadTimeout {
            consistency,
            block_for,
            received,
            data_present,
        }) => {
            assert_eq!(consistency, Consistency::All);
            assert_eq!(block_for, 3);
            assert_eq!(received, 2);
            assert!(data_present);
        }
        other => panic!("expected a read timeout, got {other:?}"),
    }

    // healed: node 3 is stale for key 2; a read at ALL sees the digests
    // disagree and reconciles the replicas' data
    net.heal();
    assert_eq!(
        read(&nodes[2].proxy, &t, 2, Consistency::All)
            .await
            .expect("read at ALL"),
        Some("two".into())
    );
    // a newer write wins over an older one, whichever replicas answer
    nodes[1]
        .proxy
        .mutate(vec![write(&t, 2, "older", 5)], Consistency::One)
        .await
        .expect("write at ONE");
    assert_eq!(
        read(&nodes[2].proxy, &t, 2, Consistency::All)
            .await
            .expect("read at ALL"),
        Some("two".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_reads_cover_every_vnode_range_across_the_nodes() {
    let net = LocalNetwork::new();
    let (nodes, t) = cluster(&net);
    let muts: Vec<Mutation> = (0..50).map(|k| write(&t, k, &format!("v{k}"), 1)).collect();
    nodes[0]
        .proxy
        .mutate(muts, Consistency::All)
        .await
        .expect("write at ALL");
    let now = sibyl_db::now_in_seconds();
    let cmd = |limit| ReadCommand {
        table_id: t.id,
        kind: ReadKind::PartitionRange {
            start: None,
            start_token: i64::MIN,
            end_token: i64::MAX,
            limit,
        },
        slices: None,
        now,
        digest: false,
    };
    let all = nodes[1]
        .proxy
        .read(cmd(1000), Consistency::Quorum)
        .await
        .expect("range read");
    assert_eq!(all.len(), 50);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "token order");
    let some = nodes[2]
        .proxy
        .read(cmd(7), Consistency::One)
        .await
        .expect("range read");
    assert_eq!(
        some.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        all[..7].iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_when_the_ring_has_too_few_replicas() {
    let net = LocalNetwork::new();
    let (nodes, t) = cluster(&net);
    // a keyspace asking for more replicas than the ring has nodes
    let mut s = Schema::clone(&nodes[0].proxy.schema());
    let mut ks = (**s.keyspaces.get("ks").expect("ks")).clone();
    ks.replication = [
        ("class".to_string(), "SimpleStrategy".to_string()),
        ("replication_factor".to_string(), "5".to_string()),
    ]
    .into_iter()
    .collect::<BTreeMap<_, _>>()
    .into();
    s.keyspaces.insert("ks".into(), Arc::new(ks));
    nodes[0].proxy.shared_schema().store(Arc::new(s));
    match nodes[0]
        .proxy
        .mutate(vec![write(&t, 1, "x", 1)], Consistency::All)
        .await
    {
        Err(ServiceError::Unavailable {
            required, alive, ..
        }) => assert_eq!((required, alive), (5, 3)),
        other => panic!("expected unavailable, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_finds_replicas_disagreeing_repairs_the_stale_one() {
    let net = LocalNetwork::new();
    let (nodes, t) = cluster(&net);
    nodes[0]
        .proxy
        .mutate(vec![write(&t, 7, "old", 10)], Consistency::All)
        .await
        .expect("write to all");
    // node 3 misses the newer value
    net.partition(&[ip(1)], &[ip(3)]);
    nodes[0]
        .proxy
        .mutate(vec![write(&t, 7, "new", 20)], Consistency::Quorum)
        .await
        .expect("quorum write");
    assert_eq!(local_value(&nodes[2], &t, 7), Some("old".into()));
    net.heal();
    // a read at ALL sees the digests disagree, answers with the newest value
    // and writes it back to node 3 before answering
    assert_eq!(
        read(&nodes[0].proxy, &t, 7, Consistency::All)
            .await
            .expect("read at ALL"),
        Some("new".into())
    );
    assert_eq!(local_value(&nodes[2], &t, 7), Some("new".into()));
    // the replicas now agree: node 3 alone answers the newest value
    assert_eq!(
        read(&nodes[2].proxy, &t, 7, Consistency::One)
            .await
            .expect("read at ONE"),
        Some("new".into())
    );
}

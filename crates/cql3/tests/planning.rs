//! The statement layer's planning, seen from the replicas: what read commands,
//! mutations and truncations a CQL statement turns into.
//!
//! Node 1 runs the query processor and coordinator the server runs; the ring
//! holds only node 2, so every request crosses the in-process messaging,
//! where a recording handler keeps a copy before node 2's replica verbs
//! answer it. A statement that planning refuses must send nothing.

use bytes::Bytes;
use parking_lot::Mutex;
use sibyl_cluster::messaging::{BoxFuture, LocalNetwork, Request, Response, VerbHandler};
use sibyl_cluster::{Endpoint, SystemClock, TokenMetadata};
use sibyl_cql::parse_statement;
use sibyl_cql3::error::Error;
use sibyl_cql3::query::{ClientState, Outcome, QueryOptions, QueryProcessor};
use sibyl_db::{BoundKind, ReadKind};
use sibyl_protocol::Consistency;
use sibyl_protocol::ResultBody;
use sibyl_schema::schema::Schema;
use sibyl_service::proxy::{StorageProxy, Timeouts};
use sibyl_service::replica::{Replica, ReplicaVerbs, SharedSchema};
use sibyl_service::stores::open_system_keyspaces;
use sibyl_storage::store::StorageConfig;
use sibyl_storage::StorageEngine;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

fn ip(i: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, i])
}

/// A storage engine with the system tables open, and the schema they make.
fn storage(dir: &std::path::Path) -> (Arc<StorageEngine>, Schema) {
    let storage = StorageEngine::new(StorageConfig::small(dir)).expect("storage");
    let schema = open_system_keyspaces(&storage).expect("system tables");
    storage.start_commitlog(&[]).expect("commit log");
    (storage, schema)
}

/// Keeps a copy of every request before the replica answers it.
struct Recording {
    inner: ReplicaVerbs,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl VerbHandler for Recording {
    fn handle(&self, from: IpAddr, request: Request) -> BoxFuture<Response> {
        self.seen.lock().push(request.clone());
        self.inner.handle(from, request)
    }
}

struct Harness {
    qp: QueryProcessor,
    remote: Arc<Replica>,
    seen: Arc<Mutex<Vec<Request>>>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Harness {
    fn new() -> Harness {
        let net = LocalNetwork::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let timeouts = Timeouts {
            read: Duration::from_secs(2),
            range: Duration::from_secs(2),
            write: Duration::from_secs(2),
            ..Timeouts::default()
        };
        let mut dirs = Vec::new();
        let mut replicas = Vec::new();
        for _ in 1..=2u8 {
            let dir = tempfile::tempdir().expect("temp dir");
            let (storage, schema) = storage(dir.path());
            let shared: SharedSchema = sibyl_service::replica::shared_schema(schema);
            let replica = Arc::new(Replica::new(
                storage,
                shared.clone(),
                Arc::new(SystemClock),
                timeouts.write,
            ));
            dirs.push(dir);
            replicas.push((replica, shared));
        }
        let (remote, _) = replicas.pop().expect("node 2");
        let (local, local_schema) = replicas.pop().expect("node 1");
        net.register(
            ip(2),
            Arc::new(Recording {
                inner: ReplicaVerbs(remote.clone()),
                seen: seen.clone(),
            }),
        );
        let proxy = StorageProxy::new(
            local,
            net.endpoint(ip(1)),
            Arc::new(SystemClock),
            local_schema,
            "datacenter1".into(),
            timeouts,
        );
        let mut ring = TokenMetadata::new();
        ring.add(
            Endpoint {
                host_id: uuid::Uuid::from_u128(2),
                address: ip(2),
                datacenter: "datacenter1".into(),
                rack: "rack1".into(),
            },
            &[0],
        );
        proxy.ring.store(Arc::new(ring));
        Harness {
            qp: QueryProcessor::new(Arc::new(proxy), 5 << 10, 50 << 10),
            remote,
            seen,
            _dirs: dirs,
        }
    }

    /// Runs a schema statement on node 1 and gives node 2 the same schema.
    async fn ddl(&self, q: &str) {
        self.exec(q).await.expect(q);
        let next = Schema::clone(&self.qp.schema());
        self.remote
            .apply_schema_change(Vec::new(), next, None)
            .await
            .expect("schema on node 2");
        self.seen.lock().clear();
    }

    async fn exec_with(&self, q: &str, opts: QueryOptions) -> Result<Outcome, Error> {
        let st = parse_statement(q)?;
        let mut client = ClientState {
            keyspace: Some("ks".into()),
            ..Default::default()
        };
        self.qp.execute(&st, &mut client, &opts).await
    }

    async fn exec(&self, q: &str) -> Result<Outcome, Error> {
        self.exec_with(q, QueryOptions::default()).await
    }

    /// The requests node 2 received since the last call.
    fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.seen.lock())
    }

    async fn with_table(cql: &str) -> Harness {
        let h = Harness::new();
        h.ddl("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            .await;
        h.ddl(cql).await;
        h
    }
}

fn int(v: i32) -> Bytes {
    Bytes::copy_from_slice(&v.to_be_bytes())
}

fn rows(o: &Outcome) -> Vec<Vec<Option<Bytes>>> {
    match &o.body {
        ResultBody::Rows { rows, .. } => rows.clone(),
        other => panic!("not rows: {other:?}"),
    }
}

fn reads(seen: &[Request]) -> Vec<&sibyl_db::ReadCommand> {
    seen.iter()
        .filter_map(|r| match r {
            Request::Read(c) => Some(c),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn in_on_the_partition_key_reads_each_partition_once_in_value_order() {
    let h = Harness::with_table("CREATE TABLE ks.t (k int PRIMARY KEY, v int)").await;
    let o = h
        .exec("SELECT * FROM t WHERE k IN (3, 1, 3)")
        .await
        .expect("select");
    assert!(rows(&o).is_empty());
    let seen = h.take();
    let keys: Vec<Bytes> = reads(&seen)
        .iter()
        .map(|c| match &c.kind {
            ReadKind::SinglePartition { key } => key.key.clone(),
            other => panic!("not a single-partition read: {other:?}"),
        })
        .collect();
    assert_eq!(keys, vec![int(1), int(3)]);
    assert_eq!(seen.len(), 2, "nothing but the two reads: {seen:?}");
}

#[tokio::test]
async fn clustering_relations_become_one_slice_with_their_bounds() {
    let h =
        Harness::with_table("CREATE TABLE ks.t (k int, c int, v int, PRIMARY KEY (k, c))").await;
    h.exec("SELECT * FROM t WHERE k = 1 AND c >= 2 AND c < 5")
        .await
        .expect("select");
    let seen = h.take();
    let cmds = reads(&seen);
    assert_eq!(cmds.len(), 1);
    let slices = cmds[0].slices.as_ref().expect("a slice");
    assert_eq!(slices.len(), 1);
    let (start, end) = &slices[0];
    assert_eq!(
        (start.values.clone(), start.kind),
        (vec![int(2)], BoundKind::StartInclusive)
    );
    assert_eq!(
        (end.values.clone(), end.kind),
        (vec![int(5)], BoundKind::EndExclusive)
    );

    // IN on the clustering column: one slice per value, in clustering order
    h.exec("SELECT * FROM t WHERE k = 1 AND c IN (7, 2)")
        .await
        .expect("select");
    let seen = h.take();
    let slices = reads(&seen)[0].slices.clone().expect("slices");
    let starts: Vec<Vec<Bytes>> = slices.iter().map(|(s, _)| s.values.clone()).collect();
    assert_eq!(starts, vec![vec![int(2)], vec![int(7)]]);

    // no clustering restriction: the whole partition
    h.exec("SELECT * FROM t WHERE k = 1").await.expect("select");
    assert!(reads(&h.take())[0].slices.is_none());
}

#[tokio::test]
async fn token_restrictions_become_a_range_read_with_inclusive_bounds() {
    let h = Harness::with_table("CREATE TABLE ks.t (k int PRIMARY KEY, v int)").await;
    h.exec("SELECT * FROM t WHERE token(k) > 100 AND token(k) <= 200")
        .await
        .expect("select");
    let seen = h.take();
    let cmds = reads(&seen);
    assert!(!cmds.is_empty());
    let bounds: Vec<(i64, i64)> = cmds
        .iter()
        .map(|c| match &c.kind {
            ReadKind::PartitionRange {
                start_token,
                end_token,
                start,
                ..
            } => {
                assert!(start.is_none());
                (*start_token, *end_token)
            }
            other => panic!("not a range read: {other:?}"),
        })
        .collect();
    assert_eq!(bounds.first().map(|b| b.0), Some(101));
    assert_eq!(bounds.last().map(|b| b.1), Some(200));
}

#[tokio::test]
async fn filtering_is_refused_before_anything_is_read() {
    let h =
        Harness::with_table("CREATE TABLE ks.t (k int, c int, v int, PRIMARY KEY (k, c))").await;
    let e = h
        .exec("SELECT * FROM t WHERE v = 1")
        .await
        .err()
        .expect("needs ALLOW FILTERING");
    assert!(e.to_string().contains("ALLOW FILTERING"), "{e}");
    let e = h
        .exec("SELECT * FROM t WHERE k = 1 ORDER BY v DESC")
        .await
        .err()
        .expect("order by a regular column");
    assert!(e.to_string().contains("Order by"), "{e}");
    assert!(h.take().is_empty(), "a refused statement sent requests");

    // with ALLOW FILTERING: a scan of the whole ring, filtered on node 1
    h.exec("INSERT INTO t (k, c, v) VALUES (1, 1, 1)")
        .await
        .expect("insert");
    h.exec("INSERT INTO t (k, c, v) VALUES (1, 2, 2)")
        .await
        .expect("insert");
    h.take();
    let o = h
        .exec("SELECT c FROM t WHERE v = 2 ALLOW FILTERING")
        .await
        .expect("select");
    assert_eq!(rows(&o), vec![vec![Some(int(2))]]);
    let seen = h.take();
    let cmds = reads(&seen);
    let (first, last) = (cmds.first().expect("a read"), cmds.last().expect("a read"));
    assert!(matches!(
        first.kind,
        ReadKind::PartitionRange {
            start_token: i64::MIN,
            ..
        }
    ));
    assert!(matches!(
        last.kind,
        ReadKind::PartitionRange {
            end_token: i64::MAX,
            ..
        }
    ));
}

#[tokio::test]
async fn an_indexed_column_is_read_through_the_index() {
    let h = Harness::with_table("CREATE TABLE ks.t (k int PRIMARY KEY, v int)").await;
    h.ddl("CREATE INDEX t_v ON ks.t (v)").await;
    h.exec("SELECT * FROM t WHERE v = 7").await.expect("select");
    let seen = h.take();
    let cmds = reads(&seen);
    assert!(!cmds.is_empty());
    for c in cmds {
        match &c.kind {
            ReadKind::Index { index, value, .. } => {
                assert_eq!(index, "t_v");
                assert_eq!(value, &int(7));
            }
            other => panic!("not an index read: {other:?}"),
        }
    }
}

#[tokio::test]
async fn writes_become_one_mutation_per_partition_with_the_statement_timestamp() {
    let h =
        Harness::with_table("CREATE TABLE ks.t (k int, c int, v int, PRIMARY KEY (k, c))").await;
    h.exec("UPDATE t USING TIMESTAMP 42 SET v = 1 WHERE k IN (1, 2) AND c = 3")
        .await
        .expect("update");
    let seen = h.take();
    let mut keys = Vec::new();
    for r in &seen {
        let Request::Mutation(ms) = r else {
            panic!("not a mutation: {r:?}")
        };
        for m in ms {
            keys.push(m.key.key.clone());
            let row = m.update.rows.values().next().expect("one row");
            let ts: Vec<i64> = row
                .cells
                .values()
                .map(|c| match c {
                    sibyl_db::ColumnData::Simple(c) => c.timestamp,
                    other => panic!("not a simple cell: {other:?}"),
                })
                .collect();
            assert_eq!(ts, vec![42]);
            assert!(row.liveness.is_none(), "UPDATE writes no row marker");
        }
    }
    keys.sort();
    assert_eq!(keys, vec![int(1), int(2)]);

    // a range deletion is one range tombstone, no read
    h.exec("DELETE FROM t WHERE k = 1 AND c > 5")
        .await
        .expect("delete");
    let seen = h.take();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let Request::Mutation(ms) = &seen[0] else {
        panic!("not a mutation")
    };
    assert!(ms[0].update.rows.is_empty());
    assert_eq!(ms[0].update.range_tombstones.len(), 1);
}

#[tokio::test]
async fn list_operations_by_index_read_before_they_write() {
    let h = Harness::with_table("CREATE TABLE ks.t (k int PRIMARY KEY, l list<int>)").await;
    h.exec("INSERT INTO t (k, l) VALUES (1, [10, 20, 30])")
        .await
        .expect("insert");
    h.take();
    h.exec("UPDATE t SET l[1] = 21 WHERE k = 1")
        .await
        .expect("update");
    let seen = h.take();
    assert!(matches!(seen.first(), Some(Request::Read(_))), "{seen:?}");
    assert!(
        matches!(seen.last(), Some(Request::Mutation(_))),
        "{seen:?}"
    );
    let o = h.exec("SELECT l FROM t WHERE k = 1").await.expect("select");
    let list = rows(&o)[0][0].clone().expect("a list");
    // [10, 21, 30] in the protocol's encoding: count, then (length, value)s
    let mut want = vec![0, 0, 0, 3];
    for v in [10i32, 21, 30] {
        want.extend_from_slice(&4i32.to_be_bytes());
        want.extend_from_slice(&v.to_be_bytes());
    }
    assert_eq!(list.as_ref(), &want[..]);

    // out of range: refused after the read, nothing written
    let e = h
        .exec("UPDATE t SET l[5] = 1 WHERE k = 1")
        .await
        .err()
        .expect("out of range");
    assert!(e.to_string().contains("out of bound"), "{e}");
    assert!(h.take().iter().all(|r| matches!(r, Request::Read(_))));
}

#[tokio::test]
async fn a_condition_runs_a_paxos_round_and_proposes_only_if_it_holds() {
    let h = Harness::with_table("CREATE TABLE ks.t (k int PRIMARY KEY, v int)").await;
    let opts = || QueryOptions {
        consistency: Consistency::Quorum,
        ..QueryOptions::default()
    };
    h.exec_with("INSERT INTO t (k, v) VALUES (1, 1) IF NOT EXISTS", opts())
        .await
        .expect("insert");
    // prepare, read, propose, commit: the update carries the ballot's time
    let seen = h.take();
    let kinds: Vec<&str> = seen
        .iter()
        .map(|r| match r {
            Request::PaxosPrepare { .. } => "prepare",
            Request::Read(_) => "read",
            Request::PaxosPropose(_) => "propose",
            Request::PaxosCommit(_) => "commit",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["prepare", "read", "propose", "commit"], "{seen:?}");
    let (Request::PaxosPrepare { ballot, .. }, Request::PaxosCommit(c)) = (&seen[0], &seen[3])
    else {
        unreachable!()
    };
    assert_eq!(c.ballot, *ballot);
    let row = c.update.update.rows.values().next().expect("a row");
    assert_eq!(
        row.liveness.as_ref().map(|l| l.timestamp),
        Some(ballot.micros())
    );

    // the condition fails: a prepare and a read, nothing proposed
    let o = h
        .exec_with("INSERT INTO t (k, v) VALUES (1, 2) IF NOT EXISTS", opts())
        .await
        .expect("insert");
    assert_eq!(rows(&o)[0][0], Some(Bytes::from_static(&[0])));
    let seen = h.take();
    assert!(
        matches!(
            seen.as_slice(),
            [Request::PaxosPrepare { .. }, Request::Read(_)]
        ),
        "{seen:?}"
    );

    // a SERIAL read: a prepare, an empty proposal, then the read
    h.exec_with(
        "SELECT v FROM t WHERE k = 1",
        QueryOptions {
            consistency: Consistency::Serial,
            ..QueryOptions::default()
        },
    )
    .await
    .expect("serial read");
    let seen = h.take();
    assert!(
        matches!(
            seen.as_slice(),
            [Request::PaxosPrepare { .. }, Request::PaxosPropose(p), Request::Read(_)]
                if p.update.update.is_empty()
        ),
        "{seen:?}"
    );
}

#[tokio::test]
async fn truncate_and_paging_go_through_the_coordinator() {
    let h = Harness::with_table("CREATE TABLE ks.t (k int PRIMARY KEY, v int)").await;
    for k in 0..5 {
        h.exec(&format!("INSERT INTO t (k, v) VALUES ({k}, {k})"))
            .await
            .expect("insert");
    }
    h.take();
    // a page of two rows, then the rest from the paging state
    let page = |state: Option<Bytes>| QueryOptions {
        page_size: Some(2),
        paging_state: state,
        ..QueryOptions::default()
    };
    let mut state = None;
    let mut seen_rows = 0;
    for _ in 0..10 {
        let o = h
            .exec_with("SELECT k FROM t", page(state.clone()))
            .await
            .expect("page");
        let ResultBody::Rows { metadata, rows } = &o.body else {
            panic!("rows")
        };
        assert!(rows.len() <= 2);
        seen_rows += rows.len();
        state = metadata.paging_state.clone();
        if state.is_none() {
            break;
        }
    }
    assert_eq!(seen_rows, 5);

    h.take();
    h.exec("TRUNCATE t").await.expect("truncate");
    let seen = h.take();
    assert!(
        matches!(seen.as_slice(), [Request::Truncate { .. }]),
        "{seen:?}"
    );
    assert!(rows(&h.exec("SELECT * FROM t").await.expect("select")).is_empty());
}

#[tokio::test]
async fn a_multi_column_relation_after_the_clustering_prefix_filters_rows() {
    let h = Harness::with_table(
        "CREATE TABLE ks.t (k int, c1 int, c2 int, c3 int, v int, PRIMARY KEY (k, c1, c2, c3))",
    )
    .await;
    for (c1, c2, c3) in [(1, 1, 1), (2, 1, 1), (2, 2, 2)] {
        h.exec(&format!(
            "INSERT INTO t (k, c1, c2, c3, v) VALUES (1, {c1}, {c2}, {c3}, 0)"
        ))
        .await
        .expect("insert");
    }
    let o = h
        .exec("SELECT c1 FROM t WHERE k = 1 AND c1 > 0 AND (c2, c3) = (1, 1) ALLOW FILTERING")
        .await
        .expect("select");
    assert_eq!(rows(&o), vec![vec![Some(int(1))], vec![Some(int(2))]]);
    let e = h
        .exec("SELECT c1 FROM t WHERE k = 1 AND (c2, c3) > (1, 1) ALLOW FILTERING")
        .await
        .err()
        .expect("a multi-column slice cannot filter");
    assert!(e.to_string().contains("Multi-column slice"), "{e}");
    let e = h
        .exec("SELECT c1 FROM t WHERE k = 1 AND (c2, c3) IN ((1, 1), (2, 2)) ALLOW FILTERING")
        .await
        .err()
        .expect("a multi-column IN cannot filter");
    assert!(e.to_string().contains("Multicolumn IN filters"), "{e}");
    h.take();
    // a DELETE cannot filter: refused, nothing deleted
    let e = h
        .exec("DELETE FROM t WHERE k = 1 AND (c2, c3) = (1, 1)")
        .await
        .err()
        .expect("a gap in the clustering columns");
    assert!(e.to_string().contains("cannot be restricted"), "{e}");
    assert!(h.take().is_empty(), "a refused statement sent requests");
}

"""Prepared statements, batches, per-statement consistency levels, protocol
versions and frame compression."""
import pytest
from cassandra import ConsistencyLevel, InvalidRequest, Unavailable
from cassandra.cluster import NoHostAvailable
from cassandra.query import BatchStatement, BatchType, SimpleStatement

from conftest import new_keyspace_name


def test_prepared_statement_metadata_and_execution(session):
    session.execute("CREATE TABLE p (k int, c text, v double, PRIMARY KEY (k, c))")
    ins = session.prepare("INSERT INTO p (k, c, v) VALUES (?, ?, ?)")
    assert ins.routing_key_indexes == [0]
    assert [c.name for c in ins.column_metadata] == ["k", "c", "v"]
    assert [c.keyspace_name for c in ins.column_metadata] == [session.keyspace_name] * 3
    for i in range(20):
        session.execute(ins, (i % 2, f"c{i:02}", i / 2))
    sel = session.prepare("SELECT c, v FROM p WHERE k = ? AND c > ?")
    assert [c.name for c in sel.column_metadata] == ["k", "c"]
    rows = list(session.execute(sel, (1, "c10")))
    assert [(r.c, r.v) for r in rows] == [(f"c{i:02}", i / 2) for i in range(11, 20, 2)]
    assert [(r.c, r.v) for r in session.execute(sel, {"k": 0, "c": "c15"})] == [("c16", 8.0), ("c18", 9.0)]
    assert session.prepare("SELECT c, v FROM p WHERE k = ? AND c > ?").query_id == sel.query_id, \
        "preparing the same text gives the same id"
    named = session.prepare("SELECT v FROM p WHERE k = :key AND c = :cc")
    assert session.execute(named, {"key": 1, "cc": "c19"}).one().v == 9.5


def test_prepared_statement_with_limit_and_in_markers(session):
    session.execute("CREATE TABLE p (k int, c int, PRIMARY KEY (k, c))")
    for c in range(10):
        session.execute("INSERT INTO p (k, c) VALUES (1, %s)", (c,))
    p = session.prepare("SELECT c FROM p WHERE k = ? AND c IN ? LIMIT ?")
    assert [r.c for r in session.execute(p, (1, [7, 2, 5], 2))] == [2, 5]


def test_prepared_statement_sees_a_column_added_later(session):
    session.execute("CREATE TABLE p (k int PRIMARY KEY, v int)")
    session.execute("INSERT INTO p (k, v) VALUES (1, 1)")
    sel = session.prepare("SELECT * FROM p WHERE k = ?")
    session.execute("ALTER TABLE p ADD w int")
    session.execute("INSERT INTO p (k, v, w) VALUES (1, 1, 2)")
    row = session.execute(sel, (1,)).one()
    assert row.w == 2


def test_logged_and_unlogged_batches_apply_every_statement(session):
    session.execute("CREATE TABLE b (k int, c int, v text, PRIMARY KEY (k, c))")
    ins = session.prepare("INSERT INTO b (k, c, v) VALUES (?, ?, ?)")
    logged = BatchStatement(batch_type=BatchType.LOGGED)
    for c in range(5):
        logged.add(ins, (1, c, "x"))
    logged.add(SimpleStatement("INSERT INTO b (k, c, v) VALUES (2, 0, 'y')"))
    logged.add("UPDATE b SET v = %s WHERE k = %s AND c = %s", ("z", 2, 1))
    session.execute(logged)
    unlogged = BatchStatement(batch_type=BatchType.UNLOGGED)
    unlogged.add(ins, (3, 0, "u"))
    unlogged.add(ins, (3, 1, "u"))
    session.execute(unlogged)
    session.execute("BEGIN BATCH INSERT INTO b (k, c, v) VALUES (4, 0, 'q'); DELETE FROM b WHERE k = 2 AND c = 0; "
                    "APPLY BATCH")
    session.execute("BEGIN UNLOGGED BATCH USING TIMESTAMP 10 INSERT INTO b (k, c, v) VALUES (5, 0, 'ts'); "
                    "APPLY BATCH")
    rows = sorted((r.k, r.c, r.v) for r in session.execute("SELECT k, c, v FROM b"))
    assert rows == [(1, c, "x") for c in range(5)] + [(2, 1, "z"), (3, 0, "u"), (3, 1, "u"), (4, 0, "q"),
                                                     (5, 0, "ts")]
    assert session.execute("SELECT writetime(v) FROM b WHERE k = 5 AND c = 0").one()[0] == 10


def test_batch_with_conditions_on_one_partition(session):
    session.execute("CREATE TABLE b (k int, c int, v int, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO b (k, c, v) VALUES (1, 0, 0)")
    r = session.execute("BEGIN BATCH UPDATE b SET v = 1 WHERE k = 1 AND c = 0 IF v = 0; "
                        "INSERT INTO b (k, c, v) VALUES (1, 1, 1); APPLY BATCH").one()
    assert r[0] is True
    assert sorted(tuple(x) for x in session.execute("SELECT c, v FROM b WHERE k = 1")) == [(0, 1), (1, 1)]


CONSISTENCY_LEVELS = [ConsistencyLevel.ONE, ConsistencyLevel.QUORUM, ConsistencyLevel.ALL,
                      ConsistencyLevel.LOCAL_ONE, ConsistencyLevel.LOCAL_QUORUM]


@pytest.mark.parametrize("cl", CONSISTENCY_LEVELS, ids=[ConsistencyLevel.value_to_name[c] for c in CONSISTENCY_LEVELS])
def test_consistency_level_per_statement_on_rf_1(session, cl):
    session.execute("CREATE TABLE cl (k int PRIMARY KEY, v int)")
    session.execute(SimpleStatement("INSERT INTO cl (k, v) VALUES (1, 1)", consistency_level=cl))
    p = session.prepare("INSERT INTO cl (k, v) VALUES (?, ?)")
    p.consistency_level = cl
    session.execute(p, (2, 2))
    rs = session.execute(SimpleStatement("SELECT k FROM cl", consistency_level=cl))
    assert sorted(r.k for r in rs) == [1, 2]
    assert rs.response_future.message.consistency_level == cl


def test_quorum_on_rf_3_with_one_node_is_unavailable(session):
    ks = new_keyspace_name()
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}")
    try:
        session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY)")
        # the driver's retry policy turns Unavailable into NoHostAvailable on a one-node cluster
        with pytest.raises((Unavailable, NoHostAvailable)) as ei:
            session.execute(SimpleStatement(f"INSERT INTO {ks}.t (k) VALUES (1)",
                                            consistency_level=ConsistencyLevel.QUORUM))
        err = ei.value
        if isinstance(err, NoHostAvailable):
            (err,) = err.errors.values()
        assert isinstance(err, Unavailable)
        assert "Cannot achieve consistency level QUORUM" in str(err)
        assert (err.consistency, err.required_replicas, err.alive_replicas) == (ConsistencyLevel.QUORUM, 2, 1)
        session.execute(SimpleStatement(f"INSERT INTO {ks}.t (k) VALUES (1)", consistency_level=ConsistencyLevel.ONE))
        rs = session.execute(SimpleStatement(f"SELECT k FROM {ks}.t", consistency_level=ConsistencyLevel.ONE))
        assert [r.k for r in rs] == [1]
    finally:
        session.execute(f"DROP KEYSPACE {ks}")


def test_serial_consistency_is_refused_for_a_plain_write(session):
    session.execute("CREATE TABLE sc (k int PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest):
        session.execute(SimpleStatement("INSERT INTO sc (k, v) VALUES (1, 1)",
                                        consistency_level=ConsistencyLevel.SERIAL))


@pytest.mark.parametrize("version", [3, 4, 5])
def test_protocol_version_connects_and_queries(make_cluster, version):
    c = make_cluster(protocol_version=version)
    s = c.connect()
    assert c.protocol_version == version
    assert s.execute("SELECT key FROM system.local").one().key == "local"
    ks = new_keyspace_name()
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    try:
        s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
        p = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
        for i in range(50):
            s.execute(p, (i, "x" * i))
        rows = list(s.execute(SimpleStatement(f"SELECT k, v FROM {ks}.t", fetch_size=7)))
        assert sorted((r.k, r.v) for r in rows) == [(i, "x" * i) for i in range(50)]
    finally:
        s.execute(f"DROP KEYSPACE {ks}")


@pytest.mark.parametrize("compression,version", [("lz4", 4), ("lz4", 5), ("lz4", 3), ("snappy", 4), ("snappy", 3)])
def test_compressed_connection_reads_and_writes(make_cluster, compression, version):
    pytest.importorskip("lz4" if compression == "lz4" else "snappy")
    c = make_cluster(compression=compression, protocol_version=version)
    s = c.connect()
    conn = c.control_connection._connection
    assert conn.compressor is not None or version == 5, "the connection negotiated compression"
    rows = list(s.execute("SELECT * FROM system_schema.columns"))
    assert len(rows) > 100
    ks = new_keyspace_name()
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    try:
        s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
        big = "compressible " * 5000
        s.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, %s)", (big,))
        assert s.execute(f"SELECT v FROM {ks}.t WHERE k = 1").one().v == big
    finally:
        s.execute(f"DROP KEYSPACE {ks}")

"""The Python driver against a real node: schema, statements, types, paging, errors."""
import datetime
import decimal
import ipaddress
import uuid

import pytest
from cassandra import AlreadyExists, ConsistencyLevel, InvalidRequest, Unavailable
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.protocol import SyntaxException
from cassandra.query import BatchStatement, BatchType, SimpleStatement
from cassandra.util import Date, Duration, Time

ALLOW_FILTERING = (
    "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. "
    "If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING"
)


def test_system_local_describes_the_node(session):
    row = session.execute("SELECT * FROM system.local WHERE key = 'local'").one()
    assert row.partitioner == "org.apache.cassandra.dht.Murmur3Partitioner"
    assert row.data_center == "datacenter1"
    assert row.rack == "rack1"
    assert row.release_version.startswith("5.")
    assert row.cql_version.startswith("3.4")
    assert len(row.tokens) >= 1
    assert row.host_id is not None
    assert list(session.execute("SELECT * FROM system.peers")) == []
    assert list(session.execute("SELECT * FROM system.peers_v2")) == []


def test_driver_metadata_sees_keyspace_and_table(session, cluster):
    session.execute("CREATE TABLE m (a int, b text, c timeuuid, v map<text, int>, s int static, PRIMARY KEY ((a, b), c)) WITH CLUSTERING ORDER BY (c DESC)")
    cluster.refresh_schema_metadata()
    ks = cluster.metadata.keyspaces[session.keyspace_name]
    t = ks.tables["m"]
    assert [c.name for c in t.partition_key] == ["a", "b"]
    assert [c.name for c in t.clustering_key] == ["c"]
    assert t.columns["v"].cql_type == "map<text, int>"
    assert t.columns["s"].is_static
    assert t.clustering_key[0].is_reversed
    assert ks.replication_strategy.replication_factor == 1


def test_keyspace_ddl_and_errors(session):
    name = session.keyspace_name + "_x"
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}}")
    with pytest.raises(AlreadyExists):
        session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    row = session.execute(f"SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = '{name}'").one()
    assert row.replication == {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "datacenter1": "1"}
    session.execute(f"DROP KEYSPACE {name}")
    session.execute(f"DROP KEYSPACE IF EXISTS {name}")
    with pytest.raises(Exception):
        session.execute(f"DROP KEYSPACE {name}")


def test_table_ddl_alter_truncate_use(session):
    session.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
    with pytest.raises(AlreadyExists):
        session.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
    session.execute("CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY, v text)")
    session.execute("INSERT INTO t (k, v) VALUES (1, 'a')")
    session.execute("ALTER TABLE t ADD w int")
    session.execute("INSERT INTO t (k, v, w) VALUES (2, 'b', 3)")
    assert session.execute("SELECT w FROM t WHERE k = 2").one().w == 3
    session.execute("ALTER TABLE t DROP v")
    assert session.execute("SELECT * FROM t WHERE k = 1").one()._fields == ("k", "w")
    session.execute("TRUNCATE t")
    assert list(session.execute("SELECT * FROM t")) == []
    session.execute(f"USE {session.keyspace_name}")
    session.execute("DROP TABLE t")
    with pytest.raises(InvalidRequest):
        session.execute("SELECT * FROM t")


def test_insert_select_update_delete(session):
    session.execute("CREATE TABLE r (k int, c int, v text, w int, PRIMARY KEY (k, c))")
    for k in range(3):
        for c in range(5):
            session.execute("INSERT INTO r (k, c, v, w) VALUES (%s, %s, %s, %s)", (k, c, f"{k}-{c}", c * 10))
    assert [r.c for r in session.execute("SELECT c FROM r WHERE k = 1")] == [0, 1, 2, 3, 4]
    assert [r.c for r in session.execute("SELECT c FROM r WHERE k = 1 AND c > 1 AND c <= 3")] == [2, 3]
    assert [r.c for r in session.execute("SELECT c FROM r WHERE k = 1 AND c IN (4, 0)")] == [0, 4]
    assert [r.c for r in session.execute("SELECT c FROM r WHERE k = 1 ORDER BY c DESC LIMIT 2")] == [4, 3]
    assert [(r.k, r.c) for r in session.execute("SELECT k, c FROM r WHERE k IN (2, 0) AND c = 1")] == [(0, 1), (2, 1)]
    assert len(list(session.execute("SELECT * FROM r PER PARTITION LIMIT 2"))) == 6
    assert sorted(r.k for r in session.execute("SELECT DISTINCT k FROM r")) == [0, 1, 2]
    assert session.execute("SELECT count(*) FROM r").one().count == 15
    assert session.execute("SELECT count(*) FROM r WHERE k = 1").one().count == 5
    # update, cell delete, row delete, range delete, partition delete
    session.execute("UPDATE r SET v = 'new' WHERE k = 1 AND c = 1")
    assert session.execute("SELECT v FROM r WHERE k = 1 AND c = 1").one().v == "new"
    session.execute("DELETE v FROM r WHERE k = 1 AND c = 1")
    row = session.execute("SELECT v, w FROM r WHERE k = 1 AND c = 1").one()
    assert row.v is None and row.w == 10
    session.execute("DELETE FROM r WHERE k = 1 AND c = 0")
    assert [r.c for r in session.execute("SELECT c FROM r WHERE k = 1")] == [1, 2, 3, 4]
    session.execute("DELETE FROM r WHERE k = 1 AND c >= 3")
    assert [r.c for r in session.execute("SELECT c FROM r WHERE k = 1")] == [1, 2]
    session.execute("DELETE FROM r WHERE k = 2")
    assert list(session.execute("SELECT * FROM r WHERE k = 2")) == []
    # multi-column slice
    assert [r.c for r in session.execute("SELECT c FROM r WHERE k = 0 AND (c) > (2)")] == [3, 4]


def test_clustering_order_desc_and_composite_partition_key(session):
    session.execute("CREATE TABLE d (a int, b text, c int, v int, PRIMARY KEY ((a, b), c)) WITH CLUSTERING ORDER BY (c DESC)")
    for c in range(4):
        session.execute("INSERT INTO d (a, b, c, v) VALUES (1, 'x', %s, %s)", (c, c))
    assert [r.c for r in session.execute("SELECT c FROM d WHERE a = 1 AND b = 'x'")] == [3, 2, 1, 0]
    assert [r.c for r in session.execute("SELECT c FROM d WHERE a = 1 AND b = 'x' AND c < 2")] == [1, 0]
    assert [r.c for r in session.execute("SELECT c FROM d WHERE a = 1 AND b = 'x' ORDER BY c ASC")] == [0, 1, 2, 3]
    # token of a composite key, as Cassandra computes it
    session.execute("CREATE TABLE ck (a int, b text, PRIMARY KEY ((a, b)))")
    session.execute("INSERT INTO ck (a, b) VALUES (1, 'x')")
    assert session.execute("SELECT token(a, b) FROM ck").one()[0] == 746584927563629270


def test_tokens_match_cassandra(session):
    session.execute("CREATE TABLE tk (k text PRIMARY KEY)")
    expected = {"test": -6017608668500074083, "kremówki": 4354931215268080151, "château": 9114062196463836094}
    for k in expected:
        session.execute("INSERT INTO tk (k) VALUES (%s)", (k,))
    got = {r.k: r[1] for r in session.execute("SELECT k, token(k) FROM tk")}
    assert got == expected
    rows = list(session.execute("SELECT k FROM tk"))
    assert [r.k for r in rows] == sorted(expected, key=lambda k: expected[k]), "full scans come in token order"


def test_ttl_timestamp_and_last_write_wins(session):
    session.execute("CREATE TABLE lw (k int PRIMARY KEY, v text)")
    session.execute("INSERT INTO lw (k, v) VALUES (1, 'new') USING TIMESTAMP 2000")
    session.execute("INSERT INTO lw (k, v) VALUES (1, 'old') USING TIMESTAMP 1000")
    row = session.execute("SELECT v, writetime(v) FROM lw WHERE k = 1").one()
    assert row.v == "new" and row[1] == 2000
    session.execute("INSERT INTO lw (k, v) VALUES (2, 'x') USING TTL 100")
    ttl = session.execute("SELECT ttl(v) FROM lw WHERE k = 2").one()[0]
    assert 90 <= ttl <= 100
    session.execute("INSERT INTO lw (k, v) VALUES (3, 'gone') USING TTL 1")
    import time

    time.sleep(2.1)
    assert session.execute("SELECT * FROM lw WHERE k = 3").one() is None
    # a tombstone wins a timestamp tie
    session.execute("INSERT INTO lw (k, v) VALUES (4, 'x') USING TIMESTAMP 5")
    session.execute("DELETE v FROM lw USING TIMESTAMP 5 WHERE k = 4")
    assert session.execute("SELECT v FROM lw WHERE k = 4").one().v is None


ALL_TYPES = [
    ("ascii", "abc"),
    ("bigint", 2**40),
    ("blob", b"\x00\x01\xff"),
    ("boolean", True),
    ("date", Date(datetime.date(2024, 2, 29))),
    ("decimal", decimal.Decimal("123.4500")),
    ("double", 1.5),
    ("duration", Duration(1, 2, 3000)),
    ("float", 2.5),
    ("inet", "10.1.2.3"),
    ("int", -7),
    ("smallint", 300),
    ("text", "héllo"),
    ("time", Time(3723000000001)),
    ("timestamp", datetime.datetime(2024, 1, 2, 3, 4, 5, 678000)),
    ("timeuuid", uuid.UUID("e7b2f2a0-7c0e-11ee-b962-0242ac120002")),
    ("tinyint", -3),
    ("uuid", uuid.uuid4()),
    ("varint", 10**30),
]


@pytest.mark.parametrize("typ,value", ALL_TYPES, ids=[t for t, _ in ALL_TYPES])
def test_every_native_type_round_trips_prepared_and_unprepared(session, typ, value):
    session.execute(f"CREATE TABLE ty_{typ} (k int PRIMARY KEY, v {typ})")
    session.execute(f"INSERT INTO ty_{typ} (k, v) VALUES (1, %s)", (value,))
    p = session.prepare(f"INSERT INTO ty_{typ} (k, v) VALUES (?, ?)")
    session.execute(p, (2, value))
    sel = session.prepare(f"SELECT v FROM ty_{typ} WHERE k = ?")
    for k in (1, 2):
        got = session.execute(sel, (k,)).one().v
        if typ == "inet":
            assert ipaddress.ip_address(got) == ipaddress.ip_address(value)
        else:
            assert got == value, (typ, got, value)


def test_collections_and_udts(session):
    session.execute("CREATE TYPE addr (street text, zip int)")
    session.execute(
        "CREATE TABLE col (k int PRIMARY KEY, l list<int>, s set<text>, m map<text, int>, f frozen<list<int>>, a frozen<addr>, u addr, t tuple<int, text>)"
    )
    session.execute(
        "INSERT INTO col (k, l, s, m, f, a, u, t) VALUES (1, [3, 1, 2], {'b', 'a'}, {'x': 1}, [9], {street: 'main', zip: 1}, {street: 's', zip: 2}, (1, 'x'))"
    )
    session.execute("UPDATE col SET l = l + [4], s = s + {'c'}, m['y'] = 2 WHERE k = 1")
    session.execute("UPDATE col SET l = [0] + l, s = s - {'a'} WHERE k = 1")
    session.execute("UPDATE col SET u.zip = 5 WHERE k = 1")
    row = session.execute("SELECT * FROM col WHERE k = 1").one()
    assert row.l == [0, 3, 1, 2, 4]
    assert row.s == {"b", "c"}
    assert row.m == {"x": 1, "y": 2}
    assert row.f == [9]
    assert row.a.street == "main" and row.a.zip == 1
    assert row.u.zip == 5 and row.u.street == "s"
    assert row.t == (1, "x")
    session.execute("DELETE m['x'] FROM col WHERE k = 1")
    session.execute("UPDATE col SET l[1] = 30 WHERE k = 1")
    session.execute("UPDATE col SET l = l - [4] WHERE k = 1")
    row = session.execute("SELECT l, m FROM col WHERE k = 1").one()
    assert row.m == {"y": 2}
    assert row.l == [0, 30, 1, 2]


def test_static_columns(session):
    session.execute("CREATE TABLE st (k int, c int, s text static, v int, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO st (k, c, s, v) VALUES (1, 1, 'shared', 1)")
    session.execute("INSERT INTO st (k, c, v) VALUES (1, 2, 2)")
    assert [r.s for r in session.execute("SELECT s FROM st WHERE k = 1")] == ["shared", "shared"]
    session.execute("INSERT INTO st (k, s) VALUES (2, 'alone')")
    row = session.execute("SELECT * FROM st WHERE k = 2").one()
    assert row.s == "alone" and row.c is None


def test_paging_through_ten_thousand_rows(session):
    session.execute("CREATE TABLE pg (k int, c int, v int, PRIMARY KEY (k, c))")
    ins = session.prepare("INSERT INTO pg (k, c, v) VALUES (?, ?, ?)")
    from cassandra.concurrent import execute_concurrent_with_args

    args = [(c % 10, c, c) for c in range(10000)]
    execute_concurrent_with_args(session, ins, args, concurrency=64)
    for fetch in (100, 1000):
        rows = list(session.execute(SimpleStatement("SELECT k, c FROM pg", fetch_size=fetch)))
        assert len(rows) == 10000
        assert len({(r.k, r.c) for r in rows}) == 10000
    one = list(session.execute(SimpleStatement("SELECT c FROM pg WHERE k = 3", fetch_size=77)))
    assert [r.c for r in one] == list(range(3, 10000, 10))
    page = session.execute(SimpleStatement("SELECT c FROM pg WHERE k = 3", fetch_size=10))
    assert page.has_more_pages


def test_prepared_statements_batches_and_consistency(session):
    session.execute("CREATE TABLE b (k int, c int, v text, PRIMARY KEY (k, c))")
    ins = session.prepare("INSERT INTO b (k, c, v) VALUES (?, ?, ?)")
    assert ins.routing_key_indexes == [0]
    batch = BatchStatement(batch_type=BatchType.LOGGED)
    for c in range(5):
        batch.add(ins, (1, c, "x"))
    batch.add(SimpleStatement("INSERT INTO b (k, c, v) VALUES (2, 0, 'y')"))
    session.execute(batch)
    ub = BatchStatement(batch_type=BatchType.UNLOGGED)
    ub.add(ins, (3, 0, "z"))
    session.execute(ub)
    session.execute("BEGIN BATCH INSERT INTO b (k, c, v) VALUES (4, 0, 'q'); DELETE FROM b WHERE k = 2; APPLY BATCH")
    assert session.execute("SELECT count(*) FROM b").one().count == 7
    for cl in (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM, ConsistencyLevel.ALL, ConsistencyLevel.LOCAL_QUORUM):
        st = SimpleStatement("SELECT * FROM b WHERE k = 1", consistency_level=cl)
        assert len(list(session.execute(st))) == 5
    session.execute(f"CREATE KEYSPACE {session.keyspace_name}_rf3 WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}")
    try:
        session.execute(f"CREATE TABLE {session.keyspace_name}_rf3.t (k int PRIMARY KEY)")
        # the driver's retry policy wraps Unavailable in NoHostAvailable on a one-node cluster
        with pytest.raises((Unavailable, NoHostAvailable)) as ei:
            session.execute(SimpleStatement(f"INSERT INTO {session.keyspace_name}_rf3.t (k) VALUES (1)", consistency_level=ConsistencyLevel.QUORUM))
        assert "Cannot achieve consistency level QUORUM" in str(ei.value)
        assert "required_replicas" in str(ei.value) and "alive_replicas" in str(ei.value)
        session.execute(SimpleStatement(f"INSERT INTO {session.keyspace_name}_rf3.t (k) VALUES (1)", consistency_level=ConsistencyLevel.ONE))
    finally:
        session.execute(f"DROP KEYSPACE {session.keyspace_name}_rf3")


def test_lightweight_transactions_on_one_node(session):
    session.execute("CREATE TABLE lwt (k int PRIMARY KEY, v int)")
    assert session.execute("INSERT INTO lwt (k, v) VALUES (1, 1) IF NOT EXISTS").one()[0] is True
    r = session.execute("INSERT INTO lwt (k, v) VALUES (1, 2) IF NOT EXISTS").one()
    assert r[0] is False and r.v == 1
    assert session.execute("UPDATE lwt SET v = 3 WHERE k = 1 IF v = 1").one()[0] is True
    r = session.execute("UPDATE lwt SET v = 4 WHERE k = 1 IF v = 1").one()
    assert r[0] is False and r.v == 3
    assert session.execute("DELETE FROM lwt WHERE k = 1 IF EXISTS").one()[0] is True


def test_errors_carry_cassandra_codes_and_messages(session):
    session.execute("CREATE TABLE e (k int, c int, v int, PRIMARY KEY (k, c))")
    with pytest.raises(SyntaxException):
        session.execute("SELEC * FROM e")
    with pytest.raises(InvalidRequest, match="Undefined column name nope"):
        session.execute("SELECT nope FROM e")
    with pytest.raises(InvalidRequest) as ei:
        session.execute("SELECT * FROM e WHERE v = 1")
    assert ALLOW_FILTERING in str(ei.value)
    assert list(session.execute("SELECT * FROM e WHERE v = 1 ALLOW FILTERING")) == []
    with pytest.raises(InvalidRequest, match="Some partition key parts are missing: k"):
        session.execute("INSERT INTO e (c, v) VALUES (1, 1)")
    with pytest.raises(InvalidRequest, match="Invalid STRING constant"):
        session.execute("INSERT INTO e (k, c, v) VALUES ('x', 1, 1)")
    with pytest.raises(InvalidRequest):
        session.execute("SELECT * FROM nosuchtable")
    with pytest.raises(InvalidRequest):
        session.execute("SELECT * FROM nosuchks.t")
    # the connection is still usable
    assert list(session.execute("SELECT * FROM e")) == []


@pytest.mark.parametrize("version", [3, 4, 5])
def test_protocol_versions(node, version):
    c = Cluster([node.host], port=node.port, protocol_version=version)
    s = c.connect()
    assert s.execute("SELECT key FROM system.local").one().key == "local"
    c.shutdown()


@pytest.mark.parametrize("compression", ["lz4", "snappy"])
def test_compression(node, compression):
    pytest.importorskip("lz4" if compression == "lz4" else "snappy")
    c = Cluster([node.host], port=node.port, compression=compression, protocol_version=4)
    s = c.connect()
    rows = list(s.execute("SELECT * FROM system_schema.columns"))
    assert len(rows) > 20
    c.shutdown()

"""Schema statements: keyspaces, tables, ALTER, DROP, TRUNCATE, USE."""
import pytest
from cassandra import AlreadyExists, InvalidRequest

from conftest import new_keyspace_name


def replication(session, ks):
    row = session.execute("SELECT replication, durable_writes FROM system_schema.keyspaces WHERE keyspace_name = %s",
                          (ks,)).one()
    return None if row is None else (row.replication, row.durable_writes)


def test_create_and_drop_keyspace_with_simple_strategy(session, cluster):
    ks = new_keyspace_name()
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 2}}")
    assert replication(session, ks) == (
        {"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "2"}, True)
    cluster.refresh_schema_metadata()
    assert cluster.metadata.keyspaces[ks].replication_strategy.replication_factor == 2
    session.execute(f"DROP KEYSPACE {ks}")
    assert replication(session, ks) is None
    cluster.refresh_schema_metadata()
    assert ks not in cluster.metadata.keyspaces


def test_create_and_drop_keyspace_with_network_topology_strategy(session):
    ks = new_keyspace_name()
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}}"
                    " AND durable_writes = false")
    assert replication(session, ks) == (
        {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "datacenter1": "1"}, False)
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 2)")
    assert session.execute(f"SELECT v FROM {ks}.t WHERE k = 1").one().v == 2
    session.execute(f"DROP KEYSPACE {ks}")
    assert replication(session, ks) is None


def test_create_keyspace_twice_is_already_exists_and_if_not_exists_is_silent(session):
    ks = session.keyspace_name
    with pytest.raises(AlreadyExists) as ei:
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}")
    assert ei.value.keyspace == ks and not ei.value.table
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    assert replication(session, ks)[0]["replication_factor"] == "1", "IF NOT EXISTS left the keyspace unchanged"


def test_drop_keyspace_if_exists_on_a_missing_keyspace_is_silent(session):
    session.execute("DROP KEYSPACE IF EXISTS nosuchks_at_all")
    with pytest.raises(InvalidRequest):
        session.execute("DROP KEYSPACE nosuchks_at_all")


def test_create_table_twice_is_already_exists_and_if_not_exists_is_silent(session):
    session.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
    with pytest.raises(AlreadyExists) as ei:
        session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    assert (ei.value.keyspace, ei.value.table) == (session.keyspace_name, "t")
    session.execute("CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY, v int)")
    session.execute("INSERT INTO t (k, v) VALUES (1, 'still text')")
    assert session.execute("SELECT v FROM t WHERE k = 1").one().v == "still text"


def test_create_table_with_composite_partition_key_and_descending_clustering(session, cluster):
    session.execute("CREATE TABLE d (a int, b text, c int, e int, v int, PRIMARY KEY ((a, b), c, e)) "
                    "WITH CLUSTERING ORDER BY (c DESC, e ASC)")
    for c in range(3):
        for e in range(2):
            session.execute("INSERT INTO d (a, b, c, e, v) VALUES (1, 'x', %s, %s, %s)", (c, e, c * 10 + e))
    session.execute("INSERT INTO d (a, b, c, e, v) VALUES (1, 'y', 0, 0, 99)")
    rows = [(r.c, r.e) for r in session.execute("SELECT c, e FROM d WHERE a = 1 AND b = 'x'")]
    assert rows == [(2, 0), (2, 1), (1, 0), (1, 1), (0, 0), (0, 1)]
    assert [r.v for r in session.execute("SELECT v FROM d WHERE a = 1 AND b = 'y'")] == [99]
    asc = [(r.c, r.e) for r in session.execute("SELECT c, e FROM d WHERE a = 1 AND b = 'x' ORDER BY c ASC, e DESC")]
    assert asc == list(reversed(rows))
    cluster.refresh_schema_metadata()
    t = cluster.metadata.keyspaces[session.keyspace_name].tables["d"]
    assert [c.name for c in t.partition_key] == ["a", "b"]
    assert [(c.name, c.is_reversed) for c in t.clustering_key] == [("c", True), ("e", False)]


def test_create_table_with_options_is_visible_in_system_schema(session):
    session.execute("CREATE TABLE o (k int PRIMARY KEY, v int) WITH comment = 'hello' AND gc_grace_seconds = 60 "
                    "AND default_time_to_live = 3600")
    row = session.execute("SELECT comment, gc_grace_seconds, default_time_to_live FROM system_schema.tables "
                          "WHERE keyspace_name = %s AND table_name = 'o'", (session.keyspace_name,)).one()
    assert tuple(row) == ("hello", 60, 3600)


def test_alter_table_add_column(session, cluster):
    session.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
    session.execute("INSERT INTO t (k, v) VALUES (1, 'a')")
    session.execute("ALTER TABLE t ADD w int")
    session.execute("INSERT INTO t (k, v, w) VALUES (2, 'b', 3)")
    assert sorted((r.k, r.v, r.w) for r in session.execute("SELECT k, v, w FROM t")) == [(1, "a", None), (2, "b", 3)]
    assert session.execute("SELECT * FROM t WHERE k = 2").column_names == ["k", "v", "w"]
    cluster.refresh_schema_metadata()
    assert cluster.metadata.keyspaces[session.keyspace_name].tables["t"].columns["w"].cql_type == "int"


def test_alter_table_drop_column_hides_its_data(session):
    session.execute("CREATE TABLE t (k int PRIMARY KEY, v text, w int)")
    session.execute("INSERT INTO t (k, v, w) VALUES (1, 'a', 2)")
    session.execute("ALTER TABLE t DROP v")
    rs = session.execute("SELECT * FROM t WHERE k = 1")
    assert rs.column_names == ["k", "w"]
    assert tuple(rs.one()) == (1, 2)
    dropped = session.execute("SELECT column_name, type FROM system_schema.dropped_columns "
                              "WHERE keyspace_name = %s AND table_name = 't'", (session.keyspace_name,))
    assert [(r.column_name, r.type) for r in dropped] == [("v", "text")]


def test_drop_table_removes_it_and_its_data(session, cluster):
    session.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
    session.execute("INSERT INTO t (k, v) VALUES (1, 'a')")
    session.execute("DROP TABLE t")
    with pytest.raises(InvalidRequest, match="table t does not exist"):
        session.execute("SELECT * FROM t")
    session.execute("DROP TABLE IF EXISTS t")
    cluster.refresh_schema_metadata()
    assert "t" not in cluster.metadata.keyspaces[session.keyspace_name].tables
    session.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
    assert list(session.execute("SELECT * FROM t")) == [], "a re-created table does not see the old data"


def test_truncate_removes_every_row_and_keeps_the_table(session):
    session.execute("CREATE TABLE t (k int, c int, PRIMARY KEY (k, c))")
    for k in range(10):
        session.execute("INSERT INTO t (k, c) VALUES (%s, %s)", (k, k))
    session.execute("TRUNCATE t")
    assert list(session.execute("SELECT * FROM t")) == []
    session.execute("INSERT INTO t (k, c) VALUES (1, 1)")
    session.execute("TRUNCATE TABLE t")
    assert list(session.execute("SELECT * FROM t")) == []
    session.execute("INSERT INTO t (k, c) VALUES (2, 2)")
    assert [tuple(r) for r in session.execute("SELECT k, c FROM t")] == [(2, 2)]


def test_use_switches_the_sessions_keyspace(session, cluster):
    ks = session.keyspace_name
    session.execute("CREATE TABLE u (k int PRIMARY KEY)")
    session.execute("INSERT INTO u (k) VALUES (7)")
    other = cluster.connect()
    try:
        with pytest.raises(InvalidRequest):
            other.execute("SELECT k FROM u")
        other.execute(f"USE {ks}")
        assert other.keyspace == ks
        assert other.execute("SELECT k FROM u").one().k == 7
        other.execute(f'USE "{ks}"')
        assert other.execute("SELECT k FROM u").one().k == 7
    finally:
        other.shutdown()


def test_drop_keyspace_drops_its_tables(session):
    ks = new_keyspace_name()
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY)")
    session.execute(f"DROP KEYSPACE {ks}")
    assert list(session.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (ks,))) == []
    with pytest.raises(InvalidRequest, match=f"keyspace {ks} does not exist"):
        session.execute(f"SELECT * FROM {ks}.t")

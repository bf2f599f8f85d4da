"""Durability: acknowledged writes and the schema survive kill -9.
Skipped under SIBYL_TARGET (the server is not ours to kill)."""
import time

import pytest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from sibyl_node import SibylNode

from conftest import new_keyspace_name


def connect(n):
    c = Cluster([n.host], port=n.port)
    return c, c.connect()


@pytest.mark.restart
def test_rows_and_schema_survive_kill_9_and_start(node):
    c, s = connect(node)
    ks = new_keyspace_name()
    try:
        s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
        s.execute(f"CREATE TYPE {ks}.point (x int, y int)")
        s.execute(f"CREATE TABLE {ks}.t (k int, c int, v text, p frozen<point>, PRIMARY KEY (k, c)) "
                  "WITH CLUSTERING ORDER BY (c DESC) AND comment = 'survives'")
        s.execute(f"CREATE TABLE {ks}.gone (k int PRIMARY KEY)")
        ins = s.prepare(f"INSERT INTO {ks}.t (k, c, v, p) VALUES (?, ?, ?, {{x: ?, y: ?}})")
        execute_concurrent_with_args(s, ins, [(i % 10, i, f"v{i}", i, -i) for i in range(2000)], concurrency=32,
                                     raise_on_first_error=True)
        s.execute(f"DELETE FROM {ks}.t WHERE k = 0 AND c < 100")
        s.execute(f"UPDATE {ks}.t SET v = 'updated' WHERE k = 1 AND c = 1")
        s.execute(f"DROP TABLE {ks}.gone")
        describe = s.execute(f"DESCRIBE TABLE {ks}.t").one().create_statement
        c.shutdown()

        node.kill9()
        node.start()

        c, s = connect(node)
        rows = {(r.k, r.c): (r.v, r.p.x, r.p.y) for r in s.execute(f"SELECT k, c, v, p FROM {ks}.t")}
        expected = {(i % 10, i): (f"v{i}", i, -i) for i in range(2000) if not (i % 10 == 0 and i < 100)}
        expected[(1, 1)] = ("updated", 1, -1)
        assert rows == expected
        assert [r.c for r in s.execute(f"SELECT c FROM {ks}.t WHERE k = 3 LIMIT 3")] == [1993, 1983, 1973]
        assert s.execute(f"DESCRIBE TABLE {ks}.t").one().create_statement == describe
        tables = c.metadata.keyspaces[ks].tables
        assert set(tables) == {"t"}
        assert "point" in c.metadata.keyspaces[ks].user_types
        assert tables["t"].options["comment"] == "survives"
    finally:
        c.shutdown()
        c, s = connect(node)
        s.execute(f"DROP KEYSPACE IF EXISTS {ks}")
        c.shutdown()


@pytest.mark.restart
def test_node_identity_survives_restart(node):
    c, s = connect(node)
    before = s.execute("SELECT host_id, tokens, cluster_name FROM system.local").one()
    c.shutdown()
    node.restart()
    c, s = connect(node)
    after = s.execute("SELECT host_id, tokens, cluster_name FROM system.local").one()
    c.shutdown()
    assert tuple(after) == tuple(before)


@pytest.mark.own_node
@pytest.mark.parametrize("sync", ["periodic", "batch", "group"])
def test_acknowledged_writes_survive_kill_9(sync, tmp_path):
    n = SibylNode(data_dir=str(tmp_path), extra_config=f"commitlog_sync: {sync}\ncommitlog_sync_period: 10s\n").start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE r WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE r.t (k int, c int, v text, m map<text, int>, PRIMARY KEY (k, c))")
        s.execute("CREATE TYPE r.u (a int)")
        ins = s.prepare("INSERT INTO r.t (k, c, v, m) VALUES (?, ?, ?, ?)")
        for i in range(500):
            s.execute(ins, (i % 7, i, f"v{i}", {"x": i}))
        s.execute("DELETE FROM r.t WHERE k = 0 AND c = 0")
        c.shutdown()
        n.kill9()
        n.start()
        c, s = connect(n)
        rows = list(s.execute("SELECT k, c, v, m FROM r.t"))
        assert len(rows) == 499
        assert all(r.v == f"v{r.c}" and r.m == {"x": r.c} for r in rows)
        assert "u" in c.metadata.keyspaces["r"].user_types
        host_id = s.execute("SELECT host_id, tokens FROM system.local").one()
        c.shutdown()
        # a clean stop and start keeps identity and tokens
        n.restart()
        c, s = connect(n)
        again = s.execute("SELECT host_id, tokens FROM system.local").one()
        assert again.host_id == host_id.host_id and again.tokens == host_id.tokens
        c.shutdown()
    finally:
        n.kill9()


@pytest.mark.own_node
def test_truncate_and_drop_survive_restart(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE d.a (k int PRIMARY KEY)")
        s.execute("CREATE TABLE d.b (k int PRIMARY KEY)")
        s.execute("INSERT INTO d.a (k) VALUES (1)")
        s.execute("INSERT INTO d.b (k) VALUES (1)")
        s.execute("TRUNCATE d.a")
        s.execute("INSERT INTO d.a (k) VALUES (2)")
        s.execute("DROP TABLE d.b")
        c.shutdown()
        n.kill9()
        n.start()
        c, s = connect(n)
        assert [r.k for r in s.execute("SELECT k FROM d.a")] == [2]
        assert "b" not in c.metadata.keyspaces["d"].tables
        c.shutdown()
    finally:
        n.kill9()


@pytest.mark.own_node
def test_sigterm_stops_cleanly(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    t = time.time()
    assert n.stop() == 0
    assert time.time() - t < 10


@pytest.mark.restart
def test_compact_storage_tables_survive_a_restart(node):
    """COMPACT STORAGE tables (issue 16): what system_schema says of them
    (flags, hidden columns, static kinds) is read back at start as the same
    tables, and their rows (no row marker) read the same."""
    c, s = connect(node)
    ks = new_keyspace_name()
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.execute(f"CREATE TABLE {ks}.sc (k int PRIMARY KEY, v1 int, v2 text) WITH COMPACT STORAGE")
    s.execute(f"CREATE TABLE {ks}.dn (k int, c1 int, c2 text, v int, PRIMARY KEY (k, c1, c2)) "
              "WITH COMPACT STORAGE AND CLUSTERING ORDER BY (c1 DESC, c2 ASC)")
    s.execute(f"CREATE TABLE {ks}.nv (k int, c int, PRIMARY KEY (k, c)) WITH COMPACT STORAGE")
    s.execute(f"INSERT INTO {ks}.sc (k, v1, v2) VALUES (1, 10, 'a')")
    s.execute(f"INSERT INTO {ks}.sc (k, v1) VALUES (2, null)")  # no cell: no row
    s.execute(f"INSERT INTO {ks}.dn (k, c1, c2, v) VALUES (1, 1, 'a', 11)")
    s.execute(f"INSERT INTO {ks}.dn (k, c1, v) VALUES (1, 3, 30)")  # a clustering prefix
    s.execute(f"INSERT INTO {ks}.nv (k, c) VALUES (1, 1)")
    s.execute(f"ALTER TABLE {ks}.sc DROP v2")

    def state():
        return (
            [tuple(r) for r in s.execute(f"SELECT table_name, flags FROM system_schema.tables WHERE keyspace_name = '{ks}'")],
            [tuple(r) for r in s.execute(f"SELECT table_name, column_name, kind, position, type FROM system_schema.columns WHERE keyspace_name = '{ks}'")],
            [tuple(r) for r in s.execute(f"SELECT table_name, column_name, kind FROM system_schema.dropped_columns WHERE keyspace_name = '{ks}'")],
            [tuple(r) for r in s.execute(f"SELECT * FROM {ks}.sc")],
            [tuple(r) for r in s.execute(f"SELECT * FROM {ks}.dn")],
            [tuple(r) for r in s.execute(f"SELECT * FROM {ks}.nv")],
            [r.create_statement for r in s.execute(f"DESCRIBE TABLE {ks}.sc")],
        )

    before = state()
    assert before[0] == [("dn", {"compound", "dense"}), ("nv", {"dense"}), ("sc", set())]
    assert ("sc", "column1", "clustering", 0, "text") in before[1]
    assert ("sc", "v1", "static", -1, "int") in before[1]
    assert ("nv", "value", "regular", -1, "empty") in before[1]
    assert before[2] == [("sc", "v2", "static")]
    assert before[3] == [(1, 10)]
    assert before[4] == [(1, 3, None, 30), (1, 1, "a", 11)]
    assert before[5] == [(1, 1)]
    assert before[6][0].startswith("/*\nWarning: Table")
    c.shutdown()
    node.restart()
    c, s = connect(node)
    try:
        assert state() == before
        # still compact: its rules hold after the restart
        with pytest.raises(Exception, match="Cannot add new column to a COMPACT STORAGE table"):
            s.execute(f"ALTER TABLE {ks}.sc ADD w int")
        with pytest.raises(Exception, match="Some clustering keys are missing: column1"):
            s.execute(f"INSERT INTO {ks}.sc (k) VALUES (3)")
    finally:
        s.execute(f"DROP KEYSPACE {ks}")
        c.shutdown()

"""Durability: acknowledged writes and the schema survive kill -9."""
import time

import pytest
from cassandra.cluster import Cluster
from sibyl_node import SibylNode


def connect(n):
    c = Cluster([n.host], port=n.port)
    return c, c.connect()


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
        s.execute("TRUNCATE r.t") if False else None
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


def test_sigterm_stops_cleanly(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    t = time.time()
    assert n.stop() == 0
    assert time.time() - t < 10

"""The storage engine through a real node: flushes to SSTables, reads merge
memtables and SSTables, tombstones and TTLs survive flushes, the commit log is
recycled, and kill -9 at any point loses nothing acknowledged."""
import glob
import os
import time

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from sibyl_node import SibylNode

SMALL = "memtable_heap_space: 8MiB\ncommitlog_segment_size: 1MiB\ncommitlog_sync: batch\n"


def connect(n):
    c = Cluster([n.host], port=n.port)
    return c, c.connect()


def sstables(n, ks, table):
    return glob.glob(os.path.join(n.data_dir, "data", ks, f"{table}-*", "sb-*-Data.db"))


def segments(n):
    return glob.glob(os.path.join(n.data_dir, "commitlog", "CommitLog-*.log"))


def test_flushes_happen_reads_merge_and_the_commit_log_is_recycled(tmp_path):
    n = SibylNode(data_dir=str(tmp_path), extra_config=SMALL).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE st WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE st.t (k int, c int, v blob, PRIMARY KEY (k, c))")
        ins = s.prepare("INSERT INTO st.t (k, c, v) VALUES (?, ?, ?)")
        blob = os.urandom(1000)
        for round_ in range(3):
            args = [(k, c, blob) for k in range(round_ * 100, round_ * 100 + 100) for c in range(30)]
            execute_concurrent_with_args(s, ins, args, concurrency=32)
        deadline = time.time() + 20
        while len(sstables(n, "st", "t")) < 2 and time.time() < deadline:
            time.sleep(0.2)
        assert len(sstables(n, "st", "t")) >= 2, "memtables were flushed to SSTables"
        # overwrite, delete and expire data that already lives in SSTables
        s.execute("UPDATE st.t SET v = 0x01 WHERE k = 0 AND c = 0")
        s.execute("DELETE FROM st.t WHERE k = 1")
        s.execute("DELETE FROM st.t WHERE k = 2 AND c >= 10")
        assert s.execute("SELECT count(*) FROM st.t").one().count == 300 * 30 - 30 - 20
        s.execute("INSERT INTO st.t (k, c, v) VALUES (3, 0, 0x02) USING TTL 1")
        time.sleep(2.1)
        assert s.execute("SELECT v FROM st.t WHERE k = 0 AND c = 0").one().v == b"\x01"
        assert s.execute("SELECT * FROM st.t WHERE k = 1").one() is None
        assert len(list(s.execute("SELECT c FROM st.t WHERE k = 2"))) == 10
        assert s.execute("SELECT v FROM st.t WHERE k = 3 AND c = 0").one() is None
        # every partition is found by a token-ordered scan across sources
        assert len({r.k for r in s.execute("SELECT DISTINCT k FROM st.t")}) == 299
        # the expired TTL write shadows the older row it overwrote
        assert s.execute("SELECT count(*) FROM st.t").one().count == 300 * 30 - 30 - 20 - 1
        assert len(segments(n)) < 15, f"commit log segments are recycled after flushes: {len(segments(n))}"
        c.shutdown()
        # kill -9 and come back: SSTables plus the replayed commit log
        n.kill9()
        n.start()
        c, s = connect(n)
        assert s.execute("SELECT count(*) FROM st.t").one().count == 300 * 30 - 30 - 20 - 1
        assert s.execute("SELECT v FROM st.t WHERE k = 0 AND c = 0").one().v == b"\x01"
        assert s.execute("SELECT * FROM st.t WHERE k = 1").one() is None
        s.execute("TRUNCATE st.t")
        assert sstables(n, "st", "t") == []
        c.shutdown()
        n.kill9()
        n.start()
        c, s = connect(n)
        assert s.execute("SELECT count(*) FROM st.t").one().count == 0, "truncated data stays gone after restart"
        c.shutdown()
    finally:
        n.kill9()


def test_clean_shutdown_flushes_everything(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE cs WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE cs.t (k int PRIMARY KEY, v text)")
        for i in range(100):
            s.execute("INSERT INTO cs.t (k, v) VALUES (%s, %s)", (i, str(i)))
        c.shutdown()
        assert n.stop() == 0
        assert len(sstables(n, "cs", "t")) == 1
        n.start()
        c, s = connect(n)
        assert s.execute("SELECT count(*) FROM cs.t").one().count == 100
        c.shutdown()
    finally:
        n.kill9()

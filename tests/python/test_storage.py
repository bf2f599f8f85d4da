"""The storage engine through a real node: flushes to SSTables, reads merge
memtables and SSTables, tombstones and TTLs survive flushes, the commit log is
recycled, and kill -9 at any point loses nothing acknowledged."""
import glob
import os
import re
import time

import pytest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from sibyl_node import SibylNode

pytestmark = pytest.mark.own_node  # each test starts sibyl processes of its own

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
        def generations():
            return [int(os.path.basename(p).split("-")[1]) for p in sstables(n, "st", "t")]

        deadline = time.time() + 20
        while max(generations(), default=0) < 2 and time.time() < deadline:
            time.sleep(0.2)
        assert max(generations(), default=0) >= 2, "memtables were flushed to SSTables (and maybe compacted)"
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


def test_nodetool_flush_compact_and_tombstone_purge_without_resurrection(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE nt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        # gc_grace_seconds = 0: tombstones may be purged at once, but only when
        # no SSTable outside the compaction can hold the data they shadow
        s.execute("CREATE TABLE nt.t (k int, c int, v text, PRIMARY KEY (k, c)) WITH gc_grace_seconds = 0 AND compaction = {'class': 'SizeTieredCompactionStrategy', 'enabled': 'false'}")
        for i in range(50):
            s.execute("INSERT INTO nt.t (k, c, v) VALUES (%s, 1, 'old')", (i,))
        n.nodetool("flush", "nt", "t")
        assert len(sstables(n, "nt", "t")) == 1
        for i in range(0, 50, 2):
            s.execute("DELETE FROM nt.t WHERE k = %s", (i,))
        s.execute("UPDATE nt.t SET v = 'new' WHERE k = 1 AND c = 1")
        n.nodetool("flush", "nt")
        assert len(sstables(n, "nt", "t")) == 2
        for i in range(50, 60):
            s.execute("INSERT INTO nt.t (k, c, v) VALUES (%s, 1, 'x')", (i,))
        n.nodetool("flush")
        assert len(sstables(n, "nt", "t")) == 3
        time.sleep(1.1)  # deletion times fall before gc_before
        n.nodetool("compact", "nt", "t")
        assert len(sstables(n, "nt", "t")) == 1
        rows = {r.k: r.v for r in s.execute("SELECT k, v FROM nt.t")}
        assert set(rows) == set(range(1, 50, 2)) | set(range(50, 60)), "deleted rows stay deleted after compaction"
        assert rows[1] == "new"
        history = n.nodetool("compactionhistory")
        assert "nt" in history and "t" in history
        stats = n.nodetool("tablestats", "nt.t")
        assert "SSTable count: 1" in stats
        status = n.nodetool("status")
        assert status.startswith("Datacenter: datacenter1") and "UN  127.0.0.1" in status
        stats = n.nodetool("compactionstats").splitlines()
        assert stats[0].split() == ["concurrent", "compactors", "2"] and stats[1].split()[:2] == ["pending", "tasks"], stats
        n.nodetool("setcompactionthroughput", "16")
        assert "16 MiB/s" in n.nodetool("getcompactionthroughput")
        c.shutdown()
        n.kill9()
        n.start()
        c, s = connect(n)
        rows = {r.k for r in s.execute("SELECT k FROM nt.t")}
        assert rows == set(range(1, 50, 2)) | set(range(50, 60))
        c.shutdown()
        n.nodetool("drain")
        n.proc.wait(timeout=20)
    finally:
        n.kill9()


def test_size_tiered_compaction_runs_in_the_background(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE bg WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE bg.t (k int PRIMARY KEY, v text)")
        for round_ in range(6):
            for i in range(20):
                s.execute("INSERT INTO bg.t (k, v) VALUES (%s, %s)", (round_ * 20 + i, "v"))
            n.nodetool("flush", "bg", "t")
        deadline = time.time() + 20
        while len(sstables(n, "bg", "t")) >= 4 and time.time() < deadline:
            time.sleep(0.2)
        assert len(sstables(n, "bg", "t")) < 4, "min_threshold (4) similar SSTables were compacted"
        assert s.execute("SELECT count(*) FROM bg.t").one().count == 120
        c.shutdown()
    finally:
        n.kill9()


def test_sstable_dump_and_verify_offline(tmp_path):
    import json
    import subprocess

    from sibyl_node import BIN

    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE dv WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE dv.t (k int, c text, v int, PRIMARY KEY (k, c))")
        s.execute("INSERT INTO dv.t (k, c, v) VALUES (1, 'a', 10)")
        s.execute("INSERT INTO dv.t (k, c, v) VALUES (1, 'b', 20) USING TTL 1000")
        s.execute("DELETE FROM dv.t WHERE k = 2")
        c.shutdown()
        n.nodetool("flush", "dv", "t")
        table_dir = os.path.dirname(sstables(n, "dv", "t")[0])
        out = subprocess.run([BIN, "sstable", "dump", table_dir], capture_output=True, text=True, check=True).stdout
        parts = json.loads(out)
        by_key = {p["partition"]["key"][0]: p for p in parts}
        assert set(by_key) == {"1", "2"}
        rows = by_key["1"]["rows"]
        assert [r["clustering"] for r in rows] == [["a"], ["b"]]
        assert rows[0]["cells"][0] == {"name": "v", "value": "10", "tstamp": rows[0]["cells"][0]["tstamp"]}
        assert rows[1]["liveness_info"]["ttl"] == 1000
        assert "deletion_info" in by_key["2"]["partition"]
        v = subprocess.run([BIN, "sstable", "verify", table_dir], capture_output=True, text=True)
        assert v.returncode == 0 and ": OK" in v.stdout, v.stdout + v.stderr
        # flip a byte inside a data chunk: verify names the file and fails
        data = sstables(n, "dv", "t")[0]
        b = bytearray(open(data, "rb").read())
        b[20] ^= 0xFF
        open(data, "wb").write(bytes(b))
        v = subprocess.run([BIN, "sstable", "verify", table_dir], capture_output=True, text=True)
        assert v.returncode != 0
        assert "Data.db" in v.stdout and "checksum" in v.stdout
    finally:
        n.kill9()


def test_leveled_and_time_window_tables_compact_and_alter_switches_live(tmp_path):
    import json

    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE lv WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE lv.t (k int PRIMARY KEY, v text) WITH compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': '1'}")
        for round_ in range(4):
            for i in range(50):
                s.execute("INSERT INTO lv.t (k, v) VALUES (%s, %s)", (i, f"r{round_}"))
            n.nodetool("flush", "lv", "t")
        deadline = time.time() + 20
        levels = []
        while time.time() < deadline:
            try:
                levels = [json.load(open(p.replace("Data.db", "Statistics.db")))["level"] for p in sstables(n, "lv", "t")]
            except FileNotFoundError:
                # compaction removed an SSTable between the listing and the read
                levels = [0]
            if levels and 0 not in levels:
                break
            time.sleep(0.2)
        assert levels and all(l >= 1 for l in levels), f"four L0 SSTables were compacted into L1: {levels}"
        assert {r.v for r in s.execute("SELECT v FROM lv.t")} == {"r3"}
        # switch strategy live
        s.execute("ALTER TABLE lv.t WITH compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'MINUTES', 'compaction_window_size': '5'}")
        for i in range(50):
            s.execute("INSERT INTO lv.t (k, v) VALUES (%s, 'tw')", (i + 100,))
        n.nodetool("flush", "lv", "t")
        stats = n.nodetool("tablestats", "lv.t")
        assert "SSTable count" in stats
        assert s.execute("SELECT count(*) FROM lv.t").one().count == 100
        s.execute("CREATE TABLE lv.dt (k int PRIMARY KEY) WITH compaction = {'class': 'DateTieredCompactionStrategy', 'base_time_seconds': '60'}")
        row = s.execute("SELECT compaction FROM system_schema.tables WHERE keyspace_name = 'lv' AND table_name = 'dt'").one()
        assert row.compaction["class"] == "org.apache.cassandra.db.compaction.TimeWindowCompactionStrategy"
        c.shutdown()
    finally:
        n.kill9()


def test_snapshots_hard_link_and_truncate_keeps_an_auto_snapshot(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE sn WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE sn.t (k int PRIMARY KEY, v text)")
        for i in range(10):
            s.execute("INSERT INTO sn.t (k, v) VALUES (%s, 'x')", (i,))
        out = n.nodetool("snapshot", "-t", "before", "sn")
        assert "snapshot name [before]" in out
        data = sstables(n, "sn", "t")[0]
        snap = os.path.join(os.path.dirname(data), "snapshots", "before", os.path.basename(data))
        assert os.path.exists(snap) and os.stat(snap).st_ino == os.stat(data).st_ino, "a hard link"
        listing = n.nodetool("listsnapshots")
        assert "before" in listing and "sn" in listing
        s.execute("TRUNCATE sn.t")
        assert "truncated-" in n.nodetool("listsnapshots"), "auto_snapshot before TRUNCATE"
        assert os.path.exists(snap), "the snapshot outlives the truncated SSTable"
        n.nodetool("clearsnapshot", "-t", "before", "sn")
        assert not os.path.exists(snap)
        n.nodetool("clearsnapshot", "--all")
        assert "There are no snapshots" in n.nodetool("listsnapshots")
        c.shutdown()
    finally:
        n.kill9()


def corrupt_first_sstable(n, ks, table):
    data = sorted(sstables(n, ks, table))[0]  # the oldest: sb-1
    b = bytearray(open(data, "rb").read())
    b[20] ^= 0xFF
    open(data, "wb").write(bytes(b))


def corrupt_table(n, policy, ks):
    """Two SSTables of one row each, the first corrupt; a session."""
    c, s = connect(n)
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH compaction = {{'class': 'SizeTieredCompactionStrategy', 'enabled': 'false'}}")
    s.execute(f"CREATE TABLE {ks}.other (k int PRIMARY KEY)")
    s.execute(f"INSERT INTO {ks}.other (k) VALUES (7)")
    s.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 'a')")
    n.nodetool("flush")
    s.execute(f"INSERT INTO {ks}.t (k, v) VALUES (2, 'b')")
    n.nodetool("flush")
    corrupt_first_sstable(n, ks, "t")
    return c, s


@pytest.mark.parametrize("policy", ["best_effort", "stop", "ignore"])
def test_a_read_that_meets_corruption_fails_and_the_node_serves_the_rest(tmp_path, policy):
    """Issue 18, item 7: with best_effort one bad chunk quarantined the whole
    SSTable and the read that hit it returned success with 0 rows; with stop
    one bad chunk stopped the native transport while nodetool info said it
    was active. As Cassandra's handleCorruptSSTable: the read fails; stop,
    best_effort and ignore keep serving everything else."""
    n = SibylNode(data_dir=str(tmp_path), extra_config=f"disk_failure_policy: {policy}\n").start()
    try:
        c, s = corrupt_table(n, policy, "df")
        from cassandra import ReadFailure
        from cassandra.cluster import NoHostAvailable
        for _ in range(2):  # every time, not only the first
            with pytest.raises((ReadFailure, NoHostAvailable)) as ei:
                s.execute("SELECT k FROM df.t WHERE k = 1")
            # Cassandra's READ_FAILURE (0x1300), not a server error
            assert "code=1300" in str(ei.value) and "received 0 responses and 1 failures" in str(ei.value), str(ei.value)
        assert [r.k for r in s.execute("SELECT k FROM df.t WHERE k = 2")] == [2]
        assert [r.k for r in s.execute("SELECT k FROM df.other")] == [7]
        assert "chunk checksum mismatch" in n.log(tail=None)
        assert not glob.glob(os.path.join(n.data_dir, "data", "df", "t-*", "quarantine", "*")), "nothing set aside"
        assert re.search(r"Native Transport active\s*: true", n.nodetool("info"))
        c.shutdown()
    finally:
        n.kill9()


def test_disk_failure_policy_stop_paranoid_stops_serving_clients_and_says_so(tmp_path):
    import socket

    n = SibylNode(data_dir=str(tmp_path), extra_config="disk_failure_policy: stop_paranoid\n").start()
    try:
        c, s = corrupt_table(n, "stop_paranoid", "ds")
        with pytest.raises(Exception):
            s.execute("SELECT * FROM ds.t WHERE k = 1")
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection((n.host, n.port), timeout=1).close()
                time.sleep(0.2)
            except OSError:
                break
        else:
            raise AssertionError("the CQL port still accepts connections")
        info = n.nodetool("info")
        assert re.search(r"Native Transport active\s*: false", info), info
        assert "Datacenter" in n.nodetool("status"), "the node stays up for inspection"
        c.shutdown()
    finally:
        n.kill9()


def test_kill_9_during_writes_flushes_and_compactions_loses_no_acknowledged_write(tmp_path):
    """commitlog_sync: batch, a tiny memtable so flushes and compactions run
    all the time, writers going full speed; kill -9; every acknowledged write
    must be there after restart."""
    import threading

    cfg = "memtable_heap_space: 8MiB\ncommitlog_segment_size: 1MiB\ncommitlog_sync: batch\n"
    n = SibylNode(data_dir=str(tmp_path), extra_config=cfg).start()
    acked = []
    lock = threading.Lock()
    stop = threading.Event()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE kc WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE kc.t (k int, c int, v blob, PRIMARY KEY (k, c)) WITH compaction = {'class': 'SizeTieredCompactionStrategy', 'min_threshold': '2'}")
        ins = s.prepare("INSERT INTO kc.t (k, c, v) VALUES (?, ?, ?)")
        blob = os.urandom(2000)

        def writer(wid):
            i = 0
            while not stop.is_set():
                key = (wid, i)
                try:
                    s.execute(ins, (wid, i, blob))
                except Exception:
                    return
                with lock:
                    acked.append(key)
                i += 1

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        deadline = time.time() + 30
        while time.time() < deadline and len(sstables(n, "kc", "t")) == 0:
            time.sleep(0.1)
        time.sleep(2)
        n.kill9()
        stop.set()
        for t in threads:
            t.join(timeout=10)
        c.shutdown()
        got = set(acked)
        assert len(got) > 1000, f"enough writes to flush: {len(got)}"
        n.start()
        c, s = connect(n)
        present = {(r.k, r.c) for r in s.execute("SELECT k, c FROM kc.t")}
        missing = got - present
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {sorted(missing)[:5]}"
        c.shutdown()
    finally:
        stop.set()
        n.kill9()


def test_major_compaction_with_split_output_writes_halving_files(tmp_path):
    """`nodetool compact -s` on a size-tiered table: files of half, a quarter...
    of the data down to 50 MiB (Cassandra's smallest), the rest in the last;
    every row still there."""
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE KEYSPACE sp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE sp.t (k int PRIMARY KEY, v blob) WITH compaction = {'class': 'SizeTieredCompactionStrategy', 'enabled': 'false'}")
        ins = s.prepare("INSERT INTO sp.t (k, v) VALUES (?, ?)")
        rows = 140_000  # about 140 MB of incompressible values, in several SSTables
        for part in range(4):
            args = [(k, os.urandom(1000)) for k in range(part * rows // 4, (part + 1) * rows // 4)]
            assert all(ok for ok, _ in execute_concurrent_with_args(s, ins, args, concurrency=64))
            n.nodetool("flush", "sp", "t")
        assert len(sstables(n, "sp", "t")) >= 4
        n.nodetool("compact", "-s", "sp", "t")
        sizes = sorted((os.path.getsize(p) for p in sstables(n, "sp", "t")), reverse=True)
        total = sum(sizes)
        assert len(sizes) == 2, sizes  # half (70 MB); a quarter would be under 50 MiB, so the rest
        assert abs(sizes[0] - total / 2) < total * 0.05, sizes
        assert s.execute("SELECT count(*) FROM sp.t", timeout=300).one()[0] == rows
        # without -s: one file
        n.nodetool("compact", "sp", "t")
        assert len(sstables(n, "sp", "t")) == 1
        c.shutdown()
    finally:
        n.stop()

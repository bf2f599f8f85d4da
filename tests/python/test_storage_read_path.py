"""The read path over SSTables: row indexes inside wide partitions, every
compression class, SSTables skipped by clustering bounds and by newer
partition deletions, the key and row caches and the `caching` option, and
the numbers nodetool shows about them."""
import glob
import json
import os
import re

import pytest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from sibyl_node import SibylNode

pytestmark = pytest.mark.own_node


def connect(n):
    c = Cluster([n.host], port=n.port)
    s = c.connect()
    s.execute("CREATE KEYSPACE rp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    return c, s


def statistics(n, table):
    out = []
    for p in glob.glob(os.path.join(n.data_dir, "data", "rp", f"{table}-*", "sb-*-Statistics.db")):
        with open(p) as f:
            out.append(json.load(f))
    return out


def histograms(n, table):
    """nodetool tablehistograms as {column: {percentile: value}}."""
    out = n.nodetool("tablehistograms", "rp", table)
    lines = out.splitlines()
    assert lines[0] == f"rp/{table} histograms", out
    assert lines[1].split() == ["Percentile", "Read", "Latency", "Write", "Latency", "SSTables", "Partition", "Size", "Cell", "Count"], out
    cols = ["read", "write", "sstables", "size", "cells"]
    table_ = {c: {} for c in cols}
    for line in lines[3:10]:
        label, *values = line.split()
        for c, v in zip(cols, values):
            table_[c][label] = float(v)
    return table_


def info_cache(n, name):
    out = n.nodetool("info")
    m = re.search(rf"^{name}\s*: entries (\d+), size .*?, capacity .*?, (\d+) hits, (\d+) requests", out, re.M)
    assert m, out
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


@pytest.mark.parametrize("compression", [
    "{'class': 'LZ4Compressor', 'chunk_length_in_kb': 4}",
    "{'class': 'ZstdCompressor', 'chunk_length_in_kb': 4, 'compression_level': 1}",
    "{'class': 'SnappyCompressor', 'chunk_length_in_kb': 4}",
    "{'class': 'DeflateCompressor', 'chunk_length_in_kb': 4}",
    "{'enabled': 'false'}",
])
def test_wide_partition_slices_through_the_row_index_with_each_compression(tmp_path, compression):
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute(f"CREATE TABLE rp.w (k int, c int, v text, PRIMARY KEY (k, c)) WITH compression = {compression}")
        ins = s.prepare("INSERT INTO rp.w (k, c, v) VALUES (?, ?, ?)")
        rows = {c_: f"value {c_} " + "x" * (c_ % 200) for c_ in range(4000)}
        execute_concurrent_with_args(s, ins, [(1, c_, v) for c_, v in rows.items()], concurrency=32)
        execute_concurrent_with_args(s, ins, [(k, 0, "small") for k in range(2, 50)], concurrency=32)
        n.nodetool("flush", "rp", "w")
        stats = statistics(n, "w")
        assert len(stats) == 1 and stats[0]["version"] == 2
        assert stats[0]["indexed_partitions"] == 1, "only the wide partition has a row index"
        want = {"LZ4Compressor": "LZ4", "ZstdCompressor": "Zstd", "SnappyCompressor": "Snappy", "DeflateCompressor": "Deflate"}
        cls = re.search(r"'class': '(\w+)'", compression)
        assert stats[0]["compression"] == (want[cls.group(1)] if cls else "none")
        for lo, hi in [(0, 0), (17, 42), (1999, 2100), (3990, 5000), (-10, 3)]:
            got = [(r.c, r.v) for r in s.execute("SELECT c, v FROM rp.w WHERE k = 1 AND c >= %s AND c <= %s", (lo, hi))]
            assert got == [(c_, rows[c_]) for c_ in range(max(lo, 0), min(hi, 3999) + 1)], (lo, hi)
        got = [(r.c, r.v) for r in s.execute("SELECT c, v FROM rp.w WHERE k = 1 ORDER BY c DESC LIMIT 5")]
        assert got == [(c_, rows[c_]) for c_ in range(3999, 3994, -1)]
        assert s.execute("SELECT count(*) FROM rp.w WHERE k = 1").one().count == 4000
        # the partition size histogram sees one partition of more than 400 KB
        h = histograms(n, "w")
        assert h["size"]["Max"] > 400_000, h
        assert h["cells"]["Max"] >= 4000, h
        c.shutdown()
    finally:
        n.stop()


def test_reads_skip_sstables_by_clustering_bounds_and_newer_partition_deletions(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect(n)
        s.execute("CREATE TABLE rp.ts (k int, c int, v int, PRIMARY KEY (k, c)) WITH compaction = {'class': 'SizeTieredCompactionStrategy', 'enabled': 'false'}")
        ins = s.prepare("INSERT INTO rp.ts (k, c, v) VALUES (?, ?, ?)")
        for batch in range(3):  # three SSTables of disjoint clustering ranges
            execute_concurrent_with_args(s, ins, [(1, c_, c_) for c_ in range(batch * 100, batch * 100 + 100)], concurrency=16)
            n.nodetool("flush", "rp", "ts")
        for _ in range(20):
            got = [r.c for r in s.execute("SELECT c FROM rp.ts WHERE k = 1 AND c >= 250")]
            assert got == list(range(250, 300))
        h = histograms(n, "ts")
        assert h["sstables"]["Max"] == 1, f"a slice inside one SSTable's bounds reads only it: {h['sstables']}"
        # a partition deletion newer than everything: older SSTables are never opened
        s.execute("CREATE TABLE rp.del (k int, c int, v int, PRIMARY KEY (k, c)) WITH compaction = {'class': 'SizeTieredCompactionStrategy', 'enabled': 'false'}")
        ins = s.prepare("INSERT INTO rp.del (k, c, v) VALUES (?, ?, ?)")
        for batch in range(3):
            execute_concurrent_with_args(s, ins, [(1, c_, c_) for c_ in range(10)], concurrency=16)
            n.nodetool("flush", "rp", "del")
        s.execute("DELETE FROM rp.del WHERE k = 1")
        n.nodetool("flush", "rp", "del")
        for _ in range(20):
            assert list(s.execute("SELECT * FROM rp.del WHERE k = 1")) == []
        h = histograms(n, "del")
        assert h["sstables"]["Max"] == 1, f"the deletion's SSTable is the only one read: {h['sstables']}"
        # newer data after the deletion is still found
        s.execute("INSERT INTO rp.del (k, c, v) VALUES (1, 5, 55)")
        n.nodetool("flush", "rp", "del")
        assert [(r.c, r.v) for r in s.execute("SELECT c, v FROM rp.del WHERE k = 1")] == [(5, 55)]
        c.shutdown()
    finally:
        n.stop()


def test_key_cache_and_row_cache_follow_the_caching_option(tmp_path):
    n = SibylNode(data_dir=str(tmp_path), extra_config="row_cache_size: 16MiB\n").start()
    try:
        c, s = connect(n)
        s.execute("CREATE TABLE rp.cached (k int, c int, v int, PRIMARY KEY (k, c)) WITH caching = {'keys': 'ALL', 'rows_per_partition': 'ALL'}")
        s.execute("CREATE TABLE rp.plain (k int, c int, v int, PRIMARY KEY (k, c)) WITH caching = {'keys': 'NONE', 'rows_per_partition': 'NONE'}")
        for t in ("cached", "plain"):
            ins = s.prepare(f"INSERT INTO rp.{t} (k, c, v) VALUES (?, ?, ?)")
            execute_concurrent_with_args(s, ins, [(k, c_, k * 10 + c_) for k in range(50) for c_ in range(5)], concurrency=16)
            n.nodetool("flush", "rp", t)
        # the plain table touches neither cache
        before_keys, before_rows = info_cache(n, "Key Cache"), info_cache(n, "Row Cache")
        for k in range(50):
            assert len(list(s.execute("SELECT * FROM rp.plain WHERE k = %s", (k,)))) == 5
        assert info_cache(n, "Key Cache")[2] == before_keys[2]
        assert info_cache(n, "Row Cache")[2] == before_rows[2]
        # the cached table: a first read fills the row cache, a second hits it
        for k in range(50):
            assert len(list(s.execute("SELECT * FROM rp.cached WHERE k = %s", (k,)))) == 5
        entries, hits, requests = info_cache(n, "Row Cache")
        assert entries == 50 and requests - before_rows[2] == 50
        for k in range(50):
            assert [r.v for r in s.execute("SELECT v FROM rp.cached WHERE k = %s AND c >= 3", (k,))] == [k * 10 + 3, k * 10 + 4]
        entries, hits2, requests2 = info_cache(n, "Row Cache")
        assert hits2 - hits == 50, "slices are served from the cached partition"
        # a write invalidates: the next read sees it, from memtable and SSTable alike
        s.execute("UPDATE rp.cached SET v = -1 WHERE k = 7 AND c = 3")
        assert s.execute("SELECT v FROM rp.cached WHERE k = 7 AND c = 3").one().v == -1
        s.execute("DELETE FROM rp.cached WHERE k = 8")
        assert list(s.execute("SELECT * FROM rp.cached WHERE k = 8")) == []
        n.nodetool("flush", "rp", "cached")
        assert s.execute("SELECT v FROM rp.cached WHERE k = 7 AND c = 3").one().v == -1
        assert s.execute("SELECT v FROM rp.cached WHERE k = 7 AND c = 4").one().v == 74
        # the key cache served the partition lookups of the cached table
        k_entries, k_hits, k_requests = info_cache(n, "Key Cache")
        assert k_requests > before_keys[2] and k_entries > 0
        n.nodetool("invalidaterowcache")
        n.nodetool("invalidatekeycache")
        assert info_cache(n, "Row Cache")[0] == 0 and info_cache(n, "Key Cache")[0] == 0
        assert s.execute("SELECT v FROM rp.cached WHERE k = 7 AND c = 3").one().v == -1
        # TRUNCATE empties the table's cached partitions
        s.execute("TRUNCATE rp.cached")
        assert list(s.execute("SELECT * FROM rp.cached WHERE k = 7")) == []
        # tablestats shows the latencies and partition sizes
        out = n.nodetool("tablestats", "rp.plain")
        assert re.search(r"Local read latency: \d+\.\d{3} ms", out), out
        assert re.search(r"Compacted partition maximum bytes: [1-9]\d*", out), out
        c.shutdown()
    finally:
        n.stop()

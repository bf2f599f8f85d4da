"""A full disk: writes are refused with a clear error, reads go on, writes
resume once space is freed, and nothing acknowledged is lost (checked after a
kill -9). The node's data and commit log live on a small tmpfs, so the test
needs to mount one (root); without that it is skipped."""
import os
import subprocess
import time

import pytest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from sibyl_node import SibylNode

pytestmark = pytest.mark.own_node


def connect(n):
    c = Cluster([n.host], port=n.port)
    return c, c.connect()


def test_a_full_disk_refuses_writes_clearly_and_loses_nothing_acknowledged(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    n = SibylNode(data_dir=str(disk), extra_config="commitlog_sync: batch\ncommitlog_segment_size: 1MiB\nmemtable_heap_space: 8MiB\n")
    n.log_path = str(tmp_path / "sibyl.log")  # the log is not on the full disk
    try:
        n.start()
        c, s = connect(n)
        s.execute("CREATE KEYSPACE fd WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE fd.t (k int PRIMARY KEY, v blob)")
        ins = s.prepare("INSERT INTO fd.t (k, v) VALUES (?, ?)")
        blob = os.urandom(4096)  # incompressible
        acked, errors = [], []
        for start in range(0, 20000, 500):
            keys = list(range(start, start + 500))
            results = execute_concurrent_with_args(s, ins, [(k, blob) for k in keys], concurrency=64, raise_on_first_error=False)
            for k, (ok, r) in zip(keys, results):
                if ok:
                    acked.append(k)
                else:  # the driver's ServerError
                    errors.append(str(r))
            if errors:
                break
        assert errors, "24 MB filled up"
        unclear = [e for e in errors if "No space left on device" not in e]
        assert not unclear, f"{len(unclear)} of {len(errors)} errors do not say the disk is full: {unclear[:3]}"
        assert len(acked) > 1000, f"only {len(acked)} writes before the disk was full"
        # reads go on
        assert s.execute("SELECT v FROM fd.t WHERE k = %s", (acked[-1],)).one().v == blob
        assert s.execute("SELECT v FROM fd.t WHERE k = 0").one().v == blob
        # space is freed (the filesystem grows): writes resume
        subprocess.run(["mount", "-o", "remount,size=256m", str(disk)], check=True)
        deadline = time.time() + 30
        while True:
            try:
                s.execute(ins, (100000, blob))
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        acked.append(100000)
        execute_concurrent_with_args(s, ins, [(k, blob) for k in range(100001, 100200)], concurrency=64)
        acked.extend(range(100001, 100200))
        c.shutdown()
        n.kill9()
        n.start()
        c, s = connect(n)
        got = {r.k for r in s.execute("SELECT k FROM fd.t")}
        missing = set(acked) - got
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {sorted(missing)[:5]}"
        for k in (acked[0], acked[len(acked) // 2], acked[-1]):
            assert s.execute("SELECT v FROM fd.t WHERE k = %s", (k,)).one().v == blob
        c.shutdown()
    finally:
        n.kill9()
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)

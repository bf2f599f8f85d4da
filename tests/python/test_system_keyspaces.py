"""Issue 21, item 7: the replicated system keyspaces (system_auth,
system_distributed, system_traces) take ALTER KEYSPACE as in Cassandra, the
node's own are refused, and every other schema change in a system keyspace
is refused in Cassandra's words. Golden: tests/golden/alter_system_keyspaces.json,
recorded from Cassandra 5.0.4."""
import json
import os

from cassandra.cluster import Cluster

import goldens
from local_cluster import LocalCluster, wait_for


def golden():
    with open(os.path.join(goldens.GOLDEN, "alter_system_keyspaces.json")) as f:
        return json.load(f)


def outcome(s, q):
    try:
        r = s.execute(q)
        return {"query": q, "ok": True, "warnings": r.response_future.warnings or []}
    except Exception as e:
        return {"query": q, "ok": False, "error": type(e).__name__, "message": str(e)}


def replication(s, ks):
    r = s.execute("SELECT durable_writes, replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one()
    return dict(r.replication), r.durable_writes


def test_schema_changes_in_system_keyspaces_answer_as_cassandra(node):
    want = golden()
    c = Cluster([node.host], port=node.port)
    s = c.connect()
    try:
        for w in want["statements"]:
            assert outcome(s, w["query"]) == w, w["query"]
        after = {r["keyspace_name"]: r for r in want["after"]}
        for ks in ("system_distributed", "system_traces"):
            assert replication(s, ks) == (after[ks]["replication"], after[ks]["durable_writes"]), ks
        assert replication(s, "system_auth")[0] == after["system_auth"]["replication"]
    finally:
        c.shutdown()


def test_system_auth_goes_to_rf_3_on_three_nodes_and_stays_there(tmp_path):
    """Seed 000's step when a cluster grows from 1 to 3 nodes: every node
    takes the new replication, a restarted node keeps it, and the ring
    places a replicated system keyspace's partitions on all three."""
    lc = LocalCluster(tmp_path, 3)
    try:
        lc.run("start")
        c, s = lc.connect(1, whitelist=True)
        r = s.execute("ALTER KEYSPACE system_auth WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        assert r.response_future.warnings == [
            "When increasing replication factor you need to run a full (-full) repair to distribute the data."]
        c.shutdown()
        rf3 = {"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "3"}
        for n in (1, 2, 3):
            c, s = lc.connect(n, whitelist=True)
            wait_for(f"node {n} has system_auth at RF 3", lambda: replication(s, "system_auth")[0] == rf3)
            c.shutdown()
        lc.run("stop", "node2")
        lc.run("start", "node2")
        c, s = lc.connect(2, whitelist=True)
        assert replication(s, "system_auth")[0] == rf3
        c.shutdown()
        # system_auth has no tables in Sibyl yet (no authentication): the
        # placement is shown on system_traces, altered the same way
        c, s = lc.connect(1, whitelist=True)
        s.execute("ALTER KEYSPACE system_traces WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        c.shutdown()
        out = lc.nodetool(1, "getendpoints", "system_traces", "sessions", "7a3c8a4e-1d2b-4c1e-9f0e-0a1b2c3d4e5f")
        assert sorted(out.split()) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"], out
    finally:
        lc.stop()


def test_index_info_and_size_estimates_as_tools_read_them(node, session):
    """Issue 16, group 6: `system."IndexInfo"` lists the indexes built;
    `system.size_estimates` / `table_estimates` give, per table and primary
    range of this node, Cassandra's SizeEstimatesRecorder figures: the
    SSTables' index summary samples in the range times 128 (at least 1 for
    an SSTable overlapping it), memtables not counted."""
    ks = session.keyspace_name
    session.execute("CREATE TABLE est (k int PRIMARY KEY, v int)")
    ins = session.prepare("INSERT INTO est (k, v) VALUES (?, ?)")
    for k in range(1000):
        session.execute(ins, (k, k % 7))
    session.execute("CREATE INDEX est_v ON est (v)")
    built = [(r.table_name, r.index_name, r.value) for r in session.execute('SELECT * FROM system."IndexInfo"')]
    assert (ks, "est_v", None) in built
    q = "SELECT * FROM system.size_estimates WHERE keyspace_name = %s AND table_name = 'est'"
    before = list(session.execute(q, (ks,)))
    tokens = 16  # num_tokens' default
    # one row per primary range, the wrapping one split at the minimum token
    assert len(before) == tokens + 1
    assert sum(r.partitions_count for r in before) == 0  # only SSTables count
    node.nodetool("flush", ks, "est")
    after = list(session.execute(q, (ks,)))
    assert [(r.range_start, r.range_end) for r in after] == [(r.range_start, r.range_end) for r in before]
    assert "-9223372036854775808" in {r.range_start for r in after} | {r.range_end for r in after}
    total = sum(r.partitions_count for r in after)
    # 1000 keys: 8 summary samples of 128, and 1 for each range without one
    assert 8 * 128 <= total <= 8 * 128 + len(after)
    assert all(r.mean_partition_size > 0 for r in after if r.partitions_count > 0)
    te = list(session.execute(
        "SELECT range_type, partitions_count FROM system.table_estimates WHERE keyspace_name = %s AND table_name = 'est'", (ks,)))
    assert sorted({r.range_type for r in te}) == ["local_primary", "primary"]
    assert sum(r.partitions_count for r in te if r.range_type == "primary") == total
    # a filter on them needs ALLOW FILTERING, as on any stored table
    import pytest
    from cassandra import InvalidRequest
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute("SELECT * FROM system.size_estimates WHERE keyspace_name = %s AND partitions_count > 0", (ks,))
    session.execute("DROP INDEX est_v")
    assert (ks, "est_v", None) not in [(r.table_name, r.index_name, r.value) for r in session.execute('SELECT * FROM system."IndexInfo"')]

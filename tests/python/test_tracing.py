"""Tracing (issue 21, item 5) on three real nodes: driver tracing and cqlsh's
TRACING ON give sessions and events in system_traces from the coordinator
and from every replica a request reached, worded as Apache Cassandra 5.0.4
words them (golden tracing/cassandra_traces.json, recorded from a real
3-node Cassandra cluster by capture_tracing.py); `nodetool
settraceprobability` traces requests that did not ask to be.
"""
import re
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement, BatchStatement, BatchType

import goldens
from local_cluster import LocalCluster, wait_for

TRACES = goldens.load_json("tracing/cassandra_traces.json")
FACTS = goldens.load_json("tracing/cassandra_facts.json")

# What Cassandra traces and Sibyl has no counterpart of: its row index
# ("Partition index found for sstable N") and key cache lookups per SSTable.
KNOWN_ABSENT = {
    "Partition index found for sstable N, size = N",
    "Key cache hit for sstable N, size = N",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("tracing"), 3)
    c.run("start")
    cl, s = c.connect(1, whitelist=True)
    wait_for("three nodes up", lambda: c.nodetool(1, "status").count("UN  127.0.0.") == 3)
    s.execute("CREATE KEYSPACE tr WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE tr.t (k int, c int, v text, PRIMARY KEY (k, c))")
    for k in range(1, 6):
        for cc in range(1, 4):
            s.execute(SimpleStatement("INSERT INTO tr.t (k, c, v) VALUES (%s, %s, %s)",
                                      consistency_level=ConsistencyLevel.ALL), (k, cc, f"v{k}_{cc}"))
    yield c, s
    cl.shutdown()
    c.stop()


def normalize(activity, nodes):
    """Addresses as NODEn (ports dropped), numbers as N, Cassandra's and ours alike."""
    for name, addr in nodes.items():
        activity = activity.replace(addr, name)
    activity = re.sub(r"/(NODE\d):\d+", r"/\1", activity)
    activity = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID", activity)
    return re.sub(r"-?\d+(\.\d+)?", "N", activity)


def stage(thread):
    return re.sub(r"[-:]?\d+(-\d+)*$", "", thread)


def events_of(session, trace_id, want_sources=1, settle=2.0):
    """The session's events once every node's have arrived (they are written
    asynchronously by each node, as Cassandra's are)."""
    last, since = None, time.time()
    deadline = time.time() + 20
    while time.time() < deadline:
        rows = list(session.execute(
            SimpleStatement("SELECT * FROM system_traces.events WHERE session_id = %s",
                            consistency_level=ConsistencyLevel.ONE), [trace_id]))
        if len({str(r.source) for r in rows}) >= want_sources and len(rows) == last and time.time() - since > settle:
            return rows
        if len(rows) != last:
            last, since = len(rows), time.time()
        time.sleep(0.3)
    return rows


def traced(session, statement, nodes, want_sources):
    r = session.execute(statement, trace=True)
    trace = r.get_query_trace(max_wait_sec=20)
    rows = events_of(session, trace.trace_id, want_sources)
    return trace, rows


NODES = {"NODE1": "127.0.0.1", "NODE2": "127.0.0.2", "NODE3": "127.0.0.3"}


def by_role(rows, coordinator):
    out = {"coordinator": set(), "replica": set()}
    for e in rows:
        role = "coordinator" if e["source"] == coordinator else "replica"
        out[role].add(normalize(e["activity"], NODES))
    return out


def check_against_cassandra(case, trace, rows, c):
    golden = TRACES["cases"][case]
    # the session row, as Cassandra writes it
    assert trace.request_type == golden["session"]["request"]
    assert set(trace.parameters) == set(golden["session"]["parameters"])
    assert trace.parameters["consistency_level"] == golden["session"]["parameters"]["consistency_level"]
    assert str(trace.coordinator) == "127.0.0.1" and str(trace.client) == "127.0.0.1"
    assert trace.duration is not None and trace.duration.total_seconds() > 0
    ours = by_role([{"source": str(r.source), "activity": r.activity} for r in rows], "127.0.0.1")
    theirs = by_role(golden["events"], "NODE1")
    for role in ("coordinator", "replica"):
        extra = ours[role] - theirs[role]
        missing = theirs[role] - ours[role] - KNOWN_ABSENT
        assert not extra, f"{case} {role}: Sibyl traces what Cassandra does not: {sorted(extra)}"
        assert not missing, f"{case} {role}: Cassandra traces what Sibyl does not: {sorted(missing)}"
    # threads are named after Cassandra's stages
    stages = {stage(e["thread"]) for e in golden["events"]}
    assert {stage(r.thread) for r in rows} <= stages | {"MutationStage", "ReadStage"}
    # every row of the session carries its source's storage port
    assert {r.source_port for r in rows} == {c.storage_port}


def test_a_write_at_quorum_traces_every_replica(cluster):
    c, s = cluster
    st = SimpleStatement("INSERT INTO tr.t (k, c, v) VALUES (21, 1, 'b')", consistency_level=ConsistencyLevel.QUORUM)
    trace, rows = traced(s, st, NODES, want_sources=3)
    assert {str(r.source) for r in rows} == {"127.0.0.1", "127.0.0.2", "127.0.0.3"}
    check_against_cassandra("b_insert_quorum", trace, rows, c)


def test_a_read_at_all_traces_data_and_digest_replicas(cluster):
    c, s = cluster
    st = SimpleStatement("SELECT * FROM tr.t WHERE k = 3", consistency_level=ConsistencyLevel.ALL)
    trace, rows = traced(s, st, NODES, want_sources=3)
    check_against_cassandra("e_select_partition_all", trace, rows, c)
    for node in ("127.0.0.2", "127.0.0.3"):
        mine = [r.activity for r in rows if str(r.source) == node]
        assert f"READ_REQ message received from /127.0.0.1:{c.storage_port}" in mine
        assert "Read 3 live rows and 0 tombstone cells" in mine


def test_a_logged_batch_traces_the_batchlog(cluster):
    c, s = cluster
    st = SimpleStatement("BEGIN BATCH INSERT INTO tr.t (k, c, v) VALUES (32, 1, 'b3'); "
                         "INSERT INTO tr.t (k, c, v) VALUES (33, 1, 'b4'); APPLY BATCH",
                         consistency_level=ConsistencyLevel.QUORUM)
    trace, rows = traced(s, st, NODES, want_sources=3)
    check_against_cassandra("h2_logged_batch_cql_quorum", trace, rows, c)


def test_a_prepared_statement_names_its_bound_values(cluster):
    c, s = cluster
    p = s.prepare("SELECT v FROM tr.t WHERE k = ? AND c = ?")
    p.consistency_level = ConsistencyLevel.ONE
    trace, rows = traced(s, p.bind([4, 2]), NODES, want_sources=1)
    golden = TRACES["cases"]["g_prepared_select"]["session"]
    assert trace.request_type == golden["request"] == "Execute CQL3 prepared query"
    assert trace.parameters == golden["parameters"]
    assert "Read 1 live rows and 0 tombstone cells" in [r.activity for r in rows]


def test_a_range_read_computes_its_ranges(cluster):
    c, s = cluster
    trace, rows = traced(s, SimpleStatement("SELECT * FROM tr.t", consistency_level=ConsistencyLevel.ONE),
                         NODES, want_sources=1)
    acts = [r.activity for r in rows]
    assert "Computing ranges to query" in acts
    assert any(a.startswith("Executing seq scan across ") for a in acts)
    golden = [e["activity"] for e in TRACES["cases"]["f_select_range_one"]["events"]]
    assert any(a.startswith("Executing seq scan across ") and "(min(-9223372036854775808)" in a for a in golden)


def test_trace_rows_live_a_day_in_a_keyspace_replicated_as_cassandras(cluster):
    c, s = cluster
    trace, rows = traced(s, SimpleStatement("SELECT * FROM tr.t WHERE k = 1"), NODES, want_sources=1)
    (ttl,) = s.execute("SELECT TTL(activity) FROM system_traces.events WHERE session_id = %s LIMIT 1",
                       [trace.trace_id]).one()
    assert 86_000 < ttl <= 86_400
    (ttl,) = s.execute("SELECT TTL(duration) FROM system_traces.sessions WHERE session_id = %s",
                       [trace.trace_id]).one()
    assert 86_000 < ttl <= 86_400
    ks = s.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'system_traces'").one()
    assert dict(ks.replication) == FACTS["system_traces_keyspace"]["replication"]


def test_cqlsh_tracing_on_shows_the_session_as_cassandras(cluster, tmp_path):
    c, s = cluster
    golden = goldens.read("tracing/cqlsh_tracing_on.txt")
    header = next(line for line in golden.splitlines() if line.strip().startswith("activity"))
    p = subprocess.run([goldens.cqlsh_bin(), "127.0.0.1", str(c.port), "-e",
                        "CONSISTENCY ALL; TRACING ON; SELECT k, c, v FROM tr.t WHERE k = 1 AND c = 1;"],
                       capture_output=True, text=True, timeout=120, env=goldens.cqlsh_env())
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Now Tracing is enabled" in out or "TRACING set to ON" in out
    assert re.search(r"Tracing session: [0-9a-f-]{36}", out)
    assert [h.strip() for h in header.split("|")] == [h.strip() for h in next(
        line for line in out.splitlines() if line.strip().startswith("activity")).split("|")]
    assert re.search(r"^\s+Execute CQL3 query \|", out, re.M)
    assert re.search(r"^\s+Request complete \|", out, re.M)
    assert re.search(r"Parsing SELECT k, c, v FROM tr.t WHERE k = 1 AND c = 1;? \[Native-Transport-Requests-\d+\]", out)
    # the replicas' steps are there, each with its thread
    assert re.search(r"READ_REQ message received from /127\.0\.0\.1:\d+ \[Messaging-EventLoop-3-\d+\] \| [^|]+\| 127\.0\.0\.[23] ", out)
    assert re.search(r"Merging memtable contents \[ReadStage-\d+\]", out)


def test_settraceprobability_traces_requests_that_did_not_ask(cluster):
    c, s = cluster
    want = {tuple(x["args"]): x for x in FACTS["nodetool_trace_probability"]}
    assert c.nodetool(1, "gettraceprobability") == want[("gettraceprobability",)]["stdout"]
    bad = c.nodetool(1, "settraceprobability", "2", check=False)
    assert bad.returncode == 1
    assert want[("settraceprobability", "2")]["stdout"].splitlines()[0] in bad.stdout + bad.stderr
    c.nodetool(1, "settraceprobability", "1")
    try:
        assert c.nodetool(1, "gettraceprobability") == "Current trace probability: 1.0\n"
        marker = "SELECT v FROM tr.t WHERE k = 5 AND c = 3"
        s.execute(marker)
    finally:
        c.nodetool(1, "settraceprobability", "0")

    def sessions():
        return [r for r in s.execute("SELECT parameters, request FROM system_traces.sessions")
                if r.parameters and r.parameters.get("query") == marker]
    found = wait_for("a sampled session", sessions)
    assert found[0].request == "Execute CQL3 query"

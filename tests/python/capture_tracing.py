"""Records how a real 3-node Apache Cassandra 5.0.4 cluster traces requests:
the system_traces.sessions row and every system_traces.events row of a set of
traced statements, what cqlsh prints with TRACING ON, and a few facts about
tracing (the system_traces keyspace and tables, the TTL of trace rows,
nodetool settraceprobability / gettraceprobability).

Start the cluster first (one node after the other; 127.0.1.x so it does not
collide with other tests on 127.0.0.x):

    S=../shared/cassandra
    $S/start.sh --dir /tmp/cc1 --address 127.0.1.1 --seeds 127.0.1.1 --heap 1G --port 9042
    $S/start.sh --dir /tmp/cc2 --address 127.0.1.2 --seeds 127.0.1.1 --heap 1G --port 9042
    $S/start.sh --dir /tmp/cc3 --address 127.0.1.3 --seeds 127.0.1.1 --heap 1G --port 9042
    .venv/bin/python tests/python/capture_tracing.py \
        --host 127.0.1.1 --dirs /tmp/cc1,/tmp/cc2,/tmp/cc3
    $S/stop.sh --dir /tmp/cc1; $S/stop.sh --dir /tmp/cc2; $S/stop.sh --dir /tmp/cc3

Every statement goes to the contact point alone (WhiteListRoundRobinPolicy), so
it is always the coordinator. The script (re)creates keyspace `tr`
(SimpleStrategy RF 3) and `tr.t (k int, c int, v text, PRIMARY KEY (k, c))`,
writes rows, flushes `tr` on every node (so reads touch an sstable), writes a
few more rows (so they also touch a memtable), then runs each case with
trace=True (case k writes 1001 row tombstones into partition 99 first). After the driver has the trace it re-reads system_traces.events
at CL ALL until the count has been stable for 2 s (replica events arrive
late).

Node addresses are normalized: the nodes sorted by address become NODE1,
NODE2, ... (127.0.1.1 -> NODE1), any other address (the client's) CLIENT;
everything else (activities, thread names, elapsed times) is kept verbatim.
duration and started_at are recorded only as present / absent. Writes

    tests/golden/tracing/cassandra_traces.json   case -> {statement, session, events}
    tests/golden/tracing/cqlsh_tracing_on.txt    cqlsh -e "TRACING ON; SELECT ...; INSERT ..." (verbatim)
    tests/golden/tracing/cassandra_facts.json    system_traces schema, TTLs, nodetool trace probability
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import BatchStatement, BatchType, SimpleStatement

import goldens

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("CASSANDRA_SHARED", os.path.join(os.path.dirname(REPO), "shared", "cassandra"))
NODETOOL = os.path.join(SHARED, "nodetool.sh")
CQLSH = os.path.join(REPO, ".venv", "bin", "cqlsh")
OUT = os.path.join(goldens.GOLDEN, "tracing")

ONE, QUORUM, ALL = ConsistencyLevel.ONE, ConsistencyLevel.QUORUM, ConsistencyLevel.ALL


class Normalizer:
    def __init__(self, nodes):
        self.names = {a: "NODE%d" % (i + 1) for i, a in enumerate(sorted(nodes, key=_addr_key))}

    def addr(self, a):
        if a is None:
            return None
        a = str(a)
        return self.names.get(a, "CLIENT")

    def text(self, s):
        if s is None:
            return None

        def sub(m):
            a = m.group(0)
            return self.names.get(a, "CLIENT")

        return re.sub(r"(?<![\d.])\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\d])", sub, s)


def _addr_key(a):
    return tuple(int(x) for x in a.split("."))


def nodetool(d, *args):
    p = subprocess.run([NODETOOL, "--dir", d, *args], capture_output=True, text=True, timeout=300)
    return {"args": list(args), "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}


def wait_for_trace(session, trace_id, timeout=40):
    """The session row and the events of trace_id once the events count has been stable for 2 s."""
    sel_events = SimpleStatement("SELECT event_id, activity, source, source_port, thread, source_elapsed "
                                 "FROM system_traces.events WHERE session_id = %s", consistency_level=ALL)
    sel_session = SimpleStatement("SELECT * FROM system_traces.sessions WHERE session_id = %s",
                                  consistency_level=ALL)
    deadline = time.time() + timeout
    last, stable_since = -1, time.time()
    while True:
        events = list(session.execute(sel_events, [trace_id]))
        rows = list(session.execute(sel_session, [trace_id]))
        now = time.time()
        if len(events) != last:
            last, stable_since = len(events), now
        done = rows and rows[0].duration is not None and now - stable_since >= 2.0
        if done or now > deadline:
            return (rows[0] if rows else None), events
        time.sleep(0.25)


def record(norm, srow, events):
    session = None
    if srow is not None:
        session = {
            "command": srow.command,
            "request": norm.text(srow.request),
            "parameters": {k: norm.text(v) for k, v in sorted((srow.parameters or {}).items())},
            "client": norm.addr(srow.client),
            "coordinator": norm.addr(srow.coordinator),
            "coordinator_port": srow.coordinator_port,
            "duration_present": srow.duration is not None,
            "started_at_present": srow.started_at is not None,
        }
    evs = []
    # system_traces.events clusters by event_id (timeuuid) so rows come back in event_id order; sort anyway
    for e in sorted(events, key=lambda e: (e.event_id.time, e.event_id.bytes)):
        evs.append({
            "activity": norm.text(e.activity),
            "source": norm.addr(e.source),
            "source_port": e.source_port,
            "thread": e.thread,
            "source_elapsed": e.source_elapsed,
        })
    return {"session": session, "events": evs}


def run_case(session, norm, name, desc, stmt, params=None):
    print("case", name, file=sys.stderr)
    rs = session.execute(stmt, params, trace=True)
    rows = [list(r) for r in rs.current_rows] if rs.current_rows is not None else []
    trace = rs.get_query_trace(max_wait_sec=10)
    srow, events = wait_for_trace(session, trace.trace_id)
    out = {"description": desc}
    out.update(record(norm, srow, events))
    out["rows_returned"] = len(rows)
    out["client_warnings"] = rs.response_future.warnings
    if name.startswith("i"):  # LWT: the [applied] column
        out["applied"] = rows[0][0] if rows else None
    return out


def cqlsh_tracing(host, port):
    env = goldens.cqlsh_env()
    script = ("TRACING ON; SELECT k, c, v FROM tr.t WHERE k = 1 AND c = 1; "
              "INSERT INTO tr.t (k, c, v) VALUES (50, 1, 'cqlsh'); TRACING OFF;")
    p = subprocess.run([CQLSH, host, str(port), "-e", script], capture_output=True, text=True, env=env,
                       timeout=120)
    text = "$ cqlsh %s %s -e %r\n" % ("HOST", "PORT", script)
    text += p.stdout
    if p.stderr:
        text += "--- stderr ---\n" + p.stderr
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.1.1")
    ap.add_argument("--port", type=int, default=9042)
    ap.add_argument("--dirs", default="/tmp/cc1,/tmp/cc2,/tmp/cc3",
                    help="start.sh --dir of every node (for nodetool); the first is the contact point's")
    ap.add_argument("--no-flush", action="store_true")
    args = ap.parse_args()
    dirs = args.dirs.split(",")

    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([args.host]),
                               request_timeout=60)
    cluster = Cluster([args.host], port=args.port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    s = cluster.connect()
    nodes = [str(s.execute("SELECT broadcast_address FROM system.local").one().broadcast_address)]
    nodes += [str(r.peer) for r in s.execute("SELECT peer FROM system.peers")]
    norm = Normalizer(nodes)
    print("nodes", norm.names, file=sys.stderr)
    assert len(nodes) == 3, nodes

    s.execute("DROP KEYSPACE IF EXISTS tr")
    s.execute("CREATE KEYSPACE tr WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    s.execute("CREATE TABLE tr.t (k int, c int, v text, PRIMARY KEY (k, c))")
    ins = s.prepare("INSERT INTO tr.t (k, c, v) VALUES (?, ?, ?)")
    ins.consistency_level = ALL
    for k in range(1, 11):
        for c in range(1, 4):
            s.execute(ins, (k, c, "v%d_%d" % (k, c)))
    if not args.no_flush:
        for d in dirs:
            r = nodetool(d, "flush", "tr")
            assert r["rc"] == 0, r
    for k in (1, 2):
        s.execute(ins, (k, 4, "memtable%d" % k))

    def simple(q, cl, serial=None):
        return SimpleStatement(q, consistency_level=cl, serial_consistency_level=serial)

    cases = {}
    cases["a_insert_one"] = run_case(s, norm, "a_insert_one", "INSERT at ONE",
                                     simple("INSERT INTO tr.t (k, c, v) VALUES (20, 1, 'a')", ONE))
    cases["b_insert_quorum"] = run_case(s, norm, "b_insert_quorum", "INSERT at QUORUM",
                                        simple("INSERT INTO tr.t (k, c, v) VALUES (21, 1, 'b')", QUORUM))
    cases["c_select_partition_one"] = run_case(s, norm, "c_select_partition_one",
                                               "single-partition SELECT at ONE (partition in sstable + memtable)",
                                               simple("SELECT * FROM tr.t WHERE k = 1", ONE))
    cases["d_select_partition_quorum"] = run_case(s, norm, "d_select_partition_quorum",
                                                  "single-partition SELECT at QUORUM",
                                                  simple("SELECT * FROM tr.t WHERE k = 2", QUORUM))
    cases["e_select_partition_all"] = run_case(s, norm, "e_select_partition_all", "single-partition SELECT at ALL",
                                               simple("SELECT * FROM tr.t WHERE k = 3", ALL))
    cases["f_select_range_one"] = run_case(s, norm, "f_select_range_one", "range SELECT (no WHERE) at ONE",
                                           simple("SELECT * FROM tr.t", ONE))
    ps = s.prepare("SELECT v FROM tr.t WHERE k = ? AND c = ?")
    ps.consistency_level = ONE
    cases["g_prepared_select"] = run_case(s, norm, "g_prepared_select",
                                          "prepared SELECT executed with bound values (4, 2) at ONE",
                                          ps.bind((4, 2)))
    cases["g_prepared_select"]["statement"] = ps.query_string
    b = BatchStatement(batch_type=BatchType.LOGGED, consistency_level=QUORUM)
    b.add(SimpleStatement("INSERT INTO tr.t (k, c, v) VALUES (30, 1, 'b1')"))
    b.add(SimpleStatement("INSERT INTO tr.t (k, c, v) VALUES (31, 1, 'b2')"))
    cases["h_logged_batch_quorum"] = run_case(s, norm, "h_logged_batch_quorum",
                                              "logged BATCH (protocol BATCH message) of two partitions at QUORUM", b)
    cases["h_logged_batch_quorum"]["statement"] = [
        "INSERT INTO tr.t (k, c, v) VALUES (30, 1, 'b1')", "INSERT INTO tr.t (k, c, v) VALUES (31, 1, 'b2')"]
    cases["h2_logged_batch_cql_quorum"] = run_case(
        s, norm, "h2_logged_batch_cql_quorum", "logged BATCH as one CQL string (QUERY message), two partitions, QUORUM",
        simple("BEGIN BATCH INSERT INTO tr.t (k, c, v) VALUES (32, 1, 'b3'); "
               "INSERT INTO tr.t (k, c, v) VALUES (33, 1, 'b4'); APPLY BATCH", QUORUM))
    cases["i_insert_if_not_exists"] = run_case(
        s, norm, "i_insert_if_not_exists", "INSERT ... IF NOT EXISTS (LWT, new row), CL ONE / serial SERIAL",
        simple("INSERT INTO tr.t (k, c, v) VALUES (40, 1, 'lwt') IF NOT EXISTS", ONE, ConsistencyLevel.SERIAL))
    cases["i2_insert_if_not_exists_not_applied"] = run_case(
        s, norm, "i2_insert_if_not_exists_not_applied",
        "INSERT ... IF NOT EXISTS on an existing row (LWT, not applied), CL ONE / serial SERIAL",
        simple("INSERT INTO tr.t (k, c, v) VALUES (40, 1, 'again') IF NOT EXISTS", ONE, ConsistencyLevel.SERIAL))
    cases["j_select_system_local"] = run_case(s, norm, "j_select_system_local", "SELECT on system.local at ONE",
                                              simple("SELECT key, cluster_name FROM system.local", ONE))
    dele = s.prepare("DELETE FROM tr.t WHERE k = 99 AND c = ?")
    dele.consistency_level = ALL
    for start in range(0, 1001, 250):
        bb = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=ALL)
        for c in range(start, min(1001, start + 250)):
            bb.add(dele, (c,))
        s.execute(bb)
    s.execute(simple("INSERT INTO tr.t (k, c, v) VALUES (99, 5000, 'live')", ALL))
    cases["k_select_over_tombstone_warn_threshold_all"] = run_case(
        s, norm, "k_select_over_tombstone_warn_threshold_all",
        "single-partition SELECT at ALL of a partition with 1001 row tombstones and one live row "
        "(tombstone_warn_threshold 1000); the client also gets a warning",
        simple("SELECT * FROM tr.t WHERE k = 99", ALL))
    for name, c in cases.items():
        if "statement" not in c:
            c["statement"] = c["session"]["parameters"].get("query") if c["session"] else None
        c["consistency"] = c["session"]["parameters"].get("consistency_level") if c["session"] else None

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "cassandra_traces.json"), "w") as f:
        json.dump({"nodes": {v: k for k, v in norm.names.items()},
                   "coordinator": norm.addr(args.host), "cases": cases}, f, indent=1, sort_keys=False)
        f.write("\n")

    # cqlsh TRACING ON
    text = cqlsh_tracing(args.host, args.port)
    with open(os.path.join(OUT, "cqlsh_tracing_on.txt"), "w") as f:
        f.write(text)

    # facts
    facts = {}
    ks = s.execute("SELECT * FROM system_schema.keyspaces WHERE keyspace_name = 'system_traces'").one()
    facts["system_traces_keyspace"] = {"replication": dict(ks.replication), "durable_writes": ks.durable_writes}
    tables = {}
    for t in s.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = 'system_traces'"):
        tables[t.table_name] = {"default_time_to_live": t.default_time_to_live,
                                "gc_grace_seconds": t.gc_grace_seconds, "comment": t.comment,
                                "compaction": dict(t.compaction), "id": str(t.id)}
    for c in s.execute("SELECT * FROM system_schema.columns WHERE keyspace_name = 'system_traces'"):
        tables[c.table_name].setdefault("columns", []).append(
            {"name": c.column_name, "kind": c.kind, "position": c.position, "type": c.type,
             "clustering_order": c.clustering_order})
    for t in tables.values():
        t["columns"].sort(key=goldens.column_sort_key)
    facts["system_traces_tables"] = tables
    sid = next(iter(s.execute("SELECT session_id FROM system_traces.sessions LIMIT 1"))).session_id
    ttl_ev = s.execute(SimpleStatement("SELECT TTL(activity) AS t FROM system_traces.events WHERE session_id = %s",
                                       consistency_level=ALL), [sid]).all()
    ttl_se = s.execute(SimpleStatement("SELECT TTL(command) AS t, TTL(duration) AS d FROM system_traces.sessions "
                                       "WHERE session_id = %s", consistency_level=ALL), [sid]).one()
    facts["ttl"] = {
        "statement_events": "SELECT TTL(activity) FROM system_traces.events WHERE session_id = <id>",
        "events_ttl_max": max(r.t for r in ttl_ev), "events_ttl_min": min(r.t for r in ttl_ev),
        "statement_sessions": "SELECT TTL(command), TTL(duration) FROM system_traces.sessions WHERE session_id = <id>",
        "sessions_command_ttl": ttl_se.t, "sessions_duration_ttl": ttl_se.d,
        "note": "TTLs are read a few seconds to minutes after the write, so they are slightly under the configured value",
    }
    settings = s.execute("SELECT name, value FROM system_views.settings WHERE name IN "
                         "('trace_type_query_ttl', 'trace_type_repair_ttl', 'tracetype_query_ttl', "
                         "'tracetype_repair_ttl')")
    facts["trace_ttl_settings"] = {r.name: r.value for r in settings}
    d1 = dirs[0]
    probe = [nodetool(d1, "gettraceprobability"),
             nodetool(d1, "settraceprobability", "0.5"),
             nodetool(d1, "gettraceprobability"),
             nodetool(d1, "settraceprobability", "2"),
             nodetool(d1, "settraceprobability", "-0.1"),
             nodetool(d1, "settraceprobability"),
             nodetool(d1, "gettraceprobability"),
             nodetool(d1, "settraceprobability", "1")]
    # with probability 1 an untraced request gets a trace session of its own
    marker = "SELECT v FROM tr.t WHERE k = 7 AND c = 3"
    s.execute(simple(marker, ONE))
    probe.append(nodetool(d1, "settraceprobability", "0"))
    probe.append(nodetool(d1, "gettraceprobability"))
    facts["nodetool_trace_probability"] = probe
    time.sleep(3)
    found = None
    for r in s.execute(SimpleStatement("SELECT * FROM system_traces.sessions", consistency_level=ALL)):
        if r.parameters and r.parameters.get("query") == marker:
            found = r
            break
    if found is not None:
        srow, events = wait_for_trace(s, found.session_id)
        facts["probabilistic_trace_of_untraced_request"] = dict(statement=marker, **record(norm, srow, events))
    else:
        facts["probabilistic_trace_of_untraced_request"] = None
    with open(os.path.join(OUT, "cassandra_facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
        f.write("\n")
    cluster.shutdown()
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()

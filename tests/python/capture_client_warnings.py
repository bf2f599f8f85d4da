"""Records the client warnings (the native protocol's WARNING flag: a list of
strings sent with a response) that Apache Cassandra 5.0.4 sends with the
cassandra.yaml that ../shared/cassandra/start.sh writes, and which yaml key
sets each threshold. Cases that send no warning, or an error instead, are
recorded too, so a replay can check that Sibyl stays quiet there as well.

Start a 3-node cluster first (one node after the other), as for
capture_tracing.py:

    S=../shared/cassandra
    $S/start.sh --dir /tmp/cc1 --address 127.0.1.1 --seeds 127.0.1.1 --heap 1G --port 9042
    $S/start.sh --dir /tmp/cc2 --address 127.0.1.2 --seeds 127.0.1.1 --heap 1G --port 9042
    $S/start.sh --dir /tmp/cc3 --address 127.0.1.3 --seeds 127.0.1.1 --heap 1G --port 9042
    .venv/bin/python tests/python/capture_client_warnings.py --host 127.0.1.1
    $S/stop.sh --dir /tmp/cc1; $S/stop.sh --dir /tmp/cc2; $S/stop.sh --dir /tmp/cc3

GRANT / REVOKE warnings need CassandraAuthorizer, and the guardrails that warn
by default apply only to non-superusers; a second mode records those on a
single node started with --auth (writes cassandra_warnings_auth.json):

    $S/start.sh --dir /tmp/cc4 --address 127.0.1.4 --seeds 127.0.1.4 --heap 1G --port 9042 \
        --auth --cluster-name Auth --jmx-port 9199
    .venv/bin/python tests/python/capture_client_warnings.py --auth --host 127.0.1.4
    $S/stop.sh --dir /tmp/cc4

Every statement goes to the contact point alone (WhiteListRoundRobinPolicy,
no driver retries), so it is always the coordinator. Warnings come from
`ResponseFuture.warnings` of the python driver (protocol v5), except for
PREPARE / EXECUTE, whose warnings the driver does not expose: those cases use
a minimal native-protocol v4 client (raw_request below).

The defaults that matter (Config.java of 5.0.4; start.sh's yaml sets none of
them): batch_size_warn_threshold 5KiB, batch_size_fail_threshold 50KiB,
unlogged_batch_across_partitions_warn_threshold 10, tombstone_warn_threshold
1000, tombstone_failure_threshold 100000, read_thresholds_enabled false (so a
tombstone warning reaches the client only from a read the coordinator runs
itself), replica_filtering_protection.cached_rows_warn_threshold 2000,
user_defined_functions_warn_timeout 500ms (fail 1500ms, policy die),
materialized_views_enabled / sasi_indexes_enabled true in start.sh's yaml.
Guardrails (db/guardrails) never warn here: they skip superusers, and with
AllowAllAuthenticator every client is a superuser (ClientState.isSuper), so
e.g. zero_ttl_on_twcs_warned=true stays silent; those cases are recorded as
such.

Writes tests/golden/client_warnings/cassandra_warnings.json: a list of
{case, setup, statements, consistency, warnings, error, threshold_key, note}.
`warnings` are the warnings of the last statement of `statements` (null when
the response had none); `error` is {class, code, message} when it failed.
Node addresses in texts are normalized (nodes sorted by address -> NODE1, ...).
The run takes a few minutes: the tombstone_failure_threshold case writes
100001 tombstones (skip it with --quick).
"""
import argparse
import json
import os
import re
import struct
import sys
import time

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import FallthroughRetryPolicy, WhiteListRoundRobinPolicy
from cassandra.query import BatchStatement, BatchType, SimpleStatement

import goldens

OUT = os.path.join(goldens.GOLDEN, "client_warnings", "cassandra_warnings.json")
OUT_AUTH = os.path.join(goldens.GOLDEN, "client_warnings", "cassandra_warnings_auth.json")
ONE, QUORUM, ALL = ConsistencyLevel.ONE, ConsistencyLevel.QUORUM, ConsistencyLevel.ALL
CL_NAMES = {v: k for k, v in ConsistencyLevel.name_to_value.items()}

KS = "cw"      # SimpleStrategy RF 3
KS1 = "cw1"    # SimpleStrategy RF 1 (reads whose replica is or is not the coordinator)


# --- a minimal native protocol v4 client, for PREPARE / EXECUTE warnings -------------------------
def _string(b, i):
    n = struct.unpack(">H", b[i:i + 2])[0]
    return b[i + 2:i + 2 + n].decode("utf-8"), i + 2 + n


def _parse(flags, opcode, body):
    """(warnings or None, error (code, message) or None, body after the envelope)"""
    i = 0
    if flags & 0x02:  # tracing id
        i += 16
    warnings = None
    if flags & 0x08:
        n = struct.unpack(">H", body[i:i + 2])[0]
        i += 2
        warnings = []
        for _ in range(n):
            w, i = _string(body, i)
            warnings.append(w)
    if flags & 0x04:  # custom payload: skip
        n = struct.unpack(">H", body[i:i + 2])[0]
        i += 2
        for _ in range(n):
            _, i = _string(body, i)
            ln = struct.unpack(">i", body[i:i + 4])[0]
            i += 4 + max(ln, 0)
    rest = body[i:]
    err = None
    if opcode == 0x00:
        code = struct.unpack(">i", rest[:4])[0]
        msg, _ = _string(rest, 4)
        err = (code, msg)
    return warnings, err, rest


def raw_request(sock, kind, arg):
    """Send QUERY / PREPARE / EXECUTE on sock at CL ONE; (warnings, error, prepared id or None)."""
    if kind == "QUERY":
        q = arg.encode()
        body = struct.pack(">i", len(q)) + q + struct.pack(">HB", 1, 0)
        opcode = 0x07
    elif kind == "PREPARE":
        q = arg.encode()
        body = struct.pack(">i", len(q)) + q
        opcode = 0x09
    elif kind == "EXECUTE":
        body = struct.pack(">H", len(arg)) + arg + struct.pack(">HB", 1, 0)
        opcode = 0x0A
    else:
        raise ValueError(kind)
    sock.sendall(goldens.frame(opcode, body))
    flags, op, rbody = goldens.read_frame(sock)
    warnings, err, rest = _parse(flags, op, rbody)
    pid = None
    if op == 0x08 and struct.unpack(">i", rest[:4])[0] == 0x0004:  # RESULT Prepared
        n = struct.unpack(">H", rest[4:6])[0]
        pid = rest[6:6 + n]
    return warnings, err, pid


# --- driver helpers --------------------------------------------------------------------------------
class Recorder:
    def __init__(self, session, host, port, names):
        self.s = session
        self.host, self.port = host, port
        self.names = names
        self.cases = []

    def norm(self, text):
        if text is None:
            return None
        return re.sub(r"(?<![\d.])\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?!\d)",
                      lambda m: self.names.get(m.group(0), "CLIENT"), text)

    def run(self, stmt, cl=ONE, params=None, fetch_size=None, trace=False):
        """(warnings, error) of one statement; with trace, also its trace events (filtered)."""
        if isinstance(stmt, str):
            stmt = SimpleStatement(stmt, consistency_level=cl, fetch_size=fetch_size)
        f = self.s.execute_async(stmt, params, trace=trace)
        err = None
        try:
            f.result()
        except Exception as e:  # noqa: BLE001 - recorded
            cls, code, message = goldens.server_error(e)
            err = {"class": cls, "code": code, "message": self.norm(message)}
        w = f.warnings
        w = [self.norm(x) for x in w] if w else None
        if not trace:
            return w, err
        return w, err, self.trace_events(f)

    def trace_events(self, f):
        """Where the reads ran: the trace events about tombstones and about read messages."""
        try:
            tid = f.get_query_trace_ids()[-1]
        except Exception:  # noqa: BLE001 - an error response may carry no trace id
            return None
        sel = SimpleStatement("SELECT event_id, source, activity FROM system_traces.events WHERE session_id = %s",
                              consistency_level=ALL)
        last, stable, deadline = -1, time.time(), time.time() + 30
        while True:
            evs = list(self.s.execute(sel, [tid]))
            if len(evs) != last:
                last, stable = len(evs), time.time()
            if time.time() - stable >= 2 or time.time() > deadline:
                break
            time.sleep(0.25)
        out = []
        for e in sorted(evs, key=lambda e: (e.event_id.time, e.event_id.bytes)):
            a = e.activity
            if (("tombstone" in a and not a.startswith("Read 0 live rows and 0 tombstone")) or
                    "_REQ message received" in a or a.startswith("reading ")):
                out.append({"source": self.names.get(str(e.source), "CLIENT"), "activity": self.norm(a)})
        return out

    def setup(self, statements):
        for q in statements:
            w, err = self.run(q, ALL if q.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")) else ONE)
            assert err is None, (q, err)

    def case(self, name, statements, threshold_key, setup=(), cl=ONE, note=None, fetch_size=None,
             statement_text=None, trace=False):
        print("case", name, file=sys.stderr)
        self.setup(setup)
        if isinstance(statements, str):
            statements = [statements]
        w, err, events = None, None, None
        for q in statements:
            if trace:
                w, err, events = self.run(q, cl, fetch_size=fetch_size, trace=True)
            else:
                w, err = self.run(q, cl, fetch_size=fetch_size)
        entry = {"case": name, "setup": list(setup),
                 "statements": statement_text or list(statements),
                 "consistency": CL_NAMES[cl], "warnings": w, "error": err,
                 "threshold_key": threshold_key}
        if fetch_size is not None:
            entry["fetch_size"] = fetch_size
        if note:
            entry["note"] = note
        if trace:
            entry["trace_read_events"] = events
        self.cases.append(entry)
        return entry

    def add(self, entry):
        print("case", entry["case"], file=sys.stderr)
        self.cases.append(entry)


def key_owned_by(cluster, ks, addr, want=True, start=0):
    """The first int key >= start whose single replica (RF 1) is (or is not) addr."""
    k = start
    while True:
        reps = cluster.metadata.get_replicas(ks, struct.pack(">i", k))
        owners = {str(h.address) for h in reps}
        if (addr in owners) == want:
            return k
        k += 1


def capture_auth(args):
    """--auth: a node started with start.sh --auth (PasswordAuthenticator + CassandraAuthorizer).
    GRANT / REVOKE warnings (as the superuser cassandra) and the guardrails that warn by default, which
    only apply to ordinary (non-super) users, run as role `plain`."""
    from cassandra.auth import PlainTextAuthProvider

    def connect(user, pw):
        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([args.host]),
                                   retry_policy=FallthroughRetryPolicy(), request_timeout=120)
        c = Cluster([args.host], port=args.port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                    auth_provider=PlainTextAuthProvider(user, pw))
        for attempt in range(30):  # the default superuser appears some seconds after startup
            try:
                return c, c.connect()
            except Exception:  # noqa: BLE001
                if attempt == 29:
                    raise
                time.sleep(2)

    csu, su = connect("cassandra", "cassandra")
    nodes = [str(su.execute("SELECT broadcast_address FROM system.local").one().broadcast_address)]
    nodes += [str(r.peer) for r in su.execute("SELECT peer FROM system.peers")]
    names = {a: "NODE%d" % (i + 1) for i, a in enumerate(sorted(nodes, key=lambda a: tuple(map(int, a.split(".")))))}
    R = Recorder(su, args.host, args.port, names)
    su.execute("DROP KEYSPACE IF EXISTS g")
    su.execute("DROP ROLE IF EXISTS plain")
    su.execute("DROP ROLE IF EXISTS other")
    su.execute("DROP KEYSPACE IF EXISTS g_rf2")
    su.execute("CREATE KEYSPACE g WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    su.execute("CREATE KEYSPACE g_rf2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
    su.execute("CREATE TABLE g_rf2.f (k int, c int, a int, b int, PRIMARY KEY (k, c))")

    su.execute("CREATE ROLE plain WITH PASSWORD = 'plain' AND LOGIN = true AND SUPERUSER = false")
    su.execute("CREATE ROLE other WITH LOGIN = false")
    su.execute("GRANT ALL PERMISSIONS ON KEYSPACE g TO plain")
    su.execute("GRANT ALL PERMISSIONS ON KEYSPACE g_rf2 TO plain")
    R.case("grant_already_granted", ["GRANT SELECT ON KEYSPACE g TO other", "GRANT SELECT ON KEYSPACE g TO other"],
           "(none)", note="the second GRANT (superuser cassandra)")
    R.case("grant_partly_granted", "GRANT SELECT, MODIFY ON KEYSPACE g TO other", "(none)",
           note="SELECT was granted already, MODIFY was not")
    R.case("grant_all_again", ["GRANT ALL ON KEYSPACE g TO other", "GRANT ALL ON KEYSPACE g TO other"],
           "(none)", note="GRANT ALL on a keyspace means the keyspace's applicable permissions, not Permission.ALL, "
                          "so it warns too")
    R.case("grant_all_permissions_again", "GRANT ALL PERMISSIONS ON KEYSPACE g TO other", "(none)")
    R.case("revoke_not_granted", ["REVOKE ALL ON KEYSPACE g FROM other", "REVOKE SELECT ON KEYSPACE g FROM other"],
           "(none)")
    R.case("revoke_table_not_granted", "REVOKE SELECT, MODIFY ON TABLE g.nosuch FROM other", "(none)",
           note="an unknown table")
    R.case("revoke_all_not_granted", "REVOKE ALL ON KEYSPACE g FROM other", "(none)")
    R.case("guardrail_superuser_twcs_zero_ttl",
           "CREATE TABLE g.twcs_su (k int PRIMARY KEY, v int) WITH compaction = {'class': 'TimeWindowCompactionStrategy'}",
           "zero_ttl_on_twcs_warned", note="superuser: no guardrail")
    su_cases = R.cases
    time.sleep(3)  # permissions_validity 2s

    cpl, pl = connect("plain", "plain")
    R.s = pl
    R.cases = []
    R.case("guardrail_twcs_zero_default_ttl",
           "CREATE TABLE g.twcs (k int PRIMARY KEY, v int) WITH compaction = {'class': 'TimeWindowCompactionStrategy'}",
           "zero_ttl_on_twcs_warned (zero_ttl_on_twcs_enabled)")
    R.case("guardrail_twcs_nonzero_default_ttl_no_warning",
           "CREATE TABLE g.twcs2 (k int PRIMARY KEY, v int) WITH compaction = "
           "{'class': 'TimeWindowCompactionStrategy'} AND default_time_to_live = 60", "zero_ttl_on_twcs_warned")
    R.case("guardrail_twcs_alter_to_zero_ttl", "ALTER TABLE g.twcs2 WITH default_time_to_live = 0",
           "zero_ttl_on_twcs_warned")
    R.case("guardrail_alter_table_to_twcs",
           "ALTER TABLE g.plain_t WITH compaction = {'class': 'TimeWindowCompactionStrategy'}",
           "zero_ttl_on_twcs_warned",
           setup=["CREATE TABLE g.plain_t (k int, c int, a int, b int, s text, PRIMARY KEY (k, c))"])
    R.case("guardrail_intersect_filtering_rf2_quorum",
           "SELECT * FROM g_rf2.f WHERE a = 1 AND b = 1 ALLOW FILTERING",
           "intersect_filtering_query_warned (intersect_filtering_query_enabled)", cl=QUORUM,
           note="needs RF > 1 and a CL that reconciles; on this one-node cluster the read is then Unavailable, "
                "but the guardrail runs first")
    R.case("guardrail_intersect_filtering_rf2_one_no_warning",
           "SELECT * FROM g_rf2.f WHERE a = 1 AND b = 1 ALLOW FILTERING",
           "intersect_filtering_query_warned", cl=ONE)
    R.case("guardrail_intersect_filtering_rf1_quorum_no_warning",
           "SELECT * FROM g.plain_t WHERE a = 1 AND b = 1 ALLOW FILTERING",
           "intersect_filtering_query_warned (intersect_filtering_query_enabled)", cl=QUORUM,
           note="RF 1: a single replica needs no reconciliation at any CL")
    R.case("guardrail_intersect_filtering_one_no_warning",
           "SELECT * FROM g.plain_t WHERE a = 1 AND b = 1 ALLOW FILTERING",
           "intersect_filtering_query_warned", cl=ONE, note="CL ONE needs no reconciliation")
    R.case("guardrail_intersect_filtering_rf2_single_column_no_warning",
           "SELECT * FROM g_rf2.f WHERE a = 1 ALLOW FILTERING", "intersect_filtering_query_warned", cl=QUORUM)
    R.case("guardrail_intersect_filtering_rf2_partition_quorum",
           "SELECT * FROM g_rf2.f WHERE k = 1 AND a = 1 AND b = 1 ALLOW FILTERING",
           "intersect_filtering_query_warned", cl=QUORUM)
    R.case("guardrail_intersect_filtering_rf2_clustering_and_regular_no_warning",
           "SELECT * FROM g_rf2.f WHERE c = 1 AND a = 1 ALLOW FILTERING",
           "intersect_filtering_query_warned", cl=QUORUM)
    R.case("guardrail_sai_string_term_size",
           "INSERT INTO g.plain_t (k, c, s) VALUES (1, 1, '%s')" % ("s" * 2000),
           "sai_string_term_size_warn_threshold",
           setup=["CREATE INDEX plain_t_s ON g.plain_t (s) USING 'sai'"])
    R.case("guardrail_sai_string_term_size_1024_no_warning",
           "INSERT INTO g.plain_t (k, c, s) VALUES (1, 2, '%s')" % ("s" * 1024),
           "sai_string_term_size_warn_threshold", note="exactly 1KiB")
    R.case("guardrail_sai_string_term_size_1025",
           "INSERT INTO g.plain_t (k, c, s) VALUES (1, 3, '%s')" % ("s" * 1025),
           "sai_string_term_size_warn_threshold")
    R.case("guardrail_sai_string_term_size_fail",
           "INSERT INTO g.plain_t (k, c, s) VALUES (1, 4, '%s')" % ("s" * 9000),
           "sai_string_term_size_fail_threshold")
    R.case("guardrail_sai_frozen_term_size",
           "INSERT INTO g.fr (k, f) VALUES (1, [%s])" % ", ".join(["'%s'" % ("f" * 100)] * 12),
           "sai_frozen_term_size_warn_threshold",
           setup=["CREATE TABLE g.fr (k int PRIMARY KEY, f frozen<list<text>>)",
                  "CREATE INDEX fr_f ON g.fr (FULL(f)) USING 'sai'"])
    R.case("guardrail_sai_vector_term_size",
           "INSERT INTO g.vec (k, e) VALUES (1, [%s])" % ", ".join(["0.5"] * 4100),
           "sai_vector_term_size_warn_threshold",
           setup=["CREATE TABLE g.vec (k int PRIMARY KEY, e vector<float, 4100>)",
                  "CREATE INDEX vec_e ON g.vec (e) USING 'sai'"],
           note="4100 floats = 16400 bytes > 16KiB")
    R.case("guardrail_sai_vector_term_size_vector_index_warning_on_create",
           "CREATE INDEX vec2_e ON g.vec2 (e) USING 'sai'", "(none)",
           setup=["CREATE TABLE g.vec2 (k int PRIMARY KEY, e vector<float, 2>)"])
    R.case("plain_user_aggregate_without_partition_key", "SELECT count(*) FROM g.plain_t", "(none: always)")
    R.case("plain_user_create_keyspace_rf_over_nodes",
           "CREATE KEYSPACE g2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
           "(none: number of nodes)", note="plain has no CREATE permission on ALL KEYSPACES")
    out = {"note": "node started with start.sh --auth (one node); superuser cases as cassandra, guardrail cases as "
                   "the non-superuser role plain (ALL PERMISSIONS on keyspace g)",
           "superuser_cases": su_cases, "non_superuser_cases": R.cases}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in su_cases + R.cases:
        print("%-60s %s %s" % (c["case"], c["warnings"], c["error"]), file=sys.stderr)
    cpl.shutdown()
    csu.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.1.1")
    ap.add_argument("--port", type=int, default=9042)
    ap.add_argument("--quick", action="store_true", help="skip the 100001-tombstone case")
    ap.add_argument("--auth", action="store_true",
                    help="against a node started with start.sh --auth: GRANT/REVOKE and guardrail warnings "
                         "(default --out " + os.path.relpath(OUT_AUTH, os.getcwd()) + ")")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.auth:
        args.out = args.out or OUT_AUTH
        capture_auth(args)
        return
    args.out = args.out or OUT

    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([args.host]),
                               retry_policy=FallthroughRetryPolicy(), request_timeout=120)
    cluster = Cluster([args.host], port=args.port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    s = cluster.connect()
    nodes = [str(s.execute("SELECT broadcast_address FROM system.local").one().broadcast_address)]
    nodes += [str(r.peer) for r in s.execute("SELECT peer FROM system.peers")]
    names = {a: "NODE%d" % (i + 1) for i, a in enumerate(sorted(nodes, key=lambda a: tuple(map(int, a.split(".")))))}
    print("nodes", names, file=sys.stderr)
    R = Recorder(s, args.host, args.port, names)

    for ks in (KS, KS1, "cw_rf_simple", "cw_rf_nts", "cw_rf_nts_unknown_dc", "cw_alter", "cw_alter2",
               "cw_alter3", "cw_prep", "cw_prep2"):
        s.execute("DROP KEYSPACE IF EXISTS " + ks)
    s.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}" % KS)
    s.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % KS1)
    s.execute("CREATE TABLE cw.t (k int, c int, v text, PRIMARY KEY (k, c))")

    # ---------------------------------------------------------------- batches
    big = "x" * 3000
    R.case("batch_size_warn_logged",
           "BEGIN BATCH INSERT INTO cw.t (k, c, v) VALUES (1, 1, '%s'); "
           "INSERT INTO cw.t (k, c, v) VALUES (2, 1, '%s'); APPLY BATCH" % (big, big),
           "batch_size_warn_threshold",
           note="two partitions, two 3000-character values")
    R.case("batch_size_warn_unlogged",
           "BEGIN UNLOGGED BATCH INSERT INTO cw.t (k, c, v) VALUES (1, 2, '%s'); "
           "INSERT INTO cw.t (k, c, v) VALUES (2, 2, '%s'); APPLY BATCH" % (big, big),
           "batch_size_warn_threshold")
    R.case("batch_size_single_partition_no_warning",
           "BEGIN BATCH INSERT INTO cw.t (k, c, v) VALUES (3, 1, '%s'); "
           "INSERT INTO cw.t (k, c, v) VALUES (3, 2, '%s'); APPLY BATCH" % (big, big),
           "batch_size_warn_threshold",
           note="over 5KiB but one partition (one mutation): no warning (CASSANDRA-10876)")
    R.case("batch_size_two_tables_same_key_no_warning",
           ["CREATE TABLE IF NOT EXISTS cw.t2 (k int, c int, v text, PRIMARY KEY (k, c))",
            "BEGIN BATCH INSERT INTO cw.t (k, c, v) VALUES (4, 1, '%s'); "
            "INSERT INTO cw.t2 (k, c, v) VALUES (4, 1, '%s'); APPLY BATCH" % (big, big)],
           "batch_size_warn_threshold",
           note="two tables of one keyspace, same partition key value: one mutation, so no warning")
    huge = "y" * 27000
    R.case("batch_size_fail",
           "BEGIN BATCH INSERT INTO cw.t (k, c, v) VALUES (5, 1, '%s'); "
           "INSERT INTO cw.t (k, c, v) VALUES (6, 1, '%s'); APPLY BATCH" % (huge, huge),
           "batch_size_fail_threshold", note="over 50KiB across two partitions: an error, not a warning")
    R.case("unlogged_batch_11_partitions",
           "BEGIN UNLOGGED BATCH " + " ".join("INSERT INTO cw.t (k, c, v) VALUES (%d, 1, 'u');" % k
                                              for k in range(100, 111)) + " APPLY BATCH",
           "unlogged_batch_across_partitions_warn_threshold")
    R.case("unlogged_batch_10_partitions_no_warning",
           "BEGIN UNLOGGED BATCH " + " ".join("INSERT INTO cw.t (k, c, v) VALUES (%d, 1, 'u');" % k
                                              for k in range(200, 210)) + " APPLY BATCH",
           "unlogged_batch_across_partitions_warn_threshold", note="10 partitions: not more than the threshold")
    R.case("unlogged_batch_11_partitions_two_tables",
           "BEGIN UNLOGGED BATCH " + " ".join("INSERT INTO cw.t (k, c, v) VALUES (%d, 1, 'u');" % k
                                              for k in range(300, 306)) + " " +
           " ".join("INSERT INTO cw.t2 (k, c, v) VALUES (%d, 1, 'u');" % k for k in range(306, 311)) +
           " APPLY BATCH",
           "unlogged_batch_across_partitions_warn_threshold")
    R.case("logged_batch_11_partitions_no_warning",
           "BEGIN BATCH " + " ".join("INSERT INTO cw.t (k, c, v) VALUES (%d, 1, 'l');" % k
                                     for k in range(400, 411)) + " APPLY BATCH",
           "unlogged_batch_across_partitions_warn_threshold", note="a logged batch never gets the unlogged warning")
    b = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=ONE)
    for k in range(500, 511):
        b.add(SimpleStatement("INSERT INTO cw.t (k, c, v) VALUES (%d, 1, 'p')" % k))
    w, err = R.run(b)
    R.add({"case": "unlogged_batch_11_partitions_protocol_batch", "setup": [],
           "statements": ["<protocol BATCH message, UNLOGGED>"] +
                         ["INSERT INTO cw.t (k, c, v) VALUES (%d, 1, 'p')" % k for k in range(500, 511)],
           "consistency": "ONE", "warnings": w, "error": err,
           "threshold_key": "unlogged_batch_across_partitions_warn_threshold"})
    R.case("logged_batch_gc_grace_zero",
           "BEGIN BATCH INSERT INTO cw.gc0 (k, v) VALUES (1, 1); INSERT INTO cw.gc0 (k, v) VALUES (2, 2); APPLY BATCH",
           "gc_grace_seconds (table option)",
           setup=["CREATE TABLE cw.gc0 (k int PRIMARY KEY, v int) WITH gc_grace_seconds = 0"])
    R.case("logged_batch_gc_grace_zero_single_statement",
           "BEGIN BATCH INSERT INTO cw.gc0 (k, v) VALUES (3, 3); APPLY BATCH",
           "gc_grace_seconds (table option)")
    R.case("logged_batch_gc_grace_zero_two_tables",
           "BEGIN BATCH INSERT INTO cw.gc0 (k, v) VALUES (1, 1); INSERT INTO cw.gc0b (k, v) VALUES (2, 2); APPLY BATCH",
           "gc_grace_seconds (table option)",
           setup=["CREATE TABLE cw.gc0b (k int PRIMARY KEY, v int) WITH gc_grace_seconds = 0"])
    R.case("unlogged_batch_gc_grace_zero_no_warning",
           "BEGIN UNLOGGED BATCH INSERT INTO cw.gc0 (k, v) VALUES (1, 1); INSERT INTO cw.gc0 (k, v) VALUES (2, 2); "
           "APPLY BATCH", "gc_grace_seconds (table option)")
    R.case("logged_batch_gc_grace_zero_and_unlogged_threshold",
           "BEGIN BATCH " + " ".join("INSERT INTO cw.gc0 (k, v) VALUES (%d, 1);" % k for k in range(10, 22)) +
           " APPLY BATCH", "gc_grace_seconds (table option)", note="12 partitions, logged: only the gc_grace warning")
    R.case("unlogged_batch_size_and_partitions",
           "BEGIN UNLOGGED BATCH " + " ".join("INSERT INTO cw.t (k, c, v) VALUES (%d, 3, '%s');" % (k, "z" * 600)
                                              for k in range(600, 612)) + " APPLY BATCH",
           "batch_size_warn_threshold, unlogged_batch_across_partitions_warn_threshold",
           note="both warnings at once: their order")

    # ---------------------------------------------------------------- aggregation
    agg_setup = ["INSERT INTO cw.t (k, c, v) VALUES (1, 9, 'a')", "INSERT INTO cw.t (k, c, v) VALUES (2, 9, 'b')"]
    R.case("aggregate_without_partition_key", "SELECT count(*) FROM cw.t", "(none: always)", setup=agg_setup)
    R.case("aggregate_max_without_partition_key", "SELECT max(c) FROM cw.t", "(none: always)")
    R.case("aggregate_in_partition_keys", "SELECT count(*) FROM cw.t WHERE k IN (1, 2)", "(none: always)")
    R.case("aggregate_in_single_partition_key", "SELECT count(*) FROM cw.t WHERE k IN (1)", "(none: always)")
    R.case("aggregate_single_partition_no_warning", "SELECT count(*) FROM cw.t WHERE k = 1", "(none: always)")
    R.case("aggregate_filtering_without_partition_key",
           "SELECT count(*) FROM cw.t WHERE v = 'a' ALLOW FILTERING", "(none: always)")
    R.case("aggregate_token_restriction", "SELECT count(*) FROM cw.t WHERE token(k) > 0", "(none: always)")
    R.case("group_by_partition_key_without_restriction", "SELECT k, count(*) FROM cw.t GROUP BY k",
           "(none: always)")
    R.case("group_by_in_partition_keys", "SELECT k, count(*) FROM cw.t WHERE k IN (1, 2) GROUP BY k",
           "(none: always)")
    R.case("aggregate_count_no_warning_plain_select", "SELECT k, c FROM cw.t WHERE k IN (1, 2)", "(none: always)",
           note="IN without aggregation: no warning")
    R.case("aggregate_udf_free_writetime_no_warning", "SELECT writetime(v) FROM cw.t WHERE k = 1",
           "(none: always)")

    # ---------------------------------------------------------------- tombstones
    s.execute("CREATE TABLE cw.tomb (k int, c int, v int, PRIMARY KEY (k, c))")
    s.execute("CREATE TABLE cw1.tomb (k int, c int, v int, PRIMARY KEY (k, c))")
    dele = s.prepare("DELETE FROM cw.tomb WHERE k = ? AND c = ?")
    dele1 = s.prepare("DELETE FROM cw1.tomb WHERE k = ? AND c = ?")
    dele.consistency_level = ALL
    dele1.consistency_level = ONE
    local_key = key_owned_by(cluster, KS1, args.host, True)
    remote_key = key_owned_by(cluster, KS1, args.host, False)

    def tombstones(stmt, k, n, live=0):
        for start in range(0, n, 500):
            bb = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=stmt.consistency_level)
            for c in range(start, min(n, start + 500)):
                bb.add(stmt, (k, c))
            s.execute(bb)

    tombstones(dele, 1, 1001)
    tombstones(dele, 2, 1000)
    s.execute(SimpleStatement("INSERT INTO cw.tomb (k, c, v) VALUES (1, 5000, 1)", consistency_level=ALL))
    tombstones(dele1, local_key, 1001)
    tombstones(dele1, remote_key, 1001)
    note_rows = "1001 row deletions (DELETE ... WHERE k = ? AND c = ?) of rows that never existed, one partition"
    tnote = (" trace_read_events (filtered trace of the same request) shows where the reads ran: with "
             "read_thresholds_enabled false only a read the coordinator runs itself (not one it sends to itself "
             "as a message) warns the client")
    R.case("tombstones_1001_rf3_all", "SELECT * FROM cw.tomb WHERE k = 1", "tombstone_warn_threshold", cl=ALL,
           note=note_rows + ", plus one live row; CL ALL so the coordinator reads too." + tnote, trace=True)
    R.case("tombstones_1000_rf3_all_no_warning", "SELECT * FROM cw.tomb WHERE k = 2", "tombstone_warn_threshold",
           cl=ALL, note="exactly 1000 tombstones: not more than the threshold", trace=True)
    R.case("tombstones_1001_rf1_local_one", "SELECT * FROM cw1.tomb WHERE k = %d" % local_key,
           "tombstone_warn_threshold",
           note="RF 1, the key's replica is the coordinator (key chosen from the driver's token map)." + tnote,
           trace=True)
    R.case("tombstones_1001_rf1_remote_one", "SELECT * FROM cw1.tomb WHERE k = %d" % remote_key,
           "tombstone_warn_threshold",
           note="RF 1, the key's replica is another node: with read_thresholds_enabled false the replica's "
                "warning does not reach the client", trace=True)
    R.case("tombstones_range_rf3_all", "SELECT * FROM cw.tomb", "tombstone_warn_threshold", cl=ALL,
           note="range scan at ALL over both partitions (1001 + 1000 tombstones): the coordinator sends its own "
                "RANGE_REQ to itself as a message, so no client warning." + tnote, trace=True)
    R.case("tombstones_range_rf3_one", "SELECT * FROM cw.tomb", "tombstone_warn_threshold", cl=ONE,
           note="range scan at ONE over both partitions: tombstones are counted per read command, not per "
                "partition (2001); whether it warns depends on which replica the coordinator picks." + tnote,
           trace=True)
    R.case("tombstones_range_rf1_one", "SELECT * FROM cw1.tomb", "tombstone_warn_threshold", cl=ONE,
           note="RF 1 range scan: the coordinator scans its own ranges itself (one sub-range per read command)."
                + tnote, trace=True)
    R.case("tombstones_count_rf3_all", "SELECT count(*) FROM cw.tomb WHERE k = 1", "tombstone_warn_threshold",
           cl=ALL, trace=True)
    if not args.quick:
        k2 = key_owned_by(cluster, KS1, args.host, True, start=local_key + 1)
        print("writing 100001 tombstones", file=sys.stderr)
        tombstones(dele1, k2, 100001)
        R.case("tombstones_100001_rf1_local_one_failure", "SELECT * FROM cw1.tomb WHERE k = %d" % k2,
               "tombstone_failure_threshold", note="100001 row tombstones, replica = coordinator", trace=True)
        k3 = key_owned_by(cluster, KS1, args.host, False, start=remote_key + 1)
        tombstones(dele1, k3, 100001)
        R.case("tombstones_100001_rf1_remote_one_failure", "SELECT * FROM cw1.tomb WHERE k = %d" % k3,
               "tombstone_failure_threshold", note="100001 row tombstones, replica = another node", trace=True)

    # ---------------------------------------------------------------- replication factor
    R.case("create_keyspace_simple_rf_over_nodes",
           "CREATE KEYSPACE cw_rf_simple WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 5}",
           "(none: number of nodes)")
    R.case("create_keyspace_nts_rf_over_nodes",
           "CREATE KEYSPACE cw_rf_nts WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 5}",
           "(none: number of nodes in the DC)")
    R.case("create_keyspace_nts_unknown_dc",
           "CREATE KEYSPACE cw_rf_nts_unknown_dc WITH replication = "
           "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1, 'dc_nowhere': 5}",
           "(none: number of nodes in the DC)", note="a DC with no nodes is not warned about (nodeCount == 0)")
    R.case("create_keyspace_rf_equal_nodes_no_warning",
           "CREATE KEYSPACE cw_alter WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
           "(none)")
    R.case("alter_keyspace_raise_rf",
           "ALTER KEYSPACE cw_alter WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
           "(none: always when the full replica count grows)")
    R.case("alter_keyspace_lower_rf_no_warning",
           "ALTER KEYSPACE cw_alter WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
           "(none)")
    R.case("alter_keyspace_raise_rf_over_nodes",
           "ALTER KEYSPACE cw_alter WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 4}",
           "(none: number of nodes)")
    R.case("alter_keyspace_same_rf_over_nodes",
           "ALTER KEYSPACE cw_alter WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 4}",
           "(none: number of nodes)", note="the RF does not change but is still over the node count")
    R.case("alter_keyspace_simple_to_nts_raise",
           "ALTER KEYSPACE cw_alter2 WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 3}",
           "(none: always when the full replica count grows)",
           setup=["CREATE KEYSPACE cw_alter2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"])
    R.case("alter_keyspace_durable_writes_only",
           "ALTER KEYSPACE cw_alter2 WITH durable_writes = false", "(none)")
    R.case("alter_keyspace_nts_raise_over_nodes",
           "ALTER KEYSPACE cw_alter3 WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 5}",
           "(none: number of nodes in the DC)",
           setup=["CREATE KEYSPACE cw_alter3 WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 2}"])

    # ---------------------------------------------------------------- schema features
    R.case("create_materialized_view",
           "CREATE MATERIALIZED VIEW cw.mv AS SELECT * FROM cw.base WHERE k IS NOT NULL AND c IS NOT NULL "
           "AND v IS NOT NULL PRIMARY KEY (v, k, c)",
           "materialized_views_enabled",
           setup=["CREATE TABLE cw.base (k int, c int, v int, PRIMARY KEY (k, c))"])
    R.case("alter_materialized_view", "ALTER MATERIALIZED VIEW cw.mv WITH comment = 'x'",
           "materialized_views_enabled")
    R.case("write_base_table_with_view", "INSERT INTO cw.base (k, c, v) VALUES (1, 1, 1)",
           "materialized_views_enabled")
    R.case("drop_materialized_view", "DROP MATERIALIZED VIEW cw.mv", "materialized_views_enabled")
    R.case("create_sasi_index_full_class",
           "CREATE CUSTOM INDEX sasi_v ON cw.sasi (v) USING 'org.apache.cassandra.index.sasi.SASIIndex'",
           "sasi_indexes_enabled",
           setup=["CREATE TABLE cw.sasi (k int PRIMARY KEY, v text, w text)"])
    R.case("create_sasi_index_short_name",
           "CREATE CUSTOM INDEX sasi_w ON cw.sasi (w) USING 'SASIIndex'", "sasi_indexes_enabled",
           note="short class name")
    R.case("create_secondary_index_legacy", "CREATE INDEX t_v_idx ON cw.t (v)", "(none)")
    R.case("create_sai_index", "CREATE INDEX t2_v_sai ON cw.t2 (v) USING 'sai'", "(none)")
    R.case("create_sai_index_storageattachedindex", "CREATE CUSTOM INDEX t2_c_sai ON cw.t2 (c) USING "
           "'StorageAttachedIndex'", "(none)")
    R.case("create_sai_vector_index", "CREATE INDEX vec_e ON cw.vec (e) USING 'sai'", "(none: always for vectors)",
           setup=["CREATE TABLE cw.vec (k int PRIMARY KEY, e vector<float, 3>)"])
    vec_setup = ["INSERT INTO cw.vec (k, e) VALUES (%d, [%d.0, 1.0, 0.5])" % (k, k) for k in range(1, 7)]
    R.case("ann_query_one_no_warning", "SELECT k FROM cw.vec ORDER BY e ANN OF [1.0, 1.0, 1.0] LIMIT 3",
           "(none)", setup=vec_setup)
    R.case("ann_query_quorum", "SELECT k FROM cw.vec ORDER BY e ANN OF [1.0, 1.0, 1.0] LIMIT 3",
           "(none: consistency level)", cl=QUORUM)
    R.case("ann_query_local_quorum", "SELECT k FROM cw.vec ORDER BY e ANN OF [1.0, 1.0, 1.0] LIMIT 3",
           "(none: consistency level)", cl=ConsistencyLevel.LOCAL_QUORUM)
    R.case("ann_query_page_size_below_limit", "SELECT k FROM cw.vec ORDER BY e ANN OF [1.0, 1.0, 1.0] LIMIT 5",
           "(none: page size)", fetch_size=2)
    R.case("ann_query_quorum_and_page_size", "SELECT k FROM cw.vec ORDER BY e ANN OF [1.0, 1.0, 1.0] LIMIT 5",
           "(none)", cl=QUORUM, fetch_size=2)
    R.case("twcs_zero_default_ttl_guardrail",
           "CREATE TABLE cw.twcs (k int PRIMARY KEY, v int) WITH compaction = "
           "{'class': 'TimeWindowCompactionStrategy'}",
           "zero_ttl_on_twcs_warned",
           note="guardrail warns by default, but not for superusers: with AllowAllAuthenticator no warning")
    R.case("intersect_filtering_guardrail",
           "SELECT * FROM cw.f WHERE a = 1 AND b = 1 ALLOW FILTERING",
           "intersect_filtering_query_warned", cl=QUORUM,
           setup=["CREATE TABLE cw.f (k int, c int, a int, b int, PRIMARY KEY (k, c))",
                  "INSERT INTO cw.f (k, c, a, b) VALUES (1, 1, 1, 1)"],
           note="guardrail warned=true by default, but skipped for superusers")
    R.case("sai_string_term_size_guardrail",
           "INSERT INTO cw.t2 (k, c, v) VALUES (1, 1, '%s')" % ("s" * 2000),
           "sai_string_term_size_warn_threshold",
           note="1KiB warn threshold; the guardrail gets the client state, so superusers skip it")

    # ---------------------------------------------------------------- TTL
    R.case("ttl_max_630720000",
           "INSERT INTO cw.t (k, c, v) VALUES (700, 1, 'x') USING TTL 630720000", "(none: max TTL 20 years)",
           note="storage_compatibility_mode (unset: CASSANDRA_4) caps expiration at 2038; the default "
                "expiration-date overflow policy is REJECT (an error), CAP would warn")
    R.case("ttl_over_max", "INSERT INTO cw.t (k, c, v) VALUES (701, 1, 'x') USING TTL 630720001",
           "(none: max TTL 20 years)")
    R.case("ttl_below_2038_no_warning", "INSERT INTO cw.t (k, c, v) VALUES (702, 1, 'x') USING TTL 31536000",
           "(none)")
    R.case("default_ttl_max",
           "CREATE TABLE cw.dttl (k int PRIMARY KEY, v int) WITH default_time_to_live = 630720000", "(none)")
    R.case("default_ttl_max_insert", "INSERT INTO cw.dttl (k, v) VALUES (1, 1)", "(none)")
    R.case("storage_compatibility_mode_setting",
           "SELECT name, value FROM system_views.settings WHERE name = 'storage_compatibility_mode'", "(none)")

    # ---------------------------------------------------------------- settings virtual table
    R.case("settings_deprecated_name",
           "SELECT * FROM system_views.settings WHERE name = 'audit_logging_options_enabled'", "(none)")
    R.case("settings_deprecated_name_in",
           "SELECT * FROM system_views.settings WHERE name IN ('audit_logging_options_enabled', "
           "'server_encryption_options_protocol')", "(none)")
    R.case("settings_new_name_no_warning",
           "SELECT * FROM system_views.settings WHERE name = 'audit_logging_options.enabled'", "(none)")
    R.case("settings_renamed_yaml_key_no_warning",
           "SELECT * FROM system_views.settings WHERE name = 'tracetype_query_ttl'", "(none)",
           note="an old yaml name (@Replaces): not a 'deprecated key' of the settings table")

    # ---------------------------------------------------------------- replica filtering protection
    s.execute("CREATE TABLE cw.rfp (k int, c int, v int, PRIMARY KEY (k, c))")
    ins = s.prepare("INSERT INTO cw.rfp (k, c, v) VALUES (?, ?, ?)")
    ins.consistency_level = ALL
    for start in range(0, 1100, 100):
        bb = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=ALL)
        for c in range(start, start + 100):
            bb.add(ins, (1, c, 1))
        s.execute(bb)
    R.case("replica_filtering_protection_cached_rows",
           "SELECT * FROM cw.rfp WHERE v = 1 ALLOW FILTERING", "replica_filtering_protection.cached_rows_warn_threshold",
           cl=QUORUM, note="1100 matching rows in one partition, RF 3, QUORUM range read with filtering: "
                           "2 replicas x 1100 cached rows > 2000")
    R.case("replica_filtering_protection_one_no_warning",
           "SELECT * FROM cw.rfp WHERE v = 1 ALLOW FILTERING", "replica_filtering_protection.cached_rows_warn_threshold",
           cl=ONE, note="CL ONE needs no reconciliation: no protection, no warning")

    # ---------------------------------------------------------------- USE + prepared statements
    for ks in ("cw_prep", "cw_prep2"):
        s.execute("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}" % ks)
        s.execute("CREATE TABLE %s.p (k int PRIMARY KEY, v int)" % ks)
    sock = goldens.connect_v4(args.host, args.port, timeout=60)
    steps = []
    for kind, arg in (("QUERY", "USE cw_prep"), ("PREPARE", "SELECT * FROM p WHERE k = 1"),
                      ("PREPARE", "SELECT v FROM p WHERE k = 1"), ("PREPARE", "SELECT * FROM cw_prep.p")):
        w, err, pid = raw_request(sock, kind, arg)
        steps.append({"request": kind, "statement": arg, "warnings": w,
                      "error": {"code": err[0], "message": err[1]} if err else None})
        if arg == "SELECT * FROM p WHERE k = 1":
            unqualified_id = pid
    sock.close()
    R.add({"case": "prepare_unqualified_after_use", "setup": [], "requests": steps,
           "statements": [x["statement"] for x in steps], "consistency": "ONE",
           "warnings": steps[1]["warnings"], "error": None, "threshold_key": "(none: once per connection)",
           "note": "native protocol v4, one connection: USE, then PREPARE of an unqualified statement (warned), "
                   "a second unqualified one (not warned again on the same connection), a qualified one"})
    sock = goldens.connect_v4(args.host, args.port, timeout=60)
    steps = []
    for kind, arg in (("QUERY", "USE cw_prep2"), ("EXECUTE", unqualified_id), ("EXECUTE", unqualified_id)):
        w, err, _ = raw_request(sock, kind, arg)
        steps.append({"request": kind, "statement": arg if isinstance(arg, str) else
                      "<id of 'SELECT * FROM p WHERE k = 1' prepared in cw_prep>", "warnings": w,
                      "error": {"code": err[0], "message": err[1]} if err else None})
    sock.close()
    R.add({"case": "execute_unqualified_prepared_in_other_keyspace", "setup": [], "requests": steps,
           "statements": [x["statement"] for x in steps], "consistency": "ONE",
           "warnings": steps[1]["warnings"], "error": None, "threshold_key": "(none: once per connection)",
           "note": "a new connection USEs cw_prep2 and EXECUTEs the id prepared (unqualified) under cw_prep"})

    # ---------------------------------------------------------------- user-defined function warn timeout
    s.execute("CREATE TABLE cw.udfin (k int PRIMARY KEY, n bigint)")
    s.execute("INSERT INTO cw.udfin (k, n) VALUES (1, 1)")
    n, entry = 1000000, None
    try:
        s.execute("CREATE FUNCTION cw.spin (n bigint) RETURNS NULL ON NULL INPUT RETURNS double LANGUAGE java AS "
                  "'double s = 0; for (long i = 0; i < n; i++) { s += Math.sqrt((double) i); } return s;'")
    except Exception as e:
        # a server without Java UDFs (replaying this script against Sibyl)
        cls, code, message = goldens.server_error(e)
        R.add({"case": "udf_warn_timeout", "setup": [], "statements": ["CREATE FUNCTION cw.spin ..."],
               "consistency": "ONE", "warnings": None, "error": {"class": cls, "code": code, "message": message},
               "threshold_key": "user_defined_functions_warn_timeout"})
        n = 10 ** 12
    while n < 10 ** 12:
        t0 = time.time()
        w, err = R.run("SELECT cw.spin(%d) FROM cw.udfin WHERE k = 1" % n)
        took = time.time() - t0
        print("  spin(%d): %.3f s, warnings %s, error %s" % (n, took, w, err), file=sys.stderr)
        if w or err:
            entry = {"case": "udf_warn_timeout", "setup": [
                "CREATE TABLE cw.udfin (k int PRIMARY KEY, n bigint)", "INSERT INTO cw.udfin (k, n) VALUES (1, 1)",
                "CREATE FUNCTION cw.spin (n bigint) RETURNS NULL ON NULL INPUT RETURNS double LANGUAGE java AS "
                "'double s = 0; for (long i = 0; i < n; i++) { s += Math.sqrt((double) i); } return s;'"],
                "statements": ["SELECT cw.spin(%d) FROM cw.udfin WHERE k = 1" % n], "consistency": "ONE",
                "warnings": w, "error": err, "threshold_key": "user_defined_functions_warn_timeout",
                "note": "the loop count is calibrated at capture time (doubled until the call runs over "
                        "500ms; the fail timeout, 1500ms, would stop the node)"}
            break
        if took > 0.45:
            n = int(n * 1.3)
        else:
            n *= 2
    if entry:
        R.add(entry)

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(R.cases, f, indent=1)
        f.write("\n")
    for c in R.cases:
        print("%-50s %s %s" % (c["case"], c["warnings"], c["error"]), file=sys.stderr)
    cluster.shutdown()


if __name__ == "__main__":
    main()

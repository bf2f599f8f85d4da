"""Incremental repair (issue 17, item 4) and a rolling upgrade of the
internode messaging version (item 5), on real `sibyl` processes started by
`sibyl cluster`.

Incremental repair is `nodetool repair`'s default, as in Cassandra 4+: each
replica sets its unrepaired data of the ranges aside (anticompaction), only
that is compared and streamed, and it is marked repaired when every range
succeeded. Repaired data is not compared again: what a replica loses of it
is restored by `-full`, not by another incremental repair (Cassandra's
semantics)."""
import glob
import json
import os

from cassandra import ConsistencyLevel

from local_cluster import cluster_factory, wait_for  # noqa: F401
from test_topology import connect_only, missing_alone, q, states


def tablestats(lc, node, table):
    """The table's figures from `nodetool tablestats -F json`."""
    ks, t = table.split(".")
    doc = json.loads(lc.nodetool(node, "tablestats", "-F", "json", table))
    return doc[ks]["tables"][t]


def summary_of(out):
    line = [l for l in out.splitlines() if "Repair summary" in l][0]
    partitions = int(line.split(" streams, ")[1].split(" partitions")[0])
    out_of_sync = int(line.split(" leaves out of sync")[0].rsplit(" ", 1)[1])
    return partitions, out_of_sync


def sstable_states(lc, node, ks, table):
    """repaired_at / pending_repair of each SSTable of a table on disk."""
    out = []
    pattern = f"{lc.dir}/node{node}/data/data/{ks}/{table}-*/sb-*-Statistics.db"
    for p in glob.glob(pattern):
        s = json.load(open(p))
        out.append((s.get("repaired_at", 0), s.get("pending_repair")))
    return out


def write_rows(session, table, keys, cl=ConsistencyLevel.QUORUM):
    ins = session.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?)")
    ins.consistency_level = cl
    for k in keys:
        session.execute(ins, [k, k])


def test_incremental_repair_marks_data_repaired_and_compares_only_the_rest(cluster_factory):
    lc = cluster_factory(3, extra=("hinted_handoff_enabled=false",))
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE ir WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE ir.t (k int PRIMARY KEY, v int)")
        write_rows(s1, "ir.t", range(2000), cl=ConsistencyLevel.ALL)
        for n in (1, 2, 3):
            assert tablestats(lc, n, "ir.t")["bytes_repaired"] == 0
        # the first incremental repair: everything unrepaired is compared
        # (all in sync) and marked repaired on every replica
        out = lc.nodetool(1, "repair", "ir", "t")
        assert "incremental: true" in out and "Repair completed successfully" in out, out
        assert summary_of(out) == (0, 0), out
        for n in (1, 2, 3):
            st = tablestats(lc, n, "ir.t")
            assert st["percent_repaired"] == 100.0 and st["bytes_unrepaired"] == 0, st
            assert st["bytes_pending_repair"] == 0 and st["bytes_repaired"] > 0, st
            states_on_disk = sstable_states(lc, n, "ir", "t")
            assert states_on_disk and all(at > 0 and p is None for at, p in states_on_disk), states_on_disk
        text = lc.nodetool(2, "tablestats", "ir.t")
        assert "\t\tPercent repaired: 100.0\n" in text, text
        # node3 misses 500 writes (no hints): only they are unrepaired
        lc.run("stop", "node3")
        wait_for("node3 down", lambda: states(lc, 1).get("127.0.0.3") == "DN", timeout=60)
        write_rows(s1, "ir.t", range(2000, 2500))
        lc.run("start", "node3")
        wait_for("node3 up", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=60)
        out = lc.nodetool(3, "repair", "ir", "t")
        partitions, out_of_sync = summary_of(out)
        # node3 pulls the 500 from both others; the 2,000 repaired rows are
        # not compared again (a full repair's leaves would cover them too)
        assert 500 <= partitions <= 1000 and out_of_sync > 0, out
        for n in (1, 2, 3):
            st = tablestats(lc, n, "ir.t")
            assert st["percent_repaired"] == 100.0, (n, st)
        # repaired data a replica loses is not seen by incremental repair
        # (drained first: its commit log holds nothing to replay)
        lc.nodetool(3, "drain")
        lc.run("stop", "node3")
        for f in glob.glob(f"{lc.dir}/node3/data/data/ir/t-*/sb-*"):
            os.remove(f)
        lc.run("start", "node3")
        wait_for("node3 up", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=60)
        out = lc.nodetool(3, "repair", "ir", "t")
        assert summary_of(out) == (0, 0), out
        # ... and is restored by a full repair; what it streams keeps its
        # repaired status, as Cassandra's streams do (checked against a real
        # 3-node Cassandra 5.0.4: node3 100% repaired after -full), so the
        # next incremental repair has nothing to compare
        out = lc.nodetool(3, "repair", "-full", "ir", "t")
        assert "incremental: false" in out and summary_of(out)[0] >= 2500, out
        st = tablestats(lc, 3, "ir.t")
        assert st["percent_repaired"] == 100.0 and st["bytes_repaired"] > 0, st
        out = lc.nodetool(1, "repair", "ir", "t")
        assert summary_of(out) == (0, 0), out
        parents = {p.options["incremental"] for p in q(s1, "SELECT options FROM system_distributed.parent_repair_history")}
        assert parents == {"true", "false"}, parents
    finally:
        c1.shutdown()
    lc.run("stop", "node1", "node2")
    assert missing_alone(lc, 3, "ir.t", range(2500)) == []


def test_a_node_held_at_the_old_messaging_version_joins_and_comes_back(cluster_factory):
    """A rolling upgrade: node3 runs held at messaging version 2 (the
    previous format) among nodes at 3. Reads and writes at QUORUM go on,
    repair falls back to a full repair (the old version has no incremental
    repair verbs), and once node3 speaks 3 again incremental repair works."""
    lc = cluster_factory(3, extra=("hinted_handoff_enabled=false",))
    lc.run("start", "node1", "node2")
    lc.run("start", "node3", "--", "-Dsibyl.messaging_version=2")
    wait_for("three up", lambda: sorted(states(lc, 1).values()) == ["UN"] * 3, timeout=90)
    log3 = open(f"{lc.dir}/node3/sibyl.log").read()
    assert "Speaking internode messaging version 2 at most" in log3
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE up WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE up.t (k int PRIMARY KEY, v int)")
        write_rows(s1, "up.t", range(1000))
        out = lc.nodetool(1, "repair", "up", "t")
        assert "speaks messaging version 2, older than incremental repair needs (3): running a full repair" in out, out
        assert "incremental: false" in out and "Repair completed successfully" in out, out
        assert tablestats(lc, 1, "up.t")["bytes_repaired"] == 0
        # node3 back on the current version
        lc.run("stop", "node3")
        lc.run("start", "node3")
        wait_for("node3 up", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=60)
        write_rows(s1, "up.t", range(1000, 1200))
        out = wait_for_incremental(lc)
        assert "incremental: true" in out and "Repair completed successfully" in out, out
        for n in (1, 2, 3):
            assert tablestats(lc, n, "up.t")["percent_repaired"] == 100.0
    finally:
        c1.shutdown()
    lc.run("stop", "node1", "node2")
    assert missing_alone(lc, 3, "up.t", range(1200)) == []


def wait_for_incremental(lc):
    """Repairs until node1's connections to node3 are remade at version 3
    (they reconnect when node3 restarts)."""
    outs = []

    def attempt():
        out = lc.nodetool(1, "repair", "up", "t")
        outs.append(out)
        return "incremental: true" in out

    wait_for("an incremental repair", attempt, timeout=60, every=2)
    return outs[-1]


def test_automatic_repair_restores_a_node_pauses_while_one_is_down_and_is_visible(cluster_factory):
    """Every node repairs its primary ranges of each replicated table once
    per auto_repair_interval: node3 missed writes (no hints) and gets them
    back without an operator; while a node is down the scheduler pauses and
    says so in nodetool and in metrics."""
    import urllib.request
    lc = cluster_factory(3, extra=("hinted_handoff_enabled=false", "auto_repair_enabled=true",
                                   "auto_repair_interval=3s"))
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE ar WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE ar.t (k int PRIMARY KEY, v int)")
        lc.run("stop", "node3")
        wait_for("node3 down", lambda: states(lc, 1).get("127.0.0.3") == "DN", timeout=60)
        write_rows(s1, "ar.t", range(300))
        wait_for("paused", lambda: "paused (/127.0.0.3 down)" in lc.nodetool(1, "autorepairstatus"), timeout=30)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{lc.admin_port}/metrics", timeout=30).read().decode()
        paused = [l for l in metrics.splitlines() if "autorepair" in l.lower() and "paused" in l.lower()
                  and not l.startswith("#")]
        assert paused and paused[0].rstrip().endswith(("1", "1.0")), paused
        back = __import__("time").time() * 1000
        lc.run("start", "node3")
        wait_for("node3 up", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=60)

        def repaired_everywhere():
            for n in (1, 2, 3):
                t = [t for t in lc.admin(n, "/autorepair")["tables"] if (t["keyspace"], t["table"]) == ("ar", "t")]
                if not t or (t[0]["last_repaired_ms"] or 0) < back:
                    return False
            return True

        wait_for("ar.t auto-repaired by every node", repaired_everywhere, timeout=120, every=1)
        status = lc.nodetool(2, "autorepairstatus")
        assert "Interval: 3 seconds, incremental" in status, status
        row = [l for l in status.splitlines() if l.startswith("ar ")][0]
        assert " ago " in row + " " and "never" not in row, status
        lc.nodetool(1, "setautorepairconfig", "enabled", "false")
        assert "Auto repair: disabled" in lc.nodetool(1, "autorepairstatus")
    finally:
        c1.shutdown()
    lc.run("stop", "node1", "node2")
    assert missing_alone(lc, 3, "ar.t", range(300)) == []


def test_a_session_whose_coordinator_dies_is_failed_after_the_timeout(cluster_factory):
    """The coordinator of an incremental repair is killed after the others
    set their data aside: with -Dcassandra.repair_fail_timeout_seconds the
    participants fail the session themselves, and what was pending is
    unrepaired again (Cassandra's LocalSessions auto-fail)."""
    import subprocess
    import threading
    lc = cluster_factory(3, extra=("hinted_handoff_enabled=false",))
    lc.run("start", "node1")
    for n in (2, 3):
        lc.run("start", f"node{n}", "--", "-Dcassandra.repair_fail_timeout_seconds=8")
    wait_for("three up", lambda: sorted(states(lc, 1).values()) == ["UN"] * 3, timeout=90)
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE orph WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE orph.t (k int PRIMARY KEY, v int, pad text)")
        lc.run("stop", "node3")
        wait_for("node3 down", lambda: states(lc, 1).get("127.0.0.3") == "DN", timeout=60)
        ins = s1.prepare(f"INSERT INTO orph.t (k, v, pad) VALUES (?, ?, '{'x' * 300}')")
        ins.consistency_level = ConsistencyLevel.QUORUM
        for k in range(3000):
            s1.execute(ins, [k, k])
    finally:
        c1.shutdown()
    lc.run("start", "node3", "--", "-Dcassandra.repair_fail_timeout_seconds=8")
    wait_for("node3 up", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=60)
    # slow streams, so that the session is still running when node1 dies
    for n in (1, 2, 3):
        lc.nodetool(n, "setstreamthroughput", "1")
    repair = threading.Thread(target=lambda: lc.nodetool(1, "repair", "orph", "t", check=False), daemon=True)
    repair.start()
    wait_for("node2's data set aside", lambda: tablestats(lc, 2, "orph.t")["bytes_pending_repair"] > 0,
             timeout=60, every=0.2)
    lc.run("kill", "node1")
    assert tablestats(lc, 2, "orph.t")["bytes_pending_repair"] > 0
    for n in (2, 3):
        wait_for(f"node{n} fails the session", lambda n=n: tablestats(lc, n, "orph.t")["bytes_pending_repair"] == 0,
                 timeout=60, every=1)
        st = tablestats(lc, n, "orph.t")
        assert st["bytes_repaired"] == 0, st
        # node2 was prepared and set data aside (checked above). node1
        # prepares its participants one after the other and may die before
        # node3's turn; node3 also missed the writes and holds only what was
        # streamed to it meanwhile: it may have had no session and nothing
        # to give back
        if n == 2:
            assert st["bytes_unrepaired"] > 0, st
            assert "Auto failing timed out repair session" in open(f"{lc.dir}/node{n}/sibyl.log").read()
    repair.join(timeout=30)

"""Topology operations on real `sibyl` processes started by `sibyl cluster`
(issue 17): bootstrap with streaming (and writes reaching the joining node
as a pending replica), decommission under write load, removenode of a dead
node. Every row is checked afterwards, on the node that received it alone."""
import os
import threading
import re
import time

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import FallthroughRetryPolicy, WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from local_cluster import cluster_factory, status_lines, wait_for  # noqa: F401


def q(session, cql, cl=ConsistencyLevel.QUORUM):
    return session.execute(SimpleStatement(cql, consistency_level=cl))


def connect_only(lc, node):
    """A session whose requests all go to `node` (no retries elsewhere)."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([f"127.0.0.{node}"]),
                               retry_policy=FallthroughRetryPolicy(), request_timeout=30)
    return lc.connect(node, execution_profiles={EXEC_PROFILE_DEFAULT: profile})


def states(lc, node):
    """address -> two-letter status (UN, UJ, DN, ...) as node's nodetool shows it."""
    out = {}
    for line in status_lines(lc.nodetool(node, "status")):
        parts = line.split()
        out[parts[1]] = parts[0]
    return out


class Writer:
    """Writes k = v at `cl` through `session` in a thread; keeps the acked keys."""

    def __init__(self, session, table, start, cl=ConsistencyLevel.QUORUM):
        self.session, self.table, self.i, self.cl = session, table, start, cl
        self.acked, self.failed, self.errors = [], 0, []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            try:
                q(self.session, f"INSERT INTO {self.table} (k, v) VALUES ({self.i}, {self.i})", cl=self.cl)
                self.acked.append(self.i)
            except Exception as e:
                self.failed += 1
                self.errors.append(repr(e))
                time.sleep(0.05)
            self.i += 1

    def finish(self):
        self.stop.set()
        self.t.join(timeout=60)
        return self.acked


def peers_of(lc, node):
    """The addresses in `node`'s system.peers and system.peers_v2 (which
    must agree)."""
    c, s = connect_only(lc, node)
    try:
        v1 = {str(r.peer) for r in q(s, "SELECT peer FROM system.peers", cl=ConsistencyLevel.ONE)}
        v2 = {str(r.peer) for r in q(s, "SELECT peer FROM system.peers_v2", cl=ConsistencyLevel.ONE)}
        assert v1 == v2, (v1, v2)
        return v1
    finally:
        c.shutdown()


def missing_alone(lc, node, table, keys):
    """Keys `node` does not have when it answers alone (the others stopped
    by the caller): single-partition reads at ONE served by its own replica."""
    c, s = connect_only(lc, node)
    try:
        prepared = s.prepare(f"SELECT v FROM {table} WHERE k = ?")
        prepared.consistency_level = ConsistencyLevel.ONE
        return [k for k in keys if (r := s.execute(prepared, [k]).one()) is None or r.v != k]
    finally:
        c.shutdown()


def test_bootstrap_streams_existing_rows_and_takes_writes_while_joining(cluster_factory):
    lc = cluster_factory(3, extra=("stream_throughput_outbound=0",))
    lc.run("start", "node1")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE b WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE b.t (k int PRIMARY KEY, v int)")
        ins = s1.prepare("INSERT INTO b.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ONE
        loaded = list(range(3000))
        for k in loaded:
            s1.execute(ins, [k, k])
        # a delete before the bootstrap must travel as a tombstone
        q(s1, "DELETE FROM b.t WHERE k = 7", cl=ConsistencyLevel.ONE)
        loaded.remove(7)
        lc.run("start", "node2")
        wait_for("node2 normal", lambda: states(lc, 1).get("127.0.0.2") == "UN", timeout=60)
        # node3 bootstraps while a writer at ONE goes on through node1
        w = Writer(s1, "b.t", 100_000, cl=ConsistencyLevel.ONE)
        time.sleep(0.5)
        lc.run("start", "node3")
        wait_for("node3 normal", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=60)
        time.sleep(0.5)
        acked = w.finish()
        assert len(acked) > 50 and w.failed == 0, (len(acked), w.failed)
        log3 = open(f"{lc.dir}/node3/sibyl.log").read()
        assert "bootstrap complete" in log3, log3[-3000:]
        assert "JOINING: streaming" in log3
        # Cassandra's words in node3's system.log: the start, and the
        # tokens as a Java list
        system3 = open(f"{lc.dir}/node3/data/logs/system.log").read()
        assert "- JOINING: Starting to bootstrap..." in system3
        assert re.search(r"- Bootstrap completed for tokens \[-?\d+(, -?\d+){15}\]$", system3, re.M), system3[-3000:]
    finally:
        c1.shutdown()
    # node3 alone has every row written before and during its bootstrap,
    # and not the deleted one
    lc.run("stop", "node1", "node2")
    missing = missing_alone(lc, 3, "b.t", loaded + acked)
    assert missing == [], f"{len(missing)} rows missing on node3, e.g. {missing[:10]}"
    c3, s3 = connect_only(lc, 3)
    try:
        assert q(s3, "SELECT v FROM b.t WHERE k = 7", cl=ConsistencyLevel.ONE).one() is None
    finally:
        c3.shutdown()


def test_decommission_under_quorum_writes_loses_nothing(cluster_factory):
    lc = cluster_factory(4)
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE d.t (k int PRIMARY KEY, v int)")
        ins = s1.prepare("INSERT INTO d.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.QUORUM
        for k in range(2000):
            s1.execute(ins, [k, k])
        w = Writer(s1, "d.t", 100_000)
        out = lc.nodetool(4, "decommission")
        acked = w.finish()
        assert w.failed == 0, (w.failed, out)
        wait_for("node4 gone from the ring", lambda: "127.0.0.4" not in states(lc, 1), timeout=30)
        assert set(states(lc, 1).values()) == {"UN"}
        for n in (1, 2, 3):
            assert "127.0.0.4" not in peers_of(lc, n), n
        wait_for("node4 stopped", lambda: "DOWN" in lc.run("status").stdout.split("node4")[1].splitlines()[0],
                 timeout=60)
        # every acknowledged row at QUORUM and at ALL from what is left
        sel = s1.prepare("SELECT v FROM d.t WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.ALL
        keys = list(range(2000)) + acked
        bad = [k for k in keys if (r := s1.execute(sel, [k]).one()) is None or r.v != k]
        assert bad == [], f"{len(bad)} rows lost, e.g. {bad[:10]}"
        log4 = open(f"{lc.dir}/node4/sibyl.log").read()
        assert "DECOMMISSIONED" in log4
        system4 = open(f"{lc.dir}/node4/data/logs/system.log").read()
        for line in ("LEAVING: replaying batch log and streaming data to other nodes",
                     "LEAVING: streaming hints to other nodes", "DECOMMISSIONED"):
            assert re.search(rf"- {line}$", system4, re.M), line
        # started again, it refuses to rejoin, in Cassandra's words
        again = lc.run("start", "node4", check=False)
        assert again.returncode != 0
        log4 = open(f"{lc.dir}/node4/sibyl.log").read()
        assert ("This node was decommissioned and will not rejoin the ring unless "
                "-Dcassandra.override_decommission=true has been set, or all existing data is removed "
                "and the node is bootstrapped again") in log4
        assert "127.0.0.4" not in states(lc, 1)
    finally:
        c1.shutdown()
    # with RF 3 on 3 nodes each node has everything: node2 alone
    lc.run("stop", "node1", "node3")
    missing = missing_alone(lc, 2, "d.t", list(range(2000)) + acked)
    assert missing == [], f"{len(missing)} rows missing on node2, e.g. {missing[:10]}"


def test_removenode_rereplicates_a_dead_nodes_ranges(cluster_factory):
    lc = cluster_factory(4)
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE r WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
        q(s1, "CREATE TABLE r.t (k int PRIMARY KEY, v int)")
        ins = s1.prepare("INSERT INTO r.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ALL
        for k in range(2000):
            s1.execute(ins, [k, k])
        host4 = [l.split()[-2] for l in status_lines(lc.nodetool(1, "status")) if " 127.0.0.4 " in l][0]
        refused = lc.nodetool(1, "removenode", host4, check=False)
        assert refused.returncode != 0 and "is alive and owns this ID" in refused.stdout + refused.stderr
        q(s1, "CREATE KEYSPACE r3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE r3.t (k int PRIMARY KEY, v int)")
        lc.run("stop", "node4")
        wait_for("node4 down", lambda: states(lc, 1).get("127.0.0.4") == "DN", timeout=60)
        # a QUORUM writer goes on while node4's ranges are re-replicated
        w = Writer(s1, "r3.t", 0)
        time.sleep(0.5)
        lc.nodetool(1, "removenode", host4)
        time.sleep(0.5)
        acked = w.finish()
        assert len(acked) > 50 and w.failed == 0, (len(acked), w.errors[:3])
        assert "127.0.0.4" not in states(lc, 1)
        assert "127.0.0.4" not in states(lc, 2)
        # drivers find nodes in system.peers: the removed node is gone from
        # it on every node (Cassandra's SystemKeyspace.removeEndpoint)
        for n in (1, 2, 3):
            assert peers_of(lc, n) == {f"127.0.0.{m}" for m in (1, 2, 3) if m != n}, n
        sel3 = s1.prepare("SELECT v FROM r3.t WHERE k = ?")
        sel3.consistency_level = ConsistencyLevel.ALL
        lost = [k for k in acked if (r := s1.execute(sel3, [k]).one()) is None or r.v != k]
        assert lost == [], f"{len(lost)} acknowledged writes lost, e.g. {lost[:10]}"
        # RF 2 on three nodes again: every row readable at ALL
        sel = s1.prepare("SELECT v FROM r.t WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.ALL
        bad = [k for k in range(2000) if (r := s1.execute(sel, [k]).one()) is None or r.v != k]
        assert bad == [], f"{len(bad)} rows unreadable at ALL, e.g. {bad[:10]}"
        removed = "".join(open(f"{lc.dir}/node{n}/sibyl.log").read() for n in (1, 2, 3))
        assert "Removenode session" in removed
    finally:
        c1.shutdown()


def test_repair_after_a_long_outage_restores_every_row_at_the_stream_throttle(cluster_factory):
    """Hints off (the node was down past the hint window); node3 misses
    writes to two tables; `nodetool repair ks t1` on node3 with the sources
    throttled to 4 megabits/s (500,000 B/s) restores t1 only, at no more than the throttle."""
    lc = cluster_factory(3, extra=("hinted_handoff_enabled=false",))
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE rp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        for t in ("t1", "t2"):
            q(s1, f"CREATE TABLE rp.{t} (k int PRIMARY KEY, v int, pad text)")
        lc.run("stop", "node3")
        wait_for("node3 down", lambda: states(lc, 1).get("127.0.0.3") == "DN", timeout=60)
        pad = "x" * 300
        for t in ("t1", "t2"):
            ins = s1.prepare(f"INSERT INTO rp.{t} (k, v, pad) VALUES (?, ?, '{pad}')")
            ins.consistency_level = ConsistencyLevel.QUORUM
            for k in range(3000):
                s1.execute(ins, [k, k])
        lc.run("start", "node3")
        wait_for("node3 up", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=60)
        # 4 megabits/s: 500,000 bytes a second
        for n in (1, 2, 3):
            lc.nodetool(n, "setstreamthroughput", "4")
        assert "Current stream throughput: 4 Mb/s" in lc.nodetool(1, "getstreamthroughput")
        started = time.time()
        out = lc.nodetool(3, "repair", "-full", "rp", "t1")
        took = time.time() - started
        assert "Starting repair command #1" in out and "Repair completed successfully" in out, out
        summary = [l for l in out.splitlines() if "Repair summary" in l][0]
        streamed = int(summary.split(" partitions and ")[1].split(" bytes")[0])
        partitions = int(summary.split(" streams, ")[1].split(" partitions")[0])
        # node3 pulled the 3000 rows from node1 and from node2
        assert partitions >= 3000, summary
        # two sources at 500,000 B/s each: at most 1,000,000 B/s in all
        # (with a page of slack per source)
        rate = streamed / took
        assert rate <= 1.25 * 1024 * 1024, (rate, streamed, took, summary)
        # a second repair finds nothing out of sync
        again = lc.nodetool(3, "repair", "rp", "t1")
        assert " 0 leaves out of sync" in again, again
        # both repairs are in system_distributed, as Cassandra records them
        parents = list(q(s1, "SELECT * FROM system_distributed.parent_repair_history"))
        assert len(parents) == 2, parents
        for p in parents:
            assert p.keyspace_name == "rp" and p.columnfamily_names == {"t1"}, p
            assert p.finished_at is not None and p.exception_message is None, p
            assert p.successful_ranges == p.requested_ranges and len(p.requested_ranges) > 0, p
        # the first was -full, the second incremental (nodetool's default)
        assert sorted(p.options["incremental"] for p in parents) == ["false", "true"], parents
        sessions = list(q(s1, "SELECT * FROM system_distributed.repair_history "
                              "WHERE keyspace_name = 'rp' AND columnfamily_name = 't1'"))
        assert len(sessions) == sum(len(p.requested_ranges) for p in parents), len(sessions)
        for r in sessions:
            assert r.status == "SUCCESS" and r.finished_at >= r.started_at, r
            assert str(r.coordinator) == "127.0.0.3" and r.coordinator_port == lc.storage_port, r
            assert {str(a) for a in r.participants} == {"127.0.0.1", "127.0.0.2", "127.0.0.3"}, r
            assert r.parent_id in {p.parent_id for p in parents}
            assert f"({r.range_begin},{r.range_end}]" in next(
                p for p in parents if p.parent_id == r.parent_id).requested_ranges
    finally:
        c1.shutdown()
    lc.run("stop", "node1", "node2")
    assert missing_alone(lc, 3, "rp.t1", range(3000)) == []
    # t2 was not repaired: node3 alone lacks its rows
    assert len(missing_alone(lc, 3, "rp.t2", range(0, 3000, 100))) == 30


def test_three_to_four_nodes_then_cleanup_frees_what_moved(cluster_factory):
    lc = cluster_factory(4, extra=("stream_throughput_outbound=0",))
    lc.run("start", "node1", "node2", "node3")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE cu WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        q(s1, "CREATE TABLE cu.t (k int PRIMARY KEY, v text)")
        ins = s1.prepare("INSERT INTO cu.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ONE
        for k in range(4000):
            s1.execute(ins, [k, "v" * 200])
        for n in (1, 2, 3):
            lc.nodetool(n, "flush")
        lc.run("start", "node4")
        wait_for("node4 normal", lambda: states(lc, 1).get("127.0.0.4") == "UN", timeout=60)
        freed = 0
        for n in (1, 2, 3):
            out = lc.nodetool(n, "cleanup", "cu")
            assert "Cleaned up cu.t" in out, out
            line = [l for l in out.splitlines() if l.startswith("Total freed")][0]
            freed += 1 if not line.endswith(" 0 bytes") else 0
        # node4 took ranges from at least one of them, which freed space
        assert freed >= 1
        # RF 1: each row lives on one node only, and none was lost
        sel = s1.prepare("SELECT v FROM cu.t WHERE k = ?")
        sel.consistency_level = ConsistencyLevel.ONE
        bad = [k for k in range(4000) if s1.execute(sel, [k]).one() is None]
        assert bad == [], f"{len(bad)} rows lost, e.g. {bad[:10]}"
    finally:
        c1.shutdown()


def test_a_decommissioned_node_starts_again_only_when_the_operator_overrides(cluster_factory):
    """-Dcassandra.override_decommission=true, Cassandra's flag: the node
    starts, says so, and registers in the ring again."""
    import subprocess
    from sibyl_node import BIN
    lc = cluster_factory(3)
    lc.run("start")
    lc.nodetool(3, "decommission")
    wait_for("node3 gone from the ring", lambda: "127.0.0.3" not in states(lc, 1), timeout=30)
    wait_for("node3 stopped", lambda: "DOWN" in lc.run("status").stdout.split("node3")[1].splitlines()[0], timeout=60)
    left = time.time()
    assert lc.run("start", "node3", check=False).returncode != 0
    # the others ignore a node that left for the quarantine (60 s, as
    # Cassandra's QUARANTINE_DELAY): only then can it gossip and bootstrap
    time.sleep(max(0, 62 - (time.time() - left)))
    log = open(f"{lc.dir}/node3/sibyl.log", "a")
    p = subprocess.Popen([BIN, "--config", f"{lc.dir}/node3/sibyl.yaml", "-Dcassandra.override_decommission=true"],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for("node3 back in node1's ring", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=90)
        text = open(f"{lc.dir}/node3/sibyl.log").read()
        assert "This node was decommissioned, but overriding by operator request." in text
    finally:
        p.terminate()
        p.wait(30)


def host_ids(lc, node):
    """address -> host id as node's nodetool status shows it."""
    return {l.split()[1]: l.split()[-2] for l in status_lines(lc.nodetool(node, "status"))}


def test_replace_a_dead_node_with_a_new_one_under_quorum_writes(cluster_factory):
    """-Dcassandra.replace_address_first_boot: node4 takes dead node3's
    tokens and streams its ranges from the live replicas while a QUORUM
    writer goes on; a live node cannot be replaced."""
    lc = cluster_factory(3)
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE rep WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE rep.t (k int PRIMARY KEY, v int)")
        ins = s1.prepare("INSERT INTO rep.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.QUORUM
        for k in range(2000):
            s1.execute(ins, [k, k])
        lc.run("add")
        # a live node is not replaced, in Cassandra's words; the refused
        # node leaves nothing behind, so it can start again
        refused = lc.run("start", "node4", "--", "-Dcassandra.replace_address_first_boot=127.0.0.2", check=False)
        assert refused.returncode != 0
        log4 = open(f"{lc.dir}/node4/sibyl.log").read()
        assert "Cannot replace a live node..." in log4, [
            line for line in log4.splitlines() if "ERROR" in line or "WARN" in line or "rror:" in line][-12:]
        old3 = host_ids(lc, 1)["127.0.0.3"]
        lc.run("kill", "node3")
        wait_for("node3 down", lambda: states(lc, 1).get("127.0.0.3") == "DN", timeout=60)
        w = Writer(s1, "rep.t", 100_000)
        time.sleep(0.5)
        lc.run("start", "node4", "--", "-Dcassandra.replace_address_first_boot=127.0.0.3")
        wait_for("node4 normal and node3 gone",
                 lambda: states(lc, 1) == {"127.0.0.1": "UN", "127.0.0.2": "UN", "127.0.0.4": "UN"}, timeout=60)
        time.sleep(0.5)
        acked = w.finish()
        assert len(acked) > 50 and w.failed == 0, (len(acked), w.errors)
        assert old3 not in host_ids(lc, 2).values()
        assert states(lc, 4) == {"127.0.0.1": "UN", "127.0.0.2": "UN", "127.0.0.4": "UN"}
        assert peers_of(lc, 1) == {"127.0.0.2", "127.0.0.4"}
        assert peers_of(lc, 4) == {"127.0.0.1", "127.0.0.2"}
        log4 = open(f"{lc.dir}/node4/data/logs/system.log").read()
        assert "Gathering node replacement information for /127.0.0.3" in log4
        # node4 owns what node3 owned: its tokens
        ring = lc.nodetool(1, "ring")
        assert "127.0.0.3" not in ring and ring.count("127.0.0.4") == 16, ring
        # the cluster metadata log still takes changes with node1 or node2 down
        # (the dead node3 is no longer one of its voters)
        lc.run("stop", "node2")
        q(s1, "CREATE TABLE rep.after (k int PRIMARY KEY)", cl=ConsistencyLevel.ONE)
        lc.run("start", "node2")
    finally:
        c1.shutdown()
    lc.run("stop", "node1", "node2")
    missing = missing_alone(lc, 4, "rep.t", list(range(2000)) + acked)
    assert missing == [], f"{len(missing)} rows missing on node4, e.g. {missing[:10]}"


def test_a_wiped_node_replaces_itself_at_the_same_address(cluster_factory):
    """A node whose disk was lost starts empty at its own address with
    -Dcassandra.replace_address_first_boot=<its address>: it gets a new
    host id, hibernates while it streams (the others do not read from it),
    and then has every row again."""
    import shutil
    lc = cluster_factory(3)
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE w WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE w.t (k int PRIMARY KEY, v int)")
        ins = s1.prepare("INSERT INTO w.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.QUORUM
        for k in range(2000):
            s1.execute(ins, [k, k])
        old3 = host_ids(lc, 1)["127.0.0.3"]
        lc.run("kill", "node3")
        shutil.rmtree(f"{lc.dir}/node3/data")
        wait_for("node3 down", lambda: states(lc, 1).get("127.0.0.3") == "DN", timeout=60)
        # without the flag the wiped node is refused, in Cassandra's words
        plain = lc.run("start", "node3", check=False)
        assert plain.returncode != 0
        assert ("A node with address 127.0.0.3:" in open(f"{lc.dir}/node3/sibyl.log").read()
                and "Use cassandra.replace_address if you want to replace this node."
                in open(f"{lc.dir}/node3/sibyl.log").read())
        shutil.rmtree(f"{lc.dir}/node3/data")
        lc.run("start", "node3", "--", "-Dcassandra.replace_address_first_boot=127.0.0.3")
        wait_for("node3 normal", lambda: states(lc, 1).get("127.0.0.3") == "UN", timeout=60)
        new3 = host_ids(lc, 1)["127.0.0.3"]
        assert new3 != old3 and len(host_ids(lc, 1)) == 3
        log3 = open(f"{lc.dir}/node3/data/logs/system.log").read()
        assert "Writes will not be forwarded to this node during replacement" in log3
        # restarted with the flag still set, it is already bootstrapped
        lc.run("stop", "node3")
        lc.run("start", "node3", "--", "-Dcassandra.replace_address_first_boot=127.0.0.3")
        assert "Replace address on the first boot requested; this node is already bootstrapped" in \
            open(f"{lc.dir}/node3/data/logs/system.log").read()
        assert host_ids(lc, 1)["127.0.0.3"] == new3
    finally:
        c1.shutdown()
    lc.run("stop", "node1", "node2")
    missing = missing_alone(lc, 3, "w.t", range(2000))
    assert missing == [], f"{len(missing)} rows missing on node3, e.g. {missing[:10]}"


def test_a_new_datacenter_is_rebuilt_from_the_first(cluster_factory):
    """Cassandra's way to add a datacenter: its nodes join with
    auto_bootstrap: false, the keyspace is altered to replicate there, and
    `nodetool rebuild <src-dc>` on each new node streams its ranges from the
    old datacenter. Afterwards dc2 alone answers every row at LOCAL_ONE."""
    lc = cluster_factory(4, dcs=2)
    for n in (3, 4):
        with open(f"{lc.dir}/node{n}/sibyl.yaml", "a") as f:
            f.write("auto_bootstrap: false\n")
    lc.run("start", "node1", "node2")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE nd WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2}")
        q(s1, "CREATE TABLE nd.t (k int PRIMARY KEY, v int)")
        ins = s1.prepare("INSERT INTO nd.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ALL
        for k in range(2000):
            s1.execute(ins, [k, k])
        lc.run("start", "node3", "node4")
        q(s1, "ALTER KEYSPACE nd WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 2}")
    finally:
        c1.shutdown()
    # Cassandra's checks, in its words
    bad = lc.nodetool(3, "rebuild", "dc9", check=False)
    assert bad.returncode != 0
    assert ("Provided datacenter 'dc9' is not a valid datacenter, available datacenters are: dc1,dc2"
            in bad.stdout + bad.stderr), bad.stdout + bad.stderr
    bad = lc.nodetool(3, "rebuild", "-ts", "(1,2]", "dc1", check=False)
    assert "Cannot specify tokens without keyspace." in bad.stdout + bad.stderr
    bad = lc.nodetool(3, "rebuild", "--exclude-local-dc", "dc2", check=False)
    assert ("Cannot set source data center to be local data center, when excludeLocalDataCenter flag is set"
            in bad.stdout + bad.stderr)
    # before the rebuild dc2 has nothing
    lc.run("stop", "node1", "node2")
    assert len(missing_alone(lc, 3, "nd.t", range(0, 2000, 100))) == 20
    lc.run("start", "node1", "node2")
    for n in (3, 4):
        lc.nodetool(n, "rebuild", "dc1")
        assert "rebuild from dc: dc1, (All keyspaces), (All tokens)" in \
            open(f"{lc.dir}/node{n}/data/logs/system.log").read()
    lc.run("stop", "node1", "node2")
    missing = missing_alone(lc, 3, "nd.t", range(2000))
    assert missing == [], f"{len(missing)} rows missing in dc2, e.g. {missing[:10]}"


def test_two_nodes_bootstrapping_at_the_same_moment_both_get_their_data(cluster_factory):
    """node3 and node4 are started by one command, so they register and
    stream at once (the metadata log orders their registrations; each
    streams with the other as a pending replica). Afterwards, with node1
    and node2 stopped, every row is read from node3 and node4."""
    lc = cluster_factory(4)
    lc.run("start", "node1", "node2")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE tb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE tb.t (k int PRIMARY KEY, v int)")
        ins = s1.prepare("INSERT INTO tb.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.TWO
        for k in range(3000):
            s1.execute(ins, [k, k])
        lc.run("start", "node3", "node4")
        wait_for("both normal", lambda: set(states(lc, 1).values()) == {"UN"} and len(states(lc, 1)) == 4,
                 timeout=60)
        for n in (3, 4):
            system = open(f"{lc.dir}/node{n}/data/logs/system.log").read()
            assert "- JOINING: Starting to bootstrap..." in system, n
        # the ring: 4 x 16 distinct tokens
        ring = [l for l in lc.nodetool(1, "ring").splitlines() if l.startswith("127.0.0.")]
        assert len(ring) == 64 and len({l.split()[-1] for l in ring}) == 64
    finally:
        c1.shutdown()
    # RF 3 on 4 nodes: every row has a replica on node3 or node4
    lc.run("stop", "node1", "node2")
    missing = missing_alone(lc, 3, "tb.t", range(3000))
    assert missing == [], f"{len(missing)} rows missing, e.g. {missing[:10]}"


def test_removenode_status_and_force_as_cassandras(cluster_factory):
    """A removal slowed by a stream throttle shows in `removenode status`
    (Cassandra's words, with the nodes still streaming); `removenode force`
    completes it without waiting for them."""
    # slower than nodetool can set (its rates are whole megabits or MiB)
    lc = cluster_factory(4, extra=("stream_throughput_outbound=20KiB/s",))
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE rf WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
        q(s1, "CREATE TABLE rf.t (k int PRIMARY KEY, v text)")
        ins = s1.prepare("INSERT INTO rf.t (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ALL
        for k in range(3000):
            s1.execute(ins, [k, "x" * 300])
    finally:
        c1.shutdown()
    assert lc.nodetool(1, "removenode", "status").strip() == "RemovalStatus: No token removals in process."
    host4 = host_ids(lc, 1)["127.0.0.4"]
    lc.run("stop", "node4")
    wait_for("node4 down", lambda: states(lc, 1).get("127.0.0.4") == "DN", timeout=60)
    missing = lc.nodetool(1, "removenode", "00000000-0000-0000-0000-000000000000", check=False)
    assert "Host ID not found." in missing.stdout + missing.stderr
    done = {}
    t = threading.Thread(target=lambda: done.setdefault("r", lc.nodetool(1, "removenode", host4, check=False)))
    t.start()
    status = wait_for("a removal in process",
                      lambda: (s := lc.nodetool(1, "removenode", "status")) and "Removing token (" in s and s,
                      timeout=30)
    assert re.match(r"RemovalStatus: Removing token \(-?\d+\)\. Waiting for replication confirmation "
                    r"from \[(/127\.0\.0\.\d)(,/127\.0\.0\.\d)*\]\.$", status.strip()), status
    again = lc.nodetool(1, "removenode", host4, check=False)
    assert ("This node is already processing a removal. Wait for it to complete, or use 'removenode force' "
            "if this has failed." in again.stdout + again.stderr)
    forced = lc.nodetool(1, "removenode", "force")
    assert forced.startswith("RemovalStatus: Removing token (")
    t.join(timeout=60)
    assert done["r"].returncode == 0, done["r"].stdout + done["r"].stderr
    assert lc.nodetool(1, "removenode", "status").strip() == "RemovalStatus: No token removals in process."
    assert "127.0.0.4" not in states(lc, 1)
    assert "Removal not confirmed for for /127.0.0." in open(f"{lc.dir}/node1/data/logs/system.log").read()


def stress_write(lc, node, n, cl="ONE"):
    """`sibyl stress write` of keys 1..n through `node`; its op rate."""
    import subprocess
    from sibyl_node import BIN
    p = subprocess.run([BIN, "stress", "write", f"n={n}", "no-warmup", f"cl={cl}", "-rate", "threads=8",
                        "-pop", f"seq=1..{n}", "-schema", "replication(factor=1)",
                        "-node", f"127.0.0.{node}", "-port", f"native={lc.port}"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Total errors              :        0" in p.stdout, p.stdout + p.stderr
    return float(re.search(r"Op rate\s+: ([\d,]+) op/s", p.stdout).group(1).replace(",", ""))


def count_alone(lc, node, running):
    """The rows of keyspace1.standard1 that `node` has, counted with the
    other running nodes stopped (and started again afterwards)."""
    others = [f"node{n}" for n in running if n != node]
    lc.run("stop", *others)
    c, s = connect_only(lc, node)
    try:
        return q(s, "SELECT count(*) FROM keyspace1.standard1", cl=ConsistencyLevel.ONE).one()[0]
    finally:
        c.shutdown()
        lc.run("start", *others)


def test_one_to_three_nodes_rf_raised_and_repaired_then_four_with_cleanup(cluster_factory):
    """Seed 000's year: one node loaded by `sibyl stress`; two more
    bootstrap; the keyspace goes from RF 1 to RF 3 and every node is
    repaired, after which each node alone has every row; a fourth node
    bootstraps and cleanup drops what moved: no row lost, the ownerships add
    up to three copies. (The throughput at 1, 3 and 4 nodes is measured by
    bench/topology_growth.sh.)"""
    n = 3000
    lc = cluster_factory(4, extra=("stream_throughput_outbound=0",))
    lc.run("start", "node1")
    stress_write(lc, 1, n)
    lc.run("start", "node2", "node3")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "ALTER KEYSPACE keyspace1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
    finally:
        c1.shutdown()
    for node in (1, 2, 3):
        out = lc.nodetool(node, "repair", "-full", "keyspace1")
        assert "Repair completed successfully" in out, out
    for node in (1, 2, 3):
        assert count_alone(lc, node, (1, 2, 3)) == n, node
    lc.run("start", "node4")
    for node in (1, 2, 3):
        out = lc.nodetool(node, "cleanup", "keyspace1")
        assert "Cleaned up keyspace1.standard1" in out, out
    # RF 3 on 4 nodes: the effective ownerships add up to 300%, each near
    # 75% (16 vnodes each)
    owns = [float(l.split()[-3].rstrip("%")) for l in status_lines(lc.nodetool(1, "status", "keyspace1"))]
    assert len(owns) == 4 and abs(sum(owns) - 300) < 1 and all(50 <= o <= 100 for o in owns), owns
    c1, s1 = connect_only(lc, 1)
    try:
        assert q(s1, "SELECT count(*) FROM keyspace1.standard1", cl=ConsistencyLevel.ALL).one()[0] == n
    finally:
        c1.shutdown()
    # the same stress run as on one node, at QUORUM, on four
    stress_write(lc, 1, n, cl="QUORUM")


def partitions(lc, node, table):
    out = lc.nodetool(node, "tablestats", table)
    return int(re.search(r"Number of partitions \(estimate\): (\d+)", out).group(1))


def test_tombstone_gc_repair_keeps_a_delete_until_every_replica_has_it(cluster_factory):
    """node3 misses a delete (down, hints off) and gc_grace_seconds passes.
    Under Cassandra's rule (tombstone_gc mode timeout, the default) nodes 1
    and 2 purge the tombstone, and node3's old row comes back when it
    returns: the resurrection operators fear. Under ScyllaDB's mode repair
    the tombstone stays until a repair has run over its range after the
    delete; then compaction purges it."""
    lc = cluster_factory(3, extra=("hinted_handoff_enabled=false",))
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE z WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE z.safe (k int PRIMARY KEY, v int) "
              "WITH gc_grace_seconds = 1 AND tombstone_gc = {'mode': 'repair'}")
        q(s1, "CREATE TABLE z.plain (k int PRIMARY KEY, v int) WITH gc_grace_seconds = 1")
        bad = None
        try:
            q(s1, "CREATE TABLE z.bad (k int PRIMARY KEY) WITH tombstone_gc = {'mode': 'sometimes'}")
        except Exception as e:
            bad = str(e)
        assert bad and "Invalid tombstone_gc mode 'sometimes'" in bad, bad
        desc = "\n".join(r[3] for r in q(s1, "DESCRIBE TABLE z.safe"))
        assert "AND tombstone_gc = {'mode': 'repair'}" in desc, desc
        assert "tombstone_gc" not in "\n".join(r[3] for r in q(s1, "DESCRIBE TABLE z.plain"))
        for t in ("safe", "plain"):
            for k in range(10):
                q(s1, f"INSERT INTO z.{t} (k, v) VALUES ({k}, {k})", cl=ConsistencyLevel.ALL)
        for n in (1, 2, 3):
            lc.nodetool(n, "flush", "z")
        lc.run("stop", "node3")
        wait_for("node3 down", lambda: states(lc, 1).get("127.0.0.3") == "DN", timeout=60)
        for t in ("safe", "plain"):
            q(s1, f"DELETE FROM z.{t} WHERE k = 1")
    finally:
        c1.shutdown()
    time.sleep(3)  # past gc_grace_seconds
    for n in (1, 2):
        lc.nodetool(n, "flush", "z")
        lc.nodetool(n, "compact", "z")
    assert partitions(lc, 1, "z.plain") == 9   # the tombstone is gone
    assert partitions(lc, 1, "z.safe") == 10   # kept: no repair yet
    lc.run("start", "node3")
    c1, s1 = connect_only(lc, 1)
    try:
        # Cassandra's rule: node3's row comes back
        assert q(s1, "SELECT v FROM z.plain WHERE k = 1", cl=ConsistencyLevel.ALL).one() is not None
        # repair mode: it stays deleted
        assert q(s1, "SELECT v FROM z.safe WHERE k = 1", cl=ConsistencyLevel.ALL).one() is None
        out = lc.nodetool(1, "repair", "z", "safe")
        assert "Repair completed successfully" in out, out
        # now every replica has the tombstone: compaction purges it
        for n in (1, 2, 3):
            lc.nodetool(n, "flush", "z")
            lc.nodetool(n, "compact", "z")
            assert partitions(lc, n, "z.safe") == 9, n
            assert "repaired_ranges" in os.listdir(next(
                f"{lc.dir}/node{n}/data/data/z/{d}" for d in os.listdir(f"{lc.dir}/node{n}/data/data/z")
                if d.startswith("safe-")))
        assert q(s1, "SELECT v FROM z.safe WHERE k = 1", cl=ConsistencyLevel.ALL).one() is None
        assert len(list(q(s1, "SELECT k FROM z.safe", cl=ConsistencyLevel.ALL))) == 9
    finally:
        c1.shutdown()


def test_streams_to_another_datacenter_keep_to_the_inter_dc_throttle(cluster_factory):
    """inter_dc_stream_throughput_outbound (and nodetool
    set/getinterdcstreamthroughput) paces what a node streams to nodes of
    other data centers, whatever stream_throughput_outbound allows: node2
    (dc2) rebuilds from node1 (dc1) at node1's inter-DC cap."""
    lc = cluster_factory(2, dcs=2, extra=("stream_throughput_outbound=0",
                                          "inter_dc_stream_throughput_outbound=64MiB/s"))
    with open(f"{lc.dir}/node2/sibyl.yaml", "a") as f:
        f.write("auto_bootstrap: false\n")
    lc.run("start")
    c1, s1 = connect_only(lc, 1)
    try:
        q(s1, "CREATE KEYSPACE xd WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 1}")
        q(s1, "CREATE TABLE xd.t (k int PRIMARY KEY, v int, pad text)")
        ins = s1.prepare(f"INSERT INTO xd.t (k, v, pad) VALUES (?, ?, '{'x' * 300}')")
        for k in range(8000):
            s1.execute(ins, [k, k])
        q(s1, "ALTER KEYSPACE xd WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}")
    finally:
        c1.shutdown()
    assert "Current inter-datacenter stream throughput: 64.0 MiB/s" in \
        lc.nodetool(1, "getinterdcstreamthroughput", "-m")
    # 4 megabits/s: 500,000 bytes a second
    lc.nodetool(1, "setinterdcstreamthroughput", "4")
    assert "Current inter-datacenter stream throughput: 4 Mb/s" in lc.nodetool(1, "getinterdcstreamthroughput")
    # the intra-DC throttle is untouched (off)
    assert "Current stream throughput: unlimited" in lc.nodetool(1, "getstreamthroughput")
    lc.nodetool(2, "rebuild", "dc1")
    done = [l for l in open(f"{lc.dir}/node2/sibyl.log").read().splitlines()
            if "Rebuild session with" in l and " complete: " in l]
    assert done, "no finished rebuild session in node2's log"
    # the session of xd (the others, of the system keyspaces, are small)
    line = max(done, key=lambda l: int(l.split(" partitions, ")[1].split(" bytes")[0]))
    streamed = int(line.split(" partitions, ")[1].split(" bytes")[0])
    took = float(line.split(" bytes in ")[1].split(" s")[0])
    assert streamed > 3_000_000, line
    # one source at 500,000 B/s; the first page (1 MiB) goes at once
    assert (streamed - 1024 * 1024) / took <= 500_000 * 1.1, ((streamed - 1024 * 1024) / took, line)
    lc.run("stop", "node1")
    assert missing_alone(lc, 2, "xd.t", range(0, 8000, 7)) == []

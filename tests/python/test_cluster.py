"""Several real `sibyl` processes on 127.0.0.x, started by `sibyl cluster`,
form one cluster: one ring, gossip and its failure detector, schema changes
through the cluster metadata log, drivers that discover every node."""
import os
import re
import subprocess
import threading
import time

import pytest
from cassandra.cluster import ControlConnection

from local_cluster import LocalCluster, cluster_factory, status_lines, wait_for  # noqa: F401


def test_three_nodes_form_one_ring_that_drivers_and_nodetool_see(cluster_factory):
    lc = cluster_factory(3, racks=2)
    t = time.time()
    lc.run("start")
    started = time.time() - t
    assert started < 30, f"three nodes took {started:.1f}s to start and see each other"
    for n in (1, 2, 3):
        lines = status_lines(lc.nodetool(f"node{n}", "status"))
        assert len(lines) == 3, lines
        assert all(l.startswith("UN ") for l in lines), lines
    c, s = lc.connect(1)
    try:
        hosts = sorted((h.address, h.datacenter, h.rack) for h in c.metadata.all_hosts())
        assert hosts == [("127.0.0.1", "dc1", "rack1"), ("127.0.0.2", "dc1", "rack2"), ("127.0.0.3", "dc1", "rack1")]
        s.execute("CREATE KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2}")
        s.execute("CREATE TABLE ks.t (k text PRIMARY KEY, v int)")
        c.refresh_schema_metadata()
        # the driver's token-aware routing and nodetool getendpoints agree
        tm = c.metadata.token_map
        assert tm is not None
        for i in range(30):
            key = f"key{i}"
            driver = [h.address for h in c.metadata.get_replicas("ks", key.encode())]
            ours = lc.nodetool("node2", "getendpoints", "ks", "t", key).split()
            assert sorted(driver) == sorted(ours), (key, driver, ours)
            assert len(ours) == 2 and len({lc_rack(lc, a) for a in ours}) == 2, "NTS uses both racks"
        # every node answers system.peers about the two others
        for n in (1, 2, 3):
            c2, s2 = lc.connect(n, whitelist=True)
            peers = sorted(r.peer for r in s2.execute("SELECT peer FROM system.peers"))
            assert peers == sorted(f"127.0.0.{m}" for m in (1, 2, 3) if m != n)
            local = s2.execute("SELECT data_center, rack, tokens FROM system.local").one()
            assert local.data_center == "dc1" and len(local.tokens) == 16
            c2.shutdown()
    finally:
        c.shutdown()
    ring = lc.nodetool("node1", "ring")
    assert len(re.findall(r"^127\.0\.0\.\d", ring, re.M)) == 48
    described = lc.nodetool("node3", "describecluster")
    assert len(re.findall(r"^\t\t[0-9a-f-]{36}: \[", described, re.M)) == 1, described


def lc_rack(lc, address):
    for n in lc.admin(1, "/cluster")["nodes"]:
        if n["address"] == address:
            return n["rack"]
    return None


def test_a_killed_node_is_marked_down_and_comes_back_with_its_identity(cluster_factory, monkeypatch):
    lc = cluster_factory(3)
    lc.run("start")
    before = {n["address"]: (n["host_id"], n["tokens"]) for n in lc.admin(1, "/cluster")["nodes"]}
    # the STATUS_CHANGE events node1 sends the driver's control connection
    events = []
    original = ControlConnection._handle_status_change

    def record(self, event):
        events.append((event["change_type"], event["address"][0]))
        return original(self, event)

    monkeypatch.setattr(ControlConnection, "_handle_status_change", record)
    c, s = lc.connect(1, whitelist=True)
    try:
        # a pause shorter than the failure detector's patience is a slow node
        lc.run("pause", "node3")
        time.sleep(3)
        lc.run("resume", "node3")
        assert "DN " not in lc.nodetool("node1", "status")
        s.execute("CREATE KEYSPACE fo WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE fo.t (k int PRIMARY KEY, v int)")
        t = time.time()
        lc.run("kill", "node3")
        # writes at QUORUM go on at once: two of three replicas answer
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement
        for k in range(50):
            s.execute(SimpleStatement("INSERT INTO fo.t (k, v) VALUES (%s, %s)", consistency_level=ConsistencyLevel.QUORUM),
                      (k, k))
        # and so do reads: a replica that does not answer is backed up by
        # the third (speculative retry), before anyone has marked it down
        for k in range(50):
            row = s.execute(SimpleStatement("SELECT v FROM fo.t WHERE k = %s", consistency_level=ConsistencyLevel.QUORUM),
                            (k,)).one()
            assert row.v == k
        wait_for("node3 DN on node1 and node2",
                 lambda: all(any(l.startswith("DN ") and "127.0.0.3" in l
                                 for l in status_lines(lc.nodetool(f"node{n}", "status"))) for n in (1, 2)),
                 timeout=90, every=1)
        took = time.time() - t
        # phi 8: 18.4 times the mean interval between the heartbeats an
        # observer hears of; with three nodes each hears of another's every
        # 1.3 to 2 s on average (one random peer per round), so 25 to 40 s
        assert 8 < took < 60, took
        wait_for("a DOWN event", lambda: ("DOWN", "127.0.0.3") in events, timeout=30)
        # once node3 is down, reads at QUORUM ask the two live replicas
        rows = s.execute(SimpleStatement("SELECT k, v FROM fo.t", consistency_level=ConsistencyLevel.QUORUM))
        assert sorted((r.k, r.v) for r in rows) == [(k, k) for k in range(50)]
        lc.run("start", "node3")
        wait_for("node3 UN", lambda: all(l.startswith("UN ") for l in status_lines(lc.nodetool("node1", "status"))),
                 timeout=30)
        after = {n["address"]: (n["host_id"], n["tokens"]) for n in lc.admin(1, "/cluster")["nodes"]}
        assert after == before
        wait_for("an UP event", lambda: ("UP", "127.0.0.3") in events[events.index(("DOWN", "127.0.0.3")):],
                 timeout=30)
    finally:
        c.shutdown()


def test_concurrent_schema_changes_land_in_one_order_on_every_node(cluster_factory):
    # the log keeps 4 entries behind a snapshot every 4: node3 returns to a
    # snapshot, which carries the schema
    lc = cluster_factory(3, extra=("metadata_snapshot_entries=4",))
    lc.run("start")
    # sessions of the driver's default policy: it learns that node3 is down
    # and leaves it out of its schema agreement wait
    sessions = [lc.connect(n) for n in (1, 2)]
    try:
        sessions[0][1].execute("CREATE KEYSPACE ddl WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        sessions[0][1].execute("CREATE KEYSPACE gone WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        sessions[0][1].execute("CREATE TABLE ddl.before (k int PRIMARY KEY, v int)")
        sessions[0][1].execute("INSERT INTO ddl.before (k, v) VALUES (1, 10)")
        lc.run("stop", "node3")
        sessions[0][1].execute("DROP KEYSPACE gone")
        statements = []
        for i in range(7):
            statements.append(f"CREATE TABLE ddl.t{i} (k int PRIMARY KEY, v int)")
            statements.append(f"ALTER TABLE ddl.t{i} ADD w{i} text")
        statements += [f"CREATE TABLE ddl.u{i} (k int PRIMARY KEY)" for i in range(6)]
        errors = []

        def run(i, stmts):
            s = sessions[i % 2][1]
            for st in stmts:
                for attempt in range(300):
                    try:
                        s.execute(st)
                        break
                    except Exception as e:  # ALTER before its CREATE landed: retry
                        if "exist" in str(e) or "unconfigured" in str(e).lower():
                            time.sleep(0.05)
                            continue
                        errors.append((st, repr(e)))
                        break

        threads = [threading.Thread(target=run, args=(i, statements[i::4])) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors
        # a DROP too, and node3 was down for all of it
        sessions[1][1].execute("DROP TABLE ddl.u5")
        lc.run("start", "node3")
        # each node answers for itself
        sessions += [lc.connect(n, whitelist=True) for n in (1, 2, 3)]

        def schema(n):
            rows = sessions[1 + n][1].execute("DESCRIBE KEYSPACE ddl")
            return "\n".join(r.create_statement for r in rows)

        # (node3 may see node1 UP only after a second echo, 10 s on: the
        # first answer can be lost on node1's stale connection to node3's
        # old process; a known defect, named in the stop note of 2026-11-24)
        wait_for("node3 caught up", lambda: schema(3) == schema(1), timeout=60)
        assert schema(1) == schema(2) == schema(3)
        text = schema(1)
        assert all(f"w{i} text" in text for i in range(7)) and "u5" not in text and "u4" in text
        # the keyspace dropped while node3 was away is gone there too, and the
        # table it had before keeps its data
        s3 = sessions[4][1]
        assert "gone" not in {r.keyspace_name for r in s3.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
        assert s3.execute("SELECT v FROM ddl.before WHERE k = 1").one().v == 10
        versions = {sessions[1 + n][1].execute("SELECT schema_version FROM system.local").one()[0] for n in (1, 2, 3)}
        assert len(versions) == 1
    finally:
        for c, _ in sessions:
            c.shutdown()


def test_a_cluster_grows_from_one_to_three_to_four_nodes(cluster_factory, monkeypatch):
    lc = cluster_factory(1)
    lc.run("start")
    # the TOPOLOGY_CHANGE events node1 sends the driver's control connection
    events = []
    original = ControlConnection._handle_topology_change

    def record(self, event):
        events.append((event["change_type"], event["address"][0]))
        return original(self, event)

    monkeypatch.setattr(ControlConnection, "_handle_topology_change", record)
    c, s = lc.connect(1)
    s.execute("CREATE KEYSPACE grow WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    for _ in range(2):
        name = lc.run("add").stdout.strip()
        lc.run("start", name)
    assert len(status_lines(lc.nodetool("node1", "status"))) == 3
    wait_for("NEW_NODE events", lambda: {("NEW_NODE", "127.0.0.2"), ("NEW_NODE", "127.0.0.3")} <= set(events), timeout=10)
    wait_for("the driver sees three nodes", lambda: len(c.metadata.all_hosts()) == 3, timeout=10)
    c.shutdown()
    name = lc.run("add").stdout.strip()
    t = time.time()
    lc.run("start", name)
    joined = time.time() - t
    assert joined < 15, f"joining took {joined:.1f}s"
    for n in (1, 2, 3, 4):
        lines = status_lines(lc.nodetool(f"node{n}", "status"))
        assert len(lines) == 4 and all(l.startswith("UN ") for l in lines), lines
    nodes = lc.admin(4, "/cluster")["nodes"]
    tokens = [t for n in nodes for t in n["tokens"]]
    assert len(tokens) == 64 and len(set(tokens)) == 64
    c, s = lc.connect(4, whitelist=True)
    assert s.execute("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = 'grow'").one()
    c.shutdown()


def test_a_partitioned_minority_refuses_schema_changes_and_catches_up_after_heal(cluster_factory):
    lc = cluster_factory(3)
    lc.run("start")
    # across a partition the nodes cannot agree on a schema version: the
    # driver's agreement wait is cut short (it would wait 10 s per statement)
    c1, s1 = lc.connect(1, whitelist=True, max_schema_agreement_wait=2)
    c3, s3 = lc.connect(3, whitelist=True, max_schema_agreement_wait=2)
    try:
        s1.execute("CREATE KEYSPACE part WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        lc.run("partition", "node3")
        s1.execute("CREATE TABLE part.majority (k int PRIMARY KEY)")
        with pytest.raises(Exception) as e:
            s3.execute("CREATE TABLE part.minority (k int PRIMARY KEY)")
        assert "majority of the cluster metadata voters" in str(e.value) or "metadata" in str(e.value), str(e.value)
        lc.run("heal")
        wait_for("node3 has the majority's table", lambda: s3.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'part' AND table_name = 'majority'").one(),
                 timeout=30)
        s3.execute("CREATE TABLE part.after (k int PRIMARY KEY)")
        for s in (s1, s3):
            names = sorted(r.table_name for r in s.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'part'"))
            assert names == ["after", "majority"], names
    finally:
        c1.shutdown()
        c3.shutdown()


def test_a_node_with_a_wiped_data_directory_does_not_take_the_old_nodes_place(cluster_factory):
    lc = cluster_factory(3)
    lc.run("start")
    lc.run("stop", "node3")
    subprocess.run(["rm", "-rf", os.path.join(lc.dir, "node3", "data")], check=True)
    p = lc.run("start", "node3", check=False, timeout=200)
    assert p.returncode != 0, p.stderr
    with open(os.path.join(lc.dir, "node3", "sibyl.log")) as f:
        log = f.read()
    # Cassandra's words (StorageService.checkForEndpointCollision)
    assert ("A node with address 127.0.0.3:" in log and "already exists, cancelling join. "
            "Use cassandra.replace_address if you want to replace this node." in log), log[-2000:]


def test_a_node_of_another_cluster_is_refused(cluster_factory, tmp_path):
    lc = cluster_factory(2)
    lc.run("start", "node1")
    # node2 claims another cluster name: node1 refuses its connections
    cfg = os.path.join(lc.dir, "node2", "sibyl.yaml")
    with open(cfg) as f:
        text = f.read()
    with open(cfg, "w") as f:
        f.write(text.replace("cluster_name: 'Test Cluster'", "cluster_name: 'Other'"))
    p = lc.run("start", "node2", check=False, timeout=200)
    assert p.returncode != 0
    with open(os.path.join(lc.dir, "node1", "sibyl.log")) as f:
        log = f.read()
    assert "cluster name 'Other' of 127.0.0.2 differs from this node's 'Test Cluster'" in log


def test_two_data_centers_with_network_topology_placement_and_a_distant_one(cluster_factory):
    lc = cluster_factory(4, dcs=2)
    lc.run("start")
    out = lc.nodetool("node4", "status")
    assert out.count("Datacenter: ") == 2 and "Datacenter: dc1" in out and "Datacenter: dc2" in out, out
    assert len([l for l in status_lines(out) if l.startswith("UN ")]) == 4
    c, s = lc.connect(1)
    try:
        assert sorted((h.address, h.datacenter) for h in c.metadata.all_hosts()) == [
            ("127.0.0.1", "dc1"), ("127.0.0.2", "dc1"), ("127.0.0.3", "dc2"), ("127.0.0.4", "dc2")]
        s.execute("CREATE KEYSPACE two WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}")
        s.execute("CREATE TABLE two.t (k text PRIMARY KEY, v int)")
        for k in ("a", "b", "c", "d"):
            eps = lc.nodetool("node1", "getendpoints", "two", "t", k).split()
            assert len(eps) == 2 and {lc_dc(lc, e) for e in eps} == {"dc1", "dc2"}, (k, eps)
        # dc2 120 ms away: EACH_QUORUM waits for it, LOCAL_QUORUM does not
        lc.run("delay", "node3", "node4", "--ms", "120")
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement
        for cl in (ConsistencyLevel.LOCAL_QUORUM, ConsistencyLevel.EACH_QUORUM, ConsistencyLevel.ALL):
            s.execute(SimpleStatement("INSERT INTO two.t (k, v) VALUES ('x', 1)", consistency_level=cl))
        row = s.execute(SimpleStatement("SELECT v FROM two.t WHERE k = 'x'",
                                        consistency_level=ConsistencyLevel.ALL)).one()
        assert row.v == 1
        lc.run("heal")
    finally:
        c.shutdown()


def lc_dc(lc, address):
    for n in lc.admin(1, "/cluster")["nodes"]:
        if n["address"] == address:
            return n["datacenter"]
    return None

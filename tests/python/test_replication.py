"""Replication across real `sibyl` processes started by `sibyl cluster`:
hinted handoff and its window, logged batches through the batchlog when
their coordinator dies, counters led by a replica, lightweight transactions
through several coordinators."""
import glob
import os
import threading
import time

from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from local_cluster import cluster_factory, status_lines, wait_for  # noqa: F401


def q(session, cql, cl=ConsistencyLevel.QUORUM, serial=None):
    st = SimpleStatement(cql, consistency_level=cl, serial_consistency_level=serial)
    return session.execute(st)


def down_on(lc, node, address):
    lines = status_lines(lc.nodetool(node, "status"))
    return any(l.startswith("DN") and f" {address} " in l for l in lines)


def hints_bytes(lc, node):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(lc.dir, f"node{node}", "data", "hints", "*.hints")))


def test_a_node_down_under_write_load_catches_up_from_hints_at_the_throttle(cluster_factory):
    lc = cluster_factory(3)
    lc.run("start")
    c1, s1 = lc.connect(1, whitelist=True)
    try:
        q(s1, "CREATE KEYSPACE h WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE h.t (k int PRIMARY KEY, v int)")
        assert "Hinted handoff is running" in lc.nodetool(1, "statushandoff")
        lc.nodetool(1, "sethintedhandoffthrottlekb", "512")
        lc.run("kill", "node3")
        killed = time.time()
        acked = []
        i = 0
        # writes at QUORUM through node1 until node3 is marked down, and a
        # while after: those it missed before conviction time out to it and
        # are hinted, those after are hinted at once
        while True:
            q(s1, f"INSERT INTO h.t (k, v) VALUES ({i}, {i})")
            acked.append(i)
            i += 1
            if i % 50 == 0 and time.time() - killed > 20 and down_on(lc, 1, "127.0.0.3"):
                break
            assert time.time() - killed < 90, "node3 never marked down"
        for _ in range(200):
            q(s1, f"INSERT INTO h.t (k, v) VALUES ({i}, {i})")
            acked.append(i)
            i += 1
        pending = lc.nodetool(1, "listpendinghints")
        assert "Host ID" in pending and "127.0.0.3" in pending and "DOWN" in pending, pending
        m = lc.admin(1, "/proxymetrics")
        assert m["hints_created"] >= 200, m
        size = hints_bytes(lc, 1)
        assert size > 0
        # delivery at 512 KiB/s, shared by the two other nodes: 256 KiB/s
        started = time.time()
        lc.run("start", "node3")
        wait_for("hints delivered", lambda: "does not have any pending hints" in lc.nodetool(1, "listpendinghints"),
                 timeout=120, every=0.5)
        took = time.time() - started
        assert took >= 0.5 * size / (256 * 1024), (took, size)
        m = lc.admin(1, "/proxymetrics")
        assert m["hints_delivered"] >= 200, m
        # node1's system.log says it as Cassandra's HintsDispatchExecutor
        # and HintsStore do
        import re
        with open(os.path.join(lc.dir, "node1", "data", "logs", "system.log")) as f:
            log = f.read()
        host3 = lc.admin(3, "/info")["host_id"]
        finished = re.findall(
            rf"- Finished hinted handoff of file ({host3}-\d+-\d+\.hints) to endpoint /127\.0\.0\.3:{lc.storage_port}: {host3}$",
            log, re.M)
        assert finished, log[-3000:]
        assert all(f"- Deleted hint file {name}" in log for name in finished)
        # the mutations for node3 its connection could not take, every 5 s
        assert re.search(r"- MUTATION_REQ messages were dropped in last 5000 ms: \d+ internal and 0 cross node\. "
                         r"Mean internal dropped latency: 0 ms and Mean cross-node dropped latency: 0 ms$", log, re.M)
        # node3 alone (a read at ONE there is served by its own replica)
        c3, s3 = lc.connect(3, whitelist=True)
        try:
            rows = {r.k: r.v for r in q(s3, "SELECT k, v FROM h.t", cl=ConsistencyLevel.ONE)}
            missing = [k for k in acked if rows.get(k) != k]
            # a range read at ONE may ask another replica; the single reads
            # below go to node3's own replica
            for k in acked[:: max(1, len(acked) // 100)]:
                r = q(s3, f"SELECT v FROM h.t WHERE k = {k}", cl=ConsistencyLevel.ONE).one()
                assert r is not None and r.v == k, k
            assert not missing, f"{len(missing)} of {len(acked)} writes missing on node3"
        finally:
            c3.shutdown()
    finally:
        c1.shutdown()


def test_past_max_hint_window_no_hints_are_kept(cluster_factory):
    lc = cluster_factory(3)
    lc.run("start")
    c1, s1 = lc.connect(1, whitelist=True)
    try:
        q(s1, "CREATE KEYSPACE w WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE w.t (k int PRIMARY KEY, v int)")
        lc.nodetool(1, "setmaxhintwindow", "1000")
        assert "Current max hint window: 1000 ms" in lc.nodetool(1, "getmaxhintwindow")
        lc.run("stop", "node3")
        wait_for("node3 down", lambda: down_on(lc, 1, "127.0.0.3"), timeout=30)
        # within the window: hinted
        q(s1, "INSERT INTO w.t (k, v) VALUES (0, 0)")
        before = lc.admin(1, "/proxymetrics")["hints_created"]
        assert before >= 1
        time.sleep(1.5)
        for k in range(1, 51):
            q(s1, f"INSERT INTO w.t (k, v) VALUES ({k}, {k})")
        assert lc.admin(1, "/proxymetrics")["hints_created"] == before
        # what node3 missed past the window waits for repair: its own
        # replica has the hinted write only
        lc.run("start", "node3")
        wait_for("hint delivered", lambda: "does not have any pending hints" in lc.nodetool(1, "listpendinghints"),
                 timeout=60, every=0.5)
        c3, s3 = lc.connect(3, whitelist=True)
        try:
            assert q(s3, "SELECT v FROM w.t WHERE k = 0", cl=ConsistencyLevel.ONE).one().v == 0
            assert q(s3, "SELECT v FROM w.t WHERE k = 7", cl=ConsistencyLevel.ONE).one() is None
        finally:
            c3.shutdown()
        lc.nodetool(1, "disablehandoff")
        assert "Hinted handoff is not running" in lc.nodetool(1, "statushandoff")
    finally:
        c1.shutdown()


def test_logged_batches_of_a_killed_coordinator_are_all_or_nothing(cluster_factory):
    lc = cluster_factory(3)
    lc.run("start")
    c1, s1 = lc.connect(1, whitelist=True)
    c2, s2 = lc.connect(2, whitelist=True)
    try:
        q(s1, "CREATE KEYSPACE b WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s1, "CREATE TABLE b.x (k int PRIMARY KEY, v int)")
        q(s1, "CREATE TABLE b.y (k int PRIMARY KEY, v int)")
        acked = []
        stop = threading.Event()

        def load():
            i = 0
            while not stop.is_set():
                futures = []
                for j in range(i, i + 20):
                    st = SimpleStatement(
                        f"BEGIN BATCH INSERT INTO b.x (k, v) VALUES ({j}, {j}); "
                        f"INSERT INTO b.y (k, v) VALUES ({j + 100000}, {j}); APPLY BATCH",
                        consistency_level=ConsistencyLevel.QUORUM)
                    futures.append((j, s1.execute_async(st)))
                for j, f in futures:
                    try:
                        f.result()
                        acked.append(j)
                    except Exception:
                        pass
                i += 20

        th = threading.Thread(target=load)
        th.start()
        wait_for("some batches applied", lambda: len(acked) > 200, timeout=60, every=0.1)
        lc.run("kill", "node1")
        stop.set()
        th.join(timeout=60)
        n = max(acked) + 40

        def halves():
            xs = {r.k for r in q(s2, "SELECT k FROM b.x")}
            ys = {r.k - 100000 for r in q(s2, "SELECT k FROM b.y")}
            return xs, ys

        # batches whose coordinator died are replayed by the nodes keeping
        # them, after twice the write timeout
        def whole():
            xs, ys = halves()
            return xs == ys

        wait_for("every batch whole", whole, timeout=60, every=1)
        xs, ys = halves()
        assert set(acked) <= xs, "an acknowledged batch is missing"
        assert all(k < n for k in xs)
        # and the batchlog is empty again on the nodes that kept it
        c3, s3 = lc.connect(3, whitelist=True)
        try:
            wait_for("batchlog emptied", lambda: all(
                q(sx, "SELECT count(*) FROM system.batches", cl=ConsistencyLevel.ONE).one()[0] == 0
                for sx in (s2, s3)), timeout=60, every=1)
        finally:
            c3.shutdown()
    finally:
        c1.shutdown()
        c2.shutdown()


def test_counters_through_coordinators_that_hold_no_replica_lose_no_increment(cluster_factory):
    lc = cluster_factory(3)
    lc.run("start")
    sessions = [lc.connect(n, whitelist=True) for n in (1, 2, 3)]
    try:
        s = sessions[0][1]
        q(s, "CREATE KEYSPACE c WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        q(s, "CREATE TABLE c.t (k int PRIMARY KEY, n counter)")
        errors = []

        def bump(session):
            try:
                for _ in range(20):
                    for k in range(6):
                        q(session, f"UPDATE c.t SET n = n + 1 WHERE k = {k}", cl=ConsistencyLevel.ONE)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=bump, args=(x[1],)) for x in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for k in range(6):
            for _, sx in sessions:
                assert q(sx, f"SELECT n FROM c.t WHERE k = {k}", cl=ConsistencyLevel.ONE).one().n == 60
        forwarded = sum(lc.admin(n, "/proxymetrics")["counter_forwards"] for n in (1, 2, 3))
        assert forwarded > 0
    finally:
        for c, _ in sessions:
            c.shutdown()


def test_compare_and_set_through_two_coordinators_applies_each_increment_once(cluster_factory):
    lc = cluster_factory(3)
    lc.run("start")
    sessions = [lc.connect(n, whitelist=True) for n in (1, 2)]
    try:
        s = sessions[0][1]
        q(s, "CREATE KEYSPACE l WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        q(s, "CREATE TABLE l.t (k int PRIMARY KEY, v int)")
        assert q(s, "INSERT INTO l.t (k, v) VALUES (1, 0) IF NOT EXISTS").one()[0] is True
        applied = []
        unknown = []
        errors = []

        def bump(session):
            # A CAS that times out under contention (WriteTimeout, write type
            # CAS) has an unknown outcome, as in Cassandra: it may still be
            # applied. It is counted as such, and the thread goes on.
            from cassandra import ReadTimeout, WriteTimeout
            mine = maybe = 0
            try:
                while mine < 15:
                    try:
                        cur = q(session, "SELECT v FROM l.t WHERE k = 1", cl=ConsistencyLevel.SERIAL).one().v
                    except (ReadTimeout, WriteTimeout):
                        continue
                    try:
                        r = q(session, f"UPDATE l.t SET v = {cur + 1} WHERE k = 1 IF v = {cur}",
                              serial=ConsistencyLevel.SERIAL).one()
                    except WriteTimeout as e:
                        assert "'write_type': 'CAS'" in str(e), e
                        maybe += 1
                        continue
                    if r[0]:
                        mine += 1
                    else:
                        assert r.v != cur  # refused: the value had moved on
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
            applied.append(mine)
            unknown.append(maybe)

        threads = [threading.Thread(target=bump, args=(x[1],)) for x in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert sum(applied) == 30
        # every acknowledged increment once, and a timed-out one at most once
        for _, sx in sessions:
            v = q(sx, "SELECT v FROM l.t WHERE k = 1", cl=ConsistencyLevel.SERIAL).one().v
            assert 30 <= v <= 30 + sum(unknown), (v, applied, unknown)
        # the Paxos state is kept on each replica
        assert q(s, "SELECT count(*) FROM system.paxos", cl=ConsistencyLevel.ONE).one()[0] >= 1
    finally:
        for c, _ in sessions:
            c.shutdown()


def test_each_quorum_counts_every_datacenter_on_its_own(cluster_factory):
    """Two data centers of two nodes, NetworkTopologyStrategy {dc1: 2, dc2:
    2}. With one dc2 node down, QUORUM (3 of 4) and LOCAL_QUORUM in dc1 go
    on, but EACH_QUORUM needs both dc2 replicas and is Unavailable naming
    dc2 (Cassandra's UnavailableException.create(cl, dc, …) wording)."""
    from cassandra import Unavailable
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
    from cassandra.policies import FallthroughRetryPolicy, WhiteListRoundRobinPolicy
    lc = cluster_factory(4, dcs=2)
    lc.run("start")
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(["127.0.0.1"]),
                               retry_policy=FallthroughRetryPolicy(), request_timeout=30)
    c1, s1 = lc.connect(1, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        q(s1, "CREATE KEYSPACE e WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 2}")
        q(s1, "CREATE TABLE e.t (k int PRIMARY KEY, v int)")
        q(s1, "INSERT INTO e.t (k, v) VALUES (1, 1)", cl=ConsistencyLevel.EACH_QUORUM)
        assert q(s1, "SELECT v FROM e.t WHERE k = 1", cl=ConsistencyLevel.EACH_QUORUM).one().v == 1
        lc.run("stop", "node4")
        wait_for("node4 down on node1", lambda: down_on(lc, 1, "127.0.0.4"), timeout=60)
        for cl in (ConsistencyLevel.QUORUM, ConsistencyLevel.LOCAL_QUORUM, ConsistencyLevel.ONE):
            q(s1, "INSERT INTO e.t (k, v) VALUES (2, 2)", cl=cl)
            assert q(s1, "SELECT v FROM e.t WHERE k = 2", cl=cl).one().v == 2
        for cql in ("INSERT INTO e.t (k, v) VALUES (3, 3)", "SELECT v FROM e.t WHERE k = 3"):
            try:
                q(s1, cql, cl=ConsistencyLevel.EACH_QUORUM)
                raise AssertionError(f"{cql} at EACH_QUORUM with dc2 short of its quorum succeeded")
            except Unavailable as e:
                assert "Cannot achieve consistency level EACH_QUORUM in DC dc2" in str(e), e
                assert (e.required_replicas, e.alive_replicas) == (2, 1), e
    finally:
        c1.shutdown()

"""Consistency under faults, checked by a real linearizability checker
(Porcupine, tests/linearizability) on histories recorded against a real
three-node cluster started by `sibyl cluster`:

- R + W > RF: a writer and readers at QUORUM, RF 3, while a replica is
  killed and restarted: every key is a linearizable register and no
  acknowledged write is lost;
- lightweight transactions (IF conditions, SERIAL): compare-and-set
  registers stay linearizable under kills and a partition.

Each test saves its history (and, on a violation, Porcupine's visualisation
next to it) in the test's tmp_path; the failure message says where.
"""
import itertools
import random
import threading
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import FallthroughRetryPolicy, WhiteListRoundRobinPolicy

from history import History, check
from local_cluster import cluster_factory, wait_for  # noqa: F401

pytestmark = pytest.mark.own_node

KEYS = [f"k{i}" for i in range(3)]


def connect(lc, node, consistency, serial=None):
    """A session whose requests all go to `node` as coordinator, at
    `consistency`, and are never retried by the driver (a retry would hide
    the outcome the history must record)."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([f"127.0.0.{node}"]),
                               retry_policy=FallthroughRetryPolicy(), consistency_level=consistency,
                               serial_consistency_level=serial, request_timeout=10)
    return lc.connect(node, execution_profiles={EXEC_PROFILE_DEFAULT: profile})


class Faults:
    """The fault schedule, run by the test's thread while the clients run;
    remembers when each fault was in force (monotonic ns)."""

    def __init__(self, lc):
        self.lc = lc
        self.windows = []

    def kill_and_restart(self, node, down_for):
        start = time.monotonic_ns()
        self.lc.run("kill", node)
        time.sleep(down_for)
        self.lc.run("start", node)
        self.windows.append((start, time.monotonic_ns()))

    def partition(self, node, for_s):
        start = time.monotonic_ns()
        self.lc.run("partition", node)
        time.sleep(for_s)
        self.lc.run("heal")
        self.windows.append((start, time.monotonic_ns()))

    def during(self, history, kind=None):
        return [o for w in self.windows for o in history.completed(kind, between=w)]


def wait_for_table(cluster, keyspace, table):
    def seen():
        cluster.refresh_schema_metadata()
        ks = cluster.metadata.keyspaces.get(keyspace)
        return ks is not None and table in ks.tables
    wait_for(f"{keyspace}.{table} in the driver's metadata", seen, timeout=30)


def run_clients(workers):
    """Starts one thread per worker (a function of a stop Event); returns
    the Event and a join function that re-raises a worker's exception."""
    stop = threading.Event()
    failures = []

    def guard(w):
        try:
            w(stop)
        except BaseException as e:  # noqa: BLE001
            failures.append(e)
            stop.set()

    threads = [threading.Thread(target=guard, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()

    def join():
        stop.set()
        for t in threads:
            t.join(timeout=60)
        if failures:
            raise failures[0]

    return stop, join


def verdict(history, faults, tmp_path, name):
    path = history.save(str(tmp_path / f"{name}.json"))
    ok, out = check(path)
    print(f"{name}: {history.summary()}; {len(faults.during(history))} completed during the faults\n"
          f"{out}history: {path}")
    return ok, out, path


def test_quorum_registers_are_linearizable_while_a_replica_is_killed_and_restarted(cluster_factory, tmp_path):
    lc = cluster_factory(3)
    lc.run("start")
    conns = {n: connect(lc, n, ConsistencyLevel.QUORUM) for n in (1, 2)}
    try:
        s1 = conns[1][1]
        s1.execute("CREATE KEYSPACE lin WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        s1.execute("CREATE TABLE lin.r (k text PRIMARY KEY, v bigint)")
        wait_for_table(conns[2][0], "lin", "r")
        writes = {n: s.prepare("INSERT INTO lin.r (k, v) VALUES (?, ?)") for n, (_, s) in conns.items()}
        reads = {n: s.prepare("SELECT v FROM lin.r WHERE k = ?") for n, (_, s) in conns.items()}
        history = History()

        def writer(stop):
            # one writer: increasing unique values, so a register's later
            # write also has the later client timestamp; coordinators alternate
            p = history.process()
            for i in itertools.count(1):
                if stop.is_set():
                    return
                key, node = KEYS[i % len(KEYS)], 1 + i % 2
                p.write(key, i, lambda: conns[node][1].execute(writes[node], (key, i)))
                time.sleep(0.01)

        def reader(node):
            def run(stop):
                p = history.process()
                rng = random.Random(node)
                while not stop.is_set():
                    key = rng.choice(KEYS)

                    def read():
                        row = conns[node][1].execute(reads[node], (key,)).one()
                        return row.v if row else None
                    p.read(key, read)
                    time.sleep(0.01)
            return run

        faults = Faults(lc)
        stop, join = run_clients([writer, reader(1), reader(2), reader(1)])
        try:
            time.sleep(4)
            for _ in range(3):
                faults.kill_and_restart("node3", down_for=8)
                time.sleep(4)
        finally:
            join()

        # everything healed: each key read at ALL holds the last acknowledged
        # write, or a later one whose outcome was not known
        final = history.process()
        at_all = conns[1][1].prepare("SELECT v FROM lin.r WHERE k = ?")
        at_all.consistency_level = ConsistencyLevel.ALL
        lost = {}
        for key in KEYS:
            got = wait_for(f"a read of {key} at ALL", lambda: final.read(
                key, lambda: conns[1][1].execute(at_all, (key,)).one().v), timeout=30)["value"]
            acked = max(o["input"]["value"] for o in history.completed("write") if o["key"] == key)
            later = {o["input"]["value"] for o in history.indeterminate("write") if o["key"] == key}
            if got != acked and got not in {v for v in later if v > acked}:
                lost[key] = (got, acked)

        ok, out, path = verdict(history, faults, tmp_path, "quorum")
        # enough happened, during the faults too, for the verdict to mean something
        assert len(history.completed()) >= 500, history.summary()
        assert len(history.completed("write")) >= 150, history.summary()
        assert len(faults.during(history, "write")) >= 50, history.summary()
        assert len(faults.during(history, "read")) >= 100, history.summary()
        assert ok, f"QUORUM history not linearizable ({history.summary()}):\n{out}history: {path}"
        assert not lost, f"acknowledged writes lost (key: (read at ALL, last acknowledged)): {lost}"
    finally:
        for c, _ in conns.values():
            c.shutdown()


def test_lightweight_transactions_are_linearizable_registers_under_kills_and_a_partition(cluster_factory, tmp_path):
    lc = cluster_factory(3)
    lc.run("start")
    conns = {n: connect(lc, n, ConsistencyLevel.QUORUM, serial=ConsistencyLevel.SERIAL) for n in (1, 2)}
    try:
        s1 = conns[1][1]
        s1.execute("CREATE KEYSPACE lwt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        s1.execute("CREATE TABLE lwt.r (k text PRIMARY KEY, v bigint)")
        wait_for_table(conns[2][0], "lwt", "r")
        stmts = {}
        for n, (_, s) in conns.items():
            read = s.prepare("SELECT v FROM lwt.r WHERE k = ?")
            read.consistency_level = ConsistencyLevel.SERIAL
            stmts[n] = (s.prepare("INSERT INTO lwt.r (k, v) VALUES (?, ?) IF NOT EXISTS"),
                        s.prepare("UPDATE lwt.r SET v = ? WHERE k = ? IF v = ?"), read)
        history = History()
        values = itertools.count(1)

        def client(i, node):
            def run(stop):
                p = history.process()
                rng = random.Random(i)
                insert, update, read = stmts[node]
                session = conns[node][1]
                known = {}  # the last value this client saw of each key
                while not stop.is_set():
                    key = rng.choice(KEYS)
                    if key not in known or rng.random() < 0.4:
                        def do_read():
                            row = session.execute(read, (key,)).one()
                            return row.v if row else None
                        r = p.read(key, do_read)
                        if r is not None:
                            known[key] = r["value"]
                    else:
                        expected, new = known[key], next(values)

                        def do_cas():
                            if expected is None:
                                row = session.execute(insert, (key, new)).one()._asdict()
                            else:
                                row = session.execute(update, (new, key, expected)).one()._asdict()
                            return row["applied"], row.get("v")  # the driver names [applied] "applied"
                        r = p.cas(key, expected, new, do_cas)
                        if r is not None:
                            known[key] = new if r["applied"] else r["value"]
                    time.sleep(0.01)
            return run

        faults = Faults(lc)
        stop, join = run_clients([client(i, 1 + i % 2) for i in range(4)])
        try:
            time.sleep(4)
            faults.kill_and_restart("node3", down_for=8)
            time.sleep(3)
            faults.partition("node3", for_s=8)
            time.sleep(3)
            faults.kill_and_restart("node3", down_for=8)
            time.sleep(3)
        finally:
            join()

        ok, out, path = verdict(history, faults, tmp_path, "lwt")
        # enough happened, during the faults too, for the verdict to mean something
        assert len(history.completed()) >= 300, history.summary()
        assert len([o for o in history.completed("cas") if o["output"]["applied"]]) >= 50, history.summary()
        assert len(faults.during(history)) >= 100, history.summary()
        assert len([o for o in faults.during(history, "cas") if o["output"]["applied"]]) >= 20, history.summary()
        assert ok, f"LWT history not linearizable ({history.summary()}):\n{out}history: {path}"
    finally:
        for c, _ in conns.values():
            c.shutdown()

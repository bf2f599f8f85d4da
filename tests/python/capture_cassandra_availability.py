"""Records which reads and writes a real 3-node Apache Cassandra 5.0.4 cluster
accepts and which it refuses as Unavailable, with RF 1 and RF 3, while 0, 1
and 2 of its nodes are down (seed 003 §3.2, issue 15).

Starts three Cassandra nodes on 127.0.0.1-3 (dirs under /tmp), creates
keyspaces `rf1` (SimpleStrategy RF 1) and `rf3` (SimpleStrategy RF 3) with a
table `t (k int PRIMARY KEY, v int)`, writes the keys at ALL while every node
is up and asks `nodetool getendpoints` for each key's replicas. Then, with 0
nodes down, node3 down, and node2 and node3 down (each stopped node DN in
node1's `nodetool status` first), writes and reads every key at ONE, QUORUM
and ALL through node1 alone and records the outcome: "ok" or the error.

Tokens differ between Cassandra and Sibyl, so the outcomes are not recorded
per key but per group: (keyspace, operation, consistency, nodes down, how
many of the key's replicas are down). Every key of a group must give the same
outcome. Writes tests/golden/cassandra_availability.json, which
tests/python/test_availability.py replays against a Sibyl cluster.

    .venv/bin/python tests/python/capture_cassandra_availability.py
    .venv/bin/python tests/python/capture_cassandra_availability.py --kill --out /tmp/killed.json

Nodes go down by a graceful stop (stop.sh: SIGTERM; the node announces its
shutdown and node1 marks it DN within a second); with --kill by SIGKILL
(node1's failure detector marked it DN about 20 s later). Both gave the same
outcomes; the golden is recorded with the graceful stop, which the Sibyl test
mirrors (`sibyl cluster stop`), keeping it fast.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from cassandra import ConsistencyLevel, Unavailable
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import FallthroughRetryPolicy, WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(ROOT, "..", "shared", "cassandra")
OUT = os.path.join(ROOT, "tests", "golden", "cassandra_availability.json")

KEYSPACES = {"rf1": 1, "rf3": 3}
LEVELS = ("ONE", "QUORUM", "ALL")
OPERATIONS = ("write", "read")
KEYS = list(range(30))
# taken down in this order: node3, then node2 as well; node1 coordinates
DOWN_ORDER = (3, 2)
COORDINATOR = "127.0.0.1"


# ---------------------------------------------------------------- shared with
# test_availability.py: the same scenario against either cluster

def execution_profiles():
    """node1 alone coordinates, and an error reaches the client as the
    coordinator sent it (the default retry policy would retry an Unavailable
    on the next host, of which the whitelist has none: NoHostAvailable)."""
    return {EXEC_PROFILE_DEFAULT: ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([COORDINATOR]),
        retry_policy=FallthroughRetryPolicy(), request_timeout=30)}


def create_schema(session):
    for ks, rf in KEYSPACES.items():
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                        f"{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
        session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")


def write_all_keys(session):
    for ks in KEYSPACES:
        for k in KEYS:
            session.execute(SimpleStatement(f"INSERT INTO {ks}.t (k, v) VALUES (%s, %s)",
                                            consistency_level=ConsistencyLevel.ALL), (k, k))


def parse_endpoints(out):
    return sorted(l.strip() for l in out.splitlines() if re.match(r"^\s*\d+\.\d+\.\d+\.\d+\s*$", l))


def outcome(session, query, params, level):
    try:
        session.execute(SimpleStatement(query, consistency_level=ConsistencyLevel.name_to_value[level]), params)
        return "ok"
    except Unavailable as e:
        return {"error": "Unavailable", "consistency": ConsistencyLevel.value_to_name[e.consistency],
                "required_replicas": e.required_replicas, "alive_replicas": e.alive_replicas}
    except Exception as e:  # timeouts and anything else: the class is the outcome
        return {"error": type(e).__name__}


def run_state(session, endpoints, down, stamp):
    """Writes and reads every key at every level with the nodes `down`
    (addresses) down; returns {group: (outcome, keys)} where group is
    (keyspace, operation, consistency, len(down), replicas of the key down).
    Asserts that every key of a group gives the same outcome."""
    groups = {}
    for ks in KEYSPACES:
        for level in LEVELS:
            for k in KEYS:
                replicas_down = sum(1 for a in endpoints[ks][k] if a in down)
                results = {
                    "write": outcome(session, f"INSERT INTO {ks}.t (k, v) VALUES (%s, %s)", (k, stamp), level),
                    "read": outcome(session, f"SELECT v FROM {ks}.t WHERE k = %s", (k,), level),
                }
                for op in OPERATIONS:
                    g = (ks, op, level, len(down), replicas_down)
                    if g in groups:
                        assert groups[g][0] == results[op], \
                            f"group {g}: key {k} gave {results[op]}, keys {groups[g][1]} gave {groups[g][0]}"
                        groups[g][1].append(k)
                    else:
                        groups[g] = (results[op], [k])
    return groups


def group_sort_key(g):
    ks, op, level, nodes_down, replicas_down = g
    return (ks, nodes_down, replicas_down, OPERATIONS.index(op), LEVELS.index(level))


def group_record(g, result, keys=None):
    ks, op, level, nodes_down, replicas_down = g
    rec = {"keyspace": ks, "rf": KEYSPACES[ks], "nodes_down": nodes_down, "replicas_down": replicas_down,
           "operation": op, "consistency": level, "outcome": result}
    if keys is not None:
        rec["keys"] = len(keys)
    return rec


def down_in_status(status_out):
    """{address: 'UN'|'DN'|...} from `nodetool status` output."""
    state = {}
    for l in status_out.splitlines():
        m = re.match(r"^([UD][NLJM])\s+(\d+\.\d+\.\d+\.\d+)", l)
        if m:
            state[m.group(2)] = m.group(1)
    return state


# ---------------------------------------------------------------- the capture

def nodetool(d, *args, check=True):
    p = subprocess.run([os.path.join(SHARED, "nodetool.sh"), "--dir", d, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"nodetool {' '.join(args)}: {p.stdout}{p.stderr}")
    return p.stdout


def wait_status(d, want, timeout=120):
    """Waits until node1's nodetool status shows exactly `want` {address: UN|DN}."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = down_in_status(nodetool(d, "status", check=False))
        if last == want:
            return time.time()
        time.sleep(0.5)
    raise AssertionError(f"nodetool status: wanted {want}, last saw {last}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kill", action="store_true", help="take nodes down with SIGKILL instead of stop.sh")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    t0 = time.time()
    base = tempfile.mkdtemp(prefix="cass-availability-", dir="/tmp")
    dirs = {n: os.path.join(base, f"c{n}") for n in (1, 2, 3)}
    addr = {n: f"127.0.0.{n}" for n in (1, 2, 3)}
    c = None
    try:
        for n in (1, 2, 3):
            subprocess.run([os.path.join(SHARED, "start.sh"), "--dir", dirs[n], "--address", addr[n],
                            "--seeds", "127.0.0.1", "--heap", "1G", "--port", "9043"], check=True)
        wait_status(dirs[1], {a: "UN" for a in addr.values()})
        print(f"cluster up after {time.time() - t0:.0f}s", flush=True)
        c = Cluster([COORDINATOR], port=9043, execution_profiles=execution_profiles())
        s = c.connect()
        create_schema(s)
        write_all_keys(s)
        endpoints = {ks: {k: parse_endpoints(nodetool(dirs[1], "getendpoints", ks, "t", str(k))) for k in KEYS}
                     for ks in KEYSPACES}
        for ks, rf in KEYSPACES.items():
            for k in KEYS:
                assert len(endpoints[ks][k]) == rf, (ks, k, endpoints[ks][k])
        print("rf1 keys per node:", {a: sum(1 for k in KEYS if endpoints["rf1"][k] == [a]) for a in addr.values()},
              flush=True)
        groups = {}
        down = []
        marked_down_after = []
        for step in range(len(DOWN_ORDER) + 1):
            if step > 0:
                n = DOWN_ORDER[step - 1]
                t = time.time()
                if args.kill:
                    with open(os.path.join(dirs[n], "cassandra.pid")) as f:
                        pid = int(f.read())
                    os.kill(pid, 9)
                    while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
                        time.sleep(0.1)
                else:
                    subprocess.run([os.path.join(SHARED, "stop.sh"), "--dir", dirs[n]], check=True)
                stopped = time.time()
                down.append(addr[n])
                seen = wait_status(dirs[1], {a: ("DN" if a in down else "UN") for a in addr.values()})
                marked_down_after.append(round(seen - stopped, 1))
                print(f"node{n} {'killed' if args.kill else 'stopped'} in {stopped - t:.1f}s, DN on node1 {seen - stopped:.1f}s later", flush=True)
            got = run_state(s, endpoints, set(down), stamp=100 + step)
            assert not set(got) & set(groups)
            groups.update(got)
        c.shutdown()
        c = None
        records = [group_record(g, groups[g][0], groups[g][1]) for g in sorted(groups, key=group_sort_key)]
        with open(args.out, "w") as f:
            f.write("{\n")
            header = {
                "_about": "Seed 003 §3.2 on a real Apache Cassandra 5.0.4 cluster of 3 nodes (127.0.0.1-3, "
                          "num_tokens 16, SimpleStrategy): which reads and writes succeed and which get Unavailable, "
                          "for RF 1 and RF 3, with 0, 1 (node3) and 2 (node3, node2) nodes down. Every statement "
                          "goes through node1 alone (python driver, WhiteListRoundRobinPolicy(['127.0.0.1']), "
                          "FallthroughRetryPolicy, protocol default). Outcomes are per group: keyspace, "
                          "operation, consistency, nodes_down, replicas_down (how many of the key's replicas, by "
                          "nodetool getendpoints with all nodes up, are down); every key of a group gave the same "
                          "outcome; `keys` is how many of the 30 keys (0..29) fell in the group. Written by "
                          "tests/python/capture_cassandra_availability.py, replayed by "
                          "tests/python/test_availability.py.",
                "node_down_method": "kill" if args.kill else "stop",
                "node_down_method_detail": ("SIGKILL (kill -9 of the JVM)" if args.kill else
                                            "graceful stop (stop.sh: SIGTERM; the node announces its shutdown by "
                                            "gossip)") + ", then waiting until node1's nodetool status shows it DN; "
                                           f"seconds from the node's end to DN on node1: {marked_down_after}",
                "down_order": [addr[n] for n in DOWN_ORDER],
                "keys": KEYS,
            }
            for k, v in header.items():
                f.write(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
            f.write(' "groups": [\n')
            f.write(",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in records))
            f.write("\n ]\n}\n")
        json.load(open(args.out))
        print("wrote", args.out, f"({len(records)} groups) in {time.time() - t0:.0f}s")
    finally:
        if c is not None:
            c.shutdown()
        for n in (1, 2, 3):
            subprocess.run([os.path.join(SHARED, "stop.sh"), "--dir", dirs[n]], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
